"""A shadow pass aligned with the real cycle (adapters/alignment.py): the NegotiatorLog
followed as the negotiator writes it, and the digests the ledger keeps for explaining a
disagreement (adapters/ledger_digests.py). The loop itself beside a real negotiator is
tests/test_live_shadow.py's."""

from __future__ import annotations

import dataclasses
import datetime as dt
import os

from negotiator_ext.adapters.alignment import CycleFollower
from negotiator_ext.adapters.ledger import open_ledger
from negotiator_ext.core.disagreement import digest

from test_ledger import small_pass


def line(t: int, text: str) -> str:
    stamp = dt.datetime.fromtimestamp(t, dt.timezone.utc).strftime("%m/%d/%y %H:%M:%S")
    return f"{stamp} {text}\n"


STARTED = "---------- Started Negotiation Cycle ----------"
FINISHED = "---------- Finished Negotiation Cycle ----------"


def test_the_follower_reports_cycles_started_since_its_last_poll(tmp_path):
    log = tmp_path / "NegotiatorLog"
    log.write_text(line(1000, STARTED) + line(1001, FINISHED))
    f = CycleFollower(log, "UTC")
    assert f.poll() == []                            # what was there before: past
    with open(log, "a") as out:
        out.write(line(1010, "Phase 1:  Obtaining ads from collector ...")
                  + line(1010, STARTED) + line(1011, FINISHED)
                  + line(1020, STARTED)[:12])        # a line still being written
    assert f.poll() == [1010]
    with open(log, "a") as out:
        out.write(line(1020, STARTED)[12:])
    assert f.poll() == [1020] and f.poll() == []
    # rotated (MAX_NEGOTIATOR_LOG): the new file is read from its start
    os.rename(log, tmp_path / "NegotiatorLog.old")
    log.write_text(line(1030, STARTED))
    assert f.poll() == [1030] and f.problem is None


def test_an_unreadable_log_is_said_once_and_gives_nothing(tmp_path):
    f = CycleFollower(tmp_path / "missing", "UTC")
    assert f.poll() == [] and "cannot read the NegotiatorLog" in f.problem
    (tmp_path / "missing").write_text(line(1000, STARTED))
    assert f.poll() == []              # found now: followed from its end
    with open(tmp_path / "missing", "a") as out:
        out.write(line(1005, STARTED))
    assert f.poll() == [1005] and f.problem is None


def test_the_ledger_keeps_the_newest_digests_until_compared(tmp_path):
    d = digest(submitters={"alice": 2}, idle_jobs={"alice": ["7.0", "7.1"]},
               slots={"slot1": True, "slot2": False, "slot3": True, "slot4": True},
               candidate_slots=2, owners={"slot1": "bob", "slot3": "cid", "slot4": "bob"})
    with open_ledger(str(tmp_path / "l.sqlite")) as ledger:
        for i in range(7):
            ledger.record_pass(dataclasses.replace(small_pass(f"p{i}", started_at=1000.0 + i),
                                                   comparable=True, digest=d))
        assert ledger.digest("p6") == d and ledger.digest("p1") == {}    # five kept
        # each claimant's slots kept as places in the claimed list
        from negotiator_ext.adapters import ledger_digests
        assert '"owned":{"bob":[0,2],"cid":[1]}' in ledger_digests.encode(d)
        assert ledger.pass_record("p6").digest == d
        from negotiator_ext.core.records import Comparison
        ledger.record_pass(dataclasses.replace(
            small_pass("p7", started_at=1010.0), comparable=False, digest=d,
            comparison=Comparison(shadow_pass="p6", real_cycle_time=1007,
                                  real_cycles_between=1, real_matches=0, shadow_matches=1,
                                  agreed=0, real_in_shadow=None, shadow_in_real=0.0,
                                  count_agreement=0.0, source="matchlog")))
        assert ledger.digest("p6") == {} and ledger.digest("p7") == {}   # compared; not comparable
        assert ledger.digest("p5") == d


def test_a_digest_that_does_not_read_back_is_none(tmp_path):
    import sqlite3
    url = str(tmp_path / "l.sqlite")
    d = digest(submitters={"alice": 1}, idle_jobs={}, slots={}, candidate_slots=0)
    with open_ledger(url) as ledger:
        ledger.record_pass(dataclasses.replace(small_pass("p0"), comparable=True, digest=d))
    con = sqlite3.connect(url)
    con.execute("UPDATE pool_digests SET digest = '[1, 2' WHERE pass_uuid = 'p0'")
    con.commit()
    con.close()
    with open_ledger(url) as ledger:
        assert ledger.digest("p0") == {}


def test_a_pool_digest_keeps_the_submitters_schedds_only_where_there_are_several(tmp_path):
    """pool_digest: each submitter's schedds (its submitter ads' ScheddName), for telling
    which turn each schedd's deadline cut; not kept in a pool of one schedd."""
    import shutil
    from pathlib import Path
    from negotiator_ext.adapters.alignment import pool_digest
    from negotiator_ext.cycle import run_cycle
    from negotiator_ext.pool import load_pool
    src = Path(__file__).parent / "data" / "fixtures" / "pie_three_submitters"
    one = load_pool(src)
    assert "schedds" not in pool_digest(one, run_cycle(one))
    two = tmp_path / "two"
    shutil.copytree(src, two)
    text = (two / "submitters.ads").read_text()
    head, sep, rest = text.partition('Name = "carol@refcondor.local"')
    assert sep
    (two / "submitters.ads").write_text(
        head + sep + rest.replace('ScheddName = "vm"', 'ScheddName = "other@vm"', 1))
    pool = load_pool(two)
    got = pool_digest(pool, run_cycle(pool))["schedds"]
    assert got == {"alice@refcondor.local": ["vm"], "bob@refcondor.local": ["vm"],
                   "carol@refcondor.local": ["other@vm"]}


def test_a_pool_digest_skips_a_submitter_ad_heard_at_no_finite_time(monkeypatch):
    """pool_digest keeps each submitter ad's LastHeardFrom (the tie-break's input) only
    when it is a finite number: an infinity or a NaN is left out, not turned into an
    error or a wrong time (build_pool refuses them earlier; the digest does not rely on
    it)."""
    import json
    from pathlib import Path
    from negotiator_ext.adapters.alignment import pool_digest
    from negotiator_ext.cycle import run_cycle
    from negotiator_ext.pool import Pool, load_pool
    pool = load_pool(Path(__file__).parent / "data" / "fixtures" / "pie_three_submitters")
    result = run_cycle(pool)
    ads = [dict(d) for d in pool.submitter_ads()]
    assert len(ads) == 3
    for d, t in zip(ads, (float("inf"), float("nan"), 1795900000.0)):
        d["LastHeardFrom"] = t
    monkeypatch.setattr(Pool, "submitter_ads", lambda self: ads)
    heard = json.loads(json.dumps(pool_digest(pool, result)))["submitters_heard"]
    assert [h[0] for h in heard] == [ads[2]["Name"]] and heard[0][2] == 1795900000
