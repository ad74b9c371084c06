"""Meeting implementations where they are: constructors called as torch.nn's whatever their own
signature, the features a missing argument costs, plain objects as modules, required states, and
parameters found under other names and layouts."""
from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from rnnbench.impls import Implementation
from rnnbench.impls.adapt import (Adapted, CannotConstruct, ObjectModule, UnsupportedArgument,
                                  adapt, changed_defaults)
from rnnbench.reference import Config
from rnnbench.suites import param_roles, parammap
from rnnbench.suites.torch_nn import probe_config
from rnnbench.suites.parammap import MappingError, Piece
from rnnbench.suites.results import Finding
from rnnbench.suites.catalogue import suite_kind
from rnnbench.suites.subject import Subject, load, params_of, spec_state


class MinimalRNN(nn.RNN):
    """A course's signature: sizes only."""

    def __init__(self, input_size, hidden_size):
        super().__init__(input_size, hidden_size)


class KeywordsRNN(nn.RNN):
    def __init__(self, input_size, hidden_size, **kwargs):
        super().__init__(input_size, hidden_size)  # takes everything, ignores it


def _three_arguments_lstm(input_size, hidden_size, num_layers=1):
    return nn.LSTM(input_size, hidden_size, num_layers)


class ForwardsKeywordsLSTM(nn.Module):
    """Passes **kwargs on to a helper that takes num_layers alone, as torch.ao's dynamic
    quantized LSTM passes them to a base without `proj_size`."""

    def __init__(self, input_size, hidden_size, **kwargs):
        super().__init__()
        self.lstm = _three_arguments_lstm(input_size, hidden_size, **kwargs)

    def forward(self, x, hx=None):
        return self.lstm(x, hx)


class PositionalOnlyGRU(nn.GRU):
    def __init__(self, input_size, hidden_size, num_layers=1, /):
        super().__init__(input_size, hidden_size, num_layers)


class OwnNamesCell(nn.RNNCell):
    def __init__(self, n_in, n_hidden):
        super().__init__(n_in, n_hidden)


class NeedsOutputSize(nn.Module):
    def __init__(self, input_size, hidden_size, output_size):
        super().__init__()


class StateRequiredCell(nn.RNNCell):
    def __init__(self, input_size, hidden_size):
        super().__init__(input_size, hidden_size)

    def forward(self, x, h_prev):
        return super().forward(x, h_prev)


class PlainExercise:
    """An interview exercise: not an nn.Module, tensors that require gradients."""

    def __init__(self, input_size, hidden_size):
        k = 1 / math.sqrt(hidden_size)
        self.hidden_size = hidden_size
        self.W_ih = torch.empty(hidden_size, input_size).uniform_(-k, k).requires_grad_()
        self.W_hh = torch.empty(hidden_size, hidden_size).uniform_(-k, k).requires_grad_()

    def __call__(self, x, h0=None):
        h = x.new_zeros(x.shape[1], self.hidden_size) if h0 is None else h0[0]
        outputs = []
        for x_t in x:
            h = torch.tanh(x_t @ self.W_ih.T + h @ self.W_hh.T)
            outputs.append(h)
        return torch.stack(outputs), h[None]


def test_a_torch_signature_needs_no_adaptation():
    assert adapt("rnn", nn.RNN) is nn.RNN
    assert adapt("gru_cell", nn.GRUCell) is nn.GRUCell


def test_each_missing_argument_is_one_unsupported_feature_with_its_reason():
    adapted = adapt("rnn", MinimalRNN)
    assert isinstance(adapted, Adapted)
    assert adapted.unsupported == {
        "num_layers": "the constructor takes no `num_layers`",
        "relu": "the constructor takes no `nonlinearity`",
        "no_bias": "the constructor takes no `bias`",
        "batch_first": "the constructor takes no `batch_first`",
        "dropout": "the constructor takes no `dropout`",
        "bidirectional": "the constructor takes no `bidirectional`",
        "factory_kwargs": "the constructor takes no `device` or `dtype`: modules are built, "
                          "then moved with .to()",
    }


def test_a_module_is_built_then_moved_when_the_constructor_takes_no_dtype():
    module = adapt("rnn", MinimalRNN)(3, 5, dtype=torch.float64)
    assert module.weight_ih_l0.dtype == torch.float64


def test_an_argument_not_taken_cannot_be_asked_for():
    with pytest.raises(UnsupportedArgument, match="takes no `bidirectional`"):
        adapt("rnn", MinimalRNN)(3, 5, bidirectional=True)
    adapt("rnn", MinimalRNN)(3, 5, bidirectional=False)  # torch.nn's default: fine


def test_kwargs_take_every_argument_so_ignoring_one_is_not_excused():
    assert adapt("rnn", KeywordsRNN) is KeywordsRNN
    assert "num_layers" not in Implementation("k", {"rnn": KeywordsRNN}).unsupported_reasons("rnn")


def test_kwargs_passed_on_to_code_that_rejects_them_are_arguments_not_taken():
    adapted = adapt("lstm", ForwardsKeywordsLSTM)
    assert adapted.taken == {"num_layers"}
    assert set(adapted.unsupported) == {"no_bias", "batch_first", "dropout", "bidirectional",
                                        "proj_size", "factory_kwargs"}
    assert adapted.unsupported["proj_size"].startswith("the constructor rejects `proj_size=0`")
    module = adapted(3, 5, num_layers=2, dtype=torch.float64)  # built, then moved
    assert module.lstm.num_layers == 2 and module.lstm.weight_ih_l1.dtype == torch.float64
    with pytest.raises(UnsupportedArgument, match="takes no `proj_size`"):
        adapted(3, 5, proj_size=2)


def test_learning_the_rejected_keywords_leaves_the_generators_as_they_were():
    import numpy as np

    class DrawsOnBuild(ForwardsKeywordsLSTM):
        def __init__(self, input_size, hidden_size, **kwargs):
            super().__init__(input_size, hidden_size, **kwargs)
            np.random.rand()

    torch.manual_seed(0), np.random.seed(0)
    expected = torch.rand(1), np.random.rand()
    torch.manual_seed(0), np.random.seed(0)
    assert adapt("lstm", DrawsOnBuild).unsupported  # built, and rejected keywords found
    assert (torch.rand(1), np.random.rand()) == expected


def test_a_default_other_than_torch_nn_s_or_none_at_all_is_named():
    def constructor(input_dim, hidden_dim, num_layers, bias=None, batch_first=True,
                    dropout=torch.zeros(2), proj_size=None, **kwargs):
        """bias=None is no bias (torch.nn's True has one), proj_size=None none (as torch.nn's
        0); a tensor default cannot be compared to torch.nn's."""

    assert changed_defaults("lstm", constructor) == {
        "num_layers": "`num_layers` is required (torch.nn's defaults to 1)",
        "bias": "`bias` defaults to None, torch.nn's to True",
        "batch_first": "`batch_first` defaults to True, torch.nn's to False",
        "dropout": "`dropout` defaults to tensor([0., 0.]), torch.nn's to 0.0"}
    assert changed_defaults("lstm", KeywordsRNN) == {}


def test_positional_only_and_renamed_constructors_work():
    gru = adapt("gru", PositionalOnlyGRU)(3, 5, num_layers=2)
    assert gru.num_layers == 2
    cell = adapt("rnn_cell", OwnNamesCell)(input_size=3, hidden_size=5)
    assert cell.weight_ih.shape == (5, 3)


def test_a_constructor_that_needs_more_than_torch_gives_says_what():
    with pytest.raises(CannotConstruct, match="requires `output_size`"):
        adapt("rnn", NeedsOutputSize)(3, 5)


def test_a_required_state_gets_zeros_and_omitting_it_is_not_supported():
    adapted = adapt("rnn_cell", StateRequiredCell)
    assert "optional_state" in adapted.unsupported
    module = adapted(3, 5)
    assert torch.equal(module(torch.ones(4, 3)), module.inner(torch.ones(4, 3), torch.zeros(4, 5)))
    assert list(module.state_dict()) == list(module.inner.state_dict())


def test_a_plain_object_is_a_module_whose_parameters_it_computes_with():
    module = adapt("rnn", PlainExercise)(3, 5)
    assert isinstance(module, ObjectModule)
    assert set(dict(module.named_parameters())) == {"W_ih", "W_hh"}
    module.to(torch.float64)
    output, _ = module(torch.randn(4, 2, 3, dtype=torch.float64))
    output.sum().backward()
    assert module.W_ih.grad is not None and module.W_ih.dtype == torch.float64


# --- parameter maps -----------------------------------------------------------------------------

def roles_and_map(kind: str, constructor, cfg: Config | None = None):
    subject = Subject(Implementation("t", {kind: constructor}), kind, suite=suite_kind(kind))
    cfg = cfg or Config(kind, 4, 7)
    module = subject.construct(cfg)
    return module, subject.param_map(module, cfg)


class LinearCell(nn.Module):
    """A tutorial's cell: nn.Linear submodules, one bias, the state required."""

    def __init__(self, input_size, hidden_size):
        super().__init__()
        self.W_xh = nn.Linear(input_size, hidden_size)
        self.W_hh = nn.Linear(hidden_size, hidden_size, bias=False)

    def forward(self, x, h):
        return torch.tanh(self.W_xh(x) + self.W_hh(h))


class ConcatCell(nn.Module):
    def __init__(self, input_size, hidden_size):
        super().__init__()
        self.i2h = nn.Linear(input_size + hidden_size, hidden_size)

    def forward(self, x, h):
        return torch.tanh(self.i2h(torch.cat([x, h], 1)))


class TransposedCell(nn.Module):
    """x @ W layout: W_xh (input, hidden), W_hh (hidden, hidden) used as h @ W_hh."""

    def __init__(self, input_size, hidden_size):
        super().__init__()
        self.W_xh = nn.Parameter(torch.randn(input_size, hidden_size))
        self.W_hh = nn.Parameter(torch.randn(hidden_size, hidden_size))
        self.b_h = nn.Parameter(torch.zeros(hidden_size))

    def forward(self, x, h=None):
        h = x.new_zeros(x.shape[0], self.W_hh.shape[0]) if h is None else h
        return torch.tanh(x @ self.W_xh + h @ self.W_hh + self.b_h)


class PerGateLSTMCell(nn.Module):
    """One matrix and one bias per gate and side; the biases put the side's letter before the
    gate's in a word of its own."""

    def __init__(self, input_size, hidden_size):
        super().__init__()
        for gate in "ifgo":
            setattr(self, f"W_i{gate}", nn.Parameter(torch.randn(hidden_size, input_size)))
            setattr(self, f"W_h{gate}", nn.Parameter(torch.randn(hidden_size, hidden_size)))
            setattr(self, f"b_i_{gate}", nn.Parameter(torch.randn(hidden_size)))
            setattr(self, f"b_h_{gate}", nn.Parameter(torch.randn(hidden_size)))


def test_linear_submodules_map_by_shape_and_name_and_the_missing_bias_is_held_at_zero():
    _, pmap = roles_and_map("rnn_cell", LinearCell)
    assert pmap.entries == {"weight_ih": (Piece("W_xh.weight"),), "weight_hh": (Piece("W_hh.weight"),),
                            "bias_ih": (Piece("W_xh.bias"),), "bias_hh": ()}
    assert pmap.missing == ["bias_hh"]


def test_one_matrix_over_input_and_state_is_split_by_columns():
    _, pmap = roles_and_map("rnn_cell", ConcatCell)
    assert pmap.entries["weight_ih"] == (Piece("i2h.weight", "cols:0:4"),)
    assert pmap.entries["weight_hh"] == (Piece("i2h.weight", "cols:4:11"),)


def test_a_transposed_layout_is_read_transposed_square_matrices_included():
    module, pmap = roles_and_map("rnn_cell", TransposedCell)
    assert pmap.entries["weight_ih"] == (Piece("W_xh", "T"),)
    assert pmap.entries["weight_hh"] == (Piece("W_hh", "T"),)  # follows W_xh's orientation
    cfg = Config("rnn_cell", 4, 7)
    values = {name: torch.randn(shape) if name != "bias_hh" else torch.zeros(shape)
              for name, shape in {"weight_ih": (7, 4), "weight_hh": (7, 7), "bias_ih": (7,),
                                  "bias_hh": (7,)}.items()}
    load(module, cfg, pmap, values)
    assert torch.equal(module.W_xh, values["weight_ih"].T)
    assert torch.equal(spec_state(module, cfg, pmap)["weight_hh"], values["weight_hh"])
    assert (params_of(module, cfg, pmap)["bias_hh"] == 0).all()


def test_one_matrix_per_gate_is_stacked_in_torch_gate_order():
    _, pmap = roles_and_map("lstm_cell", PerGateLSTMCell)
    assert [p.key for p in pmap.entries["weight_ih"]] == ["W_ii", "W_if", "W_ig", "W_io"]
    assert [p.key for p in pmap.entries["weight_hh"]] == ["W_hi", "W_hf", "W_hg", "W_ho"]
    assert [p.key for p in pmap.entries["bias_ih"]] == ["b_i_i", "b_i_f", "b_i_g", "b_i_o"]
    assert [p.key for p in pmap.entries["bias_hh"]] == ["b_h_i", "b_h_f", "b_h_g", "b_h_o"]


def test_two_biases_that_names_cannot_tell_apart_are_refused_for_the_gru_only():
    shapes = {"A": (15, 3), "B": (15, 5), "c": (15,), "d": (15,)}
    with pytest.raises(MappingError, match="matters for the GRU"):
        param_roles.learn_roles(Config("gru_cell", 3, 5), shapes)
    roles = param_roles.learn_roles(Config("rnn_cell", 3, 5), {"A": (5, 3), "B": (5, 5), "c": (5,),
                                                             "d": (5,)})
    assert {roles["c"][0], roles["d"][0]} == {"bias_ih", "bias_hh"}


def test_layers_are_told_apart_by_the_numbers_in_the_keys():
    cfg = Config("rnn", 3, 5, num_layers=2)
    shapes = {"layers.0.W_ih": (5, 3), "layers.0.W_hh": (5, 5), "layers.1.W_ih": (5, 5),
              "layers.1.W_hh": (5, 5)}
    roles = param_roles.learn_roles(probe_config("rnn"),
                                 {"layers.0.W_ih": (5, 3), "layers.0.W_hh": (5, 5)})
    pmap = param_roles.resolve(cfg, shapes, roles)
    assert pmap.entries["weight_ih_l1"] == (Piece("layers.1.W_ih"),)
    assert pmap.entries["weight_hh_l0"] == (Piece("layers.0.W_hh"),)


def test_a_reverse_direction_marked_bw_is_the_reverse_direction():
    cfg = Config("lstm", 3, 5, num_layers=2, bidirectional=True)
    keys = {f"layers.{layer}.layer_{side}.cell.{gates}.{what}": (20, width) if what == "weight" else (20,)
            for layer, inputs in ((0, 3), (1, 10)) for side in ("fw", "bw")
            for gates, width in (("igates", inputs), ("hgates", 5)) for what in ("weight", "bias")}
    roles = param_roles.learn_roles(probe_config("lstm"), {
        key: shape for key, shape in keys.items() if key.startswith("layers.0.layer_fw")})
    pmap = param_roles.resolve(cfg, keys, roles)
    assert pmap.entries["weight_ih_l0_reverse"] == (Piece("layers.0.layer_bw.cell.igates.weight"),)
    assert pmap.entries["weight_hh_l1"] == (Piece("layers.1.layer_fw.cell.hgates.weight"),)
    assert pmap.entries["bias_ih_l1_reverse"] == (Piece("layers.1.layer_bw.cell.igates.bias"),)


class ShortNamesGRUCell(nn.Module):
    """The commonest own names: W_ih, W_hh, b_ih, b_hh at the top level."""

    def __init__(self, input_size, hidden_size):
        super().__init__()
        self.W_ih = nn.Parameter(torch.zeros(3 * hidden_size, input_size))
        self.W_hh = nn.Parameter(torch.zeros(3 * hidden_size, hidden_size))
        self.b_ih = nn.Parameter(torch.zeros(3 * hidden_size))
        self.b_hh = nn.Parameter(torch.zeros(3 * hidden_size))


class OneLayerWithTemperatureRNN(nn.RNN):
    """Ignores num_layers (one layer whatever is asked), and keeps a scalar of its own."""

    def __init__(self, input_size, hidden_size, num_layers=1):
        super().__init__(input_size, hidden_size)
        self.temperature = nn.Parameter(torch.ones(()))


def test_a_missing_layer_beside_a_key_no_parameter_could_be_is_a_finding():
    with pytest.raises(Finding, match="state_dict lacks weight_ih_l1") as raised:
        roles_and_map("rnn", OneLayerWithTemperatureRNN, Config("rnn", 4, 7, num_layers=2))
    assert "parameters_matched" not in raised.value.numbers


def test_the_b_of_a_bias_name_is_no_direction_marker():
    _, pmap = roles_and_map("gru_cell", ShortNamesGRUCell)
    assert pmap.entries["bias_ih"] == (Piece("b_ih"),) and pmap.entries["bias_hh"] == (Piece("b_hh"),)
    assert param_roles.template("cells.b.weight") == param_roles.template("cells.f.weight")


class OwnNamesProjectedLSTM(nn.Module):
    """An LSTM with a projection, one layer, its own names; W_hr is there only when asked for."""

    def __init__(self, input_size, hidden_size, proj_size=0):
        super().__init__()
        width = proj_size or hidden_size
        self.W_ih = nn.Parameter(torch.zeros(4 * hidden_size, input_size))
        self.W_hh = nn.Parameter(torch.zeros(4 * hidden_size, width))
        if proj_size:
            self.W_hr = nn.Parameter(torch.zeros(proj_size, hidden_size))


def test_a_projection_is_found_by_a_probe_that_has_one():
    _, pmap = roles_and_map("lstm", OwnNamesProjectedLSTM, Config("lstm", 4, 7, proj_size=3))
    assert pmap.entries["weight_hr_l0"] == (Piece("W_hr"),)
    assert pmap.entries["weight_hh_l0"] == (Piece("W_hh"),)


class DirectionSubmodulesRNN(nn.Module):
    """Each layer's directions submodules of their own: `straight`, and `other` only when
    bidirectional, a name no rule reads as the reverse direction."""

    def __init__(self, input_size, hidden_size, num_layers=1, bidirectional=False):
        super().__init__()
        self.layers = nn.ModuleList(
            nn.ModuleDict({"straight": nn.RNNCell(input_size if layer == 0 else 2 * hidden_size, hidden_size),
                           **({"other": nn.RNNCell(input_size if layer == 0 else 2 * hidden_size,
                                                   hidden_size)} if bidirectional else {})})
            for layer in range(num_layers))


def test_a_parameter_not_found_beside_keys_not_placed_leaves_the_function_not_checked():
    cfg = Config("rnn", 4, 7, num_layers=2, bidirectional=True)
    with pytest.raises(Finding, match="not placed: layers.0.other.weight_hh") as raised:
        roles_and_map("rnn", DirectionSubmodulesRNN, cfg)
    assert raised.value.numbers["parameters_matched"] is False


class PeepholeNamesCell(nn.Module):
    """Own names for torch.nn's four parameters and five entries torch.nn has not."""

    def __init__(self, input_size, hidden_size):
        super().__init__()
        self.W_ih = nn.Parameter(torch.zeros(4 * hidden_size, input_size))
        self.W_hh = nn.Parameter(torch.zeros(4 * hidden_size, hidden_size))
        for name in ("w_ci", "w_cf", "w_co", "gain", "shift"):
            setattr(self, name, nn.Parameter(torch.zeros(hidden_size)))


def test_renamed_parameters_name_the_entries_torch_has_not_too_and_how_many():
    from rnnbench.suites.runner import run_checks

    [result] = run_checks(Implementation("p", {"lstm_cell": PeepholeNamesCell}),
                          checks="parameters/batched")
    assert result.outcome == "failed" and "W_ih -> weight_ih" in result.message
    assert result.message.endswith("it also has entries torch.nn's has not: w_ci, w_cf, w_co, "
                                   "gain and 1 more")


class LetteredStackRNN(nn.Module):
    """Layers of W, U and a bias named b: the commonest from-scratch names."""

    def __init__(self, input_size, hidden_size, num_layers=1):
        super().__init__()
        self.layers = nn.ModuleList(nn.ParameterDict({
            "W": nn.Parameter(torch.zeros(hidden_size, input_size if n == 0 else hidden_size)),
            "U": nn.Parameter(torch.zeros(hidden_size, hidden_size)),
            "b": nn.Parameter(torch.zeros(hidden_size))}) for n in range(num_layers))


class DirectionModulesGRU(nn.Module):
    """One torch GRU per direction, as `fwd` and `bwd` (or cells under `f` and `b`)."""

    def __init__(self, input_size, hidden_size, bidirectional=False, cells=False):
        super().__init__()
        make = (lambda: nn.GRUCell(input_size, hidden_size)) if cells else (
            lambda: nn.GRU(input_size, hidden_size))
        names = ("f", "b") if cells else ("fwd", "bwd")
        self.directions = nn.ModuleDict({name: make() for name in names[:1 + bidirectional]})


class DirectionCellsGRU(DirectionModulesGRU):
    def __init__(self, input_size, hidden_size, bidirectional=False):
        super().__init__(input_size, hidden_size, bidirectional, cells=True)


def test_a_bias_named_b_is_a_bias_and_direction_modules_are_directions():
    _, pmap = roles_and_map("rnn", LetteredStackRNN, Config("rnn", 4, 7, num_layers=2))
    assert pmap.entries["bias_ih_l1"] == (Piece("layers.1.b"),)
    bidirectional = Config("gru", 4, 7, bidirectional=True)
    _, pmap = roles_and_map("gru", DirectionModulesGRU, bidirectional)
    assert pmap.entries["weight_ih_l0_reverse"] == (Piece("directions.bwd.weight_ih_l0"),)
    assert pmap.entries["weight_ih_l0"] == (Piece("directions.fwd.weight_ih_l0"),)
    _, pmap = roles_and_map("gru", DirectionCellsGRU, bidirectional)
    assert pmap.entries["weight_hh_l0_reverse"] == (Piece("directions.b.weight_hh"),)


def test_keys_that_differ_only_in_a_number_on_the_probe_are_refused_not_mixed_up():
    with pytest.raises(MappingError, match="gates.0.weight and gates.1.weight differ only in a number"):
        param_roles.learn_roles(Config("rnn_cell", 3, 5), {"gates.0.weight": (5, 3), "gates.0.bias": (5,),
                                                           "gates.1.weight": (5, 5), "gates.1.bias": (5,)})


def test_a_user_map_wins_and_can_say_transposed():
    cfg = Config("rnn_cell", 3, 5)
    pmap = parammap.from_user(cfg, {"U": (5, 5), "W": (3, 5)}, parammap.parse_user_map(
        "W=weight_ih.T, U=weight_hh"))
    assert pmap.entries["weight_ih"] == (Piece("W", "T"),)
    assert pmap.missing == ["bias_ih", "bias_hh"]
    with pytest.raises(ValueError, match="not KEY=NAME"):
        parammap.parse_user_map("W_ih")
    with pytest.raises(MappingError, match="no parameter 'weight_xy'"):
        parammap.from_user(cfg, {"W": (5, 3)}, {"W": "weight_xy"})
