"""Two measurements `bench_real_pool.py` makes beside its passes, on the same pool:
the floor no capture can beat (the daemons' own answers through the bindings, issue 34's
goal 4), and `negotiate` on the files admins make with HTCondor's own tools (goal 2)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def snapshots(work: Path) -> list[Path]:
    """The snapshot directories the bench's passes wrote under `work`, oldest first."""
    return sorted(p for p in (work / "state" / "snapshots").iterdir() if p.is_dir())


_FLOOR = """\
import json, sys, time
import htcondor2 as htcondor
pool, projection, constraint, repeat = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3], int(sys.argv[4])
slot_projection = json.loads(sys.argv[5])
coll = htcondor.Collector(pool)
slots, whole, jobs, each = [], [], [], {}
schedds = coll.locateAll(htcondor.DaemonTypes.Schedd)
for _ in range(repeat):
    t = time.perf_counter()
    n = len(coll.query(htcondor.AdTypes.Startd))
    whole.append(time.perf_counter() - t)
    if slot_projection:
        t = time.perf_counter()
        n = len(coll.query(htcondor.AdTypes.Startd, projection=[" ".join(slot_projection)]))
        slots.append(time.perf_counter() - t)
    t = time.perf_counter()
    m = 0
    for ad in schedds:          # one after another, as a --once pass asks them
        u = time.perf_counter()
        k = len(htcondor.Schedd(ad).query(constraint=constraint, projection=projection))
        u = time.perf_counter() - u
        m += k
        name = ad.get("Name", "?")
        if name not in each or u < each[name]["s"]:
            each[name] = {"s": round(u, 2), "jobs": k}
    jobs.append(time.perf_counter() - t)
print(json.dumps({"slots_s": min(slots or whole), "whole_slots_s": min(whole),
                  "jobs_s": min(jobs), "slot_ads": n, "job_ads": m, "jobs_each": each}))
"""


def floor_queries(pool, work: Path, repeat: int = 3) -> dict:
    """Issue 34's goal 4: the floor no capture can beat, in the same run: how long the
    real collector takes to answer the slot query a pass makes (every Startd ad, with
    pass 1's slot projection; `whole_slots_s`: whole, as `negotiator-ext snapshot` and a
    pass with NEGOTIATOR_EXT_WHOLE_SLOT_ADS ask) and the real schedds the job query
    (pass 1's projection and constraint),
    through the bindings, in a fresh process, nothing done with the answers (the
    fastest of `repeat`). `jobs_s` is the schedds asked one after another; `jobs_each`
    each schedd's own answer (its fastest) and job count."""
    from negotiator_ext.adapters.schedd_query import JOB_CONSTRAINT
    snaps = snapshots(work)
    meta = json.loads((snaps[0] / "meta.json").read_text())
    proc = subprocess.run([sys.executable, "-c", _FLOOR, pool.collector,
                           json.dumps(meta.get("job_projection") or []), JOB_CONSTRAINT,
                           str(repeat), json.dumps(meta.get("slot_projection") or [])],
                          env=pool.env, capture_output=True, text=True,
                          cwd=ROOT, timeout=3600)
    if proc.returncode != 0:
        return {"error": proc.stderr[-500:]}
    got = json.loads(proc.stdout)
    got.update({k: round(v, 2) for k, v in got.items() if k.endswith("_s")})
    return got


ADMIN_COMMANDS = (
    # (file, the tool and its arguments): docs/snapshots.md's example, as an admin runs it
    ("slots.ads", ("condor_status", "-long", "-sort", "none")),
    ("jobs.ads", ("condor_q", "-allusers", "-long")),
    ("submitters.ads", ("condor_status", "-submitters", "-long", "-sort", "none")),
    ("accounting.ads", ("condor_userprio", "-l", "-allusers")),
    ("config", ("condor_config_val", "-dump")),
    ("negotiator.ads", ("condor_status", "-negotiator", "-long")),
    ("schedds.ads", ("condor_status", "-schedd", "-long")),
)


def admin_files(pool, work: Path, dest: Path, global_: bool = False) -> dict:
    """Issue 34's goal 2: the pool as an admin captures it with HTCondor's own tools
    (full job ads, every attribute `condor_q -long` prints), written to `dest`; then
    `negotiate --json` on those files, timed in a fresh process, and its matches per
    submitter against `negotiate` on pass 3's snapshot (our capture, taken just before,
    of the same unchanged pool, at the admin files' time). `global_`: the pool has
    several schedds (condor_q -global)."""
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    took = {}
    for name, (tool, *argv) in ADMIN_COMMANDS:
        if global_ and tool == "condor_q":
            argv = [*argv, "-global"]          # every schedd's jobs, not the local one's
        t = time.monotonic()
        out = pool.tool(tool, *argv, timeout=1800).stdout
        took[name] = round(time.monotonic() - t, 2)
        (dest / name).write_text(out)
    (dest / "meta.json").write_text(json.dumps({"ad_order": "collector"}) + "\n")
    sizes = {name: (dest / name).stat().st_size for name, _ in ADMIN_COMMANDS}
    load = os.getloadavg()
    argv = ["/usr/bin/time", "-f", "TIME %e %M %U %S", sys.executable, "-m",
            "negotiator_ext", "negotiate", str(dest), "--json"]
    proc = subprocess.run(argv, env=pool.env, capture_output=True, text=True, cwd=ROOT)
    m = re.search(r"^TIME (\S+) (\d+) (\S+) (\S+)$", proc.stderr, re.M)
    if proc.returncode not in (0, 1) or m is None:
        return {"error": proc.stderr[-500:], "tools_s": took, "bytes": sizes}
    doc = json.loads(proc.stdout)
    ours = Counter(x["submitter"] for x in doc["matches"])
    # at the admin files' own time (the accountant's LastUpdate: condor_userprio -l has
    # no uncharged time, so a later time would move the priorities differently)
    snaps = snapshots(work)
    ref = subprocess.run([sys.executable, "-m", "negotiator_ext", "negotiate",
                          str(snaps[-1]), "--json", "--at", str(doc["cycle"]["time"])],
                         env=pool.env, capture_output=True, text=True, cwd=ROOT)
    theirs = Counter(x["submitter"] for x in json.loads(ref.stdout)["matches"]) \
        if ref.returncode in (0, 1) else None
    return {"dir": str(dest), "tools_s": took, "bytes": sizes, "load": load,
            "wall_s": float(m.group(1)), "cpu_s": round(float(m.group(3))
                                                        + float(m.group(4)), 2),
            "peak_rss_mib": round(int(m.group(2)) / 1024),
            "matches": sum(ours.values()),
            "same_per_submitter_as_capture": None if theirs is None else ours == theirs}
