"""The shadow ledger: every shadow pass, append-only, in SQLite or PostgreSQL.

One `PassRecord` is written in ONE transaction: its header row in `passes` (which also
carries the row count of each child table, so a reader can check that a pass is whole),
the real cycles first seen in it (`real_cycles`, one row per (pool, time) however many
passes see the cycle), our and the real matches, the per-submitter and per-group
observations and the comparison. A write that fails rolls back: nothing is half-written
and the passes recorded before stay intact. Recording a pass uuid twice changes nothing.
An earlier pass's cycle is compared once: whether it was compared already is read inside
the transaction that records the comparison, under the write lock, so of two processes
(two state directories on one ledger) comparing the same pass, the second records its
pass without the comparison.
Applied `condor_userprio` changes go to `adjustments`, the audit trail, which `prune`
never touches.

Bounded: `summarise` replaces the passes of each whole hour older than the detail window
(the shadow loop's NEGOTIATOR_EXT_DETAIL_DAYS) with one hourly summary (`hours`,
`hour_submitters`, `hour_groups`: each submitter's and group's figures as the hour's
means, sums or last values, `_SUBMITTER_AGG`), which `window`, `passes` and
`comparisons` give among the passes when asked (`summaries=True`: what `audit`,
`recommend` and `ledger show` read); `prune` removes passes and summaries past the
retention; `reclaim` gives the space back a bounded step at a time (a new SQLite ledger
is made with auto_vacuum = INCREMENTAL; PostgreSQL: VACUUM), `vacuum` rewrites the
whole ledger (an admin's `negotiator-ext ledger vacuum`).

Where the ledger lives is a URL:

  /var/lib/negotiator-ext/ledger.sqlite     a plain path: SQLite (the standard library)
  sqlite:////abs/path                       SQLite, an absolute path (four slashes)
  sqlite:///rel/path  |  sqlite:rel/path    SQLite, relative to the current directory
  postgresql://user@host/db  |  postgres://…  PostgreSQL through psycopg 3 (optional
                                            extra `negotiator-ext[postgres]`)

The sqlite:// forms are SQLAlchemy's: three slashes and a relative path, four slashes
and an absolute one. (Before, sqlite:///abs/path meant /abs/path: such a URL whose
relative reading names nothing while its absolute one does is refused, naming the
four-slash form, rather than silently starting a new ledger.)

SQLite runs in WAL mode with synchronous=FULL, so a committed pass survives kill -9 and
power loss; writers take the lock up front (`BEGIN IMMEDIATE`) and wait `lock_timeout`
seconds for another process (busy timeout). PostgreSQL waits the same time for a lock
(`lock_timeout`).

Readers (`ledger show`, `audit`, `recommend` without --apply) open the ledger read-only
(`open_ledger(..., read_only=True)`): SQLite `query_only` (`mode=ro` where this user
may not write the file or its directory), a PostgreSQL session whose transactions are
read-only. So a ledger on a read-only file system, or one this user may not write, can
be read, and reading one leaves nothing beside it.

The schema is versioned: `ledger_meta.schema_version`, brought up to `SCHEMA_VERSION` on
open by the ordered `MIGRATIONS`, all missing steps in one transaction. A ledger written
by a newer negotiator-ext is refused instead of being misread. The SQL is kept portable
between both databases: `?` placeholders are translated for psycopg, `{id}` in a
migration is the dialect's auto-increment key, floats are DOUBLE PRECISION, integers
BIGINT, booleans 0/1 and lists and mappings JSON text.

Every database problem (locked, full, corrupt, newer schema, cannot open or write) is a
`LedgerError`: an InputError naming the ledger, printed by the CLI in one line; its
`transient` tells a lock, a full disk or a server away (worth trying again) from a
lasting problem.

A `Ledger` holds one connection: use it from one thread.

Its parts, beside this module (which holds `Ledger` and `open_ledger`, and from which the
names below are still imported): `ledger_errors` (LedgerError), `ledger_schema` (the
MIGRATIONS, SCHEMA_VERSION, TABLES), `ledger_rows` (records as rows and back),
`ledger_summaries` (what an hourly summary keeps, HOUR, hour_key), `ledger_urls`
(parse_url, URL_FORMS), `ledger_sqlite` and `ledger_postgres` (the two backends), and
`ledger_digests` (the snapshots' digests).
"""

from __future__ import annotations

import csv
import importlib.util
import json
import operator
import os
import statistics
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator, Sequence

from ..core.figures import without_sentinels
from ..core.records import (Adjustment, Comparison, GroupObs, MatchEntry, PassRecord,
                            RealCycle, Standing, SubmitterObs)
from . import ledger_digests
from .ledger_errors import LedgerError, _OlderSchema
from .ledger_postgres import _Postgres
from .ledger_rows import (_BOOL_COLUMNS, _JSON_COLUMNS, _PASS_KINDS, _all_plain,
                          _decode_classes, _dumps, _encode, _encode_classes, _fields_of,
                          _header_of, _q, _record_of, _row_of, _values_of,
                          _without_comparison)
from .ledger_schema import (_CHILD_TABLES, _COUNTS, _PASS_HEADER, EXPORT_FORMATS, MIGRATIONS,
                            SCHEMA_VERSION, TABLES)
from .ledger_sqlite import FULL_BELOW, _SQLite
from .ledger_summaries import (_GROUP_AGG, _SUBMITTER_AGG, HOUR, _aggregate,
                               _comparisons_summary, _cycles_summary, _hour_comparison,
                               _hour_header, _hour_of, _in_time, _intervals, _merge_counts,
                               _Obs, _pass_time, _reasons_of, _top_reasons, hour_key)
from .ledger_urls import URL_FORMS, parse_url

__all__ = ["EXPORT_FORMATS", "FULL_BELOW", "HOUR", "MIGRATIONS", "SCHEMA_VERSION", "TABLES",
           "URL_FORMS", "Ledger", "LedgerError", "hour_key", "open_ledger", "parse_url"]


# ---------------------------------------------------------------- the ledger

class Ledger:
    """An open ledger (see the module docstring). Reads return the `core.records` shapes;
    a pass header is a dict of its `passes` row (JSON columns decoded, `id` and the child
    row counts `n_*` included)."""

    def __init__(self, db: _SQLite | _Postgres, url: str, *, create: bool,
                 schema_target: int = SCHEMA_VERSION):
        self._db = db
        self.source = db.source
        self._closed = False
        try:
            self._version = self._migrate(create, schema_target)
        except BaseException:
            self.close()
            raise

    # -- plumbing

    @property
    def schema_version(self) -> int:
        """The schema version of the ledger (SCHEMA_VERSION once opened)."""
        return self._version

    def __enter__(self) -> "Ledger":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<Ledger {self.source} schema {self._version}>"

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            try:
                self._db.close()
            except self._db.errors:
                pass

    @contextmanager
    def _guard(self, action: str | None = None) -> Iterator[None]:
        """Driver errors become one LedgerError naming the ledger."""
        if self._closed:
            raise LedgerError(self.source, "the ledger is closed")
        try:
            yield
        except LedgerError:
            raise
        except self._db.errors as exc:
            raise self._db.ledger_error(exc, action) from exc

    def _query(self, sql: str, params: Sequence[Any] = ()) -> list[dict[str, Any]]:
        cur = self._db.execute(sql, params)
        names = [d[0] for d in cur.description]
        return [dict(zip(names, r)) for r in cur.fetchall()]

    def _read_version(self) -> int | None:
        if not self._db.has_table("ledger_meta"):
            return None
        rows = self._db.execute("SELECT value FROM ledger_meta WHERE key = ?",
                                ("schema_version",)).fetchall()
        if not rows:
            return None
        try:
            return int(rows[0][0])
        except (TypeError, ValueError):
            raise LedgerError(self.source, f"bad ledger schema_version {rows[0][0]!r}") from None

    def _check_not_newer(self, version: int | None) -> None:
        if version is not None and version > SCHEMA_VERSION:
            raise LedgerError(self.source, f"ledger schema version {version} is newer than this "
                                           f"negotiator-ext supports ({SCHEMA_VERSION}): "
                                           "upgrade negotiator-ext")

    def _migrate(self, create: bool, target: int) -> int:
        """Bring the schema up to `target`: every missing step in one transaction."""
        with self._guard("the ledger was not opened"):
            version = self._read_version()
            self._check_not_newer(version)
            if version is not None and version >= target:
                return version
            if version is None and not create:
                raise LedgerError(self.source, "no ledger here (no ledger_meta table)")
            if self._db.read_only:
                raise _OlderSchema(self.source, f"is of schema version {version}, which this "
                                                f"negotiator-ext brings up to {target} before "
                                                "reading it")
            with self._db.write():
                self._db.lock_for_migration()
                version = self._read_version()  # again, under the lock
                self._check_not_newer(version)
                if version is None:
                    other = ", ".join(self._db.foreign_tables()[:5])
                    if other:
                        raise LedgerError(self.source, "is a database but not a negotiator-ext "
                                                       f"ledger (it has tables {other})")
                for step, statements in MIGRATIONS:
                    if (version or 0) < step <= target:
                        for stmt in statements:
                            self._db.execute(stmt.replace("{id}", self._db.id_type))
                        self._db.execute(
                            "INSERT INTO ledger_meta (key, value) VALUES (?, ?) ON CONFLICT "
                            "(key) DO UPDATE SET value = excluded.value",
                            ("schema_version", str(step)))
                        version = step
            assert version is not None
            return version

    def _insert_rows(self, table: str, rows: Sequence, cols: list[str] | None = None
                     ) -> None:
        """INSERT rows into `table`: dicts with the same keys, or with `cols` tuples of
        those columns' values."""
        if not rows:
            return
        if cols is None:
            cols = list(rows[0])
            rows = [tuple(r[c] for c in cols) for r in rows]
        sql = (f"INSERT INTO {_q(table)} ({', '.join(_q(c) for c in cols)}) "
               f"VALUES ({', '.join('?' for _ in cols)})")
        self._db.executemany(sql, rows)

    # -- writing passes

    def record_pass(self, rec: PassRecord) -> bool:
        """Write the pass with everything it carries in one transaction (see `record`).
        False (and nothing written) when a pass with this uuid is already recorded."""
        return self.record(rec) is not None

    def record(self, rec: PassRecord) -> PassRecord | None:
        """Write the pass with everything it carries in one transaction; the pass as
        recorded, or None (and nothing written) when a pass with this uuid is already
        recorded. Real cycles (pool, time) recorded by an earlier pass are not written
        again; the header counts those written. A comparison of an earlier pass that
        another pass compared already is not written (compare-once, decided under the
        write lock): the pass is recorded without it (`_without_comparison`)."""
        with self._guard(f"pass {rec.uuid} not recorded"):
            with self._db.write():
                return self._write_pass(rec)

    def record_passes(self, recs: Sequence[PassRecord]) -> int:
        """Several passes in one transaction (the simulator writes a batch of cycles at a
        time: one commit, not one per cycle); how many were new. All or none."""
        with self._guard(f"{len(recs)} passes not recorded"):
            with self._db.write():
                return sum(self._write_pass(rec) is not None for rec in recs)

    def _write_pass(self, rec: PassRecord) -> PassRecord | None:
        """One pass's rows, inside the caller's write transaction: the pass as recorded,
        None if already recorded."""
        if rec.comparison is not None:
            self._db.lock_for_comparison()
            if self._db.execute("SELECT 1 FROM comparisons WHERE shadow_pass = ?",
                                (rec.comparison.shadow_pass,)).fetchall():
                rec = _without_comparison(rec)
        header = {n: _encode(getattr(rec, n), _PASS_KINDS[n]) for n in _PASS_HEADER}
        header.update(n_real_cycles=0, n_shadow_matches=len(rec.shadow_matches),
                      n_real_matches=len(rec.real_matches),
                      n_submitters=len(rec.submitters), n_groups=len(rec.groups),
                      n_comparisons=1 if rec.comparison is not None else 0)
        cols = list(header)
        # rowcount, not RETURNING: RETURNING needs SQLite 3.35, older than many
        # distributions' (EL8: 3.26); ON CONFLICT needs 3.24
        inserted = self._db.execute(
            f"INSERT INTO passes ({', '.join(_q(c) for c in cols)}) VALUES "
            f"({', '.join('?' for _ in cols)}) ON CONFLICT (uuid) DO NOTHING",
            tuple(header[c] for c in cols)).rowcount
        if inserted != 1:
            return None
        new_cycles = 0
        for cycle in rec.real_cycles:
            row = {"pool": rec.pool, "first_pass": rec.uuid, **_row_of(cycle)}
            rcols = list(row)
            new_cycles += max(0, self._db.execute(
                f"INSERT INTO real_cycles ({', '.join(_q(c) for c in rcols)}) VALUES "
                f"({', '.join('?' for _ in rcols)}) ON CONFLICT (pool, {_q('time')}) "
                "DO NOTHING", tuple(row[c] for c in rcols)).rowcount)
        if new_cycles:
            self._db.execute("UPDATE passes SET n_real_cycles = ? WHERE uuid = ?",
                             (new_cycles, rec.uuid))
        comparison = () if rec.comparison is None else (rec.comparison,)
        for table, items in (("shadow_matches", rec.shadow_matches),
                             ("real_matches", rec.real_matches),
                             ("submitters", rec.submitters),
                             ("groups", rec.groups),
                             ("comparisons", comparison)):
            if items:
                cols, values = _values_of(items)
                self._insert_rows(table, [(rec.uuid, *v) for v in values],
                                  ["pass_uuid", *cols])
        self._keep_slot_classes(rec)
        ledger_digests.keep(self._db, rec.uuid, rec.pool, rec.digest if rec.comparable else None,
                            rec.comparison.shadow_pass if rec.comparison is not None else None)
        return rec

    # slot classes are kept for the newest comparable passes not compared yet (a cache,
    # not a record): one of them is what the next real cycle will be compared with
    SLOT_CLASSES_KEPT = 5

    def _keep_slot_classes(self, rec: PassRecord) -> None:
        if rec.comparison is not None:
            self._db.execute("DELETE FROM slot_classes WHERE pass_uuid = ?",
                             (rec.comparison.shadow_pass,))
        if not (rec.comparable and rec.slot_classes):
            return
        self._db.execute(
            "INSERT INTO slot_classes (pass_uuid, pool, classes) VALUES (?, ?, ?)",
            (rec.uuid, rec.pool, _encode_classes(rec.slot_classes)))
        self._db.execute(
            "DELETE FROM slot_classes WHERE pool = ? AND pass_uuid NOT IN ("
            " SELECT s.pass_uuid FROM slot_classes s JOIN passes p ON p.uuid = s.pass_uuid"
            " WHERE s.pool = ? ORDER BY p.id DESC LIMIT ?)",
            (rec.pool, rec.pool, self.SLOT_CLASSES_KEPT))

    def digest(self, uuid: str) -> dict[str, Any]:
        """The snapshot digest kept for pass `uuid` (empty: none kept;
        adapters/ledger_digests.py)."""
        with self._guard():
            return ledger_digests.read(self._db, uuid)

    def slot_classes(self, uuid: str) -> dict[str, int]:
        """The slot classes recorded with pass `uuid` (empty: none kept)."""
        with self._guard():
            rows = self._db.execute("SELECT classes FROM slot_classes WHERE pass_uuid = ?",
                                    (uuid,)).fetchall()
        return _decode_classes(rows[0][0]) if rows else {}

    # -- reading passes

    @staticmethod
    def _where(pool: str | None = None, since: float | None = None, until: float | None = None,
               status: str | None = None, comparable: bool | None = None) -> tuple[str, list[Any]]:
        conds, params = [], []
        for cond, value in (("pool = ?", pool), ("started_at >= ?", since),
                            ("started_at < ?", until), ("status = ?", status),
                            ("comparable = ?", None if comparable is None else int(comparable))):
            if value is not None:
                conds.append(cond)
                params.append(value)
        return (" WHERE " + " AND ".join(conds) if conds else ""), params

    def last_pass(self, pool: str | None = None, *, status: str | None = None,
                  comparable: bool | None = None,
                  captured_by: float | None = None,
                  aligned_cycle: int | None = None) -> dict | None:
        """The newest recorded pass (of `pool`, with `status`, comparable or not, with its
        capture over by `captured_by`: started_at + capture_duration <= captured_by,
        aligned with the real cycle that started at `aligned_cycle`, within a second), or
        None."""
        where, params = self._where(pool=pool, status=status, comparable=comparable)
        if aligned_cycle is not None:
            where += ((" AND" if where else " WHERE")
                      + " aligned_cycle BETWEEN ? AND ?")
            params += [int(aligned_cycle) - 1, int(aligned_cycle) + 1]
        if captured_by is not None:
            where += ((" AND" if where else " WHERE")
                      + " started_at + COALESCE(capture_duration, 0) <= ?")
            params.append(float(captured_by))
        with self._guard():
            rows = self._query(f"SELECT * FROM passes{where} ORDER BY id DESC LIMIT 1", params)
        return _header_of(rows[0]) if rows else None

    def standing(self, pool: str) -> Standing:
        """The newest complete pass's start and the newest comparison of `pool`, with the
        start of the pass that recorded it (for the metrics)."""
        complete = self.last_pass(pool, status="complete")
        where, params = self._where(pool=pool)
        with self._guard():
            rows = self._query(f"SELECT uuid, started_at FROM passes{where}"
                               + (" AND" if where else " WHERE")
                               + " n_comparisons > 0 ORDER BY id DESC LIMIT 1", params)
        comparison = self.comparison(rows[0]["uuid"]) if rows else None
        return Standing(
            last_complete_at=float(complete["started_at"]) if complete else None,
            comparison=comparison,
            comparison_at=float(rows[0]["started_at"]) if comparison is not None else None)

    def passes(self, pool: str | None = None, since: float | None = None,
               until: float | None = None, last: int | None = None,
               summaries: bool = False) -> list[dict]:
        """Pass headers with since <= started_at < until (only the newest `last` of them),
        in the order recorded. `summaries`: with the hourly summaries of the hours that
        start in the period (`hours`) among them, each in its place in time (the newest
        `last` of passes and hours together)."""
        where, params = self._where(pool=pool, since=since, until=until)
        if last is not None:
            with self._guard():
                rows = self._query(f"SELECT * FROM passes{where} ORDER BY id DESC LIMIT ?",
                                   (*params, int(last)))
            heads = [_header_of(r) for r in reversed(rows)]
        else:
            with self._guard():
                heads = [_header_of(r) for r in
                         self._query(f"SELECT * FROM passes{where} ORDER BY id", params)]
        if not summaries:
            return heads
        merged = _in_time([h for h, _s, _g in self.hours(pool, since, until)], heads)
        if last is None:
            return merged
        return merged[-int(last):] if last > 0 else []

    def pools(self) -> list[str]:
        """The pools that have passes recorded, sorted."""
        with self._guard():
            rows = self._db.execute("SELECT DISTINCT pool FROM passes").fetchall()
        return sorted(r[0] for r in rows)

    def _children(self, table: str, uuid: str, cls: type) -> list[Any]:
        with self._guard():
            cur = self._db.execute(f"SELECT * FROM {_q(table)} WHERE pass_uuid = ? ORDER BY id",
                                   (uuid,))
            names = [d[0] for d in cur.description]
            rows = cur.fetchall()
        fields = _fields_of(cls)
        if len(fields) > 1 and _all_plain(fields) and all(f.name in names for f in fields):
            # every field stored as it is (a pass's thousands of matches): read in place
            get = operator.itemgetter(*(names.index(f.name) for f in fields))
            return [cls(*get(r)) for r in rows]
        return [_record_of(cls, dict(zip(names, r))) for r in rows]

    def shadow_matches(self, uuid: str) -> list[MatchEntry]:
        """Our matches in pass `uuid`, in the order recorded."""
        return self._children("shadow_matches", uuid, MatchEntry)

    def real_matches(self, uuid: str) -> list[MatchEntry]:
        """The real (MatchLog) matches recorded by pass `uuid`."""
        return self._children("real_matches", uuid, MatchEntry)

    def submitters(self, uuid: str) -> list[SubmitterObs]:
        return self._children("submitters", uuid, SubmitterObs)

    def groups(self, uuid: str) -> list[GroupObs]:
        return self._children("groups", uuid, GroupObs)

    def real_cycles(self, uuid: str) -> list[RealCycle]:
        """The real cycles first recorded by pass `uuid`, oldest first."""
        with self._guard():
            rows = self._query(f"SELECT * FROM real_cycles WHERE first_pass = ? "
                               f"ORDER BY {_q('time')}, id", (uuid,))
        return [_record_of(RealCycle, r) for r in rows]

    def comparison(self, uuid: str) -> Comparison | None:
        """The comparison recorded by pass `uuid` (its `shadow_pass` is the earlier pass
        whose cycle was compared), or None."""
        rows = self._children("comparisons", uuid, Comparison)
        return rows[0] if rows else None

    def comparisons(self, pool: str | None = None, since: float | None = None,
                    summaries: bool = False) -> list[tuple[dict, Comparison]]:
        """(header of the recording pass, its comparison), in the order recorded.
        `summaries`: with each summarised hour's comparisons as one (`hour_comparisons`),
        in its place in time."""
        where, params = self._where(pool=pool, since=since)
        with self._guard(), self._db.read():
            heads = self._query(f"SELECT * FROM passes{where} ORDER BY id", params)
            comps = self._query(f"SELECT * FROM comparisons WHERE pass_uuid IN "
                                f"(SELECT uuid FROM passes{where})", params)
        by_pass = {c["pass_uuid"]: _record_of(Comparison, c) for c in comps}
        out = [(_header_of(h), by_pass[h["uuid"]]) for h in heads if h["uuid"] in by_pass]
        if not summaries:
            return out
        return _in_time(self.hour_comparisons(pool, since), out, key=lambda x: x[0])

    def window(self, since: float | None, pool: str | None = None, complete_only: bool = True,
               until: float | None = None, summaries: bool = False
               ) -> list[tuple[dict, list[SubmitterObs], list[GroupObs]]]:
        """The passes that started in [since, until) (complete ones only, by default),
        oldest first, each with its submitters and groups: what recommendations and the
        audit read. `summaries`: with the summarised hours that start in the period
        (`hours`; with a complete pass, by default) in their place in time."""
        if summaries:
            return _in_time(self.hours(pool, since, until, complete_only),
                            self.window(since, pool, complete_only, until),
                            key=lambda x: x[0])
        where, params = self._where(pool=pool, since=since, until=until,
                                    status="complete" if complete_only else None)
        with self._guard(), self._db.read():
            heads = self._query(f"SELECT * FROM passes{where} ORDER BY started_at, id", params)
            subs = self._query(f"SELECT * FROM submitters WHERE pass_uuid IN "
                               f"(SELECT uuid FROM passes{where}) ORDER BY id", params)
            grps = self._query(f'SELECT * FROM "groups" WHERE pass_uuid IN '
                               f"(SELECT uuid FROM passes{where}) ORDER BY id", params)
        s_by: dict[str, list[SubmitterObs]] = {}
        for r in subs:
            s_by.setdefault(r["pass_uuid"], []).append(_record_of(SubmitterObs, r))
        g_by: dict[str, list[GroupObs]] = {}
        for r in grps:
            g_by.setdefault(r["pass_uuid"], []).append(_record_of(GroupObs, r))
        return [(_header_of(h), s_by.get(h["uuid"], []), g_by.get(h["uuid"], [])) for h in heads]

    def matches_in(self, since: float | None = None, until: float | None = None,
                   pool: str | None = None, complete_only: bool = True
                   ) -> dict[str, tuple[list[MatchEntry], list[MatchEntry]]]:
        """Our and the real matches of every pass in [since, until), by pass uuid: one
        query per table, not two per pass."""
        where, params = self._where(pool=pool, since=since, until=until,
                                    status="complete" if complete_only else None)
        out: dict[str, tuple[list[MatchEntry], list[MatchEntry]]] = {}
        with self._guard(), self._db.read():
            for side, table in enumerate(("shadow_matches", "real_matches")):
                for r in self._query(f"SELECT * FROM {table} WHERE pass_uuid IN "
                                     f"(SELECT uuid FROM passes{where}) ORDER BY id", params):
                    out.setdefault(r["pass_uuid"], ([], []))[side].append(
                        _record_of(MatchEntry, r))
        return out

    def pass_record(self, uuid: str) -> PassRecord | None:
        """The PassRecord as recorded (its real_cycles: those it recorded first), or None."""
        with self._guard(), self._db.read():
            rows = self._query("SELECT * FROM passes WHERE uuid = ?", (uuid,))
            if not rows:
                return None
            h = _header_of(rows[0])
            return PassRecord(**{n: h[n] for n in _PASS_HEADER},
                              real_cycles=tuple(self.real_cycles(uuid)),
                              shadow_matches=tuple(self.shadow_matches(uuid)),
                              real_matches=tuple(self.real_matches(uuid)),
                              submitters=tuple(self.submitters(uuid)),
                              groups=tuple(self.groups(uuid)),
                              comparison=self.comparison(uuid),
                              slot_classes=self.slot_classes(uuid),
                              digest=self.digest(uuid))

    def check_writable(self, why: str) -> None:
        """LedgerError when the ledger cannot be written; `why` says what needed it."""
        cannot = self._db.cannot_write()
        if self._db.read_only or cannot:
            raise LedgerError(self.source, f"{cannot or 'opened read-only'}: {why}")

    def compared(self, uuid: str) -> bool:
        """Whether some pass already compared pass `uuid`'s cycle with a real cycle (so far:
        `record` decides again, under the write lock)."""
        with self._guard():
            return bool(self._db.execute("SELECT 1 FROM comparisons WHERE shadow_pass = ?",
                                         (uuid,)).fetchall())

    def newest_real_cycle(self, pool: str) -> int | None:
        """The start time of the newest real cycle recorded for `pool` (by a pass, or in a
        summarised hour), or None."""
        with self._guard():
            rows = self._db.execute(f"SELECT MAX({_q('time')}) FROM real_cycles WHERE pool = ?",
                                    (pool,)).fetchall()
            rows += self._db.execute("SELECT MAX(newest_real_cycle) FROM hours WHERE pool = ?",
                                     (pool,)).fetchall()
        times = [int(r[0]) for r in rows if r[0] is not None]
        return max(times) if times else None

    def verify(self) -> list[str]:
        """One line per pass whose child rows do not match its header's counts (empty: every
        recorded pass is whole)."""
        problems = []
        with self._guard(), self._db.read():
            heads = self._query(f"SELECT uuid, {', '.join(_COUNTS)} FROM passes ORDER BY id")
            counts: dict[str, dict[str, int]] = {}
            for table, (key, count) in _CHILD_TABLES.items():
                for uuid, n in self._db.execute(
                        f"SELECT {key}, COUNT(*) FROM {_q(table)} GROUP BY {key}").fetchall():
                    counts.setdefault(uuid, {})[count] = n
            hours = self._query("SELECT id, pool, hour, n_submitters, n_groups FROM hours "
                                "ORDER BY id")
            h_counts: dict[Any, dict[str, int]] = {}
            for table, count in (("hour_submitters", "n_submitters"),
                                 ("hour_groups", "n_groups")):
                for hour_id, n in self._db.execute(
                        f"SELECT hour_id, COUNT(*) FROM {table} GROUP BY hour_id").fetchall():
                    h_counts.setdefault(hour_id, {})[count] = n
        for h in heads:
            have = counts.get(h["uuid"], {})
            for count in _COUNTS:
                if have.get(count, 0) != h[count]:
                    problems.append(f"pass {h['uuid']}: {count} is {h[count]} but "
                                    f"{have.get(count, 0)} rows are recorded")
        for h in hours:
            have = h_counts.get(h["id"], {})
            for count in ("n_submitters", "n_groups"):
                if have.get(count, 0) != h[count]:
                    problems.append(f"hour {hour_key(h['pool'], h['hour'])}: {count} is "
                                    f"{h[count]} but {have.get(count, 0)} rows are recorded")
        return problems

    # -- adjustments (the audit trail)

    def record_adjustment(self, adj: Adjustment) -> None:
        """Append one applied (or failed, or skipped) recommendation."""
        with self._guard(f"adjustment {adj.key} not recorded"), self._db.write():
            self._insert_rows("adjustments", [_row_of(adj)])

    def adjustments(self, name: str | None = None, since: int | None = None) -> list[Adjustment]:
        """Adjustments (of principal `name`, applied at or after `since`), in the order
        recorded."""
        conds, params = [], []
        if name is not None:
            conds.append("name = ?")
            params.append(name)
        if since is not None:
            conds.append("applied_at >= ?")
            params.append(since)
        where = " WHERE " + " AND ".join(conds) if conds else ""
        with self._guard():
            rows = self._query(f"SELECT * FROM adjustments{where} ORDER BY id", params)
        return [_record_of(Adjustment, r) for r in rows]

    # -- retention and export

    def prune(self, older_than: float) -> int:
        """Delete the passes that started before `older_than` with all their rows, and the
        hourly summaries of hours that ended by then, in one transaction; the number of
        passes and hours deleted. Adjustments are never deleted."""
        with self._guard("nothing was pruned"), self._db.write():
            n = self._delete_passes("started_at < ?", (older_than,))
            return n + self._delete_hours("hour <= ?", (older_than - HOUR,))

    def _delete_passes(self, where: str, params: Sequence[Any]) -> int:
        """Delete the passes `where` selects with every row they carry (inside the caller's
        write transaction); how many."""
        sub = f"(SELECT uuid FROM passes WHERE {where})"
        for table, (key, _count) in _CHILD_TABLES.items():
            self._db.execute(f"DELETE FROM {_q(table)} WHERE {key} IN {sub}", params)
        self._db.execute(f"DELETE FROM slot_classes WHERE pass_uuid IN {sub}", params)
        if self._db.has_table(ledger_digests.TABLE):
            self._db.execute(f"DELETE FROM {ledger_digests.TABLE} WHERE pass_uuid IN {sub}",
                             params)
        return int(self._db.execute(f"DELETE FROM passes WHERE {where}", params).rowcount or 0)

    def _delete_hours(self, where: str, params: Sequence[Any]) -> int:
        sub = f"(SELECT id FROM hours WHERE {where})"
        for table in ("hour_submitters", "hour_groups"):
            self._db.execute(f"DELETE FROM {table} WHERE hour_id IN {sub}", params)
        return int(self._db.execute(f"DELETE FROM hours WHERE {where}", params).rowcount or 0)

    # -- hourly summaries

    def summarise(self, before: float, *, max_hours: int | None = None) -> int:
        """Replace the passes of each whole hour that ended by `before` with one hourly
        summary (`hours`, `hour_submitters`, `hour_groups`), oldest hour first, pool by
        pool, each hour in its own transaction (so a reader or another writer waits for
        one hour at most); at most `max_hours` of them. Returns how many hours were
        summarised. Passes that reach an hour summarised before (a clock that went back,
        a late replay) are folded into its summary. What a summary keeps: see
        `_SUBMITTER_AGG`, `_GROUP_AGG` and `_hour_header`; the match rows, the real
        cycles and comparisons one by one, and the slot classes are not kept."""
        cutoff = _hour_of(before)
        done = 0
        while max_hours is None or done < max_hours:
            with self._guard(f"{done} hour(s) summarised, then stopped"), self._db.write():
                self._db.lock_for_summary()
                rows = self._db.execute(
                    "SELECT pool, MIN(started_at) FROM passes WHERE started_at < ? "
                    "GROUP BY pool", (cutoff,)).fetchall()
                if not rows:
                    break
                pool, first = min(rows, key=lambda r: (float(r[1]), str(r[0])))
                self._summarise_hour(str(pool), _hour_of(float(first)))
            done += 1
        return done

    def _summarise_hour(self, pool: str, hour: int) -> None:
        """One (pool, hour): its passes into its summary (merged with the one already
        there), then deleted. Inside the caller's write transaction."""
        where, params = "pool = ? AND started_at >= ? AND started_at < ?", (pool, hour,
                                                                            hour + HOUR)
        heads = self._query(f"SELECT * FROM passes WHERE {where} ORDER BY started_at, id",
                            params)
        complete = sorted((h for h in heads if h["status"] == "complete"),
                          key=lambda h: (_pass_time(h), float(h["started_at"]), h["id"]))
        # the pool's complete passes from this hour on: the median interval, and the
        # first pass after the hour (what the hour's last pass stands until)
        later = sorted((float(t), float(s)) for t, s in self._db.execute(
            "SELECT COALESCE(snapshot_time, started_at), started_at FROM passes "
            "WHERE pool = ? AND status = 'complete' AND started_at >= ?", (pool, hour)))
        gaps = [b[0] - a[0] for a, b in zip(later, later[1:])]
        median = statistics.median(gaps) if gaps else 0.0
        after = min((t for t, s in later if s >= hour + HOUR), default=None)
        times = [_pass_time(h) for h in complete]
        intervals = _intervals(times, after, median)
        seconds = sum(intervals)
        weights = intervals if seconds > 0 else [1.0] * len(complete)
        weight_of = {h["uuid"]: (w, t) for h, w, t in zip(complete, weights, times)}
        old = self._query("SELECT * FROM hours WHERE pool = ? AND hour = ?", (pool, hour))
        old = old[0] if old else None
        total = sum(weights)
        subs: dict[str, list[_Obs]] = {}
        grps: dict[str, list[_Obs]] = {}
        if old is not None:
            # the hour summarised before, as one more observation of each principal
            o_seconds, o_complete = float(old["seconds"]), int(old["complete"])
            o_weight = o_seconds if seconds > 0 or o_seconds > 0 else float(o_complete)
            if seconds == 0 and o_seconds > 0:      # the new passes weigh nothing then
                weight_of = {u: (0.0, t) for u, (_w, t) in weight_of.items()}
                total = 0.0
            total += o_weight
            o_time = float(old["last_started"] or hour)
            for table, into in (("hour_submitters", subs), ("hour_groups", grps)):
                for r in self._query(f"SELECT * FROM {table} WHERE hour_id = ? ORDER BY id",
                                     (old["id"],)):
                    share = int(r["passes"]) / o_complete if o_complete else 1.0
                    into.setdefault(r["name"], []).append(
                        _Obs(r, o_weight, o_weight * share, o_time, int(r["passes"])))
        sub = f"(SELECT uuid FROM passes WHERE {where} AND status = 'complete')"
        for table, into in (("submitters", subs), ('"groups"', grps)):
            for r in self._query(f"SELECT * FROM {table} WHERE pass_uuid IN {sub} ORDER BY id",
                                 params):
                w, t = weight_of[r["pass_uuid"]]
                into.setdefault(r["name"], []).append(_Obs(r, w, w, t, 1))
        sub_rows = [{"name": n, **_aggregate(obs, _SUBMITTER_AGG, total)}
                    for n, obs in subs.items()]
        grp_rows = [{"name": n, **_aggregate(obs, _GROUP_AGG, total)} for n, obs in grps.items()]
        for r in sub_rows:
            if r["is_group"] is not None:
                r["is_group"] = int(bool(r["is_group"]))
        uuids = [h["uuid"] for h in heads]
        cycles = self._query(f"SELECT * FROM real_cycles WHERE first_pass IN "
                             f"(SELECT uuid FROM passes WHERE {where})", params)
        comps = [_record_of(Comparison, r) for r in self._query(
            f"SELECT * FROM comparisons WHERE pass_uuid IN (SELECT uuid FROM passes "
            f"WHERE {where}) ORDER BY id", params)]
        started = [float(h["started_at"]) for h in complete]
        pool_weights = [(float(h["pool_weight"]), weight_of[h["uuid"]][0]) for h in complete
                        if h.get("pool_weight") is not None]
        row: dict[str, Any] = {
            "pool": pool, "hour": hour, "passes": len(heads), "complete": len(complete),
            "partial": sum(1 for h in heads if h["status"] == "partial"),
            "failed": sum(1 for h in heads if h["status"] == "failed"),
            "seconds": seconds, "first_started": min(started, default=None),
            "last_started": max(started, default=None),
            "shadow_matches": sum(int(h["n_shadow_matches"] or 0) for h in heads),
            "real_matches": sum(int(h["n_real_matches"] or 0) for h in heads),
            "newest_real_cycle": max([int(h["real_cycle_time"]) for h in heads
                                      if h.get("real_cycle_time") is not None]
                                     + [int(c["time"]) for c in cycles], default=None),
            "reasons": _reasons_of(heads), "real_cycles": _cycles_summary(cycles),
            "comparisons": _comparisons_summary(comps)}
        means = {}
        for col in ("shadow_duration", "capture_duration"):
            vals = [float(h[col]) for h in heads if h.get(col) is not None]
            means[col] = [sum(vals), len(vals)]
        if old is not None:
            n_old = int(old["passes"])
            for k in ("passes", "complete", "partial", "failed", "shadow_matches",
                      "real_matches"):
                row[k] += int(old[k])
            row["seconds"] += float(old["seconds"])
            for k, pick in (("first_started", min), ("last_started", max),
                            ("newest_real_cycle", max)):
                vals = [v for v in (row[k], old[k]) if v is not None]
                row[k] = pick(vals) if vals else None
            for k in ("reasons", "real_cycles", "comparisons"):
                row[k] = _merge_counts(json.loads(old[k] or "{}"), row[k])
            for col in ("shadow_duration", "capture_duration"):
                if old[col] is not None:
                    means[col] = [means[col][0] + float(old[col]) * n_old, means[col][1] + n_old]
            if old["pool_weight"] is not None:
                pool_weights.append((float(old["pool_weight"]), o_weight))
        for col, (s, n) in means.items():
            row[col] = s / n if n else None
        pw = sum(w for _, w in pool_weights)
        row["pool_weight"] = (sum(v * w for v, w in pool_weights) / pw if pw > 0 else
                              sum(v for v, _ in pool_weights) / len(pool_weights)
                              if pool_weights else None)
        row["reasons"] = _top_reasons(row["reasons"])
        for k in ("reasons", "real_cycles", "comparisons"):
            row[k] = _dumps(row[k]) if row[k] else None
        row.update(n_submitters=len(sub_rows), n_groups=len(grp_rows))
        if old is not None:
            self._delete_hours("id = ?", (old["id"],))
        self._insert_rows("hours", [row])
        hour_id = self._db.execute("SELECT id FROM hours WHERE pool = ? AND hour = ?",
                                   (pool, hour)).fetchall()[0][0]
        for table, rows_ in (("hour_submitters", sub_rows), ("hour_groups", grp_rows)):
            if rows_:
                cols = list(rows_[0])
                self._insert_rows(table, [(hour_id, *(r[c] for c in cols)) for r in rows_],
                                  ["hour_id", *cols])
        if uuids:
            self._delete_passes(where, params)

    def hours(self, pool: str | None = None, since: float | None = None,
              until: float | None = None, complete_only: bool = False
              ) -> list[tuple[dict, list[SubmitterObs], list[GroupObs]]]:
        """The hourly summaries of the hours that start in [since, until) (only those with
        a complete pass: `complete_only`), oldest first, each as a pass header
        (`_hour_header`) with its submitters and groups: their figures aggregated over
        the hour's complete passes (`_SUBMITTER_AGG`, `_GROUP_AGG`)."""
        conds, params = [], []
        for cond, value in (("pool = ?", pool), ("hour >= ?", since), ("hour < ?", until)):
            if value is not None:
                conds.append(cond)
                params.append(value)
        if complete_only:
            conds.append("complete > 0")
        where = " WHERE " + " AND ".join(conds) if conds else ""
        with self._guard(), self._db.read():
            heads = self._query(f"SELECT * FROM hours{where} ORDER BY hour, id", params)
            subs = self._query(f"SELECT * FROM hour_submitters WHERE hour_id IN "
                               f"(SELECT id FROM hours{where}) ORDER BY id", params)
            grps = self._query(f"SELECT * FROM hour_groups WHERE hour_id IN "
                               f"(SELECT id FROM hours{where}) ORDER BY id", params)
        s_by: dict[Any, list[dict]] = {}
        g_by: dict[Any, list[dict]] = {}
        for rows, by in ((subs, s_by), (grps, g_by)):
            for r in rows:
                by.setdefault(r["hour_id"], []).append(r)
        out = []
        for h in heads:
            s_rows, g_rows = s_by.get(h["id"], []), g_by.get(h["id"], [])
            header = _hour_header(h, {r["name"]: int(r["passes"]) for r in s_rows},
                                  {r["name"]: int(r["passes"]) for r in g_rows})
            out.append((header, [_record_of(SubmitterObs, r) for r in s_rows],
                        [_record_of(GroupObs, r) for r in g_rows]))
        return out

    def hour_comparisons(self, pool: str | None = None, since: float | None = None,
                         until: float | None = None) -> list[tuple[dict, Comparison]]:
        """Each summarised hour's comparisons as one (header, Comparison): see
        `_hour_comparison`."""
        out = []
        for header, _s, _g in self.hours(pool, since, until):
            comp = _hour_comparison(header["uuid"], header["summary"]["comparisons"])
            if comp is not None:
                out.append((header, comp))
        return out

    # -- space

    # pages an incremental vacuum gives back at most per call (4 KiB pages: 128 MiB)
    RECLAIM_PAGES = 32768

    def reclaim(self, max_pages: int | None = None) -> dict[str, Any]:
        """Give the space that deleted rows left back to the file system, a bounded step at a
        time: SQLite (created with auto_vacuum = INCREMENTAL) frees at most `max_pages`
        free pages (`RECLAIM_PAGES`) off the end of the file, then checkpoints the
        write-ahead log; PostgreSQL runs a plain VACUUM of the ledger's tables (it takes
        no lock that stops reads or writes: the space is reused by the tables, and empty
        pages at their end are returned). A SQLite ledger made before schema step 9
        (auto_vacuum NONE) reuses its free pages but cannot shrink without `vacuum`:
        {"shrinks": False}. What was done, as a dict."""
        with self._guard("space not reclaimed"):
            return self._db.reclaim(self.RECLAIM_PAGES if max_pages is None else max_pages)

    def vacuum(self) -> dict[str, Any]:
        """Rewrite the ledger compactly (SQLite: VACUUM, turning on incremental auto-vacuum
        for a ledger made before it; PostgreSQL: VACUUM FULL of the ledger's tables).
        It holds the ledger for as long as the copy takes (writers wait or time out) and
        needs room for a copy: `negotiator-ext ledger vacuum`, once, by an admin."""
        self.check_writable("not vacuumed")
        with self._guard("not vacuumed"):
            return self._db.vacuum()

    def space(self) -> dict[str, Any]:
        """How much room the ledger takes: SQLite {"bytes" (the file), "wal_bytes" (its
        write-ahead log), "page_size", "pages", "free_pages", "auto_vacuum"}; PostgreSQL
        {"bytes", "tables": {table: bytes, indexes and TOAST included}}."""
        with self._guard():
            return self._db.space()

    def export(self, out_dir: str | os.PathLike, fmt: str,
               tables: Sequence[str] | None = None) -> list[Path]:
        """Write each table (all by default) to `out_dir`/<table>.<fmt>: csv, jsonl or
        parquet, all from one snapshot of the ledger. JSON columns are JSON text in csv and
        parquet, parsed values in jsonl. The paths written, in table order."""
        if fmt not in EXPORT_FORMATS:
            raise LedgerError(self.source, f"unknown export format {fmt!r}: use csv, jsonl or "
                                           "parquet")
        names = list(TABLES if tables is None else [tables] if isinstance(tables, str) else tables)
        unknown = [t for t in names if t not in TABLES]
        if unknown:
            raise LedgerError(self.source, f"unknown ledger table {unknown[0]!r} "
                                           f"(tables: {', '.join(TABLES)})")
        if fmt == "parquet" and (importlib.util.find_spec("pyarrow") is None
                                 or importlib.util.find_spec("pandas") is None):
            raise LedgerError(self.source, "parquet export needs pandas and pyarrow: "
                                           "pip install 'negotiator-ext[parquet]'")
        out = Path(out_dir)
        try:
            out.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise LedgerError(str(out), f"cannot create the export directory: "
                                        f"{exc.strerror or exc}") from exc
        written = []
        with self._guard("export stopped"), self._db.read():
            for table in dict.fromkeys(names):
                cur = self._db.execute(f"SELECT * FROM {_q(table)} ORDER BY id")
                cols = [d[0] for d in cur.description]
                path = out / f"{table}.{fmt}"
                tmp = path.with_name(path.name + ".tmp")
                try:
                    getattr(self, f"_write_{fmt}")(tmp, table, cols, cur)
                    os.replace(tmp, path)
                except OSError as exc:
                    tmp.unlink(missing_ok=True)
                    raise LedgerError(str(path), f"cannot write: {exc.strerror or exc}") from exc
                written.append(path)
        return written

    @staticmethod
    def _batches(cur: Any) -> Iterator[Sequence[Any]]:
        while True:
            rows = cur.fetchmany(2000)
            if not rows:
                return
            yield from rows

    def _write_csv(self, path: Path, table: str, cols: list[str], cur: Any) -> None:
        with open(path, "w", newline="", encoding="utf-8") as f:
            w = csv.writer(f)
            w.writerow(cols)
            for row in self._batches(cur):
                w.writerow(["" if v is None else v for v in row])

    def _write_jsonl(self, path: Path, table: str, cols: list[str], cur: Any) -> None:
        json_cols = _JSON_COLUMNS.get(table, frozenset())
        bool_cols = _BOOL_COLUMNS.get(table, frozenset())
        with open(path, "w", encoding="utf-8") as f:
            for row in self._batches(cur):
                d = dict(zip(cols, row))
                for c in json_cols:
                    if isinstance(d.get(c), str):
                        d[c] = json.loads(d[c])
                for c in bool_cols:
                    if d.get(c) is not None:
                        d[c] = bool(d[c])
                # a limit HTCondor left without a number: null, not -2147483648
                f.write(json.dumps(without_sentinels(d)) + "\n")

    def _write_parquet(self, path: Path, table: str, cols: list[str], cur: Any) -> None:
        import pandas as pd
        df = pd.DataFrame.from_records(list(self._batches(cur)), columns=cols)
        for c in _BOOL_COLUMNS.get(table, ()):
            df[c] = df[c].astype("boolean")
        df.convert_dtypes(dtype_backend="numpy_nullable").to_parquet(path, index=False,
                                                                    engine="pyarrow")


def _open(url: str, *, lock_timeout: float = 10.0, create: bool = True,
          schema_target: int = SCHEMA_VERSION, read_only: bool = False) -> Ledger:
    kind, where = parse_url(url)
    db: _SQLite | _Postgres
    if kind == "sqlite":
        db = _SQLite(where, lock_timeout, create, read_only)
    else:
        db = _Postgres(where, lock_timeout, create, read_only)
    return Ledger(db, str(url), create=create, schema_target=schema_target)


def open_ledger(url: str, *, lock_timeout: float = 10.0, create: bool = True,
                read_only: bool = False) -> Ledger:
    """Open (and by default create) the ledger at `url`, its schema brought up to date.

    `url`: a file path, sqlite:///relative/path (also sqlite:relative/path),
    sqlite:////absolute/path, or postgresql://… / postgres://…. `lock_timeout`: seconds
    to wait for another process's lock before a LedgerError (a transient one).
    `create=False`: a missing ledger is a LedgerError instead of a new one.
    `read_only=True` (implies create=False): for readers; the ledger is opened so that
    nothing can be written to it, so one on a read-only file system or that this user
    may not write can be read. Only a ledger of an older schema is opened for writing,
    once, to bring it up to date: where it cannot be written, that is the LedgerError.
    """
    if not read_only:
        return _open(url, lock_timeout=lock_timeout, create=create)
    try:
        return _open(url, lock_timeout=lock_timeout, create=False, read_only=True)
    except _OlderSchema as older:
        try:
            return _open(url, lock_timeout=lock_timeout, create=False)
        except LedgerError as exc:
            raise LedgerError(exc.source, f"{older.message}, but it {exc.message}",
                              transient=exc.transient) from exc
