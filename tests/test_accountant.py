"""The accountant's rules (reference section 1), with exact numbers."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from negotiator_ext.core.accountant import (Accountant, AccountantState, parse_concurrency_limits,
                                            round6)
from negotiator_ext.core.config import GroupConfig, NegotiatorConfig
from negotiator_ext.core.groups import GroupTree
from negotiator_ext.core.slots import SlotUsage

DAY = 86400
T0 = 1_700_000_000


def make(customers=None, config=None, last=T0, resources=None):
    config = config or NegotiatorConfig()
    state = AccountantState(last_update_time=last, customers=customers or {}, resources=resources or {})
    return Accountant(state, config, GroupTree(config))


def slot(name, user=None, weight=1.0, state=None, group=None, activity="Busy", limits=None):
    return SlotUsage(name=name, resource_name=f"{name}@<10.0.0.1:9618>",
                     state=state or ("Claimed" if user or group else "Unclaimed"),
                     activity=activity, accounting_group=group, remote_user=user,
                     weight=weight, concurrency_limits=limits)


# ---- RUP update (rule A13) ----------------------------------------------------------

def test_new_user_on_100_cores_for_one_day_reaches_50_25():
    acc = make({"u@d": {"WeightedResourcesUsed": 100.0, "ResourcesUsed": 100}})
    acc.update_priorities(T0 + DAY)
    # P' = 0.5 * 0.5 + 100 * (1 - 0.5)
    assert acc.rup("u@d") == 50.25
    assert acc.priority("u@d") == 50250.0  # EUP with the default factor 1000


@pytest.mark.parametrize("halflives,expected", [(1, 50.0), (2, 25.0), (3, 12.5), (0.5, 100 / math.sqrt(2))])
def test_unused_priority_halves_every_half_life(halflives, expected):
    acc = make({"u@d": {"Priority": 100.0}})
    acc.update_priorities(T0 + int(halflives * DAY))
    assert acc.rup("u@d") == round6(expected)


def test_priority_never_decays_below_half():
    acc = make({"u@d": {"Priority": 0.6}})
    acc.update_priorities(T0 + 10 * DAY)
    assert acc.rup("u@d") == 0.5
    assert acc.customers["u@d"]["Priority"] == 0.5


def test_halflife_knob_is_used():
    acc = make({"u@d": {"Priority": 8.0}}, config=NegotiatorConfig(priority_halflife=3600.0))
    acc.update_priorities(T0 + 3 * 3600)
    assert acc.rup("u@d") == 1.0


def test_priorities_are_rounded_to_six_decimals_like_the_log():
    acc = make({"u@d": {"Priority": 100.0, "WeightedResourcesUsed": 3.0, "ResourcesUsed": 3}})
    acc.update_priorities(T0 + 1000)
    a = 0.5 ** (1000 / DAY)
    exact = 100.0 * a + 3.0 * (1 - a)
    assert acc.customers["u@d"]["Priority"] == float("%f" % exact)
    assert acc.customers["u@d"]["Priority"] != exact


def test_zero_and_negative_steps_change_nothing_but_the_clock():
    acc = make({"u@d": {"Priority": 10.0}})
    acc.update_priorities(T0)
    assert acc.rup("u@d") == 10.0
    acc.update_priorities(T0 - 50)  # the clock went back
    assert acc.rup("u@d") == 10.0
    assert acc.last_update_time == T0 - 50


def test_accumulated_usage_begin_and_last_usage_times():
    acc = make({"u@d": {"WeightedResourcesUsed": 2.5, "ResourcesUsed": 2}})
    acc.update_priorities(T0 + 100)
    rec = acc.customers["u@d"]
    assert rec["AccumulatedUsage"] == 200.0          # unweighted count x seconds
    assert rec["WeightedAccumulatedUsage"] == 250.0  # weighted
    assert rec["BeginUsageTime"] == T0 + 100
    assert rec["LastUsageTime"] == T0 + 100
    acc.update_priorities(T0 + 200)
    assert acc.customers["u@d"]["BeginUsageTime"] == T0 + 100  # set once


def test_weighted_accumulated_usage_starts_from_unweighted_when_missing():
    acc = make({"u@d": {"AccumulatedUsage": 1000.0, "WeightedResourcesUsed": 1.0, "ResourcesUsed": 1}})
    acc.update_priorities(T0 + 10)
    assert acc.customers["u@d"]["WeightedAccumulatedUsage"] == 1010.0


def test_last_usage_time_follows_unweighted_usage():
    # weight-0 slots: weighted usage 0 but a match exists, so the user counts as active
    acc = make({"u@d": {"WeightedResourcesUsed": 0.0, "ResourcesUsed": 1}})
    acc.update_priorities(T0 + 10)
    assert acc.customers["u@d"]["LastUsageTime"] == T0 + 10
    assert acc.rup("u@d") == 0.5


def test_records_are_never_aged_out():
    acc = make({"u@d": {"Priority": 0.5}})
    acc.update_priorities(T0 + 1000 * DAY)
    assert "u@d" in acc.customers


@settings(max_examples=60, deadline=None)
@given(p0=st.floats(0.5, 5000), usage=st.floats(0, 2000),
       steps=st.lists(st.integers(60, 20000), min_size=1, max_size=12))
def test_step_size_independence(p0, usage, steps):
    """Constant usage: many small steps compose to one big step, up to the 6-decimal
    rounding of each stored value and the 0.5 clamp (rule A13)."""
    one = make({"u@d": {"Priority": round6(p0), "WeightedResourcesUsed": usage, "ResourcesUsed": 1}})
    many = make({"u@d": {"Priority": round6(p0), "WeightedResourcesUsed": usage, "ResourcesUsed": 1}})
    t = T0
    for s in steps:
        t += s
        many.update_priorities(t)
    one.update_priorities(t)
    assert many.rup("u@d") == pytest.approx(one.rup("u@d"), abs=1e-6 * (len(steps) + 1))


# ---- priority factor (rules A9-A11) ---------------------------------------------------

def test_factor_defaults_for_nice_group_remote_and_local_names():
    cfg = NegotiatorConfig(
        accountant_local_domain="site.org",
        groups=(GroupConfig("group_a", 10.0, None, False, False),),
        group_prio_factors={"GROUP_A": 5.0},
    )
    acc = make(config=cfg)
    assert acc.priority_factor("nice-user.bob@site.org") == 1e10
    assert acc.priority_factor("group_a.bob@site.org") == 5.0
    assert acc.priority_factor("group_a.bob@elsewhere.org") == 5.0   # group beats remote
    assert acc.priority_factor("bob@elsewhere.org") == 1e7
    assert acc.priority_factor("bob@site.org") == 1000.0
    # a group record has no '@', so its "domain" is empty: remote when a domain is set
    assert acc.priority_factor("group_b") == 1e7
    assert acc.priority_factor("group_a") == 5.0


def test_nice_user_prefix_is_literal_and_remote_needs_local_domain():
    acc = make()
    assert acc.priority_factor("nice-user@x") == 1e10
    assert acc.priority_factor("group_x.nice-user.bob@x") == 1000.0
    assert acc.priority_factor("bob@anywhere") == 1000.0  # no ACCOUNTANT_LOCAL_DOMAIN: all local


def test_factor_read_writes_it_and_is_sticky():
    acc = make()
    assert "PriorityFactor" not in acc.customers.get("bob@x", {})
    assert acc.priority("bob@x") == 500.0   # 0.5 x 1000
    assert acc.customers["bob@x"]["PriorityFactor"] == 1000.0
    acc.config = NegotiatorConfig(default_prio_factor=10.0)
    assert acc.priority_factor("bob@x") == 1000.0   # the written factor stays


def test_factors_below_one_clamp_to_one_and_stored_below_one_is_redefaulted():
    acc = make({"a@x": {"PriorityFactor": 0.5}})
    assert acc.priority_factor("a@x") == 1000.0     # < 1 counts as missing (A9)
    acc.set_priority_factor("b@x", 0.3)
    assert acc.priority_factor("b@x") == 1.0         # clamped (A10)


def test_eup_is_rup_times_factor_and_rup_below_half_is_raised():
    acc = make({"a@x": {"Priority": 2.0, "PriorityFactor": 100.0}, "b@x": {"Priority": 0.1}})
    assert acc.priority("a@x") == 200.0
    assert acc.priority("b@x") == 500.0
    assert acc.customers["b@x"]["Priority"] == 0.5


# ---- usage: AddMatch, RemoveMatch, CheckMatches (rules A15-A19) ------------------------

def test_match_made_mid_interval_is_charged_from_the_match_time():
    acc = make()
    acc.add_match("u@d", slot("s1", "u@d", weight=4.0), T0 + 3600)
    rec = acc.customers["u@d"]
    assert (rec["ResourcesUsed"], rec["WeightedResourcesUsed"]) == (1, 4.0)
    assert rec["UnchargedTime"] == -3600 and rec["WeightedUnchargedTime"] == -14400.0
    acc.update_priorities(T0 + 7200)
    a = 0.5 ** (7200 / DAY)
    # recent weighted usage = 4 + (-14400 / 7200) = 2: charged for half the interval
    assert acc.rup("u@d") == round6(0.5 * a + 2.0 * (1 - a))
    assert acc.customers["u@d"]["WeightedAccumulatedUsage"] == 4.0 * 3600
    assert acc.customers["u@d"]["AccumulatedUsage"] == 3600.0
    assert acc.customers["u@d"]["UnchargedTime"] == 0


def test_removed_match_is_charged_for_the_time_it_existed():
    acc = make()
    acc.add_match("u@d", slot("s1", "u@d", weight=2.0), T0)
    acc.update_priorities(T0 + 100)
    acc.remove_match("s1@<10.0.0.1:9618>", T0 + 160)
    rec = acc.customers["u@d"]
    assert (rec["ResourcesUsed"], rec["WeightedResourcesUsed"]) == (0, 0.0)
    assert rec["WeightedUnchargedTime"] == 120.0   # (160 - 100) x 2
    acc.update_priorities(T0 + 200)
    assert acc.customers["u@d"]["WeightedAccumulatedUsage"] == 200.0 + 120.0
    assert acc.resources == {}


def test_match_already_existing_is_not_charged_twice_and_a_new_user_replaces_the_old():
    acc = make()
    s = slot("s1", "a@d")
    acc.add_match("a@d", s, T0)
    acc.add_match("a@d", s, T0 + 10)
    assert acc.customers["a@d"]["WeightedResourcesUsed"] == 1.0
    acc.add_match("b@d", slot("s1", "b@d"), T0 + 20)
    assert acc.customers["a@d"]["WeightedResourcesUsed"] == 0.0
    assert acc.customers["b@d"]["WeightedResourcesUsed"] == 1.0


def test_group_records_and_hierarchical_usage():
    cfg = NegotiatorConfig(groups=(GroupConfig("group_physics", 20.0, None, False, False),
                                   GroupConfig("group_physics.hep", 15.0, None, True, False)))
    acc = make(config=cfg)
    acc.add_match("group_physics.hep.higgs@d", slot("s1", group="group_physics.hep.higgs@d", weight=2.0), T0)
    acc.add_match("bob@d", slot("s2", "bob@d", weight=3.0), T0)
    c = acc.customers
    assert c["group_physics.hep"]["WeightedResourcesUsed"] == 2.0
    assert c["group_physics.hep"]["HierWeightedResourcesUsed"] == 2.0
    assert c["group_physics"]["HierWeightedResourcesUsed"] == 2.0
    assert c["group_physics"].get("WeightedResourcesUsed", 0.0) == 0.0  # direct members only
    assert c["<none>"]["WeightedResourcesUsed"] == 3.0
    assert c["<none>"]["HierWeightedResourcesUsed"] == 3.0   # root users only (quirk)
    acc.update_priorities(T0 + DAY)
    assert acc.rup("group_physics") == 1.25   # group RUP from the subtree usage
    assert acc.rup("group_physics.hep") == 1.25


def test_check_matches_removes_broken_claims_keeps_matched_and_adds_new():
    acc = make()
    acc.add_match("a@d", slot("s1", "a@d"), T0)
    acc.add_match("a@d", slot("s2", "a@d"), T0)
    acc.add_match("a@d", slot("s3", "a@d"), T0)
    acc.update_priorities(T0 + 60)
    acc.check_matches([
        slot("s1", state="Unclaimed"),                   # claim ended: removed
        slot("s2", state="Matched"),                     # matched, not yet claimed: kept
        slot("s4", "b@d", weight=8.0),                   # new claim: charged
        # s3 vanished from the pool: removed
    ], T0 + 60)
    assert acc.customers["a@d"]["WeightedResourcesUsed"] == 1.0
    assert acc.customers["b@d"]["WeightedResourcesUsed"] == 8.0
    assert sorted(acc.resources) == ["s2@<10.0.0.1:9618>", "s4@<10.0.0.1:9618>"]


def test_accounting_group_attribute_wins_and_suspended_can_be_discounted():
    s = slot("s1", user="x@d", group="grp.x@d", activity="Suspended")
    assert s.charged_customer(False) == "grp.x@d"
    assert s.charged_customer(True) is None


@pytest.mark.parametrize("discount", [False, True])
def test_imported_usage_is_not_put_on_a_discounted_suspended_slot(discount):
    """Rule A16 when rebuilding resource records from accounting ads: with
    NEGOTIATOR_DISCOUNT_SUSPENDED_RESOURCES a suspended claimed slot charges nobody, so
    it cannot be the slot that explains the reported usage; the running one is."""
    from negotiator_ext.adapters.accounting_ads import state_from_accounting_ads
    from negotiator_ext.adapters.adfiles import parse_ads_text
    ads = parse_ads_text('Name = "a@d"\nPriority = 1000.0\nPriorityFactor = 1000.0\n'
                         'WeightedResourcesUsed = 2.0\nResourcesUsed = 1\n'
                         f'LastUpdate = {T0}\n', "accounting.ads")
    slots = [slot("s1", user="a@d", weight=1.0, activity="Suspended"),
             slot("s2", user="a@d", weight=2.0)]
    config = NegotiatorConfig(discount_suspended_resources=discount)
    state, warnings = state_from_accounting_ads(ads, slots, GroupTree(config), "accounting.ads")
    assert warnings == []
    s1, s2 = "s1@<10.0.0.1:9618>", "s2@<10.0.0.1:9618>"
    if discount:
        assert state.resources == {s2: {"RemoteUser": "a@d", "SlotWeight": 2.0, "StartTime": T0}}
    else:   # the suspended slot is charged; the 1.0 left is a pending match
        assert state.resources == {
            s1: {"RemoteUser": "a@d", "SlotWeight": 1.0, "StartTime": T0},
            "a@d#pending-match": {"RemoteUser": "a@d", "SlotWeight": 1.0, "StartTime": T0}}
    assert state.customers["a@d"]["ResourcesUsed"] == len(state.resources)
    # the next CheckMatches (with the same knob) agrees with the import
    acc = Accountant(state, config, GroupTree(config))
    acc.check_matches(slots, T0 + 60)
    rec = acc.customers["a@d"]
    if discount:   # nothing removed, nothing re-added
        assert acc.resources == state.resources
        assert (rec["ResourcesUsed"], rec["WeightedResourcesUsed"]) == (1, 2.0)
    else:   # the pending match is dropped; s2 is charged from now
        assert acc.resources == {s1: {"RemoteUser": "a@d", "SlotWeight": 1.0, "StartTime": T0},
                                 s2: {"RemoteUser": "a@d", "SlotWeight": 2.0, "StartTime": T0 + 60}}
        assert (rec["ResourcesUsed"], rec["WeightedResourcesUsed"]) == (2, 3.0)
        assert (rec["UnchargedTime"], rec["WeightedUnchargedTime"]) == (0, -60.0)


def test_consumption_policy_matches_are_pseudo_resources():
    acc = make()
    p = slot("pslot", state="Unclaimed", weight=8.0)
    acc.add_match("a@d", p, T0, match_cost=2.0)
    acc.add_match("a@d", p, T0, match_cost=3.0)
    assert acc.customers["a@d"]["WeightedResourcesUsed"] == 5.0
    base = "pslot@<10.0.0.1:9618>"
    assert acc.resources[base]["NumCpMatches"] == 2
    assert set(acc.resources) == {base, base + "_cp_match_000", base + "_cp_match_001"}


# ---- admin edits, leases, limits, reporting --------------------------------------------

def test_set_accumusage_sets_only_the_weighted_figure_and_reset_usage():
    acc = make({"a@x": {"AccumulatedUsage": 5.0, "WeightedAccumulatedUsage": 5.0}})
    acc.set_accumulated_usage("a@x", 99.0)
    assert acc.customers["a@x"]["AccumulatedUsage"] == 5.0
    assert acc.customers["a@x"]["WeightedAccumulatedUsage"] == 99.0
    acc.reset_usage("a@x", T0 + 5)
    assert acc.customers["a@x"]["AccumulatedUsage"] == 0.0
    assert acc.customers["a@x"]["BeginUsageTime"] == T0 + 5


def test_ceiling_and_floor_defaults_and_lease_expiry():
    acc = make({"a@x": {"Ceiling": 10, "CeilingPreLeaseValue": -1, "CeilingLeaseExpiration": T0 + 50,
                        "Floor": -4}})
    assert acc.ceiling("b@x") == -1 and acc.floor("b@x") == 0
    assert acc.floor("a@x") == 0
    acc.check_leases(T0 + 49)
    assert acc.ceiling("a@x") == 10
    acc.check_leases(T0 + 50)
    assert acc.ceiling("a@x") == -1
    assert acc.customers["a@x"]["CeilingLeaseExpiration"] == 0


def test_concurrency_limit_syntax_and_counts():
    assert parse_concurrency_limits("Foo, bar:2 x.y:0.5 bad.a.b 9bad z:-3") == [
        ("foo", 1.0), ("bar", 2.0), ("x.y", 0.5), ("z", 1.0)]
    acc = make()
    acc.load_limits([slot("s1", "a@d", limits="foo,bar:2"), slot("s2", "a@d", limits="FOO")])
    assert acc.limits == {"foo": 2.0, "bar": 2.0}
    acc.load_limits([])
    assert acc.limits == {"foo": 0.0, "bar": 0.0}   # known limits stay reported, at 0


def test_report_is_the_modular_query_shape():
    cfg = NegotiatorConfig(groups=(GroupConfig("group_a", 10.0, None, True, False),))
    acc = make({"group_a.bob@x": {"Priority": 2.0, "PriorityFactor": 10.0, "WeightedResourcesUsed": 1.0,
                                  "UnchargedTime": -5},
                "group_a": {"WeightedResourcesUsed": 1.0}}, config=cfg)
    ads = {a["Name"]: a for a in acc.report()}
    bob = ads["group_a.bob@x"]
    assert bob["Priority"] == 20.0 and bob["IsAccountingGroup"] is False
    assert bob["AccountingGroup"] == "group_a" and bob["Ceiling"] == -1 and bob["Floor"] == 0
    assert "UnchargedTime" not in bob and bob["LastUpdate"] == T0
    grp = ads["group_a"]
    assert grp["IsAccountingGroup"] is True and grp["AccountingGroup"] == "group_a"
    assert grp["SurplusPolicy"] == "byquota" and grp["ConfigQuota"] == 10.0
    rolled = {a["Name"]: a for a in acc.report(rollup=True)}
    assert rolled["group_a"]["Priority"] == 0.0


def test_initialize_creates_a_record_for_every_configured_group():
    cfg = NegotiatorConfig(groups=(GroupConfig("g1", 1.0, None, False, False),),
                           group_prio_factors={"G1": 7.0})
    acc = make(config=cfg)
    acc.initialize_groups()
    assert acc.customers["g1"]["PriorityFactor"] == 7.0
    assert acc.customers["<none>"]["PriorityFactor"] == 1000.0
    no_groups = make()
    no_groups.initialize_groups()
    assert no_groups.customers == {}   # without GROUP_NAMES there is no group record


def test_a_customer_that_is_its_own_group_record_is_charged_once():
    cfg = NegotiatorConfig(groups=(GroupConfig("grp", 5.0, None, False, False),))
    acc = make(config=cfg)
    acc.add_match("grp", slot("s1", group="grp", weight=2.0), T0)
    assert acc.customers["grp"]["WeightedResourcesUsed"] == 2.0
    assert acc.customers["grp"]["ResourcesUsed"] == 1


def test_rollup_sums_children_into_parents():
    cfg = NegotiatorConfig(groups=(GroupConfig("p", 10.0, None, False, False),
                                   GroupConfig("p.a", 5.0, None, False, False),
                                   GroupConfig("p.b", 5.0, None, False, False)))
    acc = make({"p": {"WeightedResourcesUsed": 1.0, "ResourcesUsed": 1, "WeightedAccumulatedUsage": 10.0,
                      "BeginUsageTime": 300, "LastUsageTime": 400},
                "p.a": {"WeightedResourcesUsed": 2.0, "ResourcesUsed": 2, "WeightedAccumulatedUsage": 20.0,
                        "BeginUsageTime": 100, "LastUsageTime": 900},
                "p.b": {"WeightedResourcesUsed": 4.0, "ResourcesUsed": 1, "WeightedAccumulatedUsage": 40.0,
                        "BeginUsageTime": 200, "LastUsageTime": 500},
                "<none>": {"WeightedResourcesUsed": 0.5}}, config=cfg)
    rolled = {a["Name"]: a for a in acc.report(rollup=True)}
    p = rolled["p"]
    assert (p["WeightedResourcesUsed"], p["ResourcesUsed"], p["WeightedAccumulatedUsage"]) == (7.0, 4, 70.0)
    assert (p["BeginUsageTime"], p["LastUsageTime"]) == (100, 900)
    assert rolled["<none>"]["WeightedResourcesUsed"] == 7.5   # cascades to the root
    assert rolled["p.a"]["WeightedResourcesUsed"] == 2.0       # leaves keep their own
    plain = {a["Name"]: a for a in acc.report()}
    assert plain["p"]["WeightedResourcesUsed"] == 1.0 and plain["p"]["Priority"] == 500.0


def test_admin_edits():
    acc = make({"a@x": {"Priority": 3.0, "WeightedAccumulatedUsage": 9.0},
                "b@x": {"WeightedAccumulatedUsage": 5.0}})
    acc.add_match("a@x", slot("s1", "a@x"), T0)
    acc.set_ceiling("a@x", 4)
    acc.set_floor("a@x", 2)
    acc.set_begin_time("a@x", 11)
    acc.set_last_time("a@x", 22)
    assert (acc.ceiling("a@x"), acc.floor("a@x")) == (4, 2)
    assert (acc.customers["a@x"]["BeginUsageTime"], acc.customers["a@x"]["LastUsageTime"]) == (11, 22)
    acc.reset_all_usage(T0 + 7)
    assert all(acc.customers[n]["WeightedAccumulatedUsage"] == 0.0 for n in ("a@x", "b@x"))
    assert acc.customers["b@x"]["BeginUsageTime"] == T0 + 7
    acc.delete_record("a@x")
    assert "a@x" not in acc.customers
    assert acc.resources["s1@<10.0.0.1:9618>"]["RemoteUser"] == "a@x"   # resource records stay


def test_start_cycle_expires_leases_then_updates_then_checks_matches():
    acc = make({"a@x": {"Priority": 10.0, "Ceiling": 3, "CeilingPreLeaseValue": 8,
                        "CeilingLeaseExpiration": T0 + 100}})
    acc.add_match("a@x", slot("s1", "a@x", weight=2.0), T0)
    acc.start_cycle([slot("s1", state="Unclaimed")], T0 + DAY)
    assert acc.ceiling("a@x") == 8
    # the claim ended at the cycle: it is charged for the whole step it existed (with
    # classic accounting the uncharged-time correction makes this independent of the
    # order of UpdatePriorities and CheckMatches)
    assert acc.rup("a@x") == 10.0 * 0.5 + 2.0 * 0.5
    assert acc.customers["a@x"]["WeightedResourcesUsed"] == 0.0 and acc.resources == {}


def test_floor_and_priority_factor_leases_expire_too():
    """A25: every lease kind is restored at 0 < expiration <= now; expiration 0 is no lease."""
    acc = make({"a@x": {"Floor": 8, "FloorPreLeaseValue": 2, "FloorLeaseExpiration": T0 + 10,
                        "PriorityFactor": 5000.0, "PriorityFactorPreLeaseValue": 1000.0,
                        "PriorityFactorLeaseExpiration": T0 + 20},
                "b@x": {"Floor": 3, "FloorPreLeaseValue": 1, "FloorLeaseExpiration": 0}})
    acc.check_leases(T0 + 10)
    assert (acc.floor("a@x"), acc.priority_factor("a@x")) == (2, 5000.0)
    acc.check_leases(T0 + 20)
    assert acc.priority_factor("a@x") == 1000.0
    assert acc.customers["a@x"]["PriorityFactorLeaseExpiration"] == 0
    assert acc.floor("b@x") == 3


def test_removing_a_grouped_users_match_credits_its_group_floored_at_zero():
    """A18 for a user in a group: the group record gets the same changes, its counts
    floored at 0, and the time charged runs from max(StartTime, LastUpdateTime)."""
    cfg = NegotiatorConfig(groups=(GroupConfig("g", 10.0, None, False, False),))
    acc = make({"g": {"ResourcesUsed": 0, "WeightedResourcesUsed": 1.0}}, config=cfg,
               resources={"s1@<10.0.0.1:9618>": {"RemoteUser": "g.u@d", "SlotWeight": 3.0,
                                                 "StartTime": T0 - 500}})
    acc.remove_match("s1@<10.0.0.1:9618>", T0 + 40)
    g, u = acc.customers["g"], acc.customers["g.u@d"]
    assert (g["ResourcesUsed"], g["WeightedResourcesUsed"]) == (0, 0.0)   # floored
    assert (u["ResourcesUsed"], u["WeightedResourcesUsed"]) == (0, 0.0)
    # S = max(T0 - 500, T0) = T0: charged for 40 s at weight 3 on both records
    assert g["WeightedUnchargedTime"] == 120.0 and u["WeightedUnchargedTime"] == 120.0
    assert g["UnchargedTime"] == 40 and u["UnchargedTime"] == 40


def test_remote_domain_is_the_text_after_the_last_at():
    """A9: GetDomain takes the text after the *last* '@'."""
    cfg = NegotiatorConfig(accountant_local_domain="home.org", remote_prio_factor=7000.0)
    acc = make(config=cfg)
    assert acc.default_priority_factor("u@other@home.org") == cfg.default_prio_factor
    assert acc.default_priority_factor("u@home.org@other") == 7000.0


@pytest.mark.parametrize("text, weight", [("-2", 1.0), ("0", 0.0), ("2.5", 2.5),
                                          ('"heavy"', 1.0)])
def test_slot_weight_below_zero_or_not_a_number_is_one(text, weight):
    """A15: a SlotWeight < 0 or that is no number weighs 1.0; 0 is a legal weight."""
    from negotiator_ext.core import classads
    from negotiator_ext.core.slots import slot_weight
    ad = classads.parse_old_ad(f"Cpus = 4\nSlotWeight = {text}\n")
    assert slot_weight(ad, NegotiatorConfig()) == weight


# ---- CheckMatches on the changed slots alone (SlotChanges) -----------------------------

_USERS = ("a@d", "b@d", "c@d")
_slot_kinds = st.tuples(
    st.sampled_from((None, "Claimed", "Matched", "Preempting", "Unclaimed")),
    st.sampled_from((None,) + _USERS), st.sampled_from((1.0, 2.0, 0.5)),
    st.sampled_from(("Busy", "Suspended", None)), st.sampled_from((None, "lic", "lic:2")))


def _usage(i, kind):
    state, user, weight, activity, limits = kind
    return SlotUsage(name=f"s{i}", resource_name=f"s{i}@<10.0.0.1:9618>", state=state,
                     activity=activity, accounting_group=None, remote_user=user,
                     weight=weight, concurrency_limits=limits)


def _edit(now: dict, edits) -> set[str]:
    """Slots changed ((place, kind)), left (kind None) or joined in `now`, a SlotUsage
    anew each time; the resource names edited."""
    changed = set()
    for i, kind in edits:
        if kind is None:
            now.pop(i, None)
        else:
            now[i] = _usage(i, kind)
        changed.add(f"s{i}@<10.0.0.1:9618>")
    return changed


@settings(max_examples=150, deadline=None)
@given(first=st.lists(_slot_kinds, min_size=0, max_size=12),
       edits=st.lists(st.tuples(st.integers(0, 14), st.one_of(st.none(), _slot_kinds)),
                      max_size=8),
       matches=st.lists(st.tuples(st.integers(0, 14), st.sampled_from(_USERS),
                                  st.sampled_from((None, 1.0))), max_size=4),
       discount=st.booleans(), reused=st.booleans(), told=st.booleans(),
       limits_told=st.booleans())
def test_checking_only_the_changed_slots_gives_what_checking_every_slot_gives(
        first, edits, matches, discount, reused, told, limits_told):
    from negotiator_ext.core.accountant import SlotChanges
    config = NegotiatorConfig(discount_suspended_resources=discount)
    # cycle 1: a full CheckMatches, then the cycle's own matches (AddMatch)
    acc = Accountant(AccountantState(last_update_time=T0), config, GroupTree(config))
    slots = {i: _usage(i, k) for i, k in enumerate(first)}
    acc.start_cycle(list(slots.values()), T0)
    for i, user, cost in matches:       # (a cost: a consumption-policy match)
        acc.add_match(user, slots.get(i) or _usage(i, ("Claimed", user, 1.0, "Busy", None)),
                      T0 + 5, match_cost=cost)
    state = acc.to_state(copy_resources=not reused)
    # between the cycles, some slots change, leave or join (a SlotUsage anew each time)
    now = dict(slots)
    changed = _edit(now, edits)
    for i, _, _ in matches:
        # the records the cycle wrote: their slots changed too, or (not `told`) stayed as
        # they were (the startd did not take the match up); the accountant knows which
        # records it wrote
        if told:
            if i in now:
                now[i] = _usage(i, first[i] if i < len(first) else (None, None, 1.0, None, None))
            changed.add(f"s{i}@<10.0.0.1:9618>")
    order = sorted(now)
    every = [now[i] for i in order]
    # (and, maybe, which slots LoadLimits reads: those holding limits or Matched)
    changes = SlotChanges(frozenset(changed),
                          tuple(now[i] for i in order if now[i].resource_name in changed),
                          tuple(s for s in every if s.concurrency_limits
                                or s.state == "Matched") if limits_told else None)
    # (records handed over, `reused`: the first accountant takes them as they are, and
    # gives them back for the second, as the simulator's cycle run again does)
    handed = [(k, v, dict(v)) for k, v in state.resources.items()]
    places = dict(state.places[0]) if state.places is not None else None
    full = Accountant(state, config, GroupTree(config))
    full.start_cycle(every, T0 + 60)
    # (a lease needs the records' places: known once an accountant numbered them)
    assert (state.lease is not None) == (reused and state.places is not None)
    if state.lease is not None:
        assert state.lease.taken and full.resources is state.resources
        state.lease.give_back(state)
    assert [(k, v, dict(v)) for k, v in state.resources.items()] == handed
    assert all(a is b for (_, a), (_, b, _) in zip(state.resources.items(), handed))
    if places is not None:
        assert state.places[0] == places
    part = Accountant(state, config, GroupTree(config))
    part.start_cycle(every, T0 + 60, changes)
    assert part.customers == full.customers
    assert part.resources == full.resources and list(part.resources) == list(full.resources)
    assert part.limits == full.limits
    # and the state the cycle started from is as it was, but for a lease taken
    assert Accountant(state, config, GroupTree(config)).resources == dict(state.resources)


def test_records_written_after_a_check_that_the_changes_miss_are_checked_too():
    from negotiator_ext.core.accountant import SlotChanges
    acc = make()
    s = slot("s1")                              # unclaimed
    acc.check_matches([s], T0)
    acc.add_match("a@d", slot("s1", "a@d"), T0)   # a match the slot never showed
    state = acc.to_state()
    assert state.touched == {"s1@<10.0.0.1:9618>"}
    nxt = Accountant(state, NegotiatorConfig(), GroupTree(NegotiatorConfig()))
    nxt.check_matches([s], T0 + 60, SlotChanges(frozenset(), ()))   # says nothing changed
    assert "s1@<10.0.0.1:9618>" not in nxt.resources      # checked all the same: removed
    assert nxt.customers["a@d"]["ResourcesUsed"] == 0


def test_a_record_written_again_after_a_check_counts_as_written():
    # the record CheckMatches itself made is this accountant's own; a later write to it
    # (a consumption-policy match counting NumCpMatches) is still a change since the check
    from negotiator_ext.core.accountant import SlotChanges
    acc = make()
    s = slot("p1", "a@d")
    acc.check_matches([s], T0)
    acc.add_match("a@d", s, T0 + 1, match_cost=1.0)
    state = acc.to_state()
    assert "p1@<10.0.0.1:9618>" in state.touched
    full = Accountant(state, NegotiatorConfig(), GroupTree(NegotiatorConfig()))
    full.check_matches([s], T0 + 60)
    part = Accountant(state, NegotiatorConfig(), GroupTree(NegotiatorConfig()))
    part.check_matches([s], T0 + 60, SlotChanges(frozenset(), ()))
    assert part.resources == full.resources and part.customers == full.customers


@settings(max_examples=100, deadline=None)
@given(first=st.lists(_slot_kinds, min_size=0, max_size=12),
       cycles=st.lists(st.tuples(
           st.lists(st.tuples(st.integers(0, 14), st.one_of(st.none(), _slot_kinds)),
                    max_size=6),
           st.lists(st.tuples(st.integers(0, 14), st.sampled_from(_USERS)), max_size=3)),
           min_size=1, max_size=5),
       discount=st.booleans())
def test_the_records_looked_at_are_taken_in_the_records_order_from_cycle_to_cycle(
        first, cycles, discount):
    """CheckMatches on the changed slots puts the records it looks at in the records'
    order by their places (`AccountantState.places`), handed from cycle to cycle as the
    simulator hands the records over, while records are dropped and written anew: every
    cycle gives what walking every record gives (the walk forced off by
    _WALK_SHARE = 0). Records handed over (`RecordLease`) and written into by a first
    accountant are given back as they were handed, in their order, for another."""
    from unittest import mock

    from negotiator_ext.core import accountant as acc_mod
    from negotiator_ext.core.accountant import SlotChanges
    config = NegotiatorConfig(discount_suspended_resources=discount)
    now = {i: _usage(i, k) for i, k in enumerate(first)}
    full_state = part_state = AccountantState(last_update_time=T0)
    t = T0
    with mock.patch.object(acc_mod, "_WALK_SHARE", 0):
        for n, (edits, matches) in enumerate(cycles):
            changed = _edit(now, edits)
            every = [now[i] for i in sorted(now)]
            changes = SlotChanges(frozenset(changed),
                                  tuple(s for s in every if s.resource_name in changed))
            full = Accountant(full_state, config, GroupTree(config))
            full.start_cycle(every, t)
            if part_state.lease is not None:
                # a cycle run again (the simulator's): the first accountant takes the
                # records handed over, writes and drops some, and gives them back
                handed = list(part_state.resources.items())
                places = dict(part_state.places[0])
                trial = Accountant(part_state, config, GroupTree(config))
                assert trial.resources is part_state.resources
                trial.start_cycle(every, t, changes)
                for i, user in matches:
                    trial.add_match(user, _usage(i, ("Claimed", user, 1.0, "Busy", None)),
                                    t + 1)
                part_state.lease.give_back(part_state)
                assert list(part_state.resources.items()) == handed
                assert all(a[1] is b[1] for a, b in zip(part_state.resources.items(), handed))
                assert part_state.places[0] == places
            part = Accountant(part_state, config, GroupTree(config))
            part.start_cycle(every, t, changes if n else None)
            assert list(part.resources.items()) == list(full.resources.items())
            assert part.customers == full.customers
            for i, user in matches:       # the cycle's matches, taken up by the slots
                for acc in (full, part):
                    acc.add_match(user, _usage(i, ("Claimed", user, 1.0, "Busy", None)), t + 5)
                now[i] = _usage(i, ("Claimed", user, 1.0, "Busy", None))
            # (the order itself, which whole weights leave unseen in the records)
            names = changed | set(list(part.resources)[::2]) | {"s99@<10.0.0.1:9618>"}
            assert part._in_order(names) == [r for r in part.resources if r in names]
            full_state = full.to_state()
            part_state = part.to_state(copy_resources=False)
            t += 60


@given(x=st.one_of(st.floats(allow_nan=False, allow_infinity=False),
                   st.integers(-10 ** 18, 10 ** 18).map(float), st.integers(-10 ** 6, 10 ** 6)))
def test_round6_is_what_printf_f_reads_back_as(x):
    """Rule A5: a persisted real is printf("%f") read back; a whole number (the fast
    path) is its own, -0.0 included; an int comes back a float."""
    got = round6(x)
    assert type(got) is float and repr(got) == repr(float("%f" % x))
    assert repr(round6(-0.0)) == "-0.0" and round6(2.5e-7) == 0.0
    assert round6(1.0000005) == 1.000001 and round6(3.0) == 3.0


def test_imported_matches_are_charged_from_their_match_time():
    """bench_real_pool.py --shape 100k, the second real cycle: the first cycle matched
    each submitter's 170 jobs at a different moment of its 168 s (AddMatch books the time
    since the accountant's last update as uncharged: WeightedUnchargedTime -9010 for one
    matched 53 s after it, -2380 for one matched 14 s after). The next UpdatePriorities
    charges each from its match time, and their priorities, shares and limits differ (the
    real cycle gave them 172 and 166). Imported as 0, both had the same priority, and
    ours gave both 170."""
    from negotiator_ext.adapters.accounting_ads import state_from_accounting_ads
    from negotiator_ext.adapters.adfiles import parse_ads_text
    text = "".join(
        f'Name = "{n}"\nPriority = 500.0\nPriorityFactor = 1000.0\nResourcesUsed = 170\n'
        f'WeightedResourcesUsed = 170.0\nUnchargedTime = {u}\nWeightedUnchargedTime = {u}.0\n'
        f'LastUpdate = {T0}\n\n' for n, u in (("late@d", -9010), ("early@d", -2380)))
    config = NegotiatorConfig()
    state, warnings = state_from_accounting_ads(parse_ads_text(text, "accounting.ads"), [],
                                                GroupTree(config), "accounting.ads")
    assert warnings == []
    assert state.customers["late@d"]["WeightedUnchargedTime"] == -9010.0
    acc = Accountant(state, config, GroupTree(config))
    now = T0 + 665
    acc.update_priorities(now)
    aging = 0.5 ** (665 / config.priority_halflife)
    for name, uncharged in (("late@d", -9010), ("early@d", -2380)):
        expected = 0.5 * aging + (170.0 + uncharged / 665) * (1 - aging)
        assert acc.rup(name) == pytest.approx(expected, abs=1e-6)
    assert acc.rup("late@d") < acc.rup("early@d")


def test_a_charge_stores_each_real_as_the_log_reads_it_back():
    """Rule A5 on AddMatch (A17): a fractional weight's usage, uncharged time and slot
    weight are stored rounded to 6 decimals; a whole one as it is, added to them."""
    acc = make()
    acc.add_match("u@d", slot("s1", "u@d", weight=1 / 3), T0 + 7)
    rec, res = acc.customers["u@d"], acc.resources["s1@<10.0.0.1:9618>"]
    assert rec["WeightedResourcesUsed"] == 0.333333 and rec["ResourcesUsed"] == 1
    assert rec["UnchargedTime"] == -7 and rec["WeightedUnchargedTime"] == -2.333333
    assert res["SlotWeight"] == 0.333333 and res["StartTime"] == T0 + 7
    acc.add_match("u@d", slot("s2", "u@d", weight=2.0), T0 + 7)
    assert rec["WeightedResourcesUsed"] == 2.333333 and rec["ResourcesUsed"] == 2
    assert rec["WeightedUnchargedTime"] == -16.333333
    assert acc.resources["s2@<10.0.0.1:9618>"]["SlotWeight"] == 2.0
    assert all(type(rec[k]) is float for k in ("WeightedResourcesUsed",
                                               "WeightedUnchargedTime"))
