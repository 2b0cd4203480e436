"""Hostile input from a real pool (tests/livepool.py): job strings and a submitter name
holding quotes, backslashes, tabs, control characters and non-ASCII text, captured,
read back exactly and shown escaped; and a negotiator whose configuration has a circular
macro, which never hangs a pass and never keeps the daemon from stopping.

What the real schedd (25.14) accepts, found by trying: in a submit file a string's `\\n`
stays a backslash and an `n` (the old ClassAd syntax, where only `\\"` is an escape);
a raw newline or carriage return in a string is refused, by condor_submit, by the
bindings' Submit (parse_up_to_q_line) and by Schedd.edit, so a job string with a real
newline, and an Args with one, cannot be made here. Other control characters (ESC, SOH,
BEL, DEL, VT, FF), U+2028 and U+202E are taken as they are. accounting_group_user may
hold quotes, a backslash, ESC, `$`, `;`, non-ASCII and a leading `-` (not a space or a
tab); the real negotiator matches its jobs.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from negotiator_ext.adapters.adfiles import read_ads
from negotiator_ext.daemon import STOP_READ_GRACE

pytestmark = pytest.mark.live

# The string a job attribute holds, and the submit-file text that makes it: quotes are
# the only thing the old syntax escapes.
NOTE = ('line1\\nline2 "q" back\\\\slash\ttab \x1b[31mred\x1b[0m \x01\x07\x7f\x0b\x0c '
        'é 漢字 \u202eevil\u2028end')
NOTE_SUBMIT = '"' + NOTE.replace('"', '\\"') + '"'
HOSTILE_USER = "-x\"o'\x1b\\é$;"          # a leading dash, quotes, ESC, backslash, ...
DOMAIN = "negotiator-ext.test"


def cli(pool, *args, env=None, timeout=120):
    """negotiator-ext as a process; its output in a CompletedProcess (it ends on its own)."""
    return subprocess.run([sys.executable, "-m", "negotiator_ext", *map(str, args)],
                          env=env or pool.env, capture_output=True, text=True,
                          errors="surrogateescape", timeout=timeout)


def hostile_arguments(pool) -> str:
    """The jobs' run loop, with hostile words after it (they become $0, $1, ... of sh -c):
    in the new arguments syntax `''` is a single quote and `""` a double quote."""
    loop = f"while [ ! -e {pool.flags}/$(Cluster).$(Process) ]; do sleep 0.2; done"
    return (f"arguments = \"-c '{loop}' 'é 漢字' 'back\\slash' 'q''uote' ''\"\"dq\"\"'' "
            f"'\x1b[1mbold' 'tab\there'\"")


# ---- 1. hostile job strings and submitter name ------------------------------------------

def test_hostile_job_strings_and_submitter_are_captured_exactly_and_shown_escaped(
        clean_pool, tmp_path):
    pool = clean_pool
    submitter = f"group_b.{HOSTILE_USER}@{DOMAIN}"
    extra = [f"+Note = {NOTE_SUBMIT}",
             # the jobs' own Requirements read them: the capture projects them
             'requirements = (MY.Note =!= "x") && (MY.Arguments =!= "x")',
             hostile_arguments(pool)]
    for attempt in range(3):
        pool.wait_cycle()                   # right after a cycle: the next is 8 s away
        cluster = pool.submit(count=2, group="group_b", user=HOSTILE_USER, extra=extra)
        pool.wait_for(lambda: pool.submitters().get(submitter) == 2, 10,
                      "the hostile submitter's ad")
        state = tmp_path / f"state{attempt}"
        out = cli(pool, "shadow", "--pool", pool.collector, "--once", "--json",
                  "--state-dir", state, "--no-advertise",
                  "--negotiator-log", pool.log_dir / "NegotiatorLog",
                  "--matchlog", pool.log_dir / "MatchLog")
        assert out.returncode == 0, out.stderr
        rec = json.loads(out.stdout)
        snap = Path(rec["snapshot_dir"])
        jobs = [j for j in read_ads(next(snap.glob("jobs-*.ads"))) if j["ClusterId"] == cluster]
        if jobs and all(j["JobStatus"] == 1 for j in jobs):
            break
        pool.remove_all_jobs()              # a cycle ran them first: again
    else:
        pytest.fail("the hostile jobs were never captured idle")

    # the capture succeeded whole
    meta = json.loads((snap / "meta.json").read_text())
    assert meta["partial"] is False and meta["errors"] == {} and meta["missing_schedds"] == []
    assert rec["status"] == "complete", rec["reason"]

    # each string reads back exactly as the schedd holds it (condor_q -json: another reader)
    held = json.loads(pool.tool("condor_q", "-allusers", str(cluster), "-json", "-attributes",
                                "ProcId,Note,Arguments,AcctGroupUser,AccountingGroup").stdout)
    held_args = {h["ProcId"]: h["Arguments"] for h in held}
    assert {h["Note"] for h in held} == {NOTE}
    assert len(jobs) == 2
    for j in jobs:
        assert j["Note"] == NOTE
        assert j["Arguments"] == held_args[j["ProcId"]]
        # (the schedd keeps the arguments joined, a space within one as ' ')
        for word in ("é", "漢字", "back\\slash", "\"dq\"", "uote", "\x1b[1mbold", "\t"):
            assert word in j["Arguments"], word
        assert j["AcctGroupUser"] == HOSTILE_USER == held[0]["AcctGroupUser"]
        assert j["AccountingGroup"] == f"group_b.{HOSTILE_USER}"

    # our cycle ran on it, and matched the hostile submitter's idle jobs
    assert rec["shadow_duration"] is not None and rec["shadow_timings"]
    ours = [m for m in rec["shadow_matches"] if m["submitter"] == submitter]
    assert len(ours) == 2, rec["shadow_matches"]
    assert {m["job"] for m in ours} <= {f"{cluster}.0", f"{cluster}.1"}
    (row,) = [s for s in rec["submitters"] if s["name"] == submitter]
    assert row["group"] == "group_b" and row["idle_jobs"] == 2

    # the real negotiator matches them too; a pass after its cycle counts them running
    pool.wait_for(lambda: len(pool.jobs("ClusterId", constraint=f"ClusterId == {cluster} "
                                        "&& JobStatus == 2")) == 2, 60, "the jobs to run")
    time.sleep(3)                           # the submitter ad says so too
    again = cli(pool, "shadow", "--pool", pool.collector, "--once", "--json", "--state-dir",
                state, "--no-advertise", "--negotiator-log", pool.log_dir / "NegotiatorLog",
                "--matchlog", pool.log_dir / "MatchLog")
    assert again.returncode == 0, again.stderr
    plain = cli(pool, "shadow", "--pool", pool.collector, "--once", "--state-dir", state,
                "--no-advertise", "--negotiator-log", pool.log_dir / "NegotiatorLog",
                "--matchlog", pool.log_dir / "MatchLog")
    assert plain.returncode == 0, plain.stderr
    assert plain.stdout.startswith("pass ")
    rec2 = json.loads(again.stdout)
    assert not (rec2["reason"] or "").startswith("partial snapshot"), rec2["reason"]
    counted = [s for s in rec2["submitters"] if s["name"].startswith(f"group_b.{HOSTILE_USER}")]
    assert sum(s["running_jobs"] for s in counted) == 2, counted
    real = [m for m in rec2["real_matches"] if m["submitter"].startswith(f"group_b.{HOSTILE_USER}")]
    assert real, "the MatchLog's matches of the hostile submitter were not read"

    # nothing reaches a terminal raw: not the pass lines, not the JSON, not the tables
    shown = {
        "shadow --json": out.stdout + out.stderr,
        "shadow": plain.stdout + plain.stderr,   # (its pass line names no submitter)
        "shadow --json (running)": again.stdout + again.stderr,
        "negotiate": cli(pool, "negotiate", snap).stdout,
        "userprio": cli(pool, "userprio", snap, "-allusers").stdout,
        "ledger show": cli(pool, "ledger", "show", "--ledger", state / "ledger.sqlite").stdout,
    }
    for what, text in shown.items():
        for raw in ("\x1b", "\x01", "\x07", "\x7f", "\u202e", "\u2028"):
            assert raw not in text, f"{what} printed {raw!r} raw"
    assert "\\x1b" in shown["negotiate"]      # the name is there, escaped


# ---- 2. a negotiator whose config never ends expanding ------------------------------------

LOOP = ("NEGOTIATOR_HOSTILE_LOOP_A = $(NEGOTIATOR_HOSTILE_LOOP_B)\n"
        "NEGOTIATOR_HOSTILE_LOOP_B = $(NEGOTIATOR_HOSTILE_LOOP_A)\n")
TIMEOUT = 3


def client_env(pool, tmp_path: Path, knobs: str = "") -> tuple[dict, Path]:
    """An environment whose CONDOR_CONFIG is the client's own file, not the pool's: the
    circular macro is in the negotiator's configuration only (the pool's config.d is the
    same files, and reading this host's own configuration has its own time limit in
    adapters/condor_config.py, not what this test is about)."""
    cfg = tmp_path / "client_config"
    cfg.write_text("SEC_CLIENT_AUTHENTICATION_METHODS = FS, CLAIMTOBE\n" + knobs)
    env = dict(pool.env)
    env["CONDOR_CONFIG"] = str(cfg)
    return env, cfg


def timed_pass(pool, env, state: Path) -> tuple[float, dict]:
    t0 = time.monotonic()
    out = cli(pool, "shadow", "--pool", pool.collector, "--once", "--json", "--timeout",
              TIMEOUT, "--state-dir", state, "--no-advertise", env=env, timeout=300)
    took = time.monotonic() - t0
    assert out.returncode == 0, out.stderr
    return took, json.loads(out.stdout)


def test_a_circular_macro_in_the_negotiators_config_never_hangs_a_pass_or_the_daemon(
        clean_pool, tmp_path):
    pool = clean_pool
    env, _ = client_env(pool, tmp_path)
    name = pool.tool("condor_status", "-negotiator", "-af", "Name").stdout.strip()
    knob = "NEGOTIATOR_HOSTILE_LOOP_A"
    # a pass before: its snapshot has the negotiator's config
    took, rec = timed_pass(pool, env, tmp_path / "state")
    assert rec["status"] == "complete", rec["reason"]
    loop_file = pool.local / "config.d" / "loop.config"
    pool.reconfig("loop.config", LOOP)
    try:
        # 1. no earlier config: the pass is partial and names the negotiator and the knob;
        # the read takes TIMEOUT seconds, not for ever (HTCondor's own expansion has no
        # limit: the negotiator stays busy expanding the value until it is killed)
        took, rec = timed_pass(pool, env, tmp_path / "fresh")
        assert took < TIMEOUT + 10, took
        assert rec["status"] == "partial"
        assert rec["reason"].startswith(
            f"partial snapshot (did not answer: negotiator: reading {knob} from the "
            f"negotiator {name} did not end within {TIMEOUT} s: its value never ends "
            "expanding"), rec["reason"]
        meta = json.loads((Path(rec["snapshot_dir"]) / "meta.json").read_text())
        assert meta["partial"] is True and list(meta["errors"]) == ["negotiator"]
        assert not (Path(rec["snapshot_dir"]) / "config").exists()

        # 2. the negotiator restarted, the knob still there: a loop with an earlier
        # snapshot keeps its config, the pass is complete, with one warning naming both
        pool.unstick_negotiator()
        took, rec = timed_pass(pool, env, tmp_path / "state")
        assert took < TIMEOUT + 10, took
        assert rec["status"] == "complete", rec["reason"]
        (warning,) = [w for w in rec["warnings"] if "the negotiator's config is" in w]
        assert f"reading {knob} from the negotiator {name} did not end within" in warning

        # 3. the daemon, its pass waiting on the stuck negotiator, stops within seconds of
        # SIGTERM (the read is abandoned daemon.STOP_READ_GRACE after the signal)
        _, cfg = client_env(pool, tmp_path, f"""
NEGOTIATOR_EXT_POOL = {pool.collector}
NEGOTIATOR_EXT_STATE_DIR = {tmp_path / "daemon"}
NEGOTIATOR_EXT_INTERVAL = 2
NEGOTIATOR_EXT_SNAPSHOT_TIMEOUT = 120
NEGOTIATOR_EXT_ADVERTISE = False
NEGOTIATOR_EXT_LOG = {tmp_path / "NegotiatorExtLog"}
""")
        proc = subprocess.Popen([sys.executable, "-m", "negotiator_ext.daemon", "-t",
                                 "--config", str(cfg)], env=env,
                                stdout=(tmp_path / "daemon.out").open("w"),
                                stderr=(tmp_path / "daemon.err").open("w"))
        try:
            # the negotiator's config reader, not the schedds' limits reader beside it
            # (that one ends in a moment: a schedd answers)
            reader = pool.wait_for(lambda: pool.negotiator_config_readers(proc.pid), 60,
                                   "the daemon's configuration read")
            time.sleep(2)                   # well into the read (no answer will come)
            assert all(Path(f"/proc/{p}").exists() for p in reader)
            t0 = time.monotonic()
            proc.send_signal(signal.SIGTERM)
            status = proc.wait(timeout=60)
            stopped_in = time.monotonic() - t0
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        err = (tmp_path / "daemon.err").read_text()
        assert status == 0, err
        assert stopped_in < STOP_READ_GRACE + 3, (stopped_in, err)
        assert "SIGTERM: stopping after the pass in flight" in err
        assert "abandoned the read of the negotiator's configuration in flight" in err
        assert "Traceback" not in err
        assert not any(Path(f"/proc/{p}").exists() for p in reader)
        print(f"\nlive hang: pass {took:.1f} s with a {TIMEOUT} s limit; daemon stopped "
              f"{stopped_in:.2f} s after SIGTERM")
    finally:
        loop_file.unlink(missing_ok=True)
        pool.tool("condor_reconfig")
        pool.unstick_negotiator()
