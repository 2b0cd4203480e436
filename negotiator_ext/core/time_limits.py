"""The negotiator's time limits (NEGOTIATOR_MAX_TIME_PER_CYCLE, _PER_SUBMITTER,
_PER_SCHEDD, _PER_PIESPIN): where a real cycle of this pool would stop short.

Our cycle always runs whole: it is the recommendation. Beside it, a `TimeBudget` follows
the same turns with a clock that a cost model moves (seconds per request the negotiator
considers, calibrated from the pool's own negotiator ad), and applies the real checks
(matchmaker.cpp, negotiateWithGroup and negotiate):

* before a submitter's turn (after the no-idle-jobs check): the submitter is out of time
  when its TotalTimeInCycle has reached MAX_TIME_PER_SUBMITTER (it joins
  `submitters_out_of_time`), its schedd when that schedd's time in the cycle has reached
  MAX_TIME_PER_SCHEDD (`schedds_out_of_time`), and the cycle when MAX_TIME_PER_CYCLE is
  spent; any of them ends the submitter's turn, and its part in the cycle, at once;
* within a turn, before each request: the turn stops at its deadline, the turn's start
  plus the least of MAX_TIME_PER_PIESPIN and what is left of the three others;
* after a turn, its time is added to the submitter's and the schedd's.

A turn the real cycle would skip costs no time here, and a turn cut at its deadline
costs only up to it, so the clock keeps following the real cycle after a cut; the
matches our cycle makes beyond a cut are counted as ones the real cycle would not make.
After a cut the real cycle hands the slots those matches took to others, which this
does not follow: it says which submitters and groups the real cycle will not reach, not
what it will do instead. Plain data: no clock is read.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping


# A negotiation phase shorter than this (s) is timed by its CPU time too (see CostModel).
SHORT_PHASE = 20.0


@dataclass(frozen=True)
class CostModel:
    """Seconds per request the negotiator considers, and the seconds its cycle spends
    before it negotiates (phases 1-3), and where they came from."""
    per_request: float
    before_negotiation: float
    source: str

    @classmethod
    def from_negotiator_ad(cls, ad: Mapping[str, Any] | None,
                           per_request: float | None = None) -> "CostModel | None":
        """From the negotiator's ad of the cycle before (LastNegotiationCyclePhase4Duration0
        / LastNegotiationCycleNumJobsConsidered0; phases 1-3 for the time before), or
        `per_request` (NEGOTIATOR_EXT_SECONDS_PER_REQUEST) when given. None when neither
        gives a rate (no ad, or a cycle too short to time: its durations are whole
        seconds)."""
        ad = ad or {}

        def num(name: str) -> float | None:
            v = ad.get(name)
            return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None

        before = sum(num(f"LastNegotiationCyclePhase{i}Duration0") or 0.0 for i in (1, 2, 3))
        if per_request is not None:
            return cls(per_request, before, "NEGOTIATOR_EXT_SECONDS_PER_REQUEST")
        phase4 = num("LastNegotiationCyclePhase4Duration0")
        considered = num("LastNegotiationCycleNumJobsConsidered0")
        if not phase4 or not considered or phase4 <= 0 or considered <= 0:
            return None
        # the duration is in whole seconds (true value within a second of it); a short
        # phase is better told by its CPU time, which the true duration is at least
        cpu = num("LastNegotiationCyclePhase4CpuTime0")
        seconds, how = phase4, f"{phase4:g} s negotiating"
        if phase4 < SHORT_PHASE and cpu is not None and cpu > 0:
            seconds = max(cpu, phase4 - 1.0)
            how = (f"{phase4:g} s negotiating (whole seconds; {cpu:.3g} s of CPU), "
                   f"taken as {seconds:.3g} s")
        return cls(seconds / considered, before,
                   f"the negotiator's last cycle: {how}, {considered:g} requests considered")


@dataclass
class TimeBudget:
    """The real cycle's clock beside ours (see the module's docstring)."""
    cost: CostModel
    max_cycle: float
    max_submitter: float
    max_schedd: float
    max_spin: float
    now: float = 0.0
    submitter_time: dict = field(default_factory=dict)
    schedd_time: dict = field(default_factory=dict)
    submitters_out_of_time: list = field(default_factory=list)
    schedds_out_of_time: list = field(default_factory=list)
    cycle_out_of_time: bool = False
    reached: dict = field(default_factory=dict)     # submitter -> a turn of it ran
    groups_reached: dict = field(default_factory=dict)
    _turn: tuple | None = None                       # (submitter, schedd, start, deadline)
    _cut: bool = False

    @classmethod
    def for_config(cls, config, cost: CostModel) -> "TimeBudget":
        return cls(cost=cost, max_cycle=config.max_time_per_cycle,
                   max_submitter=config.max_time_per_submitter,
                   max_schedd=config.max_time_per_schedd,
                   max_spin=config.max_time_per_piespin, now=cost.before_negotiation)

    def begin_turn(self, submitter: str, schedd: str, group: str) -> bool:
        """A submitter's turn starts: False when the real cycle skips it (time limits)."""
        self.reached.setdefault(submitter, False)
        self.groups_reached.setdefault(group, False)
        spent = self.submitter_time.get(submitter, 0.0)
        spent_schedd = self.schedd_time.get(schedd, 0.0)
        left_cycle = self.max_cycle - self.now
        left_submitter = self.max_submitter - spent
        left_schedd = self.max_schedd - spent_schedd
        self._turn, self._cut = None, False
        if left_submitter <= 0:
            if submitter not in self.submitters_out_of_time:
                self.submitters_out_of_time.append(submitter)
            return False
        if left_schedd <= 0:
            if schedd not in self.schedds_out_of_time:
                self.schedds_out_of_time.append(schedd)
            return False
        if left_cycle <= 0:
            self.cycle_out_of_time = True
            return False
        deadline = self.now + min(self.max_spin, left_cycle, left_submitter, left_schedd)
        self._turn = (submitter, schedd, self.now, deadline)
        self.reached[submitter] = True
        self.groups_reached[group] = True
        return True

    def request(self) -> bool:
        """The negotiator is about to consider a request in the current turn: True
        when the real turn gets that far (its deadline not reached), and the clock moves
        by one request's cost."""
        if self._turn is None or self._cut:
            return False
        if self.now >= self._turn[3]:
            self._cut = True
            return False
        self.now += self.cost.per_request
        return True

    def end_turn(self) -> None:
        """The turn is over: its time goes to its submitter and its schedd."""
        if self._turn is None:
            return
        submitter, schedd, start, _ = self._turn
        spent = self.now - start
        self.submitter_time[submitter] = self.submitter_time.get(submitter, 0.0) + spent
        self.schedd_time[schedd] = self.schedd_time.get(schedd, 0.0) + spent
        self._turn = None
        if self._cut:
            # stopped at its deadline: the real turn returns to a later spin, where the
            # limit that stopped it turns the submitter away (our cycle, which did not
            # stop, may have no later spin to see it in)
            if self.submitter_time[submitter] >= self.max_submitter and \
                    submitter not in self.submitters_out_of_time:
                self.submitters_out_of_time.append(submitter)
            if self.schedd_time[schedd] >= self.max_schedd and \
                    schedd not in self.schedds_out_of_time:
                self.schedds_out_of_time.append(schedd)
            if self.now >= self.max_cycle:
                self.cycle_out_of_time = True

    def to_json(self, matches_within: int, matches_beyond: int) -> dict:
        """The prediction, with how many of our cycle's matches fall within the real
        cycle's limits and beyond (the matches' `late` flags)."""
        return {
            "seconds_per_request": self.cost.per_request,
            "calibrated_from": self.cost.source,
            "limits": {"NEGOTIATOR_MAX_TIME_PER_CYCLE": self.max_cycle,
                       "NEGOTIATOR_MAX_TIME_PER_SUBMITTER": self.max_submitter,
                       "NEGOTIATOR_MAX_TIME_PER_SCHEDD": self.max_schedd,
                       "NEGOTIATOR_MAX_TIME_PER_PIESPIN": self.max_spin},
            "predicted_duration": round(self.now, 3),
            "cut": bool(self.submitters_out_of_time or self.schedds_out_of_time
                        or self.cycle_out_of_time or matches_beyond),
            "submitters_out_of_time": list(self.submitters_out_of_time),
            "schedds_out_of_time": list(self.schedds_out_of_time),
            "cycle_out_of_time": self.cycle_out_of_time,
            "matches_within": matches_within,
            "matches_beyond": matches_beyond,
            "submitters_not_reached": sorted(s for s, r in self.reached.items() if not r),
            "groups_not_reached": sorted(g for g, r in self.groups_reached.items() if not r),
        }
