"""The golden vectors: stored files equal their regeneration, drift is caught, torch agrees."""
from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from rnnbench.crosscheck import MAX_ABS_ERROR, torch_results
from rnnbench.reference import KINDS
from rnnbench.reference import golden


def test_regeneration_would_not_change_the_stored_files():
    assert golden.check() == []


def test_check_command_exit_codes(tmp_path):
    assert golden.main(["--check"]) == 0
    assert golden.main(["--write", "--dir", str(tmp_path)]) == 0
    (tmp_path / golden.MANIFEST).write_text("{}")
    assert golden.main(["--check", "--dir", str(tmp_path)]) == 1


@pytest.fixture
def copy(tmp_path):
    shutil.copytree(golden.GOLDEN_DIR, tmp_path, dirs_exist_ok=True)
    return tmp_path


def _rewrite(directory, case_name, change):
    path = directory / f"{case_name}.npz"
    with np.load(path) as data:
        arrays = {key: data[key] for key in data.files}
    change(arrays)
    np.savez(path, **arrays)


def _nudge(key, amount):
    def change(arrays):
        arrays[key] = arrays[key] + amount
    return change


# Drift the check must report: (description, how to spoil a copy, text the report must contain).
DRIFTS = [
    ("output moved", lambda d: _rewrite(d, "gru", _nudge("forward/h_n", 1e-6)),
     "forward/h_n moved"),
    ("gradient moved", lambda d: _rewrite(d, "lstm-proj", _nudge("grad/weight_hr_l0", 1e-6)),
     "grad/weight_hr_l0 moved"),
    ("output NaN", lambda d: _rewrite(d, "gru_cell", _nudge("forward/h", np.nan)),
     "forward/h moved"),
    ("input changed", lambda d: _rewrite(d, "rnn", _nudge("input", 1e-12)), "rnn: input changed"),
    ("array removed", lambda d: _rewrite(d, "rnn_cell", lambda a: a.pop("grad/hx")), "removed"),
    ("file missing", lambda d: (d / "gru_cell.npz").unlink(), "gru_cell: unreadable"),
    ("stale file", lambda d: shutil.copy(d / "gru.npz", d / "old.npz"), "old.npz"),
    ("manifest edited", lambda d: (d / golden.MANIFEST).write_text(
        (d / golden.MANIFEST).read_text().replace('"steps": 4', '"steps": 5', 1)), "manifest"),
]


@pytest.mark.parametrize("name,spoil,report", DRIFTS, ids=[d[0] for d in DRIFTS])
def test_check_reports_drift(copy, name, spoil, report):
    spoil(copy)
    problems = golden.check(copy)
    assert any(report in line for line in problems), problems


def test_rounding_noise_is_not_drift(copy):
    _rewrite(copy, "lstm", _nudge("forward/output", 1e-15))
    assert golden.check(copy) == []


def test_manifest_describes_every_stored_array():
    manifest = json.loads((golden.GOLDEN_DIR / golden.MANIFEST).read_text())
    for entry in manifest["cases"]:
        with np.load(golden.GOLDEN_DIR / entry["file"]) as data:
            assert {k: list(data[k].shape) for k in data.files} == entry["arrays"]


COVERAGE = {
    "unbatched": lambda c: c.batch is None,
    "hx omitted": lambda c: not c.hx_given,
    "no bias": lambda c: not c.config.bias,
    "relu": lambda c: c.config.nonlinearity == "relu",
    "multi-layer bidirectional": lambda c: c.config.num_layers > 1 and c.config.bidirectional,
    "batch_first": lambda c: c.config.batch_first,
    "proj_size": lambda c: c.config.proj_size,
}


def test_cases_cover_every_kind_and_main_flag():
    assert {case.config.kind for case in golden.CASES} == set(KINDS)
    assert [name for name, covered in COVERAGE.items() if not any(map(covered, golden.CASES))] == []


@pytest.fixture(scope="module")
def stored():
    return {case.name: (case, arrays) for case, arrays in golden.load()}


@pytest.mark.parametrize("name", [case.name for case in golden.CASES])
def test_stored_vectors_agree_with_torch(stored, name):
    case, arrays = stored[name]
    outputs, grads = torch_results(case.config, *golden.call_arguments(case, arrays))
    for key, value in outputs.items():
        assert np.max(np.abs(arrays[f"forward/{key}"] - value)) <= MAX_ABS_ERROR, key
    for key, value in grads.items():
        assert np.max(np.abs(arrays[f"grad/{key}"] - value)) <= MAX_ABS_ERROR, key
