"""The slot projection of a live capture (adapters/collector_projection.py): the
collector is asked for the slot attributes something can read, the capture asks again
when the slots, the config or the jobs reference one more, every recording decides the
same with its slot ads cut to that projection, and a later config that reads an
attribute the capture did not ask for stops with one line."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import classad2
import pytest

from conftest import FIXTURES, recorded_snapshot_dirs
from fakepool import FakePool
from negotiator_ext.adapters import collector_projection as cp
from negotiator_ext.adapters.adfiles import _split_line, read_ads
from negotiator_ext.adapters.job_projection import BASE_JOB_ATTRS
from negotiator_ext.adapters.live import capture_snapshot
from negotiator_ext.adapters.slot_cache import SlotCache
from negotiator_ext.adapters.slot_projection import code_words
from negotiator_ext.cli import main
from negotiator_ext.cycle import run_cycle
from negotiator_ext.errors import InputError
from negotiator_ext.pool import load_pool, negotiators_of

NOW = 1795265300


def _decisions(pool) -> str:
    return json.dumps(run_cycle(pool).to_json(), sort_keys=True, default=str)


def _ads_lines(path: Path) -> list[list[str]]:
    ads, one = [], []
    for line in path.read_text().splitlines():
        if line.strip():
            one.append(line)
        elif one:
            ads.append(one)
            one = []
    if one:
        ads.append(one)
    return ads


def _converged(d: Path, pool) -> list[str]:
    """The projection a capture of the pool in `d` ends with: the first guess, widened
    by what the slots, the jobs and the negotiator's expression knobs reference."""
    refs = cp.Refs()
    slots = _ads_lines(d / "slots.ads")
    names = refs.of_lines({ln for ad in slots for ln in ad})
    jobs = [ad for p in sorted(d.glob("jobs*.ads")) for ad in _ads_lines(p)]
    names |= refs.of_jobs(jobs)
    names |= refs.of_texts(cp.config_texts(pool.config).values())
    assert not refs.dynamic
    return cp.projection_of([*cp.first_guess(), *names])


def _projected_copy(d: Path, dest: Path, projection: list[str]) -> Path:
    """`d` as a capture with `projection` would have written it: its slot ads cut to
    the projection, which meta.json records."""
    shutil.copytree(d, dest)
    keep = {n.lower() for n in projection}
    ads = _ads_lines(d / "slots.ads")
    cut = [[ln for ln in ad if _split_line(ln)[0].lower() in keep] for ad in ads]
    (dest / "slots.ads").write_text("".join("\n".join(ad) + "\n\n" for ad in cut))
    meta_path = dest / "meta.json"
    meta = json.loads(meta_path.read_text()) if meta_path.exists() else {}
    meta["slot_projection"] = projection
    meta_path.write_text(json.dumps(meta))
    return dest


def test_every_recording_decides_the_same_with_the_collectors_projection(tmp_path):
    compared, left_out = 0, []
    for i, d in enumerate(recorded_snapshot_dirs(tmp_path)):
        for name in negotiators_of(d):
            whole = load_pool(d, negotiator=name)
            projection = _converged(d, whole)
            copy = _projected_copy(d, tmp_path / f"projected-{i}-{name}", projection)
            projected = load_pool(copy, negotiator=name)
            assert (_decisions(projected).replace(str(copy), str(d))
                    == _decisions(whole)), d
            had = max(len(ad) for ad in _ads_lines(d / "slots.ads"))
            kept = max(len(ad) for ad in _ads_lines(copy / "slots.ads"))
            left_out.append(had - kept)
            compared += 1
    assert compared >= 30
    # most of a real 25.14 slot ad is left out (the fakes of condor_advertise: fewer)
    assert max(left_out) > 100


# recordings of pools with HTCondor's default slot policy, knobs and submit files
DEFAULT_POOLS = {"hgq_static_30slots", "hgq_nested_hep_lep_surplus", "daemons300",
                 "groups100", "submitters1000", "trim_shutdown", "pslot_preemption"}


def test_a_first_capture_of_a_default_pool_asks_the_collector_once(tmp_path):
    """The first guess holds every name a default 25.14 pool's slots, knobs and jobs
    reference: its first capture asks the collector once."""
    seen = set()
    for d in recorded_snapshot_dirs(tmp_path):
        if d.name in DEFAULT_POOLS:
            pool = load_pool(d, negotiator=negotiators_of(d)[0])
            assert set(_converged(d, pool)) == set(cp.first_guess()), d
            seen.add(d.name)
    assert seen == DEFAULT_POOLS


def test_the_base_holds_every_slot_attribute_the_code_names(tmp_path):
    """What the package reads of a slot by name: every word of its source that some
    recorded slot ad has as an attribute is asked for (BASE_SLOT_ATTRS, or a form of a
    resource the slot's MachineResources names)."""
    words = code_words()
    lacking = set()
    for d in recorded_snapshot_dirs(tmp_path):
        # (a name some expression references is asked for as such)
        pool = load_pool(d, negotiator=negotiators_of(d)[0])
        referenced = {n.lower() for n in _converged(d, pool)}
        for ad in _ads_lines(d / "slots.ads"):
            pairs = [_split_line(ln) for ln in ad]
            forms = set()
            for n, t in pairs:
                if n.lower() == "machineresources":
                    forms |= cp.resource_names(t)
            have = {n.lower() for n in cp.BASE_SLOT_ATTRS} | forms | referenced
            lacking |= {n for n, _ in pairs if n.lower() in words and n.lower() not in have}
    assert not lacking, " ".join(sorted(lacking))


@pytest.mark.parametrize("text, names", [
    ('START && (TARGET.RequestCpus <= Cpus)', {"start", "requestcpus", "cpus"}),
    ('"a string with Memory in it"', set()),
    ("42", set()),
    ("MY.HasFoo =?= true", {"hasfoo"}),
])
def test_the_names_a_text_references(text, names):
    refs = cp.Refs()
    assert refs.of_texts([text]) == names and not refs.dynamic


def test_a_text_that_builds_names_at_run_time_is_noted():
    refs = cp.Refs()
    refs.of_texts(['eval("Cp" + "us") > 0'])
    assert refs.dynamic


def test_a_resource_brings_every_form_of_its_name():
    names = cp.Refs().of_lines(['MachineResources = "Cpus Memory Fpgas"'])
    assert {"fpgas", "totalslotfpgas", "childfpgas", "consumptionfpgas",
            "detectedfpgas"} <= names


# -------------------------------------------------------------------- a capture

@pytest.fixture
def pool(mocker):
    return FakePool().install(mocker)


def _startd_projections(pool) -> list:
    return [c[2] for c in pool.calls if c[0] == "Collector.query"
            and c[1] == __import__("htcondor2").AdTypes.Startd]


def _projection_names(asked) -> set[str]:
    return {n.lower() for p in asked for n in p.split()}


def test_a_capture_asks_for_the_projection_and_records_it(pool, tmp_path):
    out = tmp_path / "snap"
    capture_snapshot("cm", out, now=NOW, whole_slots=False)
    meta = json.loads((out / "meta.json").read_text())
    projection = meta["slot_projection"]
    assert {"name", "cpus", "memory", "start", "requirements", "state"} <= {
        n.lower() for n in projection}
    asked = _startd_projections(pool)
    assert asked and all(a for a in asked)          # never whole
    assert _projection_names(asked[-1]) == {n.lower() for n in projection}
    # the slots file holds only what was asked for, and the cycle decides as on whole ads
    keep = {n.lower() for n in projection}
    for ad in read_ads(out / "slots.ads"):
        assert {k.lower() for k in ad.keys()} <= keep
    whole = tmp_path / "whole"
    capture_snapshot("cm", whole, now=NOW)
    assert "slot_projection" not in json.loads((whole / "meta.json").read_text())
    assert (_decisions(load_pool(out)).replace(str(out), "")
            == _decisions(load_pool(whole)).replace(str(whole), ""))


def test_a_name_the_slots_reference_is_asked_for_again(pool, tmp_path):
    for ad in pool.slots:
        ad["Start"] = classad2.ExprTree("MY.SiteReady =?= true && TARGET.RequestCpus <= Cpus")
        ad["SiteReady"] = True
        ad["SiteNote"] = "nothing reads it"
    out = tmp_path / "snap"
    capture_snapshot("cm", out, now=NOW, whole_slots=False)
    asked = _startd_projections(pool)
    assert len(asked) == 2
    assert "siteready" not in _projection_names(asked[0])
    assert "siteready" in _projection_names(asked[1])
    ads = read_ads(out / "slots.ads")
    assert all(ad.get("SiteReady") is True and "SiteNote" not in ad for ad in ads)
    # the next capture starts from the recorded projection: one query
    pool.calls.clear()
    meta = json.loads((out / "meta.json").read_text())
    capture_snapshot("cm", tmp_path / "again", now=NOW, whole_slots=False,
                     earlier_slot_projection=meta["slot_projection"])
    assert len(_startd_projections(pool)) == 1


def test_a_name_only_the_jobs_reference_is_asked_for_again(pool, tmp_path):
    for ad in pool.slots:
        ad["HasWidget"] = True
    for job in pool.schedds["vm"]:
        job["Requirements"] = classad2.ExprTree("TARGET.HasWidget && TARGET.Cpus >= 1")
    out = tmp_path / "snap"
    capture_snapshot("cm", out, now=NOW, whole_slots=False)
    asked = _startd_projections(pool)
    assert "haswidget" not in _projection_names(asked[0])
    assert "haswidget" in _projection_names(asked[-1])
    assert all(ad.get("HasWidget") is True for ad in read_ads(out / "slots.ads"))
    assert "haswidget" in {n.lower() for n in json.loads(
        (out / "meta.json").read_text())["slot_projection"]}


@pytest.mark.parametrize("whole", [False, True])
def test_a_job_attribute_a_slot_attribute_reads_is_asked_of_the_schedds_again(
        pool, tmp_path, whole):
    """A job reads a slot attribute (the first projected answer lacks it), whose own
    expression reads a job attribute the job projection lacked (no slot policy reaches
    it): the schedds are asked again, and both answers hold what the other side reads,
    with whole slot ads too."""
    for ad in pool.slots:
        ad["HasWidget"] = classad2.ExprTree("TARGET.WidgetNeed > 0")
    for job in pool.schedds["vm"]:
        job["Requirements"] = classad2.ExprTree("TARGET.HasWidget && TARGET.Cpus >= 1")
        job["WidgetNeed"] = 1
    out = tmp_path / "snap"
    capture_snapshot("cm", out, now=NOW, whole_slots=whole)
    asked = pool.schedd_queries["vm"]
    assert not any("widgetneed" in _projection_names(a) for a in asked[:-1])
    assert "widgetneed" in _projection_names(asked[-1])
    meta = json.loads((out / "meta.json").read_text())
    assert "widgetneed" in {n.lower() for n in meta["job_projection"]}
    assert meta["schedds_queried"] == "after the slots"
    assert all(ad.get("WidgetNeed") == 1 for ad in read_ads(out / "jobs-vm.ads"))
    assert all("HasWidget" in ad for ad in read_ads(out / "slots.ads"))


def test_a_name_a_knob_references_is_asked_for(pool, tmp_path):
    pool.remote["NEGOTIATOR_PRE_JOB_RANK"] = "MY.SiteSpeed"
    for ad in pool.slots:
        ad["SiteSpeed"] = 3
    out = tmp_path / "snap"
    capture_snapshot("cm", out, now=NOW, whole_slots=False)
    assert all(ad.get("SiteSpeed") == 3 for ad in read_ads(out / "slots.ads"))


def test_a_slot_expression_that_builds_names_makes_the_capture_whole(pool, tmp_path):
    pool.slots[0]["Start"] = classad2.ExprTree('eval("Cp" + "us") > 0')
    out = tmp_path / "snap"
    capture_snapshot("cm", out, now=NOW, whole_slots=False)
    assert _startd_projections(pool)[-1] == ()          # asked whole at the end
    meta = json.loads((out / "meta.json").read_text())
    assert "slot_projection" not in meta
    assert meta["slots_whole_because"].startswith("an expression builds attribute names")
    assert meta["slot_projection_next"] == cp.WHOLE
    assert len(read_ads(out / "slots.ads")[1]) == len(pool.slots[1])
    # the next capture asks whole at once (one query), and finds out what it would ask
    # for once no expression builds names any more: the one after asks with that
    pool.slots[0]["Start"] = classad2.ExprTree("TARGET.RequestCpus <= Cpus")
    pool.calls.clear()
    capture_snapshot("cm", tmp_path / "2", now=NOW, whole_slots=False,
                     earlier_slot_projection=meta["slot_projection_next"])
    assert _startd_projections(pool) == [()]
    meta = json.loads((tmp_path / "2" / "meta.json").read_text())
    assert meta["slots_whole_because"] == "the last capture was whole"
    wanted = meta["slot_projection_next"]
    assert {"start", "cpus", "requestcpus"} <= {n.lower() for n in wanted}
    pool.calls.clear()
    capture_snapshot("cm", tmp_path / "3", now=NOW, whole_slots=False,
                     earlier_slot_projection=wanted)
    assert len(_startd_projections(pool)) == 1
    assert json.loads((tmp_path / "3" / "meta.json").read_text())["slot_projection"] == wanted


def test_a_loops_cache_fetches_with_the_projection_and_starts_over_when_it_grows(pool, tmp_path):
    cache, refs = SlotCache(), cp.Refs()
    capture_snapshot("cm", tmp_path / "1", now=NOW, whole_slots=False, slot_cache=cache,
                     slot_refs=refs)
    first = cache.projection
    assert first is not None and len(cache) == 40
    for job in pool.schedds["vm"]:
        job["Requirements"] = classad2.ExprTree("TARGET.HasWidget =!= false")
    capture_snapshot("cm", tmp_path / "2", now=NOW + 60, whole_slots=False,
                     slot_cache=cache, slot_refs=refs)
    assert "haswidget" in {n.lower() for n in cache.projection}
    assert set(first) < set(cache.projection)


# ------------------------------------------------------- a later config on the snapshot

def _projected_fixture(tmp_path) -> Path:
    d = FIXTURES / "hgq_nested_hep_lep_surplus"
    whole = load_pool(d)
    snap = _projected_copy(d, tmp_path / "snap", _converged(d, whole))
    meta = json.loads((snap / "meta.json").read_text())
    meta["job_projection"] = list(BASE_JOB_ATTRS)      # (as a capture records it)
    (snap / "meta.json").write_text(json.dumps(meta))
    return snap


def test_a_config_that_reads_an_attribute_not_captured_stops(tmp_path, capsys):
    snap = _projected_fixture(tmp_path)
    cfg = tmp_path / "whatif.config"
    cfg.write_text((snap / "config").read_text()
                   + "\nNEGOTIATOR_PRE_JOB_RANK = MY.KeyboardIdle\n")
    assert main(["negotiate", str(snap), "--config", str(cfg)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert "meta.json" in err[0] and "NEGOTIATOR_PRE_JOB_RANK reads keyboardidle" in err[0]
    assert "NEGOTIATOR_EXT_WHOLE_SLOT_ADS" in err[0]


def test_a_config_that_reads_what_the_negotiator_writes_or_the_jobs_have_passes(tmp_path,
                                                                               capsys):
    snap = _projected_fixture(tmp_path)
    cfg = tmp_path / "whatif.config"
    cfg.write_text((snap / "config").read_text()
                   + "\nPREEMPTION_REQUIREMENTS = RemoteUserPrio > SubmitterUserPrio * 1.2"
                     " && slot1_RemoteUserPrio >= 0 && TARGET.Owner =!= MY.Name"
                     " && QDate > 0\n")
    assert main(["negotiate", str(snap), "--config", str(cfg)]) == 0, capsys.readouterr().err


def test_whole_slot_ads_take_any_config(tmp_path):
    d = FIXTURES / "hgq_nested_hep_lep_surplus"
    cfg = tmp_path / "whatif.config"
    cfg.write_text((d / "config").read_text() + "\nNEGOTIATOR_PRE_JOB_RANK = MY.KeyboardIdle\n")
    assert main(["negotiate", str(d), "--config", str(cfg)]) == 0


def test_check_config_names_a_knob_that_builds_names(tmp_path):
    snap = _projected_fixture(tmp_path)
    pool = load_pool(FIXTURES / "hgq_nested_hep_lep_surplus")
    import dataclasses
    cfg = dataclasses.replace(pool.config, preemption_rank='eval("Kflops")')
    meta = json.loads((snap / "meta.json").read_text())
    with pytest.raises(InputError, match="PREEMPTION_RANK can name an attribute"):
        cp.check_config(meta, cfg, "meta.json")


class _Known:
    """What Refs.of_schedd_jobs reads of a loop's job_delta.KnownJobs."""
    taken, base, token = True, None, "a"
    reuse: dict = {}


def test_a_loops_pass_walks_only_the_jobs_new_in_its_workers_answer():
    refs, known = cp.Refs(), _Known()
    j1, j2 = ["Requirements = TARGET.HasA"], ["Requirements = TARGET.HasB"]
    assert refs.of_schedd_jobs([("s", [j1])], known) == {"hasa"}
    walked, of_jobs = [], refs.of_jobs
    refs.of_jobs = lambda jobs: of_jobs(walked.append(list(jobs)) or walked[-1])
    # built on the answer walked last: j1 is the same list (reused), only j2 is walked
    known.base, known.token, known.reuse = "a", "b", {"s": [0, None]}
    assert refs.of_schedd_jobs([("s", [j1, j2])], known) == {"hasa", "hasb"}
    assert walked == [[j2]]
    # built on another answer: every job is walked, and what left is forgotten
    known.base, known.token, known.reuse = "other", "c", {"s": [None]}
    assert refs.of_schedd_jobs([("s", [j2])], known) == {"hasb"}
    assert walked[-1] == [j2]


def test_a_reused_job_that_builds_names_still_makes_the_capture_whole():
    refs, known = cp.Refs(), _Known()
    dyn = ['Requirements = eval("Has" + "A")']
    refs.of_schedd_jobs([("s", [dyn])], known)
    assert refs.dynamic
    refs.dynamic = False                    # (each capture starts so)
    known.base, known.token, known.reuse = "a", "b", {"s": [0]}
    refs.of_schedd_jobs([("s", [dyn])], known)
    assert refs.dynamic


def test_the_next_capture_starts_from_what_the_newest_snapshot_says(tmp_path):
    from negotiator_ext.shadow_state import newest_slot_projection
    root = tmp_path / "snapshots"
    assert newest_slot_projection(root) is None
    for t, meta, first in (
            (100, {"slot_projection": ["Name", "Cpus"]}, ["Name", "Cpus"]),
            (200, {"slots_whole_because": "x", "slot_projection_next": cp.WHOLE}, cp.WHOLE),
            (300, {"slot_projection": ["Name", "Cpus"], "slots_whole_because": "y",
                   "slot_projection_next": ["Name", "Cpus", "Start"]},
             ["Name", "Cpus", "Start"])):
        (root / str(t)).mkdir(parents=True)
        (root / str(t) / "meta.json").write_text(json.dumps(meta))
        assert newest_slot_projection(root) == first
    assert newest_slot_projection(root, exclude=root / "300") == cp.WHOLE
