"""Apply recommended condor_userprio adjustments to the pool, once.

The only code that changes the pool. Each recommendation (`core.recommend`) is made with
the command `views.recommend.command_argv` builds, the same one the reviewable script
shows, except a delete, which goes through `htcondor2.Negotiator.deleteUser` when a
negotiator object is given. Leases need the command: the bindings' `setFactor` and
`setCeiling` take no duration. Report-only kinds (setprio, group) are never run.

Idempotent on (kind, name), not on the exact value: a leased change is in place while a
lease of that kind we applied to that name has not ended, whatever its value (the
negotiator refuses a second lease of a kind meanwhile, rule A25); a delete is in place
until a complete pass newer than it shows the record again. A change the pool already
shows (`current`: a running lease of that kind, or an absent record for a delete) is not
made either. Skips are returned but not recorded. Every change tried is recorded in the
ledger right after it is tried, applied or failed, so a crash part way loses nothing
already done. A failure (non-zero exit, an exception, a timeout) is recorded as
"failed: <first line of the error>" and the rest go on. A command no command line can
carry (a NUL in the name: `views.recommend.unrunnable`) is skipped, not tried.

A refusal for want of authorization is not told apart by condor_userprio ("failed to
start MANAGE_PRIORITY_FACTOR command to negotiator") nor by the bindings ("Unable to
connect to the negotiator"): the caller's `diagnose` asks the daemons why
(`adapters/authz.py`), and its line replaces the tool's, which is kept in parentheses:
"failed: the negotiator vm refuses ADMINISTRATOR authorization to reader@example.org
(condor_userprio: failed to start ...)". `needed_level` says which level a change needs.

A name beginning with "-" is passed as it is, right after its option: condor_userprio's
main() (src/condor_tools/user_prio.cpp, HTCondor 25.14) takes the argument after
-setfactor, -setceiling, -setfloor and -delete as the name without checking it, so it
is never read as an option (see `views.recommend`). The Adjustment keeps the true name
and command (shlex quoting, control characters and all); whoever shows them to people
escapes them (`views.text.printable`).
"""

from __future__ import annotations

import shlex
import subprocess
import time
from typing import Any, Callable, Mapping, Protocol, Sequence

from ..core.recommend import LEASED_KINDS, REPORT_ONLY_KINDS, Recommendation, lease_expires
from ..core.records import Adjustment, SubmitterObs
from ..views.recommend import command_argv, same_negotiator, unrunnable

__all__ = ["Ledger", "apply_recommendations", "needed_level", "TIMEOUT"]

TIMEOUT = 60    # seconds a condor_userprio command may take


class Ledger(Protocol):
    """What applying needs from the ledger."""

    def record_adjustment(self, adj: Adjustment) -> None: ...

    def adjustments(self, name: str | None = None,
                    since: int | None = None) -> list[Adjustment]: ...


def apply_recommendations(recs: Sequence[Recommendation], *, ledger: Ledger, now: int,
                          pool: str | None = None, negotiator: Any = None,
                          run: Callable[..., Any] = subprocess.run,
                          current: Mapping[str, SubmitterObs] | None = None,
                          latest_pass_time: float | None = None,
                          diagnose: Callable[[Recommendation, float], str | None] | None
                          = None) -> list[Adjustment]:
    """Make each recommended change unless it is report-only or already in place; returns
    one Adjustment per recommendation, in order (outcome "applied", "failed: ..." or
    "skipped: ...").

    ledger: `record_adjustment(adj)` and `adjustments(name=...)`; only adjustments with
    outcome "applied" count as in place. now: the clock (applied_at, lease ends). pool:
    passed to condor_userprio as -pool. negotiator: an htcondor2.Negotiator for deletes
    (else the command deletes). run: subprocess.run or a stand-in. current: the latest
    complete pass's records by name, to skip what the pool already shows.
    latest_pass_time: the start of the newest complete pass the recommendations come
    from; an applied delete older than it no longer counts as in place (that pass still
    recorded the name, so the record is back). None: an applied delete always counts.
    diagnose: called as diagnose(rec, seconds the failed try took) after a failure; a line
    it returns (e.g. the negotiator refuses the level `needed_level(rec)`) is the
    outcome's reason, the tool's own first line kept after it in parentheses.

    A report-only recommendation gets "skipped: report only" (command "<kind> <name>",
    method "none"). A failed change is recorded with lease_expires = now (nothing took
    effect), so a ledger that judges activity by lease end alone does not take it for a
    change in place; the next run tries it again.
    """
    out: list[Adjustment] = []
    for rec in recs:
        argv = command_argv(rec, pool)
        if argv is None or rec.kind in REPORT_ONLY_KINDS:
            out.append(Adjustment(rec.key, rec.kind, rec.name, rec.value, now, None,
                                  f"{rec.kind} {rec.name}", "none", "skipped: report only"))
            continue
        use_bindings = rec.kind == "delete" and negotiator is not None
        method = "bindings" if use_bindings else "condor_userprio"
        command = (f"htcondor2.Negotiator.deleteUser({rec.name!r})" if use_bindings
                   else shlex.join(argv))
        why = unrunnable(argv) or _in_place(rec, ledger, now, current, latest_pass_time,
                                            pool)
        if why is not None:
            out.append(Adjustment(rec.key, rec.kind, rec.name, rec.value, now, None, command,
                                  method, f"skipped: {why}"))
            continue
        started = time.monotonic()
        if use_bindings:
            outcome = _call(lambda: negotiator.deleteUser(rec.name))
        else:
            outcome = _run(run, argv)
        if outcome != "applied" and diagnose is not None:
            outcome = _diagnosed(outcome, diagnose, rec, time.monotonic() - started,
                                 method)
        lease_expires = (now + int(rec.lease) if rec.lease else None)
        if outcome != "applied":
            lease_expires = now
        adj = Adjustment(rec.key, rec.kind, rec.name, rec.value, now, lease_expires, command,
                         method, outcome)
        ledger.record_adjustment(adj)
        out.append(adj)
    return out


def needed_level(rec: Recommendation) -> str:
    """The authorization level the negotiator asks of the command making `rec`
    (src/condor_negotiator.V6/matchmaker.cpp, HTCondor 25.14): SET_PRIORITYFACTOR (a
    factor without a lease) WRITE; MANAGE_PRIORITY_FACTOR, MANAGE_CEILING, MANAGE_FLOOR
    (leases), SET_CEILING, SET_FLOOR and DELETE_USER ADMINISTRATOR."""
    if rec.kind == "factor" and not rec.lease:
        return "WRITE"
    return "ADMINISTRATOR"


def _diagnosed(outcome: str, diagnose: Callable[[Recommendation, float], str | None],
               rec: Recommendation, took: float, method: str) -> str:
    """A failed outcome with the reason `diagnose` finds, the tool's line kept after it."""
    try:
        why = diagnose(rec, took)
    except Exception:                   # a diagnosis never fails the run
        why = None
    if not why:
        return outcome
    said = outcome.removeprefix("failed: ").removeprefix(f"{method}: ")
    return f"failed: {why} ({method}: {said})"


def _in_place(rec: Recommendation, ledger: Ledger, now: int,
              current: Mapping[str, SubmitterObs] | None,
              latest_pass_time: float | None, pool: str | None = None) -> str | None:
    """Why `rec` needs nothing done (None: it does), judged by (kind, name).

    Leased kinds: a lease of that kind we applied to that name that has not ended (no
    lease: a permanent change), or one the pool shows running (the negotiator would refuse
    another, A25). Delete: a delete we applied that no complete pass since has
    contradicted, or no record in the pool."""
    for adj in reversed(ledger.adjustments(name=rec.name)):
        if not same_negotiator(adj, pool):      # another negotiator's accountant
            continue
        if adj.kind != rec.kind or adj.name != rec.name or adj.outcome != "applied":
            continue
        if rec.kind in LEASED_KINDS and (adj.lease_expires is None or adj.lease_expires > now):
            until = ("does not expire" if adj.lease_expires is None
                     else f"in effect until {adj.lease_expires}")
            return f"{rec.kind} applied at {adj.applied_at}, {until}"
        if rec.kind == "delete" and (latest_pass_time is None
                                     or adj.applied_at >= latest_pass_time):
            return f"deleted at {adj.applied_at}, no complete pass has seen the record since"
    if current is None:
        return None
    obs = current.get(rec.name)
    if rec.kind == "delete":
        return "the record is already absent" if obs is None else None
    if obs is None or rec.kind not in LEASED_KINDS:
        return None
    exp = lease_expires(obs, rec.kind)
    if exp > now:
        return f"a {rec.kind} lease runs until {exp} (the negotiator refuses another)"
    return None


def _run(run: Callable[..., Any], argv: list[str]) -> str:
    """Run one condor_userprio command: "applied" or "failed: <first line>"."""
    try:
        proc = run(argv, capture_output=True, text=True, timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        return f"failed: timed out after {TIMEOUT} s"
    except Exception as exc:            # not found, not executable, ...
        return f"failed: {_first_line(str(exc)) or type(exc).__name__}"
    if proc.returncode != 0:
        msg = (_first_line(getattr(proc, "stderr", None))
               or _first_line(getattr(proc, "stdout", None))
               or f"exit status {proc.returncode}")
        return f"failed: {msg}"
    return "applied"


def _call(f: Callable[[], Any]) -> str:
    """Call a bindings method: "applied" or "failed: <first line>"."""
    try:
        f()
    except Exception as exc:            # HTCondorException and anything it wraps
        return f"failed: {_first_line(str(exc)) or type(exc).__name__}"
    return "applied"


def _first_line(text: str | bytes | None) -> str:
    if not text:
        return ""
    if isinstance(text, bytes):
        text = text.decode(errors="replace")
    for line in text.splitlines():
        if line.strip():
            return line.strip()
    return ""
