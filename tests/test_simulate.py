"""The simulator on the shipped example scenarios (examples/scenarios/): the numbers the
manual and the seeds predict, the ledger it writes, the fast path's equivalence with the
full one, changes over time, and bad scenarios."""

from __future__ import annotations

import dataclasses
import io
import json
import re
import sqlite3
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from negotiator_ext.adapters.ledger import open_ledger
from negotiator_ext.cli import main
from negotiator_ext.errors import InputError
from negotiator_ext.scenario import SCHEMA, load_scenario, validate
from negotiator_ext.simulate import Simulation, progress_bar

ROOT = Path(__file__).parent.parent
SCENARIOS = ROOT / "examples" / "scenarios"
HOUR = 3600


def simulate(path: Path, tmp_path: Path, **changes):
    sc = load_scenario(path)
    if changes:
        sc = dataclasses.replace(sc, **changes)
    url = str(tmp_path / f"{sc.name}.sqlite")
    with open_ledger(url) as ledger:
        report = Simulation(sc, ledger).run()
    return sc, url, report


def rows(url: str, sql: str, *args):
    return sqlite3.connect(url).execute(sql, args).fetchall()


def at(sc, seconds: float) -> int:
    """The cycle time at or after `seconds` into the scenario."""
    n = -(-int(seconds) // sc.interval)
    return sc.start + n * sc.interval


def usage(url, t, name_like="%"):
    return {n.split("@")[0]: u for n, u in rows(
        url, "SELECT s.name, s.real_usage FROM submitters s JOIN passes p ON p.uuid = s.pass_uuid "
             "WHERE p.snapshot_time = ? AND s.is_group = 0 AND s.name LIKE ?", t, name_like)}


def sub_field(url, t, name, field):
    (v,), = rows(url, f"SELECT s.{field} FROM submitters s JOIN passes p ON p.uuid = s.pass_uuid "
                      "WHERE p.snapshot_time = ? AND s.name = ?", t, name)
    return v


def group_usage(url, t):
    return {n: u for n, u in rows(
        url, "SELECT g.name, g.real_usage FROM groups g JOIN passes p ON p.uuid = g.pass_uuid "
             "WHERE p.snapshot_time = ? AND g.name <> '<none>'", t)}


# ---- the manual's numbers ---------------------------------------------------------------

def test_two_users_the_manuals_example(two_users_run):
    """User A alone on 100 cores for 48 h of short jobs reaches a RUP of about 75; when B
    arrives, A's share drops below one core and then recovers toward half the pool.
    (Cycles every 5 minutes here to keep the test short: see conftest.two_users_run.)"""
    sc, url, report = two_users_run
    a = "a@sim.local"
    before = at(sc, 48 * HOUR) - sc.interval
    assert 74.5 <= sub_field(url, before, a, "real_rup") <= 75.5
    assert usage(url, before) == {"a": 100.0}
    arrival = at(sc, 48 * HOUR)
    # B's first cycle: the pie gives A 0.5 / 75 of B's entitlement: less than one core
    share = sub_field(url, arrival, a, "real_share")
    assert share * 100 < 1.0
    assert usage(url, arrival)["a"] <= 1.0 and usage(url, arrival)["b"] >= 99.0
    # then A recovers, toward half of the pool
    later = [usage(url, at(sc, h * HOUR))["a"] for h in (50, 54, 60)]
    assert later == sorted(later) and later[0] < later[-1]
    assert 20.0 <= later[-1] <= 50.0
    assert report.matches > 0 and report.preemptions == 0


def test_rup_growth_and_decay_the_manuals_figures(tmp_path):
    """A new user runs 100 cores for 24 h, then nothing: RUP 0.5 -> about 50 at 24 h, and
    it halves every day after (25 at 48 h, 12.5 at 72 h)."""
    sc, url, _ = simulate(SCENARIOS / "rup-growth-decay" / "scenario.yaml", tmp_path,
                          interval=600)
    a = "a@sim.local"
    rup = {h: sub_field(url, at(sc, h * HOUR), a, "real_rup") for h in (24, 48, 72)}
    assert rup[24] == pytest.approx(100 * 0.5 + 0.5 * 0.5, abs=0.01)      # 50.25
    assert rup[48] == pytest.approx(rup[24] / 2, abs=0.01)
    assert rup[72] == pytest.approx(rup[24] / 4, abs=0.01)


def test_group_quota_preemption_converges_to_5_5_5(tmp_path):
    sc, url, report = simulate(SCENARIOS / "group-quota-preemption" / "scenario.yaml", tmp_path)
    assert group_usage(url, at(sc, 9 * 60)) == {"A": 5.0, "B": 10.0, "C": 0.0}
    assert group_usage(url, at(sc, 10 * 60)) == {"A": 5.0, "B": 5.0, "C": 5.0}
    assert group_usage(url, sc.start + sc.span) == {"A": 5.0, "B": 5.0, "C": 5.0}
    assert report.preemptions == 5
    # who preempted whom: C's matches took B's slots, never A's
    victims = {p for (p,) in rows(url, "SELECT preempting FROM shadow_matches WHERE preempting IS NOT NULL")}
    assert victims and all(v.startswith("B.") for v in victims)


def test_round_robin_rate_ends_the_starvation(tmp_path):
    """Two groups both need the 20 big-memory slots: without a round-robin rate the first
    takes all 20; with one they share them."""
    one = 60 * 60
    sc, url, _ = simulate(SCENARIOS / "round-robin-starvation" / "round-robin-off.yaml", tmp_path,
                          span=one)
    off = group_usage(url, sc.start + one)
    assert sorted(off.values()) == [0.0, 20.0]
    sc, url, _ = simulate(SCENARIOS / "round-robin-starvation" / "scenario.yaml", tmp_path,
                          span=one)
    assert group_usage(url, sc.start + one) == {"group_a": 10.0, "group_b": 10.0}


def test_consumption_policy_loads_the_pool_in_one_cycle(tmp_path):
    sc, url, _ = simulate(SCENARIOS / "consumption-policy" / "scenario.yaml", tmp_path)
    assert rows(url, "SELECT snapshot_time - ?, n_shadow_matches FROM passes "
                     "WHERE n_shadow_matches > 0", sc.start) == [(0, 160)]
    sc, url, _ = simulate(SCENARIOS / "consumption-policy" / "consumption-policy-off.yaml", tmp_path)
    per_cycle = rows(url, "SELECT n_shadow_matches FROM passes WHERE n_shadow_matches > 0 "
                          "ORDER BY snapshot_time")
    assert per_cycle == [(10,)] * 16            # one match per p-slot per cycle


# ---- the ledger and the engine ------------------------------------------------------------

def test_the_ledger_holds_one_complete_pass_per_cycle_with_waits(tmp_path):
    sc, url, report = simulate(SCENARIOS / "group-quota-preemption" / "scenario.yaml", tmp_path)
    with open_ledger(url) as ledger:
        heads = ledger.passes(sc.pool_name)
        assert len(heads) == report.passes == sc.span // sc.interval + 1
        assert {h["status"] for h in heads} == {"complete"}
        assert ledger.verify() == []
        first = ledger.shadow_matches(heads[0]["uuid"])
        assert len(first) == 15 and all(m.wait == 0.0 for m in first)
        c_matches = [m for h in heads for m in ledger.shadow_matches(h["uuid"])
                     if m.submitter.startswith("C.")]
        assert [m.wait for m in c_matches] == [0.0] * 5    # C's jobs started as they arrived
        assert heads[0]["pool_weight"] == 15.0


def _matches(url):
    return rows(url, "SELECT p.snapshot_time, m.job, m.submitter, m.slot, m.preempting "
                     "FROM shadow_matches m JOIN passes p ON p.uuid = m.pass_uuid "
                     "ORDER BY p.snapshot_time, m.id")


def _both_ways(sc, tmp_path):
    out = []
    for shortcuts in (True, False):
        url = str(tmp_path / f"{sc.name}-{shortcuts}.sqlite")
        with open_ledger(url) as ledger:
            Simulation(sc, ledger, shortcuts=shortcuts).run()
        out.append(_matches(url))
    return out


def test_shortcuts_give_the_same_matches_as_offering_every_job_and_slot(tmp_path):
    """Offering only each job class's first jobs and leaving claimed slots out of the
    candidates changes nothing, cycle by cycle: on the benchmark pool (groups, surplus,
    partitionable slots)..."""
    sc = dataclasses.replace(load_scenario(ROOT / "bench" / "scenarios" / "week-1k.yaml"),
                             span=HOUR, interval=120)
    fast, full = _both_ways(sc, tmp_path)
    assert len(fast) > 500 and fast == full


@pytest.mark.parametrize("case", ["classes", "limits", "empty-preemption-requirements", "rank",
                                  "consumption-policy"])
def test_shortcuts_on_the_cases_they_could_get_wrong(tmp_path, case):
    """...and where they could go wrong: jobs at the head of the queue that cannot match
    (big-memory jobs ahead of small ones; a concurrency limit), priority preemption with
    an empty PREEMPTION_REQUIREMENTS (which allows it), a slot Rank preferring one user."""
    path = tmp_path / f"{case}.json"
    path.write_text(json.dumps(shortcut_case(case)))
    fast, full = _both_ways(load_scenario(path), tmp_path)
    assert fast == full
    if case == "classes":
        assert len(fast) == 12          # 2 big-memory jobs, and the 10 small ones behind
    if case == "limits":
        assert len(fast) == 10 + 2       # the limit lets 2 of the first class run
    if case == "empty-preemption-requirements":
        assert any(m[4] for m in fast)   # b preempts a
    if case == "consumption-policy":
        first = [m for m in fast if m[0] == fast[0][0]]
        assert len(fast) == 8 and len(first) == 8    # the 8 cpus, all in the first cycle
    if case == "rank":
        # b's jobs take a's 10 slots by rank, once each: b never preempts itself
        victims = [m[4] for m in fast if m[4]]
        assert len(victims) == 10 and all(v.startswith("a@") for v in victims)


def shortcut_case(case: str, duration: str = "2h") -> dict:
    """The scenarios of the cases a shortcut could get wrong (a's jobs run `duration`)."""
    doc = {"name": case, "span": "40m", "interval": 120, "knobs": {"DEFAULT_PRIO_FACTOR": 1},
           "slots": [{"count": 10, "name": "small", "memory": 2048},
                     {"count": 2, "name": "big", "memory": 65536}],
           "workload": [{"submitter": "a", "count": 20, "duration": duration, "memory": 32000},
                        {"submitter": "a", "count": 10, "duration": duration}]}
    if case == "limits":
        doc["knobs"]["X_LIMIT"] = 2
        doc["workload"][0] = {"submitter": "a", "count": 20, "duration": duration,
                              "concurrency_limits": "x"}
    if case == "empty-preemption-requirements":
        doc["knobs"]["PREEMPTION_REQUIREMENTS"] = ""
        doc["workload"].append({"submitter": "b", "at": "10m", "count": 12, "duration": "2h"})
        doc["changes"] = [{"at": "5m", "priority": {"submitter": "a", "value": 500}}]
    if case == "rank":
        doc["slots"] = [{"count": 10, "name": "r",
                         "attrs": {"Rank": 'TARGET.Owner == "b"'}}]
        # more of b's jobs than slots: the ones still idle must not preempt b's running
        # ones (a running job's slot ranks it 1, its CurrentRank)
        doc["workload"].append({"submitter": "b", "at": "10m", "count": 15, "duration": "2h"})
    if case == "consumption-policy":
        # a p-slot the negotiator matches again and again in one cycle (P4): as many of
        # a class's jobs offered as it can take, not one a slot
        doc["slots"] = [{"count": 1, "name": "cp", "cpus": 8, "memory": 16384,
                         "partitionable": True,
                         "attrs": {"MachineResources": '"Cpus Memory Disk"',
                                   "ConsumptionCpus": "TARGET.RequestCpus",
                                   "ConsumptionMemory": "TARGET.RequestMemory",
                                   "ConsumptionDisk": "TARGET.RequestDisk"}}]
        doc["workload"] = [{"submitter": "a", "count": 12, "duration": duration,
                            "memory": 1024}]
    return doc


def test_changes_slots_leave_and_join_and_a_factor(tmp_path):
    doc = {
        "name": "changes", "span": "2h", "interval": 300,
        "knobs": {"DEFAULT_PRIO_FACTOR": 1},
        "slots": [{"count": 10, "name": "old"}],
        "workload": [{"submitter": "u", "count": 100, "duration": "10h"}],
        "changes": [{"at": "30m", "slots_leave": {"prefix": "old", "count": 4}},
                    {"at": "1h", "slots_join": {"count": 3, "name": "new"}},
                    {"at": "90m", "factor": {"submitter": "u", "value": 5}}]}
    path = tmp_path / "changes.json"
    path.write_text(json.dumps(doc))
    sc, url, _ = simulate(path, tmp_path)
    assert usage(url, at(sc, 25 * 60))["u"] == 10.0
    assert usage(url, at(sc, 30 * 60))["u"] == 6.0        # 4 slots left, their jobs requeued
    assert usage(url, at(sc, 60 * 60))["u"] == 9.0        # 3 new ones taken at once
    assert sub_field(url, at(sc, 85 * 60), "u@sim.local", "factor") == 1.0
    assert sub_field(url, at(sc, 90 * 60), "u@sim.local", "factor") == 5.0
    assert sub_field(url, at(sc, 90 * 60), "u@sim.local", "idle_jobs") == 91


def test_a_recorded_snapshot_as_the_pool(tmp_path):
    doc = {"name": "from-snapshot", "span": "10m", "interval": 60,
           "pool_snapshot": str(ROOT / "tests" / "data" / "fixtures" / "pie_three_submitters"),
           "workload": [{"submitter": "x", "count": 100, "duration": "1h"}]}
    path = tmp_path / "snap.json"
    path.write_text(json.dumps(doc))
    sc = load_scenario(path)
    assert len(sc.slots) == 20 and sc.config_path is not None and sc.accountant is not None
    sc, url, report = simulate(path, tmp_path)
    assert report.matches == 20                # every recorded slot, claims dropped


def test_what_if_replay_of_recorded_snapshots(tmp_path, capsys):
    out = tmp_path / "whatif.sqlite"
    assert main(["simulate", str(SCENARIOS / "what-if-quota" / "scenario.yaml"), "-o", str(out),
                 "--no-progress"]) == 0
    assert "2 recorded snapshot(s) re-run" in capsys.readouterr().out
    by = dict(rows(str(out), "SELECT submitter, COUNT(*) FROM shadow_matches m JOIN passes p "
                             "ON p.uuid = m.pass_uuid WHERE p.snapshot_time = 1795265266 "
                             "GROUP BY submitter"))
    # the real negotiator matched 10 for chemistry under its quota of 10; with 20, 20
    assert by["group_chemistry.curie@refcondor.local"] == 20
    quota, = rows(str(out), "SELECT g.shadow_quota FROM groups g JOIN passes p ON p.uuid = g.pass_uuid "
                            "WHERE p.snapshot_time = 1795265266 AND g.name = 'group_chemistry'")
    assert quota == (20.0,)


# ---- the command, bad input ---------------------------------------------------------------

def test_simulate_command_and_refusing_to_mix_runs(tmp_path, capsys):
    out = tmp_path / "l.sqlite"
    args = ["simulate", str(SCENARIOS / "consumption-policy" / "scenario.yaml"), "-o", str(out),
            "--no-progress", "--json"]
    assert main(args) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["passes"] == 31 and doc["matches"] == 160 and doc["pool"] == "sim:consumption-policy"
    assert main(args) == 2
    assert "already holds passes of sim:consumption-policy" in capsys.readouterr().err


def test_every_problem_of_a_bad_scenario_is_listed_with_its_path(tmp_path):
    bad = {"name": "bad name!", "span": "soon", "slots": [{"count": 0, "cpus": -1}],
           "workload": [{"submitter": "a", "count": 5, "duration": {"exponential": "x"},
                         "repeat": 3, "colour": "red"}],
           "changes": [{"at": "1h"}]}
    errors = validate(bad)
    paths = [e.split(":")[0] for e in errors]
    for want in ("name", "span", "slots[0].count", "slots[0].cpus", "workload[0].duration",
                 "workload[0]", "changes[0]"):
        assert want in paths, (want, errors)
    path = tmp_path / "bad.yaml"
    import yaml
    path.write_text(yaml.safe_dump(bad))
    with pytest.raises(InputError) as e:
        load_scenario(path)
    assert str(path) in str(e.value) and "slots[0].cpus" in str(e.value)
    assert f"{len(errors)} problem(s)" in str(e.value)


def test_not_yaml_and_unknown_group_are_input_errors(tmp_path):
    p = tmp_path / "x.yaml"
    p.write_text("name: [unclosed\n")
    with pytest.raises(InputError, match="not valid YAML"):
        load_scenario(p)
    p.write_text("name: g\nspan: 1h\nslots: [{count: 1}]\n"
                 "workload: [{submitter: a, group: group_nope, count: 1, duration: 60}]\n")
    sc = load_scenario(p)
    with open_ledger(str(tmp_path / "l.sqlite")) as ledger:
        with pytest.raises(InputError, match="unknown accounting group.*group_nope"):
            Simulation(sc, ledger)


def test_shipped_schema_file_is_the_one_the_code_validates_with():
    shipped = json.loads((ROOT / "examples" / "scenario.schema.json").read_text())
    assert shipped == SCHEMA


def test_every_shipped_scenario_validates():
    files = sorted(SCENARIOS.rglob("*.yaml")) + sorted((ROOT / "bench" / "scenarios").glob("*.yaml"))
    assert len(files) >= 8
    for f in files:
        load_scenario(f)


def test_progress_bar_in_a_log_writes_a_line_per_tenth():
    out = io.StringIO()
    show = progress_bar(out)
    for i in range(101):
        show(i * 36.0, 3600.0, i * 0.1)
    lines = out.getvalue().splitlines()
    assert len(lines) == 11 and lines[-1].startswith("100% 1h00m of 1h00m simulated")
    assert "ETA" in lines[5]


def test_preempting_a_dynamic_slot_keeps_the_partitionable_slots_whole(tmp_path):
    """A takes the dynamic slots of two 4-core partitionable slots; B (better priority,
    and the classic PREEMPTION_REQUIREMENTS that asks for it: since 2018 the negotiator
    compares no priorities itself, so `True` would let A take them back) preempts A's
    jobs there: the new job takes over the
    dynamic slot, so every partitionable slot's free cores plus its dynamic slots' cores
    stay its total, and every job runs in at most one slot."""
    doc = {"name": "pslot-preempt", "span": "30m", "interval": 60,
           "knobs": {"DEFAULT_PRIO_FACTOR": 1,
                     "PREEMPTION_REQUIREMENTS": "RemoteUserPrio > SubmitterUserPrio * 1.2"},
           "slots": [{"count": 2, "name": "p", "cpus": 4, "memory": 8192, "partitionable": True}],
           "workload": [{"submitter": "a", "count": 8, "duration": "10h"},
                        {"submitter": "b", "at": "10m", "count": 8, "duration": "10h"}],
           "changes": [{"at": "5m", "priority": {"submitter": "a", "value": 1000}}]}
    path = tmp_path / "p.json"
    path.write_text(json.dumps(doc))
    sc = load_scenario(path)
    with open_ledger(str(tmp_path / "l.sqlite")) as ledger:
        sim = Simulation(sc, ledger)
        t = sc.start
        while t <= sc.start + sc.span:
            sim.step(t)
            for s in sim.pool.slots:
                assert s.cpus + sum(d.cpus for d in s.children) == s.shape.cpus
                assert all(d.job is not None and d.job.slot is d for d in s.children)
            t += sc.interval
        sim.flush()
    running = [d.job.arrival.user for s in sim.pool.slots for d in s.children]
    assert sim.preemptions == 8 and running == ["b"] * 8


def test_slot_names_are_unique_across_shapes_and_recorded_slots(tmp_path):
    doc = {"name": "names", "span": "3m", "interval": 60, "knobs": {"DEFAULT_PRIO_FACTOR": 1},
           "slots": [{"count": 2, "name": "n"}, {"count": 2, "name": "n", "memory": 8192}],
           "workload": [{"submitter": "a", "count": 10, "duration": "1h"}],
           "changes": [{"at": "1m", "slots_join": {"count": 2, "name": "n"}}]}
    path = tmp_path / "n.json"
    path.write_text(json.dumps(doc))
    sc, url, report = simulate(path, tmp_path)
    slots = [s for (s,) in rows(url, "SELECT slot FROM shadow_matches")]
    assert len(slots) == len(set(slots)) == 6 and report.matches == 6


def test_nice_user_jobs_run_under_their_nice_user_name(tmp_path):
    doc = {"name": "nice", "span": "1m", "interval": 60, "knobs": {"DEFAULT_PRIO_FACTOR": 1},
           "slots": [{"count": 4}],
           "workload": [{"submitter": "a", "count": 3, "duration": "1h", "nice_user": True}]}
    path = tmp_path / "nice.json"
    path.write_text(json.dumps(doc))
    sc, url, report = simulate(path, tmp_path)
    assert report.matches == 3
    assert {s for (s,) in rows(url, "SELECT submitter FROM shadow_matches")} == \
        {"nice-user.a@sim.local"}


def test_queue_wait_counts_from_the_arrival_not_the_next_cycle(tmp_path):
    doc = {"name": "wait", "span": "10m", "interval": 300, "knobs": {"DEFAULT_PRIO_FACTOR": 1},
           "slots": [{"count": 1}],
           "workload": [{"submitter": "a", "at": "100s", "count": 1, "duration": "1h"}]}
    path = tmp_path / "w.json"
    path.write_text(json.dumps(doc))
    sc, url, _ = simulate(path, tmp_path)
    assert rows(url, "SELECT wait FROM shadow_matches") == [(200.0,)]   # arrived 100 s in


def test_more_bad_scenarios_are_found_before_the_run(tmp_path):
    base = {"name": "b", "span": "1h", "slots": [{"count": 1}],
            "workload": [{"submitter": "a", "count": 1, "duration": 60}]}
    assert validate({**base, "interval": 0.5}) == [
        "interval: must be at least 1 second (cycles are whole seconds)"]
    assert validate({**base, "start": "next tuesday"})[0].startswith("start:")
    bad_expr = {**base, "slots": [{"count": 1, "attrs": {"Big": "a &&"}}],
                "workload": [{"submitter": "a", "count": 1, "duration": 60,
                              "requirements": "(("}]}
    assert validate(bad_expr) == [
        "slots[0].attrs.Big: 'a &&' is not a ClassAd expression",
        "workload[0].requirements: '((' is not a ClassAd expression"]
    p = tmp_path / "date.yaml"
    p.write_text("name: d\nspan: 1h\nstart: 2026-01-05T00:00:00Z\nslots: [{count: 1}]\n")
    assert load_scenario(p).start == 1767571200
    p.write_text("name: k\nspan: 1h\nslots: [{count: 1}]\n"
                 "changes: [{at: 10m, config: {PRIORITY_HALFLIFE: abc}}]\n")
    with open_ledger(str(tmp_path / "l.sqlite")) as ledger:
        with pytest.raises(InputError) as e:
            Simulation(load_scenario(p), ledger)
    assert str(p) in str(e.value) and "PRIORITY_HALFLIFE" in str(e.value)
    assert "changes (at 600 s)" in str(e.value)


def test_a_config_change_reaches_every_slot_and_the_slot_constraint_holds(tmp_path):
    """SLOT_WEIGHT changed mid-run weighs every slot anew (the slots' own figures are
    kept per config); NEGOTIATOR_SLOT_CONSTRAINT leaves slots out of the pool; the
    config's warnings (an unmodelled knob) reach the run's."""
    doc = {"name": "weights", "span": "10m", "interval": 60,
           "knobs": {"DEFAULT_PRIO_FACTOR": 1, "NEGOTIATOR_SLOT_CONSTRAINT": "Cpus > 2"},
           "slots": [{"count": 10, "name": "quad", "cpus": 4},
                     {"count": 5, "name": "one", "cpus": 1}],
           "workload": [{"submitter": "a", "count": 30, "duration": "1h"}],
           "changes": [{"at": "5m", "config": {"SLOT_WEIGHT": "1",
                                               "NEGOTIATOR_IGNORE_JOB_RANKS": "true"}}]}
    path = tmp_path / "w.json"
    path.write_text(json.dumps(doc))
    sc = load_scenario(path)
    with open_ledger(str(tmp_path / "l.sqlite")) as ledger:
        sim = Simulation(sc, ledger)
        sim.run()
    weights = [w for (w,) in rows(str(tmp_path / "l.sqlite"),
                                  "SELECT pool_weight FROM passes ORDER BY snapshot_time")]
    assert weights[:5] == [40.0] * 5 and weights[5:] == [10.0] * 6
    slots = {s for (s,) in rows(str(tmp_path / "l.sqlite"), "SELECT slot FROM shadow_matches")}
    assert len(slots) == 10 and all(s.startswith("slot1@quad") for s in slots)
    assert any("NEGOTIATOR_IGNORE_JOB_RANKS is set" in w for w in sim.warnings)


def test_time_in_a_job_expression_is_warned_about(tmp_path):
    doc = {"name": "clock", "span": "1m", "slots": [{"count": 1}],
           "knobs": {"DEFAULT_PRIO_FACTOR": 1},
           "workload": [{"submitter": "a", "count": 1, "duration": 60,
                         "requirements": "time() > 0"}]}
    path = tmp_path / "c.json"
    path.write_text(json.dumps(doc))
    with open_ledger(str(tmp_path / "l.sqlite")) as ledger:
        sim = Simulation(load_scenario(path), ledger)
    assert any("time()" in w for w in sim.warnings)


def test_round_robin_times_are_carried_from_cycle_to_cycle(tmp_path, monkeypatch):
    """Each cycle starts from the groups' round-robin times the cycle before left, as
    the negotiator keeps them (HgqOutcome.rr_times)."""
    import negotiator_ext.cycle as cycle_mod
    seen = []
    original = cycle_mod.decide

    def spy(inp, rr_times=None):
        seen.append(dict(rr_times or {}))
        result = original(inp, rr_times)
        seen.append(("out", dict(result.rr_times)))
        return result

    monkeypatch.setattr(cycle_mod, "decide", spy)
    sc = dataclasses.replace(load_scenario(SCENARIOS / "round-robin-starvation" / "scenario.yaml"),
                             span=180)
    with open_ledger(str(tmp_path / "l.sqlite")) as ledger:
        Simulation(sc, ledger).run()
    assert seen[0] == {}                                  # the first cycle starts at 0
    outs = [x[1] for x in seen if isinstance(x, tuple)]
    ins = [x for x in seen if not isinstance(x, tuple)]
    assert ins[1:] == outs[:-1]                           # each next cycle gets the last's
    assert set(outs[0]) >= {"group_a", "group_b"}


def test_a_preempted_job_goes_back_to_the_queue_and_starts_over(tmp_path):
    """One slot: a's 1 h job runs from 0; b (better priority) preempts it at 10 m with a
    20 m job; a's job waits from 10 m, starts over at 30 m and runs its full hour (its
    first run's end no longer counts)."""
    doc = {"name": "restart", "span": "2h", "interval": 300,
           "knobs": {"DEFAULT_PRIO_FACTOR": 1,
                     "PREEMPTION_REQUIREMENTS": "RemoteUserPrio > SubmitterUserPrio * 1.2"},
           "slots": [{"count": 1}],
           "workload": [{"submitter": "a", "count": 1, "duration": "1h"},
                        {"submitter": "b", "at": "10m", "count": 1, "duration": "20m"}],
           "changes": [{"at": "5m", "priority": {"submitter": "a", "value": 1000}}]}
    path = tmp_path / "r.json"
    path.write_text(json.dumps(doc))
    sc, url, report = simulate(path, tmp_path)
    got = rows(url, "SELECT p.snapshot_time - ?, m.submitter, m.preempting, m.wait "
                    "FROM shadow_matches m JOIN passes p ON p.uuid = m.pass_uuid "
                    "ORDER BY p.snapshot_time", sc.start)
    assert got == [(0, "a@sim.local", None, 0.0), (600, "b@sim.local", "a@sim.local", 0.0),
                   (1800, "a@sim.local", None, 1200.0)]
    running = lambda minutes: usage(url, sc.start + minutes * 60).get("a")  # noqa: E731
    assert running(65) == 1.0                  # past its first run's end: still running
    assert running(90) == 0.0                  # its second run ended at 90 m
    assert report.preemptions == 1


def test_arrivals_every_so_often_a_set_number_of_times(tmp_path):
    doc = {"name": "batches", "span": "40m", "interval": 300, "knobs": {"DEFAULT_PRIO_FACTOR": 1},
           "slots": [{"count": 1}],
           "workload": [{"submitter": "a", "count": 2, "every": "10m", "repeat": 3,
                         "duration": "10h"},
                        {"submitter": "b", "at": "40m", "count": 1, "duration": "10h"}]}
    path = tmp_path / "b.json"
    path.write_text(json.dumps(doc))
    sc, url, _ = simulate(path, tmp_path)
    idle = lambda m, who: sub_field(url, at(sc, m * 60), f"{who}@sim.local", "idle_jobs")  # noqa: E731
    # idle before each cycle: 2 at 0 (then one runs), 2 more at 10 m, 2 at 20 m, and no
    # fourth batch at 30 m
    assert [idle(m, "a") for m in (0, 10, 20, 30)] == [2, 3, 5, 5]
    assert idle(40, "b") == 1                  # a batch at the very end of the span counts


# ---- what the simulator keeps from cycle to cycle -------------------------------------

def _changing_pool(tmp_path, case):
    """Static, partitionable and ranked slots that are claimed, freed, split, preempted,
    that leave and join, slots that stay unclaimed, and a config change that brings
    NEGOTIATOR_MATCH_EXPRS."""
    doc = {"name": f"kept-{case}", "span": "90m", "interval": 60,
           "knobs": {"DEFAULT_PRIO_FACTOR": 1},
           "slots": [{"count": 12, "name": "s"},
                     {"count": 3, "name": "p", "cpus": 4, "memory": 8192, "partitionable": True},
                     {"count": 2, "name": "off", "attrs": {"START": "false"}}],   # never claimed
           "workload": [{"submitter": "a", "count": 30, "every": "20m",
                         "duration": {"exponential": "30m"}},
                        {"submitter": "b", "at": "10m", "count": 10, "every": "30m",
                         "duration": {"exponential": "20m"}},
                        {"submitter": "c", "count": 4, "every": "15m", "cpus": 2,
                         "concurrency_limits": "lic:2",
                         "duration": {"exponential": "25m"}}],
           "changes": [{"at": "40m", "slots_leave": {"prefix": "s0000", "count": 3}},
                       {"at": "50m", "slots_join": {"count": 2, "name": "late"}},
                       {"at": "60m", "config": {"NEGOTIATOR_MATCH_EXPRS": "Tier", "Tier": "2"}}]}
    if case == "preemption":
        doc["knobs"]["PREEMPTION_REQUIREMENTS"] = "RemoteUserPrio > SubmitterUserPrio * 1.2"
        doc["slots"].append({"count": 4, "name": "r", "attrs": {"Rank": 'TARGET.Owner == "b"'}})
        # unclaimed slots whose ads the cycle writes into (CurrentRank from PreemptingRank)
        doc["slots"].append({"count": 2, "name": "pr", "attrs": {"PreemptingRank": "5"}})
        doc["changes"].append({"at": "15m", "priority": {"submitter": "a", "value": 1000}})
    path = tmp_path / f"{case}.json"
    path.write_text(json.dumps(doc))
    return load_scenario(path)


def _ledger_rows(url):
    """Every match and every pass's submitter and group rows, by cycle."""
    return [rows(url, "SELECT p.snapshot_time, m.job, m.submitter, m.slot, m.preempting, m.wait "
                      "FROM shadow_matches m JOIN passes p ON p.uuid = m.pass_uuid "
                      "ORDER BY p.snapshot_time, m.id"),
            rows(url, "SELECT p.snapshot_time, p.pool_weight, p.n_shadow_matches FROM passes p "
                      "ORDER BY p.snapshot_time"),
            rows(url, "SELECT p.snapshot_time, s.name, s.real_rup, s.real_usage, s.real_share, "
                      "s.shadow_limit, s.idle_jobs, s.running_jobs, s.claimed_weight "
                      "FROM submitters s JOIN passes p ON p.uuid = s.pass_uuid "
                      "ORDER BY p.snapshot_time, s.name"),
            rows(url, "SELECT p.snapshot_time, g.name, g.real_usage, g.shadow_quota, "
                      "g.shadow_allocated FROM groups g JOIN passes p ON p.uuid = g.pass_uuid "
                      "ORDER BY p.snapshot_time, g.name")]


@pytest.mark.parametrize("case", ["preemption", "no-preemption"])
def test_what_is_kept_of_a_slot_is_what_building_it_anew_gives(tmp_path, monkeypatch, case):
    """Before every cycle, each slot ad, figures and texts the simulator kept from an
    earlier cycle are those of an ad built anew for the slot as it is now (a slot that
    changed is built again: SimSlot.changed; the cycles, handed the ads as shared,
    never wrote into one), and the pool's rows are every slot's own, in the pool's
    order."""
    import negotiator_ext.sim.engine as sim_mod
    from negotiator_ext.simulate import _Ad, _facts, _new_slot_ad, _slot_texts
    counts = {"ads": 0, "texts": 0, "rows": 0, "unclaimed again": 0, "columns": 0,
              "holding limits": 0}
    pool_of = sim_mod.Simulation._pool
    rows_of = sim_mod.Simulation._slot_rows
    unclaimed: dict = {}            # static slot -> its ad when it was last unclaimed
    claimed: set = set()            # ... claimed since

    def check(sim, t, *more):
        for s in sim.pool.slots:
            for x in [s] + s.children:
                b = x._ad
                if b is None:
                    continue
                if not x.partitionable and x.parent is None:
                    if x.job is not None:
                        claimed.add(x.name)
                    else:
                        # unclaimed again: the same ad as the last time (built once)
                        assert unclaimed.setdefault(x.name, b) is b, (t, x.name)
                        counts["unclaimed again"] += x.name in claimed
                        claimed.discard(x.name)
                fresh = _Ad(_new_slot_ad(x, sim.sc))
                assert b.ad.printOld() == fresh.ad.printOld(), (t, x.name)
                if b.facts is not None and b.facts[0] is sim.config:
                    assert b.facts[1] == _facts(fresh, sim.config), (t, x.name)
                if b.texts is not None:
                    assert b.texts == _slot_texts(fresh), (t, x.name)
                    counts["texts"] += 1
                counts["ads"] += 1
            r = s._row
            if r is not None and r.config is sim.config:
                xs = [s] + s.children
                assert [e[0] for e in r.every] == xs
                seg = [(x._ad.ad, *_facts(x._ad, sim.config)[1:]) for x in xs]
                assert r.seg == (tuple(zip(*seg)) or ((), (), (), ()))
                assert list(map(id, r.cand[0])) == [id(x._ad.ad) for x in xs if (
                    x.partitionable and x.cpus >= sim.least_cpus) or (
                    not x.partitionable and x.job is None)]
                counts["rows"] += 1
        return pool_of(sim, t, *more)

    def every_row(sim):
        got = rows_of(sim)
        assert len(got.every) == len(sim.pool.slots)
        for i, s in enumerate(sim.pool.slots):
            assert s._row is not None and got.every[i] is s._row.every
        # the columns, patched from cycle to cycle, are the rows' laid end to end
        rows = [s._row for s in sim.pool.slots]
        for cols, part in ((tuple(map(tuple, got.slot_columns())), "seg"),
                           (got.cand_cols.tuples(), "cand")):
            assert cols == tuple(
                tuple(v for r in rows for v in getattr(r, part)[k]) for k in range(4))
            counts["columns"] += 1
        # what they add up to, patched too, is what the cycle would sum, down to the type
        _, _, pies, effs = (tuple(v for r in rows for v in r.seg[k]) for k in range(4))
        totals = got.sums.totals()
        assert totals is not None
        assert repr(totals[:3]) == repr((len(pies), sum(pies), sum(effs)))
        assert totals[3] == min(pies)
        assert got.free_total() == sum(r.free_cpus for r in rows if r.free_cpus is not None)
        assert got.takes_total() == sum(r.takes for r in rows)
        held = tuple(u for r in rows for _, _, u in r.every if u.counts_limits)
        assert got.limit_cols.tuples() == (held,)
        counts["holding limits"] += bool(held)
        return got

    monkeypatch.setattr(sim_mod.Simulation, "_pool", check)
    monkeypatch.setattr(sim_mod.Simulation, "_slot_rows", every_row)
    sc = _changing_pool(tmp_path, case)
    with open_ledger(str(tmp_path / "l.sqlite")) as ledger:
        sim = Simulation(sc, ledger)
        report = sim.run()
    assert report.matches > 50
    assert (report.preemptions > 0) == (case == "preemption")
    assert counts["ads"] > 500 and counts["rows"] > 500 and counts["texts"] > 50
    assert counts["unclaimed again"] > 20 and counts["columns"] > 50
    assert counts["holding limits"] > 20


def test_columns_lay_rows_that_change_length_at_their_places():
    """sim.pool_rows.Columns: rows replaced in one call, some longer, some shorter, one
    emptied and one filled, land at their places (a row that changes length moves the
    rows after it, never the ones before); and again after the lengths changed, with
    rows of the same length (written over in place) and rows emptied. Only the rows
    holding something are kept."""
    from negotiator_ext.sim.pool_rows import Columns
    rows = [(("a0", "a1"), (0, 1)), ((), ()), (("c0",), (4,)), (("d0", "d1", "d2"), (5, 6, 7))]
    cols = Columns(rows, 2)
    assert cols.tuples() == (("a0", "a1", "c0", "d0", "d1", "d2"), (0, 1, 4, 5, 6, 7))
    cols.replace({0: (("A",), (10,)), 1: (("B0", "B1"), (11, 12)), 3: ((), ())})
    assert cols.tuples() == (("A", "B0", "B1", "c0"), (10, 11, 12, 4))
    cols.replace({2: (("C0", "C1", "C2"), (13, 14, 15)), 3: (("D",), (16,))})
    assert cols.tuples() == (("A", "B0", "B1", "C0", "C1", "C2", "D"),
                             (10, 11, 12, 13, 14, 15, 16))
    cols.replace({})
    assert sorted(cols.held) == [0, 1, 2, 3]
    cols.replace({1: (("b0", "b1"), (21, 22)), 3: (("d",), (26,))})    # same lengths
    assert cols.tuples() == (("A", "b0", "b1", "C0", "C1", "C2", "d"),
                             (10, 21, 22, 13, 14, 15, 26))
    cols.replace({0: ((), ()), 2: (("c",), (23,))})
    assert cols.tuples() == (("b0", "b1", "c", "d"), (21, 22, 23, 26))
    assert sorted(cols.held) == [1, 2, 3]


@settings(max_examples=150, deadline=None)
@given(st.lists(st.integers(0, 4), min_size=1, max_size=12),
       st.lists(st.dictionaries(st.integers(0, 11), st.integers(0, 4), max_size=12),
                max_size=6),
       st.sampled_from([0, 1, 2, 1000]))
def test_columns_equal_the_rows_laid_end_to_end(lengths, steps, splice):
    """sim.pool_rows.Columns after any replacements (rows filled, emptied, grown,
    shrunk), spliced in or laid again from the rows held (`splice`: 0 always splices,
    1000 always lays again), read between them or not, is every row's column laid end
    to end in row order."""
    import negotiator_ext.sim.pool_rows as rows_mod
    made = iter(range(10**6))
    was = rows_mod._SPLICE
    rows_mod._SPLICE = splice
    try:
        _columns_replaced(rows_mod, lengths, steps, made)
    finally:
        rows_mod._SPLICE = was


def _columns_replaced(rows_mod, lengths, steps, made):

    def row(n):
        vals = [next(made) for _ in range(n)]
        return (tuple(vals), tuple(-v for v in vals))

    rows = [row(n) for n in lengths]
    cols = rows_mod.Columns(rows, 2)
    for k, step in enumerate(steps):
        new = {i % len(rows): row(n) for i, n in step.items()}
        cols.replace(new)
        for i, r in new.items():
            rows[i] = r
        if k % 2 and k + 1 < len(steps):
            continue                    # (two replacements before a read)
        assert cols.tuples() == tuple(tuple(v for r in rows for v in r[k])
                                      for k in range(2))
        assert sorted(cols.held) == cols.order == [i for i, r in enumerate(rows) if r[0]]
        assert cols.lens == [len(r[0]) for r in rows if r[0]]


_SUM_VALUES = st.one_of(st.integers(-3, 8), st.sampled_from([0.0, 1.0, 4.0, 2.0 ** 40]),
                        st.sampled_from([0.5, 1.25, float("nan")]), st.just(2 ** 40))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(st.tuples(_SUM_VALUES, _SUM_VALUES), max_size=4), min_size=1,
                max_size=8),
       st.lists(st.dictionaries(st.integers(0, 7),
                                st.lists(st.tuples(_SUM_VALUES, _SUM_VALUES), max_size=4),
                                max_size=4),
                max_size=8))
def test_slot_sums_equal_the_columns_summed_in_order(rows, steps):
    """sim.pool_rows.SlotSums, patched with the rows replaced in each step (all at once,
    as PoolRows patches a cycle's), says what `sum` and `min` over every row's pie
    weights and effective sizes in the pool's order say, down to the type (an int sum
    while no value is a float); nothing once a value was not a whole number within
    `_EXACT`, where only the summed columns are exact."""
    from negotiator_ext.sim.pool_rows import _EXACT, SlotSums

    def seg(pairs):
        return ((None,) * len(pairs), (None,) * len(pairs),
                tuple(p for p, _ in pairs), tuple(e for _, e in pairs))

    segs = [seg(r) for r in rows]
    sums = SlotSums()
    sums.patch(list(segs), [])
    ever = list(segs)
    for step in [{}] + steps:
        step = {i % len(segs): pairs for i, pairs in step.items()}
        went = [segs[i] for i in step]
        for i, pairs in step.items():
            segs[i] = seg(pairs)
            ever.append(segs[i])
        sums.patch([segs[i] for i in step], went)
        pies = [v for g in segs for v in g[2]]
        effs = [v for g in segs for v in g[3]]
        assert len(sums) == len(pies)
        got = sums.totals()
        whole = all(isinstance(v, int) or (v == v and v.is_integer())
                    for g in ever for v in g[2] + g[3])
        small = all(abs(v) <= _EXACT for g in ever for v in g[2] + g[3] if v == v)
        if not (whole and small):
            assert got is None
            continue
        assert repr(got[:3]) == repr((len(pies), sum(pies), sum(effs)))
        assert got[3] == (min(pies) if pies else None)


@pytest.mark.parametrize("case", ["preemption", "no-preemption", "weighted"])
def test_keeping_slot_ads_gives_the_same_ledger_as_building_every_ad_anew(
        tmp_path, monkeypatch, case):
    """The whole run with everything kept, and with every slot ad built anew for every
    cycle, parsed, and its texts and figures read from the ad (as before the simulator
    kept them and read figures through the texts): the same matches and the same
    figures in every pass. ("weighted": a SLOT_WEIGHT naming two attributes, worked
    out of the texts in its reach.)"""
    import negotiator_ext.sim.ads as ads_mod
    import negotiator_ext.sim.engine as sim_mod
    import negotiator_ext.sim.pool_rows as rows_mod
    sc = _changing_pool(tmp_path, "no-preemption" if case == "weighted" else case)
    if case == "weighted":
        sc = dataclasses.replace(sc, knobs={**sc.knobs,
                                            "SLOT_WEIGHT": "Cpus * 2 + (Memory >= 8192)"})
    kept = str(tmp_path / "kept.sqlite")
    with open_ledger(kept) as ledger:
        Simulation(sc, ledger).run()

    rows_of = sim_mod.Simulation._slot_rows

    def anew(sim):
        for s in sim.pool.slots:
            for x in [s] + s.children:
                x._ad = x._idle_ad = None
            s._row = None
        sim._rows = None
        return rows_of(sim)

    def parsed(b):
        return b.ad                 # (a LazyAd: parsed as it is read)

    monkeypatch.setattr(sim_mod.Simulation, "_slot_rows", anew)
    monkeypatch.setattr(rows_mod, "_slot_texts", lambda b: None)   # the cycle reads them
    # (figures read from each ad parsed, not through its texts)
    monkeypatch.setattr(ads_mod, "slot_view", parsed)
    monkeypatch.setattr(rows_mod, "slot_view", parsed)
    built = str(tmp_path / "built.sqlite")
    with open_ledger(built) as ledger:
        Simulation(sc, ledger).run()
    got, want = _ledger_rows(kept), _ledger_rows(built)
    assert len(got[0]) > 50 and got == want


def test_slots_found_by_name_when_names_are_shared(tmp_path, monkeypatch):
    """With two slots of one name (recorded partitionable slots on one machine split into
    like-named dynamic slots), a match's slot is the later of that name in the pool's
    order, found from a map made once per change of the slots, not by a walk per match;
    the same run with the map and with the walk gives the same ledger."""
    import negotiator_ext.sim.engine as sim_mod
    sc = _changing_pool(tmp_path, "preemption")
    real_init, real_named = sim_mod.SimPool.__init__, sim_mod.SimPool.slot_named
    asked = []

    def init(self, *a, **kw):
        real_init(self, *a, **kw)
        self._same_names = True             # as if two slots shared a name

    def named(self, name):
        walk = None
        for s in self.slots:
            for x in [s] + s.children:
                if x.name == name:
                    walk = x
        got = real_named(self, name)
        assert got is walk, name
        asked.append(name)
        return got
    monkeypatch.setattr(sim_mod.SimPool, "__init__", init)
    monkeypatch.setattr(sim_mod.SimPool, "slot_named", named)
    shared = str(tmp_path / "shared.sqlite")
    with open_ledger(shared) as ledger:
        Simulation(sc, ledger).run()
    assert len(asked) > 50
    monkeypatch.undo()
    plain = str(tmp_path / "plain.sqlite")
    with open_ledger(plain) as ledger:
        Simulation(sc, ledger).run()
    assert _ledger_rows(shared) == _ledger_rows(plain)


class _NoLedger:
    source = "none"

    def record_passes(self, passes):
        pass


def _simulated_scenarios() -> list[Path]:
    """Every shipped scenario that simulates a pool (a replay builds no slot ads), but
    for one that is another's pool and workload scaled: the same file but for its name,
    comments and counts (bench/scenarios/week-10k.yaml and week-100k.yaml are
    week-1k.yaml ten and a hundred times over: the same slot and job ads, more of them).
    The smallest of those is kept."""
    files = sorted(SCENARIOS.rglob("*.yaml")) + sorted((ROOT / "bench" / "scenarios").glob("*.yaml"))
    kept: dict[str, tuple[int, Path]] = {}
    for f in files:
        sc = load_scenario(f)
        if sc.is_replay:
            continue
        lines = [re.sub(r"count: *[0-9]+", "count: N", line) for line in f.read_text().splitlines()
                 if not line.startswith(("#", "name:", "description:"))]
        shape, size = "\n".join(lines), sum(s.count for s in sc.slots)
        if shape not in kept or size < kept[shape][0]:
            kept[shape] = (size, f)
    return sorted(f for _, f in kept.values())


@pytest.mark.parametrize("path", _simulated_scenarios(),
                         ids=lambda p: p.parent.name + "/" + p.name)
def test_a_slot_ad_parsed_from_its_text_is_the_one_set_attribute_by_attribute(path, monkeypatch):
    # _new_slot_ad parses the ad from its text in one call; the ad must be the one the
    # attributes set one by one give (names, values, expressions), free and claimed
    from negotiator_ext.simulate import _new_slot_ad
    sc = load_scenario(path)
    sim = Simulation(sc, _NoLedger())
    t = sc.start
    while t <= sc.start + min(sc.span, 2 * 86400):      # until some job runs
        sim.step(t)
        t += sc.interval
        slots = [x for s in sim.pool.slots for x in [s] + list(s.children)]
        if any(s.job is not None for s in slots):
            break
    assert any(s.job is not None for s in slots), "the scenario starts no job: nothing to check"

    def texts(ad):
        return sorted((n.lower(), ad.lookup(n).__str__()) for n in ad.keys())
    from negotiator_ext.core import classads
    parsed = []
    monkeypatch.setattr(classads, "parse_old_ad",
                        lambda text, parse=classads.parse_old_ad: parsed.append(1) or parse(text))
    for s in slots:
        assert texts(_new_slot_ad(s, sc)) == texts(_new_slot_ad(s, sc, inline=False)), s.name
    assert len(parsed) == len(slots)        # every one was parsed from its text


@pytest.mark.parametrize("name", ["group-quota-preemption/scenario.yaml",
                                  "consumption-policy/scenario.yaml",
                                  "rup-growth-decay/scenario.yaml"])
def test_checking_only_the_changed_slots_each_cycle_changes_no_pass(name, monkeypatch):
    # The simulator hands the accountant the slots changed since the last cycle
    # (SlotChanges); every pass must be the one checking every slot gives.
    from conftest import spy_quick_checks

    import negotiator_ext.sim.pool_rows as rows_mod
    sc = load_scenario(SCENARIOS / name)
    sc = dataclasses.replace(sc, span=min(sc.span, 12 * HOUR))

    class Keep:
        source = "mem"

        def __init__(self):
            self.passes = []

        def record_passes(self, passes):
            self.passes += [dataclasses.replace(p, shadow_duration=0.0, shadow_timings={})
                            for p in passes]

    quick = spy_quick_checks(monkeypatch)
    fast = Keep()
    Simulation(sc, fast).run()
    assert sum(quick) > len(quick) // 2          # most cycles took the changed slots alone
    monkeypatch.setattr(rows_mod, "SlotChanges", lambda *a: None)
    quick.clear()
    slow = Keep()
    Simulation(sc, slow).run()
    assert not any(quick)
    assert len(fast.passes) == len(slow.passes) > 0
    assert fast.passes == slow.passes


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(max_size=12), st.text(alphabet=" !\"#\\az~\t\n\x7f\u00e9", max_size=8),
                 st.integers(-10 ** 20, 10 ** 20), st.floats(allow_nan=False, width=32),
                 st.booleans()))
def test_a_slot_values_text_known_at_once_is_the_one_printed(v):
    """sim.ads._text_known: the text a value of a slot ad is written as, and where it
    says how classad2 prints that text, the print `_printed` gives (a plain number, a
    string quoted as it is)."""
    from negotiator_ext.sim.ads import _printed, _text, _text_known
    text, printed = _text_known(v)
    assert text == _text(v)
    if printed is not None:
        assert printed == text == _printed(text)


@pytest.mark.parametrize("attrs,inline", [
    ({"rank": "TARGET.Memory"}, True),                       # Rank, spelt otherwise
    ({"Start": "TARGET.Memory > 1"}, True),                  # (as recorded slots spell it)
    ({"Foo": "1 +\n 2"}, False),                             # spans lines
    ({"Rank": "TARGET.Memory", "Bar": '"x\ty"'}, False),    # a control character
    ({"Rank": "TARGET.Memory", "Bar": '"x y"'}, True)])
def test_a_slot_ad_the_text_cannot_carry_is_set_attribute_by_attribute(attrs, inline,
                                                                        monkeypatch):
    import dataclasses as dc
    from negotiator_ext.core import classads
    from negotiator_ext.simulate import _new_slot_ad
    sc = load_scenario(ROOT / "bench" / "scenarios" / "week-1k.yaml")
    sim = Simulation(sc, _NoLedger())
    sim.step(sc.start)
    s = next(x for x in sim.pool.slots if x.job is not None)
    s.shape = dc.replace(s.shape, attrs=attrs)
    parsed = []
    monkeypatch.setattr(classads, "parse_old_ad",
                        lambda text, parse=classads.parse_old_ad: parsed.append(1) or parse(text))
    ad = _new_slot_ad(s, sc)
    assert parsed == ([1] if inline else [])
    slow = _new_slot_ad(s, sc, inline=False)
    # the same names, spelt the same (the first spelling), with the same values
    assert sorted((n, str(ad.lookup(n))) for n in ad.keys()) == \
        sorted((n, str(slow.lookup(n))) for n in slow.keys())
    assert str(ad.lookup("Rank")) == ("0.0" if "Foo" in attrs or "Start" in attrs
                                      else "TARGET.Memory")


def test_a_reused_claims_slot_ad_has_the_new_jobs_current_rank(tmp_path):
    """A slot whose Rank prefers jobs: the schedd reuses its claim for the submitter's next
    job, and the slot's ad then has the slot's Rank for that job as its CurrentRank (what
    rank preemption compares against), not the first job's."""
    from negotiator_ext.sim.ads import _slot_ad
    from negotiator_ext.sim.engine import EngineOptions
    doc = {"name": "rank-reuse", "span": "30m", "interval": 300,
           "slots": [{"count": 1, "name": "r", "memory": 4096,
                      "attrs": {"Rank": "TARGET.RequestMemory"}}],
           "workload": [{"submitter": "a", "count": 1, "duration": "2m", "memory": 1000},
                        {"submitter": "a", "count": 1, "duration": "2h", "memory": 1500}]}
    path = tmp_path / "rank-reuse.json"
    path.write_text(json.dumps(doc))
    sc = load_scenario(path)
    sim = Simulation(sc, _NoLedger(), options=EngineOptions(claim_worklife=1200))
    sim.step(sc.start)
    slot = sim.pool.slots[0]
    assert slot.job is not None and _slot_ad(slot, sc)["CurrentRank"] == 1000
    sim.pool.advance(sc.start + 200, sim.arrivals)
    assert sim.pool.reused == 1 and slot.job is not None
    assert _slot_ad(slot, sc)["CurrentRank"] == 1500


@pytest.mark.parametrize("case", ["preemption", "no-preemption", "fractional"])
def test_kept_claimed_weights_equal_the_slots_summed_every_cycle(tmp_path, monkeypatch, case):
    """sim.pool_rows keeps each charged customer's claimed weight, patched with the rows
    that changed (`Pool.claimed_weights`): every cycle it equals the sum over every
    slot that `observe_pass` makes without it, the same customers and the same numbers,
    through claims, ends, splits, preemption, slots leaving and joining and a config
    change. With a weight that is not a whole number it is not kept (the pass sums)."""
    import negotiator_ext.sim.engine as sim_mod
    sc = _changing_pool(tmp_path, "preemption" if case == "preemption" else "no-preemption")
    if case == "fractional":
        sc = dataclasses.replace(sc, knobs={**sc.knobs, "SLOT_WEIGHT": "Cpus * 0.75"})
    seen = {"kept": 0, "claims": 0, "not kept": 0}
    record = sim_mod.Simulation._record

    def check(self, t, pool, result, entries, duration):
        kept = pool.claimed_weights
        which = 1 if pool.config.discount_suspended_resources else 0
        summed: dict[str, float] = {}
        for s in pool.every_slot()[1]:
            c = s.charged[which]
            if c is not None:
                summed[c] = summed.get(c, 0.0) + s.weight
        if kept is None:
            seen["not kept"] += 1
        else:
            assert kept == summed
            seen["kept"] += 1
            seen["claims"] += len(summed)
        return record(self, t, pool, result, entries, duration)

    monkeypatch.setattr(sim_mod.Simulation, "_record", check)
    with open_ledger(str(tmp_path / "l.sqlite")) as ledger:
        report = Simulation(sc, ledger).run()
    assert report.matches > 50
    if case == "fractional":
        # (kept only until the first claim: then every cycle sums the slots)
        assert seen["not kept"] >= 85 and seen["claims"] == 0
    else:
        assert seen["kept"] >= 90 and seen["claims"] > 100 and seen["not kept"] == 0


@pytest.mark.parametrize("attrs,slot_weight,want", [
    # the default: every one-core claimed slot weighs 1, one set of figures for all
    ({}, "Cpus", lambda i: 1),
    # the slot's own Name in reach of its SlotWeight: each slot its own figures
    ({"SlotWeight": 'Name == "{first}" ? 5 : 1'}, "Cpus", lambda i: 5 if i == 0 else 1),
    # ... and of the config's SLOT_WEIGHT (an ad without SlotWeight)
    ({}, 'Name == "{first}" ? 7 : Cpus * 2', lambda i: 7 if i == 0 else 2),
    # a text that calls a function: worked out in the ad, never kept
    ({"SlotWeight": 'strcmp(Name, "{first}") == 0 ? 3 : 1'}, "Cpus",
     lambda i: 3 if i == 0 else 1),
])
def test_a_claimed_slots_figures_from_an_ad_alike_are_its_own(attrs, slot_weight, want):
    """sim.ads._alike_facts: a claimed slot's figures, taken from an earlier ad of the
    same layout, are those of its own ad, also where its Name is in reach of its
    weight (and then each slot has its own)."""
    import dataclasses as dc

    import negotiator_ext.sim.ads as ads
    sc = load_scenario(ROOT / "bench" / "scenarios" / "week-1k.yaml")
    sim = Simulation(sc, _NoLedger())
    sim.step(sc.start)
    claimed = [x for x in sim.pool.slots if x.job is not None and not x.partitionable]
    assert len(claimed) > 100
    first = claimed[0].name
    shape = dc.replace(claimed[0].shape,
                       attrs={k: v.format(first=first) for k, v in attrs.items()})
    config = dc.replace(sim.config, slot_weight=slot_weight.format(first=first))
    learned = []
    learn = ads._Alike.learn

    def spy(self, b, own, later):
        learned.append(own["Name"])
        return learn(self, b, own, later)

    sim_learn = pytest.MonkeyPatch()
    sim_learn.setattr(ads._Alike, "learn", spy)
    try:
        for i, s in enumerate(claimed):
            s.shape, s._ad = shape, None
            got = ads._facts(ads._built(s, sc), config)
            whole = ads._facts_of(ads._new_slot_ad(s, sc), config)   # the ad, parsed
            assert got == whole, s.name
            assert got[1].weight == want(i), s.name
            assert (got[1].name, got[1].resource_name) == (whole[1].name, whole[1].resource_name)
            # the claimed slot's ad is not made for its figures
            assert not s._ad.ad.made() or "strcmp" in str(attrs), s.name
    finally:
        sim_learn.undo()
    users = {s.job.cls.user for s in claimed}
    if not attrs and slot_weight == "Cpus":
        assert len(learned) <= len(users) + 1        # one ad of each claim's user
    else:
        assert len(learned) == len(claimed)          # none alike in what it reads


def test_a_waiting_jobs_row_is_the_one_its_texts_make(tmp_path):
    """`sim.ads.job_row` makes a job's row from what its class's jobs have alike and its
    own texts (`JobClass.row`): the very row `TextAds.add` of all its texts makes, for a
    scenario's jobs (with a rank, limits and attributes of their own, evicted or not)
    and a recorded job's, in a store anew and in one that already holds the class's
    pairs, with the same pairs in the store."""
    from negotiator_ext.core.adtext import TextAds, TextStore
    from negotiator_ext.sim.ads import _job_texts, job_row, recorded_job_row, recorded_job_texts
    from negotiator_ext.sim.schedd_startd import JobClass, SimJob
    sc = load_scenario(ROOT / "bench" / "scenarios" / "week-1k.yaml")
    sc = dataclasses.replace(sc, workload=[dataclasses.replace(
        sc.workload[0], rank="Memory", concurrency_limits="lic:2",
        attrs={"WantGlidein": "true", "QDate": "7"})] + list(sc.workload[1:]))
    with open_ledger(str(tmp_path / "l.sqlite")) as ledger:
        sim = Simulation(dataclasses.replace(sc, span=0), ledger)
    p = sim.pool
    for a in sc.workload:
        p.submit(a, 3, sc.start + 5)
    jobs = [e[2] for q in p.queues.values() for e in q]
    jobs[1].idle_since = sc.start + 99                  # as after an eviction
    recorded = JobClass(submitter="u@d", user="u@d", schedd="s", texts=recorded_job_texts,
                        row=recorded_job_row, base=(("Owner", '"u"'), ("RequestCpus", "2")))
    jobs.append(SimJob(cluster=9, proc=0, cls=recorded, duration=60, qdate=1, idle_since=4))
    jobs[-1].own = (("ClusterId", "9"), ("ProcId", "0"))
    assert {id(j.cls.arrival) for j in jobs[:-1]} == {id(a) for a in sc.workload}
    for store in (TextStore(), TextStore()):
        kept: dict = {}
        for _ in range(2):
            made, want = TextAds(store), TextAds(TextStore())
            for job in jobs:
                made.add_row(job_row(job, made, kept))
                want.add(list(_job_texts(job)))
                job.texts = None
            assert made.rows == want.rows
            assert set(store.pairs) == {pr for row in want.rows for pr in row}
        assert all(pr is store.pairs[pr] for row in made.rows for pr in row)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(
    st.tuples(st.just("push"), st.floats(0, 50, allow_nan=False) | st.integers(0, 50)),
    st.tuples(st.just("pop"), st.floats(0, 60, allow_nan=False))), max_size=80))
def test_the_end_queue_gives_entries_as_a_heap_does(ops):
    """sim.end_queue.EndQueue, pushed and taken from in any order (ends before those
    already waiting in the earliest bucket, equal ends, whole and fractional seconds),
    gives the entries a heap of them gives, in the same order, and says the same
    first entry and length."""
    import heapq

    from negotiator_ext.sim.end_queue import EndQueue
    q, heap = EndQueue(), []
    for seq, (op, x) in enumerate(ops):
        if op == "push":
            entry = (x, seq, object())
            q.push(entry)
            heapq.heappush(heap, entry)
        else:
            # everything that ends by x, as finish_until takes it
            while (got := q.first()) is not None and got[0] <= x:
                assert got is heap[0]
                assert q.pop() is heapq.heappop(heap)
            assert got is (heap[0] if heap else None)
        assert len(q) == len(heap)
    while heap:
        assert q.pop() is heapq.heappop(heap)
    assert q.first() is None and len(q) == 0


@settings(max_examples=300, deadline=None)
@given(st.one_of(
    st.lists(st.integers(-2 ** 34, 2 ** 34)
             | st.sampled_from([2 ** 32, 2 ** 32 + 1, -2 ** 32, -2 ** 32 - 1])),
    st.lists(st.floats()
             | st.sampled_from([2.0 ** 32, 2.0 ** 32 + 1, -2.0 ** 32, -2.0 ** 32 - 1, 3.0])),
    st.lists(st.integers(-5, 5) | st.floats(-5, 5) | st.booleans())))
def test_an_exact_sum_is_each_whole_number_added(values):
    """sim.pool_rows._exact_sum, at C speed where every value is an int or every one a
    float, gives what adding each value does when every one is `_whole` (a whole number
    within `_EXACT`, bounds included): (the sum as an int, how many were floats); else
    None."""
    from negotiator_ext.sim.pool_rows import _exact_sum, _whole
    if all(_whole(v) for v in values):
        want = (sum(int(v) for v in values), sum(type(v) is float for v in values))
    else:
        want = None
    got = _exact_sum(values)
    assert got == want and (got is None or type(got[0]) is int)
