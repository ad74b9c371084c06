"""The registry: built-ins, entry points, loading targets, and one-line errors for bad targets."""
import importlib.metadata
import json
import sys

import pytest
import torch

import rnnbench.impls.eager
from rnnbench.cli import main
from rnnbench.errors import UsageError
from rnnbench.impls import BUILTINS, Implementation, load, registered
from rnnbench.impls.implicit import ImplicitRNN
from rnnbench.reference import KINDS

# The group third-party packages declare in their pyproject.toml: a public name, so spelled out.
ENTRY_POINT_GROUP = "rnnbench.impls"

IMPL_SOURCE = """
import torch
from rnnbench.impls import Implementation

IMPL = Implementation(name="mine", kinds={"gru": torch.nn.GRU})

class MyRNN(torch.nn.RNN):
    pass
"""


def write(folder, files):
    for name, text in files.items():
        (folder / name).write_text(text)


# The built-ins that implement every torch.nn kind and run anywhere.
EVERY_KIND = ("native", "eager")


@pytest.mark.parametrize("name", BUILTINS)
def test_builtins_are_registered_under_their_name(name):
    impl = registered()[name]
    assert isinstance(impl, Implementation)
    assert impl.name == name
    assert impl.kinds


@pytest.mark.parametrize("name", EVERY_KIND)
def test_native_and_eager_provide_every_kind_everywhere(name):
    impl = registered()[name]
    assert set(impl.kinds) == set(KINDS)
    assert impl.unavailable_reason() is None


def test_native_is_torch_nn():
    assert load("native").constructor("lstm") is torch.nn.LSTM


def test_an_availability_check_that_raises_is_the_reason_not_a_crash():
    def probe():
        raise OSError("no driver")

    reason = Implementation(name="probe", kinds={"rnn": torch.nn.RNN}, availability=probe).unavailable_reason()
    assert "OSError" in reason and "no driver" in reason


def test_an_availability_check_is_asked_again_before_an_implementation_counts_as_unavailable():
    answers = iter(["No module named 'cProfile'", None])
    flaky = Implementation(name="flaky", kinds={"rnn": torch.nn.RNN},
                           availability=lambda: next(answers))
    assert flaky.unavailable_reason() is None
    calls = []

    def missing():
        calls.append(1)
        return "triton is not installed"

    absent = Implementation(name="absent", kinds={"rnn": torch.nn.RNN}, availability=missing)
    assert absent.unavailable_reason() == "triton is not installed" and len(calls) == 2


@pytest.mark.parametrize("name", BUILTINS)
def test_load_by_name_and_by_module_attr_agree(name):
    assert load(name) is registered()[name]
    assert load(f"rnnbench.impls.{name}:IMPLEMENTATION") is registered()[name]


def test_load_an_implementation_from_a_file(tmp_path):
    write(tmp_path, {"model.py": IMPL_SOURCE})
    impl = load(f"{tmp_path}/model.py:IMPL")
    assert impl.name == "mine"
    assert impl.constructor("gru") is torch.nn.GRU


def test_load_a_bare_class_from_a_file_with_its_kind(tmp_path):
    write(tmp_path, {"model.py": IMPL_SOURCE})
    target = f"{tmp_path}/model.py:MyRNN"
    impl = load(target, kind="rnn")
    assert impl.name == target
    assert list(impl.kinds) == ["rnn"]
    module = impl.constructor("rnn")(3, 5)
    assert type(module).__name__ == "MyRNN"


@pytest.mark.parametrize("target, kind, constructor", [
    ("torch.nn:modules.rnn.GRU", "gru", torch.nn.GRU),
    ("rnnbench.impls.implicit:ImplicitRNN", "implicit", ImplicitRNN),
])
def test_load_a_bare_class_by_module_attr(target, kind, constructor):
    assert load(target, kind=kind).constructor(kind) is constructor


def test_files_with_the_same_name_do_not_replace_each_other(tmp_path):
    for folder, value in (("a", 1), ("b", 2)):
        (tmp_path / folder).mkdir()
        write(tmp_path / folder, {"model.py": f"def make(*args, **kwargs):\n    return {value}\n"})
    makers = [load(f"{tmp_path}/{folder}/model.py:make", kind="rnn").constructor("rnn") for folder in "ab"]
    assert [make() for make in makers] == [1, 2]
    # Each file keeps its own module, where pickle and dataclasses look its objects up by name.
    assert all(sys.modules[make.__module__].make is make for make in makers)


def test_a_file_can_import_its_neighbours(tmp_path):
    write(tmp_path, {"rnnbench_test_neighbour.py": "import torch\nCell = torch.nn.GRUCell\n",
                     "model.py": "from rnnbench_test_neighbour import Cell\n"})
    try:
        assert load(f"{tmp_path}/model.py:Cell", kind="gru_cell").constructor("gru_cell") is torch.nn.GRUCell
    finally:
        sys.modules.pop("rnnbench_test_neighbour", None)


# (id, target with {tmp} for a scratch folder, kind, files in that folder, fragments the message names)
FAILURES = [
    ("no-such-file", "{tmp}/missing.py:Model", None, {}, ["no such file", "missing.py"]),
    ("error-inside-the-file", "{tmp}/model.py:Model", None,
     {"model.py": "raise RuntimeError('boom\\nsecond line')"}, ["model.py", "RuntimeError: boom"]),
    ("syntax-error", "{tmp}/model.py:Model", None, {"model.py": "def (:"}, ["SyntaxError"]),
    ("sys-exit-in-the-file", "{tmp}/model.py:Model", None, {"model.py": "import sys\nsys.exit(3)"},
     ["SystemExit"]),
    ("no-such-attribute", "{tmp}/model.py:Nope", None, {"model.py": "X = 1"}, ["Nope"]),
    ("no-such-module", "rnnbench_no_such_module:X", None, {}, ["rnnbench_no_such_module"]),
    ("no-such-module-attribute", "rnnbench.impls.eager:Nope", None, {}, ["Nope"]),
    ("unknown-name", "eagre", None, {}, ["eagre", *BUILTINS]),
    ("file-without-attribute", "{tmp}/model.py", None, {"model.py": IMPL_SOURCE}, ["model.py:"]),
    ("unknown-kind", "torch.nn:GRU", "grux", {}, ["grux", *KINDS]),
    ("bare-class-without-kind", "torch.nn:GRU", None, {}, ["--kind"]),
    ("not-a-constructor", "{tmp}/model.py:X", "rnn", {"model.py": "X = 1"}, ["int"]),
    ("kind-not-provided", "{tmp}/model.py:IMPL", "lstm", {"model.py": IMPL_SOURCE}, ["lstm", "gru"]),
]


@pytest.mark.parametrize("case_id, target, kind, files, fragments", FAILURES, ids=[f[0] for f in FAILURES])
def test_bad_targets_raise_a_one_line_usage_error(tmp_path, case_id, target, kind, files, fragments):
    write(tmp_path, files)
    with pytest.raises(UsageError) as caught:
        load(target.format(tmp=tmp_path), kind=kind)
    message = str(caught.value)
    assert "\n" not in message
    assert all(fragment in message for fragment in fragments), message


def test_list_shows_the_builtins(capsys):
    assert main(["list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    for name in BUILTINS:
        assert any(line.split()[0] == name for line in lines), name


def test_list_json_describes_every_registered_implementation(capsys):
    assert main(["list", "--json"]) == 0
    rows = {row["name"]: row for row in json.loads(capsys.readouterr().out)}
    assert set(rows) == set(registered())
    for name in EVERY_KIND:
        assert set(rows[name]["kinds"]) == set(KINDS)
        assert rows[name]["available"] is True and rows[name]["reason"] is None


PLUGIN_SOURCE = """
import torch
from rnnbench.impls import Implementation

def _needs_hardware():
    raise OSError("probe crashed")

IMPL = Implementation(name="fake", kinds={"rnn": torch.nn.RNN}, unsupported=frozenset({"cuda"}))
PROBE_CRASHES = Implementation(name="probe", kinds={"rnn": torch.nn.RNN}, availability=_needs_hardware)
NOT_AN_IMPL = 42
"""


@pytest.fixture
def plugins(tmp_path, monkeypatch):
    """Fake entry points of the rnnbench.impls group, as an installed package would declare them."""
    write(tmp_path, {"rnnbench_test_plugin.py": PLUGIN_SOURCE})
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "rnnbench_test_plugin", raising=False)
    declared = [importlib.metadata.EntryPoint(name, value, ENTRY_POINT_GROUP) for name, value in [
        ("fake", "rnnbench_test_plugin:IMPL"),
        ("alias", "rnnbench_test_plugin:IMPL"),
        ("probe", "rnnbench_test_plugin:PROBE_CRASHES"),
        ("broken", "rnnbench_test_missing_plugin:IMPL"),
        ("wrong-type", "rnnbench_test_plugin:NOT_AN_IMPL"),
        ("eager", "rnnbench_test_plugin:IMPL"),
    ]]
    real = importlib.metadata.entry_points
    monkeypatch.setattr(importlib.metadata, "entry_points",
                        lambda **params: declared if params.get("group") == ENTRY_POINT_GROUP else real(**params))
    yield
    sys.modules.pop("rnnbench_test_plugin", None)


def test_entry_points_are_registered_and_loadable(plugins):
    with pytest.warns(UserWarning, match="eager"):
        impls = registered()
    assert impls["fake"].constructor("rnn") is torch.nn.RNN
    assert impls["alias"].name == "alias"
    assert impls["eager"] is rnnbench.impls.eager.IMPLEMENTATION  # a built-in keeps its name
    with pytest.warns(UserWarning):
        assert load("fake", kind="rnn").unsupported == {"cuda"}


def test_broken_entry_points_are_listed_unavailable_with_the_reason(plugins, capsys):
    with pytest.warns(UserWarning):
        assert main(["list", "--json"]) == 0
    rows = {row["name"]: row for row in json.loads(capsys.readouterr().out)}
    assert rows["fake"]["available"] is True and rows["fake"]["unsupported"] == ["cuda"]
    expected = {"broken": "ModuleNotFoundError", "wrong-type": "not an Implementation",
                "probe": "OSError: probe crashed"}
    for name, fragment in expected.items():
        assert rows[name]["available"] is False and fragment in rows[name]["reason"], rows[name]


@pytest.mark.parametrize("name", ["eager", "torchscript", "compile", "fused", "onnxruntime"])
def test_builtin_classes_are_bound_under_torch_nn_names_in_their_module(name):
    import importlib
    import pickle

    module = importlib.import_module(f"rnnbench.impls.{name}")
    for kind, cls in module.KINDS.items():
        assert getattr(module, cls.__name__) is cls
        assert cls.__name__.lower() == kind.replace("_", "")
    pickle.loads(pickle.dumps(module.KINDS["gru"](3, 4)))
