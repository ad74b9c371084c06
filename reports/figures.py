"""The report's plots, drawn with matplotlib's object API on the Agg canvas and kept as PNG bytes.

PNG rather than SVG so that no text from an input ever reaches the HTML as markup: names drawn
into a figure end up as pixels. Each function returns None when the data has nothing to show.
Only `matplotlib.figure.Figure` is used, never pyplot, so rendering a report changes no global
matplotlib state of the caller (mathtext is off only while the plots are drawn).

Every plot has two layouts: WIDE for a desktop page and report.md, panels side by side, and
NARROW for a phone, panels stacked in one column at a width whose text stays readable there.
"""
from __future__ import annotations

import io
import textwrap
from dataclasses import dataclass

from matplotlib import rc_context, ticker
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from rnnbench.reports import analysis
from rnnbench.reports.content import category_title
from rnnbench.reports.records import Results, Timing
from rnnbench.reports.units import seconds
from rnnbench.documents import BASELINE

_NOT_APPLICABLE = "#d0d0d0"
PLOT_NAMES = ("conformance", "speedup", "devices", "scaling")   # every plot all_plots may draw


@dataclass(frozen=True)
class Layout:
    """How big a figure is drawn and how many panels go side by side."""

    width_in: float
    dpi: int
    columns: int


WIDE = Layout(11.0, 100, 2)       # the HTML shows figures at most this wide (max-width: 100%)
NARROW = Layout(4.2, 160, 1)      # a phone's screen, about 360 CSS pixels of figure


@dataclass(frozen=True)
class Plot:
    """One rendered figure: a file-safe name, a title (also the alt text) and its PNG."""

    name: str
    title: str
    png: bytes


def all_plots(results: Results, row_label, layout: Layout = WIDE) -> dict[str, Plot]:
    """Every plot the data supports, by name; `row_label(check)` names heat-map rows. Text is
    drawn as it is: a name such as "$x^2$" from an input is not read as mathtext."""
    with rc_context({"text.parse_math": False}):
        plots = [conformance_heatmap(results, row_label, layout),
                 speedup_chart(results.timings, layout), scaling_chart(results.timings, layout),
                 device_chart(results.timings, layout)]
    return {p.name: p for p in plots if p is not None}


def conformance_heatmap(results: Results, row_label, layout: Layout = WIDE) -> Plot | None:
    """Pass fraction per implementation x kind and per implementation x check category."""
    if not results.checks:
        return None
    panels = [("by kind", lambda c: c.kind),
              ("by check category", lambda c: category_title(c.category))]
    rows = list(dict.fromkeys(row_label(c) for c in results.checks))
    widths = [len({col(c) for c in results.checks}) for _, col in panels]
    if layout.columns > 1:
        fig = Figure(figsize=(layout.width_in, 1.6 + 0.45 * len(rows)), dpi=layout.dpi,
                     layout="constrained")
        axes = fig.subplots(1, 2, width_ratios=[max(w, 1) for w in widths], sharey=True)
    else:
        fig = Figure(figsize=(layout.width_in, 3.4 + 0.9 * len(rows)), dpi=layout.dpi,
                     layout="constrained")
        axes = fig.subplots(2, 1)
    image = None
    for ax, (title, column) in zip(axes, panels):
        cols = list(dict.fromkeys(column(c) for c in results.checks))
        counts = analysis.outcome_counts(results.checks, lambda c: (row_label(c), column(c)))
        grid = [[analysis.pass_fraction(counts[(r, c)]) if (r, c) in counts else None
                 for c in cols] for r in rows]
        image = ax.imshow([[float("nan") if v is None else v for v in line] for line in grid],
                          cmap="RdYlGn", vmin=0, vmax=1, aspect="auto")
        ax.set_facecolor(_NOT_APPLICABLE)
        for i, r in enumerate(rows):
            for j, c in enumerate(cols):
                if (r, c) in counts:
                    n = counts[(r, c)]
                    applicable = n["passed"] + n["failed"] + n["error"]
                    value = analysis.pass_fraction(n)
                    # white on the dark ends of the colour map, black in the light middle
                    dark = value is not None and not 0.2 < value < 0.85
                    ax.text(j, i, f"{n['passed']}/{applicable}" if applicable else "n/s",
                            ha="center", va="center", fontsize=8,
                            color="white" if dark else "black")
        ax.set_xticks(range(len(cols)), cols, rotation=35, ha="right", fontsize=8)
        ax.set_yticks(range(len(rows)), rows, fontsize=8)
        ax.set_title(title, fontsize=10)
    fig.colorbar(image, ax=axes, label="passed / applicable", shrink=0.8,
                 location="right" if layout.columns > 1 else "bottom")
    return Plot("conformance",
                "Conformance: passed / applicable checks (grey: not checked or not supported)",
                _png(fig))


def speedup_chart(timings: list[Timing], layout: Layout = WIDE) -> Plot | None:
    """Speed-up over the baseline per workload, with its 95% interval where the input has one:
    one panel per (metric, device), a row per workload, a marker per implementation.

    A hollow marker is within noise (its interval contains 1); non-conforming results have no
    speed-up and are not drawn. Log scale, 1 (the baseline) marked.
    """
    table = analysis.speedups(timings)
    points = [(t, analysis.ratio_of(table, t)) for t in timings if t.impl != BASELINE]
    points = [(t, r) for t, r in points if r is not None]
    if not points:
        return None
    panels = list(dict.fromkeys((t.metric, t.device) for t, _ in points))
    runs = {(t.source.machine, t.source.commit) for t, _ in points}
    names = list(dict.fromkeys(_series_label(t, runs) for t, _ in points))
    colours = {name: f"C{i % 10}" for i, name in enumerate(names)}   # one colour per series
    columns = min(layout.columns, len(panels))
    grid_rows = (len(panels) + columns - 1) // columns
    longest = max(len({t.workload for t, _ in points if (t.metric, t.device) == p})
                  for p in panels)
    height = 0.9 + (0.3 + 0.06 * len(names)) * longest
    fig = Figure(figsize=(layout.width_in, 0.6 + height * grid_rows), dpi=layout.dpi,
                 layout="constrained")
    axes = fig.subplots(grid_rows, columns, squeeze=False).ravel()
    for ax, (metric, device) in zip(axes, panels):
        cell = [(t, r) for t, r in points if (t.metric, t.device) == (metric, device)]
        workloads = list(dict.fromkeys(t.workload for t, _ in cell))
        series = [n for n in names if any(_series_label(t, runs) == n for t, _ in cell)]
        step = min(0.8 / max(len(series), 1), 0.2)
        for k, name in enumerate(series):
            mine = [(t, r) for t, r in cell if _series_label(t, runs) == name]
            offset = (k - (len(series) - 1) / 2) * step
            for t, r in mine:
                y = workloads.index(t.workload) + offset
                if r.ci:
                    ax.errorbar([r.value], [y], xerr=[[r.value - r.ci[0]], [r.ci[1] - r.value]],
                                color=colours[name], linewidth=1, capsize=2)
                ax.plot([r.value], [y], "o", color=colours[name], markersize=5,
                        markerfacecolor="white" if r.within_noise else colours[name])
        ax.axvline(1.0, color="black", linewidth=0.8)
        ax.set_xscale("log")
        values = [v for _, r in cell for v in (r.value, *(r.ci or ()))]
        reach = max(max(v, 1 / v) for v in values) ** 1.15
        ax.set_xlim(1 / max(reach, 1.5), max(reach, 1.5))
        _log_ticks(ax.xaxis, lambda v: f"{v:g}x")
        ax.set_yticks(range(len(workloads)), workloads, fontsize=8)
        ax.set_ylim(len(workloads) - 0.5, -0.5)
        ax.set_title(f"{metric} on {device or 'unknown device'}", fontsize=10)
        ax.set_xlabel(f"speed-up over {BASELINE} (> 1 faster; hollow: within noise)",
                      fontsize=8)
    for ax in axes[len(panels):]:
        ax.set_visible(False)
    # One legend for every panel, under them, so it never covers a marker.
    handles = [Line2D([], [], marker="o", linestyle="", color=colours[n]) for n in names]
    fig.legend(handles, names, loc="outside lower center", fontsize=7,
               ncols=min(len(names), 3 if layout.columns > 1 else 1))
    return Plot("speedup",
                f"Speed-up over {BASELINE} per workload with 95% intervals (> 1 is faster; "
                "log scale; hollow markers are within noise; non-conforming results not drawn)",
                _png(fig))


def scaling_chart(timings: list[Timing], layout: Layout = WIDE) -> Plot | None:
    """Median time against sequence length, batch and hidden size where the data has series."""
    series = analysis.scaling_series(timings)
    if not series:
        return None
    panels = list(dict.fromkeys((s.axis, s.metric, s.device) for s in series))
    cols = min(len(panels), layout.columns)
    rows = (len(panels) + cols - 1) // cols
    fig = Figure(figsize=(layout.width_in, 0.5 + 3.6 * rows), dpi=layout.dpi,
                 layout="constrained")
    axes = fig.subplots(rows, cols, squeeze=False).ravel()
    for ax, (axis, metric, device) in zip(axes, panels):
        sizes = set()
        for s in series:
            if (s.axis, s.metric, s.device) == (axis, metric, device):
                xs, ys = zip(*s.points)
                ax.plot(xs, ys, marker="o", label=s.label)
                sizes.update(xs)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xticks(sorted(sizes), [f"{x:g}" for x in sorted(sizes)])   # the measured sizes
        ax.xaxis.set_minor_locator(ticker.NullLocator())
        _log_ticks(ax.yaxis, seconds)
        ax.set_xlabel(analysis.SCALING_AXES[axis])
        ax.set_ylabel("median time")
        ax.set_title(f"{metric} on {device or 'unknown device'}", fontsize=10)
        ax.legend(fontsize=7)
    for ax in axes[len(panels):]:
        ax.set_visible(False)
    return Plot("scaling", "Scaling: median time against one size, the others fixed (log-log)",
                _png(fig))


def device_chart(timings: list[Timing], layout: Layout = WIDE) -> Plot | None:
    """CPU and GPU side by side for every (impl, workload, metric) measured on both.

    The two may come from different machines (a CPU box and a GPU box); the label says which.
    """
    by_key: dict[tuple, dict[str, tuple[str, float]]] = {}
    for t in timings:
        if t.status == "ok" and t.median_s:
            family = "cuda" if t.device.startswith("cuda") else t.device
            by_key.setdefault((t.impl, t.workload, t.metric, t.dtype), {}).setdefault(
                family, (t.source.machine, t.median_s))
    pairs = {k: v for k, v in by_key.items() if {"cpu", "cuda"} <= set(v)}
    if not pairs:
        return None
    labels = [" / ".join(k[:3]) + ("" if v["cpu"][0] == v["cuda"][0]
                                   else f" ({v['cpu'][0]} vs {v['cuda'][0]})")
              for k, v in pairs.items()]
    if layout.columns == 1:     # a phone: labels on two lines, leaving room for the bars
        labels = [textwrap.fill(label, 24) for label in labels]
    per_pair = 0.32 if layout.columns > 1 else 0.55
    fig = Figure(figsize=(layout.width_in, 1.5 + per_pair * len(pairs)), dpi=layout.dpi,
                 layout="constrained")
    ax = fig.subplots()
    ys = range(len(pairs))
    for offset, family, name in ((-0.2, "cpu", "CPU"), (0.2, "cuda", "GPU (cuda)")):
        ax.barh([y + offset for y in ys], [v[family][1] for v in pairs.values()], 0.4, label=name)
    ax.set_xscale("log")
    _log_ticks(ax.xaxis, seconds, (1.0, 2.0, 5.0) if layout.columns > 1 else (1.0,))
    ax.set_yticks(list(ys), labels, fontsize=8 if layout.columns > 1 else 7)
    ax.invert_yaxis()
    ax.set_xlabel("median time (log scale)")
    ax.legend(fontsize=8)
    return Plot("devices", "CPU and GPU side by side (median time, shorter is faster)", _png(fig))


def _log_ticks(axis, text, subs=(1.0, 2.0, 5.0)) -> None:
    """Ticks at `subs` (1, 2 and 5) per decade labelled by `text(value)`: readable over a few
    decades."""
    axis.set_major_locator(ticker.LogLocator(base=10, subs=subs))
    axis.set_major_formatter(ticker.FuncFormatter(lambda value, _: text(value)))
    axis.set_minor_formatter(ticker.NullFormatter())


def _series_label(t: Timing, runs: set[tuple[str, str]]) -> str:
    """The implementation, with its machine (and commit) where the plot has several runs."""
    if len(runs) < 2:
        return t.impl
    if len({machine for machine, _ in runs}) < len(runs):
        return f"{t.impl} @ {t.source.machine} {t.source.commit[:8]}".rstrip()
    return f"{t.impl} @ {t.source.machine}"


def _png(fig: Figure) -> bytes:
    buffer = io.BytesIO()
    FigureCanvasAgg(fig).print_png(buffer)
    return buffer.getvalue()
