"""A shadow loop's job lines from one pass to the next: the worker's answers as deltas.

A loop's worker (adapters/worker.py) queries the schedds every pass, and most jobs it
finds are the jobs it found the pass before, line for line (an idle job waits for many
cycles). So each answer carries, beside the jobs, a 16-byte digest of each job's lines
(BLAKE2b, 128 bits), which the loop keeps and hands back with its next request; the
worker answers each job with its lines only when its digest is none of that schedd's
jobs' in the answer the loop holds, else with the index of the job it equals there
(`delta`). The worker keeps nothing from one request to the next (keeping its last
answer's jobs took it to 602 MiB at 500,000 jobs, beside the loop's own peak); the loop
keeps 16 bytes a job. Two different jobs share a digest with a chance of about 1 in
10^27 per pass at a million jobs, and no job ad can be written to share another's
(finding such a pair is a 2^64-step search).

The loop (`KnownJobs`) puts the answer back together from the lines it holds, each
unchanged job as the very same list, and keeps for the next pass each job's texts
(`text_ads_of_lines` rows) and the snapshot file they were written to: a job seen before
is not split into texts again, and a schedd whose jobs are all unchanged has its jobs
file linked, not written.

An answer names the answer it builds on (`base`) and the loop takes it only when that is
the one it holds (`take`): one built on another, or naming a job that is not there, is
not taken (the pass queries the schedds itself), never taken wrong. Whatever the loop
keeps of a pass (texts, file) is kept under that pass's answer and used only by the
answer built on it.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import uuid
from collections import Counter
from dataclasses import dataclass, field
from operator import itemgetter
from pathlib import Path
from typing import Iterable

from .beside import Packed


@dataclass
class Delta:
    """One answer of the worker: each schedd's jobs as lines or indexes into that
    schedd's jobs in answer `base` (None: every job as lines), and each job's digest."""
    token: str
    base: str | None
    jobs: list                      # (schedd, [lines | index, ...]), in the schedd's order
    digests: dict = field(default_factory=dict)     # schedd -> 16 bytes a job, in order


def delta(jobs: list, have: str | None, held: dict | None) -> Delta:
    """The worker's answer: `jobs` ((schedd, each job's lines)) against the answer `have`
    whose digests the loop holds (`held`: schedd -> 16 bytes a job, as an answer gives
    them); whole without them. A schedd's jobs already coded where they were asked (a
    beside.Packed of `delta_one`'s answer) go as they are, their digests inside."""
    if have is None or not isinstance(held, dict):
        have, held = None, {}
    out, digests = [], {}
    for name, lines in jobs:
        if isinstance(lines, Packed):
            out.append((name, lines))
            continue
        coded, digests[name] = delta_one(lines, held.get(name))
        out.append((name, coded))
    return Delta(uuid.uuid4().hex, have, out, digests)


def delta_one(lines: list, blob) -> tuple[list, bytes]:
    """One schedd's jobs (each one's lines) against `blob`, the digests of its jobs in the
    answer the loop holds: (each job as its lines or the index of the job it equals
    there, their digests)."""
    before = (dict(zip(_chunks(blob), range(len(blob) // DIGEST_SIZE)))
              if isinstance(blob, bytes) and len(blob) % DIGEST_SIZE == 0 else {})
    get = before.get
    coded, mine = [], []
    for ad in lines:
        key = digest(ad)
        mine.append(key)
        j = get(key)
        coded.append(ad if j is None else j)
    return coded, b"".join(mine)


DIGEST_SIZE = 16


def _chunks(blob: bytes) -> list[bytes]:
    return [blob[i:i + DIGEST_SIZE] for i in range(0, len(blob), DIGEST_SIZE)]


def digest(lines: list[str]) -> bytes:
    """A job's lines as 16 bytes. Its lines are one attribute each (no line holds a
    newline: a string's newline is written escaped), so joined by newlines they are
    the job's text in its jobs file, and two jobs share it only when their lines are
    the same."""
    return hashlib.blake2b("\n".join(lines).encode("utf-8", "surrogatepass"),
                           digest_size=DIGEST_SIZE).digest()


@dataclass
class _Kept:
    """What the loop kept of one schedd's jobs in one answer."""
    rows: list | None = None        # each job's texts (rows), once worked out
    names: Counter | None = None    # how many of those rows hold each attribute name
    spelled: dict | None = None     # each of those names as its ads write it
    file: Path | None = None        # the snapshot file they were written to
    count: int = 0                  # how many jobs that file holds


_FIRST = itemgetter(0)


def name_counts(rows: Iterable[tuple]) -> Counter:
    """How many times each attribute name is held by `rows` (each a row of (name, text)
    pairs): the rows alike in their names counted together (most jobs of a queue hold
    the same names; a Counter updated pair by pair took 0.1 s a pass at 49,800 jobs)."""
    shapes = Counter(tuple(map(_FIRST, row)) for row in rows)
    out: Counter = Counter()
    for names, n in shapes.items():
        for name in names:
            out[name] += n
    return out


@dataclass
class KnownJobs:
    """The loop's side: the last answer taken, each schedd's jobs in it, and what the
    passes since worked out of them."""
    token: str | None = None
    jobs: dict = field(default_factory=dict)          # schedd -> each job's lines
    digests: dict = field(default_factory=dict)       # schedd -> its jobs' digests
    base: str | None = None                           # this pass's answer built on
    reuse: dict = field(default_factory=dict)         # schedd -> index in last, or None
    kept: dict = field(default_factory=dict)          # (schedd, answer) -> _Kept
    taken: bool = False                               # this pass's jobs are `jobs`

    def take(self, answer) -> list | None:
        """`answer`'s jobs as (schedd, each job's lines), unchanged jobs as the lists held;
        None when it is not a Delta, builds on an answer not held, or names a job that
        is not there (the caller queries the schedds itself)."""
        if not isinstance(answer, Delta) or (answer.base is not None
                                             and answer.base != self.token):
            return None
        held = self.jobs if answer.base is not None else {}
        jobs, reuse = [], {}
        digests = dict(answer.digests) if isinstance(answer.digests, dict) else {}
        try:
            for name, coded in answer.jobs:
                if isinstance(coded, Packed):     # (coded where the schedd was asked)
                    coded, digests[name] = coded.unpack()
                before = held.get(name, ())
                lines, where = [], []
                for x in coded:
                    if type(x) is int:
                        if not 0 <= x < len(before):
                            return None
                        lines.append(before[x])
                        where.append(x)
                    else:
                        lines.append(x)
                        where.append(None)
                jobs.append((name, lines))
                reuse[name] = where
        except (TypeError, ValueError, EOFError, pickle.UnpicklingError):
            return None
        self.base, self.taken = answer.base, True
        self.token, self.jobs, self.reuse = answer.token, dict(jobs), reuse
        self.digests = {name: digests.get(name, b"") for name in self.jobs}
        # what was kept under other answers than the one this builds on serves no later one
        self.kept = {k: v for k, v in self.kept.items() if k[1] == answer.base}
        return jobs

    def not_taken(self) -> None:
        """This pass's jobs did not come from the worker: nothing is reused for them, and
        nothing of them is kept (what the last answer taken left stays for the next)."""
        self.base, self.reuse, self.taken = None, {}, False

    # -- the jobs' texts -----------------------------------------------------------------

    def rows_for(self, schedd: str) -> tuple[list, Counter, dict] | None:
        """For this pass's jobs of `schedd`, each one's rows kept from the last pass (None
        for a job new or changed), how many of those rows hold each attribute name, and
        each such name as the ads write it; None when nothing is kept for them."""
        kept = self.kept.get((schedd, self.base))
        where = self.reuse.get(schedd)
        if kept is None or kept.rows is None or where is None:
            return None
        rows = kept.rows
        names = Counter(kept.names)
        used = set(where)
        # a job gone or changed: its names leave
        names.subtract(name_counts(row for j, row in enumerate(rows) if j not in used))
        names = +names
        return ([rows[j] if j is not None else None for j in where], names,
                {n: kept.spelled[n] for n in names})

    def keep_rows(self, schedd: str, rows: list, names: Counter, spelled: dict) -> None:
        """This pass's rows of `schedd`'s jobs, how many hold each attribute name, and
        `spelled` (at least those names as the ads write them), for the next pass."""
        if self.taken and schedd in self.jobs:
            kept = self._mine(schedd)
            kept.rows, kept.names = rows, +names
            kept.spelled = {n: spelled[n] for n in kept.names}

    def _mine(self, schedd: str) -> _Kept:
        """What this pass keeps of `schedd`'s jobs (under the answer taken)."""
        kept = self.kept.get((schedd, self.token))
        if kept is None:
            kept = self.kept[(schedd, self.token)] = _Kept()
        return kept

    # -- the jobs files ------------------------------------------------------------------

    def link_file(self, schedd: str, path: Path) -> bool:
        """Link the last pass's jobs file of `schedd` at `path` when this pass's jobs are
        that file's, in its order; False (nothing done) otherwise."""
        kept = self.kept.get((schedd, self.base))
        where = self.reuse.get(schedd)
        if kept is None or kept.file is None or where is None:
            return False
        if len(where) != kept.count or where != list(range(kept.count)):
            return False
        try:
            os.link(kept.file, path)
        except OSError:
            return False
        return True

    def written(self, schedd: str, path: Path) -> None:
        """This pass's jobs of `schedd` are in the file at `path` (its final place)."""
        if self.taken and schedd in self.jobs:
            kept = self._mine(schedd)
            kept.file, kept.count = Path(path), len(self.jobs[schedd])
