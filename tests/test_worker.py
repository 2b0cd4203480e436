"""The shadow loop's worker process (adapters/worker.py): answers come back from another
process, what the function raised is raised here, a worker that dies or is given up is
started again, and nothing outside the package is run."""

from __future__ import annotations

import os
import signal

import pytest

from negotiator_ext.adapters.worker import Worker, WorkerGone

# the worker's own pid, read in the worker (its module's `os`)
PID = "negotiator_ext.adapters.worker:os.getpid"
PROJECTION = "negotiator_ext.adapters.job_projection:_valid_projection"


@pytest.fixture
def worker():
    w = Worker(preload=("negotiator_ext.adapters.live",))
    yield w
    w.close()


def test_an_answer_comes_from_another_process(worker):
    worker.start()
    pid = worker.submit(PID).result()
    assert pid != os.getpid()
    # the same process answers again (started once)
    assert worker.submit(PID).result() == pid
    assert worker.submit(PROJECTION, ["Owner", "Cpus"]).result() == ["Owner", "Cpus"]
    assert worker.submit(PROJECTION, ["not a name!"]).result() is None
    assert worker.started == 1


def test_what_the_function_raised_is_raised_here(worker):
    with pytest.raises(ValueError, match="not a function of this package"):
        worker.submit("negotiator_ext.adapters.worker:_call", "os:getpid", ()).result()
    with pytest.raises(AttributeError):
        worker.submit("negotiator_ext.adapters.worker:no_such_function").result()
    # the worker goes on answering
    assert isinstance(worker.submit(PID).result(), int)
    assert worker.started == 1


def test_only_the_packages_functions_are_sent(worker):
    for target in ("os:getpid", "subprocess:run", "negotiator_ext_evil:x", "negotiator_ext.x"):
        with pytest.raises(ValueError):
            worker.submit(target)
    assert worker.started == 0


def test_a_worker_that_died_is_started_again(worker):
    pid = worker.submit(PID).result()
    os.kill(pid, signal.SIGSTOP)        # alive, taking the request, never answering it
    pending = worker.submit(PID)
    os.kill(pid, signal.SIGKILL)
    with pytest.raises(WorkerGone, match="without an answer"):
        pending.result()
    again = worker.submit(PID).result()
    assert again != pid and worker.started == 2
    # one that died between two requests is started again at the next one
    worker._proc.kill()
    worker._proc.wait()
    assert worker.submit(PID).result() not in (pid, again)
    assert worker.started == 3


def test_a_cancelled_answer_ends_the_worker(worker):
    pid = worker.submit(PID).result()
    pending = worker.submit(PID)
    pending.cancel()
    with pytest.raises(WorkerGone):
        pending.result()
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    # an answer not taken is given up by the next request
    first = worker.submit(PID)
    second = worker.submit(PID)
    with pytest.raises(WorkerGone):
        first.result()
    assert second.result() not in (pid, None)


def test_the_worker_ends_with_its_parents_pipe(worker):
    pid = worker.submit(PID).result()
    proc = worker._proc
    proc.stdin.close()                              # what the parent's exit does
    assert proc.wait(timeout=30) == 0
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def _rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        return next(int(ln.split()[1]) for ln in f if ln.startswith("VmRSS:"))


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="needs /proc")
def test_the_worker_gives_back_what_an_answer_used(worker):
    # between passes the worker holds nothing of its last answer (job_delta: the loop
    # keeps the jobs' digests): the loop's cycle, its own peak, runs then (at 100,000
    # slots, beside 3.8 GiB)
    pid = worker.submit(PID).result()
    before = _rss_kib(pid)
    lines = [f"Attr{i} = {i}" for i in range(2_000_000)]   # about 200 MB in the worker
    assert len(worker.submit("negotiator_ext.adapters.job_delta:digest", lines).result()) == 16
    assert _rss_kib(pid) < before + 60 * 1024


def test_a_worn_worker_is_renewed_between_requests():
    # the bindings keep a copy of every query's projection (adapters/worker.py): a
    # worker process answers `requests_per_process` requests, and `renew` (the loop's,
    # between passes) starts the next one only then, never with an answer owed
    w = Worker(preload=("negotiator_ext.adapters.live",), requests_per_process=3)
    try:
        first = w.submit(PID).result()
        assert not w.renew()                        # one request of three
        w.submit(PID).result()
        pending = w.submit(PID)
        assert not w.renew()                        # an answer owed: kept
        assert pending.result() == first
        assert w.renew() and w.started == 2 and w.asked == 0
        with pytest.raises(ProcessLookupError):
            os.kill(first, 0)
        second = w.submit(PID).result()
        assert second not in (first, None) and w.started == 2
        assert not w.renew()
    finally:
        w.close()
