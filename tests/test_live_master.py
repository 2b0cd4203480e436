"""The shadow daemon under the pool's real condor_master (tests/livepool.py), configured
by 61-negotiator-ext-daemon.conf as `negotiator-ext install-files` writes it (only the
pool's user substituted): started and Ready, reconfigured, turned off and on, restarted
after kill -9, and a SIGTERM during a pass lets that pass finish whole.

The master runs as the pool user, so the daemon does too: the program is this install's
console script negotiator-ext-daemon, whose first line names its python.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.live

from negotiator_ext import install

CONF = "61-negotiator-ext-daemon.conf"
# what the install put beside `negotiator-ext` for condor_master to run
DAEMON_SCRIPT = Path(sysconfig.get_path("scripts")) / install.DAEMON_SCRIPT
INTERVAL = 2


# ---- the pool user's python ---------------------------------------------------------------

def _runs_as_pool_user(pool, python: str) -> bool:
    """Whether `python` imports the daemon as the pool user, the way the master starts it
    (an exec from a process already running as that user)."""
    probe = pool.as_user([python, "-c", "import negotiator_ext.daemon, htcondor2"])
    return subprocess.run(probe, env=pool.env, cwd="/", capture_output=True,
                          timeout=60).returncode == 0


def _reachable(pool, path: Path) -> bool:
    """Whether the pool user may reach `path`: every directory on the way to it, and to
    what its symlinks point to, searchable by that user (as the kernel decides when the
    master's child, already that user, execs the program and its `#!` interpreter)."""
    if pool.user is None:
        return True
    uid, gid = pool.user.pw_uid, pool.user.pw_gid
    for p in (Path(path).absolute(), Path(os.path.realpath(path))):
        for d in p.parents:
            st = d.stat()
            bit = 0o100 if st.st_uid == uid else 0o010 if st.st_gid == gid else 0o001
            if not st.st_mode & bit:
                return False
    return True


def daemon_bindir(pool, scratch: Path) -> Path:
    """The directory of the negotiator-ext-daemon the master runs: this install's console
    scripts, or, where the pool user cannot run their python (it links into a directory
    only root may enter, e.g. /root/.pyenv), a venv made here from a system python of the
    same version that sees this venv's packages, with the same console script for its
    own python (as pip would write it there)."""
    assert DAEMON_SCRIPT.is_file(), f"{DAEMON_SCRIPT}: not installed (pip install -e . again)"
    first, rest = DAEMON_SCRIPT.read_text().split("\n", 1)
    python = first.removeprefix("#!").strip()
    if (_reachable(pool, DAEMON_SCRIPT) and _reachable(pool, Path(python))
            and _runs_as_pool_user(pool, python)):
        return DAEMON_SCRIPT.parent
    base = shutil.which("python%d.%d" % sys.version_info[:2], path="/usr/local/bin:/usr/bin:/bin")
    if base is None:
        pytest.skip("the pool user cannot run this venv's python, and there is no system "
                    "python%d.%d to make one it can run" % sys.version_info[:2])
    venv = scratch / "venv"
    subprocess.run([base, "-m", "venv", "--without-pip", str(venv)], check=True,
                   capture_output=True, timeout=120)
    (site,) = venv.glob("lib/python*/site-packages")
    (site / "negotiator-ext-test.pth").write_text(
        f"import site; site.addsitedir({sysconfig.get_paths()['purelib']!r})\n")
    (venv / "bin" / DAEMON_SCRIPT.name).write_text(f"#!{venv / 'bin' / 'python3'}\n{rest}")
    (venv / "bin" / DAEMON_SCRIPT.name).chmod(0o755)
    for p in [venv, *venv.rglob("*")]:
        if not p.is_symlink():
            p.chmod(p.stat().st_mode | 0o555 if p.is_dir() else p.stat().st_mode | 0o444)
    if not _runs_as_pool_user(pool, str(venv / "bin" / "python3")):
        pytest.skip("the pool user cannot import negotiator_ext with any python found")
    return venv / "bin"


@contextlib.contextmanager
def as_pool_user(pool):
    """Act as the pool user (effective ids) in this process: the ledger's -wal and -shm
    files that SQLite may create must stay writable by the daemon."""
    if pool.user is None:
        yield
        return
    os.setegid(pool.user.pw_gid)
    os.seteuid(pool.user.pw_uid)
    try:
        yield
    finally:
        os.seteuid(0)
        os.setegid(0)


# ---- the daemon under the master ----------------------------------------------------------

class MasterDaemon:
    """NEGOTIATOR_EXT in the pool's DAEMON_LIST, and what the test reads about it."""

    def __init__(self, pool, scratch: Path):
        self.pool = pool
        self.scratch = scratch
        self.state = scratch / "state"
        self.ledger = self.state / "ledger.sqlite"
        self.log = pool.log_dir / "NegotiatorExtLog"
        self.master_log = pool.log_dir / "MasterLog"
        self.bindir = daemon_bindir(pool, scratch)
        self.program = self.bindir / DAEMON_SCRIPT.name
        self.state.mkdir()
        if pool.user is not None:
            os.chown(self.state, pool.user.pw_uid, pool.user.pw_gid)

    def config(self, interval: float = INTERVAL) -> str:
        """The snippet as `install-files` writes it for the daemon's program (this
        install's, or the one made for the pool user), with the pool's user, then the knobs
        of 60-negotiator-ext.conf this test needs."""
        config_d = self.scratch / "config.d"
        (kind,) = [k for k in install.KINDS if k.dest == "config_dir"]
        install.plan_and_install({kind: config_d}, {install.SHIPPED_BIN: str(self.bindir)},
                                 dry_run=False)
        text = (config_d / CONF).read_text()
        assert re.search(rf"(?m)^NEGOTIATOR_EXT = {re.escape(str(self.program))}$", text)
        user = (self.pool.user or pwd.getpwuid(os.getuid())).pw_name
        text, n = re.subn(r"(?m)^NEGOTIATOR_EXT_USERID\s*=.*$",
                          lambda _m: f"NEGOTIATOR_EXT_USERID = {user}", text)
        assert n == 1, f"{CONF} sets NEGOTIATOR_EXT_USERID once"
        return text + f"""
NEGOTIATOR_EXT_STATE_DIR = {self.state}
NEGOTIATOR_EXT_INTERVAL = {interval:g}
NEGOTIATOR_EXT_NEGOTIATOR_LOG = $(LOG)/NegotiatorLog
NEGOTIATOR_EXT_MATCHLOG = $(LOG)/MatchLog
# the session's collector is shared with the other live tests
NEGOTIATOR_EXT_ADVERTISE = False
"""

    def install(self, interval: float = INTERVAL) -> None:
        self.pool.reconfig(CONF, self.config(interval), wait=0)

    # -- the master's view

    def who(self) -> dict[str, str]:
        """The master's answer to `condor_who -quick` (its daemons' ready ad)."""
        out = self.pool.tool("condor_who", "-quick", check=False).stdout
        return {k.strip(): v.strip().strip('"') for k, _, v in
                (ln.partition("=") for ln in out.splitlines() if "=" in ln)}

    def wait_ready(self, not_pid: int | None = None, timeout: float = 30) -> int:
        """The pid the master reports for NEGOTIATOR_EXT once it is Alive and Ready (and not
        `not_pid`)."""
        def ready():
            w = self.who()
            pid = int(w.get("NEGOTIATOR_EXT_PID") or 0)
            return (w.get("NEGOTIATOR_EXT") == "Alive" and w.get("NEGOTIATOR_EXT_State") ==
                    "Ready" and pid not in (0, not_pid) and pid)
        return self.pool.wait_for(ready, timeout, "NEGOTIATOR_EXT Alive and Ready", every=0.2)

    def master_log_has(self, pattern: str) -> bool:
        return re.search(pattern, self.master_log.read_text(errors="replace")) is not None

    # -- the daemon's own log

    def log_size(self) -> int:
        return self.log.stat().st_size if self.log.exists() else 0

    def log_since(self, offset: int) -> list[str]:
        """Its log's lines after byte `offset`, without their time stamps."""
        with open(self.log, "rb") as f:
            f.seek(offset)
            text = f.read().decode(errors="replace")
        return [re.sub(r"^\d\d/\d\d/\d\d \d\d:\d\d:\d\d(\.\d+)? ", "", ln)
                for ln in text.splitlines()]

    def wait_log(self, offset: int, line: str, timeout: float = 20) -> list[str]:
        return self.pool.wait_for(lambda: line in self.log_since(offset) and
                                  self.log_since(offset), timeout, f"the log line {line!r}",
                                  every=0.1)

    # -- its ledger

    def query(self, sql: str, *args) -> list[sqlite3.Row]:
        if not self.ledger.exists():
            return []
        with as_pool_user(self.pool):
            con = sqlite3.connect(f"file:{self.ledger}?mode=ro", uri=True, timeout=10)
            try:
                con.row_factory = sqlite3.Row
                return con.execute(sql, args).fetchall()
            except sqlite3.OperationalError as exc:
                if "no such table" in str(exc):     # the daemon is creating its ledger
                    return []
                raise
            finally:
                con.close()

    def passes(self, after: float = 0) -> list[sqlite3.Row]:
        return self.query("SELECT * FROM passes WHERE started_at > ? ORDER BY started_at",
                          after)

    def wait_passes(self, n: int, after: float, timeout: float = 30) -> list[sqlite3.Row]:
        """At least `n` passes started after `after`, every one complete."""
        got = self.pool.wait_for(lambda: len(self.passes(after)) >= n and self.passes(after),
                                 timeout, f"{n} passes", every=0.2)
        assert [p["status"] for p in got] == ["complete"] * len(got), [
            (p["status"], p["reason"]) for p in got]
        return got

    def half_passes(self) -> list[str]:
        """Every recorded pass whose child rows do not add up to its header's counts, or
        that has no end: none if every pass was written whole."""
        children = {"n_real_cycles": ("real_cycles", "first_pass"),
                    "n_shadow_matches": ("shadow_matches", "pass_uuid"),
                    "n_real_matches": ("real_matches", "pass_uuid"),
                    "n_submitters": ("submitters", "pass_uuid"),
                    "n_groups": ('"groups"', "pass_uuid"),
                    "n_comparisons": ("comparisons", "pass_uuid")}
        cols = ", ".join(f"(SELECT COUNT(*) FROM {t} c WHERE c.{k} = p.uuid) AS {n}_rows"
                         for n, (t, k) in children.items())
        bad = []
        for p in self.query(f"SELECT p.*, {cols} FROM passes p"):
            if p["finished_at"] is None or p["status"] not in ("complete", "partial", "failed"):
                bad.append(f"{p['uuid']}: status {p['status']}, finished_at {p['finished_at']}")
            bad += [f"{p['uuid']}: {n} {p[n]} but {p[n + '_rows']} rows" for n in children
                    if p[n] != p[n + "_rows"]]
        return bad


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


def process_start(pid: int) -> float:
    """When process `pid` started (epoch seconds)."""
    ticks = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19])
    btime = next(int(ln.split()[1]) for ln in Path("/proc/stat").read_text().splitlines()
                 if ln.startswith("btime "))
    return btime + ticks / os.sysconf("SC_CLK_TCK")


def flock_holders(path: Path) -> set[int]:
    """The pids holding a flock on `path` (/proc/locks)."""
    ino = str(path.stat().st_ino)
    pids = set()
    for line in Path("/proc/locks").read_text().splitlines():
        f = line.split()
        if len(f) >= 6 and f[1] == "FLOCK" and f[5].rsplit(":", 1)[-1] == ino:
            pids.add(int(f[4]))
    return pids


@pytest.fixture(scope="module")
def master_daemon(live_pool):
    """NEGOTIATOR_EXT added to the session pool's DAEMON_LIST for this module, running and
    Ready; taken out again (pool.reset(): the master stops it) at the end."""
    pool = live_pool
    pool.reset()
    scratch = Path(tempfile.mkdtemp(prefix="master-daemon-", dir=pool.root))
    scratch.chmod(0o755)
    d = MasterDaemon(pool, scratch)
    try:
        d.install()
        d.wait_ready()
        yield d
    finally:
        pid = int(d.who().get("NEGOTIATOR_EXT_PID") or 0)
        pool.reset()
        if pid:
            pool.wait_for(lambda: not alive(pid), 30, "the daemon to stop")
        shutil.rmtree(scratch, ignore_errors=True)


@pytest.fixture
def daemon(master_daemon):
    """The module's daemon, running (a test before may have left it off)."""
    d = master_daemon
    if d.who().get("NEGOTIATOR_EXT") != "Alive":
        d.pool.tool("condor_on", "-daemon", "NEGOTIATOR_EXT")
    d.wait_ready()
    return d


# ---- 1. started by the master, Ready, passes ----------------------------------------------

def test_the_master_starts_it_and_it_reports_ready(daemon):
    d, pool = daemon, daemon.pool
    t0 = time.time()
    pid = d.wait_ready()
    # the master's ready ad: it called set_ready_state("Ready") through CONDOR_INHERIT
    w = d.who()
    assert (w["NEGOTIATOR_EXT"], w["NEGOTIATOR_EXT_State"]) == ("Alive", "Ready")
    assert d.master_log_has(rf'Started process "{re.escape(str(d.program))}", pid and pgroup = {pid}\n')
    assert d.master_log_has("Setting ready state 'Ready' for NEGOTIATOR_EXT\n")
    # the master's child, as the pool user: the console script, run by its python
    status = Path(f"/proc/{pid}/status").read_text()
    assert re.search(rf"(?m)^PPid:\s+{pool.master.pid}$", status)
    uid = pool.user.pw_uid if pool.user else os.getuid()
    assert re.search(rf"(?m)^Uid:\s+{uid}\s+{uid}\s", status)
    assert str(d.program).encode() in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    # its ledger gets complete passes
    passes = d.wait_passes(2, t0)
    assert all(p["finished_at"] > p["started_at"] for p in passes)
    assert d.half_passes() == []
    # the master's ad in the collector: the daemon's start time
    since = process_start(pid)
    pool.wait_for(lambda: abs(int(pool.tool("condor_status", "-master", "-af",
                                            "NEGOTIATOR_EXT_StartTime").stdout.strip() or 0)
                              - since) <= 2, 15, "the master ad's NEGOTIATOR_EXT_StartTime")


# ---- 2. condor_reconfig -------------------------------------------------------------------

def _interval_gap(passes) -> float | None:
    """The time between the first two consecutive passes of which the second started at
    its interval: a pass the loop started as a real cycle started (the NegotiatorLog
    followed, `aligned_cycle`) comes earlier, and the interval counts from it."""
    for a, b in zip(passes, passes[1:]):
        if b["aligned_cycle"] is None:
            return b["started_at"] - a["started_at"]
    return None


def test_condor_reconfig_reloads_it_and_a_changed_interval_takes_effect(daemon):
    d, pool = daemon, daemon.pool
    pid = d.wait_ready()
    since = time.time() - 2.5 * INTERVAL
    before = d.pool.wait_for(lambda: _interval_gap(d.wait_passes(2, since)), 30,
                             "two passes an interval apart")
    assert abs(before - INTERVAL) < 0.4
    offset, t_reconfig = d.log_size(), time.time()
    try:
        pool.reconfig(CONF, d.config(interval=3), wait=0)
        lines = d.wait_log(offset, "configuration reloaded")
        assert lines.index("SIGHUP: reloading the configuration after the pass in flight") < \
            lines.index("configuration reloaded")
        assert d.master_log_has(rf"Sent SIGHUP to NEGOTIATOR_EXT \(pid {pid}\)")
        # the first pass logged after the reload runs at once, the next one 3 s later
        def first_reloaded():
            lines = d.log_since(offset)
            return next((ln.split()[1] for ln in lines[lines.index("configuration reloaded"):]
                         if ln.startswith("pass ")), None)
        uuid8 = pool.wait_for(first_reloaded, 10, "a pass after the reload", every=0.1)
        (first,) = [p for p in d.passes(t_reconfig) if p["uuid"].startswith(uuid8)]
        after = pool.wait_for(lambda: _interval_gap(
            d.wait_passes(2, first["started_at"] - 0.001)), 30, "two passes 3 s apart")
        assert abs(after - 3) < 0.4
        assert d.wait_ready() == pid                    # reloaded in place, not restarted
    finally:
        offset = d.log_size()
        d.install()                                     # back to INTERVAL
        d.wait_log(offset, "configuration reloaded")


# ---- 3. condor_off / condor_on ------------------------------------------------------------

def test_condor_off_stops_it_and_condor_on_starts_it_again(daemon):
    d, pool = daemon, daemon.pool
    pid = d.wait_ready()
    offset = d.log_size()
    pool.tool("condor_off", "-daemon", "NEGOTIATOR_EXT")
    pool.wait_for(lambda: not alive(pid), 20, "the daemon to stop")
    pool.wait_for(lambda: d.master_log_has(
        rf"The NEGOTIATOR_EXT \(pid {pid}\) exited with status 0\n"), 10, "the master's reaping")
    assert d.master_log_has(rf"Sent SIGTERM to NEGOTIATOR_EXT \(pid {pid}\)")
    lines = d.log_since(offset)
    assert "SIGTERM: stopping after the pass in flight" in lines
    assert lines[-1] == "negotiator-ext shadow daemon stopped"
    w = d.who()
    assert w["NEGOTIATOR_EXT"] != "Alive" and int(w.get("NEGOTIATOR_EXT_PID") or 0) == 0

    t_on = time.time()
    pool.tool("condor_on", "-daemon", "NEGOTIATOR_EXT")
    new = d.wait_ready(not_pid=pid)
    assert alive(new) and d.master_log_has(
        rf'Started process "{re.escape(str(d.program))}", pid and pgroup = {new}\n')
    d.wait_passes(1, t_on)


# ---- 4. kill -9: the master restarts it ---------------------------------------------------

def test_after_kill_9_the_master_restarts_it_and_passes_resume(daemon):
    d, pool = daemon, daemon.pool
    pid = d.wait_ready()
    t_kill = time.time()
    os.kill(pid, signal.SIGKILL)
    pool.wait_for(lambda: d.master_log_has(
        rf"The NEGOTIATOR_EXT \(pid {pid}\) died due to signal 9"), 10, "the master to see it")
    new = d.wait_ready(not_pid=pid)
    assert d.master_log_has(rf"restarting {re.escape(str(d.program))} in \d+ seconds")
    passes = d.wait_passes(2, t_kill)
    assert {p["started_at"] > t_kill for p in passes} == {True}
    assert d.half_passes() == []                       # the killed pass left nothing half-written
    assert d.wait_ready() == new


# ---- 5. SIGTERM during a pass -------------------------------------------------------------

def stop_mid_pass(d: MasterDaemon, stop) -> tuple[sqlite3.Row, list[str]]:
    """Run `stop` (a command after which the master sends the daemon SIGTERM) while a pass
    is in flight: the test holds the ledger's write lock, so the next pass waits to record
    itself (up to the ledger's 10 s lock timeout); once the daemon has logged the signal
    the lock is released. Checks that the pass finished whole and that the daemon then
    stopped; returns that pass and the daemon's log lines since `stop`."""
    pool = d.pool
    pid = d.wait_ready()
    d.wait_passes(1, 0)
    lock = d.state / "shadow.lock"
    last = d.passes()[-1]["started_at"]
    with as_pool_user(pool):
        con = sqlite3.connect(str(d.ledger), timeout=10, isolation_level=None)
        con.execute("BEGIN IMMEDIATE")                 # the ledger's write lock
    try:
        pool.wait_for(lambda: pid in flock_holders(lock), 3 * INTERVAL, "a pass to start",
                      every=0.05)
        time.sleep(1)                                  # it waits for the ledger
        assert pid in flock_holders(lock) and d.passes(last) == []
        offset, t_stop = d.log_size(), time.time()
        stop()
        d.wait_log(offset, "SIGTERM: stopping after the pass in flight", timeout=5)
        time.sleep(0.5)
        assert alive(pid) and pid in flock_holders(lock)   # still in its pass
        assert d.passes(last) == []                    # its record waits for the ledger
    finally:
        with as_pool_user(pool):
            if con.in_transaction:
                con.execute("ROLLBACK")
            con.close()
    pool.wait_for(lambda: not alive(pid), 20, "the daemon to stop")
    (p,) = d.passes(last)                              # that pass, and no other after it
    assert p["status"] == "complete", (p["status"], p["reason"])
    assert p["started_at"] < t_stop                    # it was in flight at the signal
    assert d.half_passes() == []
    lines = d.log_since(offset)
    i = lines.index("SIGTERM: stopping after the pass in flight")
    assert lines[i + 1].startswith(f"pass {p['uuid'][:8]} complete; ")
    assert lines[i + 2:] == ["negotiator-ext shadow daemon stopped"]
    pool.wait_for(lambda: d.master_log_has(
        rf"The NEGOTIATOR_EXT \(pid {pid}\) exited with status 0\n"), 10, "the master's reaping")
    assert d.master_log_has(rf"Sent SIGTERM to NEGOTIATOR_EXT \(pid {pid}\)")
    uid = pool.user.pw_uid if pool.user else os.getuid()
    assert [f for f in d.state.rglob("*") if f.lstat().st_uid != uid] == []
    return p, lines


def test_sigterm_from_condor_off_lets_the_pass_in_flight_finish(daemon):
    if not Path("/proc/locks").exists():
        pytest.skip("no /proc/locks to see a pass in flight")
    stop_mid_pass(daemon, lambda: daemon.pool.tool("condor_off", "-daemon", "NEGOTIATOR_EXT"))


def test_condor_off_master_stops_it_after_the_pass_in_flight(live_pool):
    """The whole master shut down, on a second small pool of its own (the session's pool
    is shared with the other live tests)."""
    if not Path("/proc/locks").exists():
        pytest.skip("no /proc/locks to see a pass in flight")
    from livepool import start_pool
    pool = start_pool(live_pool.release)
    try:
        scratch = Path(tempfile.mkdtemp(prefix="master-daemon-", dir=pool.root))
        scratch.chmod(0o755)
        d = MasterDaemon(pool, scratch)
        d.install()
        d.wait_ready()
        stop_mid_pass(d, lambda: pool.tool("condor_off", "-master"))
        assert pool.master.wait(timeout=30) == 0       # and the master after it
    finally:
        pool.stop()
        shutil.rmtree(pool.root, ignore_errors=True)


# ---- 6. a frozen collector ---------------------------------------------------------------

def test_beside_a_frozen_collector_it_stops_within_its_stop_timeout(daemon):
    """The collector frozen (SIGSTOP: connections taken, never answered) under the
    daemon with NEGOTIATOR_EXT_STOP_TIMEOUT = 3: each pass waits one collector call of
    at most 3 s and fails; condor_off (sent to the master by its address) then stops it
    within that bound, whatever call is in flight, and every recorded pass is whole.
    (Last in the module: its failed passes stay in the module daemon's ledger, where the
    tests before it expect complete passes.)"""
    d, pool = daemon, daemon.pool
    pid = d.wait_ready()
    offset = d.log_size()
    collector = pool.daemon_pid("collector")
    try:
        # (a pass in flight at the freeze may be reading the negotiator's configuration
        # again after this reconfig, from a negotiator itself waiting on the frozen
        # collector: that read is bounded by the snapshot timeout, kept short here)
        pool.reconfig(CONF, d.config() + "NEGOTIATOR_EXT_STOP_TIMEOUT = 3\n"
                      "NEGOTIATOR_EXT_SNAPSHOT_TIMEOUT = 8\n", wait=0)
        d.wait_log(offset, "configuration reloaded")
        t0 = time.time()
        os.kill(collector, signal.SIGSTOP)
        try:
            # (a pass in flight may be past its own collector calls, its worker asking
            # the collector where the schedds are: bounded the same)
            try:
                failed = pool.wait_for(lambda: d.query(
                    "SELECT * FROM passes WHERE started_at > ? AND status = 'failed'", t0),
                    30, "a pass failed on the frozen collector", every=0.2)
            except TimeoutError as exc:     # what the daemon did meanwhile, to tell why
                passes = [(r["started_at"] - t0, r["status"]) for r in d.query(
                    "SELECT started_at, status FROM passes WHERE started_at > ?", t0 - 10)]
                raise TimeoutError(f"{exc}; passes since (start - t0, status): {passes}; "
                                   "its log since:\n" + "\n".join(d.log_since(offset))) from None
            time.sleep(1)                       # the next pass waits on it
            t = time.monotonic()
            pool.master_tool("condor_off", "-daemon", "NEGOTIATOR_EXT")
            pool.wait_for(lambda: not alive(pid), 30, "the daemon to stop", every=0.1)
            stopped_in = time.monotonic() - t
        finally:
            os.kill(collector, signal.SIGCONT)
    finally:
        pool.reconfig(CONF, d.config(), wait=0)     # (the next test's fixture starts it)
    assert stopped_in < 6, stopped_in               # 3 s, the signal's way, the pass's end
    assert failed[0]["reason"].endswith(
        "did not answer within 3 s (NEGOTIATOR_EXT_STOP_TIMEOUT: a stop waits for the call "
        "in flight); not asked again in this pass"), failed[0]["reason"]
    assert failed[0]["finished_at"] - failed[0]["started_at"] < 5
    assert d.half_passes() == []
