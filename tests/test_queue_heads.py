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


def test_runs_read_beside_flag_the_jobs_alike_but_for_their_proc(beside):
    """`runs` (beside the heads): a flagged row is the row before it but for its
    ProcId (and a GlobalJobId naming the same schedd), and its head is that row's with
    its own proc."""
    flagged = 0
    for scenario in SCENARIOS:
        for table in snapshot.load_snapshot(FIXTURES / scenario).jobs.values():
            assert table.runs is not None and len(table.runs) == len(table.rows)
            assert table.runs[0] == 0
            for i in range(1, len(table.rows)):
                if not table.runs[i]:
                    continue
                flagged += 1
                row, last = table.rows[i], table.rows[i - 1]
                assert {n for n, _ in set(row) ^ set(last)} <= {"procid", "globaljobid"}
                (sub, order), held = table.heads[i]
                assert held is None and table.heads[i - 1][0] is not None
                assert (sub, order[:-1]) == (table.heads[i - 1][0][0],
                                            table.heads[i - 1][0][1][:-1])
                assert str(order[-1]) == dict(row)["procid"]
    assert flagged > 50         # the recordings' clusters have many procs


def test_a_slot_that_reads_procid_splits_the_runs(tmp_path, beside, monkeypatch):
    """The reader flags a cluster's jobs as runs without knowing what the slots read;
    when a slot expression reads ProcId, the cycle does not take them as one: the odd
    procs no slot starts are never matched, with the reader's flags or without."""
    import shutil
    d = tmp_path / "pie"
    shutil.copytree(FIXTURES / "pie_three_submitters", d)
    slots = d / "slots.ads"
    slots.write_text(slots.read_text().replace("Start = true", "Start = (TARGET.ProcId % 2) == 0"))
    pool = load_pool(d)
    assert any(t.runs is not None and sum(t.runs) for t in pool.snapshot.jobs.values())
    got = run_cycle(pool).to_json()
    assert got["matches"] and all(int(m["job"].split(".")[1]) % 2 == 0
                                  for m in got["matches"])
    monkeypatch.setattr(snapshot, "FORK_JOB_BYTES", 1 << 60)
    assert run_cycle(load_pool(d)).to_json() == got
