import json
from pathlib import Path

import pytest
from torch import nn

from rnnbench.benchmarks import harness
from rnnbench.benchmarks.harness import run_benchmarks
from rnnbench.benchmarks.machine import Usage
from rnnbench.benchmarks.result import MEASURED, BenchResult, InvalidResult, vs_native
from rnnbench.benchmarks.workloads import workload_from_dict
from rnnbench.impls.base import Implementation
from rnnbench.reports.load import load_file

OLD_DOCUMENT = Path(__file__).parent / "report_fixtures" / "old-box" / "bench-v1.json"
TINY = {"name": "tiny-rnn", "config": {"kind": "rnn", "input_size": 3, "hidden_size": 4},
        "batch": 2, "steps": 3, "budget_s": 0.01, "min_repeats": 3, "metrics": ["forward"]}
FAKE_PEAK = {"device": "cpu", "dtype": "float32", "threads": 1, "n": 1, "gflops": 50.0,
             "iqr_gflops": 1.0, "samples": [49.0, 50.0, 51.0], "tf32": None}


@pytest.fixture(scope="module")
def document():
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(harness, "gemm_peak", lambda device: dict(FAKE_PEAK))
        patch.setattr(harness, "measure_usage", lambda: Usage(0.0, 0.0))
        return run_benchmarks([Implementation(name="native", kinds={"rnn": nn.RNN})],
                              [workload_from_dict(TINY)], threads=1)


def result(impl="mine", median_s=1e-3, status="ok", **fields) -> BenchResult:
    return BenchResult(impl=impl, workload="w", metric="forward", status=status,
                       median_s=median_s, **fields)


def test_a_harness_result_survives_the_round_trip(document):
    [written] = document["results"]
    assert written["status"] == "ok" and written["samples_s"]
    read = BenchResult.from_json(json.loads(json.dumps(written)))
    assert read.median_s == written["median_s"] and read.vs_native_ci == tuple(written["vs_native_ci"])
    assert read.to_json() == written
    assert list(read.to_json()) == list(written)


@pytest.mark.parametrize("change, message", [
    ({"impl": None}, "no 'impl'"),
    ({"workload": ""}, "no 'workload'"),
    ({"median_s": "fast"}, "'median_s' is 'fast', not a number"),
    ({"batch": 2.5}, "'batch' is 2.5, not a whole number"),
    ({"samples_s": [1.0, "x"]}, "'samples_s' is 'x', not a list of seconds from 1e-12 to 1e+06"),
    ({"status": "exploded"}, "unknown status 'exploded' (known: ok, unavailable, "
                             "not_supported, failed)"),
    (dict.fromkeys(MEASURED), "status ok but no numbers (median_s, ...)"),
    ({**dict.fromkeys(MEASURED), "repeats": 9, "threads": 2},
     "status ok but no numbers (median_s, ...)"),
])
def test_from_json_rejects_what_it_cannot_place_in_one_line(document, change, message):
    [written] = document["results"]
    with pytest.raises(InvalidResult) as caught:
        BenchResult.from_json({**written, **change})
    assert str(caught.value) == message and "\n" not in str(caught.value)


def test_malformed_judgements_are_dropped_not_rejected(document):
    [written] = document["results"]
    read = BenchResult.from_json({**written, "vs_native_ci": [2.0, 1.0], "noisy": "yes",
                                  "vs_native_verdict": "much faster"})
    assert (read.vs_native_ci, read.noisy, read.vs_native_verdict) == (None, None, None)


def test_vs_native_is_the_baseline_median_over_the_result_median():
    baseline, mine = result("native", median_s=3e-3), result(median_s=2e-3)
    assert vs_native(mine, baseline) == pytest.approx(1.5)
    assert vs_native(baseline, mine) == pytest.approx(2 / 3)


@pytest.mark.parametrize("mine, baseline", [
    (result(conforms=False), result("native")),
    (result(), result("native", conforms=False)),
    (result(status="failed", median_s=None), result("native")),
    (result(), result("native", status="failed", median_s=None)),
    (result(), None),
])
def test_vs_native_gives_no_ratio_without_two_conforming_timings(mine, baseline):
    assert vs_native(mine, baseline) is None


def test_the_harness_records_vs_native_for_its_results():
    baseline, mine = result("native", median_s=3e-3), result(median_s=2e-3)
    results = {("native", "forward"): baseline, ("mine", "forward"): mine}
    harness._ratios(results, busy=False)
    assert (mine.vs_native, baseline.vs_native) == (pytest.approx(1.5), pytest.approx(1.0))


def test_a_bench_1_document_still_loads():
    assert json.loads(OLD_DOCUMENT.read_text())["schema"] == "rnnbench.bench/1"
    loaded = load_file(OLD_DOCUMENT)
    assert not loaded.unplaced and len(loaded.timings) == 2
    assert all(isinstance(t, BenchResult) for t in loaded.timings)
    assert all(t.samples_s == [] and t.vs_native_ci is None for t in loaded.timings)
    old = json.loads(OLD_DOCUMENT.read_text())["results"]
    assert [t.median_s for t in loaded.timings] == [r["median_s"] for r in old]
