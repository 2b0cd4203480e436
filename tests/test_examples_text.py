"""The examples speak to users in words: no internal rule ids (G4, A17, M7, N2, P1:
the sections of the semantics reference the code's docstrings cite) in their READMEs,
scenarios and configs (issue 35)."""

from __future__ import annotations

import re
from pathlib import Path

EXAMPLES = Path(__file__).parent.parent / "examples"
RULE_ID = re.compile(r"\b[AGMNP][0-9]{1,2}\b")


def test_no_rule_ids_in_the_examples_text():
    files = [p for p in EXAMPLES.rglob("*") if p.is_file()
             and (p.suffix in (".md", ".yaml", ".config") or p.name == "config")
             and "expected" not in p.parts]
    assert len(files) > 10
    found = [(str(p.relative_to(EXAMPLES)), m.group(0)) for p in files
             for m in RULE_ID.finditer(p.read_text())]
    assert found == []
