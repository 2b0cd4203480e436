"""The shadow loop end to end against mocked bindings (tests/fakepool.py), replaying the
recorded real-pool fixtures: pass 1 sees the pool right before the real cycle (the
negotiator ad as it was then: the recorded ad's history shifted by one), pass 2 sees the
real negotiator's ad, accountant and MatchLog after it. The comparison of pass 1's cycle
with that real cycle must show the agreement the fixtures' summaries imply."""

from __future__ import annotations

import dataclasses
import json
import re
import sqlite3
import threading
from pathlib import Path

import classad2
import pytest

from fakepool import FIXTURES, FakePool, fixture_ads
from negotiator_ext.adapters.ledger import LedgerError, open_ledger
from negotiator_ext.cli import main
from negotiator_ext.errors import InputError
from negotiator_ext.shadow_state import Busy, ShadowSettings, pass_lock
from negotiator_ext.shadow import ShadowLoop

SCENARIOS = sorted(p.name for p in FIXTURES.iterdir() if (p / "expected").is_dir())
_HIST = re.compile(r"^(LastNegotiationCycle\w*?)(\d+)$")


def negotiator_ad_before(ad: classad2.ClassAd) -> classad2.ClassAd:
    """The negotiator's ad as it was before its newest cycle: history entry k+1 becomes k,
    the newest entry is dropped."""
    out = classad2.ClassAd()
    for k in ad.keys():
        m = _HIST.match(k)
        if m is None:
            out[k] = ad.lookup(k)
        elif int(m.group(2)) >= 1:
            out[f"{m.group(1)}{int(m.group(2)) - 1}"] = ad.lookup(k)
    return out


def meta(fix: Path) -> dict:
    return json.loads((fix / "meta.json").read_text())


class Clock:
    def __init__(self, t: float):
        self.t = float(t)

    def __call__(self) -> float:
        return self.t


def settings(tmp_path: Path, **kw) -> ShadowSettings:
    knobs = {"STATE_DIR": str(tmp_path / "state"), "ADVERTISE": "false"}
    return ShadowSettings.from_knobs(knobs, **kw)


def replay(tmp_path, mocker, scenario: str, *, matchlog: bool = True):
    """Two passes over a fixture: before and after its real cycle."""
    fix = FIXTURES / scenario
    fake = FakePool(fix).install(mocker)
    fake.negotiator = [negotiator_ad_before(fixture_ads("expected/negotiator.ads", fix)[0])]
    t0 = meta(fix)["captured_at"]
    clock = Clock(t0)
    s = settings(tmp_path, matchlog=str(fix / "expected" / "matchlog.txt") if matchlog else None,
                 matchlog_tz="UTC")   # the recorded MatchLogs were written in UTC
    import htcondor2
    loop = ShadowLoop(s, htcondor=htcondor2, clock=clock)
    first = loop.run_pass()
    fake.negotiator = fixture_ads("expected/negotiator.ads", fix)
    fake.accounting = fixture_ads("expected/accounting-after.ads", fix)
    clock.t = t0 + 30
    second = loop.run_pass()
    return fix, fake, loop, first, second


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_replayed_fixture_gives_comparison_with_agreement(tmp_path, mocker, scenario):
    fix, _, loop, first, second = replay(tmp_path, mocker, scenario)
    summary = json.loads((fix / "expected" / "summary.json").read_text())
    assert first.status == "complete", first.reason
    assert second.status == "complete", second.reason
    assert first.comparison is None            # nothing before it to compare
    assert first.pool_weight > 0
    assert all(m.wait is not None and m.wait >= 0 for m in first.shadow_matches)
    c = second.comparison
    assert c is not None and c.shadow_pass == first.uuid
    assert c.source == "matchlog"
    assert c.real_cycle_time == meta(fix)["captured_at"]
    n_real = sum(1 for line in (fix / "expected" / "matchlog.txt").read_text().splitlines()
                 if "\tMatched " in line or " Matched " in line)
    assert c.real_matches == n_real
    assert c.shadow_matches == len(first.shadow_matches) == n_real
    # our per-submitter counts agree with the real cycle's on every fixture
    assert c.count_agreement == pytest.approx(1.0)
    real_by_sub = {k: v["real"] for k, v in c.per_submitter.items() if v.get("real")}
    assert real_by_sub == {k: v for k, v in summary["matched_by_submitter"].items() if v}
    assert 0.0 < c.real_in_shadow <= 1.0 and 0.0 < c.shadow_in_real <= 1.0
    # the real negotiator's choice among identical slots is arbitrary: up to identical
    # slots, ours made every real match
    assert c.agreed_equivalent == n_real and c.equivalent_agreement == pytest.approx(1.0)
    # the first spin's share and SubmitterLimit, as the real accountant published them
    for name, row in c.per_submitter.items():
        if row["real_share"] is not None and row["shadow_share"] is not None:
            assert (name, row["shadow_share"]) == (name, pytest.approx(row["real_share"]))
            assert (name, row["shadow_limit"]) == (name, pytest.approx(row["real_limit"]))
    # each group's weighted usage after the real cycle and after ours; 25.14 keeps
    # charging a preempted claim until the next cycle, we drop it at once (README,
    # "Fidelity notes"): with unit slot weights, the real figure is ours + the preemptions
    preempted = summary["preemptions"]     # 0 but in preempt_priority (root group only)
    for name, row in c.per_group.items():
        if row["real_usage_after"] is not None and row["shadow_usage_after"] is not None:
            assert (name, row["shadow_usage_after"] + preempted) == (
                name, pytest.approx(row["real_usage_after"]))
    # our accountant's priorities agree with the real accountant after its step
    assert c.max_abs_drift is not None and c.max_abs_drift < 1e-6
    with open_ledger(loop.settings.ledger_url) as ledger:
        rows = ledger.passes()
        assert [r["uuid"] for r in rows] == [first.uuid, second.uuid]
        assert ledger.comparison(second.uuid) == c
        assert len(ledger.real_matches(second.uuid)) == n_real


def test_without_matchlog_agreement_is_by_counts_only(tmp_path, mocker):
    _, _, _, _, second = replay(tmp_path, mocker, "hgq_nested_hep_lep_surplus", matchlog=False)
    c = second.comparison
    assert c.source == "negotiator-ad"
    assert c.real_matches == 27
    assert c.real_in_shadow is None and c.agreed is None


def test_a_pass_without_a_new_real_cycle_compares_nothing_and_records_no_duplicate(tmp_path, mocker):
    _, fake, loop, first, second = replay(tmp_path, mocker, "pie_three_submitters")
    loop.clock.t += 30          # no new real cycle since pass 2
    third = loop.run_pass()
    assert third.status == "complete"
    assert third.comparison is None and third.real_cycles == () and third.real_matches == ()
    with open_ledger(loop.settings.ledger_url) as ledger:
        heads = ledger.passes()
        assert [h["n_real_cycles"] for h in heads] == [2, 1, 0]
        assert [h["n_comparisons"] for h in heads] == [0, 1, 0]
        # pass 3's cycle waits for the next real cycle: nobody compared it yet
        assert not ledger.compared(third.uuid) and ledger.compared(first.uuid)


def test_a_cycle_is_compared_once_even_when_a_partial_pass_comes_between(tmp_path, mocker):
    """Pass A (comparable), then B partial (a schedd timed out) seeing the real cycle X,
    then C: X is compared with A once (by B), never again with 0 matches (by C)."""
    fix, fake, loop, first, second = replay(tmp_path, mocker, "hgq_nested_hep_lep_surplus")
    assert second.comparison.shadow_pass == first.uuid
    fake.schedds["vm"] = TimeoutError("Timeout while reading from schedd")
    loop.clock.t += 30
    third = loop.run_pass()
    assert third.status == "partial" and third.comparison is None


def test_a_pass_without_the_negotiator_ad_leaves_the_comparison_to_the_next(tmp_path, mocker):
    """Pass A before the real cycle X; pass B after X but without the negotiator's ad
    (query failed); pass C sees X: A's cycle is compared with X (B's snapshot came after
    X, so B did not predict it)."""
    import htcondor2
    fix = FIXTURES / "hgq_nested_hep_lep_surplus"
    fake = FakePool(fix).install(mocker)
    before = negotiator_ad_before(fixture_ads("expected/negotiator.ads", fix)[0])
    fake.negotiator = [before]
    t0 = meta(fix)["captured_at"]
    loop = ShadowLoop(settings(tmp_path, matchlog=str(fix / "expected" / "matchlog.txt"),
                               matchlog_tz="UTC"), htcondor=htcondor2, clock=Clock(t0))
    a = loop.run_pass()
    fake.query_errors[htcondor2.AdTypes.Negotiator] = RuntimeError("negotiator ad query failed")
    fake.accounting = fixture_ads("expected/accounting-after.ads", fix)
    loop.clock.t = t0 + 30
    b = loop.run_pass()
    assert b.status == "partial" and b.comparison is None
    del fake.query_errors[htcondor2.AdTypes.Negotiator]
    fake.negotiator = fixture_ads("expected/negotiator.ads", fix)
    loop.clock.t = t0 + 60
    c = loop.run_pass()
    assert c.comparison is not None and c.comparison.shadow_pass == a.uuid
    assert c.comparison.real_matches == 27 and c.comparison.equivalent_agreement == 1.0


def test_matchlog_lines_after_the_snapshot_but_within_the_cycle_are_read(tmp_path, mocker):
    """The MatchLog window is the new real cycles' [start, end], not the pass's time: a
    cycle that ended after the snapshot was taken loses no line."""
    fix = FIXTURES / "pslot_consumption_policy_cpu"   # its matches are logged at its end second
    _, _, _, first, second = replay(tmp_path, mocker, fix.name)
    cyc = fixture_ads("expected/negotiator.ads", fix)[0]
    assert cyc["LastNegotiationCycleEnd0"] > cyc["LastNegotiationCycleTime0"]
    assert second.comparison.real_matches == 5 and len(second.real_matches) == 5


def test_a_history_too_short_to_reach_back_is_a_gap_not_a_wrong_comparison(tmp_path, mocker):
    import htcondor2
    fix = FIXTURES / "hgq_nested_hep_lep_surplus"
    fake = FakePool(fix).install(mocker)
    ad = fixture_ads("expected/negotiator.ads", fix)[0]
    old = classad2.ClassAd()      # an ad whose newest cycle is long before the recorded ones
    old["Name"] = ad["Name"]
    old["LastNegotiationCycleTime0"] = 1795260000
    old["LastNegotiationCycleEnd0"] = 1795260001
    fake.negotiator = [old]
    t0 = meta(fix)["captured_at"]
    # pass 1 before all three recorded cycles: the cycle that followed it is not listed
    loop = ShadowLoop(settings(tmp_path), htcondor=htcondor2, clock=Clock(1795265240))
    loop.run_pass()
    fake.negotiator = [ad]
    loop.clock.t = t0 + 30
    rec = loop.run_pass()
    assert rec.comparison.source == "gap"
    assert rec.comparison.real_matches is None and rec.comparison.count_agreement is None
    assert "NEGOTIATION_CYCLE_STATS_LENGTH" in rec.comparison.notes[0]


# ---- faults --------------------------------------------------------------------------------

def _loop(tmp_path, mocker, fake=None, t=1795265266):
    fake = fake or FakePool()
    fake.install(mocker)
    import htcondor2
    return fake, ShadowLoop(settings(tmp_path), htcondor=htcondor2, clock=Clock(t))


def test_collector_unreachable_is_a_recorded_failed_pass(tmp_path, mocker):
    fake = FakePool()
    fake.collector_error = RuntimeError("Failed communication with collector")
    _, loop = _loop(tmp_path, mocker, fake)
    rec = loop.run_pass()
    assert rec.status == "failed"
    assert "Failed communication with collector" in rec.reason
    with open_ledger(loop.settings.ledger_url) as ledger:
        assert [r["status"] for r in ledger.passes()] == ["failed"]


def test_schedd_timeout_is_a_partial_pass_and_not_compared_for_recommendations(tmp_path, mocker):
    fake = FakePool()
    fake.schedds["vm"] = TimeoutError("Timeout while reading from schedd")
    _, loop = _loop(tmp_path, mocker, fake)
    rec = loop.run_pass()
    assert rec.status == "partial"
    assert "vm" in rec.reason
    with open_ledger(loop.settings.ledger_url) as ledger:
        assert ledger.window(0) == []          # partial passes feed no recommendation
        assert ledger.last_pass(status="complete") is None


def test_missing_negotiator_ad_is_partial(tmp_path, mocker):
    import htcondor2
    fake = FakePool()
    fake.query_errors[htcondor2.AdTypes.Negotiator] = RuntimeError("no negotiator")
    _, loop = _loop(tmp_path, mocker, fake)
    rec = loop.run_pass()
    assert rec.status == "partial"
    assert "negotiator" in rec.reason
    assert rec.comparable          # the snapshot was whole: a later pass compares our cycle
    assert rec.comparison is None and rec.real_cycles == ()


def test_accounting_ad_without_its_priority_is_partial(tmp_path, mocker):
    fake = FakePool()
    bad = fake.accounting[0]
    for attr in ("Priority", "PriorityFactor"):
        if attr in bad:
            del bad[attr]
    _, loop = _loop(tmp_path, mocker, fake)
    rec = loop.run_pass()
    assert rec.status == "partial", rec.reason
    assert "Priority" in rec.reason
    assert not rec.comparable      # our cycle started that record from scratch


def test_clock_going_backwards_is_a_partial_pass(tmp_path, mocker):
    fake, loop = _loop(tmp_path, mocker)
    assert loop.run_pass().status == "complete"
    loop.clock.t -= 600
    rec = loop.run_pass()
    assert rec.status == "partial"
    assert "clock went backwards" in rec.reason
    assert not rec.comparable and rec.slot_classes == {}
    with open_ledger(loop.settings.ledger_url) as ledger:
        assert len(ledger.passes()) == 2


def test_locked_ledger_raises_and_the_loop_goes_on(tmp_path, mocker):
    fake, loop = _loop(tmp_path, mocker)
    loop.run_pass()
    holder = sqlite3.connect(loop.settings.ledger_url, timeout=0)
    holder.execute("BEGIN EXCLUSIVE")
    mocker.patch("negotiator_ext.adapters.ledger.open_ledger",
                 side_effect=lambda url, **kw: open_ledger(url, lock_timeout=0.2))
    with pytest.raises(LedgerError, match="locked") as e:
        loop.run_pass()
    assert e.value.transient
    stop = threading.Event()
    warnings = []
    loop.log = mocker.Mock()
    loop.log.warning.side_effect = lambda *a: (warnings.append(a), stop.set())
    loop.run_forever(stop)                     # logs, does not raise, stops on the event
    assert warnings and "not recorded" in warnings[0][0]
    loop.log.error.assert_not_called()
    holder.rollback()
    holder.close()
    with open_ledger(loop.settings.ledger_url) as ledger:
        assert len(ledger.passes()) == 1       # nothing lost, nothing half-written


def _count_passes(loop, mocker, stop, limit=3, before=None):
    """Wrap loop.run_pass: count the passes, call `before(n)` first, and set `stop` after
    `limit` of them (a loop that does not end by itself then ends, failing the test
    instead of hanging it)."""
    real = loop.run_pass
    calls = []

    def counted(*a, **kw):
        calls.append(1)
        if before is not None:
            before(len(calls))
        if len(calls) >= limit:
            stop.set()
        return real(*a, **kw)

    mocker.patch.object(loop, "run_pass", side_effect=counted)
    return calls


def test_a_locked_ledger_is_logged_when_it_starts_and_when_it_clears(tmp_path, mocker):
    fake = FakePool()
    fake.install(mocker)
    import htcondor2
    loop = ShadowLoop(dataclasses.replace(settings(tmp_path), interval=0.01),
                      htcondor=htcondor2, clock=Clock(1795265266))
    loop.run_pass()
    holder = sqlite3.connect(loop.settings.ledger_url, timeout=0)
    holder.execute("BEGIN EXCLUSIVE")
    mocker.patch("negotiator_ext.adapters.ledger.open_ledger",
                 side_effect=lambda url, **kw: open_ledger(url, lock_timeout=0.05))
    stop = threading.Event()

    def before(n):
        loop.clock.t += 60
        if n == 4:                             # three passes found it locked
            holder.rollback()
            holder.close()

    calls = _count_passes(loop, mocker, stop, limit=5, before=before)
    loop.log = mocker.Mock()
    recorded = []
    loop.run_forever(stop, on_pass=recorded.append)
    assert len(calls) == 5 and len(recorded) == 2
    assert loop.log.warning.call_count == 1    # once when it started, not every pass
    fmt, *args = loop.log.warning.call_args[0]
    assert (fmt % tuple(args)).startswith(f"pass not recorded: {loop.settings.ledger_url}: "
                                          "is locked by another process (waited 0.05 s)")
    assert (fmt % tuple(args)).endswith("; trying again every 0.01 s")
    assert loop.log.debug.call_count == 2      # the passes in between: debug only
    assert "ledger not written since" in loop.log.debug.call_args[0][0]
    assert loop.log.info.call_count == 1       # once when it cleared
    fmt, *args = loop.log.info.call_args[0]
    assert (fmt % tuple(args)).startswith(f"ledger {loop.settings.ledger_url} written again "
                                          "(it was not since ")
    loop.log.error.assert_not_called()
    loop.log.exception.assert_not_called()
    with open_ledger(loop.settings.ledger_url) as ledger:
        assert len(ledger.passes()) == 3


@pytest.mark.parametrize("damage", ["newer schema", "not a database", "no directory"])
def test_an_unwritable_ledger_ends_the_loop_after_the_first_failed_pass(tmp_path, mocker,
                                                                         damage):
    fake = FakePool()
    fake.install(mocker)
    import htcondor2
    s = dataclasses.replace(settings(tmp_path), interval=0.01)
    if damage == "no directory":
        (tmp_path / "file").write_text("x")
        s = dataclasses.replace(s, ledger_url=str(tmp_path / "file" / "sub" / "ledger.sqlite"))
    loop = ShadowLoop(s, htcondor=htcondor2, clock=Clock(1795265266))
    if damage == "newer schema":
        loop.run_pass()
        db = sqlite3.connect(s.ledger_url)
        db.execute("UPDATE ledger_meta SET value = '999' WHERE key = 'schema_version'")
        db.commit()
        db.close()
    elif damage == "not a database":
        Path(s.ledger_url).parent.mkdir(parents=True)
        Path(s.ledger_url).write_bytes(b"not a ledger\n" * 500)
    stop = threading.Event()
    calls = _count_passes(loop, mocker, stop)
    loop.log = mocker.Mock()
    recorded = []
    with pytest.raises(LedgerError) as e:
        loop.run_forever(stop, on_pass=recorded.append)
    assert len(calls) == 1 and recorded == [] and not stop.is_set()
    assert not e.value.transient and "\n" not in str(e.value)
    assert str(e.value).startswith(s.ledger_url + ": ")
    assert {"newer schema": "ledger schema version 999 is newer",
            "not a database": "is not a ledger database",
            "no directory": "cannot create the directory"}[damage] in str(e.value)
    assert loop.log.mock_calls == []           # raised for the caller to report, not logged


def test_shadow_interval_command_stops_on_an_unwritable_ledger(tmp_path, mocker, capsys):
    """`shadow --interval` with a ledger it cannot write: one line on stderr, status 2,
    after the first pass (not a pass every interval for ever)."""
    import signal
    FakePool().install(mocker)
    ledger = tmp_path / "ledger.sqlite"
    ledger.write_bytes(b"not a ledger\n" * 500)
    passes = []
    real = ShadowLoop.run_pass

    def counted(self, *a, **kw):
        passes.append(1)
        if len(passes) > 3:
            raise KeyboardInterrupt            # the loop went on: end it, fail below
        return real(self, *a, **kw)

    mocker.patch.object(ShadowLoop, "run_pass", counted)
    old = signal.getsignal(signal.SIGTERM)
    try:
        rc = main(["shadow", "--interval", "1", "--state-dir", str(tmp_path / "state"),
                   "--ledger", str(ledger), "--no-advertise"])
    finally:
        signal.signal(signal.SIGTERM, old)
    out, err = capsys.readouterr()
    assert (rc, len(passes), out) == (2, 1, "")
    assert err == (f"negotiator-ext: error: {ledger}: is not a ledger database (corrupt, or "
                   "not an SQLite file)\n")


def test_a_failure_while_recording_loses_only_that_pass(tmp_path, mocker):
    """A kill in the middle of the pass's transaction (here: while its submitter rows
    are written) leaves the ledger as it was; the next pass is recorded whole."""
    fake, loop = _loop(tmp_path, mocker)
    first = loop.run_pass()
    from negotiator_ext.adapters import ledger as ledger_mod
    real = ledger_mod.Ledger._insert_rows

    def dies(self, table, rows, *cols):
        if table == "submitters":
            raise KeyboardInterrupt     # as a kill after the header and matches were written
        return real(self, table, rows, *cols)

    mocker.patch.object(ledger_mod.Ledger, "_insert_rows", dies)
    loop.clock.t += 60
    with pytest.raises(KeyboardInterrupt):
        loop.run_pass()
    mocker.patch.object(ledger_mod.Ledger, "_insert_rows", real)
    loop.clock.t += 60
    third = loop.run_pass()
    with open_ledger(loop.settings.ledger_url) as ledger:
        assert [r["uuid"] for r in ledger.passes()] == [first.uuid, third.uuid]
        assert ledger.verify() == []
        assert len(ledger.shadow_matches(third.uuid)) == len(third.shadow_matches) > 0


def test_newer_ledger_schema_is_refused_by_name(tmp_path, mocker):
    fake, loop = _loop(tmp_path, mocker)
    loop.run_pass()
    db = sqlite3.connect(loop.settings.ledger_url)
    db.execute("UPDATE ledger_meta SET value = '999' WHERE key = 'schema_version'")
    db.commit()
    db.close()
    with pytest.raises(LedgerError, match="999"):
        loop.run_pass()


def test_two_passes_never_overlap(tmp_path):
    state = tmp_path / "state"
    with pass_lock(state):
        with pytest.raises(Busy):
            with pass_lock(state):
                pass
    with pass_lock(state):      # released
        pass


def test_settings_refuse_bad_knobs(tmp_path):
    with pytest.raises(InputError, match="NEGOTIATOR_EXT_INTERVAL"):
        ShadowSettings.from_knobs({"STATE_DIR": str(tmp_path), "INTERVAL": "soon"})
    with pytest.raises(InputError, match="NEGOTIATOR_EXT_STATE_DIR"):
        ShadowSettings.from_knobs({})
    with pytest.raises(InputError, match="NEGOTIATOR_EXT_ADVERTISE"):
        ShadowSettings.from_knobs({"STATE_DIR": str(tmp_path), "ADVERTISE": "maybe"})
    s = ShadowSettings.from_knobs({"STATE_DIR": str(tmp_path), "INTERVAL": "120"}, interval=30)
    assert s.interval == 30 and s.ledger_url == str(tmp_path / "ledger.sqlite")


# ---- the command ---------------------------------------------------------------------------

def test_shadow_once_command_with_mocked_bindings(tmp_path, mocker, capsys):
    FakePool().install(mocker)
    mocker.patch("time.time", return_value=1795265266.0)
    state = tmp_path / "state"
    rc = main(["shadow", "--once", "--state-dir", str(state), "--no-advertise",
               "--metrics-file", str(tmp_path / "m.prom")])
    out = capsys.readouterr().out
    assert rc == 0
    assert "complete" in out and "our cycle: 27 matches" in out
    assert (state / "ledger.sqlite").is_file()
    assert len(list((state / "snapshots").iterdir())) == 1
    assert "negotiator_ext_pass_complete 1.0" in (tmp_path / "m.prom").read_text()


EXAMPLE = Path(__file__).parent.parent / "examples" / "hgq_nested_hep_lep_surplus"


def test_shadow_replay_of_the_bundled_example_and_ledger_show(tmp_path, capsys):
    """The README's replay: the example before its real cycle (no negotiator ad was
    recorded then: partial on the real side, but our cycle is sound and compared), then
    after-cycle/ with the real negotiator's ad and accountant, and the MatchLog."""
    ledger = tmp_path / "l.sqlite"
    rc = main(["shadow", "--replay", str(EXAMPLE / "after-cycle"), str(EXAMPLE),
               "--ledger", str(ledger), "--matchlog", str(EXAMPLE / "expected" / "matchlog.txt"),
               "--matchlog-timezone", "UTC"])
    assert rc == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("pass ") and "partial" in out[0] and "no negotiator ad" in out[0]
    assert "complete" in out[1]
    assert "real matches 27, ours 27" in out[1] and "per-submitter counts 100%" in out[1]
    assert "unexplained only 100%" in out[1]
    assert "against the real cycle at 2026-11-21 12:47:46 UTC (1795265266): " in out[1]
    assert "agreement up to identical slots 100%" in out[1]
    assert "max priority drift 0.00%" in out[1]
    assert main(["ledger", "show", "--ledger", str(ledger)]) == 0
    table, legend = capsys.readouterr().out.split("\n\n")
    table = table.splitlines()
    assert len(table) == 4 and "partial" in table[2] and "complete" in table[3]
    # every column is explained in the legend after the table (none is HTCondor's own)
    explained = {ln.split()[0] for ln in legend.splitlines()
                 if ln.startswith("    ") and not ln.startswith("     ")}
    assert set(table[0].replace("Started (UTC)", "Started").split()) - explained == {"Started"}
    # the row of pass 1 shows its cycle against the real cycle (compared by pass 2)
    assert table[2].split()[3:12] == ["partial", "27", "27", "100%", "41%", "41%", "100%",
                                      "100%", "0.00%"]
    assert "%" not in table[3]                  # pass 2's cycle: no real cycle after it yet
    assert main(["ledger", "export", "--ledger", str(ledger), "--format", "csv",
                 "-o", str(tmp_path / "csv")]) == 0
    assert (tmp_path / "csv" / "comparisons.csv").is_file()


def test_prune_snapshots_keeps_the_newest_epoch_directories_only(tmp_path):
    from negotiator_ext.shadow_state import prune_snapshots
    for name in ("100", "200", "200-abcdef12", "300", "notes", ".capture-tmp"):
        (tmp_path / name).mkdir()
    (tmp_path / "400").write_text("a file, not a snapshot")
    prune_snapshots(tmp_path, 2, exclude=tmp_path / "100")
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        ".capture-tmp", "100", "200-abcdef12", "300", "400", "notes"]
    prune_snapshots(tmp_path, 0)                      # 0 keeps all
    assert len(list(tmp_path.iterdir())) == 6


def test_snapshot_keep_prunes_beside_the_new_snapshot(tmp_path, mocker, capsys):
    FakePool().install(mocker)
    root = tmp_path / "snapshots"
    for t in (100, 200, 300):
        (root / str(t)).mkdir(parents=True)
        (root / str(t) / "meta.json").write_text("{}")
    conf = tmp_path / "c.conf"
    conf.write_text("NEGOTIATOR_EXT_KEEP_SNAPSHOTS = 2\n")
    assert main(["snapshot", "-o", str(root / "400"), "--keep", "--config", str(conf)]) == 0
    assert sorted(p.name for p in root.iterdir()) == ["300", "400"]
    assert main(["snapshot", "-o", str(root / "500"), "--keep", "0", "--config", str(conf)]) == 0
    assert sorted(p.name for p in root.iterdir()) == ["300", "400", "500"]


def test_retention_counts_from_the_older_of_this_and_the_last_pass(tmp_path, mocker):
    """Passes older than RETENTION_DAYS go after a complete pass, counted back from the
    earlier of this pass and the one before, so a clock far ahead cannot empty the
    ledger; a partial pass prunes nothing."""
    fake = FakePool().install(mocker)
    import htcondor2
    s = ShadowSettings.from_knobs({"STATE_DIR": str(tmp_path / "state"), "ADVERTISE": "false",
                                   "RETENTION_DAYS": "1"})
    loop = ShadowLoop(s, htcondor=htcondor2, clock=Clock(1795265266))
    day = 86400
    first = loop.run_pass()
    loop.clock.t += 0.5 * day
    second = loop.run_pass()
    loop.clock.t += 30 * day            # the clock jumps a month ahead
    third = loop.run_pass()
    with open_ledger(s.ledger_url) as ledger:
        # counted from the second pass (half a day after the first): nothing is old enough
        assert [p["uuid"] for p in ledger.passes()] == [first.uuid, second.uuid, third.uuid]
    fake.schedds["vm"] = TimeoutError("Timeout while reading from schedd")
    loop.clock.t += 2 * day
    assert loop.run_pass().status == "partial"
    with open_ledger(s.ledger_url) as ledger:
        assert len(ledger.passes()) == 4          # a partial pass prunes nothing
    del fake.schedds["vm"]
    fake.schedds["vm"] = fixture_ads("jobs.ads")
    loop.clock.t += 60
    loop.run_pass()
    with open_ledger(s.ledger_url) as ledger:
        # counted from the partial pass before it, a day ago and more: the first three go
        assert len(ledger.passes()) == 2


def test_job_waits_are_each_matched_jobs_idle_time(tmp_path):
    """job_waits reads the matched job's EnteredCurrentStatus from the queue the cycle
    was offered: exactly the cycle time minus it."""
    from negotiator_ext.cycle import run_cycle
    from negotiator_ext.pool import load_pool
    from negotiator_ext.shadow import job_waits
    fix = FIXTURES / "hgq_nested_hep_lep_surplus"
    result = run_cycle(load_pool(fix))
    entered = {f"{a['ClusterId']}.{a['ProcId']}": a["EnteredCurrentStatus"]
               for a in fixture_ads("jobs.ads", fix)}
    waits = job_waits(result)
    assert len(waits) == len(result.matches) == 27
    assert waits == [float(result.time - entered[m.assigned_job]) for m in result.matches]


def test_a_bad_ledger_url_changes_nothing_on_disk(tmp_path, capsys):
    state = tmp_path / "state"
    rc = main(["shadow", "--once", "--state-dir", str(state), "--no-advertise",
               "--ledger", "mysql://admin@db/ledger"])
    assert rc == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "sqlite:////absolute/path" in line
    assert not state.exists()           # no state directory, no lock file


def test_the_negotiator_log_is_read_back_to_the_last_pass_and_the_newest_cycle():
    from negotiator_ext.shadow import _Pass
    assert _Pass.log_since(None, 0, 1000) == 1000                       # a first pass
    assert _Pass.log_since({"snapshot_time": 900, "started_at": 900.5}, 950, 1000) == 900
    assert _Pass.log_since({"snapshot_time": None, "started_at": 980.7}, 950, 1000) == 950
    assert _Pass.log_since({"snapshot_time": 990, "started_at": 990.0}, 0, None) == 990
    assert _Pass.log_since(None, 0, None) == 0


def test_a_pass_pauses_the_cyclic_collector_and_restores_it(monkeypatch):
    """A pass runs with Python's cyclic collector off (limits.paused_gc) and leaves it as
    it found it, with the cycles the pass made collected."""
    import gc

    from negotiator_ext.limits import paused_gc

    class Cycle:
        pass

    assert gc.isenabled()
    with paused_gc():
        assert not gc.isenabled()
        a = Cycle()
        a.me = a
        del a
    assert gc.isenabled()
    assert not any(type(o) is Cycle for o in gc.get_objects())
    gc.disable()
    try:
        with paused_gc():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_a_one_shot_command_skips_the_last_collection():
    """`negotiate` ends its process with the block: paused_gc(collect=False) turns the
    collector back on without a collection over the pool it still holds."""
    import gc

    from negotiator_ext.limits import paused_gc

    class Cycle:
        pass

    gc.collect()
    with paused_gc(collect=False):
        assert not gc.isenabled()
        a = Cycle()
        a.me = a
        del a
    assert gc.isenabled()
    try:
        assert any(type(o) is Cycle for o in gc.get_objects())
    finally:
        gc.collect()


def test_a_pass_record_as_plain_json_is_what_asdict_gives(tmp_path, mocker):
    """`shadow --json` prints records.as_plain(rec): the document dataclasses.asdict
    gives (which deep-copies every leaf, 0.4 s a pass at 11,000 matches)."""
    import dataclasses

    from negotiator_ext.core.records import as_plain
    _, _, _, first, second = replay(tmp_path, mocker, "hgq_nested_hep_lep_surplus")
    for rec in (first, second):
        assert rec.shadow_matches and (rec is first or rec.comparison is not None)
        plain = as_plain(rec)
        assert json.dumps(plain, default=str) == json.dumps(dataclasses.asdict(rec), default=str)
        assert isinstance(plain["shadow_matches"], list) and isinstance(plain["shadow_matches"][0], dict)


def test_after_a_failed_pass_the_metrics_keep_the_last_comparison(tmp_path, mocker):
    """Issue 16: a failed pass does not drop the agreement gauges; the metrics show the
    newest comparison with the time of the pass that made it, and the newest complete
    pass's time, from the ledger (ShadowLoop.standing)."""
    from negotiator_ext.shadow_publish import publish
    fix, fake, loop, first, second = replay(tmp_path, mocker, "hgq_nested_hep_lep_surplus")
    assert second.comparison is not None and second.status == "complete"
    assert loop.standing.comparison == second.comparison
    fake.collector_error = RuntimeError("Failed communication with collector")
    loop.clock.t += 60
    third = loop.run_pass()
    assert third.status == "failed" and third.comparison is None
    assert loop.standing.last_complete_at == second.started_at
    assert loop.standing.comparison == second.comparison
    assert loop.standing.comparison_at == second.started_at
    prom = tmp_path / "shadow.prom"
    settings = dataclasses.replace(loop.settings, metrics_file=prom, advertise=False)
    assert publish(third, settings, standing=loop.standing) == {}
    from prometheus_client.parser import text_string_to_metric_families
    got = {(x.name, tuple(sorted(x.labels.items()))): x.value
           for fam in text_string_to_metric_families(prom.read_text()) for x in fam.samples}
    assert got[("negotiator_ext_pass_failed", ())] == 1.0
    assert got[("negotiator_ext_last_complete_pass_timestamp_seconds", ())] == second.started_at
    assert got[("negotiator_ext_comparison_timestamp_seconds", ())] == second.started_at
    assert got[("negotiator_ext_match_agreement_ratio", (("direction", "equivalent"),))] == 1.0


def test_a_replay_writes_the_metrics_file_it_is_given(tmp_path):
    """Issue 16: `--metrics-file` with `--replay` is not ignored (the knob's file of a
    live loop is never written by a replay)."""
    from negotiator_ext import cli
    fix = FIXTURES / "hgq_nested_hep_lep_surplus"
    prom = tmp_path / "replay.prom"
    assert cli.main(["shadow", "--replay", str(fix), "--ledger", str(tmp_path / "l.sqlite"),
                     "--metrics-file", str(prom)]) == 0
    assert "negotiator_ext_pass_timestamp_seconds" in prom.read_text()


def test_a_replay_needs_no_state_directory_and_leaves_only_the_ledger(tmp_path, capsys):
    """Issue 35: `shadow --replay` captures nothing: it takes no --state-dir, and without
    one writes nothing beside the ledger (no shadow.lock). Without a ledger it names
    --ledger, not the state directory."""
    conf = tmp_path / "empty.conf"            # not this host's NEGOTIATOR_EXT_* knobs
    conf.write_text("")
    out = tmp_path / "out"
    out.mkdir()
    fix = FIXTURES / "hgq_nested_hep_lep_surplus"
    assert main(["shadow", "--replay", str(fix), "--ledger", str(out / "l.sqlite"),
                 "--config", str(conf)]) == 0
    assert "our cycle: 27 matches" in capsys.readouterr().out
    assert sorted(p.name for p in out.iterdir()) == ["l.sqlite"]
    # and reading it (the README's next commands) leaves no -wal or -shm beside it either
    for args in (["ledger", "show"], ["recommend", "--at", "1795265300"]):
        assert main([*args, "--ledger", str(out / "l.sqlite"), "--config", str(conf)]) == 0
        assert sorted(p.name for p in out.iterdir()) == ["l.sqlite"], args
    assert main(["shadow", "--replay", str(fix), "--config", str(conf)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--ledger" in err[0] and "state directory" in err[0]
    assert "STATE_DIR" not in err[0]
