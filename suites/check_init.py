"""Init: every parameter is drawn from the distribution the spec gives it (`init_spec`).

A module's small parameters (a bias of hidden size 7) hold too few values for a test with any
power, so the module is constructed repeatedly (the runner seeds torch once per check, so the
constructions draw fresh values) until every parameter has at least SAMPLES values. Each
parameter is then tested on its own: no value outside the bounds, and a Kolmogorov-Smirnov test
at level `statistics.ALPHA` (the module docstring of `statistics` states the false-alarm rate
per run, < 1e-6, and the power).

Diagnosis: when every failing parameter does fit U(-1/H, 1/H), the bound was computed as 1/H
instead of 1/sqrt(H) (`init_bound_1_over_h`); any other failure is `init_wrong_distribution`.
"""
from __future__ import annotations

import math

import numpy as np

from rnnbench.reference import Uniform, init_spec, param_shapes
from rnnbench.suites.results import Finding
from rnnbench.suites.statistics import fits, uniform_fit
from rnnbench.suites.subject import spec_state, to_numpy

SAMPLES = 1000


def check_init(subject, case) -> dict:
    """Every parameter is drawn from its spec distribution (bounds and a KS test)."""
    cfg = case.config
    first = subject.construct(cfg)
    pmap = subject.param_map(first, cfg)
    spec = {name: dist for name, dist in init_spec(cfg).items() if pmap.entries[name]}
    constructions = math.ceil(SAMPLES / min(math.prod(param_shapes(cfg)[name]) for name in spec))
    drawn = {name: [] for name in spec}
    for index in range(constructions):
        module = first if index == 0 else subject.construct(cfg)
        for name, value in spec_state(module, cfg, pmap).items():
            drawn[name].append(to_numpy(value).ravel())
    samples = {name: np.concatenate(values) for name, values in drawn.items()}
    fitted = {name: uniform_fit(samples[name], spec[name]) for name in spec}
    wrong = [name for name in spec if not fits(fitted[name])]
    if not wrong:
        return {"constructions": constructions, "worst_p_value": min(f["p_value"] for f in fitted.values())}
    name, fit = wrong[0], fitted[wrong[0]]
    one_over_h = Uniform(-1.0 / cfg.hidden_size, 1.0 / cfg.hidden_size)
    diagnosis = ("init_bound_1_over_h" if all(fits(uniform_fit(samples[n], one_over_h)) for n in wrong)
                 else "init_wrong_distribution")
    why = (f"{fit['outside']} of {fit['samples']} values outside the bounds" if fit["outside"]
           else f"KS statistic {fit['ks']:.3f}, p = {fit['p_value']:.1e}")
    raise Finding(f"{len(wrong)} of {len(spec)} parameters not drawn from their init distribution; "
                  f"{name}: values in [{fit['min']:.3g}, {fit['max']:.3g}], expected {spec[name]}, {why}",
                  diagnosis, parameter=name, **fit)
