"""The zoo's clean base (_base.py) as one Implementation of every kind: it must pass everything."""
from _base import KINDS

from rnnbench.impls import Implementation

IMPLEMENTATION = Implementation(
    name="zoo-clean", kinds=KINDS,
    description="the zoo's reference-style torch loop, the starting point of every planted bug")
