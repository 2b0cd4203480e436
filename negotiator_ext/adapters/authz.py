"""Why a daemon refused a command, as this client can tell: asked with the bindings' ping.

When a daemon refuses a command for want of authorization, neither the bindings nor
condor_userprio say so: the bindings raise "Failed communication with collector." or
"Failed to advertise to collector.", condor_userprio prints "failed to start
MANAGE_PRIORITY_FACTOR command to negotiator" (the daemon's log and the tools' -debug
output have the "DENIED"). Every daemon answers DC_NOP (ALLOW level: anyone who
authenticates) and one DC_NOP_<LEVEL> command per authorization level, registered at that
level, so two pings tell the cases apart with this client's own configuration, token and
identity:

  * the plain ping fails: the daemon cannot be reached, or does not authenticate this
    client (no token it accepts, a required method or encryption it cannot do);
  * the plain ping answers (with the identity the daemon mapped this client to) and the
    ping at LEVEL fails: the daemon refuses this client LEVEL authorization (an ALLOW
    list without the identity, or a token whose scopes leave LEVEL out);
  * both answer: the daemon grants LEVEL, and the failure was something else.

`refusal` returns one line for the first two cases and None for the third, and None
whenever it cannot tell (the bindings without `ping`, a test's stand-in, an address it
cannot make out): a diagnosis, never a new failure.

The levels the commands this product sends need (HTCondor 25.14: the
Register_Command... calls of src/condor_collector.V6/collector.cpp and
src/condor_negotiator.V6/matchmaker.cpp):

  * the collector's queries (slots, submitters, accounting, the daemons' ads): READ;
    UPDATE_AD_GENERIC and INVALIDATE_ADS_GENERIC (the ShadowNegotiator ad): DAEMON;
  * the schedd's job queries and every daemon's RemoteParam reads: READ;
  * the negotiator's GET_PRIORITY (the accountant): READ; SET_PRIORITYFACTOR (a factor
    without a lease): WRITE; MANAGE_PRIORITY_FACTOR, MANAGE_CEILING and MANAGE_FLOOR (the
    leases), SET_CEILING, SET_FLOOR and DELETE_USER: ADMINISTRATOR.
"""

from __future__ import annotations

import socket

__all__ = ["refusal", "negotiator_refusal", "sinful", "READ", "WRITE", "DAEMON", "ADMINISTRATOR"]

READ, WRITE, DAEMON, ADMINISTRATOR = "READ", "WRITE", "DAEMON", "ADMINISTRATOR"


# a refusal is answered at once, in the security handshake: a command that failed after
# longer than this (seconds) timed out, and the daemon is not pinged (a frozen daemon
# would hold the pings as long again)
QUICK = 5.0


def refusal(htcondor, where: str | None, level: str, daemon: str, *,
            took: float = 0.0) -> str | None:
    """One line saying why `daemon` (what to call it, e.g. "the collector") would refuse
    this client a command that needs `level` authorization; None when it grants the
    level, or when that cannot be told. `where`: the daemon's sinful string
    ("<ip:port...>", e.g. a located ad's MyAddress), or a collector named as a pool is
    (`sinful`). `took`: how long the failed command took (seconds); beyond QUICK, None
    without asking."""
    ping = getattr(htcondor, "ping", None)
    if not callable(ping) or took > QUICK:
        return None
    address = sinful(where, htcondor)
    if address is None:
        return None
    try:
        who = ping(address)
    except Exception as exc:        # HTCondorException: unreachable or not authenticated
        return (f"{daemon} cannot be reached or does not authenticate this client: a "
                f"ping says {_one_line(exc)}")
    try:
        identity = who.get("MyRemoteUserName")
    except Exception:
        return None
    if not isinstance(identity, str) or not identity:
        return None
    try:
        ping(address, level)
    except Exception:               # authenticated, and refused at that level
        return f"{daemon} refuses {level} authorization to {identity}"
    return None


def sinful(pool: str | None, htcondor=None) -> str | None:
    """The sinful string ("<ip:port>") of a collector named as a pool is ("HOST[:PORT]",
    a sinful string, or None: this host's COLLECTOR_HOST, the first of several), the
    address `refusal` pings; None when it cannot be made out."""
    if pool is None:
        try:
            pool = str(htcondor.param["COLLECTOR_HOST"])
        except Exception:
            return None
        pool = pool.replace(",", " ").split()[0] if pool.strip() else None
        if pool is None:
            return None
    pool = pool.strip()
    if pool.startswith("<"):
        return pool
    where, sep, query = pool.partition("?")
    if where.startswith("["):               # [v6 address]:port
        host, _, rest = where[1:].partition("]")
        port = rest[1:] if rest.startswith(":") else ""
    else:
        host, _, port = where.rpartition(":") if where.count(":") == 1 else (where, "", "")
    port = port or "9618"
    if not port.isdigit() or not host:
        return None
    try:
        infos = socket.getaddrinfo(host, int(port), type=socket.SOCK_STREAM)
    except (OSError, UnicodeError, ValueError):
        return None
    if not infos:
        return None
    family, *_, addr = infos[0]
    ip = f"[{addr[0]}]" if family == socket.AF_INET6 else addr[0]
    return f"<{ip}:{port}{sep}{query}>"


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def negotiator_refusal(htcondor, pool: str | None, name: str | None, level: str, *,
                       took: float = 0.0) -> str | None:
    """`refusal` for a command to the negotiator of `pool` (None: this host's) called
    `name` (None: the pool's one), found through its collector as condor_userprio finds
    it: that needs READ at the collector, so a collector that will not say where the
    negotiator is is asked for READ instead."""
    if not callable(getattr(htcondor, "ping", None)) or took > QUICK:
        return None
    try:
        collector = htcondor.Collector(pool)
        kind = htcondor.DaemonTypes.Negotiator
        ad = collector.locate(kind, name) if name else collector.locate(kind)
        address = ad.get("MyAddress")
        called = ad.get("Name")
    except Exception:
        why = refusal(htcondor, pool, READ, f"the collector {pool or '(COLLECTOR_HOST)'}",
                      took=took)
        return f"{why}, which finding the negotiator needs" if why and "refuses" in why else why
    if not isinstance(address, str):
        return None
    daemon = f"the negotiator {called}" if isinstance(called, str) and called else "the negotiator"
    return refusal(htcondor, address, level, daemon, took=took)
