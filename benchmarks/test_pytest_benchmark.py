"""pytest-benchmark suite: implementations x workloads x metrics, for per-pull-request runs.

Not part of the default `pytest` run (testpaths is tests/). Run it by name:

    pytest benchmarks/test_pytest_benchmark.py --benchmark-json out.json
    pytest benchmarks/test_pytest_benchmark.py --benchmark-autosave            # keep a baseline
    pytest benchmarks/test_pytest_benchmark.py --benchmark-compare \\
        --benchmark-compare-fail=median:10%                                    # gate: exit 1

Options (benchmarks/conftest.py, listed by `--help`): --bench-preset, --bench-workload,
--bench-impl, --bench-kind (a bare class in --bench-impl needs it), --bench-threads,
--bench-device. Combinations that cannot run are skipped with the reason. Each benchmark's
extra_info carries the implementation, the workload, the metric, FLOPs, GFLOP/s, first-call
time, threads and the environment, so a JSON file explains itself.
"""
from __future__ import annotations

import pytest
import torch

from rnnbench.benchmarks.harness import skip_reason
from rnnbench.benchmarks.tasks import build_task
from rnnbench.benchmarks.timing import measure, pinned_threads, synchronizer
from rnnbench.environment import capture


def pytest_generate_tests(metafunc) -> None:
    if "case" not in metafunc.fixturenames:
        return
    cases = metafunc.config.rnnbench_cases      # chosen by conftest.py from the options
    metafunc.parametrize("case", cases, ids=[f"{w.name}-{m}-{i.name}" for i, w, m in cases])


@pytest.fixture(scope="session")
def environment() -> dict:
    return capture()


@pytest.fixture(scope="session")
def device(request) -> str:
    return request.config.getoption("bench_device")


def test_benchmark(benchmark, case, device, environment, request):
    impl, workload, metric = case
    reason = skip_reason(impl, workload, device, metric)
    if reason:
        pytest.skip(reason)
    threads = (request.config.getoption("bench_threads") or workload.threads
               or torch.get_num_threads())
    with pinned_threads(threads):
        step = build_task(impl, workload, device).steps[metric]
        sync = synchronizer(device)
        first_call_s = measure(step, sync)
        benchmark.group = f"{workload.name} {metric}"
        benchmark.extra_info.update(impl=impl.name, workload=workload.to_dict(), metric=metric,
                                    device=device, threads=threads, first_call_s=first_call_s,
                                    flops=workload.flops(metric), environment=environment)
        benchmark(lambda: (step(), sync()))
    if benchmark.stats and workload.flops(metric):
        benchmark.extra_info["gflops"] = workload.flops(metric) / benchmark.stats.stats.median / 1e9
