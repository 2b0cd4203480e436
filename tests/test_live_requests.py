"""A real schedd captured by its resource requests (adapters/resource_requests.py)
against the same schedd queried whole: the same jobs and values, the jobs the schedd
has no autocluster for queried whole, and the same cycle from the two snapshots.

These run only where an HTCondor install is found (see tests/livepool.py); elsewhere
they skip with one line saying how to enable them.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from negotiator_ext.adapters.adfiles import read_ads
from negotiator_ext.adapters.resource_requests import LEFT_OUT

pytestmark = pytest.mark.live


def one_pass(pool, state: Path, by_requests: bool) -> Path:
    env = dict(pool.env, _CONDOR_NEGOTIATOR_EXT_CAPTURE_REQUESTS=str(by_requests),
               _CONDOR_NEGOTIATOR_EXT_CAPTURE_BESIDE="False")
    proc = subprocess.run(
        [sys.executable, "-m", "negotiator_ext", "shadow", "--once", "--pool", pool.collector,
         "--state-dir", str(state), "--no-advertise", "--json"],
        env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    rec = json.loads(proc.stdout.strip().splitlines()[-1])
    assert rec["status"] in ("complete", "partial"), rec["reason"]
    return Path(rec["snapshot_dir"])


def qedit(pool, job: str, attr: str, value: str) -> None:
    """condor_qedit, through the bindings (the test install has no condor_qedit), as the
    jobs' owner."""
    code = ("import htcondor2, sys; "
            "htcondor2.Schedd().edit(sys.argv[1], sys.argv[2], sys.argv[3])")
    proc = subprocess.run(pool.as_user([sys.executable, "-c", code, job, attr, value]),
                          env=pool.env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr


def negotiate(pool, snap: Path) -> dict:
    proc = subprocess.run([sys.executable, "-m", "negotiator_ext", "negotiate", str(snap),
                           "--json"], env=pool.env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_a_real_schedd_by_requests_gives_the_whole_jobs_values(clean_pool, tmp_path):
    pool = clean_pool
    # jobs nothing matches (they stay idle): three autoclusters, one whose Requirements
    # reads an attribute of the job's own (the schedd adds it to the signature)
    never = ["requirements = TARGET.Cpus > 1000"]
    a = pool.submit(count=4, group="group_a", user="alice", extra=never)
    b = pool.submit(count=3, group="group_b", user="bob", request_cpus=2, extra=never)
    c = pool.submit(count=2, group="group_b", user="carol",
                    extra=["+Wanted = 7", "requirements = MY.Wanted > 100 && TARGET.Cpus > 0"])
    # the schedd works the autoclusters out when the negotiator asks for its requests
    pool.wait_for(lambda: all(v != "undefined" for (v,) in pool.jobs("AutoClusterId")),
                  60, "every job's AutoClusterId")
    # an edited significant attribute takes a job's id away; a new job has none yet
    qedit(pool, f"{a}.1", "RequestMemory", "128")
    d = pool.submit(count=1, group="group_a", user="alice", extra=never)
    ids = {tuple(map(int, r[:2])): r[2] for r in pool.jobs("ClusterId", "ProcId",
                                                          "AutoClusterId")}
    assert ids[(a, 1)] == "undefined"
    without = {k for k, v in ids.items() if v == "undefined"}
    assert (a, 1) in without and len(without) <= 2     # (the new one may have one by now)

    # the collector's submitter ads decide which submitters a cycle has: wait for the
    # schedd to have sent each one its idle jobs, so both passes see the same three
    want = {"group_a.alice": 5, "group_b.bob": 3, "group_b.carol": 2}
    def sent() -> bool:
        got = {n.split("@")[0]: k for n, k in pool.submitters().items()}
        return all(got.get(n) == k for n, k in want.items())
    pool.wait_for(sent, 60, "the three submitters' ads with their idle jobs")
    snap_r = one_pass(pool, tmp_path / "r", True)
    snap_w = one_pass(pool, tmp_path / "w", False)
    meta_r = json.loads((snap_r / "meta.json").read_text())
    meta_w = json.loads((snap_w / "meta.json").read_text())
    assert "captured_by_requests" not in meta_w
    (stats,) = meta_r["captured_by_requests"].values()
    assert stats["jobs_by_request"] + stats["jobs_whole"] == 10
    assert stats["jobs_whole"] >= 1 and stats["autoclusters"] >= 3
    # bob's and carol's clusters are runs of alike jobs (one group query); alice's first
    # cluster, with its edited job, is asked job by job
    assert stats["job_runs"] >= 2

    (fr,), (fw,) = sorted(snap_r.glob("jobs-*.ads")), sorted(snap_w.glob("jobs-*.ads"))
    jr = {(j["ClusterId"], j["ProcId"]): j for j in read_ads(fr)}
    jw = {(j["ClusterId"], j["ProcId"]): j for j in read_ads(fw)}
    assert set(jr) == set(jw) == set(ids)
    left_out = {x.lower() for x in LEFT_OUT}
    for key, whole in jw.items():
        got = jr[key]
        mine = {k.lower(): got.lookup(k) for k in got.keys() if k != "ServerTime"}
        theirs = {k.lower(): whole.lookup(k) for k in whole.keys() if k != "ServerTime"}
        if "globaljobid" in mine:                # queried whole: every attribute
            assert mine.keys() == theirs.keys(), key
        else:
            assert set(theirs) - set(mine) <= left_out, key
        for k, v in mine.items():
            assert str(v) == str(theirs[k]), (key, k)
    assert jr[(a, 1)]["RequestMemory"] == 128 and "GlobalJobId" in jr[(a, 1)]
    assert jr[(c, 0)]["Wanted"] == 7 and "GlobalJobId" not in jr[(c, 0)]
    assert jr[(b, 2)]["RequestCpus"] == 2
    assert (d, 0) in jr

    # the same cycle: every request rejected for the same reason, the same submitters
    nr, nw = negotiate(pool, snap_r), negotiate(pool, snap_w)
    assert nr["matches"] == nw["matches"] == []
    key = lambda r: (r["submitter"], r["job"], r["reason"])     # noqa: E731
    assert sorted(map(key, nr["rejections"])) == sorted(map(key, nw["rejections"]))
    assert len(nr["rejections"]) >= 3
    assert [(s["name"], s["group"]) for s in nr["submitters"]] == [
        (s["name"], s["group"]) for s in nw["submitters"]]


def test_a_real_schedd_asked_in_pieces_gives_each_job_once(clean_pool, monkeypatch):
    """A queue larger than one answer (schedd_query.JOBS_PER_QUERY, 4 here) asked of a
    real schedd: its SummaryOnly count sets the pieces, each job comes in exactly one,
    and the lines are those of the same jobs asked in one answer."""
    import htcondor2
    from negotiator_ext.adapters import schedd_query
    from negotiator_ext.adapters.job_projection import BASE_JOB_ATTRS
    pool = clean_pool
    never = ["requirements = TARGET.Cpus > 1000"]
    pool.submit(count=9, group="group_a", user="alice", extra=never)
    for _ in range(3):
        pool.submit(count=1, group="group_b", user="bob", extra=never)
    pool.wait_for(lambda: len(pool.jobs("ClusterId")) == 12, 60, "the 12 jobs queued")
    collector = htcondor2.Collector(pool.collector)

    def capture() -> dict:
        errors: dict = {}
        got, answered, missing = schedd_query._query_schedds(
            htcondor2, collector, list(BASE_JOB_ATTRS), errors)
        assert errors == {} and missing == [] and len(got) == 1
        return {tuple(sorted(job)) for job in got[0][1]}

    one_answer = capture()
    asked: list[tuple[str, int]] = []
    query = htcondor2.Schedd.query

    def counted(self, constraint="True", projection=[], callback=None, limit=-1, opts=None):
        answer = query(self, constraint, projection, callback, limit,
                       htcondor2.QueryOpt.Default if opts is None else opts)
        asked.append((str(constraint), len(answer)))
        return answer
    monkeypatch.setattr(htcondor2.Schedd, "query", counted)
    monkeypatch.setattr(schedd_query, "JOBS_PER_QUERY", 4)
    in_pieces = capture()
    assert len(one_answer) == 12 and in_pieces == one_answer
    # the first answer stopped at 5, the count (one ad) said 12: 3 pieces and one spare
    assert [n for _, n in asked[:2]] == [5, 1]
    pieces = asked[2:]
    assert [c for c, _ in pieces] == [
        f"({schedd_query.JOB_CONSTRAINT}) && (ClusterId + ProcId) % 4 == {i}" for i in range(4)]
    assert sum(n for _, n in pieces) == 12 and max(n for _, n in pieces) <= 4
