"""Human output of `explain`: one screen telling one job's story in one cycle."""

from __future__ import annotations

from .tables import num as _num
from .text import printable


def _g(v) -> str:
    return _num(v, "{:g}")


def _counts(d: dict) -> str:
    return ", ".join(f"{k} {n}" for k, n in d.items()) or "-"


def render_explain(doc: dict) -> str:
    """The job's story for people. Every line is passed through `printable`: the job's
    attributes, its submitter, schedd, slot and group names come from untrusted ads."""
    j = doc["job"]
    out = [f"Job {j['id']}: {doc['verdict']}", ""]
    out.append(f"  schedd      {j['schedd'] or '-'}")
    out.append(f"  submitter   {j['submitter'] or '-'}   group {j['group'] or '-'}")
    out.append(f"  status      {j['status_name']}"
               + (f"   autocluster {j['autocluster']}" if j.get("autocluster") is not None else ""))
    o = doc.get("outcome") or {}
    if o.get("match"):
        m = o["match"]
        out.append(f"  matched     {m['slot']} ({m['reason']})"
                   + (f", preempting {m['preempting']}" if m["preempting"] else "")
                   + f"; request named by job {m['request_job']}")
    elif o.get("rejection"):
        r = o["rejection"]
        out.append(f"  rejected    \"{r['reason']}\" (MatchLog: Rejected {r['job']} "
                   f"{r['submitter']}, the request it belongs to)")
    elif j["status"] == 1:
        out.append("  rejected    no rejection record: the job's request was never offered")
    s = doc.get("slots")
    if s:
        out += ["", f"Slots ({s['total']} in the pool, {doc['cycle']['trimmed_slots']} "
                    "matchable after trimming):",
                f"  the job's Requirements accept   {s['job_accepts']}",
                f"  ... and accept the job back     {s['both_accept']}",
                f"      matched this cycle          {sum(s['matched_this_cycle'].values())}"
                f"  ({_counts(s['matched_this_cycle'])})",
                f"      claimed, not preempted      {sum(s['claimed'].values())}"
                f"  ({_counts(s['claimed'])})",
                f"      still free                  {s['free']}"
                + (f"  ({_counts(s['free_by_state'])}: {', '.join(s['free_slots'])}"
                   + (", ..." if s["free"] > len(s["free_slots"]) else "") + ")"
                   if s["free"] else "")]
        if s.get("clauses"):
            out.append("  Requirements clauses (slots each rejects):")
            most = max(c["rejects"] for c in s["clauses"])
            out += [f"    {c['rejects']:5d}  {c['text']}"
                    + ("   <- cuts most" if most and c["rejects"] == most else "")
                    for c in s["clauses"]]
        else:
            out.append(f"  ({s['clauses_note']})")
    sub = doc.get("submitter")
    if sub:
        out += ["", f"Submitter {sub['name']}: EUP {_num(sub['eup'])}, share "
                    f"{_num(sub['share'], '{:.4f}')}, limit {_num(sub['limit'])}, floor "
                    f"{_g(sub['floor'])}, ceiling {_g(sub['ceiling'])}",
                f"  usage {_num(sub['usage_before'])} -> {_num(sub['usage_after'])}, matched "
                f"{sub['matched']} this cycle, {sub['idle_jobs']} idle, "
                f"{sub['running_jobs']} running"]
    g = doc.get("group")
    if g and (g.get("effective_quota") is not None or g["name"] != "<none>"):
        out.append(f"Group {g['name']}: quota {_num(g['effective_quota'])}, allocated "
                   f"{_num(g['allocated'])}, usage {_num(g['usage_before'])} -> "
                   f"{_num(g['usage'])}")
    chain = doc.get("group_chain") or []
    if len(chain) > 1 or any(c["children"] for c in chain):
        out.append("Group tree, from the job's group up:")
        for c in chain:
            policy = {"no": "does not accept surplus", "byquota": "accepts surplus",
                      "regroup": "autoregroup"}.get(c["surplus_policy"] or "", "-")
            got = (f", +{_num(c['surplus_received'])} surplus"
                   if c["surplus_received"] > 0 else "")
            out.append(f"  {c['name']}: quota {_num(c['effective_quota'])}, allocated "
                       f"{_num(c['allocated'])}{got}, {policy}; subtree in use "
                       f"{_num(c['subtree_usage_before'])} -> "
                       f"{_num(c['subtree_usage_after'])}"
                       + ("  <- caps its subtree at its quota" if c["caps"] else ""))
            if c["children"] and len(chain) > 1:
                out.append("      children: " + ", ".join(
                    f"{k['name']} allocated {_num(k['allocated'])} (quota "
                    f"{_num(k['effective_quota'])}, in use {_num(k['usage'])})"
                    for k in c["children"]))
    for x in doc.get("concurrency_limits") or []:
        out.append(f"Concurrency limit {x['name']}: {_g(x['count'])} of {_g(x['max'])} in use "
                   f"after the cycle ({_g(x['count_before'])} before)")
    acj = doc.get("autocluster_jobs")
    if acj is not None:
        out += ["", f"Autocluster {j['autocluster']} of {j['submitter']}: {len(acj)} job(s)"]
        for a in acj:
            what = (f"matched to {a['slot']} ({a['reason']})" if a["outcome"] == "matched"
                    else f"rejected: {a['reason']} (request {a['request_job']})"
                    if a["outcome"] == "rejected" else "not matched, never offered")
            out.append(f"  {a['job']:>12}  {what}")
    return "".join(printable(line) + "\n" for line in out)
