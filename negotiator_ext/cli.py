"""The `negotiator-ext` command.

Exit status: 0 success; 2 bad input or usage (one line on stderr, no traceback);
1 an unexpected internal error.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Sequence

from . import __version__
from .errors import InputError


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors and exit status 2."""

    def error(self, message: str):  # noqa: D401 - argparse API
        raise InputError(f"usage ({self.prog} --help)", message)


def _add_snapshot_args(p: argparse.ArgumentParser, at_help: str) -> None:
    """SNAPSHOT, --at, --json and --config: what every command reading a snapshot takes."""
    p.add_argument("snapshot", metavar="SNAPSHOT", help="pool snapshot directory")
    p.add_argument("--at", type=int, metavar="EPOCH", help=at_help)
    p.add_argument("--json", action="store_true", help="one JSON document for machines")
    p.add_argument("--config", metavar="FILE",
                   help="HTCondor config file to use instead of the snapshot's own `config`")


_CYCLE_AT = "the cycle's time (default: the snapshot's capture time)"


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="negotiator-ext", allow_abbrev=False,
                     description="A shadow and what-if HTCondor negotiator beside a real pool.")
    parser.add_argument("--version", action="version", version=f"negotiator-ext {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    up = sub.add_parser("userprio", allow_abbrev=False,
                        help="what condor_userprio prints for a snapshot's accountant state",
                        description="Print what condor_userprio would print for the accountant "
                                    "state of a pool snapshot, optionally advanced to --at.")
    _add_snapshot_args(up, "advance the accountant to this time (one UpdatePriorities + "
                           "CheckMatches step, as at the start of a negotiation cycle)")
    up.add_argument("-all", "--all", dest="all_fields", action="store_true",
                    help="all columns (condor_userprio -all)")
    up.add_argument("-allusers", "--allusers", dest="allusers", action="store_true",
                    help="also users without usage in the last day (condor_userprio -allusers)")
    up.add_argument("-l", "--long", dest="long", action="store_true",
                    help="the records as ClassAds (condor_userprio -l)")
    up.add_argument("-quotas", "--quotas", dest="quotas", action="store_true",
                    help="group quotas (condor_userprio -quotas)")
    up.add_argument("-grouprollup", "--grouprollup", dest="grouprollup", action="store_true",
                    help="group usage rolled up from subgroups (condor_userprio -grouprollup)")

    sn = sub.add_parser("snapshot", allow_abbrev=False,
                        help="capture a pool snapshot from a live pool (READ access only)",
                        description="Capture a pool snapshot through the HTCondor Python bindings: "
                                    "slot, submitter, negotiator and Accounting ads from the "
                                    "collector, idle and running jobs from every schedd, and the "
                                    "negotiator's policy knobs.")
    sn.add_argument("--pool", metavar="HOST[:PORT]",
                    help="the collector (default: knob NEGOTIATOR_EXT_POOL, else the local pool)")
    sn.add_argument("-o", "--output", required=True, metavar="DIR", help="snapshot directory to write")
    sn.add_argument("--timeout", type=int, metavar="SECONDS",
                    help="per-schedd query timeout (default: knob NEGOTIATOR_EXT_SNAPSHOT_TIMEOUT, else 30)")
    sn.add_argument("--config", metavar="FILE",
                    help="HTCondor config to read our NEGOTIATOR_EXT_* knobs from "
                         "(default: this host's configuration)")
    ng = sub.add_parser("negotiate", allow_abbrev=False,
                        help="run one negotiation cycle on a snapshot and say what the "
                             "negotiator should do",
                        description="Run one negotiation cycle of the condor_negotiator on a "
                                    "pool snapshot: user priorities, the pie, group quotas and "
                                    "matchmaking. Prints the recommended matches, rejections, "
                                    "and per-submitter and per-group figures.")
    _add_snapshot_args(ng, _CYCLE_AT)
    ng.add_argument("--partial-ok", action="store_true",
                    help="recommend matches even when some schedd did not answer the snapshot")

    ex = sub.add_parser("explain", allow_abbrev=False,
                        help="why a job was (not) matched in one negotiation cycle",
                        description="Run one negotiation cycle on a pool snapshot and tell one "
                                    "job's story: matched or not, the negotiator's reason, which "
                                    "slots accept it and where they went, its submitter's and "
                                    "group's figures and its concurrency limits.")
    _add_snapshot_args(ex, _CYCLE_AT)
    ex.add_argument("job", metavar="JOB", help="the job, as ClusterId.ProcId")
    ex.add_argument("--schedd", metavar="NAME",
                    help="the job's schedd (needed when the id exists at several)")
    ex.add_argument("--autocluster", action="store_true",
                    help="also list the jobs of its submitter's autocluster and their outcome")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        if args.command is None:
            parser.print_help(sys.stderr)
            return 2
        return _COMMANDS[args.command](args)
    except InputError as exc:
        print(f"negotiator-ext: error: {exc.one_line()}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 0
    except KeyboardInterrupt:
        return 130


def _warn(lines) -> None:
    for w in lines:
        print(f"negotiator-ext: warning: {w}", file=sys.stderr)


def _load_pool(args):
    """The snapshot's pool, its warnings printed once (stderr), --at checked."""
    from .pool import load_pool
    pool = load_pool(args.snapshot, args.config)
    _warn(pool.warnings)
    last = pool.accountant.last_update_time
    if args.at is not None and last and args.at < last:
        raise InputError("--at", f"{args.at} is before the accountant's last update {last}")
    return pool


def cmd_userprio(args) -> int:
    from .core.accountant import Accountant
    pool = _load_pool(args)
    quotas = None
    if args.quotas and pool.groups.enabled:
        # condor_userprio -quotas shows what the last cycle computed: run it
        from .cycle import run_cycle
        result = run_cycle(pool, args.at)
        acc, quotas = result.accountant, result.quotas
    elif args.at is not None:
        acc = pool.accountant_at(args.at)
    else:
        acc = Accountant(pool.accountant, pool.config, pool.groups)
    if quotas is None and (args.at is not None or not _has_quota_fields(pool.accountant)):
        quotas = pool.quotas() if pool.groups.enabled else None
    now = pool.cycle_time(args.at)
    ads = acc.report(quotas, rollup=args.grouprollup)
    if args.json:
        doc = {
            "time": now,
            "last_update": acc.last_update_time,
            "snapshot": str(pool.snapshot.directory),
            "partial": pool.snapshot.partial,
            "config": pool.config.source,
            "records": ads,
            "concurrency_limits": dict(acc.limits),
        }
        print(json.dumps(doc, indent=2, sort_keys=True, default=str))
    elif args.long:
        from .views.ads import format_dicts_long
        sys.stdout.write(format_dicts_long(ads))
    else:
        from .views.userprio import UserprioOptions, render_table
        opts = UserprioOptions(all_fields=args.all_fields, allusers=args.allusers,
                               quotas=args.quotas, grouprollup=args.grouprollup)
        sys.stdout.write(render_table(ads, now=now, options=opts))
    return 0


def _has_quota_fields(state) -> bool:
    return any("EffectiveQuota" in rec for rec in state.customers.values())


def cmd_snapshot(args) -> int:
    from .adapters.condor_config import local_ext_knobs
    from .adapters.live import capture_snapshot

    knobs = local_ext_knobs(args.config)   # command-line flags override our knobs
    pool = args.pool or knobs.get("POOL") or None
    timeout = args.timeout
    if timeout is None:
        try:
            timeout = int(float(knobs.get("SNAPSHOT_TIMEOUT", 30)))
        except (ValueError, OverflowError):
            raise InputError("NEGOTIATOR_EXT_SNAPSHOT_TIMEOUT",
                             f"not a number: {knobs['SNAPSHOT_TIMEOUT']}") from None
    report = capture_snapshot(pool, Path(args.output), timeout=timeout)
    for name in report.missing_schedds:
        msg = report.errors.get(name, "did not answer")
        print(f"negotiator-ext: warning: schedd {name}: {msg}", file=sys.stderr)
    for key, msg in report.errors.items():
        if key not in report.missing_schedds:
            print(f"negotiator-ext: warning: {key}: {msg}", file=sys.stderr)
    state = "PARTIAL snapshot" if report.partial else "snapshot"
    print(f"{state} written to {report.directory}: {report.slots} slots, {report.jobs} jobs "
          f"from {len(report.schedds)} schedd(s)"
          + (f"; missing: {', '.join(report.missing_schedds)}" if report.missing_schedds else ""))
    return 0


def cmd_negotiate(args) -> int:
    from .cycle import run_cycle
    from .views.negotiate import render_cycle
    pool = _load_pool(args)
    result = run_cycle(pool, args.at)
    doc = result.to_json()
    withheld = result.partial and not args.partial_ok
    if withheld:
        _warn([f"the snapshot is partial ({', '.join(pool.snapshot.unanswered)} did not "
               "answer), so no match is recommended (--partial-ok to see them anyway)"])
        doc["withheld_matches"] = len(doc["matches"])
        doc["matches"] = []
    if args.json:
        print(json.dumps(doc, indent=2, default=str))
    else:
        sys.stdout.write(render_cycle(doc))
    return 0


def cmd_explain(args) -> int:
    import re
    from .core.explain import explain_job
    from .cycle import find_job, run_cycle
    from .views.explain import render_explain
    if not re.fullmatch(r"\d+\.\d+", args.job):
        raise InputError("JOB", f"not a job id (ClusterId.ProcId): {args.job!r}")
    pool = _load_pool(args)
    found = find_job(pool, args.job)
    if args.schedd is not None:
        found = [f for f in found if f[0] == args.schedd]
    if not found:
        where = f" at schedd {args.schedd}" if args.schedd else ""
        raise InputError(args.snapshot, f"no job {args.job}{where} in the snapshot")
    schedds = sorted({str(f[0]) for f in found})
    if len(found) > 1:
        raise InputError(args.snapshot, f"job {args.job} is at several schedds "
                         f"({', '.join(schedds)}): name one with --schedd")
    schedd, ad = found[0]
    result = run_cycle(pool, args.at)
    doc = explain_job(ad, pool.slot_ads, result, schedd=schedd, autocluster=args.autocluster)
    if result.partial:
        _warn(["the snapshot is partial: every submitter's share is uncertain"])
    if args.json:
        print(json.dumps(doc, indent=2, default=str))
    else:
        sys.stdout.write(render_explain(doc))
    return 0


_COMMANDS = {"userprio": cmd_userprio, "snapshot": cmd_snapshot, "negotiate": cmd_negotiate,
             "explain": cmd_explain}


if __name__ == "__main__":
    sys.exit(main())
