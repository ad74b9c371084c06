"""What the suites know of each kind, beside its spec record (`rnnbench.reference.kinds`): the
cases it is checked on, the checks only its family has, and the hooks through which its family
explains a failure. One `SuiteKind` per kind, registered with `register_kind`: torch.nn's six
kinds (`rnnbench.suites.torch_nn`), the implicit RNN (`rnnbench.suites.implicit`) and any kind
registered later stand on the same footing, and the runner and the generic checks read the
record without naming a kind.

Every hook is optional; without it the generic checks do the plain thing the spec record allows
(the parameters by their spec names, forward's return value a tensor or a flat tuple in the
spec's output order, no named diagnosis).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from rnnbench.reference.kinds import KindSpec, register

HALF_DTYPES = ("bfloat16", "float16")


def _smooth(cfg) -> bool:
    return True


@dataclass(frozen=True)
class SuiteKind:
    """A kind in the suites.

    Cases: `cases` are the general rows (parameters, shapes, forward and gradients, state, wrong
    inputs, inputs unmodified, copies); `construction_cases` the rows whose construction alone is
    examined (init; default: `cases`). `dtypes`: those of the forward and gradient checks, the
    tightest first (half precision is left to the full list). `wrong_inputs`: the
    `check_errors.WrongInput` rows. `extra_checks`: rows only this family has, as keyword
    arguments of `rnnbench.suites.catalogue.Check` (their `table`, a tuple of cases, included).
    `contract`: whose contract the messages name ("torch.nn's").

    Hooks, all optional:
    - `param_map(subject, cfg, shapes)`: a `ParamMap` for a module whose state_dict keys
      (with their shapes) are not the spec's names (raise `parammap.MappingError` when it
      cannot be told); without it only nested names (a module inside another) are found;
    - `optional_parameters(cfg)`: spec parameters a module may lack, held at zero (a second
      bias), reported by the family's own checks;
    - `summed_parameters(cfg)`: an optional parameter -> the one the function adds it to (b_hh
      to b_ih): a module lacking one holds their sum in the other, whose init is then judged
      against the sum of the two distributions;
    - `flatten_result(cfg, result)`: forward's return value as a tuple of tensors in the spec's
      output order, or None when its structure is not the contract's;
    - `sizes_of(cfg, input)`: the (batch or None, steps) of an input;
    - `shape_diagnosis(cfg, batch, steps, name, shape)`: the mistake a wrong output shape shows;
    - `final_state(cfg, observed, tol)`: the mistake outputs that contradict each other show
      (None: consistent), judged by the shapes check;
    - `diagnose(run, observed, message="")`: the mistake a forward that differs from the
      reference shows (`observed` None: it raised, with `message`);
    - `locate(run, observed, expected, name, numbers)`: where it first differs, added to
      `numbers`;
    - `diagnose_gradients(run, observed, expected, grad_out)`: the mistake wrong gradients show;
    - `diagnose_init(cfg, samples, wrong)`: the mistake an init that fails its test shows;
    - `smooth(cfg)`: whether gradients are smooth enough to be judged in half precision;
    - `probes`: feature -> probe(subject) giving why the module refuses it (or None): forward
      raising on what no constructor argument announces (unbatched input, packed sequences),
      or the constructor raising on an argument it takes (bidirectional=True);
    - `fuzz_cases(kind)`: a Hypothesis strategy of cases, for `--fuzz`."""

    cases: tuple
    construction_cases: tuple | None = None
    dtypes: tuple[str, ...] = ("float64", "float32")
    wrong_inputs: tuple = ()
    extra_checks: tuple[dict, ...] = ()
    contract: str = "the spec's"
    param_map: Callable | None = None
    optional_parameters: Callable | None = None
    summed_parameters: Callable | None = None
    flatten_result: Callable | None = None
    sizes_of: Callable | None = None
    shape_diagnosis: Callable | None = None
    final_state: Callable | None = None
    diagnose: Callable | None = None
    locate: Callable | None = None
    diagnose_gradients: Callable | None = None
    diagnose_init: Callable | None = None
    smooth: Callable = _smooth
    probes: dict[str, Callable] = field(default_factory=dict)
    fuzz_cases: Callable | None = None

    @property
    def plain_dtype(self) -> str:
        """The dtype of the checks that run once (shapes, inputs, wrong inputs, copies): float32
        where the kind runs in it, else its tightest."""
        return "float32" if "float32" in self.dtypes else self.dtypes[0]

    @property
    def initial_cases(self) -> tuple:
        return self.cases if self.construction_cases is None else self.construction_cases


_RECORDS: dict[str, SuiteKind] = {}


def register_kind(spec: KindSpec, suite: SuiteKind) -> None:
    """Make a kind known to the spec (a second of the same name replaces the first) and give it
    its suite record: from then on `rnnbench conform`, the benchmarks and the report handle it
    like every other kind."""
    register(spec)
    _RECORDS[spec.name] = suite


def suite_record(kind: str) -> SuiteKind:
    """The suite record of a registered kind; KeyError naming the registered ones.
    `rnnbench.suites.catalogue.suite_kind` is the same with the built-in kinds registered."""
    try:
        return _RECORDS[kind]
    except KeyError:
        raise KeyError(f"no suite record for kind {kind!r} (registered: "
                       f"{', '.join(_RECORDS) or 'none'})") from None


def registered_kinds() -> list[str]:
    """The kinds with a suite record, in the order they were registered."""
    return list(_RECORDS)
