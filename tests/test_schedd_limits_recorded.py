"""The schedd's limits against recordings of a real 25.14 pool
(tests/data/schedd_limits/README.md): our cycle on each snapshot matches each submitter
as many times as the real cycle did (its MatchLog)."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest

from conftest import unpack_recording
from negotiator_ext.cycle import run_cycle
from negotiator_ext.pool import load_pool

DATA = Path(__file__).parent / "data" / "schedd_limits"
_MATCHED = re.compile(r"Matched \S+ (\S+) ")


def _unpack(name: str, tmp_path: Path) -> Path:
    return unpack_recording(DATA / f"{name}.tar.gz", tmp_path)


def _real(d: Path) -> dict[str, int]:
    return dict(Counter(_MATCHED.findall((d / "expected" / "matchlog.txt").read_text())))


@pytest.mark.parametrize("name,expected", [
    ("per_user_limit", (10, 20, 20)),
    ("per_user_limit_resume", (10, 20, 32)),
    ("max_jobs_running_real_slots", (10, 24, 12)),
])
def test_our_cycle_matches_the_recorded_cycle(tmp_path, name, expected):
    d = _unpack(name, tmp_path)
    real = _real(d)
    subs = [f"grp.{x}@negotiator-ext.test" for x in "abc"]
    assert tuple(real.get(s, 0) for s in subs) == expected      # the recording itself
    r = run_cycle(load_pool(d))
    ours = dict(Counter(m.submitter for m in r.matches))
    assert ours == real


def test_without_the_schedds_limits_the_negotiator_alone_gives_more(tmp_path):
    """The same recording read as if the schedd offered everything: what a model without
    the limits predicted (and got wrong)."""
    d = _unpack("per_user_limit", tmp_path)
    pool = load_pool(d)
    from dataclasses import replace
    from negotiator_ext.core.schedd_limits import ScheddLimits
    off = ScheddLimits(per_user_enabled=False)
    pool = replace(pool, schedd_default=off, schedd_limits={"vm": off})
    ours = Counter(m.submitter.split("@")[0] for m in run_cycle(pool).matches)
    assert ours["grp.b"] > 20 and ours["grp.c"] > 20


def test_a_curbed_schedd_offers_nothing_as_the_real_one(tmp_path):
    """CURB_MATCHMAKING = True on the schedd (tests/data/rules/README.md): the real cycle
    made no match; its ad, captured in schedds.ads, says so to ours."""
    d = unpack_recording(DATA.parent / "rules" / "curb_matchmaking.tar.gz", tmp_path)
    assert _real(d) == {}
    pool = load_pool(d)
    assert pool.schedd_limits["vm"].curbed is True
    assert run_cycle(pool).matches == []
    (d / "schedds.ads").unlink()                  # without the schedd's ad: 20 matches
    assert len(run_cycle(load_pool(d)).matches) == 20
