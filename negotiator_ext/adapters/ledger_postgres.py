"""The ledger's PostgreSQL backend: one psycopg 3 connection, explicit transactions,
advisory locks, and its errors as `LedgerError`s. See adapters/ledger.py."""

from __future__ import annotations

import re
from contextlib import contextmanager
from typing import Any, Iterator, Sequence

from .ledger_errors import LedgerError
from .ledger_rows import _one_line, _q
from .ledger_schema import (_PG_COMPARISON_LOCK, _PG_MIGRATION_LOCK, _PG_SUMMARY_LOCK,
                            TABLES)
from .ledger_urls import _mask


class _Postgres:
    """One psycopg 3 connection in autocommit mode; transactions are explicit."""

    id_type = "BIGSERIAL PRIMARY KEY"

    def __init__(self, url: str, lock_timeout: float, create: bool, read_only: bool = False):
        self.source = _mask(url)
        self.lock_timeout = lock_timeout
        self.read_only = read_only
        try:
            import psycopg
        except ImportError as exc:
            raise LedgerError(self.source, "a PostgreSQL ledger needs psycopg: "
                                           "pip install 'negotiator-ext[postgres]'") from exc
        self.psycopg = psycopg
        self.errors = (psycopg.Error,)
        kwargs: dict[str, Any] = {"autocommit": True}
        if "connect_timeout" not in url:
            kwargs["connect_timeout"] = 10
        try:
            self.conn = psycopg.connect(url, **kwargs)
        except psycopg.Error as exc:
            raise self.ledger_error(exc) from exc
        try:
            # 0 means "wait for ever" to PostgreSQL; 1 ms is the nearest to "do not wait"
            self.conn.execute("SELECT set_config('lock_timeout', %s, false)",
                              (f"{max(1, int(lock_timeout * 1000))}ms",))
            if read_only:
                self.conn.execute("SELECT set_config('default_transaction_read_only', 'on', "
                                  "false)")
        except psycopg.Error as exc:
            self.conn.close()
            raise self.ledger_error(exc) from exc

    @staticmethod
    def _sql(sql: str) -> str:
        return sql.replace("?", "%s")

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Any:
        return self.conn.execute(self._sql(sql), tuple(params))

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        with self.conn.cursor() as cur:
            cur.executemany(self._sql(sql), rows)

    @contextmanager
    def write(self) -> Iterator[None]:
        with self.conn.transaction():
            yield

    @contextmanager
    def read(self) -> Iterator[None]:
        with self.conn.transaction():
            self.conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
            yield

    def lock_for_migration(self) -> None:
        self.conn.execute("SELECT pg_advisory_xact_lock(%s)", (_PG_MIGRATION_LOCK,))

    def cannot_write(self) -> str | None:
        return None                             # the server says so at the first write

    def lock_for_comparison(self) -> None:
        # READ COMMITTED: the statements after the lock see what its last holder committed
        self.conn.execute("SELECT pg_advisory_xact_lock(%s)", (_PG_COMPARISON_LOCK,))

    def lock_for_summary(self) -> None:
        # two loops on one ledger: the second finds the hour summarised by the first
        self.conn.execute("SELECT pg_advisory_xact_lock(%s)", (_PG_SUMMARY_LOCK,))

    def has_table(self, name: str) -> bool:
        row = self.conn.execute("SELECT to_regclass(%s)", (name,)).fetchone()
        return row is not None and row[0] is not None

    def foreign_tables(self) -> list[str]:
        return []                               # a database is shared with others: fine

    def _tables(self) -> list[str]:
        """The ledger's tables that exist (in the search path's schema)."""
        return [t for t in (*TABLES, "slot_classes", "pool_digests") if self.has_table(t)]

    def space(self) -> dict[str, Any]:
        tables = {t: int(self.conn.execute("SELECT pg_total_relation_size(to_regclass(%s))",
                                           (_q(t),)).fetchone()[0]) for t in self._tables()}
        return {"bytes": sum(tables.values()), "tables": tables}

    def reclaim(self, max_pages: int) -> dict[str, Any]:
        # outside any transaction (autocommit): VACUUM cannot run in one
        self.conn.execute("VACUUM " + ", ".join(_q(t) for t in self._tables()))
        return {"shrinks": True}

    def vacuum(self) -> dict[str, Any]:
        before = self.space()["bytes"]
        self.conn.execute("VACUUM FULL " + ", ".join(_q(t) for t in self._tables()))
        return {"before": before, "after": self.space()["bytes"]}

    def ledger_error(self, exc: BaseException, action: str | None = None) -> LedgerError:
        state = getattr(exc, "sqlstate", None) or ""
        text = _one_line(str(exc))
        # transient: a lock or a conflict, a connection lost or refused, a server
        # starting or shutting down, too many connections
        transient = (state in ("55P03", "40P01", "40001", "53300", "57P01", "57P02", "57P03")
                     or state.startswith("08"))
        if state in ("55P03", "40P01"):
            msg = f"is locked by another process (waited {self.lock_timeout:g} s)"
        elif state == "53100" or state.startswith("53"):
            msg = f"is full (the database server is out of space or resources: {text})"
            # a full disk or memory may have room again later: tried again
            transient = transient or state in ("53100", "53200")
        elif state in ("XX001", "XX002"):
            msg = f"is corrupt ({text})"
        elif state == "42501":
            msg = f"permission denied ({text})"
        elif state == "25006":
            msg = f"cannot be written (read-only transaction: {text})"
        elif not state and isinstance(exc, self.psycopg.OperationalError):
            msg = f"cannot connect ({text})"
            # a server down or unreachable, not refused credentials or a missing database
            transient = not re.search(r"authentication|pg_hba|password|does not exist|"
                                      r"permission denied|ssl", text, re.I)
        else:
            msg = f"database error: {text}"
        return LedgerError(self.source, _one_line(msg + (f"; {action}" if action else "")),
                           transient=transient)

    def close(self) -> None:
        self.conn.close()
