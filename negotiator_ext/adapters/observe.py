"""What the real negotiator did, as shadow mode reads it from the pool (issue 5).

Three sources, each turned into the plain records of `core.records`:

  * the negotiator's own ad (`condor_status -negotiator -long`): its
    `LastNegotiationCycle*<k>` history, k = 0 the newest (`real_cycles`);
  * the MatchLog, when the pool keeps one (`MATCH_LOG`): one `Matched` line per match,
    one `Rejected` line per rejected request (`read_matchlog`);
  * the pool's snapshot: the Accounting ads (the real accountant's state after its last
    cycle), the claims in the slot ads and the submitter ads, set beside what our cycle
    decided on the same snapshot (`observe_pass`).

Nothing here decides anything: `core.compare` compares, the ledger records.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import math
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Iterator, Mapping, NamedTuple, Sequence
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from ..core import classads
from ..core.accountant import round6
from ..core.groups import is_group_name
from ..core.records import GroupObs, MatchEntry, RealCycle, SubmitterObs
from ..errors import InputError
from .accounting_ads import plain_ad

if TYPE_CHECKING:       # not imported at run time: the cycle imports most of the package
    from ..cycle import CycleResult
    from ..pool import Pool

# ---- the negotiator ad's cycle history ---------------------------------------------------

_PREFIX = "lastnegotiationcycle"
_CYCLE_INDEX = re.compile(r"lastnegotiationcycletime(\d+)\Z")
_NAME_LIST = re.compile(r"[,\s]+")


def _lower_map(ad: Any) -> dict[str, Any]:
    """The ad's attributes as {lower-case name: Python value} (ClassAd names are
    case-insensitive); a classad2 ad is evaluated through `plain_ad`."""
    d = plain_ad(ad) if isinstance(ad, classads.ClassAd) else dict(ad)
    return {str(k).lower(): v for k, v in d.items()}


def _number(v: Any) -> float | None:
    return float(v) if classads.is_number(v) else None


def _integer(v: Any) -> int | None:
    x = _number(v)
    return int(x) if x is not None and x == x and abs(x) != float("inf") else None


def _names(v: Any) -> tuple[str, ...]:
    """A comma-separated name list of the negotiator ad ("a@x, b@x") as a tuple."""
    if not isinstance(v, str):
        return ()
    return tuple(n for n in _NAME_LIST.split(v) if n)


def real_cycles(negotiator_ad: Any) -> list[RealCycle]:
    """The negotiator ad's `LastNegotiationCycle*<k>` history, newest (k = 0) first.

    `negotiator_ad` is a classad2 ad or a plain dict. An entry whose
    `LastNegotiationCycleTime<k>` is missing or 0 is skipped: the negotiator publishes
    every slot of its history, and slots no cycle has filled yet read 0. A missing or
    non-numeric field of a kept entry is None (lists: empty)."""
    d = _lower_map(negotiator_ad)
    indices = sorted(int(m.group(1)) for k in d if (m := _CYCLE_INDEX.match(k)))
    out = []
    for k in indices:
        def get(attr: str) -> Any:
            return d.get(f"{_PREFIX}{attr.lower()}{k}")
        t = _integer(get("Time"))
        if not t:
            continue
        out.append(RealCycle(
            time=t, end=_integer(get("End")), duration=_number(get("Duration")),
            phase_durations=tuple(_number(get(f"Phase{i}Duration")) for i in range(1, 5)),
            matches=_integer(get("Matches")), rejections=_integer(get("Rejections")),
            active_submitters=_integer(get("ActiveSubmitterCount")),
            idle_jobs=_integer(get("NumIdleJobs")),
            candidate_slots=_integer(get("CandidateSlots")),
            submitters_failed=_names(get("SubmittersFailed")),
            submitters_out_of_time=_names(get("SubmittersOutOfTime")),
            submitters_share_limit=_names(get("SubmittersShareLimit")),
            schedds_out_of_time=_names(get("ScheddsOutOfTime"))))
    return out


# ---- the MatchLog -------------------------------------------------------------------------

# The line's time, as dprintf writes it: the default DEBUG_TIME_FORMAT "%m/%d/%y %H:%M:%S"
# (with D_SUB_SECOND: ".mmm"), an ISO-like "%Y-%m-%d %H:%M:%S", or a Unix time
# (D_TIMESTAMP). dprintf's optional headers ("(pid:123)", "(D_MATCH)", ...) may follow.
_TIME_PREFIX = (
    r"\s*(?:(?P<mdy>\d{2}/\d{2}/\d{2})\s+(?P<hms>\d{1,2}:\d{2}:\d{2})(?:[.,]\d+)?"
    r"|(?P<ymd>\d{4}-\d{2}-\d{2})[T ](?P<hms2>\d{1,2}:\d{2}:\d{2})(?:[.,]\d+)?"
    r"|(?P<epoch>\d{9,11})(?:\.\d+)?)"
    r"\s+(?:\([^()\s]*\)\s+)*")
_LINE = re.compile(_TIME_PREFIX + r"(?P<kind>Matched|Rejected)\s+(?P<rest>.*)")
# Matched <job> <submitter> <schedd sinful> preempting <none | user (AccountingGroup=g)>
#   <startd sinful> <slot name>[ (offline)]
_MATCHED = re.compile(
    r"(?P<job>\S+)\s+(?P<submitter>\S+)\s+(?P<schedd>\S+)\s+preempting\s+"
    r"(?P<victim>.*?)\s+(?P<startd><[^<>\s]*>)\s+(?P<slot>\S+)")
# the same without a startd sinful in angle brackets (an address-less ad)
_MATCHED_PLAIN = re.compile(
    r"(?P<job>\S+)\s+(?P<submitter>\S+)\s+(?P<schedd>\S+)\s+preempting\s+"
    r"(?P<victim>none|\S+(?:\s+\([^()]*\))?)\s+(?P<startd>\S+)\s+(?P<slot>\S+)")

_BLOCK = 1 << 16


def _zone(tz: Any) -> _dt.tzinfo | None:
    if tz is None or isinstance(tz, _dt.tzinfo):
        return tz
    if isinstance(tz, str):
        try:
            return ZoneInfo(tz)
        except (ZoneInfoNotFoundError, ValueError):
            raise InputError("tz", f"unknown time zone {tz!r}") from None
    raise TypeError(f"tz must be a tzinfo, a zone name or None, not {type(tz).__name__}")


class _Lines:
    """Parses MatchLog lines into (time, "Matched" | "Rejected", MatchEntry | None), or
    None for a line it cannot read. Times are the central manager's local time in `zone`
    (None: this host's local time zone); each distinct time text is converted once."""

    def __init__(self, zone: _dt.tzinfo | None):
        self.zone = zone
        self._times: dict[tuple[str | None, ...], int | None] = {}
        self.unparsed = 0

    def time_of(self, m: re.Match) -> int | None:
        key = (m["mdy"], m["hms"], m["ymd"], m["hms2"], m["epoch"])
        if key in self._times:
            return self._times[key]
        t = None
        try:
            if m["epoch"]:
                t = int(m["epoch"])
            else:
                if m["mdy"]:
                    mo, d, yy = (int(x) for x in m["mdy"].split("/"))
                    y = 2000 + yy if yy < 69 else 1900 + yy     # strptime's %y
                    hms = m["hms"]
                else:
                    y, mo, d = (int(x) for x in m["ymd"].split("-"))
                    hms = m["hms2"]
                h, mi, s = (int(x) for x in hms.split(":"))
                when = _dt.datetime(y, mo, d, h, mi, s, tzinfo=self.zone)
                t = int(when.timestamp())   # naive: this host's local time
        except (ValueError, OverflowError, OSError):
            t = None
        if len(self._times) > 4096:
            self._times.clear()
        self._times[key] = t
        return t

    def parse(self, line: str) -> tuple[int, str, MatchEntry | None] | None:
        m = _LINE.match(line)
        if m is None:
            if line.strip():
                self.unparsed += 1
            return None
        t = self.time_of(m)
        if t is None:
            self.unparsed += 1
            return None
        if m["kind"] == "Rejected":
            return t, "Rejected", None
        rest = m["rest"]
        mm = _MATCHED.match(rest) or _MATCHED_PLAIN.match(rest)
        if mm is None:
            self.unparsed += 1
            return None
        victim = mm["victim"].strip()
        preempting = None if victim in ("", "none") else victim.split()[0]
        return t, "Matched", MatchEntry(job=mm["job"], submitter=mm["submitter"],
                                        slot=mm["slot"], preempting=preempting, time=t)


def _blocks_backward(f, limit: float = math.inf) -> Iterator[tuple[bytes, int]]:
    """Binary file `f` read by blocks from its end (a rotated MatchLog can be large; only
    its tail is read): each block's whole lines, last block first, as (those lines joined
    by newlines, how many bytes of the file come after them); the file's first line comes
    last, alone. No block is read once more than `limit` bytes have been (the first line
    is then not given)."""
    f.seek(0, os.SEEK_END)
    end = pos = f.tell()
    carry = b""
    while pos > 0 and end - pos <= limit:
        n = min(_BLOCK, pos)
        pos -= n
        f.seek(pos)
        chunk = f.read(n) + carry
        cut = chunk.find(b"\n")
        if cut < 0:                 # one line longer than the blocks read so far
            carry = chunk
            continue
        carry = chunk[:cut]
        yield chunk[cut + 1:], end - (pos + len(chunk))
    if pos == 0:
        yield carry, end - len(carry)


def _backward(f) -> Iterator[bytes]:
    """The lines of binary file `f`, last first (`_blocks_backward`)."""
    for body, _ in _blocks_backward(f):
        yield from reversed(body.split(b"\n"))


def _backward_marked(f, marks: tuple[bytes, ...], limit: int
                     ) -> Iterator[tuple[bytes, int]]:
    """The lines of binary file `f` that hold one of `marks`, last first, each with how
    many bytes `_backward` would have gone through to reach it (every line and its
    newline from the file's end, this one's included); a block of lines without a mark
    is not split (a NegotiatorLog at D_FULLDEBUG writes many lines a match, and two a
    cycle are wanted). No block is read once more than `limit` bytes have been."""
    for body, through in _blocks_backward(f, limit):
        if not any(m in body for m in marks):
            continue
        for line in reversed(body.split(b"\n")):
            through += len(line) + 1
            if any(m in line for m in marks):
                yield line, through


def _decode(b: bytes) -> str:
    return b.decode("utf-8", errors="replace")


def read_matchlog(path: str | Path, *, since: int | None = None, until: int | None = None,
                  tz: Any = None, stats: dict[str, int] | None = None
                  ) -> tuple[list[MatchEntry], int]:
    """The `Matched` entries of the MatchLog at `path` whose time is within
    [since, until] (either bound may be None), in log order, and the number of
    `Rejected` lines in that window.

    Timestamps are the central manager's local time: `tz` is its zone (a tzinfo or a
    zone name; None: this host's local zone). Lines that cannot be read (other messages,
    an unknown time format) are ignored; when `stats` is given, stats["unparsed"] gets
    their count.

    With `since`, the file is read backwards by blocks from its end and reading stops
    at the first line older than `since`, so a large log costs only its tail. If the
    whole file is newer than `since`, the rotated log (`<path>.old`, as MAX_MATCH_LOG
    rotates it) is read the same way when it exists and is readable, so a window that
    straddles a rotation is complete. A missing or unreadable `path` raises InputError
    naming it."""
    p = Path(path)
    lines = _Lines(_zone(tz))
    matches: list[MatchEntry] = []
    rejected = 0

    def keep(got) -> None:
        nonlocal rejected
        t, kind, entry = got
        if until is not None and t > until:
            return
        if kind == "Rejected":
            rejected += 1
        else:
            matches.append(entry)

    try:
        with open(p, "rb") as f:
            if since is None:
                for raw in f:
                    got = lines.parse(_decode(raw))
                    if got is not None:
                        keep(got)
            else:
                newest_first: list = []
                crossed = _read_back(f, lines, since, newest_first)
    except OSError as exc:
        raise InputError(str(p), f"cannot read the MatchLog: {exc.strerror or exc}") from None

    if since is not None:
        if not crossed:
            old = p.with_name(p.name + ".old")
            try:
                with open(old, "rb") as f:
                    _read_back(f, lines, since, newest_first)
            except OSError:
                pass            # no rotated log: the window starts with this file
        for got in reversed(newest_first):
            keep(got)
    if stats is not None:
        stats["unparsed"] = lines.unparsed
    return matches, rejected


def _read_back(f, lines: _Lines, since: int, out: list) -> bool:
    """Parse `f` last line first into `out` until a line older than `since`; True when
    such a line was met (the window starts in this file)."""
    for raw in _backward(f):
        got = lines.parse(_decode(raw))
        if got is None:
            continue
        if got[0] < since:
            return True
        out.append(got)
    return False


# ---- the NegotiatorLog's cycle boundaries ------------------------------------------------

# "---------- Started Negotiation Cycle ----------" / "... Finished ..." (D_ALWAYS, so at
# every debug level), after the same time prefixes as the MatchLog's lines. A cycle the
# negotiator aborts in phase 1 ("Aborting negotiation cycle") has a Started line and no
# Finished line; it is no cycle (it keeps no statistics either).
# "Phase 2:  Performing accounting ..." comes right before the accountant updates the
# priorities (UpdatePriorities: the time the real cycle's priorities are computed at).
# "Negotiation with X skipped because of time limits:" (its submitter's or its schedd's
# time spent; the next line says which) and "... skipped because MAX_TIME_PER_CYCLE of N
# secs exceeded" name a turn a time limit skipped (D_ALWAYS too): a submitter served in
# an earlier spin of the pie and skipped in a later one got less than it would have.
_CYCLE_LINE = re.compile(_TIME_PREFIX
                         + r"(?:-+ (?P<kind>Started|Finished) Negotiation Cycle -+"
                           r"|(?P<phase>Phase 2):\s+Performing accounting\b.*"
                           r"|\s*Negotiation with (?P<skipped>\S+) skipped because "
                           r"(?:of time limits:|MAX_TIME_PER_CYCLE\b).*)\s*$")
_CYCLE_MARK = (b"Started Negotiation Cycle", b"Finished Negotiation Cycle",
               b"Phase 2:  Performing accounting", b" skipped because ")


def read_negotiator_log(path: str | Path, *, since: int, tz: Any = None,
                        max_bytes: int = 256 << 20) -> tuple[list[RealCycle], bool]:
    """The negotiation cycles the NegotiatorLog at `path` shows finished, from the last
    one that started before `since` on, oldest first, as RealCycles with only `time` (the
    Started line's second: the ad's LastNegotiationCycleTime) and `end` (the Finished
    line's) known; and whether the log reaches back to `since` (a Started line older than
    `since` was met, in `path` or in its rotated `<path>.old`), so that no cycle after
    `since` is missing. A cycle still running (no Finished line yet) is not listed.

    The file is read backwards from its end and at most `max_bytes` of it (and of the
    rotated log) are read: a log that does not reach back within that says so through
    the flag. Times are the central manager's local time in `tz`, as for the MatchLog.
    Each cycle's `submitters_skipped` are the turns it logged as skipped by a time limit.
    A missing or unreadable `path` raises InputError naming it."""
    p = Path(path)
    zone_lines = _Lines(_zone(tz))
    events: list[tuple[int, str, str | None]] = []        # newest first
    budget = [max_bytes]

    def back(f) -> bool:
        left = budget[0]
        for raw, read in _backward_marked(f, _CYCLE_MARK, left):
            if read > left:
                budget[0] = left - read
                return False
            m = _CYCLE_LINE.match(_decode(raw))
            if m is None:
                continue
            t = zone_lines.time_of(m)
            if t is None:
                continue
            events.append((t, m["kind"] or m["phase"] or "skipped", m["skipped"]))
            if m["kind"] == "Started" and t < since:
                return True
        # read to its start, or past the budget: the file's bytes count whole, as
        # line by line (a line and its newline each, the first without one)
        budget[0] = left - (f.seek(0, os.SEEK_END) + 1)
        return False

    try:
        with open(p, "rb") as f:
            reached = back(f)
    except OSError as exc:
        raise InputError(str(p), f"cannot read the NegotiatorLog: {exc.strerror or exc}") from None
    if not reached and budget[0] > 0:
        try:
            with open(p.with_name(p.name + ".old"), "rb") as f:
                reached = back(f)
        except OSError:
            pass                # no rotated log: the history starts with this file
    cycles: list[RealCycle] = []
    start: int | None = None
    accounting: int | None = None
    skipped: dict[str, None] = {}             # (in the log's order, once each)
    for t, kind, name in reversed(events):    # oldest first
        if kind == "Started":
            start = t                         # a Started without Finished was aborted
            accounting = None
            skipped = {}
        elif kind == "Phase 2":
            if start is not None:
                accounting = t
        elif kind == "skipped":
            if start is not None:
                skipped[name] = None
        elif start is not None:
            cycles.append(RealCycle(time=start, end=t, duration=float(t - start),
                                    accounting_time=accounting,
                                    submitters_skipped=tuple(skipped)))
            start = accounting = None
            skipped = {}
    return cycles, reached


def merge_cycles(from_log: Sequence[RealCycle], from_ad: Sequence[RealCycle]
                 ) -> list[RealCycle]:
    """The NegotiatorLog's cycles with the negotiator ad's figures where the ad lists the
    same cycle (its start within a second: the log line and the cycle's clock reading
    are taken one after the other; the log's times are kept), oldest first; the ad's
    cycles the log does not show (older than the log's reach) are kept as they are."""
    ad = sorted(from_ad, key=lambda c: c.time)
    used: set[int] = set()
    out: list[RealCycle] = []
    for c in from_log:
        hit = next((i for i, a in enumerate(ad) if i not in used and abs(a.time - c.time) <= 1
                    and (a.end is None or c.end is None or abs(a.end - c.end) <= 1)), None)
        if hit is None:
            out.append(c)
        else:           # the log's times, so that a cycle keeps one identity in the ledger
            used.add(hit)
            out.append(dataclasses.replace(ad[hit], time=c.time, end=c.end,
                                           accounting_time=c.accounting_time,
                                           submitters_skipped=c.submitters_skipped))
    first = min((c.time for c in from_log), default=None)
    out.extend(a for i, a in enumerate(ad) if i not in used and (first is None or a.time < first))
    return sorted(out, key=lambda c: c.time)


# ---- one pass: the real accountant and our cycle, per principal -------------------------

def _accounting_dicts(ads: Iterable[Any] | None) -> list[dict[str, Any]]:
    return [plain_ad(ad) if isinstance(ad, classads.ClassAd) else dict(ad) for ad in ads or ()]


class Observation(NamedTuple):
    """What `observe_pass` returns: a named 4-tuple (unpack all four, or index it)."""
    submitters: list[SubmitterObs]
    groups: list[GroupObs]
    accountant_time: int | None       # the real accountant's LastUpdate (None: no ads)
    warnings: list[str]               # Accounting ads skipped or missing figures


def observe_pass(pool: Pool, result: CycleResult | None = None) -> Observation:
    """The real side of one pass from `pool`'s snapshot, beside our cycle's `result` on
    the same snapshot (None: real side only).

    Returns an Observation (submitters, groups, accountant_time, warnings):
      * one SubmitterObs per accounting principal: every Accounting ad (submitters and
        group records), then, sorted by name, the submitters only our cycle, a submitter
        ad or a claimed slot names. Real figures come from the Accounting ads (RUP =
        Priority / PriorityFactor, rounded to 6 decimals as the accountant stores it);
        claimed_weight is the weight of the slots the accountant charges to the name
        (for a group record: to its submitters, subgroups included, as
        HierWeightedResourcesUsed counts); idle/running jobs sum the name's submitter
        ads as the negotiator keeps them. Shadow figures come from `result.submitters`.
      * one GroupObs per group: our cycle's group rows in tree order, then groups only
        the Accounting ads name.
      * the real accountant's LastUpdate (the largest of the ads; None without ads);
      * warnings, one line each: a record without its Priority or PriorityFactor (its real
        priority is unknown).

    The ads have passed `load_pool` (adapters.accounting_ads refuses an ad without a
    Name, a repeated record and a field that is not a number); a missing field takes the
    SubmitterObs default (None for the priorities)."""
    warnings: list[str] = []
    source = pool.snapshot.accounting_source or str(pool.snapshot.directory)
    ads = _accounting_dicts(pool.snapshot.accounting)
    last_update = None
    for d in ads:
        t = _integer(d.get("LastUpdate"))
        if t is not None:
            last_update = t if last_update is None else max(last_update, t)

    # claims in the slot ads
    claimed: dict[str, float] = {}
    hier_claimed: dict[str, float] = {}
    if pool.claimed_weights is not None:
        claimed.update(pool.claimed_weights)       # kept by the caller
    else:
        # (SlotUsage.charged_customer read inline: this runs over every slot each pass)
        which = 1 if pool.config.discount_suspended_resources else 0
        get = claimed.get
        for s in pool.every_slot()[1]:
            c = s.charged[which]
            if c is not None:
                claimed[c] = get(c, 0.0) + s.weight
    for c, w in claimed.items():             # once per customer, not per slot
        for part in pool.groups.charged_records(c)[1]:
            hier_claimed[part] = hier_claimed.get(part, 0.0) + w
    # jobs in the submitter ads
    jobs: dict[str, list[int]] = {}
    for d in pool.submitter_ads():
        counts = jobs.setdefault(d["Name"], [0, 0])
        counts[0] += max(_integer(d.get("IdleJobs")) or 0, 0)
        counts[1] += max(_integer(d.get("RunningJobs")) or 0, 0)
    shadow = {row["name"]: row for row in (result.submitters if result is not None else ())}

    def shadow_fields(name: str) -> dict[str, Any]:
        row = shadow.get(name)
        if row is None:
            return {}
        return {"shadow_eup": _number(row.get("eup")),
                "shadow_share": _number(row.get("submitter_share")),
                "shadow_limit": _number(row.get("limit")),
                "shadow_submitter_limit": _number(row.get("submitter_limit")),
                "shadow_matches": int(row.get("matched") or 0),
                "shadow_match_weight": float(row.get("matched_weight") or 0.0)}

    def common(name: str, is_group: bool) -> dict[str, Any]:
        idle, running = jobs.get(name, (0, 0))
        return {"claimed_weight": (hier_claimed if is_group else claimed).get(name, 0.0),
                "idle_jobs": idle, "running_jobs": running, **shadow_fields(name)}

    submitters: list[SubmitterObs] = []
    real_groups: dict[str, dict[str, Any]] = {}
    seen: set[str] = set()
    for i, d in enumerate(ads, start=1):
        name = d["Name"]
        seen.add(name)
        lacking = [a for a in ("Priority", "PriorityFactor") if a not in d]
        if lacking:
            warnings.append(f"{source}: accounting ad {i} ({name}) has no "
                            f"{' or '.join(lacking)}: its real priority is unknown")
        flag = d.get("IsAccountingGroup")
        is_group = flag if isinstance(flag, bool) else is_group_name(name)
        group = d.get("AccountingGroup")
        if not isinstance(group, str):
            group = name if is_group else pool.groups.assigned_group(name).name
        factor, eup = _number(d.get("PriorityFactor")), _number(d.get("Priority"))
        lease = _integer(d.get("PriorityFactorLeaseExpiration")) or 0
        pre = _number(d.get("PriorityFactorPreLeaseValue"))
        running_lease = lease > 0 and (last_update is None or lease > last_update)
        submitters.append(SubmitterObs(
            name=name, group=group, is_group=is_group, factor=factor,
            policy_factor=pre if running_lease and pre is not None else factor,
            factor_lease_expires=lease,
            floor=_int_or(d, "Floor", 0),
            floor_lease_expires=_int_or(d, "FloorLeaseExpiration", 0),
            ceiling=_int_or(d, "Ceiling", -1),
            ceiling_lease_expires=_int_or(d, "CeilingLeaseExpiration", 0),
            real_rup=round6(eup / factor) if eup is not None and factor else None,
            real_eup=eup,
            real_usage=_float_or(d, "WeightedResourcesUsed", 0.0),
            resources_used=_float_or(d, "ResourcesUsed", 0.0),
            hier_usage=_float_or(d, "HierWeightedResourcesUsed", 0.0),
            real_share=_number(d.get("SubmitterShare")),
            real_limit=_number(d.get("SubmitterLimit")),
            last_usage_time=_int_or(d, "LastUsageTime", 0),
            begin_usage_time=_int_or(d, "BeginUsageTime", 0),
            **common(name, is_group)))
        if is_group:
            real_groups[name] = d

    extra = (set(shadow) | set(jobs) | set(claimed)) - seen
    for name in sorted(extra):
        is_group = is_group_name(name)
        row = shadow.get(name) or {}
        group = row.get("group") or (name if is_group else pool.groups.assigned_group(name).name)
        submitters.append(SubmitterObs(name=name, group=group, is_group=is_group,
                                       **common(name, is_group)))

    groups: list[GroupObs] = []
    listed: set[str] = set()
    for row in (result.groups if result is not None else ()):
        name = row["name"]
        listed.add(name)
        groups.append(GroupObs(
            name=name, **_real_group(real_groups.get(name)),
            shadow_quota=_number(row.get("effective_quota")),
            shadow_allocated=_number(row.get("allocated")),
            shadow_usage_after=_number(row.get("usage")),
            shadow_matches=int(row.get("matched") or 0)))
    for name, d in real_groups.items():
        if name not in listed:
            groups.append(GroupObs(name=name, **_real_group(d)))
    return Observation(submitters, groups, last_update, warnings)


def _real_group(d: Mapping[str, Any] | None) -> dict[str, Any]:
    if d is None:
        return {}
    return {"real_quota": _number(d.get("EffectiveQuota")),
            "config_quota": _number(d.get("ConfigQuota")),
            # a record without it has none (the accountant writes only what is not 0)
            "real_usage": _float_or(d, "WeightedResourcesUsed", 0.0),
            "real_requested": _number(d.get("Requested"))}


def _int_or(d: Mapping[str, Any], attr: str, default: int) -> int:
    v = _integer(d.get(attr))
    return default if v is None else v


def _float_or(d: Mapping[str, Any], attr: str, default: float) -> float:
    v = _number(d.get(attr))
    return default if v is None else v
