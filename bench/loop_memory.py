"""Where a shadow loop's memory goes, pass by pass, beside a pool that is already up.

    CONDOR_CONFIG=... python bench/loop_memory.py COLLECTOR STATE_DIR [--passes N]
        [--steps] [SHADOW OPTION ...]

A pool to run it beside: `NEGOTIATOR_EXT_TEST_HTCONDOR=/opt/htcondor python
bench/bench_real_pool.py --shape 100k --no-loop --hold 3600` prints its CONDOR_CONFIG and
collector once its report is out. The shadow options are passed on as they are (the
bench's loop takes `--negotiator-log LOG/NegotiatorLog --matchlog LOG/MatchLog --json`;
`--json` records go to standard output, the figures to standard error).

`negotiator-ext shadow --interval 1` runs in this process for N passes (default 3) with
nothing changed between them. The process's resident memory is sampled every 10 ms;
for each pass it prints the memory before the pass (what the loop kept from the last
one, after its collection and `malloc_trim`), the pass's peak and its time, and with
`--steps` the peak within each step (the capture's steps, the cycle's phases, and the
pass's own: the digest, the comparison, the ledger). After the last pass each part the
loop keeps from pass to pass is let go in turn, and the memory that frees is printed;
what is left is the interpreter's own (its free pools, which the next pass would reuse:
`sys._debugmallocstats` says how many).

The worker process (its schedd queries) is not counted here: `bench_real_pool.py`
counts the whole process tree.
"""

from __future__ import annotations

import gc
import os
import signal
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

# what a loop keeps from one pass to the next (negotiator_ext.shadow.ShadowLoop)
KEPT = ("kept_inputs", "known_lines", "slot_cache", "config_memo", "slot_refs",
        "kept_reads", "last_records")


def rss_mib() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") // (1 << 20)


class Timeline:
    """RSS samples every 10 ms, and named marks, for the pass under way."""

    def __init__(self):
        self.samples: list[tuple[float, int]] = []
        self.marks: list[tuple[float, str]] = []
        self.on = False
        threading.Thread(target=self._sample, daemon=True).start()

    def _sample(self) -> None:
        while True:
            if self.on:
                self.samples.append((time.perf_counter(), rss_mib()))
            time.sleep(0.01)

    def mark(self, name: str) -> None:
        if self.on:
            self.marks.append((time.perf_counter(), name))

    def start(self) -> float:
        self.samples, self.marks, self.on = [], [], True
        return time.perf_counter()

    def steps(self, t0: float) -> list[str]:
        out, prev = [], t0
        for t, name in sorted(self.marks):
            seg = [r for ts, r in self.samples if prev <= ts < t]
            if seg and t - prev >= 0.05:
                out.append(f"  {prev - t0:7.2f}-{t - t0:7.2f} s  until {name:34s} "
                           f"peak {max(seg):6d} MiB")
            prev = t
        return out


def _wrap(owner, name: str, label: str, line: Timeline) -> None:
    inner = getattr(owner, name)

    def wrapped(*a, **kw):
        line.mark(label + " start")
        try:
            return inner(*a, **kw)
        finally:
            line.mark(label + " end")
    setattr(owner, name, wrapped)


def instrument(line: Timeline) -> None:
    """Marks at the capture's steps, the cycle's phases and the pass's own steps."""
    from negotiator_ext import cycle, pool, shadow
    from negotiator_ext.adapters import alignment, answers, observe

    def marked(inner, prefix: str):
        def wrapped(self, step):
            line.mark(prefix + step)
            return inner(self, step)
        return wrapped
    answers._Lap.__call__ = marked(answers._Lap.__call__, "capture:")
    cycle._Phases.lap = marked(cycle._Phases.lap, "cycle:")
    _wrap(pool, "load_pool", "load_pool", line)
    _wrap(observe, "observe_pass", "observe_pass", line)
    _wrap(alignment, "pool_digest", "pool_digest", line)
    _wrap(shadow, "repredict_pass", "repredict_pass", line)
    for step in ("take_snapshot", "compare", "save"):
        _wrap(shadow._Pass, step, "pass." + step, line)


def main(argv: list[str]) -> int:
    passes, steps, rest = 3, False, []
    it = iter(argv)
    for a in it:
        if a == "--passes":
            passes = int(next(it))
        elif a == "--steps":
            steps = True
        else:
            rest.append(a)
    if len(rest) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    collector, state, extra = rest[0], rest[1], rest[2:]

    from negotiator_ext import shadow
    from negotiator_ext.limits import give_back_memory

    line = Timeline()
    if steps:
        instrument(line)
    real = shadow.ShadowLoop.run_pass
    done = [0]

    def err(*a) -> None:
        print(*a, file=sys.stderr, flush=True)

    def timed(self, *a, **kw):
        n = done[0] = done[0] + 1
        err(f"pass {n}: before it {rss_mib()} MiB (what the loop kept)")
        t0 = line.start()
        rec = real(self, *a, **kw)
        took = time.perf_counter() - t0
        line.on = False
        for s in (line.steps(t0) if steps else []):
            err(s)
        err(f"pass {n}: {took:.2f} s, peak {max(r for _, r in line.samples)} MiB, "
            f"after it {rss_mib()} MiB")
        if n >= passes:
            self.tidy()
            gc.collect()
            give_back_memory()
            err(f"after the last pass, collected: {rss_mib()} MiB")
            for part in KEPT:
                before = rss_mib()
                getattr(self, part)     # (a part the loop no longer has: AttributeError)
                setattr(self, part, [] if part == "last_records" else
                        {} if part == "kept_inputs" else None)
                gc.collect()
                give_back_memory()
                err(f"  letting go of {part}: {before - rss_mib()} MiB freed")
            err(f"left: {rss_mib()} MiB; Python's allocator:")
            sys._debugmallocstats()
            os.kill(os.getpid(), signal.SIGTERM)    # the loop's own stop, after this pass
        return rec

    shadow.ShadowLoop.run_pass = timed
    from negotiator_ext.cli import main as cli_main
    try:
        return cli_main(["shadow", "--interval", "1", "--pool", collector, "--state-dir",
                         state, "--no-advertise", *extra]) or 0
    except SystemExit as exc:
        return int(exc.code or 0)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
