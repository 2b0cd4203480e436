"""Apply recommended condor_userprio adjustments to the pool, once.

The only code that changes the pool. Each recommendation (`core.recommend`) is made with
the command `views.recommend.command_argv` builds, the same one the reviewable script
shows, except a delete, which goes through `htcondor2.Negotiator.deleteUser` when a
negotiator object is given. Leases need the command: the bindings' `setFactor` and
`setCeiling` take no duration.

Idempotent: a recommendation whose change (its `key`) the ledger shows applied and not
yet expired, or whose value the pool already shows (`current`), is skipped and nothing is
run; skips are returned but not recorded. Every change tried is recorded in the ledger
right after it is tried, applied or failed, so a crash part way loses nothing already
done. A failure (non-zero exit, an exception, a timeout) is recorded as
"failed: <first line of the error>" and the rest go on.
"""

from __future__ import annotations

import shlex
import subprocess
from typing import Any, Callable, Mapping, Protocol, Sequence

from ..core.recommend import Recommendation, key_value
from ..core.records import Adjustment, SubmitterObs
from ..views.recommend import command_argv

__all__ = ["Ledger", "apply_recommendations", "TIMEOUT"]

TIMEOUT = 60    # seconds a condor_userprio command may take


class Ledger(Protocol):
    """What applying needs from the ledger."""

    def record_adjustment(self, adj: Adjustment) -> None: ...

    def active_adjustment(self, key: str, now: int) -> Adjustment | None: ...


def apply_recommendations(recs: Sequence[Recommendation], *, ledger: Ledger, now: int,
                          pool: str | None = None, negotiator: Any = None,
                          run: Callable[..., Any] = subprocess.run,
                          current: Mapping[str, SubmitterObs] | None = None) -> list[Adjustment]:
    """Make each recommended change unless it is already in place; returns one Adjustment
    per recommendation, in order (outcome "applied", "failed: ..." or "skipped: ...").

    ledger: `record_adjustment(adj)` and `active_adjustment(key, now)`; only an active
    adjustment with outcome "applied" counts as in place. now: the clock (applied_at,
    lease ends). pool: passed to condor_userprio as -pool. negotiator: an
    htcondor2.Negotiator for deletes (else the command deletes). run: subprocess.run or a
    stand-in. current: the latest records by name, to skip changes the pool already shows.

    A failed change is recorded with lease_expires = now (nothing took effect), so a
    ledger that judges activity by lease end alone does not take it for a change in
    place; the next run tries it again.
    """
    out: list[Adjustment] = []
    for rec in recs:
        argv = command_argv(rec, pool)
        use_bindings = rec.kind == "delete" and negotiator is not None
        method = "bindings" if use_bindings else "condor_userprio"
        command = (f"htcondor2.Negotiator.deleteUser({rec.name!r})" if use_bindings
                   else shlex.join(argv))
        why = _in_place(rec, ledger, now, current)
        if why is not None:
            out.append(Adjustment(rec.key, rec.kind, rec.name, rec.value, now, None, command,
                                  method, f"skipped: {why}"))
            continue
        if use_bindings:
            outcome = _call(lambda: negotiator.deleteUser(rec.name))
        else:
            outcome = _run(run, argv)
        lease_expires = (now + int(rec.lease) if rec.lease else None)
        if outcome != "applied":
            lease_expires = now
        adj = Adjustment(rec.key, rec.kind, rec.name, rec.value, now, lease_expires, command,
                         method, outcome)
        ledger.record_adjustment(adj)
        out.append(adj)
    return out


def _in_place(rec: Recommendation, ledger: Ledger, now: int,
              current: Mapping[str, SubmitterObs] | None) -> str | None:
    """Why `rec` needs nothing done (None: it does)."""
    active = ledger.active_adjustment(rec.key, now)
    if active is not None and active.outcome == "applied":
        until = ("does not expire" if active.lease_expires is None
                 else f"in effect until {active.lease_expires}")
        return f"applied at {active.applied_at}, {until}"
    if current is None:
        return None
    obs = current.get(rec.name)
    if rec.kind == "delete":
        return "the record is already absent" if obs is None else None
    if obs is None:
        return None
    v = key_value(rec.kind, rec.value)
    if (rec.kind == "factor" and obs.factor is not None and round(obs.factor, 2) == v
            and obs.factor_lease_expires > now):
        return f"factor {obs.factor:g} already leased until {obs.factor_lease_expires}"
    if rec.kind == "ceiling" and obs.ceiling == v:
        return f"ceiling {obs.ceiling} already set"
    if rec.kind == "floor" and obs.floor == v:
        return f"floor {obs.floor} already set"
    if rec.kind == "setprio" and obs.real_rup is not None and round(obs.real_rup, 2) == v:
        return f"real priority already {obs.real_rup:g}"
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
