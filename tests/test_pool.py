"""The pool as the negotiator sees it before a cycle: which submitter ads count, the
cycle's time, and that the commands agree with the cycle on both."""

from __future__ import annotations

import pytest

from negotiator_ext.cli import main
from negotiator_ext.cycle import run_cycle
from negotiator_ext.pool import load_pool
from poolmaker import DOMAIN, Expr, job, make_pool, slot, submitters_for


def test_submitter_ads_need_a_valid_name_and_a_schedd_address(tmp_path):
    """2.2 step 3: no ScheddIpAddr, or whitespace in the Name (IsValidSubmitterName),
    and the ad is dropped: no demand, no negotiation."""
    jobs = [job(1, 0, "a", group="g1"), job(2, 0, "b", group="g1"), job(3, 0, "c", group="g1")]
    subs = submitters_for(jobs)
    del subs[1]["ScheddIpAddr"]                              # b
    subs[2]["Name"] = f"g1.c x@{DOMAIN}"                    # c
    d = make_pool(tmp_path / "p", slots=[slot(f"slot1@n{i}.test.local") for i in range(4)],
                  jobs=jobs, submitters=subs,
                  config="GROUP_NAMES = g1\nGROUP_QUOTA_g1 = 4\nGROUP_ACCEPT_SURPLUS = False")
    pool = load_pool(d)
    assert [s["Name"] for s in pool.submitter_ads()] == [f"g1.a@{DOMAIN}"]
    r = run_cycle(pool)
    assert [m.submitter for m in r.matches] == [f"g1.a@{DOMAIN}"]
    g1 = next(g for g in r.groups if g["name"] == "g1")
    assert g1["requested"] == 1.0                           # only a's idle job
    assert r.quotas["g1"].requested == 1.0                  # what userprio -quotas shows


def test_cycle_time_without_meta_json_is_the_accountants_last_update(tmp_path):
    d = make_pool(tmp_path / "p", slots=[slot("slot1@n1.test.local")], jobs=[job(1, 0, "a")])
    (d / "meta.json").unlink()
    pool = load_pool(d)
    assert pool.snapshot.captured_at is None
    assert pool.cycle_time() == pool.accountant.last_update_time == 100000
    assert pool.cycle_time(123456) == 123456
    assert run_cycle(pool).time == 100000


def test_warnings_are_printed_once(tmp_path, capsys):
    d = make_pool(tmp_path / "p", slots=[slot("slot1@n1.test.local")], jobs=[job(1, 0, "a")])
    (d / "accounting.ads").unlink()            # warns: starting from an empty accountant
    assert main(["negotiate", str(d)]) == 0
    out, err = capsys.readouterr()
    assert err.count("empty accountant") == 1
    assert "empty accountant" not in out


@pytest.mark.parametrize("line, knob", [
    ("NEGOTIATOR_CONSIDER_PREEMPTION = True\nALLOW_PSLOT_PREEMPTION = True", "ALLOW_PSLOT_PREEMPTION"),
    ("NEGOTIATOR_IGNORE_JOB_RANKS = True", "NEGOTIATOR_IGNORE_JOB_RANKS"),
])
def test_knobs_not_modelled_are_announced(tmp_path, line, knob):
    d = make_pool(tmp_path, slots=[slot("slot1@a")], jobs=[job(1, 0, "alice")], config=line)
    assert [w for w in load_pool(d).warnings if "not modelled" in w] == [
        w for w in load_pool(d).warnings if knob in w]
    assert any(knob in w for w in load_pool(d).warnings)
    d = make_pool(tmp_path / "off", slots=[slot("slot1@a")], jobs=[job(1, 0, "alice")],
                  config="NEGOTIATOR_CONSIDER_PREEMPTION = True")
    assert not any("not modelled" in w for w in load_pool(d).warnings)


def test_the_pools_size_is_each_slots_pie_weight_and_effective_size(tmp_path):
    """Step 8 from build_pool's per-slot figures (kept with a loop's kept ads): a pie
    weight is SlotWeight x GhostMultiplier, a p-slot counts its Cpus, any other slot 1;
    the same from a slot memo, and with NEGOTIATOR_SLOT_POOLSIZE_CONSTRAINT the ads are
    asked again."""
    import dataclasses

    from negotiator_ext.pool import build_pool
    slots = [slot("slot1@a.test.local", Cpus=2, SlotWeight=Expr("Cpus"), GhostMultiplier=3),
             slot("slot1@b.test.local", Cpus=8, SlotWeight=Expr("Cpus"), PartitionableSlot=True),
             slot("slot1@c.test.local")]
    make_pool(tmp_path / "p", slots=slots, jobs=[job(1, 0, "a")])
    pool = load_pool(tmp_path / "p")
    assert pool.pie_weights == (6.0, 8.0, 1.0) and pool.effective_sizes == (1.0, 8.0, 1.0)
    assert pool.pool_sizes() == (3, 15.0, 10.0)
    memos = tuple({} for _ in pool.snapshot.slots)
    kept = dataclasses.replace(pool.snapshot, slot_memos=memos)
    for _ in range(2):                                  # worked out, then from the memo
        again = build_pool(kept, pool.config)
        assert (again.pie_weights, again.pool_sizes()) == (pool.pie_weights, (3, 15.0, 10.0))
    narrow = dataclasses.replace(pool.config, slot_poolsize_constraint="Cpus < 8")
    assert build_pool(kept, narrow).pool_sizes() == (2, 7.0, 2.0)


def test_a_loops_snapshot_config_is_read_again_only_when_it_changed(tmp_path, mocker):
    """A shadow loop's passes keep the config read from their snapshot's own `config`
    (condor_config.ConfigMemo): the same bytes are not handed to HTCondor's reader again
    (the configuration is the same, its source the new file); other bytes are; a text
    that draws $RANDOM_INTEGER is read every time, and one that names CONFIG_ROOT (the
    snapshot's own directory) again for another directory."""
    from negotiator_ext.adapters import condor_config
    from negotiator_ext.adapters.condor_config import ConfigMemo

    def snap(name, config):
        return make_pool(tmp_path / name, slots=[slot("slot1@a.test.local")],
                         jobs=[job(1, 0, "a")], config=config)

    memo = ConfigMemo()
    reads = mocker.spy(condor_config.ConfigRead, "__init__")
    first = load_pool(snap("one", "# captured at 1\nPRIORITY_HALFLIFE = 600"),
                      config_memo=memo)
    # (the comment lines a file starts with are a capture's header, not the config)
    same = load_pool(snap("two", "# captured at 2\nPRIORITY_HALFLIFE = 600"),
                     config_memo=memo)
    assert reads.call_count == 1
    assert same.config.priority_halflife == first.config.priority_halflife == 600
    assert same.config.source == str(tmp_path / "two" / "config")
    other = load_pool(snap("three", "PRIORITY_HALFLIFE = 700"), config_memo=memo)
    assert reads.call_count == 2 and other.config.priority_halflife == 700
    # a first comment line continued by a backslash may be part of what follows
    load_pool(snap("cont", "# a \\\nPRIORITY_HALFLIFE = 700"), config_memo=memo)
    assert reads.call_count == 3
    for name in ("r1", "r2"):
        load_pool(snap(name, "PRIORITY_HALFLIFE = $RANDOM_INTEGER(600, 700)"),
                  config_memo=memo)
    assert reads.call_count == 5
    rooted = "NEGOTIATOR_PRE_JOB_RANK = size(\"$(CONFIG_ROOT)\")"
    ranks = [load_pool(snap(name, rooted), config_memo=memo).config.pre_job_rank
             for name in ("c1", "c2")]
    assert reads.call_count == 7 and ranks[0] != ranks[1]
    # what the reader itself gives for that file, source and all
    assert load_pool(tmp_path / "two").config == same.config and run_cycle(same).matches
