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

Its parts, beside this module (which holds `Ledger`, its plumbing, the audit trail, space
and export, and `open_ledger`, and from which the names below are still imported):
`ledger_errors` (LedgerError), `ledger_schema` (the MIGRATIONS, SCHEMA_VERSION, TABLES),
`ledger_rows` (records as rows and back), `ledger_writing`, `ledger_reading` and
`ledger_summarising` (the Ledger's methods that write passes, read them, and prune and
summarise them), `ledger_summaries` (what an hourly summary keeps, HOUR, hour_key),
`ledger_urls` (parse_url, URL_FORMS), `ledger_sqlite` and `ledger_postgres` (the two
backends), and `ledger_digests` (the snapshots' digests).
"""

from __future__ import annotations

import csv
import importlib.util
import json
import os
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator, Sequence

from ..core.figures import without_sentinels
from ..core.records import Adjustment
from .ledger_errors import LedgerError, _OlderSchema
from .ledger_postgres import _Postgres
from .ledger_reading import _Reading
from .ledger_rows import _BOOL_COLUMNS, _JSON_COLUMNS, _q, _record_of, _row_of
from .ledger_schema import EXPORT_FORMATS, MIGRATIONS, SCHEMA_VERSION, TABLES
from .ledger_sqlite import FULL_BELOW, _SQLite
from .ledger_summaries import HOUR, hour_key
from .ledger_summarising import _Summarising
from .ledger_urls import URL_FORMS, parse_url
from .ledger_writing import _Writing

__all__ = ["EXPORT_FORMATS", "FULL_BELOW", "HOUR", "MIGRATIONS", "SCHEMA_VERSION", "TABLES",
           "URL_FORMS", "Ledger", "LedgerError", "hour_key", "open_ledger", "parse_url"]


# ---------------------------------------------------------------- the ledger

class Ledger(_Writing, _Reading, _Summarising):
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
