"""The matcher's memory of earlier cycles (core.match_memory): a cycle that takes the
answers the cycles before it worked out decides exactly what a fresh cycle decides, on
every recorded pool, and the memory is dropped where an answer depends on the moment."""

from __future__ import annotations

import dataclasses
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import DATA, FIXTURES, SCENARIOS, unpack_recording
from negotiator_ext.core.match_list import Verdict
from negotiator_ext.core.match_memory import MatchMemory, TextTally, reads_the_clock
from negotiator_ext.core.matchmaking import _values_of
from negotiator_ext.cycle import run_cycle
from negotiator_ext.pool import load_pool

RULES = sorted(p.name.removesuffix(".tar.gz") for p in (DATA / "rules").glob("*.tar.gz"))


def _decisions(r):
    return ([(m.job, m.submitter, m.slot, m.preempting, m.group) for m in r.matches],
            sorted((x.job, x.submitter, x.reason) for x in r.rejections))


def _twice(directory):
    """The pool's cycle fresh (an empty memory), and again with the memory it filled."""
    memory = MatchMemory()
    fresh, got = (run_cycle(dataclasses.replace(load_pool(directory), match_memory=memory))
                  for _ in range(2))
    return fresh, got, memory


@pytest.mark.parametrize("where", [f"fixtures/{s}" for s in SCENARIOS]
                         + [f"rules/{r}" for r in RULES])
def test_a_cycle_with_the_memory_decides_as_a_fresh_one(tmp_path, where):
    kind, name = where.split("/")
    directory = (FIXTURES / name if kind == "fixtures"
                 else unpack_recording(DATA / "rules" / f"{name}.tar.gz", tmp_path))
    fresh, again, memory = _twice(directory)
    assert _decisions(again) == _decisions(fresh)
    # the second cycle did use what the first worked out, unless a text read the clock
    assert memory.cycles_kept == (0 if memory.dropped else 1)


def test_the_clock_and_the_dice_are_seen_in_any_text():
    for text in ("CurrentTime - EnteredCurrentState > 600", "time() > 5",
                 "formatTime()", "random(10) < 3", 'eval("x")', "splitTime(x)"):
        assert reads_the_clock(text), text
    for text in ("TARGET.Memory >= RequestMemory", '"timely"', "KFlops", None):
        assert not reads_the_clock(text), text


def test_a_slot_that_reads_the_clock_drops_the_memory(tmp_path):
    """A START that reads CurrentTime has another value in the next cycle though its
    text is the same: nothing is kept once such a text is read."""
    src = FIXTURES / "pie_three_submitters"
    dst = tmp_path / "pool"
    import shutil
    shutil.copytree(src, dst)
    slots = (dst / "slots.ads").read_text()
    (dst / "slots.ads").write_text(slots.replace("\nStart = ", "\nStart = (CurrentTime > 0) && ", 1)
                                   if "\nStart = " in slots else
                                   slots.replace("\n\n", "\nStart = CurrentTime > 0\n\n", 1))
    fresh, again, memory = _twice(dst)
    assert _decisions(again) == _decisions(fresh)
    assert memory.dropped and memory.cycles_kept == 0


def test_a_memory_is_not_taken_under_another_config(tmp_path):
    memory = MatchMemory()
    a = dataclasses.replace(load_pool(FIXTURES / "pie_three_submitters"), match_memory=memory)
    run_cycle(a)
    b_dir = FIXTURES / "preempt_priority"
    fresh = run_cycle(load_pool(b_dir))
    got = run_cycle(dataclasses.replace(load_pool(b_dir), match_memory=memory))
    assert _decisions(got) == _decisions(fresh)
    # (the two pools' configs differ in what the matcher evaluates: nothing was kept)
    assert memory.cycles_kept == 0


def test_slot_texts_uniform_at_another_value_are_another_key(tmp_path):
    """Names every slot has the same text for are left out of the slot classes; when
    the slots change to another common value, the verdicts worked out for the first
    must not be taken: the simulator with its memory against offering everything,
    slots leaving and others joining that differ only in such a value."""
    from test_simulate import _both_ways
    from negotiator_ext.scenario import load_scenario
    doc = {"name": "uniform", "span": "40m", "interval": 120,
           "knobs": {"DEFAULT_PRIO_FACTOR": 1},
           "slots": [{"count": 6, "name": "x", "attrs": {"Site": '"x"'}}],
           "workload": [{"submitter": "a", "count": 20, "duration": "5m",
                         "requirements": 'TARGET.Site == "y"'}],
           "changes": [{"at": "10m", "slots_leave": {"prefix": "x", "count": 6}},
                       {"at": "10m", "slots_join": {"count": 6, "name": "y",
                                                    "attrs": {"Site": '"y"'}}}]}
    path = tmp_path / "uniform.json"
    path.write_text(json.dumps(doc))
    fast, full = _both_ways(load_scenario(path), tmp_path)
    assert fast == full
    # (only the slots that joined at 10 minutes match)
    assert len(fast) >= 6 and all(m[0] >= 1_700_000_000 + 600 for m in fast)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.lists(st.integers(0, 59), max_size=4),
                          st.lists(st.integers(0, 59), max_size=4)), min_size=1, max_size=8),
       st.lists(st.sampled_from(["cpus", "memory", "arch"]), min_size=1, max_size=6))
def test_the_tally_of_slot_texts_is_what_the_list_holds_now(steps, asked):
    """TextTally, kept from list to list (dicts shared; a few came, a few went, one
    may be there twice), answers what a count over the list it was last given
    answers."""
    pool = [{"cpus": str(i % 3), "memory": str(i * 1024)} | (
            {"arch": "X86_64"} if i % 5 else {}) for i in range(60)]
    tally = TextTally()
    plain = pool[:40]
    for went, came in steps:
        plain = [t for i, t in enumerate(plain) if i not in went] + [pool[i] for i in came]
        tally.update(plain)
        for name in asked:
            assert set(tally.texts(name)) == {t.get(name) for t in plain}, (steps, name)


@pytest.mark.parametrize("where", ["fixtures/pslot_consumption_policy_cpu",
                                   "rules/ignore_job_ranks"])
def test_alike_verdicts_are_kept_once(tmp_path, where):
    """Every matching verdict the memory keeps is the one kept for its values: a pool's
    classes share a few verdicts, not one a (request, class) pair."""
    kind, name = where.split("/")
    directory = (FIXTURES / name if kind == "fixtures"
                 else unpack_recording(DATA / "rules" / f"{name}.tar.gz", tmp_path))
    memory = _twice(directory)[2]
    matching = [v for v in memory.verdicts.values() if v.match]
    assert len(matching) > len(memory.alike_verdicts) > 0     # some are alike
    for v in matching:
        assert memory.alike_verdicts[_values_of(v)] is v
    assert len({id(v) for v in matching}) == len(memory.alike_verdicts)


def test_a_verdict_s_values_tell_minus_zero_and_an_int_rank_apart():
    one = Verdict(match=True, jrank=1.0)
    assert _values_of(one) == _values_of(Verdict(match=True, jrank=1.0))
    assert _values_of(one) != _values_of(Verdict(match=True, jrank=1))
    assert _values_of(Verdict(match=True, jrank=-0.0)) is None
    assert _values_of(Verdict(match=True, jrank=0.0, pre=-0.0)) is None
    assert _values_of(Verdict(match=True, jrank=0.0)) is not None


class _Carry:
    released = False

    def release(self):
        self.released = True


def test_past_the_limit_the_answers_go_and_the_rest_stays():
    """A memory past its limit sheds its answers and keeps what slots and requests are
    keyed by and the slot classes carried; it starts again only when that rest alone
    is over half the limit."""
    memory = MatchMemory(limit=10)
    assert memory.for_cycle("config") is False           # a first cycle: nothing kept
    carry = memory.carry = _Carry()
    memory.ids.update({("key", i): i for i in range(2)})
    memory.verdicts.update({(0, i): None for i in range(8)})
    memory.matches[(0, 0)] = True
    assert memory.for_cycle("config") is True
    assert (memory.verdicts, memory.matches, memory.ranks) == ({}, {}, {})
    assert len(memory.ids) == 2 and memory.carry is carry and not carry.released
    assert (memory.sheds, memory.cycles_kept) == (1, 1)
    memory.ids.update({("key", i): i for i in range(5)})
    memory.verdicts.update({(0, i): None for i in range(5)})
    assert memory.for_cycle("config") is False           # 5 of 10 left: start again
    assert memory.ids == {} and carry.released and memory.sheds == 2


def test_a_long_run_that_sheds_its_answers_decides_as_one_that_keeps_them(tmp_path,
                                                                            monkeypatch):
    from negotiator_ext.adapters.ledger import open_ledger
    from negotiator_ext.scenario import load_scenario, parse_duration
    from negotiator_ext.sim import engine
    from test_simulate import _ledger_rows
    week = DATA.parent.parent / "bench" / "scenarios" / "week-1k.yaml"
    scenario = dataclasses.replace(load_scenario(week), span=int(parse_duration("3h")))
    made = []

    def run(limit, name):
        class Small(MatchMemory):
            def __init__(self):
                super().__init__(limit=limit)
                made.append(self)
        monkeypatch.setattr(engine, "MatchMemory", Small)
        url = str(tmp_path / f"{name}.sqlite")
        with open_ledger(url) as ledger:
            engine.Simulation(scenario, ledger).run()
        return _ledger_rows(url)
    kept = run(3_000_000, "kept")
    # a limit the run's answers pass (the week's 3 hours fill about 250 entries) while
    # the rest of the memory (ids, statics) stays under half of it
    full = made[0]
    limit = 2 * (len(full.ids) + len(full.statics)) + 2
    assert limit < full._size()
    shed = run(limit, "shed")
    assert made[0].sheds == 0 and made[1].sheds >= 1
    # no cycle started again: each took what the shedding left
    assert made[1].cycles_kept == made[0].cycles_kept
    assert shed == kept
