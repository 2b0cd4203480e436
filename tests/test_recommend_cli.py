"""`negotiator-ext recommend` end to end on a ledger: exact commands, a reviewable script,
nothing changed without --apply, and --apply twice changing the pool once."""

from __future__ import annotations

import subprocess

import pytest

from negotiator_ext.adapters.ledger import open_ledger
from negotiator_ext.cli import main
from negotiator_ext.core.records import PassRecord, SubmitterObs

T0 = 1_800_000_000


def _pass(i: int, status: str = "complete") -> PassRecord:
    t = T0 + 600 * i
    subs = (
        SubmitterObs(name="alice@example.org", group="<none>", is_group=False, factor=1.0,
                     policy_factor=1.0, real_usage=8.0, idle_jobs=50, running_jobs=8),
        SubmitterObs(name="bob@example.org", group="<none>", is_group=False, factor=1.0,
                     policy_factor=1.0, real_usage=2.0, idle_jobs=50, running_jobs=2),
    )
    return PassRecord(uuid=f"p{i}", pool="cm.example.org", started_at=t, finished_at=t + 5,
                      snapshot_time=t, status=status, reason=None, real_cycle_time=t,
                      real_accountant_time=t, shadow_duration=0.1, capture_duration=0.1,
                      submitters=subs, comparable=True)


@pytest.fixture
def ledger_url(tmp_path):
    url = str(tmp_path / "ledger.sqlite")
    with open_ledger(url) as ledger:
        for i in range(8):
            ledger.record_pass(_pass(i))
        ledger.record_pass(_pass(8, status="partial"))   # never used for a recommendation
    return url


AT = T0 + 600 * 9


def test_script_has_the_exact_bounded_lease_commands(ledger_url, capsys):
    assert main(["recommend", "--ledger", ledger_url, "--at", str(AT), "--script", "-"]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines()
             if line and not line.startswith("#")]
    assert lines == [
        "set -e",
        "condor_userprio -pool cm.example.org -setfactor alice@example.org 1.5 -duration 86400",
        "condor_userprio -pool cm.example.org -setfloor bob@example.org 5 -duration 86400",
    ]


def test_table_and_json_carry_reasons_and_numbers(ledger_url, capsys):
    assert main(["recommend", "--ledger", ledger_url, "--at", str(AT)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("8 complete pass(es) of cm.example.org in the last 24 h; 2 recommendation(s)")
    assert "alice@example.org" in out and "bob@example.org" in out
    assert "Nothing was changed in the pool (use --apply" in out
    import json
    assert main(["recommend", "--ledger", ledger_url, "--at", str(AT), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["passes"] == 8 and doc["apply"] is False
    factor = next(r for r in doc["recommendations"] if r["kind"] == "factor")
    assert factor["name"] == "alice@example.org" and factor["value"] == 1.5
    assert factor["lease"] == 86400 and factor["reason"]
    assert factor["numbers"]["passes"] == 8 or factor["numbers"]


def test_without_apply_nothing_runs_and_with_apply_twice_once(ledger_url, mocker, capsys):
    real_run = subprocess.run
    userprio = mocker.Mock(return_value=subprocess.CompletedProcess([], 0, "", ""))

    def fake_run(argv, *a, **kw):       # the config is read in a child process: let it run
        if argv[0] == "condor_userprio":
            return userprio(argv, *a, **kw)
        return real_run(argv, *a, **kw)

    mocker.patch("subprocess.run", side_effect=fake_run)
    run = userprio
    assert main(["recommend", "--ledger", ledger_url, "--at", str(AT)]) == 0
    assert run.call_count == 0
    assert main(["recommend", "--ledger", ledger_url, "--at", str(AT), "--apply"]) == 0
    assert run.call_count == 2
    argv = [c.args[0] for c in run.call_args_list]
    assert argv[0] == ["condor_userprio", "-pool", "cm.example.org", "-setfactor",
                       "alice@example.org", "1.5", "-duration", "86400"]
    assert main(["recommend", "--ledger", ledger_url, "--at", str(AT + 60), "--apply"]) == 0
    assert run.call_count == 2          # already applied, leases still running
    with open_ledger(ledger_url) as ledger:
        assert [a.outcome for a in ledger.adjustments()] == ["applied", "applied"]


def test_script_file_is_written_executable(ledger_url, tmp_path, capsys):
    script = tmp_path / "changes.sh"
    assert main(["recommend", "--ledger", ledger_url, "--at", str(AT), "--script", str(script)]) == 0
    assert script.read_text().startswith("#!/bin/sh")
    assert script.stat().st_mode & 0o100


def test_missing_ledger_is_an_input_error(tmp_path, capsys):
    assert main(["recommend", "--ledger", str(tmp_path / "none.sqlite")]) == 2
    assert "none.sqlite" in capsys.readouterr().err
