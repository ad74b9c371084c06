"""Planted bugs in time order, directions, batch_first and the layer stack: one hook each."""
import torch

from _base import GRU, LSTM, RNN


class TimeReversed(RNN):
    def time_order(self, steps, reverse):
        return range(steps - 1, -1, -1)


class ReverseNotReversed(GRU):
    def time_order(self, steps, reverse):
        return range(steps)


class ReverseHnWrongEnd(LSTM):
    def run_direction(self, x, state, layer, direction):
        output, final = super().run_direction(x, state, layer, direction)
        if direction == 1:
            final = (output[-1],) + final[1:]  # h_n = output[-1] for both directions
        return output, final


class ReverseOutputsNotRealigned(RNN):
    def run_direction(self, x, state, layer, direction):
        output, final = super().run_direction(x, state, layer, direction)
        return (output.flip(0) if direction == 1 else output), final  # kept in processing order


class BatchFirstIgnored(LSTM):
    def time_major(self, x):
        return x


class UpperLayersReadInput(RNN):
    def layer_input(self, layer, raw, below):
        return raw  # runs only when input_size == directions * hidden_size


class StateNotCarried(LSTM):
    def run_direction(self, x, state, layer, direction):
        weights, steps = self.weights(layer, direction), x.unbind(0)
        outputs = [None] * len(steps)
        for t in self.time_order(len(steps), reverse=direction == 1):
            new = self.step(steps[t], state, weights)  # never assigned back to `state`
            outputs[t] = new[0]
        return torch.stack(outputs), new
