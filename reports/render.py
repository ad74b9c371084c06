"""Writing a report: `report.md` (tabulate), a self-contained `index.html`, and the figures.

Escaping is done here, once, for every string that goes out: HTML-escaped in index.html, and in
report.md HTML-escaped plus Markdown's own metacharacters backslash-escaped, so a name such as
`<script>alert(1)</script>` is shown as text and never becomes markup or a link. The HTML loads
nothing from the network (plots are inline base64 PNG) and carries a Content-Security-Policy that
forbids scripts outright.

On a phone the page keeps its width: each table scrolls inside its own box, long words break,
and every plot is also drawn in a narrow layout that the page picks below NARROW_SCREEN_PX.
"""
from __future__ import annotations

import base64
import datetime
import html
import os
import re
from pathlib import Path

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
NARROW_SCREEN_PX = 700
_MARKDOWN_SPECIAL = re.compile(r"([\\`*_{}\[\]|~])")
# Cell texts that get a colour in HTML (first word of the cell).
_CELL_CLASSES = {"conforms": "good", "conforms:": "good", "ok": "good", "DOES": "bad",
                 "failed": "bad", "failed:": "bad", "error": "bad", "error:": "bad",
                 "could": "bad", "NON-CONFORMING": "bad", "NON-CONFORMING:": "bad",
                 "not": "muted", "≈": "muted", "noisy": "warn", "noisy;": "warn"}
_CALLOUT_CLASSES = {"warning": "warning", "note": "info"}
_CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'"
_CSS = f"""
body {{ font-family: system-ui, sans-serif; margin: 0 auto; max-width: 1400px; padding: 0 1.5em;
       color: #222; overflow-wrap: anywhere; }}
h1 {{ margin-bottom: 0.2em; }} h2 {{ border-bottom: 1px solid #ccc; margin-top: 2em; }}
nav a {{ margin-right: 1em; display: inline-block; }}
.scroll {{ overflow-x: auto; max-width: 100%; }}
table {{ border-collapse: collapse; font-size: 13px; margin: 0.3em 0 1em; }}
th, td {{ border: 1px solid #ccc; padding: 3px 6px; text-align: left; vertical-align: top; }}
td {{ min-width: 4em; max-width: 36em; overflow-wrap: break-word; }}
th {{ background: #f2f2f2; white-space: nowrap; }}
td.good {{ background: #e3f4e3; }} td.bad {{ background: #fbe1e1; }}
td.warn {{ background: #fff3cd; }} td.muted {{ color: #555; }}
p.note {{ color: #555; font-size: 13px; margin: 0; }}
p.callout {{ padding: 0.5em 0.8em; border-left: 4px solid; margin: 0.6em 0; }}
p.warning {{ background: #fff3cd; border-color: #d39e00; }}
p.info {{ background: #e8f0fb; border-color: #5b8bd0; }}
figure {{ margin: 1em 0; }} figure img {{ max-width: 100%; height: auto; border: 1px solid #eee; }}
figcaption {{ font-size: 13px; color: #555; }}
@media (max-width: {NARROW_SCREEN_PX}px) {{
  body {{ padding: 0 0.6em; }} h1 {{ font-size: 1.5em; }} h2 {{ font-size: 1.25em; }}
  table {{ font-size: 12px; width: max-content; }} td {{ max-width: 16em; }}
  table.fit {{ width: auto; }}
  p.callout {{ font-size: 0.9em; padding: 0.35em 0.6em; }}
}}
"""


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
    """The report as one self-contained HTML page: inline CSS, inline PNG plots, no scripts.
    `narrow` holds the plots' phone layouts, shown on screens below NARROW_SCREEN_PX."""
    nav = " ".join(f'<a href="#s{i}">{_h(s.title)}</a>' for i, s in enumerate(sections))
    parts = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
             f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">',
             '<meta name="viewport" content="width=device-width, initial-scale=1">',
             f"<title>{_h(TITLE)}</title><style>{_CSS}</style></head><body>",
             f"<h1>{_h(TITLE)}</h1><p class=\"note\">{_h(subtitle)}</p><nav>{nav}</nav>"]
    for i, section in enumerate(sections):
        parts.append(f'<section id="s{i}"><h2>{_h(section.title)}</h2>')
        for block in section.blocks:
            if isinstance(block, Table):
                parts.append(_html_table(block))
            elif isinstance(block, PlotRef):
                if block.name in plots:
                    parts.append(_html_figure(plots[block.name], (narrow or {}).get(block.name)))
            elif isinstance(block, Callout):
                parts.append(f'<p class="callout {_CALLOUT_CLASSES[block.level]}"><strong>'
                             f"{_h(block.level.capitalize())}:</strong> {_h(block.text)}</p>")
            else:
                parts.append(f"<p>{_h(block)}</p>")
        parts.append("</section>")
    parts.append("</body></html>")
    return "\n".join(parts)


def md_escape(text: str) -> str:
    """Text safe to put anywhere in Markdown: no raw HTML, no markup, no table breaks."""
    text = html.escape(str(text), quote=False)
    return _MARKDOWN_SPECIAL.sub(r"\\\1", " ".join(text.splitlines()))


def _h(text) -> str:
    return html.escape(str(text), quote=True)


def _html_figure(plot: Plot, narrow: Plot | None) -> str:
    source = (f'<source media="(max-width: {NARROW_SCREEN_PX}px)" srcset="{_data_url(narrow)}">'
              if narrow else "")
    return (f'<figure><picture>{source}<img src="{_data_url(plot)}" alt="{_h(plot.title)}">'
            f"</picture><figcaption>{_h(plot.title)}</figcaption></figure>")


def _data_url(plot: Plot) -> str:
    return "data:image/png;base64," + base64.b64encode(plot.png).decode("ascii")


def _html_table(table: Table) -> str:
    head = "".join(f"<th>{_h(h)}</th>" for h in table.headers)
    body = "".join("<tr>" + "".join(_html_cell(c) for c in row) + "</tr>" for row in table.rows)
    note = f'<p class="note">{_h(table.note)}</p>' if table.note else ""
    css = ' class="fit"' if table.fit else ""
    return (f"<h3>{_h(table.title)}</h3>{note}<div class=\"scroll\"><table{css}><thead><tr>{head}"
            f"</tr></thead><tbody>{body}</tbody></table></div>")


def _html_cell(text: str) -> str:
    words = str(text).split(maxsplit=1)
    css = _CELL_CLASSES.get(words[0]) if words else None
    return f'<td class="{css}">{_h(text)}</td>' if css else f"<td>{_h(text)}</td>"


def _subtitle() -> str:
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return f"Generated {now} by rnnbench {rnnbench.__version__}."
