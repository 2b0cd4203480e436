"""Synthetic pools of the shape issue 15 measures the real negotiator on: many alike
slots, many submitters in many groups, every submitter over its fair share.

    python bench/synth_groups.py OUT_DIR --slots 100000 --jobs 500000 \\
        --submitters 1000 --groups 100 --autoclusters 2000

Writes a snapshot directory (`load_snapshot` reads it):

  slots.ads        unclaimed static 1-core slots, 8 per node, alike but for their names
                   and addresses (one slot class for every request)
  jobs.ads         one schedd's idle jobs, `jobs / submitters` per submitter, one cluster
                   each; runs of 50 jobs share a shape (RequestMemory), `autoclusters`
                   shapes in all
  submitters.ads   one Submitter ad per submitter (g<NN>.u<N>@bench)
  config           GROUP_NAMES g00.. with equal dynamic quotas and GROUP_ACCEPT_SURPLUS
  meta.json        captured_at

So every submitter's limit binds (fractional shares), and the cycle goes through the
submitter-limit refusals of cached MatchLists that once took most of it. Deterministic:
the same arguments give the same files.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

CAPTURED_AT = 1795265266


def generate(out_dir: str | Path, *, slots: int, jobs: int, submitters: int = 1000,
             groups: int = 100, autoclusters: int = 2000) -> None:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "slots.ads", "w") as f:
        for i in range(slots):
            node = i // 8
            f.write(f'Activity = "Idle"\nArch = "X86_64"\nCpus = 1\nDisk = 1000000\n'
                    f'Machine = "node{node}.bench"\nMemory = 4096\nMyType = "Machine"\n'
                    f'Name = "slot{i % 8 + 1}@node{node}.bench"\nOpSys = "LINUX"\nRank = 0\n'
                    f'Requirements = true\nSlotType = "Static"\n'
                    f'StartdIpAddr = "<127.0.0.1:{9000 + node}>"\nState = "Unclaimed"\n\n')
    per = jobs // submitters
    cluster = 0
    with open(out / "jobs.ads", "w") as f, open(out / "submitters.ads", "w") as g:
        for u in range(submitters):
            group = f"g{u % groups:02d}"
            for k in range(per):
                shape = (u * 7 + k // 50) % autoclusters
                cluster += 1
                f.write(f'AccountingGroup = "{group}.u{u}"\nClusterId = {cluster}\n'
                        f'GlobalJobId = "schedd#{cluster}.0#1"\nJobStatus = 1\nOwner = "u{u}"\n'
                        f'ProcId = 0\nQDate = {CAPTURED_AT - 1000}\nRank = 0\n'
                        f'RequestCpus = 1\nRequestDisk = 1000\nRequestMemory = {128 + shape}\n'
                        'Requirements = (TARGET.Memory >= RequestMemory) && '
                        '(TARGET.OpSys == "LINUX")\n'
                        f'User = "u{u}@bench"\n\n')
            g.write(f'IdleJobs = {per}\nLastHeardFrom = {CAPTURED_AT - 5}\nMyType = "Submitter"\n'
                    f'Name = "{group}.u{u}@bench"\nRunningJobs = 0\n'
                    f'ScheddIpAddr = "<127.0.0.1:5000>"\nScheddName = "schedd"\n\n')
    names = [f"g{i:02d}" for i in range(groups)]
    (out / "config").write_text(
        "GROUP_NAMES = " + ", ".join(names) + "\n"
        + "".join(f"GROUP_QUOTA_DYNAMIC_{n} = {1 / groups:g}\n" for n in names)
        + "GROUP_ACCEPT_SURPLUS = true\n")
    (out / "meta.json").write_text(json.dumps({
        "captured_at": CAPTURED_AT,
        "pool": f"bench/synth_groups.py: {slots} slots, {jobs} jobs, {submitters} submitters, "
                f"{groups} groups, {autoclusters} autoclusters"}) + "\n")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out_dir")
    ap.add_argument("--slots", type=int, default=100_000)
    ap.add_argument("--jobs", type=int, default=500_000)
    ap.add_argument("--submitters", type=int, default=1000)
    ap.add_argument("--groups", type=int, default=100)
    ap.add_argument("--autoclusters", type=int, default=2000)
    a = ap.parse_args(argv)
    generate(a.out_dir, slots=a.slots, jobs=a.jobs, submitters=a.submitters, groups=a.groups,
             autoclusters=a.autoclusters)


if __name__ == "__main__":
    main()
