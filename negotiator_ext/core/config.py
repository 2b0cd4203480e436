"""The negotiator's configuration as one typed, immutable object (reference section 0.1).

The core never reads HTCondor configuration itself: the adapter
(`negotiator_ext.adapters.condor_config`) reads it through `htcondor2.param`, which gives
HTCondor's own macro expansion and defaults, and hands the resulting mapping to
`NegotiatorConfig.from_params`. That function only types and validates.

Our own knobs are prefixed NEGOTIATOR_EXT_ and kept in `ext`.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field, fields
from types import MappingProxyType
from typing import Any, Mapping

from ..errors import InputError
from ..limits import MAX_KNOB_MAGNITUDE
from . import classads

EXT_PREFIX = "NEGOTIATOR_EXT_"

# (field, knob, kind). The NegotiatorConfig field's default is used only when the knob has
# neither a value nor a default in HTCondor's param table (the bindings return the table
# default whenever one exists, so for almost every knob that default is never reached).
# kinds: float, int, bool, str (free text), expr (a ClassAd expression, kept as text).
_SCALAR_KNOBS: tuple[tuple[str, str, str], ...] = (
    # accountant (section 1)
    ("priority_halflife", "PRIORITY_HALFLIFE", "float"),
    ("default_prio_factor", "DEFAULT_PRIO_FACTOR", "float"),
    ("nice_user_prio_factor", "NICE_USER_PRIO_FACTOR", "float"),
    ("remote_prio_factor", "REMOTE_PRIO_FACTOR", "float"),
    ("accountant_local_domain", "ACCOUNTANT_LOCAL_DOMAIN", "str"),
    ("discount_suspended_resources", "NEGOTIATOR_DISCOUNT_SUSPENDED_RESOURCES", "bool"),
    ("use_slot_weights", "NEGOTIATOR_USE_SLOT_WEIGHTS", "bool"),
    ("slot_weight", "SLOT_WEIGHT", "expr"),
    ("force_negotiator_slot_weight", "FORCE_NEGOTIATOR_SLOT_WEIGHT", "bool"),
    # cycle timing (section 2.1)
    ("negotiator_interval", "NEGOTIATOR_INTERVAL", "int"),
    ("negotiator_min_interval", "NEGOTIATOR_MIN_INTERVAL", "int"),
    ("negotiator_update_interval", "NEGOTIATOR_UPDATE_INTERVAL", "int"),
    ("negotiator_update_after_cycle", "NEGOTIATOR_UPDATE_AFTER_CYCLE", "bool"),
    ("cycle_stats_length", "NEGOTIATION_CYCLE_STATS_LENGTH", "int"),
    ("negotiator_cycle_delay", "NEGOTIATOR_CYCLE_DELAY", "int"),
    ("max_time_per_cycle", "NEGOTIATOR_MAX_TIME_PER_CYCLE", "int"),
    ("max_time_per_submitter", "NEGOTIATOR_MAX_TIME_PER_SUBMITTER", "int"),
    ("max_time_per_schedd", "NEGOTIATOR_MAX_TIME_PER_SCHEDD", "int"),
    ("max_time_per_piespin", "NEGOTIATOR_MAX_TIME_PER_PIESPIN", "int"),
    # ad selection (section 2.2)
    ("slot_constraint", "NEGOTIATOR_SLOT_CONSTRAINT", "expr"),
    ("slot_poolsize_constraint", "NEGOTIATOR_SLOT_POOLSIZE_CONSTRAINT", "expr"),
    ("submitter_constraint", "NEGOTIATOR_SUBMITTER_CONSTRAINT", "expr"),
    ("job_constraint", "NEGOTIATOR_JOB_CONSTRAINT", "expr"),
    # preemption and ranks (section 4)
    ("consider_preemption", "NEGOTIATOR_CONSIDER_PREEMPTION", "bool"),
    ("consider_early_preemption", "NEGOTIATOR_CONSIDER_EARLY_PREEMPTION", "bool"),
    ("preemption_requirements", "PREEMPTION_REQUIREMENTS", "expr"),
    ("preemption_rank", "PREEMPTION_RANK", "expr"),
    ("pre_job_rank", "NEGOTIATOR_PRE_JOB_RANK", "expr"),
    ("post_job_rank", "NEGOTIATOR_POST_JOB_RANK", "expr"),
    ("preemption_requirements_stable", "PREEMPTION_REQUIREMENTS_STABLE", "bool"),
    ("preemption_rank_stable", "PREEMPTION_RANK_STABLE", "bool"),
    ("matchlist_caching", "NEGOTIATOR_MATCHLIST_CACHING", "bool"),
    ("ignore_job_ranks", "NEGOTIATOR_IGNORE_JOB_RANKS", "bool"),
    ("ignore_user_priorities", "NEGOTIATOR_IGNORE_USER_PRIORITIES", "bool"),
    ("cross_slot_prios", "NEGOTIATOR_CROSS_SLOT_PRIOS", "bool"),
    ("startd_resource_prefix", "STARTD_RESOURCE_PREFIX", "str"),
    ("inform_startd", "NEGOTIATOR_INFORM_STARTD", "bool"),
    ("depth_first", "NEGOTIATOR_DEPTH_FIRST", "bool"),
    ("prefetch_requests", "NEGOTIATOR_PREFETCH_REQUESTS", "bool"),
    ("use_resource_request_counts", "USE_RESOURCE_REQUEST_COUNTS", "bool"),
    ("resource_request_list_size", "NEGOTIATOR_RESOURCE_REQUEST_LIST_SIZE", "int"),
    ("use_global_job_prios", "USE_GLOBAL_JOB_PRIOS", "bool"),
    ("allow_pslot_preemption", "ALLOW_PSLOT_PREEMPTION", "bool"),
    ("match_working_cm_slots", "MATCH_WORKING_CM_SLOTS", "bool"),
    ("trim_shutdown_threshold", "NEGOTIATOR_TRIM_SHUTDOWN_THRESHOLD", "int"),
    ("negotiate_all_jobs_in_cluster", "NEGOTIATE_ALL_JOBS_IN_CLUSTER", "bool"),
    # the schedd's own limits on what it offers (core.schedd_limits), as the snapshot's
    # config gives them; a schedd's own values, when captured, come first
    ("schedd_per_user_match_limits", "SCHEDD_ENABLE_PER_USER_MATCH_LIMITS", "bool"),
    ("max_concurrent_uploads_per_user", "MAX_CONCURRENT_UPLOADS_PER_USER", "int"),
    ("max_concurrent_uploads", "MAX_CONCURRENT_UPLOADS", "int"),
    ("max_jobs_running", "MAX_JOBS_RUNNING", "int"),
    # what the schedds and startds do with matches (read by the forecast: sim.schedd_startd)
    ("claim_worklife", "CLAIM_WORKLIFE", "int"),
    ("claim_partitionable_leftovers", "CLAIM_PARTITIONABLE_LEFTOVERS", "bool"),
    ("schedd_send_reschedule", "SCHEDD_SEND_RESCHEDULE", "bool"),
    ("schedd_min_interval", "SCHEDD_MIN_INTERVAL", "int"),
    # concurrency limits (section 4.11)
    ("concurrency_limit_default", "CONCURRENCY_LIMIT_DEFAULT", "float"),
    # hierarchical group quotas (section 3)
    ("group_accept_surplus", "GROUP_ACCEPT_SURPLUS", "bool"),
    ("group_autoregroup", "GROUP_AUTOREGROUP", "bool"),
    ("group_sort_expr", "GROUP_SORT_EXPR", "expr"),
    ("allow_quota_oversubscription", "NEGOTIATOR_ALLOW_QUOTA_OVERSUBSCRIPTION", "bool"),
    ("use_weighted_demand", "NEGOTIATOR_USE_WEIGHTED_DEMAND", "bool"),
    ("strict_enforce_quota", "NEGOTIATOR_STRICT_ENFORCE_QUOTA", "bool"),
)


# The expression knobs (knob -> NegotiatorConfig field): what the negotiator evaluates
# against the ads, whose references a capture asks the daemons for.
EXPRESSION_KNOBS: dict[str, str] = {knob: f for f, knob, kind in _SCALAR_KNOBS
                                    if kind == "expr"}

# Expression knobs HTCondor's negotiator does not refuse when their text does not parse
# (every other expression knob makes it EXCEPT: Matchmaker::reinitialize for
# PREEMPTION_REQUIREMENTS, PREEMPTION_RANK, NEGOTIATOR_PRE/POST_JOB_RANK,
# NEGOTIATOR_SLOT_CONSTRAINT, NEGOTIATOR_SUBMITTER_CONSTRAINT; GroupEntry::hgq_construct_tree
# for GROUP_SORT_EXPR). We ignore these as it does, with a warning:
#   NEGOTIATOR_SLOT_POOLSIZE_CONSTRAINT: logged and unset (Matchmaker::reinitialize);
#   NEGOTIATOR_JOB_CONSTRAINT: never parsed there; ClassAd::AssignExpr fails, so nothing is
#     sent to the schedd (startNegotiateProtocol) and no constraint applies;
#   SLOT_WEIGHT: never parsed there; AssignExpr fails, so no slot ad gets it
#     (obtainAdsFromCollector) and a slot ad without its own SlotWeight weighs 1.0
#     (Accountant::GetSlotWeight), FORCE_NEGOTIATOR_SLOT_WEIGHT or not.
_IGNORED_IF_UNPARSABLE = {
    "NEGOTIATOR_SLOT_POOLSIZE_CONSTRAINT": "ignored (no pool-size constraint)",
    "NEGOTIATOR_JOB_CONSTRAINT": "ignored (no job constraint)",
    "SLOT_WEIGHT": "ignored: a slot ad without its own SlotWeight weighs 1.0",
}

# Expression knobs the negotiator reads with param() and keeps as "none" when that gives
# NULL: set to nothing in the config, they are not their table default but absent
# (Matchmaker::reinitialize logs "PREEMPTION_REQUIREMENTS = None").
NULL_WHEN_EMPTY = ("PREEMPTION_REQUIREMENTS", "PREEMPTION_RANK", "NEGOTIATOR_PRE_JOB_RANK",
                   "NEGOTIATOR_POST_JOB_RANK")

# Knobs with a legacy fallback name: the new name wins when it is defined.
_LEGACY_ALIASES = {
    "NEGOTIATOR_SLOT_POOLSIZE_CONSTRAINT": "GROUP_DYNAMIC_MACH_CONSTRAINT",
    "GROUP_QUOTA_MAX_ALLOCATION_ROUNDS": "HFS_MAX_ALLOCATION_ROUNDS",
    "GROUP_QUOTA_ROUND_ROBIN_RATE": "HFS_ROUND_ROBIN_RATE",
}

INT_MAX = 2147483647

_TRUE = {"true", "t", "yes", "y", "1"}
_FALSE = {"false", "f", "no", "n", "0"}


def _freeze(d: Mapping) -> Mapping:
    return MappingProxyType(dict(d))


@dataclass(frozen=True)
class GroupConfig:
    """One entry of GROUP_NAMES with its per-group knobs (rule G2). Quotas are as
    configured (out of range is a config error, as param_double makes it); assignment
    happens in core.groups."""
    name: str                      # as written in GROUP_NAMES (the accountant record key)
    static_quota: float | None     # GROUP_QUOTA_<g>, in [0, INT_MAX]
    dynamic_quota: float | None    # GROUP_QUOTA_DYNAMIC_<g>, in [0, 1]
    accept_surplus: bool
    autoregroup: bool
    # (GROUP_PRIO_FACTOR_<g> is NegotiatorConfig.group_prio_factor)


@dataclass(frozen=True)
class NegotiatorConfig:
    source: str = "<defaults>"
    # accountant
    priority_halflife: float = 86400.0
    default_prio_factor: float = 1000.0
    nice_user_prio_factor: float = 1e10
    remote_prio_factor: float = 1e7
    accountant_local_domain: str = ""
    discount_suspended_resources: bool = False
    use_slot_weights: bool = True
    slot_weight: str = "Cpus"
    force_negotiator_slot_weight: bool = False
    # timing
    negotiator_interval: int = 60
    negotiator_min_interval: int = 5
    # how often the negotiator's ad (with its cycle history) reaches the collector, and
    # how many cycles that history keeps
    negotiator_update_interval: int = 300
    negotiator_update_after_cycle: bool = False
    cycle_stats_length: int = 3
    negotiator_cycle_delay: int = 20
    max_time_per_cycle: int = 1200
    max_time_per_submitter: int = 60
    max_time_per_schedd: int = 120
    max_time_per_piespin: int = 120
    # ad selection
    slot_constraint: str | None = None
    slot_poolsize_constraint: str | None = None
    submitter_constraint: str | None = None
    job_constraint: str | None = None
    # preemption and ranks
    consider_preemption: bool = True
    consider_early_preemption: bool = False
    preemption_requirements: str | None = "False"
    preemption_rank: str | None = None
    pre_job_rank: str | None = None
    post_job_rank: str | None = None
    preemption_requirements_stable: bool = True
    preemption_rank_stable: bool = True
    matchlist_caching: bool = True
    ignore_job_ranks: bool = False
    ignore_user_priorities: bool = False
    cross_slot_prios: bool = False
    startd_resource_prefix: str = "slot"
    inform_startd: bool = False
    depth_first: bool = False
    prefetch_requests: bool = True
    use_resource_request_counts: bool = True
    resource_request_list_size: int = 200
    use_global_job_prios: bool = False
    allow_pslot_preemption: bool = False
    match_working_cm_slots: bool = False
    trim_shutdown_threshold: int = 0
    negotiate_all_jobs_in_cluster: bool = False
    # the schedd's limits (core.schedd_limits); HTCondor 25.14's defaults
    schedd_per_user_match_limits: bool = True
    max_concurrent_uploads_per_user: int = 20
    max_concurrent_uploads: int = 100
    max_jobs_running: int = 10000
    claim_worklife: int = 1200
    claim_partitionable_leftovers: bool = True
    schedd_send_reschedule: bool = True
    schedd_min_interval: int = 5
    match_exprs: Mapping[str, str] = field(default_factory=lambda: _freeze({}))
    # concurrency limits: names lower-cased
    concurrency_limit_default: float = 2308032.0
    concurrency_limit_defaults: Mapping[str, float] = field(default_factory=lambda: _freeze({}))
    concurrency_limits: Mapping[str, float] = field(default_factory=lambda: _freeze({}))
    # <name>_LIMIT / CONCURRENCY_LIMIT_DEFAULT_<prefix> knobs (upper-cased) whose text is not
    # a number -> that text; an error only once a limit needs the knob (concurrency_limit_max)
    concurrency_limit_errors: Mapping[str, str] = field(default_factory=lambda: _freeze({}))
    # groups
    groups: tuple[GroupConfig, ...] = ()
    group_accept_surplus: bool = False
    group_autoregroup: bool = False
    group_sort_expr: str = ('ifThenElse(AccountingGroup=?="<none>",3.4e+38,'
                            'ifThenElse(GroupQuota>0,GroupResourcesInUse/GroupQuota,3.3e+38))')
    group_quota_max_allocation_rounds: int = 3
    group_quota_round_robin_rate: float = 1e100
    allow_quota_oversubscription: bool = True
    use_weighted_demand: bool = True
    strict_enforce_quota: bool = True
    # GROUP_PRIO_FACTOR_<name> for every name that has one (upper-cased name -> factor);
    # applies to configured groups and to the root "<none>".
    group_prio_factors: Mapping[str, float] = field(default_factory=lambda: _freeze({}))
    # our own NEGOTIATOR_EXT_* knobs, upper-cased names without the prefix
    ext: Mapping[str, str] = field(default_factory=lambda: _freeze({}))
    # knobs HTCondor's negotiator ignores with a log message, and why (text, no source)
    warnings: tuple[str, ...] = ()

    def group_prio_factor(self, group_name: str) -> float:
        """GROUP_PRIO_FACTOR_<group> or 0.0 when unset (rule A9 step 2)."""
        return self.group_prio_factors.get(group_name.upper(), 0.0)

    def concurrency_limit_max(self, name: str) -> float:
        """Rule M8: the maximum for limit `name` (case-insensitive).

        Raises InputError when a knob it reads is not a number: Accountant::GetLimitMax
        reads them with param_double, which EXCEPTs then."""
        n = name.lower()
        deflim = self.concurrency_limit_default
        if "." in n:
            prefix = n.rsplit(".", 1)[0]
            self._check_limit_knob(f"CONCURRENCY_LIMIT_DEFAULT_{prefix}", n)
            deflim = self.concurrency_limit_defaults.get(prefix, deflim)
        self._check_limit_knob(f"{n}_LIMIT", n)
        return self.concurrency_limits.get(n, deflim)

    def _check_limit_knob(self, knob: str, name: str) -> None:
        text = self.concurrency_limit_errors.get(knob.upper())
        if text is not None:
            raise InputError(self.source, f"{knob.upper()} = {text}: not a number "
                             f"(the maximum of concurrency limit {name})")

    @classmethod
    def from_params(cls, params: Mapping[str, Any], source: str = "<config>",
                    raw: Mapping[str, str] | None = None) -> "NegotiatorConfig":
        """Type and validate the values `htcondor2.param` returned.

        `params` maps knob names (any case) to what the bindings returned: typed values for
        knobs in HTCondor's param table (with HTCondor's defaults filled in), strings for the
        rest. `raw` maps knob names to their unexpanded-type text, used to reject a value the
        bindings silently replaced by its default (e.g. PRIORITY_HALFLIFE = abc), as the real
        negotiator refuses to start with it.
        """
        up = {str(k).upper(): v for k, v in params.items()}
        raw_up = {str(k).upper(): v for k, v in (raw or {}).items()}
        kw: dict[str, Any] = {"source": source}
        default = {f.name: f.default for f in fields(cls)}   # the one place defaults live

        def lookup(knob: str) -> Any:
            if knob in up:
                return up[knob]
            alias = _LEGACY_ALIASES.get(knob)
            if alias and alias in up:
                return up[alias]
            return None

        warnings: list[str] = []
        for fname, knob, kind in _SCALAR_KNOBS:
            value = lookup(knob)
            if knob in NULL_WHEN_EMPTY and isinstance(value, str) and value.strip() == "":
                # set to nothing: param() gives NULL, so the negotiator has no such
                # expression (an empty PREEMPTION_REQUIREMENTS restricts nothing)
                kw[fname] = None
                continue
            if value is None or (isinstance(value, str) and value.strip() == "" and kind != "str"):
                kw[fname] = default[fname]
                continue
            name = knob if knob in up else _LEGACY_ALIASES.get(knob, knob)   # as written
            try:
                kw[fname] = _typed(source, name, value, kind, raw_up.get(knob))
            except InputError as exc:
                if knob not in _IGNORED_IF_UNPARSABLE:
                    raise
                warnings.append(f"{exc.message}; {_IGNORED_IF_UNPARSABLE[knob]}, "
                                "as in HTCondor's negotiator")
                kw[fname] = None
        if kw["slot_weight"] is None:
            # nothing is inserted into the slot ads: an expression giving no number, which
            # GetSlotWeight (core.slots.slot_weight) turns into 1.0; FORCE cannot replace
            # an ad's own SlotWeight with it
            kw["slot_weight"] = "undefined"
            kw["force_negotiator_slot_weight"] = False

        rounds = lookup("GROUP_QUOTA_MAX_ALLOCATION_ROUNDS")
        kw["group_quota_max_allocation_rounds"] = max(
            1, int(_typed(source, "GROUP_QUOTA_MAX_ALLOCATION_ROUNDS", rounds, "int", None))
        ) if rounds is not None else default["group_quota_max_allocation_rounds"]
        rate = lookup("GROUP_QUOTA_ROUND_ROBIN_RATE")
        kw["group_quota_round_robin_rate"] = max(
            1.0, _typed(source, "GROUP_QUOTA_ROUND_ROBIN_RATE", rate, "float", None)
        ) if rate is not None else default["group_quota_round_robin_rate"]
        if not kw["priority_halflife"] >= 1e-5:
            # below param_double's range for it: the negotiator stops at start-up
            raise InputError(source, f"PRIORITY_HALFLIFE = {kw['priority_halflife']:g}: too "
                             "low (at least 1e-05 s; HTCondor's negotiator refuses to start)")

        # NEGOTIATOR_MATCH_EXPRS: a list of macro names whose values become slot attributes.
        names = _split_list(lookup("NEGOTIATOR_MATCH_EXPRS") or "")
        match_exprs = {}
        for n in names:
            v = up.get(n.upper())
            if v is None:   # Matchmaker::reinitialize skips it with a warning
                warnings.append(f"NEGOTIATOR_MATCH_EXPRS: {n} is not defined; skipped, "
                                "as in HTCondor's negotiator")
                continue
            try:
                classads.parse_expr(str(v).strip())
            except ValueError:   # insertNegotiatorMatchExprs: AssignExpr fails, nothing inserted
                warnings.append(f"NEGOTIATOR_MATCH_EXPRS: {n} = {v}: not a valid ClassAd "
                                "expression; not inserted into the slot ads, as in HTCondor's "
                                "negotiator")
                continue
            attr = n if n.upper().startswith("NEGOTIATORMATCHEXPR") else f"NegotiatorMatchExpr{n}"
            match_exprs[attr] = str(v)
        kw["match_exprs"] = _freeze(match_exprs)

        # concurrency limits (rule M8): <name>_LIMIT and CONCURRENCY_LIMIT_DEFAULT_<prefix>.
        # GetLimitMax reads them only for a limit a job asks for, so one that is not a number
        # (or an unrelated *_LIMIT knob) is an error only then (concurrency_limit_max).
        limits, defaults, bad = {}, {}, {}
        for key, v in up.items():
            if key.startswith("CONCURRENCY_LIMIT_DEFAULT_"):
                into, name = defaults, key[len("CONCURRENCY_LIMIT_DEFAULT_"):]
            elif key.endswith("_LIMIT") and len(key) > len("_LIMIT") and is_limit_name(key[:-6]):
                into, name = limits, key[:-6]
            else:
                continue
            num = _param_double(v)
            if num is None:
                bad[key] = str(v)
            else:
                into[name.lower()] = num
        kw["concurrency_limits"] = _freeze(limits)
        kw["concurrency_limit_defaults"] = _freeze(defaults)
        kw["concurrency_limit_errors"] = _freeze(bad)

        # group prio factors (rule A9 step 2), for any group name, "<none>" included
        gpf = {}
        for key, v in up.items():
            if key.startswith("GROUP_PRIO_FACTOR_"):
                gpf[key[len("GROUP_PRIO_FACTOR_"):]] = _typed(source, key, v, "float", raw_up.get(key))
        kw["group_prio_factors"] = _freeze(gpf)

        kw["groups"] = tuple(_groups(source, lookup, up, raw_up, kw))
        kw["ext"] = _freeze(ext_knobs(up))
        kw["warnings"] = tuple(warnings)
        return cls(**kw)


def ext_knobs(params: Mapping[str, Any]) -> dict[str, str]:
    """Our own NEGOTIATOR_EXT_* knobs of `params` (names in any case): upper-cased names
    without the prefix, values as text; a knob whose value is None is left out."""
    return {str(k).upper()[len(EXT_PREFIX):]: str(v) for k, v in params.items()
            if str(k).upper().startswith(EXT_PREFIX) and v is not None}


def priority_preemption_off(config: "NegotiatorConfig") -> bool:
    """PREEMPTION_REQUIREMENTS is literally False: no priority preemption at all (an
    empty value is None, which allows it: 4.5 step 10)."""
    return (config.preemption_requirements or "").strip().lower() == "false"


def ext_number(knobs: Mapping[str, str], name: str, default: float, *, kind=float,
               minimum: float | None = None, positive: bool = False):
    """Our knob NEGOTIATOR_EXT_<name> (names without the prefix, as `ext_knobs` gives
    them) as a finite number of `kind` (float or int), `default` when unset; InputError
    naming the knob for text that is not one, or below `minimum` / not above 0."""
    text = knobs.get(name, default)
    knob = f"NEGOTIATOR_EXT_{name}"
    try:
        value = float(text)
    except (TypeError, ValueError):
        raise InputError(knob, f"not a number: {text}") from None
    if not math.isfinite(value):
        raise InputError(knob, f"not a finite number: {text}")
    if kind is int:
        value = int(value)
    if minimum is not None and value < minimum:
        raise InputError(knob, f"{text}: must be at least {minimum:g}")
    if positive and not value > 0:
        raise InputError(knob, f"{text}: must be more than 0")
    return value


def ext_bool(knobs: Mapping[str, str], name: str, default: bool) -> bool:
    """Our knob NEGOTIATOR_EXT_<name> as a boolean, read as HTCondor reads one."""
    if name not in knobs:
        return default
    got = _to_bool(knobs[name])
    if got is None:
        raise InputError(f"NEGOTIATOR_EXT_{name}", f"not a boolean: {knobs[name]}")
    return got


def is_limit_name(name: str) -> bool:
    """A concurrency limit's name: an attribute name, or two joined by a dot (IsValidAttrName
    on each part)."""
    return re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?", name) is not None


def _split_list(text: str) -> list[str]:
    return [t for t in re.split(r"[\s,]+", str(text)) if t]


def _typed(source: str, knob: str, value: Any, kind: str, raw: str | None) -> Any:
    """Convert one knob's value, refusing text HTCondor would refuse.

    For a knob HTCondor types (number, bool) the bindings return the default in place of
    invalid text, so the knob's own text (`raw`) is judged when we have it."""
    text = raw if raw is not None and raw.strip() else value

    def bad(what: str) -> InputError:
        return InputError(source, f"{knob} = {text!s}: {what}")

    if kind == "str":
        return str(value).strip()
    if kind == "expr":
        try:
            classads.parse_expr(str(value).strip())
        except ValueError:
            raise bad("not a valid ClassAd expression") from None
        return str(value).strip()
    if kind == "bool":
        b = _to_bool(text)
        if b is None:
            raise bad("not a boolean")
        return b
    num = _param_integer(text) if kind == "int" else _param_double(text)
    if num is None or math.isnan(num):
        raise bad("not a number")
    if math.isinf(num):
        # HTCondor would take it (priorities and shares would be infinite or NaN)
        raise bad("not a finite number")
    if abs(num) > MAX_KNOB_MAGNITUDE:
        raise bad(f"out of range (magnitude above {MAX_KNOB_MAGNITUDE:g}, HTCondor's "
                  "largest default)")
    return num


# What C's strtod reads at the start of a string (C locale): a decimal or hexadecimal
# floating-point number, inf/infinity or nan, after leading white space.
_STRTOD = re.compile(
    r"[ \t\n\v\f\r]*[+-]?(?:0x(?:[0-9a-f]+\.?[0-9a-f]*|\.[0-9a-f]+)(?:p[+-]?[0-9]+)?"
    r"|(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:e[+-]?[0-9]+)?|inf(?:inity)?|nan(?:\([0-9a-z_]*\))?)",
    re.IGNORECASE)


def strtod(text: str) -> tuple[float, int]:
    """C strtod: the number `text` starts with and how many characters it takes, or
    (0.0, 0) when it starts with none."""
    m = _STRTOD.match(text)
    if m is None:
        return 0.0, 0
    t = m.group().strip(" \t\n\v\f\r").lower()
    body = t.lstrip("+-")
    try:
        v = (float.fromhex(body) if body.startswith("0x")
             else math.nan if body.startswith("nan") else float(body))
    except OverflowError:   # strtod gives HUGE_VAL
        v = math.inf
    return (-v if t.startswith("-") else v), m.end()


def _param_double(value: Any) -> float | None:
    """string_is_double_param, as param_double reads a knob: the whole text as strtod
    reads it (trailing white space allowed), else the text evaluated as a ClassAd
    expression to a number or a boolean; None when it is neither."""
    if isinstance(value, (bool, int, float)):
        return float(value)
    text = str(value)
    num, n = strtod(text)
    if n and not text[n:].strip(" \t\n\v\f\r"):
        return num
    return classads.as_number(_evaluated(text))


def _evaluated(text: str) -> Any:
    """A config value's text evaluated as a ClassAd expression (None if it does not parse)."""
    try:
        return classads.eval_expr(text.strip())
    except ValueError:
        return None


def _to_bool(value: Any) -> bool | None:
    if isinstance(value, bool):
        return value
    t = str(value).strip().lower()
    if t in _TRUE:
        return True
    if t in _FALSE:
        return False
    v = _evaluated(t)
    return v if isinstance(v, bool) else None


def _param_integer(value: Any) -> int | None:
    """string_is_long_param, as param_integer reads a knob: the whole text as a base-10
    integer, else the text evaluated as a ClassAd expression to a number (truncated) or
    a boolean; None when it is neither."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, (int, float)):
        return int(value)
    text = str(value).strip()
    if re.fullmatch(r"[+-]?[0-9]+", text):
        return int(text)
    num = classads.as_number(_evaluated(text))
    return None if num is None or not math.isfinite(num) else int(num)


def _in_range(source: str, knob: str, q: float, high: float) -> float:
    if q < 0:
        raise InputError(source, f"{knob} = {q:g}: a group quota cannot be negative")
    if q > high:
        raise InputError(source, f"{knob} = {q:g}: too high (at most {high:g})")
    return q


_GROUP_NAME = re.compile(r"[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*")


def _groups(source, lookup, up, raw_up, kw) -> list[GroupConfig]:
    """GROUP_NAMES and the per-group knobs (rules G1, G2). Tree checks live in core.groups."""
    def knob(prefix: str, name: str, kind: str, otherwise: Any = None) -> Any:
        """<prefix>_<name> (any case) typed as `kind` and named as GROUP_NAMES spells the
        group, or `otherwise` when it is not set."""
        key = f"{prefix}_{name.upper()}"
        if key not in up:
            return otherwise
        return _typed(source, f"{prefix}_{name}", up[key], kind, raw_up.get(key))

    out = []
    for name in _split_list(lookup("GROUP_NAMES") or ""):
        if name == "<none>":
            continue  # reserved; HTCondor skips it with an error
        if not _GROUP_NAME.fullmatch(name):
            raise InputError(source, f"GROUP_NAMES: {name!r} is not a usable group name (dot-separated "
                             "parts of letters, digits, '_' and '-'; it must also work as a config "
                             "knob suffix and in a submitter name)")
        static = dynamic = None
        # hgq_construct_tree reads them with param_double(..., 0, INT_MAX) and
        # param_double(..., 0.0, 1.0), which stop the negotiator when out of range
        if (q := knob("GROUP_QUOTA", name, "float")) is not None:
            static = _in_range(source, f"GROUP_QUOTA_{name}", q, float(INT_MAX))
        elif (q := knob("GROUP_QUOTA_DYNAMIC", name, "float")) is not None:
            dynamic = _in_range(source, f"GROUP_QUOTA_DYNAMIC_{name}", q, 1.0)
        accept = knob("GROUP_ACCEPT_SURPLUS", name, "bool", kw["group_accept_surplus"])
        regroup = knob("GROUP_AUTOREGROUP", name, "bool", kw["group_autoregroup"])
        out.append(GroupConfig(name=name, static_quota=static, dynamic_quota=dynamic,
                               accept_surplus=bool(accept), autoregroup=bool(regroup)))
    return out
