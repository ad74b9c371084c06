"""The benchmark suites as a maintainer runs them. pytest-benchmark: its options under their group
in `--help`, a bare class with its kind, pinned threads, the one-line refusals. asv: what its
results say when read, its thread setting, and one way to spot a regression in its output."""
from __future__ import annotations

import json
import re
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


# --- asv ---------------------------------------------------------------------------------------

ASV_COLUMNS = ["result", "params", "version", "started_at", "duration", "stats_ci_99_a",
               "stats_ci_99_b", "stats_q_25", "stats_q_75", "stats_number", "stats_repeat",
               "samples", "profile"]


def asv_results(root: Path, impls: list[str], workload: str, values: list[float],
                version: str) -> Path:
    """An asv 0.6 results folder with one time_forward row over `impls` x `workload` x cpu."""
    params = [[repr(i) for i in impls], [repr(workload)], ["'cpu'"]]
    (root / "box").mkdir(parents=True)
    (root / "benchmarks.json").write_text(json.dumps({"asv_rnn.Forward.time_forward": {
        "name": "asv_rnn.Forward.time_forward", "type": "time",
        "param_names": ["impl", "workload", "device"]}, "version": 2}))
    row = {"result": values, "params": params, "version": version,
           "started_at": 1767229200000}            # 2026-01-01 01:00 UTC; the commit's: 00:00
    (root / "box" / "c0ffee-existing.json").write_text(json.dumps({
        "commit_hash": "c0ffee" * 6 + "c0ff", "env_name": "existing", "date": 1767225600000,
        "params": {"machine": "box"}, "python": "3.11", "requirements": {}, "env_vars": {},
        "result_columns": ASV_COLUMNS, "results": {"asv_rnn.Forward.time_forward": [
            row.get(c) for c in ASV_COLUMNS]}, "durations": {}, "version": 2}))
    return root


def test_the_asv_version_changes_with_the_suite_and_with_its_presets_workloads():
    import hashlib

    import rnnbench
    from rnnbench.benchmarks import asv_rnn
    from rnnbench.benchmarks.workloads import PRESET_DIR

    digest = hashlib.sha256(Path(asv_rnn.__file__).read_bytes()
                            + (PRESET_DIR / f"{asv_rnn.PRESET}.json").read_bytes())
    assert asv_rnn.SUITE_VERSION == f"rnnbench {rnnbench.__version__}; suite {digest.hexdigest()[:12]}"


def test_asv_results_say_not_selected_not_supported_and_the_version(tmp_path):
    from rnnbench.benchmarks.workloads import load_workloads
    from rnnbench.reports.load import load_inputs

    workload = next(w for w in load_workloads(preset="quick") if w.kind == "rnn")
    nan = float("nan")
    folder = asv_results(tmp_path / "results", ["eager", "native", "implicit"], workload.name,
                         [0.002, nan, nan], "rnnbench 0.1.0; suite 0123456789ab")
    results = load_inputs([folder])
    status = {t.impl: (t.status, t.reason) for t in results.timings}
    assert status["eager"][0] == "ok"
    assert status["native"][0] == "not_selected"              # it runs rnn: it was not selected
    assert status["implicit"] == ("not_supported", "implicit provides no 'rnn'")
    source = results.sources[0]
    assert source.commit == "c0ffee" * 6 + "c0ff" and source.version == "0.1.0"
    assert source.time.isoformat() == "2026-01-01T01:00:00+00:00"     # the run's, not the commit's
    assert source.environment["commit_date"] == "2026-01-01T00:00:00+00:00"


def test_the_asv_suite_reads_its_thread_count_from_the_environment():
    from rnnbench.benchmarks.asv_rnn import threads_setting

    assert threads_setting({}) is None and threads_setting({"RNNBENCH_THREADS": "3"}) == 3
    for wrong in ("0", "two", "-1", ""):
        with pytest.raises(ValueError, match="RNNBENCH_THREADS must be a positive integer"):
            threads_setting({"RNNBENCH_THREADS": wrong})


def test_asv_conf_points_to_a_readme_section_that_exists():
    conf = (ROOT / "asv.conf.json").read_text()
    sections = re.findall(r'README\.md \("([^"]+)"\)', conf)
    headings = re.findall(r"^#+ (.+)$", (ROOT / "README.md").read_text(), re.M)
    assert sections and all(section in headings for section in sections)


# asv 0.6's `asv compare --split` output: a slower time_ benchmark, one failing now, a higher
# GFLOP/s (which asv also marks +), and an unchanged one.
ASV_COMPARE = """
Benchmarks that have stayed the same:

| Change | Before [bf7264ce] | After [57ba9693] | Ratio | Benchmark (Parameter) |
|--------|-------------------|------------------|-------|-----------------------|
|        | 9.62±0.2ms | 9.70±0.2ms | 1.01 | asv_rnn.Forward.time_forward('native', 'gru', 'cpu') |

Benchmarks that have got worse:

| Change | Before [bf7264ce] | After [57ba9693] | Ratio | Benchmark (Parameter) |
|--------|-------------------|------------------|-------|-----------------------|
| +      | 9.62±0.2ms | 19.2±0.4ms | 2 | asv_rnn.Forward.time_forward('eager', 'rnn', 'cpu') |
| !      | 1.20±0.1s | failed | n/a | asv_rnn.Forward.track_first_call_s('compile', 'lstm', 'cpu') |
| +      | 4.5 | 9 | 2 | asv_rnn.Forward.track_gflops('fused', 'lstm', 'cpu') |
"""


def test_readme_and_the_nightly_script_spot_an_asv_regression_the_same_way():
    readme = re.search(r"^! grep -E '([^']+)' asv-compare\.txt", (ROOT / "README.md").read_text(),
                       re.M).group(1)
    script = re.search(r"grep -qE '([^']+)'", (ROOT / "scripts" / "nightly.sh").read_text())
    assert script.group(1) == readme
    flagged = [line.split("|")[-2].strip() for line in ASV_COMPARE.splitlines()
               if re.search(readme, line)]
    assert flagged == ["asv_rnn.Forward.time_forward('eager', 'rnn', 'cpu')",
                       "asv_rnn.Forward.track_first_call_s('compile', 'lstm', 'cpu')"]
