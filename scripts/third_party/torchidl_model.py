"""torchidl's ImplicitRNN (the implicit deep learning package) as the implicit kind.

Its constructor already takes the spec's keyword arguments (input_dim, output_dim, hidden_dim,
implicit_hidden_dim, and the solver's kappa, tol, mitr, grad_tol, grad_mitr through **kwargs),
so the class itself is the constructor: nothing to adapt.
"""
import torchidl

from rnnbench.impls import Implementation

IMPLEMENTATION = Implementation(
    name="torchidl", kinds={"implicit": torchidl.ImplicitRNN},
    description="torchidl.ImplicitRNN as published")
