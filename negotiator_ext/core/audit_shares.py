"""The fairness audit per pass (`core.audit`): the analysed passes and how long each
lasts, the groups' entitlements, each submitter's deserved, demand-capped and
delivered shares (see `core.audit` for the yardsticks), the groups' quotas and
flags, and the fairness of each pass."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from .audit_frames import _EPS, NOISE_FLOOR, OVER_ABOVE, STARVED_BELOW, _num, lookup
from .fairshare import jain_index, water_fill
from .groups import ROOT


# ---------------------------------------------------------------- passes and shares

def pass_table(passes: pd.DataFrame) -> pd.DataFrame:
    """The analysed (complete) passes, oldest first, with `index` (0, 1, ...) and
    `interval`: seconds until the next analysed pass (the last one: the median interval,
    0 when there is only one), how long its state is taken to last; at most three median
    intervals, so that an outage (no pass for hours) is not counted as time spent in the
    state of the pass before it. A summarised hour's interval is the time its complete
    passes stood for (`seconds`, worked out the same way when they were summarised), and
    its `weight` their number (1 for a pass): what the flags and counts over passes add
    up."""
    p = passes[passes["status"] == "complete"].copy()
    p["time"] = _num(p["time"])
    p["pool_weight"] = _num(p["pool_weight"])
    p = p.sort_values(["time", "started_at"], kind="stable").reset_index(drop=True)
    seconds = _num(p["seconds"]) if "seconds" in p else pd.Series(np.nan, index=p.index)
    single = seconds.isna()
    gaps = p["time"].diff().shift(-1)
    # the median gap between two passes (a summarised hour's gaps are an hour's)
    both = gaps[single & single.shift(-1, fill_value=False)].dropna()
    median = (float(both.median()) if len(both) else
              float(gaps.dropna().median()) if gaps.notna().any() else 0.0)
    p["interval"] = np.where(single, gaps.fillna(median).clip(lower=0.0, upper=3 * median),
                             seconds)
    p["weight"] = (_num(p["complete_passes"]).fillna(1.0) if "complete_passes" in p
                   else 1.0)
    p["index"] = np.arange(len(p))
    return p


def entitlements(passes: pd.DataFrame, groups: pd.DataFrame) -> pd.DataFrame:
    """Per (pass, group): the group's entitlement (its own quota; see the module
    docstring for the root group) and whether the pass has accounting groups (`hgq`).
    Every analysed pass gets a root row."""
    pt = passes[["uuid", "pool_weight"]].rename(columns={"uuid": "pass_uuid"})
    g = groups[["pass_uuid", "name", "real_quota", "real_usage", "real_requested"]]
    g = g[g["pass_uuid"].isin(pt["pass_uuid"])].rename(
        columns={"name": "group", "real_usage": "usage", "real_requested": "requested"})
    for c in ("real_quota", "usage", "requested"):
        g[c] = _num(g[c])
    named = g["group"].astype(str)
    hgq = (named != ROOT).groupby(g["pass_uuid"]).any()
    top = g[(named != ROOT) & ~named.str.contains(".", regex=False)]
    top_sum = top.groupby("pass_uuid")["real_quota"].sum()
    roots = pt[~pt["pass_uuid"].isin(g.loc[named == ROOT, "pass_uuid"])]
    g = pd.concat([g, pd.DataFrame({"pass_uuid": roots["pass_uuid"], "group": ROOT,
                                    "real_quota": np.nan, "usage": np.nan,
                                    "requested": np.nan})], ignore_index=True)
    g = g.merge(pt, on="pass_uuid", how="left")
    g["hgq"] = g["pass_uuid"].isin(hgq.index[hgq.to_numpy(bool)])
    left = (g["pool_weight"] - g["pass_uuid"].map(top_sum).fillna(0.0)).clip(lower=0.0)
    root = g["group"] == ROOT
    g["entitlement"] = np.where(~root, g["real_quota"],
                                np.where(~g["hgq"], g["pool_weight"],
                                         g["real_quota"].where(g["real_quota"].notna(), left)))
    return g[["pass_uuid", "group", "entitlement", "hgq", "real_quota", "usage",
              "requested"]].reset_index(drop=True)


_SHARE_COLUMNS = ["pass_uuid", "index", "time", "interval", "pool_weight", "name", "group",
                  "eup", "eup_source", "factor", "idle_jobs", "running_jobs", "idle_counted",
                  "demand", "demand_basis", "active", "entitlement", "allocation", "deserved",
                  "demand_capped", "delivered", "gap", "rel_gap", "starved", "over_share",
                  "shortfall", "excess", "passes"]


def _capped(ent: np.ndarray, w: np.ndarray, caps: np.ndarray, codes: np.ndarray) -> np.ndarray:
    """Water-filling (`water_fill`) of each run of equal `codes` (rows sorted by code):
    its entitlement ent[first row] split by weights `w` under `caps`."""
    out = np.zeros(len(codes))
    if not len(codes):
        return out
    starts = np.flatnonzero(np.r_[True, codes[1:] != codes[:-1]])
    ends = np.r_[starts[1:], len(codes)]
    for a, b in zip(starts, ends):
        e = ent[a]
        if math.isnan(e):
            out[a:b] = np.nan
        elif b - a == 1:
            out[a] = min(max(e, 0.0), caps[a]) if w[a] > 0 else 0.0
        else:
            # (Python floats, not numpy's scalars: the same arithmetic, faster)
            out[a:b] = water_fill(float(e), w[a:b].tolist(), caps[a:b].tolist())
    return out


def shares(passes: pd.DataFrame, submitters: pd.DataFrame, groups: pd.DataFrame,
           entitled: pd.DataFrame | None = None, *,
           noise_floor: float = NOISE_FLOOR) -> pd.DataFrame:
    """Per (analysed pass, submitter): demand (`idle_counted`: the idle jobs it counts),
    its group's entitlement and allocation, deserved, demand-capped and delivered shares
    (slot-weight units), gap, relative gap, starved / over its share (see the module
    docstring; `noise_floor` in slot-weight units), and how much (`shortfall` =
    demand-capped - delivered when starved, `excess` = delivered - demand-capped when
    over). `passes` is `pass_table`'s output. Group records are not submitters and are
    left out. Active (with demand) means demand > 0. `eup_source` says which priority
    split the group: "real" (the recorded accountant's EUP), "shadow" (ours, when that is
    missing) or "equal" (some active submitter of the group had neither: an equal split
    there)."""
    if entitled is None:
        entitled = entitlements(passes, groups)
    keep = ["pass_uuid", "name", "group", "real_usage", "real_eup", "shadow_eup", "factor",
            "claimed_weight", "idle_jobs", "running_jobs"]
    s = submitters.loc[(submitters["pass_uuid"].isin(passes["uuid"]))
                       & ~submitters["is_group"].astype(bool), keep].copy()
    if s.empty:
        return pd.DataFrame(columns=_SHARE_COLUMNS)
    for c in ("real_usage", "real_eup", "shadow_eup", "factor", "claimed_weight"):
        s[c] = _num(s[c])
    for c in ("idle_jobs", "running_jobs"):
        s[c] = _num(s[c]).fillna(0.0)
    s["real_usage"] = s["real_usage"].fillna(0.0)
    usage, idle, run_n = s["real_usage"], s["idle_jobs"], s["running_jobs"]
    weighted = usage > 0
    # labels as categories: one string each, not one per row (1.4 million in a day)
    s["demand_basis"] = pd.Categorical.from_codes(
        np.where(weighted | (run_n == 0), 0, 1), categories=["weighted", "count"])
    # each job once: usage beyond the running jobs the (older) submitter ads count was
    # matched since, from those ads' idle jobs (weight per running job: the claimed slots')
    claimed = s["claimed_weight"].fillna(0.0)
    per_job = np.where((run_n > 0) & (claimed > 0), claimed / run_n.where(run_n > 0, 1.0), 1.0)
    since = np.where(weighted, np.maximum(usage - run_n * per_job, 0.0) / per_job, 0.0)
    s["idle_counted"] = np.maximum(idle - since, 0.0)
    s["demand"] = np.where(weighted, usage, run_n) + s["idle_counted"]
    s["active"] = s["demand"] > 0
    real_ok = s["real_eup"] > 0
    shadow_ok = s["shadow_eup"] > 0
    s["eup"] = np.where(real_ok, s["real_eup"], np.where(shadow_ok, s["shadow_eup"], np.nan))
    s["eup_source"] = pd.Categorical.from_codes(
        np.where(real_ok, 0, np.where(shadow_ok, 1, 2)),
        categories=["real", "shadow", "none", "equal"])
    pt = passes.assign(passes=_num(passes["weight"]) if "weight" in passes else 1.0)[
        ["uuid", "index", "time", "interval", "pool_weight", "passes"]].rename(
        columns={"uuid": "pass_uuid"})
    # the pass's figures and the group's entitlement by lookup, not merges: a merge
    # copies every row of a day at 1,000 submitters (1.5 million) each time
    by_pass = pt.drop_duplicates("pass_uuid").set_index("pass_uuid")
    cols = ["index", "time", "interval", "pool_weight", "passes"]
    for c, v in lookup(s["pass_uuid"], by_pass, cols).items():
        s[c] = v
    # (the entitlements of these passes only: `entitled` may hold the whole period's)
    ent = entitled.loc[entitled["pass_uuid"].isin(by_pass.index),
                       ["pass_uuid", "group", "entitlement"]].drop_duplicates(
        ["pass_uuid", "group"])
    s["entitlement"] = s[["pass_uuid", "group"]].merge(
        ent, on=["pass_uuid", "group"], how="left")["entitlement"].to_numpy()
    order = np.lexsort((s["name"].to_numpy(str), s["group"].astype(str).to_numpy(),
                        s["index"].to_numpy()))
    s = s.take(order).reset_index(drop=True)
    key = [s["index"], s["group"]]
    act = s["active"]
    s["delivered"] = s["real_usage"]
    # a group on surplus above its quota shares what it got, not only its quota
    used = s["delivered"].groupby(key).transform("sum")
    s["allocation"] = np.where(s["entitlement"].isna(), np.nan,
                               np.maximum(s["entitlement"], used))
    # a group where some active submitter has no EUP at all is split equally
    equal = (act & s["eup"].isna()).groupby(key).transform("any")
    w = np.where(act, np.where(equal, 1.0, 1.0 / s["eup"]), 0.0)
    s.loc[act & equal, "eup_source"] = "equal"
    wsum = pd.Series(w).groupby(key).transform("sum").to_numpy()
    s["deserved"] = np.where(act, s["allocation"] * w / np.where(wsum > 0, wsum, 1.0), 0.0)
    a = s[act]
    codes = a.groupby(["index", "group"], sort=False).ngroup().to_numpy()
    s["demand_capped"] = 0.0
    s.loc[act, "demand_capped"] = _capped(a["allocation"].to_numpy(float), w[act.to_numpy()],
                                          a["demand"].to_numpy(float), codes)
    s["gap"] = s["delivered"] - s["demand_capped"]
    capped = s["demand_capped"].where(s["demand_capped"] > _EPS)
    s["rel_gap"] = s["gap"] / capped
    floor = noise_floor - _EPS
    s["starved"] = ((s["idle_counted"] > 0)
                    & (s["delivered"] < (1 - STARVED_BELOW) * s["demand_capped"] - _EPS)
                    & (s["demand_capped"] - s["delivered"] >= floor))
    s["over_share"] = ((s["delivered"] > _EPS)
                       & (s["delivered"] > (1 + OVER_ABOVE) * s["demand_capped"] + _EPS)
                       & (s["delivered"] - s["demand_capped"] >= floor))
    s["shortfall"] = np.where(s["starved"], s["demand_capped"] - s["delivered"], 0.0)
    s["excess"] = np.where(s["over_share"], s["delivered"] - s["demand_capped"], 0.0)
    return s[_SHARE_COLUMNS]


_GROUP_COLUMNS = ["pass_uuid", "index", "time", "interval", "group", "hgq", "quota",
                  "real_quota", "usage", "requested", "over_quota", "starved", "surplus",
                  "shortfall", "submitters_active", "deserved", "demand_capped", "delivered",
                  "gap", "passes"]


def share_sums(share: pd.DataFrame) -> pd.DataFrame:
    """Per (pass, group) of `share`: its active submitters and the sums of their shares
    (what `group_table` adds to each group's row)."""
    return share.groupby(["pass_uuid", "group"], as_index=False).agg(
        submitters_active=("active", "sum"), deserved=("deserved", "sum"),
        demand_capped=("demand_capped", "sum"), delivered=("delivered", "sum"),
        gap=("gap", "sum"), demand=("demand", "sum"))


def group_table(passes: pd.DataFrame, entitled: pd.DataFrame, share: pd.DataFrame | None,
                *, noise_floor: float = NOISE_FLOOR, sums: pd.DataFrame | None = None
                ) -> pd.DataFrame:
    """Per (analysed pass, group): quota (its entitlement), usage and requested (the
    recorded accountant's), over quota (borrowing surplus: usage > quota) and starved
    (below quota while requesting more than it uses), each by at least `noise_floor`
    slot-weight units, `surplus` = usage - quota when over, `shortfall` = min(quota,
    requested) - usage when starved, and the sums of its submitters' shares. A pool
    without accounting groups has only the root, whose figures are its submitters'
    (quota: the pool; requested: their demand). `sums`: `share_sums` of the share
    table, instead of `share` (made a slice of passes at a time)."""
    g = entitled.rename(columns={"entitlement": "quota"}).copy()
    pt = passes.assign(passes=_num(passes["weight"]) if "weight" in passes else 1.0)[
        ["uuid", "index", "time", "interval", "passes"]].rename(columns={"uuid": "pass_uuid"})
    g = g.merge(pt, on="pass_uuid", how="inner")
    cols = ["deserved", "demand_capped", "delivered", "gap", "demand"]
    if sums is None and share is not None and not share.empty:
        sums = share_sums(share)
    if sums is None or sums.empty:
        sums = pd.DataFrame(columns=["pass_uuid", "group", "submitters_active"] + cols)
    g = g.merge(sums, on=["pass_uuid", "group"], how="left")
    for c in cols + ["submitters_active"]:
        g[c] = _num(g[c]).fillna(0.0)
    g["submitters_active"] = g["submitters_active"].astype(int)
    # without HGQ the root's Accounting record carries no quota or request: its
    # submitters' figures are the ones that mean something
    nohgq = ~g["hgq"].astype(bool)
    g["usage"] = np.where(nohgq | g["usage"].isna(), g["delivered"], g["usage"])
    g["requested"] = np.where(nohgq | g["requested"].isna(), g["demand"], g["requested"])
    floor = max(noise_floor, 0.0) - _EPS
    g["over_quota"] = (g["hgq"].astype(bool) & (g["usage"] > g["quota"] + _EPS)
                       & (g["usage"] - g["quota"] >= floor))
    g["starved"] = (g["hgq"].astype(bool) & (g["usage"] < g["quota"] - _EPS)
                    & (g["requested"] > g["usage"] + _EPS)
                    & (np.minimum(g["quota"], g["requested"]) - g["usage"] >= floor))
    g["surplus"] = np.where(g["over_quota"], g["usage"] - g["quota"], 0.0)
    g["shortfall"] = np.where(g["starved"],
                              np.minimum(g["quota"], g["requested"]) - g["usage"], 0.0)
    return g.sort_values(["index", "group"], kind="stable")[_GROUP_COLUMNS].reset_index(drop=True)



# ---------------------------------------------------------------- fairness

_FAIR_COLUMNS = ["pass_uuid", "index", "time", "active", "jain", "largest_gap_name",
                 "largest_gap", "starved", "over_share"]


def fairness_by_pass(share: pd.DataFrame, passes: pd.DataFrame) -> pd.DataFrame:
    """Per analysed pass: the submitters with demand, Jain's index (`jain_index`) of
    delivered / demand-capped across those with a demand-capped share, the submitter with
    the largest absolute gap and its gap, and how many were starved / over their share."""
    out = passes[["uuid", "index", "time"]].rename(columns={"uuid": "pass_uuid"})
    # (the active rows' columns read, not a copy of every column; grouped by pass once)
    act = share.loc[share["active"].astype(bool).to_numpy(),
                    ["pass_uuid", "name", "delivered", "demand_capped", "gap", "starved",
                     "over_share"]]
    ok = act[act["demand_capped"] > _EPS]
    x = ok["delivered"] / ok["demand_capped"]
    agg = pd.DataFrame({"jain": x.groupby(ok["pass_uuid"]).agg(jain_index)})
    gaps = act[act["gap"].notna()]
    big = gaps.loc[gaps["gap"].abs().groupby(gaps["pass_uuid"]).idxmax()].set_index("pass_uuid")
    u = out["pass_uuid"]
    by_pass = act.groupby("pass_uuid")
    out["active"] = u.map(by_pass.size()).fillna(0).astype(int)
    out["jain"] = u.map(agg["jain"]).astype(float)
    out["largest_gap_name"] = u.map(big["name"])
    out["largest_gap"] = u.map(big["gap"]).astype(float)
    for c in ("starved", "over_share"):
        out[c] = u.map(by_pass[c].sum()).fillna(0).astype(int)
    return out[_FAIR_COLUMNS].reset_index(drop=True)


def largest_gaps(share: pd.DataFrame, n: int = 10) -> pd.DataFrame:
    """The `n` submitters with the largest absolute gap in some pass: each one's largest
    (its pass, figures), largest first (one submitter's many passes would fill the list)."""
    s = share[share["gap"].notna() & (share["gap"].abs() > _EPS)]
    gap = s["gap"].abs()
    best = gap.groupby(s["name"], sort=False).idxmax()      # each one's first largest
    s = s.loc[best].assign(abs_gap=gap[best]).sort_values(
        ["abs_gap", "time", "name"], ascending=[False, True, True], kind="stable")
    return s.head(n)[["time", "pass_uuid", "name", "group", "demand", "deserved",
                      "demand_capped", "delivered", "gap", "rel_gap"]].reset_index(drop=True)


