"""What reaches a JSON document as a figure: HTCondor's stand-ins for "no number" become
null there.

A submitter's limit the negotiator publishes (the Accounting ad's SubmitterLimit, its
share times the pie) is a weight, never below 0, except where the group's limit was not
a number (0/0 in the allocation, converted to an int: INT_MIN, rule G10 in core.hgq):
then it is -2147483648 times the share (-2147483648.0 in the README's example, for
group_physics.lep). The ledger keeps what was read and computed, as it was (the
metrics name it `submitter_limit_unset`); a document for people and their tools says
null instead of such a number. Pure: plain data in, plain data out.
"""

from __future__ import annotations

from typing import Any

# keys whose value is a submitter's limit (a weight, never negative when it is a number)
LIMIT_KEYS = frozenset({"real_limit", "shadow_limit", "submitter_limit",
                        "shadow_submitter_limit"})


def limit_figure(value: Any) -> Any:
    """A submitter limit as a figure: None for a negative one (INT_MIN's stand-in)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value < 0:
        return None
    return value


def without_sentinels(doc: Any) -> Any:
    """`doc` (dicts, lists, scalars) with every value under a LIMIT_KEYS key passed
    through `limit_figure`; the rest as it is (a new dict or list where one changes)."""
    if isinstance(doc, dict):
        return {k: limit_figure(v) if k in LIMIT_KEYS else without_sentinels(v)
                for k, v in doc.items()}
    if isinstance(doc, list):
        return [without_sentinels(v) for v in doc]
    return doc
