"""Simulation scenarios (`negotiator-ext simulate SCENARIO`): YAML or JSON, validated
against `SCHEMA` (JSON Schema; shipped as examples/scenario.schema.json), every error
listed with its path in the file.

    name: two-users                  # required
    span: 72h                        # required: how much pool time to simulate
    interval: 60                     # seconds between negotiation cycles (default 60)
    start: 2026-01-05T00:00:00Z      # or an epoch (default 1700000000)
    seed: 1                          # for the random durations (default 0)
    config: two-users.config         # an HTCondor config file (relative to the scenario)
    knobs: {PRIORITY_HALFLIFE: 86400}  # knobs set after that file
    accountant: accounting.ads       # a recorded condor_userprio -l (default: empty)
    pool_snapshot: ../snap           # slots (and, unless given, config and accountant)
                                     # taken from a recorded snapshot
    slots:                           # slot shapes (added to pool_snapshot's, if any)
      - {count: 100, name: node, cpus: 1, memory: 2048}
      - {count: 4, name: fat, cpus: 32, memory: 262144, partitionable: true,
         attrs: {Big: "true"}}        # attrs: ClassAd expressions
    workload:
      - {submitter: alice, count: 100000, duration: 600}          # at 0
      - {submitter: bob, group: group_physics, at: 48h, count: 500, every: 1h, repeat: 10,
         duration: {exponential: 3600}, cpus: 2, memory: 4096,
         requirements: "TARGET.Memory >= 4096"}
    changes:
      - {at: 24h, config: {GROUP_QUOTA_group_physics: 40}}
      - {at: 30h, factor: {submitter: alice, value: 2}}     # condor_userprio -setfactor
      - {at: 31h, priority: {submitter: alice, value: 10}}  # condor_userprio -setprio
      - {at: 36h, slots_leave: {prefix: node, count: 10}}
      - {at: 40h, slots_join: {count: 10, name: new, cpus: 1}}

A what-if replay re-runs recorded snapshots under the scenario's config instead (`replay:
{ledger: URL [, pool: NAME]}` takes the snapshots a shadow ledger's passes kept; `replay:
{snapshots: [DIR, ...]}` names them): each is one pass of our cycle under the changed
config beside what the real negotiator did, in the output ledger ("what if group_physics
had had quota 40 last week?").

Durations are seconds or text with a unit (`90s`, `30m`, `48h`, `7d`). A job's duration
is fixed, or `{exponential: MEAN}`, or `{uniform: [LOW, HIGH]}`. A submitter is a user
name (`alice` -> `alice@<domain>`); with `group` its jobs carry `AccountingGroup =
"<group>.<user>"`, so it negotiates as `<group>.<user>@<domain>`.
"""

from __future__ import annotations

import functools
import json
import math
import re
from dataclasses import dataclass, field
from datetime import date, datetime
from pathlib import Path
from typing import Any, Mapping

from .core.accountant import NICE_USER_PREFIX
from .errors import InputError
from .when import epoch_of

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")   # a control character (a line break)

DEFAULT_START = 1_700_000_000

# a duration: seconds, or a number with a unit (the one grammar: schema and parse_duration)
_DURATION_TEXT = r"\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*"
_DURATION = {"oneOf": [{"type": "number", "minimum": 0},
                       {"type": "string", "pattern": f"^{_DURATION_TEXT}$"}]}
_EXPR = {"type": "string", "minLength": 1}
_ATTRS = {"type": "object", "propertyNames": {"pattern": r"^[A-Za-z_][A-Za-z0-9_]*$"},
          "additionalProperties": {"type": ["string", "number", "boolean"]}}
_SLOT = {
    "type": "object",
    "required": ["count"],
    "additionalProperties": False,
    "properties": {
        "count": {"type": "integer", "minimum": 1},
        "name": {"type": "string", "pattern": r"^[A-Za-z][A-Za-z0-9-]*$"},
        "cpus": {"type": "number", "exclusiveMinimum": 0},
        "memory": {"type": "number", "minimum": 0},
        "disk": {"type": "number", "minimum": 0},
        "gpus": {"type": "number", "minimum": 0},
        "partitionable": {"type": "boolean"},
        "attrs": _ATTRS,
    },
}
_JOB_DURATION = {"oneOf": [
    _DURATION,
    {"type": "object", "required": ["exponential"], "additionalProperties": False,
     "properties": {"exponential": _DURATION}},
    {"type": "object", "required": ["uniform"], "additionalProperties": False,
     "properties": {"uniform": {"type": "array", "items": _DURATION, "minItems": 2,
                                "maxItems": 2}}},
]}
_ARRIVAL = {
    "type": "object",
    "required": ["submitter", "count", "duration"],
    "additionalProperties": False,
    "properties": {
        "submitter": {"type": "string", "pattern": r"^[A-Za-z0-9_.-]+$"},
        "group": {"type": "string", "pattern": r"^[A-Za-z0-9_.-]+$"},
        "at": _DURATION,
        "count": {"type": "integer", "minimum": 1},
        "every": _DURATION,
        "repeat": {"type": "integer", "minimum": 1},
        "duration": _JOB_DURATION,
        "cpus": {"type": "number", "exclusiveMinimum": 0},
        "memory": {"type": "number", "minimum": 0},
        "disk": {"type": "number", "minimum": 0},
        "gpus": {"type": "number", "minimum": 0},
        "requirements": _EXPR,
        "rank": _EXPR,
        "concurrency_limits": {"type": "string"},
        "nice_user": {"type": "boolean"},
        "job_prio": {"type": "integer"},
        "attrs": _ATTRS,
    },
}
_KNOBS = {"type": "object", "propertyNames": {"pattern": r"^[A-Za-z_][A-Za-z0-9_.]*$"},
          "additionalProperties": {"type": ["string", "number", "boolean"]}}
_CHANGE = {
    "type": "object",
    "required": ["at"],
    "minProperties": 2,
    "maxProperties": 2,
    "additionalProperties": False,
    "properties": {
        "at": _DURATION,
        "config": _KNOBS,
        "factor": {"type": "object", "required": ["submitter", "value"],
                   "additionalProperties": False,
                   "properties": {"submitter": {"type": "string"},
                                  "group": {"type": "string"},
                                  "value": {"type": "number", "minimum": 1}}},
        "priority": {"type": "object", "required": ["submitter", "value"],
                     "additionalProperties": False,
                     "properties": {"submitter": {"type": "string"},
                                    "group": {"type": "string"},
                                    "value": {"type": "number", "minimum": 0.5}}},
        "slots_leave": {"type": "object", "required": ["prefix", "count"],
                        "additionalProperties": False,
                        "properties": {"prefix": {"type": "string"},
                                       "count": {"type": "integer", "minimum": 1}}},
        "slots_join": _SLOT,
    },
}
SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "$id": "https://negotiator-ext.example/scenario.schema.json",
    "title": "negotiator-ext simulation scenario",
    "type": "object",
    "required": ["name"],
    "additionalProperties": False,
    "properties": {
        "name": {"type": "string", "pattern": r"^[A-Za-z0-9_.-]+$"},
        "description": {"type": "string"},
        "start": {"oneOf": [{"type": "integer", "minimum": 0},
                            {"type": "string"}]},
        "span": _DURATION,
        "interval": _DURATION,
        "seed": {"type": "integer"},
        "domain": {"type": "string", "pattern": r"^[A-Za-z0-9.-]+$"},
        "config": {"type": "string"},
        "knobs": _KNOBS,
        "accountant": {"type": "string"},
        "pool_snapshot": {"type": "string"},
        "replay": {"type": "object", "additionalProperties": False, "minProperties": 1,
                   "properties": {"ledger": {"type": "string"},
                                  "pool": {"type": "string"},
                                  "snapshots": {"type": "array", "minItems": 1,
                                                "items": {"type": "string"}}}},
        "slots": {"type": "array", "items": _SLOT},
        "workload": {"type": "array", "items": _ARRIVAL},
        "changes": {"type": "array", "items": _CHANGE},
    },
}


# ---- the typed scenario ---------------------------------------------------------------------

@dataclass(frozen=True)
class Duration:
    """A job's run time: fixed, exponential (mean) or uniform (low, high), seconds."""
    kind: str
    a: float
    b: float = 0.0

    def draw(self, rng) -> float:
        if self.kind == "fixed":
            return self.a
        if self.kind == "exponential":
            return max(1.0, rng.expovariate(1.0 / self.a)) if self.a > 0 else 0.0
        return rng.uniform(self.a, self.b)


@dataclass(frozen=True)
class SlotShape:
    count: int
    name: str = "node"
    cpus: float = 1
    memory: float = 2048
    disk: float = 100_000
    gpus: float = 0
    partitionable: bool = False
    attrs: Mapping[str, str] = field(default_factory=dict)   # name -> expression text
    machine: str | None = None      # one recorded slot's own machine name (pool_snapshot)
    slot_name: str | None = None    # ... and its own slot name

    @functools.cached_property
    def control_in_texts(self) -> bool:
        """Whether a text of `attrs` has a control character (a line break): the
        simulator then sets its slots' attributes one by one (`sim.ads`)."""
        return any(_CONTROL.search(t) for t in self.attrs.values())

    @functools.cached_property
    def job_rank(self) -> str | None:
        """Its Rank's text when it can prefer one job to another (not a constant), else
        None. (Looked up once: the simulator asks at every job start.)"""
        text = next((v for k, v in self.attrs.items() if k.lower() == "rank"), None)
        if text is None:
            return None
        try:
            float(text)
            return None
        except ValueError:
            return text

    def ranks_jobs(self) -> bool:
        """Whether its Rank can prefer one job to another (not a constant)."""
        return self.job_rank is not None


def submitter_name(user: str, group: str | None, domain: str, *, nice: bool = False) -> str:
    """The accounting principal a user's jobs negotiate under (in `group`, as a nice
    user)."""
    base = f"{NICE_USER_PREFIX}.{user}" if nice else user
    return f"{group}.{base}@{domain}" if group else f"{base}@{domain}"


@dataclass(frozen=True)
class Arrival:
    user: str
    count: int
    duration: Duration
    group: str | None = None
    at: float = 0.0
    every: float | None = None
    repeat: int | None = None
    cpus: float = 1
    memory: float = 1024
    disk: float = 1024
    gpus: float = 0
    requirements: str | None = None
    rank: str | None = None
    concurrency_limits: str | None = None
    nice_user: bool = False
    job_prio: int = 0
    attrs: Mapping[str, str] = field(default_factory=dict)

    def user_name(self, domain: str) -> str:
        return f"{self.user}@{domain}"

    def submitter_name(self, domain: str) -> str:
        """The name it negotiates under (its accounting principal)."""
        return submitter_name(self.user, self.group, domain, nice=self.nice_user)

    def accounting_group(self) -> str | None:
        """The job's AccountingGroup, as condor_submit sets it (nice_user: the
        NICE_USER_ACCOUNTING_GROUP_NAME prefix)."""
        if self.group:
            return f"{self.group}.{self.user}"
        return f"{NICE_USER_PREFIX}.{self.user}" if self.nice_user else None

    def requirements_text(self) -> str:
        """The job's Requirements as condor_submit writes them: the user's, and the
        resources it requests."""
        own = f"({self.requirements}) && " if self.requirements else ""
        gpus = " && (TARGET.GPUs >= RequestGPUs)" if self.gpus else ""
        return (f"{own}(TARGET.Arch == \"X86_64\") && (TARGET.Cpus >= RequestCpus) && "
                f"(TARGET.Memory >= RequestMemory) && (TARGET.Disk >= RequestDisk){gpus}")


@dataclass(frozen=True)
class Change:
    at: float
    kind: str                          # config | factor | priority | slots_leave | slots_join
    knobs: Mapping[str, str] = field(default_factory=dict)
    name: str = ""                     # factor: the accounting principal
    value: float = 0.0
    prefix: str = ""
    count: int = 0
    shape: SlotShape | None = None


@dataclass(frozen=True)
class Scenario:
    name: str
    path: Path
    span: int
    interval: int = 60
    start: int = DEFAULT_START
    seed: int = 0
    domain: str = "sim.local"
    config_path: Path | None = None
    knobs: Mapping[str, str] = field(default_factory=dict)
    accountant: Path | None = None
    slots: tuple[SlotShape, ...] = ()
    workload: tuple[Arrival, ...] = ()
    changes: tuple[Change, ...] = ()
    description: str = ""
    # what-if replay of recorded snapshots (their own paths, or a shadow ledger's passes)
    replay_ledger: str | None = None
    replay_pool: str | None = None
    replay_snapshots: tuple[Path, ...] = ()

    @property
    def schedd(self) -> str:
        return f"schedd.{self.domain}"

    @property
    def pool_name(self) -> str:
        """The ledger's pool name for this run: `sim:<name>`, or `whatif:<name>` for a
        replay of recorded snapshots."""
        return f"whatif:{self.name}" if self.is_replay else f"sim:{self.name}"

    @property
    def is_replay(self) -> bool:
        return bool(self.replay_ledger or self.replay_snapshots)


# ---- reading ----------------------------------------------------------------------------------

def parse_duration(v: Any) -> float:
    """Seconds from a number or a text with a unit (s, m, h, d, w)."""
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return float(v)
    m = re.fullmatch(_DURATION_TEXT, str(v))
    if not m:
        raise ValueError(f"not a duration: {v!r}")
    return float(m.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400,
                                "w": 604800}[m.group(2)]


def _path(err) -> str:
    out = ""
    for p in err.absolute_path:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out or "(top level)"


def load_scenario(path: str | Path) -> Scenario:
    """Read and validate a scenario file; InputError lists every problem with its path."""
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as exc:
        raise InputError(str(p), f"cannot read the scenario: {exc.strerror or exc}") from None
    try:
        if p.suffix.lower() == ".json":
            doc = json.loads(text)
        else:
            import yaml
            doc = yaml.safe_load(text)
    except Exception as exc:   # noqa: BLE001 - any parser error, reported in one line
        raise InputError(str(p), f"not valid {'JSON' if p.suffix.lower() == '.json' else 'YAML'}: "
                         + " ".join(str(exc).split())) from None
    if isinstance(doc, dict) and isinstance(doc.get("start"), (datetime, date)):
        doc["start"] = doc["start"].isoformat()      # YAML reads a bare timestamp as one
    errors = validate(doc)
    if errors:
        raise InputError(str(p), f"{len(errors)} problem(s): " + "; ".join(errors))
    return _typed(doc, p)


def validate(doc: Any) -> list[str]:
    """Every problem of a scenario document, as "path: message", in document order."""
    import jsonschema
    v = jsonschema.Draft202012Validator(SCHEMA)
    errs = sorted(v.iter_errors(doc),     # document order: workload[2] before workload[10]
                  key=lambda e: [(isinstance(x, int), x if isinstance(x, int) else str(x))
                                 for x in e.absolute_path])
    out = [f"{_path(e)}: {_message(e)}" for e in errs]
    if not out and isinstance(doc, dict):
        if doc.get("replay"):
            for key in ("slots", "workload", "pool_snapshot", "changes", "accountant"):
                if doc.get(key):
                    out.append(f"{key}: not with replay (a replay re-runs recorded snapshots)")
            r = doc["replay"]
            if ("ledger" in r) == ("snapshots" in r):
                out.append("replay: give either ledger or snapshots")
        else:
            if not doc.get("slots") and not doc.get("pool_snapshot"):
                out.append("slots: a pool needs slots (or pool_snapshot)")
            if "span" not in doc:
                out.append("span: required (how much pool time to simulate)")
        for i, a in enumerate(doc.get("workload") or ()):
            if a.get("repeat") and not a.get("every"):
                out.append(f"workload[{i}].repeat: needs `every`")
            d = a.get("duration")
            if isinstance(d, dict) and "uniform" in d:
                lo, hi = (parse_duration(x) for x in d["uniform"])
                if lo > hi:
                    out.append(f"workload[{i}].duration.uniform: low {lo:g} above high {hi:g}")
        for key in ("span", "interval"):
            if key in doc and parse_duration(doc[key]) <= 0 and not doc.get("replay"):
                out.append(f"{key}: must be more than 0 seconds")
        if "interval" in doc and 0 < parse_duration(doc["interval"]) < 1:
            out.append("interval: must be at least 1 second (cycles are whole seconds)")
        if isinstance(doc.get("start"), str):
            try:
                _start(doc["start"])
            except ValueError:
                out.append(f"start: {doc['start']!r} is not an ISO 8601 date and time")
        out.extend(_expression_errors(doc))
    return out


def _expression_errors(doc: Mapping[str, Any]) -> list[str]:
    """Every ClassAd expression of the scenario (slot attributes, job requirements, rank,
    attributes) that classad2 does not parse, with its path."""
    from .core.classads import parse_expr
    found: list[tuple[str, str]] = []
    for i, s in enumerate(doc.get("slots") or ()):
        found += [(f"slots[{i}].attrs.{k}", v) for k, v in (s.get("attrs") or {}).items()]
    for i, a in enumerate(doc.get("workload") or ()):
        for key in ("requirements", "rank"):
            if key in a:
                found.append((f"workload[{i}].{key}", a[key]))
        found += [(f"workload[{i}].attrs.{k}", v) for k, v in (a.get("attrs") or {}).items()]
    for i, c in enumerate(doc.get("changes") or ()):
        attrs = (c.get("slots_join") or {}).get("attrs") or {}
        found += [(f"changes[{i}].slots_join.attrs.{k}", v) for k, v in attrs.items()]
    out = []
    for where, text in found:
        try:
            parse_expr(_text(text))
        except Exception:   # noqa: BLE001 - classad2 raises several types for bad text
            out.append(f"{where}: {_text(text)!r} is not a ClassAd expression")
    return out


def _message(e) -> str:
    if e.validator == "oneOf" and e.validator_value in (_DURATION["oneOf"], _JOB_DURATION["oneOf"]):
        return f"{e.instance!r} is not a duration (seconds, or a number with s/m/h/d/w)"
    if e.validator == "additionalProperties":
        return e.message.replace("Additional properties are not allowed", "unknown key(s)")
    return e.message


def _text(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def _duration_of(v: Any) -> Duration:
    if isinstance(v, dict) and "exponential" in v:
        return Duration("exponential", parse_duration(v["exponential"]))
    if isinstance(v, dict) and "uniform" in v:
        lo, hi = (parse_duration(x) for x in v["uniform"])
        return Duration("uniform", lo, hi)
    return Duration("fixed", parse_duration(v))


def _shape(d: Mapping[str, Any]) -> SlotShape:
    return SlotShape(count=int(d["count"]), name=d.get("name", "node"),
                     cpus=d.get("cpus", 1), memory=d.get("memory", 2048),
                     disk=d.get("disk", 100_000), gpus=d.get("gpus", 0),
                     partitionable=bool(d.get("partitionable", False)),
                     attrs={k: _text(v) for k, v in (d.get("attrs") or {}).items()})


def _start(v: Any) -> int:
    return DEFAULT_START if v is None else int(epoch_of(v))


def _typed(doc: Mapping[str, Any], path: Path) -> Scenario:
    base = path.parent
    domain = doc.get("domain", "sim.local")

    def rel(v: str | None) -> Path | None:
        if v is None:
            return None
        q = Path(v)
        return q if q.is_absolute() else (base / q)

    config = rel(doc.get("config"))
    accountant = rel(doc.get("accountant"))
    slots: list[SlotShape] = []
    snap = rel(doc.get("pool_snapshot"))
    if snap is not None:
        shapes, snap_config, snap_acc = snapshot_pool(snap)
        slots.extend(shapes)
        config = config or snap_config
        accountant = accountant or snap_acc
    for kind, p in (("config", config), ("accountant", accountant)):
        if p is not None and not p.is_file():
            raise InputError(str(path), f"{kind}: no such file: {p}")
    slots.extend(_shape(s) for s in doc.get("slots") or ())
    workload = []
    for a in doc.get("workload") or ():
        workload.append(Arrival(
            user=a["submitter"], count=int(a["count"]), duration=_duration_of(a["duration"]),
            group=a.get("group"), at=parse_duration(a.get("at", 0)),
            every=parse_duration(a["every"]) if "every" in a else None,
            repeat=a.get("repeat"), cpus=a.get("cpus", 1), memory=a.get("memory", 1024),
            disk=a.get("disk", 1024), gpus=a.get("gpus", 0),
            requirements=a.get("requirements"), rank=a.get("rank"),
            concurrency_limits=a.get("concurrency_limits"),
            nice_user=bool(a.get("nice_user", False)), job_prio=int(a.get("job_prio", 0)),
            attrs={k: _text(v) for k, v in (a.get("attrs") or {}).items()}))
    changes = []
    for c in doc.get("changes") or ():
        at = parse_duration(c["at"])
        if "config" in c:
            changes.append(Change(at, "config", knobs={k: _text(v) for k, v in c["config"].items()}))
        elif "factor" in c or "priority" in c:
            kind = "factor" if "factor" in c else "priority"
            f = c[kind]
            changes.append(Change(at, kind,
                                  name=submitter_name(f["submitter"], f.get("group"), domain),
                                  value=float(f["value"])))
        elif "slots_leave" in c:
            changes.append(Change(at, "slots_leave", prefix=c["slots_leave"]["prefix"],
                                  count=int(c["slots_leave"]["count"])))
        else:
            shape = _shape(c["slots_join"])
            changes.append(Change(at, "slots_join", count=shape.count, shape=shape))
    return Scenario(
        name=doc["name"], path=path, span=int(parse_duration(doc.get("span", 0))),
        interval=int(parse_duration(doc.get("interval", 60))), start=_start(doc.get("start")),
        seed=int(doc.get("seed", 0)), domain=domain, config_path=config,
        knobs={k: _text(v) for k, v in (doc.get("knobs") or {}).items()},
        accountant=accountant, slots=tuple(slots), workload=tuple(workload),
        changes=tuple(changes), description=doc.get("description", ""),
        replay_ledger=(doc.get("replay") or {}).get("ledger"),
        replay_pool=(doc.get("replay") or {}).get("pool"),
        replay_snapshots=tuple(rel(d) for d in (doc.get("replay") or {}).get("snapshots", ())))


# Slot attributes the simulator writes itself (identity, resources, state, claim).
_SIM_OWNED = frozenset(a.lower() for a in (
    "MyType", "Name", "Machine", "StartdIpAddr", "MyAddress", "Cpus", "Memory", "Disk", "GPUs",
    "TotalCpus", "TotalMemory", "State", "Activity", "RemoteUser", "RemoteOwner",
    "RemoteScheddName", "JobId", "EnteredCurrentState", "AccountingGroup", "RemoteGroup",
    "RemoteNegotiatingGroup", "PartitionableSlot", "DynamicSlot", "SlotType",
    "NumDynamicSlots", "ParentSlotName", "CurrentRank", "ClaimId",
    "Capability", "ClaimIdList", "PublicClaimId", "GlobalJobId", "RemoteAutoregroup",
    "ConcurrencyLimits", "LastHeardFrom", "UpdateSequenceNumber", "DaemonStartTime",
    "MyCurrentTime", "LastBenchmark", "ChildCpus", "ChildMemory", "ChildState"))


def snapshot_pool(directory: Path) -> tuple[list[SlotShape], Path | None, Path | None]:
    """A recorded snapshot's slots as shapes (each its own, with its attributes; dynamic
    slots folded back into their partitionable slot; claims dropped), and its config and
    accounting files if it has them."""
    from .adapters.snapshot import load_snapshot
    snap = load_snapshot(directory, jobs=False)
    acc = snap.accounting_source
    return slot_shapes(snap.slots), snap.config_path, Path(acc) if acc else None


def slot_shapes(slot_ads) -> list[SlotShape]:
    """Slot ads as shapes: each its own, with its attributes; dynamic slots folded back
    into their partitionable slot; claims dropped."""
    from .core.classads import attribute_texts, eval_bool, eval_number
    shapes = []
    # a pool's slots have most names and many texts alike: each is kept once
    texts: dict[str, str] = {}
    one = texts.setdefault
    for ad in slot_ads:
        if eval_bool(ad, "DynamicSlot") is True:
            continue
        pslot = eval_bool(ad, "PartitionableSlot") is True

        def total(attr: str, default: float) -> float:
            v = eval_number(ad, f"TotalSlot{attr}" if pslot else attr)
            if v is None:
                v = eval_number(ad, attr)
            return default if v is None or math.isnan(v) else v
        name = str(ad.get("Machine") or ad.get("Name") or "node").split(".")[0]
        name = re.sub(r"[^A-Za-z0-9-]", "-", name) or "node"
        if not name[0].isalpha():
            name = "n" + name
        attrs = {one(k, k): one(v, v) for k, v in attribute_texts(ad)
                 if k.lower() not in _SIM_OWNED}
        shapes.append(SlotShape(count=1, name=name, machine=str(ad.get("Machine") or name),
                                slot_name=str(ad.get("Name")),
                                cpus=total("Cpus", 1),
                                memory=total("Memory", 0), disk=total("Disk", 0),
                                gpus=total("GPUs", 0), partitionable=pslot, attrs=attrs))
    return shapes
