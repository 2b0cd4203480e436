"""`negotiator-ext sweep --engine local`: the configs it makes, the comparison it writes
(a row per config, the best marked, CSV and HTML), bad input. The HTCondor engine runs
as real jobs in tests/test_live_sweep.py."""

from __future__ import annotations

import csv
import io
import json
import os
import sys
from pathlib import Path

import pytest

from negotiator_ext.cli import main
from negotiator_ext.errors import InputError
from negotiator_ext.sim.sweep import parse_vary, sweep_configs
from negotiator_ext.views.sweep import jain

RUN = Path(__file__).parent / "data" / "forecast" / "static-A1"
UNTIL = "1795907773"


def run_cli(argv) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    old = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = out, err
    try:
        rc = main(argv)
    finally:
        sys.stdout, sys.stderr = old
    return rc, out.getvalue(), err.getvalue()


def base_args(out: Path) -> list[str]:
    return ["sweep", str(RUN / "snapshot"), "--history", str(RUN / "history.ads"),
            str(RUN / "queue-end.ads"), "--until", UNTIL, "-o", str(out)]


def test_vary_makes_every_combination_after_the_baseline():
    items = sweep_configs([], parse_vary(["GROUP_QUOTA_group_a=4,8", "CLAIM_WORKLIFE=0,600,1200"]))
    assert len(items) == 1 + 6 and items[0].knobs == {}
    assert items[1].knobs == {"GROUP_QUOTA_group_a": "4", "CLAIM_WORKLIFE": "0"}
    assert {tuple(i.knobs.items()) for i in items[1:]} == {
        (("GROUP_QUOTA_group_a", a), ("CLAIM_WORKLIFE", w))
        for a in ("4", "8") for w in ("0", "600", "1200")}


@pytest.mark.parametrize("bad", ["NOT_A_KNOB=1,2", "PRIORITY_HALFLIFE=", "=1,2", "X"])
def test_a_bad_vary_is_refused_before_anything_runs(tmp_path, bad):
    rc, out, err = run_cli(base_args(tmp_path / "o") + ["--vary", bad])
    assert rc == 2 and "--vary" in err and err.count("\n") == 1
    assert not (tmp_path / "o" / "runs").exists()


def test_a_config_that_does_not_parse_is_named(tmp_path):
    (tmp_path / "bad.config").write_text("this is ( not config\n")
    rc, _, err = run_cli(base_args(tmp_path / "o") + ["--config", str(tmp_path / "bad.config")])
    assert rc == 2 and "bad.config" in err


def test_a_local_sweep_compares_its_forecasts(tmp_path):
    out = tmp_path / "o"
    rc, text, err = run_cli(base_args(out) + ["--vary", "GROUP_QUOTA_group_a=2,8",
                                              "--vary", "CLAIM_WORKLIFE=0"])
    assert rc == 0, err
    assert "3 of 3 forecasts compared" in text
    report = json.loads((out / "report.json").read_text())
    rows = report["configs"]
    assert [r["config"] for r in rows][1:] == ["GROUP_QUOTA_group_a=2, CLAIM_WORKLIFE=0",
                                                "GROUP_QUOTA_group_a=8, CLAIM_WORKLIFE=0"]
    # no claim reuse: every job goes through the negotiator
    assert rows[1]["matches"] > rows[0]["matches"]
    assert rows[1]["groups"]["group_a"]["quota"] == 2
    assert rows[2]["groups"]["group_a"]["quota"] == 8
    for key in ("jain", "starved_slot_hours", "worst_wait_p90", "preemptions"):
        assert any(key in r.get("best", []) for r in rows)
    assert set(report["timelines"]) == {r["config"] for r in rows}
    table = list(csv.DictReader(open(out / "configs.csv")))
    assert len(table) == 3 and table[0]["config"].startswith("baseline")
    groups = list(csv.DictReader(open(out / "groups.csv")))
    assert {g["group"] for g in groups} == {"group_a", "group_b", "group_c"}
    page = (out / "index.html").read_text()
    assert page.count("<svg") == 3 and "&#9733;" in page and "Jain" in page


def test_a_failed_forecast_is_named_and_the_others_reported(tmp_path):
    from negotiator_ext.sim import sweep as sw
    from negotiator_ext.views.sweep import write_report
    items = sweep_configs([], parse_vary(["GROUP_QUOTA_group_a=2,8"]))
    runs = sw.prepare(tmp_path, RUN / "snapshot", [RUN / "history.ads"], [], items,
                      {"until": int(UNTIL), "bucket": 300})
    spec = json.loads((runs[1] / "spec.json").read_text())
    spec["history"] = ["no-such-history.ads"]          # this one's forecast fails
    (runs[1] / "spec.json").write_text(json.dumps(spec))
    errors = sw.run_local(tmp_path, runs)
    assert list(errors) == [runs[1]] and "no such history file" in errors[runs[1]]
    report = write_report(tmp_path, sw.collect(runs, items, errors), {"engine": "local"})
    assert [m["config"] for m in report["missing"]] == ["GROUP_QUOTA_group_a=2"]
    assert report["configs"][1]["error"] and report["configs"][2]["jain"] is not None
    assert "failed: " in (tmp_path / "index.html").read_text()


def test_jain_index():
    assert jain([1, 1, 1]) == pytest.approx(1.0)
    assert jain([1, 0, 0, 0]) == pytest.approx(0.25)
    assert jain([]) is None and jain([0, 0]) is None


def _runs(tmp_path, vary="GROUP_QUOTA_group_a=2,8"):
    from negotiator_ext.sim import sweep as sw
    items = sweep_configs([], parse_vary([vary]))
    runs = sw.prepare(tmp_path, RUN / "snapshot", [RUN / "history.ads", RUN / "queue-end.ads"],
                      [], items, {"until": int(UNTIL), "bucket": 300})
    return sw, runs


def test_forked_forecasts_share_one_read_of_the_history(tmp_path, monkeypatch):
    """The history is read once, before the forecasts fork; each child's forecast is the
    one a process that read it itself makes."""
    sw, runs = _runs(tmp_path)
    jobs = [(d / "spec.json", tmp_path / "inputs", d / "result.json") for d in runs]
    assert sw._run_pool(runs, jobs, 1, None) == {}         # each read by itself
    alone = [json.loads((d / "result.json").read_text()) for d in runs]
    for d in runs:
        (d / "result.json").unlink()
    from negotiator_ext.sim import history
    reads = tmp_path / "reads"
    real = history.read_history

    def counted(*args, **kw):
        with open(reads, "a") as f:
            f.write(f"{os.getpid()}\n")
        return real(*args, **kw)
    monkeypatch.setattr(history, "read_history", counted)
    assert sw.run_local(tmp_path, runs, workers=2) == {}
    assert reads.read_text().splitlines() == [str(os.getpid())]     # here, once
    shared = [json.loads((d / "result.json").read_text()) for d in runs]
    assert shared == alone and all(doc["negotiator_matches"] > 0 for doc in shared)
    assert shared[1] != shared[2]


def test_a_stop_ends_the_forked_forecasts_at_once(tmp_path, monkeypatch):
    import multiprocessing
    import signal
    import threading
    import time
    sw, runs = _runs(tmp_path)
    before = signal.getsignal(signal.SIGTERM)
    monkeypatch.setattr(sw, "_run_local", lambda job, shared=None: time.sleep(120))
    threading.Timer(1.0, os.kill, (os.getpid(), signal.SIGTERM)).start()
    began = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        sw.run_local(tmp_path, runs, workers=2)
    assert time.monotonic() - began < 10
    assert multiprocessing.active_children() == []
    assert signal.getsignal(signal.SIGTERM) == before       # put back


def test_a_forecast_process_that_dies_is_named(tmp_path, monkeypatch):
    sw, runs = _runs(tmp_path)
    monkeypatch.setattr(sw, "_run_local", lambda job, shared=None: os.kill(os.getpid(), 9))
    errors = sw.run_local(tmp_path, runs, workers=2)
    assert set(errors) == set(runs)
    assert all("killed by signal 9" in e for e in errors.values())
