"""A conformance child is bounded whatever the implementation does: memory, output, processes
(its own, what it forks, and the command's own end on SIGTERM), time limits that follow the
machine's speed, and torch's threads where the caller shares the cores out."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rnnbench.child_process import GIB, ChildProcess
from rnnbench.suites import conform

ZOO = Path(__file__).parent / "zoo"
HOSTILE = ZOO / "hostile.py"


def running(pid: int) -> bool:
    """Whether `pid` is a live process (a zombie waiting to be reaped does not count)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def descendants(pid: int) -> list[int]:
    """Every live process below `pid`, from /proc."""
    parents: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as stat:
                    parent = int(stat.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError):
                continue
            parents.setdefault(parent, []).append(int(entry))
    found, pending = [], [pid]
    while pending:
        children = parents.get(pending.pop(), [])
        found += children
        pending += children
    return [p for p in found if running(p)]


pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")


def test_a_child_runs_torch_on_the_threads_it_is_given_and_records_them():
    doc = conform("native", kinds=["rnn"], checks="forward/single-layer", threads=3)
    assert [result.outcome for result in doc.results] == ["passed"]
    assert doc.environment["threads"] == 3


def test_a_check_that_allocates_past_the_memory_limit_is_an_error_that_names_the_limit():
    doc = conform(f"{HOSTILE}:AllocatesWithoutBound", kinds=["rnn_cell"],
                  checks="forward/batched", memory_limit=2 * GIB)
    [result] = doc.results
    assert result.outcome == "error"
    assert result.message.startswith("exceeded the memory limit (2 GiB): ")


CHATTY_CHILD = """
import sys

def main(options, send):
    for _ in range(options["lines"]):
        sys.stdout.write("x" * 99 + "\\n")
    print("the last line", flush=True)
    send("done")
    return 0
"""


def test_the_parent_keeps_only_a_bounded_tail_of_what_a_child_prints(tmp_path):
    (tmp_path / "chatty_child.py").write_text(CHATTY_CHILD)
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    with ChildProcess("chatty_child", {"lines": 200_000}, tail_bytes=4096, env=env) as child:
        assert child.next_event(120) == {"event": "done"}
        assert child.finish() == "exited with status 0"
        assert len(child.tail) <= 4096      # of 20 MB printed
        assert child.last_line() == "the last line"


def test_a_process_forked_at_import_does_not_outlive_the_run(tmp_path, monkeypatch):
    pid_file = tmp_path / "forked.pid"
    monkeypatch.setenv("FORKED_PID_FILE", str(pid_file))
    doc = conform(f"{ZOO / 'forks_at_import.py'}:RNN", kinds=["rnn"], checks="forward/single-layer")
    assert doc.summary["passed"] == 1
    forked = [int(line) for line in pid_file.read_text().split()]
    assert forked
    deadline = time.monotonic() + 10
    while any(map(running, forked)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(map(running, forked))


def test_sigterm_ends_conform_and_its_child_and_writes_what_finished(tmp_path):
    out = tmp_path / "conformance.json"
    command = subprocess.Popen(
        [sys.executable, "-m", "rnnbench.cli", "conform", f"{HOSTILE}:HangsInForward",
         "--kind", "rnn_cell", "--check", "forward/*,shapes/*", "--json", str(out)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while not descendants(command.pid) and time.monotonic() < deadline:
            time.sleep(0.2)
        children = descendants(command.pid)
        assert children, "the check child never started"
        time.sleep(15)      # it loads, and hangs in the first forward check
        command.send_signal(signal.SIGTERM)
        _, stderr = command.communicate(timeout=60)
    finally:
        command.kill()
    assert command.returncode == 143, stderr
    assert stderr.strip().splitlines()[-1] == "rnnbench conform: terminated"
    doc = json.loads(out.read_text())
    assert doc["interrupted"] is True
    assert not any(map(running, children))
