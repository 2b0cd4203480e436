"""The audit report's files (`views.audit` writes the page): the output directory, and
every table as files under DIR/tables/.

* A table of the period (one row per submitter, group, condition, comparison...):
  NAME.csv and NAME.json (records; NaN as null), each epoch column followed by its UTC
  text.
* A per-pass table (`PER_PASS`: a row per pass and submitter or group, millions in a day
  of one-minute passes at 1,000 submitters): NAME.parquet when pyarrow is installed (the
  `parquet` extra), else NAME.csv.gz; no JSON and no UTC copies (epoch seconds); the
  figures in single precision (seven significant digits), the columns in `PER_PASS`.

Every CSV header names its unit (`UNITS`: "severity (slot-weight seconds)", "time
(epoch s)", ...); JSON and Parquet keep the plain column names, as report.json does.
"""

from __future__ import annotations

import gzip
import io
import math
import os
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..errors import InputError

# the per-pass tables, written compactly: their columns (None: all) in the files, the
# others being the same for every row of a pass (in passes), or sums and differences of
# these (gap = delivered - demand_capped; shortfall and excess: the gap where flagged)
PER_PASS: dict[str, list[str] | None] = {
    "submitter_shares_by_pass": ["time", "name", "group", "eup", "factor", "idle_counted",
                                 "demand", "deserved", "demand_capped", "delivered",
                                 "starved", "over_share"],
    "group_quota_by_pass": None, "priorities_by_pass": None}

# columns holding epoch seconds: the period's files get a *_utc copy of each
TIME_COLUMNS = ("time", "first", "last", "started_at", "finished_at", "snapshot_time",
                "applied_at", "lease_expires", "real_cycle_time")

_SLOTS = "slot weight"
# each column's unit in a CSV header (a column not named here is a name, a flag, a
# count named for what it counts, or a priority factor)
UNITS: dict[str, str] = {
    **{c: "epoch s" for c in TIME_COLUMNS}, **{f"{c}_utc": "UTC" for c in TIME_COLUMNS},
    **{c: _SLOTS for c in (
        "pool_weight", "demand", "entitlement", "allocation", "deserved", "demand_capped",
        "delivered", "gap", "shortfall", "excess", "quota", "real_quota", "usage",
        "requested", "surplus", "mean_amount", "max_amount", "mean_shortfall",
        "mean_surplus", "largest_gap", "real_usage", "claimed_weight", "real_share",
        "shadow_share", "real_limit", "shadow_limit", "config_quota", "value")},
    **{c: "s" for c in ("interval", "seconds", "duration", "longest_duration", "p50", "p90",
                        "max", "mean", "wait", "real_duration", "covered_seconds")},
    "severity": "slot-weight seconds",
    **{c: "fraction" for c in ("rel_gap", "relative", "deserved_pct", "delivered_pct",
                               "equivalent_agreement", "count_agreement", "real_in_shadow",
                               "shadow_in_real", "worst", "max_abs_drift", "drift", "jain")},
    **{c: "passes" for c in ("passes", "active_passes", "longest_passes", "complete_passes",
                             "partial_passes", "failed_passes",
                             "over_quota_passes", "starved_passes", "recorded_passes")},
    **{c: "jobs" for c in ("idle_jobs", "running_jobs", "idle_counted")},
    **{c: "matches" for c in ("matches", "real_matches", "shadow_matches", "agreed",
                              "count")},
    **{c: "submitters" for c in ("submitters_active", "active", "starved", "over_share")},
    "configured": "slot weight, or factor", "available": _SLOTS,
}


def unit_header(columns) -> list[str]:
    """The CSV header of `columns`: each with its unit, 'severity (slot-weight seconds)'."""
    return [f"{c} ({UNITS[c]})" if c in UNITS else str(c) for c in columns]


# ---------------------------------------------------------------- the output directory

def check_output(out: Path) -> None:
    """Refuse a report directory that is a file, or holds something else than an earlier
    audit (one with report.json); changes nothing."""
    if out.exists() and not out.is_dir():
        raise InputError(str(out), "is a file, not a directory for the report")
    if out.is_dir() and any(out.iterdir()) and not (out / "report.json").is_file():
        raise InputError(str(out), "is not empty and holds no earlier audit (no "
                                   "report.json): name a new or empty directory")


def prepare_output(out: Path, checked: bool = False) -> None:
    """Make `out` ready for a report (`check_output` first, unless the caller `checked`
    it before writing there itself): created when missing, an earlier audit's files
    removed."""
    if not checked:
        check_output(out)
    if out.is_dir():
        t = out / "tables"
        for p in [out / "index.html", out / "report.json", *out.glob("*.png"),
                  *t.glob("*.csv"), *t.glob("*.json"), *t.glob("*.csv.gz"),
                  *t.glob("*.parquet")]:
            p.unlink(missing_ok=True)
    try:
        (out / "tables").mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(str(out), f"cannot create the report directory: "
                                   f"{exc.strerror or exc}") from exc


def plain(v: Any) -> Any:
    """A cell as a JSON value (NaN and NA: null; numpy scalars: Python; tuples: lists)."""
    if v is None:
        return None
    if isinstance(v, (np.bool_, bool)):
        return bool(v)
    if isinstance(v, (np.integer,)):
        return int(v)
    if isinstance(v, (float, np.floating)):
        return float(v) if math.isfinite(v) else None
    if isinstance(v, (list, tuple)):
        return [plain(x) for x in v]
    if isinstance(v, dict):
        return {str(k): plain(x) for k, x in v.items()}
    try:
        if pd.isna(v):
            return None
    except (TypeError, ValueError):
        pass
    return v


def utc_texts(values: pd.Series) -> list[str]:
    """Epoch seconds as 'YYYY-MM-DD HH:MM:SS' UTC ('' when unknown)."""
    v = pd.to_numeric(pd.Series(values), errors="coerce")
    v = v.where(np.isfinite(v) & (v.abs() < 1e11))
    t = pd.to_datetime(v, unit="s", errors="coerce").dt.strftime("%Y-%m-%d %H:%M:%S")
    return t.fillna("").tolist()


def _for_files(df: pd.DataFrame) -> pd.DataFrame:
    """The table as written: each epoch column followed by its UTC text; lists (the
    summary's partners) joined by ', '."""
    out = df.copy()
    for c in out.columns:
        if out[c].dtype == object and any(isinstance(v, (list, tuple)) for v in out[c]):
            out[c] = [", ".join(map(str, v)) if isinstance(v, (list, tuple)) else v
                      for v in out[c]]
    for c in TIME_COLUMNS:
        if c in out.columns:
            pos = list(out.columns).index(c) + 1
            out.insert(pos, f"{c}_utc", utc_texts(out[c]))
    return out


def write_table(df: pd.DataFrame, tables_dir: Path, name: str) -> list[Path]:
    """`df` as NAME.csv (a unit in each header) and NAME.json (records; NaN as null) in
    `tables_dir`."""
    d = _for_files(df)
    csv_path, json_path = tables_dir / f"{name}.csv", tables_dir / f"{name}.json"
    d.to_csv(csv_path, index=False, header=unit_header(d.columns))
    d.to_json(json_path, orient="records", double_precision=15, force_ascii=False,
              indent=1 if len(d) <= 2000 else None)
    return [csv_path, json_path]


def parquet_available() -> bool:
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        return False
    return True


CHUNK_ROWS = 200_000        # rows of a per-pass table converted and written at a time


def _per_pass_chunk(df: pd.DataFrame, name: str) -> pd.DataFrame:
    """Rows of a per-pass table as written: its `PER_PASS` columns; shares, priorities
    and quotas to seven significant digits (single precision), the pass times to the
    second."""
    keep = PER_PASS.get(name)
    d = df[[c for c in keep if c in df.columns]] if keep else df
    return d.assign(**{c: d[c].astype("float32") for c in d.columns
                       if d[c].dtype == "float64" and c not in TIME_COLUMNS})


def _write_parquet(df: pd.DataFrame, path: Path, name: str) -> None:
    """`df` as Parquet, CHUNK_ROWS rows (a row group) at a time: a day's shares at 1,000
    submitters are 1.5 million rows, converted whole they took some 200 MB more."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    first = pa.Table.from_pandas(_per_pass_chunk(df.iloc[:CHUNK_ROWS], name),
                                 preserve_index=False)
    # dictionaries for the names, times and flags only: a row group's figures fill one
    # and then fall back to plain encoding, having made the file larger
    coded = [f.name for f in first.schema if not pa.types.is_floating(f.type)
             or f.name in TIME_COLUMNS]
    with pq.ParquetWriter(path, first.schema, compression="zstd",
                          use_dictionary=coded) as w:
        w.write_table(first)
        del first
        for a in range(CHUNK_ROWS, len(df), CHUNK_ROWS):
            w.write_table(pa.Table.from_pandas(_per_pass_chunk(df.iloc[a:a + CHUNK_ROWS],
                                                               name),
                                               schema=w.schema, preserve_index=False))


def write_per_pass(df: pd.DataFrame, tables_dir: Path, name: str) -> list[Path]:
    """A per-pass table as NAME.parquet (pyarrow installed) or NAME.csv.gz (units in its
    header), its `PER_PASS` columns; epoch seconds, no UTC copies."""
    if parquet_available():
        path = tables_dir / f"{name}.parquet"
        try:
            _write_parquet(df, path, name)
        except (TypeError, ValueError, ImportError):     # a column of mixed types
            d = _per_pass_chunk(df, name)
            d = d.assign(**{c: d[c].astype(str) for c in d.columns if d[c].dtype == object})
            d.to_parquet(path, index=False, compression="zstd")
    else:
        d = _per_pass_chunk(df, name)
        path = tables_dir / f"{name}.csv.gz"
        d.to_csv(path, index=False, header=unit_header(d.columns), float_format="%.7g",
                 compression={"method": "gzip", "compresslevel": 6, "mtime": 0})
    return [path]


class PerPassFile:
    """A per-pass table written as its rows come (`add`, or calling it: the table's rows
    in order, any number at a time), CHUNK_ROWS rows at a time: the file
    `write_per_pass` writes of the whole table, byte for byte, without the whole table
    in memory (a day's shares at 1,000 submitters: 1.5 million rows, some 120 MB). It is
    written under a hidden name in `tables_dir`; `finish` completes it, `close` puts it
    in place (after `prepare_output`, which removes an earlier audit's files) and gives
    its path, `abort` removes it."""

    def __init__(self, tables_dir: Path, name: str):
        self.name = name
        self.parquet = parquet_available()
        self.path = Path(tables_dir) / (f"{name}.parquet" if self.parquet
                                        else f"{name}.csv.gz")
        self.part = self.path.with_name(f".{self.path.name}.part")
        self.rows = 0
        self._buf: list[pd.DataFrame] = []
        self._buffered = 0
        self._empty: pd.DataFrame | None = None
        self._out: Any = None           # the ParquetWriter, or the gzipped text
        self._files: list[Any] = []     # what the gzipped text is written through
        self._whole: list[pd.DataFrame] | None = None   # a column of mixed types
        self._done = self._closed = False

    def __call__(self, df: pd.DataFrame) -> None:
        self.add(df)

    def add(self, df: pd.DataFrame) -> None:
        """The table's next rows (an empty table: its columns, when no row comes)."""
        if not len(df):
            if self._empty is None:
                self._empty = df
            return
        self._buf.append(df)
        self._buffered += len(df)
        self.rows += len(df)
        while self._buffered >= CHUNK_ROWS:
            self._write(self._take(CHUNK_ROWS))

    def _take(self, n: int | None = None) -> pd.DataFrame:
        """The first `n` buffered rows (None: all of them), taken off the buffer."""
        whole = (self._buf[0] if len(self._buf) == 1
                 else pd.concat(self._buf, ignore_index=True))
        n = len(whole) if n is None else n
        rest = whole.iloc[n:]
        self._buf = [rest] if len(rest) else []
        self._buffered = len(rest)
        return whole.iloc[:n]

    def _write(self, rows: pd.DataFrame) -> None:
        """The next CHUNK_ROWS rows (fewer: the last) into the file, as `write_per_pass`
        writes them."""
        d = _per_pass_chunk(rows, self.name)
        if self._whole is not None:
            self._whole.append(d)
        elif not self.parquet:
            if self._out is None:
                raw = open(self.part, "wb")
                self._files = [raw]
                # the gzip header names the file, as pandas writing it by its path does
                gz = gzip.GzipFile(filename=str(self.path), mode="wb", compresslevel=6,
                                   mtime=0, fileobj=raw)
                self._files.append(gz)
                self._out = io.TextIOWrapper(gz, encoding="utf-8", newline="")
                header: Any = unit_header(d.columns)
            else:
                header = False
            d.to_csv(self._out, index=False, header=header, float_format="%.7g")
        else:
            import pyarrow as pa
            import pyarrow.parquet as pq
            try:
                if self._out is None:
                    first = pa.Table.from_pandas(d, preserve_index=False)
                    coded = [f.name for f in first.schema if not pa.types.is_floating(f.type)
                             or f.name in TIME_COLUMNS]
                    self._out = pq.ParquetWriter(self.part, first.schema, compression="zstd",
                                                 use_dictionary=coded)
                    self._out.write_table(first)
                else:
                    self._out.write_table(pa.Table.from_pandas(d, schema=self._out.schema,
                                                               preserve_index=False))
            except (TypeError, ValueError, ImportError):     # a column of mixed types
                # the rows written so far read back: the whole table is written at once
                self._whole = []
                if self._out is not None:
                    self._out.close()
                    self._out = None
                    self._whole.append(pq.read_table(self.part).to_pandas())
                self._whole.append(d)

    def finish(self) -> None:
        """The last rows written and the file completed (still under its hidden name)."""
        if self._done:
            return
        if self._buffered:
            self._write(self._take())
        elif not self.rows:
            self._write(self._empty if self._empty is not None
                        else pd.DataFrame(columns=PER_PASS.get(self.name) or []))
        if self._whole is not None:
            d = pd.concat(self._whole, ignore_index=True) if len(self._whole) > 1 \
                else self._whole[0]
            d = d.assign(**{c: d[c].astype(str) for c in d.columns if d[c].dtype == object})
            d.to_parquet(self.part, index=False, compression="zstd")
            self._whole = None
        self._close_files()
        self._done = True

    def _close_files(self) -> None:
        out, self._out = self._out, None
        if out is not None:
            out.close()
        for f in reversed(self._files):
            f.close()
        self._files = []

    def close(self) -> list[Path]:
        """The file in place (finished first if need be); its path."""
        self.finish()
        os.replace(self.part, self.path)
        self._closed = True
        return [self.path]

    def abort(self) -> None:
        """The unfinished or unplaced file removed (nothing once `close`d)."""
        if self._closed:
            return
        try:
            self._close_files()
        finally:
            self.part.unlink(missing_ok=True)
            self._closed = True


def read_table(path: Path) -> pd.DataFrame:
    """A table this module wrote, by its path (tests, and whoever reads a report back):
    Parquet, CSV or gzipped CSV (headers without their units) or JSON records."""
    p = Path(path)
    if p.suffix == ".parquet":
        return pd.read_parquet(p)
    if p.suffix == ".json":
        return pd.read_json(p, orient="records")
    d = pd.read_csv(p)
    return d.rename(columns={h: h.rsplit(" (", 1)[0] if h.endswith(")") else h
                             for h in d.columns})
