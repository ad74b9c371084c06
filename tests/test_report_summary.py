"""The report's summary, bench/2's judgements, failures by cause, repeated inputs and the
comparison across runs, on the hand-made fixtures in tests/report_fixtures/.

The fixtures were written by hand (values chosen, not measured): runs of rnnbench 0.1.0 on
cpu-box at commit 1111… on 2026-01-01 (two conformance files, one bench file) and at 2222… on
2026-01-02 (three conformance files, one bench file), on gpu-box at 2222… (a bench file), and
one older run (old-box, rnnbench 0.0.9, schema rnnbench.bench/1, which records no time: its
file's modification time is set here). In them: `fused` does not conform (3 checks fail by a
transposed weight, 2 error in a kernel launch; at 2222… one of its timings has `conforms:
false`), `eager` was checked with the quick case list at 1111…, eager's rnn-64 timing at 2222…
is noisy, fused's rnn-64 ratio at 1111… is within noise, and cpu-box was busy at 2222… (so
none of that run's speed-ups is judged). Intervals are recomputed from the fixtures' raw
samples, as every screen computes them.
"""
from __future__ import annotations

import datetime
import html
import json
import os
import re
import shutil
import struct
from pathlib import Path

import pytest

from rnnbench.cli import main

FIXTURES = Path(__file__).parent / "report_fixtures"
NEW, OLD = "2222222222bbbbbbbbbbbbbbbbbbbbbbbbbbbbbb", "1111111111aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
# Every run named by machine, time (UTC) and file, the file by as much of its path as tells it
# apart from the others.
CPU_NEW = "cpu-box 2026-01-02 10:30 (cpu-box-new/bench-cpu.json)"
CPU_OLD = "cpu-box 2026-01-01 09:30 (cpu-box-old/bench-cpu.json)"
GPU_NEW = "gpu-box 2026-01-02 11:00 (bench-cuda.json)"
OLD_BOX = "old-box 2025-12-31 12:00 (bench-v1.json)"
EAGER_OLD = "cpu-box 2026-01-01 09:05 (cpu-box-old/conformance-eager.json)"
NATIVE_OLD = "cpu-box 2026-01-01 09:00 (cpu-box-old/conformance-native.json)"
NATIVE_NEW = "cpu-box 2026-01-02 10:00 (cpu-box-new/conformance-native.json)"
FUSED_NEW = "cpu-box 2026-01-02 10:10 (conformance-fused.json)"


def render(tmp_path, *inputs) -> dict:
    out = tmp_path / "out"
    assert main(["report", *map(str, inputs), "--out", str(out)]) == 0
    return {"md": (out / "report.md").read_text(), "html": (out / "index.html").read_text()}


def fixtures(root: Path) -> Path:
    """A copy of the fixtures, the old bench/1 file modified at 2025-12-31 12:00 UTC."""
    shutil.copytree(FIXTURES, root / "report_fixtures")
    when = datetime.datetime(2025, 12, 31, 12, tzinfo=datetime.timezone.utc).timestamp()
    os.utime(root / "report_fixtures" / "old-box" / "bench-v1.json", (when, when))
    return root / "report_fixtures"


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    root = tmp_path_factory.mktemp("summary")
    return render(root, fixtures(root))


def table(page: str, title: str) -> list[list[str]]:
    """The body rows of the HTML table under <h3>title</h3>, cell texts unescaped."""
    match = re.search(rf"<h3>{re.escape(html.escape(title))}</h3>.*?<tbody>(.*?)</tbody>",
                      page, re.S)
    assert match, f"no table {title!r}"
    return [[html.unescape(c) for c in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)]
            for row in re.findall(r"<tr>(.*?)</tr>", match.group(1), re.S)]


def row(rows, first: str, *cells) -> list[str]:
    found = [r for r in rows if r[0] == first and all(c in r for c in cells)]
    assert len(found) == 1, f"{len(found)} rows {first} {cells}: {rows}"
    return found[0]


def section(md: str, title: str) -> str:
    return md.split(f"## {title}\n", 1)[1].split("\n## ", 1)[0]


# --- summary first -----------------------------------------------------------------------------

def test_the_summary_comes_first_in_both_files(report):
    titles = re.findall(r"^## (.+)$", report["md"], re.M)
    assert titles[0] == "Summary" and titles.index("Conformance") == 1
    page = report["html"]
    assert page.index("<h2>Summary</h2>") < page.index("<h2>Conformance</h2>")
    assert page.index("Who conforms, who is fastest") < page.index("<h2>Conformance</h2>")


def test_warnings_open_the_summary_busy_machine_noisy_and_non_conforming(report):
    summary = section(report["md"], "Summary")
    before_tables = summary.split("### ", 1)[0]
    assert f"Busy machine: {CPU_NEW} when timed (other processes used 45% of 2 cores)" \
        in before_tables
    assert "Noisy: eager rnn-64 forward cpu" in before_tables
    assert "Non-conforming numbers, in no speed-up: fused rnn-64 forward cpu" in before_tables
    assert CPU_OLD not in before_tables and GPU_NEW not in before_tables   # those were quiet
    assert '<p class="callout warning"><strong>Warning:</strong> Busy machine' in report["html"]


def test_verdict_and_headline_per_implementation(report):
    rows = table(report["html"], f"Who conforms, who is fastest: {CPU_NEW}")
    # columns: implementation, conformance, speed-up over native (95% CI), notes
    assert [r[0] for r in rows] == ["fused", "native", "eager"]     # fastest first
    fused = row(rows, "fused")
    assert fused[1] == "DOES NOT CONFORM (6 of 8 checks fail, 3 causes)"
    # only lstm-64 counts: rnn-64's numbers do not conform; timed on a busy machine, the
    # twice-as-fast result is no claim
    assert fused[2] == "not judged: busy machine, 1 result"
    assert not any("faster" in cell or "slower" in cell for r in rows for cell in r)
    assert "1 timing left out: numbers do not conform" in fused[3]
    assert "fails the conformance suite" in fused[3]
    assert row(rows, "native")[1:3] == ["conforms (6 checks)", "baseline"]
    assert row(rows, "eager")[3] == "1 of 2 timings noisy"


def test_a_speed_up_whose_function_could_not_be_checked_says_so(tmp_path):
    root = fixtures(tmp_path)
    path = root / "cpu-box-new" / "conformance-fused.json"
    doc = json.loads(path.read_text())
    for result in doc["results"]:   # its names read by no rule: no numeric check could run
        if result["category"] in ("forward", "gradients") and result["outcome"] == "failed":
            result.update(diagnosis="param_names", numbers={"parameters_matched": False},
                          message="cannot match the module's parameters to torch.nn's")
    path.write_text(json.dumps(doc))
    fused = row(table(render(tmp_path, root)["html"], f"Who conforms, who is fastest: {CPU_NEW}"),
                "fused")
    assert fused[1].startswith("not a drop-in, function not checked")
    assert "its function was not checked" in fused[3]
    assert "fails the conformance suite" not in fused[3]


def test_a_quick_conformance_run_says_so(report):
    rows = table(report["html"], f"Who conforms, who is fastest: {CPU_OLD}")
    assert row(rows, "eager")[1] == "conforms, quick case list (2 checks)"
    verdicts = table(report["html"], "Verdict per implementation")
    assert row(verdicts, f"eager @ {EAGER_OLD}")[-1] == "conforms (quick case list)"
    assert row(verdicts, f"native @ {NATIVE_OLD}")[-1] == "conforms"


def interval_of(cell: str) -> tuple[float, float]:
    low, high = re.search(r"\((\d+\.\d+)[–-](\d+\.\d+)\)", cell).groups()
    return float(low), float(high)


def test_the_headline_interval_is_the_one_run_prints_for_the_same_samples(report):
    from rnnbench.commands.run import speedup_table

    rows = table(report["html"], f"Who conforms, who is fastest: {CPU_OLD}")
    # eager at 1111…: exactly half native's speed on rnn-64 and lstm-64, samples within 1%
    eager = row(rows, "eager")[2]
    assert eager.startswith("0.50x slower (") and eager.endswith("), 2 results")
    low, high = interval_of(eager)
    assert 0.48 < low <= 0.5 <= high < 0.52
    doc = json.loads((FIXTURES / "cpu-box-old" / "bench-cpu.json").read_text())
    [summary] = [line for line in speedup_table(doc["results"]).splitlines()
                 if line.startswith("eager")]
    assert interval_of(summary) == (low, high)


def test_an_old_file_without_intervals_makes_no_claim_of_certainty(report):
    rows = table(report["html"], f"Who conforms, who is fastest: {OLD_BOX}")
    assert row(rows, "eager")[2] == "0.50x (no interval in the inputs), 1 result"
    cells = table(report["html"], "Workload rnn-64")
    assert row(cells, "eager", OLD_BOX)[7] == "0.50x"


def test_what_was_measured_and_how(report):
    rows = table(report["html"], "What was measured, and how")
    # columns: run, measured, preset / case list, budget, repeats, threads, device, commit, rnnbench
    bench = row(rows, CPU_NEW, "6 timings, bench; busy")
    assert bench[2:] == ["quick", "150 ms", "5", "2", "cpu", NEW, "0.1.0"]
    conformance = row(rows, EAGER_OLD, "conformance of eager")
    assert conformance[2] == "quick case list, seed 0" and conformance[7] == OLD
    assert row(rows, NATIVE_OLD)[2] == "full case list, seed 0"
    # an old file names no preset or budget: not guessed from its workloads' defaults
    assert row(rows, OLD_BOX)[2:4] == ["not recorded", "not recorded"]
    assert row(rows, OLD_BOX)[-2:] == ["unknown", "0.0.9"]
    # one row per run, in date order
    assert [r[0] for r in rows] == [OLD_BOX, NATIVE_OLD, EAGER_OLD, CPU_OLD, NATIVE_NEW,
                                    "cpu-box 2026-01-02 10:05 (cpu-box-new/conformance-eager.json)",
                                    FUSED_NEW, CPU_NEW, GPU_NEW]


# --- bench/2's judgements in the detail --------------------------------------------------------

def test_within_noise_is_never_shown_as_a_speed_up(report):
    cells = table(report["html"], "Workload rnn-64")
    # columns: implementation, run, device, dtype, metric, median, IQR, vs native, ...
    fused = row(cells, "fused", CPU_OLD)
    assert fused[7].startswith("≈ native, within noise (")
    low, high = interval_of(fused[7])
    assert low < 1.0 < high
    assert "1.02x" not in report["html"] and "1.02x" not in report["md"]


def test_non_conforming_numbers_are_marked_and_counted_nowhere(report):
    cells = table(report["html"], "Workload rnn-64")
    fused = row(cells, "fused", CPU_NEW)
    assert fused[7] == "not counted: does not conform"
    assert fused[-2].startswith("NON-CONFORMING: forward differs from the reference")
    # fused at 2222… ran rnn-64 twice as fast as native: that ratio appears nowhere
    across = table(report["html"], "Timings across runs (rnnbench 0.1.0)")
    assert row(across, "fused rnn-64 forward")[3] == "500 µs; does not conform"    # 2222…
    assert "2.20x" not in report["html"]


def test_noisy_timings_are_flagged(report):
    cells = table(report["html"], "Workload rnn-64")
    assert row(cells, "eager", CPU_NEW)[-2] == "noisy (IQR 18% of the median)"
    assert row(cells, "eager", CPU_OLD)[-2] == ""


def test_memory_and_threads_are_shown(report):
    cells = table(report["html"], "Workload rnn-64")
    native = row(cells, "native", CPU_OLD)
    assert native[11:13] == ["1.5 MiB", "2"]


def test_machine_checks_are_listed(report):
    rows = table(report["html"], "Machine checks before timing")
    busy = row(rows, CPU_NEW)
    assert busy[2] == "yes" and busy[-1] == "other processes used 45% of 2 cores"
    assert busy[7] == "95 GFLOP/s (onednn, IQR 1.25)"   # the library that ran the peak
    assert row(rows, CPU_OLD)[7] == "95 GFLOP/s (IQR 1.25)"    # recorded before it was
    assert row(rows, GPU_NEW)[2] == "no"


# --- conformance ------------------------------------------------------------------------------

def test_failures_are_grouped_by_cause(report):
    rows = table(report["html"], "Failures by cause")
    # columns: implementation, cause, checks, outcomes, kinds, example
    assert len(rows) == 3
    transposed, names, launch = rows
    assert transposed[1] == "W used transposed (W^T instead of W) (weight_transposed)"
    assert transposed[2:5] == ["3", "3 failed", "rnn"]
    assert transposed[5].startswith("rnn forward/single-layer: output differs")
    assert names[1].endswith("(param_names)") and names[2:5] == ["1", "1 failed", "rnn"]
    # the two kernel-launch errors differ only in an address and a number: one cause
    assert launch[1] == "RuntimeError: kernel launch failed for <Fused object> at step 3"
    assert launch[2:5] == ["2", "2 error", "rnn, lstm"]
    assert "6 failing checks in 3 causes" in report["html"]


def test_the_error_inputs_category_is_not_called_errors(report):
    header = re.search(r"<h3>By check category</h3>.*?<thead>(.*?)</thead>", report["html"],
                       re.S).group(1)
    names = re.findall(r"<th>(.*?)</th>", header)
    assert "error inputs" in names and "errors" not in names
    assert "| error inputs" in report["md"]


def test_declared_features_and_parameter_names_are_shown(report):
    assert table(report["html"], "Not supported") == [
        [f"fused @ {FUSED_NEW}", "bidirectional", "declared", "not implemented in the fused kernel"]]
    assert table(report["html"], "Parameter names assumed") == [
        [f"fused @ {FUSED_NEW}", "w_ih", "weight_ih_l0"],
        [f"fused @ {FUSED_NEW}", "w_hh", "weight_hh_l0"]]


def test_a_feature_not_supported_says_where_its_lack_comes_from(tmp_path):
    # unbatched input makes this module's forward raise: observed, not declared
    target = "tests/zoo/real_code.py:ExpandStateRNN"
    main(["conform", target, "--kind", "rnn", "--check", "forward/unbatched,forward/single-layer",
          "--json", str(tmp_path / "conformance.json")])
    assert main(["report", str(tmp_path / "conformance.json"), "--out", str(tmp_path / "site")]) == 0
    [row] = table((tmp_path / "site" / "index.html").read_text(), "Not supported")
    assert row[1:3] == ["unbatched", "observed"]


# --- across runs -----------------------------------------------------------------------------

def test_runs_side_by_side_compare_only_like_with_like(report):
    timings = table(report["html"], "Timings across runs (rnnbench 0.1.0)")
    # columns: implementation, workload, metric | device | the runs in date order
    header = re.search(r"<h3>Timings across runs \(rnnbench 0.1.0\)</h3>.*?<thead>(.*?)</thead>",
                       report["html"], re.S).group(1)
    assert re.findall(r"<th>(.*?)</th>", header)[2:] == [CPU_OLD, CPU_NEW]   # gpu-box: cuda only
    device, quiet, busy = row(timings, "eager lstm-64 forward")[1:]
    assert (device, busy) == ("cpu float32", "4.4 ms; not judged: busy machine")
    assert quiet.startswith("4 ms; 0.50x (") and 0.48 < interval_of(quiet)[0] < 0.5
    assert not any("old-box" in cell for r in timings for cell in r)
    conformance = table(report["html"], "Conformance across runs (rnnbench 0.1.0)")
    assert conformance == [["native cpu", NATIVE_OLD, "conforms, 6 / 6"],
                           ["native cpu", NATIVE_NEW, "conforms, 6 / 6"]]


def test_what_was_left_out_of_the_comparison_is_said_with_the_reason(report):
    rows = {r[0]: r for r in table(report["html"], "Left out of the comparison")}
    old = next(r for why, r in rows.items() if why.startswith("the only run of rnnbench 0.0.9"))
    assert old[1:] == ["1", OLD_BOX]
    one_run = next(r for why, r in rows.items() if why.startswith("timed in one run only"))
    assert one_run[1] == "6" and f"eager rnn-64 forward cuda float32 ({GPU_NEW})" in one_run[2]
    lists = rows["conformance on another case list (quick or full) in the other runs"]
    assert lists[1] == "2" and f"eager cpu quick ({EAGER_OLD})" in lists[2]
    assert rows["conformance checked in one run only"][1:] == ["1", f"fused cpu full ({FUSED_NEW})"]


def test_one_run_has_no_comparison_section(tmp_path):
    page = render(tmp_path, FIXTURES / "cpu-box-new")
    assert "Across runs" not in page["md"] and "Who conforms, who is fastest\n" in page["md"]


# --- repeated inputs -----------------------------------------------------------------------------

def test_a_file_given_twice_or_copied_is_counted_once(tmp_path, capsys):
    bench = FIXTURES / "cpu-box-new" / "bench-cpu.json"
    copy = tmp_path / "copy-of-bench.json"
    shutil.copy(bench, copy)
    page = render(tmp_path, bench, bench, copy)
    out = capsys.readouterr().out
    assert "6 timings" in out and out.count("counted once") == 2
    assert table(page["html"], "Repeated inputs, counted once") == [
        [str(bench), str(bench), "same file"], [str(copy), str(bench), "same content"]]
    assert len(table(page["html"], "Workload rnn-64")) == 3
    assert f"{copy} repeats {bench} (same content): counted once." in page["html"]


def test_a_file_inside_a_folder_also_named_is_counted_once(tmp_path):
    folder = FIXTURES / "gpu-box-new"
    page = render(tmp_path, folder / "bench-cuda.json", folder)
    assert len(table(page["html"], "Files")) == 1
    assert table(page["html"], "Repeated inputs, counted once")[0][2] == "same file"


# --- small programmatic inputs for single rules --------------------------------------------------

def bench2(results):
    return {"schema": "rnnbench.bench/2", "environment": {"hostname": "box", "rnnbench": "0.1.0"},
            "results": results}


def result(impl, median_s, **extra):
    return {"impl": impl, "kind": "rnn", "workload": "w", "device": "cpu", "dtype": "float32",
            "metric": "forward", "status": "ok", "median_s": median_s, "iqr_s": median_s / 50,
            **extra}


def write(path: Path, doc: dict) -> Path:
    path.write_text(json.dumps(doc))
    return path


def test_a_headline_whose_interval_contains_one_is_within_noise(tmp_path):
    doc = bench2([result("native", 1e-3),
                  result("fused", 0.95e-3, vs_native_ci=[0.9, 1.16],
                         vs_native_verdict="within_noise")])
    page = render(tmp_path, write(tmp_path / "b.json", doc))
    fused = row(table(page["html"], "Who conforms, who is fastest"), "fused")
    assert fused[2] == "≈ native, within noise (0.90–1.16), 1 result"


def test_only_non_conforming_results_draw_no_speed_up_plot(tmp_path):
    doc = bench2([result("native", 1e-3), result("fused", 1e-4, conforms=False)])
    render(tmp_path, write(tmp_path / "b.json", doc))
    assert not (tmp_path / "out" / "figures" / "speedup.png").exists()
    doc["results"][1]["conforms"] = True
    render(tmp_path, write(tmp_path / "b.json", doc))
    assert (tmp_path / "out" / "figures" / "speedup.png").exists()


# --- readable on a phone ----------------------------------------------------------------------

def png_width(data: bytes) -> int:
    return struct.unpack(">I", data[16:20])[0]


def test_every_plot_has_a_phone_layout_and_every_table_its_own_scroll_box(report):
    import base64

    page = report["html"]
    figures = re.findall(r'<picture><source media="\(max-width: (\d+)px\)" '
                         r'srcset="data:image/png;base64,([^"]+)"><img src="data:image/png;'
                         r'base64,([^"]+)"', page)
    assert len(figures) == page.count("<figure>") >= 3
    for _, narrow, wide in figures:
        assert png_width(base64.b64decode(narrow)) < png_width(base64.b64decode(wide))
    assert page.count("<table") == page.count('<div class="scroll"><table')
    assert '<meta name="viewport" content="width=device-width, initial-scale=1">' in page
    assert "overflow-x: auto" in page and "figure img { max-width: 100%" in page


@pytest.mark.parametrize("extra", [
    {"vs_native_ci": [1.2]}, {"vs_native_ci": [-1, 2]}, {"vs_native_ci": [2.0, 1.0]},
    {"vs_native_ci": ["a", "b"]}, {"vs_native_verdict": "much faster"}, {"noisy": "yes"},
])
def test_malformed_judgements_are_not_believed(tmp_path, extra):
    from rnnbench.reports.load import load_file

    doc = bench2([result("native", 1e-3), result("fused", 0.5e-3, **extra)])
    fused = load_file(write(tmp_path / "b.json", doc)).timings[1]
    assert (fused.vs_native_ci, fused.vs_native_verdict, fused.noisy) == (None, None, None)


def test_declarations_are_read_from_the_results_not_from_the_documents_own_summary(tmp_path):
    from rnnbench.reports.load import load_file

    doc = json.loads((FIXTURES / "cpu-box-new" / "conformance-fused.json").read_text())
    doc.update(param_map=["w_ih", "weight_ih_l0"], not_supported_features="none",
               summary={"passed": 99})
    results = load_file(write(tmp_path / "c.json", doc))
    assert results.unplaced == [] and len(results.checks) == 8
    source = results.sources[0]
    assert source.param_map == {"w_ih": "weight_ih_l0", "w_hh": "weight_hh_l0"}
    assert source.not_supported_features == {"bidirectional": "not implemented in the fused kernel"}


def test_bimodal_samples_on_a_quiet_machine_are_not_judged(tmp_path):
    def spread(median, n):
        return [median * (1 + k / 1000) for k in range(n)]

    steady, stalled = spread(1e-3, 10), spread(0.5e-3, 6) + spread(2e-3, 4)
    doc = bench2([result("native", 1e-3, samples_s=steady),
                  result("fused", 0.5e-3, samples_s=stalled)])
    page = render(tmp_path, write(tmp_path / "b.json", doc))
    assert row(table(page["html"], "Who conforms, who is fastest"), "fused")[2] == \
        "not judged: bimodal samples, 1 result"
    fused = row(table(page["html"], "Workload w"), "fused")
    assert fused[6] == "not judged: bimodal samples" and "bimodal samples" in fused[-2]


def test_a_result_with_samples_gets_the_interval_of_its_samples_not_the_one_it_states(tmp_path):
    def spread(median):
        return [median * (1 + k / 100) for k in (-2, -1, 0, 1, 2)]

    doc = bench2([result("native", 2e-3, samples_s=spread(2e-3)),
                  result("fused", 1e-3, samples_s=spread(1e-3), vs_native=2.0,
                         vs_native_ci=[0.5, 3.0], vs_native_verdict="within_noise")])
    page = render(tmp_path, write(tmp_path / "b.json", doc))
    fused = row(table(page["html"], "Workload w"), "fused")[6]
    low, high = interval_of(fused)
    assert fused.startswith("2.00x (") and 1.9 < low < 2.0 < high < 2.1


def test_checks_cut_by_a_time_limit_did_not_finish_and_are_not_called_failures(tmp_path):
    folder = tmp_path / "cpu-box-new"
    shutil.copytree(FIXTURES / "cpu-box-new", folder)
    fused = json.loads((folder / "conformance-fused.json").read_text())
    timed_out = {"outcome": "error", "message": "the process timed out after 60 s",
                 "diagnosis": None, "numbers": {"incomplete": True}}
    fused["results"] = [{**r, **timed_out} if r["outcome"] == "error"
                        else {**r, "outcome": "passed"} if r["kind"] == "lstm" else r
                        for r in fused["results"]]
    write(folder / "conformance-fused.json", fused)
    rows = table(render(tmp_path, folder)["html"], "Who conforms, who is fastest")
    assert row(rows, "fused")[1] == \
        "DOES NOT CONFORM (4 of 8 checks fail, 2 did not finish, 3 causes)"
    fused["results"] = [r if r["outcome"] == "error" else {**r, "outcome": "passed"}
                        for r in fused["results"]]
    write(folder / "conformance-fused.json", fused)
    rows = table(render(tmp_path, folder)["html"], "Who conforms, who is fastest")
    assert row(rows, "fused")[1] == "INCOMPLETE (2 of 8 checks did not finish, 1 cause)"
