"""Work done in a child process beside this one: the machine has two cores, and reading
a snapshot is two independent jobs (the slot ads, parsed into ClassAds here; the job
files, kept as text, `core.adtext`). `Beside(fn, *args)` starts `fn(*args)` in a forked
child at once; `.result()` waits for it and returns its value (pickled back through a
pipe) or raises the exception it raised, so an InputError names the same file, line,
ad and attribute as when read here.

Forking is safe only with one thread (a lock another thread holds would be held forever
in the child): with more threads, or without `os.fork`, `fn` runs in `.result()`
instead. A child that dies without an answer (killed, out of memory) costs nothing but
time: `fn` runs again here. `.cancel()` kills a child whose answer is no longer
wanted (the parent's own reading failed first, or the child takes too long: `.ready(t)`
waits at most `t` seconds for it). A child ends with the process that forked it (on
Linux): its answer would have nobody to read it.

`Packed(value)` is a value pickled where it is made and unpickled where it is used: a
child of a child answers with it, and the child between passes its bytes on as bytes
(one copy) instead of unpickling and pickling the objects again."""

from __future__ import annotations

import ctypes
import os
import pickle
import select
import signal
import sys
import threading
from typing import Any, Callable

_OK, _RAISED = "ok", "raised"


class Beside:
    def __init__(self, fn: Callable[..., Any], *args: Any, fork: bool = True):
        self.fn, self.args = fn, args
        self.pid: int | None = None
        self._fd: int | None = None
        if not fork or not hasattr(os, "fork") or threading.active_count() > 1:
            return
        r, w = os.pipe()
        parent = os.getpid()
        pid = os.fork()
        if pid == 0:                                    # the child: answer, then leave
            code = 0
            try:
                os.close(r)
                _end_with(parent)
                try:
                    answer = (_OK, fn(*args))
                except BaseException as exc:            # noqa: BLE001 - sent to the parent
                    answer = (_RAISED, exc)
                data = pickle.dumps(answer, protocol=pickle.HIGHEST_PROTOCOL)
                with os.fdopen(w, "wb") as out:
                    out.write(data)
            except BaseException:                       # noqa: BLE001 - no answer: parent reads
                code = 1
            finally:
                os._exit(code)                          # never the parent's cleanup
        os.close(w)
        self.pid, self._fd = pid, r

    def ready(self, timeout: float) -> bool:
        """Whether `result()` can be taken without waiting on the child (its answer has
        begun, or it ended), waiting up to `timeout` seconds for that; True when `fn`
        runs in `result()` itself."""
        if self.pid is None or self._fd is None:
            return True
        return bool(select.select([self._fd], [], [], max(timeout, 0.0))[0])

    def result(self) -> Any:
        if self.pid is None:
            return self.fn(*self.args)
        try:
            with os.fdopen(self._fd, "rb") as f:
                data = f.read()
        finally:
            self._fd = None
            self._reap()
        try:
            kind, value = pickle.loads(data)
        except Exception:                               # noqa: BLE001 - died mid-answer
            return self.fn(*self.args)
        if kind == _RAISED:
            raise value
        return value

    def cancel(self) -> None:
        if self.pid is None:
            return
        try:
            os.kill(self.pid, signal.SIGKILL)
        except OSError:
            pass
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        self._reap()

    def _reap(self) -> None:
        if self.pid is not None:
            try:
                os.waitpid(self.pid, 0)
            except ChildProcessError:
                pass
            self.pid = None


def answered_among(children: dict) -> list:
    """The keys of `children` (key -> Beside) whose `result()` can be taken now, waiting
    until there is at least one."""
    while True:
        done = [k for k, child in children.items() if child.ready(0)]
        if done or not children:
            return done
        fds = [child._fd for child in children.values() if child._fd is not None]
        select.select(fds, [], [])


class Packed:
    """`value` pickled here, to be unpickled by `unpack()` in the process that uses it;
    pickling a Packed again copies its bytes only."""

    __slots__ = ("data",)

    def __init__(self, value: Any):
        self.data = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)

    def __reduce__(self):
        return (_packed, (self.data,))

    def unpack(self) -> Any:
        return pickle.loads(self.data)


def _packed(data: bytes) -> Packed:
    p = Packed.__new__(Packed)
    p.data = data
    return p


_PR_SET_PDEATHSIG = 1


def _end_with(parent: int) -> None:
    """This (forked) process is killed when `parent`, the process that forked it, ends
    (Linux; elsewhere nothing is done: an orphan ends when it finds its pipe closed)."""
    if not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:                          # it ended before the call above
        os._exit(1)
