"""core.recommend (the rules, fair shares, policy knobs) and views.recommend (table, JSON,
script) on small hand-built windows whose numbers are worked out by hand in the comments.
"""

from __future__ import annotations

import json
import shlex

import pytest

from negotiator_ext.core.recommend import (Recommendation, RecommendPolicy, fair_shares,
                                           recommend)
from negotiator_ext.core.records import GroupObs, SubmitterObs
from negotiator_ext.errors import InputError
from negotiator_ext.views.recommend import (command_argv, render_json, render_script,
                                            render_table)

NOW = 1795265266            # 2026-11-21 12:47:46 UTC
DAY = 86400
POLICY = RecommendPolicy()


def sub(name, usage=0.0, idle=0, *, group="<none>", pf=1.0, factor=None, running=None, **kw):
    """A submitter record; factor defaults to the policy factor (no lease)."""
    return SubmitterObs(name=name, group=group, is_group=False,
                        factor=pf if factor is None else factor, policy_factor=pf,
                        real_usage=float(usage), idle_jobs=idle,
                        running_jobs=(1 if usage else 0) if running is None else running,
                        last_usage_time=kw.pop("last_usage_time", NOW - 60), **kw)


def header(i, status="complete"):
    return {"uuid": f"pass-{i}", "started_at": NOW - 3600 + 300 * i,
            "snapshot_time": NOW - 3600 + 300 * i, "status": status,
            "real_accountant_time": NOW - 3600 + 300 * i}


def window(*pass_subs, statuses=None):
    """One complete pass per list of submitters, oldest first."""
    return [(header(i, statuses[i] if statuses else "complete"), list(subs),
             [GroupObs("<none>")]) for i, subs in enumerate(pass_subs)]


def same(n, *subs):
    return window(*[subs] * n)


def brief(recs):
    return [(r.kind, r.name, r.value, r.current, r.lease) for r in recs]


# ---- fair shares -------------------------------------------------------------------------

def test_fair_share_water_filling_by_hand():
    # Group <none>, pie = 4 + 6 + 6 + 0 = 16; weights a 1, b 1/2 (factor 2), c 1, d 1.
    # Level 16 / 3.5 = 4.57: d (no idle jobs, uses 0) is capped at 0 -> fixed.
    # Level 16 / 2.5 = 6.4: a (no idle jobs) is capped at its usage 4 <= 6.4 -> fixed.
    # Level 12 / 1.5 = 8: b gets 8 x 1/2 = 4, c gets 8.
    # Group g (separate pie 3 + 1 = 4, both with idle jobs, equal weights): 2 and 2.
    # The group record is no submitter and gets nothing.
    subs = [sub("a", 4), sub("b", 6, 3, pf=2), sub("c", 6, 3), sub("d", 0),
            sub("e", 3, 1, group="g"), sub("f", 1, 1, group="g"),
            SubmitterObs("g", "g", True, real_usage=100.0)]
    assert fair_shares(subs) == pytest.approx(
        {"a": 4, "b": 4, "c": 8, "d": 0, "e": 2, "f": 2}, abs=1e-12)
    assert set(fair_shares(subs)) == {"a", "b", "c", "d", "e", "f"}


def test_fair_share_caps_fixed_in_later_rounds():
    # pie = 1 + 4 + 8 + 0 = 13, all factor 1. Level 13/4 = 3.25: a (cap 1) fixed.
    # Level 12/3 = 4: g (cap 4) now reaches its cap -> fixed (it did not at 3.25).
    # Level 8/2 = 4: c and h (idle jobs) get 4 each although c used 8 and h nothing.
    subs = [sub("a", 1), sub("g", 4), sub("c", 8, 2), sub("h", 0, 1)]
    assert fair_shares(subs) == pytest.approx({"a": 1, "g": 4, "c": 4, "h": 4}, abs=1e-12)


def test_fair_share_factor_falls_back_and_empty_pie():
    # policy_factor None -> factor (3) ; both None -> 1.0. pie 8: level 8/(1/3 + 1) = 6:
    # x gets 2, y gets 6.
    x = SubmitterObs("x", "<none>", False, factor=3.0, real_usage=4.0, idle_jobs=1)
    y = SubmitterObs("y", "<none>", False, real_usage=4.0, idle_jobs=1)
    assert fair_shares([x, y]) == pytest.approx({"x": 2, "y": 6})
    assert fair_shares([sub("p", 0, 5), sub("q", 0, 5)]) == {"p": 0.0, "q": 0.0}
    # nobody wants more: everyone's fair share is what it uses
    assert fair_shares([sub("p", 3), sub("q", 9, pf=5)]) == {"p": 3.0, "q": 9.0}


# ---- rule a: factor ----------------------------------------------------------------------

def test_factor_raise_and_lower_exact():
    # Both factor 2, both idle: pie 10, fair 5 each. a: 6.5/5 - 1 = +30%; b: -30%.
    # a: 2 x 1.3 = 2.6; b: 2 x 0.7 = 1.4 (within the 1.5 step, above 1).
    recs = recommend(same(6, sub("a", 6.5, 4, pf=2), sub("b", 3.5, 4, pf=2)), POLICY, NOW)
    assert recs == [
        Recommendation("factor", "a", 2.6, 2.0, 86400,
                       "used more than its fair share: mean gap +30.0% over the 6 passes in "
                       "which it ran, beyond 20% in 6 of them",
                       {"mean_gap": 0.3, "passes": 6, "eligible_passes": 6, "fair_share": 5.0,
                        "usage": 6.5, "policy_factor": 2.0, "step": 1.3}),
        Recommendation("factor", "b", 1.4, 2.0, 86400,
                       "got less than its fair share while it had idle jobs: mean gap -30.0% "
                       "over 6 passes, beyond 20% in 6 of them",
                       {"mean_gap": -0.3, "passes": 6, "eligible_passes": 6, "fair_share": 5.0,
                        "usage": 3.5, "policy_factor": 2.0, "step": 0.7}),
    ]


def test_factor_step_is_clamped():
    # fair 5 each; a +60% -> clamped to x1.5 = 3.0; b -60% -> clamped to /1.5 = 1.33.
    recs = recommend(same(6, sub("a", 8, 4, pf=2), sub("b", 2, 4, pf=2)), POLICY, NOW)
    assert brief(recs) == [("factor", "a", 3.0, 2.0, 86400), ("factor", "b", 1.33, 2.0, 86400)]
    assert recs[0].numbers["step"] == 1.5 and recs[0].numbers["mean_gap"] == 0.6
    assert recs[1].numbers["step"] == 0.6667


def test_factor_never_below_one():
    # b: 1.2 / 1.5 = 0.8 -> 1.0
    recs = recommend(same(6, sub("a", 8, 4, pf=1.2), sub("b", 2, 4, pf=1.2)), POLICY, NOW)
    assert brief(recs) == [("factor", "a", 1.8, 1.2, 86400), ("factor", "b", 1.0, 1.2, 86400)]


def test_factor_no_change_when_equal_or_while_a_lease_runs():
    # a would get 1 x 1.5 = 1.5. Its factor already is 1.5 (a lease that ended a moment
    # ago, not yet restored by a cycle): nothing. b (factor 1, starved) gets a floor of 6.
    last = [sub("a", 10, 4, factor=1.5, factor_lease_expires=NOW - 10), sub("b", 2, 4)]
    recs = recommend(window(*[[sub("a", 10, 4), sub("b", 2, 4)]] * 5, last), POLICY, NOW)
    assert brief(recs) == [("floor", "b", 6.0, None, 86400)]
    # a factor lease still running (another would be refused, A25): nothing either
    last = [sub("a", 10, 4, factor=1.2, factor_lease_expires=NOW + 10), sub("b", 2, 4)]
    recs = recommend(window(*[[sub("a", 10, 4), sub("b", 2, 4)]] * 5, last), POLICY, NOW)
    assert brief(recs) == [("floor", "b", 6.0, None, 86400)]
    # the same window with the lease over and the factor restored: the raise comes back
    last = [sub("a", 10, 4), sub("b", 2, 4)]
    recs = recommend(window(*[[sub("a", 10, 4), sub("b", 2, 4)]] * 5, last), POLICY, NOW)
    assert brief(recs) == [("factor", "a", 1.5, 1.0, 86400), ("floor", "b", 6.0, None, 86400)]


def test_factor_persistence_threshold():
    over, fair = [sub("a", 8, 4, pf=2), sub("b", 2, 4, pf=2)], [sub("a", 5, 4, pf=2),
                                                              sub("b", 5, 4, pf=2)]
    # 6 of 8 passes beyond the gap: 0.75 < 0.8 -> nothing
    assert recommend(window(*[fair] * 2, *[over] * 6), POLICY, NOW) == []
    # 7 of 8 -> 0.875 >= 0.8; mean gap = 7 x 0.6 / 8 = 0.525 -> step clamped to 1.5
    recs = recommend(window(fair, *[over] * 7), POLICY, NOW)
    assert brief(recs) == [("factor", "a", 3.0, 2.0, 86400), ("factor", "b", 1.33, 2.0, 86400)]
    assert recs[0].numbers == {"mean_gap": 0.525, "passes": 7, "eligible_passes": 8,
                               "fair_share": 5.0, "usage": 7.625, "policy_factor": 2.0,
                               "step": 1.5}
    assert "over the 8 passes in which it ran, beyond 20% in 7 of them" in recs[0].reason


def test_too_few_passes_say_nothing():
    subs = [sub("a", 8, 4, pf=2), sub("b", 2, 4, pf=2)]
    assert recommend(same(5, *subs), POLICY, NOW) == []
    assert recommend([], POLICY, NOW) == []
    assert len(recommend(same(5, *subs), RecommendPolicy(min_passes=5), NOW)) == 2


def test_partial_and_failed_passes_are_ignored():
    subs = [sub("a", 8, 4, pf=2), sub("b", 2, 4, pf=2)]
    contrary = [sub("a", 1, 4, pf=2), sub("b", 9, 4, pf=2)]
    expected = recommend(same(6, *subs), POLICY, NOW)
    mixed = window(subs, contrary, subs, subs, contrary, subs, subs, contrary, subs,
                   statuses=["complete", "partial", "complete", "complete", "failed",
                             "complete", "complete", "partial", "complete"])
    assert recommend(mixed, POLICY, NOW) == expected != []
    # only 5 complete passes among them: nothing
    assert recommend(mixed[:-1], POLICY, NOW) == []
    # the newest pass being partial does not make its records the latest
    assert recommend(mixed + [(header(9, "partial"), contrary, [])], POLICY, NOW) == expected


def test_absent_from_latest_pass_gets_nothing():
    old = [sub("a", 8, 4, pf=2), sub("b", 2, 4, pf=2)]
    recs = recommend(window(*[old] * 6, [sub("b", 2, 4, pf=2)]), POLICY, NOW)
    # a is gone; b alone in the last pass, where its fair share is all it used
    assert [r.name for r in recs] == ["b"]
    # absent in some passes only: eligible passes are those it was recorded in
    recs = recommend(window(*[old] * 6, [sub("b", 5, 4, pf=2)], *[old] * 1), POLICY, NOW)
    assert brief(recs) == [("factor", "a", 3.0, 2.0, 86400), ("factor", "b", 1.33, 2.0, 86400)]
    assert recs[0].numbers["eligible_passes"] == 7 and recs[1].numbers["eligible_passes"] == 8


def test_contrary_evidence_gives_no_factor():
    # a: above while it ran (passes 0-5, no idle jobs there... but c waits), below while
    # it had idle jobs and used nothing (passes 6-11): both persistent -> no factor.
    run_ = [sub("a", 8), sub("c", 2, 1)]        # fair a 5 (cap 8 > 5), c 5
    wait = [sub("a", 0, 3), sub("c", 10, 1)]    # fair a 5, c 5
    recs = recommend(window(*[run_] * 6, *[wait] * 6), POLICY, NOW)
    assert [r for r in recs if r.kind == "factor" and r.name == "a"] == []


def test_deterministic_whatever_the_record_order():
    subs = [sub("a", 27, 5), sub("b", 1, 5), sub("c", 2, 5)]
    assert recommend(same(6, *subs), POLICY, NOW) == recommend(same(6, *subs[::-1]), POLICY, NOW)


# ---- rules b and c: ceiling and floor ----------------------------------------------------

def test_ceiling_and_floor():
    # pie 30, fair 10 each. a uses 27 = 2.7 x fair (> 2 x) while b (-90%) and c (-80%)
    # wait with idle jobs: a gets factor x1.5 and a ceiling of 10. b and c have factor 1
    # already (cannot be lowered): floors of floor(10) = 10.
    recs = recommend(same(6, sub("a", 27, 5), sub("b", 1, 5), sub("c", 2, 5)), POLICY, NOW)
    assert brief(recs) == [("factor", "a", 1.5, 1.0, 86400), ("ceiling", "a", 10.0, None, 86400),
                           ("floor", "b", 10.0, None, 86400), ("floor", "c", 10.0, None, 86400)]
    ceiling = recs[1]
    assert ceiling.reason == ("used more than 2 x its fair share in 6 of 6 passes while b and 1 "
                              "other(s) of its group got less than theirs with idle jobs")
    assert ceiling.numbers["starved"] == ["b", "c"]
    assert recs[2].reason == ("got less than its fair share while it had idle jobs: mean gap "
                              "-90.0% over 6 passes, beyond 20% in 6 of them, and its priority "
                              "factor is already 1")


def test_ceiling_rounds_up_and_needs_someone_starved_in_the_same_group():
    # pie 31: fair 10.33 each -> ceiling 11; floors 10.
    recs = recommend(same(6, sub("a", 28, 5), sub("b", 1, 5), sub("c", 2, 5)), POLICY, NOW)
    assert [(r.kind, r.value) for r in recs if r.kind in ("ceiling", "floor")] == [
        ("ceiling", 11.0), ("floor", 10.0), ("floor", 10.0)]
    # a ceiling at or below that value already set: no ceiling
    recs = recommend(same(6, sub("a", 28, 5, ceiling=11), sub("b", 1, 5), sub("c", 2, 5)),
                     POLICY, NOW)
    assert [r.kind for r in recs] == ["factor", "floor", "floor"]
    # Starved submitters in another group do not count. Group g (ceiling_gap 0.5): a uses
    # 30 with y waiting (fair 15 each, a +100%) in 4 passes and with z waiting in 4 others:
    # neither y nor z waits in 6 passes, so nobody in g is persistently starved; b in
    # <none> is (1 against a fair 15.5), but that is another pie.
    policy = RecommendPolicy(ceiling_gap=0.5)
    with_y = [sub("a", 30, 5, group="g"), sub("y", 0, 1, group="g"), sub("z", 0, group="g"),
              sub("b", 1, 5), sub("c", 30, 5)]
    with_z = [sub("a", 30, 5, group="g"), sub("y", 0, group="g"), sub("z", 0, 1, group="g"),
              sub("b", 1, 5), sub("c", 30, 5)]
    recs = recommend(window(*[with_y, with_z] * 4), policy, NOW)
    # (c, +94% over b in <none>, does get one)
    assert [(r.name, r.numbers["starved"]) for r in recs if r.kind == "ceiling"] == [
        ("c", ["b"])]
    assert [(r.kind, r.name) for r in recs if r.kind == "floor"] == [("floor", "b")]
    # y waiting in all 8 passes: now someone of g is starved, a gets a ceiling of 15
    recs = recommend(window(*[with_y] * 8), policy, NOW)
    assert [(r.name, r.value, r.numbers["starved"]) for r in recs if r.kind == "ceiling"] == [
        ("a", 15.0, ["y"]), ("c", 16.0, ["b"])]
    # others not starved (no idle jobs): nobody is hurt, no ceiling
    recs = recommend(same(6, sub("a", 28, 5), sub("b", 1), sub("c", 2)), POLICY, NOW)
    assert recs == []


def test_floor_when_below_configured_floor():
    # Factor 3 each, pie 12, fair 6 each. x: 2/6 - 1 = -67% -> factor 3 / 1.5 = 2;
    # y: +67% -> 4.5. x also stays below its Floor 4 while it waits -> floor(6) = 6.
    subs = [sub("x", 2, 3, pf=3, floor=4), sub("y", 10, 3, pf=3)]
    recs = recommend(same(6, *subs), POLICY, NOW)
    assert brief(recs) == [("factor", "x", 2.0, 3.0, 86400), ("factor", "y", 4.5, 3.0, 86400),
                           ("floor", "x", 6.0, 4.0, 86400)]
    assert recs[2].reason == "used less than its Floor 4 while it had idle jobs in 6 of 6 passes"
    # its Floor already 6: no floor; a floor lease running: no floor either
    subs[0] = sub("x", 2, 3, pf=3, floor=6)
    assert [r.kind for r in recommend(same(6, *subs), POLICY, NOW)] == ["factor", "factor"]
    subs[0] = sub("x", 2, 3, pf=3, floor=4, floor_lease_expires=NOW + 1)
    assert [r.kind for r in recommend(same(6, *subs), POLICY, NOW)] == ["factor", "factor"]


def test_floor_is_at_least_one():
    # pie 1, fair 0.5 each: b starved (0.1/0.5 - 1 = -80%) -> floor max(1, floor(0.5)) = 1
    recs = recommend(same(6, sub("a", 0.9, 1), sub("b", 0.1, 1)), POLICY, NOW)
    assert brief(recs) == [("factor", "a", 1.5, 1.0, 86400), ("floor", "b", 1.0, None, 86400)]


# ---- rule d: delete ----------------------------------------------------------------------

def test_delete_stale_records_only():
    old, recent = NOW - 31 * DAY, NOW - 29 * DAY
    subs = [sub("old@x", 0, last_usage_time=old),
            sub("recent@x", 0, last_usage_time=recent),
            sub("never@x", 0, last_usage_time=0, begin_usage_time=NOW - 40 * DAY),
            sub("unknown@x", 0, last_usage_time=0),
            sub("idle@x", 0, 2, last_usage_time=old),
            sub("running@x", 0, running=1, last_usage_time=old),
            sub("leased@x", 0, last_usage_time=old, floor=2, floor_lease_expires=NOW + 5),
            SubmitterObs("group_a", "group_a", True, last_usage_time=old)]
    recs = recommend(window(subs), POLICY, NOW)      # one pass is enough for a delete
    assert recs == [
        Recommendation("delete", "never@x", None, None, None,
                       "no usage and no jobs; never used, created 40 days ago (more than 30); "
                       "deleting it also drops its priority factor 1",
                       {"last_usage_time": 0, "begin_usage_time": NOW - 40 * DAY,
                        "idle_days": 40.0, "factor": 1.0, "floor": 0, "ceiling": -1}),
        Recommendation("delete", "old@x", None, None, None,
                       "no usage and no jobs; last used 31 days ago (more than 30); "
                       "deleting it also drops its priority factor 1",
                       {"last_usage_time": old, "begin_usage_time": 0, "idle_days": 31.0,
                        "factor": 1.0, "floor": 0, "ceiling": -1}),
    ]
    assert recs[0].key == '["delete", "never@x", null]'
    assert recommend(window(subs), RecommendPolicy(stale_days=45), NOW) == []


# ---- rule e: setprio ---------------------------------------------------------------------

def test_setprio_on_persistent_drift():
    def s(drift, rup=100.0):
        return sub("d@x", 1, predicted_rup=rup, real_rup=rup * (1 + (drift or 0)), drift=drift)
    drifts = [0.1, 0.08, 0.12, 0.02, 0.1, 0.3, 0.07, 0.09]     # 7 of 8 beyond 5%, all +
    recs = recommend(window(*[[s(d)] for d in drifts[:-1]], [s(0.09, 123.456)]), POLICY, NOW)
    assert recs == [Recommendation(
        "setprio", "d@x", 123.46, 123.456 * 1.09, None,
        "the real accountant's priority has drifted from what the accountant rules give: "
        "mean drift +11.0%, beyond 5% in 7 of 8 passes",
        {"mean_drift": 0.11, "passes": 7, "known_passes": 8, "predicted_rup": 123.456,
         "real_rup": round(123.456 * 1.09, 4)})]
    # mixed signs: not persistent
    mixed = [0.1, -0.1, 0.1, -0.1, 0.1, 0.1, 0.1, 0.1]
    assert recommend(window(*[[s(d)] for d in mixed]), POLICY, NOW) == []
    # drift unknown in 3 passes: 5 known < min_passes
    unknown = [0.1, None, 0.1, None, 0.1, None, 0.1, 0.1]
    assert recommend(window(*[[s(d)] for d in unknown]), POLICY, NOW) == []


# ---- policy knobs ------------------------------------------------------------------------

def test_policy_from_knobs():
    assert RecommendPolicy.from_knobs({}) == RecommendPolicy()
    p = RecommendPolicy.from_knobs({"RECOMMEND_GAP": "0.3", "recommend_persistence": "1",
                                    "RECOMMEND_MIN_PASSES": "10", "MAX_FACTOR_STEP": "2",
                                    "RECOMMEND_CEILING_GAP": "0.5", "LEASE_DURATION": "3600",
                                    "STALE_DAYS": "90", "DRIFT_THRESHOLD": "0.1",
                                    "UNRELATED": "x"})
    assert p == RecommendPolicy(gap=0.3, persistence=1.0, min_passes=10, max_factor_step=2.0,
                                ceiling_gap=0.5, lease=3600, stale_days=90.0, drift=0.1)
    assert isinstance(p.min_passes, int) and isinstance(p.lease, int)


@pytest.mark.parametrize("knob, value, message", [
    ("RECOMMEND_GAP", "abc", "NEGOTIATOR_EXT_RECOMMEND_GAP = abc: not a number"),
    ("DRIFT_THRESHOLD", "-0.1", "NEGOTIATOR_EXT_DRIFT_THRESHOLD = -0.1: cannot be negative"),
    ("MAX_FACTOR_STEP", "1", "NEGOTIATOR_EXT_MAX_FACTOR_STEP = 1: must be greater than 1"),
    ("RECOMMEND_PERSISTENCE", "0", "NEGOTIATOR_EXT_RECOMMEND_PERSISTENCE = 0: must be a fraction"),
    ("RECOMMEND_PERSISTENCE", "1.5", "NEGOTIATOR_EXT_RECOMMEND_PERSISTENCE = 1.5: must be a frac"),
    ("RECOMMEND_MIN_PASSES", "2.5", "NEGOTIATOR_EXT_RECOMMEND_MIN_PASSES = 2.5: must be a whole"),
    ("LEASE_DURATION", "nan", "NEGOTIATOR_EXT_LEASE_DURATION = nan: not a finite number"),
])
def test_policy_bad_knobs(knob, value, message):
    with pytest.raises(InputError) as e:
        RecommendPolicy.from_knobs({knob: value}, source="condor_config")
    assert e.value.source == "condor_config"
    assert str(e.value).startswith("condor_config: " + message)


def test_key_rounds_the_value():
    a = Recommendation("factor", "u@d", 1.504, 1.0, 86400, "r", {"x": 1})
    b = Recommendation("factor", "u@d", 1.496, 1.0, 3600, "other reason", {})
    assert a.key == b.key == '["factor", "u@d", 1.5]'
    assert Recommendation("ceiling", "u@d", 10.0, None, 1, "", {}).key == '["ceiling", "u@d", 10]'
    assert a.key != Recommendation("floor", "u@d", 1.5, None, 1, "", {}).key


# ---- views -------------------------------------------------------------------------------

def _sample():
    return recommend(same(6, sub("a@x", 27, 5), sub("b@x", 1, 5), sub("c@x", 2, 5)), POLICY,
                     NOW) + [
        Recommendation("delete", "old@x", None, None, None, "stale", {"idle_days": 31.0}),
        Recommendation("setprio", "d@x", 123.46, 134.567, None, "drifted", {})]


def test_render_table():
    widest = max(len(r.reason) for r in _sample())      # the floor b@x line
    assert render_table(_sample()) == (
        "Kind     Name   Current  Recommended    Lease  Reason\n"
        "-------  -----  -------  -----------  -------  " + "-" * widest + "\n"
        "factor   a@x       1.00         1.50  1+00:00  used more than its fair share: mean gap "
        "+170.0% over the 6 passes in which it ran, beyond 20% in 6 of them\n"
        "ceiling  a@x       none           10  1+00:00  used more than 2 x its fair share in 6 "
        "of 6 passes while b@x and 1 other(s) of its group got less than theirs with idle jobs\n"
        "floor    b@x       none           10  1+00:00  got less than its fair share while it "
        "had idle jobs: mean gap -90.0% over 6 passes, beyond 20% in 6 of them, and its "
        "priority factor is already 1\n"
        "floor    c@x       none           10  1+00:00  got less than its fair share while it "
        "had idle jobs: mean gap -80.0% over 6 passes, beyond 20% in 6 of them, and its "
        "priority factor is already 1\n"
        "delete   old@x        -     (delete)        -  stale\n"
        "setprio  d@x     134.57       123.46        -  drifted\n")
    assert render_table([]) == "No recommendations.\n"


def test_render_json():
    doc = render_json(_sample(), pool="cm.example.org")
    json.dumps(doc)                                  # serialisable as is
    assert doc["count"] == 6
    first = doc["recommendations"][0]
    assert first == {"kind": "factor", "name": "a@x", "value": 1.5, "current": 1.0,
                     "lease": 86400, "reason": _sample()[0].reason,
                     "numbers": {"mean_gap": 1.7, "passes": 6, "eligible_passes": 6,
                                 "fair_share": 10.0, "usage": 27.0, "policy_factor": 1.0,
                                 "step": 1.5},
                     "key": '["factor", "a@x", 1.5]',
                     "command": "condor_userprio -pool cm.example.org -setfactor a@x 1.5 "
                                "-duration 86400"}
    assert [r["command"] for r in render_json(_sample())["recommendations"][1:]] == [
        "condor_userprio -setceiling a@x 10 -duration 86400",
        "condor_userprio -setfloor b@x 10 -duration 86400",
        "condor_userprio -setfloor c@x 10 -duration 86400",
        "condor_userprio -delete old@x",
        "condor_userprio -setprio d@x 123.46"]


def test_render_script_exact():
    recs = _sample()
    recs = [recs[0], recs[2], recs[4], recs[5]]
    assert render_script(recs, pool="cm.example.org", now=NOW) == """\
#!/bin/sh
# condor_userprio adjustments recommended by negotiator-ext at 2026-11-21 12:47:46 UTC (1795265266).
# Review before running. Factor, ceiling and floor changes are leases that expire
# by themselves; delete and setprio do not expire.
set -e

# factor a@x: 1.00 -> 1.50 for 1+00:00 (days+hh:mm)
# used more than its fair share: mean gap +170.0% over the 6 passes in which it ran, beyond 20% in 6 of them
# mean_gap 1.7; passes 6; eligible_passes 6; fair_share 10; usage 27; policy_factor 1; step 1.5
condor_userprio -pool cm.example.org -setfactor a@x 1.5 -duration 86400

# floor b@x: none -> 10 for 1+00:00 (days+hh:mm)
# got less than its fair share while it had idle jobs: mean gap -90.0% over 6 passes, beyond 20% in 6 of them, and its priority factor is already 1
# mean_gap -0.9; passes 6; eligible_passes 6; fair_share 10; usage 1; policy_factor 1; floor 0
condor_userprio -pool cm.example.org -setfloor b@x 10 -duration 86400

# delete old@x: - -> (delete)
# stale
# idle_days 31
condor_userprio -pool cm.example.org -delete old@x

# setprio d@x: 134.57 -> 123.46
# drifted
condor_userprio -pool cm.example.org -setprio d@x 123.46
"""
    assert render_script([], now=NOW).endswith("set -e\n\n# Nothing to do.\n")


HOSTILE = "o'brien; rm -rf / @x y\n$(touch pwned)"


def test_script_quotes_every_name_and_argument():
    recs = [Recommendation("factor", HOSTILE, 2.5, 1.0, 86400, f"about {HOSTILE}",
                           {"starved": [HOSTILE]}),
            Recommendation("delete", HOSTILE, None, None, None, "stale", {})]
    script = render_script(recs, pool="cm; reboot", now=NOW)
    commands = [ln for ln in script.splitlines() if ln and not ln.startswith("#")]
    assert commands == [
        "set -e",
        "condor_userprio -pool 'cm; reboot' -setfactor "
        "'o'\"'\"'brien; rm -rf / @x y\n$(touch pwned)' 2.5 -duration 86400".split("\n")[0],
        "$(touch pwned)' 2.5 -duration 86400",
        "condor_userprio -pool 'cm; reboot' -delete 'o'\"'\"'brien; rm -rf / @x y",
        "$(touch pwned)'"]
    # the newline only ever appears inside a quoted argument: the shell reads back exactly
    # the argument lists command_argv builds
    body = script.split("set -e\n", 1)[1]
    argvs = [shlex.split(block.split("\n# ")[-1].split("\n", 1)[1])
             for block in body.strip().split("\n\n")]
    assert argvs == [command_argv(r, "cm; reboot") for r in recs]
    # comments escape control characters, so the name cannot end a comment line
    assert "# about o'brien; rm -rf / @x y\\x0a$(touch pwned)" in script
    assert "# starved o'brien; rm -rf / @x y\\x0a$(touch pwned)" in script


def test_command_argv_per_kind():
    def rec(kind, value, lease=86400):
        return Recommendation(kind, "u@d", value, None, lease, "", {})
    assert command_argv(rec("factor", 2.0)) == ["condor_userprio", "-setfactor", "u@d", "2",
                                                "-duration", "86400"]
    assert command_argv(rec("factor", 1.333333, None)) == ["condor_userprio", "-setfactor",
                                                           "u@d", "1.33"]
    assert command_argv(rec("ceiling", 7.0), pool="p") == [
        "condor_userprio", "-pool", "p", "-setceiling", "u@d", "7", "-duration", "86400"]
    assert command_argv(rec("floor", 3.0, 60)) == ["condor_userprio", "-setfloor", "u@d", "3",
                                                   "-duration", "60"]
    assert command_argv(rec("delete", None, None)) == ["condor_userprio", "-delete", "u@d"]
    assert command_argv(rec("setprio", 0.5, None)) == ["condor_userprio", "-setprio", "u@d",
                                                       "0.5"]
    with pytest.raises(ValueError):
        command_argv(rec("reset", None))
