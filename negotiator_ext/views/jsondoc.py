"""A command's JSON document as it is printed (`negotiate --json`, `whatif --json`,
`shards --json`): objects and lists indented down to two levels, and each element of a
list on one line of its own, written whole (a match, a submitter, a group row).

At 100,000 matches the indented form of json.dumps costs about 1.5 s (with an indent,
json writes through its pure-Python encoder); one line per row, each written by its C
encoder, about 0.5 s, and a page of 100,000 rows reads as a table. The value is the same
JSON."""

from __future__ import annotations

import json
from typing import Any

_DEPTH = 2          # levels laid out over lines; a list's elements are always one line each


def document(doc: Any, sort_keys: bool = False) -> str:
    """`doc` as JSON text (`default=str` for what JSON has no type for, as before)."""
    out: list[str] = []
    _write(doc, 0, out, sort_keys)
    return "".join(out)


# json.dumps makes an encoder per call when given `default`: one of each kind, kept
_ENCODERS = {k: json.JSONEncoder(default=str, sort_keys=k).encode for k in (False, True)}


def _one_line(value: Any, sort_keys: bool) -> str:
    return _ENCODERS[sort_keys](value)


def _write(value: Any, level: int, out: list[str], sort_keys: bool) -> None:
    pad = "  " * (level + 1)
    if isinstance(value, dict) and value and level < _DEPTH:
        items = sorted(value.items()) if sort_keys else value.items()
        out.append("{")
        first = True
        for k, v in items:
            out.append("\n" + pad if first else ",\n" + pad)
            first = False
            out.append(json.dumps(k if isinstance(k, str) else _key(k)) + ": ")
            _write(v, level + 1, out, sort_keys)
        out.append("\n" + "  " * level + "}")
    elif isinstance(value, (list, tuple)) and value and level < _DEPTH + 1:
        out.append("[\n" + pad)
        out.append((",\n" + pad).join(_one_line(v, sort_keys) for v in value))
        out.append("\n" + "  " * level + "]")
    else:
        out.append(_one_line(value, sort_keys))


def _key(k: Any) -> str:
    """A key as json.dumps writes a non-string key (numbers, booleans, None)."""
    return next(iter(json.loads(json.dumps({k: 0}))))
