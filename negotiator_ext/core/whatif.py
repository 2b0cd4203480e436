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


def changed(row: dict) -> bool:
    """Whether a row changes between the two cycles: its matches, matched weight or
    quota (a group's) / limit (a submitter's)."""
    return bool(row["delta"] or row["weight_before"] != row["weight_after"]
                or row["quota_before"] != row["quota_after"])


def _rows(before: dict, after: dict, key: str, quota_before: dict, quota_after: dict
          ) -> list[dict]:
    cb, wb = _weights(before, key)
    ca, wa = _weights(after, key)
    rows = []
    for n in quota_before.keys() | quota_after.keys() | set(cb) | set(ca):
        rows.append({"name": n, "before": cb.get(n, 0), "after": ca.get(n, 0),
                     "delta": ca.get(n, 0) - cb.get(n, 0),
                     "weight_before": wb.get(n, 0.0), "weight_after": wa.get(n, 0.0),
                     "quota_before": quota_before.get(n), "quota_after": quota_after.get(n)})
    rows.sort(key=lambda r: (-abs(r["weight_after"] - r["weight_before"]), -abs(r["delta"]),
                             r["name"]))
    return rows


def compare_cycles(before: dict, after: dict) -> dict:
    """The whatif document: per group and per submitter (KEYS), largest change first, and
    the two cycles' totals. Quotas: a group's effective quota; a submitter's limit (its
    share of its group, the first pie spin)."""
    groups = _rows(before, after, "group",
                   {g["name"]: g.get("effective_quota") for g in before["groups"]},
                   {g["name"]: g.get("effective_quota") for g in after["groups"]})
    subs = _rows(before, after, "submitter",
                 {s["name"]: s.get("limit") for s in before["submitters"]},
                 {s["name"]: s.get("limit") for s in after["submitters"]})
    total = {"before": len(before["matches"]), "after": len(after["matches"]),
             "weight_before": sum(m["cost"] or 0.0 for m in before["matches"]),
             "weight_after": sum(m["cost"] or 0.0 for m in after["matches"])}
    total["delta"] = total["after"] - total["before"]
    return {"cycle": {"before": before["cycle"], "after": after["cycle"]}, "total": total,
            "groups": groups if len(before["groups"]) > 1 or len(after["groups"]) > 1 else [],
            "submitters": subs,
            "changed": {"groups": sum(map(changed, groups)),
                        "submitters": sum(map(changed, subs))}}
