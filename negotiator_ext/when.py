"""Times as people write them on the command line and in scenario files."""

from __future__ import annotations

import math
import re
from datetime import datetime, timezone

_EPOCH = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$")


def epoch_of(text) -> float:
    """Epoch seconds from epoch seconds as a number or text, or an ISO 8601 date
    (midnight) or date and time, UTC unless it names its zone; ValueError otherwise."""
    s = str(text).strip()
    if _EPOCH.match(s):
        v = float(s)
        if not math.isfinite(v):
            raise ValueError(f"{text!r} is not a time")
        return v
    when = datetime.fromisoformat(s)
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return when.timestamp()


def iso(t: float) -> str:
    """Epoch seconds as ISO 8601 UTC, to the second (2026-11-28T22:16:16Z)."""
    return datetime.fromtimestamp(int(t), tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def utc_text(t: float) -> str:
    """Epoch seconds as people read them in every view of ours: ISO 8601 UTC, date and
    time apart (2026-11-28 22:16:16); the view says UTC (in the text or a column's
    heading). condor_userprio's own output keeps its format."""
    return datetime.fromtimestamp(int(t), tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S")
