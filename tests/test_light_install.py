"""The base install is what a central manager needs (issue 16): every command but
`audit` (and parquet export) runs without the audit's stack (pandas, numpy, matplotlib,
jinja2), and `audit` without it says how to get it."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

from negotiator_ext import audit_cli, cli

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "hgq_nested_hep_lep_surplus"
HEAVY = ("pandas", "numpy", "matplotlib", "jinja2", "pyarrow", "PIL", "fontTools")

# run in a fresh interpreter where importing any heavy library fails
_BLOCKED = """
import sys
class Blocker:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {heavy!r}:
            raise ImportError(f"{{name}} is not installed (light install)")
        return None
sys.meta_path.insert(0, Blocker())
from negotiator_ext import cli
rc = cli.main(sys.argv[1:])
print("RC", rc)
"""


def _light(tmp_path, *args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", _BLOCKED.format(heavy=HEAVY), *map(str, args)],
                          capture_output=True, text=True, cwd=tmp_path, timeout=300)


def test_base_dependencies_hold_no_plotting_or_dataframe_library():
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    base = {d.split(">")[0].split("=")[0].split("[")[0].strip().lower()
            for d in meta["dependencies"]}
    assert base == {"htcondor", "prometheus_client", "pyyaml", "jsonschema"}
    audit = {d.split(">")[0].strip().lower() for d in meta["optional-dependencies"]["audit"]}
    assert set(audit_cli.AUDIT_MODULES) <= audit


def test_the_central_managers_commands_run_without_the_audit_stack(tmp_path):
    ledger = tmp_path / "l.sqlite"
    for args in (["negotiate", EXAMPLE],
                 ["negotiate", EXAMPLE, "--json"],
                 ["userprio", EXAMPLE, "-quotas", "-allusers"],
                 ["explain", EXAMPLE, "159.1"],
                 ["shadow", "--replay", EXAMPLE, EXAMPLE / "after-cycle", "--ledger", ledger,
                  "--matchlog", EXAMPLE / "expected" / "matchlog.txt",
                  "--matchlog-timezone", "UTC"],
                 ["ledger", "show", "--ledger", ledger],
                 ["ledger", "export", "--ledger", ledger, "--format", "csv", "-o",
                  tmp_path / "csv"],
                 ["recommend", "--ledger", ledger, "--at", "1795265300"],
                 ["simulate", ROOT / "examples" / "scenarios" / "group-quota-preemption" /
                  "scenario.yaml", "-o", tmp_path / "sim.sqlite", "--no-progress"]):
        proc = _light(tmp_path, *args)
        assert proc.stdout.rstrip().endswith("RC 0"), (args, proc.stderr[-2000:])
        assert "Traceback" not in proc.stderr, (args, proc.stderr[-2000:])


def test_audit_without_its_extra_says_how_to_get_it(tmp_path):
    proc = _light(tmp_path, "audit", "--ledger", tmp_path / "l.sqlite", "-o", tmp_path / "a")
    assert proc.stdout.rstrip().endswith("RC 2"), proc.stderr
    assert proc.stderr.strip().splitlines() == [
        "negotiator-ext: error: audit: needs pandas, matplotlib, jinja2, not installed: "
        "pip install 'negotiator-ext[audit]'"]
    assert not (tmp_path / "a").exists()


def test_audit_checks_for_its_extra_first(tmp_path, monkeypatch, capsys):
    import importlib
    real = importlib.import_module

    def without_matplotlib(name, *a):
        if name == "matplotlib":
            raise ImportError("No module named 'matplotlib'")
        return real(name, *a)
    monkeypatch.setattr(importlib, "import_module", without_matplotlib)
    assert cli.main(["audit", "--ledger", str(tmp_path / "l.sqlite"), "-o",
                     str(tmp_path / "a")]) == 2
    assert "needs matplotlib, not installed: pip install 'negotiator-ext[audit]'" in \
        capsys.readouterr().err
