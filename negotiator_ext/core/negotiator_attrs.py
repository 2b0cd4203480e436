"""What the negotiator writes into the slot ads it fetched before matchmaking (2.2 step
11, 4.10): NEGOTIATOR_MATCH_EXPRS, and on claimed slots the current user's priority,
floor and usage and its group's (addRemoteUserPrios), kept live where an expression
reads the usage."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any, Callable

from . import classads
from .classads import f32
from .slots import current_user

if TYPE_CHECKING:
    from .match_list import Slot

_MISSING = object()

def own_ad(slot: Slot) -> Any:
    """The slot's ad for the cycle to write into: a copy of it first when the ad is the
    caller's (`Slot.shared`, a shadow loop's kept slot ads)."""
    if slot.shared:
        ad = slot.ad
        # (an ad not parsed yet: a copy of what it is made from, not parsed either)
        slot.ad = (ad.unparsed_copy() if type(ad) is classads.LazyAd and not ad.made()
                   else classads.copy_ad(ad))
        slot.shared = False
    return slot.ad


def add_remote_user_attrs(slot: Slot, acc, groups, group_quotas,
                          cross_slot_prefix: str | None = None) -> list[str]:
    """addRemoteUserPrios (4.10): the current user's priority, floor and usage, and its
    group's, on a claimed slot ad, for PREEMPTION_REQUIREMENTS/RANK to see. With
    NEGOTIATOR_CROSS_SLOT_PRIOS (`cross_slot_prefix`: STARTD_RESOURCE_PREFIX) the same,
    without the floor, for each `<prefix><N>_` user the ad reports, N = 1..TotalSlots.
    The usage written here is the value at the start of the cycle; `slot.live` keeps
    who it belongs to, so that `Matcher.refresh_live` can keep it live (HTCondor
    inserts a call into the accountant). The group attributes are there only when
    `group_quotas` (groupQuotasHash: the quotas the last allocation left) has the
    user's group. Returns what it wrote: {attribute: value}, in the order written."""
    ad = slot.ad
    users = []
    if slot.current_user is not None:
        users.append(("", slot.current_user))
    if cross_slot_prefix is not None:
        total = classads.eval_number(ad, "TotalSlots")
        for n in range(1, int(total) + 1 if total is not None and total > 0 else 1):
            prefix = f"{cross_slot_prefix}{n}_"
            user = current_user(ad, prefix)
            if user is not None:
                users.append((prefix, user))
    # (the slot's texts, when it has them, are its ad's: a dict asks faster)
    preempting = ("preemptingrank" in slot.texts) if slot.texts else "PreemptingRank" in ad
    if users or preempting:
        ad = own_ad(slot)               # it is written into below
    written: dict = {}
    if slot.current_user is not None:
        written["RemoteUserFloor"] = acc.floor(slot.current_user)
    for prefix, user in users:
        written[prefix + "RemoteUserPrio"] = f32(acc.priority(user))
        written[prefix + "RemoteUserResourcesInUse"] = f32(acc.weighted_usage(user))
        if groups.enabled:
            g = groups.assigned_group(user).name
            if g in group_quotas:
                written[prefix + "RemoteGroup"] = g
                written[prefix + "RemoteGroupResourcesInUse"] = f32(acc.weighted_usage(g))
                written[prefix + "RemoteGroupQuota"] = group_quotas[g]
    slot.live = tuple(users)
    if preempting:
        written["CurrentRank"] = ad.lookup("PreemptingRank")
    for attr, value in written.items():
        ad[attr] = value
    return written


def insert_negotiator_attrs(slots: list[Slot], config, acc, groups, group_quotas
                            ) -> set[str]:
    """What the negotiator writes into the slot ads it fetched before matchmaking (2.2
    step 11): NEGOTIATOR_MATCH_EXPRS, and with preemption considered the current
    user's figures (add_remote_user_attrs, M11, 4.10). A slot's texts are kept in step
    with its ad. Returns the (lower-case) usage attributes written, the ones an
    expression may read live (`Matcher.watch_live_usage`)."""
    cross_prefix = config.startd_resource_prefix if config.cross_slot_prios else None
    live_names: set[str] = set()
    exprs = {attr: classads.parse_expr(text) for attr, text in config.match_exprs.items()}
    # the same text in every slot: printed once
    expr_texts = {attr.lower(): classads.attribute_text(classads.ClassAd({attr: e}), attr)
                  for attr, e in exprs.items()}
    for s in slots:
        if exprs:
            ad = own_ad(s)
            for attr, e in exprs.items():
                ad[attr] = e
        written: dict = {}
        if config.consider_preemption:
            written = add_remote_user_attrs(s, acc, groups, group_quotas, cross_prefix)
            live_names.update(a.lower() for a in written if a.endswith("ResourcesInUse"))
        if s.texts and (expr_texts or written):
            # a copy: the texts may be shared with the slot's memo (`_candidate_slots`)
            texts = s.texts = dict(s.texts)
            texts.update(expr_texts)
            for attr, value in written.items():
                # (the value's text, as the ad would give it back: an ad not parsed yet
                # is not parsed for it)
                texts[attr.lower()] = _value_text(value)
    return live_names


def _value_text(value) -> str:
    """The text of an attribute holding `value`, as classads.attribute_text gives it."""
    if isinstance(value, (str, int, float)):
        return _literal_text(value, type(value))
    return classads.attribute_text(classads.ClassAd({"x": value}), "x")


@functools.lru_cache(maxsize=4096)
def _literal_text(value, kind) -> str:
    # (keyed by type too: 1, 1.0 and True are equal keys with three texts)
    return classads.attribute_text(classads.ClassAd({"x": value}), "x")


def live_remote_usage(acc, groups, group_quotas) -> Callable[[str], tuple]:
    """For `Matcher.live_remote`: a user's usage and (when add_remote_user_attrs wrote
    the group attributes) its group's usage as the accountant has them now, single
    precision (ResourcesInUseByUser, ResourcesInUseByUsersGroup); None for no group."""
    group_of: dict[str, str | None] = {}

    def live(user: str) -> tuple:
        g = group_of.get(user, _MISSING)
        if g is _MISSING:
            g = None
            if groups.enabled:
                g = groups.assigned_group(user).name
                if g not in group_quotas:
                    g = None
            group_of[user] = g
        return (f32(acc.weighted_usage(user)),
                None if g is None else f32(acc.weighted_usage(g)))
    return live
