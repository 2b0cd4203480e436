"""The negotiator's time limits (core/time_limits.py): where a real cycle of the pool
would stop, with the cost of a request calibrated from the pool's negotiator ad; our own
cycle still runs whole."""

from __future__ import annotations

from collections import Counter

import pytest

from negotiator_ext.core.time_limits import CostModel
from negotiator_ext.cycle import run_cycle
from negotiator_ext.pool import load_pool
from poolmaker import _ad, job, make_pool, slot

NEG = {"MyType": "Negotiator", "Name": "neg.test.local",
       "LastNegotiationCyclePhase1Duration0": 1, "LastNegotiationCyclePhase2Duration0": 0,
       "LastNegotiationCyclePhase3Duration0": 0,
       "LastNegotiationCyclePhase4Duration0": 100, "LastNegotiationCycleNumJobsConsidered0": 1000}


def _pool(tmp_path, config="", neg=NEG):
    jobs = [job(c, p, u) for c, u in ((1, "a"), (2, "b"), (3, "c")) for p in range(20)]
    d = make_pool(tmp_path, slots=[slot(f"slot1@n{i:03d}.test.local") for i in range(60)],
                  jobs=jobs, config=config)
    if neg is not None:
        (d / "negotiator.ads").write_text(_ad(neg))
    return d


def test_the_cost_comes_from_the_last_cycle():
    c = CostModel.from_negotiator_ad(NEG)
    assert c.per_request == pytest.approx(0.1) and c.before_negotiation == 1
    assert "100 s negotiating, 1000 requests considered" in c.source
    # a cycle too short to time (whole seconds) gives no model; the knob does
    assert CostModel.from_negotiator_ad(dict(NEG, LastNegotiationCyclePhase4Duration0=0)) is None
    assert CostModel.from_negotiator_ad(None, 0.5).per_request == 0.5


def test_a_schedd_out_of_time_stops_the_real_cycle_but_not_ours(tmp_path):
    r = run_cycle(load_pool(_pool(tmp_path, "NEGOTIATOR_MAX_TIME_PER_SCHEDD = 3")))
    assert len(r.matches) == 60                        # ours: every job, the recommendation
    t = r.time_limits
    # 1 s before negotiating, 0.1 s a request: the first submitter's 20 jobs take 2 s of
    # the schedd's 3, the second's turn stops at the deadline after 10, the third is
    # never reached
    assert t["schedds_out_of_time"] == ["schedd.test.local"]
    assert (t["matches_within"], t["matches_beyond"]) == (30, 30)
    assert len(t["submitters_not_reached"]) == 1 and t["cut"] is True
    within = Counter(m.submitter for m in r.matches if not m.late)
    assert sorted(within.values()) == [10, 20]
    assert set(within).isdisjoint(t["submitters_not_reached"])
    assert t["predicted_duration"] == pytest.approx(4.0)
    assert Counter(m.late for m in r.matches) == {False: 30, True: 30}


def test_a_submitter_out_of_time_and_the_spin_deadline(tmp_path):
    # 1 s per request: each turn stops at 2 s (MAX_TIME_PER_SUBMITTER), 2 matches each;
    # in the next spin every submitter is out of time
    r = run_cycle(load_pool(_pool(tmp_path, "NEGOTIATOR_MAX_TIME_PER_SUBMITTER = 2\n"
                                            "NEGOTIATOR_EXT_SECONDS_PER_REQUEST = 1")))
    t = r.time_limits
    assert (t["matches_within"], t["matches_beyond"]) == (6, 54)
    assert t["submitters_not_reached"] == [] and t["schedds_out_of_time"] == []
    # each stopped at its deadline with its 2 s spent: out of time in the next spin
    assert sorted(t["submitters_out_of_time"]) == sorted({m.submitter for m in r.matches})
    assert t["predicted_duration"] == pytest.approx(7.0)


def test_no_cut_when_the_cycle_fits(tmp_path):
    t = run_cycle(load_pool(_pool(tmp_path))).time_limits
    assert t["cut"] is False and t["matches_within"] == 60
    # 1 s before negotiating, then one request of 0.1 s per match (none refused)
    assert t["predicted_duration"] == pytest.approx(1 + 60 * 0.1)


def test_without_a_negotiator_ad_nothing_is_predicted(tmp_path):
    assert run_cycle(load_pool(_pool(tmp_path, neg=None))).time_limits is None
