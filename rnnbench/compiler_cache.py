"""torch.compile's cache, shared between runs but never half-written: a private copy per process.

Inductor keeps what it builds (generated C++, the shared libraries gcc makes from it, compiled
graphs) in one folder (TORCHINDUCTOR_CACHE_DIR, by default `torchinductor_<user>` in the
temporary folder) shared by every process. A compiler killed midway (a conformance check that
ran past its time limit, an interrupted run) can leave a library cut short there, and every
later process that loads it fails ("file too short"), run after run.

So every rnnbench process that may compile works in a `PrivateCache`: a folder of its own whose
files are hard links to the shared cache's (no data copied; Inductor never writes into a file
it finds, it builds what is missing), so a warm cache stays warm. A process that finishes
normally `merge`s what it built into the shared cache, each file linked in whole or not at all;
of one that was killed, only what it had written before its last finished piece of work (a
check's result) is merged, since anything later may be cut short. Its folder is removed (by its
parent, or by the next process that finds it abandoned).
"""
from __future__ import annotations

import contextlib
import getpass
import os
import re
import shutil
import tempfile
from pathlib import Path

ENV = "TORCHINDUCTOR_CACHE_DIR"
# Where a process that works in a private copy (`private_for_this_process`) keeps the shared
# cache's place, for the private copies of the processes it starts.
SHARED_ENV = "RNNBENCH_SHARED_INDUCTOR_CACHE"
PRIVATE = "rnnbench-private"    # inside the shared folder: the private copies, never shared
LOCKS = "locks"                 # Inductor's lock files, per folder: not shared either


def shared_cache() -> Path:
    """The shared cache: TORCHINDUCTOR_CACHE_DIR (unless this process works in a private
    copy), else Inductor's default (as torch._inductor.runtime.cache_dir_utils.default_cache_dir
    makes it, without importing it)."""
    for name in (SHARED_ENV, ENV):
        if os.environ.get(name):
            return Path(os.environ[name]).absolute()
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = f"uid_{os.getuid()}"
    return Path(tempfile.gettempdir()) / ("torchinductor_" + re.sub(r'[\\/:*?"<>|]', "_", user))


class PrivateCache:
    """A private copy of `shared` (default `shared_cache()`) for one process; its `env` points
    Inductor at it. Use as a context manager: the folder is removed on the way out. Where no
    copy can be made (a full disk), there is none: `env` leaves Inductor at the shared cache."""

    def __init__(self, shared: str | os.PathLike | None = None):
        self.shared = Path(shared) if shared else shared_cache()
        root = self.shared / PRIVATE
        try:
            root.mkdir(parents=True, exist_ok=True)
            _remove_abandoned(root)
            self.folder: Path | None = Path(tempfile.mkdtemp(prefix=f"{os.getpid()}-", dir=root))
        except OSError:
            self.folder = None
            return
        _link_tree(self.shared, self.folder)

    def __enter__(self) -> "PrivateCache":
        return self

    def __exit__(self, *exc_info) -> None:
        self.remove()

    def env(self, base: dict | None = None) -> dict:
        """`base` (default this process's environment) with Inductor pointed at the copy."""
        base = dict(os.environ if base is None else base)
        return base if self.folder is None else {**base, ENV: str(self.folder)}

    def merge(self, finished: bool = True, last_work_at: float | None = None) -> None:
        """Link what the process built into the shared cache (a file already there stays):
        everything when it `finished`; else only the files last written before it finished its
        last piece of work, at `last_work_at` (a time.time(); None: nothing)."""
        if self.folder is not None and (finished or last_work_at is not None):
            _link_tree(self.folder, self.shared, None if finished else last_work_at)

    def remove(self) -> None:
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)


def _link_tree(source: Path, target: Path, made_before: float | None = None) -> None:
    """Every file under `source` that `target` lacks (and, with `made_before`, that was last
    written before it), hard-linked (or, across file systems, copied and renamed into place, so
    that it appears whole) at the same place under `target`; the private copies and lock files
    are left out, and so is what cannot be written."""
    for folder, subfolders, files in os.walk(source):
        here = Path(folder)
        if here == source:
            subfolders[:] = [s for s in subfolders if s not in (PRIVATE, LOCKS)]
        there = target / here.relative_to(source)
        try:
            there.mkdir(exist_ok=True)
        except OSError:
            subfolders[:] = []
            continue
        for name in files:
            if (there / name).exists() or (made_before is not None
                                           and _written_at(here / name) >= made_before):
                continue
            try:
                os.link(here / name, there / name)
            except FileExistsError:
                continue        # another process put it there meanwhile
            except OSError:
                _copy_whole(here / name, there / name)


def _written_at(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return float("inf")


def _copy_whole(source: Path, target: Path) -> None:
    """Copy `source` to `target` so that `target` appears whole or not at all; a file that
    cannot be copied is left out (it is built again where it is needed)."""
    try:
        fd, partial = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
        os.close(fd)
    except OSError:
        return
    try:
        shutil.copy2(source, partial)
        os.replace(partial, target)
    except OSError:
        os.unlink(partial)


def _remove_abandoned(root: Path) -> None:
    """Remove the private copies whose process is gone (killed before it could remove them)."""
    for folder in root.iterdir():
        pid = folder.name.split("-", 1)[0]
        if pid.isdigit() and not _alive(int(pid)):
            shutil.rmtree(folder, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@contextlib.contextmanager
def private_for_this_process():
    """This process compiles in a `PrivateCache` while the block runs (call it before anything
    compiles: Inductor remembers some paths); what it built is merged when the block ends
    normally. The processes it starts meanwhile make their copies of the shared cache."""
    saved = {name: os.environ.get(name) for name in (ENV, SHARED_ENV)}
    with PrivateCache() as cache:
        os.environ[SHARED_ENV] = str(cache.shared)
        os.environ[ENV] = str(cache.folder)
        try:
            yield cache
            cache.merge()
        finally:
            for name, value in saved.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value
