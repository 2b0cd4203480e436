"""Bad input around matchmaking: what HTCondor does with it where it does something
(no match, an ignored limit or knob), and otherwise an InputError naming the knob or ad.

  consumption policies   utils/consumption_policy.cpp: cp_compute_consumption,
                         cp_sufficient_assets
  concurrency limits     utils/NegotiationUtils.cpp: ParseConcurrencyLimit;
                         Accountant.cpp: GetLimitMax (param_double EXCEPTs on a non-number)
  expression knobs       matchmaker.cpp: Matchmaker::reinitialize (EXCEPT, or log and
                         unset), ClassAd::AssignExpr failing silently for the others;
                         GroupEntry.cpp: hgq_construct_tree (GROUP_SORT_EXPR)
"""

from __future__ import annotations

import pytest

from negotiator_ext.core.accountant import parse_concurrency_limits
from negotiator_ext.cycle import run_cycle
from negotiator_ext.errors import InputError
from negotiator_ext.pool import load_pool
from poolmaker import Expr, job, make_pool, slot

N1 = "slot1@n1.test.local"
DEFAULT_POLICY = dict(ConsumptionCpus="quantize(target.RequestCpus, {1})",
                      ConsumptionMemory="quantize(target.RequestMemory, {128})",
                      ConsumptionDisk="quantize(target.RequestDisk, {1024})")
RAW_POLICY = dict(ConsumptionCpus="target.RequestCpus", ConsumptionMemory="target.RequestMemory",
                  ConsumptionDisk="target.RequestDisk")


def pool_of(tmp_path, **kw):
    return load_pool(make_pool(tmp_path / "pool", **kw))


def cycle(tmp_path, **kw):
    return run_cycle(pool_of(tmp_path, **kw))


def pslot(resources="Cpus Memory Disk", policy=None, **attrs):
    """A 4-core p-slot; with `policy` (Consumption<A> texts) it has a consumption policy."""
    d = dict(PartitionableSlot=True, SlotType="Partitionable", Cpus=4, Memory=4096,
             Disk=100000, MachineResources=resources, SlotWeight=Expr("Cpus"))
    d.update({k: Expr(v) for k, v in (policy or {}).items()})
    d.update(attrs)
    return slot(N1, **d)


def outcome(r) -> tuple[list, list]:
    return ([(m.assigned_job, m.slot, m.cost) for m in r.matches],
            [(x.job, x.reason) for x in r.rejections])


# ---- consumption policies -----------------------------------------------------------

@pytest.mark.parametrize("cpus,matches", [
    ("quantize(target.RequestCpus, {1})", True),     # the default policy: the control
    ("error", False),
    ("undefined", False),
    ("target.NoSuchAttribute", False),
    ('"1"', False),                                  # a string is not a number
    ("1/0", False),
    ("-1", False),                                   # negative: kept, and never sufficient
    ("true", True),                                  # EvalFloat takes a boolean as 1
])
def test_a_consumption_that_is_not_a_non_negative_number_never_matches(tmp_path, cpus, matches):
    """cp_compute_consumption records -999 (or the negative value) and
    cp_sufficient_assets refuses it: no match, and nothing is raised."""
    policy = dict(DEFAULT_POLICY, ConsumptionCpus=cpus)
    r = cycle(tmp_path, slots=[pslot(policy=policy)], jobs=[job(1, 0, "a")])
    if matches:
        assert outcome(r) == ([("1.0", N1, 1.0)], [])
    else:
        assert outcome(r) == ([], [("1.0", "no match found")])


@pytest.mark.parametrize("kind,request_,expected", [
    # default policy: quantize(-1, {1}) is 1 and quantize(-5, {128}) is 128: one core
    ("default policy", dict(RequestCpus=-1), [("1.0", N1, 1.0)]),
    ("default policy", dict(RequestMemory=-5), [("1.0", N1, 1.0)]),
    # a policy consuming the request as is: a negative consumption never suffices
    ("raw policy", dict(RequestCpus=-1), []),
    ("raw policy", dict(RequestMemory=-5), []),
    ("raw policy", {}, [("1.0", N1, 1.0)]),                        # the control
    # no policy: the negotiator does not look at requests; the whole p-slot is the cost
    ("no policy", dict(RequestCpus=-1), [("1.0", N1, 4.0)]),
    ("no policy", dict(RequestMemory=-5), [("1.0", N1, 4.0)]),
    ("static", dict(RequestCpus=-1), [("1.0", N1, 1.0)]),
    ("static", dict(RequestMemory=-5), [("1.0", N1, 1.0)]),
])
def test_negative_requests(tmp_path, kind, request_, expected):
    s = {"default policy": lambda: pslot(policy=DEFAULT_POLICY),
         "raw policy": lambda: pslot(policy=RAW_POLICY),
         "no policy": lambda: pslot(),
         "static": lambda: slot(N1)}[kind]()
    r = cycle(tmp_path, slots=[s], jobs=[job(1, 0, "a", **request_)])
    matches, rejections = outcome(r)
    assert matches == expected
    assert rejections == ([] if expected else [("1.0", "no match found")])


def test_a_policy_asset_the_slot_does_not_have_is_an_error_naming_the_ad(tmp_path):
    """cp_sufficient_assets EXCEPTs ("Missing GPUs resource asset")."""
    s = pslot(resources="Cpus Memory Disk GPUs",
              policy=dict(DEFAULT_POLICY, ConsumptionGPUs="0"))
    pool = pool_of(tmp_path, slots=[s], jobs=[job(1, 0, "a")])
    with pytest.raises(InputError) as e:
        run_cycle(pool)
    assert e.value.ad == N1 and e.value.attribute == "GPUs"
    assert "MachineResources lists it" in e.value.one_line()


def test_the_same_slot_with_the_asset_matches(tmp_path):
    s = pslot(resources="Cpus Memory Disk GPUs", GPUs=1,
              policy=dict(DEFAULT_POLICY, ConsumptionGPUs="0"))
    r = cycle(tmp_path, slots=[s], jobs=[job(1, 0, "a")])
    assert outcome(r) == ([("1.0", N1, 1.0)], [])


# ---- concurrency limits in job ads ---------------------------------------------------

def test_limit_tokens_are_read_as_parse_concurrency_limit_reads_them():
    assert parse_concurrency_limits("lic$ense x.y.z x. .y 9x é") == []      # invalid: ignored
    assert parse_concurrency_limits("a b:2, c:-1 d:abc e:0") == [
        ("a", 1.0), ("b", 2.0), ("c", 1.0), ("d", 1.0), ("e", 1.0)]
    # the amount is strtod's reading of the text's start
    assert parse_concurrency_limits("x:2abc y:0x10 z:1_0 w:1e1 v:.5") == [
        ("x", 2.0), ("y", 16.0), ("z", 1.0), ("w", 10.0), ("v", 0.5)]
    assert parse_concurrency_limits("X:inf Db.Lic:nan") == [("x", float("inf")), ("db.lic", 1.0)]


@pytest.mark.parametrize("limits,config,matched,reason", [
    ("lic$ense", "CONCURRENCY_LIMIT_DEFAULT = 1", 3, None),        # ignored, not rejected
    ("x.y.z", "CONCURRENCY_LIMIT_DEFAULT = 1", 3, None),
    ("a b:2", "A_LIMIT = 3\nB_LIMIT = 4", 2, "concurrency limit b reached"),
    ("x:-1", "X_LIMIT = 2", 2, "concurrency limit x reached"),     # counts 1
    ("x:abc", "X_LIMIT = 2", 2, "concurrency limit x reached"),
    ("x:2abc", "X_LIMIT = 3", 1, "concurrency limit x reached"),   # counts 2
    ("x:0x10", "X_LIMIT = 20", 1, "concurrency limit x reached"),  # counts 16
    ("x:inf", "X_LIMIT = 1000", 0, "concurrency limit x reached"),
])
def test_bad_limit_tokens_in_whole_cycles(tmp_path, limits, config, matched, reason):
    slots = [slot(f"slot1@n{i}.test.local") for i in range(5)]
    jobs = [job(1, p, "a", ConcurrencyLimits=limits) for p in range(3)]
    r = cycle(tmp_path, slots=slots, jobs=jobs, config=config)
    assert len(r.matches) == matched
    assert [x.reason for x in r.rejections] == ([reason] if reason else [])


# ---- concurrency-limit knobs ---------------------------------------------------------

@pytest.mark.parametrize("line", ["FOO$_LIMIT = 3", "CONCURRENCY_LIMIT_DEFAULT_A-B = 1"])
def test_a_knob_name_htcondor_cannot_read_is_a_config_error(tmp_path, line):
    with pytest.raises(InputError) as e:
        pool_of(tmp_path, slots=[slot(N1)], jobs=[job(1, 0, "a")], config=line)
    assert e.value.one_line().endswith(f"line 1: not valid HTCondor configuration: {line!r}")


@pytest.mark.parametrize("limits,config,knob", [
    ("foo", "FOO_LIMIT = many", "FOO_LIMIT = many"),
    ("foo", "FOO_LIMIT = 3 # three", "FOO_LIMIT = 3 # three"),
    ("db.alpha", "CONCURRENCY_LIMIT_DEFAULT_DB = many", "CONCURRENCY_LIMIT_DEFAULT_DB = many"),
])
def test_a_limit_maximum_that_is_not_a_number_is_an_error_once_a_job_needs_it(
        tmp_path, limits, config, knob):
    """GetLimitMax reads it with param_double, which EXCEPTs; only then."""
    jobs = [job(1, 0, "a", ConcurrencyLimits=limits)]
    pool = pool_of(tmp_path / "used", slots=[slot(N1)], jobs=jobs, config=config)
    with pytest.raises(InputError) as e:
        run_cycle(pool)
    name = limits
    assert e.value.message == f"{knob}: not a number (the maximum of concurrency limit {name})"
    # a job without that limit does not read the knob
    r = cycle(tmp_path / "unused", slots=[slot(N1)],
              jobs=[job(1, 0, "a", ConcurrencyLimits="other")], config=config)
    assert len(r.matches) == 1


@pytest.mark.parametrize("value,maximum", [("1 + 1", 2.0), ("0x10", 16.0), ("true", 1.0),
                                           ("2.5  ", 2.5)])
def test_limit_maxima_are_read_as_param_double_reads_them(tmp_path, value, maximum):
    pool = pool_of(tmp_path, slots=[slot(N1)], jobs=[job(1, 0, "a")],
                   config=f"FOO_LIMIT = {value}\nCONCURRENCY_LIMIT_DEFAULT_DB = {value}")
    assert pool.config.concurrency_limit_max("foo") == maximum
    assert pool.config.concurrency_limit_max("db.x") == maximum


def test_odd_default_prefixes_are_never_consulted(tmp_path):
    """Only `<text before the last '.'>` of a valid limit name is looked up, so
    CONCURRENCY_LIMIT_DEFAULT_A.B and CONCURRENCY_LIMIT_DEFAULT_ never apply."""
    config = ("CONCURRENCY_LIMIT_DEFAULT_A.B = 0\nCONCURRENCY_LIMIT_DEFAULT_ = 0\n"
              "CONCURRENCY_LIMIT_DEFAULT_A = 2")
    slots = [slot(f"slot1@n{i}.test.local") for i in range(8)]
    jobs = ([job(1, p, "a", ConcurrencyLimits="a.b.c") for p in range(3)]     # invalid: none
            + [job(2, p, "a", ConcurrencyLimits="a.b") for p in range(3)])    # CL_DEFAULT_A
    r = cycle(tmp_path, slots=slots, jobs=jobs, config=config)
    assert sorted(m.assigned_job for m in r.matches) == ["1.0", "1.1", "1.2", "2.0", "2.1"]
    assert [x.reason for x in r.rejections] == ["concurrency limit a.b reached"]


# ---- negotiator expression knobs -----------------------------------------------------

@pytest.mark.parametrize("knob", [
    "PREEMPTION_REQUIREMENTS", "PREEMPTION_RANK", "NEGOTIATOR_PRE_JOB_RANK",
    "NEGOTIATOR_POST_JOB_RANK", "NEGOTIATOR_SLOT_CONSTRAINT",
    "NEGOTIATOR_SUBMITTER_CONSTRAINT", "GROUP_SORT_EXPR",
])
def test_knobs_htcondor_refuses_to_start_with_are_config_errors(tmp_path, knob):
    with pytest.raises(InputError) as e:
        pool_of(tmp_path, slots=[slot(N1)], jobs=[job(1, 0, "a")], config=f"{knob} = (Cpus >")
    assert e.value.message == f"{knob} = (Cpus >: not a valid ClassAd expression"


def test_an_unparsable_job_constraint_is_ignored_with_a_warning(tmp_path):
    """Never parsed by the negotiator: AssignExpr fails, the schedd gets no constraint."""
    pool = pool_of(tmp_path, slots=[slot(N1)], jobs=[job(1, 0, "a")],
                   config="NEGOTIATOR_JOB_CONSTRAINT = (Owner == ")
    assert pool.config.job_constraint is None
    assert pool.config.warnings == (
        "NEGOTIATOR_JOB_CONSTRAINT = (Owner ==: not a valid ClassAd expression; ignored "
        "(no job constraint), as in HTCondor's negotiator",)
    assert any(w.endswith(pool.config.warnings[0]) for w in pool.warnings)   # shown
    assert outcome(run_cycle(pool)) == ([("1.0", N1, 1.0)], [])


@pytest.mark.parametrize("knob", ["NEGOTIATOR_SLOT_POOLSIZE_CONSTRAINT",
                                  "GROUP_DYNAMIC_MACH_CONSTRAINT"])
def test_an_unparsable_poolsize_constraint_is_ignored_with_a_warning(tmp_path, knob):
    """Matchmaker::reinitialize logs "Error parsing <knob> expression" and leaves it unset."""
    slots = [slot(f"slot1@n{i}.test.local") for i in range(3)]
    pool = pool_of(tmp_path, slots=slots, jobs=[job(1, 0, "a")], config=f"{knob} = Cpus >")
    assert pool.config.slot_poolsize_constraint is None
    assert pool.config.warnings == (
        f"{knob} = Cpus >: not a valid ClassAd expression; ignored (no pool-size "
        "constraint), as in HTCondor's negotiator",)
    assert pool.pool_sizes() == (3, 3.0, 3.0)


@pytest.mark.parametrize("force", [False, True])
def test_an_unparsable_slot_weight_leaves_ads_without_slotweight_at_1(tmp_path, force):
    """AssignExpr fails, so the negotiator puts no SlotWeight in any ad: GetSlotWeight
    gives 1.0 to an ad without one, and an ad's own SlotWeight stays even with FORCE."""
    slots = [slot("slot1@n1.test.local", Cpus=4), slot("slot1@n2.test.local", Cpus=4, SlotWeight=3)]
    config = "SLOT_WEIGHT = Cpus *" + ("\nFORCE_NEGOTIATOR_SLOT_WEIGHT = True" if force else "")
    pool = pool_of(tmp_path, slots=slots, jobs=[job(1, 0, "a")], config=config)
    assert [s.weight for s in pool.slots] == [1.0, 3.0]
    assert pool.config.warnings == (
        "SLOT_WEIGHT = Cpus *: not a valid ClassAd expression; ignored: a slot ad without its "
        "own SlotWeight weighs 1.0, as in HTCondor's negotiator",)


def test_unparsable_or_undefined_match_exprs_are_left_out_with_warnings(tmp_path):
    """insertNegotiatorMatchExprs: AssignExpr fails and nothing is inserted;
    reinitialize warns about an undefined macro."""
    config = "NEGOTIATOR_MATCH_EXPRS = Good, Bad Undef\nGood = 3\nBad = a b"
    jobs = [job(1, 0, "a", Requirements=Expr(
        "TARGET.NegotiatorMatchExprGood == 3 && TARGET.NegotiatorMatchExprBad =?= undefined"))]
    pool = pool_of(tmp_path, slots=[slot(N1)], jobs=jobs, config=config)
    assert dict(pool.config.match_exprs) == {"NegotiatorMatchExprGood": "3"}
    assert pool.config.warnings == (
        "NEGOTIATOR_MATCH_EXPRS: Bad = a b: not a valid ClassAd expression; not inserted "
        "into the slot ads, as in HTCondor's negotiator",
        "NEGOTIATOR_MATCH_EXPRS: Undef is not defined; skipped, as in HTCondor's negotiator")
    assert outcome(run_cycle(pool)) == ([("1.0", N1, 1.0)], [])


def test_a_long_match_expr_is_read_whole_from_the_slot_texts(tmp_path):
    """NEGOTIATOR_MATCH_EXPRS inserted into slot ads read with their texts: the text kept
    for the inserted attribute is the whole expression (it was cut at 60 characters, the
    form for messages, and the slots it told apart fell into one class)."""
    long_expr = ('ifThenElse(MY.Tier == 2, "tier-two-slots-for-the-big-jobs", '
                 '"tier-one-slots-for-the-small-jobs")')
    assert len(long_expr) > 60
    slots = [slot(f"slot{i}@n{i}.test.local", Tier=1 if i < 2 else 2) for i in range(4)]
    jobs = [job(1, p, "a", Requirements=Expr(
        'TARGET.NegotiatorMatchExprTierName == "tier-two-slots-for-the-big-jobs"'))
        for p in range(2)]
    config = f"NEGOTIATOR_MATCH_EXPRS = TierName\nTierName = {long_expr}"
    pool = pool_of(tmp_path, slots=slots, jobs=jobs, config=config)
    assert pool.slot_texts                       # read from files: the texts are kept
    matched = sorted(m.slot for m in run_cycle(pool).matches)
    assert matched == ["slot2@n2.test.local", "slot3@n3.test.local"]
