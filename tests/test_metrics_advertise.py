"""Metrics (adapters/metrics.py) and the collector ad (adapters/advertise.py) of a pass."""

import os
import socket
import urllib.request

import classad2
import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from negotiator_ext import __version__
from negotiator_ext.adapters import advertise as adv
from negotiator_ext.adapters import metrics
from negotiator_ext.core.records import (Comparison, GroupObs, MatchEntry, PassRecord,
                                         SubmitterObs)

COMPARISON = Comparison(
    shadow_pass="prev", real_cycle_time=990, real_cycles_between=1, real_matches=10,
    shadow_matches=8, agreed=7, real_in_shadow=0.7, shadow_in_real=0.875,
    count_agreement=0.8, source="matchlog", max_abs_drift=0.25, real_duration=1.5,
    agreed_equivalent=9, equivalent_agreement=0.9)

REC = PassRecord(
    uuid="u1", pool="cm.example.org", started_at=1000.5, finished_at=1012.0,
    snapshot_time=1001, status="complete", reason=None, real_cycle_time=995,
    real_accountant_time=996, shadow_duration=2.5, capture_duration=3.0,
    shadow_timings={"pie": 1.25}, pass_timings={"capture_schedd_query": 0.5, "cycle": 2.5},
    shadow_matches=(MatchEntry(job="1.0", submitter="alice@x", slot="slot1@h"),
                    MatchEntry(job="2.0", submitter="alice@x", slot="slot2@h")),
    submitters=(
        SubmitterObs(name="alice@x", group="group_a", is_group=False, factor=1000.0,
                     real_rup=0.5, real_eup=500.0, real_usage=4.0, shadow_eup=510.0,
                     real_share=0.5, shadow_share=0.4, shadow_matches=2, real_matches=3,
                     predicted_rup=0.4, drift=0.25, idle_jobs=5, running_jobs=4),
        SubmitterObs(name="bob@x", group="<none>", is_group=False, real_usage=0.0),
        SubmitterObs(name="group_a", group="group_a", is_group=True, real_usage=4.0),
    ),
    groups=(GroupObs(name="group_a", real_quota=10.0, shadow_quota=9.0, real_usage=4.0,
                     shadow_usage_after=6.0, shadow_matches=2),),
    comparison=COMPARISON,
    warnings=("w1",),
)

# A failed pass: nothing but its identity and its time is known.
FAILED = PassRecord(
    uuid="u2", pool="cm.example.org", started_at=2000.0, finished_at=2000.25,
    snapshot_time=None, status="failed", reason="collector did not answer",
    real_cycle_time=None, real_accountant_time=None, shadow_duration=None,
    capture_duration=None)


def text(rec):
    return generate_latest(metrics.pass_metrics(rec)).decode()


def samples(rec):
    """{(name, sorted labels): value} of every sample exported for `rec`."""
    out = {}
    for fam in text_string_to_metric_families(text(rec)):
        for s in fam.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def test_exact_metric_lines():
    lines = set(text(REC).splitlines())
    for line in (
        "negotiator_ext_pass_timestamp_seconds 1000.5",
        "negotiator_ext_pass_duration_seconds 11.5",
        "negotiator_ext_pass_complete 1.0",
        "negotiator_ext_pass_partial 0.0",
        "negotiator_ext_pass_failed 0.0",
        "negotiator_ext_pass_warnings 1.0",
        "negotiator_ext_snapshot_timestamp_seconds 1001.0",
        "negotiator_ext_shadow_cycle_duration_seconds 2.5",
        "negotiator_ext_capture_duration_seconds 3.0",
        "negotiator_ext_real_cycle_duration_seconds 1.5",
        "negotiator_ext_real_cycle_timestamp_seconds 995.0",
        "negotiator_ext_shadow_cycle_matches 2.0",
        'negotiator_ext_shadow_phase_duration_seconds{phase="pie"} 1.25',
        'negotiator_ext_pass_step_duration_seconds{step="capture_schedd_query"} 0.5',
        'negotiator_ext_pass_step_duration_seconds{step="cycle"} 2.5',
        'negotiator_ext_matches{side="real"} 10.0',
        'negotiator_ext_matches{side="shadow"} 8.0',
        "negotiator_ext_matches_agreed 7.0",
        'negotiator_ext_match_agreement_ratio{direction="real_in_shadow"} 0.7',
        'negotiator_ext_match_agreement_ratio{direction="shadow_in_real"} 0.875',
        'negotiator_ext_match_agreement_ratio{direction="equivalent"} 0.9',
        'negotiator_ext_match_agreement_ratio{direction="count"} 0.8',
        'negotiator_ext_comparison_info{source="matchlog"} 1.0',
        "negotiator_ext_priority_drift_max_ratio 0.25",
        'negotiator_ext_submitter_usage_weighted'
        '{group="group_a",side="real",submitter="alice@x"} 4.0',
        'negotiator_ext_submitter_effective_priority'
        '{group="group_a",side="shadow",submitter="alice@x"} 510.0',
        'negotiator_ext_submitter_real_priority'
        '{group="group_a",side="predicted",submitter="alice@x"} 0.4',
        'negotiator_ext_submitter_matches'
        '{group="group_a",side="real",submitter="alice@x"} 3.0',
        'negotiator_ext_group_quota{group="group_a",side="real"} 10.0',
        'negotiator_ext_group_usage_weighted{group="group_a",side="shadow"} 6.0',
    ):
        assert line in lines, line
    assert "# TYPE negotiator_ext_matches gauge" in lines


def test_disagreements_by_class_and_the_unexplained_agreement():
    """Issue 32: the unexplained agreement beside the raw one, the disagreeing submitters
    by class, the changes seen and whether the capture was aligned with the cycle."""
    import dataclasses
    comp = dataclasses.replace(
        COMPARISON, unexplained_agreement=1.0, aligned=True,
        disagreements=({"submitter": "alice@x", "real": 3, "shadow": 2,
                        "class": "pool changed", "unexplained": 0,
                        "changes": ["job 9.0 of alice@x was not idle in our snapshot"]},),
        changes=("job 9.0 of alice@x was not idle in our snapshot",))
    lines = set(text(dataclasses.replace(REC, comparison=comp)).splitlines())
    for line in ('negotiator_ext_match_agreement_ratio{direction="count"} 0.8',
                 'negotiator_ext_match_agreement_ratio{direction="count_unexplained"} 1.0',
                 'negotiator_ext_comparison_disagreements{class="pool_changed"} 1.0',
                 'negotiator_ext_comparison_disagreements{class="out_of_time"} 0.0',
                 'negotiator_ext_comparison_disagreements{class="unexplained"} 0.0',
                 "negotiator_ext_comparison_pool_changes 1.0",
                 "negotiator_ext_comparison_aligned 1.0"):
        assert line in lines, line
    # an older comparison (no explanation recorded): no unexplained figure, not 0
    assert not any("count_unexplained" in ln for ln in text(REC).splitlines()
                   if not ln.startswith("#"))
    # nothing re-predicted: no such figure; re-predicted at phase 2: what it explained
    assert "negotiator_ext_comparison_repredicted" not in text(dataclasses.replace(
        REC, comparison=comp))
    again = dataclasses.replace(comp, repredicted={"at": 100, "unexplained": 3,
                                                   "explained": 2, "delta_t": 20})
    lines = set(text(dataclasses.replace(REC, comparison=again)).splitlines())
    assert 'negotiator_ext_comparison_repredicted{what="unexplained"} 3.0' in lines
    assert 'negotiator_ext_comparison_repredicted{what="explained"} 2.0' in lines


def test_unknown_figures_are_absent_not_zero():
    s = samples(REC)
    bob = (("group", "<none>"), ("side", "real"), ("submitter", "bob@x"))
    # bob's usage is a known 0; his priorities, shares and real matches are unknown.
    assert s[("negotiator_ext_submitter_usage_weighted", bob)] == 0.0
    assert ("negotiator_ext_submitter_effective_priority", bob) not in s
    assert ("negotiator_ext_submitter_matches", bob) not in s
    assert not any(n == "negotiator_ext_submitter_priority_factor"
                   and dict(l)["submitter"] == "bob@x" for n, l in s)
    # alice has no limit on either side: the family is not exported at all.
    assert not any(n == "negotiator_ext_submitter_limit" for n, _ in s)
    assert ("negotiator_ext_group_quota", (("group", "group_a"), ("side", "config"))) not in s

    f = samples(FAILED)
    names = {n for n, _ in f}
    assert f[("negotiator_ext_pass_failed", ())] == 1.0
    assert f[("negotiator_ext_pass_complete", ())] == 0.0
    assert f[("negotiator_ext_pass_duration_seconds", ())] == 0.25
    for absent in ("negotiator_ext_snapshot_timestamp_seconds",
                   "negotiator_ext_shadow_cycle_duration_seconds",
                   "negotiator_ext_capture_duration_seconds",
                   "negotiator_ext_shadow_cycle_matches",     # our cycle did not run
                   "negotiator_ext_real_cycle_timestamp_seconds",
                   "negotiator_ext_matches", "negotiator_ext_match_agreement_ratio",
                   "negotiator_ext_priority_drift_max_ratio"):
        assert absent not in names, absent


def test_group_records_are_not_submitters_and_drift_without_comparison():
    s = samples(REC)
    subs = {dict(l).get("submitter") for n, l in s if n.startswith("negotiator_ext_submitter_")}
    assert subs == {"alice@x", "bob@x"}
    # Without a comparison the drift still comes from the pass's submitters.
    import dataclasses
    rec = dataclasses.replace(REC, comparison=None)
    assert samples(rec)[("negotiator_ext_priority_drift_max_ratio", ())] == 0.25
    assert ("negotiator_ext_matches", (("side", "real"),)) not in samples(rec)


def test_pass_metrics_into_a_given_registry():
    reg = CollectorRegistry()
    assert metrics.pass_metrics(REC, reg) is reg
    assert reg.get_sample_value("negotiator_ext_matches", {"side": "shadow"}) == 8.0


def test_textfile_is_replaced_atomically(tmp_path):
    path = tmp_path / "negotiator_ext.prom"
    metrics.write_textfile(path, FAILED)
    old = path.read_text()
    reader = open(path)            # a scrape that opened the old file mid-way...
    try:
        metrics.write_textfile(path, REC)
        # ... still reads the whole old file: the new one was renamed over it.
        assert reader.read() == old
    finally:
        reader.close()
    assert path.read_text() == text(REC)
    assert sorted(os.listdir(tmp_path)) == ["negotiator_ext.prom"]   # no temporary left


def test_textfile_in_a_missing_directory_raises_and_leaves_nothing(tmp_path):
    with pytest.raises(OSError):
        metrics.write_textfile(tmp_path / "nope" / "x.prom", REC)
    assert os.listdir(tmp_path) == []


def test_metrics_server_serves_the_newest_pass_only():
    server = metrics.MetricsServer(0)       # disabled: no socket, but it still keeps the pass
    assert not server.enabled
    server.update(REC)
    first = generate_latest(server.registry).decode()
    assert 'submitter="bob@x"' in first
    import dataclasses
    server.update(dataclasses.replace(REC, submitters=REC.submitters[:1]))
    second = generate_latest(server.registry).decode()
    assert 'submitter="bob@x"' not in second       # bounded: gone with the pass
    assert 'negotiator_ext_passes_total{status="complete"} 2.0' in second
    assert 'negotiator_ext_passes_total{status="failed"} 0.0' in second
    server.close()


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_metrics_server_http():
    server = metrics.MetricsServer(_free_port())
    try:
        assert server.enabled and server.addr == "127.0.0.1"
        server.update(REC)
        with urllib.request.urlopen(f"http://127.0.0.1:{server.port}/metrics", timeout=10) as r:
            body = r.read().decode()
        assert 'negotiator_ext_matches{side="real"} 10.0' in body.splitlines()
    finally:
        server.close()
    server.close()   # idempotent


# ---- the collector ad ------------------------------------------------------------------

def ad_dict(ad):
    return {k: ad[k] for k in ad.keys()}


def test_shadow_ad_attributes_exact():
    ad = adv.shadow_ad(REC, name="negotiator-ext@cm", now=1013, lifetime=900)
    d = ad_dict(ad)
    assert d == {
        "MyType": "ShadowNegotiator", "Name": "negotiator-ext@cm", "LastHeardFrom": 1013,
        "NegotiatorExtVersion": __version__, "PassUuid": "u1", "PassTime": 1000,
        "PassStatus": "complete", "SnapshotTime": 1001, "RealCycleTime": 995,
        "ShadowCycleDuration": 2.5, "CaptureDuration": 3.0, "MaxPriorityDrift": 0.25,
        "ClassAdLifetime": 900, "RealCycleDuration": 1.5, "RealMatches": 10,
        "ShadowMatches": 8, "AgreedMatches": 7, "RealInShadow": 0.7, "ShadowInReal": 0.875,
        "CountAgreement": 0.8, "ComparisonSource": "matchlog",
        "EquivalentAgreement": 0.9, "AgreedEquivalent": 9,
    }
    assert type(d["RealMatches"]) is int and type(d["ShadowCycleDuration"]) is float
    # What condor_status would print is a well-formed ad: it reads back the same.
    back = classad2.parseOne(str(ad))
    assert ad_dict(back) == d


def test_shadow_ad_leaves_undefined_figures_out():
    d = ad_dict(adv.shadow_ad(FAILED, name="n", now=2001))
    assert d == {"MyType": "ShadowNegotiator", "Name": "n", "LastHeardFrom": 2001,
                 "NegotiatorExtVersion": __version__, "PassUuid": "u2", "PassTime": 2000,
                 "PassStatus": "failed", "PassReason": "collector did not answer"}


class FakeCollector:
    calls = []
    fail: Exception | None = None

    def __init__(self, pool=None):
        self.pool = pool

    def advertise(self, ads, command="UPDATE_AD_GENERIC", use_tcp=True):
        FakeCollector.calls.append((self.pool, [ad_dict(a) for a in ads], command))
        if FakeCollector.fail is not None:
            raise FakeCollector.fail


class FakeHtcondor:
    Collector = FakeCollector


@pytest.fixture
def collector():
    FakeCollector.calls = []
    FakeCollector.fail = None
    yield FakeCollector


def test_advertise_success(collector):
    ad = adv.shadow_ad(REC, name="n", now=1)
    assert adv.advertise(FakeHtcondor, "cm.example.org:9618", ad) is None
    assert collector.calls == [("cm.example.org:9618", [ad_dict(ad)], "UPDATE_AD_GENERIC")]


def test_advertise_refused_is_a_message_not_an_exception(collector):
    collector.fail = RuntimeError("Failed to advertise\n to collector.")
    msg = adv.advertise(FakeHtcondor, None, adv.shadow_ad(REC, name="n", now=1))
    assert msg == ("advertising the ShadowNegotiator ad to the local collector failed: "
                   "Failed to advertise to collector. "
                   "(UPDATE_AD_GENERIC needs DAEMON authorization at the collector)")
    assert "\n" not in msg
    assert collector.calls[0][0] is None


def test_advertise_with_a_bad_pool_address(collector):
    class Bad:
        @staticmethod
        def Collector(pool):
            raise ValueError("bad address")
    msg = adv.advertise(Bad, "::nope", adv.shadow_ad(REC, name="n", now=1))
    assert msg.startswith("advertising the ShadowNegotiator ad to ::nope failed: bad address")


# ---- fit for alerting (issue 16) ---------------------------------------------------------

def samples_with(rec, standing):
    out = {}
    reg = metrics.pass_metrics(rec, standing=standing)
    for fam in text_string_to_metric_families(generate_latest(reg).decode()):
        for s in fam.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def test_a_failed_pass_keeps_the_newest_comparison_and_says_how_old_it_is():
    from negotiator_ext.core.records import Standing
    standing = Standing(last_complete_at=1000.5, comparison=COMPARISON, comparison_at=1000.5)
    f = samples_with(FAILED, standing)
    assert f[("negotiator_ext_pass_failed", ())] == 1.0
    assert f[("negotiator_ext_last_complete_pass_timestamp_seconds", ())] == 1000.5
    assert f[("negotiator_ext_comparison_timestamp_seconds", ())] == 1000.5
    assert f[("negotiator_ext_match_agreement_ratio", (("direction", "equivalent"),))] == 0.9
    assert f[("negotiator_ext_matches", (("side", "real"),))] == 10.0
    # a complete pass is its own newest complete pass; its own comparison is shown
    s = samples_with(REC, Standing(last_complete_at=1.0, comparison=None))
    assert s[("negotiator_ext_last_complete_pass_timestamp_seconds", ())] == 1000.5
    assert s[("negotiator_ext_comparison_timestamp_seconds", ())] == 1000.5
    # without a ledger's standing a failed pass knows no complete pass and no comparison
    names = {n for n, _ in samples(FAILED)}
    assert "negotiator_ext_last_complete_pass_timestamp_seconds" not in names
    assert "negotiator_ext_comparison_timestamp_seconds" not in names


def test_the_int_sentinel_limit_is_not_exported_as_a_number():
    import dataclasses
    alice = dataclasses.replace(REC.submitters[0], real_limit=-2147483648.0,
                                shadow_submitter_limit=12.5)
    rec = dataclasses.replace(REC, submitters=(alice,) + REC.submitters[1:])
    s = samples(rec)
    lab = (("group", "group_a"), ("side", "real"), ("submitter", "alice@x"))
    assert ("negotiator_ext_submitter_limit", lab) not in s
    assert s[("negotiator_ext_submitter_limit_unset", lab)] == 1.0
    shadow = (("group", "group_a"), ("side", "shadow"), ("submitter", "alice@x"))
    assert s[("negotiator_ext_submitter_limit", shadow)] == 12.5
    assert ("negotiator_ext_submitter_limit_unset", shadow) not in s
    assert min(v for (n, _), v in s.items()) > -2147483648


def test_time_limit_gauges():
    """The predicted cut of the real cycle (core/time_limits.py) and the compared real
    cycle's out-of-time state, as gauges to alert on."""
    import dataclasses
    limits = {"real": {"schedds": ["vm"], "submitters": []}, "predicted": None,
              "groups_not_served": ["group_b", "group_c"]}
    rec = dataclasses.replace(
        REC, time_limits={"cut": True, "predicted_duration": 135.0, "matches_within": 8766,
                          "matches_beyond": 91234, "groups_not_reached": ["a", "b", "c"]},
        comparison=dataclasses.replace(COMPARISON, time_limits=limits))
    got = samples(rec)
    assert got[("negotiator_ext_time_limits_predicted_cut", ())] == 1
    assert got[("negotiator_ext_time_limits_predicted_duration_seconds", ())] == 135.0
    assert got[("negotiator_ext_time_limits_predicted_matches", (("part", "beyond"),))] == 91234
    assert got[("negotiator_ext_time_limits_predicted_groups_not_reached", ())] == 3
    assert got[("negotiator_ext_real_cycle_out_of_time", ())] == 1
    assert got[("negotiator_ext_real_cycle_groups_not_served", ())] == 2
    # a pass without a prediction or a comparison without time limits exports neither
    plain = samples(REC)
    assert not any(n.startswith(("negotiator_ext_time_limits", "negotiator_ext_real_cycle_out"))
                   for n, _ in plain)
