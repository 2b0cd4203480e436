"""Reading a snapshot on two cores (adapters/beside.py): the job files are read in a
forked child while the slot ads are parsed in the parent. What the child reads, and
every error it meets, must be what reading in the parent gives."""

from __future__ import annotations

import os
import threading
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import SCENARIOS, writable_copy
from negotiator_ext import cli
from negotiator_ext.adapters import adfiles, beside, snapshot
from negotiator_ext.adapters.ledger import LedgerError
from negotiator_ext.cycle import run_cycle
from negotiator_ext.pool import load_pool


@pytest.fixture
def forks(monkeypatch):
    """Every job file read in a child (whatever its size); counts the forks."""
    monkeypatch.setattr(snapshot, "FORK_JOB_BYTES", 0)
    count = []
    real_fork = os.fork

    def fork():
        pid = real_fork()
        if pid:
            count.append(pid)
        return pid
    monkeypatch.setattr(beside.os, "fork", fork)
    return count


@pytest.mark.parametrize("scenario", SCENARIOS[:6])
def test_jobs_read_in_a_child_are_the_jobs_read_here(scenario, forks, monkeypatch):
    from conftest import FIXTURES
    here = snapshot.load_snapshot(FIXTURES / scenario, jobs=True)
    assert forks, "no child was forked"
    monkeypatch.setattr(snapshot, "FORK_JOB_BYTES", 1 << 60)
    alone = snapshot.load_snapshot(FIXTURES / scenario)
    assert len(forks) == 1
    assert set(here.jobs) == set(alone.jobs) and here.jobs
    for name in alone.jobs:
        assert list(here.jobs[name].rows) == list(alone.jobs[name].rows)
        assert here.jobs[name].store.names == alone.jobs[name].store.names


def test_same_cycle_either_way(forks, monkeypatch):
    from conftest import FIXTURES
    path = FIXTURES / "hgq_nested_hep_lep_surplus"
    forked = run_cycle(load_pool(path)).to_json()
    assert forks
    monkeypatch.setattr(snapshot, "FORK_JOB_BYTES", 1 << 60)
    assert run_cycle(load_pool(path)).to_json() == forked


def test_a_bad_job_file_read_in_a_child_is_named_as_here(tmp_path, forks, monkeypatch, capsys):
    snap = writable_copy(tmp_path, "hgq_nested_hep_lep_surplus")
    jobs = sorted(snap.glob("jobs*.ads"))[0]
    lines = jobs.read_text().splitlines()
    at = next(i for i, ln in enumerate(lines) if ln.startswith("RequestCpus"))
    lines[at] = "RequestCpus = (1 +"
    jobs.write_text("\n".join(lines) + "\n")
    assert cli.main(["negotiate", str(snap)]) == 2
    forked = capsys.readouterr().err
    assert forks
    monkeypatch.setattr(snapshot, "FORK_JOB_BYTES", 1 << 60)
    assert cli.main(["negotiate", str(snap)]) == 2
    alone = capsys.readouterr().err
    assert forked == alone
    assert f"{jobs}: line {at + 1}: " in alone and "attribute RequestCpus" in alone


def test_a_bad_slot_file_is_reported_first_and_the_child_is_stopped(tmp_path, forks, capsys):
    snap = writable_copy(tmp_path, "hgq_nested_hep_lep_surplus")
    (snap / "slots.ads").write_text('Name = "a"\nCpus = (\n')
    assert cli.main(["negotiate", str(snap)]) == 2
    assert "slots.ads: line 2" in capsys.readouterr().err
    assert forks
    for pid in forks:                       # no child left behind
        with pytest.raises(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)


def test_input_errors_cross_from_the_child_whole():
    def fail():
        raise LedgerError("ledger.sqlite", "locked", transient=True, line=3, ad="x")
    with pytest.raises(LedgerError) as got:
        beside.Beside(fail).result()
    e = got.value
    assert (e.source, e.message, e.line, e.ad, e.transient) == ("ledger.sqlite", "locked", 3, "x", True)
    assert str(e) == e.one_line() == "ledger.sqlite: line 3: ad x: locked"


def test_a_child_that_dies_without_an_answer_is_read_again_here():
    parent = os.getpid()

    def answer():
        if os.getpid() != parent:
            os._exit(3)                       # killed, out of memory, ...
        return "read here"
    b = beside.Beside(answer)
    assert b.pid is not None
    assert b.result() == "read here"


def test_cancel_kills_the_child_at_once():
    b = beside.Beside(time.sleep, 60)
    pid = b.pid
    t = time.monotonic()
    b.cancel()
    assert time.monotonic() - t < 5 and b.pid is None
    with pytest.raises(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)         # killed and reaped


def test_no_fork_beside_another_thread():
    stop = threading.Event()
    t = threading.Thread(target=stop.wait)
    t.start()
    try:
        b = beside.Beside(os.getpid)
        assert b.pid is None and b.result() == os.getpid()
    finally:
        stop.set()
        t.join()


def _needs_care_before(block: str) -> bool:
    """The predicate as it was written line by line (before the one search)."""
    body = block.split("\n")
    return (block[0] in "#/ \t" or "\n#" in block or "\n/" in block or "\n " in block
            or "\n\t" in block or any(map(str.isspace, body)))


@settings(max_examples=2000, deadline=None)
@given(st.text(alphabet="ab=1\"#/ \t\r\n\x0b\x0c\x1c\x1f\x85\xa0\u2028\u3000", min_size=1))
def test_needs_care_is_the_line_by_line_test(block):
    assert adfiles._needs_care(block) == _needs_care_before(block)
