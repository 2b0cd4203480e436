"""The what-if simulator (`negotiator-ext simulate`): the real core, cycle after cycle,
over simulated time.

A `Scenario` (negotiator_ext.scenario) gives the slots, the config, the starting
accountant, the workload and changes at given times. Each cycle at time `t`:

1. jobs whose run ended by `t` leave, and free their slot (a dynamic slot goes back into
   its partitionable slot); jobs that arrived by `t` join their submitter's queue;
   changes due by `t` are made (a config change, a factor, slots leaving or joining);
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

The simulated pool is its own reality: each pass's "real" figures are the simulated
accountant's, and there is nothing to compare.

Speed: the schedd only needs to offer as many idle jobs as could start this cycle (a
submitter's first `free cpus` jobs in its queue order; all of them when preemption is
possible), and the submitter ads carry the true counts. When no claimed slot can be
taken (no PREEMPTION_REQUIREMENTS and slots whose Rank cannot prefer another job), the
claimed slots are left out of the candidates the matchmaker sees while still counting in
the pool's size and the accountant (`Pool.all_slot_ads`); the result is the same.

From cycle to cycle the simulator keeps what did not change: a slot's ad, its figures
(usage, pie weight, effective size) and texts are made once per change of the slot
(`SimSlot.changed`), and the pool's lists are patched where slots changed instead of
walking every slot; the accountant's CheckMatches is told which slots those are
(`core.accountant.SlotChanges`) and looks at them alone. The cycle writes into the ads it gets (NEGOTIATOR_MATCH_EXPRS, the
remote user's figures): those are handed over as copies, or without texts (the cycle
reads them from the ad), and an ad a cycle may have written into never passes its texts
on. The cyclic GC is paused during a run, with a young collection after each cycle.
"""

from __future__ import annotations

import bisect
import dataclasses
import gc
import heapq
import itertools
import math
import random
import re
import sys
import time as _time
import uuid as uuidlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import classad2

from .core import classads
from .core.accountant import AccountantState, SlotChanges
from .core.adtext import TextAds, TextStore
from .core.config import priority_preemption_off
from .core.records import MatchEntry, PassRecord
from .core.schedd_limits import ScheddLimits
from .core.slots import CURRENT_USER_ATTRS
from .errors import InputError
from .limits import paused_gc
from .pool import config_warnings
from .scenario import Arrival, Change, Scenario, SlotShape

SCHEDD_ADDR = "<10.255.0.1:9618>"


# ---- the simulated pool ---------------------------------------------------------------------

@dataclass
class SimJob:
    cluster: int
    proc: int
    arrival: Arrival
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

    @property
    def id(self) -> str:
        return f"{self.cluster}.{self.proc}"


@dataclass
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
    _ad: _Ad | None = field(default=None, repr=False, compare=False)   # its ad (`_built`)
    # a top-level slot: what it and its dynamic slots give the pool (`Simulation._slot_row`,
    # None: to be made again), its place in the pool's slot list, and the pool's list of
    # slots whose rows are to be made again
    _row: _SlotRow | None = field(default=None, repr=False, compare=False)
    _pos: int = field(default=-1, repr=False, compare=False)
    _dirty: list | None = field(default=None, repr=False, compare=False)

    @property
    def dynamic(self) -> bool:
        return self.parent is not None

    def changed(self) -> None:
        """Its ad must be built anew (and with it everything taken from the ad): its
        claim, its resources or its dynamic slots changed. A dynamic slot's change is
        its partitionable slot's too (the pool lists the two together)."""
        self._ad = None
        top = self.parent if self.parent is not None else self
        if top._row is not None:
            top._row = None
            if top._dirty is not None:
                top._dirty.append(top)


class SimPool:
    """Slots and queues of the simulated pool, and how they change."""

    def __init__(self, scenario: Scenario, rng: random.Random):
        self.sc = scenario
        self.rng = rng
        self.slots: list[SimSlot] = []
        # (submitter, arrival) -> its idle jobs in queue order: one autocluster each, so
        # that each can be offered its own first jobs
        self.queues: dict[tuple[str, int], list] = {}
        self.running: list[tuple[float, int, SimJob]] = []   # heap of (end, seq, job)
        self.counts: dict[str, list[int]] = {}        # submitter -> [idle, running]
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
    def _push(self, name: str, job: SimJob) -> None:
        if not job.queued:
            job.queued = True
            q = self.queues.setdefault((name, id(job.arrival)), [])
            key = (-job.arrival.job_prio, job.seq, job)
            if not q or q[-1][:2] < key[:2]:
                q.append(key)
            else:
                bisect.insort(q, key, key=lambda e: e[:2])

    def submit(self, a: Arrival, count: int, t: int) -> None:
        """`count` jobs of arrival `a` are submitted at time `t` (their QDate)."""
        cluster = self.next_cluster
        self.next_cluster += 1
        name = a.submitter_name(self.sc.domain)
        c = self.counts.setdefault(name, [0, 0])
        for p in range(count):
            self._seq += 1
            job = SimJob(cluster=cluster, proc=p, arrival=a, duration=a.duration.draw(self.rng),
                         qdate=t, idle_since=t, seq=self._seq)
            self._push(name, job)
        c[0] += count

    def evict(self, job: SimJob | None, t: int, keep_slot: bool = False) -> None:
        """A job loses its slot (preempted, or its slot left): back to the queue, to start
        over (a vanilla job restarts from the beginning). `keep_slot`: the slot stays as
        it is for the job that preempts this one (a dynamic slot is not given back to its
        partitionable slot: the preempting job takes over the claim)."""
        if job is None or job.status != 2:
            return
        if keep_slot and job.slot is not None:
            job.slot.job = None
            job.slot.changed()
            job.slot = None
        else:
            self._free(job)
        job.status, job.idle_since, job.end, job.texts = 1, t, math.inf, None
        name = job.arrival.submitter_name(self.sc.domain)
        self._push(name, job)
        c = self.counts[name]
        c[0] += 1
        c[1] -= 1

    def _free(self, job: SimJob) -> None:
        s = job.slot
        job.slot = None
        if s is None:
            return
        s.job = None
        s.changed()
        p = s.parent
        if p is not None:                       # a dynamic slot goes back into its p-slot
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
        while self.running and self.running[0][0] <= t:
            end, _, job = heapq.heappop(self.running)
            if job.status != 2 or job.end != end:
                continue          # evicted since (and requeued)
            self._free(job)
            job.status = 3
            self.counts[job.arrival.submitter_name(self.sc.domain)][1] -= 1
            n += 1
        return n

    def start(self, job: SimJob, slot: SimSlot, t: int) -> None:
        name = job.arrival.submitter_name(self.sc.domain)
        job.status, job.slot, job.end = 2, slot, t + job.duration
        job.started = t
        slot.job = job
        slot.changed()
        heapq.heappush(self.running, (job.end, job.seq, job))
        c = self.counts[name]
        c[0] -= 1
        c[1] += 1

    def idle_jobs(self, name: str, k: int) -> list[SimJob]:
        """The submitter's idle jobs the schedd offers: the first `k` of each of its job
        classes (an arrival: one autocluster), in the schedd's order (JobPrio, then
        submission). Each class gets its own `k`, so jobs that cannot match never hide
        the ones behind them."""
        if k <= 0:
            return []
        out: list = []
        for (owner, _), q in self.queues.items():
            if owner != name or not q:
                continue
            n = 0
            while n < len(q) and q[n][2].status != 1:     # jobs that started since
                q[n][2].queued = False
                n += 1
            if n:
                del q[:n]
            got = 0
            for e in q:
                if e[2].status == 1:
                    out.append(e)
                    got += 1
                    if got >= k:
                        break
        out.sort(key=lambda e: e[:2])
        return [e[2] for e in out]

    def carve(self, pslot: SimSlot, job: SimJob) -> SimSlot:
        """The startd splits a partitionable slot for a matched job (its requests)."""
        a = job.arrival
        cpus = min(a.cpus, pslot.cpus)
        mem = min(a.memory, pslot.memory)
        disk = min(a.disk, pslot.disk)
        gpus = min(a.gpus, pslot.gpus)
        pslot.cpus -= cpus
        pslot.memory -= mem
        pslot.disk -= disk
        pslot.gpus -= gpus
        n = pslot.next_child
        pslot.next_child += 1
        d = SimSlot(name=f"slot1_{n}@{pslot.machine}", machine=pslot.machine,
                    index=pslot.index, shape=pslot.shape, cpus=cpus, memory=mem, disk=disk,
                    gpus=gpus, parent=pslot)
        pslot.children.append(d)
        self._named(d)
        pslot.changed()
        return d


# ---- ads --------------------------------------------------------------------------------------

class _Ad:
    """A slot ad as built, and what is taken from it: its figures under a config
    (`_facts`) and its texts (`_slot_texts`). `written`: it was handed to a cycle that
    may have written into it (its texts are then the cycle's to read from it)."""
    __slots__ = ("ad", "facts", "texts", "written")

    def __init__(self, ad: classad2.ClassAd):
        self.ad = ad
        self.facts: tuple | None = None
        self.texts: tuple | None = None
        self.written = False


def _slot_ad(s: SimSlot, sc: Scenario) -> classad2.ClassAd:
    """The slot's ad as its startd advertises it (cached until the slot changes)."""
    return _built(s, sc).ad


def _built(s: SimSlot, sc: Scenario) -> _Ad:
    """The slot's ad as built, kept until the slot changes."""
    b = s._ad
    if b is None:
        b = s._ad = _Ad(_new_slot_ad(s, sc))
    return b


def _new_slot_ad(s: SimSlot, sc: Scenario, inline: bool = True) -> classad2.ClassAd:
    """The slot's ad, parsed from its old-syntax text in one classad2 call (setting the
    attributes one by one costs four times as much). When one of the shape's own
    attributes would repeat a name or spans lines (or not `inline`), the attributes are
    set one by one, the shape's after the slot's and before the job's."""
    ip = f"<10.{(s.index >> 16) & 255}.{(s.index >> 8) & 255}.{s.index & 255}:9618>"
    vals: dict = {"MyType": "Machine", "Name": s.name, "Machine": s.machine,
                  "StartdIpAddr": ip, "MyAddress": ip, "Arch": "X86_64", "OpSys": "LINUX",
                  "SlotID": 1, "Cpus": _num(s.cpus), "Memory": _num(s.memory),
                  "Disk": _num(s.disk), "TotalCpus": _num(s.shape.cpus),
                  "TotalMemory": _num(s.shape.memory), "Rank": 0.0, "CurrentRank": 0.0,
                  "START": True}
    if s.shape.gpus:
        vals["GPUs"] = _num(s.gpus)
    vals["Requirements"] = _Expr("START")
    if s.partitionable:
        vals["PartitionableSlot"] = True
        vals["SlotType"] = "Partitionable"
        vals["NumDynamicSlots"] = len(s.children)
        vals["NumClaims"] = int(s.cpus)     # the claim ids a consumption policy hands out
    elif s.parent is not None:
        vals["DynamicSlot"] = True
        vals["SlotType"] = "Dynamic"
        vals["ParentSlotName"] = s.parent.name
    shape = s.shape.attrs
    job = s.job
    later: dict = {}
    if job is not None:
        a = job.arrival
        user = a.user_name(sc.domain)
        later.update(State="Claimed", Activity="Busy", RemoteUser=user, RemoteOwner=user,
                     RemoteScheddName=sc.schedd, JobId=job.id,
                     EnteredCurrentState=job.started, JobStart=job.started)
        if s.rank_of_job is not None:
            later["CurrentRank"] = s.rank_of_job
        if a.group:
            later.update(AccountingGroup=a.submitter_name(sc.domain), RemoteGroup=a.group,
                         RemoteNegotiatingGroup=a.group)
        if a.concurrency_limits:
            later["ConcurrencyLimits"] = a.concurrency_limits
    else:
        later.update(State="Unclaimed", Activity="Idle")
    if inline:
        # in the order they were always set: the slot's, the shape's, the job's (a
        # later value replaces an earlier one of the same name, spelt the same)
        merged, spelt = dict(vals), {k.lower(): k for k in vals}
        for k, v in itertools.chain(((k, _Expr(t)) for k, t in shape.items()),
                                    later.items()):
            if spelt.setdefault(k.lower(), k) != k:
                merged = None
                break
            merged[k] = v
        # a control character (a line break) in a text or a name: set one by one
        if merged is not None and any(_CONTROL.search(v.text if type(v) is _Expr else v)
                                      for v in merged.values() if type(v) in (_Expr, str)):
            merged = None
        if merged is not None:
            ad = classads.parse_old_ad("\n".join(f"{k} = {_text(v)}" for k, v in merged.items()))
            if len(ad) == len(merged):
                return ad
    ad = classad2.ClassAd()
    for k, v in vals.items():
        ad[k] = classad2.ExprTree(v.text) if type(v) is _Expr else v
    for k, text in shape.items():
        ad[k] = classads.parse_expr(text)
    for k, v in later.items():
        ad[k] = v
    return ad


_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


class _Expr:
    """An expression's text in a slot ad being built (`_new_slot_ad`)."""
    __slots__ = ("text",)

    def __init__(self, text: str):
        self.text = text


def _text(v) -> str:
    """A value of `_new_slot_ad` as its ad's text shows it."""
    if type(v) is _Expr:
        return v.text
    if v is True or v is False:
        return "true" if v else "false"
    if isinstance(v, str):
        return _q(v)
    return repr(v)


def _rank_of(slot: SimSlot, job: SimJob, sc: Scenario) -> float | None:
    """The slot's Rank for the job it now runs: its CurrentRank (rank preemption needs a
    better one)."""
    rank = next(v for k, v in slot.shape.attrs.items() if k.lower() == "rank")
    row = TextAds(TextStore())
    row.add(_job_texts(job, sc))
    got = classads.eval_match(classads.parse_expr(rank), _slot_ad(slot, sc), row.ad(0))
    slot.changed()          # its CurrentRank is set now
    if isinstance(got, bool):                 # a boolean Rank ranks as 1 or 0
        return float(got)
    return float(got) if classads.is_number(got) else 0.0


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


def _num(x: float):
    return int(x) if float(x).is_integer() else float(x)


def _job_texts(job: SimJob, sc: Scenario) -> list[tuple[str, str]]:
    """The job's ad as the schedd offers it, as (name, text) pairs; kept while it waits
    (only an eviction changes them: EnteredCurrentStatus)."""
    if job.texts is None:
        job.texts = _texts_of(job, sc)
    return job.texts


def _texts_of(job: SimJob, sc: Scenario) -> list[tuple[str, str]]:
    a = job.arrival
    user = a.user_name(sc.domain)
    pairs = [("MyType", '"Job"'), ("TargetType", '"Machine"'), ("ClusterId", str(job.cluster)),
             ("ProcId", str(job.proc)), ("JobStatus", "1"), ("JobUniverse", "5"),
             ("Owner", _q(a.user)), ("User", _q(user)), ("QDate", str(job.qdate)),
             ("EnteredCurrentStatus", str(job.idle_since)), ("JobPrio", str(a.job_prio)),
             ("RequestCpus", _lit(a.cpus)), ("RequestMemory", _lit(a.memory)),
             ("RequestDisk", _lit(a.disk)),
             ("GlobalJobId", _q(f"{sc.schedd}#{job.id}#{job.qdate}")),
             ("Requirements", a.requirements_text())]
    if a.gpus:
        pairs.append(("RequestGPUs", _lit(a.gpus)))
    if a.accounting_group():
        pairs.append(("AccountingGroup", _q(a.accounting_group())))
    if a.group:
        pairs.append(("AcctGroup", _q(a.group)))
    if a.rank:
        pairs.append(("Rank", a.rank))
    if a.concurrency_limits:
        pairs.append(("ConcurrencyLimits", _q(a.concurrency_limits)))
    if a.nice_user:
        pairs.append(("NiceUser", "true"))
    for k, text in a.attrs.items():
        pairs.append((k, text))
    return pairs


def _q(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _lit(x: float) -> str:
    return str(_num(x))


# ---- the loop ---------------------------------------------------------------------------------

@dataclass
class SimReport:
    passes: int
    matches: int
    preemptions: int
    span: float
    wall: float
    ledger: str
    skipped: int = 0          # replay: recorded snapshots no longer on disk


class Simulation:
    """One run of a scenario, recorded in a ledger (see the module docstring)."""

    def __init__(self, scenario: Scenario, ledger, *,
                 progress: Callable[[float, float, float], None] | None = None,
                 batch: int = 200, shortcuts: bool = True):
        """`shortcuts=False` offers every idle job and every slot to every cycle (slow; the
        tests compare it with the default)."""
        from .core.groups import GroupTree
        self.sc = scenario
        self.ledger = ledger
        self.progress = progress
        self.batch = batch
        self.shortcuts = shortcuts
        self.rng = random.Random(scenario.seed)
        self.pool = SimPool(scenario, self.rng)
        # every config the run will use, read now: a bad knob in a change is found before
        # the run, named with the scenario
        self.changes = sorted(scenario.changes, key=lambda c: c.at)
        self.configs: dict[int, object] = {}
        knobs = dict(scenario.knobs)
        texts = list(knobs.values())
        self.config = self._load_config(knobs, "config/knobs")
        for c in self.changes:
            if c.kind == "config":
                knobs.update(c.knobs)
                texts += list(c.knobs.values())
                self.configs[id(c)] = self._load_config(dict(knobs), f"changes (at {c.at:g} s)")
        self.groups = GroupTree(self.config)
        self.warnings: list[str] = config_warnings(self.config, self.groups)
        self._check_groups()
        self.state = self._initial_accountant()
        self.pending: list[PassRecord] = []
        self.rr_times: dict[str, float] = {}
        self.arrivals = self._arrival_events()
        self.matches = 0
        self.preemptions = 0
        self.unresolved = 0          # matches naming a slot or job the pool does not have
        self._offered: dict[str, SimJob] = {}
        self._rows: _PoolRows | None = None
        # the fewest cpus any job of the scenario requests (a p-slot with less is full)
        self.least_cpus = min((a.cpus for a in scenario.workload), default=1)
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

    # -- setup
    def _load_config(self, knobs: dict[str, str], where: str):
        """The scenario's config file with `knobs` appended, read through HTCondor's own
        config system (from a temporary file: the bindings read files); errors name the
        scenario."""
        from .adapters.condor_config import load_config
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
        from .adapters.accounting_ads import state_from_accounting_ads
        from .adapters.adfiles import read_ads
        state, _ = state_from_accounting_ads(read_ads(self.sc.accountant), (), self.groups,
                                             str(self.sc.accountant))
        return state

    def _arrival_events(self) -> list[tuple[int, int, Arrival]]:
        """(time, order, arrival) for every batch of jobs in the span."""
        out = []
        end = self.sc.start + self.sc.span
        for i, a in enumerate(self.sc.workload):
            t = self.sc.start + a.at
            n = 0
            while t <= end:
                out.append((int(t), i, a))
                n += 1
                if not a.every or (a.repeat is not None and n >= a.repeat):
                    break
                t += a.every
        heapq.heapify(out)
        return out

    # -- one cycle
    def run(self) -> SimReport:
        wall0 = _time.perf_counter()
        sc = self.sc
        n = 0
        t = sc.start
        end = sc.start + sc.span
        # No cyclic GC during the run but a young collection after each cycle: what a
        # cycle leaves behind is young, and the collector would otherwise walk the
        # pool's long-lived jobs, slots and ads again and again for nothing (a sixth of
        # a cycle at 10,000 slots). What the run drops is freed by reference counting as
        # always; cycles that outlive a collection wait for the collector after the run.
        with paused_gc(collect=False):
            while t <= end:
                self.step(t)
                n += 1
                if len(self.pending) >= self.batch:
                    self.flush()
                if self.progress is not None:
                    self.progress(t - sc.start, sc.span, _time.perf_counter() - wall0)
                t += sc.interval
                gc.collect(1)
        self.flush()
        return SimReport(passes=n, matches=self.matches, preemptions=self.preemptions,
                         span=sc.span, wall=_time.perf_counter() - wall0,
                         ledger=self.ledger.source)

    def flush(self) -> None:
        if self.pending:
            self.ledger.record_passes(self.pending)
            self.pending = []

    def step(self, t: int) -> None:
        from .cycle import run_cycle
        p = self.pool
        p.finish_until(t)
        while self.arrivals and self.arrivals[0][0] <= t:
            t_arrival, _, a = heapq.heappop(self.arrivals)
            p.submit(a, a.count, t_arrival)
        while self.changes and self.sc.start + self.changes[0].at <= t:
            self._change(self.changes.pop(0), t)
        pool = self._pool(t)
        started = _time.perf_counter()
        result = run_cycle(pool, t, self.rr_times)
        duration = _time.perf_counter() - started
        # the Resource records are handed over, not copied: after the cycle only the pass
        # record reads the accountant, and the next cycle's accountant copies them
        self.state = result.accountant.to_state(copy_resources=False)
        self.rr_times = result.rr_times         # carried, as the negotiator does
        entries = self._apply(result, t)
        self.pending.append(self._record(t, pool, result, entries, duration))

    def _change(self, c: Change, t: int) -> None:
        from .core.accountant import Accountant
        from .core.groups import GroupTree
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

    def _preemption_possible(self) -> bool:
        """Whether a claimed slot could be taken this cycle: priority preemption unless
        PREEMPTION_REQUIREMENTS is literally False (as the matcher reads it: an empty
        value allows it), or rank preemption by a slot whose Rank is not a constant."""
        cfg = self.config
        if not cfg.consider_preemption:
            return False
        return not priority_preemption_off(cfg) or self.ranked_slots

    def _slot_row(self, s: SimSlot) -> _SlotRow:
        """What top-level slot `s` and its dynamic slots give the pool under the current
        config, kept on `s` until one of them changes (`SimSlot.changed`) or the config
        does: their ads (those NEGOTIATOR_SLOT_CONSTRAINT keeps) with their usage, pie
        weights and effective sizes, and the ones a job can take when no claim can be
        preempted (a p-slot with at least the fewest cpus any job requests; a static
        slot that is not claimed)."""
        sc, config, least = self.sc, self.config, self.least_cpus
        row = _SlotRow(config)
        seg = []
        for x in ([s] + s.children if s.partitionable else [s]):
            b = _built(x, sc)
            fetched, u, pie, eff = _facts(b, config)
            if not fetched:                     # NEGOTIATOR_SLOT_CONSTRAINT leaves it out
                continue
            seg += (b.ad, u, pie, eff)
            row.every.append((x, b, u))
            if (x.partitionable and x.cpus >= least) or (
                    not x.partitionable and x.job is None):
                row.free.append((x, b, u))
        row.seg = tuple(seg)
        row.free_cpus = s.cpus if (s.partitionable or s.job is None) else None
        s._row = row
        return row

    def _slot_rows(self) -> _PoolRows:
        """Every slot's row, in the pool's order: only the rows of slots that changed
        since the last cycle are made again (all of them when slots joined or left, or
        the config changed)."""
        p, config, got = self.pool, self.config, self._rows
        if got is None or got.version != p.version or got.config is not config:
            slot_row = self._slot_row
            rows = [r if (r := s._row) is not None and r.config is config else slot_row(s)
                    for s in p.slots]
            for i, s in enumerate(p.slots):
                s._pos = i
            got = self._rows = _PoolRows(
                version=p.version, config=config, segs=[r.seg for r in rows],
                every=[r.every for r in rows], free=[r.free for r in rows],
                free_cpus=[r.free_cpus for r in rows],
                all_cpus=sum(int(math.ceil(s.shape.cpus)) for s in p.slots))
        else:
            # what the accountant's CheckMatches needs to look at (core.accountant's
            # SlotChanges): the slots of the rows made again, before and after
            names: set[str] = set()
            places = []
            for s in p.dirty:
                if s._row is None:
                    r, i = self._slot_row(s), s._pos
                    names.update(u.resource_name for _, _, u in got.every[i])
                    names.update(u.resource_name for _, _, u in r.every)
                    places.append(i)
                    got.segs[i], got.every[i], got.free[i] = r.seg, r.every, r.free
                    got.free_cpus[i] = r.free_cpus
            places.sort()
            got.changes = SlotChanges(frozenset(names),
                                      tuple(u for i in places for _, _, u in got.every[i]))
        p.dirty.clear()
        return got

    def _pool(self, t: int):
        from .adapters.snapshot import Snapshot
        from .pool import Pool
        sc, p, config = self.sc, self.pool, self.config
        preempt = self._preemption_possible() or not self.shortcuts
        rows = self._slot_rows()
        flat = itertools.chain.from_iterable
        cols = list(flat(rows.segs))        # (ad, usage, pie weight, effective size) ...
        ads, usage = tuple(cols[0::4]), tuple(cols[1::4])
        pies, effs = tuple(cols[2::4]), tuple(cols[3::4])
        del cols
        # candidates: what a job can take this cycle (a p-slot with fewer cpus left than
        # any job requests cannot match, as a claimed static slot cannot when nothing can
        # preempt it). The cycle writes into claimed slots' ads (the remote user's
        # figures) and, with NEGOTIATOR_MATCH_EXPRS, into every ad: only those need a
        # copy. An ad it writes nothing into gets its texts, kept with the ad (the
        # cycle would read them from the ad again); the others are read by the cycle.
        copy_all = bool(config.match_exprs)
        texts_ok = not copy_all and not (config.consider_preemption and config.cross_slot_prios)
        users = config.consider_preemption
        cand_ads, cand_usage, cand_texts = [], [], []
        for x, b, u in flat(rows.every if preempt else rows.free):
            ad, texts = b.ad, None
            if x.job is not None or copy_all:
                ad = classads.copy_ad(ad)
            else:
                if texts_ok and not b.written:
                    texts, writes = _slot_texts(b)
                    if users and writes:
                        texts = None
                if texts is None:
                    b.written = True
            cand_ads.append(ad)
            cand_usage.append(u)
            cand_texts.append(texts)
        free = sum([c for c in rows.free_cpus if c is not None])
        cap = int(math.ceil(free)) if not preempt else rows.all_cpus
        if not self.shortcuts:
            cap = 1 << 40                 # every idle job
        store = TextStore()
        jobs = TextAds(store)
        submitters = []
        self._offered: dict[str, SimJob] = {}      # the jobs the schedd offers this cycle
        for i, (name, (idle, running)) in enumerate(sorted(p.counts.items())):
            if idle + running <= 0:
                continue
            for job in p.idle_jobs(name, min(idle, cap)):
                jobs.add(_job_texts(job, sc))
                self._offered[job.id] = job
            ad = classad2.ClassAd()
            ad["MyType"] = "Submitter"
            ad["Name"] = name
            ad["ScheddName"] = sc.schedd
            ad["ScheddIpAddr"] = SCHEDD_ADDR
            ad["IdleJobs"] = idle
            ad["RunningJobs"] = running
            ad["WeightedIdleJobs"] = idle
            ad["WeightedRunningJobs"] = running
            ad["LastHeardFrom"] = 1000 + i
            submitters.append(ad)
        snap = Snapshot(directory=sc.path, slots_source=str(sc.path), slots=tuple(cand_ads),
                        jobs={"jobs.ads": jobs}, submitters=tuple(submitters), accounting=(),
                        accounting_source=None, config_path=None,
                        meta={"captured_at": t, "schedd_files": {"jobs.ads": sc.schedd}})
        return Pool(snapshot=snap, config=self.config, groups=self.groups,
                    slot_ads=tuple(cand_ads), slots=tuple(cand_usage), accountant=self.state,
                    warnings=(), slot_texts=tuple(cand_texts), all_slot_ads=ads,
                    all_slots=usage, pie_weights=pies, effective_sizes=effs,
                    schedd_default=_NO_SCHEDD_LIMITS, slot_changes=rows.changes)

    def _apply(self, result, t: int) -> list[MatchEntry]:
        """The schedds and startds act on the matches; our match entries, with waits."""
        p = self.pool
        jobs = self._offered
        out = []
        for m in result.matches:
            slot = p.slot_named(m.slot)
            job = jobs.get(m.assigned_job)
            if slot is None or job is None or job.status != 1:
                self.unresolved += 1
                continue
            if m.preempting:
                victim = slot.job
                if victim is not None:
                    p.evict(victim, t, keep_slot=True)
                    self.preemptions += 1
            if slot.partitionable:
                slot = p.carve(slot, job)
            wait = float(t - job.idle_since)
            p.start(job, slot, t)
            if slot.shape.ranks_jobs():
                slot.rank_of_job = _rank_of(slot, job, self.sc)
            self.matches += 1
            out.append(MatchEntry(job=m.job, submitter=m.submitter, slot=m.slot,
                                  preempting=m.preempting, time=t, group=m.group, wait=wait))
        return out

    def _record(self, t: int, pool, result, entries: list[MatchEntry],
                duration: float) -> PassRecord:
        """The cycle as a ledger pass. The simulated pool is its own reality: its
        "real" accountant is the one after our cycle (its report, read as shadow mode reads
        a pool's Accounting ads, by `observe_pass`)."""
        from .adapters.observe import observe_pass
        report = tuple(result.accountant.report(result.quotas or None))
        after = dataclasses.replace(pool, snapshot=dataclasses.replace(pool.snapshot,
                                                                       accounting=report))
        obs = observe_pass(after, result)
        uid = uuidlib.uuid5(uuidlib.NAMESPACE_URL,
                            f"negotiator-ext-sim:{self.sc.name}:{self.sc.seed}:{t}").hex
        return PassRecord(
            uuid=uid, pool=self.sc.pool_name, started_at=float(t), finished_at=float(t),
            snapshot_time=t, status="complete", reason=None, real_cycle_time=t,
            real_accountant_time=t, shadow_duration=round(duration, 4), capture_duration=0.0,
            shadow_timings=dict(result.timings), pool_weight=result.pool_weight,
            shadow_matches=tuple(entries), submitters=tuple(obs.submitters),
            groups=tuple(obs.groups), comparable=False, snapshot_dir=None)


def _facts(b: _Ad, config):
    """(fetched, SlotUsage, pie weight, effective size) of a slot ad under `config`, as
    the core computes them (fetched: NEGOTIATOR_SLOT_CONSTRAINT keeps it); kept with
    the ad until the config changes."""
    from .core.slots import matches_constraint, slot_size, slot_usage
    f = b.facts
    if f is None or f[0] is not config:
        ad = b.ad
        u = slot_usage(ad, config)
        f = b.facts = (config, (matches_constraint(ad, config.slot_constraint), u,
                                *slot_size(ad, u.weight)))
    return f[1]


# The simulated schedd offers every idle job: its limits (core.schedd_limits) are not
# modelled here (it has no transfer queue and starts a matched job at once).
_NO_SCHEDD_LIMITS = ScheddLimits(per_user_enabled=False, max_jobs_running=1 << 62)


class _SlotRow:
    """A top-level slot's part of the pool (it and its dynamic slots) under one config:
    see `Simulation._slot_row`."""
    __slots__ = ("config", "every", "free", "free_cpus", "seg")

    def __init__(self, config):
        self.config = config
        self.seg: tuple = ()             # (ad, usage, pie weight, effective size) of each
        self.every: list[tuple] = []     # (slot, _Ad, usage) of each fetched ad
        self.free: list[tuple] = []      # the ones a job can take without preemption
        self.free_cpus: float | None = None   # its free cpus, if it counts


@dataclass
class _PoolRows:
    """Every top-level slot's row, in the pool's order (`Simulation._slot_rows`)."""
    version: int                  # SimPool.version they were made for
    config: object                # ... and the config
    segs: list[tuple]
    every: list[list]
    free: list[list]
    free_cpus: list
    all_cpus: int                 # every slot's cpus, rounded up
    changes: SlotChanges | None = None   # the slots changed since the last cycle's


def _slot_texts(b: _Ad) -> tuple[tuple, bool]:
    """A slot ad's (lower-case name, text) pairs, as the cycle would read them from it
    (`Pool.slot_texts`), and whether a cycle that considers preemption may write into
    it (add_remote_user_attrs: conservatively, when the ad has an attribute naming a
    current user, or a PreemptingRank); kept with the ad."""
    got = b.texts
    if got is None:
        texts = tuple((n.lower(), t) for n, t in classads.attribute_texts(b.ad))
        got = b.texts = (texts, any(n in _USER_ATTRS for n, _ in texts))
    return got


# the attributes that make the cycle write the current user's figures into a slot ad
_USER_ATTRS = frozenset(a.lower() for a in (*CURRENT_USER_ATTRS, "PreemptingRank"))


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


# ---- what-if replay of recorded snapshots ------------------------------------------------------

def replay_what_if(sc: Scenario, ledger_url: str) -> SimReport:
    """Re-run recorded snapshots under the scenario's config (`replay:` in the scenario):
    each snapshot is one shadow pass (`shadow.ShadowLoop`, replay mode) whose cycle runs
    under the scenario's config file (else the snapshot's own config) with its knobs
    appended, beside what the real negotiator did, so `ledger show` and `audit` compare
    the changed policy with the real one. Snapshots a shadow ledger names but that are no
    longer on disk are skipped (counted in the report)."""
    import tempfile
    from .adapters.ledger import open_ledger
    from .adapters.snapshot import read_meta
    from .shadow import ShadowLoop, ShadowSettings
    dirs = list(sc.replay_snapshots)
    if sc.replay_ledger:
        with open_ledger(sc.replay_ledger, create=False) as src:
            pools = src.pools()
            pool = sc.replay_pool or (pools[0] if len(pools) == 1 else None)
            if pool is None:
                raise InputError(sc.replay_ledger, "holds several pools "
                                 f"({', '.join(pools)}): name one with replay.pool")
            dirs = [Path(p["snapshot_dir"]) for p in src.passes(pool)
                    if p.get("snapshot_dir") and p["status"] != "failed"]
    present = [d for d in dirs if (d / "meta.json").is_file() or (d / "slots.ads").is_file()]
    if not present:
        raise InputError(str(sc.path), "replay: none of the recorded snapshots is on disk "
                         f"({len(dirs)} named)")
    present.sort(key=lambda d: int(read_meta(d).get("captured_at") or 0))
    wall0 = _time.perf_counter()
    matches = 0
    loops: dict[Path | None, ShadowLoop] = {}     # one per base config file
    with tempfile.TemporaryDirectory(prefix="negotiator-ext-whatif-") as tmp:
        for d in present:
            own = d / "config"
            base = sc.config_path or (own if own.is_file() else None)
            if base not in loops:
                cfg = Path(config_with_knobs(base, dict(sc.knobs), tmp))
                loops[base] = ShadowLoop(ShadowSettings.from_knobs(
                    {"STATE_DIR": tmp, "ADVERTISE": "false", "METRICS_FILE": ""},
                    ledger_url=ledger_url, pool=sc.pool_name, cycle_config=cfg))
            matches += len(loops[base].run_pass(replay=d).shadow_matches)
    return SimReport(passes=len(present), matches=matches, preemptions=0, span=0.0,
                     wall=_time.perf_counter() - wall0, ledger=ledger_url,
                     skipped=len(dirs) - len(present))
