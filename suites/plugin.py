"""pytest plugin (entry point `pytest11: rnnbench`): the conformance checks as pytest tests.

    pytest --pyargs rnnbench.suites --impl TARGET [--impl-kind K] [--impl-device cuda]
           [--impl-quick] [--impl-seed N]

makes every (kind, check, case) one test with the id "<kind>/<check>/<case>", e.g.
"gru/forward/two-layer-bidirectional", so `-k` and `--deselect` pick checks as usual. Checks run
in the pytest process (no child isolation). Without --impl the plugin only adds its options: the
project's own test run, and anyone else's, is unaffected.
"""
from __future__ import annotations

import pytest

ITEM = "rnnbench_item"


def pytest_addoption(parser) -> None:
    group = parser.getgroup("rnnbench", "rnnbench conformance checks (pytest --pyargs rnnbench.suites)")
    group.addoption("--impl", metavar="TARGET",
                    help="the implementation to check: a registered name, package.module:attr "
                         "or path/to/file.py:attr")
    group.addoption("--impl-kind", action="append", metavar="K",
                    help="check only this kind (repeatable; a bare class: the kind it implements)")
    group.addoption("--impl-device", default="cpu", metavar="DEVICE", help="cpu (default) or cuda")
    group.addoption("--impl-quick", action="store_true", help="the quick case list")
    group.addoption("--impl-seed", type=int, default=0, metavar="N", help="seed (default 0)")


def pytest_generate_tests(metafunc) -> None:
    if ITEM not in metafunc.fixturenames:
        return
    config = metafunc.config
    if not config.getoption("impl"):
        metafunc.parametrize(ITEM, [pytest.param(None, marks=pytest.mark.skip(
            reason="no implementation given: pass --impl TARGET"))], ids=["no-impl"])
        return
    from rnnbench.suites.runner import plan

    items = plan(_implementation(config), config.getoption("impl_kind"), config.getoption("impl_quick"))
    metafunc.parametrize(ITEM, items, ids=[f"{item.kind}/{item.id}" for item in items])


@pytest.fixture
def rnnbench_run(request):
    """run(item) -> CheckResult for the implementation named by --impl."""
    from rnnbench.suites.runner import run_item

    config = request.config
    impl = _implementation(config)
    return lambda item: run_item(impl, item, config.getoption("impl_device"),
                                 config.getoption("impl_seed"))


def _implementation(config):
    """The --impl target, loaded once per session; a wrong one is a pytest usage error."""
    if not hasattr(config, "_rnnbench_impl"):
        from rnnbench.errors import UsageError
        from rnnbench.impls import load
        from rnnbench.suites.runner import check_available, check_device

        kinds = config.getoption("impl_kind") or []
        try:
            check_device(config.getoption("impl_device"))
            impl = load(config.getoption("impl"), kinds[0] if len(kinds) == 1 else None)
            check_available(impl)
        except UsageError as exc:
            raise pytest.UsageError(f"--impl: {exc}") from None
        config._rnnbench_impl = impl
    return config._rnnbench_impl
