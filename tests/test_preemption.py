"""Preemption with the ephemeral Remote* attributes: live usage, the match-list cache's
PREEMPTION_*_STABLE checks (reference 4.4, 4.10), and the manual's group-quota
preemption clause over several cycles."""

from __future__ import annotations

import dataclasses
from collections import Counter

from negotiator_ext.cycle import run_cycle
from negotiator_ext.pool import load_pool
from poolmaker import (DOMAIN, Expr, accounting, apply_matches, claimed, job, make_pool,
                       running_by_submitter, submitters_for)

ALICE, BOB, CAROL = (f"{u}@{DOMAIN}" for u in ("alice", "bob", "carol"))

# Constant job-independent ranks, so that PREEMPTION_RANK decides the order (M6).
PREEMPT = """
NEGOTIATOR_CONSIDER_PREEMPTION = True
NEGOTIATOR_PRE_JOB_RANK = 0
NEGOTIATOR_POST_JOB_RANK = 0
"""


def victims(owners: list[str]) -> tuple[list[dict], list[dict]]:
    """One claimed 1-core slot per entry of `owners`, each running a job of that user."""
    slots, jobs = [], []
    for i, user in enumerate(owners, start=1):
        j = job(900 + i, 0, user, JobStatus=2)
        jobs.append(j)
        slots.append(claimed(f"slot{i}@node{i}.{DOMAIN}", j, f"{user}@{DOMAIN}"))
    return slots, jobs


def one_cycle(tmp_path, slots, jobs, config, accounting_ads):
    running = running_by_submitter(jobs)
    pool = load_pool(make_pool(tmp_path, slots=slots, jobs=jobs, config=config,
                               submitters=submitters_for(jobs, running),
                               accounting_ads=accounting_ads))
    return run_cycle(pool)


def preempted(result) -> Counter:
    return Counter(m.preempting for m in result.matches)


def test_remote_usage_is_live_when_the_cache_rechecks(tmp_path):
    """RemoteUserResourcesInUse is alice's usage as it stands at each evaluation: with
    PREEMPTION_REQUIREMENTS_STABLE = False the cached list is re-checked before each
    pop, so bob stops preempting once alice is down to 8 (10 -> 9 -> 8)."""
    slots, jobs = victims(["alice"] * 10)
    jobs += [job(1, p, "bob") for p in range(10)]
    acc = [accounting(ALICE, priority=5000.0), accounting(BOB, priority=500.0)]
    config = PREEMPT + "PREEMPTION_REQUIREMENTS = RemoteUserResourcesInUse > 8\n"
    r = one_cycle(tmp_path / "stable", slots, jobs, config, acc)
    # Stable (the default): the list built when alice had 10 is popped to its end. Past
    # bob's limit (share 10 * 5000/(500 * 11) = 9.09) the cached path still lets a
    # preemption through on the unclaimed counters, which no preemption used (M4).
    assert preempted(r) == {ALICE: 10}
    r = one_cycle(tmp_path / "unstable", slots, jobs,
                  config + "PREEMPTION_REQUIREMENTS_STABLE = False\n", acc)
    assert preempted(r) == {ALICE: 2}
    assert {x.reason for x in r.rejections} == {"PREEMPTION_REQUIREMENTS == False"}
    # Without the cache every request scans afresh and sees the live value too.
    r = one_cycle(tmp_path / "nocache", slots, jobs,
                  config + "NEGOTIATOR_MATCHLIST_CACHING = False\n", acc)
    assert preempted(r) == {ALICE: 2}


def test_preemption_rank_is_live_when_the_cache_rechecks(tmp_path):
    """PREEMPTION_RANK = RemoteUserResourcesInUse preempts the heaviest user first.
    Stable, the order is the one sorted at the first scan (all of alice's 6 first);
    with PREEMPTION_RANK_STABLE = False a changed rank sends the request to a fresh
    scan, so bob's 6 preemptions level alice and carol at 2 each."""
    slots, jobs = victims(["alice"] * 6 + ["carol"] * 4)
    jobs += [job(1, p, "bob") for p in range(6)]
    acc = [accounting(ALICE, priority=5000.0), accounting(CAROL, priority=5000.0),
           accounting(BOB, priority=500.0)]
    config = PREEMPT + "PREEMPTION_REQUIREMENTS = True\nPREEMPTION_RANK = RemoteUserResourcesInUse\n"
    r = one_cycle(tmp_path / "stable", slots, jobs, config, acc)
    assert preempted(r) == {ALICE: 6}
    r = one_cycle(tmp_path / "unstable", slots, jobs,
                  config + "PREEMPTION_RANK_STABLE = False\n", acc)
    assert preempted(r) == {ALICE: 4, CAROL: 2}
    assert all(m.state == 0 for m in r.matches)     # all by priority


# The manual's example ("Maintaining Accounting Group Quotas With Preemption Policy",
# seeds/group-quota-preemption-policy.txt), as it is configured there.
GROUP_CLAUSE = """
CLAIM_WORKLIFE = 0
MAXJOBRETIREMENTTIME = 0
PREEMPTION_REQUIREMENTS = True
NEGOTIATOR_CONSIDER_PREEMPTION = True
GROUP_NAMES = A, B, C
GROUP_QUOTA_A = 5
GROUP_QUOTA_B = 5
GROUP_QUOTA_C = 5
GROUP_ACCEPT_SURPLUS = TRUE
PREEMPTION_REQUIREMENTS = $(PREEMPTION_REQUIREMENTS) && (((SubmitterGroupResourcesInUse < SubmitterGroupQuota) && (RemoteGroupResourcesInUse > RemoteGroupQuota)) || (SubmitterGroup =?= RemoteGroup))
"""


def usage_by_group(slots: list[dict]) -> dict[str, int]:
    got = Counter(s["AccountingGroup"].split(".")[0] for s in slots if s.get("AccountingGroup"))
    return {g: got.get(g, 0) for g in "ABC"}


def test_group_quota_clause_drives_5_10_0_to_5_5_5(tmp_path):
    slots, jobs = [], []
    n = 0
    for group, count in (("A", 5), ("B", 10)):
        for p in range(count):
            n += 1
            j = job(10 + n, 0, "user", group=group, JobStatus=2)
            jobs.append(j)
            slots.append(claimed(f"slot{n}@node{n}.{DOMAIN}", j, f"{group}.user@{DOMAIN}",
                                 RemoteGroup=group, RemoteNegotiatingGroup=group))
    # condor_userprio -setprio A.user@... 10 (and B): RUP 10, so EUP 10 x factor 1000
    acc = [accounting(f"{g}.user@{DOMAIN}", priority=10000.0) for g in "AB"]
    acc += [accounting(g, priority=500.0) for g in "ABC"]
    assert usage_by_group(slots) == {"A": 5, "B": 10, "C": 0}
    jobs += [job(100, p, "user", group="C") for p in range(10)]

    history = []
    state = None
    for k in range(3):
        running = running_by_submitter(jobs)
        pool = load_pool(make_pool(tmp_path / f"cycle{k}", slots=slots, jobs=jobs,
                                   config=GROUP_CLAUSE, accounting_ads=acc,
                                   submitters=submitters_for(jobs, running),
                                   captured_at=100000 + 60 * k))
        if state is not None:        # the accountant carries on from the last cycle
            pool = dataclasses.replace(pool, accountant=state)
        r = run_cycle(pool)
        state = r.accountant.to_state()
        history.append((preempted(r), r.rejections))
        apply_matches(slots, jobs, r)
        assert usage_by_group(slots) == {"A": 5, "B": 5, "C": 5}, k
    # the first cycle: C takes 5 of B's slots and none of A's (A is not over quota)
    assert history[0][0] == {f"B.user@{DOMAIN}": 5}
    # then nothing moves: C is at its quota, and B may not preempt back
    for moved, rejections in history[1:]:
        assert moved == {}
        # both are at their group's allocation (5 of quota 5): their limit is spent, so
        # only rank preemption is looked for, and the slots' Rank prefers no one
        assert {(x.submitter, x.reason) for x in rejections} == {
            (f"B.user@{DOMAIN}", "no match found"), (f"C.user@{DOMAIN}", "no match found")}
    assert sum(j["JobStatus"] == 1 for j in jobs) == 10     # 5 of B's, 5 of C's wait


def test_cross_slot_prios_publish_each_slots_user_live(tmp_path):
    """NEGOTIATOR_CROSS_SLOT_PRIOS: each slot ad gets slot<N>_RemoteUserPrio and a live
    slot<N>_RemoteUserResourcesInUse for the user its slot<N>_RemoteUser names (4.10)."""
    slots, jobs = victims(["alice", "carol"])
    for s in slots:     # what STARTD_SLOT_ATTRS = RemoteUser publishes on each slot
        s.update(TotalSlots=2, slot1_RemoteUser=ALICE, slot2_RemoteUser=CAROL)
    jobs += [job(1, p, "bob") for p in range(2)]
    acc = [accounting(ALICE, priority=5000.0), accounting(CAROL, priority=5000.0),
           accounting(BOB, priority=500.0)]
    config = PREEMPT + ("PREEMPTION_REQUIREMENTS = slot1_RemoteUserPrio == 5000 && "
                        "slot1_RemoteUserResourcesInUse > 0\n"
                        "PREEMPTION_REQUIREMENTS_STABLE = False\n")
    r = one_cycle(tmp_path / "off", slots, jobs, config, acc)
    assert preempted(r) == {}       # no slot1_* attributes without the knob
    assert {x.reason for x in r.rejections} == {"PREEMPTION_REQUIREMENTS == False"}
    on = config + "NEGOTIATOR_CROSS_SLOT_PRIOS = True\n"
    r = one_cycle(tmp_path / "on", slots, jobs, on, acc)
    # bob takes alice's slot1; alice's usage is then 0, so carol's slot2 is refused
    assert [(m.slot, m.preempting) for m in r.matches] == [(slots[0]["Name"], ALICE)]
    assert {x.reason for x in r.rejections} == {"PREEMPTION_REQUIREMENTS == False"}


def test_retiring_slots_are_trimmed_unless_early_preemption(tmp_path):
    """With preemption on, a claimed slot with RetirementTimeRemaining > 0 leaves the
    slot list, unless NEGOTIATOR_CONSIDER_EARLY_PREEMPTION (trimStartdAds)."""
    slots, jobs = victims(["alice", "alice"])
    slots[0]["RetirementTimeRemaining"] = 600
    slots[1]["RetirementTimeRemaining"] = 0
    jobs += [job(1, p, "bob") for p in range(2)]
    acc = [accounting(ALICE, priority=5000.0), accounting(BOB, priority=500.0)]
    config = PREEMPT + "PREEMPTION_REQUIREMENTS = True\n"
    r = one_cycle(tmp_path / "late", slots, jobs, config, acc)
    assert r.trimmed_slots == 1
    assert [m.slot for m in r.matches] == [slots[1]["Name"]]
    r = one_cycle(tmp_path / "early", slots, jobs,
                  config + "NEGOTIATOR_CONSIDER_EARLY_PREEMPTION = True\n", acc)
    assert r.trimmed_slots == 2
    assert sorted(m.slot for m in r.matches) == sorted(s["Name"] for s in slots)


def test_preemption_requirements_set_to_nothing_restricts_nothing(tmp_path):
    """`PREEMPTION_REQUIREMENTS =` makes param() give NULL: no policy at all, unlike
    the default False (Matchmaker::reinitialize logs "PREEMPTION_REQUIREMENTS = None")."""
    slots, jobs = victims(["alice"])
    jobs += [job(1, 0, "bob")]
    acc = [accounting(ALICE, priority=5000.0), accounting(BOB, priority=500.0)]
    r = one_cycle(tmp_path / "default", slots, jobs, PREEMPT, acc)
    assert preempted(r) == {}
    r = one_cycle(tmp_path / "empty", slots, jobs, PREEMPT + "PREEMPTION_REQUIREMENTS =\n", acc)
    assert preempted(r) == {ALICE: 1}


def test_live_usage_in_the_slots_start_and_the_jobs_requirements(tmp_path):
    """The match test sees live usage too: a START (or a job's Requirements) that reads
    RemoteUserResourcesInUse stops letting bob in once alice is down to 8."""
    slots, jobs = victims(["alice"] * 10)
    for s in slots:
        s["START"] = Expr("RemoteUserResourcesInUse > 8")
    jobs += [job(1, p, "bob") for p in range(10)]
    acc = [accounting(ALICE, priority=5000.0), accounting(BOB, priority=500.0)]
    config = PREEMPT + "PREEMPTION_REQUIREMENTS = True\nNEGOTIATOR_MATCHLIST_CACHING = False\n"
    r = one_cycle(tmp_path / "start", slots, jobs, config, acc)
    assert preempted(r) == {ALICE: 2}
    slots, jobs = victims(["alice"] * 10)
    jobs += [job(1, p, "bob", Requirements=Expr("TARGET.RemoteUserResourcesInUse > 8"))
             for p in range(10)]
    r = one_cycle(tmp_path / "job", slots, jobs, config, acc)
    assert preempted(r) == {ALICE: 2}


def test_live_usage_in_the_jobs_rank(tmp_path):
    """A job Rank that reads RemoteUserResourcesInUse follows the usage live: bob's
    jobs prefer the heavier user's slots, so alice (6) and carol (4) end level."""
    slots, jobs = victims(["alice"] * 6 + ["carol"] * 4)
    jobs += [job(1, p, "bob", Rank=Expr("TARGET.RemoteUserResourcesInUse")) for p in range(6)]
    acc = [accounting(ALICE, priority=5000.0), accounting(CAROL, priority=5000.0),
           accounting(BOB, priority=500.0)]
    config = PREEMPT + "PREEMPTION_REQUIREMENTS = True\nNEGOTIATOR_MATCHLIST_CACHING = False\n"
    r = one_cycle(tmp_path, slots, jobs, config, acc)
    assert preempted(r) == {ALICE: 4, CAROL: 2}


def test_remote_user_floor_is_the_current_users_floor(tmp_path):
    """RemoteUserFloor on a claimed slot is its current user's Floor (4.10): a policy
    that spares users below their floor lets bob take carol's slots (no floor) and none
    of alice's (Floor 20, above her usage of 5)."""
    slots, jobs = victims(["alice"] * 5 + ["carol"] * 5)
    jobs += [job(1, p, "bob") for p in range(10)]
    acc = [accounting(ALICE, priority=5000.0, Floor=20), accounting(CAROL, priority=5000.0),
           accounting(BOB, priority=500.0)]
    config = PREEMPT + "PREEMPTION_REQUIREMENTS = RemoteUserResourcesInUse > RemoteUserFloor\n"
    r = one_cycle(tmp_path, slots, jobs, config, acc)
    assert preempted(r) == {CAROL: 5}
