"""The schedds' job queries of a capture: each schedd asked for its idle and running jobs,
in a process of its own beside the slot steps, bounded, and its answer checked.

What a schedd answers must be job ads: a list of ClassAds, each with integer ClusterId
and ProcId, no job twice, each writable to the snapshot. An answer that is not is refused
as a whole, the schedd named in `missing_schedds` and `errors` with the first thing wrong,
as if it had not answered (the snapshot is partial).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import tempfile
import time
from typing import Callable

import classad2

from ..errors import InputError
from ..limits import give_back_memory
from .adfiles import ad_lines
from .answers import (BadAnswer, _answer_list, _bad_answer, _client_timeouts, _comment_text,
                      _kind, _Lap, _one_line, _real_bindings, checked_job_ads)
from .beside import Beside, Packed, answered_among
from .daemon_config import _ad_string, _no_address
from .job_delta import KnownJobs, delta as jobs_delta, delta_one
from .job_projection import _valid_projection, job_refs_missing_in_lines
from .resource_requests import job_lines_by_requests


JOB_CONSTRAINT = "JobStatus == 1 || JobStatus == 2"  # idle or running

# how many schedds a loop's worker asks at a time, each in a child of its own
# (NEGOTIATOR_EXT_SCHEDD_QUERIES_AT_ONCE): each child holds a schedd's answer while it
# makes it into lines, and two already keep the two cores of a small central manager busy
# (the performance chapter's goal 3 row has the figures)
SCHEDDS_AT_ONCE = 2


def _names_within(names, projection) -> bool:
    """Whether every name of `names` is in `projection` (attribute names: any case)."""
    held = {n.lower() for n in projection}
    return all(n.lower() in held for n in names)


class _SchedsBeside:
    """The schedds queried by another process with an earlier capture's job projection
    (and, capturing by requests, its kept attributes), while this process fetches the
    slot ads and turns them into lines: a loop's `worker` (adapters/worker.py), else a
    child forked now (adapters/beside.py). `result(projection, kept)`: the other
    process's (jobs, answered, missing, errors, timings, by_request) when it queried the
    same (or, its projection a first guess, all of it), else None (it is stopped;
    `query` asks again with the capture's own). Only
    with the real bindings: a fake's calls would be made in a process the test cannot
    see (the caller queries the schedds itself).

    Each schedd's whole answer, its security handshake included, is bounded by
    `timeout` (the bindings hold the interpreter while they wait on a schedd, for 20 s
    per attempt whatever the config says, so no thread of this process could stop
    them): the other process notes which schedd it is asking and since when (a
    progress file); one that takes longer is ended, and a new one asks the schedds
    again without it, which is reported as not having answered. `stop()` true ends the
    wait at once: InputError.

    `at_once`: how many schedds the other process asks at a time, each in a child of
    its own (NEGOTIATOR_EXT_SCHEDD_QUERIES_AT_ONCE; `_query_schedds`). The bound is each
    schedd's own, counted from when its child asked it."""

    def __init__(self, htcondor, pool, projection, kept=None, worker=None, timeout=0,
                 known_jobs=None, stop: Callable[[], bool] | None = None,
                 collector_timeout=None, guess: bool = False, at_once: int = 1):
        self._child = None
        self._at_once = max(1, int(at_once))
        # `projection` a guess (job_projection.first_guess: no earlier capture): its
        # answer serves for any projection whose names it holds
        self._guess = guess
        self._htcondor, self._pool, self._worker = htcondor, pool, worker
        self._timeout = float(timeout) if timeout and timeout > 0 else 0.0
        # the collector, asked where the schedds are, is bounded as the capture's own
        # collector calls are (QUERY_TIMEOUT: a loop's stop timeout when shorter)
        self._collector_timeout = (float(collector_timeout) if collector_timeout
                                   and collector_timeout > 0 else self._timeout)
        self._stop = stop
        self._progress: str | None = None
        self._projection = _valid_projection(projection)
        self._kept = _valid_projection(kept)
        # the worker answers with the jobs changed since the answer the loop holds
        # (adapters/job_delta.py); without a worker, no job is taken from a last pass
        self._known = known_jobs if worker is not None else None
        if known_jobs is not None:
            known_jobs.not_taken()
        if self._projection is None or not _real_bindings(htcondor):
            return
        self._child = self._start({})

    def _start(self, skip: dict[str, str]):
        """The other process, asking the schedds (but those of `skip`) with the current
        projection; None when none can be started."""
        if self._progress is None:
            fd, self._progress = tempfile.mkstemp(prefix="negotiator-ext-schedds-")
            os.close(fd)
        else:
            with open(self._progress, "w"):
                pass                            # a new start: no schedd asked yet
        if self._worker is not None:
            if self._known is None:
                self._known = KnownJobs()
            return self._worker.submit(f"{__name__}:query_schedds_in_worker", self._pool,
                                       self._projection, self._kept, self._timeout,
                                       self._known.token, self._known.digests,
                                       self._progress, skip, self._collector_timeout,
                                       self._at_once)
        child = Beside(_query_schedds_alone, self._htcondor, self._pool, self._projection,
                       self._kept, self._progress, skip, self._at_once)
        return child if child.pid is not None else None

    def __enter__(self) -> "_SchedsBeside":
        return self

    def __exit__(self, *exc) -> None:
        if self._child is not None:
            self._child.cancel()
            self._child = None
        if self._progress is not None:
            with contextlib.suppress(OSError):
                os.unlink(self._progress)
            self._progress = None

    def result(self, projection: list[str], kept: list[str] | None = None):
        child, self._child = self._child, None
        if child is None:
            return None
        same = list(projection) == self._projection and (
            list(kept) if kept is not None else None) == self._kept
        if not same and not (self._guess and self._holds(projection, kept)):
            child.cancel()
            return None
        return self._answer(child)

    def _holds(self, projection, kept) -> bool:
        """Whether the guessed projection (and kept attributes) hold `projection` (and
        `kept`): every name, and of the guess's kept attributes no more than `kept`
        among `projection`'s (an attribute left out of jobs captured by requests stays
        out)."""
        if not _names_within(projection, self._projection):
            return False
        if kept is None or self._kept is None:
            return kept is None and self._kept is None
        if not _names_within(kept, self._kept):
            return False
        asked = {n.lower() for n in projection}
        keep = {n.lower() for n in kept}
        return not any(n.lower() in asked and n.lower() not in keep for n in self._kept)

    @property
    def projection(self) -> list[str] | None:
        """The projection the schedds were (or are being) asked with."""
        return self._projection

    @property
    def kept(self) -> list[str] | None:
        """The attributes jobs captured by requests were (or are being) asked to keep."""
        return self._kept

    def query(self, projection: list[str], kept: list[str] | None = None):
        """The schedds asked now with `projection` by another process (the bound above),
        when `result` had no answer; None with fake bindings or where no process can be
        started (the caller asks them itself)."""
        if not _real_bindings(self._htcondor):
            return None
        self._projection, self._kept = list(projection), (list(kept) if kept is not None
                                                          else None)
        child = self._start({})
        return self._answer(child) if child is not None else None

    def _answer(self, child):
        """Wait for `child`'s answer within the bound (see the class), starting a new one
        without each schedd that took too long."""
        skip: dict[str, str] = {}
        while self._timeout:
            hung = self._wait(child)
            if hung is None:
                break
            child.cancel()
            if hung == "":              # the collector, asked where the schedds are
                why = (f"cannot locate the schedds: the collector did not answer within "
                       f"{self._collector_timeout:g} s (" + (
                           "--timeout" if self._collector_timeout == self._timeout
                           else "NEGOTIATOR_EXT_STOP_TIMEOUT") + ")")
                return [], [], [], {"collector:schedds": why}, {}, {}
            skip[hung] = (f"did not answer within {self._timeout:g} s (its connection, "
                          "security handshake and answer; --timeout)")
            child = self._start(skip)
            if child is None:
                return None
        try:
            got = child.result()
            if self._known is None:
                return (unpacked(got[0]), *got[1:])
        except Exception:               # noqa: BLE001 - queried again here
            return None
        try:
            jobs = self._known.take(got[0])
        except Exception:               # noqa: BLE001 - not an answer: queried again here
            jobs = None
        return (jobs, *got[1:]) if jobs is not None else None

    def _wait(self, child) -> str | None:
        """Until `child` has answered (None), or the schedd it is asking has taken longer
        than the bound (its name); InputError when `stop()` asks for the end."""
        while not child.ready(0.2):
            if self._stop is not None and self._stop():
                child.cancel()
                raise InputError(self._pool or "<local pool>",
                                 "stopped (a stop signal) while the schedds were queried")
            asked = _asking(self._progress)
            bound = self._collector_timeout if asked is not None and asked[1] == "" \
                else self._timeout
            if asked is not None and time.time() - asked[0] > bound + _BOUND_SLACK:
                return asked[1]
        return None


# what the bound on a schedd's answer allows beyond --timeout (the other process's own
# steps around the query)
_BOUND_SLACK = 1.0


def _asking(path: str | None) -> tuple[float, str] | None:
    """The other process's progress: (since when, which schedd) of the schedd it has been
    asking longest (several are asked at a time), or None (none asked now, or nothing
    noted yet)."""
    if path is None:
        return None
    try:
        with open(path, encoding="utf-8") as f:
            steps = [json.loads(line) for line in f.read().splitlines() if line]
        asking: dict[str, float] = {}
        for at, name, done in steps:
            if done:
                asking.pop(str(name), None)
            else:
                asking.setdefault(str(name), float(at))
    except (OSError, ValueError, TypeError):
        return None
    if not asking:
        return None
    name = min(asking, key=asking.__getitem__)
    return asking[name], name


class _Progress:
    """What the process asking the schedds (and its children) note for its parent
    (`_asking`): one line per step, [when, schedd, done], each line one write to the
    file opened for appending (the children's lines do not mix)."""

    def __init__(self, path: str | None):
        self.path = path

    def __call__(self, name: str, done: bool = False) -> None:
        if self.path is None:
            return
        with contextlib.suppress(OSError), open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps([time.time(), name, done]) + "\n")


def query_schedds_in_worker(pool, projection: list[str], kept: list[str] | None,
                            timeout: int, have: str | None = None,
                            held: dict | None = None, progress: str | None = None,
                            skip: dict | None = None, query_timeout: int | None = None,
                            at_once: int = 1):
    """`_query_schedds_alone` in a loop's worker process (adapters/worker.py), with the
    capture's client timeouts; the jobs as a job_delta.Delta against the answer `have`
    the loop holds, whose digests it sends back (`held`). A schedd asked apart (`at_once`)
    is coded in its own process."""
    import htcondor2
    if have is None or not isinstance(held, dict):
        have, held = None, {}

    def code(name: str, lines: list) -> tuple:
        return delta_one(lines, held.get(name))
    with _client_timeouts(htcondor2, timeout, query_timeout):
        jobs, *rest = _query_schedds_alone(htcondor2, pool, projection, kept, progress, skip,
                                           at_once, code)
    return (jobs_delta(jobs, have, held), *rest)


def _query_schedds_alone(htcondor, pool, projection: list[str], kept: list[str] | None,
                         progress: str | None = None, skip: dict | None = None,
                         at_once: int = 1, pack=None):
    """`_query_schedds` in a process of its own: (jobs, answered, missing, errors,
    timings, by_request). `progress`: the file its parent watches (`_asking`); `skip`:
    schedd name -> why it is not asked; `at_once`, `pack`: see `_query_schedds`."""
    errors: dict[str, str] = {}
    timings = {"schedd_query": 0.0, "job_lines": 0.0}
    by_request: dict[str, dict] = {}
    collector = htcondor.Collector(pool)
    jobs, answered, missing = _query_schedds(htcondor, collector, projection, errors, {},
                                             _Lap(timings), kept, by_request,
                                             where=pool or "<local pool>",
                                             progress=_Progress(progress), skip=skip,
                                             at_once=at_once, pack=pack)
    return jobs, answered, missing, errors, timings, by_request


def _query_schedds(htcondor, collector, projection: list[str], errors: dict,
                   shared: dict | None = None, lap=None, kept: list[str] | None = None,
                   by_request: dict | None = None, where: str = "<local pool>",
                   progress: Callable[..., None] | None = None, skip: dict | None = None,
                   at_once: int = 1, pack=None):
    """Each schedd's (name, its job ads' lines), the schedds that answered, those that
    did not. A schedd whose answer is not job ads, or cannot be written, is one that did
    not answer; when only its second answer is, the first one's jobs are kept. `lap`
    (_Lap) is told where the time went: "schedd_query", "job_lines".

    `kept`: capture each schedd by its resource requests (`resource_requests`), each job
    with these of its own attributes; `by_request` is told, for each schedd captured
    that way, how many autoclusters and jobs (a schedd left out of it was queried whole).
    `where`: the collector, for messages about its answer (a location that is not an
    ad, or has no MyAddress). `progress(name)` is told before a schedd is asked and
    `progress(name, True)` once its answer is in (`_SchedsBeside`); `skip`: schedd name
    -> why it is not asked (it did not answer a process before this one in time).

    `at_once` more than 1: the schedds are asked in child processes, that many at a time
    (`_asked_apart`); each one's lines come back as a beside.Packed of `pack(name,
    lines)` (the lines themselves without `pack`), for the process that uses them to
    unpack (`unpacked`)."""
    lap = lap or _no_lap
    pack = pack or _same
    shared = {} if shared is None else shared
    who = f"the collector {_comment_text(where)}"
    if progress is not None:
        progress("")                    # "": the collector, asked where the schedds are
    try:
        answer = collector.locateAll(htcondor.DaemonTypes.Schedd)
    except Exception as exc:
        errors["collector:schedds"] = f"cannot locate the schedds: {_one_line(exc)}"
        return [], [], []
    finally:
        if progress is not None:
            progress("", True)
    try:
        # (each item is looked at below: one that is not an ad leaves the others)
        locations = _answer_list(answer, "ad")
    except BadAnswer as exc:
        errors["collector:schedds"] = f"cannot locate the schedds: {who} {exc}"
        return [], [], []
    answered: list[str] = []
    missing: list[str] = []
    seen: set[str] = set()
    todo: list[tuple[str, object, str]] = []    # (name, location ad, how it was found)
    for i, loc in enumerate(locations, start=1):
        if not isinstance(loc, classad2.ClassAd):
            errors["collector:schedds"] = (f"{who} answered with something that is not "
                                           f"a schedd's location ad: item {i} of "
                                           f"{len(locations)} is {_kind(loc)}")
            continue
        name = _ad_string(loc, "Name") or _ad_string(loc, "MyAddress") or f"schedd-{i}"
        if name in seen:
            continue  # the same schedd advertised twice
        seen.add(name)
        if skip and name in skip:
            errors[name] = skip[name]
            missing.append(name)
            continue
        where_found = f"its location ad (item {i} of {len(locations)})"
        why = _no_address(loc)
        if why is not None:
            errors[name] = (f"cannot be queried: {who} answered with {where_found} whose "
                            f"MyAddress is {why}")
            missing.append(name)
            continue
        todo.append((name, loc, where_found))

    def ask(name, loc, where_found, lap=lap):
        """(its lines or None, its errors, its by_request entry or None)"""
        mine: dict[str, str] = {}
        stats: dict[str, dict] = {}
        lines = _ask_schedd(htcondor, name, loc, f"{who} answered with {where_found}",
                            projection, kept, shared, lap, mine, stats, progress)
        return lines, mine, stats.get(name)

    outcomes = (_asked_apart(todo, ask, at_once, pack, lap) if at_once > 1 and len(todo) > 1
                else [(name, *ask(name, loc, found)) for name, loc, found in todo])
    results: list[tuple[str, list]] = []
    for name, lines, mine, stats in outcomes:
        errors.update(mine)
        if stats is not None and by_request is not None:
            by_request[name] = stats
        if lines is None:
            missing.append(name)
        else:
            results.append((name, lines))
            answered.append(name)
    return results, answered, missing


def _ask_schedd(htcondor, name: str, loc, found: str, projection: list[str],
                kept: list[str] | None, shared: dict, lap, errors: dict,
                by_request: dict | None, progress) -> list | None:
    """One schedd's job ads' lines (`_query_schedds`), or None when it did not answer
    (`errors` says why). `found`: where its location ad came from, for messages."""
    try:
        schedd = htcondor.Schedd(loc)
    except KeyError as exc:             # the bindings read the location ad's attributes
        attr = _comment_text(str(exc.args[0] if exc.args else exc))[:60]
        errors[name] = f"cannot be queried: {found} without {attr}"
        lap("schedd_query")
        return None
    except Exception as exc:
        errors[name] = _one_line(exc)
        lap("schedd_query")
        return None

    def whole(constraint: str) -> list[list[str]]:
        return _whole_job_lines(schedd, name, constraint, projection, shared, lap, errors,
                                getattr(getattr(htcondor, "QueryOpt", None), "SummaryOnly",
                                        None))
    if progress is not None:
        progress(name)
    try:
        got = None
        if kept is not None:
            got = job_lines_by_requests(
                htcondor, schedd, constraint=JOB_CONSTRAINT, kept=kept, shared=shared,
                checked=_checked_or_unusable, whole=whole,
                missing_refs=job_refs_missing_in_lines, lap=lap)
        if got is not None:
            lines, stats = got
            if by_request is not None:
                by_request[name] = stats
            return lines
        return whole(JOB_CONSTRAINT)
    except _Unusable as exc:
        errors[name] = str(exc)
    except Exception as exc:
        errors[name] = _one_line(exc)
    finally:
        if progress is not None:
            progress(name, True)
    return None


def _asked_apart(todo: list, ask, at_once: int, pack, lap) -> list:
    """Each schedd of `todo` ((name, location ad, where found)) asked by `ask` in a child
    process of its own, `at_once` of them at a time: [(name, its lines as `pack(name,
    lines)` makes them, in a beside.Packed, or None, its errors, its by_request entry)],
    in `todo`'s order. Where no child can be forked, `ask` runs here, one schedd after
    another. `lap` is told the whole wall time as "schedd_query" (the children's asking
    and their lines overlap)."""
    def apart(name, loc, found):
        lines, mine, stats = ask(name, loc, found, _no_lap)
        return (None if lines is None else Packed(pack(name, lines))), mine, stats

    out: list = [None] * len(todo)
    running: dict[int, Beside] = {}
    waiting = list(enumerate(todo))
    try:
        while waiting or running:
            while waiting and len(running) < at_once:
                k, (name, loc, found) = waiting.pop(0)
                running[k] = Beside(apart, name, loc, found)
            for k in answered_among(running):
                out[k] = (todo[k][0], *running.pop(k).result())
    finally:
        for child in running.values():
            child.cancel()
    lap("schedd_query")
    return out


def _no_lap(step: str) -> None:
    pass


def _same(name: str, lines: list) -> list:
    return lines


def unpacked(jobs: list) -> list:
    """`jobs` ((schedd, lines)) with the lines of schedds asked apart unpacked."""
    return [(name, lines.unpack() if isinstance(lines, Packed) else lines)
            for name, lines in jobs]


def _checked_or_unusable(answer) -> list:
    """`checked_job_ads`, raising _Unusable (naming the first thing wrong)."""
    try:
        return checked_job_ads(answer)
    except Exception as exc:
        raise _Unusable(_bad_answer(exc)) from None


def _whole_job_lines(schedd, name: str, constraint: str, projection: list[str],
                     shared: dict, lap, errors: dict, count_opt=None) -> list[list[str]]:
    """The lines of a schedd's jobs matching `constraint`, queried whole with
    `projection` (`_asked_whole`), and once more with it extended when the jobs' own
    expressions or AutoClusterAttrs name attributes it lacks. Raises _Unusable when the
    answer is not job ads or cannot be written; a failed query raises. `count_opt`: the
    bindings' QueryOpt.SummaryOnly, for `_pieces`."""
    lines = _asked_whole(schedd, constraint, projection, shared, lap, count_opt)
    try:
        extra = job_refs_missing_in_lines(lines, projection)
    except Exception as exc:
        raise _Unusable(_bad_answer(exc)) from None
    finally:
        lap("job_lines")
    if extra:
        why = f"second query (projection extended by {', '.join(extra)})"
        try:
            lines = _asked_whole(schedd, constraint, list(projection) + extra, shared, lap,
                                 count_opt)
        except _Unusable as exc:
            errors[name] = f"{why}: jobs kept from the first, {exc}"
        except Exception as exc:
            errors[name] = f"{why} failed, jobs kept from the first: {_one_line(exc)}"
        lap("job_lines")
    return lines


# A schedd asked for its jobs whole (a first capture, or a queue no cycle has grouped into
# autoclusters yet) sends them in one answer, which the bindings hold as ClassAds while
# it is made into lines: about 3.6 KB a job, 1.8 GiB for 500,000. A schedd with more jobs
# than this is asked for them in pieces of about this many, one piece held at a time.
JOBS_PER_QUERY = 100_000
# the pieces when the schedd gives no count of its jobs, and the most asked for
PIECES_UNCOUNTED = 8
MAX_PIECES = 1000


def _asked_whole(schedd, constraint: str, projection: list[str], shared: dict,
                 lap, count_opt=None) -> list[list[str]]:
    """The lines of a schedd's jobs matching `constraint`, asked with `projection`.

    One query, at most JOBS_PER_QUERY + 1 jobs: a queue that fits is answered whole, as
    before (a small schedd is asked once). One that does not is asked again in pieces,
    its jobs split by (ClusterId + ProcId) modulo the number of pieces (a queue of
    one-job clusters and one of a single large cluster split alike): each job is in
    exactly one piece, so none is seen twice, and the schedd's count of the jobs
    (SummaryOnly, one ad) sets how many pieces. The order of the lines is the pieces'
    (the schedd's own order within each): what reads them orders the jobs by id.
    Raises _Unusable when an answer is not job ads, holds a job outside the piece asked
    for, or cannot be written; a failed query raises."""
    try:
        answer = schedd.query(constraint=constraint, projection=list(projection),
                              limit=JOBS_PER_QUERY + 1)
    finally:
        lap("schedd_query")
    if not (isinstance(answer, list) and len(answer) > JOBS_PER_QUERY):
        lines = _job_lines(answer, shared)
        del answer                          # the ClassAds are freed here
        lap("job_lines")
        return lines
    del answer
    pieces = _pieces(schedd, constraint, count_opt)
    lap("schedd_query")
    lines: list[list[str]] = []
    for piece in range(pieces):
        try:
            answer = schedd.query(
                constraint=f"({constraint}) && (ClusterId + ProcId) % {pieces} == {piece}",
                projection=list(projection))
        finally:
            lap("schedd_query")
        lines.extend(_job_lines(answer, shared, (piece, pieces)))
        del answer
        give_back_memory()                  # the piece's ClassAds, back to the system
        lap("job_lines")
    return lines


def _pieces(schedd, constraint: str, opt) -> int:
    """How many pieces a queue too large for one answer is asked in: the schedd's count
    of the jobs matching `constraint` (a SummaryOnly query: the schedd counts, and
    answers one ad) over JOBS_PER_QUERY, with a piece to spare for jobs submitted
    meanwhile; PIECES_UNCOUNTED when it gives no count (or `opt`, the bindings'
    QueryOpt.SummaryOnly, is None)."""
    count = None
    if opt is not None:
        try:
            got = schedd.query(constraint=constraint, projection=["Jobs"], opts=opt)
            if isinstance(got, list) and len(got) == 1 and isinstance(got[0], classad2.ClassAd):
                v = got[0].get("Jobs")
                count = v if type(v) is int and v >= 0 else None
        except Exception:               # noqa: BLE001 - the pieces counted without it
            count = None
    if count is None:
        return PIECES_UNCOUNTED
    return min(MAX_PIECES, max(2, -(-count // JOBS_PER_QUERY) + 1))


class _Unusable(Exception):
    """A schedd's answer that cannot be used (the message says why)."""


def _job_lines(answer, shared: dict | None, piece: tuple[int, int] | None = None
               ) -> list[list[str]]:
    """A schedd's answer, checked to be job ads (`checked_job_ads`), as each job's lines
    (`adfiles.ad_lines`); _Unusable when it is not job ads or cannot be written, or,
    asked for `piece` (i, of pieces: `_asked_whole`), holds a job of another piece."""
    jobs = _checked_or_unusable(answer)
    if piece is not None:
        i, pieces = piece
        for ad in jobs:
            c, p = ad["ClusterId"], ad["ProcId"]    # (whole numbers: checked)
            if (c + p) % pieces != i:
                raise _Unusable(f"answered with job {c}.{p} to the query for piece {i} "
                                f"of {pieces} ((ClusterId + ProcId) % {pieces} == {i}): "
                                "not what was asked")
    try:
        return ad_lines(jobs, shared)
    except Exception as exc:
        raise _Unusable(f"cannot write its job ads: {_one_line(exc)}") from None


def _safe(name: str) -> str:
    s = re.sub(r"[^A-Za-z0-9._@-]+", "_", name).strip("._")
    return s or "schedd"


def _schedd_file_names(names: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    used: set[str] = set()
    for name in names:
        base = f"jobs-{_safe(name)}"
        fname, n = f"{base}.ads", 1
        while fname.lower() in used:
            n += 1
            fname = f"{base}-{n}.ads"
        used.add(fname.lower())
        out[name] = fname
    return out
