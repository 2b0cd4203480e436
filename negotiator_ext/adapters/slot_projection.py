"""Which slot attributes a cycle over files parses (its slot projection).

A slot ad as `condor_status -long` prints it has about 190 attributes; a cycle reads a
few dozen of them. Parsing the others into classad2 ads is most of the cost of reading
the slots of a files snapshot, and most of its memory. So a files snapshot's slots are
read as text first (each line checked as always: bad input is named by file, line, ad
and attribute whatever the attribute), and their ClassAds are built, once the jobs and
the config are known, from the lines of the attributes something can read:

- what the negotiator's rules read of a slot ad by name: every word of the package's
  own source (`code_words`: a rule that starts reading one more attribute is never
  starved of it), every attribute whose name begins with a prefix the rules build
  names from (`Child*`, `Consumption*`, `TotalSlot*`), and every resource the slots'
  `MachineResources` name;
- every name any expression of any slot or any job references (each distinct text
  walked once with classad2's `externalRefs`, whatever its scope: a job's `TARGET.x`
  and unscoped names, a slot's own chain `Requirements -> Start -> ...`, a job
  attribute that refers back to the slot);
- every name-like word in the config's values (the knobs' expressions, as HTCondor's
  reader expanded them).

An attribute outside all three cannot change any evaluation, so the decisions are the
same (a test runs every recording both ways). Where an expression can build a name at
run time (`eval(...)`, or a subscript such as `TARGET["Memory"]`), no name can be ruled
out and every attribute is parsed. The snapshot records the projection; a pool built
from it under another config (`build_pool`) parses again what that config reads more.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

import classad2

from ..core.adtext import plain_value
from ..core.classads import LazyAd
from .adfiles import _WRAP, _unwrapped, parse_ad_lines
from .snapshot import check_slot_name


# Names the rules build from a prefix and a resource or attribute name (the p-slot's
# Child<attr> lists, Consumption<asset>, TotalSlot<attr>): every such attribute is kept.
BASE_SLOT_PREFIXES: tuple[str, ...] = ("child", "consumption", "totalslot")

_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# a value that references nothing: a number, a plain string, a boolean, undefined
_LITERAL = re.compile(r'-?\d+(\.\d*)?([eE][-+]?\d+)?|"[^"\\]*"|(?i:true|false|undefined|error)')
# an expression that can name an attribute at run time: eval(), or a subscript other
# than a whole number (`split(TARGET.CondorVersion)[1]`, in every job condor_submit
# writes) that is not a record's `[ name = ...` either (`TARGET["Memory"]` selects)
_DYNAMIC = re.compile(r"(?i)\beval\s*\(|\[(?!\s*\d+\s*\]|\s*[A-Za-z_]\w*\s*=[^=]|\s*\])")
_SCOPES = frozenset(("my", "target", "parent"))
_EMPTY = classad2.ClassAd()


@dataclass(frozen=True)
class SlotProjection:
    """The lower-case names a snapshot's slot ClassAds were built with (None: all of
    them), and every name the slots have (to tell what a wider projection would add);
    with each slot's texts of those names, as the cycle reads a slot's texts (a dict of
    lower-case name -> text, built with the ad), for the ads `ads` alone."""
    names: frozenset[str] | None
    present: frozenset[str]
    # False: built before the jobs were read (`early`): `project` adds what they read
    jobs_read: bool = True
    texts: tuple | None = dataclasses.field(default=None, compare=False, repr=False)
    ads: tuple | None = dataclasses.field(default=None, compare=False, repr=False)

    def texts_of(self, ads) -> tuple | None:
        """Each slot's texts of the projection's names, when `ads` are the ads they
        were built with; else None (the whole rows then serve)."""
        return self.texts if self.texts is not None and ads is self.ads else None


def config_words(config) -> set[str]:
    """Every name-like word of the config's string values (lower-case), nested values
    (groups, mappings) included: whatever a knob's expression may reference."""
    out: set[str] = set()
    seen: set[int] = set()

    def walk(v) -> None:
        if isinstance(v, str):
            out.update(w.lower() for w in _WORD.findall(v))
        elif isinstance(v, (bool, int, float)) or v is None:
            return
        elif id(v) in seen:
            return
        elif dataclasses.is_dataclass(v):
            seen.add(id(v))
            for f in dataclasses.fields(v):
                walk(getattr(v, f.name))
        elif isinstance(v, dict) or hasattr(v, "items"):
            seen.add(id(v))
            for k, x in v.items():
                walk(k)
                walk(x)
        elif isinstance(v, (list, tuple, set, frozenset)):
            seen.add(id(v))
            for x in v:
                walk(x)

    walk(config)
    return out


def referenced_names(texts: Iterable[str]) -> set[str] | None:
    """Every attribute name the expression texts reference, whatever its scope (lower-
    case); None when one of them can build a name at run time, or when classad2's
    new-syntax reader cannot read one (an old-syntax string with a backslash can be
    such a text: where both read it, the new syntax's strings end no later than the
    old syntax's, so it sees every reference the old one does). Literal texts are
    skipped."""
    out: set[str] = set()
    for text in texts:
        if _LITERAL.fullmatch(text):
            continue
        try:
            expr = classad2.ExprTree(text)
        except Exception:       # noqa: BLE001 - (see above)
            return None
        if text.startswith(_WRAP):
            inner = _unwrapped(expr)
            if inner is not None:
                expr, text = inner, str(inner)
        if _DYNAMIC.search(_strings_out(text)):
            return None
        for ref in _EMPTY.externalRefs(expr):
            out.update(p.lower() for p in ref.split(".") if p.lower() not in _SCOPES)
    return out


_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')


def _strings_out(text: str) -> str:
    """The text without its string literals (a `[` in a string is no subscript)."""
    return _STRING.sub('""', text) if '"' in text else text


def needed_slot_attrs(slot_pairs: Iterable[tuple[str, str]],
                      job_pairs: Iterable[tuple[str, str]], config) -> frozenset[str] | None:
    """The lower-case slot attribute names a cycle can read (see the module's doc), from
    the slots' and the jobs' distinct (lower-case name, text) pairs and the config; None
    when every attribute must be kept."""
    slot_pairs = list(slot_pairs)
    slot_refs = referenced_names({t for _, t in slot_pairs})
    if slot_refs is None:
        return None
    job_refs = referenced_names({t for _, t in job_pairs})
    if job_refs is None:
        return None
    base = code_words()
    if base is None:
        return None
    names = set(base) | slot_refs | job_refs | config_words(config)
    for lname, text in slot_pairs:
        if lname == "machineresources":
            names.update(w.lower() for w in _WORD.findall(text))
    present = {lname for lname, _ in slot_pairs}
    names.update(n for n in present if n.startswith(BASE_SLOT_PREFIXES))
    return frozenset(names & present)


def job_pairs(tables) -> Iterable[tuple[str, str]]:
    """Every distinct (name, text) pair of the job tables (each table's store holds its
    rows' pairs)."""
    seen: set[int] = set()
    for table in tables:
        store = table.store
        if id(store) not in seen:
            seen.add(id(store))
            yield from store.pairs


def early(texts, source: str, config):
    """The slot ads of `texts` (a slots file read as text, `source`) built as soon as
    the config is known, while the jobs are still being read: with what the slots and
    the config can read. `project` adds what the jobs reference, once they are read.
    (ads, SlotProjection)."""
    slot_pairs = list(texts.store.pairs)
    names = needed_slot_attrs(slot_pairs, (), config)
    present = frozenset(lname for lname, _ in slot_pairs)
    ads, rows = _ads(texts, source, names)
    return ads, SlotProjection(names, present, jobs_read=False, texts=rows, ads=ads)


def project(snap, config):
    """`snap` with slot ClassAds of the attributes `config` and its jobs can read
    (`needed_slot_attrs`), and the projection recorded: built now when its slots were
    read as text only (`load_snapshot(..., slot_ads=False)`); when they were built
    before the jobs were read (`early`, with what the slots and the config read), what
    the jobs reference besides is added to them (no pool holds them yet)."""
    texts = snap.slot_texts
    jobs = job_pairs(snap.jobs.values())
    proj = snap.slot_projection
    if snap.slot_rows_only or proj is None:
        slot_pairs = list(texts.store.pairs)
        names = needed_slot_attrs(slot_pairs, jobs, config)
        present = frozenset(lname for lname, _ in slot_pairs)
        ads, rows = _ads(texts, snap.slots_source, names)
        return dataclasses.replace(snap, slots=ads, slot_rows_only=False,
                                   slot_projection=SlotProjection(names, present,
                                                                  texts=rows, ads=ads))
    names, rows = proj.names, proj.texts_of(snap.slots)
    if names is not None:
        refs = referenced_names({t for _, t in jobs})
        # (the config's words again: `early` may have had another config's)
        more = (proj.present if refs is None
                else (refs | config_words(config)) & proj.present) - names
        names = None if refs is None else names | more
        if more:
            rows = _texts(texts, names)
            _add(snap.slots, texts, snap.slots_source, more, rows)
    return dataclasses.replace(snap, slot_projection=SlotProjection(
        names, proj.present, texts=rows, ads=snap.slots))


def widened(snap, config):
    """`snap` as `build_pool` takes it under `config`: its slot ClassAds built again
    when `config` reads a slot attribute the recorded projection left out (a what-if's
    config); `snap` itself otherwise."""
    proj = snap.slot_projection
    if proj is None or proj.names is None:
        return snap
    more = (config_words(config) & proj.present) - proj.names
    if not more:
        return snap
    names = proj.names | more
    ads, rows = _ads(snap.slot_texts, snap.slots_source, names)
    return dataclasses.replace(snap, slots=ads, slot_projection=SlotProjection(
        names, proj.present, texts=rows, ads=ads))


def _lines_of(texts, names: frozenset[str] | None) -> dict:
    """Each distinct pair of `texts` whose name is in `names` (None: all) -> its line."""
    spelled = texts.store.names
    return {pair: f"{spelled.get(pair[0], pair[0])} = {pair[1]}"
            for pair in texts.store.pairs if names is None or pair[0] in names}


def _ads(texts, source: str, names: frozenset[str] | None) -> tuple[tuple, tuple | None]:
    """A ClassAd of each row of `texts`, of the attributes `names` (None: all), and
    each row's texts of those names as a dict (the cycle's `Slot.texts`: a later
    duplicate wins, as in the ad; None with `names` None: the whole rows serve).

    With `names`, each ad is parsed from its texts only when something first reads it
    (a `LazyAd`): a cycle reads the texts of most slots and evaluates few of their ads,
    and the parsed ads of 100,000 slots would take hundreds of MiB. Its Name is checked
    now, on its text."""
    if names is None:
        get = _lines_of(texts, names).get
        ads = []
        for i, row in enumerate(texts.rows, start=1):
            ads.append(ad := parse_ad_lines(list(map(get, row)), source, i))
            check_slot_name(ad, source, i)
        return tuple(ads), None
    rows = _texts(texts, names)
    make = _SlotAdMaker(texts.store.names, source)
    ads = []
    for i, row in enumerate(rows, start=1):
        ad = LazyAd(make, (row, i))
        if not isinstance(plain_value(row.get("name")), str):
            check_slot_name(ad, source, i)     # (parsed now: its Name is no plain string)
        ads.append(ad)
    return tuple(ads), rows


class _SlotAdMaker:
    """Parses a slot's ClassAd from its texts (a row of `_texts`) when it is first
    read: its lines as they were read (each attribute's name as the file spelled it)."""

    def __init__(self, spelled: dict, source: str):
        self.spelled, self.source = spelled, source

    def __call__(self, data) -> classad2.ClassAd:
        row, i = data
        get = self.spelled.get
        return parse_ad_lines([f"{get(n, n)} = {t}" for n, t in row.items()], self.source, i)


def _texts(texts, names: frozenset[str] | None) -> tuple | None:
    """Each row's texts of the attributes `names` (see `_ads`)."""
    if names is None:
        return None
    return tuple({n: t for n, t in row if n in names} for row in texts.rows)



def _add(ads, texts, source: str, names: frozenset[str], rows: tuple | None) -> None:
    """The attributes `names` of each row of `texts` added to its ad, in place: an ad
    not parsed yet is parsed later from its row of `rows` (its texts from now on)
    instead, where there are such rows (None: every attribute, the whole rows)."""
    get = _lines_of(texts, names).get
    for i, (ad, row) in enumerate(zip(ads, texts.rows), start=1):
        if rows is not None and type(ad) is LazyAd and not ad.made():
            ad.remake_from((rows[i - 1], i))
            continue
        lines = list(filter(None, map(get, row)))
        if lines:
            ad.update(parse_ad_lines(lines, source, i))


_PACKAGE = Path(__file__).resolve().parent.parent


@functools.lru_cache(maxsize=1)
def code_words() -> frozenset[str] | None:
    """Every word (lower-case) of the package's own source files: a superset of the
    slot attribute names its rules read by name (each is spelled in a string of the
    code), read once a process (1.7 MB, about 30 ms). None when the sources are not
    there to read (then every attribute is kept)."""
    words: set[str] = set()
    try:
        paths = sorted(_PACKAGE.rglob("*.py"))
        for path in paths:
            words.update(_WORD.findall(path.read_text(encoding="utf-8")))
    except (OSError, UnicodeDecodeError):
        return None
    if not paths:
        return None
    return frozenset(w.lower() for w in words)
