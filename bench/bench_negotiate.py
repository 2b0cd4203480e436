"""`negotiator-ext negotiate --json` on a snapshot from its files: wall time, and where it goes.

    python bench/bench_negotiate.py SNAPSHOT [--repeat N]

SNAPSHOT is a snapshot directory, for example issue 15's 11k pool kept by
`bench/bench_real_pool.py --shape 11k --keep-snapshot /tmp/neg11k` (then
/tmp/neg11k/11k). Each run is a fresh process, as an admin runs the command; the wall
times (min / median / max of N) and the peak RSS are printed against issue 15's target
for that pool (11k: 3 s). Then one run in this process, step by step: the slot ads
parsed here, the wait for the job files' child (adapters/beside.py) and for the
config's child (condor_config.ConfigRead), the pool, the cycle's phases, the JSON
document, and what the command's end costs (the garbage collector switched back on
over everything the pass made, then freeing it). A benchmark, not a test.
"""

from __future__ import annotations

import argparse
import gc
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

TARGET_S = 3.0          # issue 15: 11k-slot pool, reading included


def fresh_runs(snapshot: Path, repeat: int) -> tuple[list[float], int]:
    walls, rss = [], 0
    for _ in range(repeat):
        proc = subprocess.run(["/usr/bin/time", "-f", "TIME %e %M", sys.executable, "-m",
                               "negotiator_ext", "negotiate", str(snapshot), "--json"],
                              capture_output=True, text=True, cwd=ROOT)
        m = re.search(r"^TIME (\S+) (\d+)$", proc.stderr, re.M)
        if proc.returncode not in (0, 1) or m is None:
            raise SystemExit(f"negotiate failed: {proc.stderr[-1000:]}")
        walls.append(float(m.group(1)))
        rss = max(rss, int(m.group(2)))
    return walls, rss


def steps(snapshot: Path) -> dict[str, float]:
    """One negotiate, in this process, timed step by step."""
    from negotiator_ext.adapters import adfiles, beside, condor_config, snapshot as snap_mod
    from negotiator_ext.cycle import run_cycle
    from negotiator_ext.pool import load_pool
    from negotiator_ext.views.jsondoc import document
    out: dict[str, float] = {}

    def timed(name, fn):
        def wrapper(*a, **k):
            t = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                out[name] = round(out.get(name, 0.0) + time.perf_counter() - t, 3)
        return wrapper

    snap_mod.read_ads_and_texts = timed("read: slot ads parsed here", adfiles.read_ads_and_texts)
    beside.Beside.result = timed("read: wait for the job files' child", beside.Beside.result)
    condor_config.ConfigRead.result = timed("config: wait for its child",
                                            condor_config.ConfigRead.result)
    gc.disable()
    t0 = time.perf_counter()
    pool = load_pool(snapshot)
    t1 = time.perf_counter()
    result = run_cycle(pool)
    t2 = time.perf_counter()
    text = document(result.to_json())
    t3 = time.perf_counter()
    out["load_pool (all reading, the pool)"] = round(t1 - t0, 3)
    out.update({f"cycle: {k}": v for k, v in result.timings.items()})
    out["cycle (all)"] = round(t2 - t1, 3)
    out["JSON document"] = round(t3 - t2, 3)
    gc.enable()
    t4 = time.perf_counter()
    gc.collect(0)                       # what the first allocation after enabling does
    t5 = time.perf_counter()
    del pool, result, text
    t6 = time.perf_counter()
    out["end: young collection over the pass"] = round(t5 - t4, 3)
    out["end: freeing the pass"] = round(t6 - t5, 3)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("snapshot", type=Path)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args(argv)
    walls, rss = fresh_runs(args.snapshot, args.repeat)
    print(f"negotiate --json {args.snapshot}: wall min {min(walls):.2f} / median "
          f"{statistics.median(walls):.2f} / max {max(walls):.2f} s over {len(walls)} runs "
          f"(target {TARGET_S:g} s on issue 15's 11k pool), peak RSS {rss / 1024:.0f} MiB")
    for name, secs in steps(args.snapshot).items():
        print(f"  {name:40} {secs:7.3f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
