"""NEGOTIATOR_IGNORE_JOB_RANKS: the negotiator's static-rank mode (`m_staticRanks`).

What the knob changes in HTCondor 25.14 (`matchmaker.cpp`), and how it is done here:

1. **The slot list is sorted once per cycle** (2.2 step 10, `rankSorter`), after the
   trimming and before the negotiator's own attributes (NEGOTIATOR_MATCH_EXPRS, the
   current user's priority and usage) go into the slot ads: NEGOTIATOR_PRE_JOB_RANK
   descending, then NEGOTIATOR_POST_JOB_RANK descending, both evaluated against an
   *empty* request, then the address of the ad in the negotiator's memory. The address
   is no part of any snapshot: here ties keep the collector's order (`sort_slots`).
   A recording shows the addresses mostly follow that order, but not always (an ad
   allocated into freed memory comes earlier), hence the warning the pool gives.
2. **Ranks are computed once per slot and cycle** (`calculateRanks` and its `ranksMap`):
   the first computation of a slot's ranks is the sort's, so every request sees the
   slot's pre-job and post-job ranks of the empty request, its PREEMPTION_RANK is the
   no-preemption value (-FLT_MAX), and the job's own Rank counts as 1.0 for every slot.
   A consumption-policy p-slot keeps the ranks it had when it was sorted, however much
   of it is matched away.
3. **A fresh scan stops early** (`matchmakingAlgorithm`): it walks the slots in the
   sorted order, and after each candidate it keeps, adds the slot's SlotWeight (1.0 when
   that is no number) and stops once the sum exceeds the submitter's limit. The MatchList
   (or, without one, the best candidate) is drawn from the candidates kept; rejections
   past the stop are never counted. `first_candidates` takes them in that order.
4. **The MatchList is sorted by std::sort** with the usual comparator, on the cached
   values: pre-job rank, post-job rank, preemption state (job rank and preemption rank
   are the same for all). `StaticMatchList` sorts its candidates, given in scan order,
   with `core.cxxsort`, so that equal candidates come out as libstdc++ leaves them;
   without a MatchList the first best candidate in scan order is taken. A p-slot put
   back after a match (`insert_candidate`) is inserted as the negotiator inserts it.

The rest of matchmaking (the match test, the preemption classification, the submitter
limit checks, the concurrency limits) is `core.matchmaking`'s, per slot class.
"""

from __future__ import annotations

import heapq
import math
from typing import Any, Callable, Iterable

from . import classads
from .classads import DBL_MAX, FLT_MAX, f32
from .cxxsort import cxx_sort

NO_PREEMPTION = 2        # as core.matchmaking
_EMPTY = classads.ClassAd()


def _rank(expr, slot_ad) -> float:
    """EvalNegotiatorMatchRank against the sort's dummy (empty) request."""
    if expr is None:
        return -DBL_MAX
    v = classads.eval_match(expr, slot_ad, _EMPTY)
    if classads.is_number(v):
        return f32(float(v))
    return -DBL_MAX


def scan_weight(ad, config) -> float:
    """What a kept candidate adds to the scan's sum: LookupFloat(SlotWeight), 1.0 when it
    does not give a number. The ad's SlotWeight is the negotiator's SLOT_WEIGHT when the
    ad has none that gives a number, or always with FORCE_NEGOTIATOR_SLOT_WEIGHT
    (obtainAdsFromCollector); unlike the accountant's weight, this holds whatever
    NEGOTIATOR_USE_SLOT_WEIGHTS says, and a negative weight counts as it is."""
    w = None
    if "SlotWeight" in ad and not config.force_negotiator_slot_weight:
        w = classads.eval_number(ad, "SlotWeight")
    if w is None:
        w = classads.as_number(classads.eval_expr(config.slot_weight, ad)) if config.slot_weight else None
    return 1.0 if w is None else float(w)


def _ranks_first(a: tuple, b: tuple) -> bool | None:
    """Whether `a` goes before `b` by (pre, post) ranks, more first, tested one by one
    with < and > as the C++ comparators do (a NaN is neither); None when neither
    decides."""
    for x, y in ((a[0], b[0]), (a[1], b[1])):
        if x < y:
            return False
        if x > y:
            return True
    return None


def _sorter_less(a: tuple, b: tuple) -> bool:
    """rankSorter on (pre, post, collector index): more is better for the ranks."""
    first = _ranks_first(a, b)
    return a[2] < b[2] if first is None else first


def sort_slots(slots: list, config) -> None:
    """rankSorter (2.2 step 10) on the trimmed slot list, before the negotiator's
    attributes go into the ads: each slot gets its cached ranks (`fixed`: pre, post) and
    its place in the sorted list (`sort_pos`); non-p-slots their scan weight too (a
    consumption-policy p-slot's is read when it is scanned: its Cpus change)."""
    pre = classads.parse_expr(config.pre_job_rank) if config.pre_job_rank else None
    post = classads.parse_expr(config.post_job_rank) if config.post_job_rank else None
    keys = []
    for s in slots:
        s.fixed = (_rank(pre, s.ad), _rank(post, s.ad))
        if not s.cp:
            s.scan_weight = scan_weight(s.ad, config)
        keys.append((s.fixed[0], s.fixed[1], s.index))
    if any(math.isnan(k[0]) or math.isnan(k[1]) for k in keys):
        ordered = cxx_sort(keys, _sorter_less)      # NaN compares as libstdc++ sees it
    else:
        ordered = sorted(keys, key=lambda k: (-k[0], -k[1], k[2]))
    by_index = {s.index: s for s in slots}
    for pos, k in enumerate(ordered):
        by_index[k[2]].sort_pos = pos


def first_candidates(accepted: Iterable[tuple[Any, Any, int]], limit: float,
                     weight_of: Callable[[Any], float]) -> tuple[list[tuple[Any, int]], float]:
    """The candidates a static-rank scan keeps: `accepted` are (slot class, verdict,
    preemption state) of the classes that passed every test, each class's members in
    sorted order; their live members are walked in the sorted slot order until the sum
    of their weights exceeds `limit`. Returns the kept (slot, state) in scan order and
    the sorted position the scan stopped at (inf: it did not stop)."""
    heap = []
    for n, (cls, _, state) in enumerate(accepted):
        it = cls.walk()
        for slot in it:
            if not slot.removed:
                heap.append((slot.sort_pos, n, slot, it, state))
                break
    heapq.heapify(heap)
    kept: list[tuple[Any, int]] = []
    total = 0.0
    while heap:
        pos, n, slot, it, state = heap[0]
        kept.append((slot, state))
        for nxt in it:
            if not nxt.removed:
                heapq.heapreplace(heap, (nxt.sort_pos, n, nxt, it, state))
                break
        else:
            heapq.heappop(heap)
        total += weight_of(slot)
        if total > limit:
            return kept, pos
    return kept, math.inf


def _better(a: tuple, b: tuple) -> bool:
    """MatchListType::sort_compare on (pre, post, state): the job rank (1.0) and the
    preemption rank (-FLT_MAX) are the same for every candidate."""
    first = _ranks_first(a, b)
    return a[2] > b[2] if first is None else first


class StaticMatchList:
    """The MatchList of a static-rank scan: the kept candidates sorted once (std::sort),
    popped from the top. Same interface as core.matchmaking.MatchList."""

    def __init__(self, kept: list[tuple[Any, int]], rejections, sort: bool):
        entries = [((s.fixed[0], s.fixed[1], state), s, state) for s, state in kept]
        if sort:
            if len(entries) > 1:
                entries = cxx_sort(entries, lambda a, b: _better(a[0], b[0]))
        elif entries:
            # no MatchList: the running best of the scan (a later candidate replaces it
            # only when strictly better)
            best = entries[0]
            for e in entries[1:]:
                if _better(e[0], best[0]):
                    best = e
            entries = [best]
        self._entries = entries
        self._head = 0
        self.rejections = rejections

    def peek(self) -> tuple[Any, int, float] | None:
        while self._head < len(self._entries):
            _, slot, state = self._entries[self._head]
            if not slot.removed:
                return slot, state, -FLT_MAX
            self._head += 1
        return None

    def pop(self, refused=None) -> tuple[Any, int] | None:
        """The next candidate; `refused` (the cost shortcut of the class-based list) is
        not needed: the list holds only what the scan kept."""
        while self._head < len(self._entries):
            _, slot, state = self._entries[self._head]
            self._head += 1
            if not slot.removed:
                return slot, state
        return None

    def push_slot(self, slot, v, state: int) -> None:
        """returnPslotToMatchList -> insert_candidate: into the place freed at the top,
        then moved down past every entry it is strictly better than, with the ranks it
        was sorted with (as the negotiator's loop does)."""
        if self._head == 0:
            return
        self._head -= 1
        new = ((slot.fixed[0], slot.fixed[1], NO_PREEMPTION), slot, NO_PREEMPTION)
        e = self._entries
        i = self._head
        while i < len(e) - 1 and _better(new[0], e[i + 1][0]):
            e[i] = e[i + 1]
            i += 1
        e[i] = new
