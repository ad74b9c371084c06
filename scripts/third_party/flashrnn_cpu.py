"""FlashRNN's two CPU backends, `vanilla` (LSTM, GRU) and `vanilla_fwbw` (LSTM only), as
torch.nn's LSTM and GRU: each layer one call of the functional
`flashrnn(Wx, R, b, states, function, backend, dtype)`.

FlashRNN leaves the input projection to the caller (Wx = x W_ih^T, computed here) and takes one
head of size hidden. Layouts: Wx (batch, steps, gates, heads, hidden); R (gates, heads, hidden,
previous hidden) = torch's weight_hh per gate; states (states, batch, 1, heads, hidden). LSTM gates
i, f, z, o (torch's i, f, g, o) with one bias (torch's two summed). GRU: Wx gates r, z, n; R
gates n, r, z; four biases (b_hn, b_ir + b_hr, b_iz + b_hz, b_in), torch's GRU. FlashRNN has no
init of its own (torch.nn's is used), one layer, one direction, and no dropout.
"""
import torch
from flashrnn import flashrnn

from _torch_layout import TorchLayout
from rnnbench.impls import Implementation


class FlashLayer(TorchLayout):
    backend = "vanilla"

    def run(self, x, state, layer):
        w = self.weights(layer, 0)
        hidden, gates = self.hidden_size, 4 if self.family == "lstm" else 3
        zeros = w["weight_ih"].new_zeros(gates * hidden)
        b_ih, b_hh = w.get("bias_ih", zeros).chunk(gates), w.get("bias_hh", zeros).chunk(gates)
        wx = (x @ w["weight_ih"].T).unflatten(-1, (gates, 1, hidden)).transpose(0, 1)
        r_blocks = w["weight_hh"].unflatten(0, (gates, hidden))
        if self.family == "lstm":
            r, b = r_blocks, torch.stack([i + h for i, h in zip(b_ih, b_hh)])
        else:
            r = r_blocks[[2, 0, 1]]
            b = torch.stack([b_hh[2], b_ih[0] + b_hh[0], b_ih[1] + b_hh[1], b_ih[2]])
        # (states, batch, steps = 1, heads = 1, hidden), from torch's (1, batch, hidden) each
        states = torch.stack([s.squeeze(0) for s in state])[:, :, None, None]
        h, last = flashrnn(wx, r.unsqueeze(1), b.unsqueeze(1), states=states, function=self.family,
                           backend=self.backend, dtype=str(x.dtype).removeprefix("torch."))
        output = h[0, :, :, 0].transpose(0, 1)  # (states, batch, steps, heads, hidden) -> h
        finals = tuple(last[s, :, -1, 0].unsqueeze(0) for s in range(last.shape[0]))
        return output, finals


class LSTM(FlashLayer):
    family = "lstm"


class GRU(FlashLayer):
    family = "gru"


class LSTMFwbw(LSTM):
    backend = "vanilla_fwbw"


# FlashRNN takes dense (batch, time, ...) tensors only: no PackedSequence.
UNSUPPORTED = frozenset({"num_layers", "bidirectional", "proj_size", "dropout", "packed"})
VANILLA = Implementation(name="flashrnn-vanilla", kinds={"lstm": LSTM, "gru": GRU},
                         unsupported=UNSUPPORTED, description="flashrnn(..., backend='vanilla')")
# vanilla_fwbw implements the LSTM only ("Function gru not implemented for vanilla_fwbw
# backend"), and not in float64 (KeyError: 'float64').
VANILLA_FWBW = Implementation(name="flashrnn-vanilla-fwbw", kinds={"lstm": LSTMFwbw},
                              unsupported=UNSUPPORTED | {"float64"},
                              description="flashrnn(..., backend='vanilla_fwbw')")
