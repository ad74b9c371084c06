"""compile builds a configuration's graphs once for every batch and hidden size and for every
input layout: a workload pre-checked at a small batch and timed at its own, or conformance cases
of many sizes (a batch of one and unbatched input included), seq-first or batch-first, with
biases or without, do not compile again."""
import pytest
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


def _twins_after_a_build(kind: str, **config):
    """compile's `kind` with its gradient graphs built (one call and backward of a seq-first
    batch of two, biases on), then a compile module of `config` (input 3, hidden 5) holding the
    weights of its torch.nn twin: (module, twin, the graphs built so far, steps of one chunk)."""
    from torch._dynamo.utils import counters

    from rnnbench.impls.compile import CHUNK_SIZES

    steps = min(CHUNK_SIZES)
    constructor = load("compile").constructor(kind)
    constructor(3, 5)(torch.randn(steps, 2, 3))[0].sum().backward()
    native = getattr(torch.nn, kind.upper())(3, 5, **config)
    module = constructor(3, 5, **config)
    module.load_state_dict(native.state_dict())
    return module, native, counters["stats"]["unique_graphs"], steps


def test_compile_shares_one_graph_between_seq_first_and_batch_first_inputs_and_their_gradients():
    from torch._dynamo.utils import counters

    module, native, compiled, steps = _twins_after_a_build("lstm", batch_first=True)
    x = torch.randn(2, steps, 3, requires_grad=True)
    grad = torch.randn(2, steps, 5)
    (got,) = torch.autograd.grad(module(x)[0], x, grad)
    (expected,) = torch.autograd.grad(native(x)[0], x, grad)
    assert tolerance("float32", steps).excess(got, expected) <= 1
    assert counters["stats"]["unique_graphs"] == compiled > 0


def _agree(module, native, x, state, steps) -> bool:
    """Whether `module` and `native` agree on the output and the gradients of x, the initial
    state and every parameter, for one random output gradient."""
    grad = torch.randn(x.shape[:-1] + (native.hidden_size,))
    results = []
    for rnn in (module, native):
        output = rnn(x, state)[0]
        leaves = [x, *(state if isinstance(state, tuple) else (state,)), *rnn.parameters()]
        results.append([output.detach(), *torch.autograd.grad(output, leaves, grad)])
    return all(tolerance("float32", steps).excess(a, b) <= 1 for a, b in zip(*results))


@pytest.mark.parametrize("kind", ["rnn", "gru"])
def test_compile_shares_one_graph_with_biases_and_without_gradients_included(kind):
    from torch._dynamo.utils import counters

    module, native, compiled, steps = _twins_after_a_build(kind, bias=False)
    x, h0 = torch.randn(steps, 2, 3, requires_grad=True), torch.randn(1, 2, 5, requires_grad=True)
    assert _agree(module, native, x, h0, steps)
    assert counters["stats"]["unique_graphs"] == compiled > 0


def test_compile_runs_a_batch_of_one_and_unbatched_input_on_the_graph_of_larger_batches():
    from torch._dynamo.utils import counters

    module, native, compiled, steps = _twins_after_a_build("lstm")
    for batch in ((1,), ()):  # a batch of one, and unbatched input
        x = torch.randn(steps, *batch, 3, requires_grad=True)
        state = tuple(torch.randn(1, *batch, 5, requires_grad=True) for _ in range(2))
        output, (h_n, c_n) = module(x, state)
        assert output.shape == (steps, *batch, 5) and output.is_contiguous()
        assert h_n.shape == c_n.shape == (1, *batch, 5)
        assert _agree(module, native, x, state, steps)
    assert counters["stats"]["unique_graphs"] == compiled > 0
