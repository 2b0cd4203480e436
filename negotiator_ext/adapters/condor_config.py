"""HTCondor configuration through HTCondor's own config system.

`load_config(path)` points CONDOR_CONFIG at `path`, calls `htcondor2.reload_config()` and
reads `htcondor2.param` (subsystem NEGOTIATOR, so `NEGOTIATOR.<knob>` overrides apply),
then types the result into a `NegotiatorConfig`. The bindings run in a child process: a
malformed config file makes reload_config() end the process it runs in, and the loaded
config is process-global state that must not leak between snapshots.

A config file that is not this host's own (a snapshot's `config`, a `--config FILE`) comes
from elsewhere and is read as data: config_guard checks it first, and the child reads a
private copy of the checked bytes through a root config that includes it and then resets
the knobs HTCondor would act on while reading (config_guard.NEUTRALIZED), in an
environment that holds nothing of this host's. Every read has a time and a memory limit.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import OrderedDict
from pathlib import Path

from ..core.config import NegotiatorConfig, ext_knobs
from ..errors import InputError
from . import config_guard


LOCAL = "<local>"

# Every config read: HTCondor's reader in the child gets this long and this much address
# space (a circular macro spins or grows without end inside HTCondor).
CONFIG_READ_TIMEOUT = 20.0              # seconds
CONFIG_READ_MEMORY = 2 * 1024 ** 3      # bytes (RLIMIT_AS)

# What of this process's environment the child reading a config from elsewhere keeps:
# what Python and the loader need to start it (`$ENV(NAME)` sees only these).
_CHILD_ENV = ("PYTHONPATH", "PYTHONHOME", "LD_LIBRARY_PATH")
_SENTINEL = "_NEGOTIATOR_EXT_ROOT_READ"
_PLAIN_PATH = re.compile(r"[A-Za-z0-9_./+,@%=-]+")   # held in HTCondor config text as-is
_VALUE_OK = re.compile(r"[^\s$\\\x00-\x1f\x7f](?:[^$\\\x00-\x1f\x7f]*[^\s$\\\x00-\x1f\x7f])?")

# The knobs of the files read as data (and HTCondor's defaults) that this process read
# last, by what their reading depends on (`_ReadMemo.key`): HTCondor's reader is a new
# interpreter each time (about 0.15-0.3 s), and the same text, read in the same
# environment (and from the same directory, where it names CONFIG_ROOT), gives the same
# knobs.
_READ_MEMO_SIZE = 16


def _source(path: str | Path | None) -> str:
    """How errors name the configuration `path` stands for."""
    if path == LOCAL:
        return os.environ.get("CONDOR_CONFIG", "the local HTCondor configuration")
    return str(path) if path is not None else "<HTCondor defaults>"


def read_params(path: str | Path | None) -> tuple[dict, dict]:
    """Every knob HTCondor knows for config file `path` (None: HTCondor's defaults only;
    LOCAL: this host's own configuration, as every HTCondor tool here finds it).

    A file that is not this host's own configuration (the one CONDOR_CONFIG names) is read
    as data (module docstring, config_guard). Returns (params, raw): typed values as
    htcondor2.param returns them, and the text of the typed ones.
    """
    return ConfigRead(path).params()


def _text_key(data: bytes, config_root: Path) -> tuple | None:
    """What the knobs of config text `data`, read from directory `config_root`, depend
    on: the text less the comment lines it starts with (a capture's header names its
    time; `_header_comment`), and the directory for a text that names CONFIG_ROOT (else
    the knobs differ by CONFIG_ROOT alone). None when it cannot be kept: too large for
    the reader, drawing $RANDOM_INTEGER/$RANDOM_CHOICE, or in a directory HTCondor
    cannot be told as CONFIG_ROOT (it is then the private copy's, new each read)."""
    low = data.lower()
    if (len(data) > config_guard.MAX_CONFIG_BYTES or b"$random" in low
            or not _VALUE_OK.fullmatch(str(config_root))):
        return None
    lines = data.split(b"\n")
    first = 0
    while first < len(lines) and _header_comment(lines[first]):
        first += 1
    return b"\n".join(lines[first:]), str(config_root) if b"config_root" in low else None


def _header_comment(line: bytes) -> bool:
    """Whether `line`, among those a config text starts with, is a comment that changes
    nothing: not one that ends in a backslash (it might continue into the text), nor
    one of HTCondor's `#opt:` lines (`#opt:strict`, `#opt:oldcomment`, ...: they change
    how the rest is read)."""
    text = line.strip()
    return (text.startswith(b"#") and not text.endswith(b"\\")
            and not text.lower().startswith(b"#opt:"))


class _ReadMemo:
    """The last `_READ_MEMO_SIZE` successful reads of files read as data, and of
    HTCondor's defaults: (params, raw) by `key`; a hit has CONFIG_ROOT set to the
    directory of the file it answers for."""

    def __init__(self):
        self._reads: OrderedDict[tuple, tuple[dict, dict]] = OrderedDict()
        self._lock = threading.Lock()

    @staticmethod
    def key(data: bytes | None, config_root: Path | None,
            env: dict[str, str]) -> tuple | None:
        """The key of text `data` read from `config_root` in the child's environment
        `env` (data None: HTCondor's defaults); None: not kept (`_text_key`)."""
        text = (None, None) if data is None else _text_key(data, config_root)
        return None if text is None else (*text, tuple(sorted(env.items())))

    def get(self, key: tuple | None, config_root: Path | None) -> tuple[dict, dict] | None:
        """A copy of what was kept for `key` (None: nothing), as read from `config_root`
        (None: HTCondor's defaults, no file)."""
        if key is None:
            return None
        with self._lock:
            got = self._reads.get(key)
            if got is None:
                return None
            self._reads.move_to_end(key)
        params = dict(got[0])
        if config_root is not None and "CONFIG_ROOT" in params:
            params["CONFIG_ROOT"] = str(config_root)
        return params, dict(got[1])

    def keep(self, key: tuple | None, params: dict, raw: dict) -> None:
        if key is None:
            return
        with self._lock:
            self._reads[key] = (dict(params), dict(raw))
            self._reads.move_to_end(key)
            while len(self._reads) > _READ_MEMO_SIZE:
                self._reads.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._reads.clear()


_READS = _ReadMemo()


class ConfigRead:
    """One read of config file `path` (as `read_params`), started at once: HTCondor's
    reader runs in its child while the caller does other work (reading a snapshot's
    ads); `params()` or `result()` waits for it and raises what `read_params` raises,
    when it is called. `cancel()` stops a read whose answer is no longer wanted."""

    def __init__(self, path: str | Path | None):
        self.path = path
        self._error: InputError | None = None
        self._proc = None
        self._tmpdir: Path | None = None
        self._data: bytes | None = None
        self._checked = None
        self._out = self._err = None
        self._memo_key: tuple | None = None
        self._known: tuple[dict, dict] | None = None
        self._started = time.monotonic()
        try:
            self._start()
        except InputError as exc:
            self._error = exc
        except BaseException:
            self.cancel()
            raise

    def _start(self) -> None:
        path = self.path
        source = _source(path)
        argv = [sys.executable, "-m", "negotiator_ext.adapters._param_dump",
                "--memory", str(CONFIG_READ_MEMORY)]
        root = None             # the directory of a file read as data
        if path == LOCAL:   # this host's CONDOR_CONFIG and _CONDOR_* variables apply
            env = dict(os.environ)
        elif path is None:  # HTCondor's defaults: no config file, no user config
            env = _child_env()
            self._memo_key = _ReadMemo.key(None, None, env)
        else:
            p = Path(path)
            if not p.is_file():
                raise InputError(source, "config file not found")
            if _is_host_config(p):
                env = dict(os.environ)
                env["CONDOR_CONFIG"] = str(p.resolve())
                # _CONDOR_* variables would silently change the knobs; the file is its own.
                for k in list(env):
                    if k.upper().startswith("_CONDOR_"):
                        del env[k]
            else:
                self._data = _read_capped(p, source)
                self._checked = config_guard.check(self._data, source)
                env = _child_env()
                root = p.resolve().parent
                self._memo_key = _ReadMemo.key(self._data, root, env)
        self._known = _READS.get(self._memo_key, root)
        if self._known is not None:             # read before: no child
            return
        if self._data is not None:
            try:
                self._tmpdir = Path(_private_dir())
                argv.append(str(_write_root(self._tmpdir, self._data, root)))
            except OSError as exc:
                self._clean()
                raise InputError(source, "cannot copy it for HTCondor to read: "
                                         f"{exc.filename or ''}: {exc.strerror or exc}") from None
        self._started = time.monotonic()
        # its output goes to files, not pipes: a caller that comes back late (it read a
        # snapshot's 500,000 job ads meanwhile) finds the reader finished, not blocked
        # on a full pipe and then killed as if it had never ended
        self._out, self._err = tempfile.TemporaryFile(), tempfile.TemporaryFile()
        self._proc = subprocess.Popen(argv, env=env, stdout=self._out, stderr=self._err)

    def params(self) -> tuple[dict, dict]:
        """(params, raw), as `read_params` returns them."""
        if self._error is not None:
            raise self._error
        if self._known is not None:
            return self._known
        path, source, proc = self.path, _source(self.path), self._proc
        checked, tmpdir = self._checked, self._tmpdir
        try:
            # the child gets CONFIG_READ_TIMEOUT from its start, as it always did
            left = CONFIG_READ_TIMEOUT - (time.monotonic() - self._started)
            try:
                proc.wait(timeout=max(left, 0.001))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                cycle = checked.possible_cycle if checked else None
                raise InputError(source, f"HTCondor did not finish reading it within "
                                         f"{CONFIG_READ_TIMEOUT:g} s: a circular macro"
                                         + (f" ({cycle})?" if cycle else "?")) from None
            stdout, stderr = (_text_of(f) for f in (self._out, self._err))
        finally:
            self._clean()
        if proc.returncode != 0:
            output = stderr + stdout
            if tmpdir is not None:      # name the file, not the private copy
                output = output.replace(str(tmpdir / "config"), source).replace(str(tmpdir), source)
            raise InputError(source, _failure(proc.returncode, output, path, self._data,
                                              checked))
        try:
            doc = json.loads(stdout)
        except json.JSONDecodeError:
            raise InputError(source, "HTCondor could not read this configuration") from None
        _READS.keep(self._memo_key, doc["params"], doc["raw"])
        return doc["params"], doc["raw"]

    def result(self) -> NegotiatorConfig:
        """The typed configuration, as `load_config` returns it."""
        params, raw = self.params()
        return NegotiatorConfig.from_params(params, source=_source(self.path), raw=raw)

    def cancel(self) -> None:
        if self._proc is not None and self._proc.returncode is None:
            self._proc.kill()
            self._proc.wait()
        self._clean()

    def _clean(self) -> None:
        if self._tmpdir is not None:
            shutil.rmtree(self._tmpdir, ignore_errors=True)
            self._tmpdir = None
        for f in (self._out, self._err):
            if f is not None:
                f.close()
        self._out = self._err = None


def _text_of(f) -> str:
    """What the reader child wrote into file `f`."""
    f.seek(0)
    return f.read().decode("utf-8", errors="replace")


def _is_host_config(p: Path) -> bool:
    """Whether file `p` is this host's own configuration: the one CONDOR_CONFIG names (as
    the shadow daemon's --config sets it). HTCondor reads that one as it is."""
    env = os.environ.get("CONDOR_CONFIG")
    if not env or env.upper() == "ONLY_ENV":
        return False
    try:
        return Path(env).resolve() == p.resolve()
    except OSError:
        return False


def _child_env() -> dict[str, str]:
    env = {k: os.environ[k] for k in _CHILD_ENV if k in os.environ}
    env["CONDOR_CONFIG"] = "ONLY_ENV"   # importing the bindings reads no file
    return env


def _read_capped(p: Path, source: str) -> bytes:
    try:
        with open(p, "rb") as f:
            return f.read(config_guard.MAX_CONFIG_BYTES + 1)
    except OSError as exc:
        raise InputError(source, f"cannot read it: {exc.strerror or exc}") from None


def _private_dir() -> str:
    d = tempfile.mkdtemp(prefix="negotiator-ext-config-")
    if not _PLAIN_PATH.fullmatch(d):            # a TMPDIR that config text would not hold
        shutil.rmtree(d, ignore_errors=True)
        d = tempfile.mkdtemp(prefix="negotiator-ext-config-", dir="/tmp")
    return d


def _write_root(tmpdir: Path, data: bytes, config_root: Path) -> Path:
    """The child's root config: the checked bytes (a private copy, so that HTCondor reads
    what was checked) included, then the resets; CONFIG_ROOT stays the file's directory."""
    (tmpdir / "config").write_bytes(data)
    lines = []
    if _VALUE_OK.fullmatch(str(config_root)):      # else CONFIG_ROOT is the private copy's
        lines.append(f"CONFIG_ROOT = {config_root}\n")
    lines.append(f"include : {tmpdir / 'config'}\n")
    lines.append(config_guard.reset_text())
    lines.append(f"{_SENTINEL} = 1\n")
    root = tmpdir / "root"
    root.write_text("".join(lines))
    return root


def _failure(returncode: int, output: str, path, data: bytes | None, checked) -> str:
    """Why the child reading config `path` failed, in one line."""
    cycle = checked.possible_cycle if checked else None
    if returncode < 0:
        try:
            sig = signal.Signals(-returncode).name
        except ValueError:
            sig = f"signal {-returncode}"
        return (f"HTCondor's config reader died ({sig}) reading it: a circular macro"
                + (f" ({cycle})?" if cycle else " (for example A = $INT(A))?"))
    # A failed allocation: Python's MemoryError, C++'s bad_alloc, or HTCondor's
    # ASSERT(rval) on a NULL malloc() while it expands a macro (config.cpp).
    m = re.search(r"MemoryError|bad_alloc|[Oo]ut of memory|Cannot allocate memory"
                  r"|Assertion ERROR on \(\w+\)", output)
    if m:
        return (f"HTCondor ran out of memory reading it ({m.group(0)}; the limit is "
                f"{CONFIG_READ_MEMORY / 2**30:g} GiB): a macro that grows without end?")
    return _config_error(output, None if path == LOCAL else path, data)


def _config_error(output: str, path, data: bytes | None = None) -> str:
    if data is not None:    # a checked file: HTCondor names it (its copy) and the line
        m = re.search(r'Error "%s", Line (\d+)' % re.escape(str(path)), output)
    else:
        m = re.search(r"Configuration Error Line (\d+)", output)
    if m and path is not None:
        n = int(m.group(1))
        try:
            lines = (data.decode("utf-8", errors="replace").split("\n") if data is not None
                     else Path(path).read_text(errors="replace").splitlines())
            line = lines[n - 1].strip()
        except (OSError, IndexError):
            line = ""
        return f"line {n}: not valid HTCondor configuration" + (f": {line!r}" if line else "")
    first = next((ln.strip() for ln in output.splitlines() if ln.strip()), "")
    return "HTCondor could not read this configuration" + (f" ({first})" if first else "")


class ConfigMemo:
    """The last configuration a loop read from a snapshot's own `config` file, typed, by
    the file's text (`_text_key`): a loop's passes write the negotiator's config pass
    after pass, most often the same but for the time in its header, and HTCondor's
    reader is a new interpreter each time (about 0.3 s of a core, beside the pass)."""

    def __init__(self):
        self._key: tuple | None = None
        self._config: NegotiatorConfig | None = None

    @staticmethod
    def key(path: Path) -> tuple | None:
        """What the configuration of file `path` depends on; None when it cannot be kept
        (unreadable, too large for the reader, or random)."""
        try:
            with open(path, "rb") as f:
                data = f.read(config_guard.MAX_CONFIG_BYTES + 1)
        except OSError:
            return None
        return _text_key(data, Path(path).resolve().parent)

    def get(self, key: tuple | None, path: Path) -> NegotiatorConfig | None:
        """The configuration kept for `key`, as read from `path` (None: not kept)."""
        if key is None or key != self._key or self._config is None:
            return None
        return dataclasses.replace(self._config, source=_source(path))

    def keep(self, key: tuple | None, config: NegotiatorConfig) -> None:
        if key is not None:
            self._key, self._config = key, config


def load_config(path: str | Path | None) -> NegotiatorConfig:
    """The typed negotiator configuration of config file `path` (None: defaults; LOCAL:
    this host's configuration)."""
    return ConfigRead(path).result()


def local_ext_knobs(path: str | Path | None = None) -> dict[str, str]:
    """Our own NEGOTIATOR_EXT_* knobs, from config file `path` or else this host's
    configuration (HTCondor's defaults where the host has none). A configuration HTCondor
    cannot read (a bad line, a circular macro) is an InputError naming it: its knobs
    would otherwise be silently taken as unset ("no ledger")."""
    params, _ = read_params(path if path is not None else LOCAL)
    return ext_knobs(params)
