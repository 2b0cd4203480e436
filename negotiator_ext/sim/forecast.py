"""`negotiator-ext forecast`: the pool's own workload replayed in a closed loop under the
config being considered.

The pipeline, in order:

1. the config: the snapshot's own (or `--config`), with `--knob NAME=VALUE` lines after
   it, read through HTCondor's config system; a knob HTCondor does not know is refused;
2. the snapshot (`pool.load_pool`): its slots (each its own shape, dynamic slots folded
   back into their partitionable slot), its accountant, the schedds' limits;
3. the workload: the history files (`sim.history`), the snapshot's queue and claims
   (`sim.snapshot_queue`), and the jobs the history adds after the start (or, with
   `--repeat-history HOURS`, the arrivals of the history's last HOURS shifted to start
   at the snapshot);
4. the engine (`sim.engine`) with what a real pool's schedds and startds do: claim reuse
   under CLAIM_WORKLIFE, partitionable leftovers, the negotiator's cadence, the schedds'
   per-user limits;
5. the outcome (`core.forecast`): per submitter and group, a timeline, every job.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
import tempfile
import time as _time
from dataclasses import dataclass, field
from pathlib import Path

from ..core import classads
from ..core.forecast import JobRun, Outcome, outcome_of
from ..errors import InputError
from ..scenario import Scenario, slot_shapes
from .engine import EngineOptions, NegotiatorCadence, Simulation, config_with_knobs
from .history import HistoryArrivals, JobReader, SharedHistory, read_history
from .snapshot_queue import SnapshotQueue


@dataclass
class ForecastSpec:
    snapshot: Path
    history: tuple[Path, ...]
    config: Path | None = None              # else the snapshot's own
    knobs: dict = field(default_factory=dict)
    until: int | None = None                # an epoch; else start + hours
    hours: float = 24.0
    interval: int | None = None             # fixed seconds between cycles; else the cadence
    default_runtime: float | None = None    # else the history's median run
    repeat_history: float | None = None     # hours of history projected forward
    bucket: int = 300
    name: str | None = None


@dataclass
class ForecastRun:
    spec: ForecastSpec
    start: int
    end: int
    config_source: str
    outcome: Outcome
    cycles: int
    matches: int
    reused: int
    by_leftovers: int
    claims_failed: int
    preemptions: int
    default_runtime: float
    counts: dict
    assumptions: list[str]
    warnings: list[str]
    wall: float
    # cycles run a second time with every idle job offered (Simulation.offer_limits)
    cycles_rerun: int = 0


def check_knobs(knobs: dict, where: str = "--knob") -> None:
    """A knob HTCondor's param table does not know (nor a group's or concurrency
    limit's own knob, nor one of ours) is refused: a typo would silently change
    nothing."""
    import htcondor2
    from ..core.config import _SCALAR_KNOBS
    table = htcondor2.param
    ours = {knob for _, knob, _ in _SCALAR_KNOBS} | _LIST_KNOBS
    for name in knobs:
        upper = name.upper()
        if upper in ours or upper.startswith(_FAMILY_PREFIXES) or upper.endswith("_LIMIT"):
            continue
        try:
            known = name in table
        except Exception:         # noqa: BLE001 - the bindings' own failure: let it through
            known = True
        if not known:
            raise InputError(where, f"{name} is not an HTCondor knob (not in HTCondor's "
                             "param table, nor a group's or concurrency limit's knob)")


_FAMILY_PREFIXES = ("GROUP_QUOTA_", "GROUP_ACCEPT_SURPLUS_", "GROUP_AUTOREGROUP_",
                    "GROUP_PRIO_FACTOR_", "NEGOTIATOR_EXT_", "CONCURRENCY_LIMIT_DEFAULT_")
# knobs the negotiator reads that have no default in HTCondor's param table
_LIST_KNOBS = frozenset({"GROUP_NAMES", "NEGOTIATOR_MATCH_EXPRS",
                         "GROUP_DYNAMIC_MACH_CONSTRAINT"})


def history_schedd(snapshot) -> str | None:
    """The schedd of a history job without GlobalJobId: the snapshot's only schedd (by
    its submitters and its job files), else none."""
    schedds = {d.get("ScheddName") for d in (snapshot.submitters or ())
               if d.get("ScheddName")}
    files = set((snapshot.meta.get("schedd_files") or {}).values())
    known = schedds | files
    return next(iter(known)) if len(known) == 1 else None


def run_forecast(spec: ForecastSpec, ledger=None, progress=None,
                 shared: SharedHistory | None = None) -> ForecastRun:
    """`shared`: the history as read by the process this one was forked from (a sweep's
    forecasts, `sim.sweep.run_local`); this process then owns its copy."""
    from ..pool import load_pool
    wall0 = _time.perf_counter()
    snap_dir = Path(spec.snapshot)
    base = spec.config if spec.config is not None else (
        snap_dir / "config" if (snap_dir / "config").is_file() else None)
    check_knobs(spec.knobs)
    with tempfile.TemporaryDirectory(prefix="negotiator-ext-forecast-") as tmp:
        merged = Path(config_with_knobs(base, dict(spec.knobs), tmp))
        try:
            pool = load_pool(snap_dir, merged)
        except InputError as exc:
            if exc.source != str(merged):
                raise
            # a line of the config given, or one of the knobs after it
            lines = len(base.read_text(errors="replace").splitlines()) if base else 0
            mine = exc.line is not None and exc.line > lines
            raise InputError("--knob" if mine or base is None else str(base), exc.message,
                             line=None if mine else exc.line) from None
        config = pool.config
        start = int(pool.snapshot.meta.get("captured_at") or 0)
        if start <= 0:
            raise InputError(str(snap_dir / "meta.json"), "no captured_at: when was the "
                             "snapshot taken?")
        end = int(spec.until) if spec.until is not None else int(start + spec.hours * 3600)
        if end <= start:
            raise InputError("--until", f"{end} is not after the snapshot's time {start}")
        if shared is not None:
            reader, history = shared.read(spec.history, history_schedd(pool.snapshot))
        else:
            reader = JobReader()
            history = read_history(spec.history, reader, history_schedd(pool.snapshot))
        runs = sorted(history.completed_runtimes())
        default_runtime = (spec.default_runtime if spec.default_runtime is not None
                           else (statistics.median(runs) if runs else 3600.0))
        queue = SnapshotQueue(pool.snapshot, reader, history, default_runtime, start)
        assumptions = []
        if spec.repeat_history:
            span = spec.repeat_history * 3600
            last = max((j.qdate for j in history.jobs.values()), default=start)
            window = (last - span, last + 1)
            shift = int(start - window[0])
            arrivals = [HistoryArrivals(history, start, end, default_runtime,
                                        frozenset(queue.queued), shift=shift + k * int(span),
                                        window=window)
                        for k in range(max(1, math.ceil((end - start) / span)))]
            assumptions.append(
                f"--repeat-history {spec.repeat_history:g}: the arrivals of the history's "
                f"last {spec.repeat_history:g} h, shifted to start at the snapshot and "
                "repeated until the end, each job with its recorded run length (the "
                "next days look like the last ones)")
        else:
            arrivals = [HistoryArrivals(history, start, end, default_runtime,
                                        frozenset(queue.queued))]
        shapes = slot_shapes(pool.snapshot.slots)
        sc = Scenario(name=spec.name or snap_dir.name, path=snap_dir, span=end - start,
                      interval=spec.interval or config.negotiator_interval, start=start,
                      config_path=merged, slots=tuple(shapes))
        cadence = None if spec.interval else NegotiatorCadence.of_config(config)
        opts = EngineOptions(
            sources=(queue, *arrivals), cadence=cadence,
            claim_worklife=float(config.claim_worklife), model_startd=True,
            leftovers=config.claim_partitionable_leftovers, record_runs=True,
            accountant=pool.accountant, config=config, schedd_default=pool.schedd_default,
            schedd_limits=dict(pool.schedd_limits),
            pool_name=f"forecast:{spec.name or snap_dir.name}",
            last_cycle=last_cycle(pool.snapshot, start) if cadence is not None else None)
        sim = Simulation(sc, ledger, progress=progress, options=opts)
        # the snapshot's ads were read into the simulated pool (SnapshotQueue.setup):
        # let them go before the run, which needs as much memory again
        pool_warnings = list(pool.warnings)
        queue.snapshot = None
        del pool
        report = sim.run()
    jobs = list(queue.jobs) + [j for a in arrivals for j in a.jobs]
    outcome = outcome_of(_job_runs(sim, jobs, end), start, end, spec.bucket,
                         quotas=sim.last_quotas, pool_weight=sim.last_pool_weight)
    counts = dataclasses.asdict(queue.counts)
    for a in arrivals:
        for k, v in a.counts.items():
            counts[k] = counts.get(k, 0) + v
    counts["history_jobs"] = len(history.jobs)
    counts["history_duplicates"] = history.duplicates
    counts["removed_in_forecast"] = sim.pool.removed
    warnings = pool_warnings + list(sim.warnings)
    if counts["no_history"] or counts.get("no_runtime"):
        assumptions.append(
            f"{counts['no_history'] + counts.get('no_runtime', 0)} job(s) have no finished "
            f"run in the history: each runs {default_runtime:g} s (--default-runtime"
            f"{'' if spec.default_runtime is not None else ', the history median'}), "
            "or one still running in condor_q output at least as long as it had by then")
    return ForecastRun(
        spec=spec, start=start, end=end, config_source=str(base or "HTCondor's defaults")
        + "".join(f" + {k}={v}" for k, v in spec.knobs.items()),
        outcome=outcome, cycles=report.passes, matches=report.matches,
        reused=sim.pool.reused, by_leftovers=sim.pool.by_leftovers,
        claims_failed=sim.claims_failed, preemptions=report.preemptions,
        default_runtime=default_runtime, counts=counts, assumptions=assumptions,
        warnings=warnings, wall=_time.perf_counter() - wall0,
        cycles_rerun=sim.offer_retries)


def last_cycle(snapshot, start: int) -> tuple[float, float] | None:
    """When the negotiator's last cycle before the snapshot began and ended
    (LastNegotiationCycleTime0, LastNegotiationCycleEnd0 of its ad), if the snapshot has
    its ad and the cycle is not after the start; else None (the first cycle at the
    start). A negotiator ad that cannot be read is as none: the forecast does not need
    it."""
    try:
        ads = snapshot.negotiator_ads() or ()
    except InputError:
        return None
    got = []
    for ad in ads:
        began, ended = (ad.get("LastNegotiationCycleTime0"), ad.get("LastNegotiationCycleEnd0"))
        if (classads.is_number(began) and classads.is_number(ended)
                and 0 < began <= ended <= start):
            got.append((float(began), float(ended)))
    return max(got, key=lambda c: c[1]) if got else None


def _job_runs(sim: Simulation, jobs: list, end: int) -> list[JobRun]:
    """Every job's runs as the simulation had them (a run still going at the end is cut
    there)."""
    runs: dict[int, list] = {}
    for job, began, stopped, weight, preempted in sim.pool.runs:
        runs.setdefault(id(job), []).append((began, stopped, weight, preempted))
    out = []
    for job in jobs:
        mine = runs.get(id(job), [])
        if job.status == 2:
            mine.append((job.started, end, job.weight, False))
        out.append(JobRun(job=job.id, schedd=job.cls.schedd, submitter=job.cls.submitter,
                          group=job.cls.group or "<none>", queued=job.qdate,
                          start=job.first_start, end=_end_of(job, mine),
                          weight=job.weight, preempted=job.preemptions,
                          runs=tuple(mine), state=_state(job), left=job.left))
    return out


def _end_of(job, runs) -> float | None:
    return runs[-1][1] if job.status in (3, 4) and runs else None


def _state(job) -> str:
    return {1: "idle", 2: "running", 3: "completed", 4: "removed"}.get(job.status, "?")
