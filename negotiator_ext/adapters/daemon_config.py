"""The daemons' configuration as a capture reads it: the negotiator's policy knobs and the
schedds' limits through RemoteParam, in a child process with a time limit, kept by a
loop between passes (`KeptReads`), and written as a config file (`format_config`).

Reading the negotiator's configuration: the daemon expands each value it is asked for
while the request waits, and the bindings wait for the answer inside C++ code, holding
the interpreter lock, with no time limit. A value whose expansion never ends (`A = $(B)`,
`B = $(A)`) therefore never comes back and, read in this process, would freeze it (signal
handlers included). So the real bindings' RemoteParam is read by a child process
(`_param_dump --remote`), killed when it takes longer than the capture's `timeout`; it
names each knob before fetching it, so the knob it hung on is named in the error
("negotiator": `reading KNOB from the negotiator NAME did not end within N s ...`), and
the capture goes on without the negotiator's config (an earlier snapshot's when there is
one). The negotiator itself then stays busy expanding the value (HTCondor's expand_macro
has no limit either) until it is restarted. `abort_remote_reads()` (the shadow daemon on
SIGTERM) kills such a child at once. A RemoteParam that is not the bindings' own (a fake)
is read in this process. The Negotiator and Schedd ads are queried first: a shadow loop's
capture (`kept_reads`, `KeptReads`) skips the RemoteParam steps of a daemon whose ad says
it has not read its files since the loop's last read of it.
"""

from __future__ import annotations

import contextlib
import json
import math
import subprocess
import sys
import tempfile
import threading
import time
import unicodedata
from pathlib import Path
from typing import Callable, Mapping

import classad2

from ..errors import InputError
from ..views.text import escape_char
from .answers import BadAnswer, _comment_text, _kind, _one_line, checked_ads
from .locations import KeptLocations, located
from .remote_knobs import KNOB_NAME, select_policy_knobs, select_schedd_knobs


TOOL = "negotiator-ext snapshot"


# Names HTCondor's config reads as the start of a statement even before "=" (knob names
# it accepts: remote_knobs.KNOB_NAME).
_CONFIG_KEYWORDS = frozenset({"if", "elif", "else", "endif"})


# The time limit of the negotiator's configuration read when the capture has none.
DEFAULT_REMOTE_READ_TIMEOUT = 30.0


_REMOTE_POLL = 0.05        # s: how often the child's end (and an abort) is checked


_REMOTE_ALARM_EXTRA = 5    # s: the child's own alarm, should this process be gone


def _through(kept, kind: str, location, ads, read: Callable[[], dict]) -> Callable[[], dict]:
    """`read` (a daemon's knobs) through a loop's kept reads, when there are: the stamp
    is that of the daemon's ad among `ads` with the location's Name and MyAddress."""
    if kept is None:
        return read
    name = _ad_string(location, "Name")
    stamp = KeptReads.stamp(ads, name)
    if stamp is not None and stamp[0] != _ad_string(location, "MyAddress"):
        stamp = None
    return lambda: kept.read(kind, name, stamp, read)


def _earlier_config(path: Path) -> tuple[str | None, dict[str, str] | None]:
    """The text of an earlier snapshot's config and its knobs as HTCondor reads them (the
    job projection needs the policy expressions), or (None, None) when it cannot be read."""
    from .condor_config import read_params
    try:
        text = Path(path).read_text(encoding="utf-8")
        params, _ = read_params(path)
    except (OSError, UnicodeDecodeError, InputError):
        return None, None
    return text, {k: str(v) for k, v in params.items() if v is not None}


class _ConfigRead:
    """The negotiator's location and policy knobs, read beside the capture: the
    negotiator is located here, at once; the bindings' RemoteParam is read by a child
    process (a new interpreter that imports the bindings, about 0.3 s), waited for by a
    thread while this one turns the slot ads into lines. The thread calls no bindings
    (a test's fake RemoteParam is read here, in `result`); its errors are merged by
    `result`, in the order the capture has always given them."""

    def __init__(self, htcondor, collector, timeout: float | None, kept=None, ads=None,
                 where: str = "<local pool>"):
        self._errors: dict[str, str] = {}
        self._got: tuple = (None, None)
        self._thread = None
        location = _locate_negotiator(htcondor, collector, self._errors, where, kept, ads)
        self._location = location
        if location is None:
            return
        if not _bindings_remote_param(htcondor):
            self._later = _through(kept, "negotiator", location, ads,
                                   lambda: select_policy_knobs(htcondor.RemoteParam(location)))
            return
        self._later = None
        limit = float(timeout) if timeout and timeout > 0 else DEFAULT_REMOTE_READ_TIMEOUT
        read = _through(kept, "negotiator", location, ads, lambda: read_remote_policy_knobs(
            location, timeout=limit, daemon=f"the negotiator {_daemon_name(location)}"))
        self._thread = threading.Thread(target=self._read, args=(location, read),
                                        name="negotiator-config", daemon=True)
        self._thread.start()

    @property
    def location(self):
        """The negotiator's location ad (None when it was not located)."""
        return self._location

    def _read(self, location, read) -> None:
        self._got = _remote_knobs(read, location, self._errors)

    def result(self, errors: dict):
        """(negotiator location ad or None, {knob: value} or None); what failed is in
        `errors`."""
        if self._location is not None and self._thread is None:
            self._got = _remote_knobs(self._later, self._location, self._errors)
        elif self._thread is not None:
            self._thread.join()
        errors.update(self._errors)
        return (self._location, None) if self._location is None else self._got


class _OtherNegotiatorsRead:
    """The pool's other negotiators (a pool sharded by NEGOTIATOR_SLOT_CONSTRAINT, each
    with its own accountant): located here, at once; each one's policy knobs read like
    the first one's (a child process each, one after the other, waited for by a thread;
    a test's fake RemoteParam is read in `result`). Nothing when the collector knows one
    negotiator or none."""

    def __init__(self, htcondor, collector, timeout: float | None, first, kept=None,
                 ads=None, where: str = "<local pool>"):
        self._kept, self._ads = kept, ads
        self._named: list = []
        self._got: dict = {}
        self._errors: dict[str, str] = {}
        self.warnings: list[str] = []
        self._thread = None
        self._htcondor = htcondor
        if first is None:
            return
        locations, warning = _located_all(
            htcondor, collector, kept, ads, "negotiators", "Negotiator", where,
            "cannot list the pool's negotiators (only the first is captured)")
        if warning is not None:
            self.warnings.append(warning)
            return
        first_name = _ad_string(first, "Name")
        for loc in locations:
            name = _ad_string(loc, "Name")
            if name is not None and name not in {n for n, _ in self._named}:
                self._named.append((name, None if name == first_name else loc))
        if len(self._named) < 2:
            self._named = []
            return
        if first_name not in {n for n, _ in self._named}:
            self._named.insert(0, (first_name, None))
        if _bindings_remote_param(htcondor):
            limit = float(timeout) if timeout and timeout > 0 else DEFAULT_REMOTE_READ_TIMEOUT
            self._thread = threading.Thread(target=self._read, args=(limit,),
                                            name="negotiators-config", daemon=True)
            self._thread.start()

    def _read(self, limit: float | None) -> None:
        for name, loc in self._named:
            if loc is None:
                continue
            label = f"negotiator {name}"
            if limit is None:
                read = (lambda loc=loc: select_policy_knobs(self._htcondor.RemoteParam(loc)))
            else:
                read = (lambda loc=loc, name=name: read_remote_policy_knobs(
                    loc, timeout=limit, daemon=f"the negotiator {_comment_text(name)}"))
            read = _through(self._kept, "negotiator", loc, self._ads, read)
            errors: dict[str, str] = {}
            _, knobs = _remote_knobs(read, loc, errors)
            if knobs is None:
                self._errors[label] = errors.get("negotiator", "not read")
            self._got[name] = knobs

    def result(self, errors: dict) -> tuple[dict, list[str]]:
        """({negotiator name: (its location ad, or None for the first one; its knobs or
        None when not read)}, warnings); {} for a pool of one negotiator. What failed is
        in `errors`, as "negotiator <Name>"."""
        if not self._named:
            return {}, self.warnings
        if self._thread is None:
            self._read(None)
        else:
            self._thread.join()
        errors.update(self._errors)
        return ({name: (loc, self._got.get(name)) for name, loc in self._named},
                self.warnings)


def _located_all(htcondor, collector, kept, ads, kind: str, daemon: str, where: str,
                 failing: str) -> tuple[list, str | None]:
    """Where every `daemon` (a DaemonTypes name) of the pool is, as the collector lists
    them (a loop's kept locations while their ads stay: `locations.located`), checked;
    else no location and the warning that says why (`failing`: what cannot be done)."""
    try:
        return checked_ads(located(kept, kind, ads, lambda: collector.locateAll(
            getattr(htcondor.DaemonTypes, daemon)))), None
    except BadAnswer as exc:
        return [], f"{failing}: the collector {_comment_text(where)} {exc}"
    except Exception as exc:
        return [], f"{failing}: {_one_line(exc)}"


def _ad_string(ad, attr: str) -> str | None:
    try:
        v = ad.get(attr)
    except Exception:
        return None
    return v if isinstance(v, str) and v else None


def _locate_negotiator(htcondor, collector, errors: dict, where: str = "<local pool>",
                       kept=None, ads=None):
    """The negotiator's location ad, or None with errors["negotiator"] saying why (the
    collector `where` does not know one, or answered with something that is not a
    ClassAd; a location ad RemoteParam cannot use, without a MyAddress, fails there).
    `kept`, `ads`: a loop's kept reads and this pass's negotiator ads
    (`locations.located`)."""
    try:
        location = located(kept, "negotiator", ads,
                           lambda: collector.locate(htcondor.DaemonTypes.Negotiator))
    except Exception as exc:
        errors["negotiator"] = f"cannot locate the negotiator: {_one_line(exc)}"
        return None
    if location is None:
        errors["negotiator"] = "the collector knows no negotiator"
        return None
    if not isinstance(location, classad2.ClassAd):
        errors["negotiator"] = (f"cannot locate the negotiator: the collector "
                                f"{_comment_text(where)} answered with {_kind(location)} "
                                "instead of its location ad")
        return None
    return location


def _no_address(location) -> str | None:
    """None when the location ad has a MyAddress string; else what it has instead, for
    a message ("missing", or the value)."""
    try:
        v = location.get("MyAddress")
    except Exception:                       # noqa: BLE001 - a value classad2 cannot give
        return "not readable"
    if isinstance(v, str) and v:
        return None
    return "missing" if v is None else f"not an address: {_comment_text(str(v))[:40]}"


def _remote_knobs(read, location, errors: dict):
    try:
        knobs = read()
    except RemoteReadError as exc:
        errors["negotiator"] = str(exc)
        return location, None
    except Exception as exc:
        errors["negotiator"] = f"cannot read the negotiator's configuration: {_one_line(exc)}"
        return location, None
    return location, knobs


def _bindings_remote_param(htcondor) -> bool:
    """Whether `htcondor.RemoteParam` is the bindings' own class (not a test's fake)."""
    rp = getattr(htcondor, "RemoteParam", None)
    return isinstance(rp, type) and str(getattr(rp, "__module__", "")).startswith("htcondor2.")


def _daemon_name(location) -> str:
    """A daemon's name for a message: its Name (else its address), every control, line
    separator or format character escaped."""
    for attr in ("Name", "MyAddress"):
        try:
            v = location.get(attr)
        except Exception:
            v = None
        if isinstance(v, str) and v:
            return _comment_text(v)
    return "(unnamed)"


class RemoteReadError(Exception):
    """A daemon's configuration could not be read through RemoteParam: one line, naming
    the daemon and, where it is known, the knob."""


# a kept configuration read is taken again after this many seconds whatever its
# daemon's ad says (an ad update lost, two reconfigs within one second)
REREAD_AFTER = 900.0


# a read begun sooner than this after its daemon's last reconfig is not kept
RECONFIG_SETTLE = 2.0


class KeptReads:
    """A loop's reads of its daemons' configurations (RemoteParam), kept from pass to
    pass. A daemon's configuration changes only when it reads its files again: at a
    restart or a reconfig (condor_reconfig; a value set with condor_config_val -set or
    -rset too takes effect then), and each ad a daemon sends says when that was:
    DaemonCore puts DaemonStartTime and DaemonLastReconfigTime into every ad, and the
    negotiator and the schedd send theirs again on reconfig. So a capture reads a
    daemon's configuration again only when its ad in the collector has another
    (MyAddress, DaemonStartTime, DaemonLastReconfigTime) than at the kept read, when
    the ad has none of them whole, or when the kept read is REREAD_AFTER seconds old;
    otherwise it takes the kept knobs (a new interpreter per read, and the daemon's
    answers, are a tenth of a pass at 11,000 slots). A read is kept only when it began
    RECONFIG_SETTLE seconds after the reconfig its stamp names, by this host's clock
    (a second reconfig within the same second would not change the stamp). A read
    that fails is not kept, and drops what was kept of that daemon. `clock`: seconds,
    monotonic; `wall`: the time of day, as DaemonLastReconfigTime counts it."""

    def __init__(self, clock: Callable[[], float] = time.monotonic,
                 wall: Callable[[], float] = time.time):
        self._kept: dict[tuple, tuple] = {}     # (kind, Name) -> (stamp, knobs, when)
        self.clock, self.wall = clock, wall
        # the daemons' location ads (locations.py), asked again when their ads change
        self.locations = KeptLocations()
        self.last: dict[str, str] = {}          # this capture: "kind Name" -> "kept"/"read"

    @staticmethod
    def stamp(ads, name: str | None) -> tuple | None:
        """The stamp of the daemon named `name` among its collector `ads` (one ad of
        that Name, with a MyAddress and both times whole), else None."""
        if name is None:
            return None
        found = [ad for ad in ads or () if _ad_string(ad, "Name") == name]
        if len(found) != 1:
            return None
        ad = found[0]
        try:
            got = (ad.get("MyAddress"), ad.get("DaemonStartTime"),
                   ad.get("DaemonLastReconfigTime"))
        except Exception:
            return None
        address, started, reconfigured = got
        if not (isinstance(address, str) and address and _whole(started)
                and _whole(reconfigured)):
            return None
        return got

    def read(self, kind: str, name: str | None, stamp: tuple | None,
             reader: Callable[[], dict]) -> dict[str, str]:
        """The knobs of the daemon `name` of `kind` ("negotiator", "schedd"): the kept
        ones when its stamp is the kept read's and that read is recent, else
        `reader()`'s (kept under `stamp`; what it raises goes on, nothing kept)."""
        key = (kind, name)
        got = self._kept.get(key) if name is not None else None
        now = self.clock()
        label = f"{kind} {name}"
        if (got is not None and stamp is not None and got[0] == stamp
                and 0 <= now - got[2] < REREAD_AFTER):
            self.last[label] = "kept"
            return dict(got[1])
        self._kept.pop(key, None)
        settled = stamp is not None and self.wall() - stamp[2] >= RECONFIG_SETTLE
        knobs = reader()
        if settled and name is not None:
            self._kept[key] = (stamp, dict(knobs), now)
        self.last[label] = "read"
        return knobs


def _whole(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


# The children of reads in flight, and whether this process is stopping (see
# abort_remote_reads): a shadow daemon's main thread kills them while its worker waits.
_READS_LOCK = threading.Lock()


_READS_IN_FLIGHT: set = set()


_STOPPING = threading.Event()


_ABANDON = [False]          # abandon_remote_reads: a plain flag, set by a signal handler


def _stopping() -> bool:
    return _ABANDON[0] or _STOPPING.is_set()


def abort_remote_reads() -> int:
    """This process is stopping: kill every child reading a daemon's configuration now
    (its read fails as abandoned), and abandon any read started from now on, until
    `allow_remote_reads()`. Returns how many were killed. Safe from any thread (not from
    inside a signal handler)."""
    _STOPPING.set()
    with _READS_LOCK:
        procs = list(_READS_IN_FLIGHT)
    killed = 0
    for proc in procs:
        with contextlib.suppress(OSError):
            if proc.poll() is None:
                proc.kill()
                killed += 1
    return killed


def abandon_remote_reads() -> None:
    """`abort_remote_reads()` from a signal handler (a `shadow --interval` loop's
    SIGTERM): only a flag is set, no lock taken; each read in flight sees it within
    _REMOTE_POLL seconds and kills its child itself."""
    _ABANDON[0] = True


def allow_remote_reads() -> None:
    """Undo `abort_remote_reads()` and `abandon_remote_reads()` (a new run of the daemon
    in the same process)."""
    _STOPPING.clear()
    _ABANDON[0] = False


def _remote_reader_argv(alarm: int, schedd: bool = False) -> list[str]:
    return [sys.executable, "-m", "negotiator_ext.adapters._param_dump", "--remote",
            str(alarm)] + (["--schedd"] if schedd else [])


def read_remote_policy_knobs(location, *, timeout: float, daemon: str = "the daemon",
                             argv: list[str] | None = None, schedd: bool = False
                             ) -> dict[str, str]:
    """The policy knobs (`select_policy_knobs`; with `schedd`, a schedd's limits,
    `select_schedd_knobs`) of the daemon at `location`, read through
    htcondor2.RemoteParam by a child process (`_param_dump --remote`) that is killed
    after `timeout` seconds. RemoteReadError, naming `daemon` and the knob the read hung
    on, when it does not end in time, is abandoned (`abort_remote_reads`) or fails.
    `argv`: the child's command (tests)."""
    alarm = int(math.ceil(timeout)) + _REMOTE_ALARM_EXTRA
    cmd = list(argv) if argv is not None else _remote_reader_argv(alarm, schedd)
    with tempfile.TemporaryDirectory(prefix="negotiator-ext-remote-param-") as tmp:
        ad_file, out_file, err_file = (Path(tmp) / n for n in ("location", "out", "err"))
        ad_file.write_text(str(location), encoding="utf-8")
        how = _run_bounded(cmd, ad_file, out_file, err_file, timeout)
        records = _json_lines(out_file)
        err_text = _text(err_file)
    ended_at = time.time()
    listed = any("listed" in r for r in records)
    reading = [r for r in records if isinstance(r.get("reading"), str)]
    knob = _comment_text(reading[-1]["reading"]) if reading else None
    at = reading[-1].get("at") if reading else None
    # the knob in flight for at least half the time: that one hung (else the daemon is
    # merely slow, and the knob is only where the read was)
    stuck = (isinstance(at, (int, float)) and not isinstance(at, bool)
             and ended_at - at >= timeout / 2)
    for r in records:
        if isinstance(r.get("knobs"), dict) and how == "ended":
            return {str(k): str(v) for k, v in r["knobs"].items()}
    if how == "abandoned":
        raise RemoteReadError(f"reading the configuration of {daemon} was abandoned: "
                              "negotiator-ext is stopping")
    if how == "timeout":
        if knob is not None and stuck:
            raise RemoteReadError(
                f"reading {knob} from {daemon} did not end within {timeout:g} s: its value "
                "never ends expanding (a circular macro such as A = $(B), B = $(A)?); fix "
                "it, then restart the daemon, which may stay stuck expanding it")
        if listed:
            raise RemoteReadError(f"reading the configuration of {daemon} did not end "
                                  f"within {timeout:g} s" + (f" (it was at {knob})"
                                                             if knob is not None else ""))
        raise RemoteReadError(f"{daemon} did not answer a configuration query within "
                              f"{timeout:g} s (stuck, or busy in a long negotiation cycle?)")
    errs = [r["error"] for r in records if isinstance(r.get("error"), str)]
    why = errs[-1] if errs else (" ".join(err_text.split()[-40:]) or "the reader ended "
                                 "without an answer")
    where = f" ({knob})" if knob is not None and errs and listed else ""
    raise RemoteReadError(f"cannot read the configuration of {daemon}{where}: "
                          f"{_comment_text(why)[:300]}")


def _run_bounded(cmd: list[str], stdin: Path, stdout: Path, stderr: Path,
                 timeout: float) -> str:
    """Run `cmd` with its output in files; "ended", "timeout" (killed after `timeout`
    seconds) or "abandoned" (killed by abort_remote_reads)."""
    if _stopping():
        return "abandoned"
    with open(stdin, "rb") as fin, open(stdout, "wb") as fout, open(stderr, "wb") as ferr:
        proc = subprocess.Popen(cmd, stdin=fin, stdout=fout, stderr=ferr)
    with _READS_LOCK:
        _READS_IN_FLIGHT.add(proc)
    how = "ended"
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                proc.wait(timeout=_REMOTE_POLL)
            except subprocess.TimeoutExpired:
                pass
            else:
                break
            if _stopping():
                how = "abandoned"
                break
            if time.monotonic() >= deadline:
                how = "timeout"
                break
        if how == "ended" and _stopping() and proc.returncode is not None \
                and proc.returncode < 0:
            how = "abandoned"      # killed by abort_remote_reads between two polls
    finally:
        with _READS_LOCK:
            _READS_IN_FLIGHT.discard(proc)
        if proc.poll() is None:
            with contextlib.suppress(OSError):
                proc.kill()
        proc.wait()
    return how


def _text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:       # the child never started
        return ""


def _json_lines(path: Path) -> list[dict]:
    out = []
    for line in _text(path).splitlines():
        try:
            r = json.loads(line)
        except ValueError:
            continue
        if isinstance(r, dict):
            out.append(r)
    return out


class _ScheddKnobsRead:
    """Each schedd's own limits, read beside the capture through RemoteParam: the
    schedds are located here, at once; with the real bindings each is read by a child
    process (`read_remote_policy_knobs(schedd=True)`, killed after the timeout), all of
    them waited for by one thread; a test's fake RemoteParam is read in `result`. A
    schedd that cannot be read is a warning, not an error: the snapshot's config (else
    HTCondor's defaults) stands in for it."""

    def __init__(self, htcondor, collector, timeout: float | None, kept=None, ads=None,
                 where: str = "<local pool>"):
        self.knobs: dict[str, dict[str, str]] = {}
        self.warnings: list[str] = []
        self._thread = None
        self._later: list = []
        locations, warning = _located_all(
            htcondor, collector, kept, ads, "schedds", "Schedd", where,
            "cannot locate the schedds to read their limits")
        if warning is not None:
            self.warnings.append(warning)
            return
        named = []
        for loc in locations:
            name = _ad_string(loc, "Name")
            if name is not None and _no_address(loc) is None and name not in {
                    n for n, _ in named}:
                named.append((name, loc))
        if not _bindings_remote_param(htcondor):
            self._later = [(name, _through(kept, "schedd", loc, ads, lambda loc=loc:
                                           select_schedd_knobs(htcondor.RemoteParam(loc))))
                           for name, loc in named]
            return
        limit = float(timeout) if timeout and timeout > 0 else DEFAULT_REMOTE_READ_TIMEOUT
        reads = [(name, _through(kept, "schedd", loc, ads, lambda loc=loc, name=name:
                                 read_remote_policy_knobs(
                                     loc, timeout=limit,
                                     daemon=f"the schedd {_comment_text(name)}",
                                     schedd=True)))
                 for name, loc in named]
        self._thread = threading.Thread(target=self._read, args=(reads,),
                                        name="schedd-config", daemon=True)
        self._thread.start()

    def _read(self, reads) -> None:
        for name, read in reads:
            try:
                knobs = read()
            except Exception as exc:
                self.warnings.append(f"the schedd {_comment_text(name)}'s limits were not "
                                     f"read ({_one_line(exc)}): the config's apply")
                continue
            if knobs:
                self.knobs[name] = knobs

    def result(self) -> tuple[dict[str, dict[str, str]], list[str]]:
        """({schedd name: {knob: value}}, warnings)."""
        if self._later:
            self._read(self._later)
            self._later = []
        elif self._thread is not None:
            self._thread.join()
        return self.knobs, self.warnings


def format_config(knobs: Mapping[str, str], *, negotiator=None, pool: str | None = None,
                  captured_at: int | None = None) -> str:
    """HTCondor config syntax: a header comment, then `NAME = value` lines, sorted.

    Every line is one statement of HTCondor's config: the names and the pool written
    into the comment have each control, line-separator or format character and each
    backslash as its `\\xNN` (`\\uNNNN`) escape; a knob's value has its lines joined with
    spaces, its other control characters (but tabs) escaped the same way, and a trailing
    backslash (which would continue the line onto the next knob) escaped. A knob name
    HTCondor's config would not read as one (see KNOB_NAME) is a ValueError.
    """
    who = "the negotiator"
    if negotiator is not None:
        name, addr = negotiator.get("Name"), negotiator.get("MyAddress")
        if isinstance(name, str):
            who += f" {_comment_text(name)}"
        if isinstance(addr, str):
            who += f" ({_comment_text(addr)})"
    when = (time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(captured_at))
            if captured_at is not None else "unknown time")
    lines = [
        f"# Policy knobs of {who}",
        f"# in pool {_comment_text(pool or '<local>')}, read with htcondor2.RemoteParam (what",
        f"# `condor_config_val -name <negotiator>` shows) by {TOOL} at {when}.",
        "# Only the knobs the negotiator's policy uses are listed; every other knob",
        "# takes the HTCondor default when this file is loaded.",
        "",
    ]
    for name in sorted(knobs, key=str.upper):
        if not KNOB_NAME.fullmatch(name) or name.lower() in _CONFIG_KEYWORDS:
            raise ValueError(f"not a knob name HTCondor's config can hold: {name!r}")
        v = _config_value(knobs[name])
        lines.append(f"{name} = {v}" if v else f"{name} =")
    return "\n".join(lines) + "\n"


# Control characters, surrogates, and (in comments) line separators and invisible format
# characters (bidi overrides and the like).
_VALUE_ESCAPED = frozenset({"Cc", "Cs"})


def _config_value(value) -> str:
    """A knob's value as one line of HTCondor config: line breaks joined with spaces,
    other control characters but tabs escaped, no trailing backslash."""
    v = " ".join(str(value).splitlines()).strip()
    v = "".join(escape_char(c) if c != "\t" and unicodedata.category(c) in _VALUE_ESCAPED
                else c for c in v).strip()
    if v.endswith("\\"):
        v = v[:-1] + escape_char("\\")
    return v
