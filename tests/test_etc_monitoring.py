"""The Prometheus alert rules and the Grafana dashboard the package ships
(negotiator_ext/site_files/etc/) load, and name only metrics the shadow exports (issue 16)."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import yaml
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from negotiator_ext.adapters import metrics
from negotiator_ext.core.records import Standing
from test_metrics_advertise import COMPARISON, REC

ETC = Path(__file__).resolve().parents[1] / "negotiator_ext" / "site_files" / "etc"
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
    doc = yaml.safe_load((ETC / "prometheus" / "negotiator-ext-alerts.yml").read_text())
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
    dash = json.loads((ETC / "grafana" / "negotiator-ext-dashboard.json").read_text())
    names = exported_names()
    ids = [p["id"] for p in dash["panels"]]
    assert len(ids) == len(set(ids)) >= 8
    for p in dash["panels"]:
        assert p["title"] and p["targets"]
        for t in p["targets"]:
            used = set(_METRIC.findall(t["expr"]))
            assert used and used <= names, (p["title"], used - names)
