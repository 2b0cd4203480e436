"""Hierarchical group quotas: sharing the pool among groups in one cycle (rules G6-G11).

Reference sections 3.5-3.7 (`GroupEntry.cpp`: `hgq_fairshare`, `hgq_allocate_surplus`,
`hgq_allocate_surplus_loop`, `hgq_recover_remainders`, `hgq_round_robin`,
`hgq_negotiate_with_all_groups`, `strict_enforce_quota`, `calculate_subtree_usage`).
The tree (G1, G2) and quota assignment (G4) live in `core.groups`; this module owns the
per-cycle working state and everything that happens after G4.

Where each rule is:

* G5  (per-cycle reset, demand, then G4)        `prepare_for_matchmaking`
* G6  (fair share, post-order)                   `fairshare`
* G7  (surplus shared by a node and its children) `allocate_surplus`
* G8  (the "by quota" / "equal" passes)          `allocate_surplus_loop`
* G9  (fractional remainders, round robin)      `recover_remainders`, `round_robin`
* G10 (allocation rounds, sort, group limit)    `negotiate_all_groups`, `group_sort_key`,
                                                 `group_limit`
* G11 (hard cap of non-surplus ancestors)        `strict_enforce_quota`,
                                                 `calculate_subtree_usage`

Faithfulness notes (all deliberate; they reproduce the C++ on IEEE doubles):

* `std::min(a, b)` is `b < a ? b : a` and `std::max(a, b)` is `a < b ? b : a`. Python's
  built-in `min`/`max` of two arguments behave the same way, NaN included; `_cmin`/`_cmax`
  spell it out where a NaN can actually occur.
* A division by zero gives inf/NaN as in C (`_fdiv`), `floor` passes NaN and inf through
  (`_floor`), and the group limit is converted to `int` as x86-64 does (`c_int`: NaN or out
  of range -> INT_MIN). This is observable: when every group is at its target, `maxdelta`
  is 0 and a group whose `max(allocated, quota)` exceeds its usage gets `0/0` -> NaN ->
  limit -2147483648 (recorded in fixture hgq_nested_hep_lep_surplus, round 2).
* HTCondor's `std::sort` calls (group order, round-robin order) are unstable: ties (alike
  groups have equal sort keys) come out in the order libstdc++'s introsort leaves them,
  not in input order, once there are more than 16 groups. We sort with the same
  algorithm (`core.cxxsort`), the same comparators (`group_order`, `ord_by_rr_time`) and
  the same input order (breadth-first `hgq_groups`; children then the parent).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Mapping


from . import classads
from .config import NegotiatorConfig
from .cxxsort import cxx_sort
from .groups import ROOT, GroupNode, GroupQuota, GroupTree

from .classads import DBL_MAX, FLT_MAX   # a failed GROUP_SORT_EXPR's key; an idle subtree's rr time
INT_MIN = -2147483648


# --------------------------------------------------------------------------- C helpers

def _cmin(a: float, b: float) -> float:
    """std::min(a, b): returns a unless b < a (so a NaN in `a` survives)."""
    return b if b < a else a


def _cmax(a: float, b: float) -> float:
    """std::max(a, b): returns a unless a < b (so max(0.0, NaN) is 0.0)."""
    return b if a < b else a


def _fdiv(a: float, b: float) -> float:
    """a / b with IEEE semantics (Python raises on a zero divisor)."""
    if b != 0.0:
        return a / b
    if a != a or a == 0.0:
        return math.nan
    return math.copysign(math.inf, a) * math.copysign(1.0, b)


def _floor(x: float) -> float:
    """C floor(): NaN and infinities come back unchanged (math.floor raises on them)."""
    if math.isnan(x) or math.isinf(x):
        return x
    return float(math.floor(x))


def c_int(x: float) -> int:
    """The implicit double -> int conversion of the HGQ callback argument.

    Truncates toward zero. NaN and values outside int's range give INT_MIN, which is what
    x86-64's cvttsd2si returns (C++ calls it undefined behaviour; the real negotiator logs
    `groupQuota= -2.14748e+09` in that case)."""
    if not (-2147483649.0 < x < 2147483648.0):   # also false for NaN
        return INT_MIN
    return int(x)


def _round_for_precision(x: float) -> float:
    """round_for_precision: floor(0.5 + x)."""
    return _floor(0.5 + x)


# --------------------------------------------------------------------------- state

@dataclass(eq=False)
class GroupAlloc:
    """Per-group working state for one cycle: the mutable half of HTCondor's GroupEntry.
    The configured half (name, static, config quota, flags, tree links) is `node`."""
    node: GroupNode
    quota: float = 0.0
    subtree_quota: float = 0.0
    requested: float = 0.0
    currently_requested: float = 0.0
    subtree_requested: float = 0.0
    allocated: float = 0.0
    usage: float = 0.0                 # direct WeightedResourcesUsed, refreshed per round
    subtree_usage: float = 0.0         # refreshed by calculate_subtree_usage (G11)
    rr: bool = False                   # served by round robin (G9) in the latest round
    rr_time: float = 0.0               # carried across cycles
    subtree_rr_time: float = 0.0
    sort_key: float = 0.0
    limit: float | None = None         # the last group limit computed in G10.7 (before int())
    parent: "GroupAlloc | None" = field(default=None, repr=False)
    children: list["GroupAlloc"] = field(default_factory=list, repr=False)

    @property
    def name(self) -> str:
        return self.node.name

    @property
    def accept_surplus(self) -> bool:
        return self.node.accept_surplus

    @property
    def static(self) -> bool:
        return self.node.static

    @property
    def config_quota(self) -> float:
        return self.node.config_quota

    @property
    def autoregroup(self) -> bool:
        return self.node.autoregroup

    @property
    def is_root(self) -> bool:
        return self.parent is None


@dataclass
class HgqOutcome:
    groups: dict[str, GroupAlloc]       # by group name (as in GROUP_NAMES; root "<none>")
    order: list[str]                    # group order of the last round (sorted by sort_key)
    rounds: int                         # allocation rounds run
    quotas_hash: dict[str, float]       # groupQuotasHash of the last round (name -> quota)
    rr_times: dict[str, float]          # rr_time per group after the cycle (next cycle's input)
    # every callback call: (round, group name, limit as a double, the int actually passed)
    calls: list[tuple[int, str, float, int]] = field(default_factory=list)
    # per round: (allocated_total, usage_total) as in "Round N totals"
    totals: list[tuple[float, float]] = field(default_factory=list)
    # per round: the negotiation order with each group's sort key ("Group g - sortkey= k")
    orders: list[list[tuple[str, float]]] = field(default_factory=list)


def build_allocs(tree: GroupTree, rr_times: Mapping[str, float] | None = None
                 ) -> dict[str, GroupAlloc]:
    """One GroupAlloc per tree node, in the tree's breadth-first order (`hgq_groups`),
    linked like the tree. `rr_time` comes from the previous cycle (default 0)."""
    rr_times = rr_times or {}
    allocs: dict[str, GroupAlloc] = {}
    for node in tree.nodes:
        g = GroupAlloc(node, rr_time=float(rr_times.get(node.name, 0.0)))
        if node.parent is not None:
            g.parent = allocs[node.parent.name]
            g.parent.children.append(g)
        allocs[node.name] = g
    return allocs


def prepare_for_matchmaking(tree: GroupTree, quotas: Mapping[str, GroupQuota],
                            usage: Callable[[str], float],
                            rr_times: Mapping[str, float] | None = None
                            ) -> dict[str, GroupAlloc]:
    """Rule G5 (`hgq_prepare_for_matchmaking`): reset, usage, demand; then G4.

    `quotas` is `GroupTree.assign_quotas(pool size, demand)`, the single implementation
    of G4, which also carries each group's demand (`requested`)."""
    allocs = build_allocs(tree, rr_times)
    for g in allocs.values():                    # (fresh: quotas and allocations are 0)
        q = quotas[g.name]
        g.usage = float(usage(g.name))
        g.requested = g.currently_requested = q.requested
        g.quota = q.effective_quota
        g.subtree_quota = q.subtree_quota
    return allocs


# --------------------------------------------------------------------------- G6-G8

def fairshare(g: GroupAlloc) -> float:
    """Rule G6 (`hgq_fairshare`), post-order. Returns the surplus this subtree could not
    place, for the parent to share."""
    g.allocated = _cmin(g.requested, g.quota)
    g.requested -= g.allocated
    g.subtree_requested = g.requested
    surplus = g.quota - g.allocated
    if not g.children:
        return surplus
    for c in g.children:
        # a non-accepting child still hands its unused quota up; it just does not claim
        # surplus from outside its own subtree
        surplus += fairshare(c)
        if c.accept_surplus:
            g.subtree_requested += c.subtree_requested
    return allocate_surplus(g, surplus)


def _peers(g: GroupAlloc) -> tuple[list[GroupAlloc], list[bool], list[float], list[float]]:
    """The participants of a surplus share at node g: its children, then g itself.

    The C++ temporarily makes g look like an accepting child (accept_surplus = true,
    subtree_quota = quota, subtree_requested = requested); we pass those values instead of
    mutating g. Returns (participants, accepts, weights, wants)."""
    parts = list(g.children) + [g]
    accepts = [c.accept_surplus for c in g.children] + [True]
    weights = [c.subtree_quota for c in g.children] + [g.quota]
    wants = [c.subtree_requested for c in g.children] + [g.requested]
    return parts, accepts, weights, wants


def allocate_surplus(g: GroupAlloc, surplus: float) -> float:
    """Rule G7 (`hgq_allocate_surplus`): share `surplus` among g's accepting children and
    g itself, push each child's share down its subtree, return what is left."""
    if surplus <= 0:
        return 0.0          # a negative surplus is discarded, not passed up
    if g.subtree_requested <= 0:
        return surplus
    parts, accepts, weights, wants = _peers(g)
    requested = g.subtree_requested
    allocated = [0.0] * len(parts)
    if surplus >= requested:
        # enough for everybody: each accepting participant gets exactly what it asks
        for j in range(len(parts)):
            if accepts[j] and wants[j] > 0:
                allocated[j] = wants[j]
        surplus -= requested
        requested = 0.0
    else:
        need = [wants[j] if (accepts[j] and wants[j] > 0) else 0.0 for j in range(len(parts))]
        surplus, requested = allocate_surplus_loop(True, weights, allocated, need, surplus, requested)
        surplus, requested = allocate_surplus_loop(False, weights, allocated, need, surplus, requested)
    for j, c in enumerate(g.children):
        if allocated[j] > 0:
            allocate_surplus(c, allocated[j])   # returns ~0: a child never gets more than it asks
    g.allocated += allocated[-1]
    g.requested -= allocated[-1]
    g.subtree_requested = requested             # what is still unmet in this subtree
    return surplus


def allocate_surplus_loop(by_quota: bool, weights: list[float], allocated: list[float],
                          need: list[float], surplus: float, requested: float
                          ) -> tuple[float, float]:
    """Rule G8 (`hgq_allocate_surplus_loop`). `weights[j]` is participant j's
    subtree_quota (own quota for the parent); `need` and `allocated` are updated in place.
    Returns the new (surplus, requested)."""
    while surplus > 0:
        z = 0.0
        for j in range(len(need)):
            if need[j] > 0:
                z += weights[j] if by_quota else 1.0
        if z <= 0:
            break           # by quota: only zero-quota claimants are left for the equal pass
        never_gt = True
        sumalloc = 0.0
        for j in range(len(need)):
            if need[j] > 0:
                n = weights[j] if by_quota else 1.0
                a = surplus * (n / z)
                if a > need[j]:
                    a = need[j]
                    never_gt = False
                allocated[j] += a
                need[j] -= a
                sumalloc += a
        surplus -= sumalloc
        requested -= sumalloc
        if never_gt or surplus < 0:
            surplus = 0.0   # all handed out; rounding jitter is dropped
    return surplus, requested


# --------------------------------------------------------------------------- G9

def recover_remainders(g: GroupAlloc) -> float:
    """Rule G9 (`hgq_recover_remainders`), only when NEGOTIATOR_USE_SLOT_WEIGHTS is false:
    make every allocation whole and hand the fractions out by round robin. Post-order;
    returns the surplus left for the parent."""
    surplus = g.allocated - _floor(g.allocated)
    g.allocated -= surplus
    g.requested += surplus
    g.allocated = _round_for_precision(g.allocated)
    g.requested = _round_for_precision(g.requested)
    g.subtree_requested = g.requested
    g.subtree_rr_time = g.rr_time if g.requested > 0 else DBL_MAX
    if not g.children:
        return surplus
    for c in g.children:
        surplus += recover_remainders(c)
        if c.accept_surplus:
            g.subtree_requested += c.subtree_requested
            if c.subtree_requested > 0:
                g.subtree_rr_time = _cmin(g.subtree_rr_time, c.subtree_rr_time)
    return round_robin(g, surplus)


def round_robin(g: GroupAlloc, surplus: float) -> float:
    """Rule G9 (`hgq_round_robin`): hand whole slots of `surplus` to g's accepting children
    and g itself, oldest `subtree_rr_time` first (then larger subtree_quota, then larger
    subtree_requested), at most `max(1, floor(S/outstanding))` each per pass. Returns what
    is left.

    The order is libstdc++'s std::sort of children-then-parent with `ord_by_rr_time`."""
    if g.subtree_requested != _floor(g.subtree_requested):
        g.subtree_requested = _floor(g.subtree_requested)
    if g.subtree_requested <= 0:
        return surplus
    if surplus < 1:
        return surplus
    parts, accepts, quotas, wants = _peers(g)
    rr_times = [c.subtree_rr_time for c in g.children] + [g.rr_time]
    requested = g.subtree_requested
    need = [0.0] * len(parts)
    outstanding = 0.0
    for j in range(len(parts)):
        if accepts[j] and wants[j] > 0:
            need[j] = wants[j]
            outstanding += 1
    def rr_less(ja: int, jb: int) -> bool:            # ord_by_rr_time
        if rr_times[ja] < rr_times[jb]:
            return True
        if rr_times[ja] > rr_times[jb]:
            return False
        if quotas[ja] > quotas[jb]:
            return True
        if quotas[ja] < quotas[jb]:
            return False
        return wants[ja] > wants[jb]
    order = cxx_sort(list(range(len(parts))), rr_less)
    allocated = [0.0] * len(parts)
    while surplus >= 1 and requested > 0:
        amax = _cmax(1.0, _floor(_fdiv(surplus, outstanding)))
        outstanding = 0.0     # recounted only over the participants this pass reached
        sumalloc = 0.0
        for j in order:
            if accepts[j] and need[j] > 0:
                a = _cmin(need[j], amax)
                allocated[j] += a
                need[j] -= a
                sumalloc += a
                surplus -= a
                requested -= a
                parts[j].rr = True
                if need[j] > 0:
                    outstanding += 1
                if surplus < amax:
                    break
        if sumalloc < 1:
            break             # defensive in the C++; cannot happen with whole numbers
    for j, c in enumerate(g.children):
        if allocated[j] > 0:
            round_robin(c, allocated[j])
    g.allocated += allocated[-1]
    g.requested -= allocated[-1]
    g.subtree_requested = requested
    return surplus


# --------------------------------------------------------------------------- G10, G11

def group_sort_key(config: NegotiatorConfig, alloc: GroupAlloc, in_use: float | None = None
                   ) -> float:
    """Rule G10.6: GROUP_SORT_EXPR evaluated in the group's sort ad, or FLT_MAX when it is
    not a number (booleans count as 0/1, like LookupFloat).

    The ad has AccountingGroup, GroupQuota, GroupResourcesAllocated, GroupResourcesInUse
    (the group record's own WeightedResourcesUsed, children excluded; `in_use`, default
    `alloc.usage`), SortExpr and SortExprString. The numbers are Assign()ed as doubles in
    the C++, so they are floats here too: with ints, `GroupResourcesInUse/GroupQuota`
    would be an integer division."""
    ad = classads.ClassAd({
        "AccountingGroup": alloc.name,
        "GroupQuota": float(alloc.quota),
        "GroupResourcesAllocated": float(alloc.allocated),
        "GroupResourcesInUse": float(alloc.usage if in_use is None else in_use),
        "SortExprString": config.group_sort_expr,
    })
    ad["SortExpr"] = classads.parse_expr(config.group_sort_expr)
    v = classads.as_number(classads.eval_attr(ad, "SortExpr"))
    return FLT_MAX if v is None else v


def calculate_subtree_usage(g: GroupAlloc, usage: Callable[[str], float]) -> float:
    """`calculate_subtree_usage`: subtree_usage = Σ live direct WeightedResourcesUsed over
    the subtree (children first, then the node's own, as the C++ adds them)."""
    total = 0.0
    for c in g.children:
        total += calculate_subtree_usage(c, usage)
    total += float(usage(g.name))
    g.subtree_usage = total
    return total


def strict_enforce_quota(config: NegotiatorConfig, g: GroupAlloc, slots: float,
                         usage: Callable[[str], float]) -> float:
    """Rule G11 (`strict_enforce_quota`, NEGOTIATOR_STRICT_ENFORCE_QUOTA, default true).

    Caps the increase over g's (round-start) usage by the room left under every
    ancestor-or-self that does not accept surplus: its *configured* static quota (or its
    assigned subtree_quota when dynamic) minus its live subtree usage.

    NB `g.usage` is the usage at the start of the allocation round, while subtree_usage is
    live: with GROUP_QUOTA_ROUND_ROBIN_RATE set (several iterations per round), what a
    capped group matched earlier in the same round is subtracted twice, and its limit
    stalls below its cap until the next round."""
    if not config.strict_enforce_quota:
        return slots
    root = g
    while root.parent is not None:
        root = root.parent
    calculate_subtree_usage(root, usage)      # usage changes with every negotiation
    new = slots - g.usage
    a: GroupAlloc | None = g
    while a is not None:
        if not a.accept_surplus:
            cap = a.config_quota if a.static else a.subtree_quota
            avail = cap - a.subtree_usage
            if avail < 0:
                avail = 0.0
            if new > avail:                   # NaN never compares: a NaN limit stays NaN
                new = avail
        a = a.parent
    return new + g.usage


def group_limit(config: NegotiatorConfig, g: GroupAlloc, n: float, maxdelta: float,
                usage: Callable[[str], float]) -> float:
    """Rule G10.7: the limit (absolute weighted usage) a group negotiates up to in one
    round-robin iteration `n` (a double; the callback gets c_int of it)."""
    target = _cmax(g.allocated, g.quota)          # a group may always use its own quota
    delta = _cmax(0.0, target - g.usage)
    # maxdelta can be 0 while delta > 0 (target uses max(allocated, quota), maxdelta does
    # not): 0/0 is NaN, and the C++ passes the NaN on.
    slots = g.usage + delta * _fdiv(n, maxdelta) if delta > 0 else target
    slots = _cmin(slots, target)
    if not config.use_slot_weights:
        slots = _floor(slots)
    return strict_enforce_quota(config, g, slots, usage)


def _group_order(autoregroup: bool, root: GroupAlloc) -> Callable[[GroupAlloc, GroupAlloc], bool]:
    """The comparator `group_order`: by sort key; under autoregroup the root after all."""
    def less(a: GroupAlloc, b: GroupAlloc) -> bool:
        if autoregroup:
            if a is root:
                return False
            if b is root:
                return True
        return a.sort_key < b.sort_key
    return less


def negotiate_all_groups(
    tree: GroupTree,
    config: NegotiatorConfig,
    quotas: Mapping[str, GroupQuota],
    usage: Callable[[str], float],
    has_submitters: Callable[[str], bool],
    negotiate: Callable[[GroupAlloc, int], None],
    now: float,
    rr_times: Mapping[str, float] | None = None,
    on_quotas: Callable[[dict[str, float]], None] | None = None,
) -> HgqOutcome:
    """G5 + G4, then rule G10 (`hgq_negotiate_with_all_groups`).

    * `quotas`: G4 from hgq_total_quota, with G5's demand (`GroupTree.assign_quotas`).
    * `usage(name)`: the LIVE direct WeightedResourcesUsed of a group record.
    * `has_submitters(name)`: whether the group still has submitter ads to negotiate (for
      the root under autoregroup this includes the autoregroup groups' ads).
    * `negotiate(group, limit)`: the per-group callback, called in sorted order with the
      limit converted to int (`c_int`).
    * `now`: the time stamped into rr_time (truncated to whole seconds, like time()).
    * `rr_times`: rr_time per group from the previous cycle (default 0).
    * `on_quotas(hash)`: told each round's groupQuotasHash before the callbacks run
      (the matchmaker's SubmitterGroupQuota comes from it).
    """
    allocs = prepare_for_matchmaking(tree, quotas, usage, rr_times)
    pool_size = quotas[ROOT].subtree_quota      # hgq_total_quota
    groups = list(allocs.values())               # breadth-first: hgq_groups
    root = allocs[ROOT]
    autoregroup = root.autoregroup
    global_accept_surplus = tree.global_accept_surplus
    maxrounds = max(1, int(config.group_quota_max_allocation_rounds))
    ninc = _cmax(1.0, float(config.group_quota_round_robin_rate))
    out = HgqOutcome(groups=allocs, order=[], rounds=0, quotas_hash={}, rr_times={})

    it = 0
    while it < maxrounds:
        it += 1
        # G10.1 reset the working values of this round
        out.quotas_hash = {}
        for g in groups:
            g.allocated = 0.0
            g.subtree_requested = 0.0
            g.rr = False
        # G10.2 fair share (G6-G8), whole slots when weights are off (G9)
        fairshare(root)
        if not config.use_slot_weights:
            recover_remainders(root)
        # G10.3 autoregroup: the root may use the whole pool. NB root.quota stays
        # overwritten for the later rounds of this cycle (G4 runs once per cycle), so
        # from round 2 on the root's fair share starts from the whole pool.
        if autoregroup:
            root.quota = pool_size
            root.allocated = pool_size
        # G10.4 quotas hash and maxdelta
        maxdelta = 0.0
        allocated_total = 0.0
        for g in groups:
            out.quotas_hash.setdefault(g.name, g.quota)
            allocated_total += g.allocated
            target = g.allocated if global_accept_surplus else g.quota
            maxdelta = _cmax(maxdelta, _cmax(0.0, target - g.usage))
        if on_quotas is not None:
            on_quotas(dict(out.quotas_hash))
        # G10.6 sort keys (live usage) and the starvation order; root last under autoregroup
        for g in groups:
            g.sort_key = group_sort_key(config, g, usage(g.name))
        order = cxx_sort(groups, _group_order(autoregroup, root))
        out.order = [g.name for g in order]
        out.orders.append([(g.name, g.sort_key) for g in order])
        # G10.7 the inner round-robin loop (once with the default rate)
        n = 0.0
        while True:
            n = _cmin(n + ninc, maxdelta)
            for g in order:
                if g.allocated <= 0:
                    continue
                if g.usage >= g.allocated and not config.consider_preemption:
                    continue
                if not has_submitters(g.name):
                    continue
                slots = group_limit(config, g, n, maxdelta, usage)
                g.limit = slots
                arg = c_int(slots)
                out.calls.append((it, g.name, slots, arg))
                negotiate(g, arg)
            if n >= maxdelta:
                break
        # G10.8 where are we relative to the allocation
        usage_total = 0.0
        for g in groups:
            g.usage = float(usage(g.name))
            usage_total += _cmin(g.usage, g.allocated)
            if g.usage < g.allocated:
                g.requested = g.usage     # could not use it all: let others have the rest
            else:
                g.requested += g.allocated
        out.totals.append((allocated_total, usage_total))
        out.rounds = it
        # G10.9 stop when everything allocated is in use
        if usage_total >= allocated_total:
            break

    # G9 end: groups served by round robin (or asking for nothing) go to the back of the line
    stamp = float(math.floor(now))
    for g in groups:
        if g.rr or g.requested <= 0:
            g.rr_time = stamp
    out.rr_times = {g.name: g.rr_time for g in groups}
    return out
