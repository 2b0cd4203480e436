"""The ledger's SQLite backend: one sqlite3 connection, WAL and synchronous=FULL,
explicit transactions, and its errors as `LedgerError`s. See adapters/ledger.py."""

from __future__ import annotations

import os
import sqlite3
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator, Sequence
from urllib.parse import quote

from .ledger_errors import LedgerError
from .ledger_rows import _one_line


# a SQLite write that fails with this little space left on its file system: the file
# system is full (bytes)
FULL_BELOW = 2**20


class _SQLite:
    """One sqlite3 connection in autocommit mode; transactions are explicit.

    A new ledger's directory is made with it, parents and all (a new state directory's
    default ledger, a --ledger path the admin chose); one that cannot be made is a
    LedgerError naming it. `read_only`: `mode=ro`, nothing made (`_connect_read_only`)."""

    id_type = "INTEGER PRIMARY KEY AUTOINCREMENT"
    WAL_LIMIT = 64 * 2**20

    def __init__(self, path: str, lock_timeout: float, create: bool, read_only: bool = False):
        self.source = path
        self.lock_timeout = lock_timeout
        self.read_only = read_only
        p = Path(path).expanduser()
        if p.is_dir():
            raise LedgerError(path, "is a directory, not a ledger file")
        if not p.exists():
            if not create:
                raise LedgerError(path, "no ledger here (the file does not exist)")
            try:
                p.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise LedgerError(path, f"cannot create the directory {p.parent}: "
                                        f"{exc.strerror or exc}") from exc
        self.errors: tuple[type[BaseException], ...] = (sqlite3.Error,)
        if read_only:
            self.conn = self._connect_read_only(p)
        else:
            try:
                # file:// + an absolute path: a path starting with // is no URI authority
                self.conn = sqlite3.connect(
                    f"file://{quote(str(p.absolute()))}?mode={'rwc' if create else 'rw'}",
                    uri=True, timeout=lock_timeout, isolation_level=None)
            except sqlite3.Error as exc:
                raise self.ledger_error(exc) from exc
        try:
            self.conn.execute(f"PRAGMA busy_timeout = {max(0, int(lock_timeout * 1000))}")
            if not read_only:
                if not self.conn.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchall():
                    # a new ledger: free pages can be given back a step at a time
                    # (`reclaim`); only possible before its first table
                    self.conn.execute("PRAGMA auto_vacuum = INCREMENTAL")
                self.conn.execute("PRAGMA journal_mode = WAL").fetchall()
                self.conn.execute("PRAGMA synchronous = FULL")
                # the write-ahead log is cut back to this after a checkpoint (a summarised
                # hour's deletions would otherwise leave it at their size)
                self.conn.execute(f"PRAGMA journal_size_limit = {self.WAL_LIMIT}").fetchall()
        except sqlite3.Error as exc:
            self.conn.close()
            raise self.ledger_error(exc) from exc

    def _connect_read_only(self, p: Path) -> sqlite3.Connection:
        """A connection that cannot write. Where this user may write the file and its
        directory: `mode=rw` with `PRAGMA query_only`, so that, the last to close, it
        removes the `-wal` and `-shm` files reading made beside the ledger (a `mode=ro`
        connection leaves them: `ledger show` after a replay left two files). Else
        `mode=ro`: SQLite reads a WAL ledger through its `-shm` file, which it creates
        beside the ledger when missing; where it cannot (a read-only file system, a
        directory this user may not write) and no write-ahead log is left (its last
        writer closed it: the file alone is the whole ledger), the file is read as
        immutable, as it then is: nobody can be writing it there."""
        if p.is_file() and os.access(p, os.W_OK) and os.access(p.parent, os.W_OK):
            conn = None
            try:
                conn = sqlite3.connect(f"file://{quote(str(p.absolute()))}?mode=rw", uri=True,
                                       timeout=self.lock_timeout, isolation_level=None)
                conn.execute("PRAGMA query_only = 1").fetchall()
                return self._probe(conn)
            except sqlite3.Error:
                if conn is not None:
                    conn.close()        # (_probe closed it already: closing again is harmless)
        uri = f"file://{quote(str(p.absolute()))}?mode=ro"
        try:
            return self._probe(sqlite3.connect(uri, uri=True, timeout=self.lock_timeout,
                                               isolation_level=None))
        except sqlite3.Error as exc:
            code = getattr(exc, "sqlite_errorcode", None)
            if not isinstance(code, int) or code & 0xFF not in (8, 14):   # READONLY, CANTOPEN
                raise self.ledger_error(exc) from exc
            wal = p.with_name(p.name + "-wal")
            if wal.exists() and wal.stat().st_size > 0:
                raise LedgerError(self.source, f"cannot be read here: its write-ahead log "
                                               f"{wal.name} holds writes not in the file yet, "
                                               f"and reading it needs {p.name}-shm created "
                                               "beside it, which this directory does not "
                                               "allow") from exc
        try:
            return self._probe(sqlite3.connect(uri + "&immutable=1", uri=True,
                                               timeout=self.lock_timeout, isolation_level=None))
        except sqlite3.Error as exc:
            raise self.ledger_error(exc) from exc

    @staticmethod
    def _probe(conn: sqlite3.Connection) -> sqlite3.Connection:
        """`conn` once a first read worked (SQLite opens the file, and a WAL's -shm,
        lazily); closed when it did not."""
        try:
            conn.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchall()
        except sqlite3.Error:
            conn.close()
            raise
        return conn

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Any:
        return self.conn.execute(sql, params)

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        self.conn.executemany(sql, rows)

    @contextmanager
    def write(self) -> Iterator[None]:
        """One write transaction, the write lock taken up front (waits lock_timeout)."""
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            yield
            self.conn.execute("COMMIT")
        except BaseException:
            if self.conn.in_transaction:
                try:
                    self.conn.execute("ROLLBACK")
                except sqlite3.Error:
                    pass                        # SQLite rolled back already
            raise

    @contextmanager
    def read(self) -> Iterator[None]:
        """Several reads on one snapshot of the ledger."""
        self.conn.execute("BEGIN")
        try:
            yield
        finally:
            if self.conn.in_transaction:
                self.conn.execute("ROLLBACK")

    def lock_for_migration(self) -> None:
        pass                                    # BEGIN IMMEDIATE is the lock

    def lock_for_comparison(self) -> None:
        pass                                    # BEGIN IMMEDIATE is the lock

    def lock_for_summary(self) -> None:
        pass                                    # BEGIN IMMEDIATE is the lock

    def has_table(self, name: str) -> bool:
        return bool(self.conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND "
                                      "name = ?", (name,)).fetchall())

    def foreign_tables(self) -> list[str]:
        return [r[0] for r in self.conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")]

    def _pragma(self, name: str) -> int:
        return int(self.conn.execute(f"PRAGMA {name}").fetchone()[0])

    def space(self) -> dict[str, Any]:
        p = Path(self.source).expanduser()
        wal = p.with_name(p.name + "-wal")
        return {"bytes": p.stat().st_size, "wal_bytes": wal.stat().st_size if wal.exists() else 0,
                "page_size": self._pragma("page_size"),
                "pages": self._pragma("page_count"), "free_pages": self._pragma("freelist_count"),
                "auto_vacuum": ("none", "full", "incremental")[self._pragma("auto_vacuum")]}

    def reclaim(self, max_pages: int) -> dict[str, Any]:
        free = self._pragma("freelist_count")
        if self._pragma("auto_vacuum") != 2:
            return {"shrinks": False, "free_pages": free}
        pages = min(free, max(0, int(max_pages)))
        if pages:
            # executescript: sqlite3's execute steps this pragma once (one page)
            self.conn.executescript(f"PRAGMA incremental_vacuum({pages});")
        self.conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
        return {"shrinks": True, "pages_freed": free - self._pragma("freelist_count"),
                "free_pages": self._pragma("freelist_count")}

    def vacuum(self) -> dict[str, Any]:
        before = self.space()
        self.conn.execute("PRAGMA auto_vacuum = INCREMENTAL")
        self.conn.execute("VACUUM")
        self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
        return {"before": before["bytes"], "after": self.space()["bytes"]}

    def ledger_error(self, exc: BaseException, action: str | None = None) -> LedgerError:
        code = getattr(exc, "sqlite_errorcode", None)
        base = code & 0xFF if isinstance(code, int) else None
        text = str(exc)
        low = text.lower()
        transient = False
        free = self._free_bytes() if base in (10, 13) or "is full" in low else None
        if base in (5, 6) or "database is locked" in low or "database table is locked" in low:
            msg = f"is locked by another process (waited {self.lock_timeout:g} s)"
            transient = True
        elif free is not None and free < FULL_BELOW:
            # a full file system: SQLITE_FULL from a write, or an I/O error from the
            # write-ahead log's -shm file, which cannot grow (SQLITE_IOERR_SHMSIZE); it
            # may well have room again later (the loop tries again)
            msg = (f"is full: no space left on the file system that holds it "
                   f"({free // 1024} KiB free)")
            transient = True
        elif base == 13 or "is full" in low:
            msg = "is full (the database size limit reached, or no space left on the disk)"
        elif base == 26 or "not a database" in low:
            msg = "is not a ledger database (corrupt, or not an SQLite file)"
        elif base == 11 or "malformed" in low or "corrupt" in low:
            msg = f"is corrupt ({text})"
        elif base == 8 or "readonly" in low:
            msg = "cannot be written (read-only file, directory or file system)"
        elif base == 14 or "unable to open" in low:
            # a ledger there whose file or directory cannot be written (a read-only file
            # system: SQLite cannot make its write-ahead log's files beside it)
            why = (self.cannot_write() if not self.read_only
                   and Path(self.source).expanduser().is_file() else None)
            msg = (f"cannot be opened for writing: {why}" if why else
                   "cannot be opened (no such directory, or no permission to read or create it)")
        elif base in (3, 23):
            msg = f"permission denied ({text})"
        elif base == 10:
            msg = f"I/O error ({text})"
        else:
            msg = f"database error: {text}"
        return LedgerError(self.source, _one_line(msg + (f"; {action}" if action else "")),
                           transient=transient)

    def close(self) -> None:
        self.conn.close()

    def _free_bytes(self) -> int | None:
        """The space left on the file system holding the ledger (None: not known)."""
        try:
            st = os.statvfs(Path(self.source).expanduser().absolute().parent)
        except OSError:
            return None
        return st.f_bavail * st.f_frsize

    def cannot_write(self) -> str | None:
        """Why this ledger cannot be written (None: it can): SQLite opens a file it may
        not write read-only without a word, and fails only at the first write."""
        p = Path(self.source).expanduser()
        for what, where in (("the file", p), ("its directory", p.parent)):
            if not os.access(where, os.W_OK):
                return f"{what} cannot be written (read-only file system or permissions)"
        return None
