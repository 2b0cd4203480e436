"""What the bindings keep of each call, for good: each call a shadow loop makes, asked a
thousand times in this process beside a personal pool, with the Python blocks still
allocated (sys.getallocatedblocks) and the resident memory after, per call.

    NEGOTIATOR_EXT_TEST_HTCONDOR=/opt/htcondor python bench/bindings_leak.py [--calls 1000]

htcondor2 25.x keeps one bytes object (about 48 bytes) per name of a query's projection
(`py_list_to_vector_of_strings`: `PyUnicode_AsUTF8String` without `Py_DECREF`): a
Schedd.query or Collector.query with n names keeps n blocks a call, locate and
locateAll six (their `_for_location` list). Where that is no longer so, the loop's
worker renewal (adapters/worker.py, REQUESTS_PER_PROCESS) and its kept locations
(adapters/locations.py) are no longer needed for memory.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from livepool import SKIP_REASON, find_release, start_pool  # noqa: E402

SIX = ["MyAddress", "AddressV1", "CondorVersion", "CondorPlatform", "Name", "Machine"]


def rss_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=1000)
    args = ap.parse_args()
    release = find_release()
    if release is None:
        print(SKIP_REASON)
        return 0
    pool = start_pool(release)
    try:
        os.environ.update(pool.env)
        import htcondor2
        htcondor2.reload_config()
        pool.submit(count=3, group="group_a", user="ann")
        c = htcondor2.Collector(pool.collector)
        loc = c.locateAll(htcondor2.DaemonTypes.Schedd)[0]
        schedd = htcondor2.Schedd(loc)
        calls = {
            "Schedd.query, 2 names": lambda: schedd.query("true", ["ClusterId", "Owner"]),
            "Schedd.query, 2 names as one": lambda: schedd.query("true",
                                                                 ["ClusterId\nOwner"]),
            "Schedd.query, no projection": lambda: schedd.query("true"),
            "Collector.query Startd, 6 names": lambda: c.query(htcondor2.AdTypes.Startd,
                                                               projection=SIX),
            "Collector.query Startd, 6 names as one": lambda: c.query(
                htcondor2.AdTypes.Startd, projection=[" ".join(SIX)]),
            "Collector.query Negotiator, whole": lambda: c.query(htcondor2.AdTypes.Negotiator),
            "Collector.locate Negotiator": lambda: c.locate(htcondor2.DaemonTypes.Negotiator),
            "Collector.locateAll Schedd": lambda: c.locateAll(htcondor2.DaemonTypes.Schedd),
            "new Collector, new Schedd, query without projection": lambda: htcondor2.Schedd(
                htcondor2.Collector(pool.collector).query(htcondor2.AdTypes.Schedd)[0]
            ).query("true"),
        }
        out = {}
        for name, call in calls.items():
            for _ in range(50):
                call()
            gc.collect()
            blocks, rss = sys.getallocatedblocks(), rss_kib()
            for _ in range(args.calls):
                call()
            gc.collect()
            out[name] = {
                "blocks_per_call": round((sys.getallocatedblocks() - blocks) / args.calls, 2),
                "rss_bytes_per_call": round((rss_kib() - rss) * 1024 / args.calls)}
        print(json.dumps({"calls": args.calls, "per_call": out,
                          "load": round(os.getloadavg()[0], 2)}, indent=2))
    finally:
        pool.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
