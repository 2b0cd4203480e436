"""Shadow mode's re-prediction (issue 32's priorities' time): what a comparison leaves
unexplained, against our cycle run again on the compared pass's snapshot at the moment
the real accountant updated the priorities (`shadow._Pass` calls `repredict_pass` once
the pass's own pool is let go).

The re-run's pool is built from what the compared pass built its own from. A loop
(`shadow --interval`, its slot ads kept: NEGOTIATOR_EXT_KEEP_SLOT_ADS) keeps each pass's
inputs to the next (`KeptInputs`): its slot ads are the slot cache's entries of them
(slot_cache.HeldSlots), which no cycle writes into and which the cache empties when a
newer ad of the slot replaces one, the re-run then reading that slot's ad again from the
pass's slots file; its job texts and the rest are shared with what the loop keeps for
its next capture. So keeping them costs little more than the jobs that change (a slot
advertised again costs the 16 bytes of its place in the file), where reading the
snapshot's files again made a second whole pool. Any other compared pass (`shadow
--once`, a replay, a pool of several negotiators but the first, an older pass than the
last) is read from its snapshot's files, as it was written."""

from __future__ import annotations

import dataclasses
import gc
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import InputError

KEPT = "the loop's kept inputs"
FILES = "the snapshot's files"


@dataclass(frozen=True)
class KeptInputs:
    """What one loop pass built its pool from (`Pool.inputs`), for the next pass's
    re-prediction: the pass, its snapshot as read (without its slots when `slots`
    holds them) and the config it read; `inputs` gives them whole."""
    uuid: str
    snapshot: Any                     # adapters.snapshot.Snapshot
    config: Any                       # core.config.NegotiatorConfig
    # the snapshot's slot ads, texts and memos as the loop's slot cache holds them
    # (slot_cache.HeldSlots); None: the snapshot holds them
    slots: Any = None

    def inputs(self) -> tuple:
        """(snapshot, config) as the pass built its pool from them: `build_pool(*kept.
        inputs())` builds it again. The slots the slot cache has let go since are read
        again from the pass's slots file (InputError when it cannot be)."""
        if self.slots is None:
            return self.snapshot, self.config
        ads, texts, memos = self.slots.read()
        return dataclasses.replace(self.snapshot, slots=tuple(ads), slot_texts=texts,
                                   slot_memos=tuple(memos)), self.config


def keep_inputs(p, inputs: tuple | None) -> None:
    """Keep pass `p`'s `inputs` (`Pool.inputs`) in its loop for the next pass of its
    stream, in place of the last pass's. None (the last's let go, nothing kept): the
    pool's slot ads were the pass's own (Pool.shared_slot_ads false), which a cycle
    writes into, so they are no longer what was captured; or nothing is re-predicted
    (NEGOTIATOR_EXT_REPREDICT = False)."""
    kept = p.loop.kept_inputs
    kept.pop(p.pool_name, None)
    if inputs is not None:
        kept[p.pool_name] = held_inputs(p.uuid, *inputs, p.loop.slot_cache)


def held_inputs(uuid: str, snap, config, cache) -> KeptInputs:
    """A pass's inputs kept, their slots as the slot cache `cache` holds them when they
    are its (then the snapshot kept holds none of its slot ads, texts or memos: the
    cache lets go of those it replaces); else the snapshot as it is."""
    held = None
    if cache is not None and snap.slot_texts is not None and snap.slot_memos is not None:
        held = cache.hold(snap.slots, snap.slot_texts.rows, snap.slot_memos,
                          snap.slots_source)
    if held is None:
        return KeptInputs(uuid, snap, config)
    return KeptInputs(uuid, dataclasses.replace(snap, slots=(), slot_texts=None,
                                                slot_memos=None), config, held)


def repredict_pass(p, rec, negotiator: str | None):
    """Pass `p`'s record `rec` with its comparison re-predicted (`repredict`) and the
    re-run's time among its timings. The caller has let its pool go: what of it is held
    in cycles goes only with a collection (the collector is paused for the pass:
    limits.paused_gc)."""
    lap = time.perf_counter()
    gc.collect()
    comparison = repredict(p, rec.comparison, negotiator)
    timings = dict(rec.pass_timings, repredict=round(time.perf_counter() - lap, 3))
    return dataclasses.replace(rec, comparison=comparison, pass_timings=timings)


def repredict(p, comparison, negotiator: str | None):
    """Pass `p`'s comparison's unexplained differences against our cycle re-run on the
    compared pass's snapshot at the time the real accountant updated the priorities
    (`core.disagreement.accounting_time`: the Accounting ads' LastUpdate when this
    pass's are the compared cycle's, else the NegotiatorLog's phase 2 line, else the
    negotiator ad's phase 1 duration, else the cycle's start), as
    `core.compare.repredicted` classes them; its pool built from the inputs the loop
    kept of that pass, else read from the snapshot's files. Not re-run (the comparison
    says why): NEGOTIATOR_EXT_REPREDICT is False, the snapshot is gone or unreadable, or
    that time is not after our capture (the same prediction)."""
    from .core.compare import not_repredicted, repredicted
    from .core.disagreement import accounting_time
    if not p.s.repredict:
        return not_repredicted(comparison, "turned off (NEGOTIATOR_EXT_REPREDICT = False)")
    prev, cycle, real_subs, group_names = p._compared
    snap_dir = prev.get("snapshot_dir")
    captured = int(prev["snapshot_time"])
    at, source = accounting_time(cycle, p.acct_time)
    if at <= captured:
        return not_repredicted(comparison, f"the real accountant's update ({at}, "
                                           f"{source}) is not after our capture "
                                           f"({captured})")
    if not snap_dir or not Path(snap_dir).is_dir():
        return not_repredicted(comparison, f"the compared snapshot {snap_dir} is gone "
                                           "(NEGOTIATOR_EXT_KEEP_SNAPSHOTS)")
    from .cycle import run_cycle
    t0 = time.perf_counter()
    try:
        pool, inputs = compared_pool(p, prev, snap_dir, negotiator)
    except InputError as exc:
        return not_repredicted(comparison, f"the compared snapshot is unreadable: "
                                           f"{exc.one_line()}")
    if pool.snapshot.captured_at is not None and int(pool.snapshot.captured_at) != captured:
        return not_repredicted(comparison, f"the snapshot in {snap_dir} is not the "
                                           "compared one (another capture time)")
    pool, heard_again = heard_before(pool, (p.digest or {}).get("submitters_heard"),
                                     cycle.time)
    try:
        result = run_cycle(pool, now=at)
    except InputError as exc:
        return not_repredicted(comparison, f"our cycle refused the compared snapshot at "
                                           f"{at}: {exc.one_line()}")
    except Exception:       # the pass is recorded all the same, without it
        p.loop.log.exception("re-predicting at phase 2 failed")
        return not_repredicted(comparison, "our cycle failed at that time (an "
                                           "internal error, logged)")
    counts: dict[str, int] = {}
    for m in result.matches:
        counts[m.submitter] = counts.get(m.submitter, 0) + 1
    del pool, result
    seconds = time.perf_counter() - t0
    out = repredicted(comparison, counts, captured=captured, at=at, source=source,
                      seconds=seconds, inputs=inputs,
                      shadow_submitters=p.recorded_submitters(prev["uuid"]),
                      real_submitters=real_subs,
                      group_names=group_names, heard_again=heard_again)
    p.loop.log.info("%s", out.notes[-1])
    return out


def heard_before(pool, heard, start: int | None) -> tuple[Any, int]:
    """`pool` with each submitter ad's LastHeardFrom as this pass's capture has it
    (`heard`: its digest's (Name, ScheddName, LastHeardFrom)), where the schedd sent the
    ad again after the compared capture and before the real cycle began (`start`): the
    negotiator breaks ties among equal priorities by LastHeardFrom (submitterLessThan),
    and the real cycle read the newer ad. An ad sent again after the cycle began shows
    only that time: it is left as captured (what the cycle read is not known). Returns
    the pool (the same one when nothing changed) and how many ads changed."""
    if not heard or start is None or not pool.snapshot.submitters:
        return pool, 0
    from .core import classads
    newer = {(n, s): t for n, s, t in heard}
    ads, changed = [], 0
    for ad in pool.snapshot.submitters:
        t = newer.get((classads.eval_string(ad, "Name"),
                       classads.eval_string(ad, "ScheddName")))
        if t is not None and t <= start:
            old = classads.as_number(classads.eval_attr(ad, "LastHeardFrom"))
            if old is not None and old < t:
                ad = classads.copy_ad(ad)
                ad["LastHeardFrom"] = int(t)
                changed += 1
        ads.append(ad)
    if not changed:
        return pool, 0
    snap = dataclasses.replace(pool.snapshot, submitters=tuple(ads))
    return dataclasses.replace(pool, snapshot=snap), changed


def compared_pool(p, prev: dict, snap_dir: str, negotiator: str | None):
    """The compared pass's pool, and where it came from (KEPT or FILES): built again
    from the inputs the loop kept of that very pass, else read from its snapshot."""
    kept = p.loop.kept_inputs.get(p.pool_name)
    if kept is not None and kept.uuid == prev["uuid"]:
        from .pool import build_pool
        return build_pool(*kept.inputs()), KEPT
    from .pool import load_pool
    return load_pool(snap_dir, p.s.cycle_config, negotiator=negotiator), FILES
