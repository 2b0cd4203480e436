"""Why was (or wasn't) a job matched in one negotiation cycle: `explain_job`.

Plain data in, one dict out: the job's classad2 ad, the slot ads the cycle saw, and the
cycle's result (`cycle.CycleResult`). Every evaluation goes through `core.classads`.

When the job's Requirements are a top-level conjunction, each clause is also evaluated
on its own, like `condor_q -better-analyze` (the clauses come from
`classads.conjuncts`, which classad2 validates); otherwise they are evaluated whole.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Iterable

from . import classads, consumption
from .accountant import parse_concurrency_limits
from .match_list import REASON_NO_MATCH, REASON_POLICY, REASON_SUBMITTER_LIMIT
from .matchmaking import STATE_NAMES, symmetric_match
from .job_queue import job_id, job_submitter
from .slots import current_user

_REQUIREMENTS = classads.parse_expr("MY.Requirements")

JOB_STATUS = {1: "Idle", 2: "Running", 3: "Removed", 4: "Completed", 5: "Held",
              6: "Transferring Output", 7: "Suspended"}

CLAUSES_NOTE = ("no per-clause breakdown: the job's Requirements are not a top-level "
                "conjunction of clauses (&&), so they are evaluated whole")


class _AdJob:
    """A classad2 ad seen as core.job_queue's job functions expect (`value(lname)`)."""

    def __init__(self, ad):
        self.ad = ad

    def value(self, lname: str):
        return classads.eval_attr(self.ad, lname)


def _g(x) -> str:
    return "-" if x is None else f"{x:g}" if isinstance(x, (int, float)) else str(x)


def _by(counter: Counter) -> str:
    return ", ".join(f"{k} {n}" for k, n in counter.most_common())


def job_limits(ad) -> list[str]:
    """The limit names of the job's ConcurrencyLimits (evaluated; only a string counts)."""
    text = classads.eval_string(ad, "ConcurrencyLimits")
    return [n for n, _ in parse_concurrency_limits(text)] if text else []


def analyze_slots(job_ad, slot_ads: Iterable, matches: list) -> dict:
    """Which slots accept the job, which of them accept it back, and where they went."""
    slot_ads = list(slot_ads)
    matched_by_slot: dict[str, list[str]] = {}
    for m in matches:
        matched_by_slot.setdefault(m.slot, []).append(m.submitter)
    job_accepts = both = 0
    taken: Counter = Counter()
    claimed: Counter = Counter()
    free: Counter = Counter()
    free_names: list[str] = []
    # like condor_q -better-analyze: how many slots each clause of the job's
    # Requirements turns down (evaluated on its own, the job as MY)
    req = job_ad.lookup("Requirements") if "Requirements" in job_ad else None
    texts = classads.conjuncts(req) if req is not None else None
    clauses = [(t, classads.parse_expr(t)) for t in texts] if texts else []
    rejects = [0] * len(clauses)
    for ad in slot_ads:
        for i, (_, e) in enumerate(clauses):
            if not classads.is_true(classads.eval_match(e, job_ad, ad)):
                rejects[i] += 1
        if not classads.is_true(classads.eval_match(_REQUIREMENTS, job_ad, ad)):
            continue
        job_accepts += 1
        # the negotiator's own test (with a consumption policy's request override)
        if not symmetric_match(job_ad, ad, consumption.supports_policy(ad)):
            continue
        both += 1
        name = classads.eval_string(ad, "Name") or "?"
        if name in matched_by_slot:
            taken.update(matched_by_slot[name])
            continue
        holder = current_user(ad)
        if holder is not None:
            claimed[holder] += 1
        else:
            free[classads.eval_string(ad, "State") or "?"] += 1
            free_names.append(name)
    return {
        "total": len(slot_ads), "job_accepts": job_accepts, "both_accept": both,
        "clauses": [{"text": t, "rejects": n} for (t, _), n in zip(clauses, rejects)] or None,
        "clauses_note": None if clauses else CLAUSES_NOTE,
        "matched_this_cycle": dict(taken.most_common()),
        "claimed": dict(claimed.most_common()),
        "free": sum(free.values()), "free_by_state": dict(free.most_common()),
        "free_slots": free_names[:3],
    }


def _rejection_for(result, schedd, job: str, submitter: str, ac: int | None) -> dict | None:
    """The rejection record of the job's request: the one naming the job itself, else
    the last with the job's submitter and autocluster (the MatchLog names a request by
    its first job)."""
    found = None
    for r in result.rejections:
        if r.submitter != submitter or (schedd and r.schedd != schedd):
            continue
        if r.job == job:
            found = r
            break
        if ac is not None and r.autocluster == ac:
            found = r
    if found is None:
        return None
    return {"job": found.job, "schedd": found.schedd, "submitter": found.submitter,
            "reason": found.reason, "autocluster": found.autocluster}


def _match_for(result, schedd, job: str) -> dict | None:
    for m in result.matches:
        if m.assigned_job == job and (not schedd or m.schedd == schedd):
            return {"slot": m.slot, "reason": STATE_NAMES[m.state], "preempting": m.preempting,
                    "request_job": m.job, "submitter": m.submitter, "cost": m.cost,
                    "autocluster": m.autocluster}
    return None


def _verdict(outcome: dict, slots: dict, sub: dict | None, group: dict | None,
             limits: list[dict]) -> str:
    m = outcome.get("match")
    if m:
        v = f"matched to {m['slot']} ({m['reason']})"
        return v + (f", preempting {m['preempting']}" if m["preempting"] else "")
    rej = outcome.get("rejection")
    reason = rej["reason"] if rej else None
    total, acc, both = slots["total"], slots["job_accepts"], slots["both_accept"]
    if reason and reason.startswith("concurrency limit"):
        full = [x for x in limits if x["max"] is not None and x["count"] is not None
                and x["count"] >= x["max"]] or limits
        if full:
            return "not matched: " + "; ".join(
                f"concurrency limit {x['name']} reached ({_g(x['count'])} of {_g(x['max'])})"
                for x in full)
        return f"not matched: {reason}"
    if reason == REASON_POLICY:
        return ("not matched: only claimed slots accept it and PREEMPTION_REQUIREMENTS is "
                "False for them")
    if reason == REASON_SUBMITTER_LIMIT:
        return (f"not matched: submitter limit reached (limit {_g(sub and sub['limit'])}, "
                f"usage {_g(sub and sub['usage_after'])})")
    if reason is None and outcome.get("not_offered"):
        return "not negotiated: " + outcome["not_offered"]
    if acc == 0:
        return (f"not matched: no slot accepts the job (its Requirements reject all "
                f"{total} slots)")
    if both == 0:
        return (f"not matched: the {acc} slot(s) its Requirements accept all refuse the job "
                "(their Requirements/START)")
    taken, claimed, free = slots["matched_this_cycle"], slots["claimed"], slots["free"]
    n_taken, n_claimed = sum(taken.values()), sum(claimed.values())
    parts = []
    if n_taken:
        parts.append("taken this cycle (by " + _by(Counter(taken)) + ")")
    if n_claimed:
        parts.append("claimed and not preempted (by " + _by(Counter(claimed)) + ")")
    if reason is None:
        if sub is None:
            return "not matched: never offered (its submitter had no turn this cycle)"
        why = (f"its submitter's limit was reached before its turn (limit {_g(sub['limit'])}, "
               f"usage {_g(sub['usage_after'])})")
        if sub.get("limit") is None:
            why = "its submitter had no turn this cycle"
            if group is not None and group.get("allocated") is not None:
                why += f" (group {group['name']} allocated {_g(group['allocated'])})"
        elif sub.get("ceiling") is not None and sub["usage_after"] >= sub["ceiling"]:
            why = (f"its submitter reached its ceiling ({_g(sub['ceiling'])}, usage "
                   f"{_g(sub['usage_after'])})")
        return "not matched: never offered: " + why
    if free == 0 and parts:
        n = n_taken + n_claimed
        if n_taken and not n_claimed:
            return f"not matched: the {n} slot(s) that accept it were all taken this cycle " \
                   f"(by {_by(Counter(taken))})"
        return f"not matched: the {n} slot(s) that accept it were all " + " or ".join(parts)
    if (reason == REASON_NO_MATCH and sub is not None and sub.get("limit") is not None
            and sub["matched_weight"] >= sub["limit"] - 1e-6):
        why = (f"not matched: submitter limit reached (limit {_g(sub['limit'])}, matched "
               f"{_g(sub['matched_weight'])} this cycle); past its limit the negotiator only "
               f"looks for slots to preempt by Rank and found none ({free} accepting slot(s) "
               "left free)")
        if (group is not None and group.get("allocated") is not None
                and group["usage"] >= group["allocated"] - 1e-6):
            why += (f"; group {group['name']} used its allocation ({_g(group['allocated'])})")
        return why
    return (f"not matched: {reason}, although {free} slot(s) that accept it both ways are "
            "still free")


def group_chain(groups: list[dict], name: str | None) -> list[dict]:
    """The job's group and each ancestor up to the root, with what bounds it (rules G6-G11):
    its quota and allocation, the surplus it received (allocated beyond its quota), its
    surplus policy, its subtree's usage before and after the cycle, and `caps`: a group
    that does not accept surplus holds its whole subtree to its quota (G11), so when the
    subtree's usage reaches that quota, it is what stopped the jobs below it. Each
    entry also lists its children's allocations (who took the surplus)."""
    by_name = {g["name"]: g for g in groups}
    kids: dict[str, list[str]] = {}
    for g in groups:
        if g.get("parent") is not None:
            kids.setdefault(g["parent"], []).append(g["name"])

    def subtree(n: str, key: str) -> float:
        return (by_name[n].get(key) or 0.0) + sum(subtree(k, key) for k in kids.get(n, ()))

    chain = []
    node = by_name.get(name) if name else None
    while node is not None:
        n = node["name"]
        quota, alloc = node.get("effective_quota"), node.get("allocated")
        used_after = subtree(n, "usage")
        caps = (node.get("surplus_policy") == "no" and node.get("parent") is not None
                and quota is not None and used_after >= quota - 1e-6)
        chain.append({
            "name": n, "effective_quota": quota, "subtree_quota": node.get("subtree_quota"),
            "allocated": alloc, "surplus_policy": node.get("surplus_policy"),
            "surplus_received": (alloc - quota) if alloc is not None and quota is not None
            and alloc > quota else 0.0,
            "subtree_usage_before": subtree(n, "usage_before"),
            "subtree_usage_after": used_after, "caps": caps,
            "children": [{"name": k, "effective_quota": by_name[k].get("effective_quota"),
                          "allocated": by_name[k].get("allocated"),
                          "usage": by_name[k].get("usage")} for k in kids.get(n, ())]})
        parent = node.get("parent")
        node = by_name.get(parent) if parent is not None else None
    return chain


def _chain_note(chain: list[dict]) -> str:
    """The verdict's note on the group tree: the nearest ancestor that caps the job's
    group (it does not accept surplus and its subtree is at its quota)."""
    for g in chain[1:]:
        if g["caps"]:
            below = " + ".join(c["name"] for c in g["children"]) or g["name"]
            return (f"; group {g['name']} does not accept surplus and holds {below} to its "
                    f"quota {_g(g['effective_quota'])} (in use {_g(g['subtree_usage_after'])} "
                    "after this cycle)")
    return ""


def explain_job(job_ad, slot_ads: Iterable, result, *, schedd: str | None = None,
                autocluster: bool = False) -> dict:
    """The story of one job in one cycle, as a JSON-ready dict (keys documented in the
    docs/commands.md: job, verdict, reason, outcome, slots, submitter, group, concurrency_limits,
    and with `autocluster` the request's jobs)."""
    view = _AdJob(job_ad)
    c, p = job_id(view)
    jid = f"{c}.{p}"
    submitter = job_submitter(view)
    status = classads.as_number(view.value("jobstatus"))
    status = int(status) if status is not None else None
    sub = next((dict(r) for r in result.submitters if r["name"] == submitter), None)
    group = None
    if sub is not None:
        g = next((r for r in result.groups if r["name"] == sub["group"]), None)
        if g is not None:
            group = {k: g.get(k) for k in ("name", "effective_quota", "allocated",
                                            "usage_before", "usage", "matched")}
    index = job_index(result)
    acinfo = index.get((schedd, jid)) if schedd else None
    if acinfo is None:
        acinfo = next((v for (s, j), v in index.items()
                       if j == jid and (schedd is None or s == schedd)), None)
    ac = acinfo[1] if acinfo else None
    doc: dict[str, Any] = {
        "job": {"id": jid, "schedd": schedd, "submitter": submitter,
                "group": sub["group"] if sub else None, "status": status,
                "status_name": JOB_STATUS.get(status, str(status)), "autocluster": ac},
        "cycle": {"time": result.time, "slots": result.slots,
                  "trimmed_slots": result.trimmed_slots},
        "submitter": sub, "group": group, "group_chain": [],
    }
    if status != 1:
        doc.update(verdict=f"not idle ({doc['job']['status_name']}), not negotiated",
                   reason=None, outcome={"matched": False, "offered": False}, slots=None,
                   concurrency_limits=[])
        return doc

    limits_by_name = {x["name"].lower(): x for x in result.concurrency_limits}
    limits = []
    for name in job_limits(job_ad):
        x = limits_by_name.get(name.lower(), {})
        limits.append({"name": name, "max": x.get("max"), "count_before": x.get("count_before"),
                       "count": x.get("count")})
    match = _match_for(result, schedd, jid)
    rejection = None if match else _rejection_for(result, schedd, jid, submitter or "", ac)
    outcome: dict[str, Any] = {"matched": match is not None, "match": match,
                               "rejection": rejection, "offered": True}
    if not match and not rejection:
        if submitter is None:
            outcome.update(offered=False, not_offered="the job has no User, so no submitter")
        elif sub is None:
            outcome.update(offered=False, not_offered=f"no submitter ad for {submitter} "
                           "(the schedd did not advertise it)")
        elif acinfo is None:
            outcome.update(offered=False, not_offered="the job was not in the negotiated "
                           "queue (NEGOTIATOR_JOB_CONSTRAINT, or its schedd is unknown)")
        else:
            outcome.update(offered=False)
    slots = analyze_slots(job_ad, slot_ads, result.matches)
    doc.update(outcome=outcome, slots=slots, concurrency_limits=limits,
               reason=rejection["reason"] if rejection else None)
    doc["group_chain"] = group_chain(result.groups, sub["group"] if sub else None) \
        if len(result.groups) > 1 else []
    doc["verdict"] = _verdict(outcome, slots, sub, group, limits)
    if not match:
        doc["verdict"] += _chain_note(doc["group_chain"])
    if autocluster and acinfo is not None:
        doc["autocluster_jobs"] = autocluster_jobs(result, schedd, acinfo, index)
    return doc


def job_index(result) -> dict[tuple[str, str], tuple[str, int]]:
    """(schedd, "C.P") -> (submitter, autocluster) of every job the cycle offered, in
    each queue's order."""
    return {(schedd, entry[0]): (sub, entry[1])
            for (sub, schedd), q in result.queues.items() for entry in q.jobs}


def autocluster_jobs(result, schedd: str | None, acinfo: tuple[str, int],
                     index: dict | None = None) -> list[dict]:
    """The jobs of the same submitter, schedd and autocluster, in queue order, with their
    outcome: the slot they got, or the rejection of their request, or not offered."""
    submitter, ac = acinfo
    index = job_index(result) if index is None else index
    jobs = [(s, j) for (s, j), v in index.items()
            if v == acinfo and (schedd is None or s == schedd)]
    matched = {(m.schedd, m.assigned_job): m for m in result.matches}
    out = []
    for s, j in jobs:
        m = matched.get((s, j))
        if m is not None:
            out.append({"job": j, "schedd": s, "outcome": "matched", "slot": m.slot,
                        "reason": STATE_NAMES[m.state], "preempting": m.preempting})
        else:
            r = _rejection_for(result, s, j, submitter, ac)
            out.append({"job": j, "schedd": s, "outcome": "rejected" if r else "not offered",
                        "reason": r["reason"] if r else None,
                        "request_job": r["job"] if r else None})
    return out


__all__ = ["explain_job", "analyze_slots", "autocluster_jobs", "job_index", "job_limits", "CLAUSES_NOTE",
           "REASON_NO_MATCH"]
