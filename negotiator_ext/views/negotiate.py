"""Human output of one negotiation cycle: a report that fits a screen at any pool size.

A small cycle is shown whole (every group, submitter, match and rejection). Past a
screenful, each part is summarised: the groups with the most matched weight, the
submitters with the most matches and those left with the most idle jobs, the matches
counted per (submitter, request, slot class, reason, cost), the rejections counted per
reason. `full=True` (`negotiate --matches`) lists every match and every row instead.
"""

from __future__ import annotations

import time
from collections import Counter, defaultdict

from .tables import num as _num, table
from .text import printable

# a part longer than this is summarised (the report stays under ~150 lines)
MAX_GROUPS = 20
MAX_SUBMITTERS = 15
MAX_SHORTFALL = 10
MAX_MATCH_ROWS = 25
MAX_REJECTION_ROWS = 12


def _more(n: int, what: str) -> list[str]:
    return [f"  ... {n} more {what} (--matches shows them all)"] if n > 0 else []


def filter_doc(doc: dict, submitters: list[str] | None = None,
               group: str | None = None) -> dict:
    """The cycle's document for the named submitters and/or a group and its subgroups
    (`negotiate --submitter`, `--group`): groups, submitters, matches and rejections."""
    if not submitters and not group:
        return doc
    subs = set(submitters or ())

    def in_group(g: str | None) -> bool:
        return group is None or g == group or (g or "").startswith(group + ".")

    keep_sub = {s["name"] for s in doc["submitters"]
                if (not subs or s["name"] in subs) and in_group(s["group"])}
    out = dict(doc)
    out["submitters"] = [s for s in doc["submitters"] if s["name"] in keep_sub]
    out["matches"] = [m for m in doc["matches"] if m["submitter"] in keep_sub]
    out["rejections"] = [r for r in doc["rejections"] if r["submitter"] in keep_sub]
    if group is not None:
        out["groups"] = [g for g in doc["groups"] if in_group(g["name"])]
    return out


def render_cycle(doc: dict, full: bool = False) -> str:
    """The cycle for people. Names (submitters, groups, slots, jobs, limits) come from
    untrusted ads: table cells are escaped by `table`, and every line is passed through
    `printable` so no control character reaches the terminal."""
    c = doc["cycle"]
    when = time.strftime("%m/%d/%y %H:%M:%S", time.gmtime(c["time"]))
    matches = doc["matches"]
    out = [f"Negotiation cycle at {when} UTC ({c['time']}): {c['slots']} slots, "
           f"pool weight {c['pool_weight']:g}, {c['submitters']} submitters, "
           f"{c['spins']} pie spins, {len(matches)} matches"
           + ("  [PARTIAL SNAPSHOT]" if c["partial"] else ""), ""]
    out += _time_limits(doc.get("time_limits"))
    out += _groups(doc["groups"], full)
    out += _submitters(doc["submitters"], full)
    if "withheld_matches" in doc:
        out.append(f"{doc['withheld_matches']} match(es) withheld: the snapshot is partial.")
    else:
        out += _matches(matches, full)
    limits = doc.get("concurrency_limits") or []
    if limits:
        out += ["", "Concurrency limits:"]
        out += table(["Limit", "Max", "InUse", "InUseAfter"],
                      [[x["name"], _num(x["max"], "{:g}"), _num(x["count_before"], "{:g}"),
                        _num(x["count"], "{:g}")] for x in limits], {1, 2, 3})
    out += _rejections(doc["rejections"], full)
    return "".join(printable(line) + "\n" for line in out)


def _time_limits(t: dict | None) -> list[str]:
    """Where the real cycle's time limits would stop it, when they would (two lines)."""
    if not t or not t.get("cut"):
        return []
    why = []
    for key, knob in (("schedds_out_of_time", "NEGOTIATOR_MAX_TIME_PER_SCHEDD"),
                      ("submitters_out_of_time", "NEGOTIATOR_MAX_TIME_PER_SUBMITTER")):
        names = t.get(key) or []
        if names:
            shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
            why.append(f"{knob} = {t['limits'][knob]:g} s ({shown})")
    if t.get("cycle_out_of_time"):
        why.append(f"NEGOTIATOR_MAX_TIME_PER_CYCLE = "
                   f"{t['limits']['NEGOTIATOR_MAX_TIME_PER_CYCLE']:g} s")
    total = t["matches_within"] + t["matches_beyond"]
    line = (f"Time limits: the real negotiator would stop short after about "
            f"{t['predicted_duration']:.0f} s" + (f", at {'; '.join(why)}" if why else "")
            + f": {t['matches_within']} of these {total} matches, "
            f"{len(t['submitters_not_reached'])} submitter(s) and "
            f"{len(t['groups_not_reached'])} group(s) never reached "
            f"({t['seconds_per_request']:.3g} s a request, from {t['calibrated_from']}).")
    return [line, ""]


def _groups(groups: list[dict], full: bool) -> list[str]:
    if len(groups) <= 1:
        return []
    shown = groups
    if not full and len(groups) > MAX_GROUPS:
        top = sorted(groups, key=lambda g: (-(g["usage"] or 0) + (g["usage_before"] or 0),
                                            g["name"]))[:MAX_GROUPS]
        keep = {id(g) for g in top}
        shown = [g for g in groups if id(g) in keep]        # in the table's own order
    # Surplus: what the allocation gave beyond the group's own quota (surplus sharing)
    rows = [[g["name"], _num(g["config_quota"], "{:g}"), _num(g["effective_quota"]),
             _num(g["subtree_quota"]), g["surplus_policy"] or "-", _num(g["requested"]),
             _num(g["allocated"]), _surplus(g), _num(g["usage_before"]), str(g["matched"]),
             _num(g["usage"]), _num(g["sort_key"], "{:.4g}")] for g in shown]
    out = ([f"Groups ({len(shown)} of {len(groups)}, the most weight matched):"]
           if len(shown) < len(groups) else [])
    out += table(["Group", "Config", "Effective", "Subtree", "Surplus", "Requested",
                   "Allocated", "+Surplus", "InUse", "Matched", "InUseAfter", "SortKey"],
                  rows, set(range(1, 12)) - {4})
    return out + _more(len(groups) - len(shown), "groups") + [""]


def _surplus(g: dict) -> str:
    a, q = g.get("allocated"), g.get("effective_quota")
    if a is None or q is None or a <= q:
        return "-"
    return _num(a - q)


def _submitter_rows(subs: list[dict]) -> list[list[str]]:
    return [[s["name"], s["group"], _num(s["eup"]), _num(s["share"], "{:.4f}"),
             _num(s["limit"]), _num(s["usage_before"]), str(s["matched"]),
             _num(s["matched_weight"]), _num(s["usage_after"]),
             str(max(0, (s.get("idle_jobs") or 0) - s["matched"]))] for s in subs]


_SUB_HEAD = ["Submitter", "Group", "EUP", "Share", "Limit", "InUse", "Matched",
             "MatchedWeight", "InUseAfter", "IdleLeft"]


def _submitters(subs: list[dict], full: bool) -> list[str]:
    if full or len(subs) <= MAX_SUBMITTERS + MAX_SHORTFALL:
        return table(_SUB_HEAD, _submitter_rows(subs), set(range(2, 10))) + [""]
    top = sorted(subs, key=lambda s: (-s["matched"], s["name"]))[:MAX_SUBMITTERS]
    in_top = {id(s) for s in top}
    short = sorted((s for s in subs if id(s) not in in_top),
                   key=lambda s: (-((s.get("idle_jobs") or 0) - s["matched"]), s["name"])
                   )[:MAX_SHORTFALL]
    out = [f"Submitters with the most matches ({len(top)} of {len(subs)}):"]
    out += table(_SUB_HEAD, _submitter_rows(top), set(range(2, 10)))
    out += ["", f"Submitters left with the most idle jobs ({len(short)} more):"]
    out += table(_SUB_HEAD, _submitter_rows(short), set(range(2, 10)))
    return out + _more(len(subs) - len(top) - len(short), "submitters") + [""]


def _matches(matches: list[dict], full: bool) -> list[str]:
    out = [f"{len(matches)} match(es):"]
    if not matches:
        return out
    if full or len(matches) <= MAX_MATCH_ROWS:
        rows = [[m["job"], m["submitter"], m["slot"], m["reason"], m["preempting"] or "-",
                 _num(m["cost"], "{:g}")] for m in matches]
        return out + table(["Job", "Submitter", "Slot", "Reason", "Preempting", "Cost"],
                           rows, {5})
    # one row per (submitter, request, slot class, reason, cost): how many, and examples
    runs: dict = defaultdict(list)
    for m in matches:
        runs[(m["submitter"], m.get("autocluster"), m.get("slot_class"), m["reason"],
              m["cost"])].append(m)
    ranked = sorted(runs.items(), key=lambda kv: (-len(kv[1]), kv[0][0], str(kv[0][1])))
    rows = []
    for (sub, _ac, cls, reason, cost), ms in ranked[:MAX_MATCH_ROWS]:
        preempting = sum(1 for m in ms if m["preempting"])
        rows.append([str(len(ms)), sub, ms[0]["job"], ms[0]["slot"],
                     "-" if cls is None else str(cls), reason, str(preempting),
                     _num(cost, "{:g}")])
    out[0] = (f"{len(matches)} match(es), counted per submitter, request (its first job), "
              "slot class (an example slot) and reason:")
    out += table(["Count", "Submitter", "Request", "Slot", "Class", "Reason", "Preempting",
                  "Cost"], rows, {0, 4, 6, 7})
    return out + _more(len(ranked) - len(rows), "rows")


def _rejections(rejections: list[dict], full: bool) -> list[str]:
    by_sub = Counter((r["submitter"], r["reason"]) for r in rejections)
    if not by_sub:
        return []
    if full or len(by_sub) <= MAX_REJECTION_ROWS:
        return ["", "Rejections:"] + [f"  {n:4d}  {sub}: {reason}"
                                      for (sub, reason), n in sorted(by_sub.items())]
    by_reason = Counter(r["reason"] for r in rejections)
    subs_of: dict = defaultdict(set)
    for r in rejections:
        subs_of[r["reason"]].add(r["submitter"])
    out = ["", "Rejections by reason (requests, submitters):"]
    out += [f"  {n:6d}  {len(subs_of[reason]):5d}  {reason}"
            for reason, n in sorted(by_reason.items(), key=lambda kv: (-kv[1], kv[0]))]
    return out
