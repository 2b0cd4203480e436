"""A shadow loop beside a real personal HTCondor pool, with jobs flowing: how many real
cycles it sees and compares, how well they agree, and how long a pass takes.

    NEGOTIATOR_EXT_TEST_HTCONDOR=/opt/htcondor python bench/bench_live_shadow.py [MINUTES [EVERY]]

The pool is tests/livepool.py's (4 static 1-core slots and a 4-core partitionable slot,
groups group_a and group_b with quota 4 each and surplus, NEGOTIATOR_INTERVAL 8 s, the
negotiator ad at its default cadence: NEGOTIATOR_UPDATE_INTERVAL 300 s). Three users
submit jobs that each run 20 to 60 s (ending at random times, not in step with the
cycles) and new jobs arrive every EVERY seconds (16 by default); `negotiator-ext shadow --interval 2` runs beside
it with the NegotiatorLog and the MatchLog. At the end the ledger is read: real cycles
seen, cycles with matches, compared, per-submitter agreement, pass times.

A real cycle whose pool changed between the shadow's last capture and the cycle's start
(a job ended or was submitted in those seconds) can differ from our cycle on the
snapshot without either being wrong: the ledger classifies each disagreeing submitter
(core/disagreement.py) as "pool changed" (the change named), "out of time" or
"unexplained", and the figures give the unexplained agreement beside the raw one, the
compared cycles that had such changes, and how many were compared with a capture the
loop took as the cycle started (aligned by the NegotiatorLog; an aligned capture that
the cycle's own matches reached first is not compared: `late_captures`). The
*undisturbed* cycles (no submission or job end from 3 s before the compared capture to
the cycle's start, by the benchmark's own clock) are counted separately too.
"""

from __future__ import annotations

import json
import random
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from livepool import SKIP_REASON, find_release, start_pool  # noqa: E402


def main() -> int:
    minutes = float(sys.argv[1]) if len(sys.argv) > 1 else 3.0
    every = float(sys.argv[2]) if len(sys.argv) > 2 else 16.0
    release = find_release()
    if release is None:
        print(SKIP_REASON)
        return 0
    pool = start_pool(release)
    work = Path(tempfile.mkdtemp(prefix="negext-bench-"))
    ledger = work / "state" / "ledger.sqlite"
    rng = random.Random(7)
    loop = subprocess.Popen(
        [sys.executable, "-m", "negotiator_ext", "shadow", "--pool", pool.collector,
         "--interval", "2", "--state-dir", str(work / "state"), "--no-advertise",
         "--negotiator-log", str(pool.log_dir / "NegotiatorLog"),
         "--matchlog", str(pool.log_dir / "MatchLog")],
        # every snapshot kept, to look into a cycle left unexplained afterwards
        env={**pool.env, "_CONDOR_NEGOTIATOR_EXT_KEEP_SNAPSHOTS": "0"},
        stdout=(work / "out").open("w"), stderr=(work / "err").open("w"))
    ends: dict[tuple[int, int], float] = {}
    events: list[float] = []            # wall times of submissions and job ends
    users = [("group_a", "ann"), ("group_b", "ben"), ("group_b", "cid")]
    t_end = time.monotonic() + minutes * 60
    next_submit = 0.0
    try:
        while time.monotonic() < t_end:
            now = time.monotonic()
            if now >= next_submit:
                group, user = rng.choice(users)
                events.append(time.time())
                pool.submit(count=rng.randint(1, 4), group=group, user=user)
                events.append(time.time())
                next_submit = now + every
            for cluster, proc in pool.jobs("ClusterId", "ProcId", constraint="JobStatus == 2"):
                key = (int(cluster), int(proc))
                if key not in ends:
                    ends[key] = now + rng.uniform(20, 60)
                elif ends[key] <= now:
                    events.append(time.time())
                    pool.finish(*key)
                    ends[key] = float("inf")
            time.sleep(0.5)
    finally:
        loop.send_signal(signal.SIGTERM)
        loop.wait(timeout=60)
        pool.stop()
    con = sqlite3.connect(ledger)
    con.row_factory = sqlite3.Row
    passes = con.execute("SELECT * FROM passes ORDER BY started_at").fetchall()
    first, last = passes[0]["started_at"], passes[-1]["started_at"]
    cycles = con.execute("SELECT * FROM real_cycles WHERE time > ? AND time < ? ORDER BY time",
                         (first, last)).fetchall()
    comps = {r["real_cycle_time"]: r for r in con.execute(
        "SELECT * FROM comparisons WHERE source = 'matchlog'")}
    with_matches = [c for c in cycles if c["matches"]]
    compared = [c for c in with_matches if c["time"] in comps]
    agree = [c for c in compared if comps[c["time"]]["count_agreement"] == 1.0]
    started = {p["uuid"]: p["started_at"] for p in passes}

    def undisturbed(c) -> bool:
        """No job submitted or ended between the compared capture and the cycle (a job's
        end reaches the collector a second or two after its flag)."""
        t0 = started[comps[c["time"]]["shadow_pass"]] - 3
        return not any(t0 <= e < c["time"] + 1 for e in events)
    quiet = [c for c in compared if undisturbed(c)]

    def comp(c):
        return comps[c["time"]]

    def classes(c) -> list[str]:
        return [d["class"] for d in json.loads(comp(c)["disagreements"] or "[]")]
    unexplained = [comp(c)["unexplained_agreement"] for c in compared
                   if comp(c)["unexplained_agreement"] is not None]
    durations = [p["finished_at"] - p["started_at"] for p in passes if p["status"] == "complete"]
    report = {
        "minutes": minutes,
        "arrivals_every_seconds": every,
        "passes": len(passes),
        "passes_complete": sum(p["status"] == "complete" for p in passes),
        "real_cycles_seen": len(cycles),
        "real_cycles_with_matches": len(with_matches),
        "compared": len(compared),
        "compared_fraction": round(len(compared) / len(with_matches), 3) if with_matches else None,
        "per_submitter_counts_agree": len(agree),
        "unexplained_agreement_mean": (round(statistics.mean(unexplained), 4)
                                       if unexplained else None),
        "unexplained_agreement_min": min(unexplained) if unexplained else None,
        "compared_with_pool_changes": sum(1 for c in compared
                                          if json.loads(comp(c)["changes"] or "[]")),
        "disagreeing_explained": sum(1 for c in compared if classes(c)
                                     and "unexplained" not in classes(c)),
        "disagreeing_unexplained": sum(1 for c in compared if "unexplained" in classes(c)),
        "compared_aligned": sum(1 for c in compared if comp(c)["aligned"]),
        "aligned_captures": sum(1 for p in passes if p["aligned_cycle"] is not None
                                or "too late" in (p["warnings"] or "")),
        "late_captures": sum(1 for p in passes if "too late" in (p["warnings"] or "")),
        "undisturbed_cycles": len(quiet),
        "undisturbed_cycles_agreeing": sum(c in agree for c in quiet),
        "real_matches": sum(comps[c["time"]]["real_matches"] for c in compared),
        "equal_per_submitter_matches": sum(
            sum(min(v["real"] or 0, v["shadow"] or 0)
                for v in json.loads(comps[c["time"]]["per_submitter"]).values())
            for c in compared),
        "pass_seconds_median": round(statistics.median(durations), 3) if durations else None,
        "pass_seconds_max": round(max(durations), 3) if durations else None,
        "disagreeing_undisturbed_cycles": [
            {"time": c["time"], "per_submitter": {
                k: (v["real"], v["shadow"]) for k, v in
                json.loads(comps[c["time"]]["per_submitter"]).items()
                if v["real"] != v["shadow"]}}
            for c in compared if c not in agree and c in quiet],
        "unexplained_disagreements": [
            {"time": c["time"], "disagreements": [
                d for d in json.loads(comp(c)["disagreements"] or "[]")
                if d["class"] == "unexplained"]}
            for c in compared if "unexplained" in classes(c)],
        "changes_named": sorted({x.split(" of ")[0].split(" ")[0] + " ..."
                                 for c in compared
                                 for x in json.loads(comp(c)["changes"] or "[]")}),
    }
    report["work_directory"] = str(work)
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
