"""The config.d snippet documents every knob at the default the code uses: read through
HTCondor's own config reader, it gives the same settings as no knobs at all."""

from __future__ import annotations

from pathlib import Path

from negotiator_ext.adapters.condor_config import local_ext_knobs
from negotiator_ext.core.recommend import RecommendPolicy
from negotiator_ext.shadow_state import ShadowSettings

SNIPPET = (Path(__file__).parent.parent / "negotiator_ext" / "site_files" / "etc" / "condor_config.d"
           / "60-negotiator-ext.conf")


def test_the_snippet_sets_every_knob_to_the_code_default():
    knobs = local_ext_knobs(SNIPPET)
    assert knobs["STATE_DIR"].endswith("/negotiator-ext")
    bare = {"STATE_DIR": knobs["STATE_DIR"]}
    assert ShadowSettings.from_knobs(knobs) == ShadowSettings.from_knobs(bare)
    assert RecommendPolicy.from_knobs(knobs) == RecommendPolicy()
    # read by the commands themselves (cli.py), with these defaults
    assert float(knobs["RECOMMEND_WINDOW"]) == 24
    assert float(knobs["APPLY_MAX_AGE"]) == 3600
    assert int(knobs["SNAPSHOT_TIMEOUT"]) == 30


def test_every_knob_the_code_reads_is_in_the_snippet():
    import re
    text = SNIPPET.read_text()
    documented = set(re.findall(r"NEGOTIATOR_EXT_([A-Z_]+)\s*=", text))
    root = Path(__file__).parent.parent / "negotiator_ext"
    code = "\n".join(p.read_text() for p in root.rglob("*.py"))
    read = set(re.findall(r'knobs(?:\.get)?\(?\[?"([A-Z_]+)"', code))
    read |= set(re.findall(r'ext_(?:number|bool)\(\s*knobs, "([A-Z_]+)"', code))
    # RecommendPolicy's table of (knob, field) pairs
    read |= set(re.findall(r'\("([A-Z_]+)", "[a-z_]+"\)',
                           (root / "core" / "recommend.py").read_text()))
    assert {"RECOMMEND_WINDOW", "RECOMMEND_GAP", "INTERVAL"} <= read, "the patterns miss reads"
    assert read - documented == set()
