"""Human output of `negotiator-ext whatif`: what changes, largest first, on a screen."""

from __future__ import annotations

from ..core.whatif import changed as row_changes
from .tables import legend, num, table
from .text import printable

MAX_ROWS = 25


def _rows(rows: list[dict]) -> list[list[str]]:
    return [[r["name"], str(r["before"]), str(r["after"]), f"{r['delta']:+d}",
             f"{r['weight_before']:g}", f"{r['weight_after']:g}",
             f"{r['weight_after'] - r['weight_before']:+g}", num(r["quota_before"]),
             num(r["quota_after"])] for r in rows]


def render_whatif(doc: dict, before: str, after: str, full: bool = False) -> str:
    t = doc["total"]
    out = [f"Before: {before}", f"After:  {after}",
           f"Matches {t['before']} -> {t['after']} ({t['delta']:+d}), matched weight "
           f"{t['weight_before']:g} -> {t['weight_after']:g}; "
           f"{doc['changed']['groups']} group(s) and {doc['changed']['submitters']} "
           "submitter(s) change", ""]
    parts = []                          # the tables shown, for the legend
    for what, rows, quota in (("Groups", doc["groups"], "Effective"),
                              ("Submitters", doc["submitters"], "Limit")):
        if not rows:
            continue
        changed = [r for r in rows if row_changes(r)]
        shown = changed if full else changed[:MAX_ROWS]
        out.append(f"{what} that change ({len(changed)} of {len(rows)}), largest change "
                   "first:" if changed else f"{what}: no change")
        if shown:
            out += table([what[:-1], "Matched", "After", "Delta", "MatchedWeight", "After",
                          "Delta", quota, "After"], _rows(shown), set(range(1, 9)))
            parts.append((what, _OWN.get(what), _LEGEND[what]))
        if len(changed) > len(shown):
            out.append(f"  ... {len(changed) - len(shown)} more (--all shows them all)")
        out.append("")
    if parts:
        out += legend(parts)[1:]
    return "".join(printable(line) + "\n" for line in out)


# the columns, in `negotiate`'s words; each "After" and "Delta" follows its column
_BEFORE_AFTER = [
    ("Matched", "matches of the cycle before (the snapshot under its own config)"),
    ("MatchedWeight", "their weight (SLOT_WEIGHT of the slots matched)"),
    ("After", "the column before it in the cycle after (under NEW, or on the other "
              "snapshot)"),
    ("Delta", "After minus the column before it"),
]
_OWN = {"Groups": "Effective is condor_userprio -quotas' Effective Quota"}
_LEGEND = {
    "Groups": _BEFORE_AFTER,
    "Submitters": _BEFORE_AFTER + [
        ("Limit", "the weight it may match in its first pie spin (negotiate's Limit)")],
}
