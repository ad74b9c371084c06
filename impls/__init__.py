"""rnnbench.impls — the implementation contract, the registry and the built-in implementations."""
