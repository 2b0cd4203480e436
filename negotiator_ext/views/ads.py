"""Records as ClassAds, the way HTCondor's tools print them with -l."""

from __future__ import annotations

from typing import Any, Iterable, Mapping

import classad2

from ..adapters.adfiles import format_ads_long
from .text import printable


def to_classad(d: Mapping[str, Any]) -> classad2.ClassAd:
    return classad2.ClassAd({k: v for k, v in d.items() if v is not None})


def format_dicts_long(ads: Iterable[Mapping[str, Any]]) -> str:
    """Old-syntax ads, attributes sorted, a blank line after each (condor_userprio -l).
    For people: string values (names from untrusted ads) are shown `printable`, their
    control characters escaped (--json has the true values)."""
    return format_ads_long(to_classad({k: printable(v) if isinstance(v, str) else v
                                       for k, v in d.items()}) for d in ads)
