"""The audit's configuration findings (issue 35): quotas adding up to more than the pool,
a group with demand, quota 0 and no surplus, a submitter its ceiling or factor blocks;
found from the ledger's figures and shown first on the page."""

from __future__ import annotations

import dataclasses

from negotiator_ext.core import audit as A
from negotiator_ext.core.config_findings import config_findings
from negotiator_ext.core.records import GroupObs
from negotiator_ext.views import audit as V
from test_audit_scale import obs, record


def _pool(n_passes=3, *, static=(1500.0, 1400.0), pool=2000.0):
    """Groups ga and gb with static quotas `static` on a pool of `pool` (scaled down
    as the negotiator does), gz with quota 0 asking for 4 and getting nothing; in ga,
    `a.ceil` has Ceiling 0 and idle jobs, `a.slow` factor 1e6 and nothing got."""
    scale = min(1.0, pool / sum(static))
    recs = []
    for i in range(n_passes):
        subs = [obs("ga.a1@x", "ga", 700.0, eup=1.0), obs("ga.a2@x", "ga", 700.0, eup=1.0),
                dataclasses.replace(obs("ga.ceil@x", "ga", 0.0, idle=3, running=0),
                                    ceiling=0),
                obs("ga.slow@x", "ga", 0.0, idle=3, running=0, eup=1e8, factor=1e6,
                    rup=100.0),
                obs("gb.b1@x", "gb", 600.0), obs("gz.z1@x", "gz", 0.0, idle=4, running=0)]
        groups = [GroupObs(name="ga", config_quota=static[0], real_quota=static[0] * scale,
                           real_usage=1400.0, real_requested=1410.0),
                  GroupObs(name="gb", config_quota=static[1], real_quota=static[1] * scale,
                           real_usage=600.0, real_requested=600.0),
                  GroupObs(name="gz", config_quota=0.0, real_quota=0.0, real_usage=0.0,
                           real_requested=4.0)]
        recs.append(record(i, subs, groups, weight=pool))
    return recs


def test_findings_name_each_configuration_that_makes_fairness_impossible():
    a = A.analyse(A.frames_from_records(_pool()))
    f = a.tables["config_findings"]
    assert list(zip(f["kind"], f["name"])) == [
        ("static quotas over the pool", "(top-level groups)"),
        ("quota 0, nothing got", "gz"),
        ("blocked by its ceiling", "ga.ceil@x"),
        ("blocked by its factor", "ga.slow@x")]
    top = f.iloc[0]
    assert (top["configured"], top["available"], top["passes"]) == (2900.0, 2000.0, 3)
    assert "add up to 2,900 on a pool of 2,000" in top["text"]
    assert "69%" in top["text"]
    assert f.iloc[1]["available"] == 4.0 and f.iloc[1]["passes"] == 3
    # a share under a slot is said as it is, not rounded to 0
    slow = f.iloc[3]
    assert 0 < slow["available"] < 0.1 and f"leaves it {slow['available']:.2g} of a slot" \
        in slow["text"]
    assert [x["kind"] for x in a.summary["findings"]] == list(f["kind"])


def test_a_sound_configuration_has_no_findings():
    """Quotas within the pool, no ceiling, every factor 1 and the quota-0 group served
    from surplus: nothing to say."""
    recs = []
    for r in _pool(static=(1000.0, 900.0)):
        subs = [s for s in r.submitters if s.name not in ("ga.ceil@x", "ga.slow@x")]
        groups = [dataclasses.replace(g, real_usage=2.0) if g.name == "gz" else g
                  for g in r.groups]
        subs = [dataclasses.replace(s, real_usage=2.0, running_jobs=2)
                if s.name == "gz.z1@x" else s for s in subs]
        recs.append(dataclasses.replace(r, submitters=tuple(subs), groups=tuple(groups)))
    a = A.analyse(A.frames_from_records(recs))
    assert a.tables["config_findings"].empty and a.summary["findings"] == []


def test_quotas_the_negotiator_applied_over_the_pool_with_oversubscription():
    """NEGOTIATOR_ALLOW_QUOTA_OVERSUBSCRIPTION: the EffectiveQuotas themselves exceed the
    pool (dynamic fractions here, so no static sum says it first)."""
    recs = []
    for r in _pool(static=(0.8, 0.7)):
        groups = tuple(dataclasses.replace(g, real_quota=g.config_quota * 2000.0)
                       for g in r.groups)
        recs.append(dataclasses.replace(r, groups=groups))
    a = A.analyse(A.frames_from_records(recs))
    kinds = list(a.tables["config_findings"]["kind"])
    assert kinds[:2] == ["dynamic quotas over 1", "quotas applied over the pool"]
    assert "add up to 1.50" in a.tables["config_findings"].iloc[0]["text"]


def test_findings_come_first_on_the_page(tmp_path):
    a = A.analyse(A.frames_from_records(_pool()))
    V.write_report(a, tmp_path / "r")
    html = (tmp_path / "r" / "index.html").read_text()
    assert html.index('<section id="findings">') < html.index('<section id="summary">')
    assert "add up to 2,900 on a pool of 2,000" in html
    assert (tmp_path / "r" / "tables" / "config_findings.csv").is_file()
    # the functions take the analysis's own frames (an empty share: nothing blocked)
    pt = A.pass_table(A.frames_from_records(_pool()).passes)
    assert config_findings(pt, A.frames_from_records(_pool()).groups,
                           A.frames_from_records(_pool()).submitters,
                           a.tables["group_quota_by_pass"],
                           a.tables["submitter_shares_by_pass"].iloc[0:0]).shape[0] == 2
