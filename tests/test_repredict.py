"""Issue 32's last gap: our pass predicts the priorities at its capture, the real
accountant updates them at its cycle's phase 2. A difference left unexplained is
re-predicted there (our cycle once more on the compared snapshot, at the real
accountant's update: core.disagreement.repredict, shadow_repredict.repredict) and explained
only where that re-run gives the submitter exactly its real count; a real difference of
rules stays unexplained.

The pool: alice runs two jobs but the accountant has not caught up with them yet (her
priority 0.5, her usage 2), bob has run nothing lately (1.0); two free slots, both with
idle jobs, PRIORITY_HALFLIFE = 10 s. At our capture alice comes first and each gets a
slot; 45 s later, at the real cycle's phase 2, alice's priority has risen to about 1.9
and bob's fallen to 0.5: bob comes first and takes both."""

from __future__ import annotations

import datetime
import sqlite3
import sys
from collections import Counter
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from poolmaker import DOMAIN, accounting, claimed, job, make_pool, slot  # noqa: E402

from negotiator_ext.cli import main  # noqa: E402
from negotiator_ext.core.disagreement import (POOL_CHANGED, UNEXPLAINED,  # noqa: E402
                                              accounting_time, repredict)
from negotiator_ext.core.records import RealCycle  # noqa: E402
from negotiator_ext.cycle import run_cycle  # noqa: E402
from negotiator_ext.pool import load_pool  # noqa: E402

T = 1_795_000_000
START, PHASE2, END = T + 40, T + 45, T + 46
ALICE, BOB = f"alice@{DOMAIN}", f"bob@{DOMAIN}"


def flip_pool(d: Path, captured_at: int = T, last_update: int = T) -> Path:
    jobs = [job(1, i, "alice") for i in range(4)] + [job(2, i, "bob") for i in range(4)]
    running = [job(3, i, "alice", JobStatus=2) for i in range(2)]
    slots = [slot("slot1@h"), slot("slot2@h")]
    slots += [claimed(f"slot{9 + i}@h", running[i], ALICE) for i in range(2)]
    acc = [accounting(ALICE, priority=0.5, factor=1.0, ResourcesUsed=2,
                      WeightedResourcesUsed=2.0, LastUpdate=last_update,
                      BeginUsageTime=T - 100, LastUsageTime=T),
           accounting(BOB, priority=1.0, factor=1.0, LastUpdate=last_update)]
    return make_pool(d, slots=slots, jobs=jobs + running, accounting_ads=acc,
                     config="PRIORITY_HALFLIFE = 10\n", captured_at=captured_at)


def counts(d: Path, at: int) -> Counter:
    return Counter(m.submitter for m in run_cycle(load_pool(d), now=at).matches)


def test_the_pool_flips_between_capture_and_phase_2(tmp_path):
    d = flip_pool(tmp_path / "s")
    assert counts(d, T) == {ALICE: 1, BOB: 1}
    assert counts(d, PHASE2) == {BOB: 2}


# ---- the phase 2 time -------------------------------------------------------------------

def test_accounting_time_from_the_accountant_the_log_the_ad_or_the_start():
    log = RealCycle(time=100, end=130, duration=30.0, accounting_time=117,
                    phase_durations=(15.0, 1.0, 0.0, 14.0))
    # the Accounting ads' LastUpdate read after the cycle: the update's own second
    assert accounting_time(log, 119) == (119, "the real accountant's LastUpdate after the "
                                              "cycle")
    # ... unless it is not this cycle's (a later cycle's, or one before it)
    assert accounting_time(log, 140) == accounting_time(log, 99) == accounting_time(log) == (
        117, "the NegotiatorLog's phase 2 line")
    ad = RealCycle(time=100, end=130, duration=30.0, phase_durations=(15.0, 1.0, 0.0, 14.0))
    assert accounting_time(ad) == (115, "the cycle's start and its phase 1 duration")
    bare = RealCycle(time=100, end=130, duration=30.0)
    assert accounting_time(bare) == (100, "the cycle's start (its phase 2 time unknown)")


def _log_line(t: int, text: str) -> str:
    return datetime.datetime.fromtimestamp(t, datetime.UTC).strftime(
        "%m/%d/%y %H:%M:%S ") + text + "\n"


def earlier_cycle(start=START) -> str:
    """A cycle before our capture (the one our pass's accountant state comes from)."""
    return (_log_line(T - 30, "---------- Started Negotiation Cycle ----------")
            + _log_line(T - 30, "Phase 1:  Obtaining ads from collector ...")
            + _log_line(T - 29, "Phase 2:  Performing accounting ...")
            + _log_line(T - 28, "---------- Finished Negotiation Cycle ----------"))


def the_cycle(start=START, phase2=PHASE2, end=END) -> str:
    """The real cycle after our capture."""
    return (_log_line(start, "---------- Started Negotiation Cycle ----------")
            + _log_line(start, "Phase 1:  Obtaining ads from collector ...")
            + _log_line(phase2, "Phase 2:  Performing accounting ...")
            + _log_line(phase2, "Phase 3:  Sorting submitter ads by priority ...")
            + _log_line(end, "---------- Finished Negotiation Cycle ----------"))


def test_the_negotiator_log_gives_each_cycles_phase_2(tmp_path):
    from negotiator_ext.adapters.observe import merge_cycles, read_negotiator_log
    log = tmp_path / "NegotiatorLog"
    # a cycle aborted in phase 1 between the two: no Phase 2 line, no Finished line
    log.write_text(earlier_cycle()
                   + _log_line(T + 10, "---------- Started Negotiation Cycle ----------")
                   + _log_line(T + 10, "Aborting negotiation cycle") + the_cycle())
    cycles, _ = read_negotiator_log(log, since=T, tz="UTC")
    assert [(c.time, c.accounting_time, c.end) for c in cycles] == [
        (T - 30, T - 29, T - 28), (START, PHASE2, END)]
    # merged with the negotiator ad's entry of the same cycle: the log's phase 2 kept
    ad = [RealCycle(time=START, end=END, duration=6.0, matches=2,
                    phase_durations=(3.0, 1.0, 0.0, 1.0))]
    (merged,) = [c for c in merge_cycles(cycles, ad) if c.time == START]
    assert (merged.accounting_time, merged.matches) == (PHASE2, 2)


# ---- the rule (core) ----------------------------------------------------------------------

def _rows(real: dict, shadow: dict) -> dict:
    return {n: {"real": real.get(n, 0), "shadow": shadow.get(n, 0)}
            for n in sorted(set(real) | set(shadow))}


def _unexplained(rows: dict) -> list[dict]:
    return [{"submitter": n, "real": r["real"], "shadow": r["shadow"], "class": UNEXPLAINED,
             "unexplained": abs(r["real"] - r["shadow"]), "changes": []}
            for n, r in rows.items() if r["real"] != r["shadow"]]


def test_only_a_difference_the_rerun_reproduces_exactly_is_explained():
    rows = _rows({"a": 3, "b": 5, "c": 2}, {"a": 4, "b": 4, "c": 4})
    got = repredict(disagreements=_unexplained(rows), per_submitter=rows,
                    counts={"a": 3, "b": 5, "c": 3}, captured=100, at=120)
    by = {d["submitter"]: d for d in got["disagreements"]}
    assert by["a"]["class"] == by["b"]["class"] == POOL_CHANGED
    assert by["a"]["changes"][0].startswith(
        "priorities moved between our capture and the real cycle's accounting (+20 s)")
    assert (by["c"]["class"], by["c"]["unexplained"], by["c"]["repredicted"]) == (
        UNEXPLAINED, 2, 3)         # moved towards the real count, not to it: unexplained
    assert got["explained"] == ["a", "b"] and got["unexplained"] == 3
    # c's 2 left on the shadow side of 12: 1 - 2/12
    assert got["unexplained_agreement"] == pytest.approx(1 - 2 / 12)


def test_a_rerun_that_breaks_a_submitter_we_had_right_explains_nothing_in_its_group():
    """The re-run gives b its real count by taking a match from d, whom the capture's
    prediction had right: no real cycle is reproduced in that group. In another group
    the re-run still explains."""
    rows = _rows({"a": 3, "b": 5, "d": 2, "x": 1}, {"a": 3, "b": 4, "d": 2, "x": 2})
    groups = {"a": "g1", "b": "g1", "d": "g1", "x": "g2"}
    got = repredict(disagreements=_unexplained(rows), per_submitter=rows,
                    counts={"a": 3, "b": 5, "d": 1, "x": 1}, captured=100, at=120,
                    groups=groups)
    by = {d["submitter"]: d for d in got["disagreements"]}
    assert by["b"]["class"] == UNEXPLAINED and by["x"]["class"] == POOL_CHANGED
    assert got["new_differences"] == ["d"] and got["explained"] == ["x"]


# ---- through the shadow (a replay of two passes, the real logs beside them) --------------

def matchlog(path: Path, matches: list[tuple[str, str, str]], t: int = END) -> Path:
    """MatchLog lines: (job, submitter, slot)."""
    path.write_text("".join(_log_line(t, f"      Matched {j} {s} <10.0.0.1:9618> preempting "
                                         f"none <10.1.0.1:9618> {slot_name}")
                            for j, s, slot_name in matches))
    return path


REAL = [("2.0", BOB, "slot1@h"), ("2.1", BOB, "slot2@h")]     # bob first: both his


def shadow_replay(tmp_path: Path, real=REAL, *, keep_first: bool = True, log: bool = True,
                  config: str = "", updated: int = T, make=None, logs_now: bool = False):
    """Two replayed passes, each as a live loop would see the logs then: the pool at our
    capture (T; the logs up to an earlier cycle), then 60 s later (the logs with the real
    cycle of START in between). `make(directory, captured_at)` makes each pool (else
    `flip_pool`, its accountant updated at `updated` in the second). `logs_now`: both
    passes read the logs as they are after the real cycle (recorded snapshots replayed
    later, beside the logs kept). Returns the comparison of the first pass's cycle, as
    the ledger holds it."""
    if make is None:
        def make(d: Path, at: int) -> Path:
            return flip_pool(d, at, T if at == T else updated)
    before = make(tmp_path / "before", T)
    after = make(tmp_path / "after", T + 60)
    ledger = tmp_path / "l.sqlite"
    neg_log, match_log = tmp_path / "NegotiatorLog", tmp_path / "MatchLog"
    argv = ["shadow", "--ledger", str(ledger), "--matchlog-timezone", "UTC",
            "--matchlog", str(match_log)]
    if log:
        argv += ["--negotiator-log", str(neg_log)]
    if config:          # the shadow's own knobs (a config file of its own)
        (tmp_path / "condor_config").write_text(config)
        argv += ["--config", str(tmp_path / "condor_config")]
    if logs_now:
        neg_log.write_text(earlier_cycle() + the_cycle())
        matchlog(match_log, real)
    else:
        neg_log.write_text(earlier_cycle())
        match_log.write_text("")
    assert main(argv + ["--replay", str(before)]) == 0
    neg_log.write_text(earlier_cycle() + the_cycle())
    matchlog(match_log, real)
    if not keep_first:      # the first pass's snapshot gone by the time the second compares
        before.rename(tmp_path / "gone")
    assert main(argv + ["--replay", str(after)]) == 0
    from negotiator_ext.adapters.ledger import open_ledger
    with open_ledger(str(ledger)) as led:
        (_, c), = led.comparisons()
        return c


def test_a_flip_between_capture_and_phase_2_is_explained_by_the_rerun(tmp_path, capsys):
    c = shadow_replay(tmp_path)
    assert (c.count_agreement, c.unexplained_agreement) == (0.5, 1.0)
    by = {d["submitter"]: d for d in c.disagreements}
    assert {n: (d["real"], d["shadow"], d["class"], d["repredicted"]) for n, d in by.items()} \
        == {ALICE: (0, 1, POOL_CHANGED, 0), BOB: (2, 1, POOL_CHANGED, 2)}
    assert by[BOB]["changes"][0] == (
        "priorities moved between our capture and the real cycle's accounting (+45 s): "
        f"our cycle re-run at {PHASE2} gives the real count")
    r = c.repredicted
    assert (r["at"], r["delta_t"], r["unexplained"], r["explained"], r["new_differences"],
            r["unexplained_agreement_before"]) == (PHASE2, 45, 2, 2, 0, 0.5)
    assert r["source"] == "the NegotiatorLog's phase 2 line" and r["seconds"] >= 0
    assert any(n.startswith(f"re-predicted at phase 2: our cycle re-run at the real "
                            f"accountant's update ({PHASE2}, +45 s from our capture; the "
                            "NegotiatorLog's phase 2 line) explains 2 of 2") for n in c.notes)
    # the pass line says what was done
    out = capsys.readouterr().out.splitlines()
    assert "re-predicted at phase 2 (+45 s): 2 of 2 unexplained explained" in out[-1]
    assert "unexplained only 100%" in out[-1]


def test_a_replay_beside_the_logs_kept_since_compares_the_same(tmp_path):
    """Recorded snapshots replayed later, beside the logs as they are now (the 100k-1M
    bench's kept run): the first pass's log shows the real cycle that came after its
    capture. A pass does not see a cycle that ended after its snapshot: the second
    compares it, as the loop did."""
    c = shadow_replay(tmp_path, logs_now=True)
    assert (c.count_agreement, c.unexplained_agreement) == (0.5, 1.0)
    assert c.repredicted["at"] == PHASE2


def test_the_accountants_own_update_time_is_taken_when_it_is_the_cycles(tmp_path):
    """The Accounting ads read after the cycle carry the second its update took
    (LastUpdate), a moment after the log's Phase 2 line in a large pool: that one."""
    c = shadow_replay(tmp_path, updated=PHASE2 + 1)
    assert c.unexplained_agreement == 1.0
    assert (c.repredicted["at"], c.repredicted["delta_t"], c.repredicted["source"]) == (
        PHASE2 + 1, 46, "the real accountant's LastUpdate after the cycle")


def test_without_the_rerun_the_flip_is_unexplained(tmp_path, capsys):
    """The compared snapshot gone: nothing re-run, the comparison says so."""
    c = shadow_replay(tmp_path, keep_first=False)
    assert (c.count_agreement, c.unexplained_agreement) == (0.5, 0.5)
    assert {d["class"] for d in c.disagreements} == {UNEXPLAINED}
    assert "is gone" in c.repredicted["skipped"]
    assert any(n.startswith("not re-predicted at phase 2: the compared snapshot")
               for n in c.notes)
    assert "not re-predicted at phase 2" in capsys.readouterr().out


def test_the_rerun_turned_off(tmp_path):
    c = shadow_replay(tmp_path, config="NEGOTIATOR_EXT_REPREDICT = False\n")
    assert c.unexplained_agreement == 0.5
    assert c.repredicted == {"skipped": "turned off (NEGOTIATOR_EXT_REPREDICT = False)"}


def test_a_real_difference_of_rules_stays_unexplained(tmp_path):
    """Mutation: the real cycle gives alice both slots, which our rules give her at no
    time: the re-run does not reproduce it, so it stays unexplained."""
    c = shadow_replay(tmp_path, real=[("1.0", ALICE, "slot1@h"), ("1.1", ALICE, "slot2@h")])
    assert c.unexplained_agreement == 0.5
    by = {d["submitter"]: d for d in c.disagreements}
    assert {n: (d["class"], d["repredicted"]) for n, d in by.items()} == {
        ALICE: (UNEXPLAINED, 0), BOB: (UNEXPLAINED, 2)}
    assert c.repredicted["explained"] == 0


def test_our_rule_broken_the_difference_stays_unexplained(tmp_path, monkeypatch):
    """Mutation of our side: an accountant whose time step does nothing (a real policy
    difference from the real accountant's half-life decay) predicts the capture's order
    at phase 2 too; the real cycle's is not reproduced, nothing is explained."""
    from negotiator_ext.core.accountant import Accountant
    monkeypatch.setattr(Accountant, "update_priorities", lambda self, now, *a, **kw: None)
    c = shadow_replay(tmp_path)
    assert c.unexplained_agreement == 0.5
    assert {d["class"] for d in c.disagreements} == {UNEXPLAINED}
    assert c.repredicted["explained"] == 0 and c.repredicted["unexplained"] == 2


def test_the_ledger_keeps_the_phase_2_time_of_each_real_cycle(tmp_path):
    shadow_replay(tmp_path)
    conn = sqlite3.connect(tmp_path / "l.sqlite")
    got = conn.execute('SELECT "time", accounting_time FROM real_cycles ORDER BY "time"').fetchall()
    assert (START, PHASE2) in got


# ---- submitter ads sent again between our capture and the real cycle ---------------------

def tie_pool(d: Path, captured_at: int, bob_heard: int) -> Path:
    """alice and bob at the same priority, one free slot: the negotiator breaks the tie by
    each submitter ad's LastHeardFrom % 1009 (submitterLessThan), whoever is first takes
    the slot. alice's ad was heard at T - 101 (1007 modulo 1009), bob's at `bob_heard`."""
    from poolmaker import submitters_for
    jobs = [job(1, i, "alice") for i in range(2)] + [job(2, i, "bob") for i in range(2)]
    subs = submitters_for(jobs)
    for s in subs:
        s["LastHeardFrom"] = T - 101 if s["Name"] == ALICE else bob_heard
    acc = [accounting(n, priority=0.5, factor=1.0, LastUpdate=T) for n in (ALICE, BOB)]
    return make_pool(d, slots=[slot("slot1@h")], jobs=jobs, submitters=subs,
                     accounting_ads=acc, captured_at=captured_at)


def tie_replay(tmp_path: Path, bob_heard_again: int):
    """Our capture at T (bob's ad heard at T - 100: 1008 modulo 1009, alice first), the
    real cycle at START giving the slot to bob, our next capture at T + 60 with bob's ad
    heard at `bob_heard_again`. The comparison of the first pass's cycle."""
    assert T % 1009 == 99           # (the residues above)

    def make(d: Path, at: int) -> Path:
        return tie_pool(d, at, T - 100 if at == T else bob_heard_again)
    assert counts(make(tmp_path / "alone", T), T) == {ALICE: 1}
    return shadow_replay(tmp_path, [("2.0", BOB, "slot1@h")], make=make)


def test_a_submitter_ad_sent_again_before_the_real_cycle_is_taken_by_the_rerun(tmp_path):
    """bench_real_pool.py --shape 1k-4: a schedd sent its submitter ads again between
    the loop's capture and the real cycle; the new LastHeardFrom turned the tie among
    equal priorities the other way. Our next capture shows the ad heard at T - 99 (0
    modulo 1009: bob first), before the cycle began: the re-run takes it, and gives both
    their real count."""
    c = tie_replay(tmp_path, T - 99)
    by = {d["submitter"]: d for d in c.disagreements}
    assert {n: (d["real"], d["shadow"], d["class"], d["repredicted"]) for n, d in by.items()} \
        == {ALICE: (0, 1, POOL_CHANGED, 0), BOB: (1, 0, POOL_CHANGED, 1)}
    assert c.unexplained_agreement == 1.0
    assert c.repredicted["heard_again"] == 1
    assert by[BOB]["changes"][0] == (
        "priorities moved between our capture and the real cycle's accounting (+45 s), and "
        "1 submitter ad(s) were sent again before the cycle began (LastHeardFrom, the "
        f"tie-break among equal priorities): our cycle re-run at {PHASE2} with them gives "
        "the real count")
    assert any("1 submitter ad(s) as their schedds sent them again before the real cycle "
               "began" in n for n in c.notes)


def test_a_submitter_ad_sent_again_after_the_real_cycle_began_is_not(tmp_path):
    """The same, bob's ad heard again only after the real cycle began (at T + 910, 0
    modulo 1009: bob first too, but the cycle read the older ad): not taken, and the
    difference stays unexplained (what the cycle read is not known)."""
    c = tie_replay(tmp_path, T + 910)
    assert (T + 910) % 1009 == 0 and T + 910 > START
    by = {d["submitter"]: d for d in c.disagreements}
    assert {n: d["class"] for n, d in by.items()} == {ALICE: UNEXPLAINED, BOB: UNEXPLAINED}
    assert "heard_again" not in c.repredicted


def test_a_submitter_ad_heard_again_at_the_cycles_start_second_is_taken(tmp_path):
    """bob's ad heard again at the very second the real cycle began (139 modulo 1009:
    bob first): the negotiator's query at the cycle's start is taken to have read it,
    as an ad heard before it is."""
    c = tie_replay(tmp_path, START)
    assert START % 1009 < (T - 101) % 1009
    by = {d["submitter"]: d for d in c.disagreements}
    assert {n: d["repredicted"] for n, d in by.items()} == {ALICE: 0, BOB: 1}
    assert c.repredicted["heard_again"] == 1 and c.unexplained_agreement == 1.0
