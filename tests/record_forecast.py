"""Record a closed-loop run of a real HTCondor pool for forecasting, as the recordings in
tests/data/forecast/ were made:

    python tests/record_forecast.py --out DIR --config-variant A|B [--minutes 25]
                                    [--slots static|pslot] [--drain]

with NEGOTIATOR_EXT_TEST_HTCONDOR (or PATH) naming an HTCondor install.

What it does, in order: starts a personal pool (tests/livepool.py's config, then
config.d/50-startd and config.d/60-forecast: HTCondor's defaults again for
NEGOTIATOR_INTERVAL, NEGOTIATOR_CYCLE_DELAY, UPDATE_INTERVAL, SCHEDD_SEND_RESCHEDULE and
CLAIM_WORKLIFE, so the real negotiator runs at its natural cadence, with claim reuse and
partitionable leftovers as HTCondor ships them; every other knob as livepool.py has it),
whose own startd has 16 cores (`--slots static`: 16 one-core static slots; `--slots
pslot`: one 16-core partitionable slot; 1024 MB a core) running real `/bin/sleep` jobs;
three accounting groups with surplus (variant A: quotas group_a 8, group_b 4, group_c 4;
variant B: group_a 4, group_b 8, group_c 4 and GROUP_ACCEPT_SURPLUS_group_c = False),
PRIORITY_HALFLIFE 600.
Right before the first submission it takes a snapshot (`negotiator-ext snapshot`) into
DIR/snapshot: its captured_at is the run's time 0. It then submits a fixed workload
(`workload()`: waves of jobs of four submitters, a function of --minutes and --slots
only, written to DIR/workload.json) at fixed offsets from time 0, each wave one
`condor_submit` as the pool user, never forces a cycle, and samples the accountant
(`condor_userprio -l -allusers`) every 60 s into DIR/accounting-timeline/<epoch>.ads.
At time 0 + --minutes it keeps the queue (queue-end.ads), the history (history.ads,
history.json), the accountant (accounting-end.ads), the MatchLog and the NegotiatorLog,
the jobs' event log (events.log), the config files the pool ran (config), what was
submitted when (submits.json) and meta.json; then stops the pool and removes its scratch
directory. With --drain, the pool then goes on until every job has finished, and the
history is kept again as history-drained.ads: the whole workload, each job with its
whole run (the run's end cuts some short, and some never start before it). It prints
one summary line; on any failure one line on stderr and exit 1.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from livepool import LivePool, find_release  # noqa: E402
from record_cycle import take_snapshot  # noqa: E402

DOMAIN = "negotiator-ext.test"
CORES = 16
MB_PER_CORE = 1024
GROUP_OF = {"alice": "group_a", "amy": "group_a", "bob": "group_b", "carol": "group_c"}
# (seconds after time 0, submitter, jobs) for --minutes 25; a shorter or longer run
# scales both the offsets and the counts by minutes / 25
WAVES = [(0, "alice", 30), (0, "bob", 20), (120, "carol", 25), (300, "amy", 30),
         (600, "bob", 12), (900, "alice", 16), (1100, "carol", 12)]
TIMELINE_EVERY = 60

# HTCondor 25.14's own defaults (param_info.in / the daemons' param_integer defaults) for
# the knobs that decide when cycles run and what a claim may do, which tests/livepool.py
# shortens for fast tests: NEGOTIATOR_INTERVAL (60) is LivePool(negotiator_interval=60).
# Every other knob is livepool.py's (SCHEDD_INTERVAL 2, NEGOTIATOR_MIN_INTERVAL 1, ...).
DEFAULT_TIMING = """\
NEGOTIATOR_CYCLE_DELAY = 20
UPDATE_INTERVAL = 300
SCHEDD_SEND_RESCHEDULE = True
CLAIM_WORKLIFE = 1200
"""

FORECAST_CONFIG = """\
# --- HTCondor's defaults again for the cadence and claim knobs livepool.py shortens
{timing}
# --- the logs kept: nothing rotates during a run
NEGOTIATOR_MATCH_LOG = $(LOG)/MatchLog
MAX_NEGOTIATOR_LOG = 1000000000
MAX_NEGOTIATOR_MATCH_LOG = 1000000000
MAX_HISTORY_LOG = 1000000000

# --- the accountant and the groups (variant {variant})
PRIORITY_HALFLIFE = 600
GROUP_NAMES = group_a, group_b, group_c
GROUP_QUOTA_group_a = {qa}
GROUP_QUOTA_group_b = {qb}
GROUP_QUOTA_group_c = {qc}
GROUP_ACCEPT_SURPLUS = True
{extra}"""

VARIANTS = {
    "A": {"qa": 8, "qb": 4, "qc": 4, "extra": ""},
    "B": {"qa": 4, "qb": 8, "qc": 4, "extra": "GROUP_ACCEPT_SURPLUS_group_c = False\n"},
}

STARTD = {
    # the base config's SLOT_TYPE_2 (a 4-core p-slot) is dropped: NUM_SLOTS_TYPE_2 = 0
    "static": (f"NUM_CPUS = {CORES}\nMEMORY = {CORES * MB_PER_CORE}\n"
               f"SLOT_TYPE_1 = cpus=1, memory={MB_PER_CORE}\nNUM_SLOTS_TYPE_1 = {CORES}\n"
               "SLOT_TYPE_1_PARTITIONABLE = False\nNUM_SLOTS_TYPE_2 = 0\n"),
    "pslot": (f"NUM_CPUS = {CORES}\nMEMORY = {CORES * MB_PER_CORE}\n"
              f"SLOT_TYPE_1 = cpus={CORES}, memory={CORES * MB_PER_CORE}\n"
              "SLOT_TYPE_1_PARTITIONABLE = True\nNUM_SLOTS_TYPE_1 = 1\nNUM_SLOTS_TYPE_2 = 0\n"),
}


class Failed(Exception):
    """A recording that cannot go on: its message is the one line printed."""


def runtime(index: int, wave: int) -> int:
    """Seconds job `index` of wave `wave` sleeps: 30-300."""
    return 30 + (index * 37 + wave * 53) % 271


def workload(minutes: float, slots: str) -> dict:
    """The jobs, a function of the arguments only: every variant runs the same."""
    scale = minutes / 25.0
    jobs, waves = [], []
    for w, (at, user, count) in enumerate(WAVES):
        at, count = int(round(at * scale)), max(1, int(round(count * scale)))
        group = GROUP_OF[user]
        waves.append({"wave": w, "at": at, "submitter": user, "group": group, "jobs": count})
        for i in range(count):
            two = slots == "pslot" and i % 3 == 2     # p-slots: every third job 2 cores
            jobs.append({"wave": w, "index": i, "at": at, "submitter": user, "group": group,
                         "accounting_group": f"{group}.{user}",
                         "submitter_name": f"{group}.{user}@{DOMAIN}",
                         "runtime": runtime(i, w), "request_cpus": 2 if two else 1,
                         "request_memory": 1024 if two else 512})
    return {"minutes": minutes, "slots": slots, "scale": scale,
            "runtime_formula": "30 + (index * 37 + wave * 53) % 271",
            "at": "seconds after the snapshot's captured_at (time 0)",
            "waves": waves, "jobs": jobs}


class ForecastPool(LivePool):
    def __init__(self, release, root, *, slots: str, variant: str):
        super().__init__(release, root, negotiator_interval=60)
        self._slots, self._variant = slots, variant

    def write_config(self) -> None:
        super().write_config()
        forecast = FORECAST_CONFIG.format(timing=DEFAULT_TIMING, variant=self._variant,
                                          **VARIANTS[self._variant])
        for name, text in (("50-startd", STARTD[self._slots]), ("60-forecast", forecast)):
            p = self.local / "config.d" / name
            p.write_text(text)
            if self.user is not None:
                os.chown(p, self.user.pw_uid, self.user.pw_gid)

    def config_text(self) -> str:
        """The config files the pool ran, in the order HTCondor reads them."""
        parts = [(self.config_file.name, self.config_file.read_text())]
        parts += [(f"config.d/{p.name}", p.read_text())
                  for p in sorted((self.local / "config.d").iterdir())]
        return "".join(f"# ==== {name}\n{text}\n" for name, text in parts)

    def slot_ads(self) -> int:
        out = self.tool("condor_status", "-af", "Name", check=False).stdout
        return len(out.split())

    def submit_wave(self, jobs: list[dict], events: Path) -> int:
        """One condor_submit of `jobs` (one wave, one submitter); returns the cluster."""
        first = jobs[0]
        lines = ["universe = vanilla", "executable = /bin/sleep",
                 "transfer_executable = false", "should_transfer_files = NO",
                 f"initialdir = {self.flags}", f"log = {events}", "request_disk = 1024",
                 f"accounting_group = {first['group']}",
                 f"accounting_group_user = {first['submitter']}",
                 f"+ForecastWave = {first['wave']}"]
        for j in jobs:
            lines += [f"arguments = {j['runtime']}", f"request_cpus = {j['request_cpus']}",
                      f"request_memory = {j['request_memory']}",
                      f"+ForecastIndex = {j['index']}", "queue 1"]
        out = self.tool("condor_submit", "-terse", "-", user=True, timeout=120,
                        input="\n".join(lines) + "\n").stdout
        m = re.match(r"\s*(\d+)\.0 - \1\.(\d+)\s*$", out)
        if not m or int(m.group(2)) != len(jobs) - 1:
            raise Failed(f"condor_submit of wave {first['wave']} printed {out.strip()!r}")
        return int(m.group(1))


def job_ids(ads_text: str) -> list[tuple[int, int]]:
    """(ClusterId, ProcId) of each ad of a `-long` listing."""
    ids = []
    for block in re.split(r"\n\s*\n", ads_text):
        c = re.search(r"^ClusterId = (\d+)$", block, re.M)
        p = re.search(r"^ProcId = (\d+)$", block, re.M)
        if c and p:
            ids.append((int(c.group(1)), int(p.group(1))))
    return ids


def htcondor_version(pool: LivePool) -> str:
    out = pool.tool("condor_version", check=False).stdout
    return out.splitlines()[0].strip() if out.strip() else "unknown"


def sweep(pool: LivePool) -> list[int]:
    """SIGKILL whatever of this pool outlived stop(): processes started with its
    CONDOR_CONFIG in their environment or running in its scratch directory (each by its
    pid). Returns the pids killed."""
    mark = f"CONDOR_CONFIG={pool.config_file}".encode()
    root = str(pool.root)
    killed = []
    for d in Path("/proc").glob("[0-9]*"):
        pid = int(d.name)
        if pid == os.getpid():
            continue
        try:
            ours = mark in (d / "environ").read_bytes().split(b"\0")
            if not ours:
                cwd = os.readlink(d / "cwd")
                ours = cwd == root or cwd.startswith(root + "/")
        except OSError:
            continue
        if ours:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
    return killed


def check_master(pool: LivePool) -> None:
    rc = pool.master.poll() if pool.master is not None else "gone"
    if rc is not None:
        log = pool.log_dir / "MasterLog"
        last = log.read_text(errors="replace").strip().splitlines()[-1:] if log.exists() else []
        raise Failed(f"the pool's condor_master exited during the run (exit {rc}; its "
                     f"log's last line: {last[0] if last else 'none'})")


def record(pool: ForecastPool, out: Path, args, work: dict) -> dict:
    """The run itself, on a started pool; returns meta.json's content."""
    events = pool.flags / "events.log"
    want = CORES if args.slots == "static" else 1
    pool.wait_for(lambda: pool.slot_ads() == want, 120, f"{want} slot ad(s)", every=1)
    load_start = os.getloadavg()
    snap = take_snapshot(pool, out / "snapshot")
    if snap is None:
        raise Failed("negotiator-ext snapshot failed (its error is above)")
    t0 = json.loads((snap / "meta.json").read_text())["captured_at"]
    end = t0 + int(round(args.minutes * 60))

    due: list[tuple[float, str, object]] = []
    by_wave: dict[int, list[dict]] = {}
    for j in work["jobs"]:
        by_wave.setdefault(j["wave"], []).append(j)
    for w in work["waves"]:
        due.append((t0 + w["at"], "submit", w["wave"]))
    due += [(t, "userprio", None) for t in range(t0, end, TIMELINE_EVERY)]
    due.sort(key=lambda e: (e[0], e[1] != "submit", str(e[2])))
    timeline = out / "accounting-timeline"
    timeline.mkdir()
    submits, timeline_errors = [], []
    for at, kind, what in due:
        while time.time() < at:
            check_master(pool)
            time.sleep(min(1.0, max(0.0, at - time.time())))
        if kind == "submit":
            started = time.time()
            cluster = pool.submit_wave(by_wave[what], events)
            submits.append({"wave": what, "cluster": cluster, "jobs": len(by_wave[what]),
                            "planned_at": int(at), "submitted_at": round(started, 3),
                            "returned_at": round(time.time(), 3)})
        else:
            now = int(time.time())
            r = pool.tool("condor_userprio", "-l", "-allusers", check=False, timeout=60)
            if r.returncode == 0:
                (timeline / f"{now}.ads").write_text(r.stdout)
            else:
                timeline_errors.append(f"{now}: condor_userprio failed ({r.returncode}): "
                                       f"{(r.stderr or r.stdout).strip()[:200]}")
    while time.time() < end:
        check_master(pool)
        time.sleep(min(1.0, max(0.0, end - time.time())))

    # the end: the queue first, then the history (a job that finishes in between is in
    # both; none is in neither)
    ended = int(time.time())
    (out / "queue-end.ads").write_text(pool.tool("condor_q", "-allusers", "-long").stdout)
    (out / "history.ads").write_text(pool.tool("condor_history", "-long", timeout=120).stdout)
    (out / "history.json").write_text(pool.tool("condor_history", "-json",
                                                timeout=120).stdout)
    (out / "accounting-end.ads").write_text(pool.tool("condor_userprio", "-l",
                                                      "-allusers").stdout)
    for name, dest in (("MatchLog", "matchlog.txt"), ("NegotiatorLog", "negotiator.log")):
        src = pool.log_dir / name
        if not src.exists():
            raise Failed(f"the pool wrote no {name}")
        shutil.copyfile(src, out / dest)
    if events.exists():
        shutil.copyfile(events, out / "events.log")
    (out / "config").write_text(pool.config_text())
    (out / "submits.json").write_text(json.dumps(submits, indent=1) + "\n")
    drained = drain(pool, out, len(work["jobs"])) if args.drain else None
    return {"snapshot_time": t0, "end_time": end, "ended_at": ended,
            **({"drained_at": drained} if drained else {}),
            "minutes": args.minutes, "variant": args.config_variant, "slots": args.slots,
            "htcondor_version": htcondor_version(pool), "collector": pool.collector,
            "load_average_start": [round(x, 2) for x in load_start],
            "load_average_end": [round(x, 2) for x in os.getloadavg()],
            "command": "python tests/record_forecast.py " + " ".join(sys.argv[1:]),
            **({"timeline_errors": timeline_errors} if timeline_errors else {})}


def drain(pool: ForecastPool, out: Path, jobs: int, limit: float = 3600) -> int:
    """After the run (--drain): the pool goes on, as it would, until every job of the
    workload has finished; then the history again, as history-drained.ads (every job's
    whole run: the workload a forecast of the run replays, with the run length of each
    job the run's end cut short or never started). Returns when it was read."""
    def finished() -> bool:
        queued = pool.tool("condor_q", "-allusers", "-af", "ClusterId", check=False).stdout
        return not queued.split()
    deadline = time.time() + limit
    while not finished():
        check_master(pool)
        if time.time() > deadline:
            raise Failed(f"the workload had not drained {limit:.0f} s after the run")
        time.sleep(10)
    text = pool.tool("condor_history", "-long", timeout=120).stdout
    if len(job_ids(text)) < jobs:
        raise Failed(f"the drained history holds {len(job_ids(text))} of {jobs} jobs")
    (out / "history-drained.ads").write_text(text)
    return int(time.time())


def summarize(out: Path, work: dict, submits: list[dict]) -> dict:
    """Who is where at the end: every submitted job must be in the history or the queue."""
    submitted = {(s["cluster"], p) for s in submits for p in range(s["jobs"])}
    hist = json.loads((out / "history.json").read_text() or "[]")
    done = {(a["ClusterId"], a["ProcId"]) for a in hist if a.get("JobStatus") == 4}
    in_hist = {(a["ClusterId"], a["ProcId"]) for a in hist}
    queued_text = (out / "queue-end.ads").read_text()
    queued = set(job_ids(queued_text))
    running = len(re.findall(r"^JobStatus = 2$", queued_text, re.M))
    neg = (out / "negotiator.log").read_text(errors="replace")
    matches = len(re.findall(r"\bMatched\b", (out / "matchlog.txt").read_text(errors="replace")))
    missing = sorted(submitted - in_hist - queued)
    return {"jobs_planned": len(work["jobs"]), "submitted": len(submitted),
            "completed": len(done & submitted), "in_history": len(in_hist & submitted),
            "queued_at_end": len(queued & submitted - in_hist), "running_at_end": running,
            "missing": [f"{c}.{p}" for c, p in missing],
            "cycles_started": neg.count("Started Negotiation Cycle"),
            "cycles_finished": neg.count("Finished Negotiation Cycle"),
            "matchlog_matches": matches}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True, type=Path)
    p.add_argument("--config-variant", required=True, choices=sorted(VARIANTS))
    p.add_argument("--minutes", type=float, default=25.0)
    p.add_argument("--slots", choices=sorted(STARTD), default="static")
    p.add_argument("--drain", action="store_true",
                   help="after the run, let the workload finish and keep the history again "
                        "(history-drained.ads)")
    args = p.parse_args(argv)
    release = find_release()
    if release is None:
        print("record_forecast: no HTCondor install: set NEGOTIATOR_EXT_TEST_HTCONDOR or put "
              "condor_master on PATH", file=sys.stderr)
        return 2
    out = args.out
    if out.exists():
        if any(out.iterdir()) and not (out / "workload.json").exists():
            print(f"record_forecast: {out} exists and is not an earlier recording",
                  file=sys.stderr)
            return 2
        shutil.rmtree(out)
    out.mkdir(parents=True)
    work = workload(args.minutes, args.slots)
    (out / "workload.json").write_text(json.dumps(work, indent=1) + "\n")

    def on_term(signum, frame):
        raise Failed(f"stopped by signal {signum}")

    signal.signal(signal.SIGTERM, on_term)
    root = Path(tempfile.mkdtemp(prefix="negext-forecast-"))
    pool = ForecastPool(release, root, slots=args.slots, variant=args.config_variant)
    try:
        try:
            pool.start()
            meta = record(pool, out, args, work)
        finally:
            pool.stop()
            left = sweep(pool)
            shutil.rmtree(root, ignore_errors=True)
        submits = json.loads((out / "submits.json").read_text())
        summary = summarize(out, work, submits)
        meta["summary"] = summary
        if left:
            meta["killed_after_stop"] = len(left)
        (out / "meta.json").write_text(json.dumps(meta, indent=1) + "\n")
        if summary["missing"]:
            raise Failed(f"{len(summary['missing'])} submitted jobs are neither in the "
                         f"history nor in the queue: {' '.join(summary['missing'][:10])}")
        if summary["submitted"] != summary["jobs_planned"]:
            raise Failed(f"{summary['submitted']} of {summary['jobs_planned']} jobs submitted")
    except (Failed, RuntimeError, TimeoutError, OSError, ValueError) as exc:
        print(f"record_forecast: {out}: {' '.join(str(exc).split())}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"record_forecast: {out}: interrupted", file=sys.stderr)
        return 1
    s = summary
    print(f"{out}: {s['submitted']} submitted, {s['completed']} completed, "
          f"{s['queued_at_end']} still queued ({s['running_at_end']} running); "
          f"{s['cycles_finished']} negotiation cycles, {s['matchlog_matches']} matches "
          f"in the MatchLog")
    return 0


if __name__ == "__main__":
    sys.exit(main())
