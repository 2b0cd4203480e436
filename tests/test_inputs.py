"""Snapshot directories and ad files: native inputs in, clear errors on bad input."""

import json
import shutil

import pytest

from conftest import FIXTURES, SCENARIOS, writable_copy
from negotiator_ext.adapters.adfiles import parse_ads_text, read_ads
from negotiator_ext.adapters.snapshot import load_snapshot
from negotiator_ext.errors import InputError
from negotiator_ext.pool import load_pool


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_every_recorded_ad_file_parses_completely(scenario):
    d = FIXTURES / scenario
    snap = load_snapshot(d)
    for name, ads in [("slots.ads", snap.slots), ("submitters.ads", snap.submitters),
                      ("accounting.ads", snap.accounting)]:
        text = (d / name).read_text()
        blocks = [b for b in text.split("\n\n") if b.strip()]
        assert len(ads) == len(blocks), name
        # no attribute line dropped: each ad has as many attributes as lines
        assert [len(a) for a in ads] == [len(b.strip().splitlines()) for b in blocks], name
    assert sum(len(v) for v in snap.jobs.values()) == len(
        [b for b in (d / "jobs.ads").read_text().split("\n\n") if b.strip()])
    assert snap.config_path == d / "config" and snap.meta["captured_at"] > 0


def test_json_form_reads_the_same_ads(tmp_path):
    src = FIXTURES / "preempt_priority"
    shutil.copytree(src, tmp_path / "snap")
    slots = read_ads(src / "slots.ads")
    (tmp_path / "snap" / "slots.ads").unlink()
    (tmp_path / "snap" / "slots.json").write_text("[\n" + ",\n".join(a.printJson() for a in slots) + "\n]\n")
    snap = load_snapshot(tmp_path / "snap")
    assert len(snap.slots) == len(slots)
    for a, b in zip(slots, snap.slots):
        assert a.printOld() == b.printOld()
    # and the pool built from it has the same usage
    assert load_pool(tmp_path / "snap").accountant == load_pool(src).accountant


@pytest.mark.parametrize("text,message", [
    ('Name = "s1"\nCpus = 1 +\n', 'f.ads: line 2: ad 1 (s1): attribute Cpus: cannot parse value \'1 +\''),
    ('Name = "s1"\n\nName = "s2"\njunk line\n', "f.ads: line 4: ad 2 (s2): not an attribute assignment: 'junk line'"),
    ('[{"Name": "s1"},', "f.ads: line 1: not valid JSON: Expecting value"),
    ('[{"Name": "s1", "R": "\\/Expr(a +)\\/"}]', "f.ads: ad 1 (s1): attribute R: cannot parse value"),
    ('[1, 2]', "f.ads: expected a JSON array of ClassAds, as condor_status -json prints"),
])
def test_malformed_ads_are_named(text, message):
    with pytest.raises(InputError) as e:
        parse_ads_text(text, "f.ads")
    assert e.value.one_line() == message


def test_duplicate_attribute_lines_are_not_an_error():
    (ad,) = parse_ads_text('A = 1\nA = 2\n', "f.ads")
    assert ad["A"] == 2


def copy(tmp_path, scenario="pie_three_submitters"):
    return writable_copy(tmp_path, scenario, "snap")


def test_snapshot_directory_errors(tmp_path):
    with pytest.raises(InputError, match="no such snapshot directory"):
        load_snapshot(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match="no slots.ads or slots.json"):
        load_snapshot(tmp_path / "empty")
    d = copy(tmp_path)
    (d / "slots.json").write_text("[]")
    with pytest.raises(InputError, match="both slots.ads and slots.json"):
        load_snapshot(d)
    (d / "slots.json").unlink()
    (d / "meta.json").write_text("{nope")
    with pytest.raises(InputError, match="meta.json: .*not valid JSON"):
        load_snapshot(d)


def test_non_numeric_cpus_names_file_ad_and_attribute(tmp_path):
    d = copy(tmp_path)
    text = (d / "slots.ads").read_text().replace("Cpus = 1\n", 'Cpus = "one"\n', 1)
    (d / "slots.ads").write_text(text)
    with pytest.raises(InputError) as e:
        load_pool(d)
    assert e.value.source.endswith("slots.ads") and e.value.attribute == "Cpus"
    assert e.value.ad.startswith("1 (") and 'not a number: "one"' in e.value.one_line()


def test_bad_accounting_value_is_named(tmp_path):
    d = copy(tmp_path)
    text = (d / "accounting.ads").read_text().replace("PriorityFactor = 1000.0", 'PriorityFactor = "high"', 1)
    (d / "accounting.ads").write_text(text)
    with pytest.raises(InputError) as e:
        load_pool(d)
    assert e.value.attribute == "PriorityFactor" and "bob@refcondor.local" in e.value.ad


def test_partial_snapshot_is_reported(tmp_path):
    d = copy(tmp_path)
    meta = json.loads((d / "meta.json").read_text())
    meta.update(partial=True, missing_schedds=["schedd2@x"])
    (d / "meta.json").write_text(json.dumps(meta))
    pool = load_pool(d)
    assert pool.snapshot.partial and pool.snapshot.missing_schedds == ("schedd2@x",)
    assert any("partial snapshot (did not answer: schedd2@x)" in w for w in pool.warnings)


def test_pending_matches_are_kept_until_the_next_check(tmp_path):
    """Usage the accountant counted for matches not yet claimed (no claimed slot shows
    them) is removed at the next CheckMatches, as the real accountant removes a match
    that was never claimed."""
    from negotiator_ext.core.accountant import Accountant
    d = copy(tmp_path, "preempt_priority")
    text = (d / "accounting.ads").read_text().replace("WeightedResourcesUsed = 10.0\n", "WeightedResourcesUsed = 13.0\n")
    (d / "accounting.ads").write_text(text)
    pool = load_pool(d)
    bob = "bob@refcondor.local"
    assert pool.accountant.customers[bob]["WeightedResourcesUsed"] == 13.0
    acc = Accountant(pool.accountant, pool.config, pool.groups)
    t = pool.accountant.last_update_time + 60
    acc.update_priorities(t)
    acc.check_matches(pool.slots, t)
    assert acc.customers[bob]["WeightedResourcesUsed"] == 10.0
    assert not any(k.endswith("#pending-match") for k in acc.resources)


def test_partial_snapshot_without_missing_schedds_names_what_failed(tmp_path):
    """A capture is partial also when the negotiator or an optional collector query
    failed; the warning names those, not an unknown schedd."""
    d = copy(tmp_path)
    meta = json.loads((d / "meta.json").read_text())
    meta.update(partial=True, missing_schedds=[],
                errors={"negotiator": "cannot locate the negotiator: timed out"})
    (d / "meta.json").write_text(json.dumps(meta))
    pool = load_pool(d)
    assert any("partial snapshot (did not answer: negotiator)" in w for w in pool.warnings)


def test_bad_negotiator_ad_file_does_not_stop_a_cycle(tmp_path):
    """negotiator.ads is read only when asked for (shadow mode), not by every command."""
    d = copy(tmp_path)
    (d / "negotiator.ads").write_text("this is = = not an ad\n")
    pool = load_pool(d)
    with pytest.raises(InputError):
        pool.snapshot.negotiator_ads()
