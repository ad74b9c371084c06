"""Results files: their vocabulary, atomic writes, schema-checked reads.

The words the results documents share live here, so the code that writes a document and the code
that reads it (the report, `rnnbench compare`) cannot drift apart.
"""
from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from rnnbench.errors import UsageError

CONFORMANCE_SCHEMA = "rnnbench.conformance/1"
BENCH_SCHEMA = "rnnbench.bench/2"
# Every bench schema still read: /1 has no raw samples, intervals, conformance or machine check.
BENCH_SCHEMAS = (BENCH_SCHEMA, "rnnbench.bench/1")
# A conformance check's outcome, and a benchmark result's status, in the order tables show them.
# xfail / xpass: a failure, or a pass, of a check listed as a known failure (suites/known.py).
OUTCOMES = ("passed", "failed", "not_supported", "error", "xfail", "xpass")
STATUSES = ("ok", "unavailable", "not_supported", "failed")
# A status of asv results only: a parameter combination that asv's run did not select.
NOT_SELECTED = "not_selected"
# The implementation every speed-up is relative to (the bench document's "vs_native").
BASELINE = "native"
# Results documents nest a few levels; a file nested much deeper is not one, and would exhaust
# the stack of code that walks it.
MAX_NESTING = 64


def write_json(path: str | os.PathLike, data: dict) -> None:
    """Write `data` as JSON atomically: readers see the old file or the new one, never half."""
    text = json.dumps(data, indent=1, default=_jsonable) + "\n"
    write_atomic(path, text.encode())


def write_atomic(path: str | os.PathLike, data: bytes) -> Path:
    """Write `data` to `path` atomically, making its folder if needed; a symlink is written
    through, to its target, as a shell's `>` does; UsageError (one line) when the place cannot
    be written, is not a regular file (a device, a FIFO: the rename would replace it), or the
    data does not fit (the file keeps its old content)."""
    shown, path = Path(path), _landing(path)
    if path.exists() and not path.is_file():
        raise UsageError(f"cannot write {shown}: not a regular file")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    except OSError as exc:
        raise UsageError(f"cannot write {shown}: {exc.strerror or exc}") from None
    try:
        os.fchmod(fd, 0o666 & ~_umask())  # mkstemp makes the file private; results are for sharing
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except OSError as exc:     # a full disk, a quota: the old file stays as it was
        os.unlink(tmp)
        raise UsageError(f"cannot write {shown}: {exc.strerror or exc}") from None
    except BaseException:
        os.unlink(tmp)
        raise
    return path


def require_writable(path: str | os.PathLike, option: str, folder: bool = False) -> None:
    """Fail now, before any work, when `path` (a file, or a folder with `folder=True`) cannot be
    written: UsageError naming `option`. A file is tried in the nearest folder that exists on
    the way and removed at once; nothing else is created. A file that exists must be a regular
    file that can be written (an immutable one cannot be replaced); an empty path is refused."""
    if not str(path):
        raise UsageError(f"{option}: the path is empty")
    path = Path(path)
    where = path if folder else path.parent
    if path.is_dir() and not folder:
        raise UsageError(f"{option} {path}: is a folder, not a file")
    if not folder and _landing(path).exists():
        _require_replaceable(path, option)
    existing = next((p for p in (where, *where.parents) if p.exists()), Path("."))
    if not existing.is_dir():
        what = "is" if existing == path else f"{existing} is"
        raise UsageError(f"{option} {path}: {what} a file, not a folder")
    try:
        fd, probe = tempfile.mkstemp(prefix=".rnnbench-probe-", dir=existing)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise UsageError(f"{option} {path}: cannot write there ({exc.strerror or exc})") from None


def _landing(path: str | os.PathLike) -> Path:
    """Where writing `path` lands: the file itself, or a symlink's target."""
    return Path(os.path.realpath(path))


def _require_replaceable(path: Path, option: str) -> None:
    """UsageError unless the existing file at `path` is a regular file this process can write."""
    target = _landing(path)
    if not target.is_file():
        raise UsageError(f"{option} {path}: not a regular file")
    try:
        with open(target, "ab"):  # appends nothing; refused for a read-only or immutable file
            pass
    except OSError as exc:
        raise UsageError(f"{option} {path}: cannot write it ({exc.strerror or exc})") from None


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def read_json(path: str | os.PathLike, schemas: tuple[str, ...] | None = None,
              what: str = "file") -> dict:
    """Read a results file, checking its "schema" field when `schemas` is given. Every way it
    can fail is a one-line UsageError (not a regular file, not JSON, nested deeper than
    MAX_NESTING, the wrong schema); `what` names the file in "no such <what>"."""
    path = Path(path)
    if path.exists() and not path.is_file():    # a folder, or a FIFO that would block forever
        raise UsageError(f"{path}: not a regular file")
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise UsageError(f"{path}: no such {what}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"{path}: cannot read: {exc}") from None
    except json.JSONDecodeError as exc:
        raise UsageError(f"{path}: not valid JSON ({exc.msg} at line {exc.lineno})") from None
    except RecursionError:
        raise UsageError(_too_deep(path)) from None
    if nesting(data) > MAX_NESTING:
        raise UsageError(_too_deep(path))
    if schemas is not None:
        schema = data.get("schema") if isinstance(data, dict) else None
        if schema not in schemas:
            raise UsageError(f"{path}: schema {schema!r} is not one of {', '.join(schemas)}")
    return data


def _too_deep(path: Path) -> str:
    return f"{path}: nested deeper than {MAX_NESTING} levels, which no results file is"


def nesting(value) -> int:
    """How deeply lists and objects nest in a parsed JSON value (a number or string: 0);
    counted without recursion."""
    deepest, pending = 0, [(value, 1)]
    while pending:
        item, depth = pending.pop()
        children = item.values() if isinstance(item, dict) else item
        if isinstance(item, (dict, list)):
            deepest = max(deepest, depth)
            pending.extend((child, depth + 1) for child in children)
    return deepest


def _jsonable(value):
    # NumPy scalars and tuples-as-keys creep into results; make them plain JSON.
    if hasattr(value, "item"):
        return value.item()
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")
