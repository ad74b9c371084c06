"""Construction: the spec's parameter names and shapes (every kind's), and for the torch.nn
family both biases, the dtype/device arguments honoured, torch.nn's defaults kept, invalid
arguments rejected as torch.nn rejects them, and forward called and returning as torch.nn's is
(the state as one argument, a cell's h alone)."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from rnnbench.errors import one_line
from rnnbench.impls.adapt import (ARGUMENT_FEATURES, BatchFirstAdapter, changed_defaults,
                                  sizes_reversed, split_state, state_after)
from rnnbench.reference import Config
from rnnbench.reference.kinds import kind_of
from rnnbench.suites.check_errors import REJECTIONS, rejection_names
from rnnbench.suites.features import unsupported
from rnnbench.suites.layers import blocks
from rnnbench.suites.parammap import Piece
from rnnbench.suites.results import Finding
from rnnbench.suites.run import (Run, describe_structure, extra_values, listed_final_state,
                                 state_flat, steps_listed)
from rnnbench.suites.subject import TORCH_DTYPES, call, spec_parameters, spec_state
from rnnbench.wording import listed


def check_parameters(subject, case) -> dict:
    """state_dict holds exactly the spec's names and shapes, stored in parameters of the default
    dtype. Names that differ are one finding, with the map the other checks use instead."""
    module = subject.construct(case.config)
    cfg, pmap = subject.layout(module, case.config)
    stored = spec_parameters(module, cfg, pmap)
    contract = subject.suite.contract
    renamed = {name: pieces for name, pieces in pmap.entries.items()
               if pieces and pieces != (Piece(name),)}
    read_as = {p.describe(): name for name, pieces in renamed.items() for p in pieces}
    extra = [key for key in call("state_dict()", module.state_dict) if key not in pmap.keys()]
    beside = f"; it also has entries {contract} has not: {listed(extra)}" if extra else ""
    # A map the user gave says the names differ on purpose: it is honoured, not held against them.
    if renamed and not subject.impl.param_map:
        what = "layouts" if all(p.key == name for name, pieces in renamed.items()
                                for p in pieces) else "names"
        assumed = f"; {pmap.assumed}" if pmap.assumed else ""
        raise Finding(f"state_dict {what} differ from {contract}; the checks read them as: "
                      f"{pmap.describe()}{assumed}{beside}", "param_names", param_map=read_as)
    if extra:
        raise Finding(f"state_dict has entries {contract} has not: {listed(extra)}",
                      "param_names", parameter=extra[0])
    default = torch.get_default_dtype()
    odd = [name for name, parts in stored.items() if parts[0][0].dtype != default]
    if odd:
        raise Finding(f"{odd[0]} is {stored[odd[0]][0][0].dtype}, expected the default dtype "
                      f"{default}", parameter=odd[0])
    return {"parameters": len(stored), **({"param_map": read_as} if read_as else {})}


def check_defaults(subject, case) -> dict:
    """Code written for torch.nn that passes the sizes by position and leaves the rest out
    builds the module it means: the constructor builds torch.nn's defaults
    (`_require_default_built`), takes the sizes in torch.nn's order (`sizes_reversed`), and
    defaults every torch.nn argument its signature has to torch.nn's value
    (`changed_defaults`), the arguments of a feature the implementation lacks aside."""
    _require_default_built(subject, case)
    constructor = subject.impl.kinds[subject.kind]
    reversed_sizes = sizes_reversed(subject.kind, constructor)
    if reversed_sizes:
        raise Finding(f"the constructor takes the hidden size first (`{reversed_sizes[0]}`, then "
                      f"`{reversed_sizes[1]}`), where {subject.suite.contract} takes "
                      "(input_size, hidden_size): code written for it that passes them by "
                      "position gets another module", "sizes_reversed")
    lacking = _lacking(subject)
    changed = {name: why for name, why in changed_defaults(subject.kind, constructor).items()
               if ARGUMENT_FEATURES.get(name) not in lacking}
    if changed:
        them = "it" if len(changed) == 1 else "them"
        raise Finding(f"{listed(changed.values())}: code written for {subject.suite.contract} "
                      f"module that leaves {them} out gets another module, or none",
                      "changed_default", argument=next(iter(changed)))
    return {}


def _require_default_built(subject, case) -> None:
    """batch_first=False, torch.nn's default, is not refused: the other checks build such a
    module batch_first=True (`BatchFirstAdapter`), and this is the one that says so."""
    if case.config.constructor_kwargs().get("batch_first") is not False:
        return
    built = subject.construct(case.config)
    if isinstance(built, BatchFirstAdapter):
        raise Finding(f"batch_first=False, {subject.suite.contract} default, is refused "
                      f"({built.refused}): code written for it that leaves batch_first out "
                      "gets no module (the checks built it batch_first=True and handed it the "
                      "input batch-first)", "changed_default", argument="batch_first")


def check_state_argument(subject, case) -> dict:
    """forward takes the state second, and an LSTM's as torch.nn's one (h, c) tuple, not after
    other arguments (`rnnbench.impls.adapt.state_after`) nor as two arguments (`split_state`):
    the other checks pass it by name, or apart, so this is the one that says code written for
    torch.nn would pass it as another argument."""
    after = state_after(subject.impl.kinds[subject.kind])
    if after:
        state, before = after
        raise Finding(f"forward takes the state as `{state}`, after "
                      f"{listed([f'`{name}`' for name in before])}, where "
                      f"{subject.suite.contract} forward takes it second: code written for it "
                      f"passes the state as `{before[0]}`", "state_not_second")
    split = split_state(subject.kind, subject.impl.kinds[subject.kind])
    if split:
        raise Finding(f"forward takes the state as two arguments (`{split[0]}`, `{split[1]}`) "
                      f"where {subject.suite.contract} forward takes one (h, c) tuple: code "
                      f"written for it passes the tuple as `{split[0]}`", "split_state")
    return {}


def check_output_structure(subject, case) -> dict:
    """A module returns torch.nn's structure: a cell its state itself, h or an LSTM's (h, c),
    not inside a tuple or the output-and-state structure of a layer; a layer its output sequence
    and final state as one tensor each, not a list of steps or of layers. The other checks read
    through those (`rnnbench.suites.torch_nn.flatten_result`), so this is the one that says code
    written for torch.nn gets them."""
    run = Run(subject, case, subject.suite.plain_dtype, "output-structure")
    x, hx = run.tensors()
    result = run.subject_call(x, hx)
    if not run.cfg.is_cell and steps_listed(result):
        raise Finding(f"forward returns the output sequence as {describe_structure(result[0])} "
                      f"of steps where {subject.suite.contract} returns one tensor: code written "
                      "for it gets the list", "output_not_stacked")
    lstm = run.cfg.family == "lstm"
    if not run.cfg.is_cell and extra_values(result):
        raise Finding(f"forward returns {describe_structure(result)}, None after the output and "
                      f"the state, where {subject.suite.contract} returns those two alone: code "
                      "written for it unpacks two", "extra_values_returned")
    if not run.cfg.is_cell and lstm and state_flat(result):
        raise Finding(f"forward returns (output, h_n, c_n), three values, where "
                      f"{subject.suite.contract} returns (output, (h_n, c_n)): code written for "
                      "it unpacks two", "state_not_nested")
    if not run.cfg.is_cell and listed_final_state(run.cfg, result) is not None:
        expected = "(h_n, c_n), each one tensor" if lstm else "h_n as one tensor"
        raise Finding(f"forward returns the final state as {describe_structure(result[1])}, one "
                      f"entry per layer and direction, where {subject.suite.contract} returns "
                      f"{expected}: code written for it gets the list", "state_not_stacked")
    run.unpack(run.cfg, x, result)  # a structure no check reads fails as it does everywhere
    if run.cfg.is_cell and not _torch_nn_structure(run.cfg, result):
        expected = "(h, c)" if lstm else "h alone"
        raise Finding(f"forward returns {describe_structure(result)} where "
                      f"{subject.suite.contract} cell returns {expected}: code written for it "
                      "gets the wrapping", "wrapped_output")
    return {}


def _torch_nn_structure(cfg: Config, result) -> bool:
    """Whether a cell's return value is torch.nn's own: h itself, or an LSTM's (h, c) tuple of
    two tensors."""
    if cfg.family != "lstm":
        return isinstance(result, torch.Tensor)
    return (isinstance(result, (tuple, list)) and len(result) == 2
            and all(isinstance(part, torch.Tensor) for part in result))


def _lacking(subject) -> dict[str, str]:
    """The features the implementation lacks among those a constructor argument controls:
    declared, absent from its signature, or refused (each asked once per process)."""
    return unsupported(subject, tuple(ARGUMENT_FEATURES.values()))


def check_biases(subject, case) -> dict:
    """With bias=True every layer has both biases, b_ih and b_hh (torch.nn's two-bias layout)."""
    cfg = case.config
    module = subject.construct(cfg)
    missing = subject.param_map(module, cfg).missing
    if not missing:
        return {}
    biases = [name for name, block in blocks(cfg).items() if block.startswith("bias")]
    if set(missing) >= set(biases):
        raise Finding(f"no biases although bias=True ({', '.join(missing[:4])} missing); the other "
                      "checks hold them at zero", "biases_missing", parameter=missing[0])
    raise Finding(f"one bias per layer: {', '.join(missing[:4])} missing (torch.nn has b_ih and "
                  "b_hh); the other checks hold it at zero", "single_bias", parameter=missing[0])


def check_dtype_device(subject, case, dtype: str) -> dict:
    """The constructor's dtype= and device= arguments are honoured. The float32 variant runs
    with float64 as torch's default dtype, so a constructor that ignores dtype= is seen."""
    cfg = case.config
    device = torch.device(subject.device)
    default = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64 if dtype == "float32" else torch.float32)
    try:
        module = subject.construct(cfg, dtype=TORCH_DTYPES[dtype], device=device)
    finally:
        torch.set_default_dtype(default)
    for name, value in spec_state(module, cfg, subject.param_map(module, cfg)).items():
        if value.dtype != TORCH_DTYPES[dtype] or value.device.type != device.type:
            raise Finding(f"with dtype=torch.{dtype}, device={device.type!r}: {name} is "
                          f"{value.dtype} on {value.device}", "dtype_ignored", parameter=name)
    return {}


@dataclass(frozen=True)
class InvalidArgument:
    """A constructor argument torch.nn refuses. `at_forward`: torch.nn itself only notices when
    the module first runs (RNNCell's nonlinearity), so rejecting it then is accepted too."""

    name: str
    changes: Callable[[Config], dict]
    kinds: tuple[str, ...]
    at_forward: bool = False


def check_invalid_arguments(subject, case, arguments: tuple[InvalidArgument, ...]) -> dict:
    """Arguments torch.nn refuses raise ValueError, TypeError or RuntimeError, where the valid
    arguments construct a module (a constructor that raises on everything proves nothing by
    raising on these). An argument of a feature the implementation lacks (declared, not in its
    signature, or refused) is not tried: a module without dropout need not validate a rate."""
    cfg = case.config
    try:
        built = subject.construct(cfg)
    except Finding as finding:
        raise Finding(f"with valid arguments too, {finding.message}, so rejecting invalid ones "
                      "proves nothing", "rejects_valid_input", **finding.numbers) from None
    if isinstance(built, BatchFirstAdapter):  # asked as it builds: its refusal is said once
        cfg = cfg.replace(batch_first=True)
    constructor = subject.impl.constructor(subject.kind)
    shapes = kind_of(cfg).io_shapes(cfg, case.batch, case.steps)
    accepted, wrong_type = [], []
    lacking = _lacking(subject)
    tried = [wrong for wrong in arguments if cfg.kind in wrong.kinds and not any(
        ARGUMENT_FEATURES.get(name) in lacking for name in wrong.changes(cfg))]
    for wrong in tried:
        try:
            module = constructor(**{**cfg.constructor_kwargs(), **wrong.changes(cfg)})
            if wrong.at_forward:
                module(torch.zeros(shapes["input"]))
        except REJECTIONS:
            continue
        except Exception as exc:
            wrong_type.append(f"{wrong.name} raised {one_line(exc)}")
            continue
        accepted.append(wrong.name)
    taken = len(tried)  # never 0: hidden_size=-1 is tried on every kind
    if accepted:
        raise Finding(f"{len(accepted)} of {taken} invalid arguments accepted: "
                      + ", ".join(accepted) + "".join(f"; rejected with a type torch.nn does not "
                                                       f"raise: {w}" for w in wrong_type))
    if wrong_type:
        raise Finding(f"{len(wrong_type)} of {taken} invalid arguments rejected with an exception "
                      f"type torch.nn does not raise ({rejection_names()}): " + "; ".join(wrong_type),
                      "wrong_exception_type")
    return {"tried": taken}
