"""The collector's slot ads kept from one shadow pass to the next (a loop's passes).

A shadow loop sees the same pool every interval, and most slots have not changed since
the last pass: a startd sends its ads when their state changes and every
UPDATE_INTERVAL (five minutes by default). The collector counts every update it takes
in for an ad (UpdatesTotal, with COLLECTOR_DAEMON_STATS, HTCondor's default: the
collector writes it over whatever the sender put there) and stamps the ad with
LastHeardFrom (its own clock, unless the sender set one). So a pass after the first asks
the collector for each slot's stamp only (`POLL`: six attributes instead of 150),
fetches whole only the ads whose stamp differs from the one it holds (one query, the
collector testing a LastHeardFrom constraint), and keeps the lines and the texts of the
rest. Each slot's ClassAd is kept as its lines, parsed when first read (a LazyAd: the
cycle reads most slots through their texts), and the collector's ad is let go once its
lines are printed. The ads are handed out in the order of the stamp answer: the
collector's own order, which a whole query at that moment gives too (the order ties
among identical slots follow).

What is kept is what the collector sent: the cycle copies a shared ad (unparsed, if it
is not parsed yet) before it writes into it (`cycle._candidate_slots`,
`negotiator_attrs.own_ad`), so a kept ad serves the next pass as it came. A poll answer that is not what it should be (an ad without a whole
UpdatesTotal or LastHeardFrom, two ads of one key) and a pass where most slots changed
take the whole query instead, as the first pass does; a collector without daemon stats
is queried whole every pass.
"""

from __future__ import annotations

import operator
import os
from array import array
from dataclasses import dataclass, field
from itertools import chain, islice
from pathlib import Path
from typing import Callable

from ..core.adtext import _PLAIN_INT, _PLAIN_STRING, TextAds, TextStore
from ..errors import InputError
from ..core.classads import LazyAd
from .adfiles import LinesAdMaker, ad_lines, read_ads_and_texts_at, text_ads_of_lines

# what a pass asks the collector of every slot after the first pass
POLL = ("Name", "MyAddress", "MyType", "LastHeardFrom", "UpdatesTotal",
        "UpdateSequenceNumber")

# more changed slots than this share of the pool: one whole query is cheaper
WHOLE_SHARE = 0.5


@dataclass(eq=False, slots=True)
class _Kept:
    """One slot as the collector last sent it whole (slots: one per slot of the pool,
    and a pass's kept inputs hold those let go until the next pass)."""
    ad: object
    lines: list
    stamp: tuple                  # (LastHeardFrom, UpdatesTotal, UpdateSequenceNumber)
    row: tuple | None = None      # its (lower-case name, text) pairs, once worked out
    # what a pass worked out of the ad alone under a config (pool.build_pool): kept
    # with the ad, dropped with it
    memo: dict = field(default_factory=dict)

    def let_go(self) -> None:
        """The cache holds the slot no more (a newer ad of it came, it is gone, or the
        cache was emptied): its ad, lines, texts and memo are dropped, so that a pass's
        kept inputs that share this entry (`HeldSlots`) do not keep them alive."""
        self.ad = self.lines = self.row = self.memo = self.stamp = None


@dataclass
class Refreshed:
    """What one pass takes from the cache: the slot ads in the collector's order, their
    lines and texts, how many startd ads the collector answered (slots or not), and
    how the pass got them."""
    slots: list
    lines: list
    texts: TextAds
    answered: int
    whole: bool                   # one whole query (the first pass, or most changed)
    fetched: int                  # slot ads fetched whole this pass
    kept: int                     # slot ads taken as held
    memos: list | None = None     # each slot's memo (`_Kept.memo`), when the ads are kept
    # the lines of the ads fetched this pass (the others were checked when fetched)
    fresh: list = field(default_factory=list)
    # each slot's Name (its key in the collector's table: collector_order.slot_key)
    names: list = field(default_factory=list)


def is_slot_ad(ad) -> bool:
    """Slot ads only: a Startd query may also return the startd daemon ads (MyType
    "StartD") of newer collectors."""
    return _is_slot(ad.get("Name"), ad.get("MyType"))


def _is_slot(name, my_type) -> bool:
    return isinstance(name, str) and not (isinstance(my_type, str)
                                          and my_type.lower() != "machine")


def _key_and_stamp(ad) -> tuple | None:
    """(key, stamp) of a slot ad, each attribute read once: the key (Name, MyAddress),
    the stamp (LastHeardFrom, UpdatesTotal, UpdateSequenceNumber), None without a whole
    LastHeardFrom and UpdatesTotal (nothing to tell an update by). None for an ad that
    is not a slot's (`is_slot_ad`)."""
    get = ad.get
    name = get("Name")
    if not _is_slot(name, get("MyType")):
        return None
    address = get("MyAddress")
    key = (name, address if isinstance(address, str) else None)
    heard, total = get("LastHeardFrom"), get("UpdatesTotal")
    if not (_whole_number(heard) and _whole_number(total)):
        return key, None
    seq = get("UpdateSequenceNumber")
    return key, (heard, total, seq if _whole_number(seq) else None)


def _whole_number(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


class SlotCache:
    """The slot ads of the last pass, by (Name, MyAddress). `refresh` gives this pass's.

    `query(constraint, projection)` is the collector's Startd query (the bindings'
    `Collector.query(AdTypes.Startd, constraint, projection)`); it raises what the
    bindings raise, and the cache is then emptied (the next pass starts whole).

    `projection`: what the ads are fetched with (collector_projection; None: whole
    ads); a pass that needs another one sets it with `project`, which lets go of every
    ad fetched with the old one."""

    def __init__(self):
        self.projection: list[str] | None = None
        self._kept: dict[tuple, _Kept] = {}
        self._names: dict[str, str] = {}     # every lower-case attribute name kept
        # the last slots file written: its path, its slots, each one's (offset, length)
        self._written: tuple[Path, list, dict] | None = None
        self._places: dict | None = None          # those of the file `write` just wrote

    def __len__(self) -> int:
        return len(self._kept)

    def clear(self) -> None:
        for e in self._kept.values():
            e.let_go()
        self._kept = {}
        self._names = {}
        self._written = None
        self._places = None

    def project(self, projection: list[str] | None) -> None:
        """Fetch ads with `projection` from now on; the ads held are let go when it is
        not the one they were fetched with."""
        if projection != self.projection:
            self.clear()
            self.projection = None if projection is None else list(projection)

    # -- the slots of an earlier snapshot --------------------------------------------------

    def seed(self, path: Path, projection: list[str] | None, seen: dict | None = None) -> int:
        """Hold the slots of an earlier snapshot's slots file `path` (one this product
        wrote: `write_lines` or `write`, each ad its lines and a blank line), fetched
        with `projection` (its meta.json's "slot_projection"; None: whole ads), as if
        the pass that wrote it had refreshed this cache: the next `refresh` then asks
        the collector for the slots' stamps and fetches only the slots heard from since
        (a `--once` pass from cron, a loop's first pass), and `write` copies the others
        from `path`. Returns how many slots it holds: 0, holding nothing, when the file
        cannot be read or is not such a file, or a slot's stamp or key is not plain
        text there (a whole number, a string with no escape); `seen` shares equal lines,
        as `ad_lines` does."""
        self.clear()
        self.projection = None if projection is None else list(projection)
        try:
            entries, places = _read_written(Path(path), {} if seen is None else seen)
        except (OSError, ValueError):
            return 0
        if not entries:
            return 0
        store = TextStore()
        try:
            texts = text_ads_of_lines([e.lines for e in entries], str(path), store)
        except InputError:              # (an expression too large: the pass refuses it)
            return 0
        kept: dict[tuple, _Kept] = {}
        for e, row in zip(entries, texts.rows):
            got = _plain_key_and_stamp(dict(row))
            if got is None or got[0] in kept:
                return 0                # (as `_whole`: nothing to go by, nothing kept)
            e.row = row
            e.stamp = got[1]
            kept[got[0]] = e
        make = LinesAdMaker(str(path))
        for i, e in enumerate(entries, start=1):
            e.ad = LazyAd(make, (e.lines, i))
        self._kept, self._names = kept, dict(store.names)
        self._written = (Path(path), entries, places)
        return len(kept)

    # -- this pass's ads -------------------------------------------------------------------

    def refresh(self, query: Callable, seen: dict, source: str) -> Refreshed:
        """This pass's slot ads; `seen` shares equal lines (`adfiles.ad_lines`), `source`
        names the slots file in a message about a line too large to read."""
        try:
            got = self._by_stamps(query, seen, source) if self._kept else None
            return got if got is not None else self._whole(query, seen, source)
        except BaseException:
            self.clear()
            raise

    def _whole(self, query: Callable, seen: dict, source: str) -> Refreshed:
        answer = list(query(None, self.projection))
        answered = len(answer)
        rows = [(ad, row) for ad, row in zip(answer, map(_key_and_stamp, answer))
                if row is not None]
        lines = ad_lines([ad for ad, _ in rows], seen)
        store = TextStore()
        texts = text_ads_of_lines(lines, source, store)
        # each ad kept as its lines, parsed when first read (most never are)
        make = LinesAdMaker(source)
        slots = [LazyAd(make, (one, i)) for i, one in enumerate(lines, start=1)]
        kept = {key: _Kept(ad, ad_lines_, stamp, row=text_row)
                for ad, (_, (key, stamp)), ad_lines_, text_row
                in zip(slots, rows, lines, texts.rows)}
        if len(kept) < len(slots) or any(e.stamp is None for e in kept.values()):
            kept = {}                   # nothing to go by next time: no ad is kept
        for e in self._kept.values():   # every ad held before: a newer one came
            e.let_go()
        self._kept, self._names = kept, dict(store.names)
        return Refreshed(slots=slots, lines=lines, texts=texts, answered=answered,
                         whole=True, fetched=len(slots), kept=0,
                         memos=[e.memo for e in kept.values()] if kept else None,
                         fresh=lines, names=[key[0] for _, (key, _) in rows])

    def _by_stamps(self, query: Callable, seen: dict, source: str) -> Refreshed | None:
        answer = list(query(None, list(POLL)))
        order: list[tuple] = []
        stamps: dict[tuple, tuple] = {}
        for row in map(_key_and_stamp, answer):
            if row is None:
                continue
            key, stamp = row
            if stamp is None or key in stamps:
                return None
            order.append(key)
            stamps[key] = stamp
        kept = self._kept
        changed = {k for k in order if (e := kept.get(k)) is None or e.stamp != stamps[k]}
        if len(changed) > WHOLE_SHARE * max(len(order), 1):
            return None
        fresh: dict[tuple, tuple] = {}     # key -> (the ad fetched whole, its stamp)
        if changed:
            since = min(stamps[k][0] for k in changed)
            for ad in query(f"LastHeardFrom >= {since}", self.projection):
                row = _key_and_stamp(ad)
                if row is None:
                    continue
                key, stamp = row
                if stamp is None:
                    return None
                if key in stamps and (key in changed or stamp != kept[key].stamp):
                    if key in fresh:
                        return None
                    fresh[key] = (ad, stamp)
        # the pass's slots: a held ad unless a newer one came; a changed slot that the
        # fetch did not find is gone since the poll
        new_kept: dict[tuple, _Kept] = {}
        make = LinesAdMaker(source)
        for i, key in enumerate(order, start=1):
            got = fresh.get(key)
            if got is not None:
                # kept as its lines, parsed when first read
                one = ad_lines([got[0]], seen)[0]
                new_kept[key] = _Kept(LazyAd(make, (one, i)), one, got[1])
            elif key not in changed:
                new_kept[key] = kept[key]
        entries = list(new_kept.values())
        store = TextStore()
        store.names.update(self._names)
        texts = text_ads_of_lines([e.lines for e in entries], source, store,
                                  rows=[e.row for e in entries])
        for e, row in zip(entries, texts.rows):
            e.row = row
        self._names = dict(store.names)
        self._kept = new_kept
        for key, e in kept.items():
            if new_kept.get(key) is not e:
                e.let_go()
        return Refreshed(slots=[e.ad for e in entries], lines=[e.lines for e in entries],
                         texts=texts, answered=len(answer), whole=False,
                         fetched=len(fresh), kept=len(entries) - len(fresh),
                         memos=[e.memo for e in entries],
                         fresh=[new_kept[k].lines for k in fresh if k in new_kept],
                         names=[key[0] for key in new_kept])

    # -- the snapshot's slots file ---------------------------------------------------------

    def write(self, path: Path) -> bool:
        """Write the last `refresh`'s slots to `path` in `-long` form, byte for byte what
        `adfiles.write_lines` writes: a hard link to the last snapshot's slots file when
        they are the same ads in the same order (a snapshot's files are never changed once
        written); else each ad kept since that file was written is copied from it by the
        kernel (runs of them at once, `os.copy_file_range`), and only the others are
        written out. False, writing nothing, when the last refresh kept nothing (its ads
        had nothing to go by: the caller writes them)."""
        order = list(self._kept.values())
        if not order:
            return False
        last = self._written
        if last is not None and len(last[1]) == len(order) and all(
                map(operator.is_, last[1], order)):
            try:
                os.link(last[0], path)
                self._places = last[2]
                return True
            except OSError:
                pass
        places = last[2] if last is not None else {}
        try:
            src = os.open(last[0], os.O_RDONLY) if places else None
        except OSError:
            src, places = None, {}
        tmp = path.with_name(path.name + ".tmp")
        try:
            self._places = _write_slots(tmp, order, src, places)
        finally:
            if src is not None:
                os.close(src)
        tmp.replace(path)
        return True

    def written(self, path: Path) -> None:
        """The slots file `write` wrote is at `path` now (its snapshot's final place)."""
        if self._kept and self._places is not None:
            self._written = (Path(path), list(self._kept.values()), self._places)

    # -- a pass's slots, held for a later re-run of its cycle ------------------------------

    def hold(self, slots, rows, memos, path) -> "HeldSlots | None":
        """The last refresh's slots held for a later re-run of the pass that took them
        (a shadow loop's kept inputs, shadow_repredict.KeptInputs): `slots`, `rows` and
        `memos` are that pass's slot ads, texts and memos as its snapshot holds them,
        `path` the slots file `write` wrote them to. None when they are not the ones
        the cache holds and wrote last (the snapshot's own, or another's)."""
        last = self._written
        if last is None or Path(path) != last[0]:
            return None
        entries, places = last[1], last[2]
        if not (len(entries) == len(slots) == len(rows) == len(memos)
                and all(map(operator.is_, (e.ad for e in entries), slots))
                and all(map(operator.is_, (e.row for e in entries), rows))
                and all(map(operator.is_, (e.memo for e in entries), memos))):
            return None
        try:
            st = os.stat(path)
        except OSError:
            return None
        where = array("q", chain.from_iterable(map(places.__getitem__, entries)))
        return HeldSlots(entries, last[0], where, _file_id(st), dict(self._names))


# how much of a slots file `_read_written` reads at a time
_CHUNK = 8 << 20


def _read_written(path: Path, seen: dict) -> tuple[list, dict]:
    """The ads of a slots file this product wrote, as `_Kept` entries holding their lines
    (equal lines shared through `seen`), and each entry's (offset, length) in the file.
    ValueError when it is not such a file (not UTF-8, an empty ad, a line that is not
    `name = text`, no blank line at its end)."""
    entries: list[_Kept] = []
    places: dict = {}
    share = seen.setdefault
    before = len(seen)
    at = 0                              # the file offset of `rest`
    rest = b""
    with path.open("rb") as f:
        while True:
            data = f.read(_CHUNK)
            if not data:
                break
            buf = rest + data if rest else data
            end = buf.rfind(b"\n\n")
            if end < 0:
                rest = buf
                continue
            start = 0
            for block in buf[:end].split(b"\n\n"):
                if not block:
                    raise ValueError("an empty ad")
                lines = block.decode("utf-8").split("\n")
                e = _Kept(None, list(map(share, lines, lines)), None)
                entries.append(e)
                places[e] = (at + start, len(block) + 2)
                start += len(block) + 2
            at += end + 2
            rest = buf[end + 2:]
    if rest:
        raise ValueError("no blank line after its last ad")
    # each distinct line once: those new to `seen` are its last keys (in the order added)
    if not all(" = " in ln for ln in islice(reversed(seen), len(seen) - before)):
        raise ValueError("a line that is not an attribute's")
    return entries, places


def _plain_key_and_stamp(texts: dict) -> tuple | None:
    """`_key_and_stamp` of a slot ad given as its texts ({lower-case name: text}), read
    only where each text is plain (as adtext.plain_value reads it: a whole number, a
    string with no escape; MyAddress and UpdateSequenceNumber may be absent): None
    otherwise, for a slot ad no stamp can be told from, or one that is not a slot's."""
    get = texts.get
    name, my_type, address = get("name"), get("mytype"), get("myaddress")
    heard, total, seq = get("lastheardfrom"), get("updatestotal"), get("updatesequencenumber")
    string, number = _PLAIN_STRING.fullmatch, _PLAIN_INT.fullmatch
    if (name is None or not string(name) or heard is None or not number(heard)
            or total is None or not number(total)
            or my_type is not None and not string(my_type)
            or address is not None and not string(address)
            or seq is not None and not number(seq)):
        return None
    name = name[1:-1]
    if not _is_slot(name, None if my_type is None else my_type[1:-1]):
        return None
    return ((name, None if address is None else address[1:-1]),
            (int(heard), int(total), None if seq is None else int(seq)))


def _file_id(st: os.stat_result) -> tuple:
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns


class HeldSlots:
    """One pass's slot ads, texts and memos, held for a later re-run of its cycle at
    about no more cost than the cache's own: the cache's entries of them, which the cache
    empties as it lets each go (`_Kept.let_go`: a newer ad of the slot came), and where
    each one is in that pass's slots file, from which `read` reads the ones let go again
    (a few MB at a time, as `load_snapshot` would read them) when the re-run comes."""

    def __init__(self, entries: list, path: Path, where, file_id: tuple, names: dict):
        self._entries = entries
        self.path = path
        self._where = where           # each entry's (offset, length) in `path`, flat
        self._file_id = file_id       # (device, inode, size, mtime) of `path` as written
        self._names = names           # each lower-case attribute name as written

    def __len__(self) -> int:
        return len(self._entries)

    def let_go(self) -> int:
        """How many of the slots the cache has let go (read from the file by `read`)."""
        return sum(e.ad is None for e in self._entries)

    def read(self) -> tuple[list, TextAds, list]:
        """The slots as the pass took them: (ads, texts, memos), in its order; those
        the cache still holds shared with it, the others read from the slots file (no
        memo). InputError naming the file when it is gone or is not the one written."""
        got = [(e.ad, e.row, e.memo) for e in self._entries]
        gone = [i for i, (ad, _, _) in enumerate(got) if ad is None]
        names = dict(self._names)
        if gone:
            try:
                same = _file_id(os.stat(self.path)) == self._file_id
            except OSError as exc:
                raise InputError(str(self.path), f"cannot read: {exc.strerror or exc}"
                                 ) from None
            if not same:
                raise InputError(str(self.path), "not the slots file written by the pass "
                                                 "(changed since)")
            w = self._where
            ads, texts = read_ads_and_texts_at(
                self.path, [(w[2 * i], w[2 * i + 1]) for i in gone])
            for i, ad, row in zip(gone, ads, texts.rows):
                got[i] = (ad, row, None)
            names.update(texts.store.names)
        out = TextAds(TextStore(names=names))
        for _, row, _ in got:
            out.add_row(row)
        return [ad for ad, _, _ in got], out, [memo for _, _, memo in got]


def _write_slots(tmp: Path, order: list, src: int | None, places: dict) -> dict:
    """Write `order`'s ads to `tmp`: those with a place (offset, length) in the file
    open at `src` copied from it, the others as text. Returns each ad's place in `tmp`."""
    out: dict = {}
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666)
    try:
        at = 0                        # where the next byte goes
        texts: list[bytes] = []       # written out at `texts_at`
        texts_at = 0
        run = None                    # [source offset, length, destination offset]
        for e in order:
            place = places.get(e)
            if place is None:
                if run is not None:
                    _copy(src, fd, *run)
                    run = None
                if not texts:
                    texts_at = at
                data = ("\n".join(e.lines) + "\n\n").encode("utf-8")
                texts.append(data)
                out[e] = (at, len(data))
                at += len(data)
                continue
            if texts:
                _pwrite_all(fd, b"".join(texts), texts_at)
                texts = []
            if run is not None and run[0] + run[1] == place[0]:
                run[1] += place[1]
            else:
                if run is not None:
                    _copy(src, fd, *run)
                run = [place[0], place[1], at]
            out[e] = (at, place[1])
            at += place[1]
        if run is not None:
            _copy(src, fd, *run)
        if texts:
            _pwrite_all(fd, b"".join(texts), texts_at)
    finally:
        os.close(fd)
    return out


def _pwrite_all(fd: int, data: bytes, at: int) -> None:
    view = memoryview(data)
    while view:
        n = os.pwrite(fd, view, at)
        view, at = view[n:], at + n


def _copy(src: int, dst: int, src_at: int, length: int, dst_at: int) -> None:
    """`length` bytes from `src` at `src_at` to `dst` at `dst_at`: in the kernel where it
    can, else read and written here."""
    while length > 0:
        try:
            n = os.copy_file_range(src, dst, length, src_at, dst_at)
        except (OSError, AttributeError):
            n = 0
        if n <= 0:
            data = os.pread(src, length, src_at)
            if not data:
                raise OSError(f"the last slots file ended {length} bytes early")
            _pwrite_all(dst, data, dst_at)
            n = len(data)
        src_at, dst_at, length = src_at + n, dst_at + n, length - n
