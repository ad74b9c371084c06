"""Golden vectors: small deterministic cases with the reference's outputs and gradients on disk.

Each case in CASES is stored as `golden/<name>.npz` holding its inputs — every parameter
("param/<name>"), "input", the initial state if the case gives one ("hx/h0", "hx/c0") and the
output gradient ("grad_out/<output name>") — and the reference's results: the forward outputs
("forward/<output name>") and every gradient `backward` returns ("grad/<key>").
`golden/manifest.json` lists the cases, their configurations and every array's shape, so the
vectors can be read without this package.

Inputs come from NumPy's PCG64 generator seeded by the case name's CRC-32: parameters from the
init distribution, everything else from U(-1, 1).

    python -m rnnbench.reference.golden --write    # regenerate the files
    python -m rnnbench.reference.golden --check    # exit 1 if regenerating would change them

The check demands identical inputs and manifest, and results within the float64 tolerance
policy (another machine's BLAS may round differently; the spec has not changed unless a result
moves past that).
"""
from __future__ import annotations

import argparse
import json
import re
import sys
import zlib
from dataclasses import dataclass, fields
from pathlib import Path

import numpy as np

from rnnbench.reference.config import Config
from rnnbench.reference.numerics import (
    backward, flatten_outputs, forward, nest_outputs, nest_state, output_names, state_names,
)
from rnnbench.reference.params import init_spec, param_shapes
from rnnbench.reference.shapes import io_shapes
from rnnbench.reference.tolerance import tolerance

GOLDEN_DIR = Path(__file__).parent / "golden"
MANIFEST = "manifest.json"
SCHEMA = "rnnbench.golden/1"
INPUT_PREFIXES = ("param/", "input", "hx/", "grad_out/")


@dataclass(frozen=True)
class GoldenCase:
    """One stored case: a configuration and a call (batch None = unbatched)."""

    name: str
    config: Config
    batch: int | None
    steps: int
    hx_given: bool


def _case(name, kind, batch=2, steps=4, hx_given=True, **options) -> GoldenCase:
    return GoldenCase(name, Config(kind, 3, 4, **options), batch, steps, hx_given)


CASES = (
    _case("rnn_cell", "rnn_cell", steps=1),
    _case("rnn_cell-relu-no-bias-unbatched", "rnn_cell", None, 1, False, nonlinearity="relu",
          bias=False),
    _case("lstm_cell", "lstm_cell", steps=1),
    _case("lstm_cell-unbatched-no-hx", "lstm_cell", None, 1, False),
    _case("gru_cell", "gru_cell", steps=1),
    _case("gru_cell-no-bias-unbatched", "gru_cell", None, 1, True, bias=False),
    _case("rnn", "rnn"),
    _case("rnn-relu-two-layer-bidirectional", "rnn", nonlinearity="relu", num_layers=2,
          bidirectional=True),
    _case("rnn-batch-first-no-bias-no-hx", "rnn", 3, 5, False, batch_first=True, bias=False),
    _case("rnn-unbatched", "rnn", None, 5),
    _case("lstm", "lstm"),
    _case("lstm-two-layer-bidirectional-batch-first", "lstm", num_layers=2, bidirectional=True,
          batch_first=True),
    _case("lstm-proj", "lstm", proj_size=2),
    _case("lstm-proj-bidirectional-unbatched-no-hx", "lstm", None, 3, False, proj_size=3,
          bidirectional=True),
    _case("lstm-no-bias-three-layer", "lstm", 1, 3, num_layers=3, bias=False),
    _case("gru", "gru"),
    _case("gru-two-layer-bidirectional", "gru", num_layers=2, bidirectional=True),
    _case("gru-batch-first-no-bias-no-hx", "gru", 3, 5, False, batch_first=True, bias=False),
    _case("gru-unbatched", "gru", None, 6),
)


def case_inputs(case: GoldenCase) -> dict[str, np.ndarray]:
    """The case's inputs, drawn deterministically from its name."""
    rng = np.random.default_rng(zlib.crc32(case.name.encode()))
    cfg = case.config
    shapes = io_shapes(cfg, case.batch, case.steps)
    arrays = {f"param/{name}": rng.uniform(dist.low, dist.high, param_shapes(cfg)[name])
              for name, dist in init_spec(cfg).items()}
    arrays["input"] = rng.uniform(-1.0, 1.0, shapes["input"])
    if case.hx_given:
        arrays.update({f"hx/{name}": rng.uniform(-1.0, 1.0, shapes[name])
                       for name in state_names(cfg)})
    arrays.update({f"grad_out/{name}": rng.uniform(-1.0, 1.0, shapes[name])
                   for name in output_names(cfg)})
    return arrays


def call_arguments(case: GoldenCase, arrays: dict[str, np.ndarray]):
    """(params, x, hx, grad_out) for `forward`/`backward` from a case's stored arrays."""
    cfg = case.config
    params = {key.removeprefix("param/"): a for key, a in arrays.items()
              if key.startswith("param/")}
    hx = nest_state(cfg, {name: arrays[f"hx/{name}"] for name in state_names(cfg)}) \
        if case.hx_given else None
    grad_out = nest_outputs(cfg, {name: arrays[f"grad_out/{name}"] for name in output_names(cfg)})
    return params, arrays["input"], hx, grad_out


def build(case: GoldenCase) -> dict[str, np.ndarray]:
    """Every array of the case: its inputs and the reference's results on them."""
    arrays = case_inputs(case)
    params, x, hx, grad_out = call_arguments(case, arrays)
    outputs = flatten_outputs(case.config, forward(case.config, params, x, hx))
    arrays.update({f"forward/{name}": value for name, value in outputs.items()})
    grads = backward(case.config, params, x, hx, grad_out)
    arrays.update({f"grad/{key}": value for key, value in grads.items()})
    return arrays


def manifest(built: dict[str, dict[str, np.ndarray]]) -> dict:
    """The manifest for the cases' arrays (`built`: case name -> arrays)."""
    return {
        "schema": SCHEMA,
        "regenerate": "python -m rnnbench.reference.golden --write",
        "cases": [{
            "name": case.name,
            "file": f"{case.name}.npz",
            "config": {f.name: getattr(case.config, f.name) for f in fields(Config)},
            "batch": case.batch,
            "steps": case.steps,
            "hx_given": case.hx_given,
            "arrays": {key: list(a.shape) for key, a in built[case.name].items()},
        } for case in CASES],
    }


def write(directory: Path = GOLDEN_DIR) -> None:
    """Regenerate every case's .npz and the manifest in `directory`."""
    directory.mkdir(parents=True, exist_ok=True)
    built = {case.name: build(case) for case in CASES}
    for name, arrays in built.items():
        np.savez(directory / f"{name}.npz", **arrays)
    text = json.dumps(manifest(built), indent=1)
    # One line per shape keeps the manifest readable.
    text = re.sub(r"\[\s+([\d,\s]*?)\s+\]", lambda m: "[" + re.sub(r"\s+", " ", m[1]) + "]", text)
    (directory / MANIFEST).write_text(text + "\n")


def load(directory: Path = GOLDEN_DIR) -> list[tuple[GoldenCase, dict[str, np.ndarray]]]:
    """The stored cases and their arrays, as the manifest lists them."""
    stored = json.loads((directory / MANIFEST).read_text())
    cases = []
    for entry in stored["cases"]:
        case = GoldenCase(entry["name"], Config(**entry["config"]), entry["batch"],
                          entry["steps"], entry["hx_given"])
        with np.load(directory / entry["file"]) as data:
            cases.append((case, {key: data[key] for key in data.files}))
    return cases


def check(directory: Path = GOLDEN_DIR) -> list[str]:
    """What regenerating would change in `directory`, one line per difference (empty: none)."""
    built = {case.name: build(case) for case in CASES}
    try:
        stored_manifest = json.loads((directory / MANIFEST).read_text())
    except (OSError, ValueError) as exc:
        return [f"{directory / MANIFEST}: unreadable ({exc})"]
    if stored_manifest != json.loads(json.dumps(manifest(built))):
        return [f"{directory / MANIFEST}: differs from the cases in CASES"]
    problems = []
    unlisted = {p.name for p in directory.glob("*.npz")} - {f"{c.name}.npz" for c in CASES}
    problems += [f"{name}: not a golden case (stale file)" for name in sorted(unlisted)]
    for case in CASES:
        try:
            with np.load(directory / f"{case.name}.npz") as data:
                stored = {key: data[key] for key in data.files}
        except (OSError, ValueError) as exc:
            problems.append(f"{case.name}: unreadable ({exc})")
            continue
        problems += _differences(case, stored, built[case.name])
    return problems


def _differences(case: GoldenCase, stored: dict, fresh: dict) -> list[str]:
    if stored.keys() != fresh.keys():
        return [f"{case.name}: arrays {sorted(stored.keys() ^ fresh.keys())} added or removed"]
    cfg = case.config
    problems = []
    for key, value in fresh.items():
        if key.startswith(INPUT_PREFIXES):
            if not np.array_equal(stored[key], value):
                problems.append(f"{case.name}: {key} changed (inputs must be identical)")
            continue
        tol = tolerance("float64", case.steps, cfg.num_layers, gradient=key.startswith("grad/"))
        excess = tol.excess(stored[key], value) if stored[key].shape == value.shape else np.inf
        if excess > 1.0:
            problems.append(f"{case.name}: {key} moved ({excess:.1f} x the float64 "
                            f"tolerance, {tol})")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rnnbench.reference.golden",
                                     description=__doc__.splitlines()[0])
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--write", action="store_true", help="regenerate the golden files")
    action.add_argument("--check", action="store_true",
                        help="exit 1 if regenerating would change them")
    parser.add_argument("--dir", type=Path, default=GOLDEN_DIR, help="the golden folder")
    args = parser.parse_args(argv)
    if args.write:
        write(args.dir)
        print(f"wrote {len(CASES)} golden cases and {MANIFEST} to {args.dir}")
        return 0
    problems = check(args.dir)
    for line in problems:
        print(line)
    print(f"{len(CASES)} golden cases: " + ("drift found" if problems else "no drift"))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
