"""The MatchList (core.match_list): a scan's classes put into a heap at once give the
same candidates in the same order as a heap grown one class at a time, whatever is
removed, refused, peeked or put back between pops; and a class's next live member is
the first not removed, found past the removed front once."""

from __future__ import annotations

import heapq

from hypothesis import given, settings
from hypothesis import strategies as st

from negotiator_ext.core.classads import FLT_MAX
from negotiator_ext.core.match_list import (MatchList, NO_PREEMPTION, PRIO_PREEMPTION,
                                             RANK_PREEMPTION, Rejections, Slot, SlotClass,
                                             Verdict, _static_order)


class _GrownList:
    """The MatchList as a heap grown one class at a time, each class's members read by
    a plain list iterator: the reference the list made at once must agree with."""

    def __init__(self):
        self._heap = []

    def add_class(self, cls, v, state):
        self._push(iter(cls.members), v, state, None if cls.rep.cp else cls.rep.weight)

    def _push(self, it, v, state, cost):
        for slot in it:
            if slot.removed:
                continue
            pre = v.pre if v.pre is not None else slot.static[0]
            post = v.post if v.post is not None else slot.static[1]
            prank = -FLT_MAX if state == NO_PREEMPTION else (
                v.prank if v.prank is not None else slot.static[2])
            key = (-pre, -v.jrank, -post, -state, -prank, slot.index)
            heapq.heappush(self._heap, (key, slot, it, v, state, cost))
            return

    def peek(self):
        while self._heap:
            key, slot, it, v, state, cost = self._heap[0]
            if not slot.removed:
                return slot, state, -key[4]
            heapq.heappop(self._heap)
            self._push(it, v, state, cost)
        return None

    def pop(self, refused=None):
        while self._heap:
            _, slot, it, v, state, cost = heapq.heappop(self._heap)
            if refused is not None and cost is not None and cost >= refused[state != NO_PREEMPTION]:
                continue
            self._push(it, v, state, cost)
            if slot.removed:
                continue
            return slot, state
        return None

    def push_slot(self, slot, v, state):
        self._push(iter([slot]), v, state, None)


_RANK = st.sampled_from([0.0, 1.0, 2.0, -1.0])
_OPT = st.one_of(st.none(), _RANK)


@st.composite
def _lists(draw):
    n_classes = draw(st.integers(1, 6))
    index = 0
    built = []
    for c in range(n_classes):
        slots = []
        for _ in range(draw(st.integers(1, 5))):
            s = Slot(index=index, ad=None, name=f"slot{index}@h", weight=draw(
                st.sampled_from([1.0, 2.0, 4.0])), usage=None,
                cp=False, static=(draw(_RANK), draw(_RANK), draw(_RANK)))
            s.removed = draw(st.booleans()) and draw(st.booleans())
            index += 1
            slots.append(s)
        slots.sort(key=_static_order)
        cls = SlotClass(key=("c", c), rep=slots[0], id=c)
        cls.members = slots
        cls.live = sum(not s.removed for s in slots)
        v = Verdict(match=True, jrank=draw(_RANK), pre=draw(_OPT), post=draw(_OPT),
                    prank=draw(_OPT))
        state = draw(st.sampled_from([PRIO_PREEMPTION, RANK_PREEMPTION, NO_PREEMPTION]))
        built.append((cls, v, state))
    # what happens between pops: ("pop", refused), ("peek",), ("remove", slot number),
    # ("put back", a job rank): the last slot popped put back
    steps = draw(st.lists(st.one_of(
        st.tuples(st.just("pop"), st.one_of(st.none(), st.tuples(
            st.sampled_from([1.0, 2.0, 4.0, float("inf")]),
            st.sampled_from([1.0, 2.0, 4.0, float("inf")])))),
        st.tuples(st.just("peek")),
        st.tuples(st.just("remove"), st.integers(0, index - 1)),
        st.tuples(st.just("put back"), st.integers(0, index - 1))), max_size=30))
    return built, steps


@settings(max_examples=300, deadline=None)
@given(_lists())
def test_a_list_made_at_once_gives_what_a_list_grown_one_class_at_a_time_gives(case):
    built, steps = case
    slots = {s.index: s for cls, _, _ in built for s in cls.members}
    removed0 = {i: s.removed for i, s in slots.items()}

    def run(ml) -> list:
        for i, s in slots.items():             # each list starts from the same pool
            s.removed = removed0[i]
        for cls, _, _ in built:
            cls.start = 0
        for cls, v, state in built:
            ml.add_class(cls, v, state)
        seen = []
        popped = []
        for step in steps:
            if step[0] == "pop":
                refused = None if step[1] is None else list(step[1])
                got = ml.pop(refused)
                seen.append(("pop", None if got is None else (got[0].index, got[1])))
                if got is not None:
                    got[0].removed = True       # matched: gone from every list
                    popped.append(got[0])
            elif step[0] == "peek":
                got = ml.peek()
                seen.append(("peek", None if got is None else (got[0].index, got[1], got[2])))
            elif step[0] == "remove":
                slots[step[1]].removed = True
            elif popped:
                # a p-slot taken and put back changed (P5): at most once a pop
                s = popped.pop()
                s.removed = False
                ml.push_slot(s, Verdict(match=True, jrank=step[1] % 3), NO_PREEMPTION)
        while (got := ml.pop()) is not None:
            seen.append(("rest", got[0].index, got[1]))
            got[0].removed = True
        return seen

    assert run(MatchList(Rejections())) == run(_GrownList())


@settings(max_examples=200, deadline=None)
@given(st.lists(st.booleans(), min_size=1, max_size=8), st.integers(0, 9),
       st.integers(0, 9))
def test_a_class_s_next_live_member_is_the_first_not_removed(removed, start, i):
    members = [Slot(index=n, ad=None, name=f"s{n}", weight=1.0, usage=None, removed=r)
               for n, r in enumerate(removed)]
    cls = SlotClass(("k",), members[0], 0)
    cls.members = members
    cls.start = start = min(start, len(members))
    want = next(((n, s) for n, s in enumerate(members)
                 if n >= max(i, start) and not s.removed), None)
    # a look from the start on moves it over the removed front; one from past it not
    moved = start
    if i <= start:
        while moved < len(members) and removed[moved]:
            moved += 1
    assert cls.next_live(i) == want
    assert cls.start == moved
    assert list(SlotClass.walk(cls, i)) == [s for n, s in enumerate(members)
                                            if n >= max(i, start) and not s.removed]
