"""The consumption-policy seed's examples (seeds/consumption-policies.txt) as whole
cycles: several matches per p-slot in one cycle, each costing the drop in SlotWeight."""

from __future__ import annotations

from negotiator_ext.cycle import run_cycle
from negotiator_ext.pool import load_pool
from poolmaker import DOMAIN, Expr, job, make_pool, slot


def cycle(tmp_path, **kw):
    return run_cycle(load_pool(make_pool(tmp_path / "pool", **kw)))


def pslot(name="slot1@n1.test.local", cpus=4, memory=4096, disk=100000, extra=None, **policy):
    """A p-slot as a startd with CONSUMPTION_POLICY = True advertises it."""
    resources = "Cpus Memory Disk" + "".join(f" {r}" for r in (extra or {}))
    d = dict(PartitionableSlot=True, SlotType="Partitionable", Cpus=cpus, Memory=memory,
             Disk=disk, TotalSlotCpus=cpus, TotalSlotMemory=memory, TotalSlotDisk=disk,
             MachineResources=resources, **(extra or {}))
    d.update({k: (Expr(v) if isinstance(v, str) else v) for k, v in policy.items()})
    return slot(name, **d)


def costs(r) -> list[tuple[str, float]]:
    return [(m.assigned_job, m.cost) for m in r.matches]


def usage_after(r, user="a") -> float:
    return next(s["usage_after"] for s in r.submitters if s["name"] == f"{user}@{DOMAIN}")


def test_memory_centric_match_costs_the_chunks_it_takes(tmp_path):
    """The seed's worked example: 4096 MB in 1024 MB chunks, weight 4; a 2048 MB job
    costs 4 - 2 = 2, and a 1500 MB job is quantized up to 2048 MB."""
    s = pslot(ConsumptionCpus="1", ConsumptionMemory="quantize(target.RequestMemory, {1024})",
              ConsumptionDisk="quantize(target.RequestDisk, {128})",
              SlotWeight="floor(Memory / 1024)")
    jobs = [job(1, 0, "a", RequestMemory=2048), job(1, 1, "a", RequestMemory=1500),
            job(1, 2, "a", RequestMemory=1024)]
    r = cycle(tmp_path, slots=[s], jobs=jobs)
    assert costs(r) == [("1.0", 2.0), ("1.1", 2.0)]
    assert {m.slot for m in r.matches} == {"slot1@n1.test.local"}
    assert usage_after(r) == 4.0                 # the accountant charges the costs
    assert [x.reason for x in r.rejections] == ["no match found"]   # no memory left


def test_cpu_centric_fills_the_pslot_in_one_cycle(tmp_path):
    s = pslot(ConsumptionCpus="target.RequestCpus",
              ConsumptionMemory="quantize(target.RequestMemory, {32})",
              ConsumptionDisk="quantize(target.RequestDisk, {128})", SlotWeight="Cpus")
    jobs = [job(1, p, "a", RequestCpus=1, RequestMemory=100) for p in range(6)]
    r = cycle(tmp_path, slots=[s], jobs=jobs)
    assert costs(r) == [(f"1.{p}", 1.0) for p in range(4)]


def test_multi_centric_weight_follows_the_most_limiting_asset(tmp_path):
    """Weight = min(Cpus, floor(Memory/256)): 4 cpus and 1024 MB start at 4; a
    1-cpu 512 MB job leaves min(3, 2) = 2 (cost 2), the next min(2, 0) = 0 (cost 2)."""
    s = pslot(memory=1024, ConsumptionCpus="target.RequestCpus",
              ConsumptionMemory="quantize(target.RequestMemory, {256})",
              ConsumptionDisk="quantize(target.RequestDisk, {128})",
              SlotWeight="ifThenElse(Cpus < floor(Memory/256), Cpus, floor(Memory/256))")
    jobs = [job(1, p, "a", RequestCpus=1, RequestMemory=512) for p in range(3)]
    r = cycle(tmp_path, slots=[s], jobs=jobs)
    assert costs(r) == [("1.0", 2.0), ("1.1", 2.0)]


def test_static_slot_emulation_takes_one_job_per_pslot(tmp_path):
    """Consume everything: one match per p-slot. SlotWeight is the constant 1, so the
    drop in weight, and the match cost, is 0 (cp_deduct_assets: w0 - w1)."""
    policy = dict(ConsumptionCpus="TotalSlotCpus", ConsumptionMemory="TotalSlotMemory",
                  ConsumptionDisk="floor(0.9 * TotalSlotDisk)", SlotWeight="1")
    slots = [pslot(f"slot1@n{i}.test.local", **policy) for i in range(2)]
    jobs = [job(1, p, "a") for p in range(3)]
    r = cycle(tmp_path, slots=slots, jobs=jobs)
    assert sorted(m.slot for m in r.matches) == ["slot1@n0.test.local", "slot1@n1.test.local"]
    assert [m.cost for m in r.matches] == [0.0, 0.0]


def test_token_based_extensible_resource(tmp_path):
    """MACHINE_RESOURCE_tokens = 3, one token per job and nothing else: three matches,
    each costing one token; jobs need not request tokens at all."""
    s = pslot(extra={"Tokens": 3}, ConsumptionTokens="1", ConsumptionCpus="0",
              ConsumptionMemory="0", ConsumptionDisk="0", SlotWeight="Tokens")
    jobs = [job(1, p, "a") for p in range(5)]
    r = cycle(tmp_path, slots=[s], jobs=jobs)
    assert costs(r) == [("1.0", 1.0), ("1.1", 1.0), ("1.2", 1.0)]


def test_missing_request_attribute_counts_as_zero(tmp_path):
    """The seed's idiom for an extensible resource most jobs do not request."""
    s = pslot(extra={"Actuators": 8}, ConsumptionCpus="target.RequestCpus",
              ConsumptionMemory="quantize(target.RequestMemory, {32})",
              ConsumptionDisk="quantize(target.RequestDisk, {128})",
              ConsumptionActuators="ifThenElse(target.RequestActuators =!= undefined, "
                                   "target.RequestActuators, 0)",
              SlotWeight="Cpus")
    jobs = [job(1, 0, "a", RequestActuators=5), job(1, 1, "a"), job(2, 0, "a", RequestActuators=5)]
    r = cycle(tmp_path, slots=[s], jobs=jobs)
    # 1.0 takes 5 actuators, 1.1 none; 2.0 would need 5 of the 3 left
    assert sorted(m.assigned_job for m in r.matches) == ["1.0", "1.1"]


def test_a_job_consuming_nothing_never_matches(tmp_path):
    """cp_sufficient_assets: at least one asset must be consumed."""
    s = pslot(extra={"Tokens": 3}, ConsumptionTokens="target.RequestTokens",
              ConsumptionCpus="0", ConsumptionMemory="0", ConsumptionDisk="0",
              SlotWeight="Tokens")
    jobs = [job(1, 0, "a"), job(2, 0, "b", RequestTokens=1)]
    r = cycle(tmp_path, slots=[s], jobs=jobs)
    assert [m.assigned_job for m in r.matches] == ["2.0"]
    assert [(x.job, x.reason) for x in r.rejections] == [("1.0", "no match found")]


def test_pslot_without_slotweight_costs_the_drop_in_slot_weight_knob(tmp_path):
    """A p-slot ad with no SlotWeight gets the negotiator's SLOT_WEIGHT (default Cpus)
    inserted (obtainAdsFromCollector), so each match costs the Cpus it takes, not 0."""
    s = pslot(ConsumptionCpus="target.RequestCpus",
              ConsumptionMemory="quantize(target.RequestMemory, {32})",
              ConsumptionDisk="quantize(target.RequestDisk, {128})")
    assert "SlotWeight" not in s
    jobs = [job(1, p, "a", RequestCpus=2, RequestMemory=100) for p in range(3)]
    r = cycle(tmp_path, slots=[s], jobs=jobs)
    assert costs(r) == [("1.0", 2.0), ("1.1", 2.0)]
    assert usage_after(r) == 4.0
