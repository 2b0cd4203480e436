"""The audit at site scale (issue 35): "with whom" collapsed to the partners that matter,
named in full; the groups over quota in one line; a unit in every CSV header; the
per-pass tables compact; no text cut in any plot, no backticks, simulated time said to
be simulated; and the page at 3, 40 and 1,000 submitters as wide as a 1,400-pixel
window in headless Chromium (long names included)."""

from __future__ import annotations

import csv
import gzip
import json

import pandas as pd
import pytest

from negotiator_ext.core import audit as A
from negotiator_ext.core.records import GroupObs, MatchEntry
from negotiator_ext.views import audit as V
from negotiator_ext.views import audit_plots as P
from negotiator_ext.views import audit_files as F
from test_audit import CHROMIUM, chromium, check_report_files
from test_audit_scale import obs, page_text, record


def long_name(g: int, k: int) -> str:
    return f"group_physics_{g:02d}.higgs_analysis_user_{k:04d}@refcondor.physics.example.org"


def site(n_subs: int, n_groups: int, n_passes: int = 4, pool: str = "pool.example.org"):
    """`n_subs` submitters with long names in `n_groups` groups on 2 slots per
    submitter; the static quotas add up to 1.5 times the pool. Group 0 is starved while
    the others borrow, group g borrowing g x 3 slots (the last the most); in each group
    the first submitter runs 3 over its share and the second is 2 short; the first of
    each group preempts the second; every submitter's priority is the same."""
    per = max(1, n_subs // n_groups)
    weight = 2.0 * per * n_groups
    quota = weight / n_groups
    recs = []
    for i in range(n_passes):
        subs, groups, matches = [], [], []
        for g in range(n_groups):
            gname = long_name(g, 0).split(".")[0]
            extra = 0.0 if g == 0 else 3.0 * g
            use = [2.0] * per
            if g == 0:
                use = [max(0.0, u - 1.5) for u in use]
            use[0] += extra + (3.0 if per > 1 else 0.0)
            if per > 1:
                use[1] = 0.0
            names = [long_name(g, g * per + k) for k in range(per)]
            subs += [obs(n, gname, u, idle=4) for n, u in zip(names, use)]
            groups.append(GroupObs(name=gname, real_quota=quota, config_quota=1.5 * quota,
                                   real_usage=sum(use), real_requested=sum(use) + 4 * per))
            if per > 1:
                matches.append(MatchEntry(job=f"{i}.{g}", submitter=names[0], slot=f"s{g}",
                                          wait=600.0 * (g + 1), group=gname,
                                          preempting=names[1]))
        recs.append(record(i, subs, groups, weight=weight, pool=pool, matches=matches))
    return recs


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    """The reports at 3, 40 and 1,000 submitters (and their audits); the plots each drew
    in PLOTS."""
    out = {}
    save = P._save
    try:
        for n, g in ((3, 3), (40, 4), (1000, 10)):
            a = A.analyse(A.frames_from_records(site(n, g)), pool="pool.example.org")
            d = tmp_path_factory.mktemp(f"site{n}") / "r"
            drawn = PLOTS[n] = []
            P._save = lambda *args, _d=drawn, **kw: _d.append(save(*args, **kw)) or _d[-1]
            V.write_report(a, d)
            out[n] = (a, d)
    finally:
        P._save = save
    return out


PLOTS: dict[int, list] = {}


def test_with_whom_names_in_full_the_partners_that_matter_first(reports):
    a, out = reports[40]
    s = a.tables["summary"]
    starved = s[(s["kind"] == "group") & (s["status"] == "starved")].iloc[0]
    # group 0's lenders, the one that borrowed most (group 3) first
    assert [p.split(" (")[0] for p in starved["with"]] == [
        long_name(g, 0).split(".")[0] for g in (3, 2, 1)]
    # (a long name may break at its dots and before its '@': <wbr>, nothing copied)
    html = (out / "index.html").read_text().replace("<wbr>", "")
    # a submitter's partners keep their group prefix: full names, nothing cut
    over = s[(s["kind"] == "submitter") & (s["status"] == "over share")].iloc[0]
    assert over["with"] and all(p.startswith(over["group"] + ".") for p in over["with"])
    assert over["with"][0].split(" (")[0] in html
    assert ">higgs_analysis_user_" not in html and " higgs_analysis_user_" not in html


def test_groups_over_quota_is_one_line(reports):
    a, out = reports[1000]
    text = page_text(out)
    line = text.split("Groups over quota", 1)[1].split("Preemptions", 1)[0]
    assert line.strip() == (
        "9 groups, 9 of them borrowing while another group was starved; most severe: "
        "group_physics_09, group_physics_08, group_physics_07 and 6 more")
    assert "borrowing from" not in text


def test_every_csv_header_names_its_units(reports):
    a, out = reports[40]
    with open(out / "tables" / "summary.csv", newline="") as f:
        head = next(csv.reader(f))
    assert "severity (slot-weight seconds)" in head and "duration (s)" in head
    assert "first (epoch s)" in head and "first_utc (UTC)" in head
    # every numeric column of every CSV has a unit, but counts named for what they count
    unitless = {"rank", "index", "with_count", "n_groups_not_served", "submitters",
                "real_cycles_between", "comparisons", "min_factor", "max_factor",
                "factor", "is_group", "hgq", "over_quota", "active", "real_rup", "last_rup",
                "first_rup", "last_predicted_rup", "last_eup", "eup", "real_eup",
                "predicted_rup", "shadow_eup", "shadow_pass", "anchor", "source",
                "real_at_share_limit", "real_out_of_time", "difference", "real", "shadow", "pass_uuid",
                "starved", "over_share"}
    missing = set()
    for path in (out / "tables").glob("*.csv"):
        d = pd.read_csv(path)
        for h in d.columns:
            if not h.endswith(")") and d[h].notna().any() \
                    and pd.api.types.is_numeric_dtype(d[h]) \
                    and not pd.api.types.is_bool_dtype(d[h]) and h not in unitless:
                missing.add((path.name, h))
    assert missing == set()


def test_per_pass_tables_are_compact(reports, tmp_path, monkeypatch):
    a, out = reports[40]
    rep = json.loads((out / "report.json").read_text())
    for name in F.PER_PASS:
        assert f"tables/{name}.parquet" in rep["tables"]
        assert not (out / "tables" / f"{name}.json").exists()
        assert not (out / "tables" / f"{name}.csv").exists()
    shares = F.read_table(out / "tables" / "submitter_shares_by_pass.parquet")
    assert list(shares.columns) == F.PER_PASS["submitter_shares_by_pass"]
    assert len(shares) == len(a.tables["submitter_shares_by_pass"])
    # without pyarrow: gzipped CSV, with the units in its header
    monkeypatch.setattr(F, "parquet_available", lambda: False)
    V.write_report(a, tmp_path / "r")
    gz = tmp_path / "r" / "tables" / "submitter_shares_by_pass.csv.gz"
    with gzip.open(gz, "rt") as f:
        assert f.readline().startswith("time (epoch s),name,group,eup,factor,idle_counted "
                                       "(jobs),demand (slot weight)")
    back = F.read_table(gz)
    assert back["delivered"].sum() == pytest.approx(shares["delivered"].sum())
    check_report_files(tmp_path / "r")


def test_no_text_cut_in_any_plot_at_3_40_and_1000_submitters(reports):
    for n in reports:
        drawn = PLOTS[n]
        assert len(drawn) >= (4 if n == 3 else 6), n      # 3: no match, no wait
        for p in drawn:
            assert p.clipped == [], (n, p.src, p.clipped)
        prio = next(p for p in drawn if p.src == "priorities.png")
        # identical lines are one, named for all; a name in a legend is whole
        assert any("others (the same)" in e or " = " in e for e in prio.legend), prio.legend
        assert not any("…" in e for e in prio.legend), prio.legend


def test_the_preemption_plots_label_is_whole_with_one_bar(tmp_path):
    pre = pd.DataFrame([{"source": "shadow", "preemptor": long_name(1, 1),
                         "preempted": long_name(1, 2), "count": 3, "passes": 1}])
    p = V.plot_preemptions(pre, tmp_path)
    assert p.labels[0][1] == "preempting → preempted (submitter)" and p.clipped == []


def test_no_backticks_and_simulated_time_said(reports, tmp_path):
    a, out = reports[3]
    assert "`" not in page_text(out)
    sim = A.analyse(A.frames_from_records(site(3, 3, pool="sim:site")), pool="sim:site")
    V.write_report(sim, tmp_path / "s")
    text = page_text(tmp_path / "s")
    assert "Simulated period: 2026-01-01 00:00 to 2026-01-01 00:03 (the simulation's clock" \
           in text
    p = V.plot_fairness(sim.tables["fairness_by_pass"], tmp_path, V.Words(True))
    assert p.labels[-1][0] == "simulated time (UTC)"
    assert "Period: 2026" in page_text(out) and "Simulated" not in page_text(out)


@pytest.mark.skipif(CHROMIUM is None, reason="no chromium or chromium-browser on PATH")
def test_pages_fit_a_1400_pixel_window_at_3_40_and_1000_submitters(reports, tmp_path):
    """In headless Chromium, in a 1,400-pixel window: nothing wider than the page, no
    table wider than its box, no image past the right edge; the findings first."""
    runs = []
    for n, (_, out) in reports.items():
        h = tmp_path / f"w{n}.html"
        h.write_text(
            "<!DOCTYPE html><html><head><title>pending</title></head><body style='margin:0'>"
            f"<iframe id='f' src='{(out / 'index.html').as_uri()}' style='width:1400px;"
            "height:900px;border:0'></iframe><pre id='out'></pre><script>"
            "document.getElementById('f').addEventListener('load', () => {"
            "const d = document.getElementById('f').contentDocument;"
            "const r = [d.documentElement.scrollWidth, d.querySelectorAll('table').length];"
            "d.querySelectorAll('table').forEach((t, i) => { const w = t.parentElement;"
            " if (t.getBoundingClientRect().width > w.clientWidth + 1) r.push('table' + i); });"
            "d.querySelectorAll('img').forEach(i => { if (i.getBoundingClientRect().right >"
            " 1400) r.push(i.src); });"
            "r.push(d.querySelector('main > section').id);"
            "document.getElementById('out').textContent = r.join(' ');"
            "document.title = 'done'; });</script></body></html>")
        runs.append(["--allow-file-access-from-files", "--window-size=1400,900",
                     "--dump-dom", h.as_uri()])
    for n, got in zip(reports, chromium(*runs, tmp=tmp_path)):
        assert "<title>done</title>" in got, got[-300:]
        width, tables, *rest = got.split('<pre id="out">')[1].split("</pre>")[0].split()
        assert int(width) <= 1400 and int(tables) > 5, (n, width)
        assert rest == ["findings"], (n, rest)
