"""The shadow ledger (adapters.ledger): round trips, idempotence, atomic writes, the
failure modes an admin meets (locked, full, corrupt, newer schema), migrations, pruning,
export, adjustment leases and a real kill -9.

SQLite tests always run. The same backend-independent tests run on PostgreSQL when
$NEGOTIATOR_EXT_TEST_POSTGRES holds a URL, or when `pgserver` (a pip-installable
PostgreSQL) and psycopg are importable: then one throw-away server is started for the
session on a Unix socket, and each test gets its own schema.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import uuid as uuidlib
import warnings
from pathlib import Path
from typing import Callable
from urllib.parse import urlencode, urlsplit, urlunsplit

import pytest

from negotiator_ext.adapters import ledger as ledger_mod
from negotiator_ext.adapters import (ledger_digests, ledger_reading, ledger_rows, ledger_schema,
                                     ledger_summarising, ledger_writing)
from negotiator_ext.adapters.ledger import (MIGRATIONS, SCHEMA_VERSION, TABLES, LedgerError,
                                            open_ledger)
from negotiator_ext.core.records import (Adjustment, Comparison, GroupObs, MatchEntry,
                                         PassRecord, RealCycle, SubmitterObs)
from negotiator_ext.errors import InputError

REPO = Path(__file__).resolve().parent.parent
POSTGRES_ENV = "NEGOTIATOR_EXT_TEST_POSTGRES"


# ---------------------------------------------------------------- records

def full_pass(uuid="pass-1", pool="pool.example.org", started_at=1_700_000_000.25,
              cycles=(1_699_999_900,), n_submitters=2, comparison=True) -> PassRecord:
    """A pass with every field of every record set to something other than its default."""
    real_cycles = tuple(RealCycle(
        time=t, end=t + 3, duration=2.75, phase_durations=(0.5, None, 1.25, 1.0), matches=4,
        rejections=1, active_submitters=3, idle_jobs=17, candidate_slots=12,
        submitters_failed=("bad@x",), submitters_out_of_time=("slow@x", "slower@x"),
        submitters_share_limit=("capped@x",), schedds_out_of_time=("schedd@x",),
        accounting_time=t + 1, submitters_skipped=("slow@x", "late@x"))
        for t in cycles)
    subs = tuple(SubmitterObs(
        name=f"user{i}@example.org", group="group_a" if i % 2 else "<none>", is_group=bool(i % 2),
        factor=1000.0 + i, policy_factor=500.5, factor_lease_expires=1_700_003_600,
        floor=2, floor_lease_expires=1_700_003_601, ceiling=40, ceiling_lease_expires=1_700_003_602,
        real_rup=0.5 + i, real_eup=500.25, real_usage=3.5, resources_used=3.0, hier_usage=7.5,
        real_share=0.25, real_limit=6.0, last_usage_time=1_699_999_000,
        begin_usage_time=1_699_000_000, claimed_weight=3.25, idle_jobs=11, running_jobs=3,
        shadow_eup=501.0, shadow_share=0.3, shadow_limit=6.5, shadow_matches=2,
        shadow_match_weight=2.5, real_matches=1, predicted_rup=0.49, drift=0.0204,
        shadow_submitter_limit=12.5)
        for i in range(n_submitters))
    return PassRecord(
        uuid=uuid, pool=pool, started_at=started_at, finished_at=started_at + 4.5,
        snapshot_time=int(started_at) + 1, status="complete", reason="a reason",
        real_cycle_time=max(cycles) if cycles else None, real_accountant_time=1_699_999_950,
        shadow_duration=0.875, capture_duration=1.125,
        shadow_timings={"match": 0.5, "quota": 0.125}, pool_weight=40.0,
        pass_timings={"capture_slot_query": 0.25, "pool": 0.125, "cycle": 0.875},
        time_limits={"cut": True, "schedds_out_of_time": ["s1"], "matches_within": 3},
        real_cycles=real_cycles,
        shadow_matches=(MatchEntry("12.0", "user0@example.org", "slot1@host", preempting="9.0",
                                   time=1_700_000_001, group="group_a", wait=120.0),
                        MatchEntry("12.1", "user1@example.org", "slot2@host")),
        real_matches=(MatchEntry("12.0", "user0@example.org", "slot1@host", time=1_699_999_901,
                                 group="group_a", wait=60.5),),
        submitters=subs,
        groups=(GroupObs("group_a", real_quota=10.0, config_quota=0.5, real_usage=4.0,
                         real_requested=12.0, shadow_quota=10.5, shadow_allocated=9.0,
                         shadow_usage_after=6.0, shadow_matches=2, real_matches=1),),
        comparison=Comparison(
            shadow_pass="pass-0", real_cycle_time=1_699_999_900, real_cycles_between=1,
            real_matches=4, shadow_matches=2, agreed=1, real_in_shadow=0.25, shadow_in_real=0.5,
            count_agreement=0.75, source="matchlog",
            per_submitter={"user0@example.org": {"real": 1, "shadow": 2, "drift": 0.01}},
            per_group={"group_a": {"real": 1, "shadow": 2}}, max_abs_drift=0.0204,
            real_duration=2.75, notes=("one note", "another"), agreed_equivalent=2,
            equivalent_agreement=0.5,
            time_limits={"real": {"schedds": ["s1"], "submitters": []}, "predicted": None,
                         "groups_not_served": ["group_b"]},
            unexplained_agreement=0.875,
            disagreements=({"submitter": "user0@example.org", "real": 1, "shadow": 2,
                            "class": "pool changed", "unexplained": 0,
                            "changes": ["job 12.1 of user0@example.org left the queue"]},),
            changes=("job 12.1 of user0@example.org left the queue",),
            aligned=True,
            repredicted={"at": 1_699_999_905, "source": "the NegotiatorLog's phase 2 line",
                         "delta_t": 4, "seconds": 0.25, "unexplained": 1, "explained": 1,
                         "explained_submitters": ["user0@example.org"],
                         "new_differences": 0, "unexplained_agreement_before": 0.5}
            ) if comparison else None,
        snapshot_dir="/var/lib/negotiator-ext/snapshots/1700000000",
        warnings=("schedd x slow", "no matchlog"), comparable=True,
        slot_classes={"slot1@host": 0, "slot2@host": 0, "slot3@host": 1},
        aligned_cycle=int(started_at),
        digest={"submitters": {"user0@example.org": 2}, "candidate_slots": 3,
                "jobs": {"user0@example.org": {"12": [[0, 1]]}},
                "slots": {"slot1@host": True, "slot2@host": False, "slot3@host": False}})


def small_pass(uuid, started_at=1000.0, pool="p", cycles=(), status="complete") -> PassRecord:
    return PassRecord(
        uuid=uuid, pool=pool, started_at=started_at, finished_at=started_at + 1,
        snapshot_time=int(started_at), status=status, reason=None, real_cycle_time=None,
        real_accountant_time=None, shadow_duration=None, capture_duration=None,
        real_cycles=tuple(RealCycle(time=t, end=None, duration=None) for t in cycles),
        shadow_matches=(MatchEntry(f"{uuid}.0", "alice", "slot1"),),
        submitters=(SubmitterObs("alice", "<none>", False, factor=1.0),
                    SubmitterObs("bob", "<none>", False, factor=2.0)),
        groups=(GroupObs("g"),))


def _comparing(rec: PassRecord, earlier: str) -> PassRecord:
    """`rec` comparing pass `earlier`'s cycle (each pass is compared once)."""
    return dataclasses.replace(rec, comparison=dataclasses.replace(rec.comparison,
                                                                   shadow_pass=earlier))


def adjustment(key="factor:alice", applied_at=100, lease=None, outcome="applied", value=2.0,
               name="alice") -> Adjustment:
    return Adjustment(key=key, kind="factor", name=name, value=value, applied_at=applied_at,
                      lease_expires=lease, command=f"condor_userprio -setfactor {name} {value}",
                      method="condor_userprio", outcome=outcome)


def test_full_pass_sets_every_field():
    """Guard for the round trip below: a field added to the records must be filled in."""
    rec = full_pass()
    for obj in (rec, rec.real_cycles[0], rec.shadow_matches[0], rec.submitters[1],
                rec.groups[0], rec.comparison):
        for f in dataclasses.fields(obj):
            default = f.default if f.default is not dataclasses.MISSING else (
                f.default_factory() if f.default_factory is not dataclasses.MISSING else None)
            assert getattr(obj, f.name) != default, (type(obj).__name__, f.name)


# ---------------------------------------------------------------- backends

def _with_search_path(url: str, schema: str) -> str:
    parts = urlsplit(url)
    extra = urlencode({"options": f"-csearch_path={schema}"})
    return urlunsplit(parts._replace(query=f"{parts.query}&{extra}" if parts.query else extra))


# the server postgres_server started (pgserver's PostgresServer), for a test that
# restarts it (restart_postgres); empty with $NEGOTIATOR_EXT_TEST_POSTGRES
PG_SERVER: dict = {}


def stop_postgres() -> Callable[[], None]:
    """Stop the session's throw-away PostgreSQL server (fast: its sessions ended);
    returns what starts it again, on the same data and socket. Skips with a server of
    $NEGOTIATOR_EXT_TEST_POSTGRES, which the tests do not own."""
    server = PG_SERVER.get("server")
    if server is None:
        pytest.skip(f"the PostgreSQL server of {POSTGRES_ENV} is not the tests' to restart")
    from pgserver._commands import pg_ctl
    pg_ctl(["-w", "-m", "fast", "stop"], pgdata=server.pgdata, user=server.system_user)
    return server.ensure_postgres_running


@pytest.fixture(scope="session")
def postgres_server():
    """A PostgreSQL URL: $NEGOTIATOR_EXT_TEST_POSTGRES, else a throw-away pgserver."""
    url = os.environ.get(POSTGRES_ENV)
    if url:
        pytest.importorskip("psycopg", reason=f"{POSTGRES_ENV} is set but psycopg is missing")
        yield url
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")         # pgserver warns about XDG_RUNTIME_DIR
        try:
            import pgserver
            import psycopg  # noqa: F401
        except ImportError:
            pytest.skip(f"no PostgreSQL: set {POSTGRES_ENV} to a URL, or pip install pgserver "
                        "'psycopg[binary]'")
        # not under pytest's basetemp: run as root, pgserver hands the data directory to a
        # user of its own, and pytest keeps its basetemp private (0700) and deletes old ones
        base = Path(tempfile.mkdtemp(prefix="negotiator-ext-pg-"))
        try:
            server = pgserver.get_server(base / "data", cleanup_mode="delete")
        except Exception as exc:                # noqa: BLE001 - any failure: no server here
            shutil.rmtree(base, ignore_errors=True)
            pytest.skip(f"pgserver could not start a PostgreSQL server: {exc}")
    PG_SERVER["server"] = server
    try:
        yield server.get_uri()
    finally:
        PG_SERVER.clear()
        server.cleanup()
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def pg_url(postgres_server):
    """A fresh schema of the test server, as a URL whose search_path is that schema."""
    import psycopg
    schema = "nxt_" + uuidlib.uuid4().hex[:12]
    with psycopg.connect(postgres_server, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    yield _with_search_path(postgres_server, schema)
    with psycopg.connect(postgres_server, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA {schema} CASCADE")


@pytest.fixture(params=["sqlite", "postgresql"])
def url(request, tmp_path):
    if request.param == "sqlite":
        return str(tmp_path / "ledger.sqlite")
    return request.getfixturevalue("pg_url")


@pytest.fixture
def db_path(tmp_path):
    return tmp_path / "state" / "ledger.sqlite"


# ---------------------------------------------------------------- recording and reading

def test_round_trip_of_a_full_pass(url):
    rec = full_pass()
    with open_ledger(url) as ledger:
        assert ledger.schema_version == SCHEMA_VERSION
        assert ledger.record_pass(rec) is True
    with open_ledger(url, create=False) as ledger:
        assert ledger.pass_record(rec.uuid) == rec
        assert ledger.shadow_matches(rec.uuid) == list(rec.shadow_matches)
        assert ledger.real_matches(rec.uuid) == list(rec.real_matches)
        assert ledger.submitters(rec.uuid) == list(rec.submitters)
        assert ledger.groups(rec.uuid) == list(rec.groups)
        assert ledger.comparison(rec.uuid) == rec.comparison
        assert ledger.real_cycles(rec.uuid) == list(rec.real_cycles)
        head = ledger.last_pass()
        assert head["uuid"] == rec.uuid and isinstance(head["id"], int)
        assert head["shadow_timings"] == rec.shadow_timings and head["warnings"] == rec.warnings
        assert (head["n_real_cycles"], head["n_shadow_matches"], head["n_real_matches"],
                head["n_submitters"], head["n_groups"], head["n_comparisons"]) == (1, 2, 1, 2, 1, 1)
        [(h, comp)] = ledger.comparisons()
        assert h["uuid"] == rec.uuid and comp == rec.comparison
        assert ledger.pass_record("no-such-pass") is None
        assert ledger.comparison("no-such-pass") is None
        assert ledger.verify() == []


def test_duplicate_uuid_is_not_recorded_twice(url):
    rec = full_pass()
    with open_ledger(url) as ledger:
        assert ledger.record_pass(rec) is True
        assert ledger.record_pass(dataclasses.replace(rec, status="failed")) is False
        assert [p["uuid"] for p in ledger.passes()] == [rec.uuid]
        assert ledger.last_pass()["status"] == "complete"
        assert len(ledger.submitters(rec.uuid)) == len(rec.submitters)
        assert len(ledger.shadow_matches(rec.uuid)) == len(rec.shadow_matches)
        assert ledger.verify() == []


def test_a_real_cycle_is_recorded_once_across_passes(url):
    with open_ledger(url) as ledger:
        assert ledger.record_pass(small_pass("a", 100.0, cycles=(10, 20)))
        assert ledger.record_pass(small_pass("b", 200.0, cycles=(20, 30)))
        assert ledger.record_pass(small_pass("c", 300.0, pool="q", cycles=(20,)))
        assert [c.time for c in ledger.real_cycles("a")] == [10, 20]
        assert [c.time for c in ledger.real_cycles("b")] == [30]
        assert [c.time for c in ledger.real_cycles("c")] == [20]   # another pool's cycle
        assert [p["n_real_cycles"] for p in ledger.passes()] == [2, 1, 1]
        assert (ledger.newest_real_cycle("p"), ledger.newest_real_cycle("q")) == (30, 20)
        assert ledger.newest_real_cycle("r") is None
        assert ledger.verify() == []


def test_pass_queries(url):
    with open_ledger(url) as ledger:
        ledger.record_pass(small_pass("a", 100.0))
        ledger.record_pass(small_pass("b", 200.0, status="partial"))
        ledger.record_pass(small_pass("c", 300.0, pool="q"))
        ledger.record_pass(small_pass("d", 400.0))
        assert ledger.last_pass()["uuid"] == "d"
        assert ledger.last_pass("q")["uuid"] == "c"
        assert ledger.last_pass("p", status="partial")["uuid"] == "b"
        assert ledger.last_pass("nowhere") is None
        assert ledger.pools() == ["p", "q"]
        assert [p["uuid"] for p in ledger.passes(pool="p")] == ["a", "b", "d"]
        assert [p["uuid"] for p in ledger.passes(since=200.0, until=400.0)] == ["b", "c"]
        win = ledger.window(150.0, pool="p")
        assert [h["uuid"] for h, _, _ in win] == ["d"]             # b is not complete
        assert [h["uuid"] for h, _, _ in ledger.window(0, complete_only=False)] == \
            ["a", "b", "c", "d"]
        header, subs, groups = win[0]
        assert [s.name for s in subs] == ["alice", "bob"] and subs[1].factor == 2.0
        assert groups == [GroupObs("g")]


def test_last_pass_captured_by_the_real_cycles_first_second(url):
    with open_ledger(url) as ledger:
        ledger.record_pass(small_pass("b", 200.0, status="partial"))
        ledger.record_pass(small_pass("d", 400.0))
        # a comparison's pass: its capture over by the real cycle's first second
        ledger.record_pass(dataclasses.replace(small_pass("e", 498.6), capture_duration=0.4))
        ledger.record_pass(dataclasses.replace(small_pass("f", 499.7), capture_duration=0.4))
        assert ledger.last_pass("p", captured_by=498.9)["uuid"] == "d"     # e: 498.6 + 0.4
        assert ledger.last_pass("p", captured_by=499.0)["uuid"] == "e"
        assert ledger.last_pass("p", captured_by=500.0)["uuid"] == "e"     # f: 499.7 + 0.4
        assert ledger.last_pass("p", captured_by=500.1)["uuid"] == "f"     # 500.1 <= 500.1
        assert ledger.last_pass("p", captured_by=400.0)["uuid"] == "d"     # no duration: 0
        assert ledger.last_pass("p", captured_by=399.0)["uuid"] == "b"
        assert ledger.last_pass("p", captured_by=399.0, comparable=True) is None


def test_a_failed_write_leaves_nothing_behind(url, monkeypatch):
    first = small_pass("first", 100.0, cycles=(1,))
    doomed = full_pass("doomed", started_at=200.0, cycles=(2,))
    with open_ledger(url) as ledger:
        ledger.record_pass(first)
        real_insert = ledger_mod.Ledger._insert_rows
        tables_written = []

        def failing_insert(self, table, rows, *cols):
            if table == "submitters":           # after the header, cycles and matches
                raise RuntimeError("power cut")
            tables_written.append(table)
            return real_insert(self, table, rows, *cols)

        monkeypatch.setattr(ledger_mod.Ledger, "_insert_rows", failing_insert)
        with pytest.raises(RuntimeError, match="power cut"):
            ledger.record_pass(doomed)
        assert tables_written == ["shadow_matches", "real_matches"]   # they were written...
        monkeypatch.undo()
        # ...and rolled back with the header and the real cycle
        assert [p["uuid"] for p in ledger.passes()] == ["first"]
        assert ledger.shadow_matches("doomed") == [] and ledger.real_matches("doomed") == []
        assert ledger.real_cycles("doomed") == []
        assert ledger.pass_record("first") == first
        assert ledger.verify() == []
        assert ledger.record_pass(doomed) is True                     # and it can be retried
        assert ledger.pass_record("doomed") == doomed


def test_a_pass_is_compared_once_across_processes(url):
    """Two shadow processes (two state directories) on one ledger both find pass
    "earlier" not compared yet (`compared`, before either records) and compare it: the
    check made again under the write lock records one comparison. The second pass is
    recorded without it, and without the compared cycle's counts on its submitters and
    groups."""
    with open_ledger(url) as one, open_ledger(url) as two:
        one.record_pass(small_pass("earlier", 100.0))
        assert not one.compared("earlier") and not two.compared("earlier")
        first = _comparing(full_pass("first", started_at=200.0, cycles=(150,)), "earlier")
        second = _comparing(full_pass("second", started_at=201.0, cycles=(151,)), "earlier")
        assert one.record(first) == first
        got = two.record(second)
        assert got.comparison is None
        assert all(o.real_matches is None for o in got.submitters + got.groups)
        assert got.warnings[:-1] == second.warnings
        assert "pass earlier's cycle was compared by another pass meanwhile" in got.warnings[-1]
        assert two.pass_record("second") == got
        assert [h["n_comparisons"] for h in two.passes()] == [0, 1, 0]
        assert [(h["uuid"], c.shadow_pass) for h, c in one.comparisons()] == [("first",
                                                                               "earlier")]
        assert one.verify() == []


def test_compare_once_waits_for_the_writer_that_compares_first(url):
    """The other process's transaction is still open when this one records its
    comparison of the same pass: this one waits for the lock (SQLite: BEGIN IMMEDIATE;
    PostgreSQL: an advisory lock, as READ COMMITTED would not show the other's row before
    its commit), then finds the pass compared and records none."""
    first = _comparing(full_pass("first", started_at=200.0, cycles=(150,)), "earlier")
    second = _comparing(full_pass("second", started_at=201.0, cycles=(151,)), "earlier")
    got = []

    def other_process():
        with open_ledger(url) as two:
            got.append(two.record(second))

    with open_ledger(url) as one:
        one.record_pass(small_pass("earlier", 100.0))
        with one._guard(), one._db.write():
            assert one._write_pass(first) == first
            other = threading.Thread(target=other_process)
            other.start()
            other.join(0.5)
            assert other.is_alive()             # waiting for this transaction
        other.join(10)
        assert not other.is_alive() and got and got[0].comparison is None
        assert [c.shadow_pass for _, c in one.comparisons()] == ["earlier"]
        assert one.comparison("first") == first.comparison
        assert one.verify() == []


def test_a_ledger_opened_read_only_is_read_and_never_written(url):
    with open_ledger(url) as ledger:
        ledger.record_pass(small_pass("a"))
    with open_ledger(url, read_only=True) as reader:
        assert [p["uuid"] for p in reader.passes()] == ["a"]
        with pytest.raises(LedgerError, match=r"cannot be written \(read-only") as e:
            reader.record_pass(small_pass("b"))
        assert not e.value.transient
    with open_ledger(url) as ledger:
        assert [p["uuid"] for p in ledger.passes()] == ["a"]


def test_a_reader_brings_an_older_schema_up_to_date(url):
    """Opened read-only, a ledger of an older schema is opened for writing once, to
    migrate it, as before: readers never see an old schema."""
    with ledger_mod._open(url, schema_target=1) as old:
        assert old.schema_version == 1
    with open_ledger(url, read_only=True) as reader:
        assert reader.schema_version == SCHEMA_VERSION and reader.passes() == []


# ---------------------------------------------------------------- failure modes

def test_sqlite_settings_and_url_forms(tmp_path, monkeypatch):
    path = tmp_path / "a" / "b" / "ledger.db"               # missing parents are created
    with open_ledger(str(path)) as ledger:
        conn = ledger._db.conn
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert conn.execute("PRAGMA synchronous").fetchone()[0] == 2     # FULL
        ledger.record_pass(small_pass("x"))
    with open_ledger(f"sqlite:///{path}") as ledger:                      # sqlite:////abs
        assert ledger.last_pass()["uuid"] == "x"
    monkeypatch.chdir(tmp_path)
    with open_ledger("sqlite:///a/b/ledger.db", create=False) as ledger:  # sqlite:///relative
        assert ledger.last_pass()["uuid"] == "x"
    with open_ledger("sqlite:a/b/ledger.db", create=False) as ledger:    # sqlite:relative
        assert ledger.last_pass()["uuid"] == "x"


@pytest.mark.parametrize("form, where", [
    ("{abs}", "abs/plain.db"),                          # a plain absolute path
    ("rel/plain.db", "cwd/rel/plain.db"),               # a plain relative path
    ("sqlite:///rel/three.db", "cwd/rel/three.db"),     # SQLAlchemy: 3 slashes, relative
    ("sqlite:///three.db", "cwd/three.db"),
    ("sqlite:///{abs}", "abs/four.db"),                 # SQLAlchemy: 4 slashes, absolute
    ("SQLite:///{abs}", "abs/four-upper.db"),
    ("sqlite:rel/colon.db", "cwd/rel/colon.db"),        # sqlite:PATH, as before
    ("sqlite:{abs}", "abs/colon-abs.db"),
])
def test_each_url_form_opens_the_right_file(tmp_path, monkeypatch, form, where):
    (tmp_path / "cwd").mkdir()
    monkeypatch.chdir(tmp_path / "cwd")
    target = tmp_path / where
    url = form.format(abs=tmp_path / "abs" / target.name) if "{abs}" in form else form
    with open_ledger(url) as ledger:
        ledger.record_pass(small_pass("x"))
    with open_ledger(str(target), create=False) as ledger:     # that file, nowhere else
        assert ledger.last_pass()["uuid"] == "x"
    made = sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*.db"))
    assert made == [where]


@pytest.mark.parametrize("url, source", [
    ("mysql://db/ledger", "mysql://db/ledger"),
    ("mysql://me:s3cret@db/ledger", "mysql://me:***@db/ledger"),
    ("sqlite://host/ledger", "sqlite://host/ledger"),
    ("sqlite://", "sqlite://"),
    ("sqlite:", "sqlite:"),
    ("sqlite:///", "sqlite:///"),
    ("sqlite:////", "sqlite:////"),
])
def test_refused_urls_name_the_accepted_forms(tmp_path, monkeypatch, url, source):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(LedgerError) as e:
        open_ledger(url)
    assert str(e.value) == (f"{source}: unsupported ledger URL: use a file path, "
                            "sqlite:///relative/path, sqlite:////absolute/path or "
                            "postgresql://user@host/db")
    assert not e.value.transient and list(tmp_path.iterdir()) == []
    with pytest.raises(LedgerError) as e:
        open_ledger("  ")
    assert str(e.value) == ("ledger: empty ledger URL: use a file path, "
                            "sqlite:///relative/path, sqlite:////absolute/path or "
                            "postgresql://user@host/db")


def test_sqlite_three_slashes_meaning_an_absolute_ledger_is_refused_not_a_new_one(
        tmp_path, monkeypatch):
    """sqlite:///abs/path meant /abs/path before the SQLAlchemy reading: where the
    relative reading names nothing and the absolute one does, it is refused."""
    (tmp_path / "cwd").mkdir()
    monkeypatch.chdir(tmp_path / "cwd")
    path = tmp_path / "ledger.db"
    with open_ledger(str(path)) as ledger:
        ledger.record_pass(small_pass("x"))
    rel = str(path).lstrip("/")
    with pytest.raises(LedgerError) as e:
        open_ledger(f"sqlite:///{rel}")
    assert str(e.value) == (
        f"sqlite:///{rel}: sqlite:/// is a path relative to the current directory "
        f"({tmp_path / 'cwd'}), where {rel} is not, but {path} is: for the absolute path "
        f"write sqlite:////{rel} (a new ledger here: sqlite:{rel})")
    with pytest.raises(LedgerError, match=f"where {Path(rel).parent} is not, but "
                                          f"{tmp_path} is: .* sqlite:////{rel[:-3]}new.db"):
        open_ledger(f"sqlite:///{rel[:-3]}new.db")          # the directory exists from /
    assert list((tmp_path / "cwd").iterdir()) == []         # nothing created here
    with open_ledger(f"sqlite:////{rel}") as ledger:
        assert ledger.last_pass()["uuid"] == "x"


def test_missing_parent_directory(tmp_path, capsys):
    """A writer creates the missing directories; where it cannot, and for a reader, one
    line naming the path."""
    made = tmp_path / "new" / "dirs" / "ledger.sqlite"
    with open_ledger(str(made)) as ledger:
        ledger.record_pass(small_pass("x"))
    assert made.is_file()
    missing = tmp_path / "absent" / "ledger.sqlite"
    with pytest.raises(LedgerError) as e:
        open_ledger(str(missing), create=False)
    assert str(e.value) == f"{missing}: no ledger here (the file does not exist)"
    assert not missing.parent.exists()
    blocker = tmp_path / "file"
    blocker.write_text("x")
    target = blocker / "sub" / "ledger.sqlite"
    with pytest.raises(LedgerError) as e:
        open_ledger(f"sqlite:///{target}")
    assert str(e.value) == (f"{target}: cannot create the directory {target.parent}: "
                            "Not a directory")
    assert not e.value.transient
    from negotiator_ext.cli import main
    capsys.readouterr()
    assert main(["ledger", "show", "--ledger", str(missing)]) == 2
    assert capsys.readouterr().err == (f"negotiator-ext: error: {missing}: no ledger here "
                                       "(the file does not exist)\n")


def test_bad_urls_and_paths(tmp_path):
    missing = tmp_path / "nothing.sqlite"
    with pytest.raises(LedgerError, match="no ledger here") as e:
        open_ledger(str(missing), create=False)
    assert e.value.source == str(missing) and not missing.exists()
    with pytest.raises(LedgerError, match="unsupported ledger URL"):
        open_ledger("mysql://db/ledger")
    with pytest.raises(LedgerError, match="sqlite:////absolute/path"):
        open_ledger("sqlite://host/ledger")
    with pytest.raises(LedgerError, match="is a directory"):
        open_ledger(str(tmp_path))
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(LedgerError, match="cannot create the directory") as e:
        open_ledger(str(blocker / "sub" / "ledger.sqlite"))
    assert str(blocker / "sub" / "ledger.sqlite") in str(e.value)
    assert isinstance(e.value, InputError)


def test_missing_psycopg_is_explained(monkeypatch):
    monkeypatch.setitem(sys.modules, "psycopg", None)     # import psycopg -> ImportError
    with pytest.raises(LedgerError, match=r"pip install 'negotiator-ext\[postgres\]'") as e:
        open_ledger("postgresql://ledger:s3cret@db.example.org/negotiator")
    assert "s3cret" not in str(e.value) and "db.example.org" in str(e.value)


def test_locked_sqlite_ledger(db_path):
    with open_ledger(str(db_path)) as ledger:
        ledger.record_pass(small_pass("before", 100.0))
    other = sqlite3.connect(db_path, isolation_level=None)
    other.execute("BEGIN EXCLUSIVE")
    try:
        with open_ledger(str(db_path), lock_timeout=0.2) as ledger:
            with pytest.raises(LedgerError) as e:
                ledger.record_pass(small_pass("blocked", 200.0))
            msg = str(e.value)
            assert str(db_path) in msg
            assert "is locked by another process (waited 0.2 s)" in msg and "\n" not in msg
            assert "pass blocked not recorded" in msg
            assert e.value.transient                   # the shadow loop tries again
    finally:
        other.execute("ROLLBACK")
        other.close()
    with open_ledger(str(db_path)) as ledger:
        assert [p["uuid"] for p in ledger.passes()] == ["before"]
        assert ledger.record_pass(small_pass("blocked", 200.0))


def test_locked_postgres_ledger(pg_url):
    import psycopg
    with open_ledger(pg_url) as ledger:
        ledger.record_pass(small_pass("before", 100.0))
    with psycopg.connect(pg_url) as other:               # a transaction holds the table
        other.execute("LOCK TABLE passes IN ACCESS EXCLUSIVE MODE")
        with open_ledger(pg_url, lock_timeout=0.2) as ledger:
            with pytest.raises(LedgerError,
                               match=r"is locked by another process \(waited 0.2 s\)") as e:
                ledger.record_pass(small_pass("blocked", 200.0))
            assert e.value.transient
        other.rollback()
    with open_ledger(pg_url) as ledger:
        assert [p["uuid"] for p in ledger.passes()] == ["before"]


def test_full_sqlite_ledger(db_path):
    with open_ledger(str(db_path)) as ledger:
        first = full_pass("first", started_at=100.0)
        ledger.record_pass(first)
        conn = ledger._db.conn
        pages = conn.execute("PRAGMA page_count").fetchone()[0]
        conn.execute(f"PRAGMA max_page_count = {pages + 2}")
        big = full_pass("big", started_at=200.0, cycles=(5,), n_submitters=2000)
        with pytest.raises(LedgerError, match="is full") as e:
            ledger.record_pass(big)
        assert str(db_path) in str(e.value) and not e.value.transient
        assert [p["uuid"] for p in ledger.passes()] == ["first"]
        assert ledger.submitters("big") == [] and ledger.real_cycles("big") == []
        assert ledger.pass_record("first") == first
        assert ledger.verify() == []
    with open_ledger(str(db_path)) as ledger:            # room again: the pass goes in
        assert ledger.record_pass(big)
        assert len(ledger.submitters("big")) == 2000


def test_garbage_file_is_not_a_ledger(tmp_path):
    path = tmp_path / "ledger.sqlite"
    path.write_bytes(b"this is not an SQLite database, it is a shopping list\n" * 200)
    with pytest.raises(LedgerError, match="is not a ledger database") as e:
        open_ledger(str(path))
    assert e.value.source == str(path) and not e.value.transient
    assert path.read_bytes().startswith(b"this is not")   # left as it was


def test_corrupt_ledger_pages(db_path):
    with open_ledger(str(db_path)) as ledger:
        for i in range(20):
            ledger.record_pass(full_pass(f"p{i}", started_at=float(i), cycles=(i,)))
        ledger._db.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    data = bytearray(db_path.read_bytes())
    page = 4096
    for off in range(page, len(data), page):             # every page but the first
        data[off:off + 64] = b"\xa5" * 64
    db_path.write_bytes(bytes(data))
    with pytest.raises(LedgerError) as e:
        with open_ledger(str(db_path)) as ledger:
            ledger.passes()
    assert str(db_path) in str(e.value)
    assert "corrupt" in str(e.value) or "not a ledger database" in str(e.value)


def test_a_foreign_sqlite_database_is_left_alone(tmp_path):
    path = tmp_path / "other.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE recipes (name TEXT)")
    conn.close()
    with pytest.raises(LedgerError, match="not a negotiator-ext ledger .*recipes"):
        open_ledger(str(path))
    with sqlite3.connect(path) as conn:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
    conn.close()
    assert tables == ["recipes"]


def _set_schema_version(url: str, version: int) -> None:
    if url.startswith("postgresql"):
        import psycopg
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("UPDATE ledger_meta SET value = %s WHERE key = 'schema_version'",
                         (str(version),))
    else:
        conn = sqlite3.connect(url)
        with conn:
            conn.execute("UPDATE ledger_meta SET value = ? WHERE key = 'schema_version'",
                         (str(version),))
        conn.close()


def test_a_newer_schema_is_refused(url):
    with open_ledger(url) as ledger:
        ledger.record_pass(small_pass("kept"))
    _set_schema_version(url, SCHEMA_VERSION + 7)
    with pytest.raises(LedgerError) as e:
        open_ledger(url)
    assert (f"ledger schema version {SCHEMA_VERSION + 7} is newer than this negotiator-ext "
            f"supports ({SCHEMA_VERSION}): upgrade negotiator-ext") in str(e.value)
    assert not e.value.transient
    _set_schema_version(url, SCHEMA_VERSION)             # nothing else was touched
    with open_ledger(url) as ledger:
        assert [p["uuid"] for p in ledger.passes()] == ["kept"]


# ---------------------------------------------------------------- migrations

def test_migrations_are_ordered():
    versions = [v for v, _ in MIGRATIONS]
    assert versions == list(range(1, len(versions) + 1))
    assert SCHEMA_VERSION == versions[-1] == 12


# record columns version 10 added: a pass's aligned cycle, a comparison's explanation
ADDED_IN_V10 = ("aligned_cycle", "unexplained_agreement", "disagreements", "changes",
                "aligned")
# record columns version 11 added: a real cycle's phase 2 time, a comparison's
# re-prediction there
ADDED_IN_V11 = ("accounting_time", "repredicted")
# record columns version 12 added: the turns a real cycle's log names as skipped by a
# time limit
ADDED_IN_V12 = ("submitters_skipped",)
# record columns later migrations added (version 1 wrote none of them)
ADDED_AFTER_V1 = ("agreed_equivalent", "equivalent_agreement", "shadow_submitter_limit",
                  "wait", "time_limits", *ADDED_IN_V10, *ADDED_IN_V11, *ADDED_IN_V12)


# adapters/ledger.py and the modules its Ledger is made of: a name a test changes is
# changed in each of them that uses it
LEDGER_MODULES = (ledger_mod, ledger_rows, ledger_writing, ledger_reading, ledger_summarising)


def patch_ledger(m, name: str, value) -> None:
    """With monkeypatch context `m`: the ledger's `name` (a module-level name) is `value`."""
    used = [mod for mod in LEDGER_MODULES if hasattr(mod, name)]
    assert used, name
    for mod in used:
        m.setattr(mod, name, value)


def written_before_v10(m) -> None:
    """With monkeypatch context `m`: passes written as a ledger of version 9 holds them
    (the columns of ADDED_IN_V10, ADDED_IN_V11 and ADDED_IN_V12 left out; the records
    must have their defaults)."""
    later = (*ADDED_IN_V10, *ADDED_IN_V11, *ADDED_IN_V12)
    patch_ledger(m, "_PASS_HEADER", tuple(n for n in ledger_schema._PASS_HEADER
                                          if n not in later))
    real_fields_of = ledger_rows._fields_of
    patch_ledger(m, "_fields_of", lambda cls: tuple(
        f for f in real_fields_of(cls) if f.name not in later))
    m.setattr(ledger_digests, "keep", lambda *a: None)     # no pool_digests


def test_migration_from_v1(url, monkeypatch):
    # what version 1 could hold: no comparison columns of version 4, no slot classes
    full = full_pass()
    rec = dataclasses.replace(
        full, comparison=dataclasses.replace(full.comparison, agreed_equivalent=None,
                                             equivalent_agreement=None, time_limits={},
                                             unexplained_agreement=None, disagreements=(),
                                             changes=(), aligned=False, repredicted={}),
        aligned_cycle=None,
        submitters=tuple(dataclasses.replace(o, shadow_submitter_limit=None)
                         for o in full.submitters),
        real_cycles=tuple(dataclasses.replace(c, accounting_time=None, submitters_skipped=())
                          for c in full.real_cycles),
        shadow_matches=tuple(dataclasses.replace(m, wait=None) for m in full.shadow_matches),
        real_matches=tuple(dataclasses.replace(m, wait=None) for m in full.real_matches),
        pool_weight=None, pass_timings={}, time_limits={},
        slot_classes={}, digest={})
    with ledger_mod._open(url, schema_target=1) as old:   # what version 1 wrote
        assert old.schema_version == 1
        with monkeypatch.context() as m:                  # version 1 had no `comparable`
            patch_ledger(m, "_PASS_HEADER",
                         tuple(n for n in ledger_schema._PASS_HEADER
                               if n not in ("comparable", "pool_weight", "pass_timings",
                                            "time_limits", *ADDED_IN_V10)))
            m.setattr(ledger_mod.Ledger, "_keep_slot_classes", lambda self, rec: None)
            m.setattr(ledger_digests, "keep", lambda *a: None)
            real_fields_of = ledger_rows._fields_of
            patch_ledger(m, "_fields_of", lambda cls: tuple(
                f for f in real_fields_of(cls) if f.name not in ADDED_AFTER_V1))
            assert old.record_pass(rec)
        with pytest.raises(LedgerError):                  # no audit trail in version 1
            old.adjustments()
    with open_ledger(url) as ledger:
        assert ledger.schema_version == SCHEMA_VERSION
        # version 3 takes an older pass as comparable when it was complete
        assert ledger.pass_record(rec.uuid) == dataclasses.replace(
            rec, comparable=rec.status == "complete")
        ledger.record_adjustment(adjustment())
        assert ledger.adjustments() == [adjustment()]
        assert ledger.record_pass(full_pass("after", started_at=2e9, cycles=(2_000_000_000,)))
        assert ledger.verify() == []
    if not url.startswith("postgresql"):
        conn = sqlite3.connect(url)
        names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
        version = conn.execute("SELECT value FROM ledger_meta "
                               "WHERE key = 'schema_version'").fetchone()
        conn.close()
        assert {"adjustments", "adjustments_key", "passes_pool_started"} <= names
        assert version == (str(SCHEMA_VERSION),)


# ---------------------------------------------------------------- retention, adjustments

def test_prune_deletes_old_passes_and_keeps_adjustments(url):
    with open_ledger(url) as ledger:
        for i, t in enumerate((100.0, 200.0, 300.0)):
            ledger.record_pass(_comparing(full_pass(f"p{i}", started_at=t, cycles=(int(t),)),
                                          f"p{i - 1}"))
        ledger.record_adjustment(adjustment(applied_at=50))
        assert ledger.prune(250.0) == 2
        assert [p["uuid"] for p in ledger.passes()] == ["p2"]
        for gone in ("p0", "p1"):
            assert ledger.submitters(gone) == [] and ledger.groups(gone) == []
            assert ledger.shadow_matches(gone) == [] and ledger.comparison(gone) is None
            assert ledger.real_cycles(gone) == []
        assert ledger.newest_real_cycle("pool.example.org") == 300     # 100 and 200 gone
        assert ledger.pass_record("p2") == _comparing(full_pass("p2", started_at=300.0,
                                                                cycles=(300,)), "p1")
        assert ledger.adjustments() == [adjustment(applied_at=50)]
        assert ledger.prune(250.0) == 0
        assert ledger.verify() == []


def test_adjustments_by_name_and_time(url):
    with open_ledger(url) as ledger:
        ledger.record_adjustment(adjustment(applied_at=100, lease=200, value=2.0))
        ledger.record_adjustment(adjustment(applied_at=150, outcome="failed: no such user"))
        ledger.record_adjustment(adjustment(applied_at=160, outcome="skipped: unchanged"))
        ledger.record_adjustment(adjustment(key="factor:bob", name="bob", applied_at=170))
        ledger.record_adjustment(adjustment(applied_at=300, lease=None, value=3.0))
        ledger.record_adjustment(adjustment(applied_at=400, lease=500, value=4.0))
        assert [a.applied_at for a in ledger.adjustments(name="alice")] == [100, 150, 160, 300, 400]
        assert [a.applied_at for a in ledger.adjustments(since=160)] == [160, 170, 300, 400]
        assert ledger.adjustments()[1] == adjustment(applied_at=150, outcome="failed: no such user")


# ---------------------------------------------------------------- export

def test_export_csv(url, tmp_path):
    rec = full_pass()
    with open_ledger(url) as ledger:
        ledger.record_pass(rec)
        ledger.record_adjustment(adjustment())
        paths = ledger.export(tmp_path / "out", "csv")
    assert [p.name for p in paths] == [f"{t}.csv" for t in TABLES]
    with open(tmp_path / "out" / "passes.csv", newline="") as f:
        [row] = list(csv.DictReader(f))
    assert row["uuid"] == rec.uuid and float(row["started_at"]) == rec.started_at
    assert json.loads(row["shadow_timings"]) == rec.shadow_timings        # JSON text
    assert json.loads(row["warnings"]) == list(rec.warnings)
    with open(tmp_path / "out" / "submitters.csv", newline="") as f:
        subs = list(csv.DictReader(f))
    assert [s["name"] for s in subs] == [s.name for s in rec.submitters]
    assert subs[0]["pass_uuid"] == rec.uuid
    with open(tmp_path / "out" / "comparisons.csv", newline="") as f:
        [comp] = list(csv.DictReader(f))
    assert json.loads(comp["per_submitter"]) == rec.comparison.per_submitter
    with open(tmp_path / "out" / "adjustments.csv", newline="") as f:
        [adj] = list(csv.DictReader(f))
    assert adj["key"] == "factor:alice" and adj["lease_expires"] == ""


def test_export_jsonl(url, tmp_path):
    rec = full_pass()
    with open_ledger(url) as ledger:
        ledger.record_pass(rec)
        paths = ledger.export(tmp_path, "jsonl", ["comparisons", "submitters", "real_cycles"])
    assert [p.name for p in paths] == ["comparisons.jsonl", "submitters.jsonl", "real_cycles.jsonl"]
    [comp] = [json.loads(line) for line in paths[0].read_text().splitlines()]
    assert comp["per_submitter"] == rec.comparison.per_submitter         # parsed values
    assert comp["notes"] == list(rec.comparison.notes) and comp["pass_uuid"] == rec.uuid
    subs = [json.loads(line) for line in paths[1].read_text().splitlines()]
    assert [s["is_group"] for s in subs] == [False, True]
    [cycle] = [json.loads(line) for line in paths[2].read_text().splitlines()]
    assert cycle["phase_durations"] == [0.5, None, 1.25, 1.0]
    assert cycle["submitters_out_of_time"] == ["slow@x", "slower@x"]
    assert not (tmp_path / "passes.jsonl").exists()


def test_export_rejects_unknown_format_and_table(tmp_path):
    with open_ledger(str(tmp_path / "l.sqlite")) as ledger:
        with pytest.raises(LedgerError, match="unknown export format 'xml'"):
            ledger.export(tmp_path / "out", "xml")
        with pytest.raises(LedgerError, match="unknown ledger table 'jobs'"):
            ledger.export(tmp_path / "out", "csv", ["passes", "jobs"])
    assert not (tmp_path / "out").exists()


def test_parquet_without_pyarrow_is_explained(tmp_path, monkeypatch):
    real_find_spec = ledger_mod.importlib.util.find_spec
    monkeypatch.setattr(ledger_mod.importlib.util, "find_spec",
                        lambda name, *a: None if name == "pyarrow" else real_find_spec(name, *a))
    with open_ledger(str(tmp_path / "l.sqlite")) as ledger:
        with pytest.raises(LedgerError, match=r"parquet export needs pandas and pyarrow: "
                                              r"pip install 'negotiator-ext\[parquet\]'"):
            ledger.export(tmp_path / "out", "parquet")


def test_export_parquet(tmp_path):
    pytest.importorskip("pyarrow", reason="parquet export needs pyarrow")
    import pandas as pd
    rec = full_pass()
    with open_ledger(str(tmp_path / "l.sqlite")) as ledger:
        ledger.record_pass(rec)
        paths = ledger.export(tmp_path / "out", "parquet")
    assert [p.name for p in paths] == [f"{t}.parquet" for t in TABLES]
    passes = pd.read_parquet(tmp_path / "out" / "passes.parquet")
    assert list(passes["uuid"]) == [rec.uuid]
    assert json.loads(passes["shadow_timings"][0]) == rec.shadow_timings
    subs = pd.read_parquet(tmp_path / "out" / "submitters.parquet")
    assert list(subs["is_group"]) == [False, True]
    assert list(subs["factor"]) == [s.factor for s in rec.submitters]
    assert len(pd.read_parquet(tmp_path / "out" / "adjustments.parquet")) == 0


# ---------------------------------------------------------------- kill -9

_WRITER = """
import sys
from negotiator_ext.adapters.ledger import open_ledger
from negotiator_ext.core.records import GroupObs, MatchEntry, PassRecord, RealCycle, SubmitterObs
ledger = open_ledger(sys.argv[1])
i = 0
while True:
    uuid = f"kill-{i}"
    ledger.record_pass(PassRecord(
        uuid=uuid, pool="p", started_at=float(i), finished_at=float(i), snapshot_time=i,
        status="complete", reason=None, real_cycle_time=i, real_accountant_time=None,
        shadow_duration=None, capture_duration=None,
        real_cycles=(RealCycle(time=i, end=None, duration=None),),
        shadow_matches=tuple(MatchEntry(f"{i}.{j}", "alice", f"slot{j}") for j in range(40)),
        submitters=tuple(SubmitterObs(f"user{j}", "<none>", False) for j in range(40)),
        groups=(GroupObs("g"),)))
    print(uuid, flush=True)
    i += 1
"""


def test_kill_9_leaves_a_consistent_ledger(db_path):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(REPO)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])}
    proc = subprocess.Popen([sys.executable, "-c", _WRITER, str(db_path)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    committed = []
    try:
        while len(committed) < 25:
            line = proc.stdout.readline()
            if not line:
                pytest.fail(f"the writer stopped by itself: {proc.stderr.read()}")
            committed.append(line.strip())
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
    committed += out.split()                     # reported before the kill landed
    assert proc.returncode == -signal.SIGKILL

    conn = sqlite3.connect(db_path)
    assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    heads = conn.execute("SELECT uuid, n_real_cycles, n_shadow_matches, n_submitters, n_groups "
                         "FROM passes").fetchall()
    for uuid, n_cycles, n_matches, n_subs, n_groups in heads:
        assert (n_cycles, n_matches, n_subs, n_groups) == (1, 40, 40, 1)
        assert conn.execute("SELECT COUNT(*) FROM real_cycles WHERE first_pass = ?",
                            (uuid,)).fetchone()[0] == n_cycles
        assert conn.execute("SELECT COUNT(*) FROM shadow_matches WHERE pass_uuid = ?",
                            (uuid,)).fetchone()[0] == n_matches
        assert conn.execute("SELECT COUNT(*) FROM submitters WHERE pass_uuid = ?",
                            (uuid,)).fetchone()[0] == n_subs
        assert conn.execute('SELECT COUNT(*) FROM "groups" WHERE pass_uuid = ?',
                            (uuid,)).fetchone()[0] == n_groups
    orphans = conn.execute("SELECT COUNT(*) FROM submitters WHERE pass_uuid NOT IN "
                           "(SELECT uuid FROM passes)").fetchone()[0]
    conn.close()
    assert orphans == 0
    assert set(committed) <= {h[0] for h in heads}       # every committed pass is there
    with open_ledger(str(db_path)) as ledger:
        assert ledger.verify() == []
        assert ledger.record_pass(small_pass("after-the-crash", 1e9))


def test_slot_classes_are_kept_until_compared_for_a_few_passes(url):
    def rec(uuid, t, comparable=True, compares=None):
        r = dataclasses.replace(small_pass(uuid, started_at=t), comparable=comparable,
                                slot_classes={"slot1": 0, "slot2": 0, f"{uuid}-slot": 1})
        if compares:
            r = dataclasses.replace(r, comparison=full_pass().comparison.__class__(
                **{**dataclasses.asdict(full_pass().comparison), "shadow_pass": compares}))
        return r
    with open_ledger(url) as ledger:
        ledger.record_pass(rec("a", 100.0))
        assert ledger.slot_classes("a") == {"slot1": 0, "slot2": 0, "a-slot": 1}
        ledger.record_pass(rec("b", 200.0, comparable=False))
        assert ledger.slot_classes("b") == {}            # never compared: not kept
        ledger.record_pass(rec("c", 300.0, compares="a"))
        assert ledger.slot_classes("a") == {}            # compared: no longer needed
        assert ledger.slot_classes("c")["c-slot"] == 1
        for i in range(6):
            ledger.record_pass(rec(f"d{i}", 400.0 + i))
        kept = [u for u in ["c"] + [f"d{i}" for i in range(6)] if ledger.slot_classes(u)]
        assert kept == ["d1", "d2", "d3", "d4", "d5"]    # the newest five
        assert ledger.prune(403.0) == 6
        assert [u for u in ("d3", "d4", "d5") if ledger.slot_classes(u)] == ["d3", "d4", "d5"]
        assert ledger.slot_classes("d1") == {}


def test_passes_last_n(url):
    with open_ledger(url) as ledger:
        for i in range(5):
            ledger.record_pass(small_pass(f"p{i}", 100.0 + i))
        assert [p["uuid"] for p in ledger.passes(last=2)] == ["p3", "p4"]
        assert [p["uuid"] for p in ledger.passes(last=9)] == [f"p{i}" for i in range(5)]


def test_window_until_and_matches_in(url):
    with open_ledger(url) as ledger:
        for i, status in enumerate(("complete", "partial", "complete", "complete")):
            ledger.record_pass(small_pass(f"p{i}", 100.0 * (i + 1), status=status))
        assert [h["uuid"] for h, _, _ in ledger.window(150.0, until=400.0)] == ["p2"]
        assert [h["uuid"] for h, _, _ in ledger.window(None)] == ["p0", "p2", "p3"]
        got = ledger.matches_in(150.0, None)
        assert sorted(got) == ["p2", "p3"]
        assert got["p2"] == ([MatchEntry("p2.0", "alice", "slot1")], [])
