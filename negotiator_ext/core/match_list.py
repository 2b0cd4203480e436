"""What a matchmaking scan (`core.matchmaking`) works with and gives back: the slots and
resource requests it is handed, the slot classes, match groups and partitions it sorts
the slots into, a class's verdict for a request, the rejection counters of one scan
(M12) and the MatchList it returns (M4)."""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from typing import Any

from .classads import FLT_MAX

PRIO_PREEMPTION, RANK_PREEMPTION, NO_PREEMPTION = 0, 1, 2   # higher is better (4.6)

# Request attributes the negotiator inserts before matching (4.2), in the order it
# inserts them: the last three only for a submitter of a group with a quota
# (core.negotiation's _prepare_request).
REQUEST_EPHEMERALS = ("SubmitterNegotiatingGroup", "SubmitterAutoregroup", "SubmittorPrio",
                      "SubmitterUserPrio", "SubmitterUserResourcesInUse", "SubmitterGroup",
                      "SubmitterGroupResourcesInUse", "SubmitterGroupQuota")



# Rejection reasons in the negotiator's words, in its order of precedence (M12).
REASON_CONCURRENCY = "concurrency limit reached"


REASON_POLICY = "PREEMPTION_REQUIREMENTS == False"


REASON_SUBMITTER_LIMIT = "submitter limit exceeded"


REASON_NO_MATCH = "no match found"


@dataclass(eq=False, slots=True)
class Slot:
    """One slot ad in the cycle's slot list."""
    index: int                       # position in the collector's list (tie break)
    ad: Any                          # the classad2 ad (ephemeral attributes inserted)
    name: str
    weight: float                    # GetSlotWeight (rule A15)
    usage: Any                       # core.slots.SlotUsage, for the accountant
    partitionable: bool = False
    cp: bool = False                 # has a consumption policy (P4)
    current_user: str | None = None  # 4.5 step 8 (only with ConsiderPreemption)
    usage_user: str | None = None    # whoever holds the slot now (preempted by a match)
    claimer_schedd: str | None = None  # RemoteScheddName of a claimed p-slot
    claims_left: int = 1             # claim ids the negotiator can hand out
    live: tuple = ()                 # (attribute prefix, user) whose usage the ad shows (4.10)
    shared: bool = False             # `ad` is the caller's to keep: copied before a write
    live_req: bool = False           # its own Requirements read that usage
    removed: bool = False
    key: tuple = ()                  # slot class key
    key_id: int = -1                 # Matcher.intern of it
    static: tuple = ()               # job-independent rank values (pre, post, prank)
    order: Any = None                # ... as a class sorts its members (`_static_order`)
    class_keys: dict = field(default_factory=dict)   # name set -> its SlotClass
    version: int = 0                 # bumped when a CP p-slot's assets change
    rank_static: bool | None = None  # MY.Rank > MY.CurrentRank when no job can change it
    texts: dict = field(default_factory=dict)   # lower-case name -> expression text
    req_id: int = -1                 # what the slot's own Requirements see of it (interned)
    fams: list = field(default_factory=list)    # (family, expr, seen, outside) per expression
    views: dict = field(default_factory=dict)   # job-reached names -> their texts here
    # NEGOTIATOR_IGNORE_JOB_RANKS (core.static_ranks): the place in the sorted slot
    # list, the ranks the sort computed (pre, post), what a kept candidate adds up to
    sort_pos: int = -1
    fixed: tuple = ()
    scan_weight: float = 1.0
    # ALLOW_PSLOT_PREEMPTION (core.pslot_preemption): a dynamic slot its p-slot rolls up
    # (no candidate of its own, still in the slot list), the p-slot's children whose
    # claim ids were handed out, and the preemption its ad is changed for now
    rolled_up: bool = False
    spent: set = field(default_factory=set)
    preempt: Any = None
    preempt_weight: float = 0.0
    # the slot's memo, kept with its ad from pass to pass (a shadow loop's kept slot
    # ads, `Pool.slot_memos`), where the matcher keeps what the ad's own texts give
    # (scan_slot, profile_slot); None: nothing kept
    memo: dict | None = None
    # a long run's cycles (core.kept_classes): the cycle whose slot list the slot is in
    # (a token), and whether it was in the cycle before's list too, as it is
    stamp: Any = None
    carried: bool = False


@dataclass(eq=False, slots=True)
class Request:
    """One resource request: a run of consecutive idle jobs of one autocluster."""
    base_ad: Any                     # the first job's ad, as the schedd sent it
    jobs: list[str]                  # "<cluster>.<proc>" of the jobs in the run, in order
    autocluster: int
    group_key: tuple                 # what expressions can see of the job (no ephemerals)
    schedd: str
    submitter: str
    # group_key + the ephemeral values expressions see, interned: the request key
    eval_id: int = -1
    group_id: int = -1               # group_key interned (once a request)
    has_limits: bool | None = None   # its ad has a ConcurrencyLimits (once asked)
    # the ephemeral attributes (4.2) to insert before the ad is next evaluated, their
    # values in REQUEST_EPHEMERALS' order (its first five, or all eight): most requests
    # find their verdicts cached by `eval_id` and never need them
    pending: tuple | None = None
    # what the request's evaluation key is made of beside the values, worked out at its
    # first preparing: (size of the job names slots see, then; the indices of the
    # ephemerals an expression can read; the uniform-text token; the key's id when no
    # expression can read any of them)
    key_parts: tuple | None = None

    @property
    def ad(self) -> Any:
        """The ad with its ephemeral attributes inserted (what expressions evaluate)."""
        values = self.pending
        if values is not None:
            ad = self.base_ad
            for k, v in zip(REQUEST_EPHEMERALS, values):
                ad[k] = v
            self.pending = None
        return self.base_ad

    @property
    def job(self) -> str:
        return self.jobs[0]


def _static_order(s: Slot) -> tuple:
    return (-s.static[0], -s.static[1], -s.static[2], s.index)


def _sort_pos(s: Slot) -> int:
    return s.sort_pos


class SlotClass:
    """Slots no request of one partition can tell apart."""
    __slots__ = ("key", "rep", "id", "members", "live", "group", "start")

    def __init__(self, key: tuple, rep: Slot, id: int):
        self.key = key
        self.rep = rep
        self.id = id                 # its key interned; verdicts are cached by it
        self.members: list[Slot] = []   # sorted by static ranks
        self.live = 0
        self.group: MatchGroup | None = None
        self.start = 0               # every member before this index is removed

    def next_live(self, i: int) -> tuple[int, Slot] | None:
        """The first member from index `i` on that is not removed, and its index. The
        removed members before `start` are never looked at again: a slot once removed
        stays removed, so every list scanning the class skips the members taken so far
        in one step, not one by one (a new MatchList per request would otherwise pass
        every slot already matched in the class; on a 100,000-slot pool, most of the
        cycle). A look that starts at `start` moves it over the removed ones it passes."""
        m = self.members
        start = self.start
        if i < start:
            i = start
        n = len(m)
        while i < n:
            slot = m[i]
            if not slot.removed:
                return i, slot
            if i == start:
                start = self.start = i + 1
            i += 1
        return None

    def walk(self, i: int = 0):
        """The live members from index `i` on (`next_live`, asked again at each step, so
        the walk reads the members as they are then, as a list iterator does)."""
        while (got := self.next_live(i)) is not None:
            i, slot = got
            yield slot
            i += 1

    def remove(self, slot: Slot) -> None:
        """Take `slot` out of the members (a p-slot re-profiled): the indices after it
        move, so the start of the live members is found again by the next walk."""
        self.members.remove(slot)
        self.start = 0


def count_live(s: Slot, n: int) -> None:
    """Slot `s` counted `n` more times live (removed: -1; put back: +1) in each of its
    classes and their match groups (a held slot: in its match group)."""
    for got in s.class_keys.values():
        got.live += n
        if type(got) is SlotClass:
            got.group.live += n


class MatchGroup:
    """Slot classes the match test cannot tell apart (one view): one evaluation of the
    test serves them all.

    `held` are claimed slots that nothing can take when PREEMPTION_REQUIREMENTS is
    False: no job can rank-preempt them (MY.Rank > MY.CurrentRank is false whatever the
    job), and priority preemption is refused. They are never candidates; a scan only
    needs to know, for its rejection reason, whether one of them matches (M12). So
    they are kept as bare slots, not classes."""
    __slots__ = ("view", "rep", "classes", "held", "live")

    def __init__(self, view: int, rep: Slot):
        self.view = view
        self.rep = rep
        self.classes: list[SlotClass] = []
        self.held: list[Slot] = []
        self.live = 0               # live slots in classes and held


class Partition:
    """The slot classes for requests that see one set of slot names, by class key,
    and grouped by what the match test sees."""
    __slots__ = ("classes", "groups", "version", "maybe", "pending")

    def __init__(self):
        self.classes: dict[tuple, SlotClass] = {}
        self.groups: dict[int, MatchGroup] = {}
        self.version = 0            # bumped when a group comes or goes
        # request key -> (version, the groups not known to fail its match test)
        self.maybe: dict[int, tuple[int, list]] = {}
        # in a long run, slots waiting to join (core.kept_classes): new to the list, or
        # left out because they were removed when the partition was made or settled
        self.pending: list[Slot] = []


@dataclass(slots=True)
class Verdict:
    """What one request key makes of one slot class."""
    match: bool
    jrank: float = 0.0
    pre: float | None = None         # None: static per slot
    post: float | None = None
    rank_gt: bool = False            # MY.Rank > MY.CurrentRank
    rank_ge: bool = False            # MY.Rank >= MY.CurrentRank
    preq: bool | None = None         # PREEMPTION_REQUIREMENTS (None: not computed yet)
    prank: float | None = None


_NO_MATCH = Verdict(match=False)


@dataclass
class Rejections:
    """The rejection counters of one matchmakingAlgorithm call (M12)."""
    concurrency: int = 0
    policy: int = 0                  # rejPreemptForPolicy
    submitter_limit: int = 0
    concurrency_names: tuple[str, ...] = ()
    # Groups whose held classes (see MatchGroup) PREEMPTION_REQUIREMENTS = False
    # refuses if they match: their match test is only run when a reason is asked for.
    held: list = field(default_factory=list)
    matcher: Any = None
    request: Any = None
    submitter: str | None = None

    def policy_rejections(self) -> int:
        held, self.held = self.held, []
        req = self.request
        def eligible(s: Slot) -> bool:
            return (not s.removed and s.current_user != self.submitter
                    and s.claimer_schedd in (None, req.schedd))
        for group in held:
            if any(map(eligible, group.held)) and self.matcher.group_matches(req, group):
                self.policy += sum(map(eligible, group.held))
                break               # only "some candidate was refused" matters
        return self.policy

    def reason(self) -> str:
        if self.concurrency:
            names = ", ".join(self.concurrency_names)
            return f"concurrency limit {names} reached" if names else REASON_CONCURRENCY
        if self.policy_rejections():
            return REASON_POLICY
        if self.submitter_limit:
            return REASON_SUBMITTER_LIMIT
        return REASON_NO_MATCH


class MatchList:
    """The sorted candidates of one fresh scan (M4), popped from the top.

    Kept as a heap over slot classes: each class contributes its members in their
    pre-sorted order, one at a time, so popping k entries costs O(C + k log C), not a
    full sort. A scan adds its classes first and the heap is made of them at once when
    the list is first read (most lists are popped a few times, and have thousands of
    classes). An entry is the sort key's six values, then the slot, its class, its index
    there, the verdict, the state and the cost (`_entry`); the key ends with the slot's
    unique index, so entries never compare past it and the order is the same however
    the heap was made."""

    def __init__(self, rejections: Rejections):
        self._heap: list = []
        self._heaped = True
        self.rejections = rejections

    def add_class(self, cls: SlotClass, v: Verdict, state: int) -> None:
        got = cls.next_live(0)
        if got is not None:
            # the cost of every member (a class's members have the representative's
            # weight; a consumption-policy p-slot's cost depends on the request: None)
            rep = cls.rep
            self._heap.append(_entry(got[1], cls, got[0], v, state,
                                     None if rep.cp else rep.weight))
            self._heaped = False

    def _settle(self) -> list:
        if not self._heaped:
            heapq.heapify(self._heap)
            self._heaped = True
        return self._heap

    def _next(self, cls: SlotClass | None, i: int, v: Verdict, state: int,
              cost: float | None) -> None:
        """The class's next live member after index `i` onto the heap."""
        if cls is not None:
            got = cls.next_live(i + 1)
            if got is not None:
                heapq.heappush(self._heap, _entry(got[1], cls, got[0], v, state, cost))

    def peek(self) -> tuple[Slot, int, float] | None:
        """The entry `pop` would return next, left in place: (slot, preemption state,
        the PREEMPTION_RANK value it was sorted by)."""
        while heap := self._settle():
            e = heap[0]
            slot, state = e[6], e[10]
            if not slot.removed:
                return slot, state, -e[4]
            heapq.heappop(heap)
            self._next(*e[7:])
        return None

    def pop(self, refused: list[float] | None = None) -> tuple[Slot, int] | None:
        """The best entry left, taken off the list. `refused`: the least cost the
        submitter limit refused so far in this call, (without preempting, preempting);
        the limit only ever refuses more as the cost grows, so a class whose members all
        cost at least that is taken off whole, each of its entries refused in turn as the
        negotiator would refuse them (which is all it would do with them)."""
        while heap := self._settle():
            slot, cls, i, v, state, cost = heapq.heappop(heap)[6:]
            if refused is not None and cost is not None and cost >= refused[state != NO_PREEMPTION]:
                continue
            self._next(cls, i, v, state, cost)
            if slot.removed:
                continue
            return slot, state
        return None

    def push_slot(self, slot: Slot, v: Verdict, state: int) -> None:
        """Put a (reduced) consumption-policy p-slot back (P5)."""
        if not slot.removed:
            heapq.heappush(self._settle(), _entry(slot, None, 0, v, state, None))


class RankedMatchList(MatchList):
    """A MatchList whose plain free classes come from a rank order (`core.rank_order`):
    each is taken in, classified by `take` (its verdict, or None: left out), when the
    order reaches it, that is when its place is before the best entry in the heap. A
    place is never after the class's entry (`core.rank_order`), so the entries come off
    in the order the fresh scan's list gives them; an entry found before its place
    would break that, and is an error, not a wrong answer."""

    def __init__(self, rejections: Rejections, order: list, take):
        super().__init__(rejections)
        self._order = order
        self._pos = 0
        self._take = take

    def _settle(self) -> list:
        heap = super()._settle()
        order, pos = self._order, self._pos
        n = len(order)
        while pos < n:
            e = order[pos]
            if heap:
                # (a place and a heap entry are of different slots: decided by the
                # slot index at the latest)
                top = heap[0]
                ranks, at = e[:5], top[:5]
                if at < ranks or (at == ranks and top[5] < e[5].index):
                    break
            pos += 1
            cls = e[6]
            v = self._take(cls)
            if v is None:
                continue
            got = cls.next_live(0)
            if got is None:
                continue
            entry = _entry(got[1], cls, got[0], v, NO_PREEMPTION, cls.rep.weight)
            if entry[:6] < (*e[:5], e[5].index):
                raise RuntimeError(
                    f"internal error: slot {got[1].name} ranks before its class's place in "
                    f"the rank order ({entry[:6]} < {(*e[:5], e[5].index)})")
            heapq.heappush(heap, entry)
        self._pos = pos
        return heap


def _entry(slot: Slot, cls: SlotClass | None, i: int, v: Verdict, state: int,
           cost: float | None) -> tuple:
    static = slot.static
    pre, post = v.pre, v.post
    if pre is None:
        pre = static[0]
    if post is None:
        post = static[1]
    if state == NO_PREEMPTION:
        neg_prank = FLT_MAX
    else:
        neg_prank = -(v.prank if v.prank is not None else static[2])
    # slot.index is unique, so entries never compare past the key
    return (-pre, -v.jrank, -post, -state, neg_prank, slot.index, slot, cls, i, v, state,
            cost)


class _Accepted:
    """What a static-rank scan collects instead of a MatchList: the classes that passed."""
    __slots__ = ("accepted",)

    def __init__(self):
        self.accepted: list = []

    def add_class(self, cls: SlotClass, v: Verdict, state: int) -> None:
        self.accepted.append((cls, v, state))
