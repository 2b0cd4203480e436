"""Our cycle against the real one (shadow mode, issue 5): plain data in, a Comparison out.

A pass snapshots the pool at time T and runs our cycle on that snapshot: a prediction of
the real negotiator's next cycle, the first one that starts at or after T. A later pass
reads what really happened (the negotiator ad's cycle history, the MatchLog when there
is one, the Accounting ads) and `compare` sets the two side by side:

  * match level (MatchLog only): matches are compared as a multiset of (submitter, slot)
    pairs, since a partitionable slot can be matched several times in one cycle;
  * count level: matches per submitter and per group, and `count_agreement`, the share
    of matches both sides gave to the same submitters;
  * the submitters' shares and limits of both sides.

`priority_drift` checks the accountant's time step: our rule (`Accountant.
update_priorities`, the one place it is written) run from the real records of one pass
to the real accountant's time of the next, against the priorities it then reports.

No I/O, no clock: every time is passed in.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from typing import Any, Mapping, Sequence

from .accountant import Accountant, AccountantState
from .config import NegotiatorConfig
from .disagreement import explain, repredict
from .groups import ROOT, GroupTree
from .records import Comparison, GroupObs, MatchEntry, RealCycle, SubmitterObs


def compare(*, shadow_pass: str, shadow_snapshot_time: int,
            shadow_matches: Sequence[MatchEntry], shadow_submitters: Sequence[SubmitterObs],
            shadow_groups: Sequence[GroupObs], real_cycles: Sequence[RealCycle],
            real_matches: Sequence[MatchEntry] | None,
            real_submitters: Sequence[SubmitterObs] = (),
            real_groups: Sequence[GroupObs] = (),
            slot_classes: Mapping[str, int] | None = None,
            time_limits: Mapping[str, Any] | None = None,
            digest_before: Mapping[str, Any] | None = None,
            digest_after: Mapping[str, Any] | None = None,
            aligned: bool = False) -> Comparison:
    """Compare pass `shadow_pass`'s cycle (on its snapshot taken at
    `shadow_snapshot_time`) with the first real cycle that started at or after that time.

    `slot_classes` (slot name -> class in the shadow pass's cycle) also counts matches
    that agree up to interchangeable slots (`agreed_equivalent`): the negotiator's choice
    among identical slots is arbitrary (its sorts are unstable), so this is the figure
    that says whether ours would have made the real match. A real match to a slot the
    shadow pass did not see agrees with nothing.

    `real_cycles` is the negotiator ad's history as a later pass read it (any order);
    `real_matches` the MatchLog's Matched entries covering at least that cycle (None: no
    MatchLog); `real_submitters` / `real_groups` the Accounting ads of that later pass
    (SubmitterShare / SubmitterLimit, EffectiveQuota of the newest real cycle). Without
    `real_groups`, a group's real quota is the one the shadow pass's Accounting ads
    showed (the real cycle before the snapshot).

    The real cycle's MatchLog window is [time, end] (the log has whole seconds, so its
    end second belongs to it), or [time, next cycle's time) when its end is unknown.

    Source "matchlog": per-submitter and per-group real counts and the match-level
    figures from the window. "negotiator-ad": only the cycle's Matches count is known;
    per-submitter counts, `agreed`, `real_in_shadow`, `shadow_in_real` and
    `count_agreement` are None. "none": no real cycle since the snapshot; every real
    figure is None. Ratios whose denominator is 0 are None.

    With the MatchLog, each disagreeing submitter is classified (`core.disagreement`)
    from `digest_before`, the compared pass's digest, and `digest_after`, the comparing pass's (either
    None when not kept): `disagreements`, `changes`, `unexplained_agreement`. `aligned`:
    the compared pass captured the pool as this cycle started (recorded as it is)."""
    notes: list[str] = []
    cycles = sorted(real_cycles, key=lambda c: c.time)
    after = [c for c in cycles if c.time >= shadow_snapshot_time]
    shadow_total = len(shadow_matches)
    shadow_by_sub = Counter(m.submitter for m in shadow_matches)
    subs_shadow = {s.name: s for s in shadow_submitters}
    subs_real = {s.name: s for s in real_submitters}
    max_drift = max((abs(s.drift) for s in real_submitters if s.drift is not None), default=None)

    if not after:
        notes.append("no real cycle has run since the snapshot")
        return Comparison(
            shadow_pass=shadow_pass, real_cycle_time=None, real_cycles_between=0,
            real_matches=None, shadow_matches=shadow_total, agreed=None, real_in_shadow=None,
            shadow_in_real=None, count_agreement=None, source="none",
            per_submitter=_per_submitter(_submitter_names(shadow_submitters, shadow_by_sub, ()),
                                         None, shadow_by_sub, subs_shadow, {}),
            per_group=_per_group(shadow_groups, real_groups, None, real=False),
            max_abs_drift=max_drift, notes=tuple(notes))

    cycle = after[0]
    between = len(after)
    if between > 1:
        notes.append(f"{between} real cycles ran between the passes; compared with the first")
        if subs_real:
            notes.append("real shares and limits are the newest real cycle's, not the compared one's")
    if len(after) == len(cycles) and cycle.time > shadow_snapshot_time:
        notes.append(f"every cycle of the negotiator ad's history ({len(cycles)}) ran after the "
                     "snapshot: the first one after it may have left the history")

    agreed_eq = eq_agreement = None
    ours: list[MatchEntry] | None = None
    if real_matches is None:
        source = "negotiator-ad"
        real_total = cycle.matches
        real_by_sub = None
        agreed = real_in_shadow = shadow_in_real = count_agreement = None
    else:
        source = "matchlog"
        later = [c for c in cycles if c.time > cycle.time]
        window = _window(cycle, later[0] if later else None, notes)
        ours = [m for m in real_matches if m.time is not None and window[0] <= m.time
                and (window[1] is None or m.time <= window[1])]
        real_total = len(ours)
        if cycle.matches is not None and cycle.matches != real_total:
            notes.append(f"the MatchLog has {real_total} matches in the cycle's window, the "
                         f"negotiator ad counts {cycle.matches}")
        real_by_sub = Counter(m.submitter for m in ours)
        pairs = Counter((m.submitter, m.slot) for m in shadow_matches)
        agreed = sum((pairs & Counter((m.submitter, m.slot) for m in ours)).values())
        real_in_shadow = agreed / real_total if real_total else None
        shadow_in_real = agreed / shadow_total if shadow_total else None
        names = set(real_by_sub) | set(shadow_by_sub)
        both = sum(min(real_by_sub.get(n, 0), shadow_by_sub.get(n, 0)) for n in names)
        top = max(real_total, shadow_total)
        count_agreement = both / top if top else None
        if slot_classes:
            def cls(m: MatchEntry):
                return (m.submitter, slot_classes.get(m.slot, ("unknown slot", m.slot)))
            agreed_eq = sum((Counter(map(cls, shadow_matches)) & Counter(map(cls, ours))).values())
            eq_agreement = agreed_eq / top if top else None

    real_group_counts = None
    if real_by_sub is not None:
        real_group_counts = Counter()
        group_names = [g.name for g in shadow_groups] + [g.name for g in real_groups]
        for sub, n in real_by_sub.items():
            real_group_counts[_group_of(sub, subs_shadow, subs_real, group_names)] += n

    per_submitter = _flag_limits(_per_submitter(
        _submitter_names(shadow_submitters, shadow_by_sub, real_by_sub or ()),
        real_by_sub, shadow_by_sub, subs_shadow, subs_real), cycle)
    per_group = _per_group(shadow_groups, real_groups, real_group_counts, real=True)
    limits_seen = _time_limits_seen(cycle, time_limits or {}, per_group)
    if time_limits:
        notes.append(_time_limits_note(limits_seen))
        predicted_out = set(time_limits.get("submitters_out_of_time") or ())
        not_reached = set(time_limits.get("submitters_not_reached") or ())
        for name, row in per_submitter.items():
            row["shadow_out_of_time"] = name in predicted_out
            row["shadow_not_reached"] = name in not_reached
    why: dict[str, Any] = {}
    if ours is not None:
        group_names = [g.name for g in shadow_groups] + [g.name for g in real_groups]
        why = explain(per_submitter=per_submitter, real_matches=ours,
                      shadow_matches=shadow_matches, before=digest_before,
                      after=digest_after,
                      cycle=cycle, predicted=time_limits or {},
                      groups={n: _group_of(n, subs_shadow, subs_real, group_names)
                              for n in per_submitter})
    return Comparison(
        shadow_pass=shadow_pass, real_cycle_time=cycle.time, real_cycles_between=between,
        real_matches=real_total, shadow_matches=shadow_total, agreed=agreed,
        real_in_shadow=real_in_shadow, shadow_in_real=shadow_in_real,
        count_agreement=count_agreement, source=source,
        per_submitter=per_submitter, per_group=per_group,
        max_abs_drift=max_drift, real_duration=cycle.duration, notes=tuple(notes),
        agreed_equivalent=agreed_eq, equivalent_agreement=eq_agreement,
        time_limits=limits_seen,
        unexplained_agreement=why.get("unexplained_agreement"),
        disagreements=tuple(why.get("disagreements") or ()),
        changes=tuple(why.get("changes") or ()), aligned=aligned)


def repredicted(c: Comparison, counts: Mapping[str, int], *, captured: int, at: int,
                source: str, seconds: float | None = None, inputs: str | None = None,
                shadow_submitters: Sequence[SubmitterObs] = (),
                real_submitters: Sequence[SubmitterObs] = (),
                group_names: Sequence[str] = (), heard_again: int = 0) -> Comparison:
    """Comparison `c` with its unexplained differences checked against our cycle re-run on
    the compared snapshot (captured at `captured`) at the real accountant's update `at`
    (`source`: where that time came from; `seconds`: what the re-run took; `inputs`: what
    its pool was built from), `counts` its matches per submitter
    (`core.disagreement.repredict`). Each submitter's accounting group is read as
    `compare` reads it (the submitter records of either side, else the longest of
    `group_names` its name starts with). `heard_again`: how many submitter ads the re-run
    took as the schedds sent them again before the real cycle began (their LastHeardFrom,
    the negotiator's tie-break among equal priorities). What was done is recorded in
    `repredicted` and in a note, explained or not."""
    subs_shadow = {s.name: s for s in shadow_submitters}
    subs_real = {s.name: s for s in real_submitters}
    groups = {n: _group_of(n, subs_shadow, subs_real, group_names) for n in c.per_submitter}
    got = repredict(disagreements=c.disagreements, per_submitter=c.per_submitter,
                    counts=counts, captured=captured, at=at, groups=groups,
                    heard_again=heard_again)
    n, k = got["unexplained"], len(got["explained"])
    record = {"at": int(at), "source": source, "delta_t": int(at) - int(captured),
              "seconds": None if seconds is None else round(float(seconds), 3),
              **({"inputs": inputs} if inputs is not None else {}),
              **({"heard_again": int(heard_again)} if heard_again else {}),
              "unexplained": n, "explained": k,
              "explained_submitters": got["explained"],
              "new_differences": len(got["new_differences"]),
              "unexplained_agreement_before": c.unexplained_agreement}
    note = (f"re-predicted at phase 2: our cycle re-run at the real accountant's update "
            f"({at}, {int(at) - int(captured):+d} s from our capture; {source}"
            + (f"; {heard_again} submitter ad(s) as their schedds sent them again before "
               "the real cycle began: LastHeardFrom, the tie-break among equal priorities"
               if heard_again else "")
            + ") explains "
            f"{k} of {n} unexplained submitter(s) (it gives them their real count)"
            + (f"; it gives {len(got['new_differences'])} submitter(s) the capture's "
               "prediction had right another count (nothing explained in their groups)"
               if got["new_differences"] else "")
            + (f" ({seconds:.1f} s)" if seconds is not None else ""))
    return dataclasses.replace(
        c, disagreements=tuple(got["disagreements"]),
        unexplained_agreement=got["unexplained_agreement"],
        changes=c.changes + ((got["change"],) if got["change"] else ()),
        notes=c.notes + (note,), repredicted=record)


def not_repredicted(c: Comparison, why: str) -> Comparison:
    """Comparison `c`, whose unexplained differences could not be re-predicted (`why`),
    saying so."""
    return dataclasses.replace(c, notes=c.notes + (f"not re-predicted at phase 2: {why}",),
                               repredicted={"skipped": why})


def _window(cycle: RealCycle, nxt: RealCycle | None, notes: list[str]) -> tuple[int, int | None]:
    """The real cycle's MatchLog window, both ends included."""
    if cycle.end is not None and cycle.end >= cycle.time:
        hi: int | None = cycle.end
        if nxt is not None and nxt.time <= hi:
            notes.append(f"the next real cycle started in the second this one ended ({hi}): "
                         "MatchLog lines of that second may belong to either")
    elif nxt is not None:
        hi = nxt.time - 1
    else:
        hi = None
    return cycle.time, hi


def _submitter_names(shadow_submitters, shadow_by_sub, real_by_sub) -> list[str]:
    """Submitters (not group records) either side names, in a stable order."""
    names = dict.fromkeys(s.name for s in shadow_submitters if not s.is_group)
    names.update(dict.fromkeys(sorted(shadow_by_sub)))
    names.update(dict.fromkeys(sorted(real_by_sub)))
    return list(names)


def _per_submitter(names, real_by_sub, shadow_by_sub, subs_shadow, subs_real
                   ) -> dict[str, dict[str, Any]]:
    out = {}
    for name in names:
        sh, re_ = subs_shadow.get(name), subs_real.get(name)
        out[name] = {
            "real": real_by_sub.get(name, 0) if real_by_sub is not None else None,
            "shadow": shadow_by_sub.get(name, 0),
            "real_share": re_.real_share if re_ else None,
            "shadow_share": sh.shadow_share if sh else None,
            "real_limit": re_.real_limit if re_ else None,
            "shadow_limit": sh.shadow_submitter_limit if sh else None,
        }
    return out


def _time_limits_seen(cycle: RealCycle, predicted: Mapping[str, Any],
                      per_group: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """The real cycle's time limits beside what the compared pass predicted of them
    (core.time_limits): the schedds and submitters out of time on each side, whether the
    prediction named the same ("yes", "partly", "no"; None without one), and the groups
    ours served that a real cycle out of time did not. Empty when neither side has
    anything to say."""
    real = {"schedds": list(cycle.schedds_out_of_time),
            "submitters": list(cycle.submitters_out_of_time)}
    ran_out = bool(real["schedds"] or real["submitters"])
    if not (ran_out or predicted):
        return {}
    ours = None
    agrees = None
    if predicted:
        ours = {"schedds": list(predicted.get("schedds_out_of_time") or ()),
                "submitters": list(predicted.get("submitters_out_of_time") or ()),
                "submitters_not_reached": list(predicted.get("submitters_not_reached") or ()),
                "groups_not_reached": list(predicted.get("groups_not_reached") or ())}
        same = all(set(ours[k]) == set(real[k]) for k in ("schedds", "submitters"))
        agrees = "yes" if same else "partly" if (ours["schedds"] or ours["submitters"]) else "no"
    return {"real": real, "predicted": ours, "predicted_agrees": agrees,
            "groups_not_served": sorted(
                name for name, row in per_group.items()
                if ran_out and row.get("real_matches") == 0
                and (row.get("shadow_matches") or 0) > 0)}


def _time_limits_note(seen: Mapping[str, Any]) -> str:
    """`_time_limits_seen` in one line (a prediction was made)."""
    def side(d) -> str:
        parts = []
        if d["schedds"]:
            parts.append("schedds " + ", ".join(sorted(d["schedds"])))
        if d["submitters"]:
            parts.append(f"{len(d['submitters'])} submitter(s)")
        return " and ".join(parts) or "none"
    ours = seen["predicted"]
    return (f"time limits: out of time in the real cycle: {side(seen['real'])}; predicted: "
            f"{side(ours)}" + (" (the same)" if seen["predicted_agrees"] == "yes" else "")
            + f"; predicted not reached: {len(ours['submitters_not_reached'])} submitter(s), "
            f"{len(ours['groups_not_reached'])} group(s)")


def _flag_limits(rows: dict[str, dict[str, Any]], cycle: RealCycle) -> dict[str, dict[str, Any]]:
    """Mark the submitters the real cycle names as stopped at their share limit
    (LastNegotiationCycleSubmittersShareLimit) or out of time (...SubmittersOutOfTime)."""
    for name, row in rows.items():
        row["real_at_share_limit"] = name in cycle.submitters_share_limit
        row["real_out_of_time"] = name in cycle.submitters_out_of_time
    return rows


def _per_group(shadow_groups, real_groups, real_counts, *, real: bool) -> dict[str, dict[str, Any]]:
    later = {g.name: g for g in real_groups}
    out = {}
    for g in list(shadow_groups) + [g for g in real_groups
                                    if g.name not in {s.name for s in shadow_groups}]:
        quota = src = None
        if real:
            src = later.get(g.name) if later else g
            quota = src.real_quota if src is not None else None
        out[g.name] = {
            "real_quota": quota,
            "shadow_quota": g.shadow_quota,
            "real_matches": real_counts.get(g.name, 0) if real_counts is not None else None,
            "shadow_matches": g.shadow_matches,
            # weighted usage after each cycle: what each allocated, in quota units
            "real_usage_after": (later[g.name].real_usage
                                 if real and g.name in later else None),
            "shadow_usage_after": g.shadow_usage_after,
        }
    return out


def _group_of(submitter: str, subs_shadow, subs_real, group_names: Sequence[str]) -> str:
    """A real match's group: the submitter's group as either pass observed it, else the
    longest known group name the submitter's name starts with (followed by a dot), else
    the root."""
    for table in (subs_real, subs_shadow):
        s = table.get(submitter)
        if s is not None and s.group:
            return s.group
    low = submitter.lower()
    best, best_len = ROOT, 0
    for g in group_names:
        if g != ROOT and len(g) > best_len and low.startswith(g.lower() + "."):
            best, best_len = g, len(g)
    return best


def priority_drift(prev: Sequence[SubmitterObs], prev_time: int, cur: Sequence[SubmitterObs],
                   cur_time: int, *, halflife: float) -> dict[str, tuple[float, float]]:
    """For each principal in both `prev` and `cur`: our accountant's RUP at `cur_time`,
    started from the real records of `prev` at `prev_time`, and the relative drift
    (real - predicted) / predicted of the real RUP in `cur`.

    Our accountant's time step (`Accountant.update_priorities`) runs on a state whose
    records hold the real Priority (RUP), ResourcesUsed, WeightedResourcesUsed and
    HierWeightedResourcesUsed, with PRIORITY_HALFLIFE = `halflife`. Names whose real RUP
    is missing on either side are skipped; `cur_time <= prev_time` gives {} (no step to
    check). The accountant's usage in the meantime is taken as constant, which it is
    between two cycles: a drift shows a step the real accountant took differently (a
    half-life other than `halflife`, an admin's edit, a cycle in between)."""
    if cur_time <= prev_time:
        return {}
    real_now = {s.name: s.real_rup for s in cur if s.real_rup is not None}
    customers = {}
    for s in prev:
        if s.real_rup is None or s.name not in real_now:
            continue
        rec: dict[str, Any] = {"Priority": s.real_rup, "ResourcesUsed": int(s.resources_used),
                               "WeightedResourcesUsed": s.real_usage}
        if s.hier_usage:
            rec["HierWeightedResourcesUsed"] = s.hier_usage
        customers[s.name] = rec
    if not customers:
        return {}
    cfg = dataclasses.replace(NegotiatorConfig(), priority_halflife=float(halflife))
    acc = Accountant(AccountantState(last_update_time=int(prev_time), customers=customers),
                     cfg, GroupTree(cfg))
    acc.update_priorities(int(cur_time))
    out = {}
    for name in customers:
        predicted = acc.rup(name)
        out[name] = (predicted, (real_now[name] - predicted) / predicted)
    return out
