"""rnnbench.reference — the spec: the single source of truth for what a conforming RNN does.

Configurations, parameter names and shapes, init distributions, expected tensor shapes, FLOP
counts, the tolerance policy, and a float64 NumPy forward and hand-written backward (BPTT).
The implicit RNN (kind "implicit", `ImplicitConfig`) has its own module, `reference.implicit`.
Nothing in this package imports torch: it is an independent reference, and a test enforces that.

Conventions are torch.nn's; see `rnnbench.reference.numerics` for the equations.
"""
from rnnbench.reference.config import CELL_KINDS, KINDS, SEQUENCE_KINDS, Config, ConfigError
from rnnbench.reference.flops import forward_flops
from rnnbench.reference.implicit import (
    ImplicitConfig, Normal, d_variant_of, implicit_init_spec, implicit_param_shapes,
)
from rnnbench.reference.numerics import (
    backward, flatten_outputs, forward, nest_outputs, nest_state, output_names, state_grad_names,
    state_names,
)
from rnnbench.reference.packed import backward_packed, forward_packed
from rnnbench.reference.params import (Uniform, UniformSum, init_spec, param_count, param_shapes,
                                       param_suffix)
from rnnbench.reference.shapes import io_shapes
from rnnbench.reference.tolerance import Tolerance, tolerance

__all__ = [
    "CELL_KINDS", "KINDS", "SEQUENCE_KINDS", "Config", "ConfigError", "ImplicitConfig", "Normal",
    "Tolerance", "Uniform", "UniformSum", "d_variant_of", "implicit_init_spec",
    "implicit_param_shapes",
    "backward", "backward_packed", "flatten_outputs", "forward", "forward_flops", "forward_packed",
    "init_spec", "io_shapes",
    "nest_outputs", "nest_state", "output_names", "param_count", "param_shapes", "param_suffix",
    "state_grad_names", "state_names", "tolerance",
]
