"""`forecast` against real pools (tests/data/forecast/, README there): 25 minutes of real
HTCondor 25.14 daemons running the same 145-job workload, twice under config A and once
under config B, with static and with partitionable slots.

The metric (`core.forecast.usage_error`): the sum over 5-minute buckets and submitters
(groups) of |forecast - real| usage, over the real total. The noise floor is the same
metric between the two real runs under config A (A2 against A1): a forecast cannot be
asked to be closer to one real run than the next real run is.

* **Reproduction**: forecast from run A1's snapshot and history under A1's config,
  against A1.
* **Prediction**: forecast from the same start and history under B's config, against
  the real run under B (which differs from A by a third to a half of its usage).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from negotiator_ext.core.forecast import outcome_of, usage_error
from negotiator_ext.sim.forecast import ForecastSpec, run_forecast
from negotiator_ext.sim.history import JobReader, read_history, recorded_runs

DATA = Path(__file__).parent / "data" / "forecast"
BUCKET = 300


def meta(run: str) -> dict:
    return json.loads((DATA / run / "meta.json").read_text())


def history(run: str) -> tuple[Path, Path]:
    return DATA / run / "history.ads", DATA / run / "queue-end.ads"


def workload(run: str) -> tuple[Path, ...]:
    """What a forecast of the run replays: the history read once the workload had
    drained (every job's whole run), where the recording has it; else the history and
    the queue at the run's end (the end cuts some runs short, and some jobs never
    start before it: their length is a guess)."""
    drained = DATA / run / "history-drained.ads"
    return (drained,) if drained.is_file() else history(run)


def real(run: str):
    m = meta(run)
    h = read_history(history(run), JobReader(), None)
    return outcome_of(recorded_runs(h, m["end_time"]), m["snapshot_time"], m["end_time"],
                      BUCKET, pool_weight=16)


def forecast(run: str, config_of: str):
    m = meta(run)
    return run_forecast(ForecastSpec(snapshot=DATA / run / "snapshot", history=workload(run),
                                     config=DATA / config_of / "config", until=m["end_time"],
                                     bucket=BUCKET))


def errors(a, b) -> tuple[float, float]:
    return (usage_error(a.timeline["submitters"], b.timeline["submitters"]),
            usage_error(a.timeline["groups"], b.timeline["groups"]))


@pytest.fixture(scope="module", params=["static", "pslot"])
def runs(request):
    kind = request.param
    return {"kind": kind, "A1": real(f"{kind}-A1"), "A2": real(f"{kind}-A2"),
            "B": real(f"{kind}-B"), "fA": forecast(f"{kind}-A1", f"{kind}-A1"),
            "fB": forecast(f"{kind}-A1", f"{kind}-B")}


def test_the_recordings_are_whole():
    for run in ("static-A1", "static-A2", "static-B", "pslot-A1", "pslot-A2", "pslot-B"):
        m = meta(run)["summary"]
        assert m["submitted"] == 145 and not m["missing"]
        h = read_history(history(run), JobReader(), None)
        assert len(h.jobs) == 145


def test_forecast_reproduces_the_real_run_within_its_noise(runs):
    noise = errors(runs["A2"], runs["A1"])
    got = errors(runs["fA"].outcome, runs["A1"])
    assert got[0] <= noise[0] and got[1] <= noise[1], (runs["kind"], got, noise)


def test_forecast_predicts_the_other_config(runs):
    """Under B the real pool's usage moves by a third or more; the forecast's prediction
    of what B really did is within the noise floor."""
    noise = errors(runs["A2"], runs["A1"])
    change = errors(runs["B"], runs["A1"])
    got = errors(runs["fB"].outcome, runs["B"])
    assert min(change) > 0.25
    assert got[0] <= noise[0] and got[1] <= noise[1], (runs["kind"], got, noise)


def test_the_first_cycle_follows_the_negotiator_s_last_one(runs):
    """The snapshot's negotiator ad says when its last cycle ended: the first cycle
    after the first submission waits out NEGOTIATOR_CYCLE_DELAY from then, as the real
    one did, and the first jobs start when the real ones did."""
    from negotiator_ext.pool import load_pool
    from negotiator_ext.sim.forecast import last_cycle
    from negotiator_ext.views.forecast import forecast_document
    kind = runs["kind"]
    m = meta(f"{kind}-A1")
    snap = load_pool(DATA / f"{kind}-A1" / "snapshot").snapshot
    began, ended = last_cycle(snap, m["snapshot_time"])
    (ad,) = snap.negotiator_ads()
    assert (began, ended) == (ad["LastNegotiationCycleTime0"], ad["LastNegotiationCycleEnd0"])
    first_real = min(r.start for r in recorded_runs(
        read_history(history(f"{kind}-A1"), JobReader(), None), m["end_time"]) if r.start)
    jobs = forecast_document(runs["fA"], with_jobs=True)["jobs"]
    first = min(j["start"] for j in jobs if j["start"] is not None)
    assert first == max(m["snapshot_time"], ended + 20) and abs(first - first_real) <= 2


def test_the_cycles_and_matches_are_the_real_ones(runs):
    """The cadence and claim reuse: about as many cycles as the real negotiator ran (26
    or 27 in 25 minutes), and about as many matches; most jobs start without one."""
    kind = runs["kind"]
    real_matches = meta(f"{kind}-A1")["summary"]["matchlog_matches"]
    f = runs["fA"]
    assert abs(f.cycles - meta(f"{kind}-A1")["summary"]["cycles_started"]) <= 2
    assert abs(f.matches - real_matches) <= max(2, real_matches // 10)
    assert f.reused + f.by_leftovers > f.matches
