"""torch.nn's six kinds in the suites: their case tables, the checks only this family has, and the
hooks that explain a failure, registered with `register_kind` like any other kind.

Cases: every kind has every combination of batched/unbatched input with the initial state
given/omitted (tests/test_suites.py checks it). Sizes are chosen so that symmetric setups cannot
hide a bug: batch, steps, input and hidden sizes all differ (a transposed batch_first or a W used
transposed then fails loudly or numerically), and hidden sizes (5, 7, 31) are multiples of
neither the LSTM's 4 nor the GRU's 3 gates (a gate split by chunk size instead of chunk count
then goes wrong). One case per kind deliberately has input_size == hidden_size, the only way
feeding the raw input to every layer goes unnoticed by the shapes, and one a batch of one, the
size `.squeeze()` breaks. Four tables:
- CASES: the general cases (shapes, numerics, gradients, state, errors, inputs, copies);
- CONSTRUCTION_CASES: configurations whose construction is examined (init, dtype kwarg, invalid
  arguments), single-layer ones included, so an implementation without num_layers or
  bidirectional still has its init checked;
- DROPOUT_CASES: two-layer sequences with dropout, run in training and eval mode;
- PACKED_CASES: variable-length sequences handed over as a PackedSequence (`PackedCase`: the
  lengths, and whether the packing sorts them). Lengths differ, include 1, and are not sorted
  unless the row packs with enforce_sorted=True, so a state taken at the padded end, a reverse
  direction started in the padding or a batch order lost in the sorting all show.

The family's own checks: both biases, the dtype/device constructor arguments, defaults, invalid
constructor arguments, variable-length (packed) input, state carry-over, dropout. Its hooks:
parameters found by role (`param_roles`), a missing bias held at zero, torch.nn's return
structure, where a forward first diverges (`divergence`) and the named mistakes (`diagnoses`).
"""
from __future__ import annotations

import dataclasses
import itertools
import re
import warnings
from functools import partial

import numpy as np
import torch

from rnnbench.errors import one_line, raised_at
from rnnbench.impls.adapt import ARGUMENT_FEATURES, torch_signature, zero_state
from rnnbench.reference import (CELL_KINDS, KINDS, SEQUENCE_KINDS, Config, Uniform, io_shapes)
from rnnbench.reference.kinds import KINDS as SPECS
from rnnbench.reference.numerics import output_names
from rnnbench.suites import (check_construction, check_dropout, check_packed, check_state,
                             param_roles)
from rnnbench.suites.cases import OMITTED, Case, PackedCase
from rnnbench.suites.check_construction import InvalidArgument
from rnnbench.suites.check_errors import INPUT_DTYPE, WRONG_INPUTS
from rnnbench.suites.compare import SAMPLE_VALUES, first_mismatch, identical
from rnnbench.suites.diagnoses import diagnose, final_state_mismatch, output_sequence
from rnnbench.suites.features import refused_configuration
from rnnbench.suites.divergence import locate
from rnnbench.suites.kinds import SuiteKind, register_kind
from rnnbench.suites.layers import blocks, is_batched, time_major
from rnnbench.suites.results import Finding
from rnnbench.suites.run import (Run, describe_structure, listed_final_state, past_extra_values,
                                 state_flat, steps_listed)
from rnnbench.suites.statistics import fits, sample_fit
from rnnbench.suites.subject import call, own_dtype, state_shapes, to_numpy

# --- the cases ----------------------------------------------------------------------------------


def _rows(kinds, name, batch, steps=1, *, h0=True, quick=False, features=(), only=(),
          adjust=None, tolerance_scale=1.0, **config) -> tuple[Case, ...]:
    """One row of a table, for each of `kinds`."""
    return tuple(Case(name, Config(kind, **config), batch, steps, h0, quick, features, only,
                      adjust, tolerance_scale) for kind in kinds)


SEQ, CELLS = SEQUENCE_KINDS, CELL_KINDS
# The saturated rows' input scale: gate pre-activations in the thousands, past where exp
# overflows (at 11 in float16, 89 in float32, 710 in float64), where torch.nn's tanh and
# sigmoid are their limits and a tanh written with exp, (e^a - e^-a) / (e^a + e^-a), is
# inf / inf = NaN; and within float16's range. The tolerance grows with it: a pre-activation
# that cancels to near zero keeps the rounding error of its thousands-large terms.
SATURATING = 3000.0


def _saturating(params, x):
    return params, SATURATING * x


# The long-memory row's push on the input and forget gates' pre-activations: both gates held
# near one, so that the cell state adds up a candidate of one sign from step to step.
OPEN_GATES = 6.0


def _long_memory(params, x):
    """One input, three times a drawn one, at every step and in every batch row, and the LSTM's
    input and forget gates held open by their input weights (their rows given OPEN_GATES along
    that input, so a module without biases has them open too): its cell state grows to
    several times what one step reaches, where a clipped cell state parts from torch.nn's. One
    layer, time-major."""
    held = 3.0 * x[0, 0]
    weight = params["weight_ih_l0"].copy()
    weight[:2 * (len(weight) // 4)] += OPEN_GATES * held / held.dot(held)
    return {**params, "weight_ih_l0": weight}, np.broadcast_to(held, x.shape).copy()


CASES: tuple[Case, ...] = (
    *_rows(SEQ, "single-layer", 4, 6, input_size=3, hidden_size=5, quick=True),
    *_rows(SEQ, "h0-omitted", 2, 4, h0=False, features=OMITTED, input_size=3, hidden_size=5,
           quick=True),
    *_rows(SEQ, "two-layer-bidirectional", 4, 6, input_size=3, hidden_size=5, num_layers=2,
           bidirectional=True, quick=True),
    # Each layer and direction starts from zeros: not from the layer below's final state. (The
    # sizes of the row above, whose graphs torch.compile then shares.)
    *_rows(SEQ, "two-layer-bidirectional-h0-omitted", 4, 6, h0=False, features=OMITTED,
           only=("forward",), input_size=3, hidden_size=5, num_layers=2, bidirectional=True,
           quick=True),
    *_rows(SEQ, "batch-first", 3, 5, input_size=4, hidden_size=7, batch_first=True, quick=True),
    *_rows(SEQ, "unbatched", None, 7, input_size=3, hidden_size=5, quick=True),
    *_rows(SEQ, "unbatched-h0-omitted", None, 5, h0=False, features=OMITTED, input_size=4,
           hidden_size=7),
    *_rows(SEQ, "unbatched-bidirectional-batch-first", None, 6, h0=False, input_size=3,
           hidden_size=5, bidirectional=True, batch_first=True),
    *_rows(SEQ, "three-layer-square", 2, 4, input_size=5, hidden_size=5, num_layers=3, quick=True),
    *_rows(SEQ, "no-bias", 2, 4, input_size=3, hidden_size=7, num_layers=2, bias=False, quick=True),
    # Each constructor feature alone in a row too: a module that takes it but not num_layers
    # (nor batch_first, nor packed input) is still asked for it. (Each at the sizes of a row
    # with more layers, whose first layer's graphs torch.compile then shares.)
    *_rows(SEQ, "bidirectional", 4, 6, input_size=3, hidden_size=5, bidirectional=True,
           quick=True),
    *_rows(SEQ, "no-bias-single-layer", 2, 4, input_size=3, hidden_size=7, bias=False,
           quick=True),
    *_rows(SEQ, "single-step", 5, 1, input_size=3, hidden_size=7),
    # A batch of one: what .squeeze() breaks, and single-sample inference runs.
    *_rows(SEQ, "batch-of-one", 1, 4, input_size=3, hidden_size=5, quick=True),
    # A squeeze of the reverse direction's or an upper layer's state breaks there alone.
    *_rows(SEQ, "two-layer-bidirectional-batch-of-one", 1, 6, only=("forward",), input_size=3,
           hidden_size=5, num_layers=2, bidirectional=True, quick=True),
    *_rows(("rnn",), "relu", 4, 6, input_size=3, hidden_size=5, num_layers=2, nonlinearity="relu"),
    *_rows(("rnn",), "relu-single-layer", 4, 6, input_size=3, hidden_size=5, nonlinearity="relu"),
    *_rows(SEQ, "saturated", 4, 6, only=("forward",), adjust=_saturating,
           tolerance_scale=SATURATING, input_size=3, hidden_size=5, quick=True),
    # (The single-layer row's sizes, and a length of whole chunks of four steps: torch.compile
    # shares that row's graphs.)
    *_rows(("lstm",), "long-memory", 4, 12, only=("forward",), adjust=_long_memory,
           input_size=3, hidden_size=5, quick=True),
    *_rows(("lstm",), "projection-bidirectional", 2, 5, input_size=3, hidden_size=7, num_layers=2,
           bidirectional=True, proj_size=4, quick=True),
    # The form from-scratch projections take: one layer, one direction.
    *_rows(("lstm",), "projection", 2, 5, input_size=3, hidden_size=7, proj_size=4, quick=True),
    # The omitted state of a projected stack is (layers * directions, batch, proj_size) for h.
    *_rows(("lstm",), "projection-h0-omitted", 3, 5, h0=False, features=OMITTED, input_size=4,
           hidden_size=6, num_layers=2, bidirectional=True, proj_size=2),
    *_rows(CELLS, "batched", 4, input_size=3, hidden_size=5, quick=True),
    *_rows(CELLS, "h0-omitted", 2, h0=False, features=OMITTED, input_size=3, hidden_size=5,
           quick=True),
    *_rows(CELLS, "unbatched", None, input_size=3, hidden_size=7, quick=True),
    *_rows(CELLS, "unbatched-h0-omitted", None, h0=False, features=OMITTED, input_size=4,
           hidden_size=7, quick=True),
    *_rows(CELLS, "no-bias", 2, input_size=4, hidden_size=5, bias=False, quick=True),
    *_rows(CELLS, "batch-of-one", 1, input_size=3, hidden_size=5, quick=True),
    *_rows(("rnn_cell",), "relu", 4, input_size=3, hidden_size=5, nonlinearity="relu"),
    *_rows(CELLS, "saturated", 4, only=("forward",), adjust=_saturating,
           tolerance_scale=SATURATING, input_size=3, hidden_size=5, quick=True),
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
                            features, lengths=tuple(lengths), enforce_sorted=enforce_sorted)
                 for kind in kinds)


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

INVALID_ARGUMENTS = (
    InvalidArgument("hidden_size=-1", lambda cfg: {"hidden_size": -1}, KINDS),
    # torch.nn's cells accept hidden_size=0 (an empty module); its sequence modules do not.
    InvalidArgument("hidden_size=0", lambda cfg: {"hidden_size": 0}, SEQUENCE_KINDS),
    InvalidArgument("num_layers=0", lambda cfg: {"num_layers": 0}, SEQUENCE_KINDS),
    InvalidArgument("dropout=-0.1", lambda cfg: {"dropout": -0.1}, SEQUENCE_KINDS),
    InvalidArgument("dropout=1.5", lambda cfg: {"dropout": 1.5}, SEQUENCE_KINDS),
    InvalidArgument("nonlinearity='gelu'", lambda cfg: {"nonlinearity": "gelu"}, ("rnn", "rnn_cell"),
                    at_forward=True),
    InvalidArgument("proj_size=-1", lambda cfg: {"proj_size": -1}, ("lstm",)),
    InvalidArgument("proj_size=hidden_size", lambda cfg: {"proj_size": cfg.hidden_size}, ("lstm",)),
)


# The probe's projection size for an LSTM with one: unlike input and hidden, and with input + it
# unlike hidden, so that shapes still tell the blocks apart (a matrix over [x, h] among them).
_PROBE_PROJECTION = 1


def role_probe(cfg: Config) -> Config:
    """The probe parameter roles are learnt on for `cfg`: `probe_config`'s sizes, with the options
    of `cfg` that decide which parameters exist (a projection) or whether the module can be
    built at all (a module may take batch_first=True only)."""
    probe = probe_config(cfg.kind)
    if cfg.is_cell:
        return probe
    return probe.replace(batch_first=cfg.batch_first,
                         proj_size=_PROBE_PROJECTION if cfg.proj_size else 0)


def probe_config(kind: str) -> Config:
    """The configuration parameter roles are learnt on and features probed with: one layer and
    direction, input != hidden and hidden not a multiple of the gate count, so that shapes tell
    the blocks apart."""
    return Config(kind, 3, 5)


# --- drawn cases for --fuzz -------------------------------------------------------------------

MAX_SIZE = 6
MAX_LAYERS = 3
MAX_STEPS = 6
MAX_BATCH = 4


def case_strategy(kind: str):
    """Cases of `kind`: a valid Config with small sizes, a batch (or none) and a length."""
    from hypothesis import strategies as st

    size = st.integers(1, MAX_SIZE)
    cell = kind in CELL_KINDS

    @st.composite
    def cases(draw) -> Case:
        options = {"bias": draw(st.booleans())}
        if kind.startswith("rnn"):
            options["nonlinearity"] = draw(st.sampled_from(("tanh", "relu")))
        hidden = draw(size)
        if not cell:
            options.update(num_layers=draw(st.integers(1, MAX_LAYERS)),
                           bidirectional=draw(st.booleans()), batch_first=draw(st.booleans()))
            if kind == "lstm" and hidden > 1:
                options["proj_size"] = draw(st.integers(0, hidden - 1))
        config = Config(kind, draw(size), hidden, **options)
        batch = draw(st.one_of(st.none(), st.integers(1, MAX_BATCH)))
        h0 = draw(st.booleans())
        steps = 1 if cell else draw(st.integers(1, MAX_STEPS))
        return Case("fuzzed", config, batch, steps, h0, features=() if h0 else OMITTED)

    return cases()


# --- where the parameters are ----------------------------------------------------------------

# (constructor, probe, device) -> the roles of its state_dict keys and how to read them, or why
# they are unknown.
_ROLES: dict[tuple, tuple[dict, param_roles.Reading] | param_roles.MappingError] = {}


def inferred_map(subject, cfg: Config, shapes: dict[str, tuple]):
    """The parameter map of a module that names or lays out its parameters its own way: roles
    learnt once per process on the probe module, applied to `cfg`'s keys. A projection's role
    comes from a probe that has one, the others' from one without: a module that ignores
    proj_size is then read as lacking its projection, not as unreadable."""
    learnt = _roles(subject, role_probe(cfg.replace(proj_size=0)))
    if isinstance(learnt, param_roles.MappingError):
        raise learnt
    roles, reading = learnt
    projected = _roles(subject, role_probe(cfg), settle=False) if cfg.proj_size else None
    if isinstance(projected, tuple):
        roles = {**roles, **{name: role for name, role in projected[0].items()
                             if role[0] == "weight_hr"}}
    return param_roles.resolve(cfg, shapes, roles, reading)


def _roles(subject, probe: Config, settle: bool = True
           ) -> tuple[dict, param_roles.Reading] | param_roles.MappingError:
    """The roles learnt on `probe` for the subject's constructor and, where `settle`, their
    reading (once per process), or why they cannot be."""
    key = (subject.impl.kinds[subject.kind], probe, subject.device)
    if key not in _ROLES:
        try:
            module = subject.construct(probe)
            roles = param_roles.learn_roles(probe, state_shapes(module), _linear_weights(module),
                                            _norm_parameters(module),
                                            _keys_of(module, list(module.buffers())))
        except param_roles.MappingError as exc:
            _ROLES[key] = exc
        except Finding as finding:  # the probe's configuration, not the case's, was refused
            _ROLES[key] = param_roles.MappingError(
                f"built as {probe.describe()} to tell its parameters apart, {finding.message}")
        else:
            _ROLES[key] = (roles, param_roles.Reading())
            if settle:
                _settle_reading(subject, probe, key, roles)
    return _ROLES[key]


def _linear_weights(module: torch.nn.Module) -> frozenset[str]:
    """The state_dict keys of the module's nn.Linear weights (found by identity, whatever
    wrappers name them)."""
    return _keys_of(module, [m.weight for m in module.modules() if isinstance(m, torch.nn.Linear)])


# torch's normalisation layers: LayerNorm, GroupNorm, RMSNorm, the batch and instance norms.
_NORMS = (torch.nn.LayerNorm, torch.nn.GroupNorm, torch.nn.RMSNorm,
          torch.nn.modules.batchnorm._NormBase)
# A class of the module's own (or a scripted one, whose type is RecursiveScriptModule) named as
# one: LayerNorm, RMSNorm, BatchNorm1d, LayerNormalization; not a class that has a norm inside
# (GRUCellLayerNorm), nor a weight or spectral norm, which wraps a weight of the recurrence.
_NORM_NAME = re.compile(r"(Layer|RMS|Batch|Group|Instance)?(Norm(\dd)?|Normali[sz]ation)")


def _norm_parameters(module: torch.nn.Module) -> frozenset[str]:
    """The state_dict keys of the module's normalisation layers' gains and shifts (and running
    statistics), found by identity."""
    def is_norm(layer) -> bool:
        name = getattr(layer, "original_name", None) or type(layer).__name__
        return isinstance(layer, _NORMS) or _NORM_NAME.fullmatch(name) is not None
    return _keys_of(module, [t for m in module.modules() if m is not module and is_norm(m)
                             for t in (*m.parameters(recurse=False), *m.buffers(recurse=False))])


def _keys_of(module: torch.nn.Module, tensors: list) -> frozenset[str]:
    ids = {id(t) for t in tensors}
    state = call("state_dict()", module.state_dict, keep_vars=True)
    return frozenset(key for key, value in state.items() if id(value) in ids)


def _settle_reading(subject, probe: Config, key: tuple, roles: dict) -> None:
    """The reading of the roles (`param_roles.readings`: [x, h] or [h, x], the gates' order in a
    stacked matrix of the module's own) that shapes cannot tell: the first, torch.nn's, unless
    the probe's outputs are not the reference's under it and are under another. These are
    storage choices of a module whose names are its own; the checks then judge it read that way
    (torch.nn's way where none fits). Where no reading could even be loaded into the probe, the
    reading is unknown (MappingError): a case that runs all the same (one without biases) would
    otherwise be judged under a reading nothing confirmed."""
    candidates = param_roles.readings(probe, roles)
    if len(candidates) == 1:
        return
    outcomes = []
    # With a state first, then (where that fits no reading) with zeros for it: a module that
    # mishandles a given state (ignores c0) still shows how its parameters are stored.
    given = (True, False) if subject.takes_state else (False,)
    try:
        for with_state, reading in itertools.product(given, candidates):
            _ROLES[key] = (roles, reading)
            outcomes.append(_probe_outcome(subject, probe, with_state))
            if outcomes[-1] is True:
                return
    finally:
        if not outcomes or outcomes[-1] is not True:  # nothing fitted, or interrupted
            _ROLES[key] = (roles, dataclasses.replace(candidates[0], confirmed=False))
    if all(isinstance(outcome, Finding) for outcome in outcomes):
        _ROLES[key] = param_roles.MappingError(
            f"the probe module could not hold the spec's parameters read any way its layout "
            f"allows ({outcomes[0].message})")


def _probe_outcome(subject, probe: Config, with_state: bool) -> bool | Finding:
    """A module of `probe`, read through the roles learnt so far, given float32 parameters,
    inputs of batch 2 (3 steps for a sequence) and, where it takes one, a random state
    (`with_state`) or zeros: True when its outputs' values are the reference's (in whatever
    dtype: how the parameters are stored is asked, not the contract), or its output sequence
    is when handed the input batch-first (`_batch_first_output`; zeros are then left to the
    module, which may shape its state its own way), False when they are not or forward raised,
    the Finding when the parameters could not be loaded."""
    case = Case("roles", probe, 2, 3, h0=subject.takes_state)
    try:
        run = Run(subject, case, "float32", "roles")
    except Finding as finding:
        return finding
    hx64 = run.hx64 if with_state or run.hx64 is None else {
        name: np.zeros_like(value) for name, value in run.hx64.items()}
    x, _ = run.tensors()
    hx = None if hx64 is None else {name: subject.tensor(value, run.dtype)
                                    for name, value in hx64.items()}
    expected, tol = run.expected(hx=hx64), run.tolerance()
    try:
        outputs = flatten_result(probe, run.subject_call(x, hx))
    except Finding:
        outputs = {}
    observed = {name: to_numpy(t) for name, t in outputs.items()}
    if observed and all(np.shape(value) == np.shape(expected[name])
                        for name, value in observed.items()):
        if first_mismatch(observed, expected, tol) is None:
            return True
    return _batch_first_output(run, x, hx if with_state else None, expected, tol)


def _batch_first_output(run, x, hx, expected: dict, tol) -> bool:
    """Whether a sequence module asked time-major answers with the reference's output sequence
    when handed the input batch-first: one that always reads (N, L, I) shows so how its
    parameters are stored (its final state, often shaped its own way, aside), and the checks
    then name that reading (`always_batch_first`)."""
    cfg = run.cfg
    if cfg.is_cell or cfg.batch_first:
        return False
    try:
        result = run.subject_call(x.transpose(0, 1), hx)
    except Finding:
        return False
    output = output_sequence(result)
    if output is None:
        return False
    seen = to_numpy(output).swapaxes(0, 1)
    return (seen.shape == expected["output"].shape
            and first_mismatch({"output": seen}, {"output": expected["output"]}, tol) is None)


def biases(cfg: Config) -> tuple[str, ...]:
    """The parameters a module may lack and the checks hold at zero: a bias (a missing weight is
    a missing layer); `check_construction.check_biases` reports them."""
    return tuple(name for name, block in blocks(cfg).items() if block.startswith("bias"))


def summed_biases(cfg: Config) -> dict[str, str]:
    """Each bias -> the one the function adds it to: b_ih + b_hh in every gate, except in the
    GRU, whose b_hn is scaled by the reset gate (there one bias cannot stand for both)."""
    if cfg.family == "gru":
        return {}
    return {name: name.replace("_ih", "_hh") if "_ih" in name else name.replace("_hh", "_ih")
            for name in biases(cfg)}


# --- torch.nn's return structure -------------------------------------------------------------

def _pair(value) -> bool:
    """Whether a returned value is a tuple or list of two."""
    return isinstance(value, (tuple, list)) and len(value) == 2


def flatten_result(cfg: Config, result) -> dict[str, torch.Tensor]:
    """torch.nn's return structure ((output, h_n), (output, (h_n, c_n)), h, (h, c)) as tensors
    keyed by output name; Finding when it is not that. A lone tensor where torch.nn returns
    more is taken as the first output alone: the final state is then what the module lacks
    (`probe_final_state`), and the rest is judged as usual. An output sequence returned as a
    list of steps is stacked, so is a final state listed per layer and direction, and a cell's
    state is read out of a tuple (`_cell_state`), and an LSTM's (output, h_n, c_n) is read as
    (output, (h_n, c_n)), and Nones after torch.nn's two values are dropped: the
    `output-structure` check holds those against the drop-in level."""
    if isinstance(result, torch.Tensor) and len(output_names(cfg)) > 1:
        return {output_names(cfg)[0]: result}
    result = past_extra_values(cfg, result)

    lstm = cfg.family == "lstm"
    if not cfg.is_cell and steps_listed(result):
        steps = result[0]
        time = 1 if cfg.batch_first and steps[0].dim() == 2 else 0
        try:
            result = (torch.stack(list(steps), time), result[1])
        except RuntimeError:  # steps of different shapes: the structure is what is reported
            pass
    listed = None if cfg.is_cell else listed_final_state(cfg, result)
    if listed is not None:
        result = (result[0], listed)
    if cfg.is_cell:
        parts = _cell_state(result, lstm)
    elif lstm and state_flat(result):
        parts = tuple(result)
    elif not _pair(result):
        parts = None
    elif lstm:
        parts = (result[0], *result[1]) if _pair(result[1]) else None
    else:
        parts = tuple(result)
    if parts is None or not all(isinstance(part, torch.Tensor) for part in parts):
        raise Finding(f"forward returned {describe_structure(result)}, expected "
                      f"{_expected_structure(cfg)}",
                      "output_not_stacked" if steps_listed(result) else None)
    return dict(zip(output_names(cfg), parts))


def _cell_state(result, lstm: bool) -> tuple | None:
    """A cell's state from its return value: h, or an LSTM's (h, c), as torch.nn returns it or
    inside the structure a layer returns, output and state (`return h, h`; `return h, (h, c)`,
    the state perhaps with a layer's leading axis, which the shape checks name), or alone in a
    tuple. The `output-structure` check holds such wrapping against the drop-in
    level. None where the state cannot be read."""
    def same(a, b):
        """Whether `a` and `b` are one tensor's values, one perhaps with a layer's leading axis
        of one."""
        if not all(isinstance(t, torch.Tensor) for t in (a, b)):
            return False
        if a.dim() > b.dim():
            a, b = b, a
        return a is b or identical(a, b) or (b.dim() == a.dim() + 1 and b.shape[0] == 1
                                             and identical(a, b[0]))

    if isinstance(result, torch.Tensor):
        return None if lstm else (result,)
    if not isinstance(result, (tuple, list)) or not result:
        return None
    if not lstm:  # the state as returned: last, where a layer returns it
        return (result[-1],) if all(same(part, result[0]) for part in result) else None
    if len(result) == 1 and _pair(result[0]):
        return tuple(result[0])
    if _pair(result) and _pair(result[1]) and same(result[0], result[1][0]):
        return tuple(result[1])
    return tuple(result) if _pair(result) else None


def _expected_structure(cfg: Config) -> str:
    names = output_names(cfg)
    if cfg.is_cell:
        return f"a tuple ({', '.join(names)})" if len(names) > 1 else "a Tensor"
    state = f"({', '.join(names[1:])})" if len(names) > 2 else names[1]
    return f"a tuple ({names[0]}, {state})"


def batch_and_steps(cfg: Config, x) -> tuple[int | None, int]:
    """The batch size (None if unbatched) and number of steps of an input for `cfg`."""
    batched = is_batched(cfg, x)
    if cfg.is_cell:
        return (x.shape[0] if batched else None), 1
    time_axis = 1 if batched and cfg.batch_first else 0
    return (x.shape[1 - time_axis] if batched else None), x.shape[time_axis]


def shape_diagnosis(cfg: Config, batch, steps, name: str, got: tuple) -> str | None:
    """Name the mistakes a wrong output shape gives away."""
    want = io_shapes(cfg, batch, steps)[name]
    if cfg.is_cell and batch is not None and got == (1, *want):
        return "cell_state_layer_axis"
    if batch == 1 and name not in ("h_n", "c_n") and got == io_shapes(cfg, None, steps)[name]:
        return "batch_of_one_broken"  # the batch axis squeezed away
    if name in ("h_n", "c_n") and len(got) == len(want) - 1:
        return "h_n_no_layer_dim"
    if cfg.batch_first and batch is not None and batch != steps:
        # A module that ignores batch_first reads (N, L, I) as N steps of a batch of L.
        if got == io_shapes(cfg.replace(batch_first=False), steps, batch)[name]:
            return "batch_first_ignored"
    return None


# --- explaining a failure --------------------------------------------------------------------

def where_diverged(run, observed: dict, expected: dict, name: str, numbers: dict) -> dict:
    """The layer, direction and timestep where the outputs first part from the reference, and
    the output's values at that timestep for the finding's sample."""
    found = locate(run, observed, expected, run.tolerance())
    if name == "output" and found.get("timestep") is not None:
        found.update(_at_divergence(run, observed, expected, found))
    return found


def _at_divergence(run, observed: dict, expected: dict, numbers: dict) -> dict:
    """The output's values at the first diverging timestep (first sequence of the batch, the
    diverging direction's features)."""
    cfg, t = run.cfg, numbers["timestep"]
    width = cfg.output_size
    d = 1 if numbers.get("direction") == "reverse" else 0
    def row(output):
        seq = time_major(cfg, np.asarray(output))
        return seq[t, 0, d * width:(d + 1) * width]
    batch_first = cfg.batch_first and run.case.batched
    at = [t] if not run.case.batched else ([0, t] if batch_first else [t, 0])
    return {"at": at, "expected": row(expected["output"])[:SAMPLE_VALUES].tolist(),
            "actual": row(observed["output"])[:SAMPLE_VALUES].tolist()}


def init_diagnosis(cfg: Config, samples: dict, wrong: list[str]) -> str | None:
    """When every failing parameter does fit U(-1/H, 1/H), the bound was computed as 1/H
    instead of 1/sqrt(H)."""
    one_over_h = Uniform(-1.0 / cfg.hidden_size, 1.0 / cfg.hidden_size)
    if all(fits(sample_fit(samples[name], one_over_h)) for name in wrong):
        return "init_bound_1_over_h"
    return None


def smooth(cfg: Config) -> bool:
    """Whether the case's gradients are a smooth function of its inputs. relu's derivative
    jumps at 0, and half precision rounds preactivations across it: there even torch.nn's
    gradients differ from the float64 reference by O(1) now and then (reference/tolerance.py),
    so relu gradients are judged in float64 and float32 only."""
    return cfg.nonlinearity != "relu"


# --- features no constructor argument announces ----------------------------------------------

def probe_unbatched(subject) -> str | None:
    """Unbatched input (the one part of torch.nn's contract no constructor argument announces)
    is not supported when forward raises on it while the same module runs batched input, asked
    the same way (the state omitted, or zeros where omitting it fails). A module that returns
    something for unbatched input is judged on it like any other."""
    cfg = probe_config(subject.kind)
    batched, unbatched = (torch.zeros(io_shapes(cfg, batch, 4)["input"]) for batch in (2, None))
    error = refused(subject, cfg, batched, unbatched, unbatched)
    if error is None:
        return None
    return (f"forward raised {one_line(error)} on unbatched input {tuple(unbatched.shape)}"
            + _at(error))


def probe_final_state(subject) -> str | None:
    """The final state is not returned when forward, asked the way torch.nn is, returns the
    output alone (one tensor)."""
    cfg = probe_config(subject.kind)
    x = torch.zeros(io_shapes(cfg, 2, 4)["input"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            result = subject.construct(cfg)(x)
        except Exception:
            return None  # the checks say how it fails
    if isinstance(result, torch.Tensor):
        return f"forward returns the output alone, no final state ({_expected_structure(cfg)} expected)"
    return None


def probe_packed(subject) -> str | None:
    """Variable-length input is not supported when forward raises on a PackedSequence while the
    same module runs the same sequences as a plain batch, asked the same way (see
    `probe_unbatched`). A module that returns something for it is judged on it like any other."""
    from torch.nn.utils.rnn import pack_padded_sequence

    cfg = probe_config(subject.kind)
    x = torch.zeros(io_shapes(cfg, 2, 4)["input"])
    packed = pack_padded_sequence(x, torch.tensor([4, 2]), enforce_sorted=False)
    error = refused(subject, cfg, x, packed, x)
    if error is None:
        return None
    return f"forward raised {one_line(error)} on a PackedSequence" + _at(error)


# A constructor feature -> the probe configuration's changes that leave it out and that ask for
# it, differing in that feature alone (dropout acts between layers: its base has two).
_ASKED_FOR = {"num_layers": ({}, {"num_layers": 2}),
              "bidirectional": ({}, {"bidirectional": True}),
              "batch_first": ({}, {"batch_first": True}),
              "proj_size": ({}, {"proj_size": _PROBE_PROJECTION}),
              "no_bias": ({}, {"bias": False}),
              "relu": ({}, {"nonlinearity": "relu"}),
              "dropout": ({"num_layers": 2}, {"num_layers": 2, "dropout": 0.5})}


def probe_constructor(feature: str, subject) -> str | None:
    """A constructor feature (`_ASKED_FOR`) is refused when the constructor raises
    NotImplementedError, Python's way of saying so, or fails an assert on the feature's argument
    (`assert not batch_first`; `rnnbench.suites.features.refusal`) on a configuration asking for
    it and builds the same configuration without it. Any other exception is a crash, which the
    checks report; and a case is excused only where its own configuration is refused too
    (`rnnbench.suites.features.refused_configuration`): a stack refused at some sizes and built
    at others is judged where it builds."""
    without, asked = (probe_config(subject.kind).replace(**change)
                      for change in _ASKED_FOR[feature])
    if refused_configuration(subject, without) is not False:
        return None  # refused or crashing without the feature too: the checks say how
    error = refused_configuration(subject, asked)
    if not error:
        return None
    return (f"asked for {_arguments(asked, without)}, the constructor raised {one_line(error)}"
            + _at(error))


def _arguments(asked: Config, without: Config) -> str:
    changed = {name: value for name, value in asked.constructor_kwargs().items()
               if without.constructor_kwargs().get(name) != value}
    return ", ".join(f"{name}={value!r}" for name, value in changed.items())


def constructor_probes(kind: str) -> dict:
    """The probes of the constructor features torch.nn's signature for `kind` has."""
    arguments = torch_signature(kind).parameters
    return {feature: partial(probe_constructor, feature) for argument, feature in
            ARGUMENT_FEATURES.items() if argument in arguments and feature in _ASKED_FOR}


def _at(error: BaseException) -> str:
    where = raised_at(error)
    return f" (at {where})" if where else ""


def refused(subject, cfg, plain, other, other_state_like) -> Exception | None:
    """What forward raised on `other` where a fresh module of `cfg` ran `plain` asked the same
    way: with the state omitted, or else with zeros (shaped for `plain`, and for
    `other_state_like` on the second call). None when it ran both, or ran neither (or could not
    be built): the checks then say how. Each call gets a fresh module (one that keeps its state
    between calls is not asked with the last one's), and the inputs in the dtype of the
    module's own values (a module that makes itself float64 is asked in float64)."""
    def forward(module, x, state_like, with_state: bool):
        dtype = getattr(torch, own_dtype(module))
        x = x.to(dtype)
        return module(x, zero_state(cfg, state_like.to(dtype))) if with_state else module(x)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for with_state in (False, True):
            try:
                forward(subject.construct(cfg), plain, plain, with_state)
            except Exception:
                continue
            try:
                fresh = subject.construct(cfg)
            except Exception:
                return None
            try:
                forward(fresh, other, other_state_like, with_state)
            except Exception as exc:
                return exc
            return None
    return None


# --- the family's own checks -----------------------------------------------------------------

def _select(table: tuple, kind: str) -> tuple:
    return tuple(case for case in table if case.kind == kind)


def _has_dropout(case) -> bool:
    return case.config.dropout > 0


def extra_checks(kind: str) -> tuple[dict, ...]:
    """The checks only torch.nn's family has, on `kind`'s rows (fields of a `Check`)."""
    construction, general = _select(CONSTRUCTION_CASES, kind), _select(CASES, kind)
    dropout, packed = _select(DROPOUT_CASES, kind), _select(PACKED_CASES, kind)
    rows = [
        dict(name="biases", category="construction", function=check_construction.check_biases,
             table=construction, applies=lambda case: case.config.bias, calls=False),
        *(dict(name=f"dtype-device{suffix}", category="construction",
               function=partial(check_construction.check_dtype_device, dtype=dtype),
               table=construction, dtype=dtype, features=("factory_kwargs",), calls=False)
          for dtype, suffix in (("float64", ""), ("float32", "-float32"))),
        dict(name="defaults", category="construction", function=check_construction.check_defaults,
             table=construction, rows=1, calls=False),
        dict(name="invalid-arguments", category="construction",
             function=partial(check_construction.check_invalid_arguments,
                              arguments=INVALID_ARGUMENTS), table=construction, calls=False),
        dict(name="state-argument", category="construction",
             function=check_construction.check_state_argument, table=construction, rows=1,
             calls=False),
    ]
    if packed:
        # Variable-length sequences (PackedSequence input): float64 tight, float32 by the policy.
        rows += [dict(name=f"packed-forward{suffix}", category="forward",
                      function=partial(check_packed.check_packed_forward, dtype=dtype),
                      table=packed, dtype=dtype, features=("final_state",))
                 for dtype, suffix in (("float64", ""), ("float32", "-float32"))]
        rows.append(dict(name="packed-gradients", category="gradients",
                         function=partial(check_packed.check_packed_gradients, dtype="float64"),
                         table=packed, dtype="float64", backward=True, features=("final_state",)))
    rows.append(dict(name="state", category="state", function=check_state.check_state,
                     table=general, applies=check_state.applies,
                     features=("initial_state", "final_state")))
    if dropout:
        rows += [dict(name="dropout-eval", category="dropout", function=check_dropout.check_eval,
                      table=dropout, applies=_has_dropout),
                 dict(name="dropout-train", category="dropout", function=check_dropout.check_train,
                      table=dropout)]
    rows.append(dict(name="output-structure", category="construction",
                     function=check_construction.check_output_structure, table=general,
                     applies=_structure_row))
    return tuple(rows)


def _structure_row(case: Case) -> bool:
    """The output-structure check's rows: a layer's or a cell's plain one, and a stacked
    bidirectional layer, whose state a module may list per layer and direction."""
    return case.name in ("single-layer", "batched", "two-layer-bidirectional")


def record(kind: str) -> SuiteKind:
    """The suite record of one of torch.nn's kinds."""
    probes = {"unbatched": probe_unbatched, "final_state": probe_final_state,
              **constructor_probes(kind)}
    if kind in SEQUENCE_KINDS:
        probes["packed"] = probe_packed
    return SuiteKind(
        cases=_select(CASES, kind), construction_cases=_select(CONSTRUCTION_CASES, kind),
        dtypes=("float64", "float32", "bfloat16", "float16"), wrong_inputs=(*WRONG_INPUTS, INPUT_DTYPE),
        extra_checks=extra_checks(kind), contract="torch.nn's", param_map=inferred_map,
        optional_parameters=biases, summed_parameters=summed_biases,
        flatten_result=flatten_result, sizes_of=batch_and_steps,
        shape_diagnosis=shape_diagnosis, final_state=final_state_mismatch, diagnose=diagnose,
        locate=where_diverged, diagnose_init=init_diagnosis, smooth=smooth, probes=probes,
        fuzz_cases=case_strategy)


for _kind in KINDS:
    register_kind(SPECS[_kind], record(_kind))
