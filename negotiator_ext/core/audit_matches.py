"""The fairness audit's matches and priorities (`core.audit`): queue waits per
submitter and group, who preempted whom, and the accounting principals'
priorities per pass and over the period."""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd

from .audit_frames import _num, lookup
from .audit_series import ShareSeries


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
    for c, v in lookup(s["pass_uuid"], by_pass, ["index", "time"]).items():
        s[c] = v
    for c in ("real_rup", "predicted_rup", "real_eup", "shadow_eup", "factor", "drift"):
        s[c] = _num(s[c])
    s["is_group"] = s["is_group"].astype(bool)
    s["recorded_passes"] = (_num(s["recorded_passes"]).fillna(1.0) if "recorded_passes" in s
                            else 1.0)
    order = np.lexsort((s["name"].to_numpy(str), s["index"].to_numpy()))
    return s.take(order)[_PRIO_COLUMNS].reset_index(drop=True)


PRIORITY_LINES = 8          # submitters whose priorities per pass the report keeps


def most_used(share: pd.DataFrame | ShareSeries, prio: pd.DataFrame, n: int) -> list[str]:
    """The `n` submitters (not group records) of `prio` with the most usage over the
    period (delivered, summed over passes), then by name. `share`: the per-pass share
    table, or what the plots read of it."""
    names = prio.loc[~prio["is_group"].astype(bool), "name"].unique()
    usage = ((share.totals()["delivered"] if isinstance(share, ShareSeries)
              else share.groupby("name")["delivered"].sum())
             if len(share) else pd.Series(dtype=float))
    return sorted(names, key=lambda x: (-float(usage.get(x, 0.0)), x))[:n]


_PARTIAL = {"group": "last", "is_group": "last", "_w": "sum", "first_rup": "first",
            "last_rup": "last", "last_predicted_rup": "last", "last_eup": "last",
            "min_factor": "min", "max_factor": "max", "max_abs_drift": "max"}


def priority_partial(prio: pd.DataFrame) -> pd.DataFrame:
    """Per principal of `prio` (some passes of the period, `priorities`): what
    `priority_summary` keeps of them, by name. The partials of consecutive slices of
    passes, put together in their order, make the same summary as all the passes at
    once: first and last skip NaN, and the passes add up (whole numbers)."""
    p = prio.sort_values("index", kind="stable").assign(
        _w=lambda d: _num(d["recorded_passes"]).fillna(1.0),
        _drift=lambda d: _num(d["drift"]).abs())
    g = p.groupby("name", sort=True)
    # first / last skip NaN: the first and last recorded value of each
    return pd.DataFrame({
        "group": g["group"].last(), "is_group": g["is_group"].last(),
        "_w": g["_w"].sum(), "first_rup": g["real_rup"].first(),
        "last_rup": g["real_rup"].last(), "last_predicted_rup": g["predicted_rup"].last(),
        "last_eup": g["real_eup"].last(), "min_factor": g["factor"].min(),
        "max_factor": g["factor"].max(), "max_abs_drift": g["_drift"].max()})


def priority_summary(prio: pd.DataFrame | None = None,
                     partials: Sequence[pd.DataFrame] = ()) -> pd.DataFrame:
    """Per principal over the period: the first and last real RUP, the last EUP, the
    smallest and largest factor and the largest |drift| of the real RUP from ours.
    From `prio` (`priorities`), or from the `priority_partial`s of its slices of
    passes, in their order."""
    cols = ["name", "group", "is_group", "passes", "first_rup", "last_rup",
            "last_predicted_rup", "last_eup", "min_factor", "max_factor", "max_abs_drift"]
    parts = [priority_partial(prio)] if prio is not None and len(prio) else [
        p for p in partials if len(p)]
    if not parts:
        return pd.DataFrame(columns=cols)
    g = parts[0] if len(parts) == 1 else pd.concat(parts).groupby(level=0, sort=True).agg(
        _PARTIAL)
    out = g.assign(is_group=g["is_group"].astype(bool),
                   passes=g["_w"].round().astype(int)).rename_axis("name").reset_index()
    for c in cols[4:]:
        out[c] = out[c].astype(float)
    return out[cols]
