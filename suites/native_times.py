"""What each check takes on native (torch.nn), the yardstick of every check's time limit.

    python -m rnnbench.suites.native_times            # print the table
    python -m rnnbench.suites.native_times --write    # and store it in native_seconds.json

Runs native's full plan in this process and keeps, per check name, the longest time over kinds
and cases. `rnnbench.suites.isolation` allows a check CHECK_SLOWDOWN times that (never less than
the per-check timeout), so a limit follows the work a check does rather than one constant.
"""
from __future__ import annotations

import argparse
import json
import platform

from rnnbench.impls import load
from rnnbench.suites.isolation import NATIVE_SECONDS
from rnnbench.suites.runner import run_checks


def measure() -> dict[str, float]:
    """Check name -> the longest time native took on one of its cases, in seconds."""
    seconds: dict[str, float] = {}
    for result in run_checks(load("native")):
        name = result.check.split("/", 1)[0]
        seconds[name] = max(seconds.get(name, 0.0), result.duration_s)
    return {name: round(value, 4) for name, value in sorted(seconds.items())}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help=f"store the table in {NATIVE_SECONDS.name}")
    args = parser.parse_args(argv)
    seconds = measure()
    for name, value in seconds.items():
        print(f"{name:28s} {value:8.4f} s")
    if args.write:
        NATIVE_SECONDS.write_text(json.dumps({"machine": platform.processor() or platform.machine(),
                                              "seconds": seconds}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
