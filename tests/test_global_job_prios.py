"""USE_GLOBAL_JOB_PRIOS (core/negotiation.py `consolidate_job_prios`, cycle.py
`job_prio_array`): one submitter ad per value of its JobPrioArray, sorted with the job
priority after the EUP, consecutive ads of one submitter folded into a range, and each
negotiation offered only the jobs of its range. Recorded against a real 25.14
negotiator in tests/test_global_job_prios_recorded.py."""

from __future__ import annotations

from dataclasses import replace

from negotiator_ext.core.job_queue import JobQueue
from negotiator_ext.core.negotiation import Submitter, consolidate_job_prios
from negotiator_ext.cycle import job_prio_array, run_cycle
from negotiator_ext.pool import load_pool
from poolmaker import job, make_pool, slot, submitters_for


def test_job_prio_array_is_read_as_the_negotiator_reads_it():
    assert job_prio_array("10,5, 0") == [10, 5, 0]
    assert job_prio_array("7abc,x") == [7, 0]                 # atoi
    assert job_prio_array(None) == [-2 ** 31] == job_prio_array(3)


def _sub(name, prio, schedd="s", array=True):
    return Submitter(name=name, schedd=schedd, idle_jobs=1, running_jobs=0,
                     last_heard_from=0, group="<none>", queue=JobQueue([]), job_prio=prio,
                     prio_array=array)


def test_consecutive_ads_of_one_submitter_fold_into_a_range():
    subs = [_sub("b", 10), _sub("b", 5), _sub("a", 5), _sub("b", 0), _sub("c", 1, array=False),
            _sub("b", -3)]
    out = consolidate_job_prios(subs)
    # an ad without a JobPrioArray keeps no range and does not break a run: b at -3
    # folds into the b at 0 before c
    assert [(s.name, s.prio_range) for s in out] == [
        ("b", (5, 10)), ("a", (5, 5)), ("b", (-3, 0)), ("c", None)]


def test_the_high_priority_jobs_of_equal_submitters_go_first(tmp_path):
    """Equal EUPs: a's jobs have priority 0, b's 10. Each submitter ad carries the
    JobPrioArray its schedd publishes; with the knob the negotiator sorts b's first and
    offers each ad only its range."""
    jobs = ([job(1, p, "a", JobPrio=0) for p in range(6)]
            + [job(2, p, "b", JobPrio=10) for p in range(3)]
            + [job(3, p, "b", JobPrio=0) for p in range(3)])
    subs = submitters_for(jobs)
    for s in subs:
        s["JobPrioArray"] = "10,0" if s["Name"].startswith("b@") else "0"
    d = make_pool(tmp_path, slots=[slot(f"slot1@n{i}.test.local") for i in range(6)],
                  jobs=jobs, submitters=subs, config="USE_GLOBAL_JOB_PRIOS = True")
    pool = load_pool(d)
    r = run_cycle(pool)
    # b@10 first: its 3 priority-10 jobs (limit 3 each); then a at 0, its limit spent;
    # b's priority-0 jobs come too late for a slot
    got = [(m.submitter.split("@")[0], m.assigned_job) for m in r.matches]
    assert got == [("b", "2.0"), ("b", "2.1"), ("b", "2.2"),
                   ("a", "1.0"), ("a", "1.1"), ("a", "1.2")]
    # without the knob the tie order puts a first
    off = replace(pool, config=replace(pool.config, use_global_job_prios=False))
    assert [m.submitter.split("@")[0] for m in run_cycle(off).matches][:3] == ["a"] * 3
