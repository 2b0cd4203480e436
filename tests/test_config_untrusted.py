"""A snapshot's config comes from elsewhere: read as data, bounded in time and memory
(issue 14, first bullet)."""

import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import writable_copy
from negotiator_ext.adapters import condor_config
from negotiator_ext.adapters.condor_config import load_config, read_params
from negotiator_ext.errors import InputError

SCENARIO = "hgq_nested_hep_lep_surplus"
CLI = Path(sys.executable).parent / "negotiator-ext"


def snapshot_with(tmp_path, text):
    """A copy of the fixture snapshot with `text` appended to its config; the first line
    of `text` is the returned line number."""
    snap = writable_copy(tmp_path, SCENARIO, "snap")
    cfg = snap / "config"
    body = cfg.read_bytes()
    first = body.count(b"\n") + 1
    cfg.write_bytes(body + (text.encode() if isinstance(text, str) else text))
    return snap, first


def negotiate(snap, timeout=30):
    cmd = [str(CLI)] if CLI.exists() else [sys.executable, "-m", "negotiator_ext"]
    start = time.monotonic()
    proc = subprocess.run(cmd + ["negotiate", str(snap)], capture_output=True, text=True,
                          timeout=timeout)
    return proc, time.monotonic() - start


# Each line HTCondor would run, or that reaches this host's files, environment or accounts,
# or differs per read: refused with exit 2, one line naming the file and the line, nothing run.
REFUSED = [
    ("include command : /usr/bin/touch {pwned}\n", "runs a command (include command : ...)"),
    ("include : /usr/bin/touch {pwned} |\n", "runs a command (include : ...)"),
    ("include ifexist command : /usr/bin/touch {pwned}\n",
     "runs a command (include ifexist command : ...)"),
    ("includeifexist command : /usr/bin/touch {pwned}\n",
     "runs a command (includeifexist command : ...)"),
    ("@include output into {pwned} : /usr/bin/id\n",
     "runs a command (@include output into {pwned} : ...)"),
    ("  INCLUDE COMMAND:/usr/bin/touch {pwned}\n", "runs a command (INCLUDE COMMAND : ...)"),
    ("inc\\\nlude command : /usr/bin/touch {pwned}\n", "runs a command (include command : ...)"),
    ("if false\ninclude command : /usr/bin/touch {pwned}\nendif\n", "runs a command"),
    ("include : /dev/zero\n", "includes a file (include : ...)"),
    ("include ifexist : {tmp}/other\n", "includes a file (include ifexist : ...)"),
    ("LOCAL_CONFIG_FILE = /usr/bin/touch {pwned} |\n", "runs a command (LOCAL_CONFIG_FILE = ... |)"),
    ("negotiator.local_config_dir = /usr/bin/touch {pwned} |\n",
     "runs a command (LOCAL_CONFIG_DIR = ... |)"),
    ("USER_CONFIG_FILE = /usr/bin/touch {pwned}|\n", "runs a command (USER_CONFIG_FILE = ... |)"),
    ("CLASSAD_USER_LIBS = {tmp}/evil.so\n", "loads code into the reading process (CLASSAD_USER_LIBS)"),
    ("CLASSAD_USER_PYTHON_MODULES = evil\n", "loads code"),
    ("X = $ENV(HOME)\n", "reads this host's environment ($ENV)"),
    ("X = $ENV(NOPE:default)\n", "reads this host's environment ($ENV)"),
    ("X = $(ENV(HOME))\n", "reads this host's environment ($ENV)"),
    ("if $ENV(HOME)\nendif\n", "reads this host's environment ($ENV)"),
    ('X = $EVAL(userHome("root"))\n', "looks up this host's accounts (userHome())"),
    ("X = 1\0\n", "a NUL byte"),
]


@pytest.mark.parametrize("text, message", REFUSED)
def test_a_snapshot_config_that_would_run_or_reach_out_is_refused(tmp_path, text, message):
    pwned, tmp = tmp_path / "pwned", tmp_path
    snap, line = snapshot_with(tmp_path, text.format(pwned=pwned, tmp=tmp))
    if text.startswith("if false"):
        line += 1
    proc, took = negotiate(snap)
    assert proc.returncode == 2, proc.stderr
    err = proc.stderr.splitlines()
    assert len(err) == 1 and proc.stdout == ""
    assert err[0].startswith(f"negotiator-ext: error: {snap / 'config'}: line {line}: "
                             + message.format(pwned=pwned, tmp=tmp))
    assert not pwned.exists()
    assert took < 10


def test_the_knobs_htcondor_acts_on_while_reading_are_not_followed(tmp_path, monkeypatch):
    """Built with macros (past the scan), LOCAL_CONFIG_FILE still runs nothing; a snapshot's
    LOCAL_CONFIG_DIR (a `condor_config_val -dump` names the other site's) is not read."""
    pwned = tmp_path / "pwned"
    confd = tmp_path / "config.d"
    confd.mkdir()
    (confd / "10-groups").write_text("GROUP_NAMES = from_this_host\n")
    (tmp_path / "local").write_text("GROUP_NAMES = from_this_host\n")
    (tmp_path / "user_config").write_text("GROUP_NAMES = from_this_host\n")
    snap, _ = snapshot_with(tmp_path,
                            f"N = LOCAL_CONFIG_FILE\n$(N) = /usr/bin/touch {pwned} |\n"
                            f"LOCAL_CONFIG_DIR = {confd}\nUSER_CONFIG_FILE = {tmp_path}/user_config\n"
                            "M = _CONFIG_FILE\nNEGOTIATOR.LOCAL$(M) = " + str(tmp_path / "local")
                            + "\nREQUIRE_LOCAL_CONFIG_FILE = true\n")
    proc, _ = negotiate(snap)
    assert proc.returncode == 0, proc.stderr
    assert not pwned.exists()
    c = load_config(snap / "config")
    assert [g.name for g in c.groups][0] == "group_physics"


def test_a_macro_built_to_read_the_environment_sees_none_of_this_hosts(tmp_path, monkeypatch):
    monkeypatch.setenv("NEGOTIATOR_EXT_TEST_SECRET", "s3cret")
    cfg = tmp_path / "config"
    cfg.write_text("D = $\nA = $(D)ENV(NEGOTIATOR_EXT_TEST_SECRET)\nB = $(D)ENV(HOME)\n")
    params, _ = read_params(cfg)
    assert params["A"] == "UNDEFINED" and params["B"] == "UNDEFINED"


@pytest.mark.parametrize("text, knobs", [
    ("A = $(B)\nB = $(A)\n", "A -> B -> A"),
    ("x = 1\nA = $(B:0) + 1\nB = 2 * $(a)\n", "A -> B -> A"),
    ("NEGOTIATOR.A = $(C)\nC = $INT(A)\n", "NEGOTIATOR.A -> C -> NEGOTIATOR.A"),
    ("A = $INT(A)\n", "A -> A"),        # HTCondor's reader dies of SIGSEGV on this one
    ("A = 1\nA = $(A) $(B)\nB = $(A)\n", "A -> B -> A"),
    ("A = x\nB = $(A)\nA @= end\n$(B) y\n@end\n", "B -> A -> B"),
])
def test_a_circular_macro_is_named_at_once(tmp_path, text, knobs):
    snap, first = snapshot_with(tmp_path, text)
    proc, took = negotiate(snap)
    assert proc.returncode == 2
    err = proc.stderr.splitlines()
    assert len(err) == 1 and f"{snap / 'config'}: line " in err[0]
    assert f"circular macro {knobs}: HTCondor would expand it without end" in err[0]
    assert took < 10


def test_reading_is_bounded_in_time(tmp_path, monkeypatch):
    """A cycle the scan cannot see (through HTCondor's param table: SPOOL's default is
    $(LOCAL_DIR)/spool), or through a knob set in an `if`, ends at the time limit."""
    monkeypatch.setattr(condor_config, "CONFIG_READ_TIMEOUT", 2)
    cfg = tmp_path / "config"
    cfg.write_text("LOCAL_DIR = $(SPOOL)\n")
    start = time.monotonic()
    with pytest.raises(InputError) as e:
        read_params(cfg)
    assert time.monotonic() - start < 10
    assert e.value.one_line() == (f"{cfg}: HTCondor did not finish reading it within 2 s: "
                                  "a circular macro?")
    cfg.write_text("if true\nA = $(B)\nendif\nB = $(A)\n")
    with pytest.raises(InputError, match=r"within 2 s: a circular macro \(A -> B -> A\)\?$"):
        read_params(cfg)


def test_a_reader_that_dies_is_an_input_error(tmp_path):
    """HTCondor's reader overflows its stack on `A = $INT(A)`; in an `if` it gets that far."""
    cfg = tmp_path / "config"
    cfg.write_text("if true\nA = $INT(A)\nendif\n")
    with pytest.raises(InputError) as e:
        read_params(cfg)
    assert e.value.one_line() == (f"{cfg}: HTCondor's config reader died (SIGSEGV) reading "
                                  "it: a circular macro (A -> A)?")


def test_reading_is_bounded_in_memory(tmp_path, monkeypatch):
    monkeypatch.setattr(condor_config, "CONFIG_READ_MEMORY", 350 * 2**20)
    cfg = tmp_path / "config"
    cfg.write_text("A0 = " + "x" * 5_000_000 + "\nB = " + "$(A0)" * 100 + "\n")
    with pytest.raises(InputError, match=r"HTCondor ran out of memory reading it \(.*; the "
                                         r"limit is 0\.341797 GiB\): a macro that grows"):
        read_params(cfg)


HONEST = """\
use ROLE : CentralManager
use SECURITY : HOST_BASED
BASE = 5
DEFAULT_PRIO_FACTOR = $(BASE) * 2
PRIORITY_HALFLIFE = $INT(BASE) * 3600
NEGOTIATOR_INTERVAL = $(UNSET_KNOB:90)
GROUP_NAMES = a
GROUP_NAMES = $(GROUP_NAMES), b
GROUP_NAMES = $(GROUP_NAMES), \\
# a comment inside a continuation (ends in one too) \\
  c
NEGOTIATOR.GROUP_QUOTA_a = 3
GROUP_QUOTA_a = $(NEGOTIATOR.GROUP_QUOTA_a) + 1
GROUP_QUOTA_b = $(GROUP_QUOTA_b:2)
if version >= 8.0
  GROUP_ACCEPT_SURPLUS = True
else
  GROUP_ACCEPT_SURPLUS = False
endif
NEGOTIATOR_PRE_JOB_RANK @= end
  RemoteOwner =?= UNDEFINED
@end
PREEMPTION_REQUIREMENTS = $(PREEMPTION_REQUIREMENTS:False)
NEGOTIATOR_MATCH_EXPRS = X
NEGOTIATOR_MATCH_EXPRS = $(NEGOTIATOR_MATCH_EXPRS) Y
NEGOTIATOR_EXT_STATE_DIR = $(CONFIG_ROOT)/state
LOCAL_CONFIG_FILE = /etc/condor/condor_config.local
LOCAL_CONFIG_DIR = /etc/condor/config.d
# $ENV(HOME) and include command : x in a comment are text
"""


def test_an_honest_config_reads_as_htcondor_reads_it_as_this_hosts(tmp_path, monkeypatch):
    """The same knobs as when HTCondor reads the file as this host's own configuration
    (CONDOR_CONFIG), but for the knobs it would act on (read as unset)."""
    snap = tmp_path / "snap"
    snap.mkdir()
    cfg = snap / "config"
    cfg.write_text(HONEST)
    params, raw = read_params(cfg)
    c = load_config(cfg)
    assert c.default_prio_factor == 10.0 and c.priority_halflife == 18000.0
    assert c.negotiator_interval == 90
    assert [g.name for g in c.groups] == ["a", "b", "c"]
    by = {g.name: g for g in c.groups}
    assert by["a"].static_quota == 3.0 and by["b"].static_quota == 2.0
    assert all(g.accept_surplus for g in c.groups)
    assert c.ext["STATE_DIR"] == f"{snap}/state"        # CONFIG_ROOT: the file's directory
    assert params["NEGOTIATOR_MATCH_EXPRS"] == "X Y"
    assert params["DAEMON_LIST"].split() == ["MASTER", "COLLECTOR", "NEGOTIATOR"]

    # As this host's own: without the other site's LOCAL_CONFIG_* (HTCondor would read them)
    mine = snap / "condor_config"
    mine.write_text("".join(ln for ln in HONEST.splitlines(True) if "LOCAL_CONFIG" not in ln))
    monkeypatch.setenv("CONDOR_CONFIG", str(mine))
    host, host_raw = read_params(mine)
    from negotiator_ext.adapters.config_guard import NEUTRALIZED
    acted_on = set(NEUTRALIZED) | {f"NEGOTIATOR.{k}" for k in NEUTRALIZED}
    volatile = {"PID", "PPID", "PERIODIC_CHECKPOINT"}   # its default holds $RANDOM_INTEGER
    assert ({k: v for k, v in params.items() if k.upper() not in acted_on | volatile}
            == {k: v for k, v in host.items() if k.upper() not in acted_on | volatile})
    assert raw == host_raw or {k for k in set(raw) ^ set(host_raw)} <= acted_on


def test_the_fixture_configs_read_as_before(tmp_path, monkeypatch):
    from conftest import FIXTURES, SCENARIOS
    for s in SCENARIOS:
        cfg = FIXTURES / s / "config"
        if not cfg.is_file():
            continue
        got = load_config(cfg)
        monkeypatch.setenv("CONDOR_CONFIG", str(cfg.resolve()))
        assert load_config(cfg) == got, s
        monkeypatch.delenv("CONDOR_CONFIG")


def test_this_hosts_own_config_file_is_read_as_it_is(tmp_path, monkeypatch):
    """The file CONDOR_CONFIG names (the shadow daemon's --config sets it) may include."""
    other = tmp_path / "other"
    other.write_text("GROUP_NAMES = from_include\n")
    cfg = tmp_path / "condor_config"
    cfg.write_text(f"include : {other}\n")
    with pytest.raises(InputError, match="line 1: includes a file"):
        read_params(cfg)
    monkeypatch.setenv("CONDOR_CONFIG", str(cfg))
    assert read_params(cfg)[0]["GROUP_NAMES"] == "from_include"


def test_a_syntax_error_names_the_line_of_the_file_not_of_a_copy(tmp_path, monkeypatch):
    import tempfile
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    cfg = tmp_path / "config"
    cfg.write_text("A = 1\nB = \\\n  2\nthis is not valid\n")
    with pytest.raises(InputError) as e:
        read_params(cfg)
    assert e.value.one_line() == (f"{cfg}: line 4: not valid HTCondor configuration: "
                                  "'this is not valid'")
    cfg.write_text("A = 1\nif true\n")
    with pytest.raises(InputError) as e:
        read_params(cfg)
    assert e.value.one_line().startswith(f"{cfg}: line 2: not valid HTCondor configuration")
    assert "negotiator-ext-config-" not in e.value.one_line()
    assert list((tmp_path / "tmp").iterdir()) == []      # the private copy is gone
