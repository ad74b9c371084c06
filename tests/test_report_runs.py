"""Runs stay apart in the report, and its figures read: two results files are two runs, in every
table and figure, in date order; log axes never print labels on top of each other; a speed-up
is drawn filled only where its interval says it is significant."""
from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest
from matplotlib.figure import Figure

from rnnbench.cli import main
from rnnbench.reports import figures
from rnnbench.reports.load import load_inputs
from rnnbench.reports.runs import Runs
from tests.test_report_summary import table

FIXTURES = Path(__file__).parent / "report_fixtures"
ENVIRONMENT = {"rnnbench": "0.1.0", "commit": "3" * 40, "hostname": "box", "cpu": "Test CPU",
               "cores": 2, "threads": 2, "torch": "2.13.0", "gpu": None}


def result(impl, workload, median_s, ratio=None, ci=None):
    verdict = None if ci is None else ("within_noise" if ci[0] <= 1 <= ci[1]
                                       else "faster" if ci[0] > 1 else "slower")
    return {"impl": impl, "kind": "rnn", "workload": workload, "device": "cpu",
            "dtype": "float32", "metric": "forward", "status": "ok", "median_s": median_s,
            "iqr_s": median_s / 50, "repeats": 9, "vs_native": ratio, "vs_native_ci": ci,
            "vs_native_verdict": verdict}


def bench_file(path: Path, date: str, results: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"schema": "rnnbench.bench/2", "device": "cpu",
                                "environment": {**ENVIRONMENT, "date": date},
                                "results": results}))
    return path


@pytest.fixture
def two_runs_of_one_commit(tmp_path):
    """Two bench files of the same commit on the same machine, the later one given first."""
    later = bench_file(tmp_path / "b" / "bench.json", "2026-03-01T12:00:00",
                       [result("native", "w", 1e-3), result("eager", "w", 2e-3, 0.5, [0.4, 0.6])])
    earlier = bench_file(tmp_path / "a" / "bench.json", "2026-03-01T09:00:00",
                         [result("native", "w", 1e-3), result("eager", "w", 1e-3, 1.0, [0.9, 1.1])])
    return later, earlier


FIRST, SECOND = "box 2026-03-01 09:00 (a/bench.json)", "box 2026-03-01 12:00 (b/bench.json)"


def test_two_bench_files_of_one_commit_are_two_runs_in_date_order(tmp_path, two_runs_of_one_commit):
    out = tmp_path / "out"
    assert main(["report", *map(str, two_runs_of_one_commit), "--out", str(out)]) == 0
    page = (out / "index.html").read_text()
    rows = table(page, "Workload w")
    # columns: implementation, run, device, ...: every row says its run, earlier run first
    assert [row[:2] for row in rows] == [["native", FIRST], ["eager", FIRST],
                                         ["native", SECOND], ["eager", SECOND]]
    assert table(page, f"Who conforms, who is fastest: {FIRST}")[1][2].startswith("≈ native")
    assert table(page, f"Who conforms, who is fastest: {SECOND}")[1][2].startswith("0.50x slower")
    across = table(page, "Timings across runs (rnnbench 0.1.0)")
    assert across[1][2:] == ["1 ms; ≈ native, within noise (0.90–1.10)",
                             "2 ms; 0.50x (0.40–0.60)"]


def test_a_run_without_a_recorded_time_is_named_by_its_files_time(tmp_path):
    import os

    path = bench_file(tmp_path / "old.json", "", [result("native", "w", 1e-3)])
    os.utime(path, (1767225600, 1767225600))         # 2026-01-01 00:00 UTC
    results = load_inputs([path])
    assert Runs(results).of(results.sources[0]) == "box 2026-01-01 00:00 (old.json)"


def test_the_speed_up_chart_draws_each_run_apart(two_runs_of_one_commit):
    results = load_inputs(two_runs_of_one_commit)
    points = figures.speedup_points(results.timings, Runs(results))
    assert [p.series for p in points] == [f"eager @ {FIRST}", f"eager @ {SECOND}"]
    assert points[0].colour == points[1].colour           # one implementation
    assert points[0].marker != points[1].marker           # two runs


def drawn(monkeypatch, chart, *args) -> Figure:
    """The figure `chart` draws, before it becomes PNG bytes."""
    kept = []
    real = figures._png
    monkeypatch.setattr(figures, "_png", lambda fig: kept.append(fig) or real(fig))
    assert chart(*args) is not None
    return kept[0]


def test_markers_are_filled_only_where_the_interval_excludes_one(tmp_path, monkeypatch):
    path = bench_file(tmp_path / "b.json", "2026-03-01T09:00:00", [
        result("native", "w", 1e-3), result("slow", "w", 2e-3, 0.5, [0.4, 0.6]),
        result("even", "w", 1e-3, 1.0, [0.9, 1.1]), result("unsure", "w", 0.5e-3, 2.0)])
    results = load_inputs([path])
    fig = drawn(monkeypatch, figures.speedup_chart, results.timings, Runs(results))
    faces = {round(line.get_xdata()[0], 3): line.get_markerfacecolor()
             for line in fig.axes[0].lines if line.get_marker() not in ("None", None, "")
             and len(line.get_xdata()) == 1}
    assert faces[0.5] != "white"                   # significant: filled
    assert faces[1.0] == "white"                   # within noise: hollow
    assert faces[2.0] == "white"                   # no interval: hollow
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert "filled: 95% interval excludes 1 (significant)" in legend


def visible_labels(fig: Figure, axis_name: str):
    renderer = fig.canvas.get_renderer()
    for ax in fig.axes:
        if not ax.get_visible():
            continue
        axis = ax.xaxis if axis_name == "x" else ax.yaxis
        labels = [t for t in axis.get_ticklabels(minor=False) + axis.get_ticklabels(minor=True)
                  if t.get_text() and t.get_visible()]
        lo, hi = sorted(axis.get_view_interval())
        shown = [t for t in labels if lo <= (t.get_position()[0] if axis_name == "x"
                                             else t.get_position()[1]) <= hi]
        yield ax, [t.get_window_extent(renderer) for t in shown]


@pytest.mark.parametrize("layout", [figures.WIDE, figures.NARROW], ids=["wide", "narrow"])
@pytest.mark.parametrize("reach", [1.3, 8, 300], ids=["narrow-range", "medium-range", "wide-range"])
def test_log_axis_labels_never_overlap(tmp_path, monkeypatch, layout, reach):
    ratios = [1 / reach, 0.8, 1.3, reach]
    path = bench_file(tmp_path / "b.json", "2026-03-01T09:00:00", [result("native", "w", 1e-3)] + [
        result(f"impl{i}", "w", 1e-3 / r, r, [r * 0.95, r * 1.05]) for i, r in enumerate(ratios)])
    results = load_inputs([path])
    fig = drawn(monkeypatch, figures.speedup_chart, results.timings, Runs(results), layout)
    for _, boxes in visible_labels(fig, "x"):
        assert len(boxes) >= 2, "an axis needs two labels to be read"
        for a, b in itertools.combinations(boxes, 2):
            assert not a.overlaps(b), (a, b)


@pytest.mark.parametrize("layout", [figures.WIDE, figures.NARROW], ids=["wide", "narrow"])
def test_the_fixtures_figures_print_no_label_on_another(monkeypatch, layout):
    results = load_inputs([FIXTURES])
    named = Runs(results)
    for chart in (figures.speedup_chart, figures.device_chart):
        fig = drawn(monkeypatch, chart, results.timings, named, layout)
        for axis_name in ("x", "y"):
            for _, boxes in visible_labels(fig, axis_name):
                for a, b in itertools.combinations(boxes, 2):
                    assert not a.overlaps(b), (chart.__name__, axis_name, a, b)
