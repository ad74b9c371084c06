"""The implicit RNN (kind "implicit"): configuration, parameters, init, float64 reference, bounds.

Sizes: batch m, input p, hidden h, implicit n, output q. One sample per row (batch-first), so a
matrix acts from the right through its transpose. For t = 1..T, with H_0 = 0:

    X_t = phi(X_t A~^T + [U_t, H_{t-1}] B^T)     equilibrium, a fixed point in X_t   (m x n)
    H_t = X_t C^T + U_t D^T                       hidden update, "documented" variant (m x h)
    H_t = X_t C^T + [U_t, H_{t-1}] D^T            hidden update, "library" variant
    Y   = H_T W^T + b                             the linear head (W, b = linear.weight, .bias)

A is n x n, B is n x (p+h), C is h x n, W is q x h; D is h x p in the documented variant (the
framework's documentation) and h x (p+h) in the library variant (what torchidl's code does); D's
shape tells them apart. phi is ReLU (default) or tanh.

Well-posedness: A~ = A * min(1, kappa / ||A||_inf), recomputed on every forward; the stored
parameter is never changed. Since phi is 1-Lipschitz, X -> phi(X A~^T + Z) is then a contraction
with factor rho = ||A~||_inf <= kappa < 1 in every row's max-norm, so each fixed point is unique.

Gradients are those of the function the forward computes, the rescale included: when the rescale
is active, dA~/dA = s I + A ds/dA with s = kappa / ||A||_inf (the maximising row's signs carry
ds/dA). torchidl passes the gradient of A~ to A unchanged ("straight-through"); the suite names
that deviation `implicit_rescale_straight_through` rather than building it into the spec.

The reference solves every equilibrium to rounding error (Picard iteration, then Newton steps)
and differentiates it implicitly: with S = phi'(pre-activation), the adjoint of an upstream
gradient G solves, per sample, (I - diag(s) A~^T) v = s * g, and then dA~ += v x^T, dZ = v.

Solver stopping rule of an implementation (torchidl's): Picard from X = 0, stop when the max-abs
change over the whole batch is below `tol`, at most `max_iter` iterations. Its iterate is then
within tol / (1 - rho) of the fixed point in every entry; `output_tolerance` propagates that
per-step error to the outputs.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, fields, replace

import numpy as np

from rnnbench.reference.config import ConfigError
from rnnbench.reference.params import Uniform
from rnnbench.reference.tolerance import Tolerance, tolerance

KIND = "implicit"
PHIS = ("relu", "tanh")
D_VARIANTS = ("documented", "library")
PARAM_NAMES = ("A", "B", "C", "D", "linear.weight", "linear.bias")

# The reference solver: Picard until the change is this small relative to the states, then Newton
# steps (exact once ReLU's active set is right, quadratic for tanh) down to rounding error.
_PICARD_RELATIVE_CHANGE = 1e-10
_PICARD_CAP = 100_000
_NEWTON_STEPS = 4
# The output bound is first order in the solver errors; this factor covers the second order.
OUTPUT_BOUND_SAFETY = 2.0
# The gradient policy's margin over its own estimate (see `gradient_tolerance`).
GRADIENT_BOUND_SAFETY = 10.0


@dataclass(frozen=True)
class Normal:
    """The normal distribution N(mean, std^2)."""

    mean: float
    std: float

    def cdf(self, x):
        """Cumulative distribution function, elementwise on a NumPy array or a float."""
        from scipy.special import ndtr

        return ndtr((np.asarray(x, dtype=float) - self.mean) / self.std)

    def __str__(self) -> str:
        return f"N({self.mean:.6g}, {self.std:.6g}^2)"


@dataclass(frozen=True)
class ImplicitConfig:
    """One ImplicitRNN's sizes, nonlinearity and solver settings; validates on construction.

    `tol` and `max_iter` are the stopping rule an implementation must honour (forward and
    backward solves alike). `d_variant` is the variant an implementation is expected to be.
    """

    kind: str = field(default=KIND, kw_only=True)  # keyword-only: the sizes stay positional
    input_size: int
    hidden_size: int
    implicit_size: int
    output_size: int
    phi: str = "relu"
    kappa: float = 0.99
    tol: float = 3e-6
    max_iter: int = 300
    d_variant: str = "documented"

    def __post_init__(self) -> None:
        problem = _problem(self)
        if problem:
            raise ConfigError(f"invalid {KIND!r} config: {problem}")

    def d_columns(self, variant: str | None = None) -> int:
        """Columns of D: p in the documented variant, p + h in the library variant."""
        variant = variant or self.d_variant
        return self.input_size + (self.hidden_size if variant == "library" else 0)

    def constructor_kwargs(self) -> dict:
        """Keyword arguments for an ImplicitRNN constructor, in torchidl's names: the sizes, then
        the solver settings (`mitr` is torchidl's name for max_iter; the backward solve gets the
        same settings). phi is passed only when it is not torchidl's fixed ReLU."""
        kwargs = {"input_dim": self.input_size, "output_dim": self.output_size,
                  "hidden_dim": self.hidden_size, "implicit_hidden_dim": self.implicit_size,
                  "kappa": self.kappa, "tol": self.tol, "mitr": self.max_iter,
                  "grad_tol": self.tol, "grad_mitr": self.max_iter}
        if self.phi != "relu":
            kwargs["phi"] = self.phi
        return kwargs

    def replace(self, **changes) -> "ImplicitConfig":
        return replace(self, **changes)

    def describe(self) -> str:
        """A short label: the sizes, then the options that differ from their defaults."""
        extras = [f"{f.name}={getattr(self, f.name)}" for f in fields(self)
                  if f.name in ("phi", "kappa", "tol", "max_iter", "d_variant")
                  and getattr(self, f.name) != f.default]
        sizes = f"{self.input_size}->{self.hidden_size}/{self.implicit_size}->{self.output_size}"
        return " ".join([f"{KIND}({sizes})", *extras])


def _problem(cfg: ImplicitConfig) -> str | None:
    if cfg.kind != KIND:
        return f"kind must be {KIND!r}, got {cfg.kind!r}"
    for name in ("input_size", "hidden_size", "implicit_size", "output_size", "max_iter"):
        value = getattr(cfg, name)
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            return f"{name} must be a positive integer, got {value!r}"
    if cfg.phi not in PHIS:
        return f"phi must be one of {', '.join(PHIS)}, got {cfg.phi!r}"
    if not 0.0 < cfg.kappa < 1.0:
        return f"kappa must be in (0, 1) for a contraction, got {cfg.kappa!r}"
    if not cfg.tol > 0.0:
        return f"tol must be positive, got {cfg.tol!r}"
    if cfg.d_variant not in D_VARIANTS:
        return f"d_variant must be one of {', '.join(D_VARIANTS)}, got {cfg.d_variant!r}"
    return None


def d_variant_of(cfg: ImplicitConfig, d_shape) -> str | None:
    """Which variant a D of this shape belongs to ("documented" or "library"), None if neither."""
    for variant in D_VARIANTS:
        if tuple(d_shape) == (cfg.hidden_size, cfg.d_columns(variant)):
            return variant
    return None


def implicit_param_shapes(cfg: ImplicitConfig, d_variant: str | None = None) -> dict[str, tuple]:
    """Every parameter's name and shape; D's shape follows `d_variant` (default cfg's)."""
    p, h, n, q = cfg.input_size, cfg.hidden_size, cfg.implicit_size, cfg.output_size
    return {"A": (n, n), "B": (n, p + h), "C": (h, n), "D": (h, cfg.d_columns(d_variant)),
            "linear.weight": (q, h), "linear.bias": (q,)}


def implicit_init_spec(cfg: ImplicitConfig) -> dict[str, Normal | Uniform]:
    """The init distribution of every parameter: torchidl draws A, B, C, D as randn(...) / n,
    i.e. N(0, (1/n)^2) with n the implicit size; the head is torch.nn.Linear's
    U(-1/sqrt(h), 1/sqrt(h)) for weight and bias alike."""
    normal = Normal(0.0, 1.0 / cfg.implicit_size)
    bound = 1.0 / math.sqrt(cfg.hidden_size)
    return {name: (Uniform(-bound, bound) if name.startswith("linear.") else normal)
            for name in PARAM_NAMES}


def rescale(a: np.ndarray, kappa: float) -> tuple[np.ndarray, float]:
    """The well-posed A~ = s A with s = min(1, kappa / ||A||_inf), and s."""
    norm = np.abs(a).sum(axis=1).max()
    scale = kappa / norm if norm > kappa else 1.0
    return a * scale, scale


def _phi(name: str, pre: np.ndarray) -> np.ndarray:
    return np.maximum(pre, 0.0) if name == "relu" else np.tanh(pre)


def _dphi(name: str, pre: np.ndarray) -> np.ndarray:
    return (pre > 0).astype(float) if name == "relu" else 1.0 - np.tanh(pre) ** 2


def residual(a_eff: np.ndarray, z: np.ndarray, x: np.ndarray, phi: str) -> float:
    """max |X - phi(X A~^T + Z)|: how far X is from being the fixed point."""
    return float(np.max(np.abs(x - _phi(phi, x @ a_eff.T + z)), initial=0.0))


def solve_equilibrium(a_eff: np.ndarray, z: np.ndarray, phi: str) -> np.ndarray:
    """The fixed point X = phi(X A~^T + Z) (m x n) to rounding error."""
    x = np.zeros_like(z)
    for _ in range(_PICARD_CAP):
        new = _phi(phi, x @ a_eff.T + z)
        change = np.max(np.abs(new - x), initial=0.0)
        x = new
        if change <= _PICARD_RELATIVE_CHANGE * (1.0 + np.max(np.abs(x), initial=0.0)):
            break
    eye = np.eye(a_eff.shape[0])
    for _ in range(_NEWTON_STEPS):
        # Per sample i: (I - diag(s_i) A~) dx_i = -(x_i - phi(A~ x_i + z_i)).
        pre = x @ a_eff.T + z
        jacobian = eye - _dphi(phi, pre)[:, :, None] * a_eff[None]
        x = x - np.linalg.solve(jacobian, (x - _phi(phi, pre))[..., None])[..., 0]
    return x


@dataclass(frozen=True)
class Trace:
    """Everything the forward computed: output (m, q), hidden (T+1, m, h) from H_0 = 0, states
    (T, m, n), pre-activations (T, m, n), the rescaled A~ and its scale, the variant, and the
    worst fixed-point residual over all steps."""

    output: np.ndarray
    hidden: np.ndarray
    states: np.ndarray
    pre: np.ndarray
    a_eff: np.ndarray
    scale: float
    variant: str
    residual: float

    @property
    def contraction(self) -> float:
        """rho = ||A~||_inf, the Picard map's contraction factor (<= kappa)."""
        return float(np.abs(self.a_eff).sum(axis=1).max())


def _variant(cfg: ImplicitConfig, params: dict) -> str:
    variant = d_variant_of(cfg, np.shape(params["D"]))
    if variant is None:
        raise ValueError(f"D has shape {np.shape(params['D'])}, neither variant's: "
                         f"{implicit_param_shapes(cfg, 'documented')['D']} (documented) or "
                         f"{implicit_param_shapes(cfg, 'library')['D']} (library)")
    return variant


def _check_input(cfg: ImplicitConfig, x: np.ndarray) -> None:
    if x.ndim != 3 or x.shape[2] != cfg.input_size:
        raise ValueError(f"expected input (batch, steps, {cfg.input_size}), got {x.shape}")


def forward(cfg: ImplicitConfig, params: dict, x, *, well_posed: bool = True) -> Trace:
    """The reference forward in float64. params: name -> array (PARAM_NAMES); x: (m, T, p).
    The variant is read off D's shape. `well_posed=False` skips the rescale: a named deviation
    the suite recognises, meaningful only for an A whose equilibria exist without it."""
    x = np.asarray(x, dtype=np.float64)
    _check_input(cfg, x)
    p = {name: np.asarray(params[name], dtype=np.float64) for name in PARAM_NAMES}
    variant = _variant(cfg, p)
    a_eff, scale = rescale(p["A"], cfg.kappa) if well_posed else (p["A"], 1.0)
    h = np.zeros((x.shape[0], cfg.hidden_size))
    hidden, states, pres, worst = [h], [], [], 0.0
    for u in x.transpose(1, 0, 2):
        uh = np.concatenate([u, h], axis=1)
        z = uh @ p["B"].T
        state = solve_equilibrium(a_eff, z, cfg.phi)
        worst = max(worst, residual(a_eff, z, state, cfg.phi))
        h = state @ p["C"].T + (uh if variant == "library" else u) @ p["D"].T
        hidden.append(h)
        states.append(state)
        pres.append(state @ a_eff.T + z)
    empty = np.zeros((0, x.shape[0], cfg.implicit_size))
    return Trace(output=h @ p["linear.weight"].T + p["linear.bias"], hidden=np.stack(hidden),
                 states=np.stack(states) if states else empty,
                 pre=np.stack(pres) if pres else empty, a_eff=a_eff, scale=scale,
                 variant=variant, residual=worst)


def backward(cfg: ImplicitConfig, params: dict, x, grad_out, *,
             straight_through: bool = False) -> dict:
    """Gradients of <grad_out, Y> w.r.t. "input" and every parameter, by implicit
    differentiation of each equilibrium and backpropagation through time.
    `straight_through=True` gives A the gradient of A~ unchanged, as torchidl does: a named
    deviation the suite recognises, not the spec."""
    trace = forward(cfg, params, x)
    return _backward(cfg, params, np.asarray(x, dtype=np.float64), trace, grad_out,
                     straight_through)[0]


def _backward(cfg, params, x, trace: Trace, grad_out,
              straight_through: bool = False) -> tuple[dict, np.ndarray, np.ndarray]:
    """The gradients; dY/dX_t at every step with X_t taken as an injected value (the upstream
    gradient of X_t before its adjoint solve); and the adjoint states v. Both (T, m, n)."""
    p = {name: np.asarray(params[name], dtype=np.float64) for name in PARAM_NAMES}
    grad_out = np.asarray(grad_out, dtype=np.float64)
    pdim, eye = cfg.input_size, np.eye(cfg.implicit_size)
    grads = {name: np.zeros_like(p[name]) for name in PARAM_NAMES}
    grads["input"] = np.zeros_like(x)
    grad_a_eff = np.zeros_like(trace.a_eff)
    grads["linear.weight"] = grad_out.T @ trace.hidden[-1]
    grads["linear.bias"] = grad_out.sum(axis=0)
    g_h = grad_out @ p["linear.weight"]
    injected, adjoints = np.zeros_like(trace.states), np.zeros_like(trace.states)
    for t in reversed(range(trace.states.shape[0])):
        uh = np.concatenate([x[:, t], trace.hidden[t]], axis=1)
        d_input = uh if trace.variant == "library" else x[:, t]
        grads["C"] += g_h.T @ trace.states[t]
        grads["D"] += g_h.T @ d_input
        g_uh = np.zeros_like(uh)
        g_uh[:, :d_input.shape[1]] += g_h @ p["D"]
        g_x = injected[t] = g_h @ p["C"]
        # Adjoint of the equilibrium, per sample: (I - diag(s) A~^T) v = s * g.
        s = _dphi(cfg.phi, trace.pre[t])
        v = adjoints[t] = np.linalg.solve(eye - s[:, :, None] * trace.a_eff.T[None],
                                          (s * g_x)[..., None])[..., 0]
        grad_a_eff += v.T @ trace.states[t]
        grads["B"] += v.T @ uh
        g_uh += v @ p["B"]
        grads["input"][:, t] = g_uh[:, :pdim]
        g_h = g_uh[:, pdim:]
    grads["A"] = (grad_a_eff if straight_through
                  else _rescale_backward(p["A"], trace.scale, cfg.kappa, grad_a_eff))
    return grads, injected, adjoints


def _rescale_backward(a: np.ndarray, scale: float, kappa: float, grad_a_eff: np.ndarray):
    """dL/dA from dL/dA~ through A~ = s(A) A. Active (s < 1): s = kappa / ||A||_inf, and
    ||A||_inf = sum_j |A_rj| for the maximising row r (the first one on a tie)."""
    if scale == 1.0:
        return grad_a_eff.copy()
    norm = kappa / scale
    row = int(np.argmax(np.abs(a).sum(axis=1)))
    grad = scale * grad_a_eff
    grad[row] -= (kappa / norm**2) * np.sum(grad_a_eff * a) * np.sign(a[row])
    return grad


def forward_flops(cfg: ImplicitConfig, batch: int, steps: int, iterations: int) -> int:
    """Matmul FLOPs of one forward (multiply-add = 2) given the total Picard `iterations` over all
    steps, which only a run tells (e.g. an implementation's iteration counts): per step Z's
    matmuls and H's update, per iteration X A~^T, and the head once."""
    p, h, n, q = cfg.input_size, cfg.hidden_size, cfg.implicit_size, cfg.output_size
    per_step = n * (p + h) + h * n + h * cfg.d_columns()
    return 2 * batch * (steps * per_step + iterations * n * n + q * h)


def output_error_bound(cfg: ImplicitConfig, params: dict, x) -> float:
    """The largest output error a Picard solver stopping at cfg.tol may show.

    Each equilibrium such a solver returns is within e = tol / (1 - rho) of the exact one in
    every entry (rho = ||A~||_inf <= kappa, so e <= tol / (1 - kappa)). Taken to first order, those errors reach output j of sample
    i as sum_t <dY_ij/dX_t, e_t> <= e * sum_t ||dY_ij/dX_t||_1, the sensitivities coming from the
    reference's own adjoint (one backward pass per output column). The later steps' solves see
    the earlier errors through H, which the sensitivities include.
    """
    x = np.asarray(x, dtype=np.float64)
    trace = forward(cfg, params, x)
    step_error = cfg.tol / (1.0 - trace.contraction)
    worst = 0.0
    for column in range(cfg.output_size):
        grad_out = np.zeros_like(trace.output)
        grad_out[:, column] = 1.0
        injected = _backward(cfg, params, x, trace, grad_out)[1]
        worst = max(worst, float(np.max(np.abs(injected).sum(axis=(0, 2)), initial=0.0)))
    return OUTPUT_BOUND_SAFETY * step_error * worst


def output_tolerance(cfg: ImplicitConfig, params: dict, x, dtype: str = "float64") -> Tolerance:
    """The tolerance policy for outputs: the solver's error bound plus the dtype's rounding."""
    steps = np.shape(x)[1]
    rounding = tolerance(dtype, steps)
    return Tolerance(atol=rounding.atol + output_error_bound(cfg, params, x), rtol=rounding.rtol)


def gradient_tolerance(cfg: ImplicitConfig, params: dict, x, grad_out,
                       dtype: str = "float64") -> dict[str, Tolerance]:
    """The tolerance policy for the gradients of <grad_out, Y>, per name backward returns.

    A policy rather than a bound. The forward solves leave each state within e = tol / (1 - rho)
    of the exact one, the adjoint solves (same stopping rule) each adjoint state within e too;
    relative to the largest state and the largest adjoint state that is r = e / max|X| +
    e / max|V| per step. Over T steps every gradient may collect T * r of its largest entry,
    times GRADIENT_BOUND_SAFETY.
    """
    x = np.asarray(x, dtype=np.float64)
    trace = forward(cfg, params, x)
    grads, _, adjoints = _backward(cfg, params, x, trace, grad_out)
    steps = trace.states.shape[0]
    step_error = cfg.tol / (1.0 - trace.contraction)
    relative = sum(step_error / max(float(np.max(np.abs(a), initial=0.0)), 1e-300)
                   for a in (trace.states, adjoints))
    relative = min(1.0, GRADIENT_BOUND_SAFETY * steps * relative)
    rounding = tolerance(dtype, steps, gradient=True)
    return {name: Tolerance(atol=rounding.atol + relative * float(np.max(np.abs(g), initial=0.0)),
                            rtol=rounding.rtol) for name, g in grads.items()}
