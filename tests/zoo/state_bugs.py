"""Planted bugs in the initial state, h_n and the unbatched path: each overrides one hook."""
import torch

from _base import GRU, LSTM, RNN, LSTMCell


class H0NoneCrashes(RNN):
    def zero_state(self, shapes, like):
        return (None,) * len(shapes)  # assumes callers always pass hx: None reaches the loop


class H0NoneRandom(GRU):
    def zero_state(self, shapes, like):
        return tuple(torch.randn(shape, dtype=like.dtype) for shape in shapes)


class H0Ignored(LSTM):
    def initial_state(self, hx, x, batched):
        return tuple(torch.zeros_like(s) for s in super().initial_state(hx, x, batched))


class HnSqueezed(RNN):
    def package(self, output, finals, batched):
        output, h_n = super().package(output, finals, batched)
        return output, h_n.squeeze(0)  # drops the layer dimension of a one-layer module


class HnDirectionMajor(GRU):
    def stack_finals(self, finals):
        # all forward layers first, then all reverse ones (torch.nn interleaves them per layer)
        d = self.num_directions
        return super().stack_finals([f for first in range(d) for f in finals[first::d]])


class HnIsCellState(LSTM):
    def package(self, output, finals, batched):
        output, (h_n, c_n) = super().package(output, finals, batched)
        return output, (c_n, h_n)


class BroadcastsH0(RNN):
    def check_state(self, state, shape):
        pass  # any state that broadcasts is accepted


class C0Ignored(LSTM):
    def initial_state(self, hx, x, batched):
        h0, c0 = super().initial_state(hx, x, batched)
        return h0, torch.zeros_like(c0)  # a given c0 is checked, then replaced by zeros


class CutsC0ToTheBatch(LSTM):
    def initial_state(self, hx, x, batched):
        if hx is not None and batched:
            h0, c0 = hx
            hx = (h0, c0[:, :x.shape[1]])  # more rows than the batch: the extra ones dropped
        return super().initial_state(hx, x, batched)


class CastsInput(LSTMCell):
    def to_steps(self, input):
        # an input of another dtype is cast to the parameters' instead of refused
        return super().to_steps(input.to(self.weight_ih.dtype))


class MutatesInput(GRU):
    def forward(self, input, hx=None):
        result = super().forward(input, hx)
        input.detach().zero_()  # "frees" the input after use: the caller's tensor is overwritten
        return result


class UnbatchedAsBatch(RNN):
    def add_batch(self, sequence):
        return sequence.unsqueeze(0)  # (L, I) taken as one step of L sequences



class LayerStateCarriedUp(GRU):
    def run_layers(self, x, states):
        if any(state.any() for state in states):
            return super().run_layers(x, states)
        # zeros (the state omitted): each layer above the first starts from the one below's end
        finals, below = [], x
        for layer in range(self.num_layers):
            inputs, outputs = self.layer_input(layer, x, below), []
            for direction in range(self.num_directions):
                start = (finals[(layer - 1) * self.num_directions + direction] if layer
                         else tuple(state[direction] for state in states))
                output, final = self.run_direction(inputs, start, layer, direction)
                outputs.append(output)
                finals.append(final)
            below = torch.cat(outputs, dim=-1)
        return self.final_output(below), finals


class BatchOfOneSqueezed(LSTMCell):
    def package(self, output, finals, batched):
        h, c = super().package(output, finals, batched)
        return h.squeeze(0), c.squeeze(0)  # a batch of one loses its batch axis
