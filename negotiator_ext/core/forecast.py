"""What a forecast (or any simulated run) did to each submitter and group: plain job
runs in, figures out.

* **usage**: slot-weight seconds (a run's slot weight times its length, the accountant's
  measure) between the start and the end;
* **share**: that usage over the pool's (its weighted size times the span); a group's
  beside its quota's share of the pool (the last cycle's effective quota);
* **jobs started**: jobs whose first run began in the span; **waits**: first start minus
  QDate of those (p50, p90, max); **never started**: jobs queued in the span that had not
  started by its end;
* **preemptions**: runs ended by a preemption;
* **starved**: seconds during which the submitter (group) had idle jobs and none running;
* **timeline**: each bucket's usage over the bucket's length (the average slot weight in
  use), per submitter and group.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class JobRun:
    """One job as it went: when it was queued, its runs (start, end, slot weight,
    whether a preemption ended it) and how it ended up."""
    job: str
    schedd: str
    submitter: str
    group: str
    queued: float
    start: float | None          # its first run's start (None: never ran)
    end: float | None            # when it left the pool (completed or removed)
    weight: float
    preempted: int
    runs: tuple = ()
    state: str = "idle"          # idle | running | completed | removed
    left: float | None = None    # when it left the queue (completed, removed)


@dataclass
class Outcome:
    start: float
    end: float
    bucket: int
    pool_weight: float
    submitters: list[dict] = field(default_factory=list)
    groups: list[dict] = field(default_factory=list)
    timeline: dict = field(default_factory=dict)
    jobs: list[JobRun] = field(default_factory=list)


def percentile(values: list[float], q: float) -> float | None:
    """The q-th percentile (0-100) by linear interpolation between closest ranks (numpy's
    default), None for no values."""
    if not values:
        return None
    v = sorted(values)
    pos = (len(v) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (pos - lo)


def _overlap(a: float, b: float, lo: float, hi: float) -> float:
    return max(0.0, min(b, hi) - max(a, lo))


def outcome_of(runs: list[JobRun], start: float, end: float, bucket: int, *,
               quotas: dict | None = None, pool_weight: float = 0.0) -> Outcome:
    span = max(1.0, end - start)
    capacity = pool_weight * span
    n_buckets = max(1, math.ceil(span / bucket))
    out = Outcome(start=start, end=end, bucket=bucket, pool_weight=pool_weight, jobs=runs)
    by_sub: dict[str, list[JobRun]] = {}
    by_group: dict[str, list[JobRun]] = {}
    for r in runs:
        by_sub.setdefault(r.submitter, []).append(r)
        by_group.setdefault(r.group, []).append(r)
    line_sub, line_group = {}, {}
    for name, mine in sorted(by_sub.items()):
        row, line = _figures(mine, start, end, bucket, n_buckets, capacity)
        groups = [r.group for r in mine]
        row = {"submitter": name, "group": max(set(groups), key=groups.count), **row}
        out.submitters.append(row)
        line_sub[name] = line
    for name, mine in sorted(by_group.items()):
        row, line = _figures(mine, start, end, bucket, n_buckets, capacity)
        q = (quotas or {}).get(name)
        quota = getattr(q, "effective_quota", None)
        row = {"group": name, "quota": quota,
               "quota_share": (quota / pool_weight if quota is not None and pool_weight
                               else None), **row}
        out.groups.append(row)
        line_group[name] = line
    out.timeline = {"start": start, "bucket": bucket,
                    "times": [start + i * bucket for i in range(n_buckets)],
                    "submitters": line_sub, "groups": line_group}
    return out


def _figures(jobs: list[JobRun], start: float, end: float, bucket: int, n_buckets: int,
             capacity: float) -> tuple[dict, list[float]]:
    usage = 0.0
    line = [0.0] * n_buckets
    waits = []
    started = completed = never = preempted = 0
    events = []                       # (time, d_idle, d_running) for the starved time
    for j in jobs:
        for a, b, w, was_preempted in j.runs:
            usage += w * _overlap(a, b, start, end)
            first = max(0, int((max(a, start) - start) // bucket))
            last = min(n_buckets - 1, int((min(b, end) - start) // bucket))
            for i in range(first, last + 1):
                lo = start + i * bucket
                line[i] += w * _overlap(a, b, lo, min(lo + bucket, end))
            preempted += bool(was_preempted)
            events += [(a, 0, 1), (b, 0, -1)]
        if j.start is not None and start <= j.start <= end:
            started += 1
            waits.append(j.start - j.queued)
        if j.state == "completed":
            completed += 1
        if j.start is None and j.queued <= end:
            never += 1
        # idle: from its QDate to each run, and after a preemption to the next
        idle_from = j.queued
        for a, b, _, was_preempted in j.runs:
            if a > idle_from:
                events += [(idle_from, 1, 0), (a, -1, 0)]
            idle_from = b if was_preempted else math.inf
        if idle_from != math.inf:
            stop = j.left if j.left is not None else end
            if stop > idle_from:
                events += [(idle_from, 1, 0), (stop, -1, 0)]
    for i in range(n_buckets):
        lo = start + i * bucket
        line[i] = round(line[i] / max(1.0, min(lo + bucket, end) - lo), 4)
    return ({"usage": round(usage, 3),
             "share": round(usage / capacity, 6) if capacity else None,
             "jobs_started": started, "jobs_completed": completed, "never_started": never,
             "wait_p50": _r(percentile(waits, 50)), "wait_p90": _r(percentile(waits, 90)),
             "wait_max": _r(max(waits) if waits else None), "preemptions": preempted,
             "starved": round(_starved(events, start, end), 3)}, line)


def _starved(events: list, start: float, end: float) -> float:
    """Seconds within [start, end] with idle > 0 and running == 0."""
    events.sort(key=lambda e: (e[0], -e[2], e[1]))
    idle = running = 0
    total = 0.0
    last = start
    for t, d_idle, d_run in events:
        t = min(max(t, start), end)
        if idle > 0 and running == 0:
            total += t - last
        last = t
        idle += d_idle
        running += d_run
    if idle > 0 and running == 0:
        total += end - last
    return total


def _r(v: float | None) -> float | None:
    return None if v is None else round(v, 1)


def usage_error(forecast: dict, real: dict) -> float:
    """The difference between two timelines of the same buckets ({name: [usage per
    bucket]}): the sum over buckets and names of |forecast - real|, over the real
    total (0: the same; 1: as large as all the real usage)."""
    names = set(forecast) | set(real)
    diff = total = 0.0
    for n in names:
        f, r = forecast.get(n, []), real.get(n, [])
        for i in range(max(len(f), len(r))):
            a = f[i] if i < len(f) else 0.0
            b = r[i] if i < len(r) else 0.0
            diff += abs(a - b)
            total += b
    return diff / total if total else (0.0 if diff == 0 else math.inf)
