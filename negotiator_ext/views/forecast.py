"""`negotiator-ext forecast` output: a text report (groups, submitters, a short timeline,
what each column means) and one JSON document for machines."""

from __future__ import annotations

from ..views.text import printable
from ..when import utc_text


def forecast_document(run, with_jobs: bool = False) -> dict:
    o = run.outcome
    doc = {
        "snapshot": str(run.spec.snapshot), "history": [str(p) for p in run.spec.history],
        "config": run.config_source, "start": run.start, "end": run.end,
        "cycles": run.cycles, "negotiator_matches": run.matches,
        "started_on_reused_claims": run.reused,
        "started_on_leftovers": run.by_leftovers, "claims_failed": run.claims_failed,
        "preemptions": run.preemptions, "default_runtime": run.default_runtime,
        "pool_weight": o.pool_weight, "workload": run.counts,
        "assumptions": run.assumptions, "warnings": run.warnings,
        "submitters": o.submitters, "groups": o.groups, "timeline": o.timeline,
    }
    if with_jobs:
        doc["jobs"] = [{"job": j.job, "schedd": j.schedd, "submitter": j.submitter,
                        "group": j.group, "queued": j.queued, "start": j.start,
                        "end": j.end, "weight": j.weight, "preempted": j.preempted,
                        "state": j.state} for j in o.jobs]
    return doc


_COLUMNS = """\
Columns (HTCondor's own names aside):
  Usage       slot-weight hours used in the span (SLOT_WEIGHT times run time: what the
              accountant charges)
  Share       that usage over the pool's weighted size times the span
  Quota       the group's effective quota at the last cycle (condor_userprio -quotas),
              and Quota% its share of the pool
  Started     jobs whose first run began in the span; Never: queued, not started by its end
  Wait        first start minus QDate of the jobs started (median, 90th percentile, max)
  Preempt     runs ended by a preemption
  Starved     hours with idle jobs and none running
"""


def render_forecast(run, timeline_rows: int = 12) -> str:
    o = run.outcome
    hours = (run.end - run.start) / 3600
    c = run.counts
    lines = [
        f"Forecast of {printable(str(run.spec.snapshot))} under {printable(run.config_source)}",
        f"  from {utc_text(run.start)} to {utc_text(run.end)} UTC ({hours:g} h): {run.cycles} cycles, "
        f"{run.matches} matches by the negotiator, {run.reused} jobs started on reused "
        f"claims, {run.by_leftovers} on partitionable leftovers, {run.preemptions} "
        f"preemptions",
        f"  workload: {c.get('idle', 0)} idle and {c.get('running', 0)} running jobs at the "
        f"start ({c.get('foreign_claims', 0)} claimed slots whose job the queue lacks), "
        f"{c.get('arrivals', 0)} arrivals from {c.get('history_jobs', 0)} history jobs "
        f"({c.get('before_start', 0)} queued before the start, {c.get('after_end', 0)} "
        f"after the end), {c.get('removed', 0)} removed as recorded",
    ]
    for a in run.assumptions:
        lines.append(f"  assumed: {printable(a)}")
    lines.append("")
    head = (f"{'Group':<28} {'Quota':>7} {'Quota%':>7} {'Usage':>9} {'Share%':>7} "
            f"{'Started':>7} {'Never':>6} {'Wait p50':>9} {'p90':>8} {'max':>8} "
            f"{'Preempt':>7} {'Starved':>8}")
    lines.append(head)
    for g in o.groups:
        lines.append(f"{_name(g['group'], 28)} {_num(g['quota'], 7)} "
                     f"{_pct(g['quota_share'], 7)} {_row(g)}")
    lines.append("")
    lines.append(f"{'Submitter':<44} {'Usage':>9} {'Share%':>7} {'Started':>7} "
                 f"{'Never':>6} {'Wait p50':>9} {'p90':>8} {'max':>8} {'Preempt':>7} "
                 f"{'Starved':>8}")
    for s in o.submitters:
        lines.append(f"{_name(s['submitter'], 44)} {_row(s)}")
    lines.append("")
    lines += _timeline(o, timeline_rows)
    lines.append("")
    lines.append(_COLUMNS.rstrip())
    for w in run.warnings:
        lines.append(f"warning: {printable(w)}")
    return "\n".join(lines) + "\n"


def _row(r: dict) -> str:
    return (f"{r['usage'] / 3600:9.2f} {_pct(r['share'], 7)} {r['jobs_started']:>7} "
            f"{r['never_started']:>6} {_dur(r['wait_p50'], 9)} {_dur(r['wait_p90'], 8)} "
            f"{_dur(r['wait_max'], 8)} {r['preemptions']:>7} {r['starved'] / 3600:8.2f}")


def _timeline(o, rows: int) -> list[str]:
    """The groups' average slot weight in use, in at most `rows` rows (buckets merged)."""
    times = o.timeline["times"]
    groups = o.timeline["groups"]
    if not times or not groups:
        return []
    step = max(1, -(-len(times) // rows))
    names = list(groups)
    out = [f"Slot weight in use per group (average over {step * o.bucket // 60} min):",
           f"{'from (UTC)':<21}" + "".join(f" {_name(n, 14):>14}" for n in names)]
    for i in range(0, len(times), step):
        cells = []
        for n in names:
            part = groups[n][i:i + step]
            cells.append(f" {sum(part) / len(part):14.2f}")
        out.append(f"{utc_text(times[i]):<21}" + "".join(cells))
    return out


def _name(text: str, width: int) -> str:
    """`text` in `width` columns (a longer one cut, its last column a ~)."""
    t = printable(str(text))
    return f"{t:<{width}}" if len(t) <= width else t[:width - 1] + "~"


def _num(v, width: int) -> str:
    return f"{v:>{width}.1f}" if isinstance(v, (int, float)) else f"{'-':>{width}}"


def _pct(v, width: int) -> str:
    return f"{v * 100:>{width}.1f}" if isinstance(v, (int, float)) else f"{'-':>{width}}"


def _dur(v, width: int) -> str:
    if v is None:
        return f"{'-':>{width}}"
    v = float(v)
    text = f"{v:.0f}s" if v < 120 else (f"{v / 60:.1f}m" if v < 7200 else f"{v / 3600:.1f}h")
    return f"{text:>{width}}"
