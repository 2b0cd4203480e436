"""Synthetic pool snapshots for benchmarks: seeded, reproducible, at any size.

    python bench/synth.py OUT_DIR --slots 10000 --jobs 100000 --seed 1

Writes a snapshot directory that `negotiator_ext.adapters.snapshot.load_snapshot` reads:

  slots.ads              static slots (a few shapes, several per node), partitionable slots
                         (a few shapes) and their claimed dynamic slots; about 30% of the
                         cpus claimed by the synthetic submitters
  jobs-<schedd>.ads      condor_q -long of each schedd: the idle jobs, in about
                         `autoclusters` distinct shapes, and one running job per claimed slot
  submitters.ads         one Submitter ad per submitter, counts consistent with the jobs
  accounting.ads         the collector's Accounting ads: one per submitter and per group
  config                 GROUP_NAMES with static and dynamic quotas; all else the default
  meta.json              captured_at and how the snapshot was made

Ads are written as plain `-long` text (old ClassAd syntax), attributes sorted as
`format_ads_long` sorts them; jobs of one (submitter, shape, status) come from one
pre-rendered template, so a million jobs take seconds. Every slot keeps the attributes
that make each real slot ad unique (Name, Machine, addresses, KFlops, timestamps): the
negotiator has to group identical slots despite them.

Everything comes from `random.Random(seed)` and a fixed capture time, so the same
arguments give byte-identical files.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

T0 = 1795265266                      # captured_at of every synthetic snapshot
DOMAIN = "synth"
VERSION = "$CondorVersion: 25.14.0 2026-11-21 PRE-RELEASE-UWCS $"
PLATFORM = "$CondorPlatform: X86_64-Debian_12 $"
ACCOUNTANT_UPDATE = T0 - 13          # the accountant's LastUpdate (as in the fixtures)

# Static nodes: (cpus, memory MB, slots per node); partitionable nodes: (cpus, memory MB).
STATIC_SHAPES = [(1, 2048, 8), (4, 16384, 4), (8, 32768, 2)]
PSLOT_SHAPES = [(16, 65536), (32, 131072), (64, 262144)]
DISK_PER_CPU = 20_000_000            # KiB
CLAIMED_FRACTION = 0.3

# The group tree: (name, "static" share of the pool's cpus | "dynamic" fraction, accept surplus).
GROUPS = [
    ("grp_a", "static", 0.40, True),
    ("grp_a.sub1", "dynamic", 0.5, True),
    ("grp_a.sub2", "dynamic", 0.3, False),
    ("grp_b", "static", 0.25, False),
    ("grp_c", "dynamic", 0.2, True),
]
SUBMITTER_GROUPS = [g[0] for g in GROUPS] + [None]   # None: no accounting group
SUBMITTER_GROUP_WEIGHTS = [1, 3, 2, 3, 2, 2]
PRIO_FACTORS = [1000.0] * 6 + [500.0, 2000.0, 10000.0]

WITHIN_RESOURCE_LIMITS = (
    "MY.Cpus > 0 && TARGET.RequestCpus <= MY.Cpus && MY.Memory > 0 && TARGET.RequestMemory <= MY.Memory"
    " && MY.Disk > 0 && TARGET.RequestDisk <= MY.Disk"
    " && (TARGET.RequestGPUs =?= undefined || MY.GPUs >= TARGET.RequestGPUs)")

# Job shapes are drawn from these (condor_submit's request_* and the user's rank/requirements).
JOB_CPUS = [1, 1, 1, 1, 2, 4, 8]
JOB_MEMORY_PER_CPU = [256, 512, 1000, 1024, 2000, 2048, 3000, 4096]
JOB_DISK = [1024, 100_000, 1_000_000, 2_000_000, 5_000_000, 10_000_000]
JOB_RANKS = [None, None, None, "TARGET.KFlops", "Memory", "TARGET.KFlops / 1000000 + TARGET.Memory / 1024"]
JOB_EXTRA_REQS = [None, None, None, None, "TARGET.Memory > 8000", "TARGET.Cpus >= 4",
                  'TARGET.Machine =!= "node00001.synth"', "TARGET.PartitionableSlot =?= true"]


class Expr(str):
    """A ClassAd expression, written unquoted."""


def _value(v) -> str:
    if isinstance(v, Expr):
        return v
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(v, float):
        return repr(v)
    if isinstance(v, int):
        return str(v)
    if isinstance(v, (list, tuple)):
        return "{ " + ",".join(_value(x) for x in v) + " }"
    raise TypeError(f"no ClassAd form for {v!r}")


def ad_text(attrs: dict) -> str:
    """One ad in `-long` form: `Attr = value` lines sorted by name, then a blank line."""
    keys = sorted(attrs, key=str.lower)
    return "".join(f"{k} = {_value(attrs[k])}\n" for k in keys) + "\n"


def template(attrs: dict) -> str:
    """ad_text with `str.format` fields: a value containing "\\0name\\0" becomes "{name}"."""
    text = ad_text(attrs).replace("{", "{{").replace("}", "}}")
    parts = text.split("\0")
    return "".join(p if i % 2 == 0 else "{" + p + "}" for i, p in enumerate(parts))


def field(name: str) -> str:
    return f"\0{name}\0"


# ---------------------------------------------------------------- submitters and schedds

def make_schedds(n: int) -> list[dict]:
    out = []
    for i in range(1, n + 1):
        host = f"schedd{i}.{DOMAIN}"
        out.append({"name": host, "addr": f"<10.0.0.{i}:9618?addrs=10.0.0.{i}-9618&alias={host}>"})
    return out


def make_submitters(rng: random.Random, n: int, schedds: list[dict]) -> list[dict]:
    out = []
    for i in range(n):
        group = (SUBMITTER_GROUPS[i] if i < len(SUBMITTER_GROUPS)
                 else rng.choices(SUBMITTER_GROUPS, SUBMITTER_GROUP_WEIGHTS)[0])
        user = f"u{i:03d}"
        out.append({
            "user": user,
            "group": group,
            "acct_group": f"{group}.{user}" if group else None,   # the job's AccountingGroup
            "name": f"{group}.{user}@{DOMAIN}" if group else f"{user}@{DOMAIN}",
            "schedd": schedds[i % len(schedds)],
            "activity": rng.paretovariate(1.2),   # how much of the queue / the pool is theirs
            "prio_factor": rng.choice(PRIO_FACTORS),
            "claimed": 0, "claimed_weight": 0.0,
            "idle": 0, "idle_weight": 0.0,
        })
    return out


# ---------------------------------------------------------------- slots

def slot_attrs(node: dict, name: str, slot_id: int, cpus: int, memory: int, disk: int,
               slot_type: str, rng: random.Random) -> dict:
    entered = T0 - rng.randint(60, 86400)
    heard = T0 - rng.randint(0, 300)
    return {
        "Activity": "Idle", "Arch": "X86_64", "CondorLoadAvg": 0.0, "CondorPlatform": PLATFORM,
        "CondorVersion": VERSION, "ConsoleIdle": rng.randint(0, 86400), "Cpus": cpus,
        "CurrentRank": 0.0, "DaemonStartTime": node["start"], "DetectedCpus": node["cpus"],
        "DetectedMemory": node["memory"], "Disk": disk,
        "EnteredCurrentActivity": entered, "EnteredCurrentState": entered,
        "FileSystemDomain": DOMAIN, "GPUs": 0, "HasFileTransfer": True, "IsLocalStartd": False,
        "KeyboardIdle": rng.randint(0, 86400), "KFlops": node["kflops"],
        "LastBenchmark": node["start"], "LastHeardFrom": heard, "LoadAvg": 0.0,
        "Machine": node["host"], "MachineResources": "Cpus Memory Disk Swap GPUs",
        "MaxJobRetirementTime": 0, "Memory": memory, "Mips": node["mips"],
        "MyAddress": node["addr"], "MyCurrentTime": heard, "MyType": "Machine", "Name": name,
        "OpSys": "LINUX", "OpSysAndVer": "Debian12", "OpSysMajorVer": 12, "OpSysName": "Debian",
        "Rank": 0.0, "Requirements": Expr("START && WithinResourceLimits"),
        "RetirementTimeRemaining": 0, "SlotID": slot_id, "SlotType": slot_type,
        "SlotTypeID": {"Static": 1, "Partitionable": 1, "Dynamic": -1}[slot_type],
        "SlotWeight": Expr("Cpus"), "Start": True, "StartdIpAddr": node["addr"],
        "State": "Unclaimed", "TargetType": "Job", "TotalCpus": float(node["cpus"]),
        "TotalDisk": node["cpus"] * DISK_PER_CPU, "TotalGPUs": 0, "TotalLoadAvg": 0.0,
        "TotalMemory": node["memory"], "TotalSlotCpus": cpus, "TotalSlotDisk": float(disk),
        "TotalSlotGPUs": 0, "TotalSlotMemory": memory, "TotalSlots": node["slots"],
        "UidDomain": DOMAIN, "UpdateSequenceNumber": rng.randint(1, 5000),
        "UpdatesTotal": rng.randint(1, 5000), "UpdatesLost": 0,
        "WithinResourceLimits": Expr(WITHIN_RESOURCE_LIMITS),
    }


def claim(attrs: dict, sub: dict, job: dict) -> None:
    """Make a slot claimed by `sub`, running `job` (cluster, proc, start)."""
    gjid = f"{sub['schedd']['name']}#{job['cluster']}.{job['proc']}#{job['qdate']}"
    attrs.update({
        "State": "Claimed", "Activity": "Busy", "RemoteUser": sub["name"], "RemoteOwner": sub["name"],
        "AccountingGroup": sub["name"], "CurrentRank": 0.0, "ClientMachine": sub["schedd"]["name"],
        "GlobalJobId": gjid, "JobId": f"{job['cluster']}.{job['proc']}", "JobStart": job["start"],
        "EnteredCurrentActivity": job["start"], "EnteredCurrentState": job["start"],
        "JobUniverse": 5, "TotalJobRunTime": T0 - job["start"], "TotalClaimRunTime": T0 - job["start"],
        "PublicClaimId": f"{attrs['MyAddress']}#{attrs['DaemonStartTime']}#{attrs['SlotID']}#...",
    })


class PoolState:
    """The state the generator carries between files: slots, claims, jobs per schedd."""

    def __init__(self, rng, submitters, schedds):
        self.rng = rng
        self.submitters = submitters
        self.claim_weights = [s["activity"] for s in submitters]
        self.total_cpus = 0
        self.running: list[tuple[dict, dict]] = []          # (submitter, running job)
        self.next_cluster = {s["name"]: 1 for s in schedds}

    def new_running_job(self, sub: dict, cpus: int, memory: int, slot_name: str) -> dict:
        schedd = sub["schedd"]["name"]
        cluster = self.next_cluster[schedd]
        self.next_cluster[schedd] += 1
        start = T0 - self.rng.randint(60, 2 * 86400)
        job = {"cluster": cluster, "proc": 0, "qdate": start - self.rng.randint(1, 3600),
               "start": start, "cpus": cpus, "memory": memory, "slot": slot_name}
        self.running.append((sub, job))
        sub["claimed"] += 1
        sub["claimed_weight"] += cpus
        return job

    def pick_claimer(self) -> dict:
        return self.rng.choices(self.submitters, self.claim_weights)[0]


def write_slots(path: Path, pool: PoolState, n_slots: int, pslot_fraction: float) -> None:
    rng = pool.rng
    written = 0
    node_no = 0
    with path.open("w") as f:
        while written < n_slots:
            node_no += 1
            host = f"node{node_no:05d}.{DOMAIN}"
            a, b, c = 1 + node_no // 65536, node_no // 256 % 256, node_no % 256
            node = {"host": host, "addr": f"<10.{a}.{b}.{c}:9618?addrs=10.{a}.{b}.{c}-9618&alias={host}>",
                    "kflops": rng.randint(900_000, 3_000_000), "mips": rng.randint(15_000, 45_000),
                    "start": T0 - rng.randint(3600, 30 * 86400)}
            left = n_slots - written
            if rng.random() < pslot_fraction:
                ads = pslot_node(node, pool, left)
            else:
                ads = static_node(node, pool, left)
            for attrs in ads:
                f.write(ad_text(attrs))
            written += len(ads)


def static_node(node: dict, pool: PoolState, room: int) -> list[dict]:
    rng = pool.rng
    cpus, memory, per_node = rng.choice(STATIC_SHAPES)
    n = min(per_node, room)
    node.update(cpus=cpus * per_node, memory=memory * per_node, slots=per_node)
    ads = []
    for k in range(1, n + 1):
        name = f"slot{k}@{node['host']}"
        attrs = slot_attrs(node, name, k, cpus, memory, cpus * DISK_PER_CPU, "Static", rng)
        if rng.random() < CLAIMED_FRACTION:
            sub = pool.pick_claimer()
            claim(attrs, sub, pool.new_running_job(sub, cpus, memory, name))
        pool.total_cpus += cpus
        ads.append(attrs)
    return ads


def pslot_node(node: dict, pool: PoolState, room: int) -> list[dict]:
    """One partitionable slot, and dynamic slots carved from it for about a third of the
    nodes (each running one job of a submitter)."""
    rng = pool.rng
    cpus, memory = rng.choice(PSLOT_SHAPES)
    disk = cpus * DISK_PER_CPU
    node.update(cpus=cpus, memory=memory, slots=1)
    children: list[tuple[int, int, int]] = []
    if rng.random() < CLAIMED_FRACTION * 2:
        target = rng.uniform(0.2, 1.0) * cpus
        used_c = used_m = 0
        while used_c < target and len(children) < room - 1:
            c = rng.choice([1, 1, 2, 4, 8])
            m = c * rng.choice([1024, 2048, 4096])
            if used_c + c > cpus or used_m + m > memory:
                break
            children.append((c, m, c * 1_000_000))
            used_c, used_m = used_c + c, used_m + m
    free_c = cpus - sum(c for c, _, _ in children)
    free_m = memory - sum(m for _, m, _ in children)
    free_d = disk - sum(d for _, _, d in children)
    pname = f"slot1@{node['host']}"
    p = slot_attrs(node, pname, 1, free_c, free_m, free_d, "Partitionable", rng)
    p.update(PartitionableSlot=True, TotalSlotCpus=cpus, TotalSlotMemory=memory,
             TotalSlotDisk=float(disk), NumDynamicSlots=len(children), PslotRollupInformation=True)
    ads = [p]
    child_attrs: dict[str, list] = {k: [] for k in ("ChildName", "ChildCpus", "ChildMemory", "ChildState",
                                                     "ChildActivity", "ChildRemoteUser",
                                                     "ChildAccountingGroup", "ChildCurrentRank")}
    for j, (c, m, d) in enumerate(children, start=1):
        name = f"slot1_{j}@{node['host']}"
        attrs = slot_attrs(node, name, 1, c, m, d, "Dynamic", rng)
        attrs.update(DynamicSlot=True, ParentSlotName=pname)
        sub = pool.pick_claimer()
        claim(attrs, sub, pool.new_running_job(sub, c, m, name))
        ads.append(attrs)
        for key, v in (("ChildName", name), ("ChildCpus", c), ("ChildMemory", m), ("ChildState", "Claimed"),
                       ("ChildActivity", "Busy"), ("ChildRemoteUser", sub["name"]),
                       ("ChildAccountingGroup", sub["name"]), ("ChildCurrentRank", 0.0)):
            child_attrs[key].append(v)
    p.update(child_attrs)
    pool.total_cpus += cpus
    return ads


# ---------------------------------------------------------------- jobs

def make_shapes(rng: random.Random, n: int) -> list[tuple]:
    """n distinct (cpus, memory, disk, rank, extra requirements, transfer files) shapes."""
    shapes: dict[tuple, None] = {}
    limit = 2                        # distinct combinations there are
    for choices in (JOB_CPUS, JOB_MEMORY_PER_CPU, JOB_DISK, JOB_RANKS, JOB_EXTRA_REQS):
        limit *= len(set(choices))
    while len(shapes) < min(n, limit // 2):
        cpus = rng.choice(JOB_CPUS)
        shape = (cpus, cpus * rng.choice(JOB_MEMORY_PER_CPU), rng.choice(JOB_DISK), rng.choice(JOB_RANKS),
                 rng.choice(JOB_EXTRA_REQS), rng.random() < 0.5)
        shapes[shape] = None
    return list(shapes)


def job_requirements(cpus: int, extra: str | None, transfer: bool) -> str:
    """Requirements as condor_submit writes them (the user's own first)."""
    req = ('(TARGET.Arch == "X86_64") && (TARGET.OpSys == "LINUX") && '
           '(versionGE(split(TARGET.CondorVersion)[1],"25.12.0") || (TARGET.Disk >= RequestDisk)) && '
           '(TARGET.Memory >= RequestMemory)')
    if cpus > 1:
        req += " && (TARGET.Cpus >= RequestCpus)"
    req += " && (TARGET.HasFileTransfer)" if transfer else " && (TARGET.FileSystemDomain == MY.FileSystemDomain)"
    return f"({extra}) && {req}" if extra else req


def job_attrs(sub: dict, shape: tuple, status: int) -> dict:
    """A job ad with fields {cluster} {proc} {qdate} {prio} (and {start} {slot} when running)."""
    cpus, memory, disk, rank, extra, transfer = shape
    schedd = sub["schedd"]["name"]
    attrs = {
        "Args": "3600", "ClusterId": Expr(field("cluster")), "Cmd": "/usr/bin/sleep",
        "CommittedTime": 0, "CondorPlatform": PLATFORM, "CondorVersion": VERSION,
        "CumulativeSlotTime": 0, "CurrentHosts": 0 if status == 1 else 1, "DiskUsage": 45,
        "EnteredCurrentStatus": Expr(field("qdate" if status == 1 else "start")),
        "Environment": "", "Err": "_condor_stderr", "ExecutableSize": 45, "ExitBySignal": False,
        "FileSystemDomain": DOMAIN, "GlobalJobId": f"{schedd}#{field('cluster')}.{field('proc')}#{field('qdate')}",
        "ImageSize": 45, "In": "/dev/null", "Iwd": f"/home/{sub['user']}/work", "JobLeaseDuration": 2400,
        "JobNotification": 0, "JobPrio": Expr(field("prio")), "JobStatus": status, "JobUniverse": 5,
        "LeaveJobInQueue": False, "MaxHosts": 1, "MinHosts": 1, "MyType": "Job",
        "NumJobStarts": 0 if status == 1 else 1, "NumRestarts": 0, "Out": "_condor_stdout",
        "Owner": sub["user"], "ProcId": Expr(field("proc")), "QDate": Expr(field("qdate")),
        "Rank": Expr(rank) if rank else 0.0, "RequestCpus": cpus, "RequestDisk": disk,
        "RequestMemory": memory, "Requirements": Expr(job_requirements(cpus, extra, transfer)),
        "ServerTime": T0, "ShouldTransferFiles": "YES" if transfer else "NO",
        "TargetType": "Machine", "TransferIn": False, "TransferInputSizeMB": 0,
        "User": f"{sub['user']}@{DOMAIN}", "WhenToTransferOutput": "ON_EXIT",
    }
    if sub["acct_group"]:
        attrs.update(AccountingGroup=sub["acct_group"], AcctGroup=sub["group"], AcctGroupUser=sub["user"])
    if status == 2:
        attrs.update(JobCurrentStartDate=Expr(field("start")), JobStartDate=Expr(field("start")),
                     RemoteHost=field("slot"), LastRemoteHost=field("slot"), ShadowBday=Expr(field("start")))
    return attrs


def plan_clusters(rng: random.Random, submitters: list[dict], shapes: list[tuple], n_jobs: int) -> list[tuple]:
    """(submitter, shape, procs, JobPrio) per cluster: every shape once, then at random."""
    own: list[list[tuple]] = [[] for _ in submitters]
    for i, shape in enumerate(shapes):
        own[i % len(submitters)].append(shape)
    for i in range(len(submitters)):   # a few shapes shared with other submitters
        own[i].extend(rng.sample(shapes, min(len(shapes), 3)))
    weights = [s["activity"] for s in submitters]
    clusters = []
    left = n_jobs
    for i, shape in enumerate(shapes):
        if left <= 0:
            break
        n = min(left, rng.choice([1, 2, 5, 10]))
        clusters.append((i % len(submitters), shape, n, 0))
        left -= n
    while left > 0:
        k = rng.choices(range(len(submitters)), weights)[0]
        n = min(left, rng.choice([1, 1, 5, 10, 20, 50, 100, 200, 500, 1000]))
        prio = rng.choice([0] * 8 + [-5, 5, 10])
        clusters.append((k, rng.choice(own[k]), n, prio))
        left -= n
    rng.shuffle(clusters)
    return clusters


def write_jobs(directory: Path, pool: PoolState, schedds: list[dict], shapes: list[tuple], n_jobs: int) -> list[str]:
    rng = pool.rng
    clusters = plan_clusters(rng, pool.submitters, shapes, n_jobs)
    qdates = sorted(T0 - rng.randint(60, 7 * 86400) for _ in clusters)
    templates: dict[tuple, str] = {}
    names = []
    for schedd in schedds:
        fname = f"jobs-{schedd['name'].split('.')[0]}.ads"
        names.append(fname)
        with (directory / fname).open("w") as f:
            for sub, job in pool.running:       # the claimed slots' jobs, oldest clusters
                if sub["schedd"] is not schedd:
                    continue
                shape = (job["cpus"], job["memory"], 1_000_000, None, None, False)
                text = template(job_attrs(sub, shape, 2))
                f.write(text.format(cluster=job["cluster"], proc=0, qdate=job["qdate"], prio=0,
                                    start=job["start"], slot=job["slot"]))
            cluster = pool.next_cluster[schedd["name"]]
            for (k, shape, procs, prio), qdate in zip(clusters, qdates):
                sub = pool.submitters[k]
                if sub["schedd"] is not schedd:
                    continue
                key = (k, shape)
                if key not in templates:
                    templates[key] = template(job_attrs(sub, shape, 1))
                t = templates[key]
                for proc in range(procs):
                    f.write(t.format(cluster=cluster, proc=proc, qdate=qdate, prio=prio))
                sub["idle"] += procs
                sub["idle_weight"] += procs * shape[0]
                cluster += 1
    return names


# ---------------------------------------------------------------- submitters, groups, accounting, config

def write_submitters(path: Path, pool: PoolState) -> None:
    with path.open("w") as f:
        for sub in pool.submitters:
            schedd = sub["schedd"]
            heard = T0 - pool.rng.randint(0, 60)
            f.write(ad_text({
                "CondorPlatform": PLATFORM, "CondorVersion": VERSION, "FlockedJobs": 0, "HeldJobs": 0,
                "IdleJobs": sub["idle"], "LastHeardFrom": heard, "LocalJobsIdle": 0, "LocalJobsRunning": 0,
                "Machine": schedd["name"], "MyAddress": schedd["addr"], "MyCurrentTime": heard,
                "MyType": "Submitter", "Name": sub["name"], "RunningJobs": sub["claimed"],
                "ScheddIpAddr": schedd["addr"], "ScheddName": schedd["name"], "SchedulerJobsIdle": 0,
                "SchedulerJobsRunning": 0, "SubmitterTag": "", "UpdateSequenceNumber": pool.rng.randint(1, 500),
                "WantResAd": True, "WeightedIdleJobs": int(sub["idle_weight"]),
                "WeightedRunningJobs": float(sub["claimed_weight"]),
            }))


def group_quotas(total: float) -> dict[str, tuple[float, float, float]]:
    """(ConfigQuota, EffectiveQuota, SubtreeQuota) per group, as the negotiator assigns
    them (rule G4 with ALLOW_QUOTA_OVERSUBSCRIPTION's default, True) from a pool of
    `total` weighted slots."""
    children: dict[str, list] = {"<none>": []}
    for name, kind, share, _ in GROUPS:
        parent = name.rsplit(".", 1)[0] if "." in name else "<none>"
        cfg = round(share * total) if kind == "static" else share
        children.setdefault(parent, []).append((name, kind == "static", cfg))
        children.setdefault(name, [])
    config = {name: cfg for kids in children.values() for name, _, cfg in kids}
    config["<none>"] = 0.0
    out = {}

    def visit(name: str, q: float) -> None:
        kids = children[name]
        ssum = sum(c for _, st, c in kids if st)
        dsum = sum(c for _, st, c in kids if not st)
        da = max(0.0, q - ssum)
        given = {n: float(c) if st else c * da / max(dsum, 1.0) for n, st, c in kids}
        quota = q if name != "<none>" else max(q - sum(given.values()), 0.0)
        out[name] = (float(config[name]), round(quota, 6), round(q, 6))
        for n, q2 in given.items():
            visit(n, q2)

    visit("<none>", float(total))
    return out


def write_accounting(path: Path, pool: PoolState) -> None:
    rng = pool.rng
    ads = []
    own_use: dict[str, float] = {}      # a group record is charged for its own submitters
    own_count: dict[str, int] = {}
    demand: dict[str, float] = {}
    for sub in pool.submitters:
        used = float(sub["claimed_weight"])
        g = sub["group"] or "<none>"
        own_use[g] = own_use.get(g, 0.0) + used
        own_count[g] = own_count.get(g, 0) + sub["claimed"]
        demand[g] = demand.get(g, 0.0) + used + sub["idle_weight"]
        rup = max(0.5, used * rng.uniform(0.3, 1.5))
        begin = T0 - rng.randint(86400, 90 * 86400)
        ads.append({
            "AccountingGroup": sub["group"] or "<none>", "AccumulatedUsage": round(used * rng.uniform(3600, 86400 * 5), 3),
            "BeginUsageTime": begin, "Ceiling": -1, "Floor": 0, "IsAccountingGroup": False,
            "LastUpdate": ACCOUNTANT_UPDATE, "LastUsageTime": ACCOUNTANT_UPDATE if used else begin,
            "Name": sub["name"], "Priority": round(rup * sub["prio_factor"], 6),
            "PriorityFactor": sub["prio_factor"], "ResourcesUsed": sub["claimed"],
            "WeightedAccumulatedUsage": round(used * rng.uniform(3600, 86400 * 5), 3), "WeightedResourcesUsed": used,
        })
    quotas = group_quotas(pool.total_cpus)
    surplus = {name: acc for name, _, _, acc in GROUPS}
    for name in ["<none>"] + [g[0] for g in GROUPS]:
        cfg, eff, subtree = quotas[name]
        used = own_use.get(name, 0.0)
        hier = sum(v for g, v in own_use.items() if g != "<none>" and (g == name or g.startswith(name + ".")))
        ad = {
            "AccountingGroup": name, "Ceiling": -1, "ConfigQuota": cfg, "EffectiveQuota": eff, "Floor": 0,
            "GroupSortKey": 3.4e38 if name == "<none>" else (round(used / eff, 6) if eff > 0 else 3.3e38),
            "IsAccountingGroup": True, "LastUpdate": ACCOUNTANT_UPDATE, "Name": name,
            "Priority": round(max(0.5, used * rng.uniform(0.5, 1.2)) * 1000.0, 6), "PriorityFactor": 1000.0,
            "Requested": demand.get(name, 0.0), "ResourcesUsed": own_count.get(name, 0),
            "SubmitterLimit": 0.0, "SubmitterShare": 0.0, "SubtreeQuota": subtree,
            "SurplusPolicy": "byquota" if name == "<none>" or surplus[name] else "no",
            "WeightedResourcesUsed": used,
        }
        if name != "<none>":
            ad["HierWeightedResourcesUsed"] = hier
        ads.append(ad)
    with path.open("w") as f:
        for ad in ads:
            f.write(ad_text(ad))


def config_text(total_cpus: int) -> str:
    quotas = group_quotas(total_cpus)
    lines = ["# Synthetic pool (bench/synth.py). Everything not set here is the HTCondor default.",
             f"# Pool size: {total_cpus} cpus (SlotWeight = Cpus).",
             "GROUP_NAMES = " + ", ".join(g[0] for g in GROUPS)]
    for name, kind, _, _ in GROUPS:
        cfg = quotas[name][0]
        if kind == "static":
            lines.append(f"GROUP_QUOTA_{name} = {int(cfg)}")
        else:
            lines.append(f"GROUP_QUOTA_DYNAMIC_{name} = {cfg}")
    for name, _, _, accept in GROUPS:
        if accept:
            lines.append(f"GROUP_ACCEPT_SURPLUS_{name} = True")
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- entry points

def generate(out_dir: str | Path, *, slots: int, jobs: int, seed: int = 0, autoclusters: int = 300,
             submitters: int = 32, schedds: int = 3, pslot_fraction: float = 0.3) -> dict:
    """Write a snapshot directory; returns a summary of what was written."""
    if slots < 1 or jobs < 0 or submitters < 1 or (jobs and autoclusters < 1):
        raise ValueError("need slots >= 1, jobs >= 0, submitters >= 1 and, with jobs, autoclusters >= 1")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    schedd_list = make_schedds(max(1, min(schedds, submitters)))
    pool = PoolState(rng, make_submitters(rng, submitters, schedd_list), schedd_list)
    write_slots(out / "slots.ads", pool, slots, pslot_fraction)
    shapes = make_shapes(rng, autoclusters)
    job_files = write_jobs(out, pool, schedd_list, shapes, jobs)
    write_submitters(out / "submitters.ads", pool)
    write_accounting(out / "accounting.ads", pool)
    (out / "config").write_text(config_text(pool.total_cpus))
    summary = {
        "slots": slots, "idle_jobs": jobs, "running_jobs": len(pool.running), "shapes": len(shapes),
        "submitters": submitters, "schedds": len(schedd_list), "pool_cpus": pool.total_cpus,
        "claimed_cpus": sum(s["claimed_weight"] for s in pool.submitters), "job_files": job_files,
    }
    meta = {
        "captured_at": T0,
        "htcondor_version": VERSION,
        "pool": "synthetic pool written by bench/synth.py",
        "generator": {"seed": seed, "slots": slots, "jobs": jobs, "autoclusters": autoclusters,
                      "submitters": submitters, "schedds": len(schedd_list), "pslot_fraction": pslot_fraction},
        "summary": {k: v for k, v in summary.items() if k != "job_files"},
        "notes": "every value comes from random.Random(seed); no real pool",
    }
    (out / "meta.json").write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")
    return summary


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out_dir")
    ap.add_argument("--slots", type=int, default=1000)
    ap.add_argument("--jobs", type=int, default=10_000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--autoclusters", type=int, default=300)
    ap.add_argument("--submitters", type=int, default=32)
    ap.add_argument("--schedds", type=int, default=3)
    ap.add_argument("--pslot-fraction", type=float, default=0.3)
    a = ap.parse_args(argv)
    t = time.perf_counter()
    summary = generate(a.out_dir, slots=a.slots, jobs=a.jobs, seed=a.seed, autoclusters=a.autoclusters,
                       submitters=a.submitters, schedds=a.schedds, pslot_fraction=a.pslot_fraction)
    summary["seconds"] = round(time.perf_counter() - t, 2)
    json.dump(summary, sys.stdout, indent=2)
    print()


if __name__ == "__main__":
    main()
