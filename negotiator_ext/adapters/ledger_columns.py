"""A period's submitter and group rows read from the ledger as columns, not records.

The audit of a day of one-minute passes at 1,000 submitters reads 1.5 million submitter
rows: as dicts and then SubmitterObs records (`Ledger.window`) they took over 4 GB.
Here only the columns asked for are selected, fetched a chunk at a time into arrays of
the period's length, each chunk's columns converted by numpy and pandas rather than value
by value; the text columns (pass, name, group) refer to one string object per distinct
value, so the period costs about what its numbers do. The
same SQL as `Ledger.window` (complete passes that started in [since, until), oldest row
first), through the ledger's connection, so SQLite and PostgreSQL read the same. Summarised hours are not here: `Ledger.hours` gives them.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd

from .ledger import Ledger

CHUNK = 8_192
_TEXT = ("pass_uuid", "name", "group")


def _q(name: str) -> str:
    return f'"{name}"'


def read_columns(ledger: Ledger, table: str, columns: Sequence[str], *,
                 pool: str | None = None, since: float | None = None,
                 until: float | None = None, uuids: Sequence[str] | None = None,
                 names: Sequence[str] | None = None) -> pd.DataFrame:
    """`columns` of `table` ("submitters" or "groups") for the complete passes of `pool`
    that started in [since, until), in the order written; text columns as text (one
    object per distinct value), the others numbers (NULL: NaN). `uuids` / `names`: only
    the rows of these passes / of these names (the audit reads a slice of passes at a
    time)."""
    if table not in ("submitters", "groups"):
        raise ValueError(f"not a per-pass table: {table!r}")
    where, params = ledger._where(pool=pool, since=since, until=until, status="complete")
    for values in (uuids, names):
        if values is not None and not len(values):
            return pd.DataFrame({c: pd.Series([], dtype=object if c in _TEXT else float)
                                 for c in columns})
    if uuids is not None:
        # the passes asked for, among the period's (the period's passes as one list,
        # probed for each row, took 0.2 s a slice of a day's: longer than its rows)
        where += (" AND" if where else " WHERE") + f" uuid IN ({', '.join('?' * len(uuids))})"
        params = [*params, *uuids]
    rows_of = f"FROM {_q(table)} WHERE pass_uuid IN (SELECT uuid FROM passes{where})"
    if names is not None:
        rows_of += f" AND {_q('name')} IN ({', '.join('?' * len(names))})"
        params = [*params, *names]
    # in the order written (by id), put so here: SQLite's ORDER BY sorted every column
    # of the rows, a third of the read (they come in the order of the passes' uuids)
    sql = f"SELECT {', '.join(_q(c) for c in columns)}, id {rows_of}"
    text = [c for c in columns if c in _TEXT]
    with ledger._guard(), ledger._db.read():
        # the numbers go straight into arrays of the period's length (no second copy
        # when the chunks are put together); the texts a chunk at a time, each row
        # referring to the first string object read of its value
        n = int(ledger._db.execute(f"SELECT COUNT(*) {rows_of}", params).fetchone()[0])
        nums = {c: np.full(n, np.nan) for c in columns if c not in _TEXT}
        ids = np.zeros(n, dtype=np.int64)
        texts: dict[str, list[np.ndarray]] = {c: [] for c in text}
        seen: dict[str, dict] = {c: {} for c in text}
        cur = ledger._db.execute(sql, params)
        at = 0
        while True:
            rows = cur.fetchmany(CHUNK)
            if not rows:
                break
            if at + len(rows) > n:        # written meanwhile (a reader's snapshot: never)
                for c in nums:
                    nums[c] = np.concatenate([nums[c], np.full(at + len(rows) - n, np.nan)])
                ids = np.concatenate([ids, np.zeros(at + len(rows) - n, dtype=np.int64)])
                n = at + len(rows)
            # the chunk as one array of its values (not a tuple per column), each column
            # converted by numpy or pandas, not value by value
            block = np.empty((len(rows), len(columns) + 1), dtype=object)
            block[:] = rows
            ids[at:at + len(rows)] = block[:, -1].astype(np.int64)
            for j, c in enumerate(columns):
                if c in _TEXT:
                    texts[c].append(_text(block[:, j], seen[c]))
                else:
                    nums[c][at:at + len(rows)] = _numbers(block[:, j])
            del block
            at += len(rows)
    ids = ids[:at]
    order = None if np.all(ids[1:] > ids[:-1]) else np.argsort(ids, kind="stable")
    del ids
    out = {}
    for c in columns:
        if c in _TEXT:
            # text for the analysis (a categorical's groupby would make every
            # combination): each row refers to one of the few distinct strings
            v = np.concatenate(texts.pop(c)) if texts[c] else np.array([], dtype=object)
        else:
            v = nums.pop(c)[:at]
        out[c] = v if order is None else v[order]       # a column at a time
        del v
    return pd.DataFrame({c: pd.Series(out.pop(c), dtype=object) if c in _TEXT else out.pop(c)
                         for c in columns})


# what numpy converts as pandas' to_numeric does: numbers and NULLs only
_NUMERIC = frozenset({"floating", "integer", "mixed-integer-float", "empty"})


def _numbers(values: np.ndarray) -> np.ndarray:
    """A column's values (object array of what SQL gave) as floats: NULL and anything
    not a number NaN, as `pd.to_numeric(errors="coerce")` gives them (numpy's own
    conversion where every value is a number or NULL: a fraction of the time)."""
    if pd.api.types.infer_dtype(values, skipna=True) in _NUMERIC:
        return values.astype(float)
    return pd.to_numeric(pd.Series(values, dtype=object), errors="coerce").to_numpy(float)


def _text(values: np.ndarray, seen: dict) -> np.ndarray:
    """A text column's values as an object array whose rows refer to one string object
    per distinct value across the chunks (`seen`: value -> that object); NULL is NaN,
    as a categorical made object gives it."""
    codes, uniques = pd.factorize(values)
    first = np.empty(len(uniques) + 1, dtype=object)
    first[:-1] = [seen.setdefault(u, u) for u in uniques]
    first[-1] = np.nan
    return first[codes]


MATCH_TABLES = (("shadow", "shadow_matches"), ("real", "real_matches"))


def read_matches(ledger: Ledger, columns: Sequence[str], *, pool: str | None = None,
                 since: float | None = None, until: float | None = None) -> pd.DataFrame:
    """Our and the real matches of the complete passes of `pool` that started in [since,
    until), as `Ledger.matches_in` and `core.audit.record_rows` give them, made a
    DataFrame: `columns` (`pass_uuid`, `source` "shadow" or "real", and MatchEntry's
    fields; one the ledger lacks is None), pass by pass in the order the passes first
    have a match of ours (then those with real matches only), ours before the real ones,
    each in the order written. Read a chunk at a time, without a record per match (a
    day of one-minute passes: some 80,000 matches, whose records and dicts left 40 MB
    behind)."""
    where, params = ledger._where(pool=pool, since=since, until=until, status="complete")
    fields = [c for c in columns if c not in ("pass_uuid", "source")]
    values: dict[str, list] = {c: [] for c in columns}
    side: list[np.ndarray] = []
    with ledger._guard(), ledger._db.read():
        for k, (source, table) in enumerate(MATCH_TABLES):
            cur = ledger._db.execute(f"SELECT * FROM {_q(table)} LIMIT 0")
            have = {d[0] for d in cur.description}
            cur.fetchall()
            got = ["pass_uuid"] + [c for c in fields if c in have]
            cur = ledger._db.execute(
                f"SELECT {', '.join(_q(c) for c in got)} FROM {_q(table)} WHERE pass_uuid IN "
                f"(SELECT uuid FROM passes{where}) ORDER BY id", params)
            while True:
                rows = cur.fetchmany(CHUNK)
                if not rows:
                    break
                cols = dict(zip(got, zip(*rows)))
                for c in columns:
                    if c == "source":
                        values[c].extend([source] * len(rows))
                    else:
                        values[c].extend(cols.get(c, (None,) * len(rows)))
                side.append(np.full(len(rows), k, dtype=np.int8))
    n = len(values["pass_uuid"])
    if not n:
        return pd.DataFrame.from_records([], columns=list(columns))
    # the passes in the order they first come (ours first), then by side, then as written
    first: dict[str, int] = {}
    for u in values["pass_uuid"]:
        if u not in first:
            first[u] = len(first)
    rank = np.fromiter((first[u] for u in values["pass_uuid"]), dtype=np.int64, count=n)
    order = np.lexsort((np.arange(n), np.concatenate(side), rank))
    rows = list(zip(*(values.pop(c) for c in columns)))
    return pd.DataFrame.from_records([rows[i] for i in order], columns=list(columns))
