"""Benchmark workloads as data: what to run, at which sizes, and which metrics to time.

A `Workload` is one module configuration of any kind the spec knows (`rnnbench.reference.kinds`:
torch.nn's, the implicit RNN's, a registered one) with a batch, a sequence length, a dtype, the
metrics to time and notes; its input shape, FLOPs and token count come from the kind's record. Named presets live in `presets/<name>.json`; users pass
their own file in the same format:

    {"description": "...", "notes": "...",
     "defaults": {"metrics": ["forward"], ...},          # merged into every workload
     "workloads": [{"name": "...", "config": {"kind": "rnn", "input_size": 8, "hidden_size": 8},
                    "batch": 4, "steps": 10}, ...]}

Metrics: "forward" (inference, under torch.no_grad), "forward_backward" (forward, then backward of
a fixed random output gradient, or of the classification loss when `classes` is set), and
"train_step" (forward_backward, then gradient clipping when `clip_norm` is set and an SGD step).
FLOPs follow the kind's record (matmuls only, `rnnbench.reference.forward_flops` for torch.nn's); a backward pass is counted as twice
its forward (the usual convention: gradients w.r.t. activations and w.r.t. weights each cost one
forward's matmuls), so metrics with a backward count three forwards.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields
from pathlib import Path

import numpy as np

from rnnbench.benchmarks.timing import MIN_SAMPLE_S
from rnnbench.errors import UsageError
from rnnbench.impls.base import DEVICE_FEATURES as DEVICES
from rnnbench.impls.base import DTYPE_FEATURES as DTYPES
from rnnbench.documents import read_json
from rnnbench.reference import ConfigError, kinds
from rnnbench.reference.kinds import KindSpec, kind_of

PRESET_DIR = Path(__file__).parent / "presets"
METRICS = ("forward", "forward_backward", "train_step")
RAGGED_KINDS = ("rnn", "lstm", "gru")  # the kinds that take variable-length (packed) sequences
BACKWARD_METRICS = ("forward_backward", "train_step")
# A backward pass costs two forwards' matmuls (activation gradients + weight gradients).
BACKWARD_FLOP_FACTOR = 2
# The most torch threads a workload or an option may ask for: far past any machine's cores, and
# far below what torch's set_num_threads overflows on.
MAX_THREADS = 1024
# The longest a sample may be asked to last: the calls of one sample are timed together, so a
# longer one only delays the next round.
MAX_SAMPLE_S = 60.0


@dataclass(frozen=True)
class Workload:
    """One benchmark workload.

    `device` and `threads` None mean "the run's" (the command line's). `vocab` feeds token ids
    through an embedding of that size into the module; `classes` puts a linear classifier with a
    cross-entropy loss on the time-averaged output. `budget_s` is the timing budget per
    implementation and metric (repeats stop once it is spent and `min_repeats` are taken);
    `min_sample_s` the shortest a sample may be (back-to-back calls are added until it is long
    enough that a scheduler tick or an interrupt is a small part of it).
    `ragged`: the sequences of the batch have the lengths `lengths` gives (the longest `steps`),
    handed over padded to `steps`, or, with `packed`, packed (torch.nn.utils.rnn) in each call.
    """

    name: str
    config: object
    batch: int
    steps: int = 1
    dtype: str = "float32"
    device: str | None = None
    threads: int | None = None
    metrics: tuple[str, ...] = ("forward", "forward_backward")
    vocab: int | None = None
    classes: int | None = None
    clip_norm: float | None = None
    budget_s: float = 0.5
    min_repeats: int = 7
    min_sample_s: float = MIN_SAMPLE_S
    ragged: bool = False
    packed: bool = False
    notes: str = ""

    @property
    def kind(self) -> str:
        return self.config.kind

    @property
    def spec(self) -> KindSpec:
        """What the spec says of this workload's kind (`rnnbench.reference.kinds`)."""
        return kind_of(self.config)

    @property
    def tokens(self) -> int:
        """Sequence elements processed per call: batch x steps (a cell does one step); the real
        ones, the sum of the lengths, for a ragged batch, padded or not."""
        if self.ragged:
            return sum(self.lengths)
        return self.spec.tokens(self.config, self.batch, self.steps)

    @property
    def lengths(self) -> tuple[int, ...] | None:
        """A ragged batch's sequence lengths (None otherwise): see `ragged_lengths`."""
        return ragged_lengths(self.batch, self.steps) if self.ragged else None

    def flops(self, metric: str, *, input_gemm: bool = True) -> int | None:
        """Matmul FLOPs of one call of `metric`; None where the spec has no count for the kind.

        `input_gemm=False` leaves out the input projection, as DeepBench's timings do.
        Embedding lookups and classifier heads are not counted: the FLOPs are the module's.
        A ragged batch counts no FLOPs (None): how many steps run depends on the implementation.
        """
        if self.ragged:
            return None
        forward = self.spec.flops(self.config, self.batch, self.steps, input_gemm)
        if forward is None:
            return None
        return forward * (1 + BACKWARD_FLOP_FACTOR) if metric in BACKWARD_METRICS else forward

    def input_shape(self) -> tuple[int, ...]:
        """Shape of the module's input; token-id inputs drop the feature axis."""
        shape = self.spec.io_shapes(self.config, self.batch, self.steps)["input"]
        return shape[:-1] if self.vocab else shape

    @property
    def sequence_output(self) -> bool:
        """Whether the module returns an output per step (time, batch, features) first, which
        an embedding in front and a classifier behind (`vocab`, `classes`) need."""
        shapes = self.spec.io_shapes(self.config, 2, 3)
        return len(shapes.get("output", ())) == 3

    def to_dict(self) -> dict:
        """A JSON-ready dict that `workload_from_dict` turns back into this workload."""
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        data["config"] = asdict(self.config)
        data["metrics"] = list(self.metrics)
        return data


# Sentence lengths are roughly log-normal; this one has its median at a quarter of the longest.
RAGGED_MEDIAN_FRACTION = 0.25
RAGGED_SIGMA = 0.6


def ragged_lengths(batch: int, steps: int, seed: int = 0) -> tuple[int, ...]:
    """`batch` lengths in 1..steps drawn from a seeded log-normal distribution (median a quarter
    of `steps`), the first exactly `steps` so that the padded length is `steps`."""
    rng = np.random.default_rng(seed)
    drawn = rng.lognormal(np.log(RAGGED_MEDIAN_FRACTION * steps), RAGGED_SIGMA, batch)
    lengths = np.clip(np.rint(drawn), 1, steps).astype(int)
    lengths[0] = steps
    return tuple(int(n) for n in lengths)


def config_from_dict(data: dict) -> object:
    """The config object `data` describes, by its kind (`rnnbench.reference.kinds`)."""
    return kinds.config_from_dict(data)


def workload_from_dict(data: dict, defaults: dict | None = None) -> Workload:
    """Build and validate one workload; ValueError with a one-line reason when it is invalid."""
    if not isinstance(data, dict):
        raise ValueError("a workload must be a JSON object")
    merged = {**(defaults or {}), **data}
    names = {f.name for f in fields(Workload)}
    unknown = sorted(set(merged) - names)
    if unknown:
        raise ValueError(f"unknown field {', '.join(map(repr, unknown))} (known: {', '.join(sorted(names))})")
    for required in ("name", "config", "batch"):
        if required not in merged:
            raise ValueError(f"missing field {required!r}")
    try:
        merged["config"] = config_from_dict(merged["config"])
    except (ConfigError, TypeError) as exc:
        raise ValueError(str(exc)) from None
    metrics = merged.get("metrics", Workload.metrics)
    if not isinstance(metrics, (list, tuple)) or not all(isinstance(m, str) for m in metrics):
        raise ValueError(f"metrics must be a non-empty list drawn from {', '.join(METRICS)}, "
                         f"got {metrics!r}")
    merged["metrics"] = tuple(metrics)
    if "steps" not in data and not kind_of(merged["config"]).steps_matter:
        merged.pop("steps", None)  # the file's default length is for its sequence kinds
    workload = Workload(**merged)
    problem = _problem(workload)
    if problem:
        raise ValueError(problem)
    return workload


def _problem(w: Workload) -> str | None:
    def positive_int(value) -> bool:
        return isinstance(value, int) and not isinstance(value, bool) and value > 0

    if not isinstance(w.name, str) or not w.name:
        return "name must be a non-empty string"
    for name in ("batch", "steps", "min_repeats"):
        if not positive_int(getattr(w, name)):
            return f"{name} must be a positive integer, got {getattr(w, name)!r}"
    for name in ("threads", "vocab", "classes"):
        value = getattr(w, name)
        if value is not None and not positive_int(value):
            return f"{name} must be a positive integer or null, got {value!r}"
    if w.threads is not None and w.threads > MAX_THREADS:
        return f"threads must be at most {MAX_THREADS}, got {w.threads}"
    if w.dtype not in DTYPES:
        return f"dtype must be one of {', '.join(DTYPES)}, got {w.dtype!r}"
    if w.device is not None and w.device not in DEVICES:
        return f"device must be one of {', '.join(DEVICES)} or null, got {w.device!r}"
    if not w.metrics or any(m not in METRICS for m in w.metrics):
        return f"metrics must be a non-empty list drawn from {', '.join(METRICS)}, got {list(w.metrics)}"
    if w.clip_norm is not None and not (isinstance(w.clip_norm, (int, float)) and w.clip_norm > 0):
        return f"clip_norm must be a positive number or null, got {w.clip_norm!r}"
    for name in ("budget_s", "min_sample_s"):
        value = getattr(w, name)
        if not (isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0
                and math.isfinite(value)):
            return f"{name} must be a positive finite number, got {value!r}"
    if w.min_sample_s > MAX_SAMPLE_S:
        return f"min_sample_s must be at most {MAX_SAMPLE_S:g} s, got {w.min_sample_s!r}"
    if (w.vocab or w.classes) and not w.sequence_output:
        return "vocab and classes apply to kinds whose output is a sequence (time, batch, features)"
    if not (isinstance(w.ragged, bool) and isinstance(w.packed, bool)):
        return "ragged and packed must be true or false"
    if w.packed and not w.ragged:
        return "packed applies to ragged workloads"
    if w.ragged and (w.kind not in RAGGED_KINDS or w.vocab or w.classes):
        return f"ragged applies to the kinds {', '.join(RAGGED_KINDS)}, without vocab or classes"
    if w.steps != 1 and not w.spec.steps_matter:
        return (f"steps applies to kinds that take a sequence; {w.kind} takes one step, "
                f"got {w.steps}")
    return None


def preset_names() -> list[str]:
    """Names of the presets shipped with rnnbench."""
    return sorted(p.stem for p in PRESET_DIR.glob("*.json"))


def preset_path(name: str) -> Path:
    """The file of the shipped preset `name`."""
    return PRESET_DIR / f"{name}.json"


def load_workloads(preset: str | None = None, path: str | None = None) -> list[Workload]:
    """The workloads of a named preset, or of a user's workload file (exactly one of the two).

    Raises UsageError with a one-line message for an unknown preset or a bad file.
    """
    if (preset is None) == (path is None):
        raise UsageError("give either a preset name or a workload file, not both or neither")
    if preset is not None:
        if preset not in preset_names():
            raise UsageError(f"unknown preset {preset!r} (known: {', '.join(preset_names())})")
        path = preset_path(preset)
    return _read_file(Path(path))


def _read_file(path: Path) -> list[Workload]:
    data = read_json(path, what="workload file")
    if not isinstance(data, dict) or not isinstance(data.get("workloads"), list) or not data["workloads"]:
        raise UsageError(f"{path}: expected an object with a non-empty 'workloads' list")
    defaults = data.get("defaults", {})
    if not isinstance(defaults, dict):
        raise UsageError(f"{path}: 'defaults' must be an object")
    workloads = []
    for index, entry in enumerate(data["workloads"]):
        label = entry.get("name", f"#{index}") if isinstance(entry, dict) else f"#{index}"
        try:
            workloads.append(workload_from_dict(entry, defaults))
        except ValueError as exc:
            raise UsageError(f"{path}: workload {label}: {exc}") from None
    names = [w.name for w in workloads]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise UsageError(f"{path}: duplicate workload names {', '.join(duplicates)}")
    return workloads
