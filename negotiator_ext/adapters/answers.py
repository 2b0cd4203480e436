"""What the daemons answer through the bindings, checked before a capture uses it (a list
of ClassAds, job ads with whole-number ids), an error in one line, and what a capture's
calls share: HTCondor's client timeouts for its duration, the time of each step."""

from __future__ import annotations

import contextlib
import time
import unicodedata
from typing import Any

import classad2

from ..core.job_queue import id_number
from ..views.text import escape_char


# HTCondor's own client-side timeouts (seconds), set for the duration of a capture.
_TIMEOUT_KNOBS = ("QUERY_TIMEOUT", "Q_QUERY_TIMEOUT")


def _real_bindings(htcondor) -> bool:
    schedd = getattr(htcondor, "Schedd", None)
    return isinstance(schedd, type) and str(getattr(schedd, "__module__", "")).startswith(
        "htcondor2.")


class _Lap:
    """Adds the time since the last call to a step's total."""

    def __init__(self, timings: dict):
        self.timings = timings
        self.t = time.perf_counter()

    def __call__(self, step: str) -> None:
        t = time.perf_counter()
        self.timings[step] += t - self.t
        self.t = t


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text or type(exc).__name__


@contextlib.contextmanager
def _client_timeouts(htcondor, timeout: int, query_timeout: int | None = None):
    """Best effort: HTCondor's client timeouts come from config (QUERY_TIMEOUT for
    collector queries, `query_timeout` when given, Q_QUERY_TIMEOUT for schedd queries);
    set them for the capture and put the previous values back afterwards."""
    param = getattr(htcondor, "param", None)
    saved: dict[str, Any] = {}
    if param is not None and timeout and timeout > 0:
        for knob in _TIMEOUT_KNOBS:
            value = (query_timeout if knob == "QUERY_TIMEOUT" and query_timeout
                     else timeout)
            try:
                saved[knob] = param.get(knob)
                param[knob] = str(int(value))
            except Exception:
                saved.pop(knob, None)
    try:
        yield
    finally:
        for knob, value in saved.items():
            try:
                if value is None:
                    del param[knob]
                else:
                    param[knob] = str(value)
            except Exception:
                pass


class BadAnswer(ValueError):
    """What a schedd answered is not job ads."""


def _bad_answer(exc: Exception) -> str:
    if isinstance(exc, BadAnswer):
        return str(exc)
    return f"its answer could not be read as job ads: {_comment_text(_one_line(exc))[:200]}"


def _a(noun: str) -> str:
    return f"{'an' if noun[:1].lower() in 'aeiou' else 'a'} {noun}"


def _kind(value) -> str:
    if value is None:
        return "None"
    name = type(value).__name__
    return f"{'an' if name[:1].lower() in 'aeiou' else 'a'} {name}"


def checked_ads(answer, what: str = "ad") -> list:
    """A daemon's answer that must be a list of ClassAds (a collector's query or
    locateAll, a schedd's job query), as that list. BadAnswer, naming the first thing
    wrong ("answered with ..."), otherwise; `what`: what each item should be."""
    items = _answer_list(answer, what)
    for i, ad in enumerate(items, start=1):
        if not isinstance(ad, classad2.ClassAd):
            raise BadAnswer(f"answered with something that is not {_a(what)}: item {i} "
                            f"of {len(items)} is {_kind(ad)}")
    return items


def _answer_list(answer, what: str) -> list:
    """A daemon's answer that must be a list (of `what`s), as a list; BadAnswer when it
    is not one (None, a string, a single ad, ...) or cannot be read through."""
    if answer is None or isinstance(answer, (str, bytes, bytearray, dict, classad2.ClassAd)):
        raise BadAnswer(f"answered with {_kind(answer)} instead of a list of {what}s")
    try:
        return list(answer)
    except Exception as exc:
        raise BadAnswer(f"answered with {_kind(answer)} instead of a list of {what}s "
                        f"({_comment_text(_one_line(exc))[:120]})") from None


def checked_job_ads(answer) -> list:
    """A schedd's answer to a job query as a list of job ads: ClassAds, each with
    integer ClusterId >= 0 and ProcId >= 0, no job twice. BadAnswer, naming the first
    thing wrong, otherwise."""
    items = checked_ads(answer, "job ad")
    seen: dict[tuple[int, int], int] = {}
    for i, ad in enumerate(items, start=1):
        ids = []
        for attr in ("ClusterId", "ProcId"):
            v = ad.get(attr)
            number = id_number(v)
            if number is None:
                shown = _comment_text(str(v))[:40] if v is not None else "missing"
                raise BadAnswer(f"answered with an ad that is not a job ad: item {i} of "
                                f"{len(items)} has {attr} {shown}")
            ids.append(number)
        first = seen.setdefault((ids[0], ids[1]), i)
        if first != i:
            raise BadAnswer(f"answered with job {ids[0]}.{ids[1]} twice: items {first} "
                            f"and {i} of {len(items)}")
    return items


_COMMENT_ESCAPED = frozenset({"Cc", "Cs", "Cf", "Zl", "Zp"})


def _comment_text(text: str) -> str:
    """`text` for a comment line: one line of visible characters; each control, line
    separator or format character and each backslash (so that the line cannot end in
    one) as its escape."""
    return "".join(escape_char(c) if c == "\\" or unicodedata.category(c) in _COMMENT_ESCAPED
                   else c for c in text)
