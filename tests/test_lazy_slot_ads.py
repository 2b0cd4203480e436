"""Slot ads parsed when first read (core.classads.LazyAd, adapters/slot_projection.py):
a files snapshot's slot ads are kept as their texts until something reads them, and
the cycle reads the texts of most of them. The decisions are the same as with every ad
parsed (test_slot_projection runs every recording both ways); here, what a lazy ad is,
that most ads of a recording stay unparsed through a cycle, and that the values worked
out from the texts alone are the ads' own."""

from __future__ import annotations

import json
import pickle

import classad2
from hypothesis import given, settings, strategies as st

from conftest import FIXTURES, recorded_snapshot_dirs
from negotiator_ext.core import classads
from negotiator_ext.core.adtext import AdView, NOT_KNOWN, TextValues
from negotiator_ext.core.classads import LazyAd
from negotiator_ext.cycle import prepare_cycle, run_cycle
from negotiator_ext.pool import load_pool, negotiators_of


def _lazy(text: str, made: list) -> LazyAd:
    def make(data):
        made.append(data)
        return classad2.ClassAd(data)
    return LazyAd(make, text)


def test_a_lazy_ad_is_parsed_when_first_read_and_then_only():
    made = []
    ad = _lazy("[ a = 1; b = a + 1 ]", made)
    assert isinstance(ad, classad2.ClassAd) and not ad.made() and made == []
    assert classads.eval_attr(ad, "b") == 2
    assert ad.made() and len(made) == 1
    assert classads.eval_attr(ad, "a") == 1 and len(ad) == 2
    assert len(made) == 1                   # parsed once
    assert "_data" not in ad.__dict__       # what it was made from is let go


def test_what_is_written_into_an_unparsed_ad_is_there_once_it_is_parsed():
    made = []
    ad = _lazy("[ a = 1; b = a + 1 ]", made)
    ad["a"] = 5
    ad["c"] = classad2.ExprTree("a * 2")
    ad["a"] = 7                             # the last write wins, as in an ad
    assert not ad.made()
    assert classads.eval_attr(ad, "b") == 8
    assert classads.eval_attr(ad, "c") == 14
    ad["d"] = "x"                           # written into the parsed ad at once
    assert ad.get("d") == "x" and len(made) == 1


def test_a_lazy_ad_copies_pickles_and_prints_as_its_ad():
    ad = _lazy("[ a = 1; b = a + 1 ]", [])
    copy = classads.copy_ad(ad)
    assert type(copy) is classad2.ClassAd and classads.eval_attr(copy, "b") == 2
    back = pickle.loads(pickle.dumps(_lazy("[ a = 1; b = a + 1 ]", [])))
    assert classads.eval_attr(back, "b") == 2
    assert repr(ad) == repr(classad2.ClassAd("[ a = 1; b = a + 1 ]"))


def test_a_recordings_slot_ads_stay_unparsed_but_for_a_few():
    """A files snapshot of 30 alike static slots (claimed ones among them): reading it
    parses no slot ad; a cycle parses only the ads its slot classes are evaluated with,
    far fewer than the slots, and decides as with every ad parsed."""
    d = FIXTURES / "hgq_static_30slots"
    pool = load_pool(d, project_slots=True)
    ads = pool.slot_ads
    assert len(ads) == 30 and all(type(a) is LazyAd for a in ads)
    assert not any(a.made() for a in ads)
    result = run_cycle(pool)
    made = sum(a.made() for a in ads)
    assert 1 <= made <= 5
    whole = load_pool(d, project_slots=True)
    for ad in whole.slot_ads:
        len(ad)                             # every ad parsed before the cycle
    assert (json.dumps(run_cycle(whole).to_json(), sort_keys=True, default=str)
            == json.dumps(result.to_json(), sort_keys=True, default=str))


def test_claimed_slots_take_the_current_users_figures_without_being_parsed():
    """With preemption considered, the negotiator writes the current user's priority
    and usage into each claimed slot ad (addRemoteUserPrios): an unparsed ad keeps the
    writes, and the slot's texts say what the parsed ad then holds."""
    d = FIXTURES / "preempt_priority"
    pool = load_pool(d, project_slots=True)
    cycle = prepare_cycle(pool)
    claimed = [s for s in cycle.slots if s.live]
    assert claimed
    written = ("RemoteUserPrio", "RemoteUserResourcesInUse", "RemoteUserFloor")
    for s in claimed:
        assert type(s.ad) is LazyAd and not s.ad.made()
        assert s.ad.pending_writes() == [
            "RemoteUserFloor", "RemoteUserPrio", "RemoteUserResourcesInUse"]
        texts = {n: s.texts[n.lower()] for n in written}
        for n in written:                   # (parses the ad)
            assert classads.attribute_text(s.ad, n) == texts[n]
        assert s.ad.made()


def test_every_recording_parses_fewer_slot_ads_than_it_has(tmp_path):
    """Over every recording (fixtures and tests/data), reading the files parses no
    slot ad, and a cycle parses a few: at most half of a pool of 20 slots or more, but
    where NEGOTIATOR_IGNORE_JOB_RANKS sorts the slots by each one's ranks (4 of the
    11,002 slots of the largest recording). What a shadow pass reads of every slot
    besides its cycle (adapters/alignment.py) it reads through the slots' texts: the
    check of a capture taken too late (`late_capture`: each claimed slot's
    EnteredCurrentState) parses no ad, and the digest kept for explaining
    disagreements (`pool_digest`: each slot's EnteredCurrentState, LastHeardFrom,
    PartitionableSlot and Cpus) none the cycle left unparsed; each gives what it gives
    with every ad parsed. (A loop keeps its slot ads from pass to pass: one parsed there
    stays parsed.)"""
    from negotiator_ext.adapters.alignment import late_capture, pool_digest
    total = parsed = pools = claimed = 0
    for d in recorded_snapshot_dirs(tmp_path):
        for name in negotiators_of(d):
            pool = load_pool(d, negotiator=name, project_slots=True)
            ads = [a for a in pool.slot_ads if type(a) is LazyAd]
            if not ads:
                continue            # (a pool whose expressions build names: whole ads)
            starts = (0, (pool.snapshot.captured_at or 0) - 600)
            late = [late_capture(pool, t) for t in starts]
            assert not any(a.made() for a in ads), (d, name)
            result = run_cycle(pool)
            made = sum(a.made() for a in ads)
            if len(ads) >= 10000:
                assert made <= 10, (d, name, made)
            if len(ads) >= 20 and not pool.config.ignore_job_ranks:
                assert made <= len(ads) // 2, (d, name, made, len(ads))
            digest = pool_digest(pool, result)
            assert sum(a.made() for a in ads) == made, (d, name)
            for ad in ads:
                len(ad)                     # every ad parsed: read in the ad itself
            assert pool_digest(pool, result) == digest, (d, name)
            assert [late_capture(pool, t) for t in starts] == late, (d, name)
            total += len(ads)
            parsed += made
            pools += 1
            claimed += late[0]
    assert pools >= 30 and claimed > 0
    assert parsed < total / 4


# ---- values worked out from the texts alone -------------------------------------------

_NAMES = ("a", "b", "c", "cpus", "memory")
_TEXTS = st.one_of(
    st.integers(-5, 50).map(str),
    st.sampled_from(('"x"', "true", "false", "undefined", "1.5", "error")),
    st.tuples(st.sampled_from(_NAMES), st.sampled_from(("+", "*", "-", "<", "==", "&&")),
              st.sampled_from(_NAMES + ("2", "0", "MY.cpus"))).map(" ".join),
    st.sampled_from(_NAMES),
    st.sampled_from(("ifThenElse(a > 1, b, c)", "time()", "TARGET.cpus", "{1, 2}[0]")),
)


@settings(max_examples=300, deadline=None)
@given(texts=st.dictionaries(st.sampled_from(_NAMES), _TEXTS, max_size=5),
       attr=st.sampled_from(_NAMES),
       expr=st.sampled_from(("Cpus", "a + b", "cpus * 2", "memory", "c")))
def test_what_the_texts_give_is_what_the_ad_gives(texts, attr, expr):
    """An attribute's value worked out from the texts in its reach (AdView.value), and a
    config expression's (SLOT_WEIGHT: AdView.expr_value), equal their values in the ad
    itself, references among attributes and cycles among them included; a text that
    calls a function, subscripts or names another scope is left to the ad."""
    ad = classads.parse_old_ad("\n".join(f"{n} = {t}" for n, t in texts.items()))
    if len(ad) != len(texts):
        return                              # (a text classad2 does not read)
    values = TextValues()
    view = AdView(ad, dict(texts), values)
    want = classads.eval_attr(ad, attr)
    got = view.value(attr)
    assert repr(got) == repr(want)
    assert (repr(AdView(ad, dict(texts), values).expr_value(expr))
            == repr(classads.eval_expr(expr, ad)))
    if any("(" in t or "[" in t or "." in t for t in texts.values()):
        return
    assert values.in_texts(dict(texts), attr) is not NOT_KNOWN


# ---- a shadow loop's kept slot ads ------------------------------------------------------

def test_a_loops_slot_ads_are_kept_as_their_lines_and_parse_to_the_collectors(tmp_path):
    """The slot cache (adapters/slot_cache.py) keeps each slot ad the collector sent as
    its lines, parsed when first read: a pass's ads, fetched whole or kept, are unparsed
    when handed out, and parse to the collector's ads."""
    from negotiator_ext.adapters.slot_cache import SlotCache
    from test_slot_cache import Collector, refresh

    coll = Collector()
    for i in range(6):
        coll.update(f"slot{i}@host", Cpus=i + 1)
    cache = SlotCache()
    first = refresh(cache, coll, tmp_path)
    coll.now += 5
    coll.update("slot2@host", State="Claimed")
    second = refresh(cache, coll, tmp_path)
    assert second.fetched == 1 and second.kept == 5
    for got in (first, second):
        assert all(type(a) is LazyAd and not a.made() for a in got.slots)
    assert second.slots[0] is first.slots[0]            # a kept ad, the same object
    want = [sorted(classads.attribute_texts(ad)) for ad in coll.ads.values()]
    assert [sorted(classads.attribute_texts(ad)) for ad in second.slots] == want


def test_the_cycle_writes_into_an_unparsed_copy_of_a_kept_ad():
    """A kept ad is the loop's (Slot.shared): what the cycle writes goes into a copy,
    which is not parsed for it, and the kept ad stays as it came, unparsed."""
    from negotiator_ext.core.match_list import Slot
    from negotiator_ext.core.negotiator_attrs import own_ad

    made = []
    kept = _lazy("[ Name = \"slot1@h\"; Cpus = 2 ]", made)
    slot = Slot(index=0, ad=kept, name="slot1@h", weight=1.0, usage=None, shared=True)
    mine = own_ad(slot)
    assert mine is not kept and type(mine) is LazyAd and not slot.shared
    mine["RemoteUserPrio"] = 0.5
    assert made == [] and not mine.made()
    assert classads.eval_attr(mine, "RemoteUserPrio") == 0.5
    assert classads.eval_attr(mine, "Cpus") == 2
    assert not kept.made() and "RemoteUserPrio" not in kept


def test_the_digest_reads_an_expression_with_the_texts_it_names():
    """A slot whose Cpus is an expression of its other attributes: the digest's reading
    through the texts gives what the ad gives, without parsing it; a value written into
    the unparsed ad is read in the ad itself."""
    from negotiator_ext.adapters.alignment import _reader
    text = ('[ Name = "slot1@h"; PartitionableSlot = true; TotalCpus = 8; '
            'Cpus = TotalCpus / 2; LastHeardFrom = 1700000000 ]')
    row = tuple((k.lower(), classads.attribute_text(classad2.ClassAd(text), k))
                for k in ("Name", "PartitionableSlot", "TotalCpus", "Cpus", "LastHeardFrom"))
    made = []
    ad = _lazy(text, made)
    value = _reader(ad, row, TextValues())
    assert value("Cpus") == 4 and value("PartitionableSlot") is True
    assert value("LastHeardFrom") == 1700000000
    assert value("EnteredCurrentState") is classads.UNDEFINED
    assert made == []
    ad["Cpus"] = 2
    assert _reader(ad, row, TextValues())("Cpus") == 2 and made
