"""`negotiate` reads like a report at any pool size (issue 16): a small cycle whole, a
large one summarised to a screen, `--matches` for everything, `--submitter`/`--group`
to look at one part."""

from __future__ import annotations

import json
from pathlib import Path

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


EXAMPLE = Path(__file__).parent.parent / "examples" / "hgq_nested_hep_lep_surplus"
# columns HTCondor's own tools print (condor_userprio -quotas, the MatchLog) or names
HTCONDOR_COLUMNS = {"Group", "Config", "Effective", "Subtree", "Surplus", "Requested",
                    "Submitter", "EUP", "Job", "Slot", "Reason", "Limit"}


def _tables(out: str) -> list[list[str]]:
    """The column names of every table: the line above each rule of dashes."""
    lines = out.splitlines()
    return [lines[i - 1].split() for i, ln in enumerate(lines)
            if i and ln.startswith("-") and set(ln) <= {"-", " "}]


def _legend(out: str) -> dict[str, set[str]]:
    """The legend's parts: its heading's words, the columns it explains."""
    lines = out.splitlines()
    i = lines.index("Columns (HTCondor's own names aside):")
    parts: dict[str, set[str]] = {}
    for ln in lines[i + 1:]:
        if ln.startswith("  ") and not ln.startswith("   "):
            part = parts.setdefault(ln.split(" (")[0].strip(" :"), set())
        elif ln.startswith("    ") and not ln.startswith("     "):
            part.add(ln.split()[0])
    return parts


@pytest.mark.parametrize("extra", [[], ["--matches"]])
def test_every_column_not_htcondors_own_is_in_the_legend(capsys, extra):
    """Issue 35: Class, Cost, +Surplus, SortKey... were never explained. Every column of
    every table shown is HTCondor's own (named in the legend's heading of its table) or
    explained in the legend."""
    out = run(capsys, EXAMPLE, *extra)
    explained = set().union(*_legend(out).values())
    heads = _tables(out)
    assert len(heads) == 3
    for head in heads:
        for col in head:
            assert col in explained or col in HTCONDOR_COLUMNS, col
    assert {"Class", "Cost", "+Surplus", "SortKey", "Allocated", "IdleLeft"} <= \
        explained | ({"Class"} if extra else set())


def test_the_example_cycle_reads_without_htcondors_internals(capsys):
    """ISO 8601 time; condor_userprio -quotas' words for surplus (<none> "yes", as its
    quotas-after.txt shows); <none>'s sort key <last>, not 3.4e+38; a rejection held
    back by its group's quota says so and names `explain` for one of its jobs."""
    out = run(capsys, EXAMPLE)
    assert out.startswith("Negotiation cycle at 2026-11-21 12:47:46 UTC (1795265266):")
    rows = {ln.split()[0]: ln.split() for ln in out.splitlines()
            if ln.startswith(("<none>", "group_")) and "@" not in ln.split()[0]}
    userprio = {ln.split()[0]: ln.split()[3] for ln in
                (EXAMPLE / "expected" / "quotas-after.txt").read_text().splitlines()
                if ln.startswith(("<none>", "group_"))}
    assert {g: r[4] for g, r in rows.items()} == userprio
    assert rows["<none>"][-1] == "<last>"
    assert "3.4e+38" not in out.split("Columns (HTCondor's own names aside):")[0]
    chem = next(ln for ln in out.splitlines()
                if ln.lstrip().startswith("2  group_chemistry.curie@"))
    assert chem.split(": ", 1)[1] == (
        "no match found  [at its submitter limit (its share of group_chemistry's quota: "
        f"limit 10, 10 matched); see negotiator-ext explain {EXAMPLE} 160.10]")
    # and explain says why, as the bracket promises
    assert main(["explain", str(EXAMPLE), "160.10"]) == 0
    assert "submitter limit reached" in capsys.readouterr().out


def test_a_request_no_slot_matches_has_no_limit_beside_it(tmp_path, capsys):
    """A real "no match found" (no slot has the memory) names no limit; one past the
    concurrency limit names it."""
    jobs = [job(1, 0, "a", RequestMemory=10**6),
            *(job(2, p, "b", ConcurrencyLimits="lic") for p in range(2))]
    pool = make_pool(tmp_path / "p", slots=[slot(f"s{i}") for i in range(3)], jobs=jobs,
                     config="LIC_LIMIT = 1\n")
    doc = json.loads(run(capsys, pool, "--json"))
    assert sorted((r["submitter"].split("@")[0], r["cause"]) for r in doc["rejections"]) == [
        ("a", None), ("b", "concurrency_limit")]
    out = run(capsys, pool)
    a = next(ln for ln in out.splitlines() if f" a@{DOMAIN}: " in ln)
    assert a.endswith(": no match found")
    b = next(ln for ln in out.splitlines() if f" b@{DOMAIN}: " in ln)
    # (the negotiator's text names the limit: only the command is added)
    assert b.endswith(f": concurrency limit lic reached  [see negotiator-ext explain {pool} 2.1]")
