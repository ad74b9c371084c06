"""compile: the time steps of _loop.py compiled with torch.compile (Inductor, C++ on CPU) in
fixed-size chunks.

Compiling the whole unrolled loop makes compile time grow with the sequence length and
recompiles for every new length; compiling one step costs more per call than it saves (both
measured on CPU: whole-loop compile time grows from ~4 s at T=100 to minutes with backward, and
a compiled step costs 35-65 us a call). So a sequence runs as compiled chunks of CHUNK_SIZES
steps, largest first, and the few steps left over (fewer than the smallest chunk) run the same
loop eagerly: 100 steps = 6 x 16 + 1 x 4, 50 steps = 3 x 16 + 2 eager steps. That is at most
len(CHUNK_SIZES) graphs per configuration, whatever the length or the sizes (see `_compiled`),
each unrolling a fixed number of steps. A cell is one step, so cells run eagerly: there is no
compiled code worth its call cost.
The input projection of all steps is one eager GEMM before the loop.

A chunk takes its steps' inputs as a list of tensors and returns its outputs as a list, not as
one (steps, batch, gates) tensor in and one stacked tensor out. In a single tensor each step's
slice sits at its own constant offset, which Inductor writes into that step's C++ kernel, so
every step got a kernel of its own source, each built by gcc: a GRU over 20 steps (chunks of 16
and 4) with its backward made 38 kernels. With a tensor per step the steps' kernels are the same
source and Inductor builds each once: 7 kernels, and cold first calls (`rnnbench coldstart`) of
23 s instead of 42 s forward, 37 s instead of 67 s forward+backward. Inputs that are views at
different offsets of one tensor do not recompile: torch.compile does not guard on storage
offsets here (tests/test_fast_impls.py checks it).
See INDUCTOR_OPTIONS for what makes the compiled steps as fast as eager ones.

Compiled graphs are torch.compile's, cached per process and shared by every module of this
implementation: the first call of a configuration (family, options, dtype, grad mode) pays the
compile, later modules with the same configuration reuse it. To measure a cold first call again
in the same process, call `reset()`; Inductor's on-disk cache still shortens the recompile unless
TORCHINDUCTOR_FORCE_DISABLE_CACHES=1 is set (`rnnbench coldstart` runs each first call in a
fresh process with an empty cache).
"""
from __future__ import annotations

import contextlib
import functools
from typing import Optional

import torch

from rnnbench.impls import _loop
from rnnbench.impls._common import (Backend, State, Weights, module_classes, transposed_storage,
                                    zero_state)
from rnnbench.impls.base import Implementation

CHUNK_SIZES = (16, 4)
# Graphs one compiled function may hold; torch's default (8) is below the number of
# configurations (family, nonlinearity, bias, projection, direction, chunk size, dtype, grad mode)
# one process can meet, and past it torch falls back to eager. Raised only around our own calls.
RECOMPILE_LIMIT = 256


@contextlib.contextmanager
def _dynamo_settings():
    """The recompile budget raised, and parameters' sizes as dynamic as other tensors' (torch
    keeps a parameter's sizes static by default: GRU's b_hh, passed as it is, would make every
    hidden size a graph of its own; see `_compiled`)."""
    # Set and restored by hand: torch._dynamo.config.patch costs 4x as much (~50 us).
    config = torch._dynamo.config
    saved = config.recompile_limit, config.force_parameter_static_shapes
    config.recompile_limit = max(saved[0], RECOMPILE_LIMIT)
    config.force_parameter_static_shapes = False
    try:
        yield
    finally:
        config.recompile_limit, config.force_parameter_static_shapes = saved


# Inductor options, for these graphs only:
# - no cpp_wrapper: a C++ wrapper per graph was 7% faster per chunk in isolation, but made no
#   difference over whole sequences at workloads (a) and (b) (0.97x vs 0.99x and 0.97x vs 0.97x of
#   native, side by side) while doubling cold compile time (165 rnn conformance checks from an
#   empty cache: 270 s with it, 122 s without), since each graph becomes a 5-second gcc build;
# - cpp.use_decompose_tanh: tanh(x) = 2 / (1 + exp(-2x)) - 1, the form Inductor used before it
#   switched to Sleef's tanh, which runs at a third of the speed here (measured); the
#   decomposition's error (absolute, ~1e-7 in float32) is far inside the tolerance policy;
# - cpp.min_chunk_size: ATen's grain size, so a time step's pointwise kernel (batch x hidden
#   elements) runs on one thread as in eager mode, instead of one OpenMP fork/join per step
#   (512 by default).
INDUCTOR_OPTIONS = {"cpp.use_decompose_tanh": True, "cpp.min_chunk_size": 32768}


@functools.cache
def _compiled():
    """_loop.run_list compiled, created on first use: importing torch._dynamo is slow.

    Sizes are symbolic from the first compile (`dynamic=True`): batch, hidden and projection
    sizes are variables of the kernels, not constants in their source, so a configuration's
    graph and its C++ kernels are built once for every size instead of once for the first size
    met and again for the rest (torch's default). A workload checked at a small batch and then
    timed at its own, or a conformance suite that varies the sizes, compiles each configuration
    once. Side by side with static shapes at the goals workloads the steady state did not
    differ. torch still specialises sizes 0 and 1, so `CompiledBackend` runs a batch of one
    as a batch of two (see `_padded`).
    """
    return torch.compile(_loop.run_list, fullgraph=True, dynamic=True, options=INDUCTOR_OPTIONS)


def reset() -> None:
    """Forget every graph compiled in this process (torch._dynamo.reset), so the next call of
    each configuration compiles again."""
    torch._dynamo.reset()


def chunks(steps: int) -> list[int]:
    """The pieces a sequence of `steps` runs as, in order: compiled chunks of CHUNK_SIZES, largest
    first, then the remainder (fewer steps than the smallest chunk, run eagerly) if any."""
    sizes = []
    for size in CHUNK_SIZES:
        count, steps = divmod(steps, size)
        sizes += [size] * count
    return sizes + [steps] if steps else sizes


def availability() -> str | None:
    try:
        import torch._dynamo  # noqa: F401  (torch.compile needs it)
        import torch._inductor  # noqa: F401
    except ImportError as error:
        return f"torch.compile is not usable here: {error}"
    return None


class CompiledBackend(Backend):
    """Eager premul, then the compiled chunks."""

    new_parameter = staticmethod(transposed_storage)  # _loop reads W^T

    def layer(self, family: str, x, state: Optional[State], weights: Weights, relu: bool,
              reverse: bool):
        w_ih, w_hh, b_ih, b_hh, w_hr = weights
        compiled = _compiled()
        w_hh_t = w_hh.t().contiguous()
        w_hr_t = None if w_hr is None else w_hr.t().contiguous()
        b_hh_step = _gru_hidden_bias(w_hh, b_hh) if family == "gru" else None
        one = x.shape[1] == 1 and x.shape[0] >= min(CHUNK_SIZES)  # only compiled steps pad
        if one:
            x, state = _padded(x, state)
        state = list(zero_state(family, x, weights) if state is None else state)
        if torch.is_grad_enabled() and any(w is not None and w.requires_grad for w in weights):
            # The graph guards on whether each input needs a gradient, and every chunk after
            # the first gets a state that does: a first state that does not (an h0 given
            # without one, the zero state) would compile each configuration twice. It enters
            # as a leaf that asks for one, so grad mode has one graph per configuration.
            state = [s if s.requires_grad else s.detach().requires_grad_() for s in state]
        # In processing order: the reverse direction starts at the last step.
        # The steps' inputs are views of one (steps * batch, gates) product whatever the input
        # (batch-first or not, biases or none): torch.compile guards on how a view lies in its
        # base, and each layout was a graph of its own.
        steps, batch = x.shape[:2]
        gx = _loop.project_input(family, x.reshape(steps * batch, -1), w_ih, b_ih, b_hh)
        inputs = gx.view(steps, batch, -1).unbind(0)[::-1 if reverse else 1]
        outputs, position = [], 0
        with _dynamo_settings():
            for size in chunks(len(inputs)):
                # The leftover steps (fewer than a chunk) run eagerly.
                run = compiled if size in CHUNK_SIZES else _loop.run_list
                chunk_outputs, state = run(family, list(inputs[position:position + size]), state,
                                           w_hh_t, b_hh_step, w_hr_t, relu)
                outputs += chunk_outputs
                position += size
        output = torch.stack(outputs[::-1] if reverse else outputs)
        if one:  # the padding row dropped
            return output[:, :1].contiguous(), tuple(s[:1] for s in state)
        return output, tuple(state)


def _padded(x, state: Optional[State]):
    """x (steps, 1, input) and its state with a row of zeros appended: torch.compile specialises
    a size of 1, so a batch of one would compile every configuration a second time (a graph and
    its C++ build: about 18 CPU-seconds cold for a GRU chunk with its backward), while as a batch
    of two it runs the graph every other batch size runs. The zero row stays finite and reaches
    nothing kept, so its gradients are exact zeros and add nothing. Its price, measured at
    T=25, B=1, I=H=128 on one thread: calls 12-27% slower (one row's matrix-vector products
    become two rows' products). Marking the batch size unbacked instead (no specialisation,
    one graph) cost about 10% at every batch size."""
    x = torch.cat([x, torch.zeros_like(x)], 1)
    if state is not None:
        state = tuple(torch.cat([s, torch.zeros_like(s)]) for s in state)
    return x, state


def _gru_hidden_bias(w_hh, b_hh):
    """GRU's b_hh for the steps; zeros in its place when the layer has none, so that a GRU
    without biases runs the same graph as one with them (it would be a graph of its own, built
    again, for one addition of zeros per step). The zeros are a Parameter that asks for a
    gradient when the weights do, as a bias is: the graph guards on each input's type and on
    whether it needs a gradient."""
    if b_hh is not None:
        return b_hh
    zeros = torch.zeros(w_hh.shape[0], dtype=w_hh.dtype, device=w_hh.device)
    return torch.nn.Parameter(zeros, requires_grad=w_hh.requires_grad and torch.is_grad_enabled())


KINDS = module_classes(CompiledBackend(), __name__)
# Bound under the names torch.nn gives them, so instances pickle (and a search finds them).
RNNCell, LSTMCell, GRUCell, RNN, LSTM, GRU = KINDS.values()

IMPLEMENTATION = Implementation(
    name="compile",
    kinds=KINDS,
    description=f"torch.compile (Inductor) of chunks of {'/'.join(map(str, CHUNK_SIZES))} steps, "
                "after one eager input GEMM, leftover steps and cells eager; compile time "
                "independent of sequence length",
    unsupported=frozenset({"packed"}),  # the compiled chunks take padded tensors only
    availability=availability,
)
