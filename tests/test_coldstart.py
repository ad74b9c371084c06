"""`rnnbench coldstart`: each length's first call in a fresh process, failures kept as results."""
import json

import pytest

from rnnbench import cli
from rnnbench.benchmarks.cold_start import cold_start
from rnnbench.benchmarks.workloads import workload_from_dict

PAUSE_S = 1.0

IMPLS_FILE = f"""
import time
from torch import nn
from rnnbench.impls.base import Implementation

_called = []

class SlowFirstCall(nn.RNN):
    # Stands in for a compiler: the first call in a process pays PAUSE_S, later ones do not.
    def forward(self, x, *args):
        if not _called:
            _called.append(True)
            time.sleep({PAUSE_S})
        return super().forward(x, *args)

class ExplodesWhenLong(nn.RNN):
    def forward(self, x, *args):
        if x.shape[0] > 3:
            raise RuntimeError("sequence too long for this kernel")
        return super().forward(x, *args)

SLOW = Implementation(name="slow", kinds={{"rnn": SlowFirstCall}})
LONG = Implementation(name="long", kinds={{"rnn": ExplodesWhenLong}})
"""

TINY = {"name": "tiny", "config": {"kind": "rnn", "input_size": 2, "hidden_size": 3},
        "batch": 2, "steps": 1, "metrics": ["forward"]}


@pytest.fixture
def impls_file(tmp_path):
    path = tmp_path / "mine.py"
    path.write_text(IMPLS_FILE)
    return path


def test_every_length_pays_its_first_call_in_a_fresh_process(impls_file):
    seen = []
    results = cold_start(f"{impls_file}:SLOW", workload_from_dict(TINY), [4, 2], threads=1,
                         checkpoint=lambda so_far: seen.append([r["steps"] for r in so_far]))
    assert [r["steps"] for r in results] == [2, 4]  # shortest first: the ratios' base
    assert seen == [[2], [2, 4]]  # every result is handed out as soon as it exists
    assert all(r["status"] == "ok" for r in results)
    # Had the lengths shared a process, only the first would have paused.
    assert all(r["first_call_s"] >= PAUSE_S > r["second_call_s"] for r in results)
    assert results[0]["ratio"] == 1.0
    assert results[1]["ratio"] == pytest.approx(results[1]["first_call_s"] / results[0]["first_call_s"])


def coldstart_of_long(impls_file, tmp_path) -> tuple[int, dict]:
    """`rnnbench coldstart` of LONG at lengths 2 and 5 with --json: its exit code and document."""
    workload = tmp_path / "tiny.json"
    workload.write_text(json.dumps({"workloads": [TINY]}))
    out = tmp_path / "cold.json"
    code = cli.main(["coldstart", "--impl", f"{impls_file}:LONG", "--workload", str(workload),
                     "--steps", "2,5", "--threads", "1", "--json", str(out)])
    return code, json.loads(out.read_text())


def test_a_failing_length_is_a_result_and_the_others_still_run(impls_file, tmp_path, capsys):
    code, document = coldstart_of_long(impls_file, tmp_path)
    assert code == 1
    results = document["results"]
    assert [(r["steps"], r["status"]) for r in results] == [(2, "ok"), (5, "failed")]
    assert document["interrupted"] is False
    assert "sequence too long for this kernel" in results[1]["reason"]
    assert "sequence too long" in capsys.readouterr().out


def test_an_interrupted_coldstart_shows_what_finished_and_marks_its_document(
        impls_file, tmp_path, capsys, monkeypatch):
    import rnnbench.commands.coldstart as command
    from tests.test_cli import interrupted_at_the_first_checkpoint

    monkeypatch.setattr(command, "cold_start",
                        interrupted_at_the_first_checkpoint(command.cold_start))
    code, document = coldstart_of_long(impls_file, tmp_path)
    assert code == 130
    assert "interrupted after 1 result; written to" in capsys.readouterr().out
    assert document["interrupted"] is True and [r["steps"] for r in document["results"]] == [2]


@pytest.mark.parametrize("argv, message", [
    (["--steps", "25,x"], "--steps must be comma-separated whole numbers"),
    (["--steps", "0"], "at least 1"),
    (["--impl", "no-such-impl"], "unknown implementation"),
    (["--name", "nope"], "no workload named 'nope'"),
    (["--impl", "implicit"], "implicit provides no 'rnn'"),
    (["--preset", "quick", "--name", "gru_cell-64"], "it takes one step, so it has no sequence length"),
    (["--threads", "0"], "--threads must be 1 to 1024, got 0"),
])
def test_coldstart_usage_errors_exit_2_with_one_line(argv, message, capsys):
    assert cli.main(["coldstart", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and "\n" not in err and "Traceback" not in err
