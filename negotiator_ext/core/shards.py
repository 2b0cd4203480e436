"""A pool of several negotiators, rolled up.

A pool may be sharded: several negotiators against one collector, each matching only the
slots its NEGOTIATOR_SLOT_CONSTRAINT keeps and keeping its own accountant (its own usage,
priorities and fair share; condor_userprio must be told `-name`). Each negotiator is
fair within its shard; none of them sees a submitter's standing in the others. The
roll-up puts the shards' cycles side by side: each shard's size and matches, and each
submitter's usage, matches and effective priority in every shard and in the whole pool.

Plain data in (each shard's cycle document, `CycleResult.to_json()`), plain data out.
"""

from __future__ import annotations

import re
from typing import Iterable

_STREAM = re.compile(r"(.*) \(negotiator (.+)\)", re.S)


def stream_name(pool: str, negotiator: str | None) -> str:
    """The name a negotiator's passes are recorded under in the ledger: the pool's own
    for a pool of one negotiator, "<pool> (negotiator <Name>)" for one of several."""
    return pool if negotiator is None else f"{pool} (negotiator {negotiator})"


def split_stream(name: str | None) -> tuple[str | None, str | None]:
    """(pool, negotiator) of a ledger stream name (`stream_name`'s inverse); negotiator
    None for a pool of one."""
    if name is None:
        return None, None
    m = _STREAM.fullmatch(name)
    return (m.group(1), m.group(2)) if m else (name, None)

_SHARD_FIELDS = ("usage_before", "usage_after", "matched", "matched_weight", "eup",
                 "factor", "group", "idle_jobs", "running_jobs")


def roll_up(shards: Iterable[tuple[str, int, dict]]) -> dict:
    """{"negotiators": [...], "pool": {...}, "submitters": [...]} from (negotiator name,
    slots it sees, its cycle document) per shard. Submitters: the most usage in the whole
    pool after the cycles first; `pool_share` is that usage over the whole pool's slot
    weight; `priority_spread` the largest over the smallest effective priority among the
    shards where it has a record (None in one shard)."""
    negotiators, by_name = [], {}
    for name, slots, doc in shards:
        rows = doc.get("submitters") or []
        negotiators.append({
            "name": name, "slots": slots, "pool_weight": doc["cycle"]["pool_weight"],
            "submitters": len(rows), "matches": len(doc.get("matches") or ()),
            "matched_weight": sum(r.get("matched_weight") or 0.0 for r in rows),
            "usage_before": sum(r.get("usage_before") or 0.0 for r in rows),
            "usage_after": sum(r.get("usage_after") or 0.0 for r in rows),
            "partial": bool(doc["cycle"].get("partial")),
            "warnings": list(doc.get("warnings") or ()),
        })
        for r in rows:
            entry = by_name.setdefault(r["name"], {"name": r["name"], "shards": {}})
            entry["shards"][name] = {k: r.get(k) for k in _SHARD_FIELDS}
    pool_weight = sum(n["pool_weight"] for n in negotiators)
    submitters = []
    for entry in by_name.values():
        shard_rows = entry["shards"].values()
        usage = sum(s["usage_after"] or 0.0 for s in shard_rows)
        eups = [s["eup"] for s in shard_rows if isinstance(s["eup"], (int, float)) and s["eup"] > 0]
        submitters.append({
            **entry,
            "usage_before": sum(s["usage_before"] or 0.0 for s in shard_rows),
            "usage_after": usage,
            "matched": sum(s["matched"] or 0 for s in shard_rows),
            "matched_weight": sum(s["matched_weight"] or 0.0 for s in shard_rows),
            "pool_share": usage / pool_weight if pool_weight > 0 else None,
            "priority_spread": max(eups) / min(eups) if len(eups) > 1 else None,
        })
    submitters.sort(key=lambda s: (-s["usage_after"], s["name"]))
    pool = {
        "negotiators": len(negotiators),
        "slots": sum(n["slots"] for n in negotiators),
        "pool_weight": pool_weight,
        "submitters": len(submitters),
        "matches": sum(n["matches"] for n in negotiators),
        "matched_weight": sum(n["matched_weight"] for n in negotiators),
        "usage_before": sum(n["usage_before"] for n in negotiators),
        "usage_after": sum(n["usage_after"] for n in negotiators),
        "in_several": sum(1 for s in submitters if len(s["shards"]) > 1),
    }
    return {"negotiators": negotiators, "pool": pool, "submitters": submitters}
