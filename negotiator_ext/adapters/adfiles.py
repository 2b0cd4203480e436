"""Reading and writing files of ClassAds, as HTCondor's tools print them.

Reads `condor_status -long` / `condor_q -long` / `condor_userprio -l` output (old ClassAd
syntax, ads separated by blank lines) and `-json` output (a JSON array of ads). Every ad
is parsed by classad2. classad2's old-syntax parser silently drops a line it cannot
parse, so each ad's attribute count is checked against its lines and a dropped line is
reported, naming the file, the line, the ad and the attribute.
"""

from __future__ import annotations

import io
import json
import re
from contextlib import contextmanager
from pathlib import Path
from typing import Iterable

import classad2

from ..core.adtext import TextAds, TextStore
from ..core.classads import attribute_texts
from ..errors import InputError

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
    with _reading(p):
        text = p.read_text()
    return parse_ads_text(text, str(p))


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
        except json.JSONDecodeError:
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
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(source, f"not valid JSON: {exc.msg}", line=exc.lineno) from None
    if isinstance(doc, dict):
        doc = [doc]
    if not isinstance(doc, list) or not all(isinstance(d, dict) for d in doc):
        raise InputError(source, "expected a JSON array of ClassAds, as condor_status -json prints")
    # classad2 reads one JSON object at a time reliably (its multi-ad JSON reader stops
    # at nested values), so the array is cut into its objects' own text (keeping the
    # "\/Expr(...)\/" escapes) and classad2 parses each.
    ads = []
    for i, (d, piece) in enumerate(zip(doc, _json_object_texts(text)), start=1):
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
    for n, line in enumerate(text.splitlines(), start=1):
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
    """Ads in old syntax, every ad parsed by classad2 (read as files are: newlines
    translated, ads cut at blank lines)."""
    ads: list = []
    _read_old_texts(io.StringIO(text, newline=None), source, TextAds(), ads)
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


def _read_texts(path, store, keep: list | None) -> TextAds:
    p = Path(path)
    out = TextAds(store)
    with _reading(p), p.open() as f:
        head = f.read(4096)
        f.seek(0)
        if head.strip() and (is_json_text(head) or head.lstrip().startswith("[")):
            for ad in parse_ads_text(f.read(), str(p)):
                out.add(attribute_texts(ad))
                if keep is not None:
                    keep.append(ad)
        else:
            _read_old_texts(f, str(p), out, keep)
    return out


def _read_old_texts(f, source: str, out: TextAds, keep: list | None) -> None:
    """Old-syntax ads, read in large chunks and cut at blank lines: each ad parsed by
    classad2 (to report bad input as read_ads does), its lines kept as shared pairs (a
    line seen before costs one lookup)."""
    lines: dict = {}                # a line of this file -> its shared pair
    count = 0

    def ad_of(first: int, block: str) -> None:
        body = block.split("\n")
        if _needs_care(block, body):
            # comment lines or whitespace-only lines: the careful path
            for start, part in _blocks(block):
                rows = [ln for ln in part if not ln.lstrip().startswith(("#", "//"))]
                if rows:
                    one(first + start - 1, part, rows, "\n".join(rows))
            return
        one(first, body, body, block)

    def one(first: int, raw: list, body: list, text: str) -> None:
        nonlocal count
        count += 1
        ad = _parse_one(text, classad2.ParserType.Old)
        n = len(ad)
        if n < len(body):           # a dropped line (an error) or a duplicate (fine)
            _report_dropped_line(source, first, raw, ad, count)
        row = list(map(lines.get, body))
        if None in row:
            for i, pair in enumerate(row):
                if pair is None:
                    ln = body[i]
                    row[i] = lines[ln] = out.pair(*_split_line(ln))
        if n != len(body) and n != len({name for name, _ in row}):
            # classad2 did not read one attribute per line: take its own texts
            row = [out.pair(name, text) for name, text in attribute_texts(ad)]
        out.add_row(tuple(row))
        if keep is not None:
            keep.append(ad)

    lineno = 1                      # the line `buf` starts at
    buf = ""
    while True:
        chunk = f.read(1 << 22)
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
            stripped = block.lstrip("\n")
            first = lineno + len(block) - len(stripped)
            lineno += block.count("\n") + 2
            stripped = stripped.rstrip("\n")
            if stripped.strip():
                ad_of(first, stripped)
        lineno = nxt
        if not chunk:
            break


def _needs_care(block: str, body: list) -> bool:
    """Whether an ad's text may hold comment lines or whitespace-only lines."""
    return (block[0] in "#/ \t" or "\n#" in block or "\n/" in block or "\n " in block
            or "\n\t" in block or any(map(str.isspace, body)))


def _split_line(line: str) -> tuple[str, str]:
    """`Name = expr` -> (Name, expr): an old-syntax attribute line classad2 has read."""
    name, _, text = line.partition("=")
    return name.strip(), text.strip()


def _report_dropped_line(source, first, lines, ad, index) -> None:
    """Find the line classad2 dropped; duplicates of an attribute are not an error."""
    keys = {k.lower() for k in ad.keys()}
    for offset, line in enumerate(lines):
        if line.lstrip().startswith(("#", "//")):
            continue
        m = _ATTR_LINE.match(line)
        if not m:
            raise InputError(source, f"not an attribute assignment: {line.strip()[:60]!r}",
                             line=first + offset, ad=_ad_label(index, ad))
        if m.group(1).lower() not in keys:
            raise InputError(source, f"cannot parse value {line.split('=', 1)[1].strip()[:60]!r}",
                             line=first + offset, ad=_ad_label(index, ad), attribute=m.group(1))


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
    """Ads in `-long` form (old syntax, blank line after each ad), attributes sorted."""
    out = []
    for ad in ads:
        lines = ad.printOld().strip().splitlines()
        out.append("\n".join(sorted(lines, key=lambda s: s.split("=", 1)[0].strip().lower())))
    return "".join(block + "\n\n" for block in out)


def write_ads(path: str | Path, ads: Iterable[classad2.ClassAd]) -> None:
    """Write ads in `-long` form, atomically (a temporary file renamed into place)."""
    p = Path(path)
    tmp = p.with_name(p.name + ".tmp")
    tmp.write_text(format_ads_long(ads))
    tmp.replace(p)
