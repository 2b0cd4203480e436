"""Where the ledger lives: its URL (a path, sqlite:// or postgresql://) parsed, and a
password masked for messages. See adapters/ledger.py."""

from __future__ import annotations

import os
import re
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from .ledger_errors import LedgerError


def _mask(url: str) -> str:
    """The URL with any password replaced by ***, for messages."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return url
    netloc = parts.netloc
    if parts.password is not None:
        netloc = netloc.replace(":" + parts.password + "@", ":***@", 1)
    query = re.sub(r"(?i)(password=)[^&]*", r"\1***", parts.query)
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


URL_FORMS = ("a file path, sqlite:///relative/path, sqlite:////absolute/path or "
             "postgresql://user@host/db")


def _bad_url(text: str) -> LedgerError:
    return LedgerError(_mask(text) if "@" in text else text,
                       f"unsupported ledger URL: use {URL_FORMS}")


def _meant_absolute(path: str) -> tuple[str, str] | None:
    """For sqlite:///PATH (PATH relative): (what is missing here, what exists from /)
    when /PATH was likely meant, as sqlite:///PATH meant here before the SQLAlchemy
    reading: PATH is not there relative to the current directory but /PATH is, or PATH's
    directory is not there but /PATH's is. None: nothing points that way."""
    rel, absolute = Path(path), Path("/" + path)
    if rel.exists():
        return None
    if absolute.exists():
        return str(rel), str(absolute)
    if not rel.parent.is_dir() and absolute.parent.is_dir():
        return str(rel.parent), str(absolute.parent)
    return None


def parse_url(url: str) -> tuple[str, str]:
    """("sqlite", path) or ("postgresql", url). SQLite URLs follow SQLAlchemy:
    sqlite:///relative/path, sqlite:////absolute/path; also sqlite:PATH. Anything else
    with a scheme, an empty URL or a SQLite URL naming no file is a LedgerError listing
    the accepted forms."""
    text = str(url).strip()
    if not text:
        raise LedgerError("ledger", f"empty ledger URL: use {URL_FORMS}")
    low = text.lower()
    if low.startswith(("postgresql://", "postgres://")):
        return "postgresql", text
    if low.startswith("sqlite:"):
        rest = text[len("sqlite:"):]
        if rest.startswith("//"):
            if not rest.startswith("///"):
                raise _bad_url(text)            # sqlite://host/x, sqlite:// (in memory)
            path = rest[3:]                     # sqlite:///rel -> rel, sqlite:////abs -> /abs
            meant = _meant_absolute(path) if path and not path.startswith("/") else None
            if meant is not None:
                raise LedgerError(text, f"sqlite:/// is a path relative to the current "
                                        f"directory ({os.getcwd()}), where {meant[0]} is "
                                        f"not, but {meant[1]} is: for the absolute path "
                                        f"write sqlite:////{path} (a new ledger here: "
                                        f"sqlite:{path})")
        else:
            path = rest                         # sqlite:rel/path (and sqlite:/abs/path)
        if not path or path.endswith("/"):
            raise _bad_url(text)                # sqlite:, sqlite:///, a directory
        return "sqlite", path
    if re.match(r"^[A-Za-z][A-Za-z0-9+.-]*://", text):
        raise _bad_url(text)
    return "sqlite", text
