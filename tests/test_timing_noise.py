"""How sure a timing is: ratio intervals and verdicts from raw samples, the noisy and bimodal
flags, no verdict from a busy machine, and the machine check's signals read from fake
/proc/stat texts and results folders (never by loading the machine)."""
import json
import os

import numpy as np
import pytest

from rnnbench.benchmarks.machine import (CONTENTION_HINT, OTHERS_LIMIT, PEAK_SPREAD_LIMIT,
                                         STEAL_LIMIT, Usage, best_earlier_peak, busy_lines,
                                         machine_check, measure_usage, parse_cpu_times)
from rnnbench.benchmarks.result import BenchResult
from rnnbench.benchmarks.statistics import (is_bimodal, is_noisy, ratio_interval, speedup,
                                            verdict)


def jittered(center, n=9, spread=0.01, seed=0):
    return list(center * (1 + spread * np.random.default_rng(seed).standard_normal(n)))


# --- ratio intervals ----------------------------------------------------------------------

def test_twice_as_fast_with_little_noise_is_faster_and_its_interval_holds_two():
    interval = ratio_interval([(jittered(2e-3), jittered(1e-3, seed=1))])
    assert 1.9 < interval[0] <= 2.0 <= interval[1] < 2.1
    assert verdict(interval) == "faster"


def test_the_same_samples_are_within_noise():
    samples = jittered(1e-3, spread=0.05)
    interval = ratio_interval([(samples, samples)])
    assert interval[0] < 1.0 < interval[1]
    assert verdict(interval) == "within_noise"


def test_a_ten_percent_difference_drowned_in_thirty_percent_noise_is_within_noise():
    interval = ratio_interval([(jittered(1.1e-3, n=5, spread=0.3, seed=2),
                                jittered(1e-3, n=5, spread=0.3, seed=3))])
    assert verdict(interval) == "within_noise"


def test_a_clear_slow_down_is_slower():
    assert verdict(ratio_interval([(jittered(1e-3), jittered(1.5e-3, seed=4))])) == "slower"


def test_the_geometric_mean_of_a_twice_and_a_half_is_one():
    pairs = [(jittered(2e-3), jittered(1e-3, seed=1)), (jittered(1e-3, seed=2), jittered(2e-3, seed=3))]
    low, high = ratio_interval(pairs)
    assert low < 1.0 < high and high / low < 1.2


def test_the_interval_is_the_same_for_the_same_samples():
    pair = [(jittered(1e-3, spread=0.2), jittered(1e-3, spread=0.2, seed=5))]
    assert ratio_interval(pair) == ratio_interval(pair)


def test_no_interval_without_samples():
    assert ratio_interval([([], [1.0])]) is None and ratio_interval([]) is None
    assert ratio_interval([([0.0, 1.0, 2.0], [1.0, 1.0, 1.0])]) is None
    assert ratio_interval([([1.0, 1.1], [1.0, 1.1, 1.2])]) is None    # too few to resample
    assert verdict(None) is None


def test_noisy_means_an_iqr_above_a_tenth_of_the_median():
    assert is_noisy(1.0, 0.11) and not is_noisy(1.0, 0.10) and not is_noisy(1.0, 0.0)


# --- the machine check --------------------------------------------------------------------

# /proc/stat "cpu" lines: user nice system idle iowait irq softirq steal guest guest_nice
BEFORE = "cpu  100 0 50 800 10 0 0 40 0 0\ncpu0 50 0 25 400 5 0 0 20 0 0\nintr 1 2 3\n"
AFTER = "cpu  300 0 100 900 10 0 0 90 0 0\ncpu0 150 0 50 450 5 0 0 45 0 0\nintr 4 5 6\n"


def fake_probe(texts, own_cpu=(0.0, 0.0)):
    texts, own = list(texts), list(own_cpu)
    return dict(read=lambda: texts.pop(0), own_cpu_s=lambda: own.pop(0), sleep=lambda s: None,
                ticks_per_s=100)


def test_cpu_times_are_read_from_the_aggregate_line():
    times = parse_cpu_times(BEFORE)
    assert (times.busy, times.steal, times.total) == (150, 40, 1000)
    assert parse_cpu_times("intr 1 2 3\n") is None


def test_other_processes_share_and_steal_come_from_the_counters_difference():
    # 400 ticks passed: 250 busy, of them 50 (0.5 s at 100 ticks/s) this process's; 50 stolen.
    usage = measure_usage(**fake_probe([BEFORE, AFTER], own_cpu=(1.0, 1.5)))
    assert usage == Usage(others_fraction=200 / 400, steal_fraction=50 / 400)


def test_without_proc_stat_there_is_no_usage():
    assert measure_usage(**fake_probe([None, None])) is None
    assert machine_check({"gflops": 100.0, "iqr_gflops": 1.0}, None)["steal_fraction"] is None


PEAK = {"gflops": 100.0, "iqr_gflops": 2.0, "samples": [98.0, 100.0, 101.0], "library": "torch.mm"}


def test_a_quiet_machine_is_not_busy():
    check = machine_check(PEAK, Usage(0.05, 0.0), cores=2, load_avg=[0.1, 0.2, 0.3])
    assert check == {"cores": 2, "load_avg": [0.1, 0.2, 0.3], "steal_fraction": 0.0,
                     "others_fraction": 0.05, "busy": False, "reasons": [],
                     "peak_gflops_samples": PEAK["samples"], "peak_gflops_median": 100.0,
                     "peak_gflops_iqr": 2.0, "peak_library": PEAK["library"],
                     "best_peak_gflops": 100.0}
    assert busy_lines(check, threads=2) == []


@pytest.mark.parametrize("usage, peak, reason", [
    (Usage(OTHERS_LIMIT + 0.2, 0.0), PEAK, "other processes used 45% of 2 cores"),
    (Usage(0.0, STEAL_LIMIT + 0.05), PEAK, "the hypervisor stole 10% of CPU time"),
    (Usage(0.0, 0.0), {**PEAK, "iqr_gflops": 100.0 * (PEAK_SPREAD_LIMIT + 0.1)},
     f"GEMM peak spread {PEAK_SPREAD_LIMIT + 0.1:.0%} (IQR/median, 3 runs)"),
])
def test_each_signal_past_its_limit_makes_the_machine_busy_with_its_reason(usage, peak, reason):
    check = machine_check(peak, usage, cores=2)
    assert check["busy"] and check["reasons"] == [reason]
    assert busy_lines(check, threads=1) == [f"BUSY MACHINE, speed-ups not judged: {reason}"]


def test_a_peak_below_half_of_the_best_seen_here_makes_the_machine_busy():
    best = {"gflops": 250.0, "file": "out/bench.json"}
    check = machine_check(PEAK, Usage(0.0, 0.0), cores=2, best_peak=best)
    assert check["busy"] and check["reasons"] == [
        "GEMM peak 100 GFLOP/s, below 50% of the 250 an earlier run measured here "
        "(out/bench.json)"]
    assert check["best_peak_gflops"] == 250.0      # carried forward to the next run
    fine = machine_check(PEAK, Usage(0.0, 0.0), cores=2, best_peak={**best, "gflops": 190.0})
    assert not fine["busy"] and fine["best_peak_gflops"] == 190.0


def test_under_contention_several_threads_are_told_to_use_one():
    check = machine_check(PEAK, Usage(0.9, 0.0), cores=2)
    lines = busy_lines(check, threads=2)
    assert lines[0] == "BUSY MACHINE, speed-ups not judged: other processes used 90% of 2 cores"
    assert " ".join(" ".join(lines[1:]).split()) == CONTENTION_HINT
    assert "--threads 1" in CONTENTION_HINT
    assert all(len(line) <= 100 for line in lines)
    assert busy_lines(check, threads=1) == lines[:1]


def bench_doc(cpu="CPU A", threads=2, median=100.0, best=None, device="cpu", tf32=None):
    return {"schema": "rnnbench.bench/2", "device": device, "threads": threads,
            "environment": {"cpu": cpu, "gpu": "GPU A" if device == "cuda" else None},
            "peaks": [{"device": device, "threads": threads, "gflops": median, "tf32": tf32}],
            "machine_check": {"peak_gflops_median": median, "best_peak_gflops": best},
            "results": []}


def test_the_best_earlier_peak_is_of_the_same_processor_and_threads_in_the_folder(tmp_path):
    (tmp_path / "runs").mkdir()
    (tmp_path / "bench.json").write_text(json.dumps(bench_doc(median=120.0)))
    (tmp_path / "runs" / "old.json").write_text(json.dumps(bench_doc(median=90.0, best=150.0)))
    (tmp_path / "other-cpu.json").write_text(json.dumps(bench_doc(cpu="CPU B", median=900.0)))
    (tmp_path / "one-thread.json").write_text(json.dumps(bench_doc(threads=1, median=800.0)))
    (tmp_path / "cuda.json").write_text(json.dumps(bench_doc(device="cuda", median=700.0)))
    (tmp_path / "broken.json").write_text("{not json")
    (tmp_path / "conformance.json").write_text(json.dumps({"schema": "rnnbench.conformance/1"}))
    os.mkfifo(tmp_path / "fifo.json")         # never opened: it would block
    best = best_earlier_peak(tmp_path, {"cpu": "CPU A"}, "cpu", 2)
    assert best == {"gflops": 150.0, "file": str(tmp_path / "runs" / "old.json")}
    assert best_earlier_peak(tmp_path, {"cpu": "CPU C"}, "cpu", 2) is None
    assert best_earlier_peak(tmp_path / "nowhere", {"cpu": "CPU A"}, "cpu", 2) is None


def test_a_peak_is_compared_with_earlier_ones_under_the_same_vector_extension_limits(tmp_path):
    # oneDNN kept to AVX2 on an AVX-512 CPU measured about half its peak: not a busy machine.
    limited = bench_doc(median=240.0)
    limited["environment"]["isa_limits"] = "ONEDNN_MAX_CPU_ISA=AVX2"
    (tmp_path / "avx2.json").write_text(json.dumps(limited))
    (tmp_path / "all.json").write_text(json.dumps(bench_doc(median=470.0)))
    # fused's own build does not move torch's GEMM peak.
    for unlimited in ({"cpu": "CPU A"}, {"cpu": "CPU A", "isa_limits": ""},
                      {"cpu": "CPU A", "isa_limits": "RNNBENCH_FUSED_MARCH=x86-64-v3"}):
        assert best_earlier_peak(tmp_path, unlimited, "cpu", 2)["gflops"] == 470.0
    assert best_earlier_peak(tmp_path, limited["environment"], "cpu", 2)["gflops"] == 240.0


def test_a_gpu_peak_is_compared_with_earlier_ones_of_the_same_tf32_setting(tmp_path):
    # An H200 measured 392 TFLOP/s with TF32 and 51 without: not a busy machine.
    (tmp_path / "tf32.json").write_text(json.dumps(
        bench_doc(device="cuda", threads=16, median=392e3, tf32=True)))
    (tmp_path / "ieee.json").write_text(json.dumps(
        bench_doc(device="cuda", threads=16, median=51e3, tf32=False)))
    gpu = {"cpu": "CPU A", "gpu": "GPU A"}
    assert best_earlier_peak(tmp_path, gpu, "cuda", 16, tf32=False)["gflops"] == 51e3
    assert best_earlier_peak(tmp_path, gpu, "cuda", 16, tf32=True)["gflops"] == 392e3
    assert best_earlier_peak(tmp_path, gpu, "cuda", 16) is None     # a peak of unknown setting


# --- bimodal samples and the verdict that is no verdict -----------------------------------

def test_two_clusters_are_bimodal_and_noise_or_a_few_outliers_are_not():
    fast, slow = jittered(1e-3, n=12, spread=0.02), jittered(3e-3, n=6, spread=0.02, seed=1)
    assert is_bimodal(fast + slow) and is_bimodal(slow + fast)
    assert not is_bimodal(jittered(1e-3, n=30, spread=0.05))
    assert not is_bimodal(fast + slow[:2])        # 2 of 14 slow: outliers, not a second mode
    assert not is_bimodal([1e-3, 3e-3]) and not is_bimodal([])


def result(impl, samples, **extra):
    return BenchResult(impl=impl, workload="w", metric="forward", status="ok",
                       median_s=float(np.median(samples)) if samples else 1e-3,
                       samples_s=list(samples), **{"conforms": True, **extra})


def test_on_a_busy_machine_a_clear_speed_up_is_not_judged_but_keeps_its_numbers():
    pair = (result("native", jittered(2e-3)), result("fast", jittered(1e-3, seed=1)))
    quiet, busy = speedup([pair]), speedup([pair], busy=True)
    assert quiet.verdict == "faster" and busy.verdict == "not_judged" and busy.not_judged
    assert (busy.value, busy.ci) == (quiet.value, quiet.ci)
    assert busy.not_judged_text == "not judged: busy machine"


def test_bimodal_samples_on_either_side_are_not_judged():
    steady = jittered(1e-3, n=15)
    stalled = jittered(1e-3, n=10, seed=2) + jittered(5e-3, n=5, seed=3)
    for base, candidate in ((steady, stalled), (stalled, steady)):
        ratio = speedup([(result("native", base), result("x", candidate))])
        assert ratio.verdict == "not_judged"
        assert ratio.not_judged_text == "not judged: bimodal samples"
        on_a_busy_machine = speedup([(result("native", base), result("x", candidate))], busy=True)
        assert on_a_busy_machine.not_judged_text == "not judged: busy machine"


def test_the_headline_is_the_geometric_mean_with_the_bootstrap_of_all_samples():
    pairs = [(result("native", jittered(2e-3)), result("x", jittered(1e-3, seed=1))),
             (result("native", jittered(1e-3, seed=2)), result("x", jittered(2e-3, seed=3)))]
    ratio = speedup(pairs)
    assert ratio.value == pytest.approx(1.0, abs=0.02)      # twice and half
    assert ratio.ci == ratio_interval([(b.samples_s, r.samples_s) for b, r in pairs])
    assert ratio.ci[0] < 1.0 < ratio.ci[1] and ratio.verdict == "within_noise"


def drifting(center, n=16, seed=0):
    """Samples of rounds in which the whole machine runs fast for a while, then 1.5x slower
    (a shared VM's host), with 2% jitter of their own."""
    state = np.where(np.arange(n) % 8 < 4, 1.0, 1.5)
    return list(center * state * (1 + 0.02 * np.random.default_rng(seed).standard_normal(n)))


def test_a_drift_of_the_whole_machine_does_not_stop_a_judgement():
    # Both sides slow down in the same rounds: each side alone is bimodal, but round by round
    # the candidate is twice as fast, and that is judged from the interval of the samples.
    base, candidate = drifting(2e-3), drifting(1e-3, seed=1)
    assert is_bimodal(base) and is_bimodal(candidate)
    ratio = speedup([(result("native", base), result("x", candidate))])
    assert ratio.verdict == "faster" and ratio.ci == ratio_interval([(base, candidate)])


def test_one_side_slowing_down_in_some_rounds_is_not_judged():
    # The baseline's threads waited for a core in some rounds (contention), the candidate's not.
    steady = jittered(1e-3, n=16)
    base = [t * (3 if i % 4 == 0 else 1) for i, t in enumerate(jittered(1.2e-3, n=16, seed=1))]
    assert speedup([(result("native", base), result("x", steady))]).verdict == "not_judged"


def test_samples_not_taken_in_rounds_are_judged_on_each_side():
    from rnnbench.benchmarks.statistics import interleaved
    from rnnbench.reports.records import Source, Timing

    base, candidate = drifting(1.2e-3), drifting(1e-3, seed=1)
    source = Source("results.json", "pytest-benchmark", "machine")
    timings = [Timing(impl=impl, workload="w", metric="forward", status="ok",
                      median_s=float(np.median(samples)), samples_s=samples, conforms=True,
                      source=source) for impl, samples in (("native", base), ("x", candidate))]
    assert not interleaved(*timings)
    assert speedup([tuple(timings)]).verdict == "not_judged"      # each side is bimodal
    assert not interleaved(result("native", base), result("x", candidate[:-1]))


def test_without_samples_one_result_keeps_its_stated_interval_and_several_have_none():
    bare = (result("native", [], vs_native_ci=None), result("x", [], vs_native_ci=(1.2, 1.4)))
    assert speedup([bare]).ci == (1.2, 1.4) and speedup([bare]).verdict == "faster"
    assert speedup([bare, bare]).ci is None and speedup([bare, bare]).verdict is None


def test_a_pair_without_a_speed_up_gives_none():
    wrong = result("x", jittered(1e-3), conforms=False)
    assert speedup([(result("native", jittered(1e-3)), wrong)]) is None and speedup([]) is None
