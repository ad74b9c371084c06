"""The environment captured with results names the rnnbench commit that was measured."""
from __future__ import annotations

import shutil
import subprocess

import pytest

from rnnbench.environment import ISA_LIMITS, SOURCE_ROOT, capture, source_commit

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")


def git(*args, cwd):
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True,
                           text=True).stdout.strip()


def commit_in(folder):
    git("init", "-q", cwd=folder)
    (folder / "f.txt").write_text("x")
    git("add", "f.txt", cwd=folder)
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "one", cwd=folder)
    return git("rev-parse", "HEAD", cwd=folder)


def test_the_commit_of_a_checkout(tmp_path):
    assert source_commit(tmp_path) is None            # not a checkout
    head = commit_in(tmp_path)
    assert source_commit(tmp_path) == head and len(head) == 40


def test_a_folder_inside_someone_elses_repository_is_not_a_checkout(tmp_path):
    commit_in(tmp_path)
    (tmp_path / "site-packages").mkdir()
    assert source_commit(tmp_path / "site-packages") is None


def test_capture_records_the_settings_that_keep_libraries_to_fewer_vector_extensions(
        monkeypatch):
    for name in ISA_LIMITS:
        monkeypatch.delenv(name, raising=False)
    assert capture()["isa_limits"] == ""
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "ALL")             # the defaults limit nothing
    monkeypatch.setenv("RNNBENCH_FUSED_MARCH", "native")
    assert capture()["isa_limits"] == ""
    monkeypatch.setenv("RNNBENCH_FUSED_MARCH", "x86-64-v3")
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "AVX2")
    assert capture()["isa_limits"] == "ONEDNN_MAX_CPU_ISA=AVX2 RNNBENCH_FUSED_MARCH=x86-64-v3"


def test_capture_records_the_commit_and_the_version():
    import rnnbench

    environment = capture()
    assert environment["rnnbench"] == rnnbench.__version__
    assert environment["commit"] == source_commit(SOURCE_ROOT)
