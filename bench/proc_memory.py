"""Resident memory as Linux reports it in /proc: one process's, and a process's with all
its descendants' (what the machine holds for the product at once: a pass, its worker,
and the children they fork). A descendant counts its proportional share (Pss): a page it
shares with the process it was forked from, or a library's, is counted once over them,
not once in each; the root counts all it holds (VmRSS)."""

from __future__ import annotations

import os
import subprocess
import threading
import time


def status(pid: int, field: str = "VmRSS") -> int:
    """A process's memory figure from /proc/PID/status (kB), 0 if none."""
    try:
        with open(f"/proc/{pid}/status") as f:
            return next(int(ln.split()[1]) for ln in f if ln.startswith(field + ":"))
    except (OSError, StopIteration, ValueError):
        return 0


def pss(pid: int) -> int:
    """A process's proportional set size from /proc/PID/smaps_rollup (kB); its VmRSS
    where the kernel has no rollup, 0 if none."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            return next(int(ln.split()[1]) for ln in f if ln.startswith("Pss:"))
    except (OSError, StopIteration, ValueError):
        return status(pid)


def tree_rss(pid: int, root: bool = True) -> int:
    """The resident memory of `pid` and of all its descendants, added up (kB): the root's
    VmRSS, each descendant's Pss."""
    total = status(pid) if root else pss(pid)
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
        total += sum(tree_rss(int(k), root=False) for k in kids)
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


def run_with_peak(argv: list[str], **popen) -> tuple[subprocess.CompletedProcess, int]:
    """`argv` run to its end, its output captured as text, and the largest `tree_rss`
    of it seen meanwhile (kB)."""
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, **popen)
    peak = TreePeak(proc.pid).start()
    out, err = proc.communicate()
    return subprocess.CompletedProcess(argv, proc.returncode, out, err), peak.stop()
