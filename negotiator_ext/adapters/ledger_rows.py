"""Records as rows and rows as records: how each field of a `core.records` dataclass is
stored (JSON text, 0/1 booleans or as it is), and back; the `passes` header row; slot
classes; quoting and one-line messages. See adapters/ledger.py."""

from __future__ import annotations

import dataclasses
import json
import operator
from typing import Any, Mapping, NamedTuple, Sequence

from ..core.records import Comparison, PassRecord, RealCycle
from .ledger_schema import _PASS_HEADER


def _kind(annotation: Any) -> str:
    """How a dataclass field is stored: "json" (tuples and dicts), "bool" (0/1), "plain"."""
    a = "bool" if annotation is bool else str(annotation)
    if a.startswith(("tuple", "dict")):
        return "json"
    return "bool" if a == "bool" else "plain"


_PASS_TYPES = {f.name: f.type for f in dataclasses.fields(PassRecord)}
_PASS_KINDS = {n: _kind(t) for n, t in _PASS_TYPES.items()}
# which columns of each table hold JSON text / 0-1 booleans (for decoding and export)
_JSON_COLUMNS: dict[str, frozenset[str]] = {
    "passes": frozenset(n for n in _PASS_HEADER if _PASS_KINDS[n] == "json"),
    "real_cycles": frozenset(f.name for f in dataclasses.fields(RealCycle)
                             if _kind(f.type) == "json"),
    "comparisons": frozenset(f.name for f in dataclasses.fields(Comparison)
                             if _kind(f.type) == "json"),
    "hours": frozenset({"reasons", "real_cycles", "comparisons"}),
}
_BOOL_COLUMNS = {"submitters": frozenset({"is_group"}), "passes": frozenset({"comparable"}),
                 "comparisons": frozenset({"aligned"}),
                 "hour_submitters": frozenset({"is_group"})}


def _q(name: str) -> str:
    """A quoted identifier (`group`, `end`, `time`, `key` are keywords somewhere)."""
    return '"' + name + '"'


def _json_default(value: Any) -> Any:
    if isinstance(value, (set, frozenset)):
        return sorted(value, key=str)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    return str(value)


def _dumps(value: Any) -> str:
    return json.dumps(value, default=_json_default)


def _encode(value: Any, kind: str) -> Any:
    if kind == "json":
        return None if value is None else _dumps(value)
    if kind == "bool":
        return None if value is None else int(bool(value))
    return value


def _decode(value: Any, annotation: Any) -> Any:
    """A stored value back to the field's Python shape (JSON lists become tuples)."""
    kind = _kind(annotation)
    if value is None:
        return None
    if kind == "json":
        v = json.loads(value) if isinstance(value, str) else value
        return tuple(v) if str(annotation).startswith("tuple") and isinstance(v, list) else v
    if kind == "bool":
        return bool(value)
    return value


class _Field(NamedTuple):
    """A record class's field as the ledger stores it."""
    name: str
    kind: str                   # `_kind`: "json", "bool" or "plain" (stored as it is)
    annotation: Any
    factory: bool               # made by a default factory
    defaulted: bool = False     # ... or with a default other than None


def _fields_of(cls: type) -> tuple[_Field, ...]:
    """Each field of a record class with how it is stored, worked out once per class (a
    pass writes thousands of match rows, a comparison reads them back)."""
    fields = _FIELDS.get(cls)
    if fields is None:
        fields = _FIELDS[cls] = tuple(
            _Field(f.name, _kind(f.type), f.type, f.default_factory is not dataclasses.MISSING,
                   f.default_factory is not dataclasses.MISSING
                   or f.default not in (dataclasses.MISSING, None))
            for f in dataclasses.fields(cls))
    return fields


_FIELDS: dict[type, tuple[_Field, ...]] = {}


def _all_plain(fields: tuple[_Field, ...]) -> bool:
    """Every field stored as it is, none made by a factory: records are rows as they are."""
    return all(f.kind == "plain" and not f.factory for f in fields)


def _row_of(obj: Any) -> dict[str, Any]:
    """A record dataclass as column -> stored value."""
    return {f.name: _encode(getattr(obj, f.name), f.kind) for f in _fields_of(type(obj))}


def _values_of(items: Sequence[Any]) -> tuple[list[str], list[tuple]]:
    """Records of one dataclass as (columns, each record's stored values): the values
    read at once where every field is stored as it is (a pass's thousands of matches)."""
    fields = _fields_of(type(items[0]))
    cols = [f.name for f in fields]
    if len(cols) > 1 and _all_plain(fields):
        return cols, list(map(operator.attrgetter(*cols), items))
    return cols, [tuple(_encode(getattr(x, f.name), f.kind) for f in fields) for x in items]


def _record_of(cls: type, row: dict[str, Any]) -> Any:
    """A record dataclass from a row (extra columns such as id and pass_uuid ignored; a
    NULL in a column a later schema added, for a field with a default other than None,
    is the field's default)."""
    kw = {}
    for f in _fields_of(cls):
        if f.name not in row:
            continue
        v = row[f.name]
        if f.kind != "plain":
            v = _decode(v, f.annotation)
        if v is None and f.defaulted:
            continue
        kw[f.name] = v
    return cls(**kw)


def _header_of(row: dict[str, Any]) -> dict[str, Any]:
    """A `passes` row as the header dict the readers return: JSON columns decoded."""
    h = dict(row)
    for name in _JSON_COLUMNS["passes"]:
        h[name] = _decode(h.get(name), _PASS_TYPES[name])
    for name in ("shadow_timings", "pass_timings", "time_limits"):
        if h.get(name) is None:
            h[name] = {}
    if h.get("warnings") is None:
        h["warnings"] = ()
    if h.get("comparable") is not None:
        h["comparable"] = bool(h["comparable"])
    return h


def _encode_classes(classes: Mapping[str, int]) -> str:
    """{slot: class} as JSON {class: [slots]} (each class number written once)."""
    by: dict[int, list[str]] = {}
    for name, c in classes.items():
        by.setdefault(int(c), []).append(name)
    return json.dumps({str(c): names for c, names in sorted(by.items())})


def _decode_classes(text: str) -> dict[str, int]:
    return {name: int(c) for c, names in json.loads(text).items() for name in names}


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def _without_comparison(rec: PassRecord) -> PassRecord:
    """`rec` as recorded when another pass compared its earlier pass first: without the
    comparison, and without the compared real cycle's match counts it put on the
    submitters and groups; a warning says so."""
    return dataclasses.replace(
        rec, comparison=None,
        submitters=tuple(dataclasses.replace(o, real_matches=None) for o in rec.submitters),
        groups=tuple(dataclasses.replace(g, real_matches=None) for g in rec.groups),
        warnings=(*rec.warnings, f"pass {rec.comparison.shadow_pass}'s cycle was compared "
                                 "by another pass meanwhile (another shadow process on this "
                                 "ledger): not compared again"))
