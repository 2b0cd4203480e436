"""What the matcher works out of texts alone, kept from one cycle to the next.

The matcher (core.matchmaking) caches every evaluation by what the expressions can see:
a request's key is the texts of the job attributes its expressions and the slots' reach
(with the ephemeral values they read), a slot class's key the texts of the slot
attributes the request and the slot's own expressions reach. Within one cycle two pairs
with equal keys give equal answers, which is why the cycle evaluates once per distinct
pair, not per job and slot. Those keys are contents, not identities, so the answers
hold in the next cycle too, on the same conditions:

- the config's expressions are the same (Requirements is the ads' own; PREEMPTION_*,
  NEGOTIATOR_PRE/POST_JOB_RANK, NEGOTIATOR_MATCH_EXPRS, NEGOTIATOR_IGNORE_JOB_RANKS):
  a memory is only taken by a matcher with the same `token`;
- nothing read depends on when it is evaluated: an expression calling `time()` or
  `random()`, or reading `CurrentTime`, has a different value from one cycle to the
  next though its text is the same. The memory watches every text the matcher reads
  (they all pass through its `TextValues`, `Watched` below); once one reads the clock or
  the dice, the memory is dropped and nothing is kept from then on (each cycle works
  out its own, as without a memory);
- a consumption-policy slot is its own class (its assets change as it is matched): its
  keys carry the cycle's serial number, so no later cycle meets them.

A long run (the simulator's and the forecast's cycles) takes one memory for its
cycles; what it keeps is bounded (`limit` entries). Past it, the answers go (`_shed`):
they pile up for slot classes and requests long gone (a partitionable slot's leftover
is a new class at each match). What the slots and requests are keyed by, and the slot
classes kept from the last cycle, stay; any part of a memory gives the answers a fresh
cycle would, as each is keyed by what it was worked out of. Only when that still
leaves too much does the memory start again.
"""

from __future__ import annotations

import re
from collections import Counter
from itertools import repeat

from .adtext import TextValues

# What makes an expression's value depend on the moment it is evaluated, as it appears
# in its text: the CurrentTime attribute, and the time() / random() families (any name
# ending in "time(": formatTime, splitTime..., and eval() of a string that could).
_CLOCK = re.compile(r"currenttime|time\s*\(|random\s*\(|eval\s*\(", re.IGNORECASE)


def reads_the_clock(text: str | None) -> bool:
    return text is not None and _CLOCK.search(text) is not None


class Watched(TextValues):
    """TextValues that notes any text whose value depends on when it is evaluated."""

    def __init__(self):
        super().__init__()
        self.clock = False

    def names(self, text: str) -> frozenset[str]:
        if not self.clock and text not in self._names and reads_the_clock(text):
            self.clock = True
        return super().names(text)

    def literal(self, text: str) -> tuple[bool, object]:
        if not self.clock and text not in self._lit and reads_the_clock(text):
            self.clock = True
        return super().literal(text)


class MatchMemory:
    """The matcher's content-keyed caches, handed from one cycle's matcher to the
    next (Matcher(memory=...))."""

    def __init__(self, limit: int = 3_000_000):
        self.limit = limit
        self.token: object = None
        self.serial = 0                 # one per cycle: consumption-policy keys carry it
        self.dropped = False            # a text read the clock: nothing kept any more
        self.cycles_kept = 0            # cycles that found the previous cycle's answers
        self.sheds = 0                  # times the answers went past the limit (`_shed`)
        self.carry = None
        self._fresh()

    def _fresh(self) -> None:
        if self.carry is not None:
            self.carry.release()
        self.values = Watched()
        self.ids: dict = {}
        self.verdicts: dict = {}
        self.alike_verdicts: dict = {}  # one Verdict per set of values (Matcher.verdict)
        self.matches: dict = {}
        self.ranks: dict = {}
        self.constant_rank: dict = {}
        self.rank_orders: dict = {}     # what a cycle's rank orders keep (core.rank_order)
        self.statics: dict = {}
        self.projectors: dict = {}
        self.sorted_names: dict = {}
        self.tally = TextTally()
        self.name_sets: dict = {}
        self.slot_fams: dict = {}
        self.carry = None           # the slot classes the last cycle left (core.kept_classes)
        # the last cycle's candidate Slots by the ids of their ads: (knobs token, the
        # cycle's stamp, {id(ad): Slot}) (`cycle._candidate_slots`)
        self.listed: tuple | None = None

    def _size(self) -> int:
        return (len(self.ids) + len(self.verdicts) + len(self.matches) + len(self.ranks)
                + len(self.statics)
                + sum(len(d) for k in ("classes", "reaches")
                      for d in self.rank_orders.get(k, {}).values()))

    def _shed(self) -> bool:
        """Past the limit: the answers go (verdicts, match tests, ranks); the rest stays.
        False: the rest alone is over half the limit (start again)."""
        self.verdicts = {}
        self.alike_verdicts = {}
        self.matches = {}
        self.ranks = {}
        self.rank_orders = {}
        self.sheds += 1
        return self._size() < self.limit // 2

    def for_cycle(self, token: object) -> bool:
        """A new cycle's matcher, under config `token`, takes the memory: True when what
        it holds is the previous cycles' (else it starts empty)."""
        self.serial += 1
        kept = not self.dropped and not self.values.clock and token == self.token
        if kept and self._size() >= self.limit:
            kept = self._shed()
        if self.values.clock:
            self.dropped = True
        if not kept:
            self._fresh()
        else:
            self.cycles_kept += 1
        self.token = token
        return kept


class TextTally:
    """Which texts a list of slots' texts holds for a name (None for a slot that lacks
    it), kept from cycle to cycle as the list changes: the slot classes ask it of the
    non-consumption-policy slots to find the names every slot has alike
    (`SlotClasses._uniform`). The slots' texts dicts are taken by identity, as the
    simulator hands them over: shared from cycle to cycle, never written into (a cycle
    writes into a copy), so a dict seen before still holds what it held. Each cycle
    `update` takes the new list; only the dicts that came or went are read again."""

    def __init__(self):
        self._held: dict[int, dict] = {}          # id -> the dict (kept alive by this)
        self._counts: dict[str, dict] = {}        # name -> {text: how many dicts hold it}

    def update(self, plain: list[dict]) -> None:
        # (at C speed: a cycle's list is most of the pool's slots, and most are the
        # last cycle's; the counts do not depend on the order they are patched in)
        now = dict(zip(map(id, plain), plain))
        held, counts = self._held, self._counts
        came = list(map(now.__getitem__, now.keys() - held.keys()))
        went = list(map(held.__getitem__, held.keys() - now.keys()))
        if len(now) != len(plain) or 2 * (len(came) + len(went)) > len(now):
            counts.clear()          # (one dict twice, or most of them new: count afresh)
        else:
            # each name's texts among the dicts that went and came, counted at C speed
            # (most are alike), then patched in by distinct text
            get = dict.get
            for name, c in counts.items():
                names = repeat(name)
                for v, k in Counter(map(get, went, names)).items():
                    n = c[v] - k
                    if n:
                        c[v] = n
                    else:
                        del c[v]
                for v, k in Counter(map(get, came, names)).items():
                    c[v] = c.get(v, 0) + k
        self._held = now

    def texts(self, name: str):
        """The distinct texts the slots hold for `name` (a view: read it at once)."""
        c = self._counts.get(name)
        if c is None:
            c = self._counts[name] = {}
            for t in self._held.values():
                v = t.get(name)
                c[v] = c.get(v, 0) + 1
        return c.keys()
