"""A mocked pool for the bindings: htcondor2.Collector, Schedd, RemoteParam and param
replaced (pytest-mock) by fakes that answer with recorded fixture ads. The mocked
Schedd.query honours its constraint and returns only the projected attributes; any
method that is not a read operation is refused and recorded.

A test may put garbage where the ads are (FakePool.slots, .schedds[name], ...: None, a
number, a string, a list holding things that are not ClassAds): the fakes hand it over
as it is, as broken bindings or a broken daemon would, and never choke on it themselves
(a list's ClassAds are still restricted and filtered, its other items passed as they
are), so that what the capture makes of it is what a test sees."""

from __future__ import annotations

import re
from pathlib import Path

import classad2
import htcondor2

from negotiator_ext.adapters.adfiles import read_ads

FIXTURES = Path(__file__).parent / "data" / "fixtures"
FIX = FIXTURES / "hgq_nested_hep_lep_surplus"


def fixture_ads(name: str, fix: Path = FIX) -> list[classad2.ClassAd]:
    return read_ads(fix / name)


def fixture_config_knobs(fix: Path = FIX) -> dict[str, str]:
    """The fixture's config file as a RemoteParam would list it (later lines win)."""
    knobs: dict[str, str] = {}
    for line in (fix / "config").read_text().splitlines():
        if not line.strip() or line.lstrip().startswith("#") or "=" not in line:
            continue
        k, v = line.split("=", 1)
        knobs[k.strip()] = v.strip()
    return knobs


def restrict(ad: classad2.ClassAd, projection) -> classad2.ClassAd:
    if not isinstance(ad, classad2.ClassAd):
        return ad                   # garbage, handed over as it is
    if not projection:
        return classad2.parseOne(ad.printOld(), classad2.ParserType.Old)
    # the names of every item, as the collector and the schedd read the projection the
    # bindings join them into (separated by spaces, commas, tabs or newlines)
    want = {n.lower() for p in projection for n in re.split(r"[ ,\t\r\n]+", p) if n}
    out = classad2.ClassAd()
    for k in ad.keys():
        if k.lower() in want:
            out[k] = ad.lookup(k)
    return out


def location(name: str, port: int) -> classad2.ClassAd:
    return classad2.ClassAd({"Name": name, "MyAddress": f"<10.0.0.{port % 250}:{port}>",
                             "CondorVersion": "$CondorVersion: 25.14.0 $", "MyType": "Scheduler"})


def forbidden(pool: "FakePool | None", owner: str, name: str):
    """Any other attribute of a fake binding object: record it and refuse. The capture
    may only use the read methods the fakes define (README: READ authorization only);
    dunder probes (copy, pickle, ...) are refused without being recorded."""
    if pool is not None and not (name.startswith("__") and name.endswith("__")):
        pool.calls.append(("FORBIDDEN", f"{owner}.{name}"))
    raise AttributeError(f"{owner}.{name} is not a read operation the capture may use")


class FakeRemoteParam:
    """RemoteParam's shape: keys listed at construction, each value fetched on access."""

    def __init__(self, table: dict[str, str]):
        self._table = dict(table)
        self.fetched: list[str] = []

    def keys(self):
        return list(self._table)

    def __iter__(self):
        return iter(self._table)

    def __len__(self):
        return len(self._table)

    def __contains__(self, key):
        return key in self._table

    def __getitem__(self, key):
        self.fetched.append(key)
        return self._table[key]


class FakePool:
    """A pool whose collector, schedds and negotiator answer from fixture ads."""

    def __init__(self, fix: Path = FIX):
        self.slots = fixture_ads("slots.ads", fix)
        self.submitters = fixture_ads("submitters.ads", fix)
        self.accounting = fixture_ads("accounting.ads", fix)
        self.negotiator = fixture_ads("expected/negotiator.ads", fix)
        self.schedds: dict[str, list | Exception] = {"vm": fixture_ads("jobs.ads", fix)}
        self.remote: dict[str, str] | Exception = fixture_config_knobs(fix)
        self.collector_error: Exception | None = None
        self.query_errors: dict = {}          # AdTypes -> exception
        self.query_answers: dict = {}         # AdTypes -> the query's answer, garbage or not
        self.locate_result = "negotiator"      # or None, or an exception, or garbage
        self.locate_all: dict = {}             # DaemonTypes -> locateAll's answer
        self.calls: list[tuple] = []           # every bindings call, in order
        self.schedd_queries: dict[str, list[list[str]]] = {}
        self.remote_params: list[FakeRemoteParam] = []        # the negotiators'
        # a pool of several negotiators: each one's RemoteParam table by its Name (the
        # others answer `remote`)
        self.negotiator_remote: dict[str, dict[str, str] | Exception] = {}
        # each schedd's RemoteParam table (its limits, core.schedd_limits), and the reads
        self.schedd_remote: dict[str, str] | Exception = {}
        self.schedd_remote_params: list[FakeRemoteParam] = []
        self.param = {"QUERY_TIMEOUT": 60, "Q_QUERY_TIMEOUT": 20}
        self.param_during_queries: list[dict] = []

    # ---- what gets patched in
    def install(self, mocker):
        mocker.patch("htcondor2.Collector", side_effect=self.make_collector)
        mocker.patch("htcondor2.Schedd", side_effect=self.make_schedd)
        mocker.patch("htcondor2.RemoteParam", side_effect=self.make_remote_param)
        mocker.patch("htcondor2.param", self.param)
        return self

    def make_collector(self, pool=None):
        self.calls.append(("Collector", pool))
        return FakeCollector(self)

    def make_schedd(self, loc):
        self.calls.append(("Schedd", loc["Name"]))
        return FakeSchedd(self, loc["Name"])

    def make_remote_param(self, loc):
        self.calls.append(("RemoteParam", loc.get("Name")))
        schedd = loc.get("MyType") == "Scheduler"
        table = (self.schedd_remote if schedd
                 else self.negotiator_remote.get(loc.get("Name"), self.remote))
        if isinstance(table, Exception):
            raise table
        if not isinstance(table, dict):
            return table                # garbage for a RemoteParam, handed over as it is
        rp = FakeRemoteParam(table)
        (self.schedd_remote_params if schedd else self.remote_params).append(rp)
        return rp


class FakeCollector:
    def __init__(self, pool: FakePool):
        self.pool = pool

    def __getattr__(self, name):
        return forbidden(self.__dict__.get("pool"), "Collector", name)

    def query(self, ad_type=htcondor2.AdTypes.Any, constraint=None, projection=None, statistics=None):
        p = self.pool
        p.calls.append(("Collector.query", ad_type, tuple(projection or ())))
        p.param_during_queries.append(dict(p.param))
        if ad_type == htcondor2.AdTypes.Startd and p.collector_error is not None:
            raise p.collector_error
        if ad_type in p.query_errors:
            raise p.query_errors[ad_type]
        if ad_type in p.query_answers:
            return p.query_answers[ad_type]
        ads = {
            htcondor2.AdTypes.Startd: p.slots,
            htcondor2.AdTypes.Submitter: p.submitters,
            htcondor2.AdTypes.Accounting: p.accounting,
            htcondor2.AdTypes.Negotiator: p.negotiator,
            htcondor2.AdTypes.Schedd: [location(n, 9618 + i) for i, n in enumerate(p.schedds)],
        }.get(ad_type, [])
        if not isinstance(ads, list):
            return ads                  # garbage, handed over as it is
        return [restrict(ad, projection) for ad in ads]

    def locate(self, daemon_type, name=None):
        p = self.pool
        p.calls.append(("Collector.locate", daemon_type))
        assert daemon_type == htcondor2.DaemonTypes.Negotiator
        if isinstance(p.locate_result, Exception):
            raise p.locate_result
        if not (isinstance(p.locate_result, str) and p.locate_result == "negotiator"):
            return p.locate_result          # None, or garbage handed over as it is
        if not isinstance(p.negotiator, list) or not p.negotiator:
            return None
        return restrict(p.negotiator[0], ["MyAddress", "AddressV1", "CondorVersion",
                                          "CondorPlatform", "Name", "Machine"])

    def locateAll(self, daemon_type):
        self.pool.calls.append(("Collector.locateAll", daemon_type))
        if daemon_type in self.pool.locate_all:     # a test's answer, garbage or not
            got = self.pool.locate_all[daemon_type]
            if isinstance(got, Exception):
                raise got
            return got
        if daemon_type == htcondor2.DaemonTypes.Negotiator:
            if not isinstance(self.pool.negotiator, list):
                return self.pool.negotiator
            return [restrict(ad, ["MyAddress", "AddressV1", "CondorVersion", "CondorPlatform",
                                  "Name", "Machine"]) for ad in self.pool.negotiator]
        assert daemon_type == htcondor2.DaemonTypes.Schedd
        return [location(n, 9618 + i) for i, n in enumerate(self.pool.schedds)]


class FakeSchedd:
    def __init__(self, pool: FakePool, name: str):
        self.pool, self.name = pool, name

    def __getattr__(self, name):
        return forbidden(self.__dict__.get("pool"), "Schedd", name)

    def query(self, constraint="True", projection=[], callback=None, limit=-1, opts=None):
        p = self.pool
        p.calls.append(("Schedd.query", self.name, constraint))
        p.schedd_queries.setdefault(self.name, []).append(list(projection))
        p.param_during_queries.append(dict(p.param))
        if self.name not in p.schedds:  # (a location ad naming no schedd of the fake)
            raise htcondor2.HTCondorException("Failed to connect to schedd")
        jobs = p.schedds[self.name]
        if isinstance(jobs, Exception):
            raise jobs
        if not isinstance(jobs, list):
            return jobs                 # garbage, handed over as it is
        cons = classad2.ExprTree(str(constraint))
        matched = [j for j in jobs if not isinstance(j, classad2.ClassAd) or cons.eval(j) is True]
        if opts is not None and opts == htcondor2.QueryOpt.SummaryOnly:
            # as a schedd answers condor_q's totals: one ad, the jobs it counted
            return [classad2.ClassAd({"MyType": "Summary", "Jobs": len(matched)})]
        if limit is not None and limit >= 0:
            matched = matched[:limit]       # (the schedd stops at the limit)
        return [restrict(j, projection) for j in matched]


