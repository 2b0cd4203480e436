"""NEGOTIATOR_IGNORE_JOB_RANKS (core.static_ranks): the slot sort against an empty
request, ranks fixed per slot, the job's Rank ignored, a scan that stops once the kept
candidates' SlotWeight exceeds the submitter limit, and the MatchList sorted as
std::sort sorts it. Each test says what the knob changes against it being off."""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

import pytest

from negotiator_ext.core import classads, static_ranks
from negotiator_ext.core.classads import DBL_MAX
from negotiator_ext.core.cxxsort import cxx_sort
from negotiator_ext.cycle import run_cycle
from negotiator_ext.pool import load_pool
from poolmaker import Expr, job, make_pool, slot

ON = "NEGOTIATOR_IGNORE_JOB_RANKS = True\n"
NO_PREEMPTION, PRIO_PREEMPTION = 2, 0


def _slot(index: int, **attrs):
    return SimpleNamespace(index=index, ad=classads.ClassAd(attrs), cp=False, removed=False,
                           fixed=(), sort_pos=-1, scan_weight=1.0)


def _config(pre: str | None, post: str | None, **kw):
    base = dict(pre_job_rank=pre, post_job_rank=post, slot_weight="Cpus",
                force_negotiator_slot_weight=False)
    base.update(kw)
    return SimpleNamespace(**base)


def _cycle(tmp_path, config: str, **kw):
    pool = load_pool(make_pool(tmp_path, config=config, **kw))
    on = run_cycle(pool)
    off = run_cycle(replace(pool, config=replace(pool.config, ignore_job_ranks=False)))
    return pool, on, off


# ---- the slot sort (rankSorter) -----------------------------------------------------

def test_slots_sort_by_pre_then_post_rank_then_the_collectors_order():
    slots = [_slot(0, A=1, B=5), _slot(1, A=2, B=0), _slot(2, A=1, B=7), _slot(3, A=1, B=5)]
    static_ranks.sort_slots(slots, _config("A", "B"))
    assert [s.sort_pos for s in slots] == [2, 0, 1, 3]
    assert [s.fixed for s in slots] == [(1.0, 5.0), (2.0, 0.0), (1.0, 7.0), (1.0, 5.0)]


def test_ranks_are_those_of_an_empty_request():
    # the job's attributes are not there when the sort computes the ranks: TARGET.x is
    # undefined, and a rank that is no number is -DBL_MAX
    slots = [_slot(0, Speed=1), _slot(1, Speed=3)]
    static_ranks.sort_slots(slots, _config(
        "ifThenElse(TARGET.RequestMemory =?= UNDEFINED, Speed, 0 - Speed)",
        "TARGET.RequestMemory"))
    assert [s.fixed for s in slots] == [(1.0, -DBL_MAX), (3.0, -DBL_MAX)]
    assert [s.sort_pos for s in slots] == [1, 0]


def test_a_nan_rank_sorts_as_libstdcxx_compares_it():
    slots = [_slot(0, A=1.0), _slot(1, A=float("nan")), _slot(2, A=2.0)]
    static_ranks.sort_slots(slots, _config("A", None))
    keys = [(s.fixed[0], s.fixed[1], s.index) for s in slots]
    want = cxx_sort(keys, static_ranks._sorter_less)
    assert [s.sort_pos for s in slots] == [want.index(k) for k in keys]


def test_the_scan_weight_is_the_slot_weight_attribute_whatever_the_accountant_uses():
    cfg = _config(None, None)
    assert static_ranks.scan_weight(classads.ClassAd({"Cpus": 4}), cfg) == 4.0
    assert static_ranks.scan_weight(classads.ClassAd({"Cpus": 4, "SlotWeight": 2}), cfg) == 2.0
    # negative counts as it is (the accountant would take 1.0); not a number: SLOT_WEIGHT
    assert static_ranks.scan_weight(classads.ClassAd({"SlotWeight": -1}), cfg) == -1.0
    assert static_ranks.scan_weight(classads.ClassAd({"Cpus": 3, "SlotWeight": "x"}), cfg) == 3.0
    assert static_ranks.scan_weight(classads.ClassAd({}), cfg) == 1.0
    forced = _config(None, None, force_negotiator_slot_weight=True)
    assert static_ranks.scan_weight(classads.ClassAd({"Cpus": 4, "SlotWeight": 2}), forced) == 4.0


# ---- the early stop ------------------------------------------------------------------

class _Cls:
    def __init__(self, members):
        self.members = members

    def walk(self):
        return iter(self.members)


def test_the_scan_keeps_candidates_until_their_weight_exceeds_the_limit():
    slots = [_slot(i) for i in range(6)]
    for i, s in enumerate(slots):
        s.sort_pos = i
    weights = {0: 3.0, 1: 1.0, 2: 1.0, 3: 3.0, 4: 1.0, 5: 1.0}
    accepted = [(_Cls([slots[0], slots[3]]), None, PRIO_PREEMPTION),
                (_Cls([slots[1], slots[2], slots[4], slots[5]]), None, NO_PREEMPTION)]
    kept, stop = static_ranks.first_candidates(accepted, 7.5, lambda s: weights[s.index])
    # 3 + 1 + 1 + 3 = 8 > 7.5: the fourth candidate is the last one kept
    assert [(s.index, st) for s, st in kept] == [(0, 0), (1, 2), (2, 2), (3, 0)]
    assert stop == 3
    slots[1].removed = True                     # a removed slot is no candidate
    kept, stop = static_ranks.first_candidates(accepted, 100, lambda s: weights[s.index])
    assert [s.index for s, _ in kept] == [0, 2, 3, 4, 5] and stop == float("inf")


# ---- the MatchList -------------------------------------------------------------------

def _kept(keys):
    out = []
    for i, (pre, post, state) in enumerate(keys):
        s = _slot(i)
        s.fixed = (pre, post)
        out.append((s, state))
    return out


def test_the_match_list_puts_no_preemption_first_among_equal_ranks():
    kept = _kept([(1, 0, PRIO_PREEMPTION), (1, 0, NO_PREEMPTION), (2, 0, PRIO_PREEMPTION)])
    ml = static_ranks.StaticMatchList(kept, None, sort=True)
    assert [ml.pop()[0].index for _ in range(3)] == [2, 1, 0] and ml.pop() is None


def test_equal_candidates_leave_the_match_list_as_std_sort_leaves_them():
    kept = _kept([(0, 0, NO_PREEMPTION)] * 20)
    ml = static_ranks.StaticMatchList(kept, None, sort=True)
    order = [ml.pop()[0].index for _ in range(20)]
    assert sorted(order) == list(range(20))
    assert order != list(range(20))            # more than 16: introsort moves equals


def test_without_a_match_list_the_first_best_candidate_of_the_scan_is_taken():
    kept = _kept([(0, 0, NO_PREEMPTION)] * 20)
    ml = static_ranks.StaticMatchList(kept, None, sort=False)
    assert ml.pop()[0].index == 0 and ml.pop() is None


def test_a_partitionable_slot_put_back_is_inserted_as_the_negotiator_inserts_it():
    kept = _kept([(5, 0, NO_PREEMPTION), (3, 0, NO_PREEMPTION), (1, 0, NO_PREEMPTION)])
    ml = static_ranks.StaticMatchList(kept, None, sort=True)
    top, _ = ml.pop()
    ml.push_slot(top, None, NO_PREEMPTION)
    # moved down past every entry it is better than: to the end
    assert [ml.pop()[0].index for _ in range(3)] == [1, 2, 0]
    kept = _kept([(5, 0, NO_PREEMPTION), (5, 0, NO_PREEMPTION), (1, 0, NO_PREEMPTION)])
    ml = static_ranks.StaticMatchList(kept, None, sort=True)
    top, _ = ml.pop()
    ml.push_slot(top, None, NO_PREEMPTION)     # the next one is as good: it stays on top
    assert [ml.pop()[0].index for _ in range(3)] == [0, 1, 2]


# ---- whole cycles --------------------------------------------------------------------

def test_the_jobs_rank_is_ignored(tmp_path):
    slots = [slot(f"slot{i}@n{i}", Speed=i) for i in range(1, 5)]
    jobs = [job(1, p, "alice", Rank=Expr("0 - Speed")) for p in range(2)]
    _, on, off = _cycle(tmp_path, ON + "NEGOTIATOR_PRE_JOB_RANK = 0\n"
                        "NEGOTIATOR_POST_JOB_RANK = Speed\n", slots=slots, jobs=jobs)
    assert [m.slot for m in off.matches] == ["slot1@n1", "slot2@n2"]   # the job's choice
    assert [m.slot for m in on.matches] == ["slot4@n4", "slot3@n3"]    # the post rank's


def test_a_job_dependent_pre_rank_is_the_empty_requests(tmp_path):
    slots = [slot(f"slot{i}@n{i}", Speed=i) for i in range(1, 5)]
    jobs = [job(1, p, "alice") for p in range(2)]
    _, on, off = _cycle(tmp_path, ON + "NEGOTIATOR_PRE_JOB_RANK = ifThenElse(TARGET.RequestMemory "
                        "=?= UNDEFINED, Speed, 0 - Speed)\n", slots=slots, jobs=jobs)
    assert [m.slot for m in off.matches] == ["slot1@n1", "slot2@n2"]
    assert [m.slot for m in on.matches] == ["slot4@n4", "slot3@n3"]


def test_the_scan_stops_at_the_limit_and_the_list_runs_out(tmp_path):
    # two submitters of equal priority on 4 heavy slots (SlotWeight 8, first in the
    # sort), 16 light ones and one that matches nothing (weight 9): the limit is 28.5
    # each. The first one's scan keeps 3 heavy slots and the fourth (32 > 28.5): it
    # matches 3, is refused the fourth and finds nothing more in its list; off, its
    # list goes on to the light slots (3 heavy and 4 light: 28)
    heavy = [slot(f"slot1@h{i}", Speed=10 + i, SlotWeight=8) for i in range(4)]
    light = [slot(f"slot1@l{i:02d}", Speed=1) for i in range(16)]
    idle = [slot("slot1@x", SlotWeight=9, START=False)]
    jobs = ([job(1, p, "a") for p in range(20)] + [job(2, p, "b") for p in range(20)])
    _, on, off = _cycle(tmp_path, ON + "NEGOTIATOR_POST_JOB_RANK = Speed\n",
                        slots=heavy + light + idle, jobs=jobs)

    def got(r):
        out = {}
        for m in r.matches:
            out.setdefault(m.submitter.split("@")[0], []).append(m.slot)
        return out
    first = on.matches[0].submitter.split("@")[0]
    other = ({"a", "b"} - {first}).pop()
    assert got(on)[first] == ["slot1@h3", "slot1@h2", "slot1@h1"]
    assert sorted(got(on)[other]) == ["slot1@h0"] + [s["Name"] for s in light]
    assert len(got(off)[first]) == 3 + 4 and len(got(off)[other]) == 1 + 12
    rej = [(r.submitter.split("@")[0], r.reason) for r in on.rejections]
    assert rej[0] == (first, "submitter limit exceeded")


def test_refusals_past_the_stop_are_not_counted(tmp_path):
    # without slot weights alice's limit is the slot count, 3; the scan adds the
    # SlotWeight attribute all the same: 1 + 5 > 3 stops it at the second slot, before
    # the claimed one PREEMPTION_REQUIREMENTS refuses. Both free slots are matched; her
    # third job finds the list empty, with no refusal counted: no reason
    free = [slot("slot1@n1", Speed=3), slot("slot2@n2", Speed=2, SlotWeight=5)]
    held = slot("slot3@n3", Speed=1, State="Claimed", Activity="Busy",
                RemoteUser="bob@test.local", AccountingGroup="bob@test.local")
    jobs = [job(1, p, "alice") for p in range(4)]
    cfg = ("NEGOTIATOR_CONSIDER_PREEMPTION = True\nPREEMPTION_REQUIREMENTS = False\n"
           "NEGOTIATOR_USE_SLOT_WEIGHTS = False\n"
           "NEGOTIATOR_POST_JOB_RANK = Speed\nNEGOTIATOR_PRE_JOB_RANK = 0\n")
    _, on, off = _cycle(tmp_path, ON + cfg, slots=free + [held], jobs=jobs)
    assert [m.slot for m in on.matches] == [m.slot for m in off.matches] == [
        "slot1@n1", "slot2@n2"]
    assert [r.reason for r in off.rejections] == ["PREEMPTION_REQUIREMENTS == False"]
    assert [r.reason for r in on.rejections] == ["no match found"]


@pytest.mark.parametrize("on", [True, False])
def test_the_warning_names_only_the_order_among_equal_slots(tmp_path, on):
    d = make_pool(tmp_path, slots=[slot("slot1@a")], jobs=[job(1, 0, "alice")],
                  config=f"NEGOTIATOR_IGNORE_JOB_RANKS = {on}")
    got = [w for w in load_pool(d).warnings if "NEGOTIATOR_IGNORE_JOB_RANKS" in w]
    if not on:
        assert got == []
        return
    assert len(got) == 1
    assert "the cycle runs as if it were off" not in got[0]
    assert "address of each ad in the negotiator's memory" in got[0]
