"""USE_GLOBAL_JOB_PRIOS against recordings of a real 25.14 negotiator
(tests/data/rules/README.md)."""

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


@pytest.mark.parametrize("name,real_counts,off_counts", [
    ("global_job_prios", {"a": 5, "b": 5}, {"b": 9, "a": 1}),
    ("global_job_prios_range", {"a": 1, "b": 9}, None)])
def test_global_job_prios_as_the_real_negotiator(tmp_path, name, real_counts, off_counts):
    d = unpack_recording(DATA / f"{name}.tar.gz", tmp_path)
    matchlog = (d / "expected" / "matchlog.txt").read_text()
    real = re.findall(r"Matched (\S+) (\S+) ", matchlog)
    assert Counter(s.split("@")[0].split(".")[1] for _, s in real) == real_counts
    pool = load_pool(d)
    ours = [(m.job, m.submitter) for m in run_cycle(pool).matches]
    assert Counter(ours) == Counter(real)          # the same requests to the same submitters
    if off_counts is not None:
        off = replace(pool, config=replace(pool.config, use_global_job_prios=False))
        assert Counter(m.submitter.split("@")[0].split(".")[1]
                       for m in run_cycle(off).matches) == off_counts
