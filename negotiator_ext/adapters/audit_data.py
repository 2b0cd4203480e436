"""The ledger read into the DataFrames the fairness audit analyses (`core.audit`).

One pool, one period (since <= a pass's start < until, either end open): every pass
header, whatever its status (the audit counts the ones it leaves out); for the complete
passes, their submitters, groups, our and the real matches; the comparisons recorded by
the period's passes; and the adjustments applied in the period. Reads go through the
ledger's reader API only (`adapters.ledger.Ledger`), so SQLite and PostgreSQL ledgers
read the same.
"""

from __future__ import annotations

from typing import Any

from ..core.audit import AuditFrames, comparison_row, make_frames, pass_row, record_rows
from .ledger import Ledger
from .ledger_columns import read_columns, read_matches


def read_frames(ledger: Ledger, *, pool: str | None = None, since: float | None = None,
                until: float | None = None, detail: bool = True) -> AuditFrames:
    """The passes of `pool` (all pools: None) that started in [since, until), as
    `core.audit.AuditFrames`. Children (submitters, groups, matches) are read for the
    complete passes only: the others are not analysed. The hours summarised in the period
    (passes older than NEGOTIATOR_EXT_DETAIL_DAYS, `Ledger.summarise`) come as one pass
    each, standing for their passes (`core.audit.pass_row`), with their submitters and
    groups (`recorded_passes`: in how many of the hour's complete passes each was
    recorded) and their comparisons as one; they have no matches.

    `detail` False: the passes' submitter rows are not read now but by the analysis, a
    slice of passes at a time, while `ledger` is open (`AuditFrames.submitter_rows`;
    `submitters` then holds the summarised hours' rows only)."""
    import pandas as pd
    from ..core.audit import GROUP_COLUMNS, SUBMITTER_COLUMNS
    heads = ledger.passes(pool=pool, since=since, until=until, summaries=True)
    subs: list[dict[str, Any]] = []
    grps: list[dict[str, Any]] = []
    for head, s, g in ledger.hours(pool, since, until, complete_only=True):
        summ = head["summary"]
        subs += [{**r, "recorded_passes": summ["submitter_passes"].get(r["name"])}
                 for r in record_rows(head["uuid"], s)]
        grps += [{**r, "recorded_passes": summ["group_passes"].get(r["name"])}
                 for r in record_rows(head["uuid"], g)]

    def detail_of(table: str, cols: tuple[str, ...], **which: Any) -> pd.DataFrame:
        return read_columns(ledger, table, [c for c in cols if c != "recorded_passes"],
                            pool=pool, since=since, until=until, **which)

    def with_hours(rows: list[dict[str, Any]], d: pd.DataFrame, cols: tuple[str, ...]
                   ) -> pd.DataFrame:
        return pd.concat([pd.DataFrame.from_records(rows, columns=list(cols)), d.reindex(
            columns=list(cols))], ignore_index=True) if rows else d

    # the passes themselves as columns (millions of rows in a day at 1,000 submitters)
    grps_df = with_hours(grps, detail_of("groups", GROUP_COLUMNS), GROUP_COLUMNS)
    submitter_rows: Any = None
    if detail:
        subs_df = with_hours(subs, detail_of("submitters", SUBMITTER_COLUMNS),
                             SUBMITTER_COLUMNS)
    else:
        subs_df = pd.DataFrame.from_records(subs, columns=list(SUBMITTER_COLUMNS))

        def rows_of(*, uuids: Any = None, names: Any = None) -> pd.DataFrame:
            """The submitter rows of passes `uuids` or of principals `names`, the
            summarised hours' first (as `subs_df` would hold them all)."""
            if uuids is not None:
                uuids = list(uuids)
                mine = [r for r in subs if r["pass_uuid"] in set(uuids)]
            else:
                names = list(names)
                mine = [r for r in subs if r["name"] in set(names)]
            d = detail_of("submitters", SUBMITTER_COLUMNS, uuids=uuids, names=names)
            return with_hours(mine, d, SUBMITTER_COLUMNS)
        submitter_rows = rows_of

    from ..core.audit import MATCH_COLUMNS
    matches = read_matches(ledger, MATCH_COLUMNS, pool=pool, since=since, until=until)
    comps = [comparison_row(h, c) for h, c in ledger.comparisons(pool=pool, since=since,
                                                                 summaries=True)
             if until is None or float(h["started_at"]) < until]
    adjustments = [a for a in ledger.adjustments(since=None if since is None else int(since))
                   if (since is None or a.applied_at >= since)
                   and (until is None or a.applied_at < until)]
    return make_frames([pass_row(h) for h in heads], subs_df, grps_df, matches, comps,
                       adjustments, submitter_rows=submitter_rows)
