"""Record one real cycle of each negotiator of a sharded pool, as
tests/data/negotiators/ was made: `python tests/record_shards.py --out DIR [options]` with
NEGOTIATOR_EXT_TEST_HTCONDOR (or PATH) naming an HTCondor install.

A personal pool (record_cycle.RecordPool) with a second negotiator under the master
(`NEGOTIATOR2`, started with `-local-name NEGOTIATOR2`: Name "NEGOTIATOR2@<host>"; the
first one is named `shard1` (Name "shard1@<host>": `condor_userprio -name` cannot find a
negotiator named after its host alone); the second has its
own NegotiatorLog, MatchLog and accountant file). The first negotiator takes the slots
without `Shard = 2` (NEGOTIATOR_SLOT_CONSTRAINT = Shard =!= 2), the second those with it.

What it does, in order: starts the pool; sets each submitter's priority factor and real
priority in each negotiator's accountant (`condor_userprio -name`), submits the jobs
(group `grp`), runs one warm-up cycle of each negotiator while no slot can take a job,
advertises `--fake` fake 1-core slots for the first shard and `--fake2` with `Shard = 2`
for the second, captures a snapshot with `negotiator-ext snapshot` (its accounting.ads
replaced by every record of each negotiator's accountant, read with the bindings'
`Negotiator.getPriorities()`, each ad given its `NegotiatorName` and the accountant's
`LastUpdate` as the collector's copies carry them: the collector does not have every
record yet), then forces one cycle of the first negotiator, waits until the schedd has
every job idle again (the fake slots' claims fail), and forces one of the second. DIR gets
the snapshot and, per negotiator, `expected/<Name>.matchlog.txt` and
`expected/<Name>.negotiator-cycle.log`; the real matches per negotiator and submitter are
printed.

Submitters: `--submitters a:30:100:500:2000,...` (name:jobs:factor:prio1:prio2; the
factor for both accountants, prio1/prio2 the real user priority set in each, empty for
none).
"""

from __future__ import annotations

import argparse
import json
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

from livepool import find_release  # noqa: E402
from record_cycle import DOMAIN, RecordPool, advertise_with, take_snapshot  # noqa: E402

import bench_real_pool as bench  # noqa: E402

SHARDS = """\
DAEMON_LIST = MASTER, COLLECTOR, NEGOTIATOR, NEGOTIATOR2, SCHEDD, STARTD
NEGOTIATOR_NAME = shard1
NEGOTIATOR2 = $(NEGOTIATOR)
NEGOTIATOR2_ARGS = -local-name NEGOTIATOR2
NEGOTIATOR2.NEGOTIATOR_LOG = $(LOG)/Negotiator2Log
NEGOTIATOR2.NEGOTIATOR_MATCH_LOG = $(LOG)/MatchLog2
NEGOTIATOR2.ACCOUNTANT_DATABASE_FILE = $(SPOOL)/Accountant2.log
NEGOTIATOR_SLOT_CONSTRAINT = Shard =!= 2
NEGOTIATOR2.NEGOTIATOR_SLOT_CONSTRAINT = Shard == 2
"""


# every negotiator's accountant records, each ad with its NegotiatorName (as the collector's
# copies carry it). `condor_userprio -name N -l` cannot give them: it asks the negotiator
# for ads whose NegotiatorName is N, and the negotiator's own records have none.
# getPriorities() leaves out the accountant's LastUpdate: it is taken from the
# negotiator's ads in the collector (each cycle publishes its groups' ads with it).
ACCOUNTANTS = """\
import htcondor2 as h
c = h.Collector()
out = []
for loc in c.locateAll(h.DaemonTypes.Negotiator):
    name = loc["Name"]
    last = max(ad.get("LastUpdate", 0) for ad in c.query(
        h.AdTypes.Accounting, constraint=f'NegotiatorName == "{name}"'))
    for ad in h.Negotiator(loc).getPriorities():
        ad["NegotiatorName"] = name
        ad["LastUpdate"] = last
        out.append(ad.printOld())
print("\\n".join(out))
"""


def negotiators(pool) -> dict[str, dict]:
    """Name -> the negotiator's ad (MyAddress, LastNegotiationCycleEnd0)."""
    out = pool.tool("condor_status", "-negotiator", "-json", "-attributes",
                    "Name,MyAddress,LastNegotiationCycleTime0,LastNegotiationCycleEnd0", check=False).stdout
    try:
        ads = json.loads(out) if out.strip() else []
    except ValueError:
        return {}
    return {ad["Name"]: ad for ad in ads if "Name" in ad}


def force_cycle(pool, name: str, timeout: float = 300) -> None:
    """One real cycle of the negotiator `name`, now (RESCHEDULE sent to it)."""
    before = negotiators(pool)[name].get("LastNegotiationCycleEnd0", 0)
    pool.tool("condor_reschedule", "-addr", negotiators(pool)[name]["MyAddress"])
    pool.wait_for(lambda: negotiators(pool).get(name, {}).get("LastNegotiationCycleEnd0", 0)
                  > before, timeout, f"a cycle of {name}", every=1)


def parse_submitters(text: str) -> list[tuple[str, int, int | None, float | None, float | None]]:
    out = []
    for part in text.split(","):
        bits = part.split(":") + ["", "", ""]
        out.append((bits[0], int(bits[1]), int(bits[2]) if bits[2] else None,
                    float(bits[3]) if bits[3] else None, float(bits[4]) if bits[4] else None))
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True, type=Path)
    p.add_argument("--submitters", required=True)
    p.add_argument("--fake", type=int, required=True, help="1-core slots of the first shard")
    p.add_argument("--fake2", type=int, required=True, help="1-core slots with Shard = 2")
    p.add_argument("--policy", default="", help="more config lines (\\n between)")
    args = p.parse_args(argv)
    release = find_release()
    if release is None:
        print("no HTCondor install: set NEGOTIATOR_EXT_TEST_HTCONDOR", file=sys.stderr)
        return 2
    subs = parse_submitters(args.submitters)
    policy = SHARDS + args.policy.replace("\\n", "\n") + "\n"
    root = Path(tempfile.mkdtemp(prefix="negext-record-"))
    pool = RecordPool(release, root, startd=bench.STARTD_CONFIG, policy=policy)
    pool.start()
    try:
        pool.wait_for(lambda: len(negotiators(pool)) == 2, 60, "both negotiators' ads")
        names = sorted(negotiators(pool))
        first = next(n for n in names if not n.startswith("NEGOTIATOR2@"))
        second = next(n for n in names if n.startswith("NEGOTIATOR2@"))
        work = root / "work"
        work.mkdir()
        for name, _, factor, prio1, prio2 in subs:
            user = f"grp.{name}@{DOMAIN}"
            for neg, prio in ((first, prio1), (second, prio2)):
                if factor is not None:
                    pool.tool("condor_userprio", "-name", neg, "-setfactor", user, str(factor))
                if prio is not None:
                    pool.tool("condor_userprio", "-name", neg, "-setprio", user, str(prio))
        lines = ["universe = vanilla", "executable = /bin/sleep", "arguments = 600",
                 "transfer_executable = false", "should_transfer_files = NO",
                 f"initialdir = {pool.flags}", "log = /dev/null", "request_cpus = 1",
                 "request_memory = 64", "request_disk = 1024", "accounting_group = grp"]
        for name, count, _, _, _ in subs:
            lines += [f"accounting_group_user = {name}", f"queue {count}"]
        pool.tool("condor_submit", "-", user=True, input="\n".join(lines) + "\n", timeout=600)
        want = sum(c for _, c, _, _, _ in subs)
        pool.wait_for(lambda: bench.idle_in_submitter_ads(pool) >= want, 300,
                      "the submitter ads", every=1)
        for neg in (first, second):          # warm-up: no slot takes a job yet
            force_cycle(pool, neg)
        time.sleep(2)
        advertise_with(pool, args.fake + args.fake2,
                       [f"{args.fake2}:Shard = 2"] if args.fake2 else [], work)
        if args.out.exists():
            shutil.rmtree(args.out)
        (args.out / "expected").mkdir(parents=True)
        snap = take_snapshot(pool, root / "snapshot")
        if snap is None:
            return 1
        r = subprocess.run([sys.executable, "-c", ACCOUNTANTS], env=pool.env,
                           capture_output=True, text=True, check=True)
        (snap / "accounting.ads").write_text(r.stdout)
        shutil.copytree(snap, args.out, dirs_exist_ok=True)
        logs = {first: ("MatchLog", "NegotiatorLog"), second: ("MatchLog2", "Negotiator2Log")}
        for neg in (first, second):
            ml, nl = (pool.log_dir / f for f in logs[neg])
            m_off = ml.stat().st_size if ml.exists() else 0
            n_off = nl.stat().st_size if nl.exists() else 0
            if neg == second:     # the first one's matches failed: every job idle again
                pool.wait_for(lambda: len(pool.jobs("ClusterId", constraint="JobStatus == 1"))
                              == want, 120, "every job idle again", every=1)
                time.sleep(3)
            force_cycle(pool, neg, 600)
            text = ml.read_text()[m_off:] if ml.exists() else ""
            (args.out / "expected" / f"{neg}.matchlog.txt").write_text(text)
            (args.out / "expected" / f"{neg}.negotiator-cycle.log").write_text(
                nl.read_text()[n_off:])
            counts = Counter(re.findall(r"Matched \S+ (\S+) ", text))
            print(f"{neg}: {sum(counts.values())} matches:",
                  ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    finally:
        pool.stop()
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
