"""Rank orders (core.rank_order): a scan that reads its plain free classes from a kept
order decides as the full scan does, in one cycle and from cycle to cycle, and reads
fewer classes than the full scan lists."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings, strategies as st

from negotiator_ext.adapters.ledger import open_ledger
from negotiator_ext.core import match_list
from negotiator_ext.core.matchmaking import Matcher
from negotiator_ext.cycle import run_cycle
from negotiator_ext.pool import load_pool
from negotiator_ext.scenario import load_scenario
from negotiator_ext.sim import engine
from negotiator_ext.sim.forecast import ForecastSpec, run_forecast
from negotiator_ext.simulate import Simulation
from poolmaker import DOMAIN, Expr, accounting, claimed, job, make_pool, running_by_submitter, \
    slot, submitters_for
from test_simulate import _ledger_rows, shortcut_case


class _Reads:
    """How many ranked lists were made, the classes their orders held and how many
    they read."""

    def __init__(self, monkeypatch):
        self.lists = self.held = self.read = 0
        make, settle = match_list.RankedMatchList.__init__, match_list.RankedMatchList._settle
        reads = self

        def init(ml, rejections, order, take):
            reads.lists += 1
            reads.held += len(order)
            make(ml, rejections, order, take)

        def _settle(ml):
            before = ml._pos
            got = settle(ml)
            reads.read += ml._pos - before
            return got
        monkeypatch.setattr(match_list.RankedMatchList, "__init__", init)
        monkeypatch.setattr(match_list.RankedMatchList, "_settle", _settle)


# ---- one cycle, random pools --------------------------------------------------------

JOB_RANKS = [None, "0", "7.5", "TARGET.KFlops", "Memory", "KFlops + MY.JobPrio * 1000",
             "TARGET.KFlops * RequestMemory", "-TARGET.Memory", "SubmitterUserPrio",
             "TARGET.Speed", "ifThenElse(TARGET.KFlops > 200, 1, 0)"]
POST_RANKS = [None, "KFlops - SlotID", "TARGET.JobPrio", "0"]
PRE_RANKS = [None, "Memory", "TARGET.RequestMemory"]

pools = st.fixed_dictionaries({
    # (owner or None, KFlops, Memory, Speed's text)
    "slots": st.lists(st.tuples(st.sampled_from([None, None, None, "a", "b"]),
                                st.sampled_from([100, 200, 200, 300]),
                                st.sampled_from([1024, 2048, 2048]),
                                st.sampled_from(["1", "2", "TARGET.JobPrio", "KFlops / 100"])),
                      min_size=1, max_size=14),
    "jobs": st.lists(st.tuples(st.sampled_from(["a", "b", "c"]),
                               st.integers(0, len(JOB_RANKS) - 1), st.sampled_from([0, 1, 2]),
                               st.sampled_from([256, 1500]), st.integers(1, 3)),
                     min_size=1, max_size=8),
    "post": st.integers(0, len(POST_RANKS) - 1),
    "pre": st.integers(0, len(PRE_RANKS) - 1),
    "preempt": st.booleans(),
    "prios": st.tuples(*[st.sampled_from([500.0, 5000.0])] * 3),
})


def _cycle(d: Path, p: dict):
    slots, jobs = [], []
    for i, (owner, kflops, mem, speed) in enumerate(p["slots"]):
        name = f"slot{i % 3 + 1}@n{i // 3}.test.local"
        attrs = dict(KFlops=kflops, Memory=mem, Speed=Expr(speed), SlotID=i % 3 + 1)
        if owner is None:
            slots.append(slot(name, **attrs))
        else:
            running = job(900 + i, 0, owner, JobStatus=2)
            jobs.append(running)
            slots.append(claimed(name, running, f"{owner}@{DOMAIN}", **attrs))
    for i, (user, rank, prio, mem, n) in enumerate(p["jobs"]):
        extra = {} if JOB_RANKS[rank] is None else {"Rank": Expr(JOB_RANKS[rank])}
        for k in range(n):
            jobs.append(job(i + 1, k, user, JobPrio=prio, RequestMemory=mem, **extra))
    config = ""
    if POST_RANKS[p["post"]] is not None:
        config += f"NEGOTIATOR_POST_JOB_RANK = {POST_RANKS[p['post']]}\n"
    if PRE_RANKS[p["pre"]] is not None:
        config += f"NEGOTIATOR_PRE_JOB_RANK = {PRE_RANKS[p['pre']]}\n"
    if p["preempt"]:
        config += "PREEMPTION_REQUIREMENTS = True\n"
    acc = [accounting(f"{u}@{DOMAIN}", priority=pr) for u, pr in zip("abc", p["prios"])]
    subs = submitters_for(jobs, running_by_submitter(jobs))
    r = run_cycle(load_pool(make_pool(d, slots=slots, jobs=jobs, submitters=subs,
                                      accounting_ads=acc, config=config)))
    return ([(m.assigned_job, m.slot, m.state, m.preempting) for m in r.matches],
            [(x.job, x.reason) for x in r.rejections])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(p=pools)
# always checked: ties on every rank (the slot index decides), one job rank by slot
# attribute and one constant, claimed slots beside the free ones
@example(p={"slots": [(None, 200, 2048, "1")] * 4 + [("a", 300, 2048, "2"), (None, 100, 1024, "1")],
            "jobs": [("b", 3, 0, 256, 3), ("c", 1, 0, 256, 2), ("b", 0, 1, 1500, 1)],
            "post": 0, "pre": 0, "preempt": True, "prios": (5000.0, 500.0, 500.0)})
# and two submitters of different priorities whose jobs rank slots by it (an ephemeral
# attribute: alike jobs of theirs must not share an order)
@example(p={"slots": [(None, 200, 2048, "1")] * 3 + [(None, 300, 2048, "1")],
            "jobs": [("b", 8, 0, 256, 2), ("c", 8, 0, 256, 2)],
            "post": 0, "pre": 0, "preempt": False, "prios": (5000.0, 500.0, 5000.0)})
def test_a_cycle_decides_alike_with_and_without_rank_orders(tmp_path_factory, p):
    got = {}
    for on in (True, False):
        with pytest.MonkeyPatch.context() as m:
            m.setattr(Matcher, "rank_orders_on", on)
            got[on] = _cycle(tmp_path_factory.mktemp("pool"), p)
    assert got[True] == got[False]


def test_a_ranked_scan_reads_the_classes_it_pops(tmp_path, monkeypatch):
    """Slots of 40 KFlops values, jobs ranking them by KFlops: each request reads the
    order from the top (its best slot first) and stops there, as each of its jobs
    takes the next; the same matches as the full scan."""
    slots = [slot(f"slot1@n{i}.test.local", KFlops=1000 + i % 40, Memory=2048)
             for i in range(120)]
    jobs = [job(c, k, "abc"[c % 3], RequestMemory=256, Rank=Expr("TARGET.KFlops"))
            for c in range(1, 4) for k in range(5)]
    got = {}
    for on in (True, False):
        with monkeypatch.context() as m:
            m.setattr(Matcher, "rank_orders_on", on)
            reads = _Reads(m)
            r = run_cycle(load_pool(make_pool(tmp_path / str(on), slots=slots, jobs=jobs)))
            got[on] = [(x.assigned_job, x.slot) for x in r.matches]
            if on:
                assert reads.lists >= 1 and reads.held >= 40 * reads.lists
                assert reads.read <= 2 * len(jobs)
            else:
                assert reads.lists == 0
    assert got[True] == got[False] and len(got[True]) == len(jobs)
    # the best slots went first: KFlops 1039, 1038, ...
    assert [int(s.split("@n")[1].split(".")[0]) % 40 for _, s in got[True][:3]] == [39, 39, 39]


# ---- from cycle to cycle ------------------------------------------------------------

def _forecast(tmp_path: Path, seed: int):
    from conftest import synthetic_forecast
    snap, hist = synthetic_forecast(tmp_path, slots=400, jobs=1500, history_jobs=4000,
                                    seed=seed)
    got = run_forecast(ForecastSpec(snapshot=snap, history=(hist,), hours=1))
    return json.dumps(got.outcome.jobs, sort_keys=True, default=str), got.matches, got.cycles


@pytest.mark.parametrize("seed,offer", [(1, None), (2, None), (1, 1)])
def test_a_forecast_decides_alike_with_and_without_rank_orders(tmp_path, monkeypatch, seed,
                                                               offer):
    """An hour's forecast of a varied synthetic pool (a third of its jobs rank slots by
    KFlops), its orders kept and renewed from cycle to cycle; `offer`: the schedds
    offer one job of each class at first, so that many cycles run twice."""
    if offer is not None:
        monkeypatch.setattr(engine, "_OFFER_LIMIT_MIN", offer)
    with monkeypatch.context() as m:
        reads = _Reads(m)
        ranked = _forecast(tmp_path, seed)
    with monkeypatch.context() as m:
        m.setattr(Matcher, "rank_orders_on", False)
        full = _forecast(tmp_path, seed)
    assert ranked == full and ranked[1] > 100
    assert reads.lists > 100            # (most scans: the rest have per-slot limits)


@pytest.mark.parametrize("case", ["classes", "limits", "empty-preemption-requirements",
                                  "rank"])
def test_the_shortcut_cases_decide_alike_with_and_without_rank_orders(tmp_path, monkeypatch,
                                                                       case):
    rows = {}
    for on in (True, False):
        with monkeypatch.context() as m:
            m.setattr(Matcher, "rank_orders_on", on)
            path = tmp_path / f"{case}-{on}.json"
            path.write_text(json.dumps(shortcut_case(case, duration="20m")))
            url = str(tmp_path / f"{case}-{on}.sqlite")
            with open_ledger(url) as ledger:
                Simulation(load_scenario(path), ledger).run()
            rows[on] = _ledger_rows(url)
    assert rows[True] == rows[False] and len(rows[True][0]) >= 8


def test_slots_leaving_and_joining_decide_alike_with_and_without_rank_orders(tmp_path,
                                                                            monkeypatch):
    """Free slots leave the pool, first of their classes, and others join, while jobs
    that rank slots by Memory and jobs with a constant Rank keep coming: the orders kept
    from cycle to cycle put those classes in again at their new places."""
    doc = {"name": "leave", "span": "1h", "interval": 120,
           "knobs": {"DEFAULT_PRIO_FACTOR": 1},
           "slots": [{"count": 6, "name": "a", "memory": 2048},
                     {"count": 6, "name": "b", "memory": 4096},
                     {"count": 6, "name": "c", "memory": 2048}],
           "workload": [{"submitter": "u", "count": 2, "every": "4m", "duration": "9m",
                         "attrs": {"Rank": "Memory"}},
                        {"submitter": "v", "count": 1, "every": "6m", "duration": "5m"}],
           "changes": [{"at": "13m", "slots_leave": {"prefix": "b", "count": 2}},
                       {"at": "21m", "slots_leave": {"prefix": "a", "count": 3}},
                       {"at": "29m", "slots_join": {"count": 3, "name": "d",
                                                    "memory": 4096}}]}
    rows = {}
    for on in (True, False):
        with monkeypatch.context() as m:
            m.setattr(Matcher, "rank_orders_on", on)
            reads = _Reads(m)
            path = tmp_path / f"leave-{on}.json"
            path.write_text(json.dumps(doc))
            url = str(tmp_path / f"leave-{on}.sqlite")
            with open_ledger(url) as ledger:
                Simulation(load_scenario(path), ledger).run()
            rows[on] = _ledger_rows(url)
            assert (reads.lists > 10) == on
    assert rows[True] == rows[False] and len(rows[True][0]) >= 10
