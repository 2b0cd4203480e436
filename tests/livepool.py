"""A personal HTCondor pool of real daemons on loopback, for the live tests (`-m live`).

The daemons come from an HTCondor install found through `NEGOTIATOR_EXT_TEST_HTCONDOR`
(its release directory: `bin/`, `sbin/`, `lib/`) or, without it, through `condor_master`
on `PATH`. `find_release()` returns None when there is none, and the live tests skip.

One pool serves the whole test session: a scratch directory with its config, a free
loopback port for the collector, the master started as an unprivileged user (the schedd
refuses jobs owned by root, so when the tests run as root the pool and every
`condor_submit` run as the user `negotiator-ext-test`, created when missing). Tests
change its configuration with `reconfig()` (a file in `config.d`, then
`condor_reconfig`) rather than restarting it, and put it back with `reset()`.

Jobs are `/bin/sh` loops that end when the test touches their flag file
(`finish(cluster, proc)`), so a test decides exactly when a job finishes.

`ProductionPool` is the same pool configured like production (PRODUCTION_CONFIG):
authentication, encryption and integrity required, FS and IDTOKENS, every ALLOW_* naming
identities only, and scoped tokens made with `condor_token_create` (`mint`). Its daemons
authenticate to each other over FS as the pool's user, which holds every level; so do
the tools `tool()` runs as root (HTCondor's tools run by root authenticate over FS as
CONDOR_IDS, the pool's user). A client that must be one identity and nothing else runs
with `client_env(token_dir)`: IDTOKENS only, that token alone, no signing key.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import random
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Callable, Iterable

ENV_VAR = "NEGOTIATOR_EXT_TEST_HTCONDOR"
TEST_USER = "negotiator-ext-test"
SKIP_REASON = (f"no HTCondor install: set {ENV_VAR}=<release dir> (with sbin/condor_master) "
               "or put condor_master on PATH to run the live tests")


def find_release() -> Path | None:
    """The release directory of an HTCondor install, or None."""
    env = os.environ.get(ENV_VAR)
    if env:
        p = Path(env)
        return p if (p / "sbin" / "condor_master").exists() else None
    master = shutil.which("condor_master")
    if master:
        return Path(master).resolve().parent.parent
    return None


def free_port() -> int:
    """A loopback port free now, for a daemon to bind in a moment. Not one the kernel hands
    out itself (bind to port 0, the local port of an outgoing connection: 32768-60999 on
    Linux), which any daemon of any pool on this host may take in that moment; and, under
    pytest-xdist, from a range of this worker's own (gw0: 20000-21499, gw1: 21500-22999,
    ...), so that the pools of two workers never pick the same one."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    n = int(worker[2:]) if worker[2:].isdigit() else 0
    low = 20000 + (n % 8) * 1500
    for port in random.sample(range(low, low + 1500), 1500):
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


BASE_CONFIG = """\
RELEASE_DIR = {release}
LOCAL_DIR = {local}
LOG = $(LOCAL_DIR)/log
SPOOL = $(LOCAL_DIR)/spool
EXECUTE = $(LOCAL_DIR)/execute
LOCK = $(LOCAL_DIR)/lock
RUN = $(LOCAL_DIR)/run
LOCAL_CONFIG_FILE =
LOCAL_CONFIG_DIR = $(LOCAL_DIR)/config.d
CONDOR_IDS = {uid}.{gid}
CONDOR_ADMIN =
MAIL = /bin/true

CONDOR_HOST = 127.0.0.1
COLLECTOR_HOST = 127.0.0.1:{port}
NETWORK_INTERFACE = 127.0.0.1
BIND_ALL_INTERFACES = False
USE_SHARED_PORT = False
UID_DOMAIN = negotiator-ext.test
FILESYSTEM_DOMAIN = negotiator-ext.test
DAEMON_LIST = MASTER, COLLECTOR, NEGOTIATOR, SCHEDD, STARTD

SEC_DEFAULT_AUTHENTICATION_METHODS = FS, CLAIMTOBE
SEC_CLIENT_AUTHENTICATION_METHODS = FS, CLAIMTOBE
ALLOW_READ = *
ALLOW_WRITE = *
ALLOW_DAEMON = *
ALLOW_NEGOTIATOR = *
ALLOW_ADMINISTRATOR = *
ALLOW_ADVERTISE_STARTD = *
ALLOW_ADVERTISE_SCHEDD = *
ALLOW_ADVERTISE_MASTER = *

# fast, predictable cycles: the negotiator runs on its own interval only
NEGOTIATOR_INTERVAL = {negotiator_interval}
NEGOTIATOR_MIN_INTERVAL = 1
NEGOTIATOR_CYCLE_DELAY = 1
SCHEDD_INTERVAL = 2
SCHEDD_MIN_INTERVAL = 1
UPDATE_INTERVAL = 2
STARTER_UPDATE_INTERVAL = 2
SCHEDD_SEND_RESCHEDULE = False
NEGOTIATOR_MATCH_LOG = $(LOG)/MatchLog
NEGOTIATOR_DEBUG = D_FULLDEBUG
MAX_NEGOTIATOR_LOG = 100000000
CLAIM_WORKLIFE = 0
MATCH_TIMEOUT = 10
JOB_START_DELAY = 0
JOB_START_COUNT = 100
MASTER_UPDATE_INTERVAL = 5
MASTER_BACKOFF_CONSTANT = 1
MASTER_NEW_BINARY_RESTART = NEVER

# the execute side: 4 static 1-core slots and a 4-core partitionable one
NUM_CPUS = 8
MEMORY = 16384
SLOT_TYPE_1 = cpus=1, memory=1024
NUM_SLOTS_TYPE_1 = 4
SLOT_TYPE_2 = cpus=4, memory=8192
SLOT_TYPE_2_PARTITIONABLE = True
NUM_SLOTS_TYPE_2 = 1
START = True
SUSPEND = False
PREEMPT = False
KILL = False
WANT_SUSPEND = False
WANT_VACATE = False
STARTD_NOCLAIM_SHUTDOWN = 0
RUNBENCHMARKS = False
STARTD_DETECT_GPUS =
HIBERNATE_CHECK_INTERVAL = 0

# two accounting groups, with surplus
GROUP_NAMES = group_a, group_b
GROUP_QUOTA_group_a = 4
GROUP_QUOTA_group_b = 4
GROUP_ACCEPT_SURPLUS = True
"""


def schedds_config(local: Path, schedds: int) -> str:
    """The master's schedds beyond its own: SCHEDD2 ... SCHEDD<n>, each the same binary
    with `-local-name scheddN`, and everything a schedd writes its own (under
    LOCAL_DIR/scheddN, its log in LOG)."""
    extra = [f"SCHEDD{i}" for i in range(2, schedds + 1)]
    if not extra:
        return ""
    lines = ["# bench_real_pool: the jobs spread over several schedds",
             f"DAEMON_LIST = $(DAEMON_LIST), {', '.join(extra)}",
             f"DC_DAEMON_LIST = + {', '.join(extra)}",
             # the master's own schedd named too (schedd1@<host>): `condor_submit -name`
             # takes a name without an @ for a host
             "SCHEDD_NAME = schedd1"]
    for d in extra:
        n = d.lower()
        own = local / n
        p = f"{d}."           # LOCALNAME.PARAM: this schedd's own value
        lines += [f"{d} = $(SCHEDD)", f"{d}_ARGS = -local-name {n}",
                  f"{p}SCHEDD_NAME = {n}",
                  f"{p}SPOOL = {own}/spool",
                  f"{p}LOCK = {own}/lock",
                  f"{p}SCHEDD_LOG = $(LOG)/SchedLog.{n}",
                  f"{p}SCHEDD_ADDRESS_FILE = {own}/spool/.schedd_address",
                  f"{p}SCHEDD_DAEMON_AD_FILE = {own}/spool/.schedd_classad",
                  f"{p}JOB_QUEUE_LOG = {own}/spool/job_queue.log",
                  f"{p}HISTORY = {own}/spool/history"]
    return "\n".join(lines) + "\n"



class LivePool:
    """A running personal pool. `env` is the environment every HTCondor tool (and our own
    CLI) is run with: CONDOR_CONFIG pointing at the pool's config. `schedds`: how many
    schedds the master runs (its own and SCHEDD2 ..., `schedds_config`)."""

    def __init__(self, release: Path, root: Path, *, negotiator_interval: int = 8,
                 schedds: int = 1):
        self.schedds = schedds
        self.release = release
        self.root = root
        self.local = root / "local"
        self.config_file = root / "condor_config"
        self.port = free_port()
        self.negotiator_interval = negotiator_interval
        self.user = self._pool_user()
        self.env = dict(os.environ)
        for k in list(self.env):
            if k.upper().startswith("_CONDOR_"):
                del self.env[k]
        self.env["CONDOR_CONFIG"] = str(self.config_file)
        self.env["PATH"] = f"{release / 'bin'}:{release / 'sbin'}:{self.env.get('PATH', '')}"
        self.master: subprocess.Popen | None = None
        self.flags = self.local / "flags"

    # -- who runs it ---------------------------------------------------------------------

    @staticmethod
    def _pool_user() -> pwd.struct_passwd | None:
        """The unprivileged user the pool runs as when the tests run as root (else None:
        the pool runs as the current user)."""
        if os.geteuid() != 0:
            return None
        try:
            return pwd.getpwnam(TEST_USER)
        except KeyError:
            # not check=True: another pytest-xdist worker, starting its own pool, may
            # create the user between the lookup and this (useradd then exits 9)
            subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/bin/sh",
                            TEST_USER], capture_output=True)
            return pwd.getpwnam(TEST_USER)

    def as_user(self, argv: list[str]) -> list[str]:
        if self.user is None:
            return argv
        return ["setpriv", f"--reuid={self.user.pw_uid}", f"--regid={self.user.pw_gid}",
                "--init-groups", "--"] + argv

    # -- start and stop --------------------------------------------------------------------

    def write_config(self) -> None:
        uid = self.user.pw_uid if self.user else os.getuid()
        gid = self.user.pw_gid if self.user else os.getgid()
        for d in ("log", "spool", "execute", "lock", "run", "config.d", "flags"):
            (self.local / d).mkdir(parents=True, exist_ok=True)
        self.config_file.write_text(BASE_CONFIG.format(
            release=self.release, local=self.local, uid=uid, gid=gid, port=self.port,
            negotiator_interval=self.negotiator_interval))
        if self.schedds > 1:
            (self.local / "config.d" / "70-schedds").write_text(
                schedds_config(self.local, self.schedds))
            for i in range(2, self.schedds + 1):
                for sub in ("spool", "lock"):
                    (self.local / f"schedd{i}" / sub).mkdir(parents=True, exist_ok=True)
        if self.user is not None:
            for p in [self.root, *self.root.rglob("*")]:
                os.chown(p, uid, gid)
        os.chmod(self.root, 0o755)
        os.chmod(self.flags, 0o777)

    def start(self, timeout: float = 60) -> None:
        self.write_config()
        self.master = subprocess.Popen(
            self.as_user([str(self.release / "sbin" / "condor_master"), "-f"]),
            env=self.env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True)
        try:
            self.wait_for(lambda: self.daemons_up(), timeout, "the pool's daemons to start")
        except TimeoutError as exc:
            # what was up, and the master's last words, before the pool's directory goes
            raise TimeoutError(f"{exc}: {self.startup_report()}") from None

    def startup_report(self) -> str:
        """One line of what a pool that did not start showed: the daemons the collector
        had, whether the master still ran, and the last lines of its log."""
        kinds = sorted(set(self.tool("condor_status", "-any", "-af", "MyType",
                                     check=False, timeout=20).stdout.split()))
        alive = self.master is not None and self.master.poll() is None
        log = self.log_dir / "MasterLog"
        tail = log.read_text(errors="replace").splitlines()[-12:] if log.exists() else []
        return (f"collector had {', '.join(kinds) or 'nothing'}; master "
                f"{'running' if alive else 'gone'}; MasterLog ends: " + " | ".join(tail))

    def schedd_names(self) -> list[str]:
        """The schedds' names as the collector has them (sorted)."""
        out = self.tool("condor_status", "-schedd", "-af", "Name", check=False).stdout
        return sorted(set(out.split()))

    def daemons_up(self) -> bool:
        out = self.tool("condor_status", "-any", "-af", "MyType", check=False).stdout
        kinds = set(out.split())
        return {"Collector", "Negotiator", "Scheduler", "Machine"} <= kinds

    def stop(self) -> None:
        if self.master is None:
            return
        with contextlib.suppress(Exception):
            self.tool("condor_off", "-master", check=False, timeout=20)
        try:
            self.master.wait(timeout=30)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.master.pid, signal.SIGKILL)
            self.master.wait(timeout=10)
        # the daemons of its process group, if any outlived the master
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.master.pid, signal.SIGKILL)
        self.master = None

    # -- tools -----------------------------------------------------------------------------

    def tool(self, name: str, *args: str, check: bool = True, timeout: float = 60,
             user: bool = False, input: str | None = None) -> subprocess.CompletedProcess:
        """Run an HTCondor tool of the install against this pool."""
        exe = self.release / "bin" / name
        if not exe.exists():
            exe = self.release / "sbin" / name
        argv = [str(exe), *args]
        if user:
            argv = self.as_user(argv)
        proc = subprocess.run(argv, env=self.env, capture_output=True, text=True,
                              timeout=timeout, input=input)
        if check and proc.returncode != 0:
            raise RuntimeError(f"{name} {' '.join(args)} failed ({proc.returncode}): "
                               f"{proc.stderr.strip() or proc.stdout.strip()}")
        return proc

    def wait_for(self, cond: Callable[[], object], timeout: float, what: str,
                 every: float = 0.5):
        deadline = time.monotonic() + timeout
        while True:
            got = cond()
            if got:
                return got
            if time.monotonic() > deadline:
                raise TimeoutError(f"timed out after {timeout:g} s waiting for {what}")
            time.sleep(every)

    @property
    def collector(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def log_dir(self) -> Path:
        return self.local / "log"

    # -- configuration ---------------------------------------------------------------------

    def reconfig(self, name: str, text: str, *, wait: float = 3.0) -> None:
        """Add (or replace) `config.d/<name>` and tell every daemon to re-read it."""
        path = self.local / "config.d" / name
        path.write_text(text)
        if self.user is not None:
            os.chown(path, self.user.pw_uid, self.user.pw_gid)
        self.tool("condor_reconfig")
        time.sleep(wait)

    def reset(self) -> None:
        """Remove every test's config.d file and every job; the accountant is kept."""
        changed = False
        for p in (self.local / "config.d").glob("*"):
            p.unlink()
            changed = True
        self.remove_all_jobs()
        if changed:
            self.tool("condor_reconfig")
            time.sleep(2)
        # every daemon's ad in the collector again: a test that restarted the collector
        # leaves it without the schedd's until the schedd next advertises, and a loop's
        # capture then sees no schedd at all
        self.wait_for(self.daemons_up, 90, "the pool's daemons' ads in the collector")

    # -- jobs ------------------------------------------------------------------------------

    def submit(self, *, count: int, group: str | None = None, user: str = "alice",
               request_cpus: int = 1, extra: Iterable[str] = (),
               schedd: str | None = None) -> int:
        """Submit `count` jobs that run until `finish()` (to the schedd named `schedd`,
        one of `schedd_names()`); returns the cluster id."""
        lines = [
            "universe = vanilla",
            "executable = /bin/sh",
            f"arguments = \"-c 'while [ ! -e {self.flags}/$(Cluster).$(Process) ]; do "
            "sleep 0.2; done'\"",
            "transfer_executable = false",
            "should_transfer_files = NO",
            f"initialdir = {self.flags}",
            "log = /dev/null",
            f"request_cpus = {request_cpus}",
            "request_memory = 64",
            "request_disk = 1024",
        ]
        if group is not None:
            lines += [f"accounting_group = {group}", f"accounting_group_user = {user}"]
        lines += list(extra)
        lines.append(f"queue {count}")
        name = ["-name", schedd] if schedd is not None else []
        out = self.tool("condor_submit", "-terse", *name, "-", user=True,
                        input="\n".join(lines) + "\n").stdout
        m = re.match(r"\s*(\d+)\.", out)
        if not m:
            raise RuntimeError(f"condor_submit printed {out!r}")
        return int(m.group(1))

    def finish(self, cluster: int, proc: int | None = None) -> None:
        """Let job cluster.proc (or every job of the cluster) end on its own."""
        ids = [proc] if proc is not None else [
            int(p) for p in self.tool("condor_q", "-allusers", str(cluster), "-af", "ProcId"
                                      ).stdout.split()]
        for p in ids:
            f = self.flags / f"{cluster}.{p}"
            f.touch()
            os.chmod(f, 0o666)

    def remove_all_jobs(self) -> None:
        # no -forcex: a job forced out of the queue leaves its claim busy until its lease
        # ends; a removed job's claim is released as the job leaves
        self.tool("condor_rm", "-all", check=False, user=True)
        self.wait_for(lambda: not self.tool("condor_q", "-allusers", "-af", "ClusterId",
                                            check=False).stdout.strip(),
                      60, "the queue to empty")
        self.wait_for(self.slots_free, 60, "every slot to be free")

    def slots_free(self) -> bool:
        """Every slot Unclaimed in the collector, no dynamic slot left."""
        rows = [ln.split() for ln in self.tool("condor_status", "-af", "Name", "State",
                                               check=False).stdout.splitlines() if ln.strip()]
        return bool(rows) and all(st == "Unclaimed" and "_" not in name.split("@")[0]
                                  for name, st in rows)

    def submitters(self) -> dict[str, int]:
        """The collector's submitter ads: name -> IdleJobs."""
        out = self.tool("condor_status", "-submitters", "-af", "Name", "IdleJobs",
                        check=False).stdout
        return {n: int(k) for n, k in (ln.split() for ln in out.splitlines() if ln.strip())}

    def jobs(self, *attrs: str, constraint: str = "true") -> list[list[str]]:
        out = self.tool("condor_q", "-allusers", "-constraint", constraint, "-af:t", *attrs
                        ).stdout
        return [ln.split("\t") for ln in out.splitlines() if ln.strip()]

    def master_tool(self, name: str, *args: str, **kw) -> subprocess.CompletedProcess:
        """condor_on/off/reconfig sent to the master by its address file, so that it works
        while the collector knows no daemon (not condor_restart: sent by address, it
        restarts the master itself)."""
        addr = (self.log_dir / ".master_address").read_text().splitlines()[0].strip()
        return self.tool(name, "-addr", addr, *args, **kw)

    def daemon_pid(self, daemon: str) -> int:
        """The pid of the pool's newest `daemon` (e.g. "schedd"), from the MasterLog's
        'Started DaemonCore process ".../condor_<daemon>", pid and pgroup = N' lines."""
        text = (self.log_dir / "MasterLog").read_text(errors="replace")
        pids = re.findall(rf'Started DaemonCore process "[^"]*condor_{daemon}", pid and '
                          r"pgroup = (\d+)", text)
        if not pids:
            raise RuntimeError(f"the MasterLog names no condor_{daemon}")
        return int(pids[-1])

    def negotiator_address(self) -> str:
        """The negotiator's MyAddress as the collector has it ("" when it has none)."""
        return self.tool("condor_status", "-negotiator", "-af", "MyAddress",
                         check=False).stdout.strip()

    def unstick_negotiator(self, timeout: float = 90) -> None:
        """Kill -9 the negotiator (one stuck expanding a circular macro answers no command
        and handles no signal but SIGKILL) and wait until the master has started a new one
        and the collector has its ad, at a new address."""
        old_pid, old_addr = self.daemon_pid("negotiator"), self.negotiator_address()
        with contextlib.suppress(ProcessLookupError):
            os.kill(old_pid, signal.SIGKILL)
        self.wait_for(lambda: self.daemon_pid("negotiator") != old_pid, timeout,
                      "the master to start a new negotiator")
        self.wait_for(lambda: self.negotiator_address() not in ("", old_addr), timeout,
                      "the new negotiator's ad")

    def children(self, pid: int) -> list[int]:
        """The pids of the processes whose parent is `pid` (from /proc)."""
        out = []
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                fields = stat.read_text().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue
            if fields[1:2] == [str(pid)]:
                out.append(int(stat.parent.name))
        return out

    def negotiator_config_readers(self, pid: int) -> list[int]:
        """The children of `pid` (a pass of ours) reading a negotiator's config through
        RemoteParam (the `_param_dump --remote` processes without `--schedd`)."""
        out = []
        for child in self.children(pid):
            try:
                argv = Path(f"/proc/{child}/cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if b"--remote" in argv and b"--schedd" not in argv:
                out.append(child)
        return out

    # -- the negotiator's logs -------------------------------------------------------------

    def cycles_finished(self) -> int:
        """How many negotiation cycles the NegotiatorLog shows finished so far."""
        log = self.log_dir / "NegotiatorLog"
        if not log.exists():
            return 0
        return log.read_bytes().count(b"Finished Negotiation Cycle")

    def wait_cycle(self, timeout: float = 60, after: int | None = None) -> int:
        """Wait until one more negotiation cycle has finished (more than `after`, default
        the count now); returns the new count."""
        n = self.cycles_finished() if after is None else after
        return self.wait_for(lambda: self.cycles_finished() > n and self.cycles_finished(),
                             timeout, "a negotiation cycle", every=0.2)

    def negotiate_now(self, timeout: float = 60) -> int:
        """One negotiation cycle now (condor_reschedule to the negotiator), waited for.
        The cycles are counted before the command: on a busy machine a short cycle can
        finish before the tool that asked for it has exited."""
        n = self.cycles_finished()
        self.tool("condor_reschedule", "-addr", self.negotiator_address())
        return self.wait_cycle(timeout, after=n)


def loop_passes(loop, passes: int, timeout: float, between=None) -> list:
    """Run a shadow.ShadowLoop in this thread until it has made `passes` passes (or
    `timeout` seconds have gone: never a hang); `between(records)` after each pass.
    The passes' records."""
    import threading
    stop = threading.Event()
    recs: list = []

    def on_pass(rec):
        recs.append(rec)
        if between is not None:
            between(recs)
        if len(recs) >= passes:
            stop.set()

    timer = threading.Timer(timeout, stop.set)
    timer.start()
    try:
        loop.run_forever(stop, on_pass)
    finally:
        timer.cancel()
    return recs


def start_pool(release: Path, *, pool_class: type[LivePool] | None = None,
               **kw) -> LivePool:
    root = Path(tempfile.mkdtemp(prefix="negext-pool-"))
    pool = (pool_class or LivePool)(release, root, **kw)
    try:
        pool.start()
    except BaseException:
        pool.stop()
        shutil.rmtree(root, ignore_errors=True)
        raise
    return pool


# ---- a pool configured like production ---------------------------------------------------

DOMAIN = "negotiator-ext.test"      # the pools' UID_DOMAIN: every identity ends in @DOMAIN

# what the production-like pool adds to BASE_CONFIG: every connection authenticated
# (FS for the local tools and the daemons, which all run on this host as the pool's
# user; IDTOKENS for the identities the tests play), encrypted and integrity-checked, and
# every authorization level granted to named identities only. {daemons} is the daemons'
# FS identity; each {level} is the identities granted that level beside the daemons.
PRODUCTION_CONFIG = """
# -- production-like security (tests/livepool.py ProductionPool) --
SEC_DEFAULT_AUTHENTICATION = REQUIRED
SEC_DEFAULT_ENCRYPTION = REQUIRED
SEC_DEFAULT_INTEGRITY = REQUIRED
SEC_DEFAULT_AUTHENTICATION_METHODS = FS, IDTOKENS
SEC_CLIENT_AUTHENTICATION_METHODS = FS, IDTOKENS
SEC_PASSWORD_DIRECTORY = $(LOCAL_DIR)/passwords.d
SEC_TOKEN_SYSTEM_DIRECTORY = $(LOCAL_DIR)/tokens.d
ALLOW_READ = {daemons}{read}
ALLOW_WRITE = {daemons}{write}
ALLOW_DAEMON = {daemons}
COLLECTOR.ALLOW_DAEMON = {daemons}{collector_daemon}
ALLOW_NEGOTIATOR = {daemons}
ALLOW_ADMINISTRATOR = {daemons}
NEGOTIATOR.ALLOW_ADMINISTRATOR = {daemons}{negotiator_administrator}
ALLOW_CONFIG = {daemons}
ALLOW_OWNER = {daemons}
ALLOW_ADVERTISE_STARTD = {daemons}
ALLOW_ADVERTISE_SCHEDD = {daemons}
ALLOW_ADVERTISE_MASTER = {daemons}
"""


class ProductionPool(LivePool):
    """A LivePool configured like a production pool (PRODUCTION_CONFIG): authentication,
    encryption and integrity required, each level granted to named identities only.

    `grants` names who holds what beside the daemons, as {level: [user, ...]} (users
    without "@DOMAIN"), with these levels: "READ", "WRITE" (everywhere), "DAEMON" at the
    collector only ("COLLECTOR.DAEMON") and "ADMINISTRATOR" at the negotiator only
    ("NEGOTIATOR.ADMINISTRATOR"). The tools run by `tool()` authenticate with FS as the
    daemons' user (root's FS identity is the pool user's, see the reference notes), so
    they hold every level; a client that must be one identity only gets `client_env()`."""

    LEVELS = ("READ", "WRITE", "COLLECTOR.DAEMON", "NEGOTIATOR.ADMINISTRATOR")

    def __init__(self, release: Path, root: Path, *, grants: dict[str, list[str]],
                 **kw):
        super().__init__(release, root, **kw)
        unknown = set(grants) - set(self.LEVELS)
        if unknown:
            raise ValueError(f"levels {sorted(unknown)}: not one of {self.LEVELS}")
        self.grants = grants
        self.tokens = root / "tokens"          # one directory per token, root's own
        self.no_keys = root / "no-keys"        # an empty directory: no signing key there

    @property
    def daemon_identity(self) -> str:
        name = self.user.pw_name if self.user is not None else pwd.getpwuid(os.getuid()).pw_name
        return f"{name}@{DOMAIN}"

    def write_config(self) -> None:
        super().write_config()
        for d in ("passwords.d", "tokens.d"):
            (self.local / d).mkdir(mode=0o700, exist_ok=True)
            if self.user is not None:
                os.chown(self.local / d, self.user.pw_uid, self.user.pw_gid)

        def beside(level: str) -> str:
            return "".join(f", {u}@{DOMAIN}" for u in self.grants.get(level, ()))

        with open(self.config_file, "a") as f:
            f.write(PRODUCTION_CONFIG.format(
                daemons=self.daemon_identity, read=beside("READ"), write=beside("WRITE"),
                collector_daemon=beside("COLLECTOR.DAEMON"),
                negotiator_administrator=beside("NEGOTIATOR.ADMINISTRATOR")))
        for d in (self.tokens, self.no_keys):
            d.mkdir(mode=0o700, exist_ok=True)

    def start(self, timeout: float = 60) -> None:
        super().start(timeout)
        # the collector makes the pool signing key at its first start
        self.wait_for(lambda: (self.local / "passwords.d" / "POOL").exists(), timeout,
                      "the pool signing key")

    def mint(self, user: str, *levels: str, lifetime: int = 3600) -> Path:
        """A token for `user@DOMAIN` limited to `levels` (none: unlimited, bounded only by
        the ALLOW lists), made with condor_token_create from the pool signing key, alone in
        a directory of its own: that directory."""
        d = self.tokens / "-".join([user, *levels]).lower()
        d.mkdir(mode=0o700, exist_ok=True)
        args = ["-identity", f"{user}@{DOMAIN}", "-lifetime", str(lifetime)]
        for level in levels:
            args += ["-authz", level]
        # as the pool's user, who owns the key: root is refused a key another user owns
        # ("Failed to read file .../POOL securely")
        token = self.tool("condor_token_create", *args, user=True).stdout.strip()
        (d / "token").write_text(token + "\n")
        os.chmod(d / "token", 0o600)
        return d

    def client_env(self, token_dir: Path) -> dict[str, str]:
        """The environment of a client that is the token's identity and nothing else:
        IDTOKENS only (no FS, through which root is the daemons' user), the token directory
        holding that one token, and no signing key it could mint itself another with."""
        env = dict(self.env)
        env.update({
            "_CONDOR_SEC_CLIENT_AUTHENTICATION_METHODS": "IDTOKENS",
            "_CONDOR_SEC_TOKEN_DIRECTORY": str(token_dir),
            "_CONDOR_SEC_TOKEN_SYSTEM_DIRECTORY": str(self.no_keys),
            "_CONDOR_SEC_PASSWORD_DIRECTORY": str(self.no_keys),
            "_CONDOR_SEC_PASSWORD_FILE": str(self.no_keys / "POOL"),
            "_CONDOR_SEC_TOKEN_POOL_SIGNING_KEY_FILE": str(self.no_keys / "POOL"),
        })
        return env


def start_production_pool(release: Path, **kw) -> ProductionPool:
    return start_pool(release, pool_class=ProductionPool, **kw)
