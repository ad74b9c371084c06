"""What is timed: one implementation's module on one workload, with a callable per metric.

`build_task` constructs the module the way every implementation is constructed (the config's
constructor arguments plus `device=` and `dtype=`), makes seeded inputs on the device, and
returns a `Task` whose `steps[metric]` runs one call of that metric. The same task code serves
`rnnbench bench`, the asv suite and the pytest-benchmark suite.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import torch
# backward(gradient) imports this on its first use in a process (a second or more); importing it
# here keeps that one-off cost out of the first-call time of whichever implementation runs first.
import torch.fx.experimental.symbolic_shapes  # noqa: F401
from torch import nn

from rnnbench.benchmarks.workloads import Workload
from rnnbench.impls.base import Implementation
from rnnbench.reference import io_shapes

LEARNING_RATE = 1e-3


def first_tensor(out) -> torch.Tensor:
    """The module's main output: `output` of (output, h_n), `h` of a cell's (h, c), or itself."""
    while isinstance(out, (tuple, list)):
        out = out[0]
    return out


class Classifier(nn.Module):
    """A workload's module in context: optional embedding in front, optional linear head behind
    (on the time-averaged output), so text-classifier workloads time the whole model."""

    def __init__(self, rnn: nn.Module, workload: Workload, device, dtype):
        super().__init__()
        cfg = workload.config
        self.rnn = rnn
        self.embedding = (nn.Embedding(workload.vocab, cfg.input_size, device=device, dtype=dtype)
                          if workload.vocab else None)
        width = io_shapes(cfg, workload.batch, workload.steps)["output"][-1] if workload.classes else 0
        self.head = nn.Linear(width, workload.classes, device=device, dtype=dtype) if workload.classes else None
        # Batch-first modules put time on axis 1; the head averages over time.
        self.time_axis = 1 if cfg.batch_first else 0

    def forward(self, x):
        if self.embedding is not None:
            x = self.embedding(x)
        out = self.rnn(x)
        if self.head is None:
            return out
        return self.head(first_tensor(out).mean(dim=self.time_axis))


@dataclass
class Task:
    """A constructed module, its inputs, and one zero-argument callable per metric."""

    model: nn.Module
    steps: Mapping[str, Callable[[], object]]

    def solver_stats(self) -> dict | None:
        """The implicit solver's iteration counts from the last call, where the model exposes
        them as `last_solver_stats`: an object with a `summary()` dict, or a mapping."""
        for module in self.model.modules():
            stats = getattr(module, "last_solver_stats", None)
            if callable(getattr(stats, "summary", None)):
                return dict(stats.summary())
            if isinstance(stats, Mapping):
                return dict(stats)
        return None


def build_task(impl: Implementation, workload: Workload, device: str, seed: int = 0) -> Task:
    """Construct `impl`'s module for `workload` on `device` with seeded parameters and inputs."""
    dtype = getattr(torch, workload.dtype)
    torch.manual_seed(seed)
    # Built, then moved: every kind's constructor takes its config's arguments; not every one
    # takes torch.nn's device= and dtype=.
    rnn = impl.constructor(workload.kind)(**workload.config.constructor_kwargs())
    rnn = rnn.to(device=device, dtype=dtype)
    wrapped = workload.vocab or workload.classes
    model = Classifier(rnn, workload, device, dtype) if wrapped else rnn
    if workload.vocab:
        x = torch.randint(workload.vocab, workload.input_shape(), device=device)
    else:
        x = torch.randn(workload.input_shape(), device=device, dtype=dtype, requires_grad=True)
    target = (torch.randint(workload.classes, (workload.batch,), device=device)
              if workload.classes else None)
    return Task(model=model, steps=_steps(model, x, target, workload))


def _packing(x: torch.Tensor, workload: Workload):
    """The call's input from the padded tensor: itself, or packed with the workload's lengths
    (in every call, as a training loop packs every batch; the time includes it)."""
    if not workload.packed:
        return lambda: x
    from torch.nn.utils.rnn import pack_padded_sequence

    lengths = torch.tensor(workload.lengths)
    return lambda: pack_padded_sequence(x, lengths, batch_first=workload.config.batch_first,
                                        enforce_sorted=False)


def _steps(model: nn.Module, x: torch.Tensor, target, workload: Workload) -> dict:
    """The metric callables. Without a classifier head the loss is the output against a fixed
    random gradient, created on first use (its shape is the output's: a packed output's data)."""
    out_grad: list[torch.Tensor] = []
    # Only workloads that train get an optimizer: constructing one imports torch._dynamo
    # (seconds), which the other workloads (and asv's per-benchmark processes) should not pay.
    optimizer = (torch.optim.SGD(model.parameters(), lr=LEARNING_RATE)
                 if "train_step" in workload.metrics else None)

    call_input = _packing(x, workload)

    def forward():
        with torch.no_grad():
            return model(call_input())

    def forward_backward():
        # Fresh gradients every call, as a training loop has; nothing accumulates across calls.
        model.zero_grad(set_to_none=True)
        x.grad = None
        out = model(call_input())
        if target is not None:
            nn.functional.cross_entropy(out, target).backward()
            return
        out = first_tensor(out)
        if not out_grad:
            out_grad.append(torch.randn_like(out))
        out.backward(out_grad[0])

    def train_step():
        forward_backward()
        if workload.clip_norm is not None:
            nn.utils.clip_grad_norm_(model.parameters(), workload.clip_norm)
        optimizer.step()

    return {"forward": forward, "forward_backward": forward_backward, "train_step": train_step}
