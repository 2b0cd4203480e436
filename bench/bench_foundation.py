"""Benchmark: read a 100,000-slot snapshot and advance its accountant one cycle step.

    python bench/bench_foundation.py [--slots N] [--users U]

Builds a synthetic snapshot in a temporary directory from the recorded fixture's slot ad
(half the slots claimed by U users), then times: reading and validating the snapshot
(slots.ads parse, config through htcondor2, accounting import), and one accountant step
as at the start of a negotiation cycle (`Pool.accountant_at`: lease expiry,
UpdatePriorities, CheckMatches), as `negotiator-ext userprio --at` does it. Not a test:
timing targets live here, never in the test suite.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from negotiator_ext.pool import load_pool  # noqa: E402

FIXTURE = ROOT / "tests" / "data" / "fixtures" / "preempt_priority"


def build(directory: Path, n_slots: int, n_users: int) -> None:
    template = (FIXTURE / "slots.ads").read_text().strip().split("\n\n")[0].splitlines()
    drop = ("Name", "State", "Activity", "RemoteUser", "RemoteOwner", "AccountingGroup",
            "StartdIpAddr", "Machine")
    base = [ln for ln in template if ln.split("=", 1)[0].strip() not in drop]
    out = []
    for i in range(n_slots):
        host = f"node{i // 32:05d}.example.org"
        lines = base + [f'Name = "slot{i % 32 + 1}@{host}"', f'Machine = "{host}"',
                        f'StartdIpAddr = "<10.{i // 65536 % 256}.{i // 256 % 256}.{i % 256}:9618>"']
        if i % 2 == 0:
            user = f"user{i // 2 % n_users}@example.org"
            lines += ['State = "Claimed"', 'Activity = "Busy"', f'RemoteUser = "{user}"',
                      f'AccountingGroup = "{user}"']
        else:
            lines += ['State = "Unclaimed"', 'Activity = "Idle"']
        out.append("\n".join(lines))
    (directory / "slots.ads").write_text("\n\n".join(out) + "\n")
    per_user = (n_slots // 2) / n_users
    acc = []
    for u in range(n_users):
        acc.append("\n".join([f'Name = "user{u}@example.org"', "Priority = 5000.0", "PriorityFactor = 1000.0",
                              f"ResourcesUsed = {int(per_user)}", f"WeightedResourcesUsed = {per_user:.1f}",
                              "LastUpdate = 1795265307", "IsAccountingGroup = false",
                              'AccountingGroup = "<none>"']))
    (directory / "accounting.ads").write_text("\n\n".join(acc) + "\n")
    shutil.copy(FIXTURE / "config", directory / "config")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--slots", type=int, default=100_000)
    ap.add_argument("--users", type=int, default=500)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        build(d, args.slots, args.users)
        t0 = time.perf_counter()
        pool = load_pool(d)
        t1 = time.perf_counter()
        acc = pool.accountant_at(pool.accountant.last_update_time + 60)
        report = acc.report()
        t2 = time.perf_counter()
    print(f"slots={args.slots} users={args.users} claimed={sum(1 for s in pool.slots if s.state == 'Claimed')}")
    print(f"load snapshot (parse + validate + config + import): {t1 - t0:7.2f} s")
    print(f"accountant step (start cycle + report):             {t2 - t1:7.2f} s")
    assert len(report) == args.users


if __name__ == "__main__":
    main()
