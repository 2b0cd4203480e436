"""ALLOW_PSLOT_PREEMPTION (core.pslot_preemption): pslotMultiMatch on plain ads, and
the cycle with the knob on and off."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from conftest import unpack_recording
from negotiator_ext.adapters import classad_semantics
from negotiator_ext.core import classads, pslot_preemption as pp
from negotiator_ext.core.matchmaking import symmetric_match
from negotiator_ext.cycle import run_cycle
from negotiator_ext.pool import config_warnings, load_pool

classad_semantics.enable()

DATA = Path(__file__).parent / "data" / "rules"


def _pslot(ranks, cpus=0, extra="", states=None, retire=None, rank="0"):
    n = len(ranks)
    states = states or ["Claimed"] * n
    retire = retire or [0] * n
    lst = lambda xs: "{ " + ", ".join(xs) + " }"      # noqa: E731
    return classads.parse_old_ad("\n".join([
        'Name = "slot1@h"', "PartitionableSlot = true", f"Cpus = {cpus}", "Memory = 1000",
        "Disk = 5000", 'MachineResources = "Cpus Memory Disk Swap"', "Swap = 7",
        f"NumDynamicSlots = {n}", f"Rank = {rank}", "SlotWeight = Cpus",
        "Requirements = TARGET.RequestCpus <= MY.Cpus",
        "ChildName = " + lst(f'"slot1_{i + 1}@h"' for i in range(n)),
        "ChildCurrentRank = " + lst(str(r) for r in ranks),
        "ChildCpus = " + lst("1" for _ in ranks),
        "ChildMemory = " + lst("100" for _ in ranks),
        "ChildState = " + lst(f'"{s}"' for s in states),
        "ChildRetirementTimeRemaining = " + lst(str(r) for r in retire),
        extra]))


def _dslots(n, user="a@x"):
    return {f"slot1_{i + 1}@h": classads.parse_old_ad(
        f'Name = "slot1_{i + 1}@h"\nDSlotId = {i + 1}\nAccountingGroup = "{user}"')
        for i in range(n)}


def _job(cpus, prio=0):
    return classads.parse_old_ad(f"RequestCpus = {cpus}\nJobPrio = {prio}\nRequirements = true")


def _match(job, ad):
    return symmetric_match(job, ad, False)


def test_eligible_children_sorted_by_rank_skipping_retiring_preempting_and_spent():
    ad = _pslot([3, 1, 2, 0, 1], states=["Claimed", "Claimed", "Preempting", "Claimed",
                                         "Claimed"], retire=[0, 0, 0, 5, 0])
    assert pp.eligible(ad, set()) == [(1, 1.0), (4, 1.0), (0, 3.0)]
    assert pp.eligible(ad, {1}) == [(4, 1.0), (0, 3.0)]


def test_priority_preemption_adds_children_until_the_job_fits():
    ad = _pslot([0, 0, 0, 0])
    dslots = _dslots(4)
    spent: set[int] = set()
    out = pp.multi_match(_job(2), ad, "b@x", False, spent, dslots.get,
                         lambda d: True, _match)
    assert out is not None and out.state == pp.PRIO_PREEMPTION
    assert out.names == ["slot1_1@h", "slot1_2@h"] and spent == {0, 1}
    # the ad is changed: 2 cores, 1200 MB, Swap untouched (no ChildSwap), a bogus user
    assert classads.eval_attr(ad, "Cpus") == 2 and classads.eval_attr(ad, "Memory") == 1200
    assert classads.eval_attr(ad, "Swap") == 7
    assert classads.eval_attr(ad, "RemoteUser") == pp.VARIOUS
    pp.restore(ad, out)
    assert classads.eval_attr(ad, "Cpus") == 0 and classads.eval_attr(ad, "Memory") == 1000
    assert "RemoteUser" not in ad
    # the children taken are spent for the cycle: the next try takes the other two
    out2 = pp.multi_match(_job(2), ad, "b@x", False, spent, dslots.get,
                          lambda d: True, _match)
    assert out2.names == ["slot1_3@h", "slot1_4@h"]
    pp.restore(ad, out2)
    assert pp.multi_match(_job(1), ad, "b@x", False, spent, dslots.get,
                          lambda d: True, _match) is None
    assert classads.eval_attr(ad, "Cpus") == 0      # a failure leaves the ad as it was


def test_equal_rank_needs_preemption_requirements_on_the_dslot_and_another_user():
    ad = _pslot([0, 0, 0, 0])
    dslots = _dslots(4)
    dslots["slot1_1@h"]["AccountingGroup"] = "b@x"          # the submitter's own
    refuse_2 = lambda d: classads.eval_attr(d, "DSlotId") != 2   # noqa: E731
    out = pp.multi_match(_job(2), ad, "b@x", False, set(), dslots.get, refuse_2, _match)
    assert out.names == ["slot1_3@h", "slot1_4@h"]
    # startd-rank-only mode never takes an equal rank; a missing dslot ad is passed by
    ad = _pslot([0, 0, 0, 0])
    assert pp.multi_match(_job(1), ad, "b@x", True, set(), dslots.get,
                          lambda d: True, _match) is None
    assert pp.multi_match(_job(1), ad, "b@x", False, set(), {}.get,
                          lambda d: True, _match) is None


def test_rank_preemption_takes_lower_ranks_first_and_stops_above_the_new_rank():
    ad = _pslot([3, 3, 1, 1], rank="TARGET.JobPrio")
    dslots = _dslots(4)
    out = pp.multi_match(_job(1, prio=5), ad, "b@x", False, set(), dslots.get,
                         lambda d: False, _match)
    assert out.state == pp.RANK_PREEMPTION and out.names == ["slot1_3@h"]
    pp.restore(ad, out)
    # new rank 2: only the rank-1 children can go, never enough for 3 cores
    assert pp.multi_match(_job(3, prio=2), ad, "b@x", False, set(), dslots.get,
                          lambda d: True, _match) is None
    # new rank 3: rank preemption of the two rank-1, then priority on an equal rank
    out = pp.multi_match(_job(3, prio=3), ad, "b@x", False, set(), dslots.get,
                         lambda d: True, _match)
    assert out.state == pp.PRIO_PREEMPTION
    assert out.names == ["slot1_3@h", "slot1_4@h", "slot1_1@h"]


def test_a_static_slot_or_a_pslot_without_dslots_is_never_tried():
    ad = _pslot([0])
    ad["PartitionableSlot"] = False
    assert pp.multi_match(_job(1), ad, "b@x", False, set(), _dslots(1).get,
                          lambda d: True, _match) is None
    ad = _pslot([0])
    ad["NumDynamicSlots"] = 0
    assert pp.multi_match(_job(1), ad, "b@x", False, set(), _dslots(1).get,
                          lambda d: True, _match) is None


def test_the_cycle_differs_from_knob_off(tmp_path):
    """b's 2-core jobs against two full 4-core p-slots of a's 1-core jobs: on, one match
    per p-slot preempting 2 dslots, each costing 2; off, no 1-core dslot fits."""
    d = unpack_recording(DATA / "pslot_preemption.tar.gz", tmp_path)
    pool = load_pool(d)
    on = run_cycle(pool)
    assert [(m.slot, m.preempting, m.cost) for m in on.matches] == [
        ("slot1@vm", "2 dslots", 2.0), ("slot2@vm", "2 dslots", 2.0)]
    off = run_cycle(replace(pool, config=replace(pool.config, allow_pslot_preemption=False)))
    assert off.matches == [] and [r.reason for r in off.rejections] == ["no match found"]
    # without preemption considered the knob does nothing
    none = run_cycle(replace(pool, config=replace(pool.config, consider_preemption=False)))
    assert none.matches == []
    # the p-slot ads are put back once the cycle is over
    assert all("RemoteUser" not in ad for ad in pool.slot_ads
               if classads.eval_bool(ad, "PartitionableSlot"))


def test_the_warning_names_only_what_is_not_modelled(tmp_path):
    d = unpack_recording(DATA / "pslot_preemption.tar.gz", tmp_path)
    pool = load_pool(d)
    w = [x for x in config_warnings(pool.config, pool.groups) if "ALLOW_PSLOT" in x]
    assert len(w) == 1 and "ChildClaimIds" in w[0] and "consumption policy" in w[0]
    assert "runs as if" not in w[0]
    both = replace(pool.config, ignore_job_ranks=True)
    w = [x for x in config_warnings(both, pool.groups) if "ALLOW_PSLOT" in x]
    assert len(w) == 1 and "runs as if ALLOW_PSLOT_PREEMPTION were off" in w[0]
    off = replace(pool.config, allow_pslot_preemption=False)
    assert not [x for x in config_warnings(off, pool.groups) if "ALLOW_PSLOT" in x]


def test_a_preempting_match_is_not_counted_as_unclaimed_use(tmp_path):
    """b's limit made 3 (priority factor 1667 against a's 1000). The fresh scan takes
    the first p-slot (cost 2). The cached list's next entry costs 2 as well (its changed
    ad's SlotWeight): 2 + 2 > 3 fails the check against what b used, but the cached path
    then tries the unclaimed counters, and a p-slot preempting dslots (RemoteUser
    "various_dSlot_users") adds nothing to those: 0 + 2 passes, and b gets both."""
    d = unpack_recording(DATA / "pslot_preemption.tar.gz", tmp_path)
    acc = d / "accounting.ads"
    text = acc.read_text()
    at = text.index('Name = "grp.b@negotiator-ext.test"')
    acc.write_text(text[:at] + text[at:].replace("PriorityFactor = 1.0", "PriorityFactor = 1667.0", 1))
    result = run_cycle(load_pool(d))
    b = next(s for s in result.submitters if s["name"].startswith("grp.b"))
    assert 2.9 < b["limit"] < 3.1
    # both in the first pie spin, the second from the cached list (counted as unclaimed
    # use, it would be refused there and come only in the next spin, from a new scan)
    assert [(m.slot, m.cost, m.spin) for m in result.matches] == [
        ("slot1@vm", 2.0, 1), ("slot2@vm", 2.0, 1)]
