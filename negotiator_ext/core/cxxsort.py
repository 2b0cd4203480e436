"""libstdc++'s std::sort (introsort), so that ties come out where HTCondor's come out.

std::sort is not stable: with more than 16 elements, elements that compare equal leave it
in an order that depends on the algorithm, not on their input order. HTCondor sorts with
it where ties are common: the groups of each allocation round by GROUP_SORT_EXPR
(`group_order`, all equal when every group is alike), the round-robin of surplus
(`ord_by_rr_time`), the group names of GROUP_NAMES (`ci_less`), condor_userprio's
records. `cxx_sort(items, less)` gives the order libstdc++ (GCC) leaves `items` in when
sorted with the comparator `less`, given in the input order HTCondor sorts them in.
"""

from __future__ import annotations

from typing import Any, Callable

_S_THRESHOLD = 16


def cxx_sort(items: list, less: Callable[[Any, Any], bool]) -> list:
    """A copy of `items` sorted exactly as libstdc++'s std::sort would leave it."""
    a = list(items)
    n = len(a)
    if n > 1:
        _introsort_loop(a, 0, n, 2 * (n.bit_length() - 1), less)
        _final_insertion_sort(a, 0, n, less)
    return a


def _introsort_loop(a: list, first: int, last: int, depth: int, less) -> None:
    while last - first > _S_THRESHOLD:
        if depth == 0:
            _heap_sort(a, first, last, less)
            return
        depth -= 1
        cut = _partition_pivot(a, first, last, less)
        _introsort_loop(a, cut, last, depth, less)
        last = cut


def _partition_pivot(a: list, first: int, last: int, less) -> int:
    mid = first + (last - first) // 2
    _move_median_to_first(a, first, first + 1, mid, last - 1, less)
    # __unguarded_partition(first + 1, last, first)
    lo, hi, pivot = first + 1, last, a[first]
    while True:
        while less(a[lo], pivot):
            lo += 1
        hi -= 1
        while less(pivot, a[hi]):
            hi -= 1
        if not lo < hi:
            return lo
        a[lo], a[hi] = a[hi], a[lo]
        lo += 1


def _move_median_to_first(a: list, result: int, x: int, y: int, z: int, less) -> None:
    if less(a[x], a[y]):
        if less(a[y], a[z]):
            m = y
        elif less(a[x], a[z]):
            m = z
        else:
            m = x
    elif less(a[x], a[z]):
        m = x
    elif less(a[y], a[z]):
        m = z
    else:
        m = y
    a[result], a[m] = a[m], a[result]


def _final_insertion_sort(a: list, first: int, last: int, less) -> None:
    if last - first > _S_THRESHOLD:
        _insertion_sort(a, first, first + _S_THRESHOLD, less)
        for i in range(first + _S_THRESHOLD, last):
            _unguarded_linear_insert(a, i, less)
    else:
        _insertion_sort(a, first, last, less)


def _insertion_sort(a: list, first: int, last: int, less) -> None:
    for i in range(first + 1, last):
        if less(a[i], a[first]):
            a[first:i + 1] = [a[i]] + a[first:i]
        else:
            _unguarded_linear_insert(a, i, less)


def _unguarded_linear_insert(a: list, last: int, less) -> None:
    val = a[last]
    nxt = last - 1
    while less(val, a[nxt]):
        a[last] = a[nxt]
        last = nxt
        nxt -= 1
    a[last] = val


def _heap_sort(a: list, first: int, last: int, less) -> None:
    """std::__partial_sort(first, last, last): __heap_select (make_heap) + __sort_heap."""
    n = last - first
    for parent in range((n - 2) // 2, -1, -1):        # __make_heap
        _adjust_heap(a, first, parent, n, a[first + parent], less)
    while last - first > 1:                          # __sort_heap / __pop_heap
        last -= 1
        val = a[last]
        a[last] = a[first]
        _adjust_heap(a, first, 0, last - first, val, less)


def _adjust_heap(a: list, first: int, hole: int, length: int, val, less) -> None:
    top = hole
    child = hole
    while child < (length - 1) // 2:
        child = 2 * (child + 1)
        if less(a[first + child], a[first + child - 1]):
            child -= 1
        a[first + hole] = a[first + child]
        hole = child
    if (length & 1) == 0 and child == (length - 2) // 2:
        child = 2 * (child + 1)
        a[first + hole] = a[first + child - 1]
        hole = child - 1
    parent = (hole - 1) // 2                         # __push_heap
    while hole > top and less(a[first + parent], val):
        a[first + hole] = a[first + parent]
        hole = parent
        parent = (hole - 1) // 2
    a[first + hole] = val
