"""The simulated schedds' and startds' rules, to their exact numbers
(docs/schedd-startd-semantics.md): a dynamic slot's rounded size and its sub-id, claim
reuse at the CLAIM_WORKLIFE boundary, the schedd's reschedules, partitionable leftovers."""

from __future__ import annotations

import dataclasses
import random
from pathlib import Path

import pytest

from negotiator_ext.scenario import Scenario, SlotShape
from negotiator_ext.sim.schedd_startd import JobClass, SimJob, SimPool


def pool(*, pslot: bool = True, worklife: float | None = 1200, leftovers: bool = False,
         reschedule: float | None = None) -> SimPool:
    shape = SlotShape(count=1, name="vm", cpus=16, memory=16384, disk=1_000_000,
                      partitionable=pslot, machine="vm.test", slot_name="slot1@vm.test")
    sc = Scenario(name="t", path=Path("."), span=3600, slots=(shape,))
    p = SimPool(sc, random.Random(0), claim_worklife=worklife, model_startd=True,
                leftovers=leftovers, reschedule_interval=reschedule)
    p.fits = lambda job, slot: (job.cls.cpus <= slot.cpus and job.cls.memory <= slot.memory)
    return p


def cls(cpus=1.0, memory=500.0, disk=1000.0, submitter="a@test") -> JobClass:
    return JobClass(submitter=submitter, user=submitter, schedd="s", cpus=cpus,
                    memory=memory, disk=disk, texts=lambda job: [])


def job(c: JobClass, n: int, duration: float = 100) -> SimJob:
    return SimJob(cluster=1, proc=n, cls=c, duration=duration, qdate=0, idle_since=0)


def test_a_dynamic_slot_is_the_request_rounded_as_the_startd_rounds_it():
    p = pool()
    top = p.slots[0]
    d = p.carve(top, job(cls(cpus=1.5, memory=500, disk=1000), 0))
    assert (d.cpus, d.memory, d.disk) == (2, 512, 1024)
    assert (top.cpus, top.memory, top.disk) == (14, 16384 - 512, 1_000_000 - 1024)
    # a rounded request that no longer fits is taken unrounded
    top.cpus, top.memory = 1.5, 600
    d2 = p.carve(top, job(cls(cpus=1.5, memory=550), 1))
    assert (d2.cpus, d2.memory) == (1.5, 550)


def test_a_dynamic_slot_takes_the_lowest_free_sub_id():
    p = pool()
    top = p.slots[0]
    a, b, c = (p.carve(top, job(cls(), i)) for i in range(3))
    assert [x.name for x in (a, b, c)] == ["slot1_1@vm.test", "slot1_2@vm.test",
                                            "slot1_3@vm.test"]
    p._release(b)
    assert p.carve(top, job(cls(), 9)).name == "slot1_2@vm.test"


@pytest.mark.parametrize("age, reused", [(1200, True), (1201, False)])
def test_a_claim_is_reused_until_it_is_older_than_claim_worklife(age, reused):
    p = pool(pslot=False)
    c = cls()
    first, second = job(c, 0, duration=age), job(c, 1)
    p.queue(first, 0)
    p.queue(second, 0)
    slot = p.slots[0]
    p.start(first, slot, 0)
    p.finish_until(age)
    assert p.reused == int(reused)
    assert (slot.job is second) is reused
    assert second.status == (2 if reused else 1)


def test_a_claim_goes_to_the_same_submitter_only():
    p = pool(pslot=False)
    mine, other = cls(submitter="a@test"), cls(submitter="b@test")
    first, theirs = job(mine, 0), job(other, 1)
    p.queue(first, 0)
    p.queue(theirs, 0)
    p.start(first, p.slots[0], 0)
    p.finish_until(100)
    assert p.reused == 0 and theirs.status == 1 and p.slots[0].job is None


def test_leftovers_are_filled_with_the_submitters_jobs_that_fit():
    p = pool(leftovers=True)
    c = cls(cpus=3, memory=1000)
    jobs = [job(c, i) for i in range(8)]
    for j in jobs:
        p.queue(j, 0)
    top = p.slots[0]
    p.start(jobs[0], p.carve(top, jobs[0]), 0)
    assert p.fill_leftovers(top, c, 0) == 4          # 16 cores: 5 jobs of 3
    assert top.cpus == 1 and sum(j.status == 2 for j in jobs) == 5


@pytest.mark.parametrize("pslot", [False, True])
def test_every_job_a_slot_starts_gets_the_slots_rank_for_it_as_its_current_rank(pslot):
    """The startd works out CurrentRank each time it activates a claim with a job
    (command.cpp: activate_claim, `compute_rank`): on a claim the schedd reuses and on a
    p-slot's leftover claims too, not only on the negotiator's matches."""
    p = pool(pslot=pslot, leftovers=pslot)
    top = p.slots[0]
    top.shape = dataclasses.replace(top.shape, attrs={"Rank": "TARGET.RequestMemory"})
    p.rank_of = lambda slot, j: j.cls.memory          # (the engine evaluates the Rank)
    small, large = cls(cpus=8, memory=500), cls(cpus=8, memory=900)
    first, second = job(small, 0, duration=50), job(large, 1)
    second.cls = dataclasses.replace(large, submitter=small.submitter)
    for j in (first, second):
        p.queue(j, 0)
    p.start(first, p.carve(top, first) if pslot else top, 0)
    assert first.slot.rank_of_job == 500
    if pslot:                                   # the other 8 cores: a leftover claim
        assert p.fill_leftovers(top, small, 0) == 1
    else:                                       # the claim, reused once the first ends
        p.finish_until(50)
        assert p.reused == 1
    assert second.status == 2 and second.slot.rank_of_job == 900


@pytest.mark.parametrize("next_rank, reused", [(500, True), (499, False), (None, True)])
def test_a_claim_is_reused_only_for_a_job_the_slot_ranks_as_high_as_the_claims_first(
        next_rank, reused):
    """FindRunnableJob (qmgmt.cpp): the schedd keeps the slot's Rank for the job the
    claim was made for, and starts another job on the claim only if the slot ranks it
    no lower (a Rank that is not a number for it does not stop it). The same holds for a
    match whose job started elsewhere meanwhile: another job must rank as the matched
    one does."""
    p = pool(pslot=False)
    slot = p.slots[0]
    slot.shape = dataclasses.replace(slot.shape, attrs={"Rank": "TARGET.Wanted"})
    ranks = {0: 500.0, 1: next_rank}
    p.rank_of = lambda s, j: ranks[j.proc]
    c = cls()
    first, second = job(c, 0, duration=50), job(c, 1)
    for j in (first, second):
        p.queue(j, 0)
    p.start(first, slot, 0)
    assert slot.claim_rank == 500 and slot.rank_of_job == 500
    p.finish_until(50)
    assert p.reused == int(reused) and (second.status == 2) is reused
    if reused:      # the claim keeps the rank it was made with; CurrentRank is the job's
        assert slot.claim_rank == 500 and slot.rank_of_job == (next_rank or 0.0)
    else:
        assert slot.claim_rank is None and slot.job is None
        assert p.find_runnable_job(c, slot, first) is None
        ranks[0] = 499.0
        assert p.find_runnable_job(c, slot, first) is second


def test_a_schedd_asks_for_a_cycle_when_it_gets_its_first_idle_job():
    p = pool(reschedule=5)
    c = cls()
    p.queue(job(c, 0), 10)           # no idle job before: asks
    p.queue(job(c, 1), 11)           # it had one: does not
    assert p.reschedules == [10]
    for j in [q[2] for q in p.queues[("a@test", "s", id(c))]]:
        p.remove(j, 12)
    p.queue(job(c, 2), 13)           # idle again from none, but within 5 s of the last
    p.queue(job(c, 3), 20)
    assert p.reschedules == [10]
    for j in [q[2] for q in p.queues[("a@test", "s", id(c))] if q[2].status == 1]:
        p.remove(j, 21)
    p.queue(job(c, 4), 22)
    assert p.reschedules == [10, 22]


@pytest.mark.parametrize("ended, arrival, first", [
    (998, 1000, 1018),      # asked at once, but the last cycle ended 2 s before: +20 s
    (998, 1030, 1030),      # asked later than the cycle delay: then
    (998, None, 1056),      # nothing asks: the timer, 60 s after the last cycle began
    (900, 1000, 1000),      # overdue: at the start
    (980, 1001, 1001)])    # asked after the cycle delay and the min interval: then
def test_a_forecast_s_first_cycle_follows_the_negotiator_s_last_one(ended, arrival, first):
    """Matchmaker::negotiationTime: never within NEGOTIATOR_CYCLE_DELAY (20) of the last
    cycle's end nor NEGOTIATOR_MIN_INTERVAL (5) of its start; its timer
    NEGOTIATOR_INTERVAL (60) after its start; a schedd's request (its first idle job)
    brings it forward. The snapshot's own idle job asks for nothing."""
    from negotiator_ext.sim.engine import NegotiatorCadence
    cadence = NegotiatorCadence(60, 5, 20, schedd_min_interval=5)
    p = pool(reschedule=5)
    c = cls()
    p.queue(job(c, 0), 1000)                       # in the snapshot's queue
    p.remove(next(q[2] for q in p.queues[("a@test", "s", id(c))]), 1000)
    other = dataclasses.replace(cls(submitter="b@test"), schedd="t")
    arrivals = [] if arrival is None else [
        (arrival, 0, lambda pool_, t: pool_.queue(job(other, 1), t))]
    assert cadence.cycle_after(1000, (ended - 2, ended), p, arrivals) == first


def test_a_match_whose_job_already_runs_goes_to_the_submitters_next_job_the_slot_takes():
    # FindRunnableJob: the same submitter at the same schedd, the same concurrency
    # limits, the first idle one (schedd order) that fits the matched slot
    p = pool()
    mine = cls(cpus=4)
    big, other = cls(cpus=32), cls(submitter="b@test")
    limited = dataclasses.replace(cls(), concurrency_limits="lic")
    started, too_big, theirs, with_limit, fits = (
        job(mine, 0), job(big, 1), job(other, 2), job(limited, 3), job(mine, 4))
    for j in (started, too_big, theirs, with_limit, fits):
        p.queue(j, 0)
    top = p.slots[0]
    p.start(started, p.carve(top, started), 0)        # on a leftover claim, say
    assert p.find_runnable_job(mine, top) is fits
    p.start(fits, p.carve(top, fits), 0)
    assert p.find_runnable_job(mine, top) is None     # the rest is not the submitter's
    assert p.find_runnable_job(limited, top) is with_limit


def test_a_forecast_uses_a_match_whose_job_started_on_a_leftover_claim(tmp_path, monkeypatch):
    """The schedd starts another of the submitter's jobs on such a match, as a real one
    does, rather than dropping the match: far fewer unused matches, and every job so
    started is the matched job's submitter's, idle until then, taken by the slot."""
    from conftest import synthetic_forecast
    from negotiator_ext.sim.forecast import ForecastSpec, run_forecast
    snap, hist = synthetic_forecast(tmp_path, slots=400, jobs=1500, history_jobs=4000)
    spec = ForecastSpec(snapshot=snap, history=(hist,), hours=1)
    found = []
    real = SimPool.find_runnable_job

    def spy(self, c, slot, matched=None):
        got = real(self, c, slot, matched)
        if got is not None:
            assert got.status == 1 and got.cls.submitter == c.submitter
            assert got.cls.schedd == c.schedd and self.fits(got, slot)
        found.append(got)
        return got
    monkeypatch.setattr(SimPool, "find_runnable_job", spy)
    used = run_forecast(spec)
    monkeypatch.setattr(SimPool, "find_runnable_job", lambda self, c, slot, matched=None: None)
    dropped = run_forecast(spec)
    rematched = sum(j is not None for j in found)
    assert rematched > 20
    assert used.claims_failed == len(found) - rematched
    assert dropped.claims_failed >= used.claims_failed + 20, (dropped.claims_failed, used.claims_failed)
