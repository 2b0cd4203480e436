"""The schedd's limits on what it offers the negotiator (core/schedd_limits.py, rule M7):
the knobs as the schedd reads them, the count of one session, and whole cycles where
they cut what a submitter is offered."""

from __future__ import annotations

from collections import Counter

import pytest

from negotiator_ext.core.schedd_limits import ScheddLimits
from negotiator_ext.cycle import run_cycle
from negotiator_ext.errors import InputError
from negotiator_ext.pool import load_pool
from poolmaker import DOMAIN, accounting, job, make_pool, slot

ON = "SCHEDD_ENABLE_PER_USER_MATCH_LIMITS = True\n"


def test_knobs_read_as_the_schedd_reads_them():
    d = ScheddLimits()
    assert (d.per_user_enabled, d.per_user, d.max_jobs_running) == (True, 20, 10000)
    # MAX_CONCURRENT_UPLOADS_PER_USER defaults to MAX_CONCURRENT_UPLOADS / 5 (C division)
    assert ScheddLimits.from_knobs({"MAX_CONCURRENT_UPLOADS": "52"}, "f").per_user == 10
    assert ScheddLimits.from_knobs({"MAX_CONCURRENT_UPLOADS_PER_USER": "-1",
                                    "MAX_CONCURRENT_UPLOADS": "52"}, "f").per_user == 10
    assert ScheddLimits.from_knobs({"max_concurrent_uploads_per_user": "7",
                                    "MAX_CONCURRENT_UPLOADS": "52"}, "f").per_user == 7
    # what RemoteParam gives for the defaults: expanded, not evaluated
    got = ScheddLimits.from_knobs({"MAX_CONCURRENT_UPLOADS_PER_USER": "100/5",
                                   "MAX_JOBS_RUNNING": "MIN({24105,10000})"}, "f")
    assert (got.per_user, got.max_jobs_running) == (20, 10000)
    off = ScheddLimits.from_knobs({"SCHEDD_ENABLE_PER_USER_MATCH_LIMITS": "False"}, "f")
    assert off.per_user_limit is None
    # a schedd's own knob over the config's: the config switched it off, the schedd on
    on = ScheddLimits.from_knobs({"SCHEDD_ENABLE_PER_USER_MATCH_LIMITS": "true"}, "f",
                                 otherwise=off)
    assert on.per_user_limit == 20
    # MAX_CONCURRENT_UPLOADS = 0 (unlimited uploads): no per-user limit
    assert ScheddLimits.from_knobs({"MAX_CONCURRENT_UPLOADS": "0"}, "f").per_user_limit is None


def test_bad_knob_names_file_schedd_and_knob():
    with pytest.raises(InputError) as e:
        ScheddLimits.from_knobs({"MAX_JOBS_RUNNING": "lots"}, "snap/schedd-knobs.json",
                                ad="schedd s1")
    assert str(e.value) == ("snap/schedd-knobs.json: ad schedd s1: "
                            "MAX_JOBS_RUNNING = lots: not a number")
    with pytest.raises(InputError, match="SCHEDD_ENABLE_PER_USER_MATCH_LIMITS = maybe: "
                                         "not a boolean"):
        ScheddLimits.from_knobs({"SCHEDD_ENABLE_PER_USER_MATCH_LIMITS": "maybe"}, "f")
    # as every knob of the config: out of HTCondor's range is refused
    with pytest.raises(InputError, match="MAX_JOBS_RUNNING = 1e300: out of range"):
        ScheddLimits.from_knobs({"MAX_JOBS_RUNNING": "1e300"}, "f")


def test_offer_cap():
    lim = ScheddLimits(per_user_enabled=True, per_user=20, max_jobs_running=100)
    assert lim.offer_cap(shadows=0, in_transfer=0) == 20
    assert lim.offer_cap(shadows=0, in_transfer=5) == 15       # jobs in the upload queue
    assert lim.offer_cap(shadows=0, in_transfer=25) == 0       # none: NO_MORE_JOBS at once
    assert lim.offer_cap(shadows=90, in_transfer=0) == 10      # MAX_JOBS_RUNNING - shadows
    assert lim.offer_cap(shadows=150, in_transfer=0) == 0
    off = ScheddLimits(per_user_enabled=False, per_user=20, max_jobs_running=100)
    assert off.offer_cap(shadows=40, in_transfer=30) == 60
    # and the knob that set it (the lesser; a tie is MAX_JOBS_RUNNING's)
    assert lim.session(shadows=0, in_transfer=5) == (15, "MAX_CONCURRENT_UPLOADS_PER_USER")
    assert lim.session(shadows=90, in_transfer=0) == (10, "MAX_JOBS_RUNNING")
    assert lim.session(shadows=80, in_transfer=0) == (20, "MAX_JOBS_RUNNING")
    assert lim.session(shadows=0, in_transfer=25) == (0, "MAX_CONCURRENT_UPLOADS_PER_USER")
    assert off.session(shadows=150, in_transfer=0) == (0, "MAX_JOBS_RUNNING")
    curbed = ScheddLimits(curbed=True)
    assert curbed.session(shadows=0, in_transfer=0) == (0, "CURB_MATCHMAKING")


def _counts(tmp_path, jobs, config, slots=40, acc=None):
    pool = make_pool(tmp_path / "pool", slots=[slot(f"slot1@n{i:03d}.test.local")
                                               for i in range(slots)],
                     jobs=jobs, config=config, accounting_ads=acc)
    r = run_cycle(load_pool(pool))
    return dict(Counter(m.submitter.split("@")[0] for m in r.matches)), r


def test_per_user_limit_cuts_each_submitter_to_twenty(tmp_path):
    jobs = [job(1, p, "a") for p in range(50)] + [job(2, p, "b") for p in range(5)]
    got, _ = _counts(tmp_path, jobs, ON, slots=60)
    assert got == {"a": 20, "b": 5}
    got, _ = _counts(tmp_path / "off", jobs, "", slots=60)
    assert got == {"a": 50, "b": 5}


def test_jobs_in_the_upload_queue_count_against_the_limit(tmp_path):
    """Running jobs of `a` transferring their input, or queued to, take places of its 20;
    one transferring its output does not."""
    running = [job(9, p, "a", JobStatus=2, TransferringInput=True) for p in range(3)]
    running += [job(9, 3 + p, "a", JobStatus=2, TransferQueued=True) for p in range(2)]
    running += [job(9, 5, "a", JobStatus=2, TransferQueued=True, TransferringOutput=True)]
    jobs = [job(1, p, "a") for p in range(50)] + running
    got, _ = _counts(tmp_path, jobs, ON)
    assert got == {"a": 15}


def test_max_jobs_running_counts_the_schedds_running_jobs(tmp_path):
    running = [job(9, p, "b", JobStatus=2) for p in range(25)]
    jobs = [job(1, p, "a") for p in range(50)] + running
    got, _ = _counts(tmp_path, jobs, "MAX_JOBS_RUNNING = 30\n")
    assert got == {"a": 5}
    # scheduler- and local-universe jobs hold no shadow
    local = [job(9, p, "b", JobStatus=2, JobUniverse=12) for p in range(25)]
    got, _ = _counts(tmp_path / "local", [job(1, p, "a") for p in range(50)] + local,
                     "MAX_JOBS_RUNNING = 30\n")
    assert got == {"a": 30}


def test_a_rejected_request_still_uses_up_its_count(tmp_path):
    """The schedd counts a request when it sends it, a batch of requests at a time: a
    first autocluster no slot takes still uses 5 of the 20, so 15 of the second match.
    With one job at a time (no request counts) only its first job is offered: 19."""
    jobs = ([job(1, p, "a", RequestMemory=10 ** 9) for p in range(5)]
            + [job(2, p, "a") for p in range(30)])
    got, r = _counts(tmp_path, jobs, ON)
    assert got == {"a": 15}
    assert [x.job for x in r.rejections] == ["1.0"]
    got, _ = _counts(tmp_path / "one", jobs, ON + "USE_RESOURCE_REQUEST_COUNTS = False\n")
    assert got == {"a": 19}


def test_a_submitter_that_resumes_gets_a_new_session(tmp_path):
    """Reference 2.7's pool with the limit on: C's limit (20) is used up in spin 1, so it
    resumes in spin 2 and its new session offers 20 more; B, offered 20 under a limit of
    40, is done (NO_MORE_JOBS), and A takes its 10."""
    jobs = ([job(1, p, "a") for p in range(10)] + [job(2, p, "b") for p in range(150)]
            + [job(3, p, "c") for p in range(150)])
    acc = [accounting(f"a@{DOMAIN}", 500.0), accounting(f"b@{DOMAIN}", 500.0),
           accounting(f"c@{DOMAIN}", 1000.0)]
    got, r = _counts(tmp_path, jobs, ON, slots=100, acc=acc)
    assert got == {"a": 10, "b": 20, "c": 40}
    assert Counter(m.spin for m in r.matches if m.submitter.startswith("c@")) == {1: 20, 2: 20}


def test_schedd_knobs_file_overrides_the_config(tmp_path):
    jobs = [job(1, p, "a") for p in range(50)]
    pool = make_pool(tmp_path / "pool", slots=[slot(f"slot1@n{i:03d}.test.local")
                                               for i in range(40)], jobs=jobs)
    (pool / "schedd-knobs.json").write_text(
        '{"schedd.test.local": {"SCHEDD_ENABLE_PER_USER_MATCH_LIMITS": "true", '
        '"MAX_CONCURRENT_UPLOADS": "35"}}')
    r = run_cycle(load_pool(pool))
    assert len(r.matches) == 7
    (pool / "schedd-knobs.json").write_text('{"schedd.test.local": {"MAX_JOBS_RUNNING": [1]}}')
    with pytest.raises(InputError, match=r"schedd-knobs.json: ad schedd schedd.test.local: "
                                         r"attribute MAX_JOBS_RUNNING: expected a value as text"):
        load_pool(pool)




def _with_schedd_ad(tmp_path, text, config=""):
    jobs = [job(1, p, "a") for p in range(30)]
    pool = make_pool(tmp_path / "pool", slots=[slot(f"slot1@n{i:03d}.test.local")
                                               for i in range(40)], jobs=jobs, config=config)
    (pool / "schedds.ads").write_text('MyType = "Scheduler"\nName = "schedd.test.local"\n' + text)
    return pool


def test_a_schedd_whose_ad_says_curb_matchmaking_offers_nothing(tmp_path):
    """CurbMatchmaking, as the schedd publishes it (CURB_MATCHMAKING, evaluated in its own
    ad): while it holds, shadowsSpawnLimit is 0 and the schedd answers NO_MORE_JOBS."""
    busy = ("CurbMatchmaking = (RecentDaemonCoreDutyCycle > 0.98)\n"
            "RecentDaemonCoreDutyCycle = 0.99\n")
    assert run_cycle(load_pool(_with_schedd_ad(tmp_path / "busy", busy))).matches == []
    idle = busy.replace("0.99", "0.5")
    assert len(run_cycle(load_pool(_with_schedd_ad(tmp_path / "idle", idle))).matches) == 30


def test_max_jobs_running_from_the_schedds_ad_and_its_knobs_over_it(tmp_path):
    pool = _with_schedd_ad(tmp_path, "MaxJobsRunning = 12\n")
    assert len(run_cycle(load_pool(pool)).matches) == 12
    (pool / "schedd-knobs.json").write_text('{"schedd.test.local": {"MAX_JOBS_RUNNING": "7"}}')
    assert len(run_cycle(load_pool(pool)).matches) == 7
    bad = _with_schedd_ad(tmp_path / "bad", 'MaxJobsRunning = "lots"\n')
    with pytest.raises(InputError, match=r"schedds.ads: ad 1 \(schedd.test.local\): attribute "
                                         r"MaxJobsRunning: not an integer"):
        load_pool(bad)


@pytest.mark.parametrize("name,text,says", [
    ("schedd-knobs.json", "[1, 2", "schedd-knobs.json: "),
    ("schedd-knobs.json", '["vm"]', "expected a JSON object of schedd name"),
    ("schedd-knobs.json", '{"vm": 3}', "ad schedd vm: expected an object of knob: value"),
    ("schedds.ads", 'Name = "s"\nMaxJobsRunning = 1.5\n', "attribute MaxJobsRunning"),
    ("schedds.ads", "MyType = \"Scheduler\"\n", "schedd ad has no Name"),
])
def test_bad_schedd_files_are_one_line_and_exit_status_2(tmp_path, capsys, name, text, says):
    from negotiator_ext.cli import main
    pool = make_pool(tmp_path / "pool", slots=[slot("slot1@n.test.local")],
                     jobs=[job(1, 0, "a")])
    (pool / name).write_text(text)
    assert main(["negotiate", str(pool)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and name in err[0] and says in err[0]


def test_turns_a_schedd_ended_are_reported_with_the_knob(tmp_path):
    """A turn that ends because the schedd's session offered no more jobs, while the
    submitter had idle jobs left, is reported with the knob that set the count (the
    per-user match limit, MAX_JOBS_RUNNING less the schedd's shadows); a submitter whose
    jobs all fit in the count is not; `negotiate` shows them as a table."""
    from negotiator_ext.views.negotiate import render_cycle
    jobs = [job(1, p, "a") for p in range(50)] + [job(2, p, "b") for p in range(5)]
    _, r = _counts(tmp_path, jobs, ON, slots=60)
    assert [(x["submitter"].split("@")[0], x["offers"], x["knob"], x["idle_left"])
            for x in r.schedd_stops] == [("a", 20, "MAX_CONCURRENT_UPLOADS_PER_USER", 30)]
    text = render_cycle(r.to_json())
    row = next(ln for ln in text.splitlines() if "MAX_CONCURRENT_UPLOADS_PER_USER" in ln
               and not ln.startswith(" "))
    assert row.split()[-4:] == ["20", "0", "1", "30"]
    assert "Turns the schedds ended" in text and "Schedd limits:" in text
    running = [job(9, p, "b", JobStatus=2) for p in range(25)]
    _, r = _counts(tmp_path / "mjr", [job(1, p, "a") for p in range(50)] + running,
                   "MAX_JOBS_RUNNING = 30\n")
    assert [(x["submitter"].split("@")[0], x["offers"], x["knob"], x["shadows"],
             x["idle_left"]) for x in r.schedd_stops] == [("a", 5, "MAX_JOBS_RUNNING", 25, 45)]
    _, r = _counts(tmp_path / "off", jobs, "", slots=60)
    assert r.schedd_stops == [] and "Turns the schedds ended" not in render_cycle(r.to_json())
