"""The cases: module configurations and input sizes the checks run on, as data.

Every kind has every combination of batched/unbatched input with the initial state given/omitted
(tests/test_suites.py checks it). Sizes are chosen so that symmetric setups cannot hide a bug: batch, steps, input and hidden sizes
all differ (a transposed batch_first or a W used transposed then fails loudly or numerically),
and hidden sizes (5, 7, 31) are multiples of neither the LSTM's 4 nor the GRU's 3 gates (a gate
split by chunk size instead of chunk count then goes wrong). One case per kind deliberately has
input_size == hidden_size, the only way feeding the raw input to every layer goes unnoticed by
the shapes. Inputs get a nonzero mean (see `subject.Trial`).

Three tables, each used by the checks that need its kind of row:
- CASES: the general cases (shapes, numerics, gradients, state, errors, inputs);
- CONSTRUCTION_CASES: configurations whose construction is examined (init, dtype kwarg, invalid
  arguments), single-layer ones included, so an implementation without num_layers or
  bidirectional still has its init checked;
- DROPOUT_CASES: two-layer sequences with dropout, run in training and eval mode;
- PACKED_CASES: variable-length sequences handed over as a PackedSequence (`PackedCase`: the
  lengths, and whether the packing sorts them). Lengths differ, include 1, and are not sorted
  unless the row packs with enforce_sorted=True, so a state taken at the padded end, a reverse
  direction started in the padding or a batch order lost in the sorting all show.
`quick=True` marks the rows of `--quick` runs: a smaller list, not a different behaviour.
"""
from __future__ import annotations

from dataclasses import dataclass

from rnnbench.reference import CELL_KINDS, SEQUENCE_KINDS, Config


@dataclass(frozen=True)
class Case:
    """One configuration with one input size. `batch=None` means unbatched input; `h0` whether
    an initial state is passed (False exercises hx=None); cells ignore `steps`."""

    name: str
    config: Config
    batch: int | None
    steps: int = 1
    h0: bool = True
    quick: bool = False
    features: tuple[str, ...] = ()

    @property
    def kind(self) -> str:
        return self.config.kind

    @property
    def batched(self) -> bool:
        return self.batch is not None

    @property
    def needs(self) -> tuple[str, ...]:
        """Call features this case needs beyond its config's: passing an initial state, and
        `features` (e.g. "optional_state" for the rows that are about omitting it)."""
        return (("initial_state",) if self.h0 else ()) + self.features


@dataclass(frozen=True)
class PackedCase(Case):
    """A batch of variable-length sequences, packed with `pack_padded_sequence(input, lengths,
    enforce_sorted=...)`; `batch` is len(lengths) and `steps` max(lengths)."""

    lengths: tuple[int, ...] = ()
    enforce_sorted: bool = False


def _rows(kinds, name, batch, steps=1, *, h0=True, quick=False, features=(), **config
          ) -> tuple[Case, ...]:
    """One row of a table, for each of `kinds`."""
    return tuple(Case(name, Config(kind, **config), batch, steps, h0, quick, features)
                 for kind in kinds)


OMITTED = ("optional_state",)  # the rows whose point is hx=None


SEQ, CELLS = SEQUENCE_KINDS, CELL_KINDS

CASES: tuple[Case, ...] = (
    *_rows(SEQ, "single-layer", 4, 6, input_size=3, hidden_size=5, quick=True),
    *_rows(SEQ, "h0-omitted", 2, 4, h0=False, features=OMITTED, input_size=3, hidden_size=5,
           quick=True),
    *_rows(SEQ, "two-layer-bidirectional", 4, 6, input_size=3, hidden_size=5, num_layers=2,
           bidirectional=True, quick=True),
    *_rows(SEQ, "batch-first", 3, 5, input_size=4, hidden_size=7, batch_first=True, quick=True),
    *_rows(SEQ, "unbatched", None, 7, input_size=3, hidden_size=5, quick=True),
    *_rows(SEQ, "unbatched-h0-omitted", None, 5, h0=False, features=OMITTED, input_size=4,
           hidden_size=7),
    *_rows(SEQ, "unbatched-bidirectional-batch-first", None, 6, h0=False, input_size=3,
           hidden_size=5, bidirectional=True, batch_first=True),
    *_rows(SEQ, "three-layer-square", 2, 4, input_size=5, hidden_size=5, num_layers=3, quick=True),
    *_rows(SEQ, "no-bias", 2, 4, input_size=3, hidden_size=7, num_layers=2, bias=False, quick=True),
    *_rows(SEQ, "single-step", 5, 1, input_size=3, hidden_size=7),
    *_rows(("rnn",), "relu", 4, 6, input_size=3, hidden_size=5, num_layers=2, nonlinearity="relu"),
    *_rows(("lstm",), "projection-bidirectional", 2, 5, input_size=3, hidden_size=7, num_layers=2,
           bidirectional=True, proj_size=4, quick=True),
    *_rows(CELLS, "batched", 4, input_size=3, hidden_size=5, quick=True),
    *_rows(CELLS, "h0-omitted", 2, h0=False, features=OMITTED, input_size=3, hidden_size=5,
           quick=True),
    *_rows(CELLS, "unbatched", None, input_size=3, hidden_size=7, quick=True),
    *_rows(CELLS, "unbatched-h0-omitted", None, h0=False, features=OMITTED, input_size=4,
           hidden_size=7, quick=True),
    *_rows(CELLS, "no-bias", 2, input_size=4, hidden_size=5, bias=False, quick=True),
    *_rows(("rnn_cell",), "relu", 4, input_size=3, hidden_size=5, nonlinearity="relu"),
)

CONSTRUCTION_CASES: tuple[Case, ...] = (
    *_rows(SEQ, "single-layer", 4, 6, input_size=3, hidden_size=7, quick=True),
    *_rows(SEQ, "two-layer-bidirectional", 4, 6, input_size=3, hidden_size=7, num_layers=2,
           bidirectional=True, quick=True),
    *_rows(("lstm",), "projection", 4, 6, input_size=3, hidden_size=7, num_layers=2,
           bidirectional=True, proj_size=3, quick=True),
    *_rows(CELLS, "cell", 4, input_size=3, hidden_size=7, quick=True),
)

# Hidden 31, batch 8, 5 steps: 1240 dropout decisions between the two layers, enough for the
# rate test in `check_dropout`. p = 0.3, not 0.5, where p and the keep probability 1-p coincide.
DROPOUT_CASES: tuple[Case, ...] = (
    *_rows(SEQ, "dropout-0.3", 8, 5, h0=False, input_size=4, hidden_size=31, num_layers=2,
           dropout=0.3, quick=True),
    *_rows(SEQ, "dropout-0", 8, 5, h0=False, input_size=4, hidden_size=31, num_layers=2,
           dropout=0.0),
    *_rows(SEQ, "dropout-1", 8, 5, h0=False, input_size=4, hidden_size=31, num_layers=2,
           dropout=1.0),
    *_rows(SEQ, "dropout-single-layer", 8, 5, h0=False, input_size=4, hidden_size=31, dropout=0.3,
           quick=True),
)


PACKED = ("packed",)


def _packed(kinds, name, lengths, *, enforce_sorted=False, h0=True, quick=True, **config
            ) -> tuple[PackedCase, ...]:
    """One row of PACKED_CASES for each of `kinds`; h0=False rows are about omitting it too."""
    features = PACKED + (OMITTED if not h0 else ())
    return tuple(PackedCase(name, Config(kind, **config), len(lengths), max(lengths), h0, quick,
                            features, tuple(lengths), enforce_sorted) for kind in kinds)


PACKED_CASES: tuple[PackedCase, ...] = (
    *_packed(SEQ, "packed-single-layer", (4, 1, 6, 3), input_size=3, hidden_size=5),
    *_packed(SEQ, "packed-sorted-h0-omitted", (6, 4, 4, 1), enforce_sorted=True, h0=False,
             input_size=3, hidden_size=5),
    *_packed(SEQ, "packed-bidirectional", (2, 6, 1, 4), input_size=4, hidden_size=5,
             bidirectional=True),
    *_packed(SEQ, "packed-two-layer-bidirectional", (3, 5, 1), input_size=3, hidden_size=7,
             num_layers=2, bidirectional=True),
    *_packed(SEQ, "packed-batch-first", (2, 5, 1), h0=False, input_size=4, hidden_size=5,
             batch_first=True, quick=False),
    *_packed(("lstm",), "packed-projection-bidirectional", (4, 1, 5), input_size=3,
             hidden_size=7, num_layers=2, bidirectional=True, proj_size=4),
)


def select(table: tuple[Case, ...], kind: str, quick: bool = False) -> list[Case]:
    """The rows of `table` for `kind` (only the quick ones when `quick`)."""
    return [case for case in table if case.kind == kind and (case.quick or not quick)]
