"""Implementations that attack the harness rather than get the math wrong: they exit, crash, hang,
allocate or print without bound, or raise messages full of terminal escape sequences. Each is a
torch.nn.RNNCell (or RNN) until its forward misbehaves, so that whatever runs before forward
(construction, parameter checks) sees a correct module. Nothing happens at import."""
import os
import signal
import sys
import time

import torch

# Clear the screen, set the window title, return to the line's start and overwrite it, then a
# right-to-left override: none of it may reach a terminal or a report as it is.
ESCAPES = "\x1b[2J\x1b]0;pwned\x07\rOVERWRITTEN\u202e"
# More than any child may use in the tests (they set a limit of a few GiB).
GREEDY_BYTES = 8 << 30
CHATTY_LINES = 400_000     # about 20 MB of output per forward call


class ExitsInForward(torch.nn.RNNCell):
    """sys.exit(0) in forward: a process that ends "successfully" in the middle of the work."""

    def forward(self, input, hx=None):
        sys.exit(0)


class SegfaultsInForward(torch.nn.RNNCell):
    def forward(self, input, hx=None):
        os.kill(os.getpid(), signal.SIGSEGV)


class HangsInForward(torch.nn.RNNCell):
    def forward(self, input, hx=None):
        time.sleep(3600)


class RaisesEscapes(torch.nn.RNNCell):
    def forward(self, input, hx=None):
        raise RuntimeError(f"bad input {ESCAPES} here")


class AllocatesWithoutBound(torch.nn.RNNCell):
    """Asks for far more memory than it may have, in one tensor. The pages are not touched, so
    where no limit stops it the machine does not pay for them (and the checks then pass)."""

    def forward(self, input, hx=None):
        torch.empty(GREEDY_BYTES, dtype=torch.uint8)
        return super().forward(input, hx)


class PrintsWithoutBound(torch.nn.RNNCell):
    """Prints tens of megabytes a call, and still computes the right thing."""

    def forward(self, input, hx=None):
        sys.stdout.write("chatter chatter chatter chatter chatter chatter\n" * CHATTY_LINES)
        return super().forward(input, hx)


built = torch.nn.RNN(3, 4)     # an instance, not a constructor: a load error, "name its class"
answer = 42                     # neither an Implementation nor a constructor
