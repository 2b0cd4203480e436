"""No sentinel reaches a JSON document as a figure (issue 35): a submitter limit HTCondor
left without a number (-2147483648 times the share, from its group's 0/0 limit) is null
in every JSON a command prints, and `ledger show --json` has no row counts of the
ledger's own (n_submitters counted the group records: 8 for 3 submitters)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from negotiator_ext.cli import main
from negotiator_ext.core.figures import limit_figure, without_sentinels

EXAMPLE = Path(__file__).parent.parent / "examples" / "hgq_nested_hep_lep_surplus"
LEP = "group_physics.lep.fermi@refcondor.local"
INT_MIN = -2147483648


def _numbers(doc, key=None):
    """(key, number) for every number in a parsed document."""
    if isinstance(doc, dict):
        return [x for k, v in doc.items() for x in _numbers(v, k)]
    if isinstance(doc, list):
        return [x for v in doc for x in _numbers(v, key)]
    return [(key, doc)] if isinstance(doc, (int, float)) and not isinstance(doc, bool) else []


def test_limit_figure_and_the_walk():
    assert [limit_figure(v) for v in (INT_MIN, -1073741824.0, 0.0, 19.0, None, True)] == [
        None, None, 0.0, 19.0, None, True]
    doc = {"a": [{"real_limit": float(INT_MIN), "shadow_limit": 3.0, "other": -5}],
           "submitter_limit": -2.0}
    assert without_sentinels(doc) == {"a": [{"real_limit": None, "shadow_limit": 3.0,
                                             "other": -5}], "submitter_limit": None}
    assert doc["a"][0]["real_limit"] == INT_MIN           # the input is left as it was


@pytest.fixture(scope="module")
def ledger(tmp_path_factory):
    """The README's replay: lep's limit is INT_MIN on both sides, real and ours."""
    d = tmp_path_factory.mktemp("fig")
    url = str(d / "l.sqlite")
    conf = d / "empty.conf"
    conf.write_text("")
    assert main(["shadow", "--replay", str(EXAMPLE), str(EXAMPLE / "after-cycle"),
                 "--ledger", url, "--matchlog", str(EXAMPLE / "expected" / "matchlog.txt"),
                 "--matchlog-timezone", "UTC", "--config", str(conf), "--json"]) == 0
    return url, conf


def test_no_int_min_in_any_json_of_the_example(ledger, capsys, tmp_path):
    url, conf = ledger
    capsys.readouterr()
    docs = []
    assert main(["negotiate", str(EXAMPLE), "--json"]) == 0
    docs.append(json.loads(capsys.readouterr().out))
    assert main(["ledger", "show", "--ledger", url, "--json", "--config", str(conf)]) == 0
    show = json.loads(capsys.readouterr().out)
    docs.append(show)
    assert main(["shadow", "--replay", str(EXAMPLE / "after-cycle"), "--ledger",
                 str(tmp_path / "again.sqlite"), "--config", str(conf), "--json"]) == 0
    docs.append(json.loads(capsys.readouterr().out.splitlines()[-1]))
    assert main(["ledger", "export", "--ledger", url, "--format", "jsonl", "-o",
                 str(tmp_path / "x"), "--config", str(conf)]) == 0
    capsys.readouterr()
    for f in sorted((tmp_path / "x").glob("*.jsonl")):
        docs += [json.loads(line) for line in f.read_text().splitlines()]
    for doc in docs:
        assert not [(k, v) for k, v in _numbers(doc) if v <= -2**31 + 1], doc
    # the figures are null where they were INT_MIN, kept where they were numbers
    per_sub = show[0]["comparison"]["per_submitter"]
    assert (per_sub[LEP]["real_limit"], per_sub[LEP]["shadow_limit"]) == (None, None)
    chem = per_sub["group_chemistry.curie@refcondor.local"]
    assert (chem["real_limit"], chem["shadow_limit"]) == (10.0, 10.0)
    lep = next(s for s in docs[0]["submitters"] if s["name"] == LEP)
    assert lep["submitter_limit"] is None and lep["limit"] == 0.0
    # and the ledger itself keeps what was read (the metrics name it unset)
    from negotiator_ext.adapters.ledger import open_ledger
    with open_ledger(url, read_only=True) as led:
        got = [o.real_limit for _h, subs, _g in led.window(0) for o in subs if o.name == LEP]
    assert float(INT_MIN) in got


def test_ledger_show_json_has_no_row_counts(ledger, capsys):
    url, conf = ledger
    capsys.readouterr()
    assert main(["ledger", "show", "--ledger", url, "--json", "--config", str(conf)]) == 0
    show = json.loads(capsys.readouterr().out)
    assert len(show) == 2
    for row in show:
        assert not {"n_submitters", "n_groups", "n_comparisons", "n_real_cycles"} & set(row)
        assert row["n_shadow_matches"] == 27        # a figure: our cycle's matches
