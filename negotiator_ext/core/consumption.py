"""Consumption policies on partitionable slots (reference section 5, rules P3-P6).

A p-slot with a consumption policy (CP) stays in the slot list after a match; each match
deducts what the job consumes from its assets and costs the drop in its SlotWeight.
"""

from __future__ import annotations

import math
from typing import Any

from ..errors import InputError
from . import classads
from .adtext import AdView


def supports_policy(ad) -> bool:
    """cp_supports_policy (P4): a p-slot whose every asset but swap has Consumption<A>.
    (`ad` a ClassAd, or an adtext.AdView of one.)"""
    value = ad.value if type(ad) is AdView else lambda attr: classads.eval_attr(ad, attr)
    if classads.as_bool(value("PartitionableSlot")) is not True:
        return False
    assets = value("MachineResources")
    if not isinstance(assets, str):
        return False
    return all(f"Consumption{a}" in ad for a in _assets(assets))


def asset_names(slot) -> list[str]:
    """The p-slot's assets a consumption policy covers, lower-cased (MachineResources
    but swap)."""
    return [a.lower() for a in _assets(classads.eval_string(slot, "MachineResources") or "")]


def _assets(text: str) -> list[str]:
    return [a for a in text.replace(",", " ").split() if a.lower() != "swap"]


def _assign(ad, attr: str, v: float) -> None:
    """assign_preserve_integers: whole values are stored as integers."""
    ad[attr] = int(v) if v == math.floor(v) and abs(v) < 2**63 else v


def compute(job, slot) -> dict[str, float]:
    """cp_compute_consumption (5.3): per asset, the slot's Consumption<A> evaluated
    against the job; -999 (or the negative value) when it fails."""
    out: dict[str, float] = {}
    for asset in _assets(classads.eval_string(slot, "MachineResources") or ""):
        ra = f"Request{asset}"
        saved = None
        override = classads.eval_number(job, f"_condor_{ra}")
        if override is not None:
            saved = job.lookup(ra) if ra in job else None
            job[ra] = override
        missing = ra not in job
        if missing:
            job[ra] = 0
        v = classads.as_number(classads.eval_match(classads.parse_expr(f"MY.Consumption{asset}"),
                                                   slot, job))
        if v is None:
            v = -999.0
        out[asset] = v
        if override is not None:
            if saved is None:
                del job[ra]
            else:
                job[ra] = saved
        if missing:
            del job[ra]
    return out


def sufficient(slot, consumption: dict[str, float]) -> bool:
    """cp_sufficient_assets (5.4). A consumption that failed to evaluate (-999) or is
    negative never suffices. An asset MachineResources lists but the ad does not give as a
    number is an InputError (cp_sufficient_assets EXCEPTs)."""
    positive = 0
    for asset, c in consumption.items():
        have = classads.eval_number(slot, asset)
        if have is None:
            raise InputError("slot ads", "missing or not a number, but MachineResources lists "
                             "it and the slot has a consumption policy",
                             ad=classads.eval_string(slot, "Name"), attribute=asset)
        if have < c or c < 0:
            return False
        if c > 0:
            positive += 1
    return positive > 0


def override_requested(job, consumption: dict[str, float]) -> list[tuple[str, Any]]:
    """cp_override_requested: RequestA := consumption while the Requirements are tested,
    the original kept as _cp_orig_RequestA. Returns what to restore."""
    restore = []
    for asset, c in consumption.items():
        ra = f"Request{asset}"
        if ra not in job:
            continue
        orig = job.lookup(ra)
        job[f"_cp_orig_{ra}"] = orig
        restore.append((ra, orig))
        _assign(job, ra, c)
    return restore


def restore_requested(job, restore: list[tuple[str, Any]]) -> None:
    for ra, orig in restore:
        job[ra] = orig
        del job[f"_cp_orig_{ra}"]


def deduct(job, slot, test: bool) -> float:
    """cp_deduct_assets (5.5): the match cost is the drop in SlotWeight; with `test` the
    assets are put back."""
    consumption = compute(job, slot)
    w0 = classads.eval_number(slot, "SlotWeight") or 0.0
    for asset, c in consumption.items():
        _assign(slot, asset, (classads.eval_number(slot, asset) or 0.0) - c)
    w1 = classads.eval_number(slot, "SlotWeight") or 0.0
    if test:
        # the assets back as cp_deduct_assets puts them: (A - c) + c, which for
        # non-integer values can differ from A in the last bit, as in HTCondor
        for asset, c in consumption.items():
            _assign(slot, asset, (classads.eval_number(slot, asset) or 0.0) + c)
    return w0 - w1
