"""What-if replay of recorded snapshots (`replay:` in a scenario): each snapshot is one
shadow pass under the changed config, beside what the real negotiator did. Open loop:
the changed policy's matches never feed the next snapshot (a forecast closes the loop).
"""

from __future__ import annotations

import time as _time
from pathlib import Path

from ..errors import InputError
from ..scenario import Scenario
from .engine import SimReport, config_with_knobs

def replay_what_if(sc: Scenario, ledger_url: str) -> SimReport:
    """Re-run recorded snapshots under the scenario's config (`replay:` in the scenario):
    each snapshot is one shadow pass (`shadow.ShadowLoop`, replay mode) whose cycle runs
    under the scenario's config file (else the snapshot's own config) with its knobs
    appended, beside what the real negotiator did, so `ledger show` and `audit` compare
    the changed policy with the real one. Snapshots a shadow ledger names but that are no
    longer on disk are skipped (counted in the report)."""
    import tempfile
    from ..adapters.ledger import open_ledger
    from ..adapters.snapshot import read_meta
    from ..shadow import ShadowLoop
    from ..shadow_state import ShadowSettings
    dirs = list(sc.replay_snapshots)
    if sc.replay_ledger:
        with open_ledger(sc.replay_ledger, create=False) as src:
            pools = src.pools()
            pool = sc.replay_pool or (pools[0] if len(pools) == 1 else None)
            if pool is None:
                raise InputError(sc.replay_ledger, "holds several pools "
                                 f"({', '.join(pools)}): name one with replay.pool")
            dirs = [Path(p["snapshot_dir"]) for p in src.passes(pool)
                    if p.get("snapshot_dir") and p["status"] != "failed"]
    present = [d for d in dirs if (d / "meta.json").is_file() or (d / "slots.ads").is_file()]
    if not present:
        raise InputError(str(sc.path), "replay: none of the recorded snapshots is on disk "
                         f"({len(dirs)} named)")
    present.sort(key=lambda d: int(read_meta(d).get("captured_at") or 0))
    wall0 = _time.perf_counter()
    matches = 0
    loops: dict[Path | None, ShadowLoop] = {}     # one per base config file
    with tempfile.TemporaryDirectory(prefix="negotiator-ext-whatif-") as tmp:
        for d in present:
            own = d / "config"
            base = sc.config_path or (own if own.is_file() else None)
            if base not in loops:
                cfg = Path(config_with_knobs(base, dict(sc.knobs), tmp))
                loops[base] = ShadowLoop(ShadowSettings.from_knobs(
                    {"STATE_DIR": tmp, "ADVERTISE": "false", "METRICS_FILE": ""},
                    ledger_url=ledger_url, pool=sc.pool_name, cycle_config=cfg))
            matches += len(loops[base].run_pass(replay=d).shadow_matches)
    return SimReport(passes=len(present), matches=matches, preemptions=0, span=0.0,
                     wall=_time.perf_counter() - wall0, ledger=ledger_url,
                     skipped=len(dirs) - len(present))
