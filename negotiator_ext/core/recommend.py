"""Recommended `condor_userprio` adjustments, from a window of shadow passes.

The shadow loop records, every pass, what each submitter uses (the real accountant's
WeightedResourcesUsed), whether it has idle jobs, its priority factor, floor, ceiling and
leases, and how far the real accountant's priority has drifted from what our accountant
rules give (`core.records.SubmitterObs`). Over a window of such passes this module says
which priority factors, ceilings and floors an admin could change, which stale records
could go, and which priorities could be reset. It only decides; `views.recommend` renders
the decisions as a table, JSON or a reviewable shell script, and `adapters.apply` applies
them.

The yardstick is the *fair share* (`fair_shares`): the split of what a group's submitters
use that equal effective priorities would give, i.e. the split HTCondor's priority system
converges to when every submitter that wants more has idle jobs. A submitter persistently
above it gets a higher factor (or a ceiling, when others are starved meanwhile); one
persistently below it while it has idle jobs gets a lower factor (or a floor when the
factor cannot go lower). Every factor, floor and ceiling change is a lease (rule A25), so
a wrong recommendation undoes itself; delete and setprio cannot expire and are only
recommended on unambiguous evidence.

Each rule needs *persistent* evidence: the gap must have the same sign and exceed the
threshold in at least `persistence` of the passes in which the submitter is eligible (it
ran, or it had idle jobs), over at least `min_passes` such passes. A pass where it was not
recorded or not eligible says nothing either way. Pure: plain data in, decisions out; the
caller passes `now`.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

from ..errors import InputError
from .records import GroupObs, SubmitterObs

__all__ = ["RecommendPolicy", "Recommendation", "KINDS", "fair_shares", "recommend"]

# Output order of the kinds (and the only kinds there are).
KINDS = ("factor", "ceiling", "floor", "delete", "setprio")
LEASED_KINDS = frozenset({"factor", "ceiling", "floor"})
MIN_FACTOR = 1.0            # -setfactor refuses less; a factor lease needs >= 1 (A25)
_EPS = 1e-9                 # slack for "at least persistence x passes" in floating point

Pass = tuple[Mapping[str, Any], Sequence[SubmitterObs], Sequence[GroupObs]]


@dataclass(frozen=True)
class RecommendPolicy:
    """The thresholds of the rules (knobs NEGOTIATOR_EXT_<name>, see `from_knobs`)."""
    gap: float = 0.2                # a relative gap |usage/fair - 1| counts when above this
    persistence: float = 0.8        # share of the eligible passes the gap must hold in
    min_passes: int = 6             # eligible passes needed before anything is said
    max_factor_step: float = 1.5    # a factor moves by at most this ratio per recommendation
    ceiling_gap: float = 1.0        # ceiling when usage > (1 + ceiling_gap) x fair share ...
    lease: int = 86400              # seconds every factor/floor/ceiling change lasts
    stale_days: float = 30          # delete records unused for longer than this
    drift: float = 0.05             # relative RUP drift that counts

    @classmethod
    def from_knobs(cls, knobs: Mapping[str, str], source: str = "<config>") -> "RecommendPolicy":
        """The policy from our knobs: names without the NEGOTIATOR_EXT_ prefix (any case),
        values as text (what `NegotiatorConfig.ext` holds); unset knobs keep the defaults.

        Raises InputError naming the knob for a value that is not a number, is negative,
        or makes no sense: MAX_FACTOR_STEP <= 1 (the factor could not move),
        RECOMMEND_PERSISTENCE outside (0, 1], RECOMMEND_MIN_PASSES not a whole number >= 1,
        LEASE_DURATION not a whole number of seconds >= 1."""
        up = {str(k).upper(): v for k, v in knobs.items()}
        kw: dict[str, Any] = {}
        for knob, attr in _KNOBS:
            if knob not in up or up[knob] is None or not str(up[knob]).strip():
                continue
            text = str(up[knob]).strip()

            def bad(what: str) -> InputError:
                return InputError(source, f"NEGOTIATOR_EXT_{knob} = {text}: {what}")

            try:
                v = float(text)
            except ValueError:
                raise bad("not a number") from None
            if not math.isfinite(v):
                raise bad("not a finite number")
            if v < 0:
                raise bad("cannot be negative")
            if attr == "max_factor_step" and v <= 1:
                raise bad("must be greater than 1 (the ratio a factor may move by)")
            if attr == "persistence" and not 0 < v <= 1:
                raise bad("must be a fraction in (0, 1]")
            if attr in ("min_passes", "lease"):
                if v != int(v) or v < 1:
                    raise bad("must be a whole number >= 1")
                v = int(v)
            kw[attr] = v
        return cls(**kw)


_KNOBS = (("RECOMMEND_GAP", "gap"), ("RECOMMEND_PERSISTENCE", "persistence"),
          ("RECOMMEND_MIN_PASSES", "min_passes"), ("MAX_FACTOR_STEP", "max_factor_step"),
          ("RECOMMEND_CEILING_GAP", "ceiling_gap"), ("LEASE_DURATION", "lease"),
          ("STALE_DAYS", "stale_days"), ("DRIFT_THRESHOLD", "drift"))


@dataclass(frozen=True)
class Recommendation:
    """One change to make with condor_userprio.

    kind: factor | ceiling | floor | delete | setprio. value: the new factor, ceiling,
    floor (whole numbers, weighted units) or real priority; None for delete. current: the
    value in place in the latest pass (None: no ceiling / no floor / not applicable).
    lease: seconds the change lasts (None for delete and setprio, which cannot expire).
    reason: one sentence for the admin. numbers: the figures behind it."""
    kind: str
    name: str
    value: float | None
    current: float | None
    lease: int | None
    reason: str
    numbers: dict[str, Any] = field(default_factory=dict, hash=False)

    @property
    def key(self) -> str:
        """The identity of the change, (kind, name, rounded value) as JSON text: two
        recommendations with the same key make the same change, so applying is idempotent
        on it. The value is rounded as the command writes it."""
        return json.dumps([self.kind, self.name, key_value(self.kind, self.value)])


def key_value(kind: str, value: float | None) -> float | int | None:
    """A recommendation's value as the command writes it: whole numbers for ceiling and
    floor, 2 decimals for factor and priority, None for delete."""
    if value is None:
        return None
    if kind in ("ceiling", "floor"):
        return int(round(value))
    return round(float(value), 2)


# ---- fair shares -----------------------------------------------------------------------

def _weight_factor(s: SubmitterObs) -> float:
    """The factor a submitter's fair share is weighted by: its policy factor (the factor
    without a lease), else its factor, else 1.0; a non-positive value (0 = unset in
    GET_PRIORITY) counts as 1.0."""
    for f in (s.policy_factor, s.factor):
        if f is not None and f > 0:
            return float(f)
    return 1.0


def fair_shares(subs: Sequence[SubmitterObs]) -> dict[str, float]:
    """Each submitter's fair share of what its group delivered in one pass.

    Within each group separately (submitters, `is_group` False, grouped by `group`), the
    pie is the weighted usage the real accountant reports for that group's submitters
    (`real_usage`): what was actually delivered, so the question is only how it should
    have been split. Each submitter weighs 1/factor (the policy factor, see
    `_weight_factor`): equal effective priorities, usage x factor, mean usage
    proportional to 1/factor. The split is weighted max-min (water-filling): a submitter
    without idle jobs wants no more than it uses, so it is capped at its usage and what
    it leaves goes to the others; submitters with idle jobs take any amount. This is the
    split HTCondor's priority system converges to when it equalises effective priorities.
    Group records are left out; a group that used nothing gives everyone 0.
    """
    by_group: dict[str, list[SubmitterObs]] = {}
    for s in subs:
        if not s.is_group:
            by_group.setdefault(s.group, []).append(s)
    out: dict[str, float] = {}
    for members in by_group.values():
        pie = sum(max(0.0, s.real_usage) for s in members)
        caps = {s.name: (None if s.idle_jobs > 0 else max(0.0, s.real_usage)) for s in members}
        weights = {s.name: 1.0 / _weight_factor(s) for s in members}
        out.update(_water_fill(pie, weights, caps))
    return out


def _water_fill(pie: float, weights: Mapping[str, float],
                caps: Mapping[str, float | None]) -> dict[str, float]:
    """Weighted max-min split of `pie`: raise a common level L, each member gets
    min(cap, L x weight), until the pie is used. Members whose cap lies below the current
    level are fixed at their cap and the level is recomputed for the rest; the level only
    rises as members are fixed, so one pass per round suffices."""
    shares: dict[str, float] = {}
    active = sorted(weights)
    remaining = pie
    while active:
        level = max(0.0, remaining) / sum(weights[n] for n in active)
        fixed = [n for n in active if caps[n] is not None and caps[n] <= level * weights[n]]
        if not fixed:
            for n in active:
                shares[n] = level * weights[n]
            break
        for n in fixed:
            shares[n] = caps[n]
            remaining -= caps[n]
        active = [n for n in active if n not in fixed]
    return shares


# ---- the evidence ------------------------------------------------------------------------

@dataclass(frozen=True)
class _Point:
    """One submitter in one complete pass: what it used and its fair share."""
    obs: SubmitterObs
    fair: float

    @property
    def gap(self) -> float | None:
        """usage / fair - 1; None when the fair share is 0 (nothing to compare with)."""
        return self.obs.real_usage / self.fair - 1.0 if self.fair > 0 else None


@dataclass(frozen=True)
class _Evidence:
    """The eligible passes of one test and those in which the test held."""
    eligible: tuple[_Point, ...]
    hits: tuple[_Point, ...]

    def persistent(self, policy: RecommendPolicy) -> bool:
        n = len(self.eligible)
        return n >= policy.min_passes and len(self.hits) >= policy.persistence * n - _EPS

    def mean(self, f: Callable[[_Point], float]) -> float:
        return sum(f(p) for p in self.eligible) / len(self.eligible)


def _evidence(points: Sequence[_Point], eligible: Callable[[_Point], bool],
              hit: Callable[[_Point], bool]) -> _Evidence:
    el = tuple(p for p in points if eligible(p))
    return _Evidence(el, tuple(p for p in el if hit(p)))


def _ran(p: _Point) -> bool:
    """Eligible for "above its fair share": it used something (and there was a pie)."""
    return p.obs.real_usage > 0 and p.fair > 0


def _waited(p: _Point) -> bool:
    """Eligible for "below its fair share": it had idle jobs (and there was a pie)."""
    return p.obs.idle_jobs > 0 and p.fair > 0


def _above(points, policy: RecommendPolicy, threshold: float | None = None) -> _Evidence:
    t = policy.gap if threshold is None else threshold
    return _evidence(points, _ran, lambda p: p.gap > t)


def _below(points, policy: RecommendPolicy) -> _Evidence:
    return _evidence(points, _waited, lambda p: p.gap < -policy.gap)


@dataclass(frozen=True)
class _Window:
    """The complete passes of the window, per submitter."""
    points: dict[str, list[_Point]]     # name -> its points, oldest first
    latest: dict[str, SubmitterObs]     # the newest complete pass's records, by name
    drifts: dict[str, list[float | None]]


def _window(passes: Sequence[Pass]) -> _Window:
    points: dict[str, list[_Point]] = {}
    drifts: dict[str, list[float | None]] = {}
    latest: dict[str, SubmitterObs] = {}
    for header, subs, _groups in passes:
        if header.get("status") != "complete":
            continue
        fair = fair_shares(subs)
        latest = {s.name: s for s in subs}
        for s in subs:
            drifts.setdefault(s.name, []).append(s.drift)
            if not s.is_group:
                points.setdefault(s.name, []).append(_Point(s, fair.get(s.name, 0.0)))
    return _Window(points, latest, drifts)


def _lease_running(s: SubmitterObs, kind: str, now: int) -> bool:
    """A lease of this kind is in effect: the negotiator refuses another (rule A25)."""
    exp = {"factor": s.factor_lease_expires, "ceiling": s.ceiling_lease_expires,
           "floor": s.floor_lease_expires}[kind]
    return exp > now


def _r(x: float) -> float:
    return round(x, 4)


def _figures(ev: _Evidence, s: SubmitterObs) -> dict[str, Any]:
    return {"mean_gap": _r(ev.mean(lambda p: p.gap)), "passes": len(ev.hits),
            "eligible_passes": len(ev.eligible),
            "fair_share": _r(ev.mean(lambda p: p.fair)),
            "usage": _r(ev.mean(lambda p: p.obs.real_usage)),
            "policy_factor": _weight_factor(s)}


# ---- the rules ---------------------------------------------------------------------------

def _factor_rule(name: str, pts: Sequence[_Point], s: SubmitterObs,
                 policy: RecommendPolicy, now: int) -> Recommendation | None:
    """Rule a. A submitter persistently above its fair share (in the passes where it ran)
    gets a higher factor; one persistently below it (in the passes where it had idle
    jobs) gets a lower one. The factor is what the priority system is meant to be steered
    with, so a persistent gap means it does not say what the pool delivers.

    New factor = policy factor x (1 + mean gap), the ratio clamped to
    [1/max_factor_step, max_factor_step] so one recommendation cannot swing the pool, and
    never below 1 (condor_userprio refuses it; a factor lease needs >= 1). The base is the
    policy factor, not a leased one, so a running lease is not compounded. Nothing when
    the evidence points both ways, when the factor would not move in that direction (a
    factor of 1 cannot go lower: the floor rule handles that starvation), when it equals
    the factor in place, or while a factor lease runs (the negotiator refuses a second).
    """
    above, below = _above(pts, policy), _below(pts, policy)
    up, down = above.persistent(policy), below.persistent(policy)
    if up == down or _lease_running(s, "factor", now):
        return None
    ev = above if up else below
    pf = _weight_factor(s)
    mean_gap = ev.mean(lambda p: p.gap)
    ratio = min(max(1.0 + mean_gap, 1.0 / policy.max_factor_step), policy.max_factor_step)
    new = max(MIN_FACTOR, round(pf * ratio, 2))
    current = s.factor if s.factor is not None and s.factor > 0 else pf
    if (up and new <= pf) or (down and new >= pf) or round(current, 2) == new:
        return None
    if up:
        reason = (f"used more than its fair share: mean gap {mean_gap:+.1%} over the "
                  f"{len(ev.eligible)} passes in which it ran, beyond {policy.gap:.0%} in "
                  f"{len(ev.hits)} of them")
    else:
        reason = (f"got less than its fair share while it had idle jobs: mean gap "
                  f"{mean_gap:+.1%} over {len(ev.eligible)} passes, beyond {policy.gap:.0%} "
                  f"in {len(ev.hits)} of them")
    numbers = _figures(ev, s) | {"step": _r(ratio)}
    return Recommendation("factor", name, new, current, policy.lease, reason, numbers)


def _starved(pts: Sequence[_Point], policy: RecommendPolicy) -> bool:
    return _below(pts, policy).persistent(policy)


def _ceiling_rule(name: str, pts: Sequence[_Point], s: SubmitterObs, starved: Sequence[str],
                  policy: RecommendPolicy, now: int) -> Recommendation | None:
    """Rule b. A submitter persistently above (1 + ceiling_gap) x its fair share while
    others of its group (`starved`: persistently below their fair share with idle jobs)
    wait gets a ceiling at its mean fair share (rounded up, whole weighted units, >= 1).
    A factor steers slowly (through decaying usage); a ceiling stops new matches above it
    at once, so it is for the case where someone is hurt meanwhile. Leased, so it lapses
    when the situation does. Nothing when a ceiling at or below that value is already set,
    or while a ceiling lease runs."""
    others = sorted(n for n in starved if n != name)
    if not others or _lease_running(s, "ceiling", now):
        return None
    ev = _above(pts, policy, threshold=policy.ceiling_gap)
    if not ev.persistent(policy):
        return None
    mean_fair = ev.mean(lambda p: p.fair)
    value = max(1, math.ceil(round(mean_fair, 6)))
    if 0 <= s.ceiling <= value:
        return None
    waiting = others[0] + (f" and {len(others) - 1} other(s)" if len(others) > 1 else "")
    reason = (f"used more than {1 + policy.ceiling_gap:g} x its fair share in {len(ev.hits)} "
              f"of {len(ev.eligible)} passes while {waiting} of its group got less than "
              f"theirs with idle jobs")
    numbers = _figures(ev, s) | {"starved": others}
    current = float(s.ceiling) if s.ceiling >= 0 else None
    return Recommendation("ceiling", name, float(value), current, policy.lease, reason, numbers)


def _floor_rule(name: str, pts: Sequence[_Point], s: SubmitterObs,
                policy: RecommendPolicy, now: int) -> Recommendation | None:
    """Rule c. A submitter persistently below its fair share with idle jobs whose policy
    factor is already 1 (a factor cannot help: it is as good as it gets), or persistently
    below its configured Floor while it has idle jobs, gets a floor at its mean fair share
    (rounded down, whole weighted units, >= 1): the floor round (2.4) serves it first.
    Leased. Nothing when its Floor already is at least that, or while a floor lease runs.
    """
    if _lease_running(s, "floor", now):
        return None
    starved = _below(pts, policy)
    pf = _weight_factor(s)
    if starved.persistent(policy) and pf <= MIN_FACTOR:
        ev = starved
        reason = (f"got less than its fair share while it had idle jobs: mean gap "
                  f"{ev.mean(lambda p: p.gap):+.1%} over {len(ev.eligible)} passes, beyond "
                  f"{policy.gap:.0%} in {len(ev.hits)} of them, and its priority factor is "
                  f"already {MIN_FACTOR:g}")
    else:
        ev = _evidence(pts, _waited, lambda p: s.floor > 0 and p.obs.real_usage < s.floor)
        if s.floor <= 0 or not ev.persistent(policy):
            return None
        reason = (f"used less than its Floor {s.floor} while it had idle jobs in "
                  f"{len(ev.hits)} of {len(ev.eligible)} passes")
    value = max(1, math.floor(round(ev.mean(lambda p: p.fair), 6)))
    if s.floor >= value:
        return None
    numbers = _figures(ev, s) | {"floor": s.floor}
    current = float(s.floor) if s.floor > 0 else None
    return Recommendation("floor", name, float(value), current, policy.lease, reason, numbers)


def _delete_rule(s: SubmitterObs, policy: RecommendPolicy, now: int) -> Recommendation | None:
    """Rule d. The accountant never deletes a record by itself (A14, 1.9), so records of
    people who left pile up. A submitter record (never a group's) with no usage and no
    idle or running jobs in the latest pass, last used (or, never used, begun) more than
    stale_days before `now`, can go. Not when neither time is known (no evidence of its
    age) or while any of its leases runs (someone set it recently). Deleting drops its
    priority factor, floor and ceiling too, hence the reason says its factor. Cannot
    expire."""
    if s.is_group or s.real_usage != 0 or s.idle_jobs or s.running_jobs:
        return None
    if any(_lease_running(s, k, now) for k in LEASED_KINDS):
        return None
    t = s.last_usage_time or s.begin_usage_time
    if t <= 0 or t >= now - policy.stale_days * 86400:
        return None
    days = (now - t) / 86400
    what = "last used" if s.last_usage_time else "never used, created"
    reason = (f"no usage and no jobs; {what} {days:.0f} days ago (more than "
              f"{policy.stale_days:g})")
    if s.factor is not None and s.factor > 0:
        reason += f"; deleting it also drops its priority factor {s.factor:g}"
    numbers = {"last_usage_time": s.last_usage_time, "begin_usage_time": s.begin_usage_time,
               "idle_days": _r(days), "factor": s.factor, "floor": s.floor,
               "ceiling": s.ceiling}
    return Recommendation("delete", s.name, None, None, None, reason, numbers)


def _setprio_rule(name: str, drifts: Sequence[float | None], s: SubmitterObs,
                  policy: RecommendPolicy) -> Recommendation | None:
    """Rule e. When the real accountant's real priority persistently differs from what
    our accountant rules give for the same time (drift, same sign, beyond `drift` in
    `persistence` of the >= min_passes passes where drift is known), the real record has
    been changed by something the rules do not model (a hand edit, a restored log, a
    reset): set it to our latest prediction. Submitter records only. Cannot expire."""
    if s.is_group or s.predicted_rup is None:
        return None
    known = [d for d in drifts if d is not None]
    if len(known) < policy.min_passes:
        return None
    pos = [d for d in known if d > policy.drift]
    neg = [d for d in known if d < -policy.drift]
    hits = max(pos, neg, key=len)
    if len(hits) < policy.persistence * len(known) - _EPS:
        return None
    value = round(s.predicted_rup, 2)
    mean = sum(known) / len(known)
    reason = (f"the real accountant's priority has drifted from what the accountant rules "
              f"give: mean drift {mean:+.1%}, beyond {policy.drift:.0%} in {len(hits)} of "
              f"{len(known)} passes")
    numbers = {"mean_drift": _r(mean), "passes": len(hits), "known_passes": len(known),
               "predicted_rup": _r(s.predicted_rup),
               "real_rup": None if s.real_rup is None else _r(s.real_rup)}
    return Recommendation("setprio", name, value, s.real_rup, None, reason, numbers)


# ---- all together ------------------------------------------------------------------------

def recommend(passes: Sequence[Pass], policy: RecommendPolicy, now: int) -> list[Recommendation]:
    """The recommendations for a window of passes (oldest first; only passes with status
    "complete" count), sorted by kind (factor, ceiling, floor, delete, setprio) then name.

    Only names present in the newest complete pass are considered; their figures come
    from every complete pass that recorded them. A record recommended for deletion gets
    no setprio (it would re-create the record). The GroupObs of each pass are not used:
    fair shares are split within each group from its submitters' records.
    """
    w = _window(passes)
    out: list[Recommendation] = []
    starved_by_group: dict[str, list[str]] = {}
    for name, s in w.latest.items():
        if not s.is_group and _starved(w.points.get(name, ()), policy):
            starved_by_group.setdefault(s.group, []).append(name)
    for name, s in w.latest.items():
        if s.is_group:
            continue
        pts = w.points.get(name, [])
        for rec in (_factor_rule(name, pts, s, policy, now),
                    _ceiling_rule(name, pts, s, starved_by_group.get(s.group, ()), policy, now),
                    _floor_rule(name, pts, s, policy, now)):
            if rec is not None:
                out.append(rec)
        deleted = _delete_rule(s, policy, now)
        if deleted is not None:
            out.append(deleted)
            continue
        rec = _setprio_rule(name, w.drifts.get(name, ()), s, policy)
        if rec is not None:
            out.append(rec)
    out.sort(key=lambda r: (KINDS.index(r.kind), r.name))
    return out
