"""The reference with a named mistake made on purpose: what a buggy implementation would compute.

When an implementation's outputs differ from the reference, `match` recomputes the reference
with each mistake in `CANDIDATES` and names the one whose outputs the implementation reproduces
(the nearest where several do within a low precision's tolerance; none where two are equally
near). Most mistakes are expressed by changing what is fed to `rnnbench.reference.forward`:

- parameters: gate blocks permuted (wrong gate order), each square block transposed (W^T), the
  GRU's z rows negated (sigmoid(-a) = 1 - sigmoid(a), so this *is* swapping z and 1-z), a bias
  block zeroed (a single bias, or none), TensorFlow's forget_bias added to the LSTM's forget
  block of b_ih (with torch's gate order or TensorFlow's);
- the config: the other nonlinearity, batch_first off;
- the inputs: the time axis flipped, the initial state dropped (or its c0 alone).

Mistakes in how layers and directions are wired (reverse direction not reversed, its h_n taken at
the wrong end, h_n in direction-major order, upper layers fed the raw input, the state never
carried from one step to the next) run the reference one layer and direction at a time
(`composed`). The mistakes no parameter change can express, a
missing nonlinearity, the Cho-2014 GRU and the GRU's b_hn added outside the reset product (as
when its two biases are summed into one), are small NumPy steps below. Nothing here imports or
calls the implementation under test.
"""
from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator

import numpy as np

from rnnbench import reference
from rnnbench.reference import Config, io_shapes, param_shapes
from rnnbench.reference.numerics import flatten_outputs, nest_state, output_names, state_names
from rnnbench.suites.compare import agree, distance
from rnnbench.suites.layers import (HIDDEN_BIAS, HIDDEN_WEIGHT, INPUT_BIAS, INPUT_WEIGHT,
                                    batched_states, blocks, gate_stacked, is_batched, layer_config,
                                    layer_params, time_major, user_layout)

Pieces = dict  # output name -> array (None: this variant does not say)


def forward(cfg: Config, params: dict, x: np.ndarray, hx: dict | None) -> Pieces:
    """The reference's outputs keyed by name; `hx` keyed by state name (or None)."""
    state = None if hx is None else nest_state(cfg, hx)
    return flatten_outputs(cfg, reference.forward(cfg, params, x, state))


# --- running one direction of one layer: the reference itself, or a hand-written step --------

def reference_direction(one: Config, params: dict, xs: np.ndarray, state: tuple) -> tuple:
    """One unidirectional layer over xs (L, N, F) from `state`; (outputs, final state)."""
    pieces = forward(one, params, xs, dict(zip(state_names(one), (s[None] for s in state))))
    return pieces["output"], tuple(pieces[name][0] for name in output_names(one)[1:])


def step_direction(step: Callable) -> Callable:
    """A direction runner from a NumPy step(cfg, block params, x_t, state) -> state."""
    def run(one: Config, params: dict, xs: np.ndarray, state: tuple) -> tuple:
        named = {blocks(one)[name]: value for name, value in params.items()}
        outputs = []
        for x in xs:
            state = step(one, named, x, state)
            outputs.append(state[0])
        return np.stack(outputs), state
    return run


def composed(cfg: Config, params: dict, x: np.ndarray, hx: dict | None, *,
             direction=reference_direction, reverse: str = "reversed",
             reverse_final: str = "last_processed", layer_input: str = "previous",
             h_n_order: str = "layer_major") -> Pieces:
    """A sequence module run one layer and direction at a time, wired correctly unless told:

    reverse: "reversed" (right), "not_reversed" (the reverse direction reads the sequence
        forwards), "unflipped" (its outputs left in processing order);
    reverse_final: "last_processed" (right) or "first_processed" (h_n taken at the wrong end);
    layer_input: "previous" (right) or "raw" (every layer reads the module's input);
    h_n_order: "layer_major" (right) or "direction_major".
    """
    batched = is_batched(cfg, x)
    xs = time_major(cfg, x)
    names = state_names(cfg)
    shapes = io_shapes(cfg, xs.shape[1], xs.shape[0])
    states = {name: np.zeros(shapes[name]) if hx is None else batched_states(hx[name], batched)
              for name in names}
    finals, layer_in = {}, xs
    for layer in range(cfg.num_layers):
        outputs = []
        for d in range(cfg.num_directions):
            one = layer_config(cfg, layer, directions=1)
            start = tuple(states[name][layer * cfg.num_directions + d] for name in names)
            backwards = d == 1 and reverse != "not_reversed"
            ys, final = direction(one, layer_params(cfg, params, layer, (d,)),
                                  layer_in[::-1] if backwards else layer_in, start)
            if backwards and reverse == "reversed":
                ys = ys[::-1]
            if d == 1 and reverse_final == "first_processed":
                final = (ys[-1],) + (None,) * (len(final) - 1)
            outputs.append(ys)
            finals[layer, d] = final
        layer_out = np.concatenate(outputs, axis=-1)
        layer_in = xs if layer_input == "raw" else layer_out
    order = sorted(finals, key=(lambda k: k) if h_n_order == "layer_major" else (lambda k: (k[1], k[0])))
    pieces = {"output": user_layout(cfg, batched, layer_out)}
    for i, name in enumerate(output_names(cfg)[1:]):
        parts = [finals[key][i] for key in order]
        stacked = None if any(p is None for p in parts) else np.stack(parts)
        pieces[name] = stacked if stacked is None or batched else stacked[:, 0]
    return pieces


def _stepped(cfg: Config, params: dict, x: np.ndarray, hx: dict | None, step: Callable) -> Pieces:
    """The whole module with a hand-written step (a cell is one step of a one-step sequence)."""
    if not cfg.is_cell:
        return composed(cfg, params, x, hx, direction=step_direction(step))
    batched = is_batched(cfg, x)
    named = {blocks(cfg)[name]: value for name, value in params.items()}
    state = tuple(np.zeros(x.shape[:-1] + (cfg.hidden_size,)) if hx is None else hx[name]
                  for name in state_names(cfg))
    if not batched:
        x, state = x[None], tuple(s[None] for s in state)
    state = step(cfg, named, x, state)
    return dict(zip(output_names(cfg), state if batched else (s[0] for s in state)))


def _sigmoid(a):
    return 1.0 / (1.0 + np.exp(-a))


def _gates(cfg: Config, p: dict, x, h):
    """The input and hidden terms of each gate (matmul plus bias), by gate name."""
    zero = np.zeros(p[INPUT_WEIGHT].shape[0])
    gi = x @ p[INPUT_WEIGHT].T + p.get(INPUT_BIAS, zero)
    gh = h @ p[HIDDEN_WEIGHT].T + p.get(HIDDEN_BIAS, zero)
    return dict(zip(cfg.gates, np.split(gi, len(cfg.gates), axis=-1))), \
        dict(zip(cfg.gates, np.split(gh, len(cfg.gates), axis=-1)))


def _linear_elman_step(cfg: Config, p: dict, x, state):
    """h' = W_ih x + b_ih + W_hh h + b_hh: the Elman step without its nonlinearity."""
    gi, gh = _gates(cfg, p, x, state[0])
    return tuple(gi[g] + gh[g] for g in cfg.gates)


def _cho_gru_step(cfg: Config, p: dict, x, state):
    """Cho et al. (2014): n = tanh(W_in x + b_in + W_hn (r * h) + b_hn)."""
    (h,) = state
    gi, gh = _gates(cfg, p, x, h)
    r, z = _sigmoid(gi["r"] + gh["r"]), _sigmoid(gi["z"] + gh["z"])
    _, gh_reset = _gates(cfg, p, x, r * h)
    n = np.tanh(gi["n"] + gh_reset["n"])
    return ((1.0 - z) * n + z * h,)


def _outer_bhn_gru_step(cfg: Config, p: dict, x, state):
    """n = tanh(W_in x + b_in + b_hn + r * (W_hn h)): b_hn outside the reset product."""
    (h,) = state
    gi, gh = _gates(cfg, p, x, h)
    r, z = _sigmoid(gi["r"] + gh["r"]), _sigmoid(gi["z"] + gh["z"])
    b_hn = np.split(p[HIDDEN_BIAS], len(cfg.gates))[cfg.gates.index("n")]
    n = np.tanh(gi["n"] + b_hn + r * (gh["n"] - b_hn))
    return ((1.0 - z) * n + z * h,)


# --- the candidates: each yields the outputs of one or more versions of a mistake -----------

def _map_params(cfg: Config, params: dict, change: Callable) -> dict:
    """params with `change(name, value)` applied to each."""
    return {name: change(name, value) for name, value in params.items()}


def _h0_ignored(cfg, params, x, hx) -> Iterator[Pieces]:
    if hx is not None:
        yield forward(cfg, params, x, None)


def _c0_ignored(cfg, params, x, hx) -> Iterator[Pieces]:
    if cfg.family == "lstm" and hx is not None:
        yield forward(cfg, params, x, {**hx, "c0": np.zeros_like(hx["c0"])})


def _batch_first_ignored(cfg, params, x, hx) -> Iterator[Pieces]:
    if cfg.batch_first and is_batched(cfg, x):
        yield forward(cfg.replace(batch_first=False), params, x, hx)


def _weight_transposed(cfg, params, x, hx) -> Iterator[Pieces]:
    """Square gate blocks transposed: those of W_hh, of W_ih (where square), or of both."""
    names = blocks(cfg)
    def square(value):
        return value.ndim == 2 and gate_stacked(cfg, value) and value.shape[1] == cfg.hidden_size
    candidates = sorted({names[name] for name, value in params.items() if square(value)})
    for count in range(1, len(candidates) + 1):
        for chosen in itertools.combinations(candidates, count):
            def transpose(name, value, chosen=chosen):
                if names[name] not in chosen or not square(value):
                    return value
                return np.concatenate([b.T for b in np.split(value, len(cfg.gates))])
            yield forward(cfg, _map_params(cfg, params, transpose), x, hx)


def _missing_nonlinearity(cfg, params, x, hx) -> Iterator[Pieces]:
    if cfg.family == "rnn":
        yield _stepped(cfg, params, x, hx, _linear_elman_step)


def _wrong_nonlinearity(cfg, params, x, hx) -> Iterator[Pieces]:
    if cfg.family == "rnn":
        other = "relu" if cfg.nonlinearity == "tanh" else "tanh"
        yield forward(cfg.replace(nonlinearity=other), params, x, hx)


def _time_reversed(cfg, params, x, hx) -> Iterator[Pieces]:
    if cfg.is_cell:
        return
    axis = 1 if cfg.batch_first and is_batched(cfg, x) else 0
    pieces = forward(cfg, params, np.flip(x, axis), hx)
    yield pieces  # outputs kept in processing order
    yield {**pieces, "output": np.flip(pieces["output"], axis)}  # or put back in time order


def _reverse_not_reversed(cfg, params, x, hx) -> Iterator[Pieces]:
    if cfg.bidirectional:
        yield composed(cfg, params, x, hx, reverse="not_reversed")


def _reverse_output_not_realigned(cfg, params, x, hx) -> Iterator[Pieces]:
    if cfg.bidirectional:
        yield composed(cfg, params, x, hx, reverse="unflipped")


def _reverse_h_n_wrong_end(cfg, params, x, hx) -> Iterator[Pieces]:
    if cfg.bidirectional:
        yield composed(cfg, params, x, hx, reverse_final="first_processed")


def _h_n_layout(cfg, params, x, hx) -> Iterator[Pieces]:
    if cfg.bidirectional and cfg.num_layers > 1:
        yield composed(cfg, params, x, hx, h_n_order="direction_major")


def _state_not_carried(cfg, params, x, hx) -> Iterator[Pieces]:
    """Every step starts from the initial state, not the step before's: the new state computed
    and never assigned back. Its final state as the last step's, or left unsaid (a module that
    returns the initial one, or its own)."""
    if cfg.is_cell:
        return
    def direction(one, p, xs, start):
        steps = [reference_direction(one, p, x_t[None], start) for x_t in xs]
        return np.concatenate([ys for ys, _ in steps]), steps[-1][1]
    pieces = composed(cfg, params, x, hx, direction=direction)
    yield pieces
    yield {**pieces, **dict.fromkeys(output_names(cfg)[1:])}


def _layer_input_wrong(cfg, params, x, hx) -> Iterator[Pieces]:
    if not cfg.is_cell and cfg.num_layers > 1 and cfg.layer_input_size(1) == cfg.input_size:
        yield composed(cfg, params, x, hx, layer_input="raw")


def _gate_blocks(cfg: Config, value: np.ndarray, order: tuple[int, ...]) -> list[np.ndarray]:
    """A gate-stacked parameter's blocks, one per gate, taken in `order`."""
    parts = np.split(value, len(cfg.gates))
    return [parts[i] for i in order]


def _gate_orders(family: str):
    def candidates(cfg, params, x, hx) -> Iterator[Pieces]:
        if cfg.family != family:
            return
        for order in itertools.permutations(range(len(cfg.gates))):
            if list(order) == sorted(order):
                continue
            def permute(name, value, order=order):
                if not gate_stacked(cfg, value):
                    return value
                return np.concatenate(_gate_blocks(cfg, value, order))
            yield forward(cfg, _map_params(cfg, params, permute), x, hx)
    return candidates


# TensorFlow's LSTM adds this to the forget gate's pre-activation in every step (its
# `forget_bias`); torch.nn puts no constant there, so a port that keeps it computes another
# function with the same parameters.
TENSORFLOW_FORGET_BIAS = 1.0
# torch's LSTM blocks i, f, g, o as TensorFlow's i, j (the candidate), f, o read them.
TORCH_ORDER, TENSORFLOW_ORDER = (0, 1, 2, 3), (0, 2, 1, 3)


def _forget_bias(order: tuple[int, ...]):
    """TensorFlow's forget_bias added to the forget gate, the gate blocks read in `order` (as
    `_gate_orders` permutes them): torch's, or TensorFlow's i, j, f, o for a port that kept
    both. Without biases the constant is carried by zero biases put in their place."""
    def candidates(cfg, params, x, hx) -> Iterator[Pieces]:
        if cfg.family != "lstm":
            return
        if not cfg.bias:
            cfg, params = _with_zero_biases(cfg, params)
        names = blocks(cfg)
        if INPUT_BIAS not in {names[name] for name in params}:
            return
        forget = cfg.gates.index("f")
        def change(name, value):
            if not gate_stacked(cfg, value):
                return value
            parts = _gate_blocks(cfg, value, order)
            if names[name] == INPUT_BIAS:
                parts[forget] = parts[forget] + TENSORFLOW_FORGET_BIAS
            return np.concatenate(parts)
        yield forward(cfg, _map_params(cfg, params, change), x, hx)
    return candidates


def _with_zero_biases(cfg: Config, params: dict) -> tuple[Config, dict]:
    """A config without biases as the same function with biases, each of them zero."""
    biased = cfg.replace(bias=True)
    return biased, {name: params.get(name, np.zeros(shape))
                    for name, shape in param_shapes(biased).items()}


def _cho_reset(cfg, params, x, hx) -> Iterator[Pieces]:
    if cfg.family == "gru":
        yield _stepped(cfg, params, x, hx, _cho_gru_step)


def _bhn_outside_reset(cfg, params, x, hx) -> Iterator[Pieces]:
    if cfg.family == "gru" and HIDDEN_BIAS in {blocks(cfg)[name] for name in params}:
        yield _stepped(cfg, params, x, hx, _outer_bhn_gru_step)


def _negated_z(cfg: Config, params: dict) -> dict:
    """The GRU's z rows negated: sigmoid(-a) = 1 - sigmoid(a), so z and 1-z trade places."""
    z = cfg.gates.index("z")
    def negate_z(name, value):
        if not gate_stacked(cfg, value):
            return value
        parts = np.split(value, len(cfg.gates))
        parts[z] = -parts[z]
        return np.concatenate(parts)
    return _map_params(cfg, params, negate_z)


def _swapped_z(cfg, params, x, hx) -> Iterator[Pieces]:
    if cfg.family == "gru":
        yield forward(cfg, _negated_z(cfg, params), x, hx)


def _cho_textbook(cfg, params, x, hx) -> Iterator[Pieces]:
    """Both at once, as textbooks write the GRU: h' = (1 - z) h + z tanh(W x + U (r * h))."""
    if cfg.family == "gru":
        yield _stepped(cfg, _negated_z(cfg, params), x, hx, _cho_gru_step)


def _bias_blocks(cfg: Config, params: dict) -> list[str]:
    """The distinct bias blocks (one-dimensional parameters), e.g. bias_ih and bias_hh."""
    return sorted({blocks(cfg)[name] for name, value in params.items() if np.ndim(value) == 1})


def _single_bias(cfg, params, x, hx) -> Iterator[Pieces]:
    names = blocks(cfg)
    for dropped in _bias_blocks(cfg, params):
        yield forward(cfg, _map_params(cfg, params, lambda n, v: 0 * v if names[n] == dropped else v),
                      x, hx)


def _bias_ignored(cfg, params, x, hx) -> Iterator[Pieces]:
    if _bias_blocks(cfg, params):
        yield forward(cfg, _map_params(cfg, params, lambda n, v: 0 * v if np.ndim(v) == 1 else v),
                      x, hx)


# Diagnosis id -> its candidates, in the order they are tried.
CANDIDATES: tuple[tuple[str, Callable[..., Iterator[Pieces]]], ...] = (
    ("h0_ignored", _h0_ignored),
    ("c0_ignored", _c0_ignored),
    ("batch_first_ignored", _batch_first_ignored),
    ("weight_transposed", _weight_transposed),
    ("missing_nonlinearity", _missing_nonlinearity),
    ("wrong_nonlinearity", _wrong_nonlinearity),
    ("time_reversed", _time_reversed),
    ("reverse_not_reversed", _reverse_not_reversed),
    ("reverse_output_not_realigned", _reverse_output_not_realigned),
    ("reverse_h_n_wrong_end", _reverse_h_n_wrong_end),
    ("h_n_layout", _h_n_layout),
    ("layer_input_wrong", _layer_input_wrong),
    ("state_not_carried", _state_not_carried),
    ("lstm_gate_order", _gate_orders("lstm")),
    ("lstm_forget_bias", _forget_bias(TORCH_ORDER)),
    ("lstm_tensorflow_gates", _forget_bias(TENSORFLOW_ORDER)),
    ("gru_gate_order", _gate_orders("gru")),
    ("gru_cho_reset", _cho_reset),
    ("gru_bhn_outside_reset", _bhn_outside_reset),
    ("gru_swapped_z", _swapped_z),
    ("gru_cho_textbook", _cho_textbook),
    ("single_bias", _single_bias),
    ("bias_ignored", _bias_ignored),
)


def matches(cfg: Config, params: dict, x: np.ndarray, hx: dict | None, observed: Pieces,
            expected: Pieces, tol) -> set[str]:
    """The mistakes whose outputs the implementation reproduces (and that differ from the
    correct outputs at all, so a mistake that changes nothing here is never named): where
    several do within `tol`, the nearest, and every one equally near: there this case cannot
    tell them apart (with a zero state, the Cho GRU's reset and a b_hn outside it give the same
    outputs). Empty where none does."""
    found, nearest = set(), 1.0
    for diagnosis, candidates in CANDIDATES:
        for pieces in _safely(candidates(cfg, params, x, hx)):
            if agree(pieces, expected, tol):
                continue
            far = distance(observed, pieces, tol)
            if far < nearest:
                found, nearest = {diagnosis}, far
            elif far == nearest:
                found.add(diagnosis)
    return found


def _safely(candidates: Iterator[Pieces]) -> Iterator[Pieces]:
    """Candidates, skipping the rest of a family whose inputs the reference rejects (ValueError:
    e.g. batch_first off with a state shaped for the real batch)."""
    try:
        yield from candidates
    except ValueError:
        return
