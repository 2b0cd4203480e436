"""adapters/authz.py: telling a refusal for want of authorization from a daemon that
cannot be reached, with stand-in bindings (tests/test_live_production.py does it with
real daemons); and the level each change of recommend --apply needs."""

from __future__ import annotations

import logging

import pytest

from negotiator_ext.adapters.apply import apply_recommendations, needed_level
from negotiator_ext.adapters.authz import QUICK, negotiator_refusal, refusal, sinful
from negotiator_ext.core.recommend import Recommendation
from negotiator_ext.shadow_publish import LoggedOnce


class Bindings:
    """ping(address, level=None) as htcondor2's: an ad naming the identity, or an
    exception: `unreachable` at any level, `refused` the levels it refuses."""

    class DaemonTypes:
        Negotiator = "Negotiator"

    def __init__(self, *, unreachable=False, refused=(), identity="reader@example.org"):
        self.unreachable, self.refused, self.identity = unreachable, set(refused), identity
        self.pings: list[tuple] = []
        self.param = {"COLLECTOR_HOST": "127.0.0.1:9618"}

    def ping(self, address, level=None):
        self.pings.append((address, level))
        if self.unreachable:
            raise RuntimeError("Unable to connect to the remote daemon.")
        if level in self.refused:
            raise RuntimeError("Failed to start command.")
        return {"MyRemoteUserName": self.identity, "AuthorizationSucceeded": True}

    def Collector(self, pool):             # noqa: N802 (the bindings' name)
        outer = self

        class Collector:
            def locate(self, kind, name=None):
                if "READ" in outer.refused:
                    raise RuntimeError("Failed communication with collector.")
                return {"MyAddress": "<127.0.0.1:4000>", "Name": name or "cm"}
        return Collector()


def test_refused_at_the_level():
    b = Bindings(refused={"DAEMON"})
    assert refusal(b, "127.0.0.1:9618", "DAEMON", "the collector") == (
        "the collector refuses DAEMON authorization to reader@example.org")
    assert b.pings == [("<127.0.0.1:9618>", None), ("<127.0.0.1:9618>", "DAEMON")]


def test_granted_or_not_to_be_told_is_none():
    assert refusal(Bindings(), "<127.0.0.1:9618>", "READ", "the collector") is None
    assert refusal(object(), "<127.0.0.1:9618>", "READ", "the collector") is None   # no ping
    b = Bindings(refused={"READ"})
    assert refusal(b, "<127.0.0.1:9618>", "READ", "the collector", took=QUICK + 1) is None
    assert b.pings == []                   # a timeout: a frozen daemon is not asked again
    b.identity = None                      # an answer without an identity
    assert refusal(b, "<127.0.0.1:9618>", "READ", "the collector") is None


def test_unreachable_or_not_authenticated():
    assert refusal(Bindings(unreachable=True), "<127.0.0.1:1>", "READ", "the collector") == (
        "the collector cannot be reached or does not authenticate this client: a ping says "
        "Unable to connect to the remote daemon.")


@pytest.mark.parametrize("pool, expected", [
    ("127.0.0.1:9619", "<127.0.0.1:9619>"), ("127.0.0.1", "<127.0.0.1:9618>"),
    ("<10.0.0.1:9618?sock=collector>", "<10.0.0.1:9618?sock=collector>"),
    ("[::1]:9620", "<[::1]:9620>"), ("localhost:9618", None), ("host:port", None),
    (None, "<127.0.0.1:9618>")])
def test_sinful(pool, expected):
    got = sinful(pool, Bindings())
    if pool == "localhost:9618":           # resolved: one of localhost's addresses
        assert got in ("<127.0.0.1:9618>", "<[::1]:9618>")
    else:
        assert got == expected


def test_negotiator_refusal_finds_it_through_the_collector():
    assert negotiator_refusal(Bindings(refused={"ADMINISTRATOR"}), "cm:9618", None,
                              "ADMINISTRATOR") == (
        "the negotiator cm refuses ADMINISTRATOR authorization to reader@example.org")
    b = Bindings(refused={"READ"})
    b.param["COLLECTOR_HOST"] = "127.0.0.1:9618"
    assert negotiator_refusal(b, None, "neg2", "ADMINISTRATOR") == (
        "the collector (COLLECTOR_HOST) refuses READ authorization to reader@example.org, "
        "which finding the negotiator needs")


def rec(kind, name, value, lease=60):
    return Recommendation(kind, name, value, None, None if kind == "delete" else lease,
                          f"{kind} {name}", {})


def test_needed_level():
    assert needed_level(rec("factor", "a@x", 1.5)) == "ADMINISTRATOR"     # a lease
    assert needed_level(rec("factor", "a@x", 1.5, lease=None)) == "WRITE"
    assert {needed_level(rec(k, "a@x", 5.0, lease=None)) for k in ("ceiling", "floor")} == {
        "ADMINISTRATOR"}
    assert needed_level(rec("delete", "a@x", None)) == "ADMINISTRATOR"


class Ledger:
    def __init__(self):
        self.recorded = []

    def record_adjustment(self, adj):
        self.recorded.append(adj)

    def adjustments(self, name=None, since=None):
        return []


def test_a_diagnosed_failure_names_the_level_and_keeps_the_tools_line():
    class Failed:
        returncode, stdout = 1, ""
        stderr = "failed to start MANAGE_PRIORITY_FACTOR command to negotiator\n"
    seen = []

    def diagnose(r, took):
        seen.append((r.name, took < QUICK))
        return "the negotiator cm refuses ADMINISTRATOR authorization to reader@x"
    (adj,) = apply_recommendations([rec("factor", "a@x", 1.5)], ledger=Ledger(), now=0,
                                   pool="cm", run=lambda *a, **k: Failed(), diagnose=diagnose)
    assert adj.outcome == ("failed: the negotiator cm refuses ADMINISTRATOR authorization to "
                           "reader@x (condor_userprio: failed to start MANAGE_PRIORITY_FACTOR "
                           "command to negotiator)")
    assert seen == [("a@x", True)]
    # nothing to add, or a diagnosis that fails: the tool's line as before
    for d in (lambda r, t: None, lambda r, t: 1 / 0):
        (adj,) = apply_recommendations([rec("factor", "a@x", 1.5)], ledger=Ledger(), now=0,
                                       run=lambda *a, **k: Failed(), diagnose=d)
        assert adj.outcome == "failed: failed to start MANAGE_PRIORITY_FACTOR command to negotiator"


def test_a_problem_every_pass_is_logged_once_and_its_end_once(caplog):
    log = logging.getLogger("test_authz")
    once = LoggedOnce(log, "works again")
    with caplog.at_level(logging.DEBUG, logger="test_authz"):
        for problem in ("refused", "refused", "refused", None, None, "refused", "other"):
            once(problem)
    assert [(r.levelname, r.getMessage()) for r in caplog.records] == [
        ("WARNING", "refused"), ("DEBUG", "refused"), ("DEBUG", "refused"),
        ("INFO", "works again"), ("WARNING", "refused"), ("WARNING", "other")]
