"""The fairness audit a slice of passes at a time (`core.audit.analyse`).

A day of one-minute passes at 1,000 submitters is 1.5 million (pass, submitter) rows;
their shares, as one table, took over a gigabyte. Everything the audit says per pass
depends on that pass alone (a group's shares are split within the pass), so the passes
are taken `SLICE_PASSES` at a time (`slices`): their submitter rows read, their shares
made, and each slice folded (`Folds.add`) into what the period's tables are made of, the
slice then dropped:

* the per-pass share table the report writes and plots (`KEPT`: its columns only), or,
  given a sink, its rows handed to the sink and only what the plots read kept
  (`core.audit_series.ShareSeries`);
* per (pass, group) the sums of the group's shares (`group_table`);
* the rows flagged starved or over their share (`spells`, `pairs`, the summary), with
  each submitter's last group;
* the fairness of each pass, each submitter's largest gap;
* each submitter's period means, added up pass by pass (`PeriodSums`);
* what the configuration findings read (ceilings, submitters that got nothing), the
  groups of the matched submitters (queue waits), the priorities' first / last / least /
  most per principal (`audit_matches.priority_partial`), and counts for the notes.

Nothing is estimated: each fold gives what the whole-period computation gives, to the
bit (the sums are made in the same order, the medians from the values themselves);
tests/test_audit_slices.py holds them to it.
"""

from __future__ import annotations

from typing import Any, Callable, Iterator

import numpy as np
import pandas as pd

from .audit_frames import _EPS, AuditFrames, _num
from .audit_matches import priorities, priority_partial
from .audit_series import ShareSeries
from .audit_shares import fairness_by_pass, share_sums
from .audit_spells import PeriodSums, period_pivots

SLICE_PASSES = 60           # passes analysed at a time

# the per-pass share table kept for the period (the report's submitter_shares_by_pass
# and the shares plot); the figures the file stores in single precision are kept so
KEPT = ["index", "time", "interval", "name", "group", "eup", "factor", "idle_counted",
        "demand", "deserved", "demand_capped", "delivered", "starved", "over_share"]
# of the flagged rows, what spells, pairs and the summary read
FLAGGED = ["index", "time", "interval", "passes", "name", "group", "starved", "over_share",
           "shortfall", "excess", "demand_capped"]
# of the rows the configuration findings read
BLOCKED = ["pass_uuid", "name", "group", "active", "factor", "delivered", "deserved",
           "passes", "time"]
_SINGLE = ("eup", "factor", "idle_counted", "demand")
PERIOD_COLUMNS = ["deserved", "demand_capped", "delivered", "gap", "demand", "deserved_pct",
                  "delivered_pct"]


def slices(frames: AuditFrames, pt: pd.DataFrame, n: int = SLICE_PASSES
           ) -> Iterator[tuple[pd.DataFrame, pd.DataFrame]]:
    """The analysed passes `pt` (`pass_table`) `n` at a time, in their order, each with
    its submitter rows: from the ledger when the frames read them on demand
    (`AuditFrames.submitter_rows`), else from `frames.submitters`."""
    n = max(1, int(n))
    subs = frames.submitters
    for a in range(0, len(pt), n):
        part = pt.iloc[a:a + n]
        uuids = list(part["uuid"])
        if frames.submitter_rows is not None:
            rows = frames.submitter_rows(uuids=uuids)
        else:
            rows = subs[subs["pass_uuid"].isin(uuids)]
        yield part, rows


class Folds:
    """What the period's tables are made of, folded a slice at a time (`add`)."""

    def __init__(self, matches: pd.DataFrame, pt: pd.DataFrame,
                 share_columns: list[str] | None = None,
                 sink: Callable[[pd.DataFrame], Any] | None = None):
        # the per-pass share table's columns: every one (None), or KEPT (the figures
        # the file stores in single precision then kept so)
        self.kept_columns = share_columns
        # `sink`: given each slice's rows of the per-pass share table as they are made
        # (then not kept: only what the plots read, `series`)
        self.sink = sink
        self.series = ShareSeries() if sink is not None else None
        self.single = _SINGLE if share_columns == KEPT else ()
        self.kept: list[dict[str, np.ndarray]] = []
        self.kept_dtypes: dict[str, Any] | None = None
        self.sums: list[pd.DataFrame] = []
        self.flagged: list[pd.DataFrame] = []
        self.last_group: dict[Any, Any] = {}
        self.fair: list[pd.DataFrame] = []
        self.gaps: list[pd.DataFrame] = []
        self.period = PeriodSums(pt, PERIOD_COLUMNS)
        self.info: list[pd.DataFrame] = []
        self.blocked: list[pd.DataFrame] = []
        self.ceilings: list[pd.DataFrame] = []
        self.looked_up: list[pd.DataFrame] = []
        self.prio: list[pd.DataFrame] = []
        self.principals: set[Any] = set()
        self.rows = 0
        self.by_count = 0
        self.equal = 0
        self.missing = 0
        self.share_columns: list[str] | None = None
        # the (pass, submitter) pairs of the matches: their groups, for the waits
        self._matched = (pd.MultiIndex.from_arrays([matches["pass_uuid"], matches["submitter"]])
                         if len(matches) else None)

    def add(self, pt: pd.DataFrame, subs: pd.DataFrame, share: pd.DataFrame) -> None:
        """Fold the slice: its passes `pt`, submitter rows `subs` and `shares` of them."""
        if self.share_columns is None:
            self.share_columns = list(share.columns)
        self.prio.append(priority_partial(priorities(pt, subs)))
        self.principals.update(subs.loc[~subs["is_group"].astype(bool), "name"].unique())
        ceilings = self._ceilings(subs)
        if self._matched is not None:
            look = subs[["pass_uuid", "name", "group"]]
            hit = pd.MultiIndex.from_arrays([look["pass_uuid"], look["name"]]).isin(
                self._matched)
            self.looked_up.append(look[hit])
        self.fair.append(fairness_by_pass(share, pt))
        if share.empty:
            return
        self.rows += len(share)
        if self.kept_dtypes is None:
            self.kept_columns = self.kept_columns or list(share.columns)
            self.kept_dtypes = {c: "float32" if c in self.single else share[c].dtype
                                for c in self.kept_columns}
        # column by column, copies: a column of the slice's share table would keep all
        # of it, a DataFrame of them one block
        part = {c: share[c].to_numpy("float32" if c in self.single else None, copy=True)
                for c in self.kept_columns}
        if self.sink is None:
            self.kept.append(part)
        else:
            self.sink(self._table([part]))
            self.series.add(share)
        self.sums.append(share_sums(share))
        flag = share["starved"].astype(bool) | share["over_share"].astype(bool)
        self.flagged.append(share.loc[flag, FLAGGED])
        self.last_group.update(share.groupby("name", sort=False)["group"].last().items())
        # each submitter's first largest gap in the slice (largest_gaps picks among them)
        s = share[share["gap"].notna() & (share["gap"].abs() > _EPS)]
        if len(s):
            self.gaps.append(s.loc[s["gap"].abs().groupby(s["name"], sort=False).idxmax()])
        size = share["pool_weight"].where(share["pool_weight"] > 0)
        pct = share[["pass_uuid", "name"] + PERIOD_COLUMNS[:5]].assign(
            deserved_pct=share["deserved"] / size, delivered_pct=share["delivered"] / size)
        self.period.add(list(pt["uuid"]), period_pivots(pct, "name", PERIOD_COLUMNS))
        self.info.append(share[["name", "group"]].assign(
            _act=share["active"].astype(float) * _num(share["passes"])).groupby(
            "name").agg(group=("group", "last"), active_passes=("_act", "sum")).reset_index())
        self._blocked(share, ceilings)
        self.by_count += int((share["demand_basis"] == "count").sum())
        self.equal += int(share.loc[share["eup_source"] == "equal", "pass_uuid"].nunique())
        self.missing += int(share["deserved"].isna().sum())

    def _ceilings(self, subs: pd.DataFrame) -> pd.DataFrame:
        """The rows `config_findings` reads for a ceiling that blocks a submitter."""
        s = subs[~subs["is_group"].astype(bool)]
        c, i = _num(s["ceiling"]), _num(s["idle_jobs"]).fillna(0.0)
        hit = s[(c >= 0) & (c < 1.0) & (i > 0)]
        if len(hit):
            self.ceilings.append(hit)
        return hit

    def _blocked(self, share: pd.DataFrame, ceilings: pd.DataFrame) -> None:
        """The share rows `config_findings` reads for a submitter blocked by its factor
        or ceiling: the active rows that got nothing (with `_med`, their group's median
        factor in the pass, which needs all of its rows), each submitter's first active
        row that got something (it is then not blocked), and the rows of the passes
        where a ceiling blocks."""
        act = share["active"].astype(bool)
        f = _num(share["factor"])
        med = f[act].groupby([share.loc[act, "pass_uuid"], share.loc[act, "group"]]
                             ).transform("median")
        got = act & (share["delivered"] > _EPS)
        first_got = got & ~share["name"].where(got).duplicated()
        keep = (act & ~got) | first_got
        if len(ceilings):
            pairs = pd.MultiIndex.from_arrays([ceilings["pass_uuid"], ceilings["name"]])
            keep |= pd.MultiIndex.from_arrays([share["pass_uuid"], share["name"]]).isin(pairs)
        if keep.any():
            self.blocked.append(share.loc[keep, BLOCKED].assign(
                _med=med.reindex(share.index)[keep]))

    # ------------------------------------------------------------ the period's tables

    def share_table(self) -> pd.DataFrame | ShareSeries:
        """The kept per-pass share table (its slices let go: a column at a time, so
        that the table is not held twice); with a sink, what the plots read of it
        (`ShareSeries`), the sink given the empty table when no slice had a row."""
        if self.series is not None:
            if self.series.empty:
                self.sink(self._table([]))
            return self.series
        table = self._table(self.kept)
        self.kept = []
        return table

    def _table(self, parts: list[dict[str, np.ndarray]]) -> pd.DataFrame:
        """The share table of the kept `parts` (emptied as it is made)."""
        if not parts:
            return pd.DataFrame(columns=self.kept_columns or self.share_columns or KEPT)
        dtypes, names = self.kept_dtypes or {}, list(self.kept_columns or ())
        cols = {c: [p[c] for p in parts] for c in names}
        parts.clear()
        # (each column as the slices held it: text stays object, not converted)
        return pd.DataFrame({c: pd.Series(np.concatenate(cols.pop(c)), dtype=dtypes[c],
                                          copy=False) for c in names}, copy=False)

    def flagged_rows(self) -> pd.DataFrame:
        """The share rows flagged starved or over their share, in their order."""
        return _concat(self.flagged, FLAGGED)

    def last_groups(self) -> pd.DataFrame:
        """A row per submitter with its last group (name, group): what `summary_table`
        reads of the share table after the flagged rows."""
        return pd.DataFrame({"name": list(self.last_group),
                             "group": list(self.last_group.values())})


def _concat(parts: list[pd.DataFrame], columns: list[str] | None) -> pd.DataFrame:
    if not parts:
        return pd.DataFrame(columns=columns or [])
    return pd.concat(parts, ignore_index=True) if len(parts) > 1 else parts[0].reset_index(
        drop=True)
