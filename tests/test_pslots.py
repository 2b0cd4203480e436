"""Partitionable and dynamic slots in whole cycles (reference 1.5 A15-A17, 2.2 step 5,
2.5, 4.5 steps 3-4, 4.9 step 8, section 5): what a p-slot with and without a
consumption policy costs, how often it is matched, who may match a claimed p-slot, how
d-slots are charged, and what a fully carved p-slot does to minSlotWeight."""

from __future__ import annotations

from collections import Counter

from negotiator_ext.core.match_list import REASON_NO_MATCH
from negotiator_ext.cycle import run_cycle
from negotiator_ext.pool import load_pool
from poolmaker import DOMAIN, Expr, accounting, job, make_pool, slot, submitters_for

A, B = f"a@{DOMAIN}", f"b@{DOMAIN}"
S1, S2 = "s1.example", "s2.example"
S1_ADDR, S2_ADDR = "<10.0.0.1:9618>", "<10.0.0.2:9618>"
PSLOT = "slot1@n1.test.local"

# What a startd publishes for a p-slot: START is not the whole Requirements, the
# request must also fit what is left (startd/ResAttributes.cpp: WithinResourceLimits).
FITS = dict(Requirements=Expr("START && WithinResourceLimits"),
            WithinResourceLimits=Expr("TARGET.RequestCpus <= MY.Cpus && "
                                      "TARGET.RequestMemory <= MY.Memory && "
                                      "TARGET.RequestDisk <= MY.Disk"))


def cycle(tmp_path, **kw):
    return run_cycle(load_pool(make_pool(tmp_path / "pool", **kw)))


def pslot(name=PSLOT, cpus=8, memory=16384, disk=1000000, **attrs):
    """A p-slot without a consumption policy (the default): SlotWeight = Cpus."""
    d = dict(PartitionableSlot=True, SlotType="Partitionable", Cpus=cpus, Memory=memory,
             Disk=disk, TotalSlotCpus=cpus, TotalSlotMemory=memory, TotalSlotDisk=disk,
             SlotWeight=Expr("Cpus"), **FITS)
    d.update(attrs)
    return slot(name, **d)


def cp_pslot(name=PSLOT, cpus=4, memory=4096, disk=100000, weight="Cpus", **attrs):
    """A p-slot whose startd has CONSUMPTION_POLICY = True, cpu-centric (the seed)."""
    policy = dict(ConsumptionCpus=Expr("target.RequestCpus"),
                  ConsumptionMemory=Expr("quantize(target.RequestMemory, {256})"),
                  ConsumptionDisk=Expr("quantize(target.RequestDisk, {128})"))
    policy.update(attrs)
    return pslot(name, cpus=cpus, memory=memory, disk=disk, MachineResources="Cpus Memory Disk",
                 SlotWeight=Expr(weight), **policy)


def two_schedd_job(schedd: str, cluster: int, proc: int, user: str, **attrs) -> dict:
    return job(cluster, proc, user, GlobalJobId=f"{schedd}#{cluster}.{proc}#1", **attrs)


def submitter(name: str, schedd: str, addr: str, idle: int, heard: int, running: int = 0):
    return {"MyType": "Submitter", "Name": name, "ScheddName": schedd, "ScheddIpAddr": addr,
            "IdleJobs": idle, "RunningJobs": running, "LastHeardFrom": heard}


def costs(r) -> list[tuple[str, str, float]]:
    return [(m.assigned_job, m.slot, m.cost) for m in r.matches]


def row(r, name: str) -> dict:
    return next(s for s in r.submitters if s["name"] == name)


# ---- 1. a p-slot without a consumption policy (P1) --------------------------------------

def test_pslot_without_policy_is_matched_once_and_costs_its_whole_weight(tmp_path):
    """P1: eight 1-core jobs fit the 8-core p-slot, but the negotiator matches it once
    (it leaves the slot list, its one claim id is used up), and the match costs the
    p-slot's whole SlotWeight, 8, charged to the submitter as 8 (A17: GetSlotWeight)."""
    jobs = [job(1, p, "a", RequestCpus=1) for p in range(8)]
    r = cycle(tmp_path, slots=[pslot()], jobs=jobs)
    assert costs(r) == [("1.0", PSLOT, 8.0)]
    assert [(x.job, x.reason) for x in r.rejections] == [("1.0", REASON_NO_MATCH)]
    assert row(r, A)["usage_before"] == 0.0
    assert row(r, A)["usage_after"] == 8.0
    assert r.accountant.weighted_usage(A) == 8.0
    rec = r.accountant.resources[f"{PSLOT}@<10.1.0.1:9618>"]
    assert (rec["RemoteUser"], rec["SlotWeight"]) == (A, 8.0)
    assert "NumCpMatches" not in rec          # not a consumption-policy match


def test_pslot_without_policy_costs_its_weight_even_over_the_limit(tmp_path):
    """Two submitters share a pool of weight 8: each limit is 4, but the first match
    of a negotiate() call is allowed whatever it costs (M5), so a gets the p-slot for
    8; b then has nothing left to match."""
    jobs = [job(1, p, "a") for p in range(3)] + [job(2, p, "b") for p in range(3)]
    r = cycle(tmp_path, slots=[pslot()], jobs=jobs)
    assert [(m.submitter, m.cost) for m in r.matches] == [(A, 8.0)]
    assert {x.submitter: x.limit for x in r.limits if x.spin == 1} == {A: 4.0, B: 0.0}
    assert (r.accountant.weighted_usage(A), r.accountant.weighted_usage(B)) == (8.0, 0.0)


def test_want_ad_revaluate_pslot_still_gets_one_match(tmp_path):
    """P1: a WantAdRevaluate p-slot stays in the list, but its second match has no
    claim id left (4.9 step 2), so there is still one match per cycle."""
    jobs = [job(1, p, "a") for p in range(4)]
    r = cycle(tmp_path, slots=[pslot(WantAdRevaluate=True)], jobs=jobs)
    assert costs(r) == [("1.0", PSLOT, 8.0)]


def test_each_pslot_without_policy_costs_its_own_remaining_cpus(tmp_path):
    """Two p-slots, 4 and 8 cores left: one match each; the default pre-job rank sends
    the first job to the one with fewer Cpus (4.8). Costs 4 and 8, usage 12."""
    slots = [pslot("slot1@n1.test.local", cpus=8), pslot("slot1@n2.test.local", cpus=4)]
    jobs = [job(1, p, "a") for p in range(5)]
    r = cycle(tmp_path, slots=slots, jobs=jobs)
    assert costs(r) == [("1.0", "slot1@n2.test.local", 4.0), ("1.1", "slot1@n1.test.local", 8.0)]
    assert r.accountant.weighted_usage(A) == 12.0


# ---- 2. a claimed p-slot (4.5 step 3) ---------------------------------------------------

def claimed_pslot_pool(tmp_path, state="Claimed", **attrs):
    """A p-slot claimed by schedd s1; submitter a at s2 negotiates first (LastHeardFrom),
    then b at s1. Both have one 1-core job that fits."""
    s = pslot(State=state, Activity="Idle", **attrs)
    jobs = [two_schedd_job(S2, 1, 0, "a"), two_schedd_job(S1, 2, 0, "b")]
    subs = [submitter(A, S2, S2_ADDR, 1, 1000), submitter(B, S1, S1_ADDR, 1, 1001)]
    return cycle(tmp_path, slots=[s], jobs=jobs, submitters=subs,
                 accounting_ads=[accounting(A), accounting(B)])


def test_claimed_pslot_is_matched_only_by_its_own_schedd(tmp_path):
    r = claimed_pslot_pool(tmp_path, RemoteScheddName=S1)
    assert [(m.assigned_job, m.schedd, m.submitter, m.slot) for m in r.matches] == [
        ("2.0", S1, B, PSLOT)]
    assert [(x.job, x.schedd, x.reason) for x in r.rejections] == [
        ("1.0", S2, REASON_NO_MATCH)]
    assert r.matches[0].cost == 8.0
    assert r.matches[0].state == 2           # nobody's user: NO_PREEMPTION


def test_claimed_pslot_of_another_schedd_matches_nothing(tmp_path):
    r = claimed_pslot_pool(tmp_path, RemoteScheddName="s3.example")
    assert r.matches == []
    assert sorted((x.job, x.schedd, x.reason) for x in r.rejections) == [
        ("1.0", S2, REASON_NO_MATCH), ("2.0", S1, REASON_NO_MATCH)]


def test_unclaimed_pslot_goes_to_the_first_submitter_whatever_its_schedd(tmp_path):
    """The control: without RemoteScheddName a at s2, first in order, takes it."""
    r = claimed_pslot_pool(tmp_path, state="Unclaimed")
    assert [(m.assigned_job, m.schedd, m.submitter) for m in r.matches] == [("1.0", S2, A)]


def test_claimed_pslot_with_want_matching_false_is_trimmed(tmp_path):
    """trimStartdAds_ClaimedPslotLogic (2.2 step 9): WantMatching = false drops it,
    even for its own schedd."""
    r = claimed_pslot_pool(tmp_path, RemoteScheddName=S1, WantMatching=False)
    assert r.matches == []
    assert r.trimmed_slots == 0


# ---- 3. a fully carved p-slot; minSlotWeight (A15, 2.2 step 5, 2.5 step 14) --------------

def test_fully_carved_pslot_matches_only_a_request_for_no_cpu_and_costs_nothing(tmp_path):
    """Cpus 0, SlotWeight = Cpus = 0 (a legal weight, A15). A 1-core job does not fit
    what is left; a 0-core job does, and costs the p-slot's whole weight, 0. A slot
    that matches nothing (START = false) gives the pool a weight of 1, so the limit
    is 1, not 0 (a limit of 0 would leave only startd-rank preemption on spin 1)."""
    slots = [pslot(cpus=0), slot("slot1@n2.test.local", Cpus=1, START=False)]
    jobs = [job(1, 0, "a", RequestCpus=1), job(2, 0, "a", RequestCpus=0)]
    r = cycle(tmp_path, slots=slots, jobs=jobs)
    assert r.pool_weight == 1.0
    assert costs(r) == [("2.0", PSLOT, 0.0)]
    assert [(x.job, x.reason) for x in r.rejections] == [("1.0", REASON_NO_MATCH)]
    assert r.accountant.weighted_usage(A) == 0.0
    assert r.accountant.resources[f"{PSLOT}@<10.1.0.1:9618>"]["SlotWeight"] == 0.0


def test_fully_carved_pslot_and_a_one_core_job_no_match(tmp_path):
    slots = [pslot(cpus=0), slot("slot1@n2.test.local", Cpus=1, START=False)]
    r = cycle(tmp_path, slots=slots, jobs=[job(1, p, "a") for p in range(3)])
    assert r.matches == []


def eight_core_pool(tmp_path, carved: bool, **kw):
    """Three static 8-core slots (weight 8 each, pool 24), a and b with equal priority:
    limits 12 each, so each gets one slot on spin 1 (a second costs 16 > 12). On
    spin 2 the limits are 12 - 8 = 4. `carved` adds a fully carved p-slot: weight 0,
    it matches none of these 1-core jobs and leaves the pool weight at 24, but makes
    minSlotWeight 0 (2.2 step 5)."""
    slots = [slot(f"slot1@n{i}.test.local", Cpus=8, SlotWeight=Expr("Cpus")) for i in range(3)]
    if carved:
        slots.append(pslot("slot1@n9.test.local", cpus=0))
    jobs = [job(1, p, "a") for p in range(4)] + [job(2, p, "b") for p in range(4)]
    return cycle(tmp_path, slots=slots, jobs=jobs, **kw)


def test_min_slot_weight_eight_skips_spin_two_limits_below_it(tmp_path):
    """2.5 step 14 case 3: spin 2, limit 4 < minSlotWeight 8: RESUME without
    negotiating; no progress, so the third slot stays idle this cycle."""
    r = eight_core_pool(tmp_path, carved=False)
    assert r.pool_weight == 24.0
    assert Counter(m.submitter for m in r.matches) == {A: 1, B: 1}
    assert r.spins == 2


def test_fully_carved_pslot_makes_min_slot_weight_zero_and_fills_the_pool(tmp_path):
    """Rule 6.2: a carved p-slot makes minSlotWeight 0, which disables the skip. On
    spin 2 a negotiates with limit 4, and its first match is allowed by the round-up
    (M5) at cost 8; b's limit is then capped by pieLeft = 0 and it gets nothing."""
    r = eight_core_pool(tmp_path, carved=True)
    assert r.pool_weight == 24.0
    assert Counter(m.submitter for m in r.matches) == {A: 2, B: 1}
    assert [m.cost for m in r.matches] == [8.0, 8.0, 8.0]
    spin2 = {x.submitter: x.limit for x in r.limits if x.spin == 2}
    assert spin2 == {A: 4.0, B: 0.0}
    assert r.accountant.weighted_usage(A) == 16.0


def ceiling_pool(tmp_path, carved: bool):
    """One 8-core slot; a has Ceiling 4: headroom 4 < minSlotWeight 8 means DONE
    before negotiating (2.5 step 14 case 4), unless a carved p-slot makes it 0; then
    the ceiling is only checked before each request (2.6 step 3), and one match of
    cost 8 overshoots it."""
    slots = [slot("slot1@n1.test.local", Cpus=8, SlotWeight=Expr("Cpus"))]
    if carved:
        slots.append(pslot("slot1@n9.test.local", cpus=0))
    jobs = [job(1, p, "a") for p in range(3)]
    return cycle(tmp_path, slots=slots, jobs=jobs, accounting_ads=[accounting(A, Ceiling=4)])


def test_ceiling_below_min_slot_weight_is_done_before_negotiating(tmp_path):
    r = ceiling_pool(tmp_path, carved=False)
    assert r.matches == [] and r.rejections == []


def test_ceiling_with_carved_pslot_allows_one_overshooting_match(tmp_path):
    r = ceiling_pool(tmp_path, carved=True)
    assert [(m.assigned_job, m.cost) for m in r.matches] == [("1.0", 8.0)]
    assert r.accountant.weighted_usage(A) == 8.0


# ---- 4. d-slots are charged their own weight (A15, A16, A19) ----------------------------

def dslot(n: int, user: str, cpus: int = 2, **attrs) -> dict:
    return slot(f"slot1_{n}@n1.test.local", DynamicSlot=True, SlotType="Dynamic",
                ParentSlotName=PSLOT, Cpus=cpus, Memory=1024, SlotWeight=Expr("Cpus"),
                State="Claimed", Activity="Busy", RemoteUser=f"{user}@{DOMAIN}",
                RemoteOwner=f"{user}@{DOMAIN}", RemoteScheddName="schedd.test.local",
                JobId=f"9{n}.0", StartdIpAddr="<10.1.0.1:9618>", MyAddress="<10.1.0.1:9618>",
                **attrs)


def dslot_pool(tmp_path, reported: dict[str, float]):
    """The p-slot has 2 cores left (weight 2, unclaimed: nobody is charged for it);
    a holds three 2-core d-slots, b one. Nobody has idle jobs."""
    slots = [pslot(cpus=2)] + [dslot(i, "a") for i in (1, 2, 3)] + [dslot(4, "b")]
    running = [job(90 + i, 0, u, JobStatus=2) for i, u in ((1, "a"), (2, "a"), (3, "a"), (4, "b"))]
    subs = submitters_for(running, running={A: 3, B: 1})
    acc = [accounting(n, WeightedResourcesUsed=w, ResourcesUsed=int(w // 2))
           for n, w in reported.items()]
    return cycle(tmp_path, slots=slots, jobs=running, submitters=subs, accounting_ads=acc)


def test_dslots_are_charged_their_own_slot_weight_at_cycle_start(tmp_path):
    """CheckMatches (A19) charges each claimed d-slot GetSlotWeight = its own Cpus, 2:
    a 6, b 2, from an accountant that had counted nothing yet."""
    r = dslot_pool(tmp_path, {A: 0.0, B: 0.0})
    assert (row(r, A)["usage_before"], row(r, B)["usage_before"]) == (6.0, 2.0)
    assert r.pool_weight == 10.0               # 4 d-slots x 2 + the p-slot's 2 left
    assert r.matches == []
    recs = {k: v for k, v in r.accountant.resources.items() if k.startswith("slot1_")}
    assert sorted((v["RemoteUser"], v["SlotWeight"]) for v in recs.values()) == [
        (A, 2.0), (A, 2.0), (A, 2.0), (B, 2.0)]
    assert r.accountant.customers[A]["ResourcesUsed"] == 3


def test_dslots_already_counted_are_not_charged_twice(tmp_path):
    """The accountant already counted them (6 and 2): the usage stays 6 and 2."""
    r = dslot_pool(tmp_path, {A: 6.0, B: 2.0})
    assert (row(r, A)["usage_before"], row(r, B)["usage_before"]) == (6.0, 2.0)


# ---- 5. a consumption-policy p-slot shared by two schedds (5.5, P5, P6) -------------------

def shared_cp_pool(tmp_path, **slot_attrs):
    """A 4-core 4096 MB CP p-slot, SlotWeight = Cpus + Memory/4096.0 (5.5's example
    weight; a real divisor, since Memory / 4096 is integer division): 5 to start. a at s1 negotiates first with two 1-core 1024 MB jobs; then
    b at s2 with a 2-core 1500 MB job (quantized to 1536 MB) and a 1-core job. A
    static slot that matches nothing (START = false, 100 cores) keeps the limits
    (52.5 each) out of the way."""
    slots = [cp_pslot(weight="Cpus + Memory / 4096.0", **slot_attrs),
             slot("slot1@n2.test.local", Cpus=100, START=False)]
    jobs = [two_schedd_job(S1, 1, 0, "a", RequestCpus=1, RequestMemory=1024),
            two_schedd_job(S1, 1, 1, "a", RequestCpus=1, RequestMemory=1024),
            two_schedd_job(S2, 5, 0, "b", RequestCpus=2, RequestMemory=1500),
            two_schedd_job(S2, 6, 0, "b", RequestCpus=1, RequestMemory=100)]
    subs = [submitter(A, S1, S1_ADDR, 2, 1000), submitter(B, S2, S2_ADDR, 2, 1001)]
    return cycle(tmp_path, slots=slots, jobs=jobs, submitters=subs,
                 accounting_ads=[accounting(A), accounting(B)])


def test_cp_pslot_serves_two_schedds_in_one_cycle_each_match_costing_the_weight_drop(tmp_path):
    """P5: the p-slot stays in the list; each match deducts its consumption and costs
    the drop in SlotWeight: 5 -> 3.75 -> 2.5 (a, 1.25 each) -> 0.125 (b: 2 cores and
    1536 MB, 2.375). Then no core is left for b's 1-core job."""
    r = shared_cp_pool(tmp_path)
    assert [(m.assigned_job, m.schedd, m.submitter, m.slot, m.cost) for m in r.matches] == [
        ("1.0", S1, A, PSLOT, 1.25), ("1.1", S1, A, PSLOT, 1.25),
        ("5.0", S2, B, PSLOT, 2.375)]
    assert [(x.job, x.schedd, x.reason) for x in r.rejections] == [
        ("6.0", S2, REASON_NO_MATCH)]
    assert (row(r, A)["usage_after"], row(r, B)["usage_after"]) == (2.5, 2.375)
    # P6: one pseudo-resource per match, weight = cost; the count on the base record
    base = f"{PSLOT}@<10.1.0.1:9618>"
    assert r.accountant.resources[base]["NumCpMatches"] == 3
    assert [(r.accountant.resources[f"{base}_cp_match_{i:03d}"]["RemoteUser"],
             r.accountant.resources[f"{base}_cp_match_{i:03d}"]["SlotWeight"])
            for i in range(3)] == [(A, 1.25), (A, 1.25), (B, 2.375)]


def test_cp_pslot_claim_ids_cap_the_matches(tmp_path):
    """P5: NumClaims = 2 claim ids: the third match has no claim id, so a gets both
    and b nothing, though the assets would allow b's 2-core job."""
    r = shared_cp_pool(tmp_path, NumClaims=2)
    assert [(m.assigned_job, m.cost) for m in r.matches] == [("1.0", 1.25), ("1.1", 1.25)]


def test_cp_pslot_claimed_by_one_schedd_serves_only_that_schedd(tmp_path):
    """4.5 step 3 before step 4: a CP p-slot claimed by s2 is skipped for a (s1)."""
    r = shared_cp_pool(tmp_path, State="Claimed", Activity="Idle", RemoteScheddName=S2)
    assert [(m.assigned_job, m.schedd, m.cost) for m in r.matches] == [
        ("5.0", S2, 2.375), ("6.0", S2, 1.0625)]
    assert [(x.job, x.schedd, x.reason) for x in r.rejections] == [
        ("1.0", S1, REASON_NO_MATCH)]


# ---- the next cycle charges the d-slots instead (P1, P6, A19) -----------------------------

def next_cycle(tmp_path, r, slots, jobs, running):
    """The cycle 60 s later, the accountant carrying on from `r`."""
    import dataclasses
    pool = load_pool(make_pool(tmp_path / "next", slots=slots, jobs=jobs,
                               submitters=submitters_for(jobs, running), captured_at=100060))
    return run_cycle(dataclasses.replace(pool, accountant=r.accountant.to_state()))


def test_pslot_match_charged_8_then_its_dslot_weight_next_cycle(tmp_path):
    """P1: the match is charged the whole p-slot's 8 until the next CheckMatches; then
    the p-slot is unclaimed again (7 cores left, nobody charged) and the 1-core d-slot
    carved for the job charges its own weight, 1."""
    jobs = [job(1, 0, "a")]
    r = cycle(tmp_path, slots=[pslot()], jobs=jobs)
    assert r.accountant.weighted_usage(A) == 8.0
    jobs[0]["JobStatus"] = 2
    slots = [pslot(cpus=7), dslot(1, "a", cpus=1)]
    r2 = next_cycle(tmp_path, r, slots, jobs, {A: 1})
    assert row(r2, A)["usage_before"] == 1.0
    assert not any(k.startswith(PSLOT) for k in r2.accountant.resources)


def test_cp_match_records_give_way_to_the_dslots_next_cycle(tmp_path):
    """P6: three CP matches of cost 1 are three pseudo-resources; at the next
    CheckMatches they are removed and the three 1-core d-slots are charged instead:
    the usage is 3 either way, now from the d-slots."""
    jobs = [job(1, p, "a") for p in range(3)]
    r = cycle(tmp_path, slots=[cp_pslot()], jobs=jobs)
    assert [m.cost for m in r.matches] == [1.0, 1.0, 1.0]
    assert r.accountant.weighted_usage(A) == 3.0
    for j in jobs:
        j["JobStatus"] = 2
    slots = [cp_pslot(cpus=1, memory=4096 - 3 * 256)] + [dslot(i, "a", cpus=1) for i in (1, 2, 3)]
    r2 = next_cycle(tmp_path, r, slots, jobs, {A: 3})
    assert row(r2, A)["usage_before"] == 3.0
    assert sorted(r2.accountant.resources) == [f"slot1_{i}@n1.test.local@<10.1.0.1:9618>"
                                               for i in (1, 2, 3)]


# ---- slot weights off (A15, 5.5) ----------------------------------------------------------

def test_slot_weights_off_pslot_costs_one_but_cp_cost_is_still_the_weight_drop(tmp_path):
    """NEGOTIATOR_USE_SLOT_WEIGHTS = False: GetSlotWeight is 1 for the p-slot without
    a policy; a consumption-policy match still costs the raw SlotWeight drop (5.5)."""
    off = "NEGOTIATOR_USE_SLOT_WEIGHTS = False\n"
    r = cycle(tmp_path / "plain", slots=[pslot()], jobs=[job(1, 0, "a", RequestCpus=2)],
              config=off)
    assert costs(r) == [("1.0", PSLOT, 1.0)]
    assert r.accountant.weighted_usage(A) == 1.0
    r = cycle(tmp_path / "cp", slots=[cp_pslot()], jobs=[job(1, 0, "a", RequestCpus=2)],
              config=off)
    assert costs(r) == [("1.0", PSLOT, 2.0)]
    assert r.accountant.weighted_usage(A) == 2.0


# ---- the Requirements see the consumption (4.5 steps 4-5, 5.4) -----------------------------

def test_job_requirements_see_consumption_in_place_of_request(tmp_path):
    """While the Requirements are tested, RequestCpus is the consumption: with
    ConsumptionCpus = 2, a job requiring its own RequestCpus == 1 does not match, one
    requiring RequestCpus == 2 (it asked for 1) does, and consumes 2 (cost 2)."""
    s = cp_pslot(ConsumptionCpus=Expr("2"))
    jobs = [job(1, 0, "a", RequestCpus=1, Requirements=Expr("MY.RequestCpus == 1")),
            job(2, 0, "a", RequestCpus=1, Requirements=Expr("MY.RequestCpus == 2"))]
    r = cycle(tmp_path, slots=[s], jobs=jobs)
    assert costs(r) == [("2.0", PSLOT, 2.0)]
    assert [(x.job, x.reason) for x in r.rejections] == [("1.0", REASON_NO_MATCH)]


# ---- GhostMultiplier (2.2 step 5) ---------------------------------------------------------

def test_ghost_multiplier_zero_makes_min_slot_weight_zero(tmp_path):
    """An ad with GhostMultiplier = 0 adds 0 to the pool and makes minSlotWeight 0:
    a's ceiling headroom 4 is then not below it, so a negotiates and overshoots its
    ceiling with one 8-core match (as with a carved p-slot above)."""
    slots = [slot("slot1@n1.test.local", Cpus=8, SlotWeight=Expr("Cpus")),
             slot("slot1@n9.test.local", Cpus=8, SlotWeight=Expr("Cpus"), START=False,
                  GhostMultiplier=0)]
    jobs = [job(1, p, "a") for p in range(3)]
    r = cycle(tmp_path, slots=slots, jobs=jobs, accounting_ads=[accounting(A, Ceiling=4)])
    assert r.pool_weight == 8.0
    assert [(m.assigned_job, m.cost) for m in r.matches] == [("1.0", 8.0)]
