"""The schedd's view of each job (job_queue.queue_heads), computed in the child that
reads the job files beside the slot ads: the same heads the cycle computes itself, the
same cycle either way, and heads that do not fit the table are not used."""

from __future__ import annotations

import pytest

from conftest import FIXTURES, SCENARIOS
from negotiator_ext.adapters import snapshot
from negotiator_ext.core.adtext import Job, TextValues
from negotiator_ext.core.job_queue import QueueView, queue_heads
from negotiator_ext.cycle import run_cycle
from negotiator_ext.pool import load_pool


@pytest.fixture
def beside(monkeypatch):
    """Every job file read in a child (whatever its size)."""
    monkeypatch.setattr(snapshot, "FORK_JOB_BYTES", 0)


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_heads_read_beside_are_the_cycles_own(scenario, beside):
    snap = snapshot.load_snapshot(FIXTURES / scenario)
    for table in snap.jobs.values():
        assert table.heads is not None and len(table.heads) == len(table.rows)
        view = QueueView(TextValues())
        values = view._head.values
        for row, (head, held) in zip(table.rows, table.heads):
            job = Job(row, table.store.names, values)
            assert head == view.idle(job)
            assert held == (view.running(job) if head is None else None)


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_same_cycle_with_and_without_heads(scenario, beside, monkeypatch):
    forked = run_cycle(load_pool(FIXTURES / scenario)).to_json()
    monkeypatch.setattr(snapshot, "FORK_JOB_BYTES", 1 << 60)
    pool = load_pool(FIXTURES / scenario)
    assert all(t.heads is None for t in pool.snapshot.jobs.values())
    assert run_cycle(pool).to_json() == forked


def test_heads_that_do_not_fit_are_ignored(beside):
    path = FIXTURES / "hgq_nested_hep_lep_surplus"
    want = run_cycle(load_pool(path)).to_json()
    pool = load_pool(path)
    for table in pool.snapshot.jobs.values():
        assert table.heads == queue_heads(table)
        table.heads = [(None, None)] * (len(table.rows) + 1)     # one too many: not used
    assert run_cycle(pool).to_json() == want
