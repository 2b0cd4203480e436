"""A shadow loop's slot ads kept between passes (adapters/slot_cache.py), against a real
25.x collector: what it keeps equals what a whole query gives, an ad advertised again is
fetched again, a withdrawn one is gone, and a `shadow --interval` loop's later passes
fetch only the slots the collector heard from since."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import htcondor2
import pytest

from negotiator_ext.adapters.adfiles import ad_lines, read_ads
from negotiator_ext.adapters.slot_cache import SlotCache

pytestmark = pytest.mark.live

_DROP = ("lastheardfrom", "updatestotal", "updatessequenced", "updateslost",
         "updateshistory", "updatesinitial", "authenticatedidentity",
         "authenticationmethod", "myaddress", "addressv1", "startdipaddr", "name",
         "machine", "myaddress")


def _template(pool) -> list[str]:
    text = pool.tool("condor_status", "-long", "-constraint", 'SlotType == "Static"').stdout
    ad = text.strip().split("\n\n")[0]
    return [ln for ln in ad.splitlines()
            if ln.strip() and ln.split(" = ", 1)[0].lower() not in _DROP]


def _advertise(pool, tmp_path: Path, names: list[str], extra: str = "") -> None:
    lines = _template(pool)
    ads = []
    for n in names:
        ads.append("\n".join(lines + [f'Name = "slot1@{n}"', f'Machine = "{n}"',
                                      'MyAddress = "<127.0.0.1:9>"',
                                      'StartdIpAddr = "<127.0.0.1:9>"', "Start = false",
                                      "ClassAdLifetime = 600"] + ([extra] if extra else [])))
    f = tmp_path / "fake.ads"
    f.write_text("\n\n".join(ads) + "\n")
    pool.tool("condor_advertise", "-multiple", "-tcp", "-fake-private-ad",
              "UPDATE_STARTD_AD", str(f))


def _withdraw(pool, tmp_path: Path, constraint: str) -> None:
    q = tmp_path / "invalidate.ad"
    q.write_text(f'MyType = "Query"\nTargetType = "Machine"\nRequirements = {constraint}\n')
    pool.tool("condor_advertise", "INVALIDATE_STARTD_ADS", str(q))


def _fakes(ads) -> dict[str, list[str]]:
    return {a["Name"]: ln for a, ln in zip(ads, ad_lines(ads))
            if str(a.get("Machine", "")).startswith("fake-cache")}


@pytest.fixture
def fakes(clean_pool, tmp_path):
    names = [f"fake-cache-{i}.test" for i in range(20)]
    _advertise(clean_pool, tmp_path, names)
    clean_pool.wait_for(lambda: len(clean_pool.tool(
        "condor_status", "-af", "Name", "-constraint", 'regexp("^fake-cache", Machine)',
        check=False).stdout.split()) == 20, 30, "the fake slots")
    yield names
    _withdraw(clean_pool, tmp_path, 'regexp("^fake-cache", Machine)')


def _workers_of(pid: int, pids: set[int] | None = None) -> list[int]:
    """The worker processes (adapters/worker.py) whose parent is `pid`, or, of `pids`
    (those it had), those still alive whatever their parent now (an orphan's is 1; an
    orphan of another test's loop is not counted)."""
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmd = (entry / "cmdline").read_bytes()
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if b"negotiator_ext.adapters.worker" in cmd and (
                ppid == pid or int(entry.name) in (pids or ())):
            out.append(int(entry.name))
    return out


def test_kept_slots_equal_a_whole_query_of_a_real_collector(clean_pool, fakes, tmp_path):
    pool = clean_pool
    coll = htcondor2.Collector(pool.collector)

    def query(constraint, projection):
        kw = {}
        if constraint is not None:
            kw["constraint"] = constraint
        if projection is not None:
            kw["projection"] = list(projection)
        return list(coll.query(htcondor2.AdTypes.Startd, **kw))

    cache = SlotCache()
    first = cache.refresh(query, {}, "slots.ads")
    assert first.whole and len(_fakes(first.slots)) == 20
    assert len(cache) == len(first.slots)          # the real collector stamps every ad

    got = cache.refresh(query, {}, "slots.ads")
    whole = query(None, None)
    assert not got.whole
    assert got.kept >= 20                           # the fakes were not heard from again
    assert _fakes(got.slots) == _fakes(whole)
    assert [a["Name"] for a in got.slots] == [a["Name"] for a in whole]   # the same order
    # the real startd's own slots (UPDATE_INTERVAL = 2 here) are fetched as they change
    by_name = {a["Name"]: (a, ln) for a, ln in zip(whole, ad_lines(whole))}
    for ad, ln in zip(got.slots, got.lines):
        other, other_lines = by_name[ad["Name"]]
        if other["UpdatesTotal"] == ad["UpdatesTotal"]:
            assert ln == other_lines

    # one fake advertised again (a new value), one withdrawn
    time.sleep(1.1)
    _advertise(pool, tmp_path, [fakes[2]], extra="BenchValue = 42")
    _withdraw(pool, tmp_path, f'Machine == "{fakes[4]}"')
    pool.wait_for(lambda: pool.tool("condor_status", "-af", "Name", "-constraint",
                                    f'Machine == "{fakes[4]}"', check=False).stdout.strip()
                  == "", 30, "the withdrawn slot to go")
    pool.wait_for(lambda: pool.tool("condor_status", "-af", "BenchValue", "-constraint",
                                    f'Machine == "{fakes[2]}"', check=False).stdout.strip()
                  == "42", 30, "the slot advertised again")
    got = cache.refresh(query, {}, "slots.ads")
    kept = _fakes(got.slots)
    assert f"slot1@{fakes[4]}" not in kept
    assert "BenchValue = 42" in kept[f"slot1@{fakes[2]}"]
    assert kept == _fakes(query(None, None))
    assert not got.whole and got.fetched >= 1 and got.kept >= 18


def test_a_shadow_loop_fetches_only_what_changed(clean_pool, fakes, tmp_path):
    pool = clean_pool
    state = tmp_path / "state"
    proc = subprocess.Popen(
        [sys.executable, "-m", "negotiator_ext", "shadow", "--interval", "1", "--pool",
         pool.collector, "--state-dir", str(state), "--no-advertise", "--json"],
        env=pool.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    records = []
    try:
        deadline = time.monotonic() + 120
        while len(records) < 3 and time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            if line.startswith("{"):
                records.append(json.loads(line))
    finally:
        had = set(_workers_of(proc.pid))    # the loop's own, before it ends
        proc.send_signal(signal.SIGTERM)
        try:
            proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
    assert len(records) == 3, proc.stderr.read() if proc.stderr else ""
    assert had                              # a loop has its worker while it runs...
    metas = [json.loads((Path(r["snapshot_dir"]) / "meta.json").read_text()) for r in records]
    fetched = [m["slots_fetched"] for m in metas]
    assert fetched[0]["whole_query"] is True
    for f, m in zip(fetched[1:], metas[1:]):
        assert f["whole_query"] is False
        assert f["kept"] >= 20 and f["fetched"] + f["kept"] == m["counts"]["slots"]
    assert all(r["status"] != "failed" for r in records)
    # after the first, the loop's worker process queried the schedds beside the slot
    # steps (adapters/worker.py), and the loop ended it as it ended
    assert [m["schedds_queried"] for m in metas[1:]] == ["beside the slots"] * 2
    assert not _workers_of(proc.pid, had)   # ...and ends it as it ends
    # each snapshot's slots file holds the fakes as the collector has them, of the
    # attributes the pass asked for (its recorded slot projection: a few dozen of the
    # 150 and more a slot ad has)
    now = read_ads(Path(records[-1]["snapshot_dir"]) / "slots.ads")
    projection = metas[-1]["slot_projection"]
    asked = list(htcondor2.Collector(pool.collector).query(
        htcondor2.AdTypes.Startd, projection=projection))
    assert _fakes(now) == _fakes(asked)
    whole = list(htcondor2.Collector(pool.collector).query(htcondor2.AdTypes.Startd))
    assert 2 * max(map(len, now)) < min(map(len, whole))


def test_a_loops_kept_slot_ads_stay_unparsed_through_its_passes(clean_pool, fakes, tmp_path):
    """A loop keeps each slot ad the real collector sent as its lines, parsed when
    first read (core.classads.LazyAd): through two passes (capture, our cycle, ledger),
    only the few ads the cycle evaluates with are parsed, and what the loop hands its
    cycle is what a whole query of the collector gives."""
    from negotiator_ext.core.classads import LazyAd
    from negotiator_ext.shadow import ShadowLoop
    from negotiator_ext.shadow_state import ShadowSettings

    settings = ShadowSettings.from_knobs({}, state_dir=str(tmp_path / "state"),
                                         advertise=False, pool=clean_pool.collector)
    loop = ShadowLoop(settings, htcondor=htcondor2)
    loop.slot_cache = SlotCache()           # (as run_forever keeps one)
    for _ in range(2):
        rec = loop.run_pass()
        assert rec.status != "failed", rec.reason
        ads = [e.ad for e in loop.slot_cache._kept.values()]
        assert len(ads) >= 21 and all(type(a) is LazyAd for a in ads)
        made = sum(a.made() for a in ads)
        assert made <= 4, (made, len(ads))
    loop.tidy()
    kept = {a["Name"]: sorted(set(ln)) for a, ln in zip(ads, ad_lines(ads))}
    whole = htcondor2.Collector(clean_pool.collector).query(
        htcondor2.AdTypes.Startd, projection=list(loop.slot_cache.projection or []))
    for a, ln in zip(whole, ad_lines(whole)):
        if str(a.get("Machine", "")).startswith("fake-cache"):
            assert kept[a["Name"]] == sorted(set(ln))


def test_a_once_pass_after_another_fetches_only_what_changed(clean_pool, fakes, tmp_path):
    """`shadow --once` from cron: a pass after another, minutes apart at most, starts
    from the last snapshot's slots (SlotCache.seed) and fetches whole only the slots the
    collector heard from since; its slots file holds what the collector has."""
    pool = clean_pool
    state = tmp_path / "state"

    def once() -> dict:
        proc = subprocess.run(
            [sys.executable, "-m", "negotiator_ext", "shadow", "--once", "--pool",
             pool.collector, "--state-dir", str(state), "--no-advertise", "--json"],
            env=pool.env, capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        rec = json.loads(proc.stdout.strip().splitlines()[-1])
        assert rec["status"] != "failed", rec["reason"]
        return json.loads((Path(rec["snapshot_dir"]) / "meta.json").read_text()) | {
            "dir": rec["snapshot_dir"]}

    first = once()
    assert "slots_fetched" not in first         # nothing to start from: one whole query
    time.sleep(1.1)
    _advertise(pool, tmp_path, [fakes[5]], extra="BenchValue = 7")
    pool.wait_for(lambda: pool.tool("condor_status", "-af", "BenchValue", "-constraint",
                                    f'Machine == "{fakes[5]}"', check=False).stdout.strip()
                  == "7", 30, "the slot advertised again")
    second = once()
    f = second["slots_fetched"]
    assert f["whole_query"] is False and f["kept"] >= 19 and f["fetched"] >= 1
    assert f["fetched"] + f["kept"] == second["counts"]["slots"]
    now = _fakes(read_ads(Path(second["dir"]) / "slots.ads"))
    before = _fakes(read_ads(Path(first["dir"]) / "slots.ads"))
    # the slot advertised again was fetched (the collector stamped it anew), the others
    # are the first pass's lines
    assert {n for n in now if now[n] != before[n]} == {f"slot1@{fakes[5]}"}
    asked = list(htcondor2.Collector(pool.collector).query(
        htcondor2.AdTypes.Startd, projection=second["slot_projection"]))
    assert now == _fakes(asked)
