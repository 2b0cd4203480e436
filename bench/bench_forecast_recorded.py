"""`forecast` against the real runs of tests/data/forecast/: for the static and the
partitionable pool, the error of a forecast of run A1 (from its snapshot and history,
under its config) against what A1 really did, with the whole model and with each of its
parts turned off, beside the noise floor (the same metric between the two real runs
under the same config), and the prediction of run B (A1's start and history under B's
config) against B. The metric is `core.forecast.usage_error` over 5-minute buckets, per
submitter and per group. `python bench/bench_forecast_recorded.py` prints a Markdown table.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from test_forecast_recorded import (BUCKET, DATA, errors, meta, real,  # noqa: E402
                                    workload)

from negotiator_ext.sim.forecast import ForecastSpec, run_forecast  # noqa: E402

PARTS = [("whole model", {}),
         ("no claim reuse (CLAIM_WORKLIFE = 0)", {"knobs": {"CLAIM_WORKLIFE": "0"}}),
         ("no partitionable leftovers",
          {"knobs": {"CLAIM_PARTITIONABLE_LEFTOVERS": "false"}}),
         ("a cycle every 60 s (no reschedules)", {"interval": 60})]


def main() -> None:
    print("| pool | forecast | against | submitters | groups | cycles | matches | seconds |")
    print("|---|---|---|---|---|---|---|---|")
    for kind in ("static", "pslot"):
        a1, a2, b = real(f"{kind}-A1"), real(f"{kind}-A2"), real(f"{kind}-B")
        m = meta(f"{kind}-A1")
        runs = [(f"A1 under A, {label}", f"{kind}-A1", kw, a1) for label, kw in PARTS]
        runs.append(("A1 under B, whole model", f"{kind}-B", {}, b))
        for label, config_of, kw, against in runs:
            t0 = time.perf_counter()
            f = run_forecast(ForecastSpec(snapshot=DATA / f"{kind}-A1" / "snapshot",
                                          history=workload(f"{kind}-A1"),
                                          config=DATA / config_of / "config",
                                          until=m["end_time"], bucket=BUCKET, **kw))
            wall = time.perf_counter() - t0
            e = errors(f.outcome, against)
            real_run = "A1" if against is a1 else "B"
            print(f"| {kind} | {label} | {real_run} | {e[0]:.1%} | {e[1]:.1%} | {f.cycles} | "
                  f"{f.matches} | {wall:.1f} |")
        for label, x in (("real A2 (the noise floor)", a2),
                         ("real B (what config B changes)", b)):
            e = errors(x, a1)
            print(f"| {kind} | {label} | A1 | {e[0]:.1%} | {e[1]:.1%} | | | |")


if __name__ == "__main__":
    main()
