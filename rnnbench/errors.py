"""The exception type the CLI turns into a one-line message and exit code 2, and how any
exception is said in one line."""
from __future__ import annotations

import linecache
import re
import sys
import traceback
from pathlib import Path

from rnnbench.findings import strip_addresses

# What importing or calling someone else's code may raise; SystemExit too, as a script may call
# sys.exit.
IMPORT_FAILURES = (Exception, SystemExit)


class UsageError(Exception):
    """A user input is wrong (a target, a kind, a file, an option); the message says which."""


# The first lines of messages that hold a traceback, the reason on their last line: Python's (as
# C++ libraries such as MXNet format theirs) and TorchScript's interpreter's.
_SCRIPT_OPENING = "The following operation failed in the TorchScript interpreter."
_TRACEBACK_OPENINGS = ("Traceback (most recent call last):", _SCRIPT_OPENING)


def one_line(exc: BaseException) -> str:
    """An exception as one line: its type and the first line of its message that says something
    (not a rule of dashes; the last line of a traceback the message holds), then the exception
    that caused it (a wrapper's message often hides the real one), without object addresses,
    which differ from run to run."""
    lines = [line for line in str(exc).strip().splitlines() if any(c.isalnum() for c in line)]
    if lines and lines[0].strip() in _TRACEBACK_OPENINGS:
        # a traceback inside the message (a C++ library's, TorchScript's): the reason is its last
        lines = [lines[-1].strip().removeprefix(f"{type(exc).__name__}: ")]
    text = f"{type(exc).__name__}: {lines[0]}" if lines else type(exc).__name__
    cause = exc.__cause__ or (None if exc.__suppress_context__ else exc.__context__)
    if cause is not None and cause is not exc:
        text += f" (caused by {one_line(cause)})"
    return strip_addresses(text)


def _not_users() -> tuple[str, ...]:
    """The folders of code that is not the user's: rnnbench's packages, torch's, NumPy's and
    the standard library."""
    folders = {Path(module.__file__).parent for name, module in list(sys.modules.items())
               if (name == "rnnbench" or name.startswith("rnnbench.")
                   or name in ("torch", "numpy")) and getattr(module, "__file__", None)}
    folders.add(Path(traceback.__file__).parent)
    return tuple(str(folder.resolve()) + "/" for folder in folders)


# A frame of the traceback TorchScript's interpreter writes into its message.
_SCRIPT_FRAME = re.compile(r'^\s*File "([^"]+)", line (\d+)', re.MULTILINE)


def raised_at(exc: BaseException) -> str:
    """"file.py:line" of the last frame of the user's own code the exception passed through
    (rnnbench's, torch's, NumPy's and the standard library's frames skipped), or of the
    TorchScript traceback in its message (a scripted forward runs none of its lines in Python),
    else of the innermost frame; "" without a traceback."""
    frames = [(f.filename, f.lineno) for f in traceback.extract_tb(exc.__traceback__)]
    if not frames:
        return ""
    skipped = _not_users()
    message = str(exc).lstrip()
    scripted = ([(path, int(line)) for path, line in _SCRIPT_FRAME.findall(message)]
                if message.startswith(_SCRIPT_OPENING) else [])
    users = [(path, line) for path, line in frames + scripted
             if not str(Path(path).resolve()).startswith(skipped)]
    path, line = (users or frames)[-1]
    return f"{Path(path).name}:{line}"


# The exceptions code raises to refuse an argument's value where the line raising it names the
# argument (`assert not batch_first`, `raise ValueError("only supports num_layers=1")`).
REFUSING = (AssertionError, ValueError, RuntimeError)


def raised_naming(exc: BaseException, names) -> bool:
    """Whether `exc` was raised by an `assert` or `raise` statement of the user's own code (its
    innermost frame, outside torch and rnnbench) whose line names one of `names` as a word
    (`assert not batch_first`, `raise ValueError("only supports num_layers=1")`): a refusal,
    not a torch operation that failed on a line that happens to name it."""
    frame = exc.__traceback__
    while frame is not None and frame.tb_next is not None:
        frame = frame.tb_next
    if frame is None:
        return False
    path = frame.tb_frame.f_code.co_filename
    if str(Path(path).resolve()).startswith(_not_users()):
        return False
    line = linecache.getline(path, frame.tb_lineno).strip()
    return (line.startswith(("assert ", "raise ")) and
            any(re.search(rf"\b{name}\b", line) for name in names))
