"""What the accountant needs to know of a slot ad (reference 1.5, rules A15, A16).

`SlotUsage` is plain data taken from one slot ad: its resource name, claim state, the
customer it charges, and its slot weight. `slot_usage(ad, config)` makes one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from . import classads
from .adtext import AdView
from .config import NegotiatorConfig

CLAIMED_STATES = ("Claimed", "Preempting")


@dataclass(frozen=True, slots=True)
class SlotUsage:
    name: str
    resource_name: str              # "<Name>@<StartdIpAddr>" (rule A2)
    state: str | None
    activity: str | None
    accounting_group: str | None
    remote_user: str | None
    weight: float                   # GetSlotWeight (rule A15)
    concurrency_limits: str | None = None
    preempting_concurrency_limits: str | None = None
    matched_concurrency_limits: str | None = None

    # IsClaimed (rule A16) without and with DISCOUNT_SUSPENDED_RESOURCES, worked out
    # once (the accountant asks of every slot, every cycle)
    charged: tuple = field(init=False, repr=False, compare=False)
    # LoadLimits reads it: it holds concurrency limits, or is Matched
    counts_limits: bool = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        customer = None
        if self.state in CLAIMED_STATES:
            customer = (self.accounting_group if self.accounting_group is not None
                        else self.remote_user)
        # with the discount, a slot without an Activity is not counted either
        suspended = (self.activity or "suspended").lower() == "suspended"
        object.__setattr__(self, "charged", (customer, None if suspended else customer))
        object.__setattr__(self, "counts_limits", bool(
            self.concurrency_limits or self.preempting_concurrency_limits
            or self.state == "Matched"))

    def charged_customer(self, discount_suspended: bool) -> str | None:
        """IsClaimed (rule A16): the customer a claimed slot charges, or None."""
        return self.charged[1 if discount_suspended else 0]

    def renamed(self, name: str, resource_name: str) -> "SlotUsage":
        """The same usage under another slot's names (`dataclasses.replace` with
        `name` and `resource_name`, at half its cost: the derived fields, which
        read neither name, are copied rather than worked out again)."""
        new = _new_usage(SlotUsage)
        for k in _USAGE_SLOTS:
            _set(new, k, getattr(self, k))
        _set(new, "name", name)
        _set(new, "resource_name", resource_name)
        return new


_new_usage = object.__new__
_set = object.__setattr__
_USAGE_SLOTS = SlotUsage.__slots__


def slot_value(ad, attr: str):
    """An attribute's value, of a ClassAd or through an AdView."""
    return ad.value(attr) if type(ad) is AdView else classads.eval_attr(ad, attr)


def slot_string(ad, attr: str) -> str | None:
    v = slot_value(ad, attr)
    return v if isinstance(v, str) else None


def _classad(ad):
    return ad.ad if type(ad) is AdView else ad


def uses_negotiator_slot_weight(ad: classads.ClassAd, config: NegotiatorConfig) -> bool:
    """The negotiator's SLOT_WEIGHT stands for the ad's SlotWeight: the ad has none, or
    FORCE_NEGOTIATOR_SLOT_WEIGHT (obtainAdsFromCollector inserts it)."""
    return "SlotWeight" not in ad or config.force_negotiator_slot_weight


def slot_weight(ad: classads.ClassAd, config: NegotiatorConfig) -> float:
    """Rule A15: 1.0 without slot weights; else the ad's SlotWeight (the negotiator's
    SLOT_WEIGHT when the ad has none, or always with FORCE_NEGOTIATOR_SLOT_WEIGHT),
    1.0 when it does not evaluate to a number >= 0. Zero is a legal weight."""
    if not config.use_slot_weights:
        return 1.0
    if not uses_negotiator_slot_weight(ad, config):
        w = classads.as_number(slot_value(ad, "SlotWeight"))
    else:
        w = classads.as_number(ad.expr_value(config.slot_weight) if type(ad) is AdView
                               else classads.eval_expr(config.slot_weight, ad))
    if w is None or w < 0:
        return 1.0
    return w


def resource_name(ad: classads.ClassAd) -> str:
    """GetResourceName (rule A2): `<Name>@<StartdIpAddr>`, or `<Name>@` without address."""
    return f"{slot_string(ad, 'Name') or ''}@{slot_string(ad, 'StartdIpAddr') or ''}"


def slot_usage(ad: classads.ClassAd | AdView, config: NegotiatorConfig) -> SlotUsage:
    """(`ad` a ClassAd, or an AdView of one.) Name and StartdIpAddr are read for the
    usage's name and resource name alone (the simulator's `sim.ads._alike_facts` gives
    a slot the figures of another whose texts differ only in those)."""
    return SlotUsage(
        name=slot_string(ad, "Name") or "",
        resource_name=resource_name(ad),
        state=slot_string(ad, "State"),
        activity=slot_string(ad, "Activity"),
        accounting_group=slot_string(ad, "AccountingGroup"),
        remote_user=slot_string(ad, "RemoteUser"),
        weight=slot_weight(ad, config),
        concurrency_limits=slot_string(ad, "ConcurrencyLimits"),
        preempting_concurrency_limits=slot_string(ad, "PreemptingConcurrencyLimits"),
        matched_concurrency_limits=slot_string(ad, "MatchedConcurrencyLimits"),
    )


def matches_constraint(ad: classads.ClassAd | AdView, constraint: str | None) -> bool:
    """NEGOTIATOR_SLOT_CONSTRAINT, _SLOT_POOLSIZE_CONSTRAINT, _SUBMITTER_CONSTRAINT: the
    collector keeps an ad only when the constraint evaluates to true with MY = the ad.
    (`ad` a ClassAd, or an AdView of one.)"""
    if not constraint:
        return True
    if type(ad) is AdView:
        return ad.expr_value(constraint) is True
    return classads.eval_expr(constraint, ad) is True


def pie_weight(ad: classads.ClassAd, weight: float) -> float:
    """What a slot adds to the pool's weight (sumSlotWeights, 2.2 step 5): its weight
    times its integer GhostMultiplier (default 1), so that an offline ad can stand for
    many slots. (`ad` a ClassAd, or an AdView of one.)"""
    m = slot_value(ad, "GhostMultiplier") if "GhostMultiplier" in ad else None
    if isinstance(m, int) and not isinstance(m, bool):
        return weight * m
    return weight


def slot_size(ad: classads.ClassAd, weight: float) -> tuple[float, float]:
    """What one slot adds to the pool's size (step 8): its pie weight, and its
    effective size (a partitionable slot counts its Cpus, any other slot 1). (`ad` a
    ClassAd, or an AdView of one.)"""
    if classads.as_bool(slot_value(ad, "PartitionableSlot")):
        effective = classads.as_number(slot_value(ad, "Cpus")) or 0.0
    else:
        effective = 1.0
    return pie_weight(ad, weight), effective


def pool_sizes(ads, weights: list[float], config: NegotiatorConfig) -> tuple[int, float, float]:
    """Step 8 of the cycle: (cPoolsize, weightedPoolsize, effectivePoolsize) over the ads
    matching NEGOTIATOR_SLOT_POOLSIZE_CONSTRAINT (all ads when it is unset).
    `weights` are the ads' GetSlotWeight values, in the same order (GhostMultiplier is
    applied here)."""
    count, weighted, effective = 0, 0.0, 0.0
    for ad, w in zip(ads, weights):
        if not matches_constraint(ad, config.slot_poolsize_constraint):
            continue
        count += 1
        pie, eff = slot_size(ad, w)
        weighted += pie
        effective += eff
    if not config.use_slot_weights:
        weighted = float(count)
    return count, weighted, effective


# The attributes naming a slot's current user, first present wins (4.5 step 8, 4.10).
CURRENT_USER_ATTRS = ("PreemptingAccountingGroup", "PreemptingUser", "AccountingGroup",
                      "RemoteUser")


def current_user(ad: classads.ClassAd, prefix: str = "") -> str | None:
    """Whoever holds the slot now (4.5 step 8); with `prefix`, the cross-slot copy of
    another slot's attributes (`<prefix>AccountingGroup`, ...). (`ad` a ClassAd, or an
    AdView of one.)"""
    for attr in CURRENT_USER_ATTRS:
        user = slot_string(ad, prefix + attr)
        if user is not None:
            return user
    return None


def trimmed(ad: classads.ClassAd, usage: SlotUsage, config: NegotiatorConfig,
            now: int | None = None) -> bool:
    """trimStartdAds (2.2 step 9): slots the negotiator drops from the list it matches
    against, after the accountant has seen them; `now` is the cycle's time (for
    NEGOTIATOR_TRIM_SHUTDOWN_THRESHOLD). (`ad` a ClassAd, or an AdView of one.)"""
    if config.trim_shutdown_threshold > 0 and now is not None and shutting_down(
            _classad(ad), config.trim_shutdown_threshold, now):
        return True
    pslot = classads.as_bool(slot_value(ad, "PartitionableSlot")) is True
    if config.consider_preemption:
        if not config.consider_early_preemption:
            r = classads.as_number(slot_value(ad, "RetirementTimeRemaining"))
            if r is not None and r > 0:
                return True
    elif usage.state in CLAIMED_STATES and not pslot:
        return True
    if pslot and usage.state == "Claimed":
        if classads.as_bool(slot_value(ad, "WantMatching")) is False:
            return True
        if not config.match_working_cm_slots and slot_string(ad, "WorkingCM"):
            return True
    return False


def shutting_down(ad: classads.ClassAd, threshold: int, now: int) -> bool:
    """trimStartdAds_ShutdownLogic (NEGOTIATOR_TRIM_SHUTDOWN_THRESHOLD > 0): a slot whose
    DaemonShutdown, or else DaemonShutdownFast, is true `threshold` seconds from now is
    left out of the matchmaking. Both are evaluated with the ad's CurrentTime set to
    MyCurrentTime (the startd's clock; the negotiator's `now` when the ad has none) plus
    the threshold. As LookupBool reads them: a number counts (non-zero is true), an
    undefined value changes nothing, and DaemonShutdownFast, when it has a value, has the
    last word (false there keeps the slot even when DaemonShutdown is true)."""
    has_slow, has_fast = "DaemonShutdown" in ad, "DaemonShutdownFast" in ad
    if not (has_slow or has_fast):
        return False
    clock = classads.eval_number(ad, "MyCurrentTime")
    at = int(clock) if clock is not None and math.isfinite(clock) else int(now)
    probe = classads.copy_ad(ad)
    probe["CurrentTime"] = at + int(threshold)
    down = False
    for attr, present in (("DaemonShutdown", has_slow), ("DaemonShutdownFast", has_fast)):
        if present:
            v = classads.eval_bool(probe, attr)
            if v is not None:
                down = v
    return down
