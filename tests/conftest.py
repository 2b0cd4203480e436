import itertools
import math
import shutil
import time
from pathlib import Path

import pytest

DATA = Path(__file__).parent / "data"
FIXTURES = DATA / "fixtures"
SCENARIOS = sorted(p.name for p in FIXTURES.iterdir() if (p / "slots.ads").is_file())

_LIVE_SKIPPED: list[str] = []


def pytest_collection_modifyitems(config, items):
    """Without an HTCondor install the live tests are left out, and the run says so in
    one line (pytest_terminal_summary) instead of one skip line per test."""
    from livepool import find_release
    if find_release() is not None:
        return
    live = [item for item in items if item.get_closest_marker("live")]
    if live:
        items[:] = [item for item in items if not item.get_closest_marker("live")]
        config.hook.pytest_deselected(items=live)
        _LIVE_SKIPPED.extend(item.nodeid for item in live)


def pytest_terminal_summary(terminalreporter, config):
    from livepool import SKIP_REASON, find_release
    if _LIVE_SKIPPED:
        terminalreporter.write_line(f"{len(_LIVE_SKIPPED)} live tests skipped: {SKIP_REASON}")
    elif getattr(config, "workerinput", None) is None and config.pluginmanager.hasplugin(
            "dsession") and find_release() is None:
        # the pytest-xdist controller: its workers collected (and left the live tests
        # out), and their summaries are not shown
        terminalreporter.write_line(f"live tests skipped: {SKIP_REASON}")


# ---- pytest-xdist (pyproject: addopts "-n 3 --dist loadfile") ------------------------------
#
# Three workers, each with its own session fixtures: its own personal pool (live_pool: a
# scratch directory and a collector port of its own, livepool.free_port), its own
# PostgreSQL server (test_ledger.postgres_server) and tmp_path. The live tests mostly wait
# on real negotiation cycles: pools wait side by side, or beside another worker's
# computing (three workers on 2 cores: 9.4-9.8 minutes for the suite where two took
# 11.1). Whole files go to one worker (their module fixtures are made once).

# files that share an expensive session fixture go to one worker together, so that it is
# made once (two_users_run: the two-user scenario simulated over 60 hours)
XDIST_TOGETHER = {
    "tests/test_simulate.py": "two_users_run",
    "tests/test_audit_simulated.py": "two_users_run",
}

# the files (or groups) that take longest, started first, longest first, so that no
# worker is left with a long one at the end while the others have nothing (measured with
# --durations; any file not named here comes after them, as pytest-xdist orders them).
# The live files (tests/test_live_*.py: mostly waiting) and the others (mostly computing)
# are handed out in turn, so that one worker's waits overlap another's computing rather
# than all computing at once on a machine busy with other work.
# This only orders the run: every collected test runs, named here or not.
XDIST_LONGEST_FIRST = [
    "tests/test_live_faults.py",
    "tests/test_live_shadow.py",
    "two_users_run",
    "tests/test_cycle_properties.py",
    "tests/test_live_hostile.py",
    "tests/test_live_admin.py",
    "tests/test_fuzz_inputs.py",
    "tests/test_audit_scale.py",
    "tests/test_shadow.py",
    "tests/test_live_master.py",
    "tests/test_ledger_faults.py",
    "tests/test_live_sweep.py",
    "tests/test_audit_site_scale.py",
    "tests/test_live_production.py",
]


def pytest_xdist_make_scheduler(config, log):
    """--dist loadfile, with the files of XDIST_TOGETHER as one unit and the units of
    XDIST_LONGEST_FIRST handed out first. Other --dist modes are pytest-xdist's own."""
    if config.getoption("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class Scheduling(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            scope = super()._split_scope(nodeid)
            return XDIST_TOGETHER.get(scope, scope)

        def _assign_work_unit(self, node) -> None:
            # the work queue as schedule() built it (files with the most tests first),
            # once, before the first unit is handed out: the longest units first, live
            # and other units in turn
            if not getattr(self, "_ordered", False):
                self._ordered = True
                rank = {unit: i for i, unit in enumerate(XDIST_LONGEST_FIRST)}
                units = sorted(self.workqueue, key=lambda u: rank.get(u, len(rank)))
                live = [u for u in units if u.startswith("tests/test_live_")]
                other = [u for u in units if not u.startswith("tests/test_live_")]
                order = [u for pair in itertools.zip_longest(live, other) for u in pair
                         if u is not None]
                for unit in reversed(order):
                    self.workqueue.move_to_end(unit, last=False)
            super()._assign_work_unit(node)

    return Scheduling(config, log)


@pytest.fixture
def utc(monkeypatch):
    """Dates print in local time, as HTCondor's tools do; the recordings were made in UTC."""
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def non_finite_numbers(doc) -> list:
    """Every NaN or infinity among the numbers of a JSON document (parsed)."""
    if isinstance(doc, dict):
        return [v for x in doc.values() for v in non_finite_numbers(x)]
    if isinstance(doc, list):
        return [v for x in doc for v in non_finite_numbers(x)]
    return [doc] if isinstance(doc, float) and not math.isfinite(doc) else []


def unpack_recording(archive: Path, tmp_path: Path) -> Path:
    """A recording kept as `<name>.tar.gz` (one directory `<name>/`), unpacked under
    `tmp_path`: its directory."""
    import tarfile
    with tarfile.open(archive) as tar:
        tar.extractall(tmp_path, filter="data")
    return tmp_path / archive.name.removesuffix(".tar.gz")


def recorded_snapshot_dirs(tmp_path: Path) -> list[Path]:
    """Every recorded pool state with a slots.ads: the fixtures, and each snapshot of
    every recording in tests/data (unpacked under `tmp_path`)."""
    dirs = sorted(p for p in FIXTURES.iterdir() if (p / "slots.ads").exists())
    for archive in sorted(DATA.rglob("*.tar.gz")):
        root = unpack_recording(archive, tmp_path / archive.name)
        dirs += sorted({p.parent for p in root.rglob("slots.ads")})
    return dirs


def synthetic_forecast(directory: Path, *, slots: int, jobs: int, history_jobs: int,
                       seed: int = 1) -> tuple[Path, Path]:
    """A synthetic pool's snapshot and an hour of history for a forecast
    (bench/synth.py, bench/bench_forecast.py), made under `directory` unless there:
    (snapshot, history file)."""
    import sys
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
    import bench_forecast
    import synth
    snap, hist = directory / f"snapshot{seed}", directory / f"history{seed}.ads"
    if not snap.exists():
        synth.generate(snap, slots=slots, jobs=jobs, seed=seed)
        bench_forecast.write_history(snap, hist, history_jobs, 1, seed=seed)
    return snap, hist


def spy_quick_checks(monkeypatch) -> list[bool]:
    """Whether each CheckMatches from now on looked at the changed slots alone (the
    SlotChanges it was handed cover the records written since the last), in order."""
    from negotiator_ext.core.accountant import Accountant
    quick: list[bool] = []
    check = Accountant.check_matches

    def spy(self, slots, now, changes=None):
        quick.append(changes is not None and self._touched is not None
                     and self._touched <= changes.names)
        return check(self, slots, now, changes)
    monkeypatch.setattr(Accountant, "check_matches", spy)
    return quick


def writable_copy(tmp_path, scenario, name=None):
    """A copy of a recorded fixture that a test may change (the recordings are read-only)."""
    d = tmp_path / (name or scenario)
    shutil.copytree(FIXTURES / scenario, d)
    for p in d.rglob("*"):
        p.chmod(0o644 if p.is_file() else 0o755)
    return d


@pytest.fixture
def config(tmp_path) -> str:
    """An empty HTCondor config file, for `--config`: this host's knobs are never read."""
    path = tmp_path / "empty.conf"
    path.write_text("")
    return str(path)


@pytest.fixture(autouse=True)
def _restore_negotiator_ext_logging():
    """Commands called in-process (cli.main) add a stderr handler to the package logger,
    as a real process does once: take it away after each test."""
    import logging
    log = logging.getLogger("negotiator_ext")
    handlers, level = list(log.handlers), log.level
    yield
    log.handlers[:] = handlers
    log.setLevel(level)


@pytest.fixture(scope="session")
def two_users_run(tmp_path_factory):
    """The shipped two-users scenario simulated once for the whole test session (the
    simulator's and the audit's tests read the same ledger): every 5 minutes instead of
    every minute (its jobs run 5 minutes; the accountant's decay does not depend on the
    step), over 60 hours. (scenario, ledger path)."""
    import dataclasses
    from negotiator_ext.adapters.ledger import open_ledger
    from negotiator_ext.scenario import load_scenario
    from negotiator_ext.simulate import Simulation
    path = Path(__file__).parent.parent / "examples" / "scenarios" / "two-users" / "scenario.yaml"
    sc = dataclasses.replace(load_scenario(path), interval=300, span=60 * 3600)
    url = str(tmp_path_factory.mktemp("two-users") / "ledger.sqlite")
    with open_ledger(url) as ledger:
        report = Simulation(sc, ledger).run()
    return sc, url, report


@pytest.fixture(scope="session")
def live_pool():
    """One personal HTCondor pool of real daemons for the session's live tests (see
    tests/livepool.py); the tests skip, with one line saying how to enable them, where
    no HTCondor install is found."""
    from livepool import SKIP_REASON, find_release, start_pool
    release = find_release()
    if release is None:
        pytest.skip(SKIP_REASON)
    pool = start_pool(release)
    try:
        yield pool
    finally:
        pool.stop()
        shutil.rmtree(pool.root, ignore_errors=True)


@pytest.fixture
def clean_pool(live_pool):
    """The session's pool with no jobs and no test configuration, before and after."""
    live_pool.reset()
    yield live_pool
    live_pool.reset()
