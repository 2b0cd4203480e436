"""Reading and writing files of ClassAds, as HTCondor's tools print them.

Reads `condor_status -long` / `condor_q -long` / `condor_userprio -l` output (old ClassAd
syntax, ads separated by blank lines) and `-json` output (a JSON array of ads). Every ad
is parsed by classad2. classad2's old-syntax parser silently drops a line it cannot
parse, so each ad's attribute count is checked against its lines and a dropped line is
reported, naming the file, the line, the ad and the attribute.

Old syntax has one escape only (`\\"` in a string, written by printOld) and is read one
line per attribute, so a string holding a newline cannot be written in it: such an
attribute is written as `Name = eval("<classad2's new-syntax unparse>")`, an expression
that evaluates to the same value, and read back as the value itself (see
`_attribute_lines`). Files are UTF-8; a carriage return is a line end only in `\\r\\n`.
"""

from __future__ import annotations

import io
import os
import json
import re
from collections import Counter
from itertools import filterfalse
from operator import itemgetter
from contextlib import contextmanager
from pathlib import Path
from typing import Iterable

import classad2

from ..core.adtext import TextAds, TextStore
from ..errors import InputError
from ..limits import MAX_EXPR_OPERATORS, too_large_expression
from .job_delta import KnownJobs

_ATTR_LINE = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_.]*)\s*=")


def is_json_text(text: str) -> bool:
    """`-json` output is a JSON array of objects (`[` then `{`); new-syntax ClassAds
    start with `[` followed by an attribute name."""
    s = text.lstrip()
    if s.startswith("{"):
        return True
    return s.startswith("[") and s[1:].lstrip()[:1] in ("{", "]")


def read_ads(path: str | Path) -> list[classad2.ClassAd]:
    """All ads in `path`, in file order. Raises InputError naming the file on bad input."""
    p = Path(path)
    with _reading(p), _open(p) as f:
        text = f.read()
    return parse_ads_text(text, str(p))


def _open(p: Path):
    """An ad file for reading: UTF-8, newlines as they are (`_lf_chunks` turns `\\r\\n`
    into `\\n`; a lone `\\r` may be a character of a string value)."""
    return p.open(encoding="utf-8", newline="")


@contextmanager
def _reading(p: Path):
    """A file that cannot be read, or is not text, as an InputError naming it."""
    try:
        yield
    except UnicodeDecodeError:
        raise InputError(str(p), "not a text file of ClassAds") from None
    except OSError as exc:
        raise InputError(str(p), f"cannot read: {exc.strerror or exc}") from None


def parse_ads_text(text: str, source: str) -> list[classad2.ClassAd]:
    if not text.strip():
        return []
    if is_json_text(text):
        return _parse_json(text, source)
    if text.lstrip().startswith("["):
        try:
            json.loads(text)
        except (json.JSONDecodeError, RecursionError):
            return _parse_new(text, source)
        return _parse_json(text, source)  # valid JSON, but not an array of objects
    return _parse_old(text, source)


def _parse_new(text: str, source: str) -> list[classad2.ClassAd]:
    """New ClassAd syntax (`[ A = 1; B = 2 ]` ...), as `-long:new` prints it."""
    try:
        return list(classad2.parseAds(text, classad2.ParserType.New))
    except Exception:
        raise InputError(source, "not valid new-syntax ClassAds") from None


def _parse_json(text: str, source: str) -> list[classad2.ClassAd]:
    doc = load_json(text, source)
    if isinstance(doc, dict):
        doc = [doc]
    if not isinstance(doc, list) or not all(isinstance(d, dict) for d in doc):
        raise InputError(source, "expected a JSON array of ClassAds, as condor_status -json prints")
    for i, d in enumerate(doc, start=1):
        for k, v in d.items():
            if isinstance(v, str) and len(v) > MAX_EXPR_OPERATORS and (why := too_large_expression(v)):
                raise InputError(source, why, ad=str(i), attribute=k)
    # classad2 reads one JSON object at a time reliably (its multi-ad JSON reader stops
    # at nested values), so the array is cut into its objects' own text (keeping the
    # "\/Expr(...)\/" escapes) and classad2 parses each.
    ads = []
    for i, (d, piece) in enumerate(zip(doc, _json_object_texts(text)), start=1):
        try:
            piece = _unescape_non_ascii(piece)
        except ValueError as exc:
            raise InputError(source, str(exc), ad=str(i)) from None
        ad = _parse_one(piece, classad2.ParserType.JSON)
        bad_expr = [k for k, v in d.items() if isinstance(v, str) and v.startswith("/Expr(")
                    and not isinstance(ad.get(k), classad2.ExprTree)]
        if len(ad) != len(d) or bad_expr:
            missing = bad_expr or [k for k in d if k not in ad]
            name = d.get("Name") if isinstance(d.get("Name"), str) else None
            raise InputError(source, "cannot parse value", ad=f"{i} ({name})" if name else str(i),
                             attribute=missing[0] if missing else None)
        ads.append(ad)
    return ads


def load_json(text: str, source: str):
    """A JSON document, or InputError naming `source` (bad JSON, or nested too deeply
    for Python's parser; NaN and Infinity, which JSON does not have, are refused)."""
    def no_constant(name):
        raise ValueError(f"{name} is not a JSON value")
    try:
        return json.loads(text, parse_constant=no_constant)
    except json.JSONDecodeError as exc:
        raise InputError(source, f"not valid JSON: {exc.msg}", line=exc.lineno) from None
    except ValueError as exc:
        raise InputError(source, f"not valid JSON: {exc}") from None
    except RecursionError:
        raise InputError(source, "not valid JSON: nested too deeply") from None


_JSON_ESCAPE = re.compile(r"\\(?:u([0-9a-fA-F]{4})(?:\\u([dD][c-fC-F][0-9a-fA-F]{2}))?|.)")


def _unescape_non_ascii(text: str) -> str:
    """JSON text with every `\\uXXXX` escape of a non-ASCII character (a surrogate pair
    as one) written as the character itself: classad2's JSON reader turns such escapes
    into wrong bytes (`"\\u00e9"` into `"\\x03\\x01"`), while it reads UTF-8 text and
    the escapes of ASCII characters right. ValueError for a lone surrogate (no
    character)."""
    if "\\u" not in text:
        return text

    def one(m: re.Match) -> str:
        hi, lo = m.group(1), m.group(2)
        if hi is None:
            return m.group(0)
        code = int(hi, 16)
        if lo is not None and 0xD800 <= code <= 0xDBFF:
            return chr(0x10000 + ((code - 0xD800) << 10) + (int(lo, 16) - 0xDC00))
        half = hi if 0xD800 <= code <= 0xDFFF else lo
        if half is not None:
            raise ValueError(f"\\u{half}: half of a UTF-16 surrogate pair, no character")
        return m.group(0) if code < 0x80 else chr(code)

    return _JSON_ESCAPE.sub(one, text)


def _json_object_texts(text: str) -> Iterable[str]:
    """The source text of each top-level object of a JSON array (or of a lone object)."""
    decoder = json.JSONDecoder()
    i = len(text) - len(text.lstrip())
    if text[i] == "{":
        yield text[i:]
        return
    i += 1
    while True:
        while i < len(text) and text[i] in " \t\r\n,":
            i += 1
        if i >= len(text) or text[i] == "]":
            return
        _, end = decoder.raw_decode(text, i)
        yield text[i:end]
        i = end


def _parse_one(text: str, parser_type) -> classad2.ClassAd:
    """One ad parsed by classad2, or an empty ad when it cannot parse the text.
    (parseNext: one ad, no merging copy; parseOne copies every attribute.)"""
    try:
        ad = classad2.parseNext(text, parser_type)
    except Exception:
        ad = None
    return classad2.ClassAd() if ad is None else ad


def _blocks(text: str) -> Iterable[tuple[int, list[str]]]:
    """(first line number, lines) of each blank-line-separated block with content."""
    start, cur = 0, []
    for n, line in enumerate(text.split("\n"), start=1):
        if line.strip() == "":
            if cur:
                yield start, cur
            cur = []
        else:
            if not cur:
                start = n
            cur.append(line)
    if cur:
        yield start, cur


def _parse_old(text: str, source: str) -> list[classad2.ClassAd]:
    """Ads in old syntax, every ad parsed by classad2 (read as files are: `\\r\\n` read
    as a newline, ads cut at blank lines)."""
    ads: list = []
    _read_old_texts(io.StringIO(text, newline=""), source, TextAds(), ads)
    return ads


# ---- ads kept as text (core.adtext), for job queues ---------------------------------

def read_text_ads(path: str | Path, store: TextStore | None = None) -> TextAds:
    """All ads in `path` as a TextAds (each ad still parsed by classad2 once, to report
    bad input exactly as read_ads does; then only its lines are kept). Old-syntax files
    are read in large chunks cut at blank lines, so a large queue is never held whole in
    memory."""
    return _read_texts(path, store, None)


def read_ads_and_texts(path: str | Path) -> tuple[list[classad2.ClassAd], TextAds]:
    """The ads of `path` (as read_ads) and their attribute texts (as read_text_ads)."""
    ads: list = []
    texts = _read_texts(path, None, ads)
    return ads, texts


def read_ads_and_texts_at(path: str | Path, places
                          ) -> tuple[list[classad2.ClassAd], TextAds]:
    """The ads at `places` of the old-syntax file `path` and their attribute texts, as
    `read_ads_and_texts` reads them, in the order of `places`: each place an (offset,
    length) in bytes holding one whole ad and the blank line after it (a slots file as
    slot_cache writes it). InputError naming the file when it cannot be read or a place
    does not hold one ad. Only those bytes are read, a few MB at a time."""
    p = Path(path)
    ads: list = []
    out = TextAds()
    with _reading(p), p.open("rb") as f:
        _read_old_texts(_Places(f.fileno(), places, str(p)), str(p), out, ads)
    if len(ads) != len(places):
        raise InputError(str(p), f"{len(places)} ads expected at the places kept of them, "
                                 f"{len(ads)} found")
    return ads, out


class _Places:
    """A text file read (`read(size)`) as the ads at `places` only, in their order."""

    def __init__(self, fd: int, places, source: str):
        self._fd, self._places, self._source, self._next = fd, places, source, 0

    def read(self, size: int = -1) -> str:
        parts, got = [], 0
        while self._next < len(self._places) and (size < 0 or got < size):
            offset, length = self._places[self._next]
            self._next += 1
            data = _pread_all(self._fd, length, offset)
            if len(data) != length or not data.endswith(b"\n\n") or b"\n\n" in data[:-2]:
                raise InputError(self._source, f"no whole ad at byte {offset} ({length} "
                                               "bytes): not the file written")
            parts.append(data)
            got += length
        return b"".join(parts).decode("utf-8")


def _pread_all(fd: int, length: int, offset: int) -> bytes:
    parts = []
    while length > 0:
        data = os.pread(fd, length, offset)
        if not data:
            break
        parts.append(data)
        offset, length = offset + len(data), length - len(data)
    return b"".join(parts)


def _read_texts(path, store, keep: list | None) -> TextAds:
    p = Path(path)
    out = TextAds(store)
    with _reading(p), _open(p) as f:
        head = f.read(4096)
        f.seek(0)
        if head.strip() and (is_json_text(head) or head.lstrip().startswith("[")):
            for ad in parse_ads_text(f.read(), str(p)):
                out.add(_texts_of(ad))
                if keep is not None:
                    keep.append(ad)
        else:
            _read_old_texts(f, str(p), out, keep)
    return out


def _read_old_texts(f, source: str, out: TextAds, keep: list | None) -> None:
    """Old-syntax ads, read in large chunks and cut at blank lines: each ad parsed by
    classad2 (to report bad input as read_ads does) unless every line of it was read
    whole in an earlier ad, its lines kept as shared pairs (a line seen before costs one
    lookup). The texts are the lines classad2 parsed; in the
    ads kept (`keep`), an attribute written as `eval("...")` by `_attribute_lines` is the
    value it stands for (the text evaluates to that same value)."""
    lines: dict = {}                # a line of an ad classad2 read whole -> its shared pair
    get, known = lines.get, lines.__contains__
    count = 0
    # the last ad's text less its own values (`_own_values`), its row, and where in the
    # row those values go: the next job of the same cluster, as condor_q prints it,
    # differs from it only there (keep is None only)
    last: list = [None, None, 0, 0]

    def ad_of(first: int, block: str, body: list | None = None, cut=False) -> None:
        """`cut`: `_own_values(block)` when already worked out (False: not yet)."""
        if body is None:
            body = block.split("\n")
        if _needs_care(block):
            # comment lines or whitespace-only lines: the careful path
            for start, part in _blocks(block):
                rows = [ln for ln in part if not ln.lstrip().startswith(("#", "//"))]
                if rows:
                    one(first + start - 1, part, rows, "\n".join(rows))
            return
        if one(first, body, body, block) and keep is None:
            if cut is False:
                cut = _own_values(block)
            if cut is not None:
                row = out.rows[-1]
                at = body.index(cut[1]), body.index(cut[2])
                last[:] = [cut[0], row, *at]

    def same_run(block: str, cut) -> bool:
        """The ad taken as the last one with its own ProcId and GlobalJobId (plain
        literals), when all its other lines are the last ad's (`cut`: its
        `_own_values`)."""
        nonlocal count
        if cut is None or last[0] is None or cut[0] != last[0] or not (
                _plain_literal(cut[1]) and _plain_literal(cut[2])):
            return False
        row = list(last[1])
        pair = out.pair
        row[last[2]] = pair(*_split_line(cut[1]))
        row[last[3]] = pair(*_split_line(cut[2]))
        out.add_row(tuple(row))
        count += 1
        return True

    def one(first: int, raw: list, body: list, text: str) -> bool:
        """Read one ad; True when its row is its lines' pairs in order (the shortcut)."""
        nonlocal count
        count += 1
        if len(text) > MAX_EXPR_OPERATORS:
            _check_expression_sizes(source, first, raw, count)
        if keep is None:
            # An old-syntax line means the same in any ad: a line read before, in an ad
            # classad2 read whole, one attribute per line, is not parsed again; only the
            # new lines are, on their own (most of a queue's lines repeat from job to
            # job). When they are all read and no name repeats, so is the ad.
            row = list(map(get, body))
            new = list(filterfalse(known, body)) if None in row else ()
            if len(new) < len(body) and (not new or all(map(_plain_literal, new)) or len(
                    _parse_one("\n".join(new), classad2.ParserType.Old)) == len(new)):
                # (the new lines are all different: a repeated one would have parsed
                # as one attribute)
                pair = out.pair
                for ln in new:
                    lines[ln] = pair(*_split_line(ln))
                if new:
                    row = list(map(get, body))
                if len(set(map(_NAME, row))) == len(row):      # names lower-cased
                    out.add_row(tuple(row))
                    return True
                for ln in new:
                    lines.pop(ln, None)     # (a new line given twice is in `new` twice)
        ad = _parse_one(text, classad2.ParserType.Old)
        n = len(ad)
        if n < len(body):           # a dropped line (an error) or a duplicate (fine)
            _report_dropped_line(source, first, raw, ad, count)
        row = list(map(get, body))
        if None in row:
            if n == len(body):
                # every line was read whole: each new one is kept for the ads to come
                for ln in filterfalse(known, body):
                    lines[ln] = out.pair(*_split_line(ln))
                row = list(map(get, body))
            else:
                row = [pair if pair is not None else out.pair(*_split_line(ln))
                       for pair, ln in zip(row, body)]
        if n != len(body) and n != len(set(map(_NAME, row))):
            # classad2 did not read one attribute per line: take its own texts
            row = [out.pair(name, text) for name, text in _texts_of(ad)]
        elif n != len(body):
            # a name given twice: its last line counts, as in classad2 (a row holds
            # each name once)
            last = {name: i for i, (name, _) in enumerate(row)}
            row = [pair for i, pair in enumerate(row) if last[pair[0]] == i]
        out.add_row(tuple(row))
        if keep is not None:
            if _WRAP in text:
                _unwrap_attributes(ad, body)
            keep.append(ad)

    lineno = 1                      # the line `buf` starts at
    buf = ""
    chunks = _lf_chunks(f)
    while True:
        chunk = next(chunks, "")
        if chunk:
            buf += chunk
            cut = buf.rfind("\n\n")
            if cut < 0:
                continue
            done, buf = buf[:cut], buf[cut + 2:]
            nxt = lineno + done.count("\n") + 2
        else:
            done, buf, nxt = buf, "", lineno
        for block in done.split("\n\n"):
            if block and block[0] != "\n" and block[-1] != "\n":
                # (most blocks: no blank line before or after it to strip)
                # (its own values worked out once: for the run test and, when it is
                # no run, for the next ad's)
                cut = _own_values(block) if keep is None else None
                if cut is not None and same_run(block, cut):
                    lineno += block.count("\n") + 2
                    continue
                body = block.split("\n")
                first = lineno
                lineno += len(body) + 1
                if not block.isspace():
                    ad_of(first, block, body, cut)
                continue
            stripped = block.lstrip("\n")
            first = lineno + len(block) - len(stripped)
            lineno += block.count("\n") + 2
            stripped = stripped.rstrip("\n")
            if stripped.strip():
                ad_of(first, stripped)
        lineno = nxt
        if not chunk:
            break


def _lf_chunks(f) -> Iterable[str]:
    """The text of `f` in large chunks, `\\r\\n` read as `\\n` (also across two chunks); a
    lone `\\r` is kept: it can only be a character of a string value."""
    held = ""
    while True:
        chunk = f.read(1 << 22)
        if not chunk:
            if held:
                yield held
            return
        chunk = held + chunk
        held = ""
        if chunk.endswith("\r"):
            chunk, held = chunk[:-1], "\r"
        yield chunk.replace("\r\n", "\n")


# A line (of an ad's text, lines cut at "\n") that starts with '#', '/', a space or a
# tab, or holds only white space (what str.isspace takes: re's \s is the same set).
# Two patterns, the first line's and the others': one `(?:\A|\n)` tried at every
# character costs ten times a search for lines that start after a newline.
_CARE_FIRST = re.compile(r"[#/ \t]|[^\S\n]+(?:\n|\Z)")
_CARE_LINE = re.compile(r"\n(?:[#/ \t]|[^\S\n]+(?:\n|\Z))")


_NAME = itemgetter(0)             # a (name, text) pair's name


def _own_values(block: str) -> tuple[str, str, str] | None:
    """(the ad's text with the values of its ProcId and GlobalJobId lines left out,
    its ProcId line, its GlobalJobId line): what sets a job of a cluster apart from the
    one before it, as condor_q prints them; None when it has not exactly one of each."""
    cuts = []
    for head in ("ProcId = ", "GlobalJobId = "):
        nl = block.find("\n" + head)
        if block.startswith(head):
            if nl >= 0:
                return None
            at = 0
        elif nl < 0 or block.find("\n" + head, nl + 1) >= 0:
            return None
        else:
            at = nl + 1
        end = block.find("\n", at)
        end = len(block) if end < 0 else end
        cuts.append((at, at + len(head), end))
    cuts.sort()
    (a0, v0, e0), (a1, v1, e1) = cuts
    if e0 >= a1:
        return None
    key = block[:v0] + block[e0:v1] + block[e1:]
    pid, gid = block[a0:e0], block[a1:e1]
    if pid.startswith("GlobalJobId"):
        pid, gid = gid, pid
    return key, pid, gid
# A line classad2 reads as one attribute whose value is its text, without asking it: a
# name, " = ", and a whole number of up to 18 digits (no leading zero: classad2 refuses
# some, and reads 20 digits as 0) or a string of printable ASCII without quote or
# backslash (a job's ProcId and GlobalJobId lines, new in every job of a queue)
_plain_literal = re.compile(
    r'[A-Za-z_][A-Za-z0-9_]* = (?:0|-?[1-9][0-9]{0,17}|"[ !#-\[\]-~]*")\Z').match


def _needs_care(block: str) -> bool:
    """Whether an ad's text may hold comment lines or whitespace-only lines (one search
    over the whole text)."""
    return _CARE_FIRST.match(block) is not None or _CARE_LINE.search(block) is not None


def _split_line(line: str) -> tuple[str, str]:
    """`Name = expr` -> (Name, expr): an old-syntax attribute line classad2 has read."""
    name, _, text = line.partition("=")
    return name.strip(), text.strip()


def _report_dropped_line(source, first, lines, ad, index) -> None:
    """Find the line classad2 dropped. An attribute may be given twice (the last one
    counts, as in HTCondor), but each of its lines must parse: a line whose attribute
    appears again is parsed on its own."""
    keys = {k.lower() for k in ad.keys()}
    names = [m.group(1).lower() if (m := _ATTR_LINE.match(line)) else None for line in lines]
    times = Counter(names)
    for offset, line in enumerate(lines):
        if line.lstrip().startswith(("#", "//")):
            continue
        name = names[offset]
        if name is None:
            raise InputError(source, f"not an attribute assignment: {line.strip()[:60]!r}",
                             line=first + offset, ad=_ad_label(index, ad))
        if name not in keys or (times[name] > 1
                                and len(_parse_one(line, classad2.ParserType.Old)) != 1):
            raise InputError(source, f"cannot parse value {line.split('=', 1)[1].strip()[:60]!r}",
                             line=first + offset, ad=_ad_label(index, ad),
                             attribute=_ATTR_LINE.match(line).group(1))


def ad_start_line(path: str | Path, index: int, attribute: str | None = None) -> int | None:
    """The line of the ad number `index` (from 1) of the old-syntax ad file `path`, as
    the readers count ads (blocks cut at blank lines, comment lines skipped): the line
    of its attribute `attribute` (the last, which counts) when it has one, else its
    first line. None for a JSON or new-syntax file, or one that cannot be read again
    (for a message about an ad found bad after its file was read)."""
    try:
        with _open(Path(path)) as f:
            text = "".join(_lf_chunks(f))
    except (OSError, UnicodeDecodeError):
        return None
    if not text.strip() or is_json_text(text) or text.lstrip().startswith("["):
        return None
    want = attribute.lower() if attribute is not None else None
    n = 0
    for first, lines in _blocks(text):
        rows = [(k, ln) for k, ln in enumerate(lines)
                if not ln.lstrip().startswith(("#", "//"))]
        if not rows:
            continue
        n += 1
        if n < index:
            continue
        at = first + rows[0][0]
        if want is not None:
            for k, ln in rows:
                m = _ATTR_LINE.match(ln)
                if m and m.group(1).lower() == want:
                    at = first + k
        return at
    return None


def _check_expression_sizes(source, first, lines, index) -> None:
    """Refuse an attribute whose expression is too large for classad2 to walk safely
    (limits.MAX_EXPR_OPERATORS), naming its line."""
    for offset, line in enumerate(lines):
        if len(line) > MAX_EXPR_OPERATORS:
            why = too_large_expression(line.partition("=")[2])
            if why:
                m = _ATTR_LINE.match(line)
                raise InputError(source, why, line=first + offset, ad=str(index),
                                 attribute=m.group(1) if m else None)


def _ad_label(index: int, ad: classad2.ClassAd) -> str:
    for attr in ("Name", "GlobalJobId"):
        try:
            v = ad.get(attr)
        except Exception:
            v = None
        if isinstance(v, str):
            return f"{index} ({v})"
    return str(index)


def format_ads_long(ads: Iterable[classad2.ClassAd]) -> str:
    """Ads in `-long` form (old syntax, blank line after each ad), attributes sorted, one
    line each (see `_attribute_lines`)."""
    return "".join("\n".join(sort_lines(_attribute_lines(ad))) + "\n\n" for ad in ads)


def sort_lines(lines: list[str]) -> list[str]:
    """An ad's `Name = value` lines in the order of their names, case-insensitively.
    Sorting whole lines lower-cased gives that order: a name is followed by " = ", and a
    space sorts before every character a name can go on with."""
    return sorted(lines, key=str.lower)


def write_ads(path: str | Path, ads: Iterable[classad2.ClassAd]) -> None:
    """Write ads in `-long` form, atomically (a temporary file renamed into place)."""
    write_lines(path, ad_lines(ads))


def ad_lines(ads: Iterable[classad2.ClassAd], seen: dict | None = None) -> list[list[str]]:
    """Each ad's lines as `format_ads_long` writes them (sorted `Name = value` lines).
    Equal lines are one string, shared through `seen` (most lines of a job queue repeat
    from job to job)."""
    seen = {} if seen is None else seen
    share = seen.setdefault
    out = []
    for ad in ads:
        lines = sort_lines(_attribute_lines(ad))
        out.append(list(map(share, lines, lines)))
    return out


def parse_ad_lines(lines: list, source: str, i: int) -> classad2.ClassAd:
    """The ClassAd of an ad's lines, each of which was read whole with it before (the
    `i`th ad of `source`): InputError naming it when they no longer parse so."""
    text = "\n".join(lines)
    ad = _parse_one(text, classad2.ParserType.Old)
    if len(ad) != len(lines):
        raise InputError(source, "a slot ad's lines no longer parse as they did when "
                         "read", ad=str(i))
    if _WRAP in text:
        _unwrap_attributes(ad, lines)
    return ad


class LinesAdMaker:
    """Parses an ad from its lines when it is first read (core.classads.LazyAd, whose
    data is (lines, the ad's place in `source`))."""

    def __init__(self, source: str):
        self.source = source

    def __call__(self, data) -> classad2.ClassAd:
        return parse_ad_lines(data[0], self.source, data[1])


def write_lines(path: str | Path, lines: list[list[str]]) -> None:
    """Write ads given by `ad_lines` in `-long` form, atomically (a temporary file renamed
    into place), a few thousand ads at a time."""
    p = Path(path)
    tmp = p.with_name(p.name + ".tmp")
    with tmp.open("w", encoding="utf-8") as f:
        for k in range(0, len(lines), 4096):
            f.write("".join("\n".join(ad) + "\n\n" for ad in lines[k:k + 4096]))
    tmp.replace(p)


def text_ads_of_lines(lines: list[list[str]], source: str,
                      store: TextStore | None = None, rows: list | None = None,
                      earlier: "KnownLines | None" = None) -> TextAds:
    """The TextAds that reading `source`, written by `write_lines(source, lines)`, gives,
    without reading or parsing it again: every line is one classad2 wrote and read back
    (`_attribute_lines`), one attribute each. An expression too large to walk is refused
    at its line, as when the file is read. `rows`: each ad's row where already worked
    out from the same lines (None where not; `store.names` already holds their names).
    `earlier`: lines an earlier call split already (a shadow loop's job lines, most of
    them the same from pass to pass), taken from there instead of split again."""
    out = TextAds(store)
    pairs: dict = {}                # a line -> its shared pair
    get, known = pairs.get, pairs.__contains__
    old_pair = earlier.pairs.get if earlier is not None else None
    names = out.store.names
    first = 1
    for index, ad in enumerate(lines, start=1):
        if rows is not None and (row := rows[index - 1]) is not None:
            out.add_row(row)
            first += len(ad) + 1
            continue
        row = tuple(map(get, ad))
        if None in row:             # lines not seen before in this file
            for ln in filterfalse(known, ad):
                p = old_pair(ln) if old_pair is not None else None
                if p is not None:   # checked and split when first seen
                    if p[0] not in names:
                        names[p[0]] = earlier.names[p[0]]
                    pairs[ln] = p
                    continue
                if len(ln) > MAX_EXPR_OPERATORS:
                    _check_expression_sizes(source, first, ad, index)
                pairs[ln] = out.pair(*_split_line(ln))
            row = tuple(map(get, ad))
        out.add_row(row)
        first += len(ad) + 1
    if earlier is not None:
        earlier.seen(pairs, names)
    return out


class KnownLines:
    """Lines split into their shared (lower-case name, text) pairs by the last calls of
    `text_ads_of_lines` that were given this (a shadow loop's job lines: most are the same
    from one pass to the next), with their names as written. What one pass's calls used
    is what the next pass finds (`next_pass`): a line no longer used is dropped then."""

    def __init__(self):
        self.pairs: dict[str, tuple] = {}
        self.names: dict[str, str] = {}
        self._pairs: dict[str, tuple] = {}
        self._names: dict[str, str] = {}
        # the loop's jobs from one pass to the next as its worker answered them
        self.jobs = KnownJobs()

    def seen(self, pairs: dict, names: dict) -> None:
        self._pairs.update(pairs)
        self._names.update(names)

    def next_pass(self) -> None:
        self.pairs, self.names = self._pairs, self._names
        self._pairs, self._names = {}, {}


# ---- one line per attribute ----------------------------------------------------------
#
# classad2's printOld writes a string as `"` + the string + `"` with only `"` escaped (as
# `\"`): a newline, tab, carriage return, backslash, control or non-ASCII character is
# written as it is. The old-syntax reader takes every character but a newline literally,
# and a backslash only escapes a quote (a quote right after a backslash ends the string
# only at the end of the line). So printOld's line reads back as the same value unless
# the value holds a newline (the line is cut), a NUL (printOld's text stops there), a
# string ending in a backslash that is not last on its line (`{ "a\\", "b" }`), or bytes
# that are not UTF-8 (printOld raises). Such an attribute is written as
# `Name = eval("<classad2's new-syntax unparse of the value>")`: that unparse escapes
# every control and non-ASCII character in a string, so the line is printable ASCII
# (the newlines it lays a list or a nested ad out with are written as spaces); HTCondor
# evaluates it to the same value, and `_unwrap_attributes` turns it back into the value.

_WRAP = 'eval("'


def _attribute_lines(ad: classad2.ClassAd) -> list[str]:
    """The ad's `Name = value` lines: printOld's own (what condor_status -long prints)
    when each reads back as the same value, else per attribute (`_attribute_line`)."""
    try:
        text = ad.printOld()
    except UnicodeDecodeError:      # a string that is not UTF-8
        text = None
    if text is not None and text.endswith("\n") and text.count("\n") == len(ad):
        lines = text[:-1].split("\n") if text else []
        # a backslash before a quote is the only sequence the old syntax reads specially
        if ('\\"' not in text and "\\'" not in text) or all(
                ('\\"' not in ln and "\\'" not in ln) or _reads_back_in(ln, ad) for ln in lines):
            return lines
    return [_attribute_line(ad, k) for k in ad.keys()]


def _attribute_line(ad: classad2.ClassAd, name: str) -> str:
    """One attribute's line: printOld's when it reads back as the same value, else the
    `eval("...")` form; ValueError when neither does (a string holding a NUL, which
    classad2 can neither print nor parse)."""
    tree = ad.lookup(name)
    line = _plain_line(name, tree)
    if line is not None:
        return line
    # classad2's unparse: every newline in a string or a quoted name is escaped, so its
    # newlines are the layout of a list or a nested ad, which a space replaces
    unparse = str(tree).replace("\n", " ")
    one = classad2.ClassAd()
    one[name] = classad2.ExprTree("eval(%s)" % classad2.quote(unparse))
    text = one.printOld()
    line = text[:-1]
    back = _parse_one(line, classad2.ParserType.Old)
    inner = (_unwrapped(back.lookup(next(iter(back.keys()))))
             if text.count("\n") == 1 and len(back) == 1 else None)
    if inner is None or str(inner) != str(tree):
        raise ValueError(f"attribute {name}: classad2 cannot write its value {str(tree)[:60]} "
                         "so that it reads back the same")
    return line


def _plain_line(name: str, tree) -> str | None:
    """printOld's line for attribute `name` = `tree`, if it is one line that classad2
    reads back as the same expression."""
    one = classad2.ClassAd()
    one[name] = tree
    try:
        text = one.printOld()
    except UnicodeDecodeError:
        return None
    if not text.endswith("\n") or text.count("\n") != 1:
        return None
    line = text[:-1]
    return line if _reads_back(line, tree) else None


def _reads_back(line: str, tree) -> bool:
    """Whether classad2 reads the old-syntax `line` as one attribute whose expression is
    `tree` (compared by classad2's unparse, which escapes everything). (An attribute
    named by a reserved word, `'true' = 1`, reads back under its quoted name: a name is
    written as printOld writes it.)"""
    got = _parse_one(line, classad2.ParserType.Old)
    return len(got) == 1 and str(got.lookup(next(iter(got.keys())))) == str(tree)


def _reads_back_in(line: str, ad: classad2.ClassAd) -> bool:
    """Whether classad2 reads the old-syntax `line` as one attribute of `ad`, with the
    same expression."""
    got = _parse_one(line, classad2.ParserType.Old)
    if len(got) != 1:
        return False
    (name,) = got.keys()
    return name in ad and str(got.lookup(name)) == str(ad.lookup(name))


def _unwrapped(tree):
    """The expression an `eval("...")` line of `_attribute_line` stands for, or None if
    `tree` is not such a line: the argument must be one string literal, classad2 must
    parse it, and its expression must be one that printOld cannot write (so a plain
    `eval("...")` of another file stays as it is)."""
    s = str(tree)
    if not (s.startswith(_WRAP) and s.endswith('")')):
        return None
    arg = s[len("eval("):-1]
    try:
        inner = classad2.ExprTree(arg).eval()
    except Exception:
        return None
    if not isinstance(inner, str) or classad2.quote(inner) != arg:
        return None
    try:
        expr = classad2.ExprTree(inner)
    except Exception:
        return None
    if _plain_line("V", expr) is not None:
        return None
    return expr


def _unwrap_attributes(ad: classad2.ClassAd, body: list) -> None:
    """Set each attribute of `ad` written as `eval("...")` to the value it stands for."""
    for line in body:
        if _WRAP in line:
            name, _ = _split_line(line)
            if name in ad:
                expr = _unwrapped(ad.lookup(name))
                if expr is not None:
                    ad[name] = expr


def _texts_of(ad: classad2.ClassAd) -> list[tuple[str, str]]:
    """(Name, text) of each attribute, as `format_ads_long` writes its line."""
    return [_split_line(line) for line in _attribute_lines(ad)]
