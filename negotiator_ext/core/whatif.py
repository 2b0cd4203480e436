"""What changes between two negotiation cycles (`negotiator-ext whatif`): the same pool
under two configs, or two snapshots. Plain data in (two `CycleResult.to_json()`
documents), rows out: per group and per submitter, matches and matched weight before and
after, quotas before and after, the largest gains and losses first."""

from __future__ import annotations

from collections import Counter

KEYS = ("name", "before", "after", "delta", "weight_before", "weight_after",
        "quota_before", "quota_after")


def _weights(doc: dict, key: str) -> tuple[Counter, Counter]:
    count: Counter = Counter()
    weight: Counter = Counter()
    for m in doc["matches"]:
        count[m[key]] += 1
        weight[m[key]] += m["cost"] or 0.0
    return count, weight


def _rows(before: dict, after: dict, key: str, quota_of) -> list[dict]:
    cb, wb = _weights(before, key)
    ca, wa = _weights(after, key)
    names = quota_of.keys() | set(cb) | set(ca)
    rows = []
    for n in names:
        qb, qa = quota_of.get(n, (None, None))
        rows.append({"name": n, "before": cb.get(n, 0), "after": ca.get(n, 0),
                     "delta": ca.get(n, 0) - cb.get(n, 0),
                     "weight_before": wb.get(n, 0.0), "weight_after": wa.get(n, 0.0),
                     "quota_before": qb, "quota_after": qa})
    rows.sort(key=lambda r: (-abs(r["weight_after"] - r["weight_before"]), -abs(r["delta"]),
                             r["name"]))
    return rows


def compare_cycles(before: dict, after: dict) -> dict:
    """The whatif document: per group and per submitter (KEYS), largest change first, and
    the two cycles' totals. Quotas: a group's effective quota; a submitter's limit (its
    share of its group, the first pie spin)."""
    gq = {g["name"]: [g.get("effective_quota"), None] for g in before["groups"]}
    for g in after["groups"]:
        gq.setdefault(g["name"], [None, None])[1] = g.get("effective_quota")
    sq = {s["name"]: [s.get("limit"), None] for s in before["submitters"]}
    for s in after["submitters"]:
        sq.setdefault(s["name"], [None, None])[1] = s.get("limit")
    groups = _rows(before, after, "group", {k: tuple(v) for k, v in gq.items()})
    subs = _rows(before, after, "submitter", {k: tuple(v) for k, v in sq.items()})
    total = {"before": len(before["matches"]), "after": len(after["matches"]),
             "weight_before": sum(m["cost"] or 0.0 for m in before["matches"]),
             "weight_after": sum(m["cost"] or 0.0 for m in after["matches"])}
    total["delta"] = total["after"] - total["before"]
    return {"cycle": {"before": before["cycle"], "after": after["cycle"]}, "total": total,
            "groups": groups if len(before["groups"]) > 1 or len(after["groups"]) > 1 else [],
            "submitters": subs,
            "changed": {"groups": sum(1 for r in groups if r["delta"] or
                                      r["weight_before"] != r["weight_after"]),
                        "submitters": sum(1 for r in subs if r["delta"] or
                                          r["weight_before"] != r["weight_after"])}}
