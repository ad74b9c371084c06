import json
import os
import statistics
import time

import pytest
import torch
from torch import nn

from rnnbench import cli
from rnnbench.benchmarks import harness
from rnnbench.benchmarks.machine import Usage
from rnnbench.benchmarks.statistics import is_bimodal
from rnnbench.benchmarks.harness import run_benchmarks, skip_reason
from rnnbench.benchmarks.timing import (RepeatPolicy, fastest, gemm_libraries, gemm_peak,
                                        measure_interleaved, peak_memory_bytes, sample_summary)
from rnnbench.benchmarks.workloads import (METRICS, Workload, load_workloads, preset_names,
                                           workload_from_dict)
from rnnbench.environment import ISA_LIMITS
from rnnbench.errors import UsageError
from rnnbench.impls.base import Implementation
from rnnbench.reference import Config
from rnnbench.documents import BENCH_SCHEMA, STATUSES, read_json, write_json

TINY = {"name": "tiny-rnn", "config": {"kind": "rnn", "input_size": 3, "hidden_size": 4},
        "batch": 2, "steps": 3, "budget_s": 0.01, "min_repeats": 3}
FAKE_PEAK = {"device": "cpu", "dtype": "float32", "threads": 1, "n": 1, "library": "onednn",
             "gflops": 50.0, "iqr_gflops": 1.0, "samples": [49.0, 50.0, 51.0], "tf32": None}
QUIET = Usage(others_fraction=0.0, steal_fraction=0.0)
# The fields every result carries (the contract in notes/apis.md).
RESULT_FIELDS = {"impl", "kind", "workload", "device", "dtype", "metric", "median_s", "iqr_s",
                 "repeats", "gflops", "peak_fraction", "first_call_s", "tokens_per_s",
                 "peak_mem_bytes", "status", "reason"}


@pytest.fixture(autouse=True)
def fixed_machine(monkeypatch):
    # The GEMM peak takes a second to measure and is a number we want to know exactly here; the
    # machine's load is whatever the test says, not whatever else runs on it.
    monkeypatch.setattr(harness, "gemm_peak", lambda device: dict(FAKE_PEAK))
    monkeypatch.setattr(harness, "measure_usage", lambda: QUIET)


def tiny(**changes) -> Workload:
    return workload_from_dict({**TINY, **changes})


def impl(name, rnn=nn.RNN, **fields) -> Implementation:
    return Implementation(name=name, kinds={"rnn": rnn}, **fields)


class Exploding(nn.RNN):
    """Fails on its `fail_on`-th forward call (1-based), every call after too."""

    fail_on = 1

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.calls = 0

    def forward(self, *args):
        self.calls += 1
        if self.calls >= self.fail_on:
            raise RuntimeError("kernel exploded")
        return super().forward(*args)


def broken_constructor(*args, **kwargs):
    raise TypeError("unexpected keyword argument 'dtype'")


def results_by(doc, name, metric="forward"):
    [result] = [r for r in doc["results"] if r["impl"] == name and r["metric"] == metric]
    return result


# --- workloads ----------------------------------------------------------------------------

@pytest.mark.parametrize("preset", ["quick", "deepbench", "latency", "seeds", "goals"])
def test_every_documented_preset_loads(preset):
    assert preset in preset_names()
    workloads = load_workloads(preset)
    assert workloads and all(isinstance(w, Workload) for w in workloads)


def test_quick_preset_covers_every_kind():
    kinds = {w.kind for w in load_workloads("quick")}
    assert kinds == {"rnn", "lstm", "gru", "rnn_cell", "lstm_cell", "gru_cell", "implicit"}


def test_quick_preset_times_a_training_step_with_clipping():
    assert any("train_step" in w.metrics and w.clip_norm for w in load_workloads("quick"))


def test_quick_preset_samples_are_long_enough_and_its_repeats_fit_its_budget():
    # Calls of tens of microseconds in 1 ms samples came out noisy: a sample must average many.
    for w in load_workloads("quick"):
        assert w.min_sample_s >= 0.005 and w.min_repeats >= 7
        assert w.min_repeats * w.min_sample_s <= w.budget_s     # the budget bounds the time


def test_a_sample_lasts_at_least_the_workloads_min_sample_s():
    doc = run_benchmarks([impl("native")], [tiny(min_sample_s=0.02, metrics=["forward"])],
                         threads=1)
    native = results_by(doc, "native")
    # calls of well under a millisecond: many make one sample
    assert native["number"] > 1 and native["number"] * native["median_s"] >= 0.02 * 0.8


def test_deepbench_preset_keeps_deepbench_conventions():
    workloads = load_workloads("deepbench")
    assert {w.kind for w in workloads} == {"rnn", "lstm", "gru"}
    for w in workloads:
        assert w.config.num_layers == 1 and not w.config.bidirectional
        assert w.config.input_size == w.config.hidden_size
        if w.kind == "rnn":
            assert w.config.nonlinearity == "relu"
    inference = [w for w in workloads if w.metrics == ("forward",)]
    assert inference and {w.batch for w in inference} <= {1, 2, 4}


def test_deepbench_preset_contains_its_published_sizes():
    sizes = {(w.kind, w.config.hidden_size, w.batch, w.steps) for w in load_workloads("deepbench")}
    # Rows of DeepBench's rnn_problems.h: vanilla 1760 x 16 x 50, LSTM 4096 x 128 x 25, GRU
    # 2560 x 32 x 187, LSTM inference 1536 x 4 x 50.
    assert {("rnn", 1760, 16, 50), ("lstm", 4096, 128, 25), ("gru", 2560, 32, 187),
            ("lstm", 1536, 4, 50)} <= sizes


def test_goals_preset_has_the_goal_workloads():
    # Forward of every family at (a), (b) and (c, one thread); forward+backward at (a) and (b).
    goals = {(w.kind, w.steps, w.batch, w.config.input_size, w.config.hidden_size, w.threads): w
             for w in load_workloads("goals")}
    sizes = {"a": (100, 32, 256, 256, None), "b": (50, 64, 512, 512, None), "c": (25, 1, 128, 128, 1)}
    for kind in ("rnn", "lstm", "gru"):
        for name, size in sizes.items():
            workload = goals[(kind, *size)]
            expected = {"forward"} if name == "c" else {"forward", "forward_backward"}
            assert set(workload.metrics) == expected
            assert workload.config.nonlinearity == "tanh" and workload.dtype == "float32"
            assert workload.config.num_layers == 1 and not workload.config.bidirectional
    assert len(goals) == 9


def test_seeds_preset_has_the_documented_examples():
    seeds = load_workloads("seeds")
    nn_rnn = [w for w in seeds if w.kind == "rnn" and w.config.num_layers == 2]
    assert [w.input_shape() for w in nn_rnn] == [(5, 3, 10)]
    assert nn_rnn[0].config.hidden_size == 20
    [implicit] = [w for w in seeds if w.kind == "implicit"]
    assert implicit.input_shape() == (100, 60, 1)
    assert (implicit.config.hidden_size, implicit.config.implicit_size) == (128, 64)
    [text] = [w for w in seeds if w.vocab]
    assert (text.vocab, text.config.input_size, text.config.hidden_size, text.classes) == (10000, 256, 512, 10)
    assert text.config.bidirectional and text.config.num_layers == 2 and text.kind == "lstm"
    assert any(w.clip_norm and "train_step" in w.metrics for w in seeds)


def test_a_workload_round_trips_through_its_dict():
    for w in load_workloads("seeds") + load_workloads("quick"):
        assert workload_from_dict(json.loads(json.dumps(w.to_dict()))) == w


def test_an_unknown_preset_is_a_usage_error_naming_the_known_ones():
    with pytest.raises(UsageError, match="unknown preset 'nope'.*quick"):
        load_workloads("nope")


BAD_FILES = [
    ("not json", "{", "not valid JSON"),
    ("no workloads", {"workloads": []}, "non-empty 'workloads'"),
    ("unknown field", {"workloads": [{**TINY, "batchsize": 3}]}, "tiny-rnn: unknown field 'batchsize'"),
    ("bad config", {"workloads": [{**TINY, "config": {"kind": "rnn", "input_size": 3, "hidden_size": 0}}]},
     "tiny-rnn: .*hidden_size must be a positive integer"),
    ("unknown kind", {"workloads": [{**TINY, "config": {"kind": "transformer"}}]}, "unknown kind 'transformer'"),
    ("config field", {"workloads": [{**TINY, "config": {**TINY["config"], "hidden": 2}}]}, "no field 'hidden'"),
    ("bad metric", {"workloads": [{**TINY, "metrics": ["backward"]}]}, "metrics must be"),
    ("bad dtype", {"workloads": [{**TINY, "dtype": "float8"}]}, "dtype must be one of"),
    ("bad batch", {"workloads": [{**TINY, "batch": 0}]}, "batch must be a positive integer"),
    ("bad sample", {"workloads": [{**TINY, "min_sample_s": 0}]},
     "min_sample_s must be a positive finite number, got 0"),
    ("bad budget", {"workloads": [{**TINY, "budget_s": True}]},
     "budget_s must be a positive finite number, got True"),
    ("endless budget", '{"workloads": [{"name": "tiny-rnn", "config": {"kind": "rnn", '
     '"input_size": 3, "hidden_size": 4}, "batch": 2, "budget_s": Infinity}]}',
     "budget_s must be a positive finite number, got inf"),
    ("steps of a cell", {"workloads": [{**TINY, "config": {**TINY["config"], "kind": "rnn_cell"}}]},
     "steps applies to kinds that take a sequence; rnn_cell takes one step, got 3"),
    ("sample beyond budget", {"workloads": [{**TINY, "min_sample_s": 1e9}]},
     "min_sample_s must be at most 60 s, got 1000000000.0"),
    ("missing name", {"workloads": [{k: v for k, v in TINY.items() if k != "name"}]}, "missing field 'name'"),
    ("duplicates", {"workloads": [TINY, TINY]}, "duplicate workload names tiny-rnn"),
    ("bad defaults", {"defaults": [], "workloads": [TINY]}, "'defaults' must be an object"),
]


@pytest.mark.parametrize("content, message", [case[1:] for case in BAD_FILES],
                         ids=[case[0] for case in BAD_FILES])
def test_a_bad_workload_file_is_a_one_line_usage_error(tmp_path, content, message):
    path = tmp_path / "w.json"
    path.write_text(content if isinstance(content, str) else json.dumps(content))
    with pytest.raises(UsageError, match=message) as caught:
        load_workloads(path=str(path))
    assert str(path) in str(caught.value) and "\n" not in str(caught.value)


def test_a_default_length_applies_to_the_sequence_workloads_of_a_file(tmp_path):
    cell = {**TINY, "name": "tiny-cell", "config": {**TINY["config"], "kind": "rnn_cell"}}
    del cell["steps"]
    path = tmp_path / "w.json"
    path.write_text(json.dumps({"defaults": {"steps": 20}, "workloads": [
        {k: v for k, v in TINY.items() if k != "steps"}, cell]}))
    assert [w.steps for w in load_workloads(path=str(path))] == [20, 1]


def test_a_missing_workload_file_is_a_usage_error(tmp_path):
    with pytest.raises(UsageError, match="no such workload file"):
        load_workloads(path=str(tmp_path / "absent.json"))


# --- FLOP arithmetic ----------------------------------------------------------------------

def test_elman_flops_follow_2TBH_I_plus_H_and_backward_counts_twice():
    w = Workload("a", Config("rnn", 256, 256), batch=32, steps=100)
    forward = 2 * 100 * 32 * 256 * (256 + 256)
    assert w.flops("forward") == forward
    assert w.flops("forward_backward") == w.flops("train_step") == 3 * forward
    assert w.flops("forward", input_gemm=False) == 2 * 100 * 32 * 256 * 256


def test_tokens_count_steps_for_sequences_and_one_step_for_cells():
    assert Workload("s", Config("gru", 4, 4), batch=8, steps=5).tokens == 40
    assert Workload("c", Config("gru_cell", 4, 4), batch=8, steps=5).tokens == 8


def test_result_rates_are_consistent_with_the_median(tmp_path):
    doc = run_benchmarks([impl("native")], [tiny()], threads=1)
    for r in doc["results"]:
        assert r["status"] == "ok"
        assert r["gflops"] * r["median_s"] * 1e9 == pytest.approx(r["flops"])
        assert r["gflops_no_input_gemm"] * r["median_s"] * 1e9 == pytest.approx(r["flops_no_input_gemm"])
        assert r["flops_no_input_gemm"] < r["flops"]
        assert r["peak_fraction"] == pytest.approx(r["gflops"] / FAKE_PEAK["gflops"])
        assert r["tokens_per_s"] * r["median_s"] == pytest.approx(TINY["batch"] * TINY["steps"])
        assert r["vs_native"] == pytest.approx(1.0)


# --- timing -------------------------------------------------------------------------------

def test_summary_is_median_and_interquartile_range():
    summary = sample_summary([5.0, 1.0, 4.0, 2.0, 3.0], number=7)
    assert (summary.median_s, summary.iqr_s, summary.repeats, summary.number) == (3.0, 2.0, 5, 7)


def test_repeat_policy_needs_the_minimum_then_stops_on_budget_or_count():
    policy = RepeatPolicy(min_repeats=3, max_repeats=10, budget_s=1.0)
    assert policy.more(2, elapsed_s=100.0, candidates=1)
    assert policy.more(5, elapsed_s=1.5, candidates=2)
    assert not policy.more(5, elapsed_s=2.5, candidates=2)
    assert not policy.more(10, elapsed_s=0.0, candidates=2)


def test_candidates_are_interleaved_in_a_rotating_order():
    log = []
    calls = {name: (lambda name=name: log.append(name)) for name in "abc"}
    samples, errors = measure_interleaved(calls, dict.fromkeys(calls, 1), lambda: None,
                                          RepeatPolicy(min_repeats=3, max_repeats=3))
    assert log == list("abc" "bca" "cab")
    assert not errors and all(len(s) == 3 for s in samples.values())


def test_a_candidate_that_raises_stops_and_the_others_go_on():
    log = []

    def bad():
        raise ValueError("boom")

    samples, errors = measure_interleaved({"bad": bad, "good": lambda: log.append(1)},
                                          {"bad": 1, "good": 1}, lambda: None,
                                          RepeatPolicy(min_repeats=4, max_repeats=4))
    assert list(errors) == ["bad"] and len(samples["good"]) == 4


def test_cpu_peak_memory_sees_a_large_allocation():
    size = 64 * 2**20
    measured = peak_memory_bytes(lambda: torch.ones(size // 4).sum(), "cpu")
    if measured is None:
        pytest.skip("this kernel cannot reset the RSS high-water mark")
    assert 0.8 * size <= measured <= 4 * size


# --- the runner ---------------------------------------------------------------------------

def test_every_impl_and_metric_gets_a_result_with_its_status():
    impls = [
        impl("native"),
        impl("broken-ctor", rnn=broken_constructor),
        impl("explodes", rnn=Exploding),
        impl("away", availability=lambda: "needs a quantum computer"),
        impl("no-backward", unsupported=frozenset({"backward"})),
        Implementation(name="cells-only", kinds={"rnn_cell": nn.RNNCell}),
    ]
    doc = run_benchmarks(impls, [tiny()], threads=1)
    assert len(doc["results"]) == len(impls) * 2
    status = {(r["impl"], r["metric"]): (r["status"], r["reason"]) for r in doc["results"]}
    assert status["native", "forward"] == ("ok", None)
    assert status["broken-ctor", "forward"] == ("failed", "construction: TypeError: unexpected keyword argument 'dtype'")
    assert status["explodes", "forward"] == ("failed", "first call: RuntimeError: kernel exploded")
    assert status["away", "forward_backward"] == ("unavailable", "needs a quantum computer")
    assert status["no-backward", "forward"][0] == "ok"
    assert status["no-backward", "forward_backward"] == ("not_supported", "does not support backward")
    assert status["cells-only", "forward"][0] == "not_supported" and "provides no 'rnn'" in status["cells-only", "forward"][1]
    assert all(r["status"] in STATUSES for r in doc["results"])


def test_a_failure_while_timed_keeps_the_others_results(monkeypatch):
    warmed_up = []
    original = harness.warm_up

    def warm_up_and_count(fn, sync, **options):
        number = original(fn, sync, **options)
        warmed_up.append(fn)
        return number

    class ExplodesOnceTimed(nn.RNN):
        def forward(self, *args):
            if len(warmed_up) == 2:  # both candidates warmed up: the timed rounds have begun
                raise RuntimeError("kernel exploded")
            return super().forward(*args)

    monkeypatch.setattr(harness, "warm_up", warm_up_and_count)
    doc = run_benchmarks([impl("native"), impl("late", rnn=ExplodesOnceTimed)],
                         [tiny(metrics=["forward"], min_repeats=20)], threads=1)
    late, native = results_by(doc, "late"), results_by(doc, "native")
    assert late["status"] == "failed" and late["reason"] == "timed call: RuntimeError: kernel exploded"
    assert late["median_s"] is None
    assert native["status"] == "ok" and native["repeats"] >= 20


def test_implementations_are_interleaved_while_timed():
    log = []

    def recording(name):
        class Recorded(nn.RNN):
            def forward(self, *args):
                log.append(name)
                return super().forward(*args)
        return impl(name, rnn=Recorded)

    run_benchmarks([recording("native"), recording("other")], [tiny(metrics=["forward"])], threads=1)
    switches = sum(a != b for a, b in zip(log, log[1:]))
    # Sequential timing would switch once or twice (warm-ups, then all of one, then the other).
    assert switches >= 2 * TINY["min_repeats"]


def test_the_document_follows_the_schema_and_survives_json(tmp_path):
    doc = run_benchmarks([impl("native"), impl("away", availability=lambda: "no")], [tiny()],
                         threads=1)
    assert doc["schema"] == BENCH_SCHEMA and doc["peak_gflops"] == FAKE_PEAK["gflops"]
    assert {"torch", "cpu", "threads", "cuda", "gpu"} <= set(doc["environment"])
    assert doc["workloads"] == [tiny().to_dict()]
    for r in doc["results"]:
        assert RESULT_FIELDS <= set(r)
        assert r["threads"] == 1 and r["metric"] in METRICS
    write_json(tmp_path / "b.json", doc)
    assert read_json(tmp_path / "b.json", (BENCH_SCHEMA,))["results"] == json.loads(json.dumps(doc["results"]))


def test_workload_threads_are_pinned_and_recorded():
    doc = run_benchmarks([impl("native")], [tiny(threads=1)], threads=2)
    assert {r["threads"] for r in doc["results"]} == {1}


def test_checkpoint_receives_the_document_after_each_workload():
    seen = []
    run_benchmarks([impl("native")], [tiny(), tiny(name="second")], threads=1,
                   checkpoint=lambda doc: seen.append(len(doc["results"])))
    assert seen == [2, 4]


def test_skip_reason_explains_why_a_combination_cannot_run():
    w = tiny()
    assert skip_reason(impl("native"), w, "cpu", "forward") is None
    assert "does not time train_step" in skip_reason(impl("native"), w, "cpu", "train_step")
    assert "does not support backward" in skip_reason(
        impl("nb", unsupported=frozenset({"backward"})), w, "cpu", "forward_backward")
    assert "unavailable: gone" in skip_reason(impl("x", availability=lambda: "gone"), w, "cpu", "forward")


def test_implicit_workloads_record_solver_iterations():
    w = workload_from_dict({"name": "imp", "config": {"kind": "implicit", "input_size": 2, "hidden_size": 4,
                                                      "implicit_size": 3, "output_size": 1},
                            "batch": 2, "steps": 3, "budget_s": 0.01, "min_repeats": 3})
    from rnnbench.impls.implicit import IMPLEMENTATION
    doc = run_benchmarks([IMPLEMENTATION], [w], threads=1)
    forward, backward = results_by(doc, "implicit"), results_by(doc, "implicit", "forward_backward")
    assert forward["status"] == backward["status"] == "ok"
    assert forward["solver"]["forward_iterations"] > 0
    assert backward["solver"]["backward_iterations"] > 0


# --- the command --------------------------------------------------------------------------

IMPLS_FILE = """
from torch import nn
from rnnbench.impls.base import Implementation

class Exploding(nn.RNN):
    def forward(self, *args):
        raise RuntimeError("kernel exploded")

BROKEN = Implementation(name="broken", kinds={"rnn": Exploding})
"""


@pytest.fixture
def workload_file(tmp_path):
    path = tmp_path / "tiny.json"
    path.write_text(json.dumps({"workloads": [TINY]}))
    return str(path)


def test_bench_exits_0_and_writes_the_document(workload_file, tmp_path, capsys):
    out = tmp_path / "out" / "bench.json"
    code = cli.main(["bench", "--impl", "eager", "--workload", workload_file, "--threads", "1",
                     "--json", str(out)])
    assert code == 0
    doc = read_json(out, (BENCH_SCHEMA,))
    assert {r["impl"] for r in doc["results"]} == {"native", "eager"}  # native joins as baseline
    table = capsys.readouterr().out
    assert "tiny-rnn" in table and "vs native" in table and "GFLOP/s" in table
    # The header names the CPU and its vector extensions, which decide the kernels timed.
    env = doc["environment"]
    assert env["cpu_flags"] and f"on {env['cpu']} ({env['cpu_flags']}; " in table


def test_bench_names_the_settings_that_kept_libraries_to_fewer_vector_extensions(
        workload_file, tmp_path, capsys, monkeypatch):
    # Such a run times another machine's code paths on this one: the header says so.
    for name in ISA_LIMITS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("RNNBENCH_FUSED_MARCH", "x86-64-v3")
    code = cli.main(["bench", "--impl", "eager", "--workload", workload_file, "--threads", "1",
                     "--json", str(tmp_path / "bench.json")])
    assert code == 0
    assert "; limited by RNNBENCH_FUSED_MARCH=x86-64-v3; " in " ".join(
        capsys.readouterr().out.split())


def test_bench_exits_1_when_an_implementation_fails_and_keeps_the_others(workload_file, tmp_path):
    target = tmp_path / "mine.py"
    target.write_text(IMPLS_FILE)
    out = tmp_path / "bench.json"
    code = cli.main(["bench", "--impl", f"native,{target}:BROKEN", "--workload", workload_file,
                     "--threads", "1", "--json", str(out)])
    assert code == 1
    doc = read_json(out, (BENCH_SCHEMA,))
    assert {r["status"] for r in doc["results"] if r["impl"] == "broken"} == {"failed"}
    assert {r["status"] for r in doc["results"] if r["impl"] == "native"} == {"ok"}


@pytest.mark.parametrize("argv, message", [
    (["--preset", "nope"], "unknown preset"),
    (["--workload", "/nonexistent/w.json"], "no such workload file"),
    (["--threads", "0"], "--threads must be 1 to 1024, got 0"),
    (["--kind", "transformer"], "unknown kind"),
    (["--preset", "goals", "--kind", "lstm_cell"], "no workload of kind 'lstm_cell'"),
    (["--impl", "no-such-impl"], "unknown implementation"),
    (["--device", "tpu"], "--device must be cpu or cuda"),
    (["--budget", "0"], "--budget must be positive"),
])
def test_bench_usage_errors_exit_2_with_one_line(argv, message, capsys):
    assert cli.main(["bench", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and "\n" not in err and "Traceback" not in err


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU")
def test_bench_on_cuda_without_a_gpu_exits_2(capsys):
    assert cli.main(["bench", "--device", "cuda"]) == 2
    assert "no CUDA device" in capsys.readouterr().err


# --- noise, conformance and the environment, per result (rnnbench.bench/2) ------------------

class OneLayerOnly(nn.RNN):
    """A from-scratch mistake: whatever num_layers says, only the first layer runs (its output
    is the module's), so every number past layer 0 is wrong."""

    def forward(self, x, hx=None):
        output, h_n = super().forward(x, hx)
        return output * 1.05, h_n


class SetsThreads(nn.RNN):
    def forward(self, *args):
        torch.set_num_threads(1)
        return super().forward(*args)


def test_every_result_keeps_its_raw_samples_and_its_median_is_theirs():
    doc = run_benchmarks([impl("native")], [tiny(min_repeats=6)], threads=1)
    for r in doc["results"]:
        assert len(r["samples_s"]) == r["repeats"] >= 6
        assert r["median_s"] == pytest.approx(statistics.median(r["samples_s"]))
        assert r["noisy"] == (r["iqr_s"] > 0.10 * r["median_s"])


def test_a_non_conforming_implementation_is_timed_but_never_a_speed_up():
    doc = run_benchmarks([impl("native"), impl("wrong", rnn=OneLayerOnly)], [tiny()], threads=1)
    for metric in ("forward", "forward_backward"):
        wrong, native = results_by(doc, "wrong", metric), results_by(doc, "native", metric)
        assert wrong["status"] == "ok" and wrong["median_s"] > 0
        assert wrong["conforms"] is False and "differs from the reference" in wrong["conformance_note"]
        assert wrong["vs_native"] is wrong["vs_native_ci"] is wrong["vs_native_verdict"] is None
        assert native["conforms"] is True and native["conformance_note"] is None


def test_a_conforming_implementation_gets_a_ratio_with_an_interval_and_a_verdict():
    doc = run_benchmarks([impl("native"), impl("same")], [tiny(min_repeats=9)], threads=1)
    same = results_by(doc, "same")
    low, high = same["vs_native_ci"]
    assert low <= high and same["conforms"] is True
    expected = "faster" if low > 1 else "slower" if high < 1 else "within_noise"
    # Timed in rounds, so one side stalling in some rounds and not the other (a machine this
    # test shares) shows in the round-by-round ratios; the whole machine slowing does not.
    rounds = zip(results_by(doc, "native")["samples_s"], same["samples_s"])
    if is_bimodal([native / candidate for native, candidate in rounds]):
        expected = "not_judged"
    assert same["vs_native_verdict"] == expected


def test_on_a_busy_machine_no_speed_up_is_judged_and_bimodal_samples_are_flagged(monkeypatch):
    monkeypatch.setattr(harness, "measure_usage", lambda: Usage(0.9, 0.0))
    doc = run_benchmarks([impl("native"), impl("same")], [tiny(min_repeats=9)], threads=1)
    assert doc["machine_check"]["busy"] is True
    for metric in ("forward", "forward_backward"):
        same = results_by(doc, "same", metric)
        assert same["vs_native_verdict"] == "not_judged" and same["vs_native"] > 0
        assert same["bimodal"] == is_bimodal(same["samples_s"])


def test_a_peak_far_below_the_best_an_earlier_run_measured_here_is_a_busy_machine(tmp_path):
    earlier = run_benchmarks([impl("native")], [tiny()], threads=1)
    earlier["machine_check"]["best_peak_gflops"] = 4 * FAKE_PEAK["gflops"]
    write_json(tmp_path / "bench.json", earlier)
    check = run_benchmarks([impl("native")], [tiny()], threads=1,
                           history=tmp_path)["machine_check"]
    assert check["busy"] is True and check["best_peak_gflops"] == 4 * FAKE_PEAK["gflops"]
    assert check["reasons"] == ["GEMM peak 50 GFLOP/s, below 50% of the 200 an earlier run "
                                f"measured here ({tmp_path / 'bench.json'})"]
    other = run_benchmarks([impl("native")], [tiny()], threads=2, history=tmp_path)
    assert other["machine_check"]["busy"] is False     # another thread count: not comparable


def test_an_implicit_model_is_checked_against_its_reference_in_float64():
    from rnnbench.impls.implicit import IMPLEMENTATION
    w = workload_from_dict({"name": "imp", "config": {"kind": "implicit", "input_size": 2, "hidden_size": 4,
                                                      "implicit_size": 3, "output_size": 1},
                            "batch": 2, "steps": 3, "budget_s": 0.01, "min_repeats": 3,
                            "metrics": ["forward"]})
    assert results_by(run_benchmarks([IMPLEMENTATION], [w], threads=1), "implicit")["conforms"] is True
    no_float64 = Implementation(name="no64", kinds=IMPLEMENTATION.kinds,
                                unsupported=frozenset({"float64"}))
    unchecked = results_by(run_benchmarks([no_float64], [w], threads=1), "no64")
    assert unchecked["status"] == "ok" and unchecked["conforms"] is None
    assert unchecked["conformance_note"] == "not checked: needs float64, which no64 declares unsupported"


def test_the_thread_count_recorded_is_the_one_in_effect(monkeypatch):
    torch.set_num_threads(2)
    doc = run_benchmarks([impl("native")], [tiny()], threads=1)
    assert doc["threads"] == doc["environment"]["threads"] == 1
    assert {r["threads"] for r in doc["results"]} == {1}
    changed = run_benchmarks([impl("native"), impl("sets", rnn=SetsThreads)],
                             [tiny(metrics=["forward"])], threads=2)
    result = results_by(changed, "sets")
    assert result["threads"] == 1
    assert "torch's thread count changed from 2 to 1 while timed" in result["warnings"]
    assert torch.get_num_threads() == 2


def test_the_machine_check_is_in_the_document_and_says_when_it_is_busy(monkeypatch):
    quiet = run_benchmarks([impl("native")], [tiny()], threads=1)["machine_check"]
    assert quiet["busy"] is False and quiet["reasons"] == []
    assert quiet["peak_gflops_samples"] == FAKE_PEAK["samples"]
    assert quiet["peak_gflops_median"] == FAKE_PEAK["gflops"] and quiet["cores"] >= 1
    monkeypatch.setattr(harness, "measure_usage", lambda: Usage(0.9, 0.2))
    busy = run_benchmarks([impl("native")], [tiny()], threads=1)["machine_check"]
    assert busy["busy"] is True and len(busy["reasons"]) == 2
    assert busy["steal_fraction"] == 0.2


def test_with_wait_everything_is_prepared_before_the_machine_is_checked_and_timed(monkeypatch):
    events = []

    class Logged(nn.RNN):
        def forward(self, *args):
            events.append("call")
            return super().forward(*args)

    monkeypatch.setattr(harness, "measure_usage", lambda: events.append("machine check") or QUIET)
    run_benchmarks([impl("native", rnn=Logged)], [tiny(), tiny(name="second")], threads=1,
                   wait=lambda: events.append("wait"))
    waited = events.index("wait")
    # Before waiting: each workload's pre-check and one first call per metric, nothing more.
    assert events[:waited].count("call") <= 2 * 3 and "machine check" not in events[:waited]
    assert events[waited + 1] == "machine check" and events.count("call") > 2 * (waited + 5)


def test_cpu_peak_memory_is_the_most_allocated_at_once_during_the_call():
    mib = 2**20

    def allocate():
        first = torch.ones(16 * mib // 4)
        second = torch.ones(8 * mib // 4)
        del first
        third = torch.ones(4 * mib // 4)
        return second, third

    kept = torch.ones(32 * mib // 4)  # allocated before: not part of the call's peak
    measured = peak_memory_bytes(allocate, "cpu")
    assert 24 * mib <= measured < 24 * mib + 64 * 1024
    assert kept.numel()


def test_the_gemm_peak_is_the_median_of_its_runs_with_their_spread():
    peak = gemm_peak("cpu", runs=5)
    assert len(peak["samples"]) == 5
    assert peak["gflops"] == statistics.median(peak["samples"])
    q1, _, q3 = statistics.quantiles(peak["samples"], n=4, method="inclusive")
    assert peak["iqr_gflops"] == pytest.approx(q3 - q1)
    assert peak["library"] in gemm_libraries(*[torch.ones(2, 2)] * 3)


def test_the_gemm_peak_is_timed_on_the_fastest_library():
    # The library that runs a GEMM fastest differs by CPU: each is timed, the fastest kept.
    calls = {"slow": lambda: time.sleep(0.004), "fast": lambda: time.sleep(0.001),
             "slower": lambda: time.sleep(0.008)}
    name, call = fastest(calls, sync=lambda: None)
    assert (name, call) == ("fast", calls["fast"])


def test_the_cpu_gemm_libraries_compute_the_same_product():
    generator = torch.Generator().manual_seed(0)
    a, b = torch.randn(64, 32, generator=generator), torch.randn(32, 48, generator=generator)
    out = torch.empty(64, 48)
    libraries = gemm_libraries(a, b, out)
    assert "torch.mm" in libraries
    expected = a.double() @ b.double()
    for name, multiply in libraries.items():
        assert torch.allclose(multiply().double(), expected, rtol=1e-5, atol=1e-4), name


# --- the command: table, markings, early errors ------------------------------------------------

WRONG_FILE = """
from torch import nn

class OneLayerOnly(nn.RNN):
    def forward(self, x, hx=None):
        output, h_n = super().forward(x, hx)
        return output * 1.05, h_n
"""


def test_bench_marks_non_conforming_results(workload_file, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "wrong.py").write_text(WRONG_FILE)
    code = cli.main(["bench", "--impl", "native,wrong.py:OneLayerOnly", "--kind", "rnn",
                     "--workload", workload_file, "--threads", "1"])
    assert code == 0
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.startswith("wrong.py")]
    assert len(rows) == 2 and all("non-conforming" in row for row in rows)
    assert ("wrong.py:OneLayerOnly: non-conforming: output differs from the reference"
            in " ".join(out.split()))
    assert "2 non-conforming" in out
    assert max(len(line) for line in out.splitlines()) <= 100


def test_vs_native_cells_never_show_a_speed_up_that_is_not_one():
    from rnnbench.benchmarks.result import BenchResult
    from rnnbench.commands.bench import vs_native_cell

    def vs_native(fields, busy=False):
        return vs_native_cell(BenchResult(workload="w", metric="forward", **fields), busy)

    ok = {"status": "ok", "impl": "mine", "conforms": True, "vs_native": 1.3,
          "vs_native_ci": [1.2, 1.4], "vs_native_verdict": "faster"}
    assert vs_native(ok) == "1.30x (1.20-1.40)"
    assert vs_native({**ok, "vs_native_ci": [0.9, 1.6], "vs_native_verdict": "within_noise"}) \
        == "≈ native (within noise)"
    assert vs_native({**ok, "conforms": False, "vs_native": None}) == "non-conforming"
    assert vs_native({**ok, "impl": "native"}) == "baseline"
    assert vs_native({**ok, "vs_native_ci": None, "vs_native_verdict": None}) == "1.30x (no interval)"
    unjudged = {**ok, "vs_native_verdict": "not_judged"}
    assert vs_native(unjudged, busy=True) == "not judged: busy machine"
    assert vs_native(unjudged) == "not judged: bimodal samples"


def test_bench_says_a_busy_machine_in_its_first_line(workload_file, monkeypatch, capsys):
    monkeypatch.setattr(harness, "measure_usage", lambda: Usage(0.8, 0.0))
    assert cli.main(["bench", "--impl", "eager", "--workload", workload_file,
                     "--threads", "1"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == ("BUSY MACHINE, speed-ups not judged: other processes used "
                                   f"80% of {os.cpu_count()} cores")
    eager = [line for line in out.splitlines() if line.startswith("eager")]
    assert len(eager) == 2 and all("not judged: busy machine" in line for line in eager)
    assert "2 not judged" in out and "--threads 1" not in out     # timed on one thread already


def test_bench_on_a_quiet_machine_says_nothing_of_the_sort(workload_file, capsys):
    assert cli.main(["bench", "--impl", "native", "--workload", workload_file, "--threads", "1"]) == 0
    out = capsys.readouterr().out
    assert "BUSY" not in out and "measured fp32 GEMM peak 50.0 GFLOP/s (onednn, median of 3 runs, IQR 2%)" in out


def test_bench_with_threads_1_records_1_everywhere(workload_file, tmp_path):
    out = tmp_path / "b.json"
    assert cli.main(["bench", "--impl", "native", "--workload", workload_file, "--threads", "1",
                     "--json", str(out)]) == 0
    doc = read_json(out, (BENCH_SCHEMA,))
    assert doc["environment"]["threads"] == doc["threads"] == 1
    assert {r["threads"] for r in doc["results"]} == {1}


@pytest.fixture
def no_benchmarks(monkeypatch):
    """Fails the test if any benchmark would be run."""
    def refuse(*args, **kwargs):
        raise AssertionError("the benchmarks ran before the usage error")
    monkeypatch.setattr(harness, "run_benchmarks", refuse)


def unwritable_places(tmp_path):
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    return {"a folder": str(tmp_path), "under a file": str(a_file / "out.json")}


@pytest.mark.parametrize("place", ["a folder", "under a file"])
def test_bench_json_that_cannot_be_written_fails_first(place, tmp_path, capsys, no_benchmarks):
    path = unwritable_places(tmp_path)[place]
    assert cli.main(["bench", "--impl", "native", "--json", path]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"rnnbench bench: error: --json {path}: ")


@pytest.mark.parametrize("place", ["a folder", "under a file"])
def test_coldstart_json_that_cannot_be_written_fails_first(place, tmp_path, capsys, monkeypatch):
    from rnnbench.commands import coldstart
    monkeypatch.setattr(coldstart, "cold_start", lambda *a, **k: pytest.fail("it ran"))
    path = unwritable_places(tmp_path)[place]
    assert cli.main(["coldstart", "--json", path]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"--json {path}: " in err


def test_run_out_that_is_a_file_fails_first(tmp_path, capsys, monkeypatch):
    import rnnbench.suites
    monkeypatch.setattr(rnnbench.suites, "conform", lambda *a, **k: pytest.fail("it ran"),
                        raising=False)
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    assert cli.main(["run", "--out", str(a_file)]) == 2
    err = capsys.readouterr().err
    assert err == f"rnnbench run: error: --out {a_file}: is a file, not a folder\n"


@pytest.mark.parametrize("argv, message", [
    (["--impl", "eager", "--kind", "implicit"],
     "nothing to measure on the implicit workloads: eager: provides no 'implicit'"),
    (["--impl", "implicit", "--kind", "rnn"],
     "nothing to measure on the rnn workloads: implicit: provides no 'rnn'"),
])
def test_bench_with_nothing_to_measure_is_a_usage_error(argv, message, capsys, no_benchmarks):
    assert cli.main(["bench", *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


class IgnoresLayersAndDirections(nn.RNN):
    """The from-scratch mistake in the wild: one layer, one direction, whatever was asked."""

    def __init__(self, input_size, hidden_size, num_layers=1, nonlinearity="tanh", bias=True,
                 batch_first=False, dropout=0.0, bidirectional=False, device=None, dtype=None):
        super().__init__(input_size, hidden_size, nonlinearity=nonlinearity, bias=bias,
                         batch_first=batch_first, device=device, dtype=dtype)


def test_an_rnn_that_ignores_num_layers_and_bidirectional_is_timed_as_non_conforming():
    deep = tiny(config={"kind": "rnn", "input_size": 3, "hidden_size": 4, "num_layers": 2,
                        "bidirectional": True})
    doc = run_benchmarks([impl("native"), impl("scratch", rnn=IgnoresLayersAndDirections)], [deep],
                         threads=1)
    scratch = results_by(doc, "scratch")
    assert scratch["status"] == "ok" and scratch["conforms"] is False
    assert scratch["conformance_note"].startswith(
        "num_layers=2 and bidirectional=True ignored: the module holds the parameters it holds "
        "with num_layers=1 and bidirectional=False")
    assert scratch["vs_native"] is None


class NumberedLinearsGRUCell(nn.Module):
    """torch.nn's GRU cell from nn.Linear submodules named fc1 to fc6: no rule reads them."""

    def __init__(self, input_size, hidden_size):
        super().__init__()
        for n, width in zip(range(1, 7), [input_size] * 3 + [hidden_size] * 3):
            setattr(self, f"fc{n}", nn.Linear(width, hidden_size))

    def forward(self, x, h=None):
        h = x.new_zeros(x.shape[0], self.fc4.out_features) if h is None else h
        r = torch.sigmoid(self.fc1(x) + self.fc4(h))
        z = torch.sigmoid(self.fc2(x) + self.fc5(h))
        n = torch.tanh(self.fc3(x) + r * self.fc6(h))
        return (1 - z) * n + z * h


def test_parameters_that_cannot_be_matched_give_no_speed_up_and_say_what_bench_takes():
    cell = workload_from_dict({"name": "cell", "config": {"kind": "gru_cell", "input_size": 3,
                                                          "hidden_size": 4},
                               "batch": 2, "budget_s": 0.01, "min_repeats": 3})
    doc = run_benchmarks([Implementation(name="native", kinds={"gru_cell": nn.GRUCell}),
                          Implementation(name="mine", kinds={"gru_cell": NumberedLinearsGRUCell})],
                         [cell], threads=1)
    mine = results_by(doc, "mine")
    assert mine["status"] == "ok" and mine["conforms"] is False and mine["vs_native"] is None
    assert mine["conformance_note"].startswith("its parameters could not be matched to the spec's, "
                                               "so its numbers were not compared")
    assert "an Implementation's param_map" in mine["conformance_note"]
    assert "--param-map" not in mine["conformance_note"]  # bench has no such option


def test_a_cell_workload_is_pre_checked_too():
    cell = workload_from_dict({"name": "cell", "config": {"kind": "gru_cell", "input_size": 3,
                                                          "hidden_size": 4},
                               "batch": 2, "budget_s": 0.01, "min_repeats": 3})
    doc = run_benchmarks([Implementation(name="native", kinds={"gru_cell": nn.GRUCell})], [cell],
                         threads=1)
    assert {r["conforms"] for r in doc["results"]} == {True}


# --- ragged batches: packed against padded ------------------------------------------------------

def test_ragged_lengths_are_seeded_in_range_and_the_first_is_the_longest():
    from rnnbench.benchmarks.workloads import ragged_lengths

    lengths = ragged_lengths(32, 100)
    assert lengths == ragged_lengths(32, 100)
    assert len(lengths) == 32 and lengths[0] == 100 and all(1 <= n <= 100 for n in lengths)
    assert len(set(lengths)) > 10     # ragged, not a constant
    assert statistics.median(lengths) < 50


@pytest.mark.parametrize("changes, message", [
    ({"packed": True}, "packed applies to ragged workloads"),
    ({"ragged": True, "config": {"kind": "gru_cell", "input_size": 3, "hidden_size": 4}},
     "ragged applies to the kinds rnn, lstm, gru"),
    ({"ragged": "yes"}, "ragged and packed must be true or false"),
])
def test_a_wrong_ragged_workload_is_refused_with_a_reason(changes, message):
    with pytest.raises(ValueError, match=message):
        tiny(**changes)


def test_a_packed_workload_calls_the_module_with_a_packed_sequence_of_its_lengths():
    from torch.nn.utils.rnn import PackedSequence

    from rnnbench.benchmarks.tasks import build_task
    from rnnbench.impls import load

    w = tiny(ragged=True, packed=True, steps=9, batch=5)
    out = build_task(load("native"), w, "cpu").steps["forward"]()[0]
    assert isinstance(out, PackedSequence)
    assert out.data.shape[0] == sum(w.lengths) == w.tokens
    build_task(load("native"), w, "cpu").steps["forward_backward"]()


def test_an_implementation_without_packed_input_is_not_timed_on_a_packed_workload():
    impl = Implementation("plain", kinds={"rnn": nn.RNN}, unsupported=frozenset({"packed"}))
    packed, padded = tiny(ragged=True, packed=True), tiny(ragged=True)
    assert "packed" in skip_reason(impl, packed, "cpu", "forward")
    assert skip_reason(impl, padded, "cpu", "forward") is None


def test_the_document_records_the_preset_and_the_budget_it_ran_with(tmp_path):
    out = tmp_path / "bench.json"
    assert cli.main(["bench", "--impl", "native", "--kind", "rnn_cell", "--budget", "0.01",
                     "--json", str(out)]) == 0
    doc = read_json(out)
    assert doc["preset"] == "quick" and doc["budget_s"] == 0.01
