"""One shadow pass in a line (`shadow`, the daemon's log) and the recent passes as a
table (`negotiator-ext ledger show`)."""

from __future__ import annotations

from typing import Mapping, Sequence

from ..core.figures import without_sentinels
from ..core.records import Comparison, PassRecord, as_plain
from ..when import utc_text
from .tables import legend, pct, table
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
            again = repredicted_text(c)
            if again:
                figures.append(again)
            why = disagreement_text(c)
            at = (f"{utc_text(c.real_cycle_time)} UTC ({c.real_cycle_time})"
                  if c.real_cycle_time is not None else "an unknown time")
            parts.append(f"{head} at {at}: " + ", ".join(figures)
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


def repredicted_text(c: Comparison) -> str:
    """What re-predicting the unexplained differences at the real accountant's update did
    (core.disagreement.repredict): "re-predicted at phase 2 (+45 s): 12 of 14 unexplained
    explained, 14.2 s", or why it was not done; empty when nothing was left to
    re-predict."""
    r = c.repredicted or {}
    if r.get("skipped"):
        return f"not re-predicted at phase 2 ({r['skipped']})"
    if "at" not in r:
        return ""
    took = f", {r['seconds']:.1f} s" if r.get("seconds") is not None else ""
    return (f"re-predicted at phase 2 ({r['delta_t']:+d} s): {r['explained']} of "
            f"{r['unexplained']} unexplained explained{took}")


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


# a pass header's counts of the ledger's own rows (a pass's submitter and group records,
# the real cycles it recorded first, its comparison), kept to check the ledger: not
# figures of the pool (n_submitters counts the group records too)
_ROW_COUNTS = ("n_real_cycles", "n_submitters", "n_groups", "n_comparisons")


def passes_document(rows: Sequence[dict], comparisons: Mapping[str, Comparison]) -> list[dict]:
    """`ledger show --json`: each pass's header, without the ledger's row counts, with
    its cycle's comparison (null until a later pass compared it); a limit HTCondor left
    without a number is null (`core.figures`)."""
    return [without_sentinels({**{k: v for k, v in r.items() if k not in _ROW_COUNTS},
                               "comparison": as_plain(comparisons[r["uuid"]])
                               if r["uuid"] in comparisons else None}) for r in rows]


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
                      utc_text(float(r["started_at"])),
                      f"{summ['complete']}/{summ['passes']} complete" if summ else r["status"],
                      str(r.get("n_shadow_matches") or 0),
                      "" if real is None else str(real),
                      *(text for _, text in _agreement(c)),
                      "" if ours is None else f"{ours:.2f}",
                      "" if theirs is None else f"{theirs:.2f}", r.get("reason") or ""])
    out = table(["Pass", "Started (UTC)", "Status", "Shadow", "Real", "Identical",
                 "RealInShadow", "ShadowInReal", "Counts", "Unexplained", "MaxDrift",
                 "Shadow(s)", "Real(s)", "Reason"], lines, set(range(3, 13)))
    if not rows:
        out.append("(no passes recorded)")
    else:
        out += legend([("Passes", None, _LEGEND)])
    return "\n".join(out) + "\n"


# the columns of `ledger show`, in the words of a pass's line (`summary_line`) and of the
# ShadowNegotiator ad (RealInShadow, ShadowInReal)
_LEGEND = [
    ("Pass", "the pass's id (its first 8 characters), or hour: an hour of passes "
             "summarised by the retention"),
    ("Status", "complete, partial (a part of the pool or of the real side unknown) or "
               "failed; an hour: how many of its passes were complete"),
    ("Shadow", "our cycle's matches on the pass's snapshot"),
    ("Real", "the real cycle's matches after that snapshot, once a later pass compared "
             "them (blank until then)"),
    ("Identical", "agreement up to identical slots: the matches both made, a slot "
                  "counted the same as any slot matchmaking cannot tell from it, of the "
                  "larger count"),
    ("RealInShadow", "of the real matches, the share ours made to the very same slot"),
    ("ShadowInReal", "of our matches, the share the real cycle made to the very same slot"),
    ("Counts", "per-submitter counts: the matches both gave each submitter, of the larger "
               "total"),
    ("Unexplained", "the same with the differences a change of the pool between the "
                    "snapshot and the real cycle explains taken as agreeing (each "
                    "difference's class and change in the pass's line and the ledger's "
                    "disagreements)"),
    ("MaxDrift", "the largest drift of a real user priority from what our accountant "
                 "predicted"),
    ("Shadow(s)", "our cycle's duration in seconds"),
    ("Real(s)", "the real cycle's duration in seconds"),
    ("Reason", "why the pass is not complete"),
]
