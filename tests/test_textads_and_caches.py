"""Job ads kept as attribute texts (core.adtext, adapters.adfiles) and the caches that
evaluate an expression once per distinct thing it can see (core.matchmaking): each
shortcut must give the answers the plain classad2 path gives."""

from __future__ import annotations

import dataclasses
import json

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from conftest import FIXTURES, SCENARIOS
from negotiator_ext.adapters import classad_semantics
from negotiator_ext.adapters.adfiles import read_ads, read_ads_and_texts, read_text_ads
from negotiator_ext.adapters.condor_config import load_config
from negotiator_ext.core import classads
from negotiator_ext.core.adtext import Job, TextMemo, TextStore, TextValues
from negotiator_ext.core.match_list import REASON_NO_MATCH, REASON_POLICY, Slot
from negotiator_ext.core.matchmaking import Matcher
from negotiator_ext.core.job_queue import job_submitter
from negotiator_ext.cycle import run_cycle
from negotiator_ext.errors import InputError
from negotiator_ext.pool import load_pool
from poolmaker import DOMAIN, SCHEDD_ADDR, Expr, accounting, job, make_pool, slot, submitters_for

OLD_JOBS = """\
# condor_q -long
MyType = "Job"
ClusterId = 1
Owner = "alice"
RequestMemory = 128
// a second value of the same attribute: the last one counts
RequestMemory = 256
Note = "a = b"
Requirements = TARGET.Memory >= RequestMemory
accountingGroup = strcat("grp_", Owner)

MyType = "Job"
ClusterId = 2
AccountingGroup = "physics"
Real = 1.5e3
"""


def cycle(tmp_path, **kw):
    return run_cycle(load_pool(make_pool(tmp_path / "pool", **kw)))


def values_of(ad) -> dict:
    return {k.lower(): classads.eval_attr(ad, k) for k in ad.keys()}


# ---- 1. reading ads as texts -----------------------------------------------------------

def test_rows_hold_lowercase_names_and_exact_texts(tmp_path):
    p = tmp_path / "jobs.ads"
    p.write_text(OLD_JOBS)
    t = read_text_ads(p)
    assert len(t) == 2
    first, second = (dict(row) for row in t.rows)
    assert first["requirements"] == "TARGET.Memory >= RequestMemory"
    assert first["accountinggroup"] == 'strcat("grp_", Owner)'
    assert first["note"] == '"a = b"'                 # split at the first '=' only
    assert first["requestmemory"] == "256"            # a duplicate: the last wins
    assert second == {"mytype": '"Job"', "clusterid": "2", "accountinggroup": '"physics"',
                      "real": "1.5e3"}
    assert all(n == n.lower() for row in t.rows for n, _ in row)
    assert not any(n.startswith(("#", "//")) for row in t.rows for n, _ in row)
    # shared pairs: equal (name, text) pairs are one object across ads
    assert dict(t.rows[0])["mytype"] is dict(t.rows[1])["mytype"]


def test_iterating_text_ads_gives_the_values_read_ads_gives(tmp_path):
    p = tmp_path / "jobs.ads"
    p.write_text(OLD_JOBS)
    t = read_text_ads(p)
    plain = read_ads(p)
    assert [values_of(a) for a in t] == [values_of(a) for a in plain]
    assert values_of(t[0])["requestmemory"] == 256
    assert values_of(t[0])["accountinggroup"] == "grp_alice"
    assert [values_of(a) for a in t[0:2]] == [values_of(a) for a in plain]
    ads, texts = read_ads_and_texts(p)
    assert [values_of(a) for a in ads] == [values_of(a) for a in plain]
    assert texts.rows == t.rows


def test_new_lines_in_known_ads_read_as_classad2_reads_them(tmp_path):
    """A queue's ads whose lines are known but for a few new ones (ProcId and
    GlobalJobId, as condor_q -long prints them), the new ones plain literals or not,
    given twice, or naming an attribute twice: each ad's values are read_ads's."""
    base = ['MyType = "Job"', "ClusterId = 7", 'Owner = "alice"', "RequestMemory = 256"]
    ads = [base + ["ProcId = 0", 'GlobalJobId = "s#7.0#1"'],
           base + ["ProcId = 1", 'GlobalJobId = "s#7.1#1"'],          # plain literals
           base + ["ProcId = 2", "ProcId = 2"],                         # a new line twice
           base + ["ProcId = 3", "ProcId = 4"],                         # a name twice
           base + ['GlobalJobId = "s#7.\\6#1"', "ProcId = 6"],        # a backslash
           base + ["ProcId = 1234567890123456789"],                     # past 18 digits
           base + ["ProcId = 8", 'GlobalJobId = "s#7.8#1"']]
    p = tmp_path / "jobs.ads"
    p.write_text("\n\n".join("\n".join(a) for a in ads) + "\n")
    t = read_text_ads(p)
    plain = read_ads(p)
    assert len(t) == len(plain) == len(ads)
    assert [values_of(a) for a in t] == [values_of(a) for a in plain]
    assert values_of(t[3])["procid"] == 4             # a name given twice: the last
    assert all(len({n for n, _ in row}) == len(row) for row in t.rows)
    # a new line that only looks plain is still read by classad2, and refused as read_ads
    # refuses it, with its line
    p.write_text("\n\n".join("\n".join(a) for a in ads[:2] + [base + ["ProcId = 05"]]))
    with pytest.raises(InputError, match="line 19: ad 3: attribute ProcId") as got:
        read_text_ads(p)
    with pytest.raises(InputError) as plain_got:
        read_ads(p)
    assert got.value.one_line() == plain_got.value.one_line()


def test_names_keep_their_first_spelling_across_files(tmp_path):
    (tmp_path / "a.ads").write_text(OLD_JOBS)
    (tmp_path / "b.ads").write_text('ACCOUNTINGGROUP = "x"\nrequestMEMORY = 1\nNewOne = 2\n')
    store = TextStore()
    read_text_ads(tmp_path / "a.ads", store)
    b = read_text_ads(tmp_path / "b.ads", store)
    assert store.names["accountinggroup"] == "accountingGroup"
    assert store.names["requestmemory"] == "RequestMemory"
    assert store.names["newone"] == "NewOne"
    assert [n for n, _ in b.rows[0]] == ["accountinggroup", "requestmemory", "newone"]


def test_malformed_line_names_file_and_line_as_read_ads_does(tmp_path):
    p = tmp_path / "jobs.ads"
    p.write_text('A = 1\n\nGlobalJobId = "s#1.0#1"\nB = 2\nA = (1 +\nC = 3\n')
    with pytest.raises(InputError) as plain:
        read_ads(p)
    with pytest.raises(InputError) as text:
        read_text_ads(p)
    assert str(text.value) == str(plain.value)
    e = text.value
    assert (e.source, e.line, e.attribute) == (str(p), 5, "A")
    assert e.ad.startswith("2")


def test_json_file_gives_the_texts_of_its_old_syntax_twin(tmp_path):
    old = tmp_path / "jobs.ads"
    old.write_text('ClusterId = 1\nOwner = "alice"\nRequestMemory = 256\nReal = 1.5\n'
                   'Flag = true\nRequirements = TARGET.Memory >= RequestMemory\n')
    doc = [{"ClusterId": 1, "Owner": "alice", "RequestMemory": 256, "Real": 1.5, "Flag": True,
            "Requirements": "/Expr(TARGET.Memory >= RequestMemory)/"}]
    js = tmp_path / "jobs.json"
    js.write_text(json.dumps(doc, indent=1).replace("/", "\\/"))    # condor_q -json escapes
    assert '"\\/Expr(' in js.read_text()
    t_old, t_js = read_text_ads(old), read_text_ads(js)
    assert dict(t_js.rows[0]) == dict(t_old.rows[0])
    assert [values_of(a) for a in t_js] == [values_of(a) for a in t_old]
    assert t_js.store.names["requestmemory"] == "RequestMemory"


# ---- 2. literal texts and the names a text mentions ------------------------------------

@pytest.mark.parametrize("text, value", [
    ("42", 42), ("-3", -3), ("1.5", 1.5), ("1.5e3", 1500.0), ('"x y"', "x y"),
    ("true", True), ("FALSE", False), ("1 + 2", 3), ('strcat("a", "b")', "ab"),
])
def test_literal_texts_give_their_value(text, value):
    lit, v = TextValues().literal(text)
    assert lit is True and v == value and type(v) is type(value)


def test_undefined_literal():
    assert TextValues().literal("undefined") == (True, classads.UNDEFINED)


@pytest.mark.parametrize("text", ["RequestMemory * 2", "TARGET.Cpus", "MY.Owner",
                                  'strcat("grp_", Owner)', "x =?= undefined"])
def test_texts_naming_attributes_are_not_literals(text):
    assert TextValues().literal(text) == (False, None)


def test_unparsable_text_is_error():
    v = TextValues()
    assert v.literal("(1 +") == (True, classads.ERROR)
    assert v.names("(1 +") == frozenset()


def test_names_lowercase_drop_my_keep_target():
    v = TextValues()
    assert v.names("MY.RequestMemory * 2 + TARGET.Memory + Cpus") == \
        {"requestmemory", "target.memory", "cpus"}
    for lit in ("1", '"x"', "true", "undefined", "1 + 2"):
        assert v.names(lit) == frozenset()        # in particular no "" for a literal


# ---- 3. Job.value and the memo of the schedd's rules -----------------------------------

def job_of(values: TextValues, **texts) -> Job:
    row = tuple((k.lower(), t) for k, t in texts.items())
    return Job(row, {k.lower(): k for k in texts}, values)


def test_job_value_evaluates_an_expression_in_the_job():
    values = TextValues()
    j = job_of(values, Owner='"alice"', User='"u@test.local"',
               AccountingGroup='strcat("grp_", Owner)', RequestMemory="256",
               Twice="RequestMemory * 2")
    assert j.value("accountinggroup") == "grp_alice"
    assert j.value("twice") == 512
    assert j.value("requestmemory") == 256
    assert j.value("nosuch") is classads.UNDEFINED
    assert job_submitter(j) == "grp_alice@test.local"


def test_text_memo_is_not_reused_for_non_literal_texts():
    values = TextValues()
    memo = TextMemo(job_submitter, ("user", "accountinggroup"), values)
    common = dict(User='"u@test.local"', AccountingGroup='strcat("grp_", Owner)')
    a = job_of(values, Owner='"alice"', **common)
    b = job_of(values, Owner='"bob"', **common)
    assert memo(a) == "grp_alice@test.local"
    assert memo(b) == "grp_bob@test.local"
    assert memo(a) == "grp_alice@test.local"


def test_text_memo_reuses_literal_texts():
    values = TextValues()
    calls = []
    memo = TextMemo(lambda j: calls.append(1) or job_submitter(j), ("user", "accountinggroup"),
                    values)
    a = job_of(values, User='"alice@test.local"', Owner='"alice"')
    b = job_of(values, User='"alice@test.local"', Owner='"other"')
    assert memo(a) == memo(b) == "alice@test.local"
    assert len(calls) == 1


def test_job_value_of_a_string_with_a_backslash_matches_read_ads(tmp_path):
    """Texts are old ClassAd syntax, where a backslash in a string is a plain character
    (not an escape): Job.value must read them as the job's own ad does."""
    p = tmp_path / "jobs.ads"
    p.write_text('User = "alice@test.local"\nAccountingGroup = "grp\\tx"\n'
                 'Cmd = "C:\\new\\b"\nQ = "say \\"hi\\""\n')
    plain = read_ads(p)[0]
    assert plain["AccountingGroup"] == "grp\\tx" and plain["Q"] == 'say "hi"'
    t = read_text_ads(p)
    j = Job(t.rows[0], t.store.names, TextValues())
    for name in ("AccountingGroup", "Cmd", "Q"):
        assert j.value(name.lower()) == plain[name]
    assert job_submitter(j) == "grp\\tx@test.local"


def test_backslash_in_accounting_group_still_negotiates(tmp_path):
    """The job's submitter (from its texts) is its submitter ad's Name (read_ads)."""
    jobs = [job(1, 0, "a", AccountingGroup="grp\\tx")]
    subs = submitters_for(jobs)
    assert subs[0]["Name"] == f"grp\\tx@{DOMAIN}"
    r = cycle(tmp_path, slots=[slot("slot1@n1.test.local")], jobs=jobs, submitters=subs)
    assert [m.submitter for m in r.matches] == [f"grp\\tx@{DOMAIN}"]


# ---- 4. what expressions can see of a job: Matcher.job_key -----------------------------

@pytest.fixture
def matcher():
    classad_semantics.enable()
    m = Matcher(load_config(None), lambda n: True)
    ad = classads.parse_old_ad('Name = "slot1@n"\nMemory = 2048\nCpus = 1\nRank = 0\n'
                               'CurrentRank = 0\nSTART = TARGET.RequestMemory <= Memory\n'
                               'Requirements = START')
    m.scan_slot(Slot(index=0, ad=ad, name="slot1@n", weight=1.0,
                     usage=None))
    assert "requestmemory" in m.job_names_seen_by_slots
    return m


BASE = {"requirements": "TARGET.Memory >= MyAttr", "myattr": "OtherAttr * 2",
        "otherattr": "100", "requestmemory": "128", "clusterid": "1", "unused": "1"}


def test_job_key_ignores_attributes_nothing_reaches(matcher):
    a = matcher.job_key(dict(BASE))
    b = matcher.job_key(dict(BASE, unused="2", clusterid="7", newattr='"x"'))
    assert a is b


def test_job_key_follows_a_chain_of_job_attributes(matcher):
    a = matcher.job_key(dict(BASE))
    b = matcher.job_key(dict(BASE, otherattr="5000"))      # same MyAttr text
    assert a != b
    assert matcher.job_key(dict(BASE, otherattr="100")) is a
    assert "otherattr" in a[0][0] and "unused" not in a[0][0]


def test_job_key_sees_what_slots_reach_and_what_requirements_need(matcher):
    a = matcher.job_key(dict(BASE))
    assert matcher.job_key(dict(BASE, requestmemory="4096")) != a    # slot START sees it
    # a name the job's Requirements look up in the slot (TARGET.x, or one the job lacks)
    c = matcher.job_key(dict(BASE, requirements="Disk > 5 && TARGET.Arch == \"X\""))
    assert {"disk", "arch"} <= c[2] and c[2] <= c[1]


def test_chained_attribute_splits_autoclusters_and_decisions(tmp_path):
    slots = [slot(f"slot1@n{i}.test.local", Memory=1000) for i in range(3)]
    req = Expr("TARGET.Memory >= MyAttr")
    jobs = [job(1, p, "a", Requirements=req, MyAttr=Expr("OtherAttr * 2"), OtherAttr=v)
            for p, v in enumerate([100, 100, 5000, 200])]
    doc = cycle(tmp_path, slots=slots, jobs=jobs).to_json()
    ac = {m["job"]: m["autocluster"] for m in doc["matches"]}
    assert set(ac) == {"1.0", "1.3"}                     # 1.1 shares 1.0's request
    assert ac["1.0"] != ac["1.3"]
    assert [(x["job"], x["reason"]) for x in doc["rejections"]] == [("1.2", REASON_NO_MATCH)]
    assert doc["rejections"][0]["autocluster"] not in ac.values()


@pytest.mark.parametrize("order", [(50, 4096), (4096, 50)])
def test_slot_attribute_reached_back_through_a_job_attribute(tmp_path, order):
    """START = TARGET.Wants, Wants = TARGET.Memory > 100: Memory tells the slots apart."""
    slots = [slot(f"slot1@m{mem}.test.local", Memory=mem, START=Expr("TARGET.Wants"))
             for mem in order]
    jobs = [job(1, p, "a", Requirements=Expr("true"), Wants=Expr("TARGET.Memory > 100"))
            for p in range(2)]
    r = cycle(tmp_path, slots=slots, jobs=jobs)
    assert [(m.assigned_job, m.slot) for m in r.matches] == [("1.0", "slot1@m4096.test.local")]
    assert [(x.job, x.reason) for x in r.rejections] == [("1.0", REASON_NO_MATCH)]


def test_slot_attribute_reached_by_job_requirements_too(tmp_path):
    """The same pool when the job's own Requirements name TARGET.Memory as well."""
    slots = [slot(f"slot1@m{mem}.test.local", Memory=mem, START=Expr("TARGET.Wants"))
             for mem in (50, 4096)]
    jobs = [job(1, p, "a", Requirements=Expr("TARGET.Memory > 0"),
                Wants=Expr("TARGET.Memory > 100")) for p in range(2)]
    r = cycle(tmp_path, slots=slots, jobs=jobs)
    assert [(m.assigned_job, m.slot) for m in r.matches] == [("1.0", "slot1@m4096.test.local")]


# ---- 5. slot texts are a shortcut only ---------------------------------------------------

def decisions(r):
    return ([(m.job, m.assigned_job, m.slot, m.submitter, m.state, m.cost, m.preempting)
             for m in r.matches],
            [(x.job, x.submitter, x.reason, x.autocluster) for x in r.rejections])


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_fixture_decisions_do_not_depend_on_slot_texts(scenario):
    pool = load_pool(FIXTURES / scenario)
    assert pool.slot_texts and all(row is not None for row in pool.slot_texts)
    with_texts = run_cycle(pool)
    without = run_cycle(dataclasses.replace(load_pool(FIXTURES / scenario), slot_texts=()))
    assert with_texts.matches
    assert decisions(with_texts) == decisions(without)


# ---- 6. names every slot has the same literal for ---------------------------------------

def test_uniform_slot_attribute_in_requirements(tmp_path):
    slots = [slot(f"slot1@n{i}.test.local") for i in range(3)]          # Arch X86_64 all
    arm = Expr('TARGET.Arch == "ARM" && TARGET.Memory >= RequestMemory')
    x86 = Expr('TARGET.Arch == "X86_64" && TARGET.Memory >= RequestMemory')
    jobs = [job(1, 0, "a", Requirements=arm), job(2, 0, "a", Requirements=x86),
            job(3, 0, "a", Requirements=Expr("TARGET.Memory >= RequestMemory"))]
    r = cycle(tmp_path, slots=slots, jobs=jobs)
    assert sorted(m.job for m in r.matches) == ["2.0", "3.0"]
    assert [(x.job, x.reason) for x in r.rejections] == [("1.0", REASON_NO_MATCH)]


def test_one_slot_with_a_different_value(tmp_path):
    slots = [slot(f"slot1@n{i}.test.local", Memory=4096 - i) for i in range(4)]
    slots.append(slot("slot1@arm.test.local", Arch="ARM", Memory=100))
    arm = Expr('TARGET.Arch == "ARM"')
    jobs = ([job(1, p, "a", Requirements=arm) for p in range(2)]
            + [job(2, p, "a") for p in range(2)])
    r = cycle(tmp_path, slots=slots, jobs=jobs)
    got = {m.assigned_job: m.slot for m in r.matches}
    assert sorted(got) == ["1.0", "2.0", "2.1"]          # 1.1: the ARM slot is taken
    assert got["1.0"] == "slot1@arm.test.local"
    assert "slot1@arm.test.local" not in {got["2.0"], got["2.1"]}
    # the rest of 1.0's request (1.1) is rejected under the request's first job
    assert [(x.job, x.reason) for x in r.rejections] == [("1.0", REASON_NO_MATCH)]


def test_odd_value_on_a_consumption_policy_pslot(tmp_path):
    """Consumption-policy p-slots are left out of the uniformity test: an attribute only
    such a p-slot has a different value for still decides its matches."""
    cp = slot("slot1@arm.test.local", Arch="ARM", PartitionableSlot=True, Cpus=4,
              Memory=4096, MachineResources="Cpus Memory", SlotWeight=Expr("Cpus"),
              ConsumptionCpus=Expr("TARGET.RequestCpus"),
              ConsumptionMemory=Expr("TARGET.RequestMemory"))
    slots = [slot(f"slot1@n{i}.test.local") for i in range(2)] + [cp]
    jobs = [job(1, p, "a", Requirements=Expr('TARGET.Arch == "ARM"')) for p in range(3)]
    jobs.append(job(2, 0, "a"))
    r = cycle(tmp_path, slots=slots, jobs=jobs)
    got = {m.assigned_job: m.slot for m in r.matches}
    assert {got[f"1.{p}"] for p in range(3)} == {"slot1@arm.test.local"}
    assert got["2.0"] != "slot1@arm.test.local" and not r.rejections


# ---- 7. claimed slots nothing can take, and the rejection reason --------------------------

def claimed(n: int, user: str, **attrs) -> list[dict]:
    return [slot(f"slot1@c{i}.test.local", State="Claimed", Activity="Busy",
                 AccountingGroup=f"{user}@{DOMAIN}", RemoteUser=f"{user}@{DOMAIN}", **attrs)
            for i in range(n)]


def held_cycle(tmp_path, held, holder, jobs=None, config=""):
    """`held` claimed slots, plus unclaimed ones too small for any job (so the pool is
    big enough that the submitter's limit is not what stops it)."""
    slots = held + [slot(f"slot1@tiny{i}.test.local", Memory=1) for i in range(4)]
    jobs = jobs or [job(1, 0, "a"), job(1, 1, "a")]
    subs = submitters_for(jobs, running={f"{holder}@{DOMAIN}": len(held)})
    acc = [accounting(f"a@{DOMAIN}", 500.0), accounting(f"b@{DOMAIN}", 50000.0)]
    r = cycle(tmp_path, slots=slots, jobs=jobs, submitters=subs, accounting_ads=acc,
              config=config)
    assert r.matches == []
    assert all(x.limit > 0 for x in r.limits if x.submitter == f"a@{DOMAIN}")
    return sorted((x.job, x.reason) for x in r.rejections)


def test_slots_claimed_by_another_user_give_the_policy_reason(tmp_path):
    # PREEMPTION_REQUIREMENTS left at its default (False)
    got = held_cycle(tmp_path, claimed(2, "b"), "b",
                     config="NEGOTIATOR_CONSIDER_PREEMPTION = True")
    assert got == [("1.0", REASON_POLICY)]


def test_slots_claimed_by_the_same_submitter_give_no_match(tmp_path):
    assert held_cycle(tmp_path, claimed(2, "a"), "a") == [("1.0", REASON_NO_MATCH)]


def test_claimed_slots_that_do_not_match_give_no_match(tmp_path):
    assert held_cycle(tmp_path, claimed(2, "b", Memory=1), "b") == [("1.0", REASON_NO_MATCH)]


def test_policy_reason_per_request_in_one_cycle(tmp_path):
    """Two requests of one submitter see the same held slots: only the one whose
    Requirements match them is refused by policy."""
    jobs = [job(1, 0, "a"), job(2, 0, "a", RequestMemory=999999)]
    assert held_cycle(tmp_path, claimed(2, "b"), "b", jobs=jobs) == [
        ("1.0", REASON_POLICY), ("2.0", REASON_NO_MATCH)]


# ---- 8. which schedd a job is queued at -------------------------------------------------

def two_schedd_pool(tmp_path, meta_extra=None):
    jobs = [job(12, 0, "a", GlobalJobId="s1.example#12.0#123"),
            job(3, 0, "b", GlobalJobId="s2.example#3.0#99")]
    subs = [{"MyType": "Submitter", "Name": f"{u}@{DOMAIN}", "ScheddName": s,
             "ScheddIpAddr": SCHEDD_ADDR, "IdleJobs": 1, "RunningJobs": 0,
             "LastHeardFrom": 1000}
            for u, s in (("a", "s1.example"), ("b", "s2.example"), ("a", "s3.example"),
                         ("b", "s3.example"))]
    d = make_pool(tmp_path / "pool", slots=[slot(f"slot1@n{i}.test.local") for i in range(4)],
                  jobs=jobs, submitters=subs,
                  accounting_ads=[accounting(f"a@{DOMAIN}"), accounting(f"b@{DOMAIN}")])
    if meta_extra:
        meta = json.loads((d / "meta.json").read_text())
        meta.update(meta_extra)
        (d / "meta.json").write_text(json.dumps(meta))
    return run_cycle(load_pool(d)).to_json()


def test_schedd_from_global_job_id(tmp_path):
    doc = two_schedd_pool(tmp_path)
    assert sorted((m["job"], m["schedd"], m["submitter"]) for m in doc["matches"]) == [
        ("12.0", "s1.example", f"a@{DOMAIN}"), ("3.0", "s2.example", f"b@{DOMAIN}")]


def test_meta_schedd_files_overrides_global_job_id(tmp_path):
    doc = two_schedd_pool(tmp_path, {"schedd_files": {"jobs.ads": "s3.example"}})
    assert sorted((m["job"], m["schedd"], m["submitter"]) for m in doc["matches"]) == [
        ("12.0", "s3.example", f"a@{DOMAIN}"), ("3.0", "s3.example", f"b@{DOMAIN}")]


def test_slot_job_slot_job_chain_reaches_a_fixed_point(tmp_path):
    """START = TARGET.Wants; the job's Wants = TARGET.Fits; the slot's Fits =
    TARGET.Need <= Memory; the job's Need differs between two clusters: jobs differ in
    Need only, so only a key that follows the whole chain tells them apart."""
    slots = [slot("slot1@m1.test.local", Memory=1000, START=Expr("TARGET.Wants"),
                  Fits=Expr("TARGET.Need <= MY.Memory"))]
    jobs = [job(1, 0, "a", Requirements=Expr("true"), Wants=Expr("TARGET.Fits"), Need=5000),
            job(2, 0, "a", Requirements=Expr("true"), Wants=Expr("TARGET.Fits"), Need=500)]
    r = cycle(tmp_path, slots=slots, jobs=jobs)
    assert [(m.assigned_job, m.slot) for m in r.matches] == [("2.0", "slot1@m1.test.local")]
    assert [(x.job, x.reason) for x in r.rejections] == [("1.0", REASON_NO_MATCH)]


def test_slot_class_walk_skips_the_removed_front_once_and_reads_like_a_list_iterator():
    from types import SimpleNamespace
    from negotiator_ext.core.match_list import SlotClass
    slots = [SimpleNamespace(n=i, removed=False) for i in range(6)]
    cls = SlotClass(("k",), slots[0], 1)
    cls.members.extend(slots)
    first = cls.walk()
    assert next(first).n == 0
    for s in slots[:4]:
        s.removed = True                    # matched by other requests meanwhile
    # the same live members as a list iterator would give
    assert [s.n for s in first if not s.removed] == [4, 5]
    # a walk that passes the removed front moves the class's start over it ...
    assert [s.n for s in cls.walk() if not s.removed] == [4, 5] and cls.start == 4
    # ... and every walk after it starts there, without looking at them
    assert [s.n for s in cls.walk()] == [4, 5]
    # a member removed from the list (a consumption-policy p-slot re-profiled) moves the
    # indices: start goes back to 0, and the walk is a list iterator's again
    cls.remove(slots[4])
    assert cls.start == 0
    assert [s.n for s in cls.walk() if not s.removed] == [5]


@pytest.mark.parametrize("text", ["0", "7", "158", "123456789012345678", "007", "-5", "1e3",
                                  "1234567890123456789", "12 ", "١٢"])
def test_plain_integer_texts_read_as_classad2_reads_them(text):
    # decimal integers skip classad2's parser: the value must be the parser's
    from negotiator_ext.core import classads
    from negotiator_ext.core.adtext import TextValues
    values = TextValues()
    try:
        want = (True, classads.eval_expr(classads.parse_old_value(text)))
    except ValueError:
        want = (True, classads.ERROR)
    got = values.literal(text)
    assert got == want and type(got[1]) is type(want[1])
    assert values.names(text) == frozenset()


# ({q}: a plain value in some jobs of a cluster, an unparsable one in others)
_PROC_LINES = st.sampled_from(["ProcId = {p}", "ProcId = {p} + 0", "ProcId = 0{p}",
                               "ProcId = ", "ProcId = {p}", "ProcId = {q}"])
_GJID_LINES = st.sampled_from(['GlobalJobId = "s#7.{p}#1"', 'GlobalJobId = "a\\"{p}"',
                               'GlobalJobId = "s#7.{p}#1"', "GlobalJobId = {p}"])
_OTHER_LINES = st.sampled_from([
    'Args = "-n {p}"', 'Cmd = "/bin/x"', "RequestCpus = 1", "JobPrio = {p}", "ProcId = {p}",
    "# a comment", "Requirements = TARGET.Cpus > {p}", "procid = 3", "Owner = ", "",
])
_RUN_SHAPE = st.tuples(_PROC_LINES, _GJID_LINES, st.lists(_OTHER_LINES, max_size=3),
                       st.permutations(range(5)))


@settings(max_examples=80, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(shapes=st.lists(_RUN_SHAPE, min_size=1, max_size=3),
       procs=st.lists(st.integers(0, 2), min_size=2, max_size=12))
def test_a_cluster_read_as_a_run_reads_as_each_job_alone(tmp_path, monkeypatch, shapes,
                                                        procs):
    """Jobs of a cluster, in a row as condor_q prints them: read as the last job with its
    own ProcId and GlobalJobId (adfiles._own_values), each row, name and error is what
    reading every job on its own gives."""
    ads = []
    for n, p in enumerate(procs):
        proc, gjid, others, order = shapes[p % len(shapes)]
        lines = ["ClusterId = 7", 'MyType = "Job"', proc, gjid, *others]
        lines = [lines[i] for i in order if i < len(lines)] + lines[5:]
        q = f"({n}" if n % 3 == 2 else n
        ads.append("\n".join(ln.format(p=n, q=q) for ln in lines))
    path = tmp_path / "jobs.ads"
    path.write_text("\n\n".join(ads) + "\n")

    def read():
        try:
            t = read_text_ads(path)
        except InputError as exc:
            return exc.one_line()
        return [tuple(r) for r in t.rows], list(t.store.names.items())

    got = read()
    from negotiator_ext.adapters import adfiles
    with monkeypatch.context() as m:        # (this example only)
        m.setattr(adfiles, "_own_values", lambda block: None)
        assert got == read()


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.characters(blacklist_characters='"\\\n\r', blacklist_categories=("Cs",)),
               max_size=40))
def test_a_plain_string_literal_is_read_as_classad2_reads_it(body):
    """TextValues reads a string literal with no escape without classad2's parser (the
    text between the quotes): the value classad2 gives the same text, and no names."""
    text = f'"{body}"'
    values = TextValues()
    try:
        want = classads.eval_expr(classads.parse_old_value(text))
    except ValueError:
        return                              # (a text classad2 refuses: not asked here)
    assert values.literal(text) == (True, want)
    assert values.names(text) == frozenset()


def test_a_slot_view_evaluates_an_attribute_in_its_ad_once(monkeypatch):
    """AdView: a literal is read from its text; anything else is evaluated once for
    the view's life, whatever the spelling of the name (the pool reads SlotWeight and
    Cpus for its checks and again for the slot's usage and size): in an ad of the
    texts in its reach, not in the ad itself (which may not be parsed yet)."""
    from negotiator_ext.core import adtext, classads as ca
    ad = ca.parse_old_ad('Name = "s1@n"\nCpus = 4\nSlotWeight = Cpus * 2\nBroken = 1 / 0')
    texts = {n.lower(): t for n, t in ca.attribute_texts(ad)}
    calls = []
    real = ca.eval_attr
    monkeypatch.setattr(ca, "eval_attr", lambda a, n: calls.append((a, n)) or real(a, n))
    view = adtext.AdView(ad, texts, adtext.TextValues())
    assert view.value("SlotWeight") == 8 and view.value("slotweight") == 8
    assert view.value("Cpus") == 4 and view.value("Name") == "s1@n"
    assert view.value("Broken") is ca.ERROR and view.value("BROKEN") is ca.ERROR
    assert view.value("Missing") is ca.UNDEFINED
    assert [n for _, n in calls] == ["slotweight", "broken"]
    assert all(a is not ad for a, _ in calls)
    # a text that calls a function is evaluated in the ad itself
    ad["Later"] = ca.parse_expr("time() > 0")
    texts["later"] = "time() > 0"
    assert view.value("Later") is True and calls[-1] == (ad, "Later")
