"""A capture's collector, asked through a gate (`GatedCollector`), so that a collector
that does not answer costs a pass one `--timeout`, not one per query.

The bindings wait for the collector inside C++ code holding the interpreter lock, each
call up to QUERY_TIMEOUT (the capture sets it to its `timeout`, adapters/live.py); no
thread of this process can end such a wait. A capture asks the collector several things
one after the other (the negotiator and schedd ads, where the negotiator and the
schedds are, the slot ads, the submitter and accounting ads): a collector frozen
(SIGSTOP, swapped out, a hung host that still takes connections) made each of them wait
the whole timeout, five or more in a row. Through the gate, once one call has failed
after waiting the timeout, every later call of the same capture fails at once with
`CollectorSilent` ("the collector ... did not answer within N s (--timeout)"), which the
capture reports as it reports the failure of that query: the slot query's failure fails
the pass. A call that fails quickly (a collector that is down refuses the connection)
closes nothing: the next one is made (a collector coming up between two calls answers
the second).

A loop's stop signal does not end a call in flight (nothing in this process runs until
the bindings return): a loop caps each call's wait at its stop timeout
(adapters/live.py `collector_wait`), and a pass stopped meanwhile goes on, its collector
calls failing at once after the one that timed out.
"""

from __future__ import annotations

import time
from typing import Any, Callable

# a call that failed after this share of the timeout waited it out (the bindings' own
# timer ends it a little before or after QUERY_TIMEOUT)
_TIMED_OUT_SHARE = 0.8


class CollectorSilent(Exception):
    """A call not made: the collector did not answer an earlier call of this capture
    within the timeout."""


class Heard:
    """What a loop last heard from its collector through its captures' gates: whether
    the last call made to it was answered (`silent` true: it waited out its timeout, and
    nothing answered since). The loop then neither sends nor withdraws its ad, which
    would only wait again (shadow_publish.publish, unpublish)."""

    def __init__(self):
        self.silent = False


class GatedCollector:
    """`collector` (an htcondor2.Collector) whose calls stop once one has timed out
    (see the module docstring). `where` names the collector in messages."""

    _CALLS = ("query", "locate", "locateAll", "directQuery")

    def __init__(self, collector: Any, timeout: float | None, where: str,
                 bound: str = "--timeout", heard: Heard | None = None,
                 clock: Callable[[], float] = time.monotonic):
        self._collector = collector
        self._timeout = float(timeout) if timeout and timeout > 0 else 0.0
        self._where = where
        self._bound = bound                     # what set the timeout, for messages
        self._clock = clock
        self.silent: str | None = None          # why calls are no longer made
        self._heard = heard

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._collector, name)
        if name in self._CALLS and callable(value):
            return lambda *args, **kw: self._call(value, args, kw)
        return value

    def _call(self, fn: Callable[..., Any], args: tuple, kw: dict) -> Any:
        if self.silent is not None:
            raise CollectorSilent(self.silent)
        asked = self._clock()
        try:
            answer = fn(*args, **kw)
        except Exception:
            took = self._clock() - asked
            if self._timeout and took >= _TIMED_OUT_SHARE * self._timeout:
                self.silent = (f"the collector {self._where} did not answer within "
                               f"{self._timeout:g} s ({self._bound}); not asked again in "
                               "this pass")
                if self._heard is not None:
                    self._heard.silent = True
            raise
        if self._heard is not None:
            self._heard.silent = False
        return answer
