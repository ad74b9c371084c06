"""Searching for bugs beyond the case tables: configurations and sizes drawn with Hypothesis.

Fixed cases always leave gaps. `--fuzz N` draws N configurations with their input sizes per kind
whose suite record has a strategy (`SuiteKind.fuzz_cases`; torch.nn's kinds: every option the
implementation supports, layers, directions, batch_first, bias, relu, projections, batched or
not, the state given or omitted), runs the float64 forward and gradient checks on each against
the reference, and when one fails lets Hypothesis shrink it to a minimal failing case. The
search is seeded (`--seed`), so it is reproducible; the finding carries the minimal case, which
`--case JSON` reruns through every check (`rnnbench conform` prints the command).
"""
from __future__ import annotations

import dataclasses
import json
import random
from dataclasses import dataclass

from rnnbench.reference.kinds import config_from_dict
from rnnbench.suites.cases import OMITTED, Case
from rnnbench.suites.check_numerics import check_forward, check_gradients
from rnnbench.suites.features import case_missing_features
from rnnbench.suites.results import Finding, NotSupported

@dataclass(frozen=True)
class FuzzCase:
    """The "case" of a fuzz item: how many examples to draw, and the plainest configuration of
    the kind (what the search needs of the implementation whatever it draws)."""

    config: object
    examples: int
    quick: bool = True
    batched: bool = True
    needs: tuple[str, ...] = ()

    @property
    def kind(self) -> str:
        return self.config.kind

    @property
    def name(self) -> str:
        return f"{self.examples}-examples"

    def runs(self, group: str) -> bool:
        return True


def case_to_json(case: Case) -> str:
    """The one-line form `--case` takes: the configuration's fields that differ from their
    defaults (and those without one), the batch, the steps, whether h0 is given."""
    config = {"kind": case.config.kind}
    config.update((f.name, getattr(case.config, f.name)) for f in dataclasses.fields(case.config)
                  if f.name != "kind" and getattr(case.config, f.name) != f.default)
    return json.dumps({"config": config, "batch": case.batch, "steps": case.steps, "h0": case.h0},
                      separators=(",", ":"))


def case_from_json(text: str) -> Case:
    """`--case JSON` as a Case; ValueError with a one-line reason."""
    try:
        data = json.loads(text)
        config = config_from_dict(data["config"])
        batch, steps, h0 = data.get("batch"), int(data.get("steps", 1)), bool(data.get("h0", True))
    except (ValueError, TypeError, KeyError) as exc:
        raise ValueError(f"--case: expected {{\"config\": {{\"kind\": ..., \"input_size\": ..., "
                         f"\"hidden_size\": ...}}, \"batch\": N or null, \"steps\": N, \"h0\": "
                         f"true}}: {exc}") from None
    if batch is not None and (not isinstance(batch, int) or batch < 1) or steps < 1:
        raise ValueError("--case: batch must be null or a positive integer, steps positive")
    return Case("given", config, batch, steps, h0, features=() if h0 else OMITTED)


def check_fuzz(subject, case: FuzzCase) -> dict:
    """No drawn case fails the float64 forward and gradient checks."""
    from hypothesis import HealthCheck, find, settings
    from hypothesis.errors import NoSuchExample

    failures: dict[str, Finding] = {}
    tried = [0]

    def fails(drawn: Case) -> bool:
        if case_missing_features(subject, drawn, "float64", True):
            return False  # a feature the implementation lacks: not a finding
        tried[0] += 1
        try:
            check_forward(subject, drawn, dtype="float64")
            check_gradients(subject, drawn, dtype="float64")
        except Finding as finding:
            failures[case_to_json(drawn)] = finding
            return True
        except NotSupported:
            return False
        return False

    rules = settings(max_examples=case.examples, database=None, deadline=None,
                     suppress_health_check=list(HealthCheck))
    try:
        minimal = find(subject.suite.fuzz_cases(subject.kind), fails, settings=rules,
                       random=random.Random(subject.seed))
    except NoSuchExample:
        return {"examples": tried[0]}
    text = case_to_json(minimal)
    finding = failures[text]
    raise Finding(f"a drawn case fails: {minimal.config.describe()}, batch {minimal.batch}, "
                  f"{minimal.steps} steps{'' if minimal.h0 else ', no h0'}: {finding.message}",
                  finding.diagnosis, case=text,
                  **{k: v for k, v in finding.numbers.items() if k != "case"})
