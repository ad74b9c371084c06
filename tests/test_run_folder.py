"""`rnnbench run`'s folder: a complete run or the previous one, never a mix; one run at a time;
a full disk costs the files, never what was printed; an interrupted run ends what it started."""
from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

import rnnbench.documents
from rnnbench.cli import main
from rnnbench.run_folder import STAGING, RunFolder
from test_run import stages  # noqa: F401  (the fixture: conformance and benchmarks stubbed)


def files(folder) -> dict[str, bytes]:
    """Every file under `folder` but the lock and the staging folder, by relative path."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*")
            if p.is_file() and p.name != ".lock" and STAGING not in p.parts}


class FullDisk:
    """The os module as rnnbench.documents sees it on a full disk: a file opened for writing
    takes no bytes."""

    def __getattr__(self, name):
        return getattr(os, name)

    @staticmethod
    def fdopen(fd, mode="r", *args, **kwargs):
        os.close(fd)
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def test_an_interrupted_run_leaves_the_previous_complete_run_as_it_was(tmp_path, stages,
                                                                        monkeypatch, capsys):
    assert main(["run", "--out", str(tmp_path)]) == 0
    complete = files(tmp_path)
    assert {"report.md", "index.html", "bench.json"} <= set(complete)
    import rnnbench.benchmarks.harness

    def interrupted(impls, workloads, progress=None, checkpoint=None, wait=None, **_):
        wait()
        checkpoint({"schema": "rnnbench.bench/2", "results": []})
        raise KeyboardInterrupt

    monkeypatch.setattr(rnnbench.benchmarks.harness, "run_benchmarks", interrupted)
    capsys.readouterr()
    assert main(["run", "--out", str(tmp_path)]) == 130
    assert files(tmp_path) == complete
    staged = tmp_path / STAGING
    assert json.loads((staged / "bench.json").read_text())["interrupted"] is True
    assert (staged / "conformance-native.json").exists()
    said = capsys.readouterr().err
    assert f"what finished is in {staged}" in said


def test_a_second_run_in_the_same_folder_is_refused_in_one_line(tmp_path, stages, capsys):
    with RunFolder(tmp_path):
        assert main(["run", "--out", str(tmp_path)]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1
    assert f"--out {tmp_path} is in use by another rnnbench run (process {os.getpid()})" in error


def test_a_complete_run_replaces_the_previous_runs_files_and_removes_those_it_did_not_make(
        tmp_path):
    (tmp_path / "conformance-gone.json").write_text("{}")
    (tmp_path / "notes.txt").write_text("mine")
    with RunFolder(tmp_path) as folder:
        (folder.staging / "figures").mkdir()
        (folder.staging / "figures" / "speedup.png").write_bytes(b"png")
        (folder.staging / "bench.json").write_text("{}")
        folder.publish()
    assert files(tmp_path) == {"notes.txt": b"mine", "bench.json": b"{}",
                               "figures/speedup.png": b"png"}
    assert not (tmp_path / STAGING).exists()


def test_a_full_disk_loses_nothing_printed_and_keeps_the_previous_run(tmp_path, stages,
                                                                        monkeypatch, capsys):
    assert main(["run", "--out", str(tmp_path)]) == 0
    complete = files(tmp_path)
    capsys.readouterr()
    monkeypatch.setattr(rnnbench.documents, "os", FullDisk())
    assert main(["run", "--out", str(tmp_path)]) == 2
    out, err = capsys.readouterr()
    assert "rnnbench run: done in" in out and "conforms" in out
    assert err.strip().splitlines()[-1].endswith("No space left on device")
    assert files(tmp_path) == complete


def test_conform_prints_its_verdict_before_a_json_write_that_fails(tmp_path, monkeypatch,
                                                                    capsys):
    monkeypatch.setattr(rnnbench.documents, "os", FullDisk())
    path = tmp_path / "native.json"
    assert main(["conform", "native", "--kind", "rnn_cell", "--check", "forward/batched",
                 "--json", str(path)]) == 2
    out, err = capsys.readouterr()
    assert out.strip().splitlines()[-1].startswith("PASSED: native")
    assert err.splitlines()[-1] == (f"rnnbench conform: error: cannot write {path}: "
                                    "No space left on device")
    assert not path.exists()


def test_bench_prints_its_tables_before_a_json_write_that_fails(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(rnnbench.documents, "os", FullDisk())
    workload = tmp_path / "tiny.json"
    workload.write_text(json.dumps({"workloads": [
        {"name": "tiny", "config": {"kind": "rnn_cell", "input_size": 3, "hidden_size": 4},
         "batch": 2, "metrics": ["forward"], "budget_s": 0.02, "min_repeats": 3}]}))
    path = tmp_path / "bench.json"
    assert main(["bench", "--impl", "native", "--workload", str(workload),
                 "--json", str(path)]) == 2
    out, err = capsys.readouterr()
    assert "tiny: forward" in out and "1 ok" in out
    assert err.strip().splitlines()[-1] == (f"rnnbench bench: error: cannot write {path}: "
                                            "No space left on device")


def test_an_interrupted_run_ends_what_it_started_and_exits_143_when_terminated(
        tmp_path, stages, monkeypatch):
    """A build that a thread started (fused's compilers) is ended with the run."""
    import rnnbench.benchmarks.harness
    from rnnbench.impls import Implementation

    started = []
    available = Implementation.unavailable_reason

    def building(impl):
        if impl.name != "fused":
            return available(impl)
        build = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
        started.append(build)
        build.wait()
        return "the build was stopped"

    monkeypatch.setattr(Implementation, "unavailable_reason", building)

    def terminate_once_the_build_runs():
        while not started:
            time.sleep(0.05)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=terminate_once_the_build_runs, daemon=True).start()
    began = time.monotonic()
    assert main(["run", "--out", str(tmp_path)]) == 143
    assert time.monotonic() - began < 120
    assert started[0].poll() is not None


@pytest.fixture(autouse=True)
def _no_leftovers():
    yield
    # Nothing a test here started may outlive it.
    from test_child_bounds import descendants
    assert descendants(os.getpid()) == []
