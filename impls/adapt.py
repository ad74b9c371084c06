"""Meeting implementations where they are: a user's constructor and forward behind torch.nn's
contract, and the features that costs them.

torch.nn's contract is the yardstick, but the RNNs people write take fewer constructor arguments
(a course's `RNN(input_size, hidden_size)`), require the state (`forward(x, h_prev)`), or are not
even an nn.Module (an interview exercise's plain class holding tensors). `adapt(kind, constructor)`
reads the constructor's signature once and returns either the constructor itself, when it takes
torch.nn's arguments, or an `Adapted` constructor that takes torch.nn's full argument list:

- the sizes go to the parameters whose names say them, whatever their order (`size_parameters`:
  `LSTM(lstm_hidden_dim, embedding_size)` gets the hidden size first), else by position, input
  first (`RNN(d1, d2)`);
- an argument the constructor does not take (bias, num_layers, nonlinearity, batch_first,
  dropout, bidirectional, proj_size) means the feature it controls is not supported: it is
  listed in `Adapted.unsupported` (feature -> reason) and never passed; asking for a value other
  than torch.nn's default raises `UnsupportedArgument`. `**kwargs` counts as taking every
  argument (a module that accepts num_layers=2 and ignores it must fail, not be excused), but
  one it passes on to code that rejects it by name even at torch.nn's default (a TypeError
  "unexpected keyword argument", found by building the module once at small sizes) is not
  taken, as if the signature lacked it;
- without `device` and `dtype` parameters the module is built, then moved with `.to()`;
- a plain object that holds tensors becomes an nn.Module whose parameters are those tensors;
- a forward whose state argument is required is given explicit zeros where torch.nn would take
  None ("optional_state" not supported); a forward with no state argument never gets one
  ("initial_state" not supported, nor where a flag stands in its place, `collect_hidden=False`);
  an LSTM's forward that takes h and c as two arguments, `forward(x, h_prev, c_prev)`, gets
  torch.nn's (h, c) tuple taken apart (`split_state`); a forward that takes the state after
  other arguments with defaults, `forward(x, lengths=None, hx=None)`, gets it by name
  (`state_after`); one that requires arguments torch.nn's forward does not take (lengths, a
  mask, `done`) cannot be called as torch.nn's (`forward_requires`: `CannotCall`).
"""
from __future__ import annotations

import contextlib
import functools
import inspect
import re
import warnings
from collections.abc import Callable, Hashable

import numpy as np
import torch
from torch import nn
from torch.nn.utils.rnn import PackedSequence

from rnnbench.impls import signatures
from rnnbench.reference import Config, io_shapes

# A torch.nn constructor argument -> the feature it controls.
ARGUMENT_FEATURES = {"bias": "no_bias", "nonlinearity": "relu", "num_layers": "num_layers",
                     "batch_first": "batch_first", "dropout": "dropout",
                     "bidirectional": "bidirectional", "proj_size": "proj_size",
                     "device": "factory_kwargs", "dtype": "factory_kwargs"}
SIZES = ("input_size", "hidden_size")
# Small distinct sizes for building a module once to learn which keywords its **kwargs rejects.
_PROBE_SIZES = {"input_size": 3, "hidden_size": 5}
_UNEXPECTED = re.compile(r"unexpected keyword argument '(\w+)'")
_POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
_NAMED = (*_POSITIONAL, inspect.Parameter.KEYWORD_ONLY)

# A size's name is made of these words, one of them the size's own: input_size, n_in, ninp,
# in_features, n_inputs, embedding_dim; hidden_size, n_hidden, nhid, lstm_hidden_dim,
# num_units, n_neurons. A vocabulary's size is no input size, nor is `num_embeddings`
# (nn.Embedding's name for it): it is what an embedding in front of the recurrence reads, so
# `(vocab_size, embedding_dim, hidden_dim)` takes the embedding's width as its input size.
_SIZE_WORDS = {
    "input_size": re.compile(r"inputs?|in|inp|ninp|ninput|nin|ni|x|nx|"
                             r"embedding|embed|embd|emb|features?|feat"),
    "hidden_size": re.compile(r"hiddens?|hid|nhid|nhidden|nh|h|units?|neurons?|states?"),
}
_SIZE_QUALIFIER = re.compile(r"size|sz|dim|dims|dimension|n|num|number|d|of|"
                             r"lstm|gru|rnn|cell|recurrent|layer")


class UnsupportedArgument(TypeError):
    """A torch.nn argument with a non-default value for a constructor that does not take it."""


class CannotConstruct(TypeError):
    """The constructor needs something torch.nn's constructor does not give it."""


class CannotCall(CannotConstruct):
    """forward requires an argument torch.nn's forward does not take (lengths, a mask, done)."""


def torch_signature(kind: str) -> inspect.Signature:
    """torch.nn's constructor signature for `kind`, without `self`."""
    signature = inspect.signature(signatures.SIGNATURES[kind].__init__)
    return signature.replace(parameters=list(signature.parameters.values())[1:])


def changed_defaults(kind: str, constructor: Callable) -> dict[str, str]:
    """torch.nn's arguments of `kind` that the constructor's own signature has with another
    default than torch.nn's, or requires: name -> what it says of it. Code that leaves them out,
    as `nn.LSTM(10, 20)` does, gets another module (or none). Sizes are not compared (torch.nn
    requires them too), nor device and dtype (a `device="cpu"` default builds what torch.nn's
    None builds, but for a changed torch default device), nor a default of None where torch.nn's
    is false too (`proj_size=None` for 0: both say "none"; `bias=None` is no bias, where
    torch.nn's default has one); nothing is known of an unreadable signature or of
    `**kwargs`."""
    own = _signature(constructor)
    torch_parameters = torch_signature(kind).parameters
    changed = {}
    for name, parameter in ({} if own is None else own.parameters).items():
        if name in (*SIZES, "device", "dtype") or name not in torch_parameters or \
                parameter.kind not in (*_POSITIONAL, parameter.KEYWORD_ONLY):
            continue
        default = torch_parameters[name].default
        if parameter.default is parameter.empty:
            changed[name] = f"`{name}` is required (torch.nn's defaults to {default!r})"
        elif not _equal(parameter.default, default) and (parameter.default is not None or default):
            changed[name] = f"`{name}` defaults to {parameter.default!r}, torch.nn's to {default!r}"
    return changed


def _equal(a, b) -> bool:
    try:
        return bool(a == b)
    except Exception:  # a default whose == raises or is not one truth value (a tensor)
        return False


def size_named(name: str) -> str | None:
    """The torch.nn size ("input_size" or "hidden_size") a constructor parameter's name says it
    is, read word by word (`lstm_hidden_dim`, `nInputs`); None where it says neither, both, or
    something else besides (`output_size`, `seq_length`, `vocab_size`)."""
    words = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name).lower().split("_")
    words = [word for word in words if word]
    said = {size for size, word in _SIZE_WORDS.items() if any(map(word.fullmatch, words))}
    if len(said) != 1:
        return None
    size = said.pop()
    known = all(_SIZE_WORDS[size].fullmatch(word) or _SIZE_QUALIFIER.fullmatch(word)
                for word in words)
    return size if known else None


def size_parameters(kind: str, signature: inspect.Signature | None) -> dict[str, str]:
    """torch.nn's sizes -> the constructor's parameters that take them by name: one named as
    torch.nn's, else the one whose name says it (`size_named`) and whose default, if any, is a
    number (`state=None` is no size). Empty where a size is said by no parameter or by several
    (`(in_dim, h_dim, state_dim)`: the names cannot tell), or where one cannot be given by
    keyword; then the sizes go by position."""
    torch_parameters = torch_signature(kind).parameters
    named = [p for p in ([] if signature is None else signature.parameters.values())
             if p.kind in _NAMED and (p.name in SIZES or p.name not in torch_parameters)]
    chosen = {}
    for size in SIZES:
        exact = [p for p in named if p.name == size]
        candidates = exact or [p for p in named if size_named(p.name) == size
                               and (p.default is p.empty or _is_count(p.default))]
        if len(candidates) != 1 or candidates[0].kind == candidates[0].POSITIONAL_ONLY:
            return {}
        chosen[size] = candidates[0].name
    return chosen


def sizes_reversed(kind: str, constructor: Callable) -> tuple[str, str] | None:
    """The constructor's names for the hidden and input sizes where its signature takes the
    hidden size first (`LSTM(lstm_hidden_dim, embedding_size)`): code that passes torch.nn's
    (input_size, hidden_size) by position gets another module. None where it takes them in
    torch.nn's order, or its names do not say which is which."""
    own = _signature(constructor)
    names = size_parameters(kind, own)
    if not names:
        return None
    order = list(own.parameters)
    hidden_name, input_name = names["hidden_size"], names["input_size"]
    return ((hidden_name, input_name) if order.index(hidden_name) < order.index(input_name)
            else None)


def _is_count(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


@functools.lru_cache(maxsize=None)
def adapt(kind: str, constructor: Callable) -> Callable:
    """`constructor` itself when it needs no adaptation for `kind`, else an `Adapted` one."""
    if kind not in signatures.SIGNATURES:
        return constructor  # not a torch.nn kind: its own contract applies
    if isinstance(constructor, Hashable):
        return _adapted(kind, constructor)
    return _adapted.__wrapped__(kind, constructor)


@functools.cache
def _adapted(kind: str, constructor: Callable) -> Callable:
    # Once per constructor and kind: reading a factory's or a **kwargs constructor's signature
    # builds it at small sizes, which every module built after must not repeat.
    adapted = Adapted(kind, constructor)
    return adapted if adapted.needed else constructor


def _signature(function) -> inspect.Signature | None:
    try:
        return inspect.signature(function)
    except (TypeError, ValueError):  # builtins and C extensions may not tell
        return None


class Adapted:
    """A constructor behind torch.nn's signature; see the module docstring."""

    def __init__(self, kind: str, constructor: Callable):
        self.kind, self.constructor = kind, constructor
        self.torch = torch_signature(kind)
        own = _signature(constructor)
        params = [] if own is None else list(own.parameters.values())
        var_keyword = own is None or any(p.kind == p.VAR_KEYWORD for p in params)
        named = {p.name: p for p in params if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)}
        positional = [p for p in params if p.kind in _POSITIONAL]
        # torch.nn's size -> the constructor's parameter that takes it by keyword: the one whose
        # name says it, or torch.nn's name where the constructor forwards everything (`*args,
        # **kwargs`); empty where the sizes go by position, the first two, input first.
        self.size_names = size_parameters(kind, own) or (
            dict(zip(SIZES, SIZES)) if len(positional) < 2 else {})
        self.by_name = bool(self.size_names)
        sizes_taken = (set(self.size_names.values()) if self.by_name
                       else {p.name for p in positional[:2]})
        others = [p for p in params if p.kind in _NAMED and p.name not in sizes_taken]
        torch_args = [name for name in self.torch.parameters if name not in SIZES]
        self.taken = {name for name in torch_args if var_keyword or name in named}
        # Arguments that can only be given by position, in order.
        self.positional_only = [p.name for p in others if p.kind == p.POSITIONAL_ONLY]
        self.required_extra = [p.name for p in others
                               if p.default is p.empty and p.name not in self.torch.parameters]
        self.unsupported = {ARGUMENT_FEATURES[name]: f"the constructor takes no `{name}`"
                            for name in torch_args if name not in self.taken}
        if own is not None and var_keyword:
            for name in self._rejected_keywords():
                self.taken.discard(name)
                self.unsupported[ARGUMENT_FEATURES[name]] = (
                    f"the constructor rejects `{name}={self.torch.parameters[name].default!r}` "
                    "(torch.nn's default): its **kwargs passes it on to code that does not take it")
        if "factory_kwargs" in self.unsupported:
            missing = sorted(name for name in ("device", "dtype") if name not in self.taken)
            self.unsupported["factory_kwargs"] = (
                f"the constructor takes no {' or '.join(f'`{n}`' for n in missing)}: "
                "modules are built, then moved with .to()")
        # A factory function's forward is that of the class it builds, or of the scripted
        # module it returns (torch.jit.script(module)), whose class says nothing of it.
        if isinstance(constructor, type):
            forward_of = constructor
        else:
            forward_of = self._built()  # None where it does not build
            scripted = isinstance(forward_of, torch.jit.RecursiveScriptModule)
            if forward_of is not None and not scripted:
                forward_of = type(forward_of)
        self.forward_requires = forward_requires(forward_of)
        self.forward_features = {} if self.forward_requires else _forward_features(forward_of)
        self.unsupported.update({feature: reason for feature, reason in
                                 self.forward_features.items()})
        self.split_state = split_state(kind, forward_of)
        self.state_after = None if self.forward_requires else state_after(forward_of)

    def _probe_build(self, keywords: dict):
        """The constructor called at small sizes with `keywords`. The generators are left as
        they were: whether this build ran first in a process must not change what the module
        draws next."""
        with warnings.catch_warnings(), torch.random.fork_rng(), _numpy_random_kept():
            warnings.simplefilter("ignore")
            sizes, size_keywords = self._size_arguments(_PROBE_SIZES)
            return self.constructor(*sizes, **size_keywords, **keywords)

    def _size_arguments(self, sizes: dict) -> tuple[list, dict]:
        """torch.nn's sizes ({name: value}, input first) as the constructor takes them: by its
        names for them, else by position."""
        if self.by_name:
            return [], {self.size_names[name]: value for name, value in sizes.items()}
        return list(sizes.values()), {}

    def _torch_defaults(self) -> dict:
        return {name: self.torch.parameters[name].default for name in self.taken}

    def _rejected_keywords(self) -> list[str]:
        """The torch.nn arguments a **kwargs constructor passes on to code that does not take
        them: it is built at small sizes with torch.nn's defaults, dropping each argument a
        TypeError names as unexpected, until it builds or fails otherwise (which the checks
        then report)."""
        rejected: list[str] = []
        while True:
            keywords = {name: value for name, value in self._torch_defaults().items()
                        if name not in rejected}
            try:
                self._probe_build(keywords)
            except TypeError as exc:
                match = _UNEXPECTED.search(str(exc))
                if match and match.group(1) in keywords:
                    rejected.append(match.group(1))
                    continue
            except Exception:  # any other failure is the checks' to report
                pass
            return rejected

    def _built(self):
        """What the constructor builds at small sizes with torch.nn's defaults; None where it
        does not build (the checks report why)."""
        try:
            return self._probe_build(self._torch_defaults())
        except Exception:
            return None

    @property
    def needed(self) -> bool:
        """Whether calling the constructor as torch.nn's would differ from calling it as is."""
        return bool(self.unsupported or self.required_extra or self.forward_requires
                    or self.positional_only or self.size_names != dict(zip(SIZES, SIZES))
                    or _is_plain_class(self.constructor) or self.split_state or self.state_after)

    def __repr__(self) -> str:
        return f"Adapted({getattr(self.constructor, '__qualname__', self.constructor)!r} as {self.kind})"

    def __call__(self, *args, **kwargs) -> nn.Module:
        try:
            bound = self.torch.bind(*args, **kwargs)
        except TypeError as exc:
            raise TypeError(f"{self.kind}: {exc}") from None
        bound.apply_defaults()
        given = dict(bound.arguments)
        if self.forward_requires:
            raise CannotCall(f"forward requires {self.forward_requires}, which torch.nn's "
                             "forward does not take")
        if self.required_extra:
            raise CannotConstruct(
                f"the constructor requires {', '.join(f'`{n}`' for n in self.required_extra)}, "
                f"which torch.nn's {signatures.SIGNATURES[self.kind].__name__} does not take")
        for name, value in given.items():
            default = self.torch.parameters[name].default
            if name not in SIZES and name not in self.taken and value != default \
                    and name not in ("device", "dtype"):
                raise UnsupportedArgument(f"the constructor takes no `{name}` "
                                          f"(asked for {name}={value!r})")
        sizes, size_keywords = self._size_arguments({name: given[name] for name in SIZES})
        keywords = {name: given[name] for name in self.taken if name not in self.positional_only}
        positional = [given[name] for name in self.positional_only if name in given]
        made = self.constructor(*sizes, *positional, **size_keywords, **keywords)
        # An object that holds tensors becomes a module; anything else (a number) is returned
        # as it is, for the checks to say what the constructor returned.
        module = made if isinstance(made, nn.Module) or not hasattr(made, "__dict__") \
            else ObjectModule(made)
        move = {name: given[name] for name in ("device", "dtype")
                if name not in self.taken and given[name] is not None}
        if move:
            module = module.to(**move)
        if self.forward_features or self.split_state or self.state_after:
            module = StateAdapter(module, self.config(given),
                                  takes_state="initial_state" not in self.forward_features,
                                  required="optional_state" in self.forward_features,
                                  split=bool(self.split_state),
                                  keyword=self.state_after[0] if self.state_after else None)
        return module

    def features_needed(self, cfg: Config) -> list[str]:
        """The features whose arguments `cfg` sets to a value other than torch.nn's default, for
        the arguments this constructor does not take (such a configuration cannot be asked for)."""
        asked = cfg.constructor_kwargs()
        return [ARGUMENT_FEATURES[name] for name, value in asked.items()
                if name in ARGUMENT_FEATURES and name not in self.taken
                and value != self.torch.parameters[name].default]

    def config(self, given: dict) -> Config | None:
        """The Config torch.nn's arguments describe (None when they describe no valid module)."""
        try:
            return Config(self.kind, **{k: v for k, v in given.items() if k not in ("device", "dtype")})
        except (TypeError, ValueError):
            return None


@contextlib.contextmanager
def _numpy_random_kept():
    """NumPy's global generator as it was, after the block."""
    state = np.random.get_state()
    try:
        yield
    finally:
        np.random.set_state(state)


def _is_plain_class(constructor) -> bool:
    return isinstance(constructor, type) and not issubclass(constructor, nn.Module)


def _forward_positional(constructor) -> list[inspect.Parameter] | None:
    """The positional parameters of a class's forward (its __call__ for a plain class that has
    one) or of a scripted module's compiled forward, self left out; None where they are not
    known (not a class, *args, no signature)."""
    if isinstance(constructor, torch.jit.RecursiveScriptModule):
        # bound: no self; none where scripting compiled no forward (the checks say it lacks one)
        forward = getattr(constructor, "forward", None)
        signature = _signature(forward) if callable(forward) else None
        params = list(signature.parameters.values()) if signature else []
    elif isinstance(constructor, type):
        # Read statically: a class's own attribute machinery (torch.jit.ScriptModule's, for
        # one) may run code, or raise, when an attribute is looked up on the class.
        plain_call = not issubclass(constructor, nn.Module) and any(
            "__call__" in vars(klass) for klass in constructor.__mro__)  # its instances'
        method = _defining(constructor, "__call__" if plain_call else "forward")
        signature = _signature(method) if callable(method) else None
        params = list(signature.parameters.values())[1:] if signature else []  # without self
    else:
        return None
    if signature is None:
        return None
    if any(p.kind == p.VAR_POSITIONAL for p in params):
        return None
    return [p for p in params if p.kind in _POSITIONAL]


def _defining(constructor: type, name: str):
    """The attribute `name` as the first class in the MRO that defines it holds it, read
    statically; for a torch.jit.ScriptModule's `@script_method` that is the Python function it
    compiled (kept in the class's `_methods`, under the compiled method's descriptor, whose
    signature says nothing)."""
    for klass in constructor.__mro__:
        if name in vars(klass):
            return vars(klass)[name]
        methods = vars(klass).get("_methods")
        stub = methods.get(name) if isinstance(methods, dict) else None
        function = getattr(stub, "original_method", None)
        if getattr(function, "__qualname__", None) == f"{klass.__qualname__}.{name}":
            return function
    return None


# A cell state's name: c, cx, c0, c_prev, prev_c, c_t, cell, cell_state, ...
_CELL_STATE = re.compile(r"(^|_)(c|cx|ct|c\d|cell\w*)(_|$)")


def split_state(kind: str, constructor) -> tuple[str, str] | None:
    """The names of an LSTM forward's two state arguments where it takes h and c apart
    (`forward(x, h_prev, c_prev)`, `forward(x, h0=None, c0=None)`), read from the third
    argument's name; None where forward takes torch.nn's one (h, c) tuple."""
    positional = _forward_positional(constructor) if kind in ("lstm", "lstm_cell") else None
    if not positional or len(positional) < 3 or not _CELL_STATE.search(positional[2].name.lower()):
        return None
    return positional[1].name, positional[2].name


# A state's name is made of these words, one of them a state's (h, hidden, state, c, ...):
# hx, h_prev, hidden_state, initial_state, lstm_state, prev_c; not return_hidden or h_mask.
_STATE_WORD = re.compile(r"h|hx|hc|hn|ht|h\d|hprev|hiddens?|states?|memory|mem|carry|"
                         r"c|cx|ct|c\d|cprev|cell")
_STATE_QUALIFIER = re.compile(r"init|initial|prev|previous|last|t|lstm|gru|rnn|recurrent")
# A name that says what else a forward takes: lengths, masks, episode ends.
_NOT_STATE = re.compile(r"(^|_)(lengths?|lens?|masks?|dones?|resets?|episode_starts?)(_|$)")


def _names_state(name: str) -> bool:
    """Whether a forward argument's name says it is the state (or part of it)."""
    words = name.lower().strip("_").split("_")
    return (any(_STATE_WORD.fullmatch(word) for word in words)
            and all(_STATE_WORD.fullmatch(word) or _STATE_QUALIFIER.fullmatch(word)
                    for word in words))


def forward_requires(constructor) -> str | None:
    """What forward requires beside the input and state that torch.nn's does not take, in
    words: arguments before a state that is not its second (`forward(inputs, batch_lengths,
    initial_state=None)`), a second one named as no state is (`forward(x, output_lengths)`),
    or arguments after the state (`forward(x, state, done)`; an LSTM's c taken apart is the
    state); None where there are none."""
    positional = _forward_positional(constructor)
    if not positional or len(positional) < 2:
        return None

    def quoted(params) -> str:
        return ", ".join(f"`{p.name}`" for p in params)
    second, rest = positional[1], positional[2:]
    later = next((p for p in rest if _names_state(p.name)), None)
    if not _names_state(second.name) and later is not None:
        before = [p for p in positional[1:positional.index(later)] if p.default is p.empty]
        return f"{quoted(before)} before its state (`{later.name}`)" if before else None
    if not _names_state(second.name) and _NOT_STATE.search(second.name.lower()):
        return quoted([second]) if second.default is second.empty else None
    after = [p for p in rest if p.default is p.empty and not _names_state(p.name)]
    return f"{quoted(after)} after its state (`{second.name}`)" if after else None


def state_after(constructor) -> tuple[str, list[str]] | None:
    """The state's name and the arguments before it where forward takes it after others that
    have defaults (`forward(input, lengths=None, hx=None)`): code written for torch.nn passes
    the state as the first of them. None where the second argument may be the state."""
    positional = _forward_positional(constructor)
    if not positional or len(positional) < 3 or _names_state(positional[1].name):
        return None
    later = next((p for p in positional[2:] if _names_state(p.name)), None)
    before = positional[1:positional.index(later)] if later is not None else []
    if later is None or any(p.default is p.empty for p in before):
        return None
    return later.name, [p.name for p in before]


def _forward_features(constructor) -> dict[str, str]:
    """What a class's forward (its __call__ for a plain class) says about the state argument."""
    positional = _forward_positional(constructor)
    if positional is None:
        return {}
    if len(positional) < 2:
        return {"initial_state": "forward takes no initial state (no second argument)"}
    after = state_after(constructor)
    state = next(p for p in positional if p.name == after[0]) if after else positional[1]
    if state.default not in (None, state.empty) and not _names_state(state.name):
        # a flag or a count (`collect_hidden=False`): a state's default is None
        return {"initial_state": f"forward takes no initial state (its second argument, "
                                 f"`{state.name}={state.default!r}`, is none)"}
    if state.default is state.empty:
        return {"optional_state": f"the state is a required argument (`{state.name}` has no "
                                  "default): zeros are passed where torch.nn takes None"}
    return {}


class ObjectModule(nn.Module):
    """A plain object that holds tensors, as an nn.Module: every tensor attribute that requires
    a gradient (or is a Parameter), alone or in a list, becomes a registered parameter under the
    attribute's name (the object's attribute is set to that same Parameter, so it computes with
    what the module holds); nn.Module attributes become submodules. Calls go to the object, or
    to its `forward` where it has one and no `__call__` (a tutorial's class written like a
    module's)."""

    def __init__(self, obj):
        super().__init__()
        self.wrapped = [obj]  # a list, so nn.Module does not look inside the object
        for name, value in list(vars(obj).items()):
            if isinstance(value, nn.Module):
                self.add_module(name, value)
            elif _trainable(value):
                parameter = _as_parameter(value)
                setattr(obj, name, parameter)
                self.register_parameter(name, parameter)
            elif isinstance(value, (list, tuple)) and value and all(map(_trainable, value)):
                parameters = [_as_parameter(v) for v in value]
                setattr(obj, name, type(value)(parameters))
                self.add_module(name, nn.ParameterList(parameters))

    def forward(self, *args):
        obj = self.wrapped[0]
        return (obj if callable(obj) or not callable(getattr(obj, "forward", None))
                else obj.forward)(*args)

    def extra_repr(self) -> str:
        return f"wrapping a {type(self.wrapped[0]).__name__}"


def _trainable(value) -> bool:
    return isinstance(value, torch.Tensor) and (value.requires_grad or isinstance(value, nn.Parameter))


def _as_parameter(tensor: torch.Tensor) -> nn.Parameter:
    return tensor if isinstance(tensor, nn.Parameter) else nn.Parameter(tensor.detach())


class StateAdapter(nn.Module):
    """A module whose forward requires its state, takes none, or takes an LSTM's h and c as two
    arguments, called as torch.nn's: hx=None becomes explicit zeros of the spec's shapes where
    the state is `required`; a given hx to a forward that takes none is refused; a (h, c) pair
    is passed as two arguments where `split`; the state goes by name as `keyword` where forward
    takes it after other arguments. state_dict and load_state_dict are the inner module's,
    names unchanged."""

    def __init__(self, inner: nn.Module, cfg: Config | None, takes_state: bool,
                 required: bool = True, split: bool = False, keyword: str | None = None):
        super().__init__()
        self.inner, self.cfg, self.takes_state = inner, cfg, takes_state
        self.required, self.split, self.keyword = required, split, keyword

    def forward(self, input, hx=None):
        if not self.takes_state:
            if hx is not None:
                raise TypeError("this forward takes no initial state")
            return self.inner(input)
        if hx is None and not self.required:
            return self.inner(input)
        if hx is None and self.cfg is not None:
            hx = zero_state(self.cfg, input)
        if self.split and isinstance(hx, (tuple, list)):
            return self.inner(input, *hx)
        if self.keyword:
            return self.inner(input, **{self.keyword: hx})
        return self.inner(input, hx)

    def state_dict(self, *args, **kwargs):
        return self.inner.state_dict(*args, **kwargs)

    def load_state_dict(self, state_dict, strict: bool = True, assign: bool = False):
        return self.inner.load_state_dict(state_dict, strict=strict, assign=assign)


class BatchFirstAdapter(StateAdapter):
    """A module that refuses batch_first=False (`assert batch_first`), built batch_first=True and
    called as torch.nn's default is: a batched time-major input handed over batch-first, and the
    output sequence handed back time-major (the state's layout does not depend on batch_first;
    unbatched and packed input are passed as they are). `refused`: what the constructor said
    to batch_first=False."""

    def __init__(self, inner: nn.Module, refused: str):
        super().__init__(inner, None, takes_state=True, required=False)
        self.refused = refused

    def forward(self, input, hx=None):
        if not isinstance(input, torch.Tensor) or input.dim() != 3:
            return super().forward(input, hx)
        result = super().forward(input.transpose(0, 1), hx)
        if isinstance(result, torch.Tensor):
            return result.transpose(0, 1)
        if isinstance(result, (tuple, list)) and result and isinstance(result[0], torch.Tensor):
            return type(result)([result[0].transpose(0, 1), *result[1:]])
        return result


def unwrapped(module: nn.Module) -> nn.Module:
    """The user's module inside the adapters (whose state_dict names are its own), else the
    module itself."""
    while isinstance(module, StateAdapter):
        module = module.inner
    return module


def zero_state(cfg: Config, input: torch.Tensor | PackedSequence):
    """torch.nn's omitted state made explicit: zeros of the spec's shapes for this input (a
    tensor or a PackedSequence), as hx (h0, or (h0, c0) for the LSTM kinds)."""
    if isinstance(input, PackedSequence):
        batch, steps, input = int(input.batch_sizes[0]), len(input.batch_sizes), input.data
    elif cfg.is_cell:
        batch, steps = (input.shape[0] if input.dim() == 2 else None), 1
    else:
        batched = input.dim() == 3
        time_axis = 1 if batched and cfg.batch_first else 0
        batch, steps = (input.shape[1 - time_axis] if batched else None), input.shape[time_axis]
    shapes = io_shapes(cfg, batch, steps)
    zeros = tuple(input.new_zeros(shapes[name]) for name in
                  (("h0", "c0") if cfg.family == "lstm" else ("h0",)))
    return zeros if cfg.family == "lstm" else zeros[0]
