"""The nightly CI matrix: its shape, and its merge step on results from two simulated machines.

The machines are the hand-made fixtures in tests/report_fixtures/ (cpu-box and gpu-box at the
same commit), laid out as the workflow's report job downloads them: one folder per artifact.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from rnnbench.impls import BUILTINS

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = Path(__file__).parent / "report_fixtures"
SCRIPT = ROOT / "scripts" / "nightly.sh"
WORKFLOW = ROOT / ".github" / "workflows" / "nightly.yml"

pytestmark = pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")


def nightly(*args, cwd=ROOT) -> subprocess.CompletedProcess:
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    return subprocess.run(["bash", str(SCRIPT), *map(str, args)], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


def artifacts(root: Path) -> Path:
    """results/ as the report job downloads it: the bench job of each machine, and the
    conformance shards of the CPU machine, each artifact in its own folder."""
    results = root / "results"
    shutil.copytree(FIXTURES / "gpu-box-new", results / "results-bench-gpu")
    shutil.copy(FIXTURES / "cpu-box-new" / "bench-cpu.json",
                (results / "results-bench-cpu").mkdir(parents=True) or results / "results-bench-cpu")
    for impl in ("native", "eager", "fused"):
        shard = results / f"results-conformance-cpu-{impl}"
        shard.mkdir()
        shutil.copy(FIXTURES / "cpu-box-new" / f"conformance-{impl}.json", shard)
    return results


def test_merge_makes_one_report_from_two_machines(tmp_path):
    results = artifacts(tmp_path)
    (tmp_path / "site" / "asv" / "asv-cpu").mkdir(parents=True)
    (tmp_path / "site" / "asv" / "asv-cpu" / "index.html").write_text("<html></html>")
    done = nightly("merge", results, tmp_path / "site")
    assert done.returncode == 0, done.stderr
    page = (tmp_path / "site" / "report" / "index.html").read_text()
    for run in ("cpu-box 2026-01-02 10:30 (bench-cpu.json)",
                "gpu-box 2026-01-02 11:00 (bench-cuda.json)"):
        assert f"Who conforms, who is fastest: {run}" in page
    files = set(re.findall(r"<td>([^<]*results-[^<]*\.json)</td>", page))
    assert len(files) == 5                      # every artifact's JSON
    assert (tmp_path / "site" / "report" / "report.md").exists()
    index = (tmp_path / "site" / "index.html").read_text()
    assert 'href="report/index.html"' in index and 'href="asv/asv-cpu/index.html"' in index


def test_merge_lists_a_broken_artifact_and_still_publishes_the_rest(tmp_path):
    results = artifacts(tmp_path)
    (results / "results-bench-cpu" / "bench-cpu.json").write_text("{not json")
    done = nightly("merge", results, tmp_path / "site")
    assert done.returncode == 0, done.stderr
    page = (tmp_path / "site" / "report" / "index.html").read_text()
    assert "Who conforms, who is fastest: gpu-box 2026-01-02 11:00 (bench-cuda.json)" in page
    unplaced = page.split("<h2>Unplaced results</h2>", 1)[1]
    assert "bench-cpu.json" in unplaced and "not valid JSON" in unplaced


def test_merge_without_results_is_a_usage_error(tmp_path):
    done = nightly("merge", tmp_path / "nothing-here", tmp_path / "site")
    assert done.returncode == 2 and "no results folder" in done.stderr
    (tmp_path / "empty").mkdir()
    done = nightly("merge", tmp_path / "empty", tmp_path / "site")
    assert done.returncode == 2 and "no results files" in done.stderr
    assert not (tmp_path / "site" / "report").exists()


@pytest.mark.parametrize("args", [(), ("merge", "only-one"), ("conform",), ("dance",)])
def test_a_wrong_step_is_a_usage_error(args):
    done = nightly(*args)
    assert done.returncode == 2 and "usage: scripts/nightly.sh" in done.stderr


# --- the workflow ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def workflow():
    return yaml.safe_load(WORKFLOW.read_text())


def machines(job: dict) -> list[dict]:
    return job["strategy"]["matrix"]["machine"]


def test_one_job_per_runner_machine_with_cpu_and_gpu_labels(workflow):
    for name in ("conformance", "bench"):
        job = workflow["jobs"][name]
        assert job["runs-on"] == "${{ matrix.machine.labels }}"
        labels = {m["device"]: m["labels"] for m in machines(job)}
        assert set(labels) == {"cpu", "cuda"}
        assert "rnnbench-cpu" in labels["cpu"] and "rnnbench-gpu" in labels["cuda"]


def test_conformance_is_sharded_per_builtin_implementation(workflow):
    job = workflow["jobs"]["conformance"]
    assert job["strategy"]["matrix"]["impl"] == list(BUILTINS)
    assert job["strategy"]["fail-fast"] is False
    run = " ".join(step.get("run", "") for step in job["steps"])
    assert "scripts/nightly.sh conform ${{ matrix.impl }} ${{ matrix.machine.device }}" in run


def test_every_job_uploads_its_json_and_the_last_merges_them(workflow):
    jobs = workflow["jobs"]
    for name in ("conformance", "bench"):
        uploads = [s for s in jobs[name]["steps"] if s.get("uses", "").startswith(
            "actions/upload-artifact") and s["with"]["name"].startswith("results-")]
        assert len(uploads) == 1 and uploads[0]["if"] == "always()"
    report = jobs["report"]
    assert set(report["needs"]) == {"conformance", "bench"} and "always()" in report["if"]
    download = next(s for s in report["steps"]
                    if s.get("uses", "").startswith("actions/download-artifact"))
    assert download["with"]["pattern"] == "results-*"
    merge = next(s for s in report["steps"] if "nightly.sh merge" in s.get("run", ""))
    assert merge["run"].endswith(f"scripts/nightly.sh merge {download['with']['path'].rstrip('/')}"
                                 " site")


STUBS = {   # the tools the bench step calls, as scripts that only do what the gate needs
    "rnnbench": '#!/bin/bash\ncase $1 in\n'
                '  bench) while [ $# -gt 0 ]; do\n'
                '           [ "$1" = --json ] && echo "{}" > "$2"; shift\n'
                '         done;;\n'
                '  compare) echo "the comparison"; exit "$COMPARE_EXIT";;\nesac\n',
    "asv": '#!/bin/bash\nexit 0\n',
    "git": '#!/bin/bash\necho 0123456789abcdef\n',
}


@pytest.mark.parametrize("compare_exit, night, baseline_moves", [
    (0, 0, True), (1, 1, False), (3, 0, False)])
def test_the_bench_step_reads_the_gates_exit_code(tmp_path, compare_exit, night, baseline_moves):
    checkout, tools = tmp_path / "checkout", tmp_path / "bin"
    (checkout / "scripts").mkdir(parents=True)
    shutil.copy(SCRIPT, checkout / "scripts")
    (checkout / ".asv" / "html").mkdir(parents=True)
    state = checkout / ".asv" / "nightly"
    state.mkdir()
    (state / "baseline-bench-cpu.json").write_text("last good night")
    tools.mkdir()
    for name, text in STUBS.items():
        (tools / name).write_text(text)
        (tools / name).chmod(0o755)
    env = {**os.environ, "PATH": f"{tools}{os.pathsep}{os.environ['PATH']}",
           "COMPARE_EXIT": str(compare_exit)}
    done = subprocess.run(["bash", str(checkout / "scripts" / "nightly.sh"), "bench", "cpu"],
                          env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == night, done.stderr
    assert ("inconclusive" in done.stderr) == (compare_exit == 3)
    baseline = (state / "baseline-bench-cpu.json").read_text()
    assert (baseline != "last good night") == baseline_moves
def test_the_report_only_job_installs_the_cpu_build_of_torch(workflow):
    for flow in (workflow, yaml.safe_load(PULL_REQUEST.read_text())):
        install = next(s["run"] for s in flow["jobs"]["report"]["steps"]
                       if s.get("name", "").startswith("Install"))
        assert install == "${{ env.REPORT_INSTALL }}"
        assert "--index-url https://download.pytorch.org/whl/cpu" in flow["env"]["REPORT_INSTALL"]


def test_docs_list_every_conformance_shard_of_the_workflow(workflow):
    matrix = workflow["jobs"]["conformance"]["strategy"]["matrix"]["impl"]
    docs = (ROOT / "docs" / "nightly.md").read_text()
    for device in ("cpu", "gpu"):
        listed = re.search(rf"^   {device}: ([a-z ]+)$", docs, re.M).group(1).split()
        assert listed == matrix


# --- the pull-request workflow ----------------------------------------------------------------

PULL_REQUEST = ROOT / ".github" / "workflows" / "pull-request.yml"


@pytest.fixture(scope="module")
def pull_request():
    return yaml.safe_load(PULL_REQUEST.read_text())


def changed_impls():
    import importlib.util

    spec = importlib.util.spec_from_file_location("changed_impls", ROOT / "scripts" /
                                                  "changed_impls.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("paths, expected", [
    (["impls/fused.py", "impls/fused_kernels.cpp", "README.md"], ["fused"]),
    (["impls/compile.py", "impls/triton.py"], ["compile", "triton"]),
    (["impls/_common.py"], list(BUILTINS)),
    (["reference/numerics.py", "impls/eager.py"], list(BUILTINS)),
    (["suites/check_shapes.py"], list(BUILTINS)),
    (["docs/gpu.md", "tests/test_x.py", "reports/figures.py", "scripts/nightly.sh"], []),
], ids=["own-files", "two", "shared-impl-code", "spec", "checks", "elsewhere"])
def test_a_pull_request_checks_the_builtins_its_change_touches(paths, expected):
    script = changed_impls()
    assert script.builtins() == BUILTINS
    assert script.affected(paths, BUILTINS) == expected


def test_the_pull_request_runs_tests_the_changed_shards_and_a_compared_bench(pull_request):
    assert set(pull_request[True]) == {"pull_request"}       # yaml reads `on:` as True
    jobs = pull_request["jobs"]
    assert any(".venv/bin/python -m pytest -q" in s.get("run", "") for s in jobs["tests"]["steps"])
    pick = next(s["run"] for s in jobs["changed"]["steps"] if s.get("id") == "pick")
    assert "python3 scripts/changed_impls.py" in pick
    conformance = jobs["conformance"]
    shards = conformance["strategy"]["matrix"]["impl"]
    assert shards == "${{ fromJSON(needs.changed.outputs.impls) }}"
    run = " ".join(step.get("run", "") for step in conformance["steps"])
    assert "scripts/nightly.sh conform ${{ matrix.impl }} cpu" in run     # the nightly's shard
    bench = jobs["bench"]
    assert "rnnbench-cpu" in bench["runs-on"]
    download = next(s for s in bench["steps"]
                    if s.get("uses", "").startswith("actions/download-artifact"))
    nightly = yaml.safe_load(WORKFLOW.read_text())["jobs"]["bench"]
    uploaded = next(s["with"]["name"] for s in nightly["steps"]
                    if s.get("uses", "").startswith("actions/upload-artifact")
                    and s["with"]["name"].startswith("results-bench-"))
    cpu = next(m["name"] for m in machines(nightly) if m["device"] == "cpu")
    assert download["with"]["name"] == uploaded.replace("${{ matrix.machine.name }}", cpu)
    assert download["with"]["run-id"] == "${{ steps.nightly.outputs.run-id }}"
    compare = " ".join(s.get("run", "") for s in bench["steps"])
    assert "rnnbench compare baseline/bench-cpu.json results/bench-cpu.json" in compare
    assert "--preset quick --device cpu" in compare
