"""A pool of several negotiators (a sharded pool): the snapshot's negotiators/ configs,
each negotiator's own accountant (Accounting ads by NegotiatorName), the capture of every
negotiator, the command line's --negotiator and the roll-up (`shards`). The recordings of
a real 25.14 pool with two negotiators are in tests/data/negotiators/ (README.md there);
test_shards_recorded.py checks our cycles against them."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import classad2
import htcondor2
import pytest

from conftest import unpack_recording
from fakepool import FakePool, fixture_config_knobs
from negotiator_ext.adapters import remote_knobs
from negotiator_ext.adapters.live import capture_snapshot
from negotiator_ext.adapters.snapshot import (load_snapshot, negotiator_config_name,
                                              read_negotiator_configs)
from negotiator_ext.cli import main
from negotiator_ext.core.shards import roll_up
from negotiator_ext.errors import InputError
from negotiator_ext.pool import load_pool, negotiators_of

DATA = Path(__file__).parent / "data" / "negotiators"
FIRST, SECOND = "shard1@vm", "NEGOTIATOR2@vm"
NOW = 1795265300


@pytest.fixture
def shards(tmp_path) -> Path:
    return unpack_recording(DATA / "two_shards.tar.gz", tmp_path)


# --------------------------------------------------------------- the snapshot's layout

@pytest.mark.parametrize("name,file", [
    ("NEGOTIATOR2@cm.example.org", "NEGOTIATOR2@cm.example.org.config"),
    ("a/../b", "a%2F..%2Fb.config"),
    ("..", "...config"),
    ("x y\n", "x%20y%0A.config"),
    ("é", "%C3%A9.config"),
])
def test_a_negotiators_config_file_name_is_safe_and_reads_back(tmp_path, name, file):
    assert negotiator_config_name(name) == file
    d = tmp_path / "negotiators"
    d.mkdir()
    (d / file).write_text("")
    assert read_negotiator_configs(d) == {name: d / file}


@pytest.mark.parametrize("bad,why", [
    ("notes.txt", "expected <Name>.config files only"),
    ("%FF.config", "not UTF-8"),
    (".config", "no name"),
])
def test_anything_else_in_negotiators_is_refused_naming_it(tmp_path, bad, why):
    d = tmp_path / "negotiators"
    d.mkdir()
    (d / bad).write_text("")
    with pytest.raises(InputError) as e:
        read_negotiator_configs(d)
    assert why in str(e.value) and bad in str(e.value)


def test_a_pool_of_two_negotiators_has_no_default(shards):
    assert load_snapshot(shards).negotiators == (SECOND, FIRST)
    assert negotiators_of(shards) == [SECOND, FIRST]
    with pytest.raises(InputError) as e:
        load_pool(shards)
    msg = e.value.one_line()
    assert "the pool has 2 negotiators (NEGOTIATOR2@vm, shard1@vm)" in msg
    assert "--negotiator NAME" in msg and str(shards / "negotiators") in msg
    with pytest.raises(InputError, match="no negotiator 'shard3@vm' in this snapshot"):
        load_pool(shards, negotiator="shard3@vm")


def test_each_negotiator_sees_its_own_slots_config_accountant_and_ad(shards):
    one, two = load_pool(shards, negotiator=FIRST), load_pool(shards, negotiator=SECOND)
    assert one.config.source.endswith(negotiator_config_name(FIRST))
    assert two.config.slot_constraint == "Shard == 2"
    # 20 fake slots and the startd's own 2 without Shard; 12 fake ones with Shard = 2
    assert (len(one.slot_ads), len(two.slot_ads)) == (22, 12)
    assert not {a["Name"] for a in one.slot_ads} & {a["Name"] for a in two.slot_ads}
    # grp.a is the first one's best user (real priority 2) and the second one's worst (200)
    a = "grp.a@negotiator-ext.test"
    assert one.accountant.customers[a]["Priority"] == pytest.approx(2, rel=1e-3)
    assert two.accountant.customers[a]["Priority"] == pytest.approx(200, rel=1e-3)
    assert [ad["Name"] for ad in one.snapshot.negotiator_ads()] == [FIRST]
    assert [ad["Name"] for ad in two.snapshot.negotiator_ads()] == [SECOND]


def test_one_negotiators_snapshot_with_another_ones_leftover_ads(shards):
    """No negotiators/: the Accounting ads of two negotiators would mix two accountants.
    The negotiator's own ad says whose they are; without it the snapshot is refused."""
    shutil.rmtree(shards / "negotiators")
    ads = [ad for ad in classad2.parseAds((shards / "negotiator.ads").read_text())]
    (shards / "negotiator.ads").write_text(
        "".join(ad.printOld() + "\n" for ad in ads if ad["Name"] == FIRST))
    pool = load_pool(shards)
    assert pool.snapshot.negotiator_name == FIRST
    assert all(ad["NegotiatorName"] == FIRST for ad in pool.snapshot.accounting)
    assert negotiators_of(shards) == [None]
    (shards / "negotiator.ads").unlink()
    with pytest.raises(InputError, match="the pool has 2 negotiators' Accounting ads"):
        load_pool(shards)
    assert negotiators_of(shards) == [SECOND, FIRST]
    # the top-level `config` is the one of the negotiator the collector located (here
    # the second): without negotiators/, every negotiator is read under it
    assert load_pool(shards, negotiator=FIRST).config.slot_constraint == "Shard == 2"
    with pytest.raises(InputError, match="its Accounting ads are from"):
        load_pool(shards, negotiator="typo@vm")


# ------------------------------------------------------------------------- the capture

def test_the_capture_reads_every_negotiators_config(tmp_path, mocker):
    fake = FakePool()
    second = classad2.parseOne(fake.negotiator[0].printOld())
    second["Name"] = "NEGOTIATOR2@vm"
    second["MyAddress"] = "<127.0.0.1:9999>"
    fake.negotiator = [fake.negotiator[0], second]
    fake.negotiator_remote["NEGOTIATOR2@vm"] = {
        **fixture_config_knobs(), "NEGOTIATOR2.NEGOTIATOR_SLOT_CONSTRAINT": "Shard == 2",
        "NEGOTIATOR2.GROUP_QUOTA_extra": "5", "LOCALNAME": "NEGOTIATOR2"}
    fake.install(mocker)
    out = tmp_path / "snap"
    report = capture_snapshot(None, out, now=NOW)
    assert not report.partial, report.errors
    configs = read_negotiator_configs(out / "negotiators")
    assert sorted(configs) == ["NEGOTIATOR2@vm", "vm"]
    assert (out / "config").read_text() == configs["vm"].read_text()
    text = configs["NEGOTIATOR2@vm"].read_text()
    assert "NEGOTIATOR_SLOT_CONSTRAINT = Shard == 2" in text
    assert "GROUP_QUOTA_extra = 5" in text and "NEGOTIATOR2." not in text
    assert ("Collector.locateAll", htcondor2.DaemonTypes.Negotiator) in fake.calls


def test_a_negotiator_that_cannot_be_read_makes_the_capture_partial(tmp_path, mocker):
    fake = FakePool()
    second = classad2.parseOne(fake.negotiator[0].printOld())
    second["Name"] = "NEGOTIATOR2@vm"
    fake.negotiator = [fake.negotiator[0], second]
    fake.negotiator_remote["NEGOTIATOR2@vm"] = RuntimeError("connection refused")
    fake.install(mocker)
    report = capture_snapshot(None, tmp_path / "snap", now=NOW)
    assert report.partial
    assert "connection refused" in report.errors["negotiator NEGOTIATOR2@vm"]
    assert sorted(read_negotiator_configs(tmp_path / "snap" / "negotiators")) == ["vm"]


def test_a_pool_of_one_negotiator_gets_no_negotiators_directory(tmp_path, mocker):
    FakePool().install(mocker)
    capture_snapshot(None, tmp_path / "snap", now=NOW)
    assert not (tmp_path / "snap" / "negotiators").exists()


@pytest.mark.parametrize("table,expected", [
    # the daemon's own local name wins over NEGOTIATOR., which wins over the plain knob
    ({"LOCALNAME": "NEGOTIATOR2", "GROUP_QUOTA_x": "1", "NEGOTIATOR.GROUP_QUOTA_x": "2",
      "NEGOTIATOR2.GROUP_QUOTA_x": "3", "OTHER.GROUP_QUOTA_y": "4"},
     {"GROUP_QUOTA_x": "3"}),
    ({"LOCALNAME": "NEGOTIATOR", "GROUP_QUOTA_x": "1", "NEGOTIATOR.GROUP_QUOTA_x": "2",
      "NEGOTIATOR2.GROUP_QUOTA_x": "3"},
     {"GROUP_QUOTA_x": "2"}),
])
def test_a_negotiators_own_overrides_are_the_ones_read(table, expected):
    from fakepool import FakeRemoteParam
    remote = FakeRemoteParam(table)
    assert remote_knobs.select_policy_knobs(remote) == expected


# ------------------------------------------------------------- the command line, roll-up

def test_negotiate_needs_the_negotiator_and_takes_it(shards, capsys):
    assert main(["negotiate", str(shards)]) == 2
    assert "name one with --negotiator NAME" in capsys.readouterr().err
    assert main(["negotiate", str(shards), "--negotiator", SECOND, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["cycle"]["slots"] == 12 and len(doc["matches"]) == 12
    assert main(["userprio", str(shards), "-name", FIRST, "-allusers"]) == 0
    assert "grp.a@negotiator-ext.test" in capsys.readouterr().out


def test_the_roll_up_puts_each_submitter_across_the_shards(shards, capsys):
    assert main(["shards", str(shards), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [n["name"] for n in doc["negotiators"]] == [SECOND, FIRST]
    assert [(n["slots"], n["matches"]) for n in doc["negotiators"]] == [(12, 12), (22, 20)]
    assert doc["pool"]["matches"] == 32 and doc["pool"]["in_several"] == 3
    by = {s["name"].split("@")[0]: s for s in doc["submitters"]}
    assert by["grp.c"]["matched"] == 29 and by["grp.c"]["usage_after"] == 29
    assert by["grp.c"]["pool_share"] == pytest.approx(29 / 41)
    # a: real priority 2 in shard1, 200 in shard2: a 100x spread none of them sees
    assert by["grp.a"]["priority_spread"] == pytest.approx(100, rel=1e-3)
    assert by["grp.a"]["shards"][SECOND]["matched"] == 1
    assert main(["shards", str(shards)]) == 0
    text = capsys.readouterr().out
    assert "2 negotiator(s), 34 slots" in text and "Whole pool" in text
    assert "100.00x" in text


def test_roll_up_of_shards_without_submitters_in_common():
    doc = roll_up([
        ("n1", 4, {"cycle": {"pool_weight": 4.0, "partial": False}, "matches": [{}] * 2,
                   "submitters": [{"name": "u", "usage_before": 1.0, "usage_after": 3.0,
                                   "matched": 2, "matched_weight": 2.0, "eup": 10.0}]}),
        ("n2", 6, {"cycle": {"pool_weight": 6.0, "partial": True}, "matches": [],
                   "submitters": [{"name": "v", "usage_before": 0.0, "usage_after": 0.0,
                                   "matched": 0, "matched_weight": 0.0, "eup": 5.0}]}),
    ])
    assert doc["pool"]["pool_weight"] == 10.0 and doc["pool"]["in_several"] == 0
    assert [s["name"] for s in doc["submitters"]] == ["u", "v"]
    assert doc["submitters"][0]["pool_share"] == pytest.approx(0.3)
    assert doc["submitters"][0]["priority_spread"] is None
    assert doc["negotiators"][1]["partial"] is True


# ---------------------------------------------------------------- shadow, recommend

def test_a_shadow_pass_records_each_negotiator_as_its_own_stream(shards, tmp_path, capsys):
    """One snapshot of two negotiators: two passes, each under its own ledger stream,
    each with its own cycle; the metrics file holds both, labelled by negotiator."""
    ledger, prom = tmp_path / "l.sqlite", tmp_path / "shadow.prom"
    assert main(["shadow", "--replay", str(shards), "--ledger", str(ledger),
                 "--metrics-file", str(prom), "--json"]) == 0
    recs = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["pool"] for r in recs] == ["<local> (negotiator NEGOTIATOR2@vm)",
                                         "<local> (negotiator shard1@vm)"]
    assert [len(r["shadow_matches"]) for r in recs] == [12, 20]
    assert recs[0]["uuid"] != recs[1]["uuid"]
    from negotiator_ext.adapters.ledger import open_ledger
    with open_ledger(str(ledger), create=False, read_only=True) as led:
        assert sorted(led.pools()) == sorted(r["pool"] for r in recs)
    text = prom.read_text()
    for name in (SECOND, FIRST):
        assert f'negotiator_ext_pass_timestamp_seconds{{negotiator="{name}"}}' in text
    assert text.count("# TYPE negotiator_ext_pass_timestamp_seconds gauge") == 1


def test_recommend_changes_the_named_negotiators_accountant_only():
    from negotiator_ext.core.recommend import Recommendation
    from negotiator_ext.core.records import Adjustment
    from negotiator_ext.core.shards import split_stream, stream_name
    from negotiator_ext.views.recommend import command_argv, same_negotiator
    stream = stream_name("cm.example.org", "NEGOTIATOR2@cm")
    assert split_stream(stream) == ("cm.example.org", "NEGOTIATOR2@cm")
    assert split_stream("cm.example.org") == ("cm.example.org", None)
    rec = Recommendation(kind="factor", name="u@x", value=2000.0, current=1000.0,
                         lease=None, reason="")
    assert command_argv(rec, stream) == ["condor_userprio", "-pool", "cm.example.org",
                                         "-name", "NEGOTIATOR2@cm", "-setfactor", "u@x",
                                         "2000"]
    assert command_argv(rec, stream_name("<local>", "n@h"))[:3] == [
        "condor_userprio", "-name", "n@h"]
    made = Adjustment("k", "factor", "u@x", 2000.0, 0, None,
                      "condor_userprio -name NEGOTIATOR2@cm -setfactor u@x 2000",
                      "condor_userprio", "applied")
    assert same_negotiator(made, stream)
    assert not same_negotiator(made, stream_name("cm.example.org", "other@cm"))
    assert not same_negotiator(made, "cm.example.org")


def test_each_negotiators_pass_has_its_own_shadow_ad_and_all_are_withdrawn(tmp_path):
    from negotiator_ext.shadow_state import ShadowSettings
    from negotiator_ext.shadow_publish import ad_name, unpublish
    settings = ShadowSettings(pool="cm", ledger_url=str(tmp_path / "l.sqlite"),
                              state_dir=tmp_path, interval=60, matchlog=None, timeout=30,
                              retention_days=0, keep_snapshots=1, advertise=True,
                              metrics_file=None, metrics_port=0, name="negotiator-ext@cm")
    streams = ["cm (negotiator n1@cm)", "cm (negotiator n2@cm)"]
    assert [ad_name(settings, s) for s in ["cm", *streams]] == [
        "negotiator-ext@cm", "negotiator-ext@cm (n1@cm)", "negotiator-ext@cm (n2@cm)"]
    withdrawn = []

    class Collector:
        def __init__(self, pool=None):
            pass

        def advertise(self, ads, command):
            withdrawn.extend(ad["Name"] for ad in ads)

    class Bindings:
        pass
    Bindings.Collector = Collector
    assert unpublish(settings, htcondor=Bindings, streams=streams) is None
    assert withdrawn == ["negotiator-ext@cm", "negotiator-ext@cm (n1@cm)",
                         "negotiator-ext@cm (n2@cm)"]


def test_the_loop_reports_every_negotiators_record_of_each_pass(tmp_path, mocker):
    """The loop (cron's --interval, the daemon) hands each negotiator's record to its
    report, one pass after another."""
    import threading
    from negotiator_ext.shadow import ShadowLoop
    from negotiator_ext.shadow_state import ShadowSettings
    fake = FakePool()
    second = classad2.parseOne(fake.negotiator[0].printOld())
    second["Name"] = "NEGOTIATOR2@vm"
    fake.negotiator = [fake.negotiator[0], second]
    fake.negotiator_remote["NEGOTIATOR2@vm"] = {**fixture_config_knobs(),
                                                "NEGOTIATOR_SLOT_CONSTRAINT": "false"}
    fake.install(mocker)
    import dataclasses
    settings = dataclasses.replace(ShadowSettings.from_knobs(
        {"STATE_DIR": str(tmp_path / "state"), "ADVERTISE": "false"}), interval=0.01)
    loop = ShadowLoop(settings, htcondor=htcondor2, clock=lambda: NOW)
    stop, seen = threading.Event(), []

    def report(rec):
        seen.append(rec)
        if len(seen) == 2:
            stop.set()
    loop.run_forever(stop, on_pass=report)
    assert [r.pool for r in seen] == ["<local> (negotiator NEGOTIATOR2@vm)",
                                      "<local> (negotiator vm)"]
    assert len(seen[0].shadow_matches) == 0 and len(seen[1].shadow_matches) > 0
    assert set(loop.latest) == {r.pool for r in seen}


def test_an_accounting_ad_whose_negotiator_name_is_not_a_string_is_refused(shards):
    text = (shards / "accounting.ads").read_text()
    (shards / "accounting.ads").write_text(
        text.replace('NegotiatorName = "shard1@vm"', "NegotiatorName = 42", 1))
    with pytest.raises(InputError) as e:
        load_pool(shards, negotiator=FIRST)
    msg = e.value.one_line()
    assert "accounting.ads" in msg and "NegotiatorName" in msg and "not a string" in msg


def test_the_roll_up_of_a_pool_of_one_negotiator_names_it(tmp_path, capsys):
    d = unpack_recording(DATA.parent / "rules" / "skip_matchmaking.tar.gz", tmp_path)
    assert main(["shards", str(d), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [n["name"] for n in doc["negotiators"]] == ["vm"]
    assert doc["pool"]["matches"] == 20 and doc["pool"]["in_several"] == 0


def test_the_standing_published_with_a_pass_is_its_own_negotiators():
    from types import SimpleNamespace
    from negotiator_ext.shadow_publish import standing_of
    loop = SimpleNamespace(standing="last pass's", latest={
        "p (negotiator a)": ("rec a", "a's"), "p (negotiator b)": ("rec b", "b's")})
    assert standing_of(loop, "p (negotiator b)") == "b's"
    assert standing_of(loop, "p") == "last pass's"          # a pool of one negotiator
    assert standing_of(SimpleNamespace(), "p") is None       # a loop without them
