"""rnnbench: a conformance and benchmark suite for recurrent neural network implementations.

Subpackages: `reference` (the spec), `impls` (the implementation registry and built-ins),
`suites` (the conformance checks), `benchmarks` (workloads and timing), `reports` (rendering).
"""
__version__ = "0.1.0"
