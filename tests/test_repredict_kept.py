"""A loop's re-prediction re-runs our cycle on what the loop kept of the compared pass
(shadow_repredict.KeptInputs: its snapshot as read, with the slot cache's ads, and its
config), not on a second pool read from the snapshot's files. The re-run must see the
same slots, jobs and accountant either way: its matches from the kept inputs, after the
next pass's capture and cycle went by, equal those from the files, at any time. What the
slot cache replaced since is not kept alive by them: read again from the pass's slots
file."""

from __future__ import annotations

import gc
import json
import re
import sys
import weakref
from collections import Counter
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from fakepool import FIXTURES, FakePool, fixture_ads  # noqa: E402
from test_shadow import Clock, SCENARIOS, meta, negotiator_ad_before, settings  # noqa: E402

from negotiator_ext import cycle, shadow  # noqa: E402
from negotiator_ext.errors import InputError  # noqa: E402
from negotiator_ext.adapters.adfiles import KnownLines  # noqa: E402
from negotiator_ext.adapters.slot_cache import SlotCache  # noqa: E402
from negotiator_ext.pool import build_pool, load_pool  # noqa: E402
from negotiator_ext.shadow import ShadowLoop  # noqa: E402
from negotiator_ext.shadow_repredict import FILES, KEPT  # noqa: E402


def _loop(tmp_path: Path, mocker, scenario: str, *, keep: bool = True, early: int = 0):
    """A loop over a fixture's pool, keeping its slot ads and job lines as
    run_forever's does (`keep`: NEGOTIATOR_EXT_KEEP_SLOT_ADS); pass 1 sees the pool
    before the real cycle (`early` seconds before it starts)."""
    fix = FIXTURES / scenario
    fake = FakePool(fix).install(mocker)
    fake.negotiator = [negotiator_ad_before(fixture_ads("expected/negotiator.ads", fix)[0])]
    clock = Clock(meta(fix)["captured_at"] - early)
    import htcondor2
    s = settings(tmp_path, matchlog=str(fix / "expected" / "matchlog.txt"), matchlog_tz="UTC")
    loop = ShadowLoop(s, htcondor=htcondor2, clock=clock)
    if keep:
        loop.slot_cache = SlotCache()
    loop.known_lines = KnownLines()
    return fix, fake, loop


def _after_the_cycle(fix: Path, fake: FakePool, loop: ShadowLoop, first) -> str:
    """The pool as pass 2 sees it: the real cycle's ads, and a slot advertised again
    that takes no job now (the slot cache fetches it whole; pass 1's ad of it is no
    longer the cache's): one pass 1 matched. Returns its name."""
    fake.negotiator = fixture_ads("expected/negotiator.ads", fix)
    fake.accounting = fixture_ads("expected/accounting-after.ads", fix)
    name = first.shadow_matches[0].slot
    (ad,) = (a for a in fake.slots if a.eval("Name") == name)
    ad["Requirements"] = False
    ad["UpdatesTotal"] = ad.eval("UpdatesTotal") + 1
    ad["LastHeardFrom"] = ad.eval("LastHeardFrom") + 30
    loop.clock.t = meta(fix)["captured_at"] + 30
    return name


def _matches(pool, at: int) -> list[tuple[str, str, str]]:
    return sorted((m.submitter, m.slot, m.assigned_job)
                  for m in cycle.run_cycle(pool, now=at).matches)


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_the_kept_inputs_give_the_files_matches_after_the_next_pass(tmp_path, mocker,
                                                                     scenario):
    fix, fake, loop = _loop(tmp_path, mocker, scenario)
    first = loop.run_pass()
    (kept,) = loop.kept_inputs.values()
    assert kept.uuid == first.uuid and kept.slots is not None
    assert kept.snapshot.slots == () and kept.snapshot.slot_texts is None
    snap, _ = kept.inputs()
    assert snap.slots_shared and kept.slots.let_go() == 0
    name = _after_the_cycle(fix, fake, loop, first)
    (old,) = (a for a in snap.slots if a.eval("Name") == name)
    old = weakref.ref(old)
    del snap
    second = loop.run_pass()
    assert second.status == "complete", second.reason
    assert loop.kept_inputs[second.pool].uuid == second.uuid
    # the slot cache let go of pass 1's ad of the slot advertised again, and pass 1's
    # inputs with it: they read that one again from pass 1's slots file, and share
    # every other with the cache
    gc.collect()
    assert old() is None and kept.slots.let_go() == 1
    now = loop.kept_inputs[second.pool]
    then_snap, now_snap = kept.inputs()[0], now.inputs()[0]
    (again,) = (a for a in then_snap.slots if a.eval("Name") == name)
    assert again.eval("Requirements") is not False
    assert all(a is not again for a in now_snap.slots)
    assert sum(a is b for a, b in zip(then_snap.slots, now_snap.slots)) \
        == len(then_snap.slots) - 1 == len(now_snap.slots) - 1
    del then_snap, now_snap, again
    t = int(first.snapshot_time)
    # (pass 2's inputs would not do: that slot takes nothing in them)
    assert _matches(build_pool(*now.inputs()), t) != _matches(
        load_pool(first.snapshot_dir), t)
    for at in (t, t + 45, t + 3600, t + 86_400 * 3):
        ours = _matches(build_pool(*kept.inputs()), at)
        assert ours and ours == _matches(load_pool(first.snapshot_dir), at), at
    # and at the capture, the very prediction pass 1 made
    assert Counter(s for s, _, _ in _matches(build_pool(*kept.inputs()), t)) \
        == Counter(m.submitter for m in first.shadow_matches)


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_the_kept_inputs_after_a_whole_query_read_every_slot_again(tmp_path, mocker,
                                                                    scenario):
    """Every slot advertised again before pass 2 (the slot cache queries them whole and
    replaces every ad it held): pass 1's inputs keep none of pass 1's slot ads alive, and
    give the files' matches from its slots file."""
    fix, fake, loop = _loop(tmp_path, mocker, scenario)
    first = loop.run_pass()
    (kept,) = loop.kept_inputs.values()
    olds = [weakref.ref(a) for a in kept.inputs()[0].slots]
    _after_the_cycle(fix, fake, loop, first)
    for ad in fake.slots:
        ad["UpdatesTotal"] = ad.eval("UpdatesTotal") + 1
    second = loop.run_pass()
    assert second.status == "complete", second.reason
    snapshot = Path(second.snapshot_dir)
    assert json.loads((snapshot / "meta.json").read_text())["slots_fetched"]["whole_query"]
    gc.collect()
    assert olds and not any(r() for r in olds)
    assert kept.slots.let_go() == len(kept.slots) == len(olds)
    t = int(first.snapshot_time)
    for at in (t, t + 3600):
        ours = _matches(build_pool(*kept.inputs()), at)
        assert ours and ours == _matches(load_pool(first.snapshot_dir), at), at


def test_kept_inputs_refuse_a_slots_file_changed_since(tmp_path, mocker):
    """The slots the cache let go are read again only from the very file the pass wrote:
    one changed since is refused, naming it (the re-run then says the compared snapshot
    is unreadable)."""
    fix, fake, loop = _loop(tmp_path, mocker, "hgq_nested_hep_lep_surplus")
    first = loop.run_pass()
    (kept,) = loop.kept_inputs.values()
    _after_the_cycle(fix, fake, loop, first)
    loop.run_pass()
    assert kept.slots.let_go() == 1
    slots = Path(first.snapshot_dir) / "slots.ads"
    text = slots.read_text()
    slots.write_text(text.replace("\n\n", "\n\n\n", 1))
    with pytest.raises(InputError, match="not the slots file written"):
        kept.inputs()
    slots.write_text(text)      # (the same size and text, written again: refused too)
    with pytest.raises(InputError, match=re.escape(str(slots))):
        kept.inputs()


def _rerun_seen(mocker) -> list:
    """The re-runs' (pool, matches per submitter): run_cycle's calls given a time."""
    real, seen = cycle.run_cycle, []

    def recording(pool, now=None, rr_times=None):
        result = real(pool, now, rr_times)
        if now is not None:
            seen.append((now, Counter(m.submitter for m in result.matches)))
        return result
    mocker.patch.object(cycle, "run_cycle", recording)
    return seen


@pytest.mark.parametrize("keep", [True, False])
def test_a_loops_rerun_takes_the_compared_pass_kept_inputs(tmp_path, mocker, keep):
    """Pass 2's comparison re-predicted (made to leave something unexplained): from what
    the loop kept of pass 1, with the counts a re-run on pass 1's files gives; without
    the kept slot ads (their ads the cycle's own), from the files, as before. Pass 1
    captures 10 s before the real cycle, whose accountant updates 10 s on."""
    fix, fake, loop = _loop(tmp_path, mocker, "hgq_nested_hep_lep_surplus", keep=keep,
                            early=10)
    mocker.patch.object(shadow, "unexplained_left", lambda disagreements: 1)
    first = loop.run_pass()
    assert bool(loop.kept_inputs) is keep
    kept = loop.kept_inputs.get(first.pool)
    _after_the_cycle(fix, fake, loop, first)
    seen = _rerun_seen(mocker)
    second = loop.run_pass()
    again = second.comparison.repredicted
    assert "skipped" not in again, again
    assert again["inputs"] == (KEPT if keep else FILES)
    if keep:                        # the slot advertised again: read from pass 1's file
        assert kept.slots.let_go() == 1
    assert any(n.endswith(f"({again['seconds']:.1f} s)") for n in second.comparison.notes)
    ((at, counts),) = seen
    assert at == again["at"] > int(first.snapshot_time)
    assert counts and counts == Counter(
        m.submitter for m in cycle.run_cycle(load_pool(first.snapshot_dir), now=at).matches)


def test_a_loop_that_does_not_re_predict_keeps_nothing(tmp_path, mocker):
    """NEGOTIATOR_EXT_REPREDICT = False: no pass's inputs outlive it."""
    import dataclasses
    fix, fake, loop = _loop(tmp_path, mocker, "hgq_nested_hep_lep_surplus")
    loop.settings = dataclasses.replace(loop.settings, repredict=False)
    loop.run_pass()
    assert loop.kept_inputs == {} and len(loop.slot_cache) > 0
