"""Planted bugs that slip through a conformance suite with blind spots: each is a plain bug a
person would name, in a place a narrow case table or a lenient check does not look.

Where a bug lives in one hook of the zoo's base (_base.py), it is a subclass overriding that hook
alone, as in the other zoo files. Some bugs only hide behind a declaration (a feature declared
unsupported that switches the check off); those are `Implementation`s declaring it. What today's
suite says about each, and what it should say, is in catalogue.py (BLIND_SPOTS).
"""
from __future__ import annotations

import time

import torch
from torch.nn import functional as F

from _base import GRU, LSTM, RNN, GRUCell
from rnnbench.impls import Implementation
from rnnbench.impls.implicit import ImplicitRNN

# -- construction checks that only run on two-layer bidirectional rows ---------------------------


class InitZeros(GRU):
    def init_parameter(self, name, parameter):
        parameter.zero_()


class InitRandnSingleLayer(RNN):
    def init_parameter(self, name, parameter):
        parameter.normal_()


SINGLE_LAYER = frozenset({"num_layers", "bidirectional"})
ZERO_INIT_GRU = Implementation(
    name="zoo-zero-init-gru", kinds={"gru": InitZeros}, unsupported=SINGLE_LAYER,
    description="every parameter initialised to zero; one layer, one direction")
RANDN_INIT_RNN = Implementation(
    name="zoo-randn-init-rnn", kinds={"rnn": InitRandnSingleLayer}, unsupported=SINGLE_LAYER,
    description="every parameter from N(0, 1); one layer, one direction")

# -- error checks that pass because the module raises on everything ----------------------------


class LSTMAlwaysRaises(LSTM):
    def step(self, x, state, w):
        h, c = state
        # [x, h] concatenated but multiplied by W_ih alone: a shape error on every valid input
        return (torch.cat([x, h], dim=-1) @ w["weight_ih"].T, c)


# -- an initial state of batch 1 broadcast over the batch (ONNX's reference runtime) -----------


class BroadcastsH0OfBatchOne(RNN):
    def check_state(self, state, shape):
        if state.shape[:-2] + state.shape[-1:] == shape[:-2] + shape[-1:] and state.shape[-2] == 1:
            return  # batch 1: the same initial state for every sequence, broadcast
        super().check_state(state, shape)


# -- dropout masks -----------------------------------------------------------------------------


class DropoutMaskPerSequence(RNN):
    def drop(self, x):
        if not self.training or not self.dropout:
            return x
        # variational dropout: one mask per sequence and unit, the same at every time step
        keep = 1.0 - self.dropout
        mask = torch.bernoulli(x.new_full((1,) + tuple(x.shape[1:]), keep))
        return x * mask / keep if keep else x * mask


class DropoutNeverApplied(LSTM):
    def drop(self, x):
        return x


# -- a cell whose zero state is sized from the input's first axis ------------------------------


class CellZeroStateFromFirstAxis(GRUCell):
    def forward(self, input, hx=None):
        if hx is None:
            # input.size(0) is the batch only when the input is batched: (I,) gives (I, hidden)
            h = input.new_zeros(input.size(0), self.hidden_size)
            return self.step(input, (h,), self.weights(0, 0))[0]
        return super().forward(input, hx)


# -- diagnoses that mislead or are missing -----------------------------------------------------


class GRUCellGatesSplitBySize(GRUCell):
    def split(self, gates):
        # lucid 2.x: chunks of size 3 instead of 3 chunks (right only when hidden_size == 3)
        return dict(zip(self.gate_order, gates.split(len(self.gate_order), dim=-1)))


class ImplicitMitrIgnored(ImplicitRNN):
    """The solver's iteration cap is accepted and silently dropped: every solve runs to the
    default cap of 300."""

    def __init__(self, *, mitr: int = 300, **settings):
        super().__init__(**settings)


# -- the harness: what an implementation's exceptions look like in the report ------------------


class _Kernel:
    """A stand-in for a compiled kernel object whose repr carries its address."""


class ChainedCauseRNN(RNN):
    def step(self, x, state, w):
        try:
            return (self.activation(x @ w.weight_ih.T + state[0] @ w["weight_hh"].T),)
        except AttributeError as exc:
            # a framework wrapper: the real cause (the AttributeError) only in __cause__
            raise RuntimeError(f"recurrent step failed in {_Kernel()!r}") from exc


# -- feature gating too broad ------------------------------------------------------------------


class DropoutOnSingleLayerOutput(RNN):
    def final_output(self, output):
        return F.dropout(output, self.dropout, self.training)


DROPOUT_UNSUPPORTED = Implementation(
    name="zoo-dropout-unsupported", kinds={"rnn": DropoutOnSingleLayerOutput},
    unsupported=frozenset({"dropout"}),
    description="declares dropout unsupported; with one layer it drops its own output in training")


class DtypeArgumentIgnored(RNN):
    def new_parameter(self, shape, device, dtype):
        return torch.nn.Parameter(torch.empty(shape, device=device))


FLOAT64_UNSUPPORTED = Implementation(
    name="zoo-float64-unsupported", kinds={"rnn": DtypeArgumentIgnored},
    unsupported=frozenset({"float64"}),
    description="declares float64 unsupported; its constructor ignores dtype=")

# -- time bound --------------------------------------------------------------------------------

HANG_AFTER_CALLS = 20
_calls = 0


class HangsAfterTwentyCalls(RNN):
    def forward(self, input, hx=None):
        global _calls
        _calls += 1
        while _calls > HANG_AFTER_CALLS:  # a deadlock after a while, e.g. in a worker pool
            time.sleep(3600)
        return super().forward(input, hx)
