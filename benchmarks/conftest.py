"""Options of the pytest-benchmark suite (benchmarks/test_pytest_benchmark.py).

The default `pytest` run never collects benchmarks/ (pyproject's testpaths is tests/); run the
suite by naming it, e.g. `pytest benchmarks/test_pytest_benchmark.py --benchmark-json out.json`.
"""
from __future__ import annotations


def pytest_addoption(parser) -> None:
    group = parser.getgroup("rnnbench-benchmarks")
    group.addoption("--bench-preset", default="quick",
                    help="workload preset to benchmark (default quick)")
    group.addoption("--bench-workload", default=None, metavar="FILE",
                    help="a workload file instead of a preset")
    group.addoption("--bench-impl", default=None, metavar="A,B,...",
                    help="implementation targets (default: every registered implementation)")
    group.addoption("--bench-device", default="cpu", help="cpu or cuda (default cpu)")


def pytest_configure(config) -> None:
    # pytest-benchmark writes --benchmark-json at the very end without creating its folder,
    # which would lose a whole run to a missing directory.
    path = config.getoption("benchmark_json", None)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
