"""Expected tensor shapes for a given input, batched or unbatched, as torch.nn produces them.

Sequence kinds take input (L, N, I), or (N, L, I) with batch_first, or unbatched (L, I); the
initial and final states are (num_layers * D, N, H_out), unbatched (num_layers * D, H_out), with
layer-major, direction-minor order. LSTM's cell state uses hidden_size even when projected.
Cells take (N, I) or unbatched (I,).
"""
from __future__ import annotations

from rnnbench.reference.config import Config


def io_shapes(cfg: Config, batch: int | None, steps: int = 1) -> dict[str, tuple[int, ...]]:
    """Shapes of input, states and outputs; `batch=None` means unbatched input.

    Keys: "input", "h0" and "h_n" (for cells "h0" and "h"), plus "c0"/"c_n" ("c" for the LSTM
    cell) for LSTM kinds, and "output" for sequence kinds.
    """
    lead = () if batch is None else (batch,)
    if cfg.is_cell:
        shapes = {"input": lead + (cfg.input_size,), "h0": lead + (cfg.hidden_size,),
                  "h": lead + (cfg.hidden_size,)}
        if cfg.family == "lstm":
            shapes.update(c0=shapes["h0"], c=shapes["h0"])
        return shapes
    if batch is None:
        seq = (steps, cfg.input_size)
        out = (steps, cfg.num_directions * cfg.output_size)
    elif cfg.batch_first:
        seq = (batch, steps, cfg.input_size)
        out = (batch, steps, cfg.num_directions * cfg.output_size)
    else:
        seq = (steps, batch, cfg.input_size)
        out = (steps, batch, cfg.num_directions * cfg.output_size)
    layers = (cfg.num_layers * cfg.num_directions,)
    shapes = {"input": seq, "output": out, "h0": layers + lead + (cfg.output_size,),
              "h_n": layers + lead + (cfg.output_size,)}
    if cfg.family == "lstm":
        shapes.update(c0=layers + lead + (cfg.hidden_size,), c_n=layers + lead + (cfg.hidden_size,))
    return shapes
