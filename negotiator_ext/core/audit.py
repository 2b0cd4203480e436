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

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np
import pandas as pd

from .audit_agreement import (agreement, anchor, divergence_details, divergent_passes,
                              out_of_time)
from .audit_frames import (_EPS, ADJUSTMENT_COLUMNS, COMPARISON_COLUMNS, GROUP_COLUMNS,
                           MATCH_COLUMNS, NOISE_FLOOR, OVER_ABOVE, PASS_COLUMNS,
                           STARVED_BELOW, SUBMITTER_COLUMNS, AuditFrames, _num,
                           comparison_row, frames_from_records, make_frames, pass_row,
                           record_rows)
from .audit_matches import (PRIORITY_LINES, most_used, preemptions, priorities,
                            priority_summary, wait_samples, wait_stats)
from .audit_shares import (entitlements, fairness_by_pass, group_table, largest_gaps,
                           pass_table, shares)
from .audit_series import ShareSeries
from .audit_slices import BLOCKED, SLICE_PASSES, Folds, _concat, slices
from .audit_slices import KEPT as REPORT_SHARE_COLUMNS
from .audit_spells import pairs, period_means, spells, summary_table
from .config_findings import config_findings
from .fairshare import jain_index, water_fill
from .groups import ROOT

__all__ = ["AuditFrames", "Audit", "STARVED_BELOW", "OVER_ABOVE", "NOISE_FLOOR", "PASS_COLUMNS",
           "SUBMITTER_COLUMNS", "GROUP_COLUMNS",
           "MATCH_COLUMNS", "COMPARISON_COLUMNS", "ADJUSTMENT_COLUMNS",
           "frames_from_records", "make_frames", "pass_row", "record_rows",
           "comparison_row", "water_fill", "jain_index", "pass_table", "entitlements",
           "shares", "group_table", "spells", "pairs", "period_means", "fairness_by_pass",
           "largest_gaps", "wait_stats", "wait_samples", "preemptions", "priorities",
           "priority_summary", "most_used", "PRIORITY_LINES", "agreement", "anchor",
           "divergent_passes", "divergence_details",
           "out_of_time",
           "adjustment_table", "summary_table", "ledger_kind", "analyse",
           "SLICE_PASSES", "REPORT_SHARE_COLUMNS"]


# ---------------------------------------------------------------- adjustments

def adjustment_table(adjustments: pd.DataFrame) -> pd.DataFrame:
    """The recommendations applied (or tried) in the period, oldest first, with `result`:
    applied / failed / skipped (the outcome's first word)."""
    a = adjustments.copy()
    a["result"] = [str(o).split(":", 1)[0].strip() for o in a["outcome"]]
    return a.sort_values("applied_at", kind="stable").reset_index(drop=True)



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
            noise_floor: float = NOISE_FLOOR, kind: str | None = None,
            slice_passes: int = SLICE_PASSES,
            share_columns: Sequence[str] | None = None,
            share_sink: Callable[[pd.DataFrame], Any] | None = None) -> Audit:
    """The whole audit of `frames` (one pool, one period): every table the report shows
    and its summary. `since` / `until` are only recorded (the frames are already the
    period's). `noise_floor`: the smallest shortfall, excess or surplus (slot-weight
    units) that flags a pass. `kind`: "simulation", "what-if" or "shadow" (default:
    `ledger_kind(pool)`), which words the notes use. The passes are analysed
    `slice_passes` at a time (`core.audit_slices`): the same audit, in less memory.

    `share_columns`: the columns of the per-pass share table (`submitter_shares_by_pass`)
    kept, all of `shares`' by default; `REPORT_SHARE_COLUMNS` (what the report writes and
    plots, some in single precision, as the file has them) keeps a day at 1,000
    submitters in a third of the memory.

    `share_sink`: called with the per-pass share table's rows a slice of passes at a
    time, as they are made (each a DataFrame of those columns, in the table's order;
    the empty table when there is no row): the table is then not kept, and
    `tables["submitter_shares_by_pass"]` is what the plots read of it
    (`core.audit_series.ShareSeries`)."""
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
    # the passes a slice at a time (core.audit_slices): their shares are folded into
    # what the period's tables are made of, then dropped
    folds = Folds(frames.matches, pt,
                  None if share_columns is None else list(share_columns), share_sink)
    for part, subs in slices(frames, pt, slice_passes):
        folds.add(part, subs, shares(part, subs, frames.groups, ent, noise_floor=noise_floor))
        del subs
    share = folds.share_table()
    grp = group_table(pt, ent, None, noise_floor=noise_floor,
                      sums=pd.concat(folds.sums, ignore_index=True) if folds.sums else None)
    folds.sums.clear()
    t["submitter_shares_by_pass"] = share
    t["group_quota_by_pass"] = grp
    flagged = folds.flagged_rows()
    folds.flagged.clear()
    found = config_findings(pt, frames.groups, _concat(folds.ceilings, SUBMITTER_COLUMNS),
                            grp, _concat(folds.blocked, BLOCKED + ["_med"]))
    t["config_findings"] = found
    folds.blocked.clear()
    summary["findings"] = [{"kind": k, "name": n, "text": x}
                           for k, n, x in zip(found["kind"], found["name"], found["text"])]
    cols = ["deserved", "demand_capped", "delivered", "gap", "demand"]
    if share.empty:
        sub_period = pd.DataFrame(columns=["name", "group", "active_passes"] + cols
                                  + ["rel_gap", "deserved_pct", "delivered_pct"])
    else:
        sub_period = folds.period.means("name")
        info = pd.concat(folds.info, ignore_index=True).groupby("name").agg(
            group=("group", "last"), active_passes=("active_passes", "sum")).reset_index()
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
    # the flagged rows only (not a copy of every share), the excess as the surplus
    spairs = pairs(flagged, "name", "starved", "over_share", scope="group",
                   surplus="excess")
    t["starved_borrowing_pairs"] = gpairs
    t["starved_over_share_submitters"] = spairs
    t["starved_submitters"] = spells(flagged, "name", "starved", "shortfall")
    t["starved_groups"] = spells(grp, "group", "starved", "shortfall")
    t["over_share_submitters"] = spells(flagged, "name", "over_share", "excess")
    t["over_quota_groups"] = spells(grp, "group", "over_quota", "surplus")
    t["summary"] = summary_table(flagged, grp, gpairs, spairs, {
        ("submitter", "starved"): t["starved_submitters"],
        ("group", "starved"): t["starved_groups"],
        ("submitter", "over_share"): t["over_share_submitters"],
        ("group", "over_quota"): t["over_quota_groups"]}, groups=folds.last_groups())
    fair = _concat(folds.fair, None)
    t["fairness_by_pass"] = fair
    t["largest_gaps"] = largest_gaps(_concat(folds.gaps, folds.share_columns), top_gaps)
    looked_up = _concat(folds.looked_up, ["pass_uuid", "name", "group"])
    for by in ("submitter", "group"):
        t[f"wait_by_{by}"] = wait_stats(frames.matches, looked_up, by)
        audit.waits[by] = wait_samples(frames.matches, looked_up, by)
    t["preemptions"] = preemptions(frames.matches)
    t["priorities"] = priority_summary(partials=folds.prio)
    # per pass: the submitters the priority plot draws (a day of one-minute passes at
    # 1,000 submitters is 1.5 million rows; every principal's are in the ledger)
    top = most_used(share, pd.DataFrame({"name": sorted(folds.principals),
                                         "is_group": False}), PRIORITY_LINES)
    drawn = (frames.submitter_rows(names=top) if frames.submitter_rows is not None
             else frames.submitters[frames.submitters["name"].isin(top)])
    prio = priorities(pt, drawn)
    t["priorities_by_pass"] = prio[prio["name"].isin(top)].reset_index(drop=True)
    del prio, drawn
    hgq = bool(ent["hgq"].any())
    by_count, equal = folds.by_count, folds.equal
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
    missing = folds.missing
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
        "submitters": (share.n_names if isinstance(share, ShareSeries)
                       else int(share["name"].nunique())) if len(share) else 0,
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
