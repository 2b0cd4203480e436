"""The shadow negotiator's ad in the collector: one Generic ad per shadow loop, so
`condor_status -any -constraint 'MyType == "ShadowNegotiator"' -long` shows how the
newest pass went next to the real negotiator's own ad.

The ad is sent with UPDATE_AD_GENERIC, a DAEMON-level command at the collector (the
ADVERTISE_* levels do not cover it): the host running the loop needs DAEMON authorization
there. The collector keeps Generic ads in one table per MyType, keyed by Name, so each
pass replaces the previous one; it stamps LastHeardFrom itself and drops the ad
ClassAdLifetime seconds (default CLASSAD_LIFETIME, 900) after the last update. A loop
that stops cleanly withdraws its ad (INVALIDATE_ADS_GENERIC); a killed one's ad lives out
its lifetime.

Finding it: `condor_status -any -constraint 'MyType == "ShadowNegotiator"'`, or the
Generic-ads query of its own table, `condor_status -subsystem ShadowNegotiator`. From
Python, `Collector.query(AdTypes.Any, 'MyType == "ShadowNegotiator"')`: htcondor2's
`AdTypes.Generic` asks only for the table of MyType "Generic".

Attributes (a figure the pass does not know is left out, never advertised as 0):

  MyType = "ShadowNegotiator", Name, LastHeardFrom (the sender's clock), NegotiatorExtVersion,
  PassUuid, PassTime (the pass's start, epoch), PassStatus, PassReason, SnapshotTime,
  RealCycleTime (newest real cycle seen), ShadowCycleDuration, CaptureDuration, and from
  the comparison of the previous pass's cycle with the real cycle that followed it:
  RealCycleDuration, RealMatches, ShadowMatches, AgreedMatches, RealInShadow,
  ShadowInReal, CountAgreement, ComparisonSource; MaxPriorityDrift (largest |drift|).
"""

from __future__ import annotations

import time
from typing import Any

import classad2

from .. import __version__
from ..core.records import PassRecord
from .metrics import max_abs_drift

MY_TYPE = "ShadowNegotiator"
COMMAND = "UPDATE_AD_GENERIC"
INVALIDATE = "INVALIDATE_ADS_GENERIC"


def ad_lifetime(interval: float) -> int:
    """How long the collector should keep the ad without an update: it drops an ad after
    CLASSAD_LIFETIME (900 s by default) or its ClassAdLifetime, and the ad must outlive
    the interval between passes."""
    return int(max(900.0, 3 * float(interval or 0)))


def shadow_ad(rec: PassRecord, *, name: str, now: int,
              lifetime: int | None = None) -> classad2.ClassAd:
    """The Generic ad describing pass `rec` of the shadow loop called `name`, sent at
    `now` (epoch). `lifetime` sets ClassAdLifetime (seconds the collector keeps the ad
    without an update; None: the collector's CLASSAD_LIFETIME)."""
    c = rec.comparison
    values: dict[str, Any] = {
        "MyType": MY_TYPE,
        "Name": name,
        "LastHeardFrom": int(now),
        "NegotiatorExtVersion": __version__,
        "PassUuid": rec.uuid,
        "PassTime": int(rec.started_at),
        "PassStatus": rec.status,
        "PassReason": rec.reason,
        "SnapshotTime": rec.snapshot_time,
        "RealCycleTime": rec.real_cycle_time,
        "ShadowCycleDuration": rec.shadow_duration,
        "CaptureDuration": rec.capture_duration,
        "MaxPriorityDrift": max_abs_drift(rec),
        "ClassAdLifetime": lifetime,
    }
    if c is not None:
        values.update({
            "RealCycleDuration": c.real_duration,
            "RealMatches": c.real_matches,
            "ShadowMatches": c.shadow_matches,
            "AgreedMatches": c.agreed,
            "RealInShadow": c.real_in_shadow,
            "ShadowInReal": c.shadow_in_real,
            "EquivalentAgreement": c.equivalent_agreement,
            "AgreedEquivalent": c.agreed_equivalent,
            "CountAgreement": c.count_agreement,
            "UnexplainedCountAgreement": c.unexplained_agreement,
            "ComparisonSource": c.source,
        })
    ad = classad2.ClassAd()
    for attr, value in values.items():
        if value is None:
            continue
        if isinstance(value, bool):
            ad[attr] = value
        elif isinstance(value, int):
            ad[attr] = int(value)
        elif isinstance(value, float):
            ad[attr] = float(value)
        else:
            ad[attr] = str(value)
    return ad


def advertise(htcondor, pool: str | None, ad: classad2.ClassAd) -> str | None:
    """Send `ad` to the collector of `pool` (None: this host's COLLECTOR_HOST) with
    UPDATE_AD_GENERIC through the bindings module `htcondor`.

    Returns None on success, else one line saying why not: a refused or unreachable
    collector is something to log, never a reason to stop the loop, so nothing raises.
    """
    where = pool or "the local collector"
    started = time.monotonic()
    try:
        htcondor.Collector(pool).advertise([ad], COMMAND)
    except Exception as exc:   # HTCondorException, bad address, ... : reported, not raised
        return (f"advertising the {MY_TYPE} ad to {where} failed: {_detail(exc)} "
                f"({_why(htcondor, pool, COMMAND, time.monotonic() - started)})")
    return None


def withdraw(htcondor, pool: str | None, name: str) -> str | None:
    """Remove the ad of the shadow loop called `name` from the collector of `pool`
    (INVALIDATE_ADS_GENERIC, the same authorization as advertising it). Returns None on
    success, else one line saying why not; never raises."""
    query = classad2.ClassAd()
    query["MyType"] = "Query"
    query["TargetType"] = MY_TYPE
    query["Name"] = name
    query["Requirements"] = classad2.ExprTree(f"TARGET.Name == {classad2.quote(name)}")
    started = time.monotonic()
    try:
        htcondor.Collector(pool).advertise([query], INVALIDATE)
    except Exception as exc:
        return (f"withdrawing the {MY_TYPE} ad from {pool or 'the local collector'} failed: "
                f"{_detail(exc)} ({_why(htcondor, pool, INVALIDATE, time.monotonic() - started)})")
    return None


def _why(htcondor, pool: str | None, command: str, took: float) -> str:
    """Why the collector refused `command` (a DAEMON-level one): the bindings say only
    "Failed to advertise to collector.", so the collector is asked whether it refuses
    this client DAEMON (adapters/authz.py); when that cannot be told, the level the
    command needs."""
    from .authz import DAEMON, refusal
    why = refusal(htcondor, pool, DAEMON, "the collector", took=took)
    if why is None:             # granted, or not to be told
        return f"{command} needs DAEMON authorization at the collector"
    if "refuses" in why:
        return f"{why}, which {command} needs"
    return why


def _detail(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


# ---- sent by a loop's worker process, within a time limit --------------------------------
#
# The bindings wait up to 20 s for the collector (a fixed timeout of theirs) to take an
# ad, holding the interpreter: a loop beside a collector that takes connections but does
# not answer (frozen, a hung host) would wait that long after every pass, and its stop
# twice as long. A loop sends the ad through its worker (adapters/worker.py), and waits
# at most `limit` seconds (NEGOTIATOR_EXT_STOP_TIMEOUT) for it, less when it is stopping.

def advertise_in_worker(pool: str | None, ad_text: str) -> str | None:
    """`advertise` in the worker process, the ad as its text."""
    import htcondor2
    return advertise(htcondor2, pool, classad2.ClassAd(ad_text))


def withdraw_in_worker(pool: str | None, name: str) -> str | None:
    """`withdraw` in the worker process."""
    import htcondor2
    return withdraw(htcondor2, pool, name)


class NoWorker(Exception):
    """The worker could not be started or gave no answer: send from this process."""


def send_bounded(worker, target: str, args: tuple, *, limit: float, what: str,
                 stop=None, bound: str = "NEGOTIATOR_EXT_STOP_TIMEOUT",
                 poll: float = 0.1) -> str | None:
    """`target` (advertise_in_worker or withdraw_in_worker) run by `worker` with `args`:
    its answer (None, or why it failed), or, when it has not answered within `limit`
    seconds or `stop()` turns true meanwhile, the worker ended and one line saying so
    (`what`: "advertising the ShadowNegotiator ad to <collector>"). NoWorker when the
    worker is gone."""
    from .worker import WorkerGone
    pending = worker.submit(f"{__name__}:{target}", *args)
    deadline = time.monotonic() + max(0.0, limit)
    while not pending.ready(max(0.0, min(poll, deadline - time.monotonic()))):
        if stop is not None and stop():
            pending.cancel()
            return f"{what} abandoned: negotiator-ext is stopping"
        if time.monotonic() >= deadline:
            pending.cancel()
            return f"{what} failed: the collector did not answer within {limit:g} s ({bound})"
    try:
        return pending.result()
    except WorkerGone as exc:
        raise NoWorker(str(exc)) from None
