"""Benchmark: what the ledger costs on disk, per pass and per summarised hour, and what a
year of one-minute passes comes to.

    python bench/bench_ledger_size.py [--sizes 1k,11k,100k,100k-groups] [--detail-days 3]
                                      [--retention-days 366] [--json]
    python bench/bench_ledger_size.py --sizes 1k --check-hours 26

For each size a synthetic pool is generated with bench/synth.py (cached under
bench/.cache/): 1k = 1,000 slots, 10,000 idle jobs, 10 submitters; 11k = 11,000 slots,
50,000 idle jobs, 100 submitters; 100k = 100,000 slots, 500,000 idle jobs, 1,000
submitters (issue 15's counts; synth.py's slots are 30% claimed and its submitters in
five groups); 100k-groups = issue 15's own 100k shape (bench/synth_groups.py: 100,000
alike idle slots, 500,000 jobs, 1,000 submitters in 100 groups), since our cycle makes no
match on synth.py's 100k pool. One shadow pass is run on it as `shadow --replay` runs one (ShadowLoop,
the pass's record as the loop writes it: our cycle's matches with their waits, the
submitters and groups, the slot classes, the timings and warnings). The synthetic pool
has no negotiator ad, so the real side a production loop adds with its MatchLog is
added as that loop would record it: the pass complete, one real cycle, as many real
matches as ours (the MatchLog's Matched lines of a negotiator that agreed), and the
comparison `core.compare` makes of them with the pass before.

That record is written again and again into a fresh SQLite ledger, one transaction a
pass as the loop writes them, with new ids and starts a minute apart: an hour of passes
(1k, 11k); at 100k a sample of --sample-100k passes (default 10), the figures per pass
extrapolated from it (said in the output). Measured (SQLite's dbstat, after a
checkpoint): bytes per pass, split by table, the slot classes apart (kept for the five
newest comparable passes: a constant); then the hour is summarised (Ledger.summarise),
timed with giving the space back, and its summary copied to 200 hours to measure the
bytes a summarised hour takes. Also without the MatchLog (no real matches).

The year: DETAIL_DAYS of one-minute passes at full detail and the rest of the
RETENTION_DAYS (at most 365) as hourly summaries, plus the slot classes: the bytes per
pass and per hour measured here, multiplied out. Our cycle on a snapshot matches every
free slot a job fits (about 70% of the pool here): a pool whose cycles match fewer (a
full pool matches what its jobs free each minute) writes fewer match rows, so the
output also gives the bytes per match and the year at --steady-matches matches a pass.

--check-hours H (1k only): writes H hours of one-minute passes through the loop's own
retention step (`_Pass.retain` after every pass, DETAIL_DAYS = 2 hours) and compares
the ledger's size at the end with what the figures above predict for it.

Not a test: big measurements live here, never in the test suite.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import logging
import shutil
import sys
import tempfile
import time
import types
import uuid as uuidlib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

CACHE = ROOT / "bench" / ".cache"
# label -> (generator, slots, idle jobs, submitters)
SIZES = {"1k": ("synth", 1_000, 10_000, 10), "11k": ("synth", 11_000, 50_000, 100),
         "100k": ("synth", 100_000, 500_000, 1_000),
         "100k-groups": ("synth_groups", 100_000, 500_000, 1_000)}
HOUR = 3600
GOAL = 5e9          # the goal for a year at 11k slots, bytes
HOUR_COPIES = 200   # summarised hours measured together (one is a few pages)


def cached_pool(generator: str, slots: int, jobs: int, submitters: int) -> Path:
    """The pool's directory under bench/.cache/ (generated when missing), keyed by the
    arguments and by the generator's own text."""
    import importlib
    gen = importlib.import_module(generator)
    version = hashlib.sha256(Path(gen.__file__).read_bytes()).hexdigest()[:10]
    prefix = f"ledger-{generator}-s{slots}-j{jobs}-u{submitters}-"
    directory = CACHE / (prefix + version)
    CACHE.mkdir(parents=True, exist_ok=True)
    for old in CACHE.glob(prefix + "*"):
        if old != directory:
            shutil.rmtree(old, ignore_errors=True)
    if directory.is_dir():
        return directory
    tmp = CACHE / f".tmp-{prefix}{version}"
    shutil.rmtree(tmp, ignore_errors=True)
    if generator == "synth":
        gen.generate(tmp, slots=slots, jobs=jobs, seed=1, autoclusters=300,
                     submitters=submitters)
    else:
        gen.generate(tmp, slots=slots, jobs=jobs, submitters=submitters,
                     groups=submitters // 10, autoclusters=2000)
    tmp.rename(directory)
    return directory


def shadow_record(snapshot: Path, work: Path):
    """One shadow pass on the snapshot, as `shadow --replay` runs it: its record."""
    from negotiator_ext.shadow import ShadowLoop
    from negotiator_ext.shadow_state import ShadowSettings
    settings = ShadowSettings.from_knobs({"STATE_DIR": str(work), "ADVERTISE": "false"},
                                         ledger_url=str(work / "scratch.sqlite"))
    t = time.perf_counter()
    rec = ShadowLoop(settings).run_pass(replay=snapshot)
    return rec, time.perf_counter() - t


def production_like(rec, matchlog: bool):
    """The pass as a loop beside a pool with a MatchLog records it (see the docstring);
    `matchlog` False: no real matches (the negotiator ad's counts only)."""
    from negotiator_ext.core.records import RealCycle
    cycle = RealCycle(time=int(rec.started_at) - 30, end=int(rec.started_at) - 25,
                      duration=5.0, matches=len(rec.shadow_matches), rejections=0,
                      active_submitters=len(rec.submitters), idle_jobs=0,
                      candidate_slots=len(rec.slot_classes))
    real = tuple(dataclasses.replace(m, time=cycle.time + 2) for m in rec.shadow_matches)
    return dataclasses.replace(
        rec, status="complete", reason=None, comparable=True, real_cycles=(cycle,),
        real_matches=real if matchlog else (), real_cycle_time=cycle.time,
        submitters=tuple(dataclasses.replace(s, real_matches=s.shadow_matches)
                         for s in rec.submitters))


def comparison_of(prev, rec, matchlog: bool):
    """The comparison `rec`'s pass makes of `prev`'s cycle (core.compare)."""
    from negotiator_ext.core.compare import compare
    return compare(shadow_pass=prev.uuid, shadow_snapshot_time=int(prev.snapshot_time),
                   shadow_matches=prev.shadow_matches, shadow_submitters=prev.submitters,
                   shadow_groups=prev.groups, real_cycles=rec.real_cycles,
                   real_matches=rec.real_matches if matchlog else None,
                   real_submitters=rec.submitters, real_groups=rec.groups,
                   slot_classes=prev.slot_classes, time_limits=prev.time_limits)


def pass_at(base, i: int, t0: float, comparison):
    """Copy `i` of the production-like record, started at t0 + 60 i, with new ids."""
    t = t0 + 60 * i
    shift = int(t - base.started_at)
    return dataclasses.replace(
        base, uuid=uuidlib.uuid4().hex, started_at=t, finished_at=t + (
            base.finished_at - base.started_at), snapshot_time=int(t),
        real_cycle_time=base.real_cycle_time + shift,
        real_cycles=tuple(dataclasses.replace(c, time=c.time + shift, end=c.end + shift)
                          for c in base.real_cycles),
        real_matches=tuple(dataclasses.replace(m, time=m.time + shift)
                           for m in base.real_matches),
        comparison=comparison)


def table_bytes(path: Path) -> dict[str, int]:
    """Bytes per table, its indexes counted with it (SQLite's dbstat), after a checkpoint."""
    import sqlite3
    conn = sqlite3.connect(path)
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
        index_of = dict(conn.execute("SELECT name, tbl_name FROM sqlite_master"))
        out: dict[str, int] = {}
        for name, size in conn.execute("SELECT name, SUM(pgsize) FROM dbstat GROUP BY name"):
            table = index_of.get(name, name)
            out[table] = out.get(table, 0) + int(size)
        out["(free)"] = conn.execute("PRAGMA freelist_count").fetchone()[0] * conn.execute(
            "PRAGMA page_size").fetchone()[0]
        return out
    finally:
        conn.close()


def replicate_hour(path: Path, copies: int) -> None:
    """The ledger's one hourly summary copied to the `copies` hours after it (an hour's
    rows are too few to measure by the page): what that many summarised hours hold."""
    import sqlite3
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        cols = {t: [r[1] for r in conn.execute(f"PRAGMA table_info({t})") if r[1] != "id"]
                for t in ("hours", "hour_submitters", "hour_groups")}
        (first,), = conn.execute("SELECT id FROM hours").fetchall()
        q = (lambda names: ", ".join(f'"{c}"' for c in names))
        conn.execute("BEGIN")
        for k in range(1, copies + 1):
            hc = cols["hours"]
            conn.execute(f"INSERT INTO hours ({q(hc)}) SELECT "
                         + ", ".join(f"hour + {k * HOUR}" if c == "hour" else f'"{c}"'
                                     for c in hc) + " FROM hours WHERE id = ?", (first,))
            new = conn.execute("SELECT last_insert_rowid()").fetchone()[0]
            for t in ("hour_submitters", "hour_groups"):
                rest = [c for c in cols[t] if c != "hour_id"]
                conn.execute(f"INSERT INTO {t} (hour_id, {q(rest)}) SELECT ?, {q(rest)} "
                             f"FROM {t} WHERE hour_id = ?", (new, first))
        conn.execute("COMMIT")
    finally:
        conn.close()


def measure(label: str, base, passes: int, matchlog: bool, work: Path) -> dict:
    """Write `passes` copies a minute apart (and one more, in the next hour), then
    summarise the hour: bytes per pass by table, bytes per summarised hour, timings."""
    from negotiator_ext.adapters.ledger import open_ledger
    path = work / f"ledger-{label}-{'matchlog' if matchlog else 'nomatchlog'}.sqlite"
    path.unlink(missing_ok=True)
    t0 = (int(base.started_at) // HOUR + 1) * HOUR
    rec0 = production_like(base, matchlog)
    prev = pass_at(rec0, -1, t0, None)
    write_s = []
    with open_ledger(str(path)) as ledger:
        for i in range(passes):
            rec = pass_at(rec0, i, t0, None)
            rec = dataclasses.replace(rec, comparison=comparison_of(prev, rec, matchlog))
            t = time.perf_counter()
            ledger.record(rec)
            write_s.append(time.perf_counter() - t)
            prev = rec
        by_table = table_bytes(path)
        # one pass in the next hour, so that the hour's last pass is known to end there
        ledger.record(pass_at(rec0, 60, t0, comparison_of(prev, pass_at(rec0, 60, t0, None),
                                                          matchlog)))
        after_pass = table_bytes(path)
        t = time.perf_counter()
        assert ledger.summarise(t0 + HOUR) == 1
        summarise_s = time.perf_counter() - t
        t = time.perf_counter()
        while ledger.reclaim()["free_pages"]:
            pass
        reclaim_s = time.perf_counter() - t
        summed = table_bytes(path)
        assert ledger.verify() == []
    replicate_hour(path, HOUR_COPIES - 1)
    hours_bytes = table_bytes(path)
    per_table = {k: v / passes for k, v in by_table.items()
                 if k not in ("slot_classes", "(free)", "sqlite_sequence", "ledger_meta",
                              "sqlite_schema", "sqlite_master", "adjustments")
                 and not k.startswith("hour")}
    hour_tables = ("hours", "hour_submitters", "hour_groups")
    per_hour = sum(hours_bytes.get(t, 0) - after_pass.get(t, 0) for t in hour_tables
                   ) / HOUR_COPIES
    n_matches = len(base.shadow_matches)
    match_bytes = (per_table.get("shadow_matches", 0) + per_table.get("real_matches", 0))
    return {
        "size": label, "matchlog": matchlog, "passes_written": passes,
        "matches_a_pass": n_matches, "submitters": len(base.submitters),
        "groups": len(base.groups), "slots": len(base.slot_classes),
        "bytes_a_pass": sum(per_table.values()),
        "bytes_a_pass_by_table": {k: round(v) for k, v in sorted(per_table.items())},
        "bytes_a_match_row": match_bytes / (n_matches * (2 if matchlog else 1))
        if n_matches else None,
        "bytes_a_pass_without_matches": sum(per_table.values()) - match_bytes,
        "slot_classes_bytes": by_table.get("slot_classes", 0),
        "bytes_a_summarised_hour": per_hour,
        "record_s_median": sorted(write_s)[len(write_s) // 2],
        "summarise_hour_s": round(summarise_s, 2), "reclaim_s": round(reclaim_s, 2),
        "file_before_summary_mib": round(sum(after_pass.values()) / 2**20, 1),
        "file_after_summary_mib": round(sum(summed.values()) / 2**20, 1),
    }


def year_bytes(row: dict, detail_days: float, retention_days: float,
               per_pass: float | None = None) -> float:
    """A year of one-minute passes: detail_days of them in full, the rest of the
    retention (at most a year) as hourly summaries, the slot classes."""
    keep = min(retention_days, 365.0) if retention_days > 0 else 365.0
    detail = min(detail_days, keep) if detail_days > 0 else keep
    pp = row["bytes_a_pass"] if per_pass is None else per_pass
    return (detail * 1440 * pp + (keep - detail) * 24 * row["bytes_a_summarised_hour"]
            + row["slot_classes_bytes"])


def detail_days_for(row: dict, goal: float, per_pass: float | None = None) -> float:
    """The largest DETAIL_DAYS whose year stays within `goal` bytes."""
    pp = row["bytes_a_pass"] if per_pass is None else per_pass
    rest = goal - 365 * 24 * row["bytes_a_summarised_hour"] - row["slot_classes_bytes"]
    return max(0.0, min(365.0, rest / (1440 * pp - 24 * row["bytes_a_summarised_hour"])))


def check(base, hours: int, work: Path) -> dict:
    """`hours` hours of one-minute passes through the loop's retention (DETAIL_DAYS =
    2 hours, RETENTION_DAYS = 366): the ledger's size at the end."""
    from negotiator_ext.adapters.ledger import open_ledger
    from negotiator_ext.shadow_state import ShadowSettings
    from negotiator_ext.shadow import _Pass
    path = work / "ledger-check.sqlite"
    path.unlink(missing_ok=True)
    t0 = (int(base.started_at) // HOUR + 1) * HOUR
    rec0 = production_like(base, True)
    prev = pass_at(rec0, -1, t0, None)
    with open_ledger(str(path)) as ledger:
        one = _Pass.__new__(_Pass)
        one.s = ShadowSettings.from_knobs({"STATE_DIR": str(work), "DETAIL_DAYS": str(2 / 24),
                                           "RETENTION_DAYS": "366"})
        one.ledger = ledger
        one.loop = types.SimpleNamespace(log=logging.getLogger("bench"), reclaim_more=False,
                                         warned_vacuum=False)
        longest = 0.0
        for i in range(hours * 60):
            rec = pass_at(rec0, i, t0, None)
            rec = dataclasses.replace(rec, comparison=comparison_of(prev, rec, True))
            ledger.record(rec)
            t = time.perf_counter()
            one.retain(rec.started_at)
            longest = max(longest, time.perf_counter() - t)
            prev = rec
        n_hours, n_passes = len(ledger.hours()), len(ledger.passes())
    sizes = table_bytes(path)
    return {"hours_written": hours, "hours_summarised": n_hours, "passes_in_detail": n_passes,
            "ledger_bytes": sum(v for k, v in sizes.items()), "free_bytes": sizes["(free)"],
            "longest_retention_step_s": round(longest, 2)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="1k,11k,100k,100k-groups")
    ap.add_argument("--detail-days", type=float, default=3.0)
    ap.add_argument("--retention-days", type=float, default=366.0)
    ap.add_argument("--steady-matches", type=int, default=200,
                    help="matches a pass for the steady-state year (default 200)")
    ap.add_argument("--sample-100k", type=int, default=10,
                    help="passes written at 100k (default 10)")
    ap.add_argument("--check-hours", type=int, default=0)
    ap.add_argument("--keep", metavar="DIR", help="work in DIR and keep the ledgers")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    work = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="bench-ledger-"))
    work.mkdir(parents=True, exist_ok=True)
    rows, checks = [], []
    try:
        for label in args.sizes.split(","):
            generator, slots, jobs, submitters = SIZES[label]
            t = time.perf_counter()
            snapshot = cached_pool(generator, slots, jobs, submitters)
            gen_s = time.perf_counter() - t
            rec, pass_s = shadow_record(snapshot, work / f"state-{label}")
            passes = 60 if not label.startswith("100k") else args.sample_100k
            for matchlog in (True, False):
                row = measure(label, rec, passes, matchlog, work)
                row.update(generate_s=round(gen_s, 1), shadow_pass_s=round(pass_s, 1),
                           extrapolated=passes < 60, generator=generator)
                rows.append(row)
            if args.check_hours and label == "1k":
                got = check(rec, args.check_hours, work)
                base = next(r for r in rows if r["size"] == "1k" and r["matchlog"])
                got["predicted_bytes"] = (got["passes_in_detail"] * base["bytes_a_pass"]
                                          + got["hours_summarised"]
                                          * base["bytes_a_summarised_hour"]
                                          + base["slot_classes_bytes"])
                checks.append(got)
                if not args.json:
                    print(json.dumps(got), flush=True)
        # a pool whose cycle matched nothing: a match row costs what it does elsewhere
        known = [r["bytes_a_match_row"] for r in rows if r["bytes_a_match_row"]]
        for row in rows:
            per_match = row["bytes_a_match_row"] or (sum(known) / len(known) if known else 0.0)
            steady = (row["bytes_a_pass_without_matches"]
                      + per_match * args.steady_matches * (2 if row["matchlog"] else 1))
            row["year_bytes"] = year_bytes(row, args.detail_days, args.retention_days)
            row["year_bytes_steady"] = year_bytes(row, args.detail_days, args.retention_days,
                                                  steady)
            row["bytes_a_pass_steady"] = steady
            row["detail_days_within_goal"] = detail_days_for(row, GOAL)
            row["detail_days_within_goal_steady"] = detail_days_for(row, GOAL, steady)
            if not args.json:
                print(json.dumps(row), flush=True)
        if args.json:
            print(json.dumps({"rows": rows, "checks": checks}, indent=2))
        else:
            print()
            print(f"| pool | matches a pass | bytes a pass (MatchLog / without) | a match row "
                  f"| a summarised hour | a year: {args.detail_days:g} days of detail, "
                  f"hourly to {min(args.retention_days, 365):g} days | detail days within "
                  f"5 GB |")
            print("|---|---|---|---|---|---|---|")
            for r in (r for r in rows if r["matchlog"]):
                bare = next(x for x in rows if x["size"] == r["size"] and not x["matchlog"])
                label = r["size"] + (f" (extrapolated from {r['passes_written']} passes)"
                                     if r["extrapolated"] else "")
                per_match = (f"{r['bytes_a_match_row']:.0f} B" if r["bytes_a_match_row"]
                             else "-")
                print(f"| {label} | {r['matches_a_pass']:,} "
                      f"| {r['bytes_a_pass'] / 1024:,.0f} KiB / {bare['bytes_a_pass'] / 1024:,.0f} KiB "
                      f"| {per_match} | {r['bytes_a_summarised_hour'] / 1024:,.0f} KiB "
                      f"| {r['year_bytes'] / 1e9:,.2f} GB ({r['year_bytes_steady'] / 1e9:,.2f} GB "
                      f"at {args.steady_matches} matches a pass) "
                      f"| {r['detail_days_within_goal']:.1f} "
                      f"({r['detail_days_within_goal_steady']:.0f}) |")
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
