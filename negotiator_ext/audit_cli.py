"""`negotiator-ext audit`: the fairness audit of a ledger's passes as a static report.

  negotiator-ext audit --ledger URL [--pool P] [--since DATE] [--until DATE] -o DIR
                       [--noise-floor SLOTS] [--config FILE]

DATE is an ISO 8601 date or date and time (UTC when it names no zone) or epoch seconds.
The report (`views.audit`) analyses the complete passes of one pool that started in
[--since, --until); `cli.py` wires `add_audit_parser` and `cmd_audit` in.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from .errors import InputError
from .when import epoch_of

def parse_when(text: str | None, flag: str) -> float | None:
    """A --since / --until value as epoch seconds (`when.epoch_of`): None stays None;
    anything else is an InputError naming `flag`."""
    if text is None:
        return None
    try:
        return epoch_of(text)
    except ValueError:
        raise InputError(flag, f"{text!r} is not a date: use an ISO 8601 date or date and "
                               "time (2025-03-01, 2025-03-01T12:00, UTC unless a zone is "
                               "given) or epoch seconds") from None


def add_audit_parser(sub) -> argparse.ArgumentParser:
    """Add the `audit` command to the `negotiator-ext` subparsers `sub`."""
    p = sub.add_parser(
        "audit", allow_abbrev=False,
        help="a fairness audit report of the ledger's passes (HTML, plots, CSV, JSON)",
        description="Write a static fairness report of one pool's complete passes in the "
                    "ledger: deserved, demand-capped and delivered shares per submitter and "
                    "group, who was over quota, borrowing or starved and for how long, queue "
                    "wait times, priorities, preemptions, fairness over time, real-versus-"
                    "shadow agreement and the recommendations applied, after the "
                    "configuration that makes fairness impossible or odd. DIR gets "
                    "index.html, the plots as PNG, every table as CSV and JSON under "
                    "tables/ (the per-pass tables as Parquet, or gzipped CSV without "
                    "pyarrow), and report.json.")
    from .cli_parser import _add_ledger_args
    _add_ledger_args(p)
    p.add_argument("--pool", metavar="HOST[:PORT]",
                   help="the pool whose passes to audit (default: knob NEGOTIATOR_EXT_POOL, "
                        "else the ledger's only pool)")
    p.add_argument("--since", metavar="DATE",
                   help="first pass start to include: ISO 8601 date or date and time (UTC "
                        "unless a zone is given) or epoch seconds (default: the first pass)")
    p.add_argument("--until", metavar="DATE",
                   help="passes that started before this (same forms; default: no end)")
    p.add_argument("-o", "--output", required=True, metavar="DIR",
                   help="directory for the report: new, empty, or an earlier audit's")
    p.add_argument("--noise-floor", metavar="SLOTS", default=None,
                   help="the smallest shortfall, excess or surplus, in slot-weight units, "
                        "that makes a pass count as starved, over its share or over quota "
                        "(default: 1, so a fraction of a slot is not starvation; 0 counts "
                        "any)")
    return p


def parse_noise_floor(text: str | None) -> float:
    """--noise-floor as a number >= 0 (None: the default, core.audit.NOISE_FLOOR)."""
    from .core.audit import NOISE_FLOOR
    if text is None:
        return NOISE_FLOOR
    try:
        v = float(text)
    except ValueError:
        v = float("nan")
    if not (v >= 0 and v < float("inf")):
        raise InputError("--noise-floor", f"{text!r} is not a number of slot-weight units "
                                          ">= 0")
    return v


# what the report is made with: the `audit` extra (pyproject.toml)
AUDIT_MODULES = ("pandas", "matplotlib", "jinja2")


def _check_audit_extra() -> None:
    """The audit's libraries are an extra, not part of a central manager's install: say
    how to get them (exit status 2) instead of a traceback."""
    import importlib
    missing = []
    for m in AUDIT_MODULES:
        try:
            importlib.import_module(m)
        except ImportError:
            missing.append(m)
    if missing:
        raise InputError("audit", f"needs {', '.join(missing)}, not installed: "
                         "pip install 'negotiator-ext[audit]'")


# blocks this large and larger are mapped on their own (glibc's M_MMAP_THRESHOLD); while
# the audit runs, the resident size is looked at this often (seconds), and the heap's
# freed pages given back when it grew by TRIM_SLACK bytes since they last were
MMAP_THRESHOLD = 1024 * 1024
TRIM_EVERY = 0.05
TRIM_SLACK = 32 * 1024 * 1024


class _ReturnedMemory:
    """While the audit runs (`with`), what it frees is given back to the system.

    On glibc: blocks of MMAP_THRESHOLD (1 MiB) and more are mapped on their own, each
    given back when freed (glibc would raise that threshold as such blocks are freed, and
    the slices' arrays then pile up on the heap, whose freed parts the process keeps: a
    day at 1,000 submitters 703 MB peak instead of 594 MB with the per-pass table kept
    whole); smaller ones come from the heap, and a thread gives the heap's free pages
    back (malloc_trim) when the resident size grew by TRIM_SLACK (32 MB) since they last
    were, looked at every TRIM_EVERY seconds. A threshold of 128 KiB without the
    thread kept as little, but mapped and zeroed each of a slice's arrays afresh (a
    fifth of the CPU time went to the system); 1 MiB without the thread went over 500 MB
    (the heap's freed parts kept). Elsewhere nothing of this.

    And Arrow's buffers (pandas' text columns, the Parquet files) from the C library's
    allocator rather than Arrow's own pool (mimalloc), which keeps what is freed for
    later (a day at 1,000 submitters: some 30 MB more at the peak)."""

    def __init__(self):
        self.libc = None
        self.stop = None
        self.thread = None

    def __enter__(self) -> "_ReturnedMemory":
        import ctypes
        import threading
        try:
            import pyarrow
            pyarrow.set_memory_pool(pyarrow.system_memory_pool())
        except ImportError:
            pass
        if not sys.platform.startswith("linux"):
            return self
        try:
            libc = ctypes.CDLL("libc.so.6")
            libc.mallopt(-3, MMAP_THRESHOLD)                   # M_MMAP_THRESHOLD
            trim = libc.malloc_trim
        except (OSError, AttributeError):                      # not glibc
            return self
        self.stop = threading.Event()

        page = os.sysconf("SC_PAGE_SIZE")

        def rss() -> int:
            with open("/proc/self/statm", "rb") as f:
                return int(f.read().split()[1]) * page

        def trimming(stop=self.stop, trim=trim) -> None:
            # trimmed when the resident size is TRIM_SLACK over what it was after the
            # last trim (or its least since): pages given back are faulted in again
            # when the heap reuses them, so not trimmed when there is little to gain
            floor = rss()
            while not stop.wait(TRIM_EVERY):
                r = rss()
                if r > floor + TRIM_SLACK:
                    trim(0)
                    floor = rss()
                else:
                    floor = min(floor, r)
        self.thread = threading.Thread(target=trimming, name="audit-malloc-trim",
                                       daemon=True)
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        if self.thread is not None:
            self.stop.set()
            self.thread.join()
            self.thread = None


def _made_dirs(out: Path) -> list[Path]:
    """Make `out`/tables for the per-pass file written during the analysis; the
    directories made (outermost first). OSError: an InputError naming `out`."""
    tables = out / "tables"
    made = [d for d in [*reversed(tables.parents), tables] if not d.exists()]
    try:
        (out / "tables").mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(str(out), f"cannot create the report directory: "
                                   f"{exc.strerror or exc}") from exc
    return made


def cmd_audit(args) -> int:
    """Read the period's passes, analyse them and write the report; prints the page's path
    and one summary line."""
    _check_audit_extra()
    with _ReturnedMemory():
        return _audit(args)


def _audit(args) -> int:
    """`cmd_audit` once its memory settings are made."""
    import time
    from .adapters.audit_data import read_frames
    from .adapters.ledger import open_ledger
    from .cli import _knobs, _ledger_url, _pool_in_ledger
    from .core.audit import REPORT_SHARE_COLUMNS, analyse
    from .views.audit import PerPassFile, check_output, write_report
    floor = parse_noise_floor(getattr(args, "noise_floor", None))
    since = parse_when(args.since, "--since")
    until = parse_when(args.until, "--until")
    if since is not None and until is not None and until <= since:
        raise InputError("--until", f"{args.until} is not after --since {args.since}")
    out = Path(args.output)
    check_output(out)               # refuse a foreign directory before reading anything
    knobs = _knobs(args)
    url = _ledger_url(args, knobs)
    made = _made_dirs(out)
    # the per-pass share table goes to its file as the analysis makes it, a slice of
    # passes at a time (a day at 1,000 submitters: 1.5 million rows)
    shares_file = PerPassFile(out / "tables", "submitter_shares_by_pass")
    try:
        with open_ledger(url, read_only=True) as ledger:
            pool = _pool_in_ledger(ledger, args.pool or knobs.get("POOL"))
            # the passes' submitter rows are read by the analysis, a slice at a time
            frames = read_frames(ledger, pool=pool, since=since, until=until, detail=False)
            source = ledger.source
            known = ledger.pools()
            audit = analyse(frames, pool=pool, since=since, until=until, noise_floor=floor,
                            share_columns=REPORT_SHARE_COLUMNS, share_sink=shares_file)
            del frames
        shares_file.finish()
        if pool is not None and known and pool not in known:
            audit.summary["notes"].append(f"The ledger has no pass of pool {pool}; its "
                                          f"pools: {', '.join(known)}.")
        write_report(audit, out, ledger=source, generated_at=time.time(),
                     streamed={"submitter_shares_by_pass": shares_file})
    except BaseException:
        shares_file.abort()
        for d in reversed(made):        # what was made for the report, when left empty
            try:
                d.rmdir()
            except OSError:
                pass
        raise
    shares_file.abort()             # not written when nothing was analysed
    p = audit.summary["passes"]
    print(out / "index.html")
    print(f"{p['analysed']} of {p['total']} pass(es) analysed"
          + ("" if not audit.empty else ": nothing to analyse in this period"),
          file=sys.stderr)
    return 0
