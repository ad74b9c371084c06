"""Searching for bugs beyond the case tables: configurations and sizes drawn with Hypothesis.

Fixed cases always leave gaps. `--fuzz N` draws N configurations with their input sizes per kind
(every option the implementation supports: layers, directions, batch_first, bias, relu,
projections, batched or not, the state given or omitted), runs the float64 forward and gradient
checks on each against the reference, and when one fails lets Hypothesis shrink it to a minimal
failing case. The search is seeded (`--seed`), so it is reproducible; the finding carries the
minimal case, which `--case JSON` reruns through every check (`rnnbench conform` prints the
command).
"""
from __future__ import annotations

import json
import random
from dataclasses import asdict, dataclass

from rnnbench.reference import CELL_KINDS, Config
from rnnbench.suites.cases import OMITTED, Case
from rnnbench.suites.results import Finding, NotSupported

MAX_SIZE = 6
MAX_LAYERS = 3
MAX_STEPS = 6
MAX_BATCH = 4


@dataclass(frozen=True)
class FuzzCase:
    """The "case" of a fuzz item: the kind and how many examples to draw."""

    kind: str
    examples: int
    quick: bool = True
    batched: bool = True
    needs: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        return f"{self.examples}-examples"

    @property
    def config(self) -> Config:
        return Config(self.kind, 3, 5)  # the plainest module of the kind: no feature needed


def case_strategy(kind: str):
    """Cases of `kind`: a valid Config with small sizes, a batch (or none) and a length."""
    from hypothesis import strategies as st

    size = st.integers(1, MAX_SIZE)
    cell = kind in CELL_KINDS

    @st.composite
    def cases(draw) -> Case:
        options = {"bias": draw(st.booleans())}
        if kind.startswith("rnn"):
            options["nonlinearity"] = draw(st.sampled_from(("tanh", "relu")))
        hidden = draw(size)
        if not cell:
            options.update(num_layers=draw(st.integers(1, MAX_LAYERS)),
                           bidirectional=draw(st.booleans()), batch_first=draw(st.booleans()))
            if kind == "lstm" and hidden > 1:
                options["proj_size"] = draw(st.integers(0, hidden - 1))
        config = Config(kind, draw(size), hidden, **options)
        batch = draw(st.one_of(st.none(), st.integers(1, MAX_BATCH)))
        h0 = draw(st.booleans())
        steps = 1 if cell else draw(st.integers(1, MAX_STEPS))
        return Case("fuzzed", config, batch, steps, h0, features=() if h0 else OMITTED)

    return cases()


def case_to_json(case: Case) -> str:
    """The one-line form `--case` takes."""
    config = {k: v for k, v in asdict(case.config).items() if v != Config.__dataclass_fields__[k].default
              or k in ("kind", "input_size", "hidden_size")}
    return json.dumps({"config": config, "batch": case.batch, "steps": case.steps, "h0": case.h0},
                      separators=(",", ":"))


def case_from_json(text: str) -> Case:
    """`--case JSON` as a Case; ValueError with a one-line reason."""
    try:
        data = json.loads(text)
        config = Config(**data["config"])
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

    from rnnbench.suites.check_numerics import check_forward, check_gradients
    from rnnbench.suites.runner import case_missing_features

    failures: dict[str, Finding] = {}
    tried = [0]

    def fails(drawn: Case) -> bool:
        if case_missing_features(subject.impl, subject.kind, drawn, "float64", subject.device, True):
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
        minimal = find(case_strategy(subject.kind), fails, settings=rules,
                       random=random.Random(subject.seed))
    except NoSuchExample:
        return {"examples": tried[0]}
    text = case_to_json(minimal)
    finding = failures[text]
    raise Finding(f"a drawn case fails: {minimal.config.describe()}, batch {minimal.batch}, "
                  f"{minimal.steps} steps{'' if minimal.h0 else ', no h0'}: {finding.message}",
                  finding.diagnosis, case=text,
                  **{k: v for k, v in finding.numbers.items() if k != "case"})
