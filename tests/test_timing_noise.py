"""How sure a timing is: ratio intervals and verdicts from raw samples, the noisy flag, and the
machine check's signals read from fake /proc/stat texts (never by loading the machine)."""
import numpy as np
import pytest

from rnnbench.benchmarks.machine import (OTHERS_LIMIT, PEAK_SPREAD_LIMIT, STEAL_LIMIT, Usage,
                                         busy_line, machine_check, measure_usage,
                                         parse_cpu_times)
from rnnbench.benchmarks.noise import is_noisy, ratio_interval, verdict


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


PEAK = {"gflops": 100.0, "iqr_gflops": 2.0, "samples": [98.0, 100.0, 101.0]}


def test_a_quiet_machine_is_not_busy():
    check = machine_check(PEAK, Usage(0.05, 0.0), cores=2, load_avg=[0.1, 0.2, 0.3])
    assert check == {"cores": 2, "load_avg": [0.1, 0.2, 0.3], "steal_fraction": 0.0,
                     "others_fraction": 0.05, "busy": False, "reasons": [],
                     "peak_gflops_samples": PEAK["samples"], "peak_gflops_median": 100.0,
                     "peak_gflops_iqr": 2.0}
    assert busy_line(check) is None


@pytest.mark.parametrize("usage, peak, reason", [
    (Usage(OTHERS_LIMIT + 0.2, 0.0), PEAK, "other processes used 45% of 2 cores"),
    (Usage(0.0, STEAL_LIMIT + 0.05), PEAK, "the hypervisor stole 10% of CPU time"),
    (Usage(0.0, 0.0), {**PEAK, "iqr_gflops": 100.0 * (PEAK_SPREAD_LIMIT + 0.1)},
     "GEMM peak spread 20% (IQR/median, 3 runs)"),
])
def test_each_signal_past_its_limit_makes_the_machine_busy_with_its_reason(usage, peak, reason):
    check = machine_check(peak, usage, cores=2)
    assert check["busy"] and check["reasons"] == [reason]
    assert busy_line(check) == f"BUSY MACHINE, timings less reliable: {reason}"
