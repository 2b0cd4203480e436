"""The simulation engine: the real negotiation cycle, cycle after cycle, over simulated
time, on a pool whose schedds and startds act on its matches (`sim.schedd_startd`).

Its workloads come from sources of their own: a scenario's synthetic arrivals
(`sim.scenario_source`, for `simulate`), and for `forecast` a snapshot's queue and claims
(`sim.snapshot_queue`) and the schedds' history (`sim.history`). Each cycle at time `t`:

1. what happened since the last cycle, in time order: jobs ended (and, in a forecast,
   their claims were reused), recorded jobs were removed, jobs arrived; changes due by
   `t` are made (a config change, a factor, slots leaving or joining);
2. the pool is assembled in memory as the collector and the schedds would show it (slot
   ads with their claims, the queue, submitter ads) and the accountant state carried from
   the last cycle;
3. `cycle.run_cycle` runs the real negotiation cycle on it (accountant step, quotas, pie,
   matchmaking, preemption);
4. what the schedds and startds make of the matches: a matched job starts on its slot (a
   partitionable slot is split as the startd would) and runs for its duration; a preempted
   job goes back to the queue and starts over;
5. the cycle is recorded in the ledger as a pass, as shadow mode records one (so `audit`
   works on simulations), with the exact queue wait of every match.

When the cycles run: a scenario's every `interval` seconds; a forecast's as the
negotiator's timer and the schedds' reschedules make them (`NegotiatorCadence`).

The simulated pool is its own reality: each pass's "real" figures are the simulated
accountant's, and there is nothing to compare.

Speed: the schedd only needs to offer as many idle jobs as could start this cycle (a
submitter's first `free cpus` jobs in its queue order; all of them when preemption is
possible), and the submitter ads carry the true counts. Fewer still: of each job class,
twice what the submitter matched the cycle before (at least `_OFFER_LIMIT_MIN`), plus
the jobs that arrived since when they are more than that; a cycle whose requests reached the last job
offered of a class cut short is run again with every job (`_short_queues` says when the
shorter queue decided as the whole one would have, from how far `JobQueue.offers`
went). When no claimed slot can be
taken (no PREEMPTION_REQUIREMENTS and slots whose Rank cannot prefer another job), the
claimed slots are left out of the candidates the matchmaker sees while still counting in
the pool's size and the accountant (`Pool.all_slot_ads`); the result is the same.

From cycle to cycle the engine keeps what did not change: a slot's ad, its figures
(usage, pie weight, effective size) and texts are made once per change of the slot
(`SimSlot.changed`), and the pool's lists are patched where slots changed instead of
walking every slot; the accountant's CheckMatches is told which slots those are
(`core.accountant.SlotChanges`) and looks at them alone. The slot ads are handed to the
cycle as a shadow loop's kept ads are: shared (the cycle copies one before it writes into
it: NEGOTIATOR_MATCH_EXPRS, the remote user's figures), with their texts and a memo in
which the cycle keeps what it works out of an ad alone, for as long as the slot does not
change; with the run's `MatchMemory`, the cycle keeps its Slot objects and slot classes
too, and patches them with the slots that came and went (`core.kept_classes`). A slot's
texts are made beside its ad when it is built (`sim.ads`). The cyclic GC is off during
a run.
"""

from __future__ import annotations

import dataclasses
import heapq
import itertools
import math
import random
import sys
import time as _time
import uuid as uuidlib
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import classad2

from ..core import classads
from ..core.accountant import AccountantState
from ..core.adtext import Job, TextAds, TextStore, TextValues
from ..core.config import priority_preemption_off
from ..core.match_memory import MatchMemory
from ..core.job_queue import QueueView, queue_head
from ..core.records import MatchEntry, PassRecord
from ..core.schedd_limits import ScheddLimits
from ..errors import InputError
from ..limits import paused_gc
from ..pool import config_warnings
from ..scenario import Change, Scenario
from .ads import _built, _facts, _job_texts, job_row, slot_rank
from .pool_rows import PoolRows, candidates, columns, slot_row
from .schedd_startd import SimJob, SimPool, SimSlot

SCHEDD_ADDR = "<10.255.0.1:9618>"

@dataclass
class SimReport:
    passes: int
    matches: int
    preemptions: int
    span: float
    wall: float
    ledger: str
    skipped: int = 0          # replay: recorded snapshots no longer on disk


@dataclass
class EngineOptions:
    """What a forecast adds to a scenario's run (`sim.forecast`): workload sources beside
    the scenario's arrivals, the negotiator's cadence, claim reuse, the schedds' limits,
    a starting accountant, and a record of every run."""
    sources: tuple = ()                       # workload sources (sim.history, ...)
    cadence: "NegotiatorCadence | None" = None   # None: every scenario `interval`
    claim_worklife: float | None = None       # None: no claim reuse
    model_startd: bool = False                # the 25.14 startd's dynamic slots
    leftovers: bool = False                   # the schedd claims p-slot leftovers
    record_runs: bool = False
    accountant: AccountantState | None = None
    config: object = None                     # the config, already read (else the scenario's)
    schedd_default: ScheddLimits | None = None
    schedd_limits: dict = dataclasses.field(default_factory=dict)
    pool_name: str | None = None              # the ledger's pool name
    # the negotiator's last cycle before the start, (began, ended), from its ad in the
    # snapshot: the cadence's first cycle follows from it (None: a cycle at the start)
    last_cycle: tuple[float, float] | None = None


class Simulation:
    """One run of a scenario, recorded in a ledger (see the module docstring)."""

    def __init__(self, scenario: Scenario, ledger, *,
                 progress: Callable[[float, float, float], None] | None = None,
                 batch: int = 200, shortcuts: bool = True,
                 options: EngineOptions | None = None):
        """`shortcuts=False` offers every idle job and every slot to every cycle (slow; the
        tests compare it with the default)."""
        from ..core.groups import GroupTree
        from .scenario_source import arrival_events
        opts = self.options = options or EngineOptions()
        self.sc = scenario
        self.ledger = ledger
        self.progress = progress
        self.batch = batch
        self.shortcuts = shortcuts
        # the matcher keeps what it worked out of texts from cycle to cycle (a shortcut:
        # core.match_memory says when that is the same answer)
        self.match_memory = MatchMemory() if shortcuts else None
        self.rng = random.Random(scenario.seed)
        self.pool = SimPool(scenario, self.rng, claim_worklife=opts.claim_worklife,
                            record_runs=opts.record_runs, model_startd=opts.model_startd,
                            leftovers=opts.leftovers,
                            reschedule_interval=(opts.cadence.reschedule_interval
                                                 if opts.cadence is not None else None))
        # every config the run will use, read now: a bad knob in a change is found before
        # the run, named with the scenario
        self.changes = sorted(scenario.changes, key=lambda c: c.at)
        self.configs: dict[int, object] = {}
        knobs = dict(scenario.knobs)
        texts = list(knobs.values())
        self.config = opts.config or self._load_config(knobs, "config/knobs")
        for c in self.changes:
            if c.kind == "config":
                knobs.update(c.knobs)
                texts += list(c.knobs.values())
                self.configs[id(c)] = self._load_config(dict(knobs), f"changes (at {c.at:g} s)")
        self.groups = GroupTree(self.config)
        self.warnings: list[str] = config_warnings(self.config, self.groups)
        self._check_groups()
        self.state = (opts.accountant if opts.accountant is not None
                      else self._initial_accountant())
        self.schedd_default = opts.schedd_default or _NO_SCHEDD_LIMITS
        self.pending: list[PassRecord] = []
        self.rr_times: dict[str, float] = {}
        self.arrivals = arrival_events(scenario)
        for source in opts.sources:
            self.arrivals += source.events()
        heapq.heapify(self.arrivals)
        self.matches = 0
        self.preemptions = 0
        self.unresolved = 0          # matches naming a slot or job the pool does not have
        self.claims_failed = 0       # matches whose claim the startd could not give
        self.last_quotas: dict = {}  # the last cycle's group quotas and pool size
        self.last_pool_weight = 0.0
        self._offered: dict[tuple[str, str], SimJob] = {}
        # a schedd offers a cycle at most `offer_limits` jobs of each class of a
        # submitter ((submitter, schedd) -> the limit; _OFFER_LIMIT_MIN if not there): a
        # cycle whose request lists reached the end of a class's jobs is run again with
        # them all (`offer_retries` counts those)
        self.offer_limits: dict[tuple[str, str], int] = {}
        self.offer_retries = 0
        self._idle_after: dict[tuple[str, str], int] = {}    # idle jobs after the last cycle
        self._cut: dict[tuple[str, str], set[str]] = {}
        self._rows: PoolRows | None = None
        self._named: list[SimSlot] = []     # the top-level slots the last matches named
        self._store: TextStore | None = None
        self._store_gen = 0
        self._kept_rows: dict = {}
        # the fewest cpus any job of the scenario requests (a p-slot with less is full)
        self.least_cpus = min([a.cpus for a in scenario.workload]
                              + [s.least_cpus for s in opts.sources if s.least_cpus],
                              default=1)
        shapes = list(scenario.slots) + [c.shape for c in scenario.changes if c.shape]
        self.ranked_slots = any(s.ranks_jobs() for s in shapes)
        if scenario.config_path:
            texts.append(scenario.config_path.read_text())
        texts += [v for s in shapes for v in s.attrs.values()]
        for a in scenario.workload:
            texts += [a.requirements or "", a.rank or "", *a.attrs.values()]
        if any("time()" in t.replace(" ", "") for t in texts):
            self.warnings.append(
                f"{scenario.path}: an expression uses time(): ClassAd time() is this "
                "machine's clock, not the simulated time, so it sees the wrong ages")
        p = self.pool
        p.weight_of = lambda slot: _facts(_built(slot, scenario), self.config)[1].weight
        p.rank_of = lambda slot, job: slot_rank(slot, job, scenario)
        if opts.claim_worklife is not None:
            p.fits = self._fits
        for source in opts.sources:
            source.setup(self)

    # -- setup
    def _load_config(self, knobs: dict[str, str], where: str):
        """The scenario's config file with `knobs` appended, read through HTCondor's own
        config system (from a temporary file: the bindings read files); errors name the
        scenario."""
        from ..adapters.condor_config import load_config
        path = config_with_knobs(self.sc.config_path, knobs)
        try:
            cfg = load_config(path)
        except InputError as exc:
            raise InputError(str(self.sc.path), f"{where}: {exc.message}") from None
        finally:
            Path(path).unlink(missing_ok=True)
        return dataclasses.replace(cfg, source=str(self.sc.config_path or self.sc.path))

    def _check_groups(self) -> None:
        """A workload group the config does not define is an error (HTCondor would quietly
        run those jobs in the root group)."""
        bad = sorted({a.group for a in self.sc.workload
                      if a.group and self.groups.get(a.group) is None})
        if bad:
            known = sorted(n.name for n in self.groups.nodes if not n.is_root)
            raise InputError(str(self.sc.path), f"workload: unknown accounting group(s) "
                             f"{', '.join(bad)}: GROUP_NAMES is {', '.join(known) or 'empty'}")

    def _initial_accountant(self) -> AccountantState:
        if self.sc.accountant is None:
            return AccountantState(last_update_time=self.sc.start)
        from ..adapters.accounting_ads import state_from_accounting_ads
        from ..adapters.adfiles import read_ads
        state, _ = state_from_accounting_ads(read_ads(self.sc.accountant), (), self.groups,
                                             str(self.sc.accountant))
        return state

    # -- one cycle
    def run(self) -> SimReport:
        wall0 = _time.perf_counter()
        sc = self.sc
        n = 0
        t = sc.start
        end = sc.start + sc.span
        # No cyclic GC during the run: the collector would walk the pool's long-lived
        # jobs, slots and ads again and again for nothing (a sixth of a cycle at 10,000
        # slots), and even a young collection after each cycle walks everything the
        # cycle made that is still held, to find a few dozen small objects (4% of a
        # day's forecast at 10,000 slots). What the run drops is freed by reference
        # counting as always; the few reference cycles a cycle leaves (the matcher's
        # slot classes, the group tree's working state) wait for the collector after
        # the run.
        cadence = self.options.cadence
        last = self.options.last_cycle
        if cadence is not None and last is not None:
            t = cadence.cycle_after(t, last, self.pool, self.arrivals)
        with paused_gc(collect=False):
            while t <= end:
                self.step(t)
                n += 1
                if len(self.pending) >= self.batch:
                    self.flush()
                if self.progress is not None:
                    self.progress(t - sc.start, sc.span, _time.perf_counter() - wall0)
                t = t + sc.interval if cadence is None else cadence.next_cycle(t, self.pool, self.arrivals)
            if cadence is not None or self.pool.runs is not None:
                self.pool.advance(end, self.arrivals)   # what happens after the last cycle
            # (the last batch too while the collector is off: on, it would walk the
            # whole pool again and again as the batch's rows are made)
            self.flush()
        return SimReport(passes=n, matches=self.matches, preemptions=self.preemptions,
                         span=sc.span, wall=_time.perf_counter() - wall0,
                         ledger=self.ledger.source if self.ledger is not None else "")

    def flush(self) -> None:
        if self.pending and self.ledger is not None:
            self.ledger.record_passes(self.pending)
            self.pending = []

    def step(self, t: int) -> None:
        from ..cycle import decide, prepare_cycle, run_cycle
        p = self.pool
        if p.claim_worklife is None and not p.removals:
            p.finish_until(t)
            while self.arrivals and self.arrivals[0][0] <= t:
                t_arrival, _, submit = heapq.heappop(self.arrivals)
                submit(p, t_arrival)
        else:                   # claims reused and jobs removed between cycles, in order
            p.advance(t, self.arrivals)
        while self.changes and self.sc.start + self.changes[0].at <= t:
            self._change(self.changes.pop(0), t)
        rows = self._slot_rows()
        pool = self._pool(t, rows, self._offer() if self.shortcuts else None)
        started = _time.perf_counter()
        inp = prepare_cycle(pool, t)
        result = decide(inp, self.rr_times)
        short = _short_queues(inp.queues, self._cut) if self._cut else ()
        if short:
            # a request list reached the end of what a class was offered: the cycle
            # again with every job the schedds would offer
            self.offer_retries += 1
            if self.state.lease is not None:
                # the records as the cycle was handed them, for its accountant again
                self.state.lease.give_back(self.state)
            pool = self._pool(t, rows, None)
            result = run_cycle(pool, t, self.rr_times)
        if self.shortcuts:
            # next cycle: twice what each queue had matched, four times the limit that
            # fell short
            matched: dict[tuple[str, str], int] = {}
            for m in result.matches:
                matched[(m.submitter, m.schedd)] = matched.get((m.submitter, m.schedd), 0) + 1
            was = self.offer_limits
            self.offer_limits = {
                k: max(_OFFER_LIMIT_MIN, 2 * n,
                       4 * was.get(k, _OFFER_LIMIT_MIN) if k in short else 0)
                for k, n in matched.items()}
            for k in short:
                self.offer_limits.setdefault(k, 4 * was.get(k, _OFFER_LIMIT_MIN))
        duration = _time.perf_counter() - started
        # the Resource records are handed over, not copied: after the cycle only the pass
        # record reads the accountant, and the next cycle's accountant takes them
        # (`core.accountant.RecordLease`)
        self.state = result.accountant.to_state(copy_resources=False)
        self.rr_times = result.rr_times         # carried, as the negotiator does
        entries = self._apply(result, t)
        if self.shortcuts:
            self._idle_after = {k: c[0] for k, c in p.counts.items()}
        self.last_quotas = result.quotas
        self.last_pool_weight = result.pool_weight
        if self.ledger is not None:
            self.pending.append(self._record(t, pool, result, entries, duration))

    def _offer(self) -> dict[tuple[str, str], int]:
        """How many jobs of each class each submitter's schedd offers this cycle: the
        `offer_limits`, raised by the jobs that arrived since the last cycle when they
        are more than that (an hourly batch, which the limit alone would cut short and
        the cycle run again with every job). Not every job: in a forecast, history
        jobs arrive every cycle into queues thousands long. Either way the cycle
        decides as with every job offered."""
        limits, before = self.offer_limits, self._idle_after
        out = None
        for k, c in self.pool.counts.items():
            limit = limits.get(k, _OFFER_LIMIT_MIN)
            came = c[0] - before.get(k, 0)
            if came > limit:
                if out is None:
                    out = dict(limits)
                out[k] = limit + came
        return limits if out is None else out

    def _change(self, c: Change, t: int) -> None:
        from ..core.accountant import Accountant
        from ..core.groups import GroupTree
        if c.kind == "config":
            self.config = self.configs[id(c)]
            self.groups = GroupTree(self.config)
            self.warnings += config_warnings(self.config, self.groups)
        elif c.kind in ("factor", "priority"):    # condor_userprio -setfactor / -setprio
            acc = Accountant(self.state, self.config, self.groups)
            if c.kind == "factor":
                acc.set_priority_factor(c.name, c.value)
            else:
                acc.set_priority(c.name, c.value)
            self.state = acc.to_state()
        elif c.kind == "slots_leave":
            self.pool.remove_slots(c.prefix, c.count, t)
        elif c.kind == "slots_join":
            self.pool.add_slots(c.shape, c.count)

    def _fits(self, job: SimJob, slot: SimSlot) -> bool:
        """Whether the schedd may start `job` on the claim of `slot` (claim reuse): the
        slot has what the job requests, and each side's Requirements accept the other
        (the slot's ad as it is without a job)."""
        c = job.cls
        if (c.cpus > slot.cpus or c.memory > slot.memory or c.disk > slot.disk
                or c.gpus > slot.gpus):
            return False
        # the job's ad and Requirements, kept with its texts while it waits (a job is
        # tried again and again as the head of its class); the slot's with its ad
        texts = _job_texts(job)
        got = job.fit
        if got is None or got[0] is not texts:
            row = TextAds(TextStore())
            row.add(texts)
            job_ad = row.ad(0)
            got = job.fit = (texts, job_ad, _requirements(job_ad))
        _, job_ad, job_req = got
        b = _built(slot, self.sc)
        slot_req = b.req
        if slot_req is None:
            slot_req = b.req = _requirements(b.ad)
        slot_ad = b.ad
        return (classads.eval_match(job_req, job_ad, slot_ad) is True
                and classads.eval_match(slot_req, slot_ad, job_ad) is True)

    def _preemption_possible(self) -> bool:
        """Whether a claimed slot could be taken this cycle: priority preemption unless
        PREEMPTION_REQUIREMENTS is literally False (as the matcher reads it: an empty
        value allows it), or rank preemption by a slot whose Rank is not a constant."""
        cfg = self.config
        if not cfg.consider_preemption:
            return False
        return not priority_preemption_off(cfg) or self.ranked_slots

    def _slot_rows(self) -> PoolRows:
        """Every slot's row, in the pool's order (`sim.pool_rows`): only the rows of slots
        that changed since the last cycle are made again (all of them when slots joined
        or left, or the config changed)."""
        p, config, got = self.pool, self.config, self._rows
        sc, least = self.sc, self.least_cpus
        if got is None or got.version != p.version or got.config is not config:
            rows = [r if (r := s._row) is not None and r.config is config
                    else slot_row(s, sc, config, least) for s in p.slots]
            for i, s in enumerate(p.slots):
                s._pos = i
            got = self._rows = PoolRows(p, config, rows)
        else:
            # (no slot joined or left since: each slot is still at its place)
            made = {s._pos: slot_row(s, sc, config, least) for s in p.dirty
                    if s._row is None}
            got.update(made, [s._pos for s in self._named])
        p.dirty.clear()
        self._named.clear()
        return got

    def _pool(self, t: int, rows: "PoolRows | None" = None, offer: dict | None = None):
        """The pool as the cycle at `t` sees it (`rows`: the slots' rows made for it).
        `offer`: a schedd offers at most this many jobs of each class of a submitter
        ((submitter, schedd) -> the number; _OFFER_LIMIT_MIN if not there), and `_cut`
        lists the last job offered of each class cut short by it, per queue."""
        from ..adapters.snapshot import Snapshot
        from ..pool import Pool
        sc, p = self.sc, self.pool
        preempt = self._preemption_possible() or not self.shortcuts
        if rows is None:
            rows = self._slot_rows()
        ads, usage, pies, effs = rows.slot_columns()
        # candidates: what a job can take this cycle (a p-slot with fewer cpus left than
        # any job requests cannot match, as a claimed static slot cannot when nothing can
        # preempt it). They are handed over as a shadow loop's kept ads are: shared (the
        # cycle copies an ad before it writes into it), with their texts and their memo
        # (what the cycle works out of an ad alone is kept with it until the slot
        # changes, `SimSlot.changed`)
        if preempt:
            cand_ads, cand_usage, cand_texts, cand_memos = columns(
                candidates(list(itertools.chain.from_iterable(rows.every))))
        else:
            cand_ads, cand_usage, cand_texts, cand_memos = rows.cand_cols.tuples()
        # no more jobs of a class than the cycle can match: one a slot that can take a
        # job (free cpus, when a slot can be matched again), every cpu with preemption
        free = rows.free_total()
        cap = min(int(math.ceil(free)), rows.takes_total()) if not preempt else rows.all_cpus
        if not self.shortcuts:
            cap = 1 << 40                 # every idle job
        self._cut: dict[tuple[str, str], set[str]] = {}
        # one text store from cycle to cycle, so that a waiting job's ad is interned once
        # (its row kept with it); made anew, with every row, once it holds many pairs
        store = self._store
        if store is None or len(store.pairs) > _STORE_PAIRS:
            store = self._store = TextStore()
            self._store_gen += 1
            self._values = TextValues()
            self._view = QueueView(self._values)
            self._kept_rows = {}            # job class -> what it keeps for the store
        gen, view, values, names = self._store_gen, self._view, self._values, store.names
        kept = self._kept_rows
        queues: dict[str, TextAds] = {}               # schedd -> the jobs it offers
        submitters = []
        self._offered: dict[tuple[str, str], SimJob] = {}   # (schedd, job id) -> job
        for i, ((name, schedd), (idle, running)) in enumerate(sorted(p.counts.items())):
            if idle + running <= 0:
                continue
            jobs = queues.get(schedd)
            if jobs is None:
                jobs = queues[schedd] = TextAds(store)
                jobs.heads = []
            heads = jobs.heads
            per_class = cap if offer is None else min(
                cap, offer.get((name, schedd), _OFFER_LIMIT_MIN))
            cut: list[SimJob] | None = [] if per_class < cap else None
            for job in p.idle_jobs((name, schedd), min(idle, per_class), cut):
                if job.row is not None and job.row_gen == gen:
                    jobs.add_row(job.row)
                else:
                    row = job.row = job_row(job, jobs, kept)
                    jobs.add_row(row)
                    job.row_gen = gen
                    # what the schedd's view of its queue says of the job (as
                    # `job_queue.queue_heads` computes it), worked out once a row
                    job.head = queue_head(view, Job(row, names, values))
                heads.append(job.head)
                self._offered[(schedd, job.id)] = job
            if cut:
                self._cut[(name, schedd)] = {job.id for job in cut}
            ad = classad2.ClassAd()
            ad["MyType"] = "Submitter"
            ad["Name"] = name
            ad["ScheddName"] = schedd
            ad["ScheddIpAddr"] = SCHEDD_ADDR
            ad["IdleJobs"] = idle
            ad["RunningJobs"] = running
            ad["WeightedIdleJobs"] = idle
            ad["WeightedRunningJobs"] = running
            ad["LastHeardFrom"] = 1000 + i
            submitters.append(ad)
        if not queues:
            queues[sc.schedd] = TextAds(store)
        files = {f"jobs.{i}.ads" if i else "jobs.ads": schedd
                 for i, schedd in enumerate(queues)}
        snap = Snapshot(directory=sc.path, slots_source=str(sc.path), slots=tuple(cand_ads),
                        jobs={f: queues[schedd] for f, schedd in files.items()},
                        submitters=tuple(submitters), accounting=(),
                        accounting_source=None, config_path=None,
                        meta={"captured_at": t, "schedd_files": files})
        return Pool(snapshot=snap, config=self.config, groups=self.groups,
                    slot_ads=tuple(cand_ads), slots=tuple(cand_usage), accountant=self.state,
                    warnings=(), slot_texts=tuple(cand_texts), all_slot_ads=ads,
                    all_slots=usage, pie_weights=pies, effective_sizes=effs,
                    schedd_default=self.schedd_default,
                    schedd_limits=self.options.schedd_limits, slot_changes=rows.changes,
                    claimed_weights=rows.claimed_weights(), slot_sums=rows.sums.totals(),
                    shared_slot_ads=True, slot_memos=tuple(cand_memos),
                    match_memory=self.match_memory, number_slot_classes=False)

    def _apply(self, result, t: int) -> list[MatchEntry]:
        """The schedds and startds act on the matches; our match entries, with waits."""
        p = self.pool
        jobs = self._offered
        out = []
        for m in result.matches:
            slot = p.slot_named(m.slot)
            if slot is not None:
                self._named.append(slot.top)
            job = jobs.get((m.schedd, m.assigned_job))
            if p.model_startd and job is not None and job.status != 1 and slot is not None:
                # the schedd started it on a leftover claim in the meantime: it looks for
                # another of the submitter's jobs the slot takes (FindRunnableJob)
                job = p.find_runnable_job(job.cls, slot, job)
                if job is None:
                    self.claims_failed += 1
                    continue
            if slot is None or job is None or job.status != 1:
                self.unresolved += 1
                continue
            if m.preempting:
                victim = slot.job
                if victim is not None:
                    p.evict(victim, t, keep_slot=True)
                    self.preemptions += 1
            pslot = slot if slot.partitionable else None
            if pslot is not None:
                if p.model_startd and not _room_for(pslot, job):
                    self.claims_failed += 1        # its leftovers went to other jobs
                    continue
                slot = p.carve(slot, job)
            wait = float(t - job.idle_since)
            p.start(job, slot, t)
            if pslot is not None and p.leftovers:
                p.fill_leftovers(pslot, job.cls, t)
            self.matches += 1
            out.append(MatchEntry(job=m.job, submitter=m.submitter, slot=m.slot,
                                  preempting=m.preempting, time=t, group=m.group, wait=wait))
        return out

    def _record(self, t: int, pool, result, entries: list[MatchEntry],
                duration: float) -> PassRecord:
        """The cycle as a ledger pass. The simulated pool is its own reality: its
        "real" accountant is the one after our cycle (its report, read as shadow mode reads
        a pool's Accounting ads, by `observe_pass`)."""
        from ..adapters.observe import observe_pass
        report = tuple(result.accountant.report(result.quotas or None))
        after = dataclasses.replace(pool, snapshot=dataclasses.replace(pool.snapshot,
                                                                       accounting=report))
        obs = observe_pass(after, result)
        name = self.options.pool_name or self.sc.name
        uid = uuidlib.uuid5(uuidlib.NAMESPACE_URL,
                            f"negotiator-ext-sim:{name}:{self.sc.seed}:{t}").hex
        return PassRecord(
            uuid=uid, pool=self.options.pool_name or self.sc.pool_name, started_at=float(t),
            finished_at=float(t),
            snapshot_time=t, status="complete", reason=None, real_cycle_time=t,
            real_accountant_time=t, shadow_duration=round(duration, 4), capture_duration=0.0,
            shadow_timings=dict(result.timings), pool_weight=result.pool_weight,
            shadow_matches=tuple(entries), submitters=tuple(obs.submitters),
            groups=tuple(obs.groups), comparable=False, snapshot_dir=None)


# how many shared pairs the engine's text store may hold before it is made anew
_STORE_PAIRS = 400_000

# the fewest jobs of each class a schedd offers a cycle (Simulation.offer_limits)
_OFFER_LIMIT_MIN = 32


def _short_queues(queues: dict, cut: dict) -> set[tuple[str, str]]:
    """The queues for which a cycle that was offered only the first jobs of some
    classes (`cut`: (submitter, schedd) -> the ids of the last job offered of each
    class cut short) may have decided otherwise than with every job offered (none:
    the cycle's decisions are those of the whole queues). The jobs left out of a class
    all come after its last one offered (`b`) in the queue's order, so the queue up to
    `b` is the same either way. The schedd's requests (`JobQueue.offers`: runs of
    consecutive jobs of one autocluster) are the same up to the run holding `b`; that
    run may be longer in the whole queue, and hold other jobs after `b`, with a larger
    count when its length set it. That changes nothing while the negotiator, which
    takes a run's jobs in order, has not matched `b` nor used up the count (what the
    run leaves of the schedd's limit, M7, is only read by the runs after it). So: no
    run after it was sent, `b` was not matched, and the run's count, where its length
    set it, was not used up."""
    short = set()
    for key, ids in cut.items():
        q = queues.get(key)
        if q is None:
            short.add(key)      # not offered as a queue of its own: not known
            continue
        if q.started < 0:
            continue            # never asked
        b = next((i for i, e in enumerate(q.jobs) if e[0] in ids), None)
        if b is None or q.started > b or q.used_up >= b or not ids.isdisjoint(q.matched):
            short.add(key)
    return short


_NO_SCHEDD_LIMITS = ScheddLimits(per_user_enabled=False, max_jobs_running=1 << 62)


def _room_for(pslot: SimSlot, job: SimJob) -> bool:
    """Whether partitionable slot `pslot` still has what `job` requests."""
    c = job.cls
    return (c.cpus <= pslot.cpus and c.memory <= pslot.memory and c.disk <= pslot.disk
            and c.gpus <= pslot.gpus)


def _requirements(ad):
    """An ad's Requirements, parsed (`true` without one)."""
    tree = ad.lookup("Requirements") if "Requirements" in ad else None
    return tree if tree is not None else _TRUE


_TRUE = classads.parse_expr("true")


class NegotiatorCadence:
    """When the negotiator's cycles run (rule N1): every NEGOTIATOR_INTERVAL seconds
    after the last one started, or sooner when a schedd asks for one (SCHEDD_SEND_RESCHEDULE:
    a job queued at a schedd that had no idle job, at most once every SCHEDD_MIN_INTERVAL),
    but never within NEGOTIATOR_CYCLE_DELAY of the last cycle's end nor
    NEGOTIATOR_MIN_INTERVAL of its start. A simulated cycle takes no time."""

    def __init__(self, interval: float, min_interval: float, cycle_delay: float,
                 reschedule_on_submit: bool = True, schedd_min_interval: float = 5):
        self.interval = max(1, int(interval))
        self.min_interval, self.cycle_delay = max(0, int(min_interval)), max(0, int(cycle_delay))
        self.reschedule_on_submit = reschedule_on_submit
        self.reschedule_interval = schedd_min_interval if reschedule_on_submit else None

    @classmethod
    def of_config(cls, config) -> "NegotiatorCadence":
        return cls(config.negotiator_interval, config.negotiator_min_interval,
                   config.negotiator_cycle_delay, config.schedd_send_reschedule,
                   config.schedd_min_interval)

    def cycle_after(self, start: int, last: tuple[float, float], pool: SimPool,
                    arrivals: list) -> int:
        """The first cycle at or after `start`, the negotiator's last one having begun and
        ended at `last` (Matchmaker::negotiationTime and the timer it resets): its timer
        (NEGOTIATOR_INTERVAL after that cycle's start, at least NEGOTIATOR_CYCLE_DELAY
        after its end), or sooner when a schedd asks for one, but never within
        NEGOTIATOR_CYCLE_DELAY of that cycle's end nor NEGOTIATOR_MIN_INTERVAL of its
        start. The pool is advanced until then, or until a schedd asks (what happens
        after that is left for the cycle's own step). A request made before is one that
        cycle answered (the snapshot's own idle jobs ask for nothing)."""
        began, ended = last
        pool.reschedules.clear()
        timer = max(began + self.interval, ended + self.cycle_delay)
        if timer <= start:
            return start                    # overdue: at once
        timer = int(math.ceil(timer))
        if not self.reschedule_on_submit:
            return timer
        pool.advance(timer, arrivals, until_reschedule=True)
        if pool.reschedules:
            soonest = max(ended + self.cycle_delay, began + self.min_interval)
            return int(min(timer, max(math.ceil(pool.reschedules[0]), math.ceil(soonest),
                                      start)))
        return timer

    def next_cycle(self, t: int, pool: SimPool, arrivals: list) -> int:
        """The next cycle's time after one at `t` (a simulated cycle takes no time)."""
        return self.cycle_after(t + 1, (t, t), pool, arrivals)


def config_with_knobs(config_path: Path | None, knobs: dict[str, str],
                      directory: str | None = None) -> str:
    """A temporary config file: `config_path`'s text (if any) with `knobs` after it; its
    path (the caller removes it)."""
    import tempfile
    text = config_path.read_text() if config_path else ""
    extra = "".join(f"\n{k} = {v}" for k, v in knobs.items())
    with tempfile.NamedTemporaryFile("w", suffix=".config", delete=False, dir=directory) as f:
        f.write(text + extra + "\n")
        return f.name


def progress_bar(stream=sys.stderr) -> Callable[[float, float, float], None]:
    """Progress on `stream`: simulated time done, wall time so far, ETA. On a terminal one
    line redrawn at most twice a second; otherwise (a log) a line every tenth."""
    tty = hasattr(stream, "isatty") and stream.isatty()
    last = [0.0, -1]

    def show(done: float, span: float, wall: float) -> None:
        frac = done / span if span else 1.0
        eta = wall / frac - wall if frac > 0 else 0.0
        text = (f"{_dur(done)} of {_dur(span)} simulated, {wall:.0f} s, ETA {eta:.0f} s")
        if tty:
            now = _time.monotonic()
            if now - last[0] < 0.5 and done < span:
                return
            last[0] = now
            stream.write(f"\r[{'#' * int(frac * 30):<30}] {text} ")
            if done >= span:
                stream.write("\n")
        else:
            tenth = int(frac * 10)
            if tenth == last[1]:
                return
            last[1] = tenth
            stream.write(f"{int(frac * 100):3d}% {text}\n")
        stream.flush()
    return show


def _dur(s: float) -> str:
    d, rest = divmod(int(s), 86400)
    h, rest = divmod(rest, 3600)
    return f"{d}d{h:02d}h{rest // 60:02d}m" if d else f"{h}h{rest // 60:02d}m"

