"""fused: the fastest correct CPU implementation here — a C++ kernel per layer and direction.

What makes it fast (measured against torch.nn on CPU, see docs/performance.md):

- the input projection of all time steps is one GEMM before the loop ("premul"), and outputs
  are written in place into that buffer, so the loop does one small GEMM per step;
- the loop runs in C++ (`fused_kernels.cpp`): no per-step Python or dispatcher cost, at batch 1
  a plain vectorised loop instead of a BLAS call, and from a batch of 16 the work split between
  threads: the hidden units (every thread's step product has every row of the batch, which
  BLAS runs nearer its peak; the threads meet once per step), or, for an LSTM with a
  projection, the batch rows (each thread runs the whole time loop on its rows);
- weights are stored transposed (`_common.transposed_storage`), the layout every GEMM reads;
- in float32 the recurrent weight is reordered once per call for the step products: packed
  into MKL's internal GEMM layout (cblas_sgemm_pack), or into panels for a kernel of our own,
  built for the CPU's AVX-512 or AVX2 (MKL runs its AVX2 code on some AVX-512 CPUs: on a Zen 5
  EPYC the LSTM's forward at T=100 B=32 H=256 went from 14.0 to 8.4 ms); the two are timed the
  first time a shape and thread count are met in the process, and the faster runs them from
  then on;
- the products over all time steps (the input projection, and the input and weight gradients)
  run on BLAS, on oneDNN (torch's mkldnn operators) or on our own kernel where it is built,
  whichever ran a product of that shape faster when it was first met in the process:
  none is the faster on every CPU and shape, so a shape's first call costs a few extra
  products (the LSTM's at T=25 B=1 H=128 on one thread went from 105 to 81 us on a Zen 5 EPYC,
  its input projection on the AVX-512 kernel);
- backward is hand-written (a custom autograd.Function): one small GEMM per step, the gate
  gradients kept transposed (streamed past the caches: read only after the loop), then the
  weight, bias and input gradients each as one GEMM (or sum) over all time steps, the weight
  gradients in their weights' layout (at T=50 B=64 H=512 the LSTM's forward+backward went from
  1.13x to 1.14-1.19x torch.nn's on a Zen 5 EPYC); none for h0 when no state was given.

The kernel is built with torch.utils.cpp_extension on first use (half a minute) into torch's
extension cache (TORCH_EXTENSIONS_DIR, default ~/.cache/torch_extensions) and reused after that,
in a folder named by a digest of the source, the flags, torch's version and the CPU (model and
vector extensions: the build is for the building machine's CPU, -march=native), so that two
checkouts with different kernels, or two machines with different CPUs sharing one cache, never
share (or rebuild) one build. RNNBENCH_FUSED_MARCH=x86-64-v3 (any gcc -march) builds for that
CPU instead: the kernels an AVX2 machine builds, run (and tested) on an AVX-512 one. (A CPU
with extensions this one lacks builds, and then dies of SIGILL on first use.)
Without a C++ compiler or ninja the implementation is unavailable and says why.
"""
from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import platform
import re
import shutil
from pathlib import Path
from typing import Optional

import torch
from torch.autograd.function import once_differentiable

from rnnbench.environment import FUSED_MARCH, NO_LIMIT, cpu_flags, cpu_model
from rnnbench.impls._common import Backend, State, Weights, module_classes, transposed_storage
from rnnbench.impls.base import Implementation

SOURCE = Path(__file__).with_name("fused_kernels.cpp")
EXTENSION_NAME = "rnnbench_fused"
# No -ffast-math: IEEE results; the two -fno-* only let gcc vectorise the activation loops.
# AVX-512 machines run the batch-1 loops twice as wide as gcc's default 256-bit choice. OpenMP
# (torch's own runtime, shared) lets a large batch be split between threads.
X86 = platform.machine() in ("x86_64", "AMD64")
OPENMP = ["-fopenmp"] if platform.system() == "Linux" else []
MARCH_VARIABLE = FUSED_MARCH  # the CPU to build for, gcc's -march
NATIVE = NO_LIMIT[FUSED_MARCH]  # this machine's own CPU, the default
CFLAGS = ["-O3", f"-march={NATIVE}", "-fno-math-errno", "-fno-trapping-math", *OPENMP,
          *(["-mprefer-vector-width=512"] if X86 else [])]
LDFLAGS = OPENMP

_kernels = None  # the extension module once built, or the one-line reason it cannot be


def kernels():
    """The compiled kernels (a module with `forward` and `backward`), built on first use;
    RuntimeError with a one-line reason when they cannot be built here."""
    global _kernels
    if _kernels is None:
        _kernels = _build()
    if isinstance(_kernels, str):
        raise RuntimeError(_kernels)
    return _kernels


def _build():
    from torch.utils import cpp_extension

    march = os.environ.get(MARCH_VARIABLE) or NATIVE
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", march):
        return f"{MARCH_VARIABLE} names a CPU for gcc's -march (e.g. x86-64-v3), not {march!r}"
    compiler = os.environ.get("CXX", "c++")
    if shutil.which(compiler) is None:
        return f"fused needs a C++ compiler to build its kernels: {compiler!r} not found (set CXX)"
    if not cpp_extension.is_ninja_available():
        return "fused needs ninja to build its kernels (pip install ninja)"
    # Another CPU's build is another module: a process may load both (the tests do).
    name = EXTENSION_NAME + ("" if march == NATIVE else "_" + re.sub(r"\W", "_", march))
    try:
        with _build_lock(_build_directory(cpp_extension, march)) as directory:
            module = cpp_extension.load(name=name, sources=[str(SOURCE)],
                                        extra_cflags=compile_flags(march), extra_ldflags=LDFLAGS,
                                        build_directory=str(directory))
    except Exception as error:  # a failed build raises several types; all mean "unavailable"
        lines = str(error).strip().splitlines() or [type(error).__name__]
        return f"fused could not build its kernels for -march={march}: {lines[0]}"
    return module


def compile_flags(march: str = NATIVE) -> list[str]:
    """The compiler flags of fused's kernels built for the CPU `march` names (gcc's -march)."""
    return [f"-march={march}" if flag == f"-march={NATIVE}" else flag for flag in CFLAGS]


def _build_directory(cpp_extension, march: str = NATIVE) -> Path:
    digest = hashlib.sha256(SOURCE.read_bytes())
    built_for = [*compile_flags(march), *LDFLAGS, torch.__version__, cpu_model(), cpu_flags()]
    digest.update(" ".join(built_for).encode())
    root = os.environ.get("TORCH_EXTENSIONS_DIR") or cpp_extension.get_default_build_root()
    return Path(root) / f"{EXTENSION_NAME}-{digest.hexdigest()[:16]}"


@contextlib.contextmanager
def _build_lock(directory: Path):
    """Hold an exclusive lock on the build folder while building or loading.

    torch's own lock is a file that a killed build leaves behind, after which every later build
    waits for it forever. An flock ends with the process that holds it, so whoever holds ours
    knows that any lock file of torch's in the folder is such a leftover and removes it."""
    directory.mkdir(parents=True, exist_ok=True)
    with open(directory / "rnnbench.flock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            (directory / "lock").unlink(missing_ok=True)
            yield directory
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def availability() -> str | None:
    try:
        kernels()
    except RuntimeError as error:
        return str(error)
    return None


class FusedLayer(torch.autograd.Function):
    """One layer and direction with the hand-written backward of fused_kernels.cpp."""

    X = 3  # the position of x among forward's arguments

    @staticmethod
    def forward(ctx, family, relu, reverse, x, w_ih, w_hh, b_ih, b_hh, w_hr, *state):
        # An empty `state` means zeros; the kernel returns the final h (and c) either way.
        results = kernels().forward(family, x, state, w_ih, w_hh, b_ih, b_hh, w_hr, relu, reverse,
                                    True)
        n = 2 if family == "lstm" else 1
        output, finals, saved = results[0], results[1:1 + n], results[1 + n:]
        ctx.save_for_backward(x, w_ih, w_hh, w_hr, output, *state, *saved)
        ctx.layer = (family, relu, reverse, b_ih is not None, n, len(state))
        return (output, *finals)

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_output, *grad_finals):
        family, relu, reverse, has_bias, n, given = ctx.layer
        x, w_ih, w_hh, w_hr, output, *rest = ctx.saved_tensors
        grads = kernels().backward(family, grad_output, grad_finals, x, rest[:given], w_ih, w_hh,
                                   has_bias, w_hr, relu, reverse, output, rest[given:],
                                   ctx.needs_input_grad[FusedLayer.X])
        # grads: dx, dh0, [dc0], dw_ih, dw_hh, [db_ih, db_hh], [dw_hr]
        dx, dstate, dw = grads[0], grads[1:1 + n], grads[1 + n:]
        db = (dw[2], dw[3]) if has_bias else (None, None)
        dw_hr = dw[-1] if w_hr is not None else None
        return (None, None, None, dx, dw[0], dw[1], *db, dw_hr, *dstate[:given])


class FusedBackend(Backend):
    """The fused C++ recurrence; autograd only when something needs a gradient."""

    # The kernel reads every weight transposed; transposing per call would cost more than the
    # whole forward at batch 1.
    new_parameter = staticmethod(transposed_storage)

    def layer(self, family: str, x, state: Optional[State], weights: Weights, relu: bool,
              reverse: bool):
        state = state or ()  # the kernel reads no state as zeros
        if torch.is_grad_enabled() and any(t is not None and t.requires_grad
                                           for t in (x, *weights, *state)):
            output, *finals = FusedLayer.apply(family, relu, reverse, x, *weights, *state)
        else:
            results = kernels().forward(family, x, state, *weights, relu, reverse, False)
            output, *finals = results[:3 if family == "lstm" else 2]
        return output, tuple(finals)


KINDS = module_classes(FusedBackend(), __name__)
# Bound under the names torch.nn gives them, so instances pickle (and a search finds them).
RNNCell, LSTMCell, GRUCell, RNN, LSTM, GRU = KINDS.values()

IMPLEMENTATION = Implementation(
    name="fused",
    kinds=KINDS,
    description="C++ kernels (built on first use): premul GEMM, in-place outputs, batch split "
                "between threads, hand-written backward with whole-sequence weight GEMMs",
    # The kernels take padded tensors only: no variable-length (packed) path.
    unsupported=frozenset({"float16", "bfloat16", "cuda", "packed"}),
    availability=availability,
)
