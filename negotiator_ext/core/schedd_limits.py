"""The schedd's own limits on what it offers the negotiator (rule M7).

The negotiator negotiates with a submitter through a session with its schedd
(`negotiate`, reference 2.6); in each session the schedd builds the submitter's resource
request list (M2) and then offers at most so many jobs, counting each request's
ResourceRequestCount as it is sent, whether or not the negotiator matches it. When the
count is used up the schedd answers NO_MORE_JOBS, the negotiator's turn with that
submitter ends as if it had no more jobs (done for this spin and every later one, unless
its limit was reached), and the slots the submitter would have had stay for others.
HTCondor 25.14's schedd (schedd.cpp, `Scheduler::negotiate`, `shadowsSpawnLimit`;
schedd_negotiate.cpp, `ScheddNegotiate::nextJob`):

* **MAX_JOBS_RUNNING** (default min(DETECTED_MEMORY in MiB, 10000)): a session offers at
  most MAX_JOBS_RUNNING less the schedd's shadows (its running jobs and the matches it
  has been handed and not yet started). None at all when that is 0.
* **CURB_MATCHMAKING** (default: the schedd's RecentDaemonCoreDutyCycle above 0.98, or
  more uploads waiting than may run): while it is true the schedd offers nothing. The
  schedd publishes it in its ad (`CurbMatchmaking`), which is evaluated as captured.
* **The per-user match limit** (`SCHEDD_ENABLE_PER_USER_MATCH_LIMITS`, default true): a
  session offers at most MAX_CONCURRENT_UPLOADS_PER_USER (default
  MAX_CONCURRENT_UPLOADS / 5 = 20) less the submitter's jobs in the transfer queue
  (transferring their input or waiting to); none when that is 0 or less. A limit of 0
  (MAX_CONCURRENT_UPLOADS = 0, unlimited uploads) offers without this limit.

The session's count is fixed when the session starts. With NEGOTIATOR_PREFETCH_REQUESTS
(the default) the negotiator starts a session with every submitter of a spin before the
spin's first turn (prefetchResourceRequestLists, called at the start of every spin of
negotiateWithGroup), so a session's count is the schedd's as the spin began; without it,
as the submitter's turn begins.

What this does not model: the transfer queue as it changes during the cycle (the jobs
matched in this cycle are not yet transferring), CurbMatchmaking as it changes after the
capture, per-owner MaxJobsRunning set with condor_qusers, and the startup limits.

Plain data in, decisions out: the counts come from the job ads (`shadow_job`,
`in_transfer`), the knobs from the schedd's or the snapshot's configuration.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from ..errors import InputError
from .config import _typed

# The knobs one schedd's limits come from, as HTCondor names them.
KNOBS = ("SCHEDD_ENABLE_PER_USER_MATCH_LIMITS", "MAX_CONCURRENT_UPLOADS_PER_USER",
         "MAX_CONCURRENT_UPLOADS", "MAX_JOBS_RUNNING")

# HTCondor 25.14's defaults (param_info.in); MAX_JOBS_RUNNING's depends on the schedd's
# memory and is used only when neither the schedd nor the snapshot's config gives it.
DEFAULT_MAX_CONCURRENT_UPLOADS = 100
DEFAULT_MAX_JOBS_RUNNING = 10000

# Universes whose running jobs have no shadow (scheduler 7, local 12).
_NO_SHADOW_UNIVERSES = (7, 12)


@dataclass(frozen=True)
class ScheddLimits:
    """One schedd's knobs, as the schedd resolves them: `per_user_enabled`
    (SCHEDD_ENABLE_PER_USER_MATCH_LIMITS), `per_user` (MAX_CONCURRENT_UPLOADS_PER_USER,
    or MAX_CONCURRENT_UPLOADS / 5 when that is unset or -1), `max_jobs_running`."""
    per_user_enabled: bool = True
    per_user: int = DEFAULT_MAX_CONCURRENT_UPLOADS // 5
    max_jobs_running: int = DEFAULT_MAX_JOBS_RUNNING
    # the schedd's CurbMatchmaking (CURB_MATCHMAKING, evaluated in its own ad) was true:
    # it offers nothing
    curbed: bool = False

    @classmethod
    def from_knobs(cls, knobs: Mapping[str, Any], source: str, ad: str | None = None,
                   otherwise: "ScheddLimits | None" = None) -> "ScheddLimits":
        """The limits from knob values (any case; values as HTCondor's param() gives
        them, text or typed), read as the schedd reads them (param_boolean,
        param_integer). A knob without a value keeps `otherwise`'s (default: HTCondor's
        defaults). A value the knob cannot take is an InputError naming `source`, `ad`
        (the schedd) and the knob."""
        base = otherwise or cls()
        up = {str(k).upper(): v for k, v in knobs.items()}

        def typed(knob: str, kind: str) -> Any:
            v = up.get(knob)
            if v is None or (isinstance(v, str) and not v.strip()):
                return None
            try:
                return _typed(source, knob, v, kind, None)      # the config's own rule
            except InputError as exc:
                raise InputError(source, exc.message, ad=ad) from None

        enabled = typed("SCHEDD_ENABLE_PER_USER_MATCH_LIMITS", "bool")
        mjr = typed("MAX_JOBS_RUNNING", "int")
        per_user = _per_user(typed("MAX_CONCURRENT_UPLOADS_PER_USER", "int"),
                             typed("MAX_CONCURRENT_UPLOADS", "int"), base.per_user)
        return cls(per_user_enabled=base.per_user_enabled if enabled is None else enabled,
                   per_user=per_user,
                   max_jobs_running=base.max_jobs_running if mjr is None else int(mjr),
                   curbed=base.curbed)

    @property
    def per_user_limit(self) -> int | None:
        """The per-user limit in force (None: off, or MAX_CONCURRENT_UPLOADS_PER_USER
        is 0 or less, which the schedd takes as no limit)."""
        return self.per_user if self.per_user_enabled and self.per_user > 0 else None

    def offer_cap(self, shadows: int, in_transfer: int) -> int:
        """How many jobs one session offers (0: none, NO_MORE_JOBS at once).
        `shadows`: the schedd's running jobs plus the matches it was handed in this
        cycle; `in_transfer`: the submitter's jobs in the transfer queue."""
        return self.session(shadows, in_transfer)[0]

    def session(self, shadows: int, in_transfer: int) -> tuple[int, str]:
        """`offer_cap` and the knob that sets it: CURB_MATCHMAKING, MAX_JOBS_RUNNING
        (less the shadows) or MAX_CONCURRENT_UPLOADS_PER_USER (the per-user match limit,
        less the jobs in transfer), whichever is less."""
        if self.curbed:
            return 0, "CURB_MATCHMAKING"
        cap, knob = max(self.max_jobs_running - shadows, 0), "MAX_JOBS_RUNNING"
        limit = self.per_user_limit
        if limit is not None and limit - in_transfer < cap:
            cap, knob = limit - in_transfer, "MAX_CONCURRENT_UPLOADS_PER_USER"
        return max(cap, 0), knob


@dataclass
class Schedds:
    """What the cycle knows of the schedds: each one's limits (`by_name`, else
    `default`, the snapshot config's), the jobs holding a shadow at each (`running`),
    and each (submitter, schedd)'s jobs in the upload queue (`in_transfer`)."""
    default: ScheddLimits = field(default_factory=ScheddLimits)
    by_name: Mapping[str, ScheddLimits] = field(default_factory=dict)
    running: dict[str, int] = field(default_factory=dict)
    in_transfer: dict[tuple[str, str], int] = field(default_factory=dict)

    def limits(self, schedd: str) -> ScheddLimits:
        return self.by_name.get(schedd, self.default)


def from_config(cfg) -> ScheddLimits:
    """The limits the snapshot's config gives (NegotiatorConfig: HTCondor's defaults
    filled in by the bindings)."""
    return ScheddLimits(per_user_enabled=cfg.schedd_per_user_match_limits,
                        per_user=_per_user(cfg.max_concurrent_uploads_per_user,
                                           cfg.max_concurrent_uploads, None),
                        max_jobs_running=cfg.max_jobs_running)


def _per_user(per_user: int | None, uploads: int | None, otherwise: int | None) -> int:
    """MAX_CONCURRENT_UPLOADS_PER_USER as the schedd resolves it: its own value, else
    (unset or -1) MAX_CONCURRENT_UPLOADS / 5 (C integer division, default uploads 100),
    else `otherwise` when neither is given."""
    if per_user is not None and per_user != -1:
        return int(per_user)
    if uploads is None and per_user is None and otherwise is not None:
        return otherwise
    return int((DEFAULT_MAX_CONCURRENT_UPLOADS if uploads is None else uploads) / 5)


def shadow_job(status: int | None, universe: int | None) -> bool:
    """A job that holds one of the schedd's shadows: running, not scheduler/local
    universe."""
    return status == 2 and universe not in _NO_SHADOW_UNIVERSES


def in_transfer(status: int | None, transferring_input: Any, transfer_queued: Any,
                transferring_output: Any) -> bool:
    """A running job in the schedd's upload queue: transferring its input, or queued to
    (TransferQueued while it is not transferring its output)."""
    if status != 2:
        return False
    if transferring_input is True:
        return True
    return transfer_queued is True and transferring_output is not True
