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

A NAME that begins with "-" is passed as it is: condor_userprio takes the argument after
-setfactor, -setceiling, -setfloor, -delete (and -setprio, -setaccum, -setbegin,
-setlast, -resetusage, -cancel*lease) as the name whatever it looks like. Its main()
(src/condor_tools/user_prio.cpp, HTCondor 25.14) loops over argv and, on one of those
options, only remembers the option's index and skips the next one or two arguments
(the name, and the value) without looking at them; only the argument in an option's
place is matched against option names (is_dash_arg_prefix, in
src/condor_utils/match_prefix.cpp, which needs a leading "-"). There is no "--": a bare
"--" is matched by no option, is not a user name (main's last else: a display name must
begin with a letter or be "<none>") and gives the usage message. So
`condor_userprio -setfactor -x@y 2 -duration 60` sets the factor of "-x@y" (checked
against the 25.14 binary: it goes on to contact the negotiator, no usage message).
"""

from __future__ import annotations

import os
import shlex
from typing import Any, Sequence

from ..core.recommend import (LEASED_KINDS, REPORT_ONLY_KINDS, Recommendation, WindowEvidence,
                              key_value)
from ..core.shards import split_stream
from ..when import utc_text
from .userprio import format_time_nosecs
from .tables import legend, table
from .text import printable

__all__ = ["command_argv", "command_text", "script_command", "shell_word", "unrunnable",
           "render_table", "render_json", "render_script"]

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
    # a ledger stream of one negotiator of several: that one's accountant (-name)
    pool, negotiator = split_stream(pool)
    if pool and pool != "<local>":
        argv += ["-pool", pool]
    if negotiator:
        argv += ["-name", negotiator]
    # the name right after the option, also one beginning with "-": condor_userprio's
    # main() (user_prio.cpp) takes the argument after -setfactor/-setceiling/-setfloor/
    # -delete as the name without checking it (see the module's docstring)
    argv += [_OPTION[rec.kind], rec.name]
    if rec.kind != "delete":
        argv.append(format_value(rec.kind, rec.value))
    if rec.kind in LEASED_KINDS and rec.lease:
        argv += ["-duration", str(int(rec.lease))]
    return argv


def same_negotiator(adj, stream: str | None) -> bool:
    """Whether the adjustment `adj` (its command line) was made to the accountant of the
    ledger stream `stream`: its `-name` is the stream's negotiator (none for a pool of
    one negotiator)."""
    wanted = split_stream(stream)[1]
    try:
        argv = shlex.split(adj.command or "")
    except ValueError:
        argv = []
    named = next((argv[i + 1] for i in range(len(argv) - 1) if argv[i] == "-name"), None)
    return named == wanted


def command_text(rec: Recommendation, pool: str | None = None) -> str | None:
    """`command_argv` as one shell line, every argument quoted with shlex.quote; None for
    a report-only kind. The true text (the JSON and the ledger hold it): an argument's
    control characters stay in it, inside quotes; show it to people `printable`, or
    write it into a script with `script_command`."""
    argv = command_argv(rec, pool)
    return None if argv is None else shlex.join(argv)


def _ansi_c_needed(arg: str) -> bool:
    """Whether shlex quoting would leave a control character in the script: any
    character `printable` escapes, the newline included (inside single quotes it would
    break the line, and the rest of a name could pass for a command of its own to the
    reviewer)."""
    return any(not c.isprintable() for c in arg)


def shell_word(arg: str) -> str:
    """`arg` as one word for bash that holds no raw control character: shlex.quote, or,
    when that would leave a control character (ESC, CR, DEL, C1, U+2028, bidi
    overrides, ...) in the text, bash's $'...' quoting, every such character written as
    its UTF-8 bytes in \\xHH escapes (read back the same in any locale), "\\" and "'"
    escaped. Needs bash (render_script then starts with #!/bin/bash)."""
    if not _ansi_c_needed(arg):
        return shlex.quote(arg)
    out = []
    for c in arg:
        if c in "\\'":
            out.append("\\" + c)
        elif c.isprintable():
            out.append(c)
        else:
            out.append("".join(f"\\x{b:02x}" for b in os.fsencode(c)))
    return "$'" + "".join(out) + "'"


def script_command(argv: Sequence[str]) -> str:
    """A command line for the script: each argument `shell_word`; the same as
    shlex.join for arguments without control characters."""
    return " ".join(shell_word(a) for a in argv)


def unrunnable(argv: Sequence[str]) -> str | None:
    """Why no command line can carry `argv` (None: it can): a NUL character (the C
    strings of argv end at it), or a character the file-system encoding cannot write."""
    for a in argv:
        if "\0" in a:
            return "an argument holds a NUL character, which no command line can carry"
        try:
            os.fsencode(a)
        except UnicodeEncodeError:
            return "an argument holds a character no command line can carry"
    return None


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


def render_table(recs: Sequence[Recommendation], evidence: WindowEvidence | None = None) -> str:
    """One line per recommendation: Kind, Name, Current, Recommended, Lease, Reason;
    numbers right-aligned, times as days+hh:mm, like condor_userprio prints them. With
    none, what the rules need and what the window has (`evidence`)."""
    if not recs:
        return "No recommendations" + (f": {nothing_because(evidence)}" if evidence else "") \
            + ".\n"
    rows = [[r.kind, r.name, _current(r), _recommended(r), _lease(r.lease), r.reason]
            for r in recs]                    # `table` shows every cell printable
    lines = table(["Kind", "Name", "Current", "Recommended", "Lease", "Reason"], rows,
                   {2, 3, 4})
    lines += legend([("Recommendations", None, _LEGEND)])
    return "\n".join(lines) + "\n"


_LEGEND = [
    ("Kind", "factor, ceiling, floor (a condor_userprio -setfactor, -setceiling, -setfloor "
             "lease), delete (-delete), or setprio and group: advice to review, nothing runs"),
    ("Name", "the submitter, or the group for group"),
    ("Current", "the value in place at the newest complete pass (none: no ceiling or floor)"),
    ("Recommended", "the value to set, (delete), or (review) for advice"),
    ("Lease", "how long the change lasts, days+hh:mm as condor_userprio prints times"),
    ("Reason", "why, in a sentence (--json: the figures behind it)"),
]


def nothing_because(e: WindowEvidence) -> str:
    """Why a window gave no recommendation, in a sentence: too few complete passes or
    too short a span for the rules, or enough and no gap that persisted."""
    need = (f"the rules need at least {e.min_passes} complete passes spanning "
            f"{e.min_hours:g} h (NEGOTIATOR_EXT_RECOMMEND_MIN_PASSES, "
            "NEGOTIATOR_EXT_RECOMMEND_MIN_HOURS)")
    has = (f"{e.passes} complete pass{'' if e.passes == 1 else 'es'} spanning "
           f"{e.hours:.1f} h")
    if not e.enough:
        return f"{need}; the window has {has}"
    return (f"the window has {has}, enough for the rules (they need {e.min_passes} "
            f"over {e.min_hours:g} h), and no submitter's or group's gap persisted in them")


def render_json(recs: Sequence[Recommendation], pool: str | None = None) -> dict[str, Any]:
    """The recommendations as JSON-ready data: every field, the key, the command (null
    for a report-only kind) and `report_only`."""
    return {"count": len(recs),
            "recommendations": [
                {"kind": r.kind, "name": r.name, "value": r.value, "current": r.current,
                 "lease": r.lease, "reason": r.reason, "numbers": dict(r.numbers),
                 "key": r.key, "command": command_text(r, pool),
                 "report_only": r.kind in REPORT_ONLY_KINDS} for r in recs]}


def _figure(v: Any) -> str:
    if isinstance(v, float):
        return format(v, ".10g")
    if isinstance(v, (list, tuple)):
        return ", ".join(_figure(x) for x in v) or "-"
    return printable(str(v))


def render_script(recs: Sequence[Recommendation], *, pool: str | None = None, now: int) -> str:
    """A shell script making the recommended changes, meant to be read before it is
    run: one block per recommendation with its reason and figures as comments; a
    report-only item (setprio, group) is a block of comments only, with no command.
    `set -e` stops at the first command that fails. Every argument is shell-quoted
    (`script_command`); names in comments have their control characters escaped
    (`printable`), so the script holds no control character but its line ends. It is a
    `#!/bin/sh` script, or `#!/bin/bash` when an argument needs bash's $'...' quoting.
    A command no command line can carry (`unrunnable`) is a comment saying why."""
    when = utc_text(now)
    blocks: list[str] = []
    bash = False
    if not recs:
        blocks.append("# Nothing to do.")
    for r in recs:
        change = f"{_current(r)} -> {_recommended(r)}"
        lease = f" for {_lease(r.lease)} (days+hh:mm)" if r.lease else ""
        advice = " (report only: nothing to run)" if r.kind in REPORT_ONLY_KINDS else ""
        blocks.append(f"# {r.kind} {printable(r.name)}: {change}{lease}{advice}")
        blocks.append(f"# {printable(r.reason)}")
        if r.numbers:
            blocks.append("# " + "; ".join(f"{printable(str(k))} {_figure(v)}"
                                            for k, v in r.numbers.items()))
        argv = command_argv(r, pool)
        if argv is not None:
            why = unrunnable(argv)
            if why is not None:
                blocks.append(f"# not run: {why}: {printable(shlex.join(argv))}")
            else:
                bash = bash or any(_ansi_c_needed(a) for a in argv)
                blocks.append(script_command(argv))
        blocks.append("")
    out = ["#!/bin/bash" if bash else "#!/bin/sh",
           f"# condor_userprio adjustments recommended by negotiator-ext at {when} UTC ({now}).",
           "# Review before running. Factor, ceiling and floor changes are leases that expire",
           "# by themselves; a delete does not expire. condor_userprio has -duration (leases)",
           "# from HTCondor 25.12 on; 25.0 LTS does not have it.",
           "# setprio and group items are advice to check by hand: comments only, nothing runs."]
    if bash:
        out.append("# Names holding control characters are written in bash's $'...' quoting "
                   "(\\xHH: the byte HH).")
    out += ["set -e", ""] + blocks
    return "\n".join(out).rstrip("\n") + "\n"
