"""A snapshot's config is read beside its ads (pool._config_read_beside: HTCondor's
reader child started before the ads are read): the same config, the same errors in the
same order as reading it after them, and nothing left behind when the ads fail first."""

from __future__ import annotations

import dataclasses

import pytest

from conftest import FIXTURES, writable_copy
from negotiator_ext import pool as pool_mod
from negotiator_ext.adapters import condor_config
from negotiator_ext.errors import InputError
from negotiator_ext.pool import load_pool

SCENARIO = "hgq_nested_hep_lep_surplus"


@pytest.fixture
def reads(monkeypatch):
    """Every ConfigRead started, in order."""
    started = []
    real = condor_config.ConfigRead.__init__

    def init(self, path):
        started.append(self)
        real(self, path)
    monkeypatch.setattr(condor_config.ConfigRead, "__init__", init)
    return started


def test_the_config_read_beside_is_the_config(reads):
    got = load_pool(FIXTURES / SCENARIO)
    assert len(reads) == 1 and reads[0].path == FIXTURES / SCENARIO / "config"
    assert got.config == condor_config.load_config(FIXTURES / SCENARIO / "config")


def test_config_given_is_read_beside(tmp_path, reads):
    other = tmp_path / "other.config"
    other.write_text("GROUP_NAMES = a, b\nGROUP_QUOTA_DYNAMIC_a = 0.5\n")
    got = load_pool(FIXTURES / SCENARIO, other)
    assert [r.path for r in reads] == [other]
    assert got.config == condor_config.load_config(other)


def test_a_bad_config_is_named_as_when_read_after(tmp_path):
    snap = writable_copy(tmp_path, SCENARIO)
    (snap / "config").write_text("GROUP_NAMES = a\nthis is not config\n")
    with pytest.raises(InputError) as beside:
        load_pool(snap)
    with pytest.raises(InputError) as alone:
        condor_config.load_config(snap / "config")
    assert str(beside.value) == str(alone.value)


def test_bad_slots_are_reported_first_and_the_read_is_stopped(tmp_path, reads):
    snap = writable_copy(tmp_path, SCENARIO)
    (snap / "config").write_text("this is not config\n")
    (snap / "slots.ads").write_text("Name = \"slot1@x\"\nCpus = (1 +\n")
    with pytest.raises(InputError) as err:
        load_pool(snap)
    assert "slots.ads" in str(err.value)
    assert len(reads) == 1
    proc = reads[0]._proc
    assert proc is None or proc.returncode is not None      # stopped and reaped
    assert reads[0]._tmpdir is None                          # its private copy removed


def test_a_pool_of_several_negotiators_is_not_guessed(tmp_path, reads):
    """With negotiators/ the config is the chosen negotiator's: read after the ads."""
    snap = writable_copy(tmp_path, SCENARIO)
    (snap / "negotiators").mkdir()
    (snap / "negotiators" / "neg1.config").write_bytes((snap / "config").read_bytes())
    assert pool_mod._config_read_beside(snap, None) is None
    assert reads == []
    got = load_pool(snap)
    assert [r.path for r in reads] == [snap / "negotiators" / "neg1.config"]
    assert got.config == condor_config.load_config(snap / "negotiators" / "neg1.config")


def test_a_read_taken_long_after_it_ended_is_the_config(monkeypatch, tmp_path):
    """A caller that comes back to the read after CONFIG_READ_TIMEOUT (it was reading
    500,000 job ads meanwhile) gets the config: the reader, long finished, was not left
    blocked on a full pipe and then taken for a circular macro (issue 34). The config
    is one whose knobs are more than a pipe holds (64 KiB), as a real pool's can be."""
    import time
    monkeypatch.setattr(condor_config, "CONFIG_READ_TIMEOUT", 1.5)
    path = tmp_path / "config"
    path.write_text((FIXTURES / SCENARIO / "config").read_text() + "".join(
        f"SITE_NOTE_{i} = {'x' * 300}\n" for i in range(200)))
    read = condor_config.ConfigRead(path)
    time.sleep(2.5)                             # the caller is busy elsewhere
    params, raw = read.params()
    assert params["SITE_NOTE_199"] == "x" * 300
    again = condor_config.ConfigRead(path)
    time.sleep(2.5)
    assert again.result() == condor_config.load_config(path)


def test_a_file_read_before_is_answered_without_a_child(tmp_path):
    """The same text read again (here or from another directory, under another header of
    comment lines) starts no reader and gives the same knobs, CONFIG_ROOT the file's
    own; a text under an `#opt:` line, one naming CONFIG_ROOT read from another
    directory, one drawing $RANDOM_INTEGER, a changed file and a failed read are read
    again."""
    text = (FIXTURES / SCENARIO / "config").read_text() + "SITE_NOTE = ok\n"
    one, two = tmp_path / "one", tmp_path / "two" / "deeper"
    for d in (one, two):
        d.mkdir(parents=True)
        (d / "config").write_text(text)
    condor_config._READS.clear()
    first = condor_config.ConfigRead(one / "config")
    params, raw = first.params()
    assert first._proc is not None and params["SITE_NOTE"] == "ok"
    again = condor_config.ConfigRead(one / "config")
    elsewhere = condor_config.ConfigRead(two / "config")
    assert again._proc is None and elsewhere._proc is None
    assert again.params() == (params, raw)
    p2, r2 = elsewhere.params()
    assert p2["CONFIG_ROOT"] == str(two) and params["CONFIG_ROOT"] == str(one)
    assert {k: v for k, v in p2.items() if k != "CONFIG_ROOT"} == {
        k: v for k, v in params.items() if k != "CONFIG_ROOT"} and r2 == raw
    # what a caller does with its answer is not kept
    p2["SITE_NOTE"] = "changed"
    assert condor_config.ConfigRead(two / "config").params()[0]["SITE_NOTE"] == "ok"
    got = condor_config.load_config(two / "config")
    assert got.source == str(two / "config")
    assert got == dataclasses.replace(condor_config.load_config(one / "config"),
                                      source=got.source)

    # a header of comment lines is no part of the text; an `#opt:` line is
    (one / "config").write_text("# captured at 1\n# by a capture\n" + text)
    assert condor_config.ConfigRead(one / "config")._proc is None
    (one / "config").write_text("#opt:strict\n" + text)
    assert condor_config.ConfigMemo.key(one / "config")[0].startswith(b"#opt:strict\n")
    read = condor_config.ConfigRead(one / "config")
    assert read._proc is not None and read.params()[0]["SITE_NOTE"] == "ok"
    # (it changes what the rest means: a colon is for metaknobs only)
    (one / "config").write_text("GROUP_NAMES : a\n")
    assert condor_config.read_params(one / "config")[0]["GROUP_NAMES"] == "a"
    (one / "config").write_text("#opt:strict\nGROUP_NAMES : a\n")
    with pytest.raises(InputError, match="line 2: not valid HTCondor configuration"):
        condor_config.read_params(one / "config")

    for d in (one, two):        # CONFIG_ROOT named: the directory is part of the key
        (d / "config").write_text(text + "SITE_DIR = $(CONFIG_ROOT)/x\n")
    read = condor_config.ConfigRead(one / "config")
    assert read._proc is not None and read.params()[0]["SITE_DIR"] == f"{one}/x"
    read = condor_config.ConfigRead(two / "config")
    assert read._proc is not None and read.params()[0]["SITE_DIR"] == f"{two}/x"
    assert condor_config.ConfigRead(two / "config")._proc is None

    defaults = condor_config.read_params(None)          # no file: HTCondor's own
    read = condor_config.ConfigRead(None)
    assert read._proc is None and read.params()[1] == defaults[1]
    assert "SITE_NOTE" not in read.params()[0]

    (one / "config").write_text(text + "SITE_PICK = $RANDOM_INTEGER(1, 1000000)\n")
    for _ in range(2):
        read = condor_config.ConfigRead(one / "config")
        assert read._proc is not None
        read.params()

    (one / "config").write_text(text + "this is not config\n")
    for _ in range(2):
        read = condor_config.ConfigRead(one / "config")
        assert read._proc is not None
        with pytest.raises(InputError):
            read.params()
