"""Sphinx configuration of the negotiator-ext manual (`pip install -e '.[docs]'`, then
`python -m sphinx -W -b html docs docs/_build/html`; `-b man` makes negotiator-ext(1) from
the command reference, which `docs/generate.py` copies into the package for
`install-files --man-dir`)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from negotiator_ext import __version__  # noqa: E402

project = "negotiator-ext"
author = "the negotiator-ext authors"
release = version = __version__
# the man page's date field: the version, so that a build is the same on any day
today = f"version {release}"

extensions = ["myst_parser", "sphinx_argparse_cli"]
myst_enable_extensions = ["deflist"]
myst_heading_anchors = 4          # links as docs/x.md#a-heading, as GitHub renders them
source_suffix = {".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build"]
highlight_language = "none"       # a block that names no language (a usage line) as it is
nitpicky = False

# HTCondor's own manual is Sphinx with the Read the Docs theme; ours looks the same when
# the theme is installed (the docs extra has it)
html_theme = ("sphinx_rtd_theme" if importlib.util.find_spec("sphinx_rtd_theme")
              else "alabaster")
html_title = f"negotiator-ext {release} manual"
html_show_sourcelink = False

man_pages = [("commands", "negotiator-ext",
              "a shadow and what-if HTCondor negotiator beside a real pool",
              [], 1)]
man_show_urls = False


def _man_links_as_text(app, doctree, docname):
    """A man page has no links: keep a link's words, drop its target (which would show
    as `<#anchor>` or `<other.html>`)."""
    if app.builder.name != "man":
        return
    from docutils import nodes
    for ref in list(doctree.findall(nodes.reference)):
        ref.replace_self(nodes.inline("", "", *ref.children))


def setup(app):
    app.connect("doctree-resolved", _man_links_as_text)
