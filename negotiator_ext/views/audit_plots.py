"""The audit report's plots (`views.audit`): matplotlib (Agg, no pyplot state), one
PNG each, drawn only when there is something to show; every axis has its unit, the
words follow the ledger (`Words`), a line of many passes is thinned (`_thin`)."""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pandas as pd

from ..core.audit import PRIORITY_LINES, most_used
from ..core.audit_series import ShareSeries
from .audit_format import number
from .text import printable

MAX_LINES = PRIORITY_LINES  # submitters drawn in one time-series plot
MAX_BOXES = 15              # submitters / groups in the wait-time plot
DPI = 96

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


def plot_shares(share: pd.DataFrame | ShareSeries, out: Path,
                summary: pd.DataFrame | None = None,
                words: Words = Words(False)) -> Plot | None:
    """Delivered vs demand-capped vs deserved over time, one panel per submitter: the
    summary's (most severe first), then those with the largest shares, MAX_LINES in all.
    `share`: the per-pass share table, or what the plots read of it."""
    if share.empty:
        return None
    if not isinstance(share, ShareSeries):
        share = ShareSeries.of(share)
    top = share.totals().sum(axis=1).sort_values(ascending=False)
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
    few = share.n_passes <= 60
    for ax, name in zip(axes.flat, names):
        s = _thin(share.rows_of(name).sort_values("time"),
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
    more = share.n_names - len(names)
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


def plot_priorities(prio: pd.DataFrame, share: pd.DataFrame | ShareSeries, out: Path,
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


