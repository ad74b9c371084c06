"""pytest-benchmark suite: implementations x workloads x metrics, for per-pull-request runs.

Not part of the default `pytest` run (testpaths is tests/). Run it by name:

    pytest benchmarks/test_pytest_benchmark.py --benchmark-json out.json
    pytest benchmarks/test_pytest_benchmark.py --benchmark-autosave            # keep a baseline
    pytest benchmarks/test_pytest_benchmark.py --benchmark-compare \\
        --benchmark-compare-fail=median:10%                                    # gate: exit 1

Options (benchmarks/conftest.py): --bench-preset, --bench-workload, --bench-impl, --bench-device.
Combinations that cannot run are skipped with the reason. Each benchmark's extra_info carries
the implementation, the workload, the metric, FLOPs, GFLOP/s, first-call time, threads and the
environment, so a JSON file explains itself.
"""
from __future__ import annotations

import pytest
import torch

from rnnbench.benchmarks.harness import skip_reason
from rnnbench.benchmarks.tasks import build_task
from rnnbench.benchmarks.timing import measure, pinned_threads, synchronizer
from rnnbench.benchmarks.workloads import load_workloads
from rnnbench.environment import capture
from rnnbench.errors import UsageError
from rnnbench.impls import load, registered
from rnnbench.documents import BASELINE


def pytest_generate_tests(metafunc) -> None:
    if "case" not in metafunc.fixturenames:
        return
    option = metafunc.config.getoption
    try:
        workloads = (load_workloads(path=option("bench_workload")) if option("bench_workload")
                     else load_workloads(preset=option("bench_preset")))
        targets = option("bench_impl")
        impls = ([load(t.strip()) for t in targets.split(",") if t.strip()] if targets
                 else list(registered().values()))
    except UsageError as exc:
        raise pytest.UsageError(str(exc)) from None
    if BASELINE not in {impl.name for impl in impls}:
        impls.insert(0, load(BASELINE))
    cases = [(impl, w, metric) for w in workloads for metric in w.metrics for impl in impls]
    metafunc.parametrize("case", cases, ids=[f"{w.name}-{m}-{i.name}" for i, w, m in cases])


@pytest.fixture(scope="session")
def environment() -> dict:
    return capture()


@pytest.fixture(scope="session")
def device(request) -> str:
    return request.config.getoption("bench_device")


def test_benchmark(benchmark, case, device, environment):
    impl, workload, metric = case
    reason = skip_reason(impl, workload, device, metric)
    if reason:
        pytest.skip(reason)
    threads = workload.threads or torch.get_num_threads()
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
