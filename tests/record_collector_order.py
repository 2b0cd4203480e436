"""Record a collector's answer order beside what condor_status prints for the same ads,
to check adapters/collector_order.py: `python tests/record_collector_order.py --out DIR
--slots 300 --submitters 100` with NEGOTIATOR_EXT_TEST_HTCONDOR (or PATH) naming an
HTCondor install.

It starts a personal pool (tests/livepool.py), advertises `--slots` fake static slot ads
(`--per-host` slots on each fake host, hosts named like a real pool's, e.g.
`wn-a042.cluster.example.org`) and `--submitters` fake submitter ads (at `--schedds`
schedds) with condor_advertise -multiple, in the order `--arrival` says (seeded by
`--seed`), and then writes into DIR:

  slots.ads, submitters.ads   condor_status -long, condor_status -submitters -long
                              (sorted by Machine, then Name)
  order.json                  the collector's answer through the bindings (the slots'
                              Names, the submitters' Name and ScheddName, in walk order),
                              and the order in which each kind was advertised
                              ("inserted": the pool's own slots first, then ours)

`check(DIR)` (and tests/test_collector_order.py) rebuild the order from slots.ads and
submitters.ads and compare it with the collector's.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "bench"))

from livepool import LivePool, find_release, free_port, start_pool  # noqa: E402

SUBMITTER_AD = """MyType = "Submitter"
Name = "{name}"
ScheddName = "{schedd}"
Machine = "{machine}"
MyAddress = "{address}"
ScheddIpAddr = "{address}"
IdleJobs = 0
RunningJobs = 0
HeldJobs = 0
FlockedJobs = 0
WeightedIdleJobs = 0
WeightedRunningJobs = 0
ClassAdLifetime = 86400"""


def host_names(count: int, rng: random.Random) -> list[str]:
    racks = "abcdefghjk"
    names = [f"wn-{racks[i % len(racks)]}{i // len(racks):03d}.cluster.example.org"
             for i in range(count)]
    rng.shuffle(names)
    return names


def user_names(count: int, rng: random.Random) -> list[str]:
    first = ["ana", "ben", "chen", "dara", "eli", "fay", "gus", "hana", "ivo", "jun",
             "kai", "lea", "mo", "nia", "oz", "pia", "raj", "sam", "tia", "uma"]
    groups = ["group_cms", "group_atlas", "group_bio", "group_chem", "group_phys"]
    out = []
    for i in range(count):
        user = f"{first[i % len(first)]}{i // len(first) or ''}"
        group = groups[i % len(groups)] if i % 3 else None
        out.append(f"{group}.{user}@example.org" if group else f"{user}@example.org")
    rng.shuffle(out)
    return out


def slot_ads(pool: LivePool, hosts: list[str], per_host: int, rng: random.Random,
             shuffled: bool) -> list[tuple[str, str]]:
    import bench_real_pool as bench
    template = bench.template(pool, 'SlotType == "Static"')
    address = f"<127.0.0.1:{free_port()}>"
    ads = []
    for h in hosts:
        base = bench.fake_ad(template, h, address)
        for k in range(1, per_host + 1):
            name = f"slot{k}@{h}"
            ad = base.replace(f'Name = "slot1@{h}"', f'Name = "{name}"')
            ads.append((name, ad + f"\nSlotID = {k}"))
    if shuffled:
        rng.shuffle(ads)
    return ads


def advertise(pool: LivePool, command: str, ads: list[str], work: Path, stem: str) -> None:
    chunk = 10_000
    for k in range(0, len(ads), chunk):
        f = work / f"{stem}-{k // chunk}.ads"
        f.write_text("\n\n".join(ads[k:k + chunk]) + "\n")
        args = ["-multiple", "-tcp"]
        if command == "UPDATE_STARTD_AD":
            args.append("-fake-private-ad")
        pool.tool("condor_advertise", *args, command, str(f), timeout=600)
        f.unlink()


def record(out: Path, slots: int, per_host: int, submitters: int, schedds: int,
           seed: int, arrival: str = "daemons", capture: Path | None = None) -> dict:
    """Make the recording in `out` (and, given `capture`, a `negotiator-ext snapshot`
    of the same pool there)."""
    import htcondor2 as htcondor
    release = find_release()
    if release is None:
        raise SystemExit("no HTCondor install")
    rng = random.Random(seed)
    pool = start_pool(release, negotiator_interval=86400)
    try:
        coll = htcondor.Collector(pool.collector)
        own = [ad["Name"] for ad in coll.query(htcondor.AdTypes.Startd, projection=["Name"])]
        work = pool.root / "work"
        work.mkdir()
        hosts = host_names(-(-slots // per_host), rng)
        sads = slot_ads(pool, hosts, per_host, rng, arrival == "shuffled")[:slots]
        address = f"<127.0.0.1:{free_port()}>"
        schedd_names = [f"submit{j}.example.org" for j in range(schedds)]
        subs = []
        for i, user in enumerate(user_names(submitters, rng)):
            schedd = schedd_names[i % schedds]
            subs.append(((user, schedd), SUBMITTER_AD.format(
                name=user, schedd=schedd, machine=schedd, address=address)))
        if arrival == "daemons":
            # as the daemons send them: each schedd its submitters sorted by name (its
            # std::map), one schedd after the other
            subs.sort(key=lambda s: (schedd_names.index(s[0][1]), s[0][0]))
        advertise(pool, "UPDATE_STARTD_AD", [a for _, a in sads], work, "slots")
        advertise(pool, "UPDATE_SUBMITTOR_AD", [a for _, a in subs], work, "submitters")
        want = len(own) + len(sads)
        pool.wait_for(lambda: len(coll.query(htcondor.AdTypes.Startd, projection=["Name"]))
                      >= want, 600, f"{want} slot ads", every=1)
        pool.wait_for(lambda: len(coll.query(htcondor.AdTypes.Submitter,
                                             projection=["Name"])) >= len(subs),
                      120, "the submitter ads", every=1)
        time.sleep(1)
        walked_slots = [ad["Name"] for ad in coll.query(htcondor.AdTypes.Startd,
                                                        projection=["Name"])]
        walked_subs = [[ad["Name"], ad.get("ScheddName")] for ad in coll.query(
            htcondor.AdTypes.Submitter, projection=["Name", "ScheddName"])]
        out.mkdir(parents=True, exist_ok=True)
        (out / "slots.ads").write_text(pool.tool("condor_status", "-long",
                                                 timeout=600).stdout)
        (out / "submitters.ads").write_text(pool.tool("condor_status", "-submitters",
                                                      "-long", timeout=600).stdout)
        # condor_status -sort none keeps the collector's answer order
        unsorted = pool.tool("condor_status", "-sort", "none", "-af", "Name",
                             timeout=600).stdout.split()
        unsorted_long = [ln.split(" = ", 1)[1].strip('"') for ln in pool.tool(
            "condor_status", "-sort", "none", "-long", timeout=600).stdout.splitlines()
            if ln.startswith("Name = ")]
        order = {"seed": seed, "arrival": arrival, "slots": walked_slots,
                 "sort_none": {"af": unsorted == walked_slots,
                               "long": unsorted_long == walked_slots},
                 "submitters": walked_subs,
                 "inserted": {"slots": own + [n for n, _ in sads],
                              "submitters": [list(k) for k, _ in subs]}}
        (out / "order.json").write_text(json.dumps(order, indent=1) + "\n")
        if capture is not None:
            import subprocess
            subprocess.run([sys.executable, "-m", "negotiator_ext", "snapshot", "--pool",
                            pool.collector, "-o", str(capture)], env=pool.env, cwd=ROOT,
                           check=True, capture_output=True, timeout=600)
        return order
    finally:
        pool.stop()
        shutil.rmtree(pool.root, ignore_errors=True)


def check(d: Path) -> dict:
    """The rebuilt order of DIR's condor_status files against the collector's."""
    from negotiator_ext.adapters.adfiles import read_ads
    from negotiator_ext.adapters import collector_order as co
    from negotiator_ext.core import collector_order as table
    order = json.loads((d / "order.json").read_text())
    out = {}
    for kind, stem in (("slots", "slots"), ("submitters", "submitters")):
        ads = read_ads(d / f"{stem}.ads")
        slots = kind == "slots"
        key = co.slot_key if slots else co.submitter_key
        keys = [key(ad) for ad in ads]
        truth = order[kind] if slots else [n + (s or "") for n, s in order[kind]]
        inserted = order["inserted"][kind] if slots else [
            n + s for n, s in order["inserted"][kind]]
        rebuilt = [keys[i] for i in co.collector_walk(ads, slots)]
        where = {k: i for i, k in enumerate(keys)}
        exact = [keys[i] for i in table.walk_order(keys, [where[k] for k in inserted])]
        shared = table.shared_buckets(keys)
        out[kind] = {
            "ads": len(ads), "table_size": table.table_size(len(ads)),
            "sorted_like_condor_status": co.sorted_like_condor_status(ads),
            "with_true_insertion_order_equal": exact == truth,
            "rebuilt_positions_equal": sum(a == b for a, b in zip(rebuilt, truth)),
            "file_positions_equal": sum(a == b for a, b in zip(keys, truth)),
            "sharing_a_bucket": sum(shared),
        }
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--slots", type=int, default=300)
    p.add_argument("--per-host", type=int, default=4)
    p.add_argument("--submitters", type=int, default=100)
    p.add_argument("--schedds", type=int, default=2)
    p.add_argument("--seed", type=int, default=32)
    p.add_argument("--arrival", choices=("daemons", "shuffled"), default="daemons",
                   help="daemons (default): the hosts in a random order, each with its "
                   "slots in slot order, and each schedd's submitters sorted by name, "
                   "as the daemons send them; shuffled: every ad in a random order")
    p.add_argument("--check-only", action="store_true")
    a = p.parse_args(argv)
    if not a.check_only:
        record(a.out, a.slots, a.per_host, a.submitters, a.schedds, a.seed, a.arrival)
    print(json.dumps(check(a.out), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
