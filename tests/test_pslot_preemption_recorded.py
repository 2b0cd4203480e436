"""ALLOW_PSLOT_PREEMPTION against recordings of a real 25.14 negotiator
(tests/data/rules/README.md): the pool's own startd with two 4-core partitionable slots
full of a's running 1-core jobs (dynamic slots), then b's idle jobs, with the knob on and,
for the same scenario, off.

The MatchLog names the p-slot and how many dynamic slots its match preempts; which ones
is read from the slots 15 s after the cycle (`expected/slots-after.txt`): the dynamic
slots that are gone were preempted."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import pytest

from conftest import unpack_recording
from negotiator_ext.cycle import run_cycle
from negotiator_ext.pool import load_pool

DATA = Path(__file__).parent / "data" / "rules"
_MATCHED = re.compile(r"Matched (\S+) (\S+) \S+ preempting (.+?) <\S+> (\S+)")
_REJECTED = re.compile(r"Rejected (\S+) (\S+) \S+: (.+)")


def _short(submitter: str) -> str:
    return submitter.split("@")[0].split(".")[1]


def _real(d: Path) -> tuple[list, list]:
    text = (d / "expected" / "matchlog.txt").read_text()
    matches = [(job, _short(sub), slot, who if who.endswith("dslots") else _short(
        who.split("AccountingGroup=")[1].rstrip(")"))) for job, sub, who, slot in
        _MATCHED.findall(text)]
    rejections = [(job, _short(sub), why) for job, sub, why in _REJECTED.findall(text)]
    return matches, rejections


def _ours(result) -> tuple[list, list]:
    matches = [(m.job, _short(m.submitter), m.slot, m.preempting if m.preempted_dslots
                else _short(m.preempting)) for m in result.matches]
    rejections = [(r.job, _short(r.submitter), r.reason) for r in result.rejections]
    return matches, rejections


def _gone(d: Path) -> set[str]:
    """The dynamic slots of the snapshot that were gone 15 s after the cycle."""
    before = set(re.findall(r'^Name = "(slot\d+_\d+@\S+)"', (d / "slots.ads").read_text(),
                            re.MULTILINE))
    after = {ln.split()[0] for ln in (d / "expected" / "slots-after.txt").read_text().splitlines()
             if ln.strip()}
    return before - after


# name, knob, the real matches (job, submitter, slot, what it preempts)
CASES = [
    # priority: b's 2-core jobs fit only where 2 of a's 1-core dslots go; PREEMPTION_
    # REQUIREMENTS = True, equal startd ranks (0): each p-slot once, its first 2 dslots
    ("pslot_preemption", True, [("2.0", "b", "slot1@vm", "2 dslots"),
                                ("2.0", "b", "slot2@vm", "2 dslots")]),
    # off: the dslots are candidates of their own, 1 core each: nothing fits
    ("pslot_preemption_off", False, []),
    # PREEMPTION_REQUIREMENTS = MY.DSlotId =!= 2, evaluated on each dslot's own ad:
    # the second dslot of each p-slot is passed by, the first and third go
    ("pslot_preemption_policy", True, [("2.0", "b", "slot1@vm", "2 dslots"),
                                       ("2.0", "b", "slot2@vm", "2 dslots")]),
    # startd rank (RANK = TARGET.JobPrio; a's dslots 3,3,1,1, b's jobs 5), PREEMPTION_
    # REQUIREMENTS = False: each p-slot once, preempting its first rank-1 dslot
    ("pslot_preemption_rank", True, [("2.0", "b", "slot1@vm", "1 dslots"),
                                     ("2.0", "b", "slot2@vm", "1 dslots")]),
    # off: every dslot is rank-preempted on its own: b's 4 jobs each get one
    ("pslot_preemption_rank_off", False, [("2.0", "b", "slot2_1@vm", "a"),
                                          ("2.0", "b", "slot1_4@vm", "a"),
                                          ("2.0", "b", "slot2_4@vm", "a"),
                                          ("2.0", "b", "slot1_3@vm", "a")]),
]
TWIN = {"pslot_preemption": "pslot_preemption_off",
        "pslot_preemption_off": "pslot_preemption",
        "pslot_preemption_rank": "pslot_preemption_rank_off",
        "pslot_preemption_rank_off": "pslot_preemption_rank"}


@pytest.mark.parametrize("name,knob,expected", CASES)
def test_each_match_is_the_real_one(tmp_path, name, knob, expected):
    d = unpack_recording(DATA / f"{name}.tar.gz", tmp_path)
    pool = load_pool(d)
    assert pool.config.allow_pslot_preemption is knob
    assert not any("not modelled: the cycle runs as if" in w for w in pool.warnings)
    real, real_rej = _real(d)
    assert real == expected
    ours, our_rej = _ours(run_cycle(pool))
    assert ours == real
    assert our_rej == real_rej


@pytest.mark.parametrize("name", ["pslot_preemption", "pslot_preemption_rank",
                                  "pslot_preemption_policy"])
def test_the_preempted_dslots_are_the_real_ones(tmp_path, name):
    d = unpack_recording(DATA / f"{name}.tar.gz", tmp_path)
    result = run_cycle(load_pool(d))
    ours = {n for m in result.matches for n in m.preempted_dslots}
    assert ours == _gone(d)
    assert all(len(m.preempted_dslots) == int(m.preempting.split()[0]) for m in result.matches)
    if name == "pslot_preemption_rank":
        # the lowest current rank goes first (1 before 3), the list order among equals
        assert ours == {"slot1_3@vm", "slot2_3@vm"}
    elif name == "pslot_preemption_policy":
        assert ours == {"slot1_1@vm", "slot1_3@vm", "slot2_1@vm", "slot2_3@vm"}
    else:
        assert ours == {"slot1_1@vm", "slot1_2@vm", "slot2_1@vm", "slot2_2@vm"}


def test_the_match_costs_the_preempted_cores(tmp_path):
    """The cost (and the accountant's charge) is the changed p-slot ad's SlotWeight
    (Cpus: 0 free + 2 preempted), as the real log says ("match cost= 2")."""
    d = unpack_recording(DATA / "pslot_preemption.tar.gz", tmp_path)
    log = (d / "expected" / "negotiator-cycle.log").read_text()
    assert re.findall(r"Match completed, match cost= (\S+)", log) == ["2", "2"]
    assert re.findall(r"Matched pslot (\S+) by priority preempting (\d+)", log) == [
        ("slot2@vm", "2"), ("slot1@vm", "2")]
    result = run_cycle(load_pool(d))
    assert [m.cost for m in result.matches] == [2.0, 2.0]
    b = next(s for s in result.submitters if s["name"].startswith("grp.b"))
    assert b["usage_after"] - b["usage_before"] == 4.0


@pytest.mark.parametrize("name,knob,_", [c for c in CASES if c[0] in TWIN])
def test_the_knob_flipped_gives_the_twin_recording(tmp_path, name, knob, _):
    d = unpack_recording(DATA / f"{name}.tar.gz", tmp_path)
    pool = load_pool(d)
    other = replace(pool, config=replace(pool.config, allow_pslot_preemption=not knob))
    flipped = [(m.submitter, m.slot) for m in run_cycle(other).matches]
    twin = next(c[2] for c in CASES if c[0] == TWIN[name])
    assert [(_short(s), x) for s, x in flipped] == [(s, x) for _, s, x, _ in twin]
