"""Beside a real HTCondor pool (tests/livepool.py): `recommend --apply` against the real
condor_userprio and accountant, the metrics of a running loop, and `--ledger` URL forms.

These run only where an HTCondor install is found (see tests/livepool.py); elsewhere
they skip with one line saying how to enable them.
"""

from __future__ import annotations

import re
import signal
import sqlite3
import subprocess
import sys
import sysconfig
import time
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from livepool import free_port
from negotiator_ext.adapters.ledger import URL_FORMS, open_ledger
from negotiator_ext.core.records import PassRecord, SubmitterObs
from test_ledger import pg_url, postgres_server  # noqa: F401  (fixtures, reused)

pytestmark = pytest.mark.live

DOMAIN = "negotiator-ext.test"       # the pool's UID_DOMAIN
HOUR = 3600
LEASE = 15                           # s: every lease recommend --apply makes here
# what condor_master runs (DAEMON_LIST entry NEGOTIATOR_EXT): the installed console script
DAEMON_SCRIPT = Path(sysconfig.get_path("scripts")) / "negotiator-ext-daemon"


def cli(env, *args, check=True, timeout=120, cwd=None):
    proc = subprocess.run([sys.executable, "-m", "negotiator_ext", *map(str, args)],
                          env=env, capture_output=True, text=True, timeout=timeout, cwd=cwd)
    if check and proc.returncode != 0:
        raise AssertionError(f"negotiator-ext {' '.join(map(str, args))} exited "
                             f"{proc.returncode}: {proc.stderr.strip()}")
    return proc


# ---- the real accountant, read with condor_userprio -l ----------------------------------

# what the accountant changes by itself from one moment to the next (usage, priorities,
# the last cycle's shares and quotas)
VOLATILE = {"Priority", "LastUpdate", "LastUsageTime", "BeginUsageTime", "AccumulatedUsage",
            "WeightedAccumulatedUsage", "ResourcesUsed", "WeightedResourcesUsed",
            "HierWeightedResourcesUsed", "SubmitterLimit", "SubmitterShare", "GroupSortKey",
            "Requested", "EffectiveQuota", "SubtreeQuota", "ConfigQuota"}


def accountant(pool) -> dict[str, dict[str, str]]:
    """`condor_userprio -l -allusers`: record name -> {attribute: value as printed}."""
    out = pool.tool("condor_userprio", "-l", "-allusers").stdout
    records = {}
    for block in re.split(r"\n\s*\n", out.strip()):
        ad = dict(line.split(" = ", 1) for line in block.splitlines() if " = " in line)
        if "Name" in ad:
            records[ad["Name"].strip('"')] = ad
    return records


def policy_state(pool) -> dict[str, dict[str, str]]:
    """The accountant without its time-varying attributes: what an admin sets."""
    return {n: {k: v for k, v in ad.items() if k not in VOLATILE}
            for n, ad in accountant(pool).items()}


# ---- A. recommend --apply against the real condor_userprio ------------------------------

# group -> user -> weighted usage in every fabricated pass (all with idle jobs, equal
# priorities, so each group's fair share is 5 each): in group_a pat is 40% above its
# share (a factor of 1.4) and quinn 40% below it with factor 1 (a floor of 5); in group_b
# ravi is 80% above (beyond RECOMMEND_CEILING_GAP 0.5 while sam starves: a ceiling of 5)
# and sam 80% below (a floor of 5)
USAGE = {"group_a": {"pat": 7.0, "quinn": 3.0}, "group_b": {"ravi": 9.0, "sam": 1.0}}
PAT, QUINN, RAVI, SAM = (f"{g}.{u}@{DOMAIN}" for g, users in USAGE.items() for u in users)


def evidence_ledger(url: str, pool_name: str, now: float) -> None:
    """8 complete passes an hour apart, the newest 2 minutes old (7 h of evidence)."""
    with open_ledger(url) as ledger:
        for i in range(8):
            t = now - 120 - HOUR * (7 - i)
            subs = [SubmitterObs(name=f"{g}.{u}@{DOMAIN}", group=g, is_group=False,
                                 factor=1.0, policy_factor=1.0, real_usage=use, real_eup=500.0,
                                 idle_jobs=5, running_jobs=int(use))
                    for g, users in USAGE.items() for u, use in users.items()]
            ledger.record_pass(PassRecord(
                uuid=f"evidence{i}", pool=pool_name, started_at=t, finished_at=t + 2,
                snapshot_time=int(t), status="complete", reason=None, real_cycle_time=int(t),
                real_accountant_time=int(t), shadow_duration=0.1, capture_duration=0.1,
                submitters=tuple(subs), comparable=True))


def test_recommend_apply_leases_reach_the_real_accountant_once_and_expire(clean_pool,
                                                                         tmp_path):
    pool = clean_pool
    for group, users in USAGE.items():
        for user in users:
            pool.submit(count=1, group=group, user=user)
    # condor_userprio on PATH logs every call, then runs the real one
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "userprio-calls"
    calls.touch()
    wrapper = bin_dir / "condor_userprio"
    wrapper.write_text(f'#!/bin/sh\nprintf "%s\\n" "$*" >> {calls}\n'
                       f'exec {pool.release}/bin/condor_userprio "$@"\n')
    wrapper.chmod(0o755)
    env = dict(pool.env, PATH=f"{bin_dir}:{pool.env['PATH']}")
    config = tmp_path / "ext.conf"
    config.write_text(f"NEGOTIATOR_EXT_LEASE_DURATION = {LEASE}\n"
                      "NEGOTIATOR_EXT_RECOMMEND_CEILING_GAP = 0.5\n")
    url = str(tmp_path / "ledger.sqlite")
    evidence_ledger(url, pool.collector, time.time())
    args = ["recommend", "--ledger", url, "--pool", pool.collector, "--config", config]
    pool.wait_for(lambda: {PAT, QUINN, RAVI, SAM} <= set(accountant(pool)), 60,
                  "the accountant's records of the four submitters")
    defaults = {n: ad for n, ad in accountant(pool).items() if n in (PAT, QUINN, RAVI, SAM)}
    assert {n: (ad["PriorityFactor"], ad["Floor"], ad["Ceiling"])
            for n, ad in defaults.items()} == {n: ("1000.0", "0", "-1")
                                               for n in (PAT, QUINN, RAVI, SAM)}

    # (1) without --apply: the commands are shown, nothing runs, nothing changes
    before = policy_state(pool)
    out = cli(env, *args).stdout
    assert out.startswith(f"8 complete pass(es) of {pool.collector} in the last 24 h; "
                          "4 recommendation(s)\n")
    assert [line.split()[:4] for line in out.splitlines()[3:7]] == [
        ["factor", PAT, "1.00", "1.40"], ["ceiling", RAVI, "none", "5"],
        ["floor", QUINN, "none", "5"], ["floor", SAM, "none", "5"]]
    assert out.endswith("Nothing was changed in the pool (use --apply to make these changes).\n")
    assert calls.read_text() == ""
    assert policy_state(pool) == before
    with open_ledger(url) as ledger:
        assert ledger.adjustments() == []

    # (2) --apply: four leases, made by the real condor_userprio, read back from the
    # real accountant
    p = f"-pool {pool.collector}"
    commands = [f"{p} -setfactor {PAT} 1.4 -duration {LEASE}",
                f"{p} -setceiling {RAVI} 5 -duration {LEASE}",
                f"{p} -setfloor {QUINN} 5 -duration {LEASE}",
                f"{p} -setfloor {SAM} 5 -duration {LEASE}"]
    t0 = int(time.time())
    out = cli(env, *args, "--apply").stdout
    t1 = int(time.time())
    assert [ln for ln in out.splitlines() if ln.startswith(("applied", "skipped", "failed"))
            ] == [f"applied: condor_userprio {c}" for c in commands]
    assert calls.read_text().splitlines() == commands
    with open_ledger(url) as ledger:
        adjs = ledger.adjustments()
    assert [(a.kind, a.name, a.value, a.outcome, a.method) for a in adjs] == [
        ("factor", PAT, 1.4, "applied", "condor_userprio"),
        ("ceiling", RAVI, 5.0, "applied", "condor_userprio"),
        ("floor", QUINN, 5.0, "applied", "condor_userprio"),
        ("floor", SAM, 5.0, "applied", "condor_userprio")]
    applied_at = adjs[0].applied_at
    assert t0 <= applied_at <= t1 and all(a.lease_expires == applied_at + LEASE for a in adjs)
    real = accountant(pool)
    leased = {PAT: "PriorityFactor", RAVI: "Ceiling", QUINN: "Floor", SAM: "Floor"}
    # the value, the value it replaced (restored when the lease ends), and its end
    assert {n: (real[n][attr], real[n][f"{attr}PreLeaseValue"]) for n, attr in leased.items()
            } == {PAT: ("1.4", "1000.0"), RAVI: ("5", "-1"), QUINN: ("5", "0"), SAM: ("5", "0")}
    expiries = {n: int(real[n][f"{attr}LeaseExpiration"]) for n, attr in leased.items()}
    # the negotiator counts -duration from when it got the command
    assert all(t0 + LEASE <= e <= time.time() + LEASE for e in expiries.values()), expiries
    # nothing else was touched: the other attributes of these records, and other records
    untouched = {n: {k: v for k, v in ad.items() if "Lease" not in k}
                 for n, ad in policy_state(pool).items()}
    for n, attr in leased.items():
        untouched[n][attr] = real[n][f"{attr}PreLeaseValue"]
    assert untouched == {n: {k: v for k, v in ad.items() if "Lease" not in k}
                         for n, ad in before.items()}

    # (3) --apply again: every change is in place; no command runs, nothing changes
    state = policy_state(pool)
    out = cli(env, *args, "--apply").stdout
    assert time.time() < min(expiries.values()), "the leases ended before the second run"
    assert [ln for ln in out.splitlines() if ln.startswith(("applied", "skipped", "failed"))
            ] == [f"skipped: {kind} applied at {applied_at}, in effect until "
                  f"{applied_at + LEASE}: condor_userprio {c}"
                  for kind, c in zip(("factor", "ceiling", "floor", "floor"), commands)]
    assert calls.read_text().splitlines() == commands
    assert policy_state(pool) == state
    with open_ledger(url) as ledger:
        assert len(ledger.adjustments()) == 4

    # (4) the leases end by themselves: at the start of the first cycle after their end,
    # the negotiator restores the values they replaced
    time.sleep(max(0.0, max(expiries.values()) + 0.5 - time.time()))
    restored = {n: ("1000.0", "0", "-1") for n in leased}
    for _ in range(3):
        pool.wait_cycle()
        real = accountant(pool)
        now_values = {n: (real[n]["PriorityFactor"], real[n]["Floor"], real[n]["Ceiling"])
                      for n in leased}
        if now_values == restored:
            break
    assert now_values == restored
    assert {n: real[n][f"{attr}LeaseExpiration"] for n, attr in leased.items()} == {
        n: "0" for n in leased}
    log = (pool.log_dir / "NegotiatorLog").read_text(errors="replace")
    for line in (f"Priority-factor lease expired for {PAT}; restoring priority factor to 1000",
                 f"Ceiling lease expired for {RAVI}; restoring ceiling to -1",
                 f"Floor lease expired for {QUINN}; restoring floor to 0",
                 f"Floor lease expired for {SAM}; restoring floor to 0"):
        assert log.count(line) == 1, line


# ---- B. metrics of a running loop -------------------------------------------------------

def scrape(port: int) -> dict[tuple[str, tuple], float]:
    """http://127.0.0.1:port/metrics as {(sample name, sorted labels): value}."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
        text = resp.read().decode()
    return parse_metrics(text)


def parse_metrics(text: str) -> dict[tuple[str, tuple], float]:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for fam in text_string_to_metric_families(text) for s in fam.samples}


def test_metrics_endpoint_and_textfile_follow_the_passes(clean_pool, tmp_path):
    """The HTTP endpoint is the daemon's (negotiator-ext-daemon, as condor_master
    runs it, with NEGOTIATOR_EXT_METRICS_PORT; `shadow --interval` writes the textfile
    only): both run side by side, each with its own state directory, a pass every 2 s."""
    pool = clean_pool
    port = free_port()
    dstate, sstate = tmp_path / "daemon", tmp_path / "shadow"
    config = tmp_path / "daemon.conf"
    config.write_text(f"include : {pool.config_file}\n"
                      f"NEGOTIATOR_EXT_POOL = {pool.collector}\n"
                      f"NEGOTIATOR_EXT_STATE_DIR = {dstate}\n"
                      "NEGOTIATOR_EXT_INTERVAL = 2\n"
                      f"NEGOTIATOR_EXT_METRICS_PORT = {port}\n"
                      "NEGOTIATOR_EXT_ADVERTISE = false\n"
                      f"NEGOTIATOR_EXT_LOG = {tmp_path / 'ShadowLog'}\n")
    procs = {
        "daemon": subprocess.Popen(
            [str(DAEMON_SCRIPT), "-t", "--config", str(config)],
            env=pool.env, stdout=(tmp_path / "daemon.out").open("w"),
            stderr=(tmp_path / "daemon.err").open("w")),
        "shadow": subprocess.Popen(
            [sys.executable, "-m", "negotiator_ext", "shadow", "--pool", pool.collector,
             "--interval", "2", "--state-dir", str(sstate), "--no-advertise"],
            env=pool.env, stdout=(tmp_path / "shadow.out").open("w"),
            stderr=(tmp_path / "shadow.err").open("w"))}
    total = ("negotiator_ext_passes_total", (("status", "complete"),))
    stamp = ("negotiator_ext_pass_timestamp_seconds", ())
    textfile = sstate / "negotiator_ext.prom"

    def served():
        try:
            m = scrape(port)
        except OSError:
            return None
        return m if m.get(total, 0) >= 1 else None

    def written():
        try:
            return parse_metrics(textfile.read_text())
        except FileNotFoundError:
            return None

    try:
        first = pool.wait_for(served, 60, "the daemon's first pass on its endpoint")
        text_first = pool.wait_for(written, 60, "the shadow loop's first textfile")
        later = pool.wait_for(lambda: (lambda m: m if m[total] >= first[total] + 2 else None)(
            scrape(port)), 30, "two more passes on the endpoint")
        text_later = pool.wait_for(lambda: (lambda m: m if m and m[stamp] > text_first[stamp]
                                            else None)(written()), 30,
                                   "the textfile of a later pass")
    finally:
        for p in procs.values():
            p.send_signal(signal.SIGTERM)
        for p in procs.values():
            p.wait(timeout=60)
    for name, p in procs.items():
        assert p.returncode == 0, (tmp_path / f"{name}.err").read_text()[-2000:]

    for m in (first, later):
        assert m[("negotiator_ext_passes_total", (("status", "failed"),))] == 0
        assert m[("negotiator_ext_passes_total", (("status", "partial"),))] == 0
        assert (m[("negotiator_ext_pass_complete", ())], m[("negotiator_ext_pass_failed", ())]
                ) == (1, 0)
    assert later[stamp] > first[stamp]
    assert later[("negotiator_ext_snapshot_timestamp_seconds", ())] > first[
        ("negotiator_ext_snapshot_timestamp_seconds", ())]
    assert later[("negotiator_ext_real_cycle_timestamp_seconds", ())] > 0
    # the daemon writes its own textfile too (the default, in its state directory)
    assert parse_metrics((dstate / "negotiator_ext.prom").read_text())[
        ("negotiator_ext_pass_complete", ())] == 1
    # the textfile holds the newest pass only: no pass counter
    for m in (text_first, text_later):
        assert m[("negotiator_ext_pass_complete", ())] == 1
        assert not any(k[0].startswith("negotiator_ext_passes") for k in m)
    with sqlite3.connect(sstate / "ledger.sqlite") as con:
        (newest,) = con.execute("SELECT max(started_at) FROM passes "
                                "WHERE status = 'complete'").fetchone()
    assert newest >= text_later[stamp]
    log = (tmp_path / "ShadowLog").read_text()
    assert f"serving metrics on http://127.0.0.1:{port}/metrics" in log
    assert len(re.findall(r"(?m) pass [0-9a-f]{8} complete; ", log)) >= later[total]


# ---- B. --ledger URL forms, live -------------------------------------------------------

def _one_pass(pool, state: Path, ledger: str, cwd=None):
    return cli(pool.env, "shadow", "--pool", pool.collector, "--once", "--no-advertise",
               "--state-dir", state, "--ledger", ledger, cwd=cwd, check=False)


def _passes(path: Path) -> list[tuple]:
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return con.execute("SELECT pool, status FROM passes").fetchall()
    finally:
        con.close()


def test_ledger_url_forms_in_a_live_pass(live_pool, tmp_path):
    pool = live_pool
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    forms = {  # --ledger -> the file it must name
        str(tmp_path / "plain" / "shadow.db"): tmp_path / "plain" / "shadow.db",
        "sqlite:///ledgers/relative.sqlite": cwd / "ledgers" / "relative.sqlite",
        f"sqlite:///{tmp_path}/abs/absolute.sqlite": tmp_path / "abs" / "absolute.sqlite"}
    assert list(forms)[2].startswith("sqlite:////")
    for i, (url, path) in enumerate(forms.items()):
        state = tmp_path / f"state{i}"
        proc = _one_pass(pool, state, url, cwd=cwd)
        assert proc.returncode == 0, (url, proc.stderr)
        assert re.fullmatch(r"pass [0-9a-f]{8} complete; .*\n", proc.stdout), proc.stdout
        assert _passes(path) == [(pool.collector, "complete")], url
        assert not (state / "ledger.sqlite").exists()
    assert sorted(str(p.relative_to(cwd)) for p in cwd.rglob("*")
                  if not p.name.endswith(("-wal", "-shm"))) == [
        "ledgers", "ledgers/relative.sqlite"]

    # a form that is none of these: exit 2, one line naming the accepted ones (and no
    # password), no ledger anywhere
    before = set(tmp_path.rglob("*"))
    proc = _one_pass(pool, tmp_path / "state-bad", "mysql://admin:s3cret@db/ledger", cwd=cwd)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr == ("negotiator-ext: error: mysql://admin:***@db/ledger: unsupported "
                           f"ledger URL: use {URL_FORMS}\n")
    assert not [p for p in set(tmp_path.rglob("*")) - before if p.suffix in (".db", ".sqlite")]


def test_postgresql_ledger_in_a_live_pass(live_pool, pg_url, tmp_path):  # noqa: F811
    import psycopg
    pool = live_pool
    proc = _one_pass(pool, tmp_path / "state", pg_url)
    assert proc.returncode == 0, proc.stderr
    assert re.fullmatch(r"pass [0-9a-f]{8} complete; .*\n", proc.stdout), proc.stdout
    with psycopg.connect(pg_url) as conn:
        assert conn.execute("SELECT pool, status FROM passes").fetchall() == [
            (pool.collector, "complete")]
    assert not (tmp_path / "state" / "ledger.sqlite").exists()
