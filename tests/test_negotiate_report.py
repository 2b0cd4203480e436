"""`negotiate` reads like a report at any pool size (issue 16): a small cycle whole, a
large one summarised to a screen, `--matches` for everything, `--submitter`/`--group`
to look at one part."""

from __future__ import annotations

import json

import pytest

from negotiator_ext.cli import main
from poolmaker import DOMAIN, job, make_pool, slot

GROUPS = [f"g{i}" for i in range(30)]


@pytest.fixture(scope="module")
def big_pool(tmp_path_factory):
    """600 one-core slots; 60 submitters in 30 groups, 20 jobs each, two kinds of job."""
    tmp = tmp_path_factory.mktemp("big")
    jobs, cluster = [], 0
    for k in range(60):
        group = GROUPS[k % 30]
        for kind in range(2):
            cluster += 1
            for p in range(10):
                jobs.append(job(cluster, p, f"u{k:02d}", group=group,
                                RequestMemory=64 + 64 * kind))
    config = "GROUP_NAMES = " + ", ".join(GROUPS) + "\n" + "".join(
        f"GROUP_QUOTA_DYNAMIC_{g} = {1 / 30:.6f}\n" for g in GROUPS) + \
        "GROUP_ACCEPT_SURPLUS = True\n"
    return make_pool(tmp / "pool", slots=[slot(f"s{i:03d}") for i in range(600)],
                     jobs=jobs, config=config)


def run(capsys, *args):
    rc = main(["negotiate", *map(str, args)])
    out = capsys.readouterr().out
    assert rc == 0
    return out


def test_a_large_cycle_fits_a_screen_and_says_how_to_see_all(big_pool, capsys):
    doc = json.loads(run(capsys, big_pool, "--json"))
    n = len(doc["matches"])
    assert n > 300
    out = run(capsys, big_pool)
    lines = out.splitlines()
    assert len(lines) <= 150
    assert lines[0].endswith(f"{n} matches")
    assert f"{n} match(es), counted per submitter, request" in out
    assert "Groups (20 of 31, the most weight matched):" in out
    assert "Submitters with the most matches (15 of 60):" in out
    assert "--matches shows them all" in out
    # the summary's rows: the largest counts per (submitter, request, slot class,
    # reason, cost) of the JSON's matches, largest first
    from collections import Counter
    runs = Counter((m["submitter"], m["autocluster"], m["slot_class"], m["reason"], m["cost"])
                   for m in doc["matches"])
    counted = [int(ln.split()[0]) for ln in lines
               if ln.strip() and ln.split()[0].isdigit() and " NoPreemption " in ln]
    assert counted == sorted((n for n in runs.values()), reverse=True)[:len(counted)]
    assert len(counted) == min(25, len(runs))


def test_matches_lists_every_match(big_pool, capsys):
    n = len(json.loads(run(capsys, big_pool, "--json"))["matches"])
    out = run(capsys, big_pool, "--matches")
    rows = [ln for ln in out.splitlines() if " NoPreemption " in ln]
    assert len(rows) == n
    assert "Job " in out and "more rows" not in out


def test_filters_show_one_submitter_or_one_group(big_pool, capsys):
    who = f"g3.u03@{DOMAIN}"
    doc = json.loads(run(capsys, big_pool, "--json", "--submitter", who))
    assert {m["submitter"] for m in doc["matches"]} == {who}
    assert [s["name"] for s in doc["submitters"]] == [who]
    doc = json.loads(run(capsys, big_pool, "--json", "--group", "g7"))
    assert {s["name"] for s in doc["submitters"]} == {f"g7.u07@{DOMAIN}", f"g7.u37@{DOMAIN}"}
    assert {m["group"] for m in doc["matches"]} == {"g7"}
    assert [g["name"] for g in doc["groups"]] == ["g7"]
    out = run(capsys, big_pool, "--group", "g7")
    assert f"g7.u07@{DOMAIN}" in out and "g8." not in out


def test_a_small_cycle_is_shown_whole(capsys):
    from conftest import FIXTURES
    out = run(capsys, FIXTURES / "pie_three_submitters")
    assert "18 match(es):" in out and out.count(" NoPreemption") + out.count(" Priority") \
        + out.count(" Rank") >= 18
    assert "counted per" not in out
