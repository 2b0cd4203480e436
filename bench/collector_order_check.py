"""Does a snapshot made with condor_status give the same decisions as our capture?

  python bench/collector_order_check.py [--order=files] SNAPSHOT [SNAPSHOT...]

For each snapshot taken by `negotiator-ext snapshot` (its ads in the collector's answer
order), make the copy the admin tools give (condor_status's own files when
`record_cycle.py --condor-status` kept them, else slots.ads and submitters.ads sorted by
Machine, then Name; meta.json without "tool" and "ad_order"), read it back (the order
rebuilt, adapters/collector_order.py; not with --order=files), and compare: the slot and
submitter order, and one cycle's matches per submitter, per submitter and slot class
(the slot's name without its slot number and host digits) and per slot, and each against
the real cycle's MatchLog when the recording has it.
"""

from __future__ import annotations

import json
import re
import shutil
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from negotiator_ext.adapters.adfiles import read_ads, write_ads
from negotiator_ext.cycle import run_cycle
from negotiator_ext.pool import load_pool


def condor_status_copy(src: Path, dst: Path, order: str | None = None) -> None:
    """`src` as the admin tools give it: its slots.ads and submitters.ads from
    src/condor_status/ when recorded there (record_cycle.py --condor-status), else
    sorted as condor_status sorts them; meta.json without our tool's name (and with
    "ad_order": `order` when given)."""
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("condor_status"))
    for stem in ("slots", "submitters"):
        p = dst / f"{stem}.ads"
        recorded = src / "condor_status" / f"{stem}.ads"
        if recorded.exists():
            shutil.copy(recorded, p)
        elif p.exists():
            ads = read_ads(p)
            ads.sort(key=lambda a: (str(a.get("Machine", "")), str(a.get("Name", ""))))
            write_ads(p, ads)
    m = dst / "meta.json"
    meta = json.loads(m.read_text()) if m.exists() else {}
    meta.pop("tool", None)
    meta.pop("ad_order", None)
    if order is not None:
        meta["ad_order"] = order
    m.write_text(json.dumps(meta))


_CLASS = re.compile(r"\d+")


def slot_class(name: str) -> str:
    return _CLASS.sub("#", name)


_MATCHED = re.compile(r"Matched \S+ (\S+) ")


def compare(src: Path, order: str | None = None) -> dict:
    """Our cycle on `src` (our capture) against our cycle on its admin tools' copy
    (rebuilt; with `order` "files", not)."""
    with tempfile.TemporaryDirectory() as t:
        copy = Path(t) / "copy"
        condor_status_copy(src, copy, order)
        pa, pb = load_pool(src), load_pool(copy)
        a, b = pa.snapshot, pb.snapshot
        out = {"snapshot": str(src), "slots": len(a.slots),
               "submitters": len(a.submitters or ()),
               "rebuilt": b.meta.get("ad_order_rebuilt")}
        out["slot_positions_equal"] = sum(
            x.get("Name") == y.get("Name") for x, y in zip(pa.slot_ads, pb.slot_ads))
        out["submitter_positions_equal"] = sum(
            (x.get("Name"), x.get("ScheddName")) == (y.get("Name"), y.get("ScheddName"))
            for x, y in zip(a.submitters or (), b.submitters or ()))
        t0 = time.monotonic()
        ra = run_cycle(pa)
        rb = run_cycle(pb)
        out["cycle_seconds"] = round(time.monotonic() - t0, 1)
        per_sub = [Counter(m.submitter for m in r.matches) for r in (ra, rb)]
        per_class = [Counter((m.submitter, slot_class(m.slot)) for m in r.matches)
                     for r in (ra, rb)]
        per_slot = [{m.slot: m.submitter for m in r.matches} for r in (ra, rb)]
        subs = set(per_sub[0]) | set(per_sub[1])
        out["matches"] = [len(ra.matches), len(rb.matches)]
        out["submitters_differing"] = sorted(s for s in subs if per_sub[0][s] != per_sub[1][s])
        keys = set(per_class[0]) | set(per_class[1])
        out["submitter_class_pairs_differing"] = sum(
            per_class[0][k] != per_class[1][k] for k in keys)
        slots = set(per_slot[0]) | set(per_slot[1])
        out["slots_differing"] = sum(per_slot[0].get(s) != per_slot[1].get(s) for s in slots)
        ml = src / "expected" / "matchlog.txt"
        if ml.exists():
            real = Counter(_MATCHED.findall(ml.read_text()))
            out["real_matches"] = sum(real.values())
            for label, r in (("capture", ra), ("copy", rb)):
                # within what the real cycle reached (our matches past its time limits
                # are marked late)
                counts = Counter(m.submitter for m in r.matches if not m.late)
                names = set(real) | set(counts)
                out[f"submitters_differing_from_real_{label}"] = sum(
                    real[s] != counts[s] for s in names)
        return out


if __name__ == "__main__":
    args = sys.argv[1:]
    order = None
    if args and args[0].startswith("--order="):
        order = args.pop(0).split("=", 1)[1]     # --order=files: the copy not rebuilt
    for arg in args:
        print(json.dumps(compare(Path(arg), order)))


def undetermined_share(keys: list[str], trials: int = 20, seed: int = 0) -> float:
    """The share of `keys` whose place in the collector's walk changes with the order
    the ads were inserted in (random orders into a table that never held more)."""
    import random
    from negotiator_ext.core.collector_order import walk_order
    rng = random.Random(seed)
    first = None
    moved = [False] * len(keys)
    for _ in range(trials):
        order = list(range(len(keys)))
        rng.shuffle(order)
        walk = walk_order(keys, order)
        if first is None:
            first = walk
        else:
            for p, (a, b) in enumerate(zip(first, walk)):
                if a != b:
                    moved[a] = moved[b] = True
    return sum(moved) / max(len(keys), 1)
