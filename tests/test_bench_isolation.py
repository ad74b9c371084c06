"""`bench` times implementations that are not built in inside a child process: one that exits,
crashes or hangs fails its workload, said as such, and everything else is kept."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from rnnbench.benchmarks.isolation import needs_isolation
from rnnbench.cli import main

HOSTILE = Path(__file__).parent / "zoo" / "hostile.py"
WORKLOAD = {"workloads": [{"name": "tiny", "config": {"kind": "rnn_cell", "input_size": 3,
                                                      "hidden_size": 4},
                           "batch": 2, "metrics": ["forward"], "budget_s": 0.02,
                           "min_repeats": 3}]}


@pytest.fixture
def tiny(tmp_path) -> Path:
    path = tmp_path / "tiny.json"
    path.write_text(json.dumps(WORKLOAD))
    return path


def by_impl(path: Path) -> dict[str, dict]:
    doc = json.loads(path.read_text())
    assert doc["interrupted"] is False
    return {r["impl"]: r for r in doc["results"]}


def test_only_what_is_not_built_in_needs_a_child():
    assert not needs_isolation(["native", "compile", "fused"])
    assert needs_isolation(["native", "my_rnn.py:MyRNN"])
    assert needs_isolation(["mypkg.rnns:IMPLEMENTATION"])


def test_an_exit_and_a_segfault_in_forward_fail_their_implementations_and_keep_natives(
        tiny, tmp_path, capsys):
    exits, crashes = f"{HOSTILE}:ExitsInForward", f"{HOSTILE}:SegfaultsInForward"
    out = tmp_path / "bench.json"
    code = main(["bench", "--impl", f"{exits},{crashes}", "--kind", "rnn_cell",
                 "--workload", str(tiny), "--json", str(out)])
    assert code == 1
    results = by_impl(out)
    assert results["native"]["status"] == "ok" and results["native"]["median_s"] > 0
    assert results[exits]["status"] == "failed"
    assert results[exits]["reason"].startswith("the process exited with status 0 during ")
    assert results[crashes]["status"] == "failed"
    assert results[crashes]["reason"].startswith("the process was killed by SIGSEGV during ")
    printed = " ".join(capsys.readouterr().out.split())     # notes are wrapped at 100 columns
    assert f"{exits}: failed: the process exited with status 0 during" in printed


def test_a_hang_in_forward_is_cut_at_the_timeout_and_natives_results_are_kept(tiny, tmp_path):
    hangs = f"{HOSTILE}:HangsInForward"
    out = tmp_path / "bench.json"
    code = main(["bench", "--impl", hangs, "--kind", "rnn_cell", "--workload", str(tiny),
                 "--timeout", "3", "--json", str(out)])
    assert code == 1
    results = by_impl(out)
    assert results["native"]["status"] == "ok"
    assert results[hangs]["reason"].startswith("the process timed out after 3 s during ")
