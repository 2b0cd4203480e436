"""Large job files read by two processes at once, in pieces.

A snapshot's job files are read beside the slot ads (adapters/beside.py): the slot ads
here, the job files in a forked child. When the job files are much the larger part (a
queue of 500,000 jobs beside 100,000 slot ads), this process would finish the slots and
then wait on the child. So the job files are cut into pieces at blank lines (where one
ad ends and the next begins, as the reader cuts them) and shared out: the child takes
pieces from the front, this process, once its slot ads are read, from the back, until
they meet. Each piece is read as the whole file would be (`adfiles.read_text_ads`), and
the pieces are put back together in file order: each file's rows and queue heads in
order, the names spelled as first written.

Bad input is named as a whole-file read names it: a piece knows neither its first line
nor its first ad's number, so anything a piece refuses, or any piece missing, makes the
caller read the files again whole, in order (`snapshot.load_snapshot`)."""

from __future__ import annotations

import codecs
import os
import pickle
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Collection

from ..core.adtext import TextAds, TextStore
from .adfiles import _read_old_texts, _reading, is_json_text, read_text_ads

# Job files of this many bytes or more in all are read in pieces; fewer, the child reads
# them whole (adapters/snapshot.FORK_JOB_BYTES).
PIECE_JOB_BYTES = 24 << 20

# How many pieces the job bytes are cut into: the two processes end within about one
# piece of each other.
PIECES = 16

_WINDOW = 1 << 20               # bytes looked at for a blank line past a cut


@dataclass(frozen=True)
class Piece:
    """Bytes [start, end) of `path`, whole ads; `whole`: the file read as one, as
    `read_text_ads` reads it (a JSON file: one document, never cut)."""
    path: Path
    start: int
    end: int
    whole: bool = False


def plan(files: list[Path], sizes: list[int]) -> list[Piece] | None:
    """The job files (`sizes`: their lengths in bytes) as pieces in file order, about
    equal in bytes, each cut just past a blank line; None when they are too small to
    share out."""
    total = sum(sizes)
    if total < PIECE_JOB_BYTES:
        return None
    step = max(total // PIECES, 1)
    out: list[Piece] = []
    for path, size in zip(files, sizes):
        if size <= 0:
            continue
        cuts = _cuts(path, size, step)
        if cuts is None:
            out.append(Piece(path, 0, size, whole=True))
            continue
        bounds = [0, *cuts, size]
        out += [Piece(path, a, b) for a, b in zip(bounds, bounds[1:]) if b > a]
    return out if len(out) > 1 else None


def _cuts(path: Path, size: int, step: int) -> list[int] | None:
    """Where to cut `path` into pieces of about `step` bytes: just past a blank line
    ("\\n\\n"); None for a JSON file (one document: not cut)."""
    try:
        with open(path, "rb") as f:
            fd = f.fileno()
            head = os.pread(fd, 4096, 0).decode("utf-8", "replace")
            if not head.strip() or is_json_text(head) or head.lstrip().startswith("["):
                return None
            cuts: list[int] = []
            at = step
            while at < size:
                i = os.pread(fd, _WINDOW, at).find(b"\n\n")
                cut = at + i + 2
                if i >= 0 and cut < size and (not cuts or cut > cuts[-1]):
                    cuts.append(cut)
                at += step
            return cuts
    except OSError:
        return None


class _Range:
    """Bytes [start, end) of a file read as text (`read(size)`), UTF-8."""

    def __init__(self, fd: int, start: int, end: int):
        self._fd, self._at, self._end = fd, start, end
        self._decode = codecs.getincrementaldecoder("utf-8")().decode

    def read(self, size: int = -1) -> str:
        left = self._end - self._at
        n = left if size < 0 else min(size, left)
        if n <= 0:
            return self._decode(b"", final=True)
        data = os.pread(self._fd, n, self._at)
        if not data:
            self._at = self._end
            return self._decode(b"", final=True)
        self._at += len(data)
        return self._decode(data, final=self._at >= self._end)


def read_piece(piece: Piece, store: TextStore) -> TextAds:
    """One piece's ads as text, as `read_text_ads` reads the whole file."""
    if piece.whole:
        return read_text_ads(piece.path, store)
    out = TextAds(store)
    with _reading(piece.path), open(piece.path, "rb") as f:
        _read_old_texts(_Range(f.fileno(), piece.start, piece.end), str(piece.path), out,
                        None)
    return out


class Claims:
    """Which pieces are taken, shared by this process and its forked child: the child
    takes them from the front, this process from the back."""

    def __init__(self, n: int):
        import multiprocessing          # (only where files are read in pieces)
        self._lock = multiprocessing.Lock()
        self._ends = multiprocessing.RawArray("i", [0, n - 1])   # front, back

    def take(self, front: bool) -> int | None:
        """The next piece for this side, None when none is left (or the other side,
        killed holding the lock, never gave it back: the pieces missing, the files
        are read again whole)."""
        if not self._lock.acquire(timeout=10):
            return None
        try:
            a, b = self._ends[0], self._ends[1]
            if a > b:
                return None
            if front:
                self._ends[0] = a + 1
                return a
            self._ends[1] = b - 1
            return b
        finally:
            self._lock.release()


def read_pieces(pieces: list[Piece], claims: Claims, front: bool,
                ids_of: Callable[[TextAds, Path], Collection] | None = None) -> dict:
    """The pieces this side takes (`front`: the child, from the front, else from the
    back), each read with its queue heads (`job_queue.queue_heads`; none where working
    them out failed: the cycle then does). `ids_of`: a piece's job ids (snapshot's
    check_job_ids). Returns {"tables": piece index -> its ads, and with `ids_of` "ids":
    every job id read, or None when one was read twice}. Each piece has a store of its
    own (its names in the order they first appear in it, for `merge`); the child pickles
    each piece as soon as it is read, so that its answer costs it no more once the last
    piece is read."""
    got: dict[int, Any] = {}
    ids: set | None = set() if ids_of is not None else None
    count = 0
    while (i := claims.take(front)) is not None:
        table = read_piece(pieces[i], TextStore())
        add_heads([table])
        if ids is not None:
            keys = ids_of(table, pieces[i].path)
            count += len(keys)
            ids |= keys
        got[i] = pickle.dumps(table, protocol=pickle.HIGHEST_PROTOCOL) if front else table
    if ids_of is None:
        return {"tables": got}
    return {"tables": got, "ids": ids if len(ids) == count else None}


def add_heads(tables: list[TextAds]) -> None:
    """Each table's queue heads (`job_queue.queue_heads`: what the schedd's view of its
    queue says of each job), worked out where the job files are read so the cycle need
    not; none at all where that fails (the cycle then computes them itself)."""
    try:
        from . import classad_semantics
        from ..core.job_queue import queue_heads
        classad_semantics.enable()
        runs = [bytearray() for _ in tables]
        heads = [queue_heads(table, r) for table, r in zip(tables, runs)]
    except Exception:                   # noqa: BLE001 - the cycle computes them itself
        return
    for table, h, r in zip(tables, heads, runs):
        table.heads, table.runs = h, r


def merge(pieces: list[Piece], *sides: dict) -> dict[str, TextAds] | None:
    """The pieces' ads put back together, a table per file (by file name, in file
    order); None unless every piece was read once, and, where the sides give their job
    ids, no job was read twice (the whole read then names both ads)."""
    got: dict[int, TextAds] = {}
    ids: set = set()
    count = 0
    for side in sides:
        if not isinstance(side, dict) or not isinstance(side.get("tables"), dict):
            return None
        for i, table in side["tables"].items():
            if type(table) is bytes:
                table = pickle.loads(table)
            if i in got or not isinstance(table, TextAds):
                return None
            got[i] = table
        if "ids" in side:
            if side["ids"] is None:
                return None
            count += len(side["ids"])
            ids |= side["ids"]
    if sorted(got) != list(range(len(pieces))) or len(ids) != count:
        return None
    # one store for every file, as a whole read keeps one: each name spelled as first
    # written in the files' order
    spelled: dict[str, str] = {}
    for i in range(len(pieces)):
        for lname, spelling in got[i].store.names.items():
            spelled.setdefault(lname, spelling)
    # (each piece's distinct pairs, the first piece's where two hold the same: what a
    # whole read's store would hold)
    pairs: dict = {}
    for i in reversed(range(len(pieces))):
        pairs.update(got[i].store.pairs)
    store = TextStore(pairs=pairs, names=spelled)
    tables: dict[str, TextAds] = {}
    heads: dict[str, list | None] = {}
    runs: dict[str, bytearray | None] = {}
    for i, piece in enumerate(pieces):
        table = got[i]
        name = piece.path.name
        out = tables.get(name)
        if out is None:
            out = tables[name] = TextAds(store)
            heads[name], runs[name] = [], bytearray()
        out.rows += table.rows
        h = heads[name]
        if h is not None and table.heads is not None and len(table.heads) == len(table.rows):
            h += table.heads
        else:
            heads[name] = None
        # (a piece's first row is no run: the row before it is in another piece)
        r = runs[name]
        if r is not None and table.runs is not None and len(table.runs) == len(table.rows):
            r += table.runs
        else:
            runs[name] = None
    for name, table in tables.items():
        table.heads, table.runs = heads[name], runs[name]
    return tables
