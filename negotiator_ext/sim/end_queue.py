"""The running jobs by when they end, taken in order: (end, seq, job) entries, given
back smallest first (the end, then the job's submission number), as a heap of them
would give them.

At 100,000 slots a heap holds 130,000 running jobs, and each of the thousand jobs that
start and end a cycle costs a climb through it. Here entries wait unsorted in buckets,
one for each whole second their job ends by (`ceil(end)`); the earliest bucket is
sorted when it is first asked for, and an entry pushed into it (a job that ends
before the jobs already waiting there) is put in its place.
"""

from __future__ import annotations

import bisect
import heapq
import math


class EndQueue:
    """(end, seq, job) entries, pushed in any order, taken earliest first (see the
    module docstring)."""
    __slots__ = ("_buckets", "_keys", "_head", "_head_key", "_len")

    def __init__(self):
        self._buckets: dict[int, list] = {}   # ceil(end) -> its entries, unsorted
        self._keys: list[int] = []            # a heap of the buckets' seconds
        self._head: list = []                 # the earliest bucket, sorted, last first
        self._head_key: int | None = None     # ... and its second
        self._len = 0

    def __len__(self) -> int:
        return self._len

    def push(self, entry: tuple) -> None:
        k = math.ceil(entry[0])
        self._len += 1
        if self._head_key is not None and k <= self._head_key:
            # (an end before the buckets left: in its place among the earliest's)
            head = self._head
            head.insert(bisect.bisect_left(head, _Later(entry), key=_Later), entry)
            return
        got = self._buckets.get(k)
        if got is None:
            self._buckets[k] = [entry]
            heapq.heappush(self._keys, k)
        else:
            got.append(entry)

    def first(self) -> tuple | None:
        """The earliest entry, or None."""
        head = self._head
        if not head:
            if not self._keys:
                return None
            k = heapq.heappop(self._keys)
            head = self._head = self._buckets.pop(k)
            head.sort(reverse=True)
            self._head_key = k
        return head[-1]

    def pop(self) -> tuple:
        """The earliest entry, taken (the queue must not be empty)."""
        if not self._head:
            self.first()
        self._len -= 1
        entry = self._head.pop()
        if not self._head:
            self._head_key = None
        return entry


class _Later:
    """An entry ordered the other way round (the earliest bucket is sorted from the last
    entry to the first, so that the first is taken from its end)."""
    __slots__ = ("entry",)

    def __init__(self, entry: tuple):
        self.entry = entry

    def __lt__(self, other: "_Later") -> bool:
        return self.entry > other.entry
