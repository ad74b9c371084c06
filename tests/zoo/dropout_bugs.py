"""Planted bugs in inter-layer dropout: each overrides `drop`, `final_output` or `weights`."""
import torch
from torch.nn import functional as F

from _base import GRU, LSTM, RNN


class DropoutInEval(RNN):
    def drop(self, x):
        return F.dropout(x, self.dropout, training=True)


class DropoutAfterLastLayer(GRU):
    def final_output(self, output):
        return self.drop(output)


class DropoutNotRescaled(LSTM):
    def drop(self, x):
        if not self.training:
            return x
        return x * torch.bernoulli(torch.full_like(x, 1.0 - self.dropout))


class DropoutRateAsKeep(RNN):
    def drop(self, x):
        return F.dropout(x, 1.0 - self.dropout, self.training)


class WeightDropInTraining(LSTM):
    def weights(self, layer, direction):
        # DropConnect on W_hh at a rate of its own (AWD-LSTM's WeightDrop), whatever dropout says
        found = super().weights(layer, direction)
        return {**found, "weight_hh": F.dropout(found["weight_hh"], 0.5, self.training)}


class DropoutInRecurrence(GRU):
    """A lower layer's h dropped at every step and carried, dropped, to its next step."""

    def run_direction(self, x, state, layer, direction):
        if layer == self.num_layers - 1:
            return super().run_direction(x, state, layer, direction)
        weights = self.weights(layer, direction)
        steps = x.unbind(0)
        outputs = [None] * len(steps)
        for t in self.time_order(len(steps), reverse=direction == 1):
            state = (self.drop(self.step(steps[t], state, weights)[0]),)
            outputs[t] = state[0]
        return torch.stack(outputs), state
