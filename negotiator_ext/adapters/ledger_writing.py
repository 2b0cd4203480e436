"""Writing passes to the ledger: one `PassRecord` in one transaction (its header row,
the child rows, the comparison once, the slot classes and digests), as `Ledger`'s methods
(`_Writing`, a base of `adapters.ledger.Ledger`). See adapters/ledger.py."""

from __future__ import annotations

from typing import Any, Sequence

from ..core.records import PassRecord
from . import ledger_digests
from .ledger_rows import (_PASS_KINDS, _decode_classes, _encode, _encode_classes, _q, _row_of,
                          _values_of, _without_comparison)
from .ledger_schema import _PASS_HEADER


class _Writing:
    # -- writing passes

    def record_pass(self, rec: PassRecord) -> bool:
        """Write the pass with everything it carries in one transaction (see `record`).
        False (and nothing written) when a pass with this uuid is already recorded."""
        return self.record(rec) is not None

    def record(self, rec: PassRecord) -> PassRecord | None:
        """Write the pass with everything it carries in one transaction; the pass as
        recorded, or None (and nothing written) when a pass with this uuid is already
        recorded. Real cycles (pool, time) recorded by an earlier pass are not written
        again; the header counts those written. A comparison of an earlier pass that
        another pass compared already is not written (compare-once, decided under the
        write lock): the pass is recorded without it (`_without_comparison`)."""
        with self._guard(f"pass {rec.uuid} not recorded"):
            with self._db.write():
                return self._write_pass(rec)

    def record_passes(self, recs: Sequence[PassRecord]) -> int:
        """Several passes in one transaction (the simulator writes a batch of cycles at a
        time: one commit, not one per cycle); how many were new. All or none."""
        with self._guard(f"{len(recs)} passes not recorded"):
            with self._db.write():
                return sum(self._write_pass(rec) is not None for rec in recs)

    def _write_pass(self, rec: PassRecord) -> PassRecord | None:
        """One pass's rows, inside the caller's write transaction: the pass as recorded,
        None if already recorded."""
        if rec.comparison is not None:
            self._db.lock_for_comparison()
            if self._db.execute("SELECT 1 FROM comparisons WHERE shadow_pass = ?",
                                (rec.comparison.shadow_pass,)).fetchall():
                rec = _without_comparison(rec)
        header = {n: _encode(getattr(rec, n), _PASS_KINDS[n]) for n in _PASS_HEADER}
        header.update(n_real_cycles=0, n_shadow_matches=len(rec.shadow_matches),
                      n_real_matches=len(rec.real_matches),
                      n_submitters=len(rec.submitters), n_groups=len(rec.groups),
                      n_comparisons=1 if rec.comparison is not None else 0)
        cols = list(header)
        # rowcount, not RETURNING: RETURNING needs SQLite 3.35, older than many
        # distributions' (EL8: 3.26); ON CONFLICT needs 3.24
        inserted = self._db.execute(
            f"INSERT INTO passes ({', '.join(_q(c) for c in cols)}) VALUES "
            f"({', '.join('?' for _ in cols)}) ON CONFLICT (uuid) DO NOTHING",
            tuple(header[c] for c in cols)).rowcount
        if inserted != 1:
            return None
        new_cycles = 0
        for cycle in rec.real_cycles:
            row = {"pool": rec.pool, "first_pass": rec.uuid, **_row_of(cycle)}
            rcols = list(row)
            new_cycles += max(0, self._db.execute(
                f"INSERT INTO real_cycles ({', '.join(_q(c) for c in rcols)}) VALUES "
                f"({', '.join('?' for _ in rcols)}) ON CONFLICT (pool, {_q('time')}) "
                "DO NOTHING", tuple(row[c] for c in rcols)).rowcount)
        if new_cycles:
            self._db.execute("UPDATE passes SET n_real_cycles = ? WHERE uuid = ?",
                             (new_cycles, rec.uuid))
        comparison = () if rec.comparison is None else (rec.comparison,)
        for table, items in (("shadow_matches", rec.shadow_matches),
                             ("real_matches", rec.real_matches),
                             ("submitters", rec.submitters),
                             ("groups", rec.groups),
                             ("comparisons", comparison)):
            if items:
                cols, values = _values_of(items)
                self._insert_rows(table, [(rec.uuid, *v) for v in values],
                                  ["pass_uuid", *cols])
        self._keep_slot_classes(rec)
        ledger_digests.keep(self._db, rec.uuid, rec.pool, rec.digest if rec.comparable else None,
                            rec.comparison.shadow_pass if rec.comparison is not None else None)
        return rec

    # slot classes are kept for the newest comparable passes not compared yet (a cache,
    # not a record): one of them is what the next real cycle will be compared with
    SLOT_CLASSES_KEPT = 5

    def _keep_slot_classes(self, rec: PassRecord) -> None:
        if rec.comparison is not None:
            self._db.execute("DELETE FROM slot_classes WHERE pass_uuid = ?",
                             (rec.comparison.shadow_pass,))
        if not (rec.comparable and rec.slot_classes):
            return
        self._db.execute(
            "INSERT INTO slot_classes (pass_uuid, pool, classes) VALUES (?, ?, ?)",
            (rec.uuid, rec.pool, _encode_classes(rec.slot_classes)))
        self._db.execute(
            "DELETE FROM slot_classes WHERE pool = ? AND pass_uuid NOT IN ("
            " SELECT s.pass_uuid FROM slot_classes s JOIN passes p ON p.uuid = s.pass_uuid"
            " WHERE s.pool = ? ORDER BY p.id DESC LIMIT ?)",
            (rec.pool, rec.pool, self.SLOT_CLASSES_KEPT))

    def digest(self, uuid: str) -> dict[str, Any]:
        """The snapshot digest kept for pass `uuid` (empty: none kept;
        adapters/ledger_digests.py)."""
        with self._guard():
            return ledger_digests.read(self._db, uuid)

    def slot_classes(self, uuid: str) -> dict[str, int]:
        """The slot classes recorded with pass `uuid` (empty: none kept)."""
        with self._guard():
            rows = self._db.execute("SELECT classes FROM slot_classes WHERE pass_uuid = ?",
                                    (uuid,)).fetchall()
        return _decode_classes(rows[0][0]) if rows else {}
