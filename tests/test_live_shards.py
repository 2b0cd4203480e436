"""Beside a real HTCondor pool of two negotiators (tests/record_shards.py's config: the
first takes the slots without `Shard = 2`, the second those with it, each with its own
accountant): the live capture reads both, and a shadow pass records each negotiator as
its own stream, compared with that negotiator's own real cycle.

Runs only where an HTCondor install is found (see tests/livepool.py); elsewhere it skips
with one line saying how to enable it."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.live


@pytest.fixture(scope="module")
def two_negotiators():
    sys.path.insert(0, str(Path(__file__).parent.parent / "bench"))
    from livepool import SKIP_REASON, find_release
    release = find_release()
    if release is None:
        pytest.skip(SKIP_REASON)
    import bench_real_pool as bench
    from record_cycle import RecordPool
    from record_shards import SHARDS
    root = Path(tempfile.mkdtemp(prefix="negext-shards-"))
    pool = RecordPool(release, root, startd=bench.STARTD_CONFIG, policy=SHARDS)
    pool.start()
    try:
        yield pool
    finally:
        pool.stop()
        shutil.rmtree(root, ignore_errors=True)


def shadow_once(pool, state: Path) -> list[dict]:
    out = subprocess.run([sys.executable, "-m", "negotiator_ext", "shadow", "--pool",
                          pool.collector, "--once", "--json", "--state-dir", str(state),
                          "--no-advertise"], env=pool.env, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr
    return [json.loads(line) for line in out.stdout.splitlines()]


def test_each_negotiator_is_shadowed_and_compared_with_its_own_cycle(two_negotiators,
                                                                     tmp_path):
    import bench_real_pool as bench
    from record_cycle import advertise_with
    from record_shards import force_cycle, negotiators
    pool = two_negotiators
    pool.wait_for(lambda: len(negotiators(pool)) == 2, 60, "both negotiators' ads")
    names = sorted(negotiators(pool))
    first = next(n for n in names if n.startswith("shard1@"))
    second = next(n for n in names if n.startswith("NEGOTIATOR2@"))
    lines = ["universe = vanilla", "executable = /bin/sleep", "arguments = 600",
             "transfer_executable = false", "should_transfer_files = NO",
             f"initialdir = {pool.flags}", "log = /dev/null", "request_cpus = 1",
             "request_memory = 64", "request_disk = 1024", "accounting_group = grp",
             "accounting_group_user = a", "queue 12"]
    pool.tool("condor_submit", "-", user=True, input="\n".join(lines) + "\n")
    pool.wait_for(lambda: bench.idle_in_submitter_ads(pool) >= 12, 120, "the submitter ad",
                  every=1)
    for neg in (first, second):          # warm-up: no slot takes a job yet
        force_cycle(pool, neg)
    work = tmp_path / "work"
    work.mkdir()
    advertise_with(pool, 7, ["3:Shard = 2"], work)        # 4 for the first, 3 the second
    state = tmp_path / "state"

    # pass 1: before the cycles; each negotiator its own stream, its own slots
    recs = shadow_once(pool, state)
    streams = [r["pool"] for r in recs]
    assert streams == [f"{pool.collector} (negotiator {n})" for n in sorted((first, second))]
    by = {r["pool"].split("(negotiator ")[1][:-1]: r for r in recs}
    assert all(r["status"] == "complete" for r in recs), [r["reason"] for r in recs]
    assert len(by[first]["shadow_matches"]) == 4 and len(by[second]["shadow_matches"]) == 3
    assert {m["slot"] for m in by[second]["shadow_matches"]} == {
        f"slot1@fake-s{i:06d}.bench" for i in range(3)}
    snap = Path(by[first]["snapshot_dir"])
    assert sorted(p.name for p in (snap / "negotiators").iterdir()) == sorted(
        f"{n}.config" for n in (first, second))

    # the real cycles, one after the other (the fake slots' claims fail: jobs idle
    # again), each starting a second after the capture ended (a comparison needs the
    # capture over before the cycle's first second)
    time.sleep(2)
    force_cycle(pool, first)
    pool.wait_for(lambda: len(pool.jobs("ClusterId", constraint="JobStatus == 1")) == 12,
                  120, "every job idle again", every=1)
    time.sleep(1.5)                 # the two cycles in different seconds
    force_cycle(pool, second)
    time.sleep(1)

    # pass 2: each stream compares pass 1's cycle with its own negotiator's real one
    recs = shadow_once(pool, state)
    by = {r["pool"].split("(negotiator ")[1][:-1]: r for r in recs}
    for name, real in ((first, 4), (second, 3)):
        comparison = by[name]["comparison"]
        assert comparison is not None, by[name]["reason"]
        assert comparison["real_matches"] == real
        assert comparison["shadow_matches"] == real
        # each from its own negotiator's ad (NEGOTIATOR_EXT_MATCHLOG names one file):
        # the per-submitter counts need the claims to start, which fake slots refuse
        assert comparison["source"] == "negotiator-ad"
    # each its own negotiator's cycle (its ad's), the first one's before the second one's
    ads = negotiators(pool)
    times = [by[n]["comparison"]["real_cycle_time"] for n in (first, second)]
    assert times == [ads[n]["LastNegotiationCycleTime0"] for n in (first, second)]
    assert times[0] < times[1], times
