"""The schedds' and startds' side of the simulated pool: slots and their claims, each
schedd's queue, what happens to a match (a partitionable slot is split, a job starts, a
preempted one goes back to the queue), jobs ending, claim reuse and jobs removed.

The engine (`sim.engine`) asks the negotiation cycle for matches and hands them here;
the workload sources (`sim.scenario_source`, `sim.history`, `sim.snapshot_queue`) submit
the jobs. What the two daemons do that the negotiator does not decide:

* **Claim reuse** (forecasts; `claim_worklife` set): when a job ends, the schedd starts
  the next idle job of the same submitter at the same schedd on the claim it holds, at
  once and without the negotiator, when the job fits the claimed slot (its Requirements
  and the slot's, the slot's resources), and the claim is younger than `CLAIM_WORKLIFE`
  (the startd refuses a new job on an older claim). Otherwise the claim is released: a
  dynamic slot goes back into its partitionable slot. Scenarios (`simulate`) keep their
  old model: every job ends its claim.
* **Partitionable leftovers** (forecasts; CLAIM_PARTITIONABLE_LEFTOVERS, true by
  default): a claim on a partitionable slot brings the schedd a claim on what is left
  of it, and the schedd fills that with the same submitter's idle jobs that fit, one
  after the other, without the negotiator.
* **The startd's dynamic slots** (forecasts): a job's requests are rounded up as the
  startd's MODIFY_REQUEST_EXPR_* defaults do (cpus to a whole number, memory to 128 MB,
  disk to 1024 KB; unrounded when the rounded request does not fit), and a dynamic slot
  takes the lowest sub-id its partitionable slot has free.
* **Reschedules** (forecasts; SCHEDD_SEND_RESCHEDULE): a job queued at a schedd that had
  no idle job makes it ask the negotiator for a cycle, at most once every
  SCHEDD_MIN_INTERVAL seconds (`reschedules`).
* **Jobs removed** (history): a job the history says was removed leaves the queue, or
  its slot, at the time it was removed.
"""

from __future__ import annotations

import bisect
import heapq
import math
import random
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Sequence

from ..scenario import Arrival, Scenario, SlotShape
from .end_queue import EndQueue

if TYPE_CHECKING:
    from .ads import _Ad
    from .pool_rows import SlotRow


@dataclass(eq=False, slots=True)
class JobClass:
    """What the jobs of one autocluster share, as the schedd and the startd use it: who
    they negotiate as, where they are queued, what they request. A scenario's arrival is
    one class; a recorded job's class is made from its ad (`sim.history`)."""
    submitter: str                    # the accounting principal it negotiates as
    user: str                         # its User (owner@uid_domain)
    schedd: str                       # the schedd that queues it
    group: str | None = None          # its accounting group (RemoteGroup of its slot)
    accounting_group: str | None = None   # the slot's AccountingGroup while it runs
    cpus: float = 1
    memory: float = 0
    disk: float = 0
    gpus: float = 0
    job_prio: int = 0
    concurrency_limits: str | None = None
    # the job's ad as the schedd offers it, (name, text) pairs (see `sim.ads.job_texts`)
    texts: Callable[["SimJob"], list] | None = None
    # ... as a text store's shared pairs, (job, TextAds, what the store keeps of the
    # class) -> the row `TextAds.add` of those pairs makes (see `sim.ads.job_row`)
    row: Callable[["SimJob", object, dict], tuple] | None = None
    base: tuple = ()                  # a recorded class: the (name, text) pairs it shares
    arrival: Arrival | None = None    # a scenario's: the arrival it is
    ad_pairs: tuple | None = None     # ... and what its jobs' ads have alike (`sim.ads`)


@dataclass(slots=True)
class SimJob:
    cluster: int
    proc: int
    cls: JobClass
    duration: float
    qdate: int
    idle_since: int
    status: int = 1                   # 1 idle, 2 running
    slot: "SimSlot | None" = None
    end: float = math.inf
    seq: int = 0                      # queue order within the submitter
    queued: bool = False              # has an entry in its class's queue
    started: int = 0                  # when its current run began
    texts: list | None = None         # its ad's (name, text) pairs while it waits
    row: tuple | None = None          # ... as the engine's text store's shared pairs
    row_gen: int = -1                 # ... of that store's generation
    head: tuple | None = None         # ... and what the schedd's queue view says of it
    fit: tuple | None = None          # ... and its ad for claim reuse (the engine's `_fits`)
    own: tuple | None = None          # a recorded job: its own (name, text) pairs
    removed_at: float = math.inf      # a recorded job removed at that time
    first_start: int | None = None    # when it first started (its queue wait)
    preemptions: int = 0
    weight: float = 1.0               # its slot's SlotWeight while it runs
    left: float | None = None         # when it left the queue (completed, removed)

    @property
    def arrival(self) -> Arrival | None:
        return self.cls.arrival

    @property
    def id(self) -> str:
        return f"{self.cluster}.{self.proc}"


@dataclass(slots=True)
class SimSlot:
    name: str
    machine: str
    index: int
    shape: SlotShape
    cpus: float
    memory: float
    disk: float
    gpus: float
    partitionable: bool = False
    parent: "SimSlot | None" = None   # a dynamic slot's partitionable slot
    job: SimJob | None = None         # static or dynamic slot: its job
    children: list = field(default_factory=list)   # p-slot: its dynamic slots
    next_child: int = 1
    rank_of_job: float | None = None  # the slot's Rank for the job it runs (CurrentRank)
    # a slot that ranks jobs: its Rank for the job its claim was made for, the least a
    # job the schedd starts on the claim later must have (FindRunnableJob)
    claim_rank: float | None = None
    claimed_at: float = 0.0           # when the claim its job runs on began (claim reuse)
    _ad: "_Ad | None" = field(default=None, repr=False, compare=False)   # its ad (`_built`)
    # a static slot: its ad while unclaimed, built once (`_built`), and its row then
    # (`sim.pool_rows.slot_row`, made once for each config)
    _idle_ad: "_Ad | None" = field(default=None, repr=False, compare=False)
    _idle_row: "SlotRow | None" = field(default=None, repr=False, compare=False)
    # a top-level slot: what it and its dynamic slots give the pool (`sim.pool_rows.slot_row`,
    # None: to be made again), its place in the pool's slot list, and the pool's list of
    # slots whose rows are to be made again
    _row: "SlotRow | None" = field(default=None, repr=False, compare=False)
    _pos: int = field(default=-1, repr=False, compare=False)
    _dirty: list | None = field(default=None, repr=False, compare=False)

    @property
    def dynamic(self) -> bool:
        return self.parent is not None

    @property
    def top(self) -> "SimSlot":
        """The top-level slot it is listed under in the pool: its partitionable slot, if
        it is a dynamic slot, else itself."""
        return self.parent if self.parent is not None else self

    def changed(self) -> None:
        """Its ad must be built anew (and with it everything taken from the ad): its
        claim, its resources or its dynamic slots changed. A dynamic slot's change is
        its partitionable slot's too (the pool lists the two together)."""
        self._ad = None
        top = self.top
        if top._row is not None:
            top._row = None
            if top._dirty is not None:
                top._dirty.append(top)


class SimPool:
    """Slots and queues of the simulated pool, and how they change (see the module
    docstring)."""

    def __init__(self, scenario: Scenario, rng: random.Random, *,
                 claim_worklife: float | None = None, record_runs: bool = False,
                 model_startd: bool = False, leftovers: bool = False,
                 reschedule_interval: float | None = None):
        self.sc = scenario
        self.rng = rng
        self.slots: list[SimSlot] = []
        # (submitter, schedd, class) -> its idle jobs in queue order: one autocluster
        # each, so that each can be offered its own first jobs
        self.queues: dict[tuple[str, str, int], list] = {}
        # (submitter, schedd) -> its classes' queues (those of `queues`), so that the
        # schedd looks at one submitter's queues without walking every class of the pool
        self.queues_of: dict[tuple[str, str], list[list]] = {}
        self.running = EndQueue()          # (end, seq, job) of each running job
        self.removals: list[tuple[float, int, SimJob]] = []  # heap of (removed_at, seq, job)
        # (submitter, schedd) -> [idle, running]
        self.counts: dict[tuple[str, str], list[int]] = {}
        self.next_cluster = 1
        self._seq = 0
        self._numbered: dict[str, int] = {}           # machine name prefix -> last number
        self._addresses = 0                           # each slot gets its own address
        self.version = 0                              # + 1 when slots join or leave
        self.dirty: list[SimSlot] = []                # slots changed since the last cycle
        self._by_name: dict[str, SimSlot] = {}        # every slot, dynamic ones too
        self._same_names = False                      # two slots share a name
        # with shared names: name -> the later slot of that name, until slots change
        self._walked: dict[str, SimSlot] | None = None
        self._classes: dict[int, JobClass] = {}       # a scenario arrival's class
        # claim reuse: None, every job ends its claim; else CLAIM_WORKLIFE (seconds), and
        # `fits(job, slot)` says whether a job may run on a slot's claim (set by the engine)
        self.claim_worklife = claim_worklife
        self.fits: Callable[[SimJob, SimSlot], bool] | None = None
        self.reused = 0                               # jobs started on a reused claim
        self.removed = 0                              # recorded jobs removed
        # every run, when asked for: (job, start, end, weight, preempted)
        self.runs: list[tuple] | None = [] if record_runs else None
        self.weight_of: Callable[[SimSlot], float] | None = None
        # a slot's Rank for a job (None: not a number; set by the engine). The startd
        # works out its CurrentRank each time it activates a claim with a job
        # (activate_claim; 0 when not a number), a claim the schedd reuses and a p-slot's
        # leftover claims included; the schedd reuses a claim only for a job the slot
        # ranks at least as high as the job the claim was made for (FindRunnableJob)
        self.rank_of: Callable[[SimSlot, SimJob], float | None] | None = None
        self.model_startd = model_startd
        self.leftovers = leftovers
        self.by_leftovers = 0                         # jobs started on leftover claims
        # reschedules: None, none sent; else each schedd's at most this often
        self.reschedule_interval = reschedule_interval
        self.reschedules: list[float] = []            # times a schedd asked for a cycle
        self._asked: dict[str, float] = {}            # schedd -> when it last asked
        self._idle_at: dict[str, int] = {}            # schedd -> its idle jobs
        for shape in scenario.slots:
            self.add_slots(shape, shape.count)

    # -- slots
    def add_slots(self, shape: SlotShape, count: int) -> None:
        """`count` slots of `shape`: a recorded slot keeps its name; others are numbered
        per machine name prefix across the whole pool (slots that join later continue
        the numbering)."""
        self.version += 1
        for _ in range(count):
            self._addresses += 1
            i = self._addresses
            if shape.machine:
                machine, name = shape.machine, shape.slot_name or f"slot1@{shape.machine}"
            else:
                n = self._numbered.get(shape.name, 0) + 1
                self._numbered[shape.name] = n
                machine = f"{shape.name}{n:05d}.{self.sc.domain}"
                name = f"slot1@{machine}"
            self.slots.append(SimSlot(
                name=name, machine=machine, index=i, shape=shape,
                cpus=shape.cpus, memory=shape.memory, disk=shape.disk, gpus=shape.gpus,
                partitionable=shape.partitionable, _dirty=self.dirty))
            self._named(self.slots[-1])

    def _named(self, s: SimSlot) -> None:
        self._walked = None
        if self._by_name.setdefault(s.name, s) is not s:
            self._same_names = True

    def _unnamed(self, s: SimSlot) -> None:
        self._walked = None
        if self._by_name.get(s.name) is s:
            del self._by_name[s.name]

    def slot_named(self, name: str) -> SimSlot | None:
        """The slot (dynamic ones too) of that name; of two of the same name, the later
        in the pool's order."""
        if not self._same_names:
            return self._by_name.get(name)
        if self._walked is None:            # once per change of the slots, not per match
            self._walked = {x.name: x for s in self.slots for x in [s] + s.children}
        return self._walked.get(name)

    def remove_slots(self, prefix: str, count: int, t: int) -> int:
        """Up to `count` slots whose machine starts with `prefix` leave (their jobs go back
        to the queue); the number removed."""
        self.version += 1
        gone = 0
        for s in list(self.slots):
            if gone >= count:
                break
            if not s.machine.startswith(prefix):
                continue
            for d in list(s.children):
                self.evict(d.job, t)
            if s.job is not None:
                self.evict(s.job, t)
            self.slots.remove(s)
            self._unnamed(s)
            s._row = s._dirty = None
            gone += 1
        return gone

    # -- jobs: each submitter's queue is a list sorted by (-JobPrio, submission order);
    #    entries of jobs that started stay until they reach the front (only jobs near the
    #    front are ever offered, so that is where they are)
    def _push(self, job: SimJob) -> None:
        if not job.queued:
            job.queued = True
            c = job.cls
            q = self.queues.get((c.submitter, c.schedd, id(c)))
            if q is None:
                q = self.queues[(c.submitter, c.schedd, id(c))] = []
                self.queues_of.setdefault((c.submitter, c.schedd), []).append(q)
            key = (-c.job_prio, job.seq, job)
            if not q or q[-1][:2] < key[:2]:
                q.append(key)
            else:
                bisect.insort(q, key, key=lambda e: e[:2])

    def class_of(self, a: Arrival) -> JobClass:
        """A scenario arrival's job class."""
        got = self._classes.get(id(a))
        if got is None:
            from .ads import scenario_job_row, scenario_job_texts
            sc = self.sc
            got = self._classes[id(a)] = JobClass(
                submitter=a.submitter_name(sc.domain), user=a.user_name(sc.domain),
                schedd=sc.schedd, group=a.group,
                accounting_group=a.submitter_name(sc.domain) if a.group else None,
                cpus=a.cpus, memory=a.memory, disk=a.disk, gpus=a.gpus, job_prio=a.job_prio,
                concurrency_limits=a.concurrency_limits,
                texts=lambda job: scenario_job_texts(job, sc),
                row=lambda job, ads, kept: scenario_job_row(job, sc, ads, kept), arrival=a)
        return got

    def submit(self, a: Arrival, count: int, t: int) -> None:
        """`count` jobs of arrival `a` are submitted at time `t` (their QDate)."""
        cls = self.class_of(a)
        cluster = self.next_cluster
        self.next_cluster += 1
        for p in range(count):
            self.queue(SimJob(cluster=cluster, proc=p, cls=cls,
                              duration=a.duration.draw(self.rng), qdate=t, idle_since=t))

    def queue(self, job: SimJob, t: float | None = None) -> None:
        """An idle job joins its schedd's queue (behind the jobs queued before it) at time
        `t`."""
        self._seq += 1
        job.seq = self._seq
        self._push(job)
        self.counts.setdefault((job.cls.submitter, job.cls.schedd), [0, 0])[0] += 1
        if self.reschedule_interval is not None and t is not None:
            schedd = job.cls.schedd
            idle = self._idle_at.get(schedd, 0)
            self._idle_at[schedd] = idle + 1
            if idle == 0 and t - self._asked.get(schedd, -math.inf) >= self.reschedule_interval:
                self._asked[schedd] = t
                self.reschedules.append(t)
        if job.removed_at != math.inf:
            heapq.heappush(self.removals, (job.removed_at, job.seq, job))

    def evict(self, job: SimJob | None, t: int, keep_slot: bool = False) -> None:
        """A job loses its slot (preempted, or its slot left): back to the queue, to start
        over (a vanilla job restarts from the beginning). `keep_slot`: the slot stays as
        it is for the job that preempts this one (a dynamic slot is not given back to its
        partitionable slot: the preempting job takes over the claim)."""
        if job is None or job.status != 2:
            return
        self._ran(job, t, preempted=True)
        if keep_slot and job.slot is not None:
            job.slot.job = None
            job.slot.changed()
            job.slot = None
        else:
            self._free(job)
        job.status, job.idle_since, job.end, job.texts, job.row = 1, t, math.inf, None, None
        job.preemptions += 1
        self._push(job)
        c = self.counts[(job.cls.submitter, job.cls.schedd)]
        c[0] += 1
        c[1] -= 1
        self._idle(job, 1)

    def _idle(self, job: SimJob, change: int) -> None:
        if self.reschedule_interval is not None:
            self._idle_at[job.cls.schedd] = self._idle_at.get(job.cls.schedd, 0) + change

    def _ran(self, job: SimJob, t: float, preempted: bool = False) -> None:
        if self.runs is not None:
            self.runs.append((job, job.started, t, job.weight, preempted))

    def _free(self, job: SimJob) -> None:
        s = job.slot
        job.slot = None
        if s is not None:
            s.job = None
            s.changed()
            self._release(s)

    def _release(self, s: SimSlot) -> None:
        """The claim on `s` ends: a dynamic slot goes back into its partitionable slot."""
        s.claim_rank = None
        p = s.parent
        if p is not None:
            p.cpus += s.cpus
            p.memory += s.memory
            p.disk += s.disk
            p.gpus += s.gpus
            p.children.remove(s)
            self._unnamed(s)
            p.changed()

    def finish_until(self, t: float) -> int:
        """Jobs whose run ended by `t` leave the pool; how many."""
        n = 0
        running = self.running
        while (first := running.first()) is not None and first[0] <= t:
            end, _, job = running.pop()
            if job.status != 2 or job.end != end:
                continue          # evicted since (and requeued)
            self._end(job, end)
            n += 1
        return n

    def _end(self, job: SimJob, end: float) -> None:
        self._ran(job, end)
        slot = job.slot
        job.status, job.left = 3, end
        self.counts[(job.cls.submitter, job.cls.schedd)][1] -= 1
        if slot is None or self.claim_worklife is None:
            self._free(job)
            return
        job.slot = None
        slot.job = None
        slot.changed()
        nxt = self._next_on_claim(job.cls, slot, end)
        if nxt is None:
            self._release(slot)
        else:
            self.reused += 1
            self.start(nxt, slot, int(end), claimed_at=slot.claimed_at)

    def _next_on_claim(self, cls: JobClass, slot: SimSlot, t: float) -> SimJob | None:
        """The job the schedd starts on the claim a job of `cls` just gave back: the first
        idle job (in its queue order) of the same submitter at the same schedd that fits
        the slot, while the claim is younger than CLAIM_WORKLIFE."""
        if t - slot.claimed_at > self.claim_worklife:
            return None
        return self._first_fitting(cls, slot, slot.claim_rank)

    def fill_leftovers(self, pslot: SimSlot, cls: JobClass, t: int) -> int:
        """The schedd's claims on what is left of partitionable slot `pslot` after one of
        its jobs of `cls` was started there: the submitter's idle jobs that fit, one
        after the other; how many started."""
        n = 0
        while self.leftovers:
            job = self._first_fitting(cls, pslot)
            if job is None:
                break
            self.start(job, self.carve(pslot, job), t)
            n += 1
        self.by_leftovers += n
        return n

    def find_runnable_job(self, cls: JobClass, slot: SimSlot,
                          matched: SimJob | None = None) -> SimJob | None:
        """What the schedd does with a match whose job (`matched`, of `cls`) no longer
        waits (it started on a leftover claim in the meantime): FindRunnableJob, the
        first idle job of the same submitter (and concurrency limits) that the matched
        slot takes, and that the slot ranks at least as high as the matched job, else
        none (the match goes unused)."""
        least = None
        if matched is not None and self.rank_of is not None and slot.shape.ranks_jobs():
            least = self.rank_of(slot, matched)
        return self._first_fitting(cls, slot, least)

    def _first_fitting(self, cls: JobClass, slot: SimSlot,
                       least_rank: float | None = None) -> SimJob | None:
        """The first idle job (in the schedd's order: JobPrio, then submission) of the
        submitter of `cls` at its schedd, with the same concurrency limits, that fits
        `slot` (`fits`), and that the slot ranks no lower than `least_rank` (given only
        for a slot that ranks jobs: a Rank that is not a number for the job passes, as
        FindRunnableJob has it)."""
        if self.fits is None:
            return None
        best = None
        for q in self.queues_of.get((cls.submitter, cls.schedd), ()):
            for e in q:
                job = e[2]
                if job.status != 1:
                    continue
                if best is not None and e[:2] >= best[:2]:
                    break
                if (job.cls.concurrency_limits == cls.concurrency_limits
                        and self.fits(job, slot)
                        and not (least_rank is not None
                                 and (r := self.rank_of(slot, job)) is not None
                                 and r < least_rank)):
                    best = e
                break               # a class's first idle job stands for the class
        return best[2] if best is not None else None

    def advance(self, t: float, arrivals: list, until_reschedule: bool = False) -> None:
        """Everything that happens up to `t` between two cycles, in time order: jobs end
        (and their claims are reused), recorded jobs are removed, jobs arrive (`arrivals`:
        a heap of (time, order, submit) where `submit(pool, time)` queues the jobs).
        `until_reschedule`: stop once a schedd has asked for a cycle (`reschedules`)."""
        inf = (math.inf,)
        while True:
            run = self.running.first() or inf
            gone = self.removals[0] if self.removals else inf
            new = arrivals[0] if arrivals else inf
            first = min(run[0], gone[0], new[0])
            if first > t:
                return
            if run[0] == first:
                end, _, job = self.running.pop()
                if job.status == 2 and job.end == end:
                    self._end(job, end)
            elif gone[0] == first:
                _, _, job = heapq.heappop(self.removals)
                self.remove(job, first)
            else:
                at, _, submit = heapq.heappop(arrivals)
                submit(self, at)
                if until_reschedule and self.reschedules:
                    return

    def remove(self, job: SimJob, t: float) -> None:
        """condor_rm: the job leaves the queue, or its slot (the claim is released)."""
        if job.status == 1:
            self.counts[(job.cls.submitter, job.cls.schedd)][0] -= 1
            self._idle(job, -1)
        elif job.status == 2:
            self._ran(job, t)
            self._free(job)
            self.counts[(job.cls.submitter, job.cls.schedd)][1] -= 1
        else:
            return
        job.status, job.left = 4, t
        self.removed += 1

    def start(self, job: SimJob, slot: SimSlot, t: int, claimed_at: float | None = None) -> None:
        job.status, job.slot, job.end = 2, slot, t + job.duration
        job.started = t
        job.fit = None
        if job.first_start is None:
            job.first_start = t
        slot.job = job
        slot.claimed_at = t if claimed_at is None else claimed_at
        slot.changed()
        if self.rank_of is not None and slot.shape.ranks_jobs():
            rank = self.rank_of(slot, job)
            slot.rank_of_job = 0.0 if rank is None else rank
            slot.changed()              # (its CurrentRank is set now)
            if claimed_at is None or slot.claim_rank is None:
                # the rank the schedd keeps with the claim (AddMrec; the claimed slot ad)
                slot.claim_rank = slot.rank_of_job
        if self.weight_of is not None:
            job.weight = self.weight_of(slot)
        self.running.push((job.end, job.seq, job))
        c = self.counts[(job.cls.submitter, job.cls.schedd)]
        c[0] -= 1
        c[1] += 1
        self._idle(job, -1)

    def idle_jobs(self, key: tuple[str, str], k: int,
                  cut: list[SimJob] | None = None) -> list[SimJob]:
        """A submitter's idle jobs at a schedd that the schedd offers: the first `k` of
        each of its job classes (an autocluster), in the schedd's order (JobPrio, then
        submission). Each class gets its own `k`, so jobs that cannot match never hide
        the ones behind them. `cut`: the last job offered of each class that has more
        idle jobs than `k` is appended to it."""
        if k <= 0:
            return []
        out: list = []
        for q in self.queues_of.get(key, ()):
            if not q:
                continue
            n = 0
            while n < len(q) and q[n][2].status != 1:     # jobs that started since
                q[n][2].queued = False
                n += 1
            if n:
                del q[:n]
            got = 0
            last = None
            for e in q:
                if e[2].status == 1:
                    if got >= k:
                        if cut is not None:
                            cut.append(last[2])
                        break
                    out.append(e)
                    last = e
                    got += 1
        out.sort(key=lambda e: e[:2])
        return [e[2] for e in out]

    def carve(self, pslot: SimSlot, job: SimJob, name: str | None = None,
              size: Sequence[float] | None = None) -> SimSlot:
        """The startd splits a partitionable slot for a matched job (its requests, or
        `size`: cpus, memory, disk, gpus); a recorded dynamic slot keeps its `name`."""
        c = job.cls
        want = size or (c.cpus, c.memory, c.disk, c.gpus)
        if size is None and self.model_startd:
            rounded = (math.ceil(c.cpus), _round_up(c.memory, 128), _round_up(c.disk, 1024),
                       c.gpus)
            if (rounded[0] <= pslot.cpus and rounded[1] <= pslot.memory
                    and rounded[2] <= pslot.disk):
                want = rounded
        cpus = min(want[0], pslot.cpus)
        mem = min(want[1], pslot.memory)
        disk = min(want[2], pslot.disk)
        gpus = min(want[3], pslot.gpus)
        pslot.cpus -= cpus
        pslot.memory -= mem
        pslot.disk -= disk
        pslot.gpus -= gpus
        if self.model_startd:          # the lowest sub-id free
            taken = {x.name for x in pslot.children}
            head, _, host = pslot.name.partition("@")
            n = 1
            while f"{head}_{n}@{host}" in taken:
                n += 1
            auto = f"{head}_{n}@{host}"
        else:
            n = pslot.next_child
            pslot.next_child += 1
            auto = f"slot1_{n}@{pslot.machine}"
        d = SimSlot(name=name or auto, machine=pslot.machine,
                    index=pslot.index, shape=pslot.shape, cpus=cpus, memory=mem, disk=disk,
                    gpus=gpus, parent=pslot)
        pslot.children.append(d)
        self._named(d)
        pslot.changed()
        return d


def _round_up(x: float, step: int) -> float:
    """quantize(x, {step}): `x` rounded up to a multiple of `step`."""
    return float(math.ceil(x / step) * step) if x > 0 else 0.0
