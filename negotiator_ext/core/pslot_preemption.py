"""ALLOW_PSLOT_PREEMPTION: a partitionable slot matched by preempting some of its dynamic
slots (reference 4.14, rule M13; HTCondor 25.14 `Matchmaker::pslotMultiMatch`).

With the knob on (and NEGOTIATOR_CONSIDER_PREEMPTION), the dynamic slots that the
startd rolls up into their p-slot (`PSlotRollupInformation`, true by default) are no
candidates of their own: every scan passes them by. A p-slot that does not match a
request as it stands (every schedd marks its requests `WantPslotPreemption`) is tried
again as if some of its dynamic slots were gone:

* The dynamic slots are read from the p-slot's `Child*` lists (index i of each list is
  the i-th dynamic slot; `NumDynamicSlots` of them). One is *eligible* when its
  `ChildRetirementTimeRemaining` is not above 0, its `ChildState` is not "Preempting",
  and its claim id was not handed out yet in this cycle (see below). A list entry that
  is missing or not a number reads as 0 (rank, retirement time).
* The eligible ones are sorted by `ChildCurrentRank`, ascending, with std::sort (ties
  keep their list order up to 16 entries; past that, introsort's order).
* `newRank` is the p-slot's `Rank` evaluated against the job (0 when not a number).
  In that order, while a dynamic slot's rank is <= newRank:
  - equal rank: passed by in startd-rank-only mode, and when its user (the dynamic
    slot's own ad: PreemptingAccountingGroup, PreemptingUser, AccountingGroup,
    RemoteUser) is the submitter, or its ad is not in the slot list (by `ChildName`);
    else PREEMPTION_REQUIREMENTS, evaluated with MY = that dynamic slot's ad (with the
    negotiator's RemoteUserPrio & co. in it) and TARGET = the job, must be boolean true
    (unset: never); then the match is a priority preemption;
  - lower rank: a rank preemption (unless an earlier one made it a priority one);
  - its resources are added into the p-slot's ad: for each name of `MachineResources`
    (default "cpus memory disk") the p-slot has as a number, floor(p-slot value) plus
    `Child<name>[i]` (an integer stays an integer; a name with no number in the child
    list, such as Swap, is left alone); then both Requirements are tested again on the
    changed ad. The first success ends the loop.
* On success the p-slot's ad keeps the added resources and gets
  `RemoteUser = "various_dSlot_users"` (so NEGOTIATOR_PRE_JOB_RANK & co. see a claimed
  slot) until the negotiator drops its MatchList (the next fresh scan, the next pie
  spin); the ranks, the submitter-limit check (priority preemption only, its cost the
  changed ad's SlotWeight) and the MatchList entry are those of the changed ad. The
  claim ids of the dynamic slots taken are handed out with the match and cleared at
  once, whether the entry is ever matched or not: no later scan of the cycle can take
  them again. On failure the ad is put back as it was.
* The match is the p-slot's (the MatchLog says `preempting N dslots`); its cost, and
  what the accountant charges (AddMatch on the p-slot's name), is the changed ad's
  SlotWeight; the p-slot leaves the slot list as any matched slot does.

What a snapshot cannot show: the claim ids themselves are in the startd's private ad
(`ChildClaimIds`), which READ access does not give. The startd publishes one for every
dynamic slot it has (its current claim); we take every dynamic slot the public ad lists
to have one (the negotiator passes over a p-slot whose private list is shorter than
`NumDynamicSlots`, which happens only when the two ads are from different updates).

Pure: plain ads in, a decision out. `multi_match` changes the p-slot's ad in place, as
the negotiator does, and returns what `restore` needs to put it back.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable

from . import classads
from .cxxsort import cxx_sort
from .slots import current_user

PRIO_PREEMPTION, RANK_PREEMPTION = 0, 1          # as in core.matchmaking
VARIOUS = "various_dSlot_users"
_RANK = classads.parse_expr("MY.Rank")
_DEFAULT_RESOURCES = ("cpus", "memory", "disk")


@dataclass
class Outcome:
    """A p-slot matched by preempting `children` (indices into its Child* lists, in the
    order they were added)."""
    state: int
    children: list[int]
    names: list[str | None]
    backup: dict = field(default_factory=dict)   # attribute -> its expression before


def _entry(ad, name: str, i: int) -> Any:
    """dslotLookup: the i-th value of the list `Child<name>`, or None."""
    v = classads.eval_attr(ad, "Child" + name) if ("Child" + name) in ad else None
    if isinstance(v, list) and i < len(v):
        return v[i]
    return None


def _number(v: Any, default: float) -> float:
    return float(v) if classads.is_number(v) else default


def _int(v: Any) -> int:
    return int(v) if classads.is_number(v) else 0


def eligible(ad, spent: set[int]) -> list[tuple[int, float]]:
    """The dynamic slots that could be preempted, as (index, current rank), sorted by
    rank as std::sort sorts them."""
    n = classads.lookup_int32(classads.eval_attr(ad, "NumDynamicSlots")) \
        if "NumDynamicSlots" in ad else None
    if not n or n < 1:
        return []
    ranks = []
    for i in range(n):
        if i in spent:
            continue
        if _int(_entry(ad, "RetirementTimeRemaining", i)) > 0:
            continue
        if _entry(ad, "State", i) == "Preempting":
            continue
        ranks.append((i, _number(_entry(ad, "CurrentRank", i), 0.0)))
    return cxx_sort(ranks, lambda a, b: a[1] < b[1])


def resources(ad) -> list[str]:
    """MachineResources split on spaces (the names whose child values are added)."""
    text = classads.eval_string(ad, "MachineResources")
    if text is None:
        return list(_DEFAULT_RESOURCES)
    return [t for t in text.split(" ") if t]


def multi_match(job, ad, submitter: str, only_startd_rank: bool, spent: set[int],
                dslot_ad: Callable[[str], Any], preemption_ok: Callable[[Any], bool],
                matches: Callable[[Any, Any], bool]) -> Outcome | None:
    """pslotMultiMatch for one p-slot ad that does not match `job` as it stands.
    `spent`: the indices whose claim ids this cycle already handed out; `dslot_ad(name)`
    the dynamic slot's ad in the slot list (None if not there); `preemption_ok(dslot ad)`
    PREEMPTION_REQUIREMENTS with MY = that ad and TARGET = the job (a boolean true);
    `matches(job, ad)` both Requirements. On success `ad` is left changed and the
    outcome says how to put it back; `spent` gets the children taken."""
    if classads.eval_bool(ad, "PartitionableSlot") is not True:
        return None
    rank = classads.as_number(classads.eval_match(_RANK, ad, job))
    new_rank = 0.0 if rank is None else rank
    order = eligible(ad, spent)
    if not order:
        return None
    names = resources(ad)
    backup = {}
    for attr in names:
        if attr in ad:
            backup[attr] = ad.lookup(attr)
    had_user = "RemoteUser" in ad
    backup_user = ad.lookup("RemoteUser") if had_user else None
    state = None
    taken: list[int] = []
    for i, current in order:
        if current > new_rank:
            break
        if current == new_rank:
            if only_startd_rank:
                continue
            name = _entry(ad, "Name", i)
            other = dslot_ad(name) if isinstance(name, str) else None
            if other is None:
                continue
            if current_user(other) == submitter:
                continue
            if not preemption_ok(other):
                continue
            state = PRIO_PREEMPTION
        elif state != PRIO_PREEMPTION:
            state = RANK_PREEMPTION
        taken.append(i)
        for attr in names:
            before = classads.eval_number(ad, attr) if attr in ad else None
            if before is None or not math.isfinite(before):
                continue
            base = math.floor(before)
            add = _entry(ad, attr, i)
            if isinstance(add, bool) or not classads.is_number(add):
                continue
            ad[attr] = int(base + add) if isinstance(add, int) else float(base + add)
        if matches(job, ad):
            spent.update(taken)
            ad["RemoteUser"] = VARIOUS
            out = Outcome(state=state, children=taken,
                          names=[_entry(ad, "Name", c) for c in taken], backup=backup)
            out.backup["RemoteUser"] = backup_user if had_user else None
            return out
    _put_back(ad, backup, had_user, backup_user)
    return None


def _put_back(ad, backup: dict, had_user: bool, user) -> None:
    for attr, expr in backup.items():
        ad[attr] = expr
    if had_user:
        ad["RemoteUser"] = user
    elif "RemoteUser" in ad:
        del ad["RemoteUser"]


def restore(ad, outcome: Outcome) -> None:
    """Put a changed p-slot ad back as it was fetched (DeleteMatchList)."""
    backup = dict(outcome.backup)
    user = backup.pop("RemoteUser", None)
    _put_back(ad, backup, user is not None, user)
