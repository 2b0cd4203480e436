"""Our shadow pass beside the real negotiator's cycle, on the same big pool, in one run.

    NEGOTIATOR_EXT_TEST_HTCONDOR=/opt/htcondor python bench/bench_real_pool.py [--shape 11k]

A personal pool of real 25.x daemons (tests/livepool.py) is loaded with issue 15's shapes:

    11k   10,000 static 1-core slots + 1,000 8-core partitionable slots, 49,800 idle jobs
          in 300 autoclusters, 100 submitters in 10 groups (dynamic quotas, surplus)
    100k  90,000 static + 10,000 partitionable slots, 500,000 idle jobs in 2,000
          autoclusters, 1,000 submitters in 100 groups
    100k-1M  the 100k pool with 1,000,000 idle jobs (2,000 autoclusters of 500 jobs)
          over 4 schedds (issue 34's goal 3); 1k-4 the 1k pool over 4 schedds (a quick
          check of the several schedds' setup)

A shape's jobs are held by one real schedd, or several (SCHEDDS): the personal pool's
master then runs SCHEDD2, SCHEDD3, ... beside its own schedd, each `-local-name scheddN`
with a name, spool, lock directory, log, address and daemon ad files and job queue log of
its own (BenchPool's config); each submitter's jobs are on one schedd (submitter s on
schedd s mod n; in group s mod groups, so at 100k-1M each group's ten submitters are on
one schedd, 25 groups a schedd), each schedd's share submitted by a `condor_submit
-name` of its own, all at once; the master's own schedd is then named schedd1.

The slots are fake: copies of the real startd's own two slot ads (one static, one
partitionable) advertised with `condor_advertise -multiple -tcp -fake-private-ad
UPDATE_STARTD_AD`, each with `MyAddress` on a closed loopback port, so the schedd's claims
fail, the jobs stay idle and every cycle sees the same pool, while the negotiator's
decisions are real. The real startd's own slots refuse every job (`START = False`). The
jobs are submitted in one `condor_submit` (one cluster per autocluster and submitter). The
schedd's per-user match limit is off (`SCHEDD_ENABLE_PER_USER_MATCH_LIMITS = False`) and
MAX_JOBS_RUNNING is 10,000,000: the fake slots' claims fail at once, so the real schedd's
shadow count never grows during a cycle, where our model (core/schedd_limits.py) counts
every match handed to it, as a pool whose claims succeed does; the negotiator's time
limits are HTCondor's defaults.

Then, in this order:
  1. `negotiator-ext shadow --once` (pass 1: capture, our cycle, ledger);
  2. one real cycle (`condor_reschedule -addr <negotiator>`), its duration and phases
     read from the negotiator's ad (`LastNegotiationCycleDuration0`, `...Phase1Duration0`, ...);
  3. `negotiator-ext shadow --once` again (pass 2: it sees the real cycle of step 2 and
     compares it with pass 1's cycle: per-submitter match counts; it queries the schedds
     beside the slot ads, with pass 1's job projection), and a pass 3 the same way but
     with NEGOTIATOR_EXT_CAPTURE_BESIDE = False (the schedds after the slots); then
     pass 4, a first pass with a state directory of its own (nothing kept) beside the
     pool that has now negotiated, as on the day the product is installed (pass 1 is a
     first pass before any cycle: the schedd has no autoclusters and is asked for every
     job whole);
  4. `negotiator-ext negotiate --json` on pass 1's snapshot, read from its files; the
     floor (issue 34's goal 4): the collector's answer to the slot query (pass 1's slot
     projection, and whole) and the schedds' to pass 1's job query, through the
     bindings in a fresh process, nothing done with them, beside our captures; with --admin-files, the pool captured with
     HTCondor's own tools (condor_status -long, condor_q -allusers -long, ...) and
     `negotiate` timed on those files (goal 2);
  5. a `shadow --interval` loop of four passes in one process, keeping its slot ads
     (`shadow_loop`): whole; nothing changed; after --churn of the slots advertised again
     and a real cycle (also compared by `--once` passes around it); after another churn.
     Each loop pass's matches are checked against `negotiate` on its own snapshot's files
     (`--no-loop` leaves the loop out).
Reported (stdout, and JSON with --json): the pool, the real cycle's figures, each pass's
wall time, peak RSS, capture and cycle time, the machine's load as the timed steps began,
and for each compared real cycle the comparison: the raw count agreement and the
unexplained one, the disagreeing submitters counted by class (pool changed, out of
time, unexplained; core/disagreement.py), what re-predicting the unexplained ones at
the real accountant's update did (how many it explained, in how many seconds) and the
ones left unexplained named. Setup (advertising,
submitting, waiting for the schedd) is timed but not part of any figure. A benchmark,
not a test; submitting 500,000 jobs takes minutes.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from livepool import SKIP_REASON, LivePool, find_release, free_port  # noqa: E402
from proc_memory import run_with_peak  # noqa: E402
from real_pool_files import admin_files, floor_queries, snapshots  # noqa: E402

SHAPES = {
    #        static, partitionable, jobs, autoclusters, submitters, groups
    "1k": (900, 100, 5_000, 30, 10, 2),
    "11k": (10_000, 1_000, 49_800, 300, 100, 10),
    "30k": (27_000, 3_000, 150_000, 600, 300, 30),
    "100k": (90_000, 10_000, 500_000, 2_000, 1_000, 100),
    "1k-4": (900, 100, 5_000, 30, 10, 2),
    "100k-1M": (90_000, 10_000, 1_000_000, 2_000, 1_000, 100),
}
# the schedds holding a shape's jobs (1 where a shape is not named here)
SCHEDDS = {"1k-4": 4, "100k-1M": 4}

STARTD_CONFIG = """\
# bench_real_pool: the real startd has one static 1-core slot and one 8-core
# partitionable slot (the templates of the fake slots) and refuses every job
NUM_CPUS = 9
MEMORY = 18432
NUM_SLOTS_TYPE_1 = 1
SLOT_TYPE_1 = cpus=1, mem=2048
NUM_SLOTS_TYPE_2 = 1
SLOT_TYPE_2 = cpus=8, mem=16384
SLOT_TYPE_2_PARTITIONABLE = True
START = False
"""


def pool_config(groups: int, interval: int) -> str:
    names = [f"group_{g}" for g in range(groups)]
    lines = [
        "# bench_real_pool: the pool's policy",
        f"NEGOTIATOR_INTERVAL = {interval}",
        "NEGOTIATOR_UPDATE_AFTER_CYCLE = True",
        "SCHEDD_ENABLE_PER_USER_MATCH_LIMITS = False",
        "MAX_JOBS_PER_OWNER = 10000000",
        "MAX_JOBS_PER_SUBMISSION = 10000000",
        "MAX_JOBS_SUBMITTED = 10000000",
        "MAX_JOBS_RUNNING = 10000000",
        "SCHEDD_INTERVAL = 10",
        "CLASSAD_LIFETIME = 86400",
        "COLLECTOR_UPDATE_INTERVAL = 86400",
        f"GROUP_NAMES = {', '.join(names)}",
        "GROUP_ACCEPT_SURPLUS = True",
    ]
    lines += [f"GROUP_QUOTA_DYNAMIC_{n} = {1.0 / groups:.6g}" for n in names]
    return "\n".join(lines) + "\n"


class BenchPool(LivePool):
    """tests/livepool.py's pool with this benchmark's startd and policy in config.d
    before the daemons start (a startd's slot layout is read only at its start), and
    `schedds` schedds (the master's own and SCHEDD2 ...)."""

    def __init__(self, release, root, *, groups: int, schedds: int = 1):
        super().__init__(release, root, negotiator_interval=86400, schedds=schedds)
        self.groups = groups

    def write_config(self) -> None:
        super().write_config()
        for name, text in (("50-startd", STARTD_CONFIG),
                           ("60-policy", pool_config(self.groups, 86400))):
            path = self.local / "config.d" / name
            path.write_text(text)
            if self.user is not None:
                os.chown(path, self.user.pw_uid, self.user.pw_gid)


# -- the fake slots --------------------------------------------------------------------------

_DROP = re.compile(r"^(LastHeardFrom|AddressV1|MyCurrentTime|AuthenticatedIdentity|"
                   r"AuthenticationMethod|LastUpdate|UpdatesLost|UpdatesSequenced|"
                   r"UpdatesTotal|UpdatesHistory|UpdatesInitial|CondorLoadAvg|LoadAvg|"
                   r"TotalCondorLoadAvg|TotalLoadAvg|KeyboardIdle|ConsoleIdle) = ",
                   re.IGNORECASE)


def template(pool: LivePool, constraint: str) -> list[str]:
    text = pool.tool("condor_status", "-long", "-constraint", constraint).stdout
    ad = text.strip().split("\n\n")[0]
    return [line for line in ad.splitlines() if line.strip() and not _DROP.match(line)]


def fake_ad(lines: list[str], machine: str, address: str) -> str:
    out = []
    for line in lines:
        name = line.split(" = ", 1)[0].lower()
        if name == "name":
            line = f'Name = "slot1@{machine}"'
        elif name == "machine":
            line = f'Machine = "{machine}"'
        elif name in ("myaddress", "startdipaddr"):
            line = f'{line.split(" = ", 1)[0]} = "{address}"'
        elif name == "start":
            line = "Start = true"
        out.append(line)
    out.append("ClassAdLifetime = 86400")
    return "\n".join(out)


def advertise(pool: LivePool, static: int, partitionable: int, work: Path
              ) -> tuple[float, list[str]]:
    """Advertise the fake slots; returns the seconds it took and the ads."""
    st = template(pool, 'SlotType == "Static"')
    ps = template(pool, 'SlotType == "Partitionable"')
    closed = free_port()         # nothing listens there: every claim fails
    address = f"<127.0.0.1:{closed}>"
    ads = [fake_ad(st, f"fake-s{i:06d}.bench", address) for i in range(static)]
    ads += [fake_ad(ps, f"fake-p{i:06d}.bench", address) for i in range(partitionable)]
    t0 = time.monotonic()
    send_ads(pool, ads, work, "slots")
    want = static + partitionable + 2
    pool.wait_for(lambda: slot_count(pool) >= want, 600, f"{want} slots in the collector",
                  every=2)
    return time.monotonic() - t0, ads


def send_ads(pool: LivePool, ads: list[str], work: Path, stem: str) -> None:
    """UPDATE_STARTD_AD for each of `ads`, ten thousand at a time."""
    chunk = 10_000
    for k in range(0, len(ads), chunk):
        f = work / f"{stem}-{k // chunk}.ads"
        f.write_text("\n\n".join(ads[k:k + chunk]) + "\n")
        pool.tool("condor_advertise", "-multiple", "-tcp", "-fake-private-ad",
                  "UPDATE_STARTD_AD", str(f), timeout=600)
        f.unlink()


def churn(pool: LivePool, ads: list[str], share: float, round_: int, work: Path) -> float:
    """Advertise again `share` of the fake slots (a different share each round), each
    with a new BenchUpdate value: what a startd's periodic update does to the collector
    (a new LastHeardFrom and UpdatesTotal, the same slot). Returns the seconds it took."""
    n = int(len(ads) * share)
    start = (round_ * n) % max(len(ads), 1)
    chosen = [ads[(start + i) % len(ads)] + f"\nBenchUpdate = {round_}" for i in range(n)]
    t0 = time.monotonic()
    send_ads(pool, chosen, work, f"churn-{round_}")
    # the collector has taken them all in when the last one shows
    last = chosen[-1].split('Name = "', 1)[1].split('"', 1)[0] if chosen else None
    if last is not None:
        pool.wait_for(lambda: pool.tool("condor_status", "-af", "BenchUpdate", "-constraint",
                                        f'Name == "{last}"', check=False).stdout.strip()
                      == str(round_), 600, "the churned slots", every=0.5)
    return time.monotonic() - t0


def slot_count(pool: LivePool) -> int:
    return len(pool.tool("condor_status", "-af", "Name", check=False).stdout.splitlines())


# -- the jobs ---------------------------------------------------------------------------------

def submit_jobs(pool: LivePool, jobs: int, autoclusters: int, submitters: int,
                groups: int, schedds: list[str] | None = None) -> tuple[float, dict]:
    """One condor_submit: each submitter has autoclusters/submitters autoclusters (a
    request_memory of its own each), the jobs spread evenly over them. With `schedds`
    (their names, several), submitter s's jobs go to schedds[s % len(schedds)], each
    schedd's share one `condor_submit -name` of its own, all run at once. Returns the
    seconds until the schedds published every idle job, and for each schedd the seconds
    its condor_submit took and its jobs."""
    per_sub = autoclusters // submitters
    per_ac = jobs // autoclusters
    head = ["universe = vanilla", "executable = /bin/true", "transfer_executable = false",
            "should_transfer_files = NO", f"initialdir = {pool.flags}", "log = /dev/null",
            "request_cpus = 1", "request_disk = 1024"]
    n = len(schedds) if schedds else 1
    shares = [list(head) for _ in range(n)]
    counts = [0] * n
    ac = 0
    for s in range(submitters):
        g = s % groups
        lines = shares[s % n]
        lines += [f"accounting_group = group_{g}", f"accounting_group_user = u{s:04d}"]
        for _ in range(per_sub):
            lines += [f"request_memory = {64 + ac}", f"queue {per_ac}"]
            counts[s % n] += per_ac
            ac += 1
    t0 = time.monotonic()
    each: dict = {}
    if not schedds or n == 1:
        pool.tool("condor_submit", "-terse", "-", user=True, timeout=7200,
                  input="\n".join(shares[0]) + "\n")
    else:
        procs = []
        for name, lines, count in zip(schedds, shares, counts):
            f = pool.flags / f"submit-{name.split('@')[0]}.sub"
            f.write_text("\n".join(lines) + "\n")
            exe = str(pool.release / "bin" / "condor_submit")
            procs.append((name, count, time.monotonic(), subprocess.Popen(
                pool.as_user([exe, "-terse", "-name", name, str(f)]), env=pool.env,
                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)))
        failed = []
        for name, count, started, proc in procs:
            _, err = proc.communicate(timeout=7200)
            each[name] = {"submit_s": round(time.monotonic() - started, 1), "jobs": count}
            if proc.returncode != 0:
                failed.append(f"{name} ({proc.returncode}): {err.strip()[-500:]}")
        if failed:
            raise RuntimeError("condor_submit failed: " + "; ".join(failed))
    total = per_ac * ac
    pool.wait_for(lambda: idle_in_submitter_ads(pool) >= total, 1200,
                  f"the schedds to publish {total} idle jobs", every=2)
    return time.monotonic() - t0, each


def idle_in_submitter_ads(pool: LivePool) -> int:
    out = pool.tool("condor_status", "-submitters", "-af", "IdleJobs", check=False).stdout
    return sum(int(x) for x in out.split() if x.isdigit())


# -- the real cycle -----------------------------------------------------------------------------

_CYCLE_ATTRS = ["LastNegotiationCycleEnd0", "LastNegotiationCycleDuration0",
                "LastNegotiationCyclePhase1Duration0", "LastNegotiationCyclePhase2Duration0",
                "LastNegotiationCyclePhase3Duration0", "LastNegotiationCyclePhase4Duration0",
                "LastNegotiationCycleMatches0", "LastNegotiationCycleRejections0",
                "LastNegotiationCycleCandidateSlots0", "LastNegotiationCycleActiveSubmitterCount0",
                "LastNegotiationCycleNumIdleJobs0",
                "LastNegotiationCycleMatchRate0", "LastNegotiationCycleSubmittersOutOfTime0",
                "LastNegotiationCycleScheddsOutOfTime0", "LastNegotiationCycleNumJobsConsidered0",
                "LastNegotiationCyclePhase4CpuTime0"]


def negotiator_ad(pool: LivePool) -> dict:
    out = pool.tool("condor_status", "-negotiator", "-json", "-attributes",
                    ",".join(_CYCLE_ATTRS), check=False).stdout
    try:
        ads = json.loads(out) if out.strip() else []
    except ValueError:
        return {}
    return ads[0] if ads else {}


def real_cycle(pool: LivePool, timeout: float) -> tuple[dict, float, list[str]]:
    """One real cycle, now: RESCHEDULE sent to the negotiator itself (a 25.x schedd takes
    `condor_reschedule` as a no-op and decides alone when to ask for a cycle). Returns
    the negotiator's ad after it, the wait, and the groups' order in its log."""
    ad = negotiator_ad(pool)
    before = ad.get("LastNegotiationCycleEnd0", 0)
    log = pool.log_dir / "NegotiatorLog"
    offset = log.stat().st_size if log.exists() else 0
    t0 = time.monotonic()
    pool.tool("condor_reschedule", "-addr", pool.negotiator_address())

    def ended():
        a = negotiator_ad(pool)
        return a if a.get("LastNegotiationCycleEnd0", 0) > before else None

    ad = pool.wait_for(ended, timeout, "the real negotiation cycle", every=1)
    return ad, time.monotonic() - t0, group_order_in_log(log, offset)


_GROUP_LINE = re.compile(r"^\S+ \S+ Group (\S+) - sortkey= ", re.M)


def group_order_in_log(log: Path, offset: int) -> list[str]:
    """The groups in the order the cycle's first allocation round negotiated them, from
    the NegotiatorLog written since `offset` ("Group <name> - sortkey= <key>" lines, until a
    group comes again)."""
    try:
        with log.open("rb") as f:
            f.seek(offset)
            text = f.read().decode("utf-8", "replace")
    except OSError:
        return []
    order: list[str] = []
    for m in _GROUP_LINE.finditer(text):
        if m.group(1) in order:
            break
        order.append(m.group(1))
    return order


# -- our pass -----------------------------------------------------------------------------------

def shadow_pass(pool: LivePool, work: Path, beside: bool = True,
                state: Path | None = None) -> dict:
    """One `shadow --once`; `beside` False: NEGOTIATOR_EXT_CAPTURE_BESIDE = False (the
    schedds queried after the slot ads even when an earlier snapshot is there). `state`:
    its state directory (default WORK/state, the one the bench's passes share)."""
    argv = [sys.executable, "-c",
            "import resource, sys, time\n"
            "t = time.monotonic()\n"
            "sys.argv = ['negotiator-ext'] + sys.argv[1:]\n"
            "from negotiator_ext.cli import end_process, ends_with_command, main\n"
            # as the console command runs it (cli.console_main)
            "ends = ends_with_command(sys.argv[1:])\n"
            "rc = main(sys.argv[1:])\n"
            "print('BENCH', time.monotonic() - t, "
            "resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, rc, file=sys.stderr)\n"
            "end_process(rc) if ends else sys.exit(rc)\n",
            "shadow", "--once", "--pool", pool.collector, "--state-dir",
            str(state or work / "state"),
            "--no-advertise", "--negotiator-log", str(pool.log_dir / "NegotiatorLog"),
            "--matchlog", str(pool.log_dir / "MatchLog"), "--timeout", "600", "--json"]
    env = dict(pool.env, _CONDOR_NEGOTIATOR_EXT_CAPTURE_BESIDE=str(beside))
    t0 = time.monotonic()
    proc, tree_peak = run_with_peak(argv, env=env, cwd=ROOT)
    wall = time.monotonic() - t0
    m = re.search(r"^BENCH (\S+) (\d+) (\S+)$", proc.stderr, re.M)
    if proc.returncode != 0 or m is None:
        raise RuntimeError(f"shadow --once failed ({proc.returncode}): {proc.stderr[-2000:]}")
    rec = json.loads(proc.stdout.strip().splitlines()[-1]) if proc.stdout.strip() else {}
    return {"wall_s": round(wall, 2), "in_process_s": round(float(m.group(1)), 2),
            "peak_rss_mib": round(int(m.group(2)) / 1024),
            "tree_peak_mib": round(tree_peak / 1024), "record": rec}


_LOOP_HARNESS = """\
import os, resource, signal, sys, threading, time
from pathlib import Path
sys.path.insert(0, os.path.join(os.getcwd(), "bench"))
from proc_memory import status, tree_rss
from negotiator_ext import shadow
work, passes = Path(sys.argv[1]), int(sys.argv[2])
real = shadow.ShadowLoop.run_pass
done = [0]
# the loop's resident memory and all its descendants' shares (Pss) together (its worker,
# the children the worker forks to ask the schedds, the config reader), sampled every
# 20 ms during a pass: what the machine must hold at once (each one's own peak may come
# at another time)
together = [0, None, False]      # the pass's largest sum (kB), the worker's pid, sampling
def sample():
    while True:
        if together[2]:
            together[0] = max(together[0], tree_rss(os.getpid()))
        time.sleep(0.02)
threading.Thread(target=sample, daemon=True).start()
def timed(self, *a, **kw):
    n = done[0] + 1
    if n > 1:     # the bench changes the pool between passes: wait for its word
        (work / f"loop-ready-{n}").touch()
        while not (work / f"loop-go-{n}").exists():
            time.sleep(0.05)
    proc = getattr(getattr(self, "worker", None), "_proc", None)
    together[:] = [0, getattr(proc, "pid", None), True]
    t = time.monotonic()
    rec = real(self, *a, **kw)
    together[2] = False
    print("BENCHPASS", n, time.monotonic() - t,
          resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr, flush=True)
    print("BENCHTOGETHER", n, together[0], file=sys.stderr, flush=True)
    # the loop's worker process (adapters/worker.py): its own peak so far, and what it
    # holds once the pass is over (between its answers)
    w = together[1]
    print("BENCHWORKER", n, status(w, "VmHWM") if w else 0, file=sys.stderr, flush=True)
    print("BENCHWORKERNOW", n, status(w) if w else 0, file=sys.stderr, flush=True)
    done[0] = n
    if n >= passes:
        os.kill(os.getpid(), signal.SIGTERM)      # the loop's own stop: ends after this pass
    return rec
shadow.ShadowLoop.run_pass = timed
from negotiator_ext.cli import main
sys.exit(main(sys.argv[3:]))
"""


def shadow_loop(pool: LivePool, work: Path, ads: list[str], share: float) -> dict:
    """A `shadow --interval` loop of four passes in one process (the daemon's way: the
    slot ads kept between passes): 1, the slots queried whole; 2, nothing changed; 3,
    after `share` of the slots were advertised again and one real cycle ran (which
    pass 3 compares with pass 2's cycle); 4, after another `share` advertised again.
    Each pass timed from its start to its ledger record, the pool's changes between
    passes outside it."""
    state = work / "loop-state"
    argv = [sys.executable, "-c", _LOOP_HARNESS, str(work), "4",
            "shadow", "--interval", "1", "--pool", pool.collector, "--state-dir", str(state),
            "--no-advertise", "--negotiator-log", str(pool.log_dir / "NegotiatorLog"),
            "--matchlog", str(pool.log_dir / "MatchLog"), "--timeout", "600", "--json"]
    # its output to files: a pass's record (every match) is more than a pipe holds
    out_file, err_file = work / "loop.out", work / "loop.err"
    with out_file.open("w") as out_f, err_file.open("w") as err_f:
        proc = subprocess.Popen(argv, env=pool.env, stdout=out_f, stderr=err_f, text=True,
                                cwd=ROOT)
    between: dict = {}
    try:
        for n in (2, 3, 4):
            ready = work / f"loop-ready-{n}"
            while not ready.exists():
                if proc.poll() is not None:
                    raise RuntimeError(f"the shadow loop ended early ({proc.returncode}): "
                                       f"{err_file.read_text()[-2000:]}")
                time.sleep(0.1)
            if n >= 3:
                between[f"churn_before_{n}_s"] = round(churn(pool, ads, share, n, work), 1)
            if n == 3:
                # the same real cycle compared the `--once` way too (a pass right before
                # it, one after): what the kept slots change in the comparison, if anything
                once_before = shadow_pass(pool, work)
                time.sleep(1.0)
                ad, waited, _ = real_cycle(pool, timeout=7200)
                between["real_cycle_before_3"] = {
                    "duration_s": ad.get("LastNegotiationCycleDuration0"),
                    "matches": ad.get("LastNegotiationCycleMatches0")}
                once_after = shadow_pass(pool, work)
                between["once_before_3"] = pass_summary(once_before)
                between["once_after_3"] = pass_summary(once_after)
                time.sleep(1.0)
            (work / f"loop-go-{n}").touch()
        proc.wait(timeout=7200)
        out, err = out_file.read_text(), err_file.read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    if proc.returncode != 0:
        raise RuntimeError(f"the shadow loop failed ({proc.returncode}): {err[-2000:]}")
    timed = {int(m.group(1)): (float(m.group(2)), int(m.group(3))) for m in re.finditer(
        r"^BENCHPASS (\d+) (\S+) (\d+)$", err, re.M)}
    records = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    passes = []
    for n, rec in enumerate(records, start=1):
        took, rss = timed.get(n, (None, 0))
        snap = Path(rec.get("snapshot_dir") or "")
        meta = json.loads((snap / "meta.json").read_text()) if (snap / "meta.json").exists() else {}
        passes.append(dict(pass_summary({"wall_s": None, "in_process_s": round(took, 2)
                                         if took is not None else None,
                                         "peak_rss_mib": round(rss / 1024), "record": rec}),
                           slots_fetched=meta.get("slots_fetched"),
                           same_as_from_files=same_as_from_files(pool, rec)))
    worker = [int(m.group(1)) for m in re.finditer(r"^BENCHWORKER \d+ (\d+)$", err, re.M)]
    together = {int(m.group(1)): round(int(m.group(2)) / 1024) for m in re.finditer(
        r"^BENCHTOGETHER (\d+) (\d+)$", err, re.M)}
    worker_now = {int(m.group(1)): round(int(m.group(2)) / 1024) for m in re.finditer(
        r"^BENCHWORKERNOW (\d+) (\d+)$", err, re.M)}
    for n, p in enumerate(passes, start=1):
        p["with_worker_mib"] = together.get(n)
        p["worker_after_mib"] = worker_now.get(n)
    return {"passes": passes, "churn_share": share, **between,
            "worker_peak_mib": round(max(worker) / 1024) if worker else None}


def same_as_from_files(pool: LivePool, rec: dict) -> dict:
    """The loop pass's cycle (on the slot ads it kept) against `negotiate --json` on the
    snapshot it wrote, read from its files: every match, (job, submitter, slot), equal."""
    snap = rec.get("snapshot_dir")
    if not snap:
        return {}
    proc = subprocess.run([sys.executable, "-m", "negotiator_ext", "negotiate", snap,
                           "--json"], env=pool.env, capture_output=True, text=True, cwd=ROOT)
    if proc.returncode not in (0, 1):
        return {"error": proc.stderr[-500:]}
    files = [(m["job"], m["submitter"], m["slot"]) for m in json.loads(proc.stdout)["matches"]]
    ours = [(m["job"], m["submitter"], m["slot"]) for m in rec.get("shadow_matches") or ()]
    return {"matches": len(ours), "from_files": len(files), "identical": ours == files}


def negotiate_from_files(pool: LivePool, work: Path) -> dict:
    """`negotiator-ext negotiate --json` on the first pass's snapshot, from its files (what
    a what-if or an audit of that pool does): wall time and peak RSS."""
    snaps = snapshots(work)
    if not snaps:
        return {}
    argv = ["/usr/bin/time", "-f", "TIME %e %M", sys.executable, "-m", "negotiator_ext",
            "negotiate", str(snaps[0]), "--json"]
    # (/usr/bin/time's own few MiB with it)
    proc, tree_peak = run_with_peak(argv, env=pool.env, cwd=ROOT)
    m = re.search(r"^TIME (\S+) (\d+)$", proc.stderr, re.M)
    if proc.returncode not in (0, 1) or m is None:
        return {"error": proc.stderr[-500:]}
    doc = json.loads(proc.stdout)
    return {"wall_s": float(m.group(1)), "peak_rss_mib": round(int(m.group(2)) / 1024),
            "tree_peak_mib": round(tree_peak / 1024),
            "matches": len(doc.get("matches") or ()),
            "group_order": doc.get("cycle", {}).get("group_order") or []}


def pass_summary(p: dict) -> dict:
    rec = p["record"]
    comp = rec.get("comparison") or {}
    return {
        "wall_s": p["wall_s"], "in_process_s": p["in_process_s"],
        "peak_rss_mib": p["peak_rss_mib"], "tree_peak_mib": p.get("tree_peak_mib"),
        "status": rec.get("status"),
        "reason": rec.get("reason"),
        "capture_s": rec.get("capture_duration"), "cycle_s": rec.get("shadow_duration"),
        "our_matches": len(rec.get("shadow_matches") or ()),
        "phases_s": rec.get("shadow_timings") or {},
        "steps_s": rec.get("pass_timings") or {},
        "comparison": {k: comp.get(k) for k in (
            "source", "real_matches", "shadow_matches", "agreed", "count_agreement",
            "agreed_equivalent", "equivalent_agreement", "real_duration",
            "unexplained_agreement", "aligned", "repredicted")} if comp else None,
        # each disagreeing submitter's class (core.disagreement), counted, and the
        # disagreements themselves (the changes named)
        "classes": dict(Counter(d.get("class") for d in comp.get("disagreements") or ()))
        if comp else None,
        "disagreements": list(comp.get("disagreements") or ()) if comp else None,
        "submitters_equal_counts": sum(
            1 for v in (comp.get("per_submitter") or {}).values()
            if v.get("real") == v.get("shadow")) if comp else None,
        "submitters_compared": len(comp.get("per_submitter") or {}) if comp else None,
        # where our cycle predicted the real one's time limits stop it (pass 2 and 3 are
        # calibrated by the real cycle they follow), and what the comparison saw of them
        "predicted_time_limits": {k: (rec.get("time_limits") or {}).get(k) for k in (
            "predicted_duration", "schedds_out_of_time", "submitters_out_of_time",
            "matches_within", "matches_beyond")} if rec.get("time_limits") else None,
        "time_limits_compared": comp.get("time_limits") or None if comp else None,
        # how its slots came: whole, or fetched since the last snapshot's and kept
        "slots_fetched": _meta_of(rec).get("slots_fetched"),
    }


def _meta_of(rec: dict) -> dict:
    snap = Path(rec.get("snapshot_dir") or "")
    try:
        return json.loads((snap / "meta.json").read_text())
    except (OSError, ValueError):
        return {}


def explained(summary: dict, indent: str = "  ") -> str:
    """A compared real cycle's agreement, raw and with the explained differences taken as
    agreeing, the disagreeing submitters counted by class, and the unexplained ones (with
    what the comparison named for them) listed: lines to print."""
    c = summary.get("comparison")
    if not c:
        return ""
    classes = summary.get("classes") or {}
    lines = [f"{indent}count agreement {c.get('count_agreement')}, unexplained agreement "
             f"{c.get('unexplained_agreement')} (aligned: {c.get('aligned')}); "
             f"{summary.get('submitters_equal_counts')}/{summary.get('submitters_compared')} "
             f"submitters equal; disagreeing submitters by class: "
             + (", ".join(f"{n} {k}" for k, n in sorted(classes.items())) or "none")]
    again = c.get("repredicted") or {}
    if again.get("skipped"):
        lines.append(f"{indent}not re-predicted at phase 2: {again['skipped']}")
    elif again:
        lines.append(f"{indent}re-predicted at phase 2 ({again['delta_t']:+d} s from our "
                     f"capture; {again['source']}): {again['explained']} of "
                     f"{again['unexplained']} unexplained explained, unexplained agreement "
                     f"before {again['unexplained_agreement_before']}; "
                     f"{again['new_differences']} submitter(s) the capture had right differ "
                     f"in the re-run; {again['seconds']} s, from "
                     f"{again.get('inputs', 'the snapshot' + chr(39) + 's files')}")
    left = [d for d in summary.get("disagreements") or () if d.get("class") == "unexplained"]
    for d in left[:10]:
        lines.append(f"{indent}  unexplained: {d['submitter']} real {d['real']}, ours "
                     f"{d['shadow']}"
                     + (f" (at phase 2 {d['repredicted']})" if "repredicted" in d else "")
                     + f", {d['unexplained']} unexplained; "
                     + "; ".join(d.get("changes") or ()))
    if len(left) > 10:
        lines.append(f"{indent}  ... and {len(left) - 10} more unexplained")
    return "\n".join(lines)


def show(report: dict) -> None:
    rc = report["real_cycle"]
    static, partitionable, jobs, acs, subs, groups = (report[k] for k in (
        "static", "partitionable", "jobs", "autoclusters", "submitters", "groups"))
    print(f"pool {report['shape']}: {report['slots']:,} slots ({static:,} static, "
          f"{partitionable:,} partitionable), {jobs:,} idle jobs, {acs:,} autoclusters, "
          f"{subs:,} submitters in {groups} groups, over {report.get('schedds', 1)} "
          f"schedd(s)")
    print(f"setup: advertise {report['setup_advertise_s']} s, submit "
          f"{report['setup_submit_s']} s (until the schedds published every idle job)"
          + "".join(f"; {k}: {v['jobs']:,} jobs, condor_submit {v['submit_s']} s"
                    for k, v in (report.get("setup_submit_each") or {}).items()))
    print("load (1/5/15 min) as each began: " + "; ".join(
        f"{k} {' '.join(f'{x:.2f}' for x in v)}" for k, v in (report.get("load") or {}).items()))
    print(f"real negotiator: cycle {rc.get('Duration')} s (phases "
          + " / ".join(f"{rc.get(f'Phase{i}Duration')}" for i in range(1, 5))
          + f" s), {rc.get('Matches')} matches, "
          f"submitters out of time {rc.get('SubmittersOutOfTime')!r}")
    for name, what in (("pass1", "first pass, nothing kept"),
                       ("pass2", "schedds queried beside the slots"),
                       ("pass3", "pass 2 again, schedds after the slots"),
                       ("pass4", "a first pass after a real cycle, nothing kept"),
                       ("pass5", "a cron pass after pass 3, a share of the slots updated")):
        p = report.get(name)
        if p is None:
            continue
        print(f"our {name} ({what}): {p['wall_s']} s wall ({p['in_process_s']} s in process; "
              f"capture {p['capture_s']} s, cycle {p['cycle_s']} s), "
              f"{p['peak_rss_mib']} MiB ({p['tree_peak_mib']} MiB with its children, at "
              f"once), {p['our_matches']} matches, {p['status']}"
              + (f" ({p['reason']})" if p["reason"] else "")
              + (f"; slots fetched {f['fetched']}, kept {f['kept']}"
                 if (f := p.get("slots_fetched")) else ""))
        if p.get("steps_s"):
            print("  steps: " + ", ".join(f"{k} {v}" for k, v in p["steps_s"].items())
                  + "; cycle: " + ", ".join(f"{k} {v}" for k, v in p["phases_s"].items()))
    loop = report.get("loop")
    if loop:
        what = {1: "slots queried whole", 2: "nothing changed",
                3: f"{loop['churn_share']:.0%} of the slots updated, after a real cycle "
                   f"({(loop.get('real_cycle_before_3') or {}).get('duration_s')} s)",
                4: f"{loop['churn_share']:.0%} of the slots updated"}
        c = (loop.get("once_after_3") or {}).get("comparison")
        if c:
            o = loop["once_after_3"]
            print(f"the real cycle before loop pass 3, compared by `shadow --once` passes "
                  f"around it: real {c['real_matches']}, ours {c['shadow_matches']}, count "
                  f"agreement {c['count_agreement']}, {o['submitters_equal_counts']}/"
                  f"{o['submitters_compared']} submitters equal")
            print(explained(o))
        for n, p in enumerate(loop["passes"], start=1):
            f = p.get("slots_fetched") or {}
            print(f"our loop pass {n} ({what.get(n)}): {p['in_process_s']} s (capture "
                  f"{p['capture_s']} s, cycle {p['cycle_s']} s), process peak "
                  f"{p['peak_rss_mib']} MiB (with its worker and all their children, at "
                  f"once: "
                  f"{p.get('with_worker_mib')} MiB; the worker after the pass: "
                  f"{p.get('worker_after_mib')} MiB), {p['our_matches']} matches, "
                  f"{p['status']}; slots fetched {f.get('fetched')}, kept {f.get('kept')}; "
                  f"every match as from its files: {(p.get('same_as_from_files') or {}).get('identical')}"
                  + (f"; compared: real {p['comparison']['real_matches']}, ours "
                     f"{p['comparison']['shadow_matches']}, count agreement "
                     f"{p['comparison']['count_agreement']}, "
                     f"{p['submitters_equal_counts']}/{p['submitters_compared']} "
                     f"submitters equal" if p.get("comparison") else ""))
            if p.get("comparison"):
                print(explained(p))
            if p.get("steps_s"):
                print("  steps: " + ", ".join(f"{k} {v}" for k, v in p["steps_s"].items())
                      + "; cycle: " + ", ".join(f"{k} {v}" for k, v in p["phases_s"].items()))
        if loop.get("worker_peak_mib") is not None:
            print(f"the loop's worker process (it queries the schedds): peak "
                  f"{loop['worker_peak_mib']} MiB, beside the loop process's own")
    n = report.get("negotiate_from_files") or {}
    if "wall_s" in n:
        print(f"negotiate --json on pass 1's snapshot (files): {n['wall_s']} s wall, "
              f"{n['peak_rss_mib']} MiB ({n['tree_peak_mib']} MiB with its children, at "
              f"once), {n['matches']} matches")
    f = report.get("floor") or {}
    if "slots_s" in f:
        floor = f["slots_s"] + f["jobs_s"]
        p1, p3 = report["pass1"], report["pass3"]
        print(f"the floor (the daemons' own answers through the bindings, nothing done with "
              f"them): the collector's {f['slot_ads']:,} slot ads {f['slots_s']} s "
              f"(pass 1's slot projection; whole: {f.get('whole_slots_s')} s), the "
              f"schedds' {f['job_ads']:,} jobs with pass 1's projection {f['jobs_s']} s; "
              f"our capture: pass 1 {p1['capture_s']} s ({p1['capture_s'] / floor:.2f}x "
              f"the sum, {p1['capture_s'] / max(f['slots_s'], f['jobs_s']):.2f}x the "
              f"longer), pass 3 {p3['capture_s']} s ({p3['capture_s'] / floor:.2f}x, "
              f"{p3['capture_s'] / max(f['slots_s'], f['jobs_s']):.2f}x)")
        if len(f.get("jobs_each") or {}) > 1:
            print("  each schedd's answer (the fastest of the repeats; a `--once` capture "
                  "asks them one after another, a loop's worker two at a time): " + ", ".join(
                      f"{k} {v['jobs']:,} jobs {v['s']} s" for k, v in f["jobs_each"].items()))
    elif f:
        print(f"the floor could not be measured: {f.get('error')}")
    a = report.get("admin_files") or {}
    if "wall_s" in a:
        print(f"negotiate --json on the admin tools' files ({a['bytes']['slots.ads'] >> 20} MB "
              f"of slots, {a['bytes']['jobs.ads'] >> 20} MB of jobs; condor_q took "
              f"{a['tools_s']['jobs.ads']} s, condor_status {a['tools_s']['slots.ads']} s): "
              f"{a['wall_s']} s wall ({a['cpu_s']} s CPU), {a['peak_rss_mib']} MiB, "
              f"{a['matches']} matches, per submitter as on our capture: "
              f"{a['same_per_submitter_as_capture']}")
    elif a:
        print(f"negotiate on the admin tools' files failed: {a.get('error')}")
    real_order = rc.get("group_order") or []
    ours = n.get("group_order") or []
    if real_order:
        same = 0
        while same < min(len(real_order), len(ours)) and real_order[same] == ours[same]:
            same += 1
        print(f"group order (first allocation round): the real cycle negotiated "
              f"{len(real_order)} groups, ours negotiates {len(ours)}; the first {same} "
              f"agree; real {', '.join(real_order[:6])}, ...; ours "
              f"{', '.join(ours[:6])}, ...")
    c = report["pass2"]["comparison"]
    if c is None:
        print("comparison: none (pass 2 compared no real cycle)")
    else:
        print(f"comparison ({c['source']}): real {c['real_matches']} matches, ours "
              f"{c['shadow_matches']}; count agreement {c['count_agreement']}, "
              f"same (submitter, slot) {c['agreed']}, same (submitter, slot class) "
              f"{c['agreed_equivalent']}; "
              f"{report['pass2']['submitters_equal_counts']}/"
              f"{report['pass2']['submitters_compared']} submitters with equal counts")
        print(explained(report["pass2"]))
    if report["pass3"].get("comparison"):
        print("pass 3's comparison:\n" + explained(report["pass3"]))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shape", default="11k", type=shapes,
                    help="a shape, or several separated by commas (1k,11k,100k): each is "
                         "run on a pool of its own, then how each step grows is shown")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--keep", action="store_true", help="keep the pool's directory")
    ap.add_argument("--keep-snapshot", metavar="DIR", type=Path,
                    help="copy pass 1's snapshot to DIR/<shape> and pass 3's to "
                         "DIR/<shape>-pass3 (to time `negotiate` on them later, from "
                         "files, without the pool)")
    ap.add_argument("--admin-files", metavar="DIR", type=Path,
                    help="also capture the pool with HTCondor's own tools (condor_status "
                         "-long, condor_q -allusers -long, ...) into DIR/<shape> and time "
                         "`negotiate` on those files (issue 34's goal 2)")
    ap.add_argument("--no-loop", dest="loop", action="store_false",
                    help="leave out the shadow loop's passes (`shadow --interval`, the "
                         "slot ads kept between passes)")
    ap.add_argument("--churn", type=float, default=0.2, metavar="SHARE",
                    help="the share of the slots advertised again before the loop's "
                         "passes 3 and 4 (default 0.2: a startd's five-minute update seen "
                         "by a one-minute interval)")
    ap.add_argument("--hold", type=float, default=0, metavar="SECONDS",
                    help="leave the pool up this long after the report (to profile a pass "
                         "by hand: CONDOR_CONFIG and the collector are printed)")
    args = ap.parse_args(argv)
    release = find_release()
    if release is None:
        print(SKIP_REASON)
        return 0
    # a SIGTERM stops the pool's daemons too (run_shape's `finally`)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    compile_package()
    reports = [run_shape(release, shape, args) for shape in args.shape]
    growth = growth_table(reports) if len(reports) > 1 else None
    if args.json:                       # one document for the whole run
        print(json.dumps({"shapes": reports, "growth": growth}, indent=2))
    elif growth is not None:
        show_growth(growth)
    return 0


def compile_package() -> None:
    """The package's modules compiled to bytecode once, as `pip install` does for an
    installed package: where PYTHONDONTWRITEBYTECODE is set (this machine's environment
    sets it) an editable install is never compiled, and every `negotiate` and `shadow`
    process timed here compiled the whole package from source first (about 0.2 s each)."""
    import compileall
    compileall.compile_dir(str(ROOT / "negotiator_ext"), quiet=1)


def shapes(text: str) -> list[str]:
    names = [t.strip() for t in text.split(",") if t.strip()]
    bad = [n for n in names if n not in SHAPES]
    if not names or bad:
        raise argparse.ArgumentTypeError(f"shapes are {', '.join(SHAPES)}")
    return names


def run_shape(release, shape: str, args) -> dict:
    static, partitionable, jobs, acs, subs, groups = SHAPES[shape]
    n_schedds = SCHEDDS.get(shape, 1)
    root = Path(tempfile.mkdtemp(prefix="negext-bigpool-"))
    work = Path(tempfile.mkdtemp(prefix="negext-bigpass-"))
    pool = BenchPool(release, root, groups=groups, schedds=n_schedds)
    report: dict = {"shape": shape, "slots": static + partitionable,
                    "static": static, "partitionable": partitionable, "jobs": jobs,
                    "autoclusters": acs, "submitters": subs, "groups": groups,
                    "schedds": n_schedds}
    try:
        t0 = time.monotonic()
        pool.start()
        names = None
        if n_schedds > 1:
            # every schedd in the collector before a job is submitted to it by name
            names = pool.wait_for(lambda: (lambda got: got if len(got) >= n_schedds
                                           else None)(pool.schedd_names()), 120,
                                  f"{n_schedds} schedds in the collector", every=1)
            report["schedd_names"] = names
        # the negotiator's cycle at its start (nothing to match yet) out of the way
        pool.wait_for(lambda: negotiator_ad(pool).get("LastNegotiationCycleEnd0"), 120,
                      "the negotiator's first cycle")
        took, ads = advertise(pool, static, partitionable, work)
        report["setup_advertise_s"] = round(took, 1)
        took, each = submit_jobs(pool, jobs, acs, subs, groups, names)
        report["setup_submit_s"] = round(took, 1)
        if each:
            report["setup_submit_each"] = each
        report["setup_total_s"] = round(time.monotonic() - t0, 1)
        # the machine's load (1, 5, 15 minutes) as each timed step began: the figures
        # are only comparable at a like load
        report["load"] = {"pass1": os.getloadavg()}
        p1 = shadow_pass(pool, work)
        # the real cycle's start is known to the second: one that starts within the second
        # pass 1's capture ended in cannot be shown to come after it, and is not compared
        time.sleep(1.0)
        report["load"]["real_cycle"] = os.getloadavg()
        ad, waited, real_order = real_cycle(pool, timeout=7200)
        report["load"]["pass2"] = os.getloadavg()
        p2 = shadow_pass(pool, work)
        # the same pass again with the schedds queried after the slot ads (pass 2's
        # alternative; the pool has not changed)
        p3 = shadow_pass(pool, work, beside=False)
        # a first pass as on the day the product is installed beside a pool that has been
        # negotiating (the schedd has its autoclusters): nothing kept, a state directory
        # of its own. Pass 1 is a first pass before any cycle, the schedd asked for
        # every job whole
        p4 = shadow_pass(pool, work, state=work / "state-first")
        # a `--once` pass from cron as a pool's startds update (UPDATE_INTERVAL): a fifth
        # (--churn) of the slots advertised again since pass 3, whose snapshot it starts
        # from (its slots heard from since fetched, the others read from that file)
        report["churn_before_pass5_s"] = round(churn(pool, ads, args.churn, 5, work), 1)
        report["load"]["pass5"] = os.getloadavg()
        p5 = shadow_pass(pool, work)
        report["real_cycle"] = {k.removeprefix("LastNegotiationCycle").removesuffix("0"): v
                                for k, v in ad.items() if k.startswith("LastNegotiation")}
        # from RESCHEDULE until the negotiator's ad shows the cycle over
        report["real_cycle"]["wall_s"] = round(waited, 1)
        report["real_cycle"]["group_order"] = real_order
        report["pass1"] = pass_summary(p1)
        report["pass2"] = pass_summary(p2)
        report["pass3"] = pass_summary(p3)
        report["pass4"] = pass_summary(p4)
        report["pass5"] = pass_summary(p5)
        report["negotiate_from_files"] = negotiate_from_files(pool, work)
        report["load"]["floor"] = os.getloadavg()
        report["floor"] = floor_queries(pool, work)
        if args.admin_files is not None:
            report["admin_files"] = admin_files(pool, work, args.admin_files / shape,
                                                global_=n_schedds > 1)
        if args.loop:
            report["loop"] = shadow_loop(pool, work, ads, args.churn)
        if args.keep_snapshot is not None:
            snaps = snapshots(work)
            if snaps:
                dest = args.keep_snapshot / shape
                shutil.rmtree(dest, ignore_errors=True)
                shutil.copytree(snaps[0], dest)
                report["snapshot_kept"] = str(dest)
                # and pass 3's: after the real cycle, the schedd has its autoclusters,
                # so that pass captured the jobs by their requests
                last = args.keep_snapshot / f"{shape}-pass3"
                shutil.rmtree(last, ignore_errors=True)
                shutil.copytree(snaps[-1], last)
                report["pass3_snapshot_kept"] = str(last)
        if not args.json:
            show(report)
        if args.hold:
            print(f"holding the pool for {args.hold:g} s: CONDOR_CONFIG={pool.config_file} "
                  f"collector {pool.collector}", file=sys.stderr, flush=True)
            time.sleep(args.hold)
    finally:
        pool.stop()
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
            shutil.rmtree(work, ignore_errors=True)
    return report


def growth_table(reports: list[dict]) -> list[dict]:
    """Each step's seconds at each scale (pass 1; our cycle's phases; negotiate from
    files; the real cycle), and how it grows from one scale to the next: the exponent k
    of time ~ slots^k (1: linear in the pool; the jobs grow with the slots, 5 per slot)."""
    rows: dict[str, list] = {}

    def put(name: str, i: int, value) -> None:
        rows.setdefault(name, [None] * len(reports))[i] = value

    for i, r in enumerate(reports):
        p = r["pass1"]
        for k, v in (p.get("steps_s") or {}).items():
            put(f"pass: {k}", i, v)
        for k, v in (p.get("phases_s") or {}).items():
            put(f"cycle: {k}", i, v)
        put("pass: whole (in process)", i, p.get("in_process_s"))
        put("pass 2 (schedds beside the slots)", i, r["pass2"].get("in_process_s"))
        put("pass 3 (pass 2 without that)", i, r["pass3"].get("in_process_s"))
        put("negotiate from files", i, (r.get("negotiate_from_files") or {}).get("wall_s"))
        put("real negotiator's cycle", i, r["real_cycle"].get("Duration"))
    slots = [r["slots"] for r in reports]
    out = []
    for name, values in rows.items():
        exps = []
        for a in range(1, len(reports)):
            v0, v1 = values[a - 1], values[a]
            ok = isinstance(v0, (int, float)) and isinstance(v1, (int, float)) and v0 > 0.05 and v1 > 0
            exps.append(round(math.log(v1 / v0) / math.log(slots[a] / slots[a - 1]), 2)
                        if ok else None)
        out.append({"step": name, "seconds": values, "exponents": exps})
    return [{"shapes": [r["shape"] for r in reports], "slots": slots,
             "jobs": [r["jobs"] for r in reports]}] + out


def show_growth(growth: list[dict]) -> None:
    head, rows = growth[0], growth[1:]
    shapes_ = head["shapes"]
    steps = [f"{a}->{b}" for a, b in zip(shapes_, shapes_[1:])]
    print("\nhow each step grows (seconds; exponent k of time ~ slots^k, steps under "
          "0.05 s left out):")
    print(f"{'step':34}" + "".join(f"{s:>10}" for s in shapes_)
          + "".join(f"{s:>12}" for s in steps))
    for r in rows:
        print(f"{r['step']:34}" + "".join(f"{'' if v is None else v:>10}" for v in r["seconds"])
              + "".join(f"{'' if e is None else e:>12}" for e in r["exponents"]))


if __name__ == "__main__":
    sys.exit(main())
