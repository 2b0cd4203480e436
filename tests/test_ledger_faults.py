"""File-system faults under the ledger, its lock and `recommend --script`, and the
ledger's cross-process rules, end to end through `negotiator-ext` (issue 14):

- compare-once holds for two shadow processes (two state directories) on one ledger;
- `ledger show`, `ledger export`, `audit` and `recommend` read a ledger on a read-only
  file system (as root: a tmpfs remounted read-only; otherwise a directory and file
  without write permission);
- a lock file on a read-only or full disk, a state directory that cannot be created, a
  ledger on a full or read-only disk, and a `--script` that cannot be written are each
  one line on stderr naming the path, exit status 2;
- `recommend --apply --script F` refused writes no F;
- a snapshot whose capture time is before the accountant's LastUpdate, live or
  replayed, is recorded with a warning, said once.

A replayed example (examples/hgq_nested_hep_lep_surplus, as in the README) is the ledger.
Every command gets `--config` with an empty file, so this host's knobs are never read.
"""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
import sqlite3
from pathlib import Path

import pytest

from negotiator_ext.adapters.ledger import Ledger, open_ledger
from negotiator_ext.cli import main
from negotiator_ext.errors import InputError
from negotiator_ext.shadow import ShadowLoop
from negotiator_ext.shadow_state import ShadowSettings
from tmpfs import fill, system, tmpfs

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "examples" / "hgq_nested_hep_lep_surplus"
AFTER = EXAMPLE / "after-cycle"
MATCHLOG = ["--matchlog", str(EXAMPLE / "expected" / "matchlog.txt"),
            "--matchlog-timezone", "UTC"]
AT = "1795265300"                  # just after the example's passes


# ---------------------------------------------------------------- helpers and fixtures

def run(capsys, *argv: str) -> tuple[int, str, str]:
    """`negotiator-ext ARGV` in this process: (exit status, stdout, stderr)."""
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def assert_one_line_error(err: str, path: Path | str, message: str = "") -> None:
    """stderr is exactly one error line, naming `path` first (then `message`)."""
    assert err.count("\n") == 1 and err.endswith("\n"), err
    assert err.startswith(f"negotiator-ext: error: {path}: {message}"), err
    assert "Traceback" not in err


@pytest.fixture
def example_ledger(tmp_path, config, capsys) -> Path:
    """The README's replay: the example before its real cycle, then after it."""
    path = tmp_path / "made" / "example.sqlite"
    rc, out, _ = run(capsys, "shadow", "--replay", str(EXAMPLE), str(AFTER), "--ledger",
                     str(path), *MATCHLOG, "--config", config)
    assert rc == 0 and len(out.splitlines()) == 2
    return path


def _writable(d: Path) -> bool:
    probe = d / ".probe"
    try:
        probe.touch()
    except OSError:
        return False
    probe.unlink()
    return True


@pytest.fixture
def read_only(tmp_path):
    """A factory: read_only(*files) is a new directory holding copies of `files` that
    nothing can be written to. As root (whom permissions do not stop) a tmpfs, the copies
    made, remounted read-only, and unmounted at teardown; otherwise mode 0555 and the
    files 0444. Skips, saying why, when neither gives a directory that refuses writes."""
    mounts: list[Path] = []
    chmodded: list[Path] = []

    def make(*files: Path, name: str = "ro") -> Path:
        d = tmp_path / name
        d.mkdir()
        if os.geteuid() == 0:
            why = system("mount", "-t", "tmpfs", "tmpfs", str(d))
            if why:
                pytest.skip(f"root, but cannot mount a tmpfs: {why}")
            mounts.append(d)
            for f in files:
                shutil.copy(f, d)
            why = system("mount", "-o", "remount,ro", str(d))
            if why:
                pytest.skip(f"cannot remount a tmpfs read-only: {why}")
        else:
            for f in files:
                shutil.copy(f, d)
                (d / Path(f).name).chmod(0o444)
            d.chmod(0o555)
            chmodded.append(d)
        if _writable(d):
            pytest.skip(f"{d} can still be written to: no read-only directory here")
        return d

    yield make
    for d in mounts:
        if system("umount", str(d)):
            system("umount", "-l", str(d))
    for d in chmodded:
        d.chmod(0o755)


@pytest.fixture
def full_dir(tmp_path):
    """A directory on a full file system: a 64 KiB tmpfs (root only), filled up, and
    unmounted at teardown. Skips, saying why, elsewhere."""
    with tmpfs(tmp_path / "full", "64k") as d:
        fill(d)
        yield d


def _comparisons_of(ledger: Path, uuid: str) -> int:
    conn = sqlite3.connect(ledger)
    try:
        return conn.execute("SELECT COUNT(*) FROM comparisons WHERE shadow_pass = ?",
                            (uuid,)).fetchone()[0]
    finally:
        conn.close()


# ---------------------------------------------------------------- compare once

def test_two_shadow_processes_compare_an_earlier_pass_once(tmp_path, monkeypatch):
    """Processes A and B (their own state directories) on one ledger: both replay the
    pool after the real cycle that followed A's first pass. B reads the ledger (the pass
    not compared yet) before A records; A records its comparison while B's is on its way:
    B's pass is recorded without one."""
    ledger = tmp_path / "ledger.sqlite"

    def loop(state: str) -> ShadowLoop:
        return ShadowLoop(ShadowSettings.from_knobs(
            {"STATE_DIR": str(tmp_path / state), "ADVERTISE": "false"},
            ledger_url=str(ledger), matchlog=MATCHLOG[1], matchlog_tz="UTC"))

    a, b = loop("a"), loop("b")
    first = a.run_pass(replay=EXAMPLE)
    real_record = Ledger.record
    a_second = []

    def record(self, rec):
        if rec.comparison is not None and not a_second:     # B, ready to record
            a_second.append(None)
            a_second[0] = a.run_pass(replay=AFTER)           # A gets there first
        return real_record(self, rec)

    monkeypatch.setattr(Ledger, "record", record)
    b_second = b.run_pass(replay=AFTER)
    assert a_second[0].comparison.shadow_pass == first.uuid
    assert a_second[0].comparison.real_matches == 27
    assert b_second.comparison is None
    assert f"pass {first.uuid}'s cycle was compared by another pass" in b_second.warnings[-1]
    assert all(o.real_matches is None for o in b_second.submitters)
    assert _comparisons_of(ledger, first.uuid) == 1
    with open_ledger(str(ledger), read_only=True) as led:
        assert [h["n_comparisons"] for h in led.passes()] == [0, 1, 0]
        assert led.comparison(b_second.uuid) is None and led.verify() == []


# ---------------------------------------------------------------- read-only ledgers

def test_readers_read_a_ledger_on_a_read_only_file_system(example_ledger, read_only, tmp_path,
                                                          config, capsys):
    d = read_only(example_ledger)
    ledger = str(d / example_ledger.name)
    rc, out, err = run(capsys, "ledger", "show", "--ledger", ledger, "--config", config)
    assert (rc, err) == (0, "")
    rows = out.split("\n\n")[0].splitlines()           # the table (the legend follows)
    assert len(rows) == 4 and "partial" in rows[2] and "complete" in rows[3]
    assert rows[2].split()[3:6] == ["partial", "27", "27"]     # pass 1's cycle, compared
    rc, out, err = run(capsys, "ledger", "show", "--json", "--ledger", ledger, "--config", config)
    assert (rc, err) == (0, "") and len(json.loads(out)) == 2
    rc, out, err = run(capsys, "ledger", "export", "--ledger", ledger, "--format", "jsonl",
                       "-o", str(tmp_path / "export"), "--config", config)
    assert (rc, err) == (0, "") and (tmp_path / "export" / "comparisons.jsonl").is_file()
    rc, out, err = run(capsys, "recommend", "--ledger", ledger, "--at", AT, "--config", config)
    assert (rc, err) == (0, "")
    assert out.startswith("1 complete pass(es) of <local> in the last 24 h")
    rc, out, err = run(capsys, "audit", "--ledger", ledger, "-o", str(tmp_path / "audit"),
                       "--config", config)
    assert rc == 0 and (tmp_path / "audit" / "index.html").is_file()
    assert err == "1 of 2 pass(es) analysed\n"
    assert os.listdir(d) == [example_ledger.name]       # nothing made beside it


def test_writers_are_refused_a_read_only_ledger_in_one_line(example_ledger, read_only,
                                                            tmp_path, config, capsys):
    d = read_only(example_ledger)
    ledger = d / example_ledger.name
    rc, _, err = run(capsys, "recommend", "--ledger", str(ledger), "--apply", "--config", config)
    assert rc == 2
    assert_one_line_error(err, ledger)
    rc, _, err = run(capsys, "shadow", "--replay", str(AFTER), "--ledger", str(ledger),
                     "--state-dir", str(tmp_path / "state"), *MATCHLOG, "--config", config)
    assert rc == 2
    assert_one_line_error(err, ledger)


def test_a_read_only_ledger_keeps_its_write_ahead_log(example_ledger, read_only, capsys,
                                                      config):
    """Copied while a writer had it open (its newest pass only in the -wal file): read
    whole through the -shm beside it, never as the file alone."""
    work = example_ledger.with_name("open.sqlite")
    shutil.copy(example_ledger, work)
    writer = sqlite3.connect(work, isolation_level=None)
    writer.execute("PRAGMA wal_autocheckpoint = 0")
    writer.execute("UPDATE passes SET status = 'failed' WHERE id = 2")
    try:
        d = read_only(work, work.with_name(work.name + "-wal"),
                      work.with_name(work.name + "-shm"))
    finally:
        writer.close()
    rc, out, err = run(capsys, "ledger", "show", "--ledger", str(d / work.name),
                       "--config", config)
    assert (rc, err) == (0, "")
    assert "failed" in out.splitlines()[3]


def test_a_write_ahead_log_that_cannot_be_read_is_one_line(example_ledger, read_only, capsys,
                                                           config):
    """A -wal without its -shm where no -shm can be made: the file alone would miss the
    log's passes, so it is not read."""
    work = example_ledger.with_name("open.sqlite")
    shutil.copy(example_ledger, work)
    writer = sqlite3.connect(work, isolation_level=None)
    writer.execute("PRAGMA wal_autocheckpoint = 0")
    writer.execute("UPDATE passes SET status = 'failed' WHERE id = 2")
    try:
        d = read_only(work, work.with_name(work.name + "-wal"))
    finally:
        writer.close()
    rc, _, err = run(capsys, "ledger", "show", "--ledger", str(d / work.name), "--config", config)
    assert rc == 2
    assert_one_line_error(err, d / work.name, "cannot be read here: its write-ahead log "
                                              "open.sqlite-wal holds writes not in the file")


def test_a_read_only_ledger_of_an_older_schema_is_one_line(tmp_path, read_only, capsys,
                                                           config):
    from negotiator_ext.adapters import ledger as ledger_mod
    old = tmp_path / "old.sqlite"
    ledger_mod._open(str(old), schema_target=1).close()
    d = read_only(old)
    rc, _, err = run(capsys, "ledger", "show", "--ledger", str(d / old.name), "--config", config)
    assert rc == 2
    assert_one_line_error(err, d / old.name, "is of schema version 1, which this "
                                             "negotiator-ext brings up to ")


# ---------------------------------------------------------------- the lock and the ledger's directory

def test_a_lock_file_on_a_read_only_disk(read_only, tmp_path, config, capsys):
    d = read_only()
    # (a replay takes the lock of a state directory it is given, and needs none)
    rc, out, err = run(capsys, "shadow", "--replay", str(EXAMPLE), "--ledger",
                       str(d / "x.sqlite"), "--state-dir", str(d), *MATCHLOG,
                       "--config", config)
    assert (rc, out) == (2, "")
    assert_one_line_error(err, d / "shadow.lock", "cannot create the lock file: ")


def test_a_lock_file_on_a_full_disk(full_dir, config, capsys):
    rc, out, err = run(capsys, "shadow", "--replay", str(EXAMPLE), "--ledger",
                       str(full_dir / "x.sqlite"), "--state-dir", str(full_dir), *MATCHLOG,
                       "--config", config)
    assert (rc, out) == (2, "")
    assert_one_line_error(err, full_dir / "shadow.lock",
                          "cannot write the lock file: No space left on device")


def test_a_lock_file_that_cannot_be_written_wherever_it_is(tmp_path, monkeypatch, config,
                                                           capsys):
    """The full disk without root: the pid's write fails with ENOSPC."""
    real_write = os.write

    def write(fd, data):
        if data == f"{os.getpid()}\n".encode():
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real_write(fd, data)

    monkeypatch.setattr(os, "write", write)
    rc, out, err = run(capsys, "shadow", "--replay", str(EXAMPLE), "--ledger",
                       str(tmp_path / "l" / "x.sqlite"), "--state-dir", str(tmp_path / "l"),
                       *MATCHLOG, "--config", config)
    monkeypatch.undo()
    assert (rc, out) == (2, "")
    assert_one_line_error(err, tmp_path / "l" / "shadow.lock",
                          "cannot write the lock file: No space left on device")
    assert not (tmp_path / "l" / "x.sqlite").exists()   # the pass never started


def test_a_ledger_directory_that_cannot_be_created(read_only, config, capsys):
    d = read_only()
    # a replay with no state directory: the ledger's own directory
    rc, out, err = run(capsys, "shadow", "--replay", str(EXAMPLE), "--ledger",
                       str(d / "sub" / "x.sqlite"), *MATCHLOG, "--config", config)
    assert (rc, out) == (2, "")
    assert_one_line_error(err, d / "sub" / "x.sqlite", f"cannot create the directory {d}/sub: ")
    # one given a state directory it cannot create
    rc, out, err = run(capsys, "shadow", "--replay", str(EXAMPLE), "--ledger",
                       str(d / "sub" / "x.sqlite"), "--state-dir", str(d / "sub"),
                       *MATCHLOG, "--config", config)
    assert (rc, out) == (2, "")
    assert_one_line_error(err, d / "sub", "cannot create the state directory: ")
    # and with the lock elsewhere, the ledger's own directory
    rc, out, err = run(capsys, "shadow", "--replay", str(EXAMPLE), "--ledger",
                       str(d / "sub" / "x.sqlite"), "--state-dir", str(d.parent / "state"),
                       *MATCHLOG, "--config", config)
    assert (rc, out) == (2, "")
    assert_one_line_error(err, d / "sub" / "x.sqlite", f"cannot create the directory {d}/sub: ")


def test_a_ledger_below_a_plain_file(tmp_path, config, capsys):
    (tmp_path / "afile").write_text("not a directory")
    rc, out, err = run(capsys, "shadow", "--replay", str(EXAMPLE), "--ledger",
                       str(tmp_path / "afile" / "x.sqlite"), *MATCHLOG, "--config", config)
    assert (rc, out) == (2, "")
    assert_one_line_error(err, tmp_path / "afile" / "x.sqlite",
                          f"cannot create the directory {tmp_path / 'afile'}: File exists")


def test_a_new_ledger_directory_is_created(tmp_path, config, capsys):
    """Deliberate: a --ledger in a directory that does not exist yet makes it (as the
    default ledger in a new state directory is made)."""
    ledger = tmp_path / "new" / "dir" / "x.sqlite"
    rc, out, _ = run(capsys, "shadow", "--replay", str(EXAMPLE), "--ledger", str(ledger),
                     *MATCHLOG, "--config", config)
    assert rc == 0 and out.startswith("pass ") and ledger.is_file()


def test_a_ledger_on_a_full_disk(full_dir, tmp_path, config, capsys):
    ledger = full_dir / "x.sqlite"
    rc, out, err = run(capsys, "shadow", "--replay", str(AFTER), "--ledger", str(ledger),
                       "--state-dir", str(tmp_path / "state"), *MATCHLOG, "--config", config)
    assert (rc, out) == (2, "")
    assert_one_line_error(err, ledger, "is full")


def test_a_full_file_system_is_worth_trying_again(tmp_path):
    """A ledger whose file system fills up: the write fails naming the cause (SQLite
    reports the write-ahead log's -shm file that cannot grow as an I/O error), nothing
    of it is written, and the error is transient (a loop tries again); with room again
    the same pass goes in. Its database size limit is another matter: lasting."""
    with tmpfs(tmp_path / "fs", "2m") as d:
        from test_ledger import full_pass
        url = str(d / "ledger.sqlite")
        with open_ledger(url) as led:
            led.record_pass(full_pass("before", started_at=100.0))
        filler = fill(d)
        with pytest.raises(InputError) as e:
            with open_ledger(url) as led:
                led.record_pass(full_pass("during", started_at=200.0, n_submitters=500))
        assert e.value.transient
        assert re.fullmatch(rf"{url}: is full: no space left on the file system that holds "
                            r"it \(\d+ KiB free\)", e.value.one_line()), e.value.one_line()
        filler.unlink()
        with open_ledger(url) as led:
            assert [p["uuid"] for p in led.passes()] == ["before"] and led.verify() == []
            led.record_pass(full_pass("during", started_at=200.0, n_submitters=500))
            assert [p["uuid"] for p in led.passes()] == ["before", "during"]


# ---------------------------------------------------------------- recommend --script

def test_a_script_into_a_read_only_directory(example_ledger, read_only, config, capsys):
    d = read_only()
    script = d / "changes.sh"
    rc, out, err = run(capsys, "recommend", "--ledger", str(example_ledger), "--at", AT,
                       "--script", str(script), "--config", config)
    assert (rc, out) == (2, "")
    assert_one_line_error(err, script, "cannot write the script: ")
    assert not script.exists()


def test_a_script_path_that_is_a_directory(example_ledger, tmp_path, config, capsys):
    rc, out, err = run(capsys, "recommend", "--ledger", str(example_ledger), "--at", AT,
                       "--script", str(tmp_path), "--config", config)
    assert (rc, out) == (2, "")
    assert_one_line_error(err, tmp_path, "cannot write the script: Is a directory")


def test_a_script_on_a_full_disk_is_not_left_cut_short(example_ledger, full_dir, config,
                                                       capsys):
    script = full_dir / "changes.sh"
    rc, out, err = run(capsys, "recommend", "--ledger", str(example_ledger), "--at", AT,
                       "--script", str(script), "--config", config)
    assert (rc, out) == (2, "")
    assert_one_line_error(err, script, "cannot write the script: No space left on device")
    assert not script.exists()


def test_a_refused_apply_writes_no_script(example_ledger, tmp_path, config, capsys):
    """The example's passes are long past NEGOTIATOR_EXT_APPLY_MAX_AGE: --apply refuses,
    and the script is not written (nor an earlier one changed)."""
    script = tmp_path / "changes.sh"
    rc, out, err = run(capsys, "recommend", "--ledger", str(example_ledger), "--apply",
                       "--script", str(script), "--config", config)
    assert (rc, out) == (2, "")
    assert_one_line_error(err, example_ledger, "nothing applied: the newest complete pass is ")
    assert not script.exists()
    script.write_text("#!/bin/sh\n# reviewed yesterday\n")
    rc, _, err = run(capsys, "recommend", "--ledger", str(example_ledger), "--apply",
                     "--script", str(script), "--config", config)
    assert rc == 2 and "nothing applied" in err
    assert script.read_text() == "#!/bin/sh\n# reviewed yesterday\n"


# ---------------------------------------------------------------- the cycle time and LastUpdate

def _set_accountant_ahead(tmp_path: Path) -> Path:
    """after-cycle/ with its accountant's LastUpdate 4 s after the capture time."""
    d = tmp_path / "ahead"
    shutil.copytree(AFTER, d)                  # its symbolic links copied as files
    acc = d / "accounting.ads"
    text = acc.read_text()
    assert "LastUpdate = 1795265266" in text
    acc.write_text(text.replace("LastUpdate = 1795265266", "LastUpdate = 1795265300"))
    return d


def test_a_replayed_snapshot_before_the_accountants_last_update_is_recorded_with_a_warning(
        tmp_path, config, capsys):
    # the loop's own captures can hold such a time (a real cycle during the capture):
    # a replay of them goes on, as the live pass did
    snap = _set_accountant_ahead(tmp_path)
    ledger = tmp_path / "l.sqlite"
    rc, out, err = run(capsys, "shadow", "--replay", str(EXAMPLE), str(snap), "--ledger",
                       str(ledger), *MATCHLOG, "--config", config)
    assert rc == 0, err
    assert len(out.splitlines()) == 2
    assert ("the capture time 1795265296 is before the accountant's LastUpdate 1795265300"
            in err)
    with open_ledger(str(ledger), read_only=True) as led:
        assert [h["snapshot_time"] for h in led.passes()] == [1795265266, 1795265296]


def test_a_live_capture_before_last_update_is_said_once(tmp_path, mocker, caplog):
    """A live capture that read the Accounting ads after a real cycle began (here: the
    clock 10 s behind the accountant): each pass records it, the log says it once."""
    from fakepool import FakePool
    FakePool().install(mocker)
    import htcondor2
    now = [1795265243.0]                        # the fixture accountant: 1795265253
    loop = ShadowLoop(ShadowSettings.from_knobs(
        {"STATE_DIR": str(tmp_path / "state"), "ADVERTISE": "false"}),
        htcondor=htcondor2, clock=lambda: now[0])
    caplog.set_level("WARNING", logger="negotiator_ext.shadow")
    first = loop.run_pass()
    now[0] += 5
    second = loop.run_pass()
    for rec, t in ((first, 1795265243), (second, 1795265248)):
        assert any(re.match(rf"the capture time {t} is before the accountant's LastUpdate "
                            r"1795265253 ", w) for w in rec.warnings), rec.warnings
        assert rec.status != "failed"
    logged = [r.getMessage() for r in caplog.records if "LastUpdate" in r.getMessage()]
    assert len(logged) == 1 and logged[0].endswith("(logged once)")


def test_apply_on_a_ledger_it_cannot_write_changes_nothing(example_ledger, read_only, tmp_path,
                                                           capsys, mocker):
    """SQLite opens a file it may not write read-only without a word: --apply finds that
    out before any condor_userprio runs, not when it records the first change."""
    ro = read_only(example_ledger)
    cfg = tmp_path / "apply.conf"
    cfg.write_text("NEGOTIATOR_EXT_APPLY_MAX_AGE = 1e9\n")       # the example's passes are old
    apply_ = mocker.patch("negotiator_ext.adapters.apply.apply_recommendations")
    rc, out, err = run(capsys, "recommend", "--ledger", str(ro / example_ledger.name),
                       "--apply", "--config", str(cfg))
    assert (rc, out) == (2, "")
    # on a read-only file system SQLite cannot even open it for writing (its write-ahead
    # log); a file without write permission opens, read-only, and check_writable says so
    assert_one_line_error(err, ro / example_ledger.name)
    apply_.assert_not_called()


def test_check_writable_names_what_cannot_be_written(example_ledger, mocker):
    with open_ledger(str(example_ledger), create=False) as led:
        led.check_writable("fine")                              # writable: no error
        mocker.patch("negotiator_ext.adapters.ledger.os.access", return_value=False)
        with pytest.raises(InputError) as e:
            led.check_writable("nothing applied")
    assert e.value.one_line() == (f"{example_ledger}: the file cannot be written (read-only "
                                  "file system or permissions): nothing applied")
