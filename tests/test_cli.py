"""The `rnnbench` command line: --version, help that explains itself, one-line usage errors,
`rnnbench list`, and output that fits 100 columns."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

import rnnbench
from rnnbench.cli import COMMANDS, main

WIDTH = 100
# The commands whose every option's help carries an example ("e.g.").
EXPLAINED = ("list", "spec", "report")


def run_cli(capsys, *argv) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def widest(text: str) -> int:
    return max((len(line) for line in text.splitlines()), default=0)


def test_version(capsys):
    code, out, _ = run_cli(capsys, "--version")
    assert code == 0 and out == f"rnnbench {rnnbench.__version__}\n"


@pytest.mark.parametrize("module", ["rnnbench", "rnnbench.cli"])
def test_version_from_python_dash_m(module):
    done = subprocess.run([sys.executable, "-m", module, "--version"],
                          capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.strip() == f"rnnbench {rnnbench.__version__}"


def test_python_dash_m_rnnbench_is_the_command_with_its_name_and_exit_codes():
    done = subprocess.run([sys.executable, "-m", "rnnbench", "spec", "rnn", "--input-size", "0",
                           "--hidden-size", "4"], capture_output=True, text=True)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.startswith("rnnbench spec: error: argument --input-size")


def test_top_level_help_is_written_for_users(capsys):
    code, out, _ = run_cli(capsys, "--help")
    assert code == 0
    assert "thin shell" not in out and "subcommand lives in" not in out     # not the docstring
    assert "examples:" in out and "exit codes:" in out and "--version" in out
    for name in COMMANDS:
        assert f"\n    {name}" in out
    assert widest(out) <= WIDTH


@pytest.mark.parametrize("command", EXPLAINED)
def test_every_option_of_a_command_says_what_it_does_with_an_example(capsys, command):
    from rnnbench.cli import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command").choices[command]
    for action in sub._actions:
        if action.dest != "help":
            assert action.help and "e.g." in action.help, f"{command} {action.option_strings}"
    code, out, _ = run_cli(capsys, command, "--help")
    assert code == 0 and "examples:" in out and widest(out) <= WIDTH


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_help_fits_100_columns(capsys, command):
    code, out, _ = run_cli(capsys, command, "--help")
    assert code == 0 and widest(out) <= WIDTH


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_help_ends_with_examples_and_the_exit_codes(capsys, command):
    code, out, _ = run_cli(capsys, command, "--help")
    examples = out.split("\nexamples:\n", 1)[1]
    assert code == 0 and examples.lstrip().startswith(f"rnnbench {command}")
    codes = examples.split("\nexit codes: ", 1)[1]
    assert "0 " in codes and "2 " in codes


# Wrong arguments of the commands: (argv, a fragment of the one-line error).
BAD = [
    ([], "the following arguments are required: COMMAND"),
    (["nope"], "invalid choice: 'nope'"),
    (["list", "--bogus"], "rnnbench list: error: unrecognized arguments: --bogus"),
    (["spec", "rnn", "--input-size", "3", "--hidden-size", "4", "extra"],
     "rnnbench spec: error: unrecognized arguments: extra"),
    (["list", "bogus"], "argument WHAT: invalid choice: 'bogus'"),
    (["list", "workloads", "--preset", "nope"], "unknown preset 'nope'"),
    (["list", "checks", "--kind", "transformer"], "--kind 'transformer': not a kind"),
    (["list", "--preset", "quick"], "--preset applies to `list workloads`"),
    (["list", "presets", "--kind", "rnn"], "--kind applies to `list checks`"),
    (["spec"], "the following arguments are required: KIND, --input-size, --hidden-size"),
    (["spec", "rnn", "--input-size", "3", "--hidden-size", "4", "--batch", "0"],
     "argument --batch: must be a positive integer, got 0"),
    (["spec", "rnn", "--input-size", "3", "--hidden-size", "4", "--steps", "-2"],
     "argument --steps: must be a positive integer, got -2"),
    (["spec", "rnn", "--input-size", "three", "--hidden-size", "4"],
     "argument --input-size: must be an integer, got 'three'"),
    (["spec", "rnn", "--input-size", "3", "--hidden-size", "4", "--dropout", "nan"],
     "argument --dropout: must be a finite number, got nan"),
    (["spec", "rnn", "--input-size", "3", "--hidden-size", "4", "--dropout", "1.5"],
     "argument --dropout: must be a probability in [0, 1], got 1.5"),
    (["spec", "lstm", "--input-size", "3", "--hidden-size", "4", "--proj-size", "-1"],
     "argument --proj-size: must be an integer >= 0, got -1"),
    (["spec", "rnn", "--input-size", "3", "--hidden-size", "4", "--nonlinearity", "gelu"],
     "argument --nonlinearity: invalid choice: 'gelu'"),
    (["spec", "rnn", "--input-size", "3", "--hidden-size", "4", "--kappa", "0.5"],
     "--kappa applies to the implicit kind, not rnn"),
    (["spec", "implicit", "--input-size", "3", "--hidden-size", "4"],
     "the implicit kind needs --implicit-size and --output-size"),
    (["spec", "implicit", "--input-size", "3", "--hidden-size", "4", "--implicit-size", "5",
      "--output-size", "1", "--num-layers", "2"], "--num-layers is not an option of the implicit"),
    (["spec", "implicit", "--input-size", "3", "--hidden-size", "4", "--implicit-size", "5",
      "--output-size", "1", "--kappa", "1"], "argument --kappa: must be in (0, 1), got 1"),
    (["spec", "implicit", "--input-size", "3", "--hidden-size", "4", "--implicit-size", "5",
      "--output-size", "1", "--tol", "0"], "argument --tol: must be a positive number, got 0"),
    (["spec", "gru", "--input-size", "3", "--hidden-size", "4", "--proj-size", "2"],
     "proj_size is an LSTM option"),
    (["report", "--out", "out"], "the following arguments are required: INPUT"),
    (["report", "missing.json", "--out", "out"], "missing.json: no such file"),
    (["report", "missing.json", "--out", ""], "--out: the path is empty"),
    (["run", "--out", ""], "--out: the path is empty"),
    (["list", "workloads", "--preset", ""], "unknown preset ''"),
    (["conform", "eager", "--json", ""], "--json: the path is empty"),
    (["conform", "eager", "--timeout", "inf"], "--timeout must be a positive number of seconds, "
                                               "got inf"),
    (["bench", "--timeout", "inf"], "--timeout must be a positive number of seconds, got inf"),
    (["conform", "eager", "--budget", "nan"], "--budget must be 0 (none) or a positive number"),
    (["conform", "eager", "--memory-limit", "1e30"], "--memory-limit must be 0 (none) or a "
                                                     "positive number of GiB, got 1e+30"),
    (["conform", "eager", "--case", "[]"], '--case: no "config" in it'),
    (["conform", "eager", "--case", '{"config": {"kind": "rnn", "input_size": 3, '
      '"hidden_size": 5}, "dtype": "float17"}'], "--case: unknown field 'dtype'"),
    (["conform", "eager", "--fuzz", "3", "--case", '{"config": {"kind": "rnn", "input_size": 3, '
      '"hidden_size": 5}}'], "give one of them"),
    (["conform", "eager", "--param-map", "W=weight_ih,W=weight_hh"], "names 'W' twice"),
    (["coldstart", "--steps", "5,,6"], "--steps must be comma-separated whole numbers"),
    (["conform", "..:Model", "--kind", "rnn"], ".. is a folder: name a .py file in it"),
    (["conform", "../model.json:Model", "--kind", "rnn"], "../model.json: no such file"),
]


@pytest.mark.parametrize("argv,message", BAD, ids=[" ".join(b[0]) or "(none)" for b in BAD])
def test_a_wrong_argument_is_one_line_and_exit_2(capsys, tmp_path, monkeypatch, argv, message):
    monkeypatch.chdir(tmp_path)
    code, out, err = run_cli(capsys, *argv)
    assert code == 2 and out == ""
    assert len(err.splitlines()) == 1 and message in err, err
    assert "Traceback" not in err and err.startswith("rnnbench")


def test_json_is_written_through_a_symlink_and_never_over_what_is_not_a_regular_file(
        capsys, tmp_path):
    target = tmp_path / "target.json"
    target.write_text("{}")
    (tmp_path / "link.json").symlink_to(target)
    os.mkfifo(tmp_path / "fifo")
    check = ["conform", "eager", "--kind", "rnn_cell", "--check", "forward/batched", "--json"]
    code, _, err = run_cli(capsys, *check, str(tmp_path / "fifo"))
    assert code == 2 and err.endswith("fifo: not a regular file\n")
    assert run_cli(capsys, *check, str(tmp_path / "link.json"))[0] == 0
    assert (tmp_path / "link.json").is_symlink() and '"schema"' in target.read_text()


def test_an_implementation_of_no_known_kind_is_a_load_error(capsys, tmp_path):
    (tmp_path / "impl.py").write_text(
        "import torch\nfrom rnnbench.impls import Implementation\n"
        "TYPO = Implementation(name='typo', kinds={'rnnx': torch.nn.RNN})\n")
    code, _, err = run_cli(capsys, "conform", f"{tmp_path / 'impl.py'}:TYPO")
    assert code == 2 and "typo provides no kind the suites know ('rnnx'" in err


def interrupted_at_the_first_checkpoint(measure):
    """`measure` (a function taking `checkpoint=`) as Ctrl-C stops it right after the first
    results it hands out."""
    def measured(*args, checkpoint, **kwargs):
        def checkpoint_then_interrupt(so_far):
            checkpoint(so_far)
            raise KeyboardInterrupt
        return measure(*args, checkpoint=checkpoint_then_interrupt, **kwargs)
    return measured


def test_an_interrupted_bench_shows_what_it_measured(capsys, tmp_path, monkeypatch):
    import rnnbench.benchmarks.harness as harness

    monkeypatch.setattr(harness, "run_benchmarks",
                        interrupted_at_the_first_checkpoint(harness.run_benchmarks))
    code, out, err = run_cli(capsys, "bench", "--preset", "quick", "--impl", "native", "--kind",
                             "rnn_cell", "--json", str(tmp_path / "b.json"))  # one workload
    assert code == 130 and err.endswith("interrupted\n")
    assert "interrupted after 1 of 1 workload; written to" in out and "native" in out
    assert json.loads((tmp_path / "b.json").read_text())["interrupted"] is True


def test_report_out_must_be_a_folder(capsys, tmp_path):
    (tmp_path / "out").write_text("a file")
    code, out, err = run_cli(capsys, "report", "whatever.json", "--out", str(tmp_path / "out"))
    assert code == 2 and err == f"rnnbench report: error: --out {tmp_path / 'out'}: is a file, " \
                                "not a folder\n"


# --- rnnbench list ---------------------------------------------------------------------------

@pytest.mark.parametrize("subject", ["", "implementations", "presets", "workloads", "checks"])
def test_list_fits_100_columns(capsys, subject):
    code, out, _ = run_cli(capsys, "list", *([subject] if subject else []))
    assert code == 0 and out.strip() and widest(out) <= WIDTH


def test_list_names_every_implementation_and_whether_it_runs_here(capsys):
    from rnnbench.impls import registered

    _, out, _ = run_cli(capsys, "list")
    lines = out.splitlines()
    for name, impl in registered().items():
        line = next(line for line in lines if line.split()[:1] == [name])
        assert ("yes" in line.split()) == (impl.unavailable_reason() is None)


def test_list_presets_names_every_preset_with_its_workload_count(capsys):
    from rnnbench.benchmarks.workloads import load_workloads, preset_names

    _, out, _ = run_cli(capsys, "list", "presets")
    for name in preset_names():
        line = next(line for line in out.splitlines() if line.split()[:1] == [name])
        assert line.split()[1] == str(len(load_workloads(preset=name)))


def test_list_workloads_of_a_preset(capsys):
    from rnnbench.benchmarks.workloads import load_workloads

    _, out, _ = run_cli(capsys, "list", "workloads", "--preset", "quick")
    rows = [line.split() for line in out.splitlines() if line.startswith("quick ")]
    assert [r[1] for r in rows] == [w.name for w in load_workloads(preset="quick")]
    for r, w in zip(rows, load_workloads(preset="quick")):
        assert r[2] == w.kind and str(w.batch) in r and str(w.steps) in r


def test_list_checks_counts_the_cases_of_every_check_per_kind(capsys):
    from rnnbench.suites.catalogue import checks_of

    _, out, _ = run_cli(capsys, "list", "checks", "--kind", "lstm")
    header, rule, *body = out.split("\n\n")[0].splitlines()
    lstm = header.split().index("lstm")
    rows = {line.split()[0]: line for line in body}
    assert len(rows) == len(checks_of("lstm"))
    for check in checks_of("lstm"):
        full, quick = len(check.cases()), len(check.cases(quick=True))
        cells = rows[check.name].replace("error inputs", "error-inputs").split()
        assert cells[lstm] == f"{full}/{quick}", check.name
    assert "error inputs" in out and " errors " not in out


def test_list_json_is_data(capsys):
    from rnnbench.suites import all_checks

    _, out, _ = run_cli(capsys, "list", "checks", "--json")
    rows = json.loads(out)
    assert {r["check"] for r in rows} == {c.name for checks in all_checks().values() for c in checks}
    assert {kind for r in rows for kind in r["cases"]} == set(all_checks())
    errors = next(r for r in rows if r["check"] == "error-input-size")
    assert errors["category"] == "errors" and errors["category_title"] == "error inputs"
    _, out, _ = run_cli(capsys, "list", "--json")
    assert {"name", "kinds", "available"} <= set(json.loads(out)[0])


def test_list_into_a_closed_pipe_is_quiet():
    done = subprocess.run(f"{sys.executable} -m rnnbench.cli list checks | head -1",
                          shell=True, capture_output=True, text=True)
    assert done.stdout.startswith("check") and "Traceback" not in done.stderr
