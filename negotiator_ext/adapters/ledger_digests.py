"""The snapshot digests a ledger keeps for explaining disagreements (issue 32).

A pass's digest (core.disagreement.digest: the submitters with idle jobs, the idle job
ids as proc ranges, the slots and which were claimed and by whom, our candidate slots)
is what the pass that compares its cycle with the real one needs of its snapshot: a
cache, not a record, kept like the slot classes for the newest comparable passes only
(`KEPT`), in the table `pool_digests` (schema 10), and dropped once the pass is
compared. A loop and a cron entry (`shadow --once`, a process a pass) read it the same
way. The slots are written as two lists (claimed, not) to keep the text short, and each
claimant's slots as their places in the claimed list.
"""

from __future__ import annotations

import json
from typing import Any, Mapping

TABLE = "pool_digests"
KEPT = 5


def encode(digest: Mapping[str, Any]) -> str:
    slots = digest.get("slots") or {}
    out = {k: v for k, v in digest.items() if k not in ("slots", "owners")}
    out["claimed"] = claimed = sorted(n for n, c in slots.items() if c)
    out["free"] = sorted(n for n, c in slots.items() if not c)
    owners = digest.get("owners") or {}
    if owners:
        # each claimant's slots as places in the claimed list (not their names again)
        owned: dict[str, list[int]] = {}
        for i, name in enumerate(claimed):
            if owners.get(name):
                owned.setdefault(str(owners[name]), []).append(i)
        out["owned"] = owned
    return json.dumps(out, separators=(",", ":"))


def decode(text: str) -> dict[str, Any]:
    d = json.loads(text)
    claimed = list(d.pop("claimed", ()))
    slots = {n: False for n in d.pop("free", ())}
    slots.update({n: True for n in claimed})
    d["slots"] = slots
    owned = d.pop("owned", None)
    if owned:
        d["owners"] = {claimed[i]: owner for owner, places in owned.items()
                       for i in places if 0 <= i < len(claimed)}
    return d


def keep(db, uuid: str, pool: str, digest: Mapping[str, Any] | None,
         compared: str | None) -> None:
    """Inside the caller's write transaction: drop the digest of the pass just compared
    (`compared`), keep this pass's (when it has one) and only the newest KEPT of its
    pool."""
    if compared is not None:
        db.execute(f"DELETE FROM {TABLE} WHERE pass_uuid = ?", (compared,))
    if not digest:
        return
    db.execute(f"INSERT INTO {TABLE} (pass_uuid, pool, digest) VALUES (?, ?, ?)",
               (uuid, pool, encode(digest)))
    db.execute(
        f"DELETE FROM {TABLE} WHERE pool = ? AND pass_uuid NOT IN ("
        f" SELECT d.pass_uuid FROM {TABLE} d JOIN passes p ON p.uuid = d.pass_uuid"
        " WHERE d.pool = ? ORDER BY p.id DESC LIMIT ?)", (pool, pool, KEPT))


def read(db, uuid: str) -> dict[str, Any]:
    """The digest kept for pass `uuid` (empty: none kept, or one that does not read back:
    a cache, so the comparison then explains with what the passes' rows say)."""
    rows = db.execute(f"SELECT digest FROM {TABLE} WHERE pass_uuid = ?", (uuid,)).fetchall()
    if not rows:
        return {}
    try:
        d = decode(rows[0][0])
    except (TypeError, ValueError, AttributeError):
        return {}
    return d if isinstance(d.get("submitters"), dict) else {}
