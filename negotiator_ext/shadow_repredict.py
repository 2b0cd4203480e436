"""Shadow mode's re-prediction (issue 32's priorities' time): what a comparison leaves
unexplained, against our cycle run again on the compared pass's kept snapshot at the
moment the real accountant updated the priorities (`shadow._Pass` calls it once the
pass's own pool is let go)."""

from __future__ import annotations

import time
from pathlib import Path

from .errors import InputError


def repredict(p, comparison, negotiator: str | None):
    """Pass `p`'s comparison's unexplained differences against our cycle re-run on the
    compared pass's kept snapshot at the time the real accountant updated the
    priorities (`core.disagreement.accounting_time`: the Accounting ads' LastUpdate
    when this pass's are the compared cycle's, else the NegotiatorLog's phase 2 line,
    else the negotiator ad's phase 1 duration, else the cycle's start), as
    `core.compare.repredicted` classes them. Not re-run (the comparison says why):
    NEGOTIATOR_EXT_REPREDICT is False, the snapshot is gone or unreadable, or that
    time is not after our capture (the same prediction)."""
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
    from .pool import load_pool
    t0 = time.perf_counter()
    try:
        pool = load_pool(snap_dir, p.s.cycle_config, negotiator=negotiator)
    except InputError as exc:
        return not_repredicted(comparison, f"the compared snapshot is unreadable: "
                                           f"{exc.one_line()}")
    if pool.snapshot.captured_at is not None and int(pool.snapshot.captured_at) != captured:
        return not_repredicted(comparison, f"the snapshot in {snap_dir} is not the "
                                           "compared one (another capture time)")
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
                      seconds=seconds,
                      shadow_submitters=p.recorded_submitters(prev["uuid"]),
                      real_submitters=real_subs,
                      group_names=group_names)
    p.loop.log.info("%s", out.notes[-1])
    return out
