"""The negotiator-ext command end to end (in-process)."""

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from conftest import FIXTURES, SCENARIOS, writable_copy
from negotiator_ext.adapters.accounting_ads import plain_ad
from negotiator_ext.adapters.adfiles import parse_ads_text, read_ads
from negotiator_ext.cli import main


def run(capsys, *argv):
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def after_snapshot(tmp_path, scenario):
    """The fixture's pool with the accountant state recorded right after the cycle."""
    d = writable_copy(tmp_path, scenario)
    shutil.copy(FIXTURES / scenario / "expected" / "accounting-after.ads", d / "accounting.ads")
    last = max(a["LastUpdate"] for a in map(plain_ad, read_ads(d / "accounting.ads")))
    meta = json.loads((d / "meta.json").read_text())
    meta["captured_at"] = last  # condor_userprio ran right after the cycle
    (d / "meta.json").write_text(json.dumps(meta))
    return d


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_userprio_prints_what_condor_userprio_printed(tmp_path, capsys, utc, scenario):
    d = after_snapshot(tmp_path, scenario)
    rc, out, err = run(capsys, "userprio", str(d), "-all", "-allusers")
    assert rc == 0, err
    assert out == (FIXTURES / scenario / "expected" / "userprio-after.txt").read_text()


@pytest.mark.parametrize("scenario", [s for s in SCENARIOS if s.startswith("hgq")])
def test_userprio_quotas(tmp_path, capsys, utc, scenario):
    d = after_snapshot(tmp_path, scenario)
    # condor_userprio hides records without LastUsageTime unless -allusers (user_prio.cpp
    # CollectInfo/ProcessInfo): the recording shows every group, so it was -allusers too.
    rc, out, err = run(capsys, "userprio", str(d), "-quotas", "-allusers")
    assert rc == 0, err
    assert out == (FIXTURES / scenario / "expected" / "quotas-after.txt").read_text()


def test_userprio_long_is_the_accounting_ads(capsys):
    d = FIXTURES / "hgq_nested_hep_lep_surplus"
    rc, out, _ = run(capsys, "userprio", str(d), "-l")
    assert rc == 0
    ours = {a["Name"]: a for a in map(plain_ad, parse_ads_text(out, "out"))}
    real = {a["Name"]: a for a in map(plain_ad, read_ads(d / "accounting.ads"))}
    assert set(ours) == set(real)
    for name, ad in real.items():
        for attr in ("Priority", "PriorityFactor", "WeightedResourcesUsed", "IsAccountingGroup",
                     "AccountingGroup", "EffectiveQuota", "SubtreeQuota", "SurplusPolicy"):
            assert ours[name].get(attr) == ad.get(attr), (name, attr)


def test_userprio_at_advances_and_json(capsys):
    d = FIXTURES / "preempt_priority"
    rc, out, _ = run(capsys, "userprio", str(d), "--json")
    before = {r["Name"]: r for r in json.loads(out)["records"]}
    t = json.loads(out)["last_update"] + 86400
    rc, out, _ = run(capsys, "userprio", str(d), "--at", str(t), "--json")
    doc = json.loads(out)
    after = {r["Name"]: r for r in doc["records"]}
    assert rc == 0 and doc["last_update"] == t and doc["partial"] is False
    bob = "bob@refcondor.local"
    # RUP 50 with 10 cores in use for one half-life: 50/2 + 10/2
    assert before[bob]["Priority"] == 50000.0
    assert after[bob]["Priority"] == 30000.0
    assert after[bob]["WeightedAccumulatedUsage"] == 864000.0


def test_errors_are_one_line_with_status_2_and_change_nothing(tmp_path, capsys):
    d = after_snapshot(tmp_path, "pie_three_submitters")
    (d / "slots.ads").write_text((d / "slots.ads").read_text().replace("Cpus = 1\n", "Cpus = 1 +\n", 1))
    digest = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in d.iterdir() if p.is_file()}
    for argv in (["userprio", str(d)], ["userprio", str(tmp_path / "nope")],
                 ["userprio", str(tmp_path)], ["userprio", str(d), "--bogus"],
                 ["userprio", str(d), "--config", str(tmp_path / "missing.cfg")], ["frobnicate"]):
        rc, out, err = run(capsys, *argv)
        assert rc == 2, argv
        assert out == "" and len(err.strip().splitlines()) == 1 and "Traceback" not in err, (argv, err)
        assert err.startswith("negotiator-ext: error: ")
    assert "slots.ads: line" in run(capsys, "userprio", str(d))[2]
    assert digest == {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in d.iterdir() if p.is_file()}


def test_config_option_overrides_the_snapshot_config(tmp_path, capsys):
    cfg = tmp_path / "c"
    cfg.write_text("GROUP_NAMES =\n")
    d = FIXTURES / "hgq_static_30slots"
    rc, out, err = run(capsys, "userprio", str(d), "--config", str(cfg), "--json")
    assert rc == 0
    assert json.loads(out)["config"] == str(cfg)
    assert "is not in this config's GROUP_NAMES" in err   # the recorded groups are unknown now


def test_snapshot_command_uses_the_live_adapter(tmp_path, capsys, mocker):
    from negotiator_ext.adapters.live import CaptureReport
    fake = mocker.patch("negotiator_ext.adapters.live.capture_snapshot", return_value=CaptureReport(
        directory=tmp_path / "s", slots=40, jobs=52, schedds=("a",), missing_schedds=("b",),
        errors={"b": "timed out"}, partial=True))
    mocker.patch("negotiator_ext.adapters.condor_config.local_ext_knobs", return_value={"SNAPSHOT_TIMEOUT": "7"})
    rc, out, err = run(capsys, "snapshot", "--pool", "cm.example.org", "-o", str(tmp_path / "s"))
    assert rc == 0
    fake.assert_called_once_with("cm.example.org", tmp_path / "s", timeout=7)
    assert "PARTIAL snapshot" in out and "missing: b" in out
    assert "schedd b: timed out" in err


def test_snapshot_knobs_come_from_config_and_flags_override(tmp_path, capsys, mocker):
    from negotiator_ext.adapters.live import CaptureReport
    fake = mocker.patch("negotiator_ext.adapters.live.capture_snapshot", return_value=CaptureReport(
        directory=tmp_path / "s", slots=1, jobs=0, schedds=(), missing_schedds=(), errors={}, partial=False))
    cfg = tmp_path / "c"
    cfg.write_text("NEGOTIATOR_EXT_POOL = cm.site.org:9618\nNEGOTIATOR_EXT_SNAPSHOT_TIMEOUT = 12\n")
    assert run(capsys, "snapshot", "--config", str(cfg), "-o", str(tmp_path / "s"))[0] == 0
    fake.assert_called_with("cm.site.org:9618", tmp_path / "s", timeout=12)
    assert run(capsys, "snapshot", "--config", str(cfg), "--timeout", "3", "-o", str(tmp_path / "s"))[0] == 0
    fake.assert_called_with("cm.site.org:9618", tmp_path / "s", timeout=3)


def test_at_takes_an_iso_date_as_well_as_an_epoch(capsys):
    """Issue 16: `--at` takes what `audit --since` takes."""
    from negotiator_ext import cli as cli_mod
    example = str(Path(__file__).resolve().parents[1] / "examples" / "hgq_nested_hep_lep_surplus")
    assert cli_mod.main(["negotiate", example, "--json", "--at", "1795272466"]) == 0
    by_epoch = capsys.readouterr().out
    assert cli_mod.main(["negotiate", example, "--json", "--at", "2026-11-21T14:47:46Z"]) == 0
    assert capsys.readouterr().out == by_epoch
    assert cli_mod.main(["negotiate", example, "--at", "yesterday"]) == 2
    assert "'yesterday' is neither epoch seconds nor an ISO 8601 date" in capsys.readouterr().err


def test_a_host_config_htcondor_cannot_read_is_named_not_skipped(tmp_path, monkeypatch, capsys):
    """Issue 16: with a malformed CONDOR_CONFIG, `ledger show` names its bad line instead
    of saying "no ledger" (our knobs would be silently taken as unset)."""
    bad = tmp_path / "condor_config"
    bad.write_text("NEGOTIATOR_EXT_STATE_DIR = /tmp\nthis is not a config line\n")
    monkeypatch.setenv("CONDOR_CONFIG", str(bad))
    assert main(["ledger", "show"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"negotiator-ext: error: {bad}: ")
    assert "Line 2" in err[0] and "no ledger" not in err[0]


def test_the_console_command_ends_a_one_shot_command_with_its_output_whole(tmp_path):
    """`negotiator-ext negotiate` (cli.console_main) ends its process at once after the
    command: the whole output flushed, the exit status kept, bad input still exit 2."""
    import subprocess
    import sys
    example = Path(__file__).parent.parent / "examples" / "hgq_nested_hep_lep_surplus"
    run = [sys.executable, "-m", "negotiator_ext"]
    out = subprocess.run([*run, "negotiate", str(example), "--json", "--matches"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert len(doc["matches"]) == 27
    bad = subprocess.run([*run, "userprio", str(tmp_path / "missing")], capture_output=True,
                         text=True, timeout=120)
    assert bad.returncode == 2 and "no such snapshot directory" in bad.stderr
    # a reader that stops early (a pipe closed): no traceback, the status of the command
    pipe = subprocess.run(f"{subprocess.list2cmdline(run)} negotiate {example} --matches "
                          "| head -1", shell=True, capture_output=True, text=True,
                          timeout=120)
    assert pipe.stdout.startswith("Negotiation cycle at") and "Traceback" not in pipe.stderr
