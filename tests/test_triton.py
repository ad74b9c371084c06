"""The triton implementation against torch.nn, its kernels run on CPU by triton's interpreter.

triton.jit reads TRITON_INTERPRET when it decorates, i.e. when rnnbench.impls.triton is first
imported, so the kernels run in a child Python started with TRITON_INTERPRET=1: this file, run as
a script. The child runs every case through the triton module and through torch.nn in float64
with the same (rounded) weights and inputs, and reports for each output and gradient its error
and its excess over the spec's tolerance (<= 1 passes) as JSON; the tests here judge that. This
keeps the interpreter out of the pytest process, whatever it imported before. Other children,
without the variable, check what happens with no GPU and compile the kernels for an H100 (which
needs no GPU). Without triton installed, everything is skipped except the check that the
implementation then says so.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass

import pytest
import torch

from rnnbench.reference import Config, io_shapes, param_shapes, tolerance

CHILD_TIMEOUT_S = 600


@dataclass(frozen=True)
class Case:
    """One run of a module: `batch=None` is unbatched input; `h0` whether an initial state is
    given; `train` runs in training mode (dropout active); `plan` forces a tiling (block_b,
    block_n, block_k) with W_hh reloaded every step, where the default would keep it resident."""

    name: str
    cfg: Config
    batch: int | None
    steps: int
    h0: bool = True
    dtype: str = "float64"
    train: bool = False
    plan: tuple[int, int, int] | None = None


# Hidden sizes are not powers of two, and batches not multiples of the row tile.
CASES = (
    Case("tanh", Config("rnn", 3, 7), 4, 5),
    Case("relu-two-layer-bidirectional-h0-none",
         Config("rnn", 3, 7, num_layers=2, nonlinearity="relu", bidirectional=True), 3, 4, h0=False),
    Case("batch-first-no-bias", Config("rnn", 4, 5, bias=False, batch_first=True), 3, 5),
    Case("unbatched-bidirectional", Config("rnn", 3, 6, bidirectional=True), None, 5),
    Case("two-row-tiles", Config("rnn", 3, 20), 20, 3),
    Case("dropout-in-training", Config("rnn", 3, 6, num_layers=3, dropout=0.5), 4, 5, train=True),
    Case("tiled-bidirectional-relu", Config("rnn", 3, 20, nonlinearity="relu", bidirectional=True),
         6, 3, plan=(4, 16, 16)),
    Case("tiled-unequal-tiles", Config("rnn", 3, 20), 5, 3, plan=(2, 32, 16)),
    Case("float32-two-layer-bidirectional-batch-first",
         Config("rnn", 3, 7, num_layers=2, bidirectional=True, batch_first=True), 3, 6,
         dtype="float32"),
    Case("float32-relu-unbatched", Config("rnn", 4, 5, nonlinearity="relu"), None, 6,
         dtype="float32"),
    Case("float32-tiled", Config("rnn", 3, 20), 6, 3, dtype="float32", plan=(4, 16, 16)),
    Case("bfloat16", Config("rnn", 3, 7, bidirectional=True), 4, 5, dtype="bfloat16"),
    Case("float16", Config("rnn", 3, 7, num_layers=2), 4, 5, dtype="float16"),
)


def compared_names(case: Case) -> set[str]:
    """Everything a case compares: the outputs, and the gradients of the input, of h0 when
    given, and of every parameter."""
    wrt = ["input", *(["h0"] if case.h0 else []), *param_shapes(case.cfg)]
    return {"output", "h_n", *(f"grad {name}" for name in wrt)}


@pytest.fixture(scope="module")
def measured() -> dict:
    pytest.importorskip("triton")
    child = subprocess.run([sys.executable, __file__], env={**os.environ, "TRITON_INTERPRET": "1"},
                           capture_output=True, text=True, timeout=CHILD_TIMEOUT_S)
    assert child.returncode == 0, child.stderr[-3000:]
    return json.loads(child.stdout.splitlines()[-1])


def test_the_child_ran_interpreted_and_available(measured):
    assert measured["status"] == {"interpreted": True, "availability": None,
                                  "unsupported": ["cuda", "packed"]}


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.name)
def test_forward_and_gradients_match_torch_nn(measured, case):
    errors = measured["cases"][case.name]
    assert set(errors) == compared_names(case)
    beyond = {name: e for name, e in errors.items() if not e["excess"] <= 1}  # NaN fails too
    assert not beyond, f"beyond the {case.dtype} tolerance: {beyond}"


def run_probe(code: str) -> str:
    """stdout of `code` run by a child Python with the kernels compiled (no TRITON_INTERPRET)."""
    env = {key: value for key, value in os.environ.items() if key != "TRITON_INTERPRET"}
    child = subprocess.run([sys.executable, "-c", code], env=env,
                           capture_output=True, text=True, timeout=CHILD_TIMEOUT_S)
    assert child.returncode == 0, child.stderr[-3000:]
    return child.stdout.strip()


def test_unavailable_without_triton():
    reason = run_probe("import sys; sys.modules['triton'] = None\n"
                       "from rnnbench.impls.triton import IMPLEMENTATION\n"
                       "print(IMPLEMENTATION.unavailable_reason())")
    assert reason == "triton is not installed"


@pytest.mark.skipif(torch.cuda.is_available(), reason="a CUDA GPU is available here")
def test_without_gpu_or_interpreter_unavailable_and_cpu_tensors_refused():
    pytest.importorskip("triton")
    reason, refusal = run_probe(
        "import torch\n"
        "from rnnbench.impls.triton import IMPLEMENTATION\n"
        "print(IMPLEMENTATION.unavailable_reason())\n"
        "try:\n"
        "    IMPLEMENTATION.constructor('rnn')(3, 5)(torch.zeros(4, 2, 3))\n"
        "except RuntimeError as exc:\n"
        "    print(exc)\n").splitlines()
    assert "needs a CUDA GPU" in reason and "TRITON_INTERPRET=1" in reason
    assert "cpu" in refusal and "TRITON_INTERPRET=1" in refusal


# (dtype, batch, hidden, reverse, relu): choose_plan keeps W_hh resident for the first and tiles
# it for the second.
COMPILED = (
    ("float32", 1, 128, False, False),
    ("float64", 3, 100, True, True),
)


def test_kernels_compile_for_an_h100_without_one():
    # The interpreter runs the kernels as Python and misses what only the compiler rejects
    # (e.g. two branches of a jit function returning different dtypes); ptxas ships with triton.
    pytest.importorskip("triton")
    compiled = json.loads(run_probe(f"import runpy; runpy.run_path({__file__!r}, "
                                    "run_name='compile')"))
    assert compiled == {f"{'-'.join(map(str, row))} {kernel}": "compiled"
                        for row in COMPILED for kernel in ("forward_kernel", "backward_kernel")}


# --- The children: run as a script, this file measures every case (with TRITON_INTERPRET=1) or
# --- compiles the kernels for sm_90 (run_name "compile", without it). -----------------------------

def run_module(module, case: Case, x, h0, projections) -> dict[str, torch.Tensor]:
    """Outputs, and gradients of a fixed random projection of them, in float64."""
    dtype = next(module.parameters()).dtype
    x = x.to(dtype).requires_grad_()
    inputs = [x] if h0 is None else [x, h0.to(dtype).requires_grad_()]
    torch.manual_seed(0)  # the same dropout masks in both modules
    output, h_n = module(*inputs)
    loss = sum((o.double() * p).sum() for o, p in zip((output, h_n), projections))
    params = dict(module.named_parameters())
    wrt = {"input": x, **({} if h0 is None else {"h0": inputs[1]}),
           **{name: params[name] for name in param_shapes(case.cfg)}}
    grads = torch.autograd.grad(loss, list(wrt.values()))
    return {"output": output, "h_n": h_n,
            **{f"grad {name}": grad for name, grad in zip(wrt, grads)}}


def measure(case: Case) -> dict[str, dict[str, float]]:
    from rnnbench.impls import triton as kernels

    dtype = getattr(torch, case.dtype)
    module = kernels.IMPLEMENTATION.constructor("rnn")(**case.cfg.constructor_kwargs(), dtype=dtype)
    if case.plan:
        plan = kernels.Plan(*case.plan, resident=False, num_warps=4)
        module.backend = kernels.TritonBackend(plan)
    native = torch.nn.RNN(**case.cfg.constructor_kwargs(), dtype=torch.float64)
    native.load_state_dict({name: p.double() for name, p in module.state_dict().items()})
    module.train(case.train), native.train(case.train)

    gen = torch.Generator().manual_seed(0)
    shapes = io_shapes(case.cfg, case.batch, case.steps)
    # Inputs rounded to the module's dtype, so both modules see the same values.
    draw = lambda shape, scale=1.0: (scale * torch.randn(shape, generator=gen, dtype=torch.float64)
                                     ).to(dtype).double()
    x = draw(shapes["input"])
    h0 = draw(shapes["h0"], 0.5) if case.h0 else None
    projections = [draw(shapes["output"]), draw(shapes["h_n"])]
    got = run_module(module, case, x, h0, projections)
    want = run_module(native, case, x, h0, projections)
    errors = {}
    for name in got:
        tol = tolerance(case.dtype, case.steps, case.cfg.num_layers, gradient=name.startswith("grad"))
        g, w = got[name].detach().double(), want[name].detach()
        errors[name] = {"excess": tol.excess(g, w), "max_abs": (g - w).abs().max().item()}
    return errors


def main() -> None:
    from rnnbench.impls import triton as kernels

    status = {"interpreted": kernels.INTERPRETED, "availability": kernels.availability(),
              "unsupported": sorted(kernels.IMPLEMENTATION.unsupported)}
    print(json.dumps({"status": status, "cases": {case.name: measure(case) for case in CASES}}))


def compile_for_gpu(dtype: str, batch: int, hidden: int, reverse: bool, relu: bool) -> dict[str, str]:
    """Compile both kernels as a launch of this shape would, for sm_90; "compiled" or the error."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from rnnbench.impls import triton as kernels

    how = kernels.choose_plan(batch, hidden, getattr(torch, dtype))
    constants = kernels.constants(how, reverse, relu, getattr(torch, dtype))
    pointer = "*" + {"float32": "fp32", "float64": "fp64", "bfloat16": "bf16"}[dtype]
    label = "-".join(map(str, (dtype, batch, hidden, reverse, relu)))
    outcomes = {}
    for kernel in (kernels.forward_kernel, kernels.backward_kernel):
        signature = {name: pointer if name.endswith("_ptr") else "i32"
                     for name in kernel.arg_names if name not in constants}
        signature.update(dict.fromkeys(constants, "constexpr"))
        try:
            triton.compile(ASTSource(kernel, signature, constants), target=GPUTarget("cuda", 90, 32),
                           options={"num_warps": how.num_warps})
            outcome = "compiled"
        except Exception as exc:  # reported to the test, which shows it
            while exc.__cause__ is not None:  # the innermost CompilationError says what, last
                exc = exc.__cause__
            said = str(exc).strip().splitlines() or ["(no message)"]  # a bare assert has none
            outcome = f"{type(exc).__name__}: {said[-1]}"
        outcomes[f"{label} {kernel.fn.__name__}"] = outcome
    return outcomes


if __name__ == "__main__":
    main()
elif __name__ == "compile":
    print(json.dumps({key: outcome for row in COMPILED
                      for key, outcome in compile_for_gpu(*row).items()}))
