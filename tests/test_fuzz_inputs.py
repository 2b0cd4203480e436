"""A seeded mutation fuzzer over the snapshot readers and the config reader (issue 14).

Each case copies a recorded snapshot, damages one of its files (a hostile value on an
attribute line, a line deleted, repeated or swapped, a stray byte, a cut, a hostile
config line, a wrong JSON type in meta.json) and runs `negotiate --json` and `userprio`
on it. The contract: exit 0 or 2; on 2, one line naming a file of the snapshot; on 0,
valid JSON with no NaN or infinity anywhere; the snapshot unchanged on disk; no command
run (the hostile config lines would create a canary file); no case slower than its
deadline. NEGOTIATOR_EXT_FUZZ_CASES sets the number of cases (default 150, about a
quarter of a minute; seeds from 0 up); a failure names its seed, and `NEGOTIATOR_EXT_FUZZ_SEED=<seed>` reruns it alone.
"""

import hashlib
import json
import os
import random
import re
import signal
from pathlib import Path

import pytest

from conftest import non_finite_numbers, writable_copy
from negotiator_ext import cli

CASES = int(os.environ.get("NEGOTIATOR_EXT_FUZZ_CASES", "150"))
ONLY = os.environ.get("NEGOTIATOR_EXT_FUZZ_SEED")
DEADLINE = 20          # seconds per case: a hang is a failure, not a stuck suite
SCENARIOS = ("hgq_nested_hep_lep_surplus", "pslot_consumption_policy_cpu")

HOSTILE_VALUES = [
    'real("NaN")', 'real("INF")', '-real("INF")', "1e308", "-1e308", "3.5e38", "-1", "0",
    "0.0000001", "9223372036854775808", "-2147483649", '"x"', '""', "{1, 2}", "[a = 1]",
    "undefined", "error", "true", '"\\x1b[31m\\r"', '"é漢字\u2028"', '"a\\"b\\\\"', "(",
    "1 +", "$$(Cpus)", "a.b.c.d", " || ".join(["x"] * 5000), '"' + "A" * 100000 + '"',
    "time()", 'strcat("a", "b")', "-0", "1e-320",
]
HOSTILE_CONFIG = [
    "include command : touch {canary}", "include : touch {canary} |",
    "GROUP_NAMES = $(ENV(HOME))", "A = $(B)\nB = $(A)\nGROUP_QUOTA_group_chemistry = $(A)",
    "include : /dev/zero", "PRIORITY_HALFLIFE = nan", "DEFAULT_PRIO_FACTOR = inf",
    "GROUP_QUOTA_group_chemistry = -1e400", "NEGOTIATOR_USE_SLOT_WEIGHTS = maybe",
    "SLOT_WEIGHT = Cpus / 0", "GROUP_QUOTA_DYNAMIC_group_chemistry = 2",
    "CLASSAD_USER_LIBS = /tmp/{canary}.so", "LOCAL_CONFIG_FILE = touch {canary} |",
    "GROUP_NAMES = a, b, a.b, a.b.c, " + ", ".join(f"g{i}" for i in range(200)),
    "NEGOTIATOR_SLOT_CONSTRAINT = " + " || ".join(["Cpus > 0"] * 3000),
    "if version >= 8\nGROUP_QUOTA_group_chemistry = 3\nendif", "@=end\nX = 1\n@end",
    "\u00e9T\u00c9 = 1", "GROUP_QUOTA_group_chemistry = 1" + "0" * 400,
]
META_VALUES = [None, True, -1, 1e300, "abc", [], {}, [1], {"a": 1}, 1795265266.5, 0, 2 ** 63]
META_KEYS = ["captured_at", "partial", "missing_schedds", "errors", "warnings",
             "schedd_files"]


class _Timeout(Exception):
    pass


def _alarm(signum, frame):
    raise _Timeout


def _digest(d: Path) -> dict:
    return {p.relative_to(d).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(d.rglob("*")) if p.is_file()}


def _mutate(rng: random.Random, snap: Path, canary: Path) -> str:
    """Damage one file of `snap`; returns what was done, for the failure message."""
    name = rng.choice(["slots.ads", "jobs.ads", "submitters.ads", "accounting.ads",
                       "meta.json", "config", "config"])
    path = snap / name
    data = path.read_bytes()
    kind = rng.choice(["value", "value", "value", "delete", "repeat", "swap", "byte", "cut",
                       "config", "meta"])
    lines = data.split(b"\n")
    i = rng.randrange(len(lines))
    if kind == "config" or (name == "config" and kind == "value"):
        text = rng.choice(HOSTILE_CONFIG).format(canary=canary)
        path.write_bytes(data + b"\n" + text.encode() + b"\n")
        return f"{name}: appended {text[:80]!r}"
    if kind == "meta" or (name == "meta.json" and kind == "value"):
        meta = json.loads((snap / "meta.json").read_text())
        key, value = rng.choice(META_KEYS), rng.choice(META_VALUES)
        meta[key] = value
        (snap / "meta.json").write_text(json.dumps(meta))
        return f"meta.json: {key} = {value!r}"
    if kind == "value":
        attr_lines = [n for n, ln in enumerate(lines) if re.match(rb"\w+ = ", ln)]
        i = rng.choice(attr_lines)
        attr = lines[i].split(b" = ", 1)[0]
        value = rng.choice(HOSTILE_VALUES).encode()
        lines[i] = attr + b" = " + value
        what = f"{name}: line {i + 1}: {attr.decode()} = {value[:60]!r}"
    elif kind == "delete":
        what = f"{name}: line {i + 1} deleted"
        del lines[i]
    elif kind == "repeat":
        j = rng.randrange(len(lines))
        lines.insert(j, lines[i])
        what = f"{name}: line {i + 1} repeated at {j + 1}"
    elif kind == "swap":
        j = rng.randrange(len(lines))
        lines[i], lines[j] = lines[j], lines[i]
        what = f"{name}: lines {i + 1} and {j + 1} swapped"
    elif kind == "byte":
        pos = rng.randrange(len(data) + 1)
        b = rng.choice([b"\x00", b"\xff", b"\r", b"\n", b"\x1b", b'"', b"\\", b"=", b"[",
                        b"{", b"\xc3", b"\xe2\x80\xa8", b"#"])
        path.write_bytes(data[:pos] + b + data[pos:])
        return f"{name}: {b!r} inserted at byte {pos}"
    else:
        pos = rng.randrange(len(data) + 1)
        path.write_bytes(data[:pos])
        return f"{name}: cut at byte {pos}"
    path.write_bytes(b"\n".join(lines))
    return what


def _check(capsys, argv, snap: Path, what: str, want_json: bool) -> int:
    signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(DEADLINE)
    try:
        rc = cli.main(argv)
    except _Timeout:
        pytest.fail(f"{what}: {argv[0]} ran over {DEADLINE} s")
    finally:
        signal.alarm(0)
    out, err = capsys.readouterr()
    assert rc in (0, 2), f"{what}: {argv[0]} exit {rc}: {err[-500:]}"
    if rc == 2:
        lines = err.splitlines()
        assert len(lines) == 1 and lines[0].startswith("negotiator-ext: error: "), (what, err)
        assert str(snap) in lines[0], f"{what}: the error does not name the input: {lines[0]}"
    elif want_json:
        doc = json.loads(out, parse_constant=lambda c: pytest.fail(f"{what}: {c} in the JSON"))
        bad = non_finite_numbers(doc)
        assert not bad, f"{what}: non-finite numbers in the JSON: {bad[:3]}"
    else:
        assert not re.search(r"\b(nan|inf)\b", out, re.I), f"{what}: nan/inf in the table"
    return rc


def test_fuzzed_snapshots_keep_the_contract(tmp_path, capsys):
    seeds = [int(ONLY)] if ONLY else range(CASES)
    canary = tmp_path / "canary"
    errors = 0
    for seed in seeds:
        rng = random.Random(seed)
        scenario = SCENARIOS[seed % len(SCENARIOS)]
        snap = writable_copy(tmp_path, scenario, f"case{seed}")
        what = f"seed {seed} ({scenario}): " + _mutate(rng, snap, canary)
        before = _digest(snap)
        rc1 = _check(capsys, ["negotiate", str(snap), "--json"], snap, what, True)
        rc2 = _check(capsys, ["userprio", str(snap), "-allusers"], snap, what, False)
        errors += (rc1 == 2) + (rc2 == 2)
        assert _digest(snap) == before, f"{what}: the snapshot changed on disk"
        assert not canary.exists(), f"{what}: a command ran"
    # the mutations do reach the readers' errors (a fuzzer whose every case passes
    # untouched would prove nothing)
    assert ONLY or errors >= len(seeds) // 4, errors
