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

import bisect
import itertools
import math
import operator
from collections import Counter
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
    if not s.partitionable:
        # a static slot: the same as the loop below, without its lists
        b = _built(s, sc)
        idle = s._idle_row
        if idle is not None and idle.config is config and b is s._idle_ad:
            # unclaimed again: its ad is the one it had unclaimed, and so is its row
            s._row = idle
            return idle
        row = SlotRow(config)
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
        if b is s._idle_ad:
            s._idle_row = row
        return row
    row = SlotRow(config)
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
    order. Only the rows that hold something are kept, by their place, with the columns
    laid end to end: a cycle's candidates are the rows of a pool's free slots, a
    thousand of 100,000 in a busy pool, tens of thousands in a quiet one. Rows replaced
    are spliced in at their places when they are few beside the rows held; when they
    are many, the columns are laid again from the rows held."""
    __slots__ = ("width", "held", "order", "lens", "cols", "_laid")

    def __init__(self, rows: list[tuple], width: int):
        self.width = width
        self.held = {i: r for i, r in enumerate(rows) if r[0]}     # place -> the row
        self.order = list(self.held)          # their places, in order
        self._lay()

    def _lay(self) -> None:
        held = self.held
        rows = list(map(held.__getitem__, self.order))
        self.lens = [len(r[0]) for r in rows]
        chain = itertools.chain.from_iterable
        self.cols = [list(chain([r[k] for r in rows])) for k in range(self.width)]
        self._laid: tuple | None = None       # the columns as tuples, once read

    def replace(self, rows: dict[int, tuple]) -> None:
        """Rows replaced: {place: the row now}."""
        held = self.held
        touched = [i for i, r in rows.items() if r[0] or i in held]
        if not touched:
            return
        if _SPLICE * len(touched) > len(self.order):
            # many beside the rows held: laid again from them
            for i in touched:
                r = rows[i]
                if r[0]:
                    held[i] = r
                else:
                    del held[i]
            self.order = sorted(held)
            self._lay()
            return
        # few: each column copied in runs between the rows replaced, each of which is
        # put in (or left out) at its place; the places and lengths alike
        touched.sort()
        order, lens = self.order, self.lens
        starts = list(itertools.accumulate(lens, initial=0))
        cuts = []                       # (where the row starts, its old length, now)
        new_order: list[int] = []
        new_lens: list[int] = []
        done = 0
        for i in touched:
            j = bisect.bisect_left(order, i)
            had = j < len(order) and order[j] == i
            r = rows[i]
            new_order += order[done:j]
            new_lens += lens[done:j]
            if r[0]:
                held[i] = r
                new_order.append(i)
                new_lens.append(len(r[0]))
            else:
                del held[i]
            done = j + had
            cuts.append((starts[j], lens[j] if had else 0, r))
        new_order += order[done:]
        new_lens += lens[done:]
        cols = self.cols
        for k, col in enumerate(cols):
            out: list = []
            done = 0
            for a, old, r in cuts:
                out += col[done:a]
                out += r[k]
                done = a + old
            out += col[done:]
            cols[k] = out
        self.order, self.lens, self._laid = new_order, new_lens, None

    def tuples(self) -> tuple:
        """The columns, as tuples of their own (the next cycle's patches do not reach
        them)."""
        if self._laid is None:
            self._laid = tuple(map(tuple, self.cols))
        return self._laid


class PoolRows:
    """Every top-level slot's row, in the pool's order, and the pool's columns made of
    them: `slot_columns()`, (ads, usages, pie weights, effective sizes) of every fetched
    slot, laid end to end only when read, and `sums`, what they add up to (`SlotSums`);
    `cand_cols`, (ads, usages, texts, memos) of the candidates when no claim can be
    preempted; `limit_cols`, (usages,) of the slots LoadLimits reads.

    What the rows add up to is patched as rows are replaced, with the rows that went and
    came taken together (each sum at C speed over their values, each distinct value
    counted once): a cycle replaces a thousand rows or more at 100,000 slots."""

    def __init__(self, pool: "SimPool", config, rows: list[SlotRow]):
        self.version = pool.version             # SimPool.version they were made for
        self.config = config                    # ... and the config
        self.every = [r.every for r in rows]
        self.free_cpus = [r.free_cpus for r in rows]
        self.takes = [r.takes for r in rows]
        # their sums, patched with the rows (`free_total`, `takes_total`)
        self._takes = sum(self.takes)
        self._free: int | None = 0
        self._add_free(self.free_cpus, 1)
        self.segs = [r.seg for r in rows]
        self.sums = SlotSums()
        self.sums.patch(self.segs, ())
        self._which = 1 if config.discount_suspended_resources else 0
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
        self._claim(_usages(self.every), 1)

    def update(self, made: dict[int, SlotRow], named: list[int]) -> None:
        """The rows made again since the last cycle ({place: row}), and the places of the
        slots the last cycle's matches named. What the accountant's CheckMatches needs
        to look at (`SlotChanges`): the slots of the rows made again, before and after,
        and those the last cycle's matches named that did not change (a match the startd
        did not take up: the negotiator wrote its record all the same)."""
        every, segs, free_cpus, takes = self.every, self.segs, self.free_cpus, self.takes
        rows = list(made.values())
        # the rows that went, held until their figures are taken away
        went = [every[i] for i in made]
        went_segs = [segs[i] for i in made]
        went_free = [free_cpus[i] for i in made]
        self._takes -= sum([takes[i] for i in made])
        for i, r in made.items():
            every[i], segs[i], free_cpus[i], takes[i] = r.every, r.seg, r.free_cpus, r.takes
        self._takes += sum([r.takes for r in rows])
        self._add_free([r.free_cpus for r in rows], 1)
        self._add_free(went_free, -1)
        self.sums.patch([r.seg for r in rows], went_segs)
        came_u, went_u = _usages(r.every for r in rows), _usages(went)
        self._claim(came_u, 1)
        self._claim(went_u, -1)
        names = set(map(_RESOURCE_NAME, came_u))
        names.update(map(_RESOURCE_NAME, went_u))
        self.cand_cols.replace({i: r.cand for i, r in made.items()})
        self.limit_cols.replace({i: r.limits for i, r in made.items()})
        places = set(made)
        for i in named:
            if i not in places:
                names.update(u.resource_name for _, _, u in every[i])
                places.add(i)
        self.changes = SlotChanges(frozenset(names),
                                   tuple(_usages(map(every.__getitem__, sorted(places)))),
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

    def _add_free(self, cpus: list, sign: int) -> None:
        """Rows' free cpus (None: a row that does not count) added (`sign` 1) or taken
        away (-1)."""
        if self._free is None:
            return
        got = _exact_sum([c for c in cpus if c is not None])
        if got is None:
            self._free = None
        else:
            self._free += sign * got[0]

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

    def _claim(self, usages: list, sign: int) -> None:
        """The claims of slots (their usages) added (`sign` 1) or taken away (-1), each
        (customer, weight) once with how many slots hold it. Whole-number weights sum
        exactly in any order."""
        claimed = self._claimed
        if claimed is None:
            return
        which = self._which
        pairs = Counter([(c, u.weight) for u in usages
                         if (c := u.charged[which]) is not None])
        holding = self._holding
        for (c, w), k in pairs.items():
            if not _whole(w):
                self._claimed = None
                return
            n = holding.get(c, 0) + sign * k
            if n:
                holding[c] = n
                claimed[c] = claimed.get(c, 0.0) + sign * k * w
            else:
                del holding[c]
                del claimed[c]


class SlotSums:
    """What every fetched slot adds up to, patched as rows come and go: how many there
    are, their pie weights' and effective sizes' sums, and the least pie weight.

    A sum is kept only while every value is a whole number no larger than `_EXACT`:
    such sums are exact in any order, so they equal the cycle's own sums over the slots
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

    def patch(self, came, went) -> None:
        """Rows' segments ((ads, usages, pies, effs) each) added (`came`) and taken away
        (`went`)."""
        chain = itertools.chain.from_iterable
        least = self._least
        for segs, sign in ((came, 1), (went, -1)):
            if not segs:
                continue
            pies = list(chain([s[2] for s in segs]))
            self.count += sign * len(pies)
            for p, k in Counter(pies).items():
                n = least.get(p, 0) + sign * k
                if n:
                    least[p] = n
                else:
                    del least[p]
            if not self._exact:
                continue
            pie = _exact_sum(pies)
            eff = _exact_sum(list(chain([s[3] for s in segs])))
            if pie is None or eff is None:
                self._exact = False
                continue
            s, f = self._sums, self._floats
            s[0] += sign * pie[0]
            s[1] += sign * eff[0]
            f[0] += sign * pie[1]
            f[1] += sign * eff[1]

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

# `Columns.replace` splices the rows replaced in when they are fewer than the rows held
# by this factor; else it lays the columns again from the rows held
_SPLICE = 2


def _exact_sum(values: list) -> tuple[int, int] | None:
    """(The sum of `values` as an int, how many were floats) when every value is a
    whole number within `_EXACT` (`_whole`), else None. At C speed where all are ints
    or all floats."""
    if not values:
        return 0, 0
    kinds = set(map(type, values))
    if len(kinds) == 1 and (int in kinds or float in kinds):
        if max(values) > _EXACT or min(values) < -_EXACT:
            return None
        if int in kinds:
            return sum(values), 0
        if not all(map(float.is_integer, values)):
            return None
        return int(math.fsum(values)), len(values)      # (exact: whole numbers)
    total = floats = 0
    for v in values:
        if not _whole(v):
            return None
        if type(v) is float:
            floats += 1
            v = int(v)
        total += v
    return total, floats


def _usages(everys) -> list:
    """The usages of rows' fetched slots (`SlotRow.every` lists)."""
    return [e[2] for e in itertools.chain.from_iterable(everys)]


_RESOURCE_NAME = operator.attrgetter("resource_name")


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
