"""Why our cycle and the real one disagree (core/disagreement.py, through core.compare):
each disagreeing submitter explained by a change of the pool between our capture and the
real cycle, by the real cycle's time limits, or unexplained; and the unexplained
agreement beside the raw one.

The races are the ones issue 32 saw beside a real pool (tests/test_live_shadow.py makes
them happen for real): a schedd's submitter ads reaching the collector after our capture,
jobs submitted and removed around the cycle, a running job ending and freeing its slot,
a real cycle cut by its time limits."""

from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from negotiator_ext.core.compare import compare
from negotiator_ext.core.disagreement import digest, has_job
from negotiator_ext.core.records import MatchEntry, RealCycle, SubmitterObs

CYCLE = RealCycle(time=100, end=101, duration=1.0)


def sub(name, **kw):
    return SubmitterObs(name=name, group="<none>", is_group=False, **kw)


def m(submitter, job, slot, t=None):
    return MatchEntry(job=job, submitter=submitter, slot=slot, time=t)


def pool(submitters, jobs, claimed=(), free=(), candidates=None):
    slots = {**{s: False for s in free}, **{s: True for s in claimed}}
    return digest(submitters=submitters, idle_jobs=jobs, slots=slots,
                  candidate_slots=len(slots) if candidates is None else candidates)


def run(ours, real, before, after=None, cycle=CYCLE, limits=None, **kw):
    """compare() on these; `limits`: our submitter limits by name."""
    subs = sorted({x.submitter for x in ours} | set(before["submitters"]))
    return compare(shadow_pass="p", shadow_snapshot_time=99, shadow_matches=ours,
                   shadow_submitters=[sub(n, shadow_submitter_limit=(limits or {}).get(n))
                                      for n in subs], shadow_groups=[],
                   real_cycles=[cycle], real_matches=[
                       MatchEntry(x.job, x.submitter, x.slot, time=100) for x in real],
                   digest_before=before, digest_after=after, **kw)


FREE = [f"slot{i}@h" for i in range(1, 9)]


def test_digest_keeps_job_ids_as_ranges():
    d = digest(submitters={"a@x": 3}, idle_jobs={"a@x": ["5.0", "5.1", "5.2", "7.4", "x"]},
               slots={}, candidate_slots=0)
    assert d["jobs"] == {"a@x": {"5": [[0, 2]], "7": [[4, 4]]}}
    assert has_job(d, "a@x", "5.1") and has_job(d, "a@x", "7.4")
    assert not has_job(d, "a@x", "5.3") and not has_job(d, "b@x", "5.1")


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 6), st.integers(0, 9)), max_size=40),
       st.lists(st.sampled_from(["x", "3.", ".4", "5.a", "", "7. 2"]), max_size=3))
def test_digest_ranges_hold_exactly_the_idle_ids(ids, odd):
    """Whatever the order, the repeats and the clusters' sizes (a cluster of one job
    is its own range, the others sorted and merged), the ranges hold every idle id and
    nothing else; ids without a whole-number proc are left out."""
    texts = [f"{c}.{p}" for c, p in ids] + odd
    d = digest(submitters={"a@x": len(texts)}, idle_jobs={"a@x": texts}, slots={},
               candidate_slots=0)
    held = {(c, p) for c, ranges in d["jobs"]["a@x"].items()
            for lo, hi in ranges for p in range(lo, hi + 1)}
    # (".4" is proc 4 of a cluster spelled "", "7. 2" proc 2 of cluster 7, as int reads it)
    extra = {".4": ("", 4), "7. 2": ("7", 2)}
    assert held == {(str(c), p) for c, p in ids} | {extra[t] for t in odd if t in extra}
    for ranges in d["jobs"]["a@x"].values():
        flat = [p for lo, hi in ranges for p in (lo, hi)]
        assert flat == sorted(flat) and all(b[0] > a[1] + 1 for a, b in zip(ranges, ranges[1:]))


def test_a_submitter_whose_ads_arrived_after_the_capture():
    """Issue 32's first cycle: real 8 matches of a submitter our capture had no idle jobs
    of, ours 0: the pool changed; unexplained agreement 100% where the raw one is 0."""
    before = pool({}, {}, free=FREE)
    real = [m("alice@x", f"1.{i}", FREE[i]) for i in range(8)]
    c = run([], real, before)
    assert c.count_agreement == 0.0 and c.unexplained_agreement == 1.0
    (d,) = c.disagreements
    assert (d["submitter"], d["real"], d["shadow"], d["class"], d["unexplained"]) == (
        "alice@x", 8, 0, "pool changed", 0)
    assert "alice@x had no idle jobs in our snapshot" in d["changes"][0]
    assert any("submitter ad reached the collector after our capture" in x for x in c.changes)


def test_a_job_submitted_after_the_capture_and_the_slot_it_displaced():
    """The real cycle matched alice's new job 9.0 on the slot ours gave bob's job: both
    differences come from one change."""
    before = pool({"alice@x": 1, "bob@x": 1}, {"alice@x": ["3.0"], "bob@x": ["4.0"]},
                  free=FREE[:2])
    ours = [m("alice@x", "3.0", FREE[0]), m("bob@x", "4.0", FREE[1])]
    real = [m("alice@x", "3.0", FREE[0]), m("alice@x", "9.0", FREE[1])]
    c = run(ours, real, before)
    assert c.count_agreement == 0.5 and c.unexplained_agreement == 1.0
    by = {d["submitter"]: d for d in c.disagreements}
    assert by["alice@x"]["class"] == by["bob@x"]["class"] == "pool changed"
    assert by["alice@x"]["changes"] == [
        "job 9.0 of alice@x was not idle in our snapshot (submitted after it)"]
    assert by["bob@x"]["changes"] == [
        "1 slot(s) displaced by the changes of this cycle (job 9.0 of alice@x was not idle "
        "in our snapshot (submitted after it))"]


def test_a_job_removed_before_the_cycle():
    before = pool({"alice@x": 2}, {"alice@x": ["3.0", "3.1"]}, free=FREE[:2])
    after = pool({"alice@x": 1}, {"alice@x": []}, claimed=FREE[:1], free=FREE[1:2])
    ours = [m("alice@x", "3.0", FREE[0]), m("alice@x", "3.1", FREE[1])]
    real = [m("alice@x", "3.0", FREE[0])]
    c = run(ours, real, before, after)
    (d,) = c.disagreements
    assert d["class"] == "pool changed" and d["changes"] == [
        "job 3.1 of alice@x left the queue after our capture (removed, or no longer idle)"]
    assert c.unexplained_agreement == 1.0 and c.count_agreement == 0.5
    # without the pool after the cycle, nothing says the job went: unexplained
    c = run(ours, real, before)
    assert c.disagreements[0]["class"] == "unexplained" and c.unexplained_agreement == 0.5


def test_a_slot_freed_after_the_capture():
    before = pool({"alice@x": 2}, {"alice@x": ["3.0", "3.1"]}, claimed=FREE[1:2],
                  free=FREE[:1])
    ours = [m("alice@x", "3.0", FREE[0])]
    real = [m("alice@x", "3.0", FREE[0]), m("alice@x", "3.1", FREE[1])]
    c = run(ours, real, before)
    (d,) = c.disagreements
    assert d["class"] == "pool changed"
    assert d["changes"] == [f"slot {FREE[1]} was claimed in our snapshot (its job ended since)"]


def test_a_freed_slot_the_real_cycle_gave_to_another_submitter():
    """bench_live_shadow.py: a static slot freed after our capture; the real cycle gave it
    to bob (bob's count agrees: ours gave bob the other free slot) and gave alice the slot
    ours gave bob. The freed slot explains alice's difference."""
    jobs = {"alice@x": ["3.0"], "bob@x": ["4.0"]}
    before = pool({"alice@x": 1, "bob@x": 1}, jobs, claimed=FREE[2:3], free=FREE[:1])
    ours = [m("bob@x", "4.0", FREE[0])]
    real = [m("alice@x", "3.0", FREE[0]), m("bob@x", "4.0", FREE[2])]
    c = run(ours, real, before)
    (d,) = c.disagreements
    assert (d["submitter"], d["class"]) == ("alice@x", "pool changed")
    assert d["changes"] == ["1 slot(s) displaced by the changes of this cycle (slot "
                            f"{FREE[2]} was claimed in our snapshot (its job ended since))"]
    assert c.changes == (f"slot {FREE[2]} was claimed in our snapshot (its job ended since)",)


def test_a_dynamic_slot_released_gives_its_partitionable_slot_a_match():
    before = pool({"alice@x": 1}, {"alice@x": ["3.0"]}, claimed=["slot5_1@h"],
                  free=["slot5@h"])
    after = pool({"alice@x": 0}, {}, claimed=["slot5_2@h"], free=["slot5@h"])
    c = run([], [m("alice@x", "3.0", "slot5@h")], before, after)
    (d,) = c.disagreements
    assert d["class"] == "pool changed" and "dynamic slot slot5_1@h of slot5@h was " \
        "released after our capture" in d["changes"][0]


def test_a_slot_heard_after_the_cycle_read_the_collector():
    """An aligned capture a moment late: the collector heard of a slot freed after the
    real cycle had read it; ours matched it, the real cycle could not."""
    before = digest(submitters={"cid@x": 1}, idle_jobs={"cid@x": ["28.1"]},
                    slots={"slot5@h": False}, candidate_slots=1,
                    heard={"slot5@h": 101})
    c = run([m("cid@x", "28.1", "slot5@h")], [], before)
    (d,) = c.disagreements
    assert d["class"] == "pool changed"
    assert d["changes"] == ["slot slot5@h's ad reached the collector at 101, as or after the "
                            "real cycle read it (100): our capture saw it later"]
    # heard before the cycle: the same difference is unexplained
    before["heard"]["slot5@h"] = 99
    assert run([m("cid@x", "28.1", "slot5@h")], [], before).disagreements[0]["class"] == (
        "unexplained")


def test_a_partitionable_slot_matched_beyond_its_free_cores():
    before = digest(submitters={"ann@x": 3}, idle_jobs={"ann@x": ["33.0", "33.1", "33.2"]},
                    slots={"slot2@h": False, "slot5@h": False, "slot5_1@h": True},
                    candidate_slots=2, free_cpus={"slot5@h": 0.0})
    ours = [m("ann@x", "33.0", "slot2@h")]
    real = [m("ann@x", "33.0", "slot2@h"), m("ann@x", "33.0", "slot5@h")]
    (d,) = run(ours, real, before).disagreements
    assert d["class"] == "pool changed" and d["changes"] == [
        "partitionable slot slot5@h had 0 free core(s) in our snapshot, the real cycle "
        "matched it 1 time(s) (a dynamic slot released since)"]


def test_a_job_idle_only_since_the_cycle_began():
    """An aligned capture a moment late: a job submitted as the real cycle was already
    negotiating; ours matched it, the real cycle had not seen it."""
    before = digest(submitters={"ben@x": 1}, idle_jobs={"ben@x": ["3.0"]},
                    slots={"slot4@h": False}, candidate_slots=1, recent={"3.0": 100})
    (d,) = run([m("ben@x", "3.0", "slot4@h")], [], before).disagreements
    assert d["class"] == "pool changed" and d["changes"] == [
        "job 3.0 of ben@x became idle at 100, as or after the real cycle began (100): our "
        "capture saw it later"]


def test_a_claim_ended_before_the_cycle_changes_who_comes_first():
    """A claim of bob's ended between our capture and the cycle (its slot not matched
    again): the real cycle gave the one free slot to bob, ours to alice."""
    jobs = {"alice@x": ["3.0"], "bob@x": ["4.0"]}
    before = digest(submitters={"alice@x": 1, "bob@x": 1}, idle_jobs=jobs,
                    slots={FREE[0]: False, FREE[1]: True}, candidate_slots=2, captured=95,
                    owners={FREE[1]: "bob@x"})
    after = digest(submitters={"alice@x": 1}, idle_jobs={"alice@x": ["3.0"]},
                   slots={FREE[0]: True, FREE[1]: False}, candidate_slots=2,
                   entered={FREE[1]: 97, FREE[0]: 100})
    ours, real = [m("alice@x", "3.0", FREE[0])], [m("bob@x", "4.0", FREE[0])]
    c = run(ours, real, before, after)
    assert {d["class"] for d in c.disagreements} == {"pool changed"}
    assert c.changes == (f"the claim on slot {FREE[1]} ended at 97, after our capture and "
                         "before the real cycle (its submitter's usage changed)",)
    # whose claim it was not known (a digest that did not keep it): the change reaches
    # no submitter, and explains nothing elsewhere
    del before["owners"]
    assert {d["class"] for d in run(ours, real, before, after).disagreements} == {
        "unexplained"}
    before["owners"] = {FREE[1]: "bob@x"}
    # the claim ended after the cycle: nothing explains the order
    after["entered"][FREE[1]] = 103
    assert {d["class"] for d in run(ours, real, before, after).disagreements} == {
        "unexplained"}


def test_a_job_submitted_between_capture_and_cycle_changes_the_demand():
    """bench_live_shadow.py: ann's new job raised group_a's demand between our capture
    and the cycle; the real cycle gave the free slot to ann (an older job of hers), ours
    to cid."""
    before = digest(submitters={"ann@x": 1, "cid@x": 1},
                    idle_jobs={"ann@x": ["6.0"], "cid@x": ["7.0"]},
                    slots={FREE[0]: False}, candidate_slots=1, captured=95)
    after = digest(submitters={"ann@x": 2, "cid@x": 1},
                   idle_jobs={"ann@x": ["6.0", "9.0"], "cid@x": ["7.0"]},
                   slots={FREE[0]: True}, candidate_slots=1, recent={"9.0": 98})
    ours, real = [m("cid@x", "7.0", FREE[0])], [m("ann@x", "6.0", FREE[0])]
    c = run(ours, real, before, after)
    assert {d["class"] for d in c.disagreements} == {"pool changed"}
    assert c.changes == ("job 9.0 became idle at 98, after our capture and before the real "
                         "cycle (its submitter's demand changed)",)
    after["recent"]["9.0"] = 101        # after the cycle began: no explanation
    assert {d["class"] for d in run(ours, real, before, after).disagreements} == {
        "unexplained"}


def test_a_partitionable_slot_heard_changed_before_the_cycle():
    """bench_live_shadow.py: between our capture and the cycle a dynamic slot went and
    the collector heard its partitionable slot with a core more; the real cycle gave the
    slot ours gave ben to cid."""
    jobs = {"ben@x": ["15.0", "15.1"], "cid@x": ["13.2"]}
    slots = {"slot1@h": False, "slot5@h": False}
    before = digest(submitters={"ben@x": 2, "cid@x": 1}, idle_jobs=jobs, slots=slots,
                    candidate_slots=2, free_cpus={"slot5@h": 1}, captured=95,
                    heard={"slot5@h": 93})
    after = digest(submitters={"ben@x": 1, "cid@x": 1}, idle_jobs={"ben@x": ["15.1"]},
                   slots=slots, candidate_slots=2, free_cpus={"slot5@h": 2},
                   heard={"slot5@h": 97})
    ours = [m("ben@x", "15.0", "slot1@h"), m("ben@x", "15.0", "slot5@h")]
    real = [m("ben@x", "15.0", "slot1@h"), m("cid@x", "13.2", "slot5@h")]
    c = run(ours, real, before, after)
    assert {d["class"] for d in c.disagreements} == {"pool changed"}
    assert c.changes == ("partitionable slot slot5@h had 1 free core(s) in our snapshot, 2 "
                         "when the collector heard of it at 97, before the real cycle",)
    after["heard"]["slot5@h"] = 101     # heard after the cycle began: it saw the old one
    assert {d["class"] for d in run(ours, real, before, after).disagreements} == {
        "unexplained"}


def test_a_difference_with_nothing_changed_is_unexplained():
    """The same pool on both sides, other counts: a policy difference, left unexplained
    and weighing on the unexplained agreement as on the raw one."""
    jobs = {"alice@x": ["3.0", "3.1"], "bob@x": ["4.0", "4.1"]}
    before = pool({"alice@x": 2, "bob@x": 2}, jobs, free=FREE[:2])
    after = pool({"alice@x": 1, "bob@x": 1}, {"alice@x": ["3.1"], "bob@x": ["4.1"]},
                 claimed=FREE[:2])
    ours = [m("alice@x", "3.0", FREE[0]), m("alice@x", "3.1", FREE[1])]
    real = [m("alice@x", "3.0", FREE[0]), m("bob@x", "4.0", FREE[1])]
    c = run(ours, real, before, after)
    assert {d["submitter"]: d["class"] for d in c.disagreements} == {
        "alice@x": "unexplained", "bob@x": "unexplained"}
    assert c.changes == ()
    assert c.unexplained_agreement == c.count_agreement == 0.5


def test_a_real_cycle_out_of_time_is_compared_within_what_it_reached():
    """Issue 32's 100k pool: the real cycle stopped after a few matches, ours served
    everyone; the submitters it did not reach, and the one whose turn it cut, are out of
    time, named with whether our prediction said so."""
    cut = RealCycle(time=100, end=260, duration=160.0, submitters_out_of_time=("b@x",),
                    schedds_out_of_time=())
    before = pool({"a@x": 2, "b@x": 3, "c@x": 2},
                  {"a@x": ["1.0", "1.1"], "b@x": ["2.0", "2.1", "2.2"], "c@x": ["3.0", "3.1"]},
                  free=FREE[:7])
    ours = [m("a@x", "1.0", FREE[0]), m("a@x", "1.1", FREE[1]), m("b@x", "2.0", FREE[2]),
            m("b@x", "2.1", FREE[3]), m("b@x", "2.2", FREE[4]), m("c@x", "3.0", FREE[5]),
            m("c@x", "3.1", FREE[6])]
    real = ours[:3]
    c = run(ours, real, before, cycle=cut,
            time_limits={"submitters_out_of_time": ["b@x"], "submitters_not_reached": []})
    by = {d["submitter"]: d for d in c.disagreements}
    assert set(by) == {"b@x", "c@x"}
    assert by["b@x"]["class"] == by["c@x"]["class"] == "out of time"
    assert "its turn cut; predicted by ours" in by["b@x"]["changes"][0]
    assert "not reached; not predicted by ours" in by["c@x"]["changes"][0]
    assert c.unexplained_agreement == 1.0 and c.count_agreement == pytest.approx(3 / 7)


def test_a_pool_size_that_changed_explains_the_limits_it_changed():
    cycle = RealCycle(time=100, end=101, duration=1.0, candidate_slots=6)
    jobs = {"a@x": [f"1.{i}" for i in range(4)], "b@x": [f"2.{i}" for i in range(4)]}
    before = pool({"a@x": 4, "b@x": 4}, jobs, free=FREE[:8])
    ours = [m("a@x", f"1.{i}", FREE[i]) for i in range(4)] + [
        m("b@x", f"2.{i}", FREE[4 + i]) for i in range(4)]
    real = ours[:4] + ours[4:6]
    after = pool({"a@x": 0, "b@x": 2}, {"b@x": ["2.2", "2.3"]}, claimed=FREE[:6])
    c = run(ours, real, before, after, cycle=cycle, limits={"b@x": 4.0},
            real_submitters=[sub("b@x", real_limit=2.0)])
    (d,) = c.disagreements
    assert d["class"] == "pool changed"
    assert d["changes"] == ["the real cycle counted 6 candidate slots, our snapshot 8 (the "
                            "pool's size changed)"]
    # the same counts with the same pool size: unexplained
    c = run(ours, real, before, after, cycle=RealCycle(time=100, end=101, duration=1.0,
                                                       candidate_slots=8),
            limits={"b@x": 4.0}, real_submitters=[sub("b@x", real_limit=2.0)])
    assert c.disagreements[0]["class"] == "unexplained"


def test_a_pool_size_that_changed_explains_no_more_than_the_limit_changed():
    """A slot more or less in the pool changes a submitter's limit by its share of it:
    the difference beyond that (10 slots, a limit moved by one) stays unexplained. Before,
    any change of the pool's size explained every difference of a submitter at its share
    limit, or whose limits differed at all (a real limit unknown counted as differing)."""
    cycle = RealCycle(time=100, end=101, duration=1.0, candidate_slots=99,
                      submitters_share_limit=("a@x",))
    slots = [f"slot{i}@h" for i in range(100)]
    jobs = {"a@x": [f"1.{i}" for i in range(50)], "b@x": [f"2.{i}" for i in range(50)]}
    before = pool({"a@x": 50, "b@x": 50}, jobs, free=slots)
    ours = [m("a@x", f"1.{i}", slots[i]) for i in range(50)]
    real = ours[:40]
    # the real limit unknown, the real cycle stopped a at its share limit: its share of
    # the slot that went, one match
    c = run(ours, real, before, cycle=cycle, limits={"a@x": 50.0})
    (d,) = c.disagreements
    assert (d["class"], d["unexplained"]) == ("unexplained", 9)
    assert "the pool's size changed" in d["changes"][0]
    # both limits known: their difference
    c = run(ours, real, before, cycle=cycle, limits={"a@x": 50.0},
            real_submitters=[sub("a@x", real_limit=49.5)])
    assert c.disagreements[0]["unexplained"] == 9
    c = run(ours, real, before, cycle=cycle, limits={"a@x": 50.0},
            real_submitters=[sub("a@x", real_limit=40.0)])
    assert c.disagreements[0]["class"] == "pool changed"
    # not at its share limit, the real one unknown: nothing says the limit bound it
    c = run(ours, real, before, cycle=RealCycle(time=100, end=101, duration=1.0,
                                                candidate_slots=99), limits={"a@x": 50.0})
    assert c.disagreements[0]["unexplained"] == 10


def test_without_a_digest_only_the_rows_speak():
    """A loop restarted between the passes kept no digest of the compared one: a real
    match cannot be told from a prediction missed; agreement figures still come."""
    ours = [m("alice@x", "3.0", FREE[0])]
    real = [m("bob@x", "4.0", FREE[0])]
    c = compare(shadow_pass="p", shadow_snapshot_time=99, shadow_matches=ours,
                shadow_submitters=[sub("alice@x")], shadow_groups=[], real_cycles=[CYCLE],
                real_matches=[MatchEntry("4.0", "bob@x", FREE[0], time=100)])
    assert [d["class"] for d in c.disagreements] == ["unexplained", "unexplained"]
    assert c.unexplained_agreement == c.count_agreement == 0.0


def test_no_matchlog_no_explanation():
    c = compare(shadow_pass="p", shadow_snapshot_time=99, shadow_matches=[],
                shadow_submitters=[], shadow_groups=[],
                real_cycles=[RealCycle(time=100, end=101, duration=1.0, matches=3)],
                real_matches=None, aligned=True)
    assert c.unexplained_agreement is None and c.disagreements == () and c.aligned is True


def test_the_pass_line_names_each_class_and_its_first_change():
    from negotiator_ext.core.records import PassRecord
    from negotiator_ext.views.ledger import summary_line
    before = pool({}, {}, free=FREE)
    c = run([], [m("alice@x", f"1.{i}", FREE[i]) for i in range(2)], before, aligned=True)
    rec = PassRecord(uuid="1234567890", pool="p", started_at=1.0, finished_at=2.0,
                     snapshot_time=1, status="complete", reason=None, real_cycle_time=None,
                     real_accountant_time=None, shadow_duration=0.1, capture_duration=0.1,
                     comparison=c)
    line = summary_line(rec)
    assert "per-submitter counts 0%, unexplained only 100%" in line
    assert "captured as the real cycle started" in line
    assert line.endswith("(pool changed: alice@x (submitter alice@x had no idle jobs in our "
                         "snapshot (its submitter ad reached the collector after our "
                         "capture)))")


def grouped(ours, real, before, after, groups):
    """`run` with each submitter in its accounting group."""
    subs = sorted({x.submitter for x in ours} | set(before["submitters"]))
    return compare(shadow_pass="p", shadow_snapshot_time=99, shadow_matches=ours,
                   shadow_submitters=[SubmitterObs(name=n, group=groups[n], is_group=False)
                                      for n in subs], shadow_groups=[],
                   real_cycles=[CYCLE], real_matches=[
                       MatchEntry(x.job, x.submitter, x.slot, time=100) for x in real],
                   digest_before=before, digest_after=after)


GROUPS = {"ann@x": "group_a", "ben@x": "group_b", "cid@x": "group_b"}


def arrivals(submitter, n, t=98):
    """`n` jobs of `submitter` idle since `t`, between our capture (95) and the cycle."""
    return {submitter: [f"9.{i}" for i in range(n)]}, {f"9.{i}": t for i in range(n)}


def test_changes_in_one_group_do_not_hide_a_difference_in_another():
    """Five jobs of ann (group_a) arrived between our capture and the cycle; ann's count
    agrees. In group_b, whose totals agree, the real cycle gave ben the two slots ours gave
    cid: a difference of rules (who comes first in group_b) that no change of group_a can
    make, as nothing moved between the groups. It stays unexplained, however many changes
    the pool saw elsewhere; arrivals of cid's own would explain it."""
    before = digest(submitters={"ann@x": 1, "ben@x": 2, "cid@x": 2},
                    idle_jobs={"ann@x": ["6.0"], "ben@x": ["4.0", "4.1"],
                               "cid@x": ["7.0", "7.1"]},
                    slots={s: False for s in FREE[:3]}, candidate_slots=3, captured=95)
    jobs, recent = arrivals("ann@x", 5)
    after = digest(submitters={"ann@x": 5, "cid@x": 2},
                   idle_jobs={**jobs, "cid@x": ["7.0", "7.1"]},
                   slots={s: True for s in FREE[:3]}, candidate_slots=3, recent=recent)
    ours = [m("ann@x", "6.0", FREE[0]), m("cid@x", "7.0", FREE[1]), m("cid@x", "7.1", FREE[2])]
    real = [m("ann@x", "6.0", FREE[0]), m("ben@x", "4.0", FREE[1]), m("ben@x", "4.1", FREE[2])]
    c = grouped(ours, real, before, after, GROUPS)
    assert len(c.changes) == 5
    assert {d["submitter"]: (d["class"], d["unexplained"]) for d in c.disagreements} == {
        "ben@x": ("unexplained", 2), "cid@x": ("unexplained", 2)}
    assert c.unexplained_agreement == pytest.approx(c.count_agreement) == pytest.approx(1 / 3)
    # the same arrivals for cid, in group_b: each reorders group_b by a slot's worth
    jobs, recent = arrivals("cid@x", 5)
    after = digest(submitters={"cid@x": 7}, idle_jobs={"cid@x": ["7.0", "7.1"] + jobs["cid@x"]},
                   slots={s: True for s in FREE[:3]}, candidate_slots=3, recent=recent)
    c = grouped(ours, real, before, after, GROUPS)
    assert {d["class"] for d in c.disagreements} == {"pool changed"}
    assert c.unexplained_agreement == 1.0


def test_changes_move_slots_across_groups_only_as_far_as_the_groups_totals_differ():
    """Five jobs of ann arrived (group_a's demand rose, and with it its share of the
    surplus): the real cycle gave ann a slot ours gave cid (group_a +1, group_b -1: one
    slot crossed), and in group_b gave ben two more slots ours gave cid. One of cid's three
    is explained by the slot that crossed; the other two, and ben's two, are a difference
    within group_b that group_a's changes cannot make."""
    before = digest(submitters={"ann@x": 1, "ben@x": 2, "cid@x": 3},
                    idle_jobs={"ann@x": ["6.0"], "ben@x": ["4.0", "4.1"],
                               "cid@x": ["7.0", "7.1", "7.2"]},
                    slots={s: False for s in FREE[:3]}, candidate_slots=3, captured=95)
    jobs, recent = arrivals("ann@x", 5)
    after = digest(submitters={"ann@x": 5, "cid@x": 3},
                   idle_jobs={**jobs, "cid@x": ["7.0", "7.1", "7.2"]},
                   slots={s: True for s in FREE[:3]}, candidate_slots=3, recent=recent)
    ours = [m("cid@x", f"7.{i}", FREE[i]) for i in range(3)]
    real = [m("ann@x", "6.0", FREE[0]), m("ben@x", "4.0", FREE[1]), m("ben@x", "4.1", FREE[2])]
    c = grouped(ours, real, before, after, GROUPS)
    by = {d["submitter"]: d for d in c.disagreements}
    assert by["ann@x"]["class"] == "pool changed"
    assert "displaced by the changes of this cycle (job 9.0 became idle at 98" in (
        by["ann@x"]["changes"][0])
    assert (by["cid@x"]["class"], by["cid@x"]["unexplained"]) == ("unexplained", 2)
    assert (by["ben@x"]["class"], by["ben@x"]["unexplained"]) == ("unexplained", 2)
    assert c.count_agreement == 0.0
    assert c.unexplained_agreement == pytest.approx(1 / 3)
    # the same with ben's two matched by ours too: only the slot that crossed differs,
    # and it is explained on both sides
    ours = [m("cid@x", "7.0", FREE[0]), m("ben@x", "4.0", FREE[1]), m("ben@x", "4.1", FREE[2])]
    c = grouped(ours, real, before, after, GROUPS)
    assert {d["submitter"]: d["class"] for d in c.disagreements} == {
        "ann@x": "pool changed", "cid@x": "pool changed"}
    assert c.unexplained_agreement == 1.0


def test_the_turn_a_schedds_deadline_cut_is_out_of_time():
    """bench_real_pool.py --shape 100k: the schedd ran out of time (MAX_TIME_PER_SCHEDD)
    during b's turn; the negotiator names the schedd (ScheddsOutOfTime), not b, whose
    turn ended early at the deadline ("Reached deadline ... stopping"), and skips the
    rest. b is the last submitter the real cycle matched for: out of time, like c, which
    it never reached. a, served before and given less than ours, stays unexplained."""
    cut = RealCycle(time=100, end=262, duration=162.0, submitters_out_of_time=(),
                    schedds_out_of_time=("schedd@h",))
    jobs = {"a@x": ["1.0", "1.1", "1.2"], "b@x": ["2.0", "2.1", "2.2"], "c@x": ["3.0", "3.1"]}
    before = pool({"a@x": 3, "b@x": 3, "c@x": 2}, jobs, free=FREE)
    ours = [m("a@x", "1.0", FREE[0]), m("a@x", "1.1", FREE[1]), m("b@x", "2.0", FREE[2]),
            m("b@x", "2.1", FREE[3]), m("b@x", "2.2", FREE[4]), m("c@x", "3.0", FREE[5]),
            m("c@x", "3.1", FREE[6])]
    real = [m("a@x", "1.0", FREE[0]), m("b@x", "2.0", FREE[2])]
    c = run(ours, real, before, cycle=cut,
            time_limits={"schedds_out_of_time": ["schedd@h"], "submitters_out_of_time": [],
                         "submitters_not_reached": ["c@x"]})
    by = {d["submitter"]: d for d in c.disagreements}
    assert {k: d["class"] for k, d in by.items()} == {
        "a@x": "unexplained", "b@x": "out of time", "c@x": "out of time"}
    assert "its turn cut: the last it matched for; not predicted by ours" in (
        by["b@x"]["changes"][0])
    assert "not reached; predicted by ours" in by["c@x"]["changes"][0]
    assert c.unexplained_agreement == pytest.approx(1 - 1 / 7)
    # no prediction made (a pass before any real cycle gave the negotiator's cost)
    c = run(ours, real, before, cycle=cut)
    assert [d["changes"][0].rsplit("(", 1)[1] for d in c.disagreements if d["class"] == "out of time"] == [
        "its turn cut: the last it matched for; ours made no time-limit prediction)",
        "not reached; ours made no time-limit prediction)"]
    # the same cycle not cut: b's difference is one of rules
    whole = RealCycle(time=100, end=262, duration=162.0)
    assert {d["submitter"]: d["class"] for d in run(ours, real, before, cycle=whole)
            .disagreements}["b@x"] == "unexplained"
    # cut by c's own deadline only (named, as the next spin skipped c): b's turn was not
    # the one cut
    by_c = RealCycle(time=100, end=262, duration=162.0, submitters_out_of_time=("c@x",))
    assert {d["submitter"]: d["class"] for d in run(ours, real, before, cycle=by_c)
            .disagreements} == {"a@x": "unexplained", "b@x": "unexplained",
                                "c@x": "out of time"}


def _three_submitters(on: dict) -> dict:
    """The digest before a cycle: a, b and c with 3, 3 and 2 idle jobs at the schedds
    `on` names, every slot of FREE free."""
    jobs = {"a@x": ["1.0", "1.1", "1.2"], "b@x": ["2.0", "2.1", "2.2"],
            "c@x": ["3.0", "3.1"]}
    slots = {s: False for s in FREE}
    return digest(submitters={"a@x": 3, "b@x": 3, "c@x": 2}, idle_jobs=jobs,
                  slots=slots, candidate_slots=len(slots), schedds=on)


def test_each_schedd_out_of_time_cut_the_turn_running_on_it():
    """bench_real_pool.py --shape 100k-1M: four schedds, each out of time
    (MAX_TIME_PER_SCHEDD), each deadline cutting the turn running on it. Here two: a's
    turn on schedd A and b's on schedd B, then c (on A, served before both) is matched
    less too. The MatchLog does not name the schedd: the digest's submitter -> schedds
    says which turn each deadline cut, the last matched for on each. Without it (a
    digest from before the map was kept) only the last of all is taken as cut."""
    cut = RealCycle(time=100, end=262, duration=162.0, submitters_out_of_time=(),
                    schedds_out_of_time=("A@h", "B@h"))
    before = _three_submitters({"a@x": ["A@h"], "b@x": ["B@h"], "c@x": ["A@h"]})
    ours = [m("c@x", "3.0", FREE[0]), m("c@x", "3.1", FREE[1]), m("a@x", "1.0", FREE[2]),
            m("a@x", "1.1", FREE[3]), m("a@x", "1.2", FREE[4]), m("b@x", "2.0", FREE[5]),
            m("b@x", "2.1", FREE[6]), m("b@x", "2.2", FREE[7])]
    real = [m("c@x", "3.0", FREE[0]), m("a@x", "1.0", FREE[2]), m("b@x", "2.0", FREE[5])]
    c = run(ours, real, before, cycle=cut)
    by = {d["submitter"]: d for d in c.disagreements}
    assert {k: d["class"] for k, d in by.items()} == {
        "a@x": "out of time", "b@x": "out of time", "c@x": "unexplained"}
    assert "its turn cut: the last it matched for" in by["a@x"]["changes"][0]
    # an older digest, without the map: b's turn alone (the last of all) is cut
    del before["schedds"]
    assert {d["submitter"]: d["class"] for d in run(ours, real, before, cycle=cut)
            .disagreements} == {
        "a@x": "unexplained", "b@x": "out of time", "c@x": "unexplained"}


def test_a_later_turn_the_negotiator_log_names_as_skipped_is_out_of_time():
    """bench_real_pool.py --shape 100k-1M, the second real cycle: group_94.u0994 was
    served 21 p-slots of cost 8 in its first turn (168 of its limit 170), then its schedd
    ran out of time before its later turn ("Negotiation with group_94.u0994 skipped
    because of time limits: 120 seconds spent on this schedd"), which ours served (22).
    It was neither the last matched for on its schedd nor unreached: the NegotiatorLog's
    line names it, and our prediction says ours served it in two turns, the first of
    one match here (`first_turn_matches`). A cut cycle names every submitter it skipped,
    so the skip alone explains nothing: c, skipped too but served by ours in one turn
    (not listed), stays unexplained; so does a without the log's line, given less than
    our first turn, or with no prediction."""
    before = _three_submitters({"a@x": ["A@h"], "b@x": ["A@h"], "c@x": ["A@h"]})
    ours = [m("a@x", "1.0", FREE[0]), m("a@x", "1.1", FREE[1]), m("c@x", "3.0", FREE[2]),
            m("c@x", "3.1", FREE[3]), m("b@x", "2.0", FREE[4]), m("b@x", "2.1", FREE[5])]
    # a's second match and c's second were not made; b was matched for last
    real = [m("a@x", "1.0", FREE[0]), m("c@x", "3.0", FREE[2]), m("b@x", "2.0", FREE[4])]
    logged = RealCycle(time=100, end=262, duration=162.0, schedds_out_of_time=("A@h",),
                       submitters_skipped=("a@x", "c@x"))
    predicted = {"submitters_out_of_time": [], "schedds_out_of_time": ["A@h"],
                 "first_turn_matches": {"a@x": 1}}

    def classes(cycle, time_limits=predicted) -> dict:
        return {d["submitter"]: d["class"] for d in run(
            ours, real, before, cycle=cycle, time_limits=time_limits).disagreements}

    c = run(ours, real, before, cycle=logged, time_limits=predicted)
    by = {d["submitter"]: d for d in c.disagreements}
    assert {k: d["class"] for k, d in by.items()} == {
        "a@x": "out of time", "b@x": "out of time", "c@x": "unexplained"}
    assert "(a later turn skipped, as the NegotiatorLog says; not predicted by ours)" in (
        by["a@x"]["changes"][0])
    assert "its turn cut: the last it matched for" in by["b@x"]["changes"][0]
    assert c.unexplained_agreement == pytest.approx(1 - 1 / 6)
    unlogged = RealCycle(time=100, end=262, duration=162.0, schedds_out_of_time=("A@h",))
    assert classes(unlogged) == {
        "a@x": "unexplained", "b@x": "out of time", "c@x": "unexplained"}
    # a's first turn of ours two matches: the real cycle gave it less than that
    assert classes(logged, dict(predicted, first_turn_matches={"a@x": 2}))["a@x"] == \
        "unexplained"
    assert classes(logged, None)["a@x"] == "unexplained"        # no prediction made
    # a skip named in a cycle no time limit cut (no schedd, submitter or cycle out of
    # time) explains nothing
    uncut = RealCycle(time=100, end=262, duration=162.0, submitters_skipped=("a@x",))
    assert classes(uncut)["a@x"] == "unexplained"


def test_a_cycle_cut_by_max_time_per_cycle_is_out_of_time():
    """NEGOTIATOR_MAX_TIME_PER_CYCLE names no submitter or schedd: the negotiator skips
    every later turn and ends the one running at the deadline. A real cycle whose phases
    took the limit (our prediction read it from the config) is cut: b, the last it
    matched for, and c, never reached, are out of time; a stays unexplained. Phases short
    of the limit (the rest of the cycle after them), or no limit known: not cut."""
    jobs = {"a@x": ["1.0", "1.1", "1.2"], "b@x": ["2.0", "2.1", "2.2"], "c@x": ["3.0", "3.1"]}
    before = pool({"a@x": 3, "b@x": 3, "c@x": 2}, jobs, free=FREE)
    ours = [m("a@x", "1.0", FREE[0]), m("a@x", "1.1", FREE[1]), m("b@x", "2.0", FREE[2]),
            m("b@x", "2.1", FREE[3]), m("b@x", "2.2", FREE[4]), m("c@x", "3.0", FREE[5]),
            m("c@x", "3.1", FREE[6])]
    real = [m("a@x", "1.0", FREE[0]), m("b@x", "2.0", FREE[2])]
    limits = {"limits": {"NEGOTIATOR_MAX_TIME_PER_CYCLE": 60}, "submitters_out_of_time": [],
              "schedds_out_of_time": [], "submitters_not_reached": []}
    cut = RealCycle(time=100, end=162, duration=62.0, phase_durations=(1.0, 0.5, 0.5, 58.5))
    c = run(ours, real, before, cycle=cut, time_limits=limits)
    assert {d["submitter"]: d["class"] for d in c.disagreements} == {
        "a@x": "unexplained", "b@x": "out of time", "c@x": "out of time"}
    assert c.unexplained_agreement == pytest.approx(1 - 1 / 7)
    short = RealCycle(time=100, end=162, duration=62.0, phase_durations=(1.0, 0.5, 0.5, 50.0))
    for cycle, known in ((short, limits), (cut, {})):
        assert {d["submitter"]: d["class"] for d in run(ours, real, before, cycle=cycle,
                                                        time_limits=known).disagreements} == {
            "a@x": "unexplained", "b@x": "unexplained", "c@x": "unexplained"}
    # without its phases, the whole duration counts
    whole = RealCycle(time=100, end=162, duration=62.0)
    assert {d["submitter"]: d["class"] for d in run(ours, real, before, cycle=whole,
                                                    time_limits=limits).disagreements}[
        "c@x"] == "out of time"


class Counted(dict):
    """A digest's table that counts how often it is walked whole."""

    walks = 0

    def _walk(self):
        Counted.walks += 1

    def __iter__(self):
        self._walk()
        return super().__iter__()

    def items(self):
        self._walk()
        return super().items()

    def values(self):
        self._walk()
        return super().values()

    def keys(self):
        self._walk()
        return super().keys()


def test_the_digests_are_walked_once_not_once_a_match():
    """bench_real_pool.py --shape 100k: each real match walked the 100,000 slots (is a
    dynamic slot of its partitionable slot released?) and each of our 96,000 matches the
    real cycle did not make walked the 1,000 submitters' idle jobs (did its job leave
    the queue?): 197 s of the comparing pass. Each table is walked a bounded number of
    times, however many matches there are."""
    n = 60
    slots = Counted({f"slot1@h{i}": False for i in range(2 * n)})
    jobs = {f"u{k}@x": [f"{k}.{p}" for p in range(2)] for k in range(n)}
    before = digest(submitters={s: 2 for s in jobs}, idle_jobs=jobs, slots={},
                    candidate_slots=2 * n)
    before["slots"] = slots
    after = digest(submitters={}, idle_jobs={}, slots={}, candidate_slots=2 * n)
    after["jobs"] = Counted(before["jobs"])
    ours = [m(f"u{k}@x", f"{k}.{p}", f"slot1@h{2 * k + p}") for k in range(n) for p in range(2)]
    real = ours[::2]
    Counted.walks = 0
    c = run(ours, real, before, after)
    assert len(c.disagreements) == n
    assert Counted.walks <= 4
