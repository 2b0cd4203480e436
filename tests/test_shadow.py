"""The shadow loop end to end against mocked bindings (tests/fakepool.py), replaying the
recorded real-pool fixtures: pass 1 sees the pool right before the real cycle (the
negotiator ad as it was then: the recorded ad's history shifted by one), pass 2 sees the
real negotiator's ad, accountant and MatchLog after it. The comparison of pass 1's cycle
with that real cycle must show the agreement the fixtures' summaries imply."""

from __future__ import annotations

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
from negotiator_ext.shadow import Busy, ShadowLoop, ShadowSettings, pass_lock

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
    assert third.comparison.source == "none"
    assert third.real_cycles == ()
    with open_ledger(loop.settings.ledger_url) as ledger:
        con_cycles = [r for r in ledger.passes()]
        assert len(con_cycles) == 3
    db = sqlite3.connect(loop.settings.ledger_url)
    times = [t for (t,) in db.execute("SELECT time FROM real_cycles")]
    assert len(times) == len(set(times))


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


def test_accounting_ad_without_its_priority_is_partial(tmp_path, mocker):
    fake = FakePool()
    bad = fake.accounting[0]
    for attr in ("Priority", "PriorityFactor"):
        if attr in bad:
            del bad[attr]
    _, loop = _loop(tmp_path, mocker, fake)
    rec = loop.run_pass()
    assert rec.status == "partial", rec.reason
    assert rec.reason


def test_clock_going_backwards_is_a_partial_pass(tmp_path, mocker):
    fake, loop = _loop(tmp_path, mocker)
    assert loop.run_pass().status == "complete"
    loop.clock.t -= 600
    rec = loop.run_pass()
    assert rec.status == "partial"
    assert "clock went backwards" in rec.reason
    with open_ledger(loop.settings.ledger_url) as ledger:
        assert len(ledger.passes()) == 2


def test_locked_ledger_raises_and_the_loop_goes_on(tmp_path, mocker):
    fake, loop = _loop(tmp_path, mocker)
    loop.run_pass()
    holder = sqlite3.connect(loop.settings.ledger_url, timeout=0)
    holder.execute("BEGIN EXCLUSIVE")
    mocker.patch("negotiator_ext.adapters.ledger.open_ledger",
                 side_effect=lambda url, **kw: open_ledger(url, lock_timeout=0.2))
    with pytest.raises(LedgerError, match="locked"):
        loop.run_pass()
    stop = threading.Event()
    errors = []
    loop.log = mocker.Mock()
    loop.log.error.side_effect = lambda *a: (errors.append(a), stop.set())
    loop.run_forever(stop)                     # logs, does not raise, stops on the event
    assert errors and "not recorded" in errors[0][0]
    holder.rollback()
    holder.close()
    with open_ledger(loop.settings.ledger_url) as ledger:
        assert len(ledger.passes()) == 1       # nothing lost, nothing half-written


def test_a_failure_while_recording_loses_only_that_pass(tmp_path, mocker):
    fake, loop = _loop(tmp_path, mocker)
    first = loop.run_pass()
    from negotiator_ext.adapters import ledger as ledger_mod
    real = ledger_mod.Ledger.record_pass

    def dies(self, rec):
        raise KeyboardInterrupt     # as a kill in the middle of the pass

    mocker.patch.object(ledger_mod.Ledger, "record_pass", dies)
    loop.clock.t += 60
    with pytest.raises(KeyboardInterrupt):
        loop.run_pass()
    mocker.patch.object(ledger_mod.Ledger, "record_pass", real)
    loop.clock.t += 60
    third = loop.run_pass()
    with open_ledger(loop.settings.ledger_url) as ledger:
        assert [r["uuid"] for r in ledger.passes()] == [first.uuid, third.uuid]
    assert third.comparison.shadow_pass == first.uuid


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
    assert "complete" in out and "shadow matches 27" in out
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
    assert "real matches 27" in out[1] and "per-submitter count agreement 100%" in out[1]
    assert "up to identical slots 100%" in out[1]
    assert "max priority drift 0.00%" in out[1]
    assert main(["ledger", "show", "--ledger", str(ledger)]) == 0
    table = capsys.readouterr().out.splitlines()
    assert len(table) == 4 and "partial" in table[2] and "complete" in table[3]
    assert "100%" in table[3]
    assert main(["ledger", "export", "--ledger", str(ledger), "--format", "csv",
                 "-o", str(tmp_path / "csv")]) == 0
    assert (tmp_path / "csv" / "comparisons.csv").is_file()
