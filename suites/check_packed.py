"""Variable-length sequences handed over as a PackedSequence, against the float64 reference.

The input is built as users build it, `pack_padded_sequence(input, lengths, batch_first=...,
enforce_sorted=...)`. torch.nn's contract for it: the output is a PackedSequence laid out like
the input (the same batch_sizes, sorted_indices and unsorted_indices; data with one row per
step of every sequence), each sequence computed on its own steps only (the reference:
`rnnbench.reference.packed`), and h_n (c_n) each sequence's state after its own last step, in
the caller's batch order. Gradients flow through the packed path to the input, the initial
state and every parameter.

Outputs are compared in the padded layout (`pad_packed_sequence`, zeros beyond each length),
which is what users read them as. A module that raises on a PackedSequence while it runs plain
input does not support the feature (`rnnbench.suites.runner.probe_packed`); one that returns
something is judged on it.
"""
from __future__ import annotations

import numpy as np
import torch
from torch.nn.utils.rnn import PackedSequence, pack_padded_sequence, pad_packed_sequence

from rnnbench import reference
from rnnbench.reference import io_shapes
from rnnbench.reference.numerics import output_names
from rnnbench.suites.check_numerics import backward
from rnnbench.suites.compare import require_gradients_close, require_outputs_close
from rnnbench.suites.diagnoses import diagnose_packed
from rnnbench.suites.results import Finding
from rnnbench.suites.run import (Run, coarser, describe_structure, listed_state,
                                 past_extra_values, state_flat)
from rnnbench.suites.subject import nest_state
from rnnbench.suites.subject import call, spec_parameters, to_numpy


class PackedRun(Run):
    """A Run whose input is packed: `x64` in the module's layout (batch_first or not),
    `lengths` the case's, and the reference `reference.forward_packed`."""

    @property
    def lengths(self) -> tuple[int, ...]:
        return self.case.lengths

    def time_major(self, a: np.ndarray) -> np.ndarray:
        return a.swapaxes(0, 1) if self.cfg.batch_first else a

    def pack(self, x: torch.Tensor) -> PackedSequence:
        return pack_padded_sequence(x, torch.tensor(self.lengths), batch_first=self.cfg.batch_first,
                                    enforce_sorted=self.case.enforce_sorted)

    def packed_expected(self, params: dict | None = None) -> dict[str, np.ndarray]:
        """The reference's padded, time-major output and final states."""
        return reference.forward_packed(self.cfg, self.params if params is None else params,
                                        self.time_major(self.x64), self.lengths,
                                        nest_state(self.cfg, self.hx64))

    def packed_call(self, x: torch.Tensor | None = None, hx=None) -> dict[str, torch.Tensor]:
        """The module on the packed input: its output padded (time-major, total length the
        longest sequence's) and its final states, validated against torch.nn's structure."""
        fresh_x, fresh_hx = self.tensors()
        x = fresh_x if x is None else x
        hx = fresh_hx if hx is None else hx
        packed = self.pack(x)
        result = call("forward", self.module,
                      *((packed,) if hx is None else (packed, nest_state(self.cfg, hx))))
        return unpack_packed(self.cfg, packed, result)


def check_packed_forward(subject, case, dtype: str) -> dict:
    """A packed input gives torch.nn's packed output structure, the reference's numbers in it,
    and each sequence's own final state."""
    run = PackedRun(subject, case, dtype, "packed-forward")
    observed = {name: to_numpy(t) for name, t in run.packed_call().items()}
    return compare_packed(run, observed)


def check_packed_gradients(subject, case, dtype: str) -> dict:
    """Gradients through the packed path w.r.t. the padded input (zero beyond each length), the
    initial state (when given) and every parameter equal the reference's."""
    run = PackedRun(subject, case, dtype, "packed-gradients", train=True)
    cfg = run.cfg
    stored = spec_parameters(run.module, cfg, run.pmap)
    x, hx = run.tensors()
    leaves = {"input": x, **(hx or {})}
    for leaf in leaves.values():
        leaf.requires_grad_(True)
    outputs = run.packed_call(x, hx)
    compare_packed(run, {name: to_numpy(t) for name, t in outputs.items()})
    rng = subject.rng("packed-gradients-out", case.name)
    grad_out = {name: rng.normal(size=tuple(t.shape)) for name, t in outputs.items()}
    observed = backward(run, outputs, grad_out, leaves, stored)
    expected = reference.backward_packed(cfg, run.params, run.time_major(run.x64),
                                         run.lengths, nest_state(cfg, run.hx64),
                                         grad_out)
    expected["input"] = run.time_major(expected["input"])
    return require_gradients_close(observed, expected, run.tolerance(gradient=True))


def compare_packed(run: PackedRun, observed: dict) -> dict:
    """Compare with the packed reference; Finding with numbers, the first sequence that
    differs and the diagnosis if it differs."""
    expected = run.packed_expected()
    tol = run.tolerance()

    def explain(name: str, numbers: dict) -> str | None:
        numbers.update(_where(name, observed[name], expected[name], tol, run.lengths))
        return diagnose_packed(run, observed, expected, tol)

    return require_outputs_close(observed, expected, tol, explain)


def _where(name: str, actual, expected, tol, lengths) -> dict:
    """The first sequence (in the caller's order) that differs, its length, and for the output
    the first timestep."""
    bad = np.abs(actual - expected) > tol.atol + tol.rtol * np.abs(expected)
    if not bad.any():
        return {}
    if name == "output":
        steps, seqs = np.nonzero(bad.any(axis=-1))
        first = int(np.argmin(steps))
        b = int(seqs[first])
        return {"sequence": b, "length": lengths[b], "timestep": int(steps[first])}
    b = int(np.nonzero(bad.any(axis=(0, 2)))[0][0])
    return {"sequence": b, "length": lengths[b]}


def unpack_packed(cfg, packed: PackedSequence, result) -> dict[str, torch.Tensor]:
    """forward's return value for a packed input as tensors keyed by output name (the output
    padded, time-major); Finding when its structure differs from torch.nn's."""
    lstm = cfg.family == "lstm"
    result = past_extra_values(cfg, result)  # the output-structure check says so, as of:
    if lstm and state_flat(result):
        result = (result[0], tuple(result[1:]))
    if not (isinstance(result, (tuple, list)) and len(result) == 2):
        raise Finding(f"forward returned {describe_structure(result)} for a PackedSequence "
                      f"input, expected a tuple (output, {'(h_n, c_n)' if lstm else 'h_n'})")
    output, state = result
    if not isinstance(output, PackedSequence):
        raise Finding(f"the output for a PackedSequence input is a {type(output).__name__}, "
                      "expected a PackedSequence")
    for field in ("batch_sizes", "sorted_indices", "unsorted_indices"):
        got, want = getattr(output, field), getattr(packed, field)
        same = (got is None and want is None) or (
            got is not None and want is not None and torch.equal(got.cpu(), want.cpu()))
        if not same:
            raise Finding(f"the output's {field} is {_listed(got)}, expected the input's "
                          f"{_listed(want)}")
    steps, batch = int(packed.batch_sizes.numel()), int(packed.batch_sizes[0])
    shapes = io_shapes(cfg.replace(batch_first=False), batch, steps)
    width = shapes["output"][-1]
    rows = int(packed.data.shape[0])
    if tuple(output.data.shape) != (rows, width):
        raise Finding(f"the output's data has shape {tuple(output.data.shape)}, expected "
                      f"{(rows, width)} (one row per step of every sequence)")
    if output.data.dtype != packed.data.dtype:
        raise Finding(f"the output has dtype {output.data.dtype}, expected {packed.data.dtype}",
                      "lower_precision" if coarser(output.data.dtype, packed.data.dtype) else None)
    padded, lengths = pad_packed_sequence(output)
    last = padded[lengths - 1, torch.arange(len(lengths))]  # each sequence's own last step
    listed = listed_state(cfg, state, batched=True, ends=(padded[0], last))
    state = state if listed is None else listed  # the output-structure check says so
    states = tuple(state) if cfg.family == "lstm" and isinstance(state, (tuple, list)) else (state,)
    names = output_names(cfg)[1:]
    if len(states) != len(names) or not all(isinstance(s, torch.Tensor) for s in states):
        raise Finding(f"the final state for a PackedSequence input is not "
                      f"{' and '.join(names)} as tensors")
    for name, value in zip(names, states):
        if tuple(value.shape) != shapes[name]:
            raise Finding(f"{name} has shape {tuple(value.shape)}, expected {shapes[name]}",
                          "h_n_no_layer_dim" if value.dim() == len(shapes[name]) - 1 else None)
        if value.dtype != packed.data.dtype:
            raise Finding(f"{name} has dtype {value.dtype}, expected {packed.data.dtype} (the "
                          "input's)", "lower_precision" if coarser(value.dtype, packed.data.dtype)
                          else None)
    padded, _ = pad_packed_sequence(output, total_length=steps)
    return {"output": padded, **dict(zip(names, states))}


def _listed(t) -> str:
    return "None" if t is None else str(t.tolist())
