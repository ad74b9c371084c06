import io
from types import SimpleNamespace

import pytest

from rnnbench.progress import ERASE, KindTally, StepCounter, tally


class Stream(io.StringIO):
    def __init__(self, tty: bool):
        super().__init__()
        self.tty = tty

    def isatty(self) -> bool:
        return self.tty


def result(kind, outcome, check="forward/single-layer"):
    return SimpleNamespace(kind=kind, outcome=outcome, check=check)


def test_a_log_gets_one_line_per_new_label_and_no_redraws():
    stream = Stream(tty=False)
    counter = StepCounter(stream, log_prefix="bench")
    for done, label in [(0, "w1"), (1, "w1"), (2, "w2"), (2, "w2")]:
        counter(done, 4, label)
    counter.close()
    assert stream.getvalue() == "bench: 0/4 w1\nbench: 2/4 w2\n"


def test_a_log_gets_nothing_without_a_prefix():
    stream = Stream(tty=False)
    counter = StepCounter(stream)
    counter(1, 2, "w1")
    counter.close()
    assert stream.getvalue() == "" and not counter.live


def test_a_terminal_gets_the_counter_redrawn_then_erased():
    stream = Stream(tty=True)
    counter = StepCounter(stream, log_prefix="bench")
    counter(1, 2, "w1")
    counter(2, 2, "w2")
    counter.close()
    assert stream.getvalue() == f"{ERASE}[1/2] w1{ERASE}[2/2] w2{ERASE}"


@pytest.mark.parametrize("tty", [True, False])
def test_every_finished_kind_gets_a_line_that_stays(tty):
    stream = Stream(tty)
    progress = KindTally(stream)
    for i, (kind, outcome) in enumerate([("rnn", "passed"), ("rnn", "failed"), ("rnn", "passed"),
                                          ("gru", "not_supported")], start=1):
        progress(result(kind, outcome), i, 4)
    progress.close()
    # What stays on the screen: each line as it is after its last erase.
    screen = [line.split(ERASE)[-1] for line in stream.getvalue().split("\n")]
    assert screen == ["rnn: 2 passed, 1 failed", "gru: 1 not supported", ""]
    assert ("[4/4] gru forward/single-layer" in stream.getvalue()) == tty


def test_tally_counts_in_outcome_order_and_leaves_out_zeros():
    assert tally({"error": 1, "passed": 3, "failed": 0}) == "3 passed, 1 error"
    assert tally({}) == ""
