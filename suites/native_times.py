"""What each check takes on native (torch.nn), the yardstick of every check's time limit.

    python -m rnnbench.suites.native_times            # print the table
    python -m rnnbench.suites.native_times --write    # and store it in native_seconds.json

Runs native's full plan in this process and keeps, per check name, the longest time over kinds
and cases. `rnnbench.suites.isolation` allows a check CHECK_SLOWDOWN times that (never less than
the per-check timeout), so a limit follows the work a check does rather than one constant.

The table also keeps `calibrate()`'s CPU time on the machine it was measured on, the fastest
of several (CPU time, so that a machine shared with other work measures it nearly as well as a
quiet one). Every conformance child calibrates
again where it runs, by the wall clock, and its ratio to the table's (the slowdown) scales the
limits: a machine twice as slow, or as busy, gets limits twice as long.
"""
from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from collections.abc import Callable

import torch

from rnnbench.impls import load
from rnnbench.suites.isolation import NATIVE_SECONDS
from rnnbench.suites.runner import plan, run_checks, run_item

# The work calibrated: native's forward check on a small Elman RNN, a typical check's mix of
# torch calls, the float64 NumPy reference and Python in between (a few milliseconds a run).
CALIBRATION_KIND, CALIBRATION_CHECK = "rnn", "forward/h0-omitted"
CALIBRATION_ROUNDS, CALIBRATION_RUNS = 3, 10
CALIBRATIONS = 7    # the table keeps the fastest of this many


def measure() -> dict[str, float]:
    """Check name -> the longest time native took on one of its cases, in seconds."""
    seconds: dict[str, float] = {}
    for result in run_checks(load("native")):
        name = result.check.split("/", 1)[0]
        seconds[name] = max(seconds.get(name, 0.0), result.duration_s)
    return {name: round(value, 4) for name, value in sorted(seconds.items())}


def calibrate(clock: Callable[[], float] = time.perf_counter) -> float:
    """Seconds per run of native's forward check on one small RNN case, on one thread, by
    `clock`: the median over CALIBRATION_ROUNDS rounds of CALIBRATION_RUNS runs each (a round
    is long enough, tens of milliseconds, to feel other processes' share of the CPU), after one
    run that pays the first call's costs. By the wall clock (the default) it is what the time
    limits face here and now; by this thread's CPU time (`time.thread_time`), what this
    machine's processor does when it is not shared, which the table keeps."""
    impl = load("native")
    [item] = plan(impl, [CALIBRATION_KIND], checks=CALIBRATION_CHECK)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        run_item(impl, item)
        rounds = []
        for _ in range(CALIBRATION_ROUNDS):
            start = clock()
            for _ in range(CALIBRATION_RUNS):
                run_item(impl, item)
            rounds.append((clock() - start) / CALIBRATION_RUNS)
    finally:
        torch.set_num_threads(threads)
    return statistics.median(rounds)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help=f"store the table in {NATIVE_SECONDS.name}")
    args = parser.parse_args(argv)
    seconds = measure()
    # The machine at its least disturbed: the fastest of several, by CPU time.
    calibration_s = round(min(calibrate(time.thread_time) for _ in range(CALIBRATIONS)), 5)
    for name, value in seconds.items():
        print(f"{name:28s} {value:8.4f} s")
    print(f"{'(calibration)':28s} {calibration_s:8.5f} s")
    if args.write:
        NATIVE_SECONDS.write_text(json.dumps({"machine": platform.processor() or platform.machine(),
                                              "calibration_s": calibration_s,
                                              "seconds": seconds}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
