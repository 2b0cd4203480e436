"""`negotiator-ext recommend` end to end on a ledger: exact commands, a reviewable script,
nothing changed without --apply, --apply twice changing the pool once, a delete made
again once a newer pass shows the record, and our own lease renewed.

Every run passes `--config` with an empty file (a valid HTCondor configuration: all
defaults), so this host's configuration and knobs are never read.
"""

from __future__ import annotations

import json
import subprocess
from unittest import mock

import pytest

from negotiator_ext.adapters.ledger import open_ledger
from negotiator_ext.cli import main
from negotiator_ext.core.records import PassRecord, SubmitterObs

T0 = 1_800_000_000
HOUR = 3600
AT = T0 + HOUR * 7 + 2400          # 40 min after the last complete pass, 20 after the partial one
POOL = "cm.example.org"
ALICE, BOB, GONE = "alice@example.org", "bob@example.org", "gone@example.org"
FACTOR_CMD = (f"condor_userprio -pool {POOL} -setfactor {ALICE} 1.5 -duration 86400")
FLOOR_CMD = (f"condor_userprio -pool {POOL} -setfloor {BOB} 5 -duration 86400")


def _sub(name, usage, eup, **kw):
    return SubmitterObs(name=name, group="<none>", is_group=False, factor=kw.pop("factor", 1.0),
                        policy_factor=1.0, real_usage=usage, real_eup=eup,
                        idle_jobs=kw.pop("idle", 50), running_jobs=int(usage), **kw)


def _pass(uuid: str, t: int, subs, status: str = "complete") -> PassRecord:
    return PassRecord(uuid=uuid, pool=POOL, started_at=t, finished_at=t + 5, snapshot_time=t,
                      status=status, reason=None, real_cycle_time=t, real_accountant_time=t,
                      shadow_duration=0.1, capture_duration=0.1, submitters=tuple(subs),
                      comparable=True)


def _ledger(tmp_path, alice_eup: float, bob_eup: float, extra=()) -> str:
    """8 complete passes an hour apart (7 h of evidence) in which alice uses 8 and bob 2,
    both with idle jobs (fair share 5 each), then a partial pass with the opposite
    (alice 2 with a bad priority, bob 8), which must not count: were it used, alice's mean
    gap would be +46.7% (factor 1.47) and its records the latest."""
    url = str(tmp_path / "ledger.sqlite")
    with open_ledger(url) as ledger:
        for i in range(8):
            ledger.record_pass(_pass(f"p{i}", T0 + HOUR * i,
                                     [_sub(ALICE, 8.0, alice_eup), _sub(BOB, 2.0, bob_eup),
                                      *extra]))
        ledger.record_pass(_pass("p8", T0 + HOUR * 7 + 1200,
                                 [_sub(ALICE, 2.0, 5000.0), _sub(BOB, 8.0, 1.0)], "partial"))
    return url


@pytest.fixture
def ledger_url(tmp_path):
    """Equal priorities (EUP 500 each): the pie should split evenly, yet alice gets 4 x
    what bob gets: alice is favoured (raise its factor) and bob starved (factor 1
    already: a floor)."""
    return _ledger(tmp_path, 500.0, 500.0)


def recommend(url, config, *args) -> int:
    """The command; with --apply, "--at T" becomes the clock (the command refuses --at
    with --apply: changes are recorded at the real time)."""
    args = list(args)
    if "--apply" in args and "--at" in args:
        i = args.index("--at")
        t = float(args[i + 1])
        del args[i:i + 2]
        with mock.patch("time.time", return_value=t):
            return main(["recommend", "--ledger", url, "--config", config, *args])
    return main(["recommend", "--ledger", url, "--config", config, *args])


@pytest.fixture
def userprio(mocker):
    """condor_userprio stand-in (exit 0); anything else (the config is read in a child
    process) runs for real."""
    real_run = subprocess.run
    fake = mocker.Mock(return_value=subprocess.CompletedProcess([], 0, "", ""))

    def run(argv, *a, **kw):
        if argv[0] == "condor_userprio":
            return fake(argv, *a, **kw)
        return real_run(argv, *a, **kw)

    mocker.patch("subprocess.run", side_effect=run)
    return fake


def _commands(out: str) -> list[str]:
    return [line for line in out.splitlines() if line and not line.startswith("#")]


def _outcomes(out: str) -> list[str]:
    return [line for line in out.splitlines() if line.startswith(("applied:", "skipped:",
                                                                   "failed:"))]


def test_script_has_the_exact_bounded_lease_commands(ledger_url, config, capsys):
    assert recommend(ledger_url, config, "--at", str(AT), "--script", "-") == 0
    assert _commands(capsys.readouterr().out) == ["set -e", FACTOR_CMD, FLOOR_CMD]


def test_a_favoured_user_with_a_worse_priority_gets_no_raise(tmp_path, config, capsys):
    # alice (EUP 800) above its share but ranked behind bob (200): the priority system is
    # already correcting it. bob (ranked ahead) is starved all the same: its floor stays.
    url = _ledger(tmp_path, 800.0, 200.0)
    assert recommend(url, config, "--at", str(AT), "--script", "-") == 0
    assert _commands(capsys.readouterr().out) == ["set -e", FLOOR_CMD]


def test_table_and_json_carry_reasons_and_numbers(ledger_url, config, capsys):
    assert recommend(ledger_url, config, "--at", str(AT)) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"8 complete pass(es) of {POOL} in the last 24 h; "
                          "2 recommendation(s)\n")
    assert [line.split()[:4] for line in out.splitlines()[3:5]] == [
        ["factor", ALICE, "1.00", "1.50"], ["floor", BOB, "none", "5"]]
    assert out.endswith("Nothing was changed in the pool (use --apply to make these changes).\n")
    assert recommend(ledger_url, config, "--at", str(AT), "--json") == 0
    doc = json.loads(capsys.readouterr().out)
    assert (doc["passes"], doc["apply"], doc["count"]) == (8, False, 2)
    assert [(r["kind"], r["name"], r["value"], r["current"], r["lease"], r["numbers"],
             r["command"]) for r in doc["recommendations"]] == [
        ("factor", ALICE, 1.5, 1.0, 86400,
         {"mean_gap": 0.6, "passes": 8, "eligible_passes": 8, "span_hours": 7.0,
          "fair_share": 5.0, "usage": 8.0, "policy_factor": 1.0, "step": 1.5}, FACTOR_CMD),
        ("floor", BOB, 5.0, None, 86400,
         {"mean_gap": -0.6, "passes": 8, "eligible_passes": 8, "span_hours": 7.0,
          "fair_share": 5.0, "usage": 2.0, "policy_factor": 1.0, "floor": 0}, FLOOR_CMD)]
    assert doc["recommendations"][0]["reason"] == (
        "used more than its fair share while its priority still ranked it ahead: mean gap "
        "+60.0% over the 8 passes in which it ran, beyond 20% in 8 of them")


def test_without_apply_nothing_runs_and_with_apply_twice_once(ledger_url, config, userprio,
                                                              capsys):
    assert recommend(ledger_url, config, "--at", str(AT)) == 0
    assert userprio.call_count == 0
    capsys.readouterr()
    assert recommend(ledger_url, config, "--at", str(AT), "--apply") == 0
    assert [c.args[0] for c in userprio.call_args_list] == [FACTOR_CMD.split(),
                                                             FLOOR_CMD.split()]
    assert _outcomes(capsys.readouterr().out) == [f"applied: {FACTOR_CMD}",
                                                  f"applied: {FLOOR_CMD}"]
    assert recommend(ledger_url, config, "--at", str(AT + 60), "--apply") == 0
    assert userprio.call_count == 2          # already applied, leases still running
    assert _outcomes(capsys.readouterr().out) == [
        f"skipped: factor applied at {AT}, in effect until {AT + 86400}: {FACTOR_CMD}",
        f"skipped: floor applied at {AT}, in effect until {AT + 86400}: {FLOOR_CMD}"]
    with open_ledger(ledger_url) as ledger:
        assert [(a.kind, a.name, a.value, a.applied_at, a.lease_expires, a.command, a.outcome)
                for a in ledger.adjustments()] == [
            ("factor", ALICE, 1.5, AT, AT + 86400, FACTOR_CMD, "applied"),
            ("floor", BOB, 5.0, AT, AT + 86400, FLOOR_CMD, "applied")]


class FakeNegotiator:
    def __init__(self):
        self.deleted: list[str] = []

    def deleteUser(self, user):
        self.deleted.append(user)


def test_a_delete_is_made_again_once_a_newer_pass_shows_the_record(tmp_path, config, userprio,
                                                                    mocker, capsys):
    stale = _sub(GONE, 0.0, 0.5, idle=0, last_usage_time=T0 - 40 * 86400)
    url = _ledger(tmp_path, 500.0, 500.0, extra=[stale])
    neg = FakeNegotiator()
    mocker.patch("negotiator_ext.cli._negotiator", return_value=neg)
    delete = f"htcondor2.Negotiator.deleteUser('{GONE}')"
    assert recommend(url, config, "--at", str(AT), "--apply") == 0
    assert _outcomes(capsys.readouterr().out) == [
        f"applied: {FACTOR_CMD}", f"applied: {FLOOR_CMD}", f"applied: {delete}"]
    assert neg.deleted == [GONE]
    # the record is back in a pass after the delete (alice's and bob's leases now show)
    with open_ledger(url) as ledger:
        ledger.record_pass(_pass("p9", AT + 600, [
            _sub(ALICE, 8.0, 500.0, factor=1.5, factor_lease_expires=AT + 86400),
            _sub(BOB, 2.0, 500.0, floor=5, floor_lease_expires=AT + 86400), stale]))
    assert recommend(url, config, "--at", str(AT + 1200), "--apply") == 0
    assert _outcomes(capsys.readouterr().out) == [f"applied: {delete}"]
    assert neg.deleted == [GONE, GONE] and userprio.call_count == 2


def test_our_factor_lease_is_renewed_near_its_end(ledger_url, config, userprio, capsys):
    assert recommend(ledger_url, config, "--at", str(AT), "--apply") == 0
    assert userprio.call_count == 2
    # a day of passes under the leases: alice still gets 4 x bob's share
    with open_ledger(ledger_url) as ledger:
        for k in range(12, 23):
            ledger.record_pass(_pass(f"q{k}", AT + HOUR * k, [
                _sub(ALICE, 8.0, 500.0, factor=1.5, factor_lease_expires=AT + 86400),
                _sub(BOB, 2.0, 500.0, floor=5, floor_lease_expires=AT + 86400)]))
    capsys.readouterr()
    near_end = AT + 82000               # 4400 s left of 86400: within the last tenth
    assert recommend(ledger_url, config, "--at", str(near_end), "--json") == 0
    (rec,) = json.loads(capsys.readouterr().out)["recommendations"]
    assert (rec["kind"], rec["name"], rec["value"], rec["current"]) == ("factor", ALICE, 1.5, 1.5)
    assert rec["numbers"]["renews_lease_until"] == AT + 86400
    # the negotiator refuses a second lease while ours runs: --apply waits for its end
    assert recommend(ledger_url, config, "--at", str(near_end), "--apply") == 0
    assert _outcomes(capsys.readouterr().out) == [
        f"skipped: factor applied at {AT}, in effect until {AT + 86400}: {FACTOR_CMD}"]
    assert userprio.call_count == 2
    # once it has ended, the renewal is made (bob's floor, still shown by the pool until
    # a cycle restores it, is not repeated); a fresh pass is needed to apply anything
    with open_ledger(ledger_url) as ledger:
        ledger.record_pass(_pass("q24", AT + 86400, [
            _sub(ALICE, 8.0, 500.0, factor=1.5, factor_lease_expires=AT + 86400),
            _sub(BOB, 2.0, 500.0, floor=5, floor_lease_expires=AT + 86400)]))
    assert recommend(ledger_url, config, "--at", str(AT + 86400 + 60), "--apply") == 0
    assert _outcomes(capsys.readouterr().out) == [f"applied: {FACTOR_CMD}"]
    assert userprio.call_count == 3


def test_script_file_is_written_executable(ledger_url, config, tmp_path, capsys):
    script = tmp_path / "changes.sh"
    assert recommend(ledger_url, config, "--at", str(AT), "--script", str(script)) == 0
    text = script.read_text()
    assert text.startswith("#!/bin/sh\n")
    assert _commands(text) == ["set -e", FACTOR_CMD, FLOOR_CMD]
    assert script.stat().st_mode & 0o100


def test_missing_ledger_is_an_input_error(tmp_path, config, capsys):
    assert recommend(str(tmp_path / "none.sqlite"), config) == 2
    err = capsys.readouterr().err
    assert err.startswith("negotiator-ext: error: ") and "none.sqlite" in err


def test_apply_refuses_stale_evidence_and_a_fake_clock(ledger_url, config, userprio, capsys):
    assert main(["recommend", "--ledger", ledger_url, "--config", config, "--at", str(AT),
                 "--apply"]) == 2
    assert "--at: not with --apply" in capsys.readouterr().err
    # two hours after the newest complete pass: the pool may have changed since
    assert recommend(ledger_url, config, "--at", str(AT + 7200), "--apply") == 2
    assert "nothing applied: the newest complete pass is" in capsys.readouterr().err
    assert userprio.call_count == 0


def test_nothing_recommended_says_what_the_rules_need_and_what_the_window_has(
        ledger_url, tmp_path, config, capsys):
    """Issue 35: "No recommendations." alone left a user guessing. Three of the eight
    complete passes (the last 3 h) are too few for the rules (6 over 6 h by default)."""
    assert recommend(ledger_url, config, "--at", str(AT), "--window", "3") == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"3 complete pass(es) of {POOL} in the last 3 h; 0 recommendation(s)"
    assert out[1] == ("No recommendations: the rules need at least 6 complete passes "
                      "spanning 6 h (NEGOTIATOR_EXT_RECOMMEND_MIN_PASSES, "
                      "NEGOTIATOR_EXT_RECOMMEND_MIN_HOURS); the window has 3 complete "
                      "passes spanning 2.0 h.")
    assert recommend(ledger_url, config, "--at", str(AT), "--window", "3", "--json") == 0
    doc = json.loads(capsys.readouterr().out)
    assert (doc["passes"], doc["span_hours"], doc["needs"]) == (
        3, 2.0, {"passes": 6, "span_hours": 6.0})
    # enough passes, and usage at the fair share: the window was enough, nothing persisted
    url = str(tmp_path / "even.sqlite")
    with open_ledger(url) as ledger:
        for i in range(8):
            ledger.record_pass(_pass(f"p{i}", T0 + HOUR * i,
                                     [_sub(ALICE, 5.0, 500.0), _sub(BOB, 5.0, 500.0)]))
    assert recommend(url, config, "--at", str(AT)) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[1] == ("No recommendations: the window has 8 complete passes spanning 7.0 h, "
                      "enough for the rules (they need 6 over 6 h), and no submitter's "
                      "or group's gap persisted in them.")
