"""A loop's location ads, kept from pass to pass while the daemons' whole ads show the
same location attributes (adapters/locations.py): the bindings keep a copy of every
projected name of a query for good, so a loop that located its daemons every pass
grew by about 0.8 KiB a pass. Kept: one answer a call, however many passes."""

from __future__ import annotations

import classad2
import htcondor2
import pytest

from fakepool import FakePool
from negotiator_ext.adapters.daemon_config import KeptReads
from negotiator_ext.adapters.live import capture_snapshot
from negotiator_ext.adapters.locations import KeptLocations, location_key

NOW = 1795265300


def _ad(name="vm", address="<10.0.0.1:9618>", **more):
    return classad2.ClassAd({"Name": name, "MyAddress": address,
                             "CondorVersion": "$CondorVersion: 25.14.1 $", **more})


def test_an_answer_is_kept_while_the_ads_locations_hold():
    kept, asked = KeptLocations(), []

    def locate(value):
        def call():
            asked.append(value)
            if isinstance(value, Exception):
                raise value
            return value
        return call

    assert kept.located("schedds", [_ad()], locate("a")) == "a"
    # another pass: the ad's other attributes changed (a cycle's figures), not where
    assert kept.located("schedds", [_ad(TotalJobAds=7)], locate("b")) == "a"
    assert asked == ["a"] and len(kept) == 1
    # another address, another daemon, another version: asked again, and kept
    for n, ads in enumerate(([_ad(address="<10.0.0.2:9618>")],
                             [_ad(), _ad(name="other")],
                             [_ad(CondorVersion="$CondorVersion: 25.15.0 $")]), start=1):
        assert kept.located("schedds", ads, locate(n)) == n
        assert kept.located("schedds", ads, locate("again")) == n
    assert asked == ["a", 1, 2, 3] and len(kept) == 1
    # each call its own
    assert kept.located("negotiator", [_ad()], locate("n")) == "n" and len(kept) == 2
    # no whole ads this pass: asked, nothing kept; a failure drops what was kept
    assert kept.located("negotiator", None, locate("m")) == "m"
    assert kept.located("negotiator", [_ad()], locate("n2")) == "n2"
    with pytest.raises(RuntimeError):
        kept.located("negotiator", [_ad(Name="moved")], locate(RuntimeError("no")))
    assert len(kept) == 1
    assert kept.located("negotiator", [_ad(Name="moved")], locate("n3")) == "n3"


def test_ads_that_cannot_give_their_locations_keep_nothing():
    class Broken:
        def get(self, attr):
            raise ValueError(attr)

    assert location_key("garbage") is None and location_key(None) is None
    assert location_key([Broken()]) is None and location_key([]) == ()
    assert location_key([_ad()]) == (("<10.0.0.1:9618>", None, "$CondorVersion: 25.14.1 $",
                                      None, "vm", None),)


def test_a_loops_captures_locate_the_daemons_once_until_one_moves(tmp_path, mocker):
    fake = FakePool().install(mocker)
    fake.schedds["other"] = fake.schedds["vm"][:3]
    kept = KeptReads()

    def capture(n):
        before = len(fake.calls)
        report = capture_snapshot(None, tmp_path / f"snap{n}", htcondor=htcondor2,
                                  now=NOW + n, kept_reads=kept)
        assert dict(report.errors) == {} and set(report.schedds) == {"vm", "other"}
        calls = [c for c in fake.calls[before:] if c[0].startswith("Collector.locate")]
        # the schedds' own query locates them every time (a loop's, in its worker,
        # adapters/worker.py, a process that is started again now and then)
        calls.remove(("Collector.locateAll", htcondor2.DaemonTypes.Schedd))
        return sorted(c[0] for c in calls)

    assert capture(1) == ["Collector.locate", "Collector.locateAll", "Collector.locateAll"]
    size = len(kept.locations)
    assert size == 3
    for n in range(2, 7):
        assert capture(n) == []
    assert len(kept.locations) == size and kept.locations.asked == 3
    # a negotiator that moved is located again (and listed again)
    fake.negotiator[0]["MyAddress"] = "<10.0.0.9:9618>"
    assert capture(7) == ["Collector.locate", "Collector.locateAll"]
    assert capture(8) == [] and len(kept.locations) == size
