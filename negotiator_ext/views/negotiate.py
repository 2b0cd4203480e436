"""Human output of one negotiation cycle: per group, per submitter, the matches."""

from __future__ import annotations

import time
from collections import Counter
from .tables import table
from .text import printable


def _num(v, fmt="{:.2f}") -> str:
    if v is None:
        return "-"
    if isinstance(v, float) and abs(v) >= 1e15:
        return f"{v:.4g}"
    return fmt.format(v)


def render_cycle(doc: dict) -> str:
    """The cycle for people. Names (submitters, groups, slots, jobs, limits) come from
    untrusted ads: table cells are escaped by `table`, and every line is passed through
    `printable` so no control character reaches the terminal."""
    c = doc["cycle"]
    when = time.strftime("%m/%d/%y %H:%M:%S", time.gmtime(c["time"]))
    out = [f"Negotiation cycle at {when} UTC ({c['time']}): {c['slots']} slots, "
           f"pool weight {c['pool_weight']:g}, {c['submitters']} submitters, "
           f"{c['spins']} pie spins" + ("  [PARTIAL SNAPSHOT]" if c["partial"] else ""), ""]
    groups = doc["groups"]
    if len(groups) > 1:
        rows = [[g["name"], _num(g["config_quota"], "{:g}"), _num(g["effective_quota"]),
                 _num(g["subtree_quota"]), g["surplus_policy"] or "-", _num(g["requested"]),
                 _num(g["allocated"]), _num(g["usage_before"]), str(g["matched"]),
                 _num(g["usage"]), _num(g["sort_key"], "{:.4g}")] for g in groups]
        out += table(["Group", "Config", "Effective", "Subtree", "Surplus", "Requested",
                       "Allocated", "InUse", "Matched", "InUseAfter", "SortKey"], rows,
                      set(range(1, 11)) - {4})
        out.append("")
    rows = [[s["name"], s["group"], _num(s["eup"]), _num(s["share"], "{:.4f}"),
             _num(s["limit"]), _num(s["usage_before"]), str(s["matched"]),
             _num(s["matched_weight"]), _num(s["usage_after"])] for s in doc["submitters"]]
    out += table(["Submitter", "Group", "EUP", "Share", "Limit", "InUse", "Matched",
                   "MatchedWeight", "InUseAfter"], rows, set(range(2, 9)))
    out.append("")
    matches = doc["matches"]
    if "withheld_matches" in doc:
        out.append(f"{doc['withheld_matches']} match(es) withheld: the snapshot is partial.")
    else:
        out.append(f"{len(matches)} match(es):")
        rows = [[m["job"], m["submitter"], m["slot"], m["reason"], m["preempting"] or "-",
                 _num(m["cost"], "{:g}")] for m in matches]
        if rows:
            out += table(["Job", "Submitter", "Slot", "Reason", "Preempting", "Cost"], rows, {5})
    limits = doc.get("concurrency_limits") or []
    if limits:
        out += ["", "Concurrency limits:"]
        out += table(["Limit", "Max", "InUse", "InUseAfter"],
                      [[x["name"], _num(x["max"], "{:g}"), _num(x["count_before"], "{:g}"),
                        _num(x["count"], "{:g}")] for x in limits], {1, 2, 3})
    rej = Counter((r["submitter"], r["reason"]) for r in doc["rejections"])
    if rej:
        out += ["", "Rejections:"]
        out += [f"  {n:4d}  {sub}: {reason}" for (sub, reason), n in sorted(rej.items())]
    return "".join(printable(line) + "\n" for line in out)
