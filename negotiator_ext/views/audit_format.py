"""The audit report's formatting (`views.audit`): times, durations, numbers and
percentages as the page shows them, and a DataFrame as an HTML table (`Col`,
`html_table`) of at most MAX_ROWS rows."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import pandas as pd

from .text import printable

MAX_ROWS = 25               # rows of a table shown on the page (all are in its CSV)

# ---------------------------------------------------------------- formatting

def utc(t: Any, seconds: bool = True) -> str:
    """Epoch seconds as 'YYYY-MM-DD HH:MM[:SS]' UTC ('' when unknown)."""
    v = _float(t)
    if v is None:
        return ""
    return time.strftime("%Y-%m-%d %H:%M:%S" if seconds else "%Y-%m-%d %H:%M", time.gmtime(v))


def duration(s: Any) -> str:
    """Seconds for people: '45 s', '12 min', '3.5 h', '2.1 d'."""
    v = _float(s)
    if v is None:
        return ""
    if v < 120:
        return f"{v:.0f} s"
    if v < 7200:
        return f"{v / 60:.0f} min"
    if v < 172800:
        return f"{v / 3600:.1f} h"
    return f"{v / 86400:.1f} d"


def number(x: Any) -> str:
    """A number for a table cell: integers as such, else 1-3 decimals by size."""
    v = _float(x)
    if v is None:
        return ""
    if v == int(v) and abs(v) < 1e15:
        return str(int(v))
    a = abs(v)
    if a >= 100:
        return f"{v:.1f}"
    if a >= 1:
        return f"{v:.2f}"
    return f"{v:.3g}"


def percent(x: Any) -> str:
    v = _float(x)
    return "" if v is None else f"{v:.0%}" if abs(v) >= 0.1 or v == 0 else f"{v:.1%}"


def _float(x: Any) -> float | None:
    if x is None or isinstance(x, bool):
        return None
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


_FORMATS: dict[str, Callable[[Any], str]] = {
    "text": lambda x: "" if x is None or (isinstance(x, float) and math.isnan(x)) else str(x),
    "status": str,
    "list": lambda x: "" if x is None or (isinstance(x, float) and math.isnan(x)) else str(x),
    "num": number, "int": number, "pct": percent, "time": utc, "dur": duration,
    "tmin": lambda x: utc(x, seconds=False),
    "slot_h": lambda x: number(_float(x) / 3600.0) if _float(x) is not None else "–",
    "span": str,
    "bool": lambda x: "yes" if x is True or x == 1 else ("no" if x is False or x == 0 else ""),
}
_NUMERIC = {"num", "int", "pct", "dur", "slot_h", "span"}


@dataclass
class Col:
    """One displayed column: the frame's column, its heading and its format."""
    name: str
    label: str
    kind: str = "text"


LONG_NAME = 24              # a longer name may break at its dots and before its '@'


def _breakable(text: str) -> Any:
    """A long name (group_physics.higgs_analysis@refcondor.example.org) as markup that
    may break after a dot or before its '@' (<wbr>: nothing is added when copied), so a
    table of long names fits the window without breaking a word anywhere else."""
    if len(text) <= LONG_NAME or ("." not in text and "@" not in text):
        return text
    import markupsafe
    safe = str(markupsafe.escape(printable(text)))
    return markupsafe.Markup(safe.replace(".", ".<wbr>").replace("@", "<wbr>@"))


def html_table(df: pd.DataFrame, cols: Sequence[Col], *, limit: int = MAX_ROWS,
               csv: str | None = None, row_id: Callable[[dict], str | None] | None = None,
               row_cls: Callable[[dict], str | None] | None = None,
               href: dict[str, Callable[[dict], str | None]] | None = None,
               title: str | None = None, tid: str | None = None,
               empty_text: str = "Nothing to show.") -> dict[str, Any]:
    """A table for the template: headings, formatted cells (numbers right-aligned), row
    ids (anchors) and classes, links; the first `limit` rows, saying where the rest is."""
    rows = []
    records = df.to_dict("records")
    for rec in records[:limit]:
        cells = []
        for c in cols:
            text = _FORMATS[c.kind](rec.get(c.name))
            cell = {"text": _breakable(text) if c.kind in ("text", "list") else text,
                    "cls": "n" if c.kind in _NUMERIC else "status" if c.kind == "status"
                    else "t" if c.kind in ("time", "tmin") else "w" if c.kind == "list"
                    else None,
                    "href": None}
            if href and c.name in href:
                cell["href"] = href[c.name](rec)
            cells.append(cell)
        rows.append({"cells": cells, "id": row_id(rec) if row_id else None,
                     "cls": row_cls(rec) if row_cls else None})
    more = None
    if len(records) > limit:
        more = f"The first {limit} of {len(records)} rows" + (f"; all in {csv}." if csv else ".")
    return {"head": [c.label for c in cols], "rows": rows, "more": more, "title": title,
            "id": tid, "empty_text": empty_text}




def _shown(value: Any) -> Any:
    """What the page shows of a template value: strings `printable` (not Markup)."""
    import markupsafe
    if isinstance(value, str) and not isinstance(value, markupsafe.Markup):
        return printable(value)
    return value


