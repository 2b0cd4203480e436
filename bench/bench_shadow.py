"""Benchmark: shadow passes on a synthetic pool, the ledger included.

    python bench/bench_shadow.py [--size 10k] [--passes 3] [--seed 1]

A pool is generated with bench/synth.py (cached under bench/.cache/, as bench_cycle.py
does), then `negotiator-ext shadow --replay` is run in-process on N copies of it with
capture times one minute apart: each pass loads the snapshot, runs our cycle, observes
the real side (the synthetic pool has no negotiator ad: each pass is partial on the real
side but its cycle is compared by the next one), compares and writes the ledger. Reported:
wall time per pass and its parts, ledger size per pass, peak RSS. What a live pass adds
(the bindings' queries and writing the snapshot files) is not included. Not a test:
timing targets live here, never in the test suite.
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_cycle import SIZES, cached_pool  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", default="10k", choices=sorted(SIZES))
    ap.add_argument("--passes", type=int, default=3)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args(argv)
    slots, jobs = SIZES[args.size]
    src, _ = cached_pool(slots, jobs, args.seed, 300, True)

    from negotiator_ext.adapters.ledger import open_ledger
    from negotiator_ext.shadow import ShadowLoop
    from negotiator_ext.shadow_state import ShadowSettings

    work = Path(tempfile.mkdtemp(prefix="bench-shadow-"))
    try:
        t0 = json.loads((src / "meta.json").read_text())["captured_at"]
        dirs = []
        for i in range(args.passes):
            d = work / f"snap{i}"
            shutil.copytree(src, d)
            meta = json.loads((d / "meta.json").read_text())
            meta["captured_at"] = t0 + 60 * i
            (d / "meta.json").write_text(json.dumps(meta))
            dirs.append(d)
        ledger = work / "ledger.sqlite"
        settings = ShadowSettings.from_knobs({"STATE_DIR": str(work), "ADVERTISE": "false"},
                                             ledger_url=str(ledger))
        loop = ShadowLoop(settings)
        rows = []
        for d in dirs:
            start = time.perf_counter()
            rec = loop.run_pass(replay=d)
            wall = time.perf_counter() - start
            rows.append({"pass": rec.uuid[:8], "status": rec.status, "wall_s": round(wall, 2),
                         "cycle_s": rec.shadow_duration,
                         "rest_s": round(wall - (rec.shadow_duration or 0), 2),
                         "shadow_matches": len(rec.shadow_matches),
                         "ledger_mib": round(ledger.stat().st_size / 2**20, 2)})
            print(json.dumps(rows[-1]), flush=True)
        with open_ledger(str(ledger)) as led:
            assert led.verify() == []
        print(json.dumps({"size": args.size, "passes": args.passes,
                          "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)}))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
