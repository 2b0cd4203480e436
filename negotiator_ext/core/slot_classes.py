"""The slot list sorted into slot classes (`core.matchmaking`'s Matcher, of which this is
the half that sorts): per set of slot names the cycle's requests can see, a partition of
the candidate slots into classes no such request can tell apart, each class's members in
the order a scan takes them (static ranks, then collector order), and the classes
grouped by what the match test sees of them (match groups). A consumption-policy p-slot
whose assets change moves to its new class (`reprofile`); a matched slot leaves its
classes (`remove`)."""

from __future__ import annotations

import itertools
import operator

from . import classads
from .kept_classes import KeptClasses, plan_signatures
from .match_list import (MatchGroup, Partition, Slot, SlotClass, _sort_pos, _static_order,
                         count_live)

_REACH = "reach"        # a slot memo's key for what names reach in the slot (`_reach`)
_by_order = operator.attrgetter("order")      # a slot's `_static_order`, worked out
_statics = operator.attrgetter("static")
_cps = operator.attrgetter("cp")
_texts = operator.attrgetter("texts")
_key_ids = operator.attrgetter("key_id")
_names = operator.attrgetter("name")


class SlotClasses:
    """The Matcher's slot classes and partitions; the state it reads (the interning, the
    projections, the slots' profiles, the live usage) is the Matcher's own."""

    def build_classes(self, slots: list[Slot]) -> None:
        self.slots = slots
        self.partitions: dict[tuple, Partition] = {}
        self._plain_texts: list[dict] | None = None     # _uniform: the non-CP slots' texts
        # the slots in the order a class's members are kept in, when `partition` can
        # take them in it (each class's members then come sorted); else None
        self._walk: list[Slot] | None = None
        # a NaN static rank orders nothing consistently (core.rank_order asks)
        self.nan_statics = any(x != x for st in set(map(_statics, slots)) for x in st)
        if not self.static_ranks:
            # that order (static ranks, then collector order), worked out once a cycle
            # as each slot's place in it; with a NaN rank each class is sorted on the
            # ranks themselves, as the places would not say the same
            if self.nan_statics:
                for s in slots:
                    s.order = _static_order(s)
            else:
                walk = self._walk = sorted(slots, key=_static_order)
                for pos, s in enumerate(walk):
                    s.order = pos

    def release(self) -> None:
        """The cycle is over: break the reference cycles among its slots, their classes
        and the classes' match groups (a slot's class_keys -> its class -> members -> the
        slot; a class -> its group -> classes), so they are freed as soon as nothing uses
        them rather than left for Python's cyclic collector to find (at 11,000 slots,
        170,000 objects a cycle). Classes kept for the next cycle are left as they are."""
        if self._next is not None:
            return
        self.rank_orders.clear()
        for s in self.slots:
            s.class_keys = {}
        for part in self.partitions.values():
            for cls in part.classes.values():
                cls.group = None

    def kept_stamp(self, key) -> object | None:
        """The stamp of the cycle whose slot classes this one may keep
        (`core.kept_classes`), when its candidate slots were read under the same `key`;
        None: nothing is kept."""
        self._carry_key = key
        kept = self._kept
        if kept is not None and kept.key != key:
            kept.release()
            kept = self._kept = None
        return kept.stamp if kept is not None else None

    def classify(self, slots: list[Slot], stamp: object = None,
                 fresh: list[Slot] | None = None, numbers: bool = True) -> dict[str, int]:
        """Once every slot is scanned and every job keyed: each slot's class key and
        static ranks, and the slot list the classes are drawn from. Returns each slot's
        class number (slot name -> number): slots no job-independent part of
        matchmaking tells apart (same class key, same static ranks) share one, for
        comparing with the real negotiator's choice of slot.

        In a long run (a memory, `core.kept_classes`), the classes the last cycle left
        are patched instead, when the slots it shares with this one (`Slot.carried`)
        kept their order and their profiles: `fresh` is then the others (None: the
        order changed); `stamp`: this cycle's token. `numbers`: False when nothing
        compares slots (none are returned)."""
        kept = self._kept if fresh is not None and self._memory is not None else None
        if kept is not None:
            # (the carried slots passed `_can_keep` when the last cycle kept them)
            plans = kept.plans_now(self, fresh)
            if not self._can_keep(fresh) or any(
                    sig != kept.plans[i][1] for i, (_, sig) in plans.items()
                    if i in kept.plans):
                kept = None
        if kept is None and self._kept is not None:
            self._kept.release()        # (its slots are profiled and sorted afresh)
            self._kept = None
        if kept is not None:
            self.rank_orders.carry(kept.orders)
        keeping = kept is not None or (self._memory is not None and self._can_keep(slots))
        for s in fresh if kept is not None else slots:
            self.profile_slot(s)
        if kept is not None:
            self.slots = slots
            self.nan_statics = False        # (`_can_keep` refuses them)
            self.partitions = kept.partitions
            self._walk = None
            self._lazy_walk = True
            kept.renew(self, slots, stamp, fresh)
            kept.plans = plans
        else:
            self.build_classes(slots)
            if keeping:
                kept = KeptClasses(self._carry_key, stamp, slots, self.partitions,
                                   plan_signatures(self, slots))
                kept.orders = self.rank_orders.parts
        self._next = kept
        self._stamp = stamp
        if self._memory is not None:
            self._memory.carry = kept
        if self.pslot_preemption:
            self.by_name = {s.name: s for s in slots}
            self.pslots = [s for s in slots if s.partitionable and not s.cp and (
                classads.eval_number(s.ad, "NumDynamicSlots") or 0) >= 1]
        if not numbers:
            return {}
        # (numbered in order of first appearance)
        keys = list(zip(map(_key_ids, slots), map(_statics, slots)))
        number = dict(zip(dict.fromkeys(keys), itertools.count()))
        return dict(zip(map(_names, slots), map(number.__getitem__, keys)))

    def _can_keep(self, slots: list[Slot]) -> bool:
        """Whether this cycle's slot classes can be kept for the next
        (`core.kept_classes` lists what they cannot follow)."""
        return (not self.static_ranks and not self.pslot_preemption
                and self.live_remote is None and not any(map(_cps, slots))
                and not any(x != x for st in set(map(_statics, slots)) for x in st))

    def partition(self, names: tuple[frozenset, frozenset]) -> "Partition":
        """The slot classes as requests whose expressions see `names` = (everything
        they reach, what their Requirements reach) of a slot tell them apart, grouped
        by what the match test sees."""
        names = self._normalized(names)
        part = self.partitions.get(names)
        if part is not None and part.pending:
            KeptClasses.settle(self, names, part, self._stamp)
        if part is None:
            part = self.partitions[names] = Partition()
            # `_add_to_class` for every slot, its common case inlined: a slot joining a
            # class that has members already (most do, in a pool of alike slots)
            add, reach, classes = self._add_to_class, self._reach, part.classes
            seen = names[0]
            token = (_REACH, seen)
            held = self.preq_false
            # (in the members' order where it is known: no class needs sorting then.
            # Which member of a class comes first as its representative does not
            # matter: they are alike in everything a request sees, and candidates are
            # ordered by rank and slot index, never by the order classes were made)
            walk = self._walk
            if walk is None and self._lazy_walk:
                walk = self._walk = sorted(self.slots, key=_static_order)
            pending = part.pending if self._next is not None else None
            for s in (walk if walk is not None else self.slots):
                if s.removed:
                    if pending is not None:
                        pending.append(s)
                    continue
                # (`_held`, inlined)
                if held and s.current_user is not None and s.rank_static is False \
                        and not s.cp:
                    add(s, names, part)
                    continue
                if seen:
                    memo = s.memo
                    got = memo.get(token) if memo is not None else None
                    if got is None:
                        got = reach(s, seen)
                    cls = classes.get((s.key_id, *got))
                else:
                    cls = classes.get(s.key_id)
                if cls is None:
                    add(s, names, part)
                    continue
                cls.members.append(s)
                cls.live += 1
                cls.group.live += 1
                s.class_keys[names] = cls
            if walk is None:
                order = _sort_pos if self.static_ranks else _by_order
                for cls in part.classes.values():
                    if len(cls.members) > 1:
                        cls.members.sort(key=order)
        return part

    def _normalized(self, names: tuple) -> tuple:
        """`names` without the names every slot has the same literal text for (or
        lacks): they cannot tell slots apart, so requests that differ only in them
        share a partition. Consumption-policy p-slots are left out of the test: their
        assets change, but each is a class of its own."""
        got = self._norm.get(names)
        if got is None:
            # one object for each set of names, from cycle to cycle in a long run: a
            # slot's memo is keyed by them, and a key found the same object is
            # compared at once, not name by name
            canon = self._name_sets
            got = self._norm[names] = tuple(
                canon.setdefault(f, f) for f in (
                    frozenset(n for n in part if not self._uniform(n)) for part in names))
        return got

    def uniform_token(self, names: tuple) -> int:
        """The names `_normalized` leaves out of `names`, with the one text every slot
        has for each, interned: part of a request's evaluation key, since the slot
        classes it is matched against no longer tell those texts apart (in another
        cycle the same names may be uniform at another value)."""
        got = self._uniform_tokens.get(names)
        if got is None:
            kept = self._normalized(names)
            dropped = sorted({n for part, k in zip(names, kept) for n in part - k})
            got = self._uniform_tokens[names] = self.intern(
                ("uniform", tuple((n, self._uniform_text[n]) for n in dropped)))
        return got

    def _uniform(self, name: str) -> bool:
        got = self._uniform_names.get(name)
        if got is None:
            plain = self._plain_texts
            if plain is None:
                plain = self._plain_texts = list(
                    map(_texts, itertools.filterfalse(_cps, self.slots)))
                if self._tally is not None:
                    self._tally.update(plain)
            # most names that tell slots apart do so among the first few slots
            texts = {t.get(name) for t in plain[:64]}
            if len(texts) <= 1:
                texts = (set(self._tally.texts(name)) if self._tally is not None
                         else {t.get(name) for t in plain})
            got = len(texts) <= 1 and all(
                t is None or not self.values.names(t) for t in texts) and not (
                self.live_remote is not None and name in self.live_names)   # it changes
            self._uniform_names[name] = got
            if got:
                self._uniform_text[name] = next(iter(texts), None)
        return got

    def _reach(self, s: Slot, names: frozenset) -> tuple:
        """What `names` (job-reached slot names) reach in slot `s`: (names, texts), kept
        in the slot's memo (it depends on the slot's texts alone)."""
        memo = s.memo
        if memo is not None:
            got = memo.get((_REACH, names))
            if got is not None:
                return got
        get = s.texts.get
        seen = self._projector(names, self._reached)(get)
        got = seen, tuple(map(get, seen))
        if memo is not None:
            memo[(_REACH, names)] = got
        return got

    def _reach_id(self, s: Slot, names: frozenset) -> int:
        """`_reach` as an id, kept on the slot."""
        got = s.views.get(names)
        if got is None:
            got = s.views[names] = self.intern(self._reach(s, names))
        return got

    def _class_key(self, s: Slot, names: frozenset) -> tuple:
        return (s.key_id, *self._reach(s, names)) if names else s.key_id

    def _view(self, s: Slot, names: frozenset) -> int:
        """What the match test sees of slot `s` when the job's Requirements reach
        `names` in it: the slot Requirements' reach and the job's, as an id. When either
        reads the live usage of the slot's users, those users are part of it, and the
        view's answers are kept per usage value (group_matches)."""
        live = s.live_req or (self.live_remote is not None and bool(s.live)
                              and not self.live_names.isdisjoint(names))
        view = self.intern((s.req_id, self._reach_id(s, names), s.live if live else None))
        if live:
            self._live_views.add(view)
        return view

    def _held(self, s: Slot) -> bool:
        return (self.preq_false and s.current_user is not None and s.rank_static is False
                and not s.cp)

    def _group(self, s: Slot, view: int, part: "Partition") -> "MatchGroup":
        group = part.groups.get(view)
        if group is None:
            group = part.groups[view] = MatchGroup(view=view, rep=s)
            part.version += 1
        return group

    def _add_to_class(self, s: Slot, names: tuple, part: "Partition") -> SlotClass | None:
        if self._held(s):
            group = self._group(s, self._view(s, names[1]), part)
            group.held.append(s)
            group.live += 1
            s.class_keys[names] = group
            self.rank_orders.moved(part, group, False)
            return None
        key = self._class_key(s, names[0])
        cls = part.classes.get(key)
        new = cls is None
        if new:
            # (its id stands for its key: classes alike in what requests see share
            # verdicts, in any partition and, with a memory, in any cycle)
            cls = part.classes[key] = SlotClass(key, s, self.intern(("class", key)))
            view = self.intern(("cp", self._serial, cls.id)) if s.cp else self._view(s, names[1])
            group = self._group(s, view, part)
            group.classes.append(cls)
            cls.group = group
        cls.members.append(s)
        cls.live += 1
        cls.group.live += 1
        s.class_keys[names] = cls
        self.rank_orders.moved(part, cls, new)
        return cls

    def class_of(self, s: Slot, names: tuple) -> SlotClass:
        names = self._normalized(names)
        cls = s.class_keys.get(names)
        return cls if cls is not None else self._add_to_class(s, names, self.partition(names))

    def reprofile(self, s: Slot) -> None:
        """A consumption-policy p-slot changed (its assets were deducted)."""
        old = s.class_keys
        for names, cls in old.items():
            cls.remove(s)
            cls.live -= 1
            cls.group.live -= 1
            if not cls.members:
                part = self.partitions[names]
                del part.classes[cls.key]
                cls.group.classes.remove(cls)
                if not cls.group.classes and not cls.group.held:
                    del part.groups[cls.group.view]
                    part.version += 1
        s.version += 1
        s.texts = {}                 # its assets changed: read them again
        self.scan_slot(s)
        self.profile_slot(s)
        # (its static ranks may have changed; no place among the others is needed: a
        # consumption-policy p-slot is a class of its own, no members to sort)
        for names in old:
            self._add_to_class(s, names, self.partitions[names])

    def remove(self, s: Slot) -> None:
        if not s.removed:
            s.removed = True
            if self._next is not None:
                self._next.removed.append(s)
            count_live(s, -1)
