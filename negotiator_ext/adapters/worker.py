"""A child process that stays: a shadow loop's schedd queries, run beside its slot steps.

A `shadow --once` pass forks its schedd child (`beside.Beside`) while it is still small.
A loop cannot: its process keeps the last pass's slot ads (hundreds of MiB at 10,000
slots), and a forked child shares every page of them with it. For as long as the child
lives, each page the loop writes to (Python writes an object's reference count merely to
read it) is copied first, and the pass pays that copying on the very steps the child was
meant to run beside. A daemon's loop runs in a thread besides, where forking is not safe
at all (`Beside` then runs the work in the process, one step after the other).

So a loop starts one `Worker`: a new interpreter (`python -m
negotiator_ext.adapters.worker`), that shares no memory with the loop, with the loop's
environment (CONDOR_CONFIG) and HTCondor subsystem, started once and asked once a pass.
`submit(target, *args)` sends it "module:function" and the arguments (pickled, on its
standard input) and returns at once; `.result()` waits for the answer (pickled back on
its standard output) and returns the value or raises what the function raised, as
`Beside` does. A worker that cannot be started, dies, or answers what cannot be read
raises `WorkerGone` from `.result()` (the caller does the work itself) and is started
again at the next `submit`; `.cancel()` of an answer no longer wanted ends the worker
(the answer may still be on its way), so the next `submit` starts a new one.

The worker only runs functions of this package (a target outside `negotiator_ext.` is
refused), and only for the process that started it: the pipes are its own.

A worker process answers `REQUESTS_PER_PROCESS` requests, then `renew()` (a loop's, between
passes) ends it and starts the next one, which imports while the loop waits. The
bindings keep a little of every query for good: htcondor2 (25.x) turns each name of a
query's projection into a bytes object it never frees (`py_list_to_vector_of_strings`:
`PyUnicode_AsUTF8String` without a `Py_DECREF`), about 50 bytes a name, and a pass asks
each schedd with its projection and locates the schedds (six names). Nothing is carried
from one worker process to the next (the loop holds the jobs' digests, `job_delta`).
"""

from __future__ import annotations

import importlib
import os
import pickle
import select
import signal
import struct
import subprocess
import sys
from typing import Any

from ..limits import give_back_memory

_OK, _RAISED = "ok", "raised"
_LENGTH = struct.Struct("!Q")
_PACKAGE = "negotiator_ext."

# the requests one worker process answers before `renew` starts the next (each leaves
# the bindings' copy of its projection behind: about 3 KiB a pass beside the live
# test pool, so at most 1.5 MiB, against the worker's 40 MiB)
REQUESTS_PER_PROCESS = 500


class WorkerGone(Exception):
    """The worker gave no answer (it could not be started, died, or answered garbage)."""


class Worker:
    """One child process running this package's functions for its parent, one at a time.

    `subsystem`: (name, SubsystemType member name) for `htcondor2.set_subsystem` in the
    child, as its parent set it (the shadow daemon's NEGOTIATOR_EXT, a Daemon); None
    leaves the bindings' default, as for a command-line tool."""

    def __init__(self, subsystem: tuple[str, str] | None = None,
                 preload: tuple[str, ...] = (),
                 requests_per_process: int = REQUESTS_PER_PROCESS):
        self.subsystem = subsystem
        self.preload = tuple(m for m in preload if m.startswith(_PACKAGE))
        self.requests_per_process = max(1, int(requests_per_process))
        self._proc: subprocess.Popen | None = None
        self._pending: Pending | None = None
        self.started = 0                      # processes started (a new one after a loss)
        self.asked = 0                        # requests sent to the running process

    def submit(self, target: str, *args: Any) -> "Pending":
        """Run `target` ("module:function", in this package) with `args` in the worker;
        the answer is `.result()` of what this returns. One request at a time: an answer
        not yet taken is given up (the worker is ended)."""
        if not target.startswith(_PACKAGE) or ":" not in target:
            raise ValueError(f"not a function of this package: {target!r}")
        if self._pending is not None:
            self._pending.cancel()
        data = pickle.dumps((target, args), protocol=pickle.HIGHEST_PROTOCOL)
        pending = Pending(self)
        try:
            proc = self._running()
            self.asked += 1
            proc.stdin.write(_LENGTH.pack(len(data)) + data)
            proc.stdin.flush()
        except (OSError, ValueError) as exc:
            self.close()
            pending.lost = f"cannot start or reach the worker: {exc}"
        else:
            self._pending = pending
        return pending

    def renew(self) -> bool:
        """End the running process and start the next when it has been asked
        `requests_per_process` requests and owes no answer (see the module docstring);
        whether it did."""
        if (self._proc is None or self._pending is not None
                or self.asked < self.requests_per_process):
            return False
        self.close()
        self.start()
        return True

    def start(self) -> None:
        """Start the worker now (it imports `preload` as it starts), so that the first
        `submit` finds it ready; a failure to start is the first `submit`'s."""
        try:
            self._running()
        except (OSError, ValueError):
            self.close()

    def close(self) -> None:
        """End the worker (a new one is started by the next `submit`)."""
        proc, self._proc, self._pending = self._proc, None, None
        self.asked = 0
        if proc is None:
            return
        for f in (proc.stdin, proc.stdout):
            try:
                f.close()
            except OSError:
                pass
        try:
            proc.kill()
        except OSError:
            pass
        proc.wait()

    def _running(self) -> subprocess.Popen:
        if self._proc is not None and self._proc.poll() is None:
            return self._proc
        self.close()
        argv = [sys.executable, "-m", "negotiator_ext.adapters.worker"]
        if self.subsystem is not None:
            argv += ["--subsystem", *self.subsystem]
        for module in self.preload:
            argv += ["--preload", module]
        self._proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      close_fds=True)
        self.started += 1
        return self._proc

    def _answer(self, pending: "Pending") -> Any:
        if self._pending is not pending or self._proc is None:
            raise WorkerGone("the worker was ended before it answered")
        self._pending = None
        try:
            data = _read_frame(self._proc.stdout)
            if data is None:
                raise WorkerGone("the worker ended without an answer")
            kind, value = pickle.loads(data)
        except WorkerGone:
            self.close()
            raise
        except Exception as exc:                  # noqa: BLE001 - a broken answer
            self.close()
            raise WorkerGone(f"the worker's answer could not be read: {exc}") from None
        if kind == _RAISED:
            raise value
        return value


class Pending:
    """A request sent to a worker: `result()` waits for its answer, `cancel()` gives it
    up (ending the worker)."""

    def __init__(self, worker: Worker):
        self.worker = worker
        self.lost: str | None = None

    def ready(self, timeout: float) -> bool:
        """Whether `result()` can be taken without waiting on the worker (its answer has
        begun, or it is gone), waiting up to `timeout` seconds for that."""
        proc = self.worker._proc
        if self.lost is not None or self.worker._pending is not self or proc is None:
            return True
        try:
            return bool(select.select([proc.stdout.fileno()], [], [], max(timeout, 0.0))[0])
        except (OSError, ValueError):
            return True

    def result(self) -> Any:
        if self.lost is not None:
            raise WorkerGone(self.lost)
        return self.worker._answer(self)

    def cancel(self) -> None:
        if self.worker._pending is self:
            self.worker.close()


def _read_frame(stream) -> bytes | None:
    head = _read_exactly(stream, _LENGTH.size)
    if head is None:
        return None
    (n,) = _LENGTH.unpack(head)
    data = _read_exactly(stream, n)
    if data is None:
        raise WorkerGone("the worker's answer ended early")
    return data


def _read_exactly(stream, n: int) -> bytes | None:
    parts, got = [], 0
    while got < n:
        chunk = stream.read(n - got)
        if not chunk:
            if got:
                raise WorkerGone("the worker's answer ended early")
            return None
        parts.append(chunk)
        got += len(chunk)
    return b"".join(parts)


# ---- the child's side ------------------------------------------------------------------

def _call(target: str, args: tuple) -> Any:
    module, _, name = target.partition(":")
    if not module.startswith(_PACKAGE):
        raise ValueError(f"not a function of this package: {target!r}")
    fn = importlib.import_module(module)
    for part in name.split("."):
        fn = getattr(fn, part)
    return fn(*args)


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    # the answers go out on a private copy of standard output; anything else the process
    # prints (the bindings, a warning) goes to standard error
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    # a terminal's ^C reaches the whole process group: the parent decides, and ends this
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    inp = sys.stdin.buffer
    while args:
        if args[0] == "--subsystem" and len(args) >= 3:
            import htcondor2
            htcondor2.set_subsystem(args[1], getattr(htcondor2.SubsystemType, args[2]))
            del args[:3]
        elif args[0] == "--preload" and len(args) >= 2 and args[1].startswith(_PACKAGE):
            importlib.import_module(args[1])
            del args[:2]
        else:
            print(f"worker: unknown arguments {args}", file=sys.stderr)
            return 2
    while True:
        try:
            data = _read_frame(inp)
        except WorkerGone:
            return 1
        if data is None:
            return 0                              # the parent is done (or gone)
        reply = _reply(data)
        del data
        try:
            out.write(_LENGTH.pack(len(reply)))   # (not joined: a copy of the answer)
            out.write(reply)
            out.flush()
        except OSError:
            return 0                              # the parent is gone
        del reply
        give_back_memory()      # what the answer used: the loop's cycle runs now


def _reply(data: bytes) -> bytes:
    """The answer to one request, pickled (what the function returned, or raised)."""
    try:
        target, call_args = pickle.loads(data)
        answer = (_OK, _call(target, call_args))
    except BaseException as exc:                  # noqa: BLE001 - sent to the parent
        answer = (_RAISED, exc)
    try:
        return pickle.dumps(answer, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception as exc:                      # noqa: BLE001 - an unpicklable value
        return pickle.dumps((_RAISED, RuntimeError(
            f"{type(answer[1]).__name__}: {answer[1]}" if answer[0] == _RAISED
            else f"the answer could not be sent back: {exc}")))


if __name__ == "__main__":
    sys.exit(main())
