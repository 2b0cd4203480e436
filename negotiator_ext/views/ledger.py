"""One shadow pass in a line (`shadow`, the daemon's log) and the recent passes as a
table (`negotiator-ext ledger show`)."""

from __future__ import annotations

import time
from typing import Mapping, Sequence

from ..core.records import Comparison, PassRecord
from .tables import pct, table
from .text import printable


def summary_line(rec: PassRecord) -> str:
    """One line for logs and the terminal: this pass, then what it compared (an earlier
    pass's cycle against the real cycle that followed it). Shown `printable`: a reason
    or note can carry a schedd's or a daemon's text."""
    parts = [f"pass {rec.uuid[:8]} {rec.status}" + (f" ({rec.reason})" if rec.reason else "")]
    if rec.shadow_duration is not None:
        parts.append(f"our cycle: {len(rec.shadow_matches)} matches in {rec.shadow_duration:.2f} s")
    c = rec.comparison
    if c is not None:
        head = f"pass {c.shadow_pass[:8]}'s cycle against the real cycle"
        if c.source == "gap":
            parts.append(f"{head}: not compared ({c.notes[0] if c.notes else 'gap'})")
        else:
            figures = [f"real matches {c.real_matches}, ours {c.shadow_matches}"]
            figures += [f"{label} {text}" for label, text in _agreement(c) if text]
            if c.aligned:
                figures.append("captured as the real cycle started")
            why = disagreement_text(c)
            parts.append(f"{head} at {c.real_cycle_time}: " + ", ".join(figures)
                         + (f" ({why})" if why else ""))
    return printable("; ".join(parts))


def _agreement(c: Comparison | None) -> list[tuple[str, str]]:
    """The comparison's agreement figures, labelled, in the order both views show them
    (empty text: unknown)."""
    get = (lambda a: None) if c is None else (lambda a: getattr(c, a))
    return [("agreement up to identical slots", pct(get("equivalent_agreement"))),
            ("same slot", pct(get("real_in_shadow"))),
            ("same slot, of ours", pct(get("shadow_in_real"))),
            ("per-submitter counts", pct(get("count_agreement"))),
            ("unexplained only", pct(get("unexplained_agreement"))),
            ("max priority drift", pct(get("max_abs_drift"), 2))]


def disagreement_text(c: Comparison) -> str:
    """The comparison's disagreeing submitters by class, the first change of each
    explained one named: "pool changed: alice@x (job 9.0 of alice@x was not idle ...);
    unexplained: bob@x (real 2, ours 3)". Empty when the counts agree."""
    by: dict[str, list[str]] = {}
    for d in c.disagreements or ():
        what = (d["changes"][0] if d.get("changes") and d.get("class") != "unexplained"
                else f"real {d.get('real')}, ours {d.get('shadow')}")
        by.setdefault(d.get("class") or "unexplained", []).append(
            f"{d.get('submitter')} ({what})")
    return "; ".join(f"{cls}: " + ", ".join(items[:3])
                     + (f" and {len(items) - 3} more" if len(items) > 3 else "")
                     for cls, items in by.items())


def render_passes(rows: Sequence[dict], comparisons: Mapping[str, Comparison]) -> str:
    """One row per pass: when, status, its cycle's matches and duration, and, once a
    later pass compared that cycle with the real cycle that followed the snapshot
    (`comparisons`, keyed by the compared pass): the real cycle's matches, agreement
    (both up to identical slots / real matches ours also made to the same slot / ours
    the real one also made / per-submitter counts / the same with the differences a
    change of the pool explains taken as agreeing), the largest priority drift and the
    real cycle's duration. A summarised hour is one row: "hour", its start, how many of
    its passes were complete, their matches summed, the means of its comparisons (the
    largest drift), our cycle's mean duration."""
    lines = []
    for r in rows:
        c = comparisons.get(r["uuid"])
        real = getattr(c, "real_matches", None)
        ours, theirs = r.get("shadow_duration"), getattr(c, "real_duration", None)
        # a summarised hour (`Ledger.summarise`): its passes' totals and means
        summ = r.get("summary")
        lines.append(["hour" if summ else r["uuid"][:8],
                      time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(float(r["started_at"]))),
                      f"{summ['complete']}/{summ['passes']} complete" if summ else r["status"],
                      str(r.get("n_shadow_matches") or 0),
                      "" if real is None else str(real),
                      *(text for _, text in _agreement(c)),
                      "" if ours is None else f"{ours:.2f}",
                      "" if theirs is None else f"{theirs:.2f}", r.get("reason") or ""])
    out = table(["Pass", "Started (UTC)", "Status", "Shadow", "Real", "Identical",
                 "RealInShadow", "ShadowInReal", "Counts", "Unexplained", "MaxDrift",
                 "Ours(s)", "Real(s)", "Reason"], lines, set(range(3, 13)))
    if not rows:
        out.append("(no passes recorded)")
    return "\n".join(out) + "\n"
