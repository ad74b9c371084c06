"""`rnnbench compare` as a gate: the rank test on raw samples with the threshold, the IQR rule for
files without samples (said in the output), missing results, and the gate's error-rate script."""
import json

import numpy as np
import pytest
from torch import nn

from rnnbench.benchmarks import gate_error_rates
from rnnbench.cli import main
from rnnbench.reports.regression import Gate, rank_test

WORKLOADS = ("w1", "w2", "w3")


def samples(median, n=9, spread=0.01, seed=0):
    rng = np.random.default_rng(seed)
    return list(median * (1 + spread * rng.uniform(-1, 1, n)))


def result(impl, workload, taken, schema_2=True):
    values = sorted(taken)
    q1, q3 = np.percentile(values, [25, 75])
    item = {"impl": impl, "kind": "rnn", "workload": workload, "device": "cpu", "dtype": "float32",
            "metric": "forward", "status": "ok", "reason": None, "median_s": float(np.median(values)),
            "iqr_s": float(q3 - q1), "repeats": len(values)}
    return {**item, "samples_s": taken} if schema_2 else item


def doc(results, schema_2=True):
    return {"schema": "rnnbench.bench/2" if schema_2 else "rnnbench.bench/1",
            "environment": {"hostname": "box", "cpu": "c", "torch": "2.13.0", "threads": 2},
            "peak_gflops": 100.0, "results": results}


def files(tmp_path, head_scale=1.0, *, spread=0.01, base_2=True, head_2=True, drop=()):
    base = doc([result("eager", w, samples(1e-3, spread=spread, seed=i), base_2)
                for i, w in enumerate(WORKLOADS)], base_2)
    head = doc([result("eager", w, samples(1e-3 * head_scale, spread=spread, seed=10 + i), head_2)
                for i, w in enumerate(WORKLOADS) if w not in drop], head_2)
    paths = tmp_path / "base.json", tmp_path / "head.json"
    for path, data in zip(paths, (base, head)):
        path.write_text(json.dumps(data))
    return [str(p) for p in paths]


def verdicts(out):
    return [line.split()[-1] if not line.endswith("noise") else "within noise"
            for line in out.splitlines() if line.startswith("eager")]


def test_a_ten_percent_slow_down_in_tight_samples_is_a_regression_by_the_rank_test(tmp_path, capsys):
    assert main(["compare", *files(tmp_path, 1.10)]) == 1
    out = capsys.readouterr().out
    assert max(map(len, out.splitlines())) <= 100
    assert verdicts(out) == ["regression"] * 3
    assert "3 judged by the rank test: one-sided Mann-Whitney U on the raw samples, p < 0.01" in out
    assert "p=" in out and "IQR rule" not in out


def test_the_same_code_twice_passes(tmp_path, capsys):
    assert main(["compare", *files(tmp_path, 1.0)]) == 0
    assert "OK: no regression past 5.0%" in capsys.readouterr().out


def test_a_slow_down_inside_wide_noise_is_not_a_regression(tmp_path, capsys):
    assert main(["compare", *files(tmp_path, 1.10, spread=0.3)]) == 0
    assert set(verdicts(capsys.readouterr().out)) <= {"within noise"}


def test_a_real_change_below_the_threshold_is_said_so(tmp_path, capsys):
    assert main(["compare", *files(tmp_path, 1.03, spread=0.002)]) == 0
    assert verdicts(capsys.readouterr().out) == ["threshold"] * 3    # "below threshold"


def test_a_speed_up_is_an_improvement(tmp_path, capsys):
    assert main(["compare", *files(tmp_path, 0.8)]) == 0
    assert verdicts(capsys.readouterr().out) == ["improvement"] * 3


def test_results_missing_in_head_fail_unless_allowed(tmp_path, capsys):
    paths = files(tmp_path, 1.0, drop=("w3",))
    assert main(["compare", *paths]) == 1
    out = capsys.readouterr().out
    w3 = out.splitlines()[out.splitlines().index("w3 (rnn, cpu, float32)") + 3]
    assert w3.startswith("eager") and w3.endswith("missing")
    assert "FAIL: 1 missing" in out
    assert main(["compare", *paths, "--allow-missing"]) == 0


@pytest.mark.parametrize("base_2, head_2", [(False, False), (True, False), (False, True)])
def test_files_without_samples_fall_back_to_the_iqr_rule_and_say_so(tmp_path, capsys, base_2, head_2):
    assert main(["compare", *files(tmp_path, 1.2, base_2=base_2, head_2=head_2)]) == 1
    out = capsys.readouterr().out
    assert "3 judged by the IQR rule (no raw samples, e.g. bench/1)" in out
    assert "rank test" not in out and verdicts(out) == ["regression"] * 3


def test_a_bad_alpha_is_a_usage_error(tmp_path, capsys):
    assert main(["compare", *files(tmp_path), "--alpha", "1.5"]) == 2
    assert capsys.readouterr().err == "rnnbench compare: error: --alpha must be between 0 and 1, got 1.5\n"


def test_the_rank_test_has_the_exact_mann_whitney_p_values():
    # Five against five, completely separated: 1 of the C(10, 5) = 252 orderings, one-sided.
    assert rank_test([1, 2, 3, 4, 5], [6, 7, 8, 9, 10], slower=True) == pytest.approx(1 / 252)
    assert rank_test([1, 2, 3, 4, 5], [6, 7, 8, 9, 10], slower=False) == pytest.approx(1.0)


# --- the gate's error rates -----------------------------------------------------------------

class Sleeps(nn.Module):
    def forward(self, x):
        import time
        time.sleep(0.02)
        return x


def test_a_slowed_copy_takes_the_planted_fraction_longer():
    from time import perf_counter
    module = gate_error_rates.slowed(Sleeps, 0.5)()
    start = perf_counter()
    module(1)
    assert perf_counter() - start >= 0.03
    assert isinstance(module, Sleeps)


def planted_docs(runs, fractions):
    docs = []
    for run in range(runs):
        rows = [result("eager", w, samples(1e-3, seed=100 * run + i)) for i, w in enumerate(WORKLOADS)]
        for fraction in fractions:
            name = gate_error_rates.planted_name("eager", fraction)
            rows += [{**result("eager", w, samples(1e-3 * (1 + fraction), seed=100 * run + 50 + i)),
                      "impl": name} for i, w in enumerate(WORKLOADS)]
        docs.append(doc(rows))
    return docs


def test_error_rates_count_false_alarms_and_catches_per_comparison_and_result():
    rates = gate_error_rates.error_rates(planted_docs(4, [0.10, 0.01]), "eager", [0.10, 0.01],
                                         Gate(threshold=0.05))
    assert rates["comparisons"] == 3
    assert rates["aa"] == {"failed_comparisons": 0, "comparisons": 3, "flagged_results": 0,
                           "compared_results": 9}
    assert rates["eager+10%"]["failed_comparisons"] == 3 and rates["eager+10%"]["flagged_results"] == 9
    assert rates["eager+1%"]["failed_comparisons"] == 0   # below the threshold: never a regression


def test_the_error_rate_script_runs_end_to_end(tmp_path, capsys):
    workload = {"name": "tiny", "config": {"kind": "rnn", "input_size": 3, "hidden_size": 4},
                "batch": 2, "steps": 3, "budget_s": 0.01, "min_repeats": 5}
    path = tmp_path / "w.json"
    path.write_text(json.dumps({"workloads": [workload]}))
    out = tmp_path / "rates.json"
    assert gate_error_rates.main(["--runs", "2", "--impl", "native", "--workload", str(path),
                                  "--threads", "1", "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "1 comparisons of consecutive runs of native:" in printed
    assert "caught native+10% (planted): " in printed
    saved = json.loads(out.read_text())
    assert len(saved["runs"]) == 2 and saved["rates"]["aa"]["compared_results"] == 1


def drifting_files(tmp_path, impl_scale, native_scale):
    """BASE and HEAD with native and eager on every workload; HEAD's eager times scaled by
    `impl_scale`, its native times by `native_scale` (the whole machine slower or faster)."""
    def run(scale_eager, scale_native, seed):
        return doc([result(impl, w, samples(1e-3 * scale, seed=seed + 2 * i + offset))
                    for i, w in enumerate(WORKLOADS)
                    for impl, scale, offset in (("native", scale_native, 0),
                                                ("eager", scale_eager, 1))])
    paths = tmp_path / "base.json", tmp_path / "head.json"
    paths[0].write_text(json.dumps(run(1.0, 1.0, 0)))
    paths[1].write_text(json.dumps(run(impl_scale, native_scale, 100)))
    return [str(p) for p in paths]


def test_a_machine_slower_for_every_implementation_is_no_regression(tmp_path, capsys):
    # HEAD ran 10% slower across the board: eager's time relative to native did not change
    assert main(["compare", *drifting_files(tmp_path, 1.10, 1.10)]) == 1  # native itself is raw
    out = capsys.readouterr().out
    assert set(verdicts(out)) <= {"within noise"}
    assert "3 judged by the rank test against native" in out


def test_a_slow_down_of_one_implementation_is_caught_relative_to_native(tmp_path, capsys):
    assert main(["compare", *drifting_files(tmp_path, 1.10, 1.0)]) == 1
    out = capsys.readouterr().out
    assert verdicts(out) == ["regression"] * 3
    assert "3 judged by the rank test against native" in out


# --- what the gate cannot judge, busy inputs, environments ------------------------------------

def write_pair(tmp_path, base, head):
    paths = tmp_path / "base.json", tmp_path / "head.json"
    for path, data in zip(paths, (base, head)):
        path.write_text(json.dumps(data))
    return [str(p) for p in paths]


def runs(tmp_path, change_head=lambda item: item, head_extra=None, head_scale=1.0):
    """BASE and HEAD with eager on w1; HEAD's result passed through `change_head`."""
    base = doc([result("eager", "w1", samples(1e-3))])
    head = doc([change_head(result("eager", "w1", samples(1e-3 * head_scale, seed=1)))])
    return write_pair(tmp_path, base, {**head, **(head_extra or {})})


def verdict_of(out):
    [line] = [line for line in out.splitlines() if line.startswith("eager")]
    return line.split("  ")[-1].strip()


def test_a_result_that_stopped_conforming_fails_however_fast(tmp_path, capsys):
    paths = runs(tmp_path, lambda item: {**item, "conforms": False}, head_scale=0.5)
    assert main(["compare", *paths]) == 1
    out = capsys.readouterr().out
    assert verdict_of(out) == "non-conforming" and "FAIL: 1 non-conforming" in out
    assert main(["compare", *paths, "--unjudged", "inconclusive"]) == 3
    assert "INCONCLUSIVE: 1 non-conforming" in capsys.readouterr().out


@pytest.mark.parametrize("status", ["unavailable", "not_supported"])
def test_a_result_head_could_not_time_fails_or_is_inconclusive_by_option(tmp_path, capsys, status):
    def not_timed(item):
        return {**item, "status": status, "reason": "no GPU", "median_s": None, "iqr_s": None,
                "samples_s": [], "repeats": 0}
    paths = runs(tmp_path, not_timed)
    assert main(["compare", *paths]) == 1
    assert verdict_of(capsys.readouterr().out) == "not comparable"
    assert main(["compare", *paths, "--unjudged", "inconclusive"]) == 3


def test_a_workload_redefined_under_its_old_name_is_not_compared(tmp_path, capsys):
    # 20 steps in BASE, 12 in HEAD: HEAD's 40% "speed-up" is less work, not faster code.
    base = doc([{**result("eager", "w1", samples(1e-3)), "steps": 20, "batch": 16}])
    head = doc([{**result("eager", "w1", samples(0.6e-3, seed=1)), "steps": 12, "batch": 16}])
    paths = write_pair(tmp_path, base, head)
    assert main(["compare", *paths]) == 1
    out = capsys.readouterr().out
    assert verdict_of(out) == "other sizes" and "steps 20 -> 12" in out
    assert "FAIL: 1 other sizes" in out
    assert main(["compare", *paths, "--unjudged", "inconclusive"]) == 3


def test_sizes_from_the_documents_workload_lists_are_compared_too(tmp_path, capsys):
    def with_workload(hidden_size):
        return {**doc([result("eager", "w1", samples(1e-3))]),
                "workloads": [{"name": "w1", "config": {"kind": "rnn", "input_size": 8,
                                                        "hidden_size": hidden_size}}]}
    assert main(["compare", *write_pair(tmp_path, with_workload(64), with_workload(64))]) == 0
    capsys.readouterr()
    assert main(["compare", *write_pair(tmp_path, with_workload(64), with_workload(32))]) == 1
    assert "hidden_size 64 -> 32" in capsys.readouterr().out


def test_a_result_that_failed_in_both_runs_still_fails(tmp_path, capsys):
    def failed(item):
        return {**item, "status": "failed", "reason": "boom", "median_s": None, "iqr_s": None,
                "samples_s": [], "repeats": 0}
    base = doc([failed(result("eager", "w1", samples(1e-3)))])
    assert main(["compare", *write_pair(tmp_path, base, base)]) == 1
    assert verdict_of(capsys.readouterr().out) == "failed"


def test_a_duplicate_result_fails_even_when_one_copy_is_fine(tmp_path, capsys):
    base = doc([result("eager", "w1", samples(1e-3))])
    head = doc([result("eager", "w1", samples(1e-3, seed=1)),
                result("eager", "w1", samples(1.3e-3, seed=2))])
    paths = write_pair(tmp_path, base, head)
    assert main(["compare", *paths]) == 1
    assert "FAIL: 1 duplicate" in capsys.readouterr().out
    assert main(["compare", *paths, "--unjudged", "inconclusive"]) == 3


def test_a_missing_result_is_inconclusive_by_option_and_passes_when_allowed(tmp_path, capsys):
    paths = files(tmp_path, 1.0, drop=("w3",))
    assert main(["compare", *paths, "--unjudged", "inconclusive"]) == 3
    assert "INCONCLUSIVE: 1 missing" in capsys.readouterr().out
    assert main(["compare", *paths, "--unjudged", "inconclusive", "--allow-missing"]) == 0


BUSY = {"busy": True, "reasons": ["other processes used 90% of 2 cores"]}


@pytest.mark.parametrize("busy_side", ["base", "head"])
def test_an_input_timed_on_a_busy_machine_is_inconclusive_even_with_a_slow_down(
        tmp_path, capsys, busy_side):
    base, head = (json.loads(open(p).read()) for p in files(tmp_path, 1.10))
    (base if busy_side == "base" else head)["machine_check"] = BUSY
    assert main(["compare", *write_pair(tmp_path, base, head)]) == 3
    out = capsys.readouterr().out
    assert max(map(len, out.splitlines())) <= 100
    assert " ".join(out.split()).startswith(
        f"inconclusive: {busy_side.upper()} ({tmp_path / (busy_side + '.json')}) was timed on "
        "a busy machine (other processes used 90% of 2 cores), so no change of a timing is "
        "judged")
    assert verdicts(out) == ["judged"] * 3        # "not judged", never "regression"
    assert "3 not judged: timed on a busy machine, or with bimodal samples" in out
    assert "rank test" not in out.split("verdict")[-1]      # nothing said to be judged by it
    assert "INCONCLUSIVE: 3 not judged" in out.splitlines()[-1]


def test_a_busy_input_still_fails_on_a_result_that_failed(tmp_path, capsys):
    base, head = (json.loads(open(p).read()) for p in files(tmp_path, 1.0))
    head["results"][0].update(status="failed", reason="boom", median_s=None, iqr_s=None,
                              samples_s=[], repeats=0)
    head["machine_check"] = BUSY
    assert main(["compare", *write_pair(tmp_path, base, head)]) == 1
    out = capsys.readouterr().out
    assert "FAIL: 1 failed" in out and "2 not judged" in out


def test_bimodal_samples_are_not_judged(tmp_path, capsys):
    stalled = samples(1e-3, n=10, seed=1) + samples(3e-3, n=5, seed=2)
    paths = runs(tmp_path, lambda item: {**item, "samples_s": stalled}, head_scale=1.0)
    assert main(["compare", *paths]) == 3
    assert verdict_of(capsys.readouterr().out) == "not judged"


def test_different_cpus_threads_and_torch_versions_are_warned_about(tmp_path, capsys):
    base = doc([{**result("eager", "w1", samples(1e-3)), "threads": 2}])
    head = doc([{**result("eager", "w1", samples(1e-3, seed=1)), "threads": 4}])
    head["environment"] = {**head["environment"], "cpu": "other", "torch": "2.14.0",
                           "threads": 4, "rnnbench": "0.2.0"}
    assert main(["compare", *write_pair(tmp_path, base, head)]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert ("warning: BASE and HEAD differ in cpu (c vs other); threads (2 vs 4); torch "
            "(2.13.0 vs 2.14.0); the thread count of 1 result (e.g. eager rnn w1 cpu float32 "
            "forward: 2 vs 4): a change may come from that, not from the code") in out
    assert "note: BASE and HEAD differ in rnnbench (None vs 0.2.0)" in out


def test_runs_kept_to_other_vector_extensions_are_warned_about(tmp_path, capsys):
    # A document from before the limits were recorded has none: no warning against one that
    # recorded none, a warning against one run under a limit.
    base = doc([result("eager", "w1", samples(1e-3))])
    head = doc([result("eager", "w1", samples(1e-3, seed=1))])
    for limits, warned in (("", False), ("ONEDNN_MAX_CPU_ISA=AVX2", True)):
        head["environment"] = {**head["environment"], "isa_limits": limits}
        assert main(["compare", *write_pair(tmp_path, base, head)]) == 0
        out = " ".join(capsys.readouterr().out.split())
        assert ("differ in isa_limits (None vs ONEDNN_MAX_CPU_ISA=AVX2)" in out) == warned


def pytest_benchmark_file(path, scale, seed, data=True):
    taken = samples(1e-3 * scale, seed=seed)
    stats = {"median": float(np.median(taken)), "iqr": 1e-5, "rounds": len(taken),
             **({"data": taken} if data else {})}
    path.write_text(json.dumps({
        "machine_info": {"node": "box", "cpu": {"brand_raw": "c"}},
        "benchmarks": [{"name": "test_benchmark[w1-forward-eager]", "group": "w1 forward",
                        "stats": stats, "params": {},
                        "extra_info": {"impl": "eager", "workload": {"name": "w1"},
                                       "metric": "forward", "device": "cpu"}}]}))
    return str(path)


def test_pytest_benchmark_raw_data_is_judged_by_the_rank_test(tmp_path, capsys):
    base = pytest_benchmark_file(tmp_path / "base.json", 1.0, 0)
    head = pytest_benchmark_file(tmp_path / "head.json", 1.2, 1)
    assert main(["compare", base, head]) == 1
    out = capsys.readouterr().out
    assert "1 judged by the rank test: one-sided Mann-Whitney U on the raw samples" in out
    assert "no raw samples" not in out and verdicts(out) == ["regression"]
    saved = pytest_benchmark_file(tmp_path / "saved.json", 1.2, 1, data=False)
    assert main(["compare", base, saved]) == 1
    assert "judged by the IQR rule (no raw samples" in capsys.readouterr().out


def native_and_fused(tmp_path, native_scale, fused_scale):
    """BASE and HEAD of native (1 ms) and fused (0.5 ms) on one workload, HEAD's scaled."""
    def run(native, fused, seed):
        return doc([result("native", "w1", samples(native, seed=seed)),
                    result("fused", "w1", samples(fused, seed=seed + 1))])

    paths = tmp_path / "base.json", tmp_path / "head.json"
    paths[0].write_text(json.dumps(run(1e-3, 0.5e-3, 0)))
    paths[1].write_text(json.dumps(run(1e-3 * native_scale, 0.5e-3 * fused_scale, 10)))
    return [str(p) for p in paths]


def fused_row(out):
    return next(line for line in out.splitlines() if line.startswith("fused"))


def test_a_native_that_moved_alone_makes_no_regression_of_what_did_not(tmp_path, capsys):
    # Two runs of one commit on a VM whose GEMMs sped up: native 35% faster, fused unchanged.
    # Against native fused reads 54% slower: not judged, the comparison inconclusive.
    assert main(["compare", *native_and_fused(tmp_path, 0.65, 1.0)]) == 3
    out = capsys.readouterr().out
    assert fused_row(out).endswith("not judged") and "native moved" in fused_row(out)
    assert "1 not judged: native itself changed between the runs" in " ".join(out.split())


def test_a_regression_beside_a_native_that_moved_is_inconclusive_not_a_pass(tmp_path, capsys):
    # native 20% faster, fused twice as slow: the gate cannot tell code from the machine here
    assert main(["compare", *native_and_fused(tmp_path, 0.8, 2.0)]) == 3
    assert fused_row(capsys.readouterr().out).endswith("not judged")


def test_a_native_that_did_not_move_leaves_the_judgement_against_it(tmp_path, capsys):
    assert main(["compare", *native_and_fused(tmp_path, 1.0, 1.5)]) == 1
    out = capsys.readouterr().out
    assert fused_row(out).endswith("regression") and "rank test against native" in out
