"""The `negotiator-ext` command line: every command, its options and its help (the
commands themselves are in `cli`)."""

from __future__ import annotations

import argparse

from .errors import InputError


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors and exit status 2."""

    def error(self, message: str):  # noqa: D401 - argparse API
        raise InputError(f"usage ({self.prog} --help)", message)


def at_time(text: str) -> int:
    """--at: epoch seconds, or an ISO 8601 date or date and time (UTC unless it names its
    zone), as `audit --since` takes them."""
    from .when import epoch_of
    try:
        return int(epoch_of(text) // 1)
    except (ValueError, OverflowError):
        raise argparse.ArgumentTypeError(
            f"{text!r} is neither epoch seconds nor an ISO 8601 date") from None


def _add_snapshot_args(p: argparse.ArgumentParser, at_help: str,
                       negotiator_flags: tuple[str, ...] = ("--negotiator",)) -> None:
    """SNAPSHOT, --at, --json, --config and --negotiator: what every command reading a
    snapshot takes."""
    p.add_argument("snapshot", metavar="SNAPSHOT", help="pool snapshot directory")
    p.add_argument("--at", type=at_time, metavar="TIME", help=at_help)
    p.add_argument("--json", action="store_true", help="one JSON document for machines")
    p.add_argument("--config", metavar="FILE",
                   help="HTCondor config file to use instead of the snapshot's own `config`")
    _add_negotiator_arg(p, negotiator_flags)


def _add_negotiator_arg(p: argparse.ArgumentParser,
                        flags: tuple[str, ...] = ("--negotiator",)) -> None:
    p.add_argument(*flags, dest="negotiator", metavar="NAME",
                   help="the negotiator, by its Name, in a pool of several (each has its "
                        "own slots and accountant; required there)")


_CYCLE_AT = "the cycle's time (default: the snapshot's capture time)"


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="negotiator-ext", allow_abbrev=False,
                     description="A shadow and what-if HTCondor negotiator beside a real pool.")
    from .install import VersionAction, add_install_files_parser
    parser.add_argument("-V", "--version", action=VersionAction)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    up = sub.add_parser("userprio", allow_abbrev=False,
                        help="what condor_userprio prints for a snapshot's accountant state",
                        description="Print what condor_userprio would print for the accountant "
                                    "state of a pool snapshot, optionally advanced to --at.")
    _add_snapshot_args(up, "advance the accountant to this time (one UpdatePriorities + "
                           "CheckMatches step, as at the start of a negotiation cycle)",
                       ("-name", "--negotiator"))
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
    sn.add_argument("--keep", type=int, nargs="?", const=-1, metavar="N",
                    help="afterwards keep only the newest N snapshots named <epoch> beside "
                         "DIR (0 keeps all; without N: knob NEGOTIATOR_EXT_KEEP_SNAPSHOTS, "
                         "else 48), as the capture-snapshot hook does")
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
    ng.add_argument("--matches", action="store_true",
                    help="list every group, submitter, match and rejection (by default a "
                         "large cycle is summarised to fit a screen)")
    ng.add_argument("--submitter", action="append", metavar="NAME",
                    help="only this submitter (may be given again)")
    ng.add_argument("--group", metavar="NAME", help="only this group and its subgroups")

    wi = sub.add_parser("whatif", allow_abbrev=False,
                        help="what a config change (or another snapshot) changes in a cycle",
                        description="Run the negotiation cycle on a snapshot under its own "
                                    "config and under another (--config NEW), or on two "
                                    "snapshots (--against OTHER), and show what changes per "
                                    "group and per submitter: matches, matched weight, "
                                    "quotas and limits, the largest change first.")
    wi.add_argument("snapshot", metavar="SNAPSHOT", help="pool snapshot directory")
    which = wi.add_mutually_exclusive_group(required=True)
    which.add_argument("--config", metavar="NEW",
                       help="the HTCondor config to compare with the snapshot's own")
    which.add_argument("--against", metavar="OTHER",
                       help="another snapshot, each under its own config")
    wi.add_argument("--at", type=at_time, metavar="TIME",
                    help="the cycles' time with --config (default: the capture time)")
    wi.add_argument("--json", action="store_true", help="one JSON document for machines")
    wi.add_argument("--all", action="store_true", help="every row that changes")
    _add_negotiator_arg(wi)

    sd = sub.add_parser("shards", allow_abbrev=False,
                        help="a pool of several negotiators: each one's cycle, and every "
                             "submitter's share across them",
                        description="Run the negotiation cycle of every negotiator of a "
                                    "pool snapshot (each with its own config, slots and "
                                    "accountant) and roll their shares up: each shard's "
                                    "slots and matches, and each submitter's usage, "
                                    "priority and matches in every shard and in the whole "
                                    "pool, which no single negotiator sees.")
    sd.add_argument("snapshot", metavar="SNAPSHOT", help="pool snapshot directory")
    sd.add_argument("--at", type=at_time, metavar="TIME", help=_CYCLE_AT)
    sd.add_argument("--json", action="store_true", help="one JSON document for machines")
    sd.add_argument("--all", action="store_true",
                    help="every submitter (by default the 25 with the most usage)")

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

    sh = sub.add_parser("shadow", allow_abbrev=False,
                        help="run beside a live pool: snapshot, our cycle, the real one, "
                             "compared and recorded in the ledger",
                        description="Shadow passes beside a pool: each pass takes a snapshot "
                                    "(READ only), reads what the real negotiator did (its ad's "
                                    "LastNegotiationCycle* history, the Accounting ads, the "
                                    "claims, the MatchLog when configured), runs our cycle on "
                                    "the same snapshot and records both, with their comparison, "
                                    "in the ledger. Settings come from the NEGOTIATOR_EXT_* "
                                    "knobs; flags override them.")
    sh.add_argument("--pool", metavar="HOST[:PORT]",
                    help="the collector (default: knob NEGOTIATOR_EXT_POOL, else the local pool)")
    mode = sh.add_mutually_exclusive_group()
    mode.add_argument("--once", action="store_true", help="one pass, then exit (for cron)")
    mode.add_argument("--interval", type=float, metavar="SECONDS",
                      help="a pass every SECONDS until interrupted (default: knob "
                           "NEGOTIATOR_EXT_INTERVAL, else 60)")
    mode.add_argument("--replay", nargs="+", metavar="SNAPSHOT",
                      help="instead of a live pool, replay recorded snapshot directories "
                           "as passes, in capture-time order (no bindings are used)")
    _add_ledger_args(sh)
    sh.add_argument("--matchlog", metavar="FILE",
                    help="the real negotiator's MatchLog (default: knob NEGOTIATOR_EXT_MATCHLOG)")
    sh.add_argument("--negotiator-log", metavar="FILE",
                    help="the real negotiator's NegotiatorLog, for the start and end of every "
                         "real cycle (default: knob NEGOTIATOR_EXT_NEGOTIATOR_LOG)")
    sh.add_argument("--matchlog-timezone", metavar="ZONE",
                    help="the time zone the MatchLog's and NegotiatorLog's times are in, e.g. "
                         "UTC (default: knob NEGOTIATOR_EXT_MATCHLOG_TIMEZONE, else this host's)")
    sh.add_argument("--timeout", type=int, metavar="SECONDS",
                    help="per-schedd query timeout (default: knob NEGOTIATOR_EXT_SNAPSHOT_TIMEOUT, else 30)")
    sh.add_argument("--metrics-file", metavar="FILE",
                    help="write Prometheus metrics here after each pass (default: knob "
                         "NEGOTIATOR_EXT_METRICS_FILE; with --replay only this option)")
    sh.add_argument("--no-advertise", action="store_true",
                    help="do not advertise the ShadowNegotiator ad to the collector")
    sh.add_argument("--json", action="store_true", help="print each pass as JSON")

    rc = sub.add_parser("recommend", allow_abbrev=False,
                        help="condor_userprio adjustments justified by the ledger's recent passes",
                        description="From the ledger's recent complete passes, recommend "
                                    "condor_userprio changes (priority factors, ceilings and "
                                    "floors as leases that expire by themselves; stale records "
                                    "to delete), each with its reason and numbers, and advice "
                                    "that is never applied (priority drift, group quotas). "
                                    "Nothing is changed without --apply.")
    _add_ledger_args(rc)
    rc.add_argument("--pool", metavar="HOST[:PORT]",
                    help="the pool whose passes to use (default: knob NEGOTIATOR_EXT_POOL, "
                         "else the ledger's only pool); with --apply, the pool changed")
    rc.add_argument("--window", type=float, metavar="HOURS",
                    help="how far back to look (default: knob NEGOTIATOR_EXT_RECOMMEND_WINDOW, else 24)")
    rc.add_argument("--at", type=at_time, metavar="TIME",
                    help="the time the window ends at (default: now; not with --apply)")
    rc.add_argument("--json", action="store_true", help="one JSON document for machines")
    rc.add_argument("--script", metavar="FILE",
                    help="also write the condor_userprio commands as a reviewable shell "
                         "script ('-': to stdout instead of the table)")
    rc.add_argument("--apply", action="store_true",
                    help="make the changes in the pool (needs ADMINISTRATOR authorization at "
                         "the negotiator); each is recorded in the ledger, and a change "
                         "already in effect is not made again")

    from .audit_cli import add_audit_parser
    add_audit_parser(sub)

    sm = sub.add_parser("simulate", allow_abbrev=False,
                        help="run the negotiator over simulated days of a scenario, into a ledger",
                        description="Run the real negotiator core (accountant, quotas, "
                                    "matchmaking) cycle after cycle over simulated time: jobs "
                                    "arrive, start when matched, run for their duration and "
                                    "leave. Every cycle is recorded in a ledger as shadow mode "
                                    "records a pass, so `audit` works on it.")
    sm.add_argument("scenario", metavar="SCENARIO", help="scenario file (YAML or JSON)")
    sm.add_argument("-o", "--output", required=True, metavar="LEDGER",
                    help="the ledger to write (a SQLite file or a postgresql:// URL)")
    sm.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    sm.add_argument("--json", action="store_true", help="print the run's summary as JSON")

    fc = sub.add_parser("forecast", allow_abbrev=False,
                        help="replay the pool's own workload in a closed loop under a config",
                        description="What a policy change will do over the next hours or "
                                    "days: starting from a snapshot (its slots, queue, claims "
                                    "and accountant), the jobs of the schedds' history arrive "
                                    "at their QDate and run as long as they ran; every cycle "
                                    "our negotiator decides under the config being considered, "
                                    "the schedds and startds act on its matches (claim reuse, "
                                    "partitionable leftovers, per-user limits, the cycle "
                                    "cadence), and the accountant charges the usage. Prints "
                                    "per group and submitter usage, share against quota, waits, "
                                    "preemptions, starvation and a timeline.")
    fc.add_argument("snapshot", metavar="SNAPSHOT", help="snapshot directory (`snapshot` output)")
    _add_forecast_args(fc)
    fc.add_argument("--config", metavar="FILE",
                    help="the config to consider (default: the snapshot's own)")
    fc.add_argument("--knob", action="append", default=[], metavar="NAME=VALUE",
                    help="a knob set after the config (repeatable)")
    fc.add_argument("--json", action="store_true", help="one JSON document for machines")
    fc.add_argument("--jobs", action="store_true", help="with --json: every job as simulated")
    fc.add_argument("-o", "--output", metavar="LEDGER",
                    help="write every cycle as a ledger pass (for audit, ledger show, recommend)")
    fc.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")

    sw = sub.add_parser("sweep", allow_abbrev=False,
                        help="forecast many configs of one start and workload, compared",
                        description="One forecast (see `forecast`) per config: the "
                                    "snapshot's own (the baseline), each --config file, or "
                                    "every combination of the --vary values on top of the "
                                    "snapshot's config; run on this machine's cores or as "
                                    "jobs on an HTCondor pool, and compared in "
                                    "DIR/index.html, DIR/report.json and CSV tables.")
    sw.add_argument("snapshot", metavar="SNAPSHOT", help="snapshot directory")
    _add_forecast_args(sw)
    what = sw.add_mutually_exclusive_group(required=True)
    what.add_argument("--config", nargs="+", metavar="FILE", help="the configs to compare")
    what.add_argument("--vary", action="append", metavar="KNOB=V1,V2,...",
                      help="a knob's values (repeatable: every combination)")
    sw.add_argument("--engine", choices=("local", "htcondor"), default="local",
                    help="local: a process pool on this machine's cores (default); "
                         "htcondor: one job per config on the pool")
    sw.add_argument("--pool", metavar="HOST[:PORT]",
                    help="--engine htcondor: the collector (default: the local pool)")
    sw.add_argument("--name", metavar="NAME", help="--engine htcondor: the schedd to submit to")
    sw.add_argument("--timeout", type=float, metavar="SECONDS",
                    help="--engine htcondor: give up on jobs not done by then")
    sw.add_argument("--python", metavar="PATH",
                    help="--engine htcondor: the jobs' Python (default: this one; the same "
                         "version, on the execute nodes at that path)")
    sw.add_argument("-o", "--output", required=True, metavar="DIR",
                    help="where the inputs, each forecast and the comparison go")

    lg = sub.add_parser("ledger", allow_abbrev=False, help="look into or export the ledger",
                        description="Look into the shadow ledger, or export it for analysis "
                                    "elsewhere.")
    lsub = lg.add_subparsers(dest="ledger_command", metavar="ACTION", parser_class=_Parser)
    lx = lsub.add_parser("export", allow_abbrev=False, help="export the ledger's tables",
                         description="Write each table of the ledger to a file in DIR.")
    _add_ledger_args(lx)
    lx.add_argument("--format", required=True, choices=("csv", "parquet", "jsonl"))
    lx.add_argument("-o", "--output", required=True, metavar="DIR", help="directory to write")
    lx.add_argument("--table", action="append", metavar="TABLE",
                    help="only this table (repeatable; default: all)")
    ls = lsub.add_parser("show", allow_abbrev=False, help="the recent passes and their agreement",
                         description="List the ledger's recent passes: status, our and the real "
                                     "matches, agreement, priority drift, durations.")
    _add_ledger_args(ls)
    ls.add_argument("--last", type=int, default=20, metavar="N",
                    help="how many passes (default 20; a summarised hour is one)")
    ls.add_argument("--json", action="store_true", help="one JSON document for machines")
    lv = lsub.add_parser("vacuum", allow_abbrev=False, help="rewrite the ledger compactly",
                         description="Rewrite the ledger so that the space old passes left "
                                     "goes back to the file system: SQLite VACUUM (a ledger "
                                     "made before negotiator-ext summarised passes then "
                                     "shrinks a step a pass by itself), PostgreSQL VACUUM "
                                     "FULL. It holds the ledger while it copies it, and "
                                     "needs room for the copy.")
    _add_ledger_args(lv)

    add_install_files_parser(sub)
    return parser


def seconds(text: str) -> int:
    """A positive whole number of seconds (argparse names the option when it is not)."""
    v = int(text)
    if v <= 0:
        raise ValueError(text)
    return v


def _add_forecast_args(p: argparse.ArgumentParser) -> None:
    """What `forecast` and `sweep` share: the workload, the span, the cadence."""
    p.add_argument("--history", required=True, nargs="+", metavar="FILE",
                   help="condor_history -long or -json output (one or more files)")
    span = p.add_mutually_exclusive_group()
    span.add_argument("--until", type=at_time, metavar="TIME",
                      help="forecast until then (epoch seconds or ISO 8601)")
    span.add_argument("--hours", type=float, default=24.0, metavar="H",
                      help="forecast H hours from the snapshot (default 24)")
    p.add_argument("--interval", type=int, metavar="SECONDS",
                   help="a cycle every SECONDS (default: the negotiator's cadence: "
                        "NEGOTIATOR_INTERVAL, cycle delay, schedds' reschedules)")
    p.add_argument("--default-runtime", type=float, metavar="SECONDS",
                   help="run time of a job with no finished run in the history "
                        "(default: the history's median)")
    p.add_argument("--repeat-history", type=float, metavar="HOURS",
                   help="project forward: the arrivals of the history's last HOURS, "
                        "shifted to start at the snapshot, repeated to the end")
    p.add_argument("--bucket", type=seconds, default=300, metavar="SECONDS",
                   help="timeline bucket (default 300)")


def _add_ledger_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--ledger", metavar="URL",
                   help="a SQLite file path, sqlite:///relative/path, sqlite:////absolute/path "
                        "or postgresql://user@host/db (default: knob NEGOTIATOR_EXT_LEDGER, "
                        "else $(NEGOTIATOR_EXT_STATE_DIR)/ledger.sqlite)")
    p.add_argument("--state-dir", metavar="DIR",
                   help="where snapshots, the lock and the default ledger live (default: knob "
                        "NEGOTIATOR_EXT_STATE_DIR; `shadow --replay` needs none)")
    p.add_argument("--config", metavar="FILE",
                   help="HTCondor config to read our NEGOTIATOR_EXT_* knobs from "
                        "(default: this host's configuration)")


# Commands that read a snapshot, print and end. Run as the console command
# (`console_main`), their process ends without freeing the pool's objects one by one
# and without switching the cyclic collector back on (0.4 s of 3.2 s at 11,000 slots).
