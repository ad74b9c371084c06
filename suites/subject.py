"""The implementation under test, as the checks see it, and its parameters.

`Subject` is one kind of one implementation on one device, with the kind's suite record
(`rnnbench.suites.kinds.SuiteKind`). Every call into the implementation goes through `call`, so
whatever it raises on a valid input becomes a `Finding` (a failure of the implementation), never
an error of the harness. Constructors are called with the configuration's arguments (torch.nn's
for its kinds, through `rnnbench.impls.adapt` where the implementation's own signature differs).

Parameters are found in the module's state_dict (as torch.nn's checkpoints are) through a
`ParamMap` (`rnnbench.suites.parammap`): the identity when the module speaks the spec's names,
else the user's map, the kind's own inference or the names inside a nested module. They are set
through load_state_dict and traced to the registered parameters that store them, so an
implementation may keep them fused, nested, transposed or under its own names; one the kind lets
a module lack (`SuiteKind.optional_parameters`) is held at zero.
"""
from __future__ import annotations

import dataclasses
import itertools
import re
import zlib
from dataclasses import dataclass

import numpy as np
import torch
from torch.nn.utils.spectral_norm import SpectralNorm
from torch.nn.utils.weight_norm import WeightNorm

from rnnbench.errors import REFUSING, one_line, raised_at, raised_naming
from rnnbench.impls.adapt import BatchFirstAdapter, CannotCall, CannotConstruct, unwrapped
from rnnbench.impls.base import Implementation
from rnnbench.reference import Uniform
from rnnbench.reference.kinds import kind_of
from rnnbench.suites import parammap
from rnnbench.suites.kinds import SuiteKind, suite_record
from rnnbench.suites.parammap import ParamMap, spec_shapes
from rnnbench.suites.results import Finding
from rnnbench.wording import listed, with_article

TORCH_DTYPES = {"float64": torch.float64, "float32": torch.float32,
                "float16": torch.float16, "bfloat16": torch.bfloat16}


def call(what: str, function, *args, **kwargs):
    """Call into the implementation; an exception it raises becomes a Finding naming `what`,
    with where in the user's code it was raised (`raised_at`)."""
    try:
        return function(*args, **kwargs)
    except Exception as exc:
        raise Finding(f"{what} raised {one_line(exc)}", raised_at=raised_at(exc)) from exc


# A state_dict entry torch.nn.utils.parametrize keeps for a parametrized weight.
_PARAMETRIZED = re.compile(r"(^|\.)parametrizations\.[^.]+\.original\d*$")
# The entries the older hooks (torch.nn.utils.weight_norm, spectral_norm) keep for a weight.
_HOOK_ENTRIES = {WeightNorm: ("_g", "_v"), SpectralNorm: ("_orig", "_u", "_v")}


def _column_of(shape) -> int | None:
    """The length of a column (n, 1) or row (1, n); None for any other shape."""
    return max(shape) if len(shape) == 2 and min(shape) == 1 else None


def state_shapes(module: torch.nn.Module) -> dict[str, tuple]:
    """The shapes of the state_dict entries the spec's parameters can be read from, which
    `unreadable` entries are not."""
    state = call("state_dict()", module.state_dict)
    skipped = unreadable(module, state)
    return {key: tuple(value.shape) for key, value in state.items() if key not in skipped}


def unreadable(module: torch.nn.Module, state: dict | None = None) -> dict[str, str]:
    """The entries of the module's state_dict (`state`, when already taken) no spec parameter
    can be read from, with what each is: no tensor (a quantized module's packed weights), or
    what a reparametrized weight (weight_norm, spectral_norm, old or new) is computed from in
    every forward, not the weight itself."""
    state = call("state_dict()", module.state_dict) if state is None else state
    hooked = {f"{prefix}{'.' if prefix else ''}{hook.name}{suffix}"
              for prefix, submodule in module.named_modules()
              for hook in submodule._forward_pre_hooks.values()
              for kind, suffixes in _HOOK_ENTRIES.items() if isinstance(hook, kind)
              for suffix in suffixes}
    found = {}
    for key, value in state.items():
        if not isinstance(value, torch.Tensor):
            found[key] = type(value).__name__
        elif key in hooked or _PARAMETRIZED.search(key):
            found[key] = "what a reparametrized weight is computed from"
    return found


def unregistered(module: torch.nn.Module) -> list[str]:
    """The attributes (of the module or a submodule) that hold modules or trainable leaf
    tensors in plain lists, tuples or dicts (nested too), which nn.Module does not register:
    their parameters are in no state_dict, parameters() or .to(). A list of what is registered
    anyway (`[self.fwd, self.bwd]`, chunks of a registered weight) hides nothing."""
    registered = {id(m) for m in module.modules()} | {id(p) for p in module.parameters()}
    storages = {_storage(p) for p in module.parameters()} - {None}

    def hidden(value) -> bool:
        if isinstance(value, dict):
            return any(hidden(item) for item in value.values())
        if isinstance(value, (list, tuple)):
            return any(hidden(item) for item in value)
        if isinstance(value, (torch.nn.Module, torch.nn.Parameter)):
            return id(value) not in registered
        return (isinstance(value, torch.Tensor) and value.is_leaf and value.requires_grad
                and _storage(value) not in storages)
    return [f"{prefix}.{name}" if prefix else name
            for prefix, submodule in module.named_modules()
            for name, value in vars(submodule).items()
            if not name.startswith("_") and isinstance(value, (list, tuple, dict)) and hidden(value)]


def _storage(tensor: torch.Tensor) -> int | None:
    """Where a tensor's storage lies; None for one that has none yet (a lazy module's)."""
    try:
        return tensor.untyped_storage().data_ptr()
    except (ValueError, RuntimeError):
        return None


def _raise_if_unregistered(module: torch.nn.Module, problem: str) -> None:
    """Finding(unregistered_parameters) where the module holds modules or parameters where
    nn.Module does not see them (`unregistered`): what makes its parameters unmatched."""
    held = unregistered(module)
    if not held and not module.state_dict():
        tensors = [f"{prefix}.{name}" if prefix else name
                   for prefix, submodule in module.named_modules()
                   for name, value in vars(submodule).items()
                   if isinstance(value, torch.Tensor) and value.is_floating_point()]
        plain = (f" ({listed(tensors)}: plain tensors, which nn.Module neither trains nor "
                 "saves; nn.Parameter registers them)") if tensors else ""
        raise Finding(f"{problem}: the module registers no parameters{plain}",
                      "unregistered_parameters", parameters_matched=False)
    if held:
        raise Finding(f"{problem}: {listed(held)} hold{'s' if len(held) == 1 else ''} modules or "
                      "parameters in a plain list or dict, which nn.Module does not register "
                      "(state_dict, parameters() and .to() skip them; nn.ModuleList, "
                      "nn.ParameterList and nn.ModuleDict register them)",
                      "unregistered_parameters", parameters_matched=False)


def _refuses_time_major(refused: Finding, cfg) -> bool:
    """Whether a constructor's exception refuses batch_first=False: raised, as a refusal is
    (`REFUSING`), on a line naming batch_first, for a sequence kind asked time-major."""
    error = refused.__cause__
    return (cfg.constructor_kwargs().get("batch_first") is False
            and isinstance(error, REFUSING) and raised_naming(error, ("batch_first",)))


def to_numpy(tensor: torch.Tensor) -> np.ndarray:
    return tensor.detach().to("cpu", torch.float64).numpy()


@dataclass(frozen=True)
class Subject:
    """One kind of one implementation, run on `device`, with inputs derived from `seed`;
    `suite` is the kind's suite record (default: the registered one)."""

    impl: Implementation
    kind: str
    device: str = "cpu"
    seed: int = 0
    suite: SuiteKind | None = None

    def __post_init__(self) -> None:
        if self.suite is None:
            object.__setattr__(self, "suite", suite_record(self.kind))

    def construct(self, cfg, **kwargs) -> torch.nn.Module:
        """Call the constructor with torch.nn's arguments for `cfg` (plus `kwargs`). One that
        refuses batch_first=False, torch.nn's default (`assert batch_first`, deployment code's
        way), and builds the module batch_first=True is built so and called time-major through
        a transpose (`BatchFirstAdapter`): its function is judged, and `check_defaults` holds the
        refusal against the drop-in level."""
        try:
            return self._construct(cfg, **kwargs)
        except Finding as finding:
            if not _refuses_time_major(finding, cfg):
                raise
            refused = finding.message
        # What the batch-first build raises is then what refuses `cfg` (num_layers=2, say).
        return BatchFirstAdapter(self._construct(cfg.replace(batch_first=True), **kwargs),
                                 refused)

    def _construct(self, cfg, **kwargs) -> torch.nn.Module:
        try:
            module = call("the constructor", self.impl.constructor(self.kind),
                          **cfg.constructor_kwargs(), **kwargs)
        except Finding as finding:
            if isinstance(finding.__cause__, CannotConstruct):
                # never ran: says nothing of the function
                finding.numbers["called" if isinstance(finding.__cause__, CannotCall)
                                else "constructed"] = False
                finding.message = str(finding.__cause__)  # rnnbench's refusal, not the code's
            raise
        if not isinstance(module, torch.nn.Module):
            raise Finding(f"the constructor returned {with_article(type(module).__name__)}, "
                          "not a torch.nn.Module")
        try:
            unwrapped(module)._modules
        except AttributeError:  # as every use of such a module raises
            raise Finding(f"the constructor built {with_article(type(unwrapped(module)).__name__)}"
                          " whose nn.Module.__init__ never ran (no super().__init__() call): "
                          "torch sees no parameters, and calling it raises")
        return module

    def build(self, cfg, dtype: str, params: dict | None = None,
              train: bool = False) -> torch.nn.Module:
        """A module for `cfg` moved to this device and `dtype` (as users do with `.to()`; the
        dtype/device constructor arguments have a check of their own), holding `params` if given."""
        module = self.construct(cfg)
        module = call("module.to()", module.to, device=self.device, dtype=TORCH_DTYPES[dtype])
        if params is not None:
            load(module, cfg, self.param_map(module, cfg),
                 {name: self.tensor(value, dtype) for name, value in params.items()})
        module.train(train)
        return module

    def tensor(self, array, dtype: str) -> torch.Tensor:
        return torch.tensor(np.asarray(array), dtype=TORCH_DTYPES[dtype], device=self.device)

    def rng(self, *labels: str) -> np.random.Generator:
        """A generator that depends on the seed, this kind and `labels` only."""
        return np.random.default_rng([self.seed, zlib.crc32("/".join((self.kind, *labels)).encode())])

    @property
    def takes_state(self) -> bool:
        """Whether forward takes an initial state at all (see `rnnbench.impls.adapt`)."""
        return "initial_state" not in self.impl.unsupported_reasons(self.kind)

    def param_map(self, module: torch.nn.Module, cfg) -> ParamMap:
        """Where the spec's parameters of `cfg` sit in `module`; Finding(param_names) when that
        cannot be told."""
        return self.layout(module, cfg)[1]

    def _identity(self, cfg, shapes: dict[str, tuple]) -> ParamMap:
        """The spec's names where they are, unless the kind's inference reads them transposed:
        torch.nn's names stored x @ W's way show it on the probe, and square matrices cannot
        show it themselves. (Where one matrix is not square, shapes that all match say it is
        stored as the spec's: the inference, on the path of every check, is not asked.)"""
        square = all(len(shape) != 2 or shape[0] == shape[1]
                     for shape in spec_shapes(cfg).values())
        if square and self.suite.param_map is not None:
            try:
                inferred = self.suite.param_map(self, cfg, shapes)
            except parammap.MappingError:
                return parammap.identity(cfg)
            if any(piece.layout == "T" for pieces in inferred.entries.values() for piece in pieces):
                return inferred
        return parammap.identity(cfg)

    def _inferred(self, cfg, shapes: dict[str, tuple]) -> ParamMap:
        """The map of a module that does not speak the spec's names at the top level: the
        spec's names inside a nested module, else the kind's own inference where it has one."""
        try:
            return parammap.by_name(cfg, shapes)
        except parammap.MappingError:
            if self.suite.param_map is None:
                raise
        return self.suite.param_map(self, cfg, shapes)

    def layout(self, module: torch.nn.Module, cfg) -> tuple[object, ParamMap]:
        """The configuration of the variant `module` is (`KindSpec.config_of`: `cfg` itself for
        kinds without variants) and where its spec parameters sit in it; Finding(param_names)
        when that cannot be told."""
        shapes = state_shapes(module)
        spec = kind_of(cfg)
        try:
            if self.impl.param_map:
                pmap = parammap.from_user(cfg, shapes, dict(self.impl.param_map))
            elif all(shapes.get(name) == tuple(shape) for name, shape in spec_shapes(cfg).items()):
                pmap = self._identity(cfg, shapes)
            else:
                pmap = self._inferred(cfg, shapes)
        except parammap.MappingError as exc:
            self._raise_if_ignored(module, cfg, shapes)
            _raise_if_unregistered(module, f"cannot match the module's parameters to "
                                           f"{self.suite.contract}: {exc}")
            skipped = unreadable(module)
            if skipped:  # no map can help: the values forward uses are not in the state_dict
                raise Finding(f"cannot match the module's parameters to {self.suite.contract}: "
                              f"{exc} (not read: "
                              f"{listed([f'{k} ({why})' for k, why in skipped.items()])})",
                              "param_names", parameters_readable=False) from None
            raise Finding(f"cannot match the module's parameters to {self.suite.contract}: {exc}"
                          f"; say which is which with --param-map KEY=NAME,... (its keys: "
                          f"{', '.join(f'{k} {s}' for k, s in shapes.items())}; the spec's "
                          f"names: {', '.join(spec_shapes(cfg))}; NAME.T: stored transposed; "
                          f"{_gates_syntax(cfg)}NAME+NAME: one matrix over their inputs "
                          "concatenated, its columns in that order; several keys given one name "
                          "are stacked in the order given)",
                          "param_names", parameters_matched=False) from None
        if spec.config_of is not None:
            cfg = spec.config_of(cfg, {name: shapes[pieces[0].key]
                                       for name, pieces in pmap.entries.items() if len(pieces) == 1})
        optional = self.suite.optional_parameters(cfg) if self.suite.optional_parameters else ()
        lacking = [name for name in pmap.missing if name not in optional]
        # A key no rule placed that is shaped like a parameter the map lacks may be it, and so
        # may a column (H, 1) or row (1, H) the size of a missing bias or of one gate's block
        # of it: the function is then not checked, rather than failed for a parameter it may
        # have, or for a bias held at zero that it has and uses. Under a map the user gave, a
        # trainable parameter shaped like any it leaves out may be that one too (b_ih, unnamed;
        # not a buffer, a zero state kept as h_init).
        gates = len(getattr(cfg, "gates", "")) or 1
        spec = spec_shapes(cfg)

        def shaped_like(names) -> set[tuple]:
            shaped = {tuple(shape) for name, shape in spec.items() if name in names}
            return shaped | {shape[::-1] for shape in shaped}
        wanted = shaped_like(lacking)
        trainable = {name for name, p in unwrapped(module).named_parameters() if p.requires_grad}
        unnamed = shaped_like(pmap.missing) if pmap.given else set()
        columns = {size for name, shape in spec.items() if name in pmap.missing
                   and len(shape) == 1 for size in (shape[0], shape[0] // gates)}
        unplaced = [f"{key} {shape}" for key, shape in shapes.items() if key not in pmap.keys()
                    and (tuple(shape) in wanted or _column_of(shape) in columns
                         or (key in trainable and tuple(shape) in unnamed))]
        if lacking:
            self._raise_if_ignored(module, cfg, shapes)
            _raise_if_unregistered(module, f"state_dict lacks {listed(lacking)}")
        if pmap.missing and unplaced:
            absent = lacking or pmap.missing
            unnamed = " (the --param-map given names none)" if pmap.given else ""
            raise Finding(f"no entry of the state_dict was found for {listed(absent)}{unnamed}; "
                          f"not placed: {listed(unplaced)}", "param_names", parameter=absent[0],
                          parameters_matched=False)
        if lacking:
            raise Finding(f"state_dict lacks {listed(lacking)}; it has {listed(list(shapes))}",
                          "param_names", parameter=lacking[0])
        return cfg, pmap

    def _raise_if_ignored(self, module: torch.nn.Module, cfg, shapes: dict[str, tuple]) -> None:
        """Finding(layers_ignored) when `module`, built for `cfg`, holds exactly the parameters
        the constructor gives with one of its stacking arguments at the plain value (one layer,
        one direction), and does not answer as built for `cfg`: the layers or directions asked
        for are not there, so no map can place the spec's parameters and the function it
        computes is another one. (One that answers in `cfg`'s shapes shares its parameters
        between layers or directions, on purpose.)"""
        ignored = []
        for name, plain in STACKING.items():
            asked = getattr(cfg, name, plain)
            if asked == plain or not shapes:
                continue
            other = dataclasses.replace(cfg, **{name: plain},
                                        **({"dropout": 0.0} if name == "num_layers" else {}))
            try:
                built = self.construct(other)
            except Finding:
                continue
            if state_shapes(built) == shapes:
                ignored.append((name, asked, plain))
        if ignored and not self._answers_as_built(module, cfg):
            raise Finding(f"{' and '.join(f'{n}={a}' for n, a, _ in ignored)} ignored: the module "
                          "holds the parameters it holds with "
                          f"{' and '.join(f'{n}={p}' for n, _, p in ignored)}", "layers_ignored")

    def _answers_as_built(self, module: torch.nn.Module, cfg) -> bool:
        """Whether forward, given a random input and initial state, returns every output in the
        shapes `cfg` gives them, with a final state of its own for each layer and direction:
        each slice of it differs from the initial state's (not passed through) and from the
        others (not one layer's repeated)."""
        spec, flatten = kind_of(cfg), self.suite.flatten_result
        shapes, names = spec.io_shapes(cfg, 2, 3), spec.state_names(cfg)
        rng = np.random.default_rng(0)
        x, *states = (self.tensor(rng.normal(size=shapes[name]), own_dtype(module))
                      for name in ("input", *names))
        state = nest_state(cfg, dict(zip(names, states)) if states else None)
        try:
            returned = flatten(cfg, call("forward", module, x, state)) if flatten else {}
        except Finding:
            return False
        if not returned or any(tuple(value.shape) != tuple(shapes[name])
                               for name, value in returned.items()):
            return False
        final = returned.get(spec.output_names(cfg)[1]) if states else None
        if final is None:
            return True
        slices = list(final.detach())
        return (all(not torch.equal(mine, given) for mine, given in zip(slices, states[0]))
                and all(not torch.equal(a, b) for i, a in enumerate(slices) for b in slices[:i]))


# The arguments that stack layers and directions, at the value that builds one of each: a module
# that ignores them holds the same parameters at every value.
STACKING = {"num_layers": 1, "bidirectional": False}


def nest_state(cfg, named: dict | None):
    """The state as forward takes it from values keyed by state name: None, one tensor, or a
    tuple in the spec's state order."""
    if named is None:
        return None
    values = tuple(named[name] for name in kind_of(cfg).state_names(cfg))
    return values[0] if len(values) == 1 else values


def own_dtype(module: torch.nn.Module) -> str:
    """The dtype a module's own values are in: its first floating parameter's, else buffer's
    (float32 for a module with neither)."""
    for tensor in itertools.chain(module.parameters(), module.buffers()):
        name = str(tensor.dtype).removeprefix("torch.")
        if name in TORCH_DTYPES:
            return name
    return "float32"


def spec_state(module: torch.nn.Module, cfg, pmap: ParamMap) -> dict[str, torch.Tensor]:
    """The module's values of the spec's parameters in the spec's order, read through `pmap`
    (views of its state_dict entries); a parameter the module does not have is left out.
    Finding(param_shapes) for the first value whose shape is not the spec's."""
    values, wrong = spec_values(module, cfg, pmap)
    if wrong:
        raise next(iter(wrong.values()))
    return values


def spec_values(module: torch.nn.Module, cfg, pmap: ParamMap
                ) -> tuple[dict[str, torch.Tensor], dict[str, Finding]]:
    """`spec_state` parameter by parameter: the values of the spec's shape, and a
    Finding(param_shapes) for each of the others."""
    state = call("state_dict()", module.state_dict)
    values, wrong = {}, {}
    for name, shape in spec_shapes(cfg).items():
        pieces = pmap.entries.get(name, ())
        if not pieces:
            continue
        parts = [piece.view(state[piece.key]) for piece in pieces]
        try:
            value = torch.cat(parts) if len(parts) > 1 else parts[0]
        except RuntimeError:  # pieces that do not even stack
            value = parts[0]
        if tuple(value.shape) != tuple(shape):
            where = " + ".join(p.describe() for p in pieces)
            message = (f"{name} has shape {tuple(value.shape)}"
                       + (f" (as {where})" if where != name else "") + f", expected {tuple(shape)}")
            if pmap.given:  # the map may be what is wrong: nothing said of the function
                wrong[name] = Finding(f"{message}: the --param-map given, or the module, is "
                                      "wrong", "param_shapes", parameter=name,
                                      parameters_matched=False)
            else:
                wrong[name] = Finding(message, "param_shapes", parameter=name)
        else:
            values[name] = value
    return values, wrong


def spec_parameters(module: torch.nn.Module, cfg, pmap: ParamMap) -> dict[str, list]:
    """For each spec parameter the module has, its pieces as (the registered parameter its
    state_dict entry is stored in, the entry, the piece): what gradients and optimizers reach.
    The entry may be the parameter itself or a slice of a fused one; Finding when it is stored in
    no parameter."""
    spec_state(module, cfg, pmap)  # shapes first
    state = call("state_dict()", module.state_dict)
    owners = list(call("parameters()", lambda: list(module.parameters())))
    found = {}
    for name, pieces in pmap.entries.items():
        parts = []
        for piece in pieces:
            entry = state[piece.key]
            owner = next((p for p in owners if _stored_in(entry, p)), None)
            if owner is None:
                raise Finding(f"state_dict's {piece.key} is not stored in any registered "
                              "parameter (gradients and optimizers cannot reach it)", parameter=name)
            parts.append((owner, entry, piece))
        if parts:
            found[name] = parts
    return found


def spec_grad(parts: list, grads: dict[int, torch.Tensor]) -> torch.Tensor:
    """A spec parameter's gradient from its pieces (see `spec_parameters`) and the gradients of
    the registered parameters, keyed by id(parameter)."""
    cut = [piece.view(entry_grad(owner, entry, grads[id(owner)])) for owner, entry, piece in parts]
    return torch.cat(cut) if len(cut) > 1 else cut[0]


def entry_grad(owner: torch.Tensor, entry: torch.Tensor, grad: torch.Tensor) -> torch.Tensor:
    """The gradient of a state_dict entry, cut from the gradient of the parameter storing it."""
    laid_out = torch.empty_strided(owner.shape, owner.stride(), dtype=grad.dtype, device=grad.device)
    laid_out.copy_(grad)
    return laid_out.as_strided(entry.shape, entry.stride(), entry.storage_offset() - owner.storage_offset())


def _stored_in(entry: torch.Tensor, owner: torch.Tensor) -> bool:
    """Whether `entry`'s elements lie within `owner`'s in the same storage."""
    if entry.device != owner.device or entry.dtype != owner.dtype:
        return False
    if entry.untyped_storage().data_ptr() != owner.untyped_storage().data_ptr():
        return False
    def span(t):
        return t.storage_offset(), t.storage_offset() + sum((n - 1) * s for n, s in zip(t.shape, t.stride()))
    (low, high), (own_low, own_high) = span(entry), span(owner)
    return own_low <= low and high <= own_high


def load(module: torch.nn.Module, cfg, pmap: ParamMap,
         tensors: dict[str, torch.Tensor]) -> None:
    """Set the module's parameters to `tensors` (by spec name) through load_state_dict, written
    into the entries `pmap` names, and make sure they took. A parameter the module does not have
    is skipped: it is held at zero."""
    spec_state(module, cfg, pmap)
    if pmap.identity:
        given = tensors
    else:
        state = call("state_dict()", module.state_dict)
        given = {key: state[key].detach().clone() for key in pmap.keys()}
        for name, pieces in pmap.entries.items():
            if not pieces:
                continue  # held at zero
            rows = [piece.view(given[piece.key]).shape[0] for piece in pieces]
            for piece, part in zip(pieces, tensors[name].split(rows)):
                piece.view(given[piece.key]).copy_(part)
    call("load_state_dict()", module.load_state_dict, given, strict=False)
    for name, value in spec_state(module, cfg, pmap).items():
        if not torch.equal(value.detach(), tensors[name]):
            raise Finding(f"load_state_dict() did not set {name}", parameter=name)


def params_of(module: torch.nn.Module, cfg, pmap: ParamMap) -> dict[str, np.ndarray]:
    """The module's parameters as float64 NumPy arrays, keyed by the spec's names; zeros for
    those it does not have (held at zero)."""
    values = spec_state(module, cfg, pmap)
    return {name: to_numpy(values[name]) if name in values else np.zeros(shape)
            for name, shape in spec_shapes(cfg).items()}


def draw(dist, rng: np.random.Generator, shape) -> np.ndarray:
    """Values from a spec distribution (uniform or normal)."""
    if isinstance(dist, Uniform):
        return rng.uniform(dist.low, dist.high, shape)
    return rng.normal(dist.mean, dist.std, shape)


def draw_params(cfg, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Parameters drawn from the spec's init distribution of each."""
    spec = kind_of(cfg)
    dists = spec.init_spec(cfg)
    return {name: draw(dists[name], rng, shape) for name, shape in spec.param_shapes(cfg).items()}


def _gates_syntax(cfg) -> str:
    """How a --param-map entry says which gates' rows a key holds, for a kind with gates."""
    gates = "".join(getattr(cfg, "gates", ()))
    return (f"NAME:{gates[::-1]}: a key holding those gates' rows in that order, {gates} being "
            "the spec's; " if len(gates) > 1 else "")
