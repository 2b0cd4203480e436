"""Untrusted text made safe to show to people: the one place that decides how.

Submitter, user and group names, slot names, schedd names and job attributes come from
ads anybody in the pool can write (any user picks an accounting group or a name). Raw
control characters in them must never reach a terminal or a page: ESC starts terminal
escape sequences, CR overwrites a line, U+2028/U+2029 break lines, bidi overrides
(U+202E...) reorder what is shown. Every view that produces text for people passes such
strings through `printable`; JSON keeps the true values (json.dumps escapes controls).
"""

from __future__ import annotations

import logging

__all__ = ["printable", "log_text", "escape_char"]


def escape_char(c: str) -> str:
    """One character as its hex escape: \\xNN, \\uNNNN or \\UNNNNNNNN."""
    o = ord(c)
    if o < 0x100:
        return f"\\x{o:02x}"
    if o < 0x10000:
        return f"\\u{o:04x}"
    return f"\\U{o:08x}"


def printable(text: str) -> str:
    """`text` with every character Python does not count as printable written as an
    escape, as repr() writes it but without quotes and always in hex: ESC as \\x1b, CR as
    \\x0d, newline as \\x0a, DEL as \\x7f, C1 controls as \\x80-\\x9f, U+2028 as \\u2028,
    bidi overrides as \\u202e, lone surrogates as \\udcxx. Printable text, also non-ASCII
    (é, 日本), is kept as is; so is the backslash, which keeps the function idempotent
    (printable(printable(s)) == printable(s)) at the price of not telling a literal
    "\\x1b" from an escaped ESC: the JSON output has the true value."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else escape_char(c) for c in text)


def log_text(record, formatter) -> str:
    """A log record's message with control characters escaped (the loop logs names from
    the pool's ads), and its traceback, if one is attached, as it is."""
    text = printable(record.getMessage())
    if record.exc_info:
        text += "\n" + (formatter or logging.Formatter()).formatException(record.exc_info)
    return text
