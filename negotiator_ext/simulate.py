"""The what-if simulator (`negotiator-ext simulate`): the names it has always offered,
now at home in `negotiator_ext.sim` (the engine, the schedds' and startds' side, the
ads, the workload sources)."""

from .sim.ads import _Ad, _facts, _new_slot_ad, _slot_texts  # noqa: F401
from .sim.engine import (EngineOptions, SimReport, Simulation,  # noqa: F401
                         config_with_knobs, progress_bar)
from .sim.replay import replay_what_if  # noqa: F401
from .sim.schedd_startd import JobClass, SimJob, SimPool, SimSlot  # noqa: F401
