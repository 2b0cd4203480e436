"""Hierarchical group quotas after quota assignment (reference 3.5-3.7, rules G6-G11):
fair share and surplus, fractional remainders, allocation rounds, group order, group
limits and the strict quota cap. Every expected number is worked out by hand in the
comments (or read from a real negotiator's recording)."""

import json
import math
import re

import pytest

from conftest import FIXTURES
from negotiator_ext.core.config import GroupConfig, NegotiatorConfig
from negotiator_ext.core.groups import GroupTree, group_demand
from negotiator_ext.core.hgq import (FLT_MAX, INT_MIN, allocate_surplus_loop, build_allocs,
                                     c_int, fairshare, group_sort_key, negotiate_all_groups,
                                     prepare_for_matchmaking, recover_remainders, round_robin,
                                     strict_enforce_quota)


def static(name, q, accept=False, regroup=False):
    return GroupConfig(name, float(q), None, accept, regroup)


def dynamic(name, q, accept=False, regroup=False):
    return GroupConfig(name, None, float(q), accept, regroup)


def setup(*groups, **knobs):
    config = NegotiatorConfig(groups=tuple(groups), **knobs)
    return GroupTree(config), config


class FakePool:
    """A fake accountant + negotiator in the spirit of hgq_group_tester: negotiating a
    group raises its usage towards the limit, as far as its idle jobs, the matchable
    share of them and the free slots of the pool allow. `charge` maps a negotiating
    group to the group its matches are charged to (autoregroup: the root serves others)."""

    def __init__(self, slots, usage=None, idle=None, matchable=None, charge=None):
        self.free = float(slots) - sum((usage or {}).values())
        self.used = dict(usage or {})
        self.idle = dict(idle or {})
        self.matchable = dict(matchable or {})
        self.charge = charge or {}
        self.calls = []

    def usage(self, name):
        return self.used.get(name, 0.0)

    def has_submitters(self, name):
        return name in self.idle or name in self.charge

    def negotiate(self, g, limit):
        assert isinstance(limit, int)
        self.calls.append((g.name, limit))
        for who in self.charge.get(g.name, [g.name]):
            u = self.used.get(who, 0.0)
            room = (self.idle.get(who, 0.0) if who != g.name else limit - u)
            m = max(0.0, min(self.idle.get(who, 0.0), room, self.free,
                             self.matchable.get(who, math.inf)))
            self.used[who] = u + m
            self.idle[who] = self.idle.get(who, 0.0) - m
            self.free -= m
            if who in self.matchable:
                self.matchable[who] -= m


def run(tree, config, pool_size, demand, fake, now=1000.0, rr_times=None):
    return negotiate_all_groups(tree, config, tree.assign_quotas(pool_size, demand), fake.usage,
                                fake.has_submitters, fake.negotiate, now, rr_times)


def allocated(allocs):
    return {n: g.allocated for n, g in allocs.items()}


# ---------------------------------------------------------------- G4 inside the cycle

def test_manual_example_scaled_without_oversubscription():
    # 15 slots, physics 20 + chemistry 10 with OVERSUB false: scaled by 15/30 to 10 and 5
    tree, config = setup(static("physics", 20), static("chemistry", 10),
                         allow_quota_oversubscription=False)
    fake = FakePool(15, idle={"physics": 40, "chemistry": 40})
    out = run(tree, config, 15, {"physics": 40, "chemistry": 40}, fake)
    g = out.groups
    assert (g["<none>"].quota, g["physics"].quota, g["chemistry"].quota) == (0.0, 10.0, 5.0)
    assert (g["physics"].subtree_quota, g["chemistry"].subtree_quota) == (10.0, 5.0)
    assert out.quotas_hash == {"<none>": 0.0, "chemistry": 5.0, "physics": 10.0}
    # sort keys tie at 0: breadth-first (case-insensitively sorted) order, chemistry first
    assert fake.calls == [("chemistry", 5), ("physics", 10)]
    assert out.rounds == 1 and out.totals == [(15.0, 15.0)]
    assert g["physics"].currently_requested == 40.0


def test_manual_example_with_oversubscription_needs_a_second_round():
    # OVERSUB true (default): quotas 20 and 10 on 15 slots, the root's own quota is 0
    tree, config = setup(static("physics", 20), static("chemistry", 10))
    fake = FakePool(15, idle={"physics": 40, "chemistry": 40})
    out = run(tree, config, 15, {"physics": 40, "chemistry": 40}, fake)
    g = out.groups
    assert (g["<none>"].quota, g["physics"].quota, g["chemistry"].quota) == (0.0, 20.0, 10.0)
    # round 1: chemistry takes 10, physics only gets the 5 slots left (usage 5 < 20);
    # round 2: physics is allocated its usage 5 but negotiates up to max(5, quota 20),
    # and goes first (5/20 = 0.25 < chemistry 10/10)
    assert fake.calls == [("chemistry", 10), ("physics", 20), ("physics", 20), ("chemistry", 10)]
    assert out.totals == [(30.0, 15.0), (15.0, 15.0)]
    assert out.rounds == 2
    assert out.orders[1] == [("physics", 0.25), ("chemistry", 1.0), ("<none>", 3.4e38)]
    assert allocated(g) == {"<none>": 0.0, "chemistry": 10.0, "physics": 5.0}


def test_dynamic_quotas_share_what_is_left_after_static_siblings():
    # 100 slots: static s 40; d1 0.5 and d2 0.25 of the 60 left -> 30 and 15; root 15
    tree, config = setup(static("s", 40), dynamic("d1", 0.5, accept=True), dynamic("d2", 0.25))
    allocs = prepare_for_matchmaking(tree, tree.assign_quotas(100, {"d1": 50, "d2": 10}), lambda n: 0.0)
    assert {n: g.quota for n, g in allocs.items()} == {"<none>": 15.0, "s": 40.0, "d1": 30.0, "d2": 15.0}
    # surplus: root 15 + s 40 (unused) + d2 5 = 60; only d1 accepts, and asks for 20 more
    assert fairshare(allocs["<none>"]) == 40.0
    assert allocated(allocs) == {"<none>": 0.0, "s": 0.0, "d1": 50.0, "d2": 10.0}

    # dynamic fractions summing to 1.5 are normalized: 0.75 x 60 / 1.5 = 30 each
    tree, _ = setup(static("s", 40), dynamic("d1", 0.75), dynamic("d2", 0.75))
    allocs = prepare_for_matchmaking(tree, tree.assign_quotas(100, {}), lambda n: 0.0)
    assert {n: g.quota for n, g in allocs.items()} == {"<none>": 0.0, "s": 40.0, "d1": 30.0, "d2": 30.0}


# ---------------------------------------------------------------- G6-G8

def test_non_accepting_child_hands_its_unused_quota_up():
    # OVERSUB (default): a's own quota is its full 60 besides children x 40 and y 20
    tree, _ = setup(static("a", 60, accept=True), static("a.x", 40, accept=True),
                    static("a.y", 20, accept=False), static("b", 40, accept=False))
    demand = {"a": 10, "a.x": 70, "a.y": 5, "b": 50}
    allocs = prepare_for_matchmaking(tree, tree.assign_quotas(100, demand), lambda n: 0.0)
    assert allocs["a"].quota == 60.0 and allocs["<none>"].quota == 0.0
    # a: own 60 - 10 = 50 unused + y's 15 unused = 65 >= x's unmet 30: x gets all of it;
    # 35 goes up; b does not accept surplus and keeps its quota 40 for a demand of 50
    assert fairshare(allocs["<none>"]) == 35.0
    assert allocated(allocs) == {"<none>": 0.0, "a": 10.0, "b": 40.0, "a.x": 70.0, "a.y": 5.0}
    assert allocs["b"].requested == 10.0 and allocs["<none>"].subtree_requested == 0.0


@pytest.mark.parametrize("a_accepts", [True, False])
def test_parent_competes_with_its_children_by_its_own_quota(a_accepts):
    # inside its own subtree a parent always takes part as an accepting peer
    tree, _ = setup(static("a", 60, accept=a_accepts), static("a.x", 40, accept=True),
                    static("a.y", 20, accept=False), static("b", 40, accept=False))
    demand = {"a": 80, "a.x": 70, "a.y": 5, "b": 50}
    allocs = prepare_for_matchmaking(tree, tree.assign_quotas(100, demand), lambda n: 0.0)
    # only y's 15 is surplus; claimants x (weight 40, needs 30) and a itself (weight =
    # its own quota 60, needs 20): 15 x 40/100 = 6 and 15 x 60/100 = 9
    assert fairshare(allocs["<none>"]) == 0.0
    assert allocated(allocs) == {"<none>": 0.0, "a": 69.0, "b": 40.0, "a.x": 46.0, "a.y": 5.0}
    assert allocs["a"].subtree_requested == 35.0       # 11 (a) + 24 (x) still unmet


def test_nested_surplus_is_pushed_down_by_subtree_quota():
    # OVERSUB false: a 50 (own 0) with x 30 and y 20; b 30; root's own quota 20
    tree, config = setup(static("a", 50, accept=True), static("a.x", 30, accept=True),
                         static("a.y", 20, accept=True), static("b", 30, accept=True),
                         allow_quota_oversubscription=False)
    demand = {"a.x": 60, "a.y": 10, "b": 60}
    allocs = prepare_for_matchmaking(tree, tree.assign_quotas(100, demand), lambda n: 0.0)
    # inside a: y's 10 unused -> x (x 40, still needs 20). At the root: 20 over a (weight
    # subtree_quota 50, needs 20) and b (weight 30, needs 30): 12.5 and 7.5; a pushes its
    # 12.5 down to x.
    assert fairshare(allocs["<none>"]) == 0.0
    assert allocated(allocs) == {"<none>": 0.0, "a": 0.0, "b": 37.5, "a.x": 52.5, "a.y": 10.0}
    assert allocs["a"].subtree_requested == 7.5 and allocs["<none>"].subtree_requested == 30.0


def test_by_quota_pass_then_equal_pass_serves_zero_quota_groups_from_leftovers():
    # 14 slots: p 6, q 3, z 0 (all accept); root's own quota 14 - 9 = 5 is the surplus
    tree, _ = setup(static("p", 6, accept=True), static("q", 3, accept=True), static("z", 0, accept=True))
    allocs = prepare_for_matchmaking(tree, tree.assign_quotas(14, {"p": 7, "q": 4, "z": 10}), lambda n: 0.0)
    # by quota: p would get 5x6/9, q 5x3/9, both capped at their need of 1; z (weight 0)
    # nothing; the equal pass gives z the 3 left
    assert fairshare(allocs["<none>"]) == 0.0
    assert allocated(allocs) == {"<none>": 0.0, "p": 7.0, "q": 4.0, "z": 3.0}
    # a zero-quota group that does not accept surplus gets nothing; the 3 go back up
    tree, _ = setup(static("p", 6, accept=True), static("q", 3, accept=True), static("z", 0))
    allocs = prepare_for_matchmaking(tree, tree.assign_quotas(14, {"p": 7, "q": 4, "z": 10}), lambda n: 0.0)
    assert fairshare(allocs["<none>"]) == 3.0
    assert allocated(allocs) == {"<none>": 0.0, "p": 7.0, "q": 4.0, "z": 0.0}


def test_allocate_surplus_loop_by_quota_and_equal():
    weights, alloc = [2.0, 1.0, 0.0], [0.0, 0.0, 0.0]
    need = [1.0, 10.0, 10.0]
    # by quota, 6 over weights 3: 4 (capped 1) and 2; then 3 left over weight 1: q +3
    s, r = allocate_surplus_loop(True, weights, alloc, need, 6.0, 21.0)
    assert (s, r, alloc, need) == (0.0, 15.0, [1.0, 5.0, 0.0], [0.0, 5.0, 10.0])
    s, r = allocate_surplus_loop(False, weights, alloc, need, 4.0, 15.0)
    assert (s, r, alloc) == (0.0, 11.0, [1.0, 7.0, 2.0])


# ---------------------------------------------------------------- G9

def test_round_robin_order_rr_time_then_quota_then_requested():
    tree, _ = setup(static("c1", 5, accept=True), static("c2", 1, accept=True), static("c3", 5, accept=True))
    allocs = build_allocs(tree)
    for name, rr, q, req in (("c1", 10.0, 5.0, 3.0), ("c2", 5.0, 1.0, 1.0), ("c3", 10.0, 5.0, 4.0)):
        g = allocs[name]
        g.subtree_rr_time, g.rr_time, g.subtree_quota = rr, rr, q
        g.subtree_requested = g.requested = req
    root = allocs["<none>"]
    root.subtree_requested, root.rr_time = 8.0, 0.0
    # 2 slots, 3 outstanding: amax = max(1, floor(2/3)) = 1; c2 (oldest), then c3 (same
    # time and quota as c1, more requested); c1 gets nothing
    assert round_robin(root, 2.0) == 0.0
    assert allocated(allocs) == {"<none>": 0.0, "c1": 0.0, "c2": 1.0, "c3": 1.0}
    assert [allocs[n].rr for n in ("c1", "c2", "c3")] == [False, True, True]
    assert root.subtree_requested == 6.0
    assert round_robin(root, 0.5) == 0.5       # less than a whole slot: nothing to do


def nested_weights_off(**knobs):
    return setup(static("a", 50, accept=True), static("a.x", 30, accept=True),
                 static("a.y", 20, accept=True), static("b", 30, accept=True),
                 allow_quota_oversubscription=False, use_slot_weights=False, **knobs)


def test_recover_remainders_gives_the_fractions_round_robin():
    tree, _ = nested_weights_off()
    allocs = prepare_for_matchmaking(tree, tree.assign_quotas(100, {"a.x": 60, "a.y": 10, "b": 60}), lambda n: 0.0)
    fairshare(allocs["<none>"])                    # x 52.5, b 37.5 (see above)
    # x and b give up 0.5 each; a's subtree has only 0.5 (< 1 slot) and passes it up; at
    # the root 1 slot goes to the larger subtree_quota (a 50 > b 30) on an rr_time tie,
    # and a pushes it down to x
    assert recover_remainders(allocs["<none>"]) == 0.0
    assert allocated(allocs) == {"<none>": 0.0, "a": 0.0, "b": 37.0, "a.x": 53.0, "a.y": 10.0}
    assert (allocs["a.x"].requested, allocs["b"].requested) == (7.0, 23.0)
    assert [n for n, g in allocs.items() if g.rr] == ["a", "a.x"]


def test_recover_remainders_prefers_the_oldest_round_robin_time():
    tree, _ = nested_weights_off()
    allocs = prepare_for_matchmaking(tree, tree.assign_quotas(100, {"a.x": 60, "a.y": 10, "b": 60}), lambda n: 0.0,
                                     rr_times={"a.x": 500.0, "b": 100.0})
    fairshare(allocs["<none>"])
    recover_remainders(allocs["<none>"])
    assert allocs["a"].subtree_rr_time == 500.0     # restored after the round robin
    assert allocated(allocs) == {"<none>": 0.0, "a": 0.0, "b": 38.0, "a.x": 52.0, "a.y": 10.0}


def test_weights_off_cycle_stamps_rr_time_of_served_and_satisfied_groups():
    tree, config = nested_weights_off()
    demand = {"a.x": 60, "a.y": 10, "b": 60}
    fake = FakePool(100, idle=dict(demand))
    out = run(tree, config, 100, demand, fake, now=1234.9, rr_times={"b": 7.0})
    # y may go up to its quota 20 (target = max(allocated 10, quota 20))
    assert sorted(fake.calls) == [("a.x", 53), ("a.y", 20), ("b", 37)]
    assert out.rounds == 1 and out.totals == [(100.0, 100.0)]
    # stamped: a and x (served by round robin), root and a (request nothing); b and y
    # (demand restored to 60 and 10 after the round) keep theirs. time() is whole seconds.
    assert out.rr_times == {"<none>": 1234.0, "a": 1234.0, "b": 7.0, "a.x": 1234.0, "a.y": 0.0}


# ---------------------------------------------------------------- G10

def test_autoregroup_root_gets_the_pool_and_negotiates_last():
    tree, config = setup(static("g1", 5, regroup=True), static("g2", 5),
                         group_sort_expr='ifThenElse(AccountingGroup=?="<none>", -1, GroupResourcesInUse/GroupQuota)')
    assert tree.root.autoregroup is True
    # the root negotiates for g1's ads (charged to g1)
    fake = FakePool(20, idle={"g1": 15, "g2": 3}, charge={"<none>": ["g1"]})
    out = run(tree, config, 20, {"g1": 15, "g2": 3}, fake)
    # every round the root is allocated (and allowed) the whole pool; its sort key -1
    # would put it first, autoregroup puts it last
    assert out.quotas_hash == {"<none>": 20.0, "g1": 5.0, "g2": 5.0}
    assert out.orders[0] == [("g1", 0.0), ("g2", 0.0), ("<none>", -1.0)]
    assert out.orders[1] == [("g2", 0.6), ("g1", 3.0), ("<none>", -1.0)]
    assert fake.calls == [("g1", 5), ("g2", 5), ("<none>", 20)] + [("g2", 5), ("g1", 5), ("<none>", 20)] * 2
    assert fake.used == {"g1": 15.0, "g2": 3.0}
    # the root's allocation of 20 is never used by the root itself: all 3 rounds run
    assert out.rounds == 3 and out.totals == [(28.0, 8.0)] * 3
    assert out.groups["<none>"].quota == 20.0


def test_allocation_rounds_let_others_use_what_a_group_could_not():
    tree, config = setup(static("a", 5, accept=True), static("b", 5, accept=True))
    demand = {"a": 8, "b": 8}
    fake = FakePool(10, idle=dict(demand), matchable={"a": 2})    # a's jobs mostly reject
    out = run(tree, config, 10, demand, fake)
    # round 1: 5 each, a matches 2; round 2: a is allocated 2 and b gets a's 3 (b 8),
    # a (2/5 = 0.4) goes first and may still try up to its quota 5
    assert fake.calls == [("a", 5), ("b", 5), ("a", 5), ("b", 8)]
    assert out.totals == [(10.0, 7.0), (10.0, 10.0)]
    assert out.rounds == 2 and fake.used == {"a": 2.0, "b": 8.0}
    assert allocated(out.groups) == {"<none>": 0.0, "a": 2.0, "b": 8.0}

    tree, config = setup(static("a", 5, accept=True), static("b", 5, accept=True),
                         group_quota_max_allocation_rounds=1)
    fake = FakePool(10, idle=dict(demand), matchable={"a": 2})
    out = run(tree, config, 10, demand, fake)
    assert out.rounds == 1 and fake.used == {"a": 2.0, "b": 5.0}


def test_skips_zero_allocation_no_submitters_and_full_groups_without_preemption():
    groups = (static("a", 5), static("b", 5), static("c", 5))
    demand = {"a": 5, "b": 5}                   # a: 5 running; b has no ads left; c nothing
    for preempt, calls in ((True, [("a", 5), ("a", 5)]), (False, [])):
        tree, config = setup(*groups, consider_preemption=preempt)
        fake = FakePool(15, usage={"a": 5.0}, idle={"a": 0.0})
        out = run(tree, config, 15, demand, fake)
        assert fake.calls == calls
        # round 1: allocated a 5 + b 5, in use 5; round 2: b's demand dropped to its usage 0
        assert out.totals == [(10.0, 5.0), (5.0, 5.0)] and out.rounds == 2


def test_zero_maxdelta_gives_a_nan_limit_passed_as_int_min():
    # everybody is at its allocation, so maxdelta = 0, but a may still go up to its quota
    # 5: slots = usage + delta x 0/0 = NaN, int(NaN) = INT_MIN (seen in a real recording)
    tree, config = setup(static("a", 5, accept=True))
    fake = FakePool(5, usage={"a": 2.0}, idle={"a": 0.0})
    out = run(tree, config, 5, {"a": 2}, fake)
    assert fake.calls == [("a", INT_MIN)]
    assert math.isnan(out.calls[0][2]) and math.isnan(out.groups["a"].limit)


def test_c_int_truncates_toward_zero_and_maps_nan_and_overflow_to_int_min():
    assert [c_int(37.9), c_int(-0.5), c_int(2147483647.0)] == [37, 0, 2147483647]
    assert [c_int(math.nan), c_int(2147483648.0), c_int(-1e300)] == [INT_MIN] * 3


def test_weighted_limit_is_truncated_to_int():
    tree, config = setup(static("a", 37.9))
    fake = FakePool(40, idle={"a": 50})
    out = run(tree, config, 40, {"a": 50}, fake)
    assert out.calls[0][2:] == (37.9, 37)


def test_round_robin_rate_grows_limits_by_n_over_maxdelta():
    tree, config = setup(static("a", 10, accept=True), static("b", 20, accept=True),
                         group_quota_round_robin_rate=5)
    demand = {"a": 10, "b": 20}
    fake = FakePool(30, idle=dict(demand))
    out = run(tree, config, 30, demand, fake)
    # maxdelta 20, n = 5, 10, 15, 20: a at 10 x n/20 = 2.5 (int 2), 5, 7.5, 10; b 5..20
    assert fake.calls == [("a", 2), ("b", 5), ("a", 5), ("b", 10), ("a", 7), ("b", 15), ("a", 10), ("b", 20)]
    assert [c[2] for c in out.calls if c[1] == "a"] == [2.5, 5.0, 7.5, 10.0]
    assert out.rounds == 1 and fake.used == {"a": 10.0, "b": 20.0}


def test_round_robin_rate_with_strict_quota_counts_own_round_matches_twice():
    # strict_enforce_quota measures the increase from the usage at the start of the
    # round but the room from the live usage: a non-surplus group's matches earlier in
    # the same round are subtracted twice, so a stalls at 5 of its 10 in round 1
    tree, config = setup(static("a", 10), static("b", 20, accept=True), group_quota_round_robin_rate=5)
    demand = {"a": 10, "b": 20}
    fake = FakePool(30, idle=dict(demand))
    out = run(tree, config, 30, demand, fake)
    round1 = [(name, limit) for r, name, limit, _ in out.calls if r == 1 and name == "a"]
    # n=15: 7.5 - 0 > room 10 - 5 -> 0 + 5; n=20: likewise
    assert round1 == [("a", 2.5), ("a", 5.0), ("a", 5.0), ("a", 5.0)]
    # round 2: a is allocated its usage 5, b its 20: maxdelta 0, and a (quota 10) gets NaN
    assert [(r, n, a) for r, n, _, a in out.calls if r == 2] == [(2, "a", INT_MIN), (2, "b", 20)]
    assert out.totals == [(30.0, 25.0), (25.0, 25.0)] and fake.used == {"a": 5.0, "b": 20.0}


def test_default_sort_expr_is_starvation_order():
    tree, config = setup(static("a", 40), static("b", 20), dynamic("c", 0))
    used = {"a": 10.0, "b": 10.0, "c": 5.0, "<none>": 7.0}
    allocs = prepare_for_matchmaking(tree, tree.assign_quotas(100, {}), used.get)
    assert allocs["c"].quota == 0.0
    keys = {n: group_sort_key(config, g) for n, g in allocs.items()}
    assert keys == {"<none>": 3.4e38, "a": 0.25, "b": 0.5, "c": 3.3e38}
    fake = FakePool(100, usage=used, idle={"a": 1, "b": 1, "c": 1, "<none>": 1})
    out = run(tree, config, 100, {"a": 11, "b": 11, "c": 6, "<none>": 8}, fake)
    assert out.orders[0] == [("a", 0.25), ("b", 0.5), ("c", 3.3e38), ("<none>", 3.4e38)]
    # the numbers are doubles in the sort ad: 2/3, not the integer division 0
    g = allocs["a"]
    g.quota, g.usage = 3, 2
    assert group_sort_key(config, g) == 2.0 / 3.0


@pytest.mark.parametrize("expr,expected", [
    ("GroupResourcesAllocated - GroupResourcesInUse", 3.0),     # 7 - 4
    ("-GroupQuota", -10.0),                                     # negative keys are fine
    ("GroupQuota > 5", 1.0),                                    # a boolean counts as 1
    ('ifThenElse(AccountingGroup == "A", 2, 9)', 2.0),          # == is case-insensitive
    ('GroupQuota / "x"', FLT_MAX),                              # error
    ("NoSuchAttribute", FLT_MAX),                               # undefined
    ('"text"', FLT_MAX),                                        # not a number
])
def test_custom_sort_expr_and_failures(expr, expected):
    tree, config = setup(static("a", 10), group_sort_expr=expr)
    g = build_allocs(tree)["a"]
    g.quota, g.allocated = 10.0, 7.0
    assert group_sort_key(config, g, in_use=4.0) == expected


# ---------------------------------------------------------------- G11

def strict_tree(p, **knobs):
    return setup(p, static("p.c1", 15, accept=True), static("p.c2", 5, accept=True), **knobs)


def test_strict_quota_caps_at_the_configured_static_quota_of_a_non_surplus_parent():
    # OVERSUB false, pool 10: p is scaled to subtree_quota 10, but the cap uses its 20
    tree, config = strict_tree(static("p", 20), allow_quota_oversubscription=False)
    used = {"p": 1.0, "p.c1": 3.0, "p.c2": 4.0, "<none>": 0.0}
    allocs = prepare_for_matchmaking(tree, tree.assign_quotas(10, {}), used.get)
    c1 = allocs["p.c1"]
    assert allocs["p"].subtree_quota == 10.0
    # new = 30 - 3 = 27, room under p = 20 - (1 + 3 + 4) = 12 -> 3 + 12
    assert strict_enforce_quota(config, c1, 30.0, used.get) == 15.0
    assert allocs["p"].subtree_usage == 8.0 and allocs["<none>"].subtree_usage == 8.0
    assert strict_enforce_quota(config, c1, 10.0, used.get) == 10.0    # under the cap
    used["p.c2"] = 30.0                                                 # p over its quota
    assert strict_enforce_quota(config, c1, 30.0, used.get) == 3.0     # no room: stays at usage
    _, off = strict_tree(static("p", 20), strict_enforce_quota=False)
    assert strict_enforce_quota(off, c1, 30.0, used.get) == 30.0


def test_strict_quota_of_a_dynamic_parent_uses_its_subtree_quota():
    tree, config = strict_tree(dynamic("p", 0.25))
    used = {"p": 1.0, "p.c1": 3.0, "p.c2": 4.0, "<none>": 0.0}
    allocs = prepare_for_matchmaking(tree, tree.assign_quotas(40, {}), used.get)
    assert allocs["p"].subtree_quota == 10.0
    assert strict_enforce_quota(config, allocs["p.c1"], 30.0, used.get) == 5.0   # 3 + (10 - 8)


def test_strict_quota_in_the_cycle_under_oversubscription():
    # OVERSUB: p's own unused quota 20 is shared by quota between c1 (15, needs 35) and
    # c2 (5, needs 5): 15 and 5, so c1 30 and c2 10, together 40 under a parent of 20.
    # p's configured 20 caps c1 + c2, measured live within the round.
    tree, config = strict_tree(static("p", 20))
    demand = {"p.c1": 50, "p.c2": 10}
    allocs = prepare_for_matchmaking(tree, tree.assign_quotas(100, demand), lambda n: 2.0 if n == "p.c2" else 0.0)
    fairshare(allocs["<none>"])
    assert allocs["p.c1"].allocated == 30.0 and allocs["p.c2"].allocated == 10.0
    fake = FakePool(100, usage={"p.c2": 2.0}, idle={"p.c1": 50, "p.c2": 8})
    run(tree, config, 100, demand, fake)
    # c1 (0/15) first: 0 + min(30, 20 - 2) = 18; then c2 (2/5): room 0 -> its usage 2
    assert fake.calls[:2] == [("p.c1", 18), ("p.c2", 2)]
    assert fake.used == {"p.c1": 18.0, "p.c2": 2.0}


# ---------------------------------------------------------------- real recordings

def _log(scenario):
    text = (FIXTURES / scenario / "expected" / "negotiator-cycle.log").read_text()
    limits = [(m[1], float(m[2])) for m in re.finditer(
        r"Group (\S+) - BEGIN NEGOTIATION with a quota limit of (\S+)", text)]
    keys = [(m[1], float(m[2])) for m in re.finditer(r"Group (\S+) - sortkey= (\S+)", text)]
    totals = [(float(m[1]), float(m[2])) for m in re.finditer(
        r"Round \d+ totals: allocated= (\S+)\s+usage= (\S+)", text)]
    return limits, keys, totals


def _same(a, b):
    return a == b or (math.isnan(a) and math.isnan(b))


def test_nested_hep_lep_fixture_by_hand():
    """hgq_nested_hep_lep_surplus, inputs copied from its files: config (quotas and
    surplus flags), submitters.ads (weighted demand), accounting.ads (group usage),
    40 slots. The real cycle ran 2 rounds with these limits."""
    tree, config = setup(static("group_physics", 20), static("group_physics.hep", 15, accept=True),
                         static("group_physics.lep", 5, accept=True), static("group_chemistry", 10))
    demand = {"group_chemistry": 20.0, "group_physics.hep": 30.0, "group_physics.lep": 2.0}
    fake = FakePool(40, usage={"group_physics.hep": 2.0, "group_physics.lep": 1.0}, idle=dict(demand))
    out = run(tree, config, 40.0, demand, fake)
    assert fake.calls == [("group_chemistry", 10), ("group_physics.hep", 19), ("group_physics.lep", 1),
                          ("group_physics.lep", INT_MIN), ("group_chemistry", 10), ("group_physics.hep", 19)]
    assert out.rounds == 2 and out.totals == [(42.0, 30.0), (30.0, 30.0)]
    assert out.orders[0] == [("group_chemistry", 0.0), ("group_physics", 0.0),
                             ("group_physics.hep", 2 / 15), ("group_physics.lep", 0.2), ("<none>", 3.4e38)]
    summary = json.loads((FIXTURES / "hgq_nested_hep_lep_surplus" / "expected" / "summary.json").read_text())
    for name, real in summary["group_quotas"].items():
        g = out.groups[name]
        assert (g.quota, g.node.config_quota, g.subtree_quota, g.currently_requested) == \
            (real["effective"], real["config"], real["subtree"], real["requested"]), name
        assert float("%.16g" % g.sort_key) == real["sort_key"], name
        assert fake.used.get(name, 0.0) == real["weighted_resources_used_after"], name
    assert out.quotas_hash == {n: r["effective"] for n, r in summary["group_quotas"].items()}


@pytest.mark.parametrize("scenario", ["hgq_nested_hep_lep_surplus", "hgq_static_30slots"])
def test_recorded_hgq_cycles_from_the_loaded_pool(scenario):
    """The recorded group limits, sort keys, round totals and quota table, with every
    input taken from the fixture through load_pool."""
    from negotiator_ext.pool import load_pool
    pool = load_pool(FIXTURES / scenario)
    demand = group_demand(pool.groups, pool.submitter_ads(), pool.config.use_weighted_demand)
    usage = {n: r.get("WeightedResourcesUsed", 0.0) for n, r in pool.accountant.customers.items()
             if pool.groups.get(n) is not None}
    size = pool.hgq_pool_size()
    fake = FakePool(size, usage=usage, idle=dict(demand))
    out = run(pool.groups, pool.config, size, demand, fake)

    limits, keys, totals = _log(scenario)
    ours = [(name, limit) for _, name, limit, _ in out.calls]
    assert len(ours) == len(limits)
    assert all(a[0] == b[0] and _same(a[1], b[1]) for a, b in zip(ours, limits)), (ours, limits)
    assert [(n, float("%g" % k)) for order in out.orders for n, k in order] == keys
    assert out.totals == totals

    summary = json.loads((FIXTURES / scenario / "expected" / "summary.json").read_text())
    for name, real in summary["group_quotas"].items():
        g = out.groups[name]
        assert (g.quota, g.subtree_quota, g.currently_requested) == \
            (real["effective"], real["subtree"], real["requested"]), name
        assert float("%.16g" % g.sort_key) == real["sort_key"], name
    matched = {n: fake.used.get(n, 0.0) - usage.get(n, 0.0) for n in out.groups}
    assert {n: m for n, m in matched.items() if m} == summary["matched_by_group"]


# ---------------------------------------------------------------- ties: libstdc++'s order

@pytest.mark.parametrize("names, first", [
    # issue 17: 100 alike groups (and the root), equal sort keys: the real 25.14
    # negotiator served them in the order group_62, group_74, group_73, ... group_67
    ([f"group_{i:02d}" for i in range(100)],
     ["group_62", "group_74", "group_73", "group_72", "group_71", "group_70", "group_69",
      "group_68", "group_67"]),
    # up to 16 (root included) std::sort's insertion sort keeps the input order (the
    # root, whose quota is 0, sorts last: its GROUP_SORT_EXPR fails, FLT_MAX)
    ([f"g{i:02d}" for i in range(15)], [f"g{i:02d}" for i in range(15)] + ["<none>"]),
])
def test_tied_groups_are_negotiated_in_libstdcxx_sort_order(names, first):
    groups = [dynamic(n, 1.0 / len(names), accept=True) for n in reversed(names)]
    tree, config = setup(*groups)
    assert [n.name for n in tree.nodes] == ["<none>"] + names       # ci_less, breadth-first
    fake = FakePool(10 * len(names), idle={n: 100 for n in names})
    out = run(tree, config, 10 * len(names), {n: 100 for n in names}, fake)
    keys = {k for n, k in out.orders[0] if n != "<none>"}
    assert len(keys) == 1                   # every group ties (unused, same quota)
    assert [n for n, _ in out.orders[0][:len(first)]] == first
    assert sorted(n for n, _ in out.orders[0]) == sorted(["<none>"] + names)


def test_round_robin_ties_follow_libstdcxx_sort_order():
    """20 alike children share whole slots of surplus: equal rr time, quota and demand,
    so the round robin's order is std::sort's over (children, then the parent)."""
    from negotiator_ext.core.cxxsort import cxx_sort
    names = [f"c{i:02d}" for i in range(20)]
    tree, config = setup(*[dynamic(n, 0.05, accept=True) for n in names], use_slot_weights=False)
    fake = FakePool(30, idle={n: 5 for n in names})
    out = run(tree, config, 30, {n: 5 for n in names}, fake)
    got = {n: g.allocated for n, g in out.groups.items() if n != "<none>"}
    # 30 slots, 20 groups asking 5 each: 1.5 each by quota, then the 0.5s as whole slots
    # round robin: 10 extra slots, given in std::sort's order of the tie
    # (the root, last, asks nothing and has quota 0: every child sorts before it)
    order = cxx_sort(list(range(21)), lambda a, b: a < 20 and b == 20)
    # what g++'s std::sort (libstdc++) gives for that comparator (printed by a C++ program)
    assert order == [1, 19, 18, 17, 16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 0, 20]
    winners = [names[j] for j in order if j < 20][:10]
    assert sorted(n for n, a in got.items() if a == 2.0) == sorted(winners)
    assert winners != names[:10]            # not the input order
