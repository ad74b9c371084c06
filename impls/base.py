"""The implementation contract.

An implementation of a kind is a constructor with torch.nn's signature for that kind (e.g.
`torch.nn.RNN(input_size, hidden_size, num_layers=1, nonlinearity='tanh', bias=True,
batch_first=False, dropout=0.0, bidirectional=False, device=None, dtype=None)`) returning an
`nn.Module` whose `forward` and `state_dict` follow torch.nn. An `Implementation` groups the
kinds one implementation provides and declares the features it does not support, so the checks
that need them are reported as not supported rather than failed.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from rnnbench.errors import IMPORT_FAILURES, one_line
from rnnbench.impls.adapt import adapt
from rnnbench.reference.kinds import kind_of

# Features an implementation may declare unsupported. Configuration features are derived from a
# Config by `required_features`; dtypes and devices are named as torch names them.
CONFIG_FEATURES = ("num_layers", "bidirectional", "batch_first", "proj_size", "no_bias", "relu",
                   "dropout", "unbatched")
DTYPE_FEATURES = ("float64", "float32", "float16", "bfloat16")
DEVICE_FEATURES = ("cpu", "cuda")
# How the module is called: an initial state given, the state omitted (hx=None), the
# constructor's device=/dtype= arguments (torch calls these factory kwargs), variable-length
# sequences handed over as a torch.nn.utils.rnn.PackedSequence (sequence kinds only), and the
# final state returned beside the output.
CALL_FEATURES = ("initial_state", "optional_state", "factory_kwargs", "packed", "final_state")
OTHER_FEATURES = ("backward",)
FEATURES = CONFIG_FEATURES + DTYPE_FEATURES + DEVICE_FEATURES + CALL_FEATURES + OTHER_FEATURES


def required_features(cfg, *, batched: bool = True, dtype: str = "float32",
                      device: str = "cpu", backward: bool = False, extra=()) -> list[str]:
    """The features running `cfg` this way needs, in FEATURES order; `extra` adds features the
    caller knows it needs (e.g. "optional_state" for a call with hx=None that tests exactly that).

    The configuration features are what the kind's spec record says of `cfg`
    (`rnnbench.reference.kinds`: torch.nn's kinds name theirs, the implicit model's none)."""
    needed = {dtype: True, device: True, "backward": backward, "unbatched": not batched,
              **dict.fromkeys(extra, True), **kind_of(cfg).features(cfg)}
    return [f for f in FEATURES if needed.get(f)]


def always_available() -> str | None:
    return None


@dataclass(frozen=True)
class Implementation:
    """One implementation: its constructors per kind and what it does not support.

    `availability` returns None when the implementation can run here, else the reason it cannot
    (e.g. "needs a CUDA GPU"); it is called lazily because finding out can be slow.
    """

    name: str
    kinds: Mapping[str, Callable]
    description: str = ""
    unsupported: frozenset[str] = frozenset()
    availability: Callable[[], str | None] = field(default=always_available, compare=False)
    # The module's state_dict key -> the spec's parameter name, where the two differ and the
    # automatic mapping (rnnbench.suites.parammap) should not guess.
    param_map: Mapping[str, str] = field(default_factory=dict, compare=False)
    # Check pattern -> reason: failures the implementation knows of (rnnbench.suites.known).
    known_failures: Mapping[str, str] = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        unknown = set(self.unsupported) - set(FEATURES)
        if unknown:
            raise ValueError(f"{self.name}: unknown features {sorted(unknown)}; known: {FEATURES}")

    def constructor(self, kind: str) -> Callable:
        """The constructor of `kind`, called as torch.nn's (`rnnbench.impls.adapt`: the user's
        own when it takes torch.nn's arguments); KeyError if this implementation lacks it."""
        try:
            return adapt(kind, self.kinds[kind])
        except KeyError:
            raise KeyError(f"{self.name} provides no {kind!r} (it provides {', '.join(self.kinds)})") from None

    def unsupported_reasons(self, kind: str) -> dict[str, str]:
        """Every feature `kind` lacks, with the reason: declared by the implementation, or found
        in its constructor's and forward's signatures (see `rnnbench.impls.adapt`)."""
        reasons = {}
        if kind in self.kinds:
            reasons.update(getattr(self.constructor(kind), "unsupported", {}))
        reasons.update({f: f"{self.name} declares it unsupported" for f in self.unsupported})
        return reasons

    def unavailable_reason(self) -> str | None:
        """None when this implementation can run here, else why not. An availability check that
        raises makes that the reason: finding out must never crash the harness. A check that
        finds the implementation unavailable is asked once more, and only its second answer
        counts: under load, with other threads importing at the same moment, an import in the
        check failed once where nothing was missing (`rnnbench run` beside two busy loops:
        compile "not usable here: No module named 'cProfile'", torch._dynamo's import of the
        standard library's profiler)."""
        return self._availability() and self._availability()

    def _availability(self) -> str | None:
        try:
            return self.availability()
        except IMPORT_FAILURES as exc:
            return f"availability check failed: {one_line(exc)}"

    def missing_features(self, cfg, **how) -> list[str]:
        """The features `cfg` run this way (see `required_features`) needs that are unsupported."""
        reasons = self.unsupported_reasons(cfg.kind)
        needed = set(required_features(cfg, **how))
        if cfg.kind in self.kinds:  # arguments a constructor does not take cannot be asked for
            needed.update(getattr(self.constructor(cfg.kind), "features_needed", lambda c: [])(cfg))
        return [f for f in FEATURES if f in needed and f in reasons]
