"""The shadow loop: one pass beside a real pool (`negotiator-ext shadow`).

A pass, in order:

1. Take a snapshot of the pool through the bindings (`adapters.live.capture_snapshot`,
   READ only), or, when replaying, use a recorded snapshot directory as it is.
2. Read what the real negotiator did: its ad's `LastNegotiationCycle*` history (and,
   when configured, every cycle's start and end from the NegotiatorLog), the Accounting
   ads, the claims in the slot ads (`adapters.observe`) and, when a path is configured,
   the MatchLog lines of the real cycles new since the last pass.
3. Run our cycle on the same snapshot (`cycle.run_cycle`), starting from the real
   accountant's state (the snapshot's Accounting ads).
4. Compare the previous complete pass's cycle with the real cycle that followed its
   snapshot (`core.compare`), each disagreeing submitter classified as the pool changed
   (named), out of time or unexplained (`core.disagreement`, from the snapshots'
   digests: `adapters.alignment.pool_digest`), and our accountant's priorities with the
   real ones.
5. Record everything in the ledger, in one transaction (`adapters.ledger`).

A loop with the NegotiatorLog follows it (`adapters.alignment.CycleFollower`): besides
its passes at the interval, a pass starts as a real cycle starts, and its capture is
compared with that cycle, unless the cycle's own matches reached the capture first
(`late_capture`: a quick cycle); then, as without the log, with the newest capture over
before the cycle began.

Faults never stop the loop and never make a recommendation: a collector that does not
answer gives a recorded *failed* pass; a schedd that times out, a missing negotiator ad,
an Accounting ad without its priority, or a clock that went backwards give a recorded
*partial* pass. Only complete passes feed `recommend`. A ledger that cannot be written
raises LedgerError: nothing is half-written; a locked one, one on a full file system and
a PostgreSQL server away are tried again at the next interval, one that cannot be
written for a lasting reason (read-only, corrupt, from a newer version) ends the loop
(`run_forever`).
"""

from __future__ import annotations

import dataclasses
import gc
import logging
import threading
import time
import uuid as uuidlib
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

from .core.disagreement import unexplained_left
from .core.records import MatchEntry, PassRecord, RealCycle, SubmitterObs
from .errors import InputError
from .limits import give_back_memory
from .shadow_repredict import keep_inputs, repredict_pass
from .shadow_state import (Busy, ShadowSettings, _snapshot_path, newest_config,
                           newest_projection, newest_slot_projection, pass_lock, slot_seed,
                           prune_snapshots)
from .shadow_state import read_settings  # noqa: F401  (the daemon's shadow.read_settings)

LOG = logging.getLogger("negotiator_ext.shadow")



# ---- one pass ----------------------------------------------------------------------------

# a loop that keeps its slot ads collects everything once in this many passes (in the
# others, what the pass made: limits.paused_gc)
FULL_COLLECTION_EVERY = 10
# a loop following the NegotiatorLog reads its new lines this often (s), and captures
# on a Started line at most this many seconds old (the log has whole seconds)
FOLLOW_POLL = 0.05
ALIGN_SLACK = 1.5


class ShadowLoop:
    """Passes beside one pool, recorded in one ledger.

    `htcondor` is the bindings module (default htcondor2, imported when first needed;
    tests pass a mock). `clock` gives the wall time. `run_pass(replay=DIR)` takes a
    recorded snapshot directory instead of a live capture (a pass at its capture time)."""

    def __init__(self, settings: ShadowSettings, *, htcondor=None,
                 clock: Callable[[], float] = time.time, log: logging.Logger | None = None):
        self.settings = settings
        self._htcondor = htcondor
        self.clock = clock
        self.log = log or LOG
        # what the ledger held after the last pass, for the metrics (records.Standing)
        self.standing = None
        # a pool of several negotiators: each one's newest pass and standing, by ledger
        # stream, for the metrics (served side by side, labelled by negotiator)
        self.latest: dict[str, tuple] = {}
        self.last_records: list = []        # every record of the last pass (run_passes)
        self.warned_cycle_time = False      # a capture before LastUpdate is logged once
        self.warned_vacuum = False          # an old ledger that cannot shrink: said once
        self.reclaim_more = False           # the last reclaim left free pages to give back
        # the slot ads kept from the last pass (adapters/slot_cache.py): a loop's own
        # (run_forever), never a single pass's
        self.slot_cache = None
        # the job lines the loop's last pass split into texts (adapters/adfiles.py)
        self.known_lines = None
        # the config the loop's last pass read from its snapshot (condor_config.ConfigMemo)
        self.config_memo = None
        # what each stream's last pass built its pool from (shadow_repredict.KeptInputs)
        self.kept_inputs: dict = {}
        # the daemons' configurations its passes read through RemoteParam, kept while
        # the daemons' ads say they have not read their files since (live.KeptReads)
        self.kept_reads = None
        # the names each slot and job text references (collector_projection.Refs), kept
        # from pass to pass by a loop
        self.slot_refs = None
        # the process that queries the schedds beside a loop's slot steps
        # (adapters/worker.py), started by run_forever; `subsystem` is its HTCondor
        # subsystem, (name, SubsystemType member), as this process's (None: the default)
        self.worker = None
        self.subsystem: tuple[str, str] | None = None
        # run_forever's stop: a pass waiting on the schedds ends at once when it is set
        self.stop: threading.Event | None = None
        # whether the collector answered the last call made to it (a loop's captures)
        from .adapters.collector_gate import Heard
        self.heard = Heard()
        self.passes = 0                     # passes run (run_passes)
        # run_forever's passes leave their collection and their objects for `tidy`,
        # between passes (what a pass frees is no part of its record): the generation
        # to collect then, and the last pass's steps with what they made
        self.tidy_later = False
        self._untidy: tuple | None = None
        # run_forever's reader of the NegotiatorLog's new lines (adapters/alignment.py):
        # a pass starts as a real cycle starts (None: passes at their interval only)
        self.follower = None

    @property
    def htcondor(self):
        if self._htcondor is None:
            import htcondor2
            self._htcondor = htcondor2
        return self._htcondor

    def pool_name(self) -> str:
        return self.settings.pool or "<local>"

    def run_pass(self, replay: Path | None = None, collect: bool = True,
                 aligned: int | None = None) -> PassRecord:
        """One pass; see the module docstring. Returns what was recorded (in a pool of
        several negotiators, the first one's: `run_passes` returns them all). `collect`:
        Python's cyclic collector runs once after the pass (False: the process ends
        with it, `shadow --once`). `aligned`: the start of the real cycle the NegotiatorLog
        says began just now (the pass captures the pool it negotiates over)."""
        return self.run_passes(replay, collect, aligned)[0]

    def run_passes(self, replay: Path | None = None, collect: bool = True,
                   aligned: int | None = None) -> list[PassRecord]:
        """One pass over one snapshot: one record, or in a pool of several negotiators one
        per negotiator (each its own stream in the ledger, `core.shards.stream_name`,
        compared with its own real cycles), in the order of their names."""
        from .adapters.ledger import open_ledger
        from .limits import paused_gc
        # a loop's pass collects what it made (generation 1), not the slot ads it keeps;
        # every FULL_COLLECTION_EVERY passes, everything
        self.passes += 1
        young = (self.slot_cache is not None and len(self.slot_cache) > 0
                 and self.passes % FULL_COLLECTION_EVERY)
        generation = 1 if young else 2
        later = collect and self.tidy_later
        self.tidy()
        with paused_gc(collect and not later, generation), \
                open_ledger(self.settings.ledger_url) as ledger:
            one = _Pass(self, ledger, replay, aligned)
            recs = one.run_all()
        if later:
            self._untidy = (generation, one)
        self.last_records = recs
        return recs

    def tidy(self) -> None:
        """What the last pass left for later (`tidy_later`, a loop's passes): the
        objects it made freed and Python's cyclic collector run over them, after its
        record is written and before the next pass. Nothing when there is nothing left."""
        untidy, self._untidy = self._untidy, None
        if untidy is not None:
            generation, one = untidy
            del one, untidy
            gc.collect(generation)

    def run_forever(self, stop: threading.Event,
                    on_pass: Callable[[PassRecord], None] | None = None) -> None:
        """A pass every `interval` seconds (measured from each pass's start) until `stop`
        is set. A ledger that cannot be written for a lasting reason (cannot be opened or
        created, read-only, corrupt, of a newer schema: `LedgerError.transient` false)
        ends the loop: its LedgerError is raised, not logged, for the caller to report
        once. A transient one (locked by another process beyond the lock timeout, its file
        system full, its PostgreSQL server away) is tried again at the next interval,
        logged when it starts and when it clears, not every pass. Nothing else stops the
        loop."""
        if self.settings.keep_slot_ads and self.slot_cache is None:
            from .adapters.slot_cache import SlotCache
            self.slot_cache = SlotCache()
        if self.known_lines is None:
            from .adapters.adfiles import KnownLines
            self.known_lines = KnownLines()
        if self.config_memo is None:
            from .adapters.condor_config import ConfigMemo
            self.config_memo = ConfigMemo()
        if self.kept_reads is None:
            from .adapters.daemon_config import KeptReads
            self.kept_reads = KeptReads()
        if self.slot_refs is None:
            from .adapters.collector_projection import Refs
            self.slot_refs = Refs()
        self.tidy_later = True
        self.stop = stop
        if self.settings.negotiator_log is not None and self.follower is None:
            from .adapters.alignment import CycleFollower
            self.follower = CycleFollower(self.settings.negotiator_log,
                                          self.settings.matchlog_tz)
        if self.worker is None:
            from .adapters.worker import Worker
            self.worker = Worker(self.subsystem, preload=("negotiator_ext.adapters.live",))
        self.worker.start()
        try:
            self._run_forever(stop, on_pass)
        finally:
            self.worker.close()

    def _run_forever(self, stop: threading.Event,
                     on_pass: Callable[[PassRecord], None] | None) -> None:
        from .adapters.ledger import LedgerError
        failing: tuple[str, str] | None = None   # (since when, ledger) a transient error
        aligned: int | None = None
        while not stop.is_set():
            t0 = time.monotonic()
            try:
                with pass_lock(self.settings.state_dir):
                    rec = self.run_pass(aligned=aligned)
                # a pool of several negotiators: every negotiator's record of the pass
                recs = (self.last_records if self.last_records
                        and self.last_records[0] is rec else [rec])
            except Busy as exc:
                self.log.warning("%s; skipping this interval", exc)
            except LedgerError as exc:
                if not exc.transient:
                    raise
                if failing is None:
                    failing = (_local_time(self.clock()), exc.source)
                    self.log.warning("pass not recorded: %s; trying again every %g s",
                                     exc.one_line(), self.settings.interval)
                else:
                    self.log.debug("ledger not written since %s; still retrying: %s",
                                   failing[0], exc.one_line())
            except InputError as exc:
                self.log.error("pass failed: %s", exc.one_line())
            except Exception:   # never a crash loop: log it with its traceback, go on
                self.log.exception("pass failed with an internal error")
            else:
                if failing is not None:
                    self.log.info("ledger %s written again (it was not since %s)",
                                  failing[1], failing[0])
                    failing = None
                if on_pass is not None:
                    try:
                        for rec in recs:
                            on_pass(rec)
                    except Exception:
                        self.log.exception("reporting the pass failed")
            # what the pass made is freed, and goes back to the system, while the loop
            # waits (the next pass, and the worker's answer beside it, start from what
            # the loop keeps)
            self.tidy()
            give_back_memory()
            # a worker process that has answered its share is replaced now, its
            # successor starting while the loop waits (adapters/worker.py)
            if self.worker is not None and not stop.is_set():
                self.worker.renew()
            aligned = self.wait(stop, t0 + self.settings.interval)

    def wait(self, stop: threading.Event, deadline: float) -> int | None:
        """Until the monotonic `deadline` (the next pass at its interval; None returned),
        or, following the NegotiatorLog, until a real cycle starts: its start time is
        returned, for a pass that captures the pool as that cycle reads it. A Started
        line more than ALIGN_SLACK seconds old when read (written early in a long pass)
        is let go: a capture then would not be aligned."""
        follower = self.follower
        if follower is None:
            stop.wait(max(0.0, deadline - time.monotonic()))
            return None
        while not stop.is_set():
            starts = follower.poll()
            if follower.problem and follower.problem != getattr(self, "_follow_problem", None):
                self.log.warning("%s: passes are not aligned with the real cycles",
                                 follower.problem)
            self._follow_problem = follower.problem
            if starts and self.clock() - starts[-1] <= ALIGN_SLACK:
                return starts[-1]
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            stop.wait(min(FOLLOW_POLL, left))
        return None


def _local_time(t: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t))


class _Pass:
    """The steps of one pass, each a method, sharing the pass's state."""

    def __init__(self, loop: ShadowLoop, ledger, replay: Path | None,
                 aligned: int | None = None):
        self.loop = loop
        self.aligned = aligned                  # the real cycle's start the capture follows
        self.digest: dict | None = None         # this pass's snapshot (core.disagreement)
        self.acct_time: int | None = None       # the real accountant's LastUpdate read now
        self.s = loop.settings
        self.ledger = ledger
        self.replay = replay
        self.uuid = uuidlib.uuid4().hex
        self.started = loop.clock()
        self.partial_reasons: list[str] = []
        self.warnings: list[str] = []
        self._submitters: dict[str, list[SubmitterObs]] = {}
        self.pool_name = loop.pool_name()       # the ledger's stream (run sets it)
        self.logs_read = True                   # the NegotiatorLog and MatchLog settings
        self.made: tuple = ()                   # what `run` made (freed with the pass)

    def recorded_submitters(self, uuid: str) -> list[SubmitterObs]:
        """An earlier pass's submitter rows (read once: the drift and the comparison
        usually want the same pass's)."""
        if uuid not in self._submitters:
            self._submitters[uuid] = self.ledger.submitters(uuid)
        return self._submitters[uuid]

    def partial(self, reason: str) -> None:
        self.loop.log.warning("partial pass: %s", reason)
        self.partial_reasons.append(reason)

    def run_all(self) -> list[PassRecord]:
        """The snapshot, then one pass for each of the pool's negotiators (one for a pool
        of one)."""
        # 1. the snapshot
        # on the loop's clock, as the pass's start: a comparison needs the capture over
        # before the real cycle began (started_at + capture_duration); a replay takes none
        t_capture = self.loop.clock()
        try:
            snap_dir, captured, timings = self.take_snapshot()
        except InputError as exc:
            return [self.record_failed(f"no snapshot: {exc.one_line()}")]
        capture_duration = (0.0 if self.replay is not None
                            else round(max(0.0, self.loop.clock() - t_capture), 3))
        timings = {f"capture_{k}": v for k, v in timings.items()}
        # the negotiators are those of negotiators/, which a capture writes for a pool of
        # several (not negotiators_of: it would parse the Accounting ads a second time
        # every pass); a snapshot without it is one negotiator's (load_pool refuses one
        # whose Accounting ads come from several)
        from .adapters.snapshot import NEGOTIATORS, read_negotiator_configs
        try:
            names = sorted(read_negotiator_configs(Path(snap_dir) / NEGOTIATORS)) or [None]
        except InputError as exc:
            return [self.record_failed(f"snapshot unreadable: {exc.one_line()}",
                                       snapshot_dir=snap_dir)]
        # the capture's ads are handed on, not kept here: the pass lets them go with its
        # pool (before a re-prediction loads another)
        held = [captured]
        del captured
        if names == [None]:
            return [self.run(snap_dir, held.pop(), timings, capture_duration)]
        out = []
        for i, name in enumerate(names):
            # each negotiator's pass its own (uuid, warnings); the capture's ads serve
            # the first only: a cycle marks the slot ads it reads
            one = self if i == 0 else _Pass(self.loop, self.ledger, self.replay, self.aligned)
            one.started = self.started
            out.append(one.run(snap_dir, held.pop() if held else None, dict(timings),
                               capture_duration, name))
        return out

    def run(self, snap_dir: Path, captured, timings: dict, capture_duration: float,
            negotiator: str | None = None) -> PassRecord:
        """One negotiator's pass on the snapshot `snap_dir` (None: the pool's only one)."""
        from .core.shards import stream_name
        pool_name = stream_name(self.loop.pool_name(), negotiator)
        self.pool_name = pool_name
        last_any = self.ledger.last_pass(pool_name)
        lap = time.perf_counter()

        from .pool import load_pool
        try:
            # a live capture's slot and job ads are taken as captured, not read back
            pool = load_pool(snap_dir, self.s.cycle_config, captured=captured,
                             negotiator=negotiator, config_memo=self.loop.config_memo)
            del captured
        except InputError as exc:
            return self.record_failed(f"snapshot unreadable: {exc.one_line()}",
                                      snapshot_dir=snap_dir)
        if negotiator is not None and (self.s.negotiator_log or self.s.matchlog):
            self.warnings.append("the pool has several negotiators: NEGOTIATOR_EXT_"
                                 "NEGOTIATOR_LOG and NEGOTIATOR_EXT_MATCHLOG are not read "
                                 "(they name one negotiator's files); each negotiator's "
                                 "real cycles come from its own ad")
            self.logs_read = False
        timings["pool"] = round(time.perf_counter() - lap, 3)
        snap_time = pool.snapshot.captured_at
        if self.replay is not None and snap_time is not None:
            self.started = float(snap_time)
        # whether our cycle ran on sound input, so that the next pass may compare it: the
        # negotiator's own ad is only the real side (its config comes by RemoteParam)
        comparable = not (pool.snapshot.missing_schedds or set(
            pool.snapshot.meta.get("errors") or ()) - {"collector:negotiator"})
        if last_any is not None and self.started < float(last_any["started_at"]):
            comparable = False
            self.partial(f"the clock went backwards: this pass at {self.started:.0f} is "
                         f"before the last recorded pass at {float(last_any['started_at']):.0f}")
        self.check_cycle_time(pool)
        if pool.snapshot.partial:
            errors = pool.snapshot.meta.get("errors") or {}
            why = [f"{name}: {str(errors[name])[:160]}" if isinstance(errors, dict)
                   and errors.get(name) else name for name in pool.snapshot.unanswered]
            self.partial(f"partial snapshot (did not answer: {'; '.join(why) or 'unknown'})")
        self.warnings.extend(pool.warnings)

        # 3. our cycle
        from .cycle import run_cycle
        t_cycle = time.perf_counter()
        result = run_cycle(pool)
        shadow_duration = round(time.perf_counter() - t_cycle, 3)
        timings["cycle"] = shadow_duration
        lap = time.perf_counter()
        if self.s.matchlog is not None and self.logs_read:
            from .adapters.alignment import pool_digest
            self.digest = pool_digest(pool, result)
        aligned_cycle = self.aligned if self.logs_read and self.replay is None else None
        if aligned_cycle is not None:
            from .adapters.alignment import late_capture
            late = late_capture(pool, aligned_cycle)
            if late:
                # the real cycle's own matches reached the capture first (a quick cycle):
                # this snapshot is not the pool it negotiated over, and is compared as
                # any other pass, with the next real cycle
                self.warnings.append(
                    f"captured as the real cycle of {aligned_cycle} started, too late: "
                    f"{late} job(s) and slot(s) already matched by it; not compared with it")
                aligned_cycle = None

        # 2. what the real negotiator did
        from .adapters.observe import observe_pass, real_cycles
        observed = observe_pass(pool, result)
        subs, groups, acct_time = observed.submitters, observed.groups, observed.accountant_time
        self.acct_time = acct_time          # when the compared cycle's update took (repredict)
        for w in observed.warnings:      # our cycle started such a record from scratch
            comparable = False
            self.partial(w)
        accounting = pool.snapshot.accounting
        if accounting is None or (not accounting and (pool.submitter_ads() or any(
                s.remote_user for s in pool.slots))):
            comparable = False
            self.partial("no Accounting ads: the real accountant's state is unknown")
        seen = self.ledger.newest_real_cycle(pool_name) or 0
        cycles = self.read_real_cycles(pool, real_cycles, since=self.log_since(last_any, seen,
                                                                               snap_time))
        new_cycles = sorted((c for c in cycles if c.time > seen), key=lambda c: c.time)
        if self.aligned is not None and self.logs_read:
            # the cycle this pass's capture followed (finished already, on a small pool)
            # is left for the next pass, which compares it with this one
            new_cycles = [c for c in new_cycles if c.time < self.aligned - 1]
        real_match_entries = self.read_matchlog(new_cycles)
        if real_match_entries is not None:
            new_cycles = _with_matchlog_counts(new_cycles, real_match_entries)

        # 4. the comparison, the priority drift
        subs = self.drift(last_any, subs, cycles, acct_time, pool.config.priority_halflife)
        comparison = self.compare(pool_name, subs, groups, cycles, new_cycles,
                                  real_match_entries)
        if comparison is not None:
            subs, groups = _with_real_counts(subs, groups, comparison)

        timings["real"] = round(time.perf_counter() - lap, 3)
        shadow_matches = tuple(MatchEntry(job=m.job, submitter=m.submitter, slot=m.slot,
                                          preempting=m.preempting, group=m.group, wait=wait)
                               for m, wait in zip(result.matches, job_waits(result)))
        finished = self.loop.clock() if self.replay is None else self.started
        status = "partial" if self.partial_reasons else "complete"
        newest = max((c.time for c in cycles), default=None)
        rec = PassRecord(
            uuid=self.uuid, pool=pool_name, started_at=self.started, finished_at=finished,
            snapshot_time=snap_time, status=status,
            reason="; ".join(self.partial_reasons) or None,
            real_cycle_time=newest if newest is not None else (seen or None),
            real_accountant_time=acct_time,
            shadow_duration=shadow_duration, capture_duration=capture_duration,
            shadow_timings=dict(result.timings), pool_weight=result.pool_weight,
            real_cycles=tuple(new_cycles), shadow_matches=shadow_matches,
            real_matches=tuple(real_match_entries or ()),
            submitters=tuple(subs), groups=tuple(groups), comparison=comparison,
            snapshot_dir=str(snap_dir), warnings=tuple(self.warnings), comparable=comparable,
            slot_classes=result.slot_classes if comparable else {}, pass_timings=timings,
            time_limits=dict(result.time_limits or {}),
            aligned_cycle=aligned_cycle, digest=self.digest or {})
        # the pass's pool and result, freed with the pass (a loop's: after its record,
        # ShadowLoop.tidy); what it was built from, kept for the next pass's re-prediction
        self.made = (pool, result)
        inputs = pool.inputs() if pool.shared_slot_ads and self.s.repredict else None
        if comparison is not None and unexplained_left(comparison.disagreements):
            # our cycle once more, on the compared pass's inputs: this pass's pool and
            # cycle are let go first (only the record is left to write)
            self.made = ()
            del pool, result, observed
            rec = repredict_pass(self, rec, negotiator)
        keep_inputs(self, inputs)
        return self.save(rec, last_any)

    # -- steps -----------------------------------------------------------------------------

    def check_cycle_time(self, pool) -> None:
        """Our cycle runs at the snapshot's capture time, which should not be before the
        real accountant's LastUpdate (the accountant cannot go back in time). A capture
        reads the Accounting ads last, so a real cycle that began during the capture (or
        the capturing host's clock behind the central manager's) gives such a time, live
        or in a replay of the loop's own snapshots: the pass goes on, with a warning
        recorded in it and logged once per loop. (`negotiate --at` refuses such a time:
        there it is the user's own choice.)"""
        t, last = pool.cycle_time(), pool.accountant.last_update_time
        if not last or t >= last:
            return
        warning = (f"the capture time {t} is before the accountant's LastUpdate {last} (a "
                   "real cycle began during the capture, or the capturing host's clock is "
                   "behind the central manager's): our accountant took no time step")
        self.warnings.append(warning)
        if not self.loop.warned_cycle_time:
            self.loop.warned_cycle_time = True
            self.loop.log.warning("%s (logged once)", warning)

    def take_snapshot(self):
        """The snapshot's directory, the ads a live capture still holds (None for a
        replay), and the capture's steps' timings."""
        if self.replay is not None:
            return Path(self.replay), None, {}
        from .adapters.live import capture_snapshot
        root = self.s.state_dir / "snapshots"
        try:
            root.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise InputError(str(root), f"cannot create the snapshots directory: "
                                        f"{exc.strerror or exc}") from None
        t = int(self.started)
        out = _snapshot_path(root, t, self.uuid)
        projection, kept = (newest_projection(root, exclude=out) if self.s.capture_beside
                            else (None, None))
        # a pass with no slot ads kept from the last (a `--once` pass; a loop's first)
        # starts from the newest snapshot's, and fetches only the slots heard from since
        cache, seed = self.loop.slot_cache, None
        if self.s.keep_slot_ads and (cache is None or not len(cache)):
            seed = slot_seed(root, t, exclude=out)
            if seed is not None and cache is None:
                from .adapters.slot_cache import SlotCache
                cache = SlotCache()         # (this pass's own)
        report = capture_snapshot(self.s.pool, out, timeout=self.s.timeout, now=t,
                                  htcondor=self.loop.htcondor,
                                  earlier_config=newest_config(root, exclude=out),
                                  earlier_projection=projection, earlier_kept=kept,
                                  by_requests=self.s.capture_requests,
                                  slot_cache=cache, slot_seed=seed,
                                  known_lines=self.loop.known_lines,
                                  worker=self.loop.worker,
                                  kept_reads=self.loop.kept_reads,
                                  stop=self.loop.stop.is_set if self.loop.stop else None,
                                  collector_wait=(self.s.stop_timeout if self.loop.stop
                                                  else None),
                                  heard=self.loop.heard,
                                  whole_slots=self.s.whole_slot_ads,
                                  schedds_at_once=self.s.schedds_at_once,
                                  earlier_slot_projection=newest_slot_projection(
                                      root, exclude=out),
                                  slot_refs=self.loop.slot_refs)
        for key, msg in report.errors.items():
            self.loop.log.warning("%s: %s", key, msg)
        prune_snapshots(root, self.s.keep_snapshots, exclude=out)
        return out, report.ads, dict(report.timings)

    @staticmethod
    def log_since(last: dict | None, seen: int, snap_time: int | None) -> int:
        """How far back the NegotiatorLog is read: to the last pass's snapshot (the cycle
        after it is the one a comparison needs) and the newest real cycle recorded."""
        times = [int(seen)] if seen else []
        if last is not None:
            times.append(int(float(last.get("snapshot_time") or last["started_at"])))
        if snap_time is not None:
            times.append(int(snap_time))
        return min(times) if times else 0

    def read_real_cycles(self, pool, real_cycles, *, since: int) -> list[RealCycle]:
        """The real cycles: the negotiator ad's history, and with a NegotiatorLog every
        finished cycle it shows since `since` (the ad's figures kept where it lists the
        same cycle). Without the log, a pass says when the ad's history cannot hold
        every cycle between two of its updates."""
        unreadable = False
        try:
            ads = pool.snapshot.negotiator_ads() or []
        except InputError as exc:
            self.partial(f"negotiator ad unreadable: {exc.one_line()}")
            ads, unreadable = [], True
        if len(ads) > 1:
            self.warnings.append(f"{len(ads)} negotiator ads; comparing with the first "
                                 "(one negotiator per pool is assumed)")
        from_ad = real_cycles(ads[0]) if ads else []
        if self.s.negotiator_log is not None and self.logs_read:
            from .adapters.observe import merge_cycles, read_negotiator_log
            try:
                from_log, _ = read_negotiator_log(self.s.negotiator_log, since=since,
                                                  tz=self.s.matchlog_tz)
            except InputError as exc:
                self.partial(f"NegotiatorLog unreadable: {exc.one_line()}")
            else:
                if not ads and not unreadable:
                    self.warnings.append("no negotiator ad: the real cycles are the "
                                         "NegotiatorLog's, without the ad's figures")
                cycles = merge_cycles(from_log, from_ad)
                captured = pool.snapshot.captured_at
                if self.replay is not None and captured is not None:
                    # a recorded snapshot replayed beside the log as it is now: the
                    # cycles that ended after its capture are the next pass's, as they
                    # were for the pass that took it
                    cycles = [c for c in cycles if c.end is None or c.end <= captured]
                return cycles
        if unreadable:
            return []
        if not ads:
            self.partial("no negotiator ad: what the real negotiator did is unknown")
            return []
        unseen = unseen_cycles_warning(pool.config)
        if unseen:
            self.warnings.append(unseen)
        return from_ad

    def read_matchlog(self, new_cycles: list[RealCycle]) -> list[MatchEntry] | None:
        """The MatchLog's Matched lines of the real cycles first seen in this pass, from
        the first one's start to the last one's end (the ad lists finished cycles only),
        so no line is read by two passes. None without a MatchLog."""
        if self.s.matchlog is None or not self.logs_read:
            return None
        if not new_cycles:
            return []
        from .adapters.observe import read_matchlog
        until = max(c.end if c.end is not None else c.time for c in new_cycles)
        try:
            entries, _ = read_matchlog(self.s.matchlog, since=new_cycles[0].time, until=until,
                                       tz=self.s.matchlog_tz)
        except InputError as exc:
            self.partial(f"MatchLog unreadable: {exc.one_line()}")
            return None
        return entries

    def drift(self, last: dict | None, subs: list[SubmitterObs], cycles: list[RealCycle],
              acct_time: int | None, halflife: float) -> list[SubmitterObs]:
        """Our accountant's priorities against the real ones: from the last pass's real
        records to this pass's, when exactly one real cycle (one UpdatePriorities) ran in
        between; with several, claims that began or ended in between make a difference
        that is not the accountant's, so no drift is recorded."""
        if acct_time is None or last is None or not last.get("real_accountant_time"):
            return subs
        t0 = int(last["real_accountant_time"])
        if sum(1 for c in cycles if t0 < c.time <= acct_time) != 1 or not any(
                c.time <= t0 for c in cycles):
            return subs           # not exactly one step, or the history does not tell
        from .core.compare import priority_drift
        drift = priority_drift(self.recorded_submitters(last["uuid"]), t0, subs, int(acct_time),
                               halflife=halflife)
        return [dataclasses.replace(o, predicted_rup=drift[o.name][0], drift=drift[o.name][1])
                if o.name in drift else o for o in subs]

    def compare(self, pool_name: str, subs, groups, cycles: list[RealCycle],
                new_cycles: list[RealCycle], real_matches):
        """Compare one earlier pass's cycle with the real cycle it predicted: the first
        real cycle new in this pass that has a comparable pass before it (the newest one
        whose capture was over before that cycle's first second) not compared yet. None
        when there is nothing new to compare (no negotiator ad, no new real cycle, no
        such pass): that pass waits for the next real cycle, and no real cycle is
        compared twice. (`compared` only spares the work: whether another process compared
        that pass meanwhile is decided again as the pass is recorded, `Ledger.record`.)"""
        aligned = False
        for first in new_cycles:
            # a pass that captured the pool as this cycle started (the NegotiatorLog's
            # Started line) saw what it negotiated over
            prev = self.ledger.last_pass(pool_name, comparable=True, aligned_cycle=first.time)
            if prev is not None and not self.ledger.compared(prev["uuid"]):
                aligned = True
                break
            # else the snapshot's capture over before the cycle's first second: a capture
            # that overlaps the cycle may have read the pool half before, half after it
            prev = self.ledger.last_pass(pool_name, comparable=True, captured_by=first.time)
            if prev is not None:
                break
        else:
            return None
        if self.ledger.compared(prev["uuid"]):
            return None
        snap = min(int(prev["snapshot_time"]), first.time) if aligned else int(prev["snapshot_time"])
        if not aligned and not any(c.time < first.time and c.time <= snap for c in cycles):
            # The ad's history (the last NEGOTIATION_CYCLE_STATS_LENGTH cycles, all in a
            # row) starts after prev's snapshot: cycles between may have dropped out of it,
            # so `first` may not be the one prev predicted.
            from .core.records import Comparison
            return Comparison(
                shadow_pass=prev["uuid"], real_cycle_time=None,
                real_cycles_between=len(new_cycles), real_matches=None,
                shadow_matches=int(prev["n_shadow_matches"]), agreed=None,
                real_in_shadow=None, shadow_in_real=None, count_agreement=None, source="gap",
                notes=("the negotiator ad's history starts after the compared snapshot, so "
                       "the real cycle that followed it may no longer be listed (run passes "
                       "more often, or raise NEGOTIATION_CYCLE_STATS_LENGTH)",))
        from .core.compare import compare
        shadow_groups = self.ledger.groups(prev["uuid"])
        # for a re-prediction of what stays unexplained (`repredict`): the compared pass,
        # the real cycle, its submitters, both sides' group names
        self._compared = (prev, first, subs,
                          [g.name for g in shadow_groups] + [g.name for g in groups])
        return compare(
            shadow_pass=prev["uuid"], shadow_snapshot_time=snap,
            shadow_matches=self.ledger.shadow_matches(prev["uuid"]),
            shadow_submitters=self.recorded_submitters(prev["uuid"]),
            shadow_groups=shadow_groups,
            real_cycles=[c for c in new_cycles if c.time >= first.time],
            real_matches=real_matches, real_submitters=subs,
            real_groups=groups, slot_classes=self.ledger.slot_classes(prev["uuid"]),
            time_limits=prev.get("time_limits") or {},
            digest_before=self.ledger.digest(prev["uuid"]) or None,
            digest_after=self.digest,
            aligned=aligned)

    def record_failed(self, reason: str, snapshot_dir: Path | None = None) -> PassRecord:
        self.loop.log.error("failed pass: %s", reason)
        rec = PassRecord(uuid=self.uuid, pool=self.pool_name, started_at=self.started,
                         finished_at=self.loop.clock() if self.replay is None else self.started,
                         snapshot_time=None, status="failed", reason=reason,
                         real_cycle_time=None, real_accountant_time=None,
                         shadow_duration=None, capture_duration=None,
                         snapshot_dir=str(snapshot_dir) if snapshot_dir else None)
        return self.save(rec)

    def save(self, rec: PassRecord, last: dict | None = None) -> PassRecord:
        """Record the pass, and return it as recorded (without its comparison when another
        process compared that earlier pass first: `Ledger.record`); then apply the
        retention, only after a complete pass and never past the previous pass (a clock
        far ahead must not empty the ledger). A retention that fails is a log line: the
        pass is recorded."""
        rec = self.ledger.record(rec) or rec
        from .adapters.ledger import LedgerError
        from .core.shards import split_stream
        try:
            self.loop.standing = self.ledger.standing(rec.pool)
        except LedgerError as exc:
            self.loop.log.warning("ledger standing not read (metrics): %s", exc.one_line())
        if split_stream(rec.pool)[1] is not None:
            self.loop.latest[rec.pool] = (rec, self.loop.standing)
        if rec.status == "complete":
            self.retain(min(rec.started_at, float(last["started_at"])) if last
                        else rec.started_at)
        return rec

    def retain(self, now: float) -> None:
        """The ledger's retention, counted back from `now`: passes (and hourly summaries)
        older than RETENTION_DAYS go; the passes of each whole hour older than
        DETAIL_DAYS are replaced by the hour's summary (`Ledger.summarise`), oldest
        first, an hour at a time for at most `summary_budget` seconds (at least one hour
        a pass: a loop summarises an hour an hour, a backlog over several passes); then
        the space this freed is given back, a bounded step a pass (`Ledger.reclaim`).
        A retention that fails is a log line: the pass is recorded."""
        from .adapters.ledger import LedgerError
        keep, detail = self.s.retention_days, self.s.detail_days
        removed = hours = 0
        try:
            if keep > 0:
                removed = self.ledger.prune(now - keep * 86400)
            if detail > 0 and (keep <= 0 or detail < keep):
                deadline = time.monotonic() + self.summary_budget()
                while True:
                    n = self.ledger.summarise(now - detail * 86400, max_hours=1)
                    hours += n
                    if not n or time.monotonic() >= deadline:
                        break
            got = None
            if removed or hours or getattr(self.loop, "reclaim_more", False):
                got = self.ledger.reclaim()
                self.loop.reclaim_more = bool(got.get("free_pages")) and got.get("shrinks", True)
        except LedgerError as exc:
            self.loop.log.warning("ledger retention not applied: %s", exc.one_line())
            return
        if removed:
            self.loop.log.info("ledger retention: %d pass(es) and hour(s) older than %g days "
                               "removed", removed, keep)
        if hours:
            self.loop.log.info("ledger retention: %d hour(s) older than %g days summarised",
                               hours, detail)
        if (got is not None and not got.get("shrinks", True)
                and not getattr(self.loop, "warned_vacuum", False)):
            self.loop.warned_vacuum = True
            self.loop.log.info(
                "ledger %s: made before negotiator-ext summarised passes, its file keeps its "
                "size (the space freed is reused); `negotiator-ext ledger vacuum` once lets it "
                "shrink (logged once)", self.ledger.source)

    def summary_budget(self) -> float:
        """Seconds a pass may spend summarising hours: a sixth of the interval, 1 to 10 s."""
        return max(1.0, min(10.0, self.s.interval / 6))


def _with_matchlog_counts(cycles: list[RealCycle], entries: Sequence[MatchEntry]
                          ) -> list[RealCycle]:
    """Cycles whose match count is unknown (the NegotiatorLog's, which the ad does not
    list) with the MatchLog's count in their [start, end]."""
    out = []
    for c in cycles:
        if c.matches is None and c.end is not None:
            c = dataclasses.replace(c, matches=sum(
                1 for e in entries if e.time is not None and c.time <= e.time <= c.end))
        out.append(c)
    return out


def unseen_cycles_warning(config) -> str | None:
    """Why the negotiator ad alone cannot show every real cycle, naming the knobs that fix
    it; None when it can. The ad reaches the collector every NEGOTIATOR_UPDATE_INTERVAL
    (unless NEGOTIATOR_UPDATE_AFTER_CYCLE) and lists the last
    NEGOTIATION_CYCLE_STATS_LENGTH cycles, which start every NEGOTIATOR_INTERVAL at most."""
    if config.negotiator_update_after_cycle:
        return None
    every, keep = config.negotiator_update_interval, config.cycle_stats_length
    span = config.negotiator_interval * keep
    if every <= span:
        return None
    return (f"the negotiator ad reaches the collector every {every} s "
            f"(NEGOTIATOR_UPDATE_INTERVAL) and keeps {keep} cycles "
            f"(NEGOTIATION_CYCLE_STATS_LENGTH) of up to one every "
            f"{config.negotiator_interval} s (NEGOTIATOR_INTERVAL): real cycles between two "
            "updates are not seen, so not compared; on the central manager set "
            "NEGOTIATOR_EXT_NEGOTIATOR_LOG (and NEGOTIATOR_EXT_MATCHLOG), or set "
            "NEGOTIATOR_UPDATE_AFTER_CYCLE = True for the negotiator")


def job_waits(result) -> list[float | None]:
    """How long each of the cycle's matched jobs had been idle when matched: from its
    EnteredCurrentStatus (else QDate), read from the queue the cycle was offered (the
    job of that submitter at that schedd: job ids repeat across schedds). None when the
    job ad does not give it as a number."""
    rows: dict[tuple, dict[str, Any]] = {}      # (submitter, schedd) -> job id -> row
    out: list[float | None] = []
    for m in result.matches:
        key = (m.submitter, m.schedd)
        if key not in rows:
            queue = result.queues.get(key)
            rows[key] = {e[0]: e[3] for e in (queue.jobs if queue is not None else ())}
        d = dict(rows[key].get(m.assigned_job) or ())
        since = d.get("enteredcurrentstatus") or d.get("qdate")
        try:
            out.append(max(0.0, float(result.time) - float(since)))
        except (TypeError, ValueError):           # not a literal number: unknown
            out.append(None)
    return out


def _with_real_counts(subs, groups, comparison):
    """The compared real cycle's matches per submitter and group, on this pass's records."""
    ps, pg = comparison.per_submitter, comparison.per_group
    subs = [dataclasses.replace(o, real_matches=ps[o.name].get("real"))
            if o.name in ps and not o.is_group else o for o in subs]
    groups = [dataclasses.replace(g, real_matches=pg[g.name].get("real_matches"))
              if g.name in pg else g for g in groups]
    return subs, groups




def replay_passes(loop: ShadowLoop, directories: Sequence[Path]) -> Iterator[PassRecord]:
    """Replay recorded snapshot directories as passes, in capture-time order, each pass
    yielded once recorded. A snapshot refused (an InputError) ends the replay there: the
    passes before it stay recorded."""
    from .adapters.snapshot import read_meta
    dirs = sorted((Path(d) for d in directories),
                  key=lambda d: int(read_meta(d).get("captured_at") or 0))
    for d in dirs:
        yield from loop.run_passes(replay=d)
