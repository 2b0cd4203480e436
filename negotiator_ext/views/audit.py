"""The fairness audit report (`negotiator-ext audit`): `core.audit.Audit` written to a
directory.

  DIR/index.html        one page read top-down, as wide as the window: the period and
                        pass counts, the ranked summary ("who is over quota, borrowing,
                        or starved": the SUMMARY_ROWS most severe conditions, each name
                        a link to its row in the detail tables), the key figures, then
                        each detail with its plot and table (at most MAX_ROWS rows; all
                        in tables/) (jinja2, templates/audit.html.j2)
  DIR/*.png             the plots (matplotlib, Agg, no pyplot state); a plot is only
                        drawn when it has something to show
  DIR/tables/NAME.csv   every table as CSV (a unit in each header) and as JSON records
  DIR/tables/NAME.json  (times in epoch seconds, with *_utc copies); the per-pass series
                        behind the plots as NAME.parquet, or NAME.csv.gz without
                        pyarrow (`views.audit_files`)
  DIR/report.json       the summary, and the list of files written

The page is static and self-contained (inline CSS, no script, images beside it), so it
can be copied anywhere or served as files. A directory that holds something else than an
earlier audit is refused; an earlier audit's files are replaced.

What admins read names no source file or rule: the words follow the ledger (`Words`: a
simulated pool has no real negotiator beside it), every plot axis has its unit, and each
panel one scale.
"""

from __future__ import annotations

import hashlib
import json
import math
import struct
import time
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
import pandas as pd

from .. import __version__
from ..core.audit import PRIORITY_LINES, Audit, most_used
from ..errors import InputError
from .audit_files import (PER_PASS, check_output, plain as _plain, prepare_output,
                          write_per_pass, write_table)
from .text import printable

__all__ = ["check_output", "write_report", "render_html"]

TEMPLATE = "audit.html.j2"
MAX_ROWS = 25               # rows of a table shown on the page (all are in its CSV)
SUMMARY_ROWS = 20           # rows of the ranked summary, the page's first table
_FORMAT_NAME = {".csv": "CSV", ".json": "JSON", ".parquet": "Parquet", ".csv.gz": "CSV (gzip)"}
MAX_FINDINGS = 10           # configuration findings listed above it (all in their CSV)
MAX_LINES = PRIORITY_LINES  # submitters drawn in one time-series plot
MAX_BOXES = 15              # submitters / groups in the wait-time plot
DPI = 96

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
    "list": lambda x: "" if x is None or (isinstance(x, float) and math.isnan(x)) else str(x),
    "num": number, "int": number, "pct": percent, "time": utc, "dur": duration,
    "tmin": lambda x: utc(x, seconds=False),
    "slot_h": lambda x: number(_float(x) / 3600.0) if _float(x) is not None else "–",
    "span": str,
    "bool": lambda x: "yes" if x is True or x == 1 else ("no" if x is False or x == 0 else ""),
}
_NUMERIC = {"num", "int", "pct", "dur", "slot_h", "span"}


@dataclass
class Col:
    """One displayed column: the frame's column, its heading and its format."""
    name: str
    label: str
    kind: str = "text"


LONG_NAME = 24              # a longer name may break at its dots and before its '@'


def _breakable(text: str) -> Any:
    """A long name (group_physics.higgs_analysis@refcondor.example.org) as markup that
    may break after a dot or before its '@' (<wbr>: nothing is added when copied), so a
    table of long names fits the window without breaking a word anywhere else."""
    if len(text) <= LONG_NAME or ("." not in text and "@" not in text):
        return text
    import markupsafe
    safe = str(markupsafe.escape(printable(text)))
    return markupsafe.Markup(safe.replace(".", ".<wbr>").replace("@", "<wbr>@"))


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
            text = _FORMATS[c.kind](rec.get(c.name))
            cell = {"text": _breakable(text) if c.kind in ("text", "list") else text,
                    "cls": "n" if c.kind in _NUMERIC else "status" if c.kind == "status"
                    else "t" if c.kind in ("time", "tmin") else "w" if c.kind == "list"
                    else None,
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


# ---------------------------------------------------------------- plots

@dataclass
class Plot:
    """A plot written beside the page: its file, alt text and caption, its size in
    pixels, and what its panels show (read by the tests): `labels`, the (x label, y
    label) of each panel drawn; `xlims`, each panel's x range (days for a time axis, as
    matplotlib counts them); `legend`, the legend's entries."""
    src: str
    alt: str
    caption: str
    width: int = 0
    height: int = 0
    labels: list[tuple[str, str]] = field(default_factory=list)
    xlims: list[tuple[float, float]] = field(default_factory=list)
    legend: list[str] = field(default_factory=list)
    clipped: list[str] = field(default_factory=list)     # texts not wholly in the image


@dataclass(frozen=True)
class Words:
    """What the page calls things: a simulated pool is its own reality (no real
    negotiator beside it), a watched pool has the real one's figures and ours."""
    sim: bool

    @property
    def accountant(self) -> str:
        return "the simulated accountant" if self.sim else "the real accountant"

    @property
    def usage(self) -> str:
        return ("the simulated accountant's WeightedResourcesUsed" if self.sim else
                "the real WeightedResourcesUsed")

    @property
    def quota(self) -> str:
        return ("the simulated negotiator's EffectiveQuota" if self.sim else
                "the real EffectiveQuota")

    @property
    def time(self) -> str:
        """A time axis's label: a simulation's clock is not a date anything happened."""
        return SIM_TIME_LABEL if self.sim else TIME_LABEL

    def source(self, src: Any) -> str:
        """A match source ("shadow": our cycles, "real": the MatchLog) for people."""
        if self.sim:
            return "simulated cycles"
        return {"shadow": "our cycles", "real": "real negotiator"}.get(str(src), str(src))


def _figure(w: float, h: float):
    """A figure on its own Agg canvas: no pyplot, no global backend, no display."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    fig = Figure(figsize=(w, h), dpi=DPI, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def _save(fig, out: Path, name: str, alt: str, caption: str) -> Plot:
    fig.savefig(out / name, dpi=DPI, format="png")
    with open(out / name, "rb") as f:            # the size as written (PNG's IHDR)
        w, h = struct.unpack(">II", f.read(24)[16:24])
    shown = [ax for ax in fig.axes if ax.get_visible()]
    legends = list(fig.legends) + [ax.get_legend() for ax in shown if ax.get_legend()]
    return Plot(src=name, alt=alt, caption=caption, width=int(w), height=int(h),
                clipped=_clipped(fig),
                labels=[(ax.get_xlabel(), ax.get_ylabel()) for ax in shown],
                xlims=[tuple(float(v) for v in ax.get_xlim()) for ax in shown],
                legend=[t.get_text() for lg in legends for t in lg.get_texts()])


def _clipped(fig) -> list[str]:
    """The texts of `fig` (labels, ticks, titles, legend entries) that reach outside its
    image, as drawn: a cut label or legend entry."""
    from matplotlib.text import Text
    r = fig.canvas.get_renderer()
    w, h = fig.bbox.width, fig.bbox.height
    ticks, drawn = set(), set()
    hidden = {id(t) for ax in fig.axes if not ax.get_visible() for t in ax.findobj(Text)}
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            lo, hi = sorted(axis.get_view_interval())
            pad = (hi - lo) * 1e-6
            for tick in axis.get_major_ticks() + axis.get_minor_ticks():
                labels = {id(tick.label1), id(tick.label2)}
                ticks |= labels
                if ax.get_visible() and lo - pad <= tick.get_loc() <= hi + pad:
                    drawn |= labels       # a tick outside the view is not drawn
    out = []
    for t in fig.findobj(Text):
        if not (t.get_visible() and t.get_text().strip()) or id(t) in hidden or (
                id(t) in ticks and id(t) not in drawn):
            continue
        b = t.get_window_extent(r)
        if b.x0 < -1 or b.y0 < -1 or b.x1 > w + 1 or b.y1 > h + 1:
            out.append(t.get_text())
    return out


def _dates(t: pd.Series) -> pd.Series:
    return pd.to_datetime(pd.Series(t).astype(float), unit="s").dt.tz_localize(None)


TIME_LABEL = "time (UTC)"
SIM_TIME_LABEL = "simulated time (UTC)"


def _time_axis(ax, times: pd.Series, *, label: bool | str = True) -> None:
    """A time axis for `times` (epoch seconds): ticks at round times, the date once;
    around a single time (one pass) a window of ten minutes instead of matplotlib's
    years."""
    import matplotlib.dates as mdates
    t = pd.Series(times).astype(float).dropna()
    if len(t) and t.max() - t.min() < 60:
        mid = _dates(pd.Series([t.min()])).iloc[0]
        ax.set_xlim(mid - pd.Timedelta(minutes=5), mid + pd.Timedelta(minutes=5))
    loc = mdates.AutoDateLocator(minticks=3, maxticks=9)
    ax.xaxis.set_major_locator(loc)
    ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(loc))
    ax.grid(True, alpha=0.3)
    if label:
        ax.set_xlabel(label if isinstance(label, str) else TIME_LABEL)


def _marker(n: int) -> str | None:
    return "o" if n <= 60 else None


def _shade(ax, s: pd.DataFrame, flag: str, color: str) -> bool:
    """Shade the time of the passes of `s` (time, interval) where `flag` holds, each
    until the next pass, behind the lines (they stay visible). Whether any did."""
    import matplotlib.dates as mdates
    f = s[flag].astype(bool).to_numpy()
    if not f.any():
        return False
    t = s["time"].astype(float).to_numpy()
    iv = pd.to_numeric(s["interval"], errors="coerce").fillna(0.0).to_numpy(float)
    iv = np.where(iv > 0, iv, 60.0)
    starts = np.flatnonzero(f & ~np.r_[False, f[:-1]])
    ends = np.flatnonzero(f & ~np.r_[f[1:], False])
    x0 = mdates.date2num(_dates(pd.Series(t[starts])))
    x1 = mdates.date2num(_dates(pd.Series(t[ends] + iv[ends])))
    ax.broken_barh(list(zip(x0, x1 - x0)), (0, 1), transform=ax.get_xaxis_transform(),
                   color=color, alpha=0.16, lw=0, zorder=0)
    return True


MAX_POINTS = 480            # points of a line: more passes are drawn as means of runs


def _thin(s: pd.DataFrame, means: Sequence[str], flags: Sequence[str],
          n: int = MAX_POINTS) -> pd.DataFrame:
    """A series of more than `n` passes (`s` in time order, with time and interval) as
    `n` runs of consecutive passes: each run's first time, its intervals summed, the
    means of `means`, and `flags` set when set in any of its passes (a day of one-minute
    passes is 1,440 points on a line some 500 pixels wide; Agg draws wide lines of that
    many points slowly, and no eye tells them apart)."""
    if len(s) <= n:
        return s
    run = np.arange(len(s)) * n // len(s)
    g = s.groupby(run, sort=True)
    out = pd.DataFrame({"time": g["time"].first(),
                        "interval": pd.to_numeric(s["interval"], errors="coerce")
                        .groupby(run).sum()})
    for c in means:
        out[c] = pd.to_numeric(s[c], errors="coerce").groupby(run).mean()
    for c in flags:
        out[c] = s[c].astype(bool).groupby(run).any()
    return out.reset_index(drop=True)


def _y_from_zero(ax, values) -> None:
    """The y axis from 0 to a little above the largest value (0 to 1 when all are 0)."""
    v = pd.to_numeric(pd.Series(values), errors="coerce").dropna()
    top = float(v.max()) if len(v) else 0.0
    ax.set_ylim(0, top * 1.08 if top > 0 else 1.0)


def _short(name: str, n: int = 40) -> str:
    """A name for a plot's title or legend: `printable`, cut to n characters."""
    name = printable(str(name))
    return name if len(name) <= n else name[: n - 1] + "…"


def _wrapped(name: str, n: int) -> str:
    """A name for a panel's title, whole: a name longer than `n` characters on two
    lines, broken before its '@' (or its last '.'), each line cut at 90 characters."""
    name = printable(str(name))
    if len(name) <= n:
        return name
    at = name.rfind("@") if "@" in name else name.rfind(".")
    if at <= 0:
        return _short(name, 90)
    return _short(name[:at], 90) + "\n" + _short(name[at:], 90)


def _shown(value: Any) -> Any:
    """What the page shows of a template value: strings `printable` (not Markup)."""
    import markupsafe
    if isinstance(value, str) and not isinstance(value, markupsafe.Markup):
        return printable(value)
    return value


def _ranked(summary: pd.DataFrame | None, kind: str) -> list[str]:
    """The names of `kind` ("submitter" / "group") in the summary, most severe first."""
    if summary is None or summary.empty:
        return []
    s = summary[summary["kind"] == kind].sort_values("rank", kind="stable")
    return list(dict.fromkeys(s["name"]))


def _conditions(summary: pd.DataFrame | None, kind: str) -> dict[str, str]:
    """name -> its conditions in the summary ('starved #1, over share #7')."""
    out: dict[str, list[str]] = {}
    if summary is not None and not summary.empty:
        for r in summary[summary["kind"] == kind].sort_values("rank").itertuples():
            out.setdefault(r.name, []).append(f"{r.status} #{r.rank}")
    return {k: ", ".join(v) for k, v in out.items()}


def plot_shares(share: pd.DataFrame, out: Path, summary: pd.DataFrame | None = None,
                words: Words = Words(False)) -> Plot | None:
    """Delivered vs demand-capped vs deserved over time, one panel per submitter: the
    summary's (most severe first), then those with the largest shares, MAX_LINES in all."""
    if share.empty:
        return None
    top = (share.groupby("name")[["demand_capped", "delivered"]].sum().sum(axis=1)
           .sort_values(ascending=False))
    present = set(top.index)
    names = [n for n in _ranked(summary, "submitter") if n in present]
    names += [n for n in top.index if top[n] > 0 and n not in names]
    names = names[:MAX_LINES]
    if not names:
        return None
    marks = _conditions(summary, "submitter")
    cols = 2 if len(names) > 1 else 1
    rows = math.ceil(len(names) / cols)
    fig = _figure(10 if cols == 2 else 7, 2.4 * rows + 0.6)
    axes = fig.subplots(rows, cols, squeeze=False, sharex=True)
    few = share["index"].nunique() <= 60
    for ax, name in zip(axes.flat, names):
        s = _thin(share[share["name"] == name].sort_values("time"),
                  ["demand_capped", "delivered", "deserved"], ["starved", "over_share"])
        x = _dates(s["time"])
        # the fair share as a wide pale band, what it got as a line on it: both show
        # where they are equal
        ax.plot(x, s["demand_capped"], color="tab:green", lw=7, alpha=0.3,
                solid_capstyle="butt", marker="o" if few else None, ms=9)
        ax.plot(x, s["delivered"], color="tab:blue", lw=1.6, marker="o" if few else None,
                ms=3.5)
        ax.plot(x, s["deserved"], ls=":", color="tab:gray", lw=1.4,
                marker="." if few else None)
        for flag, color in (("starved", "tab:red"), ("over_share", "tab:orange")):
            _shade(ax, s, flag, color)
        title = _wrapped(name, 56 if cols == 2 else 90) + (
            f" ({marks[name]})" if name in marks else "")
        ax.set_title(title, fontsize=9)
        ax.set_ylabel("share (slot weight)")
        _y_from_zero(ax, pd.concat([s["demand_capped"], s["delivered"], s["deserved"]]))
        _time_axis(ax, s["time"], label=False)
    for ax in axes[-1]:
        ax.set_xlabel(words.time)
    if len(names) < rows * cols:          # an empty last panel: the one above shows time
        axes[-1][-1].set_visible(False)
        above = axes[-2][-1]
        above.set_xlabel(words.time)
        above.xaxis.set_tick_params(labelbottom=True)
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch
    fig.legend(handles=[Line2D([], [], color="tab:blue", lw=1.6, label="delivered",
                               marker="o" if few else None, ms=3.5),
                        Line2D([], [], color="tab:green", lw=7, alpha=0.3,
                               label="demand-capped (fair) share",
                               marker="o" if few else None, ms=9),
                        Line2D([], [], color="tab:gray", ls=":", lw=1.4, label="deserved",
                               marker="." if few else None),
                        Patch(color="tab:red", alpha=0.25, label="starved"),
                        Patch(color="tab:orange", alpha=0.25, label="over its share")],
               loc="outside upper center", ncols=5, fontsize=8, frameon=False)
    more = share["name"].nunique() - len(names)
    which = ("the submitters of the summary, most severe first"
             + (", then those with the largest shares" if len(names) > len(
                 [n for n in _ranked(summary, "submitter") if n in present]) else "")
             if names[0] in marks else "the submitters with the largest shares")
    return _save(fig, out, "shares.png", "Delivered, demand-capped and deserved share per "
                 "submitter over time",
                 f"Per submitter ({which}): delivered ({words.usage}), the demand-capped "
                 "share (the pale band: its fair share, capped at its demand) and the "
                 "deserved share, in slot-weight units, one point per pass; shaded red: "
                 "starved, orange: over its share."
                 + (f" {more} more in the per-pass table submitter_shares_by_pass (tables/)."
                    if more > 0
                    else ""))


def plot_groups(grp: pd.DataFrame, out: Path, summary: pd.DataFrame | None = None,
                words: Words = Words(False)) -> Plot | None:
    """Per group (the summary's first, then the largest quotas; MAX_LINES in all), two
    panels on their own scales: usage against quota, and what it requested."""
    g = grp[(grp["quota"] > 0) | (grp["usage"] > 0) | (grp["requested"] > 0)]
    if g.empty:
        return None
    size = g.groupby("group")[["quota", "usage"]].max().max(axis=1).sort_values(
        ascending=False, kind="stable")
    names = [n for n in _ranked(summary, "group") if n in size.index]
    names += [n for n in size.index if n not in names]
    shown = names[:MAX_LINES]
    marks = _conditions(summary, "group")
    rows = len(shown)
    fig = _figure(10, 2.0 * rows + 0.6)
    axes = fig.subplots(rows, 2, squeeze=False, sharex=True, width_ratios=[3, 2])
    few = g["index"].nunique() <= 60
    for (ax, axr), name in zip(axes, shown):
        s = _thin(g[g["group"] == name].sort_values("time"), ["quota", "usage", "requested"],
                  ["starved", "over_quota"])
        x = _dates(s["time"])
        m = "o" if few else None
        ax.plot(x, s["quota"], color="tab:green", lw=7, alpha=0.3, solid_capstyle="butt",
                marker=m, ms=9)
        ax.plot(x, s["usage"], color="tab:blue", lw=1.6, marker=m, ms=3.5)
        for flag, color in (("starved", "tab:red"), ("over_quota", "tab:orange")):
            _shade(ax, s, flag, color)
        ax.set_title(_short(name, 80) + (f" ({marks[name]})" if name in marks else ""),
                     fontsize=9, loc="left")
        ax.set_ylabel("usage (slot weight)")
        _y_from_zero(ax, pd.concat([s["quota"], s["usage"]]))
        axr.plot(x, s["requested"], color="tab:purple", lw=1.4, marker=m, ms=3.5)
        axr.set_title("requested" + ("" if (s["requested"] > 0).any() else ": nothing"),
                      fontsize=9, loc="left")
        axr.set_ylabel("requested (slot weight)")
        _y_from_zero(axr, s["requested"])
        _time_axis(ax, s["time"], label=False)
        _time_axis(axr, s["time"], label=False)
    for ax in axes[-1]:
        ax.set_xlabel(words.time)
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch
    fig.legend(handles=[Line2D([], [], color="tab:blue", lw=1.6, label="usage",
                               marker="o" if few else None, ms=3.5),
                        Line2D([], [], color="tab:green", lw=7, alpha=0.3, label="quota",
                               marker="o" if few else None, ms=9),
                        Patch(color="tab:red", alpha=0.25, label="starved"),
                        Patch(color="tab:orange", alpha=0.25, label="over quota"),
                        Line2D([], [], color="tab:purple", lw=1.4,
                               label="requested (right, own scale)")],
               loc="outside upper center", ncols=5, fontsize=8, frameon=False)
    more = len(names) - len(shown)
    return _save(fig, out, "groups.png", "Quota, usage and requested per accounting group "
                 "over time",
                 "Per accounting group: on the left its usage against its quota (the pale "
                 f"band: {words.quota}; the pool for the root without groups), on the right "
                 "what it requested (running and idle), each panel on its own scale, in "
                 "slot-weight units, one point per pass; shaded red: starved, orange: over "
                 "quota."
                 + (f" {more} more groups in the per-pass table group_quota_by_pass (tables/)."
                    if more else ""))


def _wait_unit(longest: float) -> tuple[str, float]:
    """The unit for waits up to `longest` seconds: (name, seconds per unit)."""
    if longest < 180:
        return "seconds", 1.0
    if longest < 3 * 3600:
        return "minutes", 60.0
    if longest < 3 * 86400:
        return "hours", 3600.0
    return "days", 86400.0


def plot_waits(waits: dict[str, dict[str, list[float]]], out: Path,
               words: Words = Words(False)) -> Plot | None:
    """Box plots of the queue wait per submitter and per group: the MAX_BOXES with the
    longest waits (90th percentile) of each."""
    panels = [(k, v) for k, v in (("submitter", waits.get("submitter", {})),
                                   ("group", waits.get("group", {}))) if v]
    if not panels:
        return None
    chosen = []
    for by, samples in panels:
        p90 = {n: float(np.percentile(np.asarray(v, dtype=float), 90)) if len(v) else 0.0
               for n, v in samples.items()}
        names = sorted(samples, key=lambda n: (-p90[n], -len(samples[n]), n))[:MAX_BOXES]
        chosen.append((by, samples, names[::-1]))
    longest = max((max(v) for _, s, ns in chosen for n in ns for v in [s[n]] if len(v)),
                  default=0.0)
    if longest <= 0:          # nothing to draw: the section says every wait was 0
        return None
    unit, per = _wait_unit(longest)
    heights = [max(1.6, 0.32 * len(ns) + 1.0) for _, _, ns in chosen]
    fig = _figure(10, sum(heights) + 0.3)
    axes = fig.subplots(len(chosen), 1, squeeze=False, height_ratios=heights)[:, 0]
    cut = False
    for ax, (by, samples, names) in zip(axes, chosen):
        cut |= len(samples) > len(names)
        data = [np.asarray(samples[n], dtype=float) / per for n in names]
        ax.boxplot(data, orientation="horizontal", tick_labels=[_short(n, 45) for n in names],
                   showfliers=True, widths=0.6)
        right = longest / per * 1.04
        ax.set_xlim(left=-0.015 * right, right=right)      # a wait of 0 stays in sight
        ax.set_xlabel(f"wait until matched ({unit})")
        ax.set_ylabel(f"{by} ({len(names)} of {len(samples)})", fontsize=9)
        ax.grid(True, axis="x", alpha=0.3)
        ax.tick_params(axis="y", labelsize=8)
    who = ("the simulated cycles matched" if words.sim else "our cycles matched")
    return _save(fig, out, "waits.png", "Queue wait time distributions per submitter and "
                 "group",
                 f"How long the jobs {who} had been idle ({unit}; box: quartiles and median, "
                 "whiskers: 1.5 IQR, circles: outliers), per submitter and per group"
                 + (f": the {MAX_BOXES} of each with the longest waits (90th percentile); all "
                    "in tables/wait_by_submitter.csv" if cut else "")
                 + ".")


def _same_series(p: pd.DataFrame, names: list[str], cols: Sequence[str]) -> list[list[str]]:
    """`names` grouped where their series of `cols` are the same in every pass (one line
    would hide the others), in the order of their first member."""
    groups: dict[tuple, list[str]] = {}
    for n in names:
        s = p[p["name"] == n].sort_values("time")
        key = (tuple(s["time"].round(0)),) + tuple(
            tuple(np.round(s[c].astype(float).fillna(-1.0).to_numpy(), 6)) for c in cols)
        groups.setdefault(key, []).append(n)
    return list(groups.values())


def _joined(members: list[str], n: int = 80) -> str:
    if len(members) == 1:
        return _short(members[0], n)
    if len(members) == 2:
        return f"{_short(members[0], n)} = {_short(members[1], n)}"
    return f"{_short(members[0], n)} and {len(members) - 1} others (the same)"


def plot_priorities(prio: pd.DataFrame, share: pd.DataFrame, out: Path,
                    words: Words = Words(False)) -> Plot | None:
    """RUP (with our predicted RUP, when recorded), EUP and, when it varies, the priority
    factor over time for the submitters with the most usage; submitters whose figures are
    the same in every pass are one line, named for all of them."""
    p = prio[~prio["is_group"]]
    if p.empty or p[["real_rup", "real_eup", "factor"]].isna().all().all():
        return None
    names = most_used(share, p, MAX_LINES)
    p = p[p["name"].isin(names)]
    factors = p["factor"].dropna().unique()
    flat = len(factors) <= 1
    panels = [("real_rup", "RUP (recent usage, slot weight)")]
    if not flat:     # the same factor for all, throughout: the EUP is the RUP times it
        panels += [("real_eup", "EUP (RUP × factor)"), ("factor", "priority factor (×)")]
    lines = _same_series(p, names, [c for c, _ in panels])
    # as many legend columns as the longest entry leaves room for (8-point text, a
    # 960-pixel figure): no entry cut
    longest = max(len(_joined(m)) for m in lines)
    ncols = max(1, min(3, int(900 // (5.4 * longest + 40))))
    rows = math.ceil((len(lines) + 1) / ncols)
    fig = _figure(10, 2.6 * len(panels) + 0.9 + 0.2 * rows)
    axes = fig.subplots(len(panels), 1, sharex=True, squeeze=False)[:, 0]
    styles = ["-", "--", "-.", ":"]
    handles = []
    from matplotlib.lines import Line2D
    predicted = False
    for i, members in enumerate(lines):
        s = p[p["name"] == members[0]].sort_values("time")
        x = _dates(s["time"])
        m = _marker(len(s))
        c, ls = f"C{i % 10}", styles[(i // 10) % len(styles)]
        for ax, (col, _) in zip(axes, panels):
            ax.plot(x, s[col], marker=m, ms=4, color=c, ls=ls, lw=1.5)
        pr = s[s["predicted_rup"].notna()]
        if len(pr) and not words.sim:
            predicted = True
            axes[0].plot(_dates(pr["time"]), pr["predicted_rup"], ls="none", marker="x",
                         color=c, ms=7)
        handles.append(Line2D([], [], color=c, ls=ls, lw=1.5, label=_joined(members)))
    if predicted:
        handles.append(Line2D([], [], color="black", marker="x", ls="none",
                              label="our accountant's prediction"))
    for ax, (col, label) in zip(axes, panels):
        ax.set_ylabel(label)
        vals = p[col].dropna()
        if len(vals) and vals.min() > 0 and vals.max() / vals.min() > 100:
            ax.set_yscale("log")
        else:
            _y_from_zero(ax, vals)
        _time_axis(ax, p["time"], label=False)
    axes[-1].set_xlabel(words.time)
    fig.legend(handles=handles, loc="outside upper center", ncols=min(ncols, len(handles)),
               fontsize=8, frameon=False)
    factor_text = ""
    if flat and len(factors):
        factor_text = (f" The priority factor was {number(factors[0])} for each of them "
                       f"throughout, so the EUP is {number(factors[0])} × the RUP (neither "
                       "drawn).")
    same = sum(len(m) > 1 for m in lines)
    acc = words.accountant
    return _save(fig, out, "priorities.png", "RUP, EUP and priority factor per submitter "
                 "over time",
                 f"Per submitter (the {len(names)} with the most usage): {acc}'s RUP"
                 + (" with our accountant's prediction for the same time (crosses)"
                    if predicted else "")
                 + ("" if flat else ", the EUP and the priority factor")
                 + ", one point per pass." + factor_text
                 + (f" Submitters whose figures were the same in every pass share a line "
                    f"({same} such line{'s' if same != 1 else ''})." if same else ""))


def plot_preemptions(pre: pd.DataFrame, out: Path, words: Words = Words(False)) -> Plot | None:
    if pre.empty:
        return None
    p = pre.head(20).iloc[::-1]
    # at least as tall as the y label is long (a few bars cut it)
    fig = _figure(10, max(3.2, 0.35 * len(p) + 1.4))
    ax = fig.subplots()
    labels = [f"{_short(a, 30)} → {_short(b, 30)}" for a, b in zip(p["preemptor"],
                                                                    p["preempted"])]
    colors = {"real": "tab:purple", "shadow": "tab:cyan"}
    ax.barh(range(len(p)), p["count"], color=[colors.get(s, "tab:gray") for s in p["source"]])
    ax.set_yticks(range(len(p)), labels, fontsize=8)
    ax.set_xlabel("matches that preempted a claim (count)")
    ax.set_ylabel("preempting → preempted (submitter)")
    ax.grid(True, axis="x", alpha=0.3)
    from matplotlib.patches import Patch
    srcs = list(dict.fromkeys(pre["source"]))
    ax.legend(handles=[Patch(color=colors.get(s, "tab:gray"), label=words.source(s))
                       for s in srcs], fontsize=8, loc="lower right")
    more = len(pre) - len(p)
    return _save(fig, out, "preemptions.png", "Preemptions: who preempted whom",
                 "Matches that preempted a running claim, by preempting submitter and "
                 "preempted user"
                 + ("." if words.sim else "; real: the MatchLog, ours: our cycles.")
                 + (f" {more} more pairs in tables/preemptions.csv." if more > 0 else ""))


def plot_fairness(fair: pd.DataFrame, out: Path, words: Words = Words(False)) -> Plot | None:
    f = fair[fair["jain"].notna()]
    if f.empty:
        return None
    fig = _figure(10, 4.2)
    ax, ax2 = fig.subplots(2, 1, sharex=True, height_ratios=[2, 1])
    ax.plot(_dates(f["time"]), f["jain"], marker=_marker(len(f)), ms=4, color="tab:blue",
            label="Jain's index")
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("Jain's index (0–1)")
    ax.legend(fontsize=8, loc="lower left")
    _time_axis(ax, fair["time"], label=False)
    if len(fair) <= 200:
        ax2.bar(_dates(fair["time"]), fair["starved"], width=_bar_width(fair["time"]),
                color="tab:red", alpha=0.6, label="starved submitters")
    else:
        ax2.fill_between(_dates(fair["time"]), fair["starved"], step="mid", alpha=0.6,
                         color="tab:red", lw=0, label="starved submitters")
    ax2.set_ylabel("starved (submitters)")
    ax2.set_ylim(0, max(1, int(fair["starved"].max())) * 1.15)
    from matplotlib.ticker import MaxNLocator
    ax2.yaxis.set_major_locator(MaxNLocator(integer=True, nbins=4))
    ax2.legend(fontsize=8, loc="upper right")
    _time_axis(ax2, fair["time"], label=words.time)
    return _save(fig, out, "fairness.png", "Jain's fairness index over time",
                 "Top: Jain's index of delivered / demand-capped share across the submitters "
                 "with demand, per pass (1: each got the same fraction of its fair share). "
                 "Bottom: how many submitters were starved in each pass.")


def _bar_width(t: pd.Series) -> float:
    """Bar width in days (matplotlib's date unit): 60% of the median pass interval."""
    d = t.astype(float).sort_values().diff().dropna()
    d = d[d > 0]
    return 0.6 * (float(d.median()) if len(d) else 60.0) / 86400.0


def plot_agreement(agree: pd.DataFrame, out: Path) -> Plot | None:
    a = agree[agree["worst"].notna()]
    if a.empty:
        return None
    fig = _figure(10, 3.4)
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
    ax.set_ylabel("agreement (fraction, 0–1)")
    ax.legend(fontsize=8, loc="lower left")
    _time_axis(ax, a["time"])
    return _save(fig, out, "agreement.png", "Real versus shadow agreement over time",
                 "Agreement of our cycle with the real cycle that followed its snapshot, per "
                 "compared pass: the share of matches that agree (1: all).")


# ---------------------------------------------------------------- the page

def _status_cls(rec: dict) -> str:
    return str(rec.get("status", "")).replace(" ", "-")


# the detail table of each (kind, status) of the summary, and its rows' ids
_DETAIL_OF = {("submitter", "starved"): "starved-submitters",
              ("submitter", "over share"): "over-share-submitters",
              ("group", "starved"): "starved-groups",
              ("group", "borrowing"): "over-quota-groups",
              ("group", "over quota"): "over-quota-groups"}


def detail_id(kind: str, status: str, name: str) -> str:
    """The id of a summary row's details (a row of its detail table): safe for any name."""
    table = _DETAIL_OF.get((str(kind), str(status)), "conditions")
    return f"{table}-{hashlib.sha1(str(name).encode('utf-8', 'replace')).hexdigest()[:12]}"


def _with_text(rec: dict, n: int, passes: bool = True) -> str:
    """The first `n` partners of a summary row (the ones that matter most: see
    `core.audit.summary_table`), with how many passes together or only their full
    names, and how many more."""
    partners = rec.get("with")
    if not isinstance(partners, (list, tuple)):
        return "" if partners is None or isinstance(partners, float) else str(partners)
    shown = list(partners[:n])
    if not passes:
        shown = [p.rsplit(" (", 1)[0] for p in shown]
    return ", ".join(shown) + (f" and {len(partners) - n} more" if len(partners) > n else "")


def _spans(df: pd.DataFrame) -> pd.DataFrame:
    """`df` (summary rows) with display columns: how long and the longest streak as
    durations, or as passes where they lasted no known time (a single pass: no next one
    to measure it by), and the severity left blank there."""
    def span(d, n):
        v = _float(d)
        if v is not None and v > 0:
            return duration(v)
        k = int(_float(n) or 0)
        return f"{k} pass" + ("" if k == 1 else "es") if k else ""

    recs = df.to_dict("records")
    return df.assign(
        how_long=[span(r.get("duration"), r.get("passes")) for r in recs],
        streak=[span(r.get("longest_duration"), r.get("longest_passes")) for r in recs],
        severity_shown=[r.get("severity") if (_float(r.get("duration")) or 0) > 0 else None
                        for r in recs])


def _summary_cols(hgq: bool) -> list[Col]:
    return ([Col("rank", "#", "int"), Col("name", "Who")]
            + ([Col("group", "Group")] if hgq else [])
            + [Col("kind", "Kind"), Col("status", "Condition", "status"),
               Col("severity_shown", "Severity (slot-h)", "slot_h"),
               Col("mean_amount", "Mean (slots)", "num"),
               Col("max_amount", "Max (slots)", "num"),
               Col("relative", "Relative", "pct"),
               Col("how_long", "How long", "span"),
               Col("streak", "Longest streak", "span"),
               Col("with_short", "With", "list")])


def ranked_summary(audit: Audit) -> dict[str, Any]:
    """The page's first table: the SUMMARY_ROWS most severe conditions, each name a link
    to its row in the detail tables."""
    t = audit.tables.get("summary")
    if t is None:
        t = pd.DataFrame(columns=["rank", "kind", "name", "status", "with", "with_count"])
    s = _spans(t.head(SUMMARY_ROWS))
    s = s.assign(with_short=[_with_text(r, 2, passes=False) for r in s.to_dict("records")])
    table = html_table(s, _summary_cols(bool(audit.summary.get("hgq"))), limit=SUMMARY_ROWS,
                       row_cls=_status_cls,
                       href={"name": lambda r: "#" + detail_id(r["kind"], r["status"],
                                                               r["name"])},
                       row_id=lambda r: f"rank-{r['rank']}")
    n = len(t)
    kinds = t.groupby(["kind", "status"]).size() if n else pd.Series(dtype=int)
    parts = []
    for key, one, many in ((("submitter", "starved"), "starved submitter", "starved submitters"),
                           (("group", "starved"), "starved group", "starved groups"),
                           (("group", "borrowing"), "borrowing group", "borrowing groups"),
                           (("submitter", "over share"), "submitter over its share",
                            "submitters over their share"),
                           (("group", "over quota"), "group over quota", "groups over quota")):
        k = int(kinds.get(key, 0)) if n else 0
        if k:
            parts.append(f"{k} {one if k == 1 else many}")
    table["more"] = None
    floor = audit.summary.get("noise_floor", 1.0)
    thr = audit.summary.get("starvation_threshold", 0.1)
    table["count_line"] = (
        (f"The {min(n, SUMMARY_ROWS)} most severe of {n} conditions" if n > SUMMARY_ROWS
         else f"{n} condition{'s' if n != 1 else ''}")
        + (f" ({', '.join(parts)})" if parts else "")
        + ", ranked by severity: the shortfall or excess, in slots (slot-weight units), "
        "times how long it lasted (slot-hours)"
        + ("; a group over quota that starved nobody comes last" if kinds.get(
            ("group", "over quota"), 0) else "")
        + ". Relative: the mean shortfall or excess over the fair share or quota. Each "
        "name links to its details"
        + (f"; all {n} in tables/summary.csv." if n > SUMMARY_ROWS else "."))
    table["floor_line"] = (
        f"Not counted: a pass where the shortfall or excess is under {number(floor)} slot"
        f"{'' if floor == 1 else 's'} (the noise floor, --noise-floor) or under {thr:.0%} "
        "of the fair share." if floor > 0 else
        f"Not counted: a pass where the shortfall or excess is under {thr:.0%} of the fair "
        "share (no noise floor: --noise-floor 0).")
    return table


def _detail_table(summary: pd.DataFrame, kind: str, statuses: Sequence[str], title: str,
                  tid: str, csv: str, empty_text: str, amount: str,
                  hgq: bool = True) -> dict[str, Any]:
    s = summary[(summary["kind"] == kind) & summary["status"].isin(statuses)] if len(
        summary) else summary
    s = _spans(s).assign(with_3=[_with_text(r, 3) for r in s.to_dict("records")])
    cols = [Col("rank", "#", "int"), Col("name", "Name")]
    if kind == "submitter" and hgq:
        cols.append(Col("group", "Group"))
    if len(statuses) > 1:
        cols.append(Col("status", "Condition", "status"))
    cols += [Col("severity_shown", "Severity (slot-hours)", "slot_h"),
             Col("how_long", "How long", "span"),
             Col("streak", "Longest streak", "span"),
             Col("first", "First (UTC)", "tmin"), Col("last", "Last (UTC)", "tmin"),
             Col("mean_amount", f"Mean {amount} (slots)", "num"),
             Col("max_amount", f"Largest {amount} (slots)", "num"),
             Col("relative", "Relative", "pct"),
             Col("with_3", "With (passes together)", "list")]
    return html_table(s, cols, title=title, tid=tid, csv=csv, empty_text=empty_text,
                      row_cls=_status_cls,
                      row_id=lambda r: detail_id(r["kind"], r["status"], r["name"]))


def _adjustments_section(t: dict[str, pd.DataFrame]) -> dict[str, Any]:
    return {"id": "adjustments", "title": "Recommendations applied",
            "intro": "The condor_userprio changes negotiator-ext recommend --apply made (or "
                     "tried) in the period, from the ledger's audit trail (all pools).",
            "plots": [], "empty_text": None,
            "tables": [html_table(t["adjustments"], [
                Col("applied_at", "When (UTC)", "time"), Col("kind", "Kind"),
                Col("name", "Name"), Col("value", "Value", "num"),
                Col("lease_expires", "Lease ends (UTC)", "time"), Col("result", "Result"),
                Col("outcome", "Outcome"), Col("command", "Command")],
                csv="tables/adjustments.csv",
                empty_text="No recommendation was applied in the period.")]}


def _sourced(df: pd.DataFrame, words: Words) -> pd.DataFrame:
    """A table with its `source` column in words ("simulated cycles", "our cycles", ...)."""
    if "source" not in df.columns or df.empty:
        return df
    return df.assign(source=[words.source(s) for s in df["source"]])


def _sections(audit: Audit, plots: dict[str, Plot | None]) -> list[dict[str, Any]]:
    t = audit.tables
    words = Words(audit.summary.get("kind") == "simulation")
    secs: list[dict[str, Any]] = []

    def sec(id_, title, intro, plot_names=(), tables=(), empty_text=None):
        secs.append({"id": id_, "title": title, "intro": intro,
                     "plots": [plots[p] for p in plot_names if plots.get(p)],
                     "tables": list(tables), "empty_text": empty_text})

    summary = t.get("summary", pd.DataFrame(columns=["kind", "status", "name", "rank"]))
    hgq = bool(audit.summary.get("hgq"))
    fl = audit.summary.get("noise_floor", 1.0)
    floor = f"{number(fl)} slot{'' if fl == 1 else 's'}"
    thr = audit.summary.get("starvation_threshold", 0.1)
    sec("conditions", "Who was starved or over, how badly and for how long",
        f"A submitter is starved in a pass when it has idle jobs while it gets less than "
        f"{1 - thr:.0%} of its demand-capped (fair) share, and at least {floor} less; over "
        f"its share when it gets more than {1 + audit.summary.get('over_share_threshold', 0.1):.0%} "
        f"of it and at least {floor} more. A group is starved when it is below its quota "
        f"while requesting more than it uses, over quota when it uses more than its quota "
        f"(by at least {floor}), and borrowing when it is over quota while another group "
        "is starved. How long: the passes' intervals summed (each pass lasts until the next "
        "analysed one). Severity: the amount times how long, summed (slot-hours). Most severe "
        "first; # is the rank in the summary.",
        tables=[
            _detail_table(summary, "submitter", ["starved"], "Starved submitters",
                          "starved-submitters", "tables/summary.csv",
                          "No submitter was starved.", "shortfall", hgq),
            _detail_table(summary, "submitter", ["over share"], "Submitters over their share",
                          "over-share-submitters", "tables/summary.csv",
                          "No submitter was over its share.", "excess", hgq),
            _detail_table(summary, "group", ["starved"], "Starved groups", "starved-groups",
                          "tables/summary.csv", "No group was starved.", "shortfall"),
            _detail_table(summary, "group", ["borrowing", "over quota"],
                          "Groups over quota (borrowing: while another was starved)",
                          "over-quota-groups", "tables/summary.csv",
                          "No group was over its quota.", "surplus"),
            html_table(t["starved_borrowing_pairs"], [
                Col("starved", "Starved group"), Col("borrowing", "Borrowing group"),
                Col("passes", "Passes together", "int"), Col("duration", "How long", "dur"),
                Col("longest_duration", "Longest streak", "dur"),
                Col("first", "First (UTC)", "tmin"), Col("last", "Last (UTC)", "tmin"),
                Col("mean_shortfall", "Mean shortfall (slots)", "num"),
                Col("mean_surplus", "Mean surplus borrowed (slots)", "num")],
                csv="tables/starved_borrowing_pairs.csv", title="Starved ↔ borrowing groups",
                empty_text="No group was starved while another borrowed surplus."),
            html_table(t["starved_over_share_submitters"], [
                Col("starved", "Starved submitter"), Col("borrowing", "Over its share"),
                Col("passes", "Passes together", "int"), Col("duration", "How long", "dur"),
                Col("mean_shortfall", "Mean shortfall (slots)", "num"),
                Col("mean_surplus", "Mean excess (slots)", "num")],
                title="Starved submitters and those of the same group over their share",
                csv="tables/starved_over_share_submitters.csv",
                empty_text="No starved submitter shared its group with one over its share.")])
    sec("shares", "Deserved, demand-capped and delivered shares",
        "Per submitter over the period (time-weighted means, in slots: slot-weight units). "
        "Deserved: its group's allocation (its quota, or what its submitters used when the "
        "group ran above its quota on surplus) split among the group's submitters with "
        "demand in inverse proportion to their EUP. Demand-capped (its fair share): the same "
        "split, each capped at its demand (running weight + idle jobs, each job counted "
        "once) with the rest going to the others. Delivered: what it used "
        f"({words.usage}). Gap: delivered − demand-capped. Most short of its share first.",
        ["shares"],
        [html_table(t["submitter_shares"].sort_values("gap", kind="stable"), [
            Col("name", "Submitter"), Col("group", "Group"),
            Col("active_passes", "Passes with demand", "int"),
            Col("demand", "Demand (slots)", "num"), Col("deserved", "Deserved (slots)", "num"),
            Col("demand_capped", "Demand-capped (slots)", "num"),
            Col("delivered", "Delivered (slots)", "num"), Col("gap", "Gap (slots)", "num"),
            Col("rel_gap", "Gap (relative)", "pct"),
            Col("deserved_pct", "Deserved % of pool", "pct"),
            Col("delivered_pct", "Delivered % of pool", "pct")],
            csv="tables/submitter_shares.csv", empty_text="No submitter was recorded.")])
    sec("groups", "Group quotas and usage",
        f"Per accounting group over the period (time-weighted means, slots): quota "
        f"({words.quota}), usage and request ({words.accountant}'s), the sums of its "
        "submitters' shares, and in how many passes it was over quota (using surplus) or "
        "starved.",
        ["groups"],
        [html_table(t["group_quota"], [
            Col("group", "Group"), Col("quota", "Quota", "num"), Col("usage", "Usage", "num"),
            Col("requested", "Requested", "num"), Col("demand_capped", "Demand-capped", "num"),
            Col("delivered", "Delivered", "num"), Col("gap", "Gap", "num"),
            Col("over_quota_passes", "Passes over quota", "int"),
            Col("starved_passes", "Passes starved", "int")], csv="tables/group_quota.csv",
            empty_text="No accounting group was recorded.")])
    wait_cols = [Col("name", "Name"), Col("source", "Matches of"),
                 Col("matches", "Count", "int"), Col("p50", "Median", "dur"),
                 Col("p90", "90th percentile", "dur"), Col("max", "Max", "dur"),
                 Col("mean", "Mean", "dur")]
    by_p90 = {k: _sourced(t[f"wait_by_{k}"].sort_values(["p90", "name"],
                                                          ascending=[False, True],
                                                          kind="stable"), words)
              for k in ("submitter", "group")}
    sec("waits", "Queue wait until matched",
        "How long each matched job had been idle when matched, longest waits (90th "
        "percentile) first"
        + (": the simulated cycles' matches." if words.sim else
           ": our cycles' matches, and the real negotiator's (MatchLog) when their wait is "
           "known. A job the real negotiator did not start can be matched by several of "
           "our passes."),
        ["waits"],
        [html_table(by_p90["submitter"], wait_cols, title="Per submitter",
                    csv="tables/wait_by_submitter.csv", empty_text="No match with a known wait."),
         html_table(by_p90["group"], wait_cols, title="Per group",
                    csv="tables/wait_by_group.csv", empty_text="No match with a known wait.")],
        empty_text=None if plots.get("waits") or t["wait_by_submitter"].empty else
        "Every wait was 0 s: each job was matched in the first pass it waited in (nothing "
        "to plot).")
    prio_cols = [Col("name", "Name"), Col("group", "Group"),
                 Col("is_group", "Group record", "bool"), Col("passes", "Passes", "int"),
                 Col("first_rup", "First RUP", "num"), Col("last_rup", "Last RUP", "num")]
    if not words.sim:
        prio_cols.append(Col("last_predicted_rup", "Our last RUP", "num"))
    prio_cols += [Col("last_eup", "Last EUP", "num"), Col("min_factor", "Min factor", "num"),
                  Col("max_factor", "Max factor", "num")]
    if not words.sim:
        prio_cols.append(Col("max_abs_drift", "Max |drift|", "pct"))
    sec("priorities", "Priorities over time",
        (f"RUP, EUP and priority factor per accounting principal ({words.accountant}'s)"
         + ("." if words.sim else
            ", with our accountant's prediction of the RUP (recorded when exactly one real "
            "priority update ran since the pass before) and the largest drift between "
            "them.")),
        ["priorities"],
        [html_table(t["priorities"], prio_cols, csv="tables/priorities.csv",
                    empty_text="No priorities recorded.")])
    sec("preemptions", "Preemptions",
        "Matches that preempted a running claim: who preempted whom"
        + (" in the simulated cycles." if words.sim else
           ", in our cycles and in the real MatchLog."),
        ["preemptions"],
        [html_table(_sourced(t["preemptions"], words), [
            Col("source", "Matches of"), Col("preemptor", "Preempting submitter"),
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
            Col("rel_gap", "Gap (relative)", "pct")],
            title="Largest gaps (slots): each submitter's largest, in one pass",
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
            Col("unexplained_agreement", "Counts, unexplained only", "pct"),
            Col("why", "Why"),
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
                Col("real_out_of_time", "Real out of time", "bool"),
                Col("why", "Why they differ")],
                title=f"Pass {r['pass_uuid'][:12]} ({utc(r['time'])} UTC): "
                      f"{percent(r['equivalent_agreement']) or '–'} up to identical slots, "
                      f"{percent(r['count_agreement']) or '–'} by counts, "
                      f"{percent(r['unexplained_agreement']) or '–'} unexplained only",
                tid=r["anchor"], limit=200, empty_text="No per-submitter figures recorded."))
        tables.append(html_table(agree.iloc[::-1], [
            Col("time", "Recorded (UTC)", "time"), Col("source", "Source"),
            Col("real_matches", "Real", "int"), Col("shadow_matches", "Ours", "int"),
            Col("equivalent_agreement", "Up to identical slots", "pct"),
            Col("count_agreement", "Counts", "pct"),
            Col("unexplained_agreement", "Counts, unexplained only", "pct"), Col("why", "Why"),
            Col("aligned", "Aligned", "bool"), Col("real_in_shadow", "Real in ours", "pct"),
            Col("shadow_in_real", "Ours in real", "pct"),
            Col("max_abs_drift", "Max priority drift", "pct"), Col("notes", "Notes")],
            title="Every comparison, newest first", csv="tables/agreement_by_pass.csv"))
        sec("agreement", "Real versus shadow agreement",
            "Each comparison sets our cycle on a pass's snapshot beside the real cycle that "
            "followed it. Where the counts differ, each submitter's difference is explained "
            "by a change of the pool between the snapshot and the real cycle (named), by the "
            "real cycle running out of time, or left unexplained; 'unexplained only' counts "
            "the explained differences as agreeing. 'Aligned': the snapshot was taken as "
            "the real cycle started (NegotiatorLog).", ["agreement"], tables)
    secs.append(_adjustments_section(t))
    return secs


def _figures(audit: Audit) -> list[dict[str, Any]]:
    s = audit.summary
    sim = s.get("kind") == "simulation"
    f: list[dict[str, Any]] = []

    def add(label, value, href=None, links=()):
        f.append({"label": label, "value": value, "href": href, "links": list(links)})

    add("Submitters with records", str(s.get("submitters", 0)), "#shares")
    groups = s.get("groups") or []
    if groups:
        add("Accounting groups", ", ".join(groups[:12])
            + (f" and {len(groups) - 12} more" if len(groups) > 12 else ""), "#groups")
    j = s.get("jain", {})
    if j.get("mean") is not None:
        add("Jain's index", f"mean {j['mean']:.2f}, lowest {j['min']:.2f}", "#fairness")
    add("Starved", f"{len(s.get('starved_submitters', []))} submitter(s), "
                   f"{len(s.get('starved_groups', []))} group(s)", "#conditions")
    add("Groups over quota", _over_quota_text(audit)
        or ("none" if s.get("hgq") else "none (no accounting groups)"), "#over-quota-groups")
    pre = s.get("preemptions", {})
    if sim:
        add("Preemptions", f"{pre.get('shadow', 0)} in the simulated cycles", "#preemptions")
    else:
        add("Preemptions", f"our cycles {pre.get('shadow', 0)}, the real negotiator "
            f"{pre.get('real', 0)} (MatchLog)", "#preemptions")
    c = s.get("comparisons", {})
    if c.get("count"):
        ea, ca = c.get("mean_equivalent_agreement"), c.get("mean_count_agreement")
        ua = c.get("mean_unexplained_agreement")
        add("Real vs shadow", f"{c['count']} comparison(s); mean agreement "
            f"{percent(ea) or '–'} up to identical slots, {percent(ca) or '–'} by counts"
            + (f", {percent(ua)} unexplained only ({c.get('with_unexplained', 0)} with "
               f"unexplained differences; {c.get('aligned', 0)} aligned with the real "
               "cycle's start)" if ua is not None else "")
            + ("; diverged most in" if c.get("lowest") else ""), "#agreement",
            [{"href": "#" + r["anchor"], "text": f"{r['pass'][:12]} ({percent(r['worst'])})"}
             for r in c.get("lowest", [])])
    late = s.get("out_of_time", {})
    if late.get("cycles"):
        add("Real cycles out of time", f"{late['cycles']} of {late['compared']} compared; "
            f"{late['groups_not_served_newest']} group(s) not served in the newest",
            "tables/out_of_time.csv")
    adj = s.get("adjustments", {})
    add("Recommendations applied", ", ".join(f"{v} {k}" for k, v in sorted(adj.items()))
        or "none", "#adjustments")
    return f


def _over_quota_text(audit: Audit, n: int = 3) -> str:
    """The groups over quota in one line: how many, how many of them borrowing while
    another group was starved, and the `n` most severe (the summary's order)."""
    s = audit.summary
    over = s.get("over_quota", [])
    if not over:
        return ""
    borrowing = s.get("borrowing", [])
    ranked = [g for g in _ranked(audit.tables.get("summary"), "group") if g in set(over)]
    ranked += [g for g in over if g not in ranked]
    return (f"{len(over)} group{'s' if len(over) != 1 else ''}"
            + (f", {len(borrowing)} of them borrowing while another group was starved"
               if borrowing else ", none while another group was starved")
            + f"; most severe: {', '.join(ranked[:n])}"
            + (f" and {len(ranked) - n} more" if len(ranked) > n else ""))


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
    sim = audit.summary.get("kind") == "simulation"
    return ((f"Simulated period: {ends[0]} to {ends[1]} (the simulation's clock, UTC)"
             if sim else f"Period: {ends[0]} to {ends[1]} (UTC)")
            + (f", {' '.join(marks)} recorded pass" if marks else ""))


def _pass_line(audit: Audit) -> str:
    p = audit.summary["passes"]
    left = [f"{p[k]} {k}" for k in ("partial", "failed", "other") if p.get(k)]
    what = {"simulation": "Simulated pool", "what-if": "What-if replay of pool"}.get(
        audit.summary.get("kind", ""), "Pool")
    return (f"{what} {audit.pool or '(none)'}: {p['total']} pass(es), {p['analysed']} complete "
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
        summary = None
    else:
        secs = _sections(audit, plots)
        summary = ranked_summary(audit)
    found = audit.summary.get("findings") or []
    findings_more = (f"The first {MAX_FINDINGS} of {len(found)} findings; all in "
                     "tables/config_findings.csv." if len(found) > MAX_FINDINGS else None)
    html = tmpl.render(
        findings=found[:MAX_FINDINGS], findings_more=findings_more,
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
    words = Words(audit.summary.get("kind") == "simulation")
    try:
        if not audit.empty:
            share, grp = t["submitter_shares_by_pass"], t["group_quota_by_pass"]
            summary = t.get("summary")
            plots = {"shares": plot_shares(share, out, summary, words),
                     "groups": plot_groups(grp, out, summary, words),
                     "waits": plot_waits(audit.waits, out, words),
                     "priorities": plot_priorities(t["priorities_by_pass"], share, out, words),
                     "preemptions": plot_preemptions(t["preemptions"], out, words),
                     "fairness": plot_fairness(t["fairness_by_pass"], out, words),
                     "agreement": plot_agreement(t["agreement_by_pass"], out)}
        written += [out / p.src for p in plots.values() if p]
        for name, df in t.items():
            paths = (write_per_pass if name in PER_PASS else write_table)(
                df, out / "tables", name)
            written += paths
            files.append({"name": name, "rows": len(df),
                          "links": [{"href": f"tables/{p.name}", "text": _FORMAT_NAME[
                              "".join(p.suffixes)]} for p in paths]})
        generated = None if generated_at is None else utc(generated_at) + " UTC"
        html = render_html(audit, plots, files, ledger=ledger, generated=generated)
        (out / "index.html").write_text(html, encoding="utf-8")
        written.append(out / "index.html")
        report = {"generated_by": f"negotiator-ext {__version__} audit",
                  "generated_at": generated_at, "ledger": ledger,
                  "summary": _plain(audit.summary),
                  "plots": sorted(p.src for p in plots.values() if p),
                  "tables": [link["href"] for f in files for link in f["links"]]}
        (out / "report.json").write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
        written.append(out / "report.json")
    except OSError as exc:
        raise InputError(str(out), f"cannot write the report: {exc.strerror or exc}") from exc
    return written
