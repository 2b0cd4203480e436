"""`negotiator-ext whatif` (issue 16): the cycle under two configs, or on two snapshots,
and what changes per group and per submitter."""

from __future__ import annotations

import json

from conftest import FIXTURES
from negotiator_ext.cli import main
from negotiator_ext.core.whatif import KEYS

EXAMPLE = FIXTURES / "hgq_nested_hep_lep_surplus"


def run(capsys, *args):
    rc = main(["whatif", *map(str, args)])
    captured = capsys.readouterr()
    assert rc == 0, captured.err
    return captured.out


def negotiate_json(capsys, *args):
    assert main(["negotiate", *map(str, args), "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_the_snapshots_own_config_changes_nothing(tmp_path, capsys):
    doc = json.loads(run(capsys, EXAMPLE, "--config", EXAMPLE / "config", "--json"))
    assert doc["total"]["delta"] == 0 and doc["changed"] == {"groups": 0, "submitters": 0}
    assert all(set(r) == set(KEYS) for r in doc["groups"] + doc["submitters"])
    assert "Groups: no change" in run(capsys, EXAMPLE, "--config", EXAMPLE / "config")


def test_surplus_for_the_parent_group_is_what_negotiate_under_that_config_gives(tmp_path, capsys):
    """group_physics made to accept surplus: hep's jobs may use what chemistry leaves."""
    new = tmp_path / "surplus.config"
    new.write_text((EXAMPLE / "config").read_text().replace(
        "GROUP_ACCEPT_SURPLUS_group_physics = false", "GROUP_ACCEPT_SURPLUS_group_physics = true"))
    doc = json.loads(run(capsys, EXAMPLE, "--config", new, "--json"))
    before = negotiate_json(capsys, EXAMPLE)
    after = negotiate_json(capsys, EXAMPLE, "--config", new)
    assert doc["total"]["before"] == len(before["matches"]) == 27
    assert doc["total"]["after"] == len(after["matches"])
    by_group = {r["name"]: r for r in doc["groups"]}
    for g in after["groups"]:
        n = sum(1 for m in after["matches"] if m["group"] == g["name"])
        assert by_group[g["name"]]["after"] == n
        assert by_group[g["name"]]["quota_after"] == g["effective_quota"]
    hep = by_group["group_physics.hep"]
    assert doc["groups"][0]["name"] == "group_physics.hep"           # largest change first
    # the numbers: hep 17 -> 27 matches; higgs's limit 17 -> 28, fermi's 0 -> 4
    assert (hep["before"], hep["after"], hep["delta"]) == (17, 27, 10)
    subs = {r["name"].split("@")[0]: r for r in doc["submitters"]}
    higgs, fermi = subs["group_physics.hep.higgs"], subs["group_physics.lep.fermi"]
    assert (higgs["quota_before"], higgs["quota_after"]) == (17.0, 28.0)
    assert (fermi["quota_before"], fermi["quota_after"], fermi["delta"]) == (0.0, 4.0, 0)
    assert doc["changed"] == {"groups": 1, "submitters": 2}
    text = run(capsys, EXAMPLE, "--config", new)
    assert "Groups that change (1 of 5)" in text and f"+{hep['delta']}" in text


def test_two_snapshots_each_under_its_own_config(capsys):
    other = FIXTURES / "hgq_static_30slots"
    doc = json.loads(run(capsys, EXAMPLE, "--against", other, "--json"))
    a, b = negotiate_json(capsys, EXAMPLE), negotiate_json(capsys, other)
    assert (doc["total"]["before"], doc["total"]["after"]) == (len(a["matches"]), len(b["matches"]))
    subs = {r["name"]: (r["before"], r["after"]) for r in doc["submitters"]}
    for s in b["submitters"]:
        assert subs[s["name"]][1] == s["matched"]


def test_config_or_against_is_required(capsys):
    assert main(["whatif", str(EXAMPLE)]) == 2
    assert "one of the arguments --config --against is required" in capsys.readouterr().err
