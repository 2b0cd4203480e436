"""The core's one door to ClassAd evaluation (classad2).

Everything in the core that evaluates an attribute or an expression goes through these
small functions, so the rest of the core deals in plain Python values. No ClassAd is
parsed or evaluated anywhere else by hand.
"""

from __future__ import annotations

import functools
import math
import struct as _struct
from typing import Any

import classad2

ClassAd = classad2.ClassAd
UNDEFINED = classad2.Value.Undefined
ERROR = classad2.Value.Error


class LazyAd(ClassAd):
    """A ClassAd parsed the first time anything reads it: until then it holds only what
    it is made from (a slot ad's texts: a few hundred bytes, where the parsed ad takes
    kilobytes), and what is written into it (`ad[attr] = v`, kept in order, written
    into the ad once it is parsed). In every other respect it is a ClassAd: each of
    classad2's methods reaches the ad through its handle, and the handle is made when
    first asked for, by `make(data)`, which returns the parsed ClassAd (one `make` is
    shared by many ads; it may raise, as a reader would have)."""

    def __init__(self, make, data):     # (no handle: ClassAd.__init__ would make one)
        self._make, self._data = make, data

    def __getattr__(self, name: str):
        # only reached for an attribute the object lacks: the handle, until it is made
        if name != "_handle":
            raise AttributeError(name)
        d = self.__dict__
        handle = d["_make"](d["_data"])._handle
        writes = d.get("_writes", ())
        d.clear()                       # what it was made from is no longer needed
        self._handle = handle
        for attr, value in writes:
            ClassAd.__setitem__(self, attr, value)
        return handle

    def __setitem__(self, attr, value):
        d = self.__dict__
        if "_handle" in d:
            ClassAd.__setitem__(self, attr, value)
        else:
            # (classad2 copies what it is given: a value written later is the same)
            d.setdefault("_writes", []).append((attr, value))

    def made(self) -> bool:
        """Whether the ad has been parsed yet."""
        return "_handle" in self.__dict__

    def pending_writes(self) -> list[str]:
        """The attributes written into an ad not parsed yet, waiting for its parse."""
        return [attr for attr, _ in self.__dict__.get("_writes", ())]

    def remake_from(self, data) -> None:
        """Parse an ad not parsed yet from `data` instead, when it is."""
        self.__dict__["_data"] = data

    def unparsed_copy(self) -> "LazyAd":
        """A copy of an ad not parsed yet, not parsed either (written into, it leaves
        this one as it is)."""
        d = self.__dict__
        copy = LazyAd(d["_make"], d["_data"])
        if "_writes" in d:
            copy._writes = list(d["_writes"])
        return copy


def is_value(v: Any) -> bool:
    """True unless v is UNDEFINED or ERROR."""
    return not isinstance(v, classad2.Value)


def as_number(v: Any) -> float | None:
    """A number (bools count as 0/1, like LookupFloat), or None.

    classad2.Value is an IntEnum, so UNDEFINED and ERROR pass isinstance(v, int): they
    must be excluded first."""
    if isinstance(v, classad2.Value):
        return None
    if isinstance(v, bool):
        return 1.0 if v else 0.0
    if isinstance(v, (int, float)):
        return float(v)
    return None


def is_expr(v: Any) -> bool:
    """Whether `ClassAd.get` gave an expression (not a literal value)."""
    return isinstance(v, classad2.ExprTree)


def is_number(v: Any) -> bool:
    """A real number value: int or float, neither bool nor UNDEFINED/ERROR."""
    t = type(v)
    if t is int or t is float:          # (most values: no subclass to rule out)
        return True
    return isinstance(v, (int, float)) and not isinstance(v, (bool, classad2.Value))


def lookup_int32(v: Any) -> int | None:
    """A value as HTCondor's `LookupInteger` into an `int` gives it, or None when it is no
    number: a real is cast to a 64-bit integer (truncated toward zero; NaN, infinities
    and reals out of range give the x86-64 cast's INT64_MIN), then the low 32 bits are
    kept as a signed int. So NaN, INF or 1e300 read as 0, and 2**32 + 5 as 5."""
    n = as_number(v)
    if n is None:
        return None
    if isinstance(v, int) and not isinstance(v, bool):
        wide = v
    elif math.isfinite(n) and -2.0 ** 63 <= n < 2.0 ** 63:
        wide = int(n)
    else:
        wide = -(1 << 63)
    wide &= (1 << 64) - 1
    low = wide & 0xFFFFFFFF
    return low - (1 << 32) if low >= 1 << 31 else low


# The Python values `ad[attr]` gives for a literal that are its value as evaluated
# (anything else, an expression included, is evaluated); adtext.AdView reads a plain
# literal text's value by the same test.
LITERAL_TYPES = frozenset((str, int, float, bool))


def eval_attr(ad: ClassAd, attr: str) -> Any:
    """Evaluate attribute `attr` of `ad` (MY = ad); UNDEFINED when absent.

    `ad[attr]` (what `attr in ad` reads, raising what it raises) gives a literal's value
    at once, the same value its evaluation gives: one classad2 call instead of three
    for most attributes of an ad."""
    if type(ad) is not ClassAd and type(ad) is not LazyAd:
        if attr not in ad:
            return UNDEFINED
    else:
        try:
            v = ad[attr]
        except KeyError:
            return UNDEFINED
        if type(v) in LITERAL_TYPES:
            return v
    try:
        return ad.eval(attr)
    except Exception:  # classad2 raises on some evaluation failures
        return ERROR


def eval_number(ad: ClassAd, attr: str) -> float | None:
    """The attribute as a number (bools count as 0/1, like LookupFloat), or None."""
    return as_number(eval_attr(ad, attr))


def eval_string(ad: ClassAd, attr: str) -> str | None:
    """The attribute as a string (LookupString: only string values), or None."""
    v = eval_attr(ad, attr)
    return v if isinstance(v, str) else None


def as_bool(v: Any) -> bool | None:
    """A value as a boolean (numbers: non-zero is true, like LookupBool), or None."""
    if isinstance(v, bool):
        return v
    if isinstance(v, (int, float)) and not isinstance(v, classad2.Value):
        return v != 0
    return None


def eval_bool(ad: ClassAd, attr: str) -> bool | None:
    """The attribute as a boolean (numbers: non-zero is true, like LookupBool), or None."""
    return as_bool(eval_attr(ad, attr))


def source_text(ad: ClassAd, attr: str) -> str:
    """The attribute's expression as ClassAd syntax (strings quoted), for messages: on
    one line, at most 60 characters."""
    try:
        text = " ".join(str(ad.lookup(attr)).split())
    except Exception:
        return "?"
    return text if len(text) <= 60 else text[:57] + "..."


@functools.lru_cache(maxsize=1024)
def parse_expr(text: str) -> classad2.ExprTree:
    """Parse an expression; raises ValueError with the text on failure.

    Cached: a config expression (a constraint, SLOT_WEIGHT) is evaluated against every
    slot ad, and is parsed once, not once per ad."""
    try:
        return classad2.ExprTree(text)
    except Exception as exc:  # classad2_impl.ClassAdException
        raise ValueError(f"not a valid ClassAd expression: {text!r}") from exc


def parse_old_value(text: str) -> classad2.ExprTree:
    """An attribute's text as `-long` (old ClassAd syntax) prints it, parsed as classad2
    reads that syntax (a backslash in a string is a plain character, not an escape, as
    the ad's own parse would have it). Raises ValueError if it does not parse."""
    try:
        ad = classad2.parseNext("v = " + text, classad2.ParserType.Old)
    except Exception:
        ad = None
    if ad is None or len(ad) != 1 or "v" not in ad:
        raise ValueError(f"not a valid ClassAd expression: {text!r}")
    return ad.lookup("v")


def parse_old_ad(text: str) -> ClassAd:
    """One ad in old syntax (`Name = expr` lines), as classad2 reads it."""
    ad = classad2.parseNext(text, classad2.ParserType.Old)
    return ad if ad is not None else classad2.ClassAd()


def copy_ad(ad: ClassAd) -> ClassAd:
    """A copy of an ad that can be changed without touching the original: the ad read
    back from its new-syntax text, which escapes what old syntax cannot hold (a string
    with a line break, a control character), and is read in a third of the time."""
    return classad2.ClassAd(repr(ad))


def attribute_text(ad: ClassAd, attr: str) -> str:
    """One attribute's expression text as `attribute_texts` gives it (classad2's printOld
    of the attribute alone): the whole text, unlike `source_text`, which is for messages."""
    one = ClassAd()
    one[attr] = ad.lookup(attr)
    return attribute_texts(one)[0][1]


def attribute_texts(ad: ClassAd) -> list[tuple[str, str]]:
    """(Name, expression text) of every attribute, as classad2 prints them."""
    out = []
    for line in ad.printOld().splitlines():
        name, sep, text = line.partition(" = ")
        if sep:
            out.append((name.strip(), text.strip()))
    return out


def eval_expr(expr: str | classad2.ExprTree, my: ClassAd | None = None) -> Any:
    """Evaluate an expression with MY = `my` (no TARGET)."""
    tree = expr if isinstance(expr, classad2.ExprTree) else parse_expr(expr)
    try:
        return tree.eval(my) if my is not None else tree.eval()
    except Exception:
        return ERROR


# ---- matchmaking: evaluation with MY and TARGET -------------------------------------
#
# HTCondor matches two ads inside a MatchClassAd and, unless STRICT_CLASSAD_EVALUATION
# is set, an unscoped name that MY lacks is looked up in TARGET ("alternate scope").
# classad2 does the same once the HTCondor library has read its configuration; the
# adapters switch that on (adapters.classad_semantics), the core only checks it.

FLT_MAX = 3.4028234663852886e38
DBL_MAX = 1.7976931348623157e308


def match_semantics_enabled() -> bool:
    """Whether an unscoped name MY lacks is looked up in TARGET, as in the daemons."""
    try:
        return classad2.ExprTree("probe_attr").eval(classad2.ClassAd(),
                                                    classad2.ClassAd({"probe_attr": 1})) == 1
    except Exception:
        return False


def eval_match(expr: classad2.ExprTree, my: ClassAd, target: ClassAd) -> Any:
    """Evaluate `expr` with MY = `my` and TARGET = `target`, as the negotiator does
    (EvalExprToBool/EvalExprToNumber over a MatchClassAd). ERROR on failure."""
    try:
        return expr.eval(my, target)
    except Exception:
        return ERROR


def is_true(v: Any) -> bool:
    """A match test's verdict: only a boolean true (or a non-zero number, which the
    ClassAd logical operators treat as true) counts; UNDEFINED/ERROR never do."""
    return as_bool(v) is True


def f32(x: float) -> float:
    """`(float)x` in C: a double narrowed to IEEE single precision (beyond the float
    range, +-inf)."""
    try:
        return _struct.unpack("f", _struct.pack("f", x))[0]
    except OverflowError:
        return math.copysign(math.inf, x)


def refs(ad: ClassAd, expr: classad2.ExprTree) -> tuple[frozenset[str], frozenset[str]]:
    """(internal, external) references of `expr` as seen from `ad`, lower-cased.

    Internal: attributes of `ad` the expression reaches, following `ad`'s own
    expressions (START, WithinResourceLimits, ...). External: everything else it names,
    with its scope prefix (`target.requestcpus`, or a bare name `ad` lacks)."""
    try:
        internal = ad.internalRefs(expr)
        external = ad.externalRefs(expr)
    except Exception:
        return frozenset(), frozenset()
    return (frozenset(n.lower() for n in internal), frozenset(n.lower() for n in external))


def names_in(tree: classad2.ExprTree) -> frozenset[str]:
    """Every attribute name an expression mentions, lower-cased, with its scope prefix
    kept for TARGET and other scopes and dropped for MY."""
    _, ext = refs(ClassAd(), tree)
    # (classad2 reports an expression without references as referring to "")
    return frozenset(n[3:] if n.startswith("my.") else n for n in ext if n)


def conjuncts(expr) -> list[str] | None:
    """The top-level `&&` clauses of an expression, as texts, or None when it has no
    such form (a single clause, or `||` / `?:` at the top). Only the boundaries are
    found here, by skipping string literals and bracketed parts of classad2's own
    unparse; classad2 then has the last word: the split is used only when every clause
    parses and joining them again unparses exactly as the whole did."""
    text = str(expr)
    parts, depth, start, i, n = [], 0, 0, 0, len(text)
    while i < n:
        c = text[i]
        if c in "\"'":                       # a string literal or quoted attribute name
            i += 1
            while i < n and text[i] != c:
                i += 2 if text[i] == "\\" else 1
        elif c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif depth == 0:
            two = text[i:i + 2]
            if two == "||" or (c == "?" and text[i - 1:i + 2] not in ("=?=",)):
                return None
            if two == "&&":
                parts.append(text[start:i].strip())
                start = i + 2
                i += 1
        i += 1
    parts.append(text[start:].strip())
    if len(parts) < 2:
        return None
    try:
        if str(parse_expr(" && ".join(parts))) != text or not all(
                str(parse_expr(p)) for p in parts):
            return None
    except ValueError:
        return None
    return parts
