"""capture_snapshot against a mocked pool: the bindings (htcondor2.Collector, Schedd,
RemoteParam, param) are replaced with pytest-mock, and answer with the ads recorded in
tests/data/fixtures/hgq_nested_hep_lep_surplus. The mocked Schedd.query honours its
constraint and returns only the projected attributes, so what ends up in the snapshot is
exactly what the projection asked for."""

from __future__ import annotations

import json
from pathlib import Path

import classad2
import htcondor2
import pytest

from negotiator_ext.adapters import condor_config, live, remote_knobs
from negotiator_ext.adapters.adfiles import ad_lines, read_ads
from negotiator_ext.adapters.condor_config import load_config, read_params
from negotiator_ext.adapters.daemon_config import format_config
from negotiator_ext.adapters.job_projection import (BASE_JOB_ATTRS, job_projection,
                                                     job_refs_missing_in_lines)
from negotiator_ext.adapters.live import CaptureReport, capture_snapshot
from negotiator_ext.adapters.snapshot import load_snapshot
from negotiator_ext.errors import InputError
from negotiator_ext.pool import load_pool

from fakepool import FakeCollector, FakePool, FakeRemoteParam, fixture_ads, fixture_config_knobs

NOW = 1795265300
SLOT_LOCAL = {"start", "withinresourcelimits", "cpus", "memory", "disk", "gpus"}


@pytest.fixture
def pool(mocker):
    return FakePool().install(mocker)


def by_job_id(ads):
    return {(ad.eval("ClusterId"), ad.eval("ProcId")): ad for ad in ads}


# ------------------------------------------------------------------------- full capture

def test_full_capture_writes_every_file_and_reads_back(pool, tmp_path):
    out = tmp_path / "snap"
    report = capture_snapshot("cm.example.org:9618", out, now=NOW)

    assert isinstance(report, CaptureReport)
    assert report.directory == out
    assert (report.slots, report.jobs) == (40, 52)
    assert report.schedds == ("vm",) and report.missing_schedds == ()
    assert dict(report.errors) == {} and report.partial is False
    for name in ("slots.ads", "jobs-vm.ads", "submitters.ads", "accounting.ads",
                 "negotiator.ads", "config", "meta.json"):
        assert (out / name).is_file(), name
    assert ("Collector", "cm.example.org:9618") in pool.calls

    snap = load_snapshot(out)
    assert len(snap.slots) == 40
    assert {k: len(v) for k, v in snap.jobs.items()} == {"jobs-vm.ads": 52}
    assert len(snap.submitters) == len(pool.submitters) == 6
    assert len(snap.accounting) == len(pool.accounting)
    assert len(snap.negotiator_ads()) == 1
    assert snap.config_path == out / "config"
    assert snap.partial is False and snap.missing_schedds == ()
    assert snap.captured_at == NOW

    meta = json.loads((out / "meta.json").read_text())
    assert meta["format"] == 1
    assert meta["pool"] == "cm.example.org:9618"
    assert meta["tool"] == "negotiator-ext snapshot"
    assert meta["htcondor_version"] == "$CondorVersion: 25.14.0 2026-11-21 PRE-RELEASE-UWCS $"
    assert meta["partial"] is False and meta["missing_schedds"] == [] and meta["errors"] == {}
    assert meta["counts"] == {"slots": 40, "jobs": 52, "submitters": 6,
                              "accounting": len(pool.accounting)}
    assert meta["schedd_files"] == {"jobs-vm.ads": "vm"}
    # no temporary sibling left behind
    assert sorted(p.name for p in tmp_path.iterdir()) == ["snap"]


def test_slot_ads_are_full_and_projected_jobs_match_like_the_originals(pool, tmp_path):
    out = tmp_path / "snap"
    capture_snapshot(None, out, now=NOW)
    snap = load_snapshot(out)
    # slot ads were not projected: every attribute of every slot is there
    originals = {ad["Name"]: ad for ad in pool.slots}
    for slot in snap.slots:
        assert set(slot.keys()) == set(originals[slot["Name"]].keys())
    # the projected jobs carry what the match needs: every slot/job pair matches (or not)
    # exactly as with the full recorded job ads
    full = by_job_id(fixture_ads("jobs.ads"))
    captured = by_job_id(snap.all_jobs())
    assert captured.keys() == full.keys()
    differing = [(s["Name"], jid) for s in snap.slots for jid, job in captured.items()
                 if s.symmetricMatch(job) != s.symmetricMatch(full[jid])]
    assert differing == []
    assert sum(s.symmetricMatch(j) for s in snap.slots for j in captured.values()) > 0
    # and they are restricted: the schedd was not asked for everything
    assert all("Cmd" not in job for job in captured.values())
    meta = json.loads((out / "meta.json").read_text())
    assert meta["pool"] == "<local>"
    assert ("Collector", None) in pool.calls


def test_held_jobs_are_not_captured(pool, tmp_path):
    held = classad2.parseOne(fixture_ads("jobs.ads")[0].printOld(), classad2.ParserType.Old)
    held["ProcId"] = 999
    held["JobStatus"] = 5
    pool.schedds["vm"] = fixture_ads("jobs.ads") + [held]
    report = capture_snapshot(None, tmp_path / "snap", now=NOW)
    assert report.jobs == 52
    ids = by_job_id(read_ads(tmp_path / "snap" / "jobs-vm.ads"))
    assert all(pid != 999 for _, pid in ids)
    assert all(c[2] == "JobStatus == 1 || JobStatus == 2"
               for c in pool.calls if c[0] == "Schedd.query")


def test_a_captures_ads_in_memory_are_what_reading_its_files_gives(pool, tmp_path):
    """A shadow pass takes the slot and job ads the capture holds instead of reading them
    back: the same ads, texts and cycle as reading the files (what a replay does)."""
    from negotiator_ext.cycle import run_cycle
    from negotiator_ext.pool import load_pool

    report = capture_snapshot(None, tmp_path / "snap", now=NOW)
    assert report.ads is not None
    read, held = load_pool(tmp_path / "snap"), load_pool(tmp_path / "snap", captured=report.ads)
    assert [dict(a.items()) for a in held.slot_ads] == [dict(a.items()) for a in read.slot_ads]
    assert held.slot_texts == read.slot_texts
    assert {k: v.rows for k, v in held.snapshot.jobs.items()} == {
        k: v.rows for k, v in read.snapshot.jobs.items()}
    a, b = run_cycle(read), run_cycle(held)
    assert a.matches == b.matches and len(a.matches) > 0


def test_a_captured_expression_too_large_is_refused_at_its_line_as_in_the_file(
        pool, tmp_path, monkeypatch):
    from negotiator_ext import limits
    from negotiator_ext.adapters import adfiles
    from negotiator_ext.pool import load_pool

    # the bound made small, so that the test's own process walks no giant expression
    monkeypatch.setattr(limits, "MAX_EXPR_OPERATORS", 100)
    monkeypatch.setattr(adfiles, "MAX_EXPR_OPERATORS", 100)
    jobs = fixture_ads("jobs.ads")
    jobs[3]["Rank"] = classad2.ExprTree(" + ".join(["RequestCpus"] * 120))
    pool.schedds["vm"] = jobs
    report = capture_snapshot(None, tmp_path / "snap", now=NOW)
    with pytest.raises(InputError) as from_file:
        load_pool(tmp_path / "snap")
    with pytest.raises(InputError) as held:
        load_pool(tmp_path / "snap", captured=report.ads)
    assert str(held.value) == str(from_file.value)
    assert "Rank" in str(held.value) and "line" in str(held.value)


# ------------------------------------------------------------------------- projection

def test_projection_has_base_list_and_attributes_the_slots_reference(pool, tmp_path):
    for i, slot in enumerate(pool.slots):
        slot["Start"] = classad2.ExprTree('TARGET.ProjectName =?= "higgs" || TARGET.WantFoo =?= true')
        slot["Rank"] = classad2.ExprTree("TARGET.JobPrioBoost * 10")
        slot["Requirements"] = classad2.ExprTree("START && WithinResourceLimits && NotDefinedBySlot =!= false")
        if i == 0:  # consumption policy expressions are evaluated against the job too
            slot["ConsumptionMemory"] = classad2.ExprTree("quantize(TARGET.RequestMemoryExtra, {128})")

    capture_snapshot(None, tmp_path / "snap", now=NOW)

    queries = pool.schedd_queries["vm"]
    assert 1 <= len(queries) <= 2
    first = {a.lower() for a in queries[0]}
    assert {a.lower() for a in BASE_JOB_ATTRS} <= first
    # referenced through Requirements -> START / WithinResourceLimits, Rank, Consumption*
    for attr in ("ProjectName", "WantFoo", "JobPrioBoost", "NotDefinedBySlot",
                 "RequestMemoryExtra", "RequestCpus", "RequestMemory", "RequestDisk", "RequestGPUs"):
        assert attr.lower() in first, attr
    # the slot's own attributes are not job attributes
    assert not (first & SLOT_LOCAL)


def test_projection_walks_alike_slots_once_with_the_same_result(pool):
    """With the slots' lines, slots whose expressions and names are alike are walked once:
    the projection is the one walking every slot gives, whatever differs between them."""
    from negotiator_ext.adapters.adfiles import ad_lines

    slots = pool.slots
    slots[0]["Start"] = classad2.ExprTree("TARGET.OnlyHere =?= true")
    slots[1]["Extra"] = classad2.ExprTree("TARGET.Deep > 1")          # read by nothing
    slots[2]["Requirements"] = classad2.ExprTree("START && MY.Local > 1 && Other")
    slots[3]["Local"] = 2                       # defined here: not a job attribute here
    slots[3]["Requirements"] = classad2.ExprTree("START && MY.Local > 1 && Other")
    slots[4]["Memory"] = 123456                 # literals differ: same walk
    walked = job_projection(slots, None)
    assert job_projection(slots, None, ad_lines(slots)) == walked
    assert {"OnlyHere", "Local", "Other"} <= set(walked) and "Deep" not in walked


def test_fixture_pool_needs_one_schedd_query(pool, tmp_path):
    capture_snapshot(None, tmp_path / "snap", now=NOW)
    assert len(pool.schedd_queries["vm"]) == 1
    assert [c[0] for c in pool.calls].count("Schedd.query") == 1


def test_job_references_and_autocluster_attrs_trigger_one_extended_requery(pool, tmp_path):
    jobs = fixture_ads("jobs.ads")
    for job in jobs:
        job["Requirements"] = classad2.ExprTree(
            str(job.lookup("Requirements")) + " && MY.CustomFlag =?= true")
        job["CustomFlag"] = True
        job["AutoClusterAttrs"] = "JobUniverse,RequestCpus,SiteWhitelist"
        job["SiteWhitelist"] = classad2.ExprTree('strcat("a,", MY.Deeper)')
        job["Deeper"] = "b"
        job["Unrelated"] = "not asked for"
    pool.schedds["vm"] = jobs

    capture_snapshot(None, tmp_path / "snap", now=NOW)

    queries = pool.schedd_queries["vm"]
    assert len(queries) == 2  # never more, even though SiteWhitelist references Deeper
    first, second = ({a.lower() for a in q} for q in queries)
    assert "customflag" not in first and "sitewhitelist" not in first
    assert {"customflag", "sitewhitelist"} <= second and first <= second
    written = read_ads(tmp_path / "snap" / "jobs-vm.ads")
    assert len(written) == 52
    assert all(j.eval("CustomFlag") is True and "SiteWhitelist" in j for j in written)
    assert all("Unrelated" not in j for j in written)


def test_negotiator_expressions_add_job_attributes(pool, tmp_path):
    pool.remote = dict(pool.remote, PREEMPTION_REQUIREMENTS="TARGET.MayPreempt =?= true",
                       NEGOTIATOR_JOB_CONSTRAINT="JobSiteOk =!= false")
    capture_snapshot(None, tmp_path / "snap", now=NOW)
    first = {a.lower() for a in pool.schedd_queries["vm"][0]}
    assert {"maypreempt", "jobsiteok"} <= first


# ------------------------------------------------------------------------- failures

def test_schedd_that_fails_is_reported_and_the_rest_is_written(pool, tmp_path):
    msg = ("Failed to fetch ads from schedd, errmsg=CEDAR:6001:Failed to connect to "
           "<10.0.0.1:9619> (timed out)")
    pool.schedds["schedd2@b.example"] = htcondor2.HTCondorException(msg)
    out = tmp_path / "snap"

    report = capture_snapshot("cm:9618", out, now=NOW)

    assert report.partial is True
    assert report.schedds == ("vm",)
    assert report.missing_schedds == ("schedd2@b.example",)
    assert report.errors["schedd2@b.example"] == msg
    assert report.jobs == 52
    meta = json.loads((out / "meta.json").read_text())
    assert meta["partial"] is True
    assert meta["missing_schedds"] == ["schedd2@b.example"]
    assert meta["errors"] == {"schedd2@b.example": msg}
    snap = load_snapshot(out)
    assert snap.partial and snap.missing_schedds == ("schedd2@b.example",)
    assert {k: len(v) for k, v in snap.jobs.items()} == {"jobs-vm.ads": 52}
    assert len(snap.slots) == 40
    # one query for the failing schedd too, not a retry loop
    assert len(pool.schedd_queries["schedd2@b.example"]) == 1


def test_schedd_names_become_safe_distinct_file_names(pool, tmp_path):
    jobs = fixture_ads("jobs.ads")
    pool.schedds = {"vm": jobs[:2], "sub/host:1 x": jobs[2:5]}
    capture_snapshot(None, tmp_path / "snap", now=NOW)
    meta = json.loads((tmp_path / "snap" / "meta.json").read_text())
    assert meta["schedd_files"] == {"jobs-vm.ads": "vm", "jobs-sub_host_1_x.ads": "sub/host:1 x"}
    assert len(read_ads(tmp_path / "snap" / "jobs-sub_host_1_x.ads")) == 3


@pytest.mark.parametrize("where", ["query", "constructor"])
def test_collector_failure_raises_input_error_and_writes_nothing(pool, tmp_path, mocker, where):
    err = htcondor2.HTCondorException("Failed to contact collector cm.example.org:9618")
    if where == "query":
        pool.collector_error = err
    else:
        mocker.patch("htcondor2.Collector", side_effect=err)
    out = tmp_path / "snap"
    with pytest.raises(InputError) as ei:
        capture_snapshot("cm.example.org:9618", out, now=NOW)
    assert ei.value.source == "cm.example.org:9618"
    assert "Failed to contact collector" in ei.value.message
    assert "\n" not in str(ei.value)
    assert list(tmp_path.iterdir()) == []
    assert pool.param == {"QUERY_TIMEOUT": "60", "Q_QUERY_TIMEOUT": "20"}  # restored


def test_collector_failure_keeps_an_earlier_snapshot(pool, tmp_path):
    out = tmp_path / "snap"
    capture_snapshot(None, out, now=NOW)
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    pool.collector_error = htcondor2.HTCondorException("timed out")
    with pytest.raises(InputError, match="<local pool>: cannot query the collector"):
        capture_snapshot(None, out, now=NOW + 60)
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["snap"]


def test_optional_collector_query_failure_is_partial(pool, tmp_path):
    pool.query_errors[htcondor2.AdTypes.Accounting] = htcondor2.HTCondorException("denied")
    report = capture_snapshot(None, tmp_path / "snap", now=NOW)
    assert report.partial and report.errors == {"collector:accounting": "denied"}
    assert not (tmp_path / "snap" / "accounting.ads").exists()
    assert load_snapshot(tmp_path / "snap").accounting is None


def test_startd_daemon_ads_are_not_slots(pool, tmp_path):
    pool.slots = pool.slots + [classad2.ClassAd({"MyType": "StartD", "Name": "vm"})]
    report = capture_snapshot(None, tmp_path / "snap", now=NOW)
    assert report.slots == 40
    assert len(load_snapshot(tmp_path / "snap").slots) == 40


# ------------------------------------------------------------------------- destination

def test_refuses_to_clobber_a_directory_that_is_not_a_snapshot(pool, tmp_path):
    out = tmp_path / "important"
    out.mkdir()
    (out / "notes.txt").write_text("keep me")
    with pytest.raises(InputError, match="not a snapshot"):
        capture_snapshot(None, out, now=NOW)
    assert [p.name for p in out.iterdir()] == ["notes.txt"]
    assert (out / "notes.txt").read_text() == "keep me"
    assert pool.calls == []  # refused before contacting the pool
    assert sorted(p.name for p in tmp_path.iterdir()) == ["important"]


def test_refuses_a_file(pool, tmp_path):
    (tmp_path / "f").write_text("x")
    with pytest.raises(InputError, match="not a directory"):
        capture_snapshot(None, tmp_path / "f", now=NOW)
    assert (tmp_path / "f").read_text() == "x"


def test_replaces_an_earlier_snapshot_and_fills_an_empty_directory(pool, tmp_path):
    out = tmp_path / "snap"
    out.mkdir()  # empty: fine
    capture_snapshot(None, out, now=NOW)
    (out / "jobs-gone.ads").write_text("")  # a schedd of the earlier capture
    pool.schedds["vm"] = fixture_ads("jobs.ads")[:3]
    report = capture_snapshot(None, out, now=NOW + 60)
    assert report.jobs == 3
    assert not (out / "jobs-gone.ads").exists()
    assert json.loads((out / "meta.json").read_text())["captured_at"] == NOW + 60
    assert sum(len(v) for v in load_snapshot(out).jobs.values()) == 3
    assert sorted(p.name for p in tmp_path.iterdir()) == ["snap"]


# ------------------------------------------------------------------------- negotiator config

def test_config_from_remote_param_parses_back_with_the_knob_values(pool, tmp_path):
    pool.remote = dict(
        fixture_config_knobs(),
        **{
            "NEGOTIATOR.GROUP_QUOTA_group_chemistry": "12",   # the negotiator's override wins
            "CONCURRENCY_LIMIT_DEFAULT": "5",
            "LICENSE_LIMIT": "3",
            "PRIORITY_HALFLIFE": "3600",
            "NEGOTIATOR_MATCH_EXPRS": "Site",
            "Site": '"north"',
            "SCHEDD_INTERVAL": "300",                           # not a negotiator knob
            "COLLECTOR_HOST": "cm.example.org",
            "PREEMPTION_REQUIREMENTS": "False\n",
        },
    )
    out = tmp_path / "snap"
    capture_snapshot(None, out, now=NOW)

    text = (out / "config").read_text()
    assert text.startswith("# Policy knobs of the negotiator vm (")
    assert "RemoteParam" in text.split("\n\n")[0]
    assert "SCHEDD_INTERVAL" not in text and "COLLECTOR_HOST" not in text
    assert "GROUP_QUOTA_group_chemistry = 12" in text.splitlines()
    # each value is one remote request at most, NEGOTIATOR_MATCH_EXPRS included
    fetched = [k for rp in pool.remote_params for k in rp.fetched]
    assert len(fetched) == len(set(fetched)) and "NEGOTIATOR_MATCH_EXPRS" in fetched
    # values of unrelated knobs were never fetched (one round trip per value)
    (rp,) = pool.remote_params
    assert "SCHEDD_INTERVAL" not in rp.fetched and "COLLECTOR_HOST" not in rp.fetched

    cfg = load_config(out / "config")
    quotas = {g.name: g.static_quota for g in cfg.groups}
    assert quotas == {"group_physics": 20.0, "group_physics.hep": 15.0,
                      "group_physics.lep": 5.0, "group_chemistry": 12.0}
    surplus = {g.name: g.accept_surplus for g in cfg.groups}
    assert surplus == {"group_physics": False, "group_physics.hep": True,
                       "group_physics.lep": True, "group_chemistry": False}
    assert cfg.priority_halflife == 3600.0
    assert cfg.concurrency_limit_default == 5.0
    assert cfg.concurrency_limits["license"] == 3.0  # (HTCondor defaults add other *_LIMIT knobs)
    assert dict(cfg.match_exprs) == {"NegotiatorMatchExprSite": '"north"'}
    assert cfg.preemption_requirements == "False"


def test_knobs_remote_param_reports_as_not_defined_are_left_out(pool, tmp_path):
    # htcondor2.RemoteParam lists knobs that have no value and returns the daemon's
    # CONFIG_VAL reply for them, the string "Not defined" (HTCondor 25.14 pool)
    pool.remote = dict(
        fixture_config_knobs(),
        NEGOTIATOR_SLOT_CONSTRAINT="Not defined",
        NEGOTIATOR_JOB_CONSTRAINT="Not defined",
        PREEMPTION_RANK="Not defined",
        NEGOTIATOR_MATCH_EXPRS="Not defined",
        # real values that only look alike are kept as they are
        NEGOTIATOR_SUBMITTER_CONSTRAINT='Owner =!= "Not defined"',
        GROUP_NOTE_A="not defined",
        GROUP_NOTE_B="Not defined.",
        GROUP_NOTE_C='"Not defined"',
    )
    out = tmp_path / "snap"
    report = capture_snapshot(None, out, now=NOW)
    assert report.partial is False and dict(report.errors) == {}

    lines = (out / "config").read_text().splitlines()
    knobs = [ln.split(" = ", 1)[0].rstrip(" =") for ln in lines if ln and not ln.startswith("#")]
    for name in ("NEGOTIATOR_SLOT_CONSTRAINT", "NEGOTIATOR_JOB_CONSTRAINT", "PREEMPTION_RANK",
                 "NEGOTIATOR_MATCH_EXPRS"):
        assert name not in knobs
    assert not any(ln.endswith("= Not defined") for ln in lines)
    assert 'NEGOTIATOR_SUBMITTER_CONSTRAINT = Owner =!= "Not defined"' in lines
    assert "GROUP_NOTE_A = not defined" in lines
    assert "GROUP_NOTE_B = Not defined." in lines
    assert 'GROUP_NOTE_C = "Not defined"' in lines
    # each value is still fetched once at most
    fetched = [k for rp in pool.remote_params for k in rp.fetched]
    assert len(fetched) == len(set(fetched)) and "NEGOTIATOR_SLOT_CONSTRAINT" in fetched

    # the snapshot reads back, with HTCondor's defaults for the knobs left out
    cfg = load_config(out / "config")
    assert cfg.slot_constraint is None and cfg.job_constraint is None
    assert dict(cfg.match_exprs) == {}
    assert cfg.submitter_constraint == 'Owner =!= "Not defined"'
    assert len(load_snapshot(out).slots) == 40


def test_select_policy_knobs_drops_only_the_bindings_undefined_marker():
    remote = FakeRemoteParam({
        "NEGOTIATOR_SLOT_CONSTRAINT": "Not defined",
        "NEGOTIATOR.PREEMPTION_RANK": "Not defined",
        "PRIORITY_HALFLIFE": "Not defined ",      # not the marker (HTCondor trims values)
        "GROUP_QUOTA_a": "NOT DEFINED",
        "NEGOTIATOR_CYCLE_DELAY": "20",
        "NEGOTIATOR_X\ninclude command : touch /tmp/x": "1",   # not a knob name: ignored
        "SCHEDD_INTERVAL": "Not defined",                      # not a policy knob
    })
    assert remote_knobs.REMOTE_PARAM_UNDEFINED == "Not defined"
    assert remote_knobs.select_policy_knobs(remote) == {
        "PRIORITY_HALFLIFE": "Not defined ", "GROUP_QUOTA_a": "NOT DEFINED",
        "NEGOTIATOR_CYCLE_DELAY": "20"}
    assert "SCHEDD_INTERVAL" not in remote.fetched


def _changed_knobs(config: Path, baseline: Path) -> dict:
    """The knobs HTCondor's config reads (htcondor2, in a child process) from `config`
    that differ from those it reads from `baseline` (an empty file in the same directory),
    less the ones that differ between two reads of the baseline (PID, random values;
    each read by HTCondor's reader anew, not answered from the knobs kept of the last)."""
    def fresh(path: Path) -> dict:
        condor_config._READS.clear()
        return read_params(path)[0]
    base, again, got = fresh(baseline), fresh(baseline), fresh(config)
    volatile = {k for k in set(base) | set(again) if base.get(k) != again.get(k)}
    return {k: v for k, v in got.items() if k not in volatile and base.get(k) != v}


def test_config_from_hostile_names_and_values_holds_exactly_the_knobs_given(tmp_path):
    pwned = tmp_path / "pwned"
    knobs = {
        "NEGOTIATOR_HOSTILE_A": f"1\ninclude command : touch {pwned}",
        "GROUP_HOSTILE_B": "C:\\dir\\",                  # a trailing backslash continues a line
        "GROUP_HOSTILE_C": "before\\\nGROUP_HOSTILE_INJECTED = 1",
        "GROUP_HOSTILE_D": "a\rb\x1bc\x00d\x7fe\tf",
        "GROUP_HOSTILE_E": "x\n@=END\nGROUP_HOSTILE_INJECTED = 2\n@END",
        "GROUP_HOSTILE_F": "p\u2028if false\u2029q\x85r\x0bs\x0ct\x1cu",
        "GROUP_HOSTILE_G": "\n\nelse\n",
        "PREEMPTION_REQUIREMENTS": "RemoteUserPrio >\n  SubmitterUserPrio * 1.2",
    }
    negotiator = classad2.ClassAd({
        "Name": f"neg\ninclude command : touch {pwned}",
        "MyAddress": "<10.0.0.1:9618>\r\nGROUP_HOSTILE_INJECTED = 3\\",
    })
    pool_name = "cm.example.org\n#opt:oldcomment\\\nGROUP_HOSTILE_INJECTED = 4\u202e\x1b[2J"
    text = format_config(knobs, negotiator=negotiator, pool=pool_name, captured_at=NOW)
    config, baseline = tmp_path / "config", tmp_path / "empty"
    config.write_text(text)
    baseline.write_text("")

    lines = text.split("\n")
    assert lines[-1] == "" and "\r" not in text
    assert len([ln for ln in lines if ln.startswith("#")]) == 5
    for ln in lines:
        assert ln == "" or ln.startswith("# ") or ln.split(" = ", 1)[0] in knobs, ln
        assert not ln.endswith("\\"), ln
        assert all(c == "\t" or c.isprintable() for c in ln), ln
    assert lines[0] == ("# Policy knobs of the negotiator neg\\x0ainclude command : touch "
                        f"{pwned} (<10.0.0.1:9618>\\x0d\\x0aGROUP_HOSTILE_INJECTED = 3\\x5c)")
    assert lines[1].startswith("# in pool cm.example.org\\x0a#opt:oldcomment\\x5c\\x0a"
                               "GROUP_HOSTILE_INJECTED = 4\\u202e\\x1b[2J, read with")

    changed = _changed_knobs(config, baseline)
    assert {k.upper() for k in changed} == {k.upper() for k in knobs}
    assert changed["NEGOTIATOR_HOSTILE_A"] == f"1 include command : touch {pwned}"
    assert changed["GROUP_HOSTILE_B"] == "C:\\dir\\x5c"
    assert changed["GROUP_HOSTILE_C"] == "before\\ GROUP_HOSTILE_INJECTED = 1"
    assert changed["GROUP_HOSTILE_D"] == "a b\\x1bc\\x00d\\x7fe\tf"
    assert changed["GROUP_HOSTILE_E"] == "x @=END GROUP_HOSTILE_INJECTED = 2 @END"
    assert changed["GROUP_HOSTILE_F"] == "p if false q r s t u"
    assert changed["GROUP_HOSTILE_G"] == "else"
    assert changed["PREEMPTION_REQUIREMENTS"] == "RemoteUserPrio >   SubmitterUserPrio * 1.2"
    assert not pwned.exists()


@pytest.mark.parametrize("name", ["GROUP_QUOTA_a b", "GROUP_QUOTA_a\nb", "X=1", "if", "ELSE", ""])
def test_config_refuses_a_name_that_is_not_a_knob_name(name):
    with pytest.raises(ValueError, match="not a knob name"):
        format_config({name: "1"})


@pytest.mark.parametrize("failure", ["not-located", "locate-raises", "remote-raises"])
def test_unreadable_negotiator_is_partial_without_config(pool, tmp_path, failure):
    if failure == "not-located":
        pool.locate_result = None
    elif failure == "locate-raises":
        pool.locate_result = htcondor2.HTCondorException("no negotiator")
    else:
        pool.remote = htcondor2.HTCondorException("Failed to connect to negotiator")
    out = tmp_path / "snap"
    report = capture_snapshot(None, out, now=NOW)
    assert report.partial is True
    assert set(report.errors) == {"negotiator"}
    assert not (out / "config").exists()
    meta = json.loads((out / "meta.json").read_text())
    assert meta["partial"] is True and "negotiator" in meta["errors"]
    assert meta["missing_schedds"] == []
    snap = load_snapshot(out)
    assert snap.config_path is None and len(snap.all_jobs()) == 52


def test_version_falls_back_to_the_collector_ad(pool, tmp_path, mocker):
    pool.negotiator = []
    pool.locate_result = None
    orig = FakeCollector.query

    def query(self, ad_type=htcondor2.AdTypes.Any, constraint=None, projection=None, statistics=None):
        if ad_type == htcondor2.AdTypes.Collector:
            self.pool.calls.append(("Collector.query", ad_type, tuple(projection or ())))
            return [classad2.ClassAd({"Name": "cm", "CondorVersion": "$CondorVersion: 25.0.1 $"})]
        return orig(self, ad_type, constraint, projection, statistics)

    mocker.patch.object(FakeCollector, "query", query)
    capture_snapshot(None, tmp_path / "snap", now=NOW)
    meta = json.loads((tmp_path / "snap" / "meta.json").read_text())
    assert meta["htcondor_version"] == "$CondorVersion: 25.0.1 $"
    assert meta["counts"]["slots"] == 40


# ------------------------------------------------------------------------- read-only, timeouts

def test_only_read_operations_and_bounded_round_trips(pool, tmp_path):
    pool.schedds["other"] = fixture_ads("jobs.ads")[:4]
    report = capture_snapshot(None, tmp_path / "snap", now=NOW)
    # the fakes record any attribute they do not define as ("FORBIDDEN", name)
    assert [c for c in pool.calls if c[0] == "FORBIDDEN"] == []
    assert dict(report.errors) == {} and report.partial is False
    assert report.missing_schedds == () and set(report.schedds) == {"vm", "other"}
    kinds = {c[0] for c in pool.calls}
    assert kinds <= {"Collector", "Collector.query", "Collector.locate", "Collector.locateAll",
                     "Schedd", "Schedd.query", "RemoteParam"}
    collector_queries = [c[1] for c in pool.calls if c[0] == "Collector.query"]
    assert sorted(collector_queries) == sorted([
        htcondor2.AdTypes.Startd, htcondor2.AdTypes.Negotiator,
        htcondor2.AdTypes.Submitter, htcondor2.AdTypes.Accounting, htcondor2.AdTypes.Schedd])
    # the slot query is not projected
    assert [c[2] for c in pool.calls if c[0] == "Collector.query"
            and c[1] == htcondor2.AdTypes.Startd] == [()]
    assert {n: len(q) for n, q in pool.schedd_queries.items()} == {"vm": 1, "other": 1}


def test_timeout_is_applied_to_the_bindings_and_restored(pool, tmp_path):
    capture_snapshot(None, tmp_path / "snap", timeout=7, now=NOW)
    assert pool.param_during_queries
    assert all(p == {"QUERY_TIMEOUT": "7", "Q_QUERY_TIMEOUT": "7"}
               for p in pool.param_during_queries)
    assert pool.param == {"QUERY_TIMEOUT": "60", "Q_QUERY_TIMEOUT": "20"}


def test_fake_module_can_be_passed_in(tmp_path, mocker):
    fake = FakePool()
    module = mocker.MagicMock()
    module.AdTypes, module.DaemonTypes = htcondor2.AdTypes, htcondor2.DaemonTypes
    module.Collector.side_effect = fake.make_collector
    module.Schedd.side_effect = fake.make_schedd
    module.RemoteParam.side_effect = fake.make_remote_param
    module.param = fake.param
    report = capture_snapshot("cm", tmp_path / "snap", htcondor=module, now=NOW)
    assert (report.slots, report.jobs, report.partial) == (40, 52, False)
    assert module.Collector.call_args.args == ("cm",)


def test_job_refs_missing_reads_my_and_unscoped_refs_only():
    job = classad2.parseOne(
        'Requirements = TARGET.Memory > RequestMemory && MY.Foo && Bar\n'
        'RequestMemory = 100\nAutoClusterAttrs = "Baz, RequestMemory"', classad2.ParserType.Old)
    lines = ad_lines([job])
    assert job_refs_missing_in_lines(
        lines, ["Requirements", "RequestMemory", "AutoClusterAttrs"]) == ["Bar", "Baz", "Foo"]
    assert job_refs_missing_in_lines(
        lines, ["Requirements", "RequestMemory", "AutoClusterAttrs", "foo", "BAR", "baz"]) == []


def test_write_failure_leaves_nothing_behind(pool, tmp_path, mocker):
    real = live.write_lines
    calls = []

    def failing(path, lines):
        calls.append(Path(path).name)
        if len(calls) == 2:
            raise OSError(28, "No space left on device")
        real(path, lines)

    mocker.patch.object(live, "write_lines", side_effect=failing)
    with pytest.raises(InputError, match="No space left on device"):
        capture_snapshot(None, tmp_path / "snap", now=NOW)
    assert calls[0] == "slots.ads"
    assert list(tmp_path.iterdir()) == []


def test_unlocatable_negotiator_takes_an_earlier_snapshots_config(pool, tmp_path):
    """A restarted collector knows no negotiator until its next update: a capture given an
    earlier snapshot's config uses it, says so, and is not partial for that."""
    first = tmp_path / "1"
    capture_snapshot(None, first, now=NOW)
    earlier = (first / "config").read_text()
    pool.locate_result = None
    out = tmp_path / "2"
    report = capture_snapshot(None, out, now=NOW + 60, earlier_config=first / "config")
    assert report.partial is False and dict(report.errors) == {}
    assert (out / "config").read_text() == earlier
    meta = json.loads((out / "meta.json").read_text())
    assert meta["config_source"] == f"an earlier snapshot: {first / 'config'}"
    # the policy expressions, as HTCondor reads the earlier config (its defaults too:
    # NEGOTIATOR_PRE_JOB_RANK reads KFlops, ...), project at least what the first did
    assert set(json.loads((first / "meta.json").read_text())["job_projection"]) < set(
        meta["job_projection"])
    (warning,) = meta["warnings"]
    assert warning.startswith(f"the negotiator's config is {first / 'config'}'s (this capture: ")
    assert "the collector knows no negotiator" in warning
    from negotiator_ext.pool import load_pool
    loaded = load_pool(out)
    assert any("the negotiator's config is" in w for w in loaded.warnings)
    # no earlier config to fall back on: partial, as before
    report = capture_snapshot(None, tmp_path / "3", now=NOW + 120,
                              earlier_config=tmp_path / "missing" / "config")
    assert report.partial is True and set(report.errors) == {"negotiator"}


def test_each_schedds_limits_are_read_into_schedd_knobs_json(pool, tmp_path):
    """A schedd's own limits (core/schedd_limits.py) come from its RemoteParam: the knobs
    it lists, a SCHEDD. override winning, each fetched once, nothing else fetched."""
    pool.schedd_remote = {"MAX_JOBS_RUNNING": "MIN({24105, 10000})", "MAX_CONCURRENT_UPLOADS": "100",
                          "SCHEDD.MAX_CONCURRENT_UPLOADS": "50", "SCHEDD_INTERVAL": "5",
                          "SCHEDD_ENABLE_PER_USER_MATCH_LIMITS": "Not defined"}
    out = tmp_path / "snap"
    report = capture_snapshot(None, out, now=NOW)
    assert report.partial is False
    assert json.loads((out / "schedd-knobs.json").read_text()) == {
        "vm": {"MAX_JOBS_RUNNING": "MIN({24105, 10000})", "MAX_CONCURRENT_UPLOADS": "50"}}
    (rp,) = pool.schedd_remote_params
    assert sorted(rp.fetched) == ["MAX_JOBS_RUNNING", "SCHEDD.MAX_CONCURRENT_UPLOADS",
                                  "SCHEDD_ENABLE_PER_USER_MATCH_LIMITS"]
    p = load_pool(out)
    assert (p.schedd_limits["vm"].per_user, p.schedd_limits["vm"].max_jobs_running) == (10, 10000)


def test_a_schedd_whose_limits_cannot_be_read_is_a_warning(pool, tmp_path):
    pool.schedd_remote = RuntimeError("permission denied")
    out = tmp_path / "snap"
    report = capture_snapshot(None, out, now=NOW)
    assert report.partial is False and not (out / "schedd-knobs.json").exists()
    (w,) = json.loads((out / "meta.json").read_text())["warnings"]
    assert w == "the schedd vm's limits were not read (permission denied): the config's apply"


def test_a_first_guess_serves_any_projection_it_holds(monkeypatch):
    """The schedds asked beside the slot steps with a guessed projection (a first
    capture: `first_guess`): its answer is taken for any projection whose names it
    holds, in any case; an earlier capture's only for the very same projection; one
    asked with kept attributes (by requests) never for a guess."""
    from negotiator_ext.adapters import schedd_query
    from negotiator_ext.adapters.job_projection import first_guess

    class Child:
        cancelled = False

        def cancel(self):
            self.cancelled = True

    monkeypatch.setattr(schedd_query._SchedsBeside, "_answer", lambda self, child: "answer")

    def asked(projection, guess, wanted, kept=None, guess_kept=None):
        beside = schedd_query._SchedsBeside(object(), None, projection, guess_kept,
                                            guess=guess)
        beside._child = child = Child()         # (fake bindings start no child)
        got = beside.result(wanted, kept)
        assert child.cancelled is (got is None)
        return got

    guess = first_guess()
    assert asked(guess, True, guess) == "answer"
    assert asked(guess, True, [n.upper() for n in guess[:20]]) == "answer"
    assert asked(guess, True, guess + ["Wanted"]) is None
    assert asked(guess, True, guess[:20], kept=["RequestCpus"]) is None
    assert asked(guess, False, guess[:20]) is None          # an earlier capture's
    assert asked(guess, False, list(guess)) == "answer"
    # captured by requests: the guess's kept attributes hold the capture's, and keep
    # no attribute of its projection the capture leaves out of its jobs
    from negotiator_ext.adapters.job_projection import DEFAULT_POOL_JOB_REFS
    from negotiator_ext.adapters.resource_requests import kept_attributes
    g_kept = kept_attributes(guess, DEFAULT_POOL_JOB_REFS)
    left_out = [n for n in guess if n not in g_kept]
    assert left_out and "KFlops" in g_kept
    fewer = [n for n in guess if n != "KFlops"]         # a pool whose slots lack KFlops
    assert asked(guess, True, fewer, kept_attributes(fewer, []), g_kept) == "answer"
    assert asked(guess, True, guess, g_kept, g_kept) == "answer"
    # a capture that keeps an attribute the guess left out: asked again
    assert asked(guess, True, guess, g_kept + left_out[:1], g_kept) is None
    # the guess keeps an attribute of the capture's projection the capture leaves out
    assert asked(guess, True, guess, [n for n in g_kept if n != "KFlops"], g_kept) is None


def test_the_first_guess_is_every_recorded_25_pools_projection():
    """`first_guess` is the projection every pool recorded with real 25.14 daemons was
    captured with (tests/data/forecast: static and partitionable slots): a first capture
    of such a pool takes the answer its schedds gave beside the slot steps."""
    from negotiator_ext.adapters.job_projection import first_guess
    metas = sorted((Path(__file__).parent / "data" / "forecast").glob("*/snapshot/meta.json"))
    assert len(metas) >= 4
    for m in metas:
        assert json.loads(m.read_text())["job_projection"] == first_guess(), m
