"""The accountant: user priorities and usage (reference section 1).

Records are kept as the real accountant keeps them, as attribute maps under HTCondor's
attribute names, so "missing" and "zero" stay distinct where HTCondor distinguishes them:

  customers: one per submitter AND one per accounting group (`Customer.<name>`)
  resources: one per charged match (`Resource.<slot Name>@<StartdIpAddr>`)

Every real written to a record is rounded to 6 decimals, as the ClassAd log's `%f` does
(rule A5). Time is always passed in; nothing here reads the clock.

Usage accounting follows the classic incremental semantics of the 25.0 LTS series (rules
A17-A19 "classic"): a match is charged once, removed when its slot is no longer claimed
by the same customer, and charged exactly for the time it existed. The 25.x feature
series (25.11 and later) rebuilds WeightedResourcesUsed every cycle and lets
ResourcesUsed and HierWeightedResourcesUsed grow without bound (reference 1.5, A19);
weighted figures agree in steady state.

Use it as: `acc = Accountant(state, config, groups)`; call the rules.
"""

from __future__ import annotations

import itertools
import math
import operator
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from .config import NegotiatorConfig, is_limit_name, strtod
from .groups import GroupQuota, GroupTree
from .slots import SlotUsage

MIN_PRIORITY = 0.5          # hard-coded MinPriority (rule A11); not a knob
MIN_PRIORITY_FACTOR = 1.0   # MIN_PRIORITY_FACTOR (rule A10)
NICE_USER_PREFIX = "nice-user"

# Attributes HTCondor keeps as integers in the log.
_INT_ATTRS = frozenset({
    "ResourcesUsed", "UnchargedTime", "BeginUsageTime", "LastUsageTime", "Ceiling", "Floor",
    "StartTime", "NumCpMatches", "CeilingLeaseExpiration", "FloorLeaseExpiration",
    "PriorityFactorLeaseExpiration", "CeilingPreLeaseValue", "FloorPreLeaseValue",
})


def round6(x: float) -> float:
    """A persisted real as the accountant reads it back: printf("%f") then parsed (A5).
    (A whole number, the usual weight or count, is its own: "%f" writes every digit of
    its integer part and zeros after the point.)"""
    if type(x) is float and x.is_integer():
        return x
    return float("%f" % x)


@dataclass(frozen=True)
class AccountantState:
    """The accountant's whole state: what its log holds, plus in-memory attributes."""
    last_update_time: int = 0
    customers: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    resources: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    limits: Mapping[str, float] = field(default_factory=dict)  # concurrency limit counts
    # the Resource records written or removed since the last CheckMatches (None: not
    # known): with `SlotChanges`, the next CheckMatches looks at those and the changed
    # slots only
    touched: frozenset[str] | None = field(default=None, compare=False)
    # where each Resource record is in `resources`' order, as a place number that grows
    # along it, and the next number (None: not known). CheckMatches with `SlotChanges`
    # puts the few records it looks at in that order without walking every record.
    places: tuple[dict[str, int], int] | None = field(default=None, compare=False)
    # the Resource records and their places handed over without a copy (`RecordLease`):
    # the first accountant made from this state takes them as they are (None: copied)
    lease: "RecordLease | None" = field(default=None, compare=False)


class RecordLease:
    """Resource records handed from one cycle's accountant to the next without a copy
    (`Accountant.to_state(copy_resources=False)`): a long run's 130,000 records cost
    more to copy each cycle than the cycle writes into. The first accountant made from
    the state takes the records and their places as they are, and notes what it
    replaces or removes in them, so that `give_back` can restore the state as it was
    handed (in its order), for another accountant of the same cycle. Any other
    accountant made from the state copies them, as without a lease."""
    __slots__ = ("taken", "undo")

    def __init__(self):
        self.taken = False
        # (name, the record it replaced or None, its place before or None), in order
        self.undo: list[tuple] = []

    def give_back(self, state: AccountantState) -> None:
        """`state`'s records and places as they were handed over (the accountant that
        took them is not used again)."""
        if not self.taken:
            return
        resources, places = state.resources, state.places[0]
        reordered = False
        for name, rec, place in reversed(self.undo):
            if rec is None:
                del resources[name]
            else:
                reordered = reordered or name not in resources
                resources[name] = rec
            if place is None:
                places.pop(name, None)
            else:
                places[name] = place
        if reordered:
            # a removed record put back goes last: the places say where it was
            items = sorted(resources.items(), key=lambda kv: places[kv[0]])
            resources.clear()
            resources.update(items)
        self.undo = []
        self.taken = False


@dataclass(frozen=True)
class SlotChanges:
    """What a caller that keeps its slots from cycle to cycle (the simulator) knows: the
    resource names whose SlotUsage is not the very object the last CheckMatches saw
    (gone, new or changed), and the current SlotUsages among them, in the slot list's
    order. Resource names are unique in such a pool. CheckMatches then looks at those
    slots, and at the records written since, alone: every other record is still the
    one that CheckMatches found consistent with the same slot, so the result is the
    same as looking at every slot. `limit_slots`, if known: the slots LoadLimits reads
    (`SlotUsage.counts_limits`), in the slot list's order."""
    names: frozenset[str]
    slots: tuple[SlotUsage, ...]
    limit_slots: tuple[SlotUsage, ...] | None = None


class Accountant:
    """A working copy of an AccountantState with the accountant's rules as methods."""

    def __init__(self, state: AccountantState, config: NegotiatorConfig,
                 groups: GroupTree | None = None):
        self.config = config
        self.groups = groups if groups is not None else GroupTree(config)
        self.last_update_time = int(state.last_update_time)
        self.customers: dict[str, dict[str, Any]] = {k: dict(v) for k, v in state.customers.items()}
        # the Resource records (one per claim) are shared with `state` until written:
        # each is copied when this accountant first changes it (`_set_resource`). (A
        # dict's own copy clones its table, holes left by removed records and all, where
        # dict() inserts every record again: a long run's dict has many such holes)
        res, lease, places = state.resources, state.lease, state.places
        self._own: set[str] = set()
        # (`AccountantState.places`: this accountant's own copy, kept with the records)
        self._places: dict[str, int] | None = None
        self._next_place = 0
        self._undo: list | None = None
        if (lease is not None and not lease.taken and type(res) is dict
                and places is not None and len(places[0]) == len(res)):
            # handed over: taken as they are, what is changed in them noted
            lease.taken = True
            self.resources: dict[str, dict[str, Any]] = res
            self._places = places[0]
            self._undo = lease.undo
        else:
            self.resources = res.copy() if type(res) is dict else dict(res)
            if places is not None and len(places[0]) == len(self.resources):
                self._places = places[0].copy()
        if self._places is not None:
            self._next_place = places[1]
        self.limits: dict[str, float] = dict(state.limits)
        self._touched: set[str] | None = (set(state.touched) if state.touched is not None
                                          else None)
        self._records_of: dict[str, tuple] = {}      # customer -> groups.charged_records

    def to_state(self, copy_resources: bool = True) -> AccountantState:
        """The state as it stands now (a copy): where the next cycle starts from.
        `copy_resources=False` hands the Resource records (one per claim) over instead,
        for a caller that no longer changes this accountant's (the next accountant
        copies them anyway)."""
        places = self._places
        if places is not None:
            # (handed over with the records; a copy beside copied records)
            places = (places.copy() if copy_resources else places, self._next_place)
        self._undo = None                   # (what is handed over is not given back)
        return AccountantState(
            last_update_time=self.last_update_time,
            customers={k: dict(v) for k, v in self.customers.items()},
            resources=({k: dict(v) for k, v in self.resources.items()} if copy_resources
                       else self.resources),
            limits=dict(self.limits),
            touched=frozenset(self._touched) if self._touched is not None else None,
            places=places,
            lease=RecordLease() if not copy_resources and places is not None else None)

    # ---- attribute access, as the ClassAd log does it -------------------------------

    def _get(self, name: str, attr: str, default: Any = None) -> Any:
        rec = self.customers.get(name)
        if rec is None:
            return default
        v = rec.get(attr, default)
        return default if v is None else v

    def _set(self, name: str, attr: str, value: Any) -> None:
        rec = self.customers.setdefault(name, {})  # a set on a missing record creates it (A4)
        rec[attr] = _persisted(attr, value)

    def _set_resource(self, resname: str, attr: str, value: Any) -> None:
        self._resource_to_write(resname)[attr] = _persisted(attr, value)

    def _resource_to_write(self, resname: str) -> dict:
        """The Resource record `resname`, this accountant's own (copied from the state
        it started from, or created, before its first write), marked touched."""
        rec = self.resources.get(resname)
        if rec is None or resname not in self._own:
            if self._undo is not None:
                self._undo.append((resname, rec, None if rec is None
                                   else self._places[resname]))
            if rec is None and self._places is not None:
                # a new record goes to the end of the order
                self._places[resname] = self._next_place
                self._next_place += 1
            rec = self.resources[resname] = {} if rec is None else dict(rec)
            self._own.add(resname)
        if self._touched is not None:
            self._touched.add(resname)
        return rec

    def _drop_resource(self, resname: str) -> None:
        if self._undo is not None:
            self._undo.append((resname, self.resources[resname], self._places[resname]))
        del self.resources[resname]
        if self._places is not None:
            self._places.pop(resname, None)
        if self._touched is not None:
            self._touched.add(resname)

    # ---- priority factor and priority (rules A9-A11) --------------------------------

    def default_priority_factor(self, name: str) -> float:
        """Rule A9: the factor a record without one gets."""
        if name.startswith(NICE_USER_PREFIX):
            return self.config.nice_user_prio_factor
        group = self.groups.assigned_group(name).name
        gpf = self.config.group_prio_factor(group)
        if gpf != 0.0:
            return gpf
        domain = self.config.accountant_local_domain
        if domain and domain != _domain(name):
            return self.config.remote_prio_factor
        return self.config.default_prio_factor

    def priority_factor(self, name: str) -> float:
        """GetPriorityFactor: the stored factor; a missing or < 1 factor is defaulted and
        written back (a read with a side effect, rule A9)."""
        f = self._get(name, "PriorityFactor", 0.0)
        if f < MIN_PRIORITY_FACTOR:
            f = self.default_priority_factor(name)
            self.set_priority_factor(name, f)
            f = self._get(name, "PriorityFactor")
        return f

    def set_priority_factor(self, name: str, factor: float) -> None:
        """SetPriorityFactor: factors below 1 are raised to 1 (rule A10)."""
        self._set(name, "PriorityFactor", max(float(factor), MIN_PRIORITY_FACTOR))

    def rup(self, name: str) -> float:
        """The real user priority (stored Priority, 0.5 when missing or lower)."""
        return max(self._get(name, "Priority", MIN_PRIORITY), MIN_PRIORITY)

    def priority(self, name: str) -> float:
        """GetPriority: the effective user priority EUP = RUP x factor (rule A11)."""
        factor = self.priority_factor(name)
        p = self._get(name, "Priority", MIN_PRIORITY)
        if p < MIN_PRIORITY:
            p = MIN_PRIORITY
            self.set_priority(name, p)
        return p * factor

    def set_priority(self, name: str, rup: float) -> None:
        self._set(name, "Priority", float(rup))

    def weighted_usage(self, name: str) -> float:
        """GetWeightedResourcesUsed: the record's WeightedResourcesUsed (0 when none)."""
        # (`_get` written out: the pie asks this of every request it prepares)
        rec = self.customers.get(name)
        if rec is None:
            return 0.0
        v = rec.get("WeightedResourcesUsed")
        return 0.0 if v is None else float(v)

    def set_submitter_share(self, name: str, share: float, limit: float) -> None:
        """The in-memory SubmitterShare/SubmitterLimit the pie stores on spin 1 (2.5)."""
        rec = self.customers.setdefault(name, {})
        rec["SubmitterShare"] = share
        rec["SubmitterLimit"] = limit

    def ceiling(self, name: str) -> int:
        """GetCeiling: -1 (unlimited) when missing or negative (rule A24)."""
        c = int(self._get(name, "Ceiling", -1))
        return -1 if c < 0 else c

    def floor(self, name: str) -> int:
        """GetFloor: 0 (no floor) when missing or negative (rule A24)."""
        f = int(self._get(name, "Floor", 0))
        return 0 if f < 0 else f

    def initialize_groups(self) -> None:
        """Initialize, step 1 (rule A8): a record for every configured group, `<none>`
        included, made by reading its priority (which writes its factor)."""
        if not self.groups.enabled:
            return
        for name in self.groups.group_names():
            self.priority(name)

    def start_cycle(self, slots: Iterable[SlotUsage], now: int,
                    changes: SlotChanges | None = None) -> None:
        """What a negotiation cycle does to the accountant before any match (reference
        2.2): expire leases (step 1), then UpdatePriorities and CheckMatches against
        every fetched slot ad (step 7)."""
        self.check_leases(now)
        self.update_priorities(now)
        self.check_matches(slots, now, changes)

    # ---- the time step (rules A12, A13) ---------------------------------------------

    def update_priorities(self, now: int) -> None:
        """UpdatePriorities at time `now`: decay every record's RUP toward its recent
        weighted usage over the step since the last update, accumulate usage."""
        now = int(now)
        passed = now - self.last_update_time
        if passed == 0:
            return
        if passed < 0:  # the clock went back
            self.last_update_time = now
            return
        aging = 0.5 ** (passed / self.config.priority_halflife)
        self.last_update_time = now
        for name in list(self.customers):
            self._update_one(name, now, passed, aging)

    def _update_one(self, name: str, now: int, passed: int, aging: float) -> None:
        rec = self.customers[name]
        priority = rec.get("Priority")
        priority = 0.0 if priority is None else priority
        priority = max(priority, MIN_PRIORITY)
        old_priority = priority
        uncharged = int(rec.get("UnchargedTime") or 0)
        w_uncharged = float(rec.get("WeightedUnchargedTime") or 0.0)
        accumulated = float(rec.get("AccumulatedUsage") or 0.0)
        w_accumulated = rec.get("WeightedAccumulatedUsage")
        w_accumulated = accumulated if w_accumulated is None else float(w_accumulated)
        begin = int(rec.get("BeginUsageTime") or 0)
        used = int(rec.get("ResourcesUsed") or 0)
        w_used = float(rec.get("WeightedResourcesUsed") or 0.0)

        recent = used + uncharged / passed
        w_recent = w_used + w_uncharged / passed
        hier = float(rec.get("HierWeightedResourcesUsed") or 0.0)
        if hier > 0.0:  # a group: its whole subtree's usage (rule A22)
            w_recent = hier

        priority = priority * aging + w_recent * (1 - aging)
        if priority < MIN_PRIORITY:
            priority = MIN_PRIORITY

        new_accumulated = accumulated + used * passed + uncharged
        new_w_accumulated = w_accumulated + w_used * passed + w_uncharged
        # Only changed values are written (each rounded on the way, rule A5).
        if old_priority != priority:
            self._set(name, "Priority", priority)
        if new_accumulated != accumulated:
            self._set(name, "AccumulatedUsage", new_accumulated)
        if new_w_accumulated != w_accumulated:
            self._set(name, "WeightedAccumulatedUsage", new_w_accumulated)
        if new_accumulated > 0 and begin == 0:
            self._set(name, "BeginUsageTime", now)
        if recent > 0:  # the unweighted recent usage decides (rule A13)
            self._set(name, "LastUsageTime", now)
        if rec.get("UnchargedTime", -1) != 0:
            self._set(name, "UnchargedTime", 0)
        if rec.get("WeightedUnchargedTime", -1.0) != 0.0:
            self._set(name, "WeightedUnchargedTime", 0.0)
        # Record deletion here is dead code in HTCondor (rule A14): records never age out.
        rec["SubmitterLimit"] = 0.0
        rec["SubmitterShare"] = 0.0

    # ---- usage: AddMatch, RemoveMatch, CheckMatches (rules A15-A19) ------------------

    def _charge(self, name: str, weight: float, now: int, sign: int, start: int | None = None) -> None:
        """Add (sign=+1) or remove (sign=-1) one match of `weight` on a customer record
        and on its assigned group record, with the uncharged-time correction: a new match
        is charged only from `now` (negative uncharged time back to the last update), a
        removed one for the time it existed since max(start, last update). Counts are
        floored at 0 on removal."""
        got = self._records_of.get(name)
        if got is None:
            got = self._records_of[name] = self.groups.charged_records(name)
        records, hier_records = got
        if sign > 0:
            uncharged = -(now - self.last_update_time)
        else:
            uncharged = now - max(int(start or 0), self.last_update_time)
        # Both records are read before either is written (one transaction, rule A6), so a
        # customer that is its own group record is charged once. (`_get`/`_set` written
        # out: a missing or None value is the default; reals are stored rounded, A5.)
        customers = self.customers
        signed = sign * weight
        w_uncharged = uncharged * weight
        for rec_name in records:
            rec = customers.get(rec_name)
            if rec is None:
                rec = customers[rec_name] = {}
            v = rec.get("ResourcesUsed")
            used = int(0 if v is None else v) + sign
            v = rec.get("WeightedResourcesUsed")
            w_used = float(0.0 if v is None else v) + signed
            rec["ResourcesUsed"] = used if used > 0 else 0     # (max(used, 0), an int)
            if w_used < 0.0:
                w_used = 0.0
            rec["WeightedResourcesUsed"] = _real(w_used)
            v = rec.get("UnchargedTime")
            # (an int: `now`, `start` and the last update are whole seconds)
            rec["UnchargedTime"] = int(0 if v is None else v) + uncharged
            v = rec.get("WeightedUnchargedTime")
            w = float(0.0 if v is None else v) + w_uncharged
            rec["WeightedUnchargedTime"] = _real(w)
        for part in hier_records:
            rec = customers.get(part)
            if rec is None:
                rec = customers[part] = {}
            v = rec.get("HierWeightedResourcesUsed")
            w = float(0.0 if v is None else v) + signed
            if w < 0.0:
                w = 0.0
            rec["HierWeightedResourcesUsed"] = _real(w)

    def add_match(self, customer: str, slot: SlotUsage, now: int, match_cost: float | None = None,
                  concurrency_limits: str | None = None) -> None:
        """AddMatch (rule A17, classic). `match_cost` marks a consumption-policy match.
        `concurrency_limits` is the match's MatchedConcurrencyLimits ("" for none); by
        default the slot's own (a match already in the snapshot)."""
        resname = slot.resource_name
        if match_cost is not None:
            n = int(self.resources.get(resname, _NO_RECORD).get("NumCpMatches") or 0)
            self._set_resource(resname, "NumCpMatches", n + 1)
            resname = f"{resname}_cp_match_{n:03d}"
            weight = float(match_cost)
        else:
            existing = self.resources.get(resname, _NO_RECORD).get("RemoteUser")
            if existing is not None:
                if existing == customer:
                    return  # "Match already existed"
                self.remove_match(resname, now)
            weight = slot.weight
        self._charge(customer, weight, int(now), +1)
        # (three `_set_resource` calls on one record, the record looked up once)
        rec = self._resource_to_write(resname)
        rec["RemoteUser"] = _persisted("RemoteUser", customer)
        rec["SlotWeight"] = _persisted("SlotWeight", weight)
        rec["StartTime"] = int(now)
        limits = (slot.matched_concurrency_limits if concurrency_limits is None
                  else concurrency_limits)
        if limits:
            rec["MatchedConcurrencyLimits"] = _persisted("MatchedConcurrencyLimits", limits)
            self.increment_limits(limits)

    def remove_match(self, resname: str, now: int) -> None:
        """RemoveMatch (rule A18): credit back the match's weight, charging it exactly for
        the part of the interval it existed."""
        rec = self.resources.get(resname)
        if rec is None:
            return
        if rec.get("NumCpMatches") is not None or rec.get("RemoteUser") is None:
            self._drop_resource(resname)  # a consumption-policy placeholder, or no user
            return
        weight = rec.get("SlotWeight")
        weight = 1.0 if weight is None else float(weight)
        self._charge(rec["RemoteUser"], weight, int(now), -1, start=rec.get("StartTime"))
        self._drop_resource(resname)

    def check_matches(self, slots: Iterable[SlotUsage], now: int,
                      changes: SlotChanges | None = None) -> None:
        """CheckMatches (rule A19, classic): drop matches whose slot is gone or no longer
        claimed/matched by the charged customer, charge every claimed slot not yet
        charged, and recount the concurrency limits. With `changes` (and the records
        written since the last CheckMatches known), only the changed slots, the records
        written since and their slots are looked at, in the same order: the same
        result."""
        slots = slots if isinstance(slots, Sequence) else list(slots)
        touched = self._touched
        if changes is not None and touched is not None:
            names, check = changes.names, changes.slots
            if not touched <= names:
                # records written since whose slots did not change (a match the startd
                # did not take up): their slots are looked at too, in the list's order
                names = names | touched
                check = [s for s in slots if s.resource_name in names]
            self._check_claims(check, self._in_order(names), now)
        else:
            self._check_claims(slots, self.resources, now)
        self._touched = set()
        self.load_limits(slots if changes is None or changes.limit_slots is None
                         else changes.limit_slots)

    def _in_order(self, names) -> list[str]:
        """The records named in `names`, in the records' order: found by name and put
        in order by their places (`AccountantState.places`, numbered on first need)
        when they are few, else by walking the records."""
        resources = self.resources
        if _WALK_SHARE * len(names) > len(resources):
            return list(filter(names.__contains__, resources))
        places = self._places
        if places is None:
            places = self._places = dict(zip(resources, itertools.count()))
            self._next_place = len(places)
        return sorted(filter(resources.__contains__, names), key=places.__getitem__)

    def _check_claims(self, slots, resnames: Iterable[str], now: int) -> None:
        """CheckMatches over `slots` and the records `resnames` (in the records' order)."""
        # HTCondor keeps the first of duplicate names
        by_name = {s.resource_name: s for s in reversed(slots)}
        which = 1 if self.config.discount_suspended_resources else 0
        resources = self.resources
        # CheckClaimedOrMatched: Matched slots are kept; claimed ones must still be
        # claimed by the same customer (removing one record changes no other)
        gone = [resname for resname in resnames
                if (slot := by_name.get(resname)) is None or (
                    slot.state != "Matched"
                    and slot.charged[which] != (resources[resname].get("RemoteUser") or ""))]
        for resname in gone:
            self.remove_match(resname, now)
        for s in slots:
            customer = s.charged[which]
            if customer is not None:
                rec = resources.get(s.resource_name)
                if rec is None or rec.get("RemoteUser") != customer:
                    self.add_match(customer, s, now)    # (else "Match already existed")

    # ---- concurrency limit counts (rule M9) ------------------------------------------

    def load_limits(self, slots: Iterable[SlotUsage]) -> None:
        """LoadLimits: zero every known limit, recount from the slot ads and the
        Resource records of slots in the Matched state."""
        for k in self.limits:
            self.limits[k] = 0.0
        for s in filter(_COUNTS_LIMITS, slots):
            for text in (s.concurrency_limits, s.preempting_concurrency_limits):
                if text:
                    self.increment_limits(text)
            if s.state == "Matched":
                text = self.resources.get(s.resource_name, {}).get("MatchedConcurrencyLimits")
                if text:
                    self.increment_limits(text)

    def increment_limits(self, text: str) -> None:
        for name, amount in parse_concurrency_limits(text):
            self.limits[name] = self.limits.get(name, 0.0) + amount

    # ---- admin edits (rule A21) and leases (rule A25) ---------------------------------

    def reset_usage(self, name: str, now: int) -> None:
        self._set(name, "AccumulatedUsage", 0.0)
        self._set(name, "WeightedAccumulatedUsage", 0.0)
        self._set(name, "BeginUsageTime", int(now))

    def reset_all_usage(self, now: int) -> None:
        for name in list(self.customers):
            self.reset_usage(name, now)

    def set_accumulated_usage(self, name: str, value: float) -> None:
        """SET_ACCUMUSAGE sets only WeightedAccumulatedUsage (rule A21)."""
        self._set(name, "WeightedAccumulatedUsage", float(value))

    def set_begin_time(self, name: str, t: int) -> None:
        self._set(name, "BeginUsageTime", int(t))

    def set_last_time(self, name: str, t: int) -> None:
        self._set(name, "LastUsageTime", int(t))

    def set_ceiling(self, name: str, ceiling: int) -> None:
        self._set(name, "Ceiling", int(ceiling))

    def set_floor(self, name: str, floor: int) -> None:
        self._set(name, "Floor", int(floor))

    def delete_record(self, name: str) -> None:
        """DELETE_USER: the customer record goes; its resource records stay (rule A21)."""
        self.customers.pop(name, None)

    def check_leases(self, now: int) -> None:
        """CheckCeilingLeases/CheckFloorLeases/CheckPriorityFactorLeases: restore the
        value from before every lease with 0 < expiration <= now (rule A25)."""
        for name, rec in self.customers.items():
            for attr in ("Ceiling", "Floor", "PriorityFactor"):
                exp = rec.get(f"{attr}LeaseExpiration")
                if exp is not None and 0 < exp <= now:
                    pre = rec.get(f"{attr}PreLeaseValue")
                    if pre is not None:
                        self._set(name, attr, pre)
                    self._set(name, f"{attr}LeaseExpiration", 0)

    # ---- reporting (rules A26, A28) ---------------------------------------------------

    def report(self, quotas: Mapping[str, GroupQuota] | None = None,
               rollup: bool = False) -> list[dict[str, Any]]:
        """One ad per record, as the negotiator's modular query answers `condor_userprio
        -l` (rule A28), or, with `rollup`, as the GET_PRIORITY_ROLLUP path reports
        (rule A26: group Priority 0; children's usage summed into their parents).

        Group quota fields come from `quotas` when given, else from what the record
        already carries (e.g. imported from a real pool's accounting ads)."""
        tree = self.groups
        ads: list[dict[str, Any]] = []
        by_group: dict[str, dict[str, Any]] = {}
        for name in list(self.customers):
            rec = self.customers[name]
            node, is_group = tree.assigned(name)
            ad = {k: v for k, v in rec.items()
                  if k not in ("UnchargedTime", "WeightedUnchargedTime") and v is not None}
            ad["Name"] = name
            ad["LastUpdate"] = self.last_update_time
            ad["Priority"] = self.priority(name)
            ad["PriorityFactor"] = self._get(name, "PriorityFactor")
            ad["Ceiling"] = self.ceiling(name)
            ad["Floor"] = self.floor(name)
            ad["IsAccountingGroup"] = is_group
            ad["AccountingGroup"] = node.name
            if is_group:
                q = (quotas or {}).get(node.name)
                if q is not None:
                    ad.update(EffectiveQuota=q.effective_quota, ConfigQuota=q.config_quota,
                              SubtreeQuota=q.subtree_quota, Requested=q.requested,
                              SurplusPolicy=q.surplus_policy)
                else:
                    ad.setdefault("ConfigQuota", node.config_quota)
                    ad.setdefault("SurplusPolicy", tree.surplus_policy(node))
                if node.name == name:
                    by_group[name] = ad
            ads.append(ad)
        if rollup:
            _roll_up(tree, by_group)
        return ads


def _roll_up(tree: GroupTree, by_group: dict[str, dict[str, Any]]) -> None:
    """Rule A26 rollup: each child's usage added into its parent, depth first."""
    def visit(node) -> None:
        ad = by_group.get(node.name)
        for child in node.children:
            visit(child)
            cad = by_group.get(child.name)
            if ad is None or cad is None:
                continue
            for attr in ("ResourcesUsed", "WeightedResourcesUsed", "AccumulatedUsage",
                         "WeightedAccumulatedUsage"):
                ad[attr] = (ad.get(attr) or 0) + (cad.get(attr) or 0)
            ad["BeginUsageTime"] = min(ad.get("BeginUsageTime") or 0, cad.get("BeginUsageTime") or 0)
            ad["LastUsageTime"] = max(ad.get("LastUsageTime") or 0, cad.get("LastUsageTime") or 0)
        if ad is not None:
            ad["Priority"] = 0.0
    visit(tree.root)


_COUNTS_LIMITS = operator.attrgetter("counts_limits")
_NO_RECORD: Mapping[str, Any] = {}      # what a missing record reads as (never written)


def _persisted(attr: str, value: Any) -> Any:
    """A value as the ClassAd log stores it: integers for integer attributes, reals
    rounded to 6 decimals (rule A5). (The in-memory SubmitterShare/SubmitterLimit of
    rule A3 are written to the record directly, never through here.)"""
    if isinstance(value, (bool, str)):
        return value
    if attr in _INT_ATTRS:
        return int(value)
    if isinstance(value, float):
        return _real(value)
    return value


# CheckMatches walks every record to find the ones it looks at when they are more than
# one in this many (`Accountant._in_order`)
_WALK_SHARE = 8


def _real(x: float) -> float:
    """A real as the ClassAd log stores it (rule A5): rounded to 6 decimals (a whole
    real, the usual weight or count, is its own rounding: returned at once, as
    `round6` would; the accountant charges every match through here)."""
    if type(x) is float and x.is_integer():
        return x
    return round6(x) if math.isfinite(x) else x


def _domain(name: str) -> str:
    """GetDomain: the text after the last '@' (empty when there is none)."""
    i = name.rfind("@")
    return name[i + 1:] if i >= 0 else ""




def parse_concurrency_limits(text: str) -> list[tuple[str, float]]:
    """Rule M7: `name[:amount]` tokens split on commas and white space (StringTokenIterator);
    names lower-cased. As ParseConcurrencyLimit reads a token: the amount is what strtod
    reads at its start ("2abc" is 2, "0x10" is 16, "inf" is inf), and one <= 0 or absent
    counts 1; a name whose part before the first '.' or after it is not an attribute name
    ("lic$ense", "x.y.z") makes the token invalid, and invalid tokens are ignored.
    Deliberately unlike HTCondor, a "nan" amount counts 1: HTCondor would carry NaN into
    the count and never reject on that limit again."""
    out = []
    for token in re.split(r"[, \t\r\n]+", text or ""):
        token = token.strip(" \t\n\v\f\r")
        if not token:
            continue
        name, _, amount_text = token.partition(":")
        amount = strtod(amount_text)[0] if amount_text else 1.0
        if not amount > 0:
            amount = 1.0
        if not is_limit_name(name):
            continue
        out.append((name.lower(), amount))
    return out
