"""Several schedds asked at once (adapters/schedd_query.py `_asked_apart`): each in a
child process of its own, which hands its lines back pickled (beside.Packed), put back
together in the schedds' order; the same answer, errors and missing schedds as asked one
after another, whatever each schedd answers. The parent's bound on a schedd's answer
counts from when its own child asked it (`_asking`), and a child ends with the process
that forked it (a worker or a `--once` child killed mid-answer leaves no child behind).
The live tests (test_live_schedds_at_once.py) run it against three real schedds."""

from __future__ import annotations

import copy
import json
import os
import time

import htcondor2
import pytest

from negotiator_ext.adapters import schedd_query
from negotiator_ext.adapters.beside import Beside, Packed
from negotiator_ext.adapters.job_delta import KnownJobs

from fakepool import FakePool

PROJECTION = ["ClusterId", "ProcId", "JobStatus", "Owner", "RequestCpus", "Requirements"]


@pytest.fixture
def pool(mocker):
    fake = FakePool().install(mocker)
    vm = fake.schedds["vm"]
    # five schedds: the recorded one, two more with some of its jobs, one that fails,
    # one whose answer is not job ads
    fake.schedds["s2"] = vm[:3]
    fake.schedds["s3"] = vm[2:]
    fake.schedds["down"] = htcondor2.HTCondorException("Failed to connect to schedd")
    fake.schedds["junk"] = ["not a job"]
    return fake


def ask(at_once: int, kept=None, pack=None):
    errors, by_request = {}, {}
    got = schedd_query._query_schedds(
        htcondor2, htcondor2.Collector(None), PROJECTION, errors, {}, None, kept,
        by_request, at_once=at_once, pack=pack)
    return got, errors, by_request


@pytest.mark.parametrize("at_once", [2, 3, 5, 8])
def test_schedds_asked_at_once_answer_as_one_after_another(pool, at_once):
    (jobs, answered, missing), errors, by_request = ask(1)
    (apart, answered2, missing2), errors2, by_request2 = ask(at_once)
    assert all(isinstance(lines, Packed) for _, lines in apart)
    assert schedd_query.unpacked(apart) == jobs
    assert [name for name, _ in jobs] == ["vm", "s2", "s3"]
    assert len(dict(jobs)["vm"]) == len(pool.schedds["vm"])
    assert (answered2, missing2, errors2) == (answered, missing, errors)
    assert missing == ["down", "junk"] and set(errors) == {"down", "junk"}
    assert by_request2 == by_request


def test_a_workers_schedds_asked_at_once_are_coded_against_the_loops_last_answer(
        pool, mocker):
    # the worker's function, in this process: each schedd coded in its own child
    mocker.patch.object(schedd_query, "_client_timeouts")
    known = KnownJobs()
    first = schedd_query.query_schedds_in_worker(None, PROJECTION, None, 20, at_once=4)
    whole = known.take(first[0])
    pool.schedds["s2"] = pool.schedds["s2"][:2]            # a job gone from s2
    again = schedd_query.query_schedds_in_worker(None, PROJECTION, None, 20, known.token,
                                                 known.digests, at_once=4)
    one = schedd_query.query_schedds_in_worker(None, PROJECTION, None, 20, known.token,
                                               known.digests, at_once=1)
    assert again[0].base == one[0].base == known.token
    # coded in each schedd's child (apart) and by the worker itself (one at a time)
    assert all(isinstance(coded, Packed) for _, coded in again[0].jobs)
    assert not any(isinstance(coded, Packed) for _, coded in one[0].jobs)
    same = copy.deepcopy(known)
    taken = known.take(again[0])
    assert taken == same.take(one[0]) and known.reuse == same.reuse
    assert known.digests == same.digests
    assert [n for n, _ in taken] == ["vm", "s2", "s3"]
    assert dict(taken)["s2"] == dict(whole)["s2"][:2]
    # every job unchanged since the last answer came back as an index, none as lines
    assert all(w is not None for w in known.reuse["vm"] + known.reuse["s3"])
    assert again[1:4] == one[1:4]


def test_the_bound_counts_from_when_each_schedd_was_asked(tmp_path):
    progress = tmp_path / "progress"
    note = schedd_query._Progress(str(progress))
    assert schedd_query._asking(str(progress)) is None
    note("")
    note("", True)
    assert schedd_query._asking(str(progress)) is None
    note("a")
    time.sleep(0.01)
    note("b")
    since, name = schedd_query._asking(str(progress))
    assert name == "a"                      # asked longest
    note("a", True)
    assert schedd_query._asking(str(progress))[1] == "b"
    note("c")
    note("b", True)
    assert schedd_query._asking(str(progress))[1] == "c"
    note("c", True)
    assert schedd_query._asking(str(progress)) is None
    assert schedd_query._asking(str(tmp_path / "none")) is None


def _child_of_a_child(path: str) -> None:
    inner = Beside(time.sleep, 60)
    with open(path, "w") as f:
        json.dump(inner.pid, f)
    time.sleep(60)


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="Linux only")
def test_a_child_ends_with_the_process_that_forked_it(tmp_path):
    path = tmp_path / "pid"
    outer = Beside(_child_of_a_child, str(path))
    assert outer.pid is not None
    deadline = time.monotonic() + 20
    while not path.exists() or not path.read_text():
        assert time.monotonic() < deadline, "the inner child was not started"
        time.sleep(0.05)
    inner = json.loads(path.read_text())
    outer.cancel()                          # SIGKILL: no cleanup of its own

    def alive(pid: int) -> bool:
        try:
            with open(f"/proc/{pid}/status") as f:
                return not any(ln.startswith("State:") and "Z" in ln.split()[1] for ln in f)
        except OSError:
            return False
    deadline = time.monotonic() + 10
    while alive(inner):
        assert time.monotonic() < deadline, "the inner child outlived its parent"
        time.sleep(0.05)


def test_a_packed_value_passes_through_a_process_as_its_bytes():
    import pickle
    value = [["ClusterId = 1", "ProcId = 0"]] * 3
    packed = Packed(value)
    again = pickle.loads(pickle.dumps(packed, protocol=pickle.HIGHEST_PROTOCOL))
    assert isinstance(again, Packed) and again.data == packed.data
    assert again.unpack() == value
    assert schedd_query.unpacked([("s", again), ("t", value)]) == [("s", value), ("t", value)]
