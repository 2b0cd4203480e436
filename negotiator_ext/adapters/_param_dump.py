"""Child-process side of the config readers: HTCondor config, printed as JSON.

Two modes. `--remote SECONDS`: the live capture's read of a daemon's configuration through
htcondor2.RemoteParam (see `remote_main`). Otherwise the local one:

Run as `python -m negotiator_ext.adapters._param_dump [--memory BYTES] [ROOT]` with
CONDOR_CONFIG set: without ROOT the bindings read the config CONDOR_CONFIG names; with
ROOT (a root config condor_config wrote, CONDOR_CONFIG=ONLY_ENV) they read that one, which
sets _NEGOTIATOR_EXT_ROOT_READ. It is a separate process because htcondor2.reload_config()
ends the process on a malformed config file, and because the bindings' config is
process-global state. --memory limits the address space (set once the bindings are
loaded, before the config is read).
"""

import json
import sys
import time

_OURS = "_NEGOTIATOR_EXT_"      # the reader's own knobs, never reported


def main(argv=None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["--remote"]:
        return remote_main(int(args[1]), schedd=args[2:3] == ["--schedd"])
    memory = None
    if args[:1] == ["--memory"]:
        memory = int(args[1])
        del args[:2]
    root = args[0] if args else None

    import htcondor2

    if memory is not None:      # after the import: the limit is for reading the config
        import resource
        soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        if hard != resource.RLIM_INFINITY:
            memory = min(memory, hard)
        if soft == resource.RLIM_INFINITY or soft > memory:
            resource.setrlimit(resource.RLIMIT_AS, (memory, hard))
        resource.setrlimit(resource.RLIMIT_CORE, (0, resource.getrlimit(resource.RLIMIT_CORE)[1]))
    htcondor2.set_subsystem("NEGOTIATOR")
    htcondor2.reload_config(root)
    p = htcondor2.param
    if root is not None and _OURS + "ROOT_READ" not in set(p.keys()):
        print(f"HTCondor did not read the root config {root}", file=sys.stderr)
        return 3
    params, raw = {}, {}
    for key in list(p.keys()):
        if not key or key.upper().startswith(_OURS):
            continue
        names = [key]
        if key.upper().startswith("NEGOTIATOR."):
            names.append(key[len("NEGOTIATOR."):])
        for name in names:
            try:
                value = p[name]
            except Exception:
                continue
            if not isinstance(value, (str, int, float, bool)) and value is not None:
                value = str(value)
            params[name] = value
            # The unexpanded-type text: a knob HTCondor types (number, bool) comes back
            # as its default when its text is invalid; the text lets the caller refuse it.
            if not isinstance(value, str):
                try:
                    p["_NEGOTIATOR_EXT_RAW_"] = "$(%s)" % name
                    raw[name] = p["_NEGOTIATOR_EXT_RAW_"]
                except Exception:
                    pass
    # htcondor2.param hides a knob set to nothing; $(NAME) expands to its table default
    # when it is not set and to nothing when it is set to nothing, which tells the two
    # apart for the knobs where the difference matters.
    from negotiator_ext.core.config import NULL_WHEN_EMPTY
    for name in NULL_WHEN_EMPTY:
        if name not in params:
            try:
                p["_NEGOTIATOR_EXT_RAW_"] = "[$(%s)]" % name
                if p["_NEGOTIATOR_EXT_RAW_"] == "[]":
                    params[name] = ""
            except Exception:
                pass
    json.dump({"params": params, "raw": raw}, sys.stdout)
    return 0


def _emit(record: dict) -> None:
    sys.stdout.write(json.dumps(record) + "\n")
    sys.stdout.flush()


class _Traced:
    """A RemoteParam that says which knob it is about to fetch before fetching it: the
    daemon expands the value while the request waits, and a value whose expansion never
    ends (`A = $(B)`, `B = $(A)`) never comes back, so the last knob named is the one."""

    def __init__(self, remote):
        self.remote = remote

    def keys(self):
        return self.remote.keys()

    def __getitem__(self, key):
        _emit({"reading": key, "at": time.time()})
        return self.remote[key]


def remote_main(alarm: int, schedd: bool = False) -> int:
    """`--remote SECONDS`: read the policy knobs of the daemon whose location ad (ClassAd
    text) is on stdin through htcondor2.RemoteParam, as
    `remote_knobs.select_policy_knobs` selects them, and print JSON lines: {"listed": N}
    once the daemon has listed its knob names, {"reading": NAME, "at": EPOCH} before each
    value is fetched, and at the end {"knobs": {...}}, or {"error": TEXT} (exit status
    1). With `schedd`, the knobs are
    the schedd's limits (`remote_knobs.select_schedd_knobs`).

    The bindings wait for a daemon's answer inside C++ code with the interpreter lock
    held, and without a time limit: the parent kills this process when it takes too long,
    and SIGALRM's default action ends it after SECONDS should the parent be gone."""
    import signal
    if alarm > 0:
        signal.signal(signal.SIGALRM, signal.SIG_DFL)
        signal.alarm(alarm)
    try:
        import classad2
        import htcondor2

        from negotiator_ext.adapters.remote_knobs import (select_policy_knobs,
                                                          select_schedd_knobs)
        location = classad2.parseOne(sys.stdin.read())
        remote = htcondor2.RemoteParam(location)
        _emit({"listed": len(remote.keys())})
        select = select_schedd_knobs if schedd else select_policy_knobs
        knobs = select(_Traced(remote))
    except Exception as exc:
        _emit({"error": " ".join(str(exc).split()) or type(exc).__name__})
        return 1
    _emit({"knobs": knobs})
    return 0


if __name__ == "__main__":
    sys.exit(main())
