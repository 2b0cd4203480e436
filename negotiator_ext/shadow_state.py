"""What a shadow loop is set up with and keeps in its state directory: its settings (our
NEGOTIATOR_EXT_* knobs, read through HTCondor's config), the lock one pass at a time
holds, and the snapshots it keeps."""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import json
import os
import re
import shutil
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Mapping

from .adapters.schedd_query import SCHEDDS_AT_ONCE
from .core.config import ext_bool, ext_number
from .errors import InputError


# NEGOTIATOR_EXT_DETAIL_DAYS: the days of full per-pass detail the ledger keeps before
# summarising passes hourly
DETAIL_DAYS = 3.0


# NEGOTIATOR_EXT_STOP_TIMEOUT: how long after a stop signal a loop or the daemon waits for
# the pass in flight (seconds)
STOP_TIMEOUT = 15.0


@dataclass(frozen=True)
class ShadowSettings:
    """What the shadow loop needs, from our NEGOTIATOR_EXT_* knobs (flags override)."""
    pool: str | None
    ledger_url: str
    state_dir: Path | None              # None only for a replay (`from_knobs(replay=True)`)
    interval: float
    matchlog: Path | None
    timeout: int
    retention_days: float
    keep_snapshots: int
    advertise: bool
    metrics_file: Path | None
    metrics_port: int
    name: str
    metrics_address: str = "127.0.0.1"  # where the daemon serves its metrics
    matchlog_tz: str | None = None      # the MatchLog's time zone (None: this host's)
    cycle_config: Path | None = None    # what-if: our cycle under this config, not the pool's
    negotiator_log: Path | None = None  # the real NegotiatorLog: every cycle's start and end
    # a pass after another queries the schedds in a child beside the slot ads
    capture_beside: bool = True
    # each schedd captured by its resource requests (adapters/resource_requests.py)
    capture_requests: bool = True
    # a loop keeps the slot ads between passes, and a pass with none kept starts from
    # the newest snapshot's, fetching only those the collector heard from since
    # (adapters/slot_cache.py)
    keep_slot_ads: bool = True
    # the collector asked for whole slot ads, not the attributes something can read
    # (adapters/collector_projection.py)
    whole_slot_ads: bool = False
    # how many schedds a loop's worker asks at a time, each in a process of its own
    # (adapters/schedd_query.py)
    schedds_at_once: int = SCHEDDS_AT_ONCE
    # unexplained differences re-predicted at the real accountant's update (our cycle once
    # more on the compared snapshot: core.disagreement.repredict)
    repredict: bool = True
    # passes older than this many days are summarised hourly (0: never; see `_Pass.retain`)
    detail_days: float = DETAIL_DAYS
    # how long a loop's stop may wait on a daemon: its capture waits at most this long on
    # a collector call that gets no answer (NEGOTIATOR_EXT_STOP_TIMEOUT)
    stop_timeout: float = STOP_TIMEOUT

    @classmethod
    def from_knobs(cls, knobs: Mapping[str, str], *, replay: bool = False,
                   **overrides) -> "ShadowSettings":
        """Settings from knob values (names without the prefix); an override that is not
        None wins over its knob. A `replay` needs no state directory (it captures
        nothing): without one, `state_dir` is None, the ledger must be named, and no
        metrics file is written unless one is named."""
        unknown = set(overrides) - {f.name for f in dataclasses.fields(cls)}
        if unknown:
            raise TypeError(f"unknown settings: {', '.join(sorted(unknown))}")
        o = {k: v for k, v in overrides.items() if v is not None}
        state = o.get("state_dir") or knobs.get("STATE_DIR")
        ledger = o.get("ledger_url") or knobs.get("LEDGER")
        if not state and not (replay and ledger):
            if replay:
                raise InputError("--ledger", "a replay records its passes in a ledger: pass "
                                 "--ledger (or set NEGOTIATOR_EXT_LEDGER); it needs no "
                                 "state directory")
            raise InputError("NEGOTIATOR_EXT_STATE_DIR",
                             "not set: set it in the HTCondor config (see "
                             "60-negotiator-ext.conf, written by `negotiator-ext "
                             "install-files`) or pass --state-dir")
        state_dir = Path(state) if state else None
        ledger = ledger or str(state_dir / "ledger.sqlite")
        matchlog = o.get("matchlog") or knobs.get("MATCHLOG") or None
        negotiator_log = o.get("negotiator_log") or knobs.get("NEGOTIATOR_LOG") or None
        # the Prometheus textfile: on by default (in the state directory), off when the
        # knob is set empty
        metrics = o.get("metrics_file") or knobs.get(
            "METRICS_FILE", str(state_dir / "negotiator_ext.prom") if state_dir else "") or None
        host = socket.getfqdn()
        s = cls(
            pool=o.get("pool") or knobs.get("POOL") or None,
            ledger_url=str(ledger),
            state_dir=state_dir,
            interval=float(o["interval"]) if "interval" in o else
            ext_number(knobs, "INTERVAL", 60, minimum=1),
            matchlog=Path(matchlog) if matchlog else None,
            timeout=int(o["timeout"]) if "timeout" in o else
            ext_number(knobs, "SNAPSHOT_TIMEOUT", 30, kind=int, minimum=1),
            retention_days=ext_number(knobs, "RETENTION_DAYS", 90, minimum=0),
            detail_days=ext_number(knobs, "DETAIL_DAYS", DETAIL_DAYS, minimum=0),
            keep_snapshots=ext_number(knobs, "KEEP_SNAPSHOTS", 48, kind=int, minimum=0),
            advertise=o["advertise"] if "advertise" in o else ext_bool(knobs, "ADVERTISE", True),
            metrics_file=Path(metrics) if metrics else None,
            metrics_port=ext_number(knobs, "METRICS_PORT", 0, kind=int, minimum=0),
            metrics_address=o.get("metrics_address") or knobs.get("METRICS_ADDRESS") or "127.0.0.1",
            name=o.get("name") or knobs.get("NAME") or f"negotiator-ext@{host}",
            matchlog_tz=o.get("matchlog_tz") or knobs.get("MATCHLOG_TIMEZONE") or None,
            cycle_config=Path(o["cycle_config"]) if o.get("cycle_config") else None,
            negotiator_log=Path(negotiator_log) if negotiator_log else None,
            capture_beside=ext_bool(knobs, "CAPTURE_BESIDE", True),
            capture_requests=ext_bool(knobs, "CAPTURE_REQUESTS", True),
            keep_slot_ads=ext_bool(knobs, "KEEP_SLOT_ADS", True),
            whole_slot_ads=ext_bool(knobs, "WHOLE_SLOT_ADS", False),
            schedds_at_once=ext_number(knobs, "SCHEDD_QUERIES_AT_ONCE", SCHEDDS_AT_ONCE,
                                       kind=int, minimum=1),
            repredict=ext_bool(knobs, "REPREDICT", True),
            stop_timeout=ext_number(knobs, "STOP_TIMEOUT", STOP_TIMEOUT, positive=True),
        )
        if s.matchlog_tz is not None:
            from zoneinfo import ZoneInfo
            try:
                ZoneInfo(s.matchlog_tz)
            except (ValueError, LookupError):
                raise InputError("NEGOTIATOR_EXT_MATCHLOG_TIMEZONE",
                                 f"not a time zone name: {s.matchlog_tz}") from None
        if s.interval < 1:
            raise InputError("--interval", f"{s.interval:g}: must be at least 1 second")
        return s


def read_settings(config_path: str | Path | None = None, **overrides) -> ShadowSettings:
    """Settings from this host's HTCondor configuration (or `config_path`), read through
    htcondor2.param, with `overrides` (command-line flags) winning."""
    from .adapters.condor_config import local_ext_knobs
    knobs = local_ext_knobs(config_path)
    return ShadowSettings.from_knobs(knobs, **overrides)


class Busy(Exception):
    """Another pass holds the state directory's lock."""


@contextlib.contextmanager
def pass_lock(state_dir: Path) -> Iterator[None]:
    """One pass at a time per state directory (cron runs that overlap, a daemon and a
    cron entry side by side): an exclusive, non-blocking flock on `shadow.lock`, which
    holds the pid of its holder. The kernel drops it when the process dies, so a kill -9
    never leaves it stale. The state directory is created when missing; one that cannot
    be created, or a lock file that cannot be created or written (a read-only or full
    disk), is an InputError naming it."""
    path = state_dir / "shadow.lock"
    try:
        state_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(str(state_dir), f"cannot create the state directory: "
                                         f"{exc.strerror or exc}") from None
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        raise InputError(str(path), f"cannot create the lock file: {exc.strerror or exc}") from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise Busy(f"{path}: another shadow pass is running") from None
        try:
            os.ftruncate(fd, 0)
            os.write(fd, f"{os.getpid()}\n".encode())
        except OSError as exc:
            raise InputError(str(path), f"cannot write the lock file: "
                                        f"{exc.strerror or exc}") from None
        yield
    finally:
        os.close(fd)


_SNAP_NAME = re.compile(r"^[0-9]+(-[0-9a-f]+)?$")


def _snapshot_path(root: Path, t: int, uid: str) -> Path:
    p = root / str(t)
    return p if not p.exists() else root / f"{t}-{uid[:8]}"


def prune_snapshots(root: Path, keep: int, *, exclude: Path | None = None) -> None:
    """Keep the newest `keep` snapshot directories under `root` (0 keeps all). Only the
    names this loop and the capture-snapshot hook write (`<epoch>` or `<epoch>-<hex>`)."""
    if keep <= 0 or not root.is_dir():
        return
    names = sorted((p for p in root.iterdir() if p.is_dir() and _SNAP_NAME.match(p.name)),
                   key=lambda p: (int(p.name.split("-")[0]), p.name))
    for p in names[:-keep] if len(names) > keep else []:
        if exclude is None or p != exclude:
            shutil.rmtree(p, ignore_errors=True)


def _snapshots_newest_first(root: Path, exclude: Path | None) -> list[Path]:
    if not root.is_dir():
        return []
    return sorted((p for p in root.iterdir() if p.is_dir() and _SNAP_NAME.match(p.name)
                   and p != exclude), key=lambda p: (int(p.name.split("-")[0]), p.name),
                  reverse=True)


def newest_config(root: Path, *, exclude: Path | None = None) -> Path | None:
    """The `config` of the newest snapshot under `root` that has one: the negotiator's
    config to use when a capture cannot read it."""
    names = _snapshots_newest_first(root, exclude)
    return next((p / "config" for p in names if (p / "config").is_file()), None)


def _newest_meta(root: Path, exclude: Path | None) -> dict:
    """The newest snapshot's meta.json under `root` ({} when there is none, or it
    cannot be read as a JSON object)."""
    return _newest(root, exclude)[1]


def _newest(root: Path, exclude: Path | None) -> tuple[Path | None, dict]:
    """The newest snapshot directory under `root` (None: none) and its meta.json ({}
    when it cannot be read as a JSON object)."""
    for p in _snapshots_newest_first(root, exclude)[:1]:
        try:
            meta = json.loads((p / "meta.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return p, {}
        return p, meta if isinstance(meta, dict) else {}
    return None, {}


def newest_projection(root: Path, *, exclude: Path | None = None
                      ) -> tuple[list | None, list | None]:
    """The job projection of the newest snapshot under `root` and the attributes its
    jobs captured by requests were asked (its meta.json's "job_projection" and
    "job_request_attrs"), each None when it has none: what the next capture's schedd
    queries most likely ask (the capture checks it)."""
    meta = _newest_meta(root, exclude)
    got = [meta.get(k) for k in ("job_projection", "job_request_attrs")]
    return tuple(v if isinstance(v, list) else None for v in got)


# an earlier snapshot's slots seed a pass's slot ads when it is at most this old: a
# startd sends its ads every UPDATE_INTERVAL (five minutes by default) whether they
# changed or not, so an older one's slots have nearly all been heard from since
SEED_AGE = 600


def slot_seed(root: Path, now: int, *, exclude: Path | None = None
              ) -> tuple[Path, list | None] | None:
    """The newest snapshot's slots file and the projection its slot ads were fetched
    with (its meta.json's "slot_projection"; None: whole ads), when it was captured at
    most SEED_AGE seconds before `now` (adapters/slot_cache.py SlotCache.seed); else
    None."""
    p, meta = _newest(root, exclude)
    at, projection = meta.get("captured_at"), meta.get("slot_projection")
    if (p is None or not isinstance(at, int) or isinstance(at, bool)
            or not 0 <= now - at <= SEED_AGE
            or not (projection is None or isinstance(projection, list)
                    and all(isinstance(n, str) for n in projection))
            or not (p / "slots.ads").is_file()):
        return None
    return p / "slots.ads", projection


def newest_slot_projection(root: Path, *, exclude: Path | None = None) -> list | str | None:
    """What the next capture asks the collector for first (the capture checks it): the
    newest snapshot's "slot_projection_next" (its capture was whole where a projection
    was wanted: the names it found wanted, or "whole" again), else its
    "slot_projection"; None when it has neither or there is no snapshot."""
    meta = _newest_meta(root, exclude)
    for key in ("slot_projection_next", "slot_projection"):
        if isinstance(meta.get(key), (list, str)):
            return meta[key]
    return None
