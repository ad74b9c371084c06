"""rnnbench.benchmarks — workloads as data, timing, and the asv and pytest-benchmark suites."""
