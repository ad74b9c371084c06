"""Writing a report: `report.md` (tabulate), a self-contained `index.html`, and the figures.

Escaping is done here, once, for every string that goes out: index.html is a jinja2 template
(templates/report.html.j2) that autoescapes every value, and report.md HTML-escapes plus
backslash-escapes Markdown's own metacharacters (`md_escape`), so a name such as
`<script>alert(1)</script>` is shown as text and never becomes markup or a link. The HTML loads
nothing from the network (plots are inline base64 PNG) and carries a Content-Security-Policy that
forbids scripts outright.

On a phone the page keeps its width: each table scrolls inside its own box, long words break,
and every plot is also drawn in a narrow layout that the page picks below NARROW_SCREEN_PX.
"""
from __future__ import annotations

import base64
import datetime
import functools
import html
import os
import re
from pathlib import Path

import jinja2
from tabulate import tabulate

import rnnbench
from rnnbench.errors import UsageError
from rnnbench.reports.content import (Callout, PlotRef, Section, Table, build_sections,
                                      check_row_label)
from rnnbench.reports.figures import NARROW, PLOT_NAMES, Plot, all_plots
from rnnbench.reports.load import load_inputs
from rnnbench.reports.records import Results
from rnnbench.documents import write_atomic

TITLE = "rnnbench report"
FIGURE_DIR = "figures"
TEMPLATES = Path(__file__).parent / "templates"
NARROW_SCREEN_PX = 700
_MARKDOWN_SPECIAL = re.compile(r"([\\`*_{}\[\]|~])")
# Cell texts that get a colour in HTML (first word of the cell).
_CELL_CLASSES = {"conforms": "good", "conforms:": "good", "ok": "good", "DOES": "bad",
                 "failed": "bad", "failed:": "bad", "error": "bad", "error:": "bad",
                 "could": "bad", "NON-CONFORMING": "bad", "NON-CONFORMING:": "bad",
                 "not": "muted", "≈": "muted", "noisy": "warn", "noisy;": "warn"}
_CALLOUT_CLASSES = {"warning": "warning", "note": "info"}


def render_report(inputs, out_dir: str | os.PathLike) -> dict[str, Path]:
    """Write report.md, index.html and figures/*.png under `out_dir`; return the paths by name.

    `inputs` is a `Results` or an iterable of input paths (files or folders, see
    `rnnbench.reports.load`). Inputs are all read before anything is written, so a bad input
    raises UsageError and leaves `out_dir` untouched.
    """
    results = inputs if isinstance(inputs, Results) else load_inputs(inputs)
    sections = build_sections(results)
    plots = all_plots(results, check_row_label(results))
    narrow = all_plots(results, check_row_label(results), NARROW)
    out = Path(out_dir)
    written = {}
    try:
        (out / FIGURE_DIR).mkdir(parents=True, exist_ok=True)
        for name in PLOT_NAMES:     # a plot this data does not support must not linger
            (out / FIGURE_DIR / f"{name}.png").unlink(missing_ok=True)
        for plot in plots.values():
            written[plot.name] = write_atomic(out / FIGURE_DIR / f"{plot.name}.png", plot.png)
        subtitle = _subtitle()
        written["report.md"] = write_atomic(out / "report.md",
                                      render_markdown(sections, plots, subtitle).encode())
        written["index.html"] = write_atomic(out / "index.html",
                                       render_html(sections, plots, subtitle, narrow).encode())
    except OSError as exc:
        raise UsageError(f"cannot write the report to {out}: {exc.strerror or exc}") from None
    return written


def render_markdown(sections: list[Section], plots: dict[str, Plot], subtitle: str = "") -> str:
    """The report as GitHub-flavoured Markdown; plots are linked from FIGURE_DIR."""
    lines = [f"# {TITLE}", "", subtitle, ""]
    for section in sections:
        lines += [f"## {md_escape(section.title)}", ""]
        for block in section.blocks:
            if isinstance(block, Table):
                lines += [f"### {md_escape(block.title)}", ""]
                if block.note:
                    lines += [md_escape(block.note), ""]
                lines += [tabulate([[md_escape(c) for c in row] for row in block.rows],
                                   [md_escape(h) for h in block.headers], tablefmt="github",
                                   disable_numparse=True), ""]
            elif isinstance(block, PlotRef):
                if block.name in plots:
                    plot = plots[block.name]
                    lines += [f"![{md_escape(plot.title)}]({FIGURE_DIR}/{plot.name}.png)", ""]
            elif isinstance(block, Callout):
                lines += [f"> **{block.level.capitalize()}:** {md_escape(block.text)}", ""]
            else:
                lines += [md_escape(block), ""]
    return "\n".join(lines)


def render_html(sections: list[Section], plots: dict[str, Plot], subtitle: str = "",
                narrow: dict[str, Plot] | None = None) -> str:
    """The report as one self-contained HTML page (templates/report.html.j2): inline CSS,
    inline PNG plots, no scripts. `narrow` holds the plots' phone layouts, shown on screens
    below NARROW_SCREEN_PX."""
    return _templates().get_template("report.html.j2").render(
        title=TITLE, subtitle=subtitle, sections=sections, plots=plots, narrow=narrow or {},
        narrow_screen_px=NARROW_SCREEN_PX, callout_classes=_CALLOUT_CLASSES)


@functools.cache
def _templates() -> jinja2.Environment:
    """The HTML templates, every value autoescaped; tests tell the content's blocks apart."""
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), autoescape=True,
                             undefined=jinja2.StrictUndefined)
    env.tests.update(table=lambda block: isinstance(block, Table),
                     plot=lambda block: isinstance(block, PlotRef),
                     callout=lambda block: isinstance(block, Callout))
    env.filters.update(cell_class=_cell_class, data_url=_data_url)
    return env


def md_escape(text: str) -> str:
    """Text safe to put anywhere in Markdown: no raw HTML, no markup, no table breaks."""
    text = html.escape(str(text), quote=False)
    return _MARKDOWN_SPECIAL.sub(r"\\\1", " ".join(text.splitlines()))


def _data_url(plot: Plot) -> str:
    return "data:image/png;base64," + base64.b64encode(plot.png).decode("ascii")


def _cell_class(text: str) -> str | None:
    """The CSS class of a table cell, by its first word (a verdict, a status, a note)."""
    words = str(text).split(maxsplit=1)
    return _CELL_CLASSES.get(words[0]) if words else None


def _subtitle() -> str:
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return f"Generated {now} by rnnbench {rnnbench.__version__}."
