"""Capture a pool snapshot from a live pool through htcondor2 (`negotiator-ext snapshot`).

Writes the directory layout `negotiator_ext.adapters.snapshot` reads:

  slots.ads            collector: Startd ads, MyType "Machine" only: whole, or (a shadow pass)
                       the attributes something can read (collector_projection)
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
  collector.query(AdTypes.Startd[, projection])                  1  -- failure: InputError
                                                                   (with a slot projection:
                                                                   more when it is widened,
                                                                   at most 3 times for what
                                                                   the slots and knobs read
                                                                   and 3 for the jobs, the
                                                                   last one whole)
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
  Schedd(location).query(constraint, projection)                 1 or 2 per schedd (a
                                                                   queue of more than
                                                                   JOBS_PER_QUERY jobs:
                                                                   then a SummaryOnly
                                                                   count and a query per
                                                                   piece, schedd_query)
  (by_requests: Schedd.query(opts=QueryOpt.AutoCluster), then    2, 3 or 4 per schedd
   the jobs' own attributes, then those without a known
   autocluster by their ids: adapters/resource_requests.py)

The job projection is `job_projection`'s; the schedds are asked by `schedd_query`, whose
answers are checked by `answers`; the daemons' configuration is read by
`daemon_config`.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Callable, Mapping

from ..errors import InputError
from ..limits import give_back_memory
from ..core.classads import LazyAd
from .adfiles import LinesAdMaker, ad_lines, write_ads, write_lines
from .answers import (BadAnswer, _client_timeouts, _comment_text, _Lap, _one_line,
                      checked_ads)
from . import collector_projection
from .collector_gate import CollectorSilent, GatedCollector
from .collector_order import slot_key, table_sizes
from .daemon_config import (TOOL, _ad_string, _ConfigRead, _earlier_config,
                            _OtherNegotiatorsRead, _ScheddKnobsRead, format_config)
from .job_projection import (DEFAULT_POOL_JOB_REFS, first_guess, projection_of,
                             referenced_job_attrs)
from .resource_requests import kept_attributes
from .schedd_query import SCHEDDS_AT_ONCE, _query_schedds, _schedd_file_names, _SchedsBeside
from .slot_cache import is_slot_ad
from .snapshot import NEGOTIATORS as NEGOTIATORS_DIR, SCHEDD_KNOBS as SCHEDD_KNOBS_FILE
from .snapshot import SNAPSHOT_FORMAT, negotiator_config_name


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
                     heard=None, whole_slots: bool = True,
                     earlier_slot_projection: list[str] | None = None,
                     slot_refs: "collector_projection.Refs | None" = None,
                     schedds_at_once: int = SCHEDDS_AT_ONCE,
                     slot_seed: "tuple[Path, list[str] | None] | None" = None
                     ) -> CaptureReport:
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
    queried again (`_SchedsBeside`). With no earlier projection (a first capture), a
    default pool's is tried the same way (`job_projection.first_guess`), its answer
    taken when it holds every name the slots ask for, and recorded as the projection.

    Without `whole_slots`, the collector is asked for the slot attributes something can
    read (`collector_projection`): starting from `earlier_slot_projection` (an earlier
    snapshot's "slot_projection"; None: a default pool's), widened and asked again when
    the slots, the config or the jobs reference a name it lacks; recorded in meta.json.
    `slot_refs` (collector_projection.Refs, a loop's): the names each text references,
    kept from pass to pass.

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

    `slot_seed` ((slots file, the projection its ads were fetched with), an earlier
    snapshot's): a `slot_cache` that holds nothing yet (a `--once` pass's own, a loop's
    first pass) is first given that file's slots (`SlotCache.seed`), so that only the
    slots the collector heard from since are fetched; the time it takes is the slot
    lines'.

    A loop's `worker` asks `schedds_at_once` schedds at a time, each in a child process
    of its own (`schedd_query._query_schedds`): a loop's pass fetches only the slots
    that changed, and waits for the schedds. A child forked beside the slot steps asks
    them one after another: the pass fetches every slot, which takes as long, and
    children asking at once would only take the cores the slot steps use.

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
    # with no earlier capture's projection, a default pool's is tried beside the slots
    guess = earlier_projection is None
    if guess:
        earlier_projection = first_guess()
        earlier_kept = kept_attributes(earlier_projection, DEFAULT_POOL_JOB_REFS)
    with _client_timeouts(htcondor, timeout, query_timeout), _SchedsBeside(
            htcondor, pool, earlier_projection,
            earlier_kept if by_requests else None, worker, timeout,
            known_lines.jobs if known_lines is not None else None, stop,
            query_timeout, guess=guess,
            at_once=schedds_at_once if worker is not None else 1) as beside:
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
        if slot_cache is not None and slot_cache.projection is not None:
            earlier_slot_projection = slot_cache.projection    # (a loop's last pass's)
        # the last capture had to ask for whole ads (an expression that builds names at
        # run time): so does this one, which still works out what it would ask for
        start_whole = (not whole_slots
                       and earlier_slot_projection == collector_projection.WHOLE)
        slot_proj = None if whole_slots or start_whole else (
            collector_projection.earlier(earlier_slot_projection)
            or collector_projection.first_guess())
        # what the slots, the knobs and the jobs reference (when a projection is kept)
        watch = not whole_slots
        names = slot_refs if slot_refs is not None else collector_projection.Refs()
        names.dynamic = False

        def fetch_slots(projection):
            """The slot ads asked with `projection` (None: whole): (slots, their lines,
            startd ads answered, texts, memos, the cache's answer, the lines fetched)."""
            nonlocal slots, slot_keys
            asked = time.monotonic()
            try:
                if slot_cache is None:
                    raw_slots = query(None, projection)
                    slots = [ad for ad in raw_slots if is_slot_ad(ad)]
                    lines = ad_lines(slots, seen)
                    # each ad kept as its lines, parsed when first read (most never are)
                    slot_keys = list(map(slot_key, slots))
                    make = LinesAdMaker(str(out / "slots.ads"))
                    slots = [LazyAd(make, (one, i)) for i, one in enumerate(lines, start=1)]
                    return slots, lines, len(raw_slots), None, None, None, lines
                if slot_seed is not None and not len(slot_cache) and slot_seed[1] == (
                        None if projection is None else list(projection)):
                    slot_cache.seed(*slot_seed, seen)
                slot_cache.project(projection)
                got = slot_cache.refresh(query, seen, str(out / "slots.ads"))
                slots, slot_keys = got.slots, got.names
                return (got.slots, got.lines, got.answered, got.texts, got.memos, got,
                        got.fresh)
            except _QueryFailed as exc:
                if collector.silent is not None or isinstance(exc.__cause__, CollectorSilent):
                    why = (collector.silent if collector.silent is not None
                           else _one_line(exc.__cause__))
                    raise InputError(source, "cannot query the collector for slot ads: "
                                             f"{why}") from None
                # a refusal for want of READ looks like any failure: ask the collector why
                from .authz import READ, refusal
                why = refusal(htcondor, pool, READ, "the collector",
                              took=time.monotonic() - asked)
                raise InputError(source, "cannot query the collector for slot ads: "
                                         f"{_one_line(exc.__cause__)}"
                                         + (f" ({why})" if why else "")) from None
            except BadAnswer as exc:
                raise InputError(source, f"cannot read the collector's slot ads: {exc}"
                                 ) from None
            except InputError:
                raise
            except Exception as exc:
                raise InputError(source, "cannot write the collector's slot ads: "
                                         f"{_unwritable_ad(slots, exc)}") from None

        def lines_names(lines) -> set:
            distinct: set = set()
            for one in lines:
                distinct.update(one)
            return names.of_lines(distinct)

        slots = slot_keys = None
        (slots, slot_lines, startd_ads, slot_texts, slot_memos, refreshed,
         fresh) = fetch_slots(slot_proj)
        slot_needs = lines_names(fresh)
        # the collector's ads, let go once their lines were printed: their memory back
        # to the system now, not at the pool's end (where a capture's peak came)
        give_back_memory()
        lap("slot_lines")

        def widen(more: set) -> bool:
            """Ask the collector again when the projection lacks a name of `more` or of
            what the slots themselves reference (a few times at most, then whole);
            True when it was asked again."""
            nonlocal slot_proj, slot_lines, startd_ads, slot_texts, slot_memos
            nonlocal refreshed, slot_needs
            again = False
            for round_ in range(collector_projection.ROUNDS + 1):
                if slot_proj is None:
                    break
                lacking = collector_projection.missing(slot_proj, slot_needs | more)
                if not lacking and not names.dynamic:
                    break
                slot_proj = (None if names.dynamic or round_ == collector_projection.ROUNDS
                             else collector_projection.projection_of([*slot_proj, *lacking]))
                (slots, slot_lines, startd_ads, slot_texts, slot_memos, refreshed,
                 fresh_) = fetch_slots(slot_proj)
                slot_needs |= lines_names(fresh_)
                again = True
            return again

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
        # the slot attributes the negotiators' expression knobs read
        knob_needs = names.of_texts(collector_projection.knob_texts(knobs))
        for _, other in others.values():
            knob_needs |= names.of_texts(collector_projection.knob_texts(other))
        if widen(knob_needs):
            lap("slot_lines")
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
        if got is not None:
            # a first guess's: the names it holds
            projection, kept = beside.projection, beside.kept
        else:
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
        # the slot attributes the jobs' expressions read (TARGET.HasFileTransfer)
        job_needs = names.of_schedd_jobs(
            schedd_jobs, known_lines.jobs if known_lines is not None else None)
        lap("job_lines")
        more = set()
        if watch and widen(knob_needs | job_needs):
            lap("slot_lines")
            # what the slots asked again reference of the jobs
            more = referenced_job_attrs(slots, knobs, slot_lines, slot_memos)
            for _, other in others.values():
                if other is not None:
                    more |= referenced_job_attrs(slots, other, slot_lines, slot_memos)
        # and what the slot attributes the jobs read go on to read (a job's
        # TARGET.HasWidget whose slot expression reads TARGET.WidgetNeed): asked of the
        # schedds again when the jobs' projection lacks it
        more |= names.reached(job_needs)
        had = {n.lower() for n in projection}
        lacking = [n for n in projection_of(more) if n.lower() not in had]
        if lacking:
            refs |= more
            projection = [*projection, *lacking]
            kept = kept_attributes(projection, refs) if by_requests else None
            by_request = {}
            for name in list(errors):
                if name in answered or name in missing:
                    errors.pop(name)
            schedd_jobs, answered, missing = _query_schedds(
                htcondor, collector, projection, errors, seen, lap, kept,
                by_request, where=source)
            queried = "after the slots"

    whole_because = next_proj = None
    if watch and slot_proj is None:
        if names.dynamic:
            whole_because = ("an expression builds attribute names at run time, or "
                             "cannot be read")
            next_proj = collector_projection.WHOLE
        else:
            whole_because = ("the projection was widened "
                             f"{collector_projection.ROUNDS} times" if not start_whole
                             else "the last capture was whole")
            next_proj = collector_projection.projection_of(
                [*collector_projection.first_guess(), *slot_needs, *knob_needs, *job_needs])
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
            # the slot attributes the collector was asked for (collector_projection;
            # absent: whole slot ads)
            **({"slot_projection": list(slot_proj)} if slot_proj is not None else {}),
            # asked whole when a projection was wanted: why, and what the next capture
            # asks for first (collector_projection.WHOLE: whole again)
            **({"slots_whole_because": whole_because, "slot_projection_next": next_proj}
               if whole_because else {}),
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
        sizes = table_sizes(slots, optional["submitters"], slot_keys)
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


# ---------------------------------------------------------------- job projection


# ---------------------------------------------------------------- schedds

