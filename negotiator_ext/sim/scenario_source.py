"""A scenario's workload (`simulate`): its arrivals, each a batch of identical jobs
submitted at given times (`at`, then every `every` seconds, `repeat` times), with run
times drawn from the arrival's duration."""

from __future__ import annotations

from ..scenario import Scenario


def arrival_events(sc: Scenario) -> list[tuple[int, int, object]]:
    """(time, order, submit) for every batch of jobs in the span; `submit(pool, time)`
    queues the batch (`SimPool.submit`)."""
    out = []
    end = sc.start + sc.span
    for i, a in enumerate(sc.workload):
        t = sc.start + a.at
        n = 0

        def submit(pool, at, a=a):
            pool.submit(a, a.count, at)
        while t <= end:
            out.append((int(t), i, submit))
            n += 1
            if not a.every or (a.repeat is not None and n >= a.repeat):
                break
            t += a.every
    return out
