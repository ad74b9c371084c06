"""implicit: the Implicit RNN of the implicit deep learning framework, in plain PyTorch.

    model = ImplicitRNN(input_dim=1, output_dim=1, hidden_dim=128, implicit_hidden_dim=64)
    model(torch.randn(100, 60, 1)).shape == (100, 1)      # input (batch, seq, features)

The equations and both D variants are the spec's (`rnnbench.reference.implicit`). Each step's
equilibrium X = phi(X A~^T + Z) is solved by Picard iteration from X = 0 and differentiated by the
implicit function theorem in a custom autograd Function, whose backward solves the adjoint fixed
point V = S * (V A~ + G) by the same iteration. The well-posedness rescale A~ = A min(1, kappa /
||A||_inf) is ordinary autograd code outside that Function, so A gets the exact gradient of the
rescale (the spec's choice; torchidl passes dA~ straight through).

Unlike torchidl, the solver settings live on each instance (a second model never changes the
first), models deep-copy and pickle, and the iteration counts of the last forward and backward
are kept in `model.last_solver_stats`.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import torch
from torch import nn

from rnnbench.impls.base import Implementation
from rnnbench.reference.implicit import ImplicitConfig, implicit_param_shapes

_PHI = {"relu": torch.relu, "tanh": torch.tanh}


def _dphi(name: str, pre: torch.Tensor) -> torch.Tensor:
    return (pre > 0).to(pre.dtype) if name == "relu" else 1 - torch.tanh(pre) ** 2


class ImplicitSolverWarning(RuntimeWarning):
    """A fixed-point solve stopped at its iteration cap before meeting its tolerance."""


@dataclass
class SolverStats:
    """Picard iterations per solve of one forward (one per time step) and of its backward."""

    forward_iterations: list[int] = field(default_factory=list)
    backward_iterations: list[int] = field(default_factory=list)
    unconverged: int = 0  # solves that hit the cap, forward and backward together

    def summary(self) -> dict:
        """Totals and maxima, JSON-ready, for benchmark records."""
        return {"forward_solves": len(self.forward_iterations),
                "forward_iterations": sum(self.forward_iterations),
                "forward_max": max(self.forward_iterations, default=0),
                "backward_solves": len(self.backward_iterations),
                "backward_iterations": sum(self.backward_iterations),
                "backward_max": max(self.backward_iterations, default=0),
                "unconverged": self.unconverged}


@dataclass(frozen=True)
class Picard:
    """A stopping rule: stop when the max-abs change over the whole batch is below `tol`; give up
    (with an ImplicitSolverWarning) after `max_iter` iterations, returning the last iterate."""

    tol: float
    max_iter: int

    def __post_init__(self) -> None:
        if not (isinstance(self.tol, (int, float)) and self.tol > 0):
            raise ValueError(f"solver tolerance must be a positive number, got {self.tol!r}")
        if not isinstance(self.max_iter, int) or isinstance(self.max_iter, bool) or self.max_iter < 1:
            raise ValueError(f"solver iteration cap must be a positive integer, got {self.max_iter!r}")

    def solve(self, step, start: torch.Tensor, what: str) -> tuple[torch.Tensor, int, bool]:
        """Iterate x <- step(x) from `start`; return (x, iterations, converged)."""
        x = start
        for iteration in range(1, self.max_iter + 1):
            new = step(x)
            change = (new - x).abs().max().item() if new.numel() else 0.0
            x = new
            if change < self.tol:
                return x, iteration, True
        warnings.warn(f"{what} fixed point did not converge in {self.max_iter} iterations "
                      f"(last change {change:.3e} >= tol {self.tol:.1e}); using the last iterate",
                      ImplicitSolverWarning, stacklevel=2)
        return x, self.max_iter, False


class Equilibrium(torch.autograd.Function):
    """X = phi(X A~^T + Z) for A~ (n x n) and Z (m x n); backward by implicit differentiation."""

    @staticmethod
    def forward(ctx, a_eff, z, phi: str, forward_rule: Picard, backward_rule: Picard,
                stats: SolverStats):
        activation = _PHI[phi]
        x, iterations, converged = forward_rule.solve(
            lambda x: activation(torch.addmm(z, x, a_eff.t())), torch.zeros_like(z), "forward")
        stats.forward_iterations.append(iterations)
        stats.unconverged += not converged
        ctx.save_for_backward(a_eff, z, x)
        ctx.phi, ctx.rule, ctx.stats = phi, backward_rule, stats
        return x

    @staticmethod
    def backward(ctx, grad_x):
        a_eff, z, x = ctx.saved_tensors
        s = _dphi(ctx.phi, torch.addmm(z, x, a_eff.t()))
        # Per sample, v = s * (A~^T v + g); in rows V = S * (V A~ + G).
        v, iterations, converged = ctx.rule.solve(
            lambda v: s * torch.addmm(grad_x, v, a_eff), torch.zeros_like(grad_x), "backward")
        ctx.stats.backward_iterations.append(iterations)
        ctx.stats.unconverged += not converged
        return v.t() @ x, v, None, None, None, None


class ImplicitRNN(nn.Module):
    """The Implicit RNN: batch-first input (batch, seq, input_dim) -> output (batch, output_dim).

    Parameters `A`, `B`, `C`, `D`, `linear.weight`, `linear.bias` (shapes and init as the spec's
    `implicit_param_shapes` / `implicit_init_spec`). Solver settings use torchidl's names: `tol`
    and `mitr` for the forward solve, `grad_tol` and `grad_mitr` for the backward one (default:
    the forward's). `d_variant="library"` gives torchidl's D over [U_t, H_{t-1}].

    Every argument is keyword-only: torchidl's positional order (input, output, implicit, hidden)
    differs from the order its documentation lists, and a swapped hidden and implicit size would
    still run, silently.
    """

    def __init__(self, *, input_dim: int, output_dim: int, hidden_dim: int, implicit_hidden_dim: int,
                 phi: str = "relu", kappa: float = 0.99, tol: float = 3e-6, mitr: int = 300,
                 grad_tol: float | None = None, grad_mitr: int | None = None,
                 d_variant: str = "documented", device=None, dtype=None):
        super().__init__()
        # ImplicitConfig validates sizes, phi, kappa, tol and the variant with one-line errors.
        self.config = ImplicitConfig(input_dim, hidden_dim, implicit_hidden_dim, output_dim,
                                     phi=phi, kappa=kappa, tol=tol, max_iter=mitr,
                                     d_variant=d_variant)
        self.forward_rule = Picard(tol, mitr)
        self.backward_rule = Picard(tol if grad_tol is None else grad_tol,
                                    mitr if grad_mitr is None else grad_mitr)
        self.last_solver_stats = SolverStats()
        factory = {"device": device, "dtype": dtype}
        for name, shape in implicit_param_shapes(self.config).items():
            if not name.startswith("linear."):
                self.register_parameter(name, nn.Parameter(torch.empty(shape, **factory)))
        self.linear = nn.Linear(hidden_dim, output_dim, **factory)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """A, B, C, D from randn / n (torchidl's init); the head keeps nn.Linear's."""
        with torch.no_grad():
            for parameter in (self.A, self.B, self.C, self.D):
                parameter.normal_(0.0, 1.0 / self.config.implicit_size)
        self.linear.reset_parameters()

    def extra_repr(self) -> str:
        return self.config.describe()

    def well_posed_a(self) -> torch.Tensor:
        """A~ = A * min(1, kappa / ||A||_inf), differentiable; the parameter is left as it is."""
        norm = self.A.abs().sum(dim=1).max()
        return self.A * torch.clamp(self.config.kappa / norm, max=1.0)

    def _check_input(self, x: torch.Tensor) -> None:
        if not isinstance(x, torch.Tensor):
            raise TypeError(f"ImplicitRNN: expected a tensor, got {type(x).__name__}")
        if x.dim() != 3:
            raise ValueError(f"ImplicitRNN: expected input (batch, seq, {self.config.input_size}), "
                             f"got {x.dim()}D input of shape {tuple(x.shape)}")
        if x.shape[2] != self.config.input_size:
            raise ValueError(f"ImplicitRNN: input has {x.shape[2]} features, expected "
                             f"{self.config.input_size}")
        if x.shape[1] == 0:
            raise ValueError("ImplicitRNN: input has no time steps")
        if x.dtype != self.A.dtype or x.device != self.A.device:
            raise TypeError(f"ImplicitRNN: input is {x.dtype} on {x.device}, parameters are "
                            f"{self.A.dtype} on {self.A.device}")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self._check_input(x)
        cfg, p = self.config, self.config.input_size
        stats = self.last_solver_stats = SolverStats()
        a_eff = self.well_posed_a()
        b_input, b_hidden = self.B[:, :p], self.B[:, p:]
        input_terms = (x @ b_input.t()).unbind(1)  # U_t B_u^T for all steps in one matmul
        h = x.new_zeros(x.shape[0], cfg.hidden_size)
        for u, z_input in zip(x.unbind(1), input_terms):
            z = z_input + h @ b_hidden.t()
            state = Equilibrium.apply(a_eff, z, cfg.phi, self.forward_rule, self.backward_rule,
                                      stats)
            d_input = torch.cat([u, h], dim=1) if cfg.d_variant == "library" else u
            h = state @ self.C.t() + d_input @ self.D.t()
        return self.linear(h)


IMPLEMENTATION = Implementation(
    name="implicit",
    kinds={"implicit": ImplicitRNN},
    description="ImplicitRNN: Picard fixed-point solves with an implicit-function backward",
)
