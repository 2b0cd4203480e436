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
import statistics
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator, Mapping, NamedTuple, Sequence
from urllib.parse import quote, urlsplit, urlunsplit

from ..core.figures import without_sentinels
from ..core.records import (Adjustment, Comparison, GroupObs, MatchEntry, PassRecord,
                            RealCycle, Standing, SubmitterObs)
from ..errors import InputError
from . import ledger_digests


class LedgerError(InputError):
    """The ledger cannot be opened, read or written; `source` is the ledger's URL or path
    (a PostgreSQL password masked).

    `transient`: the same operation may well succeed later without anybody acting (the
    ledger locked by another process beyond the lock timeout; a PostgreSQL server that
    cannot be reached or is out of disk; the file system holding an SQLite ledger full:
    other files may be removed, a log rotated). False for lasting conditions: the ledger
    cannot be opened or created, is read-only, corrupt, not a ledger, of a newer schema,
    at its size limit (max_page_count), a bad URL."""

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
    # 9: hourly summaries of the passes older than the detail window (`summarise`): one
    # `hours` row per (pool, hour) with its submitters and groups (the columns of
    # SubmitterObs and GroupObs, aggregated as _SUBMITTER_AGG and _GROUP_AGG say, and in
    # how many of the hour's complete passes each was recorded)
    (9, (
        """CREATE TABLE hours (
            id {id},
            pool TEXT NOT NULL,
            hour BIGINT NOT NULL,
            passes BIGINT NOT NULL,
            complete BIGINT NOT NULL,
            partial BIGINT NOT NULL,
            failed BIGINT NOT NULL,
            seconds DOUBLE PRECISION NOT NULL,
            first_started DOUBLE PRECISION,
            last_started DOUBLE PRECISION,
            pool_weight DOUBLE PRECISION,
            shadow_duration DOUBLE PRECISION,
            capture_duration DOUBLE PRECISION,
            shadow_matches BIGINT NOT NULL DEFAULT 0,
            real_matches BIGINT NOT NULL DEFAULT 0,
            newest_real_cycle BIGINT,
            reasons TEXT,
            real_cycles TEXT,
            comparisons TEXT,
            n_submitters BIGINT NOT NULL DEFAULT 0,
            n_groups BIGINT NOT NULL DEFAULT 0,
            UNIQUE (pool, hour))""",
        """CREATE TABLE hour_submitters (
            id {id},
            hour_id BIGINT NOT NULL,
            passes BIGINT NOT NULL,
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
            idle_jobs DOUBLE PRECISION,
            running_jobs DOUBLE PRECISION,
            shadow_eup DOUBLE PRECISION,
            shadow_share DOUBLE PRECISION,
            shadow_limit DOUBLE PRECISION,
            shadow_matches BIGINT,
            shadow_match_weight DOUBLE PRECISION,
            real_matches BIGINT,
            predicted_rup DOUBLE PRECISION,
            shadow_submitter_limit DOUBLE PRECISION,
            drift DOUBLE PRECISION)""",
        """CREATE TABLE hour_groups (
            id {id},
            hour_id BIGINT NOT NULL,
            passes BIGINT NOT NULL,
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
        "CREATE INDEX hour_submitters_hour ON hour_submitters (hour_id)",
        "CREATE INDEX hour_groups_hour ON hour_groups (hour_id)",
    )),
    # 10: why a comparison disagrees (core.disagreement) and whether the compared capture
    # was aligned with the real cycle's start by the NegotiatorLog (issue 32)
    (10, (
        "ALTER TABLE passes ADD COLUMN aligned_cycle BIGINT",
        "ALTER TABLE comparisons ADD COLUMN unexplained_agreement DOUBLE PRECISION",
        "ALTER TABLE comparisons ADD COLUMN disagreements TEXT",
        "ALTER TABLE comparisons ADD COLUMN changes TEXT",
        "ALTER TABLE comparisons ADD COLUMN aligned INTEGER",
        # the digests of the newest comparable passes' snapshots (adapters/ledger_digests.py)
        """CREATE TABLE pool_digests (
            pass_uuid TEXT PRIMARY KEY,
            pool TEXT NOT NULL,
            digest TEXT NOT NULL)""",
    )),
]
SCHEMA_VERSION = MIGRATIONS[-1][0]

# the tables `export` writes (all but ledger_meta), in dependency order
TABLES = ("passes", "real_cycles", "shadow_matches", "real_matches", "submitters", "groups",
          "comparisons", "adjustments", "hours", "hour_submitters", "hour_groups")

EXPORT_FORMATS = ("csv", "jsonl", "parquet")

_PG_MIGRATION_LOCK = 0x6E6567_6F7478  # pg_advisory_xact_lock key: one migrator at a time
_PG_COMPARISON_LOCK = 0x6E6567_636D70  # and one writer of a comparison at a time
_PG_SUMMARY_LOCK = 0x6E6567_68726C    # and one summariser of an hour at a time

# PassRecord fields stored in their own tables, not in the header row
_PASS_CHILDREN = ("real_cycles", "shadow_matches", "real_matches", "submitters", "groups",
                  "comparison", "slot_classes", "digest")
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
    "hours": frozenset({"reasons", "real_cycles", "comparisons"}),
}
_BOOL_COLUMNS = {"submitters": frozenset({"is_group"}), "passes": frozenset({"comparable"}),
                 "comparisons": frozenset({"aligned"}),
                 "hour_submitters": frozenset({"is_group"})}


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
    defaulted: bool = False     # ... or with a default other than None


def _fields_of(cls: type) -> tuple[_Field, ...]:
    """Each field of a record class with how it is stored, worked out once per class (a
    pass writes thousands of match rows, a comparison reads them back)."""
    fields = _FIELDS.get(cls)
    if fields is None:
        fields = _FIELDS[cls] = tuple(
            _Field(f.name, _kind(f.type), f.type, f.default_factory is not dataclasses.MISSING,
                   f.default_factory is not dataclasses.MISSING
                   or f.default not in (dataclasses.MISSING, None))
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
    NULL in a column a later schema added, for a field with a default other than None,
    is the field's default)."""
    kw = {}
    for f in _fields_of(cls):
        if f.name not in row:
            continue
        v = row[f.name]
        if f.kind != "plain":
            v = _decode(v, f.annotation)
        if v is None and f.defaulted:
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


# ---------------------------------------------------------------- hourly summaries

HOUR = 3600

# How each SubmitterObs / GroupObs field is summarised over one hour's complete passes,
# each pass weighing the time it stands for (`_intervals`, as the audit weighs a pass):
#   "mean"   the hour's time-weighted mean, a pass that did not record the principal (or
#            the figure) counting as 0: what it had on average over the hour (usage,
#            jobs, weights, what our cycle allocated);
#   "level"  the time-weighted mean over the passes that recorded it (priorities,
#            factors, quotas, shares, limits, drift);
#   "sum"    the hour's total (match counts);
#   "last"   the newest pass's value (group, floor, ceiling, leases, usage times).
# `hour_submitters` and `hour_groups` (schema step 9) have one column for each.
_SUBMITTER_AGG = {
    "group": "last", "is_group": "last", "factor": "level", "policy_factor": "level",
    "factor_lease_expires": "last", "floor": "last", "floor_lease_expires": "last",
    "ceiling": "last", "ceiling_lease_expires": "last", "real_rup": "level",
    "real_eup": "level", "real_usage": "mean", "resources_used": "mean",
    "hier_usage": "mean", "real_share": "level", "real_limit": "level",
    "last_usage_time": "last", "begin_usage_time": "last", "claimed_weight": "mean",
    "idle_jobs": "mean", "running_jobs": "mean", "shadow_eup": "level",
    "shadow_share": "level", "shadow_limit": "level", "shadow_matches": "sum",
    "shadow_match_weight": "mean", "real_matches": "sum", "predicted_rup": "level",
    "shadow_submitter_limit": "level", "drift": "level"}
_GROUP_AGG = {
    "real_quota": "level", "config_quota": "level", "real_usage": "mean",
    "real_requested": "mean", "shadow_quota": "level", "shadow_allocated": "mean",
    "shadow_usage_after": "mean", "shadow_matches": "sum", "real_matches": "sum"}
# the comparison figures an hour keeps as means (a [sum, count] pair each)
_COMPARISON_MEANS = ("real_in_shadow", "shadow_in_real", "count_agreement",
                     "equivalent_agreement", "real_duration", "unexplained_agreement")
_COMPARISON_SUMS = ("real_matches", "shadow_matches", "agreed", "agreed_equivalent",
                    "real_cycles_between")
_REASONS_KEPT = 10      # the most frequent reasons of an hour's partial and failed passes


def hour_key(pool: str, hour: int) -> str:
    """The key of an hourly summary where readers expect a pass uuid: '<epoch>h-<pool>'
    (its first 12 characters tell hours apart)."""
    return f"{int(hour)}h-{pool}"


def _hour_of(t: float) -> int:
    return int(t // HOUR) * HOUR


def _pass_time(row: Mapping[str, Any]) -> float:
    """A pass's time as the audit places it: its snapshot's, else its start."""
    t = row.get("snapshot_time")
    return float(t if t is not None else row["started_at"])


def _intervals(times: Sequence[float], after: float | None, median: float) -> list[float]:
    """How long each of an hour's complete passes (`times`, ascending) stands for, as the
    audit weighs a pass (`core.audit.pass_table`): until the next complete pass (`after`:
    the first one past the hour, None when there is none; then the median), at most
    three medians (an outage is not time spent in the state of the pass before it)."""
    out = []
    for t, n in zip(times, [*times[1:], after]):
        gap = median if n is None else n - t
        out.append(min(max(gap, 0.0), 3 * median))
    return out


class _Obs(NamedTuple):
    """One principal's row in one pass (or in an hour summarised before), for
    `_aggregate`: `weight` for "mean" figures, `level_weight` for "level" ones."""
    row: Mapping[str, Any]
    weight: float
    level_weight: float
    time: float
    passes: int


def _aggregate(obs: Sequence[_Obs], spec: Mapping[str, str], total: float) -> dict[str, Any]:
    """One principal's hour row from its observations (`_SUBMITTER_AGG` / `_GROUP_AGG`);
    `total`: the weight of the whole hour (the "mean" figures' denominator)."""
    out: dict[str, Any] = {}
    for col, how in spec.items():
        known = [(o, o.row[col]) for o in obs if o.row.get(col) is not None]
        if not known:
            out[col] = None
        elif how == "last":
            out[col] = max(enumerate(known), key=lambda x: (x[1][0].time, x[0]))[1][1]
        elif how == "sum":
            out[col] = sum(v for _, v in known)
        elif how == "mean":
            out[col] = (sum(float(v) * o.weight for o, v in known) / total if total > 0
                        else sum(float(v) for _, v in known) / len(known))
        else:
            w = sum(o.level_weight for o, _ in known)
            out[col] = (sum(float(v) * o.level_weight for o, v in known) / w if w > 0
                        else sum(float(v) for _, v in known) / len(known))
    out["passes"] = sum(o.passes for o in obs)
    return out


def _merge_counts(a: Mapping[str, Any] | None, b: Mapping[str, Any]) -> dict[str, Any]:
    """Two of an hour's JSON aggregates (real cycles, comparisons, reasons) as one:
    numbers added, [sum, count] pairs added, "longest"/"max_abs_drift" the larger, dicts
    merged the same way."""
    out = dict(a or {})
    for k, v in b.items():
        old = out.get(k)
        if old is None:
            out[k] = v
        elif k in ("longest", "max_abs_drift"):
            out[k] = max(old, v)
        elif isinstance(v, dict):
            out[k] = _merge_counts(old, v)
        elif isinstance(v, list):
            out[k] = [x + y for x, y in zip(old, v)]
        else:
            out[k] = old + v
    return out


def _cycles_summary(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """What an hour keeps of the real cycles its passes recorded."""
    if not rows:
        return {}
    durations = [float(r["duration"]) for r in rows if r.get("duration") is not None]
    out_of_time = sum(1 for r in rows
                      if json.loads(r.get("submitters_out_of_time") or "[]")
                      or json.loads(r.get("schedds_out_of_time") or "[]"))
    return {"count": len(rows),
            "matches": sum(int(r["matches"]) for r in rows if r.get("matches") is not None),
            "duration": [sum(durations), len(durations)],
            "longest": max(durations, default=0.0), "out_of_time": out_of_time}


def _comparisons_summary(comps: Sequence[Comparison]) -> dict[str, Any]:
    """What an hour keeps of the comparisons its passes recorded: how many, the sums of
    the match counts, each agreement figure's [sum, count], the largest drift, the
    sources and how many compared real cycles ran out of time."""
    if not comps:
        return {}
    out: dict[str, Any] = {
        "count": len(comps),
        "compared": sum(1 for c in comps if c.real_cycle_time is not None),
        "newest_real_cycle": max((c.real_cycle_time for c in comps
                                  if c.real_cycle_time is not None), default=None),
        "sums": {k: sum(getattr(c, k) or 0 for c in comps) for k in _COMPARISON_SUMS},
        "means": {k: [sum(getattr(c, k) for c in comps if getattr(c, k) is not None),
                      sum(1 for c in comps if getattr(c, k) is not None)]
                  for k in _COMPARISON_MEANS},
        "sources": {},
        "aligned": sum(1 for c in comps if c.aligned),
        "changed": sum(1 for c in comps if c.changes),
        "out_of_time": sum(1 for c in comps
                           if ((c.time_limits or {}).get("real") or {}).get("schedds")
                           or ((c.time_limits or {}).get("real") or {}).get("submitters"))}
    drifts = [c.max_abs_drift for c in comps if c.max_abs_drift is not None]
    if drifts:
        out["max_abs_drift"] = max(drifts)
    for c in comps:
        out["sources"][c.source] = out["sources"].get(c.source, 0) + 1
    if out["newest_real_cycle"] is None:
        del out["newest_real_cycle"]
    return out


def _hour_comparison(key: str, summary: Mapping[str, Any]) -> Comparison | None:
    """An hour's comparisons as one Comparison (`shadow_pass` the hour's key): the match
    counts summed, each agreement figure the mean over the comparisons that had it,
    source "hour"; None when its passes compared nothing."""
    if not summary or not summary.get("count"):
        return None
    sums, means = summary.get("sums", {}), summary.get("means", {})

    def mean(k: str) -> float | None:
        s, n = means.get(k, (0, 0))
        return s / n if n else None

    compared = summary.get("compared", 0)
    return Comparison(
        shadow_pass=key, real_cycle_time=summary.get("newest_real_cycle"),
        real_cycles_between=int(sums.get("real_cycles_between", 0)),
        real_matches=int(sums.get("real_matches", 0)) if compared else None,
        shadow_matches=int(sums.get("shadow_matches", 0)),
        agreed=int(sums.get("agreed", 0)) if means.get("real_in_shadow", (0, 0))[1] else None,
        real_in_shadow=mean("real_in_shadow"), shadow_in_real=mean("shadow_in_real"),
        count_agreement=mean("count_agreement"), source="hour",
        max_abs_drift=summary.get("max_abs_drift"), real_duration=mean("real_duration"),
        notes=(f"{summary['count']} comparison(s) of the hour, {compared} with a real cycle; "
               "each figure the mean over those that had it",),
        agreed_equivalent=(int(sums.get("agreed_equivalent", 0))
                           if means.get("equivalent_agreement", (0, 0))[1] else None),
        equivalent_agreement=mean("equivalent_agreement"),
        unexplained_agreement=mean("unexplained_agreement"),
        aligned=bool(summary.get("aligned")))


def _reasons_of(heads: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    out: dict[str, int] = {}
    for h in heads:
        if h.get("status") != "complete" and h.get("reason"):
            r = _one_line(h["reason"])[:200]
            out[r] = out.get(r, 0) + 1
    return out


def _top_reasons(reasons: Mapping[str, int]) -> dict[str, int]:
    """The _REASONS_KEPT most frequent reasons; the rest counted under "(other reasons)"."""
    ranked = sorted(reasons.items(), key=lambda kv: (-kv[1], kv[0]))
    out = dict(ranked[:_REASONS_KEPT])
    rest = sum(n for _, n in ranked[_REASONS_KEPT:])
    if rest:
        out["(other reasons)"] = out.get("(other reasons)", 0) + rest
    return out


def _hour_header(row: Mapping[str, Any], sub_passes: Mapping[str, int] | None = None,
                 group_passes: Mapping[str, int] | None = None) -> dict[str, Any]:
    """An `hours` row as a pass header (what `passes` and `window` give), standing for the
    hour's passes: `uuid` is `hour_key`, `started_at` the hour's start, `status`
    "complete" when one of its passes was (else "partial", else "failed"), the match
    counts the hour's totals; `summary` says what it stands for (passes by status, the
    seconds its complete passes stand for, their first and last start, the reasons,
    what the real cycles and comparisons were, and in how many complete passes each
    submitter and group was recorded)."""
    decode = (lambda v: json.loads(v) if isinstance(v, str) else (v or {}))
    cycles, comps = decode(row.get("real_cycles")), decode(row.get("comparisons"))
    reasons = decode(row.get("reasons"))
    status = ("complete" if row["complete"] else "partial" if row["partial"] else "failed")
    hour = int(row["hour"])
    reason = None
    if reasons:
        top, n = max(reasons.items(), key=lambda kv: (kv[1], kv[0]))
        reason = (f"{row['passes'] - row['complete']} of {row['passes']} passes not "
                  f"complete; most often ({n}): {top}")
    return {
        "id": None, "uuid": hour_key(row["pool"], hour), "pool": row["pool"],
        "started_at": float(hour), "finished_at": float(hour + HOUR), "snapshot_time": None,
        "status": status, "reason": reason, "real_cycle_time": row.get("newest_real_cycle"),
        "real_accountant_time": None, "shadow_duration": row.get("shadow_duration"),
        "capture_duration": row.get("capture_duration"), "shadow_timings": {},
        "pool_weight": row.get("pool_weight"), "snapshot_dir": None, "warnings": (),
        "n_real_cycles": int(cycles.get("count", 0)),
        "n_shadow_matches": int(row["shadow_matches"]),
        "n_real_matches": int(row["real_matches"]), "n_submitters": int(row["n_submitters"]),
        "n_groups": int(row["n_groups"]), "n_comparisons": int(comps.get("count", 0)),
        "comparable": False, "pass_timings": {}, "time_limits": {},
        "summary": {"hour": hour, "passes": int(row["passes"]),
                    "complete": int(row["complete"]), "partial": int(row["partial"]),
                    "failed": int(row["failed"]), "seconds": float(row["seconds"]),
                    # the first and the last start of the hour's complete passes
                    "first_started": row.get("first_started"),
                    "last_started": row.get("last_started"), "reasons": reasons,
                    "real_cycles": cycles, "comparisons": comps,
                    "submitter_passes": dict(sub_passes or {}),
                    "group_passes": dict(group_passes or {})}}


def _in_time(hours: Sequence[Any], passes: Sequence[Any], key=lambda h: h) -> list[Any]:
    """Summarised hours and passes (each list in its own order) as one list in time: an
    hour before the passes that started in it or after it (a summary is of older passes
    than those kept, but a clock that went back can put a pass before one)."""
    out: list[Any] = []
    i = 0
    for p in passes:                    # the passes keep their order
        t = float(key(p)["started_at"])
        while i < len(hours) and float(key(hours[i])["started_at"]) <= t:
            out.append(hours[i])
            i += 1
        out.append(p)
    return out + list(hours[i:])


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

# a SQLite write that fails with this little space left on its file system: the file
# system is full (bytes)
FULL_BELOW = 2**20


class _SQLite:
    """One sqlite3 connection in autocommit mode; transactions are explicit.

    A new ledger's directory is made with it, parents and all (a new state directory's
    default ledger, a --ledger path the admin chose); one that cannot be made is a
    LedgerError naming it. `read_only`: `mode=ro`, nothing made (`_connect_read_only`)."""

    id_type = "INTEGER PRIMARY KEY AUTOINCREMENT"
    WAL_LIMIT = 64 * 2**20

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
                if not self.conn.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchall():
                    # a new ledger: free pages can be given back a step at a time
                    # (`reclaim`); only possible before its first table
                    self.conn.execute("PRAGMA auto_vacuum = INCREMENTAL")
                self.conn.execute("PRAGMA journal_mode = WAL").fetchall()
                self.conn.execute("PRAGMA synchronous = FULL")
                # the write-ahead log is cut back to this after a checkpoint (a summarised
                # hour's deletions would otherwise leave it at their size)
                self.conn.execute(f"PRAGMA journal_size_limit = {self.WAL_LIMIT}").fetchall()
        except sqlite3.Error as exc:
            self.conn.close()
            raise self.ledger_error(exc) from exc

    def _connect_read_only(self, p: Path) -> sqlite3.Connection:
        """A connection that cannot write. Where this user may write the file and its
        directory: `mode=rw` with `PRAGMA query_only`, so that, the last to close, it
        removes the `-wal` and `-shm` files reading made beside the ledger (a `mode=ro`
        connection leaves them: `ledger show` after a replay left two files). Else
        `mode=ro`: SQLite reads a WAL ledger through its `-shm` file, which it creates
        beside the ledger when missing; where it cannot (a read-only file system, a
        directory this user may not write) and no write-ahead log is left (its last
        writer closed it: the file alone is the whole ledger), the file is read as
        immutable, as it then is: nobody can be writing it there."""
        if p.is_file() and os.access(p, os.W_OK) and os.access(p.parent, os.W_OK):
            conn = None
            try:
                conn = sqlite3.connect(f"file://{quote(str(p.absolute()))}?mode=rw", uri=True,
                                       timeout=self.lock_timeout, isolation_level=None)
                conn.execute("PRAGMA query_only = 1").fetchall()
                return self._probe(conn)
            except sqlite3.Error:
                if conn is not None:
                    conn.close()        # (_probe closed it already: closing again is harmless)
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

    def lock_for_summary(self) -> None:
        pass                                    # BEGIN IMMEDIATE is the lock

    def has_table(self, name: str) -> bool:
        return bool(self.conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND "
                                      "name = ?", (name,)).fetchall())

    def foreign_tables(self) -> list[str]:
        return [r[0] for r in self.conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")]

    def _pragma(self, name: str) -> int:
        return int(self.conn.execute(f"PRAGMA {name}").fetchone()[0])

    def space(self) -> dict[str, Any]:
        p = Path(self.source).expanduser()
        wal = p.with_name(p.name + "-wal")
        return {"bytes": p.stat().st_size, "wal_bytes": wal.stat().st_size if wal.exists() else 0,
                "page_size": self._pragma("page_size"),
                "pages": self._pragma("page_count"), "free_pages": self._pragma("freelist_count"),
                "auto_vacuum": ("none", "full", "incremental")[self._pragma("auto_vacuum")]}

    def reclaim(self, max_pages: int) -> dict[str, Any]:
        free = self._pragma("freelist_count")
        if self._pragma("auto_vacuum") != 2:
            return {"shrinks": False, "free_pages": free}
        pages = min(free, max(0, int(max_pages)))
        if pages:
            # executescript: sqlite3's execute steps this pragma once (one page)
            self.conn.executescript(f"PRAGMA incremental_vacuum({pages});")
        self.conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
        return {"shrinks": True, "pages_freed": free - self._pragma("freelist_count"),
                "free_pages": self._pragma("freelist_count")}

    def vacuum(self) -> dict[str, Any]:
        before = self.space()
        self.conn.execute("PRAGMA auto_vacuum = INCREMENTAL")
        self.conn.execute("VACUUM")
        self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
        return {"before": before["bytes"], "after": self.space()["bytes"]}

    def ledger_error(self, exc: BaseException, action: str | None = None) -> LedgerError:
        code = getattr(exc, "sqlite_errorcode", None)
        base = code & 0xFF if isinstance(code, int) else None
        text = str(exc)
        low = text.lower()
        transient = False
        free = self._free_bytes() if base in (10, 13) or "is full" in low else None
        if base in (5, 6) or "database is locked" in low or "database table is locked" in low:
            msg = f"is locked by another process (waited {self.lock_timeout:g} s)"
            transient = True
        elif free is not None and free < FULL_BELOW:
            # a full file system: SQLITE_FULL from a write, or an I/O error from the
            # write-ahead log's -shm file, which cannot grow (SQLITE_IOERR_SHMSIZE); it
            # may well have room again later (the loop tries again)
            msg = (f"is full: no space left on the file system that holds it "
                   f"({free // 1024} KiB free)")
            transient = True
        elif base == 13 or "is full" in low:
            msg = "is full (the database size limit reached, or no space left on the disk)"
        elif base == 26 or "not a database" in low:
            msg = "is not a ledger database (corrupt, or not an SQLite file)"
        elif base == 11 or "malformed" in low or "corrupt" in low:
            msg = f"is corrupt ({text})"
        elif base == 8 or "readonly" in low:
            msg = "cannot be written (read-only file, directory or file system)"
        elif base == 14 or "unable to open" in low:
            # a ledger there whose file or directory cannot be written (a read-only file
            # system: SQLite cannot make its write-ahead log's files beside it)
            why = (self.cannot_write() if not self.read_only
                   and Path(self.source).expanduser().is_file() else None)
            msg = (f"cannot be opened for writing: {why}" if why else
                   "cannot be opened (no such directory, or no permission to read or create it)")
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

    def _free_bytes(self) -> int | None:
        """The space left on the file system holding the ledger (None: not known)."""
        try:
            st = os.statvfs(Path(self.source).expanduser().absolute().parent)
        except OSError:
            return None
        return st.f_bavail * st.f_frsize

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

    def lock_for_summary(self) -> None:
        # two loops on one ledger: the second finds the hour summarised by the first
        self.conn.execute("SELECT pg_advisory_xact_lock(%s)", (_PG_SUMMARY_LOCK,))

    def has_table(self, name: str) -> bool:
        row = self.conn.execute("SELECT to_regclass(%s)", (name,)).fetchone()
        return row is not None and row[0] is not None

    def foreign_tables(self) -> list[str]:
        return []                               # a database is shared with others: fine

    def _tables(self) -> list[str]:
        """The ledger's tables that exist (in the search path's schema)."""
        return [t for t in (*TABLES, "slot_classes", "pool_digests") if self.has_table(t)]

    def space(self) -> dict[str, Any]:
        tables = {t: int(self.conn.execute("SELECT pg_total_relation_size(to_regclass(%s))",
                                           (_q(t),)).fetchone()[0]) for t in self._tables()}
        return {"bytes": sum(tables.values()), "tables": tables}

    def reclaim(self, max_pages: int) -> dict[str, Any]:
        # outside any transaction (autocommit): VACUUM cannot run in one
        self.conn.execute("VACUUM " + ", ".join(_q(t) for t in self._tables()))
        return {"shrinks": True}

    def vacuum(self) -> dict[str, Any]:
        before = self.space()["bytes"]
        self.conn.execute("VACUUM FULL " + ", ".join(_q(t) for t in self._tables()))
        return {"before": before, "after": self.space()["bytes"]}

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
            # a full disk or memory may have room again later: tried again
            transient = transient or state in ("53100", "53200")
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
