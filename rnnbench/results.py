"""Reading and writing results files: atomic writes, schema-checked reads."""
from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from rnnbench.errors import UsageError


def write_json(path: str | os.PathLike, data: dict) -> None:
    """Write `data` as JSON atomically: readers see the old file or the new one, never half."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    except OSError as exc:
        raise UsageError(f"cannot write {path}: {exc.strerror or exc}") from None
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(data, f, indent=1, default=_jsonable)
            f.write("\n")
        os.chmod(tmp, 0o644)  # mkstemp makes the file private; results are meant to be shared
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def read_json(path: str | os.PathLike, schemas: tuple[str, ...] | None = None) -> dict:
    """Read a results file, checking its "schema" field when `schemas` is given."""
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise UsageError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"{path}: cannot read: {exc}") from None
    except json.JSONDecodeError as exc:
        raise UsageError(f"{path}: not valid JSON ({exc.msg} at line {exc.lineno})") from None
    if schemas is not None:
        schema = data.get("schema") if isinstance(data, dict) else None
        if schema not in schemas:
            raise UsageError(f"{path}: schema {schema!r} is not one of {', '.join(schemas)}")
    return data


def _jsonable(value):
    # NumPy scalars and tuples-as-keys creep into results; make them plain JSON.
    if hasattr(value, "item"):
        return value.item()
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")
