"""Capturing a schedd's queue in the shape of its resource requests.

The negotiator never reads a schedd's whole queue: the schedd offers it one job ad per
autocluster run, and what a request can match is decided by the job's significant
attributes, the ones its autocluster (AutoClusterId) stands for. The schedd keeps that
id true: when a significant attribute of a job changes, it deletes the job's
AutoClusterId until it works the autocluster out again, and an id always names the same
signature (ids are handed out in increasing order, never reused).

So a capture can ask a schedd for

* its autoclusters (`QueryOpt.AutoCluster`): one ad per autocluster with the values of
  its significant attributes, as the schedd printed them into the autocluster's
  signature (with the job attributes those values reference, which the schedd adds);
* each job's own attributes only: ids, status, submitter, the order attributes, the job
  attributes the slots and the negotiator's expressions reference that are not
  significant at this schedd, and a few the pass reports (`kept_attributes`);

and put each job back together as those two sets of lines. The jobs' own attributes
come, for runs of consecutive ids alike in them (a cluster's jobs, as `queue N` makes
them), from one group query (`QueryOpt.GroupBy`: one ad per run with its first and last
id and their count), and job by job for the other clusters. A job whose AutoClusterId is
missing (new since the schedd last worked its autoclusters out, or edited since) is
queried whole, with the others like it, by `AutoClusterId =?= undefined`; one whose id
was not in the autocluster answer, by its ids. A schedd tests a constraint on every job
(and a list's member() walks the list), so no constraint names more than `MAX_NAMED`
jobs or clusters: beyond that the capture asks for more instead.

Nothing is taken on trust: an autocluster answer that is not autocluster ads (each with
an integer AutoClusterId, once, and an integer JobCount, and no ClusterId or ProcId)
makes the capture query every job whole; so do jobs whose expressions reference an
attribute the request capture left out, more jobs without a known autocluster than with
one, and a job attribute the expressions reference that has the name of the schedd's
own bookkeeping in these answers (JobCount, JobIds, Id: the answer's value would hide
the job's).

The schedd prints an autocluster's signature in the old ClassAd syntax, one attribute a
line, and reads it back line by line for the answer; a string with a line break in it
(which the old syntax writes as it is) breaks its line: that attribute is lost, and
what follows the break may read as lines of its own. Each job names the attributes of
its signature (AutoClusterAttrs, kept for this): an autocluster ad with an attribute
its jobs do not name, or without the Requirements they name, makes the capture query
every job whole. (An attribute other than Requirements that such a break loses, and
that its jobs may also lack, cannot be told from one they lack.)

What the jobs lose: the attributes in `LEFT_OUT` (GlobalJobId, Owner, ImageSize, ...),
unless an expression references them or they are significant. No rule of the cycle
reads them: the submitter is `AccountingGroup`/`User`, the schedd is the file's, a job
is named by its ids.
"""

from __future__ import annotations

from operator import itemgetter
from typing import Callable, Iterable

import classad2

from .adfiles import _attribute_lines, _split_line, sort_lines

# The job attributes of the base projection that a job captured by requests leaves out,
# unless a slot or negotiator expression references them (then they are kept) or they
# are significant at the schedd (then they come from the autocluster).
LEFT_OUT: tuple[str, ...] = (
    "GlobalJobId", "MyType", "TargetType", "LastMatchTime", "Owner", "AcctGroup",
    "AcctGroupUser", "NiceUser", "WantMatchDiagnostics", "FlockTo",
    "ImageSize", "ExecutableSize", "DiskUsage", "MemoryUsage", "RemoteUser", "RemoteHost",
)
_LEFT_OUT = frozenset(a.lower() for a in LEFT_OUT)

# Attributes of an autocluster ad that are the schedd's bookkeeping, not job attributes.
_BOOKKEEPING = frozenset(("autoclusterid", "jobcount", "jobids", "servertime"))
# and of a group ad
_GROUP_BOOKKEEPING = frozenset(("id", "jobcount", "jobids", "servertime"))

# More jobs than this share without a known autocluster: query every job whole.
_MOST_WHOLE = 0.5
# A schedd tests a constraint on every job, and a ClassAd list's member() walks the
# list: a constraint naming jobs or clusters one by one stays this short, else the
# capture asks for more (every job's own attributes, or the whole queue).
MAX_NAMED = 200


def kept_attributes(projection: Iterable[str], referenced: Iterable[str]) -> list[str]:
    """The attributes a job captured by requests keeps of `projection`: all but
    `LEFT_OUT`, and those too when an expression references them (`referenced`)."""
    refs = {a.lower() for a in referenced}
    return [a for a in projection if a.lower() not in _LEFT_OUT or a.lower() in refs]


def autocluster_lines(answer) -> dict[int, list[str]] | None:
    """An autocluster answer as AutoClusterId -> the autocluster's significant attribute
    lines (sorted, as `adfiles.ad_lines` writes a job's); None when it is not autocluster
    ads."""
    if answer is None or isinstance(answer, (str, bytes, dict, classad2.ClassAd)):
        return None
    out: dict[int, list[str]] = {}
    try:
        for ad in answer:
            if not isinstance(ad, classad2.ClassAd):
                return None
            acid, count = ad.get("AutoClusterId"), ad.get("JobCount")
            if type(acid) is not int or type(count) is not int or acid in out:
                return None
            if "ClusterId" in ad or "ProcId" in ad:   # a job ad, not an autocluster's
                return None
            lines = [ln for ln in _attribute_lines(ad)
                     if _split_line(ln)[0].lower() not in _BOOKKEEPING]
            out[acid] = sort_lines(lines)
    except Exception:
        return None
    return out


def _ids_constraint(ids: list[tuple[int, int]]) -> str:
    """A constraint matching exactly the jobs `ids`."""
    by_cluster: dict[int, list[int]] = {}
    for c, p in ids:
        by_cluster.setdefault(c, []).append(p)
    return " || ".join(f"(ClusterId == {c} && member(ProcId, {{{', '.join(map(str, ps))}}}))"
                       for c, ps in sorted(by_cluster.items()))


def _ids_of(lines: list[str]) -> tuple[int, int] | None:
    c = p = None
    for ln in lines:
        name, text = _split_line(ln)
        low = name.lower()
        if low == "clusterid":
            c = text
        elif low == "procid":
            p = text
    try:
        return int(c), int(p)
    except (TypeError, ValueError):
        return None


def _proc_range(ids, count, cluster: int) -> range | None:
    """The procs of a group of jobs of `cluster` when they are one run of consecutive
    ids: a group ad's JobIds gives its first and last job ("1.0 ... 1.165": the schedd
    keeps a group's ids in a sorted set and prints the least and the greatest) and
    JobCount how many there are."""
    if type(count) is not int or count < 1 or not isinstance(ids, str):
        return None
    toks = ids.split()
    try:
        fc, fp = (int(x) for x in toks[0].split("."))
        lc, lp = (int(x) for x in toks[-1].split("."))
    except (IndexError, ValueError):
        return None
    if fc != cluster or lc != cluster or fp < 0 or lp - fp + 1 != count:
        return None
    return range(fp, lp + 1)


def _signatures_whole(signed: set[tuple], names: dict[int, set[str]]) -> set[str] | None:
    """The attributes the jobs' AutoClusterAttrs name, given each (AutoClusterId,
    AutoClusterAttrs) the jobs put back together hold, when every autocluster ad holds
    those its jobs name and no others, Requirements among them when they name it; else
    None (see the module docstring: a string with a line break breaks the schedd's own
    copy)."""
    every: set[str] = set()
    for acid, listed in signed:
        have = names.get(acid)
        if have is None or not isinstance(listed, str):
            return None
        said = {n.strip().lower() for n in listed.split(",") if n.strip()}
        if not have <= said or ("requirements" in said and "requirements" not in have):
            return None
        every |= said
    return every


def _ranges(htcondor, schedd, constraint: str, asked: list[str], acs: dict, share,
            signed: set) -> tuple[list, set[int]] | None:
    """The jobs the schedd can give as runs of consecutive ids (`QueryOpt.GroupBy` on
    each job's own attributes but ProcId: one ad per distinct set of values, with its
    first and last job and their count): [(cluster, procs, the run's lines with a
    placeholder for ProcId, its index)], and the clusters that are not all such runs of
    a known autocluster (their jobs are asked one by one); `signed` is told each run's
    (AutoClusterId, AutoClusterAttrs). None when the schedd does not group (or answers
    something else): every job is asked one by one."""
    opt = getattr(getattr(htcondor, "QueryOpt", None), "GroupBy", None)
    low = {a.lower() for a in asked}
    # the constraint is tested on what the group keeps: JobStatus must be one of them
    if opt is None or not {"clusterid", "jobstatus", "procid"} <= low:
        return None
    attrs = [a for a in asked if a.lower() != "procid"]
    try:
        answer = schedd.query(constraint=constraint, projection=attrs, opts=opt)
        if answer is None or isinstance(answer, (str, bytes, dict, classad2.ClassAd)):
            return None
        answer = list(answer)
    except Exception:               # noqa: BLE001 - every job asked one by one instead
        return None
    runs: list = []
    partial: set[int] = set()
    for ad in answer:
        if not isinstance(ad, classad2.ClassAd):
            return None
        cluster = ad.get("ClusterId")
        if type(cluster) is not int:
            return None
        acid = ad.get("AutoClusterId")
        sig = acs.get(acid) if type(acid) is int else None
        procs = _proc_range(ad.get("JobIds"), ad.get("JobCount"), cluster)
        if sig is None or procs is None:
            partial.add(cluster)
            continue
        try:
            own = [ln for ln in _attribute_lines(ad)
                   if _split_line(ln)[0].lower() not in _GROUP_BOOKKEEPING]
        except Exception:           # noqa: BLE001
            return None
        signed.add((acid, ad.get("AutoClusterAttrs")))
        placeholder = "ProcId = -1"
        lines = sort_lines(own + sig + [placeholder])
        at = next(i for i, ln in enumerate(lines) if ln is placeholder)
        runs.append((cluster, procs, [share(ln, ln) for ln in lines], at))
    return [r for r in runs if r[0] not in partial], partial


def job_lines_by_requests(htcondor, schedd, *, constraint: str, kept: list[str],
                          shared: dict, checked: Callable, whole: Callable,
                          missing_refs: Callable, lap: Callable
                          ) -> tuple[list[list[str]], dict] | None:
    """A schedd's jobs (those matching `constraint`) as each job's lines, in the order of
    their ids, captured by its resource requests, and what was captured how; None when
    the schedd is better queried whole (no autoclusters, an answer that is not
    autocluster ads, most jobs without a known autocluster, or references to attributes
    left out).

    Each job's own attributes come from a group query when its jobs are runs of
    consecutive ids with the same values (`_ranges`: a few ads for a whole queue), else
    from a query of each job's own attributes.

    `checked(answer)`: the answer as job ads (raises when it is not); `whole(constraint)`:
    the lines of the jobs matching `constraint`, queried whole; `missing_refs(lines,
    names)`: the job attributes the lines' expressions reference that are neither in
    `names` nor in the lines; `lap(step)`: where the time went."""
    opt = getattr(getattr(htcondor, "QueryOpt", None), "AutoCluster", None)
    if opt is None or {a.lower() for a in kept} & {"jobcount", "jobids", "id"}:
        return None
    try:
        acs = autocluster_lines(schedd.query(constraint="true", projection=[], opts=opt))
    except Exception:               # noqa: BLE001 - queried whole instead
        acs = None
    lap("schedd_query")
    if not acs:
        return None
    significant = {_split_line(ln)[0].lower() for lines in acs.values() for ln in lines}
    if "procid" in significant or "clusterid" in significant:
        return None
    names = {acid: {_split_line(ln)[0].lower() for ln in lines} for acid, lines in acs.items()}
    asked = [a for a in kept if a.lower() not in significant]
    share = shared.setdefault
    for lines in acs.values():
        lines[:] = map(share, lines, lines)

    by_cluster: dict[int, list] = {}      # cluster -> [(first proc, [lines or None])]
    distinct: list[list[str]] = []        # every distinct set of lines, once (a run's once)
    signed: set[tuple] = set()      # (AutoClusterId, AutoClusterAttrs) of the jobs taken
    got = _ranges(htcondor, schedd, constraint, asked, acs, share, signed)
    lap("schedd_query")
    runs = 0
    if got is not None and len(got[1]) > MAX_NAMED:
        got = None                  # too many clusters to name: every job one by one
        signed.clear()
    if got is not None:
        ranges, partial = got
        runs = len(ranges)
        for cluster, procs, lines, at in ranges:
            head, tail = lines[:at], lines[at + 1:]
            rows = [head + [share(pl, pl)] + tail
                    for pl in (f"ProcId = {p}" for p in procs)]
            by_cluster.setdefault(cluster, []).append((procs.start, rows))
            distinct.append(rows[0])
        one_by_one = (f"({constraint}) && member(ClusterId, {{{', '.join(map(str, sorted(partial)))}}})"
                      if partial else None)
    else:
        one_by_one = constraint
    without: set = set()            # jobs without an AutoClusterId
    unknown: set = set()            # jobs whose AutoClusterId the answer did not have
    if one_by_one is not None:
        answer = schedd.query(constraint=one_by_one, projection=asked)
        lap("schedd_query")
        jobs = checked(answer)
        get = acs.get
        for ad in jobs:
            acid = ad.get("AutoClusterId")
            sig = get(acid) if type(acid) is int else None
            c, p = ad["ClusterId"], ad["ProcId"]
            if sig is None:
                (unknown if "AutoClusterId" in ad else without).add((c, p))
                row = None
            else:
                signed.add((acid, ad.get("AutoClusterAttrs")))
                lines = sort_lines(_attribute_lines(ad) + sig)
                row = list(map(share, lines, lines))
                distinct.append(row)
            by_cluster.setdefault(c, []).append((p, [row]))
        del answer, jobs
    rows = []                       # each job's lines (None: to be queried whole), by id
    wanted_at: list[tuple[int, tuple[int, int]]] = []
    for c in sorted(by_cluster):
        chunks = by_cluster[c]
        chunks.sort(key=itemgetter(0))
        for first, chunk in chunks:
            if chunk[0] is None:
                wanted_at.append((len(rows), (c, first)))
            rows.extend(chunk)
    del by_cluster
    lap("job_lines")
    listed = _signatures_whole(signed, names)
    if listed is None:
        return None
    wanting = len(without) + len(unknown)
    if wanting > _MOST_WHOLE * len(rows) or len(unknown) > MAX_NAMED:
        return None
    # (an attribute the signatures name but no autocluster ad holds: the jobs lack it;
    # the jobs of a run differ in their ProcId alone, a literal)
    named = asked + sorted(significant | listed)
    if missing_refs(distinct, named):
        return None
    stats = {"autoclusters": len(acs), "job_runs": runs,
             "jobs_by_request": len(rows) - wanting, "jobs_whole": wanting}
    if wanting:
        again: dict = {}
        if without:
            # one test per job, however many: the jobs the schedd has no autocluster for
            again.update((_ids_of(lines), lines) for lines in whole(
                f"({constraint}) && (AutoClusterId =?= undefined)"))
        # those named one by one: ids unknown to the autocluster answer, and jobs that
        # got their autocluster in the meantime
        rest = sorted(unknown | {job for job in without if job not in again})
        if len(rest) > MAX_NAMED:
            return None
        if rest:
            again.update((_ids_of(lines), lines) for lines in whole(
                f"({constraint}) && ({_ids_constraint(rest)})"))
        for index, job in wanted_at:
            rows[index] = again.get(job)    # a job gone since the first answer: None
        rows = [r for r in rows if r is not None]
    return rows, stats
