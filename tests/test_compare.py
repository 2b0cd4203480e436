"""Our cycle against the real one (core/compare.py).

The replay: for each recorded fixture, our cycle on the snapshot is compared with what
the real negotiator did right after it (expected/negotiator.ads, expected/matchlog.txt,
expected/accounting-after.ads), as a shadow pass would compare it one pass later. Then
the accountant's time step between the two Accounting ads of each fixture, and the
comparison's rules on small made-up inputs."""

from __future__ import annotations

import dataclasses

import datetime
import json
import shutil

import pytest

from conftest import FIXTURES, SCENARIOS, writable_copy
from negotiator_ext.adapters.adfiles import read_ads
from negotiator_ext.adapters.observe import observe_pass, read_matchlog, real_cycles
from negotiator_ext.core.compare import compare, priority_drift
from negotiator_ext.core.records import GroupObs, MatchEntry, RealCycle, SubmitterObs
from negotiator_ext.cycle import run_cycle
from negotiator_ext.pool import load_pool

UTC = datetime.timezone.utc


def summary(scenario):
    return json.loads((FIXTURES / scenario / "expected" / "summary.json").read_text())


class Replay:
    """One fixture as two passes see it: the first snapshots the pool and runs our cycle,
    the second reads the real negotiator's ad, MatchLog and Accounting ads after the
    real cycle."""

    def __init__(self, scenario, tmp):
        self.scenario = scenario
        pool = load_pool(FIXTURES / scenario)
        self.result = run_cycle(pool)
        self.snapshot_time = pool.snapshot.captured_at
        self.shadow_subs, self.shadow_groups, self.prev_time, _ = observe_pass(pool, self.result)
        self.shadow_matches = [MatchEntry(job=m.job, submitter=m.submitter, slot=m.slot,
                                          preempting=m.preempting, group=m.group)
                               for m in self.result.matches]
        # the second pass's pool: the Accounting ads after the real cycle
        after = writable_copy(tmp, scenario)
        shutil.copy(FIXTURES / scenario / "expected" / "accounting-after.ads",
                    after / "accounting.ads")
        self.real_subs, self.real_groups, self.cur_time, _ = observe_pass(load_pool(after), None)
        expected = FIXTURES / scenario / "expected"
        (ad,) = read_ads(expected / "negotiator.ads")
        self.cycles = real_cycles(ad)
        self.real_matches, _ = read_matchlog(expected / "matchlog.txt",
                                             since=self.snapshot_time, tz=UTC)

    def compare(self, **kw):
        args = dict(shadow_pass="pass-1", shadow_snapshot_time=self.snapshot_time,
                    shadow_matches=self.shadow_matches, shadow_submitters=self.shadow_subs,
                    shadow_groups=self.shadow_groups, real_cycles=self.cycles,
                    real_matches=self.real_matches, real_submitters=self.real_subs,
                    real_groups=self.real_groups)
        args.update(kw)
        return compare(**args)


@pytest.fixture(scope="module", params=SCENARIOS)
def replay(request, tmp_path_factory):
    return Replay(request.param, tmp_path_factory.mktemp(request.param))


# Slot-level agreement on the fixtures: our cycle hands out as many identical slots per
# submitter as the real negotiator, but picks other ones among equals (the order of
# equally ranked slots is not part of the recorded input): 11/27, 14/30 and 6/18 slots
# agree on the first three fixtures today. Only where the slots are forced must all agree.
FORCED = {"preempt_priority",                   # alice preempts every one of bob's 10 slots
          "pslot_consumption_policy_cpu"}        # one p-slot, matched 5 times


def test_replay_against_the_real_cycle(replay):
    exp = summary(replay.scenario)
    c = replay.compare()
    total = len(exp["matches"])
    print(f"\n{replay.scenario}: agreed {c.agreed}/{c.real_matches} real, "
          f"{c.agreed}/{c.shadow_matches} ours; real_in_shadow {c.real_in_shadow:.3f} "
          f"shadow_in_real {c.shadow_in_real:.3f} count_agreement {c.count_agreement}")
    assert (c.source, c.shadow_pass, c.real_cycle_time, c.real_cycles_between) == \
        ("matchlog", "pass-1", replay.snapshot_time, 1)
    assert c.real_matches == c.shadow_matches == total
    got = {n: row["real"] for n, row in c.per_submitter.items() if row["real"]}
    assert got == exp["matched_by_submitter"]
    assert {n: row["shadow"] for n, row in c.per_submitter.items() if row["shadow"]} == \
        exp["matched_by_submitter"]
    assert c.count_agreement == 1.0
    if replay.scenario in FORCED:
        assert c.agreed == total
    else:
        assert 0 < c.agreed < total
    assert c.real_in_shadow == c.shadow_in_real == c.agreed / total
    assert {g: row["real_matches"] for g, row in c.per_group.items() if row["real_matches"]} == \
        exp["matched_by_group"]
    assert {g: row["shadow_matches"] for g, row in c.per_group.items()
            if row["shadow_matches"]} == exp["matched_by_group"]
    assert c.notes == ()
    assert c.real_duration == replay.cycles[0].duration
    assert c.max_abs_drift is None          # no drift recorded on these observations


def test_replay_shares_limits_and_quotas(replay):
    exp = summary(replay.scenario)
    c = replay.compare()
    for name, lim in exp["submitter_limits"].items():
        row = c.per_submitter[name]
        assert row["real_share"] == pytest.approx(lim["share"], abs=1e-12)
        assert row["real_limit"] == pytest.approx(lim["limit"], abs=1e-12)
        assert row["shadow_share"] == pytest.approx(lim["share"], rel=1e-9)
    for group, q in exp["group_quotas"].items():
        row = c.per_group[group]
        assert row["real_quota"] == q["effective"]
        if row["shadow_quota"] is not None:         # None: no groups configured
            assert row["shadow_quota"] == pytest.approx(q["effective"])


def test_replay_without_a_matchlog(replay):
    c = replay.compare(real_matches=None)
    assert (c.source, c.real_matches, c.shadow_matches) == \
        ("negotiator-ad", replay.cycles[0].matches, len(replay.shadow_matches))
    assert (c.agreed, c.real_in_shadow, c.shadow_in_real, c.count_agreement) == (None,) * 4
    assert all(row["real"] is None and row["shadow"] is not None
               for row in c.per_submitter.values())
    assert all(row["real_matches"] is None for row in c.per_group.values())


def test_replay_before_any_real_cycle(replay):
    c = replay.compare(shadow_snapshot_time=replay.cycles[0].time + 1)
    assert (c.source, c.real_cycle_time, c.real_cycles_between, c.real_matches) == \
        ("none", None, 0, None)
    assert (c.agreed, c.count_agreement, c.real_duration) == (None, None, None)
    assert c.shadow_matches == len(replay.shadow_matches)
    assert all(row["real"] is None and row["real_share"] is None
               for row in c.per_submitter.values())
    assert all(row["real_quota"] is None for row in c.per_group.values())
    assert c.notes == ("no real cycle has run since the snapshot",)


def test_replay_priority_drift(replay):
    """Our accountant's time step from the Accounting ads before the cycle to the real
    accountant's time after it reproduces the real priorities."""
    drift = priority_drift(replay.shadow_subs, replay.prev_time, replay.real_subs,
                           replay.cur_time, halflife=86400.0)
    both = {s.name for s in replay.shadow_subs if s.real_rup is not None} & \
        {s.name for s in replay.real_subs if s.real_rup is not None}
    assert set(drift) == both and len(both) >= 3
    real = {s.name: s.real_rup for s in replay.real_subs}
    for name, (predicted, d) in drift.items():
        assert abs(d) < 1e-6, (name, predicted, real[name])
        assert predicted == pytest.approx(real[name], rel=1e-6)


def test_priority_drift_exact_numbers():
    pool = load_pool(FIXTURES / "preempt_priority")
    prev, _, t0, _ = observe_pass(pool, None)
    bob = {s.name: s for s in prev}["bob@refcondor.local"]
    assert (t0, bob.real_rup, bob.real_usage) == (1795265307, 50.0, 10.0)
    cur = [SubmitterObs(name=bob.name, group="<none>", is_group=False, real_rup=49.996791)]
    drift = priority_drift(prev, t0, cur, t0 + 10, halflife=86400.0)
    aging = 0.5 ** (10 / 86400)
    want = round(50.0 * aging + 10.0 * (1 - aging), 6)
    assert drift == {bob.name: (want, pytest.approx(0.0, abs=1e-12))}
    assert want == 49.996791
    # a real priority below ours: the drift is (real - ours) / ours
    low = [SubmitterObs(name=bob.name, group="<none>", is_group=False, real_rup=49.0)]
    (predicted, d), = priority_drift(prev, t0, low, t0 + 10, halflife=86400.0).values()
    assert (predicted, d) == (49.996791, pytest.approx((49.0 - 49.996791) / 49.996791))
    # a half-life the real accountant did not use shows as drift
    (predicted, d), = priority_drift(prev, t0, cur, t0 + 10, halflife=3600.0).values()
    assert predicted < 49.99 and d > 1e-5
    # no time step, or no real priority on one side: nothing to check
    assert priority_drift(prev, t0, cur, t0, halflife=86400.0) == {}
    assert priority_drift(prev, t0, cur, t0 - 5, halflife=86400.0) == {}
    blank = [SubmitterObs(name=bob.name, group="<none>", is_group=False)]
    assert priority_drift(prev, t0, blank, t0 + 10, halflife=86400.0) == {}
    assert priority_drift(blank, t0, cur, t0 + 10, halflife=86400.0) == {}


# ---- the rules on made-up passes ------------------------------------------------------

def sub(name, group="<none>", **kw):
    return SubmitterObs(name=name, group=group, is_group=False, **kw)


def m(submitter, slot, t=None, job="1.0"):
    return MatchEntry(job=job, submitter=submitter, slot=slot, time=t)


CYCLES = [RealCycle(time=130, end=131, duration=1.0, matches=1),
          RealCycle(time=110, end=112, duration=2.0, matches=4,
                    submitters_share_limit=("a@x",), submitters_out_of_time=("b@x",)),
          RealCycle(time=90, end=90, duration=0.0, matches=7)]


def test_compares_with_the_first_cycle_after_the_snapshot():
    real = [m("a@x", "s1", 90), m("a@x", "p1", 110), m("a@x", "p1", 111), m("b@x", "s2", 112),
            m("b@x", "s3", 112), m("a@x", "s9", 130)]
    ours = [m("a@x", "p1"), m("a@x", "p1"), m("a@x", "p1"), m("b@x", "s2"), m("c@x", "s4")]
    c = compare(shadow_pass="p", shadow_snapshot_time=100, shadow_matches=ours,
                shadow_submitters=[sub("a@x", shadow_share=0.5, shadow_limit=1.0,
                                       shadow_submitter_limit=3.0),
                                   sub("c@x")],
                shadow_groups=[], real_cycles=CYCLES, real_matches=real,
                real_submitters=[sub("a@x", real_share=0.6, real_limit=2.5)])
    assert (c.real_cycle_time, c.real_cycles_between, c.real_duration) == (110, 2, 2.0)
    assert (c.real_matches, c.shadow_matches, c.agreed) == (4, 5, 3)   # p1 twice, not three times
    assert (c.real_in_shadow, c.shadow_in_real) == (0.75, 0.6)
    assert c.count_agreement == (2 + 1 + 0) / 5
    assert c.per_submitter == {
        "a@x": {"real": 2, "shadow": 3, "real_share": 0.6, "shadow_share": 0.5,
                "real_limit": 2.5, "shadow_limit": 3.0,
                "real_at_share_limit": True, "real_out_of_time": False},
        "c@x": {"real": 0, "shadow": 1, "real_share": None, "shadow_share": None,
                "real_limit": None, "shadow_limit": None,
                "real_at_share_limit": False, "real_out_of_time": False},
        "b@x": {"real": 2, "shadow": 1, "real_share": None, "shadow_share": None,
                "real_limit": None, "shadow_limit": None,
                "real_at_share_limit": False, "real_out_of_time": True},
    }
    assert c.notes == ("2 real cycles ran between the passes; compared with the first",
                       "real shares and limits are the newest real cycle's, not the compared one's")


def test_window_without_an_end_and_notes_on_doubtful_windows():
    cycles = [RealCycle(time=120, end=None, duration=None),
              RealCycle(time=100, end=None, duration=None, matches=5)]
    real = [m("a@x", "s1", 100), m("a@x", "s2", 119), m("a@x", "s3", 120)]
    c = compare(shadow_pass="p", shadow_snapshot_time=100, shadow_matches=[],
                shadow_submitters=[], shadow_groups=[], real_cycles=cycles, real_matches=real)
    assert (c.real_matches, c.agreed, c.real_in_shadow, c.shadow_in_real, c.count_agreement) == \
        (2, 0, 0.0, None, 0.0)
    assert "the MatchLog has 2 matches in the cycle's window, the negotiator ad counts 5" in c.notes
    # the next cycle started in the second this one ended
    cycles = [RealCycle(time=105, end=106, duration=1.0),
              RealCycle(time=100, end=105, duration=5.0, matches=1)]
    c = compare(shadow_pass="p", shadow_snapshot_time=99, shadow_matches=[m("a@x", "s1")],
                shadow_submitters=[], shadow_groups=[], real_cycles=cycles,
                real_matches=[m("a@x", "s1", 105)])
    assert (c.real_matches, c.agreed, c.count_agreement) == (1, 1, 1.0)
    assert any("may belong to either" in n for n in c.notes)
    assert any("may have left the history" in n for n in c.notes)


def test_nothing_matched_on_either_side():
    c = compare(shadow_pass="p", shadow_snapshot_time=100, shadow_matches=[],
                shadow_submitters=[sub("a@x")], shadow_groups=[], real_cycles=CYCLES,
                real_matches=[])
    assert (c.real_matches, c.shadow_matches, c.agreed) == (0, 0, 0)
    assert (c.real_in_shadow, c.shadow_in_real, c.count_agreement) == (None, None, None)
    assert c.per_submitter["a@x"]["real"] == 0


def test_groups_of_real_matches_and_quotas():
    groups = [GroupObs(name="<none>", real_quota=1.0, shadow_quota=1.0, shadow_matches=0),
              GroupObs(name="phys", real_quota=10.0, shadow_quota=12.0, shadow_matches=2,
                       real_usage=4.0, shadow_usage_after=6.0),
              GroupObs(name="phys.hep", real_quota=5.0, shadow_quota=6.0, shadow_matches=1)]
    shadow_subs = [sub("phys.hep.h@x", group="phys.hep")]
    real = [m("phys.hep.h@x", "s1", 110), m("phys.hep.z@x", "s2", 110),   # z: by its name
            m("phys.q@x", "s3", 110), m("other.u@x", "s4", 111), m("v@x", "s5", 111)]
    c = compare(shadow_pass="p", shadow_snapshot_time=100, shadow_matches=[],
                shadow_submitters=shadow_subs, shadow_groups=groups, real_cycles=CYCLES,
                real_matches=real)
    # without the later pass's ads, the quotas are the shadow pass's own, the usage unknown
    assert c.per_group == {
        "<none>": {"real_quota": 1.0, "shadow_quota": 1.0, "real_matches": 2, "shadow_matches": 0,
                   "real_usage_after": None, "shadow_usage_after": None},
        "phys": {"real_quota": 10.0, "shadow_quota": 12.0, "real_matches": 1, "shadow_matches": 2,
                 "real_usage_after": None, "shadow_usage_after": 6.0},
        "phys.hep": {"real_quota": 5.0, "shadow_quota": 6.0, "real_matches": 2,
                     "shadow_matches": 1, "real_usage_after": None, "shadow_usage_after": None},
    }
    # the quotas of the later pass's Accounting ads, when given
    later = [GroupObs(name="phys", real_quota=11.0), GroupObs(name="chem", real_quota=3.0)]
    c = compare(shadow_pass="p", shadow_snapshot_time=100, shadow_matches=[],
                shadow_submitters=shadow_subs, shadow_groups=groups, real_cycles=CYCLES,
                real_matches=None, real_groups=later)
    assert {g: row["real_quota"] for g, row in c.per_group.items()} == \
        {"<none>": None, "phys": 11.0, "phys.hep": None, "chem": 3.0}


def test_largest_drift_of_the_later_pass():
    c = compare(shadow_pass="p", shadow_snapshot_time=100, shadow_matches=[],
                shadow_submitters=[], shadow_groups=[], real_cycles=CYCLES, real_matches=None,
                real_submitters=[sub("a@x", drift=-0.03), sub("b@x", drift=0.01), sub("c@x")])
    assert c.max_abs_drift == 0.03


def test_agreement_up_to_identical_slots():
    """The real negotiator took slots A and B, ours took B and C; A, B and C are one
    class (identical slots) for alice, D another. Slot agreement 1 of 2; up to identical
    slots 2 of 2; a real match to a slot the shadow pass did not see agrees with nothing."""
    cyc = RealCycle(time=100, end=101, duration=1.0, matches=3)
    ours = [MatchEntry("1.0", "alice", "B"), MatchEntry("1.0", "alice", "C"),
            MatchEntry("2.0", "bob", "D")]
    real = [MatchEntry("1.0", "alice", "A", time=100), MatchEntry("1.0", "alice", "B", time=100),
            MatchEntry("2.0", "bob", "E", time=101)]
    c = compare(shadow_pass="p", shadow_snapshot_time=99, shadow_matches=ours,
                shadow_submitters=(), shadow_groups=(), real_cycles=[cyc], real_matches=real,
                slot_classes={"A": 0, "B": 0, "C": 0, "D": 1})
    assert c.agreed == 1
    assert c.agreed_equivalent == 2
    assert c.equivalent_agreement == pytest.approx(2 / 3)
    without = compare(shadow_pass="p", shadow_snapshot_time=99, shadow_matches=ours,
                      shadow_submitters=(), shadow_groups=(), real_cycles=[cyc],
                      real_matches=real)
    assert without.agreed_equivalent is None and without.equivalent_agreement is None
    # over the larger side: the real cycle made 2 matches, ours 3 -> 2 of 3
    two = compare(shadow_pass="p", shadow_snapshot_time=99, shadow_matches=ours,
                  shadow_submitters=(), shadow_groups=(), real_cycles=[cyc],
                  real_matches=real[:2], slot_classes={"A": 0, "B": 0, "C": 0, "D": 1})
    assert (two.agreed_equivalent, two.equivalent_agreement) == (2, pytest.approx(2 / 3))


def test_the_real_cycles_time_limits_beside_the_prediction():
    """The compared pass predicted where the real cycle's time limits stop it
    (core/time_limits.py): each submitter's row says what was predicted, and a note sets
    the real out-of-time lists beside the predicted ones."""
    real = [m("a@x", "p1", 110), m("b@x", "s2", 112)]
    predicted = {"cut": True, "schedds_out_of_time": [], "submitters_out_of_time": ["b@x"],
                 "submitters_not_reached": ["c@x"], "groups_not_reached": []}
    c = compare(shadow_pass="p", shadow_snapshot_time=100, shadow_matches=[m("a@x", "p1")],
                shadow_submitters=[sub("a@x"), sub("c@x")], shadow_groups=[],
                real_cycles=CYCLES, real_matches=real, time_limits=predicted)
    assert c.per_submitter["b@x"]["real_out_of_time"] is True
    assert c.per_submitter["b@x"]["shadow_out_of_time"] is True
    assert c.per_submitter["c@x"]["shadow_not_reached"] is True
    assert c.per_submitter["a@x"]["shadow_out_of_time"] is False
    assert ("time limits: out of time in the real cycle: 1 submitter(s); predicted: "
            "1 submitter(s) (the same); predicted not reached: 1 submitter(s), 0 group(s)"
            ) in c.notes
    assert c.time_limits["predicted_agrees"] == "yes"
    assert c.time_limits["real"] == {"schedds": [], "submitters": ["b@x"]}
    # a prediction that missed it says so (no "the same")
    c = compare(shadow_pass="p", shadow_snapshot_time=100, shadow_matches=[],
                shadow_submitters=[], shadow_groups=[], real_cycles=CYCLES,
                real_matches=real, time_limits=dict(predicted, submitters_out_of_time=[]))
    assert any(n.startswith("time limits: out of time in the real cycle: 1 submitter(s); "
                            "predicted: none;") for n in c.notes)
    assert c.time_limits["predicted_agrees"] == "no"
    # no prediction, and a real cycle that did not run out of time: nothing to say
    quiet = dataclasses.replace(CYCLES[1], submitters_out_of_time=())
    c = compare(shadow_pass="p", shadow_snapshot_time=100, shadow_matches=[],
                shadow_submitters=[], shadow_groups=[], real_cycles=[quiet],
                real_matches=real)
    assert c.time_limits == {}
