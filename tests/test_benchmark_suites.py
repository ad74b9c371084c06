"""The pytest-benchmark suite as a maintainer runs it: its options under their group in
`--help`, a bare class with its kind, pinned threads, and the one-line refusals."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SUITE = ROOT / "benchmarks" / "test_pytest_benchmark.py"
WORKLOADS = {"description": "tiny", "workloads": [
    {"name": "rnn-tiny", "config": {"kind": "rnn", "input_size": 4, "hidden_size": 4},
     "batch": 2, "steps": 3, "metrics": ["forward"]},
    {"name": "gru-tiny", "config": {"kind": "gru", "input_size": 4, "hidden_size": 4},
     "batch": 2, "steps": 3, "metrics": ["forward"]}]}
QUICKLY = ["--benchmark-min-rounds=2", "--benchmark-max-time=0.001", "--benchmark-warmup=off",
           "-p", "no:cacheprovider"]


def pytest_run(*args, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pytest", str(SUITE), *map(str, args)],
                          cwd=cwd, capture_output=True, text=True, timeout=600)


@pytest.fixture
def bare_class(tmp_path) -> str:
    (tmp_path / "mine.py").write_text(textwrap.dedent("""
        import torch

        class MyRNN(torch.nn.RNN):
            pass
    """))
    (tmp_path / "tiny.json").write_text(json.dumps(WORKLOADS))
    return f"{tmp_path / 'mine.py'}:MyRNN"


def test_help_lists_the_suites_options_under_its_group(tmp_path):
    done = pytest_run("--help", cwd=tmp_path)
    assert done.returncode == 0
    group = done.stdout.split("rnnbench benchmarks (pytest benchmarks/test_pytest_benchmark.py):",
                              1)[1].split("\n\n", 1)[0]
    for option in ("--bench-preset", "--bench-kind", "--bench-threads", "--bench-impl",
                   "--bench-workload", "--bench-device"):
        assert f"  {option}=" in group


def test_a_bare_class_runs_with_its_kind_on_pinned_threads(tmp_path, bare_class):
    out = tmp_path / "out" / "pb.json"
    done = pytest_run("--bench-workload", tmp_path / "tiny.json", "--bench-impl", bare_class,
                      "--bench-kind", "rnn", "--bench-threads", "1", "--benchmark-json", out,
                      *QUICKLY, cwd=tmp_path)
    assert done.returncode == 0, done.stdout[-2000:]
    benchmarks = json.loads(out.read_text())["benchmarks"]
    ran = {(b["extra_info"]["impl"], b["extra_info"]["workload"]["name"]) for b in benchmarks}
    assert ran == {("native", "rnn-tiny"), (bare_class, "rnn-tiny")}     # no gru: --bench-kind
    assert {b["extra_info"]["threads"] for b in benchmarks} == {1}


@pytest.mark.parametrize("options, message", [
    ([], "say which kind it implements (--bench-kind, one of"),
    (["--bench-kind", "transformer"], "--bench-kind: unknown kind 'transformer'"),
    (["--bench-kind", "rnn", "--bench-threads", "0"], "--bench-threads must be at least 1"),
], ids=["no-kind", "unknown-kind", "no-threads"])
def test_a_wrong_option_is_said_before_anything_runs(tmp_path, bare_class, options, message):
    done = pytest_run("--bench-workload", tmp_path / "tiny.json", "--bench-impl", bare_class,
                      *options, *QUICKLY, cwd=tmp_path)
    assert done.returncode == 2 and message in done.stderr + done.stdout
    assert "passed" not in done.stdout
