"""`negotiator-ext sweep`: many forecasts of one start and workload, one per config, run
side by side and joined into one comparison.

The pipeline, in order:

1. the configs (`sweep_configs`): the snapshot's own (the baseline), then each `--config`
   file, or every combination of the `--vary KNOB=V1,V2,...` values set on top of the
   snapshot's config; every knob is checked before anything runs;
2. the inputs copied into `DIR/inputs/` (the snapshot, the history files, the config
   files), each forecast a spec there (`DIR/runs/<n>/spec.json`, paths relative to
   `DIR/inputs`), so that a forecast runs the same on this machine or as a job;
3. the forecasts, by an engine: `local` (a process pool on this machine's cores) or
   `htcondor` (one job each on the pool, through `htcondor2`: `sim.sweep_htcondor`);
   each writes `DIR/runs/<n>/result.json` (`views.forecast.forecast_document`);
4. the comparison (`views.sweep`): `DIR/report.json`, `DIR/index.html`, CSV tables.

A forecast that failed is named with its reason, and the others are reported.
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import InputError
from .forecast import ForecastSpec, check_knobs


@dataclass
class SweepConfig:
    label: str                         # "baseline", a file's name, or the knobs set
    config: str | None                 # a config file name under inputs/ (None: the snapshot's)
    knobs: dict = field(default_factory=dict)


@dataclass
class SweepResult:
    config: SweepConfig
    doc: dict | None                   # the forecast's document
    error: str | None = None           # why it has none


def parse_vary(items: list[str]) -> dict[str, list[str]]:
    """`--vary KNOB=V1,V2,...` (repeatable) as {knob: [values]}."""
    out: dict[str, list[str]] = {}
    for item in items:
        name, eq, values = item.partition("=")
        name = name.strip()
        vals = [v.strip() for v in values.split(",") if v.strip()]
        if not eq or not name or not vals:
            raise InputError("--vary", f"{item!r} is not KNOB=V1,V2,...")
        out[name] = vals
    check_knobs(dict.fromkeys(out, ""), "--vary")
    return out


def sweep_configs(configs: list[Path], vary: dict[str, list[str]]) -> list[SweepConfig]:
    out = [SweepConfig("baseline (the snapshot's config)", None)]
    for i, path in enumerate(configs):
        if not Path(path).is_file():
            raise InputError(str(path), "no such config file")
        out.append(SweepConfig(str(path), f"config-{i}-{Path(path).name}"))
    names = list(vary)
    for combo in itertools.product(*(vary[n] for n in names)):
        knobs = dict(zip(names, combo))
        out.append(SweepConfig(", ".join(f"{k}={v}" for k, v in knobs.items()), None, knobs))
    return out


def prepare(directory: Path, snapshot: Path, history: list[Path], configs: list[Path],
            items: list[SweepConfig], common: dict) -> list[Path]:
    """DIR/inputs with the snapshot, history and config files; a spec per config in
    DIR/runs/<n>/spec.json; the run directories."""
    inputs = directory / "inputs"
    if inputs.exists():
        shutil.rmtree(inputs)
    inputs.mkdir(parents=True)
    if not (Path(snapshot) / "meta.json").is_file() and not (Path(snapshot) / "slots.ads").is_file():
        raise InputError(str(snapshot), "not a snapshot directory")
    shutil.copytree(snapshot, inputs / "snapshot", symlinks=False)
    hist = []
    for i, h in enumerate(history):
        if not Path(h).is_file():
            raise InputError(str(h), "no such history file")
        name = f"history-{i}-{Path(h).name}"
        shutil.copyfile(h, inputs / name)
        hist.append(name)
    for i, c in enumerate(configs):
        shutil.copyfile(c, inputs / f"config-{i}-{Path(c).name}")
    runs = []
    for n, item in enumerate(items):
        d = directory / "runs" / f"{n:03d}"
        d.mkdir(parents=True, exist_ok=True)
        (d / "result.json").unlink(missing_ok=True)
        spec = {"label": item.label, "snapshot": "snapshot", "history": hist,
                "config": item.config, "knobs": item.knobs, **common}
        (d / "spec.json").write_text(json.dumps(spec, indent=1))
        runs.append(d)
    return runs


def spec_of(doc: dict, inputs: Path) -> ForecastSpec:
    """A run's spec.json as a ForecastSpec, its paths under `inputs`."""
    return ForecastSpec(
        snapshot=inputs / doc["snapshot"], history=tuple(inputs / h for h in doc["history"]),
        config=inputs / doc["config"] if doc.get("config") else None,
        knobs=dict(doc.get("knobs") or {}), until=doc.get("until"),
        hours=float(doc.get("hours") or 24.0), interval=doc.get("interval"),
        default_runtime=doc.get("default_runtime"), repeat_history=doc.get("repeat_history"),
        bucket=int(doc.get("bucket") or 300), name=doc.get("label"))


def run_one(spec_path: str | Path, inputs: str | Path, out_path: str | Path,
            shared=None) -> None:
    """One forecast: its spec in, its document out (written whole or not at all).
    `shared` (SharedHistory): the history as the process this one was forked from read
    it."""
    from ..views.forecast import forecast_document
    from .forecast import run_forecast
    doc = json.loads(Path(spec_path).read_text())
    run = run_forecast(spec_of(doc, Path(inputs)), shared=shared)
    result = forecast_document(run)
    result["label"] = doc["label"]
    tmp = Path(str(out_path) + ".tmp")
    tmp.write_text(json.dumps(result))
    os.replace(tmp, out_path)


def _run_local(args: tuple, shared=None) -> str | None:
    spec, inputs, out = args
    try:
        run_one(spec, inputs, out, shared)
        return None
    except InputError as exc:
        return exc.one_line()
    except Exception as exc:              # noqa: BLE001 - reported with the config it ran
        return f"{type(exc).__name__}: {exc}"


def run_local(directory: Path, runs: list[Path], workers: int | None = None,
              progress=None) -> dict[Path, str]:
    """Every run on this machine's cores; {run: error} of the failed.

    Where processes fork, the history is read once, here, and each forecast runs in a
    child forked for it alone, which takes the jobs as read (`SharedHistory`) and works
    on its own copy; at most `workers` at once. Elsewhere, a process pool, each
    forecast reading its own. A stop (SIGTERM, or ^C) ends the children at once."""
    workers = workers or max(1, len(os.sched_getaffinity(0)))
    jobs = [(d / "spec.json", directory / "inputs", d / "result.json") for d in runs]
    if not hasattr(os, "fork"):
        return _run_pool(runs, jobs, workers, progress)
    return _run_forked(runs, jobs, workers, progress, _shared_history(jobs))


def _run_pool(runs, jobs, workers, progress) -> dict[Path, str]:
    errors: dict[Path, str] = {}
    with ProcessPoolExecutor(max_workers=min(workers, len(jobs))) as pool:
        for n, (d, err) in enumerate(zip(runs, pool.map(_run_local, jobs)), 1):
            if err:
                errors[d] = err
            if progress:
                progress(f"{n} of {len(runs)} forecasts done")
    return errors


def _shared_history(jobs: list[tuple]):
    """The history of the first run, read now for every run that reads the same (None
    when it cannot be read: each run then reads it, and names what is wrong)."""
    from ..adapters.snapshot import load_snapshot
    from ..pool import for_negotiator
    from .forecast import history_schedd
    from .history import SharedHistory
    if not jobs:
        return None
    try:
        spec = spec_of(json.loads(Path(jobs[0][0]).read_text()), Path(jobs[0][1]))
        snap = for_negotiator(load_snapshot(spec.snapshot, jobs=False, slot_ads=False), None)
        shared = SharedHistory()
        shared.read(spec.history, history_schedd(snap))
    except Exception:                     # noqa: BLE001 - the runs name it themselves
        return None
    return shared


def _run_forked(runs, jobs, workers, progress, shared) -> dict[Path, str]:
    import gc
    import multiprocessing
    import signal
    from multiprocessing.connection import wait
    ctx = multiprocessing.get_context("fork")
    errors: dict[Path, str] = {}
    todo = list(zip(runs, jobs))
    running: dict[int, tuple] = {}          # sentinel -> (process, run)
    done = 0

    def stop(*_):
        raise KeyboardInterrupt
    old_term = (signal.signal(signal.SIGTERM, stop)
                if _main_thread() else None)
    # what the children inherit is left where it is: no collection of theirs walks (and
    # so copies) it
    gc.freeze()
    try:
        while todo or running:
            while todo and len(running) < workers:
                d, job = todo.pop(0)
                proc = ctx.Process(target=_forked, args=(job, shared), daemon=True)
                proc.start()
                running[proc.sentinel] = (proc, d)
            for sentinel in wait(list(running)):
                proc, d = running.pop(sentinel)
                proc.join()
                err = _forked_error(d / "result.json", proc.exitcode)
                if err:
                    errors[d] = err
                done += 1
                if progress:
                    progress(f"{done} of {len(runs)} forecasts done")
    finally:
        for proc, _ in running.values():
            proc.kill()
        for proc, _ in running.values():
            proc.join()
        gc.unfreeze()
        if old_term is not None:
            signal.signal(signal.SIGTERM, old_term)
    return errors


def _main_thread() -> bool:
    import threading
    return threading.current_thread() is threading.main_thread()


def _forked(job: tuple, shared) -> None:
    """A forked child's forecast: its reason written as its result when it fails."""
    _child_signals()
    error = _run_local(job, shared)
    if error:
        Path(job[2]).write_text(json.dumps({"error": error}))
        os._exit(2)
    os._exit(0)


def _child_signals() -> None:
    import signal
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_IGN)     # the parent's stop ends it


def _forked_error(out: Path, exitcode: int | None) -> str | None:
    if exitcode == 0:
        return None
    try:
        doc = json.loads(out.read_text())
        if isinstance(doc, dict) and doc.get("error"):
            return str(doc["error"])
    except (OSError, ValueError):
        pass
    if exitcode is not None and exitcode < 0:
        return f"the forecast's process was killed by signal {-exitcode}"
    return f"the forecast's process ended with status {exitcode} and no result"


def collect(runs: list[Path], items: list[SweepConfig],
            errors: dict[Path, str]) -> list[SweepResult]:
    out = []
    for d, item in zip(runs, items):
        path = d / "result.json"
        doc = json.loads(path.read_text()) if path.is_file() else None
        if doc is not None and "error" not in doc:
            out.append(SweepResult(item, doc))
        elif doc is not None:
            out.append(SweepResult(item, None, doc["error"]))
        else:
            out.append(SweepResult(item, None, errors.get(d) or "no result"))
    return out


def main(argv: list[str]) -> int:
    """A sweep job's entry point: `python -m negotiator_ext.sim.sweep SPEC INPUTS OUT`.
    A forecast that fails writes its reason as OUT ({"error": ...}), so that it travels
    back with the job, and exits 2."""
    import sys
    error = _run_local(tuple(argv))
    if error:
        sys.stderr.write(error + "\n")
        Path(argv[2]).write_text(json.dumps({"error": error}))
        return 2
    return 0


if __name__ == "__main__":
    import sys
    sys.exit(main(sys.argv[1:4]))
