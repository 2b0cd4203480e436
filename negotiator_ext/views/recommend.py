"""Recommended condor_userprio adjustments for people and machines: a table, JSON, and a
reviewable shell script.

`command_argv` is the one place a recommendation becomes a condor_userprio command; the
script, the JSON and `adapters.apply` all use it, so what an admin reviews is what gets
run. Nothing here runs anything.

Commands (condor_userprio; `-duration` makes a lease, rule A25, and exists from HTCondor
25.12 on, not in 25.0 LTS):

  factor   condor_userprio [-pool P] -setfactor NAME F -duration S
  ceiling  condor_userprio [-pool P] -setceiling NAME N -duration S
  floor    condor_userprio [-pool P] -setfloor NAME N -duration S
  delete   condor_userprio [-pool P] -delete NAME
  setprio, group: none (REPORT_ONLY_KINDS: advice for an admin; the script shows them as
           comments only)
"""

from __future__ import annotations

import shlex
import time
from typing import Any, Sequence

from ..core.recommend import LEASED_KINDS, REPORT_ONLY_KINDS, Recommendation, key_value
from .userprio import format_time_nosecs
from .tables import table

__all__ = ["command_argv", "command_text", "render_table", "render_json", "render_script"]

_OPTION = {"factor": "-setfactor", "ceiling": "-setceiling", "floor": "-setfloor",
           "delete": "-delete"}


def format_value(kind: str, value: float | None) -> str:
    """A value as the command writes it: "3" for a ceiling/floor, "1.5" / "2.25" for a
    factor or priority (at most 2 decimals, no trailing zeros)."""
    v = key_value(kind, value)
    if v is None:
        return ""
    if isinstance(v, int):
        return str(v)
    return f"{v:.2f}".rstrip("0").rstrip(".")


def command_argv(rec: Recommendation, pool: str | None = None) -> list[str] | None:
    """The condor_userprio command that makes the change `rec` recommends, as an argument
    list (no shell involved); None for a report-only kind (REPORT_ONLY_KINDS), which has
    no command. A lease is given with -duration; a factor, ceiling or floor without a
    lease is set permanently. Raises ValueError for an unknown kind."""
    if rec.kind in REPORT_ONLY_KINDS:
        return None
    if rec.kind not in _OPTION:
        raise ValueError(f"unknown recommendation kind {rec.kind!r}")
    argv = ["condor_userprio"]
    if pool:
        argv += ["-pool", pool]
    argv += [_OPTION[rec.kind], rec.name]
    if rec.kind != "delete":
        argv.append(format_value(rec.kind, rec.value))
    if rec.kind in LEASED_KINDS and rec.lease:
        argv += ["-duration", str(int(rec.lease))]
    return argv


def command_text(rec: Recommendation, pool: str | None = None) -> str | None:
    """`command_argv` as one shell line, every argument quoted with shlex.quote; None for
    a report-only kind."""
    argv = command_argv(rec, pool)
    return None if argv is None else shlex.join(argv)


def _lease(lease: int | None) -> str:
    """A lease like condor_userprio's times: "1+00:00" (days+hours:minutes)."""
    return "-" if not lease else format_time_nosecs(int(lease)).strip()


_WHOLE_KINDS = ("ceiling", "floor")    # values in whole weighted units


def _current(rec: Recommendation) -> str:
    if rec.current is None:
        return "none" if rec.kind in _WHOLE_KINDS else "-"
    if rec.kind in _WHOLE_KINDS:
        return str(int(rec.current))
    return f"{rec.current:.2f}"


def _recommended(rec: Recommendation) -> str:
    if rec.kind == "delete":
        return "(delete)"
    if rec.value is None:
        return "(review)"
    if rec.kind in _WHOLE_KINDS:
        return format_value(rec.kind, rec.value)
    return f"{rec.value:.2f}"


def render_table(recs: Sequence[Recommendation]) -> str:
    """One line per recommendation: Kind, Name, Current, Recommended, Lease, Reason;
    numbers right-aligned, times as days+hh:mm, like condor_userprio prints them."""
    if not recs:
        return "No recommendations.\n"
    rows = [[r.kind, _printable(r.name), _current(r), _recommended(r), _lease(r.lease),
             _printable(r.reason)] for r in recs]
    lines = table(["Kind", "Name", "Current", "Recommended", "Lease", "Reason"], rows,
                   {2, 3, 4})
    return "\n".join(lines) + "\n"


def render_json(recs: Sequence[Recommendation], pool: str | None = None) -> dict[str, Any]:
    """The recommendations as JSON-ready data: every field, the key, the command (null
    for a report-only kind) and `report_only`."""
    return {"count": len(recs),
            "recommendations": [
                {"kind": r.kind, "name": r.name, "value": r.value, "current": r.current,
                 "lease": r.lease, "reason": r.reason, "numbers": dict(r.numbers),
                 "key": r.key, "command": command_text(r, pool),
                 "report_only": r.kind in REPORT_ONLY_KINDS} for r in recs]}


def _printable(text: str) -> str:
    """`text` with control characters (newlines, escapes) written as \\xNN, so a name
    cannot end a comment line in the script or break the table."""
    return "".join(c if c.isprintable() else f"\\x{ord(c):02x}" if ord(c) < 256
                   else f"\\u{ord(c):04x}" for c in text)


def _figure(v: Any) -> str:
    if isinstance(v, float):
        return format(v, ".10g")
    if isinstance(v, (list, tuple)):
        return ", ".join(_figure(x) for x in v) or "-"
    return _printable(str(v))


def render_script(recs: Sequence[Recommendation], *, pool: str | None = None, now: int) -> str:
    """A `#!/bin/sh` script making the recommended changes, meant to be read before it is
    run: one block per recommendation with its reason and figures as comments; a
    report-only item (setprio, group) is a block of comments only, with no command.
    `set -e` stops at the first command that fails. Every argument is shell-quoted; names
    in comments have their control characters escaped."""
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(now))
    out = ["#!/bin/sh",
           f"# condor_userprio adjustments recommended by negotiator-ext at {when} UTC ({now}).",
           "# Review before running. Factor, ceiling and floor changes are leases that expire",
           "# by themselves; a delete does not expire. condor_userprio has -duration (leases)",
           "# from HTCondor 25.12 on; 25.0 LTS does not have it.",
           "# setprio and group items are advice to check by hand: comments only, nothing runs.",
           "set -e", ""]
    if not recs:
        out.append("# Nothing to do.")
    for r in recs:
        change = f"{_current(r)} -> {_recommended(r)}"
        lease = f" for {_lease(r.lease)} (days+hh:mm)" if r.lease else ""
        advice = " (report only: nothing to run)" if r.kind in REPORT_ONLY_KINDS else ""
        out.append(f"# {r.kind} {_printable(r.name)}: {change}{lease}{advice}")
        out.append(f"# {_printable(r.reason)}")
        if r.numbers:
            out.append("# " + "; ".join(f"{_printable(str(k))} {_figure(v)}"
                                         for k, v in r.numbers.items()))
        command = command_text(r, pool)
        if command is not None:
            out.append(command)
        out.append("")
    return "\n".join(out).rstrip("\n") + "\n"
