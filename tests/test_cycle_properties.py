"""Property tests of whole cycles on random small pools (hypothesis)."""

from __future__ import annotations

import classad2
from hypothesis import HealthCheck, given, settings, strategies as st

from negotiator_ext.core import classads
from negotiator_ext.cycle import run_cycle
from negotiator_ext.pool import load_pool
from poolmaker import job, make_pool, slot

pools = st.fixed_dictionaries({
    "mem": st.lists(st.sampled_from([512, 1024, 2048, 4096]), min_size=1, max_size=8),
    "cpus": st.lists(st.sampled_from([1, 2, 4]), min_size=8, max_size=8),
    "jobs": st.lists(st.tuples(st.sampled_from(["a", "b", "c"]), st.sampled_from([256, 1500, 3000]),
                               st.sampled_from([None, "g1", "g2"])), min_size=1, max_size=12),
    "quotas": st.tuples(st.integers(0, 6), st.integers(0, 6)),
    "surplus": st.booleans(),
})


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(p=pools)
def test_matches_satisfy_requirements_quotas_hold(tmp_path_factory, p):
    d = tmp_path_factory.mktemp("pool")
    slots = [slot(f"slot1@n{i}.test.local", Memory=m, Cpus=p["cpus"][i]) for i, m in enumerate(p["mem"])]
    jobs = [job(i + 1, 0, u, group=g, RequestMemory=m) for i, (u, m, g) in enumerate(p["jobs"])]
    q1, q2 = p["quotas"]
    config = (f"GROUP_NAMES = g1, g2\nGROUP_QUOTA_g1 = {q1}\nGROUP_QUOTA_g2 = {q2}\n"
              f"GROUP_ACCEPT_SURPLUS = {p['surplus']}")
    r = run_cycle(load_pool(make_pool(d, slots=slots, jobs=jobs, config=config)))
    names = [m.slot for m in r.matches]
    assert len(names) == len(set(names))                  # no slot matched twice
    slot_ads = {s["Name"]: s for s in slots}
    by_id = {f"{j['ClusterId']}.{j['ProcId']}": j for j in jobs}
    req = classads.parse_expr("MY.Requirements")
    for m in r.matches:                                    # both Requirements hold
        s = classad2.ClassAd({k: (classad2.ExprTree(v.text) if hasattr(v, "text") else v)
                              for k, v in slot_ads[m.slot].items()})
        j = classad2.ClassAd({k: (classad2.ExprTree(v.text) if hasattr(v, "text") else v)
                              for k, v in by_id[m.assigned_job].items()})
        assert classads.is_true(classads.eval_match(req, j, s))
        assert classads.is_true(classads.eval_match(req, s, j))
    pool_size = sum(p["cpus"][: len(p["mem"])])
    groups = {g["name"]: g for g in r.groups}
    # a group is never allocated more than it asks for, and the allocations stay within
    # the pool, or within the static quotas when those oversubscribe it (G4, OVERSUB on by
    # default); without surplus a group only matches while it is below its quota (the
    # last match may overshoot: the round-up of rule M5)
    for g in r.groups:
        assert g["allocated"] <= g["requested"] + 1e-9
    assert sum(g["allocated"] for g in r.groups) <= max(pool_size, q1 + q2) + 1e-9
    if not p["surplus"]:
        for name in ("g1", "g2"):
            costs = [m.cost for m in r.matches if m.group == name]
            if costs:
                assert groups[name]["usage"] - max(costs) < groups[name]["effective_quota"]


limit_pools = st.fixed_dictionaries({
    "slots": st.lists(st.tuples(st.sampled_from(["a", "b"]), st.sampled_from([None, "x:1", "x:2", "y"])),
                      min_size=1, max_size=10),
    "jobs": st.lists(st.tuples(st.sampled_from(["u", "v"]),
                               st.sampled_from(["x", "x:2", "y", "x, y", "site", "x:0.5"])),
                     min_size=1, max_size=12),
    "max_x": st.integers(0, 4), "max_y": st.integers(0, 3), "max_site": st.integers(0, 2),
})


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(p=limit_pools)
def test_no_concurrency_limit_exceeded_by_new_matches(tmp_path_factory, p):
    """Every limit a new match takes stays within its maximum (M10), counting what the
    claimed slots held at the start (M9); limits already over stay where they were."""
    from poolmaker import DOMAIN, Expr
    d = tmp_path_factory.mktemp("pool")
    slots = []
    for i, (site, held) in enumerate(p["slots"]):
        extra = {"Site": site}
        if held is not None:    # a claimed slot holding a limit
            extra.update(State="Claimed", Activity="Busy", RemoteUser=f"w@{DOMAIN}",
                         RemoteOwner=f"w@{DOMAIN}", ConcurrencyLimits=held)
        slots.append(slot(f"slot1@n{i}.test.local", **extra))
    jobs = []
    for i, (user, cl) in enumerate(p["jobs"]):
        value = Expr('strcat("site_", TARGET.Site)') if cl == "site" else cl
        jobs.append(job(i + 1, 0, user, ConcurrencyLimits=value))
    config = (f"X_LIMIT = {p['max_x']}\nY_LIMIT = {p['max_y']}\n"
              f"CONCURRENCY_LIMIT_DEFAULT = {p['max_site']}")
    r = run_cycle(load_pool(make_pool(d, slots=slots, jobs=jobs, config=config)))
    for x in r.to_json()["concurrency_limits"]:
        if x["count"] > x["count_before"]:               # new matches took some of it
            assert x["count"] <= x["max"] + 1e-9, x
