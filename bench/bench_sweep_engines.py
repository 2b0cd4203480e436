"""`sweep --engine local` against `--engine htcondor` on a personal pool of real daemons
(tests/livepool.py; needs an HTCondor install, as the live tests do): the same sweep of
three configs of tests/data/forecast/static-A1, each engine twice, wall time of the whole
command. The difference is the HTCondor engine's overhead (submit, negotiation, transfer
in and out, the event log).

    python bench/bench_sweep_engines.py
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

import test_live_sweep as live  # noqa: E402
from livepool import SKIP_REASON, find_release, start_pool  # noqa: E402


def main() -> None:
    release = find_release()
    if release is None:
        sys.exit(SKIP_REASON)
    pool = start_pool(release)
    d = Path(tempfile.mkdtemp(prefix="negext-sweep-"))
    try:
        (d / "in").mkdir()
        shutil.copytree(live.RUN / "snapshot", d / "in" / "snapshot")
        for name in ("history.ads", "queue-end.ads"):
            shutil.copyfile(live.RUN / name, d / "in" / name)
        d.chmod(0o755)
        live.owned(pool, d)
        print("| engine | run | seconds | result |")
        print("|---|---|---|---|")
        for i, engine in enumerate(("local", "htcondor", "local", "htcondor")):
            t0 = time.perf_counter()
            got = live.sweep(pool, d / f"out-{i}", engine)
            wall = time.perf_counter() - t0
            print(f"| {engine} | {i // 2 + 1} | {wall:.1f} | {got.stdout.strip() or got.stderr.strip()} |")
    finally:
        pool.stop()
        shutil.rmtree(pool.root, ignore_errors=True)
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    main()
