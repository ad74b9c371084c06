"""Meeting implementations where they are: constructors called as torch.nn's whatever their own
signature, the features a missing argument costs, plain objects as modules, required states, and
parameters found under other names and layouts."""
from __future__ import annotations

import inspect
import math
from pathlib import Path

import pytest
import torch
from torch import nn
from torch.nn import functional as F

from rnnbench.impls import Implementation
from rnnbench.impls import load as load_target
from rnnbench.impls.adapt import (Adapted, CannotConstruct, ObjectModule, UnsupportedArgument,
                                  adapt, changed_defaults, size_parameters, sizes_reversed,
                                  split_state, zero_state)
from rnnbench.reference import Config
from rnnbench.suites import param_roles, parammap
from rnnbench.suites.torch_nn import probe_config
from rnnbench.suites.parammap import MappingError, Piece
from rnnbench.suites.results import Finding
from rnnbench.suites.catalogue import suite_kind
from rnnbench.suites.subject import Subject, load, params_of, spec_state, unregistered


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


def _signature_of(names: str) -> inspect.Signature:
    """A constructor's signature from its parameter list, written as in its source."""
    namespace = {}
    exec(f"def constructor({names}): pass", namespace)
    return inspect.signature(namespace["constructor"])


I, H = "input_size", "hidden_size"
# (the constructor's parameters, what takes each size by name: {} where they go by position)
SIZE_READINGS = [
    ("input_size, hidden_size", {I: "input_size", H: "hidden_size"}),
    ("hidden_size, input_size", {I: "input_size", H: "hidden_size"}),
    ("lstm_hidden_dim, embedding_size", {I: "embedding_size", H: "lstm_hidden_dim"}),
    ("seq_length, input_dim, num_hidden, num_classes, batch_size, device='cpu'",
     {I: "input_dim", H: "num_hidden"}),
    ("input_dim, hidden_dim, output_dim", {I: "input_dim", H: "hidden_dim"}),
    ("in_features, hidden", {I: "in_features", H: "hidden"}),
    ("ninp, nhid", {I: "ninp", H: "nhid"}),  # PyTorch's word-language model
    ("n_inputs, n_neurons", {I: "n_inputs", H: "n_neurons"}),
    ("nHidden, nIn", {I: "nIn", H: "nHidden"}),
    ("input_dim, hidden_dim=128", {I: "input_dim", H: "hidden_dim"}),
    ("num_inputs, num_hiddens, sigma=0.01", {I: "num_inputs", H: "num_hiddens"}),  # d2l.ai
    ("input_sz, hidden_sz", {I: "input_sz", H: "hidden_sz"}),
    ("d_h, *, d_in, num_layers=1", {I: "d_in", H: "d_h"}),
    # a vocabulary (or nn.Embedding's count) is what an embedding reads, not the input size
    ("vocab_size, embedding_dim, hidden_dim, tagset_size",
     {I: "embedding_dim", H: "hidden_dim"}),
    ("num_embeddings, hidden_dim, embedding_dim", {I: "embedding_dim", H: "hidden_dim"}),
    # torch.nn's name wins over one that only says the size
    ("input_size, hidden_size, hidden_dim", {I: "input_size", H: "hidden_size"}),
    # silent or ambiguous: by position
    ("input_size, output_size", {}),
    ("vocab_size, hidden_size", {}),
    ("d1, d2", {}),
    ("in_dim, h_dim, state_dim", {}),
    ("d_in, d_h, num_units=8", {}),
    ("input_hidden, hidden_size", {}),
    ("hidden_dim, input_dim, /", {}),
    ("proj_size, hidden_size", {}),  # torch.nn's other arguments are never sizes
    ("input_dim, d2, state=None", {}),  # a size's default is a number
]


@pytest.mark.parametrize("names, expected", SIZE_READINGS, ids=[row[0] for row in SIZE_READINGS])
def test_the_sizes_go_to_the_parameters_whose_names_say_them(names, expected):
    assert size_parameters("lstm", _signature_of(names)) == expected


class HiddenFirstLSTM(nn.LSTM):
    """A course's template: `LSTM(lstm_hidden_dim, embedding_size)`."""

    def __init__(self, lstm_hidden_dim, embedding_size):
        super().__init__(embedding_size, lstm_hidden_dim)


def test_sizes_named_in_another_order_build_the_module_asked_for():
    adapted = adapt("lstm", HiddenFirstLSTM)
    assert isinstance(adapted, Adapted)
    module = adapted(3, 5)
    assert (module.input_size, module.hidden_size) == (3, 5)
    assert module.weight_ih_l0.shape == (20, 3)


def test_only_torch_nn_s_names_at_their_places_need_no_adaptation_of_the_sizes():
    def named_as_torch(hidden_size, input_size, num_layers=1, bias=True, batch_first=False,
                       dropout=0.0, bidirectional=False, nonlinearity="tanh", device=None,
                       dtype=None):
        return nn.RNN(input_size, hidden_size, num_layers=num_layers, bias=bias,
                      batch_first=batch_first, dropout=dropout, bidirectional=bidirectional,
                      nonlinearity=nonlinearity, device=device, dtype=dtype)

    def named_its_own_way(n_hidden, n_in, num_layers=1, bias=True, batch_first=False,
                          dropout=0.0, bidirectional=False, nonlinearity="tanh", device=None,
                          dtype=None):
        return named_as_torch(n_hidden, n_in, num_layers, bias, batch_first, dropout,
                              bidirectional, nonlinearity, device, dtype)

    assert adapt("rnn", named_as_torch) is named_as_torch  # called by keyword, as torch.nn's
    adapted = adapt("rnn", named_its_own_way)
    assert adapted.size_names == {"input_size": "n_in", "hidden_size": "n_hidden"}
    assert adapted(3, 5, num_layers=2).weight_ih_l1.shape == (5, 5)


def test_a_constructor_taking_the_hidden_size_first_is_found_by_its_names():
    def hidden_then_input(hidden_size, input_size):
        return nn.RNN(input_size, hidden_size)

    def own_names_in_order(n_in, n_hidden):
        return nn.RNN(n_in, n_hidden)

    assert sizes_reversed("lstm", HiddenFirstLSTM) == ("lstm_hidden_dim", "embedding_size")
    assert sizes_reversed("rnn", hidden_then_input) == ("hidden_size", "input_size")
    assert sizes_reversed("rnn", own_names_in_order) is None
    assert sizes_reversed("lstm", nn.LSTM) is None
    assert sizes_reversed("rnn", lambda d1, d2: nn.RNN(d1, d2)) is None  # the names do not say


class UvA2019VanillaRNN(nn.Module):
    def __init__(self, seq_length, input_dim, num_hidden, num_classes, batch_size, device="cpu"):
        super().__init__()


def test_what_the_constructor_requires_beside_the_sizes_read_by_name_is_named():
    adapted = adapt("rnn", UvA2019VanillaRNN)
    assert adapted.required_extra == ["seq_length", "num_classes", "batch_size"]
    with pytest.raises(CannotConstruct, match="requires `seq_length`, `num_classes`, `batch_size`,"):
        adapted(3, 5)


class PositionalOnlyBeforeNamedSizes(nn.GRU):
    def __init__(self, num_layers, /, hidden_dim, input_dim):
        super().__init__(input_dim, hidden_dim, num_layers)


def test_a_positional_only_argument_goes_by_position_beside_sizes_by_name():
    adapted = adapt("gru", PositionalOnlyBeforeNamedSizes)
    assert (adapted.positional_only, adapted.required_extra) == (["num_layers"], [])
    gru = adapted(3, 5, num_layers=2)
    assert (gru.input_size, gru.hidden_size, gru.num_layers) == (3, 5, 2)


def test_a_constructor_that_needs_more_than_torch_gives_says_what():
    with pytest.raises(CannotConstruct, match="requires `output_size`"):
        adapt("rnn", NeedsOutputSize)(3, 5)
    from rnnbench.findings import group_failures
    from rnnbench.suites import run_checks

    groups = group_failures(run_checks(Implementation("t", {"rnn": NeedsOutputSize}), quick=True))
    # rnnbench declined to build it: no "the constructor raised", and it comes first
    assert groups[0].cause == "the constructor requires `output_size`, which torch.nn's RNN does " \
                              "not take"


def test_a_required_state_gets_zeros_and_omitting_it_is_not_supported():
    adapted = adapt("rnn_cell", StateRequiredCell)
    assert "optional_state" in adapted.unsupported
    module = adapted(3, 5)
    assert torch.equal(module(torch.ones(4, 3)), module.inner(torch.ones(4, 3), torch.zeros(4, 5)))
    assert list(module.state_dict()) == list(module.inner.state_dict())


def make_state_required_cell(input_size, hidden_size):
    return StateRequiredCell(input_size, hidden_size)


class ScriptedStateRequiredCell(torch.jit.ScriptModule):
    def __init__(self, input_size, hidden_size):
        super().__init__()
        self.cell = nn.RNNCell(input_size, hidden_size)

    @torch.jit.script_method
    def forward(self, x, h_prev):
        return self.cell(x, h_prev)


class WrappedStateRequiredCell(nn.Module):
    def __init__(self, input_size, hidden_size):
        super().__init__()
        self.cell = nn.RNNCell(input_size, hidden_size)

    def forward(self, x, h_prev):
        return self.cell(x, h_prev)


def make_scripted_state_required_cell(input_size, hidden_size):
    return torch.jit.script(WrappedStateRequiredCell(input_size, hidden_size))


@pytest.mark.parametrize("constructor", [make_state_required_cell, ScriptedStateRequiredCell,
                                         make_scripted_state_required_cell],
                         ids=["factory function", "TorchScript script_method",
                              "factory of torch.jit.script(module)"])
def test_a_required_state_is_read_from_the_forward_that_runs(constructor):
    # a factory's forward is the built class's, or the scripted module's compiled one; a
    # ScriptModule's, the function it compiled
    adapted = adapt("rnn_cell", constructor)
    assert "optional_state" in adapted.unsupported, adapted
    module = adapted(3, 5)
    assert module(torch.ones(4, 3)).shape == (4, 5)


def make_scripted_gru(*args, **kwargs):
    return torch.jit.script(nn.GRU(*args, **kwargs))  # scripting nn.GRU compiles no forward


def test_a_scripted_module_without_a_forward_is_left_for_the_checks_to_call():
    adapted = adapt("gru", make_scripted_gru)
    assert "optional_state" not in getattr(adapted, "unsupported", {})
    with pytest.raises(AttributeError, match="no attribute 'forward'"):
        adapted(3, 5)(torch.ones(2, 1, 3))


class OptionalStateScriptedCell(ScriptedStateRequiredCell):
    def forward(self, x, h_prev=None):  # Python's, over the compiled one it inherits
        return self.cell(x, h_prev)


def test_a_script_module_s_own_python_forward_is_read_before_the_compiled_one_it_inherits():
    assert "optional_state" not in getattr(adapt("rnn_cell", OptionalStateScriptedCell),
                                           "unsupported", {})


class HelperNamedMethodsLSTM(nn.LSTM):
    def _methods(self):  # a name a TorchScript class keeps its compiled methods under
        return []


def test_a_class_attribute_named_like_torchscript_s_is_left_alone():
    assert adapt("lstm", HelperNamedMethodsLSTM) is HelperNamedMethodsLSTM


def test_an_omitted_state_for_packed_input_is_zeros_of_its_batch():
    packed = nn.utils.rnn.pack_sequence([torch.ones(3, 2), torch.ones(2, 2)])
    h0, c0 = zero_state(Config("lstm", 2, 5, num_layers=2), packed)
    assert h0.shape == c0.shape == (2, 2, 5) and not h0.any()


class SplitStateLSTM(nn.LSTM):
    """torch.nn's LSTM behind forward(input, h0=None, c0=None)."""

    def forward(self, input, h0=None, c0=None):
        return super().forward(input, None if h0 is None else (h0, c0))


def test_an_lstm_state_taken_as_two_arguments_is_passed_apart_and_named():
    assert split_state("lstm", SplitStateLSTM) == ("h0", "c0")
    module = adapt("lstm", SplitStateLSTM)(3, 5)
    x, h0, c0 = torch.randn(4, 2, 3), torch.randn(1, 2, 5), torch.randn(1, 2, 5)
    assert torch.equal(module(x, (h0, c0))[0], module.inner(x, h0, c0)[0])
    assert torch.equal(module(x)[0], module.inner(x)[0])  # omitted: the module's own default
    # the third argument is the cell state only where its name says so, and only an LSTM has one
    class WithLengths(nn.LSTM):
        def forward(self, input, hx=None, lengths=None):
            return super().forward(input, hx)
    assert split_state("lstm", WithLengths) is None
    assert split_state("gru", SplitStateLSTM) is None
    assert [split_state("lstm_cell", type("C", (nn.Module,), {"forward": f})) for f in (
        lambda self, x, h_prev, c_prev: x, lambda self, x, hidden, cell_state: x,
        lambda self, x, h, prev_c: x, lambda self, x, state, count: x)] == [
        ("h_prev", "c_prev"), ("hidden", "cell_state"), ("h", "prev_c"), None]


def test_a_plain_object_is_a_module_whose_parameters_it_computes_with():
    module = adapt("rnn", PlainExercise)(3, 5)
    assert isinstance(module, ObjectModule)
    assert set(dict(module.named_parameters())) == {"W_ih", "W_hh"}
    module.to(torch.float64)
    output, _ = module(torch.randn(4, 2, 3, dtype=torch.float64))
    output.sum().backward()
    assert module.W_ih.grad is not None and module.W_ih.dtype == torch.float64


class PlainForwardCell:
    """A tutorial's cell, not an nn.Module, written like one: forward(x, h), no __call__."""

    def __init__(self, input_size, hidden_size):
        self.W_ih = torch.randn(hidden_size, input_size, requires_grad=True)
        self.W_hh = torch.randn(hidden_size, hidden_size, requires_grad=True)

    def forward(self, x, h):
        return torch.tanh(x @ self.W_ih.T + h @ self.W_hh.T)


def test_a_plain_object_with_forward_alone_is_called_through_it():
    adapted = adapt("rnn_cell", PlainForwardCell)
    assert "optional_state" in adapted.unsupported  # read off forward's signature
    module = adapted(3, 5)
    x = torch.randn(4, 3)
    assert torch.equal(module(x), module.inner(x, torch.zeros(4, 5)))


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
    assert pmap.entries["weight_ih"] == (Piece("i2h.weight", cols=(0, 4)),)
    assert pmap.entries["weight_hh"] == (Piece("i2h.weight", cols=(4, 11)),)


class StateFirstConcatCell(nn.Module):
    """One nn.Linear over [h, x], the state's columns first; `activate=False` leaves out tanh."""

    def __init__(self, input_size, hidden_size, activate=True):
        super().__init__()
        self.activate = activate
        self.h2h = nn.Linear(hidden_size + input_size, hidden_size)

    def forward(self, x, h):
        pre = self.h2h(torch.cat([h, x], 1))
        return torch.tanh(pre) if self.activate else pre


class UnactivatedStateFirstConcatCell(StateFirstConcatCell):
    def __init__(self, input_size, hidden_size):
        super().__init__(input_size, hidden_size, activate=False)


def forward_result(kind: str, constructor, case: str = "batched", param_map=None):
    from rnnbench.suites.runner import run_checks

    [result] = run_checks(Implementation("t", {kind: constructor}, param_map=param_map or {}),
                          checks=f"forward/{case}")
    return result


class BidirectionalOnlyRNN(nn.Module):
    """torch.nn's bidirectional RNN as two one-direction RNNs under names of its own; it refuses
    one direction, as a class written for two does."""

    def __init__(self, input_size, hidden_size, bidirectional=True):
        if not bidirectional:
            raise ValueError("bidirectional only")
        super().__init__()
        self.fwd, self.bwd = nn.RNN(input_size, hidden_size), nn.RNN(input_size, hidden_size)

    def forward(self, x, hx=None):
        forward, backward = (None, None) if hx is None else (hx[:1], hx[1:])
        out_f, h_f = self.fwd(x, forward)
        out_b, h_b = self.bwd(x.flip(0), backward)
        return torch.cat([out_f, out_b.flip(0)], -1), torch.cat([h_f, h_b])


def test_a_module_refusing_the_probe_s_configuration_is_not_checked_rather_than_wrong():
    from rnnbench.suites.cases import Case
    from rnnbench.suites.results import judge
    from rnnbench.suites.runner import run_checks

    case = Case("given", Config("rnn", 3, 5, bidirectional=True), batch=2, steps=4)
    results = run_checks(Implementation("t", {"rnn": BidirectionalOnlyRNN}), case=case,
                         checks="forward/*")
    assert judge(results)["numerics"].state == "not checked", [r.message for r in results]
    assert "to tell its parameters apart, the constructor raised ValueError" in results[0].message


def test_a_matrix_over_state_then_input_is_read_so_when_only_that_gives_the_reference():
    _, pmap = roles_and_map("rnn_cell", StateFirstConcatCell)
    assert pmap.entries["weight_ih"] == (Piece("h2h.weight", cols=(7, 11)),)
    assert pmap.entries["weight_hh"] == (Piece("h2h.weight", cols=(0, 7)),)
    assert forward_result("rnn_cell", StateFirstConcatCell).outcome == "passed"
    # Neither reading gives a wrong function the reference's outputs: x first is kept, and fails.
    _, pmap = roles_and_map("rnn_cell", UnactivatedStateFirstConcatCell)
    assert pmap.entries["weight_ih"] == (Piece("h2h.weight", cols=(0, 4)),)
    assert forward_result("rnn_cell", UnactivatedStateFirstConcatCell).outcome == "failed"
    # and the parameters check says the reading is torch.nn's for want of one that fits
    from rnnbench.suites.runner import run_checks

    [names] = run_checks(Implementation("t", {"rnn_cell": UnactivatedStateFirstConcatCell}),
                         checks="parameters/batched")
    assert names.message.endswith("-> bias_ih, bias_hh: none (held at zero); read torch.nn's way: "
                                  "no reading its layout allows gave the reference's outputs"), names.message
    [names] = run_checks(Implementation("t", {"rnn_cell": StateFirstConcatCell}),
                         checks="parameters/batched")
    assert "read torch.nn's way" not in names.message


class PerGateConcatLSTMCell(nn.Module):
    """One nn.Linear per gate over [x, h], named by the gate, as blog posts write an LSTM."""

    def __init__(self, input_size, hidden_size):
        super().__init__()
        for gate in ("input", "forget", "cell", "output"):
            setattr(self, f"{gate}_gate", nn.Linear(input_size + hidden_size, hidden_size))

    def forward(self, x, state):
        h, c = state
        xh = torch.cat([x, h], 1)
        i, f, o = (torch.sigmoid(getattr(self, f"{g}_gate")(xh)) for g in ("input", "forget", "output"))
        c = f * c + i * torch.tanh(self.cell_gate(xh))
        return o * torch.tanh(c), c


def test_one_matrix_per_gate_over_input_and_state_is_split_by_columns_and_stacked():
    _, pmap = roles_and_map("lstm_cell", PerGateConcatLSTMCell)
    gates = ("input", "forget", "cell", "output")
    assert pmap.entries["weight_ih"] == tuple(Piece(f"{g}_gate.weight", cols=(0, 4)) for g in gates)
    assert pmap.entries["weight_hh"] == tuple(Piece(f"{g}_gate.weight", cols=(4, 11)) for g in gates)
    assert pmap.entries["bias_ih"] == tuple(Piece(f"{g}_gate.bias") for g in gates)
    assert pmap.missing == ["bias_hh"]
    assert forward_result("lstm_cell", PerGateConcatLSTMCell).outcome == "passed"


class BarCandidateGRUCell(nn.Module):
    """torch.nn's GRU cell from one nn.Linear per gate over [x, h], named xh_to_z, xh_to_r and
    xh_to_hbar (h-bar, the candidate's usual symbol), each with one bias."""

    def __init__(self, input_size, hidden_size):
        super().__init__()
        for gate in ("z", "r", "hbar"):
            setattr(self, f"xh_to_{gate}", nn.Linear(input_size + hidden_size, hidden_size))

    def forward(self, x, h):
        xh = torch.cat([x, h], 1)
        r, z = torch.sigmoid(self.xh_to_r(xh)), torch.sigmoid(self.xh_to_z(xh))
        x_part = F.linear(x, self.xh_to_hbar.weight[:, :x.shape[1]], self.xh_to_hbar.bias)
        n = torch.tanh(x_part + r * (h @ self.xh_to_hbar.weight[:, x.shape[1]:].T))
        return (1 - z) * n + z * h


def test_a_candidate_named_by_its_symbol_is_the_candidate():
    _, pmap = roles_and_map("gru_cell", BarCandidateGRUCell)
    assert pmap.entries["weight_ih"] == tuple(Piece(f"xh_to_{g}.weight", cols=(0, 4))
                                              for g in ("r", "z", "hbar"))
    assert forward_result("gru_cell", BarCandidateGRUCell).outcome == "passed"


class MixedOrientationCell(nn.Module):
    """W_xh kept for x @ W, the state through an nn.Linear: one matrix transposed, the square
    one not, which only the nn.Linear tells."""

    def __init__(self, input_size, hidden_size):
        super().__init__()
        self.W_xh = nn.Parameter(torch.randn(input_size, hidden_size))
        self.hh = nn.Linear(hidden_size, hidden_size)

    def forward(self, x, h):
        return torch.tanh(x @ self.W_xh + self.hh(h))


def test_an_nn_linear_s_square_weight_is_read_as_nn_linear_stores_it():
    _, pmap = roles_and_map("rnn_cell", MixedOrientationCell)
    assert pmap.entries["weight_ih"] == (Piece("W_xh", "T"),)
    assert pmap.entries["weight_hh"] == (Piece("hh.weight"),)
    assert forward_result("rnn_cell", MixedOrientationCell).outcome == "passed"


class IfogLSTMCell(nn.Module):
    """Its own names, the gates stacked i, f, o, g (Karpathy's LSTMs and their ports); with
    `mixed=True` the input's rows are read in torch.nn's order instead, a real bug."""

    def __init__(self, input_size, hidden_size, mixed=False):
        super().__init__()
        self.mixed = mixed
        self.W = nn.Parameter(torch.randn(4 * hidden_size, input_size))
        self.U = nn.Parameter(torch.randn(4 * hidden_size, hidden_size))
        self.b = nn.Parameter(torch.randn(4 * hidden_size))

    def forward(self, x, state):
        h, c = state
        from_x = (x @ self.W.T).chunk(4, 1)
        if self.mixed:
            from_x = (from_x[0], from_x[1], from_x[3], from_x[2])
        i, f, o, g = (a + b for a, b in zip(from_x, (h @ self.U.T + self.b).chunk(4, 1)))
        c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
        return torch.sigmoid(o) * torch.tanh(c), c


class MixedOrderLSTMCell(IfogLSTMCell):
    def __init__(self, input_size, hidden_size):
        super().__init__(input_size, hidden_size, mixed=True)


def test_a_stacked_matrix_of_its_own_is_read_in_the_gate_order_that_gives_the_reference():
    _, pmap = roles_and_map("lstm_cell", IfogLSTMCell)
    assert pmap.entries["weight_hh"] == tuple(Piece("U", rows=(a, a + 7)) for a in (0, 7, 21, 14))
    assert [piece.rows for piece in pmap.entries["bias_ih"]] == [(0, 7), (7, 14), (21, 28), (14, 21)]
    assert "U (row blocks 1, 2, 4, 3) -> weight_hh" in pmap.describe()
    assert forward_result("lstm_cell", IfogLSTMCell).outcome == "passed"
    # no one order gives the reference: torch.nn's is kept, and the forward fails
    _, pmap = roles_and_map("lstm_cell", MixedOrderLSTMCell)
    assert pmap.entries["weight_hh"] == (Piece("U"),)
    assert forward_result("lstm_cell", MixedOrderLSTMCell).outcome == "failed"


class TorchNamedIfogCell(nn.Module):
    """torch.nn's cell names, the gates read i, f, o, g: the classic bug."""

    def __init__(self, input_size, hidden_size):
        super().__init__()
        self.weight_ih = nn.Parameter(torch.randn(4 * hidden_size, input_size))
        self.weight_hh = nn.Parameter(torch.randn(4 * hidden_size, hidden_size))
        self.bias_ih = nn.Parameter(torch.randn(4 * hidden_size))
        self.bias_hh = nn.Parameter(torch.randn(4 * hidden_size))

    def forward(self, x, state):
        h, c = state
        i, f, o, g = (x @ self.weight_ih.T + self.bias_ih + h @ self.weight_hh.T
                      + self.bias_hh).chunk(4, -1)
        c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
        return torch.sigmoid(o) * torch.tanh(c), c


class TorchNamedIfogStack(nn.Module):
    """A stack of those cells: its keys end in torch.nn's cell names (layers.0.weight_ih)."""

    def __init__(self, input_size, hidden_size, num_layers=1):
        super().__init__()
        self.layers = nn.ModuleList(TorchNamedIfogCell(input_size if n == 0 else hidden_size,
                                                       hidden_size) for n in range(num_layers))

    def forward(self, x, hx=None):
        steps, batch = x.shape[:2]
        states = [(x.new_zeros(batch, self.layers[0].weight_hh.shape[1]),) * 2
                  for _ in self.layers] if hx is None else list(zip(hx[0], hx[1]))
        for n, layer in enumerate(self.layers):
            outputs = []
            for t in range(steps):
                states[n] = layer(x[t], states[n])
                outputs.append(states[n][0])
            x = torch.stack(outputs)
        h, c = zip(*states)
        return x, (torch.stack(h), torch.stack(c))


def test_gates_under_torch_nn_s_names_keep_torch_nn_s_order_in_a_stack_of_cells_too():
    _, pmap = roles_and_map("lstm", TorchNamedIfogStack, Config("lstm", 4, 7))
    assert pmap.entries["weight_ih_l0"] == (Piece("layers.0.weight_ih"),)
    result = forward_result("lstm", TorchNamedIfogStack, "single-layer")
    assert result.outcome == "failed" and result.diagnosis == "lstm_gate_order"


class OffsetIfogCell(nn.Module):
    """Gates i, f, o, g over [h, x] and a (1, 4H) bias named `offset`, which no rule reads."""

    def __init__(self, input_size, hidden_size, bias=True):
        super().__init__()
        self.gates = nn.Linear(hidden_size + input_size, 4 * hidden_size, bias=False)
        self.offset = nn.Parameter(torch.zeros(1, 4 * hidden_size)) if bias else None

    def forward(self, x, state):
        h, c = state
        pre = self.gates(torch.cat([h, x], 1)) + (0 if self.offset is None else self.offset)
        i, f, o, g = pre.chunk(4, 1)
        c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
        return torch.sigmoid(o) * torch.tanh(c), c


def test_a_reading_no_probe_could_hold_leaves_the_function_not_checked_everywhere():
    from rnnbench.suites.results import not_run

    result = forward_result("lstm_cell", OffsetIfogCell, "no-bias")
    assert result.outcome == "failed" and not_run(result), result.message


class VectorHolder(nn.Module):
    def __init__(self, size):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(size))


class SubmoduleBiasCell(nn.Module):
    """Each bias a vector held as a submodule's `.weight`: no normalisation layer."""

    def __init__(self, input_size, hidden_size):
        super().__init__()
        self.W_ih = nn.Parameter(torch.randn(hidden_size, input_size))
        self.W_hh = nn.Parameter(torch.randn(hidden_size, hidden_size))
        self.b_ih, self.b_hh = VectorHolder(hidden_size), VectorHolder(hidden_size)

    def forward(self, x, h):
        return torch.tanh(x @ self.W_ih.T + self.b_ih.weight + h @ self.W_hh.T + self.b_hh.weight)


def test_a_vector_named_weight_outside_a_normalisation_layer_is_read_as_what_it_is():
    assert forward_result("rnn_cell", SubmoduleBiasCell).outcome == "passed"


class LayerNormedLSTM(nn.Module):
    """One layer of torch.nn's LSTM cell under `cells.0`, its gates layer-normalised."""

    def __init__(self, input_size, hidden_size):
        super().__init__()
        self.cells = nn.ModuleList([nn.LSTMCell(input_size, hidden_size)])
        self.norm = nn.LayerNorm(4 * hidden_size)

    def forward(self, x, state):
        cell, (h, c) = self.cells[0], (state[0][0], state[1][0])
        outputs = []
        for x_t in x:
            gates = self.norm(x_t @ cell.weight_ih.T + cell.bias_ih + h @ cell.weight_hh.T
                              + cell.bias_hh)
            i, f, g, o = gates.chunk(4, -1)
            c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
            h = torch.sigmoid(o) * torch.tanh(c)
            outputs.append(h)
        return torch.stack(outputs), (h[None], c[None])


def test_a_layer_normalised_stack_is_judged_its_norm_left_out_of_the_spec_s_parameters():
    from rnnbench.suites.results import not_run

    result = forward_result("lstm", LayerNormedLSTM, "single-layer")
    assert result.outcome == "failed" and not not_run(result), result.message


def test_a_layer_norm_s_gain_and_shift_are_no_biases():
    # a stack of layer-normalised cells: torch.nn's cell names, and a LayerNorm beside them
    shapes = {"cells.0.weight_ih": (20, 3), "cells.0.weight_hh": (20, 5), "cells.0.bias_ih": (20,),
              "cells.0.bias_hh": (20,), "cells.0.ln.weight": (20,), "cells.0.ln.bias": (20,)}
    roles = param_roles.learn_roles(Config("lstm", 3, 5), shapes,
                                    norms=frozenset({"cells.0.ln.weight", "cells.0.ln.bias"}))
    assert {name: block for name, (block, _) in roles.items()} == {
        "cells.#.weight_ih": "weight_ih", "cells.#.weight_hh": "weight_hh",
        "cells.#.bias_ih": "bias_ih", "cells.#.bias_hh": "bias_hh"}
    # nor in a layout of one matrix per gate, where ln_r names the reset gate's norm
    per_gate = {f"W_{side}{gate}": (5, 3 if side == "i" else 5) for side in "ih" for gate in "rzn"}
    norm = frozenset({"ln_r.weight", "ln_r.bias"})
    roles = param_roles.learn_roles(Config("gru_cell", 3, 5), {**per_gate, **dict.fromkeys(norm, (5,))},
                                    norms=norm)
    assert set(roles) == set(per_gate)


def test_an_output_layer_named_for_y_yields_to_the_recurrence_s_own_matrix():
    # min-char-rnn and Coursera's RNN: the readout (vocab x H, vocab = input) has weight_ih's
    # shape transposed, and the names say which one the recurrence uses
    for readout, bias, names in (("Why", "by", ("Wxh", "Whh", "bh")),
                                 ("Wya", "by", ("Wax", "Waa", "ba")),
                                 ("h2o.weight", "h2o.bias", ("x2h.weight", "h2h.weight", "x2h.bias"))):
        shapes = {names[0]: (5, 3), names[1]: (5, 5), names[2]: (5,), readout: (3, 5), bias: (5,)}
        roles = param_roles.learn_roles(Config("rnn_cell", 3, 5), shapes)
        assert {block: layout for block, layout in roles.values()} == {
            "weight_ih": "plain", "weight_hh": "plain", "bias_ih": "plain"}
        assert param_roles.template(readout) not in roles
        assert param_roles.template(bias) not in roles
    # where the state is named y, its keys are its own: x to y is the input's weight, b_y a bias
    y_state = {"W_xy": (5, 3), "W_yy": (5, 5), "b_x": (5,), "b_y": (5,)}
    assert {block for block, _ in param_roles.learn_roles(Config("rnn_cell", 3, 5), y_state).values()
            } == {"weight_ih", "weight_hh", "bias_ih", "bias_hh"}
    # beside a readout the shapes cannot tell from the input's weight, no guess
    with pytest.raises(MappingError, match="both look like weight_ih"):
        param_roles.learn_roles(Config("rnn_cell", 3, 5), {**y_state, "decoder.weight": (3, 5)})


class RMSNorm(nn.Module):  # a normalisation layer of the module's own
    def __init__(self, size):
        super().__init__()
        self.gain = nn.Parameter(torch.ones(size))


class WeightNorm(nn.Module):  # a reparametrised weight of the recurrence, no normalisation layer
    def __init__(self, rows, cols):
        super().__init__()
        self.direction = nn.Parameter(torch.ones(rows, cols))


class GRUCellLayerNorm(nn.Module):  # a cell with a norm inside: its weights are the recurrence's
    def __init__(self, input_size, hidden_size):
        super().__init__()
        self.W_ih = nn.Parameter(torch.ones(3 * hidden_size, input_size))
        self.norm = nn.LayerNorm(3 * hidden_size)


def test_normalisation_layers_are_found_by_type_or_by_their_class_name_scripted_too():
    from rnnbench.suites.torch_nn import _norm_parameters

    module = nn.Module()
    module.scripted = torch.jit.script(nn.LayerNorm(20))  # a RecursiveScriptModule by type
    module.own = RMSNorm(20)
    module.recurrent = WeightNorm(20, 5)
    module.cell = GRUCellLayerNorm(3, 5)
    module.spectral = nn.utils.parametrizations.spectral_norm(nn.Linear(5, 5))
    assert _norm_parameters(module) == {"scripted.weight", "scripted.bias", "own.gain",
                                        "cell.norm.weight", "cell.norm.bias"}


def test_gate_names_are_read_whole_and_a_gate_no_name_gives_is_unreadable_not_missing():
    # "update" is the z gate, not a "U_" prefix before "pdate"
    shapes = {f"{gate}.weight": (5, 8) for gate in ("update", "reset", "candidate")}
    roles = param_roles.learn_roles(Config("gru_cell", 3, 5), shapes)
    assert [roles[f"{gate}.weight"][0] for gate in ("update", "reset", "candidate")] == [
        "combined:z", "combined:r", "combined:n"]
    # "out" is a GRU's candidate where the gates are named reset, update and out; a bare
    # "out" beside gates named otherwise is an output layer
    for suffix in ("_gate", ""):
        named = {f"{gate}{suffix}.weight": (5, 8) for gate in ("reset", "update", "out")}
        roles = param_roles.learn_roles(Config("gru_cell", 3, 5), named)
        assert roles[f"out{suffix}.weight"][0] == "combined:n"
    readout = {**{f"W_{side}{gate}.weight": (5, 3 if side == "i" else 5)
                  for side in "ih" for gate in "rzn"}, "out.weight": (5, 5)}
    assert "out.weight" not in param_roles.learn_roles(Config("gru_cell", 3, 5), readout)
    # two of three gates named: the third's matrix is there, unplaced, so no map is guessed
    unnamed = {"reset.weight": (5, 8), "candidate.weight": (5, 8), "fc3.weight": (5, 8)}
    with pytest.raises(MappingError, match="gates n, r only, of r, z, n"):
        param_roles.learn_roles(Config("gru_cell", 3, 5), unnamed)


class ColumnVectorCell(nn.Module):
    """Column-vector code: h' = tanh(W_ax x + b_x + W_aa h + b_a) on (features, batch) columns,
    the biases stored as (hidden, 1) columns."""

    def __init__(self, input_size, hidden_size):
        super().__init__()
        self.W_ax = nn.Parameter(torch.randn(hidden_size, input_size))
        self.W_aa = nn.Parameter(torch.randn(hidden_size, hidden_size))
        self.b_x = nn.Parameter(torch.randn(hidden_size, 1))
        self.b_a = nn.Parameter(torch.randn(hidden_size, 1))

    def forward(self, x, h):
        return torch.tanh(self.W_ax @ x.T + self.b_x + self.W_aa @ h.T + self.b_a).T


def test_a_bias_stored_as_a_column_is_read_as_its_one_column():
    _, pmap = roles_and_map("rnn_cell", ColumnVectorCell)
    assert {pmap.entries[name][0].layout for name in ("bias_ih", "bias_hh")} == {"column"}
    assert forward_result("rnn_cell", ColumnVectorCell).outcome == "passed"


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


class SharedDirectionsRNN(nn.Module):
    """bidirectional=True runs its one RNN over the reversed sequence too: both directions there,
    sharing their parameters on purpose."""

    def __init__(self, input_size, hidden_size, num_layers=1, bidirectional=False):
        super().__init__()
        self.bidirectional = bidirectional
        self.rnn = nn.RNN(input_size, hidden_size)

    def forward(self, input, hx=None):
        output, h_n = self.rnn(input)
        if not self.bidirectional:
            return output, h_n
        back, h_back = self.rnn(input.flip(0))
        return torch.cat([output, back.flip(0)], -1), torch.cat([h_n, h_back])


def test_parameters_shared_on_purpose_are_not_an_ignored_argument():
    with pytest.raises(Finding, match="state_dict lacks weight_ih_l0_reverse") as raised:
        roles_and_map("rnn", SharedDirectionsRNN, Config("rnn", 4, 7, bidirectional=True))
    assert raised.value.diagnosis != "layers_ignored"


def test_a_missing_layer_beside_a_key_no_parameter_could_be_is_a_finding():
    with pytest.raises(Finding, match="num_layers=2 ignored: the module holds the parameters it "
                                      "holds with num_layers=1") as raised:
        roles_and_map("rnn", OneLayerWithTemperatureRNN, Config("rnn", 4, 7, num_layers=2))
    assert raised.value.diagnosis == "layers_ignored"
    assert "parameters_matched" not in raised.value.numbers


def test_a_matrix_named_for_some_gates_holds_their_rows_in_the_names_order():
    cell = load_target(f"{Path(__file__).parent}/zoo/real_code.py:ResetUpdateLinearGRUCell",
                       "gru_cell")
    _, pmap = roles_and_map("gru_cell", cell.kinds["gru_cell"])
    hidden = 7
    for side in ("input", "hidden"):
        name = "ih" if side == "input" else "hh"
        assert pmap.entries[f"weight_{name}"] == (
            Piece(f"{side}_rz.weight", rows=(0, hidden)),
            Piece(f"{side}_rz.weight", rows=(hidden, 2 * hidden)), Piece(f"{side}_n.weight"))
        assert pmap.entries[f"bias_{name}"] == (
            Piece(f"{side}_rz.bias", rows=(0, hidden)),
            Piece(f"{side}_rz.bias", rows=(hidden, 2 * hidden)), Piece(f"{side}_n.bias"))


def test_a_name_of_gate_letters_is_read_as_the_shape_allows():
    lstm = ("i", "f", "g", "o")
    # W_if: the forget gate's input side (one gate's rows), or the i and f gates (two gates')
    assert param_roles._gates_named("W_if", lstm) == ["f", "if"]
    assert param_roles._gates_named("gates_fo.weight", lstm) == ["fo"]
    assert param_roles._gates_named("W_rr", ("r", "z", "n")) == []  # a gate twice
    hidden, inputs = 5, 3
    roles = {}
    shapes = {"input_if.weight": (2 * hidden, inputs), "W_hf": (hidden, hidden)}
    param_roles._per_gate(Config("lstm_cell", inputs, hidden), shapes, roles)
    assert roles == {"input_if.weight": ("weight_ih:if", "plain"), "W_hf": ("weight_hh:f", "?")}


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
    # a (1, n) bias is the vector x @ W + b broadcasts
    assert parammap.from_user(cfg, {"b": (1, 5)}, {"b": "bias_ih"}).entries["bias_ih"] == (
        Piece("b", "row"),)


class ListedCellsRNN(nn.Module):
    """torch.nn's RNN from cells kept in a plain Python list, as a scratch stack writes it."""

    def __init__(self, input_size, hidden_size, num_layers=1):
        super().__init__()
        self.cells = [nn.RNNCell(input_size if i == 0 else hidden_size, hidden_size)
                      for i in range(num_layers)]

    def forward(self, x, hx=None):
        states = list(hx) if hx is not None else [None] * len(self.cells)
        for i, cell in enumerate(self.cells):
            steps = []
            for x_t in x:
                states[i] = cell(x_t, states[i])
                steps.append(states[i])
            x = torch.stack(steps)
        return x, torch.stack(states)


def test_layers_held_in_a_plain_list_are_named_as_what_hides_the_parameters():
    from rnnbench.suites.results import not_run

    result = forward_result("rnn", ListedCellsRNN, "single-layer")
    assert result.diagnosis == "unregistered_parameters" and not_run(result), result.message
    assert "cells holds modules or parameters in a plain list" in result.message
    registered = ListedCellsRNN(3, 5)
    registered.layers = nn.ModuleList(registered.cells)  # the list is a second view of them
    registered.gate_views = registered.cells[0].weight_hh.chunk(1)  # views of a parameter
    assert unregistered(registered) == []
    assert unregistered(ListedCellsRNN(3, 5)) == ["cells"]
    nested = nn.Module()
    nested.layers = [[nn.RNNCell(3, 5), nn.RNNCell(3, 5)]]  # per layer, per direction
    assert unregistered(nested) == ["layers"]


class UpdateResetStackedGRUCell(nn.Module):
    """torch.nn's GRU cell with the update and reset gates' rows stacked in that order in one
    nn.Linear per side, the candidate's in another pair under names that do not say so."""

    def __init__(self, input_size, hidden_size):
        super().__init__()
        self.x2h, self.h2h = nn.Linear(input_size, 2 * hidden_size), nn.Linear(hidden_size, 2 * hidden_size)
        self.x2r, self.h2r = nn.Linear(input_size, hidden_size), nn.Linear(hidden_size, hidden_size)

    def forward(self, x, h):
        z, r = torch.sigmoid(self.x2h(x) + self.h2h(h)).chunk(2, -1)
        n = torch.tanh(self.x2r(x) + r * self.h2r(h))
        return z * h + (1 - z) * n


def test_a_user_map_can_say_which_gates_rows_a_key_holds():
    cfg = Config("gru_cell", 3, 5)
    user = {"x2h.weight": "weight_ih:zr", "x2r.weight": "weight_ih:n", "x2h.bias": "bias_ih:zr",
            "x2r.bias": "bias_ih:n", "h2h.weight": "weight_hh:zr", "h2r.weight": "weight_hh:n",
            "h2h.bias": "bias_hh:zr", "h2r.bias": "bias_hh:n"}
    shapes = {"x2h.weight": (10, 3), "x2h.bias": (10,), "x2r.weight": (5, 3), "x2r.bias": (5,),
              "h2h.weight": (10, 5), "h2h.bias": (10,), "h2r.weight": (5, 5), "h2r.bias": (5,)}
    assert parammap.from_user(cfg, shapes, user).entries["weight_ih"] == (
        Piece("x2h.weight", rows=(5, 10)), Piece("x2h.weight", rows=(0, 5)), Piece("x2r.weight", rows=(0, 5)))
    with pytest.raises(MappingError, match="weight_ih for gates z, r only"):
        parammap.from_user(cfg, shapes, {"x2h.weight": "weight_ih:zr"})
    with pytest.raises(MappingError, match="the gates of gru_cell.* are r, z, n, each once"):
        parammap.from_user(cfg, shapes, {"x2h.weight": "weight_ih:zf"})
    with pytest.raises(MappingError, match="x2h.weight holds 10 rows, 3 gate"):
        parammap.from_user(cfg, shapes, {"x2h.weight": "weight_ih:zrn"})
    with pytest.raises(MappingError, match="gate n of weight_ih twice"):
        parammap.from_user(cfg, shapes, {"x2h.weight": "weight_ih:rn", "x2r.weight": "weight_ih:n"})
    with pytest.raises(MappingError, match=r"\.T goes after the name \(x2r.weight=weight_ih.T\)"):
        parammap.from_user(cfg, shapes, {"x2r.weight.T": "weight_ih"})
    result = forward_result("gru_cell", UpdateResetStackedGRUCell, param_map=user)
    assert result.outcome == "passed", result.message


def test_a_user_map_joins_names_for_a_matrix_over_the_concatenated_input_and_state():
    cfg = Config("gru_cell", 3, 5)
    shapes = {"rz.weight": (10, 8), "cand.weight": (8, 5), "rz.bias": (1, 10), "cand.bias": (5,)}
    user = {"rz.weight": "weight_hh+weight_ih:rz", "cand.weight": "weight_ih+weight_hh.T:n",
            "rz.bias": "bias_ih:rz", "cand.bias": "bias_ih:n"}
    pmap = parammap.from_user(cfg, shapes, user)
    assert pmap.entries["bias_ih"] == (Piece("rz.bias", "row", rows=(0, 5)),
                                       Piece("rz.bias", "row", rows=(5, 10)),
                                       Piece("cand.bias", rows=(0, 5)))
    assert pmap.entries["weight_hh"] == (
        Piece("rz.weight", rows=(0, 5), cols=(0, 5)), Piece("rz.weight", rows=(5, 10), cols=(0, 5)),
        Piece("cand.weight", "T", rows=(0, 5), cols=(3, 8)))
    assert pmap.entries["weight_ih"] == (
        Piece("rz.weight", rows=(0, 5), cols=(5, 8)), Piece("rz.weight", rows=(5, 10), cols=(5, 8)),
        Piece("cand.weight", "T", rows=(0, 5), cols=(0, 3)))


def test_a_user_map_entry_not_shaped_as_its_names_need_is_refused():
    cfg = Config("gru_cell", 3, 5)
    shapes = {"gates.weight": (10, 8), "gates.bias": (10,)}
    with pytest.raises(MappingError, match=(
            r"^--param-map gates.weight=weight_ih:rz: gates.weight \(10, 8\) has 8 columns, "
            r"weight_ih needs 3 for gru_cell\(3->5\); a matrix over both inputs is "
            r"weight_ih\+weight_hh, its columns in that order \(weight_hh\+weight_ih: the other "
            r"way round\)$")):
        parammap.from_user(cfg, shapes, {"gates.weight": "weight_ih:rz"})
    with pytest.raises(MappingError, match=r"gates.weight \(10, 8\) read transposed has 10 "
                                           r"columns, weight_hh\+weight_ih needs 5 \+ 3"):
        parammap.from_user(cfg, shapes, {"gates.weight": "weight_hh+weight_ih.T:rz"})
    with pytest.raises(MappingError, match=r"gates.bias \(10,\) holds no matrix"):
        parammap.from_user(cfg, shapes, {"gates.bias": "weight_ih:rz"})
    with pytest.raises(MappingError, match=r"gates.weight \(10, 8\) holds no vector, bias_ih"):
        parammap.from_user(cfg, shapes, {"gates.weight": "bias_ih:rz"})
    with pytest.raises(MappingError, match=r"\+ joins matrices of as many rows, each once"):
        parammap.from_user(cfg, shapes, {"gates.weight": "weight_ih+bias_hh"})


class HiddenFirstGRUCell(nn.Module):
    """torch.nn's GRU cell with r and z from one nn.Linear over [h, x] (and a bias of their
    hidden side apart), the candidate's matrices apart."""

    def __init__(self, input_size, hidden_size):
        super().__init__()
        self.rz = nn.Linear(hidden_size + input_size, 2 * hidden_size)
        self.rz_hidden_bias = nn.Parameter(torch.zeros(2 * hidden_size))
        self.x2n, self.h2n = nn.Linear(input_size, hidden_size), nn.Linear(hidden_size, hidden_size)

    def forward(self, x, h):
        rz = self.rz(torch.cat([h, x], -1)) + self.rz_hidden_bias
        r, z = torch.sigmoid(rz).chunk(2, -1)
        n = torch.tanh(self.x2n(x) + r * self.h2n(h))
        return (1 - z) * n + z * h


class DiagramGRUCell(nn.Module):
    """mwolf.dev's GRU diagram: r and z from one nn.Linear over [h, x], the candidate from one
    over [r * h, x] (the reset gate before the matrix), h' = (1 - z) h + z n."""

    def __init__(self, input_size, hidden_size):
        super().__init__()
        self.gates = nn.Linear(input_size + hidden_size, 2 * hidden_size)
        self.cand = nn.Linear(input_size + hidden_size, hidden_size)

    def forward(self, x, h):
        r, z = torch.sigmoid(self.gates(torch.cat([h, x], -1))).chunk(2, -1)
        n = torch.tanh(self.cand(torch.cat([r * h, x], -1)))
        return (1 - z) * h + z * n


def test_a_matrix_over_h_then_x_is_read_in_the_order_the_user_map_joins_its_names():
    candidate = {"x2n.weight": "weight_ih:n", "x2n.bias": "bias_ih:n", "h2n.weight": "weight_hh:n",
                 "h2n.bias": "bias_hh:n", "rz.bias": "bias_ih:rz", "rz_hidden_bias": "bias_hh:rz"}
    state_first = forward_result("gru_cell", HiddenFirstGRUCell,
                                 param_map={**candidate, "rz.weight": "weight_hh+weight_ih:rz"})
    assert state_first.outcome == "passed", state_first.message
    input_first = forward_result("gru_cell", HiddenFirstGRUCell,
                                 param_map={**candidate, "rz.weight": "weight_ih+weight_hh:rz"})
    assert input_first.outcome == "failed"


def test_the_textbook_gru_under_a_user_map_over_h_then_x_is_the_textbook_gru():
    user = {"gates.weight": "weight_hh+weight_ih:rz", "gates.bias": "bias_ih:rz",
            "cand.weight": "weight_hh+weight_ih:n", "cand.bias": "bias_ih:n"}
    result = forward_result("gru_cell", DiagramGRUCell, param_map=user)
    assert (result.outcome, result.diagnosis) == ("failed", "gru_cho_textbook"), result.message


def test_a_misshapen_parameter_under_a_user_map_leaves_the_function_not_checked():
    from rnnbench.suites.results import not_run

    # the candidate's matrices left out: x2h alone is no (15, 3) weight_ih, and the map may be
    # what is wrong
    result = forward_result("gru_cell", UpdateResetStackedGRUCell,
                            param_map={"x2h.weight": "weight_ih", "h2h.weight": "weight_hh"})
    assert result.diagnosis == "param_shapes" and not_run(result), result.message
    assert "the --param-map given, or the module, is wrong" in result.message


class LetteredCell(nn.Module):
    """torch.nn's RNN cell under names of its own: W_ih, W_hh, b_ih, b_hh."""

    def __init__(self, input_size, hidden_size):
        super().__init__()
        self.W_ih = nn.Parameter(torch.zeros(hidden_size, input_size))
        self.W_hh = nn.Parameter(torch.zeros(hidden_size, hidden_size))
        self.b_ih, self.b_hh = nn.Parameter(torch.zeros(hidden_size)), nn.Parameter(torch.zeros(hidden_size))

    def forward(self, x, h):
        return torch.tanh(x @ self.W_ih.T + self.b_ih + h @ self.W_hh.T + self.b_hh)


def test_a_user_map_that_leaves_out_keys_shaped_like_what_it_misses_leaves_the_function_not_checked():
    from rnnbench.suites.results import not_run

    # the biases unnamed: b_ih and b_hh may be them, not parameters outside the spec's
    result = forward_result("rnn_cell", LetteredCell, param_map={"W_ih": "weight_ih", "W_hh": "weight_hh"})
    assert result.diagnosis == "param_names" and not_run(result), result.message
    assert "bias_ih, bias_hh (the --param-map given names none); not placed: b_ih (5,), b_hh (5,)" \
        in result.message
    whole = {"W_ih": "weight_ih", "W_hh": "weight_hh", "b_ih": "bias_ih", "b_hh": "bias_hh"}
    assert forward_result("rnn_cell", LetteredCell, param_map=whole).outcome == "passed"
    # a buffer of a bias's shape (a zero state kept as h_init) is no parameter it may be
    weights = {"W_ih": "weight_ih", "W_hh": "weight_hh"}
    assert forward_result("rnn_cell", BiaslessInitBufferCell, param_map=weights).outcome == "passed"


class BiaslessInitBufferCell(nn.Module):
    """torch.nn's RNN cell without biases, under names of its own, its zero state a buffer."""

    def __init__(self, input_size, hidden_size):
        super().__init__()
        bound = hidden_size ** -0.5
        self.W_ih = nn.Parameter(torch.empty(hidden_size, input_size).uniform_(-bound, bound))
        self.W_hh = nn.Parameter(torch.empty(hidden_size, hidden_size).uniform_(-bound, bound))
        self.register_buffer("h_init", torch.zeros(hidden_size))

    def forward(self, x, hx=None):
        hx = self.h_init.expand(*x.shape[:-1], -1) if hx is None else hx
        return torch.tanh(x @ self.W_ih.T + hx @ self.W_hh.T)


class LengthsFirstRNN(nn.RNN):
    """torch.nn's RNN behind forward(inputs, batch_lengths, initial_state=None), as libraries
    that take padded batches write it."""

    def forward(self, inputs, batch_lengths, initial_state=None):
        return super().forward(inputs, initial_state)


def test_a_forward_that_requires_another_argument_before_its_state_leaves_the_function_not_checked():
    from rnnbench.impls.adapt import forward_requires
    from rnnbench.suites.results import not_run

    result = forward_result("rnn", LengthsFirstRNN, "single-layer")
    assert not_run(result).startswith("its forward needs arguments"), result.message
    assert result.message == ("forward requires `batch_lengths` before its state (`initial_state`), "
                              "which torch.nn's forward does not take")
    assert forward_requires(nn.RNN) is None  # forward(input, hx=None)

    class Optional(nn.Module):
        def forward(self, x, lengths=None, hidden=None): ...

    class Split(nn.Module):
        def forward(self, x, h_prev, c_prev): ...

    class Odd(nn.Module):
        def forward(self, x, s): ...  # a state under a name of its own
    assert forward_requires(Optional) is forward_requires(Split) is forward_requires(Odd) is None

    class DoneAfterState(nn.Module):
        def forward(self, x, lstm_state, done): ...

    class LengthsOnly(nn.Module):
        def forward(self, x, output_lengths): ...
    assert forward_requires(DoneAfterState) == "`done` after its state (`lstm_state`)"
    assert forward_requires(LengthsOnly) == "`output_lengths`"


def test_a_flag_in_the_states_place_is_no_state():
    from rnnbench.impls.adapt import _forward_features

    class Flagged(nn.Module):
        def forward(self, input, collect_hidden=False): ...

    class Stated(nn.Module):
        def forward(self, input, h=None): ...
    assert _forward_features(Flagged) == {"initial_state": "forward takes no initial state (its "
                                          "second argument, `collect_hidden=False`, is none)"}
    assert _forward_features(Stated) == {}


class OneLayerModulesLSTM(nn.Module):
    """torch.nn's LSTM as a stack of one-layer nn.LSTMs: every key ends in torch's `_l0`."""

    def __init__(self, input_size, hidden_size, num_layers=1):
        super().__init__()
        self.layers = nn.ModuleList(nn.LSTM(input_size if layer == 0 else hidden_size, hidden_size)
                                    for layer in range(num_layers))

    def forward(self, input, hx=None):
        hs, cs = [], []
        for layer, module in enumerate(self.layers):
            state = None if hx is None else (hx[0][layer:layer + 1], hx[1][layer:layer + 1])
            input, (h, c) = module(input, state)
            hs.append(h)
            cs.append(c)
        return input, (torch.cat(hs), torch.cat(cs))


def test_a_stack_of_one_layer_modules_is_read_by_the_number_that_differs():
    _, pmap = roles_and_map("lstm", OneLayerModulesLSTM, Config("lstm", 5, 5, num_layers=3))
    assert pmap.entries["weight_hh_l2"] == (Piece("layers.2.weight_hh_l0"),)
    assert forward_result("lstm", OneLayerModulesLSTM, "three-layer-square").outcome == "passed"


def test_a_word_after_torchs_layer_suffix_may_say_the_direction():
    cfg = Config("rnn", 3, 5, num_layers=2, bidirectional=True)
    keys = ["weight_ih_l0_fwd", "weight_ih_l0_bwd", "weight_hh_l1_raw", "weight_hh_l1_reverse",
            "weight_ih_l1_backward", "weight_ih_l1_forward"]
    assert param_roles._units(cfg, keys) == {
        "weight_ih_l0_fwd": (0, 0), "weight_ih_l0_bwd": (0, 1), "weight_hh_l1_raw": (1, 0),
        "weight_hh_l1_reverse": (1, 1), "weight_ih_l1_backward": (1, 1),
        "weight_ih_l1_forward": (1, 0)}


def test_a_partial_user_map_leaves_the_other_names_read_as_a_nested_module_is():
    cfg = Config("rnn", 3, 5)
    shapes = {"module.weight_ih_l0": (5, 3), "module.weight_hh_l0_raw": (5, 5),
              "module.bias_ih_l0": (5,), "module.bias_hh_l0": (5,)}
    pmap = parammap.from_user(cfg, shapes, {"module.weight_hh_l0_raw": "weight_hh_l0"})
    assert pmap.entries == {"weight_ih_l0": (Piece("module.weight_ih_l0"),),
                            "weight_hh_l0": (Piece("module.weight_hh_l0_raw"),),
                            "bias_ih_l0": (Piece("module.bias_ih_l0"),),
                            "bias_hh_l0": (Piece("module.bias_hh_l0"),)}
    # another submodule's parameter of that name is not taken for one the map left out
    beside = {"W_ih": (5, 3), "W_hh": (5, 5), "aux.weight_hh_l0": (5, 5)}
    assert parammap.from_user(cfg, beside, {"W_ih": "weight_ih_l0"}).missing == [
        "weight_hh_l0", "bias_ih_l0", "bias_hh_l0"]


class WeightDropLSTM(nn.Module):
    """AWD-LSTM's WeightDrop at rate 0: torch.nn's LSTM held as `module`, its layer-0 recurrent
    weight kept as `weight_hh_l0_raw` and handed to the LSTM at each call."""

    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False,
                 dropout=0.0, bidirectional=False):
        super().__init__()
        self.module = nn.LSTM(input_size, hidden_size, num_layers, bias, batch_first, dropout,
                              bidirectional)
        self.module.register_parameter("weight_hh_l0_raw",
                                       self.module._parameters.pop("weight_hh_l0"))

    def forward(self, x, hx=None):
        params = dict(self.module.named_parameters())
        params["weight_hh_l0"] = params.pop("weight_hh_l0_raw")
        return torch.func.functional_call(self.module, params, (x, hx))


def test_torch_names_in_a_wrapper_that_renamed_one_are_read_in_every_layer_and_direction():
    _, pmap = roles_and_map("lstm", WeightDropLSTM, Config("lstm", 3, 5, num_layers=2,
                                                            bidirectional=True))
    assert pmap.entries["weight_hh_l0"] == (Piece("module.weight_hh_l0_raw"),)
    assert pmap.entries["weight_hh_l1"] == (Piece("module.weight_hh_l1"),)
    assert pmap.entries["weight_ih_l1_reverse"] == (Piece("module.weight_ih_l1_reverse"),)
    assert pmap.missing == []
    result = forward_result("lstm", WeightDropLSTM, "two-layer-bidirectional")
    assert result.outcome == "passed", result.message


def test_a_word_after_torchs_name_leaves_torchs_gate_order_the_only_reading():
    roles = {"module.weight_ih_l#": ("weight_ih", "plain"),
             "module.weight_hh_l#_raw": ("weight_hh", "plain")}
    assert param_roles.readings(probe_config("lstm"), roles) == [param_roles.Reading()]


def test_a_direction_marked_on_the_reverse_keys_alone_leaves_the_forward_keys_template():
    assert param_roles.template("rnn.W_ih_l0_reverse") == param_roles.template("rnn.W_ih_l0")
    assert param_roles.template("layers.0.bw.W") == param_roles.template("layers.0.W")
    probe = {"W_ih": (5, 3), "W_hh": (5, 5), "b_ih": (5,), "b_hh": (5,)}
    roles = param_roles.learn_roles(probe_config("rnn"), probe)
    both = {**probe, **{f"{key}_reverse": shape for key, shape in probe.items()}}
    pmap = param_roles.resolve(Config("rnn", 3, 5, bidirectional=True), both, roles)
    assert pmap.entries["weight_ih_l0_reverse"] == (Piece("W_ih_reverse"),)
    assert pmap.entries["bias_hh_l0"] == (Piece("b_hh"),)


class RowBiasGRUCell(nn.Module):
    """torch.nn's GRU cell under names of its own (x2h, h2h), its biases (1, 3H) rows."""

    def __init__(self, input_size, hidden_size):
        super().__init__()
        self.x2h_weights = nn.Parameter(torch.randn(3 * hidden_size, input_size))
        self.h2h_weights = nn.Parameter(torch.randn(3 * hidden_size, hidden_size))
        self.x2h_bias = nn.Parameter(torch.randn(1, 3 * hidden_size))
        self.h2h_bias = nn.Parameter(torch.randn(1, 3 * hidden_size))

    def forward(self, x, h):
        xr, xz, xn = (x @ self.x2h_weights.T + self.x2h_bias).chunk(3, 1)
        hr, hz, hn = (h @ self.h2h_weights.T + self.h2h_bias).chunk(3, 1)
        r, z = torch.sigmoid(xr + hr), torch.sigmoid(xz + hz)
        return (1 - z) * torch.tanh(xn + r * hn) + z * h


def test_row_biases_are_read_as_vectors_on_the_side_their_names_say():
    _, pmap = roles_and_map("gru_cell", RowBiasGRUCell)
    assert pmap.entries["bias_ih"] == (Piece("x2h_bias", "row"),)
    assert pmap.entries["bias_hh"] == (Piece("h2h_bias", "row"),)
    assert forward_result("gru_cell", RowBiasGRUCell).outcome == "passed"


class BufferStateRNNCell(nn.Module):
    """torch.nn's RNN cell under names of its own, W_ih, W_hh, b_ih, b_hh, its default initial
    state a zero buffer h0 the size of a bias."""

    def __init__(self, input_size, hidden_size):
        super().__init__()
        bound = hidden_size ** -0.5
        self.W_ih = nn.Parameter(torch.empty(hidden_size, input_size).uniform_(-bound, bound))
        self.W_hh = nn.Parameter(torch.empty(hidden_size, hidden_size).uniform_(-bound, bound))
        self.b_ih = nn.Parameter(torch.empty(hidden_size).uniform_(-bound, bound))
        self.b_hh = nn.Parameter(torch.empty(hidden_size).uniform_(-bound, bound))
        self.register_buffer("h0", torch.zeros(hidden_size))

    def forward(self, x, hx=None):
        hx = self.h0.expand(*x.shape[:-1], -1) if hx is None else hx
        return torch.tanh(x @ self.W_ih.T + self.b_ih + hx @ self.W_hh.T + self.b_hh)


def test_a_buffer_is_no_parameter_unless_the_parameters_cannot_be_matched_without_it():
    assert forward_result("rnn_cell", BufferStateRNNCell).outcome == "passed"
    cfg = Config("rnn_cell", 3, 5)
    shapes = {"W_ih": (5, 3), "W_hh": (5, 5), "b_ih": (5,), "b_hh": (5,), "h0": (5,)}
    assert "h0" not in param_roles.learn_roles(cfg, shapes, buffers=frozenset({"h0"}))
    # torch.nn's weights held as buffers under names of its own: read all the same
    weights = {"W_ih": (5, 3), "W_hh": (5, 5)}
    assert set(param_roles.learn_roles(cfg, weights, buffers=frozenset(weights))) == set(weights)
    with pytest.raises(MappingError, match="no parameter found for weight_ih"):
        param_roles.learn_roles(cfg, {"W_hh": (5, 5), "W_hy": (2, 5)})
    # a message names the module's keys, not the templates roles are learnt by
    with pytest.raises(MappingError, match=r"^h0: one bias too many$"):
        param_roles.learn_roles(cfg, shapes)


class UpdateLetterGRUCell(nn.Module):
    """torch.nn's GRU cell from one matrix per gate over [x, h], stored for xh @ W, and one bias
    per gate: W_r, W_u (the update gate), W_c (the candidate), b_r, b_u, b_c, as a blog names
    them."""

    def __init__(self, input_size, hidden_size):
        super().__init__()
        bound = hidden_size ** -0.5
        for gate in "ruc":
            setattr(self, f"W_{gate}", nn.Parameter(
                torch.empty(input_size + hidden_size, hidden_size).uniform_(-bound, bound)))
            setattr(self, f"b_{gate}", nn.Parameter(torch.empty(hidden_size).uniform_(-bound, bound)))

    def forward(self, x, h):
        xh, inputs = torch.cat([x, h], 1), x.shape[1]
        r, u = torch.sigmoid(xh @ self.W_r + self.b_r), torch.sigmoid(xh @ self.W_u + self.b_u)
        n = torch.tanh(x @ self.W_c[:inputs] + self.b_c + r * (h @ self.W_c[inputs:]))
        return (1 - u) * n + u * h


def test_a_letter_that_names_a_gate_marks_no_side():
    # the u of b_u beside W_u is the update gate, not the hidden side of W/U notation
    roles = param_roles.learn_roles(Config("gru_cell", 3, 5), {
        key: (8, 5) if key.startswith("W") else (5,) for key in ("W_r", "b_r", "W_u", "b_u", "W_c", "b_c")})
    assert [roles[f"b_{gate}"][0] for gate in "ruc"] == ["bias_ih:r", "bias_ih:z", "bias_ih:n"]
    assert forward_result("gru_cell", UpdateLetterGRUCell).outcome == "passed"


class LinearPerGateGRUCell(nn.Module):
    """torch.nn's GRU cell from one nn.Linear per gate and side, Wir, Wiz, Wig, Whr, Whz, Whg:
    the candidate named g, as CSC413's MyGRUCell names it."""

    def __init__(self, input_size, hidden_size):
        super().__init__()
        for side, size in (("i", input_size), ("h", hidden_size)):
            for gate in "rzg":
                setattr(self, f"W{side}{gate}", nn.Linear(size, hidden_size))

    def forward(self, x, h):
        z = torch.sigmoid(self.Wiz(x) + self.Whz(h))
        r = torch.sigmoid(self.Wir(x) + self.Whr(h))
        g = torch.tanh(self.Wig(x) + r * self.Whg(h))
        return (1 - z) * g + z * h


def test_the_one_gate_no_letter_names_is_found_by_elimination():
    _, pmap = roles_and_map("gru_cell", LinearPerGateGRUCell)
    assert [p.key for p in pmap.entries["weight_hh"]] == ["Whr.weight", "Whz.weight", "Whg.weight"]
    assert [p.key for p in pmap.entries["bias_ih"]] == ["Wir.bias", "Wiz.bias", "Wig.bias"]
    assert forward_result("gru_cell", LinearPerGateGRUCell).outcome == "passed"
    gru, lstm = Config("gru_cell", 3, 5), Config("lstm_cell", 3, 5)

    def per_gate(gates: str, **unnamed) -> dict[str, tuple]:
        """Parameters per gate and side named W_i<gate>, W_h<gate>, b_i<gate>, then `unnamed`."""
        return {**{f"{what}{side}{gate}": shape for gate in gates for what, side, shape in (
            ("W_", "i", (5, 3)), ("W_", "h", (5, 5)), ("b_", "i", (5,)))}, **unnamed}
    roles = param_roles.learn_roles(gru, per_gate("rzg"))
    assert [roles[key][0] for key in ("W_ig", "W_hg", "b_ig")] == ["weight_ih:n", "weight_hh:n", "bias_ih:n"]
    # a letter that names a gate keeps it: the g of an LSTM is its cell gate
    assert param_roles.learn_roles(lstm, per_gate("ifgo"))["W_ig"][0] == "weight_ih:g"
    assert param_roles.learn_roles(lstm, per_gate("ifao"))["W_ia"][0] == "weight_ih:g"
    # two keys no letter names, or a key of another form, are not guessed at
    for unnamed in ({"W_ig": (5, 3), "W_iq": (5, 3)}, {"W_g": (5, 3)}):
        with pytest.raises(MappingError, match="weight_ih for gates r, z only"):
            param_roles.learn_roles(gru, per_gate("rz", W_hg=(5, 5), b_ig=(5,), **unnamed))
