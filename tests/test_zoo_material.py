"""The seed-style and blind-spot material in tests/zoo is well formed: every target loads as the
kind its row names, every diagnosis a row expects is a known id, and each pitfall of the exercise
differs from the correct class in exactly one method. What rnnbench says about the rows is
tests/test_zoo.py's."""
from __future__ import annotations

import inspect

import pytest

from rnnbench.findings import DIAGNOSES
from rnnbench.impls import load

from test_zoo import ROOT, ZOO, _import, catalogue

seeds = _import(ZOO / "seed_catalogue.py")
exercise = _import(ZOO / "seed_exercise.py")

ROWS = [(row.target, row.kind) for row in [*seeds.SEEDS, *catalogue.BLIND_SPOTS]]


@pytest.mark.parametrize("target, kind", ROWS, ids=[t.rpartition(":")[2] for t, _ in ROWS])
def test_row_loads_as_its_kind(target, kind):
    impl = load(str(ROOT / target), kind)
    assert kind in impl.kinds


def test_expected_diagnoses_are_known():
    expected = {d for row in seeds.SEEDS for d in row.findings}
    expected |= {row.diagnosis for row in catalogue.BLIND_SPOTS} - {None}
    assert expected <= set(DIAGNOSES)


PITFALLS = [cls for _, cls in inspect.getmembers(exercise, inspect.isclass)
            if issubclass(cls, exercise.ExerciseRNN) and cls is not exercise.ExerciseRNN]


@pytest.mark.parametrize("pitfall", PITFALLS, ids=lambda cls: cls.__name__)
def test_each_pitfall_changes_one_step_of_the_exercise(pitfall):
    changed = [name for name in vars(pitfall) if not name.startswith("__")]
    assert len(changed) == 1 and changed[0] in vars(exercise.ExerciseRNN)


def test_every_pitfall_of_the_exercise_has_a_row():
    targets = {row.target.rpartition(":")[2] for row in seeds.SEEDS}
    assert {cls.__name__ for cls in PITFALLS} | {"ExerciseRNN"} <= targets
    assert len(PITFALLS) == 6
