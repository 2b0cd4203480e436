"""NEGOTIATOR_IGNORE_JOB_RANKS against recordings of a real 25.14 negotiator, with the
knob on and, for the same scenario, off (tests/data/rules/README.md).

Slots of equal ranks are ordered by the address of their ads in the negotiator's memory,
which no snapshot gives (we take the collector's order): the scenarios give every
submitter whole sets of equal slots, so each submitter's slots are compared as sets, and
the order of matches by what tells slots apart (their Speed)."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import replace
from pathlib import Path

import pytest

from conftest import unpack_recording
from negotiator_ext.cycle import run_cycle
from negotiator_ext.pool import load_pool

DATA = Path(__file__).parent / "data" / "rules"
_MATCHED = re.compile(r"Matched (\S+) (\S+) \S+ preempting \S+ \S+ (\S+)")
_REJECTED = re.compile(r"Rejected \S+ (\S+) \S+: (.+)")


def _short(submitter: str) -> str:
    return submitter.split("@")[0].split(".")[1]


def _speeds(d: Path) -> dict[str, str | None]:
    out = {}
    for ad in (d / "slots.ads").read_text().strip().split("\n\n"):
        attrs = dict(ln.split(" = ", 1) for ln in ad.splitlines() if " = " in ln)
        out[attrs["Name"].strip('"')] = attrs.get("Speed")
    return out


def _compare(d: Path, matches) -> tuple[list, list]:
    """(real, ours): each match as (job, submitter, slot)."""
    real = _MATCHED.findall((d / "expected" / "matchlog.txt").read_text())
    ours = [(m.job, m.submitter, m.slot) for m in matches]
    return real, ours


def _by_submitter(rows) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for _, sub, slot in rows:
        out.setdefault(_short(sub), set()).add(slot)
    return out


# name, knob, the real (submitter, Speed) sequence
CASES = [
    # jobs rank slow slots first (Rank = 0 - Speed), and so does the pre-job rank for a
    # real job; for the empty request of the sort it is 0, and the post-job rank (Speed)
    # orders the slots: on, the first submitter takes the fast slots, off the slow ones
    ("ignore_job_ranks", True, "b4 " * 5 + "b3 " * 5 + "a2 " * 5 + "a1 " * 5),
    ("ignore_job_ranks_off", False, "b1 " * 5 + "b2 " * 5 + "a3 " * 5 + "a4 " * 5),
    # 4 heavy slots (SlotWeight 8, Speed 10-13) first in the sort, then 16 light: on,
    # b's scan stops at the fourth heavy slot (32 > its limit 28.5), b matches 3 and is
    # refused the fourth, and its list is empty; off, its list goes on to 4 light slots
    ("ignore_job_ranks_weights", True, "b13 b12 b11 a10 " + "a1 " * 16),
    ("ignore_job_ranks_weights_off", False, "b13 b12 b11 " + "b1 " * 4 + "a10 " + "a1 " * 12),
]


@pytest.mark.parametrize("name,knob,sequence", CASES)
def test_each_submitter_gets_the_real_slots(tmp_path, name, knob, sequence):
    d = unpack_recording(DATA / f"{name}.tar.gz", tmp_path)
    pool = load_pool(d)
    assert pool.config.ignore_job_ranks is knob
    speeds = _speeds(d)
    real, ours = _compare(d, run_cycle(pool).matches)
    assert [f"{_short(s)}{speeds[x]}" for _, s, x in real] == sequence.split()
    assert [f"{_short(s)}{speeds[x]}" for _, s, x in ours] == sequence.split()
    assert Counter((j, s) for j, s, _ in ours) == Counter((j, s) for j, s, _ in real)
    if knob:            # off, the tie order of std::sort is not followed slot by slot
        assert _by_submitter(ours) == _by_submitter(real)
    # the same cycle with the knob the other way round gives the other recording's
    other = replace(pool, config=replace(pool.config, ignore_job_ranks=not knob))
    flipped = [f"{_short(m.submitter)}{speeds[m.slot]}" for m in run_cycle(other).matches]
    twin = {c[0]: c[2] for c in CASES}[name[:-4] if name.endswith("_off") else name + "_off"]
    assert flipped == twin.split() != sequence.split()


def test_the_rejections_are_the_real_ones(tmp_path):
    d = unpack_recording(DATA / "ignore_job_ranks_weights.tar.gz", tmp_path)
    real = [(_short(s), why) for s, why in
            _REJECTED.findall((d / "expected" / "matchlog.txt").read_text())]
    assert real == [("b", "submitter limit exceeded"), ("a", "no match found"),
                    ("b", "no match found")]
    ours = [(_short(r.submitter), r.reason) for r in run_cycle(load_pool(d)).rejections]
    assert ours == real
    # the real MatchLists: b's stopped at 4 candidates, a's held all 17 left
    log = (d / "expected" / "negotiator-cycle.log").read_text()
    assert re.findall(r"Start of sorting MatchList \(len=(\d+)\)", log) == ["4", "17"]


def test_equal_slots_follow_the_negotiators_memory_not_the_collectors_order(tmp_path):
    """The knob's last sort key is the ad's address: in this recording of 20 equal
    slots one ad (fake-s000019) came earlier in memory than in the collector's list, so
    the real order differs from ours there (the warning says so), while each submitter
    still gets the same slots."""
    d = unpack_recording(DATA / "ignore_job_ranks_ties.tar.gz", tmp_path)
    pool = load_pool(d)
    assert any("address of each ad" in w for w in pool.warnings)
    real, ours = _compare(d, run_cycle(pool).matches)
    assert _by_submitter(ours) == _by_submitter(real)
    assert Counter((j, s) for j, s, _ in ours) == Counter((j, s) for j, s, _ in real)
    moved = [(r[2], o[2]) for r, o in zip(real, ours) if r != o]
    assert moved[0] == ("slot1@fake-s000019.bench", "slot1@fake-s000016.bench")
    assert sorted(x for x, _ in moved) == sorted(y for _, y in moved)
    # every fast slot (Speed 10) goes to the first submitter, b, on and off
    speeds = _speeds(d)
    fast = {n for n, v in speeds.items() if v == "10"}
    assert _by_submitter(real)["b"] >= fast
