"""The fairness audit (`negotiator-ext audit`): was the pool fair over a period, and to whom
not? Plain DataFrames in (the ledger's passes, as `AuditFrames`), DataFrames and dicts out
(`Audit`); `adapters.audit_data` reads a ledger into the frames, `views.audit` writes the
report. No files, no clock.

Only *complete* passes are analysed (a partial pass may lack the accountant's state or
part of the queue); the others are counted and named in the report. Each analysed pass's
state is taken to last until the next analysed pass (its `interval`; the last pass gets the
median interval), which turns "how many passes" into "for how long".

The yardsticks, per pass (`shares`):

* **entitlement** of an accounting group: its own quota, `GroupObs.real_quota` (the real
  negotiator's EffectiveQuota, rule G4). The root group `<none>` of a pool without
  accounting groups is entitled to the whole pool (`PassRecord.pool_weight`); with groups
  (HGQ), its own quota is what the groups leave (G4: Q - their quotas), which is what the
  real accountant reports for it (`pool_weight` minus the top-level quotas when that
  record is missing).
* **allocation** of a group in a pass: its entitlement, or what its submitters used when
  that is more (a group running on surplus above its quota shares what it got: the real
  negotiator splits a group's whole allocation among its submitters, not only its quota).
* **deserved** share of a submitter: its group's allocation split among the group's
  submitters with demand (below; idle or running jobs, or weighted usage) in inverse
  proportion to their effective priorities (EUP): the fair share by EUP, what the pie
  would give if nobody were limited by demand.
* **demand-capped** share: the same split by water-filling (`water_fill`), each
  submitter capped at its demand, so what one cannot use goes to the others of its group.
  Demand counts each job once: the running weight (WeightedResourcesUsed; the running job
  count when no weighted usage is recorded) plus the idle jobs not running by then, each
  counted as one slot-weight unit (the ledger records how many jobs are idle, not their
  weights). The submitter ads that count the idle jobs can be older than the
  accountant's usage (in a simulation the accountant is the one after the pass's
  matches; in a pool the schedd's ad lags the negotiator), so usage beyond the running
  jobs the ads count (at the ads' weight per running job, from the claimed slots, else
  one unit) is taken off the idle count.
* **delivered**: what the submitter uses, its WeightedResourcesUsed.
* **gap** = delivered - demand-capped (and relative to demand-capped).

A submitter is **starved** in a pass when it has idle jobs while delivered falls short of
its demand-capped share by more than `STARVED_BELOW` (10%) and by at least the noise floor
(`NOISE_FLOOR`, one slot-weight unit: a fraction of a slot is not starvation); **over its
share** when it uses more than `OVER_ABOVE` (10%) and at least the noise floor above it.
A group is **over quota** (borrowing surplus) when its usage exceeds its entitlement, and
**starved** when it is below its quota while it requests more than it uses, each by at
least the noise floor. A group over quota while another is starved *borrows* from it:
the starved <-> borrowing pairs say how often and how long that happened.

How bad: the **severity** of a condition is its amount (shortfall, excess or surplus,
slot-weight units) times how long each pass lasted, summed over the passes it held:
slot-weight seconds (a shortfall of 2 slots for an hour and of 4 for half an hour weigh
the same). The summary (`summary_table`) ranks by it.

Fairness per pass is Jain's index of delivered / demand-capped across the submitters with
demand: (sum x)^2 / (n sum x^2), 1 when each gets the same fraction of what it should.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from .config_findings import config_findings
from .fairshare import jain_index, water_fill
from .figures import limit_figure
from .groups import ROOT
from .records import Adjustment, Comparison, GroupObs, MatchEntry, PassRecord, SubmitterObs

__all__ = ["AuditFrames", "Audit", "STARVED_BELOW", "OVER_ABOVE", "NOISE_FLOOR", "PASS_COLUMNS",
           "frames_from_records", "make_frames", "pass_row", "record_rows",
           "comparison_row", "water_fill", "jain_index", "pass_table", "entitlements",
           "shares", "group_table", "spells", "pairs", "period_means", "fairness_by_pass",
           "largest_gaps", "wait_stats", "wait_samples", "preemptions", "priorities",
           "priority_summary", "most_used", "PRIORITY_LINES", "agreement", "anchor",
           "divergent_passes", "divergence_details",
           "out_of_time",
           "adjustment_table", "summary_table", "ledger_kind", "analyse"]

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
    time); adjustments: the recommendations applied (or tried) in the period."""
    passes: pd.DataFrame
    submitters: pd.DataFrame
    groups: pd.DataFrame
    matches: pd.DataFrame
    comparisons: pd.DataFrame
    adjustments: pd.DataFrame


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
                matches: Sequence[Mapping[str, Any]],
                comparisons: Sequence[Mapping[str, Any]],
                adjustments: Sequence[Adjustment]) -> AuditFrames:
    """AuditFrames from rows (see `pass_row`, `record_rows`, `comparison_row`; submitters
    and groups may come as DataFrames, `adapters.ledger_columns`)."""
    return AuditFrames(
        passes=_frame(passes, PASS_COLUMNS),
        submitters=_frame(submitters, SUBMITTER_COLUMNS),
        groups=_frame(groups, GROUP_COLUMNS),
        matches=_frame(matches, MATCH_COLUMNS),
        comparisons=_frame(comparisons, COMPARISON_COLUMNS),
        adjustments=_frame([dataclasses.asdict(a) for a in adjustments], ADJUSTMENT_COLUMNS))


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
            out[a:b] = water_fill(e, list(w[a:b]), list(caps[a:b]))
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
    for c in ("index", "time", "interval", "pool_weight", "passes"):
        s[c] = s["pass_uuid"].map(by_pass[c])
    ent = entitled[["pass_uuid", "group", "entitlement"]].drop_duplicates(["pass_uuid", "group"])
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


def group_table(passes: pd.DataFrame, entitled: pd.DataFrame, share: pd.DataFrame, *,
                noise_floor: float = NOISE_FLOOR) -> pd.DataFrame:
    """Per (analysed pass, group): quota (its entitlement), usage and requested (the
    recorded accountant's), over quota (borrowing surplus: usage > quota) and starved
    (below quota while requesting more than it uses), each by at least `noise_floor`
    slot-weight units, `surplus` = usage - quota when over, `shortfall` = min(quota,
    requested) - usage when starved, and the sums of its submitters' shares. A pool
    without accounting groups has only the root, whose figures are its submitters'
    (quota: the pool; requested: their demand)."""
    g = entitled.rename(columns={"entitlement": "quota"}).copy()
    pt = passes.assign(passes=_num(passes["weight"]) if "weight" in passes else 1.0)[
        ["uuid", "index", "time", "interval", "passes"]].rename(columns={"uuid": "pass_uuid"})
    g = g.merge(pt, on="pass_uuid", how="inner")
    cols = ["deserved", "demand_capped", "delivered", "gap", "demand"]
    if share.empty:
        sums = pd.DataFrame(columns=["pass_uuid", "group", "submitters_active"] + cols)
    else:
        sums = share.groupby(["pass_uuid", "group"], as_index=False).agg(
            submitters_active=("active", "sum"), deserved=("deserved", "sum"),
            demand_capped=("demand_capped", "sum"), delivered=("delivered", "sum"),
            gap=("gap", "sum"), demand=("demand", "sum"))
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
    f = f.assign(_w=_weights(f)).sort_values(keys + ["index"], kind="stable")
    idx = f["index"].to_numpy()
    new = np.ones(len(f), dtype=bool)
    if len(f) > 1:      # a break in the passes starts a run (the keys part them already)
        new[1:] = idx[1:] != idx[:-1] + 1
    runs = (f.assign(_run=np.cumsum(new))
            .groupby(keys + ["_run"], sort=False)
            .agg(longest_passes=("_w", "sum"), longest_duration=("interval", "sum"))
            .reset_index())
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
    f = df[df[flag].astype(bool)]
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
    a = df[df[starved].astype(bool)][keep + [shortfall]]
    b = df[df[borrowing].astype(bool)][scope_cols + [key, surplus]]
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
    out = out.merge(runs, on=["starved", "borrowing"], how="left")
    return out[_PAIR_COLUMNS].sort_values(
        ["duration", "passes", "starved", "borrowing"], ascending=[False, False, True, True],
        kind="stable").reset_index(drop=True)


def period_means(df: pd.DataFrame, passes: pd.DataFrame, key: str, columns: Sequence[str]
                 ) -> pd.DataFrame:
    """Per `key` value: the time-weighted mean of `columns` over all analysed passes (a
    pass where it is not recorded counts as 0), each pass weighted by its interval (all
    equal when no interval is known, e.g. one pass)."""
    w = passes.set_index("uuid")["interval"].astype(float)
    if w.sum() <= 0:
        w = pd.Series(1.0, index=w.index)
    out = {}
    for c in columns:
        pv = df.pivot_table(index="pass_uuid", columns=key, values=c, aggfunc="sum")
        pv = pv.reindex(w.index).fillna(0.0)
        out[c] = pv.mul(w, axis=0).sum() / w.sum()
    return pd.DataFrame(out).rename_axis(key).reset_index()


# ---------------------------------------------------------------- fairness

_FAIR_COLUMNS = ["pass_uuid", "index", "time", "active", "jain", "largest_gap_name",
                 "largest_gap", "starved", "over_share"]


def fairness_by_pass(share: pd.DataFrame, passes: pd.DataFrame) -> pd.DataFrame:
    """Per analysed pass: the submitters with demand, Jain's index (`jain_index`) of
    delivered / demand-capped across those with a demand-capped share, the submitter with
    the largest absolute gap and its gap, and how many were starved / over their share."""
    out = passes[["uuid", "index", "time"]].rename(columns={"uuid": "pass_uuid"})
    act = share[share["active"].astype(bool)]
    ok = act[act["demand_capped"] > _EPS]
    x = ok["delivered"] / ok["demand_capped"]
    agg = pd.DataFrame({"jain": x.groupby(ok["pass_uuid"]).agg(jain_index)})
    gaps = act[act["gap"].notna()]
    big = gaps.loc[gaps["gap"].abs().groupby(gaps["pass_uuid"]).idxmax()].set_index("pass_uuid")
    u = out["pass_uuid"]
    out["active"] = u.map(act.groupby("pass_uuid").size()).fillna(0).astype(int)
    out["jain"] = u.map(agg["jain"]).astype(float)
    out["largest_gap_name"] = u.map(big["name"])
    out["largest_gap"] = u.map(big["gap"]).astype(float)
    for c in ("starved", "over_share"):
        out[c] = u.map(act.groupby("pass_uuid")[c].sum()).fillna(0).astype(int)
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


# ---------------------------------------------------------------- queue wait, preemption

_WAIT_COLUMNS = ["source", "name", "matches", "p50", "p90", "max", "mean"]


def _with_groups(matches: pd.DataFrame, submitters: pd.DataFrame) -> pd.DataFrame:
    """Matches with their group: the match's own, else the submitter's in that pass."""
    m = matches.copy()
    look = submitters[["pass_uuid", "name", "group"]].rename(
        columns={"name": "submitter", "group": "sub_group"}).drop_duplicates(
        ["pass_uuid", "submitter"])
    m = m.merge(look, on=["pass_uuid", "submitter"], how="left")
    m["group"] = m["group"].where(m["group"].notna(), m["sub_group"]).fillna("(unknown)")
    return m.drop(columns=["sub_group"])


def wait_stats(matches: pd.DataFrame, submitters: pd.DataFrame, by: str = "submitter"
               ) -> pd.DataFrame:
    """Queue wait (seconds the matched job had been idle) per `source` ("shadow": the jobs
    our cycle matched; "real": MatchLog matches with a known wait) and per submitter
    (`by`="submitter") or group (`by`="group"): count, median, 90th percentile (linear
    interpolation), maximum and mean."""
    m = _with_groups(matches, submitters) if len(matches) else matches.assign(group=None)
    m = m[_num(m["wait"]).notna()].assign(wait=lambda d: _num(d["wait"]))
    if m.empty:
        return pd.DataFrame(columns=_WAIT_COLUMNS)
    g = m.groupby(["source", by], sort=True)["wait"]
    out = pd.DataFrame({"matches": g.size(), "p50": g.quantile(0.5), "p90": g.quantile(0.9),
                        "max": g.max(), "mean": g.mean()}).reset_index()
    return out.rename(columns={by: "name"})[_WAIT_COLUMNS]


def wait_samples(matches: pd.DataFrame, submitters: pd.DataFrame, by: str = "submitter",
                 source: str = "shadow") -> dict[str, list[float]]:
    """The waits themselves per submitter or group, for a distribution plot."""
    if matches.empty:
        return {}
    m = _with_groups(matches, submitters)
    m = m[(m["source"] == source) & _num(m["wait"]).notna()]
    return {k: list(_num(v["wait"])) for k, v in m.groupby(by, sort=True)}


_PREEMPT_COLUMNS = ["source", "preemptor", "preempted", "count", "passes"]


def preemptions(matches: pd.DataFrame) -> pd.DataFrame:
    """Who preempted whom: per source (ours / real), preempting submitter and preempted
    user (MatchEntry.preempting), how many matches preempted and in how many passes."""
    p = matches[matches["preempting"].notna() & (matches["preempting"].astype(str) != "")]
    rows = []
    for (src, who, whom), sub in p.groupby(["source", "submitter", "preempting"], sort=True):
        rows.append({"source": src, "preemptor": who, "preempted": whom, "count": len(sub),
                     "passes": int(sub["pass_uuid"].nunique())})
    return pd.DataFrame.from_records(rows, columns=_PREEMPT_COLUMNS).sort_values(
        ["source", "count"], ascending=[True, False], kind="stable").reset_index(drop=True)


# ---------------------------------------------------------------- priorities

_PRIO_COLUMNS = ["pass_uuid", "index", "time", "name", "group", "is_group", "real_rup",
                 "predicted_rup", "real_eup", "shadow_eup", "factor", "drift", "recorded_passes"]


def priorities(passes: pd.DataFrame, submitters: pd.DataFrame) -> pd.DataFrame:
    """Per (analysed pass, accounting principal): the real RUP and EUP and the factor,
    with our accountant's prediction of the RUP (`predicted_rup`, recorded when one real
    priority update ran since the pass before) and the drift between them."""
    by_pass = passes.drop_duplicates("uuid").set_index("uuid")
    # only the columns it gives, the pass's by lookup (a merge copied every column of a
    # day's 1.5 million rows)
    s = submitters.loc[submitters["pass_uuid"].isin(by_pass.index),
                       [c for c in _PRIO_COLUMNS if c in submitters.columns
                        and c not in ("index", "time")]]
    s["index"] = s["pass_uuid"].map(by_pass["index"])
    s["time"] = s["pass_uuid"].map(by_pass["time"])
    for c in ("real_rup", "predicted_rup", "real_eup", "shadow_eup", "factor", "drift"):
        s[c] = _num(s[c])
    s["is_group"] = s["is_group"].astype(bool)
    s["recorded_passes"] = (_num(s["recorded_passes"]).fillna(1.0) if "recorded_passes" in s
                            else 1.0)
    order = np.lexsort((s["name"].to_numpy(str), s["index"].to_numpy()))
    return s.take(order)[_PRIO_COLUMNS].reset_index(drop=True)


PRIORITY_LINES = 8          # submitters whose priorities per pass the report keeps


def most_used(share: pd.DataFrame, prio: pd.DataFrame, n: int) -> list[str]:
    """The `n` submitters (not group records) of `prio` with the most usage over the
    period (delivered, summed over passes), then by name."""
    names = prio.loc[~prio["is_group"].astype(bool), "name"].unique()
    usage = share.groupby("name")["delivered"].sum() if len(share) else pd.Series(dtype=float)
    return sorted(names, key=lambda x: (-float(usage.get(x, 0.0)), x))[:n]


def priority_summary(prio: pd.DataFrame) -> pd.DataFrame:
    """Per principal over the period: the first and last real RUP, the last EUP, the
    smallest and largest factor and the largest |drift| of the real RUP from ours."""
    cols = ["name", "group", "is_group", "passes", "first_rup", "last_rup",
            "last_predicted_rup", "last_eup", "min_factor", "max_factor", "max_abs_drift"]
    if prio.empty:
        return pd.DataFrame(columns=cols)
    p = prio.sort_values("index", kind="stable").assign(
        _w=lambda d: _num(d["recorded_passes"]).fillna(1.0),
        _drift=lambda d: _num(d["drift"]).abs())
    g = p.groupby("name", sort=True)
    # first / last skip NaN: the first and last recorded value of each
    out = pd.DataFrame({
        "group": g["group"].last(), "is_group": g["is_group"].last().astype(bool),
        "passes": g["_w"].sum().round().astype(int),
        "first_rup": g["real_rup"].first(), "last_rup": g["real_rup"].last(),
        "last_predicted_rup": g["predicted_rup"].last(), "last_eup": g["real_eup"].last(),
        "min_factor": g["factor"].min(), "max_factor": g["factor"].max(),
        "max_abs_drift": g["_drift"].max()}).reset_index()
    for c in cols[4:]:
        out[c] = out[c].astype(float)
    return out[cols]


# ---------------------------------------------------------------- shadow agreement

_AGREE_COLUMNS = ["pass_uuid", "anchor", "time", "shadow_pass", "source", "real_cycle_time",
                  "real_matches", "shadow_matches", "agreed", "real_in_shadow",
                  "shadow_in_real", "equivalent_agreement", "count_agreement",
                  "unexplained_agreement", "worst", "max_abs_drift", "notes", "comparisons",
                  "aligned", "why"]


def out_of_time(comparisons: pd.DataFrame) -> pd.DataFrame:
    """The compared real cycles that ran out of time (NEGOTIATOR_MAX_TIME_PER_*): when,
    which schedds and how many submitters, the groups ours served and the real cycle did
    not, and whether the compared pass had predicted it (core.time_limits)."""
    cols = ["pass_uuid", "time", "schedds", "submitters", "groups_not_served",
            "n_groups_not_served", "predicted"]
    rows = []
    for uuid, when, tl in zip(comparisons.get("pass_uuid", []), comparisons.get("time", []),
                              comparisons.get("time_limits", [])):
        real = (tl or {}).get("real") or {}
        if not (real.get("schedds") or real.get("submitters")):
            continue
        said = tl.get("predicted_agrees") or "no prediction"
        groups = list(tl.get("groups_not_served") or ())
        rows.append({"pass_uuid": uuid, "time": when,
                     "schedds": ", ".join(real.get("schedds") or ()),
                     "submitters": len(real.get("submitters") or ()),
                     "groups_not_served": ", ".join(groups),
                     "n_groups_not_served": len(groups), "predicted": said})
    return _frame(rows, cols)


def anchor(uuid: str) -> str:
    """The HTML anchor of a compared pass's details."""
    return f"pass-{uuid[:12]}"


def agreement(comparisons: pd.DataFrame) -> pd.DataFrame:
    """Real-versus-shadow agreement per comparison, oldest first: the recording pass, the
    compared pass (`shadow_pass`), the figures of `core.compare`, and `worst`: the lower
    of equivalent_agreement and count_agreement (NaN for a gap: no figures).
    `comparisons`: how many the row stands for (a summarised hour's row: the means of its
    passes' comparisons, source "hour")."""
    c = comparisons.copy()
    c["comparisons"] = (_num(c["comparisons"]).fillna(1.0) if "comparisons" in c
                        else 1.0)
    for col in ("real_in_shadow", "shadow_in_real", "equivalent_agreement", "count_agreement",
                "max_abs_drift", "time", "unexplained_agreement"):
        c[col] = _num(c[col]) if col in c else float("nan")
    c["aligned"] = [bool(a) if isinstance(a, (bool, int, float)) and a == a else False
                    for a in (c["aligned"] if "aligned" in c else [False] * len(c))]
    c["why"] = [_why(d) for d in (c["disagreements"] if "disagreements" in c
                                  else [()] * len(c))]
    c["worst"] = c[["equivalent_agreement", "count_agreement"]].min(axis=1, skipna=True)
    c["anchor"] = [anchor(u) for u in c["pass_uuid"]]
    c["notes"] = ["; ".join(n) if isinstance(n, (list, tuple)) else (n or "")
                  for n in c["notes"]]
    return c.sort_values("time", kind="stable")[_AGREE_COLUMNS].reset_index(drop=True)


def _why(disagreements: Any) -> str:
    """A comparison's disagreeing submitters counted by class (core.disagreement):
    "2 pool changed, 1 unexplained"; empty when the counts agree or nothing was said."""
    if not isinstance(disagreements, (list, tuple)):
        return ""
    counts: dict[str, int] = {}
    for d in disagreements:
        if isinstance(d, Mapping):
            k = str(d.get("class") or "unexplained")
            counts[k] = counts.get(k, 0) + 1
    return ", ".join(f"{v} {k}" for k, v in counts.items())


def divergent_passes(agree: pd.DataFrame, n: int = 5) -> pd.DataFrame:
    """The `n` comparisons where real and shadow diverged most (lowest `worst`, below 1),
    most divergent first (passes only: a summarised hour keeps no details)."""
    a = agree[agree["worst"].notna() & (agree["worst"] < 1 - _EPS) & (agree["source"] != "hour")]
    return a.sort_values(["worst", "time"], kind="stable").head(n).reset_index(drop=True)


_DETAIL_COLUMNS = ["anchor", "pass_uuid", "kind", "name", "real", "shadow", "difference",
                   "real_share", "shadow_share", "real_limit", "shadow_limit",
                   "real_at_share_limit", "real_out_of_time", "why"]


def divergence_details(comparisons: pd.DataFrame, uuids: Sequence[str]) -> pd.DataFrame:
    """The per-submitter and per-group figures (real vs shadow matches, shares, limits)
    of the comparisons recorded by passes `uuids`, in that order."""
    by = {r["pass_uuid"]: r for r in comparisons.to_dict("records")}
    rows = []
    for u in uuids:
        r = by.get(u)
        if r is None:
            continue
        why = {d.get("submitter"): (d.get("class") or "") + (
            ": " + "; ".join(d.get("changes") or ()) if d.get("changes") else "")
            for d in (r.get("disagreements") or ()) if isinstance(d, Mapping)}
        for kind, table in (("submitter", r.get("per_submitter") or {}),
                            ("group", r.get("per_group") or {})):
            for name, v in sorted(table.items()):
                real = v.get("real", v.get("real_matches"))
                shadow = v.get("shadow", v.get("shadow_matches"))
                rows.append({"anchor": anchor(u), "pass_uuid": u, "kind": kind, "name": name,
                             "real": real, "shadow": shadow,
                             "difference": None if real is None or shadow is None
                             else shadow - real,
                             "real_share": v.get("real_share"),
                             "shadow_share": v.get("shadow_share"),
                             # (a limit HTCondor left without a number: unknown)
                             "real_limit": limit_figure(v.get("real_limit",
                                                              v.get("real_quota"))),
                             "shadow_limit": limit_figure(v.get("shadow_limit",
                                                                v.get("shadow_quota"))),
                             "real_at_share_limit": v.get("real_at_share_limit"),
                             "real_out_of_time": v.get("real_out_of_time"),
                             "why": why.get(name, "") if kind == "submitter" else ""})
    return pd.DataFrame.from_records(rows, columns=_DETAIL_COLUMNS)


# ---------------------------------------------------------------- adjustments

def adjustment_table(adjustments: pd.DataFrame) -> pd.DataFrame:
    """The recommendations applied (or tried) in the period, oldest first, with `result`:
    applied / failed / skipped (the outcome's first word)."""
    a = adjustments.copy()
    a["result"] = [str(o).split(":", 1)[0].strip() for o in a["outcome"]]
    return a.sort_values("applied_at", kind="stable").reset_index(drop=True)


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
                  spelled: Mapping[tuple[str, str], pd.DataFrame] | None = None
                  ) -> pd.DataFrame:
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
    every other row. `spelled`: the `spells` already made, by (kind, flag)."""
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
            flagged = df[df[flag].astype(bool)]
            refs = _num(flagged[ref]).groupby(flagged[key]).mean()
            sp["relative"] = sp["mean_amount"] / sp["name"].map(refs).where(
                lambda r: r > _EPS)
            sp["kind"] = kind
            sp["group"] = (sp["name"].map(df.groupby(key)["group"].last())
                           if kind == "submitter" else "")
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


# ---------------------------------------------------------------- everything

@dataclass
class Audit:
    """The analysis of one pool over one period: `tables` (name -> DataFrame, each
    written as CSV and JSON) and `summary` (plain values for report.json and the page's
    head); `series` holds the per-pass frames the plots draw and `waits` the wait
    samples per submitter and group."""
    pool: str | None
    since: float | None
    until: float | None
    summary: dict[str, Any]
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)
    waits: dict[str, dict[str, list[float]]] = field(default_factory=dict)

    @property
    def empty(self) -> bool:
        """No complete pass in the period: nothing to analyse."""
        return not self.summary["passes"]["analysed"]


def _counts(passes: pd.DataFrame) -> dict[str, int]:
    """Passes by status; a summarised hour counts the passes it stands for."""
    st = passes["status"]

    def n(col: str, default: pd.Series | float) -> int:
        v = _num(passes[col]) if col in passes else pd.Series(np.nan, index=passes.index)
        return int(round(v.fillna(default).sum()))

    total = n("passes", 1.0)
    out = {"total": total, "analysed": n("complete_passes", (st == "complete").astype(float)),
           "partial": n("partial_passes", (st == "partial").astype(float)),
           "failed": n("failed_passes", (st == "failed").astype(float))}
    out["other"] = total - out["analysed"] - out["partial"] - out["failed"]
    return out


def _f(x: Any) -> float | None:
    """A float for JSON (NaN -> None)."""
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def ledger_kind(pool: str | None) -> str:
    """What recorded the pool's passes, from its name: "simulation" (`simulate`'s
    `sim:NAME`: the simulated pool is its own reality, there is no real negotiator),
    "what-if" (a replay, `whatif:NAME`: our cycle under another config beside the real
    pool's figures) or "shadow" (a real pool watched)."""
    p = str(pool or "")
    return "simulation" if p.startswith("sim:") else "what-if" if p.startswith(
        "whatif:") else "shadow"


def analyse(frames: AuditFrames, *, pool: str | None = None, since: float | None = None,
            until: float | None = None, top_gaps: int = 10, divergent: int = 5,
            noise_floor: float = NOISE_FLOOR, kind: str | None = None) -> Audit:
    """The whole audit of `frames` (one pool, one period): every table the report shows
    and its summary. `since` / `until` are only recorded (the frames are already the
    period's). `noise_floor`: the smallest shortfall, excess or surplus (slot-weight
    units) that flags a pass. `kind`: "simulation", "what-if" or "shadow" (default:
    `ledger_kind(pool)`), which words the notes use."""
    if not (noise_floor >= 0 and math.isfinite(noise_floor)):
        raise ValueError(f"noise_floor must be a number >= 0, not {noise_floor!r}")
    kind = kind or ledger_kind(pool)
    sim = kind == "simulation"
    counts = _counts(frames.passes)
    summary: dict[str, Any] = {"pool": pool, "since": since, "until": until, "passes": counts,
                               "kind": kind, "noise_floor": float(noise_floor), "notes": [],
                               "findings": []}
    notes: list[str] = summary["notes"]
    left = counts["total"] - counts["analysed"]
    if left:
        notes.append(f"{left} pass(es) not complete ({counts['partial']} partial, "
                     f"{counts['failed']} failed) were left out of the analysis.")
    pt = pass_table(frames.passes)
    audit = Audit(pool=pool, since=since, until=until, summary=summary)
    t = audit.tables
    t["passes"] = frames.passes.sort_values(["time", "started_at"], kind="stable").reset_index(
        drop=True)
    adj = adjustment_table(frames.adjustments)
    t["adjustments"] = adj
    summary["adjustments"] = {k: int(v) for k, v in adj["result"].value_counts().items()}
    agree = agreement(frames.comparisons)
    div = divergent_passes(agree, divergent)
    t["agreement_by_pass"] = agree
    t["divergent_passes"] = div
    t["divergent_details"] = divergence_details(frames.comparisons, list(div["pass_uuid"]))
    n_comp = _num(agree["comparisons"])

    def weighted(col: str) -> float | None:
        """The mean over comparisons (a summarised hour's row weighs as many as it has)."""
        v = agree[col]
        w = n_comp.where(v.notna(), 0.0)
        return _f((v.fillna(0.0) * w).sum() / w.sum()) if w.sum() > 0 else None

    summary["comparisons"] = {
        "count": int(round(n_comp.sum())),
        "with_figures": int(round(n_comp[agree["worst"].notna()].sum())),
        "mean_equivalent_agreement": weighted("equivalent_agreement"),
        "mean_count_agreement": weighted("count_agreement"),
        # the same with the differences a change of the pool explains taken as agreeing
        # (core.disagreement); None for ledgers that recorded no explanation
        "mean_unexplained_agreement": weighted("unexplained_agreement"),
        "aligned": int(sum(bool(a) for a in agree["aligned"])),
        "with_unexplained": int(sum(1 for v in agree["unexplained_agreement"]
                                    if v == v and v < 1 - _EPS)),
        "lowest": [{"pass": r["pass_uuid"], "anchor": r["anchor"], "time": _f(r["time"]),
                    "worst": _f(r["worst"])} for _, r in div.iterrows()]}
    if pt.empty:
        summary["period"] = {"first_pass": _f(frames.passes["time"].min()),
                             "last_pass": _f(frames.passes["time"].max())}
        return audit
    summary["period"] = {"first_pass": _f(pt["time"].min()), "last_pass": _f(pt["time"].max()),
                         "covered_seconds": _f(pt["interval"].sum())}
    summed = _num(pt["seconds"]).notna() if "seconds" in pt else pd.Series(False, index=pt.index)
    if summed.any():
        summary["hours_summarised"] = int(summed.sum())
        notes.append(
            f"{int(round(pt.loc[summed, 'weight'].sum()))} of the analysed passes are in "
            f"{int(summed.sum())} hourly summaries (passes older than "
            "NEGOTIATOR_EXT_DETAIL_DAYS): each such hour is analysed once, on its means "
            "(usage, jobs and requests averaged over the hour; priorities, factors, quotas "
            "and shares over the passes that recorded them), and what is found there counts "
            "for every complete pass of the hour. Summarised hours keep no match rows (no "
            "queue waits or preemptions for them) and no per-pass comparisons (one row each, "
            "their means).")
    ent = entitlements(pt, frames.groups)
    share = shares(pt, frames.submitters, frames.groups, ent, noise_floor=noise_floor)
    grp = group_table(pt, ent, share, noise_floor=noise_floor)
    t["submitter_shares_by_pass"] = share
    t["group_quota_by_pass"] = grp
    found = config_findings(pt, frames.groups, frames.submitters, grp, share)
    t["config_findings"] = found
    summary["findings"] = [{"kind": k, "name": n, "text": x}
                           for k, n, x in zip(found["kind"], found["name"], found["text"])]
    cols = ["deserved", "demand_capped", "delivered", "gap", "demand"]
    if share.empty:
        sub_period = pd.DataFrame(columns=["name", "group", "active_passes"] + cols
                                  + ["rel_gap", "deserved_pct", "delivered_pct"])
    else:
        # the columns needed only (a copy of the whole share table is 300 MB a day)
        size = share["pool_weight"].where(share["pool_weight"] > 0)
        share_pct = share[["pass_uuid", "name"] + cols].assign(
            deserved_pct=share["deserved"] / size, delivered_pct=share["delivered"] / size)
        sub_period = period_means(share_pct, pt, "name",
                                  cols + ["deserved_pct", "delivered_pct"])
        del share_pct, size
        info = share[["name", "group"]].assign(
            _act=share["active"].astype(float) * _num(share["passes"])).groupby(
            "name").agg(group=("group", "last"), active_passes=("_act", "sum")).reset_index()
        sub_period = info.merge(sub_period, on="name")
        sub_period["rel_gap"] = sub_period["gap"] / sub_period["demand_capped"].where(
            sub_period["demand_capped"] > _EPS)
        sub_period["active_passes"] = sub_period["active_passes"].round().astype(int)
    t["submitter_shares"] = sub_period
    grp_period = period_means(grp, pt, "group", ["quota", "usage", "requested", "deserved",
                                                 "demand_capped", "delivered", "gap"])
    w = _num(grp["passes"])
    flags = grp.assign(_oq=grp["over_quota"].astype(float) * w,
                       _st=grp["starved"].astype(float) * w).groupby("group").agg(
        over_quota_passes=("_oq", "sum"), starved_passes=("_st", "sum")).reset_index()
    grp_period = grp_period.merge(flags, on="group", how="left")
    grp_period["over_quota_passes"] = grp_period["over_quota_passes"].round().astype(int)
    grp_period["starved_passes"] = grp_period["starved_passes"].round().astype(int)
    t["group_quota"] = grp_period
    gpairs = pairs(grp, "group", "starved", "over_quota")
    # the flagged rows only, with the columns pairs reads (not a copy of every share)
    flagged = share.loc[share["starved"].astype(bool) | share["over_share"].astype(bool),
                        ["index", "group", "name", "time", "interval", "passes", "starved",
                         "over_share", "shortfall", "excess"]]
    spairs = pairs(flagged.assign(surplus=flagged["excess"]), "name", "starved",
                   "over_share", scope="group")
    t["starved_borrowing_pairs"] = gpairs
    t["starved_over_share_submitters"] = spairs
    t["starved_submitters"] = spells(share, "name", "starved", "shortfall")
    t["starved_groups"] = spells(grp, "group", "starved", "shortfall")
    t["over_share_submitters"] = spells(share, "name", "over_share", "excess")
    t["over_quota_groups"] = spells(grp, "group", "over_quota", "surplus")
    t["summary"] = summary_table(share, grp, gpairs, spairs, {
        ("submitter", "starved"): t["starved_submitters"],
        ("group", "starved"): t["starved_groups"],
        ("submitter", "over_share"): t["over_share_submitters"],
        ("group", "over_quota"): t["over_quota_groups"]})
    fair = fairness_by_pass(share, pt)
    t["fairness_by_pass"] = fair
    t["largest_gaps"] = largest_gaps(share, top_gaps)
    for by in ("submitter", "group"):
        t[f"wait_by_{by}"] = wait_stats(frames.matches, frames.submitters, by)
        audit.waits[by] = wait_samples(frames.matches, frames.submitters, by)
    t["preemptions"] = preemptions(frames.matches)
    prio = priorities(pt, frames.submitters)
    t["priorities"] = priority_summary(prio)
    # per pass: the submitters the priority plot draws (a day of one-minute passes at
    # 1,000 submitters is 1.5 million rows; every principal's are in the ledger)
    t["priorities_by_pass"] = prio[prio["name"].isin(
        most_used(share, prio, PRIORITY_LINES))].reset_index(drop=True)
    del prio
    hgq = bool(ent["hgq"].any())
    by_count = int((share["demand_basis"] == "count").sum()) if len(share) else 0
    equal = (share.loc[share["eup_source"] == "equal", "pass_uuid"].nunique()
             if len(share) else 0)
    usage_of = ("the simulated accountant's WeightedResourcesUsed" if sim else
                "the real WeightedResourcesUsed")
    notes.append(f"Demand = running weight ({usage_of}) + idle jobs, each job counted once "
                 "(jobs matched after the submitter ads counted them idle count as running "
                 "only); the ledger records how many jobs are idle, not their slot weights, "
                 "so each idle job counts as one slot-weight unit.")
    if by_count:
        notes.append(f"In {by_count} (pass, submitter) observation(s) no weighted usage was "
                     "recorded while jobs ran: the running job count stood for the running "
                     "weight.")
    if equal:
        notes.append(f"In {equal} pass(es) a submitter had no effective priority recorded"
                     + ("" if sim else " (the pool's or ours)")
                     + ": its group's allocation was split equally there.")
    if not hgq:
        notes.append("No accounting groups (HGQ) in these passes: every submitter is "
                     "entitled to a share of the whole pool.")
    no_size = int(pt["pool_weight"].isna().sum())
    if no_size:
        notes.append(f"{no_size} pass(es) have no pool size recorded (ledgers written by "
                     "older versions): the root group's entitlement is unknown there.")
    missing = share["deserved"].isna().sum() if len(share) else 0
    if missing:
        notes.append(f"{int(missing)} (pass, submitter) observation(s) belong to a group whose "
                     "entitlement is unknown (no recorded quota or pool size): they have no "
                     "deserved share and are left out of the fairness index.")
    if not frames.matches.empty and _num(frames.matches["wait"]).isna().all():
        notes.append("No match in these passes has a recorded queue wait.")
    late = out_of_time(frames.comparisons)
    t["out_of_time"] = late
    compared = int(frames.comparisons["real_cycle_time"].notna().sum()) \
        if len(frames.comparisons) else 0
    if len(late):
        newest = late.iloc[-1]
        said = late.loc[late["predicted"] != "no prediction", "predicted"].value_counts().to_dict()
        notes.append(
            f"The real negotiator ran out of time (NEGOTIATOR_MAX_TIME_PER_SCHEDD, "
            f"_PER_SUBMITTER or _PER_CYCLE) in {len(late)} of {compared} compared cycle(s); "
            f"in the newest, {int(newest['n_groups_not_served'])} group(s) our cycle served "
            "got no match from it"
            + (f" ({newest['groups_not_served']})" if newest["groups_not_served"] else "")
            + (f". Predicted beforehand: {said.get('yes', 0)} exactly, "
               f"{said.get('partly', 0)} in part, {said.get('no', 0)} not" if said else "")
            + ". Its cycles stop short where ours runs whole: our matches are what a cycle "
            "with time would do.")
    summary["out_of_time"] = {"cycles": len(late), "compared": compared,
                              "groups_not_served_newest":
                                  int(late.iloc[-1]["n_groups_not_served"]) if len(late) else 0}
    summary.update({
        "hgq": hgq,
        "submitters": int(share["name"].nunique()) if len(share) else 0,
        "groups": sorted(grp.loc[grp["group"] != ROOT, "group"].unique().tolist()),
        "jain": {"mean": _f(fair["jain"].mean()), "min": _f(fair["jain"].min()),
                 "last": _f(fair["jain"].dropna().iloc[-1]) if fair["jain"].notna().any()
                 else None},
        "starved_submitters": t["starved_submitters"]["name"].tolist(),
        "starved_groups": t["starved_groups"]["name"].tolist(),
        "borrowing": sorted(set(gpairs["borrowing"])),
        "borrowing_from": {b: sorted(sub["starved"]) for b, sub in
                           gpairs.groupby("borrowing", sort=True)},
        "over_quota": sorted(set(grp.loc[grp["over_quota"], "group"])),
        "preemptions": {src: int(n) for src, n in
                        t["preemptions"].groupby("source")["count"].sum().items()},
        "starvation_threshold": STARVED_BELOW, "over_share_threshold": OVER_ABOVE,
        "conditions": {st: int(n) for st, n in t["summary"]["status"].value_counts().items()},
    })
    return audit
