"""The simulated pool as the cycle is handed it, kept from cycle to cycle: one row per
top-level slot (it and its dynamic slots), made again only when one of its slots
changed (`SimSlot.changed`), and the pool's columns (every fetched slot ad with its
usage, pie weight and effective size; the candidates the matchmaker sees; the slots
LoadLimits reads) patched where rows were made again, instead of every row laid end to
end again each cycle.

`slot_row` makes a row; `PoolRows.update` patches the pool's rows and columns and says
which slots the accountant's CheckMatches must look at (`core.accountant.SlotChanges`).

The columns of every fetched slot (ads, usages, pie weights, effective sizes) are not
laid out each cycle: a cycle reads what they add up to (`SlotSums`, patched with the
rows) and, rarely, the columns themselves (`SlotColumn`, laid end to end when first
read).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..core import classads
from ..core.accountant import SlotChanges
from ..core.slots import slot_value
from .ads import _built, _facts, _slot_texts, slot_view

if TYPE_CHECKING:
    from .schedd_startd import SimPool, SimSlot


class SlotRow:
    """A top-level slot's part of the pool (it and its dynamic slots) under one config:
    see `slot_row`."""
    __slots__ = ("cand", "config", "every", "free_cpus", "limits", "seg", "takes")

    def __init__(self, config):
        self.config = config
        # (ads, usages, pie weights, effective sizes) of its fetched slots
        self.seg: tuple = ((), (), (), ())
        self.every: list[tuple] = []     # (slot, _Ad, usage) of each fetched ad
        self.free_cpus: float | None = None   # its free cpus, if it counts
        self.takes = 0                   # how many matches its free ads can take a cycle
        # (ads, usages, texts, memos) of the ones a job can take without preemption, as
        # the cycle takes its candidates (`Simulation._pool`)
        self.cand: tuple = ((), (), (), ())
        # (usages,) of its fetched slots that LoadLimits reads (`SlotUsage.counts_limits`)
        self.limits: tuple = ((),)


def slot_row(s: "SimSlot", sc, config, least_cpus: float) -> SlotRow:
    """What top-level slot `s` and its dynamic slots give the pool under `config`, kept
    on `s` until one of them changes (`SimSlot.changed`) or the config does: their ads
    (those NEGOTIATOR_SLOT_CONSTRAINT keeps) with their usage, pie weights and effective
    sizes, and the ones a job can take when no claim can be preempted (a p-slot with at
    least `least_cpus`, the fewest cpus any job requests; a static slot that is not
    claimed)."""
    row = SlotRow(config)
    if not s.partitionable:
        # a static slot: the same as the loop below, without its lists
        b = _built(s, sc)
        fetched, u, pie, eff = _facts(b, config)
        if fetched:
            row.seg = ((b.ad,), (u,), (pie,), (eff,))
            row.every.append((s, b, u))
            if u.counts_limits:
                row.limits = ((u,),)
            if s.job is None:
                row.takes = UNBOUNDED if _matched_again(slot_view(b)) else 1
                row.cand = ((b.ad,), (u,), (_slot_texts(b),), (b.memo,))
        row.free_cpus = s.cpus if s.job is None else None
        s._row = row
        return row
    seg, free = [], []
    for x in [s] + s.children:
        b = _built(x, sc)
        fetched, u, pie, eff = _facts(b, config)
        if not fetched:                     # NEGOTIATOR_SLOT_CONSTRAINT leaves it out
            continue
        seg.append((b.ad, u, pie, eff))
        row.every.append((x, b, u))
        if (x.partitionable and x.cpus >= least_cpus) or (
                not x.partitionable and x.job is None):
            free.append((x, b, u))
            # a slot is matched once a cycle (rule P1), unless a consumption policy
            # or WantAdRevaluate lets the negotiator match it again (no bound then)
            row.takes += UNBOUNDED if _matched_again(slot_view(b)) else 1
    row.seg = columns(seg)
    row.limits = (tuple([u for _, _, u in row.every if u.counts_limits]),)
    row.free_cpus = s.cpus
    row.cand = columns(candidates(free))
    s._row = row
    return row


class Columns:
    """Rows laid end to end as columns: each row is a tuple of columns of its own (all
    of one length, maybe 0), and column k of the whole is every row's column k in row
    order. A row replaced is spliced in at its place; where rows start is worked out
    again only after a row changed length."""
    __slots__ = ("cols", "lens", "_starts")

    def __init__(self, rows: list[tuple], width: int):
        chain = itertools.chain.from_iterable
        self.cols = [list(chain([r[k] for r in rows])) for k in range(width)]
        self.lens = [len(r[0]) for r in rows]
        self._starts: list[int] | None = None

    def replace(self, rows: dict[int, tuple]) -> None:
        """Rows replaced: {place: the row now}."""
        if not rows:
            return
        starts = self._starts
        if starts is None:
            starts = list(itertools.accumulate(self.lens, initial=0))
        lens, cols = self.lens, self.cols
        if sum(1 for i, row in rows.items() if len(row[0]) != lens[i]) > _SPLICES:
            # many rows change length: each splice would move the rest of every column,
            # so each column is laid again once, from its kept runs and the new rows
            order = sorted(rows)
            for k, col in enumerate(cols):
                out: list = []
                done = 0
                for i in order:
                    a = starts[i]
                    out += col[done:a]
                    out += rows[i][k]
                    done = a + lens[i]
                out += col[done:]
                cols[k] = out
            for i in order:
                lens[i] = len(rows[i][0])
            self._starts = None
            return
        moved = False
        # from the last: a row that changes length moves none of the rows before it
        for i in sorted(rows, reverse=True):
            row = rows[i]
            a, old, n = starts[i], lens[i], len(row[0])
            for col, part in zip(cols, row):
                col[a:a + old] = part
            if n != old:
                lens[i] = n
                moved = True
        self._starts = None if moved else starts

    def tuples(self) -> tuple:
        """The columns, as tuples of their own (the next cycle's patches do not reach
        them)."""
        return tuple(map(tuple, self.cols))


class PoolRows:
    """Every top-level slot's row, in the pool's order, and the pool's columns made of
    them: `slot_columns()`, (ads, usages, pie weights, effective sizes) of every fetched
    slot, laid end to end only when read, and `sums`, what they add up to (`SlotSums`);
    `cand_cols`, (ads, usages, texts, memos) of the candidates when no claim can be
    preempted; `limit_cols`, (usages,) of the slots LoadLimits reads."""

    def __init__(self, pool: "SimPool", config, rows: list[SlotRow]):
        self.version = pool.version             # SimPool.version they were made for
        self.config = config                    # ... and the config
        self.every = [r.every for r in rows]
        self.free_cpus = [r.free_cpus for r in rows]
        self.takes = [r.takes for r in rows]
        # their sums, patched with the rows (`free_total`, `takes_total`)
        self._takes = sum(self.takes)
        self._free: int | None = 0
        for c in self.free_cpus:
            self._add_free(c, 1)
        self.segs = [r.seg for r in rows]
        self.sums = SlotSums()
        # what each row adds to the sums, and its slots' resource names and claims,
        # worked out once a row (`_part`): added when it comes, taken when it goes
        self._which = 1 if config.discount_suspended_resources else 0
        self.parts = [self._part(r) for r in rows]
        for part in self.parts:
            self.sums.add_part(part[2], 1)
        self.cand_cols = Columns([r.cand for r in rows], 4)
        self.limit_cols = Columns([r.limits for r in rows], 1)
        self.all_cpus = sum(int(math.ceil(s.shape.cpus)) for s in pool.slots)
        self.changes: SlotChanges | None = None   # the slots changed since the last cycle's
        # each charged customer's claimed weight (`Pool.claimed_weights`) and how many
        # slots it holds, patched with the rows; None once a weight is not a whole
        # number (a sum patched in another order than the slots' could then differ in
        # its last bits: the pass sums the slots itself)
        self._claimed: dict[str, float] | None = {}
        self._holding: dict[str, int] = {}
        for part in self.parts:
            self._claim(part[1], 1)

    def update(self, made: dict[int, SlotRow], named: list[int]) -> None:
        """The rows made again since the last cycle ({place: row}), and the places of the
        slots the last cycle's matches named. What the accountant's CheckMatches needs
        to look at (`SlotChanges`): the slots of the rows made again, before and after,
        and those the last cycle's matches named that did not change (a match the startd
        did not take up: the negotiator wrote its record all the same)."""
        names: set[str] = set()
        every, parts, sums = self.every, self.parts, self.sums
        for i, r in made.items():
            was, now = parts[i], self._part(r)
            parts[i] = now
            names.update(was[0])
            names.update(now[0])
            self._claim(was[1], -1)
            self._claim(now[1], 1)
            every[i] = r.every
            self._add_free(self.free_cpus[i], -1)
            self._add_free(r.free_cpus, 1)
            self._takes += r.takes - self.takes[i]
            self.free_cpus[i], self.takes[i] = r.free_cpus, r.takes
            sums.add_part(was[2], -1)
            sums.add_part(now[2], 1)
            self.segs[i] = r.seg
        self.cand_cols.replace({i: r.cand for i, r in made.items()})
        self.limit_cols.replace({i: r.limits for i, r in made.items()})
        places = set(made)
        for i in named:
            if i not in places:
                names.update(u.resource_name for _, _, u in every[i])
                places.add(i)
        self.changes = SlotChanges(frozenset(names),
                                   tuple(u for i in sorted(places) for _, _, u in every[i]),
                                   self.limit_cols.tuples()[0])

    def free_total(self) -> float:
        """The free cpus of every slot that counts (`SlotRow.free_cpus`), summed: kept
        while each is a whole number (exact in any order), else summed in order."""
        if self._free is not None:
            return self._free
        return sum([c for c in self.free_cpus if c is not None])

    def takes_total(self) -> int:
        """How many matches the free slots can take this cycle (`SlotRow.takes`)."""
        return self._takes

    def _add_free(self, c, sign: int) -> None:
        if c is None or self._free is None:
            return
        if _whole(c):
            self._free += sign * int(c)
        else:
            self._free = None

    def slot_columns(self) -> tuple:
        """(ads, usages, pie weights, effective sizes) of every fetched slot as the pool
        is now, in its order: four sequences laid end to end when first read (later
        patches do not reach them)."""
        flat = _Flat(list(self.segs), len(self.sums))
        return tuple(SlotColumn(flat, k) for k in range(4))

    def claimed_weights(self) -> dict[str, float] | None:
        """Each charged customer's claimed weight now (`Pool.claimed_weights`; a copy),
        or None when it is not kept."""
        return dict(self._claimed) if self._claimed is not None else None

    def _part(self, r: SlotRow) -> tuple:
        """What row `r` gives the pool's sums: (its slots' resource names, their claims
        as (customer, weight) pairs or None when a weight is not a whole number,
        `SlotSums.part` of its segment)."""
        names = tuple([u.resource_name for _, _, u in r.every])
        which = self._which
        claims: list | None = []
        for _, _, u in r.every:
            c = u.charged[which]
            if c is not None:
                if not _whole(u.weight):
                    claims = None
                    break
                claims.append((c, u.weight))
        return names, claims, SlotSums.part(r.seg)

    def _claim(self, claims: list | None, sign: int) -> None:
        """A row's claims (`_part`) added (`sign` 1) or taken away (-1). Whole-number
        weights sum exactly in any order."""
        claimed = self._claimed
        if claimed is None:
            return
        if claims is None:
            self._claimed = None
            return
        holding = self._holding
        for c, w in claims:
            n = holding.get(c, 0) + sign
            if n:
                holding[c] = n
                claimed[c] = claimed.get(c, 0.0) + sign * w
            else:
                del holding[c]
                del claimed[c]


class SlotSums:
    """What every fetched slot adds up to, patched as rows come and go: how many there
    are, their pie weights' and effective sizes' sums, and the least pie weight.

    A sum is kept only while every value is a whole number no larger than `_EXACT`:
    such sums are exact in any order, so they equal the cycle's own sum over the slots
    in the pool's order, down to their type (an int while no value was a float, as
    `sum` gives). Otherwise `totals()` says None and the cycle sums the columns."""
    __slots__ = ("count", "_sums", "_floats", "_exact", "_least")

    def __init__(self):
        self.count = 0
        self._sums = [0, 0]             # pie weights, effective sizes: whole numbers
        self._floats = [0, 0]           # how many of each were floats
        self._exact = True
        self._least: dict = {}          # pie weight -> how many slots have it

    def __len__(self) -> int:
        return self.count

    @staticmethod
    def part(seg: tuple) -> tuple:
        """What a row's segment ((ads, usages, pies, effs)) adds up to: (its pie weights, (the pie weights' sum, how
        many of them were floats, the effective sizes' sum, how many of them were
        floats), the sums as whole numbers; None instead when a value is not one)."""
        pies = seg[2]
        sums = []
        for col in (pies, seg[3]):
            total, floats = 0, 0
            for v in col:
                if not _whole(v):
                    return pies, None
                if type(v) is float:
                    floats += 1
                    v = int(v)
                total += v
            sums += (total, floats)
        return pies, tuple(sums)

    def add_part(self, part: tuple, sign: int) -> None:
        """A row's `part` added (`sign` 1) or taken (-1)."""
        pies, sums = part
        self.count += sign * len(pies)
        least = self._least
        for p in pies:
            n = least.get(p, 0) + sign
            if n:
                least[p] = n
            else:
                del least[p]
        if not self._exact:
            return
        if sums is None:
            self._exact = False
            return
        pie, pie_floats, eff, eff_floats = sums
        s, f = self._sums, self._floats
        s[0] += sign * pie
        s[1] += sign * eff
        f[0] += sign * pie_floats
        f[1] += sign * eff_floats

    def totals(self) -> tuple | None:
        """(count, sum of pie weights, sum of effective sizes, least pie weight or None
        without a slot), each sum as `sum` over the slots in any order gives it; None
        when a sum is not kept."""
        if not self._exact:
            return None
        pie, eff = ((float(v) if f else v) for v, f in zip(self._sums, self._floats))
        return (self.count, pie, eff, min(self._least) if self._least else None)


class _Flat:
    """The fetched slots' segments as one cycle saw them, laid end to end when a column
    is first read."""
    __slots__ = ("segs", "count", "cols")

    def __init__(self, segs: list, count: int):
        self.segs, self.count, self.cols = segs, count, None

    def column(self, k: int) -> tuple:
        if self.cols is None:
            chain = itertools.chain.from_iterable
            self.cols = tuple(tuple(chain([s[j] for s in self.segs])) for j in range(4))
            self.segs = None
        return self.cols[k]


class SlotColumn(Sequence):
    """One column of every fetched slot (`PoolRows.slot_columns`): its length known at
    once, its values laid out when first read."""
    __slots__ = ("_flat", "_k")

    def __init__(self, flat: _Flat, k: int):
        self._flat, self._k = flat, k

    def __len__(self) -> int:
        return self._flat.count

    def __getitem__(self, i):
        return self._flat.column(self._k)[i]

    def __iter__(self):
        return iter(self._flat.column(self._k))

    def __reversed__(self):
        return reversed(self._flat.column(self._k))


# the largest whole-number weight summed without rounding by `PoolRows._claim` and
# `SlotSums` (a pool's sums stay well under 2**53)
_EXACT = 1 << 32


def _whole(v) -> bool:
    """Whether `v` is a whole number (an int or a float, not a bool) no larger than
    `_EXACT`: such numbers add up exactly in any order."""
    tv = type(v)
    return (tv is int or (tv is float and v.is_integer())) and abs(v) <= _EXACT

UNBOUNDED = 1 << 40

# how many rows changing length `Columns.replace` splices in one by one (more: each
# column is laid again once)
_SPLICES = 4


def candidates(entries: list[tuple]) -> list[tuple]:
    """(slot, _Ad, usage) entries as candidates: (ad, usage, texts, memo) each."""
    return [(b.ad, u, _slot_texts(b), b.memo) for _, b, u in entries]


def columns(entries) -> tuple:
    """Entries of four values as four columns."""
    return tuple(zip(*entries)) or ((), (), (), ())


def _matched_again(ad) -> bool:
    """Whether the negotiator may match slot ad `ad` (a ClassAd, or an AdView of one)
    more than once a cycle: a partitionable slot with a consumption policy (rule P4),
    or WantAdRevaluate."""
    from ..core import consumption
    return (consumption.supports_policy(ad)
            or classads.as_bool(slot_value(ad, "WantAdRevaluate")) is True)
