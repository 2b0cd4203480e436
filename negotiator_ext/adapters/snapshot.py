"""Pool snapshot directories: what a negotiator sees at the start of one cycle.

Layout (every file is what an admin's own tools print):

  slots.ads | slots.json          condor_status -long | -json            (required)
  jobs*.ads | jobs*.json          condor_q -allusers -long | -json, one file per schedd
  submitters.ads | .json          condor_status -submitters -long | -json (optional)
  accounting.ads | .json          condor_userprio -l -allusers, or the collector's
                                  Accounting ads                        (optional)
  negotiator.ads | .json          condor_status -negotiator -long        (optional)
  config                          the negotiator's HTCondor config, or condor_config_val
                                  -dump output                           (optional)
  meta.json                       when and from which pool; "partial" and
                                  "missing_schedds" when a schedd did not answer
  schedds.ads | .json             condor_status -schedd -long | -json (optional: each
                                  schedd's MaxJobsRunning and CurbMatchmaking)
  schedd-knobs.json               each schedd's own limits on what it offers the
                                  negotiator: {"<schedd name>": {"MAX_JOBS_RUNNING":
                                  "10000", ...}}, the values condor_config_val -name
                                  <schedd> -schedd prints (optional; without it the
                                  config's values, else HTCondor's defaults)
  negotiators/<Name>.config       a pool with several negotiators (each with its
                                  NEGOTIATOR_SLOT_CONSTRAINT and its own accountant):
                                  each one's config, as condor_config_val -name <Name>
                                  -negotiator -dump prints it; <Name> is the negotiator
                                  ad's Name, every character but letters, digits and
                                  "@._-" written %XX. Their Accounting ads are told apart
                                  by NegotiatorName (optional; see `for_negotiator`)

`negotiator-ext snapshot` writes the same layout from a live pool.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import stat
from collections import Counter
from itertools import repeat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping
from urllib.parse import quote, unquote

import classad2

from ..core.classads import LazyAd
from ..errors import InputError
from ..core.adtext import Job, TextAds, TextStore, TextValues
from ..core.job_queue import id_number
from ..limits import epoch_problem
from . import job_pieces
from .beside import Beside
from .job_delta import name_counts
from .collector_order import ORDERS
from .adfiles import (ad_start_line, load_json, read_ads, read_ads_and_texts,
                      read_text_ads, text_ads_of_lines)

SNAPSHOT_FORMAT = 1


@dataclass(frozen=True)
class Snapshot:
    directory: Path
    slots_source: str                                  # the slots file, for messages
    slots: tuple[classad2.ClassAd, ...]
    jobs: Mapping[str, TextAds]            # file name -> that schedd's jobs (as text)
    submitters: tuple[classad2.ClassAd, ...] | None
    accounting: tuple[classad2.ClassAd, ...] | None
    accounting_source: str | None
    config_path: Path | None
    meta: Mapping[str, Any] = field(default_factory=dict)
    # the slots' attribute texts, in file order (the ads are in the files' order: a pool
    # built from them puts them in the collector's when the files lost it, see
    # adapters/collector_order.py)
    slot_texts: TextAds | None = None
    # the negotiator's own ad (for shadow mode); read only when asked for, so a bad
    # negotiator.ads cannot stop a command that does not use it
    negotiator_source: Path | None = None
    submitters_source: str | None = None
    # schedd name -> its knobs (schedd-knobs.json), and that file for messages
    schedd_knobs: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    schedd_knobs_source: str | None = None
    # the collector's schedd ads (schedds.ads: condor_status -schedd -long), optional
    schedd_ads: tuple[classad2.ClassAd, ...] | None = None
    schedd_ads_source: str | None = None
    # a pool of several negotiators: each one's config (negotiators/<Name>.config), and
    # the one this snapshot is read for (`for_negotiator`), None when not chosen
    negotiator_configs: Mapping[str, Path] = field(default_factory=dict)
    negotiator_name: str | None = None
    # the slot ads are kept by a shadow loop for its next pass (live.CapturedAds.shared):
    # a cycle copies an ad before it writes into it
    slots_shared: bool = False
    # each slot's memo, kept with its ad from pass to pass (live.CapturedAds.slot_memos)
    slot_memos: tuple | None = None
    # read with `load_snapshot(..., slot_ads=False)`: the slots' texts only, `slots` empty
    # until adapters/slot_projection.project builds them
    slot_rows_only: bool = False
    # the attributes the slot ClassAds were built with (slot_projection.SlotProjection;
    # None: every attribute)
    slot_projection: Any = None

    @property
    def partial(self) -> bool:
        return bool(self.meta.get("partial")) or bool(self.meta.get("missing_schedds"))

    @property
    def missing_schedds(self) -> tuple[str, ...]:
        return tuple(self.meta.get("missing_schedds") or ())

    @property
    def unanswered(self) -> tuple[str, ...]:
        """What did not answer a partial capture: the schedds, else the other queries
        that failed (meta.json "errors": "negotiator", "collector:accounting", ...)."""
        return self.missing_schedds or tuple(self.meta.get("errors") or ()) or ("unknown",)

    @property
    def captured_at(self) -> int | None:
        v = self.meta.get("captured_at")
        return int(v) if isinstance(v, (int, float)) else None

    def negotiator_ads(self) -> tuple[classad2.ClassAd, ...] | None:
        """The negotiator's ads, read when first asked for (the cycle's time-limit cost
        and the shadow's real cycles both read them: once); for a snapshot read for one
        negotiator of several, only that one's (its Name)."""
        if self.negotiator_source is None:
            return None
        got = self.__dict__.get("_negotiator_ads")
        if got is None:
            got = tuple(read_ads(self.negotiator_source))
            if self.negotiator_name is not None:
                got = tuple(ad for ad in got if ad.get("Name") == self.negotiator_name)
            object.__setattr__(self, "_negotiator_ads", got)
        return got

    @property
    def negotiators(self) -> tuple[str, ...]:
        """The names of the pool's negotiators when it has several (negotiators/), in
        the order of their names; () for a pool of one."""
        return tuple(sorted(self.negotiator_configs))

    def for_negotiator(self, name: str) -> "Snapshot":
        """The snapshot as the negotiator `name` sees it: its config, its Accounting ads
        (NegotiatorName `name`; ads without one are its too) and its own ad. InputError
        when the snapshot has several negotiators and none is `name`."""
        if self.negotiator_configs and name not in self.negotiator_configs:
            raise InputError(str(self.directory / NEGOTIATORS),
                             f"no negotiator {name!r} in this snapshot (it has "
                             f"{', '.join(self.negotiators)})")
        accounting = self.accounting
        if accounting is not None:
            accounting = tuple(ad for ad in accounting
                               if ad.get("NegotiatorName", name) == name)
        config = self.negotiator_configs.get(name, self.config_path)
        return dataclasses.replace(self, accounting=accounting, config_path=config,
                                   negotiator_name=name)

    def accounting_negotiators(self) -> tuple[str, ...]:
        """The distinct NegotiatorNames of the Accounting ads, sorted. InputError naming
        the ad when one is not a string (which negotiator's record it is would be
        unknown)."""
        names = set()
        for i, ad in enumerate(self.accounting or (), start=1):
            if "NegotiatorName" not in ad:
                continue
            v = ad.get("NegotiatorName")
            if not isinstance(v, str):
                raise InputError(self.accounting_source or str(self.directory),
                                 "not a string: the name of the negotiator whose record "
                                 "this is", ad=f"{i} ({ad.get('Name')!s:.60})",
                                 attribute="NegotiatorName")
            names.add(v)
        return tuple(sorted(names))

    def all_jobs(self) -> list[classad2.ClassAd]:
        return [ad for ads in self.jobs.values() for ad in ads]


def snapshot_file(directory: Path, stem: str) -> Path | None:
    """The snapshot's `stem`.ads or `stem`.json (InputError when it has both)."""
    return _one_of(directory, stem)


def _one_of(directory: Path, stem: str) -> Path | None:
    found = [p for p in (directory / f"{stem}.ads", directory / f"{stem}.json") if present(p)]
    if len(found) > 1:
        raise InputError(str(directory), f"both {found[0].name} and {found[1].name}: keep one")
    return found[0] if found else None


def present(p: Path) -> bool:
    """Whether the snapshot has the file `p`: False when nothing of that name is there,
    True for a regular file (or a symbolic link to one). Anything else of that name (a
    directory, a symbolic link in a loop or to nothing, a FIFO, an entry that cannot be
    looked at) is an InputError naming it: a file the snapshot has but that cannot be
    read is never taken for one it does not have."""
    try:
        mode = p.stat().st_mode
    except FileNotFoundError:
        if not p.is_symlink():
            return False
        raise InputError(str(p), "cannot read: a symbolic link to nothing") from None
    except OSError as exc:
        raise InputError(str(p), f"cannot read: {exc.strerror or exc}") from None
    if stat.S_ISREG(mode):
        return True
    raise InputError(str(p), "cannot read: a directory, not a file" if stat.S_ISDIR(mode)
                     else "cannot read: not a regular file")


def read_meta(directory: Path) -> dict:
    """meta.json, with the keys the product reads checked (InputError naming the key)."""
    p = directory / "meta.json"
    if not present(p):
        return {}
    meta = _json_object(p, "expected a JSON object")
    _check_meta(meta, str(p))
    return meta


def _json_object(p: Path, not_object: str) -> dict:
    """A small JSON file holding one object (InputError naming the file otherwise)."""
    try:
        text = p.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise InputError(str(p), "not valid JSON: not UTF-8 text") from None
    except OSError as exc:
        raise InputError(str(p), f"cannot read: {exc.strerror or exc}") from None
    data = load_json(text, str(p))
    if not isinstance(data, dict):
        raise InputError(str(p), not_object)
    return data


def _check_meta(meta: dict, source: str) -> None:
    def bad(key: str, what: str):
        raise InputError(source, f"{key}: {what}, not {json.dumps(meta[key])[:60]}")

    def strings(v) -> bool:
        return isinstance(v, list) and all(isinstance(s, str) for s in v)

    v = meta.get("captured_at")
    if v is not None:
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            bad("captured_at", "expected a time in seconds since 1970")
        why = epoch_problem(v)
        if why:
            bad("captured_at", why)
    order = meta.get("ad_order")
    if order is not None and order not in ORDERS:
        bad("ad_order", "expected one of " + ", ".join(f'"{o}"' for o in ORDERS))
    sizes = meta.get("collector_table_sizes")
    if sizes is not None and not (isinstance(sizes, dict) and all(
            k in ("slots", "submitters") and isinstance(v, int)
            and not isinstance(v, bool) and 7 <= v < 2**31 for k, v in sizes.items())):
        bad("collector_table_sizes", 'expected {"slots": <buckets>, "submitters": '
                                     '<buckets>}, each a whole number from 7 up')
    if meta.get("partial") is not None and not isinstance(meta["partial"], bool):
        bad("partial", "expected true or false")
    for key in ("missing_schedds", "warnings"):
        if meta.get(key) is not None and not strings(meta[key]):
            bad(key, "expected a list of strings")
    errors = meta.get("errors")
    if errors is not None and not strings(errors) and not (
            isinstance(errors, dict) and all(isinstance(s, str) for s in errors.values())):
        bad("errors", "expected a list of names or an object of name: message")
    files = meta.get("schedd_files")
    if files is not None and not (isinstance(files, dict)
                                  and all(isinstance(s, str) for s in files.values())):
        bad("schedd_files", "expected an object of file: schedd name")


# Job files of this many bytes or more are read in a child process (beside the slots).
FORK_JOB_BYTES = 4 << 20


def _size(p: Path) -> int:
    try:
        return p.stat().st_size
    except OSError:
        return 0


def _read_job_files(files: list[Path], schedd_files: Mapping[str, str] | None = None
                    ) -> dict[str, TextAds]:
    """Each job file's ads as text, one TextStore for all (job ads share most of their
    lines: each line is kept once), their job ids checked (`check_job_ids`;
    `schedd_files`: meta.json's file -> schedd)."""
    store = TextStore()
    tables = {p.name: read_text_ads(p, store) for p in files}
    check_job_ids(tables, {p.name: p for p in files}, schedd_files or {})
    return tables


def _read_job_files_beside(files: list[Path], schedd_files: Mapping[str, str] | None = None
                           ) -> dict[str, TextAds]:
    """`_read_job_files`, and then, in the child that reads them beside the slot ads,
    what the schedd's view of its queue says of each job (`job_queue.queue_heads`,
    which the cycle would otherwise compute). Anything that goes wrong there leaves
    the heads to the cycle, which computes them as it always does."""
    tables = _read_job_files(files, schedd_files)
    job_pieces.add_heads(list(tables.values()))
    return tables


def _pieces_read(pieces, claims, ids_of, reader: Beside, files: list[Path],
                 schedd_files: Mapping[str, str] | None) -> dict[str, TextAds]:
    """The job files read in pieces by the child (`reader`, from the front) and here
    (from the back), each piece's job ids checked on its side (`_piece_ids`), put back
    together. Anything refused in a piece, a job read twice, or a piece missing (the
    child died), and the files are read again whole, here, in order: bad input is then
    named by file, line and ad as always."""
    try:
        mine = job_pieces.read_pieces(pieces, claims, False, ids_of)
    except InputError:
        reader.cancel()         # (the files are read again whole: its pieces serve nothing)
        return _read_job_files(files, schedd_files)
    try:
        theirs = reader.result()
    except InputError:
        theirs = None
    tables = job_pieces.merge(pieces, mine, theirs)
    if tables is None:
        return _read_job_files(files, schedd_files)
    # (an empty file has no piece)
    return {p.name: tables.get(p.name) or TextAds() for p in files}


def _piece_ids(table: TextAds, path: Path, schedd_files: Mapping[str, str]):
    """A piece's job ids, checked as `check_job_ids` checks a file's."""
    return check_job_ids({path.name: table}, {path.name: path}, schedd_files)


def check_job_ids(tables: Mapping[str, TextAds], paths: Mapping[str, Path],
                  schedd_files: Mapping[str, str]):
    """Every job of the job files (`tables`, by file name, as `read_text_ads` reads
    them: each name once a row; `paths`: each one's path) has a ClusterId and a ProcId,
    each a whole number from 0 up, and no job id is given twice at one schedd: the
    schedd gives every job both, once, so a file without them, or with a job twice, was
    made or edited by hand, and would be read as other jobs than the schedd's. A job's
    schedd is the one the cycle gives it (cycle._ScheddOf): its file's in meta.json's
    `schedd_files`, else GlobalJobId's part before '#', else the snapshot's only schedd
    (one for all such jobs). InputError naming the file, the line (old-syntax files),
    the ad and the attribute; for a job given twice, both ads. Returns the job ids
    read, (schedd, cluster, proc)."""
    values = TextValues()
    prefixes: dict[str, str | None] = {}    # GlobalJobId's text up to '#' -> its schedd
    seen: dict[tuple, tuple[str, int]] = {}  # (schedd, cluster, proc) -> (file, ad)
    setdefault = seen.setdefault
    for file_name, table in tables.items():
        path = paths[file_name]
        file_schedd = schedd_files.get(file_name)
        by_gj = file_schedd is None
        # where a row's ids are, by its length: most rows of a file are laid out alike,
        # and a row holds each name once, so a place that holds the name is its place
        places: dict[int, tuple[int, int, int]] = {}
        for index, row in enumerate(table.rows, start=1):
            at = places.get(len(row))
            if (at is None or at[0] < 0 or at[1] < 0 or row[at[0]][0] != "clusterid"
                    or row[at[1]][0] != "procid"
                    or by_gj and (at[2] < 0 or row[at[2]][0] != "globaljobid")):
                at = places[len(row)] = _places(row)
            c = _job_id(row, at[0], "clusterid", values)
            p = _job_id(row, at[1], "procid", values)
            if c is None or p is None:
                attr = "clusterid" if c is None else "procid"
                i = at[0] if c is None else at[1]
                _bad_job(path, index, row, values, attr, row[i][1] if i >= 0 else None)
            schedd = file_schedd
            if by_gj and at[2] >= 0:
                gj = row[at[2]][1]
                prefix = gj.split("#", 1)[0] if gj.startswith('"') and "#" in gj else gj
                schedd = prefixes.get(prefix, False)
                if schedd is False:
                    v = Job(row, table.store.names, values).value("globaljobid")
                    schedd = prefixes[prefix] = (v.split("#", 1)[0] if isinstance(v, str)
                                                 and "#" in v else None)
            first = setdefault((schedd, c, p), (file_name, index))
            if first[1] != index or first[0] != file_name:
                _twice(path, index, row, values, (schedd, c, p), first, paths)
    return seen.keys()


def _places(row) -> tuple[int, int, int]:
    """Where ClusterId, ProcId and GlobalJobId are in `row` (-1: not there)."""
    at = [-1, -1, -1]
    for i, (name, _) in enumerate(row):
        if name == "clusterid":
            at[0] = i
        elif name == "procid":
            at[1] = i
        elif name == "globaljobid":
            at[2] = i
    return at[0], at[1], at[2]


def _job_id(row, i: int, attr: str, values: TextValues) -> int | None:
    """The job id attribute at `row[i]` (-1: not in the row): its value when it is a
    whole number from 0 up (`job_queue.id_number`), else None."""
    if i < 0:
        return None
    text = row[i][1]
    if text.isdigit() and text.isascii() and len(text) < 19 and (
            text[0] != "0" or len(text) == 1):
        return int(text)              # a plain decimal number (every schedd's)
    lit, v = values.literal(text)
    if not lit:
        v = Job(row, {}, values).value(attr)
    return id_number(v)


def _job_label(index: int, row, values: TextValues) -> str:
    """A job ad for a message: its index in its file, and its GlobalJobId when it has a
    plain one."""
    gj = dict(row).get("globaljobid")
    v = values.literal(gj)[1] if gj is not None and gj.startswith('"') else None
    return f"{index} ({v})" if isinstance(v, str) else str(index)


def _bad_job(path: Path, index: int, row, values: TextValues, attr: str,
             text: str | None) -> None:
    name = "ClusterId" if attr == "clusterid" else "ProcId"
    raise InputError(str(path), "missing" if text is None
                     else f"not a whole number from 0 up: {text[:60]}",
                     line=ad_start_line(path, index, None if text is None else name),
                     ad=_job_label(index, row, values), attribute=name)


def _twice(path: Path, index: int, row, values: TextValues, key: tuple,
           first: tuple[str, int], paths: Mapping[str, Path]) -> None:
    schedd, cluster, proc = key
    first_file, first_index = first
    at = f" at schedd {schedd}" if schedd is not None else ""
    line = ad_start_line(paths[first_file], first_index)
    where = (f"ad {first_index}" if first_file == path.name
             else f"{paths[first_file]}'s ad {first_index}")
    where += f" (line {line})" if line is not None else ""
    raise InputError(str(path), f"duplicate job id {cluster}.{proc}{at}: {where} has the "
                     "same ClusterId and ProcId (a schedd gives each job its own)",
                     line=ad_start_line(path, index), ad=_job_label(index, row, values))


def _job_texts(lines: list, source: str, store: TextStore, known, schedd: str | None):
    """The texts of a captured schedd's jobs; in a shadow loop (`known`, adfiles.KnownLines)
    each job its worker found unchanged since the last pass keeps that pass's texts
    (job_delta.KnownJobs), and this pass's are kept for the next."""
    jobs = known.jobs if known is not None and schedd is not None else None
    got = jobs.rows_for(schedd) if jobs is not None else None
    rows, names = None, Counter()
    if got is not None:
        rows, names, spelled = got
        for n in names:             # the kept rows' names, as text_ads_of_lines wants them
            store.names.setdefault(n, spelled[n])
    texts = text_ads_of_lines(lines, source, store, rows=rows, earlier=known)
    if jobs is not None:
        names.update(name_counts(row for row, old in zip(
            texts.rows, rows if rows is not None else repeat(None)) if old is None))
        jobs.keep_rows(schedd, texts.rows, names, store.names)
    return texts


def check_slot_name(ad, source: str, i: int) -> None:
    """A slot ad (the `i`th of `source`) has a Name: every slot is known by it."""
    if not isinstance(ad.get("Name"), str):
        raise InputError(source, "slot ad has no Name", ad=str(i))


def load_snapshot(path: str | Path, *, jobs: bool = True, captured=None,
                  slot_ads: bool = True, early_slots=None) -> Snapshot:
    """Read a snapshot directory (without its job files when not `jobs`: a simulation
    takes only a recorded pool's slots). Raises InputError naming the file on bad input.

    Without `slot_ads`, an old-syntax slots file is read as text only (every line
    checked as always) and `slots` is left empty (`slot_rows_only`): the caller builds
    them with the attributes its cycle reads (adapters/slot_projection.project).
    `early_slots(texts, source)` may build them then, while the jobs are still being read
    (None: it cannot yet): (ads, slot_projection.SlotProjection).

    `captured` (live.CapturedAds): the slot and job ads the capture that wrote this
    directory still holds: they are taken from it instead of being read and parsed
    again (the same ads and texts; the small files are read as always)."""
    directory = Path(path)
    if not directory.exists():
        raise InputError(str(directory), "no such snapshot directory")
    if not directory.is_dir():
        raise InputError(str(directory), "not a directory (a snapshot is a directory of ad files)")
    slots_file = _one_of(directory, "slots")
    if slots_file is None:
        raise InputError(str(directory), "not a pool snapshot: no slots.ads or slots.json "
                         "(condor_status -long or -json output)")
    job_files = [p for p in sorted(directory.glob("jobs*"))
                 if p.suffix in (".ads", ".json") and present(p)
                 ] if jobs and captured is None else []
    # (each job file's schedd, for the job ids' check)
    meta = read_meta(directory)
    # The job files are read in a child process while the slot ads are parsed here
    # (adapters/beside.py), when they are large enough for that to pay.
    sizes = [_size(p) for p in job_files]
    # the slot ads left to the caller (old syntax only), or built early (`early_slots`)
    deferred = captured is None and not slot_ads and slots_file.suffix == ".ads"
    projection = None
    fork = sum(sizes) >= FORK_JOB_BYTES
    # Large job files: in pieces, the child taking them from the front and this process
    # from the back once its slot ads are read (adapters/job_pieces.py)
    pieces = job_pieces.plan(job_files, sizes) if fork else None
    if pieces is not None:
        try:
            claims = job_pieces.Claims(len(pieces))
        except (OSError, ImportError):      # no shared semaphores here (no /dev/shm)
            pieces = None
    if pieces is not None:
        ids_of = functools.partial(_piece_ids, schedd_files=meta.get("schedd_files") or {})
        reader = Beside(job_pieces.read_pieces, pieces, claims, True, ids_of)
    else:
        reader = Beside(_read_job_files_beside if fork else _read_job_files, job_files,
                        meta.get("schedd_files"), fork=fork)
    try:
        if captured is not None:
            slots = tuple(captured.slots)
            slot_texts = (captured.slot_texts if captured.slot_texts is not None
                          else text_ads_of_lines(captured.slot_lines, str(slots_file)))
        elif deferred:
            slot_texts, slots = read_text_ads(slots_file), ()
            built = early_slots(slot_texts, str(slots_file)) if early_slots else None
            if built is not None:
                slots, projection = built
        else:
            ads, slot_texts = read_ads_and_texts(slots_file)
            slots = tuple(ads)
        if projection is None:              # (built early: checked as they were built)
            for i, ad in enumerate(slots, start=1):
                # (a capture's ad kept as its lines, to be parsed when first read, is
                # one whose Name the capture took as a string: slot_cache.is_slot_ad)
                if type(ad) is not LazyAd:
                    check_slot_name(ad, str(slots_file), i)
        if pieces is None:
            queues = reader.result()
        else:
            queues = _pieces_read(pieces, claims, ids_of, reader, job_files,
                                  meta.get("schedd_files"))
    except BaseException:
        reader.cancel()
        raise
    if captured is not None and jobs:
        store = TextStore()   # job ads share most of their lines: keep each line once
        # a shadow loop's job lines split by its last pass (adfiles.KnownLines)
        known = captured.known_lines
        if known is not None:
            known.next_pass()
        for name in sorted(captured.jobs):
            queues[name] = _job_texts(captured.jobs[name], str(directory / name), store,
                                      known, captured.job_schedds.get(name))

    submitters_file = _one_of(directory, "submitters")  # read in this order: the first bad file is named
    submitters = tuple(read_ads(submitters_file)) if submitters_file else None
    accounting_file = _one_of(directory, "accounting")
    accounting = tuple(read_ads(accounting_file)) if accounting_file else None
    config = directory / "config"
    schedds_file = _one_of(directory, "schedds")
    schedd_ads = tuple(read_ads(schedds_file)) if schedds_file else None
    knobs_file = directory / SCHEDD_KNOBS
    knobs = present(knobs_file)
    negotiator_configs = read_negotiator_configs(directory / NEGOTIATORS)
    return Snapshot(
        directory=directory,
        slots_source=str(slots_file),
        slots=slots,
        slot_texts=slot_texts,
        jobs=queues,
        submitters=submitters,
        submitters_source=str(submitters_file) if submitters_file else None,
        accounting=accounting,
        accounting_source=str(accounting_file) if accounting_file else None,
        negotiator_source=_one_of(directory, "negotiator"),
        config_path=config if present(config) else None,
        meta=meta,
        schedd_knobs=read_schedd_knobs(knobs_file) if knobs else {},
        schedd_knobs_source=str(knobs_file) if knobs else None,
        schedd_ads=schedd_ads,
        schedd_ads_source=str(schedds_file) if schedds_file else None,
        negotiator_configs=negotiator_configs,
        slot_rows_only=deferred and projection is None,
        slot_projection=projection,
        slots_shared=captured is not None and captured.shared,
        slot_memos=(tuple(captured.slot_memos) if captured is not None
                    and captured.slot_memos is not None else None),
    )


NEGOTIATORS = "negotiators"
_CONFIG_SUFFIX = ".config"


def negotiator_config_name(name: str) -> str:
    """The file name of the negotiator `name`'s config in negotiators/."""
    return quote(name, safe="@-_.") + _CONFIG_SUFFIX


def read_negotiator_configs(d: Path) -> dict[str, Path]:
    """negotiators/: {negotiator name: its config file}; {} without the directory.
    InputError for a directory holding anything but <Name>.config files."""
    if not os.path.lexists(d):
        return {}
    if not d.is_dir():
        raise InputError(str(d), "not a directory (expected one <Name>.config file per "
                                 "negotiator)")
    out: dict[str, Path] = {}
    for p in sorted(d.iterdir()):
        if not p.name.endswith(_CONFIG_SUFFIX) or not p.is_file():
            raise InputError(str(p), "not a negotiator's config (expected <Name>.config "
                                     "files only)")
        try:
            name = unquote(p.name[:-len(_CONFIG_SUFFIX)], errors="strict")
        except UnicodeDecodeError:
            raise InputError(str(p), "a negotiator's name that is not UTF-8 text") from None
        if not name:
            raise InputError(str(p), "a negotiator's config with no name")
        out[name] = p
    return out


SCHEDD_KNOBS = "schedd-knobs.json"


def read_schedd_knobs(p: Path) -> dict[str, dict[str, str]]:
    """schedd-knobs.json: an object of schedd name -> object of knob -> value (text, or
    a number or true/false as written by hand), InputError naming the schedd and knob."""
    data = _json_object(p, "expected a JSON object of schedd name: {knob: value}")
    out: dict[str, dict[str, str]] = {}
    for name, knobs in data.items():
        if not isinstance(knobs, dict):
            raise InputError(str(p), "expected an object of knob: value", ad=f"schedd {name}")
        got: dict[str, str] = {}
        for knob, value in knobs.items():
            if isinstance(value, bool):
                value = "true" if value else "false"
            elif isinstance(value, (int, float)) and not isinstance(value, bool):
                value = json.dumps(value)
            if not isinstance(value, str):
                raise InputError(str(p), f"expected a value as text, not {json.dumps(value)[:60]}",
                                 ad=f"schedd {name}", attribute=knob)
            got[str(knob)] = value
        out[str(name)] = got
    return out
