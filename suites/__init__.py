"""rnnbench.suites — the conformance checks."""
