"""The time-limit prediction (core/time_limits.py) against a real 25.14 cycle that ran out
of time (tests/data/time_limits/README.md): 11,000 slots, 49,800 jobs, 100 submitters in
10 groups, NEGOTIATOR_MAX_TIME_PER_SCHEDD = 4. The snapshot was taken after one such
cycle (whose negotiator ad calibrates the cost) and before the next (the recording)."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

from conftest import unpack_recording
from negotiator_ext.adapters.adfiles import read_ads
from negotiator_ext.cycle import run_cycle
from negotiator_ext.pool import load_pool

DATA = Path(__file__).parent / "data" / "time_limits"


def test_the_schedd_runs_out_of_time_as_predicted(tmp_path):
    d = unpack_recording(DATA / "schedd_out_of_time.tar.gz", tmp_path)
    (after,) = read_ads(d / "expected" / "negotiator-after.ads")
    real_matches = re.findall(r"Matched \S+ (\S+) ", (d / "expected" / "matchlog.txt").read_text())
    real_groups = Counter(s.split(".")[0] for s in real_matches)
    assert after["LastNegotiationCycleScheddsOutOfTime0"] == "vm"     # the recording
    assert after["LastNegotiationCycleMatches0"] == len(real_matches)

    r = run_cycle(load_pool(d))
    t = r.time_limits
    assert len(r.matches) > 4 * len(real_matches)        # ours: the whole cycle
    assert t["schedds_out_of_time"] == ["vm"] and t["cut"]
    # the groups the real cycle served are the ones we predict it reaches (the first in
    # the order), and it stops within a quarter of the matches we predict it makes
    reached = [g for g in r.group_order if g in real_groups]
    assert reached == r.group_order[:len(reached)]
    assert set(t["groups_not_reached"]) <= set(r.group_order[1:])
    assert abs(t["matches_within"] - len(real_matches)) <= 0.1 * len(real_matches)
    assert "5 s negotiating (whole seconds; 3.79 s of CPU), taken as 4 s" in t["calibrated_from"]
    # the first turn of each submitter ours served in more than one (core.disagreement):
    # 24 of the 100, 22 of them one match after a first turn of 22, the others one after
    # 117 and 180 (the runs of matches in the order made)
    first = t["first_turn_matches"]
    ours = Counter(m.submitter for m in r.matches)
    assert sorted(Counter((first[s], ours[s]) for s in first).items()) == [
        ((22, 23), 22), ((117, 118), 1), ((180, 181), 1)]
    assert first["group_0.u0080@negotiator-ext.test"] == 180
    at = next(i for i, m in enumerate(r.matches)
              if m.submitter == "group_0.u0080@negotiator-ext.test")
    assert {m.submitter for m in r.matches[at:at + 180]} == {
        "group_0.u0080@negotiator-ext.test"}
    assert r.matches[at + 180].submitter != "group_0.u0080@negotiator-ext.test"
