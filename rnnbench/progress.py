"""Progress of the long commands: on a terminal one status line redrawn in place; in a log (CI, a
pipe) only the lines meant to stay, so a log is not flooded with redraws. Every line is shown
`printable`: a workload's or a target's name cannot steer the terminal."""
from __future__ import annotations

import shutil

from rnnbench.documents import OUTCOMES
from rnnbench.printable import printable

ERASE = "\r\033[K"      # back to the start of the line and erase it


class LiveLine:
    """A status line redrawn in place on a terminal, and the lines that stay printed around it."""

    def __init__(self, stream):
        self.stream = stream
        self.live = stream.isatty()
        self.shown = False

    def show(self, text: str) -> None:
        """Redraw the status line (on a terminal; a log gets nothing)."""
        if self.live:
            # A line wider than the terminal wraps, and "\r" can no longer erase all of it.
            width = shutil.get_terminal_size().columns - 1
            self._write(ERASE + printable(text)[:width])
            self.shown = True

    def print(self, text: str) -> None:
        """A line that stays, in place of the status line."""
        self.clear()
        self._write(printable(text) + "\n")

    def clear(self) -> None:
        """Erase the status line, if one is shown."""
        if self.shown:
            self._write(ERASE)
            self.shown = False

    def _write(self, text: str) -> None:
        self.stream.write(text)
        self.stream.flush()


class StepCounter:
    """A `progress(done, total, label)` callback: "[done/total] label" redrawn on a terminal; in a
    log, one line per new label when `log_prefix` is given, else nothing."""

    def __init__(self, stream, log_prefix: str | None = None):
        self.line = LiveLine(stream)
        self.log_prefix = log_prefix
        self.last_label = None

    def __call__(self, done: int, total: int, label: str) -> None:
        self.line.show(f"[{done}/{total}] {label}")
        if self.log_prefix and not self.line.live and label != self.last_label:
            self.line.print(f"{self.log_prefix}: {done}/{total} {label}")
        self.last_label = label

    @property
    def live(self) -> bool:
        """Whether the stream is a terminal (the counter is drawn) or a log."""
        return self.line.live

    def close(self) -> None:
        """Erase the counter; the next stage starts a fresh one."""
        self.line.clear()


class KindTally:
    """A `progress(result, done, total)` callback for conformance checks: the check in progress
    on a terminal, and one line per finished kind everywhere, e.g. "gru: 40 passed, 2 failed"."""

    def __init__(self, stream):
        self.line = LiveLine(stream)
        self.kind, self.counts = None, {}

    def __call__(self, result, done: int, total: int) -> None:
        if result.kind != self.kind:
            self.close()
            self.kind = result.kind
        self.counts[result.outcome] = self.counts.get(result.outcome, 0) + 1
        self.line.show(f"[{done}/{total}] {result.kind} {result.check}")

    def close(self) -> None:
        """Print the tally of the kind in progress, if any."""
        if self.kind is not None:
            self.line.print(f"{self.kind}: {tally(self.counts)}")
        self.kind, self.counts = None, {}


def tally(counts: dict[str, int]) -> str:
    """Outcome counts as words in OUTCOMES' order, zeros left out: "40 passed, 3 not supported"."""
    return ", ".join(f"{counts[o]} {o.replace('_', ' ')}" for o in OUTCOMES if counts.get(o))
