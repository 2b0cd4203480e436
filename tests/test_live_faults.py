"""Faults with real daemons (tests/livepool.py): a shadow loop beside a pool whose
collector stops, whose schedd stops answering, whose negotiator restarts, whose group
quotas change under it and whose MatchLog rotates; and a pass that cannot see every real
cycle says so. Real hangs (SIGSTOP): a schedd, the collector and the negotiator during
its configuration read, each bounding the pass and the stop. Under the ledger: a full
file system (a tmpfs, as root), a PostgreSQL server stopped and started again, and two
loops on one ledger."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tmpfs import fill, system, tmpfs

pytestmark = pytest.mark.live


def rows(ledger: Path, sql: str, *args) -> list[sqlite3.Row]:
    con = sqlite3.connect(f"file:{ledger}?mode=ro", uri=True)
    con.row_factory = sqlite3.Row
    try:
        return con.execute(sql, args).fetchall()
    finally:
        con.close()


class Loop:
    """`negotiator-ext shadow --interval 2` beside the pool, its output in files."""

    def __init__(self, pool, tmp_path: Path, *extra: str, logs: bool = True,
                 advertise: bool = False):
        self.pool = pool
        self.dir = tmp_path
        self.ledger = tmp_path / "state" / "ledger.sqlite"
        argv = [sys.executable, "-m", "negotiator_ext", "shadow", "--pool", pool.collector,
                "--interval", "2", "--timeout", "3", "--state-dir", str(tmp_path / "state"),
                *([] if advertise else ["--no-advertise"]), *extra]
        if logs:
            argv += ["--negotiator-log", str(pool.log_dir / "NegotiatorLog"),
                     "--matchlog", str(pool.log_dir / "MatchLog")]
        self.proc = subprocess.Popen(argv, env=pool.env, stdout=(tmp_path / "out").open("w"),
                                     stderr=(tmp_path / "err").open("w"))

    def passes(self) -> list[sqlite3.Row]:
        if not self.ledger.exists():
            return []
        try:
            return rows(self.ledger, "SELECT * FROM passes ORDER BY started_at")
        except sqlite3.OperationalError as e:
            # The loop has created the file but not yet its schema (an empty file
            # between sqlite's open and the first transaction): no passes yet.
            if "no such table" in str(e):
                return []
            raise

    def wait_passes(self, cond, timeout=60, what="passes"):
        return self.pool.wait_for(lambda: cond(self.passes()), timeout, what)

    def new_passes(self, n: int, timeout=60) -> list[sqlite3.Row]:
        """Wait for `n` passes after those recorded now; return them."""
        seen = len(self.passes())
        got = self.wait_passes(lambda p: len(p) >= seen + n and p, timeout, f"{n} more passes")
        return got[seen:]

    def stop(self) -> int:
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=60)

    def err(self) -> str:
        return (self.dir / "err").read_text()


@pytest.fixture
def loop(clean_pool, tmp_path):
    loops = []

    def start(*extra, logs=True, advertise=False):
        lp = Loop(clean_pool, tmp_path, *extra, logs=logs, advertise=advertise)
        loops.append(lp)
        lp.wait_passes(lambda p: p, 120, "the first pass")
        return lp
    yield start
    for lp in loops:
        if lp.proc.poll() is None:
            lp.stop()


def test_collector_stopped_mid_loop_gives_failed_passes_then_resumes(clean_pool, loop):
    pool = clean_pool
    lp = loop()
    lp.new_passes(1)
    pool.master_tool("condor_off", "-daemon", "COLLECTOR")
    try:
        failed = lp.wait_passes(lambda p: [r for r in p if r["status"] == "failed"], 30,
                                "a failed pass")
        assert "no snapshot: " in failed[0]["reason"]
        assert "cannot query the collector" in failed[0]["reason"]
        assert lp.proc.poll() is None           # the loop goes on
    finally:
        pool.master_tool("condor_on", "-daemon", "COLLECTOR")
    # the daemons advertise again within UPDATE_INTERVAL; the loop resumes by itself
    # a new collector knows no negotiator until the negotiator's next update (every
    # NEGOTIATOR_UPDATE_INTERVAL): the passes take the negotiator's config from the
    # previous snapshot meanwhile, and are complete
    # (a pass that begins as the collector comes up may find it not yet listening when
    # it locates the negotiator, and listening when it queries the slots: its warning
    # says so, and it too takes the earlier config)
    def metas(passes):
        return [json.loads((Path(r["snapshot_dir"]) / "meta.json").read_text())
                for r in passes[passes.index(failed[-1]) + 1:] if r["status"] == "complete"]

    lp.wait_passes(lambda p: any("the collector knows no negotiator" in m["warnings"][0]
                                 for m in metas(p)), 60,
                   "a complete pass after the collector came back")
    for meta in metas(lp.passes()):
        assert meta["config_source"].startswith("an earlier snapshot: ")
        assert ("the collector knows no negotiator" in meta["warnings"][0]
                or "cannot locate the negotiator" in meta["warnings"][0])
        assert meta["errors"] == {} and meta["partial"] is False
    assert lp.stop() == 0
    # for the other tests: a reconfig makes the negotiator advertise itself again
    pool.master_tool("condor_reconfig")
    pool.wait_for(lambda: pool.tool("condor_status", "-negotiator", "-af", "Name",
                                    check=False).stdout.strip(), 60, "the negotiator's ad")


def test_schedd_not_answering_gives_partial_passes_naming_it(clean_pool, loop):
    pool = clean_pool
    pool.submit(count=2, group="group_a", user="kim")
    lp = loop()
    pid = pool.daemon_pid("schedd")
    os.kill(pid, signal.SIGSTOP)                # advertised, but silent
    try:
        partial = lp.wait_passes(lambda p: [r for r in p if r["status"] == "partial"], 60,
                                 "a partial pass")
    finally:
        os.kill(pid, signal.SIGCONT)
    reason = partial[0]["reason"]
    # the bindings wait 20 s a try on a schedd that takes the connection but never
    # answers, whatever the config says: the loop's --timeout 3 bounds it
    assert reason.startswith("partial snapshot (did not answer: vm: did not answer within "
                             "3 s (its connection, security handshake and answer"), reason
    took = partial[0]["finished_at"] - partial[0]["started_at"]
    assert took < 12, took
    assert partial[0]["comparable"] == 0       # never compared, never recommended from
    lp.wait_passes(lambda p: p[-1]["status"] == "complete" and p, 60, "a complete pass again")
    assert lp.stop() == 0


def test_a_stop_signal_ends_a_pass_waiting_on_a_frozen_schedd(clean_pool, loop):
    """SIGTERM while a pass waits on a schedd that never answers: the loop ends within
    seconds, the pass in flight recorded as failed (stopped), the earlier ones kept."""
    pool = clean_pool
    pool.submit(count=2, group="group_a", user="kim")
    lp = loop("--timeout", "60")
    before = len(lp.wait_passes(lambda p: len(p) >= 2 and p, 60, "two passes"))
    pid = pool.daemon_pid("schedd")
    os.kill(pid, signal.SIGSTOP)
    try:
        time.sleep(4)                           # a pass is now waiting on it
        t = time.monotonic()
        assert lp.stop() == 0
        stopped_in = time.monotonic() - t
    finally:
        os.kill(pid, signal.SIGCONT)
    assert stopped_in < 5, stopped_in
    passes = lp.passes()
    assert len(passes) >= before + 1
    assert all(p["status"] == "complete" for p in passes[:before])
    last = passes[-1]
    assert last["status"] == "failed" and "stopped (a stop signal)" in last["reason"], dict(last)


def test_negotiator_restart_makes_no_false_comparison(clean_pool, loop):
    pool = clean_pool
    # the negotiator ad as the only source: sent after every cycle
    pool.reconfig("ad.config", "NEGOTIATOR_UPDATE_AFTER_CYCLE = True\n")
    lp = loop(logs=False)
    pool.submit(count=3, group="group_a", user="lena")
    pool.wait_cycle()
    pool.tool("condor_restart", "-daemon", "NEGOTIATOR")
    pool.wait_cycle(timeout=60)             # the restarted negotiator's first cycle
    pool.submit(count=2, group="group_b", user="mona")
    for _ in range(2):
        pool.wait_cycle(timeout=60)
    time.sleep(5)
    assert lp.stop() == 0
    comps = rows(lp.ledger, "SELECT c.*, p.snapshot_time FROM comparisons c "
                            "JOIN passes p ON p.uuid = c.shadow_pass")
    real = rows(lp.ledger, "SELECT time, matches FROM real_cycles ORDER BY time")
    assert len(real) >= 3
    # mona's cycle, after the restart, was compared; lena's, right before it, only if a
    # pass read the old negotiator's ad in the moment between (the new one's history
    # starts empty): compared or unseen, never compared with the wrong pass
    compared = sorted(c["real_matches"] for c in comps
                      if c["source"] == "negotiator-ad" and c["real_matches"])
    assert compared in ([2], [2, 3]), compared
    for c in comps:
        if c["source"] == "gap":
            continue
        # a pass is only ever compared with a real cycle that began after its snapshot
        assert c["real_cycle_time"] >= c["snapshot_time"]
        if c["real_matches"]:
            assert c["real_matches"] == c["shadow_matches"], dict(c)
    # each real cycle recorded once, however many passes saw it
    assert len({r["time"] for r in real}) == len(real)


def test_group_quota_change_is_visible_in_the_next_pass(clean_pool, loop):
    pool = clean_pool
    lp = loop()
    before = lp.new_passes(1)[0]
    quota = {r["name"]: r for r in rows(lp.ledger, 'SELECT * FROM "groups" WHERE pass_uuid = ?',
                                        before["uuid"])}
    assert quota["group_a"]["config_quota"] == 4
    pool.reconfig("quota.config", "GROUP_QUOTA_group_a = 2\n", wait=1)
    changed = lp.wait_passes(lambda p: [r for r in p if r["started_at"] > before["started_at"]
                                        and _config_quota(lp.ledger, r["uuid"]) == 2],
                             30, "a pass with the new quota")
    snap = Path(changed[0]["snapshot_dir"])
    assert "GROUP_QUOTA_group_a = 2" in (snap / "config").read_text()
    assert lp.stop() == 0


def _config_quota(ledger, uuid):
    got = rows(ledger, 'SELECT config_quota FROM "groups" WHERE pass_uuid = ? AND name = ?',
               uuid, "group_a")
    return got[0]["config_quota"] if got else None


def test_matchlog_rotation_keeps_the_comparison_whole(clean_pool, loop):
    pool = clean_pool
    # a MatchLog of at most ~1 kB: a cycle of a few matches rotates it to MatchLog.old
    pool.reconfig("matchlog.config", "MAX_NEGOTIATOR_MATCH_LOG = 1000\n")
    lp = loop()
    pool.wait_cycle()
    pool.submit(count=5, group="group_a", user="nina")
    pool.wait_cycle()
    pool.wait_for(lambda: (pool.log_dir / "MatchLog.old").exists(), 20, "a rotated MatchLog")
    time.sleep(5)                            # a pass after that cycle compares it
    assert lp.stop() == 0
    comps = [c for c in rows(lp.ledger, "SELECT * FROM comparisons WHERE source = 'matchlog'")
             if c["real_matches"]]
    assert comps, "no comparison of the cycle with matches"
    c = comps[-1]
    assert c["real_matches"] == c["shadow_matches"] == 5
    assert c["count_agreement"] == 1.0


def test_a_pass_without_the_logs_names_the_knobs_that_show_every_cycle(clean_pool, tmp_path):
    pool = clean_pool
    out = subprocess.run(
        [sys.executable, "-m", "negotiator_ext", "shadow", "--pool", pool.collector, "--once",
         "--state-dir", str(tmp_path / "state"), "--no-advertise", "--json"],
        env=pool.env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    rec = json.loads(out.stdout)
    (warning,) = [w for w in rec["warnings"] if "NEGOTIATOR_UPDATE_INTERVAL" in w]
    assert "every 300 s" in warning and "keeps 3 cycles" in warning
    assert "NEGOTIATOR_EXT_NEGOTIATOR_LOG" in warning
    assert "NEGOTIATOR_UPDATE_AFTER_CYCLE = True" in warning


# ---------------------------------------------------------------- frozen daemons (SIGSTOP)

@contextlib.contextmanager
def frozen(pool, daemon: str):
    """The pool's `daemon` stopped with SIGSTOP (it keeps its port: connections are
    taken, never answered), and continued afterwards."""
    pid = pool.daemon_pid(daemon)
    os.kill(pid, signal.SIGSTOP)
    try:
        yield pid
    finally:
        os.kill(pid, signal.SIGCONT)


def _stop_config(tmp_path: Path, seconds: int) -> str:
    conf = tmp_path / "stop.conf"
    conf.write_text(f"NEGOTIATOR_EXT_STOP_TIMEOUT = {seconds}\n")
    return str(conf)


def test_a_frozen_collector_costs_a_pass_one_timeout(clean_pool, tmp_path):
    """Every collector call of a capture waited the whole --timeout (five in a row: 25 s
    at --timeout 5); now the first that times out is the last one made."""
    pool = clean_pool
    with frozen(pool, "collector"):
        t = time.monotonic()
        out = subprocess.run(
            [sys.executable, "-m", "negotiator_ext", "shadow", "--pool", pool.collector,
             "--once", "--timeout", "4", "--state-dir", str(tmp_path / "state"),
             "--no-advertise", "--json"],
            env=pool.env, capture_output=True, text=True, timeout=120)
        took = time.monotonic() - t
    assert out.returncode == 1, out.stderr
    rec = json.loads(out.stdout)
    assert rec["status"] == "failed"
    assert rec["reason"] == (f"no snapshot: {pool.collector}: cannot query the collector for "
                             f"slot ads: the collector {pool.collector} did not answer within "
                             "4 s (--timeout); not asked again in this pass")
    assert took < 9, took


def test_a_stop_signal_beside_a_frozen_collector_is_bounded(clean_pool, loop, tmp_path):
    """A loop advertising its ad, the collector frozen under it: each collector call
    waits at most NEGOTIATOR_EXT_STOP_TIMEOUT (3 s here, below --timeout 30), and the
    pass fails after the first; then SIGTERM: the ad (the bindings wait 20 s to send or
    withdraw it) is not withdrawn from a collector that did not answer, the earlier
    passes kept. (A collector that freezes between a pass and the ad: the sending and
    the withdrawal are bounded, test_collector_gate.)"""
    pool = clean_pool
    name = "negotiator-ext@frozen-collector-test"
    conf = _stop_config(tmp_path, 3)
    with open(conf, "a") as f:
        f.write(f"NEGOTIATOR_EXT_NAME = {name}\n")
    lp = loop("--timeout", "30", "--config", conf, advertise=True)
    before = len(lp.passes())
    try:
        with frozen(pool, "collector"):
            # a pass fails on it; then the loop waits on it again (the failed pass's ad,
            # or the next pass's first call)
            failed = lp.wait_passes(lambda p: [r for r in p[before:] if r["status"] == "failed"],
                                    30, "a failed pass")
            time.sleep(1)
            t = time.monotonic()
            assert lp.stop() == 0
            stopped_in = time.monotonic() - t
    finally:
        # its ad, not withdrawn, would live out its lifetime beside the other tests'
        query = tmp_path / "withdraw.ad"
        query.write_text(f'MyType = "Query"\nTargetType = "ShadowNegotiator"\n'
                         f'Name = "{name}"\nRequirements = TARGET.Name == "{name}"\n')
        pool.tool("condor_advertise", "INVALIDATE_ADS_GENERIC", str(query))
    # at most: the collector call in flight (3 s) and the withdrawal (3 s)
    assert stopped_in < 8, stopped_in
    passes = lp.passes()
    assert all(p["status"] == "complete" for p in passes[:before])
    assert all(p["status"] == "failed" for p in passes[before:])
    last = failed[0]
    took = last["finished_at"] - last["started_at"]
    assert took < 5, took                       # one call waited out, not five
    assert last["reason"].endswith(f"the collector {pool.collector} did not answer within 3 s "
                                   "(NEGOTIATOR_EXT_STOP_TIMEOUT: a stop waits for the call "
                                   "in flight); not asked again in this pass"), last["reason"]
    err = lp.err()
    assert "Traceback" not in err
    # the collector did not answer the last call made to it: the ad is neither sent nor
    # withdrawn (that would only wait again); it lapses
    assert (f"the ShadowNegotiator ad not withdrawn from {pool.collector}: the collector did "
            "not answer the last pass; the ad lapses after its ClassAdLifetime" in err), err


def test_a_frozen_negotiator_during_the_config_read(clean_pool, tmp_path):
    """The negotiator frozen while a pass reads its configuration (a child process,
    killed at --timeout): a `--once` pass is partial within the timeout, naming it; a
    loop's SIGTERM abandons the read at once, the pass recorded."""
    pool = clean_pool
    with frozen(pool, "negotiator"):
        t = time.monotonic()
        out = subprocess.run(
            [sys.executable, "-m", "negotiator_ext", "shadow", "--pool", pool.collector,
             "--once", "--timeout", "3", "--state-dir", str(tmp_path / "once"),
             "--no-advertise", "--json"],
            env=pool.env, capture_output=True, text=True, timeout=120)
        took = time.monotonic() - t
        assert out.returncode == 0, out.stderr
        rec = json.loads(out.stdout)
        assert rec["status"] == "partial"
        assert "did not answer a configuration query within 3 s" in rec["reason"]
        assert took < 10, took                  # the read alone: 3 s
        # a loop's first pass reads it too (later ones keep it while the negotiator's
        # ad says it has not read its files again)
        lp = Loop(pool, tmp_path, "--timeout", "30")
        # its read in flight: the child reading the negotiator's config started (a fixed
        # wait after the capture began was not always enough on a loaded machine: the
        # stop then came before the read, and the pass was recorded failed)
        pool.wait_for(lambda: pool.negotiator_config_readers(lp.proc.pid), 60,
                      "the loop's read of the negotiator's configuration")
        time.sleep(1)                           # well into it (no answer will come)
        t = time.monotonic()
        assert lp.stop() == 0
        stopped_in = time.monotonic() - t
    assert stopped_in < 5, stopped_in          # the read would go on to --timeout 30
    (only,) = lp.passes()
    assert only["status"] == "partial"
    assert "reading the configuration of the negotiator" in only["reason"]
    assert "was abandoned: negotiator-ext is stopping" in only["reason"]


# ---------------------------------------------------------------- a full file system

@pytest.fixture
def small_fs(tmp_path):
    """tmp_path/state on a tmpfs of 8 MiB (root only; skips, saying why, elsewhere)."""
    with tmpfs(tmp_path / "state", "8m") as d:
        yield d


def test_a_full_file_system_under_the_ledger_and_snapshots(clean_pool, small_fs, tmp_path):
    """The state directory (ledger, snapshots, lock) fills up mid-loop: the passes fail,
    one warning says why (not one a pass), the loop goes on, the ledger stays whole, and
    once there is room again the passes are recorded again."""
    pool = clean_pool
    lp = Loop(pool, tmp_path)
    try:
        lp.wait_passes(lambda p: p, 60, "a pass")
        filler = fill(small_fs)
        pool.wait_for(lambda: "is full" in lp.err(), 30, "the loop to find the disk full")
        time.sleep(3)                               # more passes, full
        assert lp.proc.poll() is None               # the loop goes on
        err = lp.err().splitlines()
        # each pass fails, saying why in one line; that it is not recorded is said once
        (full,) = [ln for ln in err if "is full" in ln]
        assert re.fullmatch(rf"negotiator-ext: WARNING: pass not recorded: {lp.ledger}: is "
                            r"full: no space left on the file system that holds it \(\d+ KiB "
                            r"free\); pass [0-9a-f]{32} not recorded; trying again every 2 s",
                            full), full
        # (the pass recorded as the disk filled may find no room for its metrics file)
        metrics = [ln for ln in err if "negotiator_ext.prom not written" in ln]
        assert metrics in ([], [f"negotiator-ext: WARNING: metrics file {small_fs}/"
                                "negotiator_ext.prom not written: No space left on device"])
        failed = [ln for ln in err if ln != full and ln not in metrics]
        assert len(failed) >= 2, err
        for ln in failed:
            assert re.fullmatch(rf"negotiator-ext: ERROR: failed pass: no snapshot: "
                                rf"{small_fs}/snapshots/\d+(-[0-9a-f]+)?: cannot write the "
                                "snapshot: No space left on device", ln), ln
        filler.unlink()
        lp.wait_passes(lambda p: "written again" in lp.err() and p, 30,
                       "a pass recorded with room again")
        n = len(lp.passes())
        lp.wait_passes(lambda p: len(p) >= n + 1 and p, 30, "one more pass")
    finally:
        assert lp.stop() == 0
    assert "Traceback" not in lp.err()
    assert rows(lp.ledger, "PRAGMA integrity_check")[0][0] == "ok"
    from negotiator_ext.adapters.ledger import open_ledger
    with open_ledger(str(lp.ledger), read_only=True) as led:
        assert led.verify() == []
        passes = led.passes()
    assert len({p["uuid"] for p in passes}) == len(passes)
    assert passes[-1]["status"] == "complete"


# ---------------------------------------------------------------- a PostgreSQL server restarted

from test_ledger import pg_url, postgres_server, stop_postgres  # noqa: E402,F401 (fixtures)


def test_a_postgresql_ledger_whose_server_restarts_mid_loop(clean_pool, pg_url, tmp_path):  # noqa: F811
    """The tests' real server stopped under a loop, then started again: the loop says
    once that it cannot record, goes on, and records again (the same ledger, nothing
    recorded twice, every pass whole)."""
    import psycopg
    pool = clean_pool

    def passes() -> list[tuple]:
        with psycopg.connect(pg_url) as conn:
            try:
                return conn.execute("SELECT uuid, status FROM passes "
                                    "ORDER BY started_at").fetchall()
            except psycopg.errors.UndefinedTable:
                return []                       # the loop has not made its tables yet

    lp = Loop(pool, tmp_path, "--ledger", pg_url)
    try:
        pool.wait_for(lambda: len(passes()) >= 1, 60, "a pass")
        start_again = stop_postgres()
        try:
            pool.wait_for(lambda: "pass not recorded" in lp.err(), 30,
                          "the loop to find the server gone")
            time.sleep(2)                           # another pass, not recorded
            assert lp.proc.poll() is None
        finally:
            start_again()
        before = len(passes())
        pool.wait_for(lambda: "written again" in lp.err(), 30, "a pass recorded again")
        pool.wait_for(lambda: len(passes()) >= before + 1, 30, "one more pass")
    finally:
        assert lp.stop() == 0
    err = lp.err()
    assert "Traceback" not in err
    (gone,) = [ln for ln in err.splitlines() if "pass not recorded" in ln]
    assert "cannot connect" in gone or "terminating connection" in gone, gone
    assert gone.endswith("; trying again every 2 s"), gone
    assert "postgresql://" in gone and "password" not in gone
    got = passes()
    assert len({u for u, _ in got}) == len(got)
    assert got[-1][1] == "complete"
    from negotiator_ext.adapters.ledger import open_ledger
    with open_ledger(pg_url, read_only=True) as led:
        assert led.verify() == []


# ---------------------------------------------------------------- two loops, one ledger

def test_two_loops_on_one_ledger_record_and_compare_each_pass_once(clean_pool, tmp_path):
    """Two `shadow --interval` processes, each its own state directory (so each its own
    shadow.lock), on one ledger, beside real cycles that make matches: every pass is
    recorded once, every earlier pass is compared at most once (whichever process gets
    there first), every real cycle is recorded once, and the ledger is whole."""
    pool = clean_pool
    shared = tmp_path / "shared.sqlite"
    loops = []
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        loops.append(Loop(pool, tmp_path / name, "--ledger", str(shared)))
    try:
        def table(sql):
            try:
                return rows(shared, sql) if shared.exists() else []
            except sqlite3.OperationalError:
                return []                       # no tables yet
        pool.wait_for(lambda: len({r["snapshot_dir"].split("/state/")[0]
                                   for r in table("SELECT snapshot_dir FROM passes")}) == 2,
                      120, "a pass of each loop")
        pool.submit(count=2, group="group_a", user="kim")
        # (a real cycle that matches, then a pass of either loop after it: beside the
        # other test worker's pool, two loops' passes can take a while)
        pool.wait_for(lambda: [c for c in table("SELECT * FROM comparisons")
                               if c["real_matches"]], 150,
                      "a comparison of a cycle with matches")
        time.sleep(2)                           # both loops' passes after it
    finally:
        for lp in loops:
            assert lp.stop() == 0
    for lp in loops:
        assert "Traceback" not in lp.err()
    passes = rows(shared, "SELECT uuid, snapshot_dir FROM passes")
    assert len({p["uuid"] for p in passes}) == len(passes)
    # (a pass stopped while it waited on the schedds has no snapshot)
    by_loop = {p["snapshot_dir"].split("/state/")[0] for p in passes if p["snapshot_dir"]}
    assert by_loop == {str(tmp_path / "a"), str(tmp_path / "b")}
    twice = rows(shared, "SELECT shadow_pass, COUNT(*) AS n FROM comparisons "
                         "GROUP BY shadow_pass HAVING COUNT(*) > 1")
    assert [dict(r) for r in twice] == []
    cycles = rows(shared, 'SELECT pool, "time" FROM real_cycles')
    assert len({(c["pool"], c["time"]) for c in cycles}) == len(cycles)
    from negotiator_ext.adapters.ledger import open_ledger
    with open_ledger(str(shared), read_only=True) as led:
        assert led.verify() == []


def test_a_loop_on_a_read_only_ledger_or_one_it_cannot_make_stops_in_one_line(
        clean_pool, tmp_path):
    """A loop whose ledger is on a read-only file system, or whose ledger directory is
    missing and cannot be made there: one line naming it, exit status 2, nothing
    written (lasting: not tried again pass after pass)."""
    pool = clean_pool
    with tmpfs(tmp_path / "ro", "4m", "a read-only file system") as ro:
        from negotiator_ext.adapters.ledger import open_ledger
        with open_ledger(str(ro / "ledger.sqlite")):
            pass                                    # an empty ledger, closed
        why = system("mount", "-o", "remount,ro", str(ro))
        if why:
            pytest.skip(f"cannot remount a tmpfs read-only: {why}")
        cases = [(ro / "ledger.sqlite",
                  f"{ro}/ledger.sqlite: cannot be opened for writing: the file cannot be "
                  "written (read-only file system or permissions)\n"),
                 (ro / "missing" / "ledger.sqlite",
                  f"{ro}/missing/ledger.sqlite: cannot create the directory {ro}/missing: "
                  "Read-only file system")]
        for i, (ledger, message) in enumerate(cases):
            d = tmp_path / f"loop{i}"
            d.mkdir()
            lp = Loop(pool, d, "--ledger", str(ledger))
            assert lp.proc.wait(timeout=60) == 2
            err = lp.err()
            assert err.count("\n") == 1 and err.startswith(f"negotiator-ext: error: {message}"), err
            assert "Traceback" not in err
        assert sorted(os.listdir(ro)) == ["ledger.sqlite"]

