"""Reading passes from the ledger: headers, their child rows as `core.records`, windows
of passes (with the hourly summaries among them when asked), and the ledger's own check
(`verify`), as `Ledger`'s methods (`_Reading`, a base of `adapters.ledger.Ledger`). See
adapters/ledger.py."""

from __future__ import annotations

import operator
from typing import Any

from ..core.records import (Comparison, GroupObs, MatchEntry, PassRecord, RealCycle, Standing,
                            SubmitterObs)
from .ledger_errors import LedgerError
from .ledger_rows import _all_plain, _fields_of, _header_of, _q, _record_of
from .ledger_schema import _CHILD_TABLES, _COUNTS, _PASS_HEADER
from .ledger_summaries import _in_time, hour_key


class _Reading:
    # -- reading passes

    @staticmethod
    def _where(pool: str | None = None, since: float | None = None, until: float | None = None,
               status: str | None = None, comparable: bool | None = None) -> tuple[str, list[Any]]:
        conds, params = [], []
        for cond, value in (("pool = ?", pool), ("started_at >= ?", since),
                            ("started_at < ?", until), ("status = ?", status),
                            ("comparable = ?", None if comparable is None else int(comparable))):
            if value is not None:
                conds.append(cond)
                params.append(value)
        return (" WHERE " + " AND ".join(conds) if conds else ""), params

    def last_pass(self, pool: str | None = None, *, status: str | None = None,
                  comparable: bool | None = None,
                  captured_by: float | None = None,
                  aligned_cycle: int | None = None) -> dict | None:
        """The newest recorded pass (of `pool`, with `status`, comparable or not, with its
        capture over by `captured_by`: started_at + capture_duration <= captured_by,
        aligned with the real cycle that started at `aligned_cycle`, within a second), or
        None."""
        where, params = self._where(pool=pool, status=status, comparable=comparable)
        if aligned_cycle is not None:
            where += ((" AND" if where else " WHERE")
                      + " aligned_cycle BETWEEN ? AND ?")
            params += [int(aligned_cycle) - 1, int(aligned_cycle) + 1]
        if captured_by is not None:
            where += ((" AND" if where else " WHERE")
                      + " started_at + COALESCE(capture_duration, 0) <= ?")
            params.append(float(captured_by))
        with self._guard():
            rows = self._query(f"SELECT * FROM passes{where} ORDER BY id DESC LIMIT 1", params)
        return _header_of(rows[0]) if rows else None

    def standing(self, pool: str) -> Standing:
        """The newest complete pass's start and the newest comparison of `pool`, with the
        start of the pass that recorded it (for the metrics)."""
        complete = self.last_pass(pool, status="complete")
        where, params = self._where(pool=pool)
        with self._guard():
            rows = self._query(f"SELECT uuid, started_at FROM passes{where}"
                               + (" AND" if where else " WHERE")
                               + " n_comparisons > 0 ORDER BY id DESC LIMIT 1", params)
        comparison = self.comparison(rows[0]["uuid"]) if rows else None
        return Standing(
            last_complete_at=float(complete["started_at"]) if complete else None,
            comparison=comparison,
            comparison_at=float(rows[0]["started_at"]) if comparison is not None else None)

    def passes(self, pool: str | None = None, since: float | None = None,
               until: float | None = None, last: int | None = None,
               summaries: bool = False) -> list[dict]:
        """Pass headers with since <= started_at < until (only the newest `last` of them),
        in the order recorded. `summaries`: with the hourly summaries of the hours that
        start in the period (`hours`) among them, each in its place in time (the newest
        `last` of passes and hours together)."""
        where, params = self._where(pool=pool, since=since, until=until)
        if last is not None:
            with self._guard():
                rows = self._query(f"SELECT * FROM passes{where} ORDER BY id DESC LIMIT ?",
                                   (*params, int(last)))
            heads = [_header_of(r) for r in reversed(rows)]
        else:
            with self._guard():
                heads = [_header_of(r) for r in
                         self._query(f"SELECT * FROM passes{where} ORDER BY id", params)]
        if not summaries:
            return heads
        merged = _in_time([h for h, _s, _g in self.hours(pool, since, until)], heads)
        if last is None:
            return merged
        return merged[-int(last):] if last > 0 else []

    def pools(self) -> list[str]:
        """The pools that have passes recorded, sorted."""
        with self._guard():
            rows = self._db.execute("SELECT DISTINCT pool FROM passes").fetchall()
        return sorted(r[0] for r in rows)

    def _children(self, table: str, uuid: str, cls: type) -> list[Any]:
        with self._guard():
            cur = self._db.execute(f"SELECT * FROM {_q(table)} WHERE pass_uuid = ? ORDER BY id",
                                   (uuid,))
            names = [d[0] for d in cur.description]
            rows = cur.fetchall()
        fields = _fields_of(cls)
        if len(fields) > 1 and _all_plain(fields) and all(f.name in names for f in fields):
            # every field stored as it is (a pass's thousands of matches): read in place
            get = operator.itemgetter(*(names.index(f.name) for f in fields))
            return [cls(*get(r)) for r in rows]
        return [_record_of(cls, dict(zip(names, r))) for r in rows]

    def shadow_matches(self, uuid: str) -> list[MatchEntry]:
        """Our matches in pass `uuid`, in the order recorded."""
        return self._children("shadow_matches", uuid, MatchEntry)

    def real_matches(self, uuid: str) -> list[MatchEntry]:
        """The real (MatchLog) matches recorded by pass `uuid`."""
        return self._children("real_matches", uuid, MatchEntry)

    def submitters(self, uuid: str) -> list[SubmitterObs]:
        return self._children("submitters", uuid, SubmitterObs)

    def groups(self, uuid: str) -> list[GroupObs]:
        return self._children("groups", uuid, GroupObs)

    def real_cycles(self, uuid: str) -> list[RealCycle]:
        """The real cycles first recorded by pass `uuid`, oldest first."""
        with self._guard():
            rows = self._query(f"SELECT * FROM real_cycles WHERE first_pass = ? "
                               f"ORDER BY {_q('time')}, id", (uuid,))
        return [_record_of(RealCycle, r) for r in rows]

    def comparison(self, uuid: str) -> Comparison | None:
        """The comparison recorded by pass `uuid` (its `shadow_pass` is the earlier pass
        whose cycle was compared), or None."""
        rows = self._children("comparisons", uuid, Comparison)
        return rows[0] if rows else None

    def comparisons(self, pool: str | None = None, since: float | None = None,
                    summaries: bool = False) -> list[tuple[dict, Comparison]]:
        """(header of the recording pass, its comparison), in the order recorded.
        `summaries`: with each summarised hour's comparisons as one (`hour_comparisons`),
        in its place in time."""
        where, params = self._where(pool=pool, since=since)
        with self._guard(), self._db.read():
            heads = self._query(f"SELECT * FROM passes{where} ORDER BY id", params)
            comps = self._query(f"SELECT * FROM comparisons WHERE pass_uuid IN "
                                f"(SELECT uuid FROM passes{where})", params)
        by_pass = {c["pass_uuid"]: _record_of(Comparison, c) for c in comps}
        out = [(_header_of(h), by_pass[h["uuid"]]) for h in heads if h["uuid"] in by_pass]
        if not summaries:
            return out
        return _in_time(self.hour_comparisons(pool, since), out, key=lambda x: x[0])

    def window(self, since: float | None, pool: str | None = None, complete_only: bool = True,
               until: float | None = None, summaries: bool = False
               ) -> list[tuple[dict, list[SubmitterObs], list[GroupObs]]]:
        """The passes that started in [since, until) (complete ones only, by default),
        oldest first, each with its submitters and groups: what recommendations and the
        audit read. `summaries`: with the summarised hours that start in the period
        (`hours`; with a complete pass, by default) in their place in time."""
        if summaries:
            return _in_time(self.hours(pool, since, until, complete_only),
                            self.window(since, pool, complete_only, until),
                            key=lambda x: x[0])
        where, params = self._where(pool=pool, since=since, until=until,
                                    status="complete" if complete_only else None)
        with self._guard(), self._db.read():
            heads = self._query(f"SELECT * FROM passes{where} ORDER BY started_at, id", params)
            subs = self._query(f"SELECT * FROM submitters WHERE pass_uuid IN "
                               f"(SELECT uuid FROM passes{where}) ORDER BY id", params)
            grps = self._query(f'SELECT * FROM "groups" WHERE pass_uuid IN '
                               f"(SELECT uuid FROM passes{where}) ORDER BY id", params)
        s_by: dict[str, list[SubmitterObs]] = {}
        for r in subs:
            s_by.setdefault(r["pass_uuid"], []).append(_record_of(SubmitterObs, r))
        g_by: dict[str, list[GroupObs]] = {}
        for r in grps:
            g_by.setdefault(r["pass_uuid"], []).append(_record_of(GroupObs, r))
        return [(_header_of(h), s_by.get(h["uuid"], []), g_by.get(h["uuid"], [])) for h in heads]

    def matches_in(self, since: float | None = None, until: float | None = None,
                   pool: str | None = None, complete_only: bool = True
                   ) -> dict[str, tuple[list[MatchEntry], list[MatchEntry]]]:
        """Our and the real matches of every pass in [since, until), by pass uuid: one
        query per table, not two per pass."""
        where, params = self._where(pool=pool, since=since, until=until,
                                    status="complete" if complete_only else None)
        out: dict[str, tuple[list[MatchEntry], list[MatchEntry]]] = {}
        with self._guard(), self._db.read():
            for side, table in enumerate(("shadow_matches", "real_matches")):
                for r in self._query(f"SELECT * FROM {table} WHERE pass_uuid IN "
                                     f"(SELECT uuid FROM passes{where}) ORDER BY id", params):
                    out.setdefault(r["pass_uuid"], ([], []))[side].append(
                        _record_of(MatchEntry, r))
        return out

    def pass_record(self, uuid: str) -> PassRecord | None:
        """The PassRecord as recorded (its real_cycles: those it recorded first), or None."""
        with self._guard(), self._db.read():
            rows = self._query("SELECT * FROM passes WHERE uuid = ?", (uuid,))
            if not rows:
                return None
            h = _header_of(rows[0])
            return PassRecord(**{n: h[n] for n in _PASS_HEADER},
                              real_cycles=tuple(self.real_cycles(uuid)),
                              shadow_matches=tuple(self.shadow_matches(uuid)),
                              real_matches=tuple(self.real_matches(uuid)),
                              submitters=tuple(self.submitters(uuid)),
                              groups=tuple(self.groups(uuid)),
                              comparison=self.comparison(uuid),
                              slot_classes=self.slot_classes(uuid),
                              digest=self.digest(uuid))

    def check_writable(self, why: str) -> None:
        """LedgerError when the ledger cannot be written; `why` says what needed it."""
        cannot = self._db.cannot_write()
        if self._db.read_only or cannot:
            raise LedgerError(self.source, f"{cannot or 'opened read-only'}: {why}")

    def compared(self, uuid: str) -> bool:
        """Whether some pass already compared pass `uuid`'s cycle with a real cycle (so far:
        `record` decides again, under the write lock)."""
        with self._guard():
            return bool(self._db.execute("SELECT 1 FROM comparisons WHERE shadow_pass = ?",
                                         (uuid,)).fetchall())

    def newest_real_cycle(self, pool: str) -> int | None:
        """The start time of the newest real cycle recorded for `pool` (by a pass, or in a
        summarised hour), or None."""
        with self._guard():
            rows = self._db.execute(f"SELECT MAX({_q('time')}) FROM real_cycles WHERE pool = ?",
                                    (pool,)).fetchall()
            rows += self._db.execute("SELECT MAX(newest_real_cycle) FROM hours WHERE pool = ?",
                                     (pool,)).fetchall()
        times = [int(r[0]) for r in rows if r[0] is not None]
        return max(times) if times else None

    def verify(self) -> list[str]:
        """One line per pass whose child rows do not match its header's counts (empty: every
        recorded pass is whole)."""
        problems = []
        with self._guard(), self._db.read():
            heads = self._query(f"SELECT uuid, {', '.join(_COUNTS)} FROM passes ORDER BY id")
            counts: dict[str, dict[str, int]] = {}
            for table, (key, count) in _CHILD_TABLES.items():
                for uuid, n in self._db.execute(
                        f"SELECT {key}, COUNT(*) FROM {_q(table)} GROUP BY {key}").fetchall():
                    counts.setdefault(uuid, {})[count] = n
            hours = self._query("SELECT id, pool, hour, n_submitters, n_groups FROM hours "
                                "ORDER BY id")
            h_counts: dict[Any, dict[str, int]] = {}
            for table, count in (("hour_submitters", "n_submitters"),
                                 ("hour_groups", "n_groups")):
                for hour_id, n in self._db.execute(
                        f"SELECT hour_id, COUNT(*) FROM {table} GROUP BY hour_id").fetchall():
                    h_counts.setdefault(hour_id, {})[count] = n
        for h in heads:
            have = counts.get(h["uuid"], {})
            for count in _COUNTS:
                if have.get(count, 0) != h[count]:
                    problems.append(f"pass {h['uuid']}: {count} is {h[count]} but "
                                    f"{have.get(count, 0)} rows are recorded")
        for h in hours:
            have = h_counts.get(h["id"], {})
            for count in ("n_submitters", "n_groups"):
                if have.get(count, 0) != h[count]:
                    problems.append(f"hour {hour_key(h['pool'], h['hour'])}: {count} is "
                                    f"{h[count]} but {have.get(count, 0)} rows are recorded")
        return problems
