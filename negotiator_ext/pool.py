"""A pool as the negotiator sees it at the start of a cycle: snapshot + config + the
accountant's state, assembled from the adapters for the commands to use."""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from itertools import repeat
from pathlib import Path
from typing import Any, Mapping

from .adapters.accounting_ads import plain_ad, state_from_accounting_ads
from .adapters.condor_config import ConfigMemo, ConfigRead, load_config
from .adapters.adfiles import read_ads
from .adapters.collector_order import rebuilt_order
from .adapters import collector_projection, slot_projection
from .adapters.snapshot import (NEGOTIATORS, Snapshot, load_snapshot, read_negotiator_configs,
                                snapshot_file)
from .core import classads
from .core.accountant import Accountant, AccountantState, SlotChanges
from .core.adtext import AdView, TextValues
from .core.classads import LazyAd
from .core.config import NegotiatorConfig, ext_number
from .core.groups import GroupQuota, GroupTree, group_demand
from .core.schedd_limits import ScheddLimits, Schedds
from .core.time_limits import CostModel
from .core.schedd_limits import from_config as limits_from_config
from .core.slots import (SlotUsage, matches_constraint, pool_sizes, slot_size, slot_string,
                         slot_usage, slot_value)
from .errors import InputError
from .limits import check_number, give_back_memory

# Slot attributes that must be numbers when present (HTCondor would otherwise quietly
# treat the slot as weight 1 or as unable to run anything).
_NUMERIC_SLOT_ATTRS = ("Cpus", "Memory", "Disk", "SlotWeight")


# what C's isspace() takes for white space (the C locale): IsValidSubmitterName refuses a
# name holding one; other Unicode spaces (U+0085, U+00A0, U+2028) are valid name bytes
_C_SPACE = re.compile(r"[ \t\n\v\f\r]")


@dataclass(frozen=True)
class Pool:
    snapshot: Snapshot
    config: NegotiatorConfig
    groups: GroupTree
    slot_ads: tuple                 # the ads the negotiator fetches (slot constraint applied)
    slots: tuple[SlotUsage, ...]
    accountant: AccountantState
    warnings: tuple[str, ...]
    slot_texts: tuple = ()          # each slot ad's (lower-case name, text) pairs (or a dict
                                    # of them, not to be changed), if read
    # Every slot the collector has, when `slot_ads` holds only the ones a job can take
    # this cycle (the simulator leaves out claimed slots when nothing can preempt them):
    # the pool's size and the accountant count them all. Empty: the same as slot_ads.
    all_slot_ads: tuple = ()
    all_slots: tuple[SlotUsage, ...] = ()
    # every slot's pie weight (weight x GhostMultiplier) and its contribution to the
    # effective pool size, when the caller keeps them (build_pool: with each slot's
    # usage, kept with a shadow loop's kept ad; the simulator: per slot, computed once
    # per change); empty: computed here
    pie_weights: tuple[float, ...] = ()
    effective_sizes: tuple[float, ...] = ()
    # (count, sum of pie weights, sum of effective sizes, least pie weight or None) of
    # every slot, when the caller keeps them exact from cycle to cycle (the simulator:
    # sim.pool_rows.SlotSums); None: summed here
    slot_sums: tuple | None = None
    # the weight of every slot's claim by the customer the accountant charges (rule
    # A16: {customer: summed SlotUsage.weight}, a customer for each charged slot), when
    # the caller keeps it from cycle to cycle (the simulator: patched where slots
    # changed); None: summed over the slots (`observe_pass`)
    claimed_weights: Mapping[str, float] | None = None
    # each schedd's limits on what it offers (M7): the config's, and the schedds' own
    schedd_default: ScheddLimits = field(default_factory=ScheddLimits)
    schedd_limits: Mapping[str, ScheddLimits] = field(default_factory=dict)
    # the slots changed since `accountant` was last checked against them, when the
    # caller keeps its slots from cycle to cycle (the simulator; core.accountant)
    slot_changes: SlotChanges | None = None
    # the slot ads are the caller's, kept for later (a shadow loop's slot cache): the
    # cycle copies an ad before it writes into it
    shared_slot_ads: bool = False
    # each slot's memo (a shadow loop's kept slot ads: slot_cache), in which the cycle
    # keeps what it works out of the ad alone from one pass to the next; empty: none
    slot_memos: tuple = ()
    # the matcher's memory of earlier cycles (core.match_memory), when the caller runs
    # many cycles of one pool (the simulator and the forecast); None: none
    match_memory: Any = None
    # the cycle's result numbers the slot classes (CycleResult.slot_classes, for
    # comparing with the real negotiator's slots); a simulator compares nothing
    number_slot_classes: bool = True
    # the snapshot as read, when `snapshot` is a copy in a rebuilt collector's order
    # (adapters/collector_order.py): `inputs` builds the same pool again from it
    read_snapshot: Any = None

    def inputs(self) -> tuple[Snapshot, NegotiatorConfig]:
        """What the pool was built from: `build_pool(*pool.inputs())` builds it again
        (a shadow loop's re-prediction of a pass it kept, shadow_repredict.py)."""
        return (self.read_snapshot if self.read_snapshot is not None else self.snapshot,
                self.config)

    def schedds(self) -> Schedds:
        """The schedds' limits, with one cycle's counts (the job files' running jobs are
        counted by the cycle)."""
        return Schedds(default=self.schedd_default, by_name=self.schedd_limits)

    def every_slot(self) -> tuple[tuple, tuple]:
        """(ads, usage) of every slot in the pool, candidates or not."""
        if self.all_slot_ads:
            return self.all_slot_ads, self.all_slots
        return self.slot_ads, self.slots

    def pool_sizes(self) -> tuple[int, float, float]:
        """(cPoolsize, weightedPoolsize, effectivePoolsize), computed once."""
        got = self.__dict__.get("_sizes")
        if got is None:
            sums, cfg = self.slot_sums, self.config
            if sums is not None and sums[0] and not cfg.slot_poolsize_constraint:
                count, pies, effs, _ = sums        # (the sums below, kept by the caller)
                got = (count, pies if cfg.use_slot_weights else float(count), effs)
            elif self.pie_weights and not cfg.slot_poolsize_constraint:
                count = len(self.pie_weights)
                got = (count, sum(self.pie_weights) if cfg.use_slot_weights
                       else float(count), sum(self.effective_sizes))
            else:
                ads, usage = self.every_slot()
                got = pool_sizes(ads, [s.weight for s in usage], cfg)
            object.__setattr__(self, "_sizes", got)
        return got

    def accountant_at(self, t: int) -> Accountant:
        """The accountant as a cycle at time `t` starts with it: groups' records made,
        leases expired, priorities updated and matches checked (2.2 steps 1 and 7)."""
        acc = Accountant(self.accountant, self.config, self.groups)
        acc.initialize_groups()
        acc.start_cycle(self.every_slot()[1], t, self.slot_changes)
        return acc

    def hgq_pool_size(self) -> float:
        """The size quotas are assigned from (rule G4)."""
        _, weighted, effective = self.pool_sizes()
        return weighted if self.config.use_slot_weights else effective

    def cost_model(self) -> tuple["CostModel | None", str | None]:
        """What a request costs the real negotiator (core.time_limits), from
        NEGOTIATOR_EXT_SECONDS_PER_REQUEST or the snapshot's negotiator ad; and why there
        is none when its ad cannot be read (a warning)."""
        knob = self.config.ext.get("SECONDS_PER_REQUEST")
        per_request = (ext_number(self.config.ext, "SECONDS_PER_REQUEST", 0.0, positive=True)
                       if knob is not None else None)
        try:
            ads = self.snapshot.negotiator_ads() or ()
        except InputError as exc:
            return (CostModel.from_negotiator_ad(None, per_request),
                    f"the real cycle's time limits are not predicted: {exc.one_line()}")
        ad = plain_ad(ads[0]) if ads else None
        return CostModel.from_negotiator_ad(ad, per_request), None

    def submitter_ads(self) -> list[dict]:
        """Submitter ads as the negotiator keeps them (2.2 step 3): within
        NEGOTIATOR_SUBMITTER_CONSTRAINT, with a Name free of C white space
        (IsValidSubmitterName) and a ScheddIpAddr, and with jobs; without those whose
        SkipMatchmaking is true (dropped before the pie, so their demand counts for
        nobody's share, the group's included)."""
        out = []
        for ad in self.snapshot.submitters or ():
            if not matches_constraint(ad, self.config.submitter_constraint):
                continue
            if classads.eval_bool(ad, "SkipMatchmaking") is True:
                continue
            d = plain_ad(ad)
            name = d.get("Name")
            if not isinstance(name, str) or _C_SPACE.search(name):
                continue
            if not isinstance(d.get("ScheddIpAddr"), str):
                continue
            if (d.get("RunningJobs") or 0) + (d.get("IdleJobs") or 0) <= 0:
                continue
            out.append(d)
        return out

    def default_schedd(self, submitter_ads: list[dict] | None = None) -> str | None:
        """The schedd a job is queued at when nothing else tells: the only schedd the
        submitter ads name, if there is exactly one."""
        ads = self.submitter_ads() if submitter_ads is None else submitter_ads
        names = {d.get("ScheddName") for d in ads if d.get("ScheddName")}
        return next(iter(names)) if len(names) == 1 else None

    def cycle_time(self, at: int | None = None) -> int:
        """The cycle's time: `at`, else the snapshot's capture time, else the
        accountant's last update (a snapshot without meta.json)."""
        if at is not None:
            return int(at)
        return int(self.snapshot.captured_at or self.accountant.last_update_time or 0)

    def demand(self, submitter_ads: list[dict] | None = None) -> dict[str, float]:
        """Group demand from the submitter ads (G5)."""
        ads = self.submitter_ads() if submitter_ads is None else submitter_ads
        return group_demand(self.groups, ads, self.config.use_weighted_demand)

    def quotas(self, demand: dict[str, float] | None = None) -> dict[str, GroupQuota]:
        """The quotas assigned from the pool size (G4)."""
        return self.groups.assign_quotas(self.hgq_pool_size(),
                                         self.demand() if demand is None else demand)


def load_pool(directory: str | Path, config_path: str | Path | None = None, *,
              captured=None, negotiator: str | None = None,
              config_memo: ConfigMemo | None = None, project_slots: bool = False) -> Pool:
    """The Pool of a snapshot directory (`captured`: what the capture that wrote it still
    holds, see `load_snapshot`) as the negotiator `negotiator` sees it (`for_negotiator`;
    required when the pool has several). `config_memo` (a shadow loop's): the snapshot's
    own config is taken from there when its bytes are the last pass's. `project_slots`:
    the slot ads of a files snapshot are built with only the attributes the cycle can
    read (adapters/slot_projection.py), for a caller that runs cycles over the
    snapshot's own jobs."""
    memo_key = known = None
    if config_memo is not None and config_path is None and not (
            Path(directory) / NEGOTIATORS).exists():
        own = Path(directory) / "config"        # the snapshot's own config, kept by its bytes
        memo_key = ConfigMemo.key(own)
        known = config_memo.get(memo_key, own)
    early = _config_read_beside(directory, config_path) if known is None else None
    once = _Once(early) if early is not None else None

    def early_slots(texts, source):
        # the slot ads built beside the jobs' read, once the config is in (its error,
        # if any, comes later, after the snapshot's own)
        try:
            config = once()
        except Exception:               # noqa: BLE001 - (see above)
            return None
        return slot_projection.early(texts, source, config)

    try:
        snap = for_negotiator(load_snapshot(
            directory, captured=captured, slot_ads=not project_slots,
            early_slots=early_slots if project_slots and once is not None else None),
            negotiator)
    except BaseException:
        if early is not None:
            early.cancel()
        raise
    warnings: list[str] = []
    if snap.partial:
        warnings.append(f"{snap.directory}: partial snapshot (did not answer: "
                        f"{', '.join(snap.unanswered)})")
    meta_warnings = snap.meta.get("warnings")
    if isinstance(meta_warnings, list):     # what the capture noted (config_source, ...)
        warnings.extend(f"{snap.directory}: {w}" for w in meta_warnings if isinstance(w, str))
    path = config_path if config_path is not None else snap.config_path
    if path is None:
        warnings.append(f"{snap.directory}: no config in the snapshot and no --config: "
                        "using HTCondor's defaults")
    if known is not None:
        config = known
    elif early is not None and early.path == path:
        config = once()
    else:
        if early is not None:
            early.cancel()
        config = load_config(path)
    if config_memo is not None and known is None:
        config_memo.keep(memo_key, config)      # (no key: nothing kept)
    if snap.slot_rows_only or (snap.slot_projection is not None
                               and not snap.slot_projection.jobs_read):
        snap = slot_projection.project(snap, config)
    pool = build_pool(snap, config, warnings)
    # what the read left freed (the files' text, the jobs' child's answer) handed back to
    # the system before the cycle: the cycle's objects come from Python's own arenas,
    # not from those blocks (at 100,000 slots / 500,000 jobs, 136 MiB in 9 ms)
    give_back_memory()
    return pool


class _Once:
    """A ConfigRead's result (or error), asked for once and kept: the slot ads built
    beside the jobs' read take it before `load_pool` does."""

    def __init__(self, read):
        self._read, self._got = read, None

    def __call__(self):
        if self._got is None:
            try:
                self._got = (self._read.result(), None)
            except Exception as exc:        # noqa: BLE001 - raised again below
                self._got = (None, exc)
        if self._got[1] is not None:
            raise self._got[1]
        return self._got[0]


def _config_read_beside(directory: str | Path, config_path: str | Path | None):
    """The config read a snapshot will take (`--config`, else its own `config`, else
    HTCondor's defaults), started now so that HTCondor's reader runs beside the reading
    of the ads (a ConfigRead; its errors come when its result is asked for, after the
    snapshot's own). None when the snapshot has negotiators/ (the config is the chosen
    negotiator's) or the read cannot start here: it is then read as always."""
    d = Path(directory)
    try:
        if (d / NEGOTIATORS).exists() or not d.is_dir():
            return None
        own = d / "config"
        return ConfigRead(config_path if config_path is not None
                          else own if own.is_file() else None)
    except Exception:                   # noqa: BLE001 - read later, as always
        return None


def negotiators_of(directory: str | Path) -> list[str | None]:
    """The negotiators a snapshot holds, by name: those of negotiators/, else the
    NegotiatorNames of its Accounting ads when they come from several, else [None] (one
    negotiator, whatever its name)."""
    d = Path(directory)
    configs = read_negotiator_configs(d / NEGOTIATORS)
    if configs:
        return sorted(configs)
    accounting = snapshot_file(d, "accounting")
    if accounting is not None:
        names = {ad.get("NegotiatorName") for ad in read_ads(accounting)}
        names = sorted(n for n in names if isinstance(n, str))
        negotiator = snapshot_file(d, "negotiator")
        if len(names) > 1 and negotiator is not None:
            # those of a negotiator the collector still has (not a renamed one's leftovers)
            live = {ad.get("Name") for ad in read_ads(negotiator)}
            names = [n for n in names if n in live] or names
        if len(names) > 1:
            return list(names)
    return [None]


def for_negotiator(snap: Snapshot, name: str | None) -> Snapshot:
    """The snapshot as one negotiator sees it. A pool has no default negotiator when it
    has several (each has its own slots and accountant; `condor_userprio` must be told
    `-name` too): without `name`, InputError naming them. A snapshot of one negotiator
    whose Accounting ads come from several (NegotiatorName) is refused the same way,
    rather than mixing their accountants."""
    in_ads = snap.accounting_negotiators()          # each a string, or InputError
    if name is not None:
        known = set(snap.negotiator_configs) | set(in_ads)
        if not snap.negotiator_configs and known and name not in known:
            raise InputError(snap.accounting_source or str(snap.directory),
                             f"no negotiator {name!r} in this snapshot (its Accounting ads "
                             f"are from {', '.join(sorted(known))})")
        return snap.for_negotiator(name)
    if len(snap.negotiators) == 1:
        return snap.for_negotiator(snap.negotiators[0])
    names = snap.negotiators or in_ads
    if len(names) > 1 and not snap.negotiators:
        # a pool of one negotiator with another's ads still in the collector (renamed,
        # gone): the negotiator's own ad says whose they are
        ads = snap.negotiator_ads() or ()
        if len(ads) == 1 and ads[0].get("Name") in names:
            return snap.for_negotiator(ads[0].get("Name"))
    if len(names) > 1:
        where = (f"{snap.directory}/negotiators" if snap.negotiators
                 else snap.accounting_source or str(snap.directory))
        what = "negotiators" if snap.negotiators else "negotiators' Accounting ads"
        raise InputError(where, f"the pool has {len(names)} {what} ({', '.join(names)}), "
                                "each with its own slots and accountant: name one with "
                                "--negotiator NAME (`negotiator-ext shards` shows them all)")
    return snap


def config_warnings(config: NegotiatorConfig, groups: GroupTree) -> list[str]:
    """What to tell about a config before a cycle runs under it: its own and the group
    tree's warnings, and every knob that changes decisions but is not modelled."""
    warnings = [f"{config.source}: {w}" for w in config.warnings + tuple(groups.warnings)]
    if config.allow_pslot_preemption and config.consider_preemption:
        # modelled (core.pslot_preemption) but for what a snapshot cannot hold
        if config.ignore_job_ranks:
            warnings.append(
                f"{config.source}: ALLOW_PSLOT_PREEMPTION is set, but preempting a "
                "partitionable slot's dynamic slots (pslotMultiMatch) together with "
                "NEGOTIATOR_IGNORE_JOB_RANKS is not modelled: the cycle runs as if "
                "ALLOW_PSLOT_PREEMPTION were off")
        else:
            warnings.append(
                f"{config.source}: ALLOW_PSLOT_PREEMPTION is set: the dynamic slots' claim "
                "ids (ChildClaimIds, in the startd's private ad, which a snapshot does not "
                "hold) are taken to be there for every dynamic slot a p-slot lists; and "
                "p-slots with a consumption policy are not tried by preempting their "
                "dynamic slots (not modelled)")
    if config.ignore_job_ranks:
        # modelled (core.static_ranks) but for the last key of the negotiator's slot sort
        warnings.append(
            f"{config.source}: NEGOTIATOR_IGNORE_JOB_RANKS is set: its order among slots "
            "with equal NEGOTIATOR_PRE_JOB_RANK and NEGOTIATOR_POST_JOB_RANK (the address of "
            "each ad in the negotiator's memory, which no snapshot gives) is not modelled: "
            "such slots are taken in the collector's order, so which of them a submitter "
            "gets, or is cut off at its limit among, may differ from the real cycle")
    return warnings


_SUBMITTER_NUMBERS = ("IdleJobs", "RunningJobs", "WeightedIdleJobs", "WeightedRunningJobs",
                      "JobPrio")
_SUBMITTER_STRINGS = ("Name", "ScheddName", "ScheddIpAddr")


def _check_submitters(snap: Snapshot) -> None:
    """Refuse a submitter ad whose counts, LastHeardFrom or names are not what a schedd
    sends (numbers: finite and of sane magnitude; names: strings), naming the attribute."""
    source = snap.submitters_source or str(snap.directory / "submitters")
    for i, ad in enumerate(snap.submitters or (), start=1):
        label = str(i)
        for attr in _SUBMITTER_STRINGS:
            v = classads.eval_attr(ad, attr)
            if attr in ad and not isinstance(v, str):
                raise InputError(source, f"not a string: {classads.source_text(ad, attr)}",
                                 ad=label, attribute=attr)
            if attr == "Name" and attr in ad:
                label = f"{i} ({v})"
        for attr in _SUBMITTER_NUMBERS + ("LastHeardFrom",):
            if attr in ad:
                check_number(ad, attr, classads.eval_attr(ad, attr), source, label,
                             epoch=attr == "LastHeardFrom")


def build_pool(snap: Snapshot, config: NegotiatorConfig, warnings: list[str] | None = None
               ) -> Pool:
    """The Pool of a snapshot already in memory under a config already read; `warnings`
    so far are kept."""
    groups = GroupTree(config)
    warnings = list(warnings or ()) + config_warnings(config, groups)
    # slot ads the collector was asked for by projection: what this config reads of
    # them must be there
    collector_projection.check_config(snap.meta, config, str(snap.directory / "meta.json"))
    # slot ads built with a projection: what this config reads more is parsed too
    snap = slot_projection.widened(snap, config)

    ads, slots, texts, pies, effective, kept = [], [], [], [], [], []
    # each slot's texts: the projection's, of the names its ads were built with (dicts
    # the cycle reads as they are), else the whole rows
    proj = snap.slot_projection
    rows = proj.texts_of(snap.slots) if proj is not None else None
    if rows is None:
        rows = snap.slot_texts.rows if snap.slot_texts is not None else [None] * len(snap.slots)
    # a shadow loop's kept slot ads: what is worked out of an ad alone is kept with it
    key = _slot_memo_key(config) if snap.slot_memos is not None else None
    memos = snap.slot_memos if key is not None else repeat(None)
    # files that lost the collector's order (condor_status sorts): its walk rebuilt
    # from the ads' keys (adapters/collector_order.py); the ads are checked in file order
    rebuilt = rebuilt_order(snap)
    where = []                         # each kept slot's index in the file
    values = TextValues()              # (the projection's texts: each literal read once)
    for i, (ad, row, memo) in enumerate(zip(snap.slots, rows, memos), start=1):
        got = memo.get(key) if memo is not None else None
        if got is None:
            # read through the slot's texts where they are a dict of its ad's own (the
            # projection's): a literal's value is what the ad evaluates it to
            # (an ad not parsed yet is read through its texts, its whole rows too)
            view = (AdView(ad, row, values) if type(row) is dict
                    else AdView(ad, dict(row), values) if row is not None and type(ad) is LazyAd
                    else ad)
            name = slot_string(view, "Name")
            for attr in _NUMERIC_SLOT_ATTRS:
                if attr in view:
                    v = slot_value(view, attr)
                    check_number(ad, attr, float(v) if isinstance(v, bool) else v,
                                 snap.slots_source, f"{i} ({name})")
            usage = (slot_usage(view, config) if matches_constraint(view, config.slot_constraint)
                     else False)
            # with its share of the pool's size (step 8): its pie weight, effective size
            got = (usage, slot_size(view, usage.weight) if usage is not False else None)
            if memo is not None:
                memo[key] = got
        usage, size = got
        if usage is False:
            continue
        ads.append(ad)
        texts.append(row)
        slots.append(usage)
        pies.append(size[0])
        effective.append(size[1])
        kept.append(memo)
        where.append(i - 1)

    _check_submitters(snap)
    read = snap if rebuilt is not None else None
    if rebuilt is not None:
        place = {j: p for p, j in enumerate(rebuilt.slot_order)}
        perm = sorted(range(len(ads)), key=lambda k: place[where[k]])
        ads, texts, slots, pies, effective, kept = (
            [col[k] for k in perm] for col in (ads, texts, slots, pies, effective, kept))
        snap = dataclasses.replace(snap, submitters=rebuilt.submitters, meta=rebuilt.meta)
    if snap.accounting is not None:
        state, w = state_from_accounting_ads(snap.accounting, slots, groups, snap.accounting_source)
        warnings.extend(w)
    else:
        state = AccountantState()
        warnings.append(f"{snap.directory}: no accounting.ads: starting from an empty accountant")
    default, by_name = schedd_limits_of(snap, config)
    return Pool(snapshot=snap, config=config, groups=groups, slot_ads=tuple(ads),
                slots=tuple(slots), accountant=state, warnings=tuple(warnings),
                slot_texts=tuple(texts), schedd_default=default, schedd_limits=by_name,
                shared_slot_ads=snap.slots_shared, pie_weights=tuple(pies),
                effective_sizes=tuple(effective),
                slot_memos=tuple(kept) if key is not None else (), read_snapshot=read)


def _slot_memo_key(config: NegotiatorConfig) -> tuple | None:
    """What a slot's checks, constraint and usage (build_pool) depend on besides the ad:
    its memo's key; None (no memo) when an expression may read the clock."""
    key = (config.slot_constraint, config.use_slot_weights,
           config.force_negotiator_slot_weight, config.slot_weight)
    if any("time" in (t or "").lower() for t in (config.slot_constraint, config.slot_weight)):
        return None
    return key


def schedd_limits_of(snap: Snapshot, config: NegotiatorConfig
                     ) -> tuple[ScheddLimits, dict[str, ScheddLimits]]:
    """The config's schedd limits; over them what each schedd's own ad says
    (schedds.ads: MaxJobsRunning, CurbMatchmaking); over that its own knobs
    (schedd-knobs.json). InputError naming the file, the schedd and the attribute."""
    default = limits_from_config(config)
    by_name: dict[str, ScheddLimits] = {}
    source = snap.schedd_ads_source or ""
    for i, ad in enumerate(snap.schedd_ads or (), start=1):
        name = classads.eval_string(ad, "Name")
        if name is None:
            raise InputError(source, "schedd ad has no Name", ad=str(i))
        mjr = default.max_jobs_running
        if "MaxJobsRunning" in ad:
            v = classads.eval_attr(ad, "MaxJobsRunning")
            if not classads.is_number(v) or isinstance(v, bool) or v != int(v):
                raise InputError(source, f"not an integer: {classads.source_text(ad, 'MaxJobsRunning')}",
                                 ad=f"{i} ({name})", attribute="MaxJobsRunning")
            mjr = int(v)
        by_name[name] = dataclasses.replace(
            default, max_jobs_running=mjr,
            curbed=classads.eval_bool(ad, "CurbMatchmaking") is True)
    for name, knobs in snap.schedd_knobs.items():
        by_name[name] = ScheddLimits.from_knobs(knobs, snap.schedd_knobs_source or "",
                                                ad=f"schedd {name}",
                                                otherwise=by_name.get(name, default))
    return default, by_name
