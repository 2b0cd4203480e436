"""A sweep's forecasts as jobs on an HTCondor pool (`sweep --engine htcondor`).

One cluster, one job per config, submitted through `htcondor2` (`Submit` with itemdata:
each job's `run` is its run directory, its initial directory). A job transfers in
`DIR/inputs` (the snapshot, the history, the config files) and its `spec.json`, runs
`python -m negotiator_ext.sim.sweep spec.json inputs result.json` with this Python, or
`--python` (a Python of the same version), its PYTHONPATH this one's package and
site-packages (the execute nodes need them at the same paths: a venv on a shared
filesystem, see docs/forecasts.md), and transfers back `result.json`. The jobs are followed
through their event log (`DIR/sweep.log`) with a progress line; a job that is held is
named with its hold reason and removed, one that exits non-zero with the last line of
its stderr, and the sweep reports the others.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from ..errors import InputError


def submit_description(directory: Path, runs: list[Path], python: str | None = None,
                       memory_mb: int = 1024) -> dict:
    """The submit description (one job per run; its itemdata: `run`)."""
    return {
        "universe": "vanilla",
        "executable": python or sys.executable,
        "transfer_executable": "false",
        "arguments": "-m negotiator_ext.sim.sweep spec.json inputs result.json",
        "initialdir": "$(run)",
        "should_transfer_files": "YES",
        "when_to_transfer_output": "ON_EXIT",
        "transfer_input_files": f"{(directory / 'inputs').resolve()},spec.json",
        "transfer_output_files": "result.json",
        "output": "job.out",
        "error": "job.err",
        "stream_error": "true",          # its stderr reaches the run directory even when
        "stream_output": "true",         # its result does not
        "log": str((directory / "sweep.log").resolve()),
        "request_cpus": "1",
        "request_memory": str(memory_mb),
        "request_disk": "1048576",
        "batch_name": f"negotiator-ext-sweep-{directory.name}",
        # the job's Python finds the package and its dependencies where this one does
        "environment": f'"PYTHONPATH={job_pythonpath()} PYTHONDONTWRITEBYTECODE=1"',
    }


def job_pythonpath() -> str:
    """Where this Python finds the package and what it needs (the package's root, the
    directories it imports htcondor2 and classad2 from): a job's Python of the same
    version finds them there."""
    import classad2
    import htcondor2
    paths = [str(Path(__file__).resolve().parent.parent.parent)]
    paths += [str(Path(m.__file__).resolve().parent.parent) for m in (htcondor2, classad2)]
    return ":".join(dict.fromkeys(paths))


def run_htcondor(directory: Path, runs: list[Path], *, pool: str | None = None,
                 schedd_name: str | None = None, progress=None,
                 timeout: float | None = None,
                 python: str | None = None) -> tuple[dict[Path, str], dict]:
    """Submits the runs, follows them to their end; ({run: error} of the failed, what it
    took: submitted, cluster, seconds)."""
    import htcondor2
    schedd = _schedd(htcondor2, pool, schedd_name)
    log = directory / "sweep.log"
    log.unlink(missing_ok=True)
    sub = htcondor2.Submit(submit_description(directory, runs, python))
    t0 = time.monotonic()
    try:
        result = schedd.submit(sub, itemdata=iter([{"run": str(d.resolve())} for d in runs]))
    except Exception as exc:              # noqa: BLE001 - the schedd's refusal, in its words
        raise InputError("--engine htcondor", f"the schedd refused the jobs: {exc}") from None
    cluster = result.cluster()
    by_proc = {i: d for i, d in enumerate(runs)}
    done: dict[int, str | None] = {}
    events = htcondor2.JobEventLog(str(log))
    T = htcondor2.JobEventType
    while len(done) < len(runs):
        if timeout is not None and time.monotonic() - t0 > timeout:
            schedd.act(htcondor2.JobAction.Remove, f"ClusterId == {cluster}")
            for p in by_proc:
                done.setdefault(p, f"not finished within {timeout:g} s (removed)")
            break
        for ev in events.events(stop_after=1):
            if ev.cluster != cluster or ev.proc in done:
                continue
            if ev.type == T.JOB_TERMINATED:
                code = ev.get("ReturnValue")
                # a forecast that failed sends its reason back in result.json
                done[ev.proc] = None if code in (0, 2) else _stderr_reason(by_proc[ev.proc],
                                                                          code)
            elif ev.type == T.JOB_HELD:
                reason = ev.get("HoldReason") or "held"
                said = _last_line(by_proc[ev.proc] / "job.err")
                done[ev.proc] = f"held: {reason}" + (f" (its stderr: {said})" if said else "")
                schedd.act(htcondor2.JobAction.Remove, f"{cluster}.{ev.proc}")
            elif ev.type == T.JOB_ABORTED:
                done[ev.proc] = "removed from the queue"
            if progress:
                held = sum(1 for v in done.values() if v)
                progress(f"{len(done)} of {len(runs)} forecast jobs done ({held} failed)")
    errors = {by_proc[p]: why for p, why in done.items() if why}
    return errors, {"submitted": len(runs), "cluster": cluster,
                    "seconds": round(time.monotonic() - t0, 1)}


def _stderr_reason(run: Path, code) -> str:
    last = _last_line(run / "job.err")
    return f"exited with status {code}" + (f": {last}" if last else "")


def _last_line(path: Path) -> str:
    if not path.is_file():
        return ""
    lines = [ln for ln in path.read_text(errors="replace").splitlines() if ln.strip()]
    return lines[-1].strip()[:300] if lines else ""


def _schedd(htcondor2, pool: str | None, name: str | None):
    if pool is None and name is None:
        return htcondor2.Schedd()
    coll = htcondor2.Collector(pool) if pool else htcondor2.Collector()
    try:
        ad = coll.locate(htcondor2.DaemonType.Schedd, name) if name else \
            coll.locate(htcondor2.DaemonType.Schedd)
    except Exception as exc:              # noqa: BLE001
        raise InputError("--pool", f"no schedd found ({exc})") from None
    return htcondor2.Schedd(ad)
