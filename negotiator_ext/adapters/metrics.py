"""Prometheus metrics of a shadow pass, for node_exporter's textfile collector (cron) or
an HTTP endpoint (the daemon).

Every metric is a gauge named `negotiator_ext_<what>[_<unit>]` and describes ONE pass,
the newest: a pass is a snapshot, and a time series per pass is what Prometheus scrapes
anyway. Nothing is accumulated here except `negotiator_ext_passes_total`, which only the
daemon's endpoint (`MetricsServer`) serves.

What is exported (a figure the pass does not know, None in the record, is left out rather
than exported as 0 or NaN: "absent" means "unknown", 0 means 0):

  pass            negotiator_ext_pass_timestamp_seconds (the pass's start),
                  negotiator_ext_last_complete_pass_timestamp_seconds (the newest
                  complete pass's start: this one's, or from the ledger),
                  negotiator_ext_pass_duration_seconds, negotiator_ext_pass_complete /
                  _partial / _failed (1 or 0), negotiator_ext_pass_warnings,
                  negotiator_ext_snapshot_timestamp_seconds,
                  negotiator_ext_capture_duration_seconds,
                  negotiator_ext_shadow_cycle_duration_seconds,
                  negotiator_ext_shadow_phase_duration_seconds{phase},
                  negotiator_ext_shadow_cycle_matches (our cycle of this pass),
                  negotiator_ext_real_cycle_timestamp_seconds (newest real cycle seen)
  comparison      (our previous pass's cycle against the real cycle that followed it;
                  when this pass compared nothing, failed or saw no new real cycle, the
                  newest comparison in the ledger, with
                  negotiator_ext_comparison_timestamp_seconds: when the pass that
                  recorded it began, so its age can be alerted on)
                  negotiator_ext_real_cycle_duration_seconds (the real cycle compared),
                  negotiator_ext_compared_real_cycle_timestamp_seconds,
                  negotiator_ext_real_cycles_between,
                  negotiator_ext_matches{side="real"|"shadow"}, negotiator_ext_matches_agreed,
                  negotiator_ext_match_agreement_ratio{direction="real_in_shadow"|
                  "shadow_in_real"|"equivalent"|"count"|"count_unexplained"},
                  negotiator_ext_comparison_info{source},
                  negotiator_ext_comparison_disagreements{class="pool_changed"|
                  "out_of_time"|"unexplained"}, negotiator_ext_comparison_pool_changes,
                  negotiator_ext_comparison_aligned (1/0; core.disagreement, MatchLog only),
                  negotiator_ext_comparison_repredicted{what="unexplained"|"explained"}
                  (when the unexplained ones were re-predicted at the real phase 2),
                  negotiator_ext_priority_drift_max_ratio (largest |drift| of the pass),
                  negotiator_ext_real_cycle_out_of_time (1/0),
                  negotiator_ext_real_cycle_groups_not_served
  time limits     (when the pool's negotiator ad gives a cost, core.time_limits)
                  negotiator_ext_time_limits_predicted_cut (1/0),
                  negotiator_ext_time_limits_predicted_duration_seconds,
                  negotiator_ext_time_limits_predicted_matches{part="within"|"beyond"},
                  negotiator_ext_time_limits_predicted_groups_not_reached
  per submitter   labels {submitter, group}; group records are left out (they are the
                  per-group metrics): negotiator_ext_submitter_usage_weighted{side="real"},
                  negotiator_ext_submitter_effective_priority{side="real"|"shadow"},
                  negotiator_ext_submitter_real_priority{side="real"|"predicted"},
                  negotiator_ext_submitter_priority_factor,
                  negotiator_ext_submitter_priority_drift_ratio,
                  negotiator_ext_submitter_share{side}, negotiator_ext_submitter_limit{side}
                  (HTCondor's int sentinel -2147483648 is left out, and shown as
                  negotiator_ext_submitter_limit_unset{side} 1),
                  negotiator_ext_submitter_matches{side}, negotiator_ext_submitter_jobs{state}
                  (side="shadow" figures of a pass whose cycle did not run are unknown)
  per group       label {group}: negotiator_ext_group_quota{side="real"|"shadow"|"config"},
                  negotiator_ext_group_usage_weighted{side="real"|"shadow"} (shadow: after
                  our cycle), negotiator_ext_group_requested,
                  negotiator_ext_group_matches{side}

Cardinality stays bounded: per-submitter and per-group series exist only for the
principals present in the pass exported, so a submitter that leaves the pool leaves the
metrics with the next pass (the textfile is rewritten whole; the endpoint serves the newest
pass only).
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Iterable, Iterator, Mapping

from prometheus_client import CollectorRegistry, start_http_server, write_to_textfile
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from ..core.records import PassRecord, Standing

PREFIX = "negotiator_ext_"
STATUSES = ("complete", "partial", "failed")


def _num(value) -> float | None:
    """`value` as a float, None when unknown (None, or not a number)."""
    if value is None:
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _gauge(name: str, doc: str, value) -> Iterator[Metric]:
    """One unlabelled gauge, or nothing when its value is unknown."""
    v = _num(value)
    if v is not None:
        yield GaugeMetricFamily(PREFIX + name, doc, value=v)


def _labelled(name: str, doc: str, labelnames: tuple[str, ...],
              samples: Iterable[tuple[tuple[str, ...], object]]) -> Iterator[Metric]:
    """One labelled gauge with the samples whose value is known (the first of duplicate
    label sets wins: one series per label set is what the exposition format allows), or
    nothing when no sample is known."""
    family = GaugeMetricFamily(PREFIX + name, doc, labels=labelnames)
    seen: set[tuple[str, ...]] = set()
    for labels, value in samples:
        v = _num(value)
        labels = tuple(str(x) for x in labels)
        if v is None or labels in seen:
            continue
        seen.add(labels)
        family.add_metric(list(labels), v)
    if family.samples:
        yield family


def max_abs_drift(rec: PassRecord) -> float | None:
    """The largest |drift| of the pass's submitters (what its comparison, if any, also
    carries: compare() takes it from the same records)."""
    drifts = [abs(s.drift) for s in rec.submitters if s.drift is not None]
    return max(drifts) if drifts else None


# HTCondor's int "no number" (a NaN limit converted to int): never a figure to plot
INT_MIN = -2147483648


def families(rec: PassRecord, standing: Standing | None = None) -> list[Metric]:
    """Every metric family of pass `rec` (see the module docstring); `standing`: what
    the ledger held after it (the newest complete pass, the newest comparison)."""
    out: list[Metric] = []
    add = out.extend
    standing = standing or Standing()
    add(_gauge("last_complete_pass_timestamp_seconds",
               "Start of the newest complete shadow pass (epoch)",
               rec.started_at if rec.status == "complete" else standing.last_complete_at))
    add(_gauge("pass_timestamp_seconds", "Start of the newest shadow pass (epoch)",
               rec.started_at))
    add(_gauge("pass_duration_seconds", "Wall-clock duration of the newest shadow pass",
               rec.finished_at - rec.started_at
               if rec.finished_at is not None and rec.started_at is not None else None))
    for status in STATUSES:
        add(_gauge(f"pass_{status}", f"1 if the newest shadow pass is {status}, else 0",
                   1 if rec.status == status else 0))
    add(_gauge("pass_warnings", "Warnings recorded by the newest shadow pass",
               len(rec.warnings)))
    add(_gauge("snapshot_timestamp_seconds", "Capture time of the pass's pool snapshot (epoch)",
               rec.snapshot_time))
    add(_gauge("capture_duration_seconds", "Time taken to capture the pass's pool snapshot",
               rec.capture_duration))
    add(_gauge("shadow_cycle_duration_seconds",
               "Time taken by our negotiation cycle on the pass's snapshot",
               rec.shadow_duration))
    add(_labelled("shadow_phase_duration_seconds",
                  "Time taken by each phase of our negotiation cycle", ("phase",),
                  (((k,), v) for k, v in sorted(rec.shadow_timings.items()))))
    add(_labelled("pass_step_duration_seconds",
                  "Time taken by each step of the pass (capture_<step>, pool, cycle, real)",
                  ("step",), (((k,), v) for k, v in sorted(rec.pass_timings.items()))))
    if rec.shadow_duration is not None:   # our cycle ran: its match count is known, even 0
        add(_gauge("shadow_cycle_matches", "Matches made by our cycle of this pass",
                   len(rec.shadow_matches)))
    add(_gauge("real_cycle_timestamp_seconds",
               "Start of the newest real negotiation cycle seen (epoch)", rec.real_cycle_time))
    tl = rec.time_limits or {}
    if tl:
        add(_gauge("time_limits_predicted_cut",
                   "1 if the real negotiator's time limits are predicted to stop its next "
                   "cycle short of ours, else 0", 1 if tl.get("cut") else 0))
        add(_gauge("time_limits_predicted_duration_seconds",
                   "Predicted duration of the real negotiator's next cycle",
                   tl.get("predicted_duration")))
        add(_labelled("time_limits_predicted_matches",
                      "Matches of our cycle within / beyond where the real cycle's time "
                      "limits are predicted to stop it", ("part",),
                      ((("within",), tl.get("matches_within")),
                       (("beyond",), tl.get("matches_beyond")))))
        add(_gauge("time_limits_predicted_groups_not_reached",
                   "Groups the real cycle is predicted never to reach",
                   len(tl.get("groups_not_reached") or ())))

    c, c_at = rec.comparison, rec.started_at
    if c is None:                       # this pass compared nothing: the newest comparison
        c, c_at = standing.comparison, standing.comparison_at
    if c is not None:
        add(_gauge("comparison_timestamp_seconds",
                   "Start of the pass that recorded the comparison shown (epoch): an "
                   "earlier pass's when this one compared nothing", c_at))
        add(_gauge("real_cycle_duration_seconds",
                   "Duration of the real negotiation cycle compared in this pass",
                   c.real_duration))
        add(_gauge("compared_real_cycle_timestamp_seconds",
                   "Start of the real negotiation cycle compared in this pass (epoch)",
                   c.real_cycle_time))
        add(_gauge("real_cycles_between",
                   "Real negotiation cycles between the compared pass's snapshot and this one",
                   c.real_cycles_between))
        add(_labelled("matches", "Matches of the compared cycles: the real one and ours",
                      ("side",), ((("real",), c.real_matches), (("shadow",), c.shadow_matches))))
        add(_gauge("matches_agreed", "Matches both cycles made (same submitter and slot)",
                   c.agreed))
        add(_labelled("match_agreement_ratio",
                      "Agreement of the compared cycles: agreed/real, agreed/shadow, "
                      "up to identical slots, per-submitter match counts, and the same "
                      "with the differences a change of the pool explains taken as "
                      "agreeing (count_unexplained)",
                      ("direction",),
                      ((("real_in_shadow",), c.real_in_shadow),
                       (("shadow_in_real",), c.shadow_in_real),
                       (("equivalent",), c.equivalent_agreement),
                       (("count",), c.count_agreement),
                       (("count_unexplained",), c.unexplained_agreement))))
        if c.source in ("matchlog", "hour"):
            from ..core.disagreement import OUT_OF_TIME, POOL_CHANGED, UNEXPLAINED, summary
            classes = summary(c.disagreements or ())
            add(_labelled("comparison_disagreements",
                          "Submitters whose match counts differ in the compared cycles, by "
                          "why: the pool changed between our capture and the real cycle, "
                          "the real cycle ran out of time, or unexplained",
                          ("class",), (((k.replace(" ", "_"),), classes.get(k, 0))
                                       for k in (POOL_CHANGED, OUT_OF_TIME, UNEXPLAINED))))
            add(_gauge("comparison_pool_changes",
                       "Changes of the pool seen between the compared capture and the real "
                       "cycle (jobs, submitters, slots, the pool's size)", len(c.changes)))
            add(_gauge("comparison_aligned",
                       "1 if the compared pass captured the pool as the real cycle started "
                       "(followed in the NegotiatorLog), else 0", int(bool(c.aligned))))
            again = c.repredicted or {}
            if "at" in again:
                add(_labelled("comparison_repredicted",
                              "Submitters the comparison left unexplained, and of them those "
                              "our cycle re-run at the real accountant's update (its phase "
                              "2) gives their real count: explained (priorities moved)",
                              ("what",), ((("unexplained",), again.get("unexplained")),
                                          (("explained",), again.get("explained")))))
        if c.source:
            add(_labelled("comparison_info", "Where the real matches compared came from",
                          ("source",), (((c.source,), 1),)))
        real_out = (c.time_limits or {}).get("real") or {}
        if c.time_limits:
            add(_gauge("real_cycle_out_of_time",
                       "1 if the compared real cycle ran out of time (schedds or submitters "
                       "out of time), else 0",
                       1 if real_out.get("schedds") or real_out.get("submitters") else 0))
            add(_gauge("real_cycle_groups_not_served",
                       "Groups our cycle served that the compared real cycle, out of time, "
                       "did not", len(c.time_limits.get("groups_not_served") or ())))
    add(_gauge("priority_drift_max_ratio",
               "Largest |real - predicted| / predicted real user priority of the pass",
               max_abs_drift(rec)))

    subs = [s for s in rec.submitters if not s.is_group]
    lab = ("submitter", "group", "side")

    def sided(pairs):
        return (((s.name, s.group, side), getattr(s, attr))
                for s in subs for side, attr in pairs)

    add(_labelled("submitter_usage_weighted",
                  "Weighted resources in use by the submitter, as the real accountant reports",
                  lab, sided((("real", "real_usage"),))))
    add(_labelled("submitter_effective_priority",
                  "Effective user priority: the real accountant's, and our cycle's",
                  lab, sided((("real", "real_eup"), ("shadow", "shadow_eup")))))
    add(_labelled("submitter_real_priority",
                  "Real user priority: the real accountant's, and our prediction for its time",
                  lab, sided((("real", "real_rup"), ("predicted", "predicted_rup")))))
    add(_labelled("submitter_priority_factor", "Priority factor of the submitter",
                  ("submitter", "group"), (((s.name, s.group), s.factor) for s in subs)))
    add(_labelled("submitter_priority_drift_ratio",
                  "(real - predicted) / predicted real user priority",
                  ("submitter", "group"), (((s.name, s.group), s.drift) for s in subs)))
    add(_labelled("submitter_share", "Submitter share of the pool: real last cycle, and ours",
                  lab, sided((("real", "real_share"), ("shadow", "shadow_share")))))
    limits = (("real", "real_limit"), ("shadow", "shadow_submitter_limit"))
    add(_labelled("submitter_limit", "Submitter limit: real last cycle, and ours",
                  lab, ((k, v) for k, v in sided(limits) if _num(v) != INT_MIN)))
    add(_labelled("submitter_limit_unset",
                  "1 where the limit is HTCondor's int sentinel -2147483648 (no number: a "
                  "group whose allocation gave 0/0), left out of submitter_limit",
                  lab, ((k, 1) for k, v in sided(limits) if _num(v) == INT_MIN)))
    ran = rec.shadow_duration is not None   # else our per-principal match counts are not known
    add(_labelled("submitter_matches", "Matches of the submitter: real compared cycle, and ours",
                  lab, sided((("real", "real_matches"),) + ((("shadow", "shadow_matches"),)
                                                             if ran else ()))))
    add(_labelled("submitter_jobs", "Jobs of the submitter by state (its submitter ads)",
                  ("submitter", "group", "state"),
                  (((s.name, s.group, state), getattr(s, f"{state}_jobs"))
                   for s in subs for state in ("idle", "running"))))

    glab = ("group", "side")
    add(_labelled("group_quota", "Group quota: real effective, ours, and configured",
                  glab, (((g.name, side), getattr(g, attr)) for g in rec.groups
                         for side, attr in (("real", "real_quota"), ("shadow", "shadow_quota"),
                                            ("config", "config_quota")))))
    add(_labelled("group_usage_weighted",
                  "Weighted usage of the group: real now, and ours after our cycle",
                  glab, (((g.name, side), getattr(g, attr)) for g in rec.groups
                         for side, attr in (("real", "real_usage"),
                                            ("shadow", "shadow_usage_after")))))
    add(_labelled("group_requested", "Resources requested by the group (real)", ("group",),
                  (((g.name,), g.real_requested) for g in rec.groups)))
    add(_labelled("group_matches", "Matches of the group: real compared cycle, and ours",
                  glab, (((g.name, side), getattr(g, attr)) for g in rec.groups
                         for side, attr in (("real", "real_matches"),
                                            ("shadow", "shadow_matches"))
                         if ran or side == "real")))
    return out


def sharded_families(passes: Mapping[str, tuple[PassRecord, Standing | None]]
                     ) -> list[Metric]:
    """The metrics of the newest pass of each negotiator of a pool of several (`passes`:
    ledger stream -> (its newest pass, its standing)): every family of each, each sample
    labelled `negotiator` (the stream's, `core.shards.split_stream`), one family per
    name. One stream of a pool of one negotiator: `families` as they are."""
    from ..core.shards import split_stream
    if len(passes) == 1:
        ((stream, (rec, standing)),) = passes.items()
        if split_stream(stream)[1] is None:
            return families(rec, standing)
    merged: dict[str, Metric] = {}
    for stream in sorted(passes):
        rec, standing = passes[stream]
        negotiator = split_stream(stream)[1] or ""
        for fam in families(rec, standing):
            out = merged.get(fam.name)
            if out is None:
                out = merged[fam.name] = Metric(fam.name, fam.documentation, fam.type)
            out.samples.extend(sample._replace(labels={**sample.labels,
                                                       "negotiator": negotiator})
                               for sample in fam.samples)
    return list(merged.values())


class _PassCollector(Collector):
    """Serves the metrics of the newest pass of each ledger stream (the daemon's newest
    pass; one per negotiator in a pool of several, `sharded_families`) and, when
    `counting`, the number of passes seen since start by status."""

    def __init__(self, rec: PassRecord | None = None, *, counting: bool = False,
                 standing: Standing | None = None):
        self._lock = threading.Lock()
        self._passes: dict[str, tuple[PassRecord, Standing | None]] = {}
        if rec is not None:
            self._passes[rec.pool] = (rec, standing)
        self._counting = counting
        self._counts = {s: 0 for s in STATUSES}

    def update(self, rec: PassRecord, standing: Standing | None = None) -> None:
        with self._lock:
            from ..core.shards import split_stream
            if split_stream(rec.pool)[1] is None:     # a pool of one: this pass alone
                self._passes.clear()
            else:                                     # a pool of several: each one's newest
                self._passes = {k: v for k, v in self._passes.items()
                                if split_stream(k)[1] is not None}
            self._passes[rec.pool] = (rec, standing)
            self._counts[rec.status] = self._counts.get(rec.status, 0) + 1

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            passes, counts = dict(self._passes), dict(self._counts)
        if self._counting:
            total = CounterMetricFamily(PREFIX + "passes", "Shadow passes since the daemon started",
                                        labels=("status",))
            for status, n in sorted(counts.items()):
                total.add_metric([status], n)
            yield total
        if passes:
            yield from sharded_families(passes)


def pass_metrics(rec: PassRecord, registry: CollectorRegistry | None = None,
                 standing: Standing | None = None, *,
                 others: Mapping[str, tuple[PassRecord, Standing | None]] | None = None
                 ) -> CollectorRegistry:
    """A registry serving the metrics of pass `rec` (a new one unless `registry` is given;
    it must not already hold the metrics of another pass); `others`: the newest passes of
    the pool's other negotiators (stream -> (pass, standing)), served beside it."""
    registry = CollectorRegistry() if registry is None else registry
    collector = _PassCollector()
    for other, standing_other in (others or {}).values():
        collector.update(other, standing_other)
    collector.update(rec, standing)
    registry.register(collector)
    return registry


def write_textfile(path: str | Path, rec: PassRecord, standing: Standing | None = None, *,
                   others: Mapping[str, tuple[PassRecord, Standing | None]] | None = None
                   ) -> None:
    """Write the metrics of pass `rec` (and `others`, see `pass_metrics`) to `path` for
    node_exporter's textfile collector (whose directory only reads names ending in
    `.prom`). Atomic: written beside `path` and renamed over it, so a scrape never sees
    half a file. Raises OSError."""
    write_to_textfile(str(path), pass_metrics(rec, standing=standing, others=others))


class MetricsServer:
    """The daemon's HTTP endpoint (`/metrics` on `addr:port`, a private registry): the
    newest pass given to `update`, plus `negotiator_ext_passes_total{status}`.

    Port 0 (or below) disables it: `update` is then only remembered. Binding the port can
    raise OSError (in use, not permitted). Loopback by default: the figures name the
    pool's users, so exposing them is a deliberate `addr`."""

    def __init__(self, port: int, addr: str = "127.0.0.1"):
        self.port = int(port)
        self.addr = addr
        self._collector = _PassCollector(counting=True)
        self.registry = CollectorRegistry()
        self.registry.register(self._collector)
        self._server = None
        self._thread = None
        if self.port > 0:
            started = start_http_server(self.port, addr=addr, registry=self.registry)
            if isinstance(started, tuple):   # prometheus_client >= 0.19 returns them
                self._server, self._thread = started

    @property
    def enabled(self) -> bool:
        return self.port > 0

    def update(self, rec: PassRecord, standing: Standing | None = None) -> None:
        """Serve pass `rec` from now on (and count it)."""
        self._collector.update(rec, standing)

    def close(self) -> None:
        """Stop serving (idempotent)."""
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
