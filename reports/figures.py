"""The report's plots, drawn with matplotlib's object API on the Agg canvas and kept as PNG bytes.

PNG rather than SVG so that no text from an input ever reaches the HTML as markup: names drawn
into a figure end up as pixels. Each function returns None when the data has nothing to show.
Only `matplotlib.figure.Figure` is used, never pyplot, so rendering a report changes no global
matplotlib state of the caller.
"""
from __future__ import annotations

import io
import itertools
from dataclasses import dataclass

from matplotlib import ticker
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from rnnbench.reports import analysis
from rnnbench.reports.model import Results, Timing
from rnnbench.reports.units import seconds
from rnnbench.results import BASELINE

DPI = 100
WIDTH_IN = 11.0           # the HTML shows figures at most this wide (CSS max-width: 100%)
_NOT_APPLICABLE = "#d0d0d0"
PLOT_NAMES = ("conformance", "speedup", "devices", "scaling")   # every plot all_plots may draw


@dataclass(frozen=True)
class Plot:
    """One rendered figure: a file-safe name, a title (also the alt text) and its PNG."""

    name: str
    title: str
    png: bytes


def all_plots(results: Results, row_label) -> dict[str, Plot]:
    """Every plot the data supports, by name; `row_label(check)` names heat-map rows."""
    plots = [conformance_heatmap(results, row_label), speedup_chart(results.timings),
             scaling_chart(results.timings), device_chart(results.timings)]
    return {p.name: p for p in plots if p is not None}


def conformance_heatmap(results: Results, row_label) -> Plot | None:
    """Pass fraction per implementation x kind and per implementation x check category."""
    if not results.checks:
        return None
    panels = [("by kind", lambda c: c.kind), ("by check category", lambda c: c.category)]
    rows = list(dict.fromkeys(row_label(c) for c in results.checks))
    widths = [len({col(c) for c in results.checks}) for _, col in panels]
    fig = Figure(figsize=(WIDTH_IN, 1.6 + 0.45 * len(rows)), dpi=DPI, layout="constrained")
    axes = fig.subplots(1, 2, width_ratios=[max(w, 1) for w in widths], sharey=True)
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
    fig.colorbar(image, ax=axes, label="passed / applicable", shrink=0.8)
    return Plot("conformance",
                "Conformance: passed / applicable checks (grey: not checked or not supported)",
                _png(fig))


def speedup_chart(timings: list[Timing]) -> Plot | None:
    """Speed-up over the baseline per workload: one panel per (metric, device), a bar per impl.

    Bars start at 1 (the baseline) and go up for faster, down for slower, on a log scale.
    """
    table = analysis.speedups(timings)
    rows = [(t, table[(analysis.comparison_group(t), t.impl)]) for t in timings
            if (analysis.comparison_group(t), t.impl) in table and t.impl != BASELINE]
    if not rows:
        return None
    metrics = list(dict.fromkeys(t.metric for t, _ in rows))
    devices = list(dict.fromkeys(t.device for t, _ in rows))
    machines = {t.source.machine for t, _ in rows}
    names = list(dict.fromkeys(_bar_label(t, machines) for t, _ in rows))
    colours = {name: f"C{i % 10}" for i, name in enumerate(names)}   # one colour per impl
    fig = Figure(figsize=(WIDTH_IN, 0.5 + 3.2 * len(metrics)), dpi=DPI, layout="constrained")
    axes = fig.subplots(len(metrics), len(devices), squeeze=False)
    for (m, metric), (d, device) in itertools.product(enumerate(metrics), enumerate(devices)):
        ax = axes[m][d]
        cell = [(t, s) for t, s in rows if t.metric == metric and t.device == device]
        workloads = list(dict.fromkeys(t.workload for t, _ in cell))
        series = [n for n in names if any(_bar_label(t, machines) == n for t, _ in cell)]
        width = min(0.8 / max(len(series), 1), 0.25)
        for k, name in enumerate(series):
            points = {t.workload: s for t, s in cell if _bar_label(t, machines) == name}
            offset = (k - (len(series) - 1) / 2) * width
            xs = [i + offset for i, w in enumerate(workloads) if w in points]
            ys = [points[w] for w in workloads if w in points]
            bars = ax.bar(xs, [y - 1 for y in ys], width, bottom=1, label=name, color=colours[name])
            ax.bar_label(bars, [f"{y:.2f}x" for y in ys], fontsize=7)
        ax.axhline(1.0, color="black", linewidth=0.8)
        ax.set_yscale("log")
        # Symmetric around 1 so faster and slower look alike, with room for the labels.
        reach = max(max(s, 1 / s) for _, s in cell) ** 1.25 if cell else 2.0
        ax.set_ylim(1 / max(reach, 1.5), max(reach, 1.5))
        _log_ticks(ax.yaxis, lambda v: f"{v:g}x")
        ax.set_xlim(-0.6, len(workloads) - 0.4)
        ax.set_xticks(range(len(workloads)), workloads, rotation=25, ha="right", fontsize=8)
        ax.set_title(f"{metric} on {device or 'unknown device'}", fontsize=10)
        ax.set_ylabel(f"speed-up over {BASELINE}")
        ax.legend(fontsize=7)
    return Plot("speedup",
                f"Speed-up over {BASELINE} per workload (> 1 is faster; log scale)",
                _png(fig))


def scaling_chart(timings: list[Timing]) -> Plot | None:
    """Median time against sequence length, batch and hidden size where the data has series."""
    series = analysis.scaling_series(timings)
    if not series:
        return None
    panels = list(dict.fromkeys((s.axis, s.metric, s.device) for s in series))
    cols = min(len(panels), 2)
    rows = (len(panels) + cols - 1) // cols
    fig = Figure(figsize=(WIDTH_IN, 0.5 + 3.6 * rows), dpi=DPI, layout="constrained")
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


def device_chart(timings: list[Timing]) -> Plot | None:
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
    fig = Figure(figsize=(WIDTH_IN, 1.5 + 0.32 * len(pairs)), dpi=DPI, layout="constrained")
    ax = fig.subplots()
    ys = range(len(pairs))
    for offset, family, name in ((-0.2, "cpu", "CPU"), (0.2, "cuda", "GPU (cuda)")):
        ax.barh([y + offset for y in ys], [v[family][1] for v in pairs.values()], 0.4, label=name)
    ax.set_xscale("log")
    _log_ticks(ax.xaxis, seconds)
    ax.set_yticks(list(ys), labels, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("median time (log scale)")
    ax.legend(fontsize=8)
    return Plot("devices", "CPU and GPU side by side (median time, shorter is faster)", _png(fig))


def _log_ticks(axis, text) -> None:
    """Ticks at 1, 2 and 5 per decade labelled by `text(value)`: readable over a few decades."""
    axis.set_major_locator(ticker.LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    axis.set_major_formatter(ticker.FuncFormatter(lambda value, _: text(value)))
    axis.set_minor_formatter(ticker.NullFormatter())


def _bar_label(t: Timing, machines: set[str]) -> str:
    return f"{t.impl} @ {t.source.machine}" if len(machines) > 1 else t.impl


def _png(fig: Figure) -> bytes:
    buffer = io.BytesIO()
    FigureCanvasAgg(fig).print_png(buffer)
    return buffer.getvalue()
