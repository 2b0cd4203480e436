"""A shadow loop's slot ads kept between passes (adapters/slot_cache.py): each pass gives
exactly the slots, in the order and with the texts, that a whole query of the collector
at that moment gives; the cycle never writes into a kept ad."""

from __future__ import annotations

import operator
import os
from pathlib import Path

import classad2
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from negotiator_ext.adapters.adfiles import ad_lines, read_ads, text_ads_of_lines, write_lines
from negotiator_ext.adapters.slot_cache import POLL, SlotCache

FIXTURES = Path(__file__).parent / "data" / "fixtures"


class Collector:
    """A collector's startd table: ads in its own order, each stamped with LastHeardFrom
    (the collector's clock, whole seconds) when it is taken in. `query` honours its
    constraint and projection and counts what it sends; `between` runs after the
    stamp query (a change that lands between a pass's two queries)."""

    def __init__(self, now: int = 1_000):
        self.now = now
        self.ads: dict[str, classad2.ClassAd] = {}
        self.queries: list[tuple] = []
        self.between = None
        self.fail: Exception | None = None
        self.total: dict[str, int] = {}     # UpdatesTotal: the collector's count per ad
        self.daemon_stats = True            # COLLECTOR_DAEMON_STATS

    def update(self, name: str, **attrs) -> None:
        ad = self.ads.get(name)
        ad = classad2.ClassAd(repr(ad)) if ad is not None else classad2.ClassAd(
            {"Name": name, "MyType": "Machine", "MyAddress": f"<127.0.0.1:9{len(self.ads)}>",
             "Cpus": 1, "Memory": 1024, "State": "Unclaimed", "Activity": "Idle",
             "Requirements": classad2.ExprTree("TARGET.RequestCpus <= MY.Cpus")})
        for k, v in attrs.items():
            ad[k] = v
        if "LastHeardFrom" not in attrs:    # the collector's stamp, unless the sender set one
            ad["LastHeardFrom"] = self.now
        self.total[name] = self.total.get(name, 0) + 1
        if self.daemon_stats:
            ad["UpdatesTotal"] = self.total[name]
        self.ads[name] = ad

    def remove(self, name: str) -> None:
        self.ads.pop(name, None)

    def query(self, constraint, projection):
        if self.fail is not None:
            raise self.fail
        self.queries.append((constraint, tuple(projection or ())))
        out = []
        for ad in self.ads.values():
            if constraint is not None and classad2.ExprTree(constraint).eval(ad) is not True:
                continue
            copy = classad2.ClassAd(repr(ad))
            if projection:
                want = {p.lower() for p in projection}
                for k in list(copy.keys()):
                    if k.lower() not in want:
                        del copy[k]
            out.append(copy)
        if projection and self.between is not None:
            between, self.between = self.between, None
            between()
        return out

    def whole(self) -> list[list[str]]:
        return ad_lines(list(self.ads.values()))


def refresh(cache: SlotCache, coll: Collector, tmp_path: Path):
    return cache.refresh(coll.query, {}, str(tmp_path / "slots.ads"))


def started(tmp_path: Path, slots: int, **attrs) -> tuple[Collector, SlotCache]:
    """A collector with `slots` slots, and a cache after its first (whole) pass."""
    coll = Collector()
    for i in range(slots):
        coll.update(f"slot{i}@host", **attrs)
    cache = SlotCache()
    refresh(cache, coll, tmp_path)
    return coll, cache


def test_a_pass_with_nothing_changed_fetches_nothing(tmp_path):
    coll = Collector()
    for i in range(20):
        coll.update(f"slot{i}@host")
    cache = SlotCache()
    first = refresh(cache, coll, tmp_path)
    assert first.whole and first.fetched == 20
    coll.queries.clear()
    got = refresh(cache, coll, tmp_path)
    assert not got.whole and got.fetched == 0 and got.kept == 20
    assert coll.queries == [(None, POLL)]
    assert got.slots == first.slots                 # the same objects
    assert got.lines == coll.whole()
    assert got.texts.rows == first.texts.rows


def test_changed_new_and_gone_slots(tmp_path):
    coll, cache = started(tmp_path, 10)
    coll.now += 30
    coll.update("slot3@host", State="Claimed", RemoteUser="u@x")
    coll.update("slot10@host")
    coll.remove("slot5@host")
    coll.queries.clear()
    got = refresh(cache, coll, tmp_path)
    assert not got.whole
    assert got.fetched == 2 and got.kept == 8
    assert got.lines == coll.whole()
    assert got.texts.rows == text_ads_of_lines(coll.whole(), "x").rows
    assert coll.queries[1] == ("LastHeardFrom >= 1030", ())


def test_an_update_in_the_same_second_is_not_missed(tmp_path):
    coll, cache = started(tmp_path, 4)
    # the same second as the fetch: LastHeardFrom does not change, no sequence number;
    # the collector's count of the ad's updates does
    coll.update("slot2@host", State="Claimed")
    got = refresh(cache, coll, tmp_path)
    assert got.fetched == 1 and got.lines == coll.whole()


def test_a_sender_that_sets_its_own_last_heard_from_is_not_missed(tmp_path):
    coll, cache = started(tmp_path, 4, LastHeardFrom=5)
    coll.now += 100
    coll.update("slot1@host", LastHeardFrom=5, State="Owner")
    got = refresh(cache, coll, tmp_path)
    assert not got.whole and got.lines == coll.whole()


def test_without_the_collectors_daemon_stats_every_pass_is_whole(tmp_path):
    coll = Collector()
    coll.daemon_stats = False
    for i in range(4):
        coll.update(f"slot{i}@host")
    cache = SlotCache()
    refresh(cache, coll, tmp_path)
    assert len(cache) == 0
    coll.update("slot1@host", State="Owner")
    got = refresh(cache, coll, tmp_path)
    assert got.whole and got.lines == coll.whole()
    assert not cache.write(tmp_path / "slots.ads")    # the capture writes them itself


def test_a_change_between_the_two_queries_is_taken(tmp_path):
    coll, cache = started(tmp_path, 6)
    coll.now += 10
    coll.update("slot1@host", Memory=2048)

    def later():
        coll.now += 1
        coll.update("slot4@host", Memory=4096)      # after the stamps were read
        coll.remove("slot1@host")                  # gone before the fetch
    coll.between = later
    got = refresh(cache, coll, tmp_path)
    names = [ad["Name"] for ad in got.slots]
    assert "slot1@host" not in names
    mem = {ad["Name"]: ad["Memory"] for ad in got.slots}
    assert mem["slot4@host"] == 4096                # the newer ad, as a whole query gives
    assert refresh(cache, coll, tmp_path).lines == coll.whole()


@pytest.mark.parametrize("garbage", ["no stamp", "duplicate", "text stamp"])
def test_a_poll_answer_that_cannot_be_trusted_means_a_whole_query(tmp_path, garbage):
    coll, cache = started(tmp_path, 5)
    coll.now += 10
    ad = coll.ads["slot1@host"]
    if garbage == "no stamp":
        del ad["LastHeardFrom"]
    elif garbage == "text stamp":
        ad["LastHeardFrom"] = "yesterday"
    else:
        dup = classad2.ClassAd(repr(ad))
        coll.ads["dup"] = dup
    coll.queries.clear()
    got = refresh(cache, coll, tmp_path)
    assert got.whole
    assert got.lines == coll.whole()
    assert coll.queries[-1] == (None, ())


@pytest.mark.parametrize("changed, whole", [(5, False), (6, True), (10, True)])
def test_more_than_half_the_slots_changed_means_one_whole_query(tmp_path, changed, whole):
    """WHOLE_SHARE: 5 of 10 slots changed are fetched by stamp, 6 by one whole query."""
    coll, cache = started(tmp_path, 10)
    coll.now += 60
    for i in range(changed):
        coll.update(f"slot{i}@host", Memory=512)
    coll.queries.clear()
    got = refresh(cache, coll, tmp_path)
    assert got.whole is whole and got.lines == coll.whole()
    assert got.fetched == (10 if whole else changed)
    assert coll.queries[-1] == ((None, ()) if whole else ("LastHeardFrom >= 1060", ()))


def test_a_failed_query_empties_the_cache(tmp_path):
    coll = Collector()
    coll.update("slot1@host")
    cache = SlotCache()
    refresh(cache, coll, tmp_path)
    assert len(cache) == 1
    coll.fail = OSError("collector gone")
    with pytest.raises(OSError):
        refresh(cache, coll, tmp_path)
    assert len(cache) == 0
    coll.fail = None
    assert refresh(cache, coll, tmp_path).whole


def test_the_slots_file_is_a_link_when_nothing_changed(tmp_path):
    coll = Collector()
    for i in range(5):
        coll.update(f"slot{i}@host")
    cache = SlotCache()
    paths = []
    for n, change in enumerate([None, None, "slot2@host", None]):
        if change:
            coll.now += 5
            coll.update(change, State="Owner")
        got = refresh(cache, coll, tmp_path)
        d = tmp_path / f"snap{n}"
        d.mkdir()
        assert cache.write(d / "slots.ads")
        cache.written(d / "slots.ads")
        expected = tmp_path / f"expected{n}"
        write_lines(expected, got.lines)
        assert (d / "slots.ads").read_bytes() == expected.read_bytes()
        paths.append(d / "slots.ads")
    ino = [os.stat(p).st_ino for p in paths]
    assert ino[1] == ino[0]              # nothing changed: the same file
    assert ino[2] != ino[1]              # slot2 changed
    assert ino[3] == ino[2]
    # the earlier snapshot pruned: written again
    os.unlink(paths[3])
    os.unlink(paths[2])
    d = tmp_path / "snap4"
    d.mkdir()
    refresh(cache, coll, tmp_path)
    assert cache.write(d / "slots.ads")
    assert (d / "slots.ads").read_bytes() == (tmp_path / "expected3").read_bytes()


def test_a_cache_seeded_from_a_snapshot_fetches_only_what_changed(tmp_path):
    """A `--once` pass from cron: a new cache given the last snapshot's slots file asks
    for the stamps, fetches the slots heard from since, and gives what a whole query
    gives; its slots file is the last one's, linked, when nothing changed."""
    coll, cache = started(tmp_path, 20)
    first = tmp_path / "first.ads"
    assert cache.write(first)
    coll.now += 5
    coll.update("slot3@host", State="Claimed")
    coll.update("slot20@host")
    coll.remove("slot7@host")
    seeded = SlotCache()
    assert seeded.seed(first, None) == 20
    coll.queries.clear()
    got = refresh(seeded, coll, tmp_path)
    assert not got.whole and (got.fetched, got.kept) == (2, 18)
    assert coll.queries == [(None, POLL), ("LastHeardFrom >= 1005", ())]
    assert got.lines == coll.whole()
    assert got.texts.rows == text_ads_of_lines(coll.whole(), "x").rows
    assert [repr(a) for a in got.slots] == [repr(a) for a in coll.ads.values()]
    second = tmp_path / "second.ads"
    assert seeded.write(second)
    write_lines(tmp_path / "expected.ads", got.lines)
    assert second.read_bytes() == (tmp_path / "expected.ads").read_bytes()
    # nothing heard from since: the same file
    again = SlotCache()
    assert again.seed(second, None) == 20
    refresh(again, coll, tmp_path)
    assert again.write(tmp_path / "third.ads")
    assert os.stat(tmp_path / "third.ads").st_ino == os.stat(second).st_ino


@pytest.mark.parametrize("damage", [
    "missing", "empty", "not utf-8", "an empty ad", "no blank line at the end",
    "a line that is no attribute", "a stamp that is an expression", "a quoted name",
    "two ads of one slot", "no UpdatesTotal"])
def test_a_slots_file_that_cannot_be_trusted_seeds_nothing(tmp_path, damage):
    """Whatever is wrong with the file, the cache holds nothing, and the pass asks the
    collector whole, as a first pass does."""
    coll, cache = started(tmp_path, 3)
    path = tmp_path / "slots.ads"
    assert cache.write(path)
    text = path.read_text()
    edits = {
        "empty": "",
        "an empty ad": text + "\n\n",
        "no blank line at the end": text[:-1],
        "a line that is no attribute": text.replace("Activity = ", "Activity := ", 1),
        "a stamp that is an expression": text.replace("LastHeardFrom = 1000",
                                                      "LastHeardFrom = 999 + 1", 1),
        "a quoted name": text.replace('Name = "slot0@host"', 'Name = "slot0\\"@host"', 1),
        "two ads of one slot": text + text.split("\n\n")[0] + "\n\n",
        "no UpdatesTotal": "\n".join(ln for ln in text.split("\n")
                                     if not ln.startswith("UpdatesTotal = ")),
    }
    if damage == "missing":
        path.unlink()
    elif damage == "not utf-8":
        path.write_bytes(text.encode() + b"Bad = \"\xff\"\n\n")
    else:
        assert edits[damage] != text
        path.write_text(edits[damage])
    seeded = SlotCache()
    assert seeded.seed(path, None) == 0 and len(seeded) == 0
    got = refresh(seeded, coll, tmp_path)
    assert got.whole and got.lines == coll.whole()


_step = st.one_of(
    st.tuples(st.just("seed"), st.just(0), st.just(0)),
    st.tuples(st.just("update"), st.integers(0, 7), st.integers(0, 3)),
    st.tuples(st.just("remove"), st.integers(0, 7), st.just(0)),
    st.tuples(st.just("tick"), st.integers(0, 2), st.just(0)),
    st.tuples(st.just("pass"), st.just(0), st.just(0)),
    st.tuples(st.just("between"), st.integers(0, 7), st.integers(0, 3)),
)


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=st.lists(_step, max_size=30))
def test_every_pass_equals_a_whole_query(tmp_path_factory, steps):
    """Random updates, removals, clock ticks (or none: the same second), and changes
    between a pass's two queries: every pass's slots, lines and texts equal a whole
    query's at the end of that pass, and its slots file what write_lines writes. A
    "seed" is a new process's cache (a `--once` pass from cron) started from the last
    slots file written (`SlotCache.seed`)."""
    tmp_path = tmp_path_factory.mktemp("passes")
    coll, cache = started(tmp_path, 4)
    passes = 0
    last = None
    for kind, i, v in steps:
        name = f"slot{i}@host"
        if kind == "seed":
            cache = SlotCache()
            held = cache.seed(last, None) if last is not None else 0
            assert held == len(cache) == (len(read_ads(last)) if last is not None else 0)
        elif kind == "update":
            coll.update(name, Memory=1024 * (v + 1))
        elif kind == "remove":
            coll.remove(name)
        elif kind == "tick":
            coll.now += i
        elif kind == "between":
            def between(name=name, v=v):
                at_poll.append({n: ad_lines([a])[0] for n, a in coll.ads.items()})
                coll.update(name, Cpus=v + 1)
            coll.between = between
        else:
            at_poll: list[dict] = []
            got = refresh(cache, coll, tmp_path)
            coll.between = None
            # the slots file: copied from the last one where it can, the same bytes
            passes += 1
            out = tmp_path / f"p{passes}-slots.ads"
            assert cache.write(out) == (len(cache) > 0)
            if len(cache):
                cache.written(out)
                last = out
                write_lines(tmp_path / "expected.ads", got.lines)
                assert out.read_bytes() == (tmp_path / "expected.ads").read_bytes()
            if not at_poll or got.whole:    # exactly a whole query (at the pass's end)
                assert got.lines == coll.whole()
                assert got.texts.rows == text_ads_of_lines(coll.whole(), "x").rows
                assert [repr(a) for a in got.slots] == [repr(a) for a in coll.ads.values()]
            else:                       # the slots the stamps named, each as then or as now
                names = [a["Name"] for a in got.slots]
                assert names == list(at_poll[0])
                for ad, lines in zip(got.slots, got.lines):
                    assert lines in (at_poll[0][ad["Name"]], ad_lines([coll.ads[ad["Name"]]])[0])
    coll.between = None
    got = refresh(cache, coll, tmp_path)
    assert got.lines == coll.whole()



@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(passes=st.lists(st.lists(st.tuples(st.integers(0, 5), st.integers(0, 3)),
                                max_size=6), min_size=1, max_size=4))
def test_a_pass_held_slots_read_again_what_its_file_gives(tmp_path_factory, passes):
    """HeldSlots (a loop's kept inputs): after later passes replaced some of a pass's
    slots (or all: a whole query), what it gives is that pass's ads and texts, exactly
    what its slots file reads as; the slots the cache still holds are its very objects
    (with their memos), only those it let go are read again (one of them a string with
    a newline: written `eval("...")`, read back as the value)."""
    from negotiator_ext.adapters.adfiles import read_ads_and_texts

    tmp_path = tmp_path_factory.mktemp("held")
    coll, cache = started(tmp_path, 4)
    coll.update("slot1@host", Note="two\nlines")
    held = []                           # (HeldSlots, that pass's ads, its file)
    for n, updates in enumerate([[]] + passes):
        coll.now += 10
        for i, v in updates:
            coll.update(f"slot{i}@host", Memory=1024 * (v + 1), Note=f"v{v}\nx")
        got = refresh(cache, coll, tmp_path)
        out = tmp_path / f"p{n}-slots.ads"
        assert cache.write(out)
        cache.written(out)
        h = cache.hold(got.slots, got.texts.rows, got.memos, out)
        assert h is not None and h.let_go() == 0
        held.append((h, list(got.slots), out))
        for h, ads, path in held:
            again, texts, memos = h.read()
            in_file, file_texts = read_ads_and_texts(path)
            assert [repr(a) for a in again] == [repr(a) for a in in_file]
            assert texts.rows == file_texts.rows
            let_go = [a is None for a in (e.ad for e in h._entries)]
            assert sum(let_go) == h.let_go()
            for a, before, memo, gone in zip(again, ads, memos, let_go):
                assert (a is before and memo is not None) if not gone else memo is None
    # slots not those of the file the cache wrote last, or another file: nothing held
    coll.now += 10
    coll.update("slot0@host", State="Owner")
    got = refresh(cache, coll, tmp_path)
    assert cache.hold(got.slots, got.texts.rows, got.memos, out) is None
    assert cache.write(tmp_path / "last.ads")
    cache.written(tmp_path / "last.ads")
    assert cache.hold(got.slots, got.texts.rows, got.memos, out) is None
    assert cache.hold(got.slots, got.texts.rows, got.memos, tmp_path / "last.ads")


# -- the cycle leaves a kept ad as it came ------------------------------------------------

from conftest import unpack_recording  # noqa: E402
from negotiator_ext.cycle import run_cycle  # noqa: E402
from negotiator_ext.pool import load_pool  # noqa: E402
from poolmaker import Expr, job, make_pool, slot  # noqa: E402

RULES = Path(__file__).parent / "data" / "rules"


def _pools(tmp_path):
    """Recorded pools where the cycle writes into slot ads: claimed slots with
    preemption considered (the current user's figures), NEGOTIATOR_MATCH_EXPRS on every
    slot, a p-slot changed by its dynamic slots' preemption, a consumption policy."""
    from negotiator_ext.pool import load_pool
    for name in ("preempt_priority", "hgq_nested_hep_lep_surplus",
                 "pslot_consumption_policy_cpu"):
        yield name, load_pool(FIXTURES / name)
    match_exprs = tmp_path / "match-exprs.config"
    match_exprs.write_text((FIXTURES / "preempt_priority" / "config").read_text()
                           + "\nNEGOTIATOR_MATCH_EXPRS = ExtSeen\nExtSeen = 1\n"
                           + "NEGOTIATOR_CROSS_SLOT_PRIOS = True\n")
    yield "match_exprs", load_pool(FIXTURES / "preempt_priority", match_exprs)
    for rule in ("pslot_preemption", "pslot_preemption_rank"):
        d = unpack_recording(RULES / f"{rule}.tar.gz", tmp_path)
        yield rule, load_pool(d)


def test_the_cycle_copies_a_kept_ad_before_writing_into_it(tmp_path):
    import dataclasses
    import json

    from negotiator_ext.cycle import run_cycle
    from negotiator_ext.pool import load_pool

    wrote = 0
    for name, pool in _pools(tmp_path):
        before = [repr(ad) for ad in pool.slot_ads]
        shared = dataclasses.replace(pool, shared_slot_ads=True)
        kept = run_cycle(shared)
        assert [repr(ad) for ad in pool.slot_ads] == before, name
        # the same decisions as a cycle that owns its ads (on a pool read afresh)
        own = load_pool(pool.snapshot.directory, None if name != "match_exprs"
                        else tmp_path / "match-exprs.config")
        mine = run_cycle(own)
        changed = sum(repr(a) != b for a, b in zip(own.slot_ads, before))
        wrote += changed
        a, b = kept.to_json(), mine.to_json()
        a.pop("timings", None), b.pop("timings", None)
        assert json.dumps(a, sort_keys=True, default=str) == \
            json.dumps(b, sort_keys=True, default=str), name
    assert wrote > 0        # the unshared cycles did write into their ads


def test_what_a_pass_works_out_of_a_kept_ad_is_kept_with_it(tmp_path):
    """pool.build_pool keeps each slot's checks, constraint and usage in its memo, by
    the config they depend on: another config works them out again; an expression that
    may read the clock is never kept."""
    import dataclasses

    from negotiator_ext.pool import build_pool, load_pool

    from negotiator_ext.adapters.snapshot import load_snapshot

    pool = load_pool(FIXTURES / "hgq_nested_hep_lep_surplus")
    # the snapshot as its files are (load_pool's; the pool's own holds the submitters in
    # the collector's order rebuilt from condor_status's, and its slots in file order)
    snap = load_snapshot(FIXTURES / "hgq_nested_hep_lep_surplus")
    memos = tuple({} for _ in snap.slots)
    kept = dataclasses.replace(snap, slot_memos=memos)
    first = build_pool(kept, pool.config)
    assert first.slots == pool.slots and all(len(m) == 1 for m in memos)
    again = build_pool(kept, pool.config)
    assert all(a is b for a, b in zip(again.slots, first.slots))      # taken from the memo
    heavier = dataclasses.replace(pool.config, slot_weight="2 * Cpus",
                                  force_negotiator_slot_weight=True)
    other = build_pool(kept, heavier)
    assert [s.weight for s in other.slots] == [
        2 * classad2.ClassAd(repr(a)).eval("Cpus") for a in snap.slots]
    assert all(len(m) == 2 for m in memos)
    narrow = dataclasses.replace(pool.config, slot_constraint='State == "Claimed"')
    assert len(build_pool(kept, narrow).slots) == sum(s.state == "Claimed" for s in pool.slots)
    clocked = dataclasses.replace(pool.config, slot_weight="Cpus + (time() > 0)")
    build_pool(kept, clocked)
    assert all(len(m) == 3 for m in memos)            # no memo for that one
    # a bad value is refused every time, never kept as good
    bad = dataclasses.replace(snap, slots=tuple(classad2.ClassAd(repr(a)) for a in snap.slots),
                              slot_memos=tuple({} for _ in snap.slots))
    bad.slots[0]["Cpus"] = float("nan")
    from negotiator_ext.errors import InputError
    for _ in range(2):
        with pytest.raises(InputError, match="Cpus"):
            build_pool(bad, pool.config)


def test_a_loops_pass_collects_what_it_made_and_everything_now_and_then(tmp_path, mocker):
    """A loop that keeps its slot ads collects generation 1 after a pass (what the pass
    made), everything after its first pass and every FULL_COLLECTION_EVERY passes;
    `shadow --once` (no cache) always everything."""
    import contextlib
    import sys

    sys.path.insert(0, str(Path(__file__).parent))
    from test_shadow import _loop

    from negotiator_ext import limits, shadow

    seen = []

    @contextlib.contextmanager
    def recording(collect=True, generation=2):
        seen.append(generation)
        yield

    mocker.patch.object(limits, "paused_gc", recording)
    fake, loop = _loop(tmp_path, mocker)
    loop.run_pass()
    assert seen == [2]
    loop.slot_cache = SlotCache()
    for _ in range(shadow.FULL_COLLECTION_EVERY):
        loop.run_pass()
    # the cache is empty for the first of these (filled by it): a whole collection
    assert seen[1] == 2 and len(loop.slot_cache) > 0
    every = shadow.FULL_COLLECTION_EVERY
    assert seen[2:] == [2 if n % every == 0 else 1 for n in range(3, every + 2)]
    assert 2 in seen[2:] and seen.count(1) == every - 2



def test_a_loops_pass_leaves_its_collection_and_objects_for_tidy(tmp_path, mocker):
    """`tidy_later` (run_forever's passes): the pass is recorded with the collector left
    for later; its pool and result live until `tidy`, which frees them and collects
    the generation the pass would have collected (the snapshot the pool was built from
    stays, the loop's for the next pass's re-prediction); a second `tidy` does nothing,
    and the next pass tidies what the last one left before it starts."""
    import gc
    import sys
    import weakref

    sys.path.insert(0, str(Path(__file__).parent))
    from test_shadow import _loop

    from negotiator_ext import limits
    from negotiator_ext.adapters.ledger import open_ledger

    asked = []
    real_paused = limits.paused_gc

    def recording(collect=True, generation=2):
        asked.append(collect)
        return real_paused(collect, generation)

    mocker.patch.object(limits, "paused_gc", recording)
    fake, loop = _loop(tmp_path, mocker)
    loop.slot_cache = SlotCache()
    loop.tidy_later = True
    rec = loop.run_pass()
    assert asked == [False]                    # no collection inside the pass
    with open_ledger(loop.settings.ledger_url) as ledger:
        assert [r["uuid"] for r in ledger.passes()] == [rec.uuid]
    generation, one = loop._untidy
    assert generation == 2                     # the first pass of a cache: everything
    pool_ref = weakref.ref(one.made[0])
    snapshot = one.made[0].snapshot
    del one
    collected = mocker.spy(gc, "collect")
    loop.tidy()
    assert collected.call_args_list == [mocker.call(2)]
    assert pool_ref() is None and loop._untidy is None
    (kept,) = loop.kept_inputs.values()
    assert kept.uuid == rec.uuid and all(
        map(operator.is_, kept.inputs()[0].slots, snapshot.slots))
    del snapshot
    loop.tidy()
    assert collected.call_count == 1
    second = loop.run_pass()                   # kept slot ads: what the pass made
    assert loop._untidy[0] == 1
    assert len(loop._untidy[1].made[1].matches) == len(second.shadow_matches) > 0
    loop.run_pass()                            # the second's left-overs tidied first
    assert collected.call_args_list == [mocker.call(2), mocker.call(1)]


_job_line = st.sampled_from([
    "ClusterId = 1", "ClusterId = 2", "ProcId = 0", "ProcId = 1", "JobStatus = 1",
    "JobStatus = 2", 'Owner = "alice"', 'Owner = "bob"', "RequestCpus = 1",
    "requestcpus = 2", "Requirements = TARGET.Cpus >= MY.RequestCpus",
    'GoneLater = "x"', "Rank = 0.0"])


@settings(max_examples=100, deadline=None)
@given(passes=st.lists(st.lists(st.lists(_job_line, min_size=1, max_size=6), max_size=6),
                       min_size=1, max_size=5))
def test_a_loops_job_texts_equal_those_split_afresh(passes):
    """adfiles.KnownLines: each pass's job texts, taken from the lines the last pass split,
    equal the texts split afresh (rows and names: a name no job of this pass has is not
    among them)."""
    from negotiator_ext.adapters.adfiles import KnownLines
    from negotiator_ext.core.adtext import TextStore

    known = KnownLines()
    for jobs in passes:
        jobs = [sorted(set(j), key=str.lower) for j in jobs]
        known.next_pass()
        store = TextStore()
        got = text_ads_of_lines(jobs, "jobs.ads", store, earlier=known)
        fresh = text_ads_of_lines(jobs, "jobs.ads", TextStore())
        assert got.rows == fresh.rows
        assert set(got.store.names) == set(fresh.store.names)


def test_a_line_too_large_is_refused_when_a_loop_first_sees_it():
    from negotiator_ext.adapters.adfiles import KnownLines
    from negotiator_ext.core.adtext import TextStore
    from negotiator_ext.errors import InputError
    from negotiator_ext.limits import MAX_EXPR_OPERATORS

    known = KnownLines()
    known.next_pass()
    text_ads_of_lines([["A = 1"]], "jobs.ads", TextStore(), earlier=known)
    known.next_pass()
    deep = "B = " + " + ".join(["1"] * (MAX_EXPR_OPERATORS + 10))
    with pytest.raises(InputError, match="jobs.ads"):
        text_ads_of_lines([["A = 1"], [deep]], "jobs.ads", TextStore(), earlier=known)


def _decisions(pool) -> str:
    import json

    got = run_cycle(pool).to_json()
    got.pop("timings", None)
    return json.dumps(got, sort_keys=True, default=str)


def _kept_pool(pool, memos, config=None, jobs_of=None):
    """`pool`'s slot ads as a loop keeps them (shared, with `memos`), under `config`
    (default the pool's), with the jobs (and submitters) of `jobs_of` (default its own)."""
    import dataclasses

    from negotiator_ext.pool import build_pool
    snap = dataclasses.replace(pool.snapshot, slots_shared=True, slot_memos=memos)
    if jobs_of is not None:
        other = jobs_of.snapshot
        snap = dataclasses.replace(snap, jobs=other.jobs, submitters=other.submitters,
                                   meta=other.meta)
    return build_pool(snap, config or pool.config)


def test_what_the_cycle_keeps_in_a_slots_memo_changes_no_decision(tmp_path):
    """The cycle keeps what it reads of a kept slot ad (trimming, the slot's flags and
    holder, what its expressions reach, its class key and static ranks) in the slot's
    memo: pass after pass on the same ads, every decision is the one a cycle without
    memos makes, where the cycle writes into slot ads (claimed slots' figures, match
    expressions, consumption policies, rolled-up dynamic slots) and where it does not."""
    pools = list(_pools(tmp_path)) + [
        (name, load_pool(FIXTURES / name))
        for name in ("hgq_static_30slots", "pie_three_submitters")] + [
        (rule, load_pool(unpack_recording(RULES / f"{rule}.tar.gz", tmp_path)))
        for rule in ("ignore_job_ranks", "trim_shutdown")]
    used = 0
    for name, pool in pools:
        plain = _decisions(_kept_pool(pool, None))
        memos = tuple({} for _ in pool.snapshot.slots)
        for _ in range(3):                       # filled, then read twice
            assert _decisions(_kept_pool(pool, memos)) == plain, name
        used += sum(any(str(k).startswith("matcher-") for k in m) for m in memos)
        # a claimed slot whose current user's figures the cycle writes keeps no matcher
        # memo (its texts change from cycle to cycle)
        if name == "preempt_priority":
            kept = {s.name for s, m in zip(pool.slots, memos)
                    if any(str(k).startswith("matcher-") for k in m)}
            claimed = {s.name for s in pool.slots if s.state == "Claimed"}
            assert claimed and not kept & claimed
    assert used > 0


def test_a_slots_memo_under_another_config_or_other_jobs_is_worked_out_again(tmp_path):
    """What a memo keeps depends on the config's expressions and on which slot names
    the jobs' attributes make job-dependent: memos filled under one config, or with one
    queue, serve another config or another queue with that one's decisions."""
    import dataclasses

    pool = load_pool(FIXTURES / "preempt_priority")
    memos = tuple({} for _ in pool.snapshot.slots)
    _decisions(_kept_pool(pool, memos))
    for change in (dict(pre_job_rank="Memory"), dict(post_job_rank="0 - SlotID"),
                   dict(preemption_requirements="True"), dict(preemption_rank="SlotID"),
                   dict(consider_preemption=False)):
        config = dataclasses.replace(pool.config, **change)
        assert _decisions(_kept_pool(pool, memos, config)) == \
            _decisions(_kept_pool(pool, None, config)), change

    # unclaimed slots alike but for MyBonus: a rank that reads it tells them apart, one
    # that reads Memory does not
    slots = [slot(f"slot{i}@n{i}.test.local", MyBonus=i) for i in range(1, 5)]
    bonus = load_pool(make_pool(tmp_path / "bonus", slots=slots, jobs=[job(1, 0, "a")],
                                config="NEGOTIATOR_PRE_JOB_RANK = Memory"))
    memos = tuple({} for _ in bonus.snapshot.slots)
    for change, best in ((dict(), "slot1"), (dict(pre_job_rank="MyBonus"), "slot4"),
                         (dict(pre_job_rank=None, post_job_rank="MyBonus"), "slot4"),
                         (dict(), "slot1")):
        config = dataclasses.replace(bonus.config, **change)
        got = run_cycle(_kept_pool(bonus, memos, config))
        assert [m.slot.split("@")[0] for m in got.matches] == [best], change

    # NEGOTIATOR_PRE_JOB_RANK reads Boost, which no slot has: with jobs that lack it
    # the rank is the slot's own (kept in its memo), with jobs that have it the job's;
    # the same kept slots, the two queues in turn
    slots = [slot(f"slot{i}@n{i}.test.local", Memory=1024 * i) for i in range(1, 5)]
    config = "NEGOTIATOR_PRE_JOB_RANK = ifThenElse(Boost =?= True, 0 - Memory, Memory)"
    plain = load_pool(make_pool(tmp_path / "plain", slots=slots, jobs=[job(1, 0, "a")],
                                config=config))
    boost = load_pool(make_pool(tmp_path / "boost", slots=slots, config=config,
                                jobs=[job(1, 0, "a", Boost=True)]))
    memos = tuple({} for _ in plain.snapshot.slots)
    for jobs_of, best in ((boost, "slot1"), (plain, "slot4"), (boost, "slot1"),
                          (plain, "slot4")):
        kept = _kept_pool(plain, memos, jobs_of=jobs_of)
        assert _decisions(kept) == _decisions(_kept_pool(plain, None, jobs_of=jobs_of))
        assert [m.slot.split("@")[0] for m in run_cycle(
            _kept_pool(plain, memos, jobs_of=jobs_of)).matches] == [best]


def test_a_pass_starts_from_the_newest_snapshot_only_while_it_is_young(tmp_path):
    """shadow_state.slot_seed: the newest snapshot's slots file and slot projection, at
    most SEED_AGE seconds old; nothing for an older one, one without a slots file, or a
    meta.json that does not say what its slots were asked with."""
    import json
    from negotiator_ext.shadow_state import SEED_AGE, slot_seed
    root = tmp_path / "snapshots"

    def snap(t: int, **meta) -> Path:
        d = root / str(t)
        d.mkdir(parents=True)
        (d / "meta.json").write_text(json.dumps({"captured_at": t, **meta}))
        (d / "slots.ads").write_text("Name = \"a\"\n\n")
        return d

    older = snap(1000, slot_projection=["Name", "Cpus"])
    newer = snap(1100)
    assert slot_seed(root, 1100 + SEED_AGE) == (newer / "slots.ads", None)
    assert slot_seed(root, 1101 + SEED_AGE) is None           # too old
    assert slot_seed(root, 1099) is None                      # from the future
    assert slot_seed(root, 1200, exclude=newer) == (older / "slots.ads", ["Name", "Cpus"])
    (newer / "meta.json").write_text(json.dumps({"captured_at": 1100,
                                                 "slot_projection": "whole"}))
    assert slot_seed(root, 1200) is None
    (newer / "meta.json").write_text(json.dumps({"captured_at": 1100}))
    (newer / "slots.ads").unlink()
    assert slot_seed(root, 1200) is None
    (newer / "meta.json").write_text("[1, 2]")
    assert slot_seed(root, 1200) is None
