"""rnnbench.impls — the implementation contract, the registry and the built-in implementations.

`load(target)` turns what a user names (a registered name, `package.module:attr` or
`path/to/file.py:attr`) into an `Implementation`; `registered()` lists the built-ins and the
implementations other packages register under the `rnnbench.impls` entry-point group.
"""
from rnnbench.impls.base import FEATURES, Implementation, required_features
from rnnbench.impls.registry import BUILTINS, load, registered

__all__ = ["BUILTINS", "FEATURES", "Implementation", "load", "registered", "required_features"]
