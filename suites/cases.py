"""A case: one configuration of a kind with one input size, the row every check runs on.

A kind's cases are data in its suite record (`rnnbench.suites.kinds.SuiteKind`): the torch.nn
family's tables are in `rnnbench.suites.torch_nn`, the implicit RNN's in
`rnnbench.suites.implicit`, a new kind's wherever it registers itself.
`quick=True` marks the rows of `--quick` runs: a smaller list, not a different behaviour.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Case:
    """One configuration with one input size.

    `batch=None` means unbatched input; `h0` whether an initial state is passed (False
    exercises the state omitted); a kind that takes one step per call ignores `steps`.
    `features`: call features the row needs beyond its config's (e.g. "optional_state" for the
    rows that are about omitting the state). `only`: the generic checks this row is for, by
    group (parameters, init, shapes, forward, gradients, errors, inputs, copies, or a kind's own
    check names); empty: every one. `adjust`: (params, x) -> (params, x), what makes the row
    what it is from the spec's draws (e.g. a recurrent matrix of a given norm); None: the draws
    as they are. `tolerance_scale`: the factor on the policy's tolerance for this row, where
    `adjust` scales the input up by it (a product's rounding error grows with its terms, not
    with its result, which cancellation can leave small)."""

    name: str
    config: object
    batch: int | None
    steps: int = 1
    h0: bool = True
    quick: bool = False
    features: tuple[str, ...] = ()
    only: tuple[str, ...] = ()
    adjust: Callable | None = None
    tolerance_scale: float = 1.0

    @property
    def kind(self) -> str:
        return self.config.kind

    @property
    def batched(self) -> bool:
        return self.batch is not None

    @property
    def needs(self) -> tuple[str, ...]:
        """Call features this case needs beyond its config's: passing an initial state, and
        `features`."""
        return (("initial_state",) if self.h0 else ()) + self.features

    def runs(self, group: str) -> bool:
        """Whether the checks of `group` run on this row."""
        return not self.only or group in self.only


@dataclass(frozen=True)
class PackedCase(Case):
    """A batch of variable-length sequences, packed with `pack_padded_sequence(input, lengths,
    enforce_sorted=...)`; `batch` is len(lengths) and `steps` max(lengths)."""

    lengths: tuple[int, ...] = ()
    enforce_sorted: bool = False


OMITTED = ("optional_state",)  # the feature of the rows whose point is omitting the state
