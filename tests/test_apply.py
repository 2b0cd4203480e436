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
    """Remembers adjustments; the newest applied one with a key is active until its lease
    ends (forever when it has none), as the real ledger does."""

    def __init__(self):
        self.records: list[Adjustment] = []

    def record_adjustment(self, adj: Adjustment) -> None:
        self.records.append(adj)

    def active_adjustment(self, key: str, now: int) -> Adjustment | None:
        for adj in reversed(self.records):
            if adj.key == key and adj.outcome == "applied":
                if adj.lease_expires is None or adj.lease_expires > now:
                    return adj
                return None
        return None


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
    lease = None if kind in ("delete", "setprio") else lease
    return Recommendation(kind, name, value, None, lease, f"{kind} {name}", {})


RECS = [rec("factor", "a@x", 1.5), rec("ceiling", "a@x", 10.0), rec("floor", "b@x", 4.0),
        rec("delete", "old@x"), rec("setprio", "d@x", 12.34)]


def test_applies_each_kind_then_nothing_the_second_time():
    ledger = FakeLedger()
    run = FakeRun(ledger=ledger)
    neg = FakeNegotiator()
    adjs = apply_recommendations(RECS, ledger=ledger, now=NOW, pool="cm", negotiator=neg, run=run)
    assert [c[0] for c in run.calls] == [
        ["condor_userprio", "-pool", "cm", "-setfactor", "a@x", "1.5", "-duration", "86400"],
        ["condor_userprio", "-pool", "cm", "-setceiling", "a@x", "10", "-duration", "86400"],
        ["condor_userprio", "-pool", "cm", "-setfloor", "b@x", "4", "-duration", "86400"],
        ["condor_userprio", "-pool", "cm", "-setprio", "d@x", "12.34"]]
    assert all(kw == {"capture_output": True, "text": True, "timeout": 60} for _, kw in run.calls)
    assert neg.deleted == ["old@x"]
    # each change recorded right after it was made (before the next one ran)
    assert run.recorded_before == [0, 1, 2, 4]
    assert ledger.records == adjs
    assert adjs[0] == Adjustment('["factor", "a@x", 1.5]', "factor", "a@x", 1.5, NOW,
                                 NOW + 86400,
                                 "condor_userprio -pool cm -setfactor a@x 1.5 -duration 86400",
                                 "condor_userprio", "applied")
    assert adjs[3] == Adjustment('["delete", "old@x", null]', "delete", "old@x", None, NOW, None,
                                 "htcondor2.Negotiator.deleteUser('old@x')", "bindings",
                                 "applied")
    assert [a.lease_expires for a in adjs] == [NOW + 86400] * 3 + [None, None]

    # the same list again, an hour later: nothing runs, nothing new is recorded
    again = apply_recommendations(RECS, ledger=ledger, now=NOW + 3600, pool="cm",
                                  negotiator=neg, run=run)
    assert len(run.calls) == 4 and neg.deleted == ["old@x"] and len(ledger.records) == 5
    assert [a.outcome for a in again] == [
        f"skipped: applied at {NOW}, in effect until {NOW + 86400}"] * 3 + [
        f"skipped: applied at {NOW}, does not expire"] * 2

    # after the leases ran out, the leased changes are made again (the others not)
    later = apply_recommendations(RECS, ledger=ledger, now=NOW + 86400, pool="cm",
                                  negotiator=neg, run=run)
    assert [a.outcome for a in later][:3] == ["applied"] * 3
    assert [a.outcome.split(":")[0] for a in later][3:] == ["skipped", "skipped"]
    assert len(run.calls) == 7 and len(ledger.records) == 8


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
        "-setfloor": FileNotFoundError(2, "No such file or directory", "condor_userprio"),
        "-setprio": subprocess.CompletedProcess([], 3, "", "")})
    neg = FakeNegotiator(fail=RuntimeError("Failed to send command to negotiator"))
    adjs = apply_recommendations(RECS, ledger=ledger, now=NOW, negotiator=neg, run=run)
    assert [a.outcome for a in adjs] == [
        "failed: ERROR: failed to send SET_PRIORITYFACTOR command to negotiator",
        "failed: timed out after 60 s",
        "failed: [Errno 2] No such file or directory: 'condor_userprio'",
        "failed: Failed to send command to negotiator",
        "failed: exit status 3"]
    assert ledger.records == adjs and len(run.calls) == 4
    # nothing took effect: no lease runs, and the next run tries again
    assert all(a.lease_expires == NOW for a in adjs)
    run.results = {}
    neg.fail = None
    retry = apply_recommendations(RECS, ledger=ledger, now=NOW + 60, negotiator=neg, run=run)
    assert [a.outcome for a in retry] == ["applied"] * 5 and len(run.calls) == 8


def test_current_values_already_in_place_are_skipped_and_not_recorded():
    def obs(name, **kw):
        return SubmitterObs(name, "<none>", False, **kw)
    current = {"a@x": obs("a@x", factor=1.5, policy_factor=1.0, factor_lease_expires=NOW + 5,
                          ceiling=10),
               "b@x": obs("b@x", floor=4),
               "d@x": obs("d@x", real_rup=12.341)}
    ledger, run = FakeLedger(), FakeRun()
    adjs = apply_recommendations(RECS, ledger=ledger, now=NOW, run=run, current=current)
    assert [a.outcome for a in adjs] == [
        f"skipped: factor 1.5 already leased until {NOW + 5}",
        "skipped: ceiling 10 already set",
        "skipped: floor 4 already set",
        "skipped: the record is already absent",
        "skipped: real priority already 12.341"]
    assert run.calls == [] and ledger.records == []
    # the same factor without a running lease is not in place as a lease: it is applied
    current["a@x"] = obs("a@x", factor=1.5, ceiling=-1)
    current["old@x"] = obs("old@x")
    adjs = apply_recommendations(RECS, ledger=ledger, now=NOW, run=run, current=current)
    assert [a.outcome[:7] for a in adjs] == ["applied", "applied", "skipped", "applied",
                                             "skipped"]
    assert len(ledger.records) == 3


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
                            idle_jobs=idle, drift=0.5, predicted_rup=2.0)
    window = [({"uuid": str(i), "status": "complete"}, [s("a", 27, 5), s("b", 1, 5),
                                                        s("c", 2, 5)], []) for i in range(6)]
    recs = recommend(window, RecommendPolicy(), NOW)
    assert {r.kind for r in recs} == {"factor", "ceiling", "floor", "setprio"}
    assert render_script(recs, pool="cm", now=NOW).count("condor_userprio -pool cm") == 7
    render_table(recs)
    render_json(recs)
    # and apply does run, through the stand-in it is given
    run = FakeRun()
    apply_recommendations(recs, ledger=FakeLedger(), now=NOW, run=run)
    assert len(run.calls) == 7
