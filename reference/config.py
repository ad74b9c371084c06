"""The configuration of one recurrent module, as torch.nn's constructors take it.

A `Config` is a frozen value that validates itself on construction. Everything else in the
spec (parameter names and shapes, init distributions, expected shapes, FLOPs) is a pure
function of a Config.
"""
from __future__ import annotations

from dataclasses import dataclass, fields, replace

CELL_KINDS = ("rnn_cell", "lstm_cell", "gru_cell")
SEQUENCE_KINDS = ("rnn", "lstm", "gru")
KINDS = CELL_KINDS + SEQUENCE_KINDS
NONLINEARITIES = ("tanh", "relu")

# Rows of the stacked gate matrices, in torch.nn's order: LSTM i,f,g,o; GRU r,z,n.
GATES = {"rnn": ("h",), "lstm": ("i", "f", "g", "o"), "gru": ("r", "z", "n")}


class ConfigError(ValueError):
    """A Config that torch.nn would refuse to construct."""


@dataclass(frozen=True)
class Config:
    """One module's constructor arguments, named as torch.nn names them.

    `kind` is one of KINDS. Cell kinds ignore the sequence-only options, which must keep
    their defaults. `nonlinearity` applies to the Elman kinds only.
    """

    kind: str
    input_size: int
    hidden_size: int
    num_layers: int = 1
    nonlinearity: str = "tanh"
    bias: bool = True
    batch_first: bool = False
    dropout: float = 0.0
    bidirectional: bool = False
    proj_size: int = 0

    def __post_init__(self) -> None:
        problem = _problem(self)
        if problem:
            raise ConfigError(f"invalid {self.kind!r} config: {problem}")

    @property
    def family(self) -> str:
        """The recurrence without the cell/sequence distinction: 'rnn', 'lstm' or 'gru'."""
        return self.kind.removesuffix("_cell")

    @property
    def is_cell(self) -> bool:
        return self.kind in CELL_KINDS

    @property
    def gates(self) -> tuple[str, ...]:
        return GATES[self.family]

    @property
    def num_directions(self) -> int:
        return 2 if self.bidirectional else 1

    @property
    def output_size(self) -> int:
        """Width of h per direction: proj_size for a projected LSTM, hidden_size otherwise."""
        return self.proj_size or self.hidden_size

    def layer_input_size(self, layer: int) -> int:
        return self.input_size if layer == 0 else self.output_size * self.num_directions

    def constructor_kwargs(self) -> dict:
        """Keyword arguments for the torch.nn-like constructor of this kind."""
        kwargs = {"input_size": self.input_size, "hidden_size": self.hidden_size, "bias": self.bias}
        if self.family == "rnn":
            kwargs["nonlinearity"] = self.nonlinearity
        if not self.is_cell:
            kwargs.update(num_layers=self.num_layers, batch_first=self.batch_first,
                          dropout=self.dropout, bidirectional=self.bidirectional)
            if self.family == "lstm":
                kwargs["proj_size"] = self.proj_size
        return kwargs

    def replace(self, **changes) -> "Config":
        return replace(self, **changes)

    def describe(self) -> str:
        """A short human-readable label listing the non-default options."""
        defaults = {f.name: f.default for f in fields(self) if f.name not in
                    ("kind", "input_size", "hidden_size")}
        extras = [f"{k}={getattr(self, k)}" for k, v in defaults.items() if getattr(self, k) != v]
        return " ".join([f"{self.kind}({self.input_size}->{self.hidden_size})", *extras])


def _problem(cfg: Config) -> str | None:
    if cfg.kind not in KINDS:
        return f"kind must be one of {', '.join(KINDS)}"
    for name in ("input_size", "hidden_size"):
        value = getattr(cfg, name)
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            return f"{name} must be a positive integer, got {value!r}"
    if cfg.nonlinearity not in NONLINEARITIES:
        return f"nonlinearity must be 'tanh' or 'relu', got {cfg.nonlinearity!r}"
    if cfg.family != "rnn" and cfg.nonlinearity != "tanh":
        return "nonlinearity applies to the Elman kinds only"
    if not isinstance(cfg.num_layers, int) or cfg.num_layers < 1:
        return f"num_layers must be a positive integer, got {cfg.num_layers!r}"
    for name in ("bias", "batch_first", "bidirectional"):
        if not isinstance(getattr(cfg, name), bool):
            return f"{name} must be True or False, got {getattr(cfg, name)!r}"
    # A bool is an int to Python but not a probability to torch.
    if (not isinstance(cfg.dropout, (int, float)) or isinstance(cfg.dropout, bool)
            or not 0.0 <= cfg.dropout <= 1.0):
        return f"dropout must be a number in [0, 1], got {cfg.dropout!r}"
    if not isinstance(cfg.proj_size, int) or isinstance(cfg.proj_size, bool) or cfg.proj_size < 0:
        return f"proj_size must be an integer >= 0, got {cfg.proj_size!r}"
    if cfg.proj_size and cfg.family != "lstm":
        return "proj_size is an LSTM option"
    if cfg.proj_size >= cfg.hidden_size:
        return f"proj_size ({cfg.proj_size}) must be smaller than hidden_size ({cfg.hidden_size})"
    if cfg.is_cell and (cfg.num_layers != 1 or cfg.batch_first or cfg.dropout
                        or cfg.bidirectional or cfg.proj_size):
        return "cells take no num_layers, batch_first, dropout, bidirectional or proj_size"
    return None
