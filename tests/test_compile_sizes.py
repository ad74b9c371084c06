"""compile builds a configuration's graphs once for every batch and hidden size and for every
input layout: a workload pre-checked at a small batch and timed at its own, or conformance cases
of many sizes, seq-first or batch-first, with biases or without, do not compile again."""
import torch

from rnnbench.impls import load
from rnnbench.reference import tolerance


def test_compile_does_not_recompile_for_new_batch_or_hidden_sizes():
    from torch._dynamo.utils import counters

    from rnnbench.impls.compile import CHUNK_SIZES

    steps = min(CHUNK_SIZES)
    with torch.no_grad():
        first = load("compile").constructor("gru")(3, 6)
        first(torch.randn(steps, 2, 3))
        compiled = counters["stats"]["unique_graphs"]
        for input_size, hidden_size, batch in ((3, 6, 5), (4, 9, 3), (2, 13, 7)):
            module = load("compile").constructor("gru")(input_size, hidden_size)
            native = torch.nn.GRU(input_size, hidden_size)
            module.load_state_dict(native.state_dict())
            x = torch.randn(steps, batch, input_size)
            assert tolerance("float32", steps).excess(module(x)[0], native(x)[0]) <= 1
    assert counters["stats"]["unique_graphs"] == compiled > 0


def test_compile_shares_one_graph_between_seq_first_and_batch_first_inputs_and_their_gradients():
    from torch._dynamo.utils import counters

    from rnnbench.impls.compile import CHUNK_SIZES

    steps = min(CHUNK_SIZES)
    constructor = load("compile").constructor("lstm")
    constructor(3, 5)(torch.randn(steps, 2, 3))[0].sum().backward()
    compiled = counters["stats"]["unique_graphs"]
    native = torch.nn.LSTM(3, 5, batch_first=True)
    module = constructor(3, 5, batch_first=True)
    module.load_state_dict(native.state_dict())
    x = torch.randn(2, steps, 3, requires_grad=True)
    grad = torch.randn(2, steps, 5)
    (got,) = torch.autograd.grad(module(x)[0], x, grad)
    (expected,) = torch.autograd.grad(native(x)[0], x, grad)
    assert tolerance("float32", steps).excess(got, expected) <= 1
    assert counters["stats"]["unique_graphs"] == compiled > 0


def test_compile_shares_one_rnn_graph_with_biases_and_without():
    from torch._dynamo.utils import counters

    from rnnbench.impls.compile import CHUNK_SIZES

    steps = min(CHUNK_SIZES)
    constructor = load("compile").constructor("rnn")
    with torch.no_grad():
        constructor(3, 5)(torch.randn(steps, 2, 3))
        compiled = counters["stats"]["unique_graphs"]
        native = torch.nn.RNN(3, 5, bias=False)
        module = constructor(3, 5, bias=False)
        module.load_state_dict(native.state_dict())
        x = torch.randn(steps, 2, 3)
        assert tolerance("float32", steps).excess(module(x)[0], native(x)[0]) <= 1
    assert counters["stats"]["unique_graphs"] == compiled > 0
