"""Reading report inputs: conformance JSON, bench JSON, pytest-benchmark JSON and asv results.

`load_inputs(paths)` reads every path into one `Results`. A path may be a file or a folder (an
asv results folder, or a folder of results files), searched for `*.json`. A file met twice (named
twice, or found again in a folder) or with the same content as an earlier one (a copy) is read
once and listed in `Results.duplicates`, so nothing is counted twice.

Policy for bad inputs: a file named on the command line that cannot be read, is not a regular
file, is not JSON (or nests absurdly deep), or is none of the four formats raises `UsageError`
naming it, before anything is written. A file found inside a named folder that is not a results
file is listed as unplaced instead (folders hold other things, e.g. asv's `machine.json`);
what is not a regular file there (a FIFO) and what is in hidden folders is not read. Inside a
good file, an item the report cannot place (a missing field, an unknown outcome, a time out of
range) becomes an `Unplaced` entry with the reason.

A bench document is a good file only when its own fields are what rnnbench writes (a
`machine_check` that is an object, an `interrupted` that is true or false, ...) and at least one
of its results can be read; otherwise the UsageError names its schema and the field, or the
first result that cannot be read and why. Another rnnbench document (`rnnbench.coldstart/1`)
is refused as such, not as an unknown file.
"""
from __future__ import annotations

import ast
import datetime
import functools
import hashlib
import itertools
import json
import math
import os
import re
from pathlib import Path

from rnnbench.benchmarks.result import MEASURED, InvalidResult
from rnnbench.errors import UsageError
from rnnbench.printable import printable_data
from rnnbench.reports.records import SIZE_FIELDS, Check, Duplicate, Results, Source, Timing, Unplaced
from rnnbench.documents import (BENCH_SCHEMAS, CONFORMANCE_SCHEMA, NOT_SELECTED,
                                read_json)
from rnnbench.suites.results import ConformanceRun

ASV_RESULTS_VERSION = 2          # asv 0.6's results file format
ASV_PRESET = "quick"             # the workloads of rnnbench's asv suite (benchmarks/asv_rnn.py)
# The asv version of rnnbench's benchmarks: "rnnbench <version>; suite <hash>".
_ASV_SUITE_VERSION = re.compile(r"rnnbench (\S+);")
ASV_METADATA_FILES = ("machine.json", "benchmarks.json")
# asv benchmark type -> the Timing number its value is (track_ benchmarks: see _ASV_TRACKED).
_ASV_TYPE_PREFIXES = {"time": "median_s", "peakmem": "peak_mem_bytes", "track": None}
# track_<what>[_<metric>]: what -> the Timing number (longest match wins).
_ASV_TRACKED = {"first_call_s": "first_call_s", "first_call": "first_call_s",
                "compile": "first_call_s",
                "tokens_per_s": "tokens_per_s", "peak_fraction": "peak_fraction",
                "gflops": "gflops"}
_LABEL_FIELDS = ("kind", "device", "dtype")


class _Skip(Exception):
    """An item cannot be placed; the message says why (becomes an Unplaced entry)."""


def load_inputs(paths) -> Results:
    """Load every input path (files or folders) into one `Results`; see the module policy."""
    results = Results()
    seen = _Seen()
    for path in map(Path, paths):
        if path.is_dir():
            results.extend(_load_folder(path, seen))
        elif not seen.repeated(path, results):
            results.extend(load_file(path))
    return results


class _Seen:
    """The files read so far, by real path and by content, to recognise repeats."""

    def __init__(self) -> None:
        self.paths: dict[Path, str] = {}
        self.digests: dict[str, str] = {}

    def repeated(self, path: Path, results: Results) -> bool:
        """True (and a Duplicate recorded) when `path` repeats a file read before."""
        if not path.is_file():
            return False        # load_file says what is wrong with it
        try:
            real, content = path.resolve(), path.read_bytes()
        except OSError:
            return False
        digest = hashlib.sha256(content).hexdigest()
        earlier = self.paths.get(real) or self.digests.get(digest)
        if earlier is not None:
            how = "same file" if real in self.paths else "same content"
            results.duplicates.append(Duplicate(str(path), earlier, how))
            return True
        self.paths[real] = self.digests[digest] = str(path)
        return False


def load_file(path: str | os.PathLike) -> Results:
    """Load one results file of any supported format; UsageError if it is not one."""
    path = Path(path)
    return load_document(path, read_json(path))


def load_document(path: str | os.PathLike, data) -> Results:
    """Load a results document already read (or made in memory) as `load_file` loads the file
    `path`; UsageError if it is none of the formats. Every string in it is made `printable`:
    the report shows, and never obeys, a control character in a name or a message."""
    path = Path(path)
    data = printable_data(data)
    fmt = detect_format(data)
    if fmt is None:
        if isinstance(data, dict) and path.name in ASV_METADATA_FILES:
            raise UsageError(f"{path}: asv metadata, not results; "
                             "pass the results files or the asv results folder")
        raise UsageError(f"{path}: {_not_results(data)}")
    try:
        return _PARSERS[fmt](path, data)
    except _Skip as exc:
        raise UsageError(f"{path}: {exc}") from None


def _not_results(data) -> str:
    """Why a document of none of the formats is not read: another rnnbench document (coldstart's
    output, a comparison) is named as what it is, anything else (a bench or conformance
    document of a version not read) as not a results file."""
    read = f"{CONFORMANCE_SCHEMA}, {', '.join(BENCH_SCHEMAS)}, pytest-benchmark or asv results"
    schema = data.get("schema") if isinstance(data, dict) else None
    ours = isinstance(schema, str) and schema.startswith("rnnbench.")
    what = schema.removeprefix("rnnbench.").split("/")[0] if ours else None
    if what in (None, "bench", "conformance"):
        return f"not a results file (expected {read} JSON)"
    return (f"rnnbench {what} output ({schema}), which report and compare do not read "
            f"(they read {read})")


def detect_format(data) -> str | None:
    """The format of a parsed JSON document, or None when it is none of the supported ones."""
    if not isinstance(data, dict):
        return None
    schema = data.get("schema")
    if schema == CONFORMANCE_SCHEMA:
        return "conformance"
    if schema in BENCH_SCHEMAS:
        return "bench"
    if "benchmarks" in data and "machine_info" in data:
        return "pytest-benchmark"
    if "result_columns" in data and "commit_hash" in data:
        return "asv"
    return None


def _load_folder(folder: Path, seen: _Seen) -> Results:
    results = Results()
    # Only regular files (a FIFO would block the read forever), and none in hidden folders
    # (an unfinished `rnnbench run` writes into .incomplete/).
    files = sorted(p for p in folder.rglob("*.json") if p.name not in ASV_METADATA_FILES
                   and p.is_file() and not _hidden(p.relative_to(folder)))
    if not files:
        raise UsageError(f"{folder}: a folder with no results files (*.json) in it")
    for path in files:
        if seen.repeated(path, results):
            continue
        try:
            results.extend(load_file(path))
        except UsageError as exc:
            source = Source(str(path), "unknown", "unknown")
            results.unplaced.append(Unplaced(source, path.name, str(exc), ""))
    return results


# --- rnnbench's own formats ---------------------------------------------------------------

def _load_conformance(path: Path, data: dict) -> Results:
    unread = []
    try:
        run = ConformanceRun.from_json(data, unread)
    except ValueError as exc:
        raise _Skip(str(exc)) from None
    environment = run.environment or {}
    settings = {"device": run.device, "quick": run.quick, "seed": run.seed, "kinds": run.kinds}
    source = Source(str(path), "conformance", _hostname(environment), environment,
                    time=_time_of(path, environment.get("date")), target=run.target, interrupted=run.interrupted, error=run.error,
                    quick=run.quick, settings=settings,
                    not_supported_features=run.not_supported_features, param_map=run.param_map)
    results = Results(sources=[source], unplaced=[
        Unplaced(source, f"results[{index}]", reason, _brief(item)) for index, reason, item in unread])
    results.checks += [Check(**vars(result), source=source, impl=run.target, device=run.device)
                       for result in run.results]
    return results


def _load_bench(path: Path, data: dict) -> Results:
    _check_bench_fields(data)
    environment = data.get("environment") or {}
    if _is_number(data.get("peak_gflops")):
        environment = {**environment, "peak_gflops": data["peak_gflops"]}
    # The document lists its workloads (name, config, batch, steps): sizes for scaling curves.
    workloads = {w["name"]: w for w in data.get("workloads") or []
                 if isinstance(w.get("name"), str)}
    source = Source(str(path), "bench", _hostname(environment), environment,
                    time=_time_of(path, environment.get("date")), settings=_bench_settings(data),
                    interrupted=data.get("interrupted") is True,
                    machine_check=data.get("machine_check") or {})
    results = Results(sources=[source])
    for i, item in enumerate(data["results"]):
        try:
            results.timings.append(_bench_timing(item, source, workloads))
        except InvalidResult as exc:
            results.unplaced.append(Unplaced(source, f"results[{i}]", str(exc), _brief(item)))
    if data["results"] and not results.timings:
        raise _bench_error(data, _none_readable(results.unplaced))
    return results


# A bench document's own fields (not its results'): what each must be where the document has it
# (null: not recorded, as rnnbench writes a run's that stopped before the machine check).
_BENCH_FIELDS = {
    "environment": (lambda v: isinstance(v, dict), "an object"),
    "machine_check": (lambda v: v is None or isinstance(v, dict), "an object or null"),
    "interrupted": (lambda v: isinstance(v, bool), "true or false"),
    "results": (lambda v: isinstance(v, list), "a list"),
    "workloads": (lambda v: v is None or _is_list_of_objects(v), "a list of objects"),
    "peaks": (lambda v: v is None or _is_list_of_objects(v), "a list of objects"),
    "device": (lambda v: v is None or isinstance(v, str), "a string"),
    "preset": (lambda v: v is None or isinstance(v, str), "a string"),
    "threads": (lambda v: v is None or (_is_number(v) and v >= 1 and v == int(v)),
                "a whole number >= 1"),
    "budget_s": (lambda v: v is None or (_is_number(v) and v > 0), "a positive number"),
    "peak_gflops": (lambda v: v is None or (_is_number(v) and v > 0), "a positive number"),
}


def _check_bench_fields(data: dict) -> None:
    """_Skip naming the document's schema and the first of its own fields that is not what
    rnnbench writes: a wrong one would be believed (a machine_check of "x" reads as not busy)."""
    if "results" not in data:
        raise _bench_error(data, "no 'results' list")
    for name, (test, what) in _BENCH_FIELDS.items():
        if name in data and not test(data[name]):
            raise _bench_error(data, f"{name!r} is not {what} ({_short(data[name])})")


def _bench_timing(item, source: Source, workloads: dict) -> Timing:
    """The Timing of one entry of a bench document's results; InvalidResult saying why not."""
    if not isinstance(item, dict):
        raise InvalidResult("not an object")
    name = item.get("workload")
    workload = workloads.get(name, {}) if isinstance(name, str) else {}
    values = {**_dict_or_empty(workload.get("config")), **workload, **item}
    timing = Timing.from_json(item, source=source, sizes=_sizes(values))
    # rnnbench times a median for every result it calls ok; without one it would read as
    # timed before and not now ("not comparable") instead of as the broken entry it is.
    if timing.status == "ok" and timing.median_s is None:
        raise InvalidResult(f"'median_s' is {_short(item.get('median_s'))}, but status is ok")
    return timing


def _none_readable(unplaced: list[Unplaced]) -> str:
    """Why a bench document with results has none that can be read: the first one's reason."""
    first, more = unplaced[0], len(unplaced) - 1
    others = f" (and {more} more cannot be read)" if more else ""
    return f"no result can be read: {first.where}: {first.reason}{others}"


def _bench_error(data: dict, text: str) -> _Skip:
    return _Skip(f"{data.get('schema')} document: {text}")


def _bench_settings(data: dict) -> dict:
    """How a bench run measured, as far as the document records it (a preset or budget it does
    not name is not guessed from its workloads: the command line may have overridden them)."""
    return {name: data[name] for name in ("preset", "budget_s", "device", "threads")
            if data.get(name) is not None}


def _timing(source: Source, labels: dict, values: dict, *, numbers: dict) -> Timing:
    """A Timing from another tool's entry: a dict of labels (impl, workload, metric, ...), one
    of values (status, reason, sizes, numbers) and the numbers read from the tool's own
    fields, put as a bench document holds a result."""
    entry = {name: labels.get(name) for name in ("impl", "workload", "metric")}
    entry.update({name: str(labels.get(name) or "") for name in _LABEL_FIELDS})
    entry.update(status=str(labels.get("status") or values.get("status") or "ok"),
                 reason=str(values.get("reason") or ""))
    entry.update({name: values[name] for name in MEASURED if _is_number(values.get(name))})
    entry.update(numbers)
    return Timing.from_json(entry, source=source, sizes=_sizes(values))


def _sizes(values: dict) -> dict:
    return {name: values[name] for name in SIZE_FIELDS if _is_number(values.get(name))}


# --- pytest-benchmark ---------------------------------------------------------------------

def _load_pytest_benchmark(path: Path, data: dict) -> Results:
    machine_info = _dict_field(data, "machine_info")
    benchmarks = _list_field(data, "benchmarks")
    environment = {key: machine_info.get(key) for key in
                   ("node", "processor", "machine", "system", "release", "python_version")}
    environment["cpu"] = (machine_info.get("cpu") or {}).get("brand_raw")
    environment["commit"] = (data.get("commit_info") or {}).get("id")
    environment["datetime"] = data.get("datetime")
    for bench in benchmarks:
        # The suite puts rnnbench's own environment capture into extra_info; prefer it.
        extra_env = ((bench or {}).get("extra_info") or {}).get("environment")
        if isinstance(extra_env, dict):
            environment.update(extra_env)
            break
    environment = {k: v for k, v in environment.items() if v is not None}
    source = Source(str(path), "pytest-benchmark",
                    str(machine_info.get("node") or environment.get("hostname") or "unknown"),
                    environment, time=_time_of(path, data.get("datetime")))
    results = Results(sources=[source])
    for i, bench in enumerate(benchmarks):
        where = str(bench.get("fullname") or bench.get("name") or f"benchmarks[{i}]") \
            if isinstance(bench, dict) else f"benchmarks[{i}]"
        try:
            if not isinstance(bench, dict) or not isinstance(bench.get("stats"), dict):
                raise _Skip("no stats")
            stats = bench["stats"]
            extra = _dict_or_empty(bench.get("extra_info"))
            # rnnbench's suite stores the whole workload (name, config, sizes, dtype) as a dict.
            workload = _dict_or_empty(extra.get("workload"))
            labels = {**_dict_or_empty(workload.get("config")), **workload,
                      **_dict_or_empty(bench.get("params")), **extra}
            if workload:
                labels["workload"] = workload.get("name")
            test_name = str(bench.get("name", "")).split("[")[0]
            labels.setdefault("metric", bench.get("group") or test_name)
            numbers = {name: float(stats[key]) for name, key in
                       (("median_s", "median"), ("iqr_s", "iqr"), ("repeats", "rounds"))
                       if _is_number(stats.get(key))}
            # Every round's time per call, where the file kept them (--benchmark-json does).
            data = stats.get("data")
            if isinstance(data, list) and data and all(map(_is_number, data)):
                numbers["samples_s"] = [float(v) for v in data]
            results.timings.append(_timing(source, labels, labels, numbers=numbers))
        except (_Skip, InvalidResult) as exc:
            results.unplaced.append(Unplaced(source, where, str(exc), _brief(bench)))
    return results


# --- asv ------------------------------------------------------------------------------------

def _load_asv(path: Path, data: dict) -> Results:
    if data.get("version") != ASV_RESULTS_VERSION:
        raise _Skip(f"asv results version {data.get('version')!r}; "
                    f"this reads version {ASV_RESULTS_VERSION} (asv 0.6)")
    params = _dict_field(data, "params")
    environment = {**params, "commit": data.get("commit_hash"), "asv_env": data.get("env_name")}
    version = _asv_rnnbench_version(data)
    if version:
        environment["rnnbench"] = version
    if _is_number(data.get("date")):     # asv's "date" is the commit's, not the run's
        environment["commit_date"] = _from_milliseconds(data["date"]).isoformat(timespec="seconds")
    source = Source(str(path), "asv", str(params.get("machine") or "unknown"), environment,
                    time=_asv_started(data) or _time_of(path, None))
    columns = data["result_columns"]
    rows = data.get("results")
    if not isinstance(columns, list) or not isinstance(rows, dict):
        raise _Skip("asv results without a result_columns list and a results object")
    described = _asv_benchmarks_json(path)
    # A class's track_ benchmarks (track_gflops) measure the metric its time_ benchmark times.
    class_metric = {name.rsplit(".", 1)[0]: name.rsplit(".time_", 1)[1]
                    for name in rows if ".time_" in name}
    results = Results(sources=[source])
    parts: dict[tuple, list] = {}
    for name, row in rows.items():
        try:
            metric = class_metric.get(name.rsplit(".", 1)[0])
            for labels, values in _asv_rows(name, dict(zip(columns, row or [])),
                                            described.get(name), metric):
                parts.setdefault(tuple(sorted(labels.items())), []).append(values)
        except _Skip as exc:
            results.unplaced.append(Unplaced(source, name, str(exc), _brief(row)))
    # time_, peakmem_ and track_ benchmarks of one (impl, workload, metric) make one Timing.
    for labels, values_list in parts.items():
        labels = dict(labels)
        numbers = {k: v for values in values_list for k, v in values.items() if k in MEASURED}
        failures = [values for values in values_list if values.get("status") != "ok"]
        # A failed peakmem_ beside a good time_ still leaves a timing; without one, say why.
        status = failures[0] if failures and "median_s" not in numbers else {"status": "ok"}
        try:
            results.timings.append(_timing(source, {**labels, **status}, status, numbers=numbers))
        except InvalidResult as exc:
            results.unplaced.append(Unplaced(source, _brief(labels), str(exc), _brief(values_list)))
    return results


def _asv_rows(name: str, row: dict, description: dict | None, class_metric: str | None):
    """(labels, values) for every parameter combination of one asv benchmark.

    time_<metric> and peakmem_<metric> name their metric; track_<what>[_<metric>] measures
    `what` of its own metric, else of `class_metric` (the metric its class's time_ times).
    """
    method = name.rsplit(".", 1)[-1]
    prefix = method.split("_", 1)[0]
    if prefix not in _ASV_TYPE_PREFIXES or "_" not in method:
        raise _Skip("not a time_, peakmem_ or track_ benchmark")
    field, metric = _ASV_TYPE_PREFIXES[prefix], method.split("_", 1)[1]
    if field is None:
        tracked = [what for what in sorted(_ASV_TRACKED, key=len, reverse=True)
                   if metric == what or metric.startswith(what + "_")]
        if not tracked:
            raise _Skip(f"a track_ benchmark of unknown meaning (known: "
                        f"{', '.join(f'track_{w}_<metric>' for w in _ASV_TRACKED)})")
        field, metric = _ASV_TRACKED[tracked[0]], metric[len(tracked[0]) + 1:] or class_metric
        if not metric:
            raise _Skip(f"track_{tracked[0]} in a class with no time_ benchmark: which metric?")
    if description is None or not isinstance(description.get("param_names"), list):
        raise _Skip("no benchmarks.json beside the results names its parameters")
    names = description["param_names"]
    params = row.get("params") or []
    values = row.get("result")
    combos = list(itertools.product(*params))
    if not isinstance(values, list):
        values = [values] * len(combos)
    quartiles = zip(*(row.get(f"stats_q_{q}") or [None] * len(combos) for q in (25, 75)))
    for combo, value, (q25, q75) in zip(combos, values, quartiles):
        labels = {"metric": metric, **{n: _asv_param(v) for n, v in zip(names, combo)}}
        labels["impl"] = labels.pop("implementation", labels.get("impl"))
        if not labels.get("impl") or not labels.get("workload"):
            raise _Skip(f"parameters {names} do not name an impl and a workload")
        if value is None:
            yield labels, {"status": "failed", "reason": "asv recorded no result (it failed)"}
        elif isinstance(value, float) and math.isnan(value):
            yield labels, _asv_not_run(labels)
        else:
            numbers = {"status": "ok", field: value}
            if field == "median_s" and _is_number(q25) and _is_number(q75):
                numbers["iqr_s"] = q75 - q25
            yield labels, numbers


def _asv_not_run(labels: dict) -> dict:
    """Why a combination has no value (NaN) in asv's results. asv writes NaN alike for one the
    suite skipped (setup raised SkipNotImplemented) and for one its run did not select (`asv
    run --bench REGEX`). rnnbench's declarations tell them apart: a kind or feature the
    implementation does not support is skipped on every machine; anything else was not
    selected, unless the implementation was unavailable on that machine (asv cannot say)."""
    reason = _declared_unsupported(labels["impl"], labels["workload"],
                                   labels.get("device") or "cpu", labels["metric"])
    if reason:
        return {"status": "not_supported", "reason": reason}
    return {"status": NOT_SELECTED, "reason": "asv ran without it (asv run --bench ...), or "
                                              "found the implementation unavailable there"}


def _declared_unsupported(impl_name: str, workload_name: str, device: str,
                          metric: str) -> str | None:
    """What the registered implementation declares it cannot run of this asv combination, or
    None (also for an implementation or workload rnnbench does not know here)."""
    from rnnbench.benchmarks.harness import missing_features

    impl, workload = _asv_grid()[0].get(impl_name), _asv_grid()[1].get(workload_name)
    if impl is None or workload is None:
        return None
    if workload.kind not in impl.kinds:
        return f"{impl.name} provides no {workload.kind!r}"
    missing = missing_features(impl, workload, device, metric)
    return f"{impl.name} does not support {', '.join(missing)}" if missing else None


@functools.cache
def _asv_grid() -> tuple[dict, dict]:
    """The implementations and workloads rnnbench's asv suite is parametrised over, by name."""
    from rnnbench.benchmarks.workloads import load_workloads
    from rnnbench.impls import registered

    return registered(), {w.name: w for w in load_workloads(preset=ASV_PRESET)}


def _asv_started(data: dict) -> datetime.datetime | None:
    """When asv's run started: its first benchmark's start (asv records each one's)."""
    columns, rows = data.get("result_columns"), data.get("results")
    if not isinstance(columns, list) or "started_at" not in columns or not isinstance(rows, dict):
        return None
    index = columns.index("started_at")
    starts = [row[index] for row in rows.values()
              if isinstance(row, list) and len(row) > index and _is_number(row[index])]
    return _from_milliseconds(min(starts)) if starts else None


def _from_milliseconds(value: float) -> datetime.datetime:
    return datetime.datetime.fromtimestamp(value / 1000, datetime.timezone.utc)


def _asv_rnnbench_version(data: dict) -> str:
    """The rnnbench version asv recorded with the benchmarks' results (their version), or ""."""
    columns = data.get("result_columns")
    if not isinstance(columns, list) or "version" not in columns:
        return ""
    index = columns.index("version")
    for row in (data.get("results") or {}).values():
        version = row[index] if isinstance(row, list) and len(row) > index else None
        match = _ASV_SUITE_VERSION.match(version) if isinstance(version, str) else None
        if match:
            return match.group(1)
    return ""


def _asv_benchmarks_json(path: Path) -> dict:
    """asv's benchmarks.json (parameter names per benchmark): results/benchmarks.json."""
    candidate = path.parent.parent / "benchmarks.json"
    try:
        data = json.loads(candidate.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _asv_param(text):
    # asv stores parameter values as their repr ("'native'"); plain names pass through.
    try:
        return str(ast.literal_eval(text))
    except (ValueError, SyntaxError):
        return str(text)


# --- small helpers ----------------------------------------------------------------------------

def _hidden(relative: Path) -> bool:
    return any(part.startswith(".") for part in relative.parts[:-1])


def _hostname(environment: dict) -> str:
    return str(environment.get("hostname") or environment.get("node") or "unknown")


def _time_of(path: Path, recorded) -> datetime.datetime | None:
    """When a file's results were measured, in UTC: the ISO time it records (a time without a
    zone is UTC), else its modification time (when the run wrote it)."""
    if isinstance(recorded, str):
        try:
            when = datetime.datetime.fromisoformat(recorded.replace("Z", "+00:00"))
        except ValueError:
            when = None
        if when is not None:
            return when.replace(tzinfo=when.tzinfo or datetime.timezone.utc).astimezone(
                datetime.timezone.utc)
    try:
        return datetime.datetime.fromtimestamp(path.stat().st_mtime, datetime.timezone.utc)
    except OSError:
        return None


def _required_str(item, name: str) -> str:
    if not isinstance(item, dict):
        raise _Skip("not an object")
    value = item.get(name)
    if not isinstance(value, str) or not value:
        raise _Skip(f"no {name!r}")
    return value


def _dict_field(data: dict, name: str) -> dict:
    value = data.get(name, {})
    if not isinstance(value, dict):
        raise _Skip(f"{name!r} is not an object")
    return value


def _list_field(data: dict, name: str) -> list:
    value = data.get(name)
    if not isinstance(value, list):
        raise _Skip(f"{name!r} is not a list")
    return value


def _is_list_of_objects(value) -> bool:
    return isinstance(value, list) and all(isinstance(item, dict) for item in value)


def _short(value, limit: int = 40) -> str:
    """A value as a message shows it: its repr, cut to `limit` characters."""
    text = repr(value)
    return text if len(text) <= limit else text[:limit - 1] + "…"


def _dict_or_empty(value) -> dict:
    return value if isinstance(value, dict) else {}


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _brief(item, limit: int = 200) -> str:
    """A short one-line rendering of an input item for the unplaced list."""
    text = json.dumps(item, default=str, sort_keys=True)
    return text if len(text) <= limit else text[:limit - 1] + "…"


_PARSERS = {"conformance": _load_conformance, "bench": _load_bench,
            "pytest-benchmark": _load_pytest_benchmark, "asv": _load_asv}
