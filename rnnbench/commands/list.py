"""`rnnbench list`: the registered implementations, their kinds and whether they run here."""
from __future__ import annotations

import json

from tabulate import tabulate

from rnnbench.impls import registered


def add_arguments(parser) -> None:
    parser.add_argument("--json", action="store_true", help="print the list as JSON instead of a table")


def run(args) -> int:
    rows = [describe(impl) for impl in registered().values()]
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        print(tabulate([[row["name"], ", ".join(row["kinds"]) or "-",
                         ", ".join(row["unsupported"]) or "-",
                         "yes" if row["available"] else f"no: {row['reason']}",
                         row["description"]] for row in rows],
                       headers=["name", "kinds", "unsupported", "available", "description"]))
    return 0


def describe(impl) -> dict:
    """One implementation as plain data."""
    reason = impl.unavailable_reason()
    return {"name": impl.name, "kinds": list(impl.kinds), "unsupported": sorted(impl.unsupported),
            "available": reason is None, "reason": reason, "description": impl.description}
