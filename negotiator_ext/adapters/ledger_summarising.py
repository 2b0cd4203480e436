"""Keeping the ledger bounded: `prune` past the retention, and `summarise` each whole
hour's passes into one hourly summary (what it keeps: adapters/ledger_summaries.py), and
the summaries read back, as `Ledger`'s methods (`_Summarising`, a base of
`adapters.ledger.Ledger`). See adapters/ledger.py."""

from __future__ import annotations

import json
import statistics
from typing import Any, Sequence

from ..core.records import Comparison, GroupObs, SubmitterObs
from . import ledger_digests
from .ledger_rows import _dumps, _q, _record_of
from .ledger_schema import _CHILD_TABLES
from .ledger_summaries import (_GROUP_AGG, _SUBMITTER_AGG, HOUR, _aggregate,
                               _comparisons_summary, _cycles_summary, _hour_comparison,
                               _hour_header, _hour_of, _intervals, _merge_counts, _Obs,
                               _pass_time, _reasons_of, _top_reasons)


class _Summarising:
    # -- retention and export

    def prune(self, older_than: float) -> int:
        """Delete the passes that started before `older_than` with all their rows, and the
        hourly summaries of hours that ended by then, in one transaction; the number of
        passes and hours deleted. Adjustments are never deleted."""
        with self._guard("nothing was pruned"), self._db.write():
            n = self._delete_passes("started_at < ?", (older_than,))
            return n + self._delete_hours("hour <= ?", (older_than - HOUR,))

    def _delete_passes(self, where: str, params: Sequence[Any]) -> int:
        """Delete the passes `where` selects with every row they carry (inside the caller's
        write transaction); how many."""
        sub = f"(SELECT uuid FROM passes WHERE {where})"
        for table, (key, _count) in _CHILD_TABLES.items():
            self._db.execute(f"DELETE FROM {_q(table)} WHERE {key} IN {sub}", params)
        self._db.execute(f"DELETE FROM slot_classes WHERE pass_uuid IN {sub}", params)
        if self._db.has_table(ledger_digests.TABLE):
            self._db.execute(f"DELETE FROM {ledger_digests.TABLE} WHERE pass_uuid IN {sub}",
                             params)
        return int(self._db.execute(f"DELETE FROM passes WHERE {where}", params).rowcount or 0)

    def _delete_hours(self, where: str, params: Sequence[Any]) -> int:
        sub = f"(SELECT id FROM hours WHERE {where})"
        for table in ("hour_submitters", "hour_groups"):
            self._db.execute(f"DELETE FROM {table} WHERE hour_id IN {sub}", params)
        return int(self._db.execute(f"DELETE FROM hours WHERE {where}", params).rowcount or 0)

    # -- hourly summaries

    def summarise(self, before: float, *, max_hours: int | None = None) -> int:
        """Replace the passes of each whole hour that ended by `before` with one hourly
        summary (`hours`, `hour_submitters`, `hour_groups`), oldest hour first, pool by
        pool, each hour in its own transaction (so a reader or another writer waits for
        one hour at most); at most `max_hours` of them. Returns how many hours were
        summarised. Passes that reach an hour summarised before (a clock that went back,
        a late replay) are folded into its summary. What a summary keeps: see
        `_SUBMITTER_AGG`, `_GROUP_AGG` and `_hour_header`; the match rows, the real
        cycles and comparisons one by one, and the slot classes are not kept."""
        cutoff = _hour_of(before)
        done = 0
        while max_hours is None or done < max_hours:
            with self._guard(f"{done} hour(s) summarised, then stopped"), self._db.write():
                self._db.lock_for_summary()
                rows = self._db.execute(
                    "SELECT pool, MIN(started_at) FROM passes WHERE started_at < ? "
                    "GROUP BY pool", (cutoff,)).fetchall()
                if not rows:
                    break
                pool, first = min(rows, key=lambda r: (float(r[1]), str(r[0])))
                self._summarise_hour(str(pool), _hour_of(float(first)))
            done += 1
        return done

    def _summarise_hour(self, pool: str, hour: int) -> None:
        """One (pool, hour): its passes into its summary (merged with the one already
        there), then deleted. Inside the caller's write transaction."""
        where, params = "pool = ? AND started_at >= ? AND started_at < ?", (pool, hour,
                                                                            hour + HOUR)
        heads = self._query(f"SELECT * FROM passes WHERE {where} ORDER BY started_at, id",
                            params)
        complete = sorted((h for h in heads if h["status"] == "complete"),
                          key=lambda h: (_pass_time(h), float(h["started_at"]), h["id"]))
        # the pool's complete passes from this hour on: the median interval, and the
        # first pass after the hour (what the hour's last pass stands until)
        later = sorted((float(t), float(s)) for t, s in self._db.execute(
            "SELECT COALESCE(snapshot_time, started_at), started_at FROM passes "
            "WHERE pool = ? AND status = 'complete' AND started_at >= ?", (pool, hour)))
        gaps = [b[0] - a[0] for a, b in zip(later, later[1:])]
        median = statistics.median(gaps) if gaps else 0.0
        after = min((t for t, s in later if s >= hour + HOUR), default=None)
        times = [_pass_time(h) for h in complete]
        intervals = _intervals(times, after, median)
        seconds = sum(intervals)
        weights = intervals if seconds > 0 else [1.0] * len(complete)
        weight_of = {h["uuid"]: (w, t) for h, w, t in zip(complete, weights, times)}
        old = self._query("SELECT * FROM hours WHERE pool = ? AND hour = ?", (pool, hour))
        old = old[0] if old else None
        total = sum(weights)
        subs: dict[str, list[_Obs]] = {}
        grps: dict[str, list[_Obs]] = {}
        if old is not None:
            # the hour summarised before, as one more observation of each principal
            o_seconds, o_complete = float(old["seconds"]), int(old["complete"])
            o_weight = o_seconds if seconds > 0 or o_seconds > 0 else float(o_complete)
            if seconds == 0 and o_seconds > 0:      # the new passes weigh nothing then
                weight_of = {u: (0.0, t) for u, (_w, t) in weight_of.items()}
                total = 0.0
            total += o_weight
            o_time = float(old["last_started"] or hour)
            for table, into in (("hour_submitters", subs), ("hour_groups", grps)):
                for r in self._query(f"SELECT * FROM {table} WHERE hour_id = ? ORDER BY id",
                                     (old["id"],)):
                    share = int(r["passes"]) / o_complete if o_complete else 1.0
                    into.setdefault(r["name"], []).append(
                        _Obs(r, o_weight, o_weight * share, o_time, int(r["passes"])))
        sub = f"(SELECT uuid FROM passes WHERE {where} AND status = 'complete')"
        for table, into in (("submitters", subs), ('"groups"', grps)):
            for r in self._query(f"SELECT * FROM {table} WHERE pass_uuid IN {sub} ORDER BY id",
                                 params):
                w, t = weight_of[r["pass_uuid"]]
                into.setdefault(r["name"], []).append(_Obs(r, w, w, t, 1))
        sub_rows = [{"name": n, **_aggregate(obs, _SUBMITTER_AGG, total)}
                    for n, obs in subs.items()]
        grp_rows = [{"name": n, **_aggregate(obs, _GROUP_AGG, total)} for n, obs in grps.items()]
        for r in sub_rows:
            if r["is_group"] is not None:
                r["is_group"] = int(bool(r["is_group"]))
        uuids = [h["uuid"] for h in heads]
        cycles = self._query(f"SELECT * FROM real_cycles WHERE first_pass IN "
                             f"(SELECT uuid FROM passes WHERE {where})", params)
        comps = [_record_of(Comparison, r) for r in self._query(
            f"SELECT * FROM comparisons WHERE pass_uuid IN (SELECT uuid FROM passes "
            f"WHERE {where}) ORDER BY id", params)]
        started = [float(h["started_at"]) for h in complete]
        pool_weights = [(float(h["pool_weight"]), weight_of[h["uuid"]][0]) for h in complete
                        if h.get("pool_weight") is not None]
        row: dict[str, Any] = {
            "pool": pool, "hour": hour, "passes": len(heads), "complete": len(complete),
            "partial": sum(1 for h in heads if h["status"] == "partial"),
            "failed": sum(1 for h in heads if h["status"] == "failed"),
            "seconds": seconds, "first_started": min(started, default=None),
            "last_started": max(started, default=None),
            "shadow_matches": sum(int(h["n_shadow_matches"] or 0) for h in heads),
            "real_matches": sum(int(h["n_real_matches"] or 0) for h in heads),
            "newest_real_cycle": max([int(h["real_cycle_time"]) for h in heads
                                      if h.get("real_cycle_time") is not None]
                                     + [int(c["time"]) for c in cycles], default=None),
            "reasons": _reasons_of(heads), "real_cycles": _cycles_summary(cycles),
            "comparisons": _comparisons_summary(comps)}
        means = {}
        for col in ("shadow_duration", "capture_duration"):
            vals = [float(h[col]) for h in heads if h.get(col) is not None]
            means[col] = [sum(vals), len(vals)]
        if old is not None:
            n_old = int(old["passes"])
            for k in ("passes", "complete", "partial", "failed", "shadow_matches",
                      "real_matches"):
                row[k] += int(old[k])
            row["seconds"] += float(old["seconds"])
            for k, pick in (("first_started", min), ("last_started", max),
                            ("newest_real_cycle", max)):
                vals = [v for v in (row[k], old[k]) if v is not None]
                row[k] = pick(vals) if vals else None
            for k in ("reasons", "real_cycles", "comparisons"):
                row[k] = _merge_counts(json.loads(old[k] or "{}"), row[k])
            for col in ("shadow_duration", "capture_duration"):
                if old[col] is not None:
                    means[col] = [means[col][0] + float(old[col]) * n_old, means[col][1] + n_old]
            if old["pool_weight"] is not None:
                pool_weights.append((float(old["pool_weight"]), o_weight))
        for col, (s, n) in means.items():
            row[col] = s / n if n else None
        pw = sum(w for _, w in pool_weights)
        row["pool_weight"] = (sum(v * w for v, w in pool_weights) / pw if pw > 0 else
                              sum(v for v, _ in pool_weights) / len(pool_weights)
                              if pool_weights else None)
        row["reasons"] = _top_reasons(row["reasons"])
        for k in ("reasons", "real_cycles", "comparisons"):
            row[k] = _dumps(row[k]) if row[k] else None
        row.update(n_submitters=len(sub_rows), n_groups=len(grp_rows))
        if old is not None:
            self._delete_hours("id = ?", (old["id"],))
        self._insert_rows("hours", [row])
        hour_id = self._db.execute("SELECT id FROM hours WHERE pool = ? AND hour = ?",
                                   (pool, hour)).fetchall()[0][0]
        for table, rows_ in (("hour_submitters", sub_rows), ("hour_groups", grp_rows)):
            if rows_:
                cols = list(rows_[0])
                self._insert_rows(table, [(hour_id, *(r[c] for c in cols)) for r in rows_],
                                  ["hour_id", *cols])
        if uuids:
            self._delete_passes(where, params)

    def hours(self, pool: str | None = None, since: float | None = None,
              until: float | None = None, complete_only: bool = False
              ) -> list[tuple[dict, list[SubmitterObs], list[GroupObs]]]:
        """The hourly summaries of the hours that start in [since, until) (only those with
        a complete pass: `complete_only`), oldest first, each as a pass header
        (`_hour_header`) with its submitters and groups: their figures aggregated over
        the hour's complete passes (`_SUBMITTER_AGG`, `_GROUP_AGG`)."""
        conds, params = [], []
        for cond, value in (("pool = ?", pool), ("hour >= ?", since), ("hour < ?", until)):
            if value is not None:
                conds.append(cond)
                params.append(value)
        if complete_only:
            conds.append("complete > 0")
        where = " WHERE " + " AND ".join(conds) if conds else ""
        with self._guard(), self._db.read():
            heads = self._query(f"SELECT * FROM hours{where} ORDER BY hour, id", params)
            subs = self._query(f"SELECT * FROM hour_submitters WHERE hour_id IN "
                               f"(SELECT id FROM hours{where}) ORDER BY id", params)
            grps = self._query(f"SELECT * FROM hour_groups WHERE hour_id IN "
                               f"(SELECT id FROM hours{where}) ORDER BY id", params)
        s_by: dict[Any, list[dict]] = {}
        g_by: dict[Any, list[dict]] = {}
        for rows, by in ((subs, s_by), (grps, g_by)):
            for r in rows:
                by.setdefault(r["hour_id"], []).append(r)
        out = []
        for h in heads:
            s_rows, g_rows = s_by.get(h["id"], []), g_by.get(h["id"], [])
            header = _hour_header(h, {r["name"]: int(r["passes"]) for r in s_rows},
                                  {r["name"]: int(r["passes"]) for r in g_rows})
            out.append((header, [_record_of(SubmitterObs, r) for r in s_rows],
                        [_record_of(GroupObs, r) for r in g_rows]))
        return out

    def hour_comparisons(self, pool: str | None = None, since: float | None = None,
                         until: float | None = None) -> list[tuple[dict, Comparison]]:
        """Each summarised hour's comparisons as one (header, Comparison): see
        `_hour_comparison`."""
        out = []
        for header, _s, _g in self.hours(pool, since, until):
            comp = _hour_comparison(header["uuid"], header["summary"]["comparisons"])
            if comp is not None:
                out.append((header, comp))
        return out
