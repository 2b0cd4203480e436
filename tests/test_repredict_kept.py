"""A loop's re-prediction re-runs our cycle on what the loop kept of the compared pass
(shadow_repredict.KeptInputs: its snapshot as read, with the slot cache's ads, and its
config), not on a second pool read from the snapshot's files. The re-run must see the
same slots, jobs and accountant either way: its matches from the kept inputs, after the
next pass's capture and cycle went by, equal those from the files, at any time."""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from fakepool import FIXTURES, FakePool, fixture_ads  # noqa: E402
from test_shadow import Clock, SCENARIOS, meta, negotiator_ad_before, settings  # noqa: E402

from negotiator_ext import cycle, shadow  # noqa: E402
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
    assert kept.uuid == first.uuid and kept.snapshot.slots_shared
    name = _after_the_cycle(fix, fake, loop, first)
    second = loop.run_pass()
    assert second.status == "complete", second.reason
    assert loop.kept_inputs[second.pool].uuid == second.uuid
    # pass 1's ad of the slot advertised again is kept by pass 1's inputs alone
    now = loop.kept_inputs[second.pool]
    (old,) = (a for a in kept.snapshot.slots if a.eval("Name") == name)
    assert old.eval("Requirements") is not False
    assert all(a is not old for a in now.snapshot.slots)
    t = int(first.snapshot_time)
    # (pass 2's inputs would not do: that slot takes nothing in them)
    assert _matches(build_pool(now.snapshot, now.config), t) != _matches(
        load_pool(first.snapshot_dir), t)
    for at in (t, t + 45, t + 3600, t + 86_400 * 3):
        ours = _matches(build_pool(kept.snapshot, kept.config), at)
        assert ours and ours == _matches(load_pool(first.snapshot_dir), at), at
    # and at the capture, the very prediction pass 1 made
    assert Counter(s for s, _, _ in _matches(build_pool(kept.snapshot, kept.config), t)) \
        == Counter(m.submitter for m in first.shadow_matches)


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
    _after_the_cycle(fix, fake, loop, first)
    seen = _rerun_seen(mocker)
    second = loop.run_pass()
    again = second.comparison.repredicted
    assert "skipped" not in again, again
    assert again["inputs"] == (KEPT if keep else FILES)
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
