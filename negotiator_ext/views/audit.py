"""The fairness audit report (`negotiator-ext audit`): `core.audit.Audit` written to a
directory.

  DIR/index.html        one page read top-down, as wide as the window: the period and
                        pass counts, the ranked summary ("who is over quota, borrowing,
                        or starved": the SUMMARY_ROWS most severe conditions, each name
                        a link to its row in the detail tables), the key figures, then
                        each detail with its plot and table (at most MAX_ROWS rows; all
                        in tables/) (jinja2, templates/audit.html.j2)
  DIR/*.png             the plots (matplotlib, Agg, no pyplot state); a plot is only
                        drawn when it has something to show
  DIR/tables/NAME.csv   every table as CSV (a unit in each header) and as JSON records
  DIR/tables/NAME.json  (times in epoch seconds, with *_utc copies); the per-pass series
                        behind the plots as NAME.parquet, or NAME.csv.gz without
                        pyarrow (`views.audit_files`)
  DIR/report.json       the summary, and the list of files written

The page is static and self-contained (inline CSS, no script, images beside it), so it
can be copied anywhere or served as files. A directory that holds something else than an
earlier audit is refused; an earlier audit's files are replaced.

What admins read names no source file or rule: the words follow the ledger (`Words`: a
simulated pool has no real negotiator beside it), every plot axis has its unit, and each
panel one scale.
"""

from __future__ import annotations

import hashlib
import json
from importlib import resources
from pathlib import Path
from typing import Any, Mapping, Sequence

import pandas as pd

from .. import __version__
from ..core.audit import Audit
from ..errors import InputError
from .audit_files import (PER_PASS, PerPassFile, check_output, plain as _plain,
                          prepare_output, write_per_pass, write_table)
from .audit_format import (Col, _float, _shown, duration, html_table,
                           number, percent, utc)
from .audit_plots import (Plot, Words, _ranked,
                          plot_agreement, plot_fairness, plot_groups, plot_preemptions,
                          plot_priorities, plot_shares, plot_waits)

__all__ = ["check_output", "write_report", "render_html", "PerPassFile"]

TEMPLATE = "audit.html.j2"
SUMMARY_ROWS = 20           # rows of the ranked summary, the page's first table
_FORMAT_NAME = {".csv": "CSV", ".json": "JSON", ".parquet": "Parquet", ".csv.gz": "CSV (gzip)"}
MAX_FINDINGS = 10           # configuration findings listed above it (all in their CSV)

# ---------------------------------------------------------------- the page

def _status_cls(rec: dict) -> str:
    return str(rec.get("status", "")).replace(" ", "-")


# the detail table of each (kind, status) of the summary, and its rows' ids
_DETAIL_OF = {("submitter", "starved"): "starved-submitters",
              ("submitter", "over share"): "over-share-submitters",
              ("group", "starved"): "starved-groups",
              ("group", "borrowing"): "over-quota-groups",
              ("group", "over quota"): "over-quota-groups"}


def detail_id(kind: str, status: str, name: str) -> str:
    """The id of a summary row's details (a row of its detail table): safe for any name."""
    table = _DETAIL_OF.get((str(kind), str(status)), "conditions")
    return f"{table}-{hashlib.sha1(str(name).encode('utf-8', 'replace')).hexdigest()[:12]}"


def _with_text(rec: dict, n: int, passes: bool = True) -> str:
    """The first `n` partners of a summary row (the ones that matter most: see
    `core.audit.summary_table`), with how many passes together or only their full
    names, and how many more."""
    partners = rec.get("with")
    if not isinstance(partners, (list, tuple)):
        return "" if partners is None or isinstance(partners, float) else str(partners)
    shown = list(partners[:n])
    if not passes:
        shown = [p.rsplit(" (", 1)[0] for p in shown]
    return ", ".join(shown) + (f" and {len(partners) - n} more" if len(partners) > n else "")


def _spans(df: pd.DataFrame) -> pd.DataFrame:
    """`df` (summary rows) with display columns: how long and the longest streak as
    durations, or as passes where they lasted no known time (a single pass: no next one
    to measure it by), and the severity left blank there."""
    def span(d, n):
        v = _float(d)
        if v is not None and v > 0:
            return duration(v)
        k = int(_float(n) or 0)
        return f"{k} pass" + ("" if k == 1 else "es") if k else ""

    recs = df.to_dict("records")
    return df.assign(
        how_long=[span(r.get("duration"), r.get("passes")) for r in recs],
        streak=[span(r.get("longest_duration"), r.get("longest_passes")) for r in recs],
        severity_shown=[r.get("severity") if (_float(r.get("duration")) or 0) > 0 else None
                        for r in recs])


def _summary_cols(hgq: bool) -> list[Col]:
    return ([Col("rank", "#", "int"), Col("name", "Who")]
            + ([Col("group", "Group")] if hgq else [])
            + [Col("kind", "Kind"), Col("status", "Condition", "status"),
               Col("severity_shown", "Severity (slot-h)", "slot_h"),
               Col("mean_amount", "Mean (slots)", "num"),
               Col("max_amount", "Max (slots)", "num"),
               Col("relative", "Relative", "pct"),
               Col("how_long", "How long", "span"),
               Col("streak", "Longest streak", "span"),
               Col("with_short", "With", "list")])


def ranked_summary(audit: Audit) -> dict[str, Any]:
    """The page's first table: the SUMMARY_ROWS most severe conditions, each name a link
    to its row in the detail tables."""
    t = audit.tables.get("summary")
    if t is None:
        t = pd.DataFrame(columns=["rank", "kind", "name", "status", "with", "with_count"])
    s = _spans(t.head(SUMMARY_ROWS))
    s = s.assign(with_short=[_with_text(r, 2, passes=False) for r in s.to_dict("records")])
    table = html_table(s, _summary_cols(bool(audit.summary.get("hgq"))), limit=SUMMARY_ROWS,
                       row_cls=_status_cls,
                       href={"name": lambda r: "#" + detail_id(r["kind"], r["status"],
                                                               r["name"])},
                       row_id=lambda r: f"rank-{r['rank']}")
    n = len(t)
    kinds = t.groupby(["kind", "status"]).size() if n else pd.Series(dtype=int)
    parts = []
    for key, one, many in ((("submitter", "starved"), "starved submitter", "starved submitters"),
                           (("group", "starved"), "starved group", "starved groups"),
                           (("group", "borrowing"), "borrowing group", "borrowing groups"),
                           (("submitter", "over share"), "submitter over its share",
                            "submitters over their share"),
                           (("group", "over quota"), "group over quota", "groups over quota")):
        k = int(kinds.get(key, 0)) if n else 0
        if k:
            parts.append(f"{k} {one if k == 1 else many}")
    table["more"] = None
    floor = audit.summary.get("noise_floor", 1.0)
    thr = audit.summary.get("starvation_threshold", 0.1)
    table["count_line"] = (
        (f"The {min(n, SUMMARY_ROWS)} most severe of {n} conditions" if n > SUMMARY_ROWS
         else f"{n} condition{'s' if n != 1 else ''}")
        + (f" ({', '.join(parts)})" if parts else "")
        + ", ranked by severity: the shortfall or excess, in slots (slot-weight units), "
        "times how long it lasted (slot-hours)"
        + ("; a group over quota that starved nobody comes last" if kinds.get(
            ("group", "over quota"), 0) else "")
        + ". Relative: the mean shortfall or excess over the fair share or quota. Each "
        "name links to its details"
        + (f"; all {n} in tables/summary.csv." if n > SUMMARY_ROWS else "."))
    table["floor_line"] = (
        f"Not counted: a pass where the shortfall or excess is under {number(floor)} slot"
        f"{'' if floor == 1 else 's'} (the noise floor, --noise-floor) or under {thr:.0%} "
        "of the fair share." if floor > 0 else
        f"Not counted: a pass where the shortfall or excess is under {thr:.0%} of the fair "
        "share (no noise floor: --noise-floor 0).")
    return table


def _detail_table(summary: pd.DataFrame, kind: str, statuses: Sequence[str], title: str,
                  tid: str, csv: str, empty_text: str, amount: str,
                  hgq: bool = True) -> dict[str, Any]:
    s = summary[(summary["kind"] == kind) & summary["status"].isin(statuses)] if len(
        summary) else summary
    s = _spans(s).assign(with_3=[_with_text(r, 3) for r in s.to_dict("records")])
    cols = [Col("rank", "#", "int"), Col("name", "Name")]
    if kind == "submitter" and hgq:
        cols.append(Col("group", "Group"))
    if len(statuses) > 1:
        cols.append(Col("status", "Condition", "status"))
    cols += [Col("severity_shown", "Severity (slot-hours)", "slot_h"),
             Col("how_long", "How long", "span"),
             Col("streak", "Longest streak", "span"),
             Col("first", "First (UTC)", "tmin"), Col("last", "Last (UTC)", "tmin"),
             Col("mean_amount", f"Mean {amount} (slots)", "num"),
             Col("max_amount", f"Largest {amount} (slots)", "num"),
             Col("relative", "Relative", "pct"),
             Col("with_3", "With (passes together)", "list")]
    return html_table(s, cols, title=title, tid=tid, csv=csv, empty_text=empty_text,
                      row_cls=_status_cls,
                      row_id=lambda r: detail_id(r["kind"], r["status"], r["name"]))


def _adjustments_section(t: dict[str, pd.DataFrame]) -> dict[str, Any]:
    return {"id": "adjustments", "title": "Recommendations applied",
            "intro": "The condor_userprio changes negotiator-ext recommend --apply made (or "
                     "tried) in the period, from the ledger's audit trail (all pools).",
            "plots": [], "empty_text": None,
            "tables": [html_table(t["adjustments"], [
                Col("applied_at", "When (UTC)", "time"), Col("kind", "Kind"),
                Col("name", "Name"), Col("value", "Value", "num"),
                Col("lease_expires", "Lease ends (UTC)", "time"), Col("result", "Result"),
                Col("outcome", "Outcome"), Col("command", "Command")],
                csv="tables/adjustments.csv",
                empty_text="No recommendation was applied in the period.")]}


def _sourced(df: pd.DataFrame, words: Words) -> pd.DataFrame:
    """A table with its `source` column in words ("simulated cycles", "our cycles", ...)."""
    if "source" not in df.columns or df.empty:
        return df
    return df.assign(source=[words.source(s) for s in df["source"]])


def _sections(audit: Audit, plots: dict[str, Plot | None]) -> list[dict[str, Any]]:
    t = audit.tables
    words = Words(audit.summary.get("kind") == "simulation")
    secs: list[dict[str, Any]] = []

    def sec(id_, title, intro, plot_names=(), tables=(), empty_text=None):
        secs.append({"id": id_, "title": title, "intro": intro,
                     "plots": [plots[p] for p in plot_names if plots.get(p)],
                     "tables": list(tables), "empty_text": empty_text})

    summary = t.get("summary", pd.DataFrame(columns=["kind", "status", "name", "rank"]))
    hgq = bool(audit.summary.get("hgq"))
    fl = audit.summary.get("noise_floor", 1.0)
    floor = f"{number(fl)} slot{'' if fl == 1 else 's'}"
    thr = audit.summary.get("starvation_threshold", 0.1)
    sec("conditions", "Who was starved or over, how badly and for how long",
        f"A submitter is starved in a pass when it has idle jobs while it gets less than "
        f"{1 - thr:.0%} of its demand-capped (fair) share, and at least {floor} less; over "
        f"its share when it gets more than {1 + audit.summary.get('over_share_threshold', 0.1):.0%} "
        f"of it and at least {floor} more. A group is starved when it is below its quota "
        f"while requesting more than it uses, over quota when it uses more than its quota "
        f"(by at least {floor}), and borrowing when it is over quota while another group "
        "is starved. How long: the passes' intervals summed (each pass lasts until the next "
        "analysed one). Severity: the amount times how long, summed (slot-hours). Most severe "
        "first; # is the rank in the summary.",
        tables=[
            _detail_table(summary, "submitter", ["starved"], "Starved submitters",
                          "starved-submitters", "tables/summary.csv",
                          "No submitter was starved.", "shortfall", hgq),
            _detail_table(summary, "submitter", ["over share"], "Submitters over their share",
                          "over-share-submitters", "tables/summary.csv",
                          "No submitter was over its share.", "excess", hgq),
            _detail_table(summary, "group", ["starved"], "Starved groups", "starved-groups",
                          "tables/summary.csv", "No group was starved.", "shortfall"),
            _detail_table(summary, "group", ["borrowing", "over quota"],
                          "Groups over quota (borrowing: while another was starved)",
                          "over-quota-groups", "tables/summary.csv",
                          "No group was over its quota.", "surplus"),
            html_table(t["starved_borrowing_pairs"], [
                Col("starved", "Starved group"), Col("borrowing", "Borrowing group"),
                Col("passes", "Passes together", "int"), Col("duration", "How long", "dur"),
                Col("longest_duration", "Longest streak", "dur"),
                Col("first", "First (UTC)", "tmin"), Col("last", "Last (UTC)", "tmin"),
                Col("mean_shortfall", "Mean shortfall (slots)", "num"),
                Col("mean_surplus", "Mean surplus borrowed (slots)", "num")],
                csv="tables/starved_borrowing_pairs.csv", title="Starved ↔ borrowing groups",
                empty_text="No group was starved while another borrowed surplus."),
            html_table(t["starved_over_share_submitters"], [
                Col("starved", "Starved submitter"), Col("borrowing", "Over its share"),
                Col("passes", "Passes together", "int"), Col("duration", "How long", "dur"),
                Col("mean_shortfall", "Mean shortfall (slots)", "num"),
                Col("mean_surplus", "Mean excess (slots)", "num")],
                title="Starved submitters and those of the same group over their share",
                csv="tables/starved_over_share_submitters.csv",
                empty_text="No starved submitter shared its group with one over its share.")])
    sec("shares", "Deserved, demand-capped and delivered shares",
        "Per submitter over the period (time-weighted means, in slots: slot-weight units). "
        "Deserved: its group's allocation (its quota, or what its submitters used when the "
        "group ran above its quota on surplus) split among the group's submitters with "
        "demand in inverse proportion to their EUP. Demand-capped (its fair share): the same "
        "split, each capped at its demand (running weight + idle jobs, each job counted "
        "once) with the rest going to the others. Delivered: what it used "
        f"({words.usage}). Gap: delivered − demand-capped. Most short of its share first.",
        ["shares"],
        [html_table(t["submitter_shares"].sort_values("gap", kind="stable"), [
            Col("name", "Submitter"), Col("group", "Group"),
            Col("active_passes", "Passes with demand", "int"),
            Col("demand", "Demand (slots)", "num"), Col("deserved", "Deserved (slots)", "num"),
            Col("demand_capped", "Demand-capped (slots)", "num"),
            Col("delivered", "Delivered (slots)", "num"), Col("gap", "Gap (slots)", "num"),
            Col("rel_gap", "Gap (relative)", "pct"),
            Col("deserved_pct", "Deserved % of pool", "pct"),
            Col("delivered_pct", "Delivered % of pool", "pct")],
            csv="tables/submitter_shares.csv", empty_text="No submitter was recorded.")])
    sec("groups", "Group quotas and usage",
        f"Per accounting group over the period (time-weighted means, slots): quota "
        f"({words.quota}), usage and request ({words.accountant}'s), the sums of its "
        "submitters' shares, and in how many passes it was over quota (using surplus) or "
        "starved.",
        ["groups"],
        [html_table(t["group_quota"], [
            Col("group", "Group"), Col("quota", "Quota", "num"), Col("usage", "Usage", "num"),
            Col("requested", "Requested", "num"), Col("demand_capped", "Demand-capped", "num"),
            Col("delivered", "Delivered", "num"), Col("gap", "Gap", "num"),
            Col("over_quota_passes", "Passes over quota", "int"),
            Col("starved_passes", "Passes starved", "int")], csv="tables/group_quota.csv",
            empty_text="No accounting group was recorded.")])
    wait_cols = [Col("name", "Name"), Col("source", "Matches of"),
                 Col("matches", "Count", "int"), Col("p50", "Median", "dur"),
                 Col("p90", "90th percentile", "dur"), Col("max", "Max", "dur"),
                 Col("mean", "Mean", "dur")]
    by_p90 = {k: _sourced(t[f"wait_by_{k}"].sort_values(["p90", "name"],
                                                          ascending=[False, True],
                                                          kind="stable"), words)
              for k in ("submitter", "group")}
    sec("waits", "Queue wait until matched",
        "How long each matched job had been idle when matched, longest waits (90th "
        "percentile) first"
        + (": the simulated cycles' matches." if words.sim else
           ": our cycles' matches, and the real negotiator's (MatchLog) when their wait is "
           "known. A job the real negotiator did not start can be matched by several of "
           "our passes."),
        ["waits"],
        [html_table(by_p90["submitter"], wait_cols, title="Per submitter",
                    csv="tables/wait_by_submitter.csv", empty_text="No match with a known wait."),
         html_table(by_p90["group"], wait_cols, title="Per group",
                    csv="tables/wait_by_group.csv", empty_text="No match with a known wait.")],
        empty_text=None if plots.get("waits") or t["wait_by_submitter"].empty else
        "Every wait was 0 s: each job was matched in the first pass it waited in (nothing "
        "to plot).")
    prio_cols = [Col("name", "Name"), Col("group", "Group"),
                 Col("is_group", "Group record", "bool"), Col("passes", "Passes", "int"),
                 Col("first_rup", "First RUP", "num"), Col("last_rup", "Last RUP", "num")]
    if not words.sim:
        prio_cols.append(Col("last_predicted_rup", "Our last RUP", "num"))
    prio_cols += [Col("last_eup", "Last EUP", "num"), Col("min_factor", "Min factor", "num"),
                  Col("max_factor", "Max factor", "num")]
    if not words.sim:
        prio_cols.append(Col("max_abs_drift", "Max |drift|", "pct"))
    sec("priorities", "Priorities over time",
        (f"RUP, EUP and priority factor per accounting principal ({words.accountant}'s)"
         + ("." if words.sim else
            ", with our accountant's prediction of the RUP (recorded when exactly one real "
            "priority update ran since the pass before) and the largest drift between "
            "them.")),
        ["priorities"],
        [html_table(t["priorities"], prio_cols, csv="tables/priorities.csv",
                    empty_text="No priorities recorded.")])
    sec("preemptions", "Preemptions",
        "Matches that preempted a running claim: who preempted whom"
        + (" in the simulated cycles." if words.sim else
           ", in our cycles and in the real MatchLog."),
        ["preemptions"],
        [html_table(_sourced(t["preemptions"], words), [
            Col("source", "Matches of"), Col("preemptor", "Preempting submitter"),
            Col("preempted", "Preempted"), Col("count", "Count", "int"),
            Col("passes", "Passes", "int")], csv="tables/preemptions.csv",
            empty_text="No preemption in the analysed passes.")])
    sec("fairness", "Fairness over time",
        "Jain's index of delivered / demand-capped share across the submitters with demand, "
        "per pass, and the largest gaps.",
        ["fairness"],
        [html_table(t["largest_gaps"], [
            Col("time", "Pass time (UTC)", "time"), Col("name", "Submitter"),
            Col("group", "Group"), Col("demand", "Demand", "num"),
            Col("deserved", "Deserved", "num"), Col("demand_capped", "Demand-capped", "num"),
            Col("delivered", "Delivered", "num"), Col("gap", "Gap", "num"),
            Col("rel_gap", "Gap (relative)", "pct")],
            title="Largest gaps (slots): each submitter's largest, in one pass",
            csv="tables/largest_gaps.csv", empty_text="No gap.")],
        empty_text=None if plots.get("fairness") else
        "Jain's index is undefined in every pass (no submitter with a demand-capped share "
        "got anything).")
    agree, div = t["agreement_by_pass"], t["divergent_passes"]
    if len(agree):
        details = t["divergent_details"]
        tables = [html_table(div, [
            Col("time", "Recorded (UTC)", "time"), Col("pass_uuid", "Pass"),
            Col("source", "Source"), Col("real_matches", "Real matches", "int"),
            Col("shadow_matches", "Our matches", "int"),
            Col("equivalent_agreement", "Up to identical slots", "pct"),
            Col("count_agreement", "Counts", "pct"),
            Col("unexplained_agreement", "Counts, unexplained only", "pct"),
            Col("why", "Why"),
            Col("real_in_shadow", "Real in ours", "pct"),
            Col("shadow_in_real", "Ours in real", "pct")],
            href={"pass_uuid": lambda r: "#" + r["anchor"]}, title="Where they diverged most",
            empty_text="Real and shadow agreed fully in every compared pass.")]
        for r in div.to_dict("records"):
            d = details[details["pass_uuid"] == r["pass_uuid"]]
            tables.append(html_table(d, [
                Col("kind", "Kind"), Col("name", "Name"), Col("real", "Real", "int"),
                Col("shadow", "Ours", "int"), Col("difference", "Ours − real", "int"),
                Col("real_share", "Real share", "num"), Col("shadow_share", "Our share", "num"),
                Col("real_limit", "Real limit / quota", "num"),
                Col("shadow_limit", "Our limit / quota", "num"),
                Col("real_at_share_limit", "Real at share limit", "bool"),
                Col("real_out_of_time", "Real out of time", "bool"),
                Col("why", "Why they differ")],
                title=f"Pass {r['pass_uuid'][:12]} ({utc(r['time'])} UTC): "
                      f"{percent(r['equivalent_agreement']) or '–'} up to identical slots, "
                      f"{percent(r['count_agreement']) or '–'} by counts, "
                      f"{percent(r['unexplained_agreement']) or '–'} unexplained only",
                tid=r["anchor"], limit=200, empty_text="No per-submitter figures recorded."))
        tables.append(html_table(agree.iloc[::-1], [
            Col("time", "Recorded (UTC)", "time"), Col("source", "Source"),
            Col("real_matches", "Real", "int"), Col("shadow_matches", "Ours", "int"),
            Col("equivalent_agreement", "Up to identical slots", "pct"),
            Col("count_agreement", "Counts", "pct"),
            Col("unexplained_agreement", "Counts, unexplained only", "pct"), Col("why", "Why"),
            Col("aligned", "Aligned", "bool"), Col("real_in_shadow", "Real in ours", "pct"),
            Col("shadow_in_real", "Ours in real", "pct"),
            Col("max_abs_drift", "Max priority drift", "pct"), Col("notes", "Notes")],
            title="Every comparison, newest first", csv="tables/agreement_by_pass.csv"))
        sec("agreement", "Real versus shadow agreement",
            "Each comparison sets our cycle on a pass's snapshot beside the real cycle that "
            "followed it. Where the counts differ, each submitter's difference is explained "
            "by a change of the pool between the snapshot and the real cycle (named), by the "
            "real cycle running out of time, or left unexplained; 'unexplained only' counts "
            "the explained differences as agreeing. 'Aligned': the snapshot was taken as "
            "the real cycle started (NegotiatorLog).", ["agreement"], tables)
    secs.append(_adjustments_section(t))
    return secs


def _figures(audit: Audit) -> list[dict[str, Any]]:
    s = audit.summary
    sim = s.get("kind") == "simulation"
    f: list[dict[str, Any]] = []

    def add(label, value, href=None, links=()):
        f.append({"label": label, "value": value, "href": href, "links": list(links)})

    add("Submitters with records", str(s.get("submitters", 0)), "#shares")
    groups = s.get("groups") or []
    if groups:
        add("Accounting groups", ", ".join(groups[:12])
            + (f" and {len(groups) - 12} more" if len(groups) > 12 else ""), "#groups")
    j = s.get("jain", {})
    if j.get("mean") is not None:
        add("Jain's index", f"mean {j['mean']:.2f}, lowest {j['min']:.2f}", "#fairness")
    add("Starved", f"{len(s.get('starved_submitters', []))} submitter(s), "
                   f"{len(s.get('starved_groups', []))} group(s)", "#conditions")
    add("Groups over quota", _over_quota_text(audit)
        or ("none" if s.get("hgq") else "none (no accounting groups)"), "#over-quota-groups")
    pre = s.get("preemptions", {})
    if sim:
        add("Preemptions", f"{pre.get('shadow', 0)} in the simulated cycles", "#preemptions")
    else:
        add("Preemptions", f"our cycles {pre.get('shadow', 0)}, the real negotiator "
            f"{pre.get('real', 0)} (MatchLog)", "#preemptions")
    c = s.get("comparisons", {})
    if c.get("count"):
        ea, ca = c.get("mean_equivalent_agreement"), c.get("mean_count_agreement")
        ua = c.get("mean_unexplained_agreement")
        add("Real vs shadow", f"{c['count']} comparison(s); mean agreement "
            f"{percent(ea) or '–'} up to identical slots, {percent(ca) or '–'} by counts"
            + (f", {percent(ua)} unexplained only ({c.get('with_unexplained', 0)} with "
               f"unexplained differences; {c.get('aligned', 0)} aligned with the real "
               "cycle's start)" if ua is not None else "")
            + ("; diverged most in" if c.get("lowest") else ""), "#agreement",
            [{"href": "#" + r["anchor"], "text": f"{r['pass'][:12]} ({percent(r['worst'])})"}
             for r in c.get("lowest", [])])
    late = s.get("out_of_time", {})
    if late.get("cycles"):
        add("Real cycles out of time", f"{late['cycles']} of {late['compared']} compared; "
            f"{late['groups_not_served_newest']} group(s) not served in the newest",
            "tables/out_of_time.csv")
    adj = s.get("adjustments", {})
    add("Recommendations applied", ", ".join(f"{v} {k}" for k, v in sorted(adj.items()))
        or "none", "#adjustments")
    return f


def _over_quota_text(audit: Audit, n: int = 3) -> str:
    """The groups over quota in one line: how many, how many of them borrowing while
    another group was starved, and the `n` most severe (the summary's order)."""
    s = audit.summary
    over = s.get("over_quota", [])
    if not over:
        return ""
    borrowing = s.get("borrowing", [])
    ranked = [g for g in _ranked(audit.tables.get("summary"), "group") if g in set(over)]
    ranked += [g for g in over if g not in ranked]
    return (f"{len(over)} group{'s' if len(over) != 1 else ''}"
            + (f", {len(borrowing)} of them borrowing while another group was starved"
               if borrowing else ", none while another group was starved")
            + f"; most severe: {', '.join(ranked[:n])}"
            + (f" and {len(ranked) - n} more" if len(ranked) > n else ""))


def _period(audit: Audit) -> str:
    """'Period: A to B (UTC)', saying which end is a pass's rather than asked for."""
    per = audit.summary.get("period", {})
    ends, marks = [], []
    for given, seen, mark, none in ((audit.since, per.get("first_pass"), "from the first",
                                     "the beginning of the ledger"),
                                    (audit.until, per.get("last_pass"), "to the last",
                                     "the end of the ledger")):
        if given is not None:
            ends.append(utc(given, seconds=False))
        elif seen is not None:
            ends.append(utc(seen, seconds=False))
            marks.append(mark)
        else:
            ends.append(none)
    sim = audit.summary.get("kind") == "simulation"
    return ((f"Simulated period: {ends[0]} to {ends[1]} (the simulation's clock, UTC)"
             if sim else f"Period: {ends[0]} to {ends[1]} (UTC)")
            + (f", {' '.join(marks)} recorded pass" if marks else ""))


def _pass_line(audit: Audit) -> str:
    p = audit.summary["passes"]
    left = [f"{p[k]} {k}" for k in ("partial", "failed", "other") if p.get(k)]
    what = {"simulation": "Simulated pool", "what-if": "What-if replay of pool"}.get(
        audit.summary.get("kind", ""), "Pool")
    return (f"{what} {audit.pool or '(none)'}: {p['total']} pass(es), {p['analysed']} complete "
            "and analysed" + (f"; left out: {', '.join(left)}" if left else "") + ".")


def render_html(audit: Audit, plots: dict[str, Plot | None], files: list[dict[str, Any]],
                *, ledger: str = "the ledger", generated: str | None = None) -> str:
    """The page, from the audit, the plots drawn and the table files written."""
    import jinja2
    text = resources.files(__package__).joinpath("templates", TEMPLATE).read_text("utf-8")
    # autoescape makes names safe for HTML (<, &, quotes) but leaves control characters
    # and bidi overrides from untrusted names as they are: every value the template
    # shows is made `printable` first (macro output, already Markup, is left alone)
    env = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined,
                             keep_trailing_newline=True, finalize=_shown)
    tmpl = env.from_string(text)
    empty_text = ""
    if audit.empty:
        p = audit.summary["passes"]
        empty_text = (f"No pass of pool {audit.pool or '(any)'} was recorded in this period: "
                      "nothing to analyse." if not p["total"] else
                      f"None of the {p['total']} pass(es) recorded in this period is complete "
                      f"({p['partial']} partial, {p['failed']} failed): nothing to analyse.")
    if audit.empty:       # nothing analysed; the changes applied meanwhile, if any
        secs = [_adjustments_section(audit.tables)] if len(audit.tables["adjustments"]) else []
        summary = None
    else:
        secs = _sections(audit, plots)
        summary = ranked_summary(audit)
    found = audit.summary.get("findings") or []
    findings_more = (f"The first {MAX_FINDINGS} of {len(found)} findings; all in "
                     "tables/config_findings.csv." if len(found) > MAX_FINDINGS else None)
    html = tmpl.render(
        findings=found[:MAX_FINDINGS], findings_more=findings_more,
        version=__version__, title=f"Fairness audit: {audit.pool or 'no pool'}",
        period=_period(audit), pass_line=_pass_line(audit), empty=audit.empty,
        empty_text=empty_text, notes=audit.summary.get("notes", []), summary=summary,
        figures=_figures(audit), sections=secs, files=files, ledger=ledger,
        generated=generated)
    return html.lstrip()


def write_report(audit: Audit, out: str | Path, *, ledger: str = "the ledger",
                 generated_at: float | None = None,
                 streamed: Mapping[str, PerPassFile] | None = None) -> list[Path]:
    """Write the report of `audit` into `out` (see the module docstring); the paths
    written. A directory that is neither empty nor an earlier audit is an InputError.
    `streamed`: the per-pass tables already written as the analysis made them (each
    `PerPassFile` finished, put in place here)."""
    out = Path(out)
    prepare_output(out, checked=bool(streamed))
    written: list[Path] = []
    plots: dict[str, Plot | None] = {}
    files: list[dict[str, Any]] = []
    t = audit.tables
    words = Words(audit.summary.get("kind") == "simulation")
    try:
        if not audit.empty:
            share, grp = t["submitter_shares_by_pass"], t["group_quota_by_pass"]
            summary = t.get("summary")
            plots = {"shares": plot_shares(share, out, summary, words),
                     "groups": plot_groups(grp, out, summary, words),
                     "waits": plot_waits(audit.waits, out, words),
                     "priorities": plot_priorities(t["priorities_by_pass"], share, out, words),
                     "preemptions": plot_preemptions(t["preemptions"], out, words),
                     "fairness": plot_fairness(t["fairness_by_pass"], out, words),
                     "agreement": plot_agreement(t["agreement_by_pass"], out)}
        written += [out / p.src for p in plots.values() if p]
        for name, df in t.items():
            paths = (streamed[name].close() if streamed and name in streamed
                     else (write_per_pass if name in PER_PASS else write_table)(
                         df, out / "tables", name))
            written += paths
            files.append({"name": name, "rows": len(df),
                          "links": [{"href": f"tables/{p.name}", "text": _FORMAT_NAME[
                              "".join(p.suffixes)]} for p in paths]})
        generated = None if generated_at is None else utc(generated_at) + " UTC"
        html = render_html(audit, plots, files, ledger=ledger, generated=generated)
        (out / "index.html").write_text(html, encoding="utf-8")
        written.append(out / "index.html")
        report = {"generated_by": f"negotiator-ext {__version__} audit",
                  "generated_at": generated_at, "ledger": ledger,
                  "summary": _plain(audit.summary),
                  "plots": sorted(p.src for p in plots.values() if p),
                  "tables": [link["href"] for f in files for link in f["links"]]}
        (out / "report.json").write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
        written.append(out / "report.json")
    except OSError as exc:
        raise InputError(str(out), f"cannot write the report: {exc.strerror or exc}") from exc
    return written
