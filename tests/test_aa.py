"""The A/A experiment: torch.nn's LSTM handed in as a user's file against native, its verdicts
counted against the target (none on a busy machine, at most 1 in 20 on a quiet one), and the
busy loops it starts beside it ended whatever happens."""
import json
import threading

import pytest

from rnnbench.benchmarks import aa_test, harness
from rnnbench.benchmarks.machine import Usage

TINY_LSTM = {"name": "tiny-lstm", "config": {"kind": "lstm", "input_size": 3, "hidden_size": 4},
             "batch": 2, "steps": 3, "budget_s": 0.01, "min_repeats": 5, "min_sample_s": 0.001}


@pytest.fixture
def workload(tmp_path):
    path = tmp_path / "w.json"
    path.write_text(json.dumps({"workloads": [TINY_LSTM]}))
    return str(path)


@pytest.mark.parametrize("counts, busy, expected", [
    ({"within_noise": 20}, False, True),
    ({"within_noise": 19, "faster": 1}, False, True),
    ({"within_noise": 18, "slower": 1, "faster": 1}, False, False),
    ({"not_judged": 10}, True, True),
    ({"not_judged": 9, "faster": 1}, True, False),
])
def test_the_target_is_no_claim_when_busy_and_one_in_twenty_when_quiet(counts, busy, expected):
    assert aa_test.met(counts, busy) is expected


def test_the_user_file_is_nn_lstm_loaded_as_a_users_class(tmp_path):
    from torch import nn

    impl = aa_test.user_lstm(tmp_path)
    assert impl.name == aa_test.NAME and list(impl.kinds) == ["lstm"]
    constructor = impl.kinds["lstm"]
    assert constructor.__mro__[1] is nn.LSTM and constructor.__dict__.keys() <= {
        "__module__", "__qualname__", "__doc__", "__firstlineno__", "__static_attributes__"}


def test_the_experiment_counts_the_copys_verdicts_run_by_run(workload, tmp_path, monkeypatch,
                                                             capsys):
    monkeypatch.setattr(harness, "measure_usage", lambda: Usage(0.0, 0.0))
    out = tmp_path / "aa.json"
    code = aa_test.main(["--runs", "2", "--workload", workload, "--threads", "1",
                         "--json", str(out)])
    printed = capsys.readouterr().out.splitlines()
    saved = json.loads(out.read_text())
    verdicts = [v for row in saved["runs"] for v in row["verdicts"].values()]
    assert len(saved["runs"]) == len(saved["documents"]) == 2 and len(verdicts) == 4
    assert sum(saved["counts"].values()) == 4 and saved["busy_loops"] == 0
    assert printed[0].startswith("run 1: machine check ") and "tiny-lstm forward: " in printed[0]
    claims = sum(v in ("faster", "slower") for v in verdicts)
    assert printed[-1].startswith(f"target: at most 1 in 20 faster/slower; {claims} of 4: ")
    assert code == (0 if claims == 0 else 1)
    for row, doc in zip(saved["runs"], saved["documents"]):     # the copy's, not native's
        assert row["verdicts"] == {f"{r['workload']} {r['metric']}": r["vs_native_verdict"]
                                   for r in doc["results"] if r["impl"] == aa_test.NAME}
    assert {r["impl"] for r in saved["documents"][0]["results"]} == {"native", aa_test.NAME}


def test_the_busy_loops_spin_while_it_runs_and_are_ended_after(workload, monkeypatch):
    started, alive = [], []
    real = aa_test.busy_loops
    monkeypatch.setattr(aa_test, "busy_loops", lambda: started.extend(real()) or started)

    def runs(workloads, count, **_):
        alive.extend(loop.poll() is None for loop in started)
        raise KeyboardInterrupt     # the loops must end on an interrupted run too

    # Should the script leave them spinning, end them here so that the test fails, not hangs.
    rescued = []
    rescue = threading.Timer(30, lambda: rescued.extend(loop.kill() for loop in started))
    rescue.start()
    monkeypatch.setattr(aa_test, "measure_runs", runs)
    try:
        with pytest.raises(KeyboardInterrupt):
            aa_test.main(["--runs", "1", "--busy", "--workload", workload])
    finally:
        rescue.cancel()
    assert alive == [True, True] and not rescued
    assert all(loop.poll() is not None for loop in started)


@pytest.mark.parametrize("args, message", [
    (["--runs", "0"], "--runs must be at least 1, got 0"),
    (["--threads", "0"], "--threads must be at least 1, got 0"),
    (["--workload", "RNN_ONLY"], "no lstm workload to time"),
])
def test_bad_options_are_one_line_and_exit_2(args, message, tmp_path, capsys):
    rnn_only = tmp_path / "rnn.json"
    rnn_only.write_text(json.dumps({"workloads": [{**TINY_LSTM, "config": {"kind": "rnn",
                                                                        "input_size": 3,
                                                                        "hidden_size": 4}}]}))
    assert aa_test.main([str(rnn_only) if a == "RNN_ONLY" else a for a in args]) == 2
    assert capsys.readouterr().err == f"aa_test: error: {message}\n"


def test_the_tally_counts_the_copys_verdicts_and_says_which_runs_were_busy():
    def run(busy, copy, status="ok"):
        results = [{"impl": impl, "workload": "w", "metric": metric, "status": status,
                    "vs_native_verdict": verdict}
                   for metric in ("forward", "forward_backward")
                   for impl, verdict in ((aa_test.NAME, copy), ("native", "within_noise"))]
        return {"machine_check": {"busy": busy}, "results": results}

    result = aa_test.tally([run(False, "faster"), run(True, "not_judged"),
                            run(False, None, status="failed")])
    assert result["counts"] == {"faster": 2, "not_judged": 2, "failed": 2}
    assert [row["busy"] for row in result["runs"]] == [False, True, False]
    assert result["runs"][0]["verdicts"] == {"w forward": "faster", "w forward_backward": "faster"}
