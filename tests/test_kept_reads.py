"""A loop's reads of its daemons' configurations, kept from pass to pass while the
daemons' ads say they have not read their files since (adapters/daemon_config.py, KeptReads).
The live loop tests see it against real daemons (test_live_faults: a reconfigured
quota is in the next passes' config); here, what a real pool cannot be made to do on
demand: two reconfigs in one second, a stamp that is not whole, an old read."""

from __future__ import annotations

import json

import classad2
import pytest

from fakepool import FakePool
from negotiator_ext.adapters.daemon_config import RECONFIG_SETTLE, REREAD_AFTER, KeptReads
from negotiator_ext.adapters.live import capture_snapshot

NOW = 1795265300


def _ad(name="vm", address="<10.0.0.1:9618>", started=100, reconfigured=200, **more):
    return classad2.ClassAd({"Name": name, "MyAddress": address, "DaemonStartTime": started,
                             "DaemonLastReconfigTime": reconfigured, **more})


def test_a_daemons_stamp_is_its_one_ads_address_and_times():
    assert KeptReads.stamp([_ad(name="other"), _ad()], "vm") == ("<10.0.0.1:9618>", 100, 200)
    assert KeptReads.stamp([_ad(), _ad()], "vm") is None           # two ads of one name
    assert KeptReads.stamp([_ad(name="other")], "vm") is None
    assert KeptReads.stamp([_ad()], None) is None
    assert KeptReads.stamp(None, "vm") is None
    for bad in ({"reconfigured": True}, {"reconfigured": 200.5}, {"started": "100"},
                {"address": ""}, {"address": 7}):
        assert KeptReads.stamp([_ad(**bad)], "vm") is None, bad
    no_times = classad2.ClassAd({"Name": "vm", "MyAddress": "<10.0.0.1:9618>"})
    assert KeptReads.stamp([no_times], "vm") is None


class _Clock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


def _reader(value, calls):
    def read():
        calls.append(value)
        if isinstance(value, Exception):
            raise value
        return {"PRIORITY_HALFLIFE": value}
    return read


def test_a_read_is_kept_while_its_stamp_holds_and_read_again_on_any_change():
    clock, calls = _Clock(), []
    kept = KeptReads(clock=clock, wall=lambda: 1000.0)
    stamp = ("<10.0.0.1:9618>", 100, 200)
    assert kept.read("negotiator", "vm", stamp, _reader("1", calls)) == {"PRIORITY_HALFLIFE": "1"}
    assert kept.last == {"negotiator vm": "read"}
    got = kept.read("negotiator", "vm", stamp, _reader("2", calls))
    assert got == {"PRIORITY_HALFLIFE": "1"} and calls == ["1"]
    assert kept.last == {"negotiator vm": "kept"}
    got["PRIORITY_HALFLIFE"] = "changed by the caller"             # a copy each time
    assert kept.read("negotiator", "vm", stamp, _reader("2", calls))["PRIORITY_HALFLIFE"] == "1"
    # a schedd of the same name is another daemon
    assert kept.read("schedd", "vm", stamp, _reader("s", calls)) == {"PRIORITY_HALFLIFE": "s"}
    # a reconfig, a restart, another address: read again, and that read is kept
    value = 2
    for changed in (("<10.0.0.1:9618>", 100, 201), ("<10.0.0.1:9618>", 101, 201),
                    ("<10.0.0.2:9618>", 101, 201)):
        value += 1
        assert kept.read("negotiator", "vm", changed, _reader(str(value), calls)) == {
            "PRIORITY_HALFLIFE": str(value)}
        assert kept.read("negotiator", "vm", changed, _reader("x", calls)) == {
            "PRIORITY_HALFLIFE": str(value)}
    assert calls == ["1", "s", "3", "4", "5"]
    # an old read is read again, even with the same stamp
    clock.t += REREAD_AFTER
    assert kept.read("negotiator", "vm", changed, _reader("6", calls))["PRIORITY_HALFLIFE"] == "6"
    assert kept.last["negotiator vm"] == "read"


def test_no_stamp_a_fresh_reconfig_or_a_failed_read_keeps_nothing():
    calls = []
    wall = [1000.0]
    kept = KeptReads(clock=_Clock(), wall=lambda: wall[0])
    for _ in range(2):                                  # no stamp: read every time
        kept.read("negotiator", "vm", None, _reader("a", calls))
    assert calls == ["a", "a"]
    # a read within RECONFIG_SETTLE of the reconfig the stamp names: another reconfig
    # in the same second would not change the stamp, so it is read again next time
    stamp = ("<10.0.0.1:9618>", 100, 999)
    kept.read("negotiator", "vm", stamp, _reader("b", calls))
    kept.read("negotiator", "vm", stamp, _reader("c", calls))
    wall[0] = 999 + RECONFIG_SETTLE
    kept.read("negotiator", "vm", stamp, _reader("d", calls))
    assert kept.read("negotiator", "vm", stamp, _reader("e", calls)) == {"PRIORITY_HALFLIFE": "d"}
    assert calls == ["a", "a", "b", "c", "d"]
    # a failed read raises, and what was kept of that daemon is dropped
    other = ("<10.0.0.1:9618>", 100, 500)
    with pytest.raises(RuntimeError):
        kept.read("negotiator", "vm", other, _reader(RuntimeError("refused"), calls))
    assert kept.read("negotiator", "vm", stamp, _reader("f", calls)) == {"PRIORITY_HALFLIFE": "f"}
    # a daemon without a name is read every time
    kept.read("negotiator", None, stamp, _reader("g", calls))
    kept.read("negotiator", None, stamp, _reader("h", calls))
    assert calls[-2:] == ["g", "h"]


def test_a_loops_captures_read_the_negotiator_again_only_after_it_reconfigures(tmp_path, mocker):
    """Through the capture: the second capture takes the kept knobs (no RemoteParam for
    the negotiator), its config the same; a knob changed in the negotiator's files is
    not what it runs until it reconfigures, and the capture after its reconfig has it.
    The fake schedd ads carry no times: the schedd is read every time."""
    import htcondor2

    fake = FakePool().install(mocker)
    kept = KeptReads()

    def capture(n):
        out = tmp_path / f"snap{n}"
        capture_snapshot(None, out, htcondor=htcondor2, now=NOW + n, kept_reads=kept)
        meta = json.loads((out / "meta.json").read_text())
        config = [ln for ln in (out / "config").read_text().splitlines()
                  if not ln.startswith("#")]
        return meta, config, len(fake.remote_params), len(fake.schedd_remote_params)

    meta1, config1, neg1, schedd1 = capture(1)
    assert meta1["daemon_configs"] == {"negotiator vm": "read", "schedd vm": "read"}
    assert neg1 == 1 and schedd1 == 1
    meta2, config2, neg2, schedd2 = capture(2)
    assert meta2["daemon_configs"] == {"negotiator vm": "kept", "schedd vm": "read"}
    assert (neg2, schedd2) == (1, 2) and config2 == config1
    assert not meta2["partial"]

    fake.remote = {**fake.remote, "PRIORITY_HALFLIFE": "4321"}
    _, config3, neg3, _ = capture(3)
    assert neg3 == 1 and "PRIORITY_HALFLIFE = 4321" not in config3
    fake.negotiator[0]["DaemonLastReconfigTime"] = fake.negotiator[0]["DaemonLastReconfigTime"] + 7
    meta4, config4, neg4, _ = capture(4)
    assert neg4 == 2 and meta4["daemon_configs"]["negotiator vm"] == "read"
    assert "PRIORITY_HALFLIFE = 4321" in config4


def test_a_capture_without_kept_reads_reads_every_time_and_says_nothing(tmp_path, mocker):
    import htcondor2

    fake = FakePool().install(mocker)
    for n in range(2):
        capture_snapshot(None, tmp_path / f"snap{n}", htcondor=htcondor2, now=NOW + n)
    assert len(fake.remote_params) == 2
    assert "daemon_configs" not in json.loads((tmp_path / "snap1" / "meta.json").read_text())
