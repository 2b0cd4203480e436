"""The shadow loop as a daemon of condor_master (console script `negotiator-ext-daemon`).

condor_master runs it like any daemon in DAEMON_LIST that does not use DaemonCore (see
61-negotiator-ext-daemon.conf in site_files/): no command-line arguments but
NEGOTIATOR_EXT_ARGS, signals for control, and a restart with back-off whenever it exits
without being told to. So:

  * subsystem NEGOTIATOR_EXT (`htcondor2.set_subsystem(..., SubsystemType.Daemon)`), so
    `htcondor2.enable_log()` writes to $(NEGOTIATOR_EXT_LOG) at the level of
    NEGOTIATOR_EXT_DEBUG (without NEGOTIATOR_EXT_LOG the bindings fall back to
    $(LOG)/ToolLog). The package's Python logging goes there through `htcondor2.log`
    (DEBUG as D_FULLDEBUG, ERROR as D_ERROR). The loop's settings come from
    `shadow_state.read_settings` (our NEGOTIATOR_EXT_* knobs, NEGOTIATOR_EXT_METRICS_ADDRESS
    among them).
  * `set_ready_state("Ready")` once the loop starts its first pass (condor_who and the
    master then see it as Ready; outside condor_master it is skipped).
  * SIGHUP (condor_reconfig): after the pass in flight, the configuration is reloaded
    (`htcondor2.reload_config()`), the settings rebuilt with `read_settings` and a new
    ShadowLoop started; its first pass runs at once. A configuration HTCondor cannot read
    is refused with a log line and the running settings stay (reload_config would end
    the process on it): it is checked in a child process first.
  * SIGTERM (graceful) and SIGQUIT (fast), and SIGINT: stop after the pass in flight and
    exit 0. The ledger loses at most that pass; the master sends SIGKILL only after
    SHUTDOWN_GRACEFUL_TIMEOUT + SHUTDOWN_FAST_TIMEOUT. A read of the negotiator's
    configuration (a child process: adapters/daemon_config.py) still in flight STOP_READ_GRACE
    seconds after the signal is abandoned (`live.abort_remote_reads`), so a negotiator
    stuck expanding a circular macro cannot hold the stop up: that pass ends without the
    negotiator's config, and is recorded. (An honest read takes milliseconds.) A pass
    waiting on the schedds ends at once, recorded as failed. A collector that takes
    connections but does not answer holds a call (and the interpreter: no thread runs
    meanwhile) at most NEGOTIATOR_EXT_STOP_TIMEOUT seconds, after which the pass asks it
    nothing more (adapters/collector_gate.py) and fails; the ShadowNegotiator ad is then
    neither sent nor withdrawn, and otherwise sent by the loop's worker process, waited
    for as long at most, and withdrawn at the stop within shadow_publish.WITHDRAW_WAIT (3) s.
    Whatever else the pass waits on, the daemon is gone NEGOTIATOR_EXT_STOP_TIMEOUT
    seconds (15) after it sees the signal (a collector call in flight holds the
    interpreter: it sees it once that call returns): it then exits without that pass
    (exit status 0 all the same).
  * after each pass: the metrics endpoint is updated (NEGOTIATOR_EXT_METRICS_PORT > 0),
    the metrics textfile written (when configured) and the ShadowNegotiator ad sent to
    the collector (when configured). None of these can stop the loop: a failure is a
    log line.
  * a ledger that cannot be written for a lasting reason (cannot be opened or created,
    read-only, corrupt, of a newer schema) stops the daemon: the reason is logged
    once at error level and it exits with status 99, HTCondor's DAEMON_NO_RESTART, so
    that condor_master does not restart it into the same failure; once the ledger is
    fixed, `condor_on -daemon NEGOTIATOR_EXT` starts it again. A ledger locked by
    another process, on a full file system, or whose PostgreSQL server is away is
    retried every interval by the loop itself.

Threads: the loop runs in a worker thread and the main thread only waits for signals.
A Python signal handler runs in the main thread between bytecodes; if the main thread
were the one waiting in `stop.wait()`, a handler setting `stop` could find the Event's
lock held by the very thread it interrupted. Here the handlers only put the signal in a
SimpleQueue (reentrant) and the main thread acts on it outside any handler. The main
thread waits with a short timeout: the kernel may hand the signal to another thread,
and the Python handler runs only when the main thread next wakes.

Every use of the bindings goes through the `htcondor` module given to `main` (tests pass
a fake), and the shadow loop through `shadow` (anything with `read_settings` and
`ShadowLoop`).
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import queue
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable, Sequence

from .adapters.ledger import LedgerError
from .adapters.daemon_config import abort_remote_reads, allow_remote_reads
from .adapters.metrics import MetricsServer
from .errors import InputError
from .shadow_publish import ADVERTISING_WORKS, LoggedOnce, publish, standing_of, unpublish
from .views.ledger import summary_line
from .views.text import log_text

SUBSYSTEM = "NEGOTIATOR_EXT"
DEFAULT_METRICS_ADDRESS = "127.0.0.1"
STOP_SIGNALS = ("SIGTERM", "SIGQUIT", "SIGINT")
RELOAD_SIGNALS = ("SIGHUP",)
PACKAGE_LOGGER = "negotiator_ext"   # the loop's own loggers propagate to it
SIGNAL_POLL = 0.25                  # s: how soon the main thread notices a signal
STOP_READ_GRACE = 2.0               # s: after a stop signal, a configuration read still in
                                    # flight is abandoned
STOP_TIMEOUT = 15.0                 # s: NEGOTIATOR_EXT_STOP_TIMEOUT's default
NO_RESTART = 99                     # HTCondor's DAEMON_NO_RESTART exit status (exit.h):
                                    # condor_master does not restart the daemon

_log = logging.getLogger("negotiator_ext.daemon")   # also when run as __main__
_DONE = object()     # the worker has ended
_FAILED = object()   # ... on an error it did not handle


class CondorLogHandler(logging.Handler):
    """Python logging into the daemon's HTCondor log through `htcondor.log`.

    DEBUG is D_FULLDEBUG (shown when NEGOTIATOR_EXT_DEBUG has D_FULLDEBUG), INFO and
    WARNING are D_ALWAYS, ERROR and above D_ERROR; warnings and errors say so first, as
    the HTCondor daemons' own lines do."""

    def __init__(self, htcondor):
        super().__init__(logging.DEBUG)
        self.htcondor = htcondor
        self.setFormatter(logging.Formatter("%(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        try:
            levels = self.htcondor.LogLevel
            msg = log_text(record, self.formatter)     # names from the pool's ads
            if record.levelno >= logging.ERROR:
                level, msg = levels.Error, "ERROR: " + msg
            elif record.levelno >= logging.WARNING:
                level, msg = levels.Always, "WARNING: " + msg
            elif record.levelno >= logging.INFO:
                level = levels.Always
            else:
                level = levels.FullDebug
            self.htcondor.log(level, msg)
        except Exception:
            self.handleError(record)


def _check_config(config_path: Path | None) -> str | None:
    """Whether HTCondor can read this host's configuration (or `config_path`): None if
    it can, else why not, in one line. Runs the bindings in a child process, because
    `reload_config()` on a malformed file ends the process it runs in."""
    from .adapters.condor_config import LOCAL, read_params
    try:
        read_params(config_path if config_path is not None else LOCAL)
    except InputError as exc:
        return exc.one_line()
    return None


class ShadowDaemon:
    """The worker side: settings, the loop, the after-pass reporting, reconfiguration.

    `stop` is what ShadowLoop.run_forever watches; `shutdown` and `reload` say why it was
    set (both may be set by the main thread at any time)."""

    def __init__(self, htcondor, shadow, *, config_path: Path | None = None,
                 clock: Callable[[], float] = time.time, log: logging.Logger | None = None):
        self.htcondor = htcondor
        self.shadow = shadow
        self.config_path = config_path
        self.clock = clock
        self.log = log or _log
        self.stop = threading.Event()
        self.shutdown = threading.Event()
        self.reload = threading.Event()
        self.settings: Any = None
        self.loop: Any = None
        self.metrics: MetricsServer | None = None
        self.ready = False
        self._advertise_outcome = LoggedOnce(self.log, ADVERTISING_WORKS)
        self.fatal: str | None = None   # why the daemon stopped by itself (the ledger)

    # -- configuration ---------------------------------------------------------------
    def configure(self) -> None:
        """Read the settings and build the loop and the metrics endpoint (raises what
        read_settings raises: the caller decides whether that is fatal)."""
        settings = self.shadow.read_settings(self.config_path)
        loop = self.shadow.ShadowLoop(settings, htcondor=self.htcondor, clock=self.clock,
                                      log=logging.getLogger(PACKAGE_LOGGER + ".shadow"))
        # the loop's worker process (adapters/worker.py) reads HTCondor's config as this
        # process does: CONDOR_CONFIG (inherited), this subsystem
        loop.subsystem = (SUBSYSTEM, "Daemon")
        self.settings, self.loop = settings, loop
        self._configure_metrics()

    def _configure_metrics(self) -> None:
        """(Re)start the metrics endpoint when its port or address changed; a port that
        cannot be bound is logged and the loop runs without the endpoint."""
        port = int(getattr(self.settings, "metrics_port", 0) or 0)
        addr = getattr(self.settings, "metrics_address", DEFAULT_METRICS_ADDRESS)
        current = self.metrics
        if current is not None and current.port == port and current.addr == addr:
            return
        if current is not None:
            current.close()
            self.metrics = None
        if port <= 0:
            return
        try:
            self.metrics = MetricsServer(port, addr)
            self.log.info("serving metrics on http://%s:%d/metrics", addr, port)
        except OSError as exc:
            self.log.error("cannot serve metrics on %s:%d: %s; running without the endpoint",
                           addr, port, exc)

    def _reload(self) -> None:
        """SIGHUP: reload HTCondor's configuration and rebuild the settings and the loop;
        anything wrong keeps the running ones."""
        problem = _check_config(self.config_path)
        if problem is not None:
            self.log.error("reconfiguration refused, the running configuration stays: %s",
                           problem)
            return
        try:
            if self.config_path is not None:
                self.htcondor.reload_config(str(self.config_path))
            else:
                self.htcondor.reload_config()
            self.htcondor.enable_log()   # NEGOTIATOR_EXT_LOG / _DEBUG may have changed
            old = self.settings, self.loop
            try:
                self.configure()
            except Exception:
                self.settings, self.loop = old
                raise
        except Exception as exc:
            self.log.error("reconfiguration failed, the running settings stay: %s",
                           " ".join(str(exc).split()) or type(exc).__name__)
            return
        self.log.info("configuration reloaded")

    # -- after each pass -----------------------------------------------------------------
    def on_pass(self, rec) -> None:
        """Report pass `rec`: log line, metrics endpoint, metrics textfile, collector ad
        (shadow_publish.publish). Never raises (it runs inside the loop)."""
        try:
            self.log.info("%s", summary_line(rec))
            stop = getattr(self.loop, "stop", None)
            problems = publish(rec, self.settings, htcondor=self.htcondor, server=self.metrics,
                               standing=standing_of(self.loop, rec.pool),
                               others=getattr(self.loop, "latest", None),
                               worker=getattr(self.loop, "worker", None),
                               stop=stop.is_set if stop is not None else None,
                               heard=getattr(self.loop, "heard", None))
            if "metrics_file" in problems:
                self.log.warning("%s", problems["metrics_file"])
            # the same refusal every pass is logged once, and its end once
            self._advertise_outcome(problems.get("advertise"))
        except Exception:
            self.log.exception("reporting pass %s failed", getattr(rec, "uuid", "?"))

    # -- the worker thread ---------------------------------------------------------------
    def _set_ready(self) -> None:
        try:
            self.htcondor.set_ready_state("Ready")
        except Exception as exc:
            if "CONDOR_INHERIT" in os.environ:
                self.log.warning("could not tell condor_master we are ready: %s", exc)
            else:
                self.log.debug("not started by condor_master: no ready state sent")
        self.ready = True

    def work(self) -> None:
        """Run the loop until `shutdown`; rebuild it on `reload`. A ledger that cannot be
        written for a lasting reason (a LedgerError that is not transient) ends it:
        `fatal` says why, logged once. Anything else escaping the loop (it retries a
        locked ledger itself) is logged and the loop restarted one interval later, never
        a crash loop."""
        while not self.shutdown.is_set():
            if self.reload.is_set():
                self.reload.clear()
                self._reload()
            self.stop.clear()
            # A signal that arrived before stop.clear() left its flag: act on it first.
            if self.shutdown.is_set():
                break
            if self.reload.is_set():
                continue
            if not self.ready:
                self._set_ready()
            try:
                self.loop.run_forever(self.stop, on_pass=self.on_pass)
            except Exception as exc:
                if isinstance(exc, LedgerError) and not exc.transient:
                    self.fatal = exc.one_line()
                    self.log.error("stopping: the ledger cannot be written: %s", self.fatal)
                    return
                interval = float(getattr(self.settings, "interval", 60) or 60)
                self.log.exception("the shadow loop stopped on an error; restarting it in %g s",
                                   interval)
                self.stop.wait(interval)
            else:
                if not self.stop.is_set():   # it returned by itself: wait, then run it again
                    interval = float(getattr(self.settings, "interval", 60) or 60)
                    self.log.warning("the shadow loop returned unasked; restarting it in %g s",
                                     interval)
                    self.stop.wait(interval)

    def close(self) -> None:
        if self.metrics is not None:
            self.metrics.close()
            self.metrics = None


def _abort_remote_reads(log: logging.Logger) -> None:
    """Stopping: kill the child reading a daemon's configuration, if one runs (it may wait
    without end on a negotiator stuck expanding a circular macro); the pass in flight
    then ends without that config."""
    if abort_remote_reads():
        log.info("abandoned the read of the negotiator's configuration in flight")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # noqa: D401 - argparse API
        raise InputError(f"usage ({self.prog} --help)", message)


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    return build_parser().parse_args(argv)


def build_parser() -> argparse.ArgumentParser:
    """`negotiator-ext-daemon`'s arguments (the manual's command reference is made from
    this parser)."""
    p = _Parser(prog="negotiator-ext-daemon",
                description="The negotiator-ext shadow loop as a condor_master daemon.")
    p.add_argument("-f", "-foreground", dest="foreground", action="store_true",
                   help="accepted for condor_master compatibility (it always runs in the "
                        "foreground)")
    p.add_argument("-t", dest="terminal", action="store_true",
                   help="also log to stderr")
    p.add_argument("-local-name", dest="local_name", metavar="NAME",
                   help="accepted for condor_master compatibility (ignored)")
    p.add_argument("--config", type=Path, metavar="FILE",
                   help="HTCondor configuration to use instead of this host's (CONDOR_CONFIG)")
    return p


def main(argv: Sequence[str] | None = None, *, htcondor=None, shadow=None,
         clock: Callable[[], float] = time.time) -> int:
    """Run the shadow loop until SIGTERM/SIGQUIT/SIGINT. Returns 0 after a requested stop,
    1 when it cannot start (settings unreadable) or its worker failed, 2 on bad
    arguments, NO_RESTART (99) when the ledger cannot be written (see the module
    docstring)."""
    try:
        args = _parse(sys.argv[1:] if argv is None else argv)
    except InputError as exc:
        print(f"negotiator-ext-daemon: {exc.one_line()}", file=sys.stderr)
        return 2
    if htcondor is None:
        import htcondor2 as htcondor
    if shadow is None:
        from . import shadow

    config_path = args.config.resolve() if args.config is not None else None
    if config_path is not None:
        os.environ["CONDOR_CONFIG"] = str(config_path)   # for the child processes too
    htcondor.set_subsystem(SUBSYSTEM, htcondor.SubsystemType.Daemon)
    if config_path is not None:
        htcondor.reload_config(str(config_path))
    htcondor.enable_log()

    pkg = logging.getLogger(PACKAGE_LOGGER)
    handlers: list[logging.Handler] = [CondorLogHandler(htcondor)]
    if args.terminal:
        stream = logging.StreamHandler(sys.stderr)
        stream.setLevel(logging.INFO)
        stream.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
        handlers.append(stream)
    old_level = pkg.level
    pkg.setLevel(logging.DEBUG)
    for h in handlers:
        pkg.addHandler(h)
    log = logging.getLogger("negotiator_ext.daemon")   # __name__ is __main__ under -m
    daemon = ShadowDaemon(htcondor, shadow, config_path=config_path, clock=clock, log=log)
    events: queue.SimpleQueue = queue.SimpleQueue()
    previous: dict[int, Any] = {}
    def on_signal(signum, _frame):   # only this: see the module docstring
        events.put(signum)

    allow_remote_reads()
    try:
        # Before anything slow: a condor_reconfig during start-up must not end the
        # process (SIGHUP's default action); signals wait in `events` until the loop runs.
        for name in STOP_SIGNALS + RELOAD_SIGNALS:
            sig = getattr(signal, name, None)
            if sig is not None:
                previous[sig] = signal.signal(sig, on_signal)
        try:
            daemon.configure()
        except Exception as exc:
            msg = exc.one_line() if isinstance(exc, InputError) else (
                " ".join(str(exc).split()) or type(exc).__name__)
            log.error("cannot start: %s", msg)
            print(f"negotiator-ext-daemon: {msg}", file=sys.stderr)
            return 1
        log.info("negotiator-ext shadow daemon starting (pid %d, pass every %g s)",
                 os.getpid(), float(getattr(daemon.settings, "interval", 0) or 0))

        def run():
            try:
                daemon.work()
            except BaseException:   # a bug: log it, and let the master restart us
                log.exception("the shadow daemon's worker failed")
                events.put(_FAILED)
            finally:
                events.put(_DONE)

        worker = threading.Thread(target=run, name="shadow-loop", daemon=True)
        worker.start()
        status = 0
        abort_at: float | None = None     # when to abandon a configuration read in flight
        gone_at: float | None = None      # when to exit, the pass in flight or not
        while True:
            try:
                # A timeout, not a plain get(): the kernel may deliver a signal to any
                # thread, and the Python handler only runs once the main thread wakes up.
                item = events.get(timeout=SIGNAL_POLL)
            except queue.Empty:
                if abort_at is not None and time.monotonic() >= abort_at:
                    abort_at = None
                    _abort_remote_reads(log)
                if gone_at is not None and time.monotonic() >= gone_at:
                    gone_at = None
                    _exit_now(daemon, log, stop_timeout(htcondor))
                continue
            if item is _DONE:
                break
            if item is _FAILED:
                status = 1
                continue
            name = signal.Signals(item).name
            if name in RELOAD_SIGNALS:
                log.info("%s: reloading the configuration after the pass in flight", name)
                daemon.reload.set()
            else:
                log.info("%s: stopping after the pass in flight", name)
                daemon.shutdown.set()
                if abort_at is None:
                    abort_at = time.monotonic() + STOP_READ_GRACE
                if gone_at is None:
                    gone_at = time.monotonic() + stop_timeout(htcondor)
            daemon.stop.set()
        worker.join()
        if daemon.settings is not None:     # a clean stop takes the ad away
            err = unpublish(daemon.settings, htcondor=htcondor, streams=list(
                getattr(getattr(daemon, "loop", None), "latest", None) or ()),
                worker=getattr(getattr(daemon, "loop", None), "worker", None),
                deadline=gone_at, heard=getattr(getattr(daemon, "loop", None), "heard", None))
            if err:
                log.warning("%s", err)
        if daemon.fatal is not None:
            log.info("negotiator-ext shadow daemon stopped (exit status %d: condor_master "
                     "does not restart it; condor_on -daemon NEGOTIATOR_EXT once the ledger "
                     "is fixed)", NO_RESTART)
            return NO_RESTART
        log.info("negotiator-ext shadow daemon stopped")
        return status
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        allow_remote_reads()
        daemon.close()
        for h in handlers:
            pkg.removeHandler(h)
        pkg.setLevel(old_level)


def stop_timeout(htcondor=None) -> float:
    """NEGOTIATOR_EXT_STOP_TIMEOUT: how long after a stop signal the daemon waits for
    the pass in flight (a number of seconds > 0; else STOP_TIMEOUT)."""
    try:
        if htcondor is None:
            import htcondor2 as htcondor
        text = htcondor.param.get("NEGOTIATOR_EXT_STOP_TIMEOUT")
        value = float(text) if text not in (None, "") else STOP_TIMEOUT
    except Exception:                       # noqa: BLE001 - not a number: the default
        return STOP_TIMEOUT
    return value if 0 < value < float("inf") else STOP_TIMEOUT


def _exit_now(daemon, log, timeout: float) -> None:
    """The stop's deadline passed with the pass still in flight: end the loop's worker
    process, say so, and leave (what the ledger holds stays: every record is one
    transaction)."""
    log.warning("the pass in flight did not end within %g s of the stop signal "
                "(NEGOTIATOR_EXT_STOP_TIMEOUT): exiting without it", timeout)
    with contextlib.suppress(Exception):
        loop = getattr(daemon, "loop", None)
        if loop is not None and loop.worker is not None:
            loop.worker.close()
    for h in logging.getLogger(PACKAGE_LOGGER).handlers:
        with contextlib.suppress(Exception):
            h.flush()
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main())
