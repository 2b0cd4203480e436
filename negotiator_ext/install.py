"""What an install of negotiator-ext is, and the files a site puts beside it.

`version_text`: `negotiator-ext --version` / `-V`, ours and the bindings' versions.

`negotiator-ext install-files`: the files shipped in the package under `site_files/`
(HTCondor config snippets, cron lines, systemd units, the cron lines' hooks, Prometheus
rules, a Grafana dashboard, the man page, bash and zsh completion) written where the admin
says:

  negotiator-ext install-files [--prefix DIR] [--config-dir DIR] [--cron-dir DIR]
                               [--units-dir DIR] [--hooks-dir DIR] [--prometheus-dir DIR]
                               [--grafana-dir DIR] [--man-dir DIR]
                               [--bash-completion-dir DIR] [--zsh-completion-dir DIR]
                               [--skip NAME]... [--dry-run]

`--prefix DIR` writes every kind under DIR, laid out as in the package (DIR/etc/...,
DIR/hooks, DIR/share/...); each `--*-dir` writes one kind there instead (and, without --prefix, only the
kinds named). Some files start something where they land: 61-negotiator-ext-daemon.conf in
a config.d (condor_master runs the daemon from the next condor_reconfig), a cron line in
cron.d (at once); `--skip NAME` leaves such a file out, for the ways of running the shadow
not chosen.

Paths the shipped files name are those of a venv at /opt/negotiator-ext/.venv with the
hooks in /opt/negotiator-ext/hooks; each copy written names this install's instead: the
directory of its console scripts (`negotiator-ext`, `negotiator-ext-daemon`) and the hooks'
directory of this run.

A file the admin changed is never overwritten, as a package manager treats a config
file: each directory written keeps `.negotiator-ext.sha256` (`sha256sum` format: the hash
of every file this command wrote there). A file found as written earlier, or already as
this version ships it, is replaced (or left); one that is not (changed here, or not ours)
is kept and reported, and this version's copy is written beside it as `<name>.rpmnew`: a
suffix HTCondor's config.d (LOCAL_CONFIG_DIR_EXCLUDE_REGEXP), cron (cronie skips it, Debian's
cron any name with a dot), systemd, Prometheus' `*.yml` and Grafana's `*.json` all ignore,
so a new copy never takes effect beside the admin's. Nothing is ever removed.

A destination that is not a directory, cannot be made or written: one line naming the path,
exit status 2, before anything is written where it can be seen in advance.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import sys
import sysconfig
import tempfile
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from . import __version__
from .errors import InputError

# ---- --version ----------------------------------------------------------------------------


def version_text() -> tuple[str, int]:
    """`--version`'s lines (ours, with where this copy is and its Python; the bindings',
    with the HTCondor version they were built from) and the exit status: 1 when the
    bindings cannot be imported (the install cannot read a live pool)."""
    here = Path(__file__).resolve().parent
    py = ".".join(map(str, sys.version_info[:3]))
    lines = [f"negotiator-ext {__version__} ({here}; Python {py})"]
    try:
        import htcondor2
        from importlib.metadata import PackageNotFoundError, version
        try:
            dist = version("htcondor")
        except PackageNotFoundError:
            dist = "(no htcondor distribution)"
        condor = str(htcondor2.version()).strip()
        m = re.fullmatch(r"\$CondorVersion:\s*(.*?)\s*\$", condor)
        lines.append(f"htcondor2 {dist} (HTCondor {m.group(1) if m else condor})")
        rc = 0
    except Exception as exc:  # noqa: BLE001 - any failure to load them is the answer
        lines.append(f"htcondor2: cannot be imported: {type(exc).__name__}: {exc}")
        rc = 1
    return "\n".join(lines) + "\n", rc


class VersionAction(argparse.Action):
    """-V / --version: `version_text` on stdout."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS,
                 help="print negotiator-ext's and the htcondor2 bindings' versions"):
        super().__init__(option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        text, rc = version_text()
        sys.stdout.write(text)
        parser.exit(rc)


# ---- install-files ------------------------------------------------------------------------

SHIPPED_BIN = "/opt/negotiator-ext/.venv/bin"     # the shipped files' console scripts...
SHIPPED_HOOKS = "/opt/negotiator-ext/hooks"       # ...and hooks
DAEMON_SCRIPT = "negotiator-ext-daemon"
MANIFEST = ".negotiator-ext.sha256"
NEW_SUFFIX = ".rpmnew"


@dataclass(frozen=True)
class Kind:
    dest: str          # the option's attribute
    option: str
    source: str        # under site_files/, and under --prefix
    mode: int
    what: str


KINDS = (
    Kind("config_dir", "--config-dir", "etc/condor_config.d", 0o644,
         "HTCondor config snippets: every NEGOTIATOR_EXT_* knob (60-), the condor_master "
         "daemon (61-), e.g. /etc/condor/config.d"),
    Kind("cron_dir", "--cron-dir", "etc/cron.d", 0o644,
         "cron lines: a snapshot every 5 minutes, a shadow pass every minute, e.g. /etc/cron.d"),
    Kind("units_dir", "--units-dir", "etc/systemd", 0o644,
         "systemd service and timer of a shadow pass every minute, e.g. /etc/systemd/system"),
    Kind("hooks_dir", "--hooks-dir", "hooks", 0o755,
         "the cron lines' programs (capture-snapshot, shadow-pass); the cron lines written "
         "in this run name them there"),
    Kind("prometheus_dir", "--prometheus-dir", "etc/prometheus", 0o644,
         "Prometheus alert rules"),
    Kind("grafana_dir", "--grafana-dir", "etc/grafana", 0o644, "the Grafana dashboard"),
    # made from the manual's command reference and from the parser by docs/generate.py
    Kind("man_dir", "--man-dir", "share/man/man1", 0o644,
         "the man page negotiator-ext(1), e.g. /usr/local/share/man/man1"),
    Kind("bash_completion_dir", "--bash-completion-dir", "share/bash-completion/completions",
         0o644, "bash completion of negotiator-ext, e.g. "
                "/usr/share/bash-completion/completions"),
    Kind("zsh_completion_dir", "--zsh-completion-dir", "share/zsh/site-functions", 0o644,
         "zsh completion of negotiator-ext (_negotiator-ext), e.g. "
         "/usr/local/share/zsh/site-functions"),
)


def add_install_files_parser(sub) -> argparse.ArgumentParser:
    """Add `install-files` to the `negotiator-ext` subparsers `sub`."""
    p = sub.add_parser(
        "install-files", allow_abbrev=False,
        help="write the config snippets, cron lines, systemd units, hooks, monitoring "
             "files, man page and completion a site puts beside the package",
        description="Write the files shipped with negotiator-ext where you say: --prefix "
                    "DIR writes all of them under DIR (DIR/etc/condor_config.d, "
                    "DIR/etc/cron.d, DIR/etc/systemd, DIR/etc/prometheus, DIR/etc/grafana, "
                    "DIR/hooks, DIR/share/man/man1, DIR/share/bash-completion/completions, "
                    "DIR/share/zsh/site-functions); each --*-dir writes one kind to a directory of its own "
                    "(without --prefix, only the kinds named). The copies name this "
                    "install's console scripts (negotiator-ext, negotiator-ext-daemon) and "
                    "the hooks' directory. A file changed since it was written (or not "
                    "written by this command) is never overwritten: it is kept, reported, "
                    f"and the new version written beside it as NAME{NEW_SUFFIX}. Some "
                    "files start something where they land (61-negotiator-ext-daemon.conf "
                    "in a config.d at the next condor_reconfig, a cron line at once): "
                    "--skip leaves those of the ways of running the shadow you do not use "
                    "out. Run it again after each upgrade.")
    p.add_argument("--prefix", metavar="DIR",
                   help="write every kind under DIR, laid out as DIR/etc/..., DIR/hooks and "
                        "DIR/share/...")
    for k in KINDS:
        p.add_argument(k.option, dest=k.dest, metavar="DIR", help=k.what)
    p.add_argument("--skip", action="append", default=[], metavar="NAME",
                   help="leave this shipped file out (repeatable), e.g. "
                        "61-negotiator-ext-daemon.conf in a live config.d when the shadow "
                        "runs from cron or systemd, not condor_master")
    p.add_argument("--dry-run", action="store_true",
                   help="say what would be written, write nothing")
    return p


def scripts_dir() -> tuple[Path, str | None]:
    """The directory of this install's console scripts (where `negotiator-ext-daemon` is),
    and a warning when it is nowhere to be found (a source tree run with `python -m`)."""
    candidates = []
    argv0 = Path(sys.argv[0]) if sys.argv and sys.argv[0] else None
    if argv0 is not None and argv0.name == "negotiator-ext":
        candidates += [argv0.absolute().parent, argv0.resolve().parent]
    candidates += [Path(sysconfig.get_path("scripts")), Path(sys.executable).parent]
    for c in candidates:
        if (c / DAEMON_SCRIPT).is_file():
            return c.absolute(), None
    fallback = candidates[0].absolute()
    return fallback, (f"{DAEMON_SCRIPT}: no such console script in {fallback}: the files "
                      f"name it there (install the package with pip to have it)")


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _file_hash(path: Path) -> str:
    try:
        return _sha256(path.read_bytes())
    except OSError as exc:
        raise InputError(str(path), f"cannot be read: {exc.strerror or exc}") from None


def shipped_files(kind: Kind) -> list[tuple[str, bytes]]:
    """(name, content) of every file of `kind` in the package, by name."""
    d = resources.files("negotiator_ext").joinpath("site_files", *kind.source.split("/"))
    return sorted((f.name, f.read_bytes()) for f in d.iterdir() if f.is_file())


def _substitute(data: bytes, paths: dict[str, str]) -> bytes:
    for shipped, actual in paths.items():
        data = data.replace(shipped.encode(), actual.encode())
    return data


def _read_manifest(d: Path) -> dict[str, str]:
    try:
        text = (d / MANIFEST).read_text(errors="replace")
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise InputError(str(d / MANIFEST), f"cannot be read: {exc.strerror or exc}") from None
    out = {}
    for line in text.splitlines():
        m = re.fullmatch(r"([0-9a-f]{64}) [ *](.+)", line.strip())
        if m:
            out[m.group(2)] = m.group(1)
    return out


def _check_dir(d: Path, dry_run: bool) -> None:
    """A destination that is (or can be made) a writable directory; else an InputError
    naming the path. Makes it (with its parents) unless dry_run."""
    if d.exists():
        if not d.is_dir():
            raise InputError(str(d), "not a directory")
        if not os.access(d, os.W_OK | os.X_OK):
            raise InputError(str(d), "not writable")
        return
    # the nearest existing parent must be a directory we may write in
    parent = d
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        raise InputError(str(parent), f"not a directory (needed for {d})")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise InputError(str(parent), f"not writable (needed to make {d})")
    if not dry_run:
        try:
            d.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise InputError(str(d), f"cannot be made: {exc.strerror or exc}") from None


def _write(path: Path, data: bytes, mode: int) -> None:
    """`path` holds `data` with `mode`, replaced in one step (the temporary name starts with
    a dot: nothing reading the directory takes it meanwhile)."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except OSError as exc:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise InputError(str(path), f"cannot be written: {exc.strerror or exc}") from None
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _write_manifest(d: Path, manifest: dict[str, str]) -> None:
    text = "".join(f"{h}  {name}\n" for name, h in sorted(manifest.items()))
    _write(d / MANIFEST, text.encode(), 0o644)


@dataclass
class Step:
    action: str        # installed, updated, unchanged, kept
    path: Path
    note: str = ""


def plan_and_install(dests: dict[Kind, Path], paths: dict[str, str],
                     dry_run: bool, skip: frozenset[str] = frozenset()) -> list[Step]:
    """Write every kind's files but those named in `skip` into its directory (see the
    module's docstring); the steps taken (or, with dry_run, that would be)."""
    for d in dests.values():
        _check_dir(d, dry_run)
    steps: list[Step] = []
    for kind, d in dests.items():
        manifest = _read_manifest(d) if d.is_dir() else {}
        written = dict(manifest)
        for name, shipped in shipped_files(kind):
            if name in skip:
                steps.append(Step("skipped", d / name))
                continue
            data = _substitute(shipped, paths)
            new_hash = _sha256(data)
            target = d / name
            if target.is_symlink() or target.exists():
                if not target.is_file():
                    raise InputError(str(target), "not a regular file")
                have = _file_hash(target)
                if have == new_hash:
                    step = Step("unchanged", target)
                    written[name] = new_hash
                elif manifest.get(name) == have and not target.is_symlink():
                    step = Step("updated", target, "the earlier copy was as written here")
                    if not dry_run:
                        _write(target, data, kind.mode)
                    written[name] = new_hash
                else:
                    beside = target.with_name(name + NEW_SUFFIX)
                    why = ("changed since it was written here" if name in manifest
                           else "not written by install-files")
                    step = Step("kept", target, f"{why}; this version's copy is {beside.name}")
                    if not dry_run and not (beside.is_file() and not beside.is_symlink()
                                            and _file_hash(beside) == new_hash):
                        _write(beside, data, kind.mode)
            else:
                step = Step("installed", target)
                if not dry_run:
                    _write(target, data, kind.mode)
                written[name] = new_hash
            steps.append(step)
            if not dry_run and written != manifest:
                _write_manifest(d, written)
                manifest = dict(written)
    return steps


def destinations(args) -> dict[Kind, Path]:
    prefix = Path(args.prefix).absolute() if args.prefix else None
    out = {}
    for k in KINDS:
        given = getattr(args, k.dest)
        if given:
            out[k] = Path(given).absolute()
        elif prefix is not None:
            out[k] = prefix.joinpath(*k.source.split("/"))
    return out


def cmd_install_files(args) -> int:
    dests = destinations(args)
    if not dests:
        raise InputError("install-files", "say where: --prefix DIR, or one or more of "
                         + ", ".join(k.option for k in KINDS))
    bindir, warning = scripts_dir()
    paths = {SHIPPED_BIN: str(bindir)}
    hooks = next((d for k, d in dests.items() if k.dest == "hooks_dir"), None)
    if hooks is not None:
        paths[SHIPPED_HOOKS] = str(hooks)
    if warning:
        print(f"negotiator-ext: warning: {warning}", file=sys.stderr)
    shipped = {name for k in dests for name, _ in shipped_files(k)}
    for name in args.skip:
        if name not in shipped:
            raise InputError("--skip", f"{name!r} is not a file this run would write (those "
                             f"are: {', '.join(sorted(shipped))})")
    steps = plan_and_install(dests, paths, args.dry_run, frozenset(args.skip))
    verb = {"installed": "would install", "updated": "would update",
            "unchanged": "unchanged", "kept": "would keep",
            "skipped": "skipped"} if args.dry_run else \
           {"installed": "installed", "updated": "updated", "unchanged": "unchanged",
            "kept": "kept", "skipped": "skipped"}
    width = max(len(v) for v in verb.values())
    for s in steps:
        print(f"{verb[s.action]:<{width}}  {s.path}" + (f"  ({s.note})" if s.note else ""))
    counts = {a: sum(s.action == a for s in steps) for a in verb}
    where = f"console scripts in {bindir}"
    if hooks is not None:
        where += f", hooks in {hooks}"
    elif any(k.dest == "cron_dir" for k in dests):
        where += f"; the cron lines name the hooks in {SHIPPED_HOOKS} (no --hooks-dir)"
    print(", ".join(f"{n} {verb[a]}" for a, n in counts.items() if n) + f"; {where}")
    if counts["kept"]:
        print(f"{counts['kept']} file(s) changed here "
              + ("would be kept" if args.dry_run else "were kept")
              + f": compare each with its {NEW_SUFFIX} copy, merge what you want, then "
                f"remove the {NEW_SUFFIX}.")
    return 0
