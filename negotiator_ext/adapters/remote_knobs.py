"""Which of a daemon's knobs a capture reads through RemoteParam, and how: the
negotiator's policy knobs (`select_policy_knobs`) and a schedd's limits
(`select_schedd_knobs`). Kept apart from `live` so that the child process that does the
reading (`_param_dump --remote`, one per daemon per capture) starts by importing this
module and the bindings only."""

from __future__ import annotations

import re
from typing import Any, Mapping

from ..core import schedd_limits

# Which negotiator knobs go into the snapshot's config file.
POLICY_KNOB_PREFIXES: tuple[str, ...] = (
    "NEGOTIATOR_", "GROUP_", "PREEMPTION_", "CONCURRENCY_LIMIT", "PRIORITY_",
    "HFS_",  # legacy names of GROUP_QUOTA_MAX_ALLOCATION_ROUNDS / _ROUND_ROBIN_RATE
)
POLICY_KNOBS: frozenset[str] = frozenset({
    "PRIORITY_HALFLIFE", "DEFAULT_PRIO_FACTOR", "NICE_USER_PRIO_FACTOR",
    "REMOTE_PRIO_FACTOR", "ACCOUNTANT_LOCAL_DOMAIN", "SLOT_WEIGHT",
    "FORCE_NEGOTIATOR_SLOT_WEIGHT", "USE_RESOURCE_REQUEST_COUNTS", "USE_GLOBAL_JOB_PRIOS",
    "ALLOW_PSLOT_PREEMPTION", "MATCH_WORKING_CM_SLOTS", "NEGOTIATE_ALL_JOBS_IN_CLUSTER",
    *schedd_limits.KNOBS,
})
POLICY_KNOB_SUFFIXES: tuple[str, ...] = ("_LIMIT",)
# The schedd's limits on what it offers (core.schedd_limits): read from each schedd, and
# from the negotiator too (where a shared config sets them, the snapshot's config keeps
# them for a snapshot without a schedd's own).
SCHEDD_KNOBS: tuple[str, ...] = schedd_limits.KNOBS
_SUBSYS = "NEGOTIATOR."

# What htcondor2.RemoteParam returns for a listed knob that has no value: the bindings
# read a value with the CONFIG_VAL command, and the daemon answers a knob for which its
# param() has no value (unset, or empty once expanded) with exactly this string. The
# knob is left out of the snapshot's config, so HTCondor's default applies, as in the
# negotiator.
REMOTE_PARAM_UNDEFINED = "Not defined"

# A knob name HTCondor's config accepts (is_valid_param_name: letters, digits, "_./").
KNOB_NAME = re.compile(r"[A-Za-z0-9_./]+")


def is_policy_knob(name: str) -> bool:
    """The knobs of the negotiator's policy written to the snapshot's config file."""
    u = name.upper()
    return (u in POLICY_KNOBS or u.startswith(POLICY_KNOB_PREFIXES)
            or u.endswith(POLICY_KNOB_SUFFIXES))


def select_policy_knobs(remote: Mapping[str, Any]) -> dict[str, str]:
    """The policy knobs of a RemoteParam mapping, fetching only their values.

    RemoteParam lists the daemon's knob names in one round trip and fetches each value
    separately, so only the selected names are read. An override for the daemon's own
    local name ("NEGOTIATOR2.<knob>" for a negotiator started with `-local-name
    NEGOTIATOR2`, its LOCALNAME) wins over "NEGOTIATOR.<knob>", which wins over <knob>,
    as in the negotiator's own lookups; each is written as <knob>. A knob listed without
    a value (RemoteParam gives REMOTE_PARAM_UNDEFINED) is left out, and so is a name that
    is not a knob name HTCondor's config accepts.
    """
    names = _listed(remote)
    prefixes = _prefixes(remote, names, _SUBSYS)
    fetched: dict[str, str | None] = {}

    def value(upper: str) -> str | None:     # one remote request per knob at most
        if upper not in fetched:
            key = _key(names, prefixes, upper)
            v = remote[key] if key is not None else None
            fetched[upper] = None if v is None or v == REMOTE_PARAM_UNDEFINED else str(v)
        return fetched[upper]

    wanted: dict[str, str] = {}  # upper -> name to write
    for upper, key in names.items():
        base_upper, base = upper, key
        for prefix in prefixes:
            if upper.startswith(prefix):
                base_upper, base = upper[len(prefix):], key[len(prefix):]
                break
        if base_upper and is_policy_knob(base_upper):
            wanted.setdefault(base_upper, base)

    # Macros named by NEGOTIATOR_MATCH_EXPRS become slot attributes: keep them too.
    match_exprs = value("NEGOTIATOR_MATCH_EXPRS") if "NEGOTIATOR_MATCH_EXPRS" in wanted else None
    for n in re.split(r"[\s,]+", match_exprs or ""):
        if n and _key(names, prefixes, n.upper()) is not None:
            wanted.setdefault(n.upper(), n)
    # The per-group knobs (GROUP_QUOTA_<g>, GROUP_PRIO_FACTOR_<g>, ...) are all GROUP_*,
    # so the prefix list selects them.

    out: dict[str, str] = {}
    for upper in sorted(wanted):
        v = value(upper)
        if v is not None:
            out[wanted[upper]] = v
    return out


def _prefixes(remote: Mapping[str, Any], names: Mapping[str, str], subsys: str
              ) -> tuple[str, ...]:
    """The prefixes of a daemon's own overrides, strongest first: its local name's (its
    LOCALNAME, fetched only when some listed knob has another prefix than `subsys`),
    then `subsys`."""
    dotted = {u.split(".", 1)[0] + "." for u in names if "." in u}
    if not dotted - {subsys}:
        return (subsys,)
    try:
        local = remote["LOCALNAME"]
    except Exception:
        local = None
    if not isinstance(local, str) or local == REMOTE_PARAM_UNDEFINED or not local:
        return (subsys,)
    own = local.upper() + "."
    return (subsys,) if own == subsys else (own, subsys)


def _key(names: Mapping[str, str], prefixes: tuple[str, ...], upper: str) -> str | None:
    """The listed name a knob's value is read under: its strongest override, else itself."""
    for prefix in prefixes:
        if prefix + upper in names:
            return names[prefix + upper]
    return names.get(upper)


def _listed(remote: Mapping[str, Any]) -> dict[str, str]:
    """The knob names a RemoteParam lists (one round trip), upper-cased -> as the daemon
    spells them; names HTCondor's config would not accept are left out."""
    names: dict[str, str] = {}
    for key in remote.keys():
        if key and KNOB_NAME.fullmatch(key) and key.upper() not in names:
            names[key.upper()] = key
    return names


def select_schedd_knobs(remote: Mapping[str, Any]) -> dict[str, str]:
    """A schedd's own limits on what it offers (core.schedd_limits.KNOBS) from its
    RemoteParam mapping: the knobs it lists, an override for its local name (LOCALNAME,
    a schedd started with `-local-name`) or "SCHEDD.<knob>" winning, each fetched once; a
    knob it does not list, or lists without a value, is left out (the snapshot's config,
    else HTCondor's default, then applies)."""
    names = _listed(remote)
    prefixes = _prefixes(remote, names, "SCHEDD.")
    out: dict[str, str] = {}
    for knob in SCHEDD_KNOBS:
        key = _key(names, prefixes, knob)
        if key is None:
            continue
        v = remote[key]
        if v is not None and v != REMOTE_PARAM_UNDEFINED:
            out[knob] = str(v)
    return out
