"""A command's JSON document as it is printed (`negotiate --json`, `whatif --json`,
`shards --json`): objects and lists indented down to two levels, and each element of a
list on one line of its own, written whole (a match, a submitter, a group row).

At 100,000 matches the indented form of json.dumps costs about 1.5 s (with an indent,
json writes through its pure-Python encoder); one line per row, each written by its C
encoder, about 0.5 s, and a page of 100,000 rows reads as a table. The value is the same
JSON.

`print_document` writes the same text to a stream as it goes, a few thousand rows at a
time, where the whole text (35 MB at 100,000 matches) and its encoded copy would be held
at once at the end of a command whose memory peaks there."""

from __future__ import annotations

import json
from typing import Any, Callable, TextIO

_DEPTH = 2          # levels laid out over lines; a list's elements are always one line each
_ROWS_AT_ONCE = 4096    # a list's rows joined and written together by print_document


def document(doc: Any, sort_keys: bool = False) -> str:
    """`doc` as JSON text (`default=str` for what JSON has no type for, as before)."""
    out: list[str] = []
    _write(doc, 0, out.append, sort_keys)
    return "".join(out)


def print_document(doc: Any, stream: TextIO, sort_keys: bool = False) -> None:
    """`print(document(doc), file=stream)`, written as it is made: no more than a few
    thousand rows of text held at once."""
    _write(doc, 0, stream.write, sort_keys)
    stream.write("\n")


# json.dumps makes an encoder per call when given `default`: one of each kind, kept
_ENCODERS = {k: json.JSONEncoder(default=str, sort_keys=k).encode for k in (False, True)}


def _one_line(value: Any, sort_keys: bool) -> str:
    return _ENCODERS[sort_keys](value)


def _write(value: Any, level: int, emit: Callable[[str], Any], sort_keys: bool) -> None:
    pad = "  " * (level + 1)
    if isinstance(value, dict) and value and level < _DEPTH:
        items = sorted(value.items()) if sort_keys else value.items()
        emit("{")
        first = True
        for k, v in items:
            emit("\n" + pad if first else ",\n" + pad)
            first = False
            emit(json.dumps(k if isinstance(k, str) else _key(k)) + ": ")
            _write(v, level + 1, emit, sort_keys)
        emit("\n" + "  " * level + "}")
    elif isinstance(value, (list, tuple)) and value and level < _DEPTH + 1:
        emit("[\n" + pad)
        between = ",\n" + pad
        for at in range(0, len(value), _ROWS_AT_ONCE):
            if at:
                emit(between)
            emit(between.join(_one_line(v, sort_keys)
                              for v in value[at:at + _ROWS_AT_ONCE]))
        emit("\n" + "  " * level + "]")
    else:
        emit(_one_line(value, sort_keys))


def _key(k: Any) -> str:
    """A key as json.dumps writes a non-string key (numbers, booleans, None)."""
    return next(iter(json.loads(json.dumps({k: 0}))))
