"""A pool of two negotiators against recordings of a real 25.14 pool
(tests/data/negotiators/README.md): our cycle for each negotiator, on the snapshot taken
before both cycles, makes each real match of that negotiator's cycle (its own MatchLog):
the same job of the same submitter on the same slot."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest

from conftest import unpack_recording
from negotiator_ext.cycle import run_cycle
from negotiator_ext.pool import load_pool

DATA = Path(__file__).parent / "data" / "negotiators"
_MATCHED = re.compile(r"Matched (\S+) (\S+) .* (\S+)$", re.M)


def _real(d: Path, negotiator: str) -> list[tuple[str, str, str]]:
    text = (d / "expected" / f"{negotiator}.matchlog.txt").read_text()
    return sorted(_MATCHED.findall(text))


@pytest.mark.parametrize("name,negotiator,per_submitter", [
    ("two_shards", "shard1@vm", {"c": 20}),
    ("two_shards", "NEGOTIATOR2@vm", {"a": 1, "b": 2, "c": 9}),
    ("two_shards_groups", "shard1@vm", {"c": 20}),
    # the second negotiator's own GROUP_NAMES (a NEGOTIATOR2. override): grp's quota 5
    ("two_shards_groups", "NEGOTIATOR2@vm", {"a": 1, "b": 1, "c": 3}),
])
def test_each_negotiators_cycle_is_its_real_cycle(tmp_path, name, negotiator, per_submitter):
    d = unpack_recording(DATA / f"{name}.tar.gz", tmp_path)
    real = _real(d, negotiator)
    counts = Counter(sub.split("@")[0].removeprefix("grp.") for _, sub, _ in real)
    assert dict(counts) == per_submitter                  # the recording itself
    result = run_cycle(load_pool(d, negotiator=negotiator))
    assert sorted((m.job, m.submitter, m.slot) for m in result.matches) == real


def test_under_one_accountant_the_second_shard_would_go_another_way(tmp_path):
    """The second negotiator's cycle read with the first one's accountant (what mixing
    them, or reading the wrong one, gives): a, the first one's best user, gets the most."""
    d = unpack_recording(DATA / "two_shards.tar.gz", tmp_path)
    pool = load_pool(d, negotiator="NEGOTIATOR2@vm")
    other = load_pool(d, negotiator="shard1@vm")
    from dataclasses import replace
    mixed = run_cycle(replace(pool, accountant=other.accountant))
    got = Counter(m.submitter.split("@")[0] for m in mixed.matches)
    assert got["grp.a"] > 1 and got != Counter(
        sub.split("@")[0] for _, sub, _ in _real(d, "NEGOTIATOR2@vm"))
