"""Every verdict the conformance suite gives the zoo, as one JSON file, and the difference of two.

    .venv/bin/python scripts/verdict_snapshot.py --out before.json         # this checkout's verdicts
    .venv/bin/python scripts/verdict_snapshot.py --compare before.json after.json

The targets are the zoo's catalogues (tests/zoo/catalogue.py: the correct implementations, the
planted bugs, the blind spots; tests/zoo/seed_catalogue.py: the seed-style classes), each run
through the quick case list in this process, as tests/test_zoo.py runs them. A row records the
outcome, check by check, and the diagnosis of each failed check; `--compare` lists the rows whose
verdict, diagnoses or failed checks differ, and the checks only one side has.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ZOO = ROOT / "tests" / "zoo"


def _catalogue(name: str):
    spec = importlib.util.spec_from_file_location(f"zoo_{name}", ZOO / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def targets() -> list[tuple[str, str | None]]:
    """(target, kind) of every catalogue row; kind None for a correct Implementation."""
    zoo, seeds = _catalogue("catalogue"), _catalogue("seed_catalogue")
    rows = [(row.target, None) for row in zoo.CORRECT]
    rows += [(row.target, row.kind) for row in (*zoo.PLANTED, *zoo.BLIND_SPOTS, *seeds.SEEDS)]
    return list(dict.fromkeys(rows))


def snapshot(target: str, kind: str | None) -> dict:
    """One row: every check's outcome and each failure's diagnosis, quick case list."""
    from rnnbench.impls import load
    from rnnbench.suites import run_checks

    results = run_checks(load(str(ROOT / target), kind), kinds=[kind] if kind else None, quick=True)
    outcomes = {f"{r.kind}/{r.check}": r.outcome for r in results}
    failing = ("failed", "error")
    return {"verdict": "does not conform" if any(o in failing for o in outcomes.values())
            else "conforms",
            "diagnoses": sorted({r.diagnosis for r in results if r.diagnosis and r.outcome in failing}),
            "outcomes": outcomes}


def compare(before: dict, after: dict) -> list[str]:
    """The differences between two snapshots, one line each."""
    lines = []
    for key in sorted(set(before) | set(after)):
        if key not in before or key not in after:
            lines.append(f"{key}: only in {'after' if key in after else 'before'}")
            continue
        old, new = before[key], after[key]
        if old["verdict"] != new["verdict"]:
            lines.append(f"{key}: verdict {old['verdict']} -> {new['verdict']}")
        if old["diagnoses"] != new["diagnoses"]:
            lines.append(f"{key}: diagnoses {old['diagnoses']} -> {new['diagnoses']}")
        common = set(old["outcomes"]) & set(new["outcomes"])
        changed = sorted(c for c in common if old["outcomes"][c] != new["outcomes"][c])
        if changed:
            lines.append(f"{key}: {len(changed)} checks changed outcome, e.g. " + ", ".join(
                f"{c} {old['outcomes'][c]} -> {new['outcomes'][c]}" for c in changed[:3]))
        for side, only in (("before", set(old["outcomes"]) - common),
                           ("after", set(new["outcomes"]) - common)):
            if only:
                outcomes = sorted({(old if side == 'before' else new)['outcomes'][c] for c in only})
                lines.append(f"{key}: {len(only)} checks only {side} ({', '.join(outcomes)}), "
                             f"e.g. {sorted(only)[0]}")
    return lines


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="write this checkout's snapshot here")
    parser.add_argument("--compare", nargs=2, type=Path, metavar=("BEFORE", "AFTER"))
    args = parser.parse_args(argv)
    if args.compare:
        before, after = (json.loads(path.read_text()) for path in args.compare)
        lines = compare(before, after)
        print("\n".join(lines) or "no differences")
        return 1 if lines else 0
    if not args.out:
        parser.error("give --out or --compare")
    rows = {}
    for target, kind in targets():
        rows[f"{target} {kind or '*'}"] = snapshot(target, kind)
        print(f"{target} {kind or '*'}: {rows[f'{target} {kind or chr(42)}']['verdict']}",
              file=sys.stderr)
    args.out.write_text(json.dumps(rows, indent=1, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
