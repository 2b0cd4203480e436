"""Hourly summaries: how `Ledger.summarise` folds one whole hour's passes into one row
per hour, submitter and group (`_SUBMITTER_AGG`, `_GROUP_AGG`), and how the readers put
the hours among the passes. See adapters/ledger.py."""

from __future__ import annotations

import json
from typing import Any, Mapping, NamedTuple, Sequence

from ..core.records import Comparison
from .ledger_rows import _one_line


HOUR = 3600

# How each SubmitterObs / GroupObs field is summarised over one hour's complete passes,
# each pass weighing the time it stands for (`_intervals`, as the audit weighs a pass):
#   "mean"   the hour's time-weighted mean, a pass that did not record the principal (or
#            the figure) counting as 0: what it had on average over the hour (usage,
#            jobs, weights, what our cycle allocated);
#   "level"  the time-weighted mean over the passes that recorded it (priorities,
#            factors, quotas, shares, limits, drift);
#   "sum"    the hour's total (match counts);
#   "last"   the newest pass's value (group, floor, ceiling, leases, usage times).
# `hour_submitters` and `hour_groups` (schema step 9) have one column for each.
_SUBMITTER_AGG = {
    "group": "last", "is_group": "last", "factor": "level", "policy_factor": "level",
    "factor_lease_expires": "last", "floor": "last", "floor_lease_expires": "last",
    "ceiling": "last", "ceiling_lease_expires": "last", "real_rup": "level",
    "real_eup": "level", "real_usage": "mean", "resources_used": "mean",
    "hier_usage": "mean", "real_share": "level", "real_limit": "level",
    "last_usage_time": "last", "begin_usage_time": "last", "claimed_weight": "mean",
    "idle_jobs": "mean", "running_jobs": "mean", "shadow_eup": "level",
    "shadow_share": "level", "shadow_limit": "level", "shadow_matches": "sum",
    "shadow_match_weight": "mean", "real_matches": "sum", "predicted_rup": "level",
    "shadow_submitter_limit": "level", "drift": "level"}
_GROUP_AGG = {
    "real_quota": "level", "config_quota": "level", "real_usage": "mean",
    "real_requested": "mean", "shadow_quota": "level", "shadow_allocated": "mean",
    "shadow_usage_after": "mean", "shadow_matches": "sum", "real_matches": "sum"}
# the comparison figures an hour keeps as means (a [sum, count] pair each)
_COMPARISON_MEANS = ("real_in_shadow", "shadow_in_real", "count_agreement",
                     "equivalent_agreement", "real_duration", "unexplained_agreement")
_COMPARISON_SUMS = ("real_matches", "shadow_matches", "agreed", "agreed_equivalent",
                    "real_cycles_between")
_REASONS_KEPT = 10      # the most frequent reasons of an hour's partial and failed passes


def hour_key(pool: str, hour: int) -> str:
    """The key of an hourly summary where readers expect a pass uuid: '<epoch>h-<pool>'
    (its first 12 characters tell hours apart)."""
    return f"{int(hour)}h-{pool}"


def _hour_of(t: float) -> int:
    return int(t // HOUR) * HOUR


def _pass_time(row: Mapping[str, Any]) -> float:
    """A pass's time as the audit places it: its snapshot's, else its start."""
    t = row.get("snapshot_time")
    return float(t if t is not None else row["started_at"])


def _intervals(times: Sequence[float], after: float | None, median: float) -> list[float]:
    """How long each of an hour's complete passes (`times`, ascending) stands for, as the
    audit weighs a pass (`core.audit.pass_table`): until the next complete pass (`after`:
    the first one past the hour, None when there is none; then the median), at most
    three medians (an outage is not time spent in the state of the pass before it)."""
    out = []
    for t, n in zip(times, [*times[1:], after]):
        gap = median if n is None else n - t
        out.append(min(max(gap, 0.0), 3 * median))
    return out


class _Obs(NamedTuple):
    """One principal's row in one pass (or in an hour summarised before), for
    `_aggregate`: `weight` for "mean" figures, `level_weight` for "level" ones."""
    row: Mapping[str, Any]
    weight: float
    level_weight: float
    time: float
    passes: int


def _aggregate(obs: Sequence[_Obs], spec: Mapping[str, str], total: float) -> dict[str, Any]:
    """One principal's hour row from its observations (`_SUBMITTER_AGG` / `_GROUP_AGG`);
    `total`: the weight of the whole hour (the "mean" figures' denominator)."""
    out: dict[str, Any] = {}
    for col, how in spec.items():
        known = [(o, o.row[col]) for o in obs if o.row.get(col) is not None]
        if not known:
            out[col] = None
        elif how == "last":
            out[col] = max(enumerate(known), key=lambda x: (x[1][0].time, x[0]))[1][1]
        elif how == "sum":
            out[col] = sum(v for _, v in known)
        elif how == "mean":
            out[col] = (sum(float(v) * o.weight for o, v in known) / total if total > 0
                        else sum(float(v) for _, v in known) / len(known))
        else:
            w = sum(o.level_weight for o, _ in known)
            out[col] = (sum(float(v) * o.level_weight for o, v in known) / w if w > 0
                        else sum(float(v) for _, v in known) / len(known))
    out["passes"] = sum(o.passes for o in obs)
    return out


def _merge_counts(a: Mapping[str, Any] | None, b: Mapping[str, Any]) -> dict[str, Any]:
    """Two of an hour's JSON aggregates (real cycles, comparisons, reasons) as one:
    numbers added, [sum, count] pairs added, "longest"/"max_abs_drift" the larger, dicts
    merged the same way."""
    out = dict(a or {})
    for k, v in b.items():
        old = out.get(k)
        if old is None:
            out[k] = v
        elif k in ("longest", "max_abs_drift"):
            out[k] = max(old, v)
        elif isinstance(v, dict):
            out[k] = _merge_counts(old, v)
        elif isinstance(v, list):
            out[k] = [x + y for x, y in zip(old, v)]
        else:
            out[k] = old + v
    return out


def _cycles_summary(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """What an hour keeps of the real cycles its passes recorded."""
    if not rows:
        return {}
    durations = [float(r["duration"]) for r in rows if r.get("duration") is not None]
    out_of_time = sum(1 for r in rows
                      if json.loads(r.get("submitters_out_of_time") or "[]")
                      or json.loads(r.get("schedds_out_of_time") or "[]"))
    return {"count": len(rows),
            "matches": sum(int(r["matches"]) for r in rows if r.get("matches") is not None),
            "duration": [sum(durations), len(durations)],
            "longest": max(durations, default=0.0), "out_of_time": out_of_time}


def _comparisons_summary(comps: Sequence[Comparison]) -> dict[str, Any]:
    """What an hour keeps of the comparisons its passes recorded: how many, the sums of
    the match counts, each agreement figure's [sum, count], the largest drift, the
    sources and how many compared real cycles ran out of time."""
    if not comps:
        return {}
    out: dict[str, Any] = {
        "count": len(comps),
        "compared": sum(1 for c in comps if c.real_cycle_time is not None),
        "newest_real_cycle": max((c.real_cycle_time for c in comps
                                  if c.real_cycle_time is not None), default=None),
        "sums": {k: sum(getattr(c, k) or 0 for c in comps) for k in _COMPARISON_SUMS},
        "means": {k: [sum(getattr(c, k) for c in comps if getattr(c, k) is not None),
                      sum(1 for c in comps if getattr(c, k) is not None)]
                  for k in _COMPARISON_MEANS},
        "sources": {},
        "aligned": sum(1 for c in comps if c.aligned),
        "changed": sum(1 for c in comps if c.changes),
        "out_of_time": sum(1 for c in comps
                           if ((c.time_limits or {}).get("real") or {}).get("schedds")
                           or ((c.time_limits or {}).get("real") or {}).get("submitters"))}
    drifts = [c.max_abs_drift for c in comps if c.max_abs_drift is not None]
    if drifts:
        out["max_abs_drift"] = max(drifts)
    for c in comps:
        out["sources"][c.source] = out["sources"].get(c.source, 0) + 1
    if out["newest_real_cycle"] is None:
        del out["newest_real_cycle"]
    return out


def _hour_comparison(key: str, summary: Mapping[str, Any]) -> Comparison | None:
    """An hour's comparisons as one Comparison (`shadow_pass` the hour's key): the match
    counts summed, each agreement figure the mean over the comparisons that had it,
    source "hour"; None when its passes compared nothing."""
    if not summary or not summary.get("count"):
        return None
    sums, means = summary.get("sums", {}), summary.get("means", {})

    def mean(k: str) -> float | None:
        s, n = means.get(k, (0, 0))
        return s / n if n else None

    compared = summary.get("compared", 0)
    return Comparison(
        shadow_pass=key, real_cycle_time=summary.get("newest_real_cycle"),
        real_cycles_between=int(sums.get("real_cycles_between", 0)),
        real_matches=int(sums.get("real_matches", 0)) if compared else None,
        shadow_matches=int(sums.get("shadow_matches", 0)),
        agreed=int(sums.get("agreed", 0)) if means.get("real_in_shadow", (0, 0))[1] else None,
        real_in_shadow=mean("real_in_shadow"), shadow_in_real=mean("shadow_in_real"),
        count_agreement=mean("count_agreement"), source="hour",
        max_abs_drift=summary.get("max_abs_drift"), real_duration=mean("real_duration"),
        notes=(f"{summary['count']} comparison(s) of the hour, {compared} with a real cycle; "
               "each figure the mean over those that had it",),
        agreed_equivalent=(int(sums.get("agreed_equivalent", 0))
                           if means.get("equivalent_agreement", (0, 0))[1] else None),
        equivalent_agreement=mean("equivalent_agreement"),
        unexplained_agreement=mean("unexplained_agreement"),
        aligned=bool(summary.get("aligned")))


def _reasons_of(heads: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    out: dict[str, int] = {}
    for h in heads:
        if h.get("status") != "complete" and h.get("reason"):
            r = _one_line(h["reason"])[:200]
            out[r] = out.get(r, 0) + 1
    return out


def _top_reasons(reasons: Mapping[str, int]) -> dict[str, int]:
    """The _REASONS_KEPT most frequent reasons; the rest counted under "(other reasons)"."""
    ranked = sorted(reasons.items(), key=lambda kv: (-kv[1], kv[0]))
    out = dict(ranked[:_REASONS_KEPT])
    rest = sum(n for _, n in ranked[_REASONS_KEPT:])
    if rest:
        out["(other reasons)"] = out.get("(other reasons)", 0) + rest
    return out


def _hour_header(row: Mapping[str, Any], sub_passes: Mapping[str, int] | None = None,
                 group_passes: Mapping[str, int] | None = None) -> dict[str, Any]:
    """An `hours` row as a pass header (what `passes` and `window` give), standing for the
    hour's passes: `uuid` is `hour_key`, `started_at` the hour's start, `status`
    "complete" when one of its passes was (else "partial", else "failed"), the match
    counts the hour's totals; `summary` says what it stands for (passes by status, the
    seconds its complete passes stand for, their first and last start, the reasons,
    what the real cycles and comparisons were, and in how many complete passes each
    submitter and group was recorded)."""
    decode = (lambda v: json.loads(v) if isinstance(v, str) else (v or {}))
    cycles, comps = decode(row.get("real_cycles")), decode(row.get("comparisons"))
    reasons = decode(row.get("reasons"))
    status = ("complete" if row["complete"] else "partial" if row["partial"] else "failed")
    hour = int(row["hour"])
    reason = None
    if reasons:
        top, n = max(reasons.items(), key=lambda kv: (kv[1], kv[0]))
        reason = (f"{row['passes'] - row['complete']} of {row['passes']} passes not "
                  f"complete; most often ({n}): {top}")
    return {
        "id": None, "uuid": hour_key(row["pool"], hour), "pool": row["pool"],
        "started_at": float(hour), "finished_at": float(hour + HOUR), "snapshot_time": None,
        "status": status, "reason": reason, "real_cycle_time": row.get("newest_real_cycle"),
        "real_accountant_time": None, "shadow_duration": row.get("shadow_duration"),
        "capture_duration": row.get("capture_duration"), "shadow_timings": {},
        "pool_weight": row.get("pool_weight"), "snapshot_dir": None, "warnings": (),
        "n_real_cycles": int(cycles.get("count", 0)),
        "n_shadow_matches": int(row["shadow_matches"]),
        "n_real_matches": int(row["real_matches"]), "n_submitters": int(row["n_submitters"]),
        "n_groups": int(row["n_groups"]), "n_comparisons": int(comps.get("count", 0)),
        "comparable": False, "pass_timings": {}, "time_limits": {},
        "summary": {"hour": hour, "passes": int(row["passes"]),
                    "complete": int(row["complete"]), "partial": int(row["partial"]),
                    "failed": int(row["failed"]), "seconds": float(row["seconds"]),
                    # the first and the last start of the hour's complete passes
                    "first_started": row.get("first_started"),
                    "last_started": row.get("last_started"), "reasons": reasons,
                    "real_cycles": cycles, "comparisons": comps,
                    "submitter_passes": dict(sub_passes or {}),
                    "group_passes": dict(group_passes or {})}}


def _in_time(hours: Sequence[Any], passes: Sequence[Any], key=lambda h: h) -> list[Any]:
    """Summarised hours and passes (each list in its own order) as one list in time: an
    hour before the passes that started in it or after it (a summary is of older passes
    than those kept, but a clock that went back can put a pass before one)."""
    out: list[Any] = []
    i = 0
    for p in passes:                    # the passes keep their order
        t = float(key(p)["started_at"])
        while i < len(hours) and float(key(hours[i])["started_at"]) <= t:
            out.append(hours[i])
            i += 1
        out.append(p)
    return out + list(hours[i:])
