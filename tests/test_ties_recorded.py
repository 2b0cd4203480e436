"""Order among equals against recordings of a real 25.14 negotiator
(tests/data/ties/README.md): with 20, 100 and 1000 equal submitters, and 20 equal groups,
the same submitters get the slots and the groups come in the same order (libstdc++'s
introsort of ties, core/cxxsort.py)."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest

from conftest import unpack_recording
from negotiator_ext.cycle import run_cycle
from negotiator_ext.pool import load_pool

DATA = Path(__file__).parent / "data" / "ties"
_MATCHED = re.compile(r"Matched \S+ (\S+) ")
_GROUP = re.compile(r"^\S+ \S+ Group (\S+) - sortkey= ", re.M)


def _unpack(name: str, tmp_path: Path) -> Path:
    return unpack_recording(DATA / f"{name}.tar.gz", tmp_path)


@pytest.mark.parametrize("name,submitters,matched", [
    ("submitters20", 20, 15), ("submitters100", 100, 92), ("submitters1000", 1000, 992),
    ("groups20", 40, 20), ("groups100", 200, 100)])
def test_the_same_equal_submitters_get_the_slots(tmp_path, name, submitters, matched):
    d = _unpack(name, tmp_path)
    real = Counter(_MATCHED.findall((d / "expected" / "matchlog.txt").read_text()))
    assert sum(real.values()) == matched and set(real.values()) == {1}   # the recording
    r = run_cycle(load_pool(d))
    assert len({row["name"] for row in r.submitters}) == submitters
    assert Counter(m.submitter for m in r.matches) == real


@pytest.mark.parametrize("name,first,groups", [
    ("groups20", ["group_17", "group_9", "group_8"], 20),
    ("groups100", ["group_65", "group_76", "group_75"], 100)])
def test_equal_groups_come_in_the_real_order(tmp_path, name, first, groups):
    d = _unpack(name, tmp_path)
    order: list[str] = []
    for g in _GROUP.findall((d / "expected" / "negotiator-cycle.log").read_text()):
        if g in order:
            break
        order.append(g)
    assert order[:3] == first and len(order) == groups + 1          # and "<none>"
    assert run_cycle(load_pool(d)).group_order == order
