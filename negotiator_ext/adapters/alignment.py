"""A shadow pass aligned with the real cycle it predicts (issue 32): the NegotiatorLog
followed as it is written (`CycleFollower`), a capture taken as a cycle starts checked
for the cycle's own matches (`late_capture`), and what a snapshot held for explaining a
disagreement later (`pool_digest`, for core.disagreement).

The negotiator writes "Started Negotiation Cycle" and then reads the collector: a shadow
loop that captures the pool right then sees the pool the real cycle sees, where one that
captured seconds before it may not (a job submitted, a slot freed, a schedd's submitter
ads arriving in between). `CycleFollower.poll` reads only what was appended since its
last call (from the log's end when it starts) and returns the Started lines' times; a
rotated log (MAX_NEGOTIATOR_LOG: the file replaced, or shorter than what was read) is
followed from its start. A log that cannot be read gives nothing and `problem` says why,
once: the loop then runs at its interval, unaligned.
"""

from __future__ import annotations

import math
import os
import re
from itertools import chain, repeat
from pathlib import Path
from typing import Any

from ..core import classads
from ..core.adtext import AdView, TextValues
from .observe import _TIME_PREFIX, _Lines, _decode, _zone

_STARTED = re.compile(_TIME_PREFIX + r"-+ Started Negotiation Cycle -+\s*$")
_READ_AT_MOST = 4 << 20         # bytes read per poll (a log written faster is skipped)


class CycleFollower:
    """The Started lines appended to the NegotiatorLog at `path` since the last poll."""

    def __init__(self, path: str | Path, tz: Any = None):
        self.path = Path(path)
        self.lines = _Lines(_zone(tz))
        self.problem: str | None = None
        self._ino: int | None = None
        self._pos = 0
        self._rest = b""
        self._open(at_end=True)

    def _open(self, *, at_end: bool) -> os.stat_result | None:
        try:
            st = self.path.stat()
        except OSError as exc:
            self.problem = f"{self.path}: cannot read the NegotiatorLog: {exc.strerror or exc}"
            self._ino = None
            return None
        self._ino, self._pos, self._rest = st.st_ino, st.st_size if at_end else 0, b""
        return st

    def poll(self) -> list[int]:
        """The start times (epoch) of the cycles whose Started line was written since the
        last poll, oldest first."""
        try:
            st = self.path.stat()
        except OSError as exc:
            self.problem = f"{self.path}: cannot read the NegotiatorLog: {exc.strerror or exc}"
            return []
        if self._ino is None or st.st_ino != self._ino or st.st_size < self._pos:
            # a new or rotated log: read it from its start (the first poll after a
            # failure to stat it starts at its end)
            fresh = self._ino is None
            self._ino, self._pos, self._rest = st.st_ino, (st.st_size if fresh else 0), b""
        if st.st_size == self._pos:
            return []
        try:
            with open(self.path, "rb") as f:
                f.seek(self._pos)
                data = f.read(min(st.st_size - self._pos, _READ_AT_MOST))
        except OSError as exc:
            self.problem = f"{self.path}: cannot read the NegotiatorLog: {exc.strerror or exc}"
            return []
        self.problem = None
        self._pos += len(data)
        data = self._rest + data
        cut = data.rfind(b"\n")
        if cut < 0:
            self._rest = data[-65536:]
            return []
        self._rest, data = data[cut + 1:][-65536:], data[:cut]
        out = []
        for raw in data.split(b"\n"):
            if b"Started Negotiation Cycle" not in raw:
                continue
            m = _STARTED.match(_decode(raw))
            if m is not None:
                t = self.lines.time_of(m)
                if t is not None:
                    out.append(t)
        return out


def late_capture(pool, start: int) -> int:
    """How many jobs and slots of `pool`'s snapshot a real cycle that started at `start`
    had already matched when the capture read them: jobs running (JobStatus 2) since
    `start` or later (EnteredCurrentStatus: the job of a match starts on its own, soon
    after the match, and a small pool's cycle is over in a fraction of a second), slots
    claimed since then (EnteredCurrentState)."""
    from ..core import adtext
    values = adtext.TextValues()
    late = 0
    for table in pool.snapshot.jobs.values():
        table = adtext.as_text_ads(table)
        names = table.store.names
        for row in table.rows:
            job = adtext.Job(row, names, values)
            if classads.as_number(job.value("jobstatus")) != 2:
                continue
            t = classads.as_number(job.value("enteredcurrentstatus"))
            if t is not None and t >= start:
                late += 1
    # and the slots the collector heard were claimed since (a slower capture)
    # (through their texts: a loop keeps its slot ads, and most of a busy pool's are
    # claimed)
    for ad, slot, row in _slots_and_texts(pool):
        if (slot.state or "").lower() in ("claimed", "preempting"):
            try:
                t = classads.as_number(_reader(ad, row, values)("EnteredCurrentState"))
            except Exception:       # a hostile ad: not this check's to report
                t = None
            if t is not None and t >= start:
                late += 1
    return late


def pool_digest(pool, result) -> dict:
    """What a pass's snapshot held, for explaining a disagreement later
    (core.disagreement.digest): the submitters with idle jobs, the idle jobs our cycle
    was offered, every slot (claimed or not) and when the collector last heard from it,
    our candidate slots."""
    from ..core.disagreement import digest
    idle: dict[str, int] = {}
    on: dict[str, set[str]] = {}            # submitter -> the schedds it has jobs on
    heard_subs: list[tuple[str, str, int]] = []     # (Name, ScheddName, LastHeardFrom)
    for d in pool.submitter_ads():
        try:
            n = int(d.get("IdleJobs") or 0)
        except (TypeError, ValueError):
            n = 0
        idle[d["Name"]] = idle.get(d["Name"], 0) + max(n, 0)
        if isinstance(d.get("ScheddName"), str):
            on.setdefault(d["Name"], set()).add(d["ScheddName"])
            t = d.get("LastHeardFrom")
            # (a finite number: int() of an infinity raises; build_pool refuses one
            # before this, but the digest does not count on it)
            if isinstance(t, (int, float)) and not isinstance(t, bool) and math.isfinite(t):
                heard_subs.append((d["Name"], d["ScheddName"], int(t)))
    jobs: dict[str, list[str]] = {}
    recent: dict[str, int] = {}
    since = (pool.snapshot.captured_at or 0) - RECENT
    for (sub, _), queue in result.queues.items():
        jobs.setdefault(sub, []).extend([e[0] for e in queue.jobs])
        for e in queue.jobs:
            text = dict(e[3] or ()).get("enteredcurrentstatus")
            if text is None:
                continue
            try:                # (int reads past the white space around the number)
                t = int(text if type(text) is str else str(text))
            except ValueError:
                continue
            if t >= since:
                recent[e[0]] = t
    usage = pool.every_slot()[1]
    slots = {s.name: bool(s.remote_user) or (s.state or "").lower() == "claimed"
             for s in usage}
    # whose each claim is (the accountant's customer, a submitter name: AccountingGroup,
    # else RemoteUser)
    owners = {s.name: s.accounting_group or s.remote_user for s in usage
              if slots[s.name] and (s.accounting_group or s.remote_user)}
    heard: dict[str, int] = {}
    free: dict[str, float] = {}
    entered: dict[str, int] = {}
    since_heard = (pool.snapshot.captured_at or 0) - HEARD
    # only the recent times are of use (a change between two passes, or after the cycle
    # began): the digest of a large pool keeps the slots heard from in the last minutes
    values = TextValues()
    for ad, s, row in _slots_and_texts(pool):
        value = _reader(ad, row, values)
        try:
            e = classads.as_number(value("EnteredCurrentState"))
            if e is not None and e >= since:
                entered[s.name] = int(e)
            t = classads.as_number(value("LastHeardFrom"))
            if t is not None and t < since_heard:
                t = None
            if value("PartitionableSlot") is True:
                cpus = classads.as_number(value("Cpus"))
                if cpus is not None:
                    free[s.name] = cpus
        except Exception:           # a hostile ad: not the digest's to report
            t = None
        if t is not None:
            heard[s.name] = int(t)
    return digest(submitters=idle, idle_jobs=jobs, slots=slots,
                  candidate_slots=result.trimmed_slots, heard=heard, free_cpus=free,
                  recent=recent, entered=entered, captured=pool.snapshot.captured_at,
                  owners=owners,
                  # (kept only where several schedds can each run out of time)
                  schedds=on if len({s for v in on.values() for s in v}) > 1 else None,
                  submitters_heard=heard_subs)


# what the digest reads of every slot, and late_capture of a claimed one (lower-case)
_READ = frozenset(("enteredcurrentstate", "lastheardfrom", "partitionableslot", "cpus"))


def _slots_and_texts(pool):
    """(ad, usage, texts row or None) of every slot in the pool (`Pool.every_slot`): the
    texts are the pool's (`Pool.slot_texts`) where it has them for those ads."""
    ads, usage = pool.every_slot()
    rows = pool.slot_texts if ads is pool.slot_ads else ()
    return zip(ads, usage, chain(rows, repeat(None)))


def _reader(ad, row, values):
    """How the digest and late_capture read a slot's attributes (`_READ`): through its
    texts (`row`, its (lower-case name, text) pairs or a dict of them) when its ad is
    one not parsed yet that nothing has written those attributes into, so a pool's slot
    ads stay unparsed (a loop keeps them, parsed or not, from pass to pass); else in the
    ad itself. Either way the value is the one the ad gives."""
    if row is not None and type(ad) is classads.LazyAd and not ad.made() and not any(
            attr.lower() in _READ for attr in ad.pending_writes()):
        texts = row
        if type(row) is not dict:
            texts = {k: t for k, t in row if k in _READ}
            if not all(values.literal(t)[0] for t in texts.values()):
                texts = dict(row)       # (an expression: the texts it names too)
        return AdView(ad, texts, values).value
    return lambda attr: classads.eval_attr(ad, attr)


# an idle job whose status began this many seconds before the capture, or later, is
# kept with its time in the digest: a capture aligned a moment late may see a job the
# real cycle did not, and the next pass's says which jobs arrived between a capture and
# the cycle (two passes' captures further apart, as at a longer interval, see fewer)
RECENT = 120
# a slot's LastHeardFrom is kept when this recent: it tells a capture taken as a cycle
# began that the collector heard of the slot after the cycle read it, and the next pass
# that it heard of a change between our capture and the cycle
HEARD = RECENT
