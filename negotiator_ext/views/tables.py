"""Plain-text tables and figures, as condor_userprio-style output prints them, and the
legend of their columns."""

from __future__ import annotations

import textwrap
from typing import Sequence

from .text import printable


def table(headers: list[str], rows: list[list[str]], right: set[int]) -> list[str]:
    """The lines of a table: a header, a rule, one line per row; columns as wide as their
    widest cell, those in `right` right-aligned. Every cell is shown `printable` (its
    control characters escaped), and measured so."""
    headers = [printable(str(c)) for c in headers]
    rows = [[printable(str(c)) for c in r] for r in rows]
    widths = [max(len(c) for c in col) for col in zip(headers, *rows)]

    def line(cells: list[str]) -> str:
        return "  ".join(c.rjust(w) if i in right else c.ljust(w)
                         for i, (c, w) in enumerate(zip(cells, widths))).rstrip()
    return [line(headers), line(["-" * w for w in widths])] + [line(r) for r in rows]


def num(v, fmt: str = "{:.2f}") -> str:
    """A figure for a table cell: "-" when unknown, a huge one in short form."""
    if v is None:
        return "-"
    if isinstance(v, float) and abs(v) >= 1e15:
        return f"{v:.4g}"
    return fmt.format(v)


def pct(x, digits: int = 0) -> str:
    """A ratio as a percentage; empty when unknown."""
    return "" if x is None else f"{x:.{digits}%}"


LEGEND_HEADING = "Columns (HTCondor's own names aside):"
LEGEND_WIDTH = 100      # the legend's lines are wrapped to this many columns


def legend(parts: Sequence[tuple[str, str | None, Sequence[tuple[str, str]]]]) -> list[str]:
    """The legend ending a report (the same heading and layout in every view): per
    table shown, (its name, which of its columns are HTCondor's own or None, each other
    column with what it means), wrapped to LEGEND_WIDTH. Starts with a blank line."""
    out = ["", LEGEND_HEADING]
    for part, own, columns in parts:
        out += textwrap.wrap(part + (f" ({own}):" if own else ":"), LEGEND_WIDTH,
                             initial_indent="  ", subsequent_indent="    ")
        width = max(len(name) for name, _ in columns)
        for name, text in columns:
            out += textwrap.wrap(text, LEGEND_WIDTH, initial_indent=f"    {name.ljust(width)}  ",
                                 subsequent_indent=" " * (width + 6))
    return out
