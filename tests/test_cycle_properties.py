"""Property tests of whole cycles on random small pools (hypothesis)."""

from __future__ import annotations

import classad2
from hypothesis import HealthCheck, example, given, settings, strategies as st

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


# ---- consumption-policy p-slots: assets never below zero (5.3-5.5, P5) ------------------

# (ConsumptionCpus, ConsumptionMemory, ConsumptionDisk, SlotWeight): the seed's
# cpu-centric and memory-centric policies, and the startd's defaults (quantized cpus).
CP_POLICIES = [
    ("target.RequestCpus", "quantize(target.RequestMemory, {32})",
     "quantize(target.RequestDisk, {128})", "Cpus"),
    ("1", "quantize(target.RequestMemory, {1024})", "quantize(target.RequestDisk, {128})",
     "floor(Memory / 1024)"),
    ("quantize(target.RequestCpus, {1})", "quantize(target.RequestMemory, {128})",
     "quantize(target.RequestDisk, {1024})", "Cpus"),
]
CP_ASSETS = ("Cpus", "Memory", "Disk")

cp_pools = st.fixed_dictionaries({
    "pslots": st.lists(st.tuples(st.sampled_from([1, 2, 4, 6]), st.sampled_from([1024, 2048, 3000]),
                                 st.sampled_from([1500, 5000, 20000]),
                                 st.integers(0, len(CP_POLICIES) - 1),
                                 st.sampled_from([None, 1, 3])),
                       min_size=1, max_size=2),
    "jobs": st.lists(st.tuples(st.sampled_from(["a", "b"]), st.sampled_from([0, 1, 2, 3]),
                               st.sampled_from([100, 500, 1024, 1500]),
                               st.sampled_from([None, 100, 1000, 3000])),
                     min_size=1, max_size=10),
    "static": st.booleans(),
})


def _ad(d: dict):
    return classad2.ClassAd({k: (classad2.ExprTree(v.text) if hasattr(v, "text") else v)
                             for k, v in d.items()})


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(p=cp_pools)
def test_cp_pslot_assets_never_go_below_zero(tmp_path_factory, p):
    """Replaying a cycle's matches on each CP p-slot, in order: every match's
    consumption (5.3, a missing RequestXxx counting as 0) fits what was left (5.4),
    so no asset goes below zero; each match costs the drop in SlotWeight (5.5); and
    a p-slot gets no more matches than it has claim ids (P5: NumClaims, default
    ceil(Cpus))."""
    from poolmaker import Expr
    d = tmp_path_factory.mktemp("pool")
    slots = []
    for i, (cpus, mem, disk, pol, claims) in enumerate(p["pslots"]):
        c_cpus, c_mem, c_disk, weight = CP_POLICIES[pol]
        extra = {} if claims is None else {"NumClaims": claims}
        slots.append(slot(f"slot1@n{i}.test.local", PartitionableSlot=True, Cpus=cpus,
                          Memory=mem, Disk=disk, MachineResources="Cpus Memory Disk",
                          ConsumptionCpus=Expr(c_cpus), ConsumptionMemory=Expr(c_mem),
                          ConsumptionDisk=Expr(c_disk), SlotWeight=Expr(weight), **extra))
    if p["static"]:
        slots.append(slot("slot1@n9.test.local", Cpus=2, Memory=1024))
    jobs = []
    for i, (user, cpus, mem, disk) in enumerate(p["jobs"]):
        j = job(i + 1, 0, user, RequestCpus=cpus, RequestMemory=mem)
        if disk is None:
            del j["RequestDisk"]
        else:
            j["RequestDisk"] = disk
        jobs.append(j)
    r = run_cycle(load_pool(make_pool(d, slots=slots, jobs=jobs)))
    by_id = {f"{j['ClusterId']}.{j['ProcId']}": j for j in jobs}
    left = {s["Name"]: _ad(s) for s in slots if "ConsumptionCpus" in s}
    weight = classads.parse_expr("MY.SlotWeight")
    count: dict[str, int] = {}
    for m in r.matches:
        if m.slot not in left:
            continue
        s = left[m.slot]
        count[m.slot] = count.get(m.slot, 0) + 1
        j = _ad(by_id[m.assigned_job])
        for a in CP_ASSETS:
            if f"Request{a}" not in j:
                j[f"Request{a}"] = 0
        use = {a: classads.as_number(classads.eval_match(
            classads.parse_expr(f"MY.Consumption{a}"), s, j)) for a in CP_ASSETS}
        assert any(use[a] > 0 for a in CP_ASSETS), (m, use)
        w0 = classads.as_number(classads.eval_match(weight, s, j))
        for a in CP_ASSETS:
            s[a] = s[a] - use[a]
            assert s[a] >= 0, (m.slot, a, s[a])
        w1 = classads.as_number(classads.eval_match(weight, s, j))
        assert m.cost == w0 - w1, (m, w0, w1)
    for name, n in count.items():
        spec = next(x for x in slots if x["Name"] == name)
        assert n <= spec.get("NumClaims", spec["Cpus"])


# ---- preemption states (4.5 steps 8-11, 4.6) ---------------------------------------------

PREEMPTION_REQ = "TARGET.JobPrio > 0 && MY.Memory >= 1024"
SLOT_RANKS = ["0", "TARGET.JobPrio", 'ifThenElse(TARGET.Owner == "b", 10, 0)',
              "TARGET.JobPrio * 3 - 1"]

preempt_pools = st.fixed_dictionaries({
    "slots": st.lists(st.tuples(st.sampled_from([None, "a", "b", "c"]),
                                st.sampled_from([512, 1024, 2048]),
                                st.integers(0, len(SLOT_RANKS) - 1), st.sampled_from([0, 1, 5])),
                      min_size=1, max_size=6),
    "jobs": st.lists(st.tuples(st.sampled_from(["a", "b", "c"]), st.sampled_from([0, 1, 2])),
                     min_size=1, max_size=8),
    "prios": st.tuples(*[st.sampled_from([500.0, 5000.0, 50000.0])] * 3),
})


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(p=preempt_pools)
# always checked, whatever the draw: a rank preemption (c's slot ranks b's jobs 10), a
# priority preemption (a's 2048 MB slot ranks a JobPrio 1 job at its CurrentRank 1) and
# an unclaimed slot for the JobPrio 0 job that PREEMPTION_REQUIREMENTS refuses on a's
@example(p={"slots": [("a", 2048, 1, 1), ("c", 512, 2, 0), (None, 512, 0, 0)],
            "jobs": [("b", 1), ("b", 0), ("b", 1)], "prios": (50000.0, 500.0, 50000.0)})
def test_preemption_states_follow_their_rules(tmp_path_factory, p):
    """Every PRIO_PREEMPTION (0) match passes PREEMPTION_REQUIREMENTS (MY = slot,
    TARGET = job), has MY.Rank >= MY.CurrentRank and takes another user's slot;
    every RANK_PREEMPTION (1) match has MY.Rank > MY.CurrentRank; NO_PREEMPTION (2) is
    for unclaimed slots only; a match preempts exactly the claimed slot's user."""
    from poolmaker import DOMAIN, Expr, accounting, claimed, running_by_submitter, submitters_for
    d = tmp_path_factory.mktemp("pool")
    slots, jobs = [], []
    for i, (owner, mem, rank, current) in enumerate(p["slots"]):
        name = f"slot1@n{i}.test.local"
        attrs = dict(Memory=mem, Rank=Expr(SLOT_RANKS[rank]), CurrentRank=current)
        if owner is None:
            slots.append(slot(name, **attrs))
        else:
            running = job(900 + i, 0, owner, JobStatus=2)
            jobs.append(running)
            slots.append(claimed(name, running, f"{owner}@{DOMAIN}", **attrs))
    for i, (user, prio) in enumerate(p["jobs"]):
        jobs.append(job(i + 1, 0, user, JobPrio=prio, RequestMemory=256))
    acc = [accounting(f"{u}@{DOMAIN}", priority=pr) for u, pr in zip("abc", p["prios"])]
    subs = submitters_for(jobs, running_by_submitter(jobs))
    config = f"PREEMPTION_REQUIREMENTS = {PREEMPTION_REQ}\n"
    r = run_cycle(load_pool(make_pool(d, slots=slots, jobs=jobs, submitters=subs,
                                      accounting_ads=acc, config=config)))
    names = [m.slot for m in r.matches]
    assert len(names) == len(set(names))
    slot_ads = {s["Name"]: s for s in slots}
    by_id = {f"{j['ClusterId']}.{j['ProcId']}": j for j in jobs}
    preq = classads.parse_expr(PREEMPTION_REQ)
    rank = classads.parse_expr("MY.Rank")
    for m in r.matches:
        spec = slot_ads[m.slot]
        s, j = _ad(spec), _ad(by_id[m.assigned_job])
        user = spec.get("RemoteUser")
        assert m.preempting == user
        slot_rank = classads.as_number(classads.eval_match(rank, s, j))
        if m.state == 0:
            assert user is not None and user != m.submitter, m
            assert classads.eval_match(preq, s, j) is True, m
            assert slot_rank >= spec["CurrentRank"], m
        elif m.state == 1:
            assert user is not None, m
            assert slot_rank > spec["CurrentRank"], m
        else:
            assert m.state == 2 and user is None, m
    if p["slots"][0] == ("a", 2048, 1, 1) and p["jobs"] == [("b", 1), ("b", 0), ("b", 1)]:
        # the fixed example reaches every state
        assert sorted(m.state for m in r.matches) == [0, 1, 2], r.matches


# ---- the cached MatchList taking off whole classes the submitter limit refuses -------------

refusal_pools = st.fixed_dictionaries({
    # many alike slots (one big class, a few others), submitters with more jobs of one
    # shape than their fair share: the limits refuse entries of a cached MatchList
    "slots": st.lists(st.tuples(st.sampled_from([None, None, None, "a", "b"]),
                                st.sampled_from([1, 1, 1, 2]), st.sampled_from([2048, 2048, 1024])),
                      min_size=4, max_size=24),
    "users": st.lists(st.tuples(st.integers(0, 12), st.sampled_from([0, 1]),
                                st.sampled_from([256, 256, 1500]),
                                st.sampled_from([None, "g1", "g2"])),
                      min_size=3, max_size=3),
    "prios": st.tuples(*[st.sampled_from([500.0, 700.0, 5000.0])] * 3),
    "quotas": st.tuples(st.integers(1, 5), st.integers(1, 5)),
    "surplus": st.booleans(),
})


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(p=refusal_pools)
def test_refused_classes_taken_off_whole_change_no_decision(tmp_path_factory, p, monkeypatch):
    """MatchList.pop(refused) drops a class whose members all cost at least what the
    submitter limit refused in the call; the negotiator refuses them one by one. The
    cycle's whole result (matches, rejections and their reasons, submitters, groups)
    is the same either way."""
    from negotiator_ext.core.match_list import MatchList
    from poolmaker import DOMAIN, accounting, claimed, running_by_submitter, submitters_for
    d = tmp_path_factory.mktemp("pool")
    slots, jobs = [], []
    for i, (owner, cpus, mem) in enumerate(p["slots"]):
        name = f"slot1@n{i}.test.local"
        if owner is None:
            slots.append(slot(name, Cpus=cpus, Memory=mem))
        else:
            running = job(900 + i, 0, owner, JobStatus=2)
            jobs.append(running)
            slots.append(claimed(name, running, f"{owner}@{DOMAIN}", Cpus=cpus, Memory=mem))
    for u, (n, prio, mem, group) in zip("abc", p["users"]):
        cluster = 100 + len(jobs)
        jobs.extend(job(cluster, k, u, group, JobPrio=prio, RequestMemory=mem) for k in range(n))
    acc = [accounting(f"{u}@{DOMAIN}", priority=pr) for u, pr in zip("abc", p["prios"])]
    subs = submitters_for(jobs, running_by_submitter(jobs))
    q1, q2 = p["quotas"]
    config = (f"GROUP_NAMES = g1, g2\nGROUP_QUOTA_g1 = {q1}\nGROUP_QUOTA_g2 = {q2}\n"
              f"GROUP_ACCEPT_SURPLUS = {p['surplus']}\n"
              "PREEMPTION_REQUIREMENTS = TARGET.JobPrio > 0\n")
    pool_dir = make_pool(d, slots=slots, jobs=jobs, submitters=subs, accounting_ads=acc,
                         config=config)

    def result():
        doc = run_cycle(load_pool(pool_dir)).to_json()
        doc.pop("timings", None)
        return doc

    fast = result()
    one_by_one = MatchList.pop
    # undone before the next example (hypothesis runs them all in one call of the test)
    with monkeypatch.context() as m:
        m.setattr(MatchList, "pop", lambda self, refused=None: one_by_one(self, None))
        assert result() == fast


# ---- runs of alike jobs keyed once (cycle._idle_jobs) ------------------------------------

run_pools = st.fixed_dictionaries({
    "runs": st.lists(st.tuples(st.sampled_from("abc"), st.integers(1, 6),
                               st.sampled_from([256, 1500]), st.sampled_from([None, "g1"]),
                               st.sampled_from(["literal", "reads ProcId",
                                                "reads GlobalJobId"])),
                     min_size=1, max_size=5),
    "slots": st.lists(st.sampled_from([512, 2048]), min_size=1, max_size=10),
    "start_reads": st.sampled_from([None, "ProcId", "GlobalJobId"]),
    # no GlobalJobId (a queue captured by its requests), or each job's own (as condor_q
    # -long prints them), one schedd's, each cluster another's, or every other job of a
    # cluster at a schedd no submitter ad names (its jobs are not negotiated)
    "global_job_id": st.sampled_from(["none", "one schedd", "a schedd a cluster",
                                      "every other job elsewhere"]),
})


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(p=run_pools)
# always checked: a cluster's jobs at two schedds by turns are no run
@example(p={"runs": [("a", 4, 256, None, "literal")], "slots": [2048] * 4,
            "start_reads": None, "global_job_id": "every other job elsewhere"})
def test_runs_of_alike_jobs_decide_as_job_by_job(tmp_path_factory, p, monkeypatch):
    """Jobs alike but for their ProcId (a queue captured by its requests: no GlobalJobId),
    or for their ProcId and GlobalJobId (condor_q -long) are keyed once per run; a JobPrio
    that reads ProcId or GlobalJobId, or slots whose START reads either, end the runs.
    The cycle's whole result is the same as keying every job."""
    from negotiator_ext.core import job_queue as runs_mod   # (run_indexes: the cycle's runs)
    from poolmaker import Expr
    d = tmp_path_factory.mktemp("pool")
    start = {None: "true", "ProcId": "TARGET.ProcId >= 0",
             "GlobalJobId": 'TARGET.GlobalJobId =!= "x"'}[p["start_reads"]]
    slots = [slot(f"slot1@n{i}.test.local", Memory=m, START=Expr(start))
             for i, m in enumerate(p["slots"])]
    jobs = []
    prios = {"literal": 0, "reads ProcId": Expr("ProcId % 3"),
             "reads GlobalJobId": Expr('ifThenElse(GlobalJobId =?= "x", 1, 0)')}
    gid = p["global_job_id"]
    for cluster, (user, n, mem, group, prio) in enumerate(p["runs"], start=1):
        for proc in range(n):
            j = job(cluster, proc, user, group, RequestMemory=mem, JobPrio=prios[prio])
            if gid == "none":
                del j["GlobalJobId"]
            elif gid == "a schedd a cluster":
                j["GlobalJobId"] = f"s{cluster}#{cluster}.{proc}#1000"
            elif gid == "every other job elsewhere" and proc % 2:
                j["GlobalJobId"] = f"elsewhere#{cluster}.{proc}#1000"
            jobs.append(j)
    pool_dir = make_pool(d, slots=slots, jobs=jobs, config="GROUP_NAMES = g1\nGROUP_QUOTA_g1 = 3\n")

    def result():
        doc = run_cycle(load_pool(pool_dir)).to_json()
        doc.pop("timings", None)
        return doc

    started = []
    real = runs_mod.run_indexes
    with monkeypatch.context() as m:
        m.setattr(runs_mod, "run_indexes",
                  lambda row, key: started.append(real(row, key)) or real(row, key))
        keyed_by_runs = result()
    runs_can = (gid == "none" and p["start_reads"] != "ProcId") or (
        p["start_reads"] is None and gid != "every other job elsewhere")
    if any(n > 1 and prio == "literal" for _, n, _, _, prio in p["runs"]) and runs_can:
        assert any(at >= 0 and (gid == "none" or g >= 0) for at, g in started)
    if p["start_reads"] == "ProcId":
        assert not any(at >= 0 for at, _ in started)
    if p["start_reads"] == "GlobalJobId":
        assert not any(g >= 0 for _, g in started)
    with monkeypatch.context() as m:
        m.setattr(runs_mod, "run_indexes", lambda row, read: (-1, -1))
        assert result() == keyed_by_runs
    # the schedd's view of each job, worked out beside the slot ads by runs too
    # (adapters.snapshot), is the same as job by job
    from negotiator_ext.adapters.adfiles import read_text_ads
    from negotiator_ext.core import adtext
    from negotiator_ext.core.job_queue import QueueView, queue_head, queue_heads
    table = read_text_ads(pool_dir / "jobs.ads")
    values = adtext.TextValues()
    view = QueueView(values)
    assert queue_heads(table) == [queue_head(view, adtext.Job(row, table.store.names, values))
                                  for row in table.rows]


def test_a_run_ends_where_a_text_before_procid_names_it(tmp_path, monkeypatch):
    """Lines sorted as condor_q -long prints them: an attribute that sorts before ProcId
    and reads it (JobPrio through AJobPrioHelper) ends the runs, whichever comes first
    in the row; the schedd offers the jobs of the highest JobPrio first."""
    from negotiator_ext.core import job_queue as runs_mod   # (run_indexes: the cycle's runs)
    from poolmaker import Expr
    slots = [slot(f"slot1@n{i}.test.local", Memory=2048) for i in range(2)]
    jobs = [job(1, proc, "a", None, AJobPrioHelper=Expr("ProcId % 3"),
                JobPrio=Expr("AJobPrioHelper")) for proc in range(6)]
    pool_dir = make_pool(tmp_path / "pool", slots=slots, jobs=jobs)
    f = pool_dir / "jobs.ads"
    f.write_text("\n\n".join("\n".join(sorted(b.split("\n"), key=str.lower))
                              for b in f.read_text().strip().split("\n\n")) + "\n")

    def assigned():
        return [m["assigned_job"] for m in run_cycle(load_pool(pool_dir)).to_json()["matches"]]

    assert assigned() == ["1.2", "1.5"]
    with monkeypatch.context() as m:
        m.setattr(runs_mod, "run_indexes", lambda row, read: (-1, -1))
        assert assigned() == ["1.2", "1.5"]
    from negotiator_ext.adapters.adfiles import read_text_ads
    from negotiator_ext.core.job_queue import queue_heads
    heads = queue_heads(read_text_ads(f))
    assert [h[0][1][2] for h in heads] == [0, -1, -2] * 2      # (-JobPrio: the order)


memo_pools = st.fixed_dictionaries({
    # (memory, claimed by "a"/"b" or None, changed before the second pass)
    "slots": st.lists(st.tuples(st.sampled_from([512, 1024, 2048]),
                                st.sampled_from([None, None, "a", "b"]), st.booleans()),
                      min_size=1, max_size=6),
    "jobs": st.lists(st.tuples(st.sampled_from(["a", "b", "c"]), st.booleans()),
                     min_size=1, max_size=6),
    "boost_later": st.booleans(),
    "rank": st.sampled_from([None, "Memory", "ifThenElse(Boost =?= True, 0 - Memory, Memory)"]),
    "preq": st.sampled_from([None, "True", "RemoteUserPrio > SubmitterUserPrio"]),
    # HTCondor's default PREEMPTION_RANK reads the current user's priority
    "prank": st.sampled_from([None, "RemoteUserPrio", "0 - RemoteUserPrio"]),
    # the users' priorities in each pass (the current users' figures the cycle writes
    # into claimed slots change with them)
    "prios": st.tuples(*[st.tuples(*[st.sampled_from([500.0, 5000.0, 50000.0])] * 3)] * 2),
})


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(p=memo_pools)
# always checked: c's job preempts the claimed slot whose user's priority is highest,
# a's in the second pass, b's in the first (PREEMPTION_RANK reads the figure the cycle
# writes into a claimed slot: no memo may keep it)
@example(p={"slots": [(512, "a", False), (512, "b", False)], "jobs": [("c", False)],
            "boost_later": False, "rank": None, "preq": "True", "prank": "RemoteUserPrio",
            "prios": ((500.0, 50000.0, 500.0), (50000.0, 500.0, 500.0))})
def test_a_loops_slot_memos_change_no_decision(tmp_path_factory, p):
    """A shadow loop's kept slot ads carry what the cycle read of them into the next
    pass (`Pool.slot_memos`): over two passes, with some slots advertised anew (a fresh
    memo) and the queue changed between them, each pass decides what a cycle without
    memos decides on the same ads."""
    import dataclasses
    import json

    from negotiator_ext.pool import build_pool
    from poolmaker import DOMAIN, accounting, claimed, running_by_submitter, submitters_for

    def pool_of(name, later):
        jobs = [job(i + 1, 0, u, RequestMemory=256,
                    **({"Boost": True} if b and later and p["boost_later"] else {}))
                for i, (u, b) in enumerate(p["jobs"])]
        slots = []
        for i, (mem, user, change) in enumerate(p["slots"]):
            extra = {"Memory": mem * (2 if change and later else 1)}
            name_i = f"slot1@n{i}.test.local"
            if user is None:
                slots.append(slot(name_i, **extra))
                continue
            running = job(100 + i, 0, user, JobStatus=2)
            jobs.append(running)
            slots.append(claimed(name_i, running, f"{user}@{DOMAIN}", **extra))
        config = "NEGOTIATOR_CONSIDER_PREEMPTION = True\n"
        if p["rank"]:
            config += f"NEGOTIATOR_PRE_JOB_RANK = {p['rank']}\n"
        if p["preq"]:
            config += f"PREEMPTION_REQUIREMENTS = {p['preq']}\n"
        if p["prank"]:
            config += f"PREEMPTION_RANK = {p['prank']}\n"
        acc = [accounting(f"{u}@{DOMAIN}", priority=pr)
               for u, pr in zip("abc", p["prios"][1 if later else 0])]
        return load_pool(make_pool(
            tmp_path_factory.mktemp(name), slots=slots, jobs=jobs, accounting_ads=acc,
            submitters=submitters_for(jobs, running_by_submitter(jobs)), config=config))

    def decisions(pool, memos):
        snap = dataclasses.replace(pool.snapshot, slots_shared=True, slot_memos=memos)
        got = run_cycle(build_pool(snap, pool.config)).to_json()
        got.pop("timings", None)
        return json.dumps(got, sort_keys=True, default=str)

    first, second = pool_of("one", False), pool_of("two", True)
    memos = [{} for _ in p["slots"]]
    assert decisions(first, tuple(memos)) == decisions(first, None)
    # a slot advertised anew is a new ad: its memo starts empty
    memos = [{} if change else m for m, (_, _, change) in zip(memos, p["slots"])]
    for _ in range(2):
        assert decisions(second, tuple(memos)) == decisions(second, None)
