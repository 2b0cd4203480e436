"""The fairness audit over the period (`core.audit`): for how long and how badly each
submitter or group was starved, over its share or over quota (`spells`), with whom
(`pairs`), the time-weighted means over the period, and the ranked summary of all
of it (`summary_table`)."""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from .audit_frames import _EPS, _num


# ---------------------------------------------------------------- how long, with whom

def _weights(df: pd.DataFrame) -> pd.Series | float:
    """How many passes each row stands for: its `passes` (a summarised hour's complete
    passes, `pass_table`'s weight), 1 where not given."""
    return _num(df["passes"]).fillna(1.0) if "passes" in df else 1.0


def _longest_runs(f: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """Per value of `keys` in `f` (one row per keys and pass `index`, with `interval`,
    and `passes`: how many passes the row stands for, 1 if not given): the longest run
    of consecutive pass indexes, as `longest_passes` and `longest_duration` (the longer
    in passes; of equal ones, the longer in time)."""
    if any(f[k].isna().any() for k in keys):
        f = f.assign(_w=_weights(f)).sort_values(keys + ["index"], kind="stable")
        idx = f["index"].to_numpy()
        new = np.ones(len(f), dtype=bool)
        if len(f) > 1:  # a break in the passes starts a run (the keys part them already)
            new[1:] = idx[1:] != idx[:-1] + 1
        runs = (f.assign(_run=np.cumsum(new))
                .groupby(keys + ["_run"], sort=False)
                .agg(longest_passes=("_w", "sum"), longest_duration=("interval", "sum"))
                .reset_index())
    else:
        # the same, on arrays: the rows in the order sort_values gives them (stable, by
        # the keys' ranks, then the pass), a run ending where the pass breaks or the keys
        # change, the runs in their order summed in the same order (a day's starved
        # submitters: 380,000 rows, sorted and grouped as a frame by name took 40 MB)
        ranks = [pd.factorize(f[k], sort=True)[0] for k in keys]
        order = np.lexsort([f["index"].to_numpy()] + ranks[::-1])
        idx = f["index"].to_numpy()[order]
        new = np.ones(len(f), dtype=bool)
        if len(f) > 1:
            new[1:] = idx[1:] != idx[:-1] + 1
            for r in ranks:
                r = r[order]
                new[1:] |= r[1:] != r[:-1]
        del ranks
        w = _weights(f)
        w = (w.to_numpy(float) if isinstance(w, pd.Series) else np.full(len(f), w))[order]
        run = np.cumsum(new) - 1
        sums = pd.DataFrame({"_w": w, "interval": f["interval"].to_numpy()[order]}).groupby(
            run, sort=False).agg(longest_passes=("_w", "sum"),
                                 longest_duration=("interval", "sum"))
        first = order[np.flatnonzero(new)]
        runs = pd.DataFrame({**{k: f[k].to_numpy()[first] for k in keys},
                             "longest_passes": sums["longest_passes"].to_numpy(),
                             "longest_duration": sums["longest_duration"].to_numpy()})
    runs["longest_passes"] = runs["longest_passes"].round().astype(int)
    runs = runs.sort_values(keys + ["longest_passes", "longest_duration"], kind="stable")
    return runs.groupby(keys, sort=False).tail(1)[keys + ["longest_passes",
                                                          "longest_duration"]]


_SPELL_COLUMNS = ["name", "passes", "duration", "longest_passes", "longest_duration",
                  "first", "last", "mean_amount", "max_amount", "severity"]


def spells(df: pd.DataFrame, key: str, flag: str, amount: str | None = None) -> pd.DataFrame:
    """For each `key` value with `flag` set in some pass: in how many analysed passes,
    for how long (sum of their intervals), the longest streak of consecutive analysed
    passes (passes, duration), the first and last time, the mean and largest `amount`
    over those passes, and the severity: `amount` x interval summed (slot-weight
    seconds). `df` has `index`, `time` and `interval` (as `shares` and `group_table`
    give); a pass where the key is not recorded breaks a streak. Most severe first."""
    # the flagged rows, with only the columns read (a day's starved submitters: 380,000)
    read = [key, "index", "time", "interval"] + [c for c in ("passes", amount)
                                                 if c and c in df and c != key]
    f = df.loc[df[flag].astype(bool).to_numpy(), list(dict.fromkeys(read))]
    if f.empty:
        return pd.DataFrame(columns=_SPELL_COLUMNS)
    f = f.assign(_amt=_num(f[amount]) if amount else np.nan,
                 _iv=_num(f["interval"]), _t=_num(f["time"]), _w=_weights(f))
    f = f.assign(_sev=f["_amt"] * f["_iv"], _wa=f["_amt"] * f["_w"],
                 _wk=f["_w"].where(f["_amt"].notna(), 0.0))
    out = f.groupby(key, sort=True).agg(
        passes=("_w", "sum"), duration=("_iv", "sum"), first=("_t", "min"),
        last=("_t", "max"), _wa=("_wa", "sum"), _wk=("_wk", "sum"), max_amount=("_amt", "max"),
        severity=("_sev", "sum")).reset_index().rename(columns={key: "name"})
    # each row weighs the passes it stands for (a summarised hour's)
    out["mean_amount"] = out["_wa"] / out["_wk"].where(out["_wk"] > 0)
    out["passes"] = out["passes"].round().astype(int)
    if not amount:
        out["severity"] = np.nan
    runs = _longest_runs(f.assign(passes=f["_w"])[[key, "index", "interval", "passes"]]
                         .rename(columns={key: "name"}), ["name"])
    out = out.merge(runs, on="name", how="left")
    return out[_SPELL_COLUMNS].sort_values(
        ["severity", "duration", "passes", "name"], ascending=[False, False, False, True],
        kind="stable", na_position="last").reset_index(drop=True)


_PAIR_COLUMNS = ["starved", "borrowing", "passes", "duration", "longest_passes",
                 "longest_duration", "first", "last", "mean_shortfall", "mean_surplus"]


def pairs(df: pd.DataFrame, key: str, starved: str, borrowing: str,
          scope: str | None = None, shortfall: str = "shortfall",
          surplus: str = "surplus") -> pd.DataFrame:
    """The starved <-> borrowing pairs: for each (starved, borrowing) pair of different
    `key` values flagged in the same pass (and the same `scope`, e.g. group, when given),
    in how many passes, for how long, the longest streak, when first and last, and the
    mean shortfall of the starved one and surplus of the borrowing one over those passes."""
    scope_cols = ["index"] + ([scope] if scope else [])
    keep = scope_cols + [key, "time", "interval"] + (["passes"] if "passes" in df else [])
    # (the rows and columns taken at once: no copy of every column of the flagged rows)
    a = df.loc[df[starved].astype(bool).to_numpy(), keep + [shortfall]]
    b = df.loc[df[borrowing].astype(bool).to_numpy(), scope_cols + [key, surplus]]
    # each starved one with every borrowing one of its passes is a row: a day of
    # one-minute passes with 40 groups starved while 50 borrow is 2.9 million; they are
    # made for some of the starved at a time (each pair's rows, in the same order, are
    # all in one part: the same figures)
    if a.empty or b.empty:
        return pd.DataFrame(columns=_PAIR_COLUMNS)
    # the names (and the scope's) as numbers in their order, which merge, compare, group
    # and sort as the names do, faster (a day's group pairs: 2.9 million rows); the
    # names put back before the pairs are ranked
    names = None
    coded = _coded(a, b, [key] + ([scope] if scope else []))
    if coded is not None:
        a, b, names = coded
    per_row = a[scope_cols].merge(b.groupby(scope_cols).size().rename("_n").reset_index(),
                                  on=scope_cols, how="left")["_n"].fillna(0).to_numpy()
    per_key = pd.Series(per_row).groupby(a[key].to_numpy(), sort=False).sum()
    part = (per_key.cumsum() // PAIR_ROWS).to_numpy()
    outs = [_pairs_of(a[a[key].isin(per_key.index[part == k])], b, key, scope_cols,
                      shortfall, surplus) for k in np.unique(part)]
    outs = [o for o in outs if len(o)]
    if not outs:
        return pd.DataFrame(columns=_PAIR_COLUMNS)
    out = outs[0] if len(outs) == 1 else pd.concat(outs, ignore_index=True)
    if names is not None:
        out["starved"] = names.take(out["starved"].to_numpy()).array
        out["borrowing"] = names.take(out["borrowing"].to_numpy()).array
    return out[_PAIR_COLUMNS].sort_values(
        ["duration", "passes", "starved", "borrowing"], ascending=[False, False, True, True],
        kind="stable").reset_index(drop=True)


# (starved, borrowing, pass) rows made at a time: a day's 2.9 million group pairs in 29
# parts (at 50,000 a part, pandas' cost per call was a third of the pairs' time; the
# peak the same)
PAIR_ROWS = 100_000


def _coded(a: pd.DataFrame, b: pd.DataFrame, columns: list[str]
           ) -> tuple[pd.DataFrame, pd.DataFrame, pd.Index] | None:
    """`a` and `b` with each of `columns` (text) as the rank of its value among both's
    values, and the values of the first column by rank; None (nothing coded) where a
    value is missing or not text, which would not group or sort as its rank does."""
    ranked = []
    for c in columns:
        both = pd.concat([a[c], b[c]], ignore_index=True)
        if both.isna().any() or pd.api.types.infer_dtype(both, skipna=False) != "string":
            return None
        codes, values = pd.factorize(both, sort=True)
        ranked.append((c, codes, values))
    a = a.assign(**{c: codes[:len(a)] for c, codes, _ in ranked})
    b = b.assign(**{c: codes[len(a):] for c, codes, _ in ranked})
    return a, b, ranked[0][2]


def _pairs_of(a: pd.DataFrame, b: pd.DataFrame, key: str, scope_cols: list[str],
              shortfall: str, surplus: str) -> pd.DataFrame:
    """`pairs` of the starved rows `a` with the borrowing rows `b`, unsorted."""
    m = a.merge(b, on=scope_cols, suffixes=("_s", "_b"))
    m = m[m[f"{key}_s"] != m[f"{key}_b"]]
    if m.empty:
        return pd.DataFrame(columns=_PAIR_COLUMNS)
    m = m.rename(columns={f"{key}_s": "starved", f"{key}_b": "borrowing"})
    m = m.drop_duplicates(["starved", "borrowing", "index"])
    m = m.assign(_iv=_num(m["interval"]), _t=_num(m["time"]), _sh=_num(m[shortfall]),
                 _su=_num(m[surplus]), _w=_weights(m))
    m = m.assign(_wsh=m["_sh"] * m["_w"], _wsu=m["_su"] * m["_w"],
                 _ksh=m["_w"].where(m["_sh"].notna(), 0.0),
                 _ksu=m["_w"].where(m["_su"].notna(), 0.0))
    out = m.groupby(["starved", "borrowing"], sort=True).agg(
        passes=("_w", "sum"), duration=("_iv", "sum"), first=("_t", "min"),
        last=("_t", "max"), _wsh=("_wsh", "sum"), _ksh=("_ksh", "sum"),
        _wsu=("_wsu", "sum"), _ksu=("_ksu", "sum")).reset_index()
    out["mean_shortfall"] = out["_wsh"] / out["_ksh"].where(out["_ksh"] > 0)
    out["mean_surplus"] = out["_wsu"] / out["_ksu"].where(out["_ksu"] > 0)
    out["passes"] = out["passes"].round().astype(int)
    runs = _longest_runs(m.assign(passes=m["_w"])[["starved", "borrowing", "index",
                                                   "interval", "passes"]],
                         ["starved", "borrowing"])
    return out.merge(runs, on=["starved", "borrowing"], how="left")


def period_pivots(df: pd.DataFrame, key: str, columns: Sequence[str]
                  ) -> dict[str, pd.DataFrame]:
    """Per column of `columns`: `df`'s values by pass (rows) and `key` value (columns),
    summed; what `period_means` weighs (one slice of the passes at a time).

    As `pivot_table(aggfunc="sum")` gives it, and where each (pass, key value) has one
    row of figures in double precision, laid out directly (pivot_table took a fifth of
    the analysis of a day's passes). pandas sums each group of one value as it adds up
    any group: when the rows come in the pivot's order and the column has no NaN,
    `np.add.reduceat`, which leaves the value itself; else its compensated sum from 0.0,
    which is 0.0 + the value (-0.0 becomes 0.0), 0.0 for NaN. A combination without a
    row is NaN."""
    fast = _pivots_by_layout(df, key, columns)
    if fast is not None:
        return fast
    return {c: df.pivot_table(index="pass_uuid", columns=key, values=c, aggfunc="sum")
            for c in columns}


def _pivots_by_layout(df: pd.DataFrame, key: str, columns: Sequence[str]
                      ) -> dict[str, pd.DataFrame] | None:
    """`period_pivots` laid out directly, or None where it would not be the same (a
    repeated (pass, key value), a missing one, a column not in double precision)."""
    if not len(df) or any(df[c].dtype != np.float64 for c in columns):
        return None
    rows, passes = pd.factorize(df["pass_uuid"], sort=True)
    cols, keys = pd.factorize(df[key], sort=True)
    if (rows < 0).any() or (cols < 0).any():
        return None
    at = rows.astype(np.int64) * len(keys) + cols
    if len(np.unique(at)) != len(at):
        return None
    index = pd.Index(passes, name="pass_uuid")
    names = pd.Index(keys, name=key)
    in_order = bool(np.all(at[1:] > at[:-1]))
    out = {}
    for c in columns:
        v = df[c].to_numpy(np.float64)
        table = np.full(len(passes) * len(keys), np.nan)
        nan = np.isnan(v)
        table[at] = v if in_order and not nan.any() else np.where(nan, 0.0, 0.0 + v)
        out[c] = pd.DataFrame(table.reshape(len(passes), len(keys)), index=index,
                              columns=names, copy=False)
    return out


class PeriodSums:
    """`period_means` folded a slice of passes at a time (`add`, the slices in the
    passes' order), without the whole (passes x `key` values) tables: per column and
    `key` value the weighted values added up pass by pass, in the order and with the
    rounding pandas' sum over the passes of the whole table has. Where pandas would add
    them up otherwise (its table of one `key` value, or of fewer than one per thousand
    passes, is summed pairwise), the slices' tables are kept and summed as a whole."""

    def __init__(self, passes: pd.DataFrame, columns: Sequence[str]):
        w = passes.set_index("uuid")["interval"].astype(float)
        if w.sum() <= 0:
            w = pd.Series(1.0, index=w.index)
        self.w, self.columns = w, list(columns)
        self.names: dict[str, dict] = {c: {} for c in columns}
        self.acc: dict[str, np.ndarray] = {c: np.zeros(0) for c in columns}
        self.first = {c: True for c in columns}
        self.pivots: dict[str, list[pd.DataFrame] | None] = {c: [] for c in columns}

    def add(self, uuids: Sequence[str], pivots: Mapping[str, pd.DataFrame]) -> None:
        """The `period_pivots` of the passes `uuids` (the next ones, in order)."""
        w = self.w.reindex(list(uuids)).to_numpy(float)
        for c in self.columns:
            pv, names = pivots[c], self.names[c]
            for n in pv.columns:
                if n not in names:
                    names[n] = len(names)
            if len(names) > len(self.acc[c]):
                self.acc[c] = np.concatenate([self.acc[c],
                                              np.zeros(len(names) - len(self.acc[c]))])
            kept = self.pivots[c]
            if kept is not None:
                if len(names) == 1 or len(self.w) > 1000 * len(names):
                    kept.append(pv)
                else:
                    self.pivots[c] = None
            rows = np.zeros((len(w), len(names)))
            at = np.fromiter((names[n] for n in pv.columns), dtype=np.intp, count=pv.shape[1])
            rows[:, at] = pv.reindex(list(uuids)).fillna(0.0).to_numpy(float)
            rows *= w[:, None]
            acc = self.acc[c]
            for r in rows:
                if self.first[c]:
                    acc[:] = r
                    self.first[c] = False
                else:
                    acc += r

    def means(self, key: str) -> pd.DataFrame:
        """What `period_means` gives for the passes added."""
        out = {}
        for c in self.columns:
            if self.pivots[c]:
                passes = self.w.rename("interval").rename_axis("uuid").reset_index()
                out[c] = period_means(None, passes, key, [c], pivots=self.pivots).set_index(
                    key)[c]
                continue
            names = self.names[c]
            order = sorted(names)
            out[c] = pd.Series(self.acc[c][[names[n] for n in order]], index=order
                               ) / self.w.sum()
        return pd.DataFrame(out).rename_axis(key).reset_index()


def period_means(df: pd.DataFrame | None, passes: pd.DataFrame, key: str,
                 columns: Sequence[str],
                 pivots: Mapping[str, Sequence[pd.DataFrame]] | None = None) -> pd.DataFrame:
    """Per `key` value: the time-weighted mean of `columns` over all analysed passes (a
    pass where it is not recorded counts as 0), each pass weighted by its interval (all
    equal when no interval is known, e.g. one pass). `pivots`: the `period_pivots` of
    slices of the passes, instead of `df`."""
    w = passes.set_index("uuid")["interval"].astype(float)
    if w.sum() <= 0:
        w = pd.Series(1.0, index=w.index)
    out = {}
    for c in columns:
        if pivots is None:
            pv = df.pivot_table(index="pass_uuid", columns=key, values=c, aggfunc="sum")
        else:
            parts = list(pivots[c])
            pv = parts[0]
            if len(parts) > 1:
                pv = pd.concat(parts).sort_index(axis=1)
                # laid out as pivot_table lays out its table (a pass's row in one run):
                # the sums below add the passes up in the same order, to the same bits
                pv = pd.DataFrame(np.ascontiguousarray(pv.to_numpy(float)), index=pv.index,
                                  columns=pv.columns, copy=False)
        pv = pv.reindex(w.index).fillna(0.0)
        out[c] = pv.mul(w, axis=0).sum() / w.sum()
    return pd.DataFrame(out).rename_axis(key).reset_index()


# ---------------------------------------------------------------- summary

_SUMMARY_COLUMNS = ["rank", "kind", "name", "group", "status", "severity", "passes",
                    "duration", "longest_passes", "longest_duration", "first", "last",
                    "mean_amount", "max_amount", "relative", "with", "with_count"]
# the order of the statuses among equally severe rows, and "over quota" (surplus nobody
# else asked for: no one was starved by it) after every problem
_STATUS_ORDER = {"starved": 0, "borrowing": 1, "over share": 2, "over quota": 3}


def _partner_lists(pair: pd.DataFrame, col: str, other: str, amount: str
                   ) -> dict[str, list[str]]:
    """For each `col` value of `pair`: its partners (`other`), the ones that matter
    first: the most of `amount` (the partner's mean surplus or shortfall while
    together) times how long together, then the longest together, then by name; as
    'name (N passes)'."""
    out: dict[str, list[str]] = {}
    if pair.empty:
        return out
    weight = (_num(pair[amount]).fillna(0.0) * _num(pair["duration"]).fillna(0.0))
    p = pair.assign(_w=weight).sort_values(
        [col, "_w", "passes", other], ascending=[True, False, False, True], kind="stable")
    for name, o, n in zip(p[col], p[other], p["passes"]):
        out.setdefault(name, []).append(f"{o} ({int(n)} pass{'es' if n != 1 else ''})")
    return out


def summary_table(share: pd.DataFrame, grp: pd.DataFrame, group_pairs: pd.DataFrame,
                  submitter_pairs: pd.DataFrame,
                  spelled: Mapping[tuple[str, str], pd.DataFrame] | None = None,
                  groups: pd.DataFrame | None = None) -> pd.DataFrame:
    """Who is over quota, borrowing, or starved, ranked: one row per (group or
    submitter, status) with its severity (slot-weight seconds: the amount times each
    pass's interval, summed), how many passes, for how long, the longest streak, when
    first and last, how much (mean and largest shortfall or excess, slot-weight units;
    `relative`: the mean over the mean quota or demand-capped share of those passes) and
    with whom (`with`: the list of every partner as 'name (N passes)', the ones that
    matter first: the partner's surplus or shortfall times how long together; the
    files join it with ', '; `with_count`: how many):
    the borrowing groups of a starved group and the other way round; for submitters,
    the others of the same group.

    Statuses: group "starved", group "borrowing" (over quota while another group was
    starved) or "over quota" (the surplus nobody else asked for), submitter "starved",
    submitter "over share". `rank` 1 is the most severe (of equal severities, the larger
    amount summed over the passes); a group over quota that starved nobody comes after
    every other row. `spelled`: the `spells` already made, by (kind, flag). `groups`:
    rows (name, group) taken as coming after `share`'s for each submitter's group (its
    last), when `share` holds only some of the share table's rows (the flagged ones)."""
    parts = []
    for df, key, kind, ref, conds, prs in (
            (grp, "group", "group", "quota",
             (("starved", "shortfall", "starved"), ("over_quota", "surplus", None)),
             group_pairs),
            (share, "name", "submitter", "demand_capped",
             (("starved", "shortfall", "starved"), ("over_share", "excess", "over share")),
             submitter_pairs)):
        if df.empty:
            continue
        for flag, amount, status in conds:
            sp = (spelled or {}).get((kind, flag))
            sp = spells(df, key, flag, amount) if sp is None else sp.copy()
            if sp.empty:
                continue
            flagged = df.loc[df[flag].astype(bool).to_numpy(), [key, ref]]
            refs = _num(flagged[ref]).groupby(flagged[key]).mean()
            sp["relative"] = sp["mean_amount"] / sp["name"].map(refs).where(
                lambda r: r > _EPS)
            sp["kind"] = kind
            if kind == "submitter":
                named = df if groups is None else pd.concat(
                    [df[[key, "group"]], groups[[key, "group"]]], ignore_index=True)
                sp["group"] = sp["name"].map(named.groupby(key)["group"].last())
            else:
                sp["group"] = ""
            if status == "starved":
                partners = _partner_lists(prs, "starved", "borrowing", "mean_surplus")
            else:
                partners = _partner_lists(prs, "borrowing", "starved", "mean_shortfall")
            lists = [partners.get(n, []) for n in sp["name"]]
            sp["with"] = lists
            sp["with_count"] = [len(x) for x in lists]
            sp["status"] = status if status else ["borrowing" if x else "over quota"
                                                  for x in lists]
            parts.append(sp)
    if not parts:
        return pd.DataFrame(columns=_SUMMARY_COLUMNS)
    out = pd.concat(parts, ignore_index=True)
    out["_benign"] = out["status"] == "over quota"
    out["_o"] = out["status"].map(_STATUS_ORDER)
    # equal severities (passes of no known length: a single pass) by the amount summed
    out["_total"] = out["mean_amount"] * out["passes"]
    out = out.sort_values(["_benign", "severity", "_total", "_o", "duration", "name"],
                          ascending=[True, False, False, True, False, True], kind="stable",
                          na_position="last").reset_index(drop=True)
    out["rank"] = np.arange(1, len(out) + 1)
    return out[_SUMMARY_COLUMNS]


