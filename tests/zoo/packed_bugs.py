"""Planted bugs in variable-length (PackedSequence) input: torch.nn's modules on plain input,
with the packed path done the classic wrong ways. Each returns a PackedSequence laid out like
its input, so only the numbers are wrong."""
import torch
from torch import nn
from torch.nn.utils.rnn import PackedSequence, pad_packed_sequence


def repack(padded, like):
    """A padded (T, N, .) output, caller's batch order, packed exactly as `like` is."""
    order = like.sorted_indices if like.sorted_indices is not None else torch.arange(padded.shape[1])
    rows = [padded[t, order[:n]] for t, n in enumerate(like.batch_sizes.tolist())]
    return PackedSequence(torch.cat(rows), like.batch_sizes, like.sorted_indices, like.unsorted_indices)


def run_padded(module, cls, packed, hx):
    """pad_packed_sequence, then the module over the whole padded tensor (the padding included)."""
    padded, lengths = pad_packed_sequence(packed)  # time-major, zeros beyond each length
    x = padded.transpose(0, 1) if module.batch_first else padded
    output, state = cls.forward(module, x, hx)
    return (output.transpose(0, 1) if module.batch_first else output), state, lengths


class PackedPaddingRead(nn.GRU):
    """Unpacks, runs over the padded tensor, packs the output back: h_n after the padding."""

    def forward(self, input, hx=None):
        if not isinstance(input, PackedSequence):
            return super().forward(input, hx)
        output, h_n, _ = run_padded(self, nn.GRU, input, hx)
        return repack(output, input), h_n


class PackedHnPaddedEnd(nn.RNN):
    """Right outputs, but the top layer's h_n read off the padded output at its last step."""

    def forward(self, input, hx=None):
        output, h_n = super().forward(input, hx)
        if isinstance(input, PackedSequence):
            padded, _ = pad_packed_sequence(output)
            h_n = h_n.clone()
            top = (self.num_layers - 1) * (2 if self.bidirectional else 1)
            h_n[top] = padded[-1, :, :self.hidden_size]  # output[-1]: zeros for short sequences
        return output, h_n


class PackedReverseFromPadding(nn.LSTM):
    """The forward direction masked right; the reverse direction starts at the padded end, so
    it reads the padding (zeros) before each shorter sequence's own steps."""

    def forward(self, input, hx=None):
        output, (h_n, c_n) = super().forward(input, hx)
        if not (isinstance(input, PackedSequence) and self.bidirectional):
            return output, (h_n, c_n)
        padded_out, (h_pad, c_pad), lengths = run_padded(self, nn.LSTM, input, hx)
        right, _ = pad_packed_sequence(output)
        width = right.shape[-1] // 2
        mixed = torch.cat([right[..., :width], padded_out[..., width:]], dim=-1)
        reverse = torch.arange(h_n.shape[0]) % 2 == 1
        h_n = torch.where(reverse[:, None, None], h_pad, h_n)
        c_n = torch.where(reverse[:, None, None], c_pad, c_n)
        return repack(mixed, input), (h_n, c_n)
