"""A config file from elsewhere (a snapshot's `config`, a `--config FILE`), checked as
data before HTCondor's own config system reads it.

HTCondor's config language can run commands (`include command : CMD`, `include : CMD |`,
`LOCAL_CONFIG_FILE = CMD |`), read this host's files (`include : FILE`, LOCAL_CONFIG_DIR,
USER_CONFIG_FILE), read this host's environment (`$ENV(NAME)`), load code
(CLASSAD_USER_LIBS, CLASSAD_USER_PYTHON_MODULES) and expand macros without end
(`A = $(B)`, `B = $(A)`). `check` refuses those forms with an InputError naming the file,
the line and the form; `NEUTRALIZED` lists the knobs the reader resets after the file
(see condor_config.read_params), so that a value built with macros cannot reach them
either.

The scan mirrors HTCondor's reader (src/condor_utils/config.cpp: getline_implementation
joins `\\` continuations, Parse_macros finds the statement and its operator) and errs on
the side of refusing: a statement is looked for anywhere in the file, also in a branch
of an `if` HTCondor would skip and in either of the reader's two comment modes
(`#opt:oldcomment` / `#opt:newcomment`). This module parses nothing beyond that: the
values are left to HTCondor.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..errors import InputError

# A config file from elsewhere larger than this is refused unread (a dump is ~100 KB).
MAX_CONFIG_BYTES = 8 * 1024 * 1024

# Knobs HTCondor acts on while it reads a config (config_host, ClassAdReconfig,
# reconfig_user_maps, process_dynamic_configs): set to these values after the file, plain
# and NEGOTIATOR.-prefixed (the reader's subsystem), so that the file's own values (a
# `condor_config_val -dump` names the other site's LOCAL_CONFIG_DIR) are never followed.
NEUTRALIZED = {
    "LOCAL_CONFIG_FILE": "", "LOCAL_CONFIG_DIR": "", "USER_CONFIG_FILE": "",
    "ENABLE_PERSISTENT_CONFIG": "false", "ENABLE_RUNTIME_CONFIG": "false",
    "CLASSAD_USER_LIBS": "", "CLASSAD_USER_PYTHON_MODULES": "",
    "CLASSAD_USER_PYTHON_LIB": "", "NEGOTIATOR_CLASSAD_USER_MAP_NAMES": "",
}
_PIPE_KNOBS = {"LOCAL_CONFIG_FILE", "LOCAL_CONFIG_DIR", "USER_CONFIG_FILE"}   # CMD | runs
_CODE_KNOBS = {"CLASSAD_USER_LIBS", "CLASSAD_USER_PYTHON_MODULES"}            # dlopen/import

_WS = " \t\n\v\f\r"           # C isspace() in the C locale
_SUBSYS = "NEGOTIATOR."

# Macro functions that reach outside the file ($RANDOM_CHOICE / $RANDOM_INTEGER are
# allowed: HTCondor's own defaults use them, so every `condor_config_val -dump` holds
# them, and no knob the negotiator's policy reads does). HTCondor matches
# `$ENV(` case-sensitively and leaves `$(ENV(X))` as text; both spellings, in any case,
# are refused. `userHome()` (in `$EVAL` or an `if`) looks a name up in this host's
# account database.
_REFUSED_MACROS = [
    (re.compile(r"\$\(?\s*ENV\s*\(", re.I), "reads this host's environment ($ENV)"),
    (re.compile(r"\buserHome\s*\(", re.I), "looks up this host's accounts (userHome())"),
]

# $(NAME), $(NAME:default), $FUNC(NAME...): the knob a macro reads (not after $$).
_REF = re.compile(r"(?<!\$)\$([A-Za-z_]*)\(\s*([A-Za-z_][A-Za-z0-9_.]*)")
_FILENAME_FUNC = re.compile(r"F[pnxdqabfwu]*", re.I)   # $F...(NAME): self-expanded too


@dataclass(frozen=True)
class Checked:
    """What the scan saw that it did not refuse: a macro cycle through a knob defined
    inside an `if` (HTCondor may not take that branch), to name if the read times out."""
    possible_cycle: str | None = None


def check(data: bytes, source: str) -> Checked:
    """Refuse (InputError naming `source` and the line) what in config text `data` would
    run a command, include a file, load code, read the environment, differ per read or
    loop without end; else what the scan leaves to the reader's time limit."""
    if len(data) > MAX_CONFIG_BYTES:
        raise InputError(source, f"{len(data)} bytes: too large for a config file "
                                 f"(at most {MAX_CONFIG_BYTES})")
    if b"\0" in data:
        n = data[:data.index(b"\0")].count(b"\n") + 1
        raise InputError(source, "a NUL byte (HTCondor's reader would cut the line there)",
                         line=n)
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        # HTCondor would take the bytes as they are, but the bindings hand values over as
        # UTF-8 text: a knob or a group name would silently change on the way
        n = data[:exc.start].count(b"\n") + 1
        raise InputError(source, f"byte 0x{data[exc.start]:02x} is not UTF-8 text", line=n)
    text = data.decode("latin-1")       # one character per byte, as HTCondor reads it
    problems: list[tuple[int, str]] = []
    for old in (False, True):
        for n, s in _logical_lines(text, old_comments=old):
            p = _refused(s)
            if p:
                problems.append((n, p))
    if problems:
        n, p = min(problems)
        raise InputError(source, p, line=n)
    cycle, conditional, line = _find_cycle(_logical_lines(text, old_comments=False))
    if cycle and not conditional:
        raise InputError(source, f"circular macro {cycle}: HTCondor would expand it "
                                 "without end", line=line)
    return Checked(possible_cycle=cycle)


def reset_text() -> str:
    """The statements that follow the checked file in the reader's root config."""
    return "".join(f"{prefix}{k} = {v}\n" for k, v in NEUTRALIZED.items()
                   for prefix in ("", _SUBSYS))


def _show(s: str, limit: int = 80) -> str:
    s = s if len(s) <= limit else s[:limit] + "..."
    return ascii(s)


# ------------------------------------------------------------------------ the reader

def _logical_lines(text: str, *, old_comments: bool):
    """(first line number, text) of each statement line, as getline_implementation
    joins them: whitespace trimmed at both ends, a trailing backslash continues onto the
    next line. In the new comment mode (the default) a comment line does not continue
    and a comment inside a continuation keeps only its last character; in the old mode
    both are kept as text."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    buf, start = None, 0
    for i, raw in enumerate(lines, 1):
        s = raw.strip(_WS)
        first = buf is None
        in_comment = s.startswith("#")
        if in_comment and not first and not old_comments:
            s, in_comment = s[-1:], False
        buf = s if first else buf + s
        if first:
            start = i
        if buf.endswith("\\"):
            buf = buf[:-1]
            if not in_comment or old_comments:
                continue
        yield start, buf
        buf = None
    if buf is not None:
        yield start, buf


def _statement(s: str):
    """(name, op, words between name and op, rhs) of statement line `s`, as Parse_macros
    finds them; None for a comment, a blank line or a line without an operator."""
    if not s or s.startswith("#"):
        return None
    if s.startswith(":"):           # `:` before an if-body line (done always: a superset)
        s = s[1:]
    i = 0
    while i < len(s) and s[i] not in _WS and s[i] not in "=:":
        i += 1
    name = s[:i]
    if i == len(s):
        return None
    k, op = i, s[i]
    j = k + 1
    if op not in "=:":
        while k < len(s) and s[k] in _WS:
            k += 1
        while k < len(s) and s[k] not in "=:@+":
            k += 1
        if k == len(s):
            return None
        op, j = s[k], k + 1
        if op == "@":
            if s[j:j + 1] != "=":
                return None
            j += 1
        elif op == "+":
            if s[j:j + 1] and s[j] in ",;|&*":
                j += 2 if s[j + 1:j + 2] == s[j] else 1
            if s[j:j + 1] != "=":
                return None
            j += 1
    return name, op, s[i:k].strip(_WS), s[j:].strip(_WS)


def _is_if(s: str) -> str | None:
    for kw in ("if", "elif", "else", "endif"):
        if s[:len(kw)].lower() == kw and (len(s) == len(kw) or s[len(kw)] in _WS):
            return kw
    return None


def _refused(s: str) -> str | None:
    """Why statement line `s` is refused, or None."""
    if not s or s.startswith("#"):
        return None
    for rx, why in _REFUSED_MACROS:
        if rx.search(s):
            return f"{why}: {_show(s)}"
    st = _statement(s)
    if st is None:
        return None
    name, op, between, rhs = st
    if op == ":" and name.lstrip("@").lower().startswith("include"):
        # HTCondor's keyword is `include` (then ifexist, command/output, into); a longer
        # word (`includeifexist command :`) is refused as the include it looks like.
        words = between.lower().split()
        form = " ".join([name] + between.split())
        if "command" in words or "output" in words or "|" in rhs:
            return (f"runs a command ({form} : ...): a config from elsewhere is read as "
                    f"data: {_show(s)}")
        return (f"includes a file ({form} : ...): a config from elsewhere may not read "
                f"this host's files: {_show(s)}")
    base = name.rsplit(".", 1)[-1].upper()
    if base in _PIPE_KNOBS and "|" in rhs:
        return f"runs a command ({base} = ... |): {_show(s)}"
    if base in _CODE_KNOBS and (rhs or op == "@"):
        return f"loads code into the reading process ({base}): {_show(s)}"
    return None


# ------------------------------------------------------------------- macro cycles

def _find_cycle(lines) -> tuple[str | None, bool, int | None]:
    """A cycle of macro references among the knobs the file defines, as
    ("A -> B -> A", whether a knob on it is defined inside an `if`, the line of the
    first knob's definition), else (None, False, None).

    Each knob's references are those of its last definition; `$(SELF)` and `$F(SELF)` in a
    definition (and `+=`) stand for the knob's earlier value, as HTCondor expands them when
    it reads the line. A reference resolves as the reader's lookup does: NEGOTIATOR.<name>
    if the file defines it, else <name>; knobs only HTCondor's param table defines are not
    seen (the reader's time limit covers those)."""
    refs: dict[str, set[str]] = {}
    shown: dict[str, str] = {}
    where: dict[str, int] = {}
    conditional: set[str] = set()
    depth = 0
    here: tuple[str, str, int, list[str]] | None = None     # an open `NAME @= tag`

    def define(name: str, value: str, n: int, append: bool) -> None:
        key = name.upper()
        selves = {key}
        if key.startswith(_SUBSYS) and len(key) > len(_SUBSYS):
            selves.add(key[len(_SUBSYS):])
        new: set[str] = set()
        self_ref = append
        for func, ref in _REF.findall(value):
            r = ref.upper()
            if r in selves and (func == "" or _FILENAME_FUNC.fullmatch(func)):
                self_ref = True
            else:
                new.add(r)
        if self_ref:
            new |= refs.get(key, set())
        refs[key], shown[key], where[key] = new, name, n
        if depth > 0:
            conditional.add(key)
        else:
            conditional.discard(key)

    for n, s in lines:
        if here is not None:
            name, tag, start, body = here
            if s == "@" + tag:
                define(name, "\n".join(body), start, False)
                here = None
            else:
                body.append(s)
            continue
        if not s or s.startswith("#"):
            continue
        kw = _is_if(s.lstrip(":"))
        if kw == "if":
            depth += 1
        elif kw == "endif":
            depth = max(0, depth - 1)
        if kw:
            continue
        st = _statement(s)
        if st is None:
            continue
        name, op, between, rhs = st
        if between or "$" in name or name.lstrip("@").lower() in ("use", "include", "error",
                                                                  "warning"):
            continue
        if op == "@":
            here = (name, rhs, n, [])
        else:
            define(name, rhs, n, op == "+")

    def resolve(r: str) -> str | None:
        for k in ((r,) if "." in r else (_SUBSYS + r, r)):
            if k in refs:
                return k
        return None

    graph = {k: sorted(filter(None, (resolve(r) for r in v)), key=lambda x: where[x])
             for k, v in refs.items()}
    state: dict[str, int] = {}
    for root in sorted(graph, key=lambda x: where[x]):
        if state.get(root):
            continue
        path, stack = [root], [iter(graph[root])]
        state[root] = 1
        while stack:
            nxt = next(stack[-1], None)
            if nxt is None:
                state[path.pop()] = 2
                stack.pop()
            elif state.get(nxt) == 1:
                cyc = path[path.index(nxt):] + [nxt]
                return (" -> ".join(shown[k] for k in cyc),
                        any(k in conditional for k in cyc), where[cyc[0]])
            elif not state.get(nxt):
                state[nxt] = 1
                path.append(nxt)
                stack.append(iter(graph[nxt]))
    return None, False, None
