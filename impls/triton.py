"""triton: an Elman RNN whose recurrence is one persistent Triton kernel per layer and direction.

Design, for one layer in one direction (h_t = act(x_t W_ih^T + b_ih + b_hh + h_prev W_hh^T)):

1. The input projection does not depend on the recurrence, so it is hoisted out of it: one torch
   GEMM over all time steps, xw = x W_ih^T + (b_ih + b_hh), shape (T, N, H).
2. The recurrence is one kernel launch. Each program owns BLOCK_B batch rows and loops over all
   T steps itself (persistent over time); batch rows are independent, so programs never wait for
   each other. A step computes xw_t + h_prev W_hh^T for its rows tile by tile (BLOCK_N output
   columns, BLOCK_K reduction), applies act, and writes h_t into the output (T, N, H), in time
   order. The output is also the state buffer: the next step reads h_t back in K tiles after a
   barrier, so every thread of the program sees the whole state. The reverse direction walks t
   from T-1 down; h0 enters through its own pointer in the first step.
   When W_hh fits on chip (padded H^2 * itemsize <= RESIDENT_BYTES: H <= 128 in 32- and 16-bit
   floats, H <= 64 in float64) the kernel loads W_hh^T once, before the loop, and keeps it
   (RESIDENT, a compile-time switch of the same kernel); otherwise it reloads its tiles each step.
3. The backward's recurrence is persistent too, the same structure in reverse processing order:
   dh_t = g_t (+ the gradient of h_n at the last step) + da_later W_hh and da_t = dh_t * act'(h_t),
   act' taken from the output (1 - h^2 for tanh, h > 0 for relu), with da exchanged through a
   (T, N, H) buffer and a barrier per step. What does not recur is torch GEMMs over all steps:
   dW_hh = sum_t da_t^T h_prev(t), dh0 = da_first W_hh; the input projection's gradients (input,
   W_ih, both biases) come from autograd, since the gradient of xw is da itself.
4. The module is `_common`'s RNN (parameters, init, torch.nn's input checks and exceptions,
   layers, directions, dropout between layers in training, batch_first, unbatched input,
   torch.nn's return structure) on `TritonBackend`, whose `layer` computes a layer as above;
   `ElmanRecurrence` is the autograd.Function that wraps both kernels. Parameters are stored
   contiguous, the layout the kernels read W_hh in. A backend carries the launch plan: a module
   given `TritonBackend(plan)` as its `backend` launches every layer with that plan.

Precision: float32 matmuls in the kernels are IEEE fp32, unless torch allows TF32 matmuls
(`torch.backends.cuda.matmul.allow_tf32`, i.e. `torch.set_float32_matmul_precision("high")`);
then they use TF32, like torch's own GEMMs of this implementation, and the spec's "tf32" tolerance
applies. float16/bfloat16 multiply in their dtype and accumulate and activate in fp32; float64 is
fp64 throughout.

What runs where: without TRITON_INTERPRET the kernels are compiled for a CUDA GPU and take CUDA
tensors. With TRITON_INTERPRET=1 in the environment *before this module is first imported*
(triton.jit reads it when it decorates) the same kernels run on CPU tensors in triton's NumPy
interpreter: slow, for checking correctness at small sizes where there is no GPU:

    TRITON_INTERPRET=1 pytest tests/test_triton.py
    TRITON_INTERPRET=1 rnnbench conform triton --device cpu

Not supported, and why:
- kinds other than "rnn": no LSTM, GRU or cell kernels are written (yet);
- the device the kernels are not built for: CPU when compiled, CUDA when interpreted;
- double backward: the backward kernel is not itself differentiable (once_differentiable);
- index arithmetic is 32-bit, so T * N * H must stay below 2**31;
- sizes where W_hh does not fit on chip run correctly but reload W_hh tiles every step. Splitting
  the columns of a step across programs (a grid-wide barrier per step) would keep W_hh on chip
  there, but the interpreter runs programs one after another, so it could not check that.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch
import torch.nn.functional as F
from torch.autograd.function import once_differentiable

from rnnbench.impls._common import Backend, State, Weights, module_classes, zero_state
from rnnbench.impls.base import Implementation

try:
    import triton
    import triton.language as tl
except ImportError:  # the module stays importable; availability() says why it cannot run
    triton = None

# W_hh stays on chip across steps when its padded (H, H) tile takes at most this many bytes.
RESIDENT_BYTES = 64 * 1024
TILE = 64  # (BLOCK_K, BLOCK_N) tile edge when W_hh is reloaded every step
# Batch rows per program. A program's chain of steps sets the kernel's time, whatever the number
# of programs: on an H200, 8 rows took 0.56-0.76x the time of 16 (IEEE and TF32), 4 rows
# 0.91-0.93x the time of 8 with IEEE but 1.06-1.14x with TF32 (docs/gpu.md).
MAX_BLOCK_B = 8


if triton is not None:

    @triton.jit
    def _time(i, T, REVERSE: tl.constexpr):
        """The time step that processing step i of a direction handles."""
        if REVERSE:
            t = T - 1 - i
        else:
            t = i
        return t

    @triton.jit
    def _load_rows(ptr, t, rows, cols, B, H, enabled):
        """Block (rows, cols) of slice t of a contiguous (T, B, H) tensor; 0 outside it or where
        not `enabled` (a scalar condition)."""
        mask = (rows < B)[:, None] & (cols < H)[None, :] & enabled
        return tl.load(ptr + (t * B + rows[:, None]) * H + cols[None, :], mask=mask, other=0.0)

    @triton.jit
    def _store_rows(ptr, t, rows, cols, B, H, value):
        mask = (rows < B)[:, None] & (cols < H)[None, :]
        tl.store(ptr + (t * B + rows[:, None]) * H + cols[None, :],
                 value.to(ptr.dtype.element_ty), mask=mask)

    @triton.jit
    def _weight_tile(w_ptr, k0, n0, H, TRANSPOSED: tl.constexpr,
                     BLOCK_K: tl.constexpr, BLOCK_N: tl.constexpr):
        """Tile [k0:k0+BLOCK_K, n0:n0+BLOCK_N] of W^T (TRANSPOSED) or of W, where W is a
        row-major (H, H) matrix; 0 outside it."""
        ks = k0 + tl.arange(0, BLOCK_K)
        ns = n0 + tl.arange(0, BLOCK_N)
        mask = (ks < H)[:, None] & (ns < H)[None, :]
        if TRANSPOSED:
            offsets = ns[None, :] * H + ks[:, None]
        else:
            offsets = ks[:, None] * H + ns[None, :]
        return tl.load(w_ptr + offsets, mask=mask, other=0.0)

    @triton.jit
    def _accumulate(acc, a, b, PRECISION: tl.constexpr, UPCAST: tl.constexpr):
        """acc + a @ b in acc's dtype."""
        if UPCAST:  # triton's interpreter multiplies bfloat16 bit patterns as integers
            a = a.to(acc.dtype)
            b = b.to(acc.dtype)
        # out_dtype defaults to float32 in some triton releases (3.6), which then reject a float64
        # accumulator; named, it is right in all of them.
        return tl.dot(a, b, acc, input_precision=PRECISION, out_dtype=acc.dtype)

    @triton.jit
    def _activate(a, RELU: tl.constexpr):
        if RELU:
            h = tl.maximum(a, 0.0)
        else:
            e = tl.exp(-2.0 * tl.abs(a))  # exp of a non-positive number never overflows
            t = (1.0 - e) / (1.0 + e)
            h = tl.where(a < 0, -t, t)
        return h

    @triton.jit
    def _activation_slope(h, RELU: tl.constexpr):
        """act'(a) from h = act(a)."""
        if RELU:
            slope = (h > 0).to(h.dtype)
        else:
            slope = 1.0 - h * h
        return slope

    @triton.jit
    def forward_kernel(xw_ptr, h0_ptr, w_ptr, out_ptr, T, B, H,
                        REVERSE: tl.constexpr, RELU: tl.constexpr, RESIDENT: tl.constexpr,
                        ACC: tl.constexpr, PRECISION: tl.constexpr, UPCAST: tl.constexpr,
                        BLOCK_B: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
        """out[t] = act(xw[t] + h_prev W^T) for this program's rows, step after step."""
        rows = tl.program_id(0) * BLOCK_B + tl.arange(0, BLOCK_B)
        if RESIDENT:  # all of W^T is one tile, loaded once for every step
            w_all = _weight_tile(w_ptr, 0, 0, H, True, BLOCK_K, BLOCK_N)
        for i in range(T):
            t = _time(i, T, REVERSE)
            prev = _time(i - 1, T, REVERSE)
            for n0 in range(0, H, BLOCK_N):
                cols = n0 + tl.arange(0, BLOCK_N)
                acc = _load_rows(xw_ptr, t, rows, cols, B, H, True).to(ACC)
                for k0 in range(0, H, BLOCK_K):
                    ks = k0 + tl.arange(0, BLOCK_K)
                    # h_prev is h0 in the first step and the previous step's output after it.
                    h = (_load_rows(h0_ptr, 0, rows, ks, B, H, i == 0)
                         + _load_rows(out_ptr, prev, rows, ks, B, H, i > 0))
                    if RESIDENT:
                        w = w_all
                    else:
                        w = _weight_tile(w_ptr, k0, n0, H, True, BLOCK_K, BLOCK_N)
                    acc = _accumulate(acc, h, w, PRECISION, UPCAST)
                _store_rows(out_ptr, t, rows, cols, B, H, _activate(acc, RELU))
            tl.debug_barrier()  # the next step reads all of h_t, written by other threads

    @triton.jit
    def backward_kernel(g_ptr, g_last_ptr, w_ptr, out_ptr, da_ptr, T, B, H,
                         REVERSE: tl.constexpr, RELU: tl.constexpr, RESIDENT: tl.constexpr,
                         ACC: tl.constexpr, PRECISION: tl.constexpr, UPCAST: tl.constexpr,
                         BLOCK_B: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
        """da[t] = (g[t] + da_later W) * act'(out[t]) for this program's rows, from the last
        processed step back to the first; the last processed step also gets g_last (h_n's
        gradient), and it has no later step."""
        rows = tl.program_id(0) * BLOCK_B + tl.arange(0, BLOCK_B)
        if RESIDENT:
            w_all = _weight_tile(w_ptr, 0, 0, H, False, BLOCK_K, BLOCK_N)
        for j in range(T):
            i = T - 1 - j  # the processing step, last first
            t = _time(i, T, REVERSE)
            later = _time(i + 1, T, REVERSE)
            for n0 in range(0, H, BLOCK_N):
                cols = n0 + tl.arange(0, BLOCK_N)
                acc = (_load_rows(g_ptr, t, rows, cols, B, H, True).to(ACC)
                       + _load_rows(g_last_ptr, 0, rows, cols, B, H, j == 0).to(ACC))
                for k0 in range(0, H, BLOCK_K):
                    ks = k0 + tl.arange(0, BLOCK_K)
                    da_later = _load_rows(da_ptr, later, rows, ks, B, H, j > 0)
                    if RESIDENT:
                        w = w_all
                    else:
                        w = _weight_tile(w_ptr, k0, n0, H, False, BLOCK_K, BLOCK_N)
                    acc = _accumulate(acc, da_later, w, PRECISION, UPCAST)
                h = _load_rows(out_ptr, t, rows, cols, B, H, True).to(ACC)
                _store_rows(da_ptr, t, rows, cols, B, H, acc * _activation_slope(h, RELU))
            tl.debug_barrier()  # the next step reads all of da_t, written by other threads

    # triton.jit returns a compiled JITFunction, or an interpreted function when TRITON_INTERPRET
    # was set at decoration.
    INTERPRETED = not isinstance(forward_kernel, triton.runtime.JITFunction)
else:
    INTERPRETED = False

# Where the kernels run: on CPU tensors when interpreted, on CUDA tensors when compiled.
KERNEL_DEVICE = "cpu" if INTERPRETED else "cuda"


@dataclass(frozen=True)
class Plan:
    """The compile-time shape of one launch: batch rows per program, (BLOCK_K, BLOCK_N) tiles,
    whether W_hh stays resident, and the warps per program (ignored by the interpreter)."""

    block_b: int
    block_n: int
    block_k: int
    resident: bool
    num_warps: int


def choose_plan(batch: int, hidden: int, dtype: torch.dtype) -> Plan:
    """A small heuristic, of which only the rows per program were timed on a GPU: W_hh resident
    when it fits, tiles of TILE otherwise, up to MAX_BLOCK_B rows per program (more programs
    for larger batches)."""
    padded = max(16, triton.next_power_of_2(hidden))  # tl.dot needs edges of at least 16
    resident = padded * padded * dtype.itemsize <= RESIDENT_BYTES
    tile = padded if resident else TILE
    block_b = min(MAX_BLOCK_B, triton.next_power_of_2(batch))
    # 8 warps keep 64-wide fp32 tiles free of register spills (checked by compiling for sm_90).
    return Plan(block_b, tile, tile, resident, num_warps=8 if tile >= 64 else 4)


def constants(how: Plan, reverse: bool, relu: bool, dtype: torch.dtype) -> dict:
    """The kernels' compile-time arguments for one launch."""
    tf32 = dtype == torch.float32 and torch.backends.cuda.matmul.allow_tf32
    return dict(REVERSE=reverse, RELU=relu, RESIDENT=how.resident,
                ACC=tl.float64 if dtype == torch.float64 else tl.float32,
                PRECISION="tf32" if tf32 else "ieee",
                UPCAST=INTERPRETED and dtype == torch.bfloat16,
                BLOCK_B=how.block_b, BLOCK_N=how.block_n, BLOCK_K=how.block_k)


def _launch(kernel, tensors, steps: int, batch: int, hidden: int, reverse: bool, relu: bool,
            dtype: torch.dtype, how: Plan | None = None) -> None:
    how = how or choose_plan(batch, hidden, dtype)
    if how.resident and min(how.block_n, how.block_k) < hidden:
        raise ValueError(f"triton: a resident plan needs tiles of at least hidden_size ({hidden}), "
                         f"got {how}")
    kernel[(triton.cdiv(batch, how.block_b),)](*tensors, steps, batch, hidden,
                                               **constants(how, reverse, relu, dtype),
                                               num_warps=how.num_warps)


def _check_operands(**tensors: torch.Tensor) -> None:
    """RuntimeError, as torch.nn raises, unless all tensors share one dtype and the kernels'
    device."""
    dtypes = {name: t.dtype for name, t in tensors.items()}
    if len(set(dtypes.values())) > 1:
        raise RuntimeError(f"triton: mixed dtypes {dtypes}; expected one dtype")
    for name, tensor in tensors.items():
        if tensor.device.type != KERNEL_DEVICE:
            hint = ("set TRITON_INTERPRET=1 before importing it to run on CPU"
                    if KERNEL_DEVICE == "cuda" else "under TRITON_INTERPRET=1 it runs on CPU tensors")
            raise RuntimeError(f"triton: {name} is on {tensor.device}, but the kernels take "
                               f"{KERNEL_DEVICE} tensors ({hint})")


class ElmanRecurrence(torch.autograd.Function):
    """The recurrence of one layer-direction: (xw (T, N, H), h0 (N, H), W_hh (H, H)) ->
    (outputs (T, N, H) in time order, h_n (N, H)), forward and backward by the kernels above."""

    @staticmethod
    def forward(ctx, xw, h0, weight_hh, reverse: bool, relu: bool, how: Plan | None = None):
        _check_operands(input=xw, hx=h0, weight_hh=weight_hh)
        steps, batch, hidden = xw.shape
        if steps == 0:
            raise RuntimeError("triton: the input has no time steps")
        xw, h0, weight_hh = xw.contiguous(), h0.contiguous(), weight_hh.contiguous()
        out = torch.empty_like(xw)
        if batch:
            _launch(forward_kernel, (xw, h0, weight_hh, out), steps, batch, hidden, reverse,
                    relu, xw.dtype, how)
        ctx.save_for_backward(h0, weight_hh, out)
        ctx.reverse, ctx.relu, ctx.how = reverse, relu, how
        return out, out[0 if reverse else -1].clone()

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_out, grad_h_n):
        h0, weight_hh, out = ctx.saved_tensors
        steps, batch, hidden = out.shape
        da = torch.empty_like(out)  # the gradient of the pre-activations, and so of xw
        if batch:
            _launch(backward_kernel, (grad_out.contiguous(), grad_h_n.contiguous(), weight_hh,
                                       out, da), steps, batch, hidden, ctx.reverse, ctx.relu,
                    out.dtype, ctx.how)
        # Step t's previous state is h0 for the first processed step, else a neighbouring output.
        first = steps - 1 if ctx.reverse else 0
        earlier, later = slice(None, -1), slice(1, None)
        da_rest, h_rest = (da[earlier], out[later]) if ctx.reverse else (da[later], out[earlier])
        grad_w = torch.addmm(da[first].T @ h0, da_rest.reshape(-1, hidden).T,
                             h_rest.reshape(-1, hidden))
        return da, da[first] @ weight_hh, grad_w, None, None, None


def elman_layer(xs, h0, weight_ih, weight_hh, bias_ih=None, bias_hh=None, *, reverse=False,
                relu=False, how: Plan | None = None):
    """One Elman layer in one direction over xs (T, N, I) from h0 (N, H): the hoisted input
    projection, then the kernels' recurrence. Returns (outputs (T, N, H), h_n (N, H))."""
    bias = None if bias_ih is None else bias_ih + bias_hh
    xw = F.linear(xs, weight_ih, bias)  # every step's input term in one GEMM
    return ElmanRecurrence.apply(xw, h0, weight_hh, reverse, relu, how)


@dataclass(frozen=True)
class TritonBackend(Backend):
    """Each layer and direction of an Elman RNN (the only family with kernels) by
    `elman_layer`, launched with `plan` (None: `choose_plan` per layer)."""

    plan: Plan | None = None

    def layer(self, family: str, x, state: Optional[State], weights: Weights, relu: bool,
              reverse: bool):
        (h0,) = zero_state(family, x, weights) if state is None else state
        weight_ih, weight_hh, bias_ih, bias_hh, _ = weights  # an Elman RNN has no projection
        output, h_n = elman_layer(x, h0, weight_ih, weight_hh, bias_ih, bias_hh, reverse=reverse,
                                  relu=relu, how=self.plan)
        return output, (h_n,)


# torch.nn's RNN on the kernels, bound under its torch.nn name so instances pickle; the other
# five classes of module_classes have no kernels.
RNN = module_classes(TritonBackend(), __name__)["rnn"]


def availability() -> str | None:
    """None when the kernels can run here, else why not."""
    if triton is None:
        return "triton is not installed"
    if not INTERPRETED and not torch.cuda.is_available():
        return ("needs a CUDA GPU; set TRITON_INTERPRET=1 to run the kernels on the CPU "
                "interpreter for correctness")
    return None


IMPLEMENTATION = Implementation(
    name="triton",
    kinds={"rnn": RNN},
    description="Elman RNN: input projection hoisted into one GEMM, the recurrence one persistent "
                "Triton kernel per layer and direction (forward and backward)",
    # The kernels take padded tensors only: no variable-length (packed) path.
    unsupported=frozenset({"cpu" if KERNEL_DEVICE == "cuda" else "cuda", "packed"}),
    availability=availability,
)
