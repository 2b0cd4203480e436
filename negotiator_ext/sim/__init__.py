"""The simulation engine and its workload sources.

* `engine`: the loop (the real negotiation cycle, cycle after cycle, over simulated time).
* `schedd_startd`: what the schedds and startds do with matches (claims, claim reuse,
  partitionable slots split, jobs ending, removed, preempted).
* `ads`: the slot and job ads the simulated daemons advertise.
* workload sources: `scenario_source` (a scenario's synthetic arrivals), `history` (the
  schedds' history), `snapshot_queue` (a snapshot's queue and claims at the start).
* `forecast`: the closed-loop replay of a pool's own workload (`negotiator-ext forecast`).
* `replay`: a scenario's open-loop re-run of recorded snapshots.
"""
