"""pytest plugin (entry point `pytest11: rnnbench`): the conformance checks as pytest tests.

    pytest --pyargs rnnbench.suites --impl TARGET [--impl-kind K] [--impl-device cuda]
           [--impl-quick] [--impl-seed N] [--impl-check PATTERN] [--impl-param-map KEY=NAME,...]
           [--impl-fuzz N | --impl-case JSON]

makes every (kind, check, case) one test with the id "<kind>/<check>/<case>", e.g.
"gru/forward/two-layer-bidirectional", so `-k` and `--deselect` pick checks as usual. Checks run
in the pytest process (no child isolation). A wrong option stops the run before collection with
one line and exit status 2. Without --impl the plugin only adds its options: the project's own
test run, and anyone else's, is unaffected.
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
    group.addoption("--impl-check", metavar="PATTERN",
                    help="only the checks whose id matches, e.g. 'forward/*'")
    group.addoption("--impl-param-map", metavar="KEY=NAME,...",
                    help="the implementation's state_dict keys -> torch.nn's names")
    group.addoption("--impl-fuzz", type=int, metavar="N",
                    help="search N drawn cases per kind instead of the case tables")
    group.addoption("--impl-case", metavar="JSON", help="run one given case (what a fuzz failure prints)")
    group.addoption("--impl-known-failures", metavar="FILE",
                    help="checks expected to fail (pattern # reason per line): xfail, or xpass")
    group.addoption("--impl-unsupported", metavar="F,...",
                    help="features the implementation does not support, e.g. unbatched,packed: "
                         "their checks are skipped")


def pytest_configure(config) -> None:
    """Load --impl and check every option now, so a mistake is one line, not a collection error."""
    if not config.getoption("impl"):
        return
    from rnnbench.errors import UsageError

    try:
        config._rnnbench = _selection(config)
    except UsageError as exc:
        pytest.exit(f"rnnbench: {exc}", returncode=2)


def _selection(config) -> dict:
    """The implementation and the plan's arguments the options describe; UsageError if wrong."""

    from rnnbench.errors import UsageError
    from rnnbench.impls import load
    from rnnbench.suites.fuzz import case_from_json
    from rnnbench.suites.known import read_file as read_known
    from rnnbench.suites.parammap import parse_user_map
    from rnnbench.suites.runner import configured, plan, require_available, validate_device

    option = config.getoption
    kinds = option("impl_kind") or []
    if option("impl_seed") < 0:
        raise UsageError(f"--impl-seed must be a non-negative integer, got {option('impl_seed')}")
    if option("impl_fuzz") is not None and option("impl_fuzz") < 1:
        raise UsageError(f"--impl-fuzz must be a positive number of cases, got {option('impl_fuzz')}")
    try:
        param_map = parse_user_map(option("impl_param_map") or "")
        case = None if option("impl_case") is None else case_from_json(option("impl_case"))
    except ValueError as exc:
        raise UsageError(str(exc).replace("--param-map", "--impl-param-map")
                         .replace("--case", "--impl-case")) from None
    if case is not None:
        kinds = [case.kind]
    validate_device(option("impl_device"))
    impl = load(option("impl"), kinds[0] if len(kinds) == 1 else None, kind_option="--impl-kind")
    known = read_known(option("impl_known_failures")) if option("impl_known_failures") else None
    unsupported = [f.strip() for f in (option("impl_unsupported") or "").split(",") if f.strip()]
    try:
        impl = configured(impl, param_map, known, unsupported)
    except UsageError as exc:
        raise UsageError(str(exc).replace("--unsupported", "--impl-unsupported")) from None
    require_available(impl)
    items = plan(impl, kinds, option("impl_quick"), option("impl_check"), option("impl_fuzz"), case)
    return {"impl": impl, "items": items}


def pytest_generate_tests(metafunc) -> None:
    if ITEM not in metafunc.fixturenames:
        return
    selection = getattr(metafunc.config, "_rnnbench", None)
    if selection is None:
        metafunc.parametrize(ITEM, [pytest.param(None, marks=pytest.mark.skip(
            reason="no implementation given: pass --impl TARGET"))], ids=["no-impl"])
        return
    items = selection["items"]
    metafunc.parametrize(ITEM, items, ids=[f"{item.kind}/{item.id}" for item in items])


@pytest.fixture
def rnnbench_run(request):
    """run(item) -> CheckResult for the implementation named by --impl."""
    from rnnbench.suites.runner import run_item

    config = request.config
    impl = config._rnnbench["impl"]
    return lambda item: run_item(impl, item, config.getoption("impl_device"),
                                 config.getoption("impl_seed"))
