"""The `negotiator-ext` command.

Exit status: 0 success; 2 bad input or usage (one line on stderr, no traceback);
1 an unexpected internal error.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Sequence

from .core.figures import without_sentinels
from .errors import InputError
from .limits import paused_gc, raise_stack_limit
from .views.jsondoc import print_document


from .cli_parser import _Parser, build_parser  # noqa: F401  (tests build on _Parser)


_ONE_SHOT = frozenset({"negotiate", "whatif", "shards", "explain", "userprio"})


def ends_with_command(argv: Sequence[str]) -> bool:
    """Whether the process ends with this command: a one-shot command, or one shadow
    pass (`shadow --once`, from cron: 2.6 s of a 45 s pass at 100,000 slots went to the
    collector's first walk over what the pass made). Sets `limits.PROCESS_ENDS`."""
    from . import limits
    command = next((a for a in argv if not a.startswith("-")), None)
    ends = command in _ONE_SHOT or (command == "shadow" and "--once" in argv)
    limits.PROCESS_ENDS = ends
    return ends


def end_process(rc: int) -> None:
    """The process's end at once, its output and log flushed."""
    import logging
    import os
    try:
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
    except BrokenPipeError:
        pass
    except OSError:
        rc = rc or 1
    os._exit(rc)


def console_main() -> None:
    """The `negotiator-ext` command: `main`, then, after a command the process ends with
    (`ends_with_command`), the process's end at once (its output flushed; nothing of it
    is left to clean up: its child processes are over, its temporary files removed and
    its ledger closed when the command returned)."""
    one_shot = ends_with_command(sys.argv[1:])
    rc = main()
    if one_shot:
        end_process(rc)
    sys.exit(rc)


def main(argv: Sequence[str] | None = None) -> int:
    raise_stack_limit()
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
    from .views.text import printable
    for w in lines:
        print(f"negotiator-ext: warning: {printable(str(w))}", file=sys.stderr)


def _load_pool(args):
    """The snapshot's pool, its warnings printed once (stderr), --at checked."""
    from .pool import load_pool
    # (a cycle over the snapshot's own jobs: slot ads of the attributes it can read)
    pool = load_pool(args.snapshot, args.config, negotiator=args.negotiator,
                     project_slots=True)
    _warn(pool.warnings)
    last = pool.accountant.last_update_time
    if args.at is not None and last and args.at < last:
        raise InputError("--at", f"{args.at} is before the accountant's last update {last}")
    if args.at is None and last and pool.cycle_time() < last:
        _warn([f"{pool.snapshot.accounting_source}: the capture time {pool.cycle_time()} is "
               f"before the accountant's LastUpdate {last} (a cycle began during the "
               "capture?): the accountant takes no time step"])
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
    if quotas is None and (args.at is not None or not _has_quota_fields(pool.accountant)
                           or (args.quotas and not pool.groups.enabled)):
        # (without GROUP_NAMES: the root's record, every quota 0, as the accountant has it)
        quotas = pool.quotas()
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
        from .core.config import ext_number
        timeout = ext_number(knobs, "SNAPSHOT_TIMEOUT", 30, kind=int, minimum=1)
    report = capture_snapshot(pool, Path(args.output), timeout=timeout)
    if args.keep is not None:
        from .core.config import ext_number
        from .shadow_state import prune_snapshots
        keep = args.keep if args.keep >= 0 else ext_number(knobs, "KEEP_SNAPSHOTS", 48,
                                                            kind=int, minimum=0)
        prune_snapshots(report.directory.parent, keep, exclude=report.directory)
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
    from .views.negotiate import filter_doc, render_cycle
    progress = _progress()
    # the process ends with the command: no collection over the pool it still holds
    with paused_gc(collect=False):
        progress(f"reading {args.snapshot} ...")
        pool = _load_pool(args)
        progress(f"{len(pool.slot_ads):,} slots read; running the cycle ...")
        result = run_cycle(pool, args.at)
        progress(f"cycle done: {len(result.matches):,} matches")
        doc = filter_doc(result.to_json(), args.submitter, args.group)
        withheld = result.partial and not args.partial_ok
        if withheld:
            _warn([f"the snapshot is partial ({', '.join(pool.snapshot.unanswered)} did "
                   "not answer), so no match is recommended (--partial-ok to see them "
                   "anyway)"])
            doc["withheld_matches"] = len(doc["matches"])
            doc["matches"] = []
        if args.json:
            # a limit HTCondor left without a number is null, not -2147483648
            doc["submitters"] = without_sentinels(doc["submitters"])
            print_document(doc, sys.stdout)
        else:
            sys.stdout.write(render_cycle(doc, full=args.matches, snapshot=args.snapshot))
    return 0


def _progress():
    """A line on stderr per step of a long command, when stderr is a terminal (a cycle
    at 100,000 slots takes a minute); nothing otherwise."""
    import time as _time
    if not sys.stderr.isatty():
        return lambda text: None
    t0 = _time.monotonic()

    def say(text: str) -> None:
        print(f"negotiator-ext: {_time.monotonic() - t0:5.1f} s  {text}", file=sys.stderr,
              flush=True)
    return say


def cmd_whatif(args) -> int:
    from .core.whatif import compare_cycles
    from .cycle import run_cycle
    from .pool import load_pool
    from .views.whatif import render_whatif
    progress = _progress()
    docs = []
    with paused_gc(collect=False):
        runs = ([(args.snapshot, None, "its own config"), (args.snapshot, args.config, args.config)]
                if args.config is not None else
                [(args.snapshot, None, "its own config"), (args.against, None, "its own config")])
        for path, config, _ in runs:
            progress(f"reading {path} ...")
            pool = load_pool(path, config,       # each cycle on its own copy of the ads
                             negotiator=args.negotiator, project_slots=True)
            _warn(pool.warnings)
            progress("running the cycle ...")
            result = run_cycle(pool, args.at if args.config is not None else None)
            if result.partial:
                _warn([f"{path}: partial snapshot: every submitter's share is uncertain"])
            docs.append(result.to_json())
        doc = compare_cycles(docs[0], docs[1])
        labels = [f"{p} under {c}" for p, _, c in runs]
        if args.json:
            print_document({"before": labels[0], "after": labels[1], **doc}, sys.stdout)
        else:
            sys.stdout.write(render_whatif(doc, labels[0], labels[1], full=args.all))
    return 0


def cmd_shards(args) -> int:
    from .core.shards import roll_up
    from .cycle import run_cycle
    from .pool import load_pool, negotiators_of
    from .views.shards import render_shards
    progress = _progress()
    with paused_gc(collect=False):
        shards = []
        for name in negotiators_of(args.snapshot):
            progress(f"reading {args.snapshot} for {name or 'its negotiator'} ...")
            pool = load_pool(args.snapshot, negotiator=name, project_slots=True)
            _warn(pool.warnings)
            progress("running the cycle ...")
            result = run_cycle(pool, args.at)
            shards.append((name or _only_negotiator(pool) or "<the negotiator>",
                           len(pool.slot_ads), result.to_json()))
        doc = roll_up(shards)
        if args.json:
            print_document(doc, sys.stdout)
        else:
            sys.stdout.write(render_shards(doc, full=args.all))
    return 0


def _only_negotiator(pool) -> str | None:
    """The Name of a snapshot's only negotiator ad (None without one, or when unreadable)."""
    try:
        ads = pool.snapshot.negotiator_ads() or ()
    except InputError:
        return None
    name = ads[0].get("Name") if len(ads) == 1 else None
    return name if isinstance(name, str) else None


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


def _knobs(args) -> dict[str, str]:
    from .adapters.condor_config import local_ext_knobs
    return local_ext_knobs(args.config)


def _ledger_url(args, knobs) -> str:
    """--ledger, else knob NEGOTIATOR_EXT_LEDGER, else the state directory's ledger.sqlite."""
    url = args.ledger or knobs.get("LEDGER")
    if url:
        return url
    state = args.state_dir or knobs.get("STATE_DIR")
    if not state:
        raise InputError("--ledger", "no ledger: pass --ledger, or set NEGOTIATOR_EXT_LEDGER or "
                         "NEGOTIATOR_EXT_STATE_DIR in the HTCondor config")
    return str(Path(state) / "ledger.sqlite")


def _log_to_stderr() -> None:
    """The shadow loop's log lines on stderr (once per process)."""
    import logging

    from .views.text import log_text

    class _Stderr(logging.StreamHandler):
        def emit(self, record):            # whatever sys.stderr is now (tests swap it)
            self.stream = sys.stderr
            super().emit(record)

        def format(self, record):          # names from the pool's ads: no raw controls
            return f"negotiator-ext: {record.levelname}: {log_text(record, self.formatter)}"

    log = logging.getLogger("negotiator_ext")
    if not any(isinstance(h, logging.StreamHandler) and type(h).__name__ == "_Stderr"
               for h in log.handlers):
        log.addHandler(_Stderr())
    log.setLevel(logging.INFO)


def cmd_shadow(args) -> int:
    import contextlib
    import threading
    import time
    from .shadow_publish import (ADVERTISING_WORKS, LoggedOnce, publish, standing_of,
                                 unpublish)
    from .shadow_state import Busy, ShadowSettings, pass_lock
    from .shadow import ShadowLoop, replay_passes
    from .views.ledger import summary_line
    _log_to_stderr()
    knobs = _knobs(args)
    # a replay needs no state directory: it captures nothing, and without one it takes
    # no lock and writes nothing but the ledger (with one, it holds that directory's
    # lock, as a pass of a loop there does)
    settings = ShadowSettings.from_knobs(
        knobs, replay=bool(args.replay), pool=args.pool, ledger_url=args.ledger,
        state_dir=args.state_dir,
        interval=args.interval, matchlog=args.matchlog, matchlog_tz=args.matchlog_timezone,
        negotiator_log=args.negotiator_log,
        timeout=args.timeout,
        metrics_file=args.metrics_file,
        advertise=False if (args.no_advertise or args.replay) else None)
    from .adapters.ledger import parse_url
    parse_url(settings.ledger_url)      # a bad ledger URL changes nothing on disk
    loop = ShadowLoop(settings)
    # a collector refusing the ad every pass: one warning, not one a pass
    advertised = LoggedOnce(loop.log, ADVERTISING_WORKS)

    def report(rec) -> None:
        if args.json:
            from .core.records import as_plain
            print(json.dumps(without_sentinels(as_plain(rec)), default=str), flush=True)
        else:
            print(summary_line(rec), flush=True)
        # a replay writes the metrics only to a --metrics-file named on the command line
        # (never the knob's file of a live loop), and advertises nothing
        if not args.replay or args.metrics_file:
            problems = publish(rec, settings, standing=standing_of(loop, rec.pool),
                               others=loop.latest, worker=loop.worker,
                               stop=loop.stop.is_set if loop.stop is not None else None,
                               heard=loop.heard)
            if "metrics_file" in problems:
                loop.log.warning("%s", problems["metrics_file"])
            if settings.advertise:
                advertised(problems.get("advertise"))

    if args.replay:
        try:
            with (pass_lock(settings.state_dir) if settings.state_dir is not None
                  else contextlib.nullcontext()):
                for rec in replay_passes(loop, [Path(d) for d in args.replay]):
                    report(rec)
        except Busy as exc:
            raise InputError(str(settings.state_dir), str(exc)) from None
        return 0
    if args.once:
        try:
            with pass_lock(settings.state_dir):
                recs = loop.run_passes(collect=False)     # the process ends with it
        except Busy as exc:
            print(f"negotiator-ext: {exc}; not starting another", file=sys.stderr)
            return 0
        for rec in recs:            # one per negotiator in a pool of several
            report(rec)
        return 0 if all(rec.status != "failed" for rec in recs) else 1
    stop = threading.Event()
    import signal
    from .adapters.daemon_config import abandon_remote_reads, allow_remote_reads

    stop_due: list[float] = []      # when the stop is due (NEGOTIATOR_EXT_STOP_TIMEOUT)

    def on_term(*_):
        # a configuration read in flight (a child process) is abandoned at once: the
        # pass goes on without it, and is recorded
        abandon_remote_reads()
        if not stop_due:
            stop_due.append(time.monotonic() + settings.stop_timeout)
        stop.set()
    signal.signal(signal.SIGTERM, on_term)
    try:
        # a ledger that cannot be written for a lasting reason ends the loop with its
        # LedgerError: main prints it in one line, exit status 2
        loop.run_forever(stop, on_pass=report)
    except KeyboardInterrupt:
        stop.set()
    finally:
        allow_remote_reads()        # this process may run another loop (tests)
        err = unpublish(settings, htcondor=loop.htcondor, streams=list(loop.latest),
                        worker=loop.worker, deadline=stop_due[0] if stop_due else None,
                        heard=loop.heard)
        if err:
            print(f"negotiator-ext: {err}", file=sys.stderr)
    return 0


def _pool_in_ledger(ledger, wanted: str | None) -> str | None:
    if wanted:
        return wanted
    pools = ledger.pools()
    if len(pools) > 1:
        raise InputError("--pool", f"the ledger holds several pools ({', '.join(pools)}): name one")
    return pools[0] if pools else None


def cmd_recommend(args) -> int:
    import subprocess
    import time as _time
    from .adapters.ledger import open_ledger
    from .core.config import ext_number
    from .core.recommend import RecommendPolicy, recommend, window_evidence
    from .core.shards import split_stream
    from .views.recommend import render_json, render_script, render_table, same_negotiator
    knobs = _knobs(args)
    policy = RecommendPolicy.from_knobs(knobs)
    window = args.window if args.window is not None else ext_number(
        knobs, "RECOMMEND_WINDOW", 24, positive=True)
    if not window > 0:
        raise InputError("--window", f"{window:g}: must be a positive number of hours")
    if args.apply and args.at is not None:
        raise InputError("--at", "not with --apply: changes are made, and their leases "
                                 "recorded, at the real time")
    max_age = ext_number(knobs, "APPLY_MAX_AGE", 3600, positive=True)
    now = int(args.at if args.at is not None else _time.time())
    # without --apply nothing is written to the ledger: it is opened read-only
    with open_ledger(_ledger_url(args, knobs), create=False,
                     read_only=not args.apply) as ledger:
        pool = _pool_in_ledger(ledger, args.pool or knobs.get("POOL"))
        passes = ledger.window(now - window * 3600, pool=pool, summaries=True)
        passes = [p for p in passes if float(p[0]["started_at"]) <= now]
        target = None if pool in (None, "<local>") else pool
        # a pool of several negotiators: only the adjustments made to this one's
        # accountant (its condor_userprio -name) count as in place
        applied = [a for a in ledger.adjustments() if same_negotiator(a, pool)]
        recs = recommend(passes, policy, now, applied=applied)
        # every refusal comes before the script is written: a refused run writes nothing
        if args.apply:
            newest = float(passes[-1][0]["started_at"]) if passes else None
            if newest is None or now - newest > max_age:
                raise InputError(ledger.source, "nothing applied: the newest complete pass is "
                                 + ("missing" if newest is None else f"{now - newest:.0f} s old")
                                 + f" (NEGOTIATOR_EXT_APPLY_MAX_AGE = {max_age:g} s): the "
                                 "recommendations may no longer fit the pool")
            ledger.check_writable("nothing applied (--apply records every change it makes "
                                  "in the ledger)")
            # one negotiator of several: deletes go through condor_userprio -name too
            negotiator = (_negotiator(target) if any(r.kind == "delete" for r in recs)
                          and split_stream(pool)[1] is None else None)
        if args.script and args.script != "-":
            script, opened = Path(args.script), False
            try:
                with open(script, "w") as f:
                    opened = True
                    f.write(render_script(recs, pool=target, now=now))
                os_chmod_exec(script)
            except OSError as exc:
                if opened:              # a script cut short (a full disk) is not left to run
                    script.unlink(missing_ok=True)
                raise InputError(args.script, f"cannot write the script: "
                                              f"{exc.strerror or exc}") from None
        done = []
        if args.apply:
            from .adapters.apply import apply_recommendations
            latest = {o.name: o for o in passes[-1][1]}
            done = apply_recommendations(recs, ledger=ledger, now=now, pool=target,
                                         negotiator=negotiator, current=latest,
                                         run=subprocess.run, latest_pass_time=newest,
                                         diagnose=_refusal_diagnosis(target))
    # a summarised hour counts the complete passes it stands for
    evidence = window_evidence(passes, policy)
    n_passes = evidence.passes
    if args.script == "-":
        sys.stdout.write(render_script(recs, pool=target, now=now))
    elif args.json:
        doc = render_json(recs, pool=target)
        print(json.dumps({"window_hours": window, "at": now, "pool": pool,
                          "passes": n_passes, "span_hours": round(evidence.hours, 3),
                          # what the rules need of a window (each submitter's eligible
                          # passes, at least)
                          "needs": {"passes": evidence.min_passes,
                                    "span_hours": evidence.min_hours},
                          **doc, "apply": bool(args.apply),
                          "applied": [{"kind": a.kind, "name": a.name, "value": a.value,
                                       "outcome": a.outcome, "command": a.command,
                                       "lease_expires": a.lease_expires} for a in done]},
                         indent=2, default=str))
    else:
        print(f"{n_passes} complete pass(es) of {pool or 'no pool'} in the last "
              f"{window:g} h; {len(recs)} recommendation(s)")
        sys.stdout.write(render_table(recs, evidence))
        if recs and not args.apply:
            print("Nothing was changed in the pool (use --apply to make these changes).")
    # the outcomes: on stdout after the table, on stderr when stdout is a document
    out = sys.stderr if (args.json or args.script == "-") else sys.stdout
    failed = 0
    for adj in done:
        failed += adj.outcome.startswith("failed")
        from .views.text import printable   # names from untrusted ads: escaped for display
        print(printable(f"{adj.outcome}: {adj.command}"),
              file=sys.stderr if adj.outcome.startswith("failed") else out)
    return 1 if failed else 0


def os_chmod_exec(path: Path) -> None:
    """Make the written script executable by its owner (it is meant to be reviewed, then run)."""
    import stat
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


def _refusal_diagnosis(target: str | None):
    """For --apply: `diagnose(rec, took)`, why the negotiator (of the ledger stream
    `target`) refused a change, as this client can tell (adapters/authz.py); asked once
    a level."""
    from .adapters.apply import needed_level
    from .adapters.authz import negotiator_refusal
    from .core.shards import split_stream
    pool, name = split_stream(target)
    seen: dict[str, str | None] = {}

    def diagnose(rec, took: float) -> str | None:
        level = needed_level(rec)
        if level not in seen:
            import htcondor2
            seen[level] = negotiator_refusal(htcondor2, pool, name, level, took=took)
        return seen[level]
    return diagnose


def _negotiator(pool: str | None):
    """The pool's negotiator through the bindings (only for --apply)."""
    import htcondor2
    try:
        coll = htcondor2.Collector(pool)
        return htcondor2.Negotiator(coll.locate(htcondor2.DaemonTypes.Negotiator))
    except Exception as exc:   # noqa: BLE001 - any bindings failure is the same message
        raise InputError(pool or "<local pool>", f"cannot locate the negotiator: {exc}") from None


def cmd_ledger(args) -> int:
    from .adapters.ledger import open_ledger
    if args.ledger_command is None:
        raise InputError("ledger", "name an action: export, show or vacuum")
    knobs = _knobs(args)
    if args.ledger_command == "vacuum":
        with open_ledger(_ledger_url(args, knobs), create=False) as ledger:
            got = ledger.vacuum()
            print(f"{ledger.source}: {got['before'] / 2**20:.1f} MiB before, "
                  f"{got['after'] / 2**20:.1f} MiB after")
        return 0
    with open_ledger(_ledger_url(args, knobs), read_only=True) as ledger:
        if args.ledger_command == "export":
            for path in ledger.export(Path(args.output), args.format, args.table):
                print(path)
            return 0
        from .views.ledger import render_passes
        # the summarised hours among the passes, one row each
        rows = ledger.passes(last=args.last, summaries=True) if args.last > 0 else []
        # each pass's own cycle against the real cycle that followed it (recorded by a
        # later pass); an hour's: the means of the comparisons its passes recorded
        shown = {r["uuid"] for r in rows}
        since = float(rows[0]["started_at"]) if rows else None
        comps = {c.shadow_pass: c for _, c in ledger.comparisons(since=since, summaries=True)
                 if c.shadow_pass in shown}
        if args.json:
            from .views.ledger import passes_document
            print(json.dumps(passes_document(rows, comps), indent=2, default=str))
        else:
            sys.stdout.write(render_passes(rows, comps))
    return 0


def cmd_simulate(args) -> int:
    from .adapters.ledger import open_ledger
    from .scenario import load_scenario
    from .simulate import Simulation, progress_bar
    sc = load_scenario(args.scenario)
    pool_name = sc.pool_name
    progress = None if args.no_progress else progress_bar(sys.stderr)
    with open_ledger(args.output) as ledger:
        if ledger.last_pass(pool_name) is not None:
            raise InputError(args.output, f"already holds passes of {pool_name}: write "
                             "the simulation to another ledger (or delete this one)")
        if not sc.is_replay:
            sim = Simulation(sc, ledger, progress=progress)
            _warn(sim.warnings)
            report = sim.run()
            if sim.unresolved:
                _warn([f"{sim.unresolved} match(es) named a slot or job the simulated pool "
                       "does not have, and were not made"])
    if sc.is_replay:
        from .simulate import replay_what_if
        report = replay_what_if(sc, args.output)
        print(f"{sc.name}: {report.passes} recorded snapshot(s) re-run under the changed "
              f"config in {report.wall:.1f} s ({report.skipped} no longer on disk): "
              f"{report.matches} matches; ledger {args.output} (pool {pool_name})")
        return 0
    doc = {"scenario": sc.name, "pool": sc.pool_name, "ledger": args.output,
           "passes": report.passes, "matches": report.matches,
           "preemptions": report.preemptions, "simulated_seconds": report.span,
           "wall_seconds": round(report.wall, 2)}
    if args.json:
        print(json.dumps(doc, indent=2))
    else:
        print(f"{sc.name}: {report.passes} cycles over {report.span / 3600:g} h of pool time "
              f"in {report.wall:.1f} s: {report.matches} matches, {report.preemptions} "
              f"preemptions; ledger {args.output} (pool {sc.pool_name})")
    return 0


def cmd_forecast(args) -> int:
    from contextlib import nullcontext
    from .adapters.ledger import open_ledger
    from .sim.engine import progress_bar
    from .sim.forecast import ForecastSpec, run_forecast
    from .views.forecast import forecast_document, render_forecast
    knobs = {}
    for item in args.knob:
        name, eq, value = item.partition("=")
        if not eq or not name.strip():
            raise InputError("--knob", f"{item!r} is not NAME=VALUE")
        knobs[name.strip()] = value.strip()
    spec = ForecastSpec(snapshot=Path(args.snapshot), history=tuple(map(Path, args.history)),
                        config=Path(args.config) if args.config else None, knobs=knobs,
                        until=args.until, hours=args.hours, interval=args.interval,
                        default_runtime=args.default_runtime,
                        repeat_history=args.repeat_history, bucket=args.bucket)
    progress = None if args.no_progress else progress_bar(sys.stderr)
    with (open_ledger(args.output) if args.output else nullcontext()) as ledger:
        run = run_forecast(spec, ledger, progress)
    if args.json:
        print_document(forecast_document(run, with_jobs=args.jobs), sys.stdout)
    else:
        _warn(run.warnings)
        run.warnings = []
        sys.stdout.write(render_forecast(run))
    return 0


def cmd_sweep(args) -> int:
    from .sim import sweep as sw
    from .views.sweep import write_report
    configs = [Path(c) for c in (args.config or [])]
    vary = sw.parse_vary(args.vary or [])
    items = sw.sweep_configs(configs, vary)
    out = Path(args.output)
    out.mkdir(parents=True, exist_ok=True)
    common = {"until": args.until, "hours": args.hours, "interval": args.interval,
              "default_runtime": args.default_runtime,
              "repeat_history": args.repeat_history, "bucket": args.bucket}
    runs = sw.prepare(out, Path(args.snapshot), [Path(h) for h in args.history], configs,
                      items, common)
    # every config is read before anything runs: a bad one is named now, not in a job
    from .adapters.condor_config import load_config
    for c in configs:
        load_config(c)
    progress = _progress()
    meta = {"snapshot": args.snapshot, "history": args.history, "engine": args.engine,
            "hours": args.hours if args.until is None else None, "until": args.until}
    if args.engine == "local":
        errors = sw.run_local(out, runs, progress=progress)
    else:
        from .sim.sweep_htcondor import run_htcondor
        errors, took = run_htcondor(out, runs, pool=args.pool, schedd_name=args.name,
                                    progress=progress, timeout=args.timeout,
                                    python=args.python)
        meta["htcondor"] = took
    results = sw.collect(runs, items, errors)
    report = write_report(out, results, meta)
    for m in report["missing"]:
        _warn([f"{m['config']}: no forecast: {m['error']}"])
    done = len(results) - len(report["missing"])
    print(f"{done} of {len(results)} forecasts compared: {out / 'index.html'}")
    return 0 if done else 1


def _cmd_audit(args) -> int:
    from .audit_cli import cmd_audit
    return cmd_audit(args)


def _cmd_install_files(args) -> int:
    from .install import cmd_install_files
    return cmd_install_files(args)


_COMMANDS = {"userprio": cmd_userprio, "snapshot": cmd_snapshot, "negotiate": cmd_negotiate,
             "whatif": cmd_whatif, "shards": cmd_shards,
             "explain": cmd_explain, "shadow": cmd_shadow, "recommend": cmd_recommend,
             "ledger": cmd_ledger, "simulate": cmd_simulate, "forecast": cmd_forecast, "sweep": cmd_sweep,
             "audit": _cmd_audit, "install-files": _cmd_install_files}


if __name__ == "__main__":
    console_main()
