"""The collector's answer order rebuilt from condor_status output (issue 32 part 1):
core/collector_order.py (the collector's hash table, in our words) and
adapters/collector_order.py (when and how a snapshot's ads are put back in that order),
checked against recordings of a real 25.14 collector (tests/data/collector_order/README.md)
and the recordings of real cycles with equal submitters (tests/data/ties)."""

from __future__ import annotations

import json
import re
import shutil
import sys
from collections import Counter
from pathlib import Path

import pytest

from conftest import FIXTURES, unpack_recording
from negotiator_ext.adapters import collector_order as co
from negotiator_ext.adapters.adfiles import read_ads, write_ads
from negotiator_ext.adapters.snapshot import load_snapshot
from negotiator_ext.core import collector_order as table
from negotiator_ext.errors import InputError

DATA = Path(__file__).parent / "data"
sys.path.insert(0, str(Path(__file__).parent))


# -- the table -------------------------------------------------------------------------

def test_the_hash_is_33_times_plus_each_byte_in_64_bits():
    assert table.key_hash("") == 0
    assert table.key_hash("a") == 97
    assert table.key_hash("ab") == 97 * 33 + 98
    assert table.key_hash("ab\0cd") == table.key_hash("ab")      # a C string
    h = 0
    for b in ("x" * 40).encode():
        h = h * 33 + b
    assert table.key_hash("x" * 40) == h % 2**64
    assert table.key_hash("é") == 0xC3 * 33 + 0xA9                  # its UTF-8 bytes


@pytest.mark.parametrize("count,size", [
    (0, 7), (5, 7), (6, 15), (11, 15), (12, 31), (24, 31), (25, 63), (100, 127),
    (101, 127), (102, 255), (11_000, 16_383), (100_000, 131_071)])
def test_the_table_grows_at_a_load_of_0_8_to_2_to_the_k_minus_1(count, size):
    assert table.table_size(count) == size


def test_a_table_that_held_more_keeps_its_size():
    assert table.table_size(10, at_least=255) == 255


def _keys_in_bucket(bucket: int, size: int, n: int) -> list[str]:
    out, i = [], 0
    while len(out) < n:
        k = f"k{i}"
        if table.key_hash(k) % size == bucket:
            out.append(k)
        i += 1
    return out


def test_a_new_ad_goes_to_the_head_of_its_bucket():
    a, b = _keys_in_bucket(3, 7, 2)
    assert [[a, b][i] for i in table.walk_order([a, b])] == [b, a]
    assert [[a, b][i] for i in table.walk_order([a, b], [1, 0])] == [a, b]


def test_growing_reverses_the_order_of_ads_that_meet_again():
    # two ads in one bucket of 7 and of 15: the later first in 7 buckets; growing to
    # 15 (at the 6th ad) walks them in that order and puts each at the head: reversed
    i, pair = 0, []
    while len(pair) < 2:
        k = f"m{i}"
        h = table.key_hash(k)
        if h % 7 == 2 and h % 15 == 4:
            pair.append(k)
        i += 1
    fill = [k for k in (f"f{j}" for j in range(200))
            if table.key_hash(k) % 7 != 2 and table.key_hash(k) % 15 != 4][:4]
    keys = pair + fill
    walk = [keys[i] for i in table.walk_order(keys)]
    assert walk.index(pair[0]) < walk.index(pair[1])      # grown after both: reversed twice
    keys = fill[:3] + pair + fill[3:]
    walk = [keys[i] for i in table.walk_order(keys)]
    assert walk.index(pair[0]) < walk.index(pair[1])
    keys = fill + pair                 # the 6th ad grows the table; the 5th was before
    walk = [keys[i] for i in table.walk_order(keys)]
    assert walk.index(pair[0]) < walk.index(pair[1])
    keys = fill + [pair[0], "late"] + [pair[1]]           # pair[1] after the growth
    walk = [keys[i] for i in table.walk_order(keys)]
    assert walk.index(pair[1]) < walk.index(pair[0])


# -- recordings of a real collector ----------------------------------------------------

def _recording(name, tmp_path):
    return unpack_recording(DATA / "collector_order" / f"{name}.tar.gz", tmp_path)


@pytest.mark.parametrize("name", ["daemons300", "shuffled300"])
def test_with_the_true_insertion_order_the_walk_is_the_collectors(tmp_path, name):
    from record_collector_order import check
    got = check(_recording(name, tmp_path))
    for kind in ("slots", "submitters"):
        assert got[kind]["sorted_like_condor_status"]
        assert got[kind]["with_true_insertion_order_equal"], kind
        assert got[kind]["file_positions_equal"] < 5        # condor_status lost it


def test_the_rebuilt_order_as_the_daemons_send_their_ads(tmp_path):
    from record_collector_order import check
    got = check(_recording("daemons300", tmp_path))
    # each schedd's submitters sorted by name, as a schedd sends them: all of them
    assert got["submitters"]["rebuilt_positions_equal"] == 100
    # the hosts came in a random order: the ads that share a bucket with an ad of a
    # host that came after the table last grew are not in their place
    slots = got["slots"]
    assert slots["ads"] - slots["rebuilt_positions_equal"] <= slots["sharing_a_bucket"]
    assert slots["rebuilt_positions_equal"] >= 150


def _pool(d: Path):
    from negotiator_ext.pool import load_pool
    return load_pool(d)


def test_a_pool_of_condor_status_files_takes_the_rebuilt_order(tmp_path):
    d = _recording("daemons300", tmp_path)
    order = json.loads((d / "order.json").read_text())
    snap = load_snapshot(d)                      # the snapshot: as its files are
    names = [a["Name"] for a in read_ads(d / "slots.ads")]
    assert [a["Name"] for a in snap.slots] == names and "ad_order" not in snap.meta
    pool = _pool(d)                              # the pool: in the collector's order
    meta = pool.snapshot.meta
    assert meta["ad_order"] == "rebuilt"
    assert meta["ad_order_rebuilt"]["submitters"] == {"ads": 100, "buckets": 127,
                                                      "sharing_a_bucket": 62}
    assert [[a["Name"], a["ScheddName"]] for a in pool.snapshot.submitters] == \
        order["submitters"]
    got = [a["Name"] for a in pool.slot_ads]
    keys = [co.slot_key(a) for a in snap.slots]
    assert got == [keys[i] for i in co.collector_walk(snap.slots, True)]
    # each slot's text goes with its ad
    assert [dict(r)["name"] for r in pool.slot_texts] == [f'"{n}"' for n in got]


# -- which snapshots are rebuilt ---------------------------------------------------------

def _two_slots(d: Path, names: list[str], meta: dict | None = None) -> Path:
    d.mkdir()
    text = "".join(f'MyType = "Machine"\nName = "{n}"\nMachine = "{n.split("@")[1]}"\n'
                   f"Cpus = 1\nMemory = 1024\n\n" for n in names)
    (d / "slots.ads").write_text(text)
    if meta is not None:
        (d / "meta.json").write_text(json.dumps(meta))
    return d


# two names whose walk order is the reverse of their sorted order
def _reversed_pair() -> list[str]:
    for i in range(1000):
        names = [f"slot1@a{i}.example.org", f"slot1@b{i}.example.org"]
        if table.walk_order(names) == [1, 0]:
            return names
    raise AssertionError


@pytest.mark.parametrize("meta,rebuilt", [
    (None, True), ({}, True), ({"tool": "negotiator-ext snapshot"}, False),
    ({"ad_order": "collector"}, False), ({"ad_order": "files"}, False),
    ({"ad_order": "rebuilt"}, False)])
def test_which_order_a_snapshot_holds(tmp_path, meta, rebuilt):
    names = _reversed_pair()
    pool = _pool(_two_slots(tmp_path / "s", names, meta))
    got = [a["Name"] for a in pool.slot_ads]
    assert got == (names[::-1] if rebuilt else names)
    said = (meta or {}).get("ad_order")
    assert pool.snapshot.meta.get("ad_order") == ("rebuilt" if rebuilt else said)


def test_a_file_not_in_condor_status_order_is_kept(tmp_path):
    names = _reversed_pair()[::-1]                    # not sorted: someone chose it
    pool = _pool(_two_slots(tmp_path / "s", names))
    assert [a["Name"] for a in pool.slot_ads] == names
    assert "ad_order" not in pool.snapshot.meta


def test_condor_status_sorts_names_as_versions():
    import classad2
    ads = [classad2.ClassAd({"Machine": m, "Name": f"slot1@{m}"})
           for m in ("node2", "node10", "node11")]
    assert co.sorted_like_condor_status(ads)
    assert not co.sorted_like_condor_status(ads[::-1])


def test_a_bad_ad_order_is_named(tmp_path):
    with pytest.raises(InputError, match=r'ad_order: expected one of "collector", '
                                         r'"rebuilt", "files", not "hash"'):
        load_snapshot(_two_slots(tmp_path / "s", _reversed_pair(), {"ad_order": "hash"}))


def test_a_bad_slot_is_named_by_its_place_in_the_file(tmp_path):
    from negotiator_ext.pool import load_pool
    names = _reversed_pair()
    d = _two_slots(tmp_path / "s", names)
    p = d / "slots.ads"
    p.write_text(p.read_text().replace("Cpus = 1", 'Cpus = real("NaN")', 1))
    with pytest.raises(InputError, match=re.escape(f"ad 1 ({names[0]}): attribute Cpus")):
        load_pool(d)


def test_a_capture_tells_how_far_the_tables_grew(tmp_path):
    d = _recording("daemons300", tmp_path)
    order = json.loads((d / "order.json").read_text())
    assert table.sizes_of_walk(order["slots"]) == [511]
    assert table.sizes_of_walk([n + s for n, s in order["submitters"]]) == [127]
    assert table.sizes_of_walk(sorted(order["slots"])) == []     # no table walks so


def test_a_table_known_to_be_larger_is_walked_so(tmp_path):
    """pslot_consumption_policy_cpu: 8 submitter ads, a 15-bucket table walks alice
    before bob; 25.14 met bob first (its collector had held more submitters: a table of
    63 buckets walks bob first). Told the size, every rejection reason agrees."""
    from test_explain import _matchlog_rejections
    from negotiator_ext.cycle import run_cycle
    from negotiator_ext.pool import load_pool
    d = tmp_path / "p"
    shutil.copytree(FIXTURES / "pslot_consumption_policy_cpu", d)
    names = lambda snap: [a["Name"].split("@")[0] for a in snap.submitters]  # noqa: E731
    before = names(load_pool(d).snapshot)
    assert before.index("alice") < before.index("bob")
    meta = json.loads((d / "meta.json").read_text())
    (d / "meta.json").write_text(json.dumps({**meta, "collector_table_sizes":
                                             {"submitters": 63}}))
    pool = load_pool(d)
    assert pool.snapshot.meta["ad_order_rebuilt"]["submitters"]["buckets"] == 63
    assert names(pool.snapshot).index("bob") < names(pool.snapshot).index("alice")
    r = run_cycle(pool)
    ours = {(x.job, x.submitter, x.reason) for x in r.rejections}
    assert ours == set(_matchlog_rejections("pslot_consumption_policy_cpu"))


def test_bad_table_sizes_are_named(tmp_path):
    with pytest.raises(InputError, match=r"collector_table_sizes: expected \{"):
        load_snapshot(_two_slots(tmp_path / "s", _reversed_pair(),
                                 {"collector_table_sizes": {"slots": "big"}}))


# -- the same decisions as our capture ---------------------------------------------------

def _condor_status_copy(src: Path, dst: Path) -> None:
    """`src` as condor_status would have printed it: sorted by Machine, then Name, and
    meta.json without our tool's name."""
    shutil.copytree(src, dst)
    for stem in ("slots", "submitters"):
        ads = read_ads(dst / f"{stem}.ads")
        ads.sort(key=lambda a: (str(a.get("Machine", "")), str(a.get("Name", ""))))
        write_ads(dst / f"{stem}.ads", ads)
    meta = json.loads((dst / "meta.json").read_text())
    del meta["tool"]
    (dst / "meta.json").write_text(json.dumps(meta))


@pytest.mark.parametrize("name", ["submitters100", "groups20"])
def test_condor_status_files_give_the_real_cycles_decisions(tmp_path, name):
    from negotiator_ext.cycle import run_cycle
    from negotiator_ext.pool import load_pool
    src = unpack_recording(DATA / "ties" / f"{name}.tar.gz", tmp_path)
    real = Counter(re.findall(r"Matched \S+ (\S+) ",
                              (src / "expected" / "matchlog.txt").read_text()))
    copy = tmp_path / "copy"
    _condor_status_copy(src, copy)
    pool = load_pool(copy)
    assert pool.snapshot.meta["ad_order"] == "rebuilt"
    ours = run_cycle(pool)
    assert Counter(m.submitter for m in ours.matches) == real
    # without the rebuild, the files' order decides other ties
    meta = json.loads((copy / "meta.json").read_text())
    (copy / "meta.json").write_text(json.dumps({**meta, "ad_order": "files"}))
    unrebuilt = run_cycle(load_pool(copy))
    assert Counter(m.submitter for m in unrebuilt.matches) != real


# -- a real collector ------------------------------------------------------------------------

@pytest.mark.live
def test_a_real_collectors_walk(tmp_path):
    from livepool import find_release
    from record_collector_order import check, record
    if find_release() is None:
        pytest.skip("no HTCondor install")
    record(tmp_path / "r", slots=120, per_host=4, submitters=40, schedds=2, seed=7,
           arrival="shuffled", capture=tmp_path / "ours")
    got = check(tmp_path / "r")
    assert got["slots"]["with_true_insertion_order_equal"]
    assert got["submitters"]["with_true_insertion_order_equal"]
    # and condor_status -sort none prints the collector's order
    order = json.loads((tmp_path / "r" / "order.json").read_text())
    assert order["sort_none"] == {"af": True, "long": True}
    # our capture keeps the collector's order, says so, and how far its tables grew
    ours = load_snapshot(tmp_path / "ours")
    assert ours.meta["ad_order"] == "collector" and "ad_order_rebuilt" not in ours.meta
    assert [a["Name"] for a in ours.slots] == order["slots"]
    assert ours.meta["collector_table_sizes"] == {"slots": 255, "submitters": 63}
