"""Two rules that take things out before the matchmaking: NEGOTIATOR_TRIM_SHUTDOWN_THRESHOLD
(slots about to shut down, core/slots.py `shutting_down`) and a submitter ad's
SkipMatchmaking (pool.py `submitter_ads`). Recorded against a real 25.14 negotiator in
tests/test_trim_and_skip_recorded.py."""

from __future__ import annotations

from collections import Counter

from negotiator_ext.core import classads
from negotiator_ext.core.slots import shutting_down
from negotiator_ext.cycle import run_cycle
from negotiator_ext.pool import load_pool
from poolmaker import Expr, job, make_pool, slot, submitters_for

NOW = 100000


def _ad(**attrs):
    ad = classads.ClassAd()
    for k, v in attrs.items():
        ad[k] = classads.parse_expr(v.text) if isinstance(v, Expr) else v
    return ad


def test_shutting_down_looks_threshold_seconds_ahead():
    soon = _ad(DaemonShutdown=Expr(f"CurrentTime > {NOW + 100}"))
    later = _ad(DaemonShutdown=Expr(f"CurrentTime > {NOW + 1000}"))
    assert shutting_down(soon, 300, NOW) and not shutting_down(later, 300, NOW)
    # the startd's own clock (MyCurrentTime) when the ad has one
    skewed = _ad(DaemonShutdown=Expr(f"CurrentTime > {NOW + 100}"), MyCurrentTime=NOW - 500)
    assert not shutting_down(skewed, 300, NOW)
    # a number counts as LookupBool reads it; undefined changes nothing
    assert shutting_down(_ad(DaemonShutdown=1), 300, NOW)
    assert not shutting_down(_ad(DaemonShutdown=Expr("Nope")), 300, NOW)
    # DaemonShutdownFast has the last word when it has a value
    assert not shutting_down(_ad(DaemonShutdown=True, DaemonShutdownFast=False), 300, NOW)
    assert shutting_down(_ad(DaemonShutdown=True, DaemonShutdownFast=Expr("Nope")), 300, NOW)
    assert shutting_down(_ad(DaemonShutdownFast=Expr(f"CurrentTime > {NOW}")), 1, NOW)
    assert not shutting_down(_ad(), 300, NOW)


def test_slots_about_to_shut_down_are_trimmed(tmp_path):
    slots = [slot(f"slot1@n{i}.test.local",
                  DaemonShutdown=Expr(f"CurrentTime > {NOW + (100 if i < 3 else 5000)}"))
             for i in range(6)]
    jobs = [job(1, p, "a") for p in range(6)]
    for threshold, matched in ((0, 6), (300, 3), (10000, 0)):
        d = make_pool(tmp_path / str(threshold), slots=slots, jobs=jobs, captured_at=NOW,
                      config=f"NEGOTIATOR_TRIM_SHUTDOWN_THRESHOLD = {threshold}")
        r = run_cycle(load_pool(d))
        assert len(r.matches) == matched
        assert r.slots == 6                      # still fetched, and in the pool's size
        if threshold == 300:
            assert {m.slot for m in r.matches} == {f"slot1@n{i}.test.local" for i in (3, 4, 5)}


def test_a_submitter_asking_to_be_skipped_is_left_out_before_the_pie(tmp_path):
    jobs = [job(1, p, "a") for p in range(10)] + [job(2, p, "b") for p in range(10)]
    subs = submitters_for(jobs)
    for s in subs:
        if s["Name"].startswith("b@"):
            s["SkipMatchmaking"] = True
    d = make_pool(tmp_path, slots=[slot(f"slot1@n{i}.test.local") for i in range(10)],
                  jobs=jobs, submitters=subs)
    r = run_cycle(load_pool(d))
    # a alone in the pie: its share is the whole pool, not half of it
    assert Counter(m.submitter.split("@")[0] for m in r.matches) == {"a": 10}
    assert [row["name"].split("@")[0] for row in r.submitters] == ["a"]


def test_jobs_in_slot_is_the_smaller_of_the_cpu_and_memory_fits():
    from negotiator_ext.core.negotiation import jobs_in_slot
    slot_ad = _ad(Cpus=8, Memory=1024)
    assert jobs_in_slot(_ad(RequestCpus=1, RequestMemory=512), slot_ad) == 2
    assert jobs_in_slot(_ad(RequestCpus=3, RequestMemory=64), slot_ad) == 2
    # evaluated against the slot; no figure or less than 1 counts as 1
    assert jobs_in_slot(_ad(RequestCpus=Expr("TARGET.Cpus / 2"), RequestMemory=0), slot_ad) == 2
    assert jobs_in_slot(_ad(), _ad()) == 1
    assert jobs_in_slot(_ad(RequestCpus=2), _ad(Cpus=1, Memory=100)) == 0
