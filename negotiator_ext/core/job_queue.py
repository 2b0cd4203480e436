"""The schedd's side of a negotiation: its queue as the negotiator sees it (M2). Who a job
is charged to, its id and its place in the schedd's order (`QueueView`), the job
constraint, and one submitter's idle jobs at one schedd (`JobQueue`), offered as runs of
one autocluster within the schedd's count (M7).

A job is anything with `value(lower-case name)` giving the attribute's value
(core.adtext.Job): the functions below are the schedd's view of its queue."""

from __future__ import annotations

import math
from operator import is_not, itemgetter
from dataclasses import dataclass, field
from typing import Any

from . import adtext, classads, schedd_limits
from .match_list import Request
from .projection import Projector, closure


_JOB_ID = itemgetter(0)                  # a queue entry's job id
_JOB_PRIO_ATTRS = ("prejobprio1", "prejobprio2", "jobprio", "postjobprio1", "postjobprio2")


def job_submitter(job) -> str | None:
    """The submitter a job negotiates under: `<AccountingGroup>@<domain>` when the job
    has an accounting group, else its `User` (the schedd's PrioRec owner)."""
    user = job.value("user")
    group = job.value("accountinggroup")
    user = user if isinstance(user, str) else None
    if isinstance(group, str) and group:
        domain = user.rsplit("@", 1)[1] if user and "@" in user else ""
        return f"{group}@{domain}"
    return user


def _c_mod(a: int, b: int) -> int:
    """C's a % b (the remainder takes the dividend's sign)."""
    r = abs(a) % b
    return -r if a < 0 else r


def job_id(job) -> tuple[int, int]:
    """(ClusterId, ProcId); -1 for one that is not an `id_number` (the schedd gives every
    job both: the cycle refuses a queue file with such a job, the capture such an answer)."""
    c, p = id_number(job.value("clusterid")), id_number(job.value("procid"))
    return (-1 if c is None else c), (-1 if p is None else p)


def id_number(v) -> int | None:
    """A ClusterId or ProcId value as the schedd gives it, a whole number from 0 up;
    None for anything else (missing, a string, NaN, 2.5, -1)."""
    if not classads.is_number(v) or not math.isfinite(v) or v < 0 or v != int(v):
        return None
    return int(v)


def job_is_idle(job) -> bool:
    """Only idle jobs (JobStatus 1) are offered to the negotiator."""
    return classads.as_number(job.value("jobstatus")) == 1


def job_prio_key(job) -> tuple:
    """The first part of the schedd's job order (M2): the prio attributes, descending,
    each read as the schedd reads it (LookupInteger into an int: a real is truncated,
    NaN or INF from a user's `condor_qedit` reads as 0; no value: 0)."""
    return tuple(-(classads.lookup_int32(job.value(a)) or 0) for a in _JOB_PRIO_ATTRS)


class QueueView:
    """The schedd's view of its queue, job by job, with each rule remembered by the
    texts it reads (most jobs of a cluster read the same texts). The job order (M2) is
    the prio attributes descending, then cluster and proc ascending."""

    def __init__(self, values):
        self._head = adtext.TextMemo(
            self._idle_head, ("jobstatus", "user", "accountinggroup") + _JOB_PRIO_ATTRS, values)
        self._cluster = adtext.TextMemo(lambda job: job_id(job)[0], ("clusterid",), values)
        self._proc = adtext.TextMemo(lambda job: job_id(job)[1], ("procid",), values)
        self._held = adtext.TextMemo(
            self._held_by_schedd, ("jobstatus", "jobuniverse", "user", "accountinggroup",
                                   "transferringinput", "transferqueued",
                                   "transferringoutput"), values)

    @staticmethod
    def _held_by_schedd(job):
        status = classads.as_number(job.value("jobstatus"))
        universe = classads.as_number(job.value("jobuniverse"))
        if not schedd_limits.shadow_job(status, universe):
            return None
        return job_submitter(job), schedd_limits.in_transfer(
            status, job.value("transferringinput"), job.value("transferqueued"),
            job.value("transferringoutput"))

    def running(self, job) -> tuple[str | None, bool] | None:
        """(submitter, in the upload queue) of a job that holds a shadow (M7), else
        None."""
        return self._held(job)

    @staticmethod
    def _idle_head(job):
        if not job_is_idle(job):
            return None
        sub = job_submitter(job)
        return None if sub is None else (sub, job_prio_key(job))

    def idle(self, job) -> tuple[str, tuple] | None:
        """(submitter, order key) of an idle job with a submitter, else None."""
        head = self._head(job)
        if head is None:
            return None
        return head[0], head[1] + (self._cluster(job), self._proc(job))


def queue_heads(table: adtext.TextAds, runs: bytearray | None = None) -> list[tuple]:
    """What `QueueView` says of every job of a table, in row order: (idle head, None)
    for an idle job with a submitter, else (None, running(job)). Computed where the job
    files are read (beside the slot ads, `adapters.snapshot`), so the cycle need not.
    An idle job alike the one before but for its proc (`run_proc`) takes that one's
    head with its own proc; `runs`, when given, gets a flag per row: 1 for such a job
    (the cycle then need not compare the two rows again), else 0."""
    values = adtext.TextValues()
    literal = values.literal
    view = QueueView(values)
    names = table.store.names
    out = []
    flag = runs.append if runs is not None else (lambda _: None)
    last = head = at = None
    for row in table.rows:
        if head is not None and head[0] is not None:
            proc, at = run_proc(row, last, at, literal)
            if proc is not None:
                sub, order = head[0]
                head = ((sub, order[:-1] + (proc,)), None)
                out.append(head)
                flag(1)
                last = row
                continue
        head = queue_head(view, adtext.Job(row, names, values))
        out.append(head)
        flag(0)
        last, at = row, None
    return out


def run_proc(row, last, indexes, literal, read=()) -> tuple[int | None, tuple | None]:
    """(`row`'s proc, the run's indexes) when `row` is the job of the row before it,
    `last`, but for its proc: the two differ in their ProcId pair, and perhaps their
    GlobalJobId pair naming the same schedd (`same_schedd`), and in nothing else, and
    nothing reads either (`run_indexes`, worked out once a run: `indexes` None, then
    what this returned, `read` the names a job's key reads); else (None, indexes).
    `literal`: TextValues.literal."""
    if len(row) != len(last) or not 0 < (diff := sum(map(is_not, row, last))) <= 2:
        return None, indexes
    if indexes is None:
        indexes = run_indexes(last, read)
    at, gid = indexes
    if at < 0 or row[at] is last[at] or row[at][0] != "procid" or (
            diff == 2 and not same_schedd(row, last, gid)):
        return None, indexes
    lit, proc = literal(row[at][1])
    if not (lit and type(proc) is int and proc >= 0):
        proc = id_number(proc) if lit else None
    return proc, indexes


def run_indexes(row, read=()) -> tuple[int, int]:
    """The indexes of a job row's ProcId and GlobalJobId pairs (-1 for none) when the
    rows after it that differ from it in those pairs alone are the same job to the
    schedd and the negotiator but for its proc: no other text of the row names ProcId,
    and `read` (the names a job's key reads) does not hold it (else the ProcId index is
    -1); the same of GlobalJobId, whose value's part before '#' names the schedd
    (`same_schedd`) and is read for nothing else (else its index is -1). A run: a
    cluster's jobs as condor_q -long prints them, or captured by their requests."""
    at = gid = -1
    procid_read = "procid" in read
    gid_read = "globaljobid" in read
    for i, (name, text) in enumerate(row):
        if name == "procid":
            at = i
        elif name == "globaljobid":
            gid = i
        else:                               # another text naming either (in any place)
            low = text.lower()
            procid_read = procid_read or "procid" in low
            gid_read = gid_read or "globaljobid" in low
    if procid_read or at < 0:
        return -1, -1
    return at, (-1 if gid_read else gid)


def same_schedd(row, last, gid: int) -> bool:
    """Whether `row` differs from `last` in its GlobalJobId pair (at `gid`, -1: none may
    differ) as well as its ProcId, both string literals with the same text up to their
    first '#' (the schedd's name, as the cycle reads it; an escape cannot hide a '#')."""
    if gid < 0:
        return False
    a, b = row[gid], last[gid]
    if a is b or a[0] != "globaljobid":
        return False
    ta, tb = a[1], b[1]
    cut = ta.find("#")
    return (cut > 0 and ta.startswith('"') and tb.startswith('"')
            and tb[:cut + 1] == ta[:cut + 1] and ta.endswith('"') and tb.endswith('"'))




def queue_head(view: QueueView, job) -> tuple:
    """What `QueueView` says of one job: (idle head, None) for an idle job with a
    submitter, else (None, view.running(job)); one entry of `queue_heads`."""
    head = view.idle(job)
    return (head, None) if head is not None else (None, view.running(job))


class JobConstraint:
    """NEGOTIATOR_JOB_CONSTRAINT, evaluated once per distinct set of the job texts it
    reaches."""

    def __init__(self, text: str, values: adtext.TextValues):
        self.expr = classads.parse_expr(text)
        self.values = values
        self._verdicts: dict[tuple, bool] = {}
        roots = classads.names_in(self.expr)
        self._project = Projector(
            roots, values.names, lambda read: tuple(sorted(closure(read, roots, values.names)[0])))

    def __call__(self, job) -> bool:
        get = job.texts.get
        seen = self._project(get)
        key = (seen, tuple(map(get, seen)))
        got = self._verdicts.get(key)
        if got is None:
            got = self._verdicts[key] = classads.eval_expr(self.expr, job.ad()) is True
        return got


@dataclass(eq=False)
class JobQueue:
    """One submitter's idle jobs at one schedd, in the schedd's priority order, as
    (job id, autocluster id, group key, job ad as text pairs). The schedd offers them
    as runs of consecutive jobs of one autocluster (M2); matched jobs are not offered
    again. `names` spells the attribute names when a request's ad is built."""
    jobs: list[tuple[str, int, tuple, Any]]
    names: dict = field(default_factory=dict)
    matched: set[str] = field(default_factory=set)
    # job id -> JobPrio, kept with USE_GLOBAL_JOB_PRIOS (a negotiation may ask only for
    # the jobs of a range of priorities)
    prios: dict[str, int] | None = None
    # the last negotiation's offers ended because the schedd's count was used up (M7)
    capped: bool = False
    # How far the cycle's request lists went into `jobs` (indices; -1: nowhere): a
    # caller that offered only the first jobs of a class knows from them whether the
    # others could have been asked for. `started`: the first job of the furthest run
    # sent; `used_up`: the last job of the furthest run whose count the negotiator used
    # up, where the run's length (not the schedd's limit, M7) set that count
    started: int = -1
    used_up: int = -1
    _run: tuple = (-1, -1)
    _by_length: bool = False
    # every job before this index is matched (`matched` only grows): where a request
    # list starts, rather than at the front again, passing every job matched so far
    # (each submitter turn of each spin builds a new list)
    _head: int = 0

    def _outside(self, prio_range) -> set[str]:
        """The jobs a negotiation restricted to `prio_range` (JOBPRIO_MIN, _MAX) does not
        offer: the schedd skips them as it builds the request list."""
        if prio_range is None or self.prios is None:
            return set()
        lo, hi = prio_range
        return {j for j, p in self.prios.items() if not lo <= p <= hi}

    def _runs(self, skip: set[str]):
        """The schedd's request list (M2): runs of consecutive unmatched jobs of one
        autocluster, leaving out `skip`. Lazy: jobs matched on one run are seen before
        the next is built."""
        run: list = []
        first = last = -1
        jobs, matched = self.jobs, self.matched
        head, end = self._head, len(jobs)
        while head < end and jobs[head][0] in matched:
            head += 1
        self._head = head
        for i in range(head, end):
            entry = jobs[i]
            if entry[0] in matched or (skip and entry[0] in skip):
                continue
            if run and run[0][1] != entry[1]:
                self._sent(first, last)
                yield run
                run = []
            if not run:
                first = i
            run.append(entry)
            last = i
        if run:
            self._sent(first, last)
            yield run

    def _sent(self, first: int, last: int) -> None:
        self._run = (first, last)
        if first > self.started:
            self.started = first

    def run_used_up(self) -> None:
        """The negotiator matched the last run sent as many times as its count."""
        if self._by_length and self._run[1] > self.used_up:
            self.used_up = self._run[1]     # (a count the schedd's limit set is the same
                                            # for a longer run)

    def offers(self, rejected: set[int], schedd: str, submitter: str, cap: int | None,
               batch: int, offered: list[int], prio_range=None):
        """The requests of one negotiation: (request, its ResourceRequestCount). The
        negotiator skips the requests of autoclusters it rejected in this negotiation.
        When the schedd offers at most `cap` jobs (M7; None: no limit) it counts each
        request as it sends it, `batch` requests at a time
        (NEGOTIATOR_RESOURCE_REQUEST_LIST_SIZE), knowing only the rejections of earlier
        batches, and stops when the count is used up; with one request at a time (no
        request counts) each job is offered alone and the caller counts what it was
        offered in `offered[0]`. `prio_range`: only the jobs of these priorities
        (USE_GLOBAL_JOB_PRIOS)."""
        left = cap
        known: set[int] = set(rejected)
        sent = 0
        self.capped = False
        for r in self._runs(self._outside(prio_range)):
            ac = r[0][1]
            if left is None:
                if ac not in rejected:
                    self._by_length = True
                    yield self._request(r, schedd, submitter), len(r)
                continue
            if batch <= 1:
                if ac in rejected:
                    continue
                left = cap - offered[0]
                if left <= 0:
                    self.capped = True
                    return
                self._by_length = len(r) < left
                yield self._request(r, schedd, submitter), min(len(r), left)
                continue
            if sent == batch:
                sent, known = 0, set(rejected)
            if ac in known:
                continue
            sent += 1
            count = min(len(r), left)
            self._by_length = count < left
            left -= count
            if ac not in rejected:
                yield self._request(r, schedd, submitter), count
            if left <= 0:
                self.capped = True
                return

    def _request(self, run, schedd, submitter) -> Request:
        job_id, ac, key, row = run[0]
        return Request(base_ad=adtext.row_ad(row, self.names), jobs=list(map(_JOB_ID, run)),
                       autocluster=ac, group_key=key, schedd=schedd, submitter=submitter)
