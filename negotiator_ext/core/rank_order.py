"""The free slot classes of a partition in the order a MatchList takes them, kept from
cycle to cycle and shared by every request whose job Rank gives each class the same
value (`RankOrders`).

A fresh scan (`core.matchmaking`'s `Matcher.scan`) classifies every slot class of its
partition and makes a MatchList of those that pass, of which a request then takes a
few: on a large pool of varied slots, thousands of classes listed to pop a dozen. A
class of unclaimed slots whose pre and post ranks are the slots' own (no job attribute
in them) is listed under (pre rank, the job's Rank, post rank, slot index) of its first
live member, and requests whose Rank reads the same job texts and the same slot
attributes give it the same job rank. So for each partition and each such Rank the
classes are kept sorted by (pre rank, job rank, post rank) of their first live member,
and a scan reads that order from the top, taking a class into its MatchList only when
the order reaches it (`RankedMatchList`): the classes it passes on the way that do not
match, or that the submitter limit refuses, are left out there as the fresh scan
would leave them out.

A class's place is its first live member's entry when the order was made or renewed.
Within a cycle a class only loses members, and its members are in the order of their
entries (static ranks, then slot index, when every unclaimed slot has the same
PREEMPTION_RANK value), so its entry only moves later: the places are lower bounds, and
the MatchList takes the best entry in its heap only once the order has passed every
place before it. From one cycle to the next the order is kept with the slot classes
(`core.kept_classes`) and renewed at its first use: the classes that gained a live
member (a slot joined, or one matched last cycle came back) put in, each class's place
taken again (slot indices change from cycle to cycle), the whole sorted again (most of
it already is). Whatever could break the order is left to the full scan: a job Rank
that reads the request's ephemeral attributes or the clock, slot attributes the Rank
reaches that look back into the job, NaN ranks, a preemption rank that differs among
unclaimed slots."""

from __future__ import annotations

import bisect
from typing import TYPE_CHECKING

from . import classads
from .classads import FLT_MAX
from .match_list import (NO_PREEMPTION, REQUEST_EPHEMERALS, MatchGroup, Partition, Request,
                         SlotClass)
from .match_memory import reads_the_clock
from .projection import closure

if TYPE_CHECKING:
    from .matchmaking import Matcher

_EPHEMERALS = frozenset(n.lower() for n in REQUEST_EPHEMERALS)
_UNKNOWN = object()
_UNUSED_CYCLES = 20     # an order no request used in this many cycles goes


def place(e: tuple) -> tuple:
    """An order entry's place: its ranks, then its slot's index in this cycle's list."""
    return (e[0], e[1], e[2], e[3], e[4], e[5].index)


class _Order:
    """One partition's plain free classes for one Rank: (-pre rank, -job rank, -post
    rank, -state, preemption rank, slot, the class) of each class's first live member,
    sorted by `place`; made or renewed in cycle `cycle`, last used in the run's cycle
    number `used`."""
    __slots__ = ("entries", "pending", "cycle", "used")

    def __init__(self, entries: list, cycle: object):
        self.entries = entries
        self.pending: dict[SlotClass, None] = {}    # classes that gained a live member
        self.cycle = cycle
        self.used = 0


class _PartOrders:
    """What one partition keeps: its orders by Rank id, and the match groups a scan
    still goes through one by one with their classes that are not plain (claimed,
    claimed p-slots, consumption policies, pre or post ranks that read the job), or
    with held slots."""
    __slots__ = ("orders", "pairs", "cycle")

    def __init__(self, part: Partition):
        self.orders: dict[int, _Order | None] = {}
        self.pairs: dict[MatchGroup, list[SlotClass]] = {}
        for group in part.groups.values():
            eager = [cls for cls in group.classes if not _plain(cls)]
            if eager or group.held:
                self.pairs[group] = eager
        self.cycle: object = None

    def prune(self, part: Partition, now: int) -> None:
        """A new cycle (the run's `now`-th): groups and classes the partition no longer
        has go, the orders that could not be made are tried again, and those no
        request used for a while go (a Rank that reads job attributes has one per
        value)."""
        groups, classes = part.groups, part.classes
        self.pairs = {g: [c for c in eager if classes.get(c.key) is c]
                      for g, eager in self.pairs.items() if groups.get(g.view) is g}
        self.orders = {k: o for k, o in self.orders.items()
                       if o is not None and o.used >= now - _UNUSED_CYCLES}


def _plain(cls: SlotClass) -> bool:
    rep = cls.rep
    dep = rep.key[0]
    return (rep.current_user is None and rep.claimer_schedd is None and not rep.cp
            and "pre" not in dep and "post" not in dep)


class RankOrders:
    """The rank orders of a run's partitions (`parts`: carried from cycle to cycle with
    the kept slot classes, `core.kept_classes`), and what holds whatever the classes
    (`kept`: a long run's `MatchMemory.rank_orders`): each request's Rank id, and each
    class's job rank under each Rank (requests and classes are keyed by content)."""

    def __init__(self, kept: dict | None = None):
        self.parts: dict[Partition, _PartOrders] = {}
        self.adopt(kept)
        self._cycle = object()
        self._uniform: bool | None = None

    def adopt(self, kept: dict | None) -> None:
        kept = {} if kept is None else kept
        self._now = kept["cycles"] = kept.get("cycles", 0) + 1
        self._idents: dict[int, int | None] = kept.setdefault("idents", {})   # by eval_id
        # Rank id -> {class id: the class's job rank, or None: no order (the Rank looks
        # back into the job through the slot's attributes, or it is NaN)}
        self._class_ranks: dict[int, dict] = kept.setdefault("classes", {})
        # ... by what the Rank reaches in the class's slots (interned), for classes of
        # other partitions alike in that
        self._reach_ranks: dict[int, dict] = kept.setdefault("reaches", {})

    def carry(self, parts: dict) -> None:
        """A new cycle takes the orders the last one kept (`parts`)."""
        self.parts = parts

    def moved(self, part: Partition, got, new: bool) -> None:
        """A slot joined class (or match group's held slots) `got` of `part`, came back
        to it or left the list (`new`: the class was made for it)."""
        po = self.parts.get(part)
        if po is None:
            return
        if type(got) is SlotClass:
            if _plain(got):
                for o in po.orders.values():
                    if o is not None:
                        o.pending[got] = None
            elif new:
                po.pairs.setdefault(got.group, []).append(got)
        elif got.held:
            po.pairs.setdefault(got, [])

    def forget(self, part: Partition) -> None:
        self.parts.pop(part, None)

    def clear(self) -> None:
        """The classes are not kept: nothing of their orders holds."""
        self.parts = {}

    def order(self, m: "Matcher", req: Request, part: Partition) -> tuple[list, list] | None:
        """(the order, the (match group, classes) pairs still classified one by one) for
        `req` in `part` (matcher `m`'s); None: the full scan."""
        if self._uniform is None:
            # one PREEMPTION_RANK value among unclaimed slots (a class's members are
            # then in the order of their entries), and no NaN static rank
            self._uniform = not m.nan_statics and len(
                {s.static[2] for s in m.slots if s.current_user is None}) <= 1
        if not self._uniform:
            return None
        ident = self._idents.get(req.eval_id, _UNKNOWN)
        if ident is _UNKNOWN:
            ident = self._idents[req.eval_id] = self._ident(m, req)
        if ident is None:
            return None
        po = self.parts.get(part)
        if po is None:
            po = self.parts[part] = _PartOrders(part)
            po.cycle = self._cycle
        elif po.cycle is not self._cycle:
            po.prune(part, self._now)
            po.cycle = self._cycle
        o = po.orders.get(ident, _UNKNOWN)
        if o is _UNKNOWN:
            o = po.orders[ident] = self._build(m, req, part, ident)
        elif o is not None and (o.cycle is not self._cycle or o.pending):
            o = po.orders[ident] = self._renew(m, req, ident, o)
        if o is None:
            return None
        o.used = self._now
        return o.entries, list(po.pairs.items())

    @staticmethod
    def _ident(m: "Matcher", req: Request) -> int | None:
        """What the request's Rank sees of the job (the texts it reaches) and which slot
        attributes it reaches, as an id; None when its value is not the same for every
        request with the same id (it reads an ephemeral attribute or the clock)."""
        names, texts = req.group_key[0]
        read = dict(zip(names, texts))
        seen, outside = closure(read, ("rank",), m.values.names)
        if (seen | outside) & _EPHEMERALS:
            return None
        if any(reads_the_clock(read[n]) for n in seen):
            return None
        # (the slot names every slot has one text for are not in the class keys: that
        # text is, through the uniform token)
        return m.intern(("rank order", tuple(sorted((n, read[n]) for n in seen)),
                         req.group_key[3], m.uniform_token(req.group_key[1:3])))

    def _entry(self, m: "Matcher", req: Request, ident: int, cls: SlotClass):
        """The class's place now: None if it has no live member, _UNKNOWN if it
        cannot be in an order."""
        got = cls.next_live(0) if cls.live > 0 else None
        if got is None:
            return None
        ranks = self._class_ranks.get(ident)
        if ranks is None:
            ranks = self._class_ranks[ident] = {}
        jrank = ranks.get(cls.id, _UNKNOWN)
        if jrank is _UNKNOWN:
            # the same as for any slot the Rank sees alike, in any partition
            own_rank = req.group_key[3]
            rid = m._reach_id(cls.rep, own_rank)
            by_reach = self._reach_ranks.get(ident)
            if by_reach is None:
                by_reach = self._reach_ranks[ident] = {}
            jrank = by_reach.get(rid, _UNKNOWN)
            if jrank is _UNKNOWN:
                jrank = by_reach[rid] = self._job_rank(m, req, cls.rep, own_rank)
            ranks[cls.id] = jrank
        if jrank is None:
            return _UNKNOWN
        slot = got[1]
        st = slot.static
        return (-st[0], -jrank, -st[1], -NO_PREEMPTION, FLT_MAX, slot, cls)

    def _build(self, m: "Matcher", req: Request, part: Partition, ident: int) -> _Order | None:
        out = []
        for cls in part.classes.values():
            if _plain(cls):
                e = self._entry(m, req, ident, cls)
                if e is _UNKNOWN:
                    return None
                if e is not None:
                    out.append(e)
        out.sort(key=place)
        return _Order(out, self._cycle)

    def _renew(self, m: "Matcher", req: Request, ident: int, o: _Order) -> _Order | None:
        """The order for this cycle: the classes whose first live member may have
        changed since it was last used (`pending`: a member joined, came back or left
        the list) taken out and put in at their places now. The others' places stand:
        their first members are still in the list, and the slots that stay keep their
        order from cycle to cycle (`core.kept_classes`), so the order holds under this
        cycle's slot indices."""
        pending, o.pending = o.pending, {}
        if pending:
            entries = [e for e in o.entries if e[6] not in pending]
            for cls in pending:
                e = self._entry(m, req, ident, cls)
                if e is _UNKNOWN:
                    return None
                if e is not None:
                    bisect.insort(entries, e, key=place)
            o.entries = entries
        o.cycle = self._cycle
        return o

    @staticmethod
    def _job_rank(m: "Matcher", req: Request, rep, own_rank: frozenset) -> float | None:
        """The job's Rank for slot `rep`, as `Matcher._compute` works it out; None when
        the slot attributes it reaches name something outside themselves (something
        of the job's, whose texts the Rank's id does not hold) or it is NaN."""
        seen, texts = m._reach(rep, own_rank)
        inside = set(seen)
        names_of = m.values.names
        if not all(n in inside for t in texts if t is not None for n in names_of(t)):
            return None
        job = req.ad
        rank = job.get("Rank")
        if classads.is_expr(rank):
            jr = classads.as_number(classads.eval_match(m.job_rank, job, rep.ad))
        else:
            jr = classads.as_number(rank if rank is not None else classads.UNDEFINED)
        if jr is None:
            return 0.0
        return None if jr != jr else jr
