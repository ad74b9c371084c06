"""`rnnbench run`: stages that share the machine, the CUDA rows where torch sees a device, and a
summary that says how sure its speed-ups are. The conformance and benchmark stages are stubbed
(their own tests are elsewhere), and so is CUDA's availability: the plan is tested here without
a GPU."""
import dataclasses
import json
import threading
import time
from collections import Counter

import numpy as np
import pytest

from rnnbench.cli import main
from rnnbench.impls import load
from rnnbench.commands.run import (SPLIT, WORKERS, conformance_workers, kind_groups,
                                   speedup_table)
from rnnbench.reference.kinds import KINDS
from rnnbench.suites.results import ConformanceRun


def samples(median, spread=0.01, n=9, seed=0):
    return list(median * (1 + spread * np.random.default_rng(seed).uniform(-1, 1, n)))


def timed(impl, workload, taken, conforms=True, device="cpu"):
    return {"impl": impl, "kind": "rnn", "workload": workload, "device": device, "dtype": "float32",
            "metric": "forward", "status": "ok", "reason": None, "median_s": float(np.median(taken)),
            "iqr_s": float(np.subtract(*np.percentile(taken, [75, 25]))), "samples_s": taken,
            "noisy": False, "repeats": len(taken), "conforms": conforms,
            "conformance_note": None if conforms else "output differs from the reference"}


def bench_results(device="cpu"):
    results = []
    for i, workload in enumerate(("w1", "w2")):
        results += [timed("native", workload, samples(1e-3, seed=i), device=device),
                    timed("eager", workload, samples(1e-3, spread=0.3, seed=10 + i), device=device),
                    timed("fused", workload, samples(0.5e-3, seed=20 + i), device=device),
                    timed("wrong", workload, samples(0.1e-3, seed=30 + i), conforms=False,
                          device=device)]
    return results


ENVIRONMENT = {"rnnbench": "0.1.0", "python": "3.11", "torch": "2.13.0", "cuda": None, "cudnn": None,
               "gpu": None, "cpu": "Test CPU", "cores": 2, "threads": 2, "platform": "Linux",
               "hostname": "box"}


@pytest.fixture
def stages(monkeypatch):
    """On a machine without CUDA (whatever this one has): conform() sleeps a little and passes
    everything, except the (target, device) pairs in seen["failing"]; run_benchmarks() waits as
    told and returns fixed results on a busy machine. Both record what they saw."""
    import torch

    import rnnbench.benchmarks.harness
    import rnnbench.suites

    seen = {"quick": [], "running": 0, "most_at_once": 0, "finished": 0,
            "finished_when_waited": [], "conformed": [], "benched": [], "failing": set()}
    lock = threading.Lock()

    def conform(target, quick=False, progress=None, kinds=None, device="cpu", threads=None, **_):
        with lock:
            seen["quick"].append(quick)
            seen.setdefault("threads", []).append(threads)
            seen["conformed"].append((target, device))
            seen.setdefault("kinds", {}).setdefault(target, []).append(kinds)
            seen["running"] += 1
            seen["most_at_once"] = max(seen["most_at_once"], seen["running"])
        time.sleep(0.3)
        with lock:
            seen["running"] -= 1
            seen["finished"] += 1
        outcome = "failed" if (target, device) in seen["failing"] else "passed"
        return ConformanceRun.from_json(
            {"target": target, "device": device, "quick": quick, "environment": ENVIRONMENT,
             "results": [{"check": "forward/one", "category": "forward", "kind": "rnn",
                          "case": "one", "outcome": outcome, "duration_s": 0.01}]})

    def run_benchmarks(impls, workloads, device="cpu", progress=None, checkpoint=None, wait=None,
                       **_):
        wait()
        seen["finished_when_waited"].append(seen["finished"])
        seen["benched"].append((device, [impl.name for impl in impls]))
        doc = {"schema": "rnnbench.bench/2", "environment": ENVIRONMENT, "device": device,
               "peak_gflops": 100.0,
               "machine_check": {"busy": True, "reasons": ["other processes used 90% of 2 cores"]},
               "results": bench_results(device)}
        checkpoint(doc)
        return doc

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(rnnbench.suites, "conform", conform, raising=False)
    monkeypatch.setattr(rnnbench.benchmarks.harness, "run_benchmarks", run_benchmarks)
    return seen


@pytest.fixture
def cuda_machine(stages, monkeypatch):
    """The stubbed stages on a machine where torch sees one CUDA device."""
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "Fake GPU 80GB")
    return stages


def available_builtins():
    from rnnbench.impls import BUILTINS, registered
    return {n: registered()[n] for n in BUILTINS if registered()[n].unavailable_reason() is None}


def test_conformance_runs_a_child_per_four_cores_from_two_to_four_at_a_time():
    assert [conformance_workers(cores) for cores in (1, 2, 8, 12, 16, 64)] == [2, 2, 2, 3, 4, 4]


def test_conformance_runs_workers_at_a_time_and_is_done_before_anything_is_timed(tmp_path, stages):
    assert main(["run", "--out", str(tmp_path)]) == 0
    assert stages["most_at_once"] == WORKERS
    children = sum(len(kind_groups(impl.kinds, name in SPLIT))
                   for name, impl in available_builtins().items())
    assert stages["finished_when_waited"] == [children]


def test_compile_starts_first_and_fused_last_once_its_build_is_done(tmp_path, stages):
    main(["run", "--out", str(tmp_path)])
    started = [target for target, _ in stages["conformed"]]
    compile_children = len(kind_groups(available_builtins()["compile"].kinds))
    assert started[:compile_children] == ["compile"] * compile_children == ["compile"] * 2
    if "fused" in available_builtins():     # among the last children at work
        assert "fused" in started[-WORKERS:]


def test_each_conformance_child_runs_torch_on_its_share_of_the_threads(tmp_path, stages):
    import torch

    main(["run", "--out", str(tmp_path)])
    assert set(stages["threads"]) == {max(1, torch.get_num_threads() // WORKERS)}


def test_compile_is_checked_in_two_halves_by_kind_and_the_rest_in_one_child(tmp_path, stages):
    main(["run", "--out", str(tmp_path)])
    assert sorted(stages["kinds"]["compile"]) == [["rnn", "lstm"],
                                                  ["rnn_cell", "lstm_cell", "gru_cell", "gru"]]
    assert stages["kinds"]["native"] == [list(load("native").kinds)]
    assert stages["kinds"]["implicit"] == [["implicit"]]


def result_of(kind, outcome):
    return {"check": "c/x", "category": "forward", "kind": kind, "case": "x", "outcome": outcome}


def test_the_halves_merge_into_one_document_in_the_specs_order_of_kinds():
    halves = [ConformanceRun.from_json(
                  {"target": "t", "kinds": ["rnn", "lstm"], "interrupted": False,
                   "duration_s": 3.0, "results": [result_of("rnn", "passed"),
                                                  result_of("lstm", "passed")]}),
              ConformanceRun.from_json(
                  {"target": "t", "kinds": ["gru_cell", "gru"], "interrupted": True,
                   "duration_s": 5.0, "results": [result_of("gru_cell", "failed"),
                                                  result_of("gru", "passed")]})]
    doc = ConformanceRun.merged(halves, list(KINDS))
    assert [r.kind for r in doc.results] == ["gru_cell", "rnn", "lstm", "gru"]
    assert doc.summary == {"passed": 3, "failed": 1, "not_supported": 0, "error": 0,
                           "xfail": 0, "xpass": 0}
    assert doc.interrupted is True and doc.duration_s == 5.0
    assert doc.kinds == ["rnn", "lstm", "gru_cell", "gru"]
    failed = dataclasses.replace(halves[1], error="cannot load t")
    assert ConformanceRun.merged([halves[0], failed], list(KINDS)).error == "cannot load t"


def test_run_checks_the_quick_case_list_unless_full(tmp_path, stages):
    main(["run", "--out", str(tmp_path / "quick")])
    assert set(stages["quick"]) == {True}
    stages["quick"].clear()
    main(["run", "--out", str(tmp_path / "full"), "--full"])
    assert set(stages["quick"]) == {False}


def test_the_summary_opens_with_a_busy_machine_and_judges_no_speed_up(tmp_path, stages, capsys):
    main(["run", "--out", str(tmp_path)])
    out = capsys.readouterr().out
    summary = out[out.index("\nBUSY MACHINE"):].splitlines()
    assert summary[1] == "BUSY MACHINE, speed-ups not judged: other processes used 90% of 2 cores"
    assert "--threads 1" in summary[2]
    assert [line for line in summary if line.startswith("rnnbench run: done in")]
    rows = {line.split()[0]: line for line in summary if line.startswith(("eager", "fused", "wrong"))}
    # fused is twice as fast in the samples, eager within noise: on a busy machine, neither is said
    assert all("not judged: busy machine" in rows[name] for name in ("eager", "fused"))
    assert not any(word in out for word in ("faster", "slower", "2.00x", "within noise"))
    assert rows["wrong"].split()[2:] == ["-", "0", "2"]    # nothing counted, 2 non-conforming


def test_the_speed_up_table_counts_only_what_conforms_and_says_within_noise():
    rows = {line.split()[0]: line for line in speedup_table(bench_results()).splitlines()
            if line.startswith(("eager", "fused", "wrong"))}
    assert "≈ native (within noise)" in rows["eager"]
    assert float(rows["fused"].split()[2].rstrip("x")) == pytest.approx(2.0, abs=0.02)
    assert rows["wrong"].split()[2:] == ["-", "0", "2"]


def test_the_speed_up_table_takes_the_geometric_mean_over_workloads():
    results = [timed("native", "w1", samples(1e-3, 0.05)), timed("native", "w2", samples(1e-3, 0.05, seed=1)),
               timed("fast", "w1", samples(0.25e-3, 0.05, seed=2)),
               timed("fast", "w2", samples(1e-3, 0.05, seed=3))]
    [row] = [line for line in speedup_table(results).splitlines() if line.startswith("fast")]
    low, high = (float(x) for x in row.split()[3].strip("()").split("-"))
    assert float(row.split()[2].rstrip("x")) == pytest.approx(2.0, abs=0.1)
    assert low < 2.0 < high < 2.5 and row.split()[4] == "2"


def test_the_speed_up_table_reads_documents_without_samples():
    results = [{**timed("native", "w", samples(1e-3)), "samples_s": None},
               {**timed("other", "w", samples(2e-3)), "samples_s": None}]
    [row] = [line for line in speedup_table(results).splitlines() if line.startswith("other")]
    assert row.split()[2:6] == ["0.50x", "(no", "interval)", "1"]


def test_every_stage_line_is_printed_once(tmp_path, stages, capsys):
    main(["run", "--out", str(tmp_path)])
    lines = Counter(capsys.readouterr().out.splitlines())
    for name in available_builtins():
        assert lines[f"conformance {name} ..."] == 1
        assert sum(n for line, n in lines.items() if line.startswith(f"conformance {name}: ")) == 1


def test_the_speed_up_table_names_what_it_could_not_compare():
    results = [timed("native", "w", samples(1e-3)), timed("implicit", "only-implicit", samples(1e-3)),
               {**timed("triton", "w", samples(1e-3)), "status": "unavailable", "median_s": None}]
    assert speedup_table(results).splitlines()[-1] == (
        "no speed-up for: implicit (timed, no native result to compare with), triton (not timed)")


def test_the_summary_fits_in_100_columns(tmp_path, stages, capsys):
    main(["run", "--out", str(tmp_path)])
    out = capsys.readouterr().out
    summary = out[out.index("rnnbench run: done"):]
    assert max(map(len, summary.splitlines())) <= 100


# --- the CUDA rows -------------------------------------------------------------------------------

def gpu_capable():
    """The built-ins that do not declare cuda unsupported: all but fused and onnxruntime, and
    triton only while its kernels are compiled for the GPU (not interpreted on the CPU)."""
    from rnnbench.impls.triton import KERNEL_DEVICE
    return {"native", "eager", "torchscript", "compile", "implicit"} | (
        {"triton"} if KERNEL_DEVICE == "cuda" else set())


def closing_screen(out):
    return out[out.index("rnnbench run: done"):].splitlines()


@pytest.mark.parametrize("cuda_build, why", [(None, "is a CPU build"),
                                             ("13.0", "(CUDA 13.0) sees none")])
def test_without_cuda_only_the_cpu_runs_and_one_line_says_why(tmp_path, stages, capsys,
                                                              monkeypatch, cuda_build, why):
    import torch
    monkeypatch.setattr(torch.version, "cuda", cuda_build)
    main(["run", "--out", str(tmp_path)])
    assert {device for _, device in stages["conformed"]} == {"cpu"}
    assert [device for device, _ in stages["benched"]] == ["cpu"]
    assert not list(tmp_path.glob("*cuda*"))
    screen = closing_screen(capsys.readouterr().out)
    said = [number for number, line in enumerate(screen) if "GPU rows" in line]
    assert [screen[n] for n in said] == [
        f"GPU rows skipped: no CUDA device (torch {torch.__version__} {why})"]
    assert not screen[said[0] + 1].startswith(" ")     # one line, not wrapped


def test_with_cuda_the_gpu_capable_builtins_are_checked_and_timed_there_too(tmp_path, cuda_machine):
    from rnnbench.impls import BUILTINS

    assert main(["run", "--out", str(tmp_path)]) == 0
    available = set(available_builtins())
    checked = {device: {t for t, d in cuda_machine["conformed"] if d == device}
               for device in ("cpu", "cuda")}
    assert checked == {"cpu": available, "cuda": available & gpu_capable()}
    assert [device for device, _ in cuda_machine["benched"]] == ["cpu", "cuda"]
    assert cuda_machine["benched"][0][1] == list(BUILTINS)
    assert set(cuda_machine["benched"][1][1]) == gpu_capable()
    assert sorted(p.name for p in tmp_path.glob("*.json")) == sorted(
        [f"conformance-{name}.json" for name in checked["cpu"]]
        + [f"conformance-{name}-cuda.json" for name in checked["cuda"]]
        + ["bench.json", "bench-cuda.json"])
    for name, device in (("conformance-native-cuda.json", "cuda"), ("bench-cuda.json", "cuda"),
                         ("conformance-native.json", "cpu"), ("bench.json", "cpu")):
        assert json.loads((tmp_path / name).read_text())["device"] == device


def test_with_cuda_nothing_is_timed_before_every_conformance_child_is_done(tmp_path, cuda_machine):
    main(["run", "--out", str(tmp_path)])
    available = available_builtins()
    children = sum(len(kind_groups(impl.kinds, name in SPLIT)) * (1 + (name in gpu_capable()))
                   for name, impl in available.items())
    assert cuda_machine["finished_when_waited"] == [children, children]


def test_with_cuda_the_summary_shows_each_device_and_names_the_gpu(tmp_path, cuda_machine, capsys):
    cuda_machine["failing"].add(("eager", "cuda"))
    assert main(["run", "--out", str(tmp_path)]) == 1
    screen = closing_screen(capsys.readouterr().out)
    table = screen[screen.index(next(line for line in screen if line.startswith("conformance"))):]
    table = table[:table.index("")]
    [on_cpu] = [line for line in table if line.startswith("eager  ")]
    [on_gpu] = [line for line in table if line.startswith("eager (cuda) ")]
    # passed, failed: one stubbed check for eager's child on each device
    assert on_cpu.split()[1:3] == ["1", "0"] and on_cpu.endswith(" conforms")
    assert on_gpu.split()[2:4] == ["0", "1"] and on_gpu.endswith(" DOES NOT CONFORM")
    text = " ".join(" ".join(screen).split())     # wrapped lines joined
    assert " on cuda (Fake GPU 80GB); fused, onnxruntime declare cuda unsupported" in text
    assert [line.split(":")[0] for line in screen if line.startswith("benchmarks (")] == [
        "benchmarks (quick)", "benchmarks (quick on cuda)"]
    assert max(map(len, screen)) <= 100


def test_with_cuda_the_report_gives_each_devices_verdict_side_by_side(tmp_path, cuda_machine):
    cuda_machine["failing"].add(("eager", "cuda"))
    main(["run", "--out", str(tmp_path)])
    summary = (tmp_path / "report.md").read_text().split("### Who conforms")[1].split("###")[0]
    [row] = [line for line in summary.splitlines() if line.startswith("| eager ")]
    assert "cpu: conforms, quick case list (1 check); cuda: DOES NOT CONFORM" in row


def test_the_summary_says_what_the_quick_case_list_leaves_out(tmp_path, stages, capsys):
    from rnnbench.suites.runner import plan

    native = load("native")
    main(["run", "--out", str(tmp_path / "quick")])
    text = " ".join(" ".join(closing_screen(capsys.readouterr().out)).split())
    quick, full = len(plan(native, None, True)), len(plan(native, None, False))
    assert f"quick case list: {quick} of {full} checks of native's kinds" in text
    assert "single-step" in text and "rnnbench run --full checks them" in text
    main(["run", "--out", str(tmp_path / "full"), "--full"])
    assert "quick case list" not in capsys.readouterr().out
