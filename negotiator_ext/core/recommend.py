"""Recommended `condor_userprio` adjustments, from a window of shadow passes.

The shadow loop records, every pass, what each submitter uses (the real accountant's
WeightedResourcesUsed), its real effective priority, whether it has idle jobs and whether
our cycle's pie would have given it more, its priority factor, floor, ceiling and leases,
and how far the real accountant's priority has drifted from what our accountant rules
give (`core.records.SubmitterObs`); and each group's quota, usage and demand
(`core.records.GroupObs`). Over a window of such passes this module says which priority
factors, ceilings and floors an admin could change and which stale records could go
(changes, made by `adapters.apply`), and which priorities and group quotas an admin should
look at (report-only advice: nothing runs for them). It only decides; `views.recommend`
renders the decisions as a table, JSON or a reviewable shell script.

The yardstick is the *fair share* (`fair_shares`): the split of what a group's submitters
use that equal effective priorities would give. HTCondor does not aim at it: the pie
deliberately favours a submitter with a low accumulated priority. So a gap to the fair
share is only evidence of something the priority system does not correct when the
submitter's real priority ranks it ahead of its peers (`_ranked_ahead`): above its share
while the pie still favours it, or below it while the pie says it should get more. A
submitter persistently above it gets a higher factor (or a ceiling, when others are
starved meanwhile); one persistently below it while it waits for the pie gets a lower
factor (or a floor when the factor cannot go lower). One change per submitter per run.
Every factor, floor and ceiling change is a lease (rule A25), so a wrong recommendation
undoes itself; a delete cannot expire and is only recommended on unambiguous evidence.

Each rule needs *persistent* evidence (`_persistent`): the test must hold in at least
`persistence` of the passes in which the submitter (or group) is eligible, over at least
`min_passes` such passes spanning at least `min_hours` (persistence in passes alone would
be 6 minutes at a 60 s interval). A pass where it was not recorded or not eligible says
nothing either way. Pure: plain data in, decisions out; the caller passes `now` and the
adjustments it applied before.

A window reaching back past the ledger's detail (NEGOTIATOR_EXT_DETAIL_DAYS) gets the
older hours as hourly summaries (`adapters.ledger.Ledger.summarise`): one point per hour,
its figures the hour's means, standing for the complete passes of the hour that recorded
the submitter or group (`_Point.weight`) from the first of them to the last. Counts,
spans and means over passes come out as over those passes when the figures held all
the hour; a test is judged once on the hour's means, so an hour where it held in some
passes and not others counts all its passes on the side its means fall.
"""

from __future__ import annotations

import json
import math
import statistics
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

from ..errors import InputError
from .config import ext_number
from .fairshare import water_fill
from .records import Adjustment, GroupObs, SubmitterObs

__all__ = ["RecommendPolicy", "Recommendation", "KINDS", "LEASED_KINDS", "REPORT_ONLY_KINDS",
           "fair_shares", "recommend", "key_value", "lease_expires"]

# Output order of the kinds (and the only kinds there are).
KINDS = ("factor", "ceiling", "floor", "delete", "setprio", "group")
# Changes made as condor_userprio leases (-duration, rule A25).
LEASED_KINDS = frozenset({"factor", "ceiling", "floor"})
# Advice for an admin: shown, never applied, no command.
REPORT_ONLY_KINDS = frozenset({"setprio", "group"})
MIN_FACTOR = 1.0            # -setfactor refuses less; a factor lease needs >= 1 (A25)
RENEW_FRACTION = 0.1        # our own factor lease is renewed in the last 10% of its duration
LEASE_SLACK = 300           # s: our recorded lease end vs the pool's (clocks, command time)
_EPS = 1e-9                 # slack for comparisons in floating point

Pass = tuple[Mapping[str, Any], Sequence[SubmitterObs], Sequence[GroupObs]]


@dataclass(frozen=True)
class RecommendPolicy:
    """The thresholds of the rules (knobs NEGOTIATOR_EXT_<name>, see `from_knobs`)."""
    gap: float = 0.2                # a relative gap |usage/fair - 1| counts when above this
    persistence: float = 0.8        # share of the eligible passes the gap must hold in
    min_passes: int = 6             # eligible passes needed before anything is said
    min_hours: float = 6.0          # ... and the hours they must span (first to last)
    max_factor_step: float = 1.5    # a factor moves by at most this ratio per recommendation
    ceiling_gap: float = 1.0        # ceiling when usage > (1 + ceiling_gap) x fair share ...
    lease: int = 86400              # seconds every factor/floor/ceiling change lasts
    stale_days: float = 30          # delete records unused for longer than this
    drift: float = 0.05             # relative RUP drift that counts

    @classmethod
    def from_knobs(cls, knobs: Mapping[str, str]) -> "RecommendPolicy":
        """The policy from our knobs: names without the NEGOTIATOR_EXT_ prefix (any case),
        values as text (what `NegotiatorConfig.ext` holds); unset knobs keep the defaults.

        Read as every knob of ours is (`config.ext_number`: a finite number, not
        negative); InputError naming the knob also for values that make no sense:
        MAX_FACTOR_STEP <= 1 (the factor could not move), RECOMMEND_PERSISTENCE outside
        (0, 1], RECOMMEND_MIN_PASSES or LEASE_DURATION not a whole number >= 1,
        STALE_DAYS 0 (every idle record would be stale at once). RECOMMEND_MIN_HOURS 0
        drops the span requirement."""
        up = {str(k).upper(): v for k, v in knobs.items() if v is not None and str(v).strip()}
        kw: dict[str, Any] = {}
        for knob, attr in _KNOBS:
            if knob not in up:
                continue
            v = ext_number(up, knob, 0, minimum=0)

            def bad(what: str) -> InputError:
                return InputError(f"NEGOTIATOR_EXT_{knob}", f"{up[knob]}: {what}")

            if attr == "max_factor_step" and v <= 1:
                raise bad("must be greater than 1 (the ratio a factor may move by)")
            if attr == "persistence" and not 0 < v <= 1:
                raise bad("must be a fraction in (0, 1]")
            if attr == "stale_days" and v == 0:
                raise bad("must be greater than 0 (days without usage before a record is stale)")
            if attr in ("min_passes", "lease"):
                if v != int(v) or v < 1:
                    raise bad("must be a whole number >= 1")
                v = int(v)
            kw[attr] = v
        return cls(**kw)


_KNOBS = (("RECOMMEND_GAP", "gap"), ("RECOMMEND_PERSISTENCE", "persistence"),
          ("RECOMMEND_MIN_PASSES", "min_passes"), ("RECOMMEND_MIN_HOURS", "min_hours"),
          ("MAX_FACTOR_STEP", "max_factor_step"), ("RECOMMEND_CEILING_GAP", "ceiling_gap"),
          ("LEASE_DURATION", "lease"), ("STALE_DAYS", "stale_days"),
          ("DRIFT_THRESHOLD", "drift"))


@dataclass(frozen=True)
class Recommendation:
    """One change to make with condor_userprio, or (REPORT_ONLY_KINDS) advice to check.

    kind: factor | ceiling | floor | delete | setprio | group. name: the submitter, or the
    group for kind group. value: the new factor, ceiling, floor (whole numbers, weighted
    units) or the real priority our model gives (setprio); None for delete and group.
    current: the value in place in the latest pass (None: no ceiling / no floor / not
    applicable; a group's quota for kind group). lease: seconds the change lasts (None for
    delete and the report-only kinds). reason: one sentence for the admin. numbers: the
    figures behind it."""
    kind: str
    name: str
    value: float | None
    current: float | None
    lease: int | None
    reason: str
    numbers: dict[str, Any] = field(default_factory=dict, hash=False)

    @property
    def key(self) -> str:
        """The change as JSON text, (kind, name, value rounded as the command writes it),
        for display and the ledger's records. Whether a change is already in place is
        judged by (kind, name), not by this key (`adapters.apply`)."""
        return json.dumps([self.kind, self.name, key_value(self.kind, self.value)])


def key_value(kind: str, value: float | None) -> float | int | None:
    """A recommendation's value as the command writes it: whole numbers for ceiling and
    floor, 2 decimals for factor and priority, None for delete and group."""
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


def _by_group(subs: Sequence[SubmitterObs]) -> dict[str, list[SubmitterObs]]:
    """The submitter records (group records left out) by assigned group."""
    out: dict[str, list[SubmitterObs]] = {}
    for s in subs:
        if not s.is_group:
            out.setdefault(s.group, []).append(s)
    return out


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
    split equal effective priorities give; HTCondor itself also weighs accumulated usage
    (see `_ranked_ahead`). Group records are left out; a group that used nothing gives
    everyone 0.
    """
    out: dict[str, float] = {}
    for members in _by_group(subs).values():
        pie = sum(max(0.0, s.real_usage) for s in members)
        caps = {s.name: (None if s.idle_jobs > 0 else max(0.0, s.real_usage)) for s in members}
        names = sorted(caps)
        weights = {s.name: 1.0 / _weight_factor(s) for s in members}
        out.update(zip(names, water_fill(pie, [weights[n] for n in names],
                                         [caps[n] for n in names])))
    return out


def _peer_eups(subs: Sequence[SubmitterObs]) -> dict[str, float | None]:
    """For each submitter, the median real EUP of the *other* submitters of its group
    that have idle jobs (and a known EUP) in the same pass; None when there are none."""
    out: dict[str, float | None] = {}
    for members in _by_group(subs).values():
        for s in members:
            others = [o.real_eup for o in members
                      if o.name != s.name and o.idle_jobs > 0 and o.real_eup is not None]
            out[s.name] = statistics.median(others) if others else None
    return out


# ---- the evidence ------------------------------------------------------------------------

@dataclass(frozen=True)
class _Point:
    """One submitter in one complete pass: what it used, its fair share, the median EUP
    of its waiting peers (`_peer_eups`) and the pass's start. A summarised hour (the
    ledger's `Ledger.summarise`) is one point standing for the hour's passes that
    recorded the submitter (`weight`), from the first of them (`time`) to the last
    (`last`)."""
    obs: SubmitterObs
    fair: float
    peer_eup: float | None
    time: float
    weight: float = 1.0
    last: float | None = None

    @property
    def span(self) -> tuple[float, float]:
        return (self.time, self.time if self.last is None else self.last)

    @property
    def gap(self) -> float | None:
        """usage / fair - 1; None when the fair share is 0 (nothing to compare with)."""
        return self.obs.real_usage / self.fair - 1.0 if self.fair > 0 else None


@dataclass(frozen=True)
class _GroupPoint:
    """One group with a quota in one complete pass, and the unrelated groups that were
    short of their quota with demand in that pass (`_short`)."""
    obs: GroupObs
    short_others: tuple[str, ...]
    time: float
    weight: float = 1.0
    last: float | None = None

    @property
    def span(self) -> tuple[float, float]:
        return (self.time, self.time if self.last is None else self.last)


def _persistent(spans: Sequence[tuple[float, float]], n: float, hits: float,
                policy: RecommendPolicy) -> bool:
    """The persistence test every rule over several passes uses: at least min_passes
    eligible passes (`n`; `spans`: each eligible point's first and last pass start),
    spanning at least min_hours from the first to the last, with the test holding (`hits`)
    in at least `persistence` of them. A summarised hour counts the passes it stands for,
    all of them on the side its means fall."""
    return (n > 0 and n >= policy.min_passes - _EPS and hits >= policy.persistence * n - _EPS
            and max(b for _, b in spans) - min(a for a, _ in spans)
            >= policy.min_hours * 3600 - _EPS)


@dataclass(frozen=True)
class _Evidence:
    """The eligible passes of one test and those in which the test held."""
    eligible: tuple[Any, ...]
    hits: tuple[Any, ...]

    @property
    def n(self) -> int:
        """The eligible passes (a summarised hour counts those it stands for)."""
        return int(round(sum(p.weight for p in self.eligible)))

    @property
    def n_hits(self) -> int:
        return int(round(sum(p.weight for p in self.hits)))

    def persistent(self, policy: RecommendPolicy) -> bool:
        return _persistent([p.span for p in self.eligible],
                           sum(p.weight for p in self.eligible),
                           sum(p.weight for p in self.hits), policy)

    def mean(self, f: Callable[[Any], float]) -> float:
        """The mean over the eligible passes (a summarised hour weighs its passes)."""
        return (sum(f(p) * p.weight for p in self.eligible)
                / sum(p.weight for p in self.eligible))

    def span_hours(self) -> float:
        return (max(p.span[1] for p in self.eligible)
                - min(p.span[0] for p in self.eligible)) / 3600


def _evidence(points: Sequence[Any], eligible: Callable[[Any], bool],
              hit: Callable[[Any], bool]) -> _Evidence:
    el = tuple(p for p in points if eligible(p))
    return _Evidence(el, tuple(p for p in el if hit(p)))


def _waits(s: SubmitterObs) -> bool:
    """It waits for the pie: it has idle jobs, and in our cycle on the same snapshot the
    pie would have given it more than it got.

    `shadow_limit` is the first submitter limit our pie computed for it (2.5 step 8:
    share x pool - usage, at least 0, at most what is left of the pie): what the pie lets
    it *add* this cycle, already net of its usage. So "the pie would have given it more
    than it got" is shadow_limit > shadow_match_weight, i.e. share x pool > usage +
    matched (comparing the net limit with usage + matched would count usage twice).
    A submitter the pie gave all it allows (limit reached, or a limit of 0: its priority
    says it has enough) is not held back by anything a factor or floor addresses. Without
    our cycle's figures (shadow_limit None) idle jobs alone count. Idle jobs no slot can
    run are not told apart from a full pool by this test."""
    if s.idle_jobs <= 0:
        return False
    return s.shadow_limit is None or s.shadow_limit > s.shadow_match_weight + _EPS


def _comparable(p: _Point) -> bool:
    """The pass can say something about its share: there was a pie, and its real EUP and
    its waiting peers' median EUP are known."""
    return p.fair > 0 and p.obs.real_eup is not None and p.peer_eup is not None


def _ranked_ahead(p: _Point) -> bool:
    """Its real EUP is at most the median real EUP of the others of its group with idle
    jobs: the pie still ranks it ahead of (or level with) a typical waiting peer.

    HTCondor favours a submitter with low accumulated usage on purpose, so a gap to the
    equal-priority fair share is often the priority system working. It is evidence of a
    mis-set factor only when the priority does not explain it: above its share while it
    is still ranked ahead (its priority has not caught up with what it gets), or below its
    share although it is ranked ahead (starved although its priority says it should get
    more). A submitter above its share with a worse EUP than its peers is being corrected
    already; one below with a worse EUP is paying for its past usage."""
    return p.obs.real_eup <= p.peer_eup + _EPS


def _above(points, policy: RecommendPolicy, threshold: float | None = None) -> _Evidence:
    """Above its fair share by more than `threshold` (default: gap) while still ranked
    ahead; eligible where it ran and the pass is comparable."""
    t = policy.gap if threshold is None else threshold
    return _evidence(points, lambda p: p.obs.real_usage > 0 and _comparable(p),
                     lambda p: p.gap > t and _ranked_ahead(p))


def _below(points, policy: RecommendPolicy) -> _Evidence:
    """Below its fair share by more than gap although ranked ahead; eligible where it
    waited for the pie (`_waits`) and the pass is comparable."""
    return _evidence(points, lambda p: _waits(p.obs) and _comparable(p),
                     lambda p: p.gap < -policy.gap and _ranked_ahead(p))


def _short(g: GroupObs, policy: RecommendPolicy) -> bool:
    """A group below its quota by more than gap while it has demand (Requested, running
    plus idle, above its usage)."""
    return (_has_demand(g) and g.real_quota is not None and g.real_usage is not None
            and g.real_usage < g.real_quota * (1 - policy.gap))


def _has_demand(g: GroupObs) -> bool:
    return (g.real_requested is not None and g.real_usage is not None
            and g.real_requested > g.real_usage + _EPS)


def _related(a: str, b: str) -> bool:
    """a and b are the same group, or one contains the other (a parent's quota includes
    its children's)."""
    return a == b or a.startswith(b + ".") or b.startswith(a + ".")


@dataclass(frozen=True)
class _Window:
    """The complete passes of the window."""
    points: dict[str, list[_Point]]             # submitter -> its points, oldest first
    # name -> (time, drift, weight, last): as _Point's
    drifts: dict[str, list[tuple[float, float | None, float, float]]]
    groups: dict[str, list[_GroupPoint]]        # group -> its points, oldest first
    latest: dict[str, SubmitterObs]             # the newest complete pass's records, by name
    latest_groups: dict[str, GroupObs]


def _window(passes: Sequence[Pass], policy: RecommendPolicy) -> _Window:
    points: dict[str, list[_Point]] = {}
    drifts: dict[str, list[tuple[float, float | None, float, float]]] = {}
    groups: dict[str, list[_GroupPoint]] = {}
    latest: dict[str, SubmitterObs] = {}
    latest_groups: dict[str, GroupObs] = {}
    for header, subs, grps in passes:
        if header.get("status") != "complete":
            continue
        t = header.get("started_at")
        if t is None:
            raise InputError(f"pass {header.get('uuid', '?')}",
                             "no started_at: the pass cannot be placed in time")
        t = float(t)
        # a summarised hour: its means, standing for the complete passes that recorded
        # each principal, from the first of the hour's complete passes to the last
        summ = header.get("summary") or {}
        first = float(summ.get("first_started") or t)
        last = float(summ.get("last_started") or first)
        w_sub, w_grp = summ.get("submitter_passes") or {}, summ.get("group_passes") or {}
        fair, peers = fair_shares(subs), _peer_eups(subs)
        latest = {s.name: s for s in subs}
        latest_groups = {g.name: g for g in grps}
        for s in subs:
            w = float(w_sub.get(s.name, 1)) if summ else 1.0
            drifts.setdefault(s.name, []).append((first, s.drift, w, last))
            if not s.is_group:
                points.setdefault(s.name, []).append(
                    _Point(s, fair.get(s.name, 0.0), peers.get(s.name), first, w, last))
        short = [g.name for g in grps if _short(g, policy)]
        for g in grps:
            if g.real_quota is not None and g.real_usage is not None:
                others = tuple(sorted(n for n in short if not _related(n, g.name)))
                w = float(w_grp.get(g.name, 1)) if summ else 1.0
                groups.setdefault(g.name, []).append(_GroupPoint(g, others, first, w, last))
    return _Window(points, drifts, groups, latest, latest_groups)


def lease_expires(s: SubmitterObs, kind: str) -> int:
    """The end of the submitter's lease of a leased kind (0: none), as the pool shows it."""
    return {"factor": s.factor_lease_expires, "ceiling": s.ceiling_lease_expires,
            "floor": s.floor_lease_expires}[kind]


def _lease_running(s: SubmitterObs, kind: str, now: int) -> bool:
    """A lease of this kind is in effect: the negotiator refuses another (rule A25)."""
    return lease_expires(s, kind) > now


def _own_lease(s: SubmitterObs, kind: str, applied: Sequence[Adjustment]) -> Adjustment | None:
    """The lease of this kind the pool shows, if it is one we applied: the newest applied
    adjustment of that kind and name whose recorded end is within LEASE_SLACK of the
    pool's (the negotiator counts -duration from its own clock)."""
    exp = lease_expires(s, kind)
    if exp <= 0:
        return None
    for adj in reversed(applied):
        if (adj.kind == kind and adj.name == s.name and adj.outcome == "applied"
                and adj.lease_expires is not None
                and abs(adj.lease_expires - exp) <= LEASE_SLACK):
            return adj
    return None


def _r(x: float) -> float:
    return round(x, 4)


def _figures(ev: _Evidence, s: SubmitterObs) -> dict[str, Any]:
    return {"mean_gap": _r(ev.mean(lambda p: p.gap)), "passes": ev.n_hits,
            "eligible_passes": ev.n, "span_hours": _r(ev.span_hours()),
            "fair_share": _r(ev.mean(lambda p: p.fair)),
            "usage": _r(ev.mean(lambda p: p.obs.real_usage)),
            "policy_factor": _weight_factor(s)}


# ---- the rules ---------------------------------------------------------------------------

def _factor_rule(name: str, pts: Sequence[_Point], s: SubmitterObs, policy: RecommendPolicy,
                 now: int, applied: Sequence[Adjustment]) -> Recommendation | None:
    """Rule a. A submitter persistently above its fair share while still ranked ahead
    (`_above`) gets a higher factor; one persistently below it while it waits for the pie
    and is ranked ahead (`_below`) gets a lower one. The factor is what the priority
    system is meant to be steered with, so such a gap means it does not say what the pool
    should deliver.

    New factor = policy factor x (1 + mean gap), the ratio clamped to
    [1/max_factor_step, max_factor_step] so one recommendation cannot swing the pool, and
    never below 1 (condor_userprio refuses it; a factor lease needs >= 1). The base is the
    policy factor, not a leased one, so a lease is not compounded, and a lease (running or
    ended) will give way to the policy factor, so the new factor is compared with that.
    Nothing when the evidence points both ways, or when the factor would not move in that
    direction (a factor of 1 cannot go lower: the floor rule handles that starvation).

    While a factor lease runs the negotiator refuses another (A25), so nothing, except to
    renew our own lease (one `applied` records) in the last RENEW_FRACTION of its
    duration while the window still shows the gap: the renewal is shown then, and can be
    applied once the running lease has ended."""
    exp = s.factor_lease_expires
    own = _own_lease(s, "factor", applied)
    renewal = (own is not None and exp > now
               and exp - now <= RENEW_FRACTION * (own.lease_expires - own.applied_at))
    if exp > now and not renewal:
        return None
    above, below = _above(pts, policy), _below(pts, policy)
    up, down = above.persistent(policy), below.persistent(policy)
    if up == down:
        return None
    ev = above if up else below
    pf = _weight_factor(s)
    mean_gap = ev.mean(lambda p: p.gap)
    ratio = min(max(1.0 + mean_gap, 1.0 / policy.max_factor_step), policy.max_factor_step)
    new = max(MIN_FACTOR, round(pf * ratio, 2))
    if (up and new <= pf) or (down and new >= pf):
        return None
    if up:
        reason = (f"used more than its fair share while its priority still ranked it ahead: "
                  f"mean gap {mean_gap:+.1%} over the {ev.n} passes in which it "
                  f"ran, beyond {policy.gap:.0%} in {ev.n_hits} of them")
    else:
        reason = (f"got less than its fair share while it waited for the pie and its "
                  f"priority ranked it ahead: mean gap {mean_gap:+.1%} over "
                  f"{ev.n} passes, beyond {policy.gap:.0%} in {ev.n_hits} of them")
    numbers = _figures(ev, s) | {"step": _r(ratio)}
    if renewal:
        reason += (f"; renews our factor lease applied at {own.applied_at}, which ends at "
                   f"{exp} (the negotiator refuses a new one until then)")
        numbers["renews_lease_until"] = exp
    current = s.factor if s.factor is not None and s.factor > 0 else pf
    return Recommendation("factor", name, new, current, policy.lease, reason, numbers)


def _starved(pts: Sequence[_Point], policy: RecommendPolicy) -> bool:
    return _below(pts, policy).persistent(policy)


def _ceiling_rule(name: str, pts: Sequence[_Point], s: SubmitterObs, starved: Sequence[str],
                  policy: RecommendPolicy, now: int) -> Recommendation | None:
    """Rule b. A submitter persistently above (1 + ceiling_gap) x its fair share while
    ranked ahead, while others of its group (`starved`: persistently below their fair
    share while waiting and ranked ahead) wait, gets a ceiling at its mean fair share
    (rounded up, whole weighted units, >= 1). A factor steers slowly (through decaying
    usage); a ceiling stops new matches above it at once, so it is for the case where
    someone is hurt meanwhile, and it replaces the factor change (one change per
    submitter per run). Leased, so it lapses when the situation does. Nothing when a
    ceiling at or below that value is already set, or while a ceiling lease runs."""
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
    reason = (f"used more than {1 + policy.ceiling_gap:g} x its fair share in {ev.n_hits} "
              f"of {ev.n} passes while {waiting} of its group got less than "
              f"theirs waiting for the pie")
    numbers = _figures(ev, s) | {"starved": others}
    current = float(s.ceiling) if s.ceiling >= 0 else None
    return Recommendation("ceiling", name, float(value), current, policy.lease, reason, numbers)


def _floor_rule(name: str, pts: Sequence[_Point], s: SubmitterObs,
                policy: RecommendPolicy, now: int) -> Recommendation | None:
    """Rule c. A submitter persistently below its fair share while it waits for the pie
    and is ranked ahead (`_below`; and not persistently above it too: the evidence would
    point both ways) whose policy factor is already 1 (a factor cannot help: it is as good
    as it gets), or persistently below its configured Floor while it
    waits (`_waits`; a floor bypasses priorities, so they are not asked), gets a floor at
    its mean fair share (rounded down, whole weighted units, >= 1): the floor round (2.4)
    serves it first. The floor is absolute (rule N3): the floor round lets the submitter
    add up to its whole Floor in one cycle, not Floor - usage, and the reason says so.
    Replaces the factor change (one change per submitter per run). Leased. Nothing when
    its Floor already is at least that, or while a floor lease runs."""
    if _lease_running(s, "floor", now):
        return None
    starved = _below(pts, policy)
    pf = _weight_factor(s)
    if (pf <= MIN_FACTOR and starved.persistent(policy)
            and not _above(pts, policy).persistent(policy)):
        ev = starved
        reason = (f"got less than its fair share while it waited for the pie and its "
                  f"priority ranked it ahead: mean gap {ev.mean(lambda p: p.gap):+.1%} over "
                  f"{ev.n} passes, beyond {policy.gap:.0%} in {ev.n_hits} of "
                  f"them, and its priority factor is already {MIN_FACTOR:g}")
    else:
        ev = _evidence(pts, lambda p: _waits(p.obs) and p.fair > 0,
                       lambda p: s.floor > 0 and p.obs.real_usage < s.floor)
        if s.floor <= 0 or not ev.persistent(policy):
            return None
        reason = (f"used less than its Floor {s.floor} while it waited for the pie in "
                  f"{ev.n_hits} of {ev.n} passes")
    value = max(1, math.floor(round(ev.mean(lambda p: p.fair), 6)))
    if s.floor >= value:
        return None
    reason += (f"; a Floor of {value} lets it add up to {value} in one cycle's floor round "
               f"(the floor is absolute, not Floor - usage: rule N3)")
    numbers = _figures(ev, s) | {"floor": s.floor}
    current = float(s.floor) if s.floor > 0 else None
    return Recommendation("floor", name, float(value), current, policy.lease, reason, numbers)


def _delete_rule(s: SubmitterObs, policy: RecommendPolicy, now: int) -> Recommendation | None:
    """Rule d. The accountant never deletes a record by itself (A14, 1.9), so records of
    people who left pile up. A submitter record (never a group's) with no usage and no
    idle or running jobs in the latest pass, last used (or, never used, begun) more than
    stale_days before `now`, can go. Held jobs are not observed (the submitter ads count
    only idle and running ones), so a record whose owner has only held jobs looks idle.
    Not when neither time is known (no evidence of its age), nor for a record someone set
    something on: a Floor, a Ceiling, or any lease (running, or ended and not yet
    restored). Deleting drops its priority factor too (whether that factor is a hand-set
    one or the default cannot be told from the record), hence the reason says its
    factor. Cannot expire."""
    if s.is_group or s.real_usage != 0 or s.idle_jobs or s.running_jobs:
        return None
    if s.floor > 0 or s.ceiling >= 0 or any(lease_expires(s, k) > 0 for k in LEASED_KINDS):
        return None
    t = s.last_usage_time or s.begin_usage_time
    if t <= 0 or t >= now - policy.stale_days * 86400:
        return None
    days = (now - t) / 86400
    what = "last used" if s.last_usage_time else "never used, created"
    reason = (f"no usage and no idle or running jobs; {what} {days:.0f} days ago (more than "
              f"{policy.stale_days:g})")
    if s.factor is not None and s.factor > 0:
        reason += f"; deleting it also drops its priority factor {s.factor:g}"
    numbers = {"last_usage_time": s.last_usage_time, "begin_usage_time": s.begin_usage_time,
               "idle_days": _r(days), "factor": s.factor}
    return Recommendation("delete", s.name, None, None, None, reason, numbers)


def _setprio_rule(name: str, drifts: Sequence[tuple[float, float | None, float, float]],
                  s: SubmitterObs,
                  policy: RecommendPolicy) -> Recommendation | None:
    """Rule e, report-only. Drift is the one-step error of our accountant's prediction of
    the real priority, pass by pass. When it persistently has one sign beyond `drift`
    (`_persistent` over the passes where it is known), our model and the real accountant
    disagree: the real record may have been changed by something the rules do not model
    (an accountant restart, a restored log, a hand edit), or our model is wrong. Setting
    the real priority to our model's value could not be undone by a lease and, with the
    drift recomputed every pass, would be repeated every run; so it is advice for an
    admin to check, shown with our model's value, and never applied. Submitter records
    only."""
    if s.is_group or s.predicted_rup is None:
        return None
    known = [x for x in drifts if x[1] is not None]
    if not known:
        return None
    weight = (lambda xs: sum(x[2] for x in xs))
    pos = [x for x in known if x[1] > policy.drift]
    neg = [x for x in known if x[1] < -policy.drift]
    hits = max(pos, neg, key=weight)
    n, n_hits = weight(known), weight(hits)
    if not _persistent([(x[0], x[3]) for x in known], n, n_hits, policy):
        return None
    mean = sum(x[1] * x[2] for x in known) / n
    reason = (f"the real accountant's priority has drifted from what our accountant rules "
              f"predict: mean drift {mean:+.1%}, beyond {policy.drift:.0%} in "
              f"{round(n_hits)} of {round(n)} passes; advice for an admin to check (after an "
              f"accountant restart or a hand edit, say), never applied")
    numbers = {"mean_drift": _r(mean), "passes": round(n_hits), "known_passes": round(n),
               "predicted_rup": _r(s.predicted_rup),
               "real_rup": None if s.real_rup is None else _r(s.real_rup)}
    return Recommendation("setprio", name, round(s.predicted_rup, 2), s.real_rup, None,
                          reason, numbers)


def _group_rule(name: str, pts: Sequence[_GroupPoint], g: GroupObs,
                policy: RecommendPolicy) -> Recommendation | None:
    """Rule f, report-only. A group (with a quota, EffectiveQuota) persistently below its
    quota by more than gap while it has demand (`_short`), or persistently above it by
    more than gap while an unrelated group (neither contains the other) is short in the
    same pass. Quotas are configuration (GROUP_QUOTA_<g>, GROUP_ACCEPT_SURPLUS), which
    condor_userprio cannot change, and a group record's factor does not move its HGQ
    allocation; so it is advice to review them, never applied, with no command."""
    def over(p: _GroupPoint) -> bool:
        return p.obs.real_usage > p.obs.real_quota * (1 + policy.gap) and bool(p.short_others)
    below = _evidence(pts, lambda p: _has_demand(p.obs), lambda p: _short(p.obs, policy))
    above = _evidence(pts, lambda p: p.obs.real_usage > 0, over)
    down, up = below.persistent(policy), above.persistent(policy)
    if up == down:
        return None
    ev = above if up else below
    usage, quota = ev.mean(lambda p: p.obs.real_usage), ev.mean(lambda p: p.obs.real_quota)
    knobs = f"review GROUP_QUOTA_{name} / GROUP_ACCEPT_SURPLUS"
    if down:
        reason = (f"used less than its quota while it had demand: mean usage {usage:.4g} "
                  f"against a mean quota {quota:.4g}, short by more than {policy.gap:.0%} in "
                  f"{ev.n_hits} of {ev.n} passes; {knobs}")
        numbers = {"requested": _r(ev.mean(lambda p: p.obs.real_requested))}
    else:
        short = sorted({n for p in ev.hits for n in p.short_others})
        reason = (f"used more than its quota while {short[0]}"
                  + (f" and {len(short) - 1} other group(s)" if len(short) > 1 else "")
                  + f" stayed below theirs with demand: mean usage {usage:.4g} against a "
                  f"mean quota {quota:.4g}, beyond {policy.gap:.0%} in {ev.n_hits} of "
                  f"{ev.n} passes; {knobs}")
        numbers = {"short_groups": short}
    numbers = {"usage": _r(usage), "quota": _r(quota), **numbers, "passes": ev.n_hits,
               "eligible_passes": ev.n, "span_hours": _r(ev.span_hours())}
    return Recommendation("group", name, None, g.real_quota, None, reason, numbers)


# ---- what the window holds -----------------------------------------------------------------

@dataclass(frozen=True)
class WindowEvidence:
    """What a window holds against what the rules need: its complete passes (a
    summarised hour counts the complete passes it stands for) and the hours from the
    first one's start to the last one's, beside `min_passes` and `min_hours`."""
    passes: int
    hours: float
    min_passes: int
    min_hours: float

    @property
    def enough(self) -> bool:
        """Enough for `_persistent` if every pass recorded a principal as eligible."""
        return (self.passes > 0 and self.passes >= self.min_passes
                and self.hours >= self.min_hours - _EPS / 3600)


def window_evidence(passes: Sequence[Pass], policy: RecommendPolicy) -> WindowEvidence:
    n, first, last = 0, None, None
    for header, _subs, _grps in passes:
        if header.get("status") != "complete" or header.get("started_at") is None:
            continue
        summ = header.get("summary") or {}
        t = float(header["started_at"])
        a = float(summ.get("first_started") or t)
        b = float(summ.get("last_started") or a)
        n += int(summ.get("complete", 1)) if summ else 1
        first = a if first is None else min(first, a)
        last = b if last is None else max(last, b)
    hours = (last - first) / 3600 if first is not None else 0.0
    return WindowEvidence(n, hours, policy.min_passes, policy.min_hours)


# ---- all together ------------------------------------------------------------------------

def recommend(passes: Sequence[Pass], policy: RecommendPolicy, now: int,
              applied: Sequence[Adjustment] = ()) -> list[Recommendation]:
    """The recommendations for a window of passes (oldest first; only passes with status
    "complete" count, each header with its "started_at"), sorted by kind (KINDS order)
    then name. `applied`: the adjustments recorded before (the ledger's `adjustments()`),
    used only to recognise our own factor leases for renewal.

    Only names present in the newest complete pass are considered; their figures come
    from every complete pass that recorded them. One change per submitter: a delete, else
    a ceiling, else a floor, else a factor change (a ceiling or a floor acts at once
    where a factor acts slowly, so it replaces the factor change rather than adding a
    second fix for the same imbalance); setprio advice may come with it. A record
    recommended for deletion gets nothing else. Groups get only report-only advice.

    Raises InputError for a complete pass without started_at.
    """
    w = _window(passes, policy)
    out: list[Recommendation] = []
    starved_by_group: dict[str, list[str]] = {}
    for name, s in w.latest.items():
        if not s.is_group and _starved(w.points.get(name, ()), policy):
            starved_by_group.setdefault(s.group, []).append(name)
    for name, s in w.latest.items():
        if s.is_group:
            continue
        deleted = _delete_rule(s, policy, now)
        if deleted is not None:
            out.append(deleted)
            continue
        pts = w.points.get(name, [])
        change = (_ceiling_rule(name, pts, s, starved_by_group.get(s.group, ()), policy, now)
                  or _floor_rule(name, pts, s, policy, now)
                  or _factor_rule(name, pts, s, policy, now, applied))
        advice = _setprio_rule(name, w.drifts.get(name, ()), s, policy)
        out.extend(r for r in (change, advice) if r is not None)
    for name, g in w.latest_groups.items():
        rec = _group_rule(name, w.groups.get(name, ()), g, policy)
        if rec is not None:
            out.append(rec)
    out.sort(key=lambda r: (KINDS.index(r.kind), r.name))
    return out
