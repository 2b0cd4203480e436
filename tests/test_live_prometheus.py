"""A real Prometheus (Debian's `prometheus`) scraping a real `shadow --interval` loop beside
the session's live pool (tests/livepool.py), with the shipped alert rules loaded: every
query of the shipped Grafana dashboard, and every alert rule's expression, asked through
Prometheus's HTTP API, answers from what it scraped (issue 35).

The loop writes its textfile (`--metrics-file`), served here as node_exporter's textfile
collector serves it (the file as it is, on each scrape); Prometheus scrapes it every
second, keeps its data in the test's temporary directory and listens on a free port.

These run only where an HTCondor install is found (see tests/livepool.py), and skip with
one line where Prometheus is not installed.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import yaml

from livepool import free_port
from test_etc_monitoring import DASHBOARD, RULES, alert_rules, prometheus_tool

pytestmark = pytest.mark.live

JOB = "negotiator-ext"
# present in every pass's metrics: where it has a value, the loop was scraped
PASSES = "negotiator_ext_pass_timestamp_seconds"
WINDOW = 4          # s of passes (one a second) scraped after the first comparison
# panels that may answer with no data here, with why. None: the test waits for the loop's
# first comparison with a real cycle, before which the agreement, matches, real cycle
# time and "since the last comparison" panels are empty (as in a pool whose negotiator
# has not cycled since the loop started); the drift panel needs a pass that saw exactly
# one real cycle since the pass before it, which the comparing pass is.
MAY_BE_EMPTY: dict[str, str] = {
    # the drift is known only to a pass that saw exactly one real cycle since the pass
    # before it: on a loaded machine the window may hold none, or its first one late in
    # the window (when it has data, its values are checked as every other panel's are;
    # the promtool tests check its rule over such gaps)
    "Largest priority drift (real against the accountant's rules)": "no pass knew a drift",
}
# Grafana's own variables, as Grafana gives them to Prometheus for this test's window
GRAFANA_VARIABLES = {"$__rate_interval": "1m", "$__interval": "1s", "$__range": "1m"}


class _Textfile(BaseHTTPRequestHandler):
    """GET /metrics: the loop's textfile as it is now (a scrape before the loop's first
    pass answers 503, as a target that is not up yet)."""

    def do_GET(self):  # noqa: N802 (the http.server name)
        try:
            body = self.server.textfile.read_bytes()
        except FileNotFoundError:
            self.send_error(503)
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def api(port: int, path: str, **params) -> dict:
    """Prometheus's HTTP API answer to `path` (its JSON document; an error status raises
    with Prometheus's own error text)."""
    url = f"http://127.0.0.1:{port}/api/v1/{path}"
    if params:
        url += "?" + urllib.parse.urlencode(params)
    try:
        with urllib.request.urlopen(url, timeout=10) as resp:
            doc = json.load(resp)
    except urllib.error.HTTPError as exc:
        doc = json.loads(exc.read() or b"{}")
        raise AssertionError(f"{path} {params}: {exc.code} {doc.get('error', '')}") from None
    assert doc["status"] == "success", doc
    return doc["data"]


def query(port: int, expr: str) -> list[dict]:
    data = api(port, "query", query=expr)
    assert data["resultType"] in ("vector", "scalar"), (expr, data)
    return data["result"] if data["resultType"] == "vector" else [{"value": data["result"]}]


def covered(port: int, expr: str, start: float, end: float) -> set[float]:
    """The steps (each second of [start, end]) at which `expr` has a value in some series
    (Prometheus's range query, as Grafana asks for a panel)."""
    data = api(port, "query_range", query=expr, start=f"{start:.3f}", end=f"{end:.3f}",
               step="1")
    assert data["resultType"] == "matrix", (expr, data)
    return {float(t) for series in data["result"] for t, _ in series["values"]}


def dashboard_queries() -> list[tuple[str, str, str]]:
    """(panel title, refId, PromQL expression with Grafana's variables given) of every
    target of the shipped dashboard."""
    dash = json.loads(DASHBOARD.read_text())
    out = []
    for panel in dash["panels"]:
        for target in panel["targets"]:
            expr = target["expr"]
            for var, value in GRAFANA_VARIABLES.items():
                expr = expr.replace(var, value)
            assert "$" not in expr, (panel["title"], expr)    # a variable nobody gives
            out.append((panel["title"], target["refId"], expr))
    return out


def test_prometheus_scrapes_a_shadow_loop_and_every_dashboard_query_answers(clean_pool,
                                                                           tmp_path):
    prometheus = prometheus_tool("prometheus")
    pool = clean_pool
    state = tmp_path / "state"
    textfile = state / "negotiator_ext.prom"

    server = ThreadingHTTPServer(("127.0.0.1", 0), _Textfile)
    server.textfile = textfile
    target = f"127.0.0.1:{server.server_address[1]}"
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = free_port()
    (tmp_path / "prometheus.yml").write_text(yaml.safe_dump({
        "global": {"scrape_interval": "1s", "scrape_timeout": "1s",
                   "evaluation_interval": "1s"},
        "rule_files": [str(RULES)],
        "scrape_configs": [{"job_name": JOB, "static_configs": [{"targets": [target]}]}]}))
    procs = {
        "prometheus": subprocess.Popen(
            [prometheus, f"--config.file={tmp_path / 'prometheus.yml'}",
             f"--storage.tsdb.path={tmp_path / 'tsdb'}",
             f"--web.listen-address=127.0.0.1:{port}", "--log.level=warn"],
            stdout=subprocess.DEVNULL, stderr=(tmp_path / "prometheus.err").open("w")),
        "shadow": subprocess.Popen(
            [sys.executable, "-m", "negotiator_ext", "shadow", "--pool", pool.collector,
             "--interval", "1", "--state-dir", str(state), "--metrics-file", str(textfile),
             "--negotiator-log", str(pool.log_dir / "NegotiatorLog"),
             "--matchlog", str(pool.log_dir / "MatchLog"), "--no-advertise"],
            env=pool.env, stdout=(tmp_path / "shadow.out").open("w"),
            stderr=(tmp_path / "shadow.err").open("w"))}

    def scraped(expr: str):
        try:
            return query(port, expr)
        except (OSError, AssertionError):
            return None

    started = time.monotonic()
    try:
        pool.wait_for(textfile.exists, 60, "the loop's first textfile")
        # jobs in both groups after its first pass: the next real cycle matches them and
        # the loop's pass after that cycle compares it with ours
        pool.submit(count=3, group="group_a", user="prom_a")
        pool.submit(count=2, group="group_b", user="prom_b")
        pool.wait_for(lambda: scraped('negotiator_ext_matches{side="real"} > 0'), 60,
                      "Prometheus to scrape a comparison with a real cycle")
        pool.wait_for(lambda: scraped("negotiator_ext_submitter_usage_weighted > 0"), 30,
                      "Prometheus to scrape the jobs' usage")
        elapsed = time.monotonic() - started
        since = time.time()
        time.sleep(WINDOW)          # passes after the one that compared, most without a
                                    # new real cycle (one every 8 s)
        until = time.time()

        answers = {(title, ref, expr): query(port, expr)
                   for title, ref, expr in dashboard_queries()}
        # as Grafana asks for a panel: a value at each step of the window
        steps = {expr: covered(port, expr, since, until) for expr in {
            e for _, _, e in dashboard_queries()} | {PASSES}}
        rule_answers = {r["alert"]: query(port, r["expr"]) for r in alert_rules()}
        groups = api(port, "rules")["groups"]
        targets = api(port, "targets")["activeTargets"]
        pending = query(port, 'ALERTS{alertname=~"NegotiatorExtShadow.*|'
                              'NegotiatorExtComparisonStale"}')
        ages = {expr: float(query(port, expr)[0]["value"][1]) for expr in (
            "time() - negotiator_ext_last_complete_pass_timestamp_seconds",
            "time() - negotiator_ext_comparison_timestamp_seconds")}
    finally:
        for p in procs.values():
            p.send_signal(signal.SIGTERM)
        for p in procs.values():
            p.wait(timeout=60)
        server.shutdown()
        server.server_close()
    for name, p in procs.items():
        assert p.returncode == 0, (tmp_path / f"{name}.err").read_text()[-2000:]
    print(f"\nprometheus beside a shadow loop: data for the dashboard after {elapsed:.1f} s")

    assert [(t["labels"]["job"], t["health"]) for t in targets] == [(JOB, "up")]
    # every dashboard query answers; with data from the scraped loop unless listed
    assert len(answers) >= 15
    for (title, ref, expr), result in answers.items():
        if title in MAY_BE_EMPTY and not result:
            continue
        assert result, f"panel {title!r} ({ref}) has no data: {expr}"
        for series in result:
            assert series.get("metric", {}).get("job", JOB) == JOB, (title, series)
            assert series["value"][1] not in ("NaN", "+Inf", "-Inf"), (title, series)
    # ... and at each step where the loop was scraped: no panel has gaps between passes
    for (title, ref, expr) in answers:
        if title not in MAY_BE_EMPTY:
            assert not steps[PASSES] - steps[expr], (
                f"panel {title!r} ({ref}) has no data at {len(steps[PASSES] - steps[expr])} "
                f"of the {len(steps[PASSES])} steps of {WINDOW} s the loop was scraped: {expr}")
    assert len(steps[PASSES]) >= WINDOW
    # what the panels show is this loop's: fresh, complete, both groups, both users
    assert max(ages.values()) < 30, ages
    by_expr = {expr: result for (_, _, expr), result in answers.items()}
    assert [s["value"][1] for s in by_expr["negotiator_ext_pass_complete"]] == ["1"]
    assert {s["metric"]["group"] for s in by_expr[
        'negotiator_ext_group_quota{side="real"}']} >= {"group_a", "group_b"}
    users = {s["metric"]["submitter"].split("@")[0] for s in by_expr[
        'topk(20, negotiator_ext_submitter_usage_weighted{side="real"})']}
    assert {"group_a.prom_a", "group_b.prom_b"} <= users, users

    # the shipped rules: loaded, evaluated every second without error, and their
    # expressions answer through the API (a healthy loop: quiet, or not yet past `for:`)
    rules = [r for g in groups for r in g["rules"]]
    assert {r["name"] for r in rules} == set(rule_answers)
    for r in rules:
        assert (r["health"], r.get("lastError", "")) == ("ok", ""), r
        assert not r["lastEvaluation"].startswith("0001-"), r     # Go's zero time: never
    assert not pending, pending
    for name in ("NegotiatorExtShadowStale", "NegotiatorExtShadowNeverComplete",
                 "NegotiatorExtShadowMissing", "NegotiatorExtComparisonStale"):
        assert rule_answers[name] == [], (name, rule_answers[name])
