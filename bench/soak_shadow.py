"""A soak test: a fast shadow loop beside a real personal HTCondor pool with jobs
flowing, for thousands of passes. Resident memory and open file descriptors of the loop
(and of its worker process) must stay flat, and every pass must be in the ledger.

    NEGOTIATOR_EXT_TEST_HTCONDOR=/opt/htcondor python bench/soak_shadow.py [--passes 2000]
                                                                          [--interval 1]

The pool is tests/livepool.py's (4 static 1-core slots and a 4-core partitionable slot,
two groups, NEGOTIATOR_INTERVAL 8 s). Three users submit 1-4 jobs every 10 s, and
running jobs end 10 to 40 s after they started. `negotiator-ext shadow --interval
INTERVAL` runs beside it with the NegotiatorLog and the MatchLog. Every second the loop's
and its worker's resident memory (VmRSS) and open descriptors (/proc/PID/fd) are read.

Printed (JSON): passes in the ledger and the loop's own count of the passes it reported
(one line each on stdout), statuses, and for the loop and the worker the memory and
descriptors after warm-up (the first 10% of the passes), at each tenth of the rest and
at the end, with the largest rise beyond the warm-up figure (the goal: within 10%), the
slope of resident memory in bytes a pass after warm-up and over the second half of the
passes (least squares; for the worker, each process's own, as the loop starts a new
worker every 500 passes: `processes`).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from livepool import SKIP_REASON, find_release, start_pool  # noqa: E402


def rss_kib(pid: int) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


def fds(pid: int) -> int | None:
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return None


def worker_of(pid: int) -> int | None:
    """The loop's worker: its child running negotiator_ext.adapters.worker."""
    try:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return None
    for c in children:
        try:
            if b"negotiator_ext.adapters.worker" in Path(f"/proc/{c}/cmdline").read_bytes():
                return int(c)
        except OSError:
            continue
    return None


def passes_in(ledger: Path) -> int:
    try:
        con = sqlite3.connect(f"file:{ledger}?mode=ro", uri=True)
        try:
            return con.execute("SELECT count(*) FROM passes").fetchone()[0]
        finally:
            con.close()
    except sqlite3.Error:
        return 0


def slope(points: list[tuple[int, int]]) -> float | None:
    """The least-squares slope of (passes, rss KiB) points, in bytes a pass."""
    if len(points) < 2:
        return None
    n = len(points)
    mx = sum(p for p, _ in points) / n
    my = sum(r for _, r in points) / n
    sxx = sum((p - mx) ** 2 for p, _ in points)
    if not sxx:
        return None
    return 1024 * sum((p - mx) * (r - my) for p, r in points) / sxx


def _slope_of_lives(lives) -> float | None:
    """The slope of each process's points, weighted by their number."""
    slopes = [(slope(v), len(v)) for v in lives]
    slopes = [(b, n) for b, n in slopes if b is not None]
    return (sum(b * n for b, n in slopes) / sum(n for _, n in slopes)) if slopes else None


def summary(samples: list[tuple], warm: int) -> dict:
    """(passes so far, rss KiB, fds[, pid]) samples -> the figures after warm-up and at
    the end; the slope (bytes a pass) over each process's samples after warm-up (a
    worker started again is another process: the slope is each one's, weighted by its
    samples)."""
    after = [s for s in samples if s[0] >= warm and s[1] is not None]
    if not after:
        return {}
    base_rss, base_fd = after[0][1], after[0][2]
    lives: dict = {}
    for s in after:
        lives.setdefault(s[3] if len(s) > 3 else None, []).append((s[0], s[1]))
    per_pass = _slope_of_lives(lives.values())
    late = after[0][0] + (after[-1][0] - after[0][0]) // 2
    per_pass_late = _slope_of_lives([[p for p in v if p[0] >= late] for v in lives.values()])
    # the trend: resident memory at each tenth of the run after warm-up
    tenths = [after[min(len(after) - 1, len(after) * k // 10)][1] for k in range(11)]
    return {"rss_mib_after_warmup": round(base_rss / 1024, 1),
            "rss_mib_by_tenth": [round(v / 1024, 1) for v in tenths],
            "rss_mib_end": round(after[-1][1] / 1024, 1),
            "rss_largest_rise_pct": round(100 * (max(s[1] for s in after) / base_rss - 1), 1),
            "rss_bytes_per_pass": None if per_pass is None else round(per_pass),
            "rss_bytes_per_pass_second_half":
                None if per_pass_late is None else round(per_pass_late),
            "processes": len(lives),
            "fds_after_warmup": base_fd, "fds_end": after[-1][2],
            "fds_max": max(s[2] for s in after if s[2] is not None)}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--passes", type=int, default=2000)
    ap.add_argument("--interval", type=float, default=1.0, help="seconds (at least 1)")
    args = ap.parse_args()
    release = find_release()
    if release is None:
        print(SKIP_REASON)
        return 0
    pool = start_pool(release)
    work = Path(tempfile.mkdtemp(prefix="negext-soak-"))
    ledger = work / "state" / "ledger.sqlite"
    rng = random.Random(11)
    out = (work / "out").open("w")
    loop = subprocess.Popen(
        [sys.executable, "-m", "negotiator_ext", "shadow", "--pool", pool.collector,
         "--interval", str(args.interval), "--state-dir", str(work / "state"),
         "--no-advertise", "--negotiator-log", str(pool.log_dir / "NegotiatorLog"),
         "--matchlog", str(pool.log_dir / "MatchLog")],
        env=pool.env, stdout=out, stderr=(work / "err").open("w"))
    users = [("group_a", "ann"), ("group_b", "ben"), ("group_b", "cid")]
    ends: dict[tuple[int, int], float] = {}
    loop_samples, worker_samples = [], []
    t0 = time.monotonic()
    next_submit = 0.0
    try:
        while True:
            n = passes_in(ledger)
            if n >= args.passes or loop.poll() is not None:
                break
            loop_samples.append((n, rss_kib(loop.pid), fds(loop.pid)))
            w = worker_of(loop.pid)
            if w is not None:
                worker_samples.append((n, rss_kib(w), fds(w), w))
            now = time.monotonic()
            if now >= next_submit:
                group, user = rng.choice(users)
                pool.submit(count=rng.randint(1, 4), group=group, user=user)
                next_submit = now + 10
            for cluster, proc in pool.jobs("ClusterId", "ProcId", constraint="JobStatus == 2"):
                key = (int(cluster), int(proc))
                if key not in ends:
                    ends[key] = now + rng.uniform(10, 40)
                elif ends[key] <= now:
                    pool.finish(*key)
                    ends[key] = float("inf")
            time.sleep(1.0)
    finally:
        loop.send_signal(signal.SIGTERM)
        loop.wait(timeout=60)
        out.close()
        pool.stop()
    wall = time.monotonic() - t0
    if not ledger.exists():
        print((work / "err").read_text()[-2000:], file=sys.stderr)
        return 1
    # every sample, for a closer look: (passes so far, rss KiB, fds[, worker pid])
    (work / "samples.json").write_text(json.dumps({"loop": loop_samples,
                                                   "worker": worker_samples}))
    con = sqlite3.connect(ledger)
    statuses = dict(con.execute("SELECT status, count(*) FROM passes GROUP BY status"))
    in_ledger = sum(statuses.values())
    reported = sum(1 for line in (work / "out").read_text().splitlines() if line.strip())
    warm = args.passes // 10
    print(json.dumps({
        "passes_in_ledger": in_ledger, "passes_reported_by_the_loop": reported,
        "statuses": statuses, "minutes": round(wall / 60, 1),
        "loop": summary(loop_samples, warm), "worker": summary(worker_samples, warm),
        "loop_exit_status": loop.returncode, "work_dir": str(work)}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
