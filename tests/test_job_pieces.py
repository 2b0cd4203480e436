"""Job files read in pieces by two processes (adapters/job_pieces.py) are the files read
whole: the same rows in the same order, the same names as first spelled, the same queue
heads, and every error named as the whole read names it."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import FIXTURES, SCENARIOS
from negotiator_ext.adapters import adfiles, job_pieces, snapshot
from negotiator_ext.adapters import classad_semantics
from negotiator_ext.core.adtext import TextStore
from negotiator_ext.core.job_queue import queue_heads
from negotiator_ext.errors import InputError


@pytest.fixture
def in_pieces(monkeypatch):
    """Any job file read in pieces, in a child and here."""
    monkeypatch.setattr(snapshot, "FORK_JOB_BYTES", 0)
    monkeypatch.setattr(job_pieces, "PIECE_JOB_BYTES", 0)
    monkeypatch.setattr(job_pieces, "PIECES", 7)
    read = []
    real = job_pieces.read_pieces

    def counted(pieces, claims, front, ids_of=None):
        read.append((front, len(pieces)))
        return real(pieces, claims, front, ids_of)
    monkeypatch.setattr(job_pieces, "read_pieces", counted)
    return read


def whole(path, monkeypatch):
    monkeypatch.setattr(snapshot, "FORK_JOB_BYTES", 1 << 60)
    return snapshot.load_snapshot(path)


def same_tables(got, want) -> None:
    assert list(got) == list(want) and want
    classad_semantics.enable()
    for name, table in want.items():
        assert got[name].rows == table.rows, name
        assert got[name].store.names == table.store.names, name
        assert list(got[name].store.names) == list(table.store.names), name
        assert got[name].heads == queue_heads(table), name     # (worked out beside)
        # the run flags too, but for a piece's first row (the row before is another
        # piece's: no run)
        runs = bytearray()
        queue_heads(table, runs)
        flags = got[name].runs
        assert len(flags) == len(runs), name
        assert all(g <= w for g, w in zip(flags, runs)), name
        assert sum(runs) - sum(flags) <= job_pieces.PIECES, name


@pytest.mark.parametrize("scenario", SCENARIOS[:8])
def test_a_snapshot_read_in_pieces_is_the_snapshot_read_whole(scenario, in_pieces,
                                                              monkeypatch):
    pieces = job_pieces.plan(sorted((FIXTURES / scenario).glob("jobs*.ads")),
                             [p.stat().st_size for p in sorted((FIXTURES / scenario)
                                                               .glob("jobs*.ads"))])
    got = snapshot.load_snapshot(FIXTURES / scenario)
    if pieces is None:
        pytest.skip("one ad: nothing to cut")
    assert len(pieces) > 1 and in_pieces == [(False, len(pieces))]   # (here; the child's
    same_tables(got.jobs, whole(FIXTURES / scenario, monkeypatch).jobs)  # count is its own)


def write_jobs(path, n: int, bad_at: int | None = None, crlf: bool = False,
               blanks: str = "\n", cluster0: int = 10) -> None:
    ads = []
    for i in range(n):
        lines = [f"ClusterId = {cluster0 + i // 5}", f"ProcId = {i % 5}", "JobStatus = 1",
                 f'Owner = "{"ab"[i % 2]}"', f'User = "{"ab"[i % 2]}@site"',
                 f"RequestCpus = {1 + i % 3}", f'Cmd = "/bin/sleep {"é" * (i % 2)}"',
                 'Requirements = TARGET.Cpus >= MY.RequestCpus']
        if i % 7 == 3:
            lines.insert(2, "# a comment line")
        if bad_at == i:
            lines.append("RequestMemory = 1 +* 2")
        ads.append("\n".join(lines) + "\n")
    text = blanks.join(ads)
    if crlf:
        text = text.replace("\n", "\r\n")
    path.write_bytes(text.encode())


def plan_of(files, pieces: int):
    """`job_pieces.plan` of `files` into `pieces` pieces, whatever their size."""
    old = job_pieces.PIECE_JOB_BYTES, job_pieces.PIECES
    job_pieces.PIECE_JOB_BYTES, job_pieces.PIECES = 0, pieces
    try:
        return job_pieces.plan(files, [f.stat().st_size for f in files])
    finally:
        job_pieces.PIECE_JOB_BYTES, job_pieces.PIECES = old


def snapshot_dir(tmp_path, n: int, **kw):
    """A snapshot of a fixture's slots with `n` jobs of `write_jobs`."""
    snap = tmp_path / "snap"
    snap.mkdir()
    for f in ("slots.ads", "submitters.ads", "config"):
        (snap / f).write_bytes((FIXTURES / SCENARIOS[0] / f).read_bytes())
    write_jobs(snap / "jobs.ads", n, **kw)
    return snap


def test_pieces_from_either_side_put_back_together_are_the_file(tmp_path):
    f = tmp_path / "jobs.ads"
    write_jobs(f, 120, blanks="\n\n")
    pieces = plan_of([f], 9)
    assert pieces is not None and len(pieces) >= 5
    assert [p.end for p in pieces[:-1]] == [p.start for p in pieces[1:]]
    want = adfiles.read_text_ads(f)
    for k in range(len(pieces) + 1):
        a, b = TextStore(), TextStore()
        front = {i: job_pieces.read_piece(pieces[i], a) for i in range(k)}
        back = {i: job_pieces.read_piece(pieces[i], b) for i in range(k, len(pieces))}
        got = job_pieces.merge(pieces, {"tables": front}, {"tables": back})
        assert got["jobs.ads"].rows == want.rows, k
        assert list(got["jobs.ads"].store.names) == list(want.store.names), k
        # every distinct line of every piece is in the one store, as in a whole read
        # (slot_projection walks a snapshot's job texts through it)
        assert set(got["jobs.ads"].store.pairs) == set(want.store.pairs), k
    # a piece missing, or read twice: no answer (the caller reads the files whole)
    store = TextStore()
    each = {i: job_pieces.read_piece(p, store) for i, p in enumerate(pieces)}
    assert job_pieces.merge(pieces, {"tables": dict(list(each.items())[1:])}) is None
    assert job_pieces.merge(pieces, {"tables": {0: each[0]}}, {"tables": each}) is None
    # a side's job ids: one read on both sides (or twice on one) is no answer either
    every = {"tables": each, "ids": {("s", 1, 0)}}
    assert job_pieces.merge(pieces, every) is not None
    assert job_pieces.merge(pieces, {"tables": {}, "ids": {("s", 1, 0)}}, every) is None
    assert job_pieces.merge(pieces, {"tables": each, "ids": None}) is None


def test_a_bad_ad_in_a_late_piece_is_named_as_a_whole_read_names_it(tmp_path, in_pieces,
                                                                     monkeypatch):
    snap = snapshot_dir(tmp_path, 300, bad_at=280)
    with pytest.raises(InputError) as got:
        snapshot.load_snapshot(snap)
    assert in_pieces, "not read in pieces"
    with pytest.raises(InputError) as want:
        whole(snap, monkeypatch)
    assert str(got.value) == str(want.value)
    assert "line" in str(want.value) and "RequestMemory" in str(want.value)


def test_a_job_twice_across_pieces_is_named_as_a_whole_read_names_it(tmp_path, in_pieces,
                                                                      monkeypatch):
    snap = snapshot_dir(tmp_path, 200)
    first = (snap / "jobs.ads").read_text().split("\n\n")[0]
    with open(snap / "jobs.ads", "a") as out:
        out.write("\n" + first + "\n")           # job 10.0 again, at the end
    with pytest.raises(InputError) as got:
        snapshot.load_snapshot(snap)
    with pytest.raises(InputError) as want:
        whole(snap, monkeypatch)
    assert str(got.value) == str(want.value) and "10.0" in str(want.value)


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 60), pieces=st.integers(2, 12), crlf=st.booleans(),
       blanks=st.sampled_from(["\n", "\n\n", "\n \n", "\n\n\n"]))
def test_any_cut_of_a_job_file_reads_as_the_whole(tmp_path_factory, n, pieces, crlf,
                                                  blanks):
    f = tmp_path_factory.mktemp("cut") / "jobs.ads"
    write_jobs(f, n, crlf=crlf, blanks=blanks)
    plan = plan_of([f], pieces)
    want = adfiles.read_text_ads(f)
    if plan is None:
        return                                  # one piece: read whole
    store = TextStore()
    got = job_pieces.merge(plan, {"tables": {i: job_pieces.read_piece(p, store)
                                             for i, p in enumerate(plan)}})
    assert got["jobs.ads"].rows == want.rows
    assert len(want.rows) == n


def test_a_json_file_is_one_piece(tmp_path):
    f = tmp_path / "jobs.json"
    f.write_text('[\n' + ",\n".join(f'{{"ClusterId": 1, "ProcId": {i}, "JobStatus": 1}}'
                                     for i in range(500)) + "\n]\n")
    g = tmp_path / "jobs.ads"
    write_jobs(g, 100)
    plan = plan_of([f, g], 8)
    assert plan is not None
    assert [p for p in plan if p.path == f] == [job_pieces.Piece(f, 0, f.stat().st_size,
                                                                 whole=True)]
    assert len([p for p in plan if p.path == g]) > 1
    store = TextStore()
    got = job_pieces.merge(plan, {"tables": {i: job_pieces.read_piece(p, store)
                                             for i, p in enumerate(plan)}})
    assert got["jobs.json"].rows == adfiles.read_text_ads(f).rows
    assert got["jobs.ads"].rows == adfiles.read_text_ads(g).rows


def test_a_child_that_dies_after_taking_a_piece_leaves_the_files_read_whole(
        tmp_path, monkeypatch):
    """The child takes a piece and dies without an answer: the piece is missing from
    both sides, so the files are read again whole here."""
    import os
    snap = snapshot_dir(tmp_path, 300)
    monkeypatch.setattr(snapshot, "FORK_JOB_BYTES", 0)
    monkeypatch.setattr(job_pieces, "PIECE_JOB_BYTES", 0)
    parent = os.getpid()
    real = job_pieces.read_pieces
    wholes = []

    def dies(pieces, claims, front, ids_of=None):
        if os.getpid() != parent:
            claims.take(True)
            os._exit(1)
        return real(pieces, claims, front, ids_of)
    monkeypatch.setattr(job_pieces, "read_pieces", dies)
    real_whole = snapshot._read_job_files
    monkeypatch.setattr(snapshot, "_read_job_files",
                        lambda *a: wholes.append(1) or real_whole(*a))
    got = snapshot.load_snapshot(snap)
    assert wholes == [1]
    assert got.jobs["jobs.ads"].rows == adfiles.read_text_ads(snap / "jobs.ads").rows


def test_without_shared_semaphores_the_child_reads_the_files_whole(tmp_path, in_pieces,
                                                                   monkeypatch):
    """Where no shared lock can be made (no /dev/shm), nothing is read in pieces."""
    snap = snapshot_dir(tmp_path, 200)

    def no_lock(n):
        raise OSError(38, "Function not implemented")
    monkeypatch.setattr(job_pieces, "Claims", no_lock)
    got = snapshot.load_snapshot(snap)
    assert in_pieces == []
    assert got.jobs["jobs.ads"].rows == adfiles.read_text_ads(snap / "jobs.ads").rows


def test_several_job_files_in_pieces_share_one_store_as_a_whole_read_does(
        tmp_path, in_pieces, monkeypatch):
    """Three job files, one with an attribute the others lack: read in pieces, each
    file's rows as read whole, and one set of names for all, in the files' order."""
    snap = snapshot_dir(tmp_path, 150)
    (snap / "jobs.ads").rename(snap / "jobs-a.ads")
    write_jobs(snap / "jobs-b.ads", 90, cluster0=1000)
    text = (snap / "jobs-b.ads").read_text().replace("JobStatus = 1\n",
                                                      "JobStatus = 1\nWantedExtra = 3\n")
    (snap / "jobs-b.ads").write_text(text)
    write_jobs(snap / "jobs-c.ads", 120, cluster0=2000)
    got = snapshot.load_snapshot(snap)
    assert in_pieces
    want = whole(snap, monkeypatch)
    same_tables(got.jobs, want.jobs)
    assert "wantedextra" in got.jobs["jobs-c.ads"].store.names


def test_names_come_in_the_files_order_whichever_side_read_which_piece(tmp_path):
    """Names first written late in the file, in an order the back-to-front reading
    meets the other way round, and a name spelled two ways: one side reading every
    piece from the back gives the whole read's names, in its order and spelling."""
    f = tmp_path / "jobs.ads"
    write_jobs(f, 300)
    ads = f.read_text().split("\n\n")
    ads[40] = ads[40].replace("RequestCpus", "requestCPUS")
    ads[250] += "\nZetaAttr = 1"
    ads[290] += "\nAlphaAttr = 2"
    f.write_text("\n\n".join(ads))
    pieces = plan_of([f], 12)
    back = job_pieces.read_pieces(pieces, job_pieces.Claims(len(pieces)), False)
    got = job_pieces.merge(pieces, back)["jobs.ads"]
    want = adfiles.read_text_ads(f)
    assert got.rows == want.rows
    assert list(got.store.names.items()) == list(want.store.names.items())
    assert list(want.store.names).index("zetaattr") < list(want.store.names).index("alphaattr")
