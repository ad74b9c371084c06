"""Processes compiling at once share torch.compile's cache, but never a half-built file: each
compiles in a private copy and shares what it built only when it finished."""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from rnnbench.compiler_cache import PRIVATE, PrivateCache

# Compile one configuration of the compile implementation in a private copy of the shared cache;
# with SABOTAGE, then cut short every library this process built (as a compiler killed while
# writing leaves it) and die by SIGKILL, before anything could be shared.
COMPILE = """
import os, signal, sys
from pathlib import Path

from rnnbench.compiler_cache import private_for_this_process

with private_for_this_process() as cache:
    import torch
    from rnnbench.impls.compile import RNN

    torch.manual_seed(0)
    out, _ = RNN(3, 5)(torch.randn(16, 2, 3))
    if os.environ.get("SABOTAGE"):
        for built in Path(cache.folder).rglob("*.so"):
            if built.stat().st_nlink == 1:
                os.truncate(built, 64)
        os.kill(os.getpid(), signal.SIGKILL)
print(f"{out.sum().item():.6f}")
"""


def compile_in(shared: Path, **env) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", COMPILE], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(shared), **env})


def libraries(shared: Path) -> list[Path]:
    return [p for p in shared.rglob("*.so") if PRIVATE not in p.parts]


def test_a_process_killed_midway_shares_nothing_and_two_compiling_at_once_both_succeed(tmp_path):
    shared = tmp_path / "inductor"
    killed = compile_in(shared, SABOTAGE="1")
    killed.communicate(timeout=900)
    assert killed.returncode == -9
    assert libraries(shared) == []
    both = [compile_in(shared), compile_in(shared)]
    answers = [process.communicate(timeout=900) for process in both]
    for process, (out, err) in zip(both, answers):
        assert process.returncode == 0, err
    assert answers[0][0] == answers[1][0]
    assert libraries(shared)                        # shared for the next run
    assert list((shared / PRIVATE).iterdir()) == []  # the private copies are gone


def test_a_private_copy_holds_the_shared_files_as_links_and_merges_only_what_is_new(tmp_path):
    shared = tmp_path / "inductor"
    (shared / "ab").mkdir(parents=True)
    (shared / "ab" / "old.so").write_bytes(b"old")
    (shared / "locks").mkdir()
    (shared / "locks" / "x.lock").write_text("")
    with PrivateCache(shared) as cache:
        copy = cache.folder / "ab" / "old.so"
        assert copy.read_bytes() == b"old"
        assert copy.stat().st_ino == (shared / "ab" / "old.so").stat().st_ino   # a link
        assert not (cache.folder / "locks").exists()
        (cache.folder / "cd").mkdir()
        (cache.folder / "cd" / "new.so").write_bytes(b"new")
        cache.merge()
    assert (shared / "cd" / "new.so").read_bytes() == b"new"
    assert not cache.folder.exists()


def test_a_private_copy_left_by_a_dead_process_is_removed_by_the_next(tmp_path):
    shared = tmp_path / "inductor"
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True).stdout.strip()
    abandoned = shared / PRIVATE / f"{dead}-abandoned"
    abandoned.mkdir(parents=True)
    with PrivateCache(shared):
        assert not abandoned.exists()


def test_a_process_that_did_not_finish_shares_only_what_it_wrote_before_its_last_result(tmp_path):
    shared = tmp_path / "inductor"
    with PrivateCache(shared) as cache:
        (cache.folder / "whole.so").write_bytes(b"built for a finished check")
        last_result = time.time()
        os.utime(cache.folder / "whole.so", (last_result - 10, last_result - 10))
        (cache.folder / "partial.so").write_bytes(b"cut sh")     # written after it
        cache.merge(finished=False, last_work_at=last_result)
    assert (shared / "whole.so").exists() and not (shared / "partial.so").exists()
