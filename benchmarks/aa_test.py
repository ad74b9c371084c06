"""The A/A test of `bench`'s verdicts: torch.nn's LSTM handed in as a user's file, against itself.

    python -m rnnbench.benchmarks.aa_test [--runs 20] [--busy] [--preset quick | --workload FILE]
        [--threads N] [--budget S] [--json PATH]

`FastLSTM` below is `nn.LSTM` and nothing else, loaded from a file as `rnnbench bench --impl
fast_lstm.py:FastLSTM --kind lstm` loads a user's class, and timed beside `native` on the
preset's lstm workloads, `--runs` times. Both are the same code, so every "faster" or "slower"
verdict is a false claim. With `--busy`, two busy loops (`while True: pass`, at normal
priority) run beside it the whole time, as other work on a shared machine would.

The target: on a busy machine no faster/slower verdict at all (the machine check or bimodal
samples make each one "not_judged"); on a quiet one at most 1 in 20 verdicts. Exit 0 when the
runs meet it, 1 when they do not, 2 for a usage error. Run it on a machine nobody else uses:
the quiet half is only as quiet as the machine.
"""
from __future__ import annotations

import dataclasses
import subprocess
import sys
import tempfile
import textwrap
from collections import Counter
from pathlib import Path

from rnnbench.benchmarks import experiments
from rnnbench.benchmarks.machine import timed_busy
from rnnbench.errors import UsageError

DEFAULT_RUNS = 20
BUSY_LOOPS = 2
# At most this share of the verdicts may claim a difference on a quiet machine (none on a busy).
QUIET_CLAIMS = 1 / 20
CLAIMS = ("faster", "slower")
NAME = "fast_lstm.py:FastLSTM"
WIDTH = 100
USER_FILE = '''"""nn.LSTM as a user's file: the A/A test's copy of the baseline."""
from torch import nn


class FastLSTM(nn.LSTM):
    pass
'''


def user_lstm(folder: Path):
    """nn.LSTM loaded from a file in `folder`, as a user's class is, named NAME."""
    from rnnbench.impls import load

    path = folder / "fast_lstm.py"
    path.write_text(USER_FILE)
    return dataclasses.replace(load(f"{path}:FastLSTM", "lstm"), name=NAME)


def busy_loops(count: int = BUSY_LOOPS) -> list[subprocess.Popen]:
    """`count` processes that spin until killed, at normal priority."""
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]


def measure_runs(workloads, runs: int, *, threads: int | None = None,
                 budget_s: float | None = None, progress=None) -> list[dict]:
    """`runs` bench documents of native and the user's copy of it on `workloads`."""
    from rnnbench.impls import load
    from rnnbench.documents import BASELINE

    with tempfile.TemporaryDirectory(prefix="rnnbench-aa-") as folder:
        impls = [load(BASELINE), user_lstm(Path(folder))]
        return experiments.repeated_runs(impls, workloads, runs, threads=threads,
                                         budget_s=budget_s, progress=progress)


def tally(docs: list[dict]) -> dict:
    """The copy's verdicts over every run: a count per verdict, and one row per run (whether
    the machine check said busy, the verdict per workload and metric)."""
    rows = []
    for doc in docs:
        verdicts = {f"{r['workload']} {r['metric']}": r.get("vs_native_verdict") or r["status"]
                    for r in doc["results"] if r["impl"] == NAME}
        rows.append({"busy": timed_busy(doc), "verdicts": verdicts})
    counts = Counter(v for row in rows for v in row["verdicts"].values())
    return {"counts": dict(counts), "runs": rows}


def met(counts: dict, busy: bool) -> bool:
    """Whether the verdicts meet the target for a busy (`busy`) or a quiet machine."""
    claims = sum(counts.get(v, 0) for v in CLAIMS)
    return claims == 0 if busy else claims <= QUIET_CLAIMS * sum(counts.values())


def render(result: dict, busy: bool) -> str:
    """A line per run, the counts, and whether the target is met."""
    lines = [textwrap.fill(f"run {i + 1}: machine check {'busy' if row['busy'] else 'quiet'}; "
                           + ", ".join(f"{what}: {verdict}"
                                       for what, verdict in row["verdicts"].items()),
                           WIDTH, subsequent_indent="  ")
             for i, row in enumerate(result["runs"])]
    counts = result["counts"]
    total, claims = sum(counts.values()), sum(counts.get(v, 0) for v in CLAIMS)
    lines.append(textwrap.fill(
        f"{NAME} (nn.LSTM) against native, {len(result['runs'])} runs"
        f"{' beside two busy loops' if busy else ''}: "
        + ", ".join(f"{n} {v}" for v, n in counts.items()) + f" of {total} verdicts",
        WIDTH, subsequent_indent="  "))
    target = "none" if busy else "at most 1 in 20"
    lines.append(f"target: {target} faster/slower; {claims} of {total}: "
                 + ("met" if met(counts, busy) else "MISSED"))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    from rnnbench.documents import write_json

    parser = experiments.parser("python -m rnnbench.benchmarks.aa_test", __doc__.splitlines()[0],
                                DEFAULT_RUNS, "write the verdicts and every run here")
    parser.add_argument("--busy", action="store_true",
                        help=f"run {BUSY_LOOPS} busy loops beside it the whole time")
    args = parser.parse_args(argv)
    try:
        workloads = [w for w in experiments.workloads(args, least_runs=1) if w.kind == "lstm"]
        if not workloads:
            raise UsageError("no lstm workload to time")
    except UsageError as exc:
        print(f"aa_test: error: {exc}", file=sys.stderr)
        return 2
    loops = busy_loops() if args.busy else []
    try:
        docs = measure_runs(workloads, args.runs, threads=args.threads, budget_s=args.budget,
                            progress=lambda text: print(text, file=sys.stderr))
    finally:
        for loop in loops:
            loop.kill()
            loop.wait()
    result = tally(docs)
    print(render(result, args.busy))
    if args.json:
        write_json(args.json, {"busy_loops": len(loops), **result, "documents": docs})
    return 0 if met(result["counts"], args.busy) else 1


if __name__ == "__main__":
    sys.exit(main())
