"""A shadow loop over many passes beside the real pool keeps its memory to what the pool
holds (bench/soak_shadow.py measures it over 2,000 passes): its worker process is
started again between passes after its share of requests (the bindings keep a copy of
every projected name, adapters/worker.py), and the loop locates its daemons once while
their ads show the same locations (adapters/locations.py). Here, in seconds: a loop
whose worker answers two requests each, its passes all complete, the schedds still
queried beside the slots, and the kept locations no larger after six passes than after
one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytestmark = pytest.mark.live


def test_a_loop_renews_its_worker_and_locates_its_daemons_once(clean_pool, tmp_path,
                                                              monkeypatch):
    from livepool import loop_passes
    from negotiator_ext.adapters.worker import Worker
    from negotiator_ext.shadow import ShadowLoop
    from negotiator_ext.shadow_state import ShadowSettings

    pool = clean_pool
    monkeypatch.setenv("CONDOR_CONFIG", pool.env["CONDOR_CONFIG"])
    pool.submit(count=3, group="group_a", user="alice", extra=["requirements = false"])
    pool.wait_for(lambda: len(pool.jobs("ClusterId")) == 3, 30, "the jobs queued")
    settings = ShadowSettings.from_knobs({}, pool=pool.collector, interval=1,
                                         state_dir=str(tmp_path / "state"), advertise=False,
                                         metrics_file="")
    loop = ShadowLoop(settings)
    loop.worker = Worker(preload=("negotiator_ext.adapters.live",), requests_per_process=2)
    sizes = []

    def between(recs):
        sizes.append((len(loop.kept_reads.locations), loop.kept_reads.locations.asked))
    recs = loop_passes(loop, 6, 90, between)
    assert len(recs) == 6, "the loop stopped early"
    assert [r.status for r in recs] == ["complete"] * 6, [r.reason for r in recs]
    # two requests a worker: started again after passes 2 and 4 (the first pass has no
    # projection yet and queries after the slots, in the worker all the same)
    assert loop.worker.started >= 3
    metas = [json.loads((Path(r.snapshot_dir) / "meta.json").read_text()) for r in recs]
    assert [(m["missing_schedds"], m["counts"]["jobs"]) for m in metas] == [([], 3)] * 6
    queried = [m["schedds_queried"] for m in metas]
    assert queried[1:] == ["beside the slots"] * 5, queried
    # the negotiator located, the negotiators and the schedds listed: once
    assert sizes == [(3, 3)] * 6, sizes
