"""HTCondor configuration through HTCondor's own config system.

`load_config(path)` points CONDOR_CONFIG at `path`, calls `htcondor2.reload_config()` and
reads `htcondor2.param` (subsystem NEGOTIATOR, so `NEGOTIATOR.<knob>` overrides apply),
then types the result into a `NegotiatorConfig`. The bindings run in a child process: a
malformed config file makes reload_config() end the process it runs in, and the loaded
config is process-global state that must not leak between snapshots.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from ..core.config import NegotiatorConfig, ext_knobs
from ..errors import InputError


LOCAL = "<local>"


def _source(path: str | Path | None) -> str:
    """How errors name the configuration `path` stands for."""
    if path == LOCAL:
        return os.environ.get("CONDOR_CONFIG", "the local HTCondor configuration")
    return str(path) if path is not None else "<HTCondor defaults>"


def read_params(path: str | Path | None) -> tuple[dict, dict]:
    """Every knob HTCondor knows for config file `path` (None: HTCondor's defaults only;
    LOCAL: this host's own configuration, as every HTCondor tool here finds it).

    Returns (params, raw): typed values as htcondor2.param returns them, and the text of
    the typed ones.
    """
    env = dict(os.environ)
    source = _source(path)
    if path != LOCAL:   # LOCAL: this host's CONDOR_CONFIG and _CONDOR_* variables apply
        if path is None:
            env["CONDOR_CONFIG"] = os.devnull
        else:
            p = Path(path)
            if not p.is_file():
                raise InputError(source, "config file not found")
            env["CONDOR_CONFIG"] = str(p.resolve())
        # _CONDOR_* variables would silently change the knobs; a snapshot's config is its own.
        for k in list(env):
            if k.upper().startswith("_CONDOR_"):
                del env[k]
    proc = subprocess.run([sys.executable, "-m", "negotiator_ext.adapters._param_dump"],
                          env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise InputError(source, _config_error(proc.stderr + proc.stdout,
                                               None if path == LOCAL else path))
    try:
        doc = json.loads(proc.stdout)
    except json.JSONDecodeError:
        raise InputError(source, "HTCondor could not read this configuration") from None
    return doc["params"], doc["raw"]


def _config_error(output: str, path) -> str:
    m = re.search(r"Configuration Error Line (\d+)", output)
    if m and path is not None:
        n = int(m.group(1))
        try:
            line = Path(path).read_text(errors="replace").splitlines()[n - 1].strip()
        except (OSError, IndexError):
            line = ""
        return f"line {n}: not valid HTCondor configuration" + (f": {line!r}" if line else "")
    first = next((ln.strip() for ln in output.splitlines() if ln.strip()), "")
    return "HTCondor could not read this configuration" + (f" ({first})" if first else "")


def load_config(path: str | Path | None) -> NegotiatorConfig:
    """The typed negotiator configuration of config file `path` (None: defaults; LOCAL:
    this host's configuration)."""
    params, raw = read_params(path)
    return NegotiatorConfig.from_params(params, source=_source(path), raw=raw)


def local_ext_knobs(path: str | Path | None = None) -> dict[str, str]:
    """Our own NEGOTIATOR_EXT_* knobs, from config file `path` or else this host's
    configuration (empty when the host has no HTCondor configuration)."""
    if path is not None:
        params, _ = read_params(path)   # an explicit file must be readable
    else:
        try:
            params, _ = read_params(LOCAL)
        except InputError:
            return {}
    return ext_knobs(params)
