"""adapters/collector_gate.py: a capture stops asking a collector that let one call
wait out the timeout; a quick failure (a refused connection) closes nothing. With real
daemons: tests/test_live_faults.py (a collector frozen with SIGSTOP)."""

from __future__ import annotations

import pytest

from negotiator_ext.adapters.collector_gate import CollectorSilent, GatedCollector
from negotiator_ext.shadow_state import STOP_TIMEOUT, ShadowSettings
from negotiator_ext.errors import InputError


class Clock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


class Collector:
    """Each call takes `waits[i]` seconds on the clock, then fails or answers."""

    def __init__(self, clock, waits, fail=True):
        self.clock, self.waits, self.fail, self.calls = clock, list(waits), fail, []

    def query(self, *args, **kw):
        self.calls.append(("query", args, kw))
        self.clock.t += self.waits.pop(0)
        if self.fail:
            raise RuntimeError("Failed communication with collector.")
        return ["ad"]

    def locate(self, *args):
        return self.query(*args)

    name = "not a call"


def test_a_call_that_waits_out_the_timeout_is_the_last():
    clock = Clock()
    c = Collector(clock, [4.9, 0.0])
    gate = GatedCollector(c, 5, "cm.example.org", clock=clock)
    with pytest.raises(RuntimeError):
        gate.query("Negotiator")
    assert gate.silent == ("the collector cm.example.org did not answer within 5 s "
                           "(--timeout); not asked again in this pass")
    with pytest.raises(CollectorSilent, match="did not answer within 5 s"):
        gate.locate("Negotiator")
    assert len(c.calls) == 1                    # never asked again
    assert gate.name == "not a call"            # anything else is the collector's


def test_a_loop_hears_whether_the_last_call_was_answered(tmp_path):
    """Heard: silent after a call that waited out its timeout, answered again after a
    call that got an answer (a later capture's); a loop whose collector is silent
    neither withdraws its ad nor tries to (it would only wait again)."""
    from negotiator_ext.adapters.collector_gate import Heard
    from negotiator_ext.shadow_publish import unpublish
    clock, heard = Clock(), Heard()
    c = Collector(clock, [5.0, 0.0])
    with pytest.raises(RuntimeError):
        GatedCollector(c, 5, "cm", heard=heard, clock=clock).query("Startd")
    assert heard.silent
    settings = ShadowSettings.from_knobs({"STATE_DIR": str(tmp_path), "POOL": "cm"})
    assert unpublish(settings, heard=heard) == (
        "the ShadowNegotiator ad not withdrawn from cm: the collector did not answer the "
        "last pass; the ad lapses after its ClassAdLifetime")
    c.fail = False
    assert GatedCollector(c, 5, "cm", heard=heard, clock=clock).query("Startd") == ["ad"]
    assert not heard.silent


def test_quick_failures_and_answers_leave_it_open():
    clock = Clock()
    c = Collector(clock, [0.01, 3.9, 0.0])      # refused at once; slow but under 0.8 x
    gate = GatedCollector(c, 5, "cm", bound="NEGOTIATOR_EXT_STOP_TIMEOUT", clock=clock)
    for _ in range(2):
        with pytest.raises(RuntimeError):
            gate.query("Startd", projection=["Name"])
    assert gate.silent is None
    c.fail = False
    assert gate.query("Startd") == ["ad"] and len(c.calls) == 3
    assert c.calls[0] == ("query", ("Startd",), {"projection": ["Name"]})


def test_no_timeout_never_closes():
    clock = Clock()
    gate = GatedCollector(Collector(clock, [1000.0]), 0, "cm", clock=clock)
    with pytest.raises(RuntimeError):
        gate.query("Startd")
    assert gate.silent is None


def test_the_stop_timeout_knob(tmp_path):
    base = {"STATE_DIR": str(tmp_path)}
    assert ShadowSettings.from_knobs(base).stop_timeout == STOP_TIMEOUT == 15.0
    assert ShadowSettings.from_knobs({**base, "STOP_TIMEOUT": "4"}).stop_timeout == 4.0
    for bad in ("0", "soon"):
        with pytest.raises(InputError) as e:
            ShadowSettings.from_knobs({**base, "STOP_TIMEOUT": bad})
        assert e.value.one_line().startswith("NEGOTIATOR_EXT_STOP_TIMEOUT: ")


def test_the_ad_sent_to_a_collector_that_never_answers_is_bounded(tmp_path):
    """A listening socket that never answers (the kernel takes the connection, as for a
    frozen collector): the bindings would wait 20 s to send the ad, and as long again to
    withdraw it; through the worker each waits the limit given, and the worker is ended."""
    import socket
    import time

    from negotiator_ext.adapters.worker import Worker
    from negotiator_ext.shadow_publish import unpublish

    pytest.importorskip("htcondor2")
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        pool = f"127.0.0.1:{silent.getsockname()[1]}"
        settings = ShadowSettings.from_knobs({"STATE_DIR": str(tmp_path), "POOL": pool,
                                              "STOP_TIMEOUT": "1.5"})
        worker = Worker()
        try:
            worker.start()
            t = time.monotonic()
            err = unpublish(settings, worker=worker)
            took = time.monotonic() - t
        finally:
            worker.close()
    assert err == (f"withdrawing the ShadowNegotiator ad from {pool} failed: the collector "
                   "did not answer within 1.5 s (a stop waits no longer: the ad lapses after "
                   "its ClassAdLifetime)")
    assert took < 4, took
