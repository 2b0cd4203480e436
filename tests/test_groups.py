"""Accounting groups (reference section 3): tree (G1, G2), name mapping (G3), quota
assignment (G4), demand (G5), and the pool sizes quotas are assigned from."""

import classad2
import pytest

from negotiator_ext.core.config import GroupConfig, NegotiatorConfig
from negotiator_ext.core.groups import GroupTree, dotted_prefixes, group_demand, is_group_name
from negotiator_ext.core.slots import pool_sizes


def static(name, q, accept=False):
    return GroupConfig(name, float(q), None, accept, False)


def dynamic(name, q, accept=False):
    return GroupConfig(name, None, float(q), accept, False)


def tree(*groups, **knobs):
    return GroupTree(NegotiatorConfig(groups=tuple(groups), **knobs))


def test_tree_is_sorted_case_insensitively_and_breadth_first():
    t = tree(static("group_b", 1), static("Group_a.x", 1), static("group_A", 1), static("group_b.y", 1))
    assert t.group_names() == ["<none>", "group_A", "group_b", "Group_a.x", "group_b.y"]
    assert t.root.accept_surplus is True and t.warnings == []


def test_missing_parent_duplicates_and_quota_less_groups():
    t = tree(static("a.b", 1), static("c", 1), static("C", 2), GroupConfig("d", None, None, False, False))
    assert t.group_names() == ["<none>", "c", "d"]
    assert any("a.b has no parent group a" in w for w in t.warnings)
    assert any("C is listed twice" in w for w in t.warnings)
    assert any("d has no GROUP_QUOTA_" in w for w in t.warnings)
    d = t.get("d")
    assert d.static is False and d.config_quota == 0.0   # dynamic with 0, not ignored (D4)


@pytest.mark.parametrize("name,group,is_group", [
    ("group_a.b.alice@x", "group_a.b", False),
    ("GROUP_A.B.alice@x", "group_a.b", False),       # case-insensitive
    ("group_a.zzz.alice@x", "group_a", False),       # deepest defined prefix
    ("group_zzz.alice@x", "<none>", False),
    ("john.smith@x", "<none>", False),
    ("group_a@x", "<none>", False),                  # no user part
    ("group_old", "<none>", True),                   # defunct group
    ("group_a.b", "group_a.b", True),                # a group record maps to itself
    ("<none>", "<none>", True),
])
def test_assigned_group_table_of_rule_g3(name, group, is_group):
    t = tree(static("group_a", 10), static("group_a.b", 5))
    node, grp = t.assigned(name)
    assert (node.name, grp) == (group, is_group)
    assert t.assigned(name)[0] is node   # cached


def test_dotted_prefixes():
    assert dotted_prefixes("a.b.c") == ["a.b.c", "a.b", "a"]
    assert dotted_prefixes("<none>") == ["<none>"]


def test_is_group_name_and_the_records_a_match_charges():
    assert is_group_name("group_a.b") and is_group_name("<none>")
    assert not is_group_name("group_a.b.alice@x")
    t = tree(static("group_a", 10), static("group_a.b", 5))
    # rules A17, A22: the customer and its group (once when the same), Hier on prefixes
    assert t.charged_records("group_a.b.alice@x") == (("group_a.b.alice@x", "group_a.b"),
                                                      ["group_a.b", "group_a"])
    assert t.charged_records("group_a.b") == (("group_a.b",), ["group_a.b", "group_a"])
    assert t.charged_records("bob@x") == (("bob@x", "<none>"), ["<none>"])


def quotas(t, pool, demand=None):
    return {n: (q.effective_quota, q.subtree_quota) for n, q in t.assign_quotas(pool, demand).items()}


def test_static_quotas_with_oversubscription_are_not_scaled():
    # the manual's example, 15 slots: with the default (OVERSUB true) nothing is scaled
    t = tree(static("physics", 20), static("chemistry", 10))
    assert quotas(t, 15) == {"<none>": (0.0, 15.0), "physics": (20.0, 20.0), "chemistry": (10.0, 10.0)}


def test_static_quotas_scaled_down_without_oversubscription():
    t = tree(static("physics", 20), static("chemistry", 10), allow_quota_oversubscription=False)
    assert quotas(t, 15) == {"<none>": (0.0, 15.0), "physics": (10.0, 10.0), "chemistry": (5.0, 5.0)}


def test_dynamic_quotas_share_what_static_siblings_leave():
    t = tree(static("s", 40), dynamic("d1", 0.5), dynamic("d2", 0.25))
    assert quotas(t, 100) == {"<none>": (15.0, 100.0), "s": (40.0, 40.0),
                              "d1": (30.0, 30.0), "d2": (15.0, 15.0)}


def test_dynamic_quotas_over_one_are_normalized():
    t = tree(dynamic("d1", 0.6), dynamic("d2", 0.6))
    q = quotas(t, 100)
    assert q["d1"] == pytest.approx((50.0, 50.0)) and q["d2"] == pytest.approx((50.0, 50.0))
    assert q["<none>"][0] == pytest.approx(0.0)


def test_internal_group_keeps_its_full_quota_with_oversubscription():
    t = tree(static("p", 50), static("p.a", 30), static("p.b", 20))
    assert quotas(t, 100)["p"] == (50.0, 50.0)           # not 50 - 30 - 20
    t = tree(static("p", 50), static("p.a", 30), static("p.b", 10), allow_quota_oversubscription=False)
    assert quotas(t, 100)["p"] == (10.0, 50.0)


def test_empty_pool_gives_zero_quotas_and_demand_is_reported():
    t = tree(static("g", 5))
    out = t.assign_quotas(0, {"G": 7.0})
    assert (out["g"].effective_quota, out["g"].subtree_quota, out["g"].requested) == (0.0, 0.0, 7.0)
    assert out["g"].surplus_policy == "no" and out["<none>"].surplus_policy == "byquota"


def test_demand_weighted_and_not():
    t = tree(static("g", 5))
    subs = [
        {"Name": "g.u@x", "RunningJobs": 2, "IdleJobs": 3, "WeightedRunningJobs": 8, "WeightedIdleJobs": 12},
        {"Name": "g.v@x", "RunningJobs": 1, "IdleJobs": 1},      # no weighted counts: unweighted used
        {"Name": "w@x", "RunningJobs": 0, "IdleJobs": 4},
        {"Name": "g", "RunningJobs": 9, "IdleJobs": 9},         # no '@': skipped
    ]
    assert group_demand(t, subs, weighted=True) == {"g": 22.0, "<none>": 4.0}
    assert group_demand(t, subs, weighted=False) == {"g": 7.0, "<none>": 4.0}


def test_pool_sizes_weights_partitionable_slots_and_constraint():
    ads = [classad2.ClassAd({"Cpus": 8, "PartitionableSlot": True, "Kind": "big"}),
           classad2.ClassAd({"Cpus": 1, "Kind": "small"}),
           classad2.ClassAd({"Cpus": 2, "Kind": "small"})]
    weights = [8.0, 1.0, 2.0]
    assert pool_sizes(ads, weights, NegotiatorConfig()) == (3, 11.0, 10.0)
    assert pool_sizes(ads, weights, NegotiatorConfig(use_slot_weights=False)) == (3, 3.0, 10.0)
    only_small = NegotiatorConfig(slot_poolsize_constraint='Kind == "small"')
    assert pool_sizes(ads, weights, only_small) == (2, 3.0, 2.0)


def test_global_surplus_and_autoregroup_are_the_or_of_all_groups():
    assert tree(static("a", 1), static("b", 1, accept=True)).global_accept_surplus is True
    assert tree(static("a", 1)).global_accept_surplus is False
    assert tree(static("a", 1), group_accept_surplus=True).global_accept_surplus is True
    t = tree(static("a", 1), GroupConfig("b", 1.0, None, False, True))
    assert t.root.autoregroup is True
    assert t.surplus_policy(t.get("b")) == "regroup" and t.surplus_policy(t.get("a")) == "no"
