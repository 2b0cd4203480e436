"""Exact-number tests of matchmaking rules that had none (reference section 4):
the preemption-state and PREEMPTION_RANK sort keys (M6 keys 4 and 5), rank rejections
that give no reason of their own, the precedence of rejection reasons when two counters
are set (M12), job-dependent negotiator ranks, and the single-precision narrowing of
negotiator-side ranks (4.8)."""

from __future__ import annotations

import pytest

from negotiator_ext.cycle import run_cycle
from negotiator_ext.pool import load_pool
from poolmaker import DOMAIN, Expr, accounting, job, make_pool, slot, submitters_for

NO_PREEMPTION, RANK_PREEMPTION, PRIO_PREEMPTION = 2, 1, 0
REASON_NAMES = {NO_PREEMPTION: "NoPreemption", RANK_PREEMPTION: "Rank",
                PRIO_PREEMPTION: "Priority"}

TIED_NEGOTIATOR_RANKS = "NEGOTIATOR_PRE_JOB_RANK = 0\nNEGOTIATOR_POST_JOB_RANK = 0\n"


def cycle(tmp_path, **kw):
    return run_cycle(load_pool(make_pool(tmp_path / "pool", **kw)))


def claimed(name: str, user: str, **attrs) -> dict:
    return slot(name, State="Claimed", Activity="Busy", AccountingGroup=f"{user}@{DOMAIN}",
                RemoteUser=f"{user}@{DOMAIN}", **attrs)


def tiny(n: int) -> list[dict]:
    """Unclaimed slots no test job fits (Memory 1 < RequestMemory 128): they only make
    the pool big enough that the submitter limit never decides."""
    return [slot(f"slot1@tiny{i}.test.local", Memory=1) for i in range(n)]


def outcome(r) -> list[tuple[str, str, str | None]]:
    return [(m.slot, REASON_NAMES[m.state], m.preempting) for m in r.matches]


# ---- 1. M6 key 4: unclaimed, then rank preemption, then priority preemption ---------------

@pytest.mark.parametrize("caching", [True, False])
def test_preemption_state_orders_tied_candidates(tmp_path, caching):
    """Pre- and post-job ranks both 0 and no job Rank: the candidates tie on keys 1-3, so
    the preemption state decides (4.6: NO_PREEMPTION 2 > RANK_PREEMPTION 1 >
    PRIO_PREEMPTION 0), whatever the slot-list order. With the MatchList cache the three
    jobs are one request popping the sorted list; without it each job scans afresh."""
    slots = [claimed("slot1@prio.test.local", "w"),
             claimed("slot2@rank.test.local", "w", Rank=Expr('TARGET.Owner == "a"'),
                     CurrentRank=0.0),
             slot("slot3@free.test.local")] + tiny(4)
    jobs = [job(1, p, "a") for p in range(3)]
    subs = submitters_for(jobs, running={f"w@{DOMAIN}": 2})
    acc = [accounting(f"a@{DOMAIN}", 500.0), accounting(f"w@{DOMAIN}", 50000.0)]
    r = cycle(tmp_path, slots=slots, jobs=jobs, submitters=subs, accounting_ads=acc,
              config=TIED_NEGOTIATOR_RANKS + "PREEMPTION_REQUIREMENTS = True\n"
              f"NEGOTIATOR_MATCHLIST_CACHING = {caching}")
    # a's limit is 0.99 * 7 slots = 6.93, so no limit check refuses any of the three
    assert outcome(r) == [("slot3@free.test.local", "NoPreemption", None),
                          ("slot2@rank.test.local", "Rank", f"w@{DOMAIN}"),
                          ("slot1@prio.test.local", "Priority", f"w@{DOMAIN}")]
    assert [m.assigned_job for m in r.matches] == ["1.0", "1.1", "1.2"]
    assert r.rejections == []


# ---- 2. M6 key 5: PREEMPTION_RANK among priority-preemption candidates -------------------

@pytest.mark.parametrize("rank, order", [
    ("RemoteUserPrio", ["hi", "lo"]),       # the worst-priority holder is preempted first
    ("-RemoteUserPrio", ["lo", "hi"]),
])
def test_preemption_rank_orders_priority_preemptions(tmp_path, rank, order):
    """Two claimed slots held by users at EUP 100 ("lo") and 1000 ("hi"); the holder's
    EUP reaches the slot as RemoteUserPrio (4.10). The slot-list order (lo's slot first)
    would give the opposite answer for RemoteUserPrio, so key 5 decides."""
    slots = [claimed("slot1@lo.test.local", "lo"), claimed("slot2@hi.test.local", "hi")]
    slots += tiny(6)
    jobs = [job(1, 0, "a")]
    subs = submitters_for(jobs, running={f"lo@{DOMAIN}": 1, f"hi@{DOMAIN}": 1})
    acc = [accounting(f"a@{DOMAIN}", 10.0), accounting(f"lo@{DOMAIN}", 100.0),
           accounting(f"hi@{DOMAIN}", 1000.0)]
    r = cycle(tmp_path, slots=slots, jobs=jobs, submitters=subs, accounting_ads=acc,
              config=TIED_NEGOTIATOR_RANKS + "PREEMPTION_REQUIREMENTS = True\n"
              f"PREEMPTION_RANK = {rank}")
    first = order[0]
    assert outcome(r) == [(f"slot{1 if first == 'lo' else 2}@{first}.test.local",
                           "Priority", f"{first}@{DOMAIN}")]
    # with two jobs both slots go, in that order
    jobs2 = [job(1, p, "a") for p in range(2)]
    r = cycle(tmp_path / "two", slots=slots, jobs=jobs2,
              submitters=submitters_for(jobs2, running={f"lo@{DOMAIN}": 1,
                                                        f"hi@{DOMAIN}": 1}),
              accounting_ads=acc,
              config=TIED_NEGOTIATOR_RANKS + "PREEMPTION_REQUIREMENTS = True\n"
              f"PREEMPTION_RANK = {rank}")
    assert [m.preempting for m in r.matches] == [f"{u}@{DOMAIN}" for u in order]


# ---- 3. rejPreemptForRank gives no reason of its own -------------------------------------

def test_rank_rejection_gives_no_match_found(tmp_path):
    """A claimed slot whose running job the startd prefers (Rank 0 < CurrentRank 5) is
    refused by `MY.Rank >= MY.CurrentRank` after PREEMPTION_REQUIREMENTS passed
    (4.5 step 10): rejPreemptForRank has no reason text (M12), so the request's reason
    is the last one, "no match found"."""
    slots = [claimed("slot1@held.test.local", "w", Rank=0.0, CurrentRank=5.0)] + tiny(4)
    jobs = [job(1, 0, "a")]
    subs = submitters_for(jobs, running={f"w@{DOMAIN}": 1})
    acc = [accounting(f"a@{DOMAIN}", 10.0), accounting(f"w@{DOMAIN}", 50000.0)]
    r = cycle(tmp_path, slots=slots, jobs=jobs, submitters=subs, accounting_ads=acc,
              config="PREEMPTION_REQUIREMENTS = True")
    assert r.matches == []
    assert [(x.job, x.reason) for x in r.rejections] == [("1.0", "no match found")]
    # control: CurrentRank 0 makes the same slot a priority preemption
    slots[0] = claimed("slot1@held.test.local", "w", Rank=0.0, CurrentRank=0.0)
    r = cycle(tmp_path / "control", slots=slots, jobs=jobs, submitters=subs,
              accounting_ads=acc, config="PREEMPTION_REQUIREMENTS = True")
    assert outcome(r) == [("slot1@held.test.local", "Priority", f"w@{DOMAIN}")]


# ---- 4. M12: which reason wins when two counters are set ---------------------------------

def test_concurrency_limit_beats_policy(tmp_path):
    """Claimed slots refused by PREEMPTION_REQUIREMENTS (default False) and free slots
    refused by a full concurrency limit evaluated per candidate (the limits expression
    needs TARGET, M3): rejForConcurrencyLimit comes before rejPreemptForPolicy."""
    slots = [claimed(f"slot1@c{i}.test.local", "w") for i in range(2)]
    slots += [slot(f"slot1@f{i}.test.local") for i in range(2)] + tiny(4)
    jobs = [job(1, 0, "a",
                ConcurrencyLimits=Expr('ifThenElse(TARGET.Cpus > 0, "lic", "lic")'))]
    subs = submitters_for(jobs, running={f"w@{DOMAIN}": 2})
    acc = [accounting(f"a@{DOMAIN}", 10.0), accounting(f"w@{DOMAIN}", 50000.0)]
    r = cycle(tmp_path, slots=slots, jobs=jobs, submitters=subs, accounting_ads=acc,
              config="LIC_LIMIT = 0")
    assert r.matches == []
    assert [(x.job, x.reason) for x in r.rejections] == [
        ("1.0", "concurrency limit lic reached")]
    # control: with room in the limit, the free slot is taken
    r = cycle(tmp_path / "control", slots=slots, jobs=jobs, submitters=subs,
              accounting_ads=acc, config="LIC_LIMIT = 1")
    assert [m.slot for m in r.matches] == ["slot1@f0.test.local"] and not r.rejections


def test_policy_beats_submitter_limit(tmp_path):
    """Submitter a's limit is 1.5 (share 3000/8000 of 4 slots). Its first job takes a free
    slot; its second job (another autocluster, so a fresh scan) is refused on the other
    free slot by the unclaimed limit (1 + 1 > 1.5) and on the claimed ones by
    PREEMPTION_REQUIREMENTS (default False): the policy reason comes first."""
    slots = [claimed(f"slot1@c{i}.test.local", "w") for i in range(2)]
    slots += [slot(f"slot1@f{i}.test.local") for i in range(2)]
    jobs = [job(1, 0, "a"), job(2, 0, "a", RequestMemory=129)]
    subs = submitters_for(jobs, running={f"w@{DOMAIN}": 2})
    acc = [accounting(f"a@{DOMAIN}", 5000.0), accounting(f"w@{DOMAIN}", 3000.0)]
    r = cycle(tmp_path, slots=slots, jobs=jobs, submitters=subs, accounting_ads=acc)
    a_spin1 = next(x for x in r.limits if x.submitter == f"a@{DOMAIN}" and x.spin == 1)
    assert (a_spin1.limit, a_spin1.limit_unclaimed) == pytest.approx((1.5, 1.5))
    # spin 2 gives a the rest of the pie, and job 2.0 the free slot it was refused
    assert [(m.assigned_job, m.slot, m.spin) for m in r.matches] == [
        ("1.0", "slot1@f0.test.local", 1), ("2.0", "slot1@f1.test.local", 2)]
    assert [(x.job, x.reason) for x in r.rejections] == [
        ("2.0", "PREEMPTION_REQUIREMENTS == False")]
    # control: claimed slots the job does not match leave the submitter-limit reason
    slots[:2] = [claimed(f"slot1@c{i}.test.local", "w", Memory=1) for i in range(2)]
    r = cycle(tmp_path / "control", slots=slots, jobs=jobs, submitters=subs,
              accounting_ads=acc)
    assert [(x.job, x.reason) for x in r.rejections] == [("2.0", "submitter limit exceeded")]


# ---- 5. negotiator ranks that depend on the job ------------------------------------------

@pytest.mark.parametrize("first_w", [1, -1])
def test_pre_job_rank_is_evaluated_per_job(tmp_path, first_w):
    """NEGOTIATOR_PRE_JOB_RANK = TARGET.W * MY.PreV: the W=1 job wants the largest PreV,
    the W=-1 job the smallest. W is a significant attribute (it is referenced by the
    pre-job rank, M2), so the jobs are two autoclusters; the first (higher JobPrio) sees
    all three slots, the second the two left. A rank computed once per slot with the
    first job's W would send the second job to PreV 2."""
    slots = [slot(f"slot{v}@p{v}.test.local", PreV=v) for v in (2, 1, 3)]
    other = -first_w
    jobs = [job(1, 0, "a", W=first_w, JobPrio=10), job(2, 0, "a", W=other)]
    r = cycle(tmp_path, slots=slots, jobs=jobs,
              config="NEGOTIATOR_PRE_JOB_RANK = TARGET.W * MY.PreV\n"
                     "NEGOTIATOR_POST_JOB_RANK = 0")
    got = {m.assigned_job: m.slot for m in r.matches}
    best = {1: "slot3@p3.test.local", -1: "slot1@p1.test.local"}
    assert got == {"1.0": best[first_w], "2.0": best[other]}
    assert [m.assigned_job for m in r.matches] == ["1.0", "2.0"]
    assert len({m.autocluster for m in r.matches}) == 2


# ---- 6. single-precision narrowing of negotiator-side ranks (4.8) ------------------------

@pytest.mark.parametrize("order", [(16777217, 16777216), (16777216, 16777217)])
def test_pre_job_rank_narrowed_to_float_ties(tmp_path, order):
    """(float)16777217 == 16777216: the two slots tie on the pre-job rank, and on every
    other key, so the earlier slot in the slot list wins (the documented tie rule)."""
    slots = [slot(f"slot{i + 1}@n{i + 1}.test.local", PreV=v) for i, v in enumerate(order)]
    r = cycle(tmp_path, slots=slots, jobs=[job(1, 0, "a")],
              config="NEGOTIATOR_PRE_JOB_RANK = MY.PreV\nNEGOTIATOR_POST_JOB_RANK = 0")
    assert [m.slot for m in r.matches] == ["slot1@n1.test.local"]


@pytest.mark.parametrize("order", [(16777217, 16777216), (16777216, 16777217)])
def test_job_rank_is_not_narrowed(tmp_path, order):
    """The job's own Rank (key 2) is kept as a double: 16777217 beats 16777216 whatever
    the slot-list order."""
    slots = [slot(f"slot{i + 1}@n{i + 1}.test.local", JR=v) for i, v in enumerate(order)]
    r = cycle(tmp_path, slots=slots, jobs=[job(1, 0, "a", Rank=Expr("TARGET.JR"))],
              config=TIED_NEGOTIATOR_RANKS)
    winner = order.index(16777217) + 1
    assert [m.slot for m in r.matches] == [f"slot{winner}@n{winner}.test.local"]


def test_post_job_rank_narrowed_to_float_ties(tmp_path):
    """Key 3 is narrowed too: post-job ranks 16777217 and 16777216 tie, and the earlier
    slot wins even though its value is the smaller one before narrowing."""
    slots = [slot("slot1@n1.test.local", PostV=16777216),
             slot("slot2@n2.test.local", PostV=16777217)]
    r = cycle(tmp_path, slots=slots, jobs=[job(1, 0, "a")],
              config="NEGOTIATOR_PRE_JOB_RANK = 0\nNEGOTIATOR_POST_JOB_RANK = MY.PostV")
    assert [m.slot for m in r.matches] == ["slot1@n1.test.local"]
    # not narrowed away: 16777218 is a float of its own and wins
    slots[1]["PostV"] = 16777218
    r = cycle(tmp_path / "b", slots=slots, jobs=[job(1, 0, "a")],
              config="NEGOTIATOR_PRE_JOB_RANK = 0\nNEGOTIATOR_POST_JOB_RANK = MY.PostV")
    assert [m.slot for m in r.matches] == ["slot2@n2.test.local"]


# ---- 4.4 quirk: a cached preempting entry may pass on the unclaimed counters --------------

@pytest.mark.parametrize("caching, spin1, rejections", [
    (True, 4, []),
    (False, 3, [("1.0", "submitter limit exceeded")]),
])
def test_cached_preemption_passes_on_unclaimed_counters(tmp_path, caching, spin1,
                                                         rejections):
    """a's limit is 0.99 * 4 = 3.96 and all four slots are priority preemptions. The 4th
    match fails the claimed check (3 + 1 > 3.96). Served from the MatchList it still
    passes on the unclaimed counters (0 + 1 <= 3.96); a fresh scan refuses it with the
    submitter-limit reason, and the job goes in spin 2."""
    busy = [claimed(f"slot1@b{i}.test.local", "b") for i in range(4)]
    jobs = [job(1, p, "a") for p in range(4)]
    subs = submitters_for(jobs, running={f"b@{DOMAIN}": 4})
    acc = [accounting(f"a@{DOMAIN}", 500.0), accounting(f"b@{DOMAIN}", 50000.0)]
    r = cycle(tmp_path, slots=busy, jobs=jobs, submitters=subs, accounting_ads=acc,
              config="PREEMPTION_REQUIREMENTS = True\n"
                     f"NEGOTIATOR_MATCHLIST_CACHING = {caching}")
    assert [m.spin for m in r.matches] == [1] * spin1 + [2] * (4 - spin1)
    assert all(m.state == PRIO_PREEMPTION for m in r.matches)
    assert [(x.job, x.reason) for x in r.rejections] == rejections


def test_every_request_ephemeral_is_declared():
    """The attributes _prepare_request writes into a request (4.2) are the ones the
    matcher is told jobs have (REQUEST_EPHEMERALS): an undeclared one would let a slot
    expression that reads it be taken for static."""
    from types import SimpleNamespace
    import classad2
    from negotiator_ext.core.negotiation import REQUEST_EPHEMERALS, Negotiation
    ad = classad2.ClassAd()
    fake = SimpleNamespace(
        groups=SimpleNamespace(enabled=True, root=SimpleNamespace(autoregroup=False)),
        usage=lambda name: 1.0, quotas_hash={"g": 5.0},
        matcher=SimpleNamespace(job_names_seen_by_slots=set(), intern=lambda k: 0,
                                uniform_token=lambda names: 0))
    from negotiator_ext.core.match_list import Request
    req = Request(base_ad=ad, jobs=["1.0"], autocluster=0, group_key=((), frozenset()),
                  schedd="s", submitter="u@d")
    Negotiation._prepare_request(fake, req, SimpleNamespace(name="u@d", group="g"), "g", 500.0)
    assert set(req.ad.keys()) == set(REQUEST_EPHEMERALS)   # inserted when the ad is read


@pytest.mark.parametrize("where", ["job", "slot"])
def test_submitter_usage_is_live_in_the_jobs_and_the_slots_requirements(tmp_path, where):
    """4.2: SubmitterUserResourcesInUse is the submitter's usage when the request is
    made, whether the job's own Requirements or the slots' START reads it."""
    cond = "SubmitterUserResourcesInUse < 2"
    if where == "job":
        jobs = [job(1, p, "a", Requirements=Expr(f"TARGET.Memory >= RequestMemory && {cond}"))
                for p in range(5)]
        slots = [slot(f"slot1@n{i}.test.local") for i in range(5)]
    else:
        jobs = [job(1, p, "a") for p in range(5)]
        slots = [slot(f"slot1@n{i}.test.local", START=Expr(f"TARGET.{cond}")) for i in range(5)]
    r = run_cycle(load_pool(make_pool(tmp_path, slots=slots, jobs=jobs,
                                      config="NEGOTIATOR_MATCHLIST_CACHING = False")))
    assert len(r.matches) == 2
    assert [x.reason for x in r.rejections] == ["no match found"]
