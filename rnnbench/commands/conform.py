"""`rnnbench conform TARGET [--kind K ...] [--device cpu|cuda] [--json PATH] [--quick] [--seed N]
[--check PATTERN] [--param-map KEY=NAME,...] [--verbose]`: the conformance checks of one
implementation, run in a child process.

Progress goes to stderr; the tables, failures and verdict to stdout, printed before the JSON is
written, so that a write that fails (a full disk) loses nothing that was shown. Exit 0 when every
applicable check passed, 1 when any failed or errored (or, the verdict INCOMPLETE, could not be
judged in time), 2 for a usage or load error or a --json that could not be written.
"""
from __future__ import annotations

import sys

from rnnbench.errors import UsageError
from rnnbench.progress import KindTally

EXAMPLES = """\
examples:
  rnnbench conform eager --quick                     a registered implementation, quick cases
  rnnbench conform my_rnn.py:MyRNN --kind rnn        a bare class: say which kind it implements
  rnnbench conform my_rnn.py:MyRNN --kind rnn --check forward/single-layer --verbose
                                                     one check, with its inputs and numbers
  rnnbench conform mypkg.rnns:IMPLEMENTATION --json out/conformance.json

exit codes: 0 the level --require names conforms (default drop-in), 1 it does not, 2 a usage or
load error (one line), 3 incomplete (nothing failed, but checks timed out or were cut), 130
interrupted
"""

def add_arguments(parser) -> None:
    parser.epilog = EXAMPLES
    parser.add_argument("target", help="a registered implementation (see `rnnbench list`), "
                                       "package.module:attr, or path/to/file.py:attr")
    parser.add_argument("--kind", action="extend", nargs="+", metavar="K",
                        help="check only these kinds (a bare class: the kind it implements)")
    parser.add_argument("--device", default="cpu", help="cpu (default) or cuda")
    parser.add_argument("--json", metavar="PATH", help="write the rnnbench.conformance/1 document here")
    parser.add_argument("--quick", action="store_true", help="the quick case list")
    parser.add_argument("--seed", type=int, default=0, help="seed of parameters and inputs (default 0)")
    parser.add_argument("--check", metavar="PATTERN",
                        help="only the checks whose id matches, e.g. forward/single-layer, "
                             "'error-*' or 'gru/gradients*' (comma-separated patterns)")
    parser.add_argument("--param-map", metavar="KEY=NAME,...",
                        help="your state_dict keys -> torch.nn's names where they differ, e.g. "
                             "W_ih=weight_ih_l0,W_hh=weight_hh_l0 (NAME.T: stored transposed; "
                             "NAME:zr: a key holding those gates' rows, in that order; "
                             "weight_ih+weight_hh: a matrix over [x, h], its columns in the "
                             "order named, weight_hh+weight_ih over [h, x])")
    parser.add_argument("--fuzz", type=int, metavar="N",
                        help="instead of the case tables, search N drawn configurations and sizes "
                             "per kind (Hypothesis, seeded by --seed); a failure is shrunk to a "
                             "minimal case, printed as a command that reruns it")
    parser.add_argument("--case", metavar="JSON",
                        help="run one given case through every check, e.g. "
                             "'{\"config\":{\"kind\":\"rnn\",\"input_size\":2,\"hidden_size\":3},"
                             "\"batch\":1,\"steps\":2,\"h0\":true}' (what --fuzz prints)")
    parser.add_argument("--known-failures", metavar="FILE",
                        help="checks expected to fail, one pattern per line with a reason after #, "
                             "e.g. 'gru/forward/* # fixed in 2.1': they report xfail (or xpass)")
    parser.add_argument("--unsupported", metavar="F,...",
                        help="features your implementation does not support, e.g. "
                             "unbatched,packed: their checks are not supported and not held "
                             "against the drop-in verdict (see `rnnbench list` for the names)")
    parser.add_argument("--require", choices=("drop-in", "numerics"), default="drop-in",
                        help="the verdict that sets the exit code: drop-in (default: also names, "
                             "argument validation, every feature present or declared) or "
                             "numerics (the outputs, gradients, state, init and dropout alone)")
    parser.add_argument("--timeout", type=float, default=None, metavar="S",
                        help="time limit per check in seconds (default 60; more for checks "
                             "that are slow on torch.nn too, and at least 180 for a child "
                             "process's first check)")
    parser.add_argument("--budget", type=float, default=None, metavar="S",
                        help="time limit of the whole run in seconds, after which the remaining "
                             "checks are errors (default 270, none for the built-ins; 0: none)")
    add_memory_limit(parser)
    parser.add_argument("-v", "--verbose", action="store_true",
                        help="one table row per check and case, and every failure in full "
                             "(its configuration, inputs, expected and actual values)")


def add_memory_limit(parser) -> None:
    """The --memory-limit option (conform's and bench's), in GiB."""
    from rnnbench.child_process import MEMORY_FRACTION, default_memory_limit, memory_limit_text

    limit = default_memory_limit()
    default = f"{memory_limit_text(limit)}, " if limit else ""
    parser.add_argument("--memory-limit", type=float, metavar="GIB",
                        help="memory each child process may allocate, in GiB, e.g. "
                             "--memory-limit 4; an allocation past it fails and is reported "
                             f"(default {default}{MEMORY_FRACTION:.0%}% of this machine's; "
                             "0: none)")


def memory_limit(args) -> int | None:
    """The --memory-limit in bytes (None: no limit); UsageError for a negative one."""
    from rnnbench.child_process import GIB, default_memory_limit

    if args.memory_limit is None:
        return default_memory_limit()
    if not 0 <= args.memory_limit * GIB < 2 ** 63:  # what a process limit can hold
        raise UsageError(f"--memory-limit must be 0 (none) or a positive number of GiB, "
                         f"got {args.memory_limit:g}")
    return int(args.memory_limit * GIB) or None


def run(args) -> int:
    from rnnbench.documents import require_writable, write_json
    from rnnbench.impls.base import FEATURES
    from rnnbench.suites import text
    from rnnbench.suites.isolation import DEFAULT_TIMEOUT_S, conform
    from rnnbench.suites.fuzz import case_from_json
    from rnnbench.suites.known import read_file as read_known
    from rnnbench.suites.parammap import parse_user_map

    if args.json is not None:
        require_writable(args.json, "--json")
    if args.timeout is not None and not 0 < args.timeout < float("inf"):
        raise UsageError(f"--timeout must be a positive number of seconds, got {args.timeout:g}")
    if args.budget is not None and not 0 <= args.budget < float("inf"):
        raise UsageError(f"--budget must be 0 (none) or a positive number of seconds, got {args.budget:g}")
    if args.seed < 0:
        raise UsageError(f"--seed must be a non-negative integer, got {args.seed}")
    try:
        param_map = parse_user_map(args.param_map or "")
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if args.fuzz is not None and args.fuzz < 1:
        raise UsageError(f"--fuzz must be a positive number of cases, got {args.fuzz}")
    if args.fuzz is not None and args.case is not None:
        raise UsageError("--case runs one given case, --fuzz draws cases: give one of them")
    kinds = args.kind
    if args.case is not None:
        try:
            kinds = [case_from_json(args.case).kind]
        except ValueError as exc:
            raise UsageError(str(exc)) from None
        if args.kind and args.kind != kinds:
            raise UsageError(f"--case is a {kinds[0]} case; --kind says {', '.join(args.kind)}")
    known_failures = read_known(args.known_failures) if args.known_failures else None
    unsupported = [f.strip() for f in (args.unsupported or "").split(",") if f.strip()]
    unknown = [f for f in unsupported if f not in FEATURES]
    if unknown:
        raise UsageError(f"--unsupported {','.join(unknown)}: not a feature (known: "
                         f"{', '.join(FEATURES)})")
    budget = default_budget(args.target) if args.budget is None else (args.budget or None)
    limit = memory_limit(args)
    progress = KindTally(sys.stderr)
    doc = conform(args.target, kinds=kinds, device=args.device, quick=args.quick,
                  seed=args.seed, timeout_s=args.timeout or DEFAULT_TIMEOUT_S, progress=progress,
                  checks=args.check, param_map=param_map, budget_s=budget, fuzz=args.fuzz,
                  case=args.case, known_failures=known_failures, unsupported=unsupported,
                  require=args.require, memory_limit=limit)
    progress.close()
    doc.options.update(known_failures_file=args.known_failures, timeout=args.timeout)
    # Printed before the file is written: a write that fails loses nothing shown.
    print(text.report(doc, verbose=args.verbose), flush=True)
    if args.json:
        write_json(args.json, doc.to_json())
    if doc.interrupted:
        raise KeyboardInterrupt
    return doc.exit_code


def default_budget(target: str) -> float | None:
    """The run budget when --budget is not given: none for the built-ins (they are ours, and
    compile's first run builds a graph per configuration and dtype for minutes), DEFAULT_BUDGET_S
    for anything else."""
    from rnnbench.impls import BUILTINS
    from rnnbench.suites.isolation import DEFAULT_BUDGET_S

    return None if target in BUILTINS else DEFAULT_BUDGET_S
