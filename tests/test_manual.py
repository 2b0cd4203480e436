"""The manual (issue 35, part 2): it builds with Sphinx with warnings as errors; its
command reference, made from the parser, has every command and option, and every command
has its prose; the man page and the bash and zsh completion that `install-files` ships are
the ones this source makes (`docs/generate.py`), and the completion loads in bash and zsh.

The build takes a few seconds: the HTML and the man page once for the module, into a
temporary directory, the second reading the first's doctrees."""

from __future__ import annotations

import argparse
import importlib.util
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from negotiator_ext.cli_parser import build_parser

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
SITE = ROOT / "negotiator_ext" / "site_files"

pytestmark = pytest.mark.skipif(
    any(importlib.util.find_spec(m) is None
        for m in ("sphinx", "myst_parser", "sphinx_argparse_cli", "shtab")),
    reason="the docs extra is not installed (pip install -e '.[test]' has it)")


def _generate():
    spec = importlib.util.spec_from_file_location("docs_generate", DOCS / "generate.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def commands(parser: argparse.ArgumentParser | None = None, path: tuple[str, ...] = ()):
    """(command path, its parser) of every command that runs something: `userprio`, ...,
    `ledger show` (not `ledger` itself, which only holds its actions)."""
    parser = parser or build_parser()
    for action in parser._actions:      # noqa: SLF001 - argparse keeps them only here
        if isinstance(action, argparse._SubParsersAction):  # noqa: SLF001
            for name, sub in action.choices.items():
                if any(isinstance(a, argparse._SubParsersAction)  # noqa: SLF001
                       for a in sub._actions):                    # noqa: SLF001
                    yield from commands(sub, path + (name,))
                else:
                    yield " ".join(path + (name,)), sub


def options(parser: argparse.ArgumentParser) -> list[str]:
    return [s for a in parser._actions for s in a.option_strings]  # noqa: SLF001


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("manual")
    doctrees = out / "doctrees"
    for builder in ("html", "man"):
        proc = subprocess.run(
            [sys.executable, "-m", "sphinx", "-q", "-W", "--keep-going", "-b", builder,
             "-d", str(doctrees), str(DOCS), str(out / builder)],
            capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, f"sphinx -W -b {builder}:\n{proc.stderr}"
    return out


def test_the_manual_builds_with_warnings_as_errors_and_has_every_chapter(built):
    chapters = {p.stem for p in DOCS.glob("*.md")}
    assert {"installing", "commands", "shadow-mode", "forecasts", "simulation", "audits",
            "fidelity", "performance", "troubleshooting", "development"} <= chapters
    for name in chapters:
        assert (built / "html" / f"{name}.html").is_file(), name
    # every chapter is in the table of contents (the index page links each)
    index = (built / "html" / "index.html").read_text()
    for name in chapters - {"index"}:
        assert f'href="{name}.html"' in index, name


def _man_sections(page: str) -> dict[str, str]:
    """The man page's subsections (`.SS` titles) and their text, roff escapes undone."""
    text = (page.replace("\\-", "-").replace("\\(aq", "'").replace("\\(dq", '"')
            .replace("\\fB", "").replace("\\fI", "").replace("\\fP", "").replace("\\e", "\\"))
    out, title = {}, None
    for line in text.splitlines():
        if line.startswith((".SS ", ".SH ")):
            title = line[4:].strip().strip('"')
            out[title] = ""
        elif title is not None:
            out[title] += line + "\n"
    return out


def test_every_command_and_option_is_in_the_reference_and_the_man_page(built):
    (page,) = (built / "man").glob("negotiator-ext.1")
    sections = _man_sections(page.read_text())
    html = (built / "html" / "commands.html").read_text()
    found = list(commands())
    assert len(found) >= 16 and "ledger show" in dict(found) and "audit" in dict(found)
    for name, parser in found:
        prog = f"negotiator-ext {name}"
        text = "".join(body for title, body in sections.items()
                       if title == prog or title.startswith(prog + " ")
                       and not any(title.startswith(f"negotiator-ext {other}")
                                   for other, _ in found if other != name
                                   and other.startswith(name + " ")))
        assert text, f"{prog}: not in the man page"
        assert f"usage: {prog}" in text or f"{prog} [-h]" in text, prog
        for opt in options(parser):
            assert re.search(rf"(?<![\w-]){re.escape(opt)}(?![\w-])", text), \
                f"{prog} {opt}: not in the man page"
            assert opt in html, f"{prog} {opt}: not in commands.html"
    top = sections["negotiator-ext options"]
    assert "-V, --version" in top
    # the program condor_master runs, from its own parser
    from negotiator_ext.daemon import build_parser as daemon_parser
    daemon = sections["negotiator-ext-daemon options"]
    for opt in options(daemon_parser()):
        assert re.search(rf"(?<![\w-]){re.escape(opt)}(?![\w-])", daemon), opt
        assert opt in html, opt


def test_every_command_has_its_prose_in_the_reference():
    """The synopsis and options are generated; what a command prints is written: a new
    command without its section under "What each command prints" fails here."""
    text = (DOCS / "commands.md").read_text()
    prose = text.split("\n## What each command prints\n", 1)[1].split("\n## ", 1)[0]
    headings = [h for h in re.findall(r"(?m)^### (.+)$", prose)]
    covered = {c.strip() for h in headings for c in h.split(",")}
    missing = [name for name, _ in commands() if name not in covered]
    assert not missing, f"no section under 'What each command prints' for: {missing}"


def test_the_shipped_man_page_and_completion_are_this_sources(built):
    gen = _generate()
    files = gen.generated(built / "man" / "negotiator-ext.1")
    assert set(files) == {gen.MAN, gen.BASH, gen.ZSH}
    for path, data in files.items():
        assert path.is_relative_to(SITE / "share")
        assert path.read_bytes() == data, \
            f"{path.relative_to(ROOT)}: not current: run python docs/generate.py"


def _bash(script: str) -> str:
    completion = SITE / "share/bash-completion/completions/negotiator-ext"
    proc = subprocess.run(["bash", "--norc", "-c", f"source {completion}\n{script}"],
                          capture_output=True, text=True, timeout=30, cwd=ROOT)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    return proc.stdout


def _complete(*words: str) -> list[str]:
    """What bash completes the last of `words` to, after `negotiator-ext`."""
    quoted = " ".join(f"'{w}'" for w in ("negotiator-ext",) + words)
    out = _bash(f"COMP_WORDS=({quoted}); COMP_CWORD={len(words)}; "
                f"COMP_LINE=\"${{COMP_WORDS[*]}}\"; COMP_POINT=${{#COMP_LINE}}; "
                "_shtab_negotiator_ext; printf '%s\\n' \"${COMPREPLY[@]}\"")
    return [w for w in out.splitlines() if w]


@pytest.mark.skipif(shutil.which("bash") is None, reason="no bash here")
def test_bash_completion_loads_and_completes_commands_options_and_paths():
    assert _bash("complete -p negotiator-ext").strip() == \
        "complete -o bashdefault -F _shtab_negotiator_ext negotiator-ext"
    assert _complete("led") == ["ledger"]
    assert sorted(_complete("ledger", "")) == ["export", "show", "vacuum"]
    assert set(_complete("userprio", "-")) >= set(options(dict(commands())["userprio"]))
    assert sorted(_complete("sweep", "s", "--engine", "")) == ["htcondor", "local"]
    # a snapshot directory completes to directories
    assert _complete("negotiate", "exam") == ["examples"]


@pytest.mark.skipif(shutil.which("zsh") is None, reason="no zsh here (Debian: apt-get "
                                                         "install zsh)")
def test_zsh_completion_is_found_on_fpath(tmp_path):
    d = SITE / "share/zsh/site-functions"
    proc = subprocess.run(
        ["zsh", "-f", "-c", f"fpath=({d} $fpath); autoload -U compinit; "
                            f"compinit -u -d {tmp_path / 'zcompdump'}; "
                            "print -r -- $_comps[negotiator-ext]"],
        capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0 and proc.stdout == "_negotiator-ext\n", proc.stderr


def test_the_readme_is_one_page_and_its_links_into_the_manual_resolve():
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 250
    links = re.findall(r"\]\((docs/[^)#]+)(?:#([^)]+))?\)", text)
    assert len(links) >= 5
    for path, anchor in links:
        target = ROOT / path
        assert target.exists(), path
        if anchor and target.suffix == ".md":
            # a heading GitHub and MyST (myst_heading_anchors) both make this anchor of
            titles = re.findall(r"(?m)^#+ (.+)$", target.read_text())
            slugs = {re.sub(r"[^\w\- ]", "", t.lower()).strip().replace(" ", "-")
                     for t in titles}
            assert anchor in slugs, f"{path}#{anchor}"
