"""Benchmark: the fairness audit of a day of one-minute shadow passes at 1,000 submitters.

    python bench/bench_audit.py [--submitters 1000] [--groups 100] [--hours 24]
                                [--interval 60] [--ledger PATH] [--keep DIR]

The ledger is synthesized, not simulated (a simulation of 1,000 submitters for a day
takes far longer than the audit being measured): PassRecords written through
`Ledger.record_passes` as a shadow loop's would be, a pass every --interval seconds for
--hours, each with every submitter (and each group's own record), every group, about 30
of our matches and 30 real ones with their queue waits (a few preempting), and a
comparison with the pass before naming the submitters matched. The pool (2,000 slot-weight
units) has --groups groups of equal size; their static quotas add up to 2,900 (the
first tenth 110 each, the rest share 1,800), so the real negotiator scales them down
to the pool; one group has quota 0 and demand and never gets anything; one submitter has
Ceiling 0; usage wanders deterministically (a seeded random walk) around each group's
quota. The ledger is cached at --ledger (default bench/.cache/audit-<shape>.sqlite) and
made again only when missing.

Then `negotiator-ext audit` runs on it in a child process, and the bench reports its wall
time, its peak RSS (the child's ru_maxrss) and the bytes it wrote (every file of the
report). Goals (issue 35): <= 30 s, <= 500 MB of memory, <= 50 MB written. Not a test:
timing goals live here, never in the test suite.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

GOALS = {"wall_s": 30.0, "peak_rss_mb": 500.0, "written_mb": 50.0}
POOL = "bench-audit.example.org:9618"
POOL_WEIGHT = 2000.0
T0 = 1_767_225_600                      # 2026-01-01T00:00:00Z


def quotas(groups: int) -> list[float]:
    """Static quotas adding up to 2,900 on the 2,000-unit pool: the first tenth 110 each,
    the others 1,800 among them; the last group 0."""
    big = max(1, groups // 10)
    rest = groups - big - 1
    q = [1100.0 / big] * big + [1800.0 / max(rest, 1)] * rest + [0.0]
    return q[:groups]


def synthesize(path: Path, *, submitters: int, groups: int, hours: float,
               interval: int) -> int:
    """Write the ledger at `path` (see the module docstring); the passes written."""
    import numpy as np
    from negotiator_ext.adapters.ledger import open_ledger
    from negotiator_ext.core.records import (Comparison, GroupObs, MatchEntry, PassRecord,
                                             SubmitterObs)
    rng = np.random.default_rng(35)
    per = submitters // groups
    gnames = [f"grp{g:02d}" for g in range(groups)]
    names = [f"{gnames[i // per]}.u{i:04d}@sim.local" for i in range(per * groups)]
    cq = quotas(groups)
    scale = min(1.0, POOL_WEIGHT / sum(cq))
    eq = [q * scale for q in cq]
    n = len(names)
    gi = np.arange(n) // per
    # usage wanders around each submitter's part of its group's quota
    base = np.array([eq[g] / per for g in gi]) * rng.uniform(0.4, 1.6, n)
    base[gi == groups - 1] = 0.0                       # quota 0 and nothing got
    factor = np.where(rng.random(n) < 0.05, 10.0, 1.0)
    ceiling = np.full(n, -1)
    ceiling[per // 2] = 0                              # blocked by its ceiling
    rup = base * factor + 1.0
    passes = int(hours * 3600 // interval)
    prev = None
    batch = []
    with open_ledger(str(path)) as ledger:
        for i in range(passes):
            t = T0 + i * interval
            use = np.maximum(0.0, base * (1 + 0.3 * np.sin(i / 90 + gi)) + rng.normal(0, 0.3, n))
            use[gi == groups - 1] = 0.0
            use[per // 2] = 0.0
            use = np.round(use)
            idle = rng.integers(0, 6, n)
            rup = rup * 0.99 + use * factor * 0.01
            subs = [SubmitterObs(name=names[k], group=gnames[gi[k]], is_group=False,
                                 factor=float(factor[k]), policy_factor=float(factor[k]),
                                 ceiling=int(ceiling[k]), real_rup=float(rup[k]),
                                 real_eup=float(rup[k] * factor[k]),
                                 real_usage=float(use[k]), resources_used=float(use[k]),
                                 claimed_weight=float(use[k]), idle_jobs=int(idle[k]),
                                 running_jobs=int(use[k]),
                                 shadow_eup=float(rup[k] * factor[k]),
                                 predicted_rup=float(rup[k] * 1.001), drift=-0.001)
                    for k in range(n)]
            gsum = np.bincount(gi, weights=use, minlength=groups)
            gidle = np.bincount(gi, weights=idle, minlength=groups)
            subs += [SubmitterObs(name=g, group=g, is_group=True, factor=1.0,
                                  real_usage=float(gsum[j]), real_rup=float(gsum[j]),
                                  real_eup=float(gsum[j])) for j, g in enumerate(gnames)]
            grps = [GroupObs(name=g, real_quota=eq[j], config_quota=cq[j],
                             real_usage=float(gsum[j]),
                             real_requested=float(gsum[j] + gidle[j]), shadow_quota=eq[j])
                    for j, g in enumerate(gnames)]
            who = rng.choice(n, min(30, n), replace=False)
            ours = tuple(MatchEntry(job=f"{i}.{k}", submitter=names[k], slot=f"slot{k}@n{i}",
                                    group=gnames[gi[k]], wait=float(rng.exponential(600)),
                                    preempting=names[(k + 1) % n] if k % 13 == 0 else None)
                         for k in who)
            real = tuple(MatchEntry(job=m.job, submitter=m.submitter, slot=m.slot,
                                    group=m.group, wait=m.wait, time=t) for m in ours[:max(1, len(ours) - 2)])
            comp = None if prev is None else Comparison(
                shadow_pass=prev, real_cycle_time=t, real_cycles_between=1,
                real_matches=len(real), shadow_matches=len(ours), agreed=len(real) - 1,
                real_in_shadow=(len(real) - 1) / len(real),
                shadow_in_real=(len(real) - 1) / len(ours),
                count_agreement=len(real) / len(ours), source="matchlog",
                per_submitter={m.submitter: {"real": 1, "shadow": 1} for m in ours},
                max_abs_drift=0.001)
            uuid = f"{i:08x}-0000-4000-8000-{i:012x}"
            batch.append(PassRecord(uuid=uuid, pool=POOL, started_at=float(t),
                                    finished_at=float(t + 5), snapshot_time=t,
                                    status="complete", reason=None, real_cycle_time=t,
                                    real_accountant_time=t, shadow_duration=1.0,
                                    capture_duration=1.0, pool_weight=POOL_WEIGHT,
                                    shadow_matches=ours, real_matches=real,
                                    submitters=tuple(subs), groups=tuple(grps),
                                    comparison=comp, comparable=True))
            prev = uuid
            if len(batch) == 60:
                ledger.record_passes(batch)
                batch = []
                print(f"\r{i + 1}/{passes} passes written", end="", file=sys.stderr)
        if batch:
            ledger.record_passes(batch)
    print(file=sys.stderr)
    return passes


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--submitters", type=int, default=1000)
    ap.add_argument("--groups", type=int, default=100)
    ap.add_argument("--hours", type=float, default=24.0)
    ap.add_argument("--interval", type=int, default=60)
    ap.add_argument("--ledger", help="the synthesized ledger (made when missing)")
    ap.add_argument("--keep", help="write the report here (default: a temporary directory)")
    args = ap.parse_args(argv)
    shape = f"{args.submitters}s-{args.groups}g-{args.hours:g}h-{args.interval}s"
    ledger = Path(args.ledger or ROOT / "bench" / ".cache" / f"audit-{shape}.sqlite")
    if not ledger.exists():
        ledger.parent.mkdir(parents=True, exist_ok=True)
        t0 = time.perf_counter()
        tmp = ledger.with_suffix(".part")
        tmp.unlink(missing_ok=True)
        synthesize(tmp, submitters=args.submitters, groups=args.groups, hours=args.hours,
                   interval=args.interval)
        tmp.rename(ledger)
        print(f"ledger synthesized in {time.perf_counter() - t0:.0f} s: {ledger} "
              f"({ledger.stat().st_size / 1e6:.0f} MB)", file=sys.stderr)
    with tempfile.TemporaryDirectory() as tmpd:
        out = Path(args.keep) if args.keep else Path(tmpd) / "report"
        cmd = [sys.executable, "-m", "negotiator_ext.cli", "audit", "--ledger", str(ledger),
               "--pool", POOL, "-o", str(out)]
        env = {**os.environ, "CONDOR_CONFIG": "/dev/null"}
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
        wall = time.perf_counter() - t0
        if proc.returncode:
            print(proc.stderr, file=sys.stderr)
            return proc.returncode
        rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        files = [p for p in out.rglob("*") if p.is_file()]
        written = sum(p.stat().st_size for p in files)
        biggest = sorted(files, key=lambda p: -p.stat().st_size)[:5]
        doc = {"submitters": args.submitters, "groups": args.groups, "hours": args.hours,
               "interval_s": args.interval, "ledger_mb": round(ledger.stat().st_size / 1e6),
               "wall_s": round(wall, 1), "peak_rss_mb": round(rss),
               "written_mb": round(written / 1e6, 1), "files": len(files),
               "largest": {str(p.relative_to(out)): round(p.stat().st_size / 1e6, 1)
                           for p in biggest},
               "load_average": round(os.getloadavg()[0], 1), "goals": GOALS}
        doc["met"] = (wall <= GOALS["wall_s"] and rss <= GOALS["peak_rss_mb"]
                      and written / 1e6 <= GOALS["written_mb"])
    print(json.dumps(doc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
