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
from .ledger_columns import read_columns


def read_frames(ledger: Ledger, *, pool: str | None = None, since: float | None = None,
                until: float | None = None) -> AuditFrames:
    """The passes of `pool` (all pools: None) that started in [since, until), as
    `core.audit.AuditFrames`. Children (submitters, groups, matches) are read for the
    complete passes only: the others are not analysed. The hours summarised in the period
    (passes older than NEGOTIATOR_EXT_DETAIL_DAYS, `Ledger.summarise`) come as one pass
    each, standing for their passes (`core.audit.pass_row`), with their submitters and
    groups (`recorded_passes`: in how many of the hour's complete passes each was
    recorded) and their comparisons as one; they have no matches."""
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
    # the passes themselves as columns (millions of rows in a day at 1,000 submitters)
    detail = [read_columns(ledger, table, [c for c in cols if c != "recorded_passes"],
                           pool=pool, since=since, until=until)
              for table, cols in (("submitters", SUBMITTER_COLUMNS), ("groups", GROUP_COLUMNS))]
    subs_df, grps_df = (
        pd.concat([pd.DataFrame.from_records(rows, columns=list(cols)), d.reindex(
            columns=list(cols))], ignore_index=True) if rows else d
        for rows, d, cols in ((subs, detail[0], SUBMITTER_COLUMNS),
                              (grps, detail[1], GROUP_COLUMNS)))
    matches: list[dict[str, Any]] = []
    for uuid, (ours, real) in ledger.matches_in(since, until, pool=pool).items():
        matches += record_rows(uuid, ours, source="shadow")
        matches += record_rows(uuid, real, source="real")
    comps = [comparison_row(h, c) for h, c in ledger.comparisons(pool=pool, since=since,
                                                                 summaries=True)
             if until is None or float(h["started_at"]) < until]
    adjustments = [a for a in ledger.adjustments(since=None if since is None else int(since))
                   if (since is None or a.applied_at >= since)
                   and (until is None or a.applied_at < until)]
    return make_frames([pass_row(h) for h in heads], subs_df, grps_df, matches, comps,
                       adjustments)
