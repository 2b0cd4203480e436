"""Record one real negotiation cycle on a personal HTCondor pool, as the recordings in
tests/data/ were made: `python tests/record_cycle.py --out DIR [options]` with
NEGOTIATOR_EXT_TEST_HTCONDOR (or PATH) naming an HTCondor install.

What it does, in order: starts a personal pool (tests/livepool.py's config with
GROUP_NAMES empty, plus `--policy` lines), sets each submitter's priority factor
(`condor_userprio -setfactor`), submits the jobs (accounting group `--group-of` each
submitter, default `grp`), runs one warm-up cycle while no slot can take a job, then makes
the slots (`--fake N`: N fake 1-core slots advertised with condor_advertise
-fake-private-ad, whose claims fail; `--real N`: the pool's own startd with N 1-core
slots, jobs that sleep), captures a snapshot with `negotiator-ext snapshot` (its
accounting.ads replaced by `condor_userprio -l -allusers`, which has the records the
collector does not have yet), and forces one real cycle. DIR gets the snapshot and
`expected/matchlog.txt`, `expected/negotiator-cycle.log` (that cycle's MatchLog and
NegotiatorLog) and prints the real matches per submitter. `--condor-status` also keeps
`condor_status -long` and `condor_status -submitters -long` of the same moment in
DIR/condor_status/ (the admin tools' snapshot, its order lost).

Submitters: `--submitters a:10,b:150:2000` (name:jobs[:factor]); `--groups` puts
submitter i in group `group_<i % K>` (and configures GROUP_NAMES with equal dynamic
quotas and surplus when `--hgq`). `--fake-attrs "3:DaemonShutdown = CurrentTime > {now}+100"`
adds lines to the next 3 fake slots (repeatable; `{now}` is the time they are
advertised). `--skip NAME` re-advertises that submitter's ad with `SkipMatchmaking = true`
(`condor_advertise UPDATE_SUBMITTOR_AD`) right before the snapshot; give it
`--policy "SCHEDD_INTERVAL = 3600"` so the schedd does not send its own again first.
`--job-lines "rank = Speed"` adds submit-description lines (`;` between) to every
cluster (repeatable).

P-slot preemption: `--real-pslots 2:4` gives the pool's own startd 2 partitionable slots
of 4 cores (512 MB a core) instead of static ones; `--first "a:8:1000"` (the form of
`--submitters`) submits those clusters first and runs real cycles until all their jobs
run in dynamic slots (the warm-up), and only then submits `--submitters`. A sixth field of
a submitter spec is its jobs' request_cpus (default 1): `b:2:1:64:0:2`. With
`--real-pslots` the slots as they stand 15 s after the cycle (name, state, activity,
user, current rank) are kept in `expected/slots-after.txt`: which dynamic slots the
matches preempted.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "bench"))

from livepool import LivePool, find_release  # noqa: E402

import bench_real_pool as bench  # noqa: E402

DOMAIN = "negotiator-ext.test"


class RecordPool(LivePool):
    def __init__(self, release, root, *, startd: str, policy: str):
        super().__init__(release, root, negotiator_interval=86400)
        self._startd, self._policy = startd, policy

    def write_config(self) -> None:
        super().write_config()
        base = ("GROUP_NAMES =\nNEGOTIATOR_UPDATE_AFTER_CYCLE = True\n"
                "CLASSAD_LIFETIME = 86400\nSCHEDD_INTERVAL = 5\n")
        for name, text in (("50-startd", self._startd), ("60-policy", base + self._policy)):
            p = self.local / "config.d" / name
            p.write_text(text)
            if self.user is not None:
                os.chown(p, self.user.pw_uid, self.user.pw_gid)


def parse_submitters(text: str) -> list[tuple[str, int, int | None, int, int, int]]:
    """name:jobs[:factor[:request_memory[:priority[:request_cpus]]]], comma-separated; a
    name given again is the same submitter with another cluster (another autocluster when
    its memory differs; `priority` is the jobs' JobPrio, condor_submit's `priority`)."""
    out = []
    for part in text.split(","):
        bits = part.split(":") + ["", "", "", ""]
        out.append((bits[0], int(bits[1]), int(bits[2]) if bits[2] else None,
                    int(bits[3]) if bits[3] else 64, int(bits[4]) if bits[4] else 0,
                    int(bits[5]) if bits[5] else 1))
    return out


def running_jobs(pool: LivePool) -> int:
    out = pool.tool("condor_q", "-allusers", "-af", "JobStatus", check=False).stdout
    return sum(1 for x in out.split() if x == "2")


def dslots_busy(pool: LivePool) -> int:
    """Dynamic slots the collector shows claimed and busy."""
    out = pool.tool("condor_status", "-af", "Activity", "-constraint",
                    "DynamicSlot =?= true", check=False).stdout
    return sum(1 for x in out.split() if x == "Busy")


def advertise_with(pool: LivePool, count: int, specs: list[str], work: Path) -> None:
    """bench.advertise's static fake slots, the first ones with the lines of `specs`."""
    template = bench.template(pool, 'SlotType == "Static"')
    address = f"<127.0.0.1:{bench.free_port()}>"
    now = int(time.time())
    extra: list[list[str]] = []
    for spec in specs:
        k, lines = spec.split(":", 1)
        extra += [[ln.strip().replace("{now}", str(now)) for ln in lines.split(";")]] * int(k)
    ads = []
    for i in range(count):
        ad = bench.fake_ad(template, f"fake-s{i:06d}.bench", address)
        ads.append("\n".join([ad] + (extra[i] if i < len(extra) else [])))
    f = work / "slots.ads"
    f.write_text("\n\n".join(ads) + "\n")
    pool.tool("condor_advertise", "-multiple", "-tcp", "-fake-private-ad",
              "UPDATE_STARTD_AD", str(f), timeout=600)
    pool.wait_for(lambda: bench.slot_count(pool) >= count + 2, 120, "the fake slots", every=1)


def take_snapshot(pool: LivePool, out: Path, timeout: int | None = None) -> Path | None:
    """`negotiator-ext snapshot` of the pool into `out` (with its --timeout when given);
    None (its error printed) when it fails."""
    more = ["--timeout", str(timeout)] if timeout else []
    r = subprocess.run([sys.executable, "-m", "negotiator_ext", "snapshot", "--pool",
                        pool.collector, "-o", str(out), *more], env=pool.env,
                       capture_output=True, text=True, cwd=ROOT)
    if r.returncode != 0:
        print(r.stderr, file=sys.stderr)
        return None
    return out


def skip_submitter(pool: LivePool, name: str, work: Path) -> None:
    """The collector's submitter ad `name`, again, with SkipMatchmaking = true."""
    ad = pool.tool("condor_status", "-submitters", "-long", "-constraint",
                   f'Name == "{name}"').stdout.strip()
    f = work / "skip.ad"
    f.write_text(ad + "\nSkipMatchmaking = true\n")
    pool.tool("condor_advertise", "UPDATE_SUBMITTOR_AD", str(f))
    pool.wait_for(lambda: "true" in pool.tool(
        "condor_status", "-submitters", "-af", "SkipMatchmaking", "-constraint",
        f'Name == "{name}"').stdout, 30, "the submitter ad with SkipMatchmaking")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True, type=Path)
    p.add_argument("--submitters", required=True)
    p.add_argument("--fake", type=int, default=0)
    p.add_argument("--fake-pslots", type=int, default=0,
                   help="fake 8-core partitionable slots (after the --fake static ones)")
    p.add_argument("--real", type=int, default=0)
    p.add_argument("--policy", default="", help="config lines (\\n between)")
    p.add_argument("--groups", type=int, default=0)
    p.add_argument("--hgq", action="store_true")
    p.add_argument("--fake-attrs", action="append", default=[])
    p.add_argument("--skip", action="append", default=[])
    p.add_argument("--job-lines", action="append", default=[],
                   help="submit-description lines for every cluster (; between)")
    p.add_argument("--real-pslots", default="",
                   help="N:CPUS: the real startd with N partitionable slots of CPUS cores")
    p.add_argument("--first", default="",
                   help="clusters (the --submitters form) submitted and run before the others")
    p.add_argument("--snapshot-timeout", type=int, default=None,
                   help="the snapshot's --timeout (a schedd with 100,000s of jobs needs "
                        "more than its default 30 s)")
    p.add_argument("--condor-status", action="store_true",
                   help="also keep condor_status -long and condor_status -submitters "
                        "-long, taken right after the snapshot, in DIR/condor_status/")
    args = p.parse_args(argv)
    release = find_release()
    if release is None:
        print("no HTCondor install: set NEGOTIATOR_EXT_TEST_HTCONDOR", file=sys.stderr)
        return 2
    subs = parse_submitters(args.submitters)
    first = parse_submitters(args.first) if args.first else []
    policy = args.policy.replace("\\n", "\n") + "\n"
    if args.groups and args.hgq:
        names = [f"group_{g}" for g in range(args.groups)]
        policy += f"GROUP_NAMES = {', '.join(names)}\nGROUP_ACCEPT_SURPLUS = True\n"
        policy += "".join(f"GROUP_QUOTA_DYNAMIC_{n} = {1.0 / args.groups:.6g}\n" for n in names)
    if args.real_pslots:
        k, cpus = (int(x) for x in args.real_pslots.split(":"))
        startd = (f"NUM_CPUS = {k * cpus}\nMEMORY = {512 * k * cpus}\n"
                  f"NUM_SLOTS_TYPE_1 = {k}\nSLOT_TYPE_1 = cpus={cpus}, mem={512 * cpus}\n"
                  "SLOT_TYPE_1_PARTITIONABLE = True\nSTART = False\n")
    elif args.real:
        n = args.real
        startd = (f"NUM_CPUS = {n}\nMEMORY = {512 * n}\nNUM_SLOTS_TYPE_1 = {n}\n"
                  "SLOT_TYPE_1 = cpus=1, mem=512\nSTART = False\n")
    else:
        startd = bench.STARTD_CONFIG
    root = Path(tempfile.mkdtemp(prefix="negext-record-"))
    pool = RecordPool(release, root, startd=startd, policy=policy)
    pool.start()
    try:
        work = root / "work"
        work.mkdir()

        def group_of(i: int) -> str:
            return f"group_{i % args.groups}" if args.groups else "grp"

        names = list(dict.fromkeys(n for n, *_ in first + subs))
        index = {n: i for i, n in enumerate(names)}
        for name, _, factor, *_ in first + subs:
            i = index[name]
            if factor is not None:
                pool.tool("condor_userprio", "-setfactor", f"{group_of(i)}.{name}@{DOMAIN}",
                          str(factor))
        head = ["universe = vanilla", "executable = /bin/sleep", "arguments = 600",
                "transfer_executable = false", "should_transfer_files = NO",
                f"initialdir = {pool.flags}", "log = /dev/null", "request_cpus = 1",
                "request_disk = 1024"]
        head += [ln.strip() for spec in args.job_lines for ln in spec.split(";") if ln.strip()]

        def submit(clusters) -> None:
            lines = list(head)
            for name, count, _, memory, prio, cpus in clusters:
                lines += [f"accounting_group = {group_of(index[name])}",
                          f"accounting_group_user = {name}", f"request_memory = {memory}",
                          f"priority = {prio}"]
                lines += [f"request_cpus = {cpus}"] if cpus != 1 else []
                lines += [f"queue {count}"]
            pool.tool("condor_submit", "-", user=True, input="\n".join(lines) + "\n",
                      timeout=600)

        if first:
            # the first clusters run in the slots before the others are submitted
            submit(first)
            n_first = sum(c for _, c, *_ in first)
            pool.wait_for(lambda: bench.idle_in_submitter_ads(pool) >= n_first, 300,
                          "the first submitter ads", every=1)
            pool.reconfig("70-start", "START = True\n")
            time.sleep(8)
            deadline = time.monotonic() + 300
            while running_jobs(pool) < n_first or dslots_busy(pool) < n_first:
                if time.monotonic() > deadline:
                    raise RuntimeError("the first jobs did not all start")
                bench.real_cycle(pool, 300)
                time.sleep(6)
            time.sleep(6)       # the slots' ads with every dynamic slot busy
        submit(subs)
        want = sum(c for _, c, *_ in subs)
        pool.wait_for(lambda: bench.idle_in_submitter_ads(pool) >= want, 300,
                      "the submitter ads", every=1)
        if not first:
            bench.real_cycle(pool, 300)     # warm-up: no slot takes a job yet
        time.sleep(2)
        if first:
            pass
        elif args.real or args.real_pslots:
            pool.reconfig("70-start", "START = True\n")
            time.sleep(8)
        elif args.fake_attrs:
            advertise_with(pool, args.fake, args.fake_attrs, work)
        else:
            bench.advertise(pool, args.fake, args.fake_pslots, work)
        for name in args.skip:
            skip_submitter(pool, f"{group_of(index[name])}.{name}@{DOMAIN}", work)
        if args.out.exists():
            shutil.rmtree(args.out)
        (args.out / "expected").mkdir(parents=True)
        snap = take_snapshot(pool, root / "snapshot", args.snapshot_timeout)
        if snap is None:
            return 1
        if args.condor_status:
            # the same pool as the admin tools print it (sorted: the collector's order
            # lost), for adapters/collector_order.py's rebuilt order
            cs = args.out / "condor_status"
            cs.mkdir()
            (cs / "slots.ads").write_text(pool.tool("condor_status", "-long",
                                                    timeout=600).stdout)
            (cs / "submitters.ads").write_text(pool.tool(
                "condor_status", "-submitters", "-long", timeout=600).stdout)
        (snap / "accounting.ads").write_text(
            pool.tool("condor_userprio", "-l", "-allusers").stdout)
        for f in snap.iterdir():
            shutil.copy(f, args.out / f.name)
        ml, nl = pool.log_dir / "MatchLog", pool.log_dir / "NegotiatorLog"
        m_off = ml.stat().st_size if ml.exists() else 0
        n_off = nl.stat().st_size if nl.exists() else 0
        bench.real_cycle(pool, 600)
        text = ml.read_text()[m_off:] if ml.exists() else ""
        (args.out / "expected" / "matchlog.txt").write_text(text)
        (args.out / "expected" / "negotiator-cycle.log").write_text(nl.read_text()[n_off:])
        if args.real_pslots:
            time.sleep(15)
            (args.out / "expected" / "slots-after.txt").write_text(pool.tool(
                "condor_status", "-af", "Name", "State", "Activity", "RemoteUser",
                "CurrentRank").stdout)
        counts = Counter(re.findall(r"Matched \S+ (\S+) ", text))
        print(f"{sum(counts.values())} matches, {len(counts)} submitters matched:",
              ", ".join(f"{k} {v}" for k, v in sorted(counts.items())[:20])
              + (" ..." if len(counts) > 20 else ""))
    finally:
        pool.stop()
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
