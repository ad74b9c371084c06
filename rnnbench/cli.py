"""The `rnnbench` command: a thin shell over the library.

Each subcommand lives in `rnnbench.commands.<name>` with `add_arguments(parser)` and
`run(args) -> int`. Exit codes: 0 ok, 1 checks failed or a regression, 2 usage or input error.
"""
from __future__ import annotations

import argparse
import importlib
import importlib.util
import os
import sys

from rnnbench.errors import UsageError

# Subcommand name -> one-line help. Modules are imported lazily so `rnnbench --help` is fast.
COMMANDS = {
    "run": "the main job: conformance of every built-in, quick benchmarks, and a report",
    "spec": "print the spec of one configuration: parameters, init, shapes, FLOPs",
    "list": "list implementations, their kinds and availability",
    "conform": "run the conformance checks on an implementation",
    "bench": "time implementations side by side on named workloads",
    "coldstart": "first-call (compile) time against sequence length, each in a fresh process",
    "report": "render results as Markdown and HTML with plots",
    "compare": "compare two benchmark runs and fail on a regression",
}


def _available_commands() -> dict[str, str]:
    return {name: text for name, text in COMMANDS.items()
            if importlib.util.find_spec(f"rnnbench.commands.{name}") is not None}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="rnnbench", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, text in _available_commands().items():
        module = importlib.import_module(f"rnnbench.commands.{name}")
        module.add_arguments(sub.add_parser(name, help=text, description=text))
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    module = importlib.import_module(f"rnnbench.commands.{args.command}")
    try:
        return module.run(args)
    except UsageError as exc:
        print(f"rnnbench {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"rnnbench {args.command}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader went away (`rnnbench list | head`): stop quietly, as Unix tools do.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141


if __name__ == "__main__":
    sys.exit(main())
