"""`negotiator-ext ledger show`: the recent passes, one line each."""

from __future__ import annotations

import time
from typing import Mapping, Sequence


def _pct(x) -> str:
    return "" if x is None else f"{x:.0%}"


def render_passes(rows: Sequence[dict], comparisons: Mapping[str, object]) -> str:
    """One row per pass: when, status, its cycle's matches and duration, and, once a
    later pass compared that cycle with the real cycle that followed the snapshot
    (`comparisons`, keyed by the compared pass): the real cycle's matches, agreement
    (real matches ours also made to the same slot / ours the real one also made / both
    up to identical slots / per-submitter counts), the largest priority drift and the
    real cycle's duration."""
    head = ("Pass      Started (UTC)        Status    Shadow  Real  RealInShadow  ShadowInReal  "
            "Identical  Counts  MaxDrift  Ours(s)  Real(s)  Reason")
    lines = [head, "-" * len(head)]
    for r in rows:
        c = comparisons.get(r["uuid"])
        started = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(float(r["started_at"])))
        shadow = r.get("n_shadow_matches")
        real = getattr(c, "real_matches", None)
        ours = r.get("shadow_duration")
        theirs = getattr(c, "real_duration", None)
        lines.append(
            f"{r['uuid'][:8]:<9} {started:<20} {r['status']:<9} "
            f"{'' if shadow is None else shadow:>6}  {'' if real is None else real:>4}  "
            f"{_pct(getattr(c, 'real_in_shadow', None)):>12}  "
            f"{_pct(getattr(c, 'shadow_in_real', None)):>12}  "
            f"{_pct(getattr(c, 'equivalent_agreement', None)):>9}  "
            f"{_pct(getattr(c, 'count_agreement', None)):>6}  "
            f"{'' if getattr(c, 'max_abs_drift', None) is None else format(c.max_abs_drift, '.2%'):>8}  "
            f"{'' if ours is None else format(ours, '.2f'):>7}  "
            f"{'' if theirs is None else format(theirs, '.2f'):>7}  {r.get('reason') or ''}")
    if not rows:
        lines.append("(no passes recorded)")
    return "\n".join(lines) + "\n"
