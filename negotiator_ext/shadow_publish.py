"""What a shadow loop says after a pass: its metrics file and the ShadowNegotiator ad it
advertises to the collector (withdrawn at its stop), each bounded in time, and a
problem logged once until it ends."""

from __future__ import annotations

import logging
import time
from typing import Callable, Mapping, Sequence

from .core.records import PassRecord
from .shadow_state import STOP_TIMEOUT, ShadowSettings


def publish(rec: PassRecord, settings: ShadowSettings, *, htcondor=None,
            server=None, standing=None, others: Mapping | None = None,
            worker=None, stop: Callable[[], bool] | None = None,
            heard=None) -> dict[str, str]:
    """Report a recorded pass: the Prometheus textfile (when configured), the metrics
    HTTP endpoint (`server`, the daemon's), and the Generic ad `MyType =
    "ShadowNegotiator"` (when NEGOTIATOR_EXT_ADVERTISE). `standing` (records.Standing,
    the loop's after the pass): what the metrics keep from earlier passes. Returns what
    failed, as {"metrics_file" | "advertise": one-line message}: the caller logs it (the pass is
    already recorded, so a failure here changes nothing else). `others`: in a pool of
    several negotiators, the newest pass of each (ledger stream -> (pass, standing),
    `ShadowLoop.latest`), whose metrics the textfile keeps beside this one's.
    `worker` (a loop's, adapters/worker.py): the ad is sent by it, waited for at most
    NEGOTIATOR_EXT_STOP_TIMEOUT seconds, and not at all once `stop()` is true
    (`advertise.send_bounded`), nor while `heard` (collector_gate.Heard, the loop's) says
    the collector did not answer the last call made to it."""
    from .adapters import metrics
    problems: dict[str, str] = {}
    if settings.metrics_file is not None:
        try:
            metrics.write_textfile(settings.metrics_file, rec, standing, others={
                k: v for k, v in (others or {}).items() if k != rec.pool})
        except OSError as exc:
            problems["metrics_file"] = (f"metrics file {settings.metrics_file} not written: "
                                        f"{exc.strerror or exc}")
    if server is not None:
        server.update(rec, standing)
    if settings.advertise:
        from .adapters.advertise import ad_lifetime, advertise, shadow_ad
        if htcondor is None:
            import htcondor2 as htcondor
        ad = shadow_ad(rec, name=ad_name(settings, rec.pool), now=int(rec.finished_at),
                       lifetime=ad_lifetime(settings.interval))
        where = settings.pool or "the local collector"
        if heard is not None and heard.silent:
            err = (f"advertising the ShadowNegotiator ad to {where} not tried: the collector "
                   "did not answer the pass's last call")
        else:
            err = _bounded(worker, htcondor, settings, "advertise_in_worker",
                           (settings.pool, str(ad)),
                           f"advertising the ShadowNegotiator ad to {where}", stop)
            if err is _IN_PROCESS:
                err = advertise(htcondor, settings.pool, ad)
        if err:
            problems["advertise"] = f"ShadowNegotiator ad not advertised: {err}"
    return problems


class LoggedOnce:
    """A problem that recurs pass after pass, the same each time (the collector refusing
    the ShadowNegotiator ad): logged at warning when it starts or changes, at debug while
    it lasts, and its end once at info (`ended`). Call it after each pass with the
    problem's line, or None when there was none."""

    def __init__(self, log: logging.Logger, ended: str):
        self.log = log
        self.ended = ended
        self.current: str | None = None

    def __call__(self, problem: str | None) -> None:
        if problem is None:
            if self.current is not None:
                self.log.info("%s", self.ended)
        elif problem != self.current:
            self.log.warning("%s", problem)
        else:
            self.log.debug("%s", problem)
        self.current = problem


ADVERTISING_WORKS = "advertising to the collector works again"


def standing_of(loop, stream: str):
    """What the ledger held after `loop`'s newest pass of ledger stream `stream`, for
    `publish` (records.Standing): that negotiator's in a pool of several
    (`ShadowLoop.latest`), else the loop's. (A loop without them, None.)"""
    latest = getattr(loop, "latest", None) or {}
    got = latest.get(stream)
    return got[1] if got is not None else getattr(loop, "standing", None)


def ad_name(settings: ShadowSettings, stream: str) -> str:
    """The Name of the ShadowNegotiator ad of a ledger stream's passes: the loop's name,
    with the negotiator's in a pool of several ("<name> (<negotiator>)"), one ad each."""
    from .core.shards import split_stream
    negotiator = split_stream(stream)[1]
    return settings.name if negotiator is None else f"{settings.name} ({negotiator})"


def unpublish(settings: ShadowSettings, *, htcondor=None,
              streams: Sequence[str] = (), worker=None,
              deadline: float | None = None, heard=None) -> str | None:
    """On a clean stop: withdraw the ShadowNegotiator ads `publish` advertised (the
    loop's, and one for each negotiator's stream of `streams`; a killed loop's ads live
    out their ClassAdLifetime). Returns why it failed, for the caller to log; None when
    done or when nothing was advertised. `worker` (a loop's): the withdrawal is sent by
    it, and waited for at most WITHDRAW_WAIT seconds, and not past `deadline` (a
    time.monotonic(): when the stop is due), though at least WITHDRAW_LEAST (a stop is
    not held up by a collector that does not answer: the ad then lives out its
    lifetime); not tried while `heard` says the collector did not answer the last call
    made to it."""
    if not settings.advertise:
        return None
    if heard is not None and heard.silent:
        where = settings.pool or "the local collector"
        return (f"the ShadowNegotiator ad not withdrawn from {where}: the collector did not "
                "answer the last pass; the ad lapses after its ClassAdLifetime")
    from .adapters.advertise import withdraw
    if htcondor is None:
        import htcondor2 as htcondor
    names = dict.fromkeys([settings.name, *(ad_name(settings, s) for s in streams)])
    errors = []
    for n in names:
        where = f"withdrawing the ShadowNegotiator ad from {settings.pool or 'the local collector'}"
        wait = min(WITHDRAW_WAIT, getattr(settings, "stop_timeout", STOP_TIMEOUT))
        if deadline is not None:
            wait = max(WITHDRAW_LEAST, min(wait, deadline - time.monotonic()))
        err = _bounded(worker, htcondor, settings, "withdraw_in_worker", (settings.pool, n),
                       where, None, round(wait, 1),
                       "a stop waits no longer: the ad lapses after its ClassAdLifetime")
        if err is _IN_PROCESS:
            err = withdraw(htcondor, settings.pool, n)
        if err:
            errors.append(err)
            if "did not answer" in err:
                break                   # nor will it for the next
    return errors[0] if errors else None


# how long a stop waits for the collector to take the withdrawal of the loop's ad (s)
WITHDRAW_WAIT = 3.0


WITHDRAW_LEAST = 0.5        # ... and at least this, however late the stop is


_IN_PROCESS = object()      # _bounded: no worker to send it; send it from this process


def _bounded(worker, htcondor, settings: ShadowSettings, target: str, args: tuple,
             what: str, stop, limit: float | None = None,
             bound: str = "NEGOTIATOR_EXT_STOP_TIMEOUT"):
    """`advertise.send_bounded` through `worker` when there is one and the bindings are
    the real ones (a fake's calls cannot be made in another process); else, or when the
    worker is gone, _IN_PROCESS."""
    from .adapters.advertise import NoWorker, send_bounded
    from .adapters.answers import _real_bindings
    if worker is None or not _real_bindings(htcondor):
        return _IN_PROCESS
    try:
        return send_bounded(worker, target, args, what=what, stop=stop, bound=bound,
                            limit=(getattr(settings, "stop_timeout", STOP_TIMEOUT)
                                   if limit is None else limit))
    except NoWorker:
        return _IN_PROCESS
