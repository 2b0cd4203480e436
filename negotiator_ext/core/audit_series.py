"""The per-pass shares the audit's plots read (`ShareSeries`), kept compactly.

A day of one-minute passes at 1,000 submitters is 1.5 million (pass, submitter) rows:
the per-pass share table, kept whole for the report's file and plots, took about 120 MB.
When the table's rows go to its file as they are made (`core.audit.analyse`'s
`share_sink`), only what the plots and the ranking of submitters read stays, each row as
its pass's position, its name's number and five figures (34 bytes: 50 MB a day):

* each submitter's shares summed over the period (`totals`), which rank the submitters
  the plots draw (`audit_matches.most_used`, `views.audit_plots.plot_shares`);
* the rows of the submitters drawn (`rows_of`), as the share table has them;
* how many rows, passes and submitters.

`ShareSeries.of` makes the same of a whole share table (`analyse` without a sink, or a
table made otherwise), so that the plots read one kind of thing either way.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

# the share table's columns kept (index, time and interval by the pass)
FIGURES = ("deserved", "demand_capped", "delivered")
FLAGS = ("starved", "over_share")
COLUMNS = ["index", "time", "interval", "name", *FIGURES, *FLAGS]


class ShareSeries:
    """What the plots read of the per-pass share table (see the module docstring),
    added a slice of its rows at a time (`add`, in the table's order)."""

    def __init__(self) -> None:
        self._codes: dict[Any, int] = {}          # name -> its number
        self._names: list[Any] = []
        self._parts: list[dict[str, np.ndarray]] = []
        self._totals: pd.DataFrame | None = None
        self._passes: dict[int, tuple[Any, Any]] = {}   # index -> (time, interval)
        self._dtypes: dict[str, Any] = {}
        self._rows = 0

    @classmethod
    def of(cls, share: pd.DataFrame) -> "ShareSeries":
        """The series of a whole share table (with `COLUMNS`)."""
        s = cls()
        s.add(share)
        return s

    def add(self, share: pd.DataFrame) -> None:
        """The next rows of the share table (with `COLUMNS`)."""
        if not len(share):
            return
        if not self._dtypes:
            self._dtypes = {c: share[c].dtype for c in COLUMNS if c != "name"}
        names = share["name"].to_numpy(object)
        inverse, uniq = pd.factorize(names, use_na_sentinel=False)
        for n in uniq:
            if n not in self._codes:
                self._codes[n] = len(self._names)
                self._names.append(n)
        lookup = np.fromiter((self._codes[n] for n in uniq), dtype=np.int32, count=len(uniq))
        index = share["index"].to_numpy()
        first = ~pd.Series(index).duplicated().to_numpy()
        for i, t, iv in zip(index[first], share["time"].to_numpy()[first],
                            share["interval"].to_numpy()[first]):
            self._passes.setdefault(int(i), (t, iv))
        part = {"index": index.astype(np.int32), "name": lookup[inverse]}
        for c in FIGURES + FLAGS:
            part[c] = share[c].to_numpy(copy=True)
        self._parts.append(part)
        self._totals = None
        self._rows += len(share)

    def __len__(self) -> int:
        return self._rows

    @property
    def empty(self) -> bool:
        return not self._rows

    @property
    def n_names(self) -> int:
        """How many submitters have rows (`share["name"].nunique()`)."""
        return len(self._names)

    @property
    def n_passes(self) -> int:
        """How many passes have rows (`share["index"].nunique()`)."""
        return len(self._passes)

    def totals(self) -> pd.DataFrame:
        """Per submitter, by name: demand-capped and delivered shares summed over the
        rows (`share.groupby("name")[["demand_capped", "delivered"]].sum()`, to the
        bit: the same rows in the same order)."""
        if self._totals is None:
            def whole(k: str) -> np.ndarray:
                return (np.concatenate([p[k] for p in self._parts]) if self._parts
                        else np.zeros(0, dtype=np.int32 if k == "name" else float))
            # grouped as by name: each row's name's rank among the names sorted (the
            # group numbers pandas gives them, whose order picks how it adds up), each
            # column on its own (the share table holds each column in a block of its own)
            names = np.empty(len(self._names), dtype=object)
            names[:] = self._names
            rank, ordered = pd.factorize(names, sort=True)
            ids = rank[whole("name")]
            index = pd.Index(ordered, name="name")
            self._totals = pd.DataFrame({
                c: pd.Series(whole(c)).groupby(ids).sum().set_axis(
                    index[np.unique(ids)] if len(ids) else index[:0]).rename(None)
                for c in ("demand_capped", "delivered")})
        return self._totals

    def rows_of(self, name: Any) -> pd.DataFrame:
        """The rows of submitter `name` in the table's order, with `COLUMNS`
        (`share[share["name"] == name]`, its index the rows' positions)."""
        code = self._codes.get(name, -1)
        at, cols, start = [], {k: [] for k in ("index", *FIGURES, *FLAGS)}, 0
        for p in self._parts:
            hit = np.flatnonzero(p["name"] == code)
            at.append(hit + start)
            for k in cols:
                cols[k].append(p[k][hit])
            start += len(p["name"])
        pos = np.concatenate(at) if at else np.zeros(0, dtype=np.intp)
        index = np.concatenate(cols["index"]) if at else np.zeros(0, dtype=np.int32)
        times = [self._passes[int(i)] for i in index]
        dt = self._dtypes
        out = {"index": pd.Series(index, dtype=dt.get("index", np.int64)),
               "time": pd.Series([t for t, _ in times], dtype=dt.get("time", float)),
               "interval": pd.Series([iv for _, iv in times], dtype=dt.get("interval", float)),
               "name": pd.Series([name] * len(pos), dtype=object)}
        for k in FIGURES + FLAGS:
            out[k] = pd.Series(np.concatenate(cols[k]) if at else [],
                               dtype=dt.get(k, bool if k in FLAGS else float))
        return pd.DataFrame(out).set_axis(pd.Index(pos), axis=0)
