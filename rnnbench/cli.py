"""The `rnnbench` command: a thin shell over the library.

Each subcommand lives in `rnnbench.commands.<name>` with `add_arguments(parser)` and
`run(args) -> int`. Exit codes: 0 ok, 1 checks failed or a regression, 2 usage or input error,
3 a comparison that could not judge (`compare` on a run timed on a busy machine), 130
interrupted (Ctrl-C), 143 terminated (SIGTERM); the last two keep what finished.
A wrong argument, whether argparse or the command finds it, is one line on stderr and exit 2.
"""
from __future__ import annotations

import argparse
import contextlib
import importlib
import importlib.util
import os
import shutil
import signal
import sys
import textwrap
import threading

import rnnbench
from rnnbench.errors import UsageError
from rnnbench.printable import printable

# Subcommand name -> one-line help. Modules are imported lazily so `rnnbench --help` is fast.
COMMANDS = {
    "run": "the main job: conformance of every built-in, quick benchmarks, and a report",
    "spec": "print the spec of one configuration: parameters, init, shapes, FLOPs",
    "list": "list implementations, benchmark presets and workloads, conformance checks",
    "conform": "run the conformance checks on an implementation",
    "bench": "time implementations side by side on named workloads",
    "coldstart": "first-call (compile) time against sequence length, each in a fresh process",
    "report": "render results as Markdown and HTML with plots",
    "compare": "compare two benchmark runs and fail on a regression",
}
WIDTH = 100     # every line rnnbench prints fits in this many columns

DESCRIPTION = """\
rnnbench checks that a recurrent network implementation behaves like torch.nn's (against an
independent float64 reference, naming what is wrong when it does not) and times it beside
torch.nn and the other implementations.
"""
EPILOG = """\
examples:
  rnnbench run                                  conformance, benchmarks and a report of the
                                                built-in implementations, in reports/latest/
  rnnbench conform my_rnn.py:MyRNN --kind rnn   check your own class against the spec
  rnnbench bench --impl eager --preset quick    time an implementation beside torch.nn
  rnnbench report results/ --out site/          one page from results of any machines
  rnnbench spec lstm --input-size 8 --hidden-size 16
                                                the spec of one configuration
  rnnbench list checks                          what the conformance suite checks, per kind

exit codes: 0 ok, 1 a check failed or a regression, 2 a usage or input error (one line),
3 compare could not judge (a run timed on a busy machine).
`rnnbench COMMAND --help` explains a command's options, each with an example.
"""


class Parser(argparse.ArgumentParser):
    """argparse with rnnbench's error policy: a wrong argument is one line and exit code 2."""

    def error(self, message: str):
        line = f"{self.prog}: error: {message}"
        hint = f" (see `{self.prog} --help`)"
        self.exit(2, line + (hint if len(line + hint) <= WIDTH else "") + "\n")


class Formatter(argparse.RawDescriptionHelpFormatter):
    """Help text at most WIDTH columns wide; descriptions and examples keep their lines."""

    def __init__(self, prog: str) -> None:
        columns = min(shutil.get_terminal_size((WIDTH, 24)).columns, WIDTH)
        super().__init__(prog, width=columns - 2, max_help_position=32)

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        # Keep the lines of descriptions and examples; wrap only the lines that are too long.
        return "\n".join(textwrap.fill(line, width, initial_indent=indent, subsequent_indent=indent,
                                       break_on_hyphens=False)
                         if len(indent + line) > width else indent + line
                         for line in text.splitlines())

    def _split_lines(self, text: str, width: int) -> list[str]:
        # Option names in examples (--proj-size) must not be broken at their hyphens.
        return textwrap.wrap(" ".join(text.split()), width, break_on_hyphens=False)


def _available_commands() -> dict[str, str]:
    return {name: text for name, text in COMMANDS.items()
            if importlib.util.find_spec(f"rnnbench.commands.{name}") is not None}


def build_parser() -> argparse.ArgumentParser:
    # prog is fixed: `python -m rnnbench` would otherwise call itself "__main__.py"
    parser = Parser(prog="rnnbench", description=DESCRIPTION, epilog=EPILOG,
                    formatter_class=Formatter)
    parser.add_argument("--version", action="version", version=f"rnnbench {rnnbench.__version__}",
                        help="print rnnbench's version and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, text in _available_commands().items():
        module = importlib.import_module(f"rnnbench.commands.{name}")
        command = sub.add_parser(name, help=text, description=text, formatter_class=Formatter)
        module.add_arguments(command)
    return parser


def _parse(parser: argparse.ArgumentParser, argv: list[str] | None) -> argparse.Namespace:
    """Parse, blaming an unknown argument on the command it was given to."""
    args, extras = parser.parse_known_args(argv)
    if extras:
        command = next(a for a in parser._actions if a.dest == "command").choices[args.command]
        command.error(f"unrecognized arguments: {' '.join(extras)}")
    return args


@contextlib.contextmanager
def _terminate_as_interrupt(terminated: threading.Event):
    """SIGTERM raises KeyboardInterrupt in the main thread while the block runs, so that a
    terminated command ends its children and writes what finished, as an interrupted one does;
    `terminated` is set, so that it exits 143, not 130."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def terminate(signum, frame):
        terminated.set()
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, terminate)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def main(argv: list[str] | None = None) -> int:
    try:
        parser = build_parser()
        args = _parse(parser, argv)
    except SystemExit as exc:           # --help, --version, or a one-line argument error
        return exc.code if isinstance(exc.code, int) else 2
    except KeyboardInterrupt:           # while the commands' modules load
        print("rnnbench: interrupted", file=sys.stderr)
        return 130
    terminated = threading.Event()
    try:
        with _terminate_as_interrupt(terminated):
            module = importlib.import_module(f"rnnbench.commands.{args.command}")
            return module.run(args)
    except UsageError as exc:
        print(f"rnnbench {args.command}: error: {printable(str(exc))}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        if terminated.is_set():
            print(f"rnnbench {args.command}: terminated", file=sys.stderr)
            return 143
        print(f"rnnbench {args.command}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader went away (`rnnbench list | head`): stop quietly, as Unix tools do.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141


if __name__ == "__main__":
    sys.exit(main())
