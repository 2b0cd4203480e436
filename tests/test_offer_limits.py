"""The simulator's schedds offer each cycle only the first jobs of each job class
(`Simulation.offer_limits`: twice what the submitter matched the cycle before, at least
`_OFFER_LIMIT_MIN`), and run a cycle again with every job when its request lists reached
the end of what a class was offered (`engine._short_queues`). Whatever the limit, the
decisions are those of the whole queues: checked here with small limits (cut short
nearly every cycle) against no limit, on the benchmark pool, on the shortcut cases, in a
pool whose groups' quotas hold their submitters to a few matches a cycle, and in a
forecast (whose schedds limit each user's matches)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from negotiator_ext.adapters.ledger import open_ledger
from negotiator_ext.core.job_queue import JobQueue
from negotiator_ext.scenario import load_scenario
from negotiator_ext.sim import engine
from negotiator_ext.sim.engine import Simulation
from negotiator_ext.sim.forecast import ForecastSpec, run_forecast

from test_simulate import _ledger_rows, shortcut_case

ROOT = Path(__file__).parent.parent
NO_LIMIT = 1 << 40


class _Count:
    """How many cycles were cut short, and how many of those had to be run again."""

    def __init__(self, monkeypatch):
        self.cut = self.short = 0
        real = engine._short_queues

        def short_queues(queues, cut):
            got = real(queues, cut)
            self.cut += 1
            self.short += bool(got)
            return got
        monkeypatch.setattr(engine, "_short_queues", short_queues)


def _run(sc, url, monkeypatch, limit) -> Simulation:
    monkeypatch.setattr(engine, "_OFFER_LIMIT_MIN", limit)
    with open_ledger(url) as ledger:
        sim = Simulation(sc, ledger)
        sim.run()
    return sim


@pytest.mark.parametrize("limit", [1, 4])
def test_a_limited_offer_decides_as_the_whole_queue_on_the_benchmark_pool(
        tmp_path, monkeypatch, limit):
    sc = dataclasses.replace(load_scenario(ROOT / "bench" / "scenarios" / "week-1k.yaml"),
                             span=3600, interval=120)
    whole = str(tmp_path / "whole.sqlite")
    _run(sc, whole, monkeypatch, NO_LIMIT)
    count = _Count(monkeypatch)
    limited = str(tmp_path / "limited.sqlite")
    sim = _run(sc, limited, monkeypatch, limit)
    # cut short in most of its 31 cycles, and run again where that fell short
    assert count.cut >= 15 and 0 < sim.offer_retries == count.short
    got, want = _ledger_rows(limited), _ledger_rows(whole)
    assert len(got[0]) > 500 and got == want


def test_a_limited_offer_that_suffices_is_not_run_again(tmp_path, monkeypatch):
    """Long queues of one class draining into their groups' quotas, a few jobs a cycle,
    in a pool with many free slots: what the limit offers is enough in most cycles,
    which run once."""
    doc = {"name": "drain", "span": "2h", "interval": 60,
           "knobs": {"DEFAULT_PRIO_FACTOR": 1, "GROUP_NAMES": "grp_a, grp_b",
                     "GROUP_QUOTA_grp_a": 10, "GROUP_QUOTA_grp_b": 6,
                     "GROUP_ACCEPT_SURPLUS": False},
           "slots": [{"count": 100, "name": "s"}],
           "workload": [{"submitter": "a", "group": "grp_a", "count": 300,
                         "duration": {"exponential": "15m"}},
                        {"submitter": "b", "group": "grp_b", "at": "30m", "count": 100,
                         "duration": {"exponential": "10m"}}]}
    path = tmp_path / "drain.json"
    path.write_text(json.dumps(doc))
    sc = load_scenario(path)
    whole = str(tmp_path / "whole.sqlite")
    _run(sc, whole, monkeypatch, NO_LIMIT)
    count = _Count(monkeypatch)
    limited = str(tmp_path / "limited.sqlite")
    sim = _run(sc, limited, monkeypatch, 4)
    assert count.cut > 100 and sim.offer_retries == count.short < count.cut / 4
    got, want = _ledger_rows(limited), _ledger_rows(whole)
    assert len(got[0]) > 100 and got == want


@pytest.mark.parametrize("case", ["classes", "limits", "rank", "consumption-policy"])
def test_a_limited_offer_on_the_cases_a_cut_could_get_wrong(tmp_path, monkeypatch, case):
    """Jobs ahead that cannot match (big-memory jobs ahead of small ones; a concurrency
    limit), a slot Rank preferring one user, a p-slot matched again and again in a
    cycle: offered one job of each class at a time."""
    got = {}
    for limit in (1, NO_LIMIT):
        doc = shortcut_case(case, duration="20m")
        path = tmp_path / f"{case}-{limit}.json"
        path.write_text(json.dumps(doc))
        url = str(tmp_path / f"{case}-{limit}.sqlite")
        sim = _run(load_scenario(path), url, monkeypatch, limit)
        got[limit] = (_ledger_rows(url), sim.offer_retries)
    assert got[1][0] == got[NO_LIMIT][0] and len(got[1][0][0]) >= 8
    assert got[1][1] > 0 and got[NO_LIMIT][1] == 0


def test_a_limited_offer_forecasts_as_the_whole_queue(tmp_path, monkeypatch):
    """A forecast (whose schedds limit each user's matches, M7) of an hour of a
    synthetic pool (bench/synth.py: static and partitionable slots, groups, three
    schedds) with a history of arrivals: every job's start and end the same with one
    job, or 32, of each class offered at first as with every job."""
    from conftest import synthetic_forecast
    snap, hist = synthetic_forecast(tmp_path, slots=600, jobs=2000, history_jobs=6000)
    spec = ForecastSpec(snapshot=snap, history=(hist,), hours=1)
    sims = []
    real_init = Simulation.__init__

    def init(self, *a, **kw):
        real_init(self, *a, **kw)
        sims.append(self)
    monkeypatch.setattr(Simulation, "__init__", init)
    out = {}
    count = _Count(monkeypatch)
    for limit in (NO_LIMIT, 1, 32):
        monkeypatch.setattr(engine, "_OFFER_LIMIT_MIN", limit)
        got = run_forecast(spec)
        out[limit] = (json.dumps(got.outcome.jobs, sort_keys=True, default=str),
                      got.matches, got.cycles, count.cut)
    assert out[1][:3] == out[NO_LIMIT][:3] == out[32][:3] and out[1][1] > 300
    assert out[NO_LIMIT][3] == 0 < out[1][3] < out[32][3]      # cut short each time
    assert sims[0].offer_retries == 0 and sims[1].offer_retries > 0


def _queue(acs: list[int]) -> JobQueue:
    return JobQueue([(f"1.{i}", ac, ("key", ac), ()) for i, ac in enumerate(acs)])


def _requests(q: JobQueue, cap=None, batch=100):
    return q.offers(set(), "schedd", "u", cap, batch, [0])


def test_the_queue_notes_how_far_its_requests_went():
    q = _queue([1, 1, 2, 2, 2, 3])
    assert (q.started, q.used_up) == (-1, -1)
    offers = _requests(q)
    req, count = next(offers)
    assert count == 2 and q.started == 0
    q.run_used_up()                       # both jobs of the first run matched
    assert q.used_up == 1
    req, count = next(offers)
    assert count == 3 and q.started == 2 and q.used_up == 1     # not used up (yet)
    q2 = _queue([1, 1, 1, 2])
    offers = _requests(q2, cap=2)         # the schedd's limit sets the count, not the run
    req, count = next(offers)
    assert count == 2
    q2.run_used_up()
    assert q2.used_up == -1               # a longer run would have had the same count
    q3 = _queue([1, 2, 2, 2])
    offers = _requests(q3, cap=10)        # the run's length sets the count
    next(offers)
    q3.run_used_up()
    assert q3.used_up == 0


def test_a_queue_cut_after_the_furthest_run_sent_is_not_short():
    q = _queue([1, 1, 2, 2, 2, 3])
    offers = _requests(q)
    next(offers)                          # the first run, [0, 1], not used up
    cut = {("u", "schedd"): {"1.1"}}      # its class was cut after its second job
    assert engine._short_queues({("u", "schedd"): q}, cut) == set()
    q.run_used_up()                       # ... but it was used up: a longer run goes on
    assert engine._short_queues({("u", "schedd"): q}, cut) == {("u", "schedd")}
    q = _queue([1, 1, 2, 2, 2, 3])
    offers = _requests(q)
    next(offers), next(offers)            # a run after the cut one was sent
    assert engine._short_queues({("u", "schedd"): q}, cut) == {("u", "schedd")}
    assert engine._short_queues({}, cut) == {("u", "schedd")}     # not known: short


def test_a_cut_job_matched_inside_a_longer_run_is_short():
    """The cut class's last job offered, then jobs of another class with the same
    autocluster in one run: once the negotiator matched that job, the next it takes
    from the run would be another in the whole queue (the cut class's next)."""
    q = _queue([1, 1, 1, 2])
    offers = _requests(q)
    req, count = next(offers)
    assert count == 3
    cut = {("u", "schedd"): {"1.0"}}      # its class was cut after its first job
    assert engine._short_queues({("u", "schedd"): q}, cut) == set()
    q.matched.add("1.0")
    assert engine._short_queues({("u", "schedd"): q}, cut) == {("u", "schedd")}


def test_a_batch_of_jobs_that_arrived_since_the_last_cycle_is_offered_whole(
        tmp_path, monkeypatch):
    """A queue into which more jobs arrived since the last cycle than its limit offers
    those jobs beyond its limit (`Simulation._offer`): the hourly batches of
    the benchmark pool are not cut short (they are without the rule), and every cycle
    decides as with no limit either way."""
    sc = dataclasses.replace(load_scenario(ROOT / "bench" / "scenarios" / "week-1k.yaml"),
                             span=3 * 3600)
    limit = engine._OFFER_LIMIT_MIN
    whole = str(tmp_path / "whole.sqlite")
    _run(sc, whole, monkeypatch, NO_LIMIT)
    seen: list[tuple[int, set]] = []
    real_pool = Simulation._pool

    def pool(self, t, rows=None, offer=None):
        got = real_pool(self, t, rows, offer)
        if offer is not None:
            seen.append((t - self.sc.start, set(self._cut)))
        return got
    monkeypatch.setattr(Simulation, "_pool", pool)
    batches = {}
    for rule in (True, False):
        if not rule:
            monkeypatch.setattr(Simulation, "_offer", lambda self: self.offer_limits)
        seen.clear()
        url = str(tmp_path / f"limited-{rule}.sqlite")
        _run(sc, url, monkeypatch, limit)
        batches[rule] = [cut for at, cut in seen if at % 3600 == 0]
        assert _ledger_rows(url) == _ledger_rows(whole)
    assert len(batches[True]) == 4 and not any(batches[True])
    assert any(batches[False])


def test_the_offer_is_raised_only_when_more_jobs_arrived_than_the_limit():
    """The boundary of `Simulation._offer`: as many jobs arrived as the limit keeps the
    limit (the very dict, untouched); one more raises that class's offer by what
    arrived, and no other's. A class with no limit yet has `_OFFER_LIMIT_MIN`."""
    from types import SimpleNamespace
    least = engine._OFFER_LIMIT_MIN
    a, b, c = ("a", "s1"), ("b", "s1"), ("c", "s2")
    limits = {a: 10, b: 50}

    def offer(idle_now: dict, idle_before: dict):
        fake = SimpleNamespace(offer_limits=limits, _idle_after=idle_before,
                               pool=SimpleNamespace(counts={k: [n, 0] for k, n in idle_now.items()}))
        return Simulation._offer(fake)

    assert offer({a: 15, b: 100, c: least}, {a: 5, b: 50}) is limits
    got = offer({a: 16, b: 100, c: least}, {a: 5, b: 50})
    assert got == {a: 10 + 11, b: 50} and limits == {a: 10, b: 50}
    assert offer({a: 5, b: 50, c: least + 1}, {a: 5, b: 50}) == {a: 10, b: 50, c: 2 * least + 1}
