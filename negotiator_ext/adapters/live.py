"""Capture a pool snapshot from a live pool through htcondor2 (`negotiator-ext snapshot`).

Writes the directory layout `negotiator_ext.adapters.snapshot` reads:

  slots.ads            collector: Startd ads (full ads, no projection), MyType "Machine" only
  submitters.ads       collector: Submitter ads           (absent if that query failed)
  accounting.ads       collector: Accounting ads          (absent if that query failed)
  negotiator.ads       collector: Negotiator ads          (absent if that query failed)
  schedds.ads          collector: Schedd ads              (absent if that query failed)
  jobs-<schedd>.ads    each schedd's idle and running jobs, one file per schedd that answered
  config               the negotiator's policy knobs read with RemoteParam (absent if the
                       negotiator could not be located or read)
  negotiators/         a pool of several negotiators: each one's policy knobs, the same
                       way, in <Name>.config (a failed read makes the snapshot partial)
  meta.json            when, from which pool, what is missing and why

Only READ-level operations are used: Collector.query / locate / locateAll, Schedd.query,
and reading RemoteParam values. Nothing is ever sent to a daemon that changes it.

Bindings calls made by one capture (`htcondor2` is the module used):

  Collector(pool)                                                1 (no network)
  collector.query(AdTypes.Startd)                                1  -- failure: InputError
  collector.query(AdTypes.Negotiator)                            1
  collector.query(AdTypes.Submitter)                             1
  collector.query(AdTypes.Accounting)                            1
  collector.query(AdTypes.Schedd)                                1 (a failure is a warning)
  collector.locate(DaemonTypes.Negotiator)                       1
  RemoteParam(negotiator location)                               1 (fetches the key list)
  remote_param[name] for each selected policy knob               1 each (the bindings have
                                                                   no bulk read: one
                                                                   CONFIG_VAL per value)
    (these two in a child process with a time limit: see "Reading the negotiator's
    configuration" below)
  collector.query(AdTypes.Collector, projection=[...])           0 or 1 (only when no
                                                                   negotiator ad carries a
                                                                   CondorVersion)
  collector.locateAll(DaemonTypes.Negotiator)                    1 (with several: the
                                                                   two RemoteParam steps
                                                                   above for each other one)
  collector.locateAll(DaemonTypes.Schedd)                        1
  Schedd(location).query(constraint, projection)                 1 or 2 per schedd
  (by_requests: Schedd.query(opts=QueryOpt.AutoCluster), then    2, 3 or 4 per schedd
   the jobs' own attributes, then those without a known
   autocluster by their ids: adapters/resource_requests.py)

Job projection: `BASE_JOB_ATTRS` (the job attributes the negotiator reads), plus every
job attribute the slots' Requirements / Start / Rank / Consumption* expressions reference
(found with classad2's `ClassAd.externalRefs`, which follows the slot's own attributes
transitively, e.g. Requirements -> START -> WithinResourceLimits -> TARGET.RequestCpus),
plus the job attributes referenced by the negotiator's PREEMPTION_REQUIREMENTS,
PREEMPTION_RANK, NEGOTIATOR_PRE_JOB_RANK, NEGOTIATOR_POST_JOB_RANK (TARGET refs and
unscoped refs no slot defines) and NEGOTIATOR_JOB_CONSTRAINT (all refs). After the first
query of a schedd, the jobs' own expressions (Requirements, Rank, RequestMemory, ...) are
checked the same way for MY./unscoped references that were not projected, and the names
in each job's AutoClusterAttrs are added; if anything new turns up, that schedd is queried
once more with the extended projection (never more than twice per schedd).

What a schedd answers must be job ads: a list of ClassAds, each with integer ClusterId
and ProcId, no job twice, each writable to the snapshot. An answer that is not is refused
as a whole, the schedd named in `missing_schedds` and `errors` with the first thing wrong,
as if it had not answered (the snapshot is partial).

Reading the negotiator's configuration: the daemon expands each value it is asked for
while the request waits, and the bindings wait for the answer inside C++ code, holding
the interpreter lock, with no time limit. A value whose expansion never ends (`A = $(B)`,
`B = $(A)`) therefore never comes back and, read in this process, would freeze it (signal
handlers included). So the real bindings' RemoteParam is read by a child process
(`_param_dump --remote`), killed when it takes longer than the capture's `timeout`; it
names each knob before fetching it, so the knob it hung on is named in the error
("negotiator": `reading KNOB from the negotiator NAME did not end within N s ...`), and
the capture goes on without the negotiator's config (an earlier snapshot's when there is
one). The negotiator itself then stays busy expanding the value (HTCondor's expand_macro
has no limit either) until it is restarted. `abort_remote_reads()` (the shadow daemon on
SIGTERM) kills such a child at once. A RemoteParam that is not the bindings' own (a fake)
is read in this process. The Negotiator and Schedd ads are queried first: a shadow loop's
capture (`kept_reads`, `KeptReads`) skips the RemoteParam steps of a daemon whose ad says
it has not read its files since the loop's last read of it.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import unicodedata
from dataclasses import dataclass, field
from itertools import compress, repeat
from operator import is_
from pathlib import Path
from types import MappingProxyType
from typing import Any, Callable, Iterable, Mapping

import classad2

from ..core.negotiation import id_number
from ..errors import InputError
from .adfiles import (_parse_one, _split_line, _unwrapped, ad_lines, write_ads,
                      write_lines)
from .beside import Beside
from .collector_gate import CollectorSilent, GatedCollector
from .job_delta import KnownJobs, delta as jobs_delta
from .locations import KeptLocations, located
from .remote_knobs import KNOB_NAME, select_policy_knobs, select_schedd_knobs
from .resource_requests import job_lines_by_requests, kept_attributes
from .slot_cache import is_slot_ad
from .snapshot import NEGOTIATORS as NEGOTIATORS_DIR, SCHEDD_KNOBS as SCHEDD_KNOBS_FILE
from .snapshot import SNAPSHOT_FORMAT, negotiator_config_name
from .collector_order import table_sizes

TOOL = "negotiator-ext snapshot"

JOB_CONSTRAINT = "JobStatus == 1 || JobStatus == 2"  # idle or running

# The job attributes the negotiator (and the schedd's resource requests to it) use.
BASE_JOB_ATTRS: tuple[str, ...] = (
    # identity
    "ClusterId", "ProcId", "GlobalJobId", "MyType", "TargetType", "JobUniverse",
    "JobStatus", "EnteredCurrentStatus", "QDate", "LastMatchTime",
    # who is charged (submitter / accounting group)
    "Owner", "User", "AccountingGroup", "AcctGroup", "AcctGroupUser", "NiceUser",
    # ordering within a submitter
    "JobPrio", "PreJobPrio1", "PreJobPrio2", "PostJobPrio1", "PostJobPrio2",
    # matchmaking
    "Requirements", "Rank", "RequestCpus", "RequestMemory", "RequestDisk", "RequestGPUs",
    "ConcurrencyLimits", "AutoClusterId", "AutoClusterAttrs", "WantMatchDiagnostics",
    "FileSystemDomain",
    # the schedd always names it in AutoClusterAttrs (its minimal significant attributes:
    # Requirements, Rank, ConcurrencyLimits, FlockTo): projected at once, so that naming
    # it does not cost every capture a second query
    "FlockTo",
    # what Request* defaults are computed from
    "ImageSize", "ExecutableSize", "DiskUsage", "MemoryUsage",
    # running jobs: who holds which slot, and who is in the schedd's upload queue (its
    # per-user match limit, core.schedd_limits)
    "RemoteUser", "RemoteHost", "TransferringInput", "TransferQueued", "TransferringOutput",
)

# Slot expressions the negotiator evaluates against a job (MY = slot, TARGET = job).
SLOT_EXPR_ATTRS: tuple[str, ...] = ("Requirements", "Start", "Rank")
SLOT_EXPR_PREFIXES: tuple[str, ...] = ("Consumption",)  # p-slot consumption policy
_SLOT_EXPR_LOWER = frozenset(a.lower() for a in SLOT_EXPR_ATTRS)
_SLOT_EXPR_PREFIXES_LOWER = tuple(p.lower() for p in SLOT_EXPR_PREFIXES)

# Negotiator knobs evaluated with MY = slot, TARGET = job / with MY = job.
_SLOT_SCOPE_KNOBS = ("PREEMPTION_REQUIREMENTS", "PREEMPTION_RANK",
                     "NEGOTIATOR_PRE_JOB_RANK", "NEGOTIATOR_POST_JOB_RANK")
_JOB_SCOPE_KNOBS = ("NEGOTIATOR_JOB_CONSTRAINT",)

# Names HTCondor's config reads as the start of a statement even before "=" (knob names
# it accepts: remote_knobs.KNOB_NAME).
_CONFIG_KEYWORDS = frozenset({"if", "elif", "else", "endif"})

# HTCondor's own client-side timeouts (seconds), set for the duration of a capture.
_TIMEOUT_KNOBS = ("QUERY_TIMEOUT", "Q_QUERY_TIMEOUT")

# The time limit of the negotiator's configuration read when the capture has none.
DEFAULT_REMOTE_READ_TIMEOUT = 30.0
_REMOTE_POLL = 0.05        # s: how often the child's end (and an abort) is checked
_REMOTE_ALARM_EXTRA = 5    # s: the child's own alarm, should this process be gone


@dataclass(frozen=True)
class CaptureReport:
    directory: Path
    slots: int
    jobs: int
    schedds: tuple[str, ...]          # schedds that answered
    missing_schedds: tuple[str, ...]  # schedds that timed out / refused / failed
    errors: Mapping[str, str]         # schedd name (or "collector:<what>", "negotiator") -> message
    partial: bool
    # what was written, still in memory, so that a pass need not read it back
    ads: "CapturedAds | None" = field(default=None, repr=False, compare=False)
    # seconds per step of the capture (CAPTURE_STEPS)
    timings: Mapping[str, float] = field(default_factory=dict, compare=False)


# The steps of a capture, in order: the collector's slot ads; turning them into lines;
# the collector's other ads and the negotiator's config (read beside the lines); the
# schedds' job queries; the job ads' lines (checked, their ClassAds freed); waiting for
# the child that queried the schedds beside the slot steps (then the two steps before
# are the child's, and overlap the slot steps); writing the snapshot directory.
CAPTURE_STEPS = ("slot_query", "slot_lines", "collector_other", "schedd_query", "job_lines",
                 "schedd_wait", "write")


@dataclass(frozen=True)
class CapturedAds:
    """A capture's slot and job ads as written to its snapshot: the slot ads as the
    collector sent them, and every ad's lines (`adfiles.ad_lines`), by file name."""
    slots: tuple
    slot_lines: list
    jobs: Mapping[str, list]          # jobs file name -> each job's lines
    # the slot ads' texts when the capture has them already (a shadow loop's kept slots)
    slot_texts: Any = None
    # the slot ads are kept for a later pass (slot_cache): the cycle copies an ad
    # before it writes into it
    shared: bool = False
    # each kept slot's memo (slot_cache: what pool.build_pool works out of it alone)
    slot_memos: Any = None
    # a shadow loop's job lines split by its last pass (adfiles.KnownLines)
    known_lines: Any = None
    # jobs file name -> its schedd (known_lines.jobs keeps what it can by schedd)
    job_schedds: Mapping[str, str] = field(default_factory=dict)


def capture_snapshot(pool: str | None, out_dir: str | Path, *, timeout: int = 30,
                     now: int | None = None, htcondor=None,
                     earlier_config: Path | None = None,
                     earlier_projection: list[str] | None = None,
                     earlier_kept: list[str] | None = None,
                     by_requests: bool = False, slot_cache=None,
                     known_lines=None, worker=None, kept_reads=None,
                     stop: Callable[[], bool] | None = None,
                     collector_wait: float | None = None,
                     heard=None) -> CaptureReport:
    """Read the pool through the bindings and write a snapshot directory at `out_dir`.

    `pool` is the collector as "HOST[:PORT]" (None: the locally configured pool). A schedd,
    the negotiator or an optional collector query that fails is reported (report.errors,
    meta.json) and the rest is still written, marked partial. If the collector cannot be
    queried for slot ads, InputError is raised and nothing is written. An existing
    non-empty `out_dir` is replaced (atomically, by rename) only if it is an earlier
    snapshot (has meta.json); otherwise InputError.

    `earlier_config`: the `config` of an earlier snapshot of the same pool, used when the
    negotiator cannot be located or read (a restarted collector knows no negotiator until
    its next update, NEGOTIATOR_UPDATE_INTERVAL later): the snapshot is then not partial
    for that, and meta.json says where its config came from ("config_source") and why
    ("warnings").

    `earlier_projection`: the job projection of an earlier snapshot of the same pool
    (its meta.json's "job_projection"). The projection depends on the slots, so the
    schedds are queried after the collector; with the real bindings and one thread, a
    child process queries them with the earlier projection beside the slot steps, and
    its answer is taken when the projection turns out the same (a pool's slots and
    negotiator config seldom change between two passes), else dropped and the schedds
    queried again (`_SchedsBeside`).

    `by_requests`: each schedd captured by its resource requests (`resource_requests`:
    its autoclusters, and each job's own attributes), when it can be; `earlier_kept`:
    the earlier snapshot's "job_request_attrs", for the child beside.

    `slot_cache` (slot_cache.SlotCache, a shadow loop's): the slot ads of the loop's
    last pass, of which only those the collector heard from since are fetched again; the
    ads it hands out are kept for the next pass (`CapturedAds.shared`); `known_lines`
    (adfiles.KnownLines, a loop's too): the job lines its last pass split, for the pass
    to take its job texts from (`snapshot.load_snapshot`). `worker` (worker.Worker, a
    loop's too): the process that queries the schedds beside the slot steps, instead of
    a child forked from this one. `kept_reads` (KeptReads, a loop's too): the daemons'
    configurations read by its earlier passes, taken again while their daemons' ads say
    they have not read their files since.

    A schedd's whole answer is bounded by `timeout`, and `stop()` (a loop's stop
    signal) ends the wait for the schedds at once, with InputError (`_SchedsBeside`).
    The collector is asked in this process, each call waiting at most `timeout` for
    each part of its answer (QUERY_TIMEOUT), or `collector_wait` when that is shorter (a
    loop's NEGOTIATOR_EXT_STOP_TIMEOUT: the bindings hold the interpreter while they
    wait, so a stop waits for the call in flight); once a call has waited that out, the
    capture asks the collector nothing more (`collector_gate`); `heard`
    (collector_gate.Heard, a loop's) is told whether the collector's last call was
    answered.
    """
    out = Path(out_dir)
    _check_destination(out)
    if htcondor is None:
        import htcondor2 as htcondor
    source = pool or "<local pool>"
    captured_at = int(time.time()) if now is None else int(now)
    errors: dict[str, str] = {}
    timings = dict.fromkeys(CAPTURE_STEPS, 0.0)
    lap = _Lap(timings)

    query_timeout = timeout
    if collector_wait is not None and collector_wait > 0 and timeout and timeout > 0:
        query_timeout = max(1, min(int(timeout), int(math.ceil(collector_wait))))
    with _client_timeouts(htcondor, timeout, query_timeout), _SchedsBeside(
            htcondor, pool, earlier_projection,
            earlier_kept if by_requests else None, worker, timeout,
            known_lines.jobs if known_lines is not None else None, stop,
            query_timeout) as beside:
        seen: dict = {}             # one string for each distinct line of the capture
        slot_texts = slot_memos = refreshed = None
        try:
            collector = htcondor.Collector(pool)
        except Exception as exc:
            raise InputError(source, "cannot query the collector for slot ads: "
                                     f"{_one_line(exc)}") from None
        # one call that waits out the timeout, and the capture asks the collector no more
        collector = GatedCollector(
            collector, query_timeout, source,
            "--timeout" if query_timeout == timeout else "NEGOTIATOR_EXT_STOP_TIMEOUT: a "
            "stop waits for the call in flight", heard)
        # the daemons' own ads first: their stamps tell whether a loop's kept reads of
        # their configurations still serve; the schedds' ads (MaxJobsRunning,
        # CurbMatchmaking) failing is a warning
        negotiator_ads = _optional_query(collector, htcondor.AdTypes.Negotiator,
                                         "collector:negotiator", errors, source)
        schedd_ad_errors: dict = {}
        schedd_ads = _optional_query(collector, htcondor.AdTypes.Schedd, "schedds",
                                     schedd_ad_errors, source)
        lap("collector_other")
        if kept_reads is not None:
            kept_reads.last = {}
        # the negotiator's config is read by a child process beside the slot steps
        config_read, others_read, schedd_knobs_read = _start_reads(
            htcondor, collector, timeout, kept_reads, (negotiator_ads, schedd_ads), source)
        query = _startd_query(htcondor, collector, timings)
        slots = None
        asked = time.monotonic()
        try:
            if slot_cache is None:
                raw_slots = query(None, None)
                startd_ads = len(raw_slots)
                slots = [ad for ad in raw_slots if is_slot_ad(ad)]
                slot_lines = ad_lines(slots, seen)
            else:
                refreshed = slot_cache.refresh(query, seen, str(out / "slots.ads"))
                slots, slot_lines, startd_ads = (refreshed.slots, refreshed.lines,
                                                 refreshed.answered)
                slot_texts, slot_memos = refreshed.texts, refreshed.memos
        except _QueryFailed as exc:
            if collector.silent is not None or isinstance(exc.__cause__, CollectorSilent):
                why = (collector.silent if collector.silent is not None
                       else _one_line(exc.__cause__))
                raise InputError(source, f"cannot query the collector for slot ads: {why}"
                                 ) from None
            # a refusal for want of READ looks like any failure: ask the collector why
            from .authz import READ, refusal
            why = refusal(htcondor, pool, READ, "the collector",
                          took=time.monotonic() - asked)
            raise InputError(source, "cannot query the collector for slot ads: "
                                     f"{_one_line(exc.__cause__)}"
                                     + (f" ({why})" if why else "")) from None
        except BadAnswer as exc:
            raise InputError(source, f"cannot read the collector's slot ads: {exc}") from None
        except InputError:
            raise
        except Exception as exc:
            raise InputError(source, "cannot write the collector's slot ads: "
                                     f"{_unwritable_ad(slots, exc)}") from None
        lap("slot_lines")

        submitters = _optional_query(collector, htcondor.AdTypes.Submitter,
                                     "collector:submitters", errors, source)
        accounting = _optional_query(collector, htcondor.AdTypes.Accounting,
                                     "collector:accounting", errors, source)

        neg_location, knobs = config_read.result(errors)
        version = _condor_version(htcondor, collector, negotiator_ads, neg_location)
        warnings: list[str] = []
        earlier_text = None
        if knobs is None and earlier_config is not None and "negotiator" in errors:
            earlier_text, knobs = _earlier_config(earlier_config)
            if earlier_text is not None:
                warnings.append(f"the negotiator's config is {earlier_config}'s (this "
                                f"capture: {errors.pop('negotiator')})")

        # several negotiators (each its own shard of the slots): every one's config,
        # and the job attributes any of them reads
        others, other_warnings = others_read.result(errors)
        warnings.extend(other_warnings)
        refs = referenced_job_attrs(slots, knobs, slot_lines, slot_memos)
        projection = projection_of(refs)
        for _, other in others.values():
            if other is not None:
                more = referenced_job_attrs(slots, other, slot_lines, slot_memos)
                refs |= more
                projection = list(dict.fromkeys([*projection, *projection_of(more)]))
        kept = kept_attributes(projection, refs) if by_requests else None
        lap("collector_other")
        got = beside.result(projection, kept)
        queried = "beside the slots" if got is not None else "after the slots"
        if got is None:
            got = beside.query(projection, kept)
        by_request: dict[str, dict] = {}
        if got is not None:
            schedd_jobs, answered, missing, schedd_errors, schedd_timings, by_request = got
            errors.update(schedd_errors)
            timings.update(schedd_timings)
            lap("schedd_wait")
        else:
            schedd_jobs, answered, missing = _query_schedds(
                htcondor, collector, projection, errors, seen, lap, kept, by_request,
                where=source)

    schedd_knobs, knob_warnings = schedd_knobs_read.result()
    warnings.extend(knob_warnings)
    if schedd_ad_errors:
        warnings.append(f"the collector's schedd ads were not read "
                        f"({schedd_ad_errors['schedds']}): their CurbMatchmaking and "
                        "MaxJobsRunning are not known")
    config_text = earlier_text
    if knobs is not None and config_text is None:
        config_text = format_config(knobs, negotiator=neg_location, pool=pool,
                                    captured_at=captured_at)

    files = _schedd_file_names([name for name, _ in schedd_jobs])
    optional = {"submitters": submitters, "accounting": accounting,
                "negotiator": negotiator_ads, "schedds": schedd_ads}

    def make_meta() -> dict:
        meta = {
            "format": SNAPSHOT_FORMAT,
            "captured_at": captured_at,
            "pool": pool or "<local>",
            "tool": TOOL,
            "htcondor_version": version,
            # the slot and submitter ads are written in the order the collector answered
            # (its hash tables' walk), which breaks the negotiator's ties
            "ad_order": "collector",
            "partial": bool(errors) or bool(missing),
            "missing_schedds": list(missing),
            "errors": dict(errors),
            **({"config_source": f"an earlier snapshot: {earlier_config}"}
               if earlier_text is not None else {}),
            **({"warnings": warnings} if warnings else {}),
            "counts": {
                "slots": len(slots),
                "jobs": sum(len(lines) for _, lines in schedd_jobs),
                "submitters": len(optional["submitters"] or ()),
                "accounting": len(optional["accounting"] or ()),
            },
            "schedd_files": {files[name]: name for name, _ in schedd_jobs},
            "job_projection": list(projection),
            # a schedd captured by its resource requests: each job's own attributes
            # asked (before its significant ones are taken out), and per schedd how
            # many autoclusters and jobs (resource_requests; the others' jobs whole)
            **({"job_request_attrs": list(kept)} if kept is not None else {}),
            **({"captured_by_requests": by_request} if by_request else {}),
            # when the schedds were queried: by a child process beside the slot steps,
            # with the earlier snapshot's projection (the same), or after them
            "schedds_queried": queried,
        }
        # how far the collector's tables have grown, which the ads alone do not tell:
        # for a later snapshot of this collector made with condor_status (docs/snapshots.md)
        sizes = table_sizes(slots, optional["submitters"])
        if sizes:
            meta["collector_table_sizes"] = sizes
        if startd_ads != len(slots):
            meta["skipped_startd_ads"] = startd_ads - len(slots)
        if slot_cache is not None:
            # a shadow loop's pass: how many slot ads it fetched whole, how many it kept
            meta["slots_fetched"] = {"whole_query": refreshed.whole,
                                     "fetched": refreshed.fetched, "kept": refreshed.kept}
        if kept_reads is not None and kept_reads.last:
            # a loop's pass: each daemon's configuration read now, or kept from the
            # read of an earlier pass (KeptReads)
            meta["daemon_configs"] = dict(sorted(kept_reads.last.items()))
        return meta

    def unwritable(path: Path, ads) -> str | None:
        """None once `ads` are written to `path`; else why not, when a value cannot be
        written (write_ads: the failure of the daemon that sent it, the partial file
        removed). A file-system error is the snapshot's own: raised (OSError)."""
        try:
            write_ads(path, ads)
        except OSError:
            raise
        except Exception as exc:
            _remove_written(path)
            return _unwritable_ad(ads, exc)
        return None

    known_jobs = known_lines.jobs if known_lines is not None else None

    def write(tmp: Path) -> None:
        if slot_cache is None or not slot_cache.write(tmp / "slots.ads"):
            write_lines(tmp / "slots.ads", slot_lines)
        for name, lines in schedd_jobs:
            # a schedd whose jobs are the last pass's: its jobs file linked
            if known_jobs is None or not known_jobs.link_file(name, tmp / files[name]):
                write_lines(tmp / files[name], lines)
        for stem, ads in list(optional.items()):
            why = unwritable(tmp / f"{stem}.ads", ads) if ads is not None else None
            if why:
                errors[f"collector:{stem}"] = f"cannot write its ads: {why}"
                if stem != "negotiator":    # its ads also gave the version: keep them
                    optional[stem] = None
        if config_text is not None:
            (tmp / "config").write_text(config_text)
        if others:
            (tmp / NEGOTIATORS_DIR).mkdir()
            for name, (location, other) in others.items():
                text = (config_text if location is None else None if other is None
                        else format_config(other, negotiator=location, pool=pool,
                                           captured_at=captured_at))
                if text is not None:
                    (tmp / NEGOTIATORS_DIR / negotiator_config_name(name)).write_text(text)
        if schedd_knobs:
            (tmp / SCHEDD_KNOBS_FILE).write_text(json.dumps(schedd_knobs, indent=2,
                                                            sort_keys=True) + "\n")
        (tmp / "meta.json").write_text(json.dumps(make_meta(), indent=2) + "\n")

    try:
        _write_atomically(out, write)
    except OSError as exc:
        raise InputError(str(out), f"cannot write the snapshot: {exc.strerror or _one_line(exc)}") from None
    if slot_cache is not None:
        slot_cache.written(out / "slots.ads")
    if known_jobs is not None:
        for name, _ in schedd_jobs:
            known_jobs.written(name, out / files[name])
    lap("write")
    return CaptureReport(
        directory=out,
        slots=len(slots),
        jobs=sum(len(lines) for _, lines in schedd_jobs),
        schedds=tuple(answered),
        missing_schedds=tuple(missing),
        errors=MappingProxyType(dict(errors)),
        partial=bool(errors) or bool(missing),
        ads=CapturedAds(slots=tuple(slots), slot_lines=slot_lines,
                        jobs={files[name]: lines for name, lines in schedd_jobs},
                        slot_texts=slot_texts, shared=slot_cache is not None,
                        slot_memos=slot_memos, known_lines=known_lines,
                        job_schedds={files[name]: name for name, _ in schedd_jobs}),
        timings={k: round(v, 3) for k, v in timings.items()},
    )


class _SchedsBeside:
    """The schedds queried by another process with an earlier capture's job projection
    (and, capturing by requests, its kept attributes), while this process fetches the
    slot ads and turns them into lines: a loop's `worker` (adapters/worker.py), else a
    child forked now (adapters/beside.py). `result(projection, kept)`: the other
    process's (jobs, answered, missing, errors, timings, by_request) when it queried the
    same, else None (it is stopped; `query` asks again with the capture's own). Only
    with the real bindings: a fake's calls would be made in a process the test cannot
    see (the caller queries the schedds itself).

    Each schedd's whole answer, its security handshake included, is bounded by
    `timeout` (the bindings hold the interpreter while they wait on a schedd, for 20 s
    per attempt whatever the config says, so no thread of this process could stop
    them): the other process notes which schedd it is asking and since when (a
    progress file); one that takes longer is ended, and a new one asks the schedds
    again without it, which is reported as not having answered. `stop()` true ends the
    wait at once: InputError."""

    def __init__(self, htcondor, pool, projection, kept=None, worker=None, timeout=0,
                 known_jobs=None, stop: Callable[[], bool] | None = None,
                 collector_timeout=None):
        self._child = None
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
                                       self._progress, skip, self._collector_timeout)
        child = Beside(_query_schedds_alone, self._htcondor, self._pool, self._projection,
                       self._kept, self._progress, skip)
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
        if list(projection) != self._projection or (
                list(kept) if kept is not None else None) != self._kept:
            child.cancel()
            return None
        return self._answer(child)

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
        except Exception:               # noqa: BLE001 - queried again here
            return None
        if self._known is None:
            return got
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
    """The other process's progress: (since when, which schedd) it is asking now, or
    None (between schedds, or nothing noted yet)."""
    if path is None:
        return None
    try:
        with open(path, encoding="utf-8") as f:
            last = f.read().splitlines()[-1:]
        at, name, done = json.loads(last[0]) if last else (0, "", True)
    except (OSError, ValueError, TypeError):
        return None
    return None if done else (float(at), str(name))


class _Progress:
    """What the process asking the schedds notes for its parent (`_asking`): one line per
    step, [when, schedd, done]."""

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
                            skip: dict | None = None, query_timeout: int | None = None):
    """`_query_schedds_alone` in a loop's worker process (adapters/worker.py), with the
    capture's client timeouts; the jobs as a job_delta.Delta against the answer `have`
    the loop holds, whose digests it sends back (`held`)."""
    import htcondor2
    with _client_timeouts(htcondor2, timeout, query_timeout):
        jobs, *rest = _query_schedds_alone(htcondor2, pool, projection, kept, progress, skip)
    return (jobs_delta(jobs, have, held), *rest)


def _query_schedds_alone(htcondor, pool, projection: list[str], kept: list[str] | None,
                         progress: str | None = None, skip: dict | None = None):
    """`_query_schedds` in a process of its own: (jobs, answered, missing, errors,
    timings, by_request). `progress`: the file its parent watches (`_asking`); `skip`:
    schedd name -> why it is not asked."""
    errors: dict[str, str] = {}
    timings = {"schedd_query": 0.0, "job_lines": 0.0}
    by_request: dict[str, dict] = {}
    collector = htcondor.Collector(pool)
    jobs, answered, missing = _query_schedds(htcondor, collector, projection, errors, {},
                                             _Lap(timings), kept, by_request,
                                             where=pool or "<local pool>",
                                             progress=_Progress(progress), skip=skip)
    return jobs, answered, missing, errors, timings, by_request


_ATTR_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _valid_projection(projection) -> list[str] | None:
    """An earlier snapshot's job projection, if it is a list of attribute names."""
    if (isinstance(projection, list) and projection
            and all(isinstance(n, str) and _ATTR_NAME.fullmatch(n) for n in projection)):
        return list(projection)
    return None


def _real_bindings(htcondor) -> bool:
    schedd = getattr(htcondor, "Schedd", None)
    return isinstance(schedd, type) and str(getattr(schedd, "__module__", "")).startswith(
        "htcondor2.")


class _Lap:
    """Adds the time since the last call to a step's total."""

    def __init__(self, timings: dict):
        self.timings = timings
        self.t = time.perf_counter()

    def __call__(self, step: str) -> None:
        t = time.perf_counter()
        self.timings[step] += t - self.t
        self.t = t


def _remove_written(path: Path) -> None:
    for p in (path, path.with_name(path.name + ".tmp")):
        with contextlib.suppress(OSError):
            p.unlink()


# ---------------------------------------------------------------- destination directory

def _is_snapshot_dir(p: Path) -> bool:
    return (p / "meta.json").is_file()


def _check_destination(out: Path) -> None:
    if out.exists() or out.is_symlink():
        if not out.is_dir():
            raise InputError(str(out), "exists and is not a directory")
        if any(out.iterdir()) and not _is_snapshot_dir(out):
            raise InputError(str(out), "directory is not empty and is not a snapshot "
                             "(no meta.json): refusing to overwrite it")
    parent = out.parent
    if not parent.is_dir():
        raise InputError(str(out), f"parent directory {str(parent)!r} does not exist")


def _write_atomically(out: Path, write) -> None:
    """Write into a temporary sibling directory, then rename it to `out`.

    An earlier snapshot at `out` is moved aside, the new one renamed in, then the old one
    deleted; `out` never holds a half-written snapshot. If anything fails the temporary
    directory is removed (and the earlier snapshot put back).
    """
    parent = out.parent
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.capture-", dir=parent))
    old: Path | None = None
    try:
        write(tmp)
        _check_destination(out)  # it may have changed while the pool was being read
        if out.exists() and any(out.iterdir()):
            old = Path(tempfile.mkdtemp(prefix=f".{out.name}.old-", dir=parent))
            os.rename(out, old / "snapshot")
        elif out.exists():
            out.rmdir()
        try:
            os.rename(tmp, out)
        except BaseException:
            if old is not None:
                os.rename(old / "snapshot", out)
                shutil.rmtree(old, ignore_errors=True)
                old = None
            raise
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


# ---------------------------------------------------------------- bindings helpers

def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text or type(exc).__name__


@contextlib.contextmanager
def _client_timeouts(htcondor, timeout: int, query_timeout: int | None = None):
    """Best effort: HTCondor's client timeouts come from config (QUERY_TIMEOUT for
    collector queries, `query_timeout` when given, Q_QUERY_TIMEOUT for schedd queries);
    set them for the capture and put the previous values back afterwards."""
    param = getattr(htcondor, "param", None)
    saved: dict[str, Any] = {}
    if param is not None and timeout and timeout > 0:
        for knob in _TIMEOUT_KNOBS:
            value = (query_timeout if knob == "QUERY_TIMEOUT" and query_timeout
                     else timeout)
            try:
                saved[knob] = param.get(knob)
                param[knob] = str(int(value))
            except Exception:
                saved.pop(knob, None)
    try:
        yield
    finally:
        for knob, value in saved.items():
            try:
                if value is None:
                    del param[knob]
                else:
                    param[knob] = str(value)
            except Exception:
                pass


def _optional_query(collector, ad_type, key: str, errors: dict, where: str) -> list | None:
    """The collector's ads of `ad_type`, or None with `errors[key]` saying why not (the
    query failed, or its answer is not a list of ClassAds: naming the collector
    `where` and the first item that is not an ad)."""
    try:
        answer = collector.query(ad_type)
    except Exception as exc:
        errors[key] = _one_line(exc)
        return None
    try:
        return checked_ads(answer)
    except BadAnswer as exc:
        errors[key] = f"the collector {_comment_text(where)} {exc}"
        return None


def _unwritable_ad(ads, exc: Exception) -> str:
    """Why `ads` cannot be written (`exc`, raised writing them), naming the first ad
    that cannot be (its place and Name) when there is one."""
    why = _one_line(exc)
    if not ads:
        return why
    for i, ad in enumerate(ads, start=1):
        try:
            ad_lines([ad])
        except Exception as one:            # noqa: BLE001 - this is the ad
            name = _ad_string(ad, "Name")
            label = f"ad {i} of {len(ads)}" + (f" ({_comment_text(name)[:60]})" if name else "")
            return f"{label}: {_one_line(one)}"
    return why


def _start_reads(htcondor, collector, timeout, kept=None, daemon_ads=(None, None),
                 where: str = "<local pool>"):
    """The reads that run beside the slot steps: the negotiator's config (a child), the
    other negotiators' and the schedds' knobs. `kept` (KeptReads): reads kept from a
    loop's earlier passes, under the stamps of `daemon_ads` (the collector's negotiator
    ads and schedd ads); `where`: the collector, for messages."""
    neg_ads, schedd_ads = daemon_ads
    config_read = _ConfigRead(htcondor, collector, timeout, kept, neg_ads, where)
    others_read = _OtherNegotiatorsRead(htcondor, collector, timeout, config_read.location,
                                        kept, neg_ads, where)
    return config_read, others_read, _ScheddKnobsRead(htcondor, collector, timeout, kept,
                                                      schedd_ads, where)


def _through(kept, kind: str, location, ads, read: Callable[[], dict]) -> Callable[[], dict]:
    """`read` (a daemon's knobs) through a loop's kept reads, when there are: the stamp
    is that of the daemon's ad among `ads` with the location's Name and MyAddress."""
    if kept is None:
        return read
    name = _ad_string(location, "Name")
    stamp = KeptReads.stamp(ads, name)
    if stamp is not None and stamp[0] != _ad_string(location, "MyAddress"):
        stamp = None
    return lambda: kept.read(kind, name, stamp, read)


class _QueryFailed(Exception):
    """The collector's slot query failed (its exception is the cause)."""


def _startd_query(htcondor, collector, timings: dict):
    """The collector's Startd query as `query(constraint, projection)` (what
    slot_cache.SlotCache.refresh calls): its failure raised as _QueryFailed, its time
    counted as the "slot_query" step and taken off "slot_lines", the lap that follows
    (which counts the whole of the slot steps)."""
    def query(constraint, projection):
        t = time.perf_counter()
        kw = {}
        if constraint is not None:
            kw["constraint"] = constraint
        if projection is not None:
            # the names as one, which the bindings join them into anyway (" "): they
            # keep a copy of each name for good, one copy a pass rather than six
            kw["projection"] = [" ".join(projection)] if projection else []
        try:
            answer = collector.query(htcondor.AdTypes.Startd, **kw)
        except Exception as exc:
            raise _QueryFailed() from exc
        finally:
            spent = time.perf_counter() - t
            timings["slot_query"] += spent
            timings["slot_lines"] -= spent
        return checked_ads(answer)          # BadAnswer when it is not ClassAds
    return query


def _condor_version(htcondor, collector, negotiator_ads, neg_location) -> str | None:
    for ad in list(negotiator_ads or ()) + ([neg_location] if neg_location is not None else []):
        v = ad.get("CondorVersion")
        if isinstance(v, str):
            return v
    try:
        for ad in collector.query(htcondor.AdTypes.Collector, projection=["Name", "CondorVersion"]):
            v = ad.get("CondorVersion")
            if isinstance(v, str):
                return v
    except Exception:
        pass
    return None


# ---------------------------------------------------------------- negotiator config

def _earlier_config(path: Path) -> tuple[str | None, dict[str, str] | None]:
    """The text of an earlier snapshot's config and its knobs as HTCondor reads them (the
    job projection needs the policy expressions), or (None, None) when it cannot be read."""
    from .condor_config import read_params
    try:
        text = Path(path).read_text(encoding="utf-8")
        params, _ = read_params(path)
    except (OSError, UnicodeDecodeError, InputError):
        return None, None
    return text, {k: str(v) for k, v in params.items() if v is not None}


class _ConfigRead:
    """The negotiator's location and policy knobs, read beside the capture: the
    negotiator is located here, at once; the bindings' RemoteParam is read by a child
    process (a new interpreter that imports the bindings, about 0.3 s), waited for by a
    thread while this one turns the slot ads into lines. The thread calls no bindings
    (a test's fake RemoteParam is read here, in `result`); its errors are merged by
    `result`, in the order the capture has always given them."""

    def __init__(self, htcondor, collector, timeout: float | None, kept=None, ads=None,
                 where: str = "<local pool>"):
        self._errors: dict[str, str] = {}
        self._got: tuple = (None, None)
        self._thread = None
        location = _locate_negotiator(htcondor, collector, self._errors, where, kept, ads)
        self._location = location
        if location is None:
            return
        if not _bindings_remote_param(htcondor):
            self._later = _through(kept, "negotiator", location, ads,
                                   lambda: select_policy_knobs(htcondor.RemoteParam(location)))
            return
        self._later = None
        limit = float(timeout) if timeout and timeout > 0 else DEFAULT_REMOTE_READ_TIMEOUT
        read = _through(kept, "negotiator", location, ads, lambda: read_remote_policy_knobs(
            location, timeout=limit, daemon=f"the negotiator {_daemon_name(location)}"))
        self._thread = threading.Thread(target=self._read, args=(location, read),
                                        name="negotiator-config", daemon=True)
        self._thread.start()

    @property
    def location(self):
        """The negotiator's location ad (None when it was not located)."""
        return self._location

    def _read(self, location, read) -> None:
        self._got = _remote_knobs(read, location, self._errors)

    def result(self, errors: dict):
        """(negotiator location ad or None, {knob: value} or None); what failed is in
        `errors`."""
        if self._location is not None and self._thread is None:
            self._got = _remote_knobs(self._later, self._location, self._errors)
        elif self._thread is not None:
            self._thread.join()
        errors.update(self._errors)
        return (self._location, None) if self._location is None else self._got


class _OtherNegotiatorsRead:
    """The pool's other negotiators (a pool sharded by NEGOTIATOR_SLOT_CONSTRAINT, each
    with its own accountant): located here, at once; each one's policy knobs read like
    the first one's (a child process each, one after the other, waited for by a thread;
    a test's fake RemoteParam is read in `result`). Nothing when the collector knows one
    negotiator or none."""

    def __init__(self, htcondor, collector, timeout: float | None, first, kept=None,
                 ads=None, where: str = "<local pool>"):
        self._kept, self._ads = kept, ads
        self._named: list = []
        self._got: dict = {}
        self._errors: dict[str, str] = {}
        self.warnings: list[str] = []
        self._thread = None
        self._htcondor = htcondor
        if first is None:
            return
        try:
            locations = checked_ads(located(
                kept, "negotiators", ads,
                lambda: collector.locateAll(htcondor.DaemonTypes.Negotiator)))
        except BadAnswer as exc:
            self.warnings.append(f"cannot list the pool's negotiators (only the first is "
                                 f"captured): the collector {_comment_text(where)} {exc}")
            return
        except Exception as exc:
            self.warnings.append(f"cannot list the pool's negotiators (only the first is "
                                 f"captured): {_one_line(exc)}")
            return
        first_name = _ad_string(first, "Name")
        for loc in locations:
            name = _ad_string(loc, "Name")
            if name is not None and name not in {n for n, _ in self._named}:
                self._named.append((name, None if name == first_name else loc))
        if len(self._named) < 2:
            self._named = []
            return
        if first_name not in {n for n, _ in self._named}:
            self._named.insert(0, (first_name, None))
        if _bindings_remote_param(htcondor):
            limit = float(timeout) if timeout and timeout > 0 else DEFAULT_REMOTE_READ_TIMEOUT
            self._thread = threading.Thread(target=self._read, args=(limit,),
                                            name="negotiators-config", daemon=True)
            self._thread.start()

    def _read(self, limit: float | None) -> None:
        for name, loc in self._named:
            if loc is None:
                continue
            label = f"negotiator {name}"
            if limit is None:
                read = (lambda loc=loc: select_policy_knobs(self._htcondor.RemoteParam(loc)))
            else:
                read = (lambda loc=loc, name=name: read_remote_policy_knobs(
                    loc, timeout=limit, daemon=f"the negotiator {_comment_text(name)}"))
            read = _through(self._kept, "negotiator", loc, self._ads, read)
            errors: dict[str, str] = {}
            _, knobs = _remote_knobs(read, loc, errors)
            if knobs is None:
                self._errors[label] = errors.get("negotiator", "not read")
            self._got[name] = knobs

    def result(self, errors: dict) -> tuple[dict, list[str]]:
        """({negotiator name: (its location ad, or None for the first one; its knobs or
        None when not read)}, warnings); {} for a pool of one negotiator. What failed is
        in `errors`, as "negotiator <Name>"."""
        if not self._named:
            return {}, self.warnings
        if self._thread is None:
            self._read(None)
        else:
            self._thread.join()
        errors.update(self._errors)
        return ({name: (loc, self._got.get(name)) for name, loc in self._named},
                self.warnings)


def _ad_string(ad, attr: str) -> str | None:
    try:
        v = ad.get(attr)
    except Exception:
        return None
    return v if isinstance(v, str) and v else None


def _locate_negotiator(htcondor, collector, errors: dict, where: str = "<local pool>",
                       kept=None, ads=None):
    """The negotiator's location ad, or None with errors["negotiator"] saying why (the
    collector `where` does not know one, or answered with something that is not a
    ClassAd; a location ad RemoteParam cannot use, without a MyAddress, fails there).
    `kept`, `ads`: a loop's kept reads and this pass's negotiator ads
    (`locations.located`)."""
    try:
        location = located(kept, "negotiator", ads,
                           lambda: collector.locate(htcondor.DaemonTypes.Negotiator))
    except Exception as exc:
        errors["negotiator"] = f"cannot locate the negotiator: {_one_line(exc)}"
        return None
    if location is None:
        errors["negotiator"] = "the collector knows no negotiator"
        return None
    if not isinstance(location, classad2.ClassAd):
        errors["negotiator"] = (f"cannot locate the negotiator: the collector "
                                f"{_comment_text(where)} answered with {_kind(location)} "
                                "instead of its location ad")
        return None
    return location


def _no_address(location) -> str | None:
    """None when the location ad has a MyAddress string; else what it has instead, for
    a message ("missing", or the value)."""
    try:
        v = location.get("MyAddress")
    except Exception:                       # noqa: BLE001 - a value classad2 cannot give
        return "not readable"
    if isinstance(v, str) and v:
        return None
    return "missing" if v is None else f"not an address: {_comment_text(str(v))[:40]}"


def _remote_knobs(read, location, errors: dict):
    try:
        knobs = read()
    except RemoteReadError as exc:
        errors["negotiator"] = str(exc)
        return location, None
    except Exception as exc:
        errors["negotiator"] = f"cannot read the negotiator's configuration: {_one_line(exc)}"
        return location, None
    return location, knobs


def _bindings_remote_param(htcondor) -> bool:
    """Whether `htcondor.RemoteParam` is the bindings' own class (not a test's fake)."""
    rp = getattr(htcondor, "RemoteParam", None)
    return isinstance(rp, type) and str(getattr(rp, "__module__", "")).startswith("htcondor2.")


def _daemon_name(location) -> str:
    """A daemon's name for a message: its Name (else its address), every control, line
    separator or format character escaped."""
    for attr in ("Name", "MyAddress"):
        try:
            v = location.get(attr)
        except Exception:
            v = None
        if isinstance(v, str) and v:
            return _comment_text(v)
    return "(unnamed)"


class RemoteReadError(Exception):
    """A daemon's configuration could not be read through RemoteParam: one line, naming
    the daemon and, where it is known, the knob."""


# a kept configuration read is taken again after this many seconds whatever its
# daemon's ad says (an ad update lost, two reconfigs within one second)
REREAD_AFTER = 900.0
# a read begun sooner than this after its daemon's last reconfig is not kept
RECONFIG_SETTLE = 2.0


class KeptReads:
    """A loop's reads of its daemons' configurations (RemoteParam), kept from pass to
    pass. A daemon's configuration changes only when it reads its files again: at a
    restart or a reconfig (condor_reconfig; a value set with condor_config_val -set or
    -rset too takes effect then), and each ad a daemon sends says when that was:
    DaemonCore puts DaemonStartTime and DaemonLastReconfigTime into every ad, and the
    negotiator and the schedd send theirs again on reconfig. So a capture reads a
    daemon's configuration again only when its ad in the collector has another
    (MyAddress, DaemonStartTime, DaemonLastReconfigTime) than at the kept read, when
    the ad has none of them whole, or when the kept read is REREAD_AFTER seconds old;
    otherwise it takes the kept knobs (a new interpreter per read, and the daemon's
    answers, are a tenth of a pass at 11,000 slots). A read is kept only when it began
    RECONFIG_SETTLE seconds after the reconfig its stamp names, by this host's clock
    (a second reconfig within the same second would not change the stamp). A read
    that fails is not kept, and drops what was kept of that daemon. `clock`: seconds,
    monotonic; `wall`: the time of day, as DaemonLastReconfigTime counts it."""

    def __init__(self, clock: Callable[[], float] = time.monotonic,
                 wall: Callable[[], float] = time.time):
        self._kept: dict[tuple, tuple] = {}     # (kind, Name) -> (stamp, knobs, when)
        self.clock, self.wall = clock, wall
        # the daemons' location ads (locations.py), asked again when their ads change
        self.locations = KeptLocations()
        self.last: dict[str, str] = {}          # this capture: "kind Name" -> "kept"/"read"

    @staticmethod
    def stamp(ads, name: str | None) -> tuple | None:
        """The stamp of the daemon named `name` among its collector `ads` (one ad of
        that Name, with a MyAddress and both times whole), else None."""
        if name is None:
            return None
        found = [ad for ad in ads or () if _ad_string(ad, "Name") == name]
        if len(found) != 1:
            return None
        ad = found[0]
        try:
            got = (ad.get("MyAddress"), ad.get("DaemonStartTime"),
                   ad.get("DaemonLastReconfigTime"))
        except Exception:
            return None
        address, started, reconfigured = got
        if not (isinstance(address, str) and address and _whole(started)
                and _whole(reconfigured)):
            return None
        return got

    def read(self, kind: str, name: str | None, stamp: tuple | None,
             reader: Callable[[], dict]) -> dict[str, str]:
        """The knobs of the daemon `name` of `kind` ("negotiator", "schedd"): the kept
        ones when its stamp is the kept read's and that read is recent, else
        `reader()`'s (kept under `stamp`; what it raises goes on, nothing kept)."""
        key = (kind, name)
        got = self._kept.get(key) if name is not None else None
        now = self.clock()
        label = f"{kind} {name}"
        if (got is not None and stamp is not None and got[0] == stamp
                and 0 <= now - got[2] < REREAD_AFTER):
            self.last[label] = "kept"
            return dict(got[1])
        self._kept.pop(key, None)
        settled = stamp is not None and self.wall() - stamp[2] >= RECONFIG_SETTLE
        knobs = reader()
        if settled and name is not None:
            self._kept[key] = (stamp, dict(knobs), now)
        self.last[label] = "read"
        return knobs


def _whole(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


# The children of reads in flight, and whether this process is stopping (see
# abort_remote_reads): a shadow daemon's main thread kills them while its worker waits.
_READS_LOCK = threading.Lock()
_READS_IN_FLIGHT: set = set()
_STOPPING = threading.Event()
_ABANDON = [False]          # abandon_remote_reads: a plain flag, set by a signal handler


def _stopping() -> bool:
    return _ABANDON[0] or _STOPPING.is_set()


def abort_remote_reads() -> int:
    """This process is stopping: kill every child reading a daemon's configuration now
    (its read fails as abandoned), and abandon any read started from now on, until
    `allow_remote_reads()`. Returns how many were killed. Safe from any thread (not from
    inside a signal handler)."""
    _STOPPING.set()
    with _READS_LOCK:
        procs = list(_READS_IN_FLIGHT)
    killed = 0
    for proc in procs:
        with contextlib.suppress(OSError):
            if proc.poll() is None:
                proc.kill()
                killed += 1
    return killed


def abandon_remote_reads() -> None:
    """`abort_remote_reads()` from a signal handler (a `shadow --interval` loop's
    SIGTERM): only a flag is set, no lock taken; each read in flight sees it within
    _REMOTE_POLL seconds and kills its child itself."""
    _ABANDON[0] = True


def allow_remote_reads() -> None:
    """Undo `abort_remote_reads()` and `abandon_remote_reads()` (a new run of the daemon
    in the same process)."""
    _STOPPING.clear()
    _ABANDON[0] = False


def _remote_reader_argv(alarm: int, schedd: bool = False) -> list[str]:
    return [sys.executable, "-m", "negotiator_ext.adapters._param_dump", "--remote",
            str(alarm)] + (["--schedd"] if schedd else [])


def read_remote_policy_knobs(location, *, timeout: float, daemon: str = "the daemon",
                             argv: list[str] | None = None, schedd: bool = False
                             ) -> dict[str, str]:
    """The policy knobs (`select_policy_knobs`; with `schedd`, a schedd's limits,
    `select_schedd_knobs`) of the daemon at `location`, read through
    htcondor2.RemoteParam by a child process (`_param_dump --remote`) that is killed
    after `timeout` seconds. RemoteReadError, naming `daemon` and the knob the read hung
    on, when it does not end in time, is abandoned (`abort_remote_reads`) or fails.
    `argv`: the child's command (tests)."""
    alarm = int(math.ceil(timeout)) + _REMOTE_ALARM_EXTRA
    cmd = list(argv) if argv is not None else _remote_reader_argv(alarm, schedd)
    with tempfile.TemporaryDirectory(prefix="negotiator-ext-remote-param-") as tmp:
        ad_file, out_file, err_file = (Path(tmp) / n for n in ("location", "out", "err"))
        ad_file.write_text(str(location), encoding="utf-8")
        how = _run_bounded(cmd, ad_file, out_file, err_file, timeout)
        records = _json_lines(out_file)
        err_text = _text(err_file)
    ended_at = time.time()
    listed = any("listed" in r for r in records)
    reading = [r for r in records if isinstance(r.get("reading"), str)]
    knob = _comment_text(reading[-1]["reading"]) if reading else None
    at = reading[-1].get("at") if reading else None
    # the knob in flight for at least half the time: that one hung (else the daemon is
    # merely slow, and the knob is only where the read was)
    stuck = (isinstance(at, (int, float)) and not isinstance(at, bool)
             and ended_at - at >= timeout / 2)
    for r in records:
        if isinstance(r.get("knobs"), dict) and how == "ended":
            return {str(k): str(v) for k, v in r["knobs"].items()}
    if how == "abandoned":
        raise RemoteReadError(f"reading the configuration of {daemon} was abandoned: "
                              "negotiator-ext is stopping")
    if how == "timeout":
        if knob is not None and stuck:
            raise RemoteReadError(
                f"reading {knob} from {daemon} did not end within {timeout:g} s: its value "
                "never ends expanding (a circular macro such as A = $(B), B = $(A)?); fix "
                "it, then restart the daemon, which may stay stuck expanding it")
        if listed:
            raise RemoteReadError(f"reading the configuration of {daemon} did not end "
                                  f"within {timeout:g} s" + (f" (it was at {knob})"
                                                             if knob is not None else ""))
        raise RemoteReadError(f"{daemon} did not answer a configuration query within "
                              f"{timeout:g} s (stuck, or busy in a long negotiation cycle?)")
    errs = [r["error"] for r in records if isinstance(r.get("error"), str)]
    why = errs[-1] if errs else (" ".join(err_text.split()[-40:]) or "the reader ended "
                                 "without an answer")
    where = f" ({knob})" if knob is not None and errs and listed else ""
    raise RemoteReadError(f"cannot read the configuration of {daemon}{where}: "
                          f"{_comment_text(why)[:300]}")


def _run_bounded(cmd: list[str], stdin: Path, stdout: Path, stderr: Path,
                 timeout: float) -> str:
    """Run `cmd` with its output in files; "ended", "timeout" (killed after `timeout`
    seconds) or "abandoned" (killed by abort_remote_reads)."""
    if _stopping():
        return "abandoned"
    with open(stdin, "rb") as fin, open(stdout, "wb") as fout, open(stderr, "wb") as ferr:
        proc = subprocess.Popen(cmd, stdin=fin, stdout=fout, stderr=ferr)
    with _READS_LOCK:
        _READS_IN_FLIGHT.add(proc)
    how = "ended"
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                proc.wait(timeout=_REMOTE_POLL)
            except subprocess.TimeoutExpired:
                pass
            else:
                break
            if _stopping():
                how = "abandoned"
                break
            if time.monotonic() >= deadline:
                how = "timeout"
                break
        if how == "ended" and _stopping() and proc.returncode is not None \
                and proc.returncode < 0:
            how = "abandoned"      # killed by abort_remote_reads between two polls
    finally:
        with _READS_LOCK:
            _READS_IN_FLIGHT.discard(proc)
        if proc.poll() is None:
            with contextlib.suppress(OSError):
                proc.kill()
        proc.wait()
    return how


def _text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:       # the child never started
        return ""


def _json_lines(path: Path) -> list[dict]:
    out = []
    for line in _text(path).splitlines():
        try:
            r = json.loads(line)
        except ValueError:
            continue
        if isinstance(r, dict):
            out.append(r)
    return out


class _ScheddKnobsRead:
    """Each schedd's own limits, read beside the capture through RemoteParam: the
    schedds are located here, at once; with the real bindings each is read by a child
    process (`read_remote_policy_knobs(schedd=True)`, killed after the timeout), all of
    them waited for by one thread; a test's fake RemoteParam is read in `result`. A
    schedd that cannot be read is a warning, not an error: the snapshot's config (else
    HTCondor's defaults) stands in for it."""

    def __init__(self, htcondor, collector, timeout: float | None, kept=None, ads=None,
                 where: str = "<local pool>"):
        self.knobs: dict[str, dict[str, str]] = {}
        self.warnings: list[str] = []
        self._thread = None
        self._later: list = []
        try:
            locations = checked_ads(located(
                kept, "schedds", ads,
                lambda: collector.locateAll(htcondor.DaemonTypes.Schedd)))
        except BadAnswer as exc:
            self.warnings.append(f"cannot locate the schedds to read their limits: the "
                                 f"collector {_comment_text(where)} {exc}")
            return
        except Exception as exc:
            self.warnings.append(f"cannot locate the schedds to read their limits: "
                                 f"{_one_line(exc)}")
            return
        named = []
        for loc in locations:
            name = _ad_string(loc, "Name")
            if name is not None and _no_address(loc) is None and name not in {
                    n for n, _ in named}:
                named.append((name, loc))
        if not _bindings_remote_param(htcondor):
            self._later = [(name, _through(kept, "schedd", loc, ads, lambda loc=loc:
                                           select_schedd_knobs(htcondor.RemoteParam(loc))))
                           for name, loc in named]
            return
        limit = float(timeout) if timeout and timeout > 0 else DEFAULT_REMOTE_READ_TIMEOUT
        reads = [(name, _through(kept, "schedd", loc, ads, lambda loc=loc, name=name:
                                 read_remote_policy_knobs(
                                     loc, timeout=limit,
                                     daemon=f"the schedd {_comment_text(name)}",
                                     schedd=True)))
                 for name, loc in named]
        self._thread = threading.Thread(target=self._read, args=(reads,),
                                        name="schedd-config", daemon=True)
        self._thread.start()

    def _read(self, reads) -> None:
        for name, read in reads:
            try:
                knobs = read()
            except Exception as exc:
                self.warnings.append(f"the schedd {_comment_text(name)}'s limits were not "
                                     f"read ({_one_line(exc)}): the config's apply")
                continue
            if knobs:
                self.knobs[name] = knobs

    def result(self) -> tuple[dict[str, dict[str, str]], list[str]]:
        """({schedd name: {knob: value}}, warnings)."""
        if self._later:
            self._read(self._later)
            self._later = []
        elif self._thread is not None:
            self._thread.join()
        return self.knobs, self.warnings


def format_config(knobs: Mapping[str, str], *, negotiator=None, pool: str | None = None,
                  captured_at: int | None = None) -> str:
    """HTCondor config syntax: a header comment, then `NAME = value` lines, sorted.

    Every line is one statement of HTCondor's config: the names and the pool written
    into the comment have each control, line-separator or format character and each
    backslash as its `\\xNN` (`\\uNNNN`) escape; a knob's value has its lines joined with
    spaces, its other control characters (but tabs) escaped the same way, and a trailing
    backslash (which would continue the line onto the next knob) escaped. A knob name
    HTCondor's config would not read as one (see KNOB_NAME) is a ValueError.
    """
    who = "the negotiator"
    if negotiator is not None:
        name, addr = negotiator.get("Name"), negotiator.get("MyAddress")
        if isinstance(name, str):
            who += f" {_comment_text(name)}"
        if isinstance(addr, str):
            who += f" ({_comment_text(addr)})"
    when = (time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(captured_at))
            if captured_at is not None else "unknown time")
    lines = [
        f"# Policy knobs of {who}",
        f"# in pool {_comment_text(pool or '<local>')}, read with htcondor2.RemoteParam (what",
        f"# `condor_config_val -name <negotiator>` shows) by {TOOL} at {when}.",
        "# Only the knobs the negotiator's policy uses are listed; every other knob",
        "# takes the HTCondor default when this file is loaded.",
        "",
    ]
    for name in sorted(knobs, key=str.upper):
        if not KNOB_NAME.fullmatch(name) or name.lower() in _CONFIG_KEYWORDS:
            raise ValueError(f"not a knob name HTCondor's config can hold: {name!r}")
        v = _config_value(knobs[name])
        lines.append(f"{name} = {v}" if v else f"{name} =")
    return "\n".join(lines) + "\n"


def _escape(c: str) -> str:
    o = ord(c)
    return f"\\x{o:02x}" if o <= 0xFF else f"\\u{o:04x}" if o <= 0xFFFF else f"\\U{o:08x}"


# Control characters, surrogates, and (in comments) line separators and invisible format
# characters (bidi overrides and the like).
_VALUE_ESCAPED = frozenset({"Cc", "Cs"})
_COMMENT_ESCAPED = frozenset({"Cc", "Cs", "Cf", "Zl", "Zp"})


def _comment_text(text: str) -> str:
    """`text` for a comment line: one line of visible characters; each control, line
    separator or format character and each backslash (so that the line cannot end in
    one) as its escape."""
    return "".join(_escape(c) if c == "\\" or unicodedata.category(c) in _COMMENT_ESCAPED
                   else c for c in text)


def _config_value(value) -> str:
    """A knob's value as one line of HTCondor config: line breaks joined with spaces,
    other control characters but tabs escaped, no trailing backslash."""
    v = " ".join(str(value).splitlines()).strip()
    v = "".join(_escape(c) if c != "\t" and unicodedata.category(c) in _VALUE_ESCAPED
                else c for c in v).strip()
    if v.endswith("\\"):
        v = v[:-1] + _escape("\\")
    return v


# ---------------------------------------------------------------- job projection

def _ci_add(target: dict[str, str], names: Iterable[str]) -> None:
    """Add names (case-insensitively) to an ordered {lower: name} dict."""
    for n in names:
        if n and n.lower() not in target:
            target[n.lower()] = n


def _split_ref(ref: str) -> tuple[str, str]:
    """("target", attr) for TARGET.attr[.x...]; ("", attr) for MY.attr and unscoped refs
    (classad2's externalRefs already drops a MY. prefix)."""
    parts = ref.split(".")
    if len(parts) > 1 and parts[0].lower() in ("target", "my"):
        return ("target" if parts[0].lower() == "target" else ""), parts[1]
    return "", parts[0]


_EMPTY = classad2.ClassAd()


def slot_job_refs(slot) -> set[str]:
    """Job attributes that a slot's Requirements/Start/Rank/Consumption* reference."""
    out: set[str] = set()
    roots = [k for k in slot.keys() if k.lower() in _SLOT_EXPR_LOWER
             or k.lower().startswith(_SLOT_EXPR_PREFIXES_LOWER)]
    for k in roots:
        expr = slot.lookup(k)
        for ref in slot.externalRefs(expr):
            _, attr = _split_ref(ref)
            # TARGET.x is the job's; an unscoped name the slot does not define is looked
            # up in the job (a MY.x the slot lacks is undefined: harmless to project).
            out.add(attr)
    return out


def _knob_job_refs(knobs: Mapping[str, str] | None, slot_attrs: set[str]) -> set[str]:
    out: set[str] = set()
    if not knobs:
        return out
    up = {k.upper(): v for k, v in knobs.items()}
    for knob, job_scope in [(k, False) for k in _SLOT_SCOPE_KNOBS] + [(k, True) for k in _JOB_SCOPE_KNOBS]:
        text = (up.get(knob) or "").strip()
        if not text:
            continue
        try:
            expr = classad2.ExprTree(text)
            refs = _EMPTY.externalRefs(expr)
        except Exception:
            continue
        for ref in refs:
            scope, attr = _split_ref(ref)
            if job_scope or scope == "target" or attr.lower() not in slot_attrs:
                out.add(attr)
    return out


def job_projection(slots: Iterable, knobs: Mapping[str, str] | None = None,
                   lines: list[list[str]] | None = None) -> list[str]:
    """The first Schedd.query projection: BASE_JOB_ATTRS, then the referenced job
    attributes (sorted case-insensitively). `lines`: the slots' `adfiles.ad_lines`; with
    them, slots whose expressions and attribute names are the same (most of a pool's)
    are walked once."""
    return projection_of(referenced_job_attrs(slots, knobs, lines))


def projection_of(refs: Iterable[str]) -> list[str]:
    """BASE_JOB_ATTRS, then `refs` (sorted case-insensitively), each name once."""
    proj: dict[str, str] = {}
    _ci_add(proj, BASE_JOB_ATTRS)
    _ci_add(proj, sorted(refs, key=lambda s: (s.lower(), s)))
    return list(proj.values())


def referenced_job_attrs(slots: Iterable, knobs: Mapping[str, str] | None = None,
                         lines: list[list[str]] | None = None,
                         memos: list | None = None) -> set[str]:
    """The job attributes the slots' expressions and the negotiator's knobs reference
    (see `job_projection`). `memos`: each slot's memo (a shadow loop's kept slots,
    slot_cache), where its key among alike slots is kept from pass to pass."""
    slots = list(slots)
    refs: set[str] = set()
    slot_attrs: set[str] = set()
    if lines is None:
        for slot in slots:
            refs |= slot_job_refs(slot)
            slot_attrs.update(k.lower() for k in slot.keys())
    else:
        # each distinct key once, and one object of it for the alike slots' memos (at
        # 100,000 slots, a key each is 130 MB kept between passes)
        walked: dict[tuple, tuple] = {}
        line_keys: dict[str, str] = {}
        for slot, ad, memo in zip(slots, lines, memos if memos is not None else repeat(None)):
            key = memo.get(_SLOT_KEY) if memo is not None else None
            if key is None:
                key = _slot_key(ad, line_keys)
            got = walked.get(key)
            if got is None:
                got = walked[key] = key
                refs |= slot_job_refs(slot)
                slot_attrs.update(k.lower() for k in slot.keys())
            if memo is not None:
                memo[_SLOT_KEY] = got
    refs |= _knob_job_refs(knobs, slot_attrs)
    return refs


# a line's value that references nothing: a number, a plain string, a boolean
_LITERAL = re.compile(r'-?\d+(\.\d*)?([eE][-+]?\d+)?|"[^"\\]*"|(?i:true|false|undefined)')


_SLOT_KEY = "job_refs_key"     # a kept slot's memo: its `_slot_key` (of its lines alone)


def _slot_key(lines: list[str], keys: dict[str, str]) -> tuple[str, ...]:
    """What `slot_job_refs` and the slot's attribute names depend on, from its lines:
    each attribute's name, and its whole line unless its value is a literal (a literal
    references nothing; only whether the slot has the attribute matters). `keys`: each
    line's part of the key, so far."""
    out = tuple(map(keys.get, lines))
    if None in out:
        for ln in compress(lines, map(is_, out, repeat(None))):
            name, text = _split_line(ln)
            keys[ln] = name.lower() if _LITERAL.fullmatch(text) else ln
        out = tuple(map(keys.get, lines))
    return out


def job_refs_missing_in_lines(lines: list[list[str]], projection: Iterable[str]) -> list[str]:
    """Job attributes that the jobs' own expressions reference (MY./unscoped) or that
    their AutoClusterAttrs name, and that `projection` lacks; the jobs are given by their
    lines (`adfiles.ad_lines`), each distinct line looked at once, however many jobs
    share it. An attribute some job has is not
    missing (the schedd sent it); an expression's references are its own, without
    following the job's attributes, whose own lines are looked at in turn."""
    distinct: set[str] = set()
    for ad in lines:
        distinct.update(ad)
    split = [_split_line(ln) for ln in distinct]
    have = {p.lower() for p in projection} | {name.lower() for name, _ in split}
    found: dict[str, str] = {}
    for (name, text), line in zip(split, distinct):
        if name.lower() == "autoclusterattrs":
            acs = _parse_one(line, classad2.ParserType.Old).get(name)
            if isinstance(acs, str):
                _ci_add(found, [a for a in re.split(r"[\s,]+", acs)
                                if a and a.lower() not in have])
            continue
        if _LITERAL.fullmatch(text):
            continue
        expr = classad2.ExprTree(text)
        expr = _unwrapped(expr) or expr
        for ref in _EMPTY.externalRefs(expr):
            scope, attr = _split_ref(ref)
            if scope != "target" and attr.lower() not in have:
                _ci_add(found, [attr])
    return sorted(found.values(), key=lambda s: (s.lower(), s))


# ---------------------------------------------------------------- schedds

def _query_schedds(htcondor, collector, projection: list[str], errors: dict,
                   shared: dict | None = None, lap=None, kept: list[str] | None = None,
                   by_request: dict | None = None, where: str = "<local pool>",
                   progress: Callable[..., None] | None = None, skip: dict | None = None):
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
    -> why it is not asked (it did not answer a process before this one in time)."""
    lap = lap or (lambda step: None)
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
    results: list[tuple[str, list]] = []
    answered: list[str] = []
    missing: list[str] = []
    seen: set[str] = set()
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
        why = _no_address(loc)
        if why is not None:
            errors[name] = (f"cannot be queried: {who} answered with its location ad "
                            f"(item {i} of {len(locations)}) whose MyAddress is {why}")
            missing.append(name)
            continue
        try:
            schedd = htcondor.Schedd(loc)
        except KeyError as exc:             # the bindings read the location ad's attributes
            attr = _comment_text(str(exc.args[0] if exc.args else exc))[:60]
            errors[name] = (f"cannot be queried: {who} answered with its location ad "
                            f"(item {i} of {len(locations)}) without {attr}")
            missing.append(name)
            lap("schedd_query")
            continue
        except Exception as exc:
            errors[name] = _one_line(exc)
            missing.append(name)
            lap("schedd_query")
            continue

        def whole(constraint: str) -> list[list[str]]:
            return _whole_job_lines(schedd, name, constraint, projection, shared, lap,
                                    errors)
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
            else:
                lines = whole(JOB_CONSTRAINT)
        except _Unusable as exc:
            errors[name] = str(exc)
            missing.append(name)
            continue
        except Exception as exc:
            errors[name] = _one_line(exc)
            missing.append(name)
            continue
        finally:
            if progress is not None:
                progress(name, True)
        results.append((name, lines))
        answered.append(name)
    return results, answered, missing


def _checked_or_unusable(answer) -> list:
    """`checked_job_ads`, raising _Unusable (naming the first thing wrong)."""
    try:
        return checked_job_ads(answer)
    except Exception as exc:
        raise _Unusable(_bad_answer(exc)) from None


def _whole_job_lines(schedd, name: str, constraint: str, projection: list[str],
                     shared: dict, lap, errors: dict) -> list[list[str]]:
    """The lines of a schedd's jobs matching `constraint`, queried whole with
    `projection`, and once more with it extended when the jobs' own expressions or
    AutoClusterAttrs name attributes it lacks. Raises _Unusable when the answer is not
    job ads or cannot be written; a failed query raises."""
    try:
        answer = schedd.query(constraint=constraint, projection=list(projection))
    finally:
        lap("schedd_query")
    try:
        lines = _job_lines(answer, shared)
        del answer                          # the ClassAds are freed here
        try:
            extra = job_refs_missing_in_lines(lines, projection)
        except Exception as exc:
            raise _Unusable(_bad_answer(exc)) from None
    finally:
        lap("job_lines")
    if extra:
        why = f"second query (projection extended by {', '.join(extra)})"
        try:
            again = schedd.query(constraint=constraint, projection=list(projection) + extra)
        except Exception as exc:
            errors[name] = f"{why} failed, jobs kept from the first: {_one_line(exc)}"
        else:
            lap("schedd_query")
            try:
                lines = _job_lines(again, shared)
                del again
            except _Unusable as exc:
                errors[name] = f"{why}: jobs kept from the first, {exc}"
        lap("job_lines")
    return lines


class BadAnswer(ValueError):
    """What a schedd answered is not job ads."""


class _Unusable(Exception):
    """A schedd's answer that cannot be used (the message says why)."""


def _job_lines(answer, shared: dict | None) -> list[list[str]]:
    """A schedd's answer, checked to be job ads (`checked_job_ads`), as each job's lines
    (`adfiles.ad_lines`); _Unusable when it is not job ads or cannot be written."""
    jobs = _checked_or_unusable(answer)
    try:
        return ad_lines(jobs, shared)
    except Exception as exc:
        raise _Unusable(f"cannot write its job ads: {_one_line(exc)}") from None


def _bad_answer(exc: Exception) -> str:
    if isinstance(exc, BadAnswer):
        return str(exc)
    return f"its answer could not be read as job ads: {_comment_text(_one_line(exc))[:200]}"


def _a(noun: str) -> str:
    return f"{'an' if noun[:1].lower() in 'aeiou' else 'a'} {noun}"


def _kind(value) -> str:
    if value is None:
        return "None"
    name = type(value).__name__
    return f"{'an' if name[:1].lower() in 'aeiou' else 'a'} {name}"


def checked_ads(answer, what: str = "ad") -> list:
    """A daemon's answer that must be a list of ClassAds (a collector's query or
    locateAll, a schedd's job query), as that list. BadAnswer, naming the first thing
    wrong ("answered with ..."), otherwise; `what`: what each item should be."""
    items = _answer_list(answer, what)
    for i, ad in enumerate(items, start=1):
        if not isinstance(ad, classad2.ClassAd):
            raise BadAnswer(f"answered with something that is not {_a(what)}: item {i} "
                            f"of {len(items)} is {_kind(ad)}")
    return items


def _answer_list(answer, what: str) -> list:
    """A daemon's answer that must be a list (of `what`s), as a list; BadAnswer when it
    is not one (None, a string, a single ad, ...) or cannot be read through."""
    if answer is None or isinstance(answer, (str, bytes, bytearray, dict, classad2.ClassAd)):
        raise BadAnswer(f"answered with {_kind(answer)} instead of a list of {what}s")
    try:
        return list(answer)
    except Exception as exc:
        raise BadAnswer(f"answered with {_kind(answer)} instead of a list of {what}s "
                        f"({_comment_text(_one_line(exc))[:120]})") from None


def checked_job_ads(answer) -> list:
    """A schedd's answer to a job query as a list of job ads: ClassAds, each with
    integer ClusterId >= 0 and ProcId >= 0, no job twice. BadAnswer, naming the first
    thing wrong, otherwise."""
    items = checked_ads(answer, "job ad")
    seen: dict[tuple[int, int], int] = {}
    for i, ad in enumerate(items, start=1):
        ids = []
        for attr in ("ClusterId", "ProcId"):
            v = ad.get(attr)
            number = id_number(v)
            if number is None:
                shown = _comment_text(str(v))[:40] if v is not None else "missing"
                raise BadAnswer(f"answered with an ad that is not a job ad: item {i} of "
                                f"{len(items)} has {attr} {shown}")
            ids.append(number)
        first = seen.setdefault((ids[0], ids[1]), i)
        if first != i:
            raise BadAnswer(f"answered with job {ids[0]}.{ids[1]} twice: items {first} "
                            f"and {i} of {len(items)}")
    return items


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
