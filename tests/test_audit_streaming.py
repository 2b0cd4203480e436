"""The audit's per-pass share table written as the slices make it, and what is kept of
it instead (core.audit_series), are what the whole table gave: the same file, byte for
byte, in any slices; the same plots' figures; the pivots laid out directly as pandas
makes them; the ledger's matches read as columns in the order the records gave them; a
failed audit leaves nothing behind."""

from __future__ import annotations

import dataclasses
import gzip

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings, strategies as st

from negotiator_ext.adapters.ledger import open_ledger
from negotiator_ext.adapters.ledger_columns import read_columns, read_matches
from negotiator_ext.core import audit as A
from negotiator_ext.core.audit_series import ShareSeries
from negotiator_ext.core.audit_spells import _pivots_by_layout, period_pivots
from negotiator_ext.core.records import MatchEntry
from negotiator_ext.views import audit_files as F

from test_audit import T0, conf, run_audit, synthetic_passes, write_ledger  # noqa: F401
from test_audit_site_scale import site

NAME = "submitter_shares_by_pass"


def _share_table(recs=None) -> pd.DataFrame:
    a = A.analyse(A.frames_from_records(recs or site(40, 8, n_passes=6)), pool="p",
                  share_columns=A.REPORT_SHARE_COLUMNS)
    return a.tables[NAME]


def _streamed(df: pd.DataFrame, tmp, sizes, name=NAME) -> bytes:
    f = F.PerPassFile(tmp, name)
    at = 0
    for n in sizes:
        f(df.iloc[at:at + n])
        at += n
    f(df.iloc[at:])
    f.finish()
    assert f.part.exists() and not f.path.exists()
    assert f.close() == [f.path] and not f.part.exists()
    return f.path.read_bytes()


@pytest.mark.parametrize("parquet", [True, False])
def test_the_file_written_a_slice_at_a_time_is_the_whole_tables(tmp_path, monkeypatch,
                                                                parquet):
    monkeypatch.setattr(F, "parquet_available", lambda: parquet)
    monkeypatch.setattr(F, "CHUNK_ROWS", 70)          # several row groups
    df = _share_table()
    assert len(df) == 240
    whole = tmp_path / "whole"
    whole.mkdir()
    F.write_per_pass(df, whole, NAME)
    expected = next(whole.iterdir()).read_bytes()
    for k, sizes in enumerate(([240], [1] * 30, [33, 0, 71, 5, 69], [69, 1, 70, 70])):
        d = tmp_path / str(k)
        d.mkdir()
        assert _streamed(df, d, sizes) == expected, sizes
    if not parquet:
        assert gzip.decompress(expected).startswith(b"time (epoch s),name,group")


def test_an_empty_table_and_a_column_of_mixed_types_are_written_as_whole(tmp_path,
                                                                          monkeypatch):
    monkeypatch.setattr(F, "CHUNK_ROWS", 50)
    empty = pd.DataFrame(columns=A.REPORT_SHARE_COLUMNS)
    mixed = _share_table()
    mixed["name"] = mixed["name"].astype(object)
    mixed.loc[130, "name"] = 12345                      # in the third row group
    for label, df in (("empty", empty), ("mixed", mixed)):
        whole = tmp_path / f"{label}-whole"
        whole.mkdir()
        F.write_per_pass(df, whole, NAME)
        d = tmp_path / label
        d.mkdir()
        _streamed(df, d, [60, 60])
        pd.testing.assert_frame_equal(pd.read_parquet(whole / f"{NAME}.parquet"),
                                      pd.read_parquet(d / f"{NAME}.parquet"),
                                      check_exact=True)


def test_abort_leaves_nothing(tmp_path):
    f = F.PerPassFile(tmp_path, NAME)
    f(_share_table())
    f.finish()
    f.abort()
    assert list(tmp_path.iterdir()) == []


def test_what_the_plots_read_is_the_tables():
    df = _share_table(synthetic_passes())
    s = ShareSeries()
    for a in range(0, len(df), 7):
        s.add(df.iloc[a:a + 7])
    assert (len(s), s.n_names, s.n_passes) == (len(df), df["name"].nunique(),
                                               df["index"].nunique())
    pd.testing.assert_frame_equal(
        s.totals(), df.groupby("name")[["demand_capped", "delivered"]].sum(),
        check_exact=True)
    for name in df["name"].unique():
        pd.testing.assert_frame_equal(
            s.rows_of(name), df.loc[df["name"] == name, s.rows_of(name).columns],
            check_exact=True, check_dtype=False)


def test_the_audit_with_a_sink_is_the_audit_without():
    frames = A.frames_from_records(site(40, 8, n_passes=5) + [])
    rows = []
    a = A.analyse(frames, pool="p", share_columns=A.REPORT_SHARE_COLUMNS, slice_passes=2)
    b = A.analyse(frames, pool="p", share_columns=A.REPORT_SHARE_COLUMNS, slice_passes=2,
                  share_sink=rows.append)
    assert isinstance(b.tables[NAME], ShareSeries)
    pd.testing.assert_frame_equal(a.tables[NAME], pd.concat(rows, ignore_index=True),
                                  check_exact=True)
    assert a.summary == b.summary
    for name in a.tables:
        if name != NAME:
            pd.testing.assert_frame_equal(a.tables[name], b.tables[name], check_exact=True)


_values = st.sampled_from([0.0, -0.0, np.nan, np.inf, -np.inf, 1.5, -2.25, 1e-300, 3.0])


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 4), st.integers(0, 4), _values, _values),
                min_size=1, max_size=25, unique_by=lambda r: r[:2]),
       st.booleans())
def test_pivots_laid_out_directly_are_pandas_pivots(rows, in_order):
    """One value per (pass, name): pandas adds it up with np.add.reduceat when the rows
    come in order without NaN (-0.0 stays), else with its compensated sum (-0.0 becomes
    0.0, NaN 0.0); missing combinations are NaN."""
    if in_order:
        rows = sorted(rows)
    df = pd.DataFrame({"pass_uuid": [f"u{p}" for p, *_ in rows],
                       "name": [f"n{k}" for _, k, *_ in rows],
                       "a": [r[2] for r in rows], "b": [r[3] for r in rows]})
    fast = _pivots_by_layout(df, "name", ["a", "b"])
    assert fast is not None
    for c in "ab":
        ref = df.pivot_table(index="pass_uuid", columns="name", values=c, aggfunc="sum")
        pd.testing.assert_frame_equal(fast[c], ref, check_exact=True)
        x, y = fast[c].to_numpy(), ref.to_numpy()
        seen = ~np.isnan(y)
        assert (np.signbit(x[seen]) == np.signbit(y[seen])).all()
    # a repeated (pass, name) is left to pivot_table
    twice = pd.concat([df, df.iloc[:1]], ignore_index=True)
    assert _pivots_by_layout(twice, "name", ["a"]) is None
    pd.testing.assert_frame_equal(
        period_pivots(twice, "name", ["a"])["a"],
        twice.pivot_table(index="pass_uuid", columns="name", values="a", aggfunc="sum"))


def test_matches_read_as_columns_come_in_the_records_order(tmp_path):
    """Passes with ours only, the real ones only, both, and none."""
    recs = []
    for i, r in enumerate(synthetic_passes()[:8]):
        ours = () if i % 3 == 1 else tuple(
            MatchEntry(job=f"{i}.{k}", submitter=f"u{k}", slot=f"s{k}",
                       wait=None if k else 30.0 * i) for k in range(i % 3 + 1))
        real = () if i % 4 == 0 else (MatchEntry(job=f"{i}.9", submitter="u9", slot="s9",
                                                  preempting="u1", time=T0 + i),)
        recs.append(dataclasses.replace(r, shadow_matches=ours, real_matches=real))
    url = write_ledger(tmp_path / "l.sqlite", recs)
    with open_ledger(url, read_only=True) as ledger:
        rows = []
        for uuid, (ours, real) in ledger.matches_in(None, None).items():
            rows += A.record_rows(uuid, ours, source="shadow")
            rows += A.record_rows(uuid, real, source="real")
        old = A.make_frames([], [], [], rows, [], []).matches
        new = A.make_frames([], [], [], read_matches(ledger, A.MATCH_COLUMNS), [], []).matches
    assert len(old) > 10
    pd.testing.assert_frame_equal(old, new, check_exact=True)


def test_columns_read_come_in_the_order_written_as_sql_gives_them(tmp_path):
    """Passes whose uuids sort against the order they were written in, NULLs, and a text
    where a number should be: the rows in the order written, the texts as text (NULL
    NaN), the numbers as pandas makes numbers of SQL's values, in any slice of passes."""
    import sqlite3
    recs = [dataclasses.replace(r, uuid=f"{99 - i:04d}" + "e" * 28)
            for i, r in enumerate(synthetic_passes()[:9])]
    path = tmp_path / "l.sqlite"
    write_ledger(path, recs)
    cols = [c for c in A.SUBMITTER_COLUMNS if c != "recorded_passes"]
    with sqlite3.connect(path) as db:
        db.execute("UPDATE submitters SET factor = 'high', \"group\" = NULL WHERE id % 7 = 3")
        rows = db.execute(f"SELECT {', '.join(repr(c).replace(chr(39), chr(34)) for c in cols)} "
                          "FROM submitters ORDER BY id").fetchall()
    values = dict(zip(cols, zip(*rows)))
    want = pd.DataFrame({c: pd.Series([np.nan if v is None else v for v in values[c]],
                                      dtype=object) if c in ("pass_uuid", "name", "group")
                         else pd.to_numeric(pd.Series(values[c], dtype=object),
                                            errors="coerce").to_numpy(float) for c in cols})
    assert want["factor"].isna().any() and want["group"].isna().any()
    assert list(want["pass_uuid"]) != sorted(want["pass_uuid"])     # written out of order
    with open_ledger(str(path), read_only=True) as ledger:
        whole = read_columns(ledger, "submitters", cols)
        uuids = [r.uuid for r in recs]
        parts = pd.concat([read_columns(ledger, "submitters", cols, uuids=uuids[a:a + 4])
                           for a in range(0, len(uuids), 4)], ignore_index=True)
    pd.testing.assert_frame_equal(whole, want, check_exact=True)
    pd.testing.assert_frame_equal(parts, want, check_exact=True)


def test_a_failed_audit_leaves_no_directory_and_no_part_file(tmp_path, monkeypatch, conf):
    url = write_ledger(tmp_path / "l.sqlite", synthetic_passes())

    def fail(*a, **k):
        raise RuntimeError("in the analysis")
    monkeypatch.setattr(A, "config_findings", fail)
    out = tmp_path / "new" / "report"
    with pytest.raises(RuntimeError):
        run_audit(["--ledger", url, "-o", str(out), "--config", str(conf)])
    assert not (tmp_path / "new").exists()
    monkeypatch.undo()
    assert run_audit(["--ledger", url, "-o", str(out), "--config", str(conf)]) == 0
    files = sorted(p.name for p in (out / "tables").iterdir())
    assert f"{NAME}.parquet" in files and not any(n.startswith(".") for n in files)
