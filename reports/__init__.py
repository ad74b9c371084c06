"""rnnbench.reports — renders conformance and benchmark results to Markdown and HTML.

    results = load_inputs(["conformance.json", "bench.json", ".asv/results"])
    render_report(results, "out/")            # out/report.md, out/index.html, out/figures/
    changes = compare_runs(base.timings, head.timings, threshold=0.05)

Names are imported on first use, so `rnnbench compare` does not pay for importing matplotlib.
"""
import importlib

_EXPORTS = {
    "regression": ("Change", "compare_runs", "format_changes", "gating", "parse_threshold"),
    "load": ("detect_format", "load_file", "load_inputs"),
    "records": ("Check", "Duplicate", "Results", "Source", "Timing", "Unplaced"),
    "render": ("render_report",),
    "runs": ("Run", "Runs", "side_by_side"),
}
_MODULE_OF = {name: module for module, names in _EXPORTS.items() for name in names}
__all__ = sorted(_MODULE_OF)


def __getattr__(name):
    if name not in _MODULE_OF:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_MODULE_OF[name]}"), name)
