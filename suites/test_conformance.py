"""The conformance checks as pytest tests: `pytest --pyargs rnnbench.suites --impl TARGET`.

The rnnbench pytest plugin (`rnnbench.suites.plugin`) gives `rnnbench_item` one value per
(kind, check, case) and `rnnbench_run` to run it; without --impl the single test is skipped.
"""
import warnings

import pytest

from rnnbench.suites.text import finding


def test_conformance(rnnbench_item, rnnbench_run):
    result = rnnbench_run(rnnbench_item)
    if result.outcome == "not_supported":
        pytest.skip(result.message)
    if result.outcome == "xfail":
        pytest.xfail(result.message)
    if result.outcome == "xpass":
        warnings.warn(result.message)
        return
    if result.outcome != "passed":
        pytest.fail("\n".join(finding(result)), pytrace=False)
