"""`sweep --engine htcondor` on the test suite's personal pool: three configs of a
recorded run (tests/data/forecast/static-A1) forecast as real jobs, transferred in and
back by HTCondor, followed through their event log, and compared exactly as `--engine
local` compares them. Also: a forecast job that fails is named with its reason and the
others are still reported.

These run only where an HTCondor install is found (see tests/livepool.py)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.live

RUN = Path(__file__).parent / "data" / "forecast" / "static-A1"
UNTIL = "1795907773"


def owned(pool, path: Path) -> None:
    if pool.user is not None:
        for p in [path, *path.rglob("*")]:
            os.chown(p, pool.user.pw_uid, pool.user.pw_gid)


def user_python(pool) -> tuple[str, dict]:
    """A Python of this version the pool's user can run (this machine's venv may link to
    an interpreter under /root), with this one's package and site-packages: its path and
    environment. Skips where there is none."""
    from negotiator_ext.sim.sweep_htcondor import job_pythonpath
    env = dict(pool.env, PYTHONPATH=job_pythonpath())
    for exe in (sys.executable, f"/usr/bin/python{sys.version_info[0]}.{sys.version_info[1]}"):
        # it runs itself (the config reader and the local engine's children do)
        code = ("import subprocess, sys; subprocess.run([sys.executable, '-c', "
                "'import htcondor2, negotiator_ext'], check=True)")
        ok = subprocess.run(pool.as_user([exe, "-c", code]),
                            env=env, capture_output=True, timeout=60, cwd="/")
        if ok.returncode == 0:
            return exe, env
    pytest.skip("no Python of this version that the pool's user can run")


def sweep(pool, out: Path, engine: str, *extra: str) -> subprocess.CompletedProcess:
    exe, env = user_python(pool)
    argv = [exe, "-m", "negotiator_ext", "sweep", str(out.parent / "in" / "snapshot"),
            "--history", str(out.parent / "in" / "history.ads"),
            str(out.parent / "in" / "queue-end.ads"), "--until", UNTIL,
            "--vary", "GROUP_QUOTA_group_a=4,12", "--engine", engine, "-o", str(out), *extra]
    if engine == "htcondor":
        argv += ["--timeout", "400", "--python", exe]
    return subprocess.run(pool.as_user(argv), env=env, capture_output=True, text=True,
                          timeout=600, cwd=out.parent)


@pytest.fixture
def inputs(clean_pool):
    # not under pytest's tmp_path: the pool's user cannot reach a directory of root's
    tmp_path = Path(tempfile.mkdtemp(prefix="negext-sweep-"))
    d = tmp_path / "in"
    shutil.copytree(RUN / "snapshot", d / "snapshot")
    for name in ("history.ads", "queue-end.ads"):
        shutil.copyfile(RUN / name, d / name)
    tmp_path.chmod(0o755)
    owned(clean_pool, tmp_path)
    yield tmp_path
    shutil.rmtree(tmp_path, ignore_errors=True)


def rows(out: Path) -> list[dict]:
    return json.loads((out / "report.json").read_text())["configs"]


def test_a_sweep_as_real_jobs_gives_the_local_report(clean_pool, inputs):
    pool = clean_pool
    local = sweep(pool, inputs / "local", "local")
    assert local.returncode == 0, local.stderr
    remote = sweep(pool, inputs / "jobs", "htcondor")
    assert remote.returncode == 0, remote.stderr
    assert "3 of 3 forecasts compared" in remote.stdout
    assert rows(inputs / "jobs") == rows(inputs / "local")
    report = json.loads((inputs / "jobs" / "report.json").read_text())
    assert report["htcondor"]["submitted"] == 3 and not report["missing"]
    # the jobs really ran on the pool: in its history, with their results sent back
    hist = pool.tool("condor_history", "-af", "ClusterId", "ExitCode", "-limit", "10").stdout
    assert hist.count(f"{report['htcondor']['cluster']} 0") == 3
    for d in sorted((inputs / "jobs" / "runs").iterdir()):
        assert json.loads((d / "result.json").read_text())["groups"]


def test_a_failed_forecast_job_is_named_and_the_others_reported(clean_pool, inputs):
    pool = clean_pool
    # one config whose forecast fails in the job: a history file that is not a history
    (inputs / "in" / "queue-end.ads").write_text("not = a job\n")
    owned(pool, inputs)
    got = sweep(pool, inputs / "bad", "htcondor")
    assert got.returncode == 1, got.stdout + got.stderr
    assert "no forecast" in got.stderr and "not a job ad" in got.stderr
    assert "0 of 3 forecasts compared" in got.stdout
