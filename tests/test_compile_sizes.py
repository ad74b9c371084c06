"""compile builds a configuration's graphs once for every batch and hidden size: a workload
pre-checked at a small batch and timed at its own, or conformance cases of many sizes, do not
compile again."""
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
