"""Resident memory as Linux reports it in /proc: one process's, and a process's with all
its descendants' (what the machine holds for the product at once: a pass, its worker,
and the children they fork)."""

from __future__ import annotations

import os
import threading
import time


def status(pid: int, field: str = "VmRSS") -> int:
    """A process's memory figure from /proc/PID/status (kB), 0 if none."""
    try:
        with open(f"/proc/{pid}/status") as f:
            return next(int(ln.split()[1]) for ln in f if ln.startswith(field + ":"))
    except (OSError, StopIteration, ValueError):
        return 0


def tree_rss(pid: int) -> int:
    """The resident memory of `pid` and of all its descendants, added up (kB)."""
    total = status(pid)
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return total
    for t in tasks:
        try:
            with open(f"/proc/{pid}/task/{t}/children") as f:
                kids = f.read().split()
        except OSError:
            continue
        total += sum(tree_rss(int(k)) for k in kids)
    return total


class TreePeak:
    """The largest `tree_rss(pid)` seen, sampled every `every` seconds in a thread from
    `start()` to `stop()` (kB)."""

    def __init__(self, pid: int, every: float = 0.02):
        self.pid, self.every, self.peak = pid, every, 0
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> "TreePeak":
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._done.is_set():
            self.peak = max(self.peak, tree_rss(self.pid))
            time.sleep(self.every)

    def stop(self) -> int:
        self._done.set()
        self._thread.join()
        return self.peak
