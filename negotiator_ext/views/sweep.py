"""`negotiator-ext sweep` output: one comparison of its forecasts, a row per config.

`DIR/report.json` (the rows, each forecast's groups and timeline), `DIR/configs.csv`
(a row per config) and `DIR/groups.csv` (a row per config and group), and
`DIR/index.html`: the table with the best config for each criterion marked, and each
config's groups' usage over time, one panel per config on the same scale (inline SVG,
nothing to install). Columns that are not HTCondor's own are explained on the page.
"""

from __future__ import annotations

import csv
import html
import json
from pathlib import Path

# criterion -> (row key, whether larger is better)
CRITERIA = {"jain": ("jain", True), "starved_slot_hours": ("starved_slot_hours", False),
            "worst_wait_p90": ("worst_wait_p90", False), "preemptions": ("preemptions", False)}

EXPLAIN = {
    "jain": "Jain's fairness index of the groups' usage over their quota (1: every group "
            "got the same fraction of its quota; 1/n: one group got it all); over the "
            "submitters' usage when no group has a quota",
    "starved_slot_hours": "the hours each submitter had idle jobs and none running, "
                          "summed over submitters",
    "worst_wait_p90": "the largest of the groups' 90th-percentile queue waits (first start "
                      "minus QDate), seconds",
    "preemptions": "runs ended by a preemption",
    "usage/quota": "a group's usage (slot-weight hours) over its quota's share of the "
                   "pool times the span",
}


def jain(values: list[float]) -> float | None:
    values = [v for v in values if v is not None]
    if not values or not any(values):
        return None
    return sum(values) ** 2 / (len(values) * sum(v * v for v in values))


def rows_of(results) -> list[dict]:
    rows = []
    for r in results:
        row = {"config": r.config.label, "knobs": r.config.knobs,
               "config_file": r.config.config, "error": r.error}
        d = r.doc
        if d is not None:
            groups = [g for g in d["groups"] if g["group"] != "<none>"] or d["groups"]
            ratios = [g["share"] / g["quota_share"] for g in groups
                      if g.get("quota_share") and g.get("share") is not None]
            row.update(
                jain=_round(jain(ratios) if ratios else
                            jain([s["share"] or 0 for s in d["submitters"]])),
                starved_slot_hours=round(sum(s["starved"] for s in d["submitters"]) / 3600, 3),
                worst_wait_p90=max((g["wait_p90"] or 0 for g in d["groups"]), default=0),
                preemptions=sum(g["preemptions"] for g in d["groups"]),
                cycles=d["cycles"], matches=d["negotiator_matches"],
                groups={g["group"]: {"usage_hours": round(g["usage"] / 3600, 3),
                                     "share": g["share"], "quota": g["quota"],
                                     "quota_share": g["quota_share"],
                                     "wait_p50": g["wait_p50"], "wait_p90": g["wait_p90"],
                                     "preemptions": g["preemptions"]}
                        for g in d["groups"]})
        rows.append(row)
    for name, (key, larger) in CRITERIA.items():
        have = [r for r in rows if r.get(key) is not None]
        if have:
            best = (max if larger else min)(r[key] for r in have)
            for r in have:
                if r[key] == best:
                    r.setdefault("best", []).append(name)
    return rows


def _round(v):
    return None if v is None else round(v, 4)


def write_report(directory: Path, results, meta: dict) -> dict:
    rows = rows_of(results)
    report = {**meta, "criteria": EXPLAIN, "configs": rows,
              "missing": [{"config": r.config.label, "error": r.error}
                          for r in results if r.doc is None],
              "timelines": {r.config.label: r.doc["timeline"] for r in results if r.doc}}
    (directory / "report.json").write_text(json.dumps(report, indent=1))
    with open(directory / "configs.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["config", "jain", "starved_slot_hours", "worst_wait_p90", "preemptions",
                    "cycles", "matches", "best", "error"])
        for r in rows:
            w.writerow([r["config"], r.get("jain"), r.get("starved_slot_hours"),
                        r.get("worst_wait_p90"), r.get("preemptions"), r.get("cycles"),
                        r.get("matches"), " ".join(r.get("best", [])), r.get("error") or ""])
    with open(directory / "groups.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["config", "group", "usage_hours", "share", "quota", "quota_share",
                    "wait_p50", "wait_p90", "preemptions"])
        for r in rows:
            for g, v in (r.get("groups") or {}).items():
                w.writerow([r["config"], g, v["usage_hours"], v["share"], v["quota"],
                            v["quota_share"], v["wait_p50"], v["wait_p90"], v["preemptions"]])
    (directory / "index.html").write_text(_html(rows, results, meta))
    return report


def _html(rows, results, meta) -> str:
    e = html.escape
    groups = sorted({g for r in rows for g in (r.get("groups") or {})})
    head = ("<tr><th>config</th><th>Jain</th><th>starved slot-h</th><th>worst wait p90</th>"
            "<th>preemptions</th><th>cycles</th><th>matches</th>"
            + "".join(f"<th>{e(g)} usage/quota</th><th>{e(g)} wait p50/p90</th>"
                      for g in groups) + "</tr>")
    body = []
    for r in rows:
        if r.get("error"):
            body.append(f"<tr><td>{e(r['config'])}</td><td colspan='{6 + 2 * len(groups)}'>"
                        f"failed: {e(r['error'])}</td></tr>")
            continue
        best = set(r.get("best", []))
        cell = lambda key, text: (f"<td class='best'>{text} &#9733;</td>" if key in best  # noqa
                                  else f"<td>{text}</td>")
        cells = [f"<td>{e(r['config'])}</td>", cell("jain", r["jain"]),
                 cell("starved_slot_hours", r["starved_slot_hours"]),
                 cell("worst_wait_p90", r["worst_wait_p90"]),
                 cell("preemptions", r["preemptions"]), f"<td>{r['cycles']}</td>",
                 f"<td>{r['matches']}</td>"]
        for g in groups:
            v = r["groups"].get(g)
            ratio = ("-" if not v or not v["quota_share"] or v["share"] is None
                     else f"{v['share'] / v['quota_share']:.2f}")
            waits = "-" if not v else f"{v['wait_p50']}/{v['wait_p90']}"
            cells.append(f"<td>{ratio}</td><td>{e(str(waits))}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    top = max((max(v) for r in results if r.doc for v in r.doc["timeline"]["groups"].values()
               if v), default=1.0) or 1.0
    panels = [_panel(r.config.label, r.doc["timeline"], groups, top)
              for r in results if r.doc]
    explain = "".join(f"<li><b>{e(k)}</b>: {e(v)}</li>" for k, v in EXPLAIN.items())
    return f"""<!doctype html><html><head><meta charset="utf-8">
<title>negotiator-ext sweep</title><style>
body{{font-family:sans-serif;margin:1em}} table{{border-collapse:collapse}}
td,th{{border:1px solid #ccc;padding:2px 6px;text-align:right}} td:first-child{{text-align:left}}
.best{{background:#dfd}} .panel{{display:inline-block;margin:4px}}</style></head><body>
<h1>Sweep of {e(str(meta.get('snapshot')))}</h1>
<p>{len(rows)} configs, {e(str(meta.get('hours')))} h from the snapshot, engine
{e(str(meta.get('engine')))}. The baseline is the snapshot's own config. &#9733;: the best
config for that column.</p>
<table>{head}{''.join(body)}</table>
<h2>Groups' slot weight in use over time (the same scale in every panel)</h2>
{''.join(panels)}
<h2>Columns</h2><ul>{explain}</ul></body></html>
"""


_COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
           "#7f7f7f", "#bcbd22", "#17becf"]


def _panel(label: str, timeline: dict, groups: list[str], top: float) -> str:
    w, h = 320, 160
    lines = []
    for i, g in enumerate(groups):
        v = timeline["groups"].get(g)
        if not v:
            continue
        n = max(1, len(v) - 1)
        pts = " ".join(f"{x * w / n:.1f},{h - y * h / top:.1f}" for x, y in enumerate(v))
        lines.append(f"<polyline fill='none' stroke='{_COLORS[i % len(_COLORS)]}' "
                     f"stroke-width='1.5' points='{pts}'><title>{html.escape(g)}</title>"
                     "</polyline>")
    legend = " ".join(f"<span style='color:{_COLORS[i % len(_COLORS)]}'>{html.escape(g)}</span>"
                      for i, g in enumerate(groups))
    return (f"<div class='panel'><div>{html.escape(label)}</div><svg width='{w}' "
            f"height='{h}' style='border:1px solid #ccc'>{''.join(lines)}</svg>"
            f"<div>{legend}</div></div>")
