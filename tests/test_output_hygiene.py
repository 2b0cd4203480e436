"""Output hygiene: names from untrusted ads never reach a terminal (or a page, or a
reviewable script) with raw control characters, and a name beginning with "-" reaches
condor_userprio as a name.

Hostile names carry an ESC sequence, CR, BEL, DEL, a C1 control, U+2028 and U+202E
(right-to-left override), some with a leading "-". They go through every text view
(`negotiate`, `userprio` and its `-l`, `explain`, `recommend`'s table, its `--script`,
the `applied:`/`failed:` lines, `ledger show`'s lines, the audit page) and the one-line
error; the JSON keeps the true values, and the script, run by bash, passes the true
names to condor_userprio.
"""

from __future__ import annotations

import itertools
import json
import os
import shlex
import subprocess
from pathlib import Path
from unittest import mock

import pytest

from negotiator_ext.adapters.apply import apply_recommendations
from negotiator_ext.adapters.ledger import open_ledger
from negotiator_ext.cli import main
from negotiator_ext.core.recommend import Recommendation
from negotiator_ext.core.records import PassRecord, SubmitterObs
from negotiator_ext.errors import InputError
from negotiator_ext.views.ledger import render_passes, summary_line
from negotiator_ext.views.recommend import (command_argv, render_script, render_table,
                                            script_command, shell_word)
from negotiator_ext.views.text import printable
from poolmaker import DOMAIN, accounting, job, make_pool, slot

# what the hostile parts look like raw and escaped
RAW = ["\x1b[31m", "\r", "\x07", "\u2028", "\u202e"]
SHOWN = ["\\x1b[31m", "\\x0d", "\\x07", "\\u2028", "\\u202e"]
EVIL = "ev\x1b[31mil\r\x07\u2028\u202e\x7f"           # a user (and submitter) name
EVIL_SHOWN = "ev\\x1b[31mil\\x0d\\x07\\u2028\\u202e\\x7f"
DASH = "-da\x1b[2Jsh"                                  # a user beginning with "-"
SLOT_HOST = "h\x1b]0;pwned\x07\r"                      # a slot's host (OSC title sequence)
SLOT_HOST_SHOWN = "h\\x1b]0;pwned\\x07\\x0d"


def clean(text: str) -> bool:
    """No character a terminal would act on: every one printable, or a line end."""
    return all(c.isprintable() or c == "\n" for c in text)


def assert_clean_bytes(data: bytes) -> None:
    bad = sorted({b for b in data if (b < 0x20 and b != 0x0A) or b == 0x7F})
    assert not bad, f"control bytes {bad} in output"
    text = data.decode("utf-8")
    assert clean(text), [c for c in text if not (c.isprintable() or c == "\n")]


def run(capsys, *argv) -> tuple[int, str, str]:
    rc = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


# ---- the helper -------------------------------------------------------------------------

def test_printable_escapes_controls_and_keeps_text():
    assert printable(EVIL) == EVIL_SHOWN
    assert printable("a\nb\tc\x00\x85\x9b\u2029\u200e\u2066\U000e0001") == (
        "a\\x0ab\\x09c\\x00\\x85\\x9b\\u2029\\u200e\\u2066\\U000e0001")
    for ordinary in ["alice@example.org", "group_physics.hep.higgs@refcondor.local",
                     "<none>", "é日本 ü", "C:\\dir\\x1b", "-x@y", ""]:
        assert printable(ordinary) == ordinary
    assert printable(printable(EVIL)) == printable(EVIL)          # idempotent
    assert printable("\udc80") == "\\udc80"                       # a lone surrogate


# ---- a snapshot with hostile names --------------------------------------------------------

@pytest.fixture
def hostile_pool(tmp_path) -> Path:
    """group_a.EVIL (2 idle jobs), DASH and plain (1 each) in <none>, three slots whose
    names hold an OSC title sequence and a CR; accounting records for all of them."""
    slots = [slot(f"slot{i}@{SLOT_HOST}{i}.test.local") for i in (1, 2, 3)]
    jobs = [job(1, 0, EVIL, group="group_a"), job(1, 1, EVIL, group="group_a"),
            job(2, 0, DASH), job(3, 0, "plain")]
    names = [f"group_a.{EVIL}@{DOMAIN}", f"{DASH}@{DOMAIN}", f"plain@{DOMAIN}"]
    acc = [accounting(n, LastUsageTime=99990, WeightedAccumulatedUsage=3600.0) for n in names]
    acc += [accounting("group_a"), accounting("<none>")]
    return make_pool(tmp_path / "pool", slots=slots, jobs=jobs, accounting_ads=acc,
                     config="GROUP_NAMES = group_a\nGROUP_QUOTA_group_a = 2\n")


def test_negotiate_table_escapes_names_and_json_keeps_them(hostile_pool, capsys):
    rc, out, err = run(capsys, "negotiate", hostile_pool)
    assert rc == 0, err
    assert clean(out) and clean(err)
    assert f"{printable(DASH)}@{DOMAIN}" in out and SLOT_HOST_SHOWN in out
    # the match table stays aligned: every row of it as wide as its rule
    lines = out.splitlines()
    i = next(k for k, ln in enumerate(lines) if ln.startswith("Job "))
    # (the table ends at the first blank line: the legend follows)
    rows = list(itertools.takewhile(str.strip, lines[i + 2:]))
    assert rows and all(r.index(" NoPreemption") == rows[0].index(" NoPreemption")
                        for r in rows)
    rc, out, _ = run(capsys, "negotiate", hostile_pool, "--json")
    doc = json.loads(out)
    assert f"{DASH}@{DOMAIN}" in {s["name"] for s in doc["submitters"]}
    assert any(SLOT_HOST in m["slot"] for m in doc["matches"])


def test_userprio_table_and_long_form_escape_names(hostile_pool, capsys):
    rc, out, err = run(capsys, "userprio", hostile_pool, "-allusers")
    assert rc == 0, err
    assert clean(out)
    assert f"  {EVIL_SHOWN}@{DOMAIN}" in out and f"  {printable(DASH)}@{DOMAIN}" in out
    # condor_userprio's fixed-width layout holds: every line between the header and the
    # footer is as wide as the rule (the name column is as wide as the escaped names)
    lines = out.splitlines()
    rule = lines[3]
    assert set(rule) <= {"-", " "}
    body = lines[4:lines.index(rule, 4)]
    assert body and all(len(ln) == len(rule) for ln in body)
    rc, out, err = run(capsys, "userprio", hostile_pool, "-allusers", "-l")
    assert rc == 0, err
    assert clean(out) and f'Name = "group_a.{EVIL_SHOWN}@{DOMAIN}"' in out
    rc, out, _ = run(capsys, "userprio", hostile_pool, "-allusers", "--json")
    assert f"group_a.{EVIL}@{DOMAIN}" in {r["Name"] for r in json.loads(out)["records"]}


def test_explain_escapes_every_line(hostile_pool, capsys):
    for jid in ("1.0", "2.0"):
        rc, out, err = run(capsys, "explain", hostile_pool, jid, "--autocluster")
        assert rc == 0, err
        assert clean(out) and clean(err)
    rc, out, _ = run(capsys, "explain", hostile_pool, "1.0", "--autocluster")
    assert f"group_a.{EVIL_SHOWN}@{DOMAIN}" in out and SLOT_HOST_SHOWN in out
    for raw in RAW:
        assert raw not in out
    rc, out, _ = run(capsys, "explain", hostile_pool, "1.0", "--json")
    assert json.loads(out)["job"]["submitter"] == f"group_a.{EVIL}@{DOMAIN}"


def test_input_error_is_one_clean_line(hostile_pool, capsys):
    e = InputError(f"snap\x1b[2J/{EVIL}", f"bad value {EVIL}\nsecond line", ad=f"ad {DASH}",
                   attribute="Na\u202eme", line=3)
    text = e.one_line()
    assert clean(text) and "\n" not in text
    assert text == (f"snap\\x1b[2J/{EVIL_SHOWN}: line 3: ad ad {printable(DASH)}: attribute "
                    f"Na\\u202eme: bad value {EVIL_SHOWN} second line")
    assert str(e) == text
    # through the command: a schedd name given on the command line ends up in the error
    rc, out, err = run(capsys, "explain", hostile_pool, "1.0", "--schedd", f"s{EVIL}")
    assert rc == 2 and out == ""
    assert clean(err) and err.count("\n") == 1 and EVIL_SHOWN in err


def test_ledger_lines_escape_reasons():
    rec = PassRecord(uuid="0123456789abcdef", pool="p", started_at=100.0, finished_at=101.0,
                     snapshot_time=100.0, status="partial",
                     reason=f"schedd s{EVIL} did not answer", real_cycle_time=None,
                     real_accountant_time=None, shadow_duration=None, capture_duration=0.1)
    line = summary_line(rec)
    assert clean(line) and "\n" not in line and f"schedd s{EVIL_SHOWN}" in line
    table = render_passes([{"uuid": "0123456789abcdef", "started_at": 100.0,
                            "status": "partial", "reason": rec.reason}], {})
    assert clean(table) and EVIL_SHOWN in table


# ---- recommend: table, script, apply ------------------------------------------------------

T0 = 1_800_000_000
HOUR = 3600
AT = T0 + HOUR * 7 + 600
POOL = "cm.example.org"
ALICE = f"-al{EVIL}ice@example.org"        # favoured: a factor; begins with "-" too
BOB = "-bob@example.org"                   # starved, factor 1: a floor


def _sub(name, usage, eup):
    return SubmitterObs(name=name, group="<none>", is_group=False, factor=1.0,
                        policy_factor=1.0, real_usage=usage, real_eup=eup, idle_jobs=50,
                        running_jobs=int(usage))


@pytest.fixture
def hostile_ledger(tmp_path) -> str:
    """8 complete passes an hour apart: alice uses 8, bob 2, both waiting, equal EUPs."""
    url = str(tmp_path / "ledger.sqlite")
    with open_ledger(url) as ledger:
        for i in range(8):
            t = T0 + HOUR * i
            ledger.record_pass(PassRecord(
                uuid=f"p{i}", pool=POOL, started_at=t, finished_at=t + 5, snapshot_time=t,
                status="complete", reason=None, real_cycle_time=t, real_accountant_time=t,
                shadow_duration=0.1, capture_duration=0.1, comparable=True,
                submitters=(_sub(ALICE, 8.0, 500.0), _sub(BOB, 2.0, 500.0))))
    return url


def recommend(capsys, url, config, *args) -> tuple[int, str, str]:
    args = list(args)
    argv = ["recommend", "--ledger", url, "--config", config]
    if "--apply" in args:
        with mock.patch("time.time", return_value=AT):
            return run(capsys, *argv, *args)
    return run(capsys, *argv, "--at", AT, *args)


def _expected_argvs(capsys, url, config) -> list[list[str]]:
    """The true argument lists, from the JSON (which keeps the true names)."""
    rc, out, _ = recommend(capsys, url, config, "--json")
    assert rc == 0
    recs = json.loads(out)["recommendations"]
    assert [(r["kind"], r["name"]) for r in recs] == [("factor", ALICE), ("floor", BOB)]
    return [shlex.split(r["command"]) for r in recs]


def test_recommend_table_escapes_names(hostile_ledger, config, capsys):
    rc, out, err = recommend(capsys, hostile_ledger, config)
    assert rc == 0, err
    assert clean(out)
    assert printable(ALICE) in out and BOB in out
    for raw in RAW:
        assert raw not in out


def test_names_beginning_with_a_dash_follow_their_option():
    """condor_userprio's main() (src/condor_tools/user_prio.cpp) takes the argument after
    -setfactor/-setceiling/-setfloor/-delete as the name, unchecked: the name is passed
    as it is, right after its option."""
    for kind, option, value in (("factor", "-setfactor", 2.0), ("ceiling", "-setceiling", 3.0),
                                ("floor", "-setfloor", 4.0), ("delete", "-delete", None)):
        for name in ("-x@y", "-duration@y", "-pool@y", "--@y", DASH + "@y"):
            argv = command_argv(Recommendation(kind, name, value, None, 60, "", {}), "p")
            i = argv.index(option)
            assert argv[i + 1] == name
            assert argv[:i] == ["condor_userprio", "-pool", "p"]


CONDOR_USERPRIO = next((p for p in ("/opt/htcondor/bin/condor_userprio",
                                    "/opt/htcondor/sbin/condor_userprio")
                        if os.access(p, os.X_OK)), None)


@pytest.mark.skipif(CONDOR_USERPRIO is None, reason="no condor_userprio binary")
def test_the_real_condor_userprio_reads_a_dash_name_as_a_name(tmp_path):
    """Without a pool the command fails to reach a negotiator; a misread argument gives
    the usage message instead."""
    env = {**os.environ, "CONDOR_CONFIG": "/dev/null", "HOME": str(tmp_path)}

    def userprio(*args):
        p = subprocess.run([CONDOR_USERPRIO, *args], capture_output=True, text=True,
                           errors="replace", env=env, timeout=120, cwd=tmp_path)
        return p.stdout + p.stderr

    assert "usage:" in userprio("-setfactor")                  # what a misreading gives
    assert "usage:" in userprio("--", "-setfactor", "a@b", "2")     # no "--"
    for kind, value in (("factor", 2.0), ("ceiling", 3.0), ("floor", 4.0), ("delete", None)):
        for name in ("-x@y", "-duration@y", "-setfactor@y"):
            argv = command_argv(Recommendation(kind, name, value, None, 60, "", {}),
                                "127.0.0.1:1")
            out = userprio(*argv[1:])
            assert "usage:" not in out and "negotiator" in out, (argv, out)


def test_script_holds_no_control_character_and_passes_the_true_names(
        hostile_ledger, config, capsys, tmp_path):
    expected = _expected_argvs(capsys, hostile_ledger, config)
    script = tmp_path / "changes.sh"
    rc, _, err = recommend(capsys, hostile_ledger, config, "--script", script)
    assert rc == 0, err
    data = script.read_bytes()
    assert_clean_bytes(data)
    text = data.decode()
    assert text.startswith("#!/bin/bash\n")           # $'...' quoting needs bash
    assert f"# factor {printable(ALICE)}: " in text
    commands = [ln for ln in text.splitlines() if ln and not ln.startswith("#")]
    assert commands == ["set -e"] + [script_command(a) for a in expected]
    assert commands[1] == ("condor_userprio -pool cm.example.org -setfactor "
                           "$'-alev\\x1b[31mil\\x0d\\x07\\xe2\\x80\\xa8\\xe2\\x80\\xae\\x7fice"
                           "@example.org' 1.5 -duration 86400")
    assert commands[2] == ("condor_userprio -pool cm.example.org -setfloor -bob@example.org 5 "
                           "-duration 86400")
    # --script - writes the same script to stdout
    rc, out, _ = recommend(capsys, hostile_ledger, config, "--script", "-")
    assert out == text
    # run it (by its shebang) with a condor_userprio that records its arguments
    bindir, calls = tmp_path / "bin", tmp_path / "calls"
    bindir.mkdir()
    calls.mkdir()
    fake = bindir / "condor_userprio"
    fake.write_text('#!/bin/bash\nn=$(ls "$CALLS" | wc -l)\nprintf \'%s\\0\' "$@" > "$CALLS/$n"\n')
    fake.chmod(0o755)
    env = {**os.environ, "PATH": f"{bindir}:{os.environ['PATH']}", "CALLS": str(calls)}
    subprocess.run([str(script)], env=env, check=True, timeout=60)
    got = [(calls / str(i)).read_bytes().split(b"\0")[:-1] for i in range(len(expected))]
    assert got == [[os.fsencode(a) for a in argv[1:]] for argv in expected]


HOSTILE_WORDS = [EVIL, DASH, ALICE, "a'b\\c", "new\nline", "tab\there", "\x1b", "'", "\\",
                 "$'x'", "\u202e-rm -rf /", "é日本", "x\x9b2J\u2029y", "\x01\x1f\x7f\x80\x9f"]


@pytest.mark.parametrize("word", HOSTILE_WORDS)
def test_each_quoted_word_reads_back_as_itself_in_bash(word):
    quoted = shell_word(word)
    assert all(c.isprintable() or c == "\n" for c in quoted)
    assert "\n" not in quoted or "\n" in word and not any(
        not c.isprintable() and c != "\n" for c in word)
    out = subprocess.run(["bash", "-c", f"printf %s {quoted}"], capture_output=True,
                         check=True, timeout=30).stdout
    assert out == os.fsencode(word)
    # and as a whole command line, in a script run with LC_ALL=C
    line = script_command(["printf", "%s|", word, "-x"])
    out = subprocess.run(["bash", "-c", line], capture_output=True, check=True, timeout=30,
                         env={**os.environ, "LC_ALL": "C"}).stdout
    assert out == os.fsencode(word) + b"|-x|"


def test_a_script_without_control_characters_stays_sh():
    recs = [Recommendation("factor", "-plain@x", 2.0, 1.0, 60, "r", {})]
    text = render_script(recs, now=T0)
    assert text.startswith("#!/bin/sh\n") and "condor_userprio -setfactor -plain@x 2" in text


def test_a_name_no_command_line_can_carry_is_not_run():
    recs = [Recommendation("factor", "nul\x00@x", 2.0, 1.0, 60, "r", {}),
            Recommendation("delete", "ok@x", None, None, None, "stale", {})]
    text = render_script(recs, now=T0)
    assert_clean_bytes(text.encode())
    assert "# not run: an argument holds a NUL character" in text
    assert [ln for ln in text.splitlines() if ln.startswith("condor_userprio")] == [
        "condor_userprio -delete ok@x"]

    class Ledger:
        def __init__(self):
            self.records = []

        def record_adjustment(self, adj):
            self.records.append(adj)

        def adjustments(self, name=None, since=None):
            return list(self.records)

    calls = []
    ledger = Ledger()
    done = apply_recommendations(recs, ledger=ledger, now=T0,
                                 run=lambda argv, **kw: calls.append(argv) or
                                 subprocess.CompletedProcess(argv, 0, "", ""))
    assert done[0].outcome.startswith("skipped: an argument holds a NUL character")
    assert done[1].outcome == "applied"
    assert calls == [["condor_userprio", "-delete", "ok@x"]]


def test_applied_and_failed_lines_are_escaped(hostile_ledger, config, capsys, mocker):
    expected = _expected_argvs(capsys, hostile_ledger, config)
    real_run = subprocess.run
    seen = []

    def run_(argv, *a, **kw):
        if argv[0] != "condor_userprio":
            return real_run(argv, *a, **kw)
        seen.append(list(argv))
        if "-setfloor" in argv:       # condor_userprio echoes the name in its complaint
            return subprocess.CompletedProcess(
                argv, 1, "", f"condor_userprio: You must specify ... (not {argv[4]})\n")
        return subprocess.CompletedProcess(argv, 0, "", "")

    mocker.patch("subprocess.run", side_effect=run_)
    rc, out, err = recommend(capsys, hostile_ledger, config, "--apply")
    assert rc == 1                                     # the floor failed
    assert seen == expected                            # the true names, dash and all
    assert clean(out) and clean(err)
    applied = [ln for ln in out.splitlines() if ln.startswith("applied: ")]
    assert applied == [printable(f"applied: {shlex.join(expected[0])}")]
    assert printable(ALICE) in applied[0]
    failed = [ln for ln in err.splitlines() if ln.startswith("failed: ")]
    assert len(failed) == 1 and "(not -bob@example.org)" in failed[0]
    # the ledger keeps the true command
    with open_ledger(hostile_ledger) as ledger:
        assert [a.command for a in ledger.adjustments()] == [shlex.join(a) for a in expected]
    # JSON after --apply: the true values, the outcome lines on stderr escaped
    rc, out, err = recommend(capsys, hostile_ledger, config, "--apply", "--json")
    doc = json.loads(out)
    assert [a["name"] for a in doc["applied"]] == [ALICE, BOB]
    assert clean(err) and printable(ALICE) in err


def test_recommend_views_directly():
    recs = [Recommendation("ceiling", ALICE, 3.0, None, 60, f"over while {EVIL} waits",
                           {"starved": [EVIL, DASH], f"k{EVIL}": 1.0})]
    table = render_table(recs)
    assert clean(table) and printable(ALICE) in table and EVIL_SHOWN in table
    assert len({len(ln) for ln in table.splitlines()[1:3]}) == 1     # rule and row
    script = render_script(recs, pool="p", now=T0)
    assert_clean_bytes(script.encode())
    assert f"# starved {EVIL_SHOWN}, {printable(DASH)}; k{EVIL_SHOWN} 1" in script


def test_audit_page_escapes_names(hostile_ledger, config, tmp_path, capsys):
    out_dir = tmp_path / "audit"
    rc, out, err = run(capsys, "audit", "--ledger", hostile_ledger, "-o", out_dir,
                       "--config", config)
    assert rc == 0, err
    page = (out_dir / "index.html").read_text("utf-8")
    assert clean(page.replace("\t", " ")), sorted(
        {hex(ord(c)) for c in page if not (c.isprintable() or c in "\n\t")})
    # (a long name may break before its @ or at a dot: <wbr> marks where)
    assert printable(ALICE) in page.replace("<wbr>", "")
    # the tables for machines keep the true names
    shares = json.loads((out_dir / "tables" / "submitter_shares.json").read_text())
    assert ALICE in {r["name"] for r in shares}


def test_log_lines_escape_names_and_keep_tracebacks():
    import logging
    from negotiator_ext.views.text import log_text
    try:
        raise ValueError("boom")
    except ValueError:
        import sys
        rec = logging.LogRecord("negotiator_ext", logging.WARNING, __file__, 1,
                                "pass of %s", ("evil\x1b[2J\nFAKE LINE",), sys.exc_info())
    text = log_text(rec, None)
    first, *rest = text.split("\n")
    assert first == "pass of evil\\x1b[2J\\x0aFAKE LINE"
    assert rest[0] == "Traceback (most recent call last):" and rest[-1] == "ValueError: boom"
