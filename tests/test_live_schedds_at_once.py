"""A pool of several real schedds asked at once by a loop's worker
(adapters/schedd_query.py, NEGOTIATOR_EXT_SCHEDD_QUERIES_AT_ONCE): each schedd in a child
process of its own, its jobs coded against the loop's last answer there, the answers put
back together in the schedds' order. The snapshot is the one a `shadow --once` pass
writes, asking them one after another (whatever the knob says).

These run only where an HTCondor install is found (see tests/livepool.py); elsewhere
they skip with one line saying how to enable them.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.live

@pytest.fixture(scope="module")
def pool3():
    """A pool whose master runs three schedds, each with jobs nothing matches: 4, 3 and
    3 jobs of two submitters, the second schedd's of two autoclusters."""
    from livepool import SKIP_REASON, find_release, start_pool
    release = find_release()
    if release is None:
        pytest.skip(SKIP_REASON)
    pool = start_pool(release, schedds=3)
    try:
        pool.wait_for(lambda: len(pool.schedd_names()) == 3, 60, "the three schedds")
        one, two, three = pool.names = pool.schedd_names()
        never = ["requirements = TARGET.Cpus > 1000"]
        pool.submit(count=4, group="group_a", user="alice", extra=never, schedd=one)
        pool.submit(count=2, group="group_b", user="bob", extra=never, schedd=two)
        pool.submit(count=1, group="group_b", user="bob", request_cpus=2, extra=never,
                    schedd=two)
        pool.submit(count=3, group="group_a", user="alice", extra=never, schedd=three)
        pool.wait_for(lambda: queued(pool) == 10, 60, "the jobs queued, with their autoclusters")
        yield pool
    finally:
        pool.stop()
        shutil.rmtree(pool.root, ignore_errors=True)


def queued(pool) -> int:
    """The jobs of every schedd (`condor_q -global`) that have their autocluster (the
    schedd works them out when the negotiator asks for its requests): every pass
    captures them by their requests, whichever pass comes first."""
    out = pool.tool("condor_q", "-global", "-allusers", "-af", "AutoClusterId",
                    check=False)
    return sum(v != "undefined" for v in out.stdout.split())


def once(pool, state: Path, at_once: int) -> tuple[Path, dict]:
    env = dict(pool.env, _CONDOR_NEGOTIATOR_EXT_SCHEDD_QUERIES_AT_ONCE=str(at_once))
    proc = subprocess.run(
        [sys.executable, "-m", "negotiator_ext", "shadow", "--once", "--pool",
         pool.collector, "--state-dir", str(state), "--no-advertise", "--json"],
        env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    rec = json.loads(proc.stdout.strip().splitlines()[-1])
    assert rec["status"] == "complete", rec["reason"]
    snap = Path(rec["snapshot_dir"])
    return snap, json.loads((snap / "meta.json").read_text())


def jobs_files(snap: Path) -> dict[str, list[str]]:
    """Each jobs file's lines, but the time the schedd answered (ServerTime)."""
    return {p.name: [ln for ln in p.read_text().splitlines()
                     if not ln.startswith("ServerTime = ")]
            for p in sorted(snap.glob("jobs-*.ads"))}


@pytest.mark.parametrize("at_once", [2, 3])
def test_a_loops_worker_asks_its_schedds_at_once(pool3, tmp_path, monkeypatch, at_once):
    from livepool import loop_passes
    from negotiator_ext.adapters.worker import Worker
    from negotiator_ext.shadow import ShadowLoop
    from negotiator_ext.shadow_state import ShadowSettings

    monkeypatch.setenv("CONDOR_CONFIG", pool3.env["CONDOR_CONFIG"])
    settings = ShadowSettings.from_knobs({"SCHEDD_QUERIES_AT_ONCE": str(at_once)},
                                         pool=pool3.collector, interval=1,
                                         state_dir=str(tmp_path / "state"),
                                         advertise=False, metrics_file="")
    assert settings.schedds_at_once == at_once
    before = queued(pool3)
    loop = ShadowLoop(settings)
    loop.worker = Worker(preload=("negotiator_ext.adapters.live",))

    def between(recs):
        if len(recs) == 1:      # a job more between the passes: the delta names it
            pool3.submit(count=1, group="group_b", user="bob",
                         extra=["requirements = TARGET.Cpus > 1000"], schedd=pool3.names[2])
            pool3.wait_for(lambda: queued(pool3) == before + 1, 60,
                           "the job, with its autocluster")
    recs = loop_passes(loop, 3, 120, between)
    assert [r.status for r in recs] == ["complete"] * 3, [r.reason for r in recs]
    metas = [json.loads((Path(r.snapshot_dir) / "meta.json").read_text()) for r in recs]
    assert [m["counts"]["jobs"] for m in metas] == [before, before + 1, before + 1]
    assert [m["missing_schedds"] for m in metas] == [[]] * 3
    # the last pass took the worker's answer, built on the one before
    assert loop.known_lines.jobs.taken and loop.known_lines.jobs.base is not None
    # the same files as `shadow --once` passes asking one schedd after another (the
    # second of them with the first's projection, beside its slot steps), the knob or not
    for knob in (1, at_once):
        once(pool3, tmp_path / f"alone-{knob}", knob)
        alone, meta = once(pool3, tmp_path / f"alone-{knob}", knob)
        assert meta["schedds_queried"] == "beside the slots"
        assert jobs_files(Path(recs[-1].snapshot_dir)) == jobs_files(alone)


def test_a_frozen_schedd_among_those_asked_at_once_is_named_and_the_others_kept(
        pool3, tmp_path, monkeypatch):
    """One of the three schedds stopped (SIGSTOP: it takes connections, never answers)
    while the worker asks two at a time: the pass ends after the bound, partial, naming
    that schedd only, with the other two schedds' jobs."""
    from livepool import loop_passes
    from negotiator_ext.adapters.worker import Worker
    from negotiator_ext.shadow import ShadowLoop
    from negotiator_ext.shadow_state import ShadowSettings

    monkeypatch.setenv("CONDOR_CONFIG", pool3.env["CONDOR_CONFIG"])
    settings = ShadowSettings.from_knobs({"SCHEDD_QUERIES_AT_ONCE": "2"},
                                         pool=pool3.collector, interval=1, timeout=3,
                                         state_dir=str(tmp_path / "state"),
                                         advertise=False, metrics_file="")
    loop = ShadowLoop(settings)
    loop.worker = Worker(preload=("negotiator_ext.adapters.live",))
    frozen = pool3.names[1]
    pid = _schedd_pid(frozen.split("@")[0])
    os.kill(pid, signal.SIGSTOP)
    try:
        recs = loop_passes(loop, 1, 60)
    finally:
        os.kill(pid, signal.SIGCONT)
    (rec,) = recs
    assert rec.status == "partial", rec.reason
    meta = json.loads((Path(rec.snapshot_dir) / "meta.json").read_text())
    assert meta["missing_schedds"] == [frozen]
    assert "did not answer within 3 s" in meta["errors"][frozen]
    others = [n for n in pool3.names if n != frozen]
    files = jobs_files(Path(rec.snapshot_dir))
    assert sorted(files) == sorted(f"jobs-{n}.ads" for n in others)
    assert all(files.values())


def _schedd_pid(local_name: str) -> int:
    """The pid of the pool's schedd started with `-local-name local_name`."""
    for proc in Path("/proc").iterdir():
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if argv[0].endswith(b"condor_schedd") and local_name.encode() in argv[1:]:
            return int(proc.name)
    raise RuntimeError(f"no condor_schedd -local-name {local_name}")
