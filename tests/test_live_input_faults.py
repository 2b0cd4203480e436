"""The live capture against broken input, without a pool: a schedd that answers with
something that is not job ads (the bindings' Schedd.query faked with pytest-mock), and a
daemon configuration read (RemoteParam) that never ends, with the child process that
reads it replaced by one that hangs the same way. The real hang, against a real
negotiator, is in tests/test_live_hostile.py."""

from __future__ import annotations

import io
import json
import sys
import threading
import time

import classad2
import htcondor2
import pytest

from negotiator_ext import daemon
from negotiator_ext.adapters import _param_dump, daemon_config
from negotiator_ext.adapters.adfiles import read_ads
from negotiator_ext.adapters.daemon_config import RemoteReadError
from negotiator_ext.adapters.live import capture_snapshot
from negotiator_ext.errors import InputError
from negotiator_ext.shadow import ShadowLoop
from negotiator_ext.shadow_state import ShadowSettings

from fakepool import FakePool, location

NOW = 1795265300


@pytest.fixture
def pool(mocker):
    fake = FakePool().install(mocker)
    fake.schedds["bad"] = []          # a second schedd, whose answer each test chooses
    return fake


def bad_answer(pool, mocker, answer, *, second=None):
    """Schedd "bad" answers its first job query with `answer` (and a second one with
    `second`); "vm" answers as recorded."""
    calls = []

    def make_schedd(loc):
        if loc["Name"] != "bad":
            return pool.make_schedd(loc)
        schedd = mocker.Mock(spec=["query"])

        def query(constraint="True", projection=(), **kw):
            if kw.get("opts"):
                return []       # an autocluster query: no autoclusters, jobs queried whole
            calls.append(list(projection))
            got = answer if len(calls) == 1 else second
            return got() if callable(got) else got
        schedd.query.side_effect = query
        return schedd
    mocker.patch("htcondor2.Schedd", side_effect=make_schedd)
    return calls


def job(cluster=1, proc=0, **attrs):
    ad = classad2.ClassAd({"ClusterId": cluster, "ProcId": proc, "JobStatus": 1,
                           "Owner": "alice", "User": "alice@example.org",
                           "RequestCpus": 1, "RequestMemory": 64})
    for k, v in attrs.items():
        ad[k] = v
    return ad


def _raising_midway():
    yield job(1, 0)
    raise RuntimeError("connection reset while reading ads")


def _not_a_job_ad():
    return [job(1, 0), classad2.ClassAd({"MyType": "Machine", "Name": "slot1@x"})]


def _nul_string():
    ad = job(1, 0)
    ad["Note"] = "a\x00b"           # classad2 keeps "a" only in memory, and cannot write it
    return [ad]


GARBAGE = {
    "none": (None, "answered with None instead of a list of job ads"),
    "string": ("ClusterId = 1\nProcId = 0\n", "answered with a str instead of a list"),
    "bytes": (b"\x00\xff garbage", "answered with a bytes instead of a list"),
    "dict": ({"ClusterId": 1, "ProcId": 0}, "answered with a dict instead of a list"),
    "one ad": (lambda: job(1, 0), "answered with a ClassAd instead of a list"),
    "int": (42, "answered with an int instead of a list of job ads ('int' object is not iterable)"),
    "strings": (["ClusterId = 1", "ProcId = 0"],
                "not a job ad: item 1 of 2 is a str"),
    "dicts": ([{"ClusterId": 1, "ProcId": 0}], "not a job ad: item 1 of 1 is a dict"),
    "mixed": (lambda: [job(1, 0), None], "not a job ad: item 2 of 2 is None"),
    "machine ad": (_not_a_job_ad, "item 2 of 2 has ClusterId missing"),
    "string id": (lambda: [job("1", 0)], "item 1 of 1 has ClusterId 1"),
    "real id": (lambda: [job(1, 0.5)], "item 1 of 1 has ProcId 0.5"),
    "negative id": (lambda: [job(1, -1)], "item 1 of 1 has ProcId -1"),
    "bool id": (lambda: [job(True, 0)], "item 1 of 1 has ClusterId True"),
    "expression id": (lambda: [job(classad2.ExprTree("1 + 1"), 0)],
                      "item 1 of 1 has ClusterId 1 + 1"),
    "twice": (lambda: [job(3, 1), job(3, 1)], "answered with job 3.1 twice"),
    "raises midway": (_raising_midway, "instead of a list of job ads (connection reset"),
    "unwritable": (_nul_string, "cannot write its job ads: attribute Note"),
}


@pytest.mark.parametrize("case", sorted(GARBAGE))
def test_a_schedd_answering_garbage_is_named_and_the_snapshot_partial(pool, mocker, tmp_path,
                                                                        case):
    answer, why = GARBAGE[case]
    bad_answer(pool, mocker, answer)
    snap = tmp_path / "snap"
    report = capture_snapshot(None, snap, now=NOW)
    assert report.partial is True
    assert report.missing_schedds == ("bad",) and report.schedds == ("vm",)
    assert set(report.errors) == {"bad"} and why in report.errors["bad"], report.errors["bad"]
    # the schedd that answered is whole; the other left no file behind
    meta = json.loads((snap / "meta.json").read_text())
    assert meta["partial"] is True and meta["missing_schedds"] == ["bad"]
    assert meta["errors"] == {"bad": report.errors["bad"]}
    assert meta["schedd_files"] == {"jobs-vm.ads": "vm"}
    assert sorted(p.name for p in snap.iterdir() if p.name.startswith("jobs-")) == ["jobs-vm.ads"]
    assert not list(snap.glob("*.tmp"))
    assert meta["counts"]["jobs"] == report.jobs == len(read_ads(snap / "jobs-vm.ads")) == 52


def test_garbage_in_the_second_query_keeps_the_first_answer(pool, mocker, tmp_path):
    # the job's Requirements read an attribute the first projection lacks: a second query
    calls = bad_answer(pool, mocker, lambda: [job(7, 0, Requirements=classad2.ExprTree(
        "MY.Extra =!= 1"))], second="garbage")
    report = capture_snapshot(None, tmp_path / "snap", now=NOW)
    assert len(calls) == 2 and "Extra" in calls[1]
    assert set(report.schedds) == {"vm", "bad"} and report.partial is True
    assert report.errors["bad"].startswith("second query (projection extended by Extra): jobs "
                                           "kept from the first, answered with a str")
    (kept,) = read_ads(tmp_path / "snap" / "jobs-bad.ads")
    assert (kept["ClusterId"], kept["ProcId"]) == (7, 0)


def test_schedd_location_that_is_not_an_ad_is_named(pool, mocker, tmp_path):
    real = pool.make_collector

    def collector(p=None):
        c = real(p)
        orig = c.locateAll
        c.__dict__["locateAll"] = lambda t: [*orig(t), "garbage"]
        return c
    mocker.patch("htcondor2.Collector", side_effect=collector)
    report = capture_snapshot(None, tmp_path / "snap", now=NOW)
    assert report.errors["collector:schedds"] == ("the collector <local pool> answered with "
                                                  "something that is not a schedd's location "
                                                  "ad: item 3 of 3 is a str")
    assert report.partial is True and set(report.schedds) == {"vm", "bad"}


def test_a_shadow_pass_with_a_garbage_schedd_is_partial_and_names_it(pool, mocker, tmp_path):
    bad_answer(pool, mocker, ["not", "ads"])
    settings = ShadowSettings.from_knobs({}, state_dir=str(tmp_path / "state"), advertise=False,
                                         pool="cm.example.org")
    rec = ShadowLoop(settings, htcondor=htcondor2, clock=lambda: float(NOW)).run_pass()
    assert rec.status == "partial"
    assert rec.reason.startswith("partial snapshot (did not answer: bad: answered with "
                                 "something that is not a job ad: item 1 of 2 is a str")
    assert rec.comparable is False


def test_the_cli_names_a_garbage_schedd_on_one_line(pool, mocker, tmp_path, capsys):
    from negotiator_ext.cli import main
    bad_answer(pool, mocker, 42)
    assert main(["snapshot", "-o", str(tmp_path / "snap")]) == 0
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert "bad: answered with an int instead of a list of job ads" in err


# ---- a configuration read that never ends ---------------------------------------------------

LOCATION = classad2.ClassAd({"Name": "neg\x1b[31m@cm", "MyAddress": "<10.0.0.1:9618>",
                             "MyType": "Negotiator"})


def child(code: str) -> list[str]:
    """A stand-in for `_param_dump --remote`: Python code that prints its JSON lines."""
    return [sys.executable, "-c", "import json, sys, time\n"
            "def emit(r): print(json.dumps(r), flush=True)\n" + code]


HANG_AT_KNOB = child('sys.stdin.read(); emit({"listed": 3}); '
                     'emit({"reading": "GROUP_NAMES", "at": time.time()}); '
                     'emit({"reading": "NEGOTIATOR_LOOP_A", "at": time.time()}); '
                     'time.sleep(120)')


def test_a_read_hung_on_a_knob_is_killed_in_time_and_names_knob_and_daemon():
    t0 = time.monotonic()
    with pytest.raises(RemoteReadError) as err:
        daemon_config.read_remote_policy_knobs(LOCATION, timeout=1.5, daemon="the negotiator X",
                                      argv=HANG_AT_KNOB)
    assert time.monotonic() - t0 < 5
    assert str(err.value).startswith("reading NEGOTIATOR_LOOP_A from the negotiator X did not "
                                     "end within 1.5 s: its value never ends expanding (a "
                                     "circular macro")
    assert not daemon_config._READS_IN_FLIGHT


def test_a_daemon_that_never_answers_is_named():
    with pytest.raises(RemoteReadError, match=r"^the negotiator X did not answer a "
                                              r"configuration query within 1 s"):
        daemon_config.read_remote_policy_knobs(LOCATION, timeout=1, daemon="the negotiator X",
                                      argv=child("time.sleep(120)"))


def test_a_slow_daemon_is_not_blamed_on_the_last_knob():
    slow = child('emit({"listed": 100})\n'
                 'for i in range(100):\n'
                 '    emit({"reading": "K%d" % i, "at": time.time()}); time.sleep(0.1)\n')
    with pytest.raises(RemoteReadError) as err:
        daemon_config.read_remote_policy_knobs(LOCATION, timeout=1, daemon="the negotiator X", argv=slow)
    assert str(err.value).startswith("reading the configuration of the negotiator X did not "
                                     "end within 1 s (it was at K")


def test_a_read_that_ends_returns_the_knobs_and_one_that_fails_says_why():
    ok = child('sys.stdin.read(); emit({"listed": 2}); emit({"knobs": {"GROUP_NAMES": "a, b"}})')
    assert daemon_config.read_remote_policy_knobs(LOCATION, timeout=30, argv=ok) == {"GROUP_NAMES": "a, b"}
    failed = child('emit({"listed": 2}); emit({"reading": "X_LIMIT", "at": time.time()}); '
                   'emit({"error": "Failed to connect\\u001b"}); sys.exit(1)')
    with pytest.raises(RemoteReadError, match=r"^cannot read the configuration of the "
                                              r"negotiator X \(X_LIMIT\): Failed to connect"
                                              r"\\x1b$"):
        daemon_config.read_remote_policy_knobs(LOCATION, timeout=30, daemon="the negotiator X",
                                      argv=failed)
    crashed = child('sys.stderr.write("Segmentation fault\\n"); sys.exit(139)')
    with pytest.raises(RemoteReadError, match="Segmentation fault"):
        daemon_config.read_remote_policy_knobs(LOCATION, timeout=30, argv=crashed)


def test_abort_kills_the_read_in_flight_at_once():
    timer = threading.Timer(0.5, daemon_config.abort_remote_reads)
    timer.start()
    t0 = time.monotonic()
    try:
        with pytest.raises(RemoteReadError, match="was abandoned: negotiator-ext is stopping"):
            daemon_config.read_remote_policy_knobs(LOCATION, timeout=60, daemon="the negotiator X",
                                          argv=HANG_AT_KNOB)
        assert time.monotonic() - t0 < 3
        # and a read started while stopping does not start at all
        with pytest.raises(RemoteReadError, match="abandoned"):
            daemon_config.read_remote_policy_knobs(LOCATION, timeout=60, argv=HANG_AT_KNOB)
    finally:
        timer.cancel()
        daemon_config.allow_remote_reads()


def test_a_signal_handler_abandons_the_read_in_flight():
    """`abandon_remote_reads` (a shadow --interval loop's SIGTERM handler: a flag, no
    lock) ends the read in flight within a poll, as `abort_remote_reads` does."""
    timer = threading.Timer(0.5, daemon_config.abandon_remote_reads)
    timer.start()
    t0 = time.monotonic()
    try:
        with pytest.raises(RemoteReadError, match="was abandoned: negotiator-ext is stopping"):
            daemon_config.read_remote_policy_knobs(LOCATION, timeout=60, daemon="the negotiator X",
                                          argv=HANG_AT_KNOB)
        assert time.monotonic() - t0 < 3
    finally:
        timer.cancel()
        daemon_config.allow_remote_reads()
    assert not daemon_config._stopping()


@pytest.fixture
def hanging_negotiator(pool, mocker):
    """The capture takes the RemoteParam for the bindings' own, and its child hangs."""
    mocker.patch.object(daemon_config, "_bindings_remote_param", return_value=True)
    mocker.patch.object(daemon_config, "_remote_reader_argv", return_value=HANG_AT_KNOB)
    return pool


def test_a_capture_whose_config_read_hangs_is_partial_and_names_the_knob(hanging_negotiator,
                                                                           tmp_path):
    t0 = time.monotonic()
    report = capture_snapshot(None, tmp_path / "snap", timeout=2, now=NOW)
    assert time.monotonic() - t0 < 6
    assert report.partial is True and set(report.errors) == {"negotiator"}
    name = hanging_negotiator.negotiator[0]["Name"]
    assert report.errors["negotiator"].startswith(
        f"reading NEGOTIATOR_LOOP_A from the negotiator {name} did not end within 2 s")
    assert not (tmp_path / "snap" / "config").exists()


def test_with_an_earlier_config_the_hang_is_one_warning(pool, mocker, tmp_path):
    first = tmp_path / "1"
    capture_snapshot(None, first, now=NOW)              # read in-process from the fake
    mocker.patch.object(daemon_config, "_bindings_remote_param", return_value=True)
    mocker.patch.object(daemon_config, "_remote_reader_argv", return_value=HANG_AT_KNOB)
    report = capture_snapshot(None, tmp_path / "2", timeout=1, now=NOW + 60,
                              earlier_config=first / "config")
    assert report.partial is False and dict(report.errors) == {}
    warnings = json.loads((tmp_path / "2" / "meta.json").read_text())["warnings"]
    # the schedds' limits, read by the same (hanging) child: a warning for each schedd
    schedds = [w for w in warnings if w.startswith("the schedd ")]
    assert len(schedds) == len(pool.schedds)
    assert any(w.startswith("the schedd vm's limits were not read (reading NEGOTIATOR_LOOP_A")
               for w in schedds)
    (warning,) = [w for w in warnings if w not in schedds]
    assert "reading NEGOTIATOR_LOOP_A from the negotiator" in warning


def test_the_child_reports_each_knob_before_reading_it(mocker, monkeypatch, capsys):
    """`_param_dump --remote` itself, with RemoteParam faked in the child's place."""
    table = {"GROUP_NAMES": "a, b", "NEGOTIATOR_INTERVAL": "Not defined", "MAX_JOBS": "9",
             "GROUP_QUOTA_a": "3"}
    seen = []

    class Remote:
        def __init__(self, location):
            seen.append(location["Name"])

        def keys(self):
            return list(table)

        def __getitem__(self, key):
            return table[key]
    mocker.patch("htcondor2.RemoteParam", Remote)
    monkeypatch.setattr(sys, "stdin", io.StringIO(str(LOCATION)))
    assert _param_dump.main(["--remote", "0"]) == 0
    lines = [json.loads(ln) for ln in capsys.readouterr().out.splitlines()]
    assert seen == ["neg\x1b[31m@cm"]
    assert lines[0] == {"listed": 4}
    assert [r["reading"] for r in lines[1:-1]] == ["GROUP_NAMES", "GROUP_QUOTA_a",
                                                   "NEGOTIATOR_INTERVAL"]
    assert lines[-1] == {"knobs": {"GROUP_NAMES": "a, b", "GROUP_QUOTA_a": "3"}}


def test_the_child_reports_a_failure_as_one_line(mocker, monkeypatch, capsys):
    mocker.patch("htcondor2.RemoteParam", side_effect=RuntimeError("Failed to\nconnect"))
    monkeypatch.setattr(sys, "stdin", io.StringIO(str(LOCATION)))
    assert _param_dump.main(["--remote", "0"]) == 1
    assert capsys.readouterr().out == '{"error": "Failed to connect"}\n'


def test_the_daemon_stops_within_seconds_while_a_config_read_hangs(tmp_path):
    """SIGTERM while the pass in flight waits on a negotiator that never answers: the read
    is abandoned (daemon.STOP_READ_GRACE after the signal), the pass ends, the daemon
    exits 0 within a few seconds."""
    from test_daemon import FakeHtcondor, FakeShadow, kill_self, record, settings
    ht = FakeHtcondor()
    seen = {}

    def script(loop, stop, on_pass):
        threading.Timer(0.5, kill_self, ("SIGTERM",)).start()
        t0 = time.monotonic()
        try:
            daemon_config.read_remote_policy_knobs(LOCATION, timeout=120, argv=HANG_AT_KNOB)
        except RemoteReadError as exc:
            seen["error"] = str(exc)
        seen["read_for"] = time.monotonic() - t0
        on_pass(record())
        seen["stopped"] = stop.wait(30)

    sh = FakeShadow([settings(tmp_path)], [script])
    t0 = time.monotonic()
    assert daemon.main([], htcondor=ht, shadow=sh) == 0
    assert sh.errors == []
    assert time.monotonic() - t0 < daemon.STOP_READ_GRACE + 4
    assert seen["stopped"] is True
    assert daemon.STOP_READ_GRACE < seen["read_for"] < daemon.STOP_READ_GRACE + 2.5
    assert "abandoned" in seen["error"]
    lines = ht.lines()
    assert "SIGTERM: stopping after the pass in flight" in lines
    assert "abandoned the read of the negotiator's configuration in flight" in lines
    assert not daemon_config._STOPPING.is_set()       # the next run in this process may read again


def test_an_honest_read_in_flight_at_sigterm_is_let_finish(tmp_path):
    """A read that ends well within the grace is not abandoned: the pass in flight stays
    whole."""
    from test_daemon import FakeHtcondor, FakeShadow, kill_self, record, settings
    ht = FakeHtcondor()
    seen = {}
    slow_but_fine = child('sys.stdin.read(); emit({"listed": 1}); time.sleep(0.8); '
                          'emit({"knobs": {"GROUP_NAMES": "a"}})')

    def script(loop, stop, on_pass):
        threading.Timer(0.2, kill_self, ("SIGTERM",)).start()
        seen["knobs"] = daemon_config.read_remote_policy_knobs(LOCATION, timeout=60, argv=slow_but_fine)
        on_pass(record())
        seen["stopped"] = stop.wait(30)

    sh = FakeShadow([settings(tmp_path)], [script])
    assert daemon.main([], htcondor=ht, shadow=sh) == 0
    assert sh.errors == []
    assert seen == {"knobs": {"GROUP_NAMES": "a"}, "stopped": True}
    assert "abandoned the read of the negotiator's configuration in flight" not in ht.lines()


# ---- the collector's answers, and a schedd's, that are not ads (issue 33) ------------------

CM = "cm.example.org:9618"


@pytest.fixture
def fake(mocker):
    return FakePool().install(mocker)


def test_a_collector_answer_holding_a_null_is_named_and_left_out(fake, tmp_path):
    # was: "cannot write its ads: 'NoneType' object has no attribute 'printOld'"
    fake.submitters = fake.submitters[:1] + [None] + fake.submitters[1:]
    snap = tmp_path / "snap"
    report = capture_snapshot(CM, snap, now=NOW)
    assert dict(report.errors) == {"collector:submitters": (
        f"the collector {CM} answered with something that is not an ad: item 2 of 7 is None")}
    assert report.partial is True and report.schedds == ("vm",)
    assert not (snap / "submitters.ads").exists()
    assert json.loads((snap / "meta.json").read_text())["errors"] == dict(report.errors)


@pytest.mark.parametrize("answer,why", [
    (None, "answered with None instead of a list of ads"),
    (7, "answered with an int instead of a list of ads ('int' object is not iterable)"),
    (["Name = \"neg\""], "answered with something that is not an ad: item 1 of 1 is a str"),
])
def test_a_negotiator_answer_that_is_not_ads_is_named(fake, tmp_path, answer, why):
    # was, for a list holding a string: a traceback ('str' object has no attribute 'get')
    fake.negotiator = answer
    report = capture_snapshot(CM, tmp_path / "snap", now=NOW)
    assert report.errors["collector:negotiator"] == f"the collector {CM} {why}"
    assert not (tmp_path / "snap" / "negotiator.ads").exists()


@pytest.mark.parametrize("answer,why", [
    (None, "answered with None instead of a list of ads"),
    ("slot1@x", "answered with a str instead of a list of ads"),
    ([classad2.ClassAd({"Name": "slot1@x", "MyType": "Machine"}), None],
     "answered with something that is not an ad: item 2 of 2 is None"),
])
def test_a_slot_answer_that_is_not_ads_stops_the_capture_naming_the_collector(
        fake, mocker, tmp_path, capsys, answer, why):
    fake.slots = answer
    snap = tmp_path / "snap"
    with pytest.raises(InputError) as err:
        capture_snapshot(CM, snap, now=NOW)
    assert err.value.one_line() == f"{CM}: cannot read the collector's slot ads: {why}"
    assert not snap.exists()
    from negotiator_ext.cli import main
    assert main(["snapshot", "--pool", CM, "-o", str(snap)]) == 2
    assert capsys.readouterr().err == (f"negotiator-ext: error: {CM}: cannot read the "
                                       f"collector's slot ads: {why}\n")


def test_a_schedd_answering_with_something_that_is_not_job_ads_is_a_partial_pass_naming_it(
        fake, tmp_path, capsys):
    # was: "vm: scope must be a ClassAd" (raised by the fake schedd's own constraint test)
    fake.schedds["vm"] = fake.schedds["vm"][:3] + ["garbage"]
    why = "answered with something that is not a job ad: item 4 of 4 is a str"
    report = capture_snapshot(CM, tmp_path / "snap", now=NOW)
    assert report.missing_schedds == ("vm",) and dict(report.errors) == {"vm": why}
    from negotiator_ext.cli import main
    assert main(["snapshot", "--pool", CM, "-o", str(tmp_path / "cli")]) == 0
    err = capsys.readouterr().err
    assert err.splitlines() == [f"negotiator-ext: warning: schedd vm: {why}"]
    settings = ShadowSettings.from_knobs({}, state_dir=str(tmp_path / "state"), advertise=False,
                                         pool=CM)
    rec = ShadowLoop(settings, htcondor=htcondor2, clock=lambda: float(NOW)).run_pass()
    assert rec.status == "partial" and rec.comparable is False
    assert rec.reason == f"partial snapshot (did not answer: vm: {why})"


def test_a_schedd_job_twice_names_both_items(fake, tmp_path):
    fake.schedds["vm"] = fake.schedds["vm"][:3] + fake.schedds["vm"][1:2]
    report = capture_snapshot(CM, tmp_path / "snap", now=NOW)
    assert report.errors["vm"] == "answered with job 158.1 twice: items 2 and 4 of 4"


@pytest.mark.parametrize("drop,why", [
    ("MyAddress", "whose MyAddress is missing"),
    ("CondorVersion", "without CondorVersion"),     # htcondor2.Schedd reads it
])
def test_a_schedd_location_the_bindings_cannot_use_names_the_schedd_and_attribute(
        fake, mocker, tmp_path, drop, why):
    loc = location("vm", 9618)
    del loc[drop]
    fake.locate_all[htcondor2.DaemonTypes.Schedd] = [loc]
    if drop == "CondorVersion":
        # the real htcondor2.Schedd(location): location['MyAddress'], location['CondorVersion']
        mocker.patch("htcondor2.Schedd", side_effect=lambda loc: (loc["MyAddress"],
                                                                  loc["CondorVersion"]))
    report = capture_snapshot(CM, tmp_path / "snap", now=NOW)
    assert report.missing_schedds == ("vm",)
    assert report.errors["vm"] == (f"cannot be queried: the collector {CM} answered with its "
                                   f"location ad (item 1 of 1) {why}")


@pytest.mark.parametrize("answer,why", [
    ("negotiator@cm", "answered with a str instead of its location ad"),
    ([1], "answered with a list instead of its location ad"),
])
def test_a_negotiator_location_that_is_not_an_ad_is_named(fake, tmp_path, answer, why):
    fake.locate_result = answer
    report = capture_snapshot(CM, tmp_path / "snap", now=NOW)
    assert report.errors["negotiator"] == f"cannot locate the negotiator: the collector {CM} {why}"
    assert not (tmp_path / "snap" / "config").exists()


def test_an_ad_that_cannot_be_written_is_named(fake, tmp_path):
    ad = fake.accounting[1]
    ad["Note"] = "a\x00b"          # classad2 keeps "a" only in memory, and cannot write it
    fake.query_answers[htcondor2.AdTypes.Accounting] = fake.accounting
    report = capture_snapshot(CM, tmp_path / "snap", now=NOW)
    why = report.errors["collector:accounting"]
    assert why.startswith(f"cannot write its ads: ad 2 of {len(fake.accounting)} "
                          f"({ad['Name']}): attribute Note: ")
    assert not (tmp_path / "snap" / "accounting.ads").exists()
