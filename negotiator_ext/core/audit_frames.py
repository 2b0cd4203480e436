"""The fairness audit's input (`core.audit`): the thresholds that flag a pass, the
ledger's records as DataFrames (`AuditFrames`: one per kind of record, with the
columns the analysis reads) and the rows they are made of."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from .records import Adjustment, Comparison, MatchEntry, PassRecord

STARVED_BELOW = 0.10        # starved: delivered < (1 - this) x demand-capped, with idle jobs
OVER_ABOVE = 0.10           # over its share: delivered > (1 + this) x demand-capped
NOISE_FLOOR = 1.0           # slot-weight units: a smaller shortfall / excess / surplus in a
                            # pass flags nothing (a fraction of a slot is not starvation)
_EPS = 1e-9                 # slack for comparisons in floating point

# ---------------------------------------------------------------- the input frames

PASS_COLUMNS = ("uuid", "pool", "time", "started_at", "finished_at", "snapshot_time",
                "status", "reason", "pool_weight", "passes", "complete_passes",
                "partial_passes", "failed_passes", "seconds")
# `recorded_passes`: in how many passes the principal was recorded (a summarised hour's
# row: in how many of its complete passes; NaN: one)
# the fields the analysis reads (the ledger's other figures are not read: a day of
# one-minute passes at 1,000 submitters is 1.5 million rows)
SUBMITTER_COLUMNS = ("pass_uuid", "name", "group", "is_group", "factor", "ceiling", "real_rup",
                     "real_eup", "real_usage", "claimed_weight", "idle_jobs", "running_jobs",
                     "shadow_eup", "predicted_rup", "drift", "recorded_passes")
GROUP_COLUMNS = ("pass_uuid", "name", "real_quota", "config_quota", "real_usage",
                 "real_requested", "recorded_passes")
MATCH_COLUMNS = ("pass_uuid", "source") + tuple(f.name for f in dataclasses.fields(MatchEntry))
COMPARISON_COLUMNS = ("pass_uuid", "time", "comparisons") + tuple(
    f.name for f in dataclasses.fields(Comparison))
ADJUSTMENT_COLUMNS = tuple(f.name for f in dataclasses.fields(Adjustment))


@dataclass(frozen=True)
class AuditFrames:
    """The ledger's records for one pool and period, one DataFrame per kind.

    passes: every pass of the period, any status (PASS_COLUMNS; `time` is the snapshot's
    time, else the pass's start); submitters / groups: the SubmitterObs / GroupObs of the
    complete passes, with `pass_uuid`; matches: our (`source` "shadow") and the real
    (MatchLog, "real") matches of the complete passes; comparisons: the comparisons
    recorded by the passes of the period (`pass_uuid` is the recording pass, `time` its
    time); adjustments: the recommendations applied (or tried) in the period.

    submitter_rows: when given, `submitters` holds only the rows the frames were made
    with in memory (a ledger's summarised hours) and submitter_rows(uuids=..., names=...)
    gives every row of those passes or of those principals, `submitters` included, in
    the order `submitters` would hold them whole (a day of one-minute passes at 1,000
    submitters is 1.5 million rows: `analyse` reads them a slice of passes at a time)."""
    passes: pd.DataFrame
    submitters: pd.DataFrame
    groups: pd.DataFrame
    matches: pd.DataFrame
    comparisons: pd.DataFrame
    adjustments: pd.DataFrame
    submitter_rows: Callable[..., pd.DataFrame] | None = field(default=None, compare=False)


def _frame(rows: Sequence[Mapping[str, Any]] | pd.DataFrame, columns: Sequence[str]
           ) -> pd.DataFrame:
    """A DataFrame of `rows` (dicts, or a DataFrame already) with exactly `columns` (no
    rows: an empty frame that still has them; a column `rows` lacks: NaN)."""
    if isinstance(rows, pd.DataFrame):
        return rows.reindex(columns=list(columns))
    return pd.DataFrame.from_records(list(rows), columns=list(columns))


def pass_row(header: Mapping[str, Any]) -> dict[str, Any]:
    """A `passes` row from a pass header (the ledger's dict, or a PassRecord's fields).
    A summarised hour (the ledger's header with a `summary`) stands for its passes:
    `passes` and `complete_passes` / `partial_passes` / `failed_passes` count them,
    `seconds` is the time its complete passes stand for (NaN for a pass, whose time
    `pass_table` works out from the next pass)."""
    snap = header.get("snapshot_time")
    status = header.get("status")
    summ = header.get("summary") or None
    counts = ({k: int(summ.get(k, 0)) for k in ("passes", "complete", "partial", "failed")}
              if summ else {"passes": 1, **{k: int(status == k)
                                           for k in ("complete", "partial", "failed")}})
    return {"uuid": header["uuid"], "pool": header.get("pool"),
            "time": float(snap if snap is not None else header["started_at"]),
            "started_at": float(header["started_at"]), "finished_at": header.get("finished_at"),
            "snapshot_time": snap, "status": status,
            "reason": header.get("reason"), "pool_weight": header.get("pool_weight"),
            "passes": counts["passes"], "complete_passes": counts["complete"],
            "partial_passes": counts["partial"], "failed_passes": counts["failed"],
            "seconds": float(summ["seconds"]) if summ else np.nan}


_FIELDS: dict[type, tuple[str, ...]] = {}


def record_rows(uuid: str, items: Iterable[Any], **extra: Any) -> list[dict[str, Any]]:
    """Rows of record dataclasses (SubmitterObs, GroupObs, MatchEntry) of pass `uuid`
    (their fields as they are: shallow, much faster than dataclasses.asdict)."""
    rows = []
    for x in items:
        names = _FIELDS.get(type(x))
        if names is None:
            names = _FIELDS[type(x)] = tuple(f.name for f in dataclasses.fields(x))
        rows.append({"pass_uuid": uuid, **extra, **{n: getattr(x, n) for n in names}})
    return rows


def comparison_row(header: Mapping[str, Any], comp: Comparison) -> dict[str, Any]:
    """A `comparisons` row; `comparisons`: how many it stands for (a summarised hour's:
    its passes' comparisons, `comp` their means)."""
    row = pass_row(header)
    summ = (header.get("summary") or {}).get("comparisons") or {}
    return {"pass_uuid": row["uuid"], "time": row["time"],
            "comparisons": int(summ.get("count", 1)) if header.get("summary") else 1,
            **{f.name: getattr(comp, f.name) for f in dataclasses.fields(Comparison)}}


def make_frames(passes: Sequence[Mapping[str, Any]],
                submitters: Sequence[Mapping[str, Any]] | pd.DataFrame,
                groups: Sequence[Mapping[str, Any]] | pd.DataFrame,
                matches: Sequence[Mapping[str, Any]] | pd.DataFrame,
                comparisons: Sequence[Mapping[str, Any]],
                adjustments: Sequence[Adjustment],
                submitter_rows: Callable[..., pd.DataFrame] | None = None) -> AuditFrames:
    """AuditFrames from rows (see `pass_row`, `record_rows`, `comparison_row`; submitters
    and groups may come as DataFrames, `adapters.ledger_columns`; `submitter_rows`: see
    `AuditFrames`)."""
    return AuditFrames(
        passes=_frame(passes, PASS_COLUMNS),
        submitters=_frame(submitters, SUBMITTER_COLUMNS),
        groups=_frame(groups, GROUP_COLUMNS),
        matches=_frame(matches, MATCH_COLUMNS),
        comparisons=_frame(comparisons, COMPARISON_COLUMNS),
        adjustments=_frame([dataclasses.asdict(a) for a in adjustments], ADJUSTMENT_COLUMNS),
        submitter_rows=submitter_rows)


def frames_from_records(records: Sequence[PassRecord],
                        adjustments: Sequence[Adjustment] = ()) -> AuditFrames:
    """AuditFrames straight from PassRecords (tests, simulations): what the ledger reader
    gives for the same passes. Child records are kept for complete passes only."""
    passes, subs, grps, matches, comps = [], [], [], [], []
    for rec in records:
        head = {f.name: getattr(rec, f.name) for f in dataclasses.fields(PassRecord)}
        passes.append(pass_row(head))
        if rec.comparison is not None:
            comps.append(comparison_row(head, rec.comparison))
        if rec.status != "complete":
            continue
        subs += record_rows(rec.uuid, rec.submitters)
        grps += record_rows(rec.uuid, rec.groups)
        matches += record_rows(rec.uuid, rec.shadow_matches, source="shadow")
        matches += record_rows(rec.uuid, rec.real_matches, source="real")
    return make_frames(passes, subs, grps, matches, comps, adjustments)


# ---------------------------------------------------------------- small pure helpers

def _num(s: pd.Series) -> pd.Series:
    return pd.to_numeric(s, errors="coerce").astype(float)


def lookup(keys: pd.Series, table: pd.DataFrame, columns: Sequence[str]
           ) -> dict[str, Any]:
    """`table`'s `columns` at each of `keys` (looked up in its index, which is unique):
    for each column what `keys.map(table[column])` gives (NaN where a key is not in the
    index), the keys looked up once for all of them (each map looks them all up again,
    and converts them to the index's string type first)."""
    at = table.index.get_indexer(keys)
    return {c: pd.api.extensions.take(table[c].array, at, allow_fill=True) for c in columns}
