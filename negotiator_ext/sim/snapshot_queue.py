"""A forecast's start: the snapshot's queue and claims.

Its idle jobs are queued at the start (idle since their `EnteredCurrentStatus`); its
running jobs run on the slots they hold (a dynamic slot is carved again, with its own
name and size, from its partitionable slot) until their run ends: the history's length
of their last run from their `JobCurrentStartDate`, else `default_runtime` from then. A
claimed slot whose job the queue does not have (a schedd that did not answer, a job of
another pool's schedd) stays claimed by its `RemoteUser` for `default_runtime` from its
`JobStart`, so the accountant charges it as the real one does. Held and other jobs wait
for nobody: they are counted (`skipped`) and left out.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from ..core import classads
from .history import History, JobReader, RecordedJob
from .schedd_startd import JobClass, SimJob


@dataclass
class StartCounts:
    idle: int = 0
    running: int = 0
    foreign_claims: int = 0       # claimed slots whose job the queue does not have
    skipped: int = 0              # held, completed, removed jobs still in the queue
    no_history: int = 0           # queued jobs the history does not have (default runtime)


@dataclass
class SnapshotQueue:
    """The workload source of a snapshot's queue and claims (see the module docstring)."""
    snapshot: object                          # adapters.snapshot.Snapshot
    reader: JobReader
    history: History
    default_runtime: float
    start: int
    counts: StartCounts = field(default_factory=StartCounts)
    queued: dict = field(default_factory=dict)   # (schedd, id) -> RecordedJob
    jobs: list = field(default_factory=list)     # every SimJob it placed

    def __post_init__(self):
        from ..cycle import _ScheddOf
        snap = self.snapshot
        schedds = {d.get("ScheddName") for d in (snap.submitters or ()) if d.get("ScheddName")}
        # the file's schedd (meta.json), else GlobalJobId's, else the only one
        schedd_of = _ScheddOf(snap.meta, next(iter(schedds)) if len(schedds) == 1 else None)
        for name, ads in snap.jobs.items():
            source = str(snap.directory / name)
            for job in self.reader.read(ads.rows, ads.store.names, source,
                                        lambda j, f=name: schedd_of(f, j)):
                self.queued[(job.schedd, job.id)] = job

    @property
    def least_cpus(self) -> float | None:
        return min((j.cls.cpus for j in self.queued.values()), default=None)

    def events(self) -> list:
        return []

    def runtime_of(self, job: RecordedJob) -> tuple[float, bool]:
        """The job's run length (the history's, else the default) and whether it was
        the history's."""
        known = self.history.jobs.get((job.schedd, job.id))
        return (known or job).run_length(self.default_runtime)

    def removed_at(self, job: RecordedJob) -> float:
        known = self.history.jobs.get((job.schedd, job.id))
        return known.removed_at if known is not None else math.inf

    def setup(self, sim) -> None:
        """Places the running jobs on their slots and queues the idle ones."""
        pool, t0, c = sim.pool, self.start, self.counts
        placed = set()
        for ad in self.snapshot.slots:
            if ad.get("State") != "Claimed" or ad.get("PartitionableSlot") is True:
                continue
            slot = pool.slot_named(str(ad.get("Name")))
            dynamic = ad.get("DynamicSlot") is True
            if dynamic:
                parent = pool.slot_named(str(ad.get("ParentSlotName") or "")) or \
                    pool.slot_named(_parent_name(str(ad.get("Name"))))
                if parent is None or not parent.partitionable:
                    continue
            elif slot is None or slot.partitionable or slot.job is not None:
                continue
            key = (str(ad.get("RemoteScheddName") or ""), str(ad.get("JobId") or ""))
            rec = self.queued.get(key)
            if rec is not None and rec.status == 2:
                placed.add(key)
                runtime, known = self.runtime_of(rec)
                c.no_history += not known
                began = rec.started or t0
                job = rec.sim_job(max(1.0, began + runtime - t0), rec.qdate)
                job.removed_at = self.removed_at(rec)
                c.running += 1
            else:
                job = _foreign_job(ad, self.default_runtime, t0, sim.groups)
                if job is None:
                    continue
                c.foreign_claims += 1
            if dynamic:
                slot = pool.carve(parent, job, name=str(ad.get("Name")),
                                  size=[_num(ad, a) for a in ("Cpus", "Memory", "Disk",
                                                              "GPUs")])
            pool.queue(job, t0)
            pool.start(job, slot, t0, claimed_at=_num(ad, "EnteredCurrentState") or t0)
            self.jobs.append(job)
        for key, rec in self.queued.items():
            if key in placed:
                continue
            if rec.status != 1:
                c.skipped += 1
                continue
            runtime, known = self.runtime_of(rec)
            c.no_history += not known
            job = rec.sim_job(runtime, rec.entered or rec.qdate)
            job.removed_at = self.removed_at(rec)
            pool.queue(job, t0)
            self.jobs.append(job)
            c.idle += 1


def _foreign_job(ad, default_runtime: float, t0: int, groups) -> SimJob | None:
    """A job the queue does not have, holding a claimed slot: its RemoteUser's, until
    `default_runtime` after its JobStart."""
    user = ad.get("RemoteUser")
    if not isinstance(user, str) or not user:
        return None
    group = ad.get("AccountingGroup")
    submitter = group if isinstance(group, str) and group else user
    rg = ad.get("RemoteGroup")
    if not isinstance(rg, str) or rg == "<none>":   # the group its submitter is charged to
        node = groups.assigned_group(submitter)
        rg = None if node.is_root else node.name
    cls = JobClass(submitter=submitter, user=user,
                   schedd=str(ad.get("RemoteScheddName") or "(unknown schedd)"),
                   group=rg,
                   accounting_group=submitter if submitter != user else None,
                   cpus=_num(ad, "Cpus"), memory=_num(ad, "Memory"), disk=_num(ad, "Disk"),
                   texts=lambda job: [])
    began = _num(ad, "JobStart") or _num(ad, "EnteredCurrentState") or t0
    jid = str(ad.get("JobId") or "0.0")
    cluster, _, proc = jid.partition(".")
    return SimJob(cluster=int(cluster) if cluster.isdigit() else 0,
                  proc=int(proc) if proc.isdigit() else 0, cls=cls,
                  duration=max(1.0, began + default_runtime - t0), qdate=int(began),
                  idle_since=int(began))


def _num(ad, attr: str) -> float:
    v = classads.eval_attr(ad, attr) if attr in ad else 0
    return float(v) if classads.is_number(v) and math.isfinite(v) else 0.0


def _parent_name(name: str) -> str:
    """slot1_3@host -> slot1@host."""
    head, at, host = name.partition("@")
    return head.rsplit("_", 1)[0] + at + host
