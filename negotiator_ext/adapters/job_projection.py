"""Which job attributes a capture asks the schedds for (its projection).

Job projection: `BASE_JOB_ATTRS` (the job attributes the negotiator reads), plus every
job attribute the slots' Requirements / Start / Rank / Consumption* expressions reference
(found with classad2's `ClassAd.externalRefs`, which follows the slot's own attributes
transitively, e.g. Requirements -> START -> WithinResourceLimits -> TARGET.RequestCpus),
plus the job attributes referenced by the negotiator's PREEMPTION_REQUIREMENTS,
PREEMPTION_RANK, NEGOTIATOR_PRE_JOB_RANK, NEGOTIATOR_POST_JOB_RANK (TARGET refs and
unscoped refs no slot defines) and NEGOTIATOR_JOB_CONSTRAINT (all refs). After the first
query of a schedd, the jobs' own expressions (Requirements, Rank, RequestMemory, ...) are
checked the same way for MY./unscoped references that were not projected, and the names
in each job's AutoClusterAttrs are added; if anything new turns up, that schedd is queried
once more with the extended projection (never more than twice per schedd). A capture
then asks the schedds once more for the job attributes that the slot attributes the
jobs read go on to read (`collector_projection.Refs.reached`: a job's TARGET.HasWidget
whose slot expression reads TARGET.WidgetNeed), which no slot policy reaches.
"""

from __future__ import annotations

import re
from itertools import compress, repeat
from operator import is_
from typing import Iterable, Mapping

import classad2

from .adfiles import _parse_one, _split_line, _unwrapped


# The job attributes the negotiator (and the schedd's resource requests to it) use.
BASE_JOB_ATTRS: tuple[str, ...] = (
    # identity
    "ClusterId", "ProcId", "GlobalJobId", "MyType", "TargetType", "JobUniverse",
    "JobStatus", "EnteredCurrentStatus", "QDate", "LastMatchTime",
    # who is charged (submitter / accounting group)
    "Owner", "User", "AccountingGroup", "AcctGroup", "AcctGroupUser", "NiceUser",
    # ordering within a submitter
    "JobPrio", "PreJobPrio1", "PreJobPrio2", "PostJobPrio1", "PostJobPrio2",
    # matchmaking
    "Requirements", "Rank", "RequestCpus", "RequestMemory", "RequestDisk", "RequestGPUs",
    "ConcurrencyLimits", "AutoClusterId", "AutoClusterAttrs", "WantMatchDiagnostics",
    "FileSystemDomain",
    # the schedd always names it in AutoClusterAttrs (its minimal significant attributes:
    # Requirements, Rank, ConcurrencyLimits, FlockTo): projected at once, so that naming
    # it does not cost every capture a second query
    "FlockTo",
    # what Request* defaults are computed from
    "ImageSize", "ExecutableSize", "DiskUsage", "MemoryUsage",
    # running jobs: who holds which slot, and who is in the schedd's upload queue (its
    # per-user match limit, core.schedd_limits)
    "RemoteUser", "RemoteHost", "TransferringInput", "TransferQueued", "TransferringOutput",
)


# Slot expressions the negotiator evaluates against a job (MY = slot, TARGET = job).
SLOT_EXPR_ATTRS: tuple[str, ...] = ("Requirements", "Start", "Rank")


SLOT_EXPR_PREFIXES: tuple[str, ...] = ("Consumption",)  # p-slot consumption policy


_SLOT_EXPR_LOWER = frozenset(a.lower() for a in SLOT_EXPR_ATTRS)


_SLOT_EXPR_PREFIXES_LOWER = tuple(p.lower() for p in SLOT_EXPR_PREFIXES)


# Negotiator knobs evaluated with MY = slot, TARGET = job / with MY = job.
_SLOT_SCOPE_KNOBS = ("PREEMPTION_REQUIREMENTS", "PREEMPTION_RANK",
                     "NEGOTIATOR_PRE_JOB_RANK", "NEGOTIATOR_POST_JOB_RANK")


_JOB_SCOPE_KNOBS = ("NEGOTIATOR_JOB_CONSTRAINT",)


_ATTR_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _valid_projection(projection) -> list[str] | None:
    """An earlier snapshot's job projection, if it is a list of attribute names."""
    if (isinstance(projection, list) and projection
            and all(isinstance(n, str) and _ATTR_NAME.fullmatch(n) for n in projection)):
        return list(projection)
    return None


def _ci_add(target: dict[str, str], names: Iterable[str]) -> None:
    """Add names (case-insensitively) to an ordered {lower: name} dict."""
    for n in names:
        if n and n.lower() not in target:
            target[n.lower()] = n


def _split_ref(ref: str) -> tuple[str, str]:
    """("target", attr) for TARGET.attr[.x...]; ("", attr) for MY.attr and unscoped refs
    (classad2's externalRefs already drops a MY. prefix)."""
    parts = ref.split(".")
    if len(parts) > 1 and parts[0].lower() in ("target", "my"):
        return ("target" if parts[0].lower() == "target" else ""), parts[1]
    return "", parts[0]


_EMPTY = classad2.ClassAd()


def slot_job_refs(slot) -> set[str]:
    """Job attributes that a slot's Requirements/Start/Rank/Consumption* reference."""
    out: set[str] = set()
    roots = [k for k in slot.keys() if k.lower() in _SLOT_EXPR_LOWER
             or k.lower().startswith(_SLOT_EXPR_PREFIXES_LOWER)]
    for k in roots:
        expr = slot.lookup(k)
        for ref in slot.externalRefs(expr):
            _, attr = _split_ref(ref)
            # TARGET.x is the job's; an unscoped name the slot does not define is looked
            # up in the job (a MY.x the slot lacks is undefined: harmless to project).
            out.add(attr)
    return out


def _knob_job_refs(knobs: Mapping[str, str] | None, slot_attrs: set[str]) -> set[str]:
    out: set[str] = set()
    if not knobs:
        return out
    up = {k.upper(): v for k, v in knobs.items()}
    for knob, job_scope in [(k, False) for k in _SLOT_SCOPE_KNOBS] + [(k, True) for k in _JOB_SCOPE_KNOBS]:
        text = (up.get(knob) or "").strip()
        if not text:
            continue
        try:
            expr = classad2.ExprTree(text)
            refs = _EMPTY.externalRefs(expr)
        except Exception:
            continue
        for ref in refs:
            scope, attr = _split_ref(ref)
            if job_scope or scope == "target" or attr.lower() not in slot_attrs:
                out.add(attr)
    return out


def job_projection(slots: Iterable, knobs: Mapping[str, str] | None = None,
                   lines: list[list[str]] | None = None) -> list[str]:
    """The first Schedd.query projection: BASE_JOB_ATTRS, then the referenced job
    attributes (sorted case-insensitively). `lines`: the slots' `adfiles.ad_lines`; with
    them, slots whose expressions and attribute names are the same (most of a pool's)
    are walked once."""
    return projection_of(referenced_job_attrs(slots, knobs, lines))


# The job attributes that an HTCondor 25.x pool's default slot ads and negotiator
# knobs reference (the catalogs of WithinResourceLimits, KFlops and Offline, the
# preemption knobs' RemoteOwner and RemoteUserPrio, TotalJobRuntime): every recorded
# 25.14 pool's projection adds exactly these to BASE_JOB_ATTRS.
DEFAULT_POOL_JOB_REFS = ("CatalogID", "catalogs", "CatalogSize", "KFlops", "Offline",
                         "RemoteOwner", "RemoteUserPrio", "RequestedCatalogIDs",
                         "RequestedCatalogs", "TotalJobRuntime")


def first_guess() -> list[str]:
    """The projection a capture with no earlier snapshot queries the schedds with
    beside the slot steps, before the slots tell it the one it needs: a default pool's
    (`DEFAULT_POOL_JOB_REFS`). Its answer serves when it holds every name the slots
    ask for (the other names are attributes nothing reads)."""
    return projection_of(DEFAULT_POOL_JOB_REFS)


def projection_of(refs: Iterable[str]) -> list[str]:
    """BASE_JOB_ATTRS, then `refs` (sorted case-insensitively), each name once."""
    proj: dict[str, str] = {}
    _ci_add(proj, BASE_JOB_ATTRS)
    _ci_add(proj, sorted(refs, key=lambda s: (s.lower(), s)))
    return list(proj.values())


def referenced_job_attrs(slots: Iterable, knobs: Mapping[str, str] | None = None,
                         lines: list[list[str]] | None = None,
                         memos: list | None = None) -> set[str]:
    """The job attributes the slots' expressions and the negotiator's knobs reference
    (see `job_projection`). `memos`: each slot's memo (a shadow loop's kept slots,
    slot_cache), where its key among alike slots is kept from pass to pass."""
    slots = list(slots)
    refs: set[str] = set()
    slot_attrs: set[str] = set()
    if lines is None:
        for slot in slots:
            refs |= slot_job_refs(slot)
            slot_attrs.update(k.lower() for k in slot.keys())
    else:
        # each distinct key once, and one object of it for the alike slots' memos (at
        # 100,000 slots, a key each is 130 MB kept between passes)
        walked: dict[tuple, tuple] = {}
        line_keys: dict[str, str] = {}
        for slot, ad, memo in zip(slots, lines, memos if memos is not None else repeat(None)):
            key = memo.get(_SLOT_KEY) if memo is not None else None
            if key is None:
                key = _slot_key(ad, line_keys)
            got = walked.get(key)
            if got is None:
                got = walked[key] = key
                refs |= slot_job_refs(slot)
                slot_attrs.update(k.lower() for k in slot.keys())
            if memo is not None:
                memo[_SLOT_KEY] = got
    refs |= _knob_job_refs(knobs, slot_attrs)
    return refs


# a line's value that references nothing: a number, a plain string, a boolean
_LITERAL = re.compile(r'-?\d+(\.\d*)?([eE][-+]?\d+)?|"[^"\\]*"|(?i:true|false|undefined)')


_SLOT_KEY = "job_refs_key"     # a kept slot's memo: its `_slot_key` (of its lines alone)


def _slot_key(lines: list[str], keys: dict[str, str]) -> tuple[str, ...]:
    """What `slot_job_refs` and the slot's attribute names depend on, from its lines:
    each attribute's name, and its whole line unless its value is a literal (a literal
    references nothing; only whether the slot has the attribute matters). `keys`: each
    line's part of the key, so far."""
    out = tuple(map(keys.get, lines))
    if None in out:
        for ln in compress(lines, map(is_, out, repeat(None))):
            name, text = _split_line(ln)
            keys[ln] = name.lower() if _LITERAL.fullmatch(text) else ln
        out = tuple(map(keys.get, lines))
    return out


def job_refs_missing_in_lines(lines: list[list[str]], projection: Iterable[str]) -> list[str]:
    """Job attributes that the jobs' own expressions reference (MY./unscoped) or that
    their AutoClusterAttrs name, and that `projection` lacks; the jobs are given by their
    lines (`adfiles.ad_lines`), each distinct line looked at once, however many jobs
    share it. An attribute some job has is not
    missing (the schedd sent it); an expression's references are its own, without
    following the job's attributes, whose own lines are looked at in turn."""
    distinct: set[str] = set()
    for ad in lines:
        distinct.update(ad)
    split = [_split_line(ln) for ln in distinct]
    have = {p.lower() for p in projection} | {name.lower() for name, _ in split}
    found: dict[str, str] = {}
    for (name, text), line in zip(split, distinct):
        if name.lower() == "autoclusterattrs":
            acs = _parse_one(line, classad2.ParserType.Old).get(name)
            if isinstance(acs, str):
                _ci_add(found, [a for a in re.split(r"[\s,]+", acs)
                                if a and a.lower() not in have])
            continue
        if _LITERAL.fullmatch(text):
            continue
        expr = classad2.ExprTree(text)
        expr = _unwrapped(expr) or expr
        for ref in _EMPTY.externalRefs(expr):
            scope, attr = _split_ref(ref)
            if scope != "target" and attr.lower() not in have:
                _ci_add(found, [attr])
    return sorted(found.values(), key=lambda s: (s.lower(), s))
