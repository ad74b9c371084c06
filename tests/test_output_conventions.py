"""What every command prints follows the same conventions: no line wider than 100 columns, a
count's noun in the singular only for one, text shortened at a word boundary, and `--json` where
scripts read the output."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from rnnbench.cli import main
from rnnbench.errors import UsageError
from rnnbench.wording import counted, shorten

WIDTH = 100
FIXTURES = Path(__file__).parent / "report_fixtures"
ZOO = Path(__file__).parent / "zoo"
# A workload the built-ins time and one they cannot (the implicit kind), both tiny.
WORKLOADS = {"description": "two tiny workloads", "workloads": [
    {"name": "rnn-tiny", "config": {"kind": "rnn", "input_size": 4, "hidden_size": 4},
     "batch": 2, "steps": 3, "metrics": ["forward"], "budget_s": 0.02, "min_repeats": 3},
    {"name": "implicit-tiny", "config": {"kind": "implicit", "input_size": 2, "hidden_size": 3,
                                         "implicit_size": 3, "output_size": 1},
     "batch": 2, "steps": 3, "metrics": ["forward"], "budget_s": 0.02, "min_repeats": 3}]}


def output_of(capsys, *argv) -> tuple[int, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def widest(text: str) -> tuple[int, str]:
    return max((len(line), line) for line in text.splitlines())


# --- wording -------------------------------------------------------------------------------------

def test_a_count_is_singular_only_for_one():
    assert [counted(n, "check") for n in (0, 1, 2)] == ["0 checks", "1 check", "2 checks"]
    assert counted(3, "process", "processes") == "3 processes"


def test_text_is_shortened_at_a_word_boundary():
    text = "raises on the valid input too, so its rejections of wrong ones prove nothing"
    short = shorten(text, 60)
    assert short == "raises on the valid input too, so its rejections of wrong..."
    assert len(short) == 60
    assert shorten(text, len(text)) == text
    assert shorten("a_single_word_longer_than_the_width", 10) == "a_singl..."


# --- the widest line of each command ------------------------------------------------------------

@pytest.fixture
def long_named_target(tmp_path, monkeypatch):
    """A planted-bug class in a file whose path is long, as a user's often is."""
    monkeypatch.chdir(tmp_path)
    folder = Path("my_project_folder") / "recurrent_layers"
    folder.mkdir(parents=True)
    for name in ("math_bugs.py", "_base.py"):
        shutil.copy(ZOO / name, folder / name)
    (folder / "__init__.py").write_text("")
    return f"{folder / 'math_bugs.py'}:TransposedWhh"


def test_conform_fits_100_columns_with_findings_and_a_long_target(capsys, long_named_target):
    code, out = output_of(capsys, "conform", long_named_target, "--kind", "rnn", "--quick",
                          "--check", "forward*,shapes*,error-input-size*,packed-forward/*")
    assert code == 1 and "Findings" in out
    assert widest(out)[0] <= WIDTH, widest(out)


def test_conform_verbose_fits_100_columns_with_the_values_compared(capsys, long_named_target):
    code, out = output_of(capsys, "conform", long_named_target, "--kind", "rnn",
                          "--check", "forward/two-layer-bidirectional", "--verbose")
    assert code == 1 and "expected [" in out and "actual   [" in out
    assert widest(out)[0] <= WIDTH, widest(out)


def test_conform_of_one_check_says_one_check(capsys):
    code, out = output_of(capsys, "conform", "native", "--kind", "rnn",
                          "--check", "forward/single-layer")
    assert code == 0 and "(1 check:" in out and "1 checks" not in out


def test_bench_fits_100_columns_with_what_it_did_not_time(capsys, tmp_path):
    workloads = tmp_path / "tiny.json"
    workloads.write_text(json.dumps(WORKLOADS))
    code, out = output_of(capsys, "bench", "--workload", str(workloads), "--impl", "eager",
                          "--threads", "1", "--json", str(tmp_path / "bench.json"))
    assert code == 0 and "not timed:" in out and "provides no 'implicit'" in out
    assert widest(out)[0] <= WIDTH, widest(out)


def quiet_head(tmp_path) -> str:
    """The cpu-box-new bench fixture as if its machine had been quiet: a busy run's timings are
    not judged, and these tests want the judged comparison's lines."""
    doc = json.loads((FIXTURES / "cpu-box-new" / "bench-cpu.json").read_text())
    doc["machine_check"] = {**doc["machine_check"], "busy": False, "reasons": []}
    path = tmp_path / "bench-cpu.json"
    path.write_text(json.dumps(doc))
    return str(path)


def test_compare_fits_100_columns(capsys, tmp_path):
    code, out = output_of(capsys, "compare", str(FIXTURES / "cpu-box-old" / "bench-cpu.json"),
                          quiet_head(tmp_path))
    assert code == 1 and "judged by the rank test" in out
    assert widest(out)[0] <= WIDTH, widest(out)


def test_report_fits_100_columns(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, out = output_of(capsys, "report", str(FIXTURES), "--out", "site")
    assert code == 0 and "site/index.html" in out
    assert widest(out)[0] <= WIDTH, widest(out)


def test_coldstart_fits_100_columns(capsys, tmp_path):
    workloads = tmp_path / "tiny.json"
    workloads.write_text(json.dumps(WORKLOADS))
    code, out = output_of(capsys, "coldstart", "--impl", "eager", "--workload", str(workloads),
                          "--steps", "2,3", "--threads", "1")
    assert code == 0 and "first call" in out
    assert widest(out)[0] <= WIDTH, widest(out)


@pytest.fixture
def troubled_stages(monkeypatch):
    """run's stages stubbed: one implementation cannot be checked, with a long reason; the
    benchmarks ran on a busy machine, and one failed with a long reason."""
    import rnnbench.benchmarks.harness
    import rnnbench.suites
    from rnnbench.suites.results import ConformanceRun
    from tests.test_reports import bench_result, check_result, conformance_doc, environment

    reason = ("the kernel could not be built here because the compiler it needs was not found "
              "on the PATH of this machine, nor in the places it usually is")

    def conform(target, quick=False, progress=None, **_):
        if target == "eager":
            raise UsageError(f"cannot load {target}: {reason}")
        return ConformanceRun.from_json(conformance_doc(
            target, [check_result("forward/one-layer", "rnn", "passed")], environment("box")))

    def run_benchmarks(impls, workloads, progress=None, checkpoint=None, wait=None, **_):
        wait()
        doc = {"schema": "rnnbench.bench/2", "environment": environment("box"),
               "peak_gflops": 100.0, "results": [],
               "machine_check": {"busy": True, "reasons": [
                   "other processes used 97% of 2 cores", "load average 3.5 above 2 cores",
                   "the GEMM peak varied by 35% over 7 runs (IQR over median)"]}}
        for workload in workloads[:2]:
            doc["results"] += [bench_result(impl.name, workload.name, 1e-3) for impl in impls]
        doc["results"].append(bench_result("fused", workloads[0].name, None, status="failed",
                                           reason=reason))
        checkpoint(doc)
        return doc

    monkeypatch.setattr(rnnbench.suites, "conform", conform, raising=False)
    monkeypatch.setattr(rnnbench.benchmarks.harness, "run_benchmarks", run_benchmarks)


def test_run_fits_100_columns_with_long_reasons(capsys, tmp_path, troubled_stages):
    code, out = output_of(capsys, "run", "--out", str(tmp_path / "out"))
    assert code == 1 and "could not run: cannot load eager" in out and "BUSY" in out
    assert "benchmark failed: fused" in out
    assert widest(out)[0] <= WIDTH, widest(out)


# --- --json ----------------------------------------------------------------------------------

def test_compare_json_says_what_the_tables_say(capsys, tmp_path):
    base, head = str(FIXTURES / "cpu-box-old" / "bench-cpu.json"), quiet_head(tmp_path)
    code, text = output_of(capsys, "compare", base, head)
    json_code, printed = output_of(capsys, "compare", base, head, "--json")
    data = json.loads(printed)
    assert json_code == code == 1 and data["schema"] == "rnnbench.compare/1"
    assert data["passed"] is False and data["gate"]["threshold"] == 0.05
    regressions = [c for c in data["changes"] if c["verdict"] == "regression"]
    assert regressions and all(c["head_median_s"] > c["base_median_s"] for c in regressions)
    verdicts, workload = {}, None
    for line in text.splitlines():
        if " (" in line and not line.startswith(" "):
            workload = line.split()[0]          # a table's heading: its workload
        elif workload and len(line.split()) > 2:
            verdicts[(workload, *line.split()[:2])] = line
    for change in data["changes"]:
        row = verdicts[(change["workload"], change["impl"], change["metric"])]
        assert row.endswith(change["verdict"])


def test_the_report_counts_in_the_right_number(tmp_path, capsys):
    from tests.test_reports import (bench_doc, bench_result, check_result, conformance_doc,
                                    environment, write)

    env = environment("box")
    paths = [write(tmp_path / "c.json", conformance_doc(
                 "native", [check_result("forward/one-layer", "rnn", "passed")], env)),
             write(tmp_path / "b.json", bench_doc([bench_result("native", "w", 1e-3)], env))]
    code, out = output_of(capsys, "report", *map(str, paths), "--out", str(tmp_path / "out"))
    page = (tmp_path / "out" / "report.md").read_text()
    assert code == 0 and "from 1 check, 1 timing" in out
    assert "conforms (1 check)" in page and "1 timing, bench" in page
    assert "1 checks" not in page and "1 timings" not in page and "(s)" not in page
