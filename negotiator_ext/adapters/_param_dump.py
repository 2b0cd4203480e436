"""Child-process side of the config adapter: load HTCondor config, print every knob as JSON.

Run as `python -m negotiator_ext.adapters._param_dump` with CONDOR_CONFIG set. It is a
separate process because htcondor2.reload_config() ends the process on a malformed config
file, and because the bindings' config is process-global state.
"""

import json
import sys


def main() -> int:
    import htcondor2

    htcondor2.set_subsystem("NEGOTIATOR")
    htcondor2.reload_config()
    p = htcondor2.param
    params, raw = {}, {}
    for key in list(p.keys()):
        if not key:
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


if __name__ == "__main__":
    sys.exit(main())
