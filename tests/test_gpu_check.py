"""The GPU check (scripts/gpu_check.sh) as planned, without a GPU: its device call must run every
item the first session with a GPU needs, within 8 minutes, and its rehearsal the same steps on the
CPU; and the two helpers it calls, scripts/goals_table.py and scripts/cudnn_kernels.py."""
from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "gpu_check.sh"
FIXTURES = Path(__file__).parent / "report_fixtures"
DEVICE_SECONDS = 8 * 60          # one call, leaving room in the session's 15 minutes for another
TOOL_COMMAND_CHARS = 2000        # the device tool's limit on a command

sys.path.insert(0, str(ROOT / "scripts"))
import cudnn_kernels  # noqa: E402
import goals_table  # noqa: E402

needs_bash = pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")


def gpu_check(*args, out=None, impls=None) -> subprocess.CompletedProcess:
    env = {**os.environ, "OUT": str(out or "unused"), "PYTHON": sys.executable}
    env.pop("IMPLS", None)
    if impls is not None:
        env["IMPLS"] = impls
    return subprocess.run(["bash", str(SCRIPT), *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=60)


def planned(*args, impls=None) -> list[tuple[str, str, int, list[str]]]:
    """(phase, step, limit, command) of every step the script would run."""
    done = gpu_check("--dry-run", *args, impls=impls)
    assert done.returncode == 0, done.stderr
    steps = []
    for line in done.stdout.splitlines():
        match = re.fullmatch(r"(install|checks|bench|others|report) (\S+) (\d+): (.*)", line)
        if match:
            phase, name, limit, command = match.groups()
            steps.append((phase, name, int(limit), shlex.split(command)))
    return steps


def commands(steps, name_pattern):
    return [command for _, name, _, command in steps if re.fullmatch(name_pattern, name)]


@needs_bash
def test_the_device_call_ends_within_eight_minutes():
    steps = planned()
    limits = {}
    for phase, name, limit, _ in steps:
        limits.setdefault(phase, []).append((name, limit))
    # install, bench and others run their steps one after the other; checks and report at once
    total = (sum(limit for _, limit in limits["install"])
             + max(limit for _, limit in limits["checks"])
             + sum(limit for _, limit in limits["bench"] + limits["others"])
             + max(limit for _, limit in limits["report"]))
    assert total <= DEVICE_SECONDS


@needs_bash
def test_the_device_call_checks_and_times_every_implementation_the_issue_names():
    steps = planned()
    for impl in ("native", "eager", "compile", "triton"):
        [conform] = commands(steps, f"conform-{impl}-cuda")
        assert conform[conform.index("conform") + 1] == impl
        assert "--quick" in conform and conform[conform.index("--device") + 1] == "cuda"
    for impl in ("native", "eager", "triton"):
        [half] = commands(steps, f"conform-{impl}-cuda-half")
        pattern = half[half.index("--check") + 1]
        assert "--quick" not in half     # the quick case list has no half-precision rows
        for check in ("forward-float16/x", "gradients-bfloat16/x"):
            assert re.fullmatch(pattern.replace("*", ".*"), check)
    [tolerance] = commands(steps, "half-tolerance-cuda")
    assert "scripts/half_tolerance.py" in tolerance and "cuda" in tolerance
    ieee, tf32 = commands(steps, "bench-goals-cuda"), commands(steps, "bench-goals-cuda-tf32")
    [others] = commands(steps, "bench-goals-cuda-compile-eager")
    for [timed] in (ieee, tf32):
        assert timed[timed.index("--preset") + 1] == "goals"
        assert timed[timed.index("--impl") + 1] == "native,triton"
    # compile traces each workload's unrolled loop anew in every process: once, on the rnn kind
    assert others[others.index("--impl") + 1] == "native,compile,eager"
    assert others[others.index("--kind") + 1] == "rnn" and "goals" in others
    assert "TORCH_ALLOW_TF32_CUBLAS_OVERRIDE=1" in tf32[0]
    assert not any(word.startswith("TORCH_ALLOW_TF32") for word in ieee[0] + others)
    [plans] = commands(steps, "triton-plans-cuda")
    assert "scripts/triton_plans.py" in plans
    [tf32_report] = commands(steps, "report-cuda-tf32")
    [table] = commands(steps, "goals-table-cuda")
    assert tf32[0][-1] in tf32_report and ieee[0][-1] not in tf32_report
    assert {f"ieee={ieee[0][-1]}", f"tf32={tf32[0][-1]}"} <= set(table)


@needs_bash
def test_a_second_call_can_check_only_the_implementations_named():
    steps = planned("checks", impls="triton")
    assert {name for _, name, _, _ in steps if name.startswith("conform-")} == \
           {"conform-triton-cuda", "conform-triton-cuda-half"}
    compile_only = planned("checks", impls="compile")
    assert [name for _, name, _, _ in compile_only if name.startswith("conform-")] == \
           ["conform-compile-cuda"]      # no half-precision rows: a graph per case and dtype


@needs_bash
def test_the_rehearsal_runs_the_same_steps_on_the_cpu():
    device, rehearsal = planned(), planned("--rehearse")
    assert sorted((phase, name.replace("cuda", "cpu").replace("-goals-", "-rehearsal-"))
                  for phase, name, _, _ in device) == \
           sorted((phase, name) for phase, name, _, _ in rehearsal)
    for _, _, _, command in rehearsal:
        assert "cuda" not in command
        if "--device" in command:
            assert command[command.index("--device") + 1] == "cpu"


@needs_bash
def test_a_phase_can_be_run_again_alone():
    phases = {phase for phase, _, _, _ in planned("bench")}
    assert phases == {"install", "bench"}


@needs_bash
@pytest.mark.parametrize("args", [("--bogus",), ("checks", "twice?")])
def test_a_wrong_argument_is_a_usage_error(args):
    done = gpu_check(*args)
    assert done.returncode == 2 and "usage: bash scripts/gpu_check.sh" in done.stderr


def test_the_docs_give_the_one_call_the_device_tool_takes():
    text = (ROOT / "docs" / "gpu.md").read_text()
    command = re.search(r"^command: +(.+)$", text, re.M).group(1)
    timeout = int(re.search(r"^timeout_s: +(\d+)$", text, re.M).group(1))
    assert command == "bash scripts/gpu_check.sh" and len(command) <= TOOL_COMMAND_CHARS
    assert DEVICE_SECONDS < timeout <= 600


# --- scripts/goals_table.py ---------------------------------------------------------------------

def result(impl, median, ratio=None, ci=None, status="ok", workload="w", metric="forward"):
    return {"impl": impl, "kind": "rnn", "workload": workload, "metric": metric, "status": status,
            "reason": None if status == "ok" else "provides no 'lstm'",
            "median_s": median, "vs_native": ratio, "vs_native_ci": ci,
            "vs_native_verdict": None if ratio is None else "faster" if ratio > 1 else "slower",
            "conforms": True if status == "ok" else None, "repeats": 9 if status == "ok" else 0}


def bench_file(path, results):
    path.write_text(json.dumps({"schema": "rnnbench.bench/2", "results": results}))
    return path


def table_rows(text, heading):
    block = text.split(f"{heading}:\n\n", 1)[1].split("\n\n", 1)[0]
    return [[cell.strip() for cell in line.strip("|").split("|")]
            for line in block.splitlines()[2:]]


def test_the_goals_table_puts_each_documents_median_and_speed_up_side_by_side(tmp_path, capsys):
    ieee = bench_file(tmp_path / "ieee.json", [
        result("native", 2e-3), result("triton", 1e-3, 2.0, (1.9, 2.1)),
        result("triton", None, status="not_supported", workload="l")])
    tf32 = bench_file(tmp_path / "tf32.json", [
        result("native", 1e-3), result("triton", 2e-3, 0.5, (0.45, 0.55)),
        result("triton", None, status="not_supported", workload="l")])
    assert goals_table.main([f"ieee={ieee}", f"tf32={tf32}"]) == 0
    out = capsys.readouterr().out
    assert "| impl   | median (ieee)   | vs native (ieee)   | median (tf32)" in out
    assert table_rows(out, "w, forward") == [
        ["native", "2 ms", "baseline", "1 ms", "baseline"],
        ["triton", "1 ms", "2.00x (1.90-2.10)", "2 ms", "0.50x (0.45-0.55)"]]
    assert "l, forward" not in out       # timed by neither document


def test_the_goals_table_names_what_one_document_did_not_time(tmp_path, capsys):
    first = bench_file(tmp_path / "a.json", [result("native", 1e-3),
                                             result("eager", 2e-3, 0.5, (0.4, 0.6))])
    second = bench_file(tmp_path / "b.json", [result("native", 1e-3),
                                              result("eager", None, status="failed")])
    assert goals_table.main([f"a={first}", f"b={second}"]) == 0
    assert table_rows(capsys.readouterr().out, "w, forward")[1] == [
        "eager", "2 ms", "0.50x (0.40-0.60)", "failed", "-"]


@pytest.mark.parametrize("argument, said", [
    ("no-label.json", "expected LABEL=FILE"),
    (f"x={ROOT / 'README.md'}", "not valid JSON"),
    (f"x={FIXTURES / 'cpu-box-new' / 'conformance-eager.json'}", "is not one of")])
def test_the_goals_table_refuses_a_file_that_is_no_bench_document(argument, said, capsys):
    assert goals_table.main([argument]) == 2
    err = capsys.readouterr().err
    assert said in err and len(err.strip().splitlines()) == 1


# --- scripts/cudnn_kernels.py -------------------------------------------------------------------

def test_the_kernel_list_names_the_operators_of_every_workload_and_metric(tmp_path, capsys):
    workloads = tmp_path / "w.json"
    workloads.write_text(json.dumps({"defaults": {"metrics": ["forward", "forward_backward"]},
                                     "workloads": [{"name": "tiny", "batch": 2, "steps": 3,
                                                    "config": {"kind": "rnn", "input_size": 4,
                                                               "hidden_size": 4}}]}))
    assert cudnn_kernels.main(["--workload", str(workloads), "--device", "cpu", "--top", "50"]) == 0
    lines = capsys.readouterr().out.splitlines()
    forward = lines.index("tiny: forward on cpu")
    backward = lines.index("tiny: forward_backward on cpu")
    for listed in (lines[forward + 1:backward], lines[backward + 1:]):
        assert 0 < len(listed) <= 50
        assert all(re.fullmatch(r" +\d+x \S.* +\d+ us", line) for line in listed)
    assert any("aten::rnn_tanh" in line for line in lines[forward + 1:backward])  # torch.nn's
    assert max(map(len, lines)) <= 100


def test_the_kernel_list_without_cuda_says_so(capsys, monkeypatch):
    import torch
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(SystemExit) as exit_:
        cudnn_kernels.main(["--preset", "goals"])
    assert exit_.value.code == 2 and "no CUDA device" in capsys.readouterr().err


# --- scripts/triton_plans.py --------------------------------------------------------------------

def test_the_plans_table_times_each_batch_at_each_rows_per_program():
    # The kernels run on the CPU only under the interpreter, which triton reads at import.
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "triton_plans.py"),
                           "--device", "cpu", "--steps", "2", "--hidden", "16",
                           "--batches", "4,16", "--rows", "16,2", "--repeats", "1"],
                          cwd=ROOT, env={**os.environ, "TRITON_INTERPRET": "1"},
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    header, *rows = done.stdout.splitlines()
    assert header.startswith("forward, T=2, H=16, float32, TF32 off")
    timed = {}
    for line in rows:
        batch = int(re.match(r"B=(\d+) ", line).group(1))
        assert re.search(r"torch\.nn +\d+ µs", line)
        timed[batch] = [tuple(map(int, found)) for found in
                        re.findall(r"(\d+) rows x +(\d+) programs +\d+ µs", line)]
    # the default plan's rows first (up to MAX_BLOCK_B, 8), then the others, each once
    assert timed == {4: [(4, 1), (16, 1), (2, 2)], 16: [(8, 2), (16, 1), (2, 8)]}
