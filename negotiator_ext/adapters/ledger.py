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
(`open_ledger(..., read_only=True)`): SQLite `mode=ro`, a PostgreSQL session whose
transactions are read-only. So a ledger on a read-only file system, or one this user
may not write, can be read.

The schema is versioned: `ledger_meta.schema_version`, brought up to `SCHEMA_VERSION` on
open by the ordered `MIGRATIONS`, all missing steps in one transaction. A ledger written
by a newer negotiator-ext is refused instead of being misread. The SQL is kept portable
between both databases: `?` placeholders are translated for psycopg, `{id}` in a
migration is the dialect's auto-increment key, floats are DOUBLE PRECISION, integers
BIGINT, booleans 0/1 and lists and mappings JSON text.

Every database problem (locked, full, corrupt, newer schema, cannot open or write) is a
`LedgerError`: an InputError naming the ledger, printed by the CLI in one line; its
`transient` tells a lock (worth trying again) from a lasting problem.

A `Ledger` holds one connection: use it from one thread.
"""

from __future__ import annotations

import csv
import dataclasses
import operator
import importlib.util
import json
import os
import re
import sqlite3
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator, Mapping, NamedTuple, Sequence
from urllib.parse import quote, urlsplit, urlunsplit

from ..core.records import (Adjustment, Comparison, GroupObs, MatchEntry, PassRecord,
                            RealCycle, Standing, SubmitterObs)
from ..errors import InputError


class LedgerError(InputError):
    """The ledger cannot be opened, read or written; `source` is the ledger's URL or path
    (a PostgreSQL password masked).

    `transient`: the same operation may well succeed later without anybody acting (the
    ledger locked by another process beyond the lock timeout; a PostgreSQL server that
    cannot be reached). False for lasting conditions: the ledger cannot be opened or
    created, is read-only, full, corrupt, not a ledger, of a newer schema, a bad URL."""

    def __init__(self, source: str, message: str, *, transient: bool = False, **kw: Any):
        super().__init__(source, message, **kw)
        self.transient = transient


class _OlderSchema(LedgerError):
    """A ledger opened read-only is of an older schema (`open_ledger` opens it for
    writing, to bring it up to date)."""


# ---------------------------------------------------------------- schema and migrations

# Ordered (version, statements). A step is never edited once released: a change of the
# schema is a new step. `{id}` is the auto-increment primary key of the dialect.
MIGRATIONS: list[tuple[int, tuple[str, ...]]] = [
    (1, (
        "CREATE TABLE ledger_meta (key TEXT PRIMARY KEY, value TEXT)",
        """CREATE TABLE passes (
            id {id},
            uuid TEXT NOT NULL UNIQUE,
            pool TEXT NOT NULL,
            started_at DOUBLE PRECISION NOT NULL,
            finished_at DOUBLE PRECISION,
            snapshot_time BIGINT,
            status TEXT NOT NULL,
            reason TEXT,
            real_cycle_time BIGINT,
            real_accountant_time BIGINT,
            shadow_duration DOUBLE PRECISION,
            capture_duration DOUBLE PRECISION,
            shadow_timings TEXT,
            snapshot_dir TEXT,
            warnings TEXT,
            n_real_cycles BIGINT NOT NULL DEFAULT 0,
            n_shadow_matches BIGINT NOT NULL DEFAULT 0,
            n_real_matches BIGINT NOT NULL DEFAULT 0,
            n_submitters BIGINT NOT NULL DEFAULT 0,
            n_groups BIGINT NOT NULL DEFAULT 0,
            n_comparisons BIGINT NOT NULL DEFAULT 0)""",
        """CREATE TABLE real_cycles (
            id {id},
            pool TEXT NOT NULL,
            "time" BIGINT NOT NULL,
            first_pass TEXT NOT NULL,
            "end" BIGINT,
            duration DOUBLE PRECISION,
            phase_durations TEXT,
            matches BIGINT,
            rejections BIGINT,
            active_submitters BIGINT,
            idle_jobs BIGINT,
            candidate_slots BIGINT,
            submitters_failed TEXT,
            submitters_out_of_time TEXT,
            submitters_share_limit TEXT,
            schedds_out_of_time TEXT,
            UNIQUE (pool, "time"))""",
        """CREATE TABLE shadow_matches (
            id {id},
            pass_uuid TEXT NOT NULL,
            job TEXT NOT NULL,
            submitter TEXT NOT NULL,
            slot TEXT NOT NULL,
            preempting TEXT,
            "time" BIGINT,
            "group" TEXT)""",
        """CREATE TABLE real_matches (
            id {id},
            pass_uuid TEXT NOT NULL,
            job TEXT NOT NULL,
            submitter TEXT NOT NULL,
            slot TEXT NOT NULL,
            preempting TEXT,
            "time" BIGINT,
            "group" TEXT)""",
        """CREATE TABLE submitters (
            id {id},
            pass_uuid TEXT NOT NULL,
            name TEXT NOT NULL,
            "group" TEXT,
            is_group INTEGER NOT NULL,
            factor DOUBLE PRECISION,
            policy_factor DOUBLE PRECISION,
            factor_lease_expires BIGINT,
            floor BIGINT,
            floor_lease_expires BIGINT,
            ceiling BIGINT,
            ceiling_lease_expires BIGINT,
            real_rup DOUBLE PRECISION,
            real_eup DOUBLE PRECISION,
            real_usage DOUBLE PRECISION,
            resources_used DOUBLE PRECISION,
            hier_usage DOUBLE PRECISION,
            real_share DOUBLE PRECISION,
            real_limit DOUBLE PRECISION,
            last_usage_time BIGINT,
            begin_usage_time BIGINT,
            claimed_weight DOUBLE PRECISION,
            idle_jobs BIGINT,
            running_jobs BIGINT,
            shadow_eup DOUBLE PRECISION,
            shadow_share DOUBLE PRECISION,
            shadow_limit DOUBLE PRECISION,
            shadow_matches BIGINT,
            shadow_match_weight DOUBLE PRECISION,
            real_matches BIGINT,
            predicted_rup DOUBLE PRECISION,
            drift DOUBLE PRECISION)""",
        """CREATE TABLE "groups" (
            id {id},
            pass_uuid TEXT NOT NULL,
            name TEXT NOT NULL,
            real_quota DOUBLE PRECISION,
            config_quota DOUBLE PRECISION,
            real_usage DOUBLE PRECISION,
            real_requested DOUBLE PRECISION,
            shadow_quota DOUBLE PRECISION,
            shadow_allocated DOUBLE PRECISION,
            shadow_usage_after DOUBLE PRECISION,
            shadow_matches BIGINT,
            real_matches BIGINT)""",
        """CREATE TABLE comparisons (
            id {id},
            pass_uuid TEXT NOT NULL UNIQUE,
            shadow_pass TEXT,
            real_cycle_time BIGINT,
            real_cycles_between BIGINT,
            real_matches BIGINT,
            shadow_matches BIGINT,
            agreed BIGINT,
            real_in_shadow DOUBLE PRECISION,
            shadow_in_real DOUBLE PRECISION,
            count_agreement DOUBLE PRECISION,
            source TEXT,
            per_submitter TEXT,
            per_group TEXT,
            max_abs_drift DOUBLE PRECISION,
            real_duration DOUBLE PRECISION,
            notes TEXT)""",
        "CREATE INDEX real_cycles_first_pass ON real_cycles (first_pass)",
        "CREATE INDEX shadow_matches_pass ON shadow_matches (pass_uuid)",
        "CREATE INDEX real_matches_pass ON real_matches (pass_uuid)",
        "CREATE INDEX submitters_pass ON submitters (pass_uuid)",
        'CREATE INDEX groups_pass ON "groups" (pass_uuid)',
    )),
    (2, (
        # the audit trail of applied recommendations, and the index `window` and
        # `prune` select passes by
        """CREATE TABLE adjustments (
            id {id},
            "key" TEXT NOT NULL,
            kind TEXT NOT NULL,
            name TEXT NOT NULL,
            value DOUBLE PRECISION,
            applied_at BIGINT NOT NULL,
            lease_expires BIGINT,
            command TEXT,
            method TEXT,
            outcome TEXT NOT NULL)""",
        'CREATE INDEX adjustments_key ON adjustments ("key", applied_at)',
        "CREATE INDEX passes_pool_started ON passes (pool, started_at)",
    )),
    # 3: whether a pass's own cycle may be compared by the next pass (PassRecord.comparable);
    # passes recorded before it are taken as comparable when they were complete
    (3, (
        "ALTER TABLE passes ADD COLUMN comparable INTEGER",
        "UPDATE passes SET comparable = CASE WHEN status = 'complete' THEN 1 ELSE 0 END",
    )),
    # 4: agreement up to interchangeable slots (Comparison.agreed_equivalent), and the
    # slot classes of the newest comparable passes not compared yet (PassRecord.slot_classes)
    (4, (
        "ALTER TABLE comparisons ADD COLUMN agreed_equivalent BIGINT",
        "ALTER TABLE comparisons ADD COLUMN equivalent_agreement DOUBLE PRECISION",
        """CREATE TABLE slot_classes (
            pass_uuid TEXT PRIMARY KEY,
            pool TEXT NOT NULL,
            classes TEXT NOT NULL)""",
        "CREATE INDEX comparisons_shadow_pass ON comparisons (shadow_pass)",
    )),
    # 5: our SubmitterLimit as the real accountant publishes its own
    (5, (
        "ALTER TABLE submitters ADD COLUMN shadow_submitter_limit DOUBLE PRECISION",
    )),
    # 6: what the audit needs: the pool's size per pass, each match's queue wait
    (6, (
        "ALTER TABLE passes ADD COLUMN pool_weight DOUBLE PRECISION",
        "ALTER TABLE shadow_matches ADD COLUMN wait DOUBLE PRECISION",
        "ALTER TABLE real_matches ADD COLUMN wait DOUBLE PRECISION",
    )),
    # 7: where a pass's time went (PassRecord.pass_timings)
    (7, (
        "ALTER TABLE passes ADD COLUMN pass_timings TEXT",
    )),
    # 8: where the real cycle's time limits would stop it (PassRecord.time_limits)
    (8, (
        "ALTER TABLE passes ADD COLUMN time_limits TEXT",
        "ALTER TABLE comparisons ADD COLUMN time_limits TEXT",
    )),
]
SCHEMA_VERSION = MIGRATIONS[-1][0]

# the tables `export` writes (all but ledger_meta), in dependency order
TABLES = ("passes", "real_cycles", "shadow_matches", "real_matches", "submitters", "groups",
          "comparisons", "adjustments")

EXPORT_FORMATS = ("csv", "jsonl", "parquet")

_PG_MIGRATION_LOCK = 0x6E6567_6F7478  # pg_advisory_xact_lock key: one migrator at a time
_PG_COMPARISON_LOCK = 0x6E6567_636D70  # and one writer of a comparison at a time

# PassRecord fields stored in their own tables, not in the header row
_PASS_CHILDREN = ("real_cycles", "shadow_matches", "real_matches", "submitters", "groups",
                  "comparison", "slot_classes")
_PASS_HEADER = tuple(f.name for f in dataclasses.fields(PassRecord)
                     if f.name not in _PASS_CHILDREN)
_COUNTS = ("n_real_cycles", "n_shadow_matches", "n_real_matches", "n_submitters", "n_groups",
           "n_comparisons")
# child table -> (column naming the pass, header count column)
_CHILD_TABLES = {"real_cycles": ("first_pass", "n_real_cycles"),
                 "shadow_matches": ("pass_uuid", "n_shadow_matches"),
                 "real_matches": ("pass_uuid", "n_real_matches"),
                 "submitters": ("pass_uuid", "n_submitters"),
                 "groups": ("pass_uuid", "n_groups"),
                 "comparisons": ("pass_uuid", "n_comparisons")}


def _kind(annotation: Any) -> str:
    """How a dataclass field is stored: "json" (tuples and dicts), "bool" (0/1), "plain"."""
    a = "bool" if annotation is bool else str(annotation)
    if a.startswith(("tuple", "dict")):
        return "json"
    return "bool" if a == "bool" else "plain"


_PASS_TYPES = {f.name: f.type for f in dataclasses.fields(PassRecord)}
_PASS_KINDS = {n: _kind(t) for n, t in _PASS_TYPES.items()}
# which columns of each table hold JSON text / 0-1 booleans (for decoding and export)
_JSON_COLUMNS: dict[str, frozenset[str]] = {
    "passes": frozenset(n for n in _PASS_HEADER if _PASS_KINDS[n] == "json"),
    "real_cycles": frozenset(f.name for f in dataclasses.fields(RealCycle)
                             if _kind(f.type) == "json"),
    "comparisons": frozenset(f.name for f in dataclasses.fields(Comparison)
                             if _kind(f.type) == "json"),
}
_BOOL_COLUMNS = {"submitters": frozenset({"is_group"}), "passes": frozenset({"comparable"})}


def _q(name: str) -> str:
    """A quoted identifier (`group`, `end`, `time`, `key` are keywords somewhere)."""
    return '"' + name + '"'


def _json_default(value: Any) -> Any:
    if isinstance(value, (set, frozenset)):
        return sorted(value, key=str)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    return str(value)


def _dumps(value: Any) -> str:
    return json.dumps(value, default=_json_default)


def _encode(value: Any, kind: str) -> Any:
    if kind == "json":
        return None if value is None else _dumps(value)
    if kind == "bool":
        return None if value is None else int(bool(value))
    return value


def _decode(value: Any, annotation: Any) -> Any:
    """A stored value back to the field's Python shape (JSON lists become tuples)."""
    kind = _kind(annotation)
    if value is None:
        return None
    if kind == "json":
        v = json.loads(value) if isinstance(value, str) else value
        return tuple(v) if str(annotation).startswith("tuple") and isinstance(v, list) else v
    if kind == "bool":
        return bool(value)
    return value


class _Field(NamedTuple):
    """A record class's field as the ledger stores it."""
    name: str
    kind: str                   # `_kind`: "json", "bool" or "plain" (stored as it is)
    annotation: Any
    factory: bool               # made by a default factory


def _fields_of(cls: type) -> tuple[_Field, ...]:
    """Each field of a record class with how it is stored, worked out once per class (a
    pass writes thousands of match rows, a comparison reads them back)."""
    fields = _FIELDS.get(cls)
    if fields is None:
        fields = _FIELDS[cls] = tuple(
            _Field(f.name, _kind(f.type), f.type, f.default_factory is not dataclasses.MISSING)
            for f in dataclasses.fields(cls))
    return fields


_FIELDS: dict[type, tuple[_Field, ...]] = {}


def _all_plain(fields: tuple[_Field, ...]) -> bool:
    """Every field stored as it is, none made by a factory: records are rows as they are."""
    return all(f.kind == "plain" and not f.factory for f in fields)


def _row_of(obj: Any) -> dict[str, Any]:
    """A record dataclass as column -> stored value."""
    return {f.name: _encode(getattr(obj, f.name), f.kind) for f in _fields_of(type(obj))}


def _values_of(items: Sequence[Any]) -> tuple[list[str], list[tuple]]:
    """Records of one dataclass as (columns, each record's stored values): the values
    read at once where every field is stored as it is (a pass's thousands of matches)."""
    fields = _fields_of(type(items[0]))
    cols = [f.name for f in fields]
    if len(cols) > 1 and _all_plain(fields):
        return cols, list(map(operator.attrgetter(*cols), items))
    return cols, [tuple(_encode(getattr(x, f.name), f.kind) for f in fields) for x in items]


def _record_of(cls: type, row: dict[str, Any]) -> Any:
    """A record dataclass from a row (extra columns such as id and pass_uuid ignored; a
    NULL in a column a later schema added, for a field made by a factory, is the
    field's default)."""
    kw = {}
    for f in _fields_of(cls):
        if f.name not in row:
            continue
        v = row[f.name]
        if f.kind != "plain":
            v = _decode(v, f.annotation)
        if v is None and f.factory:
            continue
        kw[f.name] = v
    return cls(**kw)


def _header_of(row: dict[str, Any]) -> dict[str, Any]:
    """A `passes` row as the header dict the readers return: JSON columns decoded."""
    h = dict(row)
    for name in _JSON_COLUMNS["passes"]:
        h[name] = _decode(h.get(name), _PASS_TYPES[name])
    for name in ("shadow_timings", "pass_timings", "time_limits"):
        if h.get(name) is None:
            h[name] = {}
    if h.get("warnings") is None:
        h["warnings"] = ()
    if h.get("comparable") is not None:
        h["comparable"] = bool(h["comparable"])
    return h


def _encode_classes(classes: Mapping[str, int]) -> str:
    """{slot: class} as JSON {class: [slots]} (each class number written once)."""
    by: dict[int, list[str]] = {}
    for name, c in classes.items():
        by.setdefault(int(c), []).append(name)
    return json.dumps({str(c): names for c, names in sorted(by.items())})


def _decode_classes(text: str) -> dict[str, int]:
    return {name: int(c) for c, names in json.loads(text).items() for name in names}


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def _without_comparison(rec: PassRecord) -> PassRecord:
    """`rec` as recorded when another pass compared its earlier pass first: without the
    comparison, and without the compared real cycle's match counts it put on the
    submitters and groups; a warning says so."""
    return dataclasses.replace(
        rec, comparison=None,
        submitters=tuple(dataclasses.replace(o, real_matches=None) for o in rec.submitters),
        groups=tuple(dataclasses.replace(g, real_matches=None) for g in rec.groups),
        warnings=(*rec.warnings, f"pass {rec.comparison.shadow_pass}'s cycle was compared "
                                 "by another pass meanwhile (another shadow process on this "
                                 "ledger): not compared again"))


# ---------------------------------------------------------------- URLs

def _mask(url: str) -> str:
    """The URL with any password replaced by ***, for messages."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return url
    netloc = parts.netloc
    if parts.password is not None:
        netloc = netloc.replace(":" + parts.password + "@", ":***@", 1)
    query = re.sub(r"(?i)(password=)[^&]*", r"\1***", parts.query)
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


URL_FORMS = ("a file path, sqlite:///relative/path, sqlite:////absolute/path or "
             "postgresql://user@host/db")


def _bad_url(text: str) -> LedgerError:
    return LedgerError(_mask(text) if "@" in text else text,
                       f"unsupported ledger URL: use {URL_FORMS}")


def _meant_absolute(path: str) -> tuple[str, str] | None:
    """For sqlite:///PATH (PATH relative): (what is missing here, what exists from /)
    when /PATH was likely meant, as sqlite:///PATH meant here before the SQLAlchemy
    reading: PATH is not there relative to the current directory but /PATH is, or PATH's
    directory is not there but /PATH's is. None: nothing points that way."""
    rel, absolute = Path(path), Path("/" + path)
    if rel.exists():
        return None
    if absolute.exists():
        return str(rel), str(absolute)
    if not rel.parent.is_dir() and absolute.parent.is_dir():
        return str(rel.parent), str(absolute.parent)
    return None


def parse_url(url: str) -> tuple[str, str]:
    """("sqlite", path) or ("postgresql", url). SQLite URLs follow SQLAlchemy:
    sqlite:///relative/path, sqlite:////absolute/path; also sqlite:PATH. Anything else
    with a scheme, an empty URL or a SQLite URL naming no file is a LedgerError listing
    the accepted forms."""
    text = str(url).strip()
    if not text:
        raise LedgerError("ledger", f"empty ledger URL: use {URL_FORMS}")
    low = text.lower()
    if low.startswith(("postgresql://", "postgres://")):
        return "postgresql", text
    if low.startswith("sqlite:"):
        rest = text[len("sqlite:"):]
        if rest.startswith("//"):
            if not rest.startswith("///"):
                raise _bad_url(text)            # sqlite://host/x, sqlite:// (in memory)
            path = rest[3:]                     # sqlite:///rel -> rel, sqlite:////abs -> /abs
            meant = _meant_absolute(path) if path and not path.startswith("/") else None
            if meant is not None:
                raise LedgerError(text, f"sqlite:/// is a path relative to the current "
                                        f"directory ({os.getcwd()}), where {meant[0]} is "
                                        f"not, but {meant[1]} is: for the absolute path "
                                        f"write sqlite:////{path} (a new ledger here: "
                                        f"sqlite:{path})")
        else:
            path = rest                         # sqlite:rel/path (and sqlite:/abs/path)
        if not path or path.endswith("/"):
            raise _bad_url(text)                # sqlite:, sqlite:///, a directory
        return "sqlite", path
    if re.match(r"^[A-Za-z][A-Za-z0-9+.-]*://", text):
        raise _bad_url(text)
    return "sqlite", text


# ---------------------------------------------------------------- database backends

class _SQLite:
    """One sqlite3 connection in autocommit mode; transactions are explicit.

    A new ledger's directory is made with it, parents and all (a new state directory's
    default ledger, a --ledger path the admin chose); one that cannot be made is a
    LedgerError naming it. `read_only`: `mode=ro`, nothing made (`_connect_read_only`)."""

    id_type = "INTEGER PRIMARY KEY AUTOINCREMENT"

    def __init__(self, path: str, lock_timeout: float, create: bool, read_only: bool = False):
        self.source = path
        self.lock_timeout = lock_timeout
        self.read_only = read_only
        p = Path(path).expanduser()
        if p.is_dir():
            raise LedgerError(path, "is a directory, not a ledger file")
        if not p.exists():
            if not create:
                raise LedgerError(path, "no ledger here (the file does not exist)")
            try:
                p.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise LedgerError(path, f"cannot create the directory {p.parent}: "
                                        f"{exc.strerror or exc}") from exc
        self.errors: tuple[type[BaseException], ...] = (sqlite3.Error,)
        if read_only:
            self.conn = self._connect_read_only(p)
        else:
            try:
                # file:// + an absolute path: a path starting with // is no URI authority
                self.conn = sqlite3.connect(
                    f"file://{quote(str(p.absolute()))}?mode={'rwc' if create else 'rw'}",
                    uri=True, timeout=lock_timeout, isolation_level=None)
            except sqlite3.Error as exc:
                raise self.ledger_error(exc) from exc
        try:
            self.conn.execute(f"PRAGMA busy_timeout = {max(0, int(lock_timeout * 1000))}")
            if not read_only:
                self.conn.execute("PRAGMA journal_mode = WAL").fetchall()
                self.conn.execute("PRAGMA synchronous = FULL")
        except sqlite3.Error as exc:
            self.conn.close()
            raise self.ledger_error(exc) from exc

    def _connect_read_only(self, p: Path) -> sqlite3.Connection:
        """A connection that cannot write: `mode=ro`. SQLite reads a WAL ledger through its
        `-shm` file, which it creates beside the ledger when missing; where it cannot (a
        read-only file system, a directory this user may not write) and no write-ahead
        log is left (its last writer closed it: the file alone is the whole ledger), the
        file is read as immutable, as it then is: nobody can be writing it there."""
        uri = f"file://{quote(str(p.absolute()))}?mode=ro"
        try:
            return self._probe(sqlite3.connect(uri, uri=True, timeout=self.lock_timeout,
                                               isolation_level=None))
        except sqlite3.Error as exc:
            code = getattr(exc, "sqlite_errorcode", None)
            if not isinstance(code, int) or code & 0xFF not in (8, 14):   # READONLY, CANTOPEN
                raise self.ledger_error(exc) from exc
            wal = p.with_name(p.name + "-wal")
            if wal.exists() and wal.stat().st_size > 0:
                raise LedgerError(self.source, f"cannot be read here: its write-ahead log "
                                               f"{wal.name} holds writes not in the file yet, "
                                               f"and reading it needs {p.name}-shm created "
                                               "beside it, which this directory does not "
                                               "allow") from exc
        try:
            return self._probe(sqlite3.connect(uri + "&immutable=1", uri=True,
                                               timeout=self.lock_timeout, isolation_level=None))
        except sqlite3.Error as exc:
            raise self.ledger_error(exc) from exc

    @staticmethod
    def _probe(conn: sqlite3.Connection) -> sqlite3.Connection:
        """`conn` once a first read worked (SQLite opens the file, and a WAL's -shm,
        lazily); closed when it did not."""
        try:
            conn.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchall()
        except sqlite3.Error:
            conn.close()
            raise
        return conn

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Any:
        return self.conn.execute(sql, params)

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        self.conn.executemany(sql, rows)

    @contextmanager
    def write(self) -> Iterator[None]:
        """One write transaction, the write lock taken up front (waits lock_timeout)."""
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            yield
            self.conn.execute("COMMIT")
        except BaseException:
            if self.conn.in_transaction:
                try:
                    self.conn.execute("ROLLBACK")
                except sqlite3.Error:
                    pass                        # SQLite rolled back already
            raise

    @contextmanager
    def read(self) -> Iterator[None]:
        """Several reads on one snapshot of the ledger."""
        self.conn.execute("BEGIN")
        try:
            yield
        finally:
            if self.conn.in_transaction:
                self.conn.execute("ROLLBACK")

    def lock_for_migration(self) -> None:
        pass                                    # BEGIN IMMEDIATE is the lock

    def lock_for_comparison(self) -> None:
        pass                                    # BEGIN IMMEDIATE is the lock

    def has_table(self, name: str) -> bool:
        return bool(self.conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND "
                                      "name = ?", (name,)).fetchall())

    def foreign_tables(self) -> list[str]:
        return [r[0] for r in self.conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")]

    def ledger_error(self, exc: BaseException, action: str | None = None) -> LedgerError:
        code = getattr(exc, "sqlite_errorcode", None)
        base = code & 0xFF if isinstance(code, int) else None
        text = str(exc)
        low = text.lower()
        transient = False
        if base in (5, 6) or "database is locked" in low or "database table is locked" in low:
            msg = f"is locked by another process (waited {self.lock_timeout:g} s)"
            transient = True
        elif base == 13 or "is full" in low:
            msg = "is full (no space left on the disk, or the database size limit reached)"
        elif base == 26 or "not a database" in low:
            msg = "is not a ledger database (corrupt, or not an SQLite file)"
        elif base == 11 or "malformed" in low or "corrupt" in low:
            msg = f"is corrupt ({text})"
        elif base == 8 or "readonly" in low:
            msg = "cannot be written (read-only file, directory or file system)"
        elif base == 14 or "unable to open" in low:
            msg = "cannot be opened (no such directory, or no permission to read or create it)"
        elif base in (3, 23):
            msg = f"permission denied ({text})"
        elif base == 10:
            msg = f"I/O error ({text})"
        else:
            msg = f"database error: {text}"
        return LedgerError(self.source, _one_line(msg + (f"; {action}" if action else "")),
                           transient=transient)

    def close(self) -> None:
        self.conn.close()

    def cannot_write(self) -> str | None:
        """Why this ledger cannot be written (None: it can): SQLite opens a file it may
        not write read-only without a word, and fails only at the first write."""
        p = Path(self.source).expanduser()
        for what, where in (("the file", p), ("its directory", p.parent)):
            if not os.access(where, os.W_OK):
                return f"{what} cannot be written (read-only file system or permissions)"
        return None


class _Postgres:
    """One psycopg 3 connection in autocommit mode; transactions are explicit."""

    id_type = "BIGSERIAL PRIMARY KEY"

    def __init__(self, url: str, lock_timeout: float, create: bool, read_only: bool = False):
        self.source = _mask(url)
        self.lock_timeout = lock_timeout
        self.read_only = read_only
        try:
            import psycopg
        except ImportError as exc:
            raise LedgerError(self.source, "a PostgreSQL ledger needs psycopg: "
                                           "pip install 'negotiator-ext[postgres]'") from exc
        self.psycopg = psycopg
        self.errors = (psycopg.Error,)
        kwargs: dict[str, Any] = {"autocommit": True}
        if "connect_timeout" not in url:
            kwargs["connect_timeout"] = 10
        try:
            self.conn = psycopg.connect(url, **kwargs)
        except psycopg.Error as exc:
            raise self.ledger_error(exc) from exc
        try:
            # 0 means "wait for ever" to PostgreSQL; 1 ms is the nearest to "do not wait"
            self.conn.execute("SELECT set_config('lock_timeout', %s, false)",
                              (f"{max(1, int(lock_timeout * 1000))}ms",))
            if read_only:
                self.conn.execute("SELECT set_config('default_transaction_read_only', 'on', "
                                  "false)")
        except psycopg.Error as exc:
            self.conn.close()
            raise self.ledger_error(exc) from exc

    @staticmethod
    def _sql(sql: str) -> str:
        return sql.replace("?", "%s")

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Any:
        return self.conn.execute(self._sql(sql), tuple(params))

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        with self.conn.cursor() as cur:
            cur.executemany(self._sql(sql), rows)

    @contextmanager
    def write(self) -> Iterator[None]:
        with self.conn.transaction():
            yield

    @contextmanager
    def read(self) -> Iterator[None]:
        with self.conn.transaction():
            self.conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
            yield

    def lock_for_migration(self) -> None:
        self.conn.execute("SELECT pg_advisory_xact_lock(%s)", (_PG_MIGRATION_LOCK,))

    def cannot_write(self) -> str | None:
        return None                             # the server says so at the first write

    def lock_for_comparison(self) -> None:
        # READ COMMITTED: the statements after the lock see what its last holder committed
        self.conn.execute("SELECT pg_advisory_xact_lock(%s)", (_PG_COMPARISON_LOCK,))

    def has_table(self, name: str) -> bool:
        row = self.conn.execute("SELECT to_regclass(%s)", (name,)).fetchone()
        return row is not None and row[0] is not None

    def foreign_tables(self) -> list[str]:
        return []                               # a database is shared with others: fine

    def ledger_error(self, exc: BaseException, action: str | None = None) -> LedgerError:
        state = getattr(exc, "sqlstate", None) or ""
        text = _one_line(str(exc))
        # transient: a lock or a conflict, a connection lost or refused, a server
        # starting or shutting down, too many connections
        transient = (state in ("55P03", "40P01", "40001", "53300", "57P01", "57P02", "57P03")
                     or state.startswith("08"))
        if state in ("55P03", "40P01"):
            msg = f"is locked by another process (waited {self.lock_timeout:g} s)"
        elif state == "53100" or state.startswith("53"):
            msg = f"is full (the database server is out of space or resources: {text})"
        elif state in ("XX001", "XX002"):
            msg = f"is corrupt ({text})"
        elif state == "42501":
            msg = f"permission denied ({text})"
        elif state == "25006":
            msg = f"cannot be written (read-only transaction: {text})"
        elif not state and isinstance(exc, self.psycopg.OperationalError):
            msg = f"cannot connect ({text})"
            # a server down or unreachable, not refused credentials or a missing database
            transient = not re.search(r"authentication|pg_hba|password|does not exist|"
                                      r"permission denied|ssl", text, re.I)
        else:
            msg = f"database error: {text}"
        return LedgerError(self.source, _one_line(msg + (f"; {action}" if action else "")),
                           transient=transient)

    def close(self) -> None:
        self.conn.close()


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
                  captured_by: float | None = None) -> dict | None:
        """The newest recorded pass (of `pool`, with `status`, comparable or not, with its
        capture over by `captured_by`: started_at + capture_duration <= captured_by), or
        None."""
        where, params = self._where(pool=pool, status=status, comparable=comparable)
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
               until: float | None = None, last: int | None = None) -> list[dict]:
        """Pass headers with since <= started_at < until (only the newest `last` of them),
        in the order recorded."""
        where, params = self._where(pool=pool, since=since, until=until)
        if last is not None:
            with self._guard():
                rows = self._query(f"SELECT * FROM passes{where} ORDER BY id DESC LIMIT ?",
                                   (*params, int(last)))
            return [_header_of(r) for r in reversed(rows)]
        with self._guard():
            return [_header_of(r) for r in
                    self._query(f"SELECT * FROM passes{where} ORDER BY id", params)]

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

    def comparisons(self, pool: str | None = None,
                    since: float | None = None) -> list[tuple[dict, Comparison]]:
        """(header of the recording pass, its comparison), in the order recorded."""
        where, params = self._where(pool=pool, since=since)
        with self._guard(), self._db.read():
            heads = self._query(f"SELECT * FROM passes{where} ORDER BY id", params)
            comps = self._query(f"SELECT * FROM comparisons WHERE pass_uuid IN "
                                f"(SELECT uuid FROM passes{where})", params)
        by_pass = {c["pass_uuid"]: _record_of(Comparison, c) for c in comps}
        return [(_header_of(h), by_pass[h["uuid"]]) for h in heads if h["uuid"] in by_pass]

    def window(self, since: float | None, pool: str | None = None, complete_only: bool = True,
               until: float | None = None
               ) -> list[tuple[dict, list[SubmitterObs], list[GroupObs]]]:
        """The passes that started in [since, until) (complete ones only, by default),
        oldest first, each with its submitters and groups: what recommendations and the
        audit read."""
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
                              slot_classes=self.slot_classes(uuid))

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
        """The start time of the newest real cycle recorded for `pool`, or None."""
        with self._guard():
            rows = self._db.execute(f"SELECT MAX({_q('time')}) FROM real_cycles WHERE pool = ?",
                                    (pool,)).fetchall()
        return int(rows[0][0]) if rows and rows[0][0] is not None else None

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
        for h in heads:
            have = counts.get(h["uuid"], {})
            for count in _COUNTS:
                if have.get(count, 0) != h[count]:
                    problems.append(f"pass {h['uuid']}: {count} is {h[count]} but "
                                    f"{have.get(count, 0)} rows are recorded")
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
        """Delete the passes that started before `older_than` with all their rows, in one
        transaction; the number of passes deleted. Adjustments are never deleted."""
        sub = "(SELECT uuid FROM passes WHERE started_at < ?)"
        with self._guard("nothing was pruned"), self._db.write():
            for table, (key, _count) in _CHILD_TABLES.items():
                self._db.execute(f"DELETE FROM {_q(table)} WHERE {key} IN {sub}", (older_than,))
            self._db.execute(f"DELETE FROM slot_classes WHERE pass_uuid IN {sub}", (older_than,))
            cur = self._db.execute("DELETE FROM passes WHERE started_at < ?", (older_than,))
            return int(cur.rowcount or 0)

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
                f.write(json.dumps(d) + "\n")

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
