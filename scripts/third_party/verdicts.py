"""Today's `rnnbench conform` verdict on each third-party adapter, as one table.

    .venv/bin/python scripts/third_party/verdicts.py                 # every adapter below
    .venv/bin/python scripts/third_party/verdicts.py --only keras    # targets containing "keras"
    .venv/bin/python scripts/third_party/verdicts.py tests/zoo/seed_style.py:RNNCell=rnn_cell

Each target runs exactly as a newcomer runs it (`rnnbench conform TARGET --kind K`, no other
option unless given here), in its own process; its rnnbench.conformance/1 document goes to
--out. A row: exit code, counts per outcome, and the named diagnoses with how many checks each
explains. A target whose library is not installed is listed as "not installed", not run.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import NamedTuple

from tabulate import tabulate

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]


class Target(NamedTuple):
    """One `rnnbench conform` run: TARGET, the kind, and the module its library is imported as."""

    target: str
    kind: str
    library: str | None = None


def _adapter(file: str, attr: str, kind: str, library: str) -> Target:
    return Target(f"scripts/third_party/{file}:{attr}", kind, library)


TARGETS = [
    *(_adapter("onnx_reference.py", "IMPLEMENTATION", kind, "onnx") for kind in ("rnn", "lstm", "gru")),
    *(_adapter("onnxruntime_ops.py", "IMPLEMENTATION", kind, "onnxruntime")
      for kind in ("rnn", "lstm", "gru")),
    *(_adapter("keras_torch.py", "IMPLEMENTATION", kind, "keras") for kind in ("rnn", "lstm", "gru")),
    *(_adapter("haste_layers.py", "IMPLEMENTATION", kind, "haste_pytorch") for kind in ("lstm", "gru")),
    *(_adapter("flashrnn_cpu.py", "VANILLA", kind, "flashrnn") for kind in ("lstm", "gru")),
    _adapter("flashrnn_cpu.py", "VANILLA_FWBW", "lstm", "flashrnn"),
    _adapter("torchidl_model.py", "IMPLEMENTATION", "implicit", "torchidl"),
    *(_adapter("numpy_ml_cells.py", "IMPLEMENTATION", kind, "numpy_ml") for kind in ("rnn", "lstm")),
    *(_adapter("jax_cells.py", "IMPLEMENTATION", kind, "equinox")
      for kind in ("lstm", "gru", "lstm_cell", "gru_cell")),
    *(_adapter("jax_cells.py", "FLAX", kind, "flax")
      for kind in ("rnn", "lstm", "gru", "rnn_cell", "lstm_cell", "gru_cell")),
    *(_adapter("paddle_layers.py", "IMPLEMENTATION", kind, "paddle")
      for kind in ("rnn", "lstm", "gru", "rnn_cell", "lstm_cell", "gru_cell")),
    *(_adapter("brevitas_quant.py", "IMPLEMENTATION", kind, "brevitas") for kind in ("rnn", "lstm")),
    *(_adapter("jittor_layers.py", "IMPLEMENTATION", kind, "jittor")
      for kind in ("rnn", "lstm", "gru", "rnn_cell", "lstm_cell", "gru_cell")),
    *(_adapter("mindspore_layers.py", "IMPLEMENTATION", kind, "mindspore")
      for kind in ("rnn", "lstm", "gru", "rnn_cell", "lstm_cell", "gru_cell")),
    *(_adapter("mlx_layers.py", "IMPLEMENTATION", kind, "mlx") for kind in ("rnn", "lstm", "gru")),
    *(_adapter("mxnet_gluon.py", "IMPLEMENTATION", kind, "mxnet")
      for kind in ("rnn", "lstm", "gru", "rnn_cell", "lstm_cell", "gru_cell")),
    *(_adapter("chainer_layers.py", "IMPLEMENTATION", kind, "chainer")
      for kind in ("rnn", "lstm", "gru", "rnn_cell", "lstm_cell", "gru_cell")),
    # chainer.links.StatelessGRU as it is: Chainer's own GRU cell, another GRU than torch.nn's.
    _adapter("chainer_layers.py", "STATELESS_GRU", "gru_cell", "chainer"),
    *(_adapter("openvino_runtime.py", "IMPLEMENTATION", kind, "openvino")
      for kind in ("rnn", "lstm", "gru", "rnn_cell", "lstm_cell", "gru_cell")),
    *(_adapter("haiku_cells.py", "IMPLEMENTATION", kind, "haiku")
      for kind in ("rnn", "lstm", "gru", "rnn_cell", "lstm_cell", "gru_cell")),
    *(_adapter("tf_keras_layers.py", "IMPLEMENTATION", kind, "tensorflow")
      for kind in ("rnn", "lstm", "gru", "rnn_cell", "lstm_cell", "gru_cell")),
    # tf.keras's GRU with reset_after=False: the Cho et al. GRU, another GRU than torch.nn's.
    *(_adapter("tf_keras_layers.py", "RESET_BEFORE", kind, "tensorflow") for kind in ("gru", "gru_cell")),
    *(_adapter("sonnet_cores.py", "IMPLEMENTATION", kind, "sonnet")
      for kind in ("rnn", "lstm", "gru", "rnn_cell", "lstm_cell", "gru_cell")),
    # tinygrad.nn has one recurrent module, LSTMCell.
    _adapter("tinygrad_cells.py", "IMPLEMENTATION", "lstm_cell", "tinygrad"),
    # torchrl's own modules take torch.nn's arguments: judged as they are, with no adapter.
    *(Target(f"torchrl.modules:{name}", kind, "torchrl") for name, kind in (
        ("LSTM", "lstm"), ("GRU", "gru"), ("LSTMCell", "lstm_cell"), ("GRUCell", "gru_cell"))),
]


def parse_extra(text: str) -> Target:
    """"TARGET=KIND" from the command line; a file path in TARGET is taken from the current
    folder (conform runs in the repository's)."""
    target, sep, kind = text.rpartition("=")
    if not sep or not target:
        raise SystemExit(f"expected TARGET=KIND, got {text!r}")
    file, colon, attr = target.rpartition(":")
    if colon and Path(file).exists():
        target = f"{Path(file).resolve()}:{attr}"
    return Target(target, kind)


def run(target: Target, out: Path, extra: list[str]) -> dict:
    """Run conform on one target; the row's fields."""
    file, _, attr = target.target.rpartition(":")
    row = {"target": f"{Path(file).stem}:{attr}", "kind": target.kind}
    if target.library and importlib.util.find_spec(target.library) is None:
        return {**row, "exit": "-", "counts": "not installed", "diagnoses": "", "level": ""}
    name = f"{Path(file).stem}-{attr}-{target.kind}"
    json_path = out / f"{name}.json"
    command = [str(Path(sys.executable).parent / "rnnbench"), "conform", target.target,
               "--kind", target.kind, "--json", str(json_path), *extra]
    start = time.perf_counter()
    finished = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    (out / f"{name}.txt").write_text(finished.stdout + finished.stderr)
    row["exit"], row["seconds"] = finished.returncode, round(time.perf_counter() - start)
    if not json_path.exists():
        last = (finished.stdout + finished.stderr).strip().splitlines()[-1:] or [""]
        return {**row, "counts": "no results", "diagnoses": last[0][:60], "level": ""}
    doc = json.loads(json_path.read_text())
    c = doc["summary"]
    row["counts"] = f"{c['passed']}/{c['failed']}/{c['not_supported']}/{c['error']}"
    found = Counter(r["diagnosis"] for r in doc["results"] if r.get("diagnosis"))
    row["diagnoses"] = ", ".join(f"{d} {n}" for d, n in found.most_common()) or "-"
    row["level"] = _level(doc.get("verdict") or {})
    return row


def _level(verdict: dict) -> str:
    """The highest level a run's verdict reaches: drop-in, numerics, none (or incomplete)."""
    states = {level: entry.get("state") for level, entry in verdict.items()}
    for level in ("drop-in", "numerics"):
        if states.get(level) == "conforms":
            return level
    return "incomplete" if "incomplete" in states.values() else "none" if states else "-"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("extra_targets", nargs="*", metavar="TARGET=KIND",
                        help="run these instead of the adapters")
    parser.add_argument("--only", help="only targets whose file:attr contains this")
    parser.add_argument("--out", type=Path, help="folder for the JSON documents and outputs "
                                                 "(default: a new temporary folder)")
    parser.add_argument("--conform-args", default="",
                        help="extra arguments for every conform run, e.g. '--timeout 5'")
    args = parser.parse_args(argv)
    targets = [parse_extra(t) for t in args.extra_targets] or TARGETS
    targets = [t for t in targets if not args.only or args.only in Path(t.target).name]
    out = (args.out or Path(tempfile.mkdtemp(prefix="rnnbench-verdicts-"))).resolve()
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for target in targets:
        rows.append(run(target, out, args.conform_args.split()))
        print(f"{rows[-1]['target']} ({target.kind}): exit {rows[-1]['exit']}", file=sys.stderr)
    print(tabulate([[r["target"], r["kind"], r["exit"], r["level"], r["counts"], r["diagnoses"]]
                    for r in rows],
                   headers=["target", "kind", "exit", "level", "pass/fail/n.s./err", "diagnoses"],
                   maxcolwidths=[28, 9, 4, 10, 12, 30]))
    print(f"\nconformance documents and outputs: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
