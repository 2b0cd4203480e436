"""Exact numbers for pie and limit rules the other tests leave open (reference 2.5,
2.6, M5, N2, A16, 4.10, M9); found by mutating the rules and seeing what survived."""

from __future__ import annotations

from negotiator_ext.cycle import run_cycle
from negotiator_ext.pool import load_pool
from poolmaker import DOMAIN, Expr, accounting, claimed, job, make_pool, slot, submitters_for

A, B = f"a@{DOMAIN}", f"b@{DOMAIN}"


def cycle(tmp_path, **kw):
    return run_cycle(load_pool(make_pool(tmp_path / "pool", **kw)))


def test_group_headroom_caps_unclaimed_slots_and_priority_preemption_uses_the_claimed_limit(tmp_path):
    """2.5 steps 3/8/14, M5: g (quota 2) is full with g.u's 2 claimed slots. g.v's
    unclaimed limit is the group's headroom, 0, so the 2 free slots are refused; its
    claimed limit (its share, 1.0) allows one priority preemption when
    PREEMPTION_REQUIREMENTS lets it, in spin 1."""
    u = [job(900 + i, 0, "u", group="g", JobStatus=2) for i in range(2)]
    slots = [claimed(f"slot1@c{i + 1}.test.local", u[i], f"g.u@{DOMAIN}") for i in range(2)]
    slots += [slot("slot1@f1.test.local"), slot("slot1@f2.test.local")]
    jobs = u + [job(1, p, "v", group="g") for p in range(3)]
    subs = submitters_for(jobs, running={f"g.u@{DOMAIN}": 2})
    acc = [accounting(f"g.u@{DOMAIN}"), accounting(f"g.v@{DOMAIN}")]
    base = "GROUP_NAMES = g\nGROUP_QUOTA_g = 2\n"
    r = cycle(tmp_path / "default", slots=slots, jobs=jobs, submitters=subs, accounting_ads=acc,
              config=base)
    assert r.matches == []
    v = next(x for x in r.limits if x.submitter == f"g.v@{DOMAIN}" and x.spin == 1)
    assert (v.limit, v.limit_unclaimed) == (1.0, 0.0)
    assert {x.reason for x in r.rejections} == {"PREEMPTION_REQUIREMENTS == False"}
    r = cycle(tmp_path / "preq", slots=slots, jobs=jobs, submitters=subs, accounting_ads=acc,
              config=base + "PREEMPTION_REQUIREMENTS = True\n")
    assert [(m.slot, m.state, m.spin) for m in r.matches] == [("slot1@c1.test.local", 0, 1)]


def test_a_submitter_at_two_schedds_counts_once_in_the_normalization(tmp_path):
    """2.5 step 6: the normalization sums over distinct names, so a (two ads) and b
    each get share 0.5, not 1/3."""
    s1, s2 = "s1.example", "s2.example"

    def sub(name, schedd, addr, heard):
        return {"MyType": "Submitter", "Name": name, "ScheddName": schedd, "ScheddIpAddr": addr,
                "IdleJobs": 10, "RunningJobs": 0, "LastHeardFrom": heard}
    jobs = ([job(1, p, "a", GlobalJobId=f"{s1}#1.{p}#1") for p in range(10)]
            + [job(2, p, "a", GlobalJobId=f"{s2}#2.{p}#1") for p in range(10)]
            + [job(3, p, "b", GlobalJobId=f"{s1}#3.{p}#1") for p in range(10)])
    subs = [sub(A, s1, "<10.0.0.1:9618>", 1000), sub(A, s2, "<10.0.0.2:9618>", 1001),
            sub(B, s1, "<10.0.0.1:9618>", 1002)]
    r = cycle(tmp_path, slots=[slot(f"slot1@n{i:02d}.test.local") for i in range(12)], jobs=jobs,
              submitters=subs, accounting_ads=[accounting(A), accounting(B)])
    assert [x.share for x in r.limits if x.spin == 1] == [0.5, 0.5, 0.5]
    assert sorted((m.submitter, m.schedd) for m in r.matches).count((B, s1)) == 6


def test_submitter_order_starvation_then_last_heard_from_mod_1009(tmp_path):
    """N2 keys 3 and 4: at equal EUP the submitter with the lower starvation
    usage/(usage+limit) goes first; then LastHeardFrom % 1009 (1010 -> 1 beats 1008)."""
    ar = [job(900 + i, 0, "a", JobStatus=2) for i in range(2)]
    slots = [claimed(f"slot1@c{i}.test.local", ar[i], A) for i in range(2)]
    slots += [slot(f"slot1@f{i}.test.local") for i in range(4)]
    jobs = ar + [job(1, p, "a") for p in range(4)] + [job(2, p, "b") for p in range(4)]
    r = cycle(tmp_path / "starve", slots=slots, jobs=jobs,
              submitters=submitters_for(jobs, running={A: 2}),
              accounting_ads=[accounting(A), accounting(B)])
    assert r.matches[0].submitter == B
    jobs = [job(1, 0, "a"), job(2, 0, "b")]
    subs = submitters_for(jobs)
    subs[0]["LastHeardFrom"], subs[1]["LastHeardFrom"] = 1010, 1008
    r = cycle(tmp_path / "lhf", slots=[slot("slot1@n1.test.local")], jobs=jobs, submitters=subs)
    assert [m.submitter for m in r.matches] == [A]


def test_ceiling_headroom_truncates_fractional_usage(tmp_path):
    """2.6: ceil_left = ceiling - int(usage): usage 4.5 under ceiling 5 leaves 1."""
    a_run = job(900, 0, "a", JobStatus=2)
    slots = [claimed("slot1@c1.test.local", a_run, A, SlotWeight=4.5)]
    slots += [slot(f"slot1@f{i}.test.local") for i in range(4)]
    jobs = [a_run] + [job(1, p, "a") for p in range(4)]
    r = cycle(tmp_path, slots=slots, jobs=jobs, submitters=submitters_for(jobs, running={A: 1}),
              accounting_ads=[accounting(A, Ceiling=5)])
    assert r.limits[0].ceiling_left == 1 and len(r.matches) == 1


def test_rank_preemption_is_not_limited_even_at_a_zero_limit(tmp_path):
    """4.5 step 11: rank preemption skips the submitter-limit check. a, far over its
    share (limit 0, so no round-up either), still takes both slots whose Rank prefers
    it: one per spin (spin 1 in startd-rank-only mode, then spin 2)."""
    a_run = job(900, 0, "a", JobStatus=2)
    b_run = [job(800 + i, 0, "b", JobStatus=2) for i in range(2)]
    slots = [claimed("slot1@a0.test.local", a_run, A)]
    slots += [claimed(f"slot1@b{i}.test.local", b_run[i], B, Rank=Expr('TARGET.Owner == "a"'),
                      CurrentRank=0.0) for i in range(2)]
    jobs = [a_run] + b_run + [job(1, p, "a") for p in range(2)]
    r = cycle(tmp_path, slots=slots, jobs=jobs,
              submitters=submitters_for(jobs, running={A: 1, B: 2}),
              accounting_ads=[accounting(A, 5000000.0), accounting(B, 500.0)])
    assert [(m.slot, m.state, m.spin) for m in r.matches] == [
        ("slot1@b0.test.local", 1, 1), ("slot1@b1.test.local", 1, 2)]


def test_without_preemption_the_pie_is_shared_by_those_with_idle_jobs(tmp_path):
    """2.5 steps 5 and 8, ConsiderPreemption off: a (2 running, no idle jobs) leaves the
    pie before any share is computed, so b's share is 1.0 of the 6-slot pool and it
    takes the 4 free slots in spin 1."""
    ar = [job(900 + i, 0, "a", JobStatus=2) for i in range(2)]
    slots = [claimed(f"slot1@c{i}.test.local", ar[i], A) for i in range(2)]
    slots += [slot(f"slot1@f{i}.test.local") for i in range(4)]
    jobs = ar + [job(1, p, "b") for p in range(6)]
    r = cycle(tmp_path, slots=slots, jobs=jobs, submitters=submitters_for(jobs, running={A: 2}),
              accounting_ads=[accounting(A), accounting(B)],
              config="NEGOTIATOR_CONSIDER_PREEMPTION = False")
    b = next(x for x in r.limits if x.submitter == B and x.spin == 1)
    assert (b.share, b.limit) == (1.0, 6.0)
    assert [(m.submitter, m.spin) for m in r.matches] == [(B, 1)] * 4


def test_a_slot_being_preempted(tmp_path):
    """A16, 4.5 step 8, 4.10, M9 on a slot in state Preempting: x is still charged;
    the preempting user y is its current user; CurrentRank is the pending PreemptingRank
    (3), so z needs a higher Rank to take it; both limits it holds count."""
    X, Y, Z = (f"{u}@{DOMAIN}" for u in "xyz")
    xr = job(900, 0, "x", JobStatus=2)
    s = slot("slot1@p.test.local", State="Preempting", Activity="Vacating", RemoteUser=X,
             RemoteOwner=X, PreemptingUser=Y, PreemptingRank=3.0, CurrentRank=0.0,
             Rank=Expr("TARGET.JobPrio"), ConcurrencyLimits="lic",
             PreemptingConcurrencyLimits="lic")
    config = "NEGOTIATOR_CONSIDER_PREEMPTION = True\n"
    out = {}
    for prio in (2, 4):
        jobs = [xr, job(1, 0, "z", JobPrio=prio)]
        r = cycle(tmp_path / str(prio), slots=[s], jobs=jobs, config=config,
                  submitters=submitters_for(jobs, running={X: 1}),
                  accounting_ads=[accounting(X), accounting(Y), accounting(Z)])
        out[prio] = r
    assert out[2].matches == []
    assert [x.reason for x in out[2].rejections] == ["PREEMPTION_REQUIREMENTS == False"]
    assert [(m.submitter, m.state, m.preempting) for m in out[4].matches] == [(Z, 1, Y)]
    lic = next(c for c in out[4].concurrency_limits if c["name"] == "lic")
    assert lic["count_before"] == 2.0
    assert next(row["usage_before"] for row in out[4].submitters if row["name"] == X) == 1.0


def test_tied_submitters_are_negotiated_in_libstdcxx_sort_order(tmp_path):
    """20 submitters with the same EUP, starvation and LastHeardFrom (one schedd's ads):
    submitterLessThan ties them all, and std::sort leaves them in introsort's order of
    the input (the collector's, kept in the snapshot), not in input order."""
    from negotiator_ext.core.cxxsort import cxx_sort
    users = [f"u{i:02d}@example.org" for i in range(20)]
    jobs = [job(i + 1, 0, u) for i, u in enumerate(users)]
    subs = submitters_for(jobs)
    subs = [dict(s, LastHeardFrom=5000) for s in subs]
    result = run_cycle(load_pool(make_pool(tmp_path / "p", slots=[slot(f"s{i}") for i in range(40)],
                                           jobs=jobs, submitters=subs)))
    order = [r.submitter for r in result.limits if r.spin == 1]
    assert order == cxx_sort([s["Name"] for s in subs], lambda a, b: False)
    # the order g++'s std::sort (libstdc++) leaves 20 equal elements in, as indices into
    # the input (printed by a 5-line C++ program)
    assert [int(n[1:3]) for n in order] == [
        10, 19, 18, 17, 16, 15, 14, 13, 12, 11, 0, 9, 8, 7, 6, 5, 4, 3, 2, 1]
    assert len(result.matches) == 20
    # each submitter's place in the pie spin, as negotiate --json shows it
    rows = {r["name"]: r["pie_position"] for r in result.to_json()["submitters"]}
    assert [rows[n] for n in order] == list(range(1, 21))
