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
    assert main(["compare", *files(tmp_path, 1.10, spread=0.5)]) == 0
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
