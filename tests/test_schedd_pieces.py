"""A schedd asked for more jobs than one answer should hold (adapters/schedd_query.py,
JOBS_PER_QUERY): asked again in pieces, each job in exactly one piece, and the same jobs
captured as from one answer. A schedd whose answer to a piece holds a job of another
piece is one that did not answer. tests/test_live_requests.py asks a real schedd in
pieces."""

from __future__ import annotations

import classad2
import htcondor2
import pytest

from negotiator_ext.adapters import schedd_query
from negotiator_ext.adapters.adfiles import read_ads
from negotiator_ext.adapters.live import capture_snapshot

from fakepool import FakePool, FakeSchedd

NOW = 1795265300


@pytest.fixture
def pool(mocker):
    return FakePool().install(mocker)


def _jobs(path) -> dict:
    return {(ad.eval("ClusterId"), ad.eval("ProcId")): ad.printOld() for ad in read_ads(path)}


def _vm_constraints(pool) -> list[str]:
    return [str(c[2]) for c in pool.calls if c[0] == "Schedd.query" and c[1] == "vm"]


def test_a_queue_larger_than_one_answer_is_asked_in_pieces_with_the_same_jobs(
        pool, tmp_path, monkeypatch):
    capture_snapshot(None, tmp_path / "whole", now=NOW)
    assert len(_vm_constraints(pool)) == 1          # 52 jobs: one answer
    pool.calls.clear()
    monkeypatch.setattr(schedd_query, "JOBS_PER_QUERY", 10)
    report = capture_snapshot(None, tmp_path / "pieces", now=NOW)
    assert report.missing_schedds == () and dict(report.errors) == {}
    asked = _vm_constraints(pool)
    # the first answer (11 of 52: more than 10), the count, then ceil(52 / 10) + 1 pieces
    assert len(asked) == 2 + 7
    assert asked[2:] == [f"({schedd_query.JOB_CONSTRAINT}) && (ClusterId + ProcId) % 7 == {i}"
                         for i in range(7)]
    whole, pieces = _jobs(tmp_path / "whole" / "jobs-vm.ads"), _jobs(
        tmp_path / "pieces" / "jobs-vm.ads")
    assert len(whole) == 52 and pieces == whole


def test_a_schedd_that_gives_no_count_is_asked_in_the_uncounted_pieces(
        pool, tmp_path, monkeypatch):
    monkeypatch.setattr(schedd_query, "JOBS_PER_QUERY", 10)
    real = FakeSchedd.query

    def no_count(self, *a, opts=None, **kw):
        if opts == htcondor2.QueryOpt.SummaryOnly:
            return ["not a summary"]
        return real(self, *a, opts=opts, **kw)
    monkeypatch.setattr(FakeSchedd, "query", no_count)
    report = capture_snapshot(None, tmp_path / "snap", now=NOW)
    assert report.missing_schedds == () and report.jobs == 52
    assert len(_vm_constraints(pool)) == 1 + schedd_query.PIECES_UNCOUNTED


def test_a_schedd_answering_a_piece_with_another_pieces_job_did_not_answer(
        pool, tmp_path, monkeypatch):
    monkeypatch.setattr(schedd_query, "JOBS_PER_QUERY", 10)
    real = FakeSchedd.query

    def ignores_pieces(self, constraint="True", *a, **kw):
        if "%" in str(constraint):
            constraint = schedd_query.JOB_CONSTRAINT       # every job, every time
        return real(self, constraint, *a, **kw)
    monkeypatch.setattr(FakeSchedd, "query", ignores_pieces)
    report = capture_snapshot(None, tmp_path / "snap", now=NOW)
    assert report.missing_schedds == ("vm",) and report.partial is True
    assert "to the query for piece 0 of 7" in report.errors["vm"]
    assert "not what was asked" in report.errors["vm"]


class _Queue:
    """A schedd's queue of `ids` ((ClusterId, ProcId)), asked as the bindings ask."""

    def __init__(self, ids):
        self.ads = [classad2.ClassAd({"ClusterId": c, "ProcId": p, "JobStatus": 1,
                                      "Owner": "u"}) for c, p in ids]
        self.sizes: list[int] = []

    def query(self, constraint="true", projection=(), limit=-1, opts=None):
        expr = classad2.ExprTree(constraint)
        got = [ad for ad in self.ads if expr.eval(ad) is True]
        if opts == htcondor2.QueryOpt.SummaryOnly:
            return [classad2.ClassAd({"MyType": "Summary", "Jobs": len(got)})]
        got = got[:limit] if limit >= 0 else got
        self.sizes.append(len(got))
        return got


@pytest.mark.parametrize("ids", [
    [(7, p) for p in range(95)],                    # one large cluster
    [(c, 0) for c in range(1, 96)],                 # one-job clusters
    [(c, p) for c in range(1, 20) for p in range(c % 7)],     # a mix
])
def test_pieces_split_any_queue_evenly_and_hold_every_job_once(ids, monkeypatch):
    monkeypatch.setattr(schedd_query, "JOBS_PER_QUERY", 20)
    queue = _Queue(ids)
    lines = schedd_query._asked_whole(queue, "JobStatus == 1", [], {}, lambda _: None,
                                      htcondor2.QueryOpt.SummaryOnly)
    got = sorted((int(dict(ln.split(" = ", 1) for ln in job)["ClusterId"]),
                  int(dict(ln.split(" = ", 1) for ln in job)["ProcId"])) for job in lines)
    assert got == sorted(ids)
    if len(ids) > 20:
        first, *pieces = queue.sizes
        assert first == 21 and len(pieces) == -(-len(ids) // 20) + 1
        assert max(pieces) <= -(-len(ids) // len(pieces)) + 3     # about even
    else:
        assert queue.sizes == [len(ids)]                # one answer, as before
