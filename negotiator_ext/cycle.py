"""One negotiation cycle on a pool snapshot (reference 2.2), from a loaded `Pool` to
the decisions: `run_cycle(pool, now)`.

This module assembles the core's inputs from the snapshot in the order the real cycle
takes them (slot list, submitters, jobs, accounting, pool size, trimming, ephemeral
attributes), runs the allocation (`core.negotiation`), and shapes the result. The
rules themselves live in the core modules named in each step.
"""

from __future__ import annotations

import math
import re
import time
from itertools import groupby, repeat
from dataclasses import dataclass, field
from typing import Any

from .adapters import classad_semantics
from .core import classads, consumption, static_ranks
from .core.accountant import Accountant
from .core.classads import DBL_MAX
from .core.groups import ROOT
from .core.adtext import AdView, Job, TextValues, as_text_ads
from .core.match_list import Slot
from .core.matchmaking import Matcher, STATE_NAMES, pslot_preemption_modelled
from .core.negotiator_attrs import insert_negotiator_attrs
from .core.slot_profile import memo_token
from .core.job_queue import (JobConstraint, JobQueue, QueueView, id_number, job_id, run_indexes,
                             run_proc)
from .core.negotiation import Match, Negotiation, REQUEST_EPHEMERALS, Submitter
from .core.schedd_limits import Schedds
from .core.time_limits import CostModel, TimeBudget
from .core.slots import current_user, pie_weight, trimmed, uses_negotiator_slot_weight
from . import limits
from .errors import InputError
from .pool import Pool

classad_semantics.enable()

_EPHEMERALS = frozenset(n.lower() for n in REQUEST_EPHEMERALS)

@dataclass
class CycleResult:
    time: int
    pool_weight: float
    slots: int                       # slot ads fetched (after NEGOTIATOR_SLOT_CONSTRAINT)
    trimmed_slots: int               # after trimming (what can be matched)
    partial: bool
    missing_schedds: tuple[str, ...]
    matches: list[Match]
    rejections: list
    limits: list
    submitters: list[dict]
    groups: list[dict]
    accountant: Accountant
    spins: int
    warnings: list[str] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)   # seconds per phase
    concurrency_limits: list[dict] = field(default_factory=list)  # name, max, counts
    quotas: dict = field(default_factory=dict)          # group -> GroupQuota (G4)
    # (submitter, schedd) -> the JobQueue offered to the cycle (for `explain`)
    queues: dict = field(default_factory=dict)
    # slot name -> class number: slots matchmaking cannot tell apart (same class key,
    # same job-independent ranks), for comparing with the real negotiator's choice
    slot_classes: dict = field(default_factory=dict)
    # each group's round-robin time after the cycle (the next cycle's rr_times; the
    # negotiator keeps them from one cycle to the next)
    rr_times: dict = field(default_factory=dict)
    # the groups in the order the first allocation round negotiated them in (group
    # quotas only; else empty)
    group_order: list = field(default_factory=list)
    # where the real cycle's time limits would stop it (core.time_limits), when the
    # pool's negotiator ad gives a cost to predict with; None otherwise
    time_limits: dict | None = None
    # the submitters' turns a schedd's own limits ended with jobs left (M7): schedd,
    # submitter, offers (the session's count), knob, shadows, idle_left
    schedd_stops: list = field(default_factory=list)

    def to_json(self) -> dict:
        return {
            "cycle": {"time": self.time, "pool_weight": self.pool_weight,
                      "slots": self.slots, "submitters": len(self.submitters),
                      "partial": self.partial,
                      "missing_schedds": list(self.missing_schedds),
                      "spins": self.spins, "group_order": list(self.group_order)},
            "matches": [{"job": m.job, "schedd": m.schedd, "submitter": m.submitter,
                         "group": m.group, "slot": m.slot, "reason": STATE_NAMES[m.state],
                         "preempting": m.preempting, "cost": m.cost,
                         "assigned_job": m.assigned_job,
                         "negotiating_group": m.negotiating_group,
                         "autocluster": m.autocluster,
                         "slot_class": self.slot_classes.get(m.slot),
                         "beyond_time_limits": m.late,
                         # ALLOW_PSLOT_PREEMPTION: the dynamic slots a p-slot's match preempts
                         **({"preempted_dslots": list(m.preempted_dslots)}
                            if m.preempted_dslots else {})}
                        for m in self.matches],
            "rejections": [{"job": r.job, "schedd": r.schedd, "submitter": r.submitter,
                            "reason": r.reason, "autocluster": r.autocluster,
                            "cause": r.cause, "unmatched_job": r.unmatched_job}
                           for r in self.rejections],
            "submitters": self.submitters,
            "groups": self.groups,
            "concurrency_limits": self.concurrency_limits,
            "warnings": self.warnings,
            "time_limits": self.time_limits,
            "schedd_stops": self.schedd_stops,
        }


# ---- jobs ------------------------------------------------------------------------------

class _ScheddOf:
    """The schedd a job is queued at: the file's schedd in meta.json's "schedd_files",
    else the part of GlobalJobId before '#', else the only schedd submitters name."""

    def __init__(self, meta: dict, default: str | None):
        self.files = meta.get("schedd_files") or {}
        self.default = default
        self._by_prefix: dict[str, str | None] = {}

    def __call__(self, file_name: str, job) -> str | None:
        if file_name in self.files:
            return self.files[file_name]
        text = job.texts.get("globaljobid")
        if text is None:
            return self.default
        # The text up to its first '#' decides the value up to its first '#' (an
        # escape cannot hide a '#'), so one evaluation serves every job of a schedd.
        prefix = text.split("#", 1)[0] if text.startswith('"') and "#" in text else text
        if prefix not in self._by_prefix:
            gj = job.value("globaljobid")
            self._by_prefix[prefix] = (gj.split("#", 1)[0] if isinstance(gj, str) and "#" in gj
                                       else None)
        got = self._by_prefix[prefix]
        return got if got is not None else self.default


class _Phases:
    """Wall time per phase of the cycle (for the benchmark and the ledger)."""

    def __init__(self):
        self.laps: dict[str, float] = {}
        self._t = time.perf_counter()

    def lap(self, name: str) -> None:
        t = time.perf_counter()
        self.laps[name] = round(t - self._t, 4)
        self._t = t


# ---- the cycle: a Pool -> one CycleInput -> the core -> a CycleResult -----------------

@dataclass
class CycleInput:
    """Everything one cycle decides from, built once from a Pool (`prepare_cycle`) and
    never read back from it: the accountant stepped to the cycle's time, the pool's
    size and the groups' quotas, the slot list the matchmaker sees (trimmed, with the
    negotiator's attributes inserted, in slot classes), and each submitter with its
    resource requests (jobs keyed into autoclusters, in the schedd's order)."""
    time: int
    config: Any
    groups: Any
    accountant: Accountant
    limits_before: dict              # concurrency limits the claimed slots hold
    demand: dict                     # group -> demand (G5)
    quotas: dict                     # group -> GroupQuota (G4)
    pool_weight: float               # weightedPoolsize
    min_slot_weight: float
    matcher: Matcher                 # the slots' classes and the requests' keys
    slots: list[Slot]
    slot_classes: dict               # slot name -> class number
    submitters: list[Submitter]      # each with its JobQueue
    queues: dict                     # (submitter, schedd) -> JobQueue
    schedds: Schedds                 # the schedds' limits and counts (M7)
    cost: CostModel | None           # the real cycle's cost per request (time limits)
    fetched_slots: int               # slot ads fetched (after the slot constraint)
    partial: bool
    missing_schedds: tuple[str, ...]
    warnings: list[str]
    timings: dict[str, float]


def run_cycle(pool: Pool, now: float | None = None, rr_times: dict | None = None
              ) -> CycleResult:
    """One cycle at `now` (default: the snapshot's time). `rr_times`: each group's
    round-robin time from the cycle before (the result's `rr_times` are the next cycle's;
    default 0 for all, as after a negotiator restart).

    The slot ads of `pool` are the cycle's own: the cycle inserts the negotiator's
    attributes into them (the current user's figures on claimed slots, and
    NEGOTIATOR_MATCH_EXPRS), as the negotiator does into the ads it fetched; a slot with
    a consumption policy is copied first, since its assets change during the cycle.
    Callers that need the ads as fetched keep copies."""
    return decide(prepare_cycle(pool, now), rr_times)


def prepare_cycle(pool: Pool, now: float | None = None) -> CycleInput:
    """The cycle's input, in the order the real cycle takes its steps (2.2)."""
    cfg, groups = pool.config, pool.groups
    clock = _Phases()
    # What the pool says, read once. Accounting (2.2 steps 1 and 7); the pool's numbers
    # over every fetched slot ad, before trimming (steps 5, 8: without
    # NEGOTIATOR_SLOT_POOLSIZE_CONSTRAINT `weighted` is untrimmedSlotWeightTotal); the
    # submitters (phase 1); group demand and quotas (G4, G5).
    t = pool.cycle_time(now)
    acc = pool.accountant_at(t)
    limits_before = dict(acc.limits)        # LoadLimits: what claimed slots hold
    if pool.slot_sums is not None:
        least = pool.slot_sums[3]
        min_weight = DBL_MAX if least is None else least
    else:
        weights = pool.pie_weights or [pie_weight(ad, s.weight)
                                       for ad, s in zip(*pool.every_slot())]
        min_weight = min(weights) if weights else DBL_MAX
    _, weighted, _ = pool.pool_sizes()
    submitter_ads = pool.submitter_ads()
    default_schedd = pool.default_schedd(submitter_ads)
    demand = pool.demand(submitter_ads) if groups.enabled else {}
    quotas = pool.quotas(demand) if groups.enabled else {}
    quotas0 = {n: q.effective_quota for n, q in quotas.items()}
    snap = pool.snapshot
    job_tables = {f: as_text_ads(table) for f, table in snap.jobs.items()}
    job_names: set[str] = set()
    for table in job_tables.values():
        job_names.update(table.store.names)
    matcher = Matcher(cfg, lambda n: n in _EPHEMERALS or n in job_names,
                      memory=pool.match_memory)

    clock.lap("accounting")
    # The slot list (2.2 step 9), and what the negotiator writes into it (step 11). In
    # a long run, a slot the last cycle had too, unchanged and written into by neither
    # (`Slot.carried`), is the same Slot: what was worked out of it alone stands
    # (core.kept_classes)
    stamp = object()
    slots, ordered = _candidate_slots(pool, t, matcher.kept_stamp(_carry_key(cfg)), stamp)
    if cfg.ignore_job_ranks:
        # NEGOTIATOR_IGNORE_JOB_RANKS: sorted by their ranks (step 10), before step 11
        static_ranks.sort_slots(slots, cfg)
    fresh = [s for s in slots if not s.carried]
    live_names = insert_negotiator_attrs(fresh, cfg, acc, groups, quotas0)

    clock.lap("slots")
    # Expressions' reach: slots first, then jobs (autoclusters), then slot classes
    for s in fresh:
        matcher.scan_slot(s)
    if len(fresh) < len(slots):
        matcher.see_slots(slots)

    clock.lap("slot_reach")
    schedds = pool.schedds()
    by_queue, queue_names = _idle_jobs(job_tables, matcher, snap, cfg, default_schedd,
                                       schedds)

    clock.lap("jobs")
    matcher.settle_job_keys(slots, by_queue.values())
    queues = _job_queues(by_queue, queue_names, cfg.negotiate_all_jobs_in_cluster,
                         cfg.use_global_job_prios)
    del by_queue
    matcher.watch_live_usage(slots, live_names, acc, groups, quotas0)
    slot_classes = matcher.classify(slots, stamp, fresh if ordered else None,
                                    pool.number_slot_classes)

    clock.lap("autoclusters")
    cost, why = pool.cost_model()
    warnings = list(pool.warnings) + ([why] if why else [])
    submitters = []
    for d in submitter_ads:
        name = d["Name"]
        schedd = d.get("ScheddName") or default_schedd or ""
        # USE_GLOBAL_JOB_PRIOS: one submitter per value of its JobPrioArray (none: one,
        # at the worst priority), consolidated after the sort (core.negotiation)
        prios = (job_prio_array(d.get("JobPrioArray")) if cfg.use_global_job_prios
                 else [d.get("JobPrio")])
        for prio in prios:
            submitters.append(Submitter(
                name=name, schedd=schedd,
                idle_jobs=max(int(d.get("IdleJobs") or 0), 0),
                running_jobs=int(d.get("RunningJobs") or 0),
                last_heard_from=int(d.get("LastHeardFrom") or 0),
                group=groups.assigned_group(name).name,
                queue=queues.get((name, schedd)) or JobQueue([]),
                job_prio=prio,
                prio_array=cfg.use_global_job_prios and "JobPrioArray" in d))
    return CycleInput(
        time=t, config=cfg, groups=groups, accountant=acc, limits_before=limits_before,
        demand=demand, quotas=quotas, pool_weight=weighted,
        min_slot_weight=min_weight, matcher=matcher,
        slots=slots, slot_classes=slot_classes, submitters=submitters, queues=queues,
        schedds=schedds, cost=cost, fetched_slots=len(pool.slot_ads), partial=snap.partial,
        missing_schedds=snap.missing_schedds, warnings=warnings,
        timings=clock.laps)


def decide(inp: CycleInput, rr_times: dict | None = None) -> CycleResult:
    """The allocation and matchmaking on a prepared input (core.negotiation), shaped
    into the result. `inp` is used up: its accountant and slots change."""
    acc, groups, submitters = inp.accountant, inp.groups, inp.submitters
    t0 = time.perf_counter()
    usage_before = {s.name: acc.weighted_usage(s.name) for s in submitters}
    group_usage_before = {n.name: acc.weighted_usage(n.name) for n in groups.nodes}
    neg = Negotiation(
        config=inp.config, accountant=acc, groups=groups, matcher=inp.matcher,
        slots=inp.slots, submitters=submitters, now=inp.time,
        min_slot_weight=inp.min_slot_weight, pool_weight=inp.pool_weight,
        schedd_limits=inp.schedds,
        budget=TimeBudget.for_config(inp.config, inp.cost) if inp.cost else None)
    outcome = neg.run(inp.quotas, rr_times)
    if not limits.PROCESS_ENDS:
        # the process goes on (a loop, a simulation): the cycle's objects freed as soon as
        # it is over, not left in reference cycles for the collector; a process that ends
        # with this cycle frees nothing at all
        inp.matcher.release()
    timings = dict(inp.timings, negotiation=round(time.perf_counter() - t0, 4))
    cfg, limits_before = inp.config, inp.limits_before
    return CycleResult(
        time=inp.time, pool_weight=neg.pool_weight, slots=inp.fetched_slots,
        trimmed_slots=len(inp.slots), partial=inp.partial,
        missing_schedds=inp.missing_schedds,
        matches=neg.matches, rejections=neg.rejections, limits=neg.limits,
        submitters=_submitter_rows(neg, submitters, usage_before),
        groups=_group_rows(neg, outcome, inp.demand, group_usage_before),
        accountant=acc, spins=neg.spins, warnings=inp.warnings, timings=timings,
        concurrency_limits=[
            {"name": n, "max": cfg.concurrency_limit_max(n),
             "count_before": limits_before.get(n, 0.0), "count": acc.limits.get(n, 0.0)}
            for n in sorted(set(limits_before) | set(acc.limits))],
        quotas=inp.quotas, queues=inp.queues, slot_classes=inp.slot_classes,
        rr_times=dict(outcome.rr_times) if outcome is not None else {},
        group_order=[name for name, _ in outcome.orders[0]]
        if outcome is not None and outcome.orders else [],
        time_limits=_time_limits(neg), schedd_stops=_schedd_stops(neg, submitters))


def _schedd_stops(neg: Negotiation, submitters) -> list[dict]:
    """The submitters' turns that ended because their schedd's session offered no more
    jobs (M7), while they had idle jobs left: each (submitter, schedd) once, with the
    session's count, the knob that set it and the schedd's shadows as it started."""
    out, seen = [], set()
    for s in submitters:
        key = (s.name, s.schedd)
        got = neg.schedd_stops.get(key)
        if got is None or key in seen:
            continue
        seen.add(key)
        q = s.queue
        left = sum(1 for j in q.jobs if j[0] not in q.matched)
        if left > 0:
            offers, knob, shadows = got
            out.append({"schedd": s.schedd, "submitter": s.name, "offers": offers,
                        "knob": knob, "shadows": shadows, "idle_left": left})
    return out


_INT_MIN = -2 ** 31


def job_prio_array(value) -> list[int]:
    """A submitter ad's JobPrioArray as the negotiator reads it: a string of priorities
    (commas or white space between), each read with atoi; anything but a string, the
    worst priority alone."""
    if not isinstance(value, str):
        return [_INT_MIN]
    out = []
    for tok in value.replace(",", " ").split():
        m = _ATOI.match(tok)
        out.append(max(min(int(m.group(0)), 2 ** 31 - 1), _INT_MIN) if m else 0)
    return out


_ATOI = re.compile(r"[+-]?[0-9]+")


def _time_limits(neg: Negotiation) -> dict | None:
    """The real cycle's time limits as predicted beside ours (core.time_limits)."""
    if neg.budget is None:
        return None
    late = sum(m.late for m in neg.matches)
    out = neg.budget.to_json(len(neg.matches) - late, late)
    # for each submitter ours served in more than one turn (a turn's matches are made
    # one after another), its matches in the first: what a real cycle that skipped its
    # later turns still owed it (core.disagreement); the others' first turn is all of it
    first: dict[str, int] = {}
    again: set[str] = set()
    for name, turn in groupby(neg.matches, key=lambda m: m.submitter):
        if name in first:
            again.add(name)
        else:
            first[name] = sum(1 for _ in turn)
    out["first_turn_matches"] = {name: first[name] for name in first if name in again}
    return out


def _carry_key(cfg) -> tuple:
    """The knobs a slot's Slot (`_candidate_slots`) and what the negotiator writes into
    its ad depend on, beside the matcher's memory token."""
    return (cfg.consider_preemption, cfg.consider_early_preemption,
            cfg.match_working_cm_slots, cfg.cross_slot_prios, cfg.startd_resource_prefix,
            cfg.slot_weight, tuple(sorted(cfg.match_exprs.items())))


def _candidate_slots(pool: Pool, now: int | None = None, last: object = None,
                     stamp: object = None) -> tuple[list[Slot], bool]:
    """The slots the matchmaker sees: the fetched slot ads less the trimmed ones (2.2
    step 9) and the consumption-policy p-slots with no claim left; a p-slot with a
    consumption policy is a copy (its assets change during the cycle). What this reads
    of a kept slot ad (a shadow loop's: `Pool.slot_memos`) is kept in its memo for the
    next pass.

    In a long run, the matcher's memory keeps the list's Slots by their ads
    (`MatchMemory.listed`): a slot that was in the list of the cycle stamped `last`,
    with the same ad, usage and texts, and whose ad that cycle wrote nothing into, is
    the same Slot again (`Slot.carried`), its per-cycle state reset. Every slot is
    stamped `stamp`. Returns the slots, and whether the carried ones are in the order
    they had."""
    cfg = pool.config
    slots: list[Slot] = []
    slot_rows = pool.slot_texts or (None,) * len(pool.slot_ads)
    rolled_up = pslot_preemption_modelled(cfg)
    values = TextValues()           # the slots' literal texts, each evaluated once
    # what is read here depends on the ad and these knobs alone (the shutdown test reads
    # the clock: nothing is kept with it)
    # (a token: one object for these knobs, compared by `is` below)
    memo_key = (memo_token((cfg.consider_preemption, cfg.consider_early_preemption,
                            cfg.match_working_cm_slots, rolled_up), "candidate")
                if cfg.trim_shutdown_threshold <= 0 else None)
    shared = pool.shared_slot_ads
    facts: dict = {}                # one tuple of each kept (most slots' are alike)
    # a Slot is kept only in a long run (a matcher's memory), and only where nothing
    # of the cycle's own is in it
    memory = pool.match_memory
    reuse = (shared and memory is not None and not rolled_up and not cfg.ignore_job_ranks
             and memo_key is not None)
    # the last cycle's list, by its ads (the Slots hold the ads: no other object has
    # their ids): each ad's Slot is found by one lookup of its id, at C speed
    listed = memory.listed if reuse else None
    if listed is None or listed[0] is not memo_key or last is None or listed[1] is not last:
        found = repeat(None)
    else:
        found = map(listed[2].get, map(id, pool.slot_ads))
    listing: dict[int, Slot] | None = {} if reuse else None     # this cycle's, for the next
    before = -1                     # the last carried slot's place in the last list
    ordered = True
    for i, (ad, usage, row, memo, slot) in enumerate(zip(
            pool.slot_ads, pool.slots, slot_rows, pool.slot_memos or repeat(None), found)):
        # (a simulator's slot texts come as a dict, shared from cycle to cycle: what the
        # cycle writes into a slot's texts it writes into a copy)
        texts = None if row is None else row if type(row) is dict else dict(row)
        if slot is not None and (slot.usage is usage and slot.shared and slot.memo is memo
                                 and slot.texts is texts and slot.ad is ad and not slot.cp):
            # the same Slot again: in the last cycle's list, with the same ad, usage and
            # texts, and its ad not written into (one not carried is made anew, its
            # class keys and views with it)
            slot.carried = True
            if slot.index <= before:
                ordered = False
            before = slot.index
            slot.index = i
            slot.removed = False
            slot.stamp = stamp
            slots.append(slot)
            listing[id(ad)] = slot
            continue
        keep = memo is not None and memo_key is not None
        got = memo.get(memo_key) if keep else None
        if got is None:
            got = _slot_facts(AdView(ad, texts, values), ad, usage, cfg, now, rolled_up)
            if keep:
                got = memo[memo_key] = facts.setdefault(got, got)
        if got is _TRIMMED:
            continue
        pslot, cp, holder, schedd, rolled = got
        own = shared
        if cp or (shared and rolled_up and pslot):
            # its assets change during the cycle; a kept p-slot's too, when its dynamic
            # slots' preemption is modelled (core.pslot_preemption changes its ad)
            ad = classads.copy_ad(ad)
            own = False
        claims = 1
        if cp:
            if uses_negotiator_slot_weight(ad, cfg):
                # obtainAdsFromCollector inserts SLOT_WEIGHT: the match cost is its drop
                ad["SlotWeight"] = classads.parse_expr(cfg.slot_weight)
            n = classads.eval_number(ad, "NumClaims")
            claims = int(n) if n is not None else int(math.ceil(classads.eval_number(ad, "Cpus") or 0))
        slot = Slot(index=i, ad=ad, name=usage.name, weight=usage.weight, usage=usage,
                    partitionable=pslot, cp=cp,
                    current_user=holder if cfg.consider_preemption else None,
                    usage_user=holder, claimer_schedd=schedd,
                    claims_left=max(claims, 0) if cp else 1, shared=own, memo=memo)
        if cp and slot.claims_left <= 0:
            continue
        if texts is not None and not cp:
            slot.texts = texts            # (a p-slot with a policy reads its own copy)
        if rolled:
            # ALLOW_PSLOT_PREEMPTION: its p-slot stands for it (core.pslot_preemption)
            slot.removed = slot.rolled_up = True
        slot.stamp = stamp
        if listing is not None and keep and not cp:
            listing[id(ad)] = slot
        slots.append(slot)
    if reuse:
        memory.listed = (memo_key, stamp, listing)
    return slots, ordered


_TRIMMED = "trimmed"


def _slot_facts(view: AdView, ad, usage, cfg, now, rolled_up: bool):
    """What `_candidate_slots` reads of a slot ad: _TRIMMED, or (partitionable, has a
    consumption policy, who holds it, the schedd that claimed it (a p-slot's), rolled
    up into its p-slot)."""
    if trimmed(view, usage, cfg, now):
        return _TRIMMED
    pslot = classads.as_bool(view.value("PartitionableSlot")) is True
    # (only a partitionable slot has a policy: the others' ads are not asked)
    cp = pslot and consumption.supports_policy(view)
    schedd = view.value("RemoteScheddName") if pslot else None
    rolled = rolled_up and classads.as_bool(view.value("DynamicSlot")) is True and \
        classads.as_bool(view.value("PSlotRollupInformation")) is True
    return (pslot, cp, current_user(view), schedd if isinstance(schedd, str) else None,
            rolled)


def _idle_jobs(job_tables: dict, matcher: Matcher, snap, cfg, default_schedd,
               schedds: Schedds) -> tuple[dict, dict]:
    """Each submitter's idle jobs at each schedd (M2), unsorted: (submitter, schedd) ->
    [(sort order, job key, job texts)], and the attribute names of each queue's file.
    The jobs holding a shadow are counted into `schedds` (M7).
    Job ads are kept as text (core.adtext): each job is looked at through the few
    attributes the schedd and the negotiator need, each text evaluated once."""
    values = matcher.values
    by_queue: dict[tuple[str, str], list] = {}
    queue_names: dict[tuple[str, str], dict] = {}
    job_constraint = JobConstraint(cfg.job_constraint, values) if cfg.job_constraint else None
    schedd_of = _ScheddOf(snap.meta, default_schedd)
    view = QueueView(values)
    job_key, idle, running = matcher.job_key, view.idle, view.running
    literal = values.literal
    for file_name, table in job_tables.items():
        names = table.store.names
        heads, runs = table.heads, table.runs
        if heads is not None:
            # taken once (a later cycle on the same tables computes its own): the
            # pass's other objects do not wait for them
            table.heads = table.runs = None
            if len(heads) != len(table.rows):
                heads = None
        if heads is None or runs is None or len(runs) != len(table.rows):
            runs = None
        # A run: rows alike but for their ProcId pair (a cluster's jobs captured by
        # their requests, or read from a file), and for their GlobalJobId pair (as
        # condor_q -long prints them) when it names the same schedd, where nothing
        # else reads either: the row before's queue, key and order serve, with the
        # job's own proc. (Pairs are shared: alike rows hold the very same pair objects.)
        run = None     # (row, its (ProcId, GlobalJobId) indexes: None not yet known,
        #                 queue, key, order)
        for index, row in enumerate(table.rows, start=1):
            if run is not None:
                last, k, q, key, order = run
                if runs is not None and runs[index - 1]:
                    # the reader found it the row before but for its proc (`runs`,
                    # beside the heads): a run unless the key reads ProcId or
                    # GlobalJobId (its head holds the proc)
                    if k is None:
                        k = run_indexes(last, key[0][0])
                    if k[0] >= 0 and k[1] >= 0:
                        by_queue[q].append((order + (heads[index - 1][0][1][-1],), key, row))
                        run = (row, k, q, key, order)
                        continue
                proc, k = run_proc(row, last, k, literal, key[0][0])
                if proc is not None:
                    by_queue[q].append((order + (proc,), key, row))
                    run = (row, k, q, key, order)
                    continue
                run = None
            if heads is None:
                job = Job(row, names, values)
                head = idle(job)
                held = running(job) if head is None else None
            else:                   # computed as the file was read (queue_heads)
                head, held = heads[index - 1]
                if head is None and held is None:
                    continue        # neither idle nor holding a shadow: nothing to do
                job = Job(row, names, values)
            if head is None:
                if held is not None:
                    schedd = schedd_of(file_name, job)
                    if schedd is not None:
                        schedds.running[schedd] = schedds.running.get(schedd, 0) + 1
                        if held[1] and held[0] is not None:
                            k = (held[0], schedd)
                            schedds.in_transfer[k] = schedds.in_transfer.get(k, 0) + 1
                continue
            if min(head[1][-2:]) < 0:
                _bad_job_id(snap.directory / file_name, index, job)
            if job_constraint is not None and not job_constraint(job):
                continue
            schedd = schedd_of(file_name, job)
            if schedd is None:
                continue
            q = (head[0], schedd)
            jobs = by_queue.get(q)
            if jobs is None:
                jobs = by_queue[q] = []
                queue_names[q] = names
            key = job_key(job.texts)
            jobs.append((head[1], key, row))
            if job_constraint is None:
                run = (row, None, q, key, head[1][:-1])
    return by_queue, queue_names


def _job_queues(by_queue: dict, queue_names: dict, every_job_alone: bool,
                keep_prios: bool = False) -> dict:
    """Each queue in the schedd's order, its jobs numbered into autoclusters as the
    schedd numbers them (per schedd, one id per distinct job key; every job its own
    with NEGOTIATE_ALL_JOBS_IN_CLUSTER): (submitter, schedd) -> JobQueue."""
    queues: dict[tuple[str, str], JobQueue] = {}
    ac_ids: dict[tuple[str, int], int] = {}
    serial = 0
    for (sub, schedd), jobs in by_queue.items():
        jobs.sort(key=lambda x: x[0])
        entries = []
        for order, key, row in jobs:
            c, p = order[-2:]
            if every_job_alone:
                serial += 1
                ac = serial
            else:
                # keys are canonical objects (Matcher.job_key): hash their identity
                ac = ac_ids.setdefault((schedd, id(key)), len(ac_ids) + 1)
            entries.append((f"{c}.{p}", ac, key, row))
        queues[(sub, schedd)] = JobQueue(
            entries, names=queue_names[(sub, schedd)],
            # the order key starts with the prio attributes negated; JobPrio is the third
            prios={f"{o[-2]}.{o[-1]}": -o[2] for o, _, _ in jobs} if keep_prios else None)
    return queues


def _bad_job_id(path, index: int, job) -> None:
    """An idle job without a whole ClusterId and ProcId (from 0 up): the schedd gives
    every job both, so the file was made or edited by hand; refused, naming the job."""
    for attr in ("ClusterId", "ProcId"):
        v = job.value(attr.lower())
        if id_number(v) is None:
            shown = ("missing" if v is classads.UNDEFINED
                     else f"not a whole number from 0 up: {job.texts.get(attr.lower())}")
            raise InputError(str(path), shown, ad=str(index), attribute=attr)


def find_job(pool: Pool, job: str) -> list[tuple[str | None, Any]]:
    """Every ad of job `job` ("ClusterId.ProcId") in the snapshot, as (schedd, classad2
    ad): the schedd as the cycle assigns it (None when it cannot tell)."""
    schedd_of = _ScheddOf(pool.snapshot.meta, pool.default_schedd())
    values = TextValues()
    found = []
    want = tuple(job.split("."))
    for file_name, table in pool.snapshot.jobs.items():
        table = as_text_ads(table)
        for row in table.rows:
            texts = dict(row)
            got = (texts.get("clusterid"), texts.get("procid"))
            if all(t is not None and t.isdigit() for t in got) and got != want:
                continue                    # plain numbers that are not this job
            j = Job(row, table.store.names, values)
            c, p = job_id(j)
            if f"{c}.{p}" == job:
                found.append((schedd_of(file_name, j), j.ad()))
    return found


def _submitter_rows(neg: Negotiation, submitters, usage_before) -> list[dict]:
    acc = neg.acc
    matched: dict[str, int] = {}
    weight: dict[str, float] = {}
    for m in neg.matches:
        matched[m.submitter] = matched.get(m.submitter, 0) + 1
        weight[m.submitter] = weight.get(m.submitter, 0.0) + m.cost
    first: dict[str, Any] = {}
    for rec in neg.limits:
        first.setdefault(rec.submitter, rec)
    # each submitter's place in the first pie spin of its group's first negotiation
    # (the order submitterLessThan sorted them in)
    position: dict[str, int] = {}
    places: dict[str, dict[str, int]] = {}     # group -> its first spin's order
    done: set[str] = set()                     # groups whose first spin is over
    for rec in neg.limits:
        group = rec.negotiating_group
        if rec.spin != 1 or group in done:
            continue
        order = places.setdefault(group, {})
        if rec.submitter in order:              # the group's next negotiation began
            done.add(group)
            continue
        order[rec.submitter] = len(order) + 1
        position.setdefault(rec.submitter, order[rec.submitter])
    rows, seen = [], set()
    for s in submitters:
        if s.name in seen:
            continue
        seen.add(s.name)
        rec = first.get(s.name)
        ceiling = acc.ceiling(s.name)
        rows.append({
            "name": s.name, "group": s.group, "schedd": s.schedd,
            "eup": acc.priority(s.name), "rup": acc.rup(s.name),
            "factor": acc.priority_factor(s.name),
            "share": rec.share if rec else None,
            "limit": rec.limit if rec else None,
            # what the accountant publishes (SubmitterShare / SubmitterLimit): the last
            # spin 1 of the cycle writes them (after a floor round, the main round's), as
            # the real accountant's Accounting ads show them
            "submitter_share": acc.customers.get(s.name, {}).get("SubmitterShare") if rec else None,
            "submitter_limit": acc.customers.get(s.name, {}).get("SubmitterLimit") if rec else None,
            "floor": acc.floor(s.name), "ceiling": ceiling if ceiling >= 0 else None,
            "usage_before": usage_before.get(s.name, 0.0),
            "usage_after": acc.weighted_usage(s.name),
            "matched": matched.get(s.name, 0), "matched_weight": weight.get(s.name, 0.0),
            "idle_jobs": s.idle_jobs, "running_jobs": s.running_jobs,
            "pie_position": position.get(s.name),
        })
    rows.sort(key=lambda r: (r["eup"], r["name"]))
    return rows


def _group_rows(neg: Negotiation, outcome, demand, usage_before) -> list[dict]:
    groups = neg.groups
    if not groups.enabled:
        # the root's record as the accountant publishes it without GROUP_NAMES
        q = groups.assign_quotas(0.0)[ROOT]
        return [{"name": ROOT, "parent": None, "config_quota": 0.0, "dynamic": False,
                 "effective_quota": q.effective_quota, "subtree_quota": q.subtree_quota,
                 "surplus_policy": q.surplus_policy, "requested": q.requested,
                 "allocated": None,
                 "usage": neg.acc.weighted_usage(ROOT),
                 "usage_before": usage_before.get(ROOT, 0.0),
                 "matched": len(neg.matches), "sort_key": None}]
    matched: dict[str, int] = {}
    for m in neg.matches:
        matched[m.group] = matched.get(m.group, 0) + 1
    rows = []
    for node in groups.nodes:
        g = outcome.groups[node.name] if outcome is not None else None
        rows.append({
            "name": node.name, "parent": node.parent.name if node.parent else None,
            "config_quota": node.config_quota, "dynamic": not node.static and not node.is_root,
            "effective_quota": g.quota if g else None,
            "subtree_quota": g.subtree_quota if g else None,
            "surplus_policy": groups.surplus_policy(node),
            "requested": g.currently_requested if g else demand.get(node.name, 0.0),
            "allocated": g.allocated if g else None,
            "usage": neg.acc.weighted_usage(node.name),
            "usage_before": usage_before.get(node.name, 0.0),
            "matched": matched.get(node.name, 0),
            "sort_key": g.sort_key if g else None,
        })
    return rows
