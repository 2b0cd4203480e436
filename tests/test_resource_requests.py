"""Capturing a schedd by its resource requests (adapters/resource_requests.py): each job
put back together from its autocluster's significant attributes and its own, against
the same jobs queried whole; every way of falling back to the whole queue.

The fake schedd here keeps autoclusters as a schedd does (schedd/autocluster.cpp): one
id per distinct signature (the values of the significant attributes, with the job
attributes those values reference), never reused; a job whose significant attribute
changed has no AutoClusterId until the schedd works it out again. Beside a real schedd:
tests/test_live_requests.py."""

from __future__ import annotations

import json

import classad2
import htcondor2
import pytest
from hypothesis import given, settings, strategies as st

from negotiator_ext.adapters import answers, job_projection, schedd_query
from negotiator_ext.adapters.adfiles import _split_line
from negotiator_ext.adapters.live import capture_snapshot
from negotiator_ext.adapters.resource_requests import (
    LEFT_OUT, autocluster_lines, job_lines_by_requests, kept_attributes)
from negotiator_ext.cycle import run_cycle
from negotiator_ext.pool import load_pool

from fakepool import FakePool, restrict

NOW = 1795265300
SIG = ["Requirements", "Rank", "RequestCpus", "RequestMemory", "ConcurrencyLimits", "Site"]


class ScheddWithAutoclusters:
    """A schedd's job queries and its autocluster query over `jobs` (ClassAds)."""

    def __init__(self, jobs, significant=SIG, groups=True):
        self.jobs = jobs
        self.groups = groups
        # a test's say: `before(constraint, opts)` is called before each answer, and
        # what it returns, when not None, is the answer; `after(ads)` may change the
        # autocluster answer
        self.before = self.after = None
        self.significant = list(significant)
        self.ids: dict[str, int] = {}
        self.queries: list[tuple] = []
        for job in jobs:
            self.cluster(job)

    def _signature(self, job) -> str:
        names = list(self.significant)
        for attr in self.significant:
            expr = job.lookup(attr) if attr in job else None
            if expr is not None and not isinstance(expr, (int, float, str, bool)):
                for ref in job.internalRefs(expr):
                    if ref.lower() not in {n.lower() for n in names}:
                        names.append(ref)
        return "\n".join(f"{n} = {job.lookup(n) if n in job else ''}" for n in names)

    def cluster(self, job) -> None:
        """Work out the job's autocluster (as the schedd does before it negotiates), and
        name the attributes of its signature (those referenced added) in the job."""
        sig = self._signature(job)
        job["AutoClusterId"] = self.ids.setdefault(sig, len(self.ids) + 1)
        job["AutoClusterAttrs"] = ",".join(line.split(" = ")[0] for line in sig.split("\n"))

    def edit(self, job, attr, value) -> None:
        """condor_qedit: a significant attribute changed, the id is gone."""
        job[attr] = value
        if attr.lower() in {a.lower() for a in self.significant}:
            del job["AutoClusterId"], job["AutoClusterAttrs"]

    def query(self, constraint="true", projection=(), callback=None, limit=-1,
              opts=htcondor2.QueryOpt.Default):
        self.queries.append((str(constraint), list(projection), int(opts)))
        if self.before is not None:
            got = self.before(str(constraint), opts)
            if got is not None:
                return got
        if opts == htcondor2.QueryOpt.AutoCluster:
            out = []
            for sig, acid in self.ids.items():
                members = [j for j in self.jobs if j.get("AutoClusterId") == acid]
                ad = classad2.ClassAd()
                for line in sig.split("\n"):
                    name, _, text = line.partition(" = ")
                    if text:
                        ad[name] = classad2.ExprTree(text)
                ad["AutoClusterId"], ad["JobCount"] = acid, len(members)
                ad["JobIds"] = " ".join(f"{j['ClusterId']}.{j['ProcId']}" for j in members[:1])
                out.append(ad)
            if self.after is not None:
                self.after(out)
            return out
        cons = classad2.ExprTree(str(constraint))
        if opts == htcondor2.QueryOpt.GroupBy and self.groups:
            # one ad per distinct set of values of the projection (the constraint is
            # tested on what the group keeps), with JobCount and the first and last id
            # (the bindings ask for two: "first ... last")
            groups: dict[str, list] = {}
            for j in self.jobs:
                kept = restrict(j, projection)
                if cons.eval(kept) is True:
                    groups.setdefault(kept.printOld(), []).append(j)
            out = []
            for n, (text, members) in enumerate(groups.items(), start=1):
                ad = classad2.parseOne(text, classad2.ParserType.Old)
                ids = sorted((j["ClusterId"], j["ProcId"]) for j in members)
                shown = [f"{c}.{p}" for c, p in ids]
                ad["Id"], ad["JobCount"] = n, len(ids)
                ad["JobIds"] = " ".join(shown if len(shown) < 3 else [shown[0], "...", shown[-1]])
                out.append(ad)
            return out
        if opts == htcondor2.QueryOpt.GroupBy:
            raise RuntimeError("this schedd does not group")
        return [restrict(j, projection) for j in self.jobs if cons.eval(j) is True]


def job(cluster, proc, **attrs):
    ad = classad2.ClassAd({
        "ClusterId": cluster, "ProcId": proc, "JobStatus": 1, "JobUniverse": 5,
        "Owner": "alice", "User": "alice@example.org", "GlobalJobId": f"s#{cluster}.{proc}#1",
        "MyType": "Job", "TargetType": "Machine", "QDate": 1000 + cluster,
        "EnteredCurrentStatus": 1000 + cluster, "JobPrio": 0, "ImageSize": 10 + proc,
        "RequestCpus": 1, "RequestMemory": 64, "Rank": 0.0,
        "Requirements": classad2.ExprTree("TARGET.Memory >= RequestMemory")})
    for k, v in attrs.items():
        ad[k] = v
    return ad


PROJECTION = job_projection.projection_of({"Site", "KFlops"})


def by_requests(schedd, projection=PROJECTION, refs=("Site",), shared=None):
    whole_calls = []

    def whole(constraint):
        whole_calls.append(constraint)
        return schedd_query._whole_job_lines(schedd, "s", constraint, projection, {}, lambda _: None, {})
    got = job_lines_by_requests(
        htcondor2, schedd, constraint=schedd_query.JOB_CONSTRAINT,
        kept=kept_attributes(projection, refs), shared={} if shared is None else shared,
        checked=answers.checked_job_ads, whole=whole, missing_refs=job_projection.job_refs_missing_in_lines,
        lap=lambda _: None)
    return got, whole_calls


def as_dicts(rows):
    return [{_split_line(ln)[0].lower(): _split_line(ln)[1] for ln in r} for r in rows]


def whole_lines(schedd, projection=PROJECTION):
    """The jobs as a capture queries them whole (with the second query for attributes
    their own expressions reference)."""
    return schedd_query._whole_job_lines(schedd, "s", schedd_query.JOB_CONSTRAINT, projection, {},
                                 lambda _: None, {})


def assert_same_but_left_out(rows, schedd, projection=PROJECTION, refs=("Site",)):
    """Each job's lines as the whole query gives them, less what a request capture
    leaves out (and the attributes named in another case by the autocluster)."""
    left_out = {a.lower() for a in LEFT_OUT} - {r.lower() for r in refs}
    whole = {(j["ClusterId"], j["ProcId"]) for j in schedd.jobs if "AutoClusterId" not in j}
    want = [d if (int(d["clusterid"]), int(d["procid"])) in whole else
            {k: v for k, v in d.items() if k not in left_out}
            for d in as_dicts(whole_lines(schedd, projection))]
    assert as_dicts(rows) == want


def test_jobs_put_back_together_are_the_whole_jobs_less_what_is_left_out():
    jobs = [job(1, p, User=f"u{p % 3}@example.org", RequestMemory=64 * (1 + p % 2),
                Site="a" if p < 4 else "b") for p in range(8)]
    jobs.append(job(2, 0, Requirements=classad2.ExprTree("MY.Wanted > 1 && TARGET.Cpus > 0"),
                    Wanted=3))
    schedd = ScheddWithAutoclusters(jobs)
    (rows, stats), whole_calls = by_requests(schedd)
    queries = list(schedd.queries)
    # (users alternate from job to job: each job is a run of its own)
    assert stats == {"autoclusters": 5, "job_runs": 9, "jobs_by_request": 9, "jobs_whole": 0}
    assert whole_calls == []
    assert_same_but_left_out(rows, schedd)
    # the job's own Requirements references Wanted: the schedd adds it to the signature
    assert 'Wanted = 3' in rows[-1]
    # each job's own attributes were asked, not the significant ones
    (_, asked, _), = [q for q in queries if q[2] == int(htcondor2.QueryOpt.GroupBy)]
    assert {"clusterid", "user", "autoclusterid"} <= {a.lower() for a in asked}
    assert not {"procid", "requestmemory", "requirements", "site", "globaljobid", "owner"} & {
        a.lower() for a in asked}


def queue_of_runs():
    """Three users' clusters, each in runs of alike jobs (as `queue N` statements make
    them), one run of cluster 2 broken by a job of another autocluster."""
    jobs = []
    for p in range(30):
        jobs.append(job(1, p, User=f"u{p // 10}@example.org", RequestMemory=64 + p // 10))
    for p in range(7):
        jobs.append(job(2, p, User="v@example.org", RequestMemory=128 if p != 3 else 256))
    return jobs


def test_runs_of_alike_jobs_come_from_one_group_query():
    schedd = ScheddWithAutoclusters(queue_of_runs())
    (rows, stats), whole_calls = by_requests(schedd)
    queries = list(schedd.queries)
    # cluster 1: three runs of ten; cluster 2 is not all runs (2.3 splits its run of
    # 128 MB jobs in two: one group, not consecutive ids): asked job by job
    assert stats == {"autoclusters": 5, "job_runs": 3, "jobs_by_request": 37, "jobs_whole": 0}
    assert [q[2] for q in queries] == [int(htcondor2.QueryOpt.AutoCluster),
                                       int(htcondor2.QueryOpt.GroupBy), 0]
    assert "member(ClusterId, {2})" in queries[2][0]
    assert whole_calls == []
    assert_same_but_left_out(rows, schedd)
    # a schedd that does not group: the same jobs, each asked one by one
    alone = ScheddWithAutoclusters(queue_of_runs(), groups=False)
    (rows2, stats2), _ = by_requests(alone)
    assert as_dicts(rows2) == as_dicts(rows) and stats2["job_runs"] == 0


@pytest.mark.parametrize("answer", [
    "garbage", [1], [classad2.ClassAd({"JobCount": 3, "JobIds": "1.0 ... 1.2"})],
    [classad2.ClassAd({"ClusterId": "1", "JobCount": 3, "JobIds": "1.0 ... 1.2"})],
])
def test_a_group_answer_that_is_not_groups_means_every_job_one_by_one(answer):
    schedd = ScheddWithAutoclusters(queue_of_runs())
    schedd.before = lambda constraint, opts: answer if opts == htcondor2.QueryOpt.GroupBy \
        else None
    (rows, stats), _ = by_requests(schedd)
    assert stats["job_runs"] == 0 and stats["jobs_by_request"] == 37
    assert_same_but_left_out(rows, schedd)


@pytest.mark.parametrize("ids, count, want", [
    ("1.0 ... 1.9", 10, range(0, 10)), ("1.4", 1, range(4, 5)), ("1.4 1.5", 2, range(4, 6)),
    ("1.0 ... 1.9", 9, None),            # a gap
    ("1.0 ... 2.3", 10, None),           # two clusters
    ("2.0 ... 2.9", 10, None),           # another cluster than the group's
    ("1.0 ...", 3, None), ("", 1, None), (None, 1, None), ("1.0", 0, None), ("1.x", 1, None),
])
def test_a_run_is_read_from_first_last_and_count(ids, count, want):
    from negotiator_ext.adapters.resource_requests import _proc_range
    assert _proc_range(ids, count, 1) == want


def test_a_referenced_attribute_of_the_left_out_list_is_kept():
    schedd = ScheddWithAutoclusters([job(1, p) for p in range(3)])
    (rows, _), _ = by_requests(schedd, refs=("Site", "Owner"))
    assert all('Owner = "alice"' in r for r in rows)
    assert not any(ln.startswith("GlobalJobId") for r in rows for ln in r)
    assert kept_attributes(["Owner", "GlobalJobId", "User"], ["owner"]) == ["Owner", "User"]


def test_jobs_without_a_known_autocluster_are_queried_whole():
    jobs = [job(1, p) for p in range(6)] + [job(3, 0), job(4, 0)]
    schedd = ScheddWithAutoclusters(jobs)
    schedd.edit(jobs[2], "RequestMemory", 128)         # edited: no id until worked out
    del jobs[6]["AutoClusterId"]                       # new since the schedd last looked
    jobs[6]["RequestCpus"] = 4
    jobs[7]["AutoClusterId"] = 99                      # an id the answer did not have
    (rows, stats), whole_calls = by_requests(schedd)
    # (no cluster is all runs of a known autocluster: their jobs asked one by one)
    assert stats == {"autoclusters": 1, "job_runs": 0, "jobs_by_request": 5, "jobs_whole": 3}
    # those without an id by one test each job can pass; the unknown id by its ids
    assert len(whole_calls) == 2
    assert whole_calls[0].endswith("&& (AutoClusterId =?= undefined)")
    assert whole_calls[1].endswith("&& ((ClusterId == 4 && member(ProcId, {0})))")
    d = as_dicts(rows)
    assert d[2]["requestmemory"] == "128" and d[6]["requestcpus"] == "4"
    # queried whole: every projected attribute, in the queue's order
    assert d[2]["globaljobid"] == '"s#1.2#1"'
    assert [(x["clusterid"], x["procid"]) for x in d] == [
        ("1", str(p)) for p in range(6)] + [("3", "0"), ("4", "0")]


def test_a_job_given_its_autocluster_meanwhile_is_named_by_its_ids():
    jobs = [job(1, p) for p in range(6)]
    schedd = ScheddWithAutoclusters(jobs)
    del jobs[4]["AutoClusterId"]

    def before(constraint, opts):
        if "=?= undefined" in constraint:
            schedd.cluster(jobs[4])                  # the schedd works it out meanwhile
    schedd.before = before
    (rows, stats), whole_calls = by_requests(schedd)
    assert stats["jobs_whole"] == 1 and len(whole_calls) == 2
    assert "ClusterId == 1 && member(ProcId, {4})" in whole_calls[1]
    assert [d["procid"] for d in as_dicts(rows)] == [str(p) for p in range(6)]


def test_too_many_to_name_means_the_whole_queue(monkeypatch):
    from negotiator_ext.adapters import resource_requests
    monkeypatch.setattr(resource_requests, "MAX_NAMED", 2)
    jobs = [job(c, 0) for c in range(1, 10)]
    schedd = ScheddWithAutoclusters(jobs)
    for j in jobs[:3]:
        j["AutoClusterId"] = 50 + j["ClusterId"]     # three ids the answer lacks
    assert by_requests(schedd)[0] is None


def test_a_job_gone_between_the_two_answers_is_left_out():
    jobs = [job(1, p) for p in range(4)]
    schedd = ScheddWithAutoclusters(jobs)
    del jobs[1]["AutoClusterId"]

    def before(constraint, opts):
        if "=?= undefined" in constraint:
            jobs[1]["JobStatus"] = 4                   # completed meanwhile
    schedd.before = before
    (rows, stats), _ = by_requests(schedd)
    assert [d["procid"] for d in as_dicts(rows)] == ["0", "2", "3"]
    assert stats["jobs_whole"] == 1


def test_most_jobs_without_an_autocluster_means_the_whole_queue():
    jobs = [job(1, p) for p in range(4)]
    schedd = ScheddWithAutoclusters(jobs)
    for j in jobs[:3]:
        del j["AutoClusterId"]
    assert by_requests(schedd)[0] is None


def test_no_autoclusters_means_the_whole_queue():
    schedd = ScheddWithAutoclusters([])
    assert by_requests(schedd)[0] is None
    assert [q[2] for q in schedd.queries] == [int(htcondor2.QueryOpt.AutoCluster)]


def test_a_reference_to_a_left_out_attribute_means_the_whole_queue():
    # RequestDisk is not significant here, and its value reads ImageSize, left out
    jobs = [job(1, p, RequestDisk=classad2.ExprTree("ImageSize * 2")) for p in range(3)]
    schedd = ScheddWithAutoclusters(jobs)
    assert by_requests(schedd, projection=job_projection.projection_of({"Site", "RequestDisk"}))[0] is None


@pytest.mark.parametrize("answer", [
    "not ads", None, [1, 2], {"AutoClusterId": 1},
    [classad2.ClassAd({"AutoClusterId": 1})],                          # no JobCount
    [classad2.ClassAd({"AutoClusterId": "1", "JobCount": 1})],         # not an integer
    [classad2.ClassAd({"AutoClusterId": 1, "JobCount": 1}),
     classad2.ClassAd({"AutoClusterId": 1, "JobCount": 2})],           # twice
    [classad2.ClassAd({"AutoClusterId": 1, "JobCount": 1, "ClusterId": 1, "ProcId": 0})],
])
def test_an_answer_that_is_not_autocluster_ads_is_not_taken(answer):
    assert autocluster_lines(answer) is None


def test_an_autocluster_query_that_fails_or_bindings_without_it_mean_the_whole_queue():
    schedd = ScheddWithAutoclusters([job(1, 0)])

    def before(constraint, opts):
        if opts:
            raise RuntimeError("timed out")
    schedd.before = before
    assert by_requests(schedd)[0] is None

    class NoOpts:
        pass
    assert job_lines_by_requests(NoOpts, schedd, constraint="true", kept=["ClusterId"],
                                 shared={}, checked=list, whole=list, missing_refs=list,
                                 lap=lambda _: None) is None


_jobs = st.lists(st.tuples(st.integers(0, 2), st.sampled_from([64, 128]),
                           st.sampled_from(["a", "b", None]), st.integers(-1, 1),
                           st.booleans()),
                 min_size=1, max_size=12)


@settings(max_examples=60, deadline=None)
@given(_jobs)
def test_property_requests_equal_whole_jobs_on_every_kept_attribute(specs):
    jobs = []
    for p, (user, mem, site, prio, _) in enumerate(specs):
        extra = {"Site": site} if site is not None else {}
        jobs.append(job(1 + p // 5, p % 5, User=f"u{user}@example.org", RequestMemory=mem,
                        JobPrio=prio, **extra))
    schedd = ScheddWithAutoclusters(jobs)
    for j, spec in zip(jobs, specs):
        if spec[4]:
            schedd.edit(j, "RequestMemory", 256)
    got, _ = by_requests(schedd)
    if got is None:                 # most jobs edited: the whole queue, not a wrong answer
        assert sum(s[4] for s in specs) * 2 > len(specs)
        return
    assert_same_but_left_out(got[0], schedd)


# ---- a whole capture and cycle ---------------------------------------------------------

@pytest.fixture
def pool(mocker):
    return FakePool().install(mocker)


def test_a_capture_by_requests_decides_as_a_whole_capture(pool, mocker, tmp_path):
    """The recorded fixture's queue behind a schedd that keeps autoclusters: the same
    cycle from the two snapshots."""
    schedds = {}

    def make_schedd(loc):
        name = loc["Name"]
        if name not in schedds:
            jobs = [classad2.parseOne(j.printOld(), classad2.ParserType.Old)
                    for j in pool.schedds[name]]
            for j in jobs:
                for attr in ("AutoClusterId", "AutoClusterAttrs"):
                    if attr in j:
                        del j[attr]
            schedds[name] = ScheddWithAutoclusters(jobs, significant=SIG + ["JobUniverse"])
        return schedds[name]
    mocker.patch("htcondor2.Schedd", side_effect=make_schedd)
    a = capture_snapshot(None, tmp_path / "requests", now=NOW, by_requests=True)
    b = capture_snapshot(None, tmp_path / "whole", now=NOW)
    meta = json.loads((tmp_path / "requests" / "meta.json").read_text())
    assert meta["captured_by_requests"] and all(
        s["jobs_whole"] == 0 and s["jobs_by_request"] > 0
        for s in meta["captured_by_requests"].values())
    assert "captured_by_requests" not in json.loads((tmp_path / "whole" / "meta.json").read_text())
    assert a.jobs == b.jobs
    ra, rb = (run_cycle(load_pool(tmp_path / d)) for d in ("requests", "whole"))
    assert ra.matches and ra.to_json() == rb.to_json()


def test_a_referenced_attribute_named_like_the_schedds_bookkeeping_means_the_whole_queue():
    # a slot reads TARGET.JobCount: the autocluster answer's own JobCount would hide it
    schedd = ScheddWithAutoclusters([job(1, p, JobCount=7) for p in range(3)])
    assert by_requests(schedd, projection=job_projection.projection_of({"Site", "JobCount"}),
                       refs=("Site", "JobCount"))[0] is None
    assert schedd.queries == []


@pytest.mark.parametrize("broken", ["injected", "requirements lost"])
def test_a_signature_broken_by_a_line_break_means_the_whole_queue(broken):
    """The schedd prints a signature in the old syntax, where a string keeps its line
    breaks, and reads it back line by line: Site = "a<newline>Requirements = true"
    loses Site and adds a Requirements of its own; the same with Requirements first
    loses Requirements. Either way the autocluster ad and the AutoClusterAttrs its jobs
    name disagree."""
    schedd = ScheddWithAutoclusters([job(1, p, Site="a") for p in range(3)])

    def after(ads):
        for ad in ads:
            if broken == "injected":
                del ad["Site"]
                ad["Injected"] = True
            else:
                del ad["Requirements"]
    schedd.after = after
    assert by_requests(schedd)[0] is None


def test_what_a_real_old_syntax_signature_breaks_into():
    """classad2's printOld is the schedd's unparser in the old syntax: a line break in a
    string is written as it is, so the signature's line splits in two."""
    ad = classad2.ClassAd({"Site": 'a"\nRequirements = true\nZ = "b'})
    text = ad.printOld()
    assert text.count("\n") == 3            # one attribute, three lines
    lines = text.rstrip("\n").split("\n")
    assert lines[1] == "Requirements = true"
