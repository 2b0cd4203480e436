"""A shadow loop's location ads of its daemons, kept from one pass to the next.

A capture locates the negotiator and lists the negotiators and the schedds
(`Collector.locate` and `locateAll`, whose answers are the daemons' ads projected to
`LOCATION`), right after it queried the collector for the same daemons' whole ads. The
bindings keep a copy of every name of a query's projection for good (htcondor2 25.x,
`py_list_to_vector_of_strings`: `PyUnicode_AsUTF8String` without a `Py_DECREF`, about
50 bytes a name), so each locate asked every pass of a loop is 300 bytes more of the
loop's memory, pass after pass.

So a loop keeps each call's answer (`KeptLocations`, one per call, replaced, never added
to) under the location attributes of the whole ads of that pass, and asks again only when
those differ: a daemon come, gone, moved or upgraded changes them. A pass whose whole
ads could not be read (None), or whose ads cannot give them all, asks the collector as a
single capture does, and keeps nothing.
"""

from __future__ import annotations

from typing import Any, Callable

# what Collector.locate and locateAll project a daemon's ad to (htcondor2's
# Collector._for_location)
LOCATION = ("MyAddress", "AddressV1", "CondorVersion", "CondorPlatform", "Name", "Machine")


def location_key(ads) -> tuple | None:
    """The location attributes of each of `ads`, in their order; None when `ads` is not
    a list of ads whose attributes can all be read."""
    if not isinstance(ads, list):
        return None
    try:
        return tuple(tuple(ad.get(a) for a in LOCATION) for ad in ads)
    except Exception:                       # noqa: BLE001 - not ads, or not readable
        return None


class KeptLocations:
    """Each locating call's last answer, under the location attributes of the whole ads
    it was asked beside (see the module docstring); as many entries as calls."""

    def __init__(self) -> None:
        self._kept: dict[str, tuple[tuple, Any]] = {}
        self.asked = 0                      # calls that went to the collector

    def __len__(self) -> int:
        return len(self._kept)

    def located(self, call: str, ads, locate: Callable[[], Any]) -> Any:
        """`locate()`'s answer, or the one kept for `call` when this pass's whole ads
        (`ads`) show the location attributes they showed then. What `locate` raises
        goes on, and drops what was kept."""
        key = location_key(ads)
        got = self._kept.pop(call, None)
        if key is not None and got is not None and got[0] == key:
            self._kept[call] = got
            return got[1]
        self.asked += 1
        answer = locate()
        if key is not None:
            self._kept[call] = (key, answer)
        return answer


def located(kept, call: str, ads, locate: Callable[[], Any]) -> Any:
    """`locate()` through a loop's kept locations (`kept`: live.KeptReads, or None for a
    single capture, which always asks)."""
    locations = getattr(kept, "locations", None)
    if locations is None:
        return locate()
    return locations.located(call, ads, locate)
