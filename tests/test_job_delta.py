"""A shadow loop's jobs from pass to pass (adapters/job_delta.py): the worker's answers
as deltas against its last answer, put back together by the loop into exactly the
lines queried, each pass's texts equal to texts split afresh (rows and attribute
names), a jobs file linked only when it holds the same jobs in the same order."""

from __future__ import annotations

import os

from hypothesis import given, settings, strategies as st

from negotiator_ext.adapters.adfiles import KnownLines, text_ads_of_lines, write_lines
from negotiator_ext.adapters.beside import Packed
from negotiator_ext.adapters.job_delta import Delta, KnownJobs, delta as answer, delta_one
from negotiator_ext.adapters.snapshot import _job_texts
from negotiator_ext.core.adtext import TextStore

def _ask(jobs: list, known: KnownJobs, apart: bool = False) -> Delta:
    # the worker's answer to the loop's request: the answer it holds, and its digests;
    # `apart`: each schedd's jobs coded in the child that asked it (schedd_query)
    if apart:
        held = known.digests if known.token is not None else {}
        jobs = [(name, Packed(delta_one(lines, held.get(name)))) for name, lines in jobs]
    return answer(jobs, known.token, known.digests)


_line = st.sampled_from([
    "JobStatus = 1", "JobStatus = 2", 'Owner = "alice"', 'Owner = "bob"',
    "RequestCpus = 1", "requestcpus = 2", "Requirements = TARGET.Cpus >= MY.RequestCpus",
    'OnlySometimes = "x"', "Rank = 0.0", "RequestMemory = 2048"])


def _job(i: int, extra: list[str]) -> list[str]:
    lines = {ln.split(" = ", 1)[0].lower(): ln for ln in extra}
    lines["clusterid"] = f"ClusterId = {i // 3 + 1}"
    lines["procid"] = f"ProcId = {i % 3}"
    return sorted(lines.values(), key=str.lower)


# a pass: schedd -> its jobs, each (job number, extra lines); a job keeps its number
_pass = st.dictionaries(st.sampled_from(["s1", "s2"]),
                        st.lists(st.tuples(st.integers(0, 12), st.lists(_line, max_size=5)),
                                 max_size=8, unique_by=lambda j: j[0]),
                        max_size=2)


def _lines(schedds: dict) -> list:
    # fresh lists and strings every pass, as a worker's answer unpickled
    return [(name, [[(ln + ".")[:-1] for ln in _job(i, extra)] for i, extra in jobs])
            for name, jobs in sorted(schedds.items())]


@settings(max_examples=150, deadline=None)
@given(passes=st.lists(_pass, min_size=1, max_size=5),
       dropped=st.lists(st.booleans(), min_size=5, max_size=5),
       apart=st.lists(st.booleans(), min_size=5, max_size=5))
def test_a_loops_jobs_equal_the_answers_and_their_texts_those_split_afresh(passes, dropped,
                                                                          apart):
    known = KnownLines()
    for n, schedds in enumerate(passes):
        asked = _lines(schedds)
        delta = _ask(asked, known.jobs, apart[n])
        if dropped[n]:
            continue                # not taken: the next builds on what the loop holds
        before = {name: list(lines) for name, lines in known.jobs.jobs.items()}
        got = known.jobs.take(delta)
        assert got == asked
        for name, lines in got:
            for ad, where in zip(lines, known.jobs.reuse[name]):
                if where is not None:       # an unchanged job: the very list held
                    assert ad is before[name][where]
        known.next_pass()
        store = TextStore()
        for name, lines in got:
            texts = _job_texts(lines, "jobs.ads", store, known, name)
            fresh = text_ads_of_lines(lines, "jobs.ads", TextStore())
            assert texts.rows == fresh.rows
        fresh_names = TextStore()
        for _, lines in got:
            text_ads_of_lines(lines, "jobs.ads", fresh_names)
        assert set(store.names) == set(fresh_names.names)


def test_an_answer_on_a_base_not_held_is_not_taken():
    known = KnownJobs()
    jobs = [("s1", [["ClusterId = 1", "ProcId = 0"]])]
    assert known.take(answer(jobs, None, None)) == jobs
    held = known.token
    again = _ask(jobs, known)
    assert again.base == held and again.jobs == [("s1", [0])]
    other = Delta(token="x", base="not-held", jobs=[("s1", [0])])
    assert known.take(other) is None
    assert known.token == held                       # nothing changed
    assert known.take(Delta("y", held, [("s1", [5])])) is None     # no such job
    assert known.take("garbage") is None
    # digests that are not 16 bytes a job: that schedd's jobs whole, still on the base
    odd = answer(jobs, held, {"s1": b"123"})
    assert odd.base == held and odd.jobs == jobs
    # no digests sent: the answer is whole
    fresh = answer(jobs, held, None)
    assert fresh.base is None and fresh.jobs == jobs
    assert known.take(fresh) == jobs


def test_a_jobs_file_is_linked_only_for_the_same_jobs_in_the_same_order(tmp_path):
    known = KnownJobs()
    a, b = ["ClusterId = 1", "ProcId = 0"], ["ClusterId = 1", "ProcId = 1"]
    first = tmp_path / "1"
    first.mkdir()
    known.take(_ask([("s1", [a, b])], known))
    write_lines(first / "jobs-s1.ads", [a, b])
    known.written("s1", first / "jobs-s1.ads")

    def link(jobs, where):
        known.take(_ask([("s1", jobs)], known))
        where.mkdir()
        linked = known.link_file("s1", where / "jobs-s1.ads")
        if not linked:
            write_lines(where / "jobs-s1.ads", jobs)
        known.written("s1", where / "jobs-s1.ads")
        return linked

    assert link([list(a), list(b)], tmp_path / "2")
    assert os.path.samefile(first / "jobs-s1.ads", tmp_path / "2" / "jobs-s1.ads")
    assert not link([list(b), list(a)], tmp_path / "3")            # another order
    assert not link([list(b)], tmp_path / "4")                     # a job gone
    assert link([list(b)], tmp_path / "5")
    assert (tmp_path / "5" / "jobs-s1.ads").read_text() == "\n".join(b) + "\n\n"
    # a pass whose jobs did not come from the worker keeps nothing, links nothing
    known.not_taken()
    assert not known.link_file("s1", tmp_path / "6.ads")
    known.written("s1", tmp_path / "6.ads")
    assert known.kept[("s1", known.token)].file == tmp_path / "5" / "jobs-s1.ads"


def test_an_unchanged_job_keeps_its_texts_and_a_gone_jobs_names_go():
    known = KnownLines()
    a = ["ClusterId = 1", "ProcId = 0", 'Owner = "alice"']
    b = ["ClusterId = 1", "OnlyB = 1", "ProcId = 1"]
    c = ["ClusterId = 2", "ProcId = 0", 'Owner = "bob"']

    def one_pass(jobs):
        got = known.jobs.take(_ask([("s1", [list(j) for j in jobs])], known.jobs))
        known.next_pass()
        store = TextStore()
        return _job_texts(got[0][1], "jobs.ads", store, known, "s1"), store

    first, _ = one_pass([a, b])
    second, store = one_pass([a, c])
    assert second.rows[0] is first.rows[0]          # a: its texts as the last pass's
    assert second.rows[1] is not first.rows[1]
    assert "onlyb" not in store.names and "owner" in store.names
    third, store = one_pass([a, c, b])
    assert third.rows[:2] == second.rows[:2] and third.rows[0] is first.rows[0]
    assert store.names["onlyb"] == "OnlyB"


def test_texts_kept_under_an_answer_serve_it_after_a_pass_without_the_worker():
    """A pass whose jobs did not come from the worker (`not_taken`) keeps nothing and
    leaves what the last answer taken kept: an answer built on that one still takes its
    texts, each name spelled as its ads write it (whatever the pass between saw)."""
    known = KnownLines()
    a = ["ClusterId = 1", "OnlyA = 1", "ProcId = 0"]
    b = ["ClusterId = 1", "ProcId = 1"]
    got = known.jobs.take(_ask([("s1", [list(a), list(b)])], known.jobs))
    known.next_pass()
    first = _job_texts(got[0][1], "jobs.ads", TextStore(), known, "s1")
    # a pass without the worker: other jobs, through the same KnownLines
    known.jobs.not_taken()
    known.next_pass()
    _job_texts([list(b)], "jobs.ads", TextStore(), known, "s1")
    assert ("s1", known.jobs.token) in known.jobs.kept
    # the worker's next answer builds on the one the loop holds
    delta = _ask([("s1", [list(a), list(b)])], known.jobs)
    assert delta.jobs == [("s1", [0, 1])]
    got = known.jobs.take(delta)
    known.next_pass()
    store = TextStore()
    third = _job_texts(got[0][1], "jobs.ads", store, known, "s1")
    assert third.rows[0] is first.rows[0] and third.rows[1] is first.rows[1]
    assert store.names["onlya"] == "OnlyA"
    assert third.rows == text_ads_of_lines([a, b], "jobs.ads", TextStore()).rows


def test_the_loop_keeps_a_digest_of_each_job_and_the_worker_nothing():
    # 500,000 jobs' lines (then their digests, with a dict) kept the worker at several
    # hundred MB between passes; the loop now keeps 16 bytes a job, and a job one
    # character apart is still a new job
    known = KnownJobs()
    first = [["ClusterId = 1", "Owner = \"alice\"", "ProcId = 0"],
             ["ClusterId = 1", "Owner = \"alice\"", "ProcId = 1"]]
    known.take(answer([("s1", first)], None, None))
    old = known.digests["s1"]
    assert len(old) == 32
    again = [[ln for ln in first[1]], ["ClusterId = 1", "Owner = \"alicf\"", "ProcId = 0"]]
    delta = _ask([("s1", again)], known)
    assert delta.jobs == [("s1", [1, again[1]])]
    assert known.take(delta) == [("s1", again)]
    new = known.digests["s1"]
    assert new[:16] == old[16:] and new[16:] not in (old[:16], old[16:])


_pair = st.tuples(st.sampled_from(["clusterid", "procid", "owner", "jobstatus", "x"]),
                  st.sampled_from(["1", "2", '"a"']))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(_pair, max_size=6).map(tuple), max_size=40))
def test_name_counts_is_every_pairs_name_counted(rows):
    """name_counts (rows alike in their names counted together) gives what counting
    each row's pairs one by one gives, repeated names in a row included."""
    from collections import Counter

    from negotiator_ext.adapters.job_delta import name_counts

    one_by_one = Counter()
    for row in rows:
        one_by_one.update(p[0] for p in row)
    assert name_counts(iter(rows)) == one_by_one
