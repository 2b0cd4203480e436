"""Every column of our tables is HTCondor's own or explained in the report's legend, in
the same words in every view (issue 35): whatif and shards here; negotiate in
test_negotiate_report.py, ledger show in test_shadow.py."""

from __future__ import annotations

from pathlib import Path

from negotiator_ext.cli import main
from negotiator_ext.views.tables import LEGEND_HEADING

EXAMPLE = Path(__file__).parent.parent / "examples" / "hgq_nested_hep_lep_surplus"


def _split(out: str) -> tuple[list[list[str]], set[str]]:
    """The column names of every table (the line above each rule of dashes) and the
    columns the legend explains."""
    lines = out.splitlines()
    heads = [lines[i - 1].split() for i, ln in enumerate(lines)
             if i and ln.startswith("-") and set(ln) <= {"-", " "}]
    explained: set[str] = set()
    for i, ln in enumerate(lines):
        if ln == LEGEND_HEADING:
            explained |= {x.split()[0] for x in lines[i + 1:]
                          if x.startswith("    ") and not x.startswith("     ")}
    return heads, explained


def test_whatif_columns_are_explained(tmp_path, capsys):
    cfg = tmp_path / "surplus.config"
    cfg.write_text((EXAMPLE / "config").read_text().replace(
        "GROUP_ACCEPT_SURPLUS_group_physics = false", "GROUP_ACCEPT_SURPLUS_group_physics = true"))
    assert main(["whatif", str(EXAMPLE), "--config", str(cfg)]) == 0
    heads, explained = _split(capsys.readouterr().out)
    assert len(heads) == 2
    own = {"Group", "Submitter", "Effective"}          # condor_userprio -quotas'
    assert {c for h in heads for c in h} - explained - own == set()
    # the same words as negotiate's tables
    assert heads[1][1:] == ["Matched", "After", "Delta", "MatchedWeight", "After", "Delta",
                            "Limit", "After"]


def test_shards_columns_are_explained(capsys):
    assert main(["shards", str(EXAMPLE)]) == 0
    out = capsys.readouterr().out
    heads, explained = _split(out)
    assert len(heads) == 2 and "<the negotiator>" in out
    negotiators = {"<the", "negotiator>"}              # the per-negotiator column's name
    assert {c for h in heads for c in h} - explained - negotiators - {"Submitter"} == set()
    assert "<negotiator>" in explained
    assert heads[0][4:] == ["Matched", "MatchedWeight", "InUse", "InUseAfter"]
