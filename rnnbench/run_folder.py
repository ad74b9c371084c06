"""The folder `rnnbench run` writes to: one run at a time, and a complete run or none.

A run takes the folder's lock (`.lock`, an flock held while it runs, so that a second run in
the same folder is refused at once instead of overwriting the first's files) and writes every
file into `.incomplete/` inside it. Only when the run is complete does `publish` move the new
files into the folder, in place of the previous run's (whose files the new run did not make
are removed), so an interrupted run leaves the last complete one as it was, and its own
finished part in `.incomplete/` (which report folders skip: it is hidden).
"""
from __future__ import annotations

import fcntl
import os
import shutil
from pathlib import Path

from rnnbench.errors import UsageError

STAGING = ".incomplete"
LOCK = ".lock"
# What a run writes: the previous run's files of these names are replaced or removed.
OUTPUTS = ("conformance-*.json", "bench.json", "report.md", "index.html", "figures/*.png")


class RunFolder:
    """`folder`, locked for this run (UsageError when another run holds it), with a fresh
    staging folder to write into. Use as a context manager; the lock goes with it."""

    def __init__(self, folder: str | os.PathLike):
        self.folder = Path(folder)
        self.staging = self.folder / STAGING
        self.lock_fd: int | None = None

    def __enter__(self) -> "RunFolder":
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.folder / LOCK, os.O_RDWR | os.O_CREAT, 0o666)
        except OSError as exc:
            raise UsageError(f"--out {self.folder}: cannot write there "
                             f"({exc.strerror or exc})") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 32).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            raise UsageError(f"--out {self.folder} is in use by another rnnbench run (process "
                             f"{holder}); wait for it to finish, or give another --out") from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self.lock_fd = fd
        shutil.rmtree(self.staging, ignore_errors=True)   # an earlier interrupted run's
        self.staging.mkdir()
        return self

    def __exit__(self, *exc_info) -> None:
        if self.lock_fd is not None:
            os.close(self.lock_fd)      # closing the descriptor releases the flock
            self.lock_fd = None

    def publish(self) -> None:
        """Move the staged files into the folder, replacing the previous run's; remove the
        previous run's files this run did not make. UsageError when a move fails."""
        made = {p.relative_to(self.staging) for p in self.staging.rglob("*") if p.is_file()}
        try:
            for name in sorted(made):
                (self.folder / name).parent.mkdir(parents=True, exist_ok=True)
                os.replace(self.staging / name, self.folder / name)
            for pattern in OUTPUTS:
                for old in self.folder.glob(pattern):
                    if old.relative_to(self.folder) not in made:
                        old.unlink()
        except OSError as exc:
            raise UsageError(f"cannot move the run's files into {self.folder}: "
                             f"{exc.strerror or exc}") from None
        shutil.rmtree(self.staging, ignore_errors=True)
