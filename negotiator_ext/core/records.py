"""What one shadow pass records about the pool: plain data shared by the comparison
(`core.compare`), the ledger (`adapters.ledger`) and the recommendations
(`core.recommend`). No behaviour here, only the shapes.

A *pass* is one turn of the shadow loop at time `time`: a snapshot of the pool, the real
negotiator's state as the pool reports it (its ad's `LastNegotiationCycle*` history, the
Accounting ads, the claims in slot ads, the MatchLog when configured), our cycle on that
snapshot, and the comparison of our previous pass's cycle with the real cycle that
followed it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class RealCycle:
    """One entry of the negotiator ad's `LastNegotiationCycle*<k>` history."""
    time: int                   # LastNegotiationCycleTime<k> (start, epoch)
    end: int | None             # LastNegotiationCycleEnd<k>
    duration: float | None      # LastNegotiationCycleDuration<k> (s)
    phase_durations: tuple[float | None, float | None, float | None, float | None] = (None,) * 4
    matches: int | None = None
    rejections: int | None = None
    active_submitters: int | None = None
    idle_jobs: int | None = None
    candidate_slots: int | None = None
    submitters_failed: tuple[str, ...] = ()
    submitters_out_of_time: tuple[str, ...] = ()
    submitters_share_limit: tuple[str, ...] = ()
    schedds_out_of_time: tuple[str, ...] = ()
    # the second the real accountant updated the priorities (UpdatePriorities, right after
    # the NegotiatorLog's "Phase 2:  Performing accounting" line); None: not read
    accounting_time: int | None = None
    # the submitters whose turn the NegotiatorLog says a time limit skipped ("Negotiation
    # with X skipped because of time limits" for MAX_TIME_PER_SUBMITTER or
    # MAX_TIME_PER_SCHEDD, "... because MAX_TIME_PER_CYCLE ... exceeded": D_ALWAYS): one
    # served in an earlier spin and skipped in a later one is named nowhere else; () when
    # the log was not read
    submitters_skipped: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class MatchEntry:
    """One match (ours, or the real one from a MatchLog `Matched` line)."""
    job: str                    # the request's first job, "Cluster.Proc"
    submitter: str
    slot: str                   # slot name (for a p-slot: the p-slot's name)
    preempting: str | None = None
    time: int | None = None     # real: the MatchLog line's time (epoch)
    group: str | None = None
    wait: float | None = None   # seconds the matched job had been idle (JobStatus 1) by then


@dataclass(frozen=True)
class SubmitterObs:
    """One accounting principal (submitter or group record) in one pass.

    real_*: what the real accountant reports (Accounting ads of this pass's snapshot).
    shadow_*: what our cycle on this pass's snapshot decided.
    """
    name: str
    group: str                          # assigned group ("<none>" outside groups)
    is_group: bool
    factor: float | None = None         # PriorityFactor now
    policy_factor: float | None = None  # the factor without a lease: PriorityFactorPreLeaseValue
                                        # while a factor lease runs, else `factor`
    factor_lease_expires: int = 0       # PriorityFactorLeaseExpiration (0: none)
    floor: int = 0                      # Floor (0: none)
    floor_lease_expires: int = 0
    ceiling: int = -1                   # Ceiling (-1: none)
    ceiling_lease_expires: int = 0
    real_rup: float | None = None       # real Priority / PriorityFactor
    real_eup: float | None = None       # real Priority (effective)
    real_usage: float = 0.0             # real WeightedResourcesUsed
    resources_used: float = 0.0         # real ResourcesUsed (unweighted)
    hier_usage: float = 0.0             # real HierWeightedResourcesUsed (groups)
    real_share: float | None = None     # real SubmitterShare of its last cycle
    real_limit: float | None = None     # real SubmitterLimit of its last cycle
    last_usage_time: int = 0            # LastUsageTime
    begin_usage_time: int = 0           # BeginUsageTime
    claimed_weight: float = 0.0         # weight of the slots claimed by it in the slot ads
    idle_jobs: int = 0                  # from its submitter ads (0 when it has none)
    running_jobs: int = 0
    shadow_eup: float | None = None
    shadow_share: float | None = None   # our SubmitterShare as the accountant publishes it
    shadow_limit: float | None = None   # our first-spin limit, net of usage (what it may add)
    shadow_matches: int = 0
    shadow_match_weight: float = 0.0
    real_matches: int | None = None     # in the compared real cycle (MatchLog), else None
    predicted_rup: float | None = None  # our accountant's RUP for the real accountant's time
    # our SubmitterLimit as the accountant publishes it (share x the pie's total, first
    # spin: what `real_limit` is), unlike `shadow_limit`, which is net of usage
    shadow_submitter_limit: float | None = None
    drift: float | None = None          # (real_rup - predicted_rup) / predicted_rup


@dataclass(frozen=True)
class GroupObs:
    """One accounting group in one pass (HGQ)."""
    name: str
    real_quota: float | None = None     # EffectiveQuota of the group's Accounting ad
    config_quota: float | None = None
    real_usage: float | None = None     # the group's WeightedResourcesUsed (real)
    real_requested: float | None = None  # Requested
    shadow_quota: float | None = None   # our G4 quota
    shadow_allocated: float | None = None
    shadow_usage_after: float | None = None
    shadow_matches: int = 0
    real_matches: int | None = None


@dataclass(frozen=True)
class Comparison:
    """Our previous pass's cycle against the real cycle that followed its snapshot."""
    shadow_pass: str                    # uuid of the pass whose cycle is compared
    real_cycle_time: int | None         # the real cycle compared (None: none ran)
    real_cycles_between: int            # real cycles between the two snapshots
    real_matches: int | None            # total real matches (negotiator ad or MatchLog)
    shadow_matches: int
    agreed: int | None                  # matches in both (submitter, slot), MatchLog only
    real_in_shadow: float | None        # agreed / real matches  (None without MatchLog)
    shadow_in_real: float | None        # agreed / shadow matches
    count_agreement: float | None       # sum over submitters of min(real, shadow) / max(sum real, sum shadow)
    source: str                         # "matchlog" | "negotiator-ad" | "none"
    per_submitter: dict[str, dict[str, Any]] = field(default_factory=dict)
    per_group: dict[str, dict[str, Any]] = field(default_factory=dict)
    max_abs_drift: float | None = None  # largest |drift| over submitters this pass
    real_duration: float | None = None  # the real cycle's duration (s)
    notes: tuple[str, ...] = ()
    # matches in both up to interchangeable slots: (submitter, slot class), where a class is
    # the slots our matchmaking cannot tell apart (same attributes the jobs and policy
    # read, same claim, same ranks); a real match to slot A and ours to an identical slot B
    # agree here. MatchLog and the compared pass's slot classes only.
    agreed_equivalent: int | None = None
    equivalent_agreement: float | None = None   # agreed_equivalent / max(real, shadow)
    # the real cycle's time limits: {"real": {"schedds", "submitters"} out of time,
    # "predicted": the same as the compared pass predicted them (or None),
    # "groups_not_served": groups ours matched and the real cycle did not, when it ran
    # out of time}; empty when neither side has anything to say
    time_limits: dict[str, Any] = field(default_factory=dict)
    # why the counts differ (core.disagreement): each disagreeing submitter classified as
    # "pool changed", "out of time" or "unexplained", with the changes named; every change
    # seen between the capture and the real cycle; count_agreement with the explained
    # differences taken as agreeing (MatchLog only)
    unexplained_agreement: float | None = None
    disagreements: tuple[dict[str, Any], ...] = ()
    changes: tuple[str, ...] = ()
    # the compared pass captured the pool as the real cycle started (its NegotiatorLog
    # line), not before it
    aligned: bool = False
    # the unexplained differences re-predicted at the real accountant's update
    # (core.disagreement.repredict): {"at", "source", "delta_t", "seconds",
    # "unexplained", "explained", ...}, or {"skipped": why}; empty when nothing was left
    # unexplained (no re-run)
    repredicted: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class PassRecord:
    """Everything one pass writes to the ledger, in one transaction."""
    uuid: str
    pool: str
    started_at: float                   # wall clock when the pass began
    finished_at: float
    snapshot_time: int | None           # the snapshot's capture time
    status: str                         # "complete" | "partial" | "failed"
    reason: str | None                  # why partial / failed (one line), else None
    real_cycle_time: int | None         # newest real cycle seen in this pass (LastNegotiationCycleTime0)
    real_accountant_time: int | None    # the real accountant's LastUpdate in this pass's Accounting ads
    shadow_duration: float | None       # our cycle (s)
    capture_duration: float | None      # the snapshot (s)
    shadow_timings: dict[str, float] = field(default_factory=dict)
    pool_weight: float | None = None    # our cycle's pool size (weighted), the pie's total
    real_cycles: tuple[RealCycle, ...] = ()          # cycles first seen in this pass
    shadow_matches: tuple[MatchEntry, ...] = ()
    real_matches: tuple[MatchEntry, ...] = ()        # MatchLog matches of new real cycles
    submitters: tuple[SubmitterObs, ...] = ()
    groups: tuple[GroupObs, ...] = ()
    comparison: Comparison | None = None
    snapshot_dir: str | None = None
    warnings: tuple[str, ...] = ()
    # slot name -> slot class number in our cycle (only kept for the newest comparable
    # pass: the next pass compares real matches with ours up to interchangeable slots)
    slot_classes: dict[str, int] = field(default_factory=dict)
    # our cycle ran on a complete snapshot (every schedd answered), so the next pass may
    # compare it with the real cycle that followed, even when this pass is partial on the
    # real side (no negotiator ad, an Accounting ad without its priority)
    comparable: bool = False
    # seconds per step of the pass, for where its time goes: capture_<step>
    # (adapters.live CAPTURE_STEPS), pool (the pool from the capture), cycle (ours; its
    # phases are shadow_timings), real (what the real negotiator did, the comparison);
    # writing the ledger comes after
    pass_timings: dict[str, float] = field(default_factory=dict)
    # where the real cycle's time limits would stop it, as our cycle predicted
    # (CycleResult.time_limits; empty when the pool's negotiator ad gave no cost)
    time_limits: dict[str, Any] = field(default_factory=dict)
    # the real cycle whose start (its NegotiatorLog line) this pass's capture followed,
    # when the loop aligned it so (None: a pass at its interval)
    aligned_cycle: int | None = None
    # what the snapshot held, for explaining the comparison of this pass's cycle
    # (core.disagreement.digest; kept for the newest comparable passes, like slot_classes)
    digest: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Standing:
    """What the ledger holds beyond the newest pass, for alerting on it: when the newest
    complete pass began, and the newest comparison with when the pass that recorded it
    began (a pass that fails or sees no new real cycle compares nothing)."""
    last_complete_at: float | None = None
    comparison: "Comparison | None" = None
    comparison_at: float | None = None


@dataclass(frozen=True)
class Adjustment:
    """A recommendation applied to the pool (recorded in the ledger)."""
    key: str                            # what makes two recommendations the same change
    kind: str                           # factor | ceiling | floor | delete | setprio
    name: str                           # the accounting principal
    value: float | None
    applied_at: int
    lease_expires: int | None           # None: the change does not expire by itself
    command: str                        # what was run (shell-quoted), for the record
    method: str                         # "bindings" | "condor_userprio"
    outcome: str                        # "applied" | "failed: <message>" | "skipped: <why>"


# a record type -> its field names; any other type -> None (asked once per type)
_FIELDS: dict[type, tuple[str, ...] | None] = {}


def as_plain(value: Any) -> Any:
    """A record as plain dicts and lists, for JSON: what dataclasses.asdict gives (tuples
    become lists), without its deep copy of every leaf (a pass's record at 11,000 matches
    took 0.4 s that way)."""
    cls = type(value)
    try:
        names = _FIELDS[cls]
    except KeyError:
        names = _FIELDS[cls] = (tuple(f.name for f in dataclasses.fields(cls))
                                if dataclasses.is_dataclass(cls) else None)
    if names is not None:
        return {n: as_plain(getattr(value, n)) for n in names}
    if cls is list or cls is tuple:
        return [as_plain(v) for v in value]
    if cls is dict:
        return {k: as_plain(v) for k, v in value.items()}
    return value
