"""rnnbench.reports — renders conformance and benchmark results to Markdown and HTML."""
