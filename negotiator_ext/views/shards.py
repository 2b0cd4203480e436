"""Human output of `negotiator-ext shards`: the shards, then the submitters across them."""

from __future__ import annotations

from .tables import legend, num, pct, table
from .text import printable

MAX_ROWS = 25


def _cell(shard: dict | None) -> str:
    if shard is None:
        return "-"
    eup = shard.get("eup")
    return f"{shard['usage_after'] or 0:g} ({num(eup, '{:.1f}')})"


def render_shards(doc: dict, full: bool = False) -> str:
    pool, negs = doc["pool"], doc["negotiators"]
    out = [f"{pool['negotiators']} negotiator(s), {pool['slots']:,} slots (weight "
           f"{pool['pool_weight']:g}), {pool['submitters']} submitter(s), "
           f"{pool['in_several']} of them in more than one shard; "
           f"{pool['matches']:,} matches in all", ""]
    rows = [[n["name"] + (" (partial)" if n["partial"] else ""), f"{n['slots']:,}",
             f"{n['pool_weight']:g}", str(n["submitters"]), f"{n['matches']:,}",
             f"{n['matched_weight']:g}", f"{n['usage_before']:g}", f"{n['usage_after']:g}"]
            for n in negs]
    rows.append(["Whole pool", f"{pool['slots']:,}", f"{pool['pool_weight']:g}",
                 str(pool["submitters"]), f"{pool['matches']:,}",
                 f"{pool['matched_weight']:g}", f"{pool['usage_before']:g}",
                 f"{pool['usage_after']:g}"])
    out += table(["Negotiator", "Slots", "Weight", "Submitters", "Matched", "MatchedWeight",
                  "InUse", "InUseAfter"], rows, set(range(1, 8)))
    parts = [("Negotiators", None, _NEGOTIATORS)]
    out.append("")
    subs = doc["submitters"]
    shown = subs if full else subs[:MAX_ROWS]
    if shown:
        out.append("Submitters across the shards: slot weight in use after each cycle "
                   "(EUP), the most in the whole pool first")
        names = [n["name"] for n in negs]
        rows = [[s["name"], *(_cell(s["shards"].get(n)) for n in names),
                 f"{s['usage_after']:g}", pct(s["pool_share"], 1), str(s["matched"]),
                 "-" if s["priority_spread"] is None else f"{s['priority_spread']:.2f}x"]
                for s in shown]
        out += table(["Submitter", *names, "Pool", "Pool%", "Matched", "PrioritySpread"],
                     rows, set(range(1, len(names) + 5)))
        if len(subs) > len(shown):
            out.append(f"  ... {len(subs) - len(shown)} more (--all shows them all)")
        parts.append(("Submitters", None, _SUBMITTERS))
    out += legend(parts)
    return "".join(printable(line) + "\n" for line in out)


# the columns, in `negotiate`'s words
_NEGOTIATORS = [
    ("Negotiator", "the negotiator of the shard (its slots: those it negotiates for)"),
    ("Slots", "its slots (after NEGOTIATOR_SLOT_CONSTRAINT)"),
    ("Weight", "their weight (the pie its cycle shares out)"),
    ("Submitters", "submitters its cycle saw"),
    ("Matched", "its cycle's matches"),
    ("MatchedWeight", "their weight (SLOT_WEIGHT of the slots matched)"),
    ("InUse", "its submitters' weighted usage before the cycle"),
    ("InUseAfter", "InUse plus MatchedWeight"),
]
_SUBMITTERS = [
    ("<negotiator>", "the submitter's weighted usage after that negotiator's cycle, with "
                     "its EUP there (each negotiator keeps its own accountant); - where it "
                     "has none"),
    ("Pool", "its usage after the cycles, summed over the shards"),
    ("Pool%", "Pool of the whole pool's weight"),
    ("Matched", "its matches, summed over the shards"),
    ("PrioritySpread", "its largest EUP over its smallest, across the shards"),
]
