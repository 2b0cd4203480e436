"""The package a site installs (issue 35, part 1): `python -m build` makes an sdist and a
wheel that `twine check` passes; the wheel, installed in a fresh venv (not the editable
checkout), runs `-V`, `install-files` and `negotiate`, and has the condor_master entry point
as a console script; `install-files` writes the shipped files where it is told, naming the
install's paths, and never overwrites a file the admin changed; `--version` / `-V`."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from negotiator_ext import __version__, cli, install

ROOT = Path(__file__).resolve().parents[1]
SITE = ROOT / "negotiator_ext" / "site_files"
EXAMPLE = ROOT / "examples" / "hgq_nested_hep_lep_surplus"
SCRIPTS = Path(sysconfig.get_path("scripts"))
SHIPPED_PATHS = "/opt/negotiator-ext"


def run_cli(capsys, *args) -> tuple[int, str, str]:
    rc = cli.main([str(a) for a in args])
    out = capsys.readouterr()
    return rc, out.out, out.err


def tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes()
            for p in sorted(root.rglob("*")) if p.is_file()}


# ---- what the package ships ---------------------------------------------------------------

def test_every_shipped_file_is_of_a_kind_install_files_writes():
    shipped = {str(p.relative_to(SITE)) for p in SITE.rglob("*")
               if p.is_file() and "__pycache__" not in p.parts}
    written = {f"{k.source}/{name}" for k in install.KINDS
               for name, _ in install.shipped_files(k)}
    assert shipped == written
    assert len(written) == 14
    for name in ("capture-snapshot", "shadow-pass"):
        assert os.access(SITE / "hooks" / name, os.X_OK)


def test_the_daemon_snippet_names_the_console_script_not_a_file_to_copy():
    text = (SITE / "etc" / "condor_config.d" / "61-negotiator-ext-daemon.conf").read_text()
    assert re.search(r"(?m)^NEGOTIATOR_EXT = /opt/negotiator-ext/\.venv/bin/"
                     r"negotiator-ext-daemon$", text)
    assert "libexec" not in text and "NEGOTIATOR_EXT_ENVIRONMENT" not in text


# ---- --version ----------------------------------------------------------------------------

@pytest.mark.parametrize("flag", ["-V", "--version"])
def test_version_names_ours_and_the_bindings(flag, capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main([flag])
    assert exc.value.code == 0
    out = capsys.readouterr().out.splitlines()
    import htcondor2
    assert out[0].startswith(f"negotiator-ext {__version__} (")
    assert str(ROOT / "negotiator_ext") in out[0]
    assert out[1].startswith("htcondor2 ")
    condor = re.search(r"\$CondorVersion:\s*(\S+)", htcondor2.version()).group(1)
    assert f"(HTCondor {condor} " in out[1]
    assert len(out) == 2


def test_version_says_when_the_bindings_cannot_be_imported(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "htcondor2", None)     # import raises ImportError
    with pytest.raises(SystemExit) as exc:
        cli.main(["-V"])
    assert exc.value.code == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith(f"negotiator-ext {__version__}")
    assert out[1].startswith("htcondor2: cannot be imported: ModuleNotFoundError: ")


# ---- install-files, in this process -------------------------------------------------------

def test_install_files_writes_every_kind_under_the_prefix_with_this_installs_paths(
        tmp_path, capsys):
    prefix = tmp_path / "site"
    rc, out, err = run_cli(capsys, "install-files", "--prefix", prefix)
    assert (rc, err) == (0, "")
    files = {p for p in tree(prefix) if not p.endswith(install.MANIFEST)}
    assert files == {str(p.relative_to(SITE)) for p in SITE.rglob("*") if p.is_file()}
    assert out.count("installed  ") == 14
    assert out.splitlines()[-1] == (f"14 installed; console scripts in {SCRIPTS}, "
                                    f"hooks in {prefix / 'hooks'}")
    for rel, data in tree(prefix).items():
        assert SHIPPED_PATHS.encode() not in data, rel
    conf = (prefix / "etc/condor_config.d/61-negotiator-ext-daemon.conf").read_text()
    assert f"\nNEGOTIATOR_EXT = {SCRIPTS / 'negotiator-ext-daemon'}\n" in conf
    cron = (prefix / "etc/cron.d/negotiator-ext-shadow").read_text()
    assert f"\nPATH={SCRIPTS}:/usr/local/bin:/usr/bin:/bin\n" in cron
    assert f" condor {prefix / 'hooks' / 'shadow-pass'} 2>&1 " in cron
    unit = (prefix / "etc/systemd/negotiator-ext-shadow.service").read_text()
    assert f"\nExecStart={SCRIPTS / 'negotiator-ext'} shadow --once\n" in unit
    # the rest byte for byte as shipped
    assert (prefix / "etc/grafana/negotiator-ext-dashboard.json").read_bytes() == \
        (SITE / "etc/grafana/negotiator-ext-dashboard.json").read_bytes()
    assert os.stat(prefix / "hooks" / "shadow-pass").st_mode & 0o777 == 0o755
    assert os.stat(prefix / "etc/cron.d/negotiator-ext").st_mode & 0o777 == 0o644
    # each directory's manifest: sha256sum's format, checkable with it
    manifest = (prefix / "etc/cron.d" / install.MANIFEST).read_text().splitlines()
    assert manifest == [
        f"{hashlib.sha256((prefix / 'etc/cron.d' / n).read_bytes()).hexdigest()}  {n}"
        for n in ("negotiator-ext", "negotiator-ext-shadow")]


def test_install_files_never_overwrites_a_file_the_admin_changed(tmp_path, capsys):
    prefix = tmp_path / "site"
    assert run_cli(capsys, "install-files", "--prefix", prefix)[0] == 0
    first = tree(prefix)
    rc, out, _ = run_cli(capsys, "install-files", "--prefix", prefix)
    assert rc == 0 and tree(prefix) == first and out.count("unchanged  ") == 14
    knobs = prefix / "etc/condor_config.d/60-negotiator-ext.conf"
    edited = knobs.read_text() + "NEGOTIATOR_EXT_INTERVAL = 120\n"
    knobs.write_text(edited)
    # a dry run says so and writes nothing
    rc, out, _ = run_cli(capsys, "install-files", "--prefix", prefix, "--dry-run")
    assert rc == 0 and f"would keep     {knobs}  (changed since it was written here" in out
    assert not knobs.with_name(knobs.name + ".rpmnew").exists()
    rc, out, _ = run_cli(capsys, "install-files", "--prefix", prefix)
    assert rc == 0
    assert f"kept       {knobs}  (changed since it was written here; this version's copy " \
           f"is 60-negotiator-ext.conf.rpmnew)" in out
    assert "13 unchanged, 1 kept;" in out
    assert knobs.read_text() == edited
    assert knobs.with_name(knobs.name + ".rpmnew").read_bytes() == first[
        "etc/condor_config.d/60-negotiator-ext.conf"]
    # nothing else moved; again: the same
    after = tree(prefix)
    assert {k: v for k, v in after.items() if not k.endswith(".rpmnew")} == \
        {**first, "etc/condor_config.d/60-negotiator-ext.conf": edited.encode()}
    assert run_cli(capsys, "install-files", "--prefix", prefix)[0] == 0
    assert tree(prefix) == after


def test_install_files_replaces_an_earlier_copy_left_as_written(tmp_path, capsys):
    """A copy written by an earlier version and untouched since is replaced; a copy found
    there but never written by install-files (a hand copy of an older file) is kept."""
    units = tmp_path / "units"
    units.mkdir()
    old = b"# an earlier version's unit\n"
    (units / "negotiator-ext-shadow.service").write_bytes(old)
    (units / "negotiator-ext-shadow.timer").write_bytes(old)
    (units / install.MANIFEST).write_text(
        f"{hashlib.sha256(old).hexdigest()}  negotiator-ext-shadow.service\n")
    rc, out, _ = run_cli(capsys, "install-files", "--units-dir", units)
    assert rc == 0
    assert f"updated    {units / 'negotiator-ext-shadow.service'}" in out
    assert f"kept       {units / 'negotiator-ext-shadow.timer'}  (not written by " \
           "install-files; this version's copy is negotiator-ext-shadow.timer.rpmnew)" in out
    assert (units / "negotiator-ext-shadow.service").read_bytes() != old
    assert (units / "negotiator-ext-shadow.timer").read_bytes() == old
    assert (units / "negotiator-ext-shadow.timer.rpmnew").read_bytes() == \
        (SITE / "etc/systemd/negotiator-ext-shadow.timer").read_bytes()
    # only the kinds named are written
    assert sorted(p.name for p in tmp_path.iterdir()) == ["units"]
    # the admin takes the new copy over: from then on it is ours again
    (units / "negotiator-ext-shadow.timer.rpmnew").rename(units / "negotiator-ext-shadow.timer")
    rc, out, _ = run_cli(capsys, "install-files", "--units-dir", units)
    assert out.count("unchanged  ") == 2
    assert "negotiator-ext-shadow.timer" in (units / install.MANIFEST).read_text()


def test_install_files_without_hooks_dir_says_what_the_cron_lines_name(tmp_path, capsys):
    rc, out, _ = run_cli(capsys, "install-files", "--cron-dir", tmp_path / "cron.d",
                         "--config-dir", tmp_path / "config.d")
    assert rc == 0
    assert out.splitlines()[-1] == (
        f"4 installed; console scripts in {SCRIPTS}; the cron lines name the hooks in "
        "/opt/negotiator-ext/hooks (no --hooks-dir)")
    assert " condor /opt/negotiator-ext/hooks/capture-snapshot " in \
        (tmp_path / "cron.d" / "negotiator-ext").read_text()


def test_install_files_skips_the_files_named(tmp_path, capsys):
    """The knobs into a live config.d without the condor_master daemon's snippet (the
    shadow runs from cron), and the shadow's cron line without the snapshot one."""
    rc, out, _ = run_cli(capsys, "install-files", "--config-dir", tmp_path / "config.d",
                         "--skip", "61-negotiator-ext-daemon.conf", "--cron-dir",
                         tmp_path / "cron.d", "--skip", "negotiator-ext")
    assert rc == 0
    assert f"skipped    {tmp_path / 'config.d' / '61-negotiator-ext-daemon.conf'}\n" in out
    assert "2 installed, 2 skipped;" in out
    assert sorted(tree(tmp_path)) == [
        f"config.d/{install.MANIFEST}", "config.d/60-negotiator-ext.conf",
        f"cron.d/{install.MANIFEST}", "cron.d/negotiator-ext-shadow"]
    rc, out, err = run_cli(capsys, "install-files", "--units-dir", tmp_path / "u",
                           "--skip", "61-negotiator-ext-daemon.conf")
    assert (rc, out) == (2, "")
    assert err == ("negotiator-ext: error: --skip: '61-negotiator-ext-daemon.conf' is not a "
                   "file this run would write (those are: negotiator-ext-shadow.service, "
                   "negotiator-ext-shadow.timer)\n")
    assert not (tmp_path / "u").exists()


@pytest.mark.parametrize("case", ["prefix-is-a-file", "dir-is-a-file", "file-is-a-dir",
                                  "nowhere", "cannot-make"])
def test_install_files_problems_are_one_line_naming_the_path(case, tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("")
    args, path = {
        "prefix-is-a-file": (["--prefix", blocker], f"{blocker}: not a directory (needed "
                                                    f"for {blocker / 'etc/condor_config.d'})"),
        "dir-is-a-file": (["--grafana-dir", blocker], f"{blocker}: not a directory"),
        "file-is-a-dir": (["--hooks-dir", tmp_path], f"{tmp_path / 'capture-snapshot'}: "
                                                     "not a regular file"),
        "nowhere": ([], "install-files: say where: --prefix DIR, or one or more of "
                        "--config-dir, --cron-dir"),
        "cannot-make": (["--config-dir", "/proc/no-such-dir/config.d"],
                        "/proc/no-such-dir/config.d: cannot be made: "),
    }[case]
    if case == "file-is-a-dir":
        (tmp_path / "capture-snapshot").mkdir()
    before = tree(tmp_path)
    rc, out, err = run_cli(capsys, "install-files", *args)
    assert rc == 2 and out == ""
    assert err.startswith(f"negotiator-ext: error: {path}") and err.count("\n") == 1
    assert tree(tmp_path) == before


# ---- the wheel, installed in a fresh venv -------------------------------------------------

def _run(argv, **kw) -> subprocess.CompletedProcess:
    proc = subprocess.run([str(a) for a in argv], capture_output=True, text=True,
                          timeout=120, **kw)
    assert proc.returncode == 0, f"{argv}: {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return proc


def test_the_wheel_builds_installs_in_a_fresh_venv_and_runs(tmp_path, capsys):
    # the source, as a fresh checkout has it (no egg-info, build/ or __pycache__)
    src = tmp_path / "src"
    shutil.copytree(ROOT / "negotiator_ext", src / "negotiator_ext",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "PIP_"))}
    env.update(PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_INPUT="1")
    # the sdist, then the wheel built from it; checked as a package index would
    dist = tmp_path / "dist"
    _run([sys.executable, "-m", "build", "--no-isolation", "--outdir", dist, src],
         env=env, cwd=tmp_path)
    (sdist,) = dist.glob("negotiator_ext-*.tar.gz")
    (wheel,) = dist.glob("negotiator_ext-*-py3-none-any.whl")
    checked = _run([sys.executable, "-m", "twine", "check", "--strict", sdist, wheel],
                   env=env, cwd=tmp_path)
    assert checked.stdout.count("PASSED") == 2
    # a fresh venv that sees this environment's packages (the dependencies: no network)
    # but not the editable checkout, and the wheel installed in it
    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", venv], env=env)
    (site,) = venv.glob("lib/python*/site-packages")
    here = {sysconfig.get_paths()[k] for k in ("purelib", "platlib")}
    (site / "dependencies.pth").write_text("".join(f"{p}\n" for p in sorted(here)))
    _run([sys.executable, "-m", "pip", "--python", venv / "bin" / "python", "install",
          "--no-deps", "--no-index", "--quiet", wheel], env=env, cwd=tmp_path)
    bindir = venv / "bin"
    env["PATH"] = f"{bindir}:{env.get('PATH', '/usr/bin:/bin')}"
    work = tmp_path / "work"
    work.mkdir()

    version = _run([bindir / "negotiator-ext", "-V"], env=env, cwd=work).stdout
    assert version.startswith(f"negotiator-ext {__version__} ({site / 'negotiator_ext'}; ")
    assert version.splitlines()[1].startswith("htcondor2 ")

    prefix = tmp_path / "site"
    first = _run([bindir / "negotiator-ext", "install-files", "--prefix", prefix],
                 env=env, cwd=work).stdout
    assert first.splitlines()[-1] == (f"14 installed; console scripts in {bindir}, "
                                      f"hooks in {prefix / 'hooks'}")
    conf = (prefix / "etc/condor_config.d/61-negotiator-ext-daemon.conf").read_text()
    daemon = re.search(r"(?m)^NEGOTIATOR_EXT = (.+)$", conf).group(1)
    assert daemon == str(bindir / "negotiator-ext-daemon")
    # the man page and completion from the wheel, where man and bash look for them
    page = prefix / "share/man/man1/negotiator-ext.1"
    assert page.read_bytes() == (SITE / "share/man/man1/negotiator-ext.1").read_bytes()
    if shutil.which("man"):
        found = _run(["man", "-w", "negotiator-ext"], cwd=work,
                     env={**env, "MANPATH": str(prefix / "share/man")}).stdout
        assert found.strip() == str(page)
    completion = prefix / "share/bash-completion/completions/negotiator-ext"
    assert _run(["bash", "-c", f"source {completion} && complete -p negotiator-ext"],
                env=env).stdout.endswith(" negotiator-ext\n")
    files = tree(prefix)
    second = _run([bindir / "negotiator-ext", "install-files", "--prefix", prefix],
                  env=env, cwd=work).stdout
    assert second.count("unchanged  ") == 14 and tree(prefix) == files
    knobs = prefix / "etc/condor_config.d/60-negotiator-ext.conf"
    knobs.write_text(knobs.read_text() + "NEGOTIATOR_EXT_INTERVAL = 120\n")
    third = _run([bindir / "negotiator-ext", "install-files", "--prefix", prefix],
                 env=env, cwd=work).stdout
    assert f"kept       {knobs}  (changed since it was written here" in third
    assert knobs.read_text().endswith("NEGOTIATOR_EXT_INTERVAL = 120\n")
    assert knobs.with_name(knobs.name + ".rpmnew").read_bytes() == \
        files["etc/condor_config.d/60-negotiator-ext.conf"]

    # condor_master's entry point, as the snippet names it
    proc = subprocess.run([daemon, "--bogus"], capture_output=True, text=True, env=env,
                          cwd=work, timeout=60)
    assert proc.returncode == 2 and proc.stderr.startswith("negotiator-ext-daemon: usage")

    # the README's first example, from the wheel: what the checkout prints
    negotiated = _run([bindir / "negotiator-ext", "negotiate", EXAMPLE], env=env,
                      cwd=work).stdout
    assert run_cli(capsys, "negotiate", EXAMPLE) == (0, negotiated, "")
    assert ", 27 matches\n" in negotiated.splitlines(keepends=True)[0]
