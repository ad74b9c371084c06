"""`rnnbench list [implementations|presets|workloads|checks]`: what rnnbench knows, as tables.

implementations: the registered implementations, their kinds, whether they run here and what
they do not support. presets: the benchmark presets. workloads: every preset's workloads (sizes,
batch, steps, metrics). checks: the conformance checks, their category and how many cases each
runs per kind, full and quick. Tables wrap to fit 100 columns; --json prints the same as data.
"""
from __future__ import annotations

import json
import textwrap

from rnnbench.errors import UsageError

SUBJECTS = ("implementations", "presets", "workloads", "checks")
WIDTH = 100
METRIC_ABBREVIATIONS = {"forward": "fwd", "forward_backward": "fwd+bwd", "train_step": "train"}
EXAMPLES = """\
examples:
  rnnbench list                           the implementations, their kinds, availability here
  rnnbench list presets                   the benchmark presets and what each is for
  rnnbench list workloads --preset quick  the workloads of one preset (all presets without it)
  rnnbench list checks --kind lstm        the conformance checks, cases per kind (full/quick)
  rnnbench list checks --json             the same as JSON, for scripts

exit codes: 0 the list was printed, 2 a usage error (one line)
"""


def add_arguments(parser) -> None:
    parser.epilog = EXAMPLES
    parser.add_argument("subject", nargs="?", default="implementations", choices=SUBJECTS,
                        metavar="WHAT", help=f"what to list: {', '.join(SUBJECTS)} "
                                             "(default implementations), e.g. `list checks`")
    parser.add_argument("--preset", metavar="P",
                        help="workloads: only this preset's, e.g. --preset deepbench")
    parser.add_argument("--kind", metavar="K",
                        help="checks: only the checks that run on this kind, e.g. --kind gru")
    parser.add_argument("--json", action="store_true",
                        help="print the list as JSON instead of a table, e.g. `list --json`")


def run(args) -> int:
    if args.preset is not None and args.subject != "workloads":
        raise UsageError(f"--preset applies to `list workloads`, not `list {args.subject}`")
    if args.kind is not None and args.subject != "checks":
        raise UsageError(f"--kind applies to `list checks`, not `list {args.subject}`")
    rows, table = {"implementations": (implementations, _implementations_table),
                   "presets": (presets, _presets_table),
                   "workloads": (workloads, _workloads_table),
                   "checks": (checks, _checks_table)}[args.subject]
    data = rows(args)
    print(json.dumps(data, indent=2) if args.json else table(data))
    return 0


# --- the lists as data -------------------------------------------------------------------------

def implementations(args=None) -> list[dict]:
    from rnnbench.impls import registered

    return [describe(impl) for impl in registered().values()]


def describe(impl) -> dict:
    """One implementation as plain data."""
    reason = impl.unavailable_reason()
    return {"name": impl.name, "kinds": list(impl.kinds), "unsupported": sorted(impl.unsupported),
            "available": reason is None, "reason": reason, "description": impl.description}


def presets(args=None) -> list[dict]:
    from rnnbench.benchmarks.workloads import load_workloads, preset_names, preset_path
    from rnnbench.documents import read_json

    found = []
    for name in preset_names():
        loaded = load_workloads(preset=name)
        found.append({"name": name, "workloads": len(loaded),
                      "kinds": list(dict.fromkeys(w.kind for w in loaded)),
                      "description": read_json(preset_path(name)).get("description", "")})
    return found


def workloads(args) -> list[dict]:
    from rnnbench.benchmarks.workloads import load_workloads, preset_names

    names = preset_names() if args.preset is None else [args.preset]
    return [{"preset": name, **w.to_dict()} for name in names
            for w in load_workloads(preset=name)]


def checks(args) -> list[dict]:
    """One row per check name: its category and cases per kind (every kind with a suite
    record, registered ones included), full and quick."""
    from rnnbench.reports.content import category_title
    from rnnbench.suites.catalogue import checks_of, kinds

    known = kinds()
    if args.kind is not None and args.kind not in known:
        raise UsageError(f"--kind {args.kind!r}: not a kind (known: {', '.join(known)})")
    rows: dict[tuple[str, str], dict] = {}
    for kind in known if args.kind is None else (args.kind,):
        for check in checks_of(kind):
            row = rows.setdefault((check.name, check.category), {
                "check": check.name, "category": check.category,
                "category_title": category_title(check.category), "cases": {}})
            row["cases"][kind] = {"full": len(check.cases()), "quick": len(check.cases(quick=True))}
    return list(rows.values())


# --- the lists as tables -------------------------------------------------------------------------

def _implementations_table(rows: list[dict]) -> str:
    table = [[row["name"], ", ".join(row["kinds"]) or "-",
              "yes" if row["available"] else f"no: {row['reason']}",
              ", ".join(row["unsupported"]) or "-", row["description"]] for row in rows]
    return fit(table, ["name", "kinds", "runs here", "not supported", "description"])


def _presets_table(rows: list[dict]) -> str:
    table = [[row["name"], str(row["workloads"]), ", ".join(row["kinds"]), row["description"]]
             for row in rows]
    return (fit(table, ["preset", "workloads", "kinds", "description"])
            + "\n\n`rnnbench list workloads --preset NAME` lists one preset's workloads.")


def _workloads_table(rows: list[dict]) -> str:
    table = [[row["preset"], row["name"], row["config"]["kind"], _sizes(row), str(row["batch"]),
              str(row["steps"]), ", ".join(METRIC_ABBREVIATIONS.get(m, m) for m in row["metrics"])]
             for row in rows]
    return (fit(table, ["preset", "workload", "kind", "sizes", "N", "T", "metrics"], keep=2)
            + "\n\n" + _wrapped("sizes: input->hidden (implicit: input->hidden/implicit->output), "
                                  "then layers (L), bi(directional), options; N batch, T steps; "
                                  "fwd forward, fwd+bwd forward and backward, train a training "
                                  "step."))


def _sizes(row: dict) -> str:
    from rnnbench.reference.kinds import config_from_dict

    # The config's own label without its kind (the table has a column for that): "3->5 ...".
    label = config_from_dict(row["config"]).describe()
    text = label.split("(", 1)[1].replace(")", "", 1) if "(" in label else label
    extras = ["" if row["dtype"] == "float32" else row["dtype"],
              f"vocab {row['vocab']}" if row.get("vocab") else "",
              f"{row['classes']} classes" if row.get("classes") else ""]
    return " ".join([text, *(e for e in extras if e)])


def _checks_table(rows: list[dict]) -> str:
    kinds = list(dict.fromkeys(kind for row in rows for kind in row["cases"]))
    table = [[row["check"], row["category_title"]]
             + [_cases(row["cases"].get(kind)) for kind in kinds] for row in rows]
    return (fit(table, ["check", "category", *kinds])
            + "\n\n" + _wrapped("cells: cases in a full run / in a --quick run; -: the check "
                                  "does not apply to the kind. `rnnbench conform TARGET` runs "
                                  "them; a check's id in the results is CHECK/CASE."))


def _cases(counts: dict | None) -> str:
    return f"{counts['full']}/{counts['quick']}" if counts else "-"


def fit(rows: list[list[str]], headers: list[str], width: int = WIDTH, keep: int = 1) -> str:
    """A plain table no wider than `width`: columns two spaces apart, a rule under the headers,
    the widest columns wrapped (at spaces) until it fits; the first `keep` columns (names)
    are never wrapped."""
    columns = list(zip(headers, *rows))
    widths = [max(len(str(cell)) for cell in column) for column in columns]
    while sum(widths) + 2 * (len(widths) - 1) > width:
        shrinkable = [i for i, w in enumerate(widths) if i >= keep and w > 8]
        if not shrinkable:
            break
        widest = max(shrinkable, key=lambda i: widths[i])
        widths[widest] -= 1
    lines = [_line(headers, widths), _line(["-" * w for w in widths], widths)]
    for row in rows:
        cells = [textwrap.wrap(str(cell), w, break_on_hyphens=False) or [""]
                 for cell, w in zip(row, widths)]
        for depth in range(max(map(len, cells))):
            lines.append(_line([c[depth] if depth < len(c) else "" for c in cells], widths))
    return "\n".join(lines)


def _line(cells: list[str], widths: list[int]) -> str:
    return "  ".join(cell.ljust(w) for cell, w in zip(cells, widths)).rstrip()


def _wrapped(text: str) -> str:
    return textwrap.fill(text, WIDTH)
