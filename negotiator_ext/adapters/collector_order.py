"""A snapshot's slot and submitter ads put back in the order the collector answers in.

The negotiator reads the slot ads and the submitter ads in the order the collector walks
its hash tables (core/collector_order.py), and that order breaks its ties. Our own capture
(`negotiator-ext snapshot`, through the bindings) keeps it, and so does `condor_status
-sort none`; plain `condor_status -long` sorts what it prints (by Machine, then Name), so
a snapshot made of its output has lost it. `pool.build_pool` puts such a snapshot's ads
in the order `rebuilt_order` gives; meta.json's "ad_order" says which order a snapshot's
files hold:

  "collector"   the collector's answer order (our capture writes this)
  "files"       keep the files' order as it is (a hand-made snapshot whose order is meant)
  "rebuilt"     already rebuilt: kept
  missing       our own capture (meta.json's "tool" is ours): "collector"; otherwise the
                files' order is rebuilt when it is the order condor_status prints in
                (sorted by Machine, then Name), and kept when it is not (then someone
                chose it: a hand-made file, or a capture that kept the collector's order)

A rebuilt pool's snapshot meta (in memory; the files are never written) says
"ad_order": "rebuilt", with "ad_order_rebuilt": which tables, their sizes, and how many
of their ads share a bucket with another ad (`core.collector_order.shared_buckets`).
meta.json's "collector_table_sizes" ({"slots": 16383, "submitters": 127}: what our
capture records, `table_sizes`) gives the size each table is known to have grown to: a
collector that once held more ads than the files have walks a larger table.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Sequence

from ..core import collector_order as table
from ..core.adtext import plain_value

COLLECTOR = "collector"
REBUILT = "rebuilt"
FILES = "files"
ORDERS = (COLLECTOR, REBUILT, FILES)
OUR_TOOL = "negotiator-ext snapshot"


def slot_key(ad) -> str:
    """The hashed part of a slot ad's key in the collector: its Name, else its Machine
    followed by ":" and its SlotID (makeStartdAdHashKey in src/condor_utils/hashkey.cpp)."""
    name = ad.get("Name")
    if isinstance(name, str):
        return name
    machine = ad.get("Machine")
    key = machine if isinstance(machine, str) else ""
    slot = ad.get("SlotID")
    if isinstance(slot, int) and not isinstance(slot, bool):
        key += f":{slot}"
    return key


def submitter_key(ad) -> str:
    """The hashed part of a submitter ad's key: its Name (else Machine) followed by its
    ScheddName, so one user at two schedds is two ads (makeScheddAdHashKey)."""
    name = ad.get("Name")
    if not isinstance(name, str):
        name = ad.get("Machine")
        name = name if isinstance(name, str) else ""
    schedd = ad.get("ScheddName")
    return name + (schedd if isinstance(schedd, str) else "")


_DIGITS = re.compile(r"(\d+)")


def _natural(s: str) -> tuple:
    return tuple(int(p) if p.isdigit() else p for p in _DIGITS.split(s))


def _number(ad, attr: str) -> float:
    v = ad.get(attr)
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else 0.0


def insertion_guess(ads: Sequence, keys: Sequence[str], slots: bool) -> list[int]:
    """The order the ads are taken to have reached the collector in (unknowable in
    general, see docs/snapshots.md): slots by their startd's DaemonStartTime, then
    their names in natural order (node2 before node10); submitters schedd by schedd
    (by ScheddName), each schedd's by Name: the order a schedd sends them in (its
    submitters are a std::map by name, `Scheduler::Submitters`; every recording of
    tests/data/ties agrees)."""
    if slots:
        return sorted(range(len(ads)), key=lambda i: (_number(ads[i], "DaemonStartTime"),
                                                      _natural(keys[i]), i))
    return sorted(range(len(ads)), key=lambda i: (_string(ads[i], "ScheddName"),
                                                  _string(ads[i], "Name"), i))


def collector_walk(ads: Sequence, slots: bool, at_least: int = table.INITIAL_SIZE
                   ) -> list[int]:
    """The indices of `ads` (one table: slot ads, or submitter ads) in the collector's
    walk order, as rebuilt from their keys (in a table known to have grown to
    `at_least` buckets)."""
    keys = [(slot_key if slots else submitter_key)(ad) for ad in ads]
    return table.walk_order(keys, insertion_guess(ads, keys, slots), at_least)


def table_sizes(slots: Sequence, submitters: Sequence | None,
                slot_keys: Sequence[str] | None = None) -> dict[str, int]:
    """For a capture in the collector's order: the smallest size of each table whose
    walk gives that order (meta.json's "collector_table_sizes"); a table whose order no
    size gives (its ads changed during the query) is left out. `slot_keys`: the slots'
    keys (`slot_key`), when the caller has them."""
    out = {}
    for kind, ads, key in (("slots", slots, slot_key),
                           ("submitters", submitters, submitter_key)):
        if ads:
            keys = (slot_keys if kind == "slots" and slot_keys is not None
                    else [key(ad) for ad in ads])
            sizes = table.sizes_of_walk(keys)
            if sizes:
                out[kind] = sizes[0]
    return out


def _string(ad, attr: str) -> str:
    v = ad.get(attr)
    return v if isinstance(v, str) else ""


def sorted_like_condor_status(ads: Sequence) -> bool:
    """Whether `ads` are in the order condor_status prints them in by default: by
    Machine, then Name (condor_status.V6/status.cpp sets that default sort, and keeps
    its rows in a map compared as versions, digits as numbers), or as plain strings,
    or ignoring case."""
    keys = [(_string(ad, "Machine"), _string(ad, "Name")) for ad in ads]
    if keys == sorted(keys):
        return True
    # condor_status compares its keys as versions (strverscmp: node2 before node10)
    natural = [(_natural(m), _natural(n)) for m, n in keys]
    if natural == sorted(natural):
        return True
    folded = [(m.casefold(), n.casefold()) for m, n in keys]
    return folded == sorted(folded)


def order_of(meta, slots: Sequence, submitters: Sequence | None) -> str:
    """The order a snapshot's files hold ("collector", "rebuilt", "files"), or "sorted"
    when they hold condor_status's and should be rebuilt."""
    said = meta.get("ad_order")
    if said in ORDERS:
        return said
    if meta.get("tool") == OUR_TOOL:
        return COLLECTOR
    if sorted_like_condor_status(slots) and (
            submitters is None or sorted_like_condor_status(submitters)):
        return "sorted"
    return FILES


@dataclass(frozen=True)
class Rebuilt:
    """A snapshot's ads in the collector's walk order: `slot_order` (indices into the
    snapshot's slots), its submitters in that order, and its meta saying so."""
    slot_order: tuple[int, ...]
    submitters: tuple | None
    meta: dict


class _TextGet:
    """A slot ad whose `get` answers from the ad's texts ({lower-case name: text})
    where its text is a plain string or integer (`adtext.plain_value`: the value the
    ad's own `get` gives), else from the ad itself: a snapshot's slot ads are parsed
    when first read (slot_projection), and their order is rebuilt from their names."""
    __slots__ = ("ad", "texts")

    def __init__(self, ad, texts: dict):
        self.ad, self.texts = ad, texts

    def get(self, attr: str):
        text = self.texts.get(attr.lower())
        if text is None:
            return None         # (the ad has the attributes of its texts)
        v = plain_value(text)
        return v if v is not None else self.ad.get(attr)


def rebuilt_order(snap) -> Rebuilt | None:
    """The collector's order of `snap`'s (a Snapshot's) slot and submitter ads, rebuilt
    from their keys, when its files hold condor_status's order; else None (they hold the
    collector's, or an order chosen on purpose). The snapshot stays as its files are
    (messages name an ad by its place in its file); the pool built from it
    (pool.build_pool) takes this order."""
    slots = snap.slots
    rows = snap.slot_projection.texts_of(slots) if snap.slot_projection is not None else None
    if rows is not None:
        slots = list(map(_TextGet, slots, rows))
    if order_of(snap.meta, slots, snap.submitters) != "sorted":
        return None
    done = {}
    # the tables' sizes when known (a capture of the same collector, or the admin)
    sizes = snap.meta.get("collector_table_sizes") or {}
    at_least = sizes.get("slots", table.INITIAL_SIZE)
    slot_order = collector_walk(slots, True, at_least)
    done["slots"] = {"ads": len(slot_order),
                     "buckets": table.table_size(len(slot_order), at_least),
                     "sharing_a_bucket": sum(table.shared_buckets(
                         [slot_key(ad) for ad in slots], at_least))}
    submitters = snap.submitters
    if submitters is not None:
        at_least = sizes.get("submitters", table.INITIAL_SIZE)
        sub_order = collector_walk(submitters, False, at_least)
        submitters = tuple(submitters[i] for i in sub_order)
        done["submitters"] = {
            "ads": len(submitters), "buckets": table.table_size(len(submitters), at_least),
            "sharing_a_bucket": sum(table.shared_buckets(
                [submitter_key(ad) for ad in submitters], at_least))}
    meta = dict(snap.meta)
    meta["ad_order"] = REBUILT
    meta["ad_order_rebuilt"] = done
    return Rebuilt(tuple(slot_order), submitters, meta)
