"""A bounded ledger (issue 33 part 3): passes older than NEGOTIATOR_EXT_DETAIL_DAYS become
hourly summaries that `audit`, `ledger show` and `recommend` still read, passes and
summaries older than NEGOTIATOR_EXT_RETENTION_DAYS go, and the space comes back (SQLite:
incremental vacuum, the file shrinks; PostgreSQL: VACUUM, the space is reused, VACUUM
FULL shrinks it). A ledger of schema 8 opens, is migrated, and shrinks once vacuumed.

The property tests check what docs/shadow-mode.md promises a summary keeps: over whole
hours of evenly spaced passes, the audit's pass counts, covered time, each submitter's
delivered share, each group's quota, usage and request, each principal's pass count and
the comparisons' count and mean agreement are what the passes gave; and where the
figures held all the hour, `recommend` makes the same changes from the same counts.
Both SQLite and PostgreSQL run the backend tests (PostgreSQL as tests/test_ledger.py
starts it)."""

from __future__ import annotations

import dataclasses
import json
import logging
import random
import sqlite3
import statistics
import types

import pytest
from hypothesis import HealthCheck, assume, given, settings, strategies as st

from negotiator_ext.adapters import ledger as ledger_mod
from negotiator_ext.adapters import ledger_summaries
from negotiator_ext.adapters.audit_data import read_frames
from negotiator_ext.adapters.ledger import HOUR, SCHEMA_VERSION, hour_key, open_ledger
from negotiator_ext.cli import main
from negotiator_ext.core import audit as A
from negotiator_ext.core.recommend import RecommendPolicy, recommend
from negotiator_ext.core.records import (Comparison, GroupObs, MatchEntry, PassRecord, RealCycle,
                                         SubmitterObs)
from negotiator_ext.shadow_state import ShadowSettings
from negotiator_ext.shadow import _Pass
from test_ledger import pg_url, postgres_server, url  # noqa: F401  (fixtures, reused)
from test_ledger import written_before_v10

T0 = 1_700_000_000 // HOUR * HOUR          # the start of an hour
POOL = "cm.example.org"


def a_pass(i: int, t: float, *, status="complete", matches=4, subs=None, groups=None,
           comparison=True, pool=POOL) -> PassRecord:
    """Pass `i` at time `t`, shaped as the shadow loop records one: matches ours and
    real, a real cycle, a comparison of pass i-1, three submitters and two groups."""
    subs = subs if subs is not None else tuple(
        SubmitterObs(f"u{k}@x", "g1" if k else "<none>", False, factor=1000.0 + k,
                     real_eup=100.0 * (k + 1) + i, real_usage=2.0 * k + (i % 3),
                     idle_jobs=k + 1, running_jobs=k, claimed_weight=float(k),
                     shadow_limit=1.0, shadow_match_weight=0.5, shadow_matches=1,
                     real_matches=1, real_rup=0.1 * k, drift=0.01)
        for k in range(3))
    groups = groups if groups is not None else (
        GroupObs("<none>", real_quota=40.0, real_usage=10.0, real_requested=12.0),
        GroupObs("g1", real_quota=60.0, real_usage=20.0 + i % 5, real_requested=30.0))
    ours = tuple(MatchEntry(f"{i}.{j}", f"u{j % 3}@x", f"slot{j}@node{i % 7}", wait=60.0,
                            group="g1") for j in range(matches))
    real = tuple(dataclasses.replace(m, time=int(t) - 5) for m in ours)
    comp = Comparison(
        shadow_pass=f"p{i - 1}", real_cycle_time=int(t) - 10, real_cycles_between=1,
        real_matches=matches, shadow_matches=matches, agreed=matches - 1,
        real_in_shadow=0.75, shadow_in_real=0.75, count_agreement=0.5 + (i % 2) / 4,
        source="matchlog", per_submitter={"u1@x": {"real": 1, "shadow": 2}},
        max_abs_drift=0.01 * (i % 4), real_duration=2.0, agreed_equivalent=matches,
        equivalent_agreement=1.0 - (i % 3) / 10) if comparison and i else None
    return PassRecord(
        uuid=f"p{i}", pool=pool, started_at=float(t), finished_at=float(t) + 2,
        snapshot_time=int(t), status=status, reason=None if status == "complete" else
        f"{status}: schedd s{i % 2} did not answer", real_cycle_time=int(t) - 10,
        real_accountant_time=int(t) - 20, shadow_duration=1.5, capture_duration=0.5,
        pool_weight=100.0, real_cycles=(RealCycle(time=int(t) - 10, end=int(t) - 8,
                                                  duration=2.0, matches=matches),),
        shadow_matches=ours, real_matches=real, submitters=subs if status == "complete"
        else subs[:1], groups=groups, comparison=comp, comparable=status == "complete",
        slot_classes={m.slot: 0 for m in ours})


def record_hours(ledger, hours: float, every: int = 60, start: int = 0, **kw) -> list:
    """Passes every `every` seconds for `hours` hours from T0 (+ `start` passes on); every
    seventh partial."""
    recs = []
    for i in range(start, start + int(hours * HOUR / every)):
        recs.append(a_pass(i, T0 + i * every, status="partial" if i % 7 == 3 else "complete",
                           **kw))
    ledger.record_passes(recs)
    return recs


# ---------------------------------------------------------------- the summaries


def test_old_hours_are_summarised_and_every_reader_still_answers(url, capsys, tmp_path):
    with open_ledger(url) as ledger:
        recs = record_hours(ledger, 3 + 10 / 60)        # 190 passes, into the 4th hour
        assert ledger.summarise(T0 + 2 * HOUR + 1) == 2    # hours 0 and 1 (2 is not over)
        assert ledger.summarise(T0 + 2 * HOUR + 1) == 0
        assert ledger.verify() == []
        kept = ledger.passes()
        assert [p["uuid"] for p in kept] == [r.uuid for r in recs[120:]]
        for gone in ("p0", "p119"):
            assert ledger.pass_record(gone) is None and ledger.shadow_matches(gone) == []
        (h0, s0, g0), (h1, _s1, _g1) = ledger.hours()
        assert (h0["uuid"], h1["uuid"]) == (hour_key(POOL, T0), hour_key(POOL, T0 + HOUR))
        summ = h0["summary"]
        complete0 = [r for r in recs[:60] if r.status == "complete"]
        assert (summ["passes"], summ["complete"], summ["partial"]) == (60, len(complete0), 9)
        assert h0["status"] == "complete" and "9 of 60 passes not complete" in h0["reason"]
        assert h0["n_shadow_matches"] == 240 and h0["n_real_matches"] == 240
        assert summ["first_started"] == complete0[0].started_at
        assert summ["last_started"] == complete0[-1].started_at
        # the complete passes stand until the next complete one: from the first (p0) to
        # the next hour's first
        assert summ["seconds"] == pytest.approx(3600.0)
        by = {s.name: s for s in s0}
        assert set(by) == {"u0@x", "u1@x", "u2@x"}
        # a mean figure, a level figure, a sum and a last value; each complete pass
        # weighs the time until the next complete one (a partial pass is not one)
        nxt = [r for r in recs if r.status == "complete"]
        weight = {a.uuid: b.started_at - a.started_at for a, b in zip(nxt, nxt[1:])}
        assert by["u2@x"].real_usage == pytest.approx(
            sum((4.0 + i % 3) * weight[f"p{i}"] for i in range(60)
                if recs[i].status == "complete") / 3600)
        assert by["u1@x"].real_eup == pytest.approx(
            sum((200.0 + i) * weight[f"p{i}"] for i in range(60)
                if recs[i].status == "complete") / 3600)
        assert by["u1@x"].shadow_matches == len(complete0)
        assert by["u1@x"].factor == 1001.0 and by["u1@x"].group == "g1"
        # only complete passes are summarised (the partial ones recorded u0 alone)
        assert summ["submitter_passes"] == dict.fromkeys(by, len(complete0))
        assert {g.name: g.real_quota for g in g0} == {"<none>": 40.0, "g1": 60.0}
        assert summ["real_cycles"]["count"] == 60 and summ["comparisons"]["count"] == 59
        # the readers: the window and the pass list with the hours in their place
        window = ledger.window(None, summaries=True)
        assert [h["uuid"] for h, _s, _g in window[:3]] == [h0["uuid"], h1["uuid"], "p120"]
        assert len(window) == 2 + sum(r.status == "complete" for r in recs[120:])
        assert [p["uuid"] for p in ledger.passes(last=3, summaries=True)] == [
            "p187", "p188", "p189"]
        assert [p["uuid"] for p in ledger.passes(until=T0 + 2 * HOUR + 60, summaries=True)
                ][:3] == [h0["uuid"], h1["uuid"], "p120"]
        comps = ledger.comparisons(summaries=True)
        assert comps[0][1].source == "hour" and comps[0][1].shadow_pass == h0["uuid"]
        assert comps[0][1].count_agreement == pytest.approx(
            statistics.mean(0.5 + (i % 2) / 4 for i in range(1, 60)))
        assert ledger.newest_real_cycle(POOL) == int(recs[-1].started_at) - 10
        frames = read_frames(ledger, pool=POOL)
    audit = A.analyse(frames, pool=POOL)
    assert audit.summary["passes"]["total"] == 190
    assert audit.summary["passes"]["analysed"] == sum(r.status == "complete" for r in recs)
    assert audit.summary["hours_summarised"] == 2
    assert audit.summary["comparisons"]["count"] == 189
    assert any("hourly summaries" in n for n in audit.summary["notes"])
    assert set(audit.tables["submitter_shares"]["name"]) == {"u0@x", "u1@x", "u2@x"}
    # ledger show: an hour is a row
    empty = tmp_path / "condor_config"        # an empty HTCondor config: no host knobs
    empty.write_text("")
    assert main(["ledger", "show", "--ledger", url, "--last", "72", "--config", str(empty)]) == 0
    out = capsys.readouterr().out.splitlines()
    hours = [line for line in out if line.startswith("hour")]
    assert len(hours) == 2 and f"{len(complete0)}/60 complete" in hours[0]
    # the retention removes the hour summaries that ended before it as it does passes
    with open_ledger(url) as ledger:
        assert ledger.prune(T0 + HOUR + 1) == 1
        assert [h["uuid"] for h, _s, _g in ledger.hours()] == [h1["uuid"]]
        assert ledger.verify() == []


def test_a_pass_late_for_its_hour_is_folded_into_the_summary(url):
    with open_ledger(url) as ledger:
        record_hours(ledger, 2, every=600)
        assert ledger.summarise(T0 + HOUR) == 1
        (h, subs, _g), = ledger.hours()
        # a pass recorded afterwards with a start in that hour (a clock that went back)
        late = a_pass(99, T0 + 1800 + 30)
        assert ledger.record_pass(late)
        assert ledger.summarise(T0 + HOUR) == 1
        (h2, subs2, _g2), = ledger.hours()
        assert h2["summary"]["passes"] == h["summary"]["passes"] + 1
        assert h2["summary"]["complete"] == h["summary"]["complete"] + 1
        assert h2["n_shadow_matches"] == h["n_shadow_matches"] + 4
        by, by2 = {s.name: s for s in subs}, {s.name: s for s in subs2}
        assert by2["u1@x"].shadow_matches == by["u1@x"].shadow_matches + 1
        assert h2["summary"]["submitter_passes"]["u1@x"] == (
            h["summary"]["submitter_passes"]["u1@x"] + 1)
        assert ledger.pass_record(late.uuid) is None and ledger.verify() == []


def test_two_writers_summarise_each_hour_once(url):
    """Two loops on one ledger (two state directories): each hour is summarised by one of
    them, and neither fails."""
    import threading
    with open_ledger(url) as ledger:
        record_hours(ledger, 6, every=300)
    done, errors = [], []

    def summarise() -> None:
        try:
            with open_ledger(url) as mine:
                done.append(mine.summarise(T0 + 6 * HOUR))
        except Exception as exc:                # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=summarise) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and sum(done) == 6
    with open_ledger(url) as ledger:
        assert [h["summary"]["passes"] for h, _s, _g in ledger.hours()] == [12] * 6
        assert ledger.passes() == [] and ledger.verify() == []


def test_the_summary_columns_are_the_records_fields(tmp_path):
    """A field added to SubmitterObs or GroupObs needs an aggregation and a column."""
    for cls, agg, table in ((SubmitterObs, ledger_summaries._SUBMITTER_AGG, "hour_submitters"),
                            (GroupObs, ledger_summaries._GROUP_AGG, "hour_groups")):
        fields = {f.name for f in dataclasses.fields(cls)}
        assert set(agg) | {"name"} == fields
        with open_ledger(str(tmp_path / "l.sqlite")):
            pass
        conn = sqlite3.connect(tmp_path / "l.sqlite")
        cols = {r[1] for r in conn.execute(f"PRAGMA table_info({table})")}
        conn.close()
        assert cols == fields | {"id", "hour_id", "passes"}


# ---------------------------------------------------------------- space


def test_sqlite_gives_the_space_back_and_the_file_shrinks(tmp_path):
    path = tmp_path / "ledger.sqlite"
    with open_ledger(str(path)) as ledger:
        record_hours(ledger, 3, every=120, matches=150)
        assert ledger.reclaim() == {"shrinks": True, "pages_freed": 0, "free_pages": 0}
        before = ledger.space()                 # checkpointed: the file holds every page
        assert before["auto_vacuum"] == "incremental"
        assert before["bytes"] == before["pages"] * before["page_size"]
        assert ledger.summarise(T0 + 2 * HOUR) == 2
        freed = ledger.space()
        assert freed["free_pages"] > before["pages"] / 2       # two thirds of the detail
        assert freed["pages"] == before["pages"]               # not given back yet
        got = ledger.reclaim(max_pages=100)                    # a bounded step
        assert got["shrinks"] and got["pages_freed"] == 100
        while ledger.reclaim()["free_pages"]:
            pass
        after = ledger.space()
    assert after["free_pages"] == 0 and after["pages"] < before["pages"] / 2
    assert path.stat().st_size < before["bytes"] / 2           # the file itself shrank


def test_postgresql_reuses_the_space_and_vacuum_full_shrinks_it(pg_url):
    with open_ledger(pg_url) as ledger:
        record_hours(ledger, 3, every=120, matches=150)
        full = ledger.space()["bytes"]
        assert ledger.summarise(T0 + 2 * HOUR) == 2
        ledger.reclaim()                                       # VACUUM: reusable
        # as many passes again as were summarised (two thirds of the ledger): they go
        # into the space those left (the tables' pages; indexes on ever-growing ids take
        # fresh pages): the ledger grows by less than half of what they take afresh
        record_hours(ledger, 2, every=120, matches=150, start=90)
        refilled = ledger.space()["bytes"]
        assert refilled < full * (1 + 2 / 3 / 2), (full, refilled)
        assert ledger.summarise(T0 + 4 * HOUR) == 2
        got = ledger.vacuum()                                  # VACUUM FULL: pages go
        assert got["after"] < got["before"] * 0.6, got
        assert ledger.verify() == []
        assert len(ledger.hours()) == 4


# ---------------------------------------------------------------- an older ledger


def test_a_schema_8_ledger_is_migrated_summarised_and_vacuumed(url, capsys, tmp_path_factory,
                                                              monkeypatch):
    if not url.startswith("postgresql"):
        # what negotiator-ext wrote before: WAL set first, auto_vacuum left at none
        conn = sqlite3.connect(url)
        conn.execute("PRAGMA journal_mode = WAL").fetchall()
        conn.close()
    recs = [a_pass(i, T0 + i * 300) for i in range(30)]
    with ledger_mod._open(url, schema_target=8) as old, monkeypatch.context() as m:
        assert old.schema_version == 8
        written_before_v10(m)
        old.record_passes(recs)
        with pytest.raises(ledger_mod.LedgerError):      # no hours table in version 8
            old.hours()
    with open_ledger(url, read_only=True) as ledger:     # a reader brings it up to date
        assert ledger.schema_version == SCHEMA_VERSION
        # (slot classes are kept for the five newest passes only)
        assert ledger.pass_record("p5") == dataclasses.replace(recs[5], slot_classes={})
        assert ledger.pass_record("p29") == recs[29]
    with open_ledger(url) as ledger:
        assert ledger.summarise(T0 + 2 * HOUR) == 2
        assert [p["uuid"] for p in ledger.passes()] == [r.uuid for r in recs[24:]]
        assert len(ledger.window(None, summaries=True)) == 2 + 6
        if url.startswith("postgresql"):
            return
        assert ledger.space()["auto_vacuum"] == "none"
        got = ledger.reclaim()
        assert got == {"shrinks": False, "free_pages": got["free_pages"]}
        assert got["free_pages"] > 0
    empty = tmp_path_factory.mktemp("cfg") / "condor_config"
    empty.write_text("")
    assert main(["ledger", "vacuum", "--ledger", url, "--config", str(empty)]) == 0
    assert "MiB after" in capsys.readouterr().out
    with open_ledger(url) as ledger:
        space = ledger.space()
        assert space["auto_vacuum"] == "incremental" and space["free_pages"] == 0
        assert ledger.verify() == [] and len(ledger.hours()) == 2


# ---------------------------------------------------------------- the loop's retention


def _retainer(ledger, **knobs) -> _Pass:
    """A pass's retention step on `ledger`, with these NEGOTIATOR_EXT_* knobs."""
    one = _Pass.__new__(_Pass)
    one.s = ShadowSettings.from_knobs({"STATE_DIR": "/nonexistent", **knobs})
    one.ledger = ledger
    one.loop = types.SimpleNamespace(log=logging.getLogger("test.retention"),
                                     reclaim_more=False, warned_vacuum=False)
    return one


def test_the_loop_summarises_past_detail_days_and_prunes_past_retention(tmp_path, caplog):
    with open_ledger(str(tmp_path / "l.sqlite")) as ledger:
        record_hours(ledger, 5, every=300)
        one = _retainer(ledger, DETAIL_DAYS=str(2 / 24), RETENTION_DAYS=str(4 / 24))
        caplog.set_level(logging.INFO, "test.retention")
        one.retain(T0 + 5 * HOUR)
        # hour 0 is older than 4 h: removed; hours 1 and 2 older than 2 h: summarised
        assert [h["summary"]["hour"] for h, _s, _g in ledger.hours()] == [T0 + HOUR,
                                                                          T0 + 2 * HOUR]
        assert min(p["started_at"] for p in ledger.passes()) == T0 + 3 * HOUR
        assert "12 pass(es) and hour(s) older than 0.166667 days removed" in caplog.text
        assert "2 hour(s) older than 0.0833333 days summarised" in caplog.text
        assert ledger.space()["free_pages"] == 0         # given back at once
        one.retain(T0 + 6 * HOUR)                        # an hour later: the next hour
        assert len(ledger.hours()) == 2 and ledger.hours()[0][0]["summary"]["hour"] == (
            T0 + 2 * HOUR)
        # DETAIL_DAYS 0 (or not below RETENTION_DAYS): nothing is summarised
        for knobs in ({"DETAIL_DAYS": "0"}, {"DETAIL_DAYS": "5", "RETENTION_DAYS": "1"}):
            assert _retainer(ledger, **knobs).retain(T0 + 7 * HOUR) is None
            assert len(ledger.hours()) == 2


def test_an_old_sqlite_ledger_is_said_once_to_need_vacuum(tmp_path, caplog):
    path = tmp_path / "l.sqlite"
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA journal_mode = WAL").fetchall()
    conn.close()
    with open_ledger(str(path)) as ledger:
        record_hours(ledger, 3, every=600)
        one = _retainer(ledger, DETAIL_DAYS=str(1 / 24))
        caplog.set_level(logging.INFO, "test.retention")
        one.retain(T0 + 2 * HOUR)
        one.retain(T0 + 3 * HOUR)
    assert caplog.text.count("negotiator-ext ledger vacuum") == 1


def test_the_detail_days_knob_reads_as_the_others():
    base = {"STATE_DIR": "/x"}
    assert ShadowSettings.from_knobs(base).detail_days == 3
    assert ShadowSettings.from_knobs({**base, "DETAIL_DAYS": "0.5"}).detail_days == 0.5
    with pytest.raises(Exception, match="NEGOTIATOR_EXT_DETAIL_DAYS"):
        ShadowSettings.from_knobs({**base, "DETAIL_DAYS": "-1"})


# ---------------------------------------------------------------- what a summary keeps


def _history(seed: int, every: int, hours: int, hgq: bool) -> list[PassRecord]:
    """Evenly spaced passes over `hours` whole hours and two after them, some partial or
    failed (never two in a row; the last of the period and the first after complete),
    submitters recorded in some passes and not others, random figures."""
    rng = random.Random(seed)
    n = hours * HOUR // every
    statuses: list[str] = []
    for i in range(n + 2):
        if i in (n - 1, n) or (statuses and statuses[-1] != "complete"):
            statuses.append("complete")
        else:
            statuses.append(rng.choice(["complete"] * 5 + ["partial", "failed"]))
    group_of = {"a@x": "g1" if hgq else "<none>", "b@x": "g2" if hgq else "<none>",
                "c@x": "<none>"}
    recs = []
    for i, status in enumerate(statuses):
        t = T0 + i * every
        subs = tuple(
            SubmitterObs(name, group_of[name], False, factor=rng.choice([1.0, 2.0, 10.0]),
                         real_eup=rng.uniform(1, 1000), real_rup=rng.uniform(0, 10),
                         real_usage=rng.choice([0.0, rng.uniform(0, 40)]),
                         idle_jobs=rng.randint(0, 20), running_jobs=rng.randint(0, 10),
                         claimed_weight=rng.uniform(0, 10), shadow_eup=rng.uniform(1, 900),
                         drift=rng.choice([None, rng.uniform(-0.2, 0.2)]))
            for name in group_of if name == "c@x" or rng.random() < 0.7)
        groups = (GroupObs("<none>", real_quota=rng.uniform(5, 20) if hgq else None,
                           real_usage=rng.uniform(0, 30), real_requested=rng.uniform(0, 40)),)
        if hgq:
            groups += tuple(GroupObs(g, real_quota=rng.uniform(10, 50),
                                     real_usage=rng.uniform(0, 60),
                                     real_requested=rng.uniform(0, 80)) for g in ("g1", "g2"))
        comp = None
        if i and rng.random() < 0.8:
            comp = Comparison(f"h{i - 1}", t - 30, 1, 10, 10, 7, 0.7, 0.7,
                              rng.uniform(0, 1), "matchlog",
                              equivalent_agreement=rng.uniform(0, 1))
        recs.append(PassRecord(
            uuid=f"h{i}", pool=POOL, started_at=float(t), finished_at=float(t + 1),
            snapshot_time=t, status=status, reason=None if status == "complete" else status,
            real_cycle_time=None, real_accountant_time=None, shadow_duration=1.0,
            capture_duration=None, pool_weight=rng.uniform(80, 120), submitters=subs,
            groups=groups, comparison=comp,
            shadow_matches=(MatchEntry(f"{i}.0", "a@x", "s1", wait=rng.uniform(0, 99)),)))
    return recs


def _by(frame, key, col) -> dict:
    return {k: float(v) for k, v in zip(frame[key], frame[col])}


def _approx(got: dict, want: dict) -> None:
    assert got.keys() == want.keys()
    for k in want:
        assert got[k] == pytest.approx(want[k], rel=1e-9, abs=1e-9), k


@settings(max_examples=8, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32), every=st.sampled_from([300, 600, 900]),
       hours=st.integers(1, 3), hgq=st.booleans())
def test_summarising_keeps_the_audits_figures_over_whole_hours(tmp_path_factory, seed, every,
                                                               hours, hgq):
    recs = _history(seed, every, hours, hgq)
    period = [r for r in recs[:hours * HOUR // every] if r.status == "complete"]
    gaps = [b.started_at - a.started_at for a, b in zip(period, period[1:])]
    assume(not gaps or statistics.median(gaps) == every)   # as the summariser's median
    url = str(tmp_path_factory.mktemp("prop") / "l.sqlite")
    until = T0 + hours * HOUR
    with open_ledger(url) as ledger:
        ledger.record_passes(recs)
        detail = A.analyse(read_frames(ledger, pool=POOL, until=until), pool=POOL)
        assert ledger.summarise(until) == hours
        summed = A.analyse(read_frames(ledger, pool=POOL, until=until), pool=POOL)
    assert summed.summary["hours_summarised"] == hours
    assert summed.summary["passes"] == detail.summary["passes"]
    assert summed.summary["period"]["covered_seconds"] == pytest.approx(
        detail.summary["period"]["covered_seconds"])
    d, s = detail.tables, summed.tables
    _approx(_by(s["submitter_shares"], "name", "delivered"),
            _by(d["submitter_shares"], "name", "delivered"))
    for col in ("quota", "usage") + (("requested",) if hgq else ()):
        _approx(_by(s["group_quota"], "group", col), _by(d["group_quota"], "group", col))
    _approx(_by(s["priorities"], "name", "passes"), _by(d["priorities"], "name", "passes"))
    sc, dc = summed.summary["comparisons"], detail.summary["comparisons"]
    assert sc["count"] == dc["count"] and sc["with_figures"] == dc["with_figures"]
    for k in ("mean_count_agreement", "mean_equivalent_agreement"):
        assert sc[k] == pytest.approx(dc[k])


def _steady_history(seed: int, every: int, hours: int) -> list[PassRecord]:
    """Passes whose figures hold all the hour (each hour its own), for `hours` hours and
    one pass after them; one submitter often over its fair share while ranked ahead,
    one group often over its quota while another is short, drifts of one sign."""
    rng = random.Random(seed)
    hour_figures = []
    for _h in range(hours + 1):
        big = rng.random() < 0.85
        hour_figures.append({
            "subs": tuple(SubmitterObs(
                name, "g1", False, factor=pf, policy_factor=pf,
                real_eup=(50.0 if name == "hog@x" and big else rng.uniform(100, 400)),
                real_usage=(rng.uniform(30, 40) if name == "hog@x" and big
                            else rng.uniform(1, 10)),
                idle_jobs=rng.randint(1, 9), running_jobs=3, shadow_limit=rng.uniform(0, 5),
                shadow_match_weight=rng.uniform(0, 5), predicted_rup=1.0, real_rup=1.1,
                drift=rng.choice([0.1, 0.12, -0.01]))
                for name, pf in (("hog@x", 2.0), ("ann@x", 1.0), ("bob@x", 1.0))),
            "groups": (GroupObs("g1", real_quota=20.0, real_usage=rng.uniform(25, 40),
                                real_requested=60.0),
                       GroupObs("g2", real_quota=30.0, real_usage=rng.uniform(5, 15),
                                real_requested=rng.choice([10.0, 50.0])))})
    recs = []
    for i in range(hours * HOUR // every + 1):
        t = T0 + i * every
        f = hour_figures[(t - T0) // HOUR]
        status = "complete" if rng.random() < 0.9 or i == 0 else "partial"
        recs.append(PassRecord(
            uuid=f"r{i}", pool=POOL, started_at=float(t), finished_at=float(t),
            snapshot_time=t, status=status, reason=None, real_cycle_time=None,
            real_accountant_time=None, shadow_duration=None, capture_duration=None,
            submitters=f["subs"], groups=f["groups"]))
    return recs


def _recommendations(ledger, now: int) -> list[tuple]:
    policy = RecommendPolicy(min_passes=3, min_hours=2)
    recs = recommend(ledger.window(now - 24 * HOUR, pool=POOL, summaries=True), policy, now)
    return [(r.kind, r.name, r.value, r.numbers.get("passes"),
             r.numbers.get("eligible_passes", r.numbers.get("known_passes")),
             r.numbers.get("span_hours")) for r in recs]


def _same_recommendations(got: list[tuple], want: list[tuple]) -> None:
    assert [g[:2] for g in got] == [w[:2] for w in want]
    for g, w in zip(got, want):
        assert g[2] == pytest.approx(w[2], abs=0.011), (g, w)        # rounded to 2 places
        assert g[3:5] == w[3:5], (g, w)
        assert g[5] == pytest.approx(w[5], abs=1e-3), (g, w)


@settings(max_examples=15, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32), every=st.sampled_from([600, 900, 1200]),
       hours=st.integers(3, 5))
def test_summarising_keeps_recommendations_where_figures_held_all_the_hour(
        tmp_path_factory, seed, every, hours):
    recs = _steady_history(seed, every, hours)
    now = int(recs[-1].started_at) + 60
    with open_ledger(str(tmp_path_factory.mktemp("rec") / "l.sqlite")) as ledger:
        ledger.record_passes(recs)
        detail = _recommendations(ledger, now)
        assert ledger.summarise(T0 + hours * HOUR) == hours
        summed = _recommendations(ledger, now)
    _same_recommendations(summed, detail)


def test_the_steady_history_gives_recommendations_to_compare(tmp_path, capsys):
    """The property above compares something: this history recommends a factor for the
    submitter over its share, a group review and setprio advice, before and after; and
    the command counts a summarised hour's passes."""
    recs = _steady_history(7, 600, 4)
    now = int(recs[-1].started_at) + 60
    url = str(tmp_path / "l.sqlite")
    with open_ledger(url) as ledger:
        ledger.record_passes(recs)
        detail = _recommendations(ledger, now)
        ledger.summarise(T0 + 4 * HOUR)
        summed = _recommendations(ledger, now)
    assert {k for k, *_ in detail} >= {"factor", "group", "setprio"}
    _same_recommendations(summed, detail)
    config = tmp_path / "condor_config"
    config.write_text("NEGOTIATOR_EXT_RECOMMEND_MIN_PASSES = 3\n"
                      "NEGOTIATOR_EXT_RECOMMEND_MIN_HOURS = 2\n")
    assert main(["recommend", "--ledger", url, "--config", str(config), "--at", str(now),
                 "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["passes"] == sum(r.status == "complete" for r in recs)
    assert {r["kind"] for r in doc["recommendations"]} >= {"factor", "group", "setprio"}
