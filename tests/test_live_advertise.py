"""The ShadowNegotiator ad in a real collector (tests/livepool.py): found the ways admins
look for ads, replaced by each pass, withdrawn on a clean stop, left to its lifetime
after a kill."""

from __future__ import annotations

import signal
import subprocess
import sys

import pytest

pytestmark = pytest.mark.live

NAME = "negotiator-ext@live-test"


def shadow_ads(pool) -> list[list[str]]:
    out = pool.tool("condor_status", "-any", "-constraint", 'MyType == "ShadowNegotiator"',
                    "-af:t", "Name", "PassUuid", "PassStatus", "ClassAdLifetime").stdout
    return [ln.split("\t") for ln in out.splitlines() if ln.strip()]


def start_loop(pool, tmp_path, name=NAME):
    config = tmp_path / "ext.config"
    config.write_text(f"NEGOTIATOR_EXT_NAME = {name}\n")
    return subprocess.Popen(
        [sys.executable, "-m", "negotiator_ext", "shadow", "--pool", pool.collector,
         "--interval", "2", "--state-dir", str(tmp_path / "state"), "--config", str(config)],
        env=pool.env, stdout=(tmp_path / "out").open("w"), stderr=(tmp_path / "err").open("w"))


def test_the_ad_is_found_replaced_and_withdrawn(clean_pool, tmp_path):
    pool = clean_pool
    loop = start_loop(pool, tmp_path)
    try:
        (first,) = pool.wait_for(lambda: shadow_ads(pool), 30, "the ShadowNegotiator ad")
        assert first[0] == NAME and first[2] == "complete"
        assert first[3] == "900"            # max(CLASSAD_LIFETIME, 3 intervals)
        # the Generic-ads query of its own table, as condor_status does it
        generic = pool.tool("condor_status", "-subsystem", "ShadowNegotiator", "-af", "Name",
                            "MyType").stdout.split()
        assert generic == [NAME, "ShadowNegotiator"]
        # the bindings, as a Python admin script would ask
        script = ("import htcondor2 as h; print([a['Name'] for a in h.Collector("
                  f"{pool.collector!r}).query(h.AdTypes.Any, "
                  "'MyType == \"ShadowNegotiator\"', ['Name'])])")
        py = subprocess.run([sys.executable, "-c", script], env=pool.env, capture_output=True,
                            text=True, timeout=60)
        assert py.stdout.strip() == repr([NAME]), py.stderr
        # the next pass replaces it: one ad, another pass
        (second,) = pool.wait_for(lambda: [a for a in shadow_ads(pool) if a[1] != first[1]],
                                  30, "the next pass's ad")
        assert second[0] == NAME and len(shadow_ads(pool)) == 1
    finally:
        loop.send_signal(signal.SIGTERM)
        loop.wait(timeout=60)
    assert loop.returncode == 0, (tmp_path / "err").read_text()
    assert shadow_ads(pool) == []           # withdrawn on the clean stop
    assert "withdrawing" not in (tmp_path / "err").read_text()


def test_a_killed_loop_leaves_its_ad_to_its_lifetime(clean_pool, tmp_path):
    pool = clean_pool
    name = NAME + "-killed"
    loop = start_loop(pool, tmp_path, name)
    try:
        pool.wait_for(lambda: shadow_ads(pool), 30, "the ShadowNegotiator ad")
    finally:
        loop.send_signal(signal.SIGKILL)
        loop.wait(timeout=30)
    (ad,) = shadow_ads(pool)
    assert ad[0] == name and ad[3] == "900"
    # an admin (or the next loop's clean stop under the same name) removes it
    query = tmp_path / "invalidate.ad"
    query.write_text(f'MyType = "Query"\nTargetType = "ShadowNegotiator"\nName = "{name}"\n'
                     f'Requirements = TARGET.Name == "{name}"\n')
    pool.tool("condor_advertise", "INVALIDATE_ADS_GENERIC", str(query))
    pool.wait_for(lambda: shadow_ads(pool) == [], 10, "the ad to go")
