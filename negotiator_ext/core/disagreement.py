"""Why our cycle and the real one disagree: the pool changed, or unexplained (issue 32).

A shadow pass predicts the real cycle from a snapshot taken before it (or, aligned by the
NegotiatorLog, as it starts). Between the capture and the moment the real negotiator
reads the pool, jobs are submitted and removed, running jobs end and free their slots,
a schedd's submitter ads reach the collector: the real cycle then negotiates over another
pool, and a difference of counts says nothing about our rules. `explain` tells such
differences from the others, submitter by submitter, with the evidence the shadow has:

* the compared pass's *digest* (`digest`): the submitters with idle jobs our snapshot
  had, their idle job ids, the slots and which were claimed, the candidate slots;
* the comparing pass's digest (the pool after the real cycle), when there is one;
* the real cycle's MatchLog matches in its window, and its own figures (candidate slots,
  submitters and schedds out of time).

Evidence that a real match could not have been predicted (a *real excess* of its
submitter, explained): its job was not idle in our snapshot; its submitter had no idle
jobs there (its submitter ad had not reached the collector); its slot was claimed in our
snapshot, or not in it. Evidence that one of our matches could not happen (a *shadow
excess*, explained): its job was no longer idle after the cycle and the real cycle did
not match it (removed, held, or ran elsewhere); the real cycle ran out of time
(NEGOTIATOR_MAX_TIME_*) before it reached that submitter, during its turn (the
turn the deadline cut is the last one the cycle matched for), or before a later turn
of it (the NegotiatorLog names each turn a time limit skipped): compared within what the
real cycle reached, the rest counted as out of time against our prediction
(`time_limits`). Those changes move slots between submitters: the real cycle gives a
slot taken by a new job to it rather than to the submitter ours gave it to, and a slot
ours gave a removed job to someone else. So a residual excess is explained by displaced
slots ("displaced by ..."), a slot a change, and only where the change reaches: within
the accounting groups of the submitters it names (those either side matched on its
slot, its slot's claimant), and into another group only as far as that group's total
differs, against a group of the change's that differs the other way (`_displace`). A
real cycle that counted another number of candidate slots than our snapshot (the pool's
size changed: slots came or went) explains a residual as far as it moved the
submitter's limit (`_size_explains`). What remains is *unexplained*.

What `explain` leaves unexplained may be time rather than the pool's contents: our pass
predicts the submitters' priorities at its capture, the real accountant updates them in
its cycle's phase 2 (`accounting_time`), 15-30 s after the cycle's start at 100,000
slots, and a capture that came earlier still (a pass at its interval) sees the
priorities of an earlier moment. The shadow then runs our cycle once more on the
compared pass's snapshot at that time, and `repredict` takes a submitter's difference as
explained ("priorities moved ...", *pool changed*) only where that re-run gives it
exactly the real count and gives no submitter of its accounting group that the first
prediction had right another count: a real policy difference stays unexplained, since
the re-run applies the same rules.

`unexplained_agreement` is `count_agreement` with the explained differences taken as
agreeing: 1 - max(residual real excess, residual shadow excess) / max(real, shadow). With
nothing explained it equals count_agreement (which is 1 - max(real excess, shadow
excess) / max(real, shadow)); with every difference explained it is 1.

Plain data in and out: no I/O, no clock.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from typing import Any, Iterable, Mapping, Sequence

from .records import MatchEntry, RealCycle

# the classes of a disagreement
POOL_CHANGED = "pool changed"
OUT_OF_TIME = "out of time"
UNEXPLAINED = "unexplained"

# at most this many changes are named per submitter (the rest counted)
NAMED = 5


def digest(*, submitters: Mapping[str, int], idle_jobs: Mapping[str, Iterable[str]],
           slots: Mapping[str, bool], candidate_slots: int | None,
           heard: Mapping[str, int] | None = None,
           free_cpus: Mapping[str, float] | None = None,
           recent: Mapping[str, int] | None = None,
           entered: Mapping[str, int] | None = None,
           captured: int | None = None,
           owners: Mapping[str, str] | None = None,
           schedds: Mapping[str, Iterable[str]] | None = None,
           submitters_heard: Iterable[tuple[str, str, int]] | None = None
           ) -> dict[str, Any]:
    """What `explain` needs of one snapshot, as plain JSON-able data: the submitters with
    idle jobs (name -> idle jobs), each submitter's idle job ids ("Cluster.Proc") kept as
    proc ranges per cluster, the slots by name (True: claimed), our candidate slots,
    when the collector last heard from each slot (its LastHeardFrom, when known), each
    partitionable slot's free cores (its Cpus), and the idle jobs that entered their
    status in the last seconds before the capture (job id -> EnteredCurrentStatus), when
    each slot entered its state (EnteredCurrentState), when the snapshot was taken,
    whose each claimed slot was (its submitter: where a claim that ends moves a slot),
    in a pool of several schedds, the schedds each submitter has jobs on (its
    submitter ads' ScheddName: whose turn each schedd's deadline cut), and when the
    collector last heard each submitter ad ((Name, ScheddName, LastHeardFrom): the
    negotiator's tie-break among equal priorities, for the re-prediction of the pass
    before)."""
    jobs: dict[str, dict[str, list[list[int]]]] = {}
    for name, ids in idle_jobs.items():
        by_cluster: dict[str, list[int]] = {}
        get = by_cluster.get
        for j in ids:
            c, _, p = (j if type(j) is str else str(j)).partition(".")
            try:
                proc = int(p)
            except ValueError:
                continue
            procs = get(c)
            if procs is None:
                by_cluster[c] = [proc]
            else:
                procs.append(proc)
        # (a cluster of one job, the most common at scale, is its own range)
        jobs[name] = {c: [[ps[0], ps[0]]] if len(ps) == 1 else _ranges(ps)
                      for c, ps in by_cluster.items()}
    out = {"submitters": {k: int(v) for k, v in submitters.items()}, "jobs": jobs,
           "slots": dict(slots), "candidate_slots": candidate_slots}
    if heard:
        out["heard"] = {k: int(v) for k, v in heard.items()}
    if free_cpus:
        out["free_cpus"] = {k: float(v) for k, v in free_cpus.items()}
    if recent:
        out["recent"] = {k: int(v) for k, v in recent.items()}
    if entered:
        out["entered"] = {k: int(v) for k, v in entered.items()}
    if captured is not None:
        out["captured"] = int(captured)
    if owners:
        out["owners"] = {k: str(v) for k, v in owners.items() if v}
    if schedds:
        out["schedds"] = {k: sorted(set(map(str, v))) for k, v in schedds.items() if v}
    if submitters_heard:
        out["submitters_heard"] = [[str(n), str(s), int(t)] for n, s, t in submitters_heard]
    return out


def _ranges(procs: list[int]) -> list[list[int]]:
    out: list[list[int]] = []
    for p in sorted(set(procs)):
        if out and p == out[-1][1] + 1:
            out[-1][1] = p
        else:
            out.append([p, p])
    return out


def has_job(d: Mapping[str, Any], submitter: str, job: str) -> bool:
    """Whether digest `d` had `job` idle for `submitter`."""
    c, _, p = str(job).partition(".")
    try:
        proc = int(p)
    except ValueError:
        return False
    return any(lo <= proc <= hi for lo, hi in ((d.get("jobs") or {}).get(submitter) or {})
               .get(c, ()))


class _IdleAnywhere:
    """Whether a digest had a job idle for any submitter: its idle jobs' proc ranges by
    cluster, across submitters, made once (asked of each of our matches, at 100,000
    matches and 1,000 submitters a submitter at a time took minutes)."""

    def __init__(self, d: Mapping[str, Any]):
        self.ranges: dict[str, list] = defaultdict(list)
        for by_cluster in (d.get("jobs") or {}).values():
            for c, rs in (by_cluster or {}).items():
                self.ranges[c].extend(rs)

    def __call__(self, job: str) -> bool:
        c, _, p = str(job).partition(".")
        try:
            proc = int(p)
        except ValueError:
            return False
        return any(lo <= proc <= hi for lo, hi in self.ranges.get(c, ()))


def explain(*, per_submitter: Mapping[str, Mapping[str, Any]],
            real_matches: Sequence[MatchEntry], shadow_matches: Sequence[MatchEntry],
            before: Mapping[str, Any] | None, after: Mapping[str, Any] | None = None,
            cycle: RealCycle | None = None,
            predicted: Mapping[str, Any] | None = None,
            groups: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Each disagreeing submitter of a compared cycle, classified.

    `per_submitter`: the comparison's rows (real and shadow counts, limits); `real_matches`
    the real cycle's MatchLog matches (its window only); `shadow_matches` the compared
    pass's; `before` the compared pass's digest (None: not kept, e.g. the loop restarted:
    only what the rows say is used); `after` the comparing pass's; `cycle` the real
    cycle; `predicted` our pass's time-limit prediction (core.time_limits); `groups`
    each submitter's accounting group (None: one group for all).

    Returns {"disagreements": [{"submitter", "real", "shadow", "class", "changes",
    "unexplained"}], "changes": [every change seen, named, even where counts agree],
    "unexplained_agreement": float | None}."""
    real_by = defaultdict(list)
    for m in real_matches:
        real_by[m.submitter].append(m)
    shadow_by = defaultdict(list)
    for m in shadow_matches:
        shadow_by[m.submitter].append(m)
    real_jobs = {(m.submitter, m.job) for m in real_matches}
    # a cycle that reached NEGOTIATOR_MAX_TIME_PER_CYCLE names no submitter or schedd: the
    # negotiator skips every later turn ("skipped because MAX_TIME_PER_CYCLE ... exceeded")
    # and the turn running at the deadline ends early. Known from its phases' time (else
    # its whole duration) against the limit our pass's prediction read from the config.
    max_cycle = ((predicted or {}).get("limits") or {}).get("NEGOTIATOR_MAX_TIME_PER_CYCLE")
    ran = None
    if cycle is not None:
        ran = (sum(cycle.phase_durations) if None not in cycle.phase_durations
               else cycle.duration)
    cycle_cut = bool(max_cycle is not None and ran is not None and ran >= max_cycle)
    cut = bool(cycle is not None and (cycle.submitters_out_of_time or cycle.schedds_out_of_time)
               ) or cycle_cut
    out_subs = set(cycle.submitters_out_of_time) if cycle is not None else set()
    # the turns the NegotiatorLog names as skipped by a time limit (its schedd's, its
    # own, the cycle's): a submitter ours served in more than one turn (the prediction's
    # first-turn counts) got less in the real cycle, as far as the real cycle gave it at
    # least our first turn's. (A cut cycle names every submitter it skipped; without our
    # counts, no prediction made, a skip explains nothing.)
    skipped = set(cycle.submitters_skipped) if cycle is not None else set()
    first_turn = (predicted or {}).get("first_turn_matches") or {}
    # the submitter whose turn a schedd's deadline cut: a schedd out of time is named
    # (ScheddsOutOfTime) as the cycle skips its later turns; the turn running as its time
    # ran out ends early, unnamed ("Reached deadline ... stopping" in the NegotiatorLog).
    # It is the last the cycle matched for (the MatchLog's order), as is the turn running
    # at NEGOTIATOR_MAX_TIME_PER_CYCLE. (A turn cut by its submitter's own deadline is
    # named: the next spin skips that submitter.) Each schedd out of time cut the turn
    # running on it: with several, the last submitter matched for among those with jobs
    # on each (the digest's `schedds`; a MatchLog line does not name the schedd).
    last: set[str] = set()
    if cycle is not None and (cycle.schedds_out_of_time or cycle_cut) and real_matches:
        def when(i: int) -> tuple:
            return real_matches[i].time or 0, i
        last.add(real_matches[max(range(len(real_matches)), key=when)].submitter)
        on = (before or {}).get("schedds") or {}
        left = set(cycle.schedds_out_of_time) if on else set()
        if len(left) > 1:
            # (one walk back through the MatchLog's order, until each schedd has its turn)
            for i in sorted(range(len(real_matches)), key=when, reverse=True):
                name = real_matches[i].submitter
                found = left.intersection(on.get(name, ()))
                if found:
                    last.add(name)
                    left -= found
                    if not left:
                        break
    pred_out = set((predicted or {}).get("submitters_out_of_time") or ())
    pred_not = set((predicted or {}).get("submitters_not_reached") or ())
    seen_subs = (before or {}).get("submitters")
    slots_before = (before or {}).get("slots")
    heard = (before or {}).get("heard") or {}
    free_cpus = (before or {}).get("free_cpus") or {}
    recent = (before or {}).get("recent") or {}
    start = cycle.time if cycle is not None else None
    on_pslot: Counter = Counter()
    claimed_by_host = None

    def heard_late(slot: str) -> str | None:
        t = heard.get(slot)
        if t is not None and start is not None and t >= start:
            return (f"slot {slot}'s ad reached the collector at {t}, as or after the real "
                    f"cycle read it ({start}): our capture saw it later")
        return None

    # what the real cycle did that our snapshot could not foresee, match by match
    real_expl: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for name, ms in real_by.items():
        idle = seen_subs.get(name, 0) if seen_subs is not None else None
        for k, m in enumerate(ms):
            why = None
            if seen_subs is not None and not idle:
                why = (f"submitter {name} had no idle jobs in our snapshot (its submitter "
                       "ad reached the collector after our capture)")
            elif before is not None and (before.get("jobs") or {}).get(name) is not None \
                    and not has_job(before, name, m.job):
                why = f"job {m.job} of {name} was not idle in our snapshot (submitted after it)"
            elif idle is not None and k >= idle:
                why = (f"{name} had {idle} idle job(s) in our snapshot, the real cycle "
                       f"matched {len(ms)} (jobs submitted after it)")
            elif slots_before is not None and m.slot not in slots_before:
                why = f"slot {m.slot} was not in our snapshot"
            elif slots_before is not None and slots_before.get(m.slot) and not m.preempting:
                why = f"slot {m.slot} was claimed in our snapshot (its job ended since)"
            elif m.slot in free_cpus:
                on_pslot[m.slot] += 1
                if on_pslot[m.slot] > free_cpus[m.slot]:
                    why = (f"partitionable slot {m.slot} had {free_cpus[m.slot]:g} free "
                           "core(s) in our snapshot, the real cycle matched it "
                           f"{on_pslot[m.slot]} time(s) (a dynamic slot released since)")
            if why is None and slots_before is not None and after is not None:
                if claimed_by_host is None:
                    claimed_by_host = _claimed_by_host(slots_before)
                why = _released_child(m.slot, claimed_by_host, after.get("slots") or {})
            why = why or heard_late(m.slot)
            if why:
                real_expl[name].append((why, m.slot))
    # what ours did that the real pool no longer allowed
    idle_after = _IdleAnywhere(after) if after is not None else None
    shadow_expl: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for name, ms in shadow_by.items():
        for m in ms:
            why = heard_late(m.slot)
            t = recent.get(m.job)
            if why is None and t is not None and start is not None and t >= start:
                why = (f"job {m.job} of {name} became idle at {t}, as or after the real "
                       f"cycle began ({start}): our capture saw it later")
            if why is None and after is not None and (name, m.job) not in real_jobs \
                    and not idle_after(m.job):
                why = (f"job {m.job} of {name} left the queue after our capture (removed, "
                       "or no longer idle)")
            if why:
                shadow_expl[name].append((why, m.slot))
    # claims that ended between our capture and the cycle without a match on their slot:
    # the submitter's and its group's usage changed, and with it who comes first
    ended = (_claims_ended(before, after, start) + _jobs_arrived(before, after, start)
             + _slots_heard_changed(before, after, start))
    changes = sorted({w for ws in real_expl.values() for w, _ in ws}
                     | {w for ws in shadow_expl.values() for w, _ in ws}
                     | {c[0] for c in ended})
    size_changed = None
    if (cycle is not None and cycle.candidate_slots is not None and before is not None
            and before.get("candidate_slots") is not None
            and int(cycle.candidate_slots) != int(before["candidate_slots"])):
        size_changed = (f"the real cycle counted {cycle.candidate_slots} candidate slots, "
                        f"our snapshot {before['candidate_slots']} (the pool's size changed)")
        changes.append(size_changed)

    rows = []
    top_real = top_shadow = 0
    for name, row in per_submitter.items():
        r, s = row.get("real"), row.get("shadow") or 0
        if r is None:
            continue
        top_real += r
        top_shadow += s
        if r == s:
            continue
        named: list[str] = []
        if r > s:
            direct = real_expl.get(name, [])
            got = min(r - s, len(direct))
            named += [w for w, _ in direct[:got]]
            residual = r - s - got
        else:
            direct = shadow_expl.get(name, [])
            got = min(s - r, len(direct))
            named += [w for w, _ in direct[:got]]
            residual = s - r - got
            later = name in skipped and r >= first_turn.get(name, s)
            if residual and cut and (name in out_subs or r == 0 or name in last or later):
                pred = ("predicted by ours" if name in pred_out or name in pred_not
                        else "not predicted by ours" if predicted
                        else "ours made no time-limit prediction")
                how = ("its turn cut" if name in out_subs
                       else "not reached" if r == 0
                       else "its turn cut: the last it matched for" if name in last
                       else "a later turn skipped, as the NegotiatorLog says")
                named.append(f"the real cycle ran out of time before serving {name} "
                             f"({how}; {pred})")
                residual = 0
        rows.append({"submitter": name, "real": r, "shadow": s, "named": named,
                     "residual": residual, "side": "real" if r > s else "shadow",
                     "direct": got})

    _displace(rows, per_submitter, real_expl, shadow_expl, ended,
              real_matches, shadow_matches, before, groups)
    if size_changed:
        moved = abs(int(cycle.candidate_slots) - int(before["candidate_slots"]))
        for x in rows:
            take = min(x["residual"], _size_explains(per_submitter[x["submitter"]], moved,
                                                     int(before["candidate_slots"])))
            if take:
                x["residual"] -= take
                x["named"].append(size_changed)
    disagreements = []
    unexplained = {"real": 0, "shadow": 0}
    for x in rows:
        unexplained[x["side"]] += x["residual"]
        if x["residual"]:
            cls = UNEXPLAINED
        elif any("ran out of time" in w for w in x["named"]):
            cls = OUT_OF_TIME
        else:
            cls = POOL_CHANGED
        named = _dedupe(x["named"])
        disagreements.append({
            "submitter": x["submitter"], "real": x["real"], "shadow": x["shadow"],
            "class": cls, "unexplained": x["residual"],
            "changes": named[:NAMED] + ([f"and {len(named) - NAMED} more"]
                                        if len(named) > NAMED else [])})
    top = max(top_real, top_shadow)
    agreement = (1 - max(unexplained.values()) / top) if top else None
    if cut:
        changes.append("the real cycle ran out of time")
    return {"disagreements": disagreements, "changes": changes,
            "unexplained_agreement": agreement}


def _size_explains(row: Mapping[str, Any], moved: int, slots: int) -> int:
    """How much of a submitter's difference a pool `moved` candidate slots larger or
    smaller than our snapshot's `slots` explains: its limit's change, no more. Both
    limits known (ours, and the real cycle's SubmitterLimit): their difference, rounded
    up; only ours, with the real cycle stopping it at its share limit: its share of the
    slots that came or went, rounded up. Nothing where the limits agree, or where
    nothing says the limit bound it."""
    real, ours = row.get("real_limit"), row.get("shadow_limit")
    try:
        if real is not None and ours is not None:
            return max(0, math.ceil(abs(float(real) - float(ours)) - 1e-9))
        lim = ours if ours is not None else real
        if lim is None or not row.get("real_at_share_limit") or slots <= 0:
            return 0
        return max(0, math.ceil(moved * float(lim) / slots - 1e-9))
    except (TypeError, ValueError):
        return 0


def _displace(rows: list[dict[str, Any]], per_submitter: Mapping[str, Mapping[str, Any]],
              real_expl: Mapping[str, Sequence[tuple[str, str]]],
              shadow_expl: Mapping[str, Sequence[tuple[str, str]]],
              ended: Sequence[tuple[str, str | None, set[str]]],
              real_matches: Sequence[MatchEntry], shadow_matches: Sequence[MatchEntry],
              before: Mapping[str, Any] | None, groups: Mapping[str, str] | None) -> None:
    """The residual differences that changes of the pool explain by a slot they moved
    between submitters ("displaced"), in place in `rows`.

    A change moves at most one slot: a slot freed, taken by a new job, or lost to the real
    cycle gives one submitter a match and may take one from another; a claim that ended or
    a job that arrived changes who comes first, one slot's worth. A change spent on its own
    submitter's difference may explain one difference of the other side elsewhere (the
    slot a new job took was ours to give someone else); a change not spent so, one on each
    side. And only where the change could reach (its *locus*: the submitters it names,
    those either side matched on its slot, the claimant of its slot):

    * within the locus's own accounting groups, where the change reorders the
      submitters and their shares;
    * in another group only as far as that group's total differs between the two cycles
      in the direction of the difference, and a group of the locus differs the other way:
      a change that moved a slot across groups (a group's demand or usage, and with it
      the surplus it takes) shows on both groups' totals.

    A change with no locus (a claim whose claimant the digest did not keep, a slot no one
    matched) explains nothing elsewhere; nor does any change in a group whose totals agree
    and that it does not reach: a difference there stays unexplained however many changes
    the pool saw."""
    if not any(x["residual"] for x in rows):
        return
    groups = groups or {}

    def group(name: str) -> str:
        return groups.get(name, "")

    on_slot: dict[str, set[str]] = defaultdict(set)
    for m in list(real_matches) + list(shadow_matches):
        on_slot[m.slot].add(m.submitter)
    owners = (before or {}).get("owners") or {}

    def locus(name: str | None, slot: str | None) -> set[str]:
        out = {name} if name else set()
        if slot is not None:
            out |= on_slot.get(slot, set())
            if owners.get(slot):
                out.add(owners[slot])
        return out

    spent = {(x["submitter"], x["side"]): x["direct"] for x in rows}
    changes: list[dict[str, Any]] = []      # {why, groups, real, shadow}: what is left
    for side, table in (("real", real_expl), ("shadow", shadow_expl)):
        other = "shadow" if side == "real" else "real"
        for name, items in table.items():
            used = spent.get((name, side), 0)
            for k, (why, slot) in enumerate(items):
                changes.append({"why": why, "groups": {group(n) for n in locus(name, slot)},
                                side: 0 if k < used else 1, other: 1})
    for why, slot, who in ended:
        names = set(who) | locus(None, slot)
        changes.append({"why": why, "groups": {group(n) for n in names}, "real": 1,
                        "shadow": 1})
    delta: Counter = Counter()
    for name, row in per_submitter.items():
        if row.get("real") is not None:
            delta[group(name)] += row["real"] - (row.get("shadow") or 0)
    # what may cross into each group: its total's difference, in its direction
    across = {g: abs(d) for g, d in delta.items() if d}
    for x in rows:
        if not x["residual"]:
            continue
        g, side = group(x["submitter"]), x["side"]
        sign = 1 if side == "real" else -1
        used: list[str] = []
        for c in changes:
            if not x["residual"]:
                break
            if not c[side]:
                continue
            if g in c["groups"]:
                pass
            elif (delta[g] * sign > 0 and across.get(g, 0) > 0
                  and any(delta[h] * sign < 0 for h in c["groups"])):
                across[g] -= 1
            else:
                continue
            c[side] -= 1
            x["residual"] -= 1
            used.append(c["why"])
        if used:
            first = used[0]
            x["named"].append(f"{len(used)} slot(s) displaced by the changes of this cycle "
                              f"({first}" + (f", and {len(used) - 1} more)"
                                             if len(used) > 1 else ")"))


def _claims_ended(before: Mapping[str, Any] | None, after: Mapping[str, Any] | None,
                  start: int | None) -> list[tuple[str, str | None, set[str]]]:
    """The slots claimed in our snapshot that the next pass saw unclaimed since a time
    after our capture and before the real cycle began (their EnteredCurrentState): each
    (the change, its slot, its claimant when the digest knew it)."""
    if not before or not after or start is None or before.get("captured") is None:
        return []
    was, now = before.get("slots") or {}, after.get("slots") or {}
    since = after.get("entered") or {}
    t0 = int(before["captured"])
    owners = before.get("owners") or {}
    return [(f"the claim on slot {name} ended at {since[name]}, after our capture and "
             "before the real cycle (its submitter's usage changed)",
             name, {owners[name]} if owners.get(name) else set())
            for name, claimed in sorted(was.items())
            if claimed and now.get(name) is False and name in since
            and t0 <= since[name] <= start]


def _slots_heard_changed(before: Mapping[str, Any] | None, after: Mapping[str, Any] | None,
                         start: int | None) -> list[tuple[str, str | None, set[str]]]:
    """The slots whose claim or free cores differ between our snapshot and the next
    pass's, where the collector heard the new state (LastHeardFrom) after it last heard
    the one we saw and no later than the real cycle began: the cycle saw the new one.
    Each (the change, its slot, its claimants on either side when known)."""
    if not before or not after or start is None:
        return []
    was_heard, now_heard = before.get("heard") or {}, after.get("heard") or {}
    was, now = before.get("slots") or {}, after.get("slots") or {}
    was_free, now_free = before.get("free_cpus") or {}, after.get("free_cpus") or {}
    owners = [before.get("owners") or {}, after.get("owners") or {}]
    out = []
    for name, t in sorted(now_heard.items()):
        if not (t <= start and t > was_heard.get(name, -1) and name in was and name in now):
            continue
        who = {o[name] for o in owners if o.get(name)}
        if was[name] != now[name]:
            out.append((f"slot {name} was {'claimed' if was[name] else 'unclaimed'} in our "
                        f"snapshot, {'claimed' if now[name] else 'unclaimed'} when the "
                        f"collector heard of it at {t}, before the real cycle", name, who))
        elif name in was_free and name in now_free and was_free[name] != now_free[name]:
            out.append((f"partitionable slot {name} had {was_free[name]:g} free core(s) in "
                        f"our snapshot, {now_free[name]:g} when the collector heard of it "
                        f"at {t}, before the real cycle", name, who))
    return out


def _jobs_arrived(before: Mapping[str, Any] | None, after: Mapping[str, Any] | None,
                  start: int | None) -> list[tuple[str, str | None, set[str]]]:
    """The jobs idle in the next pass's snapshot since a time after our capture and
    before the real cycle began (EnteredCurrentStatus) that our snapshot did not have
    idle: submitted (or back to idle) in between, they changed their submitter's demand
    and its group's. Each (the change, no slot, its submitter)."""
    if not before or not after or start is None or before.get("captured") is None:
        return []
    t0 = int(before["captured"])
    idle_before = _IdleAnywhere(before)
    return [(f"job {job} became idle at {t}, after our capture and before the real cycle "
             "(its submitter's demand changed)", None,
             {s for s in (after.get("jobs") or {}) if has_job(after, s, job)})
            for job, t in sorted((after.get("recent") or {}).items())
            if t0 <= t <= start and not idle_before(job)]


def _claimed_by_host(before: Mapping[str, bool]) -> dict[str, list[tuple[str, str]]]:
    """The slots claimed in our snapshot by host: host -> [(the name's part before '@',
    the name)], made once for `_released_child` (asked of each real match: one pass
    over 100,000 slots a match took minutes)."""
    out: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for name, claimed in before.items():
        if claimed:
            p, a, h = name.partition("@")
            if a:
                out[h].append((p, name))
    return out


def _released_child(slot: str, claimed: Mapping[str, Sequence[tuple[str, str]]],
                    after: Mapping[str, bool]) -> str | None:
    """A partitionable slot `slot` ("slotN@host") one of whose dynamic slots
    ("slotN_M@host"), claimed in our snapshot (`claimed`: `_claimed_by_host`), was gone
    or unclaimed by the next pass: its resources came back to `slot` (a job ended)."""
    part, at, host = slot.partition("@")
    if not at:
        return None
    for p, name in claimed.get(host, ()):
        if p.startswith(part + "_") and not after.get(name):
            return (f"dynamic slot {name} of {slot} was released after our capture (its job "
                    "ended): its resources came back to the partitionable slot")
    return None


def _dedupe(items: Sequence[str]) -> list[str]:
    """The changes named once each, those of one kind counted ("job 3.0 ... (and 4 more
    jobs)" stays as separate lines: a change is one line)."""
    return list(dict.fromkeys(items))


def summary(disagreements: Sequence[Mapping[str, Any]]) -> Counter:
    """How many disagreeing submitters of each class."""
    return Counter(d.get("class") for d in disagreements)


# ---- the priorities' time: a re-prediction at the real accountant's update ---------------

def accounting_time(cycle: RealCycle, reported: int | None = None) -> tuple[int, str]:
    """When the real cycle's accountant updated the priorities (UpdatePriorities, early
    in its phase 2, after it read the collector), and where that comes from: `reported`,
    the LastUpdate of the Accounting ads read after the cycle, when it falls within the
    cycle (the very second the update took, which the negotiator publishes); else the
    NegotiatorLog's "Phase 2" line (written as phase 2 begins: the update follows once
    the slots' significant attributes are computed, seconds later in a large pool); else
    the cycle's start plus its phase 1 (LastNegotiationCyclePhase1Duration of the
    negotiator ad: phase 2 starts as phase 1 ends); else the cycle's start."""
    if (reported is not None and cycle.end is not None
            and cycle.time <= reported <= cycle.end):
        return int(reported), "the real accountant's LastUpdate after the cycle"
    if cycle.accounting_time is not None:
        return int(cycle.accounting_time), "the NegotiatorLog's phase 2 line"
    phase1 = cycle.phase_durations[0] if cycle.phase_durations else None
    if phase1 is not None and phase1 >= 0:
        return int(cycle.time + round(phase1)), "the cycle's start and its phase 1 duration"
    return int(cycle.time), "the cycle's start (its phase 2 time unknown)"


def unexplained_left(disagreements: Iterable[Mapping[str, Any]]) -> int:
    """How many disagreeing submitters are left unexplained."""
    return sum(1 for d in disagreements if d.get("class") == UNEXPLAINED)


def repredict(*, disagreements: Sequence[Mapping[str, Any]],
              per_submitter: Mapping[str, Mapping[str, Any]], counts: Mapping[str, int],
              captured: int, at: int, groups: Mapping[str, str] | None = None,
              heard_again: int = 0) -> dict[str, Any]:
    """The unexplained differences of a comparison against our cycle re-run on the same
    snapshot with the accountant at `at` (the real accountant's update,
    `accounting_time`; our capture was at `captured`): `counts`, the re-run's matches per
    submitter; `heard_again`: how many submitter ads the re-run took as their schedds
    sent them again before the real cycle began (named in the change).

    A submitter left unexplained is explained by the priorities' move ("priorities moved
    between our capture and the real cycle's accounting (Δt s)": class pool changed,
    nothing left unexplained) when the re-run gives it exactly its real count, and gives
    every submitter of its accounting group (`groups`, None: one group) that our cycle
    at the capture matched as the real one did the same count again. A re-run that takes
    a match from a submitter we had right to give it to one we had wrong reproduces no
    real cycle there; a re-run that does not move the submitter to its real count explains
    nothing of it (a difference of rules stays: the re-run applies the same ones).
    Explained and other disagreements are otherwise as they were.

    Returns {"disagreements", "unexplained_agreement" (recomputed as `explain` does),
    "explained" (the submitters), "unexplained" (before), "new_differences" (the
    submitters the capture's prediction had right and the re-run has not), "change" (the
    change named, or None when nothing was explained)}."""
    groups = groups or {}

    def group(name: str) -> str:
        return groups.get(name, "")

    new_diff = sorted(name for name, row in per_submitter.items()
                      if row.get("real") is not None and row["real"] == (row.get("shadow") or 0)
                      and counts.get(name, 0) != row["real"])
    broken = {group(n) for n in new_diff}
    dt = at - captured
    heard = (f", and {heard_again} submitter ad(s) were sent again before the cycle began "
             "(LastHeardFrom, the tie-break among equal priorities)" if heard_again else "")
    change = (f"priorities moved between our capture and the real cycle's accounting "
              f"({dt:+d} s){heard}: our cycle re-run at {at}"
              f"{' with them' if heard_again else ''} gives the real count")
    out, explained, before = [], [], 0
    for d in disagreements:
        d = dict(d)
        if d.get("class") == UNEXPLAINED:
            before += 1
            name = d["submitter"]
            d["repredicted"] = int(counts.get(name, 0))
            if d["repredicted"] == d.get("real") and group(name) not in broken:
                d["class"] = POOL_CHANGED
                d["unexplained"] = 0
                named = [change] + [c for c in d.get("changes") or ()]
                d["changes"] = named[:NAMED] + ([f"and {len(named) - NAMED} more"]
                                                if len(named) > NAMED else [])
                explained.append(name)
        out.append(d)
    top_real = sum(row["real"] for row in per_submitter.values() if row.get("real") is not None)
    top_shadow = sum(row.get("shadow") or 0 for row in per_submitter.values()
                     if row.get("real") is not None)
    left = {"real": 0, "shadow": 0}
    for d in out:
        if d.get("unexplained"):
            left["real" if d["real"] > d["shadow"] else "shadow"] += d["unexplained"]
    top = max(top_real, top_shadow)
    return {"disagreements": out,
            "unexplained_agreement": (1 - max(left.values()) / top) if top else None,
            "explained": explained, "unexplained": before, "new_differences": new_diff,
            "change": change if explained else None}
