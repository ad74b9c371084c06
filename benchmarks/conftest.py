"""Options of the pytest-benchmark suite (benchmarks/test_pytest_benchmark.py).

The default `pytest` run never collects benchmarks/ (pyproject's testpaths is tests/); run the
suite by naming it, e.g. `pytest benchmarks/test_pytest_benchmark.py --benchmark-json out.json`.
`pytest benchmarks/test_pytest_benchmark.py --help` lists these options under GROUP.
"""
from __future__ import annotations

import pytest

GROUP = "rnnbench benchmarks (pytest benchmarks/test_pytest_benchmark.py)"


def pytest_addoption(parser) -> None:
    group = parser.getgroup("rnnbench-benchmarks", GROUP)
    group.addoption("--bench-preset", default="quick", metavar="NAME",
                    help="workload preset to benchmark (default quick; `rnnbench list presets` "
                         "names them), e.g. --bench-preset goals")
    group.addoption("--bench-workload", default=None, metavar="FILE",
                    help="a workload file in the presets' format instead of a preset, e.g. "
                         "--bench-workload my_sizes.json")
    group.addoption("--bench-impl", default=None, metavar="A,B,...",
                    help="implementation targets (default: every registered implementation; "
                         "native always runs as the baseline), e.g. "
                         "--bench-impl eager,my_rnn.py:MyRNN")
    group.addoption("--bench-kind", default=None, metavar="K",
                    help="only the workloads of this kind, and the kind a bare class in "
                         "--bench-impl implements (it needs one), e.g. --bench-kind gru")
    group.addoption("--bench-threads", type=int, default=None, metavar="N",
                    help="torch threads while timing (default: the workload's own, else "
                         "torch's current count), e.g. --bench-threads 1")
    group.addoption("--bench-device", default="cpu", metavar="DEVICE",
                    help="cpu or cuda (default cpu), e.g. --bench-device cuda")


def pytest_configure(config) -> None:
    """Check the options and choose what runs now, so that a mistake is one line and exit
    status 2, not a collection error."""
    # pytest-benchmark writes --benchmark-json at the very end without creating its folder,
    # which would lose a whole run to a missing directory.
    path = config.getoption("benchmark_json", None)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
    if config.getoption("help"):
        return
    from rnnbench.errors import UsageError

    try:
        config.rnnbench_cases = cases(config.getoption)
    except UsageError as exc:
        pytest.exit(f"rnnbench: {exc}", returncode=2)


def cases(option) -> list[tuple]:
    """(implementation, workload, metric) for every benchmark the options ask for, native
    included as the baseline; UsageError naming the option that is wrong."""
    from rnnbench.benchmarks.workloads import load_workloads
    from rnnbench.documents import BASELINE
    from rnnbench.errors import UsageError
    from rnnbench.impls import load, registered
    from rnnbench.reference.kinds import KINDS

    kind, threads = option("bench_kind"), option("bench_threads")
    if threads is not None and threads < 1:
        raise UsageError(f"--bench-threads must be at least 1, got {threads}")
    if kind is not None and kind not in KINDS:
        raise UsageError(f"--bench-kind: unknown kind {kind!r}; known kinds: {', '.join(KINDS)}")
    workloads = (load_workloads(path=option("bench_workload")) if option("bench_workload")
                 else load_workloads(preset=option("bench_preset")))
    workloads = [w for w in workloads if kind is None or w.kind == kind]
    if not workloads:
        raise UsageError(f"--bench-kind {kind}: no workload of that kind to run")
    targets = [t.strip() for t in (option("bench_impl") or "").split(",") if t.strip()]
    # A bare constructor needs its kind; registered implementations are filtered by workload.
    impls = ([load(t, kind if ":" in t else None, "--bench-kind") for t in targets] if targets
             else list(registered().values()))
    if BASELINE not in {impl.name for impl in impls}:
        impls.insert(0, load(BASELINE))
    return [(impl, w, metric) for w in workloads for metric in w.metrics for impl in impls]
