"""The condor_master daemon (negotiator_ext/daemon.py) with fake bindings and a fake
shadow loop, and the cron hook shadow-pass (negotiator_ext/site_files/hooks/) with a fake
`negotiator-ext`."""

import logging
import os
import shutil
import signal
import subprocess
import sys
import sysconfig
import threading
import time
import urllib.request
from pathlib import Path
from types import SimpleNamespace

import htcondor2
import pytest

from negotiator_ext import daemon
from negotiator_ext.core.records import Comparison, PassRecord
from negotiator_ext.errors import InputError

ROOT = Path(__file__).resolve().parent.parent
HOOK = ROOT / "negotiator_ext" / "site_files" / "hooks" / "shadow-pass"

try:
    from negotiator_ext.adapters.ledger import LedgerError
except ImportError:   # pragma: no cover - the ledger adapter is written alongside
    class LedgerError(InputError):
        pass


def record(uuid="p1", status="complete"):
    return PassRecord(
        uuid=uuid, pool="cm", started_at=1000.0, finished_at=1010.0, snapshot_time=1001,
        status=status, reason=None, real_cycle_time=990, real_accountant_time=995,
        shadow_duration=2.0, capture_duration=3.0,
        comparison=Comparison(shadow_pass="p0", real_cycle_time=990, real_cycles_between=1,
                              real_matches=4, shadow_matches=4, agreed=3, real_in_shadow=0.75,
                              shadow_in_real=0.75, count_agreement=1.0, source="matchlog"))


class FakeCollector:
    def __init__(self, owner, pool):
        self.owner, self.pool = owner, pool

    def advertise(self, ads, command):
        self.owner.advertised.append((self.pool, [dict((k, a[k]) for k in a.keys()) for a in ads],
                                      command))
        if self.owner.advertise_error is not None:
            raise self.owner.advertise_error


class FakeHtcondor:
    """The bindings the daemon uses; LogLevel and SubsystemType are the real enums, so a
    name the real bindings lack fails here too."""
    LogLevel = htcondor2.LogLevel
    SubsystemType = htcondor2.SubsystemType

    def __init__(self):
        self.calls = []
        self.logged = []
        self.advertised = []
        self.advertise_error = None
        self.param = {}

    def set_subsystem(self, name, kind):
        self.calls.append(("set_subsystem", name, kind))

    def enable_log(self):
        self.calls.append(("enable_log",))

    def log(self, level, msg):
        self.logged.append((level, msg))

    def set_ready_state(self, state="Ready"):
        self.calls.append(("set_ready_state", state))

    def reload_config(self, *args):
        self.calls.append(("reload_config",) + args)

    def Collector(self, pool=None):
        return FakeCollector(self, pool)

    def called(self, name):
        return [c for c in self.calls if c[0] == name]

    def lines(self):
        return [m for _, m in self.logged]


def settings(tmp_path, **kw):
    base = dict(pool="cm.example.org", interval=0.01, advertise=False, metrics_file=None,
                metrics_port=0, name="negotiator-ext@test", state_dir=tmp_path)
    base.update(kw)
    return SimpleNamespace(**base)


class FakeShadow:
    """`read_settings` returns the given settings in turn (the last one repeats);
    `ShadowLoop(...).run_forever` runs the given scripts in turn, one per call."""

    def __init__(self, settings_seq, scripts):
        self.settings_seq = list(settings_seq)
        self.read = []
        self.loops = []
        self.scripts = list(scripts)
        self.runs = 0
        self.errors = []
        shadow = self

        class ShadowLoop:
            def __init__(self, settings, *, htcondor=None, clock=time.time, log=None):
                self.settings = settings
                self.htcondor = htcondor
                shadow.loops.append(self)

            def run_forever(self, stop, on_pass=None):
                # A failed assertion in a script (or a run no script was written for) would
                # be logged by the daemon and the loop restarted for ever: record it, stop.
                try:
                    if shadow.runs >= len(shadow.scripts):
                        raise AssertionError(f"unexpected run_forever call #{shadow.runs + 1}")
                    script = shadow.scripts[shadow.runs]
                    shadow.runs += 1
                    return script(self, stop, on_pass)
                except AssertionError as exc:
                    shadow.errors.append(exc)
                    kill_self("SIGTERM")
                    stop.wait(30)

        self.ShadowLoop = ShadowLoop

    def read_settings(self, config_path=None, **overrides):
        self.read.append(config_path)
        s = self.settings_seq[min(len(self.read), len(self.settings_seq)) - 1]
        if isinstance(s, Exception):
            raise s
        return s


def run_main(argv, ht, sh, **kw):
    """daemon.main, failing the test if a script's assertion failed inside the loop."""
    status = daemon.main(argv, htcondor=ht, shadow=sh, **kw)
    assert sh.errors == []
    return status


def kill_self(signame):
    os.kill(os.getpid(), getattr(signal, signame))


def until_stopped(stop):
    """What run_forever does between passes: wait for `stop` (True once it is set)."""
    return stop.wait(30)


@pytest.fixture
def no_config_check(monkeypatch):
    checked = []
    monkeypatch.setattr(daemon, "_check_config", lambda path: checked.append(path))
    return checked


def test_sigterm_stops_after_the_pass_in_flight(tmp_path):
    ht = FakeHtcondor()
    prom = tmp_path / "m.prom"
    seen = {}

    def script(loop, stop, on_pass):
        kill_self("SIGTERM")                  # arrives while the pass is running
        seen["stopped"] = until_stopped(stop)
        on_pass(record())                     # the pass in flight ends and is reported
        seen["ready_before_pass"] = ("set_ready_state", "Ready") in ht.calls

    sh = FakeShadow([settings(tmp_path, metrics_file=prom, advertise=True)], [script])
    assert run_main([], ht, sh, clock=lambda: 1234.0) == 0
    assert seen == {"stopped": True, "ready_before_pass": True}
    assert sh.runs == 1
    assert ht.calls[0] == ("set_subsystem", "NEGOTIATOR_EXT", htcondor2.SubsystemType.Daemon)
    assert ("enable_log",) in ht.calls
    assert ht.called("set_ready_state") == [("set_ready_state", "Ready")]
    assert 'negotiator_ext_matches{side="real"} 4.0' in prom.read_text().splitlines()
    (pool, [ad], command), (pool2, [query], command2) = ht.advertised
    assert (pool, command) == ("cm.example.org", "UPDATE_AD_GENERIC")
    assert ad["Name"] == "negotiator-ext@test" and ad["LastHeardFrom"] == 1010   # the pass's end
    assert ad["ClassAdLifetime"] == 900
    # the clean stop withdraws the ad
    assert (pool2, command2) == ("cm.example.org", "INVALIDATE_ADS_GENERIC")
    assert query["TargetType"] == "ShadowNegotiator" and query["Name"] == "negotiator-ext@test"
    lines = ht.lines()
    assert "SIGTERM: stopping after the pass in flight" in lines
    assert any(l.startswith("pass p1 complete; our cycle:") for l in lines)
    # The loop's own loggers reach the HTCondor log too; handlers are gone afterwards.
    assert not any(isinstance(h, daemon.CondorLogHandler)
                   for h in logging.getLogger("negotiator_ext").handlers)


def test_a_pass_that_never_ends_cannot_hold_the_stop_up(tmp_path, monkeypatch):
    """A pass stuck in something that never returns (here: a loop that ignores its stop,
    as a fake schedd query that never answers would): the daemon leaves
    NEGOTIATOR_EXT_STOP_TIMEOUT seconds after SIGTERM, saying so."""
    ht = FakeHtcondor()
    ht.param["NEGOTIATOR_EXT_STOP_TIMEOUT"] = "1.5"
    left = threading.Event()
    exits = []

    def exit_now(d, log, timeout):          # os._exit would end the test run too
        exits.append((time.monotonic(), timeout))
        log.warning("the pass in flight did not end within %g s of the stop signal "
                    "(NEGOTIATOR_EXT_STOP_TIMEOUT): exiting without it", timeout)
        left.set()

    monkeypatch.setattr(daemon, "_exit_now", exit_now)
    signalled = []

    def script(loop, stop, on_pass):
        kill_self("SIGTERM")
        signalled.append(time.monotonic())
        left.wait(30)                           # stuck until the daemon gives up on it

    sh = FakeShadow([settings(tmp_path)], [script])
    assert run_main([], ht, sh) == 0
    assert len(exits) == 1
    waited = exits[0][0] - signalled[0]
    assert exits[0][1] == 1.5 and 1.4 <= waited < 5, waited
    assert any("did not end within 1.5 s" in l for l in ht.lines())


def test_stop_timeout_knob():
    ht = FakeHtcondor()
    assert daemon.stop_timeout(ht) == daemon.STOP_TIMEOUT == 15.0
    for text, want in (("4", 4.0), ("0", 15.0), ("-3", 15.0), ("soon", 15.0), ("inf", 15.0)):
        ht.param["NEGOTIATOR_EXT_STOP_TIMEOUT"] = text
        assert daemon.stop_timeout(ht) == want, text


def test_signal_handlers_are_restored(tmp_path):
    before = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)}

    def script(loop, stop, on_pass):
        kill_self("SIGQUIT")
        until_stopped(stop)

    assert run_main([], FakeHtcondor(), FakeShadow([settings(tmp_path)], [script])) == 0
    assert {s: signal.getsignal(s) for s in before} == before


def test_sighup_reloads_config_and_rebuilds_the_loop(tmp_path, no_config_check):
    ht = FakeHtcondor()
    first, second = settings(tmp_path, name="a"), settings(tmp_path, name="b")
    seen = []

    def hup(loop, stop, on_pass):
        seen.append(loop.settings.name)
        kill_self("SIGHUP")
        assert until_stopped(stop)            # the interval wait ends at once

    def term(loop, stop, on_pass):
        seen.append(loop.settings.name)
        seen.append(("reloaded", ht.called("reload_config")))
        kill_self("SIGTERM")
        until_stopped(stop)

    sh = FakeShadow([first, second], [hup, term])
    assert run_main([], ht, sh) == 0
    assert seen == ["a", "b", ("reloaded", [("reload_config",)])]
    assert len(sh.read) == 2 and len(sh.loops) == 2
    assert no_config_check == [None]
    assert ht.called("set_ready_state") == [("set_ready_state", "Ready")]   # once only
    assert ht.calls.count(("enable_log",)) == 2                              # log knobs reread
    assert "SIGHUP: reloading the configuration after the pass in flight" in ht.lines()


def test_sighup_during_start_up_does_not_end_the_daemon(tmp_path, no_config_check):
    ht = FakeHtcondor()

    class Shadow(FakeShadow):
        def read_settings(self, config_path=None, **overrides):
            if not self.read:
                kill_self("SIGHUP")           # condor_reconfig while the settings are read
            return super().read_settings(config_path, **overrides)

    def term(loop, stop, on_pass):
        kill_self("SIGTERM")
        until_stopped(stop)

    sh = Shadow([settings(tmp_path)], [term])
    assert run_main([], ht, sh) == 0          # alive until told to stop
    assert sh.runs == 1
    assert "SIGHUP: reloading the configuration after the pass in flight" in ht.lines()


def hup_then_term(seen: list):
    """Two loop scripts: the first gets SIGHUP, the second notes the settings it runs
    with, then gets SIGTERM."""
    def hup(loop, stop, on_pass):
        kill_self("SIGHUP")
        until_stopped(stop)

    def term(loop, stop, on_pass):
        seen.append(loop.settings.name)
        kill_self("SIGTERM")
        until_stopped(stop)

    return [hup, term]


def test_sighup_with_an_unreadable_config_keeps_the_running_settings(tmp_path, monkeypatch):
    monkeypatch.setattr(daemon, "_check_config", lambda path: "cfg: line 3: not valid")
    ht = FakeHtcondor()
    seen = []
    sh = FakeShadow([settings(tmp_path, name="a"), settings(tmp_path, name="b")],
                    hup_then_term(seen))
    assert run_main([], ht, sh) == 0
    assert seen == ["a"]
    assert ht.called("reload_config") == [] and len(sh.read) == 1
    assert ("ERROR: reconfiguration refused, the running configuration stays: "
            "cfg: line 3: not valid") in ht.lines()


def test_sighup_with_bad_knobs_keeps_the_running_settings(tmp_path, no_config_check):
    ht = FakeHtcondor()
    seen = []
    bad = InputError("NEGOTIATOR_EXT_INTERVAL", "not a number: abc")
    sh = FakeShadow([settings(tmp_path, name="a"), bad], hup_then_term(seen))
    assert run_main([], ht, sh) == 0
    assert seen == ["a"]
    assert any("reconfiguration failed, the running settings stay: NEGOTIATOR_EXT_INTERVAL: "
               "not a number: abc" in l for l in ht.lines())


def test_a_transient_ledger_error_escaping_the_loop_does_not_stop_the_daemon(tmp_path):
    ht = FakeHtcondor()
    prom = tmp_path / "m.prom"

    def broken(loop, stop, on_pass):
        raise LedgerError("ledger.sqlite", "database is locked", transient=True)

    def works(loop, stop, on_pass):
        on_pass(record("p2"))
        kill_self("SIGTERM")
        until_stopped(stop)

    sh = FakeShadow([settings(tmp_path, metrics_file=prom)], [broken, works])
    assert run_main([], ht, sh) == 0
    assert sh.runs == 2
    assert "negotiator_ext_pass_complete 1.0" in prom.read_text().splitlines()
    err = [m for lvl, m in ht.logged if lvl == htcondor2.LogLevel.Error]
    assert err and err[0].startswith("ERROR: the shadow loop stopped on an error; restarting it in")
    assert "database is locked" in err[0]


def test_an_unwritable_ledger_stops_the_daemon_without_a_restart(tmp_path):
    """A lasting ledger failure (the loop raises it after its first pass): logged once at
    error level, exit status 99 (DAEMON_NO_RESTART: condor_master does not restart it),
    the loop not restarted."""
    ht = FakeHtcondor()

    def unwritable(loop, stop, on_pass):
        raise LedgerError("/var/lib/negotiator-ext/ledger.sqlite",
                          "cannot be written (read-only file, directory or file system)")

    sh = FakeShadow([settings(tmp_path)], [unwritable])
    assert run_main([], ht, sh) == daemon.NO_RESTART == 99
    assert sh.runs == 1
    err = [m for lvl, m in ht.logged if lvl == htcondor2.LogLevel.Error]
    assert err == ["ERROR: stopping: the ledger cannot be written: "
                   "/var/lib/negotiator-ext/ledger.sqlite: cannot be written (read-only file, "
                   "directory or file system)"]
    assert ht.lines()[-1] == ("negotiator-ext shadow daemon stopped (exit status 99: "
                              "condor_master does not restart it; condor_on -daemon "
                              "NEGOTIATOR_EXT once the ledger is fixed)")


def test_cannot_start_without_settings(tmp_path, capsys):
    ht = FakeHtcondor()
    sh = FakeShadow([InputError("NEGOTIATOR_EXT_STATE_DIR", "not set")], [])
    assert run_main([], ht, sh) == 1
    assert sh.runs == 0 and ht.called("set_ready_state") == []
    assert "ERROR: cannot start: NEGOTIATOR_EXT_STATE_DIR: not set" in ht.lines()
    assert capsys.readouterr().err == "negotiator-ext-daemon: NEGOTIATOR_EXT_STATE_DIR: not set\n"


def test_bad_arguments_exit_2(capsys):
    assert daemon.main(["--bogus"], htcondor=FakeHtcondor(), shadow=FakeShadow([], [])) == 2
    assert "unrecognized arguments: --bogus" in capsys.readouterr().err


def test_config_flag_points_condor_config_at_the_file(tmp_path, monkeypatch):
    monkeypatch.setenv("CONDOR_CONFIG", "/elsewhere")
    cfg = tmp_path / "condor_config"
    cfg.write_text("")
    ht = FakeHtcondor()

    def term(loop, stop, on_pass):
        kill_self("SIGTERM")
        until_stopped(stop)

    sh = FakeShadow([settings(tmp_path)], [term])
    assert run_main(["-f", "--config", str(cfg)], ht, sh) == 0
    assert os.environ["CONDOR_CONFIG"] == str(cfg.resolve())
    assert ("reload_config", str(cfg.resolve())) in ht.calls
    assert sh.read == [cfg.resolve()]


def test_metrics_endpoint_serves_the_pass(tmp_path):
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ht = FakeHtcondor()
    got = {}

    def script(loop, stop, on_pass):
        on_pass(record())
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
            got["body"] = r.read().decode()
        kill_self("SIGTERM")
        until_stopped(stop)

    sh = FakeShadow([settings(tmp_path, metrics_port=port)], [script])
    assert run_main([], ht, sh) == 0
    lines = got["body"].splitlines()
    assert 'negotiator_ext_passes_total{status="complete"} 1.0' in lines
    assert "negotiator_ext_matches_agreed 3.0" in lines
    assert f"serving metrics on http://127.0.0.1:{port}/metrics" in ht.lines()
    with pytest.raises(OSError):      # closed with the daemon
        urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2)


def test_a_refused_advertisement_is_logged_once(tmp_path):
    ht = FakeHtcondor()
    ht.advertise_error = RuntimeError("Failed to advertise to collector.")
    log = logging.getLogger("test_daemon.advertise")
    records = []
    handler = logging.Handler()
    handler.emit = records.append
    log.addHandler(handler)
    log.setLevel(logging.DEBUG)
    try:
        d = daemon.ShadowDaemon(ht, None, log=log, clock=lambda: 5.0)
        d.settings = settings(tmp_path, advertise=True, interval=600)
        d.on_pass(record("a"))                       # never raises
        d.on_pass(record("b"))
        ht.advertise_error = None
        d.on_pass(record("c"))
    finally:
        log.removeHandler(handler)
    warnings = [r.getMessage() for r in records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "UPDATE_AD_GENERIC needs DAEMON authorization" in warnings[0]
    assert "advertising to the collector works again" in [r.getMessage() for r in records]
    assert len(ht.advertised) == 3
    assert ht.advertised[0][1][0]["ClassAdLifetime"] == 1800   # outlives 600 s passes


def test_unwritable_metrics_file_is_a_warning(tmp_path):
    ht = FakeHtcondor()
    records = []
    log = logging.getLogger("test_daemon.metrics")
    handler = logging.Handler()
    handler.emit = records.append
    log.addHandler(handler)
    try:
        d = daemon.ShadowDaemon(ht, None, log=log)
        d.settings = settings(tmp_path, metrics_file=tmp_path / "missing" / "m.prom")
        d.on_pass(record())
    finally:
        log.removeHandler(handler)
    assert any(r.levelno == logging.WARNING and "not written" in r.getMessage()
               for r in records)


def test_log_levels_map_to_htcondor_categories():
    ht = FakeHtcondor()
    h = daemon.CondorLogHandler(ht)
    for level, msg in ((logging.DEBUG, "d"), (logging.INFO, "i"),
                       (logging.WARNING, "w"), (logging.ERROR, "e")):
        h.emit(logging.LogRecord("x", level, __file__, 1, msg, None, None))
    L = htcondor2.LogLevel
    assert ht.logged == [(L.FullDebug, "d"), (L.Always, "i"), (L.Always, "WARNING: w"),
                         (L.Error, "ERROR: e")]


# what condor_master runs: the console script the install puts beside `negotiator-ext`
DAEMON_SCRIPT = Path(sysconfig.get_path("scripts")) / "negotiator-ext-daemon"


def test_daemon_console_script_runs_main():
    assert DAEMON_SCRIPT.is_file(), f"{DAEMON_SCRIPT}: not installed (pip install -e . again)"
    proc = subprocess.run([str(DAEMON_SCRIPT), "--bogus"],
                          capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert proc.returncode == 2
    assert proc.stderr.startswith("negotiator-ext-daemon: usage")


def test_daemon_snippet_is_valid_htcondor_config(tmp_path, monkeypatch, capsys):
    """The snippet as `install-files` writes it: HTCondor reads it, and its program is this
    install's console script."""
    from negotiator_ext import cli
    from negotiator_ext.adapters.condor_config import LOCAL, read_params
    assert cli.main(["install-files", "--config-dir", str(tmp_path / "config.d")]) == 0
    capsys.readouterr()
    cfg = tmp_path / "condor_config"
    cfg.write_text(f"LOG = {tmp_path}\nDAEMON_LIST = MASTER, COLLECTOR, NEGOTIATOR\n"
                   f"include : {tmp_path / 'config.d/61-negotiator-ext-daemon.conf'}\n")
    # a host's own config (not a snapshot's, where includes are refused)
    monkeypatch.setenv("CONDOR_CONFIG", str(cfg))
    params, _ = read_params(LOCAL)
    assert params["DAEMON_LIST"].split()[-1] == "NEGOTIATOR_EXT"
    assert params["NEGOTIATOR_EXT"] == str(DAEMON_SCRIPT)
    assert params["NEGOTIATOR_EXT_LOG"] == f"{tmp_path}/NegotiatorExtLog"
    assert params["NEGOTIATOR_EXT_USERID"] == "condor"


# ---- the shadow-pass hook -----------------------------------------------------------------

FAKE_CLI = """#!/bin/sh
echo "$*" >> "$FAKE_DIR/calls"
touch "$FAKE_DIR/started.$$"
while [ ! -e "$FAKE_DIR/release" ]; do sleep 0.05; done
exit "${FAKE_RC:-0}"
"""


@pytest.fixture
def hook_env(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "negotiator-ext").write_text(FAKE_CLI)
    (bin_dir / "condor_config_val").write_text('#!/bin/sh\necho "$FAKE_STATE"\n')
    for p in bin_dir.iterdir():
        p.chmod(0o755)
    fake = tmp_path / "fake"
    fake.mkdir()
    env = dict(os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}", FAKE_DIR=str(fake),
               FAKE_STATE=str(tmp_path / "state"))
    return SimpleNamespace(bin=bin_dir, fake=fake, env=env, state=tmp_path / "state")


def calls(h):
    p = h.fake / "calls"
    return p.read_text().splitlines() if p.exists() else []


def test_hook_runs_one_pass_and_passes_its_status(hook_env):
    (hook_env.fake / "release").touch()
    proc = subprocess.run([str(HOOK), "--verbose"], env=dict(hook_env.env, FAKE_RC="3"),
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 3
    assert calls(hook_env) == ["shadow --once --verbose"]


@pytest.mark.skipif(shutil.which("flock") is None, reason="flock(1) not installed")
def test_hook_runs_never_overlap(hook_env):
    first = subprocess.Popen([str(HOOK)], env=hook_env.env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 30
        while not list(hook_env.fake.glob("started.*")):
            assert first.poll() is None, first.communicate()
            assert time.monotonic() < deadline, "the first run never started"
            time.sleep(0.02)
        second = subprocess.run([str(HOOK)], env=hook_env.env, capture_output=True,
                                text=True, timeout=60)
        assert (second.returncode, second.stdout, second.stderr) == (0, "", "")
        assert calls(hook_env) == ["shadow --once"]          # the second did not run it
        assert (hook_env.state / "shadow.cron.lock").exists()
    finally:
        (hook_env.fake / "release").touch()
        out, err = first.communicate(timeout=60)
    assert first.returncode == 0, err
    third = subprocess.run([str(HOOK)], env=hook_env.env, capture_output=True, text=True,
                           timeout=60)
    assert third.returncode == 0
    assert calls(hook_env) == ["shadow --once", "shadow --once"]   # the lock went with it


def test_hook_without_flock_or_writable_state_still_runs_the_cli(hook_env, tmp_path):
    (hook_env.fake / "release").touch()
    # A PATH with only what the hook and the fake CLI need: no flock.
    for tool in ("mkdir", "touch", "sleep"):
        (hook_env.bin / tool).symlink_to(shutil.which(tool))
    env = dict(hook_env.env, PATH=str(hook_env.bin))
    proc = subprocess.run([str(HOOK)], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert not (hook_env.state / "shadow.cron.lock").exists()
    # A state directory that cannot be made: no outer lock, the CLI still runs (and says why).
    blocker = tmp_path / "file"
    blocker.write_text("")
    env = dict(hook_env.env, FAKE_STATE=str(blocker / "state"))
    proc = subprocess.run([str(HOOK)], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert calls(hook_env) == ["shadow --once", "shadow --once"]
