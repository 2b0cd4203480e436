"""`negotiator-ext forecast`: the history reader, the closed loop (every job runs exactly
its recorded length, claims reused under CLAIM_WORKLIFE, the negotiator's cadence), the
figures it reports, and bad input.

The histories here are made from the bundled example's real job ads (its queue, each job
given a QDate, a start and a completion as condor_history writes them); the recordings
of real pools running a workload are tests/data/forecast/ (test_forecast_recorded.py).
"""

from __future__ import annotations

import io
import json
import math
import re
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from negotiator_ext.cli import main
from negotiator_ext.core.forecast import JobRun, outcome_of, percentile, usage_error
from negotiator_ext.errors import InputError
from negotiator_ext.sim.engine import NegotiatorCadence
from negotiator_ext.sim.forecast import ForecastSpec, run_forecast
from negotiator_ext.sim.history import JobReader, read_history

ROOT = Path(__file__).parent.parent
EXAMPLE = ROOT / "examples" / "hgq_nested_hep_lep_surplus"
T0 = 1795265266                     # the example's captured_at


def make_history(path: Path, *, arrivals_after: int = 0, runtime=lambda i: 200 + 37 * i % 400,
                 drop: str | None = None, extra: str = "") -> dict:
    """A condor_history -long file of the example's jobs: every third job queued before
    the snapshot (it is in the snapshot's queue too), the others `arrivals_after` s
    apart after it; each ran `runtime(i)` s. Returns {job id: runtime}."""
    text = (EXAMPLE / "jobs.ads").read_text()
    blocks = [b for b in text.split("\n\n") if b.strip()]
    out, runtimes = [], {}
    for i, b in enumerate(blocks):
        lines = [ln for ln in b.splitlines()
                 if not re.match(r"(JobStatus|EnteredCurrentStatus|QDate) =", ln)]
        if drop:
            lines = [ln for ln in lines if not ln.startswith(f"{drop} =")]
        cluster, proc = [int(re.search(rf"^{a} = (\d+)", b, re.M).group(1))
                         for a in ("ClusterId", "ProcId")]
        q = T0 - 100 if i % 3 == 0 or not arrivals_after else T0 + arrivals_after * i
        if q > T0:              # a job submitted after the snapshot: not in its queue
            cluster += 1000
            lines = [f"ClusterId = {cluster}" if ln.startswith("ClusterId =") else ln
                     for ln in lines]
        jid = f"{cluster}.{proc}"
        start, dur = q + 30, runtime(i)
        runtimes[jid] = dur
        lines += ([] if drop == "QDate" else [f"QDate = {q}"]) + [
            "JobStatus = 4", f"EnteredCurrentStatus = {start + dur}",
            f"JobCurrentStartDate = {start}", f"CompletionDate = {start + dur}"]
        out.append("\n".join(lines + ([extra] if extra else [])))
    path.write_text("\n\n".join(out) + "\n")
    return runtimes


def forecast(tmp_path, history, **kw):
    spec = ForecastSpec(snapshot=EXAMPLE, history=(history,), **kw)
    return run_forecast(spec)


def run_cli(argv) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    old = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = out, err
    try:
        rc = main(argv)
    finally:
        sys.stdout, sys.stderr = old
    return rc, out.getvalue(), err.getvalue()


# ---- the history reader ---------------------------------------------------------------------

def test_history_long_and_json_give_the_same_jobs(tmp_path):
    from negotiator_ext.adapters.adfiles import read_ads
    make_history(tmp_path / "h.ads")
    ads = read_ads(tmp_path / "h.ads")
    (tmp_path / "h.json").write_text("[" + ",".join(ad.printJson() for ad in ads) + "]")
    a = read_history([tmp_path / "h.ads"], JobReader(), "schedd")
    b = read_history([tmp_path / "h.json"], JobReader(), "schedd")
    assert len(a.jobs) == len(ads) == 52
    assert {k: (j.qdate, j.runtime, j.cls.submitter, j.cls.cpus) for k, j in a.jobs.items()} == \
        {k: (j.qdate, j.runtime, j.cls.submitter, j.cls.cpus) for k, j in b.jobs.items()}


def test_history_jobs_alike_share_one_class_and_keep_their_own_ids(tmp_path):
    make_history(tmp_path / "h.ads")
    h = read_history([tmp_path / "h.ads"], JobReader(), "schedd")
    classes = {id(j.cls) for j in h.jobs.values()}
    assert len(classes) < len(h.jobs) / 4          # a class per cluster, not per job
    some = next(iter(h.jobs.values()))
    own = dict(some.own)
    assert own["ClusterId"] == str(some.cluster) and own["ProcId"] == str(some.proc)
    names = {n.lower() for n, _ in some.cls.base}
    assert "completiondate" not in names and "jobcurrentstartdate" not in names
    assert {"requirements", "requestcpus", "accountinggroup"} <= names


@pytest.mark.parametrize("drop, attr", [("QDate", "QDate"), ("ClusterId", None)])
def test_a_history_job_without_its_ids_or_qdate_is_refused_naming_it(tmp_path, drop, attr):
    make_history(tmp_path / "h.ads", drop=drop)
    rc, out, err = run_cli(["forecast", str(EXAMPLE), "--history", str(tmp_path / "h.ads"),
                            "--no-progress"])
    assert rc == 2 and out == ""
    assert str(tmp_path / "h.ads") in err and err.count("\n") == 1
    if attr:
        assert "attribute QDate" in err and "job " in err
    else:
        assert "not a job ad" in err


def test_a_file_that_is_not_a_history_is_refused(tmp_path):
    (tmp_path / "h.ads").write_text("this is not\na history\n")
    rc, _, err = run_cli(["forecast", str(EXAMPLE), "--history", str(tmp_path / "h.ads")])
    assert rc == 2 and str(tmp_path / "h.ads") in err


def test_slot_ads_given_as_history_are_refused(tmp_path):
    rc, _, err = run_cli(["forecast", str(EXAMPLE), "--history", str(EXAMPLE / "slots.ads")])
    assert rc == 2 and "not a job ad" in err and "slots.ads" in err


@pytest.mark.parametrize("knob", ["NOT_A_KNOB=1", "PRIORITY_HALFLIF=600", "=3", "NOVALUE"])
def test_a_knob_that_is_not_a_knob_is_refused(tmp_path, knob):
    make_history(tmp_path / "h.ads")
    rc, out, err = run_cli(["forecast", str(EXAMPLE), "--history", str(tmp_path / "h.ads"),
                            "--knob", knob])
    assert rc == 2 and out == "" and "--knob" in err


def test_knobs_without_a_table_default_are_knobs():
    from negotiator_ext.sim.forecast import check_knobs
    check_knobs({"GROUP_NAMES": "a", "NEGOTIATOR_MATCH_EXPRS": "", "GROUP_QUOTA_a": "3",
                 "CLAIM_WORKLIFE": "0", "PRIORITY_HALFLIFE": "600", "LICENSE_LIMIT": "4"})
    with pytest.raises(InputError, match="GROUP_NAME "):
        check_knobs({"GROUP_NAME": "a"})


def test_a_config_that_does_not_parse_is_refused_naming_it(tmp_path):
    make_history(tmp_path / "h.ads")
    (tmp_path / "bad.config").write_text("GROUP_NAMES = a\nthis line is ( not config\n")
    rc, _, err = run_cli(["forecast", str(EXAMPLE), "--history", str(tmp_path / "h.ads"),
                          "--config", str(tmp_path / "bad.config")])
    assert rc == 2 and "bad.config" in err


# ---- the closed loop --------------------------------------------------------------------------

def test_every_job_runs_exactly_its_recorded_length(tmp_path):
    """Conservation: over a span long enough, every job starts once and runs its last
    run's length, so each submitter's usage is the sum of its jobs' runtimes times their
    slot weight (1 cpu each here)."""
    runtimes = make_history(tmp_path / "h.ads", arrivals_after=40)
    run = forecast(tmp_path, tmp_path / "h.ads", hours=6)
    jobs = {j.job: j for j in run.outcome.jobs}
    assert set(runtimes) <= set(jobs)
    for jid, dur in runtimes.items():
        j = jobs[jid]
        assert j.state == "completed" and len(j.runs) == 1
        (a, b, w, preempted), = j.runs
        assert b - a == pytest.approx(dur) and w == 1.0 and not preempted
    total = sum(s["usage"] for s in run.outcome.submitters)
    foreign = sum(w * (b - a) for j in run.outcome.jobs if j.job not in runtimes
                  for a, b, w, _ in j.runs)
    assert total == pytest.approx(sum(runtimes.values()) + foreign)
    assert run.counts["arrivals"] == 34 and run.counts["idle"] == 52
    assert run.counts["no_history"] == 34          # queued, but not in this history


def test_arrivals_wait_for_their_qdate(tmp_path):
    make_history(tmp_path / "h.ads", arrivals_after=60)
    run = forecast(tmp_path, tmp_path / "h.ads", hours=3)
    for j in run.outcome.jobs:
        if j.start is not None:
            assert j.start >= j.queued
    late = [j for j in run.outcome.jobs if j.queued > T0]
    assert late and all(j.start is None or j.start >= j.queued for j in late)


def test_the_snapshot_read_is_let_go_before_the_run(tmp_path, monkeypatch):
    """The snapshot's ads are read into the simulated pool before the run, and nothing
    keeps them after that (at 100,000 slots they were 1.4 GiB of the forecast's peak):
    once the run starts, the pool read from the snapshot and its Snapshot are gone."""
    import gc
    import weakref

    from negotiator_ext import pool as pool_module
    from negotiator_ext.sim import engine
    read = []
    real_load = pool_module.load_pool

    def load_pool(*args, **kw):
        got = real_load(*args, **kw)
        read.extend((weakref.ref(got), weakref.ref(got.snapshot)))
        return got
    monkeypatch.setattr(pool_module, "load_pool", load_pool)
    alive = []
    real_run = engine.Simulation.run

    def run(self):
        gc.collect()
        alive.append([r() is not None for r in read])
        return real_run(self)
    monkeypatch.setattr(engine.Simulation, "run", run)
    make_history(tmp_path / "h.ads", arrivals_after=60)
    got = forecast(tmp_path, tmp_path / "h.ads", hours=1)
    assert len(read) == 2 and alive == [[False, False]]
    assert got.matches > 0 and got.counts["running"] + got.counts["idle"] > 0


def test_slot_shapes_keep_each_name_and_text_once():
    """A snapshot's slots as shapes (`scenario.slot_shapes`): each shape has its own
    slot's attributes, and a name or a text that several slots have is one string
    among them (at 100,000 slots, 350 MiB less)."""
    from negotiator_ext.core.classads import attribute_texts
    from negotiator_ext.pool import load_pool
    from negotiator_ext.scenario import _SIM_OWNED, slot_shapes
    ads = [ad for ad in load_pool(EXAMPLE, None).snapshot.slots
           if ad.get("DynamicSlot") is not True]
    shapes = slot_shapes(ads)
    assert len(shapes) == len(ads) > 1
    for shape, ad in zip(shapes, ads):
        assert shape.attrs == {k: v for k, v in attribute_texts(ad)
                               if k.lower() not in _SIM_OWNED}
    first: dict[str, str] = {}
    shared = 0
    for shape in shapes:
        for k, v in shape.attrs.items():
            for text in (k, v):
                kept = first.setdefault(text, text)
                assert kept is text, text
                shared += 1
    assert shared > len(first)


def test_claims_are_reused_until_claim_worklife(tmp_path):
    """A schedd starts the submitter's next job on the claim a job gave back: the
    negotiator matches fewer jobs. With CLAIM_WORKLIFE = 0 every job goes through it."""
    make_history(tmp_path / "h.ads", runtime=lambda i: 40 + i % 7)
    reuse = forecast(tmp_path, tmp_path / "h.ads", hours=2)
    none = forecast(tmp_path, tmp_path / "h.ads", hours=2, knobs={"CLAIM_WORKLIFE": "0"})
    assert reuse.reused > 0 and none.reused == 0
    assert none.matches > reuse.matches
    started = lambda r: sum(s["jobs_started"] for s in r.outcome.submitters)  # noqa: E731
    assert started(reuse) == started(none)


def test_a_fixed_interval_and_the_cadence(tmp_path):
    make_history(tmp_path / "h.ads", arrivals_after=600)
    fixed = forecast(tmp_path, tmp_path / "h.ads", hours=1, interval=300)
    assert fixed.cycles == 13                           # 0, 300, ..., 3600
    cadence = forecast(tmp_path, tmp_path / "h.ads", hours=1)
    assert cadence.cycles >= 60                         # NEGOTIATOR_INTERVAL = 60


def test_negotiator_cadence_rules():
    class P:
        reschedules: list = []

        def advance(self, t, arrivals, until_reschedule=False):
            while arrivals and arrivals[0][0] <= t:
                at = arrivals.pop(0)[0]
                self.reschedules.append(at)
                return
    c = NegotiatorCadence(60, 5, 20)
    assert c.next_cycle(100, P(), []) == 160                 # the timer
    assert c.next_cycle(100, P(), [(103, 0, None)]) == 120   # a reschedule, CYCLE_DELAY
    assert c.next_cycle(100, P(), [(150, 0, None)]) == 150   # a reschedule, at once
    assert NegotiatorCadence(60, 5, 20, False).next_cycle(100, P(), [(150, 0, None)]) == 160
    # a timer shorter than the cycle delay: the negotiator resets it to the delay
    # (max(NEGOTIATOR_CYCLE_DELAY, NEGOTIATOR_INTERVAL - the cycle's length))
    assert NegotiatorCadence(10, 5, 20).next_cycle(100, P(), []) == 120


def test_a_group_quota_change_moves_usage(tmp_path):
    """The what-if the forecast is for: a larger quota for group_chemistry gives its jobs
    shorter waits, and the JSON says so."""
    make_history(tmp_path / "h.ads", arrivals_after=10, runtime=lambda i: 900)
    base = forecast(tmp_path, tmp_path / "h.ads", hours=2)
    more = forecast(tmp_path, tmp_path / "h.ads", hours=2,
                    knobs={"GROUP_QUOTA_group_chemistry": "30"})
    chem = lambda r: next(g for g in r.outcome.groups if g["group"] == "group_chemistry")  # noqa
    assert chem(more)["quota"] == 30 and chem(base)["quota"] == 10
    assert chem(more)["wait_p90"] <= chem(base)["wait_p90"]


def test_cli_json_and_jobs_and_ledger(tmp_path):
    make_history(tmp_path / "h.ads", arrivals_after=30)
    led = tmp_path / "f.sqlite"
    rc, out, err = run_cli(["forecast", str(EXAMPLE), "--history", str(tmp_path / "h.ads"),
                            "--hours", "1", "--json", "--jobs", "--no-progress",
                            "-o", str(led)])
    assert rc == 0, err
    doc = json.loads(out)
    assert {"submitters", "groups", "timeline", "jobs"} <= set(doc)
    assert set(doc["jobs"][0]) >= {"job", "schedd", "submitter", "group", "queued", "start",
                                   "end", "weight", "preempted"}
    assert len(doc["timeline"]["times"]) == 12
    rc, out, _ = run_cli(["ledger", "show", "--ledger", str(led), "--json"])
    assert rc == 0 and len(json.loads(out)) > 0
    rc, text, _ = run_cli(["forecast", str(EXAMPLE), "--history", str(tmp_path / "h.ads"),
                           "--hours", "1", "--no-progress"])
    assert rc == 0 and "group_chemistry" in text and "Columns" in text
    # times as every view of ours prints them (ISO 8601 UTC, date and time apart)
    import re
    day = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d"
    assert re.search(rf"^  from {day} to {day} UTC \(1 h\)", text, re.M)
    assert re.search(rf"^from \(UTC\) .*\n{day}  ", text, re.M)


# ---- the figures ---------------------------------------------------------------------------

def test_percentile_is_numpys_linear():
    assert percentile([], 50) is None
    assert percentile([5], 90) == 5
    assert percentile([1, 2, 3, 4], 50) == 2.5
    assert percentile([0, 10], 90) == pytest.approx(9.0)


def test_starved_time_and_usage_error():
    runs = [JobRun("1.0", "s", "a", "g", 0, 100, 200, 1, 0, ((100, 200, 1.0, False),),
                   "completed", 200),
            JobRun("1.1", "s", "a", "g", 0, 150, 300, 1, 0, ((150, 300, 1.0, False),),
                   "completed", 300)]
    o = outcome_of(runs, 0, 400, 100, pool_weight=2)
    (s,) = o.submitters
    assert s["starved"] == 100            # idle, nothing running: 0-100
    assert s["usage"] == 250 and s["share"] == pytest.approx(250 / 800)
    assert s["wait_p50"] == 125 and s["wait_max"] == 150
    assert o.timeline["submitters"]["a"] == [0.0, 1.5, 1.0, 0.0]
    assert usage_error({"a": [1, 1]}, {"a": [1, 1]}) == 0
    assert usage_error({"a": [2, 0]}, {"a": [1, 1]}) == 1.0


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.floats(0, 1000), st.floats(0, 500), st.sampled_from([1.0, 2.0]),
                          st.sampled_from(["a", "b"])), max_size=30),
       st.integers(30, 400))
def test_the_timeline_adds_up_to_the_usage(jobs, bucket):
    runs = [JobRun(f"{i}.0", "s", sub, "g" + sub, a, a, a + d, w, 0, ((a, a + d, w, False),),
                   "completed", a + d) for i, (a, d, w, sub) in enumerate(jobs)]
    start, end = 100.0, 1100.0
    o = outcome_of(runs, start, end, bucket, pool_weight=10)
    for row in o.submitters:
        line = o.timeline["submitters"][row["submitter"]]
        lengths = [min(start + (i + 1) * bucket, end) - (start + i * bucket)
                   for i in range(len(line))]
        assert sum(v * n for v, n in zip(line, lengths)) == pytest.approx(row["usage"], abs=0.1)
        assert 0 <= row["starved"] <= end - start
    assert math.isclose(sum(r["usage"] for r in o.submitters),
                        sum(r["usage"] for r in o.groups), abs_tol=1e-6)


def test_a_forecasts_cycles_check_the_changed_slots_and_those_the_matches_named(
        tmp_path, monkeypatch):
    """Each cycle's CheckMatches looks at the slots changed since the last cycle and at
    those the last cycle's matches named: a match the startd did not take up changes no
    slot, but the negotiator wrote its record. So every cycle after the first takes
    that quick path, and the forecast is the one checking every slot gives."""
    from conftest import spy_quick_checks, synthetic_forecast

    import negotiator_ext.sim.pool_rows as rows_mod
    snap, hist = synthetic_forecast(tmp_path, slots=400, jobs=1500, history_jobs=4000)
    spec = ForecastSpec(snapshot=snap, history=(hist,), hours=1)
    quick = spy_quick_checks(monkeypatch)
    fast = run_forecast(spec)
    assert fast.claims_failed > 0            # matches the startd did not take up
    assert len(quick) > 20 and not quick[0] and all(quick[1:]), quick
    monkeypatch.setattr(rows_mod, "SlotChanges", lambda *a: None)
    quick.clear()
    slow = run_forecast(spec)
    assert not any(quick)
    assert (fast.cycles, fast.matches, fast.claims_failed) == (
        slow.cycles, slow.matches, slow.claims_failed)
    assert fast.outcome == slow.outcome
