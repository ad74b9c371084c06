"""`rnnbench spec`: the page shows what the spec says, and bad options are one-line errors."""
from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest

from rnnbench.cli import main
from rnnbench.reference import (
    Config, ImplicitConfig, forward_flops, init_spec, io_shapes, param_count, param_shapes,
    tolerance,
)

# (command-line options, the Config they mean, batch, steps)
PAGES = [
    (["lstm", "--input-size", "5", "--hidden-size", "7", "--num-layers", "2", "--bidirectional",
      "--proj-size", "3", "--batch-first", "--batch", "4", "--steps", "6"],
     Config("lstm", 5, 7, num_layers=2, bidirectional=True, proj_size=3, batch_first=True), 4, 6),
    (["rnn", "--input-size", "2", "--hidden-size", "3", "--nonlinearity", "relu", "--no-bias",
      "--num-layers", "3", "--dropout", "0.25"],
     Config("rnn", 2, 3, nonlinearity="relu", bias=False, num_layers=3, dropout=0.25), 3, 5),
    (["gru_cell", "--input-size", "6", "--hidden-size", "2", "--batch", "9"],
     Config("gru_cell", 6, 2), 9, 1),
]


@pytest.mark.parametrize("argv,cfg,batch,steps", PAGES, ids=[p[0][0] for p in PAGES])
def test_page_shows_the_spec(capsys, argv, cfg, batch, steps):
    assert main(["spec", *argv]) == 0
    page = capsys.readouterr().out
    lines = page.splitlines()
    for name, shape in param_shapes(cfg).items():
        row = next(line for line in lines if line.split()[:1] == [name])
        assert str(shape) in row and str(init_spec(cfg)[name]) in row
    assert f"total parameters: {param_count(cfg)}" in page
    for name, shape in io_shapes(cfg, batch, steps).items():
        row = next(line for line in lines if line.split()[:1] == [name])
        assert row.split(None, 1)[1].startswith(str(shape))
        assert str(io_shapes(cfg, None, steps)[name]) in row
    assert f"{forward_flops(cfg, batch, steps):,}" in page
    assert f"{forward_flops(cfg, batch, steps, input_gemm=False):,}" in page
    assert str(tolerance("float32", steps, cfg.num_layers)) in page
    assert ", ".join(cfg.gates) in page or len(cfg.gates) == 1


# Wrong inputs: each is one line on stderr and exit code 2.
BAD = [
    (["transformer", "--input-size", "3", "--hidden-size", "4"], "kind must be one of"),
    (["gru", "--input-size", "3", "--hidden-size", "4", "--proj-size", "2"], "proj_size"),
    (["lstm", "--input-size", "3", "--hidden-size", "4", "--proj-size", "4"], "proj_size"),
    (["lstm", "--input-size", "3", "--hidden-size", "4", "--nonlinearity", "relu"], "nonlinearity"),
    (["rnn", "--input-size", "0", "--hidden-size", "4"], "--input-size"),
    (["rnn", "--input-size", "3", "--hidden-size", "4", "--nonlinearity", "gelu"], "nonlinearity"),
    (["rnn", "--input-size", "3", "--hidden-size", "4", "--dropout", "2"], "dropout"),
    (["rnn_cell", "--input-size", "3", "--hidden-size", "4", "--bidirectional"], "cells take no"),
    (["rnn_cell", "--input-size", "3", "--hidden-size", "4", "--steps", "3"], "--steps"),
    (["rnn", "--input-size", "3", "--hidden-size", "4", "--steps", "0"], "--steps"),
    (["rnn", "--input-size", "3", "--hidden-size", "4", "--batch", "-1"], "--batch"),
]


@pytest.mark.parametrize("argv,message", BAD, ids=[" ".join(b[0]) for b in BAD])
def test_bad_option_is_a_one_line_error(capsys, argv, message):
    assert main(["spec", *argv]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert len(captured.err.splitlines()) == 1 and message in captured.err


def test_console_entry_point():
    result = subprocess.run([sys.executable, "-m", "rnnbench.cli", "spec", "lstm",
                             "--input-size", "3", "--hidden-size", "4", "--proj-size", "9"],
                            capture_output=True, text=True)
    assert result.returncode == 2 and result.stderr.count("\n") == 1
    assert "Traceback" not in result.stderr


def test_implicit_page_shows_the_spec(capsys):
    from rnnbench.reference import implicit_init_spec, implicit_param_shapes
    from rnnbench.reference.implicit import forward_flops as implicit_flops

    argv = ["implicit", "--input-size", "4", "--hidden-size", "32", "--implicit-size", "16",
            "--output-size", "1", "--d-variant", "library", "--batch", "2", "--steps", "7"]
    assert main(["spec", *argv]) == 0
    page = capsys.readouterr().out
    cfg = ImplicitConfig(4, 32, 16, 1, d_variant="library")
    lines = page.splitlines()
    for name, shape in implicit_param_shapes(cfg).items():
        row = next(line for line in lines if line.split()[:1] == [name])
        assert str(shape) in row and str(implicit_init_spec(cfg)[name]) in row
    assert implicit_param_shapes(cfg)["D"] == (32, 36)          # the library variant's D
    total = sum(math.prod(s) for s in implicit_param_shapes(cfg).values())
    assert f"total parameters: {total}" in page
    assert next(line for line in lines if line.startswith("input ")).split(None, 1)[1] == "(2, 7, 4)"
    assert next(line for line in lines if line.startswith("output ")).split(None, 1)[1] == "(2, 1)"
    assert f"{implicit_flops(cfg, 2, 7, 0):,} without the solver" in page
    assert f"{implicit_flops(cfg, 2, 7, 1) - implicit_flops(cfg, 2, 7, 0):,} per Picard" in page
    assert "tol = 3e-06" in page and "max_iter = 300" in page
    assert max(map(len, lines)) <= 100


def test_pages_fit_100_columns(capsys):
    for argv in PAGES:
        assert main(["spec", *argv[0]]) == 0
        assert max(map(len, capsys.readouterr().out.splitlines())) <= 100


def test_json_is_the_page_as_data(capsys):
    cfg = Config("lstm", 5, 7, num_layers=2, proj_size=3)
    assert main(["spec", "lstm", "--input-size", "5", "--hidden-size", "7", "--num-layers", "2",
                 "--proj-size", "3", "--batch", "4", "--steps", "6", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["kind"] == "lstm" and data["batch"] == 4 and data["steps"] == 6
    assert [(p["name"], tuple(p["shape"])) for p in data["parameters"]] == list(
        param_shapes(cfg).items())
    assert [p["init"] for p in data["parameters"]] == [str(i) for i in init_spec(cfg).values()]
    assert data["total_parameters"] == param_count(cfg)
    assert {n: tuple(s["batched"]) for n, s in data["shapes"].items()} == io_shapes(cfg, 4, 6)
    assert {n: tuple(s["unbatched"]) for n, s in data["shapes"].items()} == io_shapes(cfg, None, 6)
    assert data["flops"] == {"forward": forward_flops(cfg, 4, 6),
                             "without_input_projection": forward_flops(cfg, 4, 6, input_gemm=False)}
    expected = tolerance("float32", 6, 2, gradient=True)
    assert data["tolerances"]["float32"]["gradients"] == {"atol": expected.atol,
                                                          "rtol": expected.rtol}
    assert data["gates"] == ["i", "f", "g", "o"]


def test_json_of_a_kind_without_an_unbatched_form_says_so(capsys):
    from rnnbench.reference.implicit import forward_flops as implicit_flops

    assert main(["spec", "implicit", "--input-size", "4", "--hidden-size", "8", "--implicit-size",
                 "6", "--output-size", "1", "--batch", "2", "--steps", "3", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["shapes"] == {"input": {"batched": [2, 3, 4], "unbatched": None},
                              "output": {"batched": [2, 1], "unbatched": None}}
    cfg = ImplicitConfig(4, 8, 6, 1)
    assert data["flops"]["forward_without_solver"] == implicit_flops(cfg, 2, 3, 0)
    assert data["flops"]["forward"] is None
