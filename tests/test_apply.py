"""adapters.apply: applying recommendations once, recording every attempt, going on after a
failure; and that only apply_recommendations ever runs anything."""

from __future__ import annotations

import os
import subprocess

import pytest

from negotiator_ext.adapters.apply import apply_recommendations
from negotiator_ext.core.recommend import Recommendation, RecommendPolicy, recommend
from negotiator_ext.core.records import Adjustment, SubmitterObs
from negotiator_ext.views.recommend import render_json, render_script, render_table

NOW = 1795265266


class FakeLedger:
    """Remembers adjustments in the order recorded and lists them, optionally of one name
    or since a time, as the real ledger does."""

    def __init__(self):
        self.records: list[Adjustment] = []

    def record_adjustment(self, adj: Adjustment) -> None:
        self.records.append(adj)

    def adjustments(self, name=None, since=None) -> list[Adjustment]:
        return [a for a in self.records if (name is None or a.name == name)
                and (since is None or a.applied_at >= since)]


class FakeRun:
    """subprocess.run stand-in: records calls; `results` maps an option (-setfactor, ...)
    to a CompletedProcess or an exception to raise."""

    def __init__(self, results=None, ledger=None):
        self.calls: list[tuple[list[str], dict]] = []
        self.results = results or {}
        self.ledger = ledger
        self.recorded_before: list[int] = []

    def __call__(self, argv, **kw):
        self.calls.append((list(argv), kw))
        if self.ledger is not None:
            self.recorded_before.append(len(self.ledger.records))
        option = next(a for a in argv if a.startswith("-set") or a == "-delete")
        r = self.results.get(option)
        if isinstance(r, BaseException):
            raise r
        return r or subprocess.CompletedProcess(argv, 0, "", "")


class FakeNegotiator:
    def __init__(self, fail=None):
        self.deleted: list[str] = []
        self.fail = fail

    def deleteUser(self, user):
        if self.fail:
            raise self.fail
        self.deleted.append(user)


def rec(kind, name, value=None, lease=86400):
    lease = None if kind in ("delete", "setprio", "group") else lease
    return Recommendation(kind, name, value, None, lease, f"{kind} {name}", {})


RECS = [rec("factor", "a@x", 1.5), rec("ceiling", "a@x", 10.0), rec("floor", "b@x", 4.0),
        rec("delete", "old@x"), rec("setprio", "d@x", 12.34), rec("group", "group_a")]
REPORT_ONLY = [Adjustment('["setprio", "d@x", 12.34]', "setprio", "d@x", 12.34, NOW, None,
                          "setprio d@x", "none", "skipped: report only"),
               Adjustment('["group", "group_a", null]', "group", "group_a", None, NOW, None,
                          "group group_a", "none", "skipped: report only")]


def test_applies_each_change_then_nothing_the_second_time():
    ledger = FakeLedger()
    run = FakeRun(ledger=ledger)
    neg = FakeNegotiator()
    adjs = apply_recommendations(RECS, ledger=ledger, now=NOW, pool="cm", negotiator=neg, run=run)
    assert [c[0] for c in run.calls] == [
        ["condor_userprio", "-pool", "cm", "-setfactor", "a@x", "1.5", "-duration", "86400"],
        ["condor_userprio", "-pool", "cm", "-setceiling", "a@x", "10", "-duration", "86400"],
        ["condor_userprio", "-pool", "cm", "-setfloor", "b@x", "4", "-duration", "86400"]]
    assert all(kw == {"capture_output": True, "text": True, "timeout": 60} for _, kw in run.calls)
    assert neg.deleted == ["old@x"]
    # each change recorded right after it was made (before the next one ran); the
    # report-only items neither run nor are recorded
    assert run.recorded_before == [0, 1, 2]
    assert ledger.records == adjs[:4]
    assert adjs[0] == Adjustment('["factor", "a@x", 1.5]', "factor", "a@x", 1.5, NOW,
                                 NOW + 86400,
                                 "condor_userprio -pool cm -setfactor a@x 1.5 -duration 86400",
                                 "condor_userprio", "applied")
    assert adjs[3] == Adjustment('["delete", "old@x", null]', "delete", "old@x", None, NOW, None,
                                 "htcondor2.Negotiator.deleteUser('old@x')", "bindings",
                                 "applied")
    assert adjs[4:] == REPORT_ONLY
    assert [a.lease_expires for a in adjs[:4]] == [NOW + 86400] * 3 + [None]

    # the same list again, an hour later: nothing runs, nothing new is recorded
    again = apply_recommendations(RECS, ledger=ledger, now=NOW + 3600, pool="cm",
                                  negotiator=neg, run=run)
    assert len(run.calls) == 3 and neg.deleted == ["old@x"] and len(ledger.records) == 4
    assert [a.outcome for a in again] == [
        f"skipped: factor applied at {NOW}, in effect until {NOW + 86400}",
        f"skipped: ceiling applied at {NOW}, in effect until {NOW + 86400}",
        f"skipped: floor applied at {NOW}, in effect until {NOW + 86400}",
        f"skipped: deleted at {NOW}, no complete pass has seen the record since",
        "skipped: report only", "skipped: report only"]

    # after the leases ran out, the leased changes are made again (the others not)
    later = apply_recommendations(RECS, ledger=ledger, now=NOW + 86400, pool="cm",
                                  negotiator=neg, run=run)
    assert [a.outcome for a in later] == ["applied"] * 3 + [
        f"skipped: deleted at {NOW}, no complete pass has seen the record since",
        "skipped: report only", "skipped: report only"]
    assert len(run.calls) == 6 and len(ledger.records) == 7


def test_in_place_is_judged_by_kind_and_name_not_value():
    ledger, run = FakeLedger(), FakeRun()
    apply_recommendations([rec("factor", "a@x", 1.5)], ledger=ledger, now=NOW, run=run)
    # another factor for a@x while our lease runs: the negotiator would refuse it (A25)
    (adj,) = apply_recommendations([rec("factor", "a@x", 2.25)], ledger=ledger, now=NOW + 60,
                                   run=run)
    assert adj.outcome == f"skipped: factor applied at {NOW}, in effect until {NOW + 86400}"
    assert adj.key == '["factor", "a@x", 2.25]' and len(run.calls) == 1
    # another kind, or another name, is not in place
    adjs = apply_recommendations([rec("floor", "a@x", 3.0), rec("factor", "b@x", 1.5)],
                                 ledger=ledger, now=NOW + 60, run=run)
    assert [a.outcome for a in adjs] == ["applied", "applied"] and len(run.calls) == 3
    # a permanent change (no lease) we made stays in place
    apply_recommendations([rec("ceiling", "c@x", 5.0, lease=None)], ledger=ledger, now=NOW,
                          run=run)
    (adj,) = apply_recommendations([rec("ceiling", "c@x", 7.0)], ledger=ledger,
                                   now=NOW + 10 * 86400, run=run)
    assert adj.outcome == f"skipped: ceiling applied at {NOW}, does not expire"


def test_a_delete_counts_until_a_newer_pass_shows_the_record_again():
    ledger, run, neg = FakeLedger(), FakeRun(), FakeNegotiator()
    delete = [rec("delete", "old@x")]
    apply_recommendations(delete, ledger=ledger, now=NOW, negotiator=neg, run=run,
                          latest_pass_time=NOW - 60)
    # the newest complete pass is still the one before the delete: in place
    (adj,) = apply_recommendations(delete, ledger=ledger, now=NOW + 60, negotiator=neg,
                                   run=run, latest_pass_time=NOW - 60)
    assert adj.outcome == f"skipped: deleted at {NOW}, no complete pass has seen the record since"
    (adj,) = apply_recommendations(delete, ledger=ledger, now=NOW + 60, negotiator=neg,
                                   run=run, latest_pass_time=NOW)
    assert adj.outcome.startswith("skipped: deleted at")
    # a pass that started after the delete recorded the name again: deleted again
    (adj,) = apply_recommendations(delete, ledger=ledger, now=NOW + 120, negotiator=neg,
                                   run=run, latest_pass_time=NOW + 1)
    assert adj.outcome == "applied" and neg.deleted == ["old@x", "old@x"]
    assert run.calls == [] and len(ledger.records) == 2


def test_duplicate_in_one_list_runs_once():
    ledger, run = FakeLedger(), FakeRun()
    adjs = apply_recommendations([RECS[0], RECS[0]], ledger=ledger, now=NOW, run=run)
    assert len(run.calls) == 1 and [a.outcome[:7] for a in adjs] == ["applied", "skipped"]


def test_delete_without_negotiator_uses_the_command():
    ledger, run = FakeLedger(), FakeRun()
    (adj,) = apply_recommendations([RECS[3]], ledger=ledger, now=NOW, run=run)
    assert run.calls[0][0] == ["condor_userprio", "-delete", "old@x"]
    assert (adj.method, adj.command, adj.outcome) == ("condor_userprio",
                                                      "condor_userprio -delete old@x", "applied")


def test_failures_are_recorded_and_the_rest_go_on():
    ledger = FakeLedger()
    run = FakeRun({
        "-setfactor": subprocess.CompletedProcess([], 1, "",
                                                  "\nERROR: failed to send SET_PRIORITYFACTOR "
                                                  "command to negotiator\nmore detail\n"),
        "-setceiling": subprocess.TimeoutExpired(["condor_userprio"], 60),
        "-setfloor": FileNotFoundError(2, "No such file or directory", "condor_userprio")})
    neg = FakeNegotiator(fail=RuntimeError("Failed to send command to negotiator"))
    adjs = apply_recommendations(RECS, ledger=ledger, now=NOW, negotiator=neg, run=run)
    assert [a.outcome for a in adjs] == [
        "failed: ERROR: failed to send SET_PRIORITYFACTOR command to negotiator",
        "failed: timed out after 60 s",
        "failed: [Errno 2] No such file or directory: 'condor_userprio'",
        "failed: Failed to send command to negotiator",
        "skipped: report only", "skipped: report only"]
    assert ledger.records == adjs[:4] and len(run.calls) == 3
    # nothing took effect: no lease runs, and the next run tries again
    assert all(a.lease_expires == NOW for a in adjs[:4])
    run.results = {}
    neg.fail = None
    retry = apply_recommendations(RECS, ledger=ledger, now=NOW + 60, negotiator=neg, run=run)
    assert [a.outcome for a in retry] == ["applied"] * 4 + ["skipped: report only"] * 2
    assert len(run.calls) == 6 and neg.deleted == ["old@x"]
    # a non-zero exit without a message
    run.results = {"-setfloor": subprocess.CompletedProcess([], 3, "", "")}
    (adj,) = apply_recommendations([rec("floor", "z@x", 2.0)], ledger=ledger, now=NOW, run=run)
    assert adj.outcome == "failed: exit status 3"


def test_what_the_pool_already_shows_is_skipped_and_not_recorded():
    def obs(name, **kw):
        return SubmitterObs(name, "<none>", False, **kw)
    # leases of each kind running in the pool (not ours): the negotiator would refuse
    current = {"a@x": obs("a@x", factor=1.2, policy_factor=1.0, factor_lease_expires=NOW + 5,
                          ceiling=12, ceiling_lease_expires=NOW + 6),
               "b@x": obs("b@x", floor=4, floor_lease_expires=NOW + 7)}
    ledger, run = FakeLedger(), FakeRun()
    adjs = apply_recommendations(RECS, ledger=ledger, now=NOW, run=run, current=current)
    assert [a.outcome for a in adjs] == [
        f"skipped: a factor lease runs until {NOW + 5} (the negotiator refuses another)",
        f"skipped: a ceiling lease runs until {NOW + 6} (the negotiator refuses another)",
        f"skipped: a floor lease runs until {NOW + 7} (the negotiator refuses another)",
        "skipped: the record is already absent",
        "skipped: report only", "skipped: report only"]
    assert run.calls == [] and ledger.records == []
    # the same values without leases (or leases that ended) are no reason to skip: the
    # recommended lease is made
    current = {"a@x": obs("a@x", factor=1.5, ceiling=10, factor_lease_expires=NOW),
               "b@x": obs("b@x", floor=4), "old@x": obs("old@x")}
    adjs = apply_recommendations(RECS, ledger=ledger, now=NOW, run=run, current=current)
    assert [a.outcome for a in adjs] == ["applied"] * 4 + ["skipped: report only"] * 2
    assert len(ledger.records) == 4


def test_only_apply_runs_anything(monkeypatch):
    """Building recommendations, the table, the JSON or the script runs no command and
    touches no negotiator."""
    def forbidden(*a, **kw):
        raise AssertionError("a command was run")
    for name in ("run", "Popen", "call", "check_call", "check_output"):
        monkeypatch.setattr(subprocess, name, forbidden)
    monkeypatch.setattr(os, "system", forbidden)
    htcondor2 = pytest.importorskip("htcondor2")
    for method in ("deleteUser", "setFactor", "setCeiling", "setPriority"):
        monkeypatch.setattr(htcondor2.Negotiator, method, forbidden)

    def s(name, usage, idle):
        return SubmitterObs(name, "<none>", False, factor=1.0, real_usage=usage,
                            idle_jobs=idle, real_eup=10.0, drift=0.5, predicted_rup=2.0)
    window = [({"uuid": str(i), "status": "complete", "started_at": NOW - 7200 * (6 - i)},
               [s("a", 27, 5), s("b", 1, 5), s("c", 2, 5)], []) for i in range(6)]
    recs = recommend(window, RecommendPolicy(), NOW)
    assert [(r.kind, r.name) for r in recs] == [
        ("ceiling", "a"), ("floor", "b"), ("floor", "c"),
        ("setprio", "a"), ("setprio", "b"), ("setprio", "c")]
    script = render_script(recs, pool="cm", now=NOW)
    assert [ln for ln in script.splitlines() if ln.startswith("condor_userprio")] == [
        "condor_userprio -pool cm -setceiling a 10 -duration 86400",
        "condor_userprio -pool cm -setfloor b 10 -duration 86400",
        "condor_userprio -pool cm -setfloor c 10 -duration 86400"]
    render_table(recs)
    render_json(recs)
    # and apply does run, through the stand-in it is given, only the changes
    run = FakeRun()
    adjs = apply_recommendations(recs, ledger=FakeLedger(), now=NOW, run=run)
    assert len(run.calls) == 3
    assert [a.outcome for a in adjs] == ["applied"] * 3 + ["skipped: report only"] * 3
