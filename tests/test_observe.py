"""Reading what the real negotiator did (adapters/observe.py): the negotiator ad's cycle
history, the MatchLog, and one pass's real and shadow figures per principal, on the
recorded real-pool fixtures and on small made-up inputs."""

from __future__ import annotations

import dataclasses
import datetime
import json
from collections import Counter

import classad2
import pytest
from hypothesis import given, settings, strategies as st

from conftest import FIXTURES, SCENARIOS
from negotiator_ext.adapters.adfiles import read_ads
from negotiator_ext.adapters.observe import observe_pass, read_matchlog, real_cycles
from negotiator_ext.core.records import GroupObs, MatchEntry, RealCycle, SubmitterObs
from negotiator_ext.cycle import run_cycle
from negotiator_ext.errors import InputError
from negotiator_ext.pool import load_pool

UTC = datetime.timezone.utc
HGQ = "hgq_nested_hep_lep_surplus"
SCHEDD = "<127.0.0.1:37749?addrs=127.0.0.1-37749&alias=vm>"


def summary(scenario):
    return json.loads((FIXTURES / scenario / "expected" / "summary.json").read_text())


def meta(scenario):
    return json.loads((FIXTURES / scenario / "meta.json").read_text())


def negotiator_ad(scenario):
    (ad,) = read_ads(FIXTURES / scenario / "expected" / "negotiator.ads")
    return ad


# ---- real_cycles ---------------------------------------------------------------------

def test_real_cycles_exact_numbers_of_one_fixture():
    cycles = real_cycles(negotiator_ad(HGQ))
    assert cycles == [
        RealCycle(time=1795265266, end=1795265266, duration=0.0,
                  phase_durations=(0.0, 0.0, 0.0, 0.0), matches=27, rejections=6,
                  active_submitters=3, idle_jobs=52, candidate_slots=40,
                  submitters_share_limit=("group_chemistry.curie@refcondor.local",
                                          "group_physics.hep.higgs@refcondor.local",
                                          "group_physics.lep.fermi@refcondor.local")),
        RealCycle(time=1795265253, end=1795265253, duration=0.0,
                  phase_durations=(0.0, 0.0, 0.0, 0.0), matches=0, rejections=0,
                  active_submitters=0, idle_jobs=0, candidate_slots=40),
        RealCycle(time=1795265251, end=1795265251, duration=0.0,
                  phase_durations=(0.0, 0.0, 0.0, 0.0), matches=0, rejections=0,
                  active_submitters=0, idle_jobs=0, candidate_slots=0),
    ]


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_real_cycles_of_every_fixture(scenario):
    cycles = real_cycles(negotiator_ad(scenario))
    exp = summary(scenario)
    assert len(cycles) == 3
    assert [c.time for c in cycles] == sorted((c.time for c in cycles), reverse=True)
    newest = cycles[0]
    assert newest.time == meta(scenario)["captured_at"]
    assert newest.matches == len(exp["matches"])
    assert newest.rejections == sum(exp["rejected_by_reason"].values())
    assert newest.active_submitters == exp["cycle"]["submitter_ads"]
    assert newest.end >= newest.time
    assert set(newest.submitters_share_limit) <= set(exp["submitter_limits"])


def test_pslot_cycle_lasted_one_second():
    c = real_cycles(negotiator_ad("pslot_consumption_policy_cpu"))[0]
    assert (c.time, c.end, c.duration, c.phase_durations) == \
        (1795265291, 1795265292, 1.0, (1.0, 0.0, 0.0, 0.0))
    assert c.submitters_share_limit == ("bob@refcondor.local",)


def test_real_cycles_from_a_plain_dict():
    ad = {
        "LastNegotiationCycleTime0": 200, "lastnegotiationcycleend0": 203,
        "LastNegotiationCycleMatches0": 4, "LastNegotiationCycleDuration0": 3,
        "LastNegotiationCycleSubmittersFailed0": "a@x,b@x , c@x",
        "LastNegotiationCycleScheddsOutOfTime0": "schedd1@h",
        "LastNegotiationCycleSubmittersOutOfTime0": "",
        "LastNegotiationCycleRejections0": "many",          # not a number
        "LastNegotiationCycleTime1": 0,                      # never filled
        "LastNegotiationCycleMatches1": 9,
        "LastNegotiationCycleMatches2": 7,                   # no Time2 at all
        "LastNegotiationCycleTime3": 100,
    }
    cycles = real_cycles(ad)
    assert [c.time for c in cycles] == [200, 100]
    c0 = cycles[0]
    assert (c0.end, c0.matches, c0.duration, c0.rejections) == (203, 4, 3.0, None)
    assert c0.submitters_failed == ("a@x", "b@x", "c@x")
    assert c0.schedds_out_of_time == ("schedd1@h",)
    assert c0.submitters_out_of_time == ()
    assert cycles[1] == RealCycle(time=100, end=None, duration=None)


def test_real_cycles_of_a_classad_ad_without_history():
    assert real_cycles(classad2.ClassAd({"Name": "neg", "MyType": "Negotiator"})) == []


# ---- read_matchlog -------------------------------------------------------------------

@pytest.mark.parametrize("scenario", SCENARIOS)
def test_matchlog_of_every_fixture(scenario):
    exp = summary(scenario)
    cycle = real_cycles(negotiator_ad(scenario))[0]
    path = FIXTURES / scenario / "expected" / "matchlog.txt"
    matches, rejected = read_matchlog(path, tz=UTC)
    assert len(matches) == len(exp["matches"]) == cycle.matches
    assert rejected == len(exp["rejected"]) == cycle.rejections
    assert Counter((m.job, m.submitter, m.slot, m.preempting) for m in matches) == \
        Counter((m["job"], m["submitter"], m["slot"], m["preempting"]) for m in exp["matches"])
    assert all(cycle.time <= m.time <= cycle.end for m in matches)
    # the same, read backwards from the end, when a window is given
    assert read_matchlog(path, since=cycle.time, until=cycle.end, tz=UTC) == (matches, rejected)
    # windows that exclude them
    assert read_matchlog(path, since=cycle.end + 1, tz=UTC) == ([], 0)
    assert read_matchlog(path, until=cycle.time - 1, tz=UTC) == ([], 0)
    assert read_matchlog(path, since=cycle.time - 100, until=cycle.time - 1, tz=UTC) == ([], 0)


def test_matchlog_line_fields():
    path = FIXTURES / "preempt_priority" / "expected" / "matchlog.txt"
    matches, _ = read_matchlog(path, tz=UTC)
    assert matches[0] == MatchEntry(job="163.0", submitter="alice@refcondor.local",
                                    slot="slot1@busy008.refcondor.local",
                                    preempting="bob@refcondor.local", time=1795265317)
    path = FIXTURES / "pslot_consumption_policy_cpu" / "expected" / "matchlog.txt"
    matches, _ = read_matchlog(path, tz=UTC)
    assert [m.slot for m in matches] == ["slot1@vm"] * 5
    assert {m.time for m in matches} == {1795265292}
    assert all(m.preempting is None for m in matches)


def test_matchlog_time_zone(utc):
    path = FIXTURES / HGQ / "expected" / "matchlog.txt"
    in_utc, _ = read_matchlog(path, tz=UTC)
    assert read_matchlog(path)[0] == in_utc                 # this host's zone, here UTC
    assert read_matchlog(path, tz="UTC")[0] == in_utc
    central, _ = read_matchlog(path, tz=datetime.timezone(datetime.timedelta(hours=-6)))
    assert [m.time for m in central] == [m.time + 6 * 3600 for m in in_utc]
    with pytest.raises(InputError, match="No/Such_Zone"):
        read_matchlog(path, tz="No/Such_Zone")


def matched(t: str, job="1.0", sub="u@x", slot="slot1@h", victim="none", startd="<1.2.3.4:5>"):
    return f"{t} Matched {job} {sub} {SCHEDD} preempting {victim} {startd} {slot}\n"


def test_matchlog_other_time_formats_and_headers(tmp_path):
    p = tmp_path / "MatchLog"
    p.write_text(
        matched("2026-11-21 12:47:46", job="1.0")
        + matched("2026-11-21T12:47:47.123", job="2.0")
        + "11/21/26 12:47:48.500 (pid:4242) (D_MATCH) Matched 3.0 u@x " + SCHEDD
        + " preempting v@x (AccountingGroup=grp.v@x) <1.2.3.4:5> slot2@h (offline)\n"
        + "1795265269 Matched 4.0 u@x " + SCHEDD + " preempting none <1.2.3.4:5> slot3@h\r\n"
        + "11/21/26 12:47:50 Rejected 5.0 u@x " + SCHEDD + ": no match found\n"
        + "\n"
        + "garbage line\n"
        + "11/21/26 12:47:51 ******** something else ********\n"
        + "13/45/26 12:47:52 Matched 6.0 u@x " + SCHEDD + " preempting none <a> s@h\n"
        + "11/21/26 12:47:53 Matched 7.0 u@x\n")
    stats = {}
    matches, rejected = read_matchlog(p, tz=UTC, stats=stats)
    assert [(m.job, m.time, m.slot, m.preempting) for m in matches] == [
        ("1.0", 1795265266, "slot1@h", None),
        ("2.0", 1795265267, "slot1@h", None),
        ("3.0", 1795265268, "slot2@h", "v@x"),
        ("4.0", 1795265269, "slot3@h", None),
    ]
    assert rejected == 1
    assert stats == {"unparsed": 4}     # garbage, other message, bad date, short Matched


def test_matchlog_missing_or_unreadable(tmp_path):
    missing = tmp_path / "nope" / "MatchLog"
    with pytest.raises(InputError) as err:
        read_matchlog(missing)
    assert str(missing) in str(err.value)
    with pytest.raises(InputError) as err:
        read_matchlog(tmp_path, since=0)
    assert str(tmp_path) in str(err.value)


def test_large_matchlog_is_read_from_its_end(tmp_path):
    """Lines no reader of the tail could reach are unreadable: a read with `since` near
    the end never meets them, a full read counts every one."""
    base = datetime.datetime(2026, 11, 21, 0, 0, 0, tzinfo=UTC)
    t0 = int(base.timestamp())

    def stamp(t):
        return datetime.datetime.fromtimestamp(t, UTC).strftime("%m/%d/%y %H:%M:%S")

    head = "this line is not a MatchLog line at all, padding padding padding\n" * 20000
    old = "".join(matched(stamp(t0 + i // 10), job=f"{i}.0") for i in range(20000))
    recent_start = t0 + 5000
    recent = "".join(
        matched(stamp(recent_start + i // 10), job=f"{i}.1", slot=f"slot{i % 7}@h")
        + ("" if i % 50 else f"{stamp(recent_start + i // 10)} Rejected {i}.1 u@x {SCHEDD}: no match found\n")
        for i in range(3000))
    p = tmp_path / "MatchLog"
    p.write_text(head + old + recent)
    assert p.stat().st_size > 4_000_000

    stats = {}
    tail, rejected = read_matchlog(p, since=recent_start, tz=UTC, stats=stats)
    assert stats == {"unparsed": 0}
    assert [m.job for m in tail] == [f"{i}.1" for i in range(3000)]
    assert rejected == 60
    assert tail[0].time == recent_start and tail[-1].time == recent_start + 299

    # the same window, read forwards through the whole file
    stats = {}
    everything, all_rejected = read_matchlog(p, tz=UTC, stats=stats)
    assert stats == {"unparsed": 20000}
    assert len(everything) == 23000 and all_rejected == 60
    assert [m for m in everything if m.time >= recent_start] == tail

    # a window inside the tail, across read blocks
    part, _ = read_matchlog(p, since=recent_start + 100, until=recent_start + 149, tz=UTC)
    assert [m.job for m in part] == [f"{i}.1" for i in range(1000, 1500)]


def test_matchlog_window_before_the_rotation_reads_the_old_log(tmp_path):
    (tmp_path / "MatchLog.old").write_text(
        matched("11/21/26 12:00:00", job="1.0") + matched("11/21/26 12:00:05", job="2.0"))
    (tmp_path / "MatchLog").write_text(matched("11/21/26 12:00:10", job="3.0"))
    t = int(datetime.datetime(2026, 11, 21, 12, 0, 0, tzinfo=UTC).timestamp())
    got, _ = read_matchlog(tmp_path / "MatchLog", since=t + 3, tz=UTC)
    assert [m.job for m in got] == ["2.0", "3.0"]
    got, _ = read_matchlog(tmp_path / "MatchLog", since=t + 6, tz=UTC)
    assert [m.job for m in got] == ["3.0"]
    # without a window, the current file only
    assert [m.job for m in read_matchlog(tmp_path / "MatchLog", tz=UTC)[0]] == ["3.0"]


# ---- observe_pass --------------------------------------------------------------------

@pytest.fixture(scope="module")
def hgq_pass():
    pool = load_pool(FIXTURES / HGQ)
    result = run_cycle(pool)
    return pool, result, observe_pass(pool, result)


def test_observe_pass_exact_numbers(hgq_pass):
    pool, result, (subs, groups, last_update, warnings) = hgq_pass
    assert last_update == 1795265253
    assert warnings == []
    by_name = {s.name: s for s in subs}
    assert len(by_name) == len(subs) == 8
    assert by_name["group_physics.hep.higgs@refcondor.local"] == SubmitterObs(
        name="group_physics.hep.higgs@refcondor.local", group="group_physics.hep",
        is_group=False, factor=1000.0, policy_factor=1000.0, floor=0, ceiling=-1,
        real_rup=0.5, real_eup=500.0, real_usage=2.0, resources_used=2.0,
        claimed_weight=2.0, idle_jobs=30, running_jobs=0,
        shadow_eup=pytest.approx(500.156), shadow_share=1.0, shadow_limit=17.0,
        shadow_submitter_limit=19.0,     # the real accountant published 19.0 after the cycle
        shadow_matches=17, shadow_match_weight=17.0)
    # a group record: its subtree's claims, as HierWeightedResourcesUsed counts them
    physics = by_name["group_physics"]
    assert (physics.is_group, physics.hier_usage, physics.claimed_weight, physics.real_usage,
            physics.real_share, physics.shadow_matches) == (True, 3.0, 3.0, 0.0, 0.0, 0)
    # a submitter the Accounting ads do not know yet (its first cycle)
    curie = by_name["group_chemistry.curie@refcondor.local"]
    assert (curie.group, curie.real_rup, curie.factor, curie.idle_jobs, curie.shadow_matches,
            curie.shadow_limit) == ("group_chemistry", None, None, 20, 10, 10.0)
    assert {g.name: g for g in groups}["group_physics.hep"] == GroupObs(
        name="group_physics.hep", real_quota=15.0, config_quota=15.0, real_usage=2.0,
        real_requested=0.0, shadow_quota=15.0, shadow_allocated=19.0,
        shadow_usage_after=19.0, shadow_matches=17)
    assert [g.name for g in groups] == ["<none>", "group_chemistry", "group_physics",
                                        "group_physics.hep", "group_physics.lep"]
    assert {g.name: g.real_quota for g in groups}["<none>"] == 10.0


def test_observe_pass_without_our_cycle():
    pool = load_pool(FIXTURES / "pie_three_submitters")
    subs, groups, last_update, warnings = observe_pass(pool, None)
    assert last_update == 1795265202 and warnings == []
    by_name = {s.name: s for s in subs}
    assert {n: (s.real_rup, s.real_eup) for n, s in by_name.items()} == {
        "alice@refcondor.local": (0.5, 500.0), "bob@refcondor.local": (1.0, 1000.0),
        "carol@refcondor.local": (2.0, 2000.0), "<none>": (0.5, 500.0)}
    assert all(s.shadow_eup is None and s.shadow_matches == 0 for s in subs)
    assert by_name["alice@refcondor.local"].idle_jobs == 30
    assert groups == [GroupObs(name="<none>", real_quota=0.0, config_quota=0.0,
                               real_usage=0.0, real_requested=0.0)]


def _with_accounting(pool, ads):
    snap = dataclasses.replace(pool.snapshot, accounting=tuple(ads))
    return dataclasses.replace(pool, snapshot=snap)


def test_observe_pass_tolerates_incomplete_accounting_ads():
    pool = load_pool(FIXTURES / "pie_three_submitters")
    ads = [
        classad2.ClassAd({"Name": "dave@x", "LastUpdate": 100}),                  # no numbers
        classad2.ClassAd({"Name": "erin@x", "PriorityFactor": 10.0,               # no Priority
                          "WeightedResourcesUsed": 2.5, "LastUpdate": 100,
                          "PriorityFactorLeaseExpiration": 500,
                          "PriorityFactorPreLeaseValue": 1000.0,
                          "CeilingLeaseExpiration": 400, "Ceiling": 8}),
        classad2.ClassAd({"Name": "fay@x", "Priority": 50.0, "PriorityFactor": 100.0,
                          "PriorityFactorLeaseExpiration": 90,      # ran out before LastUpdate
                          "PriorityFactorPreLeaseValue": 1000.0}),
    ]
    subs, groups, last_update, warnings = observe_pass(_with_accounting(pool, ads), None)
    assert last_update == 100
    by_name = {s.name: s for s in subs}
    assert by_name["dave@x"] == SubmitterObs(name="dave@x", group="<none>", is_group=False)
    erin = by_name["erin@x"]
    assert (erin.real_eup, erin.real_rup, erin.factor, erin.policy_factor, erin.floor,
            erin.ceiling, erin.ceiling_lease_expires, erin.real_usage) == \
        (None, None, 10.0, 1000.0, 0, 8, 400, 2.5)
    fay = by_name["fay@x"]
    assert (fay.real_rup, fay.factor, fay.policy_factor, fay.factor_lease_expires) == \
        (0.5, 100.0, 100.0, 90)
    # the pool's own submitters still appear (from their submitter ads), without real figures
    assert by_name["alice@refcondor.local"].real_rup is None
    assert by_name["alice@refcondor.local"].idle_jobs == 30
    assert warnings == [
        f"{pool.snapshot.accounting_source}: accounting ad 1 (dave@x) has no Priority or "
        "PriorityFactor: its real priority is unknown",
        f"{pool.snapshot.accounting_source}: accounting ad 2 (erin@x) has no Priority: "
        "its real priority is unknown",
    ]
    assert groups == []
    # no Accounting ads at all
    subs, groups, last_update, warnings = observe_pass(_with_accounting(pool, ()), None)
    assert last_update is None and groups == [] and warnings == []
    assert sorted(s.name for s in subs) == ["alice@refcondor.local", "bob@refcondor.local",
                                            "carol@refcondor.local"]


def test_observe_pass_counts_claims_in_slot_ads():
    pool = load_pool(FIXTURES / "preempt_priority")
    subs = observe_pass(pool, None).submitters
    by_name = {s.name: s for s in subs}
    assert by_name["bob@refcondor.local"].claimed_weight == 10.0
    assert by_name["alice@refcondor.local"].claimed_weight == 0.0
    assert by_name["<none>"].claimed_weight == 10.0     # the root's own submitters



# ---- the NegotiatorLog's cycle boundaries -----------------------------------------------

def _log_line(t: int, text: str) -> str:
    return datetime.datetime.fromtimestamp(t, UTC).strftime("%m/%d/%y %H:%M:%S ") + text + "\n"


def _cycle_lines(start: int, end: int) -> str:
    return (_log_line(start, "---------- Started Negotiation Cycle ----------")
            + _log_line(start, "Phase 1:  Obtaining ads from collector ...")
            + _log_line(end, "---------- Finished Negotiation Cycle ----------"))


def test_negotiator_log_of_a_fixture_is_one_cycle():
    from negotiator_ext.adapters.observe import read_negotiator_log
    log = FIXTURES / HGQ / "expected" / "negotiator-cycle.log"
    ad_cycle = real_cycles(negotiator_ad(HGQ))[0]       # the newest: the recorded one
    cycles, reached = read_negotiator_log(log, since=ad_cycle.time, tz="UTC")
    assert [(c.time, c.end) for c in cycles] == [(ad_cycle.time, ad_cycle.end)]
    assert reached is False        # the file starts with that cycle: nothing older shown


def test_negotiator_log_cycles_since_with_the_one_before_and_an_aborted_one(tmp_path):
    from negotiator_ext.adapters.observe import read_negotiator_log
    t0 = 1_795_000_000
    text = (_cycle_lines(t0, t0 + 2) + _cycle_lines(t0 + 20, t0 + 21)
            + _log_line(t0 + 40, "---------- Started Negotiation Cycle ----------")
            + _log_line(t0 + 40, "Aborting negotiation cycle")
            + _cycle_lines(t0 + 60, t0 + 63)
            + _log_line(t0 + 80, "---------- Started Negotiation Cycle ----------"))  # running
    (tmp_path / "NegotiatorLog").write_text(text)
    cycles, reached = read_negotiator_log(tmp_path / "NegotiatorLog", since=t0 + 30, tz="UTC")
    assert reached is True
    # the last cycle started before `since`, then the finished ones after it; not the
    # aborted one nor the one still running
    assert [(c.time, c.end, c.duration) for c in cycles] == [
        (t0 + 20, t0 + 21, 1.0), (t0 + 60, t0 + 63, 3.0)]


def test_negotiator_log_reads_the_rotated_log_and_a_byte_budget(tmp_path):
    from negotiator_ext.adapters.observe import read_negotiator_log
    t0 = 1_795_000_000
    (tmp_path / "NegotiatorLog.old").write_text(_cycle_lines(t0, t0 + 1)
                                                + _cycle_lines(t0 + 20, t0 + 22))
    (tmp_path / "NegotiatorLog").write_text(_cycle_lines(t0 + 40, t0 + 41))
    cycles, reached = read_negotiator_log(tmp_path / "NegotiatorLog", since=t0 + 10, tz="UTC")
    assert reached is True
    assert [c.time for c in cycles] == [t0, t0 + 20, t0 + 40]
    cycles, reached = read_negotiator_log(tmp_path / "NegotiatorLog", since=t0 + 10, tz="UTC",
                                          max_bytes=250)
    assert reached is False and [c.time for c in cycles] == [t0 + 40]
    with pytest.raises(InputError, match="cannot read the NegotiatorLog"):
        read_negotiator_log(tmp_path / "missing", since=t0, tz="UTC")


def test_negotiator_log_names_the_turns_time_limits_skipped(tmp_path):
    """HTCondor 25.14's matchmaker.cpp logs each turn a time limit skipped at D_ALWAYS
    (the lines below as the 100k-1M bench's NegotiatorLog has them); a turn skipped for
    no idle jobs is not one. Each cycle gets its own, once each, in the log's order."""
    from negotiator_ext.adapters.observe import read_negotiator_log
    t0 = 1_795_000_000
    skip = "  Negotiation with {} skipped because of time limits:"
    text = (_log_line(t0, "---------- Started Negotiation Cycle ----------")
            + _log_line(t0 + 5, skip.format("g.u2@x"))
            + _log_line(t0 + 5, "  120 seconds spent on this schedd (s3@h), "
                                "MAX_TIME_PER_SCHEDD is 120 secs")
            + " " + _log_line(t0 + 5, "  Submitter g.u2@x got all it wants; removing it.")
            + _log_line(t0 + 6, "  Negotiating with g.u3@x skipped because no idle jobs")
            + _log_line(t0 + 7, "  Negotiation with g.u1@x skipped because MAX_TIME_PER_CYCLE"
                                " of 1200 secs exceeded")
            + _log_line(t0 + 8, skip.format("g.u2@x"))
            + _log_line(t0 + 9, "---------- Finished Negotiation Cycle ----------")
            + _cycle_lines(t0 + 20, t0 + 21))
    (tmp_path / "NegotiatorLog").write_text(text)
    cycles, _ = read_negotiator_log(tmp_path / "NegotiatorLog", since=t0, tz="UTC")
    assert [c.submitters_skipped for c in cycles] == [("g.u2@x", "g.u1@x"), ()]
    from negotiator_ext.adapters.observe import merge_cycles
    ad = [RealCycle(time=t0, end=t0 + 9, duration=9.0, schedds_out_of_time=("s3@h",))]
    assert merge_cycles(cycles, ad)[0].submitters_skipped == ("g.u2@x", "g.u1@x")


def test_merge_cycles_keeps_the_logs_times_and_the_ads_figures():
    from negotiator_ext.adapters.observe import merge_cycles
    log = [RealCycle(time=100, end=102, duration=2.0), RealCycle(time=120, end=121, duration=1.0)]
    ad = [RealCycle(time=90, end=91, duration=1.0, matches=1),     # older than the log
          RealCycle(time=101, end=102, duration=1.4, matches=7)]   # the log's first, +1 s
    merged = merge_cycles(log, ad)
    assert [(c.time, c.end, c.matches, c.duration) for c in merged] == [
        (90, 91, 1, 1.0), (100, 102, 7, 1.4), (120, 121, None, 1.0)]


def test_unseen_cycles_warning_names_the_knobs():
    from negotiator_ext.core.config import NegotiatorConfig
    from negotiator_ext.shadow import unseen_cycles_warning
    msg = unseen_cycles_warning(NegotiatorConfig(negotiator_interval=20))
    assert msg is not None
    for knob in ("NEGOTIATOR_UPDATE_INTERVAL", "NEGOTIATION_CYCLE_STATS_LENGTH",
                 "NEGOTIATOR_EXT_NEGOTIATOR_LOG", "NEGOTIATOR_UPDATE_AFTER_CYCLE"):
        assert knob in msg
    assert "every 300 s" in msg and "keeps 3 cycles" in msg
    assert unseen_cycles_warning(NegotiatorConfig(negotiator_interval=100)) is None
    assert unseen_cycles_warning(NegotiatorConfig(negotiator_interval=20,
                                                  negotiator_update_after_cycle=True)) is None


@settings(max_examples=200, deadline=None)
@given(lines=st.lists(st.sampled_from([b"", b"x", b"a Started Negotiation Cycle b", b"yy" * 9,
                                       b"Finished Negotiation Cycle", b"StartedNegotiation"]),
                      max_size=40),
       block=st.integers(1, 64), limit=st.integers(0, 2000))
def test_the_marked_backward_reader_gives_the_marked_lines_and_counts_of_the_whole_one(
        lines, block, limit):
    # what read_negotiator_log gets by skipping blocks without a cycle line is what the
    # line-by-line reader gives, each marked line with the bytes read through it
    import io

    from negotiator_ext.adapters import observe
    data = b"\n".join(lines)
    expected, through = [], 0
    for line in observe._backward(io.BytesIO(data)):
        through += len(line) + 1
        if any(m in line for m in observe._CYCLE_MARK):
            expected.append((line, through))
    saved = observe._BLOCK
    observe._BLOCK = block
    try:
        got = list(observe._backward_marked(io.BytesIO(data), observe._CYCLE_MARK, limit))
        # both read the same blocks: the whole reader gives every line, last first
        assert list(observe._backward(io.BytesIO(data))) == data.split(b"\n")[::-1]
    finally:
        observe._BLOCK = saved
    # every line within the limit is there; past it, reading may have stopped
    assert got == expected[:len(got)]
    assert [e for e in expected if e[1] <= limit] == [g for g in got if g[1] <= limit]
