"""Matchmaking for one resource request (reference section 4).

`Matcher.scan(...)` is `matchmakingAlgorithm`: the fresh scan over the slot list (4.5),
the preemption classification (4.5 steps 8-10, 4.6), the submitter-limit checks (M5),
the sort keys (M6); the MatchList (M4) it returns is popped by `core.negotiation`,
whose per-submitter loop calls it.

Speed: the negotiator evaluates every expression for every job x slot pair. Here an
expression is evaluated once per distinct pair of inputs it can see. Ads are looked at
through their attributes' texts (slots: `Slot.texts`; jobs: `core.adtext`), and what an
expression reaches is found by `Projector`, cached by the ads' expression structure.

* A *request key* is what any expression can see of a job: the texts of the job
  attributes named by the slots' expressions (and by the negotiator's rank and
  preemption expressions), plus the job's own Requirements/Rank and what they reach.
  Jobs with equal keys form one autocluster.
* A *slot class* groups slots that look the same to every job-dependent expression of
  the requests of one *partition* (requests reaching the same slot names): equal texts
  of every slot attribute those expressions reach. Expressions that see no job
  attribute (the default NEGOTIATOR_POST_JOB_RANK, PREEMPTION_RANK) are evaluated once
  per slot and kept as the slot's static ranks; they do not split classes. Names every
  slot has the same literal for do not split partitions.
* A *match group* gathers the classes the match test (both Requirements) cannot tell
  apart; the test runs once per (request key, group), and a scan leaves a failing
  group at its first candidate and skips it in later scans of the same request key.

A fresh scan then costs one match test per (request key, match group) and one rank
evaluation per (request key, matching slot class); the MatchList is a merge of the
classes' members, each class pre-sorted by its static ranks. The sorting of the slots
into partitions, classes and groups is in `core.slot_classes`, what each slot's
expressions reach and its static ranks in `core.slot_profile` (the Matcher's bases).
"""

from __future__ import annotations

import math
import operator
from itertools import repeat
from typing import Any, Callable, Iterable

from . import adtext, classads, consumption, pslot_preemption, static_ranks
from .classads import DBL_MAX, f32
from .config import priority_preemption_off
from .match_list import (_NO_MATCH, NO_PREEMPTION, PRIO_PREEMPTION, RANK_PREEMPTION,
                         MatchGroup, MatchList, RankedMatchList, Rejections, Request,
                         Slot, SlotClass, Verdict, _Accepted)
from .match_memory import MatchMemory, reads_the_clock
from .negotiator_attrs import live_remote_usage
from .projection import Projector, closure, reach_back
from .rank_order import RankOrders
from .slot_classes import SlotClasses
from .slot_profile import SlotProfiles, memo_token
from .slots import slot_weight

STATE_NAMES = {PRIO_PREEMPTION: "Priority", RANK_PREEMPTION: "Rank", NO_PREEMPTION: "NoPreemption"}

# symmetricMatch in one evaluation, with MY = job and TARGET = slot. ifThenElse takes
# a condition the way EvalExprToBool does (true or a non-zero number; UNDEFINED, ERROR
# or a string give no true branch), and TARGET.Requirements is the slot's Requirements
# evaluated in the slot with the job as its TARGET, as in a MatchClassAd.
MATCH_TEST = "ifThenElse(MY.Requirements, ifThenElse(TARGET.Requirements, true, false), false)"
_MATCH_TEST = classads.parse_expr(MATCH_TEST)


# Slot attributes whose value is the current user's usage as it stands at the moment of
# evaluation (4.10: HTCondor inserts them as function calls into the accountant).
LIVE_NAMES = frozenset(("remoteuserresourcesinuse", "remotegroupresourcesinuse"))


_memo = operator.attrgetter("memo")


def _memo_get(memo: dict | None, key):
    return memo.get(key) if memo is not None else None



_JOB_OWN = frozenset(("requirements", "rank", "concurrencylimits"))
_JOB_REQ = frozenset(("requirements", "concurrencylimits"))


class Matcher(SlotClasses, SlotProfiles):
    """Per-cycle evaluation caches and the matchmaking algorithm."""

    # a fresh scan reads its plain free classes from a rank order (core.rank_order)
    # where one serves; False: every scan classifies every class (the tests compare)
    rank_orders_on = True

    def __init__(self, config, job_has_attr: Callable[[str], bool],
                 memory: MatchMemory | None = None):
        if not classads.match_semantics_enabled():
            raise RuntimeError("classad2 is not evaluating with HTCondor's match semantics "
                               "(unscoped names looked up in TARGET): call "
                               "negotiator_ext.adapters.classad_semantics.enable() first")
        self._job_has_attr = job_has_attr
        parse = classads.parse_expr
        self.req_expr = parse("MY.Requirements")
        self._matches: dict[tuple, bool] = {}
        self._group_keys: dict[tuple, tuple] = {}
        self._ids: dict[Any, int] = {}
        self._constant_rank: dict[int, float] = {}      # request key -> its literal Rank
        self._ranks: dict[tuple, float] = {}            # (request key, rank view) -> Rank
        self._statics: dict[tuple, Any] = {}
        self._sorted_names: dict[frozenset, tuple] = {}
        self._norm: dict[tuple, tuple] = {}
        self._name_sets: dict[frozenset, frozenset] = {}   # _normalized's, one of each
        self._slot_fams: dict[tuple, tuple] = {}    # scan_slot: shared per-slot families
        self._fams_seen: set[int] = set()   # ... whose outside names the cycle took
        self._plans: dict[tuple, tuple] = {}        # profile_slot: per shared families
        self._uniform_names: dict[str, bool] = {}
        self._uniform_text: dict[str, str | None] = {}    # (of the uniform names)
        self._uniform_tokens: dict[tuple, int] = {}
        self._plain_texts: list[dict] | None = None
        self._tally = None          # a long run's TextTally of them (core.match_memory)
        self.rank_gt = parse("MY.Rank > MY.CurrentRank")
        self.rank_ge = parse("MY.Rank >= MY.CurrentRank")
        self.job_rank = parse("MY.Rank")
        self.pre = parse(config.pre_job_rank) if config.pre_job_rank else None
        self.post = parse(config.post_job_rank) if config.post_job_rank else None
        self.preq = parse(config.preemption_requirements) if config.preemption_requirements else None
        self.prank = parse(config.preemption_rank) if config.preemption_rank else None
        # PREEMPTION_REQUIREMENTS = False (the default): no priority preemption at all
        self.preq_false = priority_preemption_off(config)
        # NEGOTIATOR_IGNORE_JOB_RANKS: static ranks, scans stop at the limit
        # (core.static_ranks; the cycle sorts the slots)
        self.static_ranks = bool(config.ignore_job_ranks)
        self._config = config
        # ALLOW_PSLOT_PREEMPTION (core.pslot_preemption): the p-slots with dynamic slots
        # (set by classify), the slots by name, the p-slot ads changed for a match
        self.pslot_preemption = pslot_preemption_modelled(config)
        self.pslots: list[Slot] = []
        self.by_name: dict[str, Slot] = {}
        self._changed: list[Slot] = []
        self._pslot_failed: set[tuple] = set()
        # the slot-side expressions, each with the names it mentions (4.5, 4.6, 4.8)
        # what scan_slot keeps in a slot's memo depends on these texts (and the ad)
        self._memo_key = memo_token(("scan", config.pre_job_rank, config.post_job_rank,
                                     config.preemption_requirements, config.preemption_rank,
                                     tuple(sorted(config.match_exprs.items()))))
        self._profiles: dict[tuple, tuple] = {}     # profile_slot: one of each kept
        self._families = [(fam, e, classads.names_in(e)) for fam, e in (
            ("req", self.req_expr), ("rankcond", self.rank_gt), ("pre", self.pre),
            ("post", self.post), ("preq", self.preq), ("prank", self.prank)) if e is not None]
        self.values = adtext.TextValues()     # attribute texts: names and literal values
        self._verdicts: dict[tuple, Verdict] = {}
        self._alike_verdicts: dict[tuple, Verdict] = {}   # one Verdict per set of values
        self.job_names_seen_by_slots: set[str] = set()
        self.slots: list[Slot] = []
        self.partitions: dict = {}
        self._job_projector: Projector | None = None
        self._projectors: dict[frozenset, Projector] = {}
        # a long run's memory (core.match_memory): the content-keyed caches above, as
        # the cycles before left them; `_serial` keeps consumption-policy keys apart;
        # the slot classes the last cycle left, and those this one leaves
        # (core.kept_classes)
        self._serial = 0
        self.rank_orders = RankOrders()     # the cycle's (core.rank_order)
        self._memory: MatchMemory | None = None
        self._kept = None
        self._next = None
        self._carry_key = None
        self._lazy_walk = False
        self.nan_statics = True         # (until the slots are sorted: build_classes)
        self._stamp = None
        if memory is not None:
            self._adopt(memory, config)
        # user -> (its usage, its group's usage or None) as they stand now: what a claimed
        # slot's RemoteUserResourcesInUse and RemoteGroupResourcesInUse (and slot<N>_
        # copies, `live_names`) evaluate to (4.10). Set by the cycle when an expression
        # evaluated on claimed slots reads them; None: nothing does.
        self.live_remote: Callable[[str], tuple] | None = None
        self.live_names: frozenset = LIVE_NAMES
        self._live_views: set[int] = set()     # match-test views that read live usage

    # ---- what expressions can see ---------------------------------------------------

    def _adopt(self, memory: MatchMemory, config) -> None:
        exprs = (config.pre_job_rank, config.post_job_rank, config.preemption_requirements,
                 config.preemption_rank, *config.match_exprs.values())
        if any(isinstance(e, str) and reads_the_clock(e) for e in exprs):
            memory.dropped = True       # the config's own expressions read the clock
        memory.for_cycle((self._memo_key, self.static_ranks, self.preq_false))
        self._memory = memory
        self._kept, memory.carry = memory.carry, None
        self._slot_fams = memory.slot_fams
        self._serial = memory.serial
        self.values = memory.values
        self._ids = memory.ids
        self._verdicts = memory.verdicts
        self._alike_verdicts = memory.alike_verdicts
        self._matches = memory.matches
        self._ranks = memory.ranks
        self._constant_rank = memory.constant_rank
        self.rank_orders = RankOrders(memory.rank_orders)
        self._statics = memory.statics
        self._projectors = memory.projectors
        self._sorted_names = memory.sorted_names
        self._tally = memory.tally
        self._name_sets = memory.name_sets

    def intern(self, key) -> int:
        """A small int standing for a (large) key, so caches hash ints, not tuples."""
        got = self._ids.get(key)
        if got is None:
            got = self._ids[key] = len(self._ids)
        return got

    def _projector(self, roots: frozenset, finish) -> Projector:
        """A Projector over `roots`, one per root set (and summary kind)."""
        key = (roots, finish)
        p = self._projectors.get(key)
        if p is None:
            names_of = self.values.names
            p = self._projectors[key] = Projector(
                roots, names_of, lambda read: finish(read, roots, names_of))
        return p

    @staticmethod
    def _reached_back(read, roots, names_of):
        return frozenset(reach_back(read, roots, names_of))

    def job_slot_names(self) -> set[str]:
        """Every slot name some job's expressions reach (the union over job keys)."""
        out: set[str] = set()
        for key in self._group_keys.values():
            out |= key[1]
        return out

    @staticmethod
    def _seen_outside(read, roots, names_of):
        seen, outside = closure(read, roots, names_of)
        return frozenset(seen), frozenset(outside)

    @staticmethod
    def _reached(read, roots, names_of):
        return tuple(sorted(closure(read, roots, names_of)[0]))

    def job_names_reached_back(self, slots: list[Slot], slot_names: set[str]) -> set[str]:
        """Job attribute names the slots' attributes `slot_names` reach when evaluated
        for a job, that the slots' own expressions do not already name. The cycle adds
        them to what slots see of jobs (add_job_names) and keys the jobs again, until
        nothing new is reached (a fixed point: slot -> job -> slot -> ... chains)."""
        roots = frozenset(slot_names)
        p = self._projector(roots, self._reached_back)
        token = memo_token(("reached back", roots))     # (a slot's memo keeps it)
        # each slot's answer, kept in its memo: asked of every memo at once, worked out
        # for the slots whose memo lacks it (or that have none)
        memos = list(map(_memo, slots))
        gots = list(map(_memo_get if None in memos else dict.get, memos, repeat(token)))
        i = -1
        while True:
            try:
                i = gots.index(None, i + 1)
            except ValueError:
                break
            s = slots[i]
            got = gots[i] = p(s.texts.get)
            if s.memo is not None:
                s.memo[token] = got
        out: set[str] = set()
        for got in set(gots):                           # each distinct answer once
            out |= got
        return {n for n in out if "." not in n} - self.job_names_seen_by_slots

    def add_job_names(self, names: set[str]) -> None:
        """More job names that slots see: job keys must be computed again."""
        self.job_names_seen_by_slots |= names
        self._job_projector = None
        self._group_keys = {}

    def settle_job_keys(self, slots: list[Slot], job_lists: Iterable[list]) -> None:
        """Slot -> job -> slot chains (START = TARGET.Wants, Wants = TARGET.Memory >
        100): while the job attributes the slots evaluate reach job names no slot
        expression names, add them and key every job again, until nothing new is
        reached. `job_lists`: lists of (order, job key, job texts) entries, whose keys
        are replaced in place."""
        while True:
            more = self.job_names_reached_back(slots, self.job_slot_names())
            if not more:
                return
            self.add_job_names(more)
            for jobs in job_lists:
                jobs[:] = [(order, self.job_key(dict(row)), row) for order, _, row in jobs]

    def job_key(self, texts: dict) -> tuple:
        """What any expression can see of a job (given as its attribute texts): the job
        attributes the slots' expressions name, and the job's own Requirements, Rank and
        ConcurrencyLimits with everything they reach in the job. Returns
        (projection, slot names, slot names of Requirements, slot names of Rank): the
        second part is the set of slot attributes the job's own expressions reach
        (TARGET.x, or names the job lacks), the third the part of it its Requirements
        (and ConcurrencyLimits) reach, which is all the match test sees of the slot
        beyond the slot's own Requirements, the fourth what its Rank reaches. All three
        include what job attributes the slots evaluate reach back into the slot."""
        p = self._job_projector
        if p is None:
            roots = frozenset(self.job_names_seen_by_slots) | _JOB_OWN
            seen_by_slots = frozenset(self.job_names_seen_by_slots)
            names_of = self.values.names

            def finish(read):
                seen, own = closure(read, _JOB_OWN, names_of)
                own -= _JOB_OWN                # the job lacks them: nothing is reached
                own_req = closure(read, _JOB_REQ, names_of)[1] - _JOB_OWN
                own_rank = closure(read, ("rank",), names_of)[1] - _JOB_OWN
                seen |= closure(read, seen_by_slots, names_of)[0]
                # job attributes the slots' expressions evaluate can reach back into
                # the slot (START = TARGET.Wants, Wants = TARGET.Memory > 100)
                back = reach_back(read, seen_by_slots, names_of)
                return (tuple(sorted(seen)), frozenset(own | back),
                        frozenset(own_req | back), frozenset(own_rank | back))
            p = self._job_projector = Projector(roots, names_of, finish)
        seen, own, own_req, own_rank = p(texts.get)
        key = ((seen, tuple(map(texts.get, seen))), own, own_req, own_rank)
        return self._group_keys.setdefault(key, key)    # one object per distinct key


    def watch_live_usage(self, slots: list[Slot], live_names: set[str], acc, groups,
                         group_quotas) -> None:
        """4.10: when an expression evaluated on claimed slots (the slots' own, or the
        jobs') reads a usage attribute add_remote_user_attrs wrote (`live_names`), that
        attribute is the accountant's figure at the moment of evaluation: keep it live."""
        if live_names and (not live_names.isdisjoint(self.job_slot_names()) or any(
                not live_names.isdisjoint(seen)
                for s in slots if s.live for _, _, seen, _ in s.fams)):
            self.live_remote = live_remote_usage(acc, groups, group_quotas)
            self.live_names = frozenset(live_names)

    # ---- evaluation -------------------------------------------------------------------

    @staticmethod
    def _neg_rank(expr, my, target) -> float:
        """EvalNegotiatorMatchRank: a number narrowed to float, else -DBL_MAX."""
        v = classads.eval_match(expr, my, target)
        if classads.is_number(v):
            return f32(float(v))
        return -DBL_MAX

    def verdict(self, req: Request, cls: SlotClass) -> Verdict:
        k = (req.eval_id, cls.id)
        rep = cls.rep
        if self.live_remote is not None and rep.live:
            # the usage of the class's users as it stands now is one more input (4.10)
            k = (*k, self.refresh_live(rep))
        v = self._verdicts.get(k)
        if v is None:
            if self.group_matches(req, cls.group):
                v = self._compute(req, cls)
                # most classes' verdicts for a request are alike (the same ranks, the
                # slot's own pre and post): a long run keeps one of each, not one a pair
                values = _values_of(v)
                if values is not None:
                    v = self._alike_verdicts.setdefault(values, v)
            else:
                v = _NO_MATCH
            self._verdicts[k] = v
        return v

    def refresh_live(self, slot: Slot) -> tuple:
        """Write the live usage of the slot's users (its own, and with
        NEGOTIATOR_CROSS_SLOT_PRIOS its sibling slots') into its ad, as evaluating
        HTCondor's ResourcesInUseByUser(...) calls there would see them; returns them."""
        ad = slot.ad
        out = []
        for prefix, user in slot.live:
            own, group = self.live_remote(user)
            ad[prefix + "RemoteUserResourcesInUse"] = own
            if group is not None:
                ad[prefix + "RemoteGroupResourcesInUse"] = group
            out.append((own, group))
        return tuple(out)

    def preemption_allowed(self, req: Request, slot: Slot) -> bool:
        """PREEMPTION_REQUIREMENTS of a request and a slot, evaluated now (the cache
        check of PREEMPTION_REQUIREMENTS_STABLE = False, 4.4)."""
        if self.preq is None:
            return True
        if self.live_remote is not None and slot.live:
            self.refresh_live(slot)
        return classads.eval_match(self.preq, slot.ad, req.ad) is True

    def preemption_rank(self, req: Request, slot: Slot) -> float:
        """PREEMPTION_RANK of a request and a slot, evaluated now (4.4, 4.8)."""
        if self.prank is None:
            return -DBL_MAX
        if self.live_remote is not None and slot.live:
            self.refresh_live(slot)
        return self._neg_rank(self.prank, slot.ad, req.ad)

    def group_matches(self, req: Request, group: "MatchGroup") -> bool:
        """symmetricMatch of the request and a group's slots, evaluated once per
        distinct pair of what it sees: the request's evaluation key, and of the slot
        what its own Requirements and the job's Requirements reach (the group's view).
        Slots that differ only in what ranks and preemption see share the answer."""
        mk = (req.eval_id, group.view)
        if group.view in self._live_views:
            mk = (*mk, self.refresh_live(group.rep))
        got = self._matches.get(mk)
        if got is None:
            got = self._matches[mk] = self._symmetric(req.ad, group.rep)
        return got

    @staticmethod
    def _symmetric(job, slot: Slot) -> bool:
        return symmetric_match(job, slot.ad, slot.cp)

    def _compute(self, req: Request, cls: SlotClass) -> Verdict:
        """The ranks and preemption tests of a class that matches the request."""
        slot = cls.rep
        job, ad = req.ad, slot.ad
        if self.static_ranks:
            # the ranks are the slots' own, from the sort (core.static_ranks)
            v = Verdict(match=True, jrank=1.0)
            if slot.current_user is not None:
                v.rank_gt = classads.eval_match(self.rank_gt, ad, job) is True
                v.rank_ge = classads.eval_match(self.rank_ge, ad, job) is True
                if self.preq is not None:
                    v.preq = classads.eval_match(self.preq, ad, job) is True
            return v
        jrank = self._constant_rank.get(req.eval_id)
        if jrank is None:
            rank = job.get("Rank")
            if classads.is_expr(rank):
                # once per distinct pair of what it sees: the request, and the slot
                # attributes the job's Rank reaches
                rk = (req.eval_id, self._reach_id(slot, req.group_key[3])
                      if not slot.cp else ("cp", self._serial, cls.id))
                if (self.live_remote is not None and slot.live
                        and not self.live_names.isdisjoint(req.group_key[3])):
                    rk = (*rk, self.refresh_live(slot))     # it reads live usage
                jrank = self._ranks.get(rk)
                if jrank is None:
                    jr = classads.as_number(classads.eval_match(self.job_rank, job, ad))
                    jrank = self._ranks[rk] = 0.0 if jr is None else jr
            else:   # a literal (or no Rank): the same for every slot
                jr = classads.as_number(rank if rank is not None else classads.UNDEFINED)
                jrank = self._constant_rank[req.eval_id] = 0.0 if jr is None else jr
        dep = slot.key[0]
        v = Verdict(match=True, jrank=jrank)
        if "pre" in dep:
            v.pre = self._neg_rank(self.pre, ad, job)
        if "post" in dep:
            v.post = self._neg_rank(self.post, ad, job)
        if slot.current_user is not None:
            v.rank_gt = classads.eval_match(self.rank_gt, ad, job) is True
            v.rank_ge = classads.eval_match(self.rank_ge, ad, job) is True
            if self.preq is not None:
                v.preq = classads.eval_match(self.preq, ad, job) is True
            if self.prank is not None and "prank" in dep:
                v.prank = self._neg_rank(self.prank, ad, job)
        return v

    # ---- matchmakingAlgorithm --------------------------------------------------------

    def scan(self, req: Request, submitter: str, only_startd_rank: bool,
             limit_used: float, limit: float, used_unclaimed: float, limit_unclaimed: float,
             cost_of: Callable[[Slot], float],
             limits_rejected: Callable[[Slot], bool] | None = None,
             keep_list: bool = True) -> MatchList:
        """The fresh scan (4.5): every slot class still in the list, classified and
        limit-checked; the passing ones form the MatchList. Classes are visited by match
        group: a group whose match test fails is left at its first candidate.
        `limits_rejected` is the per-candidate concurrency-limit check (step 12).
        With NEGOTIATOR_IGNORE_JOB_RANKS the scan stops at the limit (`_static_list`);
        `keep_list`: the negotiator keeps a MatchList (else it takes the best candidate)."""
        if self._changed:
            self.restore_pslots()       # DeleteMatchList: the changed p-slots put back
        rej = Rejections()
        ml = MatchList(rej)
        # static ranks: the classes that passed, and those refused (class, counter)
        refused: list | None = None
        if self.static_ranks:
            ml = _Accepted()
            refused = []
        part = self.partition(req.group_key[1:3])
        ranked = None
        if (self.rank_orders_on and not self.static_ranks and not only_startd_rank
                and limits_rejected is None and not self.pslots and self.live_remote is None):
            # the plain free classes in rank order, read as far as the list is popped
            # (core.rank_order); the others classified here, by match group
            ranked = self.rank_orders.order(self, req, part)
        if ranked is not None:
            order, pairs = ranked
            ml = RankedMatchList(rej, order, self._taker(req, rej, used_unclaimed,
                                                         limit_unclaimed))
        else:
            memo = part.maybe.get(req.eval_id)
            groups = (memo[1] if memo is not None and memo[0] == part.version
                      else part.groups.values())
            pairs = ((group, group.classes) for group in groups)
        keep = []
        for group, classes in pairs:
            if group.live <= 0:
                continue
            keep.append(group)
            if group.held and not only_startd_rank:
                # refused by policy if they match: only the reason needs to know, and
                # it is asked for later (lazily)
                rej.held.append(group)
            matches = None                  # the group's match test, once needed
            for cls in classes:
                if cls.live <= 0:
                    continue
                rep = cls.rep
                if rep.claimer_schedd is not None and rep.claimer_schedd != req.schedd:
                    continue
                user = rep.current_user
                if user is not None and rep.rank_static is False and user == submitter:
                    continue                # its own slot, and no rank preemption
                if matches is None:
                    matches = self.group_matches(req, group)
                if not matches:
                    if group.view not in self._live_views:
                        keep.pop()          # never again for this request key
                    break
                v = self.verdict(req, cls)
                state = NO_PREEMPTION
                if only_startd_rank:
                    if user is None or not v.rank_gt:
                        continue
                    state = RANK_PREEMPTION
                elif user is not None:
                    if v.rank_gt:
                        state = RANK_PREEMPTION
                    elif user != submitter:
                        state = PRIO_PREEMPTION
                        if self.preq is not None and not v.preq:
                            rej.policy += cls.live
                            if refused is not None:
                                refused.append((cls, "policy"))
                            continue
                        if not v.rank_ge:       # rejPreemptForRank: no reason of its own
                            continue
                    else:
                        continue
                if state == PRIO_PREEMPTION or state == NO_PREEMPTION:
                    used, allowed = ((limit_used, limit) if state == PRIO_PREEMPTION
                                     else (used_unclaimed, limit_unclaimed))
                    if rep.cp:
                        if not permits(used, allowed, cost_of(rep)):
                            rej.submitter_limit += 1
                            if refused is not None:
                                refused.append((cls, "submitter_limit"))
                            continue
                    elif not permits(used, allowed, rep.weight):
                        rej.submitter_limit += cls.live
                        if refused is not None:
                            refused.append((cls, "submitter_limit"))
                        continue
                if limits_rejected is not None and limits_rejected(rep):
                    rej.concurrency += cls.live
                    if refused is not None:
                        refused.append((cls, "concurrency"))
                    continue
                ml.add_class(cls, v, state)
        if self.pslots:
            self._pslot_candidates(req, submitter, only_startd_rank, limit_used, limit, rej,
                                   ml, limits_rejected)
        if ranked is None:
            part.maybe[req.eval_id] = (part.version, keep)
        if rej.held:
            rej.matcher, rej.request, rej.submitter = self, req, submitter
        if refused is not None:
            return self._static_list(ml.accepted, refused, rej, limit, keep_list)
        return ml

    def _taker(self, req: Request, rej: Rejections, used: float, allowed: float):
        """What a fresh scan does with a plain free class (unclaimed, its pre and post
        ranks the slots' own) when a rank order reaches it: its verdict if it is a
        candidate, else None (it does not match, has no live member, or the submitter
        limit refuses it: counted, as the scan counts it)."""
        tested: dict = {}
        group_matches, verdict = self.group_matches, self.verdict

        def take(cls: SlotClass) -> Verdict | None:
            if cls.live <= 0:
                return None
            group = cls.group
            ok = tested.get(group)
            if ok is None:
                ok = tested[group] = group_matches(req, group)
            if not ok:
                return None
            v = verdict(req, cls)
            if not permits(used, allowed, cls.rep.weight):
                rej.submitter_limit += cls.live
                return None
            return v
        return take

    # ---- ALLOW_PSLOT_PREEMPTION (core.pslot_preemption) --------------------------------

    def _pslot_candidates(self, req: Request, submitter: str, only_startd_rank: bool,
                          limit_used: float, limit: float, rej: Rejections, ml: MatchList,
                          limits_rejected) -> None:
        """The p-slots that do not match the request as they stand, tried by
        preempting their dynamic slots (pslotMultiMatch), each on its own ad: a success
        is a candidate with its changed ad's ranks, classified as preempting (rank or
        priority; priority is limit-checked at the changed ad's SlotWeight)."""
        names = req.group_key[1:3]
        tries = []
        for s in self.pslots:           # the test as they stand, before any changes
            if s.removed or (s.claimer_schedd is not None and s.claimer_schedd != req.schedd):
                continue
            if not self.group_matches(req, self.class_of(s, names).group):
                tries.append(s)
        if not tries:
            return
        preq = self.preq
        def allowed(dslot_ad) -> bool:
            if preq is None:
                return False            # no PREEMPTION_REQUIREMENTS: no true value
            d = self.by_name.get(classads.eval_string(dslot_ad, "Name") or "")
            if d is not None and self.live_remote is not None and d.live:
                self.refresh_live(d)
            return classads.eval_match(preq, dslot_ad, req.ad) is True
        def dslot_ad(name: str):
            d = self.by_name.get(name)
            return None if d is None else d.ad
        live = self.live_remote is not None
        for s in tries:
            key = (req.eval_id, s.index, len(s.spent), only_startd_rank)
            if not live and key in self._pslot_failed:
                continue
            out = pslot_preemption.multi_match(
                req.ad, s.ad, submitter, only_startd_rank, s.spent, dslot_ad, allowed,
                lambda job, ad: symmetric_match(job, ad, False))
            if out is None:
                self._pslot_failed.add(key)
                continue
            self._changed.append(s)
            s.preempt = out
            s.preempt_weight = slot_weight(s.ad, self._config)
            state = out.state
            if state == PRIO_PREEMPTION and not permits(limit_used, limit, s.preempt_weight):
                rej.submitter_limit += 1
                continue
            if limits_rejected is not None and limits_rejected(s):
                rej.concurrency += 1
                continue
            ml.push_slot(s, self._changed_verdict(req, s), state)

    def _changed_verdict(self, req: Request, slot: Slot) -> Verdict:
        """calculateRanks on a p-slot's changed ad (no cache: the ad is its own)."""
        job, ad = req.ad, slot.ad
        jr = classads.as_number(classads.eval_match(self.job_rank, job, ad))
        v = Verdict(match=True, jrank=0.0 if jr is None else jr)
        v.pre = self._neg_rank(self.pre, ad, job) if self.pre is not None else -DBL_MAX
        v.post = self._neg_rank(self.post, ad, job) if self.post is not None else -DBL_MAX
        v.prank = self._neg_rank(self.prank, ad, job) if self.prank is not None else -DBL_MAX
        return v

    def restore_pslots(self) -> None:
        """DeleteMatchList: every p-slot ad changed for a preemption put back."""
        for s in self._changed:
            if s.preempt is not None:
                pslot_preemption.restore(s.ad, s.preempt)
                s.preempt = None
        self._changed = []

    def _static_list(self, accepted: list, refused: list, rej: Rejections, limit: float,
                     keep_list: bool) -> "static_ranks.StaticMatchList":
        """NEGOTIATOR_IGNORE_JOB_RANKS (core.static_ranks): the candidates of the
        classes that passed, in the sorted slot order up to the one whose weight takes
        the sum past `limit`; the refusals the scan met before it stopped are the only
        ones counted."""
        cfg = self._config
        def weight_of(s: Slot) -> float:
            return static_ranks.scan_weight(s.ad, cfg) if s.cp else s.scan_weight
        kept, stop = static_ranks.first_candidates(accepted, limit, weight_of)
        if stop != math.inf:
            rej.policy = rej.submitter_limit = rej.concurrency = 0
            for cls, counter in refused:
                if counter == "submitter_limit" and cls.rep.cp:
                    n = int(cls.rep.sort_pos < stop)
                else:
                    n = 0
                    for s in cls.walk():         # members in sorted order
                        if s.sort_pos >= stop:
                            break
                        n += not s.removed
                setattr(rej, counter, getattr(rej, counter) + n)
            held = []
            for group in rej.held:
                before = [s for s in group.held if s.sort_pos < stop]
                if before:
                    g = MatchGroup(view=group.view, rep=group.rep)
                    g.held = before
                    held.append(g)
            rej.held = held
        return static_ranks.StaticMatchList(kept, rej, keep_list)


def _values_of(v: Verdict) -> tuple | None:
    """What tells a matching verdict from another (verdicts are not written after they
    are made): None where a -0.0 would be taken for 0.0."""
    jrank, pre, post, prank = v.jrank, v.pre, v.post, v.prank
    for x in (jrank, pre, post, prank):
        if x == 0 and math.copysign(1.0, x) < 0:
            return None
    return (type(jrank), jrank, pre, post, v.rank_gt, v.rank_ge, v.preq, prank)


def symmetric_match(job, slot_ad, cp: bool) -> bool:
    """symmetricMatch: both Requirements true, each with the other as TARGET (one
    classad2 evaluation of MATCH_TEST). For a consumption-policy p-slot (`cp`) the
    request's RequestXxx are its consumption while they are tested (4.5 step 4, rule
    P4), and a request that consumes nothing, or more than is left, does not match."""
    if not cp:
        return classads.eval_match(_MATCH_TEST, job, slot_ad) is True
    cons = consumption.compute(job, slot_ad)
    if not consumption.sufficient(slot_ad, cons):
        return False
    restore = consumption.override_requested(job, cons)
    try:
        return classads.eval_match(_MATCH_TEST, job, slot_ad) is True
    finally:
        consumption.restore_requested(job, restore)


def pslot_preemption_modelled(config) -> bool:
    """ALLOW_PSLOT_PREEMPTION is on and takes effect: preemption is considered (the
    negotiator tries it only then). Not modelled with NEGOTIATOR_IGNORE_JOB_RANKS (its
    scan stops at the limit in the sorted order; the pool warns)."""
    return bool(config.allow_pslot_preemption and config.consider_preemption
                and not config.ignore_job_ranks)


def permits(used: float, allowed: float, cost: float) -> bool:
    """SubmitterLimitPermits (M5), with its once-per-call round-up."""
    if used + cost <= allowed:
        return True
    return used <= 0 and allowed > 0
