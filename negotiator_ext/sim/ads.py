"""The simulated pool's ads: a slot's ad as its startd advertises it (built from its
shape, its resources and its claim, kept until the slot changes) and a job's ad as its
schedd offers it to the negotiator (a scenario's built from its arrival, a recorded
job's its own attributes with its state now)."""

from __future__ import annotations

import operator
import re

import classad2

from ..core import classads
from ..core.adtext import AdView, TextAds, TextStore, TextValues
from ..scenario import Scenario
from .schedd_startd import SimJob, SimSlot

class _Ad:
    """A slot ad as built, and what is taken from it: its figures under a config
    (`_facts`), its texts (`_slot_texts`), and its memo: what the cycle works out of
    the ad alone (`Pool.slot_memos`). `values`: (shape, kind, own values, claim's
    values) it was built of (`_slot_values`), when its texts were made from them. A
    claimed slot's ad is made only when first read (`_built`): until then `ad` is a
    `classads.LazyAd` that builds it, and its texts are made when first asked for."""
    __slots__ = ("ad", "facts", "memo", "_texts", "req", "values")

    def __init__(self, ad: classad2.ClassAd):
        self.ad = ad
        self.facts: tuple | None = None
        self._texts: dict | None = None
        self.memo: dict = {}
        self.req = None             # its Requirements, parsed (claim reuse: `_fits`)
        self.values: tuple | None = None

    @property
    def texts(self) -> dict | None:
        got = self._texts
        if got is _LATER:
            texts: dict = {}
            _make_ad(*self.values, texts=texts)
            got = self._texts = texts or None
        return got

    @texts.setter
    def texts(self, texts: dict | None) -> None:
        self._texts = texts


_LATER = object()       # _Ad._texts: made when first asked for


def _slot_ad(s: SimSlot, sc: Scenario) -> classad2.ClassAd:
    """The slot's ad as its startd advertises it (cached until the slot changes)."""
    return _built(s, sc).ad


def _built(s: SimSlot, sc: Scenario) -> _Ad:
    """The slot's ad as built, kept until the slot changes (with its texts, when they
    were made beside it). An unclaimed static slot's ad depends on the slot alone: it
    is built once and is the same ad (with what was taken from it) each time the slot
    is unclaimed again. A claimed slot that is not partitionable is no candidate for
    a job (unless a claim can be preempted): the cycle reads its figures alone, most
    often worked out already for an ad alike (`_facts`), so its ad is made only when
    something reads it."""
    b = s._ad
    if b is None:
        idle = s.job is None and not s.partitionable and s.parent is None
        b = s._idle_ad if idle else None
        if b is None:
            values = (s.shape, *_slot_values(s))
            if s.job is not None and not s.partitionable:
                b = _Ad(classads.LazyAd(_ad_of, values))
                b.texts = _LATER
            else:
                texts: dict = {}
                b = _Ad(_make_ad(*values, texts=texts))
                if texts:
                    b.texts = texts
            b.values = values
            if idle:
                s._idle_ad = b
        s._ad = b
    return b


def _ad_of(values: tuple):
    """A slot ad of its values (`_Ad.values`), made anew (a `LazyAd`'s maker)."""
    return _make_ad(*values)


def _new_slot_ad(s: SimSlot, sc: Scenario, inline: bool = True,
                 texts: dict | None = None) -> classad2.ClassAd:
    """The slot's ad, parsed from its old-syntax text in one classad2 call (setting the
    attributes one by one costs four times as much). When a text spans lines (or not
    `inline`), the attributes are set one by one, the shape's after the slot's and
    before the job's. `texts`: filled, when the ad is parsed in one call, with its
    attribute texts as `classads.attribute_texts` prints them (lower-case name ->
    text), made from the texts parsed (`_printed`) rather than printed from the ad."""
    return _make_ad(s.shape, *_slot_values(s), inline=inline, texts=texts)


def _slot_values(s: SimSlot) -> tuple[str, dict, dict]:
    """What the slot's ad holds beside its shape's: its kind ("p", "d" or "s"), its own
    values (name, address, resources) and its claim's (state, user, job), each
    name -> value in the order they are set."""
    ip = f"<10.{(s.index >> 16) & 255}.{(s.index >> 8) & 255}.{s.index & 255}:9618>"
    own = {"Name": s.name, "Machine": s.machine, "StartdIpAddr": ip, "MyAddress": ip,
           "Cpus": _num(s.cpus), "Memory": _num(s.memory), "Disk": _num(s.disk)}
    if s.shape.gpus:
        own["GPUs"] = _num(s.gpus)
    if s.partitionable:
        kind = "p"
        own["NumDynamicSlots"] = len(s.children)
        own["NumClaims"] = int(s.cpus)     # the claim ids a consumption policy hands out
    elif s.parent is not None:
        kind = "d"
        own["ParentSlotName"] = s.parent.name
    else:
        kind = "s"
    job = s.job
    later: dict = {}
    if job is not None:
        c = job.cls
        later.update(State="Claimed", Activity="Busy", RemoteUser=c.user, RemoteOwner=c.user,
                     RemoteScheddName=c.schedd, JobId=job.id,
                     EnteredCurrentState=job.started, JobStart=job.started)
        if s.rank_of_job is not None:
            later["CurrentRank"] = s.rank_of_job
        if c.group:
            later.update(AccountingGroup=c.accounting_group, RemoteGroup=c.group,
                         RemoteNegotiatingGroup=c.group)
        if c.concurrency_limits:
            later["ConcurrencyLimits"] = c.concurrency_limits
    else:
        later.update(State="Unclaimed", Activity="Idle")
    return kind, own, later


def _make_ad(shape, kind: str, own: dict, later: dict, inline: bool = True,
             texts: dict | None = None) -> classad2.ClassAd:
    """A slot ad of `shape` and `kind` with these values (`_slot_values`): see
    `_new_slot_ad`."""
    # a control character (a line break) in a text or a name: set one by one (the
    # shape's texts were looked at once; a value the shape replaces is looked at all
    # the same: either way gives the same ad)
    own_texts = _texts_of(own) if inline and not shape.control_in_texts else None
    later_texts = _texts_of(later) if own_texts is not None else None
    if later_texts is not None:
        lay = _layout(shape, kind)
        frame = lay.frame
        given = lay.texts.copy()
        at, index = frame.at, frame.index
        placed = []     # the places the slot's and the job's values took, with their
        known = []      # ... printed texts where known at once (else None)
        for k, t, pr in own_texts:
            i = at.get(k)
            if i is not None:           # (else the shape's own value stands)
                given[i] = t
                placed.append(i)
                known.append(pr)
        extra = []
        extra_known = []
        for k, t, pr in later_texts:
            i = index.get(k.lower())
            if i is None:
                extra.append((k, t))
                extra_known.append(pr)
            else:
                given[i] = t
                placed.append(i)
                known.append(pr)
        # once the layout with these names after it was read whole (each line one
        # attribute), it always is: the values placed are single literals without a
        # line break. Then the ad is parsed (its text laid out) only when something
        # reads it (most claimed slots' never are: the cycle reads their figures from
        # the texts)
        names = tuple([k for k, _ in extra])
        whole = names in lay.whole
        if whole and texts is not None:
            ad = classads.LazyAd(_parse_parts, (frame.heads, given, extra))
        else:
            ad = _parse_parts((frame.heads, given, extra))
            whole = len(ad) == len(given) + len(extra)
            if whole:
                lay.whole.add(names)
        if whole:
            if texts is not None:
                if lay.printed is None:
                    lay.printed = [None if t is None else _printed(t) for t in lay.texts]
                printed = lay.printed.copy()
                for i, pr in zip(placed, known):
                    printed[i] = _printed(given[i]) if pr is None else pr
                texts.update(zip(frame.lower, printed))
                texts.update((k.lower(), _printed(t) if pr is None else pr)
                             for (k, t), pr in zip(extra, extra_known))
            return ad
    ad = classad2.ClassAd()
    for k, v in _base_attrs(shape, kind):
        v = own[k] if v is _OWN else v
        ad[k] = classad2.ExprTree(v.text) if type(v) is _Expr else v
    for k, text in shape.attrs.items():
        ad[k] = classads.parse_expr(text)
    for k, v in later.items():
        ad[k] = v
    return ad


_OWN = object()         # _base_attrs: the slot's own value (`own` in _new_slot_ad)


def _parse_parts(parts: tuple):
    """A slot ad from its layout's line heads, its texts in their places and the
    (name, text) pairs after them, as one old-syntax text (`_new_slot_ad`)."""
    heads, given, extra = parts
    lines = list(map(operator.add, heads, given))
    lines += [f"{k} = {t}" for k, t in extra]
    return classads.parse_old_ad("\n".join(lines))


def _texts_of(values: dict) -> list[tuple[str, str, str | None]] | None:
    """(name, text, print if known: `_text_known`) of each value, in order; None when a
    string holds a control character (a string of printable characters with no quote
    or backslash holds none, and is the only kind whose print is known)."""
    out = []
    for k, v in values.items():
        t, pr = _text_known(v)
        if pr is None and type(v) is str and _CONTROL.search(v):
            return None
        out.append((k, t, pr))
    return out


def _text_known(v) -> tuple[str, str | None]:
    """A value of `_new_slot_ad` as its ad's text shows it (`_text`), and as
    `_printed` gives that text where that is known without asking (a plain
    non-negative integer, a string of printable characters with no quote or
    backslash), else None."""
    tv = type(v)
    if tv is str:
        if _SAFE.fullmatch(v):
            t = '"' + v + '"'
            return t, t
        return _q(v), None
    if tv is int:
        t = repr(v)
        return t, (t if v >= 0 and len(t) <= 18 else None)
    return _text(v), None


def _base_attrs(shape, kind: str) -> list[tuple[str, object]]:
    """What every simulated slot ad of `shape` and `kind` ("p" partitionable, "d"
    dynamic, "s" static) has before its shape's attributes and its job's, in the order
    they are set: (name, value), `_OWN` where the slot's own value goes."""
    pairs = [("MyType", "Machine"), ("Name", _OWN), ("Machine", _OWN),
             ("StartdIpAddr", _OWN), ("MyAddress", _OWN), ("Arch", "X86_64"),
             ("OpSys", "LINUX"), ("SlotID", 1), ("Cpus", _OWN), ("Memory", _OWN),
             ("Disk", _OWN), ("TotalCpus", _num(shape.cpus)),
             ("TotalMemory", _num(shape.memory)), ("Rank", 0.0), ("CurrentRank", 0.0),
             ("START", True)]
    if shape.gpus:
        pairs.append(("GPUs", _OWN))
    pairs.append(("Requirements", _Expr("START")))
    if kind == "p":
        pairs += [("PartitionableSlot", True), ("SlotType", "Partitionable"),
                  ("NumDynamicSlots", _OWN), ("NumClaims", _OWN)]
    elif kind == "d":
        pairs += [("DynamicSlot", True), ("SlotType", "Dynamic"), ("ParentSlotName", _OWN)]
    return pairs


class _Layout:
    """A slot ad's text as far as its shape and kind (partitionable, dynamic, static)
    fix it, in the order the attributes were always set: the slot's, the shape's (a
    value of the same name, in any case, replaces the slot's where it stood: "Start"
    sets our "START"), the job's. Each name keeps its first spelling. `texts`: the fixed
    texts (None where the slot's own value goes), `printed` as `classads.attribute_texts`
    prints them (once texts are first asked for); `frame`: what depends on the names
    alone, shared by every layout with the same names (a pool of 100,000 slots has tens
    of thousands of shapes, most with the same attribute names)."""
    __slots__ = ("alike", "frame", "texts", "printed", "whole")

    def __init__(self, shape, kind: str):
        pairs = [[k, None if v is _OWN else _text(v)] for k, v in _base_attrs(shape, kind)]
        own = {k for k, t in pairs if t is None}
        index = {k.lower(): i for i, (k, _) in enumerate(pairs)}
        for k, t in shape.attrs.items():
            i = index.get(k.lower())
            if i is None:
                index[k.lower()] = len(pairs)
                pairs.append([k, t])
            else:
                pairs[i][1] = t
                own.discard(pairs[i][0])        # the shape's own value stands
        names = tuple(k for k, _ in pairs)
        key = (names, frozenset(own))
        frame = _FRAMES.get(key)
        if frame is None:
            if len(_FRAMES) > 10_000:
                _FRAMES.clear()
            frame = _FRAMES[key] = _Frame(names, own)
        self.frame = frame
        self.texts = [t for _, t in pairs]
        self.printed: list | None = None
        # the names after the layout's (the job's not in it) with which an ad of it was
        # read whole, each line one attribute (`_new_slot_ad`)
        self.whole: set[tuple] = set()
        # figures of its ads, for ads alike (`_alike_facts`): context -> _Alike
        self.alike: dict[tuple, _Alike] = {}


class _Frame:
    """What a layout's names alone fix: the text's line heads ("Name = "), the
    lower-case names, lower-case name -> place (`index`), and the places of the slot's
    own values (`at`: name -> place)."""
    __slots__ = ("heads", "lower", "index", "at")

    def __init__(self, names: tuple, own: set):
        self.heads = tuple(f"{k} = " for k in names)
        self.lower = tuple(k.lower() for k in names)
        self.index = {k: i for i, k in enumerate(self.lower)}
        self.at = {k: i for i, k in enumerate(names) if k in own}


_FRAMES: dict[tuple, _Frame] = {}


def _layout(shape, kind: str) -> _Layout:
    got = _LAYOUTS.get(id(shape))
    if got is None or got[0] is not shape:
        if len(_LAYOUTS) > 100_000:
            _LAYOUTS.clear()
        got = _LAYOUTS[id(shape)] = (shape, {})
    lay = got[1].get(kind)
    if lay is None:
        lay = got[1][kind] = _Layout(shape, kind)
    return lay


_LAYOUTS: dict[int, tuple] = {}       # id(shape) -> (shape, {kind: _Layout})


_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def _printed(text: str) -> str:
    """An attribute's text as classad2 prints it once parsed (`attribute_texts`):
    the text itself for a plain non-negative integer or a plain string literal (no
    escape, nothing but printable ASCII), else read and printed once per text."""
    got = _PRINTED.get(text)
    if got is None:
        if _PLAIN.fullmatch(text):
            return text
        if len(_PRINTED) > 100_000:
            _PRINTED.clear()
        # (read as the ad's old-syntax text is read: a string's escapes are its own)
        got = _PRINTED[text] = classads.attribute_texts(classads.parse_old_ad(f"x = {text}"))[0][1]
    return got


_PRINTED: dict[str, str] = {}
_PLAIN = re.compile(r'0|[1-9][0-9]{0,17}|"[ !#-\[\]-~]*"')
# a string `_q` quotes as it is, and `_printed` prints as quoted (see _PLAIN)
_SAFE = re.compile(r'[ !#-\[\]-~]*')


class _Expr:
    """An expression's text in a slot ad being built (`_new_slot_ad`)."""
    __slots__ = ("text",)

    def __init__(self, text: str):
        self.text = text


def _text(v) -> str:
    """A value of `_new_slot_ad` as its ad's text shows it."""
    if type(v) is _Expr:
        return v.text
    if v is True or v is False:
        return "true" if v else "false"
    if isinstance(v, str):
        return _q(v)
    return repr(v)


def slot_rank(slot: SimSlot, job: SimJob, sc: Scenario) -> float | None:
    """The slot's Rank (a slot that ranks jobs: `SlotShape.job_rank`) for `job`, as
    HTCondor's EvalFloat gives it: a number (a boolean as 1 or 0), None when it is not
    one."""
    texts = _job_texts(job)
    got = job.fit               # the job's ad, if the schedd's fit test made it already
    if got is not None and got[0] is texts:
        job_ad = got[1]
    else:
        row = TextAds(TextStore())
        row.add(texts)
        job_ad = row.ad(0)
    got = classads.eval_match(classads.parse_expr(slot.shape.job_rank), _slot_ad(slot, sc),
                              job_ad)
    if isinstance(got, bool):                 # a boolean Rank ranks as 1 or 0
        return float(got)
    return float(got) if classads.is_number(got) else None


def _num(x: float):
    return int(x) if float(x).is_integer() else float(x)


def job_row(job: SimJob, ads: TextAds, kept: dict) -> tuple:
    """The job's ad as `ads`'s shared pairs: the row `ads.add(_job_texts(job))` makes,
    made without the job's texts where its class knows how (`JobClass.row`; `kept`:
    what the class keeps for `ads`'s store, one dict a store)."""
    make = job.cls.row
    if job.texts is None and make is not None:
        return make(job, ads, kept)
    return ads.row_of(_job_texts(job))


def _job_texts(job: SimJob) -> list[tuple[str, str]]:
    """The job's ad as the schedd offers it, as (name, text) pairs; kept while it waits
    (only an eviction changes them: EnteredCurrentStatus)."""
    if job.texts is None:
        job.texts = job.cls.texts(job)
    return job.texts


def recorded_job_texts(job: SimJob) -> list[tuple[str, str]]:
    """A recorded job's ad as its schedd offers it now: its class's attributes, its own
    (ids, QDate, ...), and its state (idle since `idle_since`)."""
    return [*job.cls.base, *job.own, ("JobStatus", "1"),
            ("EnteredCurrentStatus", str(int(job.idle_since)))]


def recorded_job_row(job: SimJob, ads: TextAds, kept: dict) -> tuple:
    """`recorded_job_texts(job)` as `ads`'s shared pairs (what `ads.add` of them makes),
    the class's own pairs interned once for `ads`'s store (`kept`: the store's, one
    entry a class)."""
    head = kept.get(job.cls)
    if head is None:
        head = kept[job.cls] = ads.row_of(job.cls.base)
    pair = ads.pair
    return (*head, *ads.row_of(job.own), pair("JobStatus", "1"),
            pair("EnteredCurrentStatus", str(int(job.idle_since))))


def scenario_job_texts(job: SimJob, sc: Scenario) -> list[tuple[str, str]]:
    """A scenario job's ad, as condor_submit would have written it from its arrival."""
    pairs = list(_arrival_pairs(job.cls, sc))
    for i, text in zip(_OWN_AT, _own_texts(job, sc)):
        pairs[i] = (pairs[i][0], text)
    return pairs


def scenario_job_row(job: SimJob, sc: Scenario, ads: TextAds, kept: dict) -> tuple:
    """`scenario_job_texts(job, sc)` as `ads`'s shared pairs (what `ads.add` of them
    makes): what every job of its arrival has alike is interned once for `ads`'s store
    (`kept`: the store's, one entry a class), each job's own texts (`_OWN_AT`) one by
    one."""
    cls, pair = job.cls, ads.pair
    head = kept.get(cls)
    if head is None:
        head = kept[cls] = [None if t is None else pair(n, t)
                            for n, t in _arrival_pairs(cls, sc)]
    row = head.copy()
    for i, name, text in zip(_OWN_AT, _OWN_NAMES, _own_texts(job, sc)):
        row[i] = pair(name, text)
    return tuple(row)


# where a scenario job's own texts are in its ad (`scenario_job_texts`): ClusterId,
# ProcId, QDate, EnteredCurrentStatus, GlobalJobId; the rest is its arrival's
_OWN_AT = (2, 3, 8, 9, 14)
_OWN_NAMES = ("ClusterId", "ProcId", "QDate", "EnteredCurrentStatus", "GlobalJobId")


def _own_texts(job: SimJob, sc: Scenario) -> tuple:
    """A scenario job's own texts, in `_OWN_AT`'s order."""
    return (str(job.cluster), str(job.proc), str(job.qdate), str(job.idle_since),
            _q(f"{sc.schedd}#{job.id}#{job.qdate}"))


def _arrival_pairs(cls, sc: Scenario) -> tuple:
    """What every job of a scenario arrival's class has in its ad, as (name, text)
    pairs in the ad's order, with None for the texts of each job's own (`_OWN_AT`);
    kept with the class."""
    got = cls.ad_pairs
    if got is not None:
        return got
    a = cls.arrival
    user = a.user_name(sc.domain)
    pairs = [("MyType", '"Job"'), ("TargetType", '"Machine"'), ("ClusterId", None),
             ("ProcId", None), ("JobStatus", "1"), ("JobUniverse", "5"),
             ("Owner", _q(a.user)), ("User", _q(user)), ("QDate", None),
             ("EnteredCurrentStatus", None), ("JobPrio", str(a.job_prio)),
             ("RequestCpus", _lit(a.cpus)), ("RequestMemory", _lit(a.memory)),
             ("RequestDisk", _lit(a.disk)),
             ("GlobalJobId", None),
             ("Requirements", a.requirements_text())]
    if a.gpus:
        pairs.append(("RequestGPUs", _lit(a.gpus)))
    if a.accounting_group():
        pairs.append(("AccountingGroup", _q(a.accounting_group())))
    if a.group:
        pairs.append(("AcctGroup", _q(a.group)))
    if a.rank:
        pairs.append(("Rank", a.rank))
    if a.concurrency_limits:
        pairs.append(("ConcurrencyLimits", _q(a.concurrency_limits)))
    if a.nice_user:
        pairs.append(("NiceUser", "true"))
    for k, text in a.attrs.items():
        pairs.append((k, text))
    got = cls.ad_pairs = tuple(pairs)
    return got


def _q(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _lit(x: float) -> str:
    return str(_num(x))


def _facts(b: _Ad, config):
    """(fetched, SlotUsage, pie weight, effective size) of a slot ad under `config`, as
    the core computes them (fetched: NEGOTIATOR_SLOT_CONSTRAINT keeps it); kept with
    the ad until the config changes. An ad built of values (`_Ad.values`) has the
    figures of an ad alike, when there was one (`_alike_facts`)."""
    f = b.facts
    if f is None or f[0] is not config:
        got = _alike_facts(b, config) if b.values is not None else None
        if got is None:
            got = _facts_of(slot_view(b), config)
        f = b.facts = (config, got)
    return f[1]


def _facts_of(ad, config) -> tuple:
    """`_facts` worked out of the ad (a ClassAd, or an AdView of one)."""
    from ..core.slots import matches_constraint, slot_size, slot_usage
    u = slot_usage(ad, config)
    return (matches_constraint(ad, config.slot_constraint), u, *slot_size(ad, u.weight))


def _alike_facts(b: _Ad, config) -> tuple | None:
    """`_facts` of an ad built of values, from the figures of an earlier ad of the same
    layout whose texts were alike in everything the figures read; None where there is
    no such ad (and could be none).

    The figures of an ad read some of its texts (`_Reads` notes which) and nothing else
    but the config. Of an ad of the same layout (shape and kind) with the same names
    set from values, every text is the layout's own but for those values, each a
    literal (no value names an attribute). So an ad whose values are the same as an
    earlier one's for every name that ad's figures read has the same figures: it reads
    the same texts, in the same order. The slot's Name and StartdIpAddr are left out
    where nothing but the usage's name and resource name read them (no text read and
    no expression of the config names them): its figures are the earlier ad's under
    its own names. Figures that had the ad itself evaluate anything (a text that calls
    a function) are not kept."""
    shape, kind, own, later = b.values
    lay = _layout(shape, kind)
    ctx = (id(config), tuple(own), tuple(later))
    alike = lay.alike.get(ctx)
    if alike is None or alike.config is not config:
        if len(lay.alike) >= _ALIKE_CONTEXTS:
            lay.alike.clear()
        alike = lay.alike[ctx] = _Alike(config, lay.frame, own, later)
    for own_keys, later_keys, renamed, table in alike.sets:
        vals = tuple([own[k] for k in own_keys] + [later[k] for k in later_keys])
        got = table.get((vals, tuple(map(type, vals))))
        if got is None:
            continue
        if not renamed:
            return got
        name, ip = own["Name"], own["StartdIpAddr"]
        if _plain_str(name) and _plain_str(ip):
            fetched, u, pie, eff = got
            return (fetched, u.renamed(name, f"{name}@{ip}"),
                    pie, eff)
        break
    return alike.learn(b, own, later)


# how many contexts (config, names set from values) a layout keeps figures for, how
# many sets of names read, and how many figures each
_ALIKE_CONTEXTS = 64
_ALIKE_SETS = 8
_ALIKE_FIGURES = 10_000


def _plain_str(v) -> bool:
    """A string whose text is itself in quotes, read back as itself."""
    return type(v) is str and _SAFE.fullmatch(v) is not None


class _Alike:
    """The figures of ads of one layout with the same names set from values, under one
    config (`_alike_facts`): for each set of names the figures read, (the own values'
    names among them, the claim's, whether the slot's Name and address are left out,
    {their values and types: the figures})."""
    __slots__ = ("config", "placed", "sets")

    def __init__(self, config, frame: "_Frame", own: dict, later: dict):
        self.config = config
        # lower-case name -> where its value comes from (a claim's value replaces an
        # own value of the same name, as `_make_ad` places them)
        self.placed = {k.lower(): (False, k) for k in own if k in frame.at}
        self.placed.update((k.lower(), (True, k)) for k in later)
        self.sets: list[tuple] = []

    def learn(self, b: _Ad, own: dict, later: dict) -> tuple | None:
        """The figures of `b` worked out of its texts, noting which it reads: kept for
        ads alike. None when they cannot be worked out of the texts."""
        texts, ad = b.texts, b.ad
        if texts is None or type(ad) is not classads.LazyAd or ad.made():
            return None
        reads = _Reads(texts)
        got = _facts_of(AdView(ad, reads, _ReadValues(_slot_values_cache(), reads)),
                        self.config)
        if ad.made() or reads.whole:
            return got              # the ad itself was asked: nothing kept
        read = reads.direct | reads.reach
        name, ip = own.get("Name"), own.get("StartdIpAddr")
        renamed = (self.placed.get("name") == (False, "Name")
                   and self.placed.get("startdipaddr") == (False, "StartdIpAddr")
                   and not reads.reach & {"name", "startdipaddr"}
                   and _plain_str(name) and _plain_str(ip)
                   and got[1].name == name and got[1].resource_name == f"{name}@{ip}")
        if renamed:
            read -= {"name", "startdipaddr"}
        keys: tuple[list, list] = ([], [])          # (own values', claim's)
        for n in read:
            where = self.placed.get(n)
            if where is not None:
                keys[where[0]].append(where[1])
        own_keys, later_keys = tuple(sorted(keys[0])), tuple(sorted(keys[1]))
        for ok, lk, rn, table in self.sets:
            if (ok, lk, rn) == (own_keys, later_keys, renamed):
                break
        else:
            if len(self.sets) >= _ALIKE_SETS:
                return got
            table = {}
            self.sets.append((own_keys, later_keys, renamed, table))
        if len(table) >= _ALIKE_FIGURES:
            table.clear()
        vals = tuple([own[k] for k in own_keys] + [later[k] for k in later_keys])
        table[(vals, tuple(map(type, vals)))] = got
        return got


class _Reads(dict):
    """An ad's texts that note the names read: `direct`, asked of the ad; `reach`, read
    while a value or expression was worked out of the texts in its reach
    (`_ReadValues`); `whole`, the texts were gone through as a whole."""
    __slots__ = ("direct", "reach", "in_reach", "whole")

    def __init__(self, texts: dict):
        super().__init__(texts)
        self.direct: set[str] = set()
        self.reach: set[str] = set()
        self.in_reach = False
        self.whole = False

    def _note(self, name) -> None:
        (self.reach if self.in_reach else self.direct).add(name)

    def get(self, name, default=None):
        self._note(name)
        return dict.get(self, name, default)

    def __getitem__(self, name):
        self._note(name)
        return dict.__getitem__(self, name)

    def __contains__(self, name) -> bool:
        self._note(name)
        return dict.__contains__(self, name)

    def _all(self, method):
        self.whole = True
        return method(self)

    def __iter__(self):
        return self._all(dict.__iter__)

    def keys(self):
        return self._all(dict.keys)

    def values(self):
        return self._all(dict.values)

    def items(self):
        return self._all(dict.items)

    def copy(self):
        return self._all(dict.copy)


class _ReadValues:
    """A TextValues that tells `_Reads` when it reads texts in a value's reach."""
    __slots__ = ("_values", "_reads")

    def __init__(self, values: TextValues, reads: _Reads):
        self._values, self._reads = values, reads

    def literal(self, text: str):
        return self._values.literal(text)

    def in_texts(self, texts: dict, lname: str):
        return self._in_reach(self._values.in_texts, texts, lname)

    def expr_in_texts(self, texts: dict, expr: str):
        return self._in_reach(self._values.expr_in_texts, texts, expr)

    def _in_reach(self, method, texts, arg):
        self._reads.in_reach = True
        try:
            return method(texts, arg)
        finally:
            self._reads.in_reach = False


def slot_view(b: _Ad):
    """A slot ad as its figures are read: through its texts where it was built with
    them (`core.adtext.AdView`: a literal's value once per distinct text, anything else
    worked out of the texts in its reach, the ad itself parsed only where those cannot
    say), else the ad."""
    texts = b.texts
    if texts is None:
        return b.ad
    return AdView(b.ad, texts, _slot_values_cache())


def _slot_values_cache() -> TextValues:
    """The slot texts' values, shared by every slot ad (`_VALUES`)."""
    values = _VALUES[0]
    if values.size() > _VALUES_MAX:
        values = _VALUES[0] = TextValues()
    return values


# the slot texts' values (`slot_view`), shared by every slot ad; made anew once they hold
# _VALUES_MAX texts (a long run's names and users come and go)
_VALUES = [TextValues()]
_VALUES_MAX = 500_000


def _slot_texts(b: _Ad) -> dict:
    """A slot ad's texts (lower-case name -> text), as the cycle would read them from it
    (`Pool.slot_texts`); kept with the ad, and shared by every cycle until the slot
    changes (a cycle writes into a copy: `insert_negotiator_attrs`)."""
    got = b.texts
    if got is None:
        got = b.texts = {n.lower(): t for n, t in classads.attribute_texts(b.ad)}
    return got


