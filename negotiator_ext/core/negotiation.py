"""The pie: one negotiation cycle's allocation (reference sections 2.3-2.6, 3.7).

`Negotiation` holds one cycle's working state (the slot list, the submitters, the
accountant, the matches made so far) and has one method per function of the real
negotiator:

  negotiate_with_group  negotiateWithGroup: the pie spins (2.5), floors (2.4)
  negotiate             negotiate: one submitter's turn (2.6)
  find_match            matchmakingAlgorithm with the MatchList cache (4.4, 4.5)
  run                   the allocation step of the cycle (2.2 step 12): plain or HGQ

Everything is plain data in, decisions out: no files, no clock, no bindings.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from . import classads, consumption, hgq, schedd_limits
from .accountant import Accountant
from .classads import f32
from .config import INT_MAX
from .cxxsort import cxx_sort
from .groups import ROOT, GroupTree
from .job_queue import JobQueue, _c_mod
from .accountant import parse_concurrency_limits
from .time_limits import TimeBudget
from .match_list import (MatchList, NO_PREEMPTION, PRIO_PREEMPTION, REASON_NO_MATCH,
                         REASON_SUBMITTER_LIMIT, REQUEST_EPHEMERALS, Rejections, Request,
                         Slot)
from .matchmaking import Matcher, permits

DONE, RESUME = "done", "resume"
_LIMITS_EXPR = classads.parse_expr("MY.ConcurrencyLimits")
DBL_MAX = classads.DBL_MAX


# The request attributes the negotiator inserts before matching (4.2, REQUEST_EPHEMERALS)
# as expressions name them, lower-cased; see _prepare_request.
_LOWER_NAMES = tuple(n.lower() for n in REQUEST_EPHEMERALS)


def _has_limits(req: Request) -> bool:
    """Whether the request's job has a ConcurrencyLimits (not an ephemeral attribute:
    asked of its ad once a request)."""
    got = req.has_limits
    if got is None:
        got = req.has_limits = "ConcurrencyLimits" in req.base_ad
    return got


_REQUEST_CPUS = classads.parse_expr("MY.RequestCpus")
_REQUEST_MEMORY = classads.parse_expr("MY.RequestMemory")


def jobs_in_slot(request, offer) -> int:
    """jobsInSlot (NEGOTIATOR_DEPTH_FIRST): how many of the request's jobs fit in the
    matched slot as the negotiator reads them, min(Cpus / RequestCpus, Memory /
    RequestMemory) in integers, each request at least 1 (a slot without Cpus or Memory
    offers 1; the request's figures are evaluated against the slot, and default to 1)."""
    def offered(attr: str) -> int:
        v = classads.lookup_int32(classads.eval_attr(offer, attr))
        return 1 if v is None else v

    def asked(expr) -> int:
        v = classads.lookup_int32(classads.eval_match(expr, request, offer))
        return max(1 if v is None else v, 1)

    return min(_c_div(offered("Cpus"), asked(_REQUEST_CPUS)),
               _c_div(offered("Memory"), asked(_REQUEST_MEMORY)))


def _c_div(a: int, b: int) -> int:
    """C's integer division (truncates toward zero)."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


@dataclass(eq=False, slots=True)
class Submitter:
    """A submitter ad as the cycle uses it."""
    name: str
    schedd: str                     # ScheddName
    idle_jobs: int
    running_jobs: int
    last_heard_from: int
    group: str                      # assigned group (rule G3)
    queue: JobQueue
    job_prio: int | None = None
    starvation: float = 0.0
    # USE_GLOBAL_JOB_PRIOS: whether the ad came with a JobPrioArray (one Submitter per
    # value), and after the consolidation the (JOBPRIO_MIN, JOBPRIO_MAX) it negotiates for
    prio_array: bool = False
    prio_range: tuple[int, int] | None = None


def consolidate_job_prios(subs: list[Submitter]) -> list[Submitter]:
    """consolidate_globaljobprio_submitter_ads (USE_GLOBAL_JOB_PRIOS), on the sorted
    list: an ad from a JobPrioArray that follows an ad of the same submitter and schedd
    is folded into it, which then negotiates for the range of their priorities; the first
    of each run of them gets the range of its own. Ads without a JobPrioArray are left
    as they are (their schedd offers every job)."""
    out: list[Submitter] = []
    prev: Submitter | None = None
    for s in subs:
        if not s.prio_array:
            out.append(s)
            continue
        prio = s.job_prio if s.job_prio is not None else 0
        if prev is None or (s.name, s.schedd) != (prev.name, prev.schedd):
            s.prio_range = (prio, prio)
            prev = s
            out.append(s)
            continue
        lo, hi = prev.prio_range
        prev.prio_range = (min(lo, prio), max(hi, prio))
    return out


@dataclass(slots=True)
class Match:
    job: str                        # the request's job (as the MatchLog names it)
    assigned_job: str               # the job the schedd starts on the slot
    schedd: str
    submitter: str
    group: str                      # the submitter's group
    negotiating_group: str
    slot: str
    state: int
    preempting: str | None
    cost: float
    autocluster: int
    spin: int
    late: bool = False              # beyond where the real cycle's time limits stop it
    # ALLOW_PSLOT_PREEMPTION: the dynamic slots a p-slot's match preempts (their names;
    # `preempting` then reads "<N> dslots", as the MatchLog says)
    preempted_dslots: tuple = ()


@dataclass(slots=True)
class Rejection:
    job: str
    schedd: str
    submitter: str
    reason: str                     # the negotiator's own text (its MatchLog's)
    autocluster: int
    # what held the request back when it was a limit, whatever the text says (past its
    # submitter limit the negotiator only looks for slots to preempt by Rank, and says
    # "no match found" when it finds none): "submitter_limit" (the submitter's share of
    # its group's quota, or of the pool), "concurrency_limit", or None
    cause: str | None = None
    # the first of the request's jobs left unmatched (`job` names the request, as the
    # MatchLog does, and may have been matched before): the one `explain` explains
    unmatched_job: str | None = None


@dataclass(slots=True)
class LimitRecord:
    """What calculateSubmitterLimit logged for one submitter turn."""
    submitter: str
    negotiating_group: str
    spin: int
    floor_round: bool
    eup: float
    factor: float
    share: float
    limit: float
    limit_unclaimed: float
    usage: float
    ceiling_left: int


class Negotiation:
    def __init__(self, *, config, accountant: Accountant, groups: GroupTree, matcher: Matcher,
                 slots: list[Slot], submitters: list[Submitter], now: int,
                 min_slot_weight: float, pool_weight: float,
                 schedd_limits: "schedd_limits.Schedds | None" = None,
                 budget: "TimeBudget | None" = None):
        self.config = config
        self.acc = accountant
        self.groups = groups
        self.matcher = matcher
        self.slots = slots                      # the trimmed slot list
        # (dynamic slots rolled up into their p-slot are passed by, yet in the list)
        self.live_slots = sum(1 for s in slots if not s.removed or s.rolled_up)
        self.submitters = submitters
        self.now = int(now)
        self.min_slot_weight = min_slot_weight
        self.pool_weight = pool_weight
        self.matches: list[Match] = []
        self.rejections: list[Rejection] = []
        self.limits: list[LimitRecord] = []
        self.spins = 0
        self.quotas_hash: dict[str, float] = {}
        self._matchlist: tuple | None = None    # (cache key, MatchList)
        self._rejected_limits: set[str] = set()  # rejectedConcurrencyLimits
        # the schedds' limits on what they offer (M7): None leaves them out
        self.schedd_limits = schedd_limits
        self.handed: dict[str, int] = {}        # schedd -> matches handed this cycle
        # the real cycle's clock beside ours (core.time_limits): None leaves it out
        self.budget = budget
        self._caps: dict[int, tuple] = {}       # id(Submitter) -> its prefetched session
        # (submitter, schedd) -> (offers, knob, shadows) of the schedd's session whose
        # count ended the submitter's last turn (M7): what `negotiate` explains
        self.schedd_stops: dict[tuple[str, str], tuple[int, str, int]] = {}

    # ---- accountant views -----------------------------------------------------------

    def usage(self, name: str) -> float:
        return self.acc.weighted_usage(name)

    # ---- the allocation step (2.2 step 12) ------------------------------------------

    def run(self, quotas=None, rr_times=None):
        """The allocation step: without groups, the floor round and the pie over every
        submitter; with groups, the allocation rounds of `core.hgq` over `quotas` (G4
        with G5's demand, `GroupTree.assign_quotas`), each group's submitters by the
        same pie. Returns the HgqOutcome, or None without groups."""
        try:
            return self._run(quotas, rr_times)
        finally:
            if self.matcher._changed:
                self.matcher.restore_pslots()   # the cycle's end drops the MatchList

    def _run(self, quotas=None, rr_times=None):
        if not self.groups.enabled:
            below = self._below_floor(self.submitters)
            if below:
                self.negotiate_with_group(True, below)
            self.negotiate_with_group(False, list(self.submitters))
            return None
        by_group: dict[str, list[Submitter]] = {n.name: [] for n in self.groups.nodes}
        for s in self.submitters:
            by_group[s.group].append(s)
        if self.groups.root.autoregroup:
            for n in self.groups.nodes[1:]:
                if n.autoregroup:
                    by_group[ROOT].extend(by_group[n.name])

        def callback(g, slots: int) -> None:
            name = g.node.name
            neg_name = None if (self.groups.root.autoregroup and g.node.is_root) else name
            subs = by_group[name]
            below = self._below_floor(subs)
            if below:
                self.negotiate_with_group(True, below, slots, neg_name)
            self.negotiate_with_group(False, subs, slots, neg_name)

        return hgq.negotiate_all_groups(
            self.groups, self.config, quotas,
            usage=self.usage, has_submitters=lambda n: bool(by_group.get(n)),
            negotiate=callback, now=self.now, rr_times=rr_times,
            on_quotas=self._set_quotas_hash)

    def _set_quotas_hash(self, quotas: dict[str, float]) -> None:
        self.quotas_hash = dict(quotas)

    def _below_floor(self, subs: list[Submitter]) -> list[Submitter]:
        """findBelowFloorSubmitters (N3)."""
        out = []
        for s in subs:
            f = self.acc.floor(s.name)
            if f > 0 and self.usage(s.name) < f:
                out.append(s)
        return out

    # ---- negotiateWithGroup (2.5) ----------------------------------------------------

    def _normalization(self, subs: list[Submitter]) -> tuple[float, float]:
        """calculateNormalizationFactor: (max EUP, sum over distinct names of max/EUP)."""
        prios = {s.name: self.acc.priority(s.name) for s in subs}
        if not prios:
            return 0.0, 0.0
        mx = max(prios.values())
        return mx, sum(mx / p for p in prios.values())

    def _limits(self, s: Submitter, group: str | None, quota: float, groupusage: float,
                mx: float, norm: float, total: float, floor_round: bool):
        """calculateSubmitterLimit: (limit, limitUnclaimed, usage, share, EUP)."""
        eup = self.acc.priority(s.name)
        usage = self.usage(s.name)
        share = mx / (eup * norm)
        if self.config.ignore_user_priorities:
            limit = DBL_MAX
        else:
            limit = share * total - usage
        if limit < 0:
            limit = 0.0
        unclaimed = limit
        if group is not None:
            max_allowed = f32(f32(quota) - f32(groupusage))   # float arithmetic
            if max_allowed < 0:
                max_allowed = 0.0
            if unclaimed > max_allowed:
                unclaimed = max_allowed
        if not self.config.consider_preemption:
            limit = unclaimed
        if floor_round:
            limit = min(float(self.acc.floor(s.name)), limit)
        return limit, unclaimed, usage, share, eup

    def negotiate_with_group(self, floor_round: bool, subs: list[Submitter],
                             group_quota: float = INT_MAX, group: str | None = None) -> None:
        cfg = self.config
        spin = 0
        neg_group = group if group is not None else ROOT
        while True:
            spin += 1
            self.spins += 1
            ignore_limit = spin == 1 and cfg.consider_preemption
            groupusage = self.usage(group) if group is not None else 0.0
            if not ignore_limit and group is not None and groupusage >= group_quota:
                break
            self._matchlist = None
            if self.matcher._changed:
                self.matcher.restore_pslots()       # DeleteMatchList
            if not cfg.consider_preemption:
                subs[:] = [s for s in subs if s.idle_jobs > 0]
            mx, norm = self._normalization(subs)
            total = min(self.pool_weight, group_quota)
            # pieLeft: the sum of every ad's limit, without the floor cap (step 9)
            pie_left = 0.0
            for s in subs:
                lim, _, usage, _, _ = self._limits(s, group, group_quota, groupusage, mx, norm,
                                                   total, False)
                pie_left += lim
                s.starvation = usage / (usage + lim) if usage + lim != 0 else classads.FLT_MAX
            if not cfg.consider_preemption and pie_left <= 0:
                break
            if spin == 1:
                subs[:] = cxx_sort(subs, self._submitter_less)
                if cfg.use_global_job_prios:
                    subs[:] = consolidate_job_prios(subs)
            if self.schedd_limits is not None and cfg.prefetch_requests:
                # prefetchResourceRequestLists: every submitter's session starts now
                self._caps = {id(x): self._session(x) for x in subs}
            pie_orig, count_orig = pie_left, len(subs)
            i = 0
            while i < len(subs):
                s = subs[i]
                if (not ignore_limit and group is not None and self.usage(group) >= group_quota):
                    break
                limit, unclaimed, usage, share, eup = self._limits(
                    s, group, group_quota, groupusage, mx, norm, total, floor_round)
                if spin == 1:
                    self.acc.set_submitter_share(s.name, share, share * total)
                if limit > pie_left:
                    limit = pie_left
                ceiling = self.acc.ceiling(s.name)
                if ceiling < 0:
                    ceil_left = INT_MAX
                else:
                    ceil_left = max(0, ceiling - int(self.usage(s.name)))
                self.limits.append(LimitRecord(
                    submitter=s.name, negotiating_group=neg_group, spin=spin,
                    floor_round=floor_round, eup=eup, factor=self.acc.priority_factor(s.name),
                    share=share, limit=limit, limit_unclaimed=unclaimed, usage=usage,
                    ceiling_left=ceil_left))
                if s.idle_jobs > 0 and self.budget is not None:
                    self.budget.begin_turn(s.name, s.schedd, neg_group)
                if s.idle_jobs <= 0:
                    result = DONE
                elif spin > 1 and (limit < self.min_slot_weight or pie_left < self.min_slot_weight):
                    result = RESUME
                elif ceil_left == 0 or ceil_left < self.min_slot_weight:
                    result = DONE
                else:
                    result, pie_left = self.negotiate(s, neg_group, eup, limit,
                                                      unclaimed, ceil_left, ignore_limit, pie_left,
                                                      spin)
                if self.budget is not None:
                    self.budget.end_turn()
                if result == RESUME:
                    i += 1
                else:
                    del subs[i]
            if not ((pie_left < pie_orig or len(subs) < count_orig) and subs
                    and self.live_slots > 0 and not floor_round):
                break

    def _session(self, s: Submitter) -> tuple[int, str, int]:
        """A session of `s`'s schedd starting now (M7): (how many jobs it offers, the
        knob that sets that, the schedd's shadows)."""
        view = self.schedd_limits
        limits = view.limits(s.schedd)
        shadows = view.running.get(s.schedd, 0) + self.handed.get(s.schedd, 0)
        in_transfer = view.in_transfer.get((s.name, s.schedd), 0)
        return (*limits.session(shadows, in_transfer), shadows)

    def _submitter_less(self, a: Submitter, b: Submitter) -> bool:
        """submitterLessThan (N2): EUP, [JobPrio desc], starvation, LastHeardFrom % 1009;
        std::sort's comparator (ties: core.cxxsort)."""
        pa, pb = self.acc.priority(a.name), self.acc.priority(b.name)
        if pa < pb:
            return True
        if pa > pb:
            return False
        if self.config.use_global_job_prios:
            ja = a.job_prio if a.job_prio is not None else -2**31
            jb = b.job_prio if b.job_prio is not None else -2**31
            if ja > jb:
                return True
            if ja < jb:
                return False
        if a.starvation < b.starvation:
            return True
        if a.starvation > b.starvation:
            return False
        return _c_mod(a.last_heard_from, 1009) < _c_mod(b.last_heard_from, 1009)

    # ---- negotiate (2.6) -------------------------------------------------------------

    def negotiate(self, s: Submitter, neg_group: str, eup: float,
                  limit: float, unclaimed: float, ceil_left: int, ignore_limit: bool,
                  pie_left: float, spin: int) -> tuple[str, float]:
        cfg = self.config
        used = used_unclaimed = 0.0
        limited_by_limit = False
        rejected: set[int] = set()
        batch = cfg.resource_request_list_size if cfg.use_resource_request_counts else 1
        session = self._caps.pop(id(s), None) if self._caps else None
        if session is None and self.schedd_limits is not None:
            session = self._session(s)              # the session starts now
        cap = session[0] if session is not None else None
        offered = [0]
        for req, count in s.queue.offers(rejected, s.schedd, s.name, cap, batch, offered,
                                         s.prio_range):
            left = count
            while left > 0:
                if used >= limit:
                    if not ignore_limit:
                        return RESUME, pie_left
                    only_rank = True
                else:
                    only_rank = False
                if used >= ceil_left:
                    return RESUME, pie_left
                self._prepare_request(req, s, neg_group, eup)
                offered[0] += 1
                within = self.budget.request() if self.budget is not None else True
                found = self.find_match(req, s, only_rank, used, limit, used_unclaimed,
                                        unclaimed, pie_left)
                slot, state, rej = found
                if slot is None:
                    reason = rej.reason()
                    cause = ("concurrency_limit" if rej.concurrency else
                             "submitter_limit" if (only_rank or rej.submitter_limit)
                             and reason in (REASON_NO_MATCH, REASON_SUBMITTER_LIMIT) else None)
                    self.rejections.append(Rejection(
                        job=req.job, schedd=s.schedd, submitter=s.name, reason=reason,
                        autocluster=req.autocluster, cause=cause,
                        unmatched_job=req.jobs[count - left]
                        if 0 <= count - left < len(req.jobs) else None))
                    if batch > 1:
                        rejected.add(req.autocluster)
                    if rej.submitter_limit:
                        limited_by_limit = True
                        if not cfg.consider_preemption and not cfg.use_slot_weights:
                            return RESUME, pie_left
                    break
                job = req.jobs[count - left]    # the run's next unmatched job
                match = self._commit(req, job, s, slot, state, neg_group, spin, not within)
                cost = match.cost
                used += cost
                if match.preempting is None:
                    used_unclaimed += cost
                pie_left -= cost
                # NEGOTIATOR_DEPTH_FIRST: the negotiator counts the jobs the schedd is
                # expected to fit into what it matched as offered (they stay idle, for
                # the schedd to start there; a later session offers them again)
                left -= jobs_in_slot(req.ad, slot.ad) if cfg.depth_first else 1
            else:
                s.queue.run_used_up()
        if s.queue.capped:
            self.schedd_stops[(s.name, s.schedd)] = session
        if used >= limit or limited_by_limit:
            return RESUME, pie_left
        return DONE, pie_left

    def _prepare_request(self, req: Request, s: Submitter, neg_group: str, eup: float) -> None:
        """The request's ephemeral attributes (4.2), and its evaluation key."""
        groups = self.groups
        autoregroup = bool(groups.root.autoregroup and neg_group == ROOT)
        if groups.enabled and s.group in self.quotas_hash:
            values = (neg_group, autoregroup, eup, eup, self.usage(s.name),
                      s.group, self.usage(s.group), self.quotas_hash[s.group])
        else:
            values = (neg_group, autoregroup, eup, eup, self.usage(s.name))
        req.pending = values            # inserted when the ad is next evaluated
        # the values an expression can read: the slots' (TARGET.SubmitterX) and the
        # job's own (the job lacks them, so its key lists them among what it reaches).
        # Which ones is the same at every preparing of the request while the names the
        # slots see stay the same (they only grow), and so is the key when none is read.
        matcher = self.matcher
        seen = matcher.job_names_seen_by_slots
        parts = req.key_parts
        if parts is None or parts[0] != len(seen):
            group = req.group_id
            if group < 0:       # (a request is prepared once a job: its key hashed once)
                group = req.group_id = matcher.intern(req.group_key)
            own = req.group_key[1]
            visible = tuple(i for i, n in enumerate(_LOWER_NAMES) if n in seen or n in own)
            # (with the slot texts its partition leaves out: the same key means the same
            # answers in any cycle, core.match_memory)
            token = matcher.uniform_token(req.group_key[1:3])
            plain = None if visible else matcher.intern(("request", group, (), token))
            parts = req.key_parts = (len(seen), visible, token, plain)
        if parts[3] is not None:
            req.eval_id = parts[3]
            return
        extra = tuple((REQUEST_EPHEMERALS[i], values[i]) for i in parts[1] if i < len(values))
        req.eval_id = matcher.intern(("request", req.group_id, extra, parts[2]))

    # ---- matchmakingAlgorithm with the MatchList cache (4.4, 4.5) --------------------

    def find_match(self, req: Request, s: Submitter, only_rank: bool, used: float,
                   limit: float, used_unclaimed: float, unclaimed: float, pie_left: float):
        cfg = self.config
        self._rejected_limits.clear()   # the names a rejection of this call reports
        # Concurrency limits first (M3): a ConcurrencyLimits that is a string on its own
        # is checked once for the request; one that needs the slot, per candidate.
        per_candidate = False
        if _has_limits(req):
            text = classads.eval_attr(req.ad, "ConcurrencyLimits")
            if isinstance(text, str):
                if self._limits_rejected(text):
                    rej = Rejections(concurrency=1,
                                     concurrency_names=tuple(sorted(self._rejected_limits)))
                    return None, None, rej
            else:
                per_candidate = True
        check = (lambda slot: self._candidate_limits_rejected(req, slot)) if per_candidate else None

        # The cache serves the next request of the same autocluster, submitter and
        # schedd whatever its ephemeral attributes have become since (M4). (EUP does not
        # change within a cycle, so the cached priority always agrees.)
        cache_key = (req.autocluster, only_rank, s.name, s.schedd)
        if (self._matchlist is not None and self._matchlist[0] == cache_key
                and self._cache_still_valid(req, self._matchlist[1])):
            ml: MatchList = self._matchlist[1]
            # The least cost the submitter limit refused in this call (without
            # preempting, preempting): within the call the limits and usage stand still,
            # so every entry costing as much is refused too, and a class of such entries
            # is taken off the list whole (the negotiator refuses them one by one: one
            # pop each, millions on a large pool). Not with per-candidate concurrency
            # limits, whose rejections are reported by name.
            refused = [math.inf, math.inf] if check is None else None
            while True:
                got = ml.pop(refused)
                if got is None:
                    ml.rejections.concurrency_names = tuple(sorted(self._rejected_limits))
                    return None, None, ml.rejections
                slot, state = got
                if check is not None and check(slot):
                    continue
                cost = self._cost(req, slot)
                if state != NO_PREEMPTION and permits(used, limit, cost):
                    return slot, state, ml.rejections
                if permits(used_unclaimed, unclaimed, cost):
                    return slot, state, ml.rejections
                ml.rejections.submitter_limit += 1
                if refused is not None:
                    kind = state != NO_PREEMPTION
                    refused[kind] = min(refused[kind], cost)
        self._matchlist = None
        keep = cfg.matchlist_caching and req.autocluster != -1
        ml = self.matcher.scan(req, s.name, only_rank, used, limit, used_unclaimed, unclaimed,
                               lambda slot: self._cost(req, slot), check, keep)
        got = ml.pop()
        if keep:
            self._matchlist = (cache_key, ml)
        if got is None:
            ml.rejections.concurrency_names = tuple(sorted(self._rejected_limits))
            return None, None, ml.rejections
        return got[0], got[1], ml.rejections

    def _cache_still_valid(self, req: Request, ml: MatchList) -> bool:
        """cache_still_valid (M4): with PREEMPTION_REQUIREMENTS_STABLE = False the next
        entry, if it preempts by priority, must still pass PREEMPTION_REQUIREMENTS (and
        an empty list is not valid); with PREEMPTION_RANK_STABLE = False a preempting
        next entry must still have the PREEMPTION_RANK it was sorted by."""
        cfg = self.config
        req_stable, rank_stable = cfg.preemption_requirements_stable, cfg.preemption_rank_stable
        if req_stable and rank_stable:
            return True
        top = ml.peek()
        if top is None:
            return req_stable
        slot, state, prank = top
        if (not req_stable and state == PRIO_PREEMPTION
                and not self.matcher.preemption_allowed(req, slot)):
            return False
        if (not rank_stable and state != NO_PREEMPTION
                and self.matcher.preemption_rank(req, slot) != prank):
            return False
        return True

    # ---- concurrency limits (4.11) ----------------------------------------------------

    def _limits_rejected(self, text: str) -> bool:
        """rejectForConcurrencyLimits (M10): a limit the match would take past its
        maximum (or one already below zero) rejects; invalid names are ignored. The
        rejected names are kept for the message, as the negotiator keeps them."""
        for name, amount in parse_concurrency_limits(text.lower()):
            count = self.acc.limits.get(name, 0.0)
            if count < 0:
                return True
            if count + amount > self.config.concurrency_limit_max(name):
                self._rejected_limits.add(name)
                return True
        return False

    def _candidate_limits_rejected(self, req: Request, slot: Slot) -> bool:
        """Per-candidate limits (M3, 4.5 step 12): ConcurrencyLimits evaluated with the
        slot as TARGET; only a string is checked."""
        text = self._limits_text(req, slot)
        return text is not None and self._limits_rejected(text)

    def _limits_text(self, req: Request, slot: Slot) -> str | None:
        """The job's ConcurrencyLimits evaluated against the slot, lower-cased (what the
        negotiator stores as the slot's MatchedConcurrencyLimits), or None."""
        if not _has_limits(req):
            return None
        v = classads.eval_match(_LIMITS_EXPR, req.ad, slot.ad)
        return v.lower() if isinstance(v, str) else None

    def _cost(self, req: Request, slot: Slot) -> float:
        if slot.preempt is not None:
            return slot.preempt_weight      # the p-slot with its preempted dslots
        if slot.cp:
            return consumption.deduct(req.ad, slot.ad, test=True)
        return slot.weight

    # ---- after a match (4.9) ---------------------------------------------------------

    def _commit(self, req: Request, job: str, s: Submitter, slot: Slot, state: int,
                neg_group: str, spin: int, late: bool) -> Match:
        """The match made (4.9): charged, its slot taken, recorded; `late`: beyond where
        the real cycle's time limits stop it."""
        s.queue.matched.add(job)
        preempting = slot.usage_user
        limits = self._limits_text(req, slot) or ""    # MatchedConcurrencyLimits (4.9)
        dslots: tuple = ()
        if slot.preempt is not None:
            # ALLOW_PSLOT_PREEMPTION: the p-slot's ad as changed, charged at its weight
            dslots = tuple(n or "" for n in slot.preempt.names)
            preempting = f"{len(dslots)} dslots"
            cost = slot.preempt_weight
            self.acc.add_match(s.name, replace(slot.usage, weight=cost), self.now,
                               concurrency_limits=limits)
            self._remove(slot)
        elif slot.cp:
            cost = consumption.deduct(req.ad, slot.ad, test=False)   # for real (P5)
            slot.claims_left -= 1
            self.acc.add_match(s.name, slot.usage, self.now, match_cost=cost,
                               concurrency_limits=limits)
            self.matcher.reprofile(slot)
            if slot.claims_left <= 0:
                self._remove(slot)
            elif self._matchlist is not None:
                # returnPslotToMatchList: back into the list if it still matches (P5)
                v = self.matcher.verdict(req, self.matcher.class_of(slot, req.group_key[1:3]))
                if v.match:
                    self._matchlist[1].push_slot(slot, v, NO_PREEMPTION)
        else:
            cost = slot.weight
            self.acc.add_match(s.name, slot.usage, self.now, concurrency_limits=limits)
            self._remove(slot)
        self.handed[s.schedd] = self.handed.get(s.schedd, 0) + 1
        match = Match(
            job=req.jobs[0], assigned_job=job, schedd=s.schedd, submitter=s.name,
            group=s.group, negotiating_group=neg_group, slot=slot.name, state=state,
            preempting=preempting, cost=cost, autocluster=req.autocluster, spin=spin,
            late=late, preempted_dslots=dslots)
        self.matches.append(match)
        return match

    def _remove(self, slot: Slot) -> None:
        if not slot.removed:
            self.matcher.remove(slot)
            self.live_slots -= 1
