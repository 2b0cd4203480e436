"""Build small snapshot directories from plain dicts, for tests of whole cycles."""

from __future__ import annotations

import json
from pathlib import Path

import classad2

DOMAIN = "test.local"
SCHEDD = "schedd.test.local"
SCHEDD_ADDR = "<10.0.0.1:9618>"


def _ad(d: dict) -> str:
    ad = classad2.ClassAd()
    for k, v in d.items():
        if isinstance(v, Expr):
            ad[k] = classad2.ExprTree(v.text)
        else:
            ad[k] = v
    return ad.printOld()


class Expr:
    def __init__(self, text: str):
        self.text = text


def slot(name: str, **attrs) -> dict:
    n = int(name.split("@")[0].replace("slot", "") or 1) if name.startswith("slot") else 1
    d = {"MyType": "Machine", "Name": name, "Machine": name.split("@")[-1],
         "StartdIpAddr": f"<10.1.0.{n}:9618>", "MyAddress": f"<10.1.0.{n}:9618>",
         "State": "Unclaimed", "Activity": "Idle", "Arch": "X86_64", "OpSys": "LINUX",
         "Cpus": 1, "Memory": 2048, "Disk": 100000, "SlotID": n, "Rank": 0.0,
         "CurrentRank": 0.0,
         "Requirements": Expr("START"), "START": True}
    d.update(attrs)
    return d


def job(cluster: int, proc: int, user: str, group: str | None = None, **attrs) -> dict:
    d = {"MyType": "Job", "ClusterId": cluster, "ProcId": proc, "JobStatus": 1,
         "Owner": user, "User": f"{user}@{DOMAIN}", "QDate": 1000 + cluster, "JobPrio": 0,
         "RequestCpus": 1, "RequestMemory": 128, "RequestDisk": 1024,
         "GlobalJobId": f"{SCHEDD}#{cluster}.{proc}#1000",
         "Requirements": Expr('(TARGET.Arch == "X86_64") && (TARGET.Memory >= RequestMemory)')}
    if group:
        d["AccountingGroup"] = f"{group}.{user}"
    d.update(attrs)
    return d


def submitters_for(jobs: list[dict], running: dict | None = None) -> list[dict]:
    running = running or {}
    counts: dict[str, int] = {}
    for j in jobs:
        if j.get("JobStatus", 1) != 1:
            continue
        name = (f"{j['AccountingGroup']}@{DOMAIN}" if j.get("AccountingGroup")
                else j["User"])
        counts[name] = counts.get(name, 0) + 1
    names = sorted(set(counts) | set(running))
    return [{"MyType": "Submitter", "Name": n, "ScheddName": SCHEDD, "ScheddIpAddr": SCHEDD_ADDR,
             "IdleJobs": counts.get(n, 0), "RunningJobs": running.get(n, 0),
             "WeightedIdleJobs": counts.get(n, 0), "WeightedRunningJobs": running.get(n, 0),
             "LastHeardFrom": 1000 + i} for i, n in enumerate(names)]


def accounting(name: str, priority: float = 500.0, factor: float = 1000.0, **attrs) -> dict:
    """An Accounting ad as the collector has it: `Priority` is the EUP."""
    d = {"MyType": "Accounting", "Name": name, "Priority": priority, "PriorityFactor": factor,
         "IsAccountingGroup": "@" not in name, "ResourcesUsed": 0,
         "WeightedResourcesUsed": 0.0, "AccumulatedUsage": 0.0,
         "WeightedAccumulatedUsage": 0.0, "BeginUsageTime": 0, "LastUsageTime": 0,
         "LastUpdate": 100000}
    d.update(attrs)
    return d


def make_pool(directory: Path, *, slots: list[dict], jobs: list[dict],
              submitters: list[dict] | None = None, accounting_ads: list[dict] | None = None,
              config: str = "", captured_at: int = 100000) -> Path:
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "slots.ads").write_text("\n".join(_ad(s) for s in slots))
    (directory / "jobs.ads").write_text("\n".join(_ad(j) for j in jobs))
    subs = submitters if submitters is not None else submitters_for(jobs)
    (directory / "submitters.ads").write_text("\n".join(_ad(s) for s in subs))
    acc = accounting_ads if accounting_ads is not None else [accounting(s["Name"]) for s in subs]
    (directory / "accounting.ads").write_text("\n".join(_ad(a) for a in acc))
    # the negotiator's own decisions, as in the recorded fixtures: the schedd's per-user
    # match limit off unless the test's config sets it (appended: the test's own lines
    # keep their numbers)
    if "SCHEDD_ENABLE_PER_USER_MATCH_LIMITS" not in config.upper():
        config += "\nSCHEDD_ENABLE_PER_USER_MATCH_LIMITS = False"
    (directory / "config").write_text(config + "\n")
    # the ads in the order the test gives them: that is the collector's order here (a
    # hand-made snapshot's, not rebuilt from the names: adapters/collector_order.py)
    (directory / "meta.json").write_text(json.dumps({"captured_at": captured_at,
                                                     "ad_order": "files"}))
    return directory


def claimed(name: str, job_ad: dict, submitter: str, **attrs) -> dict:
    """A static slot running `job_ad` for `submitter`, as its startd advertises it."""
    d = slot(name, State="Claimed", Activity="Busy", RemoteUser=job_ad["User"],
             RemoteOwner=job_ad["User"], RemoteScheddName=SCHEDD,
             JobId=f"{job_ad['ClusterId']}.{job_ad['ProcId']}")
    if job_ad.get("AccountingGroup"):
        d["AccountingGroup"] = submitter
    d.update(attrs)
    return d


def apply_matches(slots: list[dict], jobs: list[dict], result) -> None:
    """What the schedds and startds make of a cycle's matches on static slots: the
    matched job runs on its slot, the job it preempts goes back to idle. In place."""
    by_name = {s["Name"]: s for s in slots}
    by_id = {f"{j['ClusterId']}.{j['ProcId']}": j for j in jobs}
    for m in result.matches:
        s, j = by_name[m.slot], by_id[m.assigned_job]
        if s.get("JobId"):
            by_id[s["JobId"]]["JobStatus"] = 1
            s.pop("AccountingGroup", None)
        j["JobStatus"] = 2
        s.update(claimed(m.slot, j, m.submitter, RemoteGroup=m.group,
                         RemoteNegotiatingGroup=m.negotiating_group))


def running_by_submitter(jobs: list[dict]) -> dict[str, int]:
    out: dict[str, int] = {}
    for j in jobs:
        if j.get("JobStatus") == 2:
            name = f"{j['AccountingGroup']}@{DOMAIN}" if j.get("AccountingGroup") else j["User"]
            out[name] = out.get(name, 0) + 1
    return out
