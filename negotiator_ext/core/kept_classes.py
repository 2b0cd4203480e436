"""Slot classes kept from one cycle to the next (a long run's: the simulator's and the
forecast's cycles, which hand the cycle the same slot ads and memos while a slot does not
change).

A cycle sorts its candidate slots into partitions and classes (`core.slot_classes`):
per set of names the requests see, the classes no such request tells apart, each with
its members in scan order, grouped by what the match test sees. A class's key is what
the slot's texts give (interned in the run's `MatchMemory`), so a slot that did not
change falls into the same class next cycle. What changes from one cycle to the next is
which slots are there: a matched slot leaves (its ad changes), a freed one comes. So
instead of sorting every slot again each cycle, the partitions are kept and patched:

1. the slots the last cycle's matching removed are put back (their classes' live
   counts restored);
2. the slots no longer in the list leave their classes (a class left empty goes, and a
   match group left empty with it; a class or group whose representative left takes
   another member, alike in everything a request sees);
3. the slots new to the list join their classes, each at its place in the scan order
   (static ranks, then collector order), in a kept partition when a request first asks
   for it (`settle`); a partition no request asked for while many slots came is
   dropped. The slots that stayed keep their order among themselves
   (`_candidate_slots` checks it), so the classes stay sorted.

The slots that stayed are the same `Slot` objects (`Slot.carried`): what the cycle
worked out of them alone (their scan and profile, their class keys) stands, since the
matcher's config and interning are the same (`MatchMemory.for_cycle`) and the plans
their profiles were made under are (`plans`). Anything the kept classes cannot follow
turns them off for the cycle, which then sorts every slot afresh: consumption-policy
p-slots (classes of their own per cycle), live usage in an expression, static ranks
(NEGOTIATOR_IGNORE_JOB_RANKS), ALLOW_PSLOT_PREEMPTION, a NaN static rank, a slot list
whose order changed. The tests compare every run with and without (`shortcuts=False`)."""

from __future__ import annotations

import bisect
from typing import Any

from .match_list import Partition, Slot, SlotClass, _static_order, count_live
from .slot_profile import distinct_families


class KeptClasses:
    """What one cycle's slot classes leave to the next (`MatchMemory.carry`)."""

    def __init__(self, key: Any, stamp: object, slots: list[Slot],
                 partitions: dict[tuple, Partition], plans: dict[int, tuple]):
        self.key = key                # the knobs the candidate slots were read under
        self.stamp = stamp            # the cycle's token (`Slot.stamp`)
        self.slots = slots            # its candidate slots
        self.partitions = partitions  # normalized names -> Partition
        # id(slot families) -> (the families, what profiles were made under them)
        self.plans = plans
        self.removed: list[Slot] = []   # the slots its matching removed
        self.orders: dict = {}          # its partitions' rank orders (core.rank_order)

    def release(self) -> None:
        """Nothing will keep these classes: their reference cycles broken (a slot's
        class_keys -> its class -> members -> the slot; a class -> its group ->
        classes), so that they are freed at once (a run pauses the cyclic collector)."""
        for s in self.slots:
            s.class_keys = {}
        for part in self.partitions.values():
            for cls in part.classes.values():
                cls.group = None
            part.pending = []
        self.slots, self.removed, self.partitions, self.orders = [], [], {}, {}

    def plans_now(self, classes, fresh: list[Slot]) -> dict[int, tuple]:
        """`plans` as this cycle's matcher `classes` makes them, for the families of
        the last cycles and of the slots new to the list (`fresh`)."""
        out = {i: (fams, classes.plan_signature(fams)) for i, (fams, _) in self.plans.items()}
        out.update(plan_signatures(classes, fresh))
        return out

    def renew(self, classes, slots: list[Slot], stamp: object, fresh: list[Slot]) -> None:
        """The partitions patched for the cycle with `slots` (stamped `stamp`; `fresh`:
        those not carried); `classes`: the cycle's SlotClasses (how a new slot finds
        its class)."""
        # (`_candidate_slots` has cleared the flags of those still in the list)
        parts = self.partitions
        orders = classes.rank_orders
        for s in self.removed:
            count_live(s, +1)
            for names, got in s.class_keys.items():     # (it may come first again)
                orders.moved(parts.get(names), got, False)
        self.removed = []
        touched: dict[int, tuple] = {}
        for s in self.slots:
            if s.stamp is not stamp:          # it left
                count_live(s, -1)
                for names, got in s.class_keys.items():
                    touched[id(got)] = (names, got)
                    orders.moved(parts.get(names), got, False)     # (it may be first)
                s.class_keys = {}
        for names, got in touched.values():
            part = parts[names]
            if type(got) is SlotClass:
                got.members = [x for x in got.members if x.stamp is stamp]
                group = got.group
                if got.members:
                    if got.rep.stamp is not stamp:
                        got.rep = got.members[0]
                else:
                    del part.classes[got.key]
                    group.classes.remove(got)
                    got.group = None
            else:                             # a match group's held slots
                group = got
                group.held = [x for x in group.held if x.stamp is stamp]
            if not group.classes and not group.held:
                if part.groups.get(group.view) is group:
                    del part.groups[group.view]
                    part.version += 1
            elif group.rep.stamp is not stamp:
                group.rep = group.classes[0].rep if group.classes else group.held[0]
        limit = len(slots) // 2
        for names in list(parts):
            part = parts[names]
            # the new slots join a partition when a request asks for it (`settle`): most
            # cycles ask for a few of the partitions kept. One not asked for while more
            # than half a list of slots came goes (made afresh when asked for again)
            part.pending += fresh
            if len(part.pending) > limit:
                del parts[names]
                orders.forget(part)
                for got in (*part.classes.values(), *part.groups.values()):
                    for x in (got.members if type(got) is SlotClass else got.held):
                        if x.class_keys.get(names) is got:
                            del x.class_keys[names]
                continue
            for cls in part.classes.values():
                cls.start = 0
            # (a request's list of groups drops those with no live slot left: true for
            # the rest of a cycle, not of the next)
            part.maybe = {}
        self.slots, self.stamp = slots, stamp

    @classmethod
    def settle(cls, classes, names: tuple, part: Partition, stamp: object) -> None:
        """The slots waiting to join partition `part` of the cycle stamped `stamp`
        join it: those still in the list and not in it yet; the removed ones wait for
        the next cycle."""
        pending, part.pending = part.pending, []
        for s in pending:
            if s.stamp is stamp and names not in s.class_keys:
                cls._join(classes, s, names, part)

    @staticmethod
    def _join(classes, s: Slot, names: tuple, part: Partition) -> None:
        """Slot `s` into its class of `part` (`SlotClasses._add_to_class`, which puts it
        last), moved to its place in the members' order."""
        if s.removed:
            part.pending.append(s)
            return
        cls = classes._add_to_class(s, names, part)
        if cls is not None and len(cls.members) > 1 and \
                _static_order(cls.members[-2]) > _static_order(s):
            cls.members.pop()
            bisect.insort(cls.members, s, key=_static_order)


def plan_signatures(classes, slots: list[Slot]) -> dict[int, tuple]:
    """id(families) -> (the families, what `profile_slot` makes of the slots sharing
    them this cycle)."""
    return {i: (fams, classes.plan_signature(fams))
            for i, fams in distinct_families(slots).items()}
