"""core.recommend (the rules, fair shares, policy knobs) and views.recommend (table, JSON,
script) on small hand-built windows whose numbers are worked out by hand in the comments.

Unless a test says otherwise every submitter has the same real EUP (100), so the priority
yardstick (a gap counts only while the submitter is ranked ahead of its waiting peers)
lets every gap count, and passes are 2 hours apart, so 6 passes span 10 hours (more than
the 6 hours RECOMMEND_MIN_HOURS asks for).
"""

from __future__ import annotations

import dataclasses
import json
import subprocess

import pytest

from negotiator_ext.core.recommend import (KINDS, LEASED_KINDS, REPORT_ONLY_KINDS,
                                           Recommendation, RecommendPolicy, fair_shares,
                                           recommend)
from negotiator_ext.core.records import Adjustment, GroupObs, SubmitterObs
from negotiator_ext.errors import InputError
from negotiator_ext.views.recommend import (command_argv, command_text, render_json,
                                            render_script, render_table)

NOW = 1795265266            # 2026-11-21 12:47:46 UTC
DAY = 86400
STEP = 7200                 # seconds between passes
POLICY = RecommendPolicy()
LEASE = 86400


def sub(name, usage=0.0, idle=0, *, group="<none>", pf=1.0, factor=None, running=None,
        eup=100.0, **kw):
    """A submitter record; factor defaults to the policy factor (no lease)."""
    return SubmitterObs(name=name, group=group, is_group=False,
                        factor=pf if factor is None else factor, policy_factor=pf,
                        real_usage=float(usage), idle_jobs=idle, real_eup=eup,
                        running_jobs=(1 if usage else 0) if running is None else running,
                        last_usage_time=kw.pop("last_usage_time", NOW - 60), **kw)


def header(i, status="complete", step=STEP):
    t = NOW - 40 * 3600 + step * i
    return {"uuid": f"pass-{i}", "started_at": t, "snapshot_time": t, "status": status,
            "real_accountant_time": t}


def window(*pass_subs, statuses=None, step=STEP, groups=None):
    """One pass per list of submitters, oldest first (complete unless `statuses` says
    otherwise); `groups`: the GroupObs of every pass (default: <none> without a quota)."""
    return [(header(i, statuses[i] if statuses else "complete", step), list(subs),
             list(groups) if groups is not None else [GroupObs("<none>")])
            for i, subs in enumerate(pass_subs)]


def same(n, *subs, step=STEP):
    return window(*[subs] * n, step=step)


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
    # a: 2 x 1.3 = 2.6; b: 2 x 0.7 = 1.4 (within the 1.5 step, above 1). 6 passes 2 h
    # apart span 10 h.
    recs = recommend(same(6, sub("a", 6.5, 4, pf=2), sub("b", 3.5, 4, pf=2)), POLICY, NOW)
    assert recs == [
        Recommendation("factor", "a", 2.6, 2.0, LEASE,
                       "used more than its fair share while its priority still ranked it "
                       "ahead: mean gap +30.0% over the 6 passes in which it ran, beyond 20% "
                       "in 6 of them",
                       {"mean_gap": 0.3, "passes": 6, "eligible_passes": 6, "span_hours": 10.0,
                        "fair_share": 5.0, "usage": 6.5, "policy_factor": 2.0, "step": 1.3}),
        Recommendation("factor", "b", 1.4, 2.0, LEASE,
                       "got less than its fair share while it waited for the pie and its "
                       "priority ranked it ahead: mean gap -30.0% over 6 passes, beyond 20% "
                       "in 6 of them",
                       {"mean_gap": -0.3, "passes": 6, "eligible_passes": 6, "span_hours": 10.0,
                        "fair_share": 5.0, "usage": 3.5, "policy_factor": 2.0, "step": 0.7}),
    ]


def test_factor_step_is_clamped():
    # fair 5 each; a +60% -> clamped to x1.5 = 3.0; b -60% -> clamped to /1.5 = 1.33.
    recs = recommend(same(6, sub("a", 8, 4, pf=2), sub("b", 2, 4, pf=2)), POLICY, NOW)
    assert brief(recs) == [("factor", "a", 3.0, 2.0, LEASE), ("factor", "b", 1.33, 2.0, LEASE)]
    assert recs[0].numbers["step"] == 1.5 and recs[0].numbers["mean_gap"] == 0.6
    assert recs[1].numbers["step"] == 0.6667


def test_factor_never_below_one():
    # b: 1.2 / 1.5 = 0.8 -> 1.0
    recs = recommend(same(6, sub("a", 8, 4, pf=1.2), sub("b", 2, 4, pf=1.2)), POLICY, NOW)
    assert brief(recs) == [("factor", "a", 1.8, 1.2, LEASE), ("factor", "b", 1.0, 1.2, LEASE)]


def test_factor_compares_with_the_policy_factor_and_waits_for_a_running_lease():
    # pie 12, fair 6 each: a +67% -> 1 x 1.5; b -67% with factor 1 -> floor 6.
    # A factor lease of 1.5 that ended a moment ago (not yet restored by a cycle) lapses
    # to the policy factor 1: the raise is recommended (current: the 1.5 still shown).
    old = [[sub("a", 10, 4), sub("b", 2, 4)]] * 5
    last = [sub("a", 10, 4, factor=1.5, factor_lease_expires=NOW - 10), sub("b", 2, 4)]
    recs = recommend(window(*old, last), POLICY, NOW)
    assert brief(recs) == [("factor", "a", 1.5, 1.5, LEASE), ("floor", "b", 6.0, None, LEASE)]
    # a factor lease still running (another would be refused, A25), not ours: nothing
    last = [sub("a", 10, 4, factor=1.2, factor_lease_expires=NOW + 10), sub("b", 2, 4)]
    recs = recommend(window(*old, last), POLICY, NOW)
    assert brief(recs) == [("floor", "b", 6.0, None, LEASE)]
    # the same window with no lease: the raise
    recs = recommend(window(*old, [sub("a", 10, 4), sub("b", 2, 4)]), POLICY, NOW)
    assert brief(recs) == [("factor", "a", 1.5, 1.0, LEASE), ("floor", "b", 6.0, None, LEASE)]


def test_our_own_factor_lease_is_renewed_in_its_last_tenth():
    # We applied a 1-day factor lease of 1.5 to a at `applied`; the pool shows it ending
    # 20 s later than we recorded (the negotiator's clock). The gap still shows (a +67%).
    applied_at = NOW - 80000
    ours = Adjustment('["factor", "a", 1.5]', "factor", "a", 1.5, applied_at,
                      applied_at + DAY, "condor_userprio -setfactor a 1.5 -duration 86400",
                      "condor_userprio", "applied")
    ends = applied_at + DAY + 20                # NOW + 6420: 7.4% of the day left

    def win(exp):
        return window(*[[sub("a", 10, 4, factor=1.5, factor_lease_expires=exp),
                         sub("b", 2, 4)]] * 6)
    recs = recommend(win(ends), POLICY, NOW, applied=[ours])
    assert brief(recs) == [("factor", "a", 1.5, 1.5, LEASE), ("floor", "b", 6.0, None, LEASE)]
    assert recs[0].reason.endswith(
        f"; renews our factor lease applied at {applied_at}, which ends at {ends} (the "
        "negotiator refuses a new one until then)")
    assert recs[0].numbers["renews_lease_until"] == ends
    # exactly a tenth left: renewed; 1 s more: not yet
    assert [r.kind for r in recommend(win(ends), POLICY, ends - 8640, applied=[ours])] == [
        "factor", "floor"]
    assert [r.kind for r in recommend(win(ends), POLICY, ends - 8641, applied=[ours])] == [
        "floor"]
    # not our lease: without our record, or one whose end is not the pool's (> 300 s off),
    # or one that failed, nothing
    assert [r.kind for r in recommend(win(ends), POLICY, NOW)] == ["floor"]
    assert [r.kind for r in recommend(win(ends + 301), POLICY, NOW, applied=[ours])] == ["floor"]
    failed = dataclasses.replace(ours, outcome="failed: refused")
    assert [r.kind for r in recommend(win(ends), POLICY, NOW, applied=[failed])] == ["floor"]
    # the gap closed under the lease: no renewal
    fair = window(*[[sub("a", 6, 4, factor=1.5, factor_lease_expires=ends),
                     sub("b", 6, 4)]] * 6)
    assert recommend(fair, POLICY, NOW, applied=[ours]) == []


def test_factor_persistence_threshold():
    over, fair = [sub("a", 8, 4, pf=2), sub("b", 2, 4, pf=2)], [sub("a", 5, 4, pf=2),
                                                              sub("b", 5, 4, pf=2)]
    # 6 of 8 passes beyond the gap: 0.75 < 0.8 -> nothing
    assert recommend(window(*[fair] * 2, *[over] * 6), POLICY, NOW) == []
    # 7 of 8 -> 0.875 >= 0.8; mean gap = 7 x 0.6 / 8 = 0.525 -> step clamped to 1.5
    recs = recommend(window(fair, *[over] * 7), POLICY, NOW)
    assert brief(recs) == [("factor", "a", 3.0, 2.0, LEASE), ("factor", "b", 1.33, 2.0, LEASE)]
    assert recs[0].numbers == {"mean_gap": 0.525, "passes": 7, "eligible_passes": 8,
                               "span_hours": 14.0, "fair_share": 5.0, "usage": 7.625,
                               "policy_factor": 2.0, "step": 1.5}
    assert "over the 8 passes in which it ran, beyond 20% in 7 of them" in recs[0].reason
    # exactly the persistence (8 of 10 = 0.8) is enough
    recs = recommend(window(*[fair] * 2, *[over] * 8), POLICY, NOW)
    assert [(r.kind, r.name) for r in recs] == [("factor", "a"), ("factor", "b")]


def test_too_few_passes_say_nothing():
    subs = [sub("a", 8, 4, pf=2), sub("b", 2, 4, pf=2)]
    assert recommend(same(5, *subs), POLICY, NOW) == []
    assert recommend([], POLICY, NOW) == []
    # 5 passes span 8 h
    assert len(recommend(same(5, *subs), RecommendPolicy(min_passes=5), NOW)) == 2


def test_eligible_passes_must_span_min_hours():
    subs = [sub("a", 8, 4, pf=2), sub("b", 2, 4, pf=2)]
    # 6 passes a minute apart: 5 minutes of evidence, nothing
    assert recommend(same(6, *subs, step=60), POLICY, NOW) == []
    assert len(recommend(same(6, *subs, step=60), RecommendPolicy(min_hours=0), NOW)) == 2
    assert len(recommend(same(6, *subs, step=60), RecommendPolicy(min_hours=300 / 3600),
                         NOW)) == 2                                     # exactly 5 minutes
    # 12 passes an hour apart (11 h), but a runs and both wait in the last 6 only: the
    # eligible passes span 5 h. In the first 6 a has no jobs (eligible for nothing) and b
    # has no waiting peer to compare priorities with (not eligible either).
    quiet = [sub("a", 0, pf=2), sub("b", 5, 4, pf=2)]
    w = window(*[quiet] * 6, *[subs] * 6, step=3600)
    assert recommend(w, POLICY, NOW) == []
    recs = recommend(w, RecommendPolicy(min_hours=5), NOW)
    assert brief(recs) == [("factor", "a", 3.0, 2.0, LEASE), ("factor", "b", 1.33, 2.0, LEASE)]
    assert recs[1].numbers["eligible_passes"] == 6 and recs[1].numbers["span_hours"] == 5.0


def test_partial_and_failed_passes_are_ignored():
    subs = [sub("a", 8, 4, pf=2), sub("b", 2, 4, pf=2)]
    contrary = [sub("a", 1, 4, pf=2), sub("b", 9, 4, pf=2)]
    expected = recommend(same(6, *subs), POLICY, NOW)
    mixed = window(subs, contrary, subs, subs, contrary, subs, subs, contrary, subs,
                   statuses=["complete", "partial", "complete", "complete", "failed",
                             "complete", "complete", "partial", "complete"])
    assert brief(recommend(mixed, POLICY, NOW)) == brief(expected) != []
    # only 5 complete passes among them: nothing
    assert recommend(mixed[:-1], POLICY, NOW) == []
    # the newest pass being partial does not make its records the latest
    assert brief(recommend(mixed + [(header(9, "partial"), contrary, [])], POLICY, NOW)) == \
        brief(expected)


def test_a_complete_pass_without_start_is_an_input_error():
    w = same(6, sub("a", 8, 4), sub("b", 2, 4))
    del w[2][0]["started_at"]
    with pytest.raises(InputError) as e:
        recommend(w, POLICY, NOW)
    assert str(e.value) == "pass pass-2: no started_at: the pass cannot be placed in time"


def test_absent_from_latest_pass_gets_nothing():
    old = [sub("a", 8, 4, pf=2), sub("b", 2, 4, pf=2)]
    recs = recommend(window(*[old] * 6, [sub("b", 2, 4, pf=2)]), POLICY, NOW)
    # a is gone; b alone in the last pass has no peer there (not eligible), but was below
    # its share in the 6 passes before
    assert brief(recs) == [("factor", "b", 1.33, 2.0, LEASE)]
    assert recs[0].numbers["eligible_passes"] == 6
    # absent in some passes only: eligible passes are those it was recorded in (and,
    # for b, those with a waiting peer)
    recs = recommend(window(*[old] * 6, [sub("b", 5, 4, pf=2)], *[old] * 1), POLICY, NOW)
    assert brief(recs) == [("factor", "a", 3.0, 2.0, LEASE), ("factor", "b", 1.33, 2.0, LEASE)]
    assert recs[0].numbers["eligible_passes"] == 7 and recs[1].numbers["eligible_passes"] == 7


def test_contrary_evidence_gives_no_change():
    # a: above while it ran (passes 0-5, no idle jobs there; c waits), below while it had
    # idle jobs and used nothing (passes 6-11): both persistent -> no factor, no floor.
    run_ = [sub("a", 8), sub("c", 2, 1)]        # fair a 5 (cap 8 > 5), c 5
    wait = [sub("a", 0, 3), sub("c", 10, 1)]    # fair a 5, c 5
    # c has a waiting peer (a) in passes 6-11 only, where it is above (+100%) while level
    # with a: its factor is raised. In passes 0-5 nobody else waits, so nothing tells
    # whether the pie or a full pool held it back: no evidence.
    assert brief(recommend(window(*[run_] * 6, *[wait] * 6), POLICY, NOW)) == [
        ("factor", "c", 1.5, 1.0, LEASE)]
    # the waiting half alone: a gets a floor (factor 1 already)
    assert brief(recommend(window(*[wait] * 6), POLICY, NOW)) == [
        ("factor", "c", 1.5, 1.0, LEASE), ("floor", "a", 5.0, None, LEASE)]


def test_deterministic_whatever_the_record_order():
    subs = [sub("a", 27, 5), sub("b", 1, 5), sub("c", 2, 5)]
    assert recommend(same(6, *subs), POLICY, NOW) == recommend(same(6, *subs[::-1]), POLICY, NOW)


# ---- the priority yardstick and waiting for the pie -------------------------------------

def test_a_gap_counts_only_while_the_priority_ranks_the_submitter_ahead():
    # pie 12, fair 4 each: a +100% (not beyond the ceiling gap), b and c -50%.
    def win(a_eup, b_eup=100.0):
        return same(6, sub("a", 8, 4, eup=a_eup), sub("b", 2, 4, eup=b_eup), sub("c", 2, 4))
    # a's EUP 50 is better than its waiting peers' median (100): the pie still favours it,
    # its priority has not caught up: raise. b and c (EUP 100) are worse than the median
    # of their peers (50, 100 -> 75): they pay for their usage, no floor.
    assert brief(recommend(win(50), POLICY, NOW)) == [("factor", "a", 1.5, 1.0, LEASE)]
    # a's EUP 400 is worse than its peers': the priority system is correcting it, no
    # raise. b and c (100 <= median(400, 100) = 250) are starved although their priority
    # says they should get more: floors.
    assert brief(recommend(win(400), POLICY, NOW)) == [("floor", "b", 4.0, None, LEASE),
                                                       ("floor", "c", 4.0, None, LEASE)]
    # level with the median counts as ahead; a hair worse does not
    assert [r.kind for r in recommend(win(100), POLICY, NOW)] == ["factor", "floor", "floor"]
    assert [(r.kind, r.name) for r in recommend(win(100.001), POLICY, NOW)] == [
        ("floor", "b"), ("floor", "c")]
    # a's EUP unknown: its passes are no evidence (and it is left out of the others'
    # medians); b and c still compare with each other
    assert [(r.kind, r.name) for r in recommend(win(None), POLICY, NOW)] == [
        ("floor", "b"), ("floor", "c")]
    # EUP 50 in 4 passes, 400 in 2: ranked ahead in 4 of 6 < 80%, no raise
    mixed = window(*[[sub("a", 8, 4, eup=e), sub("b", 2, 4), sub("c", 2, 4)]
                     for e in (50, 400, 50, 50, 400, 50)])
    assert [r for r in recommend(mixed, POLICY, NOW) if r.name == "a"] == []


def test_the_median_is_over_the_waiting_others_of_the_same_group():
    # pie 14, fair 3.5 each. a's waiting peers b 50, c 100, d 400: median 100. e (EUP 1)
    # has no idle jobs and f (EUP 1) is in another group: neither counts.
    def win(a_eup):
        return same(6, sub("a", 8, 4, eup=a_eup), sub("b", 2, 4, eup=50),
                    sub("c", 2, 4, eup=100), sub("d", 2, 4, eup=400), sub("e", 0, eup=1),
                    sub("f", 1, 1, group="g", eup=1))
    # a at 100 (ahead) +129% -> ceiling at 4 (replaces its factor change), since b
    # (50 <= median(100, 100, 400)) and c (100 <= median(100, 50, 400)) are starved.
    assert brief(recommend(win(100), POLICY, NOW)) == [("ceiling", "a", 4.0, None, LEASE),
                                                       ("floor", "b", 3.0, None, LEASE),
                                                       ("floor", "c", 3.0, None, LEASE)]
    assert [(r.kind, r.name) for r in recommend(win(100.5), POLICY, NOW)] == [
        ("floor", "b"), ("floor", "c")]


def test_below_counts_only_while_the_pie_would_give_more():
    # pie 10, fair 5 each, both factor 2: a +60%, b -60%.
    def win(**b):
        return same(6, sub("a", 8, 4, pf=2), sub("b", 2, 4, pf=2, **b))
    assert brief(recommend(win(), POLICY, NOW)) == [("factor", "a", 3.0, 2.0, LEASE),
                                                    ("factor", "b", 1.33, 2.0, LEASE)]
    # our cycle's pie would have let b add 3 and it got 1: it waits for the pie
    assert [r.name for r in recommend(win(shadow_limit=3.0, shadow_match_weight=1.0),
                                      POLICY, NOW)] == ["a", "b"]
    # the pie gave b all it allows (limit reached, or a limit of 0): not held back by the
    # pie, so no lower factor for b
    for limit, matched in ((1.0, 1.0), (0.0, 0.0)):
        recs = recommend(win(shadow_limit=limit, shadow_match_weight=matched), POLICY, NOW)
        assert brief(recs) == [("factor", "a", 3.0, 2.0, LEASE)]


# ---- rules b and c: ceiling and floor ----------------------------------------------------

def test_ceiling_and_floor_one_change_per_submitter():
    # pie 30, fair 10 each. a uses 27 = 2.7 x fair (> 2 x) while b (-90%) and c (-80%)
    # wait with idle jobs: a gets a ceiling of 10 (instead of a factor change: one change
    # per submitter). b and c have factor 1 already (cannot be lowered): floors of 10.
    recs = recommend(same(6, sub("a", 27, 5), sub("b", 1, 5), sub("c", 2, 5)), POLICY, NOW)
    assert brief(recs) == [("ceiling", "a", 10.0, None, LEASE), ("floor", "b", 10.0, None, LEASE),
                           ("floor", "c", 10.0, None, LEASE)]
    ceiling = recs[0]
    assert ceiling.reason == ("used more than 2 x its fair share in 6 of 6 passes while b and 1 "
                              "other(s) of its group got less than theirs waiting for the pie")
    assert ceiling.numbers["starved"] == ["b", "c"]
    assert recs[1].reason == (
        "got less than its fair share while it waited for the pie and its priority ranked it "
        "ahead: mean gap -90.0% over 6 passes, beyond 20% in 6 of them, and its priority "
        "factor is already 1; a Floor of 10 lets it add up to 10 in one cycle's floor round "
        "(the floor is absolute, not Floor - usage: rule N3)")
    # a ceiling lease running: a gets its factor change instead
    recs = recommend(same(6, sub("a", 27, 5, ceiling=30, ceiling_lease_expires=NOW + 1),
                          sub("b", 1, 5), sub("c", 2, 5)), POLICY, NOW)
    assert [(r.kind, r.name) for r in recs] == [("factor", "a"), ("floor", "b"), ("floor", "c")]


def test_ceiling_rounds_up_and_needs_someone_starved_in_the_same_group():
    # pie 31: fair 10.33 each -> ceiling 11; floors 10.
    recs = recommend(same(6, sub("a", 28, 5), sub("b", 1, 5), sub("c", 2, 5)), POLICY, NOW)
    assert [(r.kind, r.value) for r in recs] == [("ceiling", 11.0), ("floor", 10.0),
                                                 ("floor", 10.0)]
    # a ceiling at or below that value already set: no ceiling, the factor change instead
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
    # (c, +94% over b in <none>, does get one; a gets its factor change)
    assert [(r.kind, r.name) for r in recs] == [("factor", "a"), ("ceiling", "c"),
                                                ("floor", "b")]
    assert recs[1].numbers["starved"] == ["b"]
    # y waiting in all 8 passes: now someone of g is starved, a gets a ceiling of 15
    recs = recommend(window(*[with_y] * 8), policy, NOW)
    assert [(r.name, r.value, r.numbers["starved"]) for r in recs if r.kind == "ceiling"] == [
        ("a", 15.0, ["y"]), ("c", 16.0, ["b"])]
    # others not starved (no idle jobs): nobody is hurt, no ceiling
    recs = recommend(same(6, sub("a", 28, 5), sub("b", 1), sub("c", 2)), POLICY, NOW)
    assert recs == []


def test_floor_when_below_configured_floor():
    # Factor 3 each, pie 12, fair 6 each. y: +67% -> 4.5. x: -67% would get factor 2, but
    # it also stays below its Floor 4 while it waits -> floor(6) = 6, which replaces the
    # factor change.
    subs = [sub("x", 2, 3, pf=3, floor=4), sub("y", 10, 3, pf=3)]
    recs = recommend(same(6, *subs), POLICY, NOW)
    assert brief(recs) == [("factor", "y", 4.5, 3.0, LEASE), ("floor", "x", 6.0, 4.0, LEASE)]
    assert recs[1].reason == (
        "used less than its Floor 4 while it waited for the pie in 6 of 6 passes; a Floor of "
        "6 lets it add up to 6 in one cycle's floor round (the floor is absolute, not Floor - "
        "usage: rule N3)")
    # its Floor already 6: no floor, the factor change; a floor lease running: the same
    subs[0] = sub("x", 2, 3, pf=3, floor=6)
    assert brief(recommend(same(6, *subs), POLICY, NOW)) == [("factor", "x", 2.0, 3.0, LEASE),
                                                             ("factor", "y", 4.5, 3.0, LEASE)]
    subs[0] = sub("x", 2, 3, pf=3, floor=4, floor_lease_expires=NOW + 1)
    assert [r.kind for r in recommend(same(6, *subs), POLICY, NOW)] == ["factor", "factor"]


def test_floor_is_at_least_one():
    # pie 1, fair 0.5 each: b starved (0.1/0.5 - 1 = -80%) -> floor max(1, floor(0.5)) = 1
    recs = recommend(same(6, sub("a", 0.9, 1), sub("b", 0.1, 1)), POLICY, NOW)
    assert brief(recs) == [("factor", "a", 1.5, 1.0, LEASE), ("floor", "b", 1.0, None, LEASE)]


# ---- rule d: delete ----------------------------------------------------------------------

def test_delete_stale_records_only():
    old, recent = NOW - 31 * DAY, NOW - 29 * DAY
    subs = [sub("old@x", 0, last_usage_time=old),
            sub("recent@x", 0, last_usage_time=recent),
            sub("never@x", 0, last_usage_time=0, begin_usage_time=NOW - 40 * DAY),
            sub("unknown@x", 0, last_usage_time=0),
            sub("idle@x", 0, 2, last_usage_time=old),
            sub("running@x", 0, running=1, last_usage_time=old),
            # someone set something on these: kept
            sub("leased@x", 0, last_usage_time=old, factor=2.0, factor_lease_expires=NOW + 5),
            sub("lapsed@x", 0, last_usage_time=old, ceiling_lease_expires=NOW - 5),
            sub("floor@x", 0, last_usage_time=old, floor=2),
            sub("ceiling0@x", 0, last_usage_time=old, ceiling=0),
            SubmitterObs("group_a", "group_a", True, last_usage_time=old)]
    recs = recommend(window(subs), POLICY, NOW)      # one pass is enough for a delete
    assert recs == [
        Recommendation("delete", "never@x", None, None, None,
                       "no usage and no idle or running jobs; never used, created 40 days ago "
                       "(more than 30); deleting it also drops its priority factor 1",
                       {"last_usage_time": 0, "begin_usage_time": NOW - 40 * DAY,
                        "idle_days": 40.0, "factor": 1.0}),
        Recommendation("delete", "old@x", None, None, None,
                       "no usage and no idle or running jobs; last used 31 days ago (more "
                       "than 30); deleting it also drops its priority factor 1",
                       {"last_usage_time": old, "begin_usage_time": 0, "idle_days": 31.0,
                        "factor": 1.0}),
    ]
    assert recs[0].key == '["delete", "never@x", null]'
    assert recommend(window(subs), RecommendPolicy(stale_days=45), NOW) == []


# ---- rule e: setprio (report only) -------------------------------------------------------

def test_setprio_is_advice_on_persistent_drift():
    def s(drift, rup=100.0):
        return sub("d@x", 1, predicted_rup=rup, real_rup=rup * (1 + (drift or 0)), drift=drift)
    drifts = [0.1, 0.08, 0.12, 0.02, 0.1, 0.3, 0.07, 0.09]     # 7 of 8 beyond 5%, all +
    recs = recommend(window(*[[s(d)] for d in drifts[:-1]], [s(0.09, 123.456)]), POLICY, NOW)
    assert recs == [Recommendation(
        "setprio", "d@x", 123.46, 123.456 * 1.09, None,
        "the real accountant's priority has drifted from what our accountant rules predict: "
        "mean drift +11.0%, beyond 5% in 7 of 8 passes; advice for an admin to check (after "
        "an accountant restart or a hand edit, say), never applied",
        {"mean_drift": 0.11, "passes": 7, "known_passes": 8, "predicted_rup": 123.456,
         "real_rup": round(123.456 * 1.09, 4)})]
    assert "setprio" in REPORT_ONLY_KINDS and command_argv(recs[0]) is None
    # mixed signs: not persistent
    mixed = [0.1, -0.1, 0.1, -0.1, 0.1, 0.1, 0.1, 0.1]
    assert recommend(window(*[[s(d)] for d in mixed]), POLICY, NOW) == []
    # drift unknown in 3 passes: 5 known < min_passes
    unknown = [0.1, None, 0.1, None, 0.1, None, 0.1, 0.1]
    assert recommend(window(*[[s(d)] for d in unknown]), POLICY, NOW) == []
    # 8 passes within 7 minutes: not persistent in time
    assert recommend(window(*[[s(d)] for d in drifts], step=60), POLICY, NOW) == []
    # below our prediction as persistently: the same advice, with a negative drift
    (low,) = recommend(window(*[[s(-0.1)] for _ in range(8)]), POLICY, NOW)
    assert (low.kind, low.value, low.numbers["mean_drift"]) == ("setprio", 100.0, -0.1)


# ---- rule f: groups (report only) --------------------------------------------------------

def test_group_below_its_quota_with_demand_or_above_while_another_is_short():
    none = GroupObs("<none>", real_usage=5.0, real_requested=50.0)     # no quota: no advice
    a = GroupObs("group_a", real_quota=40.0, real_usage=10.0, real_requested=50.0)
    b = GroupObs("group_b", real_quota=60.0, real_usage=90.0, real_requested=95.0)
    d = GroupObs("group_d", real_quota=40.0, real_usage=10.0, real_requested=10.0)  # no demand
    recs = recommend(window(*[[]] * 6, groups=[none, a, b, d]), POLICY, NOW)
    assert recs == [
        Recommendation("group", "group_a", None, 40.0, None,
                       "used less than its quota while it had demand: mean usage 10 against a "
                       "mean quota 40, short by more than 20% in 6 of 6 passes; review "
                       "GROUP_QUOTA_group_a / GROUP_ACCEPT_SURPLUS",
                       {"usage": 10.0, "quota": 40.0, "requested": 50.0, "passes": 6,
                        "eligible_passes": 6, "span_hours": 10.0}),
        Recommendation("group", "group_b", None, 60.0, None,
                       "used more than its quota while group_a stayed below theirs with demand: "
                       "mean usage 90 against a mean quota 60, beyond 20% in 6 of 6 passes; review "
                       "GROUP_QUOTA_group_b / GROUP_ACCEPT_SURPLUS",
                       {"usage": 90.0, "quota": 60.0, "short_groups": ["group_a"],
                        "passes": 6, "eligible_passes": 6, "span_hours": 10.0})]
    assert all(r.kind in REPORT_ONLY_KINDS and command_argv(r) is None for r in recs)
    # above its quota while nobody unrelated is short: surplus nobody else wanted, fine.
    # group_c's own child being short does not count (the parent's quota includes it).
    c = GroupObs("group_c", real_quota=50.0, real_usage=80.0, real_requested=80.0)
    cx = GroupObs("group_c.x", real_quota=30.0, real_usage=5.0, real_requested=20.0)
    recs = recommend(window(*[[]] * 6, groups=[c, cx]), POLICY, NOW)
    assert [(r.kind, r.name) for r in recs] == [("group", "group_c.x")]
    # too short a span: nothing
    assert recommend(window(*[[]] * 6, groups=[a, b], step=60), POLICY, NOW) == []
    # within the gap (20%) of the quota is no evidence either way: 35/40 and 70/60 are
    # fine, only group_e (10/40 with demand) is short
    near_a = GroupObs("group_a", real_quota=40.0, real_usage=35.0, real_requested=50.0)
    near_b = GroupObs("group_b", real_quota=60.0, real_usage=70.0, real_requested=95.0)
    e = GroupObs("group_e", real_quota=40.0, real_usage=10.0, real_requested=30.0)
    recs = recommend(window(*[[]] * 6, groups=[near_a, near_b, e]), POLICY, NOW)
    assert [(r.kind, r.name) for r in recs] == [("group", "group_e")]


# ---- policy knobs ------------------------------------------------------------------------

def test_policy_from_knobs():
    assert RecommendPolicy.from_knobs({}) == RecommendPolicy()
    assert RecommendPolicy().min_hours == 6.0
    p = RecommendPolicy.from_knobs({"RECOMMEND_GAP": "0.3", "recommend_persistence": "1",
                                    "RECOMMEND_MIN_PASSES": "10", "RECOMMEND_MIN_HOURS": "12",
                                    "MAX_FACTOR_STEP": "2", "RECOMMEND_CEILING_GAP": "0.5",
                                    "LEASE_DURATION": "3600", "STALE_DAYS": "90",
                                    "DRIFT_THRESHOLD": "0.1", "UNRELATED": "x"})
    assert p == RecommendPolicy(gap=0.3, persistence=1.0, min_passes=10, min_hours=12.0,
                                max_factor_step=2.0, ceiling_gap=0.5, lease=3600,
                                stale_days=90.0, drift=0.1)
    assert isinstance(p.min_passes, int) and isinstance(p.lease, int)
    assert RecommendPolicy.from_knobs({"RECOMMEND_MIN_HOURS": "0"}).min_hours == 0.0


@pytest.mark.parametrize("knob, value, message", [
    ("RECOMMEND_GAP", "abc", "not a number: abc"),
    ("DRIFT_THRESHOLD", "-0.1", "-0.1: must be at least 0"),
    ("MAX_FACTOR_STEP", "1", "1: must be greater than 1"),
    ("RECOMMEND_PERSISTENCE", "0", "0: must be a fraction"),
    ("RECOMMEND_PERSISTENCE", "1.5", "1.5: must be a frac"),
    ("RECOMMEND_MIN_PASSES", "2.5", "2.5: must be a whole"),
    ("RECOMMEND_MIN_HOURS", "-1", "-1: must be at least 0"),
    ("LEASE_DURATION", "nan", "not a finite number: nan"),
    ("STALE_DAYS", "0", "0: must be greater than 0"),
])
def test_policy_bad_knobs(knob, value, message):
    with pytest.raises(InputError) as e:
        RecommendPolicy.from_knobs({knob: value})
    assert e.value.source == f"NEGOTIATOR_EXT_{knob}"
    assert str(e.value).startswith(f"NEGOTIATOR_EXT_{knob}: {message}")


def test_key_rounds_the_value():
    a = Recommendation("factor", "u@d", 1.504, 1.0, 86400, "r", {"x": 1})
    b = Recommendation("factor", "u@d", 1.496, 1.0, 3600, "other reason", {})
    assert a.key == b.key == '["factor", "u@d", 1.5]'
    assert Recommendation("ceiling", "u@d", 10.0, None, 1, "", {}).key == '["ceiling", "u@d", 10]'
    assert a.key != Recommendation("floor", "u@d", 1.5, None, 1, "", {}).key
    assert Recommendation("group", "g", None, 4.0, None, "", {}).key == '["group", "g", null]'


def test_kinds():
    assert KINDS == ("factor", "ceiling", "floor", "delete", "setprio", "group")
    assert LEASED_KINDS == {"factor", "ceiling", "floor"}
    assert REPORT_ONLY_KINDS == {"setprio", "group"}


# ---- views -------------------------------------------------------------------------------

def _sample():
    return recommend(same(6, sub("a@x", 27, 5), sub("b@x", 1, 5), sub("c@x", 2, 5)), POLICY,
                     NOW) + [
        Recommendation("delete", "old@x", None, None, None, "stale", {"idle_days": 31.0}),
        Recommendation("setprio", "d@x", 123.46, 134.567, None, "drifted", {}),
        Recommendation("group", "group_a", None, 40.0, None, "short", {"usage": 10.0})]


_FLOOR_REASON = ("got less than its fair share while it waited for the pie and its priority "
                 "ranked it ahead: mean gap {gap} over 6 passes, beyond 20% in 6 of them, and "
                 "its priority factor is already 1; a Floor of 10 lets it add up to 10 in one "
                 "cycle's floor round (the floor is absolute, not Floor - usage: rule N3)")
VIEW_TABLE = (
    "Kind     Name     Current  Recommended    Lease  Reason\n"
    "-------  -------  -------  -----------  -------  "
    + "-" * len(_FLOOR_REASON.format(gap="-90.0%")) + "\n"
    "ceiling  a@x         none           10  1+00:00  used more than 2 x its fair share in 6 "
    "of 6 passes while b@x and 1 other(s) of its group got less than theirs waiting for the "
    "pie\n"
    "floor    b@x         none           10  1+00:00  " + _FLOOR_REASON.format(gap="-90.0%") + "\n"
    "floor    c@x         none           10  1+00:00  " + _FLOOR_REASON.format(gap="-80.0%") + "\n"
    "delete   old@x          -     (delete)        -  stale\n"
    "setprio  d@x       134.57       123.46        -  drifted\n"
    "group    group_a    40.00     (review)        -  short\n")
VIEW_SCRIPT = """\
#!/bin/sh
# condor_userprio adjustments recommended by negotiator-ext at 2026-11-21 12:47:46 UTC (1795265266).
# Review before running. Factor, ceiling and floor changes are leases that expire
# by themselves; a delete does not expire. condor_userprio has -duration (leases)
# from HTCondor 25.12 on; 25.0 LTS does not have it.
# setprio and group items are advice to check by hand: comments only, nothing runs.
set -e

# ceiling a@x: none -> 10 for 1+00:00 (days+hh:mm)
# used more than 2 x its fair share in 6 of 6 passes while b@x and 1 other(s) of its group got less than theirs waiting for the pie
# mean_gap 1.7; passes 6; eligible_passes 6; span_hours 10; fair_share 10; usage 27; policy_factor 1; starved b@x, c@x
condor_userprio -pool cm.example.org -setceiling a@x 10 -duration 86400

# floor b@x: none -> 10 for 1+00:00 (days+hh:mm)
# got less than its fair share while it waited for the pie and its priority ranked it ahead: mean gap -90.0% over 6 passes, beyond 20% in 6 of them, and its priority factor is already 1; a Floor of 10 lets it add up to 10 in one cycle's floor round (the floor is absolute, not Floor - usage: rule N3)
# mean_gap -0.9; passes 6; eligible_passes 6; span_hours 10; fair_share 10; usage 1; policy_factor 1; floor 0
condor_userprio -pool cm.example.org -setfloor b@x 10 -duration 86400

# delete old@x: - -> (delete)
# stale
# idle_days 31
condor_userprio -pool cm.example.org -delete old@x

# setprio d@x: 134.57 -> 123.46 (report only: nothing to run)
# drifted

# group group_a: 40.00 -> (review) (report only: nothing to run)
# short
# usage 10
"""


def test_render_table():
    # the table, then the legend of its columns (none is HTCondor's own)
    table, legend = render_table(_sample()).split("\n\n")
    assert table + "\n" == VIEW_TABLE
    lines = legend.splitlines()
    assert lines[0] == "Columns (HTCondor's own names aside):"
    assert [ln.split()[0] for ln in lines[2:] if not ln.startswith("     ")] == [
        "Kind", "Name", "Current", "Recommended", "Lease", "Reason"]
    assert render_table([]) == "No recommendations.\n"


def test_render_json():
    doc = render_json(_sample(), pool="cm.example.org")
    json.dumps(doc)                                  # serialisable as is
    assert doc["count"] == 6
    first = doc["recommendations"][0]
    assert first == {"kind": "ceiling", "name": "a@x", "value": 10.0, "current": None,
                     "lease": 86400, "reason": _sample()[0].reason,
                     "numbers": {"mean_gap": 1.7, "passes": 6, "eligible_passes": 6,
                                 "span_hours": 10.0, "fair_share": 10.0, "usage": 27.0,
                                 "policy_factor": 1.0, "starved": ["b@x", "c@x"]},
                     "key": '["ceiling", "a@x", 10]',
                     "command": "condor_userprio -pool cm.example.org -setceiling a@x 10 "
                                "-duration 86400",
                     "report_only": False}
    assert [(r["command"], r["report_only"])
            for r in render_json(_sample())["recommendations"][1:]] == [
        ("condor_userprio -setfloor b@x 10 -duration 86400", False),
        ("condor_userprio -setfloor c@x 10 -duration 86400", False),
        ("condor_userprio -delete old@x", False),
        (None, True),
        (None, True)]


def test_render_script_exact():
    recs = _sample()
    recs = [recs[0], recs[1], recs[3], recs[4], recs[5]]
    assert render_script(recs, pool="cm.example.org", now=NOW) == VIEW_SCRIPT
    assert render_script([], now=NOW).endswith("set -e\n\n# Nothing to do.\n")
    # the report-only items are comments only: the commands are those of the changes
    commands = [ln for ln in VIEW_SCRIPT.splitlines() if ln and not ln.startswith("#")]
    assert commands == ["set -e"] + [command_text(r, "cm.example.org") for r in recs[:3]]


HOSTILE = "o'brien; rm -rf / @x y\n$(touch pwned)"


def test_script_quotes_every_name_and_argument():
    recs = [Recommendation("factor", HOSTILE, 2.5, 1.0, 86400, f"about {HOSTILE}",
                           {"starved": [HOSTILE]}),
            Recommendation("delete", HOSTILE, None, None, None, "stale", {})]
    script = render_script(recs, pool="cm; reboot", now=NOW)
    commands = [ln for ln in script.splitlines() if ln and not ln.startswith("#")]
    # the newline is written as an escape inside bash's $'...': every command is one
    # line of the script, and no part of a name can pass for a command of its own
    assert script.startswith("#!/bin/bash\n")
    assert commands == [
        "set -e",
        "condor_userprio -pool 'cm; reboot' -setfactor "
        "$'o\\'brien; rm -rf / @x y\\x0a$(touch pwned)' 2.5 -duration 86400",
        "condor_userprio -pool 'cm; reboot' -delete $'o\\'brien; rm -rf / @x y\\x0a$(touch pwned)'"]
    # bash reads back exactly the argument lists command_argv builds
    for rec, line in zip(recs, commands[1:]):
        got = subprocess.run(["bash", "-c", "printf '%s\\0' " + line.split(" ", 1)[1]],
                             capture_output=True, check=True).stdout
        assert got.split(b"\0")[:-1] == [a.encode() for a in command_argv(rec, "cm; reboot")[1:]]
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
    # report-only kinds have no command
    assert command_argv(rec("setprio", 0.5, None)) is None
    assert command_argv(rec("group", None, None), pool="p") is None
    assert command_text(rec("group", None, None)) is None
    with pytest.raises(ValueError):
        command_argv(rec("reset", None))
