"""The Prometheus alert rules and the Grafana dashboard the package ships
(negotiator_ext/site_files/etc/) load, and name only metrics the shadow exports (issue 16);
Prometheus's own `promtool` checks the rules and runs their unit tests (shipped beside
them), which fire each alert after its `for:` and keep it quiet otherwise (issue 35).
tests/test_live_prometheus.py has a real Prometheus scrape a live shadow loop."""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

import yaml
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from negotiator_ext.adapters import metrics
from negotiator_ext.core.records import Standing
from test_metrics_advertise import COMPARISON, REC

ETC = Path(__file__).resolve().parents[1] / "negotiator_ext" / "site_files" / "etc"
RULES = ETC / "prometheus" / "negotiator-ext-alerts.yml"
RULE_TESTS = ETC / "prometheus" / "negotiator-ext-alerts.test.yml"
DASHBOARD = ETC / "grafana" / "negotiator-ext-dashboard.json"
# Debian's `prometheus` package (.ci/run installs it): /usr/bin/prometheus, /usr/bin/promtool
PROMETHEUS_SKIP = "{} is not installed (Debian package `prometheus`): checks with it skipped"
_METRIC = re.compile(r"\bnegotiator_ext_[a-z_]+")


def exported_names() -> set[str]:
    limits = {"real": {"schedds": ["s"], "submitters": []}, "predicted": None,
              "groups_not_served": ["g"]}
    rec = type(REC)(**{**REC.__dict__, "pass_timings": {"cycle": 1.0},
                       "time_limits": {"cut": True, "predicted_duration": 130.0,
                                       "matches_within": 10, "matches_beyond": 5,
                                       "groups_not_reached": ["g"]},
                       "comparison": dataclasses.replace(COMPARISON, time_limits=limits)})
    reg = metrics.pass_metrics(rec, standing=Standing(1.0, COMPARISON, 1.0))
    return {s.name for fam in text_string_to_metric_families(generate_latest(reg).decode())
            for s in fam.samples}


def test_alert_rules_load_and_name_exported_metrics():
    doc = yaml.safe_load(RULES.read_text())
    rules = [r for g in doc["groups"] for r in g["rules"]]
    assert len(rules) >= 5 and len({r["alert"] for r in rules}) == len(rules)
    names = exported_names()
    for r in rules:
        assert set(r) <= {"alert", "expr", "for", "labels", "annotations"}, r
        assert r["labels"]["severity"] in ("info", "warning", "critical")
        assert r["annotations"]["summary"]
        used = set(_METRIC.findall(r["expr"]))
        assert used and used <= names, (r["alert"], used - names)
        assert r["expr"].count("(") == r["expr"].count(")")
    alerts = {r["alert"] for r in rules}
    assert {"NegotiatorExtShadowStale", "NegotiatorExtAgreementLow",
            "NegotiatorExtPriorityDrift"} <= alerts


def test_dashboard_loads_and_names_exported_metrics():
    dash = json.loads(DASHBOARD.read_text())
    names = exported_names()
    ids = [p["id"] for p in dash["panels"]]
    assert len(ids) == len(set(ids)) >= 8
    for p in dash["panels"]:
        assert p["title"] and p["targets"]
        for t in p["targets"]:
            used = set(_METRIC.findall(t["expr"]))
            assert used and used <= names, (p["title"], used - names)


# ---- the real tools: promtool --------------------------------------------------------------

def prometheus_tool(name: str) -> str:
    """The path of Prometheus's `name` (prometheus, promtool), or skip saying so."""
    path = shutil.which(name)
    if path is None:
        pytest.skip(PROMETHEUS_SKIP.format(name))
    return path


def alert_rules(path: Path = RULES) -> list[dict]:
    return [r for g in yaml.safe_load(path.read_text())["groups"] for r in g["rules"]
            if "alert" in r]


def promtool(*args: str | Path, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([prometheus_tool("promtool"), *map(str, args)], cwd=cwd,
                          capture_output=True, text=True, timeout=60)


def _seconds(duration: str) -> int:
    """A Prometheus duration of the rules (1h, 30m, 90s, 1h30m) in seconds."""
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400}
    parts = re.findall(r"(\d+)([smhd])", duration)
    assert parts and "".join(n + u for n, u in parts) == duration, duration
    return sum(int(n) * units[u] for n, u in parts)


def test_promtool_checks_the_rules():
    proc = promtool("check", "rules", RULES)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"SUCCESS: {len(alert_rules())} rules found" in proc.stdout


def test_every_alert_has_a_unit_test_firing_it_after_its_for_and_one_keeping_it_quiet():
    """The shipped promtool tests, read as data: each alert of the rules fires in a test
    (with the labels and annotations expected), is checked quiet earlier in that test
    within its `for:` (pending, not firing), and is checked quiet in another test whose
    series never fire it."""
    doc = yaml.safe_load(RULE_TESTS.read_text())
    assert doc["rule_files"] == [RULES.name]
    fires: dict[str, list[tuple[int, list[int]]]] = {}   # alert -> (fired at, quiet at)
    quiet_tests: dict[str, int] = {}
    for n, test in enumerate(doc["tests"]):
        checks = test["alert_rule_test"]
        for alert in {c["alertname"] for c in checks}:
            mine = [(_seconds(c["eval_time"]), bool(c["exp_alerts"])) for c in checks
                    if c["alertname"] == alert]
            quiet = [t for t, firing in mine if not firing]
            fired = [t for t, firing in mine if firing]
            for t in fired:
                fires.setdefault(alert, []).append((t, quiet))
            if not fired:
                quiet_tests[alert] = quiet_tests.get(alert, 0) + 1
    for rule in alert_rules():
        name, hold = rule["alert"], _seconds(rule.get("for", "0s"))
        assert name in fires, f"no unit test fires {name}"
        assert any(any(0 < t - q <= hold for q in quiet) for t, quiet in fires[name]), (
            f"no unit test of {name} checks it still pending within its for: {rule.get('for')}")
        assert quiet_tests.get(name), f"no unit test keeps {name} quiet"
    for test in doc["tests"]:
        for c in test["alert_rule_test"]:
            for exp in c["exp_alerts"]:      # what fires is checked whole
                assert exp["exp_labels"].get("severity") and exp["exp_annotations"].get(
                    "summary"), (test["name"], c["alertname"])


def test_promtool_runs_the_rules_unit_tests_where_install_files_writes_them(tmp_path,
                                                                          capsys):
    """As an admin runs them: in the directory `install-files --prometheus-dir` wrote."""
    from negotiator_ext import cli
    assert cli.main(["install-files", "--prometheus-dir", str(tmp_path)]) == 0
    capsys.readouterr()
    assert (tmp_path / RULES.name).read_bytes() == RULES.read_bytes()
    proc = promtool("test", "rules", RULE_TESTS.name, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "SUCCESS" in proc.stdout


_FAILED = re.compile(r"name: (.+),\s*\n\s*alertname: (\w+), time:")
_SELECTOR = re.compile(r"\bnegotiator_ext_[a-z_]+(?:\{[^}]*\})?")


def test_the_unit_tests_fail_on_rules_that_fire_never_always_or_at_once(tmp_path):
    """The unit tests can fail, each alert's both ways, against copies of the rules where
    every alert never fires (its expression matches nothing): each alert's firing test
    fails; where every alert fires on its first series whatever its value: each alert's
    quiet test fails; and where no alert waits for its `for:`: each alert's firing test
    fails (where it is checked still pending)."""
    doc = yaml.safe_load(RULES.read_text())
    tests = yaml.safe_load(RULE_TESTS.read_text())["tests"]
    firing_in = {(t["name"], c["alertname"]) for t in tests for c in t["alert_rule_test"]
                 if c["exp_alerts"]}
    mutations = {
        "never": lambda r: r.update(expr="vector(1) < 0"),
        "always": lambda r: r.update(
            expr=f"({r['expr']}) or {_SELECTOR.search(r['expr']).group(0)}"),
        "at_once": lambda r: r.pop("for", None)}
    runs = {}
    for kind, mutate in mutations.items():      # promtool mostly waits: all at once
        mutant = json.loads(json.dumps(doc))
        for group in mutant["groups"]:
            for rule in group["rules"]:
                if "alert" in rule:
                    mutate(rule)
        (tmp_path / kind).mkdir()
        shutil.copy(RULE_TESTS, tmp_path / kind / RULE_TESTS.name)
        (tmp_path / kind / RULES.name).write_text(yaml.safe_dump(mutant, sort_keys=False))
        runs[kind] = subprocess.Popen(
            [prometheus_tool("promtool"), "test", "rules", RULE_TESTS.name],
            cwd=tmp_path / kind, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    failed = {}
    for kind, proc in runs.items():
        out = proc.communicate(timeout=60)[0]
        assert proc.returncode == 1, (kind, out)
        # (test name, alert) of every failed check
        failed[kind] = set(_FAILED.findall(out))
    names = {r["alert"] for r in alert_rules()}
    assert {a for t, a in failed["never"] if (t, a) in firing_in} == names
    assert {a for t, a in failed["always"] if (t, a) not in firing_in} == names
    assert {a for t, a in failed["at_once"] if (t, a) in firing_in} == names
