"""NEGOTIATOR_TRIM_SHUTDOWN_THRESHOLD, SkipMatchmaking and NEGOTIATOR_DEPTH_FIRST against
recordings of a real 25.14 negotiator (tests/data/rules/README.md)."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import replace
from pathlib import Path

from conftest import unpack_recording
from negotiator_ext.cycle import run_cycle
from negotiator_ext.pool import load_pool

DATA = Path(__file__).parent / "data" / "rules"
_MATCHED = re.compile(r"Matched \S+ (\S+) \S+ preempting \S+ \S+ (\S+)")


def _unpack(name: str, tmp_path: Path) -> Path:
    return unpack_recording(DATA / f"{name}.tar.gz", tmp_path)


def _real(d: Path) -> list[tuple[str, str]]:
    return _MATCHED.findall((d / "expected" / "matchlog.txt").read_text())


def test_slots_about_to_shut_down_are_trimmed_as_the_real_negotiator_trims_them(tmp_path):
    d = _unpack("trim_shutdown", tmp_path)
    real = sorted(slot for _, slot in _real(d))
    assert real == [f"slot1@fake-s{i:06d}.bench" for i in range(4, 12)]
    pool = load_pool(d)
    assert sorted(m.slot for m in run_cycle(pool).matches) == real
    # without the rule all 12 would be matched
    off = replace(pool, config=replace(pool.config, trim_shutdown_threshold=0))
    assert len(run_cycle(off).matches) == 12


def test_a_skipped_submitter_is_left_out_as_the_real_negotiator_leaves_it(tmp_path):
    d = _unpack("skip_matchmaking", tmp_path)
    real = Counter(sub for sub, _ in _real(d))
    assert real == {"grp.a@negotiator-ext.test": 10, "grp.c@negotiator-ext.test": 10}
    assert Counter(m.submitter for m in run_cycle(load_pool(d)).matches) == real
    # read as if b had not asked: three shares, and b gets some
    text = (d / "submitters.ads").read_text()
    (d / "submitters.ads").write_text(re.sub(r"(?m)^SkipMatchmaking = true\n", "", text))
    assert Counter(m.submitter for m in run_cycle(load_pool(d)).matches)[
        "grp.b@negotiator-ext.test"] > 0


def test_depth_first_counts_the_jobs_a_partitionable_slot_will_take(tmp_path):
    d = _unpack("depth_first", tmp_path)
    real = [(m.group(1), m.group(2)) for m in re.finditer(
        r"Matched (\S+) \S+ \S+ preempting \S+ \S+ (\S+)",
        (d / "expected" / "matchlog.txt").read_text())]
    assert real == [("1.0", "slot1@fake-p000000.bench"), ("1.8", "slot1@fake-p000001.bench")]
    pool = load_pool(d)
    assert [(m.job, m.slot) for m in run_cycle(pool).matches] == real
    off = replace(pool, config=replace(pool.config, depth_first=False))
    assert [m.job for m in run_cycle(off).matches] == ["1.0", "1.0"]
