"""A slot's Rank and claim reuse on real daemons, the rules the forecast's schedds and
startds follow (sim/schedd_startd.py; test_schedd_startd.py checks the model to the same
cases):

* the schedd starts another of the submitter's jobs on a claim only if the slot ranks it
  no lower than the job the claim was made for (qmgmt.cpp: FindRunnableJob); else it
  gives the claim back and the job waits for the negotiator;
* the startd works out CurrentRank again for each job it starts on a claim
  (command.cpp: activate_claim), a reused claim included.

These run only where an HTCondor install is found (see tests/livepool.py); elsewhere
they skip with one line saying how to enable them.
"""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.live

POLICY = """\
CLAIM_WORKLIFE = 1200
RANK = TARGET.RequestMemory
"""
ON_SLOT1 = ["requirements = SlotID == 1 && SlotTypeID == 1"]     # one static slot


def slot1(pool) -> dict[str, str]:
    out = pool.tool("condor_status", "-constraint", "SlotID == 1 && SlotTypeID == 1",
                    "-af:,", "JobId", "PublicClaimId", "CurrentRank", check=False).stdout
    line = out.strip().splitlines()[0] if out.strip() else ",,"
    job, claim, rank = (v.strip() for v in line.split(",", 2))
    return {"job": job, "claim": claim, "rank": rank}


def running(pool, cluster: int) -> bool:
    return [r[0] for r in pool.jobs("JobStatus", constraint=f"ClusterId == {cluster}")] == ["2"]


@pytest.mark.parametrize("first_memory, next_memory, reused", [(64, 128, True),
                                                                (128, 64, False)])
def test_a_claim_is_reused_for_a_job_the_slot_ranks_no_lower(clean_pool, first_memory,
                                                              next_memory, reused):
    pool = clean_pool
    pool.reconfig("claim-rank", POLICY)
    first = pool.submit(count=1, extra=ON_SLOT1 + [f"request_memory = {first_memory}"])
    nxt = pool.submit(count=1, extra=ON_SLOT1 + [f"request_memory = {next_memory}"])
    pool.wait_for(lambda: slot1(pool)["job"] == f"{first}.0", 90,
                  "the first job on slot1 in the collector")
    before = slot1(pool)
    assert float(before["rank"]) == first_memory      # the slot's Rank for its job
    pool.finish(first)
    pool.wait_for(lambda: running(pool, nxt) and slot1(pool)["job"] == f"{nxt}.0", 90,
                  "the next job on slot1 in the collector")
    after = slot1(pool)
    # the same claim (reused by the schedd) or a new one (matched by the negotiator)
    assert (after["claim"] == before["claim"]) is reused, (before, after)
    assert float(after["rank"]) == next_memory        # worked out again for the new job
