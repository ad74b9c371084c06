"""The registry: which implementations exist, and how a target a user names becomes one.

A target is a registered name (`eager`), `package.module:attr`, or `path/to/file.py:attr`. The
attribute is an `Implementation`, or a bare torch.nn-like constructor (a user's own class), which
then needs the kind it implements. Every way a target can be wrong raises `UsageError` with a
one-line message, so the CLI prints it and exits 2 instead of showing a traceback.
"""
from __future__ import annotations

import dataclasses
import hashlib
import importlib
import importlib.metadata
import importlib.util
import os
import sys
import warnings
from pathlib import Path

from torch import nn

from rnnbench.errors import IMPORT_FAILURES, UsageError, one_line
from rnnbench.impls.base import Implementation
from rnnbench.reference.kinds import KINDS
from rnnbench.wording import with_article

# Built-in implementations: each is the module rnnbench.impls.<name> with an IMPLEMENTATION.
BUILTINS = ("native", "eager", "torchscript", "compile", "fused", "onnxruntime", "implicit",
            "triton")
ENTRY_POINT_GROUP = "rnnbench.impls"


def registered() -> dict[str, Implementation]:
    """Every registered implementation by name: the built-ins, then the entry points of the
    `rnnbench.impls` group (each entry point's object is an Implementation)."""
    impls = {name: importlib.import_module(f"rnnbench.impls.{name}").IMPLEMENTATION
             for name in BUILTINS}
    for entry_point in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        if entry_point.name in impls:
            warnings.warn(f"entry point {entry_point.name} = {entry_point.value} ignored: "
                          f"the name {entry_point.name!r} is already registered")
            continue
        impls[entry_point.name] = _from_entry_point(entry_point)
    return impls


def registered_names() -> list[str]:
    """The names `registered()` has, without importing any entry point's code."""
    names = list(BUILTINS)
    names += [ep.name for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)
              if ep.name not in names]
    return names


def load(target: str, kind: str | None = None, kind_option: str = "--kind", *,
         kinds_given: tuple[str, ...] = ()) -> Implementation:
    """Resolve `target` (a registered name, `package.module:attr` or `path/to/file.py:attr`).

    `attr` may be dotted. When it is a bare constructor rather than an Implementation, `kind`
    says which kind it implements and the result is an Implementation named `target` with that
    one kind. When it is an Implementation and `kind` is given, the kind must be one it provides.
    `kind_option` is what the caller's users type to give the kind, and `kinds_given` the
    several kinds they gave instead of one (both for the error messages).
    """
    if kind is not None and kind not in KINDS:
        raise UsageError(f"unknown kind {kind!r}; known kinds: {', '.join(KINDS)}")
    if ":" in target:
        where, _, attr = target.rpartition(":")
        if os.path.sep in where or where.startswith("."):
            _require_python_file(where)  # a path, not a module name: ../models, model.json
        module = _import_file(where) if where.endswith(".py") else _import_module(where)
        obj = _attribute(module, attr, where)
    elif target.endswith(".py"):
        raise UsageError(f"name the object to load from the file: {target}:ATTR")
    else:
        impls = registered()
        if target not in impls:
            raise UsageError(f"unknown implementation {target!r}; registered: {', '.join(impls)} "
                             "(or name an object as package.module:attr or path/to/file.py:attr)")
        obj = impls[target]
    return _as_implementation(obj, target, kind, kind_option, kinds_given)


def _as_implementation(obj, target: str, kind: str | None, kind_option: str,
                       kinds_given: tuple[str, ...] = ()) -> Implementation:
    if isinstance(obj, Implementation):
        if kind is not None and kind not in obj.kinds:
            raise UsageError(f"{target} provides no {kind!r}; it provides {', '.join(obj.kinds)}")
        return obj
    if isinstance(obj, nn.Module):
        raise UsageError(f"{target} is an instance of {type(obj).__name__}, already built; name "
                         "its class (the constructor), which the checks call with each "
                         "configuration")
    if not callable(obj):
        raise UsageError(f"{target} is {with_article(type(obj).__name__)}, neither an "
                         "Implementation nor a constructor")
    if kind is None and len(kinds_given) > 1:
        raise UsageError(f"{target} is a bare constructor, which implements one kind: give one "
                         f"{kind_option}, not {len(kinds_given)} ({', '.join(kinds_given)})")
    if kind is None:
        raise UsageError(f"{target} is a bare constructor: say which kind it implements "
                         f"({kind_option}, one of {', '.join(KINDS)})")
    return Implementation(name=target, kinds={kind: obj},
                          description=f"{getattr(obj, '__qualname__', repr(obj))} as {kind}")


def _require_python_file(where: str) -> None:
    """UsageError unless the path part of a target is a Python file."""
    if os.path.isdir(where):
        raise UsageError(f"{where} is a folder: name a .py file in it (path/to/file.py:ATTR) or "
                         "a module (package.module:ATTR)")
    if not where.endswith(".py"):
        what = "no such file" if not os.path.exists(where) else "not a .py file"
        raise UsageError(f"{where}: {what}; a target is path/to/file.py:ATTR or package.module:ATTR")


def _import_module(name: str):
    try:
        return importlib.import_module(name)
    except IMPORT_FAILURES as exc:
        raise UsageError(f"cannot import {name!r}: {one_line(exc)}") from exc


def _import_file(path_text: str):
    """Import a file as a fresh module whose name is unique to the file's path, so two files
    both called model.py do not replace each other."""
    path = Path(path_text)
    if not path.is_file():
        raise UsageError(f"no such file: {path_text}")
    path = path.resolve()
    name = f"rnnbench_target_{hashlib.sha1(str(path).encode()).hexdigest()[:12]}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses and pickle look a class's module up by name
    sys.path.insert(0, str(path.parent))  # the file may import its neighbours, as under `python file.py`
    try:
        spec.loader.exec_module(module)
    except IMPORT_FAILURES as exc:
        del sys.modules[name]
        raise UsageError(f"cannot import {path_text}: {one_line(exc)}") from exc
    finally:
        sys.path.remove(str(path.parent))
    return module


def _attribute(module, attr: str, where: str):
    obj = module
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise UsageError(f"{where} has no attribute {attr!r}") from None
    return obj


def _from_entry_point(entry_point) -> Implementation:
    """The entry point's Implementation. One that cannot be loaded is listed as unavailable with
    the reason, so a broken third-party package cannot hide the others."""
    try:
        obj = entry_point.load()
    except IMPORT_FAILURES as exc:
        return _unavailable(entry_point.name, f"entry point {entry_point.value} failed to load: "
                                              f"{one_line(exc)}")
    if not isinstance(obj, Implementation):
        return _unavailable(entry_point.name, f"entry point {entry_point.value} is a "
                                              f"{type(obj).__name__}, not an Implementation")
    return obj if obj.name == entry_point.name else dataclasses.replace(obj, name=entry_point.name)


def _unavailable(name: str, reason: str) -> Implementation:
    return Implementation(name=name, kinds={}, description="(could not be loaded)",
                          availability=lambda: reason)
