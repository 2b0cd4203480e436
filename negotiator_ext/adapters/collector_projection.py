"""Which slot attributes a live capture asks the collector for (its slot projection).

A slot ad as a 25.x startd sends it has 150-190 attributes, and a cycle reads a few
dozen of them. At 100,000 slots the whole ads are most of a capture's memory (about
2.5 GiB as classad2 objects) and half of the collector's answer time. So a capture asks
the collector for:

- `BASE_SLOT_ATTRS`: what the package reads of a slot ad by name (its rules, the
  comparison with the real negotiator, the loop's stamps, the checks of a snapshot);
- for each resource a slot's `MachineResources` names (Cpus, Memory, Disk, GPUs, a
  site's own), the names the rules build from it (`RESOURCE_FORMS`: TotalSlot<res>,
  Child<res>, Consumption<res>, ...);
- every name the answer's own expressions reference, whatever their scope (a slot's
  chain Requirements -> START -> WithinResourceLimits -> ...), every name the jobs'
  expressions reference (`TARGET.HasFileTransfer`, an unscoped `OpSys`), and every name
  the negotiator's expression knobs that read slot ads reference (PREEMPTION_REQUIREMENTS,
  the ranks, the slot constraints, SLOT_WEIGHT, NEGOTIATOR_MATCH_EXPRS' values).

The last three are known only from the answer, the jobs and the config, so the answer is
checked (`missing`): when they name something the projection lacks (a new resource, a
START that reads a new attribute, a job whose Requirements reads a new one), the
collector is asked again with the projection widened, and once more at most; an
expression that can build a name at run time (`eval()`, a subscript such as
`TARGET["Memory"]`) makes the capture ask for whole ads. A capture starts from its
earlier snapshot's projection (meta.json's "slot_projection"), or with none a default
25.x pool's (`first_guess`): a pool's slots and jobs seldom change what they reference,
so the first query is usually the last.

The projection is recorded in meta.json. A pool later built from the snapshot under
another config (a what-if) checks what that config's expressions read
(`check_config`): a slot attribute the capture did not ask for stops it with one line
naming the knob and the attribute, as a silent undefined would change its answer.
`negotiator-ext snapshot` captures whole slot ads (a snapshot meant for any later
config), and so do the shadow's passes with `NEGOTIATOR_EXT_WHOLE_SLOT_ADS = True`.
"""

from __future__ import annotations

import re
from typing import Iterable, Mapping

import classad2

from ..core.config import EXPRESSION_KNOBS
from ..core.negotiation import REQUEST_EPHEMERALS
from ..errors import InputError
from .adfiles import _split_line
from .job_projection import _valid_projection
from .slot_projection import _LITERAL, _WORD, referenced_names

# What the package reads of a slot ad by name: the slot attributes every word of its
# source names (slot_projection.code_words) that a 25.x startd advertises, and those the
# rules read of slots that a recorded pool seldom has (claims, preemption, groups). A
# test keeps it a superset of the code's words among every recorded slot ad's names.
BASE_SLOT_ATTRS: tuple[str, ...] = (
    # identity, and what the loop's stamps and the snapshot's checks read
    "Name", "Machine", "MyType", "TargetType", "MyAddress", "AddressV1", "StartdIpAddr",
    "CondorVersion", "CondorPlatform", "LastHeardFrom", "UpdatesTotal",
    "UpdateSequenceNumber", "ClassAdLifetime", "DaemonStartTime", "DaemonLastReconfigTime",
    "MyCurrentTime", "LastBenchmark", "RecentDaemonCoreDutyCycle", "StartdName",
    # what a slot offers, and its kind
    "Arch", "OpSys", "FileSystemDomain", "Cpus", "Memory", "Disk", "GPUs",
    "TotalCpus", "TotalMemory", "TotalSlots", "MachineResources", "SlotID", "SlotTypeID",
    "SlotType", "SlotWeight", "PartitionableSlot", "DynamicSlot", "NumDynamicSlots",
    "ParentSlotName", "PslotRollupInformation", "KFlops", "Mips", "Offline",
    "WantMatching", "WantAdRevaluate", "Unhibernate", "DaemonShutdown",
    "DaemonShutdownFast", "HasFileTransfer", "MappingMethod",
    # its policy
    "Requirements", "Start", "Rank", "CurrentRank", "WithinResourceLimits",
    # its claim and who holds it
    "State", "Activity", "EnteredCurrentState", "RemoteUser", "RemoteOwner",
    "AccountingGroup", "RemoteNegotiatingGroup", "RemoteAutoregroup", "RemoteGroup",
    "RemoteScheddName", "RemoteSlotID", "ConcurrencyLimits", "GlobalJobId", "JobId",
    "JobStart", "JobUniverse", "TotalJobRunTime", "NumClaims", "PublicClaimId",
    "RetirementTimeRemaining", "PreemptingRank", "PreemptingUser",
    "PreemptingAccountingGroup", "PreemptingConcurrencyLimits",
    # the running job's usage a claimed slot reports
    "ImageSize", "ExecutableSize", "DiskUsage", "MemoryUsage", "CPUsUsage",
    "ResidentSetSize",
    # a partitionable slot's dynamic slots (the Child<attr> lists)
    "ChildAccountingGroup", "ChildActivity", "ChildCurrentRank", "ChildDSlotId",
    "ChildEnteredCurrentState", "ChildName", "ChildRemoteOwner", "ChildRemoteUser",
    "ChildRemoteNegotiatingGroup", "ChildRemoteAutoregroup",
    "ChildRetirementTimeRemaining", "ChildState",
)

# The names the rules build from each resource a slot's MachineResources names.
RESOURCE_FORMS: tuple[str, ...] = ("{}", "Total{}", "TotalSlot{}", "Detected{}",
                                   "Child{}", "Consumption{}", "Assigned{}")

# What a 25.x pool's default slot ads and the jobs condor_submit writes reference
# besides BASE_SLOT_ATTRS (the catalogs of WithinResourceLimits, the requests a START
# compares, the match time a default slot keeps): a first capture asks for these too.
DEFAULT_POOL_SLOT_REFS: tuple[str, ...] = (
    "CatalogID", "Catalogs", "CatalogSize", "MachineLastMatchTime", "MappingMethod",
    "RequestCpus", "RequestDisk", "RequestMemory", "RequestGPUs", "RequestedCatalogIDs",
    "RequestedCatalogs", "Swap")

# What the negotiator writes into the ads it evaluates, which no capture can ask for: a
# knob may read them whatever was captured (the slots': core/negotiator_attrs.py; the
# requests': core.negotiation.REQUEST_EPHEMERALS).
_WRITTEN = frozenset(n.lower() for n in (
    "RemoteUserPrio", "RemoteUserResourcesInUse", "RemoteUserFloor", "RemoteGroup",
    "RemoteGroupResourcesInUse", "RemoteGroupQuota", "CurrentRank", "CurrentTime",
    *REQUEST_EPHEMERALS))
# (<prefix><N>_RemoteUserPrio and its kin, written for each slot of a startd)
_SLOT_PREFIXED = re.compile(r"(?i)[a-z]+\d+_(.*)")

_EMPTY = classad2.ClassAd()
_DYNAMIC = "\0"            # (Refs: a text that can build names at run time)

# a projection is widened this many times at most, then the collector is asked whole
ROUNDS = 2

# meta.json's "slot_projection_next" when a capture had to ask for whole ads because an
# expression builds names at run time: the next one asks whole too
WHOLE = "whole"


def projection_of(names: Iterable[str]) -> list[str]:
    """BASE_SLOT_ATTRS, then `names` (sorted case-insensitively), each name once."""
    out: dict[str, str] = {}
    for n in BASE_SLOT_ATTRS:
        out.setdefault(n.lower(), n)
    for n in sorted(names, key=lambda s: (s.lower(), s)):
        if n:
            out.setdefault(n.lower(), n)
    return list(out.values())


# The resources a 25.x startd lists in MachineResources by default.
DEFAULT_RESOURCES = "Cpus Disk Memory Swap GPUs"

# What HTCondor's default PREEMPTION_REQUIREMENTS and PREEMPTION_RANK read of a slot.
DEFAULT_KNOB_REFS = ("RemoteUserPrio", "SubmitterUserPrio", "RemoteOwner", "JobStart",
                     "TotalJobRunTime")


def first_guess() -> list[str]:
    """The projection a capture with no earlier snapshot asks with: a default pool's
    (what its slots, its default knobs and the jobs condor_submit writes reference,
    with every form of the default resources)."""
    return projection_of([*DEFAULT_POOL_SLOT_REFS, *DEFAULT_KNOB_REFS,
                          *resource_names(DEFAULT_RESOURCES)])


def earlier(projection) -> list[str] | None:
    """An earlier snapshot's recorded slot projection, when it is one: a non-empty list
    of attribute names (None: whole ads, or not a projection)."""
    names = _valid_projection(projection)
    return projection_of(names) if names is not None else None


class Refs:
    """The names expression texts reference (`slot_projection.referenced_names`), each
    distinct expression walked once however often it comes back (a loop keeps one from
    pass to pass: its slots' and jobs' expressions seldom change; a literal, most of an
    ad's texts, is told by its look and not kept). `dynamic`: a text seen that can
    build a name at run time."""

    LIMIT = 1 << 16        # expressions remembered at most (then forgotten all at once)

    def __init__(self):
        self._of: dict[str, tuple] = {}
        self.dynamic = False
        # each slot attribute's expressions' names, lower-case (`of_lines`, `reached`)
        self._exprs: dict[str, set[str]] = {}
        # what the jobs of the last answer walked reference, and that answer (a loop's
        # worker answer, adapters/job_delta.py): a later pass walks its new jobs only
        self._job_names: set[str] = set()
        self._jobs_dynamic = False
        self._jobs_token: str | None = None

    def _names(self, text: str) -> tuple:
        """The names `text` references (() for a literal; ("\0",) when it can build
        names at run time, or cannot be read)."""
        got = self._of.get(text)
        if got is None:
            if _LITERAL.fullmatch(text):
                return ()
            if len(self._of) > self.LIMIT:
                self._of.clear()
            names = referenced_names((text,))
            got = self._of[text] = (_DYNAMIC,) if names is None else tuple(n for n in names if n)
        return got

    def of_texts(self, texts: Iterable[str]) -> set[str]:
        out: set[str] = set()
        for text in texts:
            got = self._names(text)
            if got == (_DYNAMIC,):
                self.dynamic = True
            else:
                out.update(got)
        return out

    def of_lines(self, lines: Iterable[str]) -> set[str]:
        """The names the texts of distinct slot ad lines ("Name = text") reference, and
        the forms of every resource a MachineResources line names. Each expression's
        names are kept under its attribute's name (`reached`)."""
        out: set[str] = set()
        exprs = self._exprs
        for line in lines:
            name, text = _split_line(line)
            lname = name.lower()
            if lname == "machineresources":
                out.update(resource_names(text))
            got = self._names(text)
            if got == (_DYNAMIC,):
                self.dynamic = True
            elif got:
                out.update(got)
                exprs.setdefault(lname, set()).update(got)
        return out

    def reached(self, names: Iterable[str]) -> set[str]:
        """Every name the slot expressions of `names` reference, and those theirs do in
        turn (a job's `TARGET.HasWidget` whose slot expression reads
        `TARGET.WidgetNeed`: the job attribute the schedds must send), of the slot
        lines walked so far (`of_lines`)."""
        exprs, out = self._exprs, set()
        todo = [n for n in names if n in exprs]
        seen = set(todo)
        while todo:
            for ref in exprs[todo.pop()]:
                out.add(ref)
                if ref in exprs and ref not in seen:
                    seen.add(ref)
                    todo.append(ref)
        return out

    def of_jobs(self, jobs: Iterable[list[str]]) -> set[str]:
        """The names the expressions of the jobs' lines reference (each job a list of
        lines; a line shared by many jobs is looked at once)."""
        distinct: set[str] = set()
        for lines in jobs:
            distinct.update(lines)
        return self.of_texts(_split_line(line)[1] for line in distinct)

    def of_schedd_jobs(self, schedd_jobs, known=None) -> set[str]:
        """What the jobs of a pass reference (`schedd_jobs`: (schedd, each job's
        lines)). `known` (job_delta.KnownJobs, a loop's): when this pass's jobs were
        built on the worker answer this walked last, only the jobs new in it are walked
        (the others are the same lists, whose names are kept)."""
        taken = known is not None and known.taken
        before, self.dynamic = self.dynamic, False
        if taken and known.base is not None and known.base == self._jobs_token:
            fresh = []
            for name, jobs in schedd_jobs:
                where = known.reuse.get(name)
                if where is None or len(where) != len(jobs):
                    fresh.extend(jobs)
                else:
                    fresh.extend(j for j, w in zip(jobs, where) if w is None)
            self._job_names |= self.of_jobs(fresh)
            self._jobs_dynamic = self._jobs_dynamic or self.dynamic
        else:
            self._job_names = self.of_jobs(one for _, jobs in schedd_jobs for one in jobs)
            self._jobs_dynamic = self.dynamic
        self._jobs_token = known.token if taken else None
        self.dynamic = before or self._jobs_dynamic
        return set(self._job_names)


def resource_names(text: str) -> set[str]:
    """Every form (`RESOURCE_FORMS`, lower-case) of each word of a MachineResources text."""
    return {form.format(w).lower() for w in _WORD.findall(text) for form in RESOURCE_FORMS}


# expression knobs evaluated against other ads than slots (submitter ads, the groups'
# ads, job ads): a later config's check leaves them out
_NOT_SLOT_KNOBS = frozenset(("NEGOTIATOR_SUBMITTER_CONSTRAINT", "GROUP_SORT_EXPR",
                             "NEGOTIATOR_JOB_CONSTRAINT"))


def knob_texts(knobs: Mapping[str, str] | None) -> list[str]:
    """The texts of the negotiator's expression knobs that read slot ads among `knobs`
    (name -> value as read), and the values of the macros NEGOTIATOR_MATCH_EXPRS names."""
    if not knobs:
        return []
    up = {str(k).upper(): v for k, v in knobs.items()}
    out = [str(up[k]).strip() for k in EXPRESSION_KNOBS
           if up.get(k) and k not in _NOT_SLOT_KNOBS]
    for name in re.split(r"[\s,]+", str(up.get("NEGOTIATOR_MATCH_EXPRS") or "")):
        if name and up.get(name.upper()):
            out.append(str(up[name.upper()]).strip())
    return [t for t in out if t]


def missing(projection: Iterable[str], needed: Iterable[str]) -> list[str]:
    """The names of `needed` (lower-case) that `projection` lacks, sorted."""
    have = {n.lower() for n in projection}
    return sorted({n for n in needed if n and n not in have})


def config_texts(config) -> dict[str, str]:
    """A parsed config's expression knobs that read slot ads (knob -> text),
    NEGOTIATOR_MATCH_EXPRS' ones under the attribute they become."""
    out = {}
    for knob, fname in EXPRESSION_KNOBS.items():
        if knob in _NOT_SLOT_KNOBS:
            continue
        text = getattr(config, fname, None)
        if isinstance(text, str) and text.strip():
            out[knob] = text
    for attr, text in (getattr(config, "match_exprs", None) or {}).items():
        out[f"NEGOTIATOR_MATCH_EXPRS ({attr})"] = str(text)
    return out


def check_config(meta: Mapping, config, source: str) -> None:
    """Stop (InputError naming `source`) when `config` reads a slot attribute a
    snapshot's capture did not ask the collector for: a name one of its expression
    knobs references that is in neither recorded projection (slots, jobs) and that the
    negotiator does not write itself. A snapshot without a recorded slot projection
    (whole slot ads, or files made by condor_status) passes."""
    slots = earlier(meta.get("slot_projection"))
    if slots is None:
        return
    have = {n.lower() for n in slots}
    jobs = meta.get("job_projection")
    if isinstance(jobs, list):
        have.update(n.lower() for n in jobs if isinstance(n, str))
    for knob, text in config_texts(config).items():
        names = _slot_side(text)
        if names is None:
            raise InputError(source, f"{knob} can name an attribute at run time "
                             "(eval() or a subscript), and the snapshot's slot ads were "
                             f"captured with a projection: {_WHOLE}")
        lacking = sorted(n for n in names if n and n not in have and n not in _WRITTEN
                         and not _written_prefixed(n))
        if lacking:
            raise InputError(source, f"{knob} reads {', '.join(lacking)}, which the "
                             "snapshot's capture did not ask the collector for (meta.json "
                             f"slot_projection): {_WHOLE}")


_WHOLE = ("capture whole slot ads for this config (negotiator-ext snapshot, or the "
          "shadow's passes with NEGOTIATOR_EXT_WHOLE_SLOT_ADS = True)")


def _slot_side(text: str) -> set[str] | None:
    """The names a slot-side knob's text references (lower-case) but those it scopes to
    the job (`TARGET.x`); None when it can build a name at run time."""
    if referenced_names((text,)) is None:
        return None
    out = set()
    for ref in _EMPTY.externalRefs(classad2.ExprTree(text)):
        parts = [p.lower() for p in ref.split(".")]
        if parts[0] == "target":
            continue
        out.add(parts[1] if parts[0] == "my" and len(parts) > 1 else parts[0])
    return out


def _written_prefixed(name: str) -> bool:
    m = _SLOT_PREFIXED.fullmatch(name)
    return m is not None and m.group(1) in _WRITTEN
