"""Bounds on untrusted input, and the stack the ClassAd library needs to stay within them.

A snapshot may come from another site and a job ad from any user, so every number and
expression that reaches arithmetic or the ClassAd library is bounded where it enters:

* Numbers: a value that is NaN, infinite or larger in magnitude than `MAX_MAGNITUDE`
  (FLT_MAX, the largest number the accountant itself writes) is refused where a number
  is needed (slot resources, accountant records, submitter counts): sums and products
  of larger values could overflow into infinities and NaN. A number knob of the
  config may go up to `MAX_KNOB_MAGNITUDE` (HTCondor's largest default), never infinity. Times (epochs) must lie in `[0, MAX_EPOCH]` (year 9999, the last
  time a calendar date can be printed for).
* Expressions: classad2 walks an expression's tree recursively (to unparse it, to find
  the attributes it reads, to evaluate it). Its parser stops nesting at 500 levels, but
  a chain of one binary operator (`A || B || C ...`) is parsed without recursion into a
  tree as deep as the chain is long, and walking a chain of some 35,000 operators
  overflows the default 8 MiB stack (a SIGSEGV, not an exception). So `raise_stack_limit`
  lets the main thread's stack grow to 256 MiB (address space reserved only as it is
  used; a chain of 800,000 operators then walks safely), and an attribute of an ad
  file with more than `MAX_EXPR_OPERATORS` operators is refused when read.

`check_number` is the one check of an ad's number (slots, accountant records, submitter
ads): an InputError naming the file, the ad and the attribute. `paused_gc` is the other
process resource a pass over a whole pool sets: Python's cyclic collector, off for the
pass.
"""

from __future__ import annotations

import ctypes
import gc
import math
import re
from contextlib import contextmanager
from typing import Any

from .core import classads
from .errors import InputError

MAX_MAGNITUDE = 3.4028234663852886e38     # FLT_MAX: the accountant writes it (GroupSortKey)
MAX_KNOB_MAGNITUDE = 1e100          # a number knob (GROUP_QUOTA_ROUND_ROBIN_RATE's default)
MAX_EPOCH = 253402300799            # 9999-12-31 23:59:59 UTC
MAX_EXPR_OPERATORS = 200_000
STACK_BYTES = 256 << 20            # x4 what MAX_EXPR_OPERATORS needs; also the default
                                    # thread stack of the commands we start, so not more

# an operator token of the ClassAd language (outside string literals); each adds at most
# one level to an expression's tree
_OPERATOR = re.compile(r"\|\||&&|=\?=|=!=|[=!<>]=|>>>|<<|>>|[-+*/%<>|&^.?:\[!~]"
                       r"|\bis\b|\bisnt\b", re.IGNORECASE)
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"?')


def raise_stack_limit() -> None:
    """Let the main thread's stack grow to STACK_BYTES (or the hard limit, if lower), so
    classad2's recursive walks of a long operator chain cannot overflow it. Linux grows
    the main thread's stack on demand up to the soft limit in force at the time."""
    try:
        import resource
        soft, hard = resource.getrlimit(resource.RLIMIT_STACK)
    except (ImportError, OSError, ValueError):
        return
    want = STACK_BYTES if hard == resource.RLIM_INFINITY else min(STACK_BYTES, hard)
    if soft != resource.RLIM_INFINITY and soft < want:
        try:
            resource.setrlimit(resource.RLIMIT_STACK, (want, hard))
        except (OSError, ValueError):
            pass


@contextmanager
def paused_gc(collect: bool = True, generation: int = 2):
    """Python's cyclic garbage collector off for a pass over a whole pool, then one
    collection. A pass allocates millions of objects that live until it ends (ads, their
    texts, the matcher's tables), and the collector would walk them again and again
    for nothing: at 100,000 slots that is about 5 s of a 75 s pass. What the pass drops
    is freed by reference counting as always; only cycles wait for the collection
    (`collect=False`: none, for a command whose process ends with the block; and when
    the process ends with the command, `PROCESS_ENDS`, the collector stays off: switched
    back on, its first collection would walk everything the pass made, 0.16 s at 11,000
    slots, for a process about to end). `generation`: the oldest generation collected (a
    shadow loop's pass, 1: what the pass made, not what the loop keeps from pass to pass,
    which a whole collection would walk every time: 0.17 s at 11,000 slots)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled and (collect or not PROCESS_ENDS):
            gc.enable()
        if collect:
            gc.collect(generation)


def give_back_memory() -> None:
    """Hand the memory freed since the last call back to the system: the bindings'
    ClassAds and large buffers come from the C heap, whose freed blocks glibc otherwise
    keeps for the process (malloc_trim; nothing elsewhere). A process that goes on
    between two big steps calls it: a loop between its passes (at 11,000 slots 571 MiB
    held between passes before, 515 MiB after), its worker between two answers; the
    next step's memory is then what it holds at once, not what the last one left."""
    global _TRIM
    if _TRIM is None:
        try:
            _TRIM = ctypes.CDLL(None).malloc_trim
        except (AttributeError, OSError):
            _TRIM = False
    if _TRIM:
        _TRIM(0)


_TRIM = None


# Set by the console command (cli.console_main) for a one-shot command whose process ends
# with it: paused_gc(collect=False) then leaves the collector off.
PROCESS_ENDS = False


def expression_operators(text: str) -> int:
    """How many operator tokens an expression's text holds outside string literals: an
    upper bound on how deep its tree's operator chains go."""
    if len(text) <= MAX_EXPR_OPERATORS:     # each token is at least one character
        return 0
    return len(_OPERATOR.findall(_STRING.sub('""', text)))


def too_large_expression(text: str) -> str | None:
    """Why the expression `text` is refused (None: it is not)."""
    n = expression_operators(text)
    if n > MAX_EXPR_OPERATORS:
        return (f"expression too large to evaluate safely ({n} operators; at most "
                f"{MAX_EXPR_OPERATORS})")
    return None


def number_problem(v: float) -> str | None:
    """Why the number `v` cannot be used (None: it can)."""
    if math.isnan(v):
        return "not a number (NaN)"
    if math.isinf(v):
        return "not a finite number"
    if abs(v) > MAX_MAGNITUDE:
        return f"out of range (magnitude above {MAX_MAGNITUDE:g})"
    return None


def epoch_problem(v: float) -> str | None:
    """Why `v` cannot be a time in seconds since 1970 (None: it can)."""
    if math.isnan(v):
        return "not a number (NaN)"
    if not 0 <= v <= MAX_EPOCH:
        return f"not a time from 1970 to 9999 ({v:g} s)"
    return None


def check_number(ad: classads.ClassAd, attr: str, value: Any, source: str, label: str, *,
                 epoch: bool = False, int32: bool = False) -> None:
    """Refuse an attribute that must be a number (limits: finite, of sane magnitude; a
    time from 1970 to 9999 when `epoch`; within a C int when `int32`), naming the file,
    the ad and the attribute."""
    if not classads.is_number(value):
        raise InputError(source, f"not a number: {classads.source_text(ad, attr)}",
                         ad=label, attribute=attr)
    why = epoch_problem(value) if epoch else number_problem(value)
    if why is None and int32 and not -2 ** 31 <= value < 2 ** 31:
        why = "out of range (a C int: -2147483648 to 2147483647)"
    if why:
        raise InputError(source, f"{why}: {classads.source_text(ad, attr)}", ad=label,
                         attribute=attr)
