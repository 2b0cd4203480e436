"""A period's submitter and group rows read from the ledger as columns, not records.

The audit of a day of one-minute passes at 1,000 submitters reads 1.5 million submitter
rows: as dicts and then SubmitterObs records (`Ledger.window`) they took over 4 GB.
Here only the columns asked for are selected, fetched a chunk at a time into a DataFrame
whose text columns (pass, name, group) refer to one string object per distinct value
(read as categories), so the period costs about what its numbers do. The same SQL as `Ledger.window` (complete passes that started in
[since, until), oldest row first), through the ledger's connection, so SQLite and
PostgreSQL read the same. Summarised hours are not here: `Ledger.hours` gives them.
"""

from __future__ import annotations

from typing import Sequence

import pandas as pd

from .ledger import Ledger

CHUNK = 100_000
_TEXT = ("pass_uuid", "name", "group")


def _q(name: str) -> str:
    return f'"{name}"'


def read_columns(ledger: Ledger, table: str, columns: Sequence[str], *,
                 pool: str | None = None, since: float | None = None,
                 until: float | None = None) -> pd.DataFrame:
    """`columns` of `table` ("submitters" or "groups") for the complete passes of `pool`
    that started in [since, until), in the order written; text columns as text (one
    object per distinct value), the others numbers (NULL: NaN)."""
    if table not in ("submitters", "groups"):
        raise ValueError(f"not a per-pass table: {table!r}")
    where, params = ledger._where(pool=pool, since=since, until=until, status="complete")
    sql = (f"SELECT {', '.join(_q(c) for c in columns)} FROM {_q(table)} WHERE pass_uuid IN "
           f"(SELECT uuid FROM passes{where}) ORDER BY id")
    parts: list[pd.DataFrame] = []
    with ledger._guard(), ledger._db.read():
        cur = ledger._db.execute(sql, params)
        while True:
            rows = cur.fetchmany(CHUNK)
            if not rows:
                break
            df = pd.DataFrame.from_records(rows, columns=list(columns))
            for c in columns:
                df[c] = (df[c].astype("category") if c in _TEXT
                         else pd.to_numeric(df[c], errors="coerce"))
            parts.append(df)
    if not parts:
        return pd.DataFrame({c: pd.Series(dtype=object if c in _TEXT else float)
                             for c in columns})
    out = {}
    for c in columns:
        if c in _TEXT:
            # back to text for the analysis (a categorical's groupby would make every
            # combination): each row refers to one of the few distinct strings
            out[c] = pd.Series(pd.api.types.union_categoricals(
                [p[c] for p in parts], ignore_order=True)).astype(object)
        else:
            out[c] = pd.concat([p[c] for p in parts], ignore_index=True)
    return pd.DataFrame(out)
