"""Human output of one negotiation cycle: a report that fits a screen at any pool size.

A small cycle is shown whole (every group, submitter, match and rejection). Past a
screenful, each part is summarised: the groups with the most matched weight, the
submitters with the most matches and those left with the most idle jobs, the matches
counted per (submitter, request, slot class, reason, cost), the rejections counted per
reason. `full=True` (`negotiate --matches`) lists every match and every row instead.
"""

from __future__ import annotations

import shlex
from collections import Counter, defaultdict
from typing import Sequence

from ..when import utc_text
from .tables import legend as tables_legend, num as _num, table
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


def render_cycle(doc: dict, full: bool = False, snapshot: str | None = None) -> str:
    """The cycle for people, ending with a legend of the columns shown that are not
    HTCondor's own. Names (submitters, groups, slots, jobs, limits) come from untrusted
    ads: table cells are escaped by `table`, and every line is passed through
    `printable` so no control character reaches the terminal. `snapshot`: the directory
    the `explain` command a rejection points to is given (else "SNAPSHOT")."""
    c = doc["cycle"]
    # ISO 8601, as `ledger show` and `recommend` print times (not condor_userprio's
    # month/day: this report is ours)
    when = utc_text(c["time"])
    matches = doc["matches"]
    shown: list[str] = []           # the tables shown, for the legend
    out = [f"Negotiation cycle at {when} UTC ({c['time']}): {c['slots']} slots, "
           f"pool weight {c['pool_weight']:g}, {c['submitters']} submitters, "
           f"{c['spins']} pie spins, {len(matches)} matches"
           + ("  [PARTIAL SNAPSHOT]" if c["partial"] else ""), ""]
    out += _time_limits(doc.get("time_limits"))
    groups = _groups(doc["groups"], full)
    out += groups
    shown += ["groups"] if groups else []
    out += _submitters(doc["submitters"], full)
    shown.append("submitters")
    if "withheld_matches" in doc:
        out.append(f"{doc['withheld_matches']} match(es) withheld: the snapshot is partial.")
    else:
        out += _matches(matches, full)
        if matches:
            shown.append("matches" if full or len(matches) <= MAX_MATCH_ROWS
                         else "match counts")
    limits = doc.get("concurrency_limits") or []
    if limits:
        out += ["", "Concurrency limits:"]
        out += table(["Limit", "Max", "InUse", "InUseAfter"],
                      [[x["name"], _num(x["max"], "{:g}"), _num(x["count_before"], "{:g}"),
                        _num(x["count"], "{:g}")] for x in limits], {1, 2, 3})
        shown.append("concurrency limits")
    stops = _schedd_stops(doc.get("schedd_stops") or [])
    out += stops
    shown += ["schedd limits"] if stops else []
    out += _rejections(doc, full, snapshot or "SNAPSHOT")
    out += legend(shown)
    return "".join(printable(line) + "\n" for line in out)


# What each column shown means, for those that are not HTCondor's own. HTCondor's own:
# condor_userprio -quotas' (Config, Effective, Subtree, Surplus, Requested; EUP), the
# MatchLog's (Job, Slot, Reason: its preemption state), a submitter's and a group's name.
_HTCONDOR_OWN = {
    "groups": "Config, Effective, Subtree, Surplus and Requested are condor_userprio "
              "-quotas' Config Quota, Effective Quota, Subtree Quota, Use Surplus and "
              "Weighted Requested",
    "submitters": "EUP is condor_userprio's Effective Priority",
    "matches": "Job, Slot and Reason, the preemption state, are the MatchLog's",
    "match counts": "Reason, the preemption state, is the MatchLog's",
}
_LEGEND = {
    "groups": [
        ("Allocated", "the weight the group's quota allocation gave it this cycle (its "
                      "quota and the surplus shared to it, within what it requests)"),
        ("+Surplus", "Allocated beyond Effective: surplus the group received"),
        ("InUse", "the group's own weighted usage before the cycle"),
        ("Matched", "matches made this cycle to the group's submitters"),
        ("InUseAfter", "InUse plus the weight of this cycle's matches"),
        ("SortKey", "GROUP_SORT_EXPR's value: groups negotiate in increasing order; <last> "
                    "is 3.3e+38 or more (the default expression gives <none> 3.4e+38 and a "
                    "group without a quota 3.3e+38: after every other group)"),
    ],
    "submitters": [
        ("Share", "the submitter's share of its group's quota (of the pool, in <none>) "
                  "in the first pie spin (the Accounting ad's SubmitterShare)"),
        ("Limit", "the weight it may match in its first pie spin: its share of the pie "
                  "less its usage, within what its group's quota leaves"),
        ("InUse", "weighted usage before the cycle"),
        ("Matched", "matches made this cycle"),
        ("MatchedWeight", "their weight (SLOT_WEIGHT of the slots matched)"),
        ("InUseAfter", "InUse plus MatchedWeight"),
        ("IdleLeft", "idle jobs this cycle did not match"),
    ],
    "matches": [
        ("Preempting", "the user whose claim the match preempts (- for none)"),
        ("Cost", "the weight the match charges against the submitter's limit (a "
                 "partitionable slot matched whole costs its whole weight)"),
    ],
    "match counts": [
        ("Count", "matches in the row"),
        ("Request", "the request's first job, as the MatchLog names it"),
        ("Slot", "an example slot of the class"),
        ("Class", "slots matchmaking cannot tell apart share a number"),
        ("Preempting", "how many of the row's matches preempt a claim"),
        ("Cost", "the weight each match charges against the submitter's limit"),
    ],
    "schedd limits": [
        ("Knob", "the schedd's knob that set Offers: MAX_JOBS_RUNNING (less its Shadows), "
                 "MAX_CONCURRENT_UPLOADS_PER_USER (its per-user match limit, less the "
                 "submitter's jobs waiting to transfer) or CURB_MATCHMAKING (nothing)"),
        ("Offers", "how many jobs one negotiation session offered each submitter (the "
                   "least of the row's sessions)"),
        ("Shadows", "the schedd's running jobs plus this cycle's matches handed to it, "
                    "as the session began (the most of the row's sessions)"),
        ("Submitters", "submitters whose turn ended so with idle jobs left"),
        ("IdleLeft", "their idle jobs the schedd did not offer or the cycle did not match"),
    ],
    "concurrency limits": [
        ("Max", "the limit's maximum (<NAME>_LIMIT, else CONCURRENCY_LIMIT_DEFAULT)"),
        ("InUse", "its count before the cycle (the running jobs' claims)"),
        ("InUseAfter", "its count after this cycle's matches"),
    ],
}


def legend(shown: Sequence[str]) -> list[str]:
    """The legend of the tables `shown` (their _LEGEND keys, in order)."""
    return tables_legend([(part.capitalize(), _HTCONDOR_OWN.get(part), _LEGEND[part])
                          for part in shown])


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
             _num(g["subtree_quota"]), use_surplus(g), _num(g["requested"]),
             _num(g["allocated"]), _surplus(g), _num(g["usage_before"]), str(g["matched"]),
             _num(g["usage"]), _sort_key(g["sort_key"])] for g in shown]
    out = ([f"Groups ({len(shown)} of {len(groups)}, the most weight matched):"]
           if len(shown) < len(groups) else [])
    out += table(["Group", "Config", "Effective", "Subtree", "Surplus", "Requested",
                   "Allocated", "+Surplus", "InUse", "Matched", "InUseAfter", "SortKey"],
                  rows, set(range(1, 12)) - {4})
    return out + _more(len(groups) - len(shown), "groups") + [""]


# condor_userprio -quotas' words for a group's SurplusPolicy ("Use Surplus"); it prints
# "yes" for <none>, which always takes what its subtree leaves
_USE_SURPLUS = {"byquota": "ByQuota", "regroup": "Regroup", "no": "no"}
# the least GROUP_SORT_EXPR value shown as <last>: the default expression's 3.3e+38 (a
# group without a quota) and 3.4e+38 (<none>)
LAST_SORT_KEY = 3.3e38


def use_surplus(g: dict) -> str:
    """The group's surplus policy in condor_userprio -quotas' words."""
    if g.get("parent") is None:
        return "yes"
    policy = g.get("surplus_policy")
    return _USE_SURPLUS.get(policy, policy or "-")


def _sort_key(v) -> str:
    if v is not None and v >= LAST_SORT_KEY:
        return "<last>"
    return _num(v, "{:.4g}")


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


# what a rejection's `cause` says beside the negotiator's text, and the start of the
# texts of the negotiator's that already say it
_CAUSE = {"submitter_limit": "at its submitter limit", "concurrency_limit":
          "a concurrency limit"}
_SAID = {"submitter_limit": "submitter limit", "concurrency_limit": "concurrency limit"}


def _tag(reason: str, cause: str | None) -> str:
    """The cause, where the negotiator's text does not already say it."""
    if not cause or reason.startswith(_SAID[cause]):
        return ""
    return _CAUSE[cause]


def _cause_text(r: dict, subs: dict, groups: dict) -> str:
    """Beside the negotiator's text: the limit that held the request back, unless the
    text says so already, with the submitter's figures (its limit, its matches, its
    group's quota); "" when there is nothing to add."""
    cause = r.get("cause")
    if cause != "submitter_limit":
        return _tag(r["reason"], cause)
    s = subs.get(r["submitter"])
    if s is None:
        return _tag(r["reason"], cause)
    g = groups.get(s.get("group"))
    whose = (f"its share of {s['group']}'s quota"
             if g is not None and g.get("parent") is not None else "its share of the pool")
    figures = f"{whose}: limit {_num(s['limit'], '{:.4g}')}, {s['matched']} matched"
    said = _tag(r["reason"], cause)
    return f"{said} ({figures})" if said else figures


def _schedd_stops(stops: list[dict]) -> list[str]:
    """The submitters' turns their schedds ended (M7), a row per schedd and knob."""
    if not stops:
        return []
    rows: dict = {}
    for x in stops:
        r = rows.setdefault((x["schedd"], x["knob"]), [None, 0, 0, 0])
        r[0] = x["offers"] if r[0] is None else min(r[0], x["offers"])
        r[1] = max(r[1], x["shadows"])
        r[2] += 1
        r[3] += x["idle_left"]
    out = ["", "Turns the schedds ended (their own limits: no more jobs offered, idle jobs "
               "left):"]
    out += table(["Schedd", "Knob", "Offers", "Shadows", "Submitters", "IdleLeft"],
                 [[schedd, knob, str(r[0]), str(r[1]), str(r[2]), str(r[3])]
                  for (schedd, knob), r in sorted(rows.items(), key=lambda kv: (-kv[1][3],
                                                                               kv[0]))],
                 {2, 3, 4, 5})
    return out


def _rejections(doc: dict, full: bool, snapshot: str) -> list[str]:
    """The rejections counted per submitter and reason (past a screenful, per reason),
    each with the negotiator's own text; a limit that held a request back, whatever the
    text says, is named beside it, with the `explain` command for one of its jobs."""
    rejections = doc["rejections"]
    if not rejections:
        return []
    subs = {s["name"]: s for s in doc["submitters"]}
    groups = {g["name"]: g for g in doc["groups"]}
    first: dict = {}
    for r in rejections:
        first.setdefault((r["submitter"], r["reason"], r.get("cause")), r)
    by_sub = Counter((r["submitter"], r["reason"], r.get("cause")) for r in rejections)
    explain = f"negotiator-ext explain {shlex.quote(snapshot)}"
    if full or len(by_sub) <= MAX_REJECTION_ROWS:
        out = ["", "Rejections (the negotiator's reason; in brackets, the limit that held "
               "the request back, whatever the reason says):"]
        for (sub, reason, cause), n in sorted(by_sub.items(),
                                              key=lambda kv: (kv[0][0], kv[0][1],
                                                              kv[0][2] or "")):
            line = f"  {n:4d}  {sub}: {reason}"
            if cause:
                r = first[(sub, reason, cause)]
                said = _cause_text(r, subs, groups)
                line += (f"  [{said + '; see ' if said else 'see '}{explain} "
                         f"{r.get('unmatched_job') or r['job']}]")
            out.append(line)
        return out
    by_reason = Counter((r["reason"], r.get("cause")) for r in rejections)
    subs_of: dict = defaultdict(set)
    for r in rejections:
        subs_of[(r["reason"], r.get("cause"))].add(r["submitter"])
    out = ["", "Rejections by reason (requests, submitters):"]
    out += [f"  {n:6d}  {len(subs_of[key]):5d}  {key[0]}"
            + (f"  [{_tag(*key)}]" if _tag(*key) else "")
            for key, n in sorted(by_reason.items(),
                                 key=lambda kv: (-kv[1], kv[0][0], kv[0][1] or ""))]
    if any(cause for _, cause in by_reason):
        out.append(f"  (why one job was not matched: {explain} JOB)")
    return out
