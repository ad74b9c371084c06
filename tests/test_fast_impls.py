"""The torchscript, compile and fused implementations against torch.nn, and what is specific to
each: fused's C++ kernel paths and activations, compile's fixed-size chunks.

torch.compile is slow to compile, so the compile rows are few and tiny, and every configuration
is compiled once per session (its graphs are shared by all modules of the implementation).
"""
from __future__ import annotations

import contextlib
import functools
import importlib
import math
import warnings

import pytest
import torch

from rnnbench.benchmarks.timing import pinned_threads
from rnnbench.reference import Config, io_shapes, param_shapes, tolerance

NATIVE = {"rnn": torch.nn.RNN, "lstm": torch.nn.LSTM, "gru": torch.nn.GRU,
          "rnn_cell": torch.nn.RNNCell, "lstm_cell": torch.nn.LSTMCell, "gru_cell": torch.nn.GRUCell}

# (config, batch or None for unbatched, steps, h0 given). Sizes differ from each other so a
# transposed weight or a swapped axis cannot go unnoticed.
ROWS = [
    (Config("rnn", 3, 5), 4, 6, True),
    (Config("rnn", 3, 5, num_layers=2, bidirectional=True, nonlinearity="relu"), 2, 5, False),
    (Config("lstm", 4, 7, num_layers=2, bidirectional=True, proj_size=3, batch_first=True), 3, 5, True),
    (Config("lstm", 3, 5, bias=False), None, 6, False),
    (Config("gru", 3, 5, num_layers=2, batch_first=True), 4, 6, True),
    (Config("gru", 4, 6, bias=False, bidirectional=True), 1, 5, True),
    (Config("rnn_cell", 3, 5, nonlinearity="relu"), 4, 1, True),
    (Config("lstm_cell", 3, 5), None, 1, True),
    (Config("gru_cell", 3, 5, bias=False), 1, 1, False),
]
# compile compiles every configuration (a GRU's forward and backward take tens of seconds): a
# few rows cover its families, both directions and both chunk sizes the lengths here use.
COMPILE_ROWS = [
    (Config("rnn", 3, 5, bidirectional=True), 4, 5, True),  # a chunk of 4 and an eager step, both directions
    (Config("lstm", 4, 7, proj_size=3, batch_first=True), 3, 4, True),
    (Config("gru", 3, 5), 2, 4, True),
    ROWS[7],  # lstm_cell: eager
]
FUSED_ONLY_ROWS = [  # the kernel's BLAS path (batch > 2) in both directions, and batch 0
    (Config("gru", 3, 6, bidirectional=True), 5, 4, True),
    (Config("rnn", 3, 5, bidirectional=True), 3, 4, True),
    (Config("lstm", 3, 5, proj_size=2, bidirectional=True), 4, 3, True),
    (Config("lstm", 3, 5), 0, 3, False),
]


def implementation(name):
    impl = importlib.import_module(f"rnnbench.impls.{name}").IMPLEMENTATION
    reason = impl.unavailable_reason()
    if reason:
        pytest.skip(reason)
    return impl


def row_id(row):
    cfg, batch, steps, h0 = row
    return f"{cfg.describe()} batch={batch} steps={steps} h0={h0}".replace(" ", "-")


def flatten(structure):
    """Tensors of a (nested) tuple output, in order."""
    if isinstance(structure, torch.Tensor):
        return [structure]
    return [t for part in structure for t in flatten(part)]


def run(module, cfg, inputs):
    """Forward and the gradients of a fixed random projection of every output w.r.t. the input,
    the initial state and every parameter."""
    x, state = inputs
    x = x.clone().requires_grad_()
    state = [s.clone().requires_grad_() for s in state]
    hx = None if not state else tuple(state) if cfg.family == "lstm" else state[0]
    outputs = flatten(module(x, hx))
    weights = torch.Generator().manual_seed(1)
    # Drawn in float64 whatever the output's dtype, so that every dtype gets the same loss.
    loss = sum((out * torch.randn(out.shape, generator=weights, dtype=torch.float64)
                .to(out.dtype)).sum()
               for out in outputs)
    grads = torch.autograd.grad(loss, [x, *state, *module.parameters()])
    return outputs, grads


def make_inputs(cfg, batch, steps, h0, dtype=torch.float64):
    shapes = io_shapes(cfg, batch, steps)
    names = ("h0", "c0") if cfg.family == "lstm" else ("h0",)
    x = torch.randn(shapes["input"], dtype=dtype) + 0.5  # a nonzero mean, as the suite uses
    return x, [torch.randn(shapes[name], dtype=dtype) for name in names] if h0 else []


def assert_matches_native(impl, row, dtype="float64"):
    """`impl` in `dtype` against torch.nn in float64 on the same parameters and inputs, within
    the spec's tolerance for `dtype`."""
    cfg, batch, steps, h0 = row
    torch.manual_seed(0)
    native = NATIVE[cfg.kind](**cfg.constructor_kwargs(), dtype=torch.float64)
    module = impl.constructor(cfg.kind)(**cfg.constructor_kwargs(), dtype=getattr(torch, dtype))
    assert [name for name, _ in module.named_parameters()] == list(param_shapes(cfg))
    module.load_state_dict(native.state_dict())
    inputs = make_inputs(cfg, batch, steps, h0)
    expected_out, expected_grads = run(native, cfg, inputs)
    actual_out, actual_grads = run(module, cfg, [make_inputs_as(t, dtype) for t in inputs])
    layers = 1 if cfg.is_cell else cfg.num_layers
    for kind, actual, expected in (("output", actual_out, expected_out),
                                   ("gradient", actual_grads, expected_grads)):
        tol = tolerance(dtype, steps, layers, gradient=kind == "gradient")
        assert len(actual) == len(expected)
        for index, (a, e) in enumerate(zip(actual, expected)):
            assert a.shape == e.shape, f"{kind} {index}: shape {tuple(a.shape)}, not {tuple(e.shape)}"
            assert tol.excess(a.detach().double(), e.detach()) <= 1, \
                f"{kind} {index} differs beyond {tol}"


def make_inputs_as(inputs, dtype):
    """The input or the list of state tensors, in `dtype`."""
    if isinstance(inputs, torch.Tensor):
        return inputs.to(getattr(torch, dtype))
    return [t.to(getattr(torch, dtype)) for t in inputs]


@pytest.mark.parametrize("row", ROWS, ids=row_id)
@pytest.mark.parametrize("name", ["torchscript", "fused"])
def test_matches_torch_nn_in_float64(name, row):
    assert_matches_native(implementation(name), row)


@pytest.mark.parametrize("row", FUSED_ONLY_ROWS, ids=row_id)
def test_fused_kernel_paths_match_torch_nn(row):
    assert_matches_native(implementation("fused"), row)


@pytest.mark.parametrize("kind", ["rnn", "lstm", "gru"])
def test_fused_batch_split_between_threads_matches_torch_nn(kind):
    # A batch of 20 on two threads runs as two halves of the batch, each its own time loop.
    impl = implementation("fused")
    options = {"proj_size": 3} if kind == "lstm" else {}
    with pinned_threads(2):
        assert_matches_native(impl, (Config(kind, 3, 5, bidirectional=True, **options), 20, 4, True))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("h0", [True, False])
@pytest.mark.parametrize("kind, options", [("rnn", {}), ("rnn", {"nonlinearity": "relu"}),
                                           ("lstm", {}), ("lstm", {"proj_size": 7}),
                                           ("gru", {}), ("gru", {"bias": False})])
def test_fused_hidden_units_split_between_threads_matches_torch_nn(kind, options, h0, dtype):
    # 33 hidden units and a batch of 20 on two threads: the units are split (17 and 16), each
    # thread's step product has every row of the batch; with a projection the batch is split.
    impl = implementation("fused")
    row = (Config(kind, 6, 33, num_layers=2, bidirectional=True, **options), 20, 5, h0)
    with pinned_threads(2):
        assert_matches_native(impl, row, dtype=dtype)


@pytest.mark.parametrize("h0", [True, False])
@pytest.mark.parametrize("kind", ["rnn", "lstm", "gru"])
def test_fused_gate_gradients_streamed_to_memory_match_torch_nn(kind, h0):
    # A batch of 32 over 7 steps on two threads: the tiles of the transposed gate gradients
    # start on whole cache lines, which the backward writes with streamed stores (with a batch
    # of 20 they do not, and go through the caches). 33 units split 17 and 16: one thread's
    # last unit is a remainder past its whole tile.
    impl = implementation("fused")
    row = (Config(kind, 6, 33, bidirectional=True), 32, 7, h0)
    with pinned_threads(2):
        assert_matches_native(impl, row, dtype="float32")


# The ways fused's kernels may run their products besides oneDNN: BLAS, and kernels of their own
# for AVX2 and AVX-512 (a machine with AVX-512 builds both, and tests both).
KERNEL_WAYS = ["blas", "avx2", "avx512"]


def fused_kernel_ways() -> list[str]:
    """The ways fused's kernels can run their products on this machine: blas, then the kernels
    of their own built for this CPU's instruction sets (avx2, avx512), the widest last."""
    from rnnbench.impls.fused import kernels as fused_kernels

    try:
        return list(fused_kernels().kernel_ways())
    except RuntimeError:  # unavailable: the tests that use it skip on their own
        return ["blas"]


def skip_unless_built(way: str) -> None:
    """Skips the test where fused's kernels cannot run their products `way`'s way here."""
    if way not in fused_kernel_ways():
        pytest.skip(f"fused's kernels were built without {way} here (not on this CPU)")


@contextlib.contextmanager
def fused_policy(setting: str, policy: str):
    """Inside the block fused's kernels run `setting` ("products": the products over all time
    steps, "step_products": each step's product) `policy`'s way."""
    from rnnbench.impls.fused import kernels as fused_kernels

    kernels = fused_kernels()
    choose = getattr(kernels, f"set_{setting}")
    choose(policy)
    try:
        yield kernels
    finally:
        choose("auto")


@pytest.mark.parametrize("way", KERNEL_WAYS)
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("kind, options, hidden", [
    ("rnn", {}, 70), ("lstm", {}, 70), ("gru", {}, 70), ("lstm", {"proj_size": 5}, 9),
    ("gru", {"bias": False}, 9)])
def test_fused_float32_step_products_match_torch_nn_either_way(kind, options, hidden, threads,
                                                               way):
    # In float32 the product every step does reads a weight reordered once per call: packed for
    # MKL, or into panels of two vectors' columns (16 or 32) for a kernel of fused's own. A batch
    # of 20 is blocks of 8, 8 and 4 rows (AVX-512) or 6, 6, 6 and 2 (AVX2); 70 units give panels
    # with columns left over, and the backward's product
    # (inner dimension 4 x 70 = 280 for an LSTM) runs its inner dimension in two parts. On two
    # threads the units are split (35 each), or with 9 units the batch.
    impl = implementation("fused")
    skip_unless_built(way)
    row = (Config(kind, 6, hidden, num_layers=2, bidirectional=True, **options), 20, 7, True)
    with pinned_threads(threads), fused_policy("step_products", way):
        assert_matches_native(impl, row, dtype="float32")


def test_fused_float32_gradients_with_the_batch_rows_shared_out():
    # With a projection the threads share the batch rows: 40 rows give each thread 20, so each
    # transposes its gate gradients in whole 16 x 16 tiles from a first row past 0 (the second
    # thread's at row 20), and a remainder of 4.
    with pinned_threads(2):
        row = (Config("lstm", 6, 32, proj_size=5, bidirectional=True), 9, 40, True)
        assert_matches_native(implementation("fused"), row, dtype="float32")


def assert_products_at_every_remainder(kernels, product: str) -> None:
    """`product` ("step_products": a time step's, from 3 rows, 1 and 2 running a plain loop;
    "products": one over all time steps, row-major or transposed) of every remainder of rows
    and lanes that the kernels' blocks leave (8 rows by 32 columns on AVX-512, 6 by 16 on AVX2)
    and of inner dimensions run in one part of 256 or two, against float64."""
    generator = torch.Generator().manual_seed(0)
    for rows in range(1, 18):
        for cols in (1, 8, 9, 15, 16, 17, 24, 31, 32, 33, 47, 70):
            for inner in (1, 7, 256, 300):
                a, b, c = (torch.randn(shape, generator=generator) for shape in
                           ((rows, inner), (inner, cols), (rows, cols)))
                expected = a.double() @ b.double()
                if product == "step_products":
                    for accumulate in (False, True):
                        out = kernels.step_product(c, a, b, accumulate)
                        wanted = expected + c.double() if accumulate else expected
                        assert torch.allclose(out.double(), wanted, rtol=1e-5, atol=1e-4), \
                            f"{rows} x {inner} x {cols}, accumulate={accumulate}"
                    continue
                for transposed in (False, True):
                    out = kernels.product(a, b, transposed=transposed)
                    assert (out.t() if transposed else out).is_contiguous()
                    assert torch.allclose(out.double(), expected, rtol=1e-5, atol=1e-4), \
                        f"{rows} x {inner} x {cols}, transposed={transposed}"


@pytest.mark.parametrize("product", ["step_products", "products"])
@pytest.mark.parametrize("way", KERNEL_WAYS)
def test_fused_products_are_matrix_products_at_every_remainder(way, product):
    # Each run `way`'s way. The step product reads the weight reordered into panels with zeros
    # past the last column; the product over all steps reads it as it lies, its last columns
    # under a mask, and gives its result row-major or transposed (copied 16 x 16 at a time, the
    # last tiles short).
    implementation("fused")
    skip_unless_built(way)
    with fused_policy(product, way) as kernels:
        assert_products_at_every_remainder(kernels, product)


@pytest.mark.parametrize("way", KERNEL_WAYS)
def test_fused_products_over_all_steps_read_a_view_of_columns_and_share_rows_out(way):
    # The weight gradients multiply some columns of the transposed gate gradients: `a` is a
    # view whose rows lie further apart than its width. A large product (from 2^27 multiply-
    # adds) is shared out between the threads a block of 64 rows at a time, the last block short,
    # and so is its transposed copy, 16 rows at a time.
    implementation("fused")
    skip_unless_built(way)
    generator = torch.Generator().manual_seed(0)
    with pinned_threads(2), fused_policy("products", way) as kernels:
        for rows, inner, cols in ((65, 40, 33), (530, 520, 520)):
            wide = torch.randn(rows, inner + 9, generator=generator)
            a, b = wide[:, 5:5 + inner], torch.randn(inner, cols, generator=generator)
            expected = a.double() @ b.double()
            for transposed in (False, True):
                out = kernels.product(a, b, transposed=transposed)
                assert torch.allclose(out.double(), expected, rtol=1e-5, atol=1e-3), \
                    f"{rows} x {inner} x {cols}, transposed={transposed}"


@pytest.mark.parametrize("setting, what", [("step_products", "step product"),
                                           ("products", "product")])
def test_fused_names_the_ways_built_here_for_a_way_it_does_not_know(setting, what):
    implementation("fused")
    from rnnbench.impls.fused import kernels as fused_kernels

    choose = getattr(fused_kernels(), f"set_{setting}")
    message = rf"unknown {what} policy avx1024 \(here: auto, "
    with pytest.raises(RuntimeError, match=message) as error:
        choose("avx1024")
    listed = str(error.value).splitlines()[0].split("(here: auto, ")[1].removesuffix(")")
    onednn = ["onednn", "onednn_transposed"] if setting == "products" else []
    assert sorted(listed.split(", ")) == sorted([*fused_kernel_ways(), *onednn])


def test_fused_times_each_step_product_once_and_remembers_the_way_it_chose():
    impl = implementation("fused")
    row = (Config("gru", 5, 48), 24, 3, True)   # step products 24 x 48 x 144, back 24 x 144 x 48
    with pinned_threads(1), fused_policy("step_products", "auto") as kernels:
        before = set(kernels.step_choices())
        assert_matches_native(impl, row, dtype="float32")
        chosen = set(kernels.step_choices()) - before
        assert_matches_native(impl, row, dtype="float32")
        assert set(kernels.step_choices()) - before == chosen
    # Timed only where there is a choice: a kernel of fused's own beside BLAS.
    timed = {"24 x 48 x 144", "24 x 144 x 48"} if len(fused_kernel_ways()) > 1 else set()
    assert {line.split(",")[0] for line in chosen} == timed
    assert all(line.split(": ")[1] in fused_kernel_ways() for line in chosen)


def has_onednn() -> bool:
    try:
        torch.ops.mkldnn._linear_pointwise
    except (AttributeError, RuntimeError):
        return False
    return True


@pytest.mark.skipif(not has_onednn(), reason="this torch has no oneDNN (mkldnn) operators")
@pytest.mark.parametrize("policy", ["onednn", "onednn_transposed", *KERNEL_WAYS])
@pytest.mark.parametrize("kind, options", [("rnn", {}), ("lstm", {"proj_size": 5}),
                                           ("gru", {"bias": False})])
def test_fused_products_over_all_steps_match_torch_nn_with_either_library(kind, options, policy):
    # The input projection and the input and weight gradients run on BLAS, on oneDNN (a result
    # as it comes or transposed) or on a kernel of fused's own, whichever measured faster for
    # their shape.
    if not policy.startswith("onednn"):  # without oneDNN the marker above skips
        skip_unless_built(policy)
    row = (Config(kind, 6, 9, num_layers=2, bidirectional=True, **options), 20, 7, True)
    with fused_policy("products", policy):
        assert_matches_native(implementation("fused"), row, dtype="float32")


def test_fused_times_each_product_once_and_remembers_the_way_it_chose():
    # 32 steps of 32 rows into 4 x 256 gates from 256 inputs, on two threads: every product over
    # all steps is large enough to be timed against oneDNN but W_hh's gradient (31 steps), whose
    # gate gradients are some columns of a wider matrix: oneDNN runs those strides on its
    # reference code, thousands of times slower. It is timed where a kernel of fused's own is
    # built: the widest built.
    impl = implementation("fused")
    with pinned_threads(2), fused_policy("products", "auto") as kernels:
        before = set(kernels.product_choices())
        row = (Config("lstm", 256, 256), 32, 32, True)
        assert_matches_native(impl, row, dtype="float32")
        chosen = set(kernels.product_choices()) - before
        assert_matches_native(impl, row, dtype="float32")
        assert set(kernels.product_choices()) - before == chosen
        own = tuple(kernels.kernel_ways()[1:][-1:])
    # The input projection, the input gradient (as its transpose, W_ih^T @ dgates^T) and W_ih's
    # gradient; the gradients are wanted transposed, which oneDNN can also give directly.
    onednn = ("onednn",) if has_onednn() else ()
    transposed = ("onednn_transposed",) if has_onednn() else ()
    large_ways = {"1024 x 256 x 1024": ("blas", *onednn, *own),
                  "256 x 1024 x 1024": ("blas", *onednn, *transposed, *own),
                  "1024 x 1024 x 256": ("blas", *onednn, *transposed, *own)}
    expected = {shape: ways for shape, ways in large_ways.items() if len(ways) > 1}
    if own:
        expected["1024 x 992 x 256"] = ("blas", *own)
    made = dict(line.split(", 2 threads: ") for line in chosen)
    assert set(made) == set(expected)
    for shape, choice in made.items():  # "way (timed: way, way, ...)"
        way, timed = choice.removesuffix(")").split(" (timed: ")
        assert sorted(timed.split(", ")) == sorted(expected[shape]), shape
        assert way in expected[shape], shape


@pytest.mark.parametrize("row", COMPILE_ROWS, ids=row_id)
def test_compile_matches_torch_nn_in_float64(row):
    assert_matches_native(implementation("compile"), row)


@pytest.mark.parametrize("batch", [1, 5])  # the plain loop and the BLAS path
@pytest.mark.parametrize("gate", ["tanh", "sigmoid"])
def test_fused_float32_activations_are_accurate(gate, batch):
    # With W_hh = 0 and zero biases a GRU cell from h = 1 gives h' = z = sigmoid(x) when W_ih
    # feeds x to the z gate only; an RNN cell with W_ih = I gives tanh(x). Inputs sweep the
    # range where the approximations switch formulas and where they saturate.
    impl = implementation("fused")
    size = 64
    kind = "rnn_cell" if gate == "tanh" else "gru_cell"
    cell = impl.constructor(kind)(size, size)
    blocks = [torch.eye(size)] if gate == "tanh" else [torch.zeros(size, size), torch.eye(size),
                                                        torch.zeros(size, size)]
    with torch.no_grad():
        for name, parameter in cell.named_parameters():
            parameter.copy_(torch.cat(blocks) if name == "weight_ih" else torch.zeros_like(parameter))
    x = torch.linspace(-40, 40, batch * size).view(batch, size)
    x[0, :8] = torch.tensor([0.0, 1e-30, -1e-8, 0.3999, 0.4001, -0.4, 87.5, -100.0])
    h = cell(x, torch.ones(batch, size))
    expected = getattr(torch, gate)(x.double())
    ulps = ((h.double() - expected).abs() / torch.finfo(torch.float32).eps).max()
    assert ulps <= 8 * (1 + expected.abs().max()), f"{gate} off by {ulps:.1f} float32 ulps"


@pytest.mark.parametrize("name", ["torchscript", "fused"])
def test_weights_changed_through_data_are_used(name):
    # The kernels read weights in their own (transposed) layout; a change made any way, even
    # through .data (which leaves the version counter alone), must reach them.
    module = implementation(name).constructor("gru")(3, 5, dtype=torch.float64)
    native = torch.nn.GRU(3, 5, dtype=torch.float64)
    x = torch.randn(4, 2, 3, dtype=torch.float64)
    with torch.no_grad():
        module(x)
        for ours, theirs in zip(module.parameters(), native.parameters()):
            ours.data.copy_(theirs.data)
        assert torch.allclose(module(x)[0], native(x)[0], rtol=0, atol=1e-12)


def test_fused_backward_twice_with_retain_graph():
    # The saved gate activations must not be overwritten by the first backward.
    impl = implementation("fused")
    module = impl.constructor("lstm")(3, 5, num_layers=2, dtype=torch.float64)
    out, _ = module(torch.randn(4, 2, 3, dtype=torch.float64))
    first = torch.autograd.grad(out.sum(), list(module.parameters()), retain_graph=True)
    second = torch.autograd.grad(out.sum(), list(module.parameters()))
    for a, b in zip(first, second):
        assert torch.equal(a, b)


def test_fused_rejects_what_its_kernel_cannot_run():
    impl = implementation("fused")
    assert {"float16", "bfloat16", "cuda"} <= impl.unsupported
    module = impl.constructor("rnn")(3, 5, dtype=torch.bfloat16)
    with pytest.raises(RuntimeError, match="float32 and float64 only"):
        module(torch.randn(2, 1, 3, dtype=torch.bfloat16))


def test_fused_unavailable_without_compiler_says_why(monkeypatch):
    from rnnbench.impls import fused

    monkeypatch.setenv("CXX", "no-such-compiler-rnnbench")
    reason = fused._build()
    assert isinstance(reason, str) and "no-such-compiler-rnnbench" in reason
    assert "\n" not in reason


@pytest.mark.parametrize("name", ["torchscript", "compile", "fused"])
def test_wrong_inputs_raise_like_torch_nn(name):
    impl = implementation(name)
    rnn = impl.constructor("gru")(3, 5, num_layers=2)
    cell = impl.constructor("lstm_cell")(3, 5)
    x = torch.randn(4, 2, 3)
    for call, error in [
        (lambda: rnn(torch.randn(4, 2, 3, 1)), ValueError),        # rank
        (lambda: rnn(torch.randn(4, 2, 4)), RuntimeError),         # input size
        (lambda: rnn(x, torch.zeros(2, 1, 5)), RuntimeError),      # h0 batch: never broadcast
        (lambda: rnn(x, torch.zeros(2, 5)), RuntimeError),         # h0 rank
        (lambda: rnn(x.double()), ValueError),                     # dtype
        (lambda: rnn(torch.randn(0, 2, 3)), RuntimeError),         # no time steps
        (lambda: cell(torch.randn(2, 3), torch.zeros(2, 5)), TypeError),  # LSTM state not a pair
        (lambda: cell(torch.randn(2, 3), (torch.zeros(2, 5), torch.zeros(1, 5))), RuntimeError),
    ]:
        with pytest.raises(error):
            call()


@pytest.mark.parametrize("name", ["torchscript", "fused"])
def test_input_and_state_are_not_modified(name):
    module = implementation(name).constructor("lstm")(3, 5, bidirectional=True)
    x, h0, c0 = torch.randn(4, 2, 3), torch.randn(2, 2, 5), torch.randn(2, 2, 5)
    copies = [t.clone() for t in (x, h0, c0)]
    out, _ = module(x, (h0, c0))
    out.sum().backward()
    for original, copy in zip((x, h0, c0), copies):
        assert torch.equal(original, copy)


@pytest.mark.parametrize("name", ["torchscript", "compile", "fused"])
def test_dropout_only_between_layers_in_training(name):
    # All-ones weights, ReLU: a deterministic output in eval; training drops whole units of the
    # layer-0 output, so the two differ, while a one-layer module ignores dropout.
    impl = implementation(name)
    two = impl.constructor("rnn")(4, 4, num_layers=2, nonlinearity="relu", dropout=0.5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # torch.nn warns: dropout with one layer
        one = impl.constructor("rnn")(4, 4, nonlinearity="relu", dropout=0.5)
    for module in (two, one):
        for parameter in module.parameters():
            torch.nn.init.constant_(parameter, 0.1)
    x = torch.ones(3, 64, 4)
    with torch.no_grad():
        evaluated = two.eval()(x)[0]
        trained = two.train()(x)[0]
        assert torch.equal(evaluated, two.eval()(x)[0])
        assert not torch.equal(evaluated, trained)
        assert torch.equal(one.train()(x)[0], one.eval()(x)[0])


def test_torchscript_is_quiet():
    impl = implementation("torchscript")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        module = impl.constructor("gru")(3, 5)
        module(torch.randn(4, 2, 3))
    assert not [w for w in caught if issubclass(w.category, (DeprecationWarning, FutureWarning))]


@pytest.mark.parametrize("steps", [1, 4, 15, 16, 17, 100])
def test_compile_chunks_cover_the_sequence_with_fixed_sizes(steps):
    from rnnbench.impls import compile as compiled

    sizes = compiled.chunks(steps)
    assert sum(sizes) == steps
    assert sizes == sorted(sizes, reverse=True)
    assert set(sizes[:-1]) <= set(compiled.CHUNK_SIZES)
    # Only the last piece may be a leftover, and it is shorter than any compiled chunk.
    assert sizes[-1] in compiled.CHUNK_SIZES or sizes[-1] < min(compiled.CHUNK_SIZES)


def test_compile_does_not_recompile_for_new_sequence_lengths():
    from torch._dynamo.utils import counters

    from rnnbench.impls.compile import CHUNK_SIZES

    module = implementation("compile").constructor("rnn")(3, 5)
    native = torch.nn.RNN(3, 5)
    module.load_state_dict(native.state_dict())
    every_size = sum(CHUNK_SIZES)  # one chunk of each size: every graph this config needs
    with torch.no_grad():
        module(torch.randn(every_size, 2, 3))
        compiled = counters["stats"]["unique_graphs"]
        for steps in (1, 2 * every_size + 3, 5 * max(CHUNK_SIZES) + 1):
            x = torch.randn(steps, 2, 3)
            tol = tolerance("float32", steps)
            assert tol.excess(module(x)[0], native(x)[0]) <= 1
    assert counters["stats"]["unique_graphs"] == compiled
    assert compiled > 0  # the counter does count this implementation's graphs


def test_modules_pickle_and_copy():
    import copy
    import pickle

    for name in ("torchscript", "compile", "fused"):
        module = implementation(name).constructor("lstm")(3, 5)
        for clone in (pickle.loads(pickle.dumps(module)), copy.deepcopy(module)):
            assert type(clone) is type(module)
            assert all(torch.equal(a, b) for a, b in zip(clone.parameters(), module.parameters()))


def test_init_bound_is_one_over_sqrt_hidden():
    # The spec's distribution, not the implementation's: each parameter spans most of
    # [-1/sqrt(H), 1/sqrt(H)] and never leaves it.
    for name in ("torchscript", "compile", "fused"):
        module = implementation(name).constructor("gru")(8, 16)
        bound = 1 / math.sqrt(16)
        values = torch.cat([p.detach().flatten() for p in module.parameters()])
        assert values.abs().max() <= bound
        assert values.min() < -0.9 * bound and values.max() > 0.9 * bound


def test_fused_build_removes_the_lock_a_killed_build_left(tmp_path):
    # torch waits forever for its lock file; one left by a killed build must not hang the next
    from rnnbench.impls import fused

    (tmp_path / "lock").write_text("")
    with fused._build_lock(tmp_path) as directory:
        assert directory == tmp_path
        assert not (tmp_path / "lock").exists()


def test_fused_builds_of_different_sources_use_different_folders(monkeypatch, tmp_path):
    from torch.utils import cpp_extension

    from rnnbench.impls import fused

    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path))
    first = fused._build_directory(cpp_extension)
    other = tmp_path / "other.cpp"
    other.write_text(fused.SOURCE.read_text() + "\n// changed\n")
    monkeypatch.setattr(fused, "SOURCE", other)
    assert first.parent == tmp_path and fused._build_directory(cpp_extension) != first


def test_fused_builds_for_different_cpus_use_different_folders(monkeypatch, tmp_path):
    # A -march=native build loaded on a CPU without its vector extensions dies of SIGILL: two
    # machines sharing one extension cache must not share a build.
    from torch.utils import cpp_extension

    from rnnbench.impls import fused

    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path))
    monkeypatch.setattr(fused, "cpu_flags", lambda: "avx avx2 fma avx512f")
    avx512 = fused._build_directory(cpp_extension)
    monkeypatch.setattr(fused, "cpu_flags", lambda: "avx avx2 fma")
    assert fused._build_directory(cpp_extension) != avx512


def test_fused_builds_for_another_cpu_in_a_folder_of_its_own(monkeypatch, tmp_path):
    from torch.utils import cpp_extension

    from rnnbench.impls import fused

    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path))
    assert fused._build_directory(cpp_extension, "x86-64-v3") != fused._build_directory(
        cpp_extension)
    assert "-march=x86-64-v3" in fused.compile_flags("x86-64-v3")


@pytest.mark.parametrize("march", ["x86 64", "-O0"])
def test_fused_says_in_a_line_which_cpu_names_it_cannot_build_for(monkeypatch, march):
    from rnnbench.impls import fused

    monkeypatch.setenv(fused.MARCH_VARIABLE, march)
    assert fused._build() == ("RNNBENCH_FUSED_MARCH names a CPU for gcc's -march "
                              f"(e.g. x86-64-v3), not {march!r}")


@functools.cache
def fused_avx2_build():
    """fused's kernels as a machine with AVX2 and FMA but no AVX-512 builds them
    (-march=x86-64-v3), or the one-line reason they cannot be built."""
    from rnnbench.impls import fused

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(fused.MARCH_VARIABLE, "x86-64-v3")
        return fused._build()


@pytest.fixture
def fused_built_for_avx2(monkeypatch):
    """Inside the test fused runs the kernels an AVX2 machine builds, whatever this CPU adds."""
    from rnnbench.environment import cpu_flags
    from rnnbench.impls import fused

    implementation("fused")  # skips where fused cannot build at all
    if not {"avx2", "fma"} <= set(cpu_flags().split()):
        pytest.skip("this CPU has no AVX2 and FMA to run an AVX2 build on")
    kernels = fused_avx2_build()
    assert not isinstance(kernels, str), kernels
    monkeypatch.setattr(fused, "_kernels", kernels)
    return kernels


@pytest.mark.parametrize("product", ["step_products", "products"])
def test_fused_built_for_avx2_multiplies_at_every_remainder(fused_built_for_avx2, product):
    # The AVX2 kernel as such a machine builds it; a transposed result is copied in 8 x 8
    # register tiles there.
    with fused_policy(product, "avx2") as kernels:
        assert_products_at_every_remainder(kernels, product)


@pytest.mark.parametrize("kind, options, hidden, batch", [
    ("rnn", {}, 70, 20), ("lstm", {}, 70, 20), ("gru", {}, 70, 20), ("gru", {}, 70, 32),
    ("lstm", {"proj_size": 5}, 32, 40)])
def test_fused_built_for_avx2_matches_torch_nn(fused_built_for_avx2, kind, options, hidden,
                                               batch):
    # Built without AVX-512, the kernels run their products on BLAS, oneDNN or a kernel of
    # their own for AVX2 (blocks of 6 rows by 16 columns), and transpose the gate gradients in
    # 8 x 8 register tiles. On two threads 70 units are split (35 each) and the batch of 20 is
    # transposed in whole tiles and a remainder (a batch of 32, in tiles written with streamed
    # stores); with a projection each thread has 20 of the 40 rows, its tiles from row 20.
    assert fused_built_for_avx2.kernel_ways() == ["blas", "avx2"]
    impl = implementation("fused")
    row = (Config(kind, 6, hidden, num_layers=2, bidirectional=True, **options), batch, 7, True)
    with pinned_threads(2):
        assert_matches_native(impl, row, dtype="float32")
        assert_matches_native(impl, row, dtype="float64")
        with fused_policy("step_products", "avx2"), fused_policy("products", "avx2"):
            assert_matches_native(impl, row, dtype="float32")
