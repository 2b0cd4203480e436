"""The audit at scale (issue 16.4): a ranked summary of at most 20 rows at 1,000
submitters, each linking to its details; a noise floor under which a shortfall is not
starvation; demand that counts each job once; plots with units and legends, readable at
one pass and at 10,000; wording that fits a simulated ledger; no source files or rule ids
on the page; a body as wide as the window (checked in headless Chromium)."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest

from negotiator_ext.core import audit as A
from negotiator_ext.core.records import GroupObs, MatchEntry, PassRecord, SubmitterObs
from negotiator_ext.views import audit as V
from negotiator_ext.views import audit_plots as P
from test_audit import CHROMIUM, chromium, check_report_files, parse_page, table

T0 = 1_767_225_600                      # 2026-01-01T00:00:00Z


def obs(name, group, usage, *, idle=5, running=None, claimed=None, eup=1.0, factor=1.0,
        rup=None) -> SubmitterObs:
    run = math.ceil(usage) if running is None else running
    return SubmitterObs(name=name, group=group, is_group=False, factor=factor,
                        policy_factor=factor, real_rup=eup / factor if rup is None else rup,
                        real_eup=eup, real_usage=usage, idle_jobs=idle, running_jobs=run,
                        claimed_weight=float(run if claimed is None else claimed))


def record(i, subs, groups=(), *, weight, pool="synth", matches=(), real=(),
           interval=60) -> PassRecord:
    t = T0 + interval * i
    return PassRecord(uuid=f"{i:08d}" + "0" * 24, pool=pool, started_at=float(t),
                      finished_at=float(t), snapshot_time=t, status="complete", reason=None,
                      real_cycle_time=t, real_accountant_time=t, shadow_duration=0.0,
                      capture_duration=0.0, pool_weight=weight, submitters=tuple(subs),
                      groups=tuple(groups), shadow_matches=tuple(matches),
                      real_matches=tuple(real), comparable=pool.startswith("sim:") is False)


def thousand(n_passes=4, pool="sim:thousand") -> list[PassRecord]:
    """10 groups of 100 submitters on 2,000 slots (quota 200 each, a fair share of 2 per
    submitter). In each group u0000 runs 8 (6 over its share), u0001 and u0002 run 0.5
    (1.5 short: starved), and the other 97 run 1.4 in the first pass (0.6 short: 30% of
    their share, but under the noise floor) and 2 after it."""
    recs = []
    for i in range(n_passes):
        subs, groups = [], []
        for g in range(10):
            gname = f"group_{g:02d}"
            use = [8.0, 0.5, 0.5] + [1.4 if i == 0 else 2.0] * 97
            subs += [obs(f"{gname}.u{k:04d}@example.org", gname, u) for k, u in enumerate(use)]
            groups.append(GroupObs(name=gname, real_quota=200.0, config_quota=200.0,
                                   real_usage=sum(use), real_requested=sum(use) + 500))
        matches = [MatchEntry(job=f"{i}.{k}", submitter=subs[k].name, slot=f"s{k}",
                              wait=60.0 * k, group=subs[k].group) for k in range(0, 1000, 97)]
        recs.append(record(i, subs, groups, weight=2000.0, pool=pool, matches=matches))
    return recs


def page_text(out: Path) -> str:
    return " ".join(" ".join(parse_page((out / "index.html").read_text()).text).split())


def summary_rows(html: str) -> list[str]:
    """The <tr> of the ranked summary (the section with id "summary")."""
    sec = html.split('<section id="summary">', 1)[1].split("</section>", 1)[0]
    body = sec.split("<tbody>", 1)[1].split("</tbody>", 1)[0]
    return re.findall(r"<tr[ >].*?</tr>", body, flags=re.S)


# ---------------------------------------------------------------- analysis

def test_a_fraction_of_a_slot_short_is_not_starved(tmp_path):
    """A fair share of 2 and 1.4 delivered: 30% short but 0.6 of a slot, for one pass,
    is under the noise floor (1 slot); 1.5 short is starved; with --noise-floor 0 both
    are; and the same floor holds for over its share and for groups. One pass lasts no
    known time (severity 0): the larger amount ranks first."""
    subs = [obs("small", "<none>", 1.4), obs("big", "<none>", 0.5), obs("hog", "<none>", 4.1)]
    p = record(0, subs, weight=6.0)
    a = A.analyse(A.frames_from_records([p]))
    s = a.tables["submitter_shares_by_pass"].set_index("name")
    assert list(s.loc[["small", "big", "hog"], "demand_capped"]) == pytest.approx([2, 2, 2])
    assert not s.loc["small", "starved"] and s.loc["big", "starved"]
    assert s.loc["hog", "over_share"]                   # 2.1 over
    assert [(r["name"], r["status"]) for _, r in a.tables["summary"].iterrows()] == [
        ("hog", "over share"), ("big", "starved")]
    assert a.summary["noise_floor"] == 1.0
    z = A.analyse(A.frames_from_records([p]), noise_floor=0.0)
    sz = z.tables["submitter_shares_by_pass"].set_index("name")
    assert sz.loc["small", "starved"] and sz.loc["small", "shortfall"] == pytest.approx(0.6)
    # a group 0.5 over its quota is not over quota; 1.5 over is
    g = [GroupObs(name="ga", real_quota=10.0, real_usage=10.5, real_requested=10.5),
         GroupObs(name="gb", real_quota=10.0, real_usage=8.5, real_requested=9.0)]
    q = record(0, [obs("a", "ga", 10.5), obs("b", "gb", 8.5)], g, weight=20.0)
    gq = A.analyse(A.frames_from_records([q])).tables["group_quota_by_pass"].set_index("group")
    assert not gq.loc["ga", "over_quota"] and not gq.loc["gb", "starved"]
    q2 = record(0, [obs("a", "ga", 11.5), obs("b", "gb", 8.5)],
                [GroupObs(name="ga", real_quota=10.0, real_usage=11.5, real_requested=12.0),
                 GroupObs(name="gb", real_quota=10.0, real_usage=8.5, real_requested=10.0)],
                weight=20.0)
    gq2 = A.analyse(A.frames_from_records([q2])).tables["group_quota_by_pass"].set_index("group")
    assert gq2.loc["ga", "over_quota"] and gq2.loc["gb", "starved"]
    with pytest.raises(ValueError):
        A.analyse(A.frames_from_records([p]), noise_floor=-1.0)
    # on the page, a single pass lasts "1 pass" (not "0 s") and has no severity
    V.write_report(a, tmp_path / "r")
    rows = summary_rows((tmp_path / "r" / "index.html").read_text())
    assert len(rows) == 2 and all(">1 pass</td>" in r and ">–</td>" in r for r in rows)
    assert not any(">0 s</td>" in r for r in rows)


def test_demand_counts_each_job_once():
    """B's submitter ads say 10 idle and none running, but the accountant (after the
    pass's matches, as a simulation records it) already charges 10: its demand is 10, not
    20. Jobs of 4 slot-weight units each count at that weight; ads as new as the
    accountant change nothing."""
    subs = [obs("B", "<none>", 10.0, idle=10, running=0, claimed=0),
            # 10 four-core jobs running (claimed 40), 5 idle: nothing matched since
            obs("wide", "<none>", 40.0, idle=5, running=10, claimed=40),
            # the same, and 2 four-core jobs more charged: 2 of the 5 idle matched since
            obs("wide2", "<none>", 48.0, idle=5, running=10, claimed=40),
            # 5 running, 10 idle in the ads; 3 of those matched since: 8 charged
            obs("some", "<none>", 8.0, idle=10, running=5, claimed=5),
            # ads as new as the accountant: 6 running and 10 more idle
            obs("fresh", "<none>", 6.0, idle=10, running=6, claimed=6),
            # no usage recorded: the running job count stands for it
            SubmitterObs(name="counted", group="<none>", is_group=False, factor=1.0,
                         real_eup=1.0, idle_jobs=2, running_jobs=3)]
    a = A.analyse(A.frames_from_records([record(0, subs, weight=200.0)]))
    s = a.tables["submitter_shares_by_pass"].set_index("name")
    assert s.loc["B", "demand"] == 10 and s.loc["B", "idle_counted"] == 0
    assert s.loc["wide", "demand"] == 45
    assert s.loc["wide2", "idle_counted"] == 3 and s.loc["wide2", "demand"] == 51
    assert s.loc["some", "demand"] == 15 and s.loc["some", "idle_counted"] == 7
    assert s.loc["fresh", "demand"] == 16
    assert s.loc["counted", "demand"] == 5 and s.loc["counted", "demand_basis"] == "count"
    # B has nothing idle left: its fair share is what it runs
    assert s.loc["B", "demand_capped"] == 10 and not s.loc["B", "starved"]


def test_a_group_on_surplus_shares_what_it_got():
    """group_a (quota 10) runs 30 on surplus: its two submitters (equal EUPs) deserve 15
    each of it, so the one running 25 is over its share and the one running 5 with idle
    jobs is starved; the group is over quota."""
    subs = [obs("a1", "group_a", 25.0), obs("a2", "group_a", 5.0),
            obs("b1", "group_b", 10.0, idle=0)]
    g = [GroupObs(name="group_a", real_quota=10.0, real_usage=30.0, real_requested=40.0),
         GroupObs(name="group_b", real_quota=30.0, real_usage=10.0, real_requested=10.0)]
    a = A.analyse(A.frames_from_records([record(0, subs, g, weight=40.0)]))
    s = a.tables["submitter_shares_by_pass"].set_index("name")
    assert list(s.loc[["a1", "a2"], "allocation"]) == [30.0, 30.0]
    assert list(s.loc[["a1", "a2"], "deserved"]) == pytest.approx([15.0, 15.0])
    assert s.loc["a1", "over_share"] and s.loc["a2", "starved"]
    # water-filled within the 30: a2 capped at its demand of 10, a1 gets the other 20
    assert list(s.loc[["a1", "a2"], "demand_capped"]) == pytest.approx([20.0, 10.0])
    assert (s.loc["a1", "excess"], s.loc["a2", "shortfall"]) == (5.0, 5.0)
    assert s.loc["b1", "allocation"] == 30.0            # below its quota: the quota
    rows = {(r["kind"], r["name"], r["status"]) for _, r in a.tables["summary"].iterrows()}
    assert rows == {("group", "group_a", "over quota"), ("submitter", "a1", "over share"),
                    ("submitter", "a2", "starved")}
    # the group over quota that starved nobody comes after the submitters' problems
    assert list(a.tables["summary"]["status"])[-1] == "over quota"


# ---------------------------------------------------------------- the page

def test_a_thousand_submitters_open_with_a_ranked_summary_of_twenty(tmp_path):
    a = A.analyse(A.frames_from_records(thousand()), pool="sim:thousand")
    summ = a.tables["summary"]
    # 10 submitters over their share, 20 starved, 10 groups (starved in the first pass,
    # over quota after): nobody of the 970 short by 0.6 of a slot for one pass
    assert len(summ) == 50
    starved = summ[(summ["status"] == "starved") & (summ["kind"] == "submitter")]
    assert sorted(starved["name"].str.slice(9, 14).unique()) == ["u0001", "u0002"]
    sev = list(summ.loc[summ["status"] != "over quota", "severity"])
    assert sev == sorted(sev, reverse=True) and list(summ["rank"]) == list(range(1, 51))
    out = tmp_path / "report"
    V.write_report(a, out)
    html = (out / "index.html").read_text()
    rows = summary_rows(html)
    assert len(rows) == 20
    page = check_report_files(out)          # every link lands on an id of the page
    links = [re.search(r'href="#([^"]+)"', r).group(1) for r in rows]
    assert len(set(links)) == 20 and all(x in page.ids for x in links)
    assert [re.search(r'id="rank-(\d+)"', r).group(1) for r in rows] == [
        str(k) for k in range(1, 21)]
    # the first screen: the summary comes before anything else the page says
    text = page_text(out)
    assert text.index("Who is over quota, borrowing, or starved") < text.index("Demand =")
    assert "The 20 most severe of 50 conditions" in text
    # all of them stay in the files
    assert len(table(out, "summary")) == 50
    # the With cell: the partners of the same group, in full (issue 35: without their
    # group's prefix, grp04.u0904 read as another group's u0904)
    first_sub = next(r for r in rows if "over share" in r)
    assert ">group_00.u0001@example.org, group_00.u0002@example.org</td>" in first_sub.replace(
        "<wbr>", "")
    # ... at most 2 of them, and how many more
    rec = {"kind": "submitter", "group": "g", "with": [f"g.u{k} (3 passes)" for k in range(5)]}
    assert V._with_text(rec, 2, passes=False) == "g.u0, g.u1 and 3 more"
    assert V._with_text(rec, 10) == ", ".join(f"g.u{k} (3 passes)" for k in range(5))


def test_plots_have_units_legends_and_a_sane_time_axis_at_1_and_10000_passes(tmp_path):
    """One pass: the time axis spans minutes, not years. 10,000 passes: a week. Every
    panel names its quantity with a unit, every plot has a legend or a single series;
    submitters whose priorities are the same in every pass share a named line; a
    constant priority factor is not drawn as a flat panel."""
    def subs(i):
        return [obs("alice", "<none>", 4.0 + (i % 3), rup=2.0, factor=1.0),
                obs("bob", "<none>", 1.0, rup=1.0), obs("carol", "<none>", 1.0, rup=1.0)]

    for n, days in ((1, None), (10_000, 10_000 * 60 / 86400)):
        recs = [record(i, subs(i), weight=10.0, pool="sim:p",
                       matches=[MatchEntry(job=f"{i}.0", submitter="alice", slot="s",
                                           wait=0.0)]) for i in range(n)]
        a = A.analyse(A.frames_from_records(recs), pool="sim:p")
        out = tmp_path / f"r{n}"
        V.write_report(a, out)
        plots = {p.src: p for p in _plots(a, out)}
        assert {"shares.png", "priorities.png", "fairness.png", "groups.png"} <= set(plots)
        # every wait is 0: no plot with a -0.04..0.04 axis, the page says why
        assert "waits.png" not in plots
        assert "Every wait was 0 s" in page_text(out)
        for p in plots.values():
            assert p.labels, p.src
            for x, y in p.labels:
                assert re.search(r"\(.+\)", y), (p.src, y)
            assert any(re.search(r"\(.+\)", x) for x, _ in p.labels), p.src
            assert p.legend, p.src
            for lo, hi in p.xlims:
                if days is None:
                    assert hi - lo < 1 / 24, (p.src, hi - lo)       # under an hour
                else:
                    assert days * 0.9 < hi - lo < days * 1.2, (p.src, hi - lo)
        prio = plots["priorities.png"]
        assert len(prio.labels) == 1                 # the factor is 1 throughout: RUP only
        assert "bob = carol" in prio.legend
        assert "The priority factor was 1 for each of them" in prio.caption


def _plots(a, out) -> list:
    """The plots of audit `a` drawn again into `out` (write_report keeps no Plot)."""
    t = a.tables
    w = V.Words(a.summary["kind"] == "simulation")
    got = [V.plot_shares(t["submitter_shares_by_pass"], out, t["summary"], w),
           V.plot_groups(t["group_quota_by_pass"], out, t["summary"], w),
           V.plot_waits(a.waits, out, w),
           V.plot_priorities(t["priorities_by_pass"], t["submitter_shares_by_pass"], out, w),
           V.plot_preemptions(t["preemptions"], out, w),
           V.plot_fairness(t["fairness_by_pass"], out)]
    return [p for p in got if p is not None]


def test_waits_are_plotted_in_a_unit_that_fits():
    out_units = [P._wait_unit(s)[0] for s in (0.0, 90.0, 600.0, 5 * 3600.0, 5 * 86400.0)]
    assert out_units == ["seconds", "seconds", "minutes", "hours", "days"]


def _preempting(pool: str) -> list[PassRecord]:
    recs = []
    for i in range(3):
        subs = [obs("alice", "<none>", 6.0), obs("bob", "<none>", 2.0, idle=8)]
        m = [MatchEntry(job=f"{i}.0", submitter="alice", slot=f"s{i}", wait=120.0,
                        preempting="bob")]
        real = [] if pool.startswith("sim:") else [MatchEntry(
            job=f"{i}.0", submitter="alice", slot=f"s{i}", preempting="bob")]
        recs.append(record(i, subs, weight=8.0, pool=pool, matches=m, real=real))
    return recs


def test_a_simulated_ledger_is_not_worded_as_beside_a_real_negotiator(tmp_path):
    a = A.analyse(A.frames_from_records(_preempting("sim:two")), pool="sim:two")
    assert a.summary["kind"] == "simulation"
    out = tmp_path / "sim"
    V.write_report(a, out)
    text = page_text(out)
    assert "Preemptions 3 in the simulated cycles" in text
    assert not re.search(r"\breal\b", text, flags=re.I), re.findall(
        r".{60}\breal\b.{60}", text, flags=re.I)[:3]
    assert not re.search(r"\bours\b|\bour cycles?\b", text, flags=re.I)
    assert "Simulated pool sim:two" in text
    # a watched pool keeps both sides, said plainly
    b = A.analyse(A.frames_from_records(_preempting("pool.example.org")),
                  pool="pool.example.org")
    assert b.summary["kind"] == "shadow"
    out2 = tmp_path / "shadow"
    V.write_report(b, out2)
    assert "Preemptions our cycles 3, the real negotiator 3 (MatchLog)" in page_text(out2)


@pytest.mark.parametrize("pool", ["sim:one", "pool.example.org"])
def test_no_source_files_or_rule_ids_on_the_page(tmp_path, pool):
    from test_audit import synthetic_passes
    import dataclasses
    recs = [dataclasses.replace(r, pool=pool) for r in synthetic_passes()]
    a = A.analyse(A.frames_from_records(recs + _preempting(pool)), pool=pool)
    out = tmp_path / "r"
    V.write_report(a, out)
    html = (out / "index.html").read_text()
    text = page_text(out)
    for bad in (r"\b(core|views|adapters)/", r"\.py\b", r"\brules? [A-Z]{0,2}\d",
                r"\b[A-Z]\d{1,2}\b(?![-:])"):
        assert not re.search(bad, text), (bad, re.findall(f".{{40}}{bad}.{{40}}", text)[:3])
    captions = re.findall(r"<figcaption>(.*?)</figcaption>", html, flags=re.S)
    assert captions and not any(re.search(r"\.py\b|rule", c) for c in captions)


def _body_rule(html: str) -> str:
    css = html.split("<style>", 1)[1].split("</style>", 1)[0]
    return re.search(r"(?:^|[}/])\s*body\s*\{([^}]*)\}", css).group(1)


def test_the_body_uses_the_windows_width(tmp_path):
    a = A.analyse(A.frames_from_records(thousand(2)), pool="sim:thousand")
    out = tmp_path / "report"
    V.write_report(a, out)
    html = (out / "index.html").read_text()
    body = _body_rule(html)
    assert "width" not in body, body                     # neither width nor max-width
    if CHROMIUM is None:
        pytest.skip("chromium is not installed (Debian package `chromium`): the browser "
                    "check did not run")
    # in a 1,800-pixel window the body and the summary table are wider than 72em was
    harness = tmp_path / "width.html"
    harness.write_text(
        "<!DOCTYPE html><html><head><title>pending</title></head><body style='margin:0'>"
        f"<iframe id='f' src='{(out / 'index.html').as_uri()}' style='width:1800px;"
        "height:900px;border:0'></iframe><pre id='out'></pre><script>"
        "document.getElementById('f').addEventListener('load', () => {"
        "const d = document.getElementById('f').contentDocument;"
        "const em = parseFloat(getComputedStyle(d.body).fontSize);"
        "const t = d.querySelector('#summary table');"
        "document.getElementById('out').textContent = [d.body.getBoundingClientRect().width,"
        " em, t.getBoundingClientRect().width, d.querySelectorAll('#summary tbody tr').length]"
        ".join(' '); document.title = 'done'; });</script></body></html>")
    got, = chromium(["--allow-file-access-from-files", "--dump-dom", harness.as_uri()],
                    tmp=tmp_path)
    assert "<title>done</title>" in got, got[-500:]
    body_w, em, table_w, rows = (float(v) for v in
                                 got.split('<pre id="out">')[1].split("</pre>")[0].split())
    assert body_w > 1700 and body_w > 72 * em + 100
    assert table_w > 72 * em
    assert rows == 20


def test_noise_floor_option(tmp_path, capsys):
    from test_audit import run_audit, write_ledger
    conf = tmp_path / "empty.conf"
    conf.write_text("")
    subs = [obs("small", "<none>", 1.4), obs("big", "<none>", 0.5), obs("hog", "<none>", 4.1)]
    url = write_ledger(tmp_path / "l.sqlite", [record(0, subs, weight=6.0)])
    base = ["--ledger", url, "--config", str(conf)]
    assert run_audit([*base, "-o", str(tmp_path / "a")]) == 0
    assert {r["name"] for r in table(tmp_path / "a", "summary")} == {"hog", "big"}
    assert run_audit([*base, "--noise-floor", "0", "-o", str(tmp_path / "b")]) == 0
    assert {r["name"] for r in table(tmp_path / "b", "summary")} == {"hog", "big", "small"}
    assert "no noise floor: --noise-floor 0" in page_text(tmp_path / "b")
    capsys.readouterr()
    for bad in ("-1", "lots", "inf", "nan"):
        assert run_audit([*base, "--noise-floor", bad, "-o", str(tmp_path / "c")]) == 2
        assert "--noise-floor" in capsys.readouterr().err
    assert not (tmp_path / "c").exists()


def test_the_noise_floor_is_inclusive():
    """A shortfall, excess or surplus of exactly the noise floor (1 slot) counts."""
    subs = [obs("short", "<none>", 1.0, idle=1), obs("long", "<none>", 3.0, idle=0)]
    s = A.analyse(A.frames_from_records([record(0, subs, weight=4.0)])
                  ).tables["submitter_shares_by_pass"].set_index("name")
    assert s.loc["short", "demand_capped"] == 2.0 and s.loc["short", "starved"]
    assert s.loc["short", "shortfall"] == 1.0
    g = [GroupObs(name="ga", real_quota=10.0, real_usage=11.0, real_requested=11.0),
         GroupObs(name="gb", real_quota=10.0, real_usage=9.0, real_requested=9.0)]
    q = A.analyse(A.frames_from_records([record(0, [obs("a", "ga", 11.0, idle=0),
                                                    obs("b", "gb", 9.0, idle=0)], g,
                                                weight=20.0)])
                  ).tables["group_quota_by_pass"].set_index("group")
    assert q.loc["ga", "over_quota"] and q.loc["ga", "surplus"] == 1.0
