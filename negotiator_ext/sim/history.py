"""A forecast's workload from the schedds' history: `condor_history -long` or `-json`
output (every file a schedd's, or several schedds' told apart by GlobalJobId).

Each job in the history joins its schedd's queue at its `QDate` with the ad it had, and
runs as long as its last run did (`CompletionDate - JobCurrentStartDate`). A job the
history says was removed (JobStatus 3) leaves the queue, or its slot, when it was removed
(`EnteredCurrentStatus`); one removed while it ran ran until then. A job's ad keeps what
the negotiator and the slots read (its submitter, group, requests, Requirements, Rank,
priorities, concurrency limits and every other attribute it was submitted with); what
only a run or the job's end wrote (`_RUN_ATTRS`), and what names its own files
(`_FILE_ATTRS`), is left out, and its ids, QDate and GlobalJobId are its own.

`RecordedJob` is the one reading of a job ad, shared with the snapshot's queue
(`sim.snapshot_queue`): its class (`schedd_startd.JobClass`: the attributes its cluster
shares, so that jobs alike are offered as one autocluster) and its own attributes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

from ..core import classads
from ..core.adtext import Job, TextStore, TextValues
from ..core.job_queue import id_number, job_submitter
from ..errors import InputError
from .ads import recorded_job_row, recorded_job_texts
from .schedd_startd import JobClass, SimJob

# a job's own attributes (the rest of its ad is its class's)
_OWN_ATTRS = ("clusterid", "procid", "qdate", "globaljobid")
# the job's state, which the simulated schedd writes itself
_STATE_ATTRS = frozenset({"jobstatus", "enteredcurrentstatus", "lastjobstatus"})
# what only a run, or the job's end, writes into its ad
_RUN_ATTRS = frozenset(a.lower() for a in (
    "RemoteHost", "LastRemoteHost", "RemoteSlotID", "StartdName", "StartdIpAddr",
    "StartdPrincipal", "RemoteNegotiatingGroup", "ClaimId", "PublicClaimId",
    "LastPublicClaimId", "JobCurrentStartDate", "JobCurrentStartExecutingDate",
    "JobCurrentStartTransferInputDate", "JobCurrentFinishTransferInputDate",
    "JobCurrentStartTransferOutputDate", "JobCurrentFinishTransferOutputDate",
    "JobStartDate", "JobLastStartDate", "CompletionDate", "LastMatchTime",
    "LastJobLeaseRenewal", "ShadowBday", "RemoteWallClockTime", "CumulativeSlotTime",
    "LastRemoteWallClockTime", "RemoteUserCpu", "RemoteSysCpu", "CumulativeRemoteUserCpu",
    "CumulativeRemoteSysCpu", "ExitCode", "ExitStatus", "ExitBySignal", "ExitSignal",
    "JobRunCount", "NumJobStarts", "NumShadowStarts", "NumJobMatches",
    "NumJobCompletions", "NumRestarts", "LastVacateTime", "LastSuspensionTime",
    "TotalSuspensions", "CumulativeSuspensionTime", "JobFinishedHookDone", "RemoveReason",
    "HoldReason", "HoldReasonCode", "HoldReasonSubCode", "LastHoldReason",
    "ReleaseReason", "LastRejMatchReason", "LastRejMatchTime", "LastMatchListPrio",
    "AutoClusterId", "AutoClusterAttrs", "MachineAttrCpus0", "MachineAttrSlotWeight0",
    "BytesRecvd", "BytesSent", "ActivationDuration", "ActivationExecutionDuration",
    "ActivationSetupDuration", "ActivationTeardownDuration", "TransferInQueued",
    "TransferInStarted", "TransferInFinished", "TransferOutQueued", "TransferOutStarted",
    "TransferOutFinished", "JobLeaseDuration_Expired", "StarterIpAddr", "CpusProvisioned",
    "MemoryProvisioned", "DiskProvisioned", "ResidentSetSize", "ResidentSetSize_RAW",
    "ProportionalSetSizeKb", "CpusUsage", "RecentBlockReadKbytes", "RecentBlockReads",
    "RecentBlockWriteKbytes", "RecentBlockWrites", "RecentStatsLifetimeStarter",
    "BlockReadKbytes", "BlockReads", "BlockWriteKbytes", "BlockWrites",
    "CommittedTime", "CommittedSlotTime", "CommittedSuspensionTime", "DiskUsage_RAW",
    "ImageSize_RAW", "OrigRemoteHost", "ScratchDirFileCount", "ExecuteDirectory"))
# what names the job's own files and arguments (never read by matchmaking)
_FILE_ATTRS = frozenset(a.lower() for a in (
    "Args", "Arguments", "Environment", "Env", "In", "Out", "Err", "UserLog", "Iwd",
    "TransferInput", "TransferOutput", "TransferOutputRemaps", "SubmitEventNotes"))
_LEFT_OUT = _STATE_ATTRS | _RUN_ATTRS | _FILE_ATTRS


@dataclass(eq=False, slots=True)
class RecordedJob:
    """One job of a queue or a history, as the forecast uses it."""
    schedd: str
    cluster: int
    proc: int
    qdate: int
    cls: JobClass
    own: tuple                      # (Name, text) of its own attributes
    status: int                     # its JobStatus there
    entered: float | None           # EnteredCurrentStatus
    runtime: float | None           # how long its last run ran (None: no finished run)
    removed_at: float = math.inf    # it was removed then
    started: float | None = None    # JobCurrentStartDate (a running job's)
    remote_host: str | None = None  # RemoteHost (a running job's slot)
    provisioned: float | None = None    # CpusProvisioned: its slot's cpus
    seen_at: float | None = None    # ServerTime: when condor_q wrote its ad

    def run_length(self, default: float) -> tuple[float, bool]:
        """How long it runs: its last finished run's length; for one still running when
        condor_q wrote it (ServerTime), at least as long as it had run by then, and no
        less than `default`; else `default`. And whether the history said."""
        if self.runtime is not None:
            return self.runtime, True
        if self.status == 2 and self.started and self.seen_at and self.seen_at > self.started:
            return max(default, self.seen_at - self.started), False
        return default, False

    @property
    def id(self) -> str:
        return f"{self.cluster}.{self.proc}"

    def sim_job(self, duration: float, idle_since: float) -> SimJob:
        return SimJob(cluster=self.cluster, proc=self.proc, cls=self.cls,
                      duration=duration, qdate=self.qdate, idle_since=int(idle_since),
                      own=self.own, removed_at=self.removed_at)


class JobReader:
    """Reads job ads (as texts: `core.adtext`) into RecordedJobs, sharing one JobClass
    among jobs alike (the same submitter, schedd and class attributes)."""

    def __init__(self):
        self._classes: dict[tuple, JobClass] = {}
        self._values = TextValues()
        self.store = TextStore()            # what the files it reads share

    def read(self, rows, names: dict, source: str, schedd_of) -> Iterable[RecordedJob]:
        """The jobs of `rows` (shared pairs of one file); `schedd_of(job)`: its schedd
        (`cycle._ScheddOf` with the file's name). A job without ids, QDate or submitter
        is bad input, named with its file."""
        for i, row in enumerate(rows):
            job = Job(row, names, self._values)
            yield self.one(job, names, source, i, schedd_of(job))

    def one(self, job: Job, names: dict, source: str, index: int,
            schedd: str | None) -> RecordedJob:
        cluster, proc = id_number(job.value("clusterid")), id_number(job.value("procid"))
        label = (f"{cluster}.{proc}" if cluster is not None and proc is not None
                 else f"#{index + 1}")
        if cluster is None or proc is None:
            raise InputError(source, "not a job ad: no whole-number ClusterId and ProcId "
                             "(is it condor_history or condor_q output?)", ad=label)
        qdate = job.value("qdate")
        if not classads.is_number(qdate) or not math.isfinite(qdate) or qdate <= 0:
            raise InputError(source, "no QDate (the time it was submitted) or not a "
                             "time", ad=f"job {label}", attribute="QDate")
        submitter = job_submitter(job)
        if not submitter:
            raise InputError(source, "no User or AccountingGroup: whose job is it?",
                             ad=f"job {label}", attribute="User")
        if not schedd:
            raise InputError(source, "no schedd: GlobalJobId does not name one, and "
                             "the pool has several", ad=f"job {label}",
                             attribute="GlobalJobId")
        status = _number(job, "jobstatus")
        return RecordedJob(
            schedd=schedd, cluster=cluster, proc=proc, qdate=int(qdate),
            cls=self._class_of(job, names, submitter, schedd, source, label),
            own=tuple((names.get(n, n), t) for n, t in job.row if n in _OWN_ATTRS),
            status=int(status) if status is not None else 0,
            entered=_number(job, "enteredcurrentstatus"),
            runtime=_last_run(job), started=_number(job, "jobcurrentstartdate"),
            remote_host=_string(job, "remotehost"),
            provisioned=_number(job, "cpusprovisioned"), seen_at=_number(job, "servertime"))

    def _class_of(self, job: Job, names: dict, submitter: str, schedd: str, source: str,
                  label: str) -> JobClass:
        base = tuple((names.get(n, n), t) for n, t in job.row
                     if n not in _LEFT_OUT and n not in _OWN_ATTRS)
        key = (submitter, schedd, base)
        got = self._classes.get(key)
        if got is not None:
            return got
        requests = []
        for attr, default in (("requestcpus", 1.0), ("requestmemory", 0.0),
                              ("requestdisk", 0.0), ("requestgpus", 0.0)):
            v = job.value(attr)
            if v is classads.UNDEFINED or v is None:
                v = default
            if not classads.is_number(v) or not math.isfinite(v) or v < 0:
                raise InputError(source, f"not a number of {attr[7:]} to request: {v!r}",
                                 ad=f"job {label}", attribute=names.get(attr, attr))
            requests.append(float(v))
        group = job.value("accountinggroup")
        group = group if isinstance(group, str) and group else None
        user = _string(job, "user") or submitter
        prio = _number(job, "jobprio")
        limits = _string(job, "concurrencylimits")
        # the slot's RemoteGroup: the submitter's group (the group part of a
        # "<group>.<user>" accounting group), as the startd shows it
        remote_group = group.rsplit(".", 1)[0] if group and "." in group else group
        got = self._classes[key] = JobClass(
            submitter=submitter, user=user, schedd=schedd, group=remote_group,
            accounting_group=submitter if group else None, cpus=requests[0],
            memory=requests[1], disk=requests[2], gpus=requests[3],
            job_prio=int(prio) if prio is not None else 0, concurrency_limits=limits,
            texts=recorded_job_texts, row=recorded_job_row, base=base)
        return got


def _number(job: Job, lname: str) -> float | None:
    v = job.value(lname)
    return float(v) if classads.is_number(v) and math.isfinite(v) else None


def _string(job: Job, lname: str) -> str | None:
    v = job.value(lname)
    return v if isinstance(v, str) and v else None


def _last_run(job: Job) -> float | None:
    """How long the job's last run ran to its end: CompletionDate - JobCurrentStartDate
    (a completed job's); None when the history has no finished run."""
    start, end = _number(job, "jobcurrentstartdate"), _number(job, "completiondate")
    if start and end and end >= start > 0:
        return end - start
    return None


@dataclass
class History:
    """The jobs of the history files, each once (the newest ad of a job named twice)."""
    jobs: dict[tuple[str, str], RecordedJob]       # (schedd, "c.p") -> job
    sources: tuple[str, ...]
    duplicates: int = 0

    def completed_runtimes(self) -> list[float]:
        return [j.runtime for j in self.jobs.values() if j.runtime is not None]


def read_history(paths: Iterable[str | Path], reader: JobReader,
                 default_schedd: str | None) -> History:
    """The jobs of `condor_history -long`/`-json` files. A job's schedd is GlobalJobId's
    (else `default_schedd`, the pool's only schedd). A history that is not HTCondor's
    (ads that are not jobs, a job with no QDate) is bad input naming the file and job."""
    from ..adapters.adfiles import read_text_ads
    from ..cycle import _ScheddOf
    schedd_of = _ScheddOf({}, default_schedd)     # GlobalJobId's, else the only one
    jobs: dict[tuple[str, str], RecordedJob] = {}
    sources = []
    duplicates = 0
    for path in paths:
        p = Path(path)
        if not p.is_file():
            raise InputError(str(p), "no such history file" if not p.exists()
                             else "not a file")
        ads = read_text_ads(p, reader.store)
        if not ads.rows:
            raise InputError(str(p), "holds no job ads (condor_history -long or -json "
                             "output expected)")
        names = ads.store.names
        for job in reader.read(ads.rows, names, str(p),
                               lambda j, f=p.name: schedd_of(f, j)):
            key = (job.schedd, job.id)
            if key in jobs:
                duplicates += 1
                if (job.entered or 0) < (jobs[key].entered or 0):
                    continue
            if job.status == 3 and job.entered:
                job.removed_at = job.entered
            jobs[key] = job
        sources.append(str(p))
    return History(jobs=jobs, sources=tuple(sources), duplicates=duplicates)


class SharedHistory:
    """History files read once for several forecasts of one workload (a sweep's), by a
    process that forks a child for each: every child takes the jobs and the reader as
    read, and works on its own copy of them (a forecast changes both). Keyed by the
    files and the schedd a job without GlobalJobId belongs to: a forecast that reads
    other files, or another snapshot's, reads its own."""

    def __init__(self):
        self._read: dict[tuple, tuple[JobReader, History]] = {}

    def read(self, paths: Iterable[str | Path], default_schedd: str | None
             ) -> tuple[JobReader, History]:
        key = (tuple(str(p) for p in paths), default_schedd)
        got = self._read.get(key)
        if got is None:
            reader = JobReader()
            got = self._read[key] = (reader, read_history(key[0], reader, default_schedd))
        return got


@dataclass
class HistoryArrivals:
    """The workload source of the jobs a history adds after the start: each joins its
    schedd's queue at its QDate (`shift` seconds later, for a history repeated forward)
    and runs its last run's length (else `default_runtime`). Jobs already in the
    snapshot's queue (`queued`) are that source's."""
    history: History
    start: int
    end: int
    default_runtime: float
    queued: frozenset = frozenset()
    shift: int = 0
    window: tuple[float, float] | None = None   # only the QDates in [a, b)
    counts: dict = field(default_factory=dict)
    jobs: list = field(default_factory=list)    # every SimJob it queued

    def __post_init__(self):
        self.counts = {"arrivals": 0, "before_start": 0, "after_end": 0, "no_runtime": 0,
                       "removed": 0}

    @property
    def least_cpus(self) -> float | None:
        return min((j.cls.cpus for j in self.history.jobs.values()), default=None)

    def setup(self, sim) -> None:
        pass

    def events(self) -> list:
        out = []
        c = self.counts
        picked = []
        for key, rec in self.history.jobs.items():
            if key in self.queued:
                continue
            if self.window is not None and not (self.window[0] <= rec.qdate < self.window[1]):
                continue
            at = rec.qdate + self.shift
            if at < self.start:
                c["before_start"] += 1
                continue
            if at > self.end:
                c["after_end"] += 1
                continue
            picked.append((at, rec.schedd, rec.cluster, rec.proc, rec))
        picked.sort(key=lambda e: e[:4])
        for i, (at, _, _, _, rec) in enumerate(picked):
            if rec.runtime is None and rec.removed_at != math.inf and rec.started:
                runtime = math.inf              # removed while it ran: ran until then
            else:
                runtime, known = rec.run_length(self.default_runtime)
                c["no_runtime"] += not known
            c["arrivals"] += 1
            c["removed"] += rec.removed_at != math.inf
            out.append((at, -(1 << 40) + i, self._submit(rec, runtime)))
        return out

    def _submit(self, rec: RecordedJob, runtime: float):
        def submit(pool, at):
            job = rec.sim_job(runtime, at)
            job.qdate = int(at)
            if rec.removed_at != math.inf:
                job.removed_at = rec.removed_at + self.shift
            if self.shift:
                job.own = _shifted(job.own, self.shift)
            pool.queue(job, at)
            self.jobs.append(job)
        return submit


def _shifted(own: tuple, shift: int) -> tuple:
    """A repeated job's own attributes with its QDate moved forward."""
    out = []
    for name, text in own:
        if name.lower() == "qdate" and text.strip().lstrip("-").isdigit():
            text = str(int(text) + shift)
        out.append((name, text))
    return tuple(out)


def recorded_runs(history: History, end: float) -> list:
    """What a recorded pool really did, as `core.forecast.JobRun`s: each job's last run
    (JobCurrentStartDate to CompletionDate, or to `end` for one still running), weighed
    by the cpus its slot gave it (CpusProvisioned, else its request): the real side of a
    forecast's comparison."""
    from ..core.forecast import JobRun
    out = []
    for rec in history.jobs.values():
        runs = ()
        weight = rec.provisioned or rec.cls.cpus
        stop = None
        if rec.started:
            if rec.runtime is not None:
                stop = rec.started + rec.runtime
            elif rec.status == 2:
                stop = end
            if stop is not None:
                runs = ((rec.started, stop, weight, False),)
        state = {4: "completed", 3: "removed", 2: "running"}.get(rec.status, "idle")
        out.append(JobRun(job=rec.id, schedd=rec.schedd, submitter=rec.cls.submitter,
                          group=rec.cls.group or "<none>", queued=rec.qdate,
                          start=rec.started, end=stop if state == "completed" else None,
                          weight=weight, preempted=0, runs=runs, state=state,
                          left=stop if state == "completed" else None))
    return out
