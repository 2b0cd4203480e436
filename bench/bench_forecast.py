"""`forecast` at site scale: a day of a synthetic 10,000-slot pool (bench/synth.py: static
and partitionable slots, 30% claimed, 32 submitters in groups, 3 schedds) with a day of
history of real-sized jobs, forecast on one core; optionally a local sweep of N configs.

    python bench/bench_forecast.py [--slots 10000] [--history-jobs 120000] [--hours 24]
                                   [--forecast-hours H] [--sweep N] [--keep DIR]

The history is the snapshot's own idle jobs copied forward (their ads, new cluster ids),
arriving evenly over the day, each having run 10-120 minutes (seeded). Prints the
forecast's wall and CPU time, cycles, matches, jobs started and peak memory (and the sweep's
wall time on this machine's cores, `negotiator-ext sweep` run as a command of its own).
"""

from __future__ import annotations

import argparse
import json
import random
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import synth  # noqa: E402

_DROP = re.compile(r"^(JobStatus|EnteredCurrentStatus|QDate|ClusterId|ProcId|GlobalJobId|"
                   r"RemoteHost|JobCurrentStartDate|CompletionDate) =")


def write_history(snapshot: Path, out: Path, n_jobs: int, hours: float, seed: int) -> int:
    """n_jobs history ads made from the snapshot's idle job ads."""
    rng = random.Random(seed)
    templates = []
    for f in sorted(snapshot.glob("jobs*.ads")):
        for block in f.read_text().split("\n\n"):
            if "JobStatus = 1" in block:
                schedd = re.search(r'^GlobalJobId = "([^#]+)#', block, re.M)
                lines = [ln for ln in block.splitlines() if ln and not _DROP.match(ln)]
                templates.append(("\n".join(lines), schedd.group(1) if schedd else "schedd"))
    t0 = synth.T0
    span = hours * 3600
    with open(out, "w") as f:
        for i in range(n_jobs):
            body, schedd = templates[i % len(templates)]
            cluster, proc = 100000 + i // 10, i % 10
            q = int(t0 + span * i / n_jobs)
            start = q + 60
            run = rng.randint(600, 7200)
            f.write(f"{body}\nClusterId = {cluster}\nProcId = {proc}\nQDate = {q}\n"
                    f'GlobalJobId = "{schedd}#{cluster}.{proc}#{q}"\nJobStatus = 4\n'
                    f"EnteredCurrentStatus = {start + run}\nJobCurrentStartDate = {start}\n"
                    f"CompletionDate = {start + run}\n\n")
    return n_jobs


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--slots", type=int, default=10000)
    ap.add_argument("--queued", type=int, default=20000, help="idle jobs in the snapshot")
    ap.add_argument("--history-jobs", type=int, default=120000)
    ap.add_argument("--hours", type=float, default=24, help="the history's span")
    ap.add_argument("--forecast-hours", type=float,
                    help="forecast only the first H hours of it (default: all)")
    ap.add_argument("--sweep", type=int, default=0, help="also a local sweep of N configs")
    ap.add_argument("--keep", metavar="DIR", help="build the inputs here and keep them")
    args = ap.parse_args()
    from negotiator_ext.sim.forecast import ForecastSpec, run_forecast
    with tempfile.TemporaryDirectory(prefix="bench-forecast-") as tmp:
        root = Path(args.keep or tmp)
        snap, hist = root / "snapshot", root / "history.ads"
        if not (snap / "meta.json").is_file():
            t = time.perf_counter()
            synth.generate(snap, slots=args.slots, jobs=args.queued, seed=1)
            write_history(snap, hist, args.history_jobs, args.hours, seed=1)
            print(f"inputs: {args.slots} slots, {args.queued} queued, {args.history_jobs} "
                  f"history jobs in {time.perf_counter() - t:.1f} s", flush=True)
        t = time.perf_counter()
        hours = args.forecast_hours or args.hours
        cpu = time.process_time()
        run = run_forecast(ForecastSpec(snapshot=snap, history=(hist,), hours=hours))
        wall = time.perf_counter() - t
        cpu = time.process_time() - cpu
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        started = sum(s["jobs_started"] for s in run.outcome.submitters)
        print(json.dumps({"forecast_seconds": round(wall, 1), "cpu_seconds": round(cpu, 1),
                          "hours": hours, "cycles": run.cycles,
                          "cycles_rerun": run.cycles_rerun,
                          "negotiator_matches": run.matches, "reused": run.reused,
                          "leftovers": run.by_leftovers, "jobs_started": started,
                          "arrivals": run.counts.get("arrivals"),
                          "peak_mib": round(peak)}), flush=True)
        if args.sweep:
            # the command an admin runs, in a process of its own (not forked from this
            # one, which holds a forecast's worth of memory)
            t = time.perf_counter()
            values = ",".join(str(h) for h in range(3600, 3600 * (args.sweep + 1), 3600))
            subprocess.run([sys.executable, "-m", "negotiator_ext", "sweep", str(snap),
                            "--history", str(hist), "--hours", str(args.hours), "--vary",
                            f"PRIORITY_HALFLIFE={values}", "-o", str(root / "sweep")],
                           check=True)
            print(json.dumps({"sweep_configs": args.sweep + 1,
                              "sweep_seconds": round(time.perf_counter() - t, 1)}))


if __name__ == "__main__":
    main()
