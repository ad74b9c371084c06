"""Init: every parameter is drawn from the distribution the spec gives it (`KindSpec.init_spec`).

A module's small parameters (a bias of hidden size 7) hold too few values for a test with any
power, so the module is constructed repeatedly (the runner seeds torch once per check, so the
constructions draw fresh values) until every parameter has at least SAMPLES values. A larger
parameter gives more values from the same constructions, and so a sharper test (a bound of
1/sqrt(I + H) instead of 1/sqrt(H) is a CDF gap the smallest parameter's 1000 values miss), up
to MAX_SAMPLES: past that, more values buy no power that matters and cost seconds of sorting (the
implicit model's documented example, 1000 constructions of a 4096-value weight). Each
parameter is then tested on its own: no value outside a uniform's bounds, and a
Kolmogorov-Smirnov test at level `statistics.ALPHA` (the module docstring of `statistics` states
the false-alarm rate per run and the power).

A module holding one bias where the function adds two (`SuiteKind.summed_parameters`) is
judged on the sum's distribution: with torch.nn's init, b_ih + b_hh is spread over twice the
bound, so a lone bias drawn like one of them starts the module from other functions.

A failure is `init_wrong_distribution`, unless the kind's `diagnose_init` names the mistake
(the torch.nn family: a bound of 1/H instead of 1/sqrt(H)).
"""
from __future__ import annotations

import math

import numpy as np

from rnnbench.reference import UniformSum
from rnnbench.reference.kinds import kind_of
from rnnbench.suites.results import Finding
from rnnbench.suites.statistics import fits, sample_fit
from rnnbench.suites.subject import spec_values, to_numpy

SAMPLES = 1000
MAX_SAMPLES = 100_000


def check_init(subject, case) -> dict:
    """Every parameter is drawn from its spec distribution (bounds and a KS test), each judged
    on its own: one of the wrong shape is reported after the others were judged."""
    first = subject.construct(case.config)
    cfg, pmap = subject.layout(first, case.config)
    spec = kind_of(cfg)
    shaped, misshaped = spec_values(first, cfg, pmap)
    spec_dists = spec.init_spec(cfg)
    dists = {name: dist for name, dist in spec_dists.items() if name in shaped}
    # A lone bias where the function adds two holds their sum: it is judged as that sum.
    summed = subject.suite.summed_parameters(cfg) if subject.suite.summed_parameters else {}
    stands_for = {summed[name]: name for name in pmap.missing if summed.get(name) in dists}
    for present, lacking in stands_for.items():
        dists[present] = UniformSum(dists[present], spec_dists[lacking])
    shapes = spec.param_shapes(cfg)
    constructions = math.ceil(SAMPLES / max(1, min((math.prod(shapes[name]) for name in dists),
                                                   default=SAMPLES)))
    drawn = {name: [] for name in dists}
    counts = dict.fromkeys(dists, 0)
    for index in range(constructions if dists else 0):
        module = first if index == 0 else subject.construct(case.config)
        values = spec_values(module, cfg, pmap)[0]
        for name in (name for name in dists if counts[name] < MAX_SAMPLES):
            drawn[name].append(to_numpy(values[name]).ravel())
            counts[name] += drawn[name][-1].size
    samples = {name: np.concatenate(values) for name, values in drawn.items()}
    fitted = {name: sample_fit(samples[name], dists[name]) for name in dists}
    wrong = [name for name in dists if not fits(fitted[name])]
    if not wrong and misshaped:
        finding = next(iter(misshaped.values()))
        finding.message += (f"; the other {len(dists)} parameters fit their init distributions"
                            if dists else "")
        raise finding
    if not wrong:
        return {"constructions": constructions,
                "worst_p_value": min(f["p_value"] for f in fitted.values())}
    name, fit = wrong[0], fitted[wrong[0]]
    diagnose = subject.suite.diagnose_init
    diagnosis = (diagnose(cfg, samples, wrong) if diagnose else None) or "init_wrong_distribution"
    if all(name in stands_for and fits(sample_fit(samples[name], spec_dists[name]))
           for name in wrong):  # each lone bias drawn like one of the two it stands for
        diagnosis = "single_bias"
    # A continuous draw gives an exact 0 about once in 2^24 float32 values: more are a part of
    # the tensor left at zero, which the range and the KS statistic do not show.
    zeros = int(np.count_nonzero(samples[name] == 0))
    why = (f"{fit['outside']} of {fit['samples']} values outside the bounds" if fit["outside"]
           else (f"{zeros} of {samples[name].size} values exactly 0, " if zeros > 1 else "")
           + f"KS statistic {fit['ks']:.3f}, p = {fit['p_value']:.1e}")
    alone = (f" (the sum of its and {stands_for[name]}'s, which the module lacks)"
             if name in stands_for else "")
    raise Finding(f"{len(wrong)} of {len(dists)} parameters not drawn from their init "
                  f"distribution; {name}: values in [{fit['min']:.3g}, {fit['max']:.3g}], expected "
                  f"{dists[name]}{alone}, {why}", diagnosis, parameter=name, **fit)
