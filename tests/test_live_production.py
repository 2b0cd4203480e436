"""Beside a real HTCondor pool configured like production (tests/livepool.py
ProductionPool): authentication, encryption and integrity required, FS and IDTOKENS,
every authorization level granted to named identities only, and scoped tokens made with
condor_token_create. Each command runs with the least privilege it needs, and with one
level less: that one fails with one line naming the missing level and the daemon that
refused it, and changes nothing in the pool.

| command                          | needs                        | one level less           |
| -------------------------------- | ---------------------------- | ------------------------ |
| snapshot, shadow --once          | READ (reader, -authz READ)   | outsider: no level       |
| the ShadowNegotiator ad          | DAEMON at the collector      | reader: READ             |
|                                  | (shadow, -authz DAEMON)      |                          |
| recommend --apply (leases)       | ADMINISTRATOR at the         | writer: WRITE; reader:   |
|                                  | negotiator (admin)           | READ                     |

These run only where an HTCondor install is found (see tests/livepool.py); elsewhere
they skip with one line saying how to enable them. One pool serves the module.
"""

from __future__ import annotations

import json
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import time

import pytest

from livepool import DOMAIN

pytestmark = pytest.mark.live

# who holds what beside the daemons (their own FS identity holds every level): the
# admin finds the negotiator through the collector, as condor_userprio does, so it reads
# there too; the shadow reads everywhere and advertises its ad at the collector only
GRANTS = {"READ": ["reader", "shadow", "admin", "writer"], "WRITE": ["writer"],
          "COLLECTOR.DAEMON": ["shadow"], "NEGOTIATOR.ADMINISTRATOR": ["admin"]}
# each identity's token, limited to the levels it needs ("outsider": the pool grants it
# nothing, whatever its token says)
TOKENS = {"reader": ["READ"], "shadow": ["DAEMON"], "admin": ["ADMINISTRATOR"],
          "writer": ["WRITE"], "outsider": ["READ"]}
LEASE = 60              # s: the leases recommend --apply makes here
HOUR = 3600
NAME = "negotiator-ext@production-test"


@pytest.fixture(scope="module")
def prod():
    """The module's production-like pool, with a token directory for each identity
    (`prod.token[identity]`) and two jobs of group_a in the queue."""
    from livepool import SKIP_REASON, find_release, start_production_pool
    release = find_release()
    if release is None:
        pytest.skip(SKIP_REASON)
    pool = start_production_pool(release, grants=GRANTS)
    try:
        pool.token = {who: pool.mint(who, *levels) for who, levels in TOKENS.items()}
        pool.submit(count=2, group="group_a", user="alice")
        # the accountant's record of alice: from then on it changes only when told to
        pool.wait_for(lambda: f'Name = "group_a.alice@{DOMAIN}"' in accountant(pool), 60,
                      "the accountant's record of the jobs' submitter")
        yield pool
    finally:
        pool.stop()
        shutil.rmtree(pool.root, ignore_errors=True)


def cli(pool, who, *args, timeout=60, **kw):
    """negotiator-ext run as the identity `who`, with its token alone."""
    return subprocess.run([sys.executable, "-m", "negotiator_ext", *map(str, args)],
                          env=pool.client_env(pool.token[who]), capture_output=True,
                          text=True, timeout=timeout, **kw)


def lines(text: str) -> list[str]:
    return [ln for ln in text.splitlines() if ln.strip()]


def shadow_ads(pool) -> list[str]:
    """The ShadowNegotiator ads' names in the collector (asked by the daemons' user)."""
    return pool.tool("condor_status", "-any", "-constraint", 'MyType == "ShadowNegotiator"',
                     "-af", "Name").stdout.split()


def accountant(pool) -> str:
    """The accountant's records without what changes by itself (usage, priorities, the
    last cycle's figures), as `condor_userprio -l -allusers` prints them."""
    out = pool.tool("condor_userprio", "-l", "-allusers").stdout
    keep = ("Name", "PriorityFactor", "Ceiling", "Floor", "IsAccountingGroup")
    return "\n".join(ln for ln in out.splitlines()
                     if ln.split(" = ", 1)[0].rstrip("0123456789") in keep)


def passes(ledger) -> list[tuple[str, str]]:
    """The ledger's passes, oldest first (none while the loop is still making its
    tables: the file exists a moment before they do)."""
    with sqlite3.connect(ledger) as db:
        if not db.execute("SELECT 1 FROM sqlite_master WHERE name = 'passes'").fetchone():
            return []
        return db.execute("SELECT status, reason FROM passes ORDER BY started_at").fetchall()


# ---- the pool is what it claims to be -------------------------------------------------------

def test_the_pool_grants_each_identity_its_levels_only(prod):
    # condor_ping -table: the decision each daemon takes for each level, by identity
    def decisions(who, daemon, *levels):
        out = subprocess.run(["condor_ping", "-pool", prod.collector, "-type", daemon,
                              "-table", *levels], env=prod.client_env(prod.token[who]),
                             capture_output=True, text=True, timeout=30).stdout
        rows = [ln.split() for ln in out.splitlines()[1:] if ln.strip()]
        return {r[0]: (r[1], r[4], r[5]) for r in rows}
    assert decisions("reader", "collector", "READ", "DAEMON") == {
        "READ": ("IDTOKENS", "ALLOW", f"reader@{DOMAIN}"),
        "DAEMON": ("FAIL", "FAIL", "FAIL")}
    assert decisions("shadow", "collector", "DAEMON")["DAEMON"] == (
        "IDTOKENS", "ALLOW", f"shadow@{DOMAIN}")
    assert decisions("shadow", "schedd", "READ", "DAEMON") == {
        "READ": ("IDTOKENS", "ALLOW", f"shadow@{DOMAIN}"),
        "DAEMON": ("FAIL", "FAIL", "FAIL")}              # DAEMON at the collector only
    assert decisions("admin", "negotiator", "ADMINISTRATOR")["ADMINISTRATOR"][1] == "ALLOW"
    assert decisions("writer", "negotiator", "WRITE", "ADMINISTRATOR") == {
        "WRITE": ("IDTOKENS", "ALLOW", f"writer@{DOMAIN}"),
        "ADMINISTRATOR": ("FAIL", "FAIL", "FAIL")}
    assert decisions("outsider", "collector", "READ")["READ"][1] == "FAIL"
    # encryption and integrity on every session
    out = subprocess.run(["condor_ping", "-pool", prod.collector, "-type", "collector",
                          "-verbose", "READ"], env=prod.client_env(prod.token["reader"]),
                         capture_output=True, text=True, timeout=30).stdout
    assert re.search(r"Encryption:\s+AES", out) and re.search(r"Integrity:\s+AES", out), out


# ---- snapshot and shadow --once: READ ------------------------------------------------------

def test_snapshot_needs_read_only(prod, tmp_path):
    got = cli(prod, "reader", "snapshot", "--pool", prod.collector, "-o", tmp_path / "snap")
    assert got.returncode == 0, got.stderr
    assert got.stderr == ""
    meta = json.loads((tmp_path / "snap" / "meta.json").read_text())
    assert meta["partial"] is False, meta
    assert "2 jobs from 1 schedd(s)" in got.stdout


def test_snapshot_without_read_names_read_and_the_collector(prod, tmp_path):
    before = accountant(prod)
    got = cli(prod, "outsider", "snapshot", "--pool", prod.collector, "-o", tmp_path / "snap")
    assert got.returncode == 2
    assert lines(got.stderr) == [
        f"negotiator-ext: error: {prod.collector}: cannot query the collector for slot ads: "
        "Failed communication with collector. (the collector refuses READ authorization "
        f"to outsider@{DOMAIN})"]
    assert not (tmp_path / "snap").exists()
    assert accountant(prod) == before and shadow_ads(prod) == []


def test_a_shadow_pass_needs_read_only(prod, tmp_path):
    ledger = tmp_path / "ledger.sqlite"
    got = cli(prod, "reader", "shadow", "--once", "--no-advertise", "--pool", prod.collector,
              "--state-dir", tmp_path / "state", "--ledger", ledger)
    assert got.returncode == 0, got.stderr
    assert got.stderr == ""
    assert re.fullmatch(r"pass \w+ complete; our cycle: .*\n", got.stdout), got.stdout
    assert passes(ledger) == [("complete", None)]


def test_a_shadow_pass_without_read_is_recorded_failed_naming_read(prod, tmp_path):
    before = accountant(prod)
    ledger = tmp_path / "ledger.sqlite"
    got = cli(prod, "outsider", "shadow", "--once", "--no-advertise", "--pool", prod.collector,
              "--state-dir", tmp_path / "state", "--ledger", ledger)
    assert got.returncode == 1
    why = (f"no snapshot: {prod.collector}: cannot query the collector for slot ads: Failed "
           "communication with collector. (the collector refuses READ authorization to "
           f"outsider@{DOMAIN})")
    assert lines(got.stderr) == [f"negotiator-ext: ERROR: failed pass: {why}"]
    assert passes(ledger) == [("failed", why)]
    assert accountant(prod) == before and shadow_ads(prod) == []


# ---- the ShadowNegotiator ad: DAEMON at the collector ---------------------------------------

def start_loop(pool, who, tmp_path, interval: str = "1"):
    config = tmp_path / "ext.config"
    config.write_text(f"NEGOTIATOR_EXT_NAME = {NAME}\n")
    return subprocess.Popen(
        [sys.executable, "-m", "negotiator_ext", "shadow", "--pool", pool.collector,
         "--interval", interval, "--state-dir", str(tmp_path / "state"),
         "--ledger", str(tmp_path / "ledger.sqlite"), "--config", str(config)],
        env=pool.client_env(pool.token[who]), stdout=(tmp_path / "out").open("w"),
        stderr=(tmp_path / "err").open("w"))


def stop_loop(loop) -> None:
    loop.send_signal(signal.SIGTERM)
    try:
        loop.wait(timeout=30)
    finally:
        if loop.poll() is None:
            loop.kill()


def test_the_ad_needs_daemon_at_the_collector(prod, tmp_path):
    # (a long interval: the stop comes while the loop waits after its first pass; a
    # stop in the middle of a pass records that pass as stopped, on standard error)
    loop = start_loop(prod, "shadow", tmp_path, interval="60")
    try:
        prod.wait_for(lambda: shadow_ads(prod) == [NAME], 30, "the ShadowNegotiator ad")
    finally:
        stop_loop(loop)
    assert loop.returncode == 0
    assert (tmp_path / "err").read_text() == ""
    assert shadow_ads(prod) == []                   # withdrawn on the clean stop: DAEMON too


def test_a_refused_ad_leaves_the_passes_recorded_and_warns_once(prod, tmp_path):
    before = accountant(prod)
    loop = start_loop(prod, "reader", tmp_path)
    ledger = tmp_path / "ledger.sqlite"
    try:
        prod.wait_for(lambda: ledger.exists() and len(passes(ledger)) >= 3, 30,
                      "three passes of the loop")
    finally:
        stop_loop(loop)
    assert loop.returncode == 0
    recorded = passes(ledger)
    assert len(recorded) >= 3 and set(recorded) == {("complete", None)}
    refused = (f"(the collector refuses DAEMON authorization to reader@{DOMAIN}, which "
               "{} needs)")
    assert lines((tmp_path / "err").read_text()) == [
        # one warning for every pass refused alike
        "negotiator-ext: WARNING: ShadowNegotiator ad not advertised: advertising the "
        f"ShadowNegotiator ad to {prod.collector} failed: Failed to advertise to collector. "
        + refused.format("UPDATE_AD_GENERIC"),
        # the clean stop's withdrawal, refused alike
        f"negotiator-ext: withdrawing the ShadowNegotiator ad from {prod.collector} failed: "
        "Failed to advertise to collector. " + refused.format("INVALIDATE_ADS_GENERIC")]
    assert len(lines((tmp_path / "out").read_text())) == len(recorded)
    assert shadow_ads(prod) == [] and accountant(prod) == before


# ---- recommend --apply: ADMINISTRATOR at the negotiator ------------------------------------

# group_a's pat runs 40% above its fair share and quinn 40% below it, every pass:
# recommend makes pat a factor lease and quinn a floor lease
PAT, QUINN = f"group_a.pat@{DOMAIN}", f"group_a.quinn@{DOMAIN}"


def evidence(tmp_path, pool_name: str):
    """A ledger of 8 complete passes an hour apart, the newest 2 minutes old, and the
    config recommend reads (leases of LEASE s)."""
    from negotiator_ext.adapters.ledger import open_ledger
    from negotiator_ext.core.records import PassRecord, SubmitterObs
    url, now = str(tmp_path / "ledger.sqlite"), time.time()
    with open_ledger(url) as ledger:
        for i in range(8):
            t = now - 120 - HOUR * (7 - i)
            subs = tuple(SubmitterObs(name=name, group="group_a", is_group=False, factor=1.0,
                                      policy_factor=1.0, real_usage=use, real_eup=500.0,
                                      idle_jobs=5, running_jobs=int(use))
                         for name, use in ((PAT, 7.0), (QUINN, 3.0)))
            ledger.record_pass(PassRecord(
                uuid=f"evidence{i}", pool=pool_name, started_at=t, finished_at=t + 2,
                snapshot_time=int(t), status="complete", reason=None, real_cycle_time=int(t),
                real_accountant_time=int(t), shadow_duration=0.1, capture_duration=0.1,
                submitters=subs, comparable=True))
    config = tmp_path / "ext.config"
    config.write_text(f"NEGOTIATOR_EXT_LEASE_DURATION = {LEASE}\n")
    return url, config


def commands(pool) -> list[str]:
    p = f"condor_userprio -pool {pool.collector}"
    return [f"{p} -setfactor {PAT} 1.4 -duration {LEASE}",
            f"{p} -setfloor {QUINN} 5 -duration {LEASE}"]


@pytest.mark.parametrize("who", ["writer", "reader"])
def test_recommend_apply_without_administrator_names_it_and_changes_nothing(prod, tmp_path,
                                                                           who):
    url, config = evidence(tmp_path, prod.collector)
    before = accountant(prod)
    got = cli(prod, who, "recommend", "--apply", "--ledger", url, "--config", config)
    assert got.returncode == 1
    negotiator = prod.tool("condor_status", "-negotiator", "-af", "Name").stdout.strip()
    refused = f"the negotiator {negotiator} refuses ADMINISTRATOR authorization to {who}@{DOMAIN}"
    factor, floor = commands(prod)
    assert lines(got.stderr) == [
        f"failed: {refused} (condor_userprio: failed to start MANAGE_PRIORITY_FACTOR command "
        f"to negotiator): {factor}",
        f"failed: {refused} (condor_userprio: failed to send SET_floor command to "
        f"negotiator): {floor}"]
    assert accountant(prod) == before
    from negotiator_ext.adapters.ledger import open_ledger
    with open_ledger(url) as ledger:      # tried, failed, and tried again next time
        assert [(a.name, a.outcome.split(" (")[0]) for a in ledger.adjustments()] == [
            (PAT, f"failed: {refused}"), (QUINN, f"failed: {refused}")]


def test_recommend_apply_with_administrator_at_the_negotiator(prod, tmp_path):
    url, config = evidence(tmp_path, prod.collector)
    got = cli(prod, "admin", "recommend", "--apply", "--ledger", url, "--config", config)
    assert got.returncode == 0, got.stderr
    assert lines(got.stdout)[-2:] == [f"applied: {c}" for c in commands(prod)]
    records = {}
    for block in re.split(r"\n\s*\n", prod.tool("condor_userprio", "-l", "-allusers").stdout):
        ad = dict(ln.split(" = ", 1) for ln in block.splitlines() if " = " in ln)
        records[ad.get("Name", "").strip('"')] = ad
    assert (records[PAT]["PriorityFactor"], records[PAT]["PriorityFactorPreLeaseValue"]) == (
        "1.4", "1000.0")
    assert (records[QUINN]["Floor"], records[QUINN]["FloorPreLeaseValue"]) == ("5", "0")
