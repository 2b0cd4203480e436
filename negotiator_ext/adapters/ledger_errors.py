"""The ledger's one kind of error (`LedgerError`), and the one `open_ledger` takes as
"open it for writing first" (`_OlderSchema`). See adapters/ledger.py."""

from __future__ import annotations

from typing import Any

from ..errors import InputError


class LedgerError(InputError):
    """The ledger cannot be opened, read or written; `source` is the ledger's URL or path
    (a PostgreSQL password masked).

    `transient`: the same operation may well succeed later without anybody acting (the
    ledger locked by another process beyond the lock timeout; a PostgreSQL server that
    cannot be reached or is out of disk; the file system holding an SQLite ledger full:
    other files may be removed, a log rotated). False for lasting conditions: the ledger
    cannot be opened or created, is read-only, corrupt, not a ledger, of a newer schema,
    at its size limit (max_page_count), a bad URL."""

    def __init__(self, source: str, message: str, *, transient: bool = False, **kw: Any):
        super().__init__(source, message, **kw)
        self.transient = transient


class _OlderSchema(LedgerError):
    """A ledger opened read-only is of an older schema (`open_ledger` opens it for
    writing, to bring it up to date)."""
