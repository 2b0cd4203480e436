"""Benchmark: one negotiation cycle on synthetic pools of several sizes.

    python bench/bench_cycle.py [--sizes 1k,10k,100k] [--repeat N] [--seed 1] [--json]
    python bench/bench_cycle.py --shape groups --sizes 100000x500000 --autoclusters 2000

For each size, a pool is generated with bench/synth.py (cached under bench/.cache/, keyed
by the arguments and by synth.py's own text), then a fresh Python process loads it with
`load_pool` and runs `negotiator_ext.cycle.run_cycle` once. Reported per size: generation
time (0 when cached), load time, cycle wall time (run_cycle only) and its phases,
number of matches, and the child's peak RSS; with --repeat N, the median of N runs. Sizes: 1k = 1,000 slots / 10,000 idle jobs, 10k = 10,000 /
100,000, 100k = 100,000 / 1,000,000 (or SLOTSxJOBS, e.g. 2000x20000). Not a test:
timing targets live here, never in the test suite.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import resource
import shutil
import subprocess
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

CACHE = ROOT / "bench" / ".cache"
SIZES = {"1k": (1_000, 10_000), "10k": (10_000, 100_000), "100k": (100_000, 1_000_000)}
TARGETS = {"10k": {"cycle_s": 5.0, "peak_mib": 1024.0}}   # 10k slots + 100k idle jobs


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024   # KiB on Linux


def child(directory: str) -> None:
    """Runs in a fresh process: load the pool, run one cycle, print one JSON line. As
    `negotiate` does (its process ends with the command): the cyclic collector off."""
    from negotiator_ext import limits
    limits.PROCESS_ENDS = True
    with limits.paused_gc(collect=False):
        _child(directory)


def _child(directory: str) -> None:
    out: dict = {}
    t0 = time.perf_counter()
    from negotiator_ext.pool import load_pool
    pool = load_pool(directory)
    out["load_s"] = time.perf_counter() - t0
    out["load_peak_mib"] = peak_rss_mib()
    out["warnings"] = list(pool.warnings)
    print(json.dumps(out), flush=True)     # the load figures, should the cycle time out
    from negotiator_ext.cycle import run_cycle
    t1 = time.perf_counter()
    try:
        result = run_cycle(pool)
    except Exception as exc:   # report the load figures all the same
        traceback.print_exc()
        out["cycle"] = f"failed ({type(exc).__name__}: {exc})"
    else:
        out["cycle_s"] = time.perf_counter() - t1
        out["matches"] = len(result.matches)
        out["phases"] = result.timings
    out["peak_mib"] = peak_rss_mib()
    print(json.dumps(out))


def parse_size(text: str) -> tuple[str, int, int]:
    if text in SIZES:
        return (text, *SIZES[text])
    slots, _, jobs = text.lower().partition("x")
    if not (slots.isdigit() and jobs.isdigit()):
        raise SystemExit(f"bad size {text!r}: use one of {', '.join(SIZES)} or SLOTSxJOBS")
    return text, int(slots), int(jobs)


def cached_pool(slots: int, jobs: int, seed: int, autoclusters: int, use_cache: bool,
                shape: str = "synth") -> tuple[Path, float]:
    """The pool's directory under bench/.cache/, generated when missing; and the seconds
    generation took (0.0 when it was cached). `shape`: "synth" (bench/synth.py) or
    "groups" (bench/synth_groups.py: 1,000 submitters in 100 groups, alike slots)."""
    if shape == "groups":
        import synth_groups as gen
        prefix = f"groups-s{slots}-j{jobs}-ac{autoclusters}-"
    else:
        import synth as gen
        prefix = f"s{slots}-j{jobs}-seed{seed}-ac{autoclusters}-"
    version = hashlib.sha256(Path(gen.__file__).read_bytes()).hexdigest()[:10]
    directory = CACHE / (prefix + version)
    CACHE.mkdir(parents=True, exist_ok=True)
    for old in CACHE.glob(prefix + "*"):         # pools of an older synth.py
        if old != directory:
            shutil.rmtree(old, ignore_errors=True)
    if use_cache and directory.is_dir():
        return directory, 0.0
    shutil.rmtree(directory, ignore_errors=True)
    tmp = CACHE / f".tmp-{prefix}{version}"
    shutil.rmtree(tmp, ignore_errors=True)
    t = time.perf_counter()
    if shape == "groups":
        gen.generate(tmp, slots=slots, jobs=jobs, autoclusters=autoclusters)
    else:
        gen.generate(tmp, slots=slots, jobs=jobs, seed=seed, autoclusters=autoclusters)
    seconds = time.perf_counter() - t
    tmp.rename(directory)                        # only complete pools are ever cached
    return directory, seconds


def run_size(label: str, slots: int, jobs: int, args) -> dict:
    """One size, `args.repeat` times in fresh processes: the run with the median cycle
    time is reported (this machine's timings vary by 10-20% from run to run), with every
    run's cycle time and the highest peak RSS."""
    directory, gen_s = cached_pool(slots, jobs, args.seed, args.autoclusters, not args.no_cache,
                                   args.shape)
    runs = [_run_once(label, slots, jobs, directory, gen_s, args) for _ in range(max(1, args.repeat))]
    ok = [r for r in runs if "cycle_s" in r]
    if not ok:
        return runs[-1]
    ok.sort(key=lambda r: r["cycle_s"])
    row = ok[(len(ok) - 1) // 2]
    row["cycle_runs"] = [round(r["cycle_s"], 2) for r in runs if "cycle_s" in r]
    row["peak_mib"] = max(r["peak_mib"] for r in ok)
    target = TARGETS.get(label)
    if target:
        row["targets"] = {
            "cycle_s": target["cycle_s"], "peak_mib": target["peak_mib"],
            "cycle_ok": row["cycle_s"] < target["cycle_s"],
            "peak_ok": row["peak_mib"] < target["peak_mib"],
        }
    return row


def _run_once(label: str, slots: int, jobs: int, directory: Path, gen_s: float, args) -> dict:
    row = {"size": label, "slots": slots, "idle_jobs": jobs, "generate_s": gen_s, "pool": str(directory)}
    try:
        proc = subprocess.run([sys.executable, __file__, "--child", str(directory)],
                              stdout=subprocess.PIPE, text=True,   # the child's stderr passes through
                              timeout=args.timeout)
    except subprocess.TimeoutExpired as exc:
        row["error"] = f"timed out after {args.timeout:g} s"
        lines = (exc.stdout or b"").decode().strip().splitlines() if isinstance(exc.stdout, bytes) \
            else (exc.stdout or "").strip().splitlines()
        if lines:
            row.update(json.loads(lines[-1]))
        return row
    if proc.returncode != 0:
        row["error"] = f"the child process failed (exit code {proc.returncode}); its output is above"
        return row
    row.update(json.loads(proc.stdout.strip().splitlines()[-1]))
    return row


def print_table(rows: list[dict]) -> None:
    def num(v, fmt):
        width = int(fmt.split(".")[0].rstrip("df"))
        return format(v, fmt) if isinstance(v, (int, float)) else "-".rjust(width)

    head = (f"{'size':>6} {'slots':>8} {'jobs':>9} {'gen s':>7} {'load s':>7} {'load MiB':>9} "
            f"{'cycle s':>8} {'matches':>8} {'peak MiB':>9}  target")
    print(head)
    print("-" * len(head))
    for r in rows:
        t = r.get("targets")
        note = ""
        if t:
            ok = {True: "ok", False: "MISSED"}
            note = (f"cycle < {t['cycle_s']:g} s: {ok[t['cycle_ok']]}; "
                    f"peak < {t['peak_mib'] / 1024:g} GiB: {ok[t['peak_ok']]}")
        print(f"{r['size']:>6} {r['slots']:>8} {r['idle_jobs']:>9} {num(r['generate_s'], '7.2f')} "
              f"{num(r.get('load_s'), '7.2f')} {num(r.get('load_peak_mib'), '9.0f')} "
              f"{num(r.get('cycle_s'), '8.2f')} {num(r.get('matches'), '8d')} "
              f"{num(r.get('peak_mib'), '9.0f')}  {note}")
        if len(r.get("cycle_runs", ())) > 1:
            print("       cycle s of each run: " + ", ".join(f"{x:.2f}" for x in r["cycle_runs"])
                  + " (the median run is shown)")
        if r.get("phases"):
            print("       phases (s): " + ", ".join(f"{k} {v:.2f}" for k, v in r["phases"].items()))
        if "error" in r:
            print(f"       error: {r['error']}")
        elif "cycle" in r:
            print(f"       cycle {r['cycle']}")
        for w in r.get("warnings", []):
            print(f"       warning: {w}")
    print("(gen s 0.00: pool taken from bench/.cache/; load MiB / peak MiB: the child process's max RSS\n"
          " after load_pool / at the end, load included)")


def main() -> None:
    if len(sys.argv) == 3 and sys.argv[1] == "--child":
        child(sys.argv[2])
        return
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="1k,10k", help="comma-separated: 1k, 10k, 100k or SLOTSxJOBS")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--autoclusters", type=int, default=300)
    ap.add_argument("--shape", choices=("synth", "groups"), default="synth",
                    help="synth: bench/synth.py's mixed pool; groups: bench/synth_groups.py's "
                         "1,000 submitters in 100 groups on alike slots (issue 15's shape)")
    ap.add_argument("--no-cache", action="store_true", help="regenerate even when cached")
    ap.add_argument("--json", action="store_true", help="print the results as JSON")
    ap.add_argument("--repeat", type=int, default=1,
                    help="runs per size; the median cycle time is reported (default 1)")
    ap.add_argument("--timeout", type=float, default=None, help="seconds allowed per size (load + cycle)")
    args = ap.parse_args()
    rows = []
    for label, slots, jobs in map(parse_size, args.sizes.split(",")):
        print(f"{label}: {slots} slots, {jobs} idle jobs ...", file=sys.stderr, flush=True)
        rows.append(run_size(label, slots, jobs, args))
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        print_table(rows)


if __name__ == "__main__":
    main()
