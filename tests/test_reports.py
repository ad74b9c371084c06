"""Reports, `rnnbench report`, `rnnbench compare`: rendered from small fixture documents.

The fixtures are written here from the documented schemas (rnnbench.conformance/1,
rnnbench.bench/1, pytest-benchmark's JSON, asv 0.6 results), never by running anything.
"""
from __future__ import annotations

import html
import json
import math
import re
from collections import Counter

import pytest

from rnnbench.cli import main
from rnnbench.errors import UsageError
from rnnbench.suites.results import ConformanceRun

EVIL = "<script>alert(1)</script>"
EVIL_MESSAGE = 'output differs <img src=x onerror="alert(2)"> by a lot'
LINK = "[click](javascript:alert(3))"
MIB = 2 ** 20


def environment(host, **extra):
    return {"rnnbench": "0.1.0", "python": "3.11.7", "torch": "2.13.0", "cuda": None,
            "cudnn": None, "gpu": None, "cpu": "Test CPU", "cores": 2, "threads": 2,
            "platform": "Linux", "hostname": host, **extra}


def check_result(check, kind, outcome, category="forward", diagnosis=None, message=""):
    return {"check": check, "category": category, "kind": kind, "case": check.split("/")[-1],
            "outcome": outcome, "message": message, "diagnosis": diagnosis,
            "numbers": ({"max_abs": 0.5, "tol": 1e-6, "layer": 1, "direction": "reverse",
                         "timestep": 0, "expected": [0.25] * 64, "setup": {"batch": 2}}
                        if outcome == "failed" else {}),
            "duration_s": 0.01}


def conformance_doc(target, results, env):
    summary = Counter(r["outcome"] for r in results)
    return {"schema": "rnnbench.conformance/1", "target": target, "environment": env,
            "summary": {o: summary[o] for o in ("passed", "failed", "not_supported", "error")},
            "results": results}


def bench_result(impl, workload, median_s, *, metric="forward", iqr_s=None, device="cpu",
                 status="ok", reason="", steps=10, **extra):
    return {"impl": impl, "kind": "rnn", "workload": workload, "device": device,
            "dtype": "float32", "metric": metric,
            "median_s": median_s if status == "ok" else None,
            "iqr_s": (median_s * 0.02 if iqr_s is None else iqr_s) if status == "ok" else None,
            "repeats": 20, "status": status, "reason": reason, "steps": steps, "batch": 4,
            "input_size": 8, "hidden_size": 8, **extra}


def bench_doc(results, env):
    return {"schema": "rnnbench.bench/1", "environment": env, "peak_gflops": 100.0,
            "results": results}


def write(path, data):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))
    return path


def asv_row(columns, **values):
    """One asv 0.6 results row: values in result_columns order, trailing Nones dropped."""
    row = [values.get(c) for c in columns]
    while row and row[-1] is None:
        row.pop()
    return row


ASV_COLUMNS = ["result", "params", "version", "started_at", "duration", "stats_ci_99_a",
               "stats_ci_99_b", "stats_q_25", "stats_q_75", "stats_number", "stats_repeat",
               "samples", "profile"]


def asv_results_folder(root):
    """results/benchmarks.json, results/asv-box/machine.json and one results file."""
    names = {"time_forward": "time", "peakmem_forward": "peakmemory", "track_gflops": "track"}
    write(root / "benchmarks.json", {
        **{f"asv_rnn.Forward.{method}": {"name": f"asv_rnn.Forward.{method}", "type": kind,
                                         "param_names": ["impl", "workload", "device"]}
           for method, kind in names.items()},
        "version": 2})
    write(root / "asv-box" / "machine.json", {"machine": "asv-box", "arch": "x86_64", "version": 1})
    params = [["'native'", "'gpu-only'"], ["'asv-workload'"], ["'cpu'"]]
    results = {
        "asv_rnn.Forward.time_forward": asv_row(
            ASV_COLUMNS, result=[0.005, math.nan], params=params, version="abc",
            stats_q_25=[0.0049, None], stats_q_75=[0.0052, None]),
        "asv_rnn.Forward.peakmem_forward": asv_row(
            ASV_COLUMNS, result=[7 * MIB, math.nan], params=params, version="abc"),
        "asv_rnn.Forward.track_gflops": asv_row(
            ASV_COLUMNS, result=[4.5, math.nan], params=params, version="abc"),
        "asv_rnn.mem_weights": asv_row(ASV_COLUMNS, result=[1024], params=[], version="abc"),
    }
    return write(root / "asv-box" / "abc123-existing-py.json", {
        "commit_hash": "abc123", "env_name": "existing-py", "date": 1767225600000,
        "params": {"machine": "asv-box", "arch": "x86_64", "cpu": "Asv CPU", "num_cpu": "2",
                   "os": "Linux", "ram": "24GB", "python": "3.11"},
        "python": "3.11", "requirements": {}, "env_vars": {}, "result_columns": ASV_COLUMNS,
        "results": results, "durations": {}, "version": 2})


def pytest_benchmark_doc():
    def bench(name, extra, median):
        return {"group": None, "name": name, "fullname": f"benchmarks/test_rnn.py::{name}",
                "params": None, "param": None, "extra_info": extra, "options": {},
                "stats": {"min": median * 0.9, "max": median * 1.2, "mean": median,
                          "stddev": median * 0.05, "rounds": 15, "median": median,
                          "iqr": median * 0.04, "q1": median * 0.98, "q3": median * 1.02,
                          "iqr_outliers": 0, "stddev_outliers": 1, "outliers": "1;0",
                          "ld15iqr": median * 0.9, "hd15iqr": median * 1.1, "ops": 1 / median,
                          "total": median * 15, "iterations": 1}}
    # as benchmarks/test_pytest_benchmark.py writes it: the workload as a whole dict
    workload = {"name": "pb-workload",
                "config": {"kind": "rnn", "input_size": 8, "hidden_size": 16},
                "batch": 4, "steps": 10, "dtype": "float32", "metrics": ["forward"]}
    labels = {"impl": "eager", "workload": workload, "metric": "forward", "device": "cpu",
              "threads": 2, "gflops": 3.5, "environment": environment("pb-box")}
    return {"machine_info": {"node": "pb-box", "processor": "x86_64", "machine": "x86_64",
                             "python_version": "3.11.7", "system": "Linux", "release": "6.1",
                             "cpu": {"brand_raw": "PB CPU"}},
            "commit_info": {"id": "def456"},
            "benchmarks": [bench("test_forward[eager-pb-workload]", labels, 0.003),
                           bench("test_forward[mystery]", {"workload": workload}, 0.004)],
            "datetime": "2026-11-01T00:00:00", "version": "5.3.1"}


def inputs(root):
    """Every supported format, two machines with the same workload on CPU and GPU, bad items."""
    cpu = environment("cpu-box", date="2026-01-01T10:00:00+00:00")
    gpu = environment("gpu-box", date="2026-01-01T11:00:00+00:00", gpu="Test GPU", cuda="12.8")
    native_checks = [check_result("forward/one-layer", "rnn", "passed"),
                     check_result("shapes/unbatched", "rnn", "passed", category="shapes"),
                     check_result("init/uniform", "rnn", "passed", category="init"),
                     check_result("forward/bidirectional", "rnn", "not_supported"),
                     check_result("forward/one-layer", "lstm", "passed")]
    evil_checks = [check_result("forward/one-layer", "rnn", "failed", diagnosis="weight_transposed",
                                message=EVIL_MESSAGE),
                   check_result("shapes/unbatched", "rnn", "error", category="shapes",
                                message="RuntimeError: boom"),
                   check_result("init/uniform", "rnn", "passed", category="init"),
                   check_result("forward/strange", "rnn", "exploded")]
    sweep = [bench_result(impl, f"steps-sweep-{steps}", steps * base, steps=steps)
             for impl, base in (("native", 1e-4), ("eager", 2e-4)) for steps in (10, 20, 40)]
    cpu_rows = [bench_result("native", "tiny-rnn", 2e-3, gflops=12.5, peak_fraction=0.125,
                             first_call_s=1.5, peak_mem_bytes=3 * MIB),
                bench_result("eager", "tiny-rnn", 4e-3),
                bench_result(EVIL, "tiny-rnn", 1e-3),
                bench_result(LINK, "tiny-rnn", 1e-3),
                bench_result("broken", "tiny-rnn", None, status="failed",
                             reason=f"RuntimeError: {EVIL}"),
                *sweep,
                {k: v for k, v in bench_result("eager", "x", 1e-3).items() if k != "workload"}]
    gpu_rows = [bench_result("native", "tiny-rnn", 5e-4, device="cuda"),
                bench_result("eager", "tiny-rnn", 2e-3, device="cuda")]
    return [write(root / "conf-native.json", conformance_doc("native", native_checks, cpu)),
            write(root / "conf-quiet.json", conformance_doc("quiet", [], cpu)),
            write(root / "conf-cut.json", {**conformance_doc("cut", [check_result(
                "forward/one-layer", "gru", "passed")], cpu), "interrupted": True}),
            write(root / "conf-evil.json", conformance_doc(EVIL, evil_checks, cpu)),
            write(root / "bench-cpu.json", bench_doc(cpu_rows, {**cpu, "note": EVIL})),
            write(root / "bench-gpu.json", bench_doc(gpu_rows, gpu)),
            write(root / "pytest-benchmark.json", pytest_benchmark_doc()),
            asv_results_folder(root / "asv" / "results").parent.parent]


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    root = tmp_path_factory.mktemp("report")
    paths = inputs(root / "in")
    assert main(["report", *map(str, paths), "--out", str(root / "out")]) == 0
    out = root / "out"
    return {"md": (out / "report.md").read_text(), "html": (out / "index.html").read_text(),
            "out": out}


def html_table(page: str, title: str) -> list[list[str]]:
    """The body rows of the HTML table under <h3>title</h3>, cell texts unescaped."""
    heading = re.escape(html.escape(title))
    match = re.search(rf"<h3>{heading}</h3>.*?<tbody>(.*?)</tbody>", page, re.S)
    assert match, f"no table {title!r}"
    return [[html.unescape(c) for c in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)]
            for row in re.findall(r"<tr>(.*?)</tr>", match.group(1), re.S)]


def row_of(rows, *cells):
    found = [r for r in rows if all(c in r for c in cells)]
    assert len(found) == 1, f"{len(found)} rows with {cells}: {rows}"
    return found[0]


# --- report content -------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["native", "eager", "broken", "quiet", "tiny-rnn",
                                  "steps-sweep-20", "pb-workload", "asv-workload", "gpu-only",
                                  "lstm", "shapes"])
def test_every_implementation_workload_and_kind_is_in_both_files(report, name):
    assert name in report["md"]
    assert name in report["html"]


def test_numbers_are_in_the_workload_table(report):
    rows = html_table(report["html"], "Workload tiny-rnn")
    # columns: implementation, run, from, device, dtype, metric, median, IQR, vs native, ...
    cpu, gpu = ("cpu-box 2026-01-01 10:00 (bench-cpu.json)",
                "gpu-box 2026-01-01 11:00 (bench-gpu.json)")
    native = row_of(rows, "native", cpu, "cpu")
    assert native[6:13] == ["2 ms", "40 µs", "baseline", "12.5", "12.5%", "1.5 s", "3 MiB"]
    assert row_of(rows, "eager", cpu)[8] == "0.50x"
    assert row_of(rows, EVIL, cpu)[8] == "2.00x"
    assert row_of(rows, "eager", gpu, "cuda")[8] == "0.25x"
    assert row_of(rows, "broken")[-1] == f"failed: RuntimeError: {EVIL}"


def test_pytest_benchmark_and_asv_results_are_placed(report):
    note = r"<h3>Workload pb-workload</h3><p class=\"note\">(.*?)</p>"
    sizes = "kind rnn; steps 10; batch 4; input_size 8; hidden_size 16"
    assert re.search(note, report["html"]).group(1) == sizes
    eager = row_of(html_table(report["html"], "Workload pb-workload"), "eager")
    assert eager[6] == "3 ms" and eager[9] == "3.5" and eager[2] == "pytest-benchmark"
    assert eager[3:6] == ["cpu", "float32", "forward"]
    asv = html_table(report["html"], "Workload asv-workload")
    native = row_of(asv, "native")
    assert native[6] == "5 ms" and native[7] == "300 µs" and native[9] == "4.5"
    assert native[12] == "7 MiB" and native[2] == "asv"
    # NaN: an implementation rnnbench does not know here, so not a declared unsupported one
    assert row_of(asv, "gpu-only")[-1].startswith("not selected: asv ran without it")


def test_conformance_matrix_counts_outcomes_per_kind_and_category(report):
    # cells are passed / failed / not supported / error
    by_kind = html_table(report["html"], "By kind")
    assert row_of(by_kind, "native")[1:] == ["3 / 0 / 1 / 0", "1 / 0 / 0 / 0", ""]
    assert row_of(by_kind, EVIL)[1:] == ["1 / 1 / 0 / 1", "", ""]
    by_category = html_table(report["html"], "By check category")
    assert row_of(by_category, EVIL)[1:] == ["0 / 1 / 0 / 0", "0 / 0 / 0 / 1", "1 / 0 / 0 / 0"]
    verdicts = html_table(report["html"], "Verdict per implementation")
    assert row_of(verdicts, "native")[-1] == "conforms"
    assert row_of(verdicts, EVIL)[-1] == "DOES NOT CONFORM"
    assert row_of(verdicts, "quiet")[1:] == ["0", "0", "0", "0", "no checks ran"]
    assert row_of(verdicts, "cut")[-1] == "conforms (interrupted: incomplete)"


def test_failures_are_grouped_by_cause_with_an_example(report):
    rows = html_table(report["html"], "Failures by cause")
    # columns: implementation, cause, checks, outcomes, kinds, example
    transposed = row_of(rows, EVIL, "1 failed")
    assert "W used transposed" in transposed[1] and "weight_transposed" in transposed[1]
    assert transposed[3] == "1 failed" and EVIL_MESSAGE in transposed[5]
    # where it first diverged, as conform says it; not the raw numbers the JSON keeps
    assert transposed[5].endswith("(first divergence: layer 1, reverse direction, timestep 0)")
    assert "0.25" not in transposed[5] and "setup" not in transposed[5]
    assert row_of(rows, EVIL, "RuntimeError: boom")[3] == "1 error"


def test_names_and_messages_from_inputs_are_escaped(report):
    page, md = report["html"], report["md"]
    assert "<script" not in page.lower()
    assert 'onerror="' not in page and "onerror=&" in page      # its quote escaped: no attribute
    assert html.escape(EVIL) in page
    assert "script-src" not in page and "default-src 'none'" in page
    assert "<script" not in md.lower() and "<img" not in md.lower()
    assert not re.search(r"(?<!\\)\]\(javascript", md) and "&lt;script&gt;" in md


def test_a_name_with_markup_and_math_signs_is_shown_as_it_is(tmp_path):
    name = "$x$ <b>bold</b>"
    doc = bench_doc([bench_result("native", "w", 1e-3), bench_result(name, "w", 2e-3)],
                    environment("box"))
    assert main(["report", str(write(tmp_path / "b.json", doc)), "--out", str(tmp_path / "o")]) == 0
    page = (tmp_path / "o" / "index.html").read_text()
    assert "<b>" not in page and html.escape(name) in page
    assert "\\$x\\$ &lt;b&gt;bold&lt;/b&gt;" not in page      # nothing of Markdown's escaping
    md = (tmp_path / "o" / "report.md").read_text()
    assert "<b>" not in md and "$x$ &lt;b&gt;bold&lt;/b&gt;" in md


def test_unplaced_results_are_listed_with_reasons(report):
    rows = html_table(report["html"], "Unplaced")
    assert "unknown outcome 'exploded'" in row_of(rows, "results[3]", )[2]
    assert row_of(rows, "results[11]")[2] == "no 'workload'"
    assert row_of(rows, "benchmarks/test_rnn.py::test_forward[mystery]")[2] == "no 'impl'"
    assert "not a time_, peakmem_ or track_" in row_of(rows, "asv_rnn.mem_weights")[2]


def test_every_machine_has_an_environment_column(report):
    header = re.search(r"<h3>Environments</h3>.*?<thead>(.*?)</thead>", report["html"],
                       re.S).group(1)
    # cpu-box wrote two different environments (its conformance and its bench run)
    for machine in ("cpu-box #1", "cpu-box #2", "gpu-box", "pb-box", "asv-box"):
        assert f"<th>{machine}</th>" in header
    assert "Test GPU" in report["html"] and "Asv CPU" in report["html"]


def test_files_differing_only_in_measurements_share_an_environment_column(tmp_path):
    env = environment("box")
    paths = [write(tmp_path / "c.json", conformance_doc("native", [], env)),
             write(tmp_path / "b.json", bench_doc([bench_result("native", "w", 1e-3)], env))]
    assert main(["report", *map(str, paths), "--out", str(tmp_path / "o")]) == 0
    page = (tmp_path / "o" / "index.html").read_text()
    header = re.search(r"<h3>Environments</h3>.*?<thead>(.*?)</thead>", page, re.S).group(1)
    assert re.findall(r"<th>(.*?)</th>", header) == ["key", "box"]
    assert row_of(html_table(page, "Environments"), "peak_gflops") == ["peak_gflops", "100"]


def test_plots_are_inline_pngs_and_nothing_is_fetched(report):
    names = sorted(p.stem for p in (report["out"] / "figures").glob("*.png"))
    assert names == ["conformance", "devices", "scaling", "speedup"]
    for path in (report["out"] / "figures").glob("*.png"):
        assert path.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    page = report["html"]
    assert page.count('<img src="data:image/png;base64,') == len(names)
    assert not re.search(r"""(src|href)=["']?(https?:|//)""", page)
    for name in names:
        assert f"](figures/{name}.png)" in report["md"]


def test_a_report_without_gpu_or_series_has_no_such_plots(tmp_path):
    doc = bench_doc([bench_result("native", "w", 1e-3), bench_result("eager", "w", 2e-3)],
                    environment("box"))
    (tmp_path / "o" / "figures").mkdir(parents=True)
    (tmp_path / "o" / "figures" / "scaling.png").write_bytes(b"from an earlier report")
    assert main(["report", str(write(tmp_path / "b.json", doc)), "--out", str(tmp_path / "o")]) == 0
    assert sorted(p.stem for p in (tmp_path / "o" / "figures").glob("*.png")) == ["speedup"]


# --- report: bad inputs ---------------------------------------------------------------------

@pytest.mark.parametrize("content, message", [
    (None, "no such file"),
    ("{not json", "not valid JSON"),
    (json.dumps({"schema": "rnnbench.bench/9", "results": []}), "not a results file"),
    (json.dumps([1, 2]), "not a results file"),
    (json.dumps({"schema": "rnnbench.bench/1", "results": {}}), "'results' is not a list"),
])
def test_report_rejects_a_bad_input_before_writing_anything(tmp_path, capsys, content, message):
    good = write(tmp_path / "good.json",
                 bench_doc([bench_result("native", "w", 1e-3)], environment("b")))
    bad = tmp_path / "bad.json"
    if content is not None:
        bad.write_text(content)
    assert main(["report", str(good), str(bad), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(bad) in err and message in err
    assert not (tmp_path / "out").exists()


# --- compare --------------------------------------------------------------------------------

COMPARE_MEDIANS = {("native", "w1"): 2e-3, ("eager", "w1"): 4e-3, ("eager", "w2"): 1e-2}


def compare_docs(tmp_path, head_scale, *, iqr_fraction=0.02, head_status=None):
    """BASE and HEAD bench files; HEAD's medians scaled and statuses overridden per impl."""
    def doc(scale, status):
        return bench_doc([bench_result(impl, w, m * scale.get(impl, 1.0), iqr_s=m * iqr_fraction,
                                       status=status.get(impl, "ok"))
                          for (impl, w), m in COMPARE_MEDIANS.items()], environment("box"))
    return (str(write(tmp_path / "base.json", doc({}, {}))),
            str(write(tmp_path / "head.json", doc(head_scale, head_status or {}))))


def test_compare_catches_a_planted_20_percent_slowdown(tmp_path, capsys):
    base, head = compare_docs(tmp_path, {"eager": 1.2})
    assert main(["compare", base, head]) == 1
    out = capsys.readouterr().out
    flagged = [line for line in out.splitlines() if "regression" in line and "+20.0%" in line]
    assert len(flagged) == 2
    assert "FAIL" in out


def test_compare_is_quiet_on_two_runs_of_the_same_numbers(tmp_path, capsys):
    base, head = compare_docs(tmp_path, {"native": 1.01, "eager": 0.99})
    assert main(["compare", base, head]) == 0
    rows = capsys.readouterr().out.splitlines()
    quiet = [r for r in rows if r.startswith(("native", "eager")) and r.endswith("within noise")]
    assert len(quiet) == 3


def test_compare_slowdown_inside_a_wide_spread_is_not_a_regression(tmp_path, capsys):
    base, head = compare_docs(tmp_path, {"eager": 1.2}, iqr_fraction=0.3)
    assert main(["compare", base, head]) == 0
    assert "regression" not in capsys.readouterr().out.replace("no regression", "")


def test_compare_threshold_decides_what_counts(tmp_path):
    base, head = compare_docs(tmp_path, {"eager": 1.2})
    assert main(["compare", base, head, "--threshold", "25%"]) == 0
    assert main(["compare", base, head, "--threshold", "15"]) == 1


def test_compare_fails_when_a_result_breaks(tmp_path, capsys):
    base, head = compare_docs(tmp_path, {}, head_status={"native": "failed"})
    assert main(["compare", base, head]) == 1
    assert "failed" in capsys.readouterr().out


@pytest.mark.parametrize("args, message", [
    (["--threshold", "abc"], "--threshold 'abc'"),
    (["--threshold=-5%"], "--threshold '-5%'"),
])
def test_compare_bad_threshold_is_one_line(tmp_path, capsys, args, message):
    base, head = compare_docs(tmp_path, {})
    assert main(["compare", base, head, *args]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err


def test_compare_bad_inputs_are_one_line(tmp_path, capsys):
    base, _ = compare_docs(tmp_path, {})
    conformance = write(tmp_path / "c.json", conformance_doc("native", [], environment("b")))
    for other, message in ((tmp_path / "missing.json", "no such file"),
                           (conformance, "no benchmark results")):
        assert main(["compare", base, str(other)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and str(other) in err and message in err


# --- run (stages stubbed: the real ones are the conformance and benchmark suites' business) ---

@pytest.fixture
def stub_stages(monkeypatch):
    """conform() and run_benchmarks() replaced by fixture documents; `eager` fails one check."""
    import rnnbench.benchmarks.harness
    import rnnbench.suites

    def conform(target, quick=False, progress=None, **_):
        if target == stub_stages.unloadable:
            raise UsageError(f"cannot load {target}: boom")
        outcome = "failed" if target == "eager" else "passed"
        return ConformanceRun.from_json(conformance_doc(
            target, [check_result("forward/one-layer", "rnn", outcome)], environment("box")))

    def run_benchmarks(impls, workloads, progress=None, checkpoint=None, **_):
        doc = bench_doc([], environment("box"))
        for workload in workloads:
            doc["results"] += [bench_result(impl.name, workload.name, 1e-3) for impl in impls]
            checkpoint(doc)
            if stub_stages.interrupt:
                raise KeyboardInterrupt
        return doc

    monkeypatch.setattr(rnnbench.suites, "conform", conform, raising=False)
    monkeypatch.setattr(rnnbench.benchmarks.harness, "run_benchmarks", run_benchmarks)
    stub_stages.interrupt, stub_stages.unloadable = False, None
    return stub_stages


def available_builtins():
    from rnnbench.impls import BUILTINS, registered
    return [n for n in BUILTINS if registered()[n].unavailable_reason() is None]


def test_run_writes_every_stage_and_fails_on_a_failed_check(tmp_path, capsys, stub_stages):
    assert main(["run", "--out", str(tmp_path)]) == 1
    for name in available_builtins():
        assert (tmp_path / f"conformance-{name}.json").exists()
    for name in ("bench.json", "report.md", "index.html"):
        assert (tmp_path / name).exists()
    out = capsys.readouterr().out
    eager = [line for line in out.splitlines() if line.startswith("eager ")]
    assert any("DOES NOT CONFORM" in line for line in eager)
    assert str(tmp_path / "index.html") in out


def test_run_interrupted_keeps_the_finished_stages_apart_from_the_folder(tmp_path, stub_stages):
    stub_stages.interrupt = True
    assert main(["run", "--out", str(tmp_path)]) == 130
    staged = tmp_path / ".incomplete"
    assert (staged / "conformance-native.json").exists()
    assert len(json.loads((staged / "bench.json").read_text())["results"]) > 0
    assert not (staged / "index.html").exists()
    assert not (tmp_path / "bench.json").exists()


def test_run_goes_on_when_an_implementation_cannot_be_checked(tmp_path, capsys, stub_stages):
    stub_stages.unloadable = "native"
    assert main(["run", "--out", str(tmp_path)]) == 1
    assert (tmp_path / "bench.json").exists() and (tmp_path / "index.html").exists()
    assert "could not run: cannot load native: boom" in capsys.readouterr().out
    verdicts = html_table((tmp_path / "index.html").read_text(), "Verdict per implementation")
    assert row_of(verdicts, "native")[-1] == "could not run: cannot load native: boom"
