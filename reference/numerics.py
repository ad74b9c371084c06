"""Float64 NumPy forward and hand-written backward (BPTT): the numerical spec.

The equations, torch.nn's conventions, for one layer and direction and one time step. x is the
step's input, h (and c) the previous state; W_ih, W_hh, b_ih, b_hh hold the gate blocks stacked
along their first axis in the order listed (W_ih[i] is the i block of `weight_ih`).

Elman (rnn, rnn_cell), act = tanh or relu::

    h' = act(W_ih x + b_ih + W_hh h + b_hh)

LSTM (lstm, lstm_cell), gate blocks in the order i, f, g, o::

    i = sigmoid(W_ih[i] x + b_ih[i] + W_hh[i] h + b_hh[i])
    f = sigmoid(W_ih[f] x + b_ih[f] + W_hh[f] h + b_hh[f])
    g =    tanh(W_ih[g] x + b_ih[g] + W_hh[g] h + b_hh[g])
    o = sigmoid(W_ih[o] x + b_ih[o] + W_hh[o] h + b_hh[o])
    c' = f * c + i * g
    h' = o * tanh(c')                  proj_size > 0:  h' = W_hr (o * tanh(c'))

With a projection h, h0, h_n and W_hh's columns have proj_size features; c keeps hidden_size.

GRU (gru, gru_cell), gate blocks in the order r, z, n::

    r = sigmoid(W_ih[r] x + b_ih[r] + W_hh[r] h + b_hh[r])
    z = sigmoid(W_ih[z] x + b_ih[z] + W_hh[z] h + b_hh[z])
    n =    tanh(W_ih[n] x + b_ih[n] + r * (W_hh[n] h + b_hh[n]))
    h' = (1 - z) * n + z * h

Conventions around the equations:

- Two biases per layer and direction, b_ih and b_hh; `bias=False` drops both.
- Every parameter is initialised from U(-1/sqrt(hidden_size), 1/sqrt(hidden_size)) (see params).
- Layer 0 reads the input; layer k > 0 reads layer k-1's output, the forward and reverse
  directions concatenated along the feature axis in that order.
- The reverse direction runs over the time-reversed sequence; its outputs are put back in the
  original time order, so output[t] = [h_forward(t), h_reverse(t)] and the reverse h_n is its
  state after it has read t = 0.
- h_n and c_n are indexed layer * num_directions + direction. An omitted initial state is zeros.
- batch_first transposes input and output only, never h0 or h_n. Unbatched input (no batch axis)
  gives unbatched outputs and states.
- Forward is eval semantics: `dropout` is never applied here.

Textbook variants that differ from these conventions (the suites' diagnosis ids in brackets):

- Cho et al. (2014) GRU: the reset gate is applied before the hidden matmul,
  n = tanh(W_ih[n] x + W_hh[n] (r * h) + b), as Keras' `reset_after=False` [gru_cho_reset].
- Swapped update gate: h' = z * n + (1 - z) * h, as written e.g. in Chung et al. (2014)
  [gru_swapped_z].
- A single bias per gate instead of b_ih and b_hh [single_bias]; for the GRU's n gate that is
  not even an equivalent reparametrisation, because b_hh[n] sits inside r * (...).
- Orthogonal W_hh (Keras' default recurrent initializer) instead of the uniform init
  [init_wrong_distribution].
- Other gate orders [lstm_gate_order, gru_gate_order]: ONNX stacks LSTM gates i, o, f, c and GRU
  gates z, r, h.
- TensorFlow's LSTM adds its forget_bias (1.0) to the forget gate's pre-activation in every step
  [lstm_forget_bias], and stacks its gates i, j, f, o [lstm_tensorflow_gates: both].

`forward` and `backward` validate their inputs and raise ValueError naming what is wrong.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from rnnbench.reference.config import Config
from rnnbench.reference.params import param_shapes, param_suffix
from rnnbench.reference.shapes import io_shapes

# The parameter blocks of one layer and direction, without torch's layer/direction suffix.
_BLOCKS = ("weight_ih", "weight_hh", "bias_ih", "bias_hh", "weight_hr")


def forward(cfg: Config, params: dict, x, hx=None):
    """Run the module described by `cfg` in float64 and return torch.nn's return structure.

    Sequence kinds return (output, h_n), LSTM (output, (h_n, c_n)); cells return h, the LSTM
    cell (h, c). `hx` is None (zeros), an array, or (h0, c0) for the LSTM kinds, shaped as
    `io_shapes` says for this input.
    """
    layout, xs, state = _prepare(cfg, params, x, hx)
    (ys, final), _ = _forward_with_cache(cfg, params, xs, state)
    return layout.returned(ys, final)


def backward(cfg: Config, params: dict, x, hx, grad_out) -> dict[str, np.ndarray]:
    """Gradients of sum(forward(...) * grad_out) by backpropagation through time.

    `grad_out` has forward's return structure; a None inside it stands for zeros. Returns a dict
    with "input", "hx" (LSTM kinds: "h0" and "c0") and every parameter name, each shaped like the
    tensor it is the gradient of. With hx None the state gradients are w.r.t. the zero state.
    """
    layout, xs, state = _prepare(cfg, params, x, hx)
    d_ys, d_final = layout.grad_out(grad_out)
    _, caches = _forward_with_cache(cfg, params, xs, state)
    d_xs, d_state, grads = _backward_from_cache(cfg, caches, d_ys, d_final)
    grads["input"] = layout.to_user(d_xs, sequence=True)
    grads.update({key: layout.to_user(d, sequence=False)
                  for key, d in zip(state_grad_names(cfg), d_state)})
    return grads


def output_names(cfg: Config) -> tuple[str, ...]:
    """Names of forward's results in return order, as `io_shapes` keys them:
    ("output", "h_n"[, "c_n"]) for sequence kinds, ("h"[, "c"]) for cells."""
    names = ("h", "c") if cfg.is_cell else ("output", "h_n", "c_n")
    return names if cfg.family == "lstm" else names[:-1]


def nest_outputs(cfg: Config, named: dict):
    """forward's return structure from arrays keyed by `output_names` (also builds grad_out)."""
    values = [named[name] for name in output_names(cfg)]
    if cfg.is_cell:
        return tuple(values) if cfg.family == "lstm" else values[0]
    return values[0], (tuple(values[1:]) if cfg.family == "lstm" else values[1])


def flatten_outputs(cfg: Config, result) -> dict:
    """The inverse of `nest_outputs`: forward's return structure as a dict keyed by name."""
    if cfg.is_cell:
        values = result if cfg.family == "lstm" else (result,)
    else:
        output, state = result
        values = (output, *state) if cfg.family == "lstm" else (output, state)
    return dict(zip(output_names(cfg), values))


def state_names(cfg: Config) -> tuple[str, ...]:
    """The initial state's parts as `io_shapes` keys them: ("h0",), LSTM kinds ("h0", "c0")."""
    return ("h0", "c0") if cfg.family == "lstm" else ("h0",)


def nest_state(cfg: Config, named: dict):
    """hx as forward takes it from arrays keyed by `state_names`: h0, or (h0, c0)."""
    values = tuple(named[name] for name in state_names(cfg))
    return values if cfg.family == "lstm" else values[0]


def state_grad_names(cfg: Config) -> tuple[str, ...]:
    """backward's keys for the initial state's gradients: ("hx",) or ("h0", "c0")."""
    return state_names(cfg) if cfg.family == "lstm" else ("hx",)


# -- one time step: the shared matmuls, then each family's gate equations ---------------------

def _sigmoid(a: np.ndarray) -> np.ndarray:
    # exp(-log(1 + exp(-a))) never overflows, unlike 1 / (1 + exp(-a)) for very negative a.
    return np.exp(-np.logaddexp(0.0, -a))


def _elman_gates(cfg, p, gi, gh, state):
    pre = gi + gh
    h = np.tanh(pre) if cfg.nonlinearity == "tanh" else np.maximum(pre, 0.0)
    return (h,), (pre, h)


def _elman_gates_back(cfg, p, cache, d_state):
    pre, h = cache
    (d_h,) = d_state
    # relu's derivative as torch takes it: zero where pre <= 0, so a NaN pre-activation passes
    # the gradient through (NaN <= 0 is false) rather than stopping it.
    d_pre = d_h * (1.0 - h * h) if cfg.nonlinearity == "tanh" else np.where(pre <= 0.0, 0.0, d_h)
    return d_pre, d_pre, (0.0,), {}


def _lstm_gates(cfg, p, gi, gh, state):
    _, c = state
    i, f, g, o = np.split(gi + gh, 4, axis=-1)
    i, f, g, o = _sigmoid(i), _sigmoid(f), np.tanh(g), _sigmoid(o)
    c_new = f * c + i * g
    tanh_c = np.tanh(c_new)
    m = o * tanh_c
    h_new = m @ p["weight_hr"].T if "weight_hr" in p else m
    return (h_new, c_new), (c, i, f, g, o, tanh_c, m)


def _lstm_gates_back(cfg, p, cache, d_state):
    c, i, f, g, o, tanh_c, m = cache
    d_h, d_c_new = d_state
    extra = {}
    if "weight_hr" in p:
        extra["weight_hr"] = d_h.T @ m
        d_h = d_h @ p["weight_hr"]
    d_c = d_c_new + d_h * o * (1.0 - tanh_c * tanh_c)
    d_gates = np.concatenate([d_c * g * i * (1.0 - i), d_c * c * f * (1.0 - f),
                              d_c * i * (1.0 - g * g), d_h * tanh_c * o * (1.0 - o)], axis=-1)
    return d_gates, d_gates, (0.0, d_c * f), extra


def _gru_gates(cfg, p, gi, gh, state):
    (h,) = state
    gi_r, gi_z, gi_n = np.split(gi, 3, axis=-1)
    gh_r, gh_z, gh_n = np.split(gh, 3, axis=-1)
    r, z = _sigmoid(gi_r + gh_r), _sigmoid(gi_z + gh_z)
    n = np.tanh(gi_n + r * gh_n)
    return ((1.0 - z) * n + z * h,), (h, r, z, n, gh_n)


def _gru_gates_back(cfg, p, cache, d_state):
    h, r, z, n, gh_n = cache
    (d_h,) = d_state
    d_n = d_h * (1.0 - z) * (1.0 - n * n)
    d_z = d_h * (h - n) * z * (1.0 - z)
    d_r = d_n * gh_n * r * (1.0 - r)
    d_gi = np.concatenate([d_r, d_z, d_n], axis=-1)
    d_gh = np.concatenate([d_r, d_z, d_n * r], axis=-1)
    return d_gi, d_gh, (d_h * z,), {}


# family -> (gate equations, their derivative). Both see the input and hidden matmuls, gi and
# gh, with their biases; the derivative returns d gi, d gh, the state gradient that bypasses
# W_hh, and gradients of any parameters used inside the gates (the LSTM projection).
_FAMILIES = {
    "rnn": (_elman_gates, _elman_gates_back),
    "lstm": (_lstm_gates, _lstm_gates_back),
    "gru": (_gru_gates, _gru_gates_back),
}


def _step(cfg, p, x, state):
    gates, _ = _FAMILIES[cfg.family]
    gi = x @ p["weight_ih"].T + p.get("bias_ih", 0.0)
    gh = state[0] @ p["weight_hh"].T + p.get("bias_hh", 0.0)
    new_state, cache = gates(cfg, p, gi, gh, state)
    return new_state, (x, state[0], cache)


def _step_back(cfg, p, step_cache, d_state, grads):
    """Back through one step: returns (d x, d previous state); adds parameter grads to `grads`."""
    _, gates_back = _FAMILIES[cfg.family]
    x, h, cache = step_cache
    d_gi, d_gh, d_bypass, extra = gates_back(cfg, p, cache, d_state)
    grads["weight_ih"] += d_gi.T @ x
    grads["weight_hh"] += d_gh.T @ h
    if "bias_ih" in grads:
        grads["bias_ih"] += d_gi.sum(axis=0)
        grads["bias_hh"] += d_gh.sum(axis=0)
    for name, value in extra.items():
        grads[name] += value
    d_prev = (d_gh @ p["weight_hh"] + d_bypass[0],) + d_bypass[1:]
    return d_gi @ p["weight_ih"], d_prev


# -- one layer and direction: a scan over time ---------------------------------------------

@dataclass
class _ScanCache:
    """What backward needs of one layer and direction's forward scan."""

    reverse: bool
    params: dict
    steps: list


def _scan(cfg, p, xs, state, reverse):
    """Run one direction over xs (T, N, F); outputs come back in the original time order."""
    outputs, steps = [], []
    for x in (xs[::-1] if reverse else xs):
        state, step_cache = _step(cfg, p, x, state)
        outputs.append(state[0])
        steps.append(step_cache)
    ys = np.stack(outputs)
    return (ys[::-1] if reverse else ys), state, steps


def _scan_back(cfg, cache: _ScanCache, d_ys, d_final):
    """BPTT through one direction, d_ys in the original time order, mirroring `_scan`.

    Returns (d xs in the original time order, d initial state, parameter grads by block).
    """
    p = cache.params
    grads = {name: np.zeros_like(value) for name, value in p.items()}
    d_state = d_final
    d_xs = []
    for step_cache, d_y in zip(cache.steps[::-1], (d_ys if cache.reverse else d_ys[::-1])):
        d_state = (d_state[0] + d_y,) + d_state[1:]
        d_x, d_state = _step_back(cfg, p, step_cache, d_state, grads)
        d_xs.append(d_x)
    # d_xs is in the scan's order reversed, which is the original order for the reverse scan.
    d_xs = np.stack(d_xs)
    return (d_xs if cache.reverse else d_xs[::-1]), d_state, grads


# -- the whole module: layers and directions ------------------------------------------------

def _param_names(cfg, layer, direction) -> dict[str, str]:
    """Block name -> torch's parameter name for one layer and direction."""
    suffix = "" if cfg.is_cell else param_suffix(layer, direction)
    shapes = param_shapes(cfg)
    return {block: block + suffix for block in _BLOCKS if block + suffix in shapes}


def _forward_with_cache(cfg, params, xs, state):
    """Forward on canonical arrays: xs (T, N, I), each state (layers * D, N, .).

    Returns ((ys (T, N, D * H_out), final states), caches for `_backward_from_cache`).
    """
    finals = []
    caches = []
    for layer in range(cfg.num_layers):
        outputs = []
        for direction in range(cfg.num_directions):
            index = layer * cfg.num_directions + direction
            p = {block: np.asarray(params[name], dtype=np.float64)
                 for block, name in _param_names(cfg, layer, direction).items()}
            ys, final, steps = _scan(cfg, p, xs, tuple(s[index] for s in state), bool(direction))
            outputs.append(ys)
            finals.append(final)
            caches.append(_ScanCache(bool(direction), p, steps))
        xs = np.concatenate(outputs, axis=-1)
    final_states = tuple(np.stack(parts) for parts in zip(*finals))
    return (xs, final_states), caches


def _backward_from_cache(cfg, caches, d_ys, d_final):
    """BPTT from the top layer down; returns (d xs, d initial states, parameter grads)."""
    width = cfg.output_size
    d_state = tuple(np.zeros_like(d) for d in d_final)
    grads = {}
    for layer in reversed(range(cfg.num_layers)):
        d_below = 0.0
        for direction in range(cfg.num_directions):
            index = layer * cfg.num_directions + direction
            d_own = d_ys[..., direction * width:(direction + 1) * width]
            d_xs, d_init, block_grads = _scan_back(cfg, caches[index], d_own,
                                                   tuple(d[index] for d in d_final))
            d_below = d_below + d_xs
            for s, d in zip(d_state, d_init):
                s[index] = d
            names = _param_names(cfg, layer, direction)
            grads.update({names[block]: g for block, g in block_grads.items()})
        d_ys = d_below
    return d_ys, d_state, grads


# -- between the user's layout and the canonical (T, N, F) one ------------------------------

@dataclass(frozen=True)
class _Layout:
    """How one call's arrays map to the canonical layout: time, batch, features; states
    (layers * D, batch, features). A cell is a one-step, one-layer sequence."""

    cfg: Config
    batch: int | None
    steps: int

    @property
    def shapes(self) -> dict[str, tuple[int, ...]]:
        return io_shapes(self.cfg, self.batch, self.steps)

    def _transposed(self, sequence: bool) -> bool:
        # torch ignores batch_first for unbatched input and for the states.
        return sequence and self.cfg.batch_first and self.batch is not None

    def to_canonical(self, a: np.ndarray, sequence: bool) -> np.ndarray:
        if self.batch is None:
            a = np.expand_dims(a, 0 if self.cfg.is_cell else 1)
        if self.cfg.is_cell:
            return a[None]
        return a.swapaxes(0, 1) if self._transposed(sequence) else a

    def to_user(self, a: np.ndarray, sequence: bool) -> np.ndarray:
        if self.cfg.is_cell:
            a = a[0]
        elif self._transposed(sequence):
            a = a.swapaxes(0, 1)
        if self.batch is None:
            a = a[0] if self.cfg.is_cell else a[:, 0]
        return np.ascontiguousarray(a)

    def states(self, given, what: str, names: tuple[str, ...]) -> tuple[np.ndarray, ...]:
        """Validated states (None -> zeros) in canonical layout; `names` index `shapes`."""
        if given is None or len(names) == 1:
            parts = (given,) * len(names)
        else:
            parts = _parts(given, len(names), what)
        labels = [what] if len(names) == 1 else [f"{what}[{k}]" for k in range(len(names))]
        return tuple(self.to_canonical(_array(a, self.shapes[n], label), sequence=False)
                     for a, n, label in zip(parts, names, labels))

    def returned(self, ys, final):
        arrays = (() if self.cfg.is_cell else (self.to_user(ys, sequence=True),)) + tuple(
            self.to_user(s, sequence=False) for s in final)
        return nest_outputs(self.cfg, dict(zip(output_names(self.cfg), arrays)))

    def grad_out(self, grad_out):
        """grad_out (forward's structure, None for zeros) -> (d ys, d final states), canonical."""
        names = output_names(self.cfg)
        if self.cfg.is_cell:
            d_final = self.states(grad_out, "grad_out", names)
            return np.zeros_like(d_final[0]), d_final
        d_output, d_state = _parts(grad_out, 2, "grad_out")
        d_ys = self.to_canonical(_array(d_output, self.shapes["output"], "grad_out[0]"), True)
        return d_ys, self.states(d_state, "grad_out[1]", names[1:])


def _parts(value, count: int, what: str) -> tuple:
    if not isinstance(value, (tuple, list)) or len(value) != count:
        raise ValueError(f"{what} must be a tuple of {count} arrays, got {type(value).__name__}")
    return tuple(value)


def _array(value, shape: tuple[int, ...], what: str) -> np.ndarray:
    """`value` as a float64 array of exactly `shape` (None -> zeros); ValueError otherwise."""
    if value is None:
        return np.zeros(shape)
    a = np.asarray(value, dtype=np.float64)
    if a.shape != tuple(shape):
        raise ValueError(f"{what} has shape {a.shape}, expected {tuple(shape)}")
    return a


def _prepare(cfg: Config, params: dict, x, hx):
    """Validate one call's arguments; return its layout, canonical input and initial states."""
    if not isinstance(cfg, Config):
        raise ValueError(f"cfg must be a rnnbench.reference.Config, got {type(cfg).__name__}")
    _check_params(cfg, params)
    x = np.asarray(x, dtype=np.float64)
    batched_rank = 2 if cfg.is_cell else 3
    if x.ndim not in (batched_rank - 1, batched_rank):
        raise ValueError(f"{cfg.kind}: expected input to be {batched_rank - 1}D or "
                         f"{batched_rank}D, got {x.ndim}D with shape {x.shape}")
    batched = x.ndim == batched_rank
    if cfg.is_cell:
        batch, steps = (x.shape[0] if batched else None), 1
    else:
        time_axis = 1 if batched and cfg.batch_first else 0
        batch = x.shape[1 - time_axis] if batched else None
        steps = x.shape[time_axis]
        if steps == 0:
            raise ValueError(f"{cfg.kind}: the sequence length must be at least 1")
    layout = _Layout(cfg, batch, steps)
    x = _array(x, layout.shapes["input"], "input")
    return layout, layout.to_canonical(x, sequence=True), layout.states(hx, "hx", state_names(cfg))


def _check_params(cfg: Config, params: dict) -> None:
    if not isinstance(params, Mapping):
        raise ValueError(f"params must be a dict of parameter name -> array, "
                         f"got {type(params).__name__}")
    expected = param_shapes(cfg)
    missing = [name for name in expected if name not in params]
    unexpected = [name for name in params if name not in expected]
    if missing or unexpected:
        raise ValueError(f"{cfg.kind} parameters: missing {missing}, unexpected {unexpected}")
    for name, shape in expected.items():
        got = np.shape(params[name])
        if got != shape:
            raise ValueError(f"parameter {name} has shape {got}, expected {shape}")
