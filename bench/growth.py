"""How one `negotiate` grows with the slots and with the jobs: issue 15's shape
(bench/synth_groups.py: 1,000 submitters in 100 groups, 300 autoclusters) at 1k, 10k and
100k slots with 100,000 idle jobs, and at 100,000 slots with 100k, 500k and 1M idle jobs,
each timed by bench_cycle.py in a fresh process (reading the files, then each phase of
the cycle; the cyclic collector off, as `negotiate` runs).

    python bench/growth.py [--from FILE.json] [--plot FILE.png] [--json]

Prints a Markdown table: seconds per phase at each size, and k, the exponent of
time ~ size^k between two sizes of one series (1: linear; slots x jobs would show as
k near 2 in both series). `--from` reads bench_cycle.py's --json output instead of
running it; `--plot` draws the phases log-log, one panel per series (matplotlib, the
`audit` extra).
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
SLOTS = ("1000x100000", "10000x100000", "100000x100000")
JOBS = ("100000x100000", "100000x500000", "100000x1000000")
PHASES = ("load", "slots", "slot_reach", "jobs", "autoclusters", "negotiation", "cycle")
NAMES = {"load": "reading the files", "slots": "slot list", "slot_reach":
         "what slot expressions reach", "jobs": "jobs (idle filter, order, keys)",
         "autoclusters": "slot classes and autoclusters", "negotiation":
         "allocation and matchmaking", "cycle": "the whole cycle"}


def measure() -> list[dict]:
    sizes = ",".join(dict.fromkeys(SLOTS + JOBS))
    out = subprocess.run([sys.executable, str(HERE / "bench_cycle.py"), "--shape", "groups",
                          "--sizes", sizes, "--json"], check=True, capture_output=True,
                         text=True).stdout
    return json.loads(out)


def seconds(row: dict, phase: str) -> float:
    if phase == "load":
        return row["load_s"]
    if phase == "cycle":
        return row["cycle_s"]
    return row["phases"][phase]


def exponent(a: float, b: float, ratio: float) -> str:
    if a <= 0.05 or b <= 0.05:          # too short to say (fixed costs, timer noise)
        return ""
    return f"{math.log(b / a) / math.log(ratio):.2f}"


def table(rows: dict[str, dict]) -> str:
    head = ("| step | 1k slots | 10k slots | 100k slots | k 1k→10k | k 10k→100k "
            "| 500k jobs | 1M jobs | k 100k→500k | k 500k→1M |")
    out = [head, "|" + "---|" * 10]
    for ph in PHASES:
        s = [seconds(rows[n], ph) for n in SLOTS]
        j = [seconds(rows[n], ph) for n in JOBS]
        out.append(f"| {NAMES[ph]} | {s[0]:.2f} | {s[1]:.2f} | {s[2]:.2f} | "
                   f"{exponent(s[0], s[1], 10)} | {exponent(s[1], s[2], 10)} | "
                   f"{j[1]:.2f} | {j[2]:.2f} | {exponent(j[0], j[1], 5)} | "
                   f"{exponent(j[1], j[2], 2)} |")
    peak = [rows[n]["peak_mib"] for n in SLOTS] + [rows[n]["peak_mib"] for n in JOBS[1:]]
    out.append("| peak RSS (MiB) | " + " | ".join(f"{p:,.0f}" for p in peak[:3])
               + " | | | " + " | ".join(f"{p:,.0f}" for p in peak[3:]) + " | | |")
    return "\n".join(out)


def plot(rows: dict[str, dict], path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 2, figsize=(10, 5), sharey=True)
    for ax, series, label in ((axes[0], SLOTS, "slots (100,000 idle jobs)"),
                              (axes[1], JOBS, "idle jobs (100,000 slots)")):
        xs = [int(n.split("x")[0 if series is SLOTS else 1]) for n in series]
        for ph in PHASES:
            ax.plot(xs, [max(seconds(rows[n], ph), 1e-3) for n in series], marker="o",
                    label=NAMES[ph])
        ref = [seconds(rows[series[0]], "cycle") * x / xs[0] for x in xs]
        ax.plot(xs, ref, color="grey", linestyle=":", label="linear")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel(label)
        ax.grid(True, which="both", alpha=0.3)
    axes[0].set_ylabel("seconds")
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, fontsize=8, loc="lower center", ncol=4)
    fig.suptitle("negotiate: each phase against the pool's size (log-log)")
    fig.tight_layout(rect=(0, 0.12, 1, 1))
    fig.savefig(path, dpi=110)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--from", dest="source", help="bench_cycle.py --json output to read")
    ap.add_argument("--plot", help="write the log-log plot here (PNG)")
    ap.add_argument("--json", action="store_true", help="print the measurements as JSON")
    args = ap.parse_args()
    got = json.loads(Path(args.source).read_text()) if args.source else measure()
    rows = {r["size"]: r for r in got}
    missing = [n for n in SLOTS + JOBS if n not in rows or "cycle_s" not in rows[n]]
    if missing:
        raise SystemExit(f"no figures for {', '.join(missing)}")
    if args.json:
        print(json.dumps(got, indent=2))
    print(table(rows))
    if args.plot:
        plot(rows, Path(args.plot))


if __name__ == "__main__":
    main()
