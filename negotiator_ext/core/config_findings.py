"""The configuration findings of the fairness audit: what in the pool's configuration
makes fairness impossible or odd, whatever the negotiator does. Found in the ledger's
figures (the Accounting ads' ConfigQuota and EffectiveQuota, the pool size, each
submitter's factor, ceiling, demand and usage), so they hold for the passes analysed:

* **quotas over the pool**: the top-level groups' static quotas (ConfigQuota above 1:
  GROUP_QUOTA_<group>) add up to more than the pool. The real negotiator scales each
  down to its part of the pool (GroupEntry::hgq_assign_quotas, unless
  NEGOTIATOR_ALLOW_QUOTA_OVERSUBSCRIPTION), so every group with demand for its quota is
  short of it by design; with oversubscription allowed, the quotas applied
  (EffectiveQuota) add up to more than the pool and not all can be met at once. Dynamic
  quotas (GROUP_QUOTA_DYNAMIC_<group>, ConfigQuota at most 1) adding up to more than 1
  are scaled the same way.
* **quota 0, demand, nothing got**: a group with quota 0 that requested slots in some
  passes and used none in any of them: it runs only on surplus
  (GROUP_ACCEPT_SURPLUS) and got none.
* **blocked submitter**: a submitter with idle jobs whose Ceiling is 0 (it may use
  nothing), or whose priority factor leaves it less than one slot of its group's
  allocation (its deserved share) while it got nothing in every pass it had demand.

Plain DataFrames in, a DataFrame out (`FINDING_COLUMNS`, most important first); no
files, no clock.
"""

from __future__ import annotations

import pandas as pd

from .groups import ROOT

__all__ = ["FINDING_COLUMNS", "config_findings"]

FINDING_COLUMNS = ["kind", "name", "passes", "first", "last", "configured", "available",
                   "text"]
_EPS = 1e-9


def _fmt(x: float) -> str:
    """A figure for a sentence: whole numbers as such (2,900), others to two decimals
    (24.89), a small one to two significant digits (0.012)."""
    x = float(x)
    if abs(x - round(x)) < 1e-9 or abs(x) >= 100:
        return f"{x:,.0f}"
    return f"{x:,.2f}" if abs(x) >= 0.1 else f"{x:.2g}"


def _n(s: pd.Series) -> pd.Series:
    return pd.to_numeric(s, errors="coerce").astype(float)


def _quotas_over_pool(passes: pd.DataFrame, groups: pd.DataFrame) -> list[dict]:
    g = groups[groups["pass_uuid"].isin(passes["uuid"])]
    named = g["name"].astype(str)
    top = g[(named != ROOT) & ~named.str.contains(".", regex=False)].assign(
        cq=lambda d: _n(d["config_quota"]), rq=lambda d: _n(d["real_quota"]))
    if top.empty:
        return []
    pt = passes.groupby("uuid", sort=False)[["pool_weight", "time"]].first()
    size = _n(pt["pool_weight"])
    when = _n(pt["time"])
    static = top[top["cq"] > 1.0]
    dynamic = top[(top["cq"] > 0) & (top["cq"] <= 1.0)]
    rows = []
    for what, sums, limit, text in (
            ("static quotas over the pool", static.groupby("pass_uuid")["cq"].sum(), size,
             "The top-level groups' static quotas (GROUP_QUOTA_*) add up to {c} on a pool of "
             "{a}: the negotiator scales each down to {r:.0%} of it (unless "
             "NEGOTIATOR_ALLOW_QUOTA_OVERSUBSCRIPTION), so any group that asks for its "
             "configured quota is short of it, and starvation is certain when they all ask."),
            ("dynamic quotas over 1", dynamic.groupby("pass_uuid")["cq"].sum(),
             pd.Series(1.0, index=size.index),
             "The top-level groups' dynamic quotas (GROUP_QUOTA_DYNAMIC_*) add up to {c} "
             "(more than 1, the whole pool): the negotiator scales each down to {r:.0%} of "
             "its configured fraction."),
            ("quotas applied over the pool", top.groupby("pass_uuid")["rq"].sum(), size,
             "The quotas the negotiator applied (EffectiveQuota) add up to {c} on a pool of "
             "{a} (NEGOTIATOR_ALLOW_QUOTA_OVERSUBSCRIPTION): not every group can get its "
             "quota at once.")):
        lim = limit.reindex(sums.index)
        over = sums[(sums > lim + 1e-6) & lim.notna() & (lim > 0)]
        if over.empty:
            continue
        if what == "quotas applied over the pool" and any(
                r["kind"] == "static quotas over the pool" for r in rows):
            continue        # the static sum over the pool says it already
        worst = over.idxmax()
        c, a = float(over[worst]), float(lim[worst])
        t = when.reindex(over.index)
        rows.append({"kind": what, "name": "(top-level groups)", "passes": len(over),
                     "first": float(t.min()), "last": float(t.max()), "configured": c,
                     "available": a, "text": text.format(c=_fmt(c), a=_fmt(a), r=a / c)})
    return rows


def _quota_zero(passes: pd.DataFrame, grp: pd.DataFrame) -> list[dict]:
    if grp.empty:
        return []
    g = grp[grp["hgq"].astype(bool) & (grp["group"] != ROOT)].assign(
        q=lambda d: _n(d["quota"]), u=lambda d: _n(d["usage"]), r=lambda d: _n(d["requested"]),
        t=lambda d: _n(d["time"]), w=lambda d: _n(d["passes"]).fillna(1.0))
    asked = g[(g["r"] > g["u"] + _EPS) & (g["q"].abs() <= _EPS)]
    if asked.empty:
        return []
    rows = []
    for name, sub in asked.groupby("group", sort=True):
        if (sub["u"] > _EPS).any():
            continue
        rows.append({"kind": "quota 0, nothing got", "name": name,
                     "passes": int(round(sub["w"].sum())), "first": float(sub["t"].min()),
                     "last": float(sub["t"].max()), "configured": 0.0,
                     "available": float(sub["r"].mean()),
                     "text": f"Group {name} has quota 0 and asked for {_fmt(sub['r'].mean())} "
                             f"slots on average in {int(round(sub['w'].sum()))} passes, and "
                             "got nothing: it can only run on surplus (GROUP_ACCEPT_SURPLUS) "
                             "and got none."})
    return rows


def _blocked(submitters: pd.DataFrame, share: pd.DataFrame) -> list[dict]:
    if share.empty:
        return []
    rows = []
    s = submitters[~submitters["is_group"].astype(bool)]
    ceil = s.assign(c=_n(s["ceiling"]), i=_n(s["idle_jobs"]).fillna(0.0))
    ceil = ceil[(ceil["c"] >= 0) & (ceil["c"] < 1.0) & (ceil["i"] > 0)]
    t = share.groupby(["pass_uuid", "name"], sort=False)["time"].first()
    for name, sub in ceil.groupby("name", sort=True):
        when = t.reindex(list(zip(sub["pass_uuid"], sub["name"]))).dropna()
        if when.empty:
            continue
        rows.append({"kind": "blocked by its ceiling", "name": name, "passes": len(when),
                     "first": float(when.min()), "last": float(when.max()),
                     "configured": float(sub["c"].iloc[-1]), "available": 0.0,
                     "text": f"Submitter {name} has Ceiling {_fmt(float(sub['c'].iloc[-1]))} "
                             f"(condor_userprio -setceiling) and had idle jobs in {len(when)} "
                             "passes: it can use no slot at all."})
    a = share.loc[share["active"].astype(bool),
                  ["pass_uuid", "name", "group", "factor", "delivered", "deserved", "passes",
                   "time"] + (["_med"] if "_med" in share else [])].assign(
        f=lambda d: _n(d["factor"]))
    if a.empty:
        return rows
    if "_med" not in a:     # (the share rows of a slice of passes bring their group's)
        a = a.assign(_med=a.groupby(["pass_uuid", "group"])["f"].transform("median"))
    per = a.groupby("name", sort=True).agg(
        got=("delivered", "max"), deserved=("deserved", "mean"), factor=("f", "max"),
        median=("_med", "median"), passes=("passes", "sum"), first=("time", "min"),
        last=("time", "max"))
    hit = per[(per["got"] <= _EPS) & (per["deserved"] < 1.0) & (per["factor"] > 1.0)
              & (per["factor"] > per["median"] + _EPS)]
    done = {r["name"] for r in rows}
    for name, r in hit.iterrows():
        if name in done:
            continue
        rows.append({"kind": "blocked by its factor", "name": name,
                     "passes": int(round(r["passes"])), "first": float(r["first"]),
                     "last": float(r["last"]), "configured": float(r["factor"]),
                     "available": float(r["deserved"]),
                     "text": f"Submitter {name} has priority factor {_fmt(r['factor'])} "
                             f"(its group's usual: {_fmt(r['median'])}), which leaves it "
                             f"{_fmt(r['deserved'])} of a slot of its group's allocation: it "
                             f"got nothing in the {int(round(r['passes']))} passes it had "
                             "demand."})
    return rows


_ORDER = {"static quotas over the pool": 0, "quotas applied over the pool": 0,
          "dynamic quotas over 1": 0, "quota 0, nothing got": 1, "blocked by its ceiling": 2,
          "blocked by its factor": 3}


def config_findings(passes: pd.DataFrame, groups: pd.DataFrame, submitters: pd.DataFrame,
                    grp: pd.DataFrame, share: pd.DataFrame) -> pd.DataFrame:
    """The findings (see the module docstring), most important first. `passes`: the
    analysed passes (`core.audit.pass_table`); `groups` / `submitters`: the ledger's
    GroupObs / SubmitterObs rows; `grp` / `share`: `core.audit.group_table` / `shares`
    (or the rows of them these findings read, `core.audit_slices.Folds`: then `share`
    brings `_med`, the median factor of each row's group in its pass).
    Columns: kind, name (a group, a submitter, or "(top-level groups)"), in how many
    passes, first and last time, the configured figure (quota sum, quota, ceiling or
    factor) and what was available (pool size, mean request or deserved share), and the
    text the page shows."""
    rows = (_quotas_over_pool(passes, groups) + _quota_zero(passes, grp)
            + _blocked(submitters, share))
    out = pd.DataFrame.from_records(rows, columns=FINDING_COLUMNS)
    if out.empty:
        return out
    out["_o"] = out["kind"].map(_ORDER).fillna(9)
    return out.sort_values(["_o", "passes", "name"], ascending=[True, False, True],
                           kind="stable").drop(columns="_o").reset_index(drop=True)
