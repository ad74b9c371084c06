"""Input that is wrong, odd or hostile gets one line and exit 2, or is shown as text, never a
traceback or a hang: result files with odd numbers, absurd nesting, FIFOs, mathtext in names;
options past what torch takes; control characters from an implementation; a target that is an
instance or takes one kind; the nightly script's names."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from rnnbench.benchmarks.result import BenchResult, InvalidResult
from rnnbench.cli import main
from rnnbench.printable import printable, printable_data
from rnnbench.reports.load import load_inputs

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = Path(__file__).parent / "report_fixtures"
HOSTILE = Path(__file__).parent / "zoo" / "hostile.py"
CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e]")


def one_line_error(capsys, argv, code=2) -> str:
    assert main(argv) == code
    out, err = capsys.readouterr()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    return err


def bench_fixture(tmp_path, edit) -> Path:
    """The cpu-box bench fixture with `edit(result)` applied to every result, as a new file."""
    doc = json.loads((FIXTURES / "cpu-box-new" / "bench-cpu.json").read_text())
    for result in doc["results"]:
        edit(result)
    path = tmp_path / "bench.json"
    path.write_text(json.dumps(doc))
    return path


# --- results files ------------------------------------------------------------------------------

def test_a_name_that_reads_as_mathtext_is_drawn_as_text(tmp_path, capsys):
    def rename(result):
        result["impl"] = result["impl"].replace("eager", "ea$g^{$er")
    path = bench_fixture(tmp_path, rename)
    assert main(["report", str(path), "--out", str(tmp_path / "site")]) == 0
    assert (tmp_path / "site" / "figures" / "speedup.png").exists()


@pytest.mark.parametrize("median,why", [
    (1e308, "'median_s' is 1e+308, not seconds from 1e-12 to 1e+06"),
    (5e-324, "'median_s' is 5e-324, not seconds from 1e-12 to 1e+06"),
    (-0.001, "'median_s' is -0.001, not seconds from 1e-12 to 1e+06"),
])
def test_a_time_out_of_range_is_an_unplaced_result_with_the_reason(tmp_path, median, why):
    def odd(result):
        if result["impl"] == "native":
            result["median_s"] = median
    results = load_inputs([bench_fixture(tmp_path, odd)])
    assert results.unplaced and all(u.reason == why for u in results.unplaced)
    assert not any(t.impl == "native" for t in results.timings)


def test_zero_samples_are_no_measurement(tmp_path, capsys):
    def zero(result):
        if result["impl"] == "native":
            result["samples_s"] = [0.0] * len(result["samples_s"])
    path = bench_fixture(tmp_path, zero)
    assert main(["report", str(path), "--out", str(tmp_path / "site")]) == 0
    with pytest.raises(InvalidResult, match="'samples_s' is 0"):
        BenchResult.from_json({"impl": "a", "workload": "w", "metric": "forward",
                               "median_s": 1e-3, "samples_s": [0.0]})


@pytest.mark.parametrize("depth", [100, 100_000])
def test_absurdly_nested_json_is_one_line(tmp_path, capsys, depth):
    path = tmp_path / "deep.json"
    path.write_text("[" * depth + "]" * depth)
    err = one_line_error(capsys, ["report", str(path), "--out", str(tmp_path / "site")])
    assert "nested deeper than 64 levels" in err


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_a_fifo_among_the_results_is_skipped_not_read(tmp_path):
    folder = tmp_path / "results"
    folder.mkdir()
    shutil.copy(FIXTURES / "cpu-box-new" / "bench-cpu.json", folder)
    os.mkfifo(folder / "blocks.json")
    done = subprocess.run([sys.executable, "-m", "rnnbench.cli", "report", str(folder), "--out",
                           str(tmp_path / "site")], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    named = subprocess.run([sys.executable, "-m", "rnnbench.cli", "report",
                            str(folder / "blocks.json"), "--out", str(tmp_path / "site")],
                           capture_output=True, text=True, timeout=300)
    assert named.returncode == 2 and "not a regular file" in named.stderr


# --- options and workload files -------------------------------------------------------------------

def test_a_thread_count_past_what_torch_takes_is_one_line(capsys):
    err = one_line_error(capsys, ["bench", "--impl", "native", "--threads",
                                  "99999999999999999999"])
    assert "--threads must be 1 to 1024, got 99999999999999999999" in err


def test_a_workload_file_with_metrics_that_are_not_a_list_is_one_line(tmp_path, capsys):
    path = tmp_path / "w.json"
    path.write_text(json.dumps({"workloads": [{"name": "w", "config": {
        "kind": "rnn", "input_size": 2, "hidden_size": 3}, "batch": 1, "metrics": 5}]}))
    err = one_line_error(capsys, ["bench", "--impl", "native", "--workload", str(path)])
    assert "workload w: metrics must be a non-empty list" in err


# --- targets -------------------------------------------------------------------------------------

@pytest.mark.parametrize("argv,said", [
    (["conform", f"{HOSTILE}:built"], "is an instance of RNN, already built; name its class"),
    (["conform", f"{HOSTILE}:answer"], "is an int, neither an Implementation nor a constructor"),
    (["conform", f"{HOSTILE}:RaisesEscapes", "--kind", "rnn", "--kind", "gru"],
     "is a bare constructor, which implements one kind: give one --kind, not 2 (rnn, gru)"),
])
def test_a_target_that_cannot_be_checked_as_given_is_one_line(capsys, argv, said):
    assert said in one_line_error(capsys, argv)


def test_coldstart_takes_a_bare_class_for_its_workloads_kind(tmp_path, capsys):
    workload = tmp_path / "w.json"
    workload.write_text(json.dumps({"workloads": [{"name": "w", "config": {
        "kind": "rnn", "input_size": 2, "hidden_size": 3}, "batch": 1, "metrics": ["forward"]}]}))
    target = tmp_path / "mine.py"
    target.write_text("import torch\nMyRNN = torch.nn.RNN\n")
    assert main(["coldstart", "--impl", f"{target}:MyRNN", "--workload", str(workload),
                 "--steps", "2"]) == 0
    out, err = capsys.readouterr()
    assert "--kind" not in out + err


# --- control characters from the implementation -------------------------------------------------

def test_printable_shows_control_characters_and_keeps_lines():
    assert printable("a\x1b[2J\rb\tc\nd\u202e") == "a\\x1b[2J\\rb\tc\nd\\u202e"
    assert printable_data({"k\x07": ["\x1b", {"deep": ("\r",)}], "n": 5}) == {
        "k\\x07": ["\\x1b", {"deep": ["\\r"]}], "n": 5}


def test_an_exception_full_of_escape_sequences_is_shown_not_obeyed(tmp_path, capsys):
    out_json = tmp_path / "c.json"
    assert main(["conform", f"{HOSTILE}:RaisesEscapes", "--kind", "rnn_cell",
                 "--check", "forward/batched", "--json", str(out_json)]) == 1
    out, err = capsys.readouterr()
    assert not CONTROL.search(out + err)
    assert "\\x1b[2J" in out
    assert main(["report", str(out_json), "--out", str(tmp_path / "site")]) == 0
    for name in ("report.md", "index.html"):
        page = (tmp_path / "site" / name).read_text()
        assert not CONTROL.search(page) and "x1b" in page    # Markdown escapes the backslash


# --- the nightly script ------------------------------------------------------------------------

def nightly(*args, env=None, path=None) -> subprocess.CompletedProcess:
    """The script with `path` (default this Python's folder) first on PATH; with a `path`, only
    the system's folders after it (no asv: the `all` step stops at its benchmarks)."""
    env = {**os.environ, **(env or {})}
    env["PATH"] = (f"{path}{os.pathsep}/usr/bin{os.pathsep}/bin" if path else
                   f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}")
    return subprocess.run(["bash", str(ROOT / "scripts" / "nightly.sh"), *args], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=120)


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
@pytest.mark.parametrize("machine", ["../../..", "a/b", ".."])
def test_the_nightly_script_refuses_a_machine_name_that_is_a_path(machine):
    done = nightly("merge", "nowhere", "nowhere", env={"RNNBENCH_MACHINE": machine})
    assert done.returncode == 2 and "RNNBENCH_MACHINE must be a name" in done.stderr


FAKE_RNNBENCH = """#!/usr/bin/env bash
# Lists implementations whose names hold a space and a glob; records every other call.
if [ "$1 $2" = "list --json" ]; then
    echo '[{"name": "two words", "available": true}, {"name": "*", "available": true}]'
    exit 0
fi
printf '%s\\n' "$@" >> "$CALLS"
printf -- '--\\n' >> "$CALLS"
exit 0
"""


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_the_nightly_script_passes_implementation_names_whole(tmp_path):
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "rnnbench").write_text(FAKE_RNNBENCH)
    (fake / "rnnbench").chmod(0o755)
    (fake / "python").symlink_to(sys.executable)
    calls = tmp_path / "calls"
    nightly("all", path=fake, env={"CALLS": str(calls), "RNNBENCH_RESULTS": str(tmp_path / "r")})
    conform_calls = [call.split("\n") for call in calls.read_text().split("--\n") if call]
    assert [call[1] for call in conform_calls if call[0] == "conform"] == ["two words", "*"]
    files = [call[call.index("--json") + 1] for call in conform_calls if call[0] == "conform"]
    assert [Path(f).name for f in files] == ["conformance-two_words-cpu.json",
                                              "conformance-_-cpu.json"]


# --- bench documents read by report and compare ---------------------------------------------------

def bench_document(tmp_path, edit, name="that.json") -> Path:
    """The cpu-box bench fixture with `edit(document)` applied, as a new file."""
    doc = json.loads((FIXTURES / "cpu-box-new" / "bench-cpu.json").read_text())
    edit(doc)
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return path


def setting(name, value):
    def edit(doc):
        doc[name] = value
    return edit


def in_result(index, name, value):
    def edit(doc):
        doc["results"][index][name] = value
    return edit


def both_commands(tmp_path, path) -> list[list[str]]:
    good = str(FIXTURES / "cpu-box-new" / "bench-cpu.json")
    return [["compare", good, str(path)], ["compare", str(path), good],
            ["report", str(path), "--out", str(tmp_path / "site")]]


@pytest.mark.parametrize("results, said", [
    (["x"], "results[0]: not an object"),
    ([{}], "results[0]: no 'impl'"),
    ([{}, 3], "results[0]: no 'impl' (and 1 more cannot be read)"),
])
def test_a_bench_document_none_of_whose_results_can_be_read_is_one_line_naming_the_first(
        tmp_path, capsys, results, said):
    path = bench_document(tmp_path, setting("results", results))
    for argv in both_commands(tmp_path, path):
        err = one_line_error(capsys, argv)
        assert f"{path}: rnnbench.bench/2 document: no result can be read: {said}" in err
    assert not (tmp_path / "site").exists()


@pytest.mark.parametrize("name, value, said", [
    ("machine_check", "x", "'machine_check' is not an object or null ('x')"),
    ("interrupted", "yes", "'interrupted' is not true or false ('yes')"),
    ("workloads", "x", "'workloads' is not a list of objects ('x')"),
    ("workloads", [1], "'workloads' is not a list of objects ([1])"),
    ("peaks", "x", "'peaks' is not a list of objects ('x')"),
    ("environment", None, "'environment' is not an object (None)"),
    ("threads", "two", "'threads' is not a whole number >= 1 ('two')"),
    ("budget_s", -1, "'budget_s' is not a positive number (-1)"),
    ("results", {}, "'results' is not a list ({})"),
])
def test_a_bench_documents_own_field_that_is_wrong_is_one_line_naming_schema_and_field(
        tmp_path, capsys, name, value, said):
    path = bench_document(tmp_path, setting(name, value))
    for argv in both_commands(tmp_path, path):
        assert f"{path}: rnnbench.bench/2 document: {said}" in one_line_error(capsys, argv)


def test_a_bench_document_with_no_results_list_is_one_line(tmp_path, capsys):
    path = bench_document(tmp_path, lambda doc: doc.pop("results"))
    err = one_line_error(capsys, ["report", str(path), "--out", str(tmp_path / "site")])
    assert f"{path}: rnnbench.bench/2 document: no 'results' list" in err


def test_what_rnnbench_writes_of_a_run_stopped_before_its_machine_check_is_still_read(tmp_path):
    path = bench_document(tmp_path, setting("machine_check", None))
    results = load_inputs([path])
    assert results.timings and not results.unplaced and not results.sources[0].busy


@pytest.mark.parametrize("name, value, why", [
    ("median_s", "fast", "'median_s' is 'fast', not a number"),
    ("median_s", None, "'median_s' is None, but status is ok"),
    ("median_s", 0, "'median_s' is 0, not seconds from 1e-12 to 1e+06"),
    ("median_s", True, "'median_s' is True, not a number"),
    ("samples_s", "abc", "'samples_s' is 'abc', not a list of numbers"),
    ("impl", 3, "'impl' is 3, not a string"),
    ("status", "weird", "unknown status 'weird' (known: ok, unavailable, not_supported, failed)"),
    ("threads", "two", "'threads' is 'two', not a whole number"),
    ("workload", ["w"], "'workload' is ['w'], not a string"),
])
def test_one_bad_result_among_good_ones_is_named_by_index_and_field_and_the_rest_compared(
        tmp_path, capsys, name, value, why):
    path = bench_document(tmp_path, in_result(2, name, value))
    good = str(FIXTURES / "cpu-box-new" / "bench-cpu.json")
    assert main(["compare", good, str(path)]) == 1       # the result is missing from HEAD
    out, err = capsys.readouterr()
    assert f"not compared: {path} results[2]: {why}" in out and "Traceback" not in err
    assert "5 not judged" in out                           # the other five were compared


def test_a_head_result_that_cannot_be_read_is_not_passed_by_allow_missing(tmp_path, capsys):
    def quiet(doc):  # nothing else makes the comparison fail or inconclusive
        doc["machine_check"] = None
        for result in doc["results"]:
            result["conforms"] = True
    def quiet_with_a_bad_result(doc):
        quiet(doc)
        in_result(2, "median_s", "fast")(doc)
    good = str(bench_document(tmp_path, quiet, "good.json"))
    bad = str(bench_document(tmp_path, quiet_with_a_bad_result, "bad.json"))
    assert main(["compare", good, good, "--allow-missing"]) == 0
    assert main(["compare", good, bad, "--allow-missing"]) == 3  # inconclusive, not passed
    assert "1 result of HEAD could not be read" in capsys.readouterr().out
    assert main(["compare", bad, good, "--allow-missing"]) == 0  # BASE's: new in HEAD


def test_compare_json_says_which_input_is_an_interrupted_run(tmp_path, capsys):
    def interrupted(doc):
        doc["interrupted"], doc["results"] = True, doc["results"][:3]
    head = bench_document(tmp_path, interrupted)
    base = str(FIXTURES / "cpu-box-new" / "bench-cpu.json")
    main(["compare", base, str(head), "--json"])
    notes = json.loads(capsys.readouterr().out)["notes"]
    assert any(f"HEAD ({head}) is an interrupted run" in note.replace("\n  ", " ")
               for note in notes)


def test_compare_says_which_input_is_an_interrupted_run(tmp_path, capsys):
    def interrupted(doc):
        doc["interrupted"], doc["results"] = True, doc["results"][:3]
    head = bench_document(tmp_path, interrupted)
    base = str(FIXTURES / "cpu-box-new" / "bench-cpu.json")
    assert main(["compare", base, str(head)]) == 1       # missing results still fail the gate
    out = " ".join(capsys.readouterr().out.split())
    assert (f"HEAD ({head}) is an interrupted run: it holds only the results it finished before "
            "it stopped, so the 3 missing may be ones it never reached") in out
    assert main(["compare", str(head), base]) == 1
    out = " ".join(capsys.readouterr().out.split())
    assert f"BASE ({head}) is an interrupted run" in out
    assert out.count("is an interrupted run") == 1         # HEAD is complete


def test_a_complete_run_is_not_called_interrupted(tmp_path, capsys):
    path = bench_document(tmp_path, setting("interrupted", False))
    main(["compare", str(FIXTURES / "cpu-box-new" / "bench-cpu.json"), str(path)])
    assert "interrupted" not in capsys.readouterr().out


@pytest.mark.parametrize("schema, said", [
    ("rnnbench.coldstart/1", "rnnbench coldstart output (rnnbench.coldstart/1), which report "
                             "and compare do not read"),
    ("rnnbench.compare/1", "rnnbench compare output (rnnbench.compare/1), which report "
                           "and compare do not read"),
    ("rnnbench.bench/9", "not a results file (expected rnnbench.conformance/1"),
])
def test_another_rnnbench_document_is_named_as_what_it_is(tmp_path, capsys, schema, said):
    path = tmp_path / "cold.json"
    path.write_text(json.dumps({"schema": schema, "workload": {"name": "w"}, "results": []}))
    for argv in (["compare", str(path), str(path)],
                 ["report", str(path), "--out", str(tmp_path / "site")]):
        assert f"{path}: {said}" in one_line_error(capsys, argv)
