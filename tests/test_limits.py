"""Limits that follow the machine: a slower machine gets longer time limits, a run cut by them is
incomplete rather than failed, and a long run says where it stands in a log."""
from __future__ import annotations

import io
import json
import time
from pathlib import Path

import pytest

from rnnbench.cli import main
from rnnbench.commands import run as run_command
from rnnbench.suites import isolation, text
from rnnbench.suites.results import CheckResult, ConformanceRun

HOSTILE = Path(__file__).parent / "zoo" / "hostile.py"


def a_run(monkeypatch, reference_s):
    monkeypatch.setattr(isolation, "native_seconds", lambda: {"gradients": 0.5})
    monkeypatch.setattr(isolation, "reference_calibration_s", lambda: reference_s)
    run = isolation._Run({"fuzz": None, "known_failures": {}}, 10.0, None, None)
    run.items = [{"kind": "rnn", "check": "gradients/single-layer"},
                 {"kind": "rnn", "check": "shapes/single-layer"}]
    return run


def test_a_machine_three_times_slower_gets_three_times_the_limits(monkeypatch):
    run = a_run(monkeypatch, reference_s=0.002)
    before = run.limit_s(0), run.limit_s(1), run.lost_budget_s()
    run.handle({"event": "calibration", "seconds": 0.006}, None)
    assert run.slowdown == pytest.approx(3.0)
    assert (run.limit_s(0), run.limit_s(1), run.lost_budget_s()) == pytest.approx(
        tuple(3 * limit for limit in before))


def test_a_faster_machine_keeps_the_limits_and_no_calibration_changes_nothing(monkeypatch):
    run = a_run(monkeypatch, reference_s=0.002)
    run.handle({"event": "calibration", "seconds": 0.001}, None)
    assert run.slowdown == 1.0 and run.limit_s(1) == 10.0
    uncalibrated = a_run(monkeypatch, reference_s=None)
    uncalibrated.handle({"event": "calibration", "seconds": 1.0}, None)
    assert uncalibrated.slowdown == 1.0


def verdict_of(summary: dict, cut: int, interrupted=False) -> str:
    """The first word of conform's verdict line for results with `summary`'s outcomes, `cut`
    of its errors cut by a limit (timed out, or not run for a budget)."""
    results = []
    for outcome, n in summary.items():
        for index in range(n):
            cut_here = outcome == "error" and index < cut
            results.append(CheckResult(f"forward/case-{outcome}-{index}", "forward", "rnn",
                                       f"case-{outcome}-{index}", outcome,
                                       numbers={"incomplete": True} if cut_here else {}))
    doc = ConformanceRun(target="t", results=results, duration_s=1.0, interrupted=interrupted)
    return text.verdict(doc).split(":")[0]


def test_a_run_whose_only_problems_were_cut_is_incomplete_not_failed():
    ok = {"passed": 5, "failed": 0, "not_supported": 0, "error": 0}
    assert verdict_of({**ok, "error": 2}, cut=2) == "INCOMPLETE"
    assert verdict_of({**ok, "error": 3}, cut=2) == "FAILED"       # one error was not a cut
    assert verdict_of({**ok, "failed": 1, "error": 2}, cut=2) == "FAILED"
    assert verdict_of(ok, cut=0) == "PASSED"
    assert verdict_of({**ok, "error": 2}, cut=2, interrupted=True) == "INTERRUPTED"


def test_a_check_that_runs_out_of_time_makes_conform_incomplete(tmp_path, capsys):
    out = tmp_path / "c.json"
    code = main(["conform", f"{HOSTILE}:HangsInForward", "--kind", "rnn_cell", "--check",
                 "forward/batched", "--timeout", "2", "--json", str(out)])
    assert code == 3            # incomplete: neither conforming nor not
    printed = capsys.readouterr().out
    assert any(line.startswith("INCOMPLETE: ") for line in printed.splitlines())
    doc = json.loads(out.read_text())
    assert doc["verdict"][doc["require"]]["state"] == "incomplete"
    [result] = doc["results"]
    assert result["numbers"]["incomplete"] is True
    assert result["message"].startswith("the process timed out after")


def test_a_long_stage_in_a_log_says_where_it_stands(monkeypatch):
    monkeypatch.setattr(run_command, "HEARTBEAT_S", 0.2)
    monkeypatch.setattr(run_command, "HEARTBEAT_POLL_S", 0.05)
    log = io.StringIO()
    progress = run_command.StageProgress(log)
    progress.update("compile 1/2", "[3/120] compile gradients/single-layer")
    progress.update("bench", "benchmarks: waiting for conformance to finish")
    time.sleep(1.0)
    progress.close()
    lines = log.getvalue().splitlines()
    assert len(lines) >= 2
    assert lines[0] == ("[0:00] [3/120] compile gradients/single-layer | benchmarks: waiting "
                        "for conformance to finish")
