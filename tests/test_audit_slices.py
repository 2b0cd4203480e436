"""The audit a slice of passes at a time (core.audit_slices) is the audit of the whole
period: every table, the summary and the wait samples the same, to the bit, whatever the
slice size, with slice boundaries inside streaks, pairs and a summarised hour's passes;
and the ledger read a slice at a time (`read_frames(detail=False)`) gives what it gives
read whole."""

from __future__ import annotations

import math

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from negotiator_ext.adapters.audit_data import read_frames
from negotiator_ext.adapters.ledger import open_ledger
from negotiator_ext.core import audit as A
from negotiator_ext.core import audit_spells
from negotiator_ext.core.records import GroupObs, MatchEntry, PassRecord, SubmitterObs

from test_audit import T0, synthetic_passes, write_ledger

WHOLE = 10 ** 9             # a slice bigger than any period: the whole at once


def same_audit(a: A.Audit, b: A.Audit) -> None:
    """Every table the same, value for value (a text column may be held as object in
    one and as str in the other: the files are the same)."""
    assert a.summary == b.summary
    assert a.waits == b.waits
    assert list(a.tables) == list(b.tables)
    for name in a.tables:
        pd.testing.assert_frame_equal(a.tables[name].reset_index(drop=True),
                                      b.tables[name].reset_index(drop=True),
                                      check_exact=True, check_dtype=False, obj=name)


def _pass(i: int, subs, groups, matches=(), status="complete", interval=60.0,
          weight=40.0) -> PassRecord:
    t = T0 + interval * i
    return PassRecord(uuid=f"{i:06d}" + "a" * 26, pool="p", started_at=float(t),
                      finished_at=float(t + 1), snapshot_time=t, status=status,
                      reason=None, real_cycle_time=t, real_accountant_time=t,
                      shadow_duration=0.1, capture_duration=0.1, pool_weight=weight,
                      submitters=tuple(subs), groups=tuple(groups),
                      shadow_matches=tuple(matches), real_matches=())


def streaks(n: int = 10) -> list[PassRecord]:
    """Two groups on a 40-slot pool: g1 borrows from g0 in passes 2-7 (a streak across
    slices of 3), its first submitter over its share and g0's starved; intervals vary."""
    out = []
    for i in range(n):
        borrow = 2 <= i <= 7
        use = {"g0.a@x": 5.0 if borrow else 10.0, "g0.b@x": 10.0,
               "g1.c@x": 18.5 if borrow else 12.25, "g1.d@x": 6.0}
        subs = [SubmitterObs(name=k, group=k.split(".")[0], is_group=False, factor=1.0,
                             real_eup=100.0 + 7 * j + i, real_rup=1.0 + i / 3,
                             real_usage=v, idle_jobs=4 if k == "g0.a@x" else 1,
                             running_jobs=math.ceil(v), claimed_weight=math.ceil(v),
                             predicted_rup=1.0 + i / 3.1, drift=0.01 * i)
                for j, (k, v) in enumerate(use.items())]
        g0, g1 = use["g0.a@x"] + use["g0.b@x"], use["g1.c@x"] + use["g1.d@x"]
        groups = [GroupObs(name="g0", real_quota=20.0, config_quota=20.0, real_usage=g0,
                           real_requested=g0 + 5),
                  GroupObs(name="g1", real_quota=20.0, config_quota=20.0, real_usage=g1,
                           real_requested=g1 + 2)]
        matches = [MatchEntry(job=f"{i}.0", submitter="g1.c@x", slot=f"s{i}", group="g1",
                              wait=30.0 * i + 0.5, preempting="g0.a@x" if borrow else None)]
        out.append(_pass(i, subs, groups, matches, interval=60.0 + (i % 3) * 0.7))
    return out


@pytest.mark.parametrize("n", [1, 3, 7])
def test_slices_of_any_size_give_the_whole_periods_audit(n):
    for recs in (streaks(), synthetic_passes()):
        frames = A.frames_from_records(recs)
        whole = A.analyse(frames, pool="p", slice_passes=WHOLE)
        assert not whole.tables["starved_borrowing_pairs"].empty
        same_audit(whole, A.analyse(frames, pool="p", slice_passes=n))


def test_the_streak_across_slices_is_one_streak():
    a = A.analyse(A.frames_from_records(streaks()), pool="p", slice_passes=3)
    s = a.tables["starved_groups"].set_index("name").loc["g0"]
    assert s["passes"] == 6 and s["longest_passes"] == 6
    pairs = a.tables["starved_borrowing_pairs"].iloc[0]
    assert (pairs["starved"], pairs["borrowing"], pairs["longest_passes"]) == ("g0", "g1", 6)


def test_pairs_made_a_few_starved_at_a_time_are_the_same(monkeypatch):
    frames = A.frames_from_records(synthetic_passes() + streaks())
    whole = A.analyse(frames, pool="p")
    monkeypatch.setattr(audit_spells, "PAIR_ROWS", 1)
    same_audit(whole, A.analyse(frames, pool="p", slice_passes=2))


def test_pairs_of_names_as_ranks_are_the_pairs_of_the_names(monkeypatch):
    """The names (and groups) taken as their ranks give the pairs the names give, text
    types and all; a missing name is not ranked."""
    frames = A.frames_from_records(synthetic_passes() + streaks())
    audit = A.analyse(frames, pool="p")
    grp = audit.tables["group_quota_by_pass"]
    flagged = pd.concat([pd.DataFrame({"index": [90, 90, 91], "group": ["x", "x", "x"],
                                       "name": ["a", "b", None], "time": 1.0,
                                       "interval": 60.0, "starved": [True, False, True],
                                       "over_share": [False, True, True],
                                       "shortfall": 2.0, "excess": 3.0})])
    cases = [(grp, "group", "starved", "over_quota", {}),
             (flagged, "name", "starved", "over_share",
              {"scope": "group", "surplus": "excess"})]
    ranked = [audit_spells.pairs(df, *args, **kw) for df, *args, kw in cases]
    monkeypatch.setattr(audit_spells, "_coded", lambda *a: None)
    named = [audit_spells.pairs(df, *args, **kw) for df, *args, kw in cases]
    assert len(ranked[0]) > 0 and list(ranked[1]["starved"]) == ["a"]
    for r, n in zip(ranked, named):
        pd.testing.assert_frame_equal(r, n, check_exact=True)


def test_the_ledger_read_a_slice_at_a_time_gives_the_same_audit(tmp_path):
    """Summarised hours too: 18 passes ten minutes apart, the first two hours summarised."""
    import dataclasses
    recs = [dataclasses.replace(r, uuid=f"{i:04d}" + "1" * 28, started_at=float(T0 + 600 * i),
                                finished_at=float(T0 + 600 * i + 2), snapshot_time=T0 + 600 * i,
                                comparison=None)
            for i, r in enumerate((synthetic_passes()[:12] * 2)[:18])]
    url = write_ledger(tmp_path / "l.sqlite", recs)
    with open_ledger(url) as ledger:
        assert ledger.summarise(T0 + 2 * 3600) == 2
    with open_ledger(url, read_only=True) as ledger:
        whole = A.analyse(read_frames(ledger), pool="synth", slice_passes=WHOLE)
        for n in (1, 3):
            frames = read_frames(ledger, detail=False)
            assert frames.submitter_rows is not None and len(frames.submitters) < 20
            same_audit(whole, A.analyse(frames, pool="synth", slice_passes=n))
    assert whole.summary["hours_summarised"] == 2


# ---------------------------------------------------------------- any small period

_usage = st.one_of(st.just(0.0), st.floats(0.0, 30.0, allow_nan=False).map(
    lambda x: round(x, 3)))


@st.composite
def periods(draw):
    n_groups = draw(st.integers(1, 3))
    per = draw(st.integers(1, 3))
    n_passes = draw(st.integers(1, 9))
    hgq = draw(st.booleans())
    names = [(f"g{g}", f"g{g}.u{k}@x") for g in range(n_groups) for k in range(per)]
    recs = []
    for i in range(n_passes):
        subs, usage = [], {}
        for j, (g, n) in enumerate(names):
            if draw(st.integers(0, 9)) == 0:
                continue                       # not recorded in this pass
            u = draw(_usage)
            usage[g] = usage.get(g, 0.0) + u
            eup = draw(st.one_of(st.none(), st.floats(0.5, 5000.0).map(lambda x: round(x, 2))))
            subs.append(SubmitterObs(
                name=n, group=g if hgq else "<none>", is_group=False,
                factor=draw(st.sampled_from([1.0, 10.0, 1000.0])), real_eup=eup,
                real_rup=None if eup is None else eup / 10, real_usage=u,
                idle_jobs=draw(st.integers(0, 6)), running_jobs=math.ceil(u),
                claimed_weight=float(math.ceil(u)),
                ceiling=draw(st.sampled_from([-1, -1, 0])),
                predicted_rup=draw(st.one_of(st.none(), st.floats(0.0, 9.0))),
                drift=draw(st.one_of(st.none(), st.floats(-1.0, 1.0)))))
        groups = ([GroupObs(name=g, real_quota=draw(st.sampled_from([0.0, 5.0, 12.5, 20.0])),
                            config_quota=10.0, real_usage=usage.get(g, 0.0),
                            real_requested=usage.get(g, 0.0) + draw(st.integers(0, 8)))
                   for g in sorted({g for g, _ in names})] if hgq else [])
        matches = [MatchEntry(job=f"{i}.{k}", submitter=n, slot=f"s{k}", group=None,
                              wait=draw(st.one_of(st.none(), st.floats(0.0, 900.0))),
                              preempting=names[0][1] if k == 1 else None)
                   for k, (_, n) in enumerate(names[:draw(st.integers(0, 3))])]
        status = draw(st.sampled_from(["complete"] * 5 + ["partial"]))
        recs.append(_pass(i, subs, groups, matches, status=status,
                          interval=draw(st.sampled_from([60.0, 60.0, 61.3, 300.0]))
                          if i else 60.0))
    # times must grow: each pass after the one before
    t, out = float(T0), []
    import dataclasses
    for r, gap in zip(recs, draw(st.lists(st.sampled_from([60.0, 61.3, 600.0]),
                                          min_size=len(recs), max_size=len(recs)))):
        t += gap
        out.append(dataclasses.replace(r, started_at=t, finished_at=t + 1,
                                       snapshot_time=int(t)))
    return out, draw(st.integers(1, 4)), draw(st.sampled_from([0.0, 1.0]))


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(periods())
def test_any_small_period_sliced_is_the_whole(case):
    recs, n, floor = case
    frames = A.frames_from_records(recs)
    same_audit(A.analyse(frames, pool="p", noise_floor=floor, slice_passes=WHOLE),
               A.analyse(frames, pool="p", noise_floor=floor, slice_passes=n))


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 12), st.integers(1, 300), st.integers(1, 50), st.booleans(),
       st.integers(0, 2 ** 31))
def test_period_sums_add_up_as_pandas_does(n_names, n_passes, size, holes, seed):
    """PeriodSums, a slice at a time, against period_means of the whole table (pandas
    adds a table's passes one after the other, or pairwise for one name: both kinds)."""
    import numpy as np
    rng = np.random.default_rng(seed)
    uuids = [f"{rng.integers(1 << 60):016x}" for _ in range(n_passes)]
    names = [f"u{k:02d}" for k in range(n_names)]
    df = pd.DataFrame({"pass_uuid": np.repeat(uuids, n_names),
                       "name": np.tile(names, n_passes),
                       "v": rng.normal(size=n_passes * n_names) * 10 ** rng.integers(0, 4)})
    if holes:
        df = df[rng.random(len(df)) > 0.3]
    passes = pd.DataFrame({"uuid": uuids, "interval": rng.uniform(55, 65, n_passes)})
    whole = audit_spells.period_means(df, passes, "name", ["v"])
    sums = audit_spells.PeriodSums(passes, ["v"])
    for a in range(0, n_passes, size):
        part = uuids[a:a + size]
        sums.add(part, audit_spells.period_pivots(df[df["pass_uuid"].isin(part)], "name",
                                                  ["v"]))
    pd.testing.assert_frame_equal(whole, sums.means("name"), check_exact=True,
                                  check_dtype=False, check_index_type=False)
