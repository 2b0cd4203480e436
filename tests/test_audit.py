"""The fairness audit (`negotiator-ext audit`): the analysis on small hand-built frames with
exact numbers (core.audit), and whole reports from real ledgers: the recorded fixtures
replayed through the shadow loop, and a synthetic pool where one group borrows while
another is starved. The reports are opened in headless Chromium (Debian's `chromium`):
every plot must load and every table must be filled."""

from __future__ import annotations

import dataclasses
import html.parser
import json
import math
import shutil
import subprocess
from pathlib import Path

import pandas as pd
import pytest

from negotiator_ext import cli
from negotiator_ext.adapters.audit_data import read_frames
from negotiator_ext.adapters.ledger import open_ledger
from negotiator_ext.audit_cli import add_audit_parser, cmd_audit, parse_when
from negotiator_ext.core import audit as A
from negotiator_ext.core.records import (Adjustment, Comparison, GroupObs, MatchEntry,
                                         PassRecord, SubmitterObs)
from negotiator_ext.errors import InputError

T0 = 1_767_225_600                      # 2026-01-01T00:00:00Z
CHROMIUM = shutil.which("chromium")


# ---------------------------------------------------------------- helpers

def run_audit(argv: list[str], capsys=None) -> int:
    """`negotiator-ext audit ARGS` as the CLI runs it: through cli.main once the command
    is wired there, else through a parser of its own with the same error handling."""
    if "audit" in getattr(cli, "_COMMANDS", {}):
        return cli.main(["audit", *argv])
    parser = cli._Parser(prog="negotiator-ext", allow_abbrev=False)
    sub = parser.add_subparsers(dest="command", parser_class=cli._Parser)
    add_audit_parser(sub)
    try:
        return cmd_audit(parser.parse_args(["audit", *argv]))
    except InputError as exc:
        import sys
        print(f"negotiator-ext: error: {exc.one_line()}", file=sys.stderr)
        return 2


@pytest.fixture
def conf(tmp_path) -> Path:
    """An empty HTCondor config: no knobs from this host."""
    p = tmp_path / "empty.conf"
    p.write_text("")
    return p


def sub(name, group, *, usage=0.0, idle=0, running=None, eup=None, is_group=False,
        factor=1000.0, predicted=None) -> SubmitterObs:
    """A submitter's record; its submitter ads count `running` jobs (default: as many as
    its usage in one-slot jobs, the ads as new as the accountant's figures)."""
    if running is None:
        running = 0 if is_group else math.ceil(usage)
    return SubmitterObs(name=name, group=group, is_group=is_group, factor=factor,
                        policy_factor=factor, real_rup=None if eup is None else eup / factor,
                        real_eup=eup, real_usage=usage, idle_jobs=idle, running_jobs=running,
                        predicted_rup=predicted)


def grp(name, quota, usage=0.0, requested=0.0) -> GroupObs:
    return GroupObs(name=name, real_quota=quota, config_quota=quota, real_usage=usage,
                    real_requested=requested)


def rec(i: int, subs=(), groups=(), *, status="complete", pool="synth", weight=100.0,
        matches=(), real=(), comparison=None, reason=None) -> PassRecord:
    t = T0 + 60 * i
    return PassRecord(uuid=f"{i:04d}" + "0" * 28, pool=pool, started_at=float(t),
                      finished_at=float(t + 2), snapshot_time=t, status=status, reason=reason,
                      real_cycle_time=t - 10, real_accountant_time=t - 10,
                      shadow_duration=0.1, capture_duration=0.2, pool_weight=weight,
                      submitters=tuple(subs), groups=tuple(groups),
                      shadow_matches=tuple(matches), real_matches=tuple(real),
                      comparison=comparison)


ALICE, ADAM, BOB = ("group_a.alice@example.org", "group_a.adam@example.org",
                    "group_b.bob@example.org")


def synthetic_passes() -> list[PassRecord]:
    """12 complete passes a minute apart on a 100-slot pool with groups group_a (quota 60:
    alice and adam, EUPs 500 and 1000) and group_b (40: bob). In passes 3-8 group_a uses
    80 (alice 55, adam 25) while group_b, asking for 50, gets 20: group_a borrows, group_b
    and bob are starved, and alice preempts bob once a pass. Then one partial and one
    failed pass. Every pass compares the one before; pass 5's comparison diverges."""
    out = []
    for i in range(12):
        borrow = 3 <= i <= 8
        a, d, b = (55.0, 25.0, 20.0) if borrow else (40.0, 20.0, 40.0)
        b_idle = 30 if borrow else 10
        subs = [sub(ALICE, "group_a", usage=a, idle=5, eup=500.0, predicted=0.5),
                sub(ADAM, "group_a", usage=d, idle=5, eup=1000.0, predicted=1.0),
                sub(BOB, "group_b", usage=b, idle=b_idle, eup=500.0, predicted=0.5),
                sub("group_a", "group_a", usage=a + d, eup=500.0, is_group=True),
                sub("group_b", "group_b", usage=b, eup=500.0, is_group=True),
                sub("<none>", "<none>", eup=500.0, is_group=True)]
        groups = [grp("<none>", 0.0), grp("group_a", 60.0, a + d, a + d + 10),
                  grp("group_b", 40.0, b, b + b_idle)]
        matches = [MatchEntry(job=f"{i}.0", submitter=ALICE, slot=f"slot1@n{i}", group="group_a",
                              wait=60.0 * (i + 1), preempting=BOB if borrow else None),
                   MatchEntry(job=f"{i}.1", submitter=BOB, slot=f"slot2@n{i}", group="group_b",
                              wait=600.0 + 60 * i)]
        real = [MatchEntry(job=f"{i}.0", submitter=ALICE, slot=f"slot1@n{i}", time=T0 + 60 * i,
                           preempting=BOB if borrow else None)]
        comp = None
        if i:
            worst = i == 5
            comp = Comparison(
                shadow_pass=f"{i - 1:04d}" + "0" * 28, real_cycle_time=T0 + 60 * i - 10,
                real_cycles_between=1, real_matches=2, shadow_matches=2,
                agreed=1 if worst else 2, real_in_shadow=0.5 if worst else 1.0,
                shadow_in_real=0.5 if worst else 1.0, count_agreement=0.5 if worst else 1.0,
                source="matchlog", agreed_equivalent=1 if worst else 2,
                equivalent_agreement=0.5 if worst else 1.0,
                per_submitter={ALICE: {"real": 2 if worst else 1, "shadow": 1},
                               BOB: {"real": 0 if worst else 1, "shadow": 1}},
                per_group={"group_a": {"real_matches": 2 if worst else 1, "shadow_matches": 1,
                                       "real_quota": 60.0, "shadow_quota": 60.0}})
        out.append(rec(i, subs, groups, matches=matches, real=real, comparison=comp))
    out.append(rec(12, status="partial", reason="schedd s1 timed out"))
    out.append(rec(13, status="failed", reason="collector unreachable"))
    return out


ADJUSTMENTS = [
    Adjustment(key="factor:" + ALICE, kind="factor", name=ALICE, value=1500.0,
               applied_at=T0 + 400, lease_expires=T0 + 400 + 86400,
               command=f"condor_userprio -setfactor {ALICE} 1500 -duration 86400",
               method="condor_userprio", outcome="applied"),
    Adjustment(key="floor:" + BOB, kind="floor", name=BOB, value=40.0, applied_at=T0 + 420,
               lease_expires=T0 + 420 + 86400, command=f"condor_userprio -setfloor {BOB} 40",
               method="condor_userprio", outcome="failed: permission denied"),
    Adjustment(key="factor:old", kind="factor", name="old@x", value=2.0, applied_at=T0 - 86400,
               lease_expires=None, command="condor_userprio -setfactor old@x 2",
               method="condor_userprio", outcome="applied"),
]


def write_ledger(path: Path, records, adjustments=()) -> str:
    with open_ledger(str(path)) as ledger:
        for r in records:
            assert ledger.record_pass(r)
        for a in adjustments:
            ledger.record_adjustment(a)
    return str(path)


class _Page(html.parser.HTMLParser):
    """What the checks read from a page: tag balance, images, table rows, ids, links."""
    VOID = {"meta", "img", "br", "link", "input", "hr", "col", "source", "wbr"}

    def __init__(self):
        super().__init__()
        self.stack, self.errors, self.imgs, self.ids, self.hrefs = [], [], [], set(), []
        self.rows = 0          # <tr> inside <tbody>
        self.tables = 0
        self.text: list[str] = []
        self.scripts = 0

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if "id" in a:
            self.ids.add(a["id"])
        if tag == "img":
            self.imgs.append(a)
        if tag == "a" and "href" in a:
            self.hrefs.append(a["href"])
        if tag == "script":
            self.scripts += 1
        if tag == "table":
            self.tables += 1
        if tag == "tr" and "tbody" in self.stack:
            self.rows += 1
        if tag not in self.VOID:
            self.stack.append(tag)

    def handle_endtag(self, tag):
        if tag in self.VOID:
            return
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"</{tag}> closes <{self.stack[-1] if self.stack else None}>")
            return
        self.stack.pop()

    def handle_data(self, data):
        self.text.append(data)


def parse_page(text: str) -> _Page:
    p = _Page()
    p.feed(text)
    p.close()
    return p


def check_report_files(out: Path) -> _Page:
    """index.html is balanced, script-free HTML whose every <img> is a PNG beside it that
    decodes, whose internal links land on ids, and whose tables have rows; every table
    exists as CSV and JSON."""
    from PIL import Image
    text = (out / "index.html").read_text()
    assert text.startswith("<!DOCTYPE html>")
    page = parse_page(text)
    assert page.errors == [] and page.stack == []
    assert page.scripts == 0
    for img in page.imgs:
        src = out / img["src"]
        assert src.suffix == ".png" and src.is_file(), img["src"]
        with Image.open(src) as im:
            im.load()
            assert im.format == "PNG"
            assert (im.width, im.height) == (int(img["width"]), int(img["height"]))
    for href in page.hrefs:
        if href.startswith("#"):
            assert href[1:] in page.ids, href
        else:
            assert (out / href).is_file(), href
    report = json.loads((out / "report.json").read_text())
    for t in report["tables"]:
        assert (out / t).is_file()
    assert sorted(report["plots"]) == sorted(i["src"] for i in page.imgs)
    return page


def chromium(*runs: list[str], tmp: Path) -> list[str]:
    """Headless Chromium once per argument list, all at once (own profiles); their
    stdout."""
    procs = []
    for k, args in enumerate(runs):
        procs.append(subprocess.Popen(
            [CHROMIUM, "--headless=new", "--no-sandbox", "--disable-gpu",
             f"--user-data-dir={tmp / f'chromium-profile-{k}'}", "--virtual-time-budget=5000",
             *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    outs = []
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err[-2000:]
        outs.append(out)
    return outs


def check_in_chromium(out: Path, tmp: Path) -> _Page:
    """The report as Chromium renders it: tables filled (rows in the DOM) and, through a
    harness page outside the report (nothing is injected into it), every image decoded
    with its natural size."""
    srcs = [i["src"] for i in parse_page((out / "index.html").read_text()).imgs]
    harness = tmp / "harness.html"
    imgs = "".join(f'<img src="{(out / s).as_uri()}">' for s in srcs)
    harness.write_text(
        "<!DOCTYPE html><html><head><title>pending</title></head><body>" + imgs +
        "<pre id='out'></pre><script>window.addEventListener('load', () => {"
        "const r = [...document.images].map(i => i.complete + ':' + i.naturalWidth + 'x' + "
        "i.naturalHeight); document.getElementById('out').textContent = r.join(' ');"
        "document.title = 'done'; });</script></body></html>")
    page, got = chromium(["--dump-dom", (out / "index.html").as_uri()],
                         ["--allow-file-access-from-files", "--dump-dom", harness.as_uri()],
                         tmp=tmp)
    dom = parse_page(page)
    assert dom.errors == [] and dom.rows > 0 and dom.tables > 0
    assert [i["src"] for i in dom.imgs] == srcs
    assert "<title>done</title>" in got
    sizes = got.split("<pre id=\"out\">")[1].split("</pre>")[0].split()
    assert len(sizes) == len(srcs)
    for s, src in zip(sizes, srcs):
        complete, wh = s.split(":")
        w, h = (int(v) for v in wh.split("x"))
        assert complete == "true" and w > 0 and h > 0, (src, s)
    return dom


def table(out: Path, name: str) -> list[dict]:
    """A table of the report as records: its JSON, or a per-pass table's Parquet (NaN as
    None, as the JSON has it)."""
    path = out / "tables" / f"{name}.json"
    if path.is_file():
        return json.loads(path.read_text())
    from negotiator_ext.views.audit_files import read_table
    d = read_table(out / "tables" / f"{name}.parquet")
    return [{k: (None if isinstance(v, float) and v != v else v) for k, v in r.items()}
            for r in d.to_dict("records")]


# ---------------------------------------------------------------- the arithmetic

def test_water_fill_gives_what_one_cannot_use_to_the_others():
    assert A.water_fill(10, [1, 1, 1], [2, 10, 10]) == pytest.approx([2, 4, 4])
    # weights 2:1 offer 6 and 3; the second is capped at 1, the first gets the other 8
    assert A.water_fill(9, [2, 1], [10, 1]) == pytest.approx([8, 1])
    # more than everyone asks for: everyone capped, the rest unallocated
    assert A.water_fill(100, [1, 3], [5, 7]) == pytest.approx([5, 7])
    # no weight or no cap: nothing
    assert A.water_fill(10, [0, 1], [5, 0]) == [0.0, 0.0]
    # nobody capped: a plain proportional split
    assert A.water_fill(12, [1, 2, 3], [100, 100, 100]) == pytest.approx([2, 4, 6])


def test_jain_index():
    assert A.jain_index([1, 1, 1, 1]) == pytest.approx(1.0)
    assert A.jain_index([1, 0, 0, 0]) == pytest.approx(0.25)
    assert A.jain_index([1, 2]) == pytest.approx(9 / 10)
    assert math.isnan(A.jain_index([]))
    assert math.isnan(A.jain_index([0.0, 0.0]))
    assert A.jain_index([2.0, float("nan"), 2.0]) == pytest.approx(1.0)


def test_shares_split_by_inverse_eup_and_water_fill_within_the_pool():
    """No groups: the pool (12) is the root's entitlement. EUPs 1, 2, 4 -> deserved 4/7,
    2/7, 1/7 of 12; u1 asks 2 and u3 (running 1, nothing idle) 1, so u2 gets the
    remaining 9."""
    p = rec(0, [sub("u1", "<none>", idle=2, eup=1.0),
                sub("u2", "<none>", usage=6, idle=10, eup=2.0),
                sub("u3", "<none>", usage=1, eup=4.0), sub("idle", "<none>", eup=8.0),
                sub("<none>", "<none>", usage=7, eup=1.0, is_group=True)],
            [grp("<none>", 0.0, 7.0)], weight=12.0)
    a = A.analyse(A.frames_from_records([p]), pool="synth")
    s = a.tables["submitter_shares_by_pass"].set_index("name")
    assert list(s.index) == ["idle", "u1", "u2", "u3"]       # group records are not submitters
    assert s.loc["u1", "deserved"] == pytest.approx(12 * 4 / 7)
    assert s.loc["u2", "deserved"] == pytest.approx(12 * 2 / 7)
    assert s.loc["u3", "deserved"] == pytest.approx(12 / 7)
    assert list(s["demand"]) == [0, 2, 16, 1]
    assert list(s["demand_capped"]) == pytest.approx([0, 2, 9, 1])
    assert list(s["gap"]) == pytest.approx([0, -2, -3, 0])
    assert not s.loc["idle", "active"] and s.loc["idle", "deserved"] == 0
    # starved: idle jobs and less than 90% of the demand-capped share
    assert list(s["starved"]) == [False, True, True, False]
    assert s.loc["u2", "shortfall"] == pytest.approx(3)
    # Jain's index of delivered / demand-capped: 0, 6/9, 1
    fair = a.tables["fairness_by_pass"].iloc[0]
    assert fair["jain"] == pytest.approx(25 / 39)
    assert fair["largest_gap_name"] == "u2" and fair["largest_gap"] == pytest.approx(-3)
    assert a.summary["hgq"] is False
    assert any("No accounting groups" in n for n in a.summary["notes"])


def test_group_entitlement_is_its_quota_and_the_root_keeps_what_groups_leave():
    """HGQ: group_a's quota 6 is split 2:1 by EUP; the root's own quota (pool 10 - 6 - 3 =
    1, as the real accountant reports it) is its users'. Without a root record, the pool
    minus the top-level quotas; a submitter whose EUP is unknown splits equally."""
    subs = [sub("a1", "group_a", idle=10, eup=1.0), sub("a2", "group_a", idle=10, eup=2.0),
            sub("r1", "<none>", idle=5, eup=3.0), sub("b1", "group_b", idle=1),
            sub("b2", "group_b", idle=1, running=2)]
    p = rec(0, subs, [grp("<none>", 1.0), grp("group_a", 6.0), grp("group_b", 3.0),
                      grp("group_a.sub", 2.0)], weight=10.0)
    s = A.analyse(A.frames_from_records([p])).tables["submitter_shares_by_pass"].set_index("name")
    assert list(s.loc[["a1", "a2"], "deserved"]) == pytest.approx([4, 2])
    assert s.loc["r1", "entitlement"] == 1.0 and s.loc["r1", "demand_capped"] == pytest.approx(1)
    # b1 has no EUP at all: equal split; b2's running jobs count when no usage is recorded
    assert s.loc["b1", "eup_source"] == "equal" and s.loc["b1", "deserved"] == pytest.approx(1.5)
    assert s.loc["b2", "demand"] == 3 and s.loc["b2", "demand_basis"] == "count"
    assert list(s.loc[["b1", "b2"], "demand_capped"]) == pytest.approx([1, 2])
    p2 = rec(1, subs, [grp("group_a", 6.0), grp("group_b", 3.0), grp("group_a.sub", 2.0)],
             weight=10.0)
    e = A.entitlements(A.pass_table(A.frames_from_records([p2]).passes),
                       A.frames_from_records([p2]).groups).set_index("group")
    assert e.loc["<none>", "entitlement"] == 1.0 and bool(e.loc["<none>", "hgq"])


def test_share_thresholds_caps_relative_gap_and_eup_sources():
    """Exact edges: starved below 90% of the demand-capped share (with idle jobs), over
    its share above 110%; a group's only active submitter gets at most its demand; the
    relative gap is over the demand-capped share; a submitter without a real EUP uses
    ours; one member of a group without any EUP makes the split equal for the group."""
    subs = [  # group_a (quota 40): four submitters with equal EUPs, 10 each
        sub("s95", "group_a", usage=9.5, idle=5, eup=1.0), sub("s85", "group_a", usage=8.5, idle=5, eup=1.0),
        sub("o105", "group_a", usage=10.5, idle=5, eup=1.0), sub("o115", "group_a", usage=11.5, idle=5, eup=1.0),
        # group_b (quota 10): its only submitter wants 3
        sub("lone", "group_b", usage=2.0, idle=1, running=2, eup=1.0),
        # group_c (quota 12): one knows only our EUP (2.0), the other the real one (1.0)
        SubmitterObs(name="ours", group="group_c", is_group=False, factor=1.0, idle_jobs=9,
                     real_eup=None, shadow_eup=2.0),
        sub("real", "group_c", idle=9, eup=1.0),
        # group_d (quota 6): one member without any EUP -> equal split for both
        sub("d1", "group_d", idle=9, eup=1.0), sub("d2", "group_d", idle=9)]
    groups = [grp("group_a", 40.0), grp("group_b", 10.0), grp("group_c", 12.0),
              grp("group_d", 6.0)]
    # no noise floor: the 10% edges alone decide (s95 and o105 are 0.5 off their share)
    s = A.analyse(A.frames_from_records([rec(0, subs, groups, weight=68.0)]), noise_floor=0.0
                  ).tables["submitter_shares_by_pass"].set_index("name")
    assert [bool(s.loc[n, "starved"]) for n in ("s95", "s85")] == [False, True]
    assert [bool(s.loc[n, "over_share"]) for n in ("o105", "o115")] == [False, True]
    assert s.loc["s85", "rel_gap"] == pytest.approx(-0.15)
    assert s.loc["lone", "demand_capped"] == pytest.approx(3.0)      # not its quota of 10
    assert s.loc["lone", "gap"] == pytest.approx(-1.0)
    assert s.loc["lone", "rel_gap"] == pytest.approx(-1 / 3)         # of 3, not of 10
    assert s.loc["ours", "eup_source"] == "shadow"
    assert list(s.loc[["real", "ours"], "deserved"]) == pytest.approx([8.0, 4.0])
    assert list(s.loc[["d1", "d2"], "eup_source"]) == ["equal", "equal"]
    assert list(s.loc[["d1", "d2"], "deserved"]) == pytest.approx([3.0, 3.0])


def test_pass_intervals_count_complete_passes_only():
    recs = [rec(0), rec(1), rec(2, status="partial"), rec(3), rec(5, status="failed")]
    pt = A.pass_table(A.frames_from_records(recs).passes)
    assert list(pt["index"]) == [0, 1, 2]
    # 60 s, then 120 s to the next complete pass; the last: the median (90 s)
    assert list(pt["interval"]) == [60.0, 120.0, 90.0]
    a = A.analyse(A.frames_from_records(recs))
    assert a.summary["passes"] == {"total": 5, "analysed": 3, "partial": 1, "failed": 1,
                                   "other": 0}
    assert "2 pass(es) not complete (1 partial, 1 failed)" in a.summary["notes"][0]


def test_an_outage_is_not_counted_as_time_in_the_state_before_it():
    # passes a minute apart, then none for an hour: the pass before the outage lasts at
    # most three median intervals
    recs = [rec(0), rec(1), rec(2), rec(62), rec(63)]
    pt = A.pass_table(A.frames_from_records(recs).passes)
    assert list(pt["interval"]) == [60.0, 60.0, 180.0, 60.0, 60.0]


def test_spells_streaks_and_starved_borrowing_pairs():
    rows = []
    for i in range(6):
        rows.append({"index": i, "time": 60.0 * i, "interval": 60.0, "group": "gb",
                     "starved": i != 2, "over_quota": False, "shortfall": 10.0 + i,
                     "surplus": 0.0})
        rows.append({"index": i, "time": 60.0 * i, "interval": 60.0, "group": "ga",
                     "starved": False, "over_quota": i in (1, 3, 4), "shortfall": 0.0,
                     "surplus": 5.0})
        rows.append({"index": i, "time": 60.0 * i, "interval": 60.0, "group": "gc",
                     "starved": False, "over_quota": i == 2, "shortfall": 0.0, "surplus": 1.0})
    df = pd.DataFrame(rows)
    sp = A.spells(df, "group", "starved", "shortfall").set_index("name")
    assert list(sp.index) == ["gb"]
    assert sp.loc["gb", "passes"] == 5 and sp.loc["gb", "duration"] == 300.0
    assert (sp.loc["gb", "longest_passes"], sp.loc["gb", "longest_duration"]) == (3, 180.0)
    assert sp.loc["gb", "mean_amount"] == pytest.approx((10 + 11 + 13 + 14 + 15) / 5)
    assert sp.loc["gb", "max_amount"] == 15.0
    pr = A.pairs(df, "group", "starved", "over_quota")
    assert pr[["starved", "borrowing"]].values.tolist() == [["gb", "ga"]]   # gc borrowed alone
    r = pr.iloc[0]
    assert (r["passes"], r["duration"], r["longest_passes"], r["longest_duration"]) == (
        3, 180.0, 2, 120.0)
    assert (r["first"], r["last"]) == (60.0, 240.0)
    assert r["mean_shortfall"] == pytest.approx((11 + 13 + 14) / 3) and r["mean_surplus"] == 5.0


def test_wait_percentiles_and_preemptions():
    m = [MatchEntry(job=f"{k}.0", submitter="u1", slot=f"s{k}", wait=w, group="g1")
         for k, w in enumerate([10.0, 20.0, 30.0, 40.0, 100.0])]
    m += [MatchEntry(job="9.0", submitter="u2", slot="s9", wait=None, preempting="u1"),
          MatchEntry(job="9.1", submitter="u2", slot="s8", wait=5.0, preempting="u1")]
    p = rec(0, [sub("u1", "g1", usage=1, eup=1.0), sub("u2", "g2", usage=1, eup=1.0)],
            [grp("g1", 5.0), grp("g2", 5.0)], matches=m,
            real=[MatchEntry(job="9.0", submitter="u2", slot="s9", preempting="u1")])
    a = A.analyse(A.frames_from_records([p]))
    w = a.tables["wait_by_submitter"].set_index("name")
    assert (w.loc["u1", "matches"], w.loc["u1", "p50"], w.loc["u1", "p90"], w.loc["u1", "max"]) == (
        5, 30.0, pytest.approx(76.0), 100.0)       # linear: 40 + 0.6 x 60
    assert w.loc["u2", "matches"] == 1            # a match without a known wait is left out
    g = a.tables["wait_by_group"].set_index("name")
    assert g.loc["g2", "p50"] == 5.0              # the group from the submitter's record
    pre = a.tables["preemptions"]
    assert pre[["source", "preemptor", "preempted", "count"]].values.tolist() == [
        ["real", "u2", "u1", 1], ["shadow", "u2", "u1", 2]]
    assert a.summary["preemptions"] == {"real": 1, "shadow": 2}


def test_parse_when():
    assert parse_when("2026-01-01", "--since") == T0
    assert parse_when("2026-01-01T01:00", "--since") == T0 + 3600
    assert parse_when("2026-01-01T01:00:00Z", "--since") == T0 + 3600
    assert parse_when("2026-01-01T03:00+02:00", "--since") == T0 + 3600
    assert parse_when(str(T0), "--until") == T0 and parse_when("1.5e9", "--until") == 1.5e9
    assert parse_when(None, "--since") is None
    for bad in ("yesterday", "2026-13-01", "", "nan"):
        with pytest.raises(InputError) as e:
            parse_when(bad, "--until")
        assert e.value.source == "--until"


# ---------------------------------------------------------------- whole reports

def test_synthetic_ledger_report_borrowing_while_starved(tmp_path, conf, capsys):
    url = write_ledger(tmp_path / "l.sqlite", synthetic_passes(), ADJUSTMENTS)
    out = tmp_path / "report"
    assert run_audit(["--ledger", url, "--since", "2026-01-01", "--until", str(T0 + 3600),
                      "-o", str(out), "--config", str(conf)]) == 0
    assert capsys.readouterr().out.strip() == str(out / "index.html")
    rep = json.loads((out / "report.json").read_text())["summary"]
    assert rep["pool"] == "synth"
    assert rep["passes"] == {"total": 14, "analysed": 12, "partial": 1, "failed": 1, "other": 0}
    assert rep["borrowing_from"] == {"group_a": ["group_b"]}
    assert rep["starved_groups"] == ["group_b"] and rep["starved_submitters"] == [BOB]
    assert rep["preemptions"] == {"real": 6, "shadow": 6}
    assert rep["adjustments"] == {"applied": 1, "failed": 1}     # the older one is outside
    assert rep["comparisons"]["lowest"][0]["pass"].startswith("0005")
    # group_b starved for the 6 borrowing passes (a minute each), short of 40 by 20
    pairs = table(out, "starved_borrowing_pairs")
    assert [(p["starved"], p["borrowing"], p["passes"], p["duration"], p["longest_passes"],
             p["mean_shortfall"], p["mean_surplus"]) for p in pairs] == [
        ("group_b", "group_a", 6, 360.0, 6, 20.0, 20.0)]
    summary = {(r["kind"], r["name"], r["status"]): r for r in table(out, "summary")}
    # group_a's submitters share the 80 it got (alice 2:1 adam by EUP: 53.3 and 26.7), so
    # neither is over its share; the group borrows, and group_b and bob are starved
    assert set(summary) == {("group", "group_b", "starved"), ("group", "group_a", "borrowing"),
                            ("submitter", BOB, "starved")}
    b = summary[("submitter", BOB, "starved")]
    assert (b["passes"], b["duration"], b["mean_amount"], b["relative"]) == (6, 360.0, 20.0, 0.5)
    # severity: 20 slots short for 6 minutes = 7,200 slot-weight seconds, as group_b's
    assert b["severity"] == pytest.approx(7200.0)
    assert summary[("group", "group_b", "starved")]["severity"] == pytest.approx(7200.0)
    assert summary[("group", "group_a", "borrowing")]["with"] == "group_b (6 passes)"
    assert sorted(r["rank"] for r in summary.values()) == [1, 2, 3]
    shares = {r["name"]: r for r in table(out, "submitter_shares")}
    # time-weighted over 12 equal passes: alice deserves 2/3 of group_a's 60, and of its
    # 80 in the 6 passes it borrows; it gets 55 in those
    assert shares[ALICE]["deserved"] == pytest.approx((6 * 40 + 6 * 160 / 3) / 12)
    assert shares[ALICE]["delivered"] == pytest.approx((6 * 40 + 6 * 55) / 12)
    assert shares[BOB]["gap"] == pytest.approx(-10.0)
    fair = table(out, "fairness_by_pass")
    assert [f["jain"] for f in fair[:3]] == pytest.approx([1.0] * 3)
    x = [55 / (160 / 3), 25 / (80 / 3), 20 / 40]
    assert fair[3]["jain"] == pytest.approx(sum(x) ** 2 / (3 * sum(v * v for v in x)))
    page = check_report_files(out)
    assert {i["src"] for i in page.imgs} == {"shares.png", "groups.png", "waits.png",
                                             "priorities.png", "preemptions.png",
                                             "fairness.png", "agreement.png"}
    text = " ".join(" ".join(page.text).split())
    assert "2 pass(es) not complete (1 partial, 1 failed) were left out" in text
    # the summary comes first, and links to the most divergent pass's details
    assert text.index("Who is over quota, borrowing, or starved") < text.index("Queue wait")
    assert "#pass-000500000000" in page.hrefs and "pass-000500000000" in page.ids
    if CHROMIUM is None:
        pytest.skip("chromium is not installed (Debian package `chromium`): the browser check "
                    "did not run")
    dom = check_in_chromium(out, tmp_path)
    assert len(dom.imgs) == 7
    dom_text = " ".join(" ".join(dom.text).split())
    assert "group_b" in dom_text and "borrowing" in dom_text and "permission denied" in dom_text


def test_fixtures_replayed_through_the_shadow_loop_audit(tmp_path, mocker, conf):
    """Recorded fixtures, each replayed through the shadow loop (two passes: before and
    after its real cycle), in one ledger as one pool each."""
    from test_shadow import replay
    url = str(tmp_path / "all.sqlite")
    scenarios = ("hgq_nested_hep_lep_surplus", "preempt_priority", "pie_three_submitters")
    with open_ledger(url) as dst:
        for sc in scenarios:
            d = tmp_path / sc
            d.mkdir()
            _, _, _, first, second = replay(d, mocker, sc)
            for r in (first, second):
                assert dst.record_pass(dataclasses.replace(r, pool=sc))
        audits = {sc: A.analyse(read_frames(dst, pool=sc), pool=sc) for sc in scenarios}
    for sc, a in audits.items():
        assert a.summary["passes"]["analysed"] == 2, sc
        # our cycle agreed with every real one
        assert a.summary["comparisons"]["mean_equivalent_agreement"] == 1.0, sc
        assert a.tables["divergent_passes"].empty
    # the nested HGQ example: lep negotiates after hep and is left short while hep uses
    # 19 of its 15 (README of the fixture)
    hgq = audits["hgq_nested_hep_lep_surplus"]
    assert hgq.summary["borrowing_from"] == {"group_physics.hep": ["group_physics.lep"]}
    last = hgq.tables["group_quota_by_pass"].groupby("group").last()
    hep = last.loc["group_physics.hep"]
    assert (hep["quota"], hep["usage"], hep["requested"]) == (15, 19, 30)
    # higgs, hep's only submitter: its ads still count 30 idle and none running, the
    # accountant already charges the 19 matched; each job counted once, its demand is
    # hep's Requested (it was 49)
    higgs = hgq.tables["submitter_shares_by_pass"].groupby("name").last().loc[
        "group_physics.hep.higgs@refcondor.local"]
    assert (higgs["delivered"], higgs["idle_jobs"], higgs["demand"]) == (19, 30, 30)
    # preemption by priority: alice (EUP 500) preempts bob (EUP 50000) on all 10 slots
    pre = audits["preempt_priority"].tables["preemptions"]
    assert pre[["source", "preemptor", "preempted", "count"]].values.tolist() == [
        ["real", "alice@refcondor.local", "bob@refcondor.local", 10],
        ["shadow", "alice@refcondor.local", "bob@refcondor.local", 20]]
    # without groups every submitter shares the whole pool
    pie = audits["pie_three_submitters"].tables["submitter_shares_by_pass"]
    assert set(pie["entitlement"]) == {20.0}
    assert pie.groupby("index")["demand_capped"].sum().tolist() == pytest.approx([20.0, 20.0])
    # one report through the command, opened in the browser
    out = tmp_path / "report"
    assert run_audit(["--ledger", url, "--pool", "hgq_nested_hep_lep_surplus", "-o", str(out),
                      "--config", str(conf)]) == 0
    page = check_report_files(out)
    assert len(page.imgs) >= 5
    text = " ".join(" ".join(page.text).split())
    assert "group_physics.lep" in text and "borrowing" in text
    if CHROMIUM is None:
        pytest.skip("chromium is not installed (Debian package `chromium`): the browser check "
                    "did not run")
    check_in_chromium(out, tmp_path)


def test_a_period_without_passes_gives_a_report_that_says_so(tmp_path, conf):
    url = write_ledger(tmp_path / "l.sqlite", synthetic_passes())
    out = tmp_path / "empty"
    assert run_audit(["--ledger", url, "--since", "2027-01-01", "-o", str(out),
                      "--config", str(conf)]) == 0
    page = check_report_files(out)
    assert page.imgs == [] and not list(out.glob("*.png"))
    text = " ".join(" ".join(page.text).split())
    assert "No pass of pool synth was recorded in this period: nothing to analyse." in text
    assert json.loads((out / "report.json").read_text())["summary"]["passes"]["total"] == 0
    # only incomplete passes: said as plainly
    out2 = tmp_path / "incomplete"
    assert run_audit(["--ledger", url, "--since", str(T0 + 12 * 60), "-o", str(out2),
                      "--config", str(conf)]) == 0
    text = " ".join(" ".join(parse_page((out2 / "index.html").read_text()).text).split())
    assert ("None of the 2 pass(es) recorded in this period is complete (1 partial, 1 failed): "
            "nothing to analyse.") in text
    # a pool the ledger does not have
    out4 = tmp_path / "nope"
    assert run_audit(["--ledger", url, "--pool", "nope", "-o", str(out4),
                      "--config", str(conf)]) == 0
    text = " ".join(" ".join(parse_page((out4 / "index.html").read_text()).text).split())
    assert "No pass of pool nope was recorded" in text
    assert "The ledger has no pass of pool nope; its pools: synth." in text
    # a ledger with no pass at all
    empty_url = write_ledger(tmp_path / "none.sqlite", [])
    out3 = tmp_path / "none"
    assert run_audit(["--ledger", empty_url, "-o", str(out3), "--config", str(conf)]) == 0
    assert "nothing to analyse" in (out3 / "index.html").read_text()


def test_the_heap_is_trimmed_while_the_audit_runs_and_not_after(tmp_path, conf, monkeypatch):
    """On glibc a thread gives the heap's freed pages back while the audit runs
    (audit_cli._ReturnedMemory); it is gone when the command returns, refused or not."""
    import sys
    import threading

    def trimmers() -> list[threading.Thread]:
        return [t for t in threading.enumerate() if t.name == "audit-malloc-trim"]

    seen = []
    analyse = A.analyse

    def watched(*a, **k):
        seen.append([t.is_alive() for t in trimmers()])
        return analyse(*a, **k)
    monkeypatch.setattr(A, "analyse", watched)
    url = write_ledger(tmp_path / "l.sqlite", synthetic_passes())
    base = ["--ledger", url, "--config", str(conf)]
    assert run_audit([*base, "-o", str(tmp_path / "r")]) == 0
    if sys.platform.startswith("linux"):
        assert seen == [[True]]
    assert trimmers() == []
    assert run_audit([*base, "--since", "last tuesday", "-o", str(tmp_path / "r2")]) == 2
    assert trimmers() == []


def test_bad_input_is_refused_by_name(tmp_path, conf, capsys):
    url = write_ledger(tmp_path / "l.sqlite", synthetic_passes())
    base = ["--ledger", url, "--config", str(conf)]
    assert run_audit([*base, "--since", "last tuesday", "-o", str(tmp_path / "r")]) == 2
    assert "--since" in capsys.readouterr().err
    assert run_audit([*base, "--since", "2026-01-02", "--until", "2026-01-01",
                      "-o", str(tmp_path / "r")]) == 2
    assert "--until" in capsys.readouterr().err
    assert not (tmp_path / "r").exists()
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("mine")
    assert run_audit([*base, "-o", str(foreign)]) == 2
    assert "no earlier audit" in capsys.readouterr().err
    assert [p.name for p in foreign.iterdir()] == ["notes.txt"]
    # an earlier audit is replaced: its plots and tables do not linger, other files stay
    out = tmp_path / "again"
    (out / "tables").mkdir(parents=True)
    for name in ("report.json", "preemptions.png", "tables/old.csv", "keep.txt"):
        (out / name).write_text("{}")
    assert run_audit([*base, "--until", str(T0 + 120), "-o", str(out)]) == 0
    assert not (out / "preemptions.png").exists() and not (out / "tables" / "old.csv").exists()
    assert (out / "keep.txt").is_file() and (out / "shares.png").is_file()
    assert json.loads((out / "report.json").read_text())["summary"]["passes"]["total"] == 2
    missing = tmp_path / "missing.sqlite"
    assert run_audit(["--ledger", str(missing), "--config", str(conf),
                      "-o", str(tmp_path / "x")]) == 2
    assert "no ledger here" in capsys.readouterr().err
    # several pools: name one
    write_ledger(tmp_path / "l.sqlite", [dataclasses.replace(rec(20), pool="other")])
    assert run_audit([*base, "-o", str(tmp_path / "y")]) == 2
    assert "--pool" in capsys.readouterr().err


def test_an_unknown_entitlement_flags_nobody_and_says_why():
    """A ledger from before schema 6 has no pool size: without groups, nobody's share is
    known, so nobody is called starved or over their share, and the report says why."""
    recs = [dataclasses.replace(r, pool_weight=None, groups=()) for r in synthetic_passes()]
    a = A.analyse(A.frames_from_records(recs))
    assert a.tables["summary"].empty
    assert a.summary["jain"]["mean"] is None
    assert any("12 pass(es) have no pool size recorded" in n for n in a.summary["notes"])
    assert any("36 (pass, submitter) observation(s)" in n for n in a.summary["notes"])


def test_real_cycles_out_of_time_are_a_finding():
    """A compared real cycle that ran out of time (its negotiator ad's ...OutOfTime
    lists, recorded in the comparison) is a finding: how many, the groups ours served and
    it did not, and whether the compared pass had predicted it."""
    records = synthetic_passes()
    late = {"real": {"schedds": ["schedd1"], "submitters": []},
            "predicted": {"schedds": ["schedd1"], "submitters": []},
            "predicted_agrees": "yes", "groups_not_served": ["group_b"]}
    for i in (4, 7):
        records[i] = dataclasses.replace(
            records[i], comparison=dataclasses.replace(records[i].comparison, time_limits=late))
    records[7] = dataclasses.replace(records[7], comparison=dataclasses.replace(
        records[7].comparison, time_limits=dict(late, predicted=None, predicted_agrees=None)))
    audit = A.analyse(A.frames_from_records(records), pool="synth")
    t = audit.tables["out_of_time"]
    assert list(t["n_groups_not_served"]) == [1, 1] and list(t["schedds"]) == ["schedd1"] * 2
    assert list(t["predicted"]) == ["yes", "no prediction"]
    assert audit.summary["out_of_time"] == {"cycles": 2, "compared": 11,
                                            "groups_not_served_newest": 1}
    (note,) = [n for n in audit.summary["notes"] if "ran out of time" in n]
    assert "in 2 of 11 compared cycle(s); in the newest, 1 group(s) our cycle served got " \
           "no match from it (group_b). Predicted beforehand: 1 exactly" in note
    # none out of time: no finding
    quiet = A.analyse(A.frames_from_records(synthetic_passes()), pool="synth")
    assert quiet.summary["out_of_time"]["cycles"] == 0
    assert not any("ran out of time" in n for n in quiet.summary["notes"])


def test_agreement_section_gives_the_unexplained_agreement_beside_the_raw_one():
    """Issue 32: a comparison whose disagreement a change of the pool explains counts as
    agreeing in the unexplained figure, not in the raw one; the section says why."""
    def comp(i, raw, unexplained, disagreements):
        return Comparison(shadow_pass=f"{i - 1:04d}" + "0" * 28, real_cycle_time=T0 + 60 * i - 5,
                          real_cycles_between=1, real_matches=4, shadow_matches=4, agreed=2,
                          real_in_shadow=0.5, shadow_in_real=0.5, count_agreement=raw,
                          source="matchlog", unexplained_agreement=unexplained,
                          disagreements=disagreements, aligned=i == 2,
                          changes=("job 9.0 of a@x was not idle in our snapshot",))
    changed = ({"submitter": "a@x", "real": 3, "shadow": 1, "class": "pool changed",
                "unexplained": 0, "changes": ["job 9.0 of a@x was not idle in our snapshot"]},)
    unexplained = ({"submitter": "b@x", "real": 1, "shadow": 3, "class": "unexplained",
                    "unexplained": 2, "changes": []},)
    passes = [rec(0), rec(1, comparison=comp(1, 0.5, 1.0, changed)),
              rec(2, comparison=comp(2, 0.5, 0.5, unexplained))]
    a = A.analyse(A.frames_from_records(passes), pool="synth")
    c = a.summary["comparisons"]
    assert c["mean_count_agreement"] == pytest.approx(0.5)
    assert c["mean_unexplained_agreement"] == pytest.approx(0.75)
    assert (c["with_unexplained"], c["aligned"]) == (1, 1)
    agree = a.tables["agreement_by_pass"]
    assert list(agree["why"]) == ["1 pool changed", "1 unexplained"]
