"""Make the files `install-files` ships that are generated, not written by hand, and check
that the shipped copies are current:

  negotiator_ext/site_files/share/man/man1/negotiator-ext.1
      the man page: the manual's command reference (docs/commands.md, whose synopsis and
      options sphinx-argparse-cli generates from the parser) built by `sphinx -b man`
  negotiator_ext/site_files/share/bash-completion/completions/negotiator-ext
  negotiator_ext/site_files/share/zsh/site-functions/_negotiator-ext
      bash and zsh completion generated from the parser by shtab

  python docs/generate.py            write them (needs the docs extra)
  python docs/generate.py --check    exit status 1, naming each, when one is not current

tests/test_manual.py runs the check, so a parser or reference changed without the files
made again fails the tests.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARE = ROOT / "negotiator_ext" / "site_files" / "share"
MAN = SHARE / "man" / "man1" / "negotiator-ext.1"
BASH = SHARE / "bash-completion" / "completions" / "negotiator-ext"
ZSH = SHARE / "zsh" / "site-functions" / "_negotiator-ext"

# what a value completes to, by the metavar the parser gives it
DIRECTORY_METAVARS = {"DIR", "SNAPSHOT", "OTHER"}
FILE_METAVARS = {"FILE", "NEW", "SCENARIO", "PATH", "LEDGER"}


def completion_parser() -> argparse.ArgumentParser:
    """The command's parser, with each file or directory argument marked for shtab."""
    import shtab
    sys.path.insert(0, str(ROOT))
    from negotiator_ext.cli_parser import build_parser
    parser = build_parser()
    todo = [parser]
    while todo:
        p = todo.pop()
        for action in p._actions:       # noqa: SLF001 - argparse keeps them only here
            if isinstance(action, argparse._SubParsersAction):  # noqa: SLF001
                todo.extend(action.choices.values())
                continue
            metavar = action.metavar if isinstance(action.metavar, str) else None
            if metavar in DIRECTORY_METAVARS:
                action.complete = shtab.DIRECTORY
            elif metavar in FILE_METAVARS:
                action.complete = shtab.FILE
    return parser


def completions() -> dict[Path, str]:
    import shtab
    parser = completion_parser()
    return {BASH: shtab.complete(parser, shell="bash"),
            ZSH: shtab.complete(parser, shell="zsh")}


def build_man(out: Path, doctrees: Path | None = None) -> Path:
    """`sphinx -W -b man` of the manual into `out`; the page's path."""
    cmd = [sys.executable, "-m", "sphinx", "-q", "-W", "-b", "man", str(ROOT / "docs"),
           str(out)]
    if doctrees is not None:
        cmd[4:4] = ["-d", str(doctrees)]
    subprocess.run(cmd, check=True)
    return out / MAN.name


def generated(man: Path | None = None) -> dict[Path, bytes]:
    """Every generated file's content, by its place in the package (`man`: a man page
    already built, else one is built here)."""
    out = {path: text.encode() for path, text in completions().items()}
    if man is None:
        with tempfile.TemporaryDirectory() as tmp:
            out[MAN] = build_man(Path(tmp)).read_bytes()
    else:
        out[MAN] = man.read_bytes()
    return out


def stale(files: dict[Path, bytes]) -> list[Path]:
    return [p for p, data in files.items() if not p.is_file() or p.read_bytes() != data]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="docs/generate.py", description=__doc__.split("\n")[0])
    ap.add_argument("--check", action="store_true",
                    help="write nothing; exit status 1 when a shipped file is not current")
    args = ap.parse_args(argv)
    files = generated()
    old = stale(files)
    if args.check:
        for p in old:
            print(f"{p.relative_to(ROOT)}: not current: run python docs/generate.py")
        return 1 if old else 0
    for p in old:
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(files[p])
        print(f"wrote {p.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
