"""Concurrency limits in whole cycles (reference 4.3, 4.11, M7-M10, M12)."""

from __future__ import annotations

from negotiator_ext.cycle import run_cycle
from negotiator_ext.pool import load_pool
from poolmaker import DOMAIN, Expr, job, make_pool, slot


def cycle(tmp_path, **kw):
    return run_cycle(load_pool(make_pool(tmp_path / "pool", **kw)))


def free_slots(n, **attrs):
    return [slot(f"slot1@n{i:02d}.test.local", **attrs) for i in range(n)]


def limits(result) -> dict:
    return {x["name"]: (x["count_before"], x["count"], x["max"])
            for x in result.to_json()["concurrency_limits"]}


def test_a_limit_stops_matches_at_its_maximum(tmp_path):
    jobs = [job(1, p, "a", ConcurrencyLimits="FooDB") for p in range(5)]
    r = cycle(tmp_path, slots=free_slots(10), jobs=jobs, config="FOODB_LIMIT = 2")
    assert [m.assigned_job for m in r.matches] == ["1.0", "1.1"]
    assert [(x.job, x.reason) for x in r.rejections] == [("1.0", "concurrency limit foodb reached")]
    assert limits(r) == {"foodb": (0.0, 2.0, 2.0)}


def test_claimed_slots_hold_their_limits_from_the_start(tmp_path):
    """LoadLimits (M9): a running job's limits count before any new match."""
    busy = [slot("slot1@busy.test.local", State="Claimed", Activity="Busy",
                 RemoteUser=f"b@{DOMAIN}", RemoteOwner=f"b@{DOMAIN}",
                 ConcurrencyLimits="foodb:2")]
    jobs = [job(1, p, "a", ConcurrencyLimits="foodb") for p in range(5)]
    r = cycle(tmp_path, slots=free_slots(10) + busy, jobs=jobs, config="FOODB_LIMIT = 3")
    assert len(r.matches) == 1
    assert limits(r) == {"foodb": (2.0, 3.0, 3.0)}


def test_amounts_fractions_and_invalid_names(tmp_path):
    """M7: `name:amount` (fractions allowed; <= 0 counts 1); a name with two dots is
    ignored, not rejected."""
    jobs = [job(1, p, "a", ConcurrencyLimits="lic:1.5, bad.na.me, other:0") for p in range(5)]
    r = cycle(tmp_path, slots=free_slots(10), jobs=jobs, config="LIC_LIMIT = 4\nOTHER_LIMIT = 10")
    assert len(r.matches) == 2                   # 1.5 + 1.5 = 3 <= 4; a third would be 4.5
    assert limits(r) == {"lic": (0.0, 3.0, 4.0), "other": (0.0, 2.0, 10.0)}


def test_sublimit_default_applies_to_each_name_under_the_prefix(tmp_path):
    """M8: CONCURRENCY_LIMIT_DEFAULT_<prefix> is the maximum of every <prefix>.<name>;
    <name>_LIMIT still wins."""
    jobs = ([job(1, p, "a", ConcurrencyLimits="db.alpha") for p in range(3)]
            + [job(2, p, "a", ConcurrencyLimits="db.beta") for p in range(3)]
            + [job(3, p, "a", ConcurrencyLimits="db.gamma") for p in range(3)])
    r = cycle(tmp_path, slots=free_slots(20), jobs=jobs,
              config="CONCURRENCY_LIMIT_DEFAULT_DB = 1\nDB.GAMMA_LIMIT = 2")
    got = sorted(m.assigned_job for m in r.matches)
    assert got == ["1.0", "2.0", "3.0", "3.1"]
    assert {x.reason for x in r.rejections} == {"concurrency limit db.alpha reached",
                                               "concurrency limit db.beta reached",
                                               "concurrency limit db.gamma reached"}


def test_default_limit_when_nothing_is_configured(tmp_path):
    jobs = [job(1, p, "a", ConcurrencyLimits="anything") for p in range(4)]
    r = cycle(tmp_path, slots=free_slots(10), jobs=jobs, config="CONCURRENCY_LIMIT_DEFAULT = 3")
    assert len(r.matches) == 3


def test_limits_that_need_the_slot_are_checked_per_candidate(tmp_path):
    """M3: a ConcurrencyLimits that is not a string on its own is evaluated with each
    candidate as TARGET; a full limit only rules out the slots that would take it."""
    slots = ([slot(f"slot1@a{i}.test.local", Site="a") for i in range(3)]
             + [slot(f"slot1@b{i}.test.local", Site="b") for i in range(3)])
    jobs = [job(1, p, "a", ConcurrencyLimits=Expr('strcat("site_", TARGET.Site)'))
            for p in range(5)]
    r = cycle(tmp_path, slots=slots, jobs=jobs, config="SITE_A_LIMIT = 1")
    sites = sorted(m.slot.split("@")[1][0] for m in r.matches)
    assert sites == ["a", "b", "b", "b"]
    assert limits(r)["site_a"] == (0.0, 1.0, 1.0)
    assert limits(r)["site_b"][1] == 3.0
    # The last job pops the request's cached MatchList dry: its reason is the scan's
    # counters, and that scan (made before site_a filled up) refused nothing for a limit
    assert [x.reason for x in r.rejections] == ["no match found"]


def test_a_fresh_scan_names_the_full_limit(tmp_path):
    """A request scanned after the limit filled up is refused by the limit (M12)."""
    slots = ([slot(f"slot1@a{i}.test.local", Site="a") for i in range(2)]
             + [slot("slot1@b0.test.local", Site="b")])
    cl = Expr('strcat("site_", TARGET.Site)')
    jobs = ([job(1, p, "a", ConcurrencyLimits=cl) for p in range(2)]
            + [job(2, 0, "a", ConcurrencyLimits=cl, RequestMemory=256)])
    r = cycle(tmp_path, slots=slots, jobs=jobs, config="SITE_A_LIMIT = 1")
    assert sorted((m.assigned_job, m.slot) for m in r.matches) == [
        ("1.0", "slot1@a0.test.local"), ("1.1", "slot1@b0.test.local")]
    assert [(x.job, x.reason) for x in r.rejections] == [
        ("2.0", "concurrency limit site_a reached")]


def test_no_limits_no_counts(tmp_path):
    r = cycle(tmp_path, slots=free_slots(3), jobs=[job(1, 0, "a")])
    assert len(r.matches) == 1 and r.to_json()["concurrency_limits"] == []


def test_negotiate_output_shows_limit_counts(tmp_path):
    from negotiator_ext.views.negotiate import render_cycle
    jobs = [job(1, p, "a", ConcurrencyLimits="foodb") for p in range(3)]
    r = cycle(tmp_path, slots=free_slots(5), jobs=jobs, config="FOODB_LIMIT = 2")
    text = render_cycle(r.to_json())
    assert "Concurrency limits:" in text
    line = next(ln for ln in text.splitlines() if ln.startswith("foodb"))
    assert line.split() == ["foodb", "2", "0", "2"]
