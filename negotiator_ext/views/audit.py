"""The fairness audit report (`negotiator-ext audit`): `core.audit.Audit` written to a
directory.

  DIR/index.html        one page read top-down: the period and pass counts, the summary
                        ("who is over quota, borrowing, or starved"), then each detail
                        with its plot and table (jinja2, templates/audit.html.j2)
  DIR/*.png             the plots (matplotlib, Agg, no pyplot state); a plot is only
                        drawn when it has something to show
  DIR/tables/NAME.csv   every table, also the per-pass series behind the plots,
  DIR/tables/NAME.json  as CSV and as JSON records (times in epoch seconds, with *_utc
                        copies)
  DIR/report.json       the summary, and the list of files written

The page is static and self-contained (inline CSS, no script, images beside it), so it
can be copied anywhere or served as files. A directory that holds something else than an
earlier audit is refused; an earlier audit's files are replaced.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
import pandas as pd

from .. import __version__
from ..core.audit import Audit
from ..errors import InputError
from .text import printable

TEMPLATE = "audit.html.j2"
MAX_ROWS = 50               # rows of a table shown on the page (all are in its CSV)
MAX_LINES = 8               # submitters drawn in one time-series plot
MAX_BOXES = 15              # submitters / groups in the wait-time plot
DPI = 80

# columns holding epoch seconds: the files get a *_utc copy of each
_TIME_COLUMNS = ("time", "first", "last", "started_at", "finished_at", "snapshot_time",
                 "applied_at", "lease_expires", "real_cycle_time")


# ---------------------------------------------------------------- formatting

def utc(t: Any, seconds: bool = True) -> str:
    """Epoch seconds as 'YYYY-MM-DD HH:MM[:SS]' UTC ('' when unknown)."""
    v = _float(t)
    if v is None:
        return ""
    return time.strftime("%Y-%m-%d %H:%M:%S" if seconds else "%Y-%m-%d %H:%M", time.gmtime(v))


def duration(s: Any) -> str:
    """Seconds for people: '45 s', '12 min', '3.5 h', '2.1 d'."""
    v = _float(s)
    if v is None:
        return ""
    if v < 120:
        return f"{v:.0f} s"
    if v < 7200:
        return f"{v / 60:.0f} min"
    if v < 172800:
        return f"{v / 3600:.1f} h"
    return f"{v / 86400:.1f} d"


def number(x: Any) -> str:
    """A number for a table cell: integers as such, else 1-3 decimals by size."""
    v = _float(x)
    if v is None:
        return ""
    if v == int(v) and abs(v) < 1e15:
        return str(int(v))
    a = abs(v)
    if a >= 100:
        return f"{v:.1f}"
    if a >= 1:
        return f"{v:.2f}"
    return f"{v:.3g}"


def percent(x: Any) -> str:
    v = _float(x)
    return "" if v is None else f"{v:.0%}" if abs(v) >= 0.1 or v == 0 else f"{v:.1%}"


def _float(x: Any) -> float | None:
    if x is None or isinstance(x, bool):
        return None
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


_FORMATS: dict[str, Callable[[Any], str]] = {
    "text": lambda x: "" if x is None or (isinstance(x, float) and math.isnan(x)) else str(x),
    "status": str,
    "num": number, "int": number, "pct": percent, "time": utc, "dur": duration,
    "bool": lambda x: "yes" if x is True or x == 1 else ("no" if x is False or x == 0 else ""),
}
_NUMERIC = {"num", "int", "pct", "dur"}


@dataclass
class Col:
    """One displayed column: the frame's column, its heading and its format."""
    name: str
    label: str
    kind: str = "text"


def html_table(df: pd.DataFrame, cols: Sequence[Col], *, limit: int = MAX_ROWS,
               csv: str | None = None, row_id: Callable[[dict], str | None] | None = None,
               row_cls: Callable[[dict], str | None] | None = None,
               href: dict[str, Callable[[dict], str | None]] | None = None,
               title: str | None = None, tid: str | None = None,
               empty_text: str = "Nothing to show.") -> dict[str, Any]:
    """A table for the template: headings, formatted cells (numbers right-aligned), row
    ids (anchors) and classes, links; the first `limit` rows, saying where the rest is."""
    rows = []
    records = df.to_dict("records")
    for rec in records[:limit]:
        cells = []
        for c in cols:
            cell = {"text": _FORMATS[c.kind](rec.get(c.name)),
                    "cls": "n" if c.kind in _NUMERIC else "status" if c.kind == "status" else None,
                    "href": None}
            if href and c.name in href:
                cell["href"] = href[c.name](rec)
            cells.append(cell)
        rows.append({"cells": cells, "id": row_id(rec) if row_id else None,
                     "cls": row_cls(rec) if row_cls else None})
    more = None
    if len(records) > limit:
        more = f"The first {limit} of {len(records)} rows" + (f"; all in {csv}." if csv else ".")
    return {"head": [c.label for c in cols], "rows": rows, "more": more, "title": title,
            "id": tid, "empty_text": empty_text}


# ---------------------------------------------------------------- the output directory

def check_output(out: Path) -> None:
    """Refuse a report directory that is a file, or holds something else than an earlier
    audit (one with report.json); changes nothing."""
    if out.exists() and not out.is_dir():
        raise InputError(str(out), "is a file, not a directory for the report")
    if out.is_dir() and any(out.iterdir()) and not (out / "report.json").is_file():
        raise InputError(str(out), "is not empty and holds no earlier audit (no "
                                   "report.json): name a new or empty directory")


def prepare_output(out: Path) -> None:
    """Make `out` ready for a report (`check_output` first): created when missing, an
    earlier audit's files removed."""
    check_output(out)
    if out.is_dir():
        for p in [out / "index.html", out / "report.json", *out.glob("*.png"),
                  *(out / "tables").glob("*.csv"), *(out / "tables").glob("*.json")]:
            p.unlink(missing_ok=True)
    try:
        (out / "tables").mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(str(out), f"cannot create the report directory: "
                                   f"{exc.strerror or exc}") from exc


def _plain(v: Any) -> Any:
    """A cell as a JSON value (NaN and NA: null; numpy scalars: Python; tuples: lists)."""
    if v is None:
        return None
    if isinstance(v, (np.bool_, bool)):
        return bool(v)
    if isinstance(v, (np.integer,)):
        return int(v)
    if isinstance(v, (float, np.floating)):
        return float(v) if math.isfinite(v) else None
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    if isinstance(v, dict):
        return {str(k): _plain(x) for k, x in v.items()}
    try:
        if pd.isna(v):
            return None
    except (TypeError, ValueError):
        pass
    return v


def _for_files(df: pd.DataFrame) -> pd.DataFrame:
    """The table as written: each epoch column followed by its UTC text."""
    out = df.copy()
    for c in _TIME_COLUMNS:
        if c in out.columns:
            pos = list(out.columns).index(c) + 1
            out.insert(pos, f"{c}_utc", [utc(v) for v in out[c]])
    return out


def write_table(df: pd.DataFrame, tables_dir: Path, name: str) -> tuple[Path, Path]:
    """`df` as NAME.csv and NAME.json (records; NaN as null) in `tables_dir`."""
    d = _for_files(df)
    csv_path, json_path = tables_dir / f"{name}.csv", tables_dir / f"{name}.json"
    d.to_csv(csv_path, index=False)
    d.to_json(json_path, orient="records", double_precision=15, force_ascii=False,
              indent=1 if len(d) <= 2000 else None)
    return csv_path, json_path


# ---------------------------------------------------------------- plots

@dataclass
class Plot:
    src: str
    alt: str
    caption: str
    width: int = 0
    height: int = 0


def _figure(w: float, h: float):
    """A figure on its own Agg canvas: no pyplot, no global backend, no display."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    fig = Figure(figsize=(w, h), dpi=DPI, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def _save(fig, out: Path, name: str, alt: str, caption: str) -> Plot:
    fig.savefig(out / name, dpi=DPI, format="png")
    w, h = fig.get_size_inches()
    return Plot(src=name, alt=alt, caption=caption, width=int(round(w * DPI)),
                height=int(round(h * DPI)))


def _dates(t: pd.Series) -> pd.Series:
    return pd.to_datetime(t.astype(float), unit="s").dt.tz_localize(None)


def _time_axis(ax) -> None:
    import matplotlib.dates as mdates
    loc = mdates.AutoDateLocator()
    ax.xaxis.set_major_locator(loc)
    ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(loc))
    ax.grid(True, alpha=0.3)


def _marker(n: int) -> str | None:
    return "o" if n <= 60 else None


def _short(name: str, n: int = 40) -> str:
    """A name for a plot's title or legend: `printable`, cut to n characters."""
    name = printable(str(name))
    return name if len(name) <= n else name[: n - 1] + "…"


def _shown(value: Any) -> Any:
    """What the page shows of a template value: strings `printable` (not Markup)."""
    import markupsafe
    if isinstance(value, str) and not isinstance(value, markupsafe.Markup):
        return printable(value)
    return value


def plot_shares(share: pd.DataFrame, out: Path) -> Plot | None:
    """Delivered vs demand-capped vs deserved over time, one panel per submitter (the
    MAX_LINES with the most demand-capped share over the period)."""
    if share.empty:
        return None
    top = (share.groupby("name")[["demand_capped", "delivered"]].sum().sum(axis=1)
           .sort_values(ascending=False))
    names = [n for n in top.index if top[n] > 0][:MAX_LINES]
    if not names:
        return None
    cols = 2 if len(names) > 1 else 1
    rows = math.ceil(len(names) / cols)
    fig = _figure(10 if cols == 2 else 7, 2.4 * rows + 0.4)
    axes = fig.subplots(rows, cols, squeeze=False, sharex=True)
    for ax, name in zip(axes.flat, names):
        s = share[share["name"] == name].sort_values("time")
        x = _dates(s["time"])
        m = _marker(len(s))
        ax.plot(x, s["delivered"], marker=m, label="delivered", color="tab:blue")
        ax.plot(x, s["demand_capped"], marker=m, ls="--", label="demand-capped", color="tab:green")
        ax.plot(x, s["deserved"], ls=":", label="deserved", color="tab:gray")
        st = s[s["starved"]]
        if len(st):
            ax.plot(_dates(st["time"]), st["delivered"], "x", color="tab:red", ms=8)
        ax.set_title(_short(name), fontsize=9)
        ax.set_ylabel("slot weight")
        ax.set_ylim(bottom=0)
        _time_axis(ax)
    for ax in list(axes.flat)[len(names):]:
        ax.set_visible(False)
    from matplotlib.lines import Line2D
    fig.legend(handles=[Line2D([], [], color="tab:blue", marker="o", label="delivered"),
                        Line2D([], [], color="tab:green", ls="--", marker="o",
                               label="demand-capped"),
                        Line2D([], [], color="tab:gray", ls=":", label="deserved"),
                        Line2D([], [], color="tab:red", marker="x", ls="none", label="starved")],
               loc="outside upper center", ncols=4, fontsize=8, frameon=False)
    more = (f" (the {len(names)} with the largest shares; all in "
            "tables/submitter_shares_by_pass.csv)" if share["name"].nunique() > len(names)
            else "")
    return _save(fig, out, "shares.png", "Delivered, demand-capped and deserved share per "
                 "submitter over time", "Per submitter: delivered (real WeightedResourcesUsed), "
                 "demand-capped and deserved share, slot-weight units, one point per pass; "
                 f"red crosses: starved{more}.")


def plot_groups(grp: pd.DataFrame, out: Path) -> Plot | None:
    """Quota vs usage vs requested over time, one panel per group."""
    g = grp[(grp["quota"] > 0) | (grp["usage"] > 0) | (grp["requested"] > 0)]
    names = sorted(g["group"].unique())[:12]
    if not names:
        return None
    cols = 2 if len(names) > 1 else 1
    rows = math.ceil(len(names) / cols)
    fig = _figure(10 if cols == 2 else 7, 2.3 * rows + 0.4)
    axes = fig.subplots(rows, cols, squeeze=False, sharex=True)
    for ax, name in zip(axes.flat, names):
        s = g[g["group"] == name].sort_values("time")
        x = _dates(s["time"])
        m = _marker(len(s))
        ax.plot(x, s["usage"], marker=m, label="usage", color="tab:blue")
        ax.plot(x, s["quota"], ls="--", marker=m, label="quota", color="tab:green")
        ax.plot(x, s["requested"], ls=":", label="requested", color="tab:gray")
        for flag, color, label in (("starved", "tab:red", "starved"),
                                   ("over_quota", "tab:orange", "over quota")):
            f = s[s[flag]]
            if len(f):
                ax.plot(_dates(f["time"]), f["usage"], "x", color=color, ms=8, label=label)
        ax.set_title(_short(name), fontsize=9)
        ax.set_ylabel("slot weight")
        ax.set_ylim(bottom=0)
        _time_axis(ax)
        ax.legend(fontsize=7, loc="best")
    for ax in list(axes.flat)[len(names):]:
        ax.set_visible(False)
    return _save(fig, out, "groups.png", "Quota, usage and requested per accounting group "
                 "over time", "Per accounting group: its quota (the real EffectiveQuota; the "
                 "pool for the root without groups), weighted usage and request, one point per "
                 "pass; red: starved, orange: over quota.")


def plot_waits(waits: dict[str, dict[str, list[float]]], out: Path) -> Plot | None:
    """Box plots of the queue wait per submitter and per group."""
    panels = [(k, v) for k, v in (("submitter", waits.get("submitter", {})),
                                   ("group", waits.get("group", {}))) if v]
    if not panels:
        return None
    heights = [max(1.5, 0.35 * min(len(v), MAX_BOXES) + 0.9) for _, v in panels]
    fig = _figure(9, sum(heights) + 0.3)
    axes = fig.subplots(len(panels), 1, squeeze=False, height_ratios=heights)[:, 0]
    for ax, (by, samples) in zip(axes, panels):
        names = sorted(samples, key=lambda n: -len(samples[n]))[:MAX_BOXES][::-1]
        data = [np.asarray(samples[n], dtype=float) / 60.0 for n in names]
        ax.boxplot(data, orientation="horizontal", tick_labels=[_short(n, 45) for n in names],
                   showfliers=True, widths=0.6)
        ax.set_xlabel("minutes idle until matched")
        ax.set_title(f"per {by}", fontsize=9)
        ax.grid(True, axis="x", alpha=0.3)
        ax.tick_params(axis="y", labelsize=8)
    return _save(fig, out, "waits.png", "Queue wait time distributions per submitter and "
                 "group", "How long the jobs our cycle matched had been idle (minutes; box: "
                 "quartiles, whiskers: 1.5 IQR, circles: outliers), per submitter and per group"
                 + (f", the {MAX_BOXES} with the most matches" if any(len(v) > MAX_BOXES
                                                                    for _, v in panels) else "")
                 + ".")


def plot_priorities(prio: pd.DataFrame, share: pd.DataFrame, out: Path) -> Plot | None:
    """Real RUP (with our predicted RUP), EUP and factor over time per submitter."""
    p = prio[~prio["is_group"]]
    if p.empty or p[["real_rup", "real_eup", "factor"]].isna().all().all():
        return None
    if len(share):
        usage = share.groupby("name")["delivered"].sum()
        names = sorted(p["name"].unique(), key=lambda n: (-usage.get(n, 0.0), n))[:MAX_LINES]
    else:
        names = sorted(p["name"].unique())[:MAX_LINES]
    fig = _figure(10, 8)
    axes = fig.subplots(3, 1, sharex=True)
    colors = [f"C{i}" for i in range(10)]
    for i, name in enumerate(names):
        s = p[p["name"] == name].sort_values("time")
        x = _dates(s["time"])
        m = _marker(len(s))
        c = colors[i % 10]
        axes[0].plot(x, s["real_rup"], marker=m, color=c, label=_short(name, 30))
        pr = s[s["predicted_rup"].notna()]
        if len(pr):
            axes[0].plot(_dates(pr["time"]), pr["predicted_rup"], ls="none", marker="x",
                         color=c, ms=7)
        axes[1].plot(x, s["real_eup"], marker=m, color=c)
        axes[2].plot(x, s["factor"], marker=m, color=c)
    for ax, label, col in zip(axes, ("RUP (real; x: ours)", "EUP (real)", "priority factor"),
                              ("real_rup", "real_eup", "factor")):
        ax.set_ylabel(label)
        vals = p.loc[p["name"].isin(names), col].dropna()
        if len(vals) and vals.min() > 0 and vals.max() / vals.min() > 100:
            ax.set_yscale("log")
        _time_axis(ax)
    axes[0].legend(fontsize=7, loc="best", ncols=2)
    return _save(fig, out, "priorities.png", "Real RUP, EUP and priority factor per submitter "
                 "over time, with our accountant's predicted RUP",
                 "Per submitter (those with the most usage): the real accountant's RUP with our "
                 "accountant's prediction for the same time beside it (crosses), the EUP and the "
                 "priority factor, one point per pass.")


def plot_preemptions(pre: pd.DataFrame, out: Path) -> Plot | None:
    if pre.empty:
        return None
    p = pre.head(20).iloc[::-1]
    fig = _figure(9, 0.35 * len(p) + 1.2)
    ax = fig.subplots()
    labels = [f"{_short(a, 28)} → {_short(b, 28)} ({s})"
              for a, b, s in zip(p["preemptor"], p["preempted"], p["source"])]
    colors = ["tab:purple" if s == "real" else "tab:cyan" for s in p["source"]]
    ax.barh(range(len(p)), p["count"], color=colors)
    ax.set_yticks(range(len(p)), labels, fontsize=8)
    ax.set_xlabel("matches that preempted a claim")
    ax.grid(True, axis="x", alpha=0.3)
    return _save(fig, out, "preemptions.png", "Preemptions: who preempted whom",
                 "Matches that preempted a running claim, by preempting submitter and "
                 "preempted user; real: the MatchLog, shadow: our cycles.")


def plot_fairness(fair: pd.DataFrame, out: Path) -> Plot | None:
    f = fair[fair["jain"].notna()]
    if f.empty:
        return None
    fig = _figure(10, 3.2)
    ax = fig.subplots()
    ax.plot(_dates(f["time"]), f["jain"], marker=_marker(len(f)), color="tab:blue",
            label="Jain's index")
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("Jain's index")
    _time_axis(ax)
    ax2 = ax.twinx()
    if len(fair) <= 200:
        ax2.bar(_dates(fair["time"]), fair["starved"], width=_bar_width(fair["time"]),
                alpha=0.25, color="tab:red")
    else:
        ax2.fill_between(_dates(fair["time"]), fair["starved"], step="mid", alpha=0.25,
                         color="tab:red", lw=0)
    ax2.set_ylabel("starved submitters")
    ax2.set_ylim(0, max(1, int(fair["starved"].max())) * 2)   # bars in the lower half
    from matplotlib.ticker import MaxNLocator
    ax2.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_zorder(ax2.get_zorder() + 1)                       # the line above the bars
    ax.patch.set_visible(False)
    return _save(fig, out, "fairness.png", "Jain's fairness index over time",
                 "Jain's index of delivered / demand-capped share across the submitters with "
                 "demand, per pass (1: each got the same fraction of its share); bars: how "
                 "many submitters were starved.")


def _bar_width(t: pd.Series) -> float:
    """Bar width in days (matplotlib's date unit): 60% of the median pass interval."""
    d = t.astype(float).sort_values().diff().dropna()
    return 0.6 * (float(d.median()) if len(d) else 60.0) / 86400.0


def plot_agreement(agree: pd.DataFrame, out: Path) -> Plot | None:
    a = agree[agree["worst"].notna()]
    if a.empty:
        return None
    fig = _figure(10, 3.2)
    ax = fig.subplots()
    x = _dates(a["time"])
    m = _marker(len(a))
    for col, label, ls, mk in (("equivalent_agreement", "up to identical slots", "-", "o"),
                               ("count_agreement", "per-submitter counts", "--", "s"),
                               ("real_in_shadow", "real in ours (same slot)", ":", "^"),
                               ("shadow_in_real", "ours in real (same slot)", "-.", "v")):
        if a[col].notna().any():
            ax.plot(x, a[col], ls=ls, marker=mk if m else None, ms=5, label=label, alpha=0.85)
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("agreement")
    ax.legend(fontsize=8, loc="lower left")
    _time_axis(ax)
    return _save(fig, out, "agreement.png", "Real versus shadow agreement over time",
                 "Agreement of our cycle with the real cycle that followed its snapshot, per "
                 "compared pass (core/compare.py).")


# ---------------------------------------------------------------- the page

def _status_cls(rec: dict) -> str:
    return str(rec.get("status", "")).replace(" ", "-")


_SUMMARY_COLS = [Col("kind", "Kind"), Col("name", "Group / submitter"), Col("group", "Group"),
                 Col("status", "Status", "status"), Col("passes", "Passes", "int"),
                 Col("duration", "How long", "dur"),
                 Col("longest_duration", "Longest streak", "dur"),
                 Col("mean_amount", "How much (mean)", "num"),
                 Col("max_amount", "How much (max)", "num"),
                 Col("relative", "Relative", "pct"), Col("with", "With")]


def _adjustments_section(t: dict[str, pd.DataFrame]) -> dict[str, Any]:
    return {"id": "adjustments", "title": "Recommendations applied",
            "intro": "The condor_userprio changes `negotiator-ext recommend --apply` made (or "
                     "tried) in the period, from the ledger's audit trail (all pools).",
            "plots": [], "empty_text": None,
            "tables": [html_table(t["adjustments"], [
                Col("applied_at", "When (UTC)", "time"), Col("kind", "Kind"),
                Col("name", "Name"), Col("value", "Value", "num"),
                Col("lease_expires", "Lease ends (UTC)", "time"), Col("result", "Result"),
                Col("outcome", "Outcome"), Col("command", "Command")],
                csv="tables/adjustments.csv",
                empty_text="No recommendation was applied in the period.")]}


def _sections(audit: Audit, plots: dict[str, Plot | None]) -> list[dict[str, Any]]:
    t = audit.tables
    secs: list[dict[str, Any]] = []

    def sec(id_, title, intro, plot_names=(), tables=(), empty_text=None):
        secs.append({"id": id_, "title": title, "intro": intro,
                     "plots": [plots[p] for p in plot_names if plots.get(p)],
                     "tables": list(tables), "empty_text": empty_text})

    sec("shares", "Deserved, demand-capped and delivered shares",
        "Per submitter over the period (time-weighted means, slot-weight units). Deserved: its "
        "group's quota split among the group's submitters with demand in inverse proportion "
        "to their EUP. Demand-capped: the same split, each capped at its demand (running "
        "weight + idle jobs) with the rest going to the others. Delivered: what it used. "
        "Gap: delivered − demand-capped.",
        ["shares"],
        [html_table(t["submitter_shares"].sort_values("gap", kind="stable"), [
            Col("name", "Submitter"), Col("group", "Group"),
            Col("active_passes", "Passes with demand", "int"), Col("demand", "Demand", "num"),
            Col("deserved", "Deserved", "num"), Col("demand_capped", "Demand-capped", "num"),
            Col("delivered", "Delivered", "num"), Col("gap", "Gap", "num"),
            Col("rel_gap", "Gap (relative)", "pct"),
            Col("deserved_pct", "Deserved % of pool", "pct"),
            Col("delivered_pct", "Delivered % of pool", "pct")],
            csv="tables/submitter_shares.csv", empty_text="No submitter was recorded.")])
    sec("groups", "Group quotas and usage",
        "Per accounting group over the period: quota (the real EffectiveQuota), usage and "
        "request (the real accountant's), the sums of its submitters' shares, and how often "
        "it was over quota (using surplus) or starved (below quota while requesting more "
        "than it used). A group over quota while another is starved borrows from it.",
        ["groups"],
        [html_table(t["group_quota"], [
            Col("group", "Group"), Col("quota", "Quota", "num"), Col("usage", "Usage", "num"),
            Col("requested", "Requested", "num"), Col("demand_capped", "Demand-capped", "num"),
            Col("delivered", "Delivered", "num"), Col("gap", "Gap", "num"),
            Col("over_quota_passes", "Passes over quota", "int"),
            Col("starved_passes", "Passes starved", "int")], csv="tables/group_quota.csv",
            empty_text="No accounting group was recorded."),
         html_table(t["starved_borrowing_pairs"], [
             Col("starved", "Starved group"), Col("borrowing", "Borrowing group"),
             Col("passes", "Passes together", "int"), Col("duration", "How long", "dur"),
             Col("longest_duration", "Longest streak", "dur"), Col("first", "First", "time"),
             Col("last", "Last", "time"), Col("mean_shortfall", "Mean shortfall", "num"),
             Col("mean_surplus", "Mean surplus borrowed", "num")],
             csv="tables/starved_borrowing_pairs.csv", title="Starved ↔ borrowing pairs",
             empty_text="No group was starved while another borrowed surplus.")])
    spell_cols = [Col("name", "Name"), Col("passes", "Passes", "int"),
                  Col("duration", "How long", "dur"),
                  Col("longest_passes", "Longest streak (passes)", "int"),
                  Col("longest_duration", "Longest streak", "dur"), Col("first", "First", "time"),
                  Col("last", "Last", "time"), Col("mean_amount", "Mean shortfall", "num"),
                  Col("max_amount", "Largest shortfall", "num")]
    sec("starvation", "Starvation: who, and for how long",
        f"A submitter is starved in a pass when it has idle jobs while it gets less than "
        f"{1 - audit.summary.get('starvation_threshold', 0.1):.0%} of its demand-capped share; "
        "a group when it is below its quota while requesting more than it uses. How long: "
        "the passes' intervals summed (each pass lasts until the next analysed one).",
        tables=[html_table(t["starved_submitters"], spell_cols, title="Starved submitters",
                           csv="tables/starved_submitters.csv",
                           empty_text="No submitter was starved."),
                html_table(t["starved_groups"], spell_cols, title="Starved groups",
                           csv="tables/starved_groups.csv", empty_text="No group was starved."),
                html_table(t["starved_over_share_submitters"], [
                    Col("starved", "Starved submitter"), Col("borrowing", "Over its share"),
                    Col("passes", "Passes together", "int"), Col("duration", "How long", "dur"),
                    Col("mean_shortfall", "Mean shortfall", "num"),
                    Col("mean_surplus", "Mean excess", "num")],
                    title="Starved submitters and those of the same group over their share",
                    csv="tables/starved_over_share_submitters.csv",
                    empty_text="No starved submitter shared its group with one over its share.")])
    wait_cols = [Col("name", "Name"), Col("source", "Matches"), Col("matches", "Count", "int"),
                 Col("p50", "Median", "dur"), Col("p90", "90th percentile", "dur"),
                 Col("max", "Max", "dur"), Col("mean", "Mean", "dur")]
    sec("waits", "Queue wait until matched",
        "How long each matched job had been idle when matched: our cycles' matches "
        "(\"shadow\") and the real MatchLog's when their wait is known (\"real\"). A job the "
        "real negotiator did not start can be matched by several of our passes.",
        ["waits"],
        [html_table(t["wait_by_submitter"], wait_cols, title="Per submitter",
                    csv="tables/wait_by_submitter.csv", empty_text="No match with a known wait."),
         html_table(t["wait_by_group"], wait_cols, title="Per group",
                    csv="tables/wait_by_group.csv", empty_text="No match with a known wait.")])
    sec("priorities", "Priorities over time",
        "Real RUP, EUP and priority factor per accounting principal, with our accountant's "
        "prediction of the RUP (recorded when exactly one real priority update ran since the "
        "pass before) and the largest drift between them.",
        ["priorities"],
        [html_table(t["priorities"], [
            Col("name", "Name"), Col("group", "Group"), Col("is_group", "Group record", "bool"),
            Col("passes", "Passes", "int"), Col("first_rup", "First RUP", "num"),
            Col("last_rup", "Last RUP", "num"), Col("last_predicted_rup", "Our last RUP", "num"),
            Col("last_eup", "Last EUP", "num"), Col("min_factor", "Min factor", "num"),
            Col("max_factor", "Max factor", "num"), Col("max_abs_drift", "Max |drift|", "pct")],
            csv="tables/priorities.csv", empty_text="No priorities recorded.")])
    sec("preemptions", "Preemptions",
        "Matches that preempted a running claim: who preempted whom, in our cycles and in "
        "the real MatchLog.",
        ["preemptions"],
        [html_table(t["preemptions"], [
            Col("source", "Matches"), Col("preemptor", "Preempting submitter"),
            Col("preempted", "Preempted"), Col("count", "Count", "int"),
            Col("passes", "Passes", "int")], csv="tables/preemptions.csv",
            empty_text="No preemption in the analysed passes.")])
    sec("fairness", "Fairness over time",
        "Jain's index of delivered / demand-capped share across the submitters with demand, "
        "per pass, and the largest gaps.",
        ["fairness"],
        [html_table(t["largest_gaps"], [
            Col("time", "Pass time (UTC)", "time"), Col("name", "Submitter"),
            Col("group", "Group"), Col("demand", "Demand", "num"),
            Col("deserved", "Deserved", "num"), Col("demand_capped", "Demand-capped", "num"),
            Col("delivered", "Delivered", "num"), Col("gap", "Gap", "num"),
            Col("rel_gap", "Gap (relative)", "pct")], title="Largest gaps",
            csv="tables/largest_gaps.csv", empty_text="No gap.")],
        empty_text=None if plots.get("fairness") else
        "Jain's index is undefined in every pass (no submitter with a demand-capped share "
        "got anything).")
    agree, div = t["agreement_by_pass"], t["divergent_passes"]
    if len(agree):
        details = t["divergent_details"]
        tables = [html_table(div, [
            Col("time", "Recorded (UTC)", "time"), Col("pass_uuid", "Pass"),
            Col("source", "Source"), Col("real_matches", "Real matches", "int"),
            Col("shadow_matches", "Our matches", "int"),
            Col("equivalent_agreement", "Up to identical slots", "pct"),
            Col("count_agreement", "Counts", "pct"),
            Col("real_in_shadow", "Real in ours", "pct"),
            Col("shadow_in_real", "Ours in real", "pct")],
            href={"pass_uuid": lambda r: "#" + r["anchor"]}, title="Where they diverged most",
            empty_text="Real and shadow agreed fully in every compared pass.")]
        for r in div.to_dict("records"):
            d = details[details["pass_uuid"] == r["pass_uuid"]]
            tables.append(html_table(d, [
                Col("kind", "Kind"), Col("name", "Name"), Col("real", "Real", "int"),
                Col("shadow", "Ours", "int"), Col("difference", "Ours − real", "int"),
                Col("real_share", "Real share", "num"), Col("shadow_share", "Our share", "num"),
                Col("real_limit", "Real limit / quota", "num"),
                Col("shadow_limit", "Our limit / quota", "num"),
                Col("real_at_share_limit", "Real at share limit", "bool"),
                Col("real_out_of_time", "Real out of time", "bool")],
                title=f"Pass {r['pass_uuid'][:12]} ({utc(r['time'])} UTC): "
                      f"{percent(r['equivalent_agreement']) or '–'} up to identical slots, "
                      f"{percent(r['count_agreement']) or '–'} by counts",
                tid=r["anchor"], limit=200, empty_text="No per-submitter figures recorded."))
        tables.append(html_table(agree.iloc[::-1], [
            Col("time", "Recorded (UTC)", "time"), Col("source", "Source"),
            Col("real_matches", "Real", "int"), Col("shadow_matches", "Ours", "int"),
            Col("equivalent_agreement", "Up to identical slots", "pct"),
            Col("count_agreement", "Counts", "pct"), Col("real_in_shadow", "Real in ours", "pct"),
            Col("shadow_in_real", "Ours in real", "pct"),
            Col("max_abs_drift", "Max priority drift", "pct"), Col("notes", "Notes")],
            title="Every comparison, newest first", csv="tables/agreement_by_pass.csv"))
        sec("agreement", "Real versus shadow agreement",
            "Each comparison sets our cycle on a pass's snapshot beside the real cycle that "
            "followed it.", ["agreement"], tables)
    secs.append(_adjustments_section(t))
    return secs


def _figures(audit: Audit) -> list[dict[str, Any]]:
    s = audit.summary
    f: list[dict[str, Any]] = []

    def add(label, value, href=None, links=()):
        f.append({"label": label, "value": value, "href": href, "links": list(links)})

    add("Submitters with records", str(s.get("submitters", 0)), "#shares")
    if s.get("groups"):
        add("Accounting groups", ", ".join(s["groups"]), "#groups")
    j = s.get("jain", {})
    if j.get("mean") is not None:
        add("Jain's index", f"mean {j['mean']:.2f}, lowest {j['min']:.2f}", "#fairness")
    add("Starved", f"{len(s.get('starved_submitters', []))} submitter(s), "
                   f"{len(s.get('starved_groups', []))} group(s)", "#starvation")
    lenders = s.get("borrowing_from", {})
    add("Groups over quota", "; ".join(
        g + (f" (borrowing from {', '.join(lenders[g])})" if lenders.get(g) else "")
        for g in s.get("over_quota", [])) or ("none" if s.get("hgq") else
                                              "none (no accounting groups)"), "#groups")
    pre = s.get("preemptions", {})
    add("Preemptions", f"ours {pre.get('shadow', 0)}, real {pre.get('real', 0)}",
        "#preemptions")
    c = s.get("comparisons", {})
    if c.get("count"):
        ea, ca = c.get("mean_equivalent_agreement"), c.get("mean_count_agreement")
        add("Real vs shadow", f"{c['count']} comparison(s); mean agreement "
            f"{percent(ea) or '–'} up to identical slots, {percent(ca) or '–'} by counts"
            + ("; diverged most in" if c.get("lowest") else ""), "#agreement",
            [{"href": "#" + r["anchor"], "text": f"{r['pass'][:12]} ({percent(r['worst'])})"}
             for r in c.get("lowest", [])])
    adj = s.get("adjustments", {})
    add("Recommendations applied", ", ".join(f"{v} {k}" for k, v in sorted(adj.items()))
        or "none", "#adjustments")
    return f


def _period(audit: Audit) -> str:
    """'Period: A to B (UTC)', saying which end is a pass's rather than asked for."""
    per = audit.summary.get("period", {})
    ends, marks = [], []
    for given, seen, mark, none in ((audit.since, per.get("first_pass"), "from the first",
                                     "the beginning of the ledger"),
                                    (audit.until, per.get("last_pass"), "to the last",
                                     "the end of the ledger")):
        if given is not None:
            ends.append(utc(given, seconds=False))
        elif seen is not None:
            ends.append(utc(seen, seconds=False))
            marks.append(mark)
        else:
            ends.append(none)
    return (f"Period: {ends[0]} to {ends[1]} (UTC)"
            + (f", {' '.join(marks)} recorded pass" if marks else ""))


def _pass_line(audit: Audit) -> str:
    p = audit.summary["passes"]
    left = [f"{p[k]} {k}" for k in ("partial", "failed", "other") if p.get(k)]
    return (f"Pool {audit.pool or '(none)'}: {p['total']} pass(es), {p['analysed']} complete "
            "and analysed" + (f"; left out: {', '.join(left)}" if left else "") + ".")


def render_html(audit: Audit, plots: dict[str, Plot | None], files: list[dict[str, Any]],
                *, ledger: str = "the ledger", generated: str | None = None) -> str:
    """The page, from the audit, the plots drawn and the table files written."""
    import jinja2
    text = resources.files(__package__).joinpath("templates", TEMPLATE).read_text("utf-8")
    # autoescape makes names safe for HTML (<, &, quotes) but leaves control characters
    # and bidi overrides from untrusted names as they are: every value the template
    # shows is made `printable` first (macro output, already Markup, is left alone)
    env = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined,
                             keep_trailing_newline=True, finalize=_shown)
    tmpl = env.from_string(text)
    empty_text = ""
    if audit.empty:
        p = audit.summary["passes"]
        empty_text = (f"No pass of pool {audit.pool or '(any)'} was recorded in this period: "
                      "nothing to analyse." if not p["total"] else
                      f"None of the {p['total']} pass(es) recorded in this period is complete "
                      f"({p['partial']} partial, {p['failed']} failed): nothing to analyse.")
    if audit.empty:       # nothing analysed; the changes applied meanwhile, if any
        secs = [_adjustments_section(audit.tables)] if len(audit.tables["adjustments"]) else []
    else:
        secs = _sections(audit, plots)
    none = pd.DataFrame(columns=[c.name for c in _SUMMARY_COLS])
    summary = html_table(audit.tables.get("summary", none), _SUMMARY_COLS, row_cls=_status_cls,
                         csv="tables/summary.csv", limit=100)
    html = tmpl.render(
        version=__version__, title=f"Fairness audit: {audit.pool or 'no pool'}",
        period=_period(audit), pass_line=_pass_line(audit), empty=audit.empty,
        empty_text=empty_text, notes=audit.summary.get("notes", []), summary=summary,
        figures=_figures(audit), sections=secs, files=files, ledger=ledger,
        generated=generated)
    return html.lstrip()


def write_report(audit: Audit, out: str | Path, *, ledger: str = "the ledger",
                 generated_at: float | None = None) -> list[Path]:
    """Write the report of `audit` into `out` (see the module docstring); the paths
    written. A directory that is neither empty nor an earlier audit is an InputError."""
    out = Path(out)
    prepare_output(out)
    written: list[Path] = []
    plots: dict[str, Plot | None] = {}
    files: list[dict[str, Any]] = []
    t = audit.tables
    try:
        if not audit.empty:
            share, grp = t["submitter_shares_by_pass"], t["group_quota_by_pass"]
            plots = {"shares": plot_shares(share, out), "groups": plot_groups(grp, out),
                     "waits": plot_waits(audit.waits, out),
                     "priorities": plot_priorities(t["priorities_by_pass"], share, out),
                     "preemptions": plot_preemptions(t["preemptions"], out),
                     "fairness": plot_fairness(t["fairness_by_pass"], out),
                     "agreement": plot_agreement(t["agreement_by_pass"], out)}
        written += [out / p.src for p in plots.values() if p]
        for name, df in t.items():
            csv_path, json_path = write_table(df, out / "tables", name)
            written += [csv_path, json_path]
            files.append({"name": name, "csv": f"tables/{csv_path.name}",
                          "json": f"tables/{json_path.name}", "rows": len(df)})
        generated = None if generated_at is None else utc(generated_at) + " UTC"
        html = render_html(audit, plots, files, ledger=ledger, generated=generated)
        (out / "index.html").write_text(html, encoding="utf-8")
        written.append(out / "index.html")
        report = {"generated_by": f"negotiator-ext {__version__} audit",
                  "generated_at": generated_at, "ledger": ledger,
                  "summary": _plain(audit.summary),
                  "plots": sorted(p.src for p in plots.values() if p),
                  "tables": [f["csv"] for f in files] + [f["json"] for f in files]}
        (out / "report.json").write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
        written.append(out / "report.json")
    except OSError as exc:
        raise InputError(str(out), f"cannot write the report: {exc.strerror or exc}") from exc
    return written
