"""A real accountant's state, from the ads `condor_userprio -l` prints (or the collector's
Accounting ads), as an AccountantState the core can advance.

What the ads carry and what they do not:
  * `Priority` in these ads is the EFFECTIVE priority; the stored RUP is
    Priority / PriorityFactor, rounded to 6 decimals as the accountant stores it (A5).
  * Resource records (which slot charges whom since when) are not in the ads. They are
    rebuilt from the claimed slots of the snapshot. Usage the ads count but no claimed slot
    explains (matches of the last cycle not yet claimed) is kept as one pending match per
    customer, with no slot: the next CheckMatches removes it, as the real accountant
    removes a match that was never claimed.
  * Unweighted counts (ResourcesUsed) and HierWeightedResourcesUsed are recounted from
    those records: HTCondor 25.11 and later over-count both every cycle (reference 1.5).
    Weighted figures are taken as the pool reported them.
  * WeightedUnchargedTime (25.x reports it): the last cycle's matches are charged from
    their match time, not from the accountant's last update, as the real accountant's
    next UpdatePriorities does; submitters matched early and late in a long cycle then
    get different priorities. The unweighted UnchargedTime is left at 0: with the
    last cycle's unclaimed matches kept as one pending match per customer, the
    unweighted count is not the real one, and with the real uncharged time the recent
    usage could turn negative; it decides only LastUsageTime and AccumulatedUsage.
"""

from __future__ import annotations

from typing import Any, Iterable, Sequence

from ..core import classads
from ..core.accountant import AccountantState, round6
from ..core.groups import GroupTree, is_group_name
from ..core.slots import SlotUsage
from ..errors import InputError
from ..limits import check_number

PENDING_SUFFIX = "#pending-match"

_NUMERIC = ("Priority", "PriorityFactor", "ResourcesUsed", "WeightedResourcesUsed",
            "HierWeightedResourcesUsed", "AccumulatedUsage", "WeightedAccumulatedUsage",
            "WeightedUnchargedTime",
            "BeginUsageTime", "LastUsageTime", "Ceiling", "Floor", "LastUpdate",
            "SubmitterShare", "SubmitterLimit", "EffectiveQuota", "ConfigQuota",
            "SubtreeQuota", "GroupSortKey", "Requested",
            "CeilingLeaseExpiration", "CeilingPreLeaseValue", "FloorLeaseExpiration",
            "FloorPreLeaseValue", "PriorityFactorLeaseExpiration", "PriorityFactorPreLeaseValue")

# times in seconds since 1970 (0: never)
_TIMES = ("BeginUsageTime", "LastUsageTime", "LastUpdate", "CeilingLeaseExpiration",
          "FloorLeaseExpiration", "PriorityFactorLeaseExpiration")

# kept by the accountant as C ints
_INTS = ("Ceiling", "Floor", "ResourcesUsed")

# Kept on the record as the pool reported them (reporting fields of groups included, so a
# view of the imported state shows the real negotiator's last quotas).
_KEPT = tuple(a for a in _NUMERIC if a not in ("Priority", "LastUpdate")) + ("SurplusPolicy",)


def plain_ad(ad: classads.ClassAd) -> dict[str, Any]:
    """A ClassAd as a dict of evaluated Python values (UNDEFINED/ERROR become None)."""
    out = {}
    for k in ad.keys():
        v = classads.eval_attr(ad, k)
        out[k] = v if classads.is_value(v) else None
    return out


def state_from_accounting_ads(ads: Sequence[classads.ClassAd], slots: Iterable[SlotUsage],
                              groups: GroupTree, source: str) -> tuple[AccountantState, list[str]]:
    """The accountant state the ads describe; also returns warnings worth showing."""
    warnings: list[str] = []
    customers: dict[str, dict[str, Any]] = {}
    last_update = 0
    for i, ad in enumerate(ads, start=1):
        d = plain_ad(ad)
        name = d.get("Name")
        if "NumSubmittors" in d and name is None:
            raise InputError(source, "this is the legacy numbered ad of condor_userprio -l -legacy; "
                             "give the output of condor_userprio -l -allusers instead")
        if not isinstance(name, str) or not name:
            raise InputError(source, "accounting ad has no Name", ad=str(i))
        for attr in _NUMERIC:
            if attr in ad:
                check_number(ad, attr, d.get(attr), source, f"{i} ({name})",
                             epoch=attr in _TIMES, int32=attr in _INTS)
        if name in customers:
            raise InputError(source, "the same accountant record appears twice", ad=f"{i} ({name})")
        rec: dict[str, Any] = {a: d[a] for a in _KEPT if d.get(a) is not None}
        eup, factor = d.get("Priority"), d.get("PriorityFactor")
        if eup is not None and factor:
            rec["Priority"] = round6(eup / factor)
        ag = d.get("AccountingGroup")
        if is_group_name(name):
            if groups.get(name) is None and name != "<none>":
                warnings.append(f"{source}: group {name} is not in this config's GROUP_NAMES "
                                "(a defunct group, or the wrong config)")
        elif isinstance(ag, str):
            group = groups.assigned_group(name).name
            if group.lower() != ag.lower():
                warnings.append(f"{source}: {name} was charged to group {ag}, this config maps it to "
                                f"{group}")
        customers[name] = rec
        last_update = max(last_update, int(d.get("LastUpdate") or 0))

    resources = _rebuild_resources(customers, slots, last_update,
                                   groups.config.discount_suspended_resources)
    _recount(customers, resources, groups)
    return AccountantState(last_update_time=last_update, customers=customers,
                           resources=resources), warnings


def _rebuild_resources(customers, slots, last_update, discount_suspended: bool
                       ) -> dict[str, dict[str, Any]]:
    """Resource records for the claimed slots the reported weighted usage accounts for,
    and one pending match per customer for reported usage no claimed slot explains.
    A slot the accountant does not charge (rule A16: with
    NEGOTIATOR_DISCOUNT_SUSPENDED_RESOURCES, a suspended one) explains no usage."""
    resources: dict[str, dict[str, Any]] = {}
    charged: dict[str, float] = {}
    for s in slots:
        customer = s.charged_customer(discount_suspended)
        if customer is None or customer not in customers or s.resource_name in resources:
            continue
        reported = float(customers[customer].get("WeightedResourcesUsed") or 0.0)
        so_far = charged.get(customer, 0.0)
        if so_far + s.weight > reported + 1e-6:
            continue  # claimed after the accountant last counted: the next CheckMatches charges it
        charged[customer] = so_far + s.weight
        rec = {"RemoteUser": customer, "SlotWeight": s.weight, "StartTime": last_update}
        if s.matched_concurrency_limits:
            rec["MatchedConcurrencyLimits"] = s.matched_concurrency_limits
        resources[s.resource_name] = rec
    for name, rec in customers.items():
        if is_group_name(name):
            continue
        gap = float(rec.get("WeightedResourcesUsed") or 0.0) - charged.get(name, 0.0)
        if gap > 1e-6:
            resources[name + PENDING_SUFFIX] = {"RemoteUser": name, "SlotWeight": round6(gap),
                                                "StartTime": last_update}
    return resources


def _recount(customers, resources, groups: GroupTree) -> None:
    """ResourcesUsed and HierWeightedResourcesUsed from the resource records."""
    count: dict[str, int] = {}
    hier: dict[str, float] = {}
    for rec in resources.values():
        records, hier_records = groups.charged_records(rec["RemoteUser"])
        for n in records:
            count[n] = count.get(n, 0) + 1
        for part in hier_records:
            hier[part] = hier.get(part, 0.0) + rec["SlotWeight"]
    for name, rec in customers.items():
        if "ResourcesUsed" in rec or name in count:
            rec["ResourcesUsed"] = count.get(name, 0)
        if is_group_name(name) and (hier.get(name) or "HierWeightedResourcesUsed" in rec):
            rec["HierWeightedResourcesUsed"] = round6(hier.get(name, 0.0))
