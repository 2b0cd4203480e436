"""The slot projection of a files snapshot (adapters/slot_projection.py): the slot ads of
a cycle over files are built from the attributes something can read, and decide
exactly as the whole ads do."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from conftest import FIXTURES, recorded_snapshot_dirs, writable_copy
from negotiator_ext.adapters import slot_projection as sp
from negotiator_ext.adapters.snapshot import load_snapshot
from negotiator_ext.cli import main
from negotiator_ext.cycle import run_cycle
from negotiator_ext.pool import build_pool, load_pool, negotiators_of

PACKAGE = Path(__file__).resolve().parent.parent / "negotiator_ext"


def _decisions(pool) -> str:
    return json.dumps(run_cycle(pool).to_json(), sort_keys=True, default=str)


def _both_ways(directory: Path, negotiator=None) -> tuple[str, str, object]:
    whole = load_pool(directory, negotiator=negotiator)
    projected = load_pool(directory, negotiator=negotiator, project_slots=True)
    return _decisions(whole), _decisions(projected), projected


def test_every_recording_decides_the_same_with_its_slots_projected(tmp_path):
    compared, left_out = 0, []
    for d in recorded_snapshot_dirs(tmp_path):
        for name in negotiators_of(d):
            whole, projected, pool = _both_ways(d, name)
            assert projected == whole, d
            proj = pool.snapshot.slot_projection
            assert proj.names is not None, d        # real job ads leave room to project
            left_out.append(len(proj.present) - len(proj.names))
            compared += 1
    assert compared >= 30
    # most of a real slot ad is left out (HTCondor 25.14 startds: 180-210 attributes; the
    # fake slot ads of condor_advertise: about 60)
    assert min(left_out) >= 15 and max(left_out) > 100


def test_every_slot_attribute_the_code_names_is_kept():
    """The words kept are those of the whole package's source: names the rules read by
    name in core/ and adapters/, and no slot attribute nothing names."""
    words = sp.code_words()
    # what the accountant and the pool read of a claimed slot, and the collector order
    assert {"concurrencylimits", "preemptingconcurrencylimits", "matchedconcurrencylimits",
            "ghostmultiplier", "remoteuser", "slotweight", "daemonstarttime"} <= words
    # a slot attribute nothing names is not among them
    assert not {"keyboardidle", "monitorselfage", "hibernationstate"} & words


def test_without_the_package_sources_every_attribute_is_kept(tmp_path, monkeypatch):
    monkeypatch.setattr(sp, "_PACKAGE", tmp_path)       # no .py files there
    sp.code_words.cache_clear()
    try:
        whole, projected, pool = _both_ways(FIXTURES / "hgq_static_30slots")
    finally:
        sp.code_words.cache_clear()
    assert projected == whole and pool.snapshot.slot_projection.names is None


def test_a_claimed_slot_keeps_its_concurrency_limits(tmp_path):
    d = _with_job_lines(tmp_path, "hgq_static_30slots", "",
                        lambda i: 'ConcurrencyLimits = "lic"' if i % 3 == 0 else "")
    whole, projected, pool = _both_ways(d)
    assert projected == whole
    assert "concurrencylimits" in pool.snapshot.slot_projection.names
    assert sum("ConcurrencyLimits" in ad for ad in pool.snapshot.slots) == 10


def _with_job_lines(tmp_path, scenario: str, extra: str, slot_extra: str = "") -> Path:
    d = writable_copy(tmp_path, scenario)
    jobs = (d / "jobs.ads").read_text().strip().split("\n\n")
    jobs = [re.sub(r"(?m)^Requirements = (.*)$", lambda m: f"Requirements = ({m.group(1)}){extra}",
                   ad, count=1) for ad in jobs]
    (d / "jobs.ads").write_text("\n\n".join(jobs) + "\n\n")
    if slot_extra:
        slots = (d / "slots.ads").read_text().strip().split("\n\n")
        slots = [ad + "\n" + slot_extra(i) if slot_extra(i) else ad
                 for i, ad in enumerate(slots)]
        (d / "slots.ads").write_text("\n\n".join(slots) + "\n\n")
    return d


def test_a_slot_attribute_only_the_jobs_reference_is_kept(tmp_path):
    # half the slots say HasScratchFoo; the jobs ask for it through TARGET and unscoped
    d = _with_job_lines(tmp_path, "hgq_static_30slots",
                        " && TARGET.HasScratchFoo && ScratchFooSize > 10",
                        lambda i: f"HasScratchFoo = {'true' if i % 2 else 'false'}\n"
                                  f"ScratchFooSize = {i}")
    whole, projected, pool = _both_ways(d)
    assert projected == whole
    names = pool.snapshot.slot_projection.names
    assert {"hasscratchfoo", "scratchfoosize"} <= names
    assert "keyboardidle" not in names and "monitorselfage" not in names
    # the slots' texts the cycle reads too (added after the early build)
    assert all({"hasscratchfoo", "scratchfoosize"} <= set(t) <= names for t in pool.slot_texts)
    assert 0 < len(json.loads(projected)["matches"]) < len(json.loads(_decisions(load_pool(
        writable_copy(tmp_path, "hgq_static_30slots", "plain"))))["matches"])  # it decided


def test_an_expression_that_builds_names_keeps_every_attribute(tmp_path):
    d = _with_job_lines(tmp_path, "hgq_static_30slots", ' && eval("TARGET.Cpus") > 0')
    whole, projected, pool = _both_ways(d)
    assert projected == whole
    assert pool.snapshot.slot_projection.names is None


@pytest.mark.parametrize("text, dynamic", [
    ('split(TARGET.CondorVersion)[1] == "25.14.0"', False),
    ("[a = 1; b = TARGET.Cpus].b > 0", False),
    ('TARGET["Memory"] > 10', True),
    ("TARGET[x] > 10", True),
    ('eval("Cpus")', True),
    ('"[not a subscript" == TARGET.Name', False),
])
def test_what_counts_as_a_name_built_at_run_time(text, dynamic):
    assert (sp.referenced_names([text]) is None) is dynamic


def test_a_config_that_reads_more_parses_more(tmp_path):
    """A pool built again under a what-if config (`build_pool`) that ranks on a slot
    attribute nothing else reads: that attribute is parsed, and the ranks decide as
    with the whole ads."""
    d = _with_job_lines(tmp_path, "hgq_static_30slots", "",
                        lambda i: f"FooSpeed = {(i * 7) % 11}")
    pool = load_pool(d, project_slots=True)
    assert "foospeed" not in pool.snapshot.slot_projection.names
    cfg = dataclasses.replace(pool.config, pre_job_rank="MY.FooSpeed", ignore_job_ranks=False)
    # (the pool built again from what it was built from: the files' order, pool.inputs)
    ranked = build_pool(pool.inputs()[0], cfg)
    assert "foospeed" in ranked.snapshot.slot_projection.names
    assert all("foospeed" in t for t in ranked.slot_texts)
    assert not any("foospeed" in t for t in pool.slot_texts)
    whole = load_pool(d)
    assert _decisions(ranked) == _decisions(build_pool(whole.inputs()[0], cfg))
    assert _decisions(ranked) != _decisions(pool)       # the rank changed something


def test_a_bad_line_in_an_attribute_nothing_reads_is_still_named(tmp_path, capsys):
    d = writable_copy(tmp_path, "hgq_static_30slots")
    slots = (d / "slots.ads").read_text().split("\n\n")
    slots[3] = slots[3].replace("\n", "\nMonitorSelfAge = 3 +* 4\n", 1)
    (d / "slots.ads").write_text("\n\n".join(slots))
    assert main(["negotiate", str(d)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "slots.ads" in err[0] and "MonitorSelfAge" in err[0]
    assert re.search(r"line \d+", err[0]) and "ad 4" in err[0]


def test_the_snapshot_records_what_its_slot_ads_hold(tmp_path):
    snap = load_snapshot(FIXTURES / "pslot_consumption_policy_cpu", slot_ads=False)
    assert snap.slot_rows_only and snap.slots == ()
    pool = load_pool(FIXTURES / "pslot_consumption_policy_cpu", project_slots=True)
    proj = pool.snapshot.slot_projection
    ad = pool.snapshot.slots[0]
    assert {k.lower() for k in ad.keys()} == proj.names
    # the p-slot's Child* lists and its consumption policy are kept whole
    assert {"childcpus", "consumptioncpus", "machineresources", "cpus"} <= proj.names
    # each slot's texts, as the cycle reads them: its ad's names, nothing more
    for ad, texts in zip(pool.snapshot.slots, pool.slot_texts):
        assert type(texts) is dict and set(texts) == {k.lower() for k in ad.keys()}
    # (for those ads only: a snapshot whose slots were replaced takes the whole rows)
    assert proj.texts_of(pool.snapshot.slots) is not None
    assert proj.texts_of(tuple(list(pool.snapshot.slots))) is None


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(refs=st.lists(st.sampled_from(["KeyboardIdle", "TARGET.LoadAvg", "MY.Foo",
                                      "TARGET.Disk", "OpSysMajorVer", "TARGET.HasFoo"]),
                     min_size=0, max_size=3),
       threshold=st.integers(0, 12))
def test_random_references_decide_as_the_whole_ads(tmp_path_factory, refs, threshold):
    """Jobs whose Requirements read random slot attributes (some every slot has, some
    half of them, one a job's own), against slots with those attributes: the projected
    cycle equals the whole one."""
    tmp = tmp_path_factory.mktemp("p")
    extra = "".join(f" && ({r} =?= undefined || {r} >= {threshold})" for r in refs)
    d = _with_job_lines(tmp, "hgq_static_30slots", extra,
                        lambda i: f"HasFoo = {i % 13}\nKeyboardIdle = {i % 17}\nLoadAvg = {i / 30}")
    whole, projected, _ = _both_ways(d)
    assert projected == whole


def test_slot_ads_built_early_under_one_config_take_what_another_reads(tmp_path):
    """The slot ads built beside the jobs' read (`early`) under one config, projected
    for the cycle (`project`) under another that ranks on a slot attribute neither the
    slots, the jobs nor the first config read: that attribute is added to the ads and
    to their texts, and the cycle decides as with the whole ads under that config."""
    from negotiator_ext.adapters.condor_config import load_config
    d = _with_job_lines(tmp_path, "hgq_static_30slots", "",
                        lambda i: f"FooSpeed = {(i * 7) % 11}")
    first = load_config(d / "config")
    ranked = dataclasses.replace(first, pre_job_rank="MY.FooSpeed", ignore_job_ranks=False)
    snap = load_snapshot(d, slot_ads=False,
                         early_slots=lambda texts, source: sp.early(texts, source, first))
    assert not snap.slot_projection.jobs_read
    assert "foospeed" not in snap.slot_projection.names
    snap = sp.project(snap, ranked)
    assert "foospeed" in snap.slot_projection.names
    pool = build_pool(snap, ranked)
    assert all("FooSpeed" in ad for ad in pool.slot_ads)
    assert all("foospeed" in t for t in pool.slot_texts)
    whole = build_pool(load_pool(d).inputs()[0], ranked)
    assert _decisions(pool) == _decisions(whole)
    assert _decisions(pool) != _decisions(build_pool(load_pool(d).inputs()[0], first))
