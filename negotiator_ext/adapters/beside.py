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
waits at most `t` seconds for it)."""

from __future__ import annotations

import os
import pickle
import select
import signal
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
        pid = os.fork()
        if pid == 0:                                    # the child: answer, then leave
            code = 0
            try:
                os.close(r)
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
