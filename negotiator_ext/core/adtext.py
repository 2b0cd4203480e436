"""Ads kept as their attributes' text, for the many job ads of a large pool.

A job queue of 100,000 ads held as classad2 objects costs about 8 KB per ad, and
reading one attribute through classad2 costs a microsecond or more. The negotiator
only ever looks at a few attributes of most jobs. So job ads are kept as tuples of
(lower-case name, expression text) pairs, shared between ads (most lines of a job ad
are the same in every job of its cluster), and:

* `TextValues` evaluates an attribute's text with classad2 once per distinct text, and
  `Job.value` falls back to the job's own ad only when the text is an expression;
* `row_ad` (through `Job.ad()` or a resource request) builds the classad2 ad of one
  job when an expression has to be evaluated against it: one per resource request,
  not one per job.

Every text was parsed by classad2 when the file was read (adapters.adfiles); nothing
here parses ClassAd syntax itself.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Iterable, Iterator, Sequence

from . import classads

Pairs = tuple  # tuple[tuple[str, str], ...]: (lower-case name, expression text)


@dataclass(eq=False)
class TextStore:
    """What ads of one snapshot share: interned pairs and each name's spelling."""
    pairs: dict = field(default_factory=dict)     # (lname, text) -> the shared pair
    names: dict = field(default_factory=dict)     # lname -> the name as first written


class TextAds(Sequence):
    """A list of ads as tuples of shared (lower-case name, text) pairs. Indexing or
    iterating yields classad2 ads, built on demand (for small uses and tests); the
    cycle reads `rows` directly."""

    runs: bytearray | None = None       # (tables pickled before it existed)

    def __init__(self, store: TextStore | None = None):
        self.store = store if store is not None else TextStore()
        self.rows: list[Pairs] = []
        # a job table's `job_queue.queue_heads`, when computed as it was read (one
        # per row; ignored unless there is one for every row)
        self.heads: list | None = None
        # beside the heads: 1 for a row `job_queue.run_proc` found the job of the row
        # before but for its proc (reading nothing), else 0
        self.runs: bytearray | None = None

    def add(self, attrs: Iterable[tuple[str, str]]) -> None:
        """Append one ad given as (Name, text) pairs in file order (a later duplicate
        of a name wins, as in classad2)."""
        self.rows.append(self.row_of(attrs))

    def row_of(self, attrs: Iterable[tuple[str, str]]) -> Pairs:
        """The row `add` would append for (Name, text) pairs `attrs`, interned in the
        store, not appended."""
        pair = self.pair
        return tuple([pair(n, t) for n, t in attrs])

    def add_row(self, row: Pairs) -> None:
        """Append one ad already given as shared pairs."""
        self.rows.append(row)

    def pair(self, name: str, text: str) -> tuple[str, str]:
        """The shared (lower-case name, text) pair."""
        lname = name.lower()
        names = self.store.names
        if lname not in names:
            names[lname] = name
        key = (lname, text)
        return self.store.pairs.setdefault(key, key)

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self.ad(j) for j in range(*i.indices(len(self.rows)))]
        return self.ad(i)

    def __iter__(self) -> Iterator:
        for i in range(len(self.rows)):
            yield self.ad(i)

    def ad(self, i: int):
        return row_ad(self.rows[i], self.store.names)


def row_ad(row: Pairs, names: dict):
    """The classad2 ad of one row."""
    return classads.parse_old_ad("\n".join(f"{names.get(n, n)} = {t}" for n, t in row))


# what TextValues.in_texts gives where the texts alone cannot tell
NOT_KNOWN = object()

_PLAIN_INT = re.compile(r"0|[1-9][0-9]{0,17}")
# a string literal with no escape in it: its value is the text between the quotes
_PLAIN_STRING = re.compile(r'"[^"\\]*"')


def plain_value(text: str | None):
    """The value of an attribute's text that is a plain decimal integer or a string
    literal with no escape in it (the value `ad[attr]` gives for it, read without
    classad2's parser); None for any other text, and for none."""
    if text is None:
        return None
    if _PLAIN_STRING.fullmatch(text):
        return text[1:-1]
    if _PLAIN_INT.fullmatch(text):
        return int(text)
    return None


class TextValues:
    """Attribute texts evaluated once per distinct text.

    `literal(text)` is (True, value) when the text names no attribute (a literal, or an
    expression of literals), so its value is the same in every ad; else (False, None),
    and the caller evaluates it in the ad itself. Texts are in old ClassAd syntax, as
    `-long` prints them and `classads.attribute_texts` gives them."""

    def __init__(self):
        self._lit: dict[str, tuple[bool, object]] = {}
        self._names: dict[str, frozenset[str]] = {}
        self._in_texts: dict = {}
        self._expr_names: dict = {}

    def size(self) -> int:
        """How many texts and sets of texts it holds."""
        return len(self._lit) + len(self._names) + len(self._in_texts)

    def literal(self, text: str) -> tuple[bool, object]:
        got = self._lit.get(text)
        if got is None:
            if _PLAIN_INT.fullmatch(text):
                # a decimal integer (every ClusterId, ProcId, QDate...): its value without
                # classad2's parser, the same value it gives (no sign, no leading zero,
                # well inside 64 bits)
                got = self._lit[text] = (True, int(text))
                return got
            if _PLAIN_STRING.fullmatch(text):
                # (every Name, address and user of a slot ad: unique texts, each
                # parsed once otherwise)
                got = self._lit[text] = (True, text[1:-1])
                return got
            try:
                tree = classads.parse_old_value(text)
            except ValueError:
                got = (True, classads.ERROR)
            else:
                names = self._names.get(text)
                if names is None:   # the tree is at hand: no second parse in names()
                    names = self._names[text] = classads.names_in(tree)
                got = (False, None) if names else (True, classads.eval_expr(tree))
            self._lit[text] = got
        return got

    def in_texts(self, texts: dict, lname: str):
        """What attribute `lname` evaluates to in an ad whose attributes are `texts`
        ({lower-case name: text}; MY alone, no TARGET), worked out from the texts in its
        reach (its own, those of the names it mentions, theirs, ...), once per distinct
        set of them; NOT_KNOWN where a text in reach may read more than texts: it calls
        a function (time(), eval() ...), subscripts, or names another scope."""
        reach = self._reach(texts, (lname,))
        if reach is None:
            return NOT_KNOWN
        key = (lname, reach)
        got = self._in_texts.get(key, NOT_KNOWN)
        if got is NOT_KNOWN:
            got = self._in_texts[key] = classads.eval_attr(texts_ad(reach), lname)
        return got

    def expr_in_texts(self, texts: dict, expr: str):
        """What the expression `expr` (a config's: SLOT_WEIGHT) evaluates to with MY an
        ad whose attributes are `texts`, as `in_texts` works it out; NOT_KNOWN where it
        cannot."""
        names = self._expr_names.get(expr)
        if names is None:
            tree = classads.parse_expr(expr)
            plain = "(" not in str(tree) and "[" not in str(tree)
            names = self._expr_names[expr] = (
                (tree, tuple(classads.names_in(tree))) if plain else (None, None))
        tree, refs = names
        reach = self._reach(texts, refs) if tree is not None else None
        if reach is None:
            return NOT_KNOWN
        key = (expr, reach)
        got = self._in_texts.get(key, NOT_KNOWN)
        if got is NOT_KNOWN:
            got = self._in_texts[key] = classads.eval_expr(tree, texts_ad(reach))
        return got

    def _reach(self, texts: dict, start) -> frozenset | None:
        """The (name, text or None) of every attribute in reach of the names `start`
        in `texts`; None when a text in reach calls, subscripts or names a scope."""
        reach: dict = {}
        todo = list(start)
        while todo:
            n = todo.pop()
            if "." in n:
                return None
            if n in reach:
                continue
            t = reach[n] = texts.get(n)
            if t is None:
                continue
            if "(" in t or "[" in t:
                return None
            todo.extend(self.names(t))
        return frozenset(reach.items())

    def names(self, text: str) -> frozenset[str]:
        """Every attribute name the text mentions, lower-cased, scope prefix kept
        (`target.x`) except MY's."""
        got = self._names.get(text)
        if got is None:
            if _PLAIN_INT.fullmatch(text) or _PLAIN_STRING.fullmatch(text):
                return frozenset()
            try:
                tree = classads.parse_old_value(text)
            except ValueError:
                got = frozenset()
            else:
                got = classads.names_in(tree)
            self._names[text] = got
        return got


def texts_ad(pairs: Iterable[tuple[str, str | None]]):
    """An ad of the (name, text) pairs that hold a text (None: the attribute is absent):
    the few attributes a value reaches, parsed instead of the whole ad."""
    return row_ad([(n, t) for n, t in pairs if t is not None], {})


class Job:
    """One job ad seen through its texts (the cycle's view of a queued job)."""
    __slots__ = ("texts", "row", "_names", "_values", "_ad")

    def __init__(self, row: Pairs, names: dict, values: TextValues):
        self.row = row
        self.texts = dict(row)
        self._names = names
        self._values = values
        self._ad = None

    def value(self, lname: str):
        """The attribute's value, evaluated in this ad (UNDEFINED when absent)."""
        t = self.texts.get(lname)
        if t is None:
            return classads.UNDEFINED
        lit, v = self._values.literal(t)
        if lit:
            return v
        return classads.eval_attr(self.ad(), lname)

    def ad(self):
        if self._ad is None:
            self._ad = row_ad(self.row, self._names)
        return self._ad


class AdView:
    """A slot ad as the pool reads it before the cycle writes into it: an attribute
    whose text is a plain literal (names no attribute, calls no function) is that
    literal's value, evaluated once per distinct text (`TextValues`); an absent one is
    UNDEFINED; anything else is evaluated in the ad itself (`classads.eval_attr`).
    `texts` ({lower-case name: text}, the ad's own attributes) None: always the ad.
    What is evaluated in the ad is kept for the view's life (the pool reads SlotWeight
    and Cpus twice: its checks, then the slot's usage and size)."""
    __slots__ = ("ad", "texts", "_values", "_evaluated")

    def __init__(self, ad, texts: dict | None, values: TextValues | None):
        self.ad = ad
        self.texts = texts
        self._values = values
        self._evaluated: dict | None = None

    def __contains__(self, attr: str) -> bool:
        if self.texts is None:
            return attr in self.ad
        return attr.lower() in self.texts

    def value(self, attr: str):
        texts = self.texts
        if texts is None:
            return classads.eval_attr(self.ad, attr)
        t = texts.get(attr.lower())
        if t is None:
            return classads.UNDEFINED
        if "(" not in t:
            lit, v = self._values.literal(t)
            if lit and type(v) in classads.LITERAL_TYPES:
                return v
        key = attr.lower()
        done = self._evaluated
        if done is None:
            done = self._evaluated = {}
        else:
            got = done.get(key, _NOT_YET)
            if got is not _NOT_YET:
                return got
        if self._values is not None:
            got = self._values.in_texts(texts, key)
            if got is not NOT_KNOWN:
                done[key] = got
                return got
        got = done[key] = classads.eval_attr(self.ad, attr)
        return got


    def expr_value(self, expr: str):
        """The config expression `expr`'s value with MY this ad (no TARGET)."""
        if self.texts is not None and self._values is not None:
            got = self._values.expr_in_texts(self.texts, expr)
            if got is not NOT_KNOWN:
                return got
        return classads.eval_expr(expr, self.ad)


_NOT_YET = object()


def as_text_ads(ads: Sequence) -> "TextAds":
    """Job ads given as classad2 ads (tests, the bindings) in the text form."""
    if isinstance(ads, TextAds):
        return ads
    out = TextAds()
    for ad in ads:
        out.add(classads.attribute_texts(ad))
    return out


class TextMemo:
    """`fn(job)` remembered by the texts of the attributes it reads (`names`), for
    results that depend on those attributes only. A key whose texts are not all
    literals (an expression reaching further) is computed every time."""

    def __init__(self, fn, names: Iterable[str], values: TextValues):
        self.fn = fn
        self.names = tuple(names)
        self.values = values
        self._memo: dict[tuple, object] = {}

    def __call__(self, job: Job):
        key = tuple(map(job.texts.get, self.names))
        got = self._memo.get(key, _MISSING)
        if got is _MISSING:
            got = self.fn(job)
            if all(t is None or self.values.literal(t)[0] for t in key):
                self._memo[key] = got
        return got


_MISSING = object()
