"""What a long run keeps from cycle to cycle. The slot classes (core.kept_classes): each
kept partition, when a cycle asks for it, is what sorting the cycle's slots afresh would
give (the same classes, the same members in the same order, the same live counts, the
same match groups), and a run decides exactly as with the classes sorted afresh every
cycle: a forecast of the benchmark pool (static and partitionable slots, groups, three
schedds, jobs arriving and leaving) and the simulator's shortcut cases. And a built slot
ad's texts, made beside the ad, are what classad2 prints of it."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from negotiator_ext.core.kept_classes import KeptClasses
from negotiator_ext.core.match_list import SlotClass, _static_order
from negotiator_ext.core.slot_classes import SlotClasses
from negotiator_ext.scenario import load_scenario
from negotiator_ext.sim.forecast import ForecastSpec, run_forecast

from negotiator_ext.adapters.ledger import open_ledger
from negotiator_ext.sim import engine
from negotiator_ext.sim.ads import _CONTROL
from negotiator_ext.sim.engine import Simulation

from conftest import DATA, FIXTURES, SCENARIOS, unpack_recording
from test_match_memory import RULES, _decisions
from test_simulate import _ledger_rows, shortcut_case


def _described(part) -> dict:
    """A partition as what a scan sees of it: each class's live members (by name, in
    order) and live count, each group's classes and held slots (those with a live
    slot: a cycle's matches leave some with none)."""
    classes = {key: ([s.name for s in cls.members if not s.removed], cls.live,
                     cls.group.view)
               for key, cls in part.classes.items() if cls.live}
    groups = {view: (sorted(map(str, (c.key for c in g.classes if c.live))),
                     sorted(s.name for s in g.held if not s.removed), g.live)
              for view, g in part.groups.items() if g.live}
    return {"classes": classes, "groups": groups}


def _afresh(classes: SlotClasses, names: tuple) -> dict:
    """The partition for `names` as sorting the cycle's slots afresh makes it (the
    rule `SlotClasses.partition` follows), described as `_described` does."""
    members: dict = {}
    views: dict = {}
    held: dict = {}
    for s in sorted(classes.slots, key=_static_order):
        if s.removed:
            continue
        if classes._held(s):
            view = classes._view(s, names[1])
            held.setdefault(view, []).append(s.name)
            continue
        key = classes._class_key(s, names[0])
        if key not in members:
            members[key] = []
            views[key] = classes._view(s, names[1])
        members[key].append(s.name)
    out_classes = {k: (m, len(m), views[k]) for k, m in members.items()}
    groups: dict = {}
    for k, view in views.items():
        groups.setdefault(view, ([], [], 0))[0].append(str(k))
    for view, names_held in held.items():
        groups.setdefault(view, ([], [], 0))[1].extend(names_held)
    groups = {v: (sorted(c), sorted(h), sum(out_classes[k][1] for k in members
                                           if views[k] == v) + len(h))
              for v, (c, h, _) in groups.items()}
    return {"classes": out_classes, "groups": groups}


class _Checked:
    """The kept partitions, checked against the partitions made afresh each time a
    cycle first asks for one, once its new slots have joined it."""

    def __init__(self, monkeypatch):
        self.renewed = 0
        self.partitions = 0
        self.dropped = 0
        real_renew, real_partition = KeptClasses.renew, SlotClasses.partition
        checked: set = set()

        def renew(kept, classes, slots, stamp, fresh):
            before = len(kept.partitions)
            real_renew(kept, classes, slots, stamp, fresh)
            self.renewed += 1
            self.dropped += before - len(kept.partitions)
            checked.clear()
            for part in kept.partitions.values():
                for cls in part.classes.values():
                    assert cls.start == 0 and cls.group.view in part.groups
                    assert cls.rep in cls.members or not cls.members

        def partition(classes, names):
            part = real_partition(classes, names)
            if classes._next is not None and id(part) not in checked:
                checked.add(id(part))
                self.partitions += 1
                key = classes._normalized(names)
                assert _described(part) == _afresh(classes, key)
                for cls in part.classes.values():
                    assert cls.rep in cls.members and type(cls) is SlotClass
            return part
        monkeypatch.setattr(KeptClasses, "renew", renew)
        monkeypatch.setattr(SlotClasses, "partition", partition)


def _never_kept(monkeypatch):
    monkeypatch.setattr(SlotClasses, "_can_keep", lambda self, slots: False)


def _forecast(tmp_path: Path, seed: int):
    from conftest import synthetic_forecast
    snap, hist = synthetic_forecast(tmp_path, slots=400, jobs=1500, history_jobs=4000,
                                    seed=seed)
    got = run_forecast(ForecastSpec(snapshot=snap, history=(hist,), hours=1))
    return json.dumps(got.outcome.jobs, sort_keys=True, default=str), got.matches, got.cycles


@pytest.mark.parametrize("seed,offer", [(1, None), (2, None), (1, 1)])
def test_a_forecast_keeps_its_classes_as_sorting_afresh_would(tmp_path, monkeypatch, seed,
                                                              offer):
    """`offer`: the schedds offer one job of each class at first, so that many cycles
    are run twice (the second time with the classes the first one left)."""
    if offer is not None:
        monkeypatch.setattr(engine, "_OFFER_LIMIT_MIN", offer)
    with monkeypatch.context() as m:
        checked = _Checked(m)
        kept = _forecast(tmp_path, seed)
    assert checked.renewed > 30 and checked.partitions > 30
    assert checked.dropped > 0          # partitions no request asked for were dropped
    with monkeypatch.context() as m:
        _never_kept(m)
        afresh = _forecast(tmp_path, seed)
    assert kept == afresh and kept[1] > 100


@pytest.mark.parametrize("case", ["classes", "limits", "empty-preemption-requirements",
                                  "rank", "consumption-policy"])
def test_the_shortcut_cases_decide_alike_with_kept_classes(tmp_path, monkeypatch, case):
    """The simulator's shortcut cases (a slot Rank preferring one user, preemption, a
    consumption-policy p-slot matched again and again, ...): the same ledger with the
    classes kept as with them sorted afresh every cycle."""
    rows = {}
    checked = None
    for keep in (True, False):
        with monkeypatch.context() as m:
            if keep:
                checked = _Checked(m)
            else:
                _never_kept(m)
            path = tmp_path / f"{case}-{keep}.json"
            path.write_text(json.dumps(shortcut_case(case, duration="20m")))
            url = str(tmp_path / f"{case}-{keep}.sqlite")
            with open_ledger(url) as ledger:
                Simulation(load_scenario(path), ledger).run()
            rows[keep] = _ledger_rows(url)
    assert rows[True] == rows[False] and len(rows[True][0]) >= 8
    assert checked.renewed > 0 or case == "consumption-policy"


def test_what_the_kept_classes_cannot_follow_turns_them_off(monkeypatch):
    """Consumption-policy p-slots, NEGOTIATOR_IGNORE_JOB_RANKS, ALLOW_PSLOT_PREEMPTION
    and live usage each keep nothing for the next cycle."""
    from types import SimpleNamespace
    base = dict(static_ranks=False, pslot_preemption=False, live_remote=None)
    slot = SimpleNamespace(cp=False, static=(0.0, 0.0, 0.0))
    assert SlotClasses._can_keep(SimpleNamespace(**base), [slot])
    for knob, value in (("static_ranks", True), ("pslot_preemption", True),
                        ("live_remote", len)):
        assert not SlotClasses._can_keep(SimpleNamespace(**{**base, knob: value}), [slot])
    assert not SlotClasses._can_keep(SimpleNamespace(**base),
                                     [slot, SimpleNamespace(cp=True, static=slot.static)])
    nan = SimpleNamespace(cp=False, static=(float("nan"), 0.0, 0.0))
    assert not SlotClasses._can_keep(SimpleNamespace(**base), [slot, nan])


def test_a_built_slot_ads_texts_are_what_classad2_prints(tmp_path, monkeypatch):
    """The simulator makes a slot ad's texts beside the ad (`sim.ads._printed`) instead
    of printing the ad: on every ad a forecast of the benchmark pool builds they equal
    `classads.attribute_texts` of the ad."""
    from negotiator_ext.core import classads
    from negotiator_ext.sim import ads
    real = ads._built
    count = [0]

    def built(s, sc):
        had = s._ad is not None
        b = real(s, sc)
        if not had:
            assert b.texts == {k.lower(): t for k, t in classads.attribute_texts(b.ad)}
            count[0] += 1
        return b
    monkeypatch.setattr(ads, "_built", built)
    monkeypatch.setattr(engine, "_built", built)
    _forecast(tmp_path, 3)
    assert count[0] > 1000


@given(st.one_of(st.integers(min_value=-2 ** 70, max_value=2 ** 70).map(str),
                 st.floats(allow_nan=False).map(repr),
                 st.text(max_size=12).map(lambda t: '"' + t.replace("\\", "\\\\")
                                          .replace('"', '\\"') + '"'),
                 st.sampled_from(["007", "0", "00", "true", "START && x", "-5", "1e30",
                                  '"a\\nb"', "Cpus * 2"])))
@settings(max_examples=300, deadline=None)
def test_a_printed_text_is_what_classad2_prints(text):
    from negotiator_ext.core import classads
    from negotiator_ext.sim.ads import _printed
    one = classads.parse_old_ad(f"x = {text}")
    if len(one) != 1 or _CONTROL.search(text):
        return                  # (the simulator sets such values one by one)
    assert _printed(text) == classads.attribute_texts(one)[0][1]


def test_a_run_leaves_no_slots_in_reference_cycles(tmp_path):
    """The run pauses the cyclic collector, so what a cycle drops must be freed by
    reference counting: a slot ad's memo holds its Slot weakly (the Slot refers to its
    memo), and the slots that leave the kept classes leave no cycle behind. Only the
    last cycle's classes are left for the collector when the run is over."""
    import gc
    from negotiator_ext.core.match_list import Slot
    gc.collect()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        _, matches, _ = _forecast(tmp_path, 4)
        gc.collect()
        slots = sum(1 for o in gc.garbage if type(o) is Slot)
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
    # (55 here: the last cycle's candidates; 343 with the memo holding its Slot)
    assert matches > 300 and slots < 150


def _kept_inputs(pool, order: list[int]):
    """`pool` as a long run hands it over, its candidate slots in `order`: the ads
    shared, their texts as dicts, a memo each (the same objects from cycle to cycle)."""
    from negotiator_ext.core import classads
    texts = [{n.lower(): t for n, t in classads.attribute_texts(ad)} for ad in pool.slot_ads]
    memos = [{} for _ in pool.slot_ads]
    pick = lambda seq: tuple(seq[i] for i in order)     # noqa: E731
    return dataclasses.replace(pool, slot_ads=pick(pool.slot_ads), slots=pick(pool.slots),
                               slot_texts=pick(texts), slot_memos=pick(memos),
                               shared_slot_ads=True)


@pytest.mark.parametrize("where", [f"fixtures/{s}" for s in SCENARIOS]
                         + [f"rules/{r}" for r in RULES])
def test_cycles_that_keep_their_classes_decide_as_fresh_ones(tmp_path, where):
    """Every recorded pool, cycled three times with one memory as a long run does: the
    second cycle carries every slot over (the same ads, texts and memos), the third
    has them in the reverse order (so its kept classes are sorted afresh). Each
    decides, and numbers its slot classes, as a fresh cycle on the same pool."""
    from negotiator_ext.core.match_memory import MatchMemory
    from negotiator_ext.cycle import run_cycle
    from negotiator_ext.pool import load_pool
    kind, name = where.split("/")
    directory = (FIXTURES / name if kind == "fixtures"
                 else unpack_recording(DATA / "rules" / f"{name}.tar.gz", tmp_path))
    base = load_pool(directory)
    n = len(base.slot_ads)
    forward, backward = list(range(n)), list(range(n))[::-1]
    kept = _kept_inputs(base, forward)
    memory = MatchMemory()
    seen = []               # per cycle: (slots carried, kept classes patched)
    real, real_renew = SlotClasses.classify, KeptClasses.renew

    def classify(classes, slots, *a, **kw):
        seen.append([sum(s.carried for s in slots), False])
        return real(classes, slots, *a, **kw)

    def renew(*a):
        seen[-1][1] = True
        return real_renew(*a)
    with pytest.MonkeyPatch.context() as m:
        m.setattr(SlotClasses, "classify", classify)
        m.setattr(KeptClasses, "renew", renew)
        got = [run_cycle(dataclasses.replace(kept, match_memory=memory)) for _ in range(2)]
        got.append(run_cycle(dataclasses.replace(
            _kept_inputs(base, backward), slot_texts=tuple(reversed(kept.slot_texts)),
            slot_ads=tuple(reversed(kept.slot_ads)), slot_memos=tuple(reversed(kept.slot_memos)),
            match_memory=memory)))
    for i, order in enumerate((forward, forward, backward)):
        fresh = run_cycle(_kept_inputs(load_pool(directory), order))
        assert _decisions(got[i]) == _decisions(fresh), i
        assert got[i].slot_classes == fresh.slot_classes, i
    # the second cycle carries the slots the first wrote nothing into and patches the
    # classes it left; the third, its slots in the reverse order, sorts them afresh
    assert (seen[1][0] > 0) == (name not in _NOTHING_CARRIED)
    assert seen[1][1] == (name not in _NOTHING_KEPT)
    assert not seen[2][1] or seen[2][0] == 0


# Recordings whose cycles carry no slot over: every candidate is claimed and written
# into (preemption considered), NEGOTIATOR_IGNORE_JOB_RANKS or ALLOW_PSLOT_PREEMPTION
# (which turn the kept classes off), a consumption policy, or a shutdown threshold (what
# is read of a slot depends on the clock)
_NOTHING_KEPT = {"pslot_consumption_policy_cpu", "ignore_job_ranks", "ignore_job_ranks_ties",
                 "ignore_job_ranks_weights", "pslot_preemption", "pslot_preemption_policy",
                 "pslot_preemption_rank"}
_NOTHING_CARRIED = _NOTHING_KEPT | {"preempt_priority", "trim_shutdown"}
