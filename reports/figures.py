"""The report's plots, drawn with matplotlib's object API on the Agg canvas and kept as PNG bytes.

PNG rather than SVG so that no text from an input ever reaches the HTML as markup: names drawn
into a figure end up as pixels. Each function returns None when the data has nothing to show.
Only `matplotlib.figure.Figure` is used, never pyplot, so rendering a report changes no global
matplotlib state of the caller (mathtext is off only while the plots are drawn).

Every plot has two layouts: WIDE for a desktop page and report.md, panels side by side, and
NARROW for a phone, panels stacked in one column at a width whose text stays readable there.

Results are keyed by run (`rnnbench.reports.runs`): where the inputs hold several runs, each
run's results are drawn apart (their own marker, bar or line) and the legend names the run.
Log axes label only the ticks their length has room for (`_log_ticks`).
"""
from __future__ import annotations

import io
import math
import textwrap
from dataclasses import dataclass

from matplotlib import rc_context, ticker
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.font_manager import FontProperties
from matplotlib.lines import Line2D
from matplotlib.textpath import TextToPath

from rnnbench.reports import analysis
from rnnbench.reports.content import category_title
from rnnbench.reports.records import Results, Timing
from rnnbench.reports.runs import Runs, run_of
from rnnbench.reports.units import seconds
from rnnbench.documents import BASELINE

_NOT_APPLICABLE = "#d0d0d0"
# One marker per run where a plot has several (the colours tell implementations apart).
_RUN_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "<", ">", "h")
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
    named = Runs(results)
    with rc_context({"text.parse_math": False}):
        plots = [conformance_heatmap(results, row_label, layout),
                 speedup_chart(results.timings, named, layout),
                 scaling_chart(results.timings, named, layout),
                 device_chart(results.timings, named, layout)]
    return {p.name: p for p in plots if p is not None}


def conformance_heatmap(results: Results, row_label, layout: Layout = WIDE) -> Plot | None:
    """Pass fraction per implementation x kind and per implementation x check category."""
    if not results.checks:
        return None
    panels = [("by kind", lambda c: c.kind),
              ("by check category", lambda c: category_title(c.category))]
    checks = Runs(results).chronological(results.checks)
    rows = list(dict.fromkeys(row_label(c) for c in checks))
    # a row names its run where an implementation has several: two lines on a phone
    shown = [textwrap.fill(r, 48 if layout.columns > 1 else 28, break_on_hyphens=False)
             for r in rows]
    widths = [len({col(c) for c in results.checks}) for _, col in panels]
    if layout.columns > 1:
        fig = Figure(figsize=(layout.width_in, 1.6 + 0.45 * len(rows)), dpi=layout.dpi,
                     layout="constrained")
        axes = fig.subplots(1, 2, width_ratios=[max(w, 1) for w in widths], sharey=True)
    else:
        fig = Figure(figsize=(layout.width_in, 3.4 + 1.1 * len(rows)), dpi=layout.dpi,
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
        ax.set_yticks(range(len(rows)), shown, fontsize=8 if layout.columns > 1 else 7)
        ax.set_title(title, fontsize=10)
    fig.colorbar(image, ax=axes, label="passed / applicable", shrink=0.8,
                 location="right" if layout.columns > 1 else "bottom")
    return Plot("conformance",
                "Conformance: passed / applicable checks (grey: not checked or not supported)",
                _png(fig))


@dataclass(frozen=True)
class Point:
    """One speed-up of the speed-up chart: its timing, its ratio and how it is drawn."""

    timing: Timing
    ratio: analysis.Ratio
    series: str        # the implementation, with its run where the chart has several
    colour: str        # the implementation's
    marker: str        # the run's

    @property
    def significant(self) -> bool:
        """Drawn filled: the input's 95% interval excludes 1. Hollow: within noise, not judged
        (a busy machine, bimodal samples), or no interval to tell."""
        return (self.ratio.ci is not None and not self.ratio.not_judged
                and self.ratio.verdict in ("faster", "slower"))


def speedup_points(timings: list[Timing], named: Runs) -> list[Point]:
    """Every speed-up over the baseline a chart draws (non-conforming results have none), one
    colour per implementation and, where there are several runs, one marker per run."""
    table = analysis.speedups(timings)
    found = [(t, analysis.ratio_of(table, t)) for t in timings if t.impl != BASELINE]
    found = [(t, r) for t, r in found if r is not None]
    runs = [run for run in named.all if any(run_of(t.source) == run for t, _ in found)]
    impls = list(dict.fromkeys(t.impl for t, _ in sorted(
        found, key=lambda item: runs.index(run_of(item[0].source)))))
    colours = {impl: f"C{i % 10}" for i, impl in enumerate(impls)}
    markers = {run: _RUN_MARKERS[i % len(_RUN_MARKERS)] for i, run in enumerate(runs)}
    return sorted((Point(t, r, f"{t.impl} @ {named.of(t.source)}" if len(runs) > 1 else t.impl,
                         colours[t.impl], markers[run_of(t.source)]) for t, r in found),
                  key=lambda p: (impls.index(p.timing.impl), runs.index(run_of(p.timing.source))))


def speedup_chart(timings: list[Timing], named: Runs, layout: Layout = WIDE) -> Plot | None:
    """Speed-up over the baseline per workload, with its 95% interval where the input has one:
    one panel per (metric, device), a row per workload, a marker per implementation and run.

    A filled marker's interval excludes 1 (significant); a hollow one is within noise, not
    judged (a busy machine, bimodal samples) or has no interval. Non-conforming results have no
    speed-up and are not drawn. Log scale, 1 (the baseline) marked.
    """
    points = speedup_points(timings, named)
    if not points:
        return None
    panels = list(dict.fromkeys((p.timing.metric, p.timing.device) for p in points))
    series = list(dict.fromkeys(p.series for p in points))
    columns = min(layout.columns, len(panels))
    grid_rows = (len(panels) + columns - 1) // columns
    longest = max(len({p.timing.workload for p in points
                       if (p.timing.metric, p.timing.device) == panel}) for panel in panels)
    height = 0.9 + (0.3 + 0.06 * len(series)) * longest
    fig = Figure(figsize=(layout.width_in, 0.8 + height * grid_rows + 0.17 * len(series)),
                 dpi=layout.dpi, layout="constrained")
    axes = fig.subplots(grid_rows, columns, squeeze=False).ravel()
    for ax, (metric, device) in zip(axes, panels):
        cell = [p for p in points if (p.timing.metric, p.timing.device) == (metric, device)]
        workloads = list(dict.fromkeys(p.timing.workload for p in cell))
        shown = [name for name in series if any(p.series == name for p in cell)]
        step = min(0.8 / max(len(shown), 1), 0.2)
        for p in cell:
            r = p.ratio
            y = (workloads.index(p.timing.workload)
                 + (shown.index(p.series) - (len(shown) - 1) / 2) * step)
            if r.ci:  # drawn where it lies: a percentile interval need not hold the median
                ax.plot(r.ci, [y, y], "|-", color=p.colour, linewidth=1, markersize=4)
            ax.plot([r.value], [y], p.marker, color=p.colour, markersize=5,
                    markerfacecolor=p.colour if p.significant else "white")
        ax.axvline(1.0, color="black", linewidth=0.8)
        ax.set_xscale("log")
        values = [v for p in cell for v in (p.ratio.value, *(p.ratio.ci or ()))]
        reach = max(max(v, 1 / v) for v in values) ** 1.15
        ax.set_xlim(1 / max(reach, 1.5), max(reach, 1.5))
        _log_ticks(ax.xaxis, lambda v: f"{v:g}x")
        ax.set_yticks(range(len(workloads)), workloads, fontsize=8)
        ax.set_ylim(len(workloads) - 0.5, -0.5)
        ax.set_title(f"{metric} on {device or 'unknown device'}", fontsize=10)
        ax.set_xlabel(f"speed-up over {BASELINE} (> 1 faster)", fontsize=8)
    for ax in axes[len(panels):]:
        ax.set_visible(False)
    # One legend for every panel, under them, so it never covers a marker: a line per series
    # (colour: implementation, marker: run), then what filled and hollow mean.
    first = {p.series: p for p in reversed(points)}
    handles = [Line2D([], [], marker=first[name].marker, linestyle="", color=first[name].colour)
               for name in series]
    handles += [Line2D([], [], marker="o", linestyle="", color="grey"),
                Line2D([], [], marker="o", linestyle="", color="grey", markerfacecolor="white")]
    labels = series + ["filled: 95% interval excludes 1 (significant)",
                       "hollow: within noise, not judged, or no interval"]
    # one column on a phone; on a page three, or two where series name their runs
    columns = 1 if layout.columns == 1 else 2 if max(map(len, series)) > 40 else 3
    fig.legend(handles, labels, loc="outside lower center", fontsize=7, ncols=columns)
    return Plot("speedup",
                f"Speed-up over {BASELINE} per workload with 95% intervals (> 1 is faster; "
                "log scale; filled markers are significant, hollow ones within noise, not "
                "judged or without an interval; non-conforming results not drawn)", _png(fig))


def scaling_chart(timings: list[Timing], named: Runs, layout: Layout = WIDE) -> Plot | None:
    """Median time against sequence length, batch and hidden size where the data has series,
    a line per series and run."""
    series = analysis.scaling_series(timings)
    if not series:
        return None
    several = len({s.path for s in series}) > 1
    panels = list(dict.fromkeys((s.axis, s.metric, s.device) for s in series))
    cols = min(len(panels), layout.columns)
    rows = (len(panels) + cols - 1) // cols
    fig = Figure(figsize=(layout.width_in, 0.5 + 3.6 * rows), dpi=layout.dpi,
                 layout="constrained")
    axes = fig.subplots(rows, cols, squeeze=False).ravel()
    sources = {t.source.path: t.source for t in timings}
    for ax, (axis, metric, device) in zip(axes, panels):
        sizes = set()
        for s in series:
            if (s.axis, s.metric, s.device) == (axis, metric, device):
                xs, ys = zip(*s.points)
                label = f"{s.label} @ {named.of(sources[s.path])}" if several else s.label
                ax.plot(xs, ys, marker="o", label=textwrap.fill(label, 60, break_on_hyphens=False))
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


def device_chart(timings: list[Timing], named: Runs, layout: Layout = WIDE) -> Plot | None:
    """CPU and GPU side by side for every (impl, workload, metric) measured on both: a bar per
    run that timed it, one colour per run (its machine and device in the legend)."""
    by_key: dict[tuple, dict] = {}
    for t in timings:
        if t.status == "ok" and t.median_s:
            by_key.setdefault((t.impl, t.workload, t.metric, t.dtype), {}).setdefault(
                run_of(t.source), t)
    families = {key: {"cuda" if t.device.startswith("cuda") else t.device for t in row.values()}
                for key, row in by_key.items()}
    pairs = {key: row for key, row in by_key.items() if {"cpu", "cuda"} <= families[key]}
    if not pairs:
        return None
    runs = [run for run in named.all if any(run in row for row in pairs.values())]
    devices = {run: next(t.device for row in pairs.values() for r, t in row.items() if r == run)
               for run in runs}
    labels = [" / ".join(key[:3]) for key in pairs]
    if layout.columns == 1:     # a phone: labels on two lines, leaving room for the bars
        labels = [textwrap.fill(label, 24, break_on_hyphens=False) for label in labels]
    per_pair = (0.16 if layout.columns > 1 else 0.28) * (len(runs) + 0.5)
    fig = Figure(figsize=(layout.width_in, 1.5 + 0.2 * len(runs) + per_pair * len(pairs)),
                 dpi=layout.dpi, layout="constrained")
    ax = fig.subplots()
    height = 0.8 / len(runs)
    for i, run in enumerate(runs):
        ys = [y + (i - (len(runs) - 1) / 2) * height
              for y, row in enumerate(pairs.values()) if run in row]
        ax.barh(ys, [row[run].median_s for row in pairs.values() if run in row], height,
                label=textwrap.fill(f"{devices[run]}: {named.label(run)}", 60,
                                          break_on_hyphens=False))
    ax.set_xscale("log")
    _log_ticks(ax.xaxis, seconds)
    ax.set_yticks(range(len(pairs)), labels, fontsize=8 if layout.columns > 1 else 7)
    ax.invert_yaxis()
    ax.set_xlabel("median time (log scale)")
    fig.legend(loc="outside lower center", fontsize=7, ncols=1)
    return Plot("devices", "CPU and GPU side by side (median time per run, shorter is faster)",
                _png(fig))


def _log_ticks(axis, text) -> None:
    """A log axis labelled by `text(value)` with only the labels its length has room for: a
    label per decade, fewer where decades are too many (matplotlib's LogLocator strides them
    by the axis' room), and at 2 and 5 between decades where those fit too."""
    axis.set_major_locator(ticker.LogLocator(base=10, subs=(1.0,)))
    axis.set_minor_locator(ticker.LogLocator(base=10, subs=(2.0, 5.0)))
    axis.set_major_formatter(ticker.FuncFormatter(lambda value, _: text(value)))
    axis.set_minor_formatter(_BetweenDecades(text))


class _BetweenDecades(ticker.Formatter):
    """The labels of the ticks at 2 and 5 between decades: shown only when the closest two
    labels of the axis (1 to 2, 5 to 10: a third of a decade apart) fit with a gap of about a
    character between them, their extent measured in the axis' font; else none, and the
    decades alone are labelled."""

    def __init__(self, text):
        self.text = text
        self.fits = False

    def set_locs(self, locs) -> None:
        super().set_locs(locs)
        lo, hi = sorted(self.axis.get_view_interval())
        shown = [v for v in [*locs, *self.axis.get_majorticklocs()] if lo <= v <= hi]
        if not 0 < lo < hi or not shown:
            self.fits = False
            return
        font = FontProperties(size=self.axis.majorTicks[0].label1.get_fontsize())
        extents = [TextToPath().get_text_width_height_descent(self.text(v), font, ismath=False)
                   for v in shown]
        horizontal = self.axis.axis_name == "x"
        # a label's extent along the axis, in points: its width on x, its height on y
        extent = max(width if horizontal else height + descent
                     for width, height, descent in extents)
        box = self.axis.axes.get_window_extent()
        points_per_pixel = 72 / self.axis.get_figure(root=True).dpi
        length = (box.width if horizontal else box.height) * points_per_pixel
        closest = length * math.log10(2) / math.log10(hi / lo)
        self.fits = closest >= extent + 0.8 * font.get_size_in_points()

    def __call__(self, value, pos=None) -> str:
        return self.text(value) if self.fits else ""


def _png(fig: Figure) -> bytes:
    buffer = io.BytesIO()
    FigureCanvasAgg(fig).print_png(buffer)
    return buffer.getvalue()
