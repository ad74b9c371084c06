"""The float64 reference for variable-length (packed) sequences against torch.nn on
PackedSequence input: outputs, final states and every gradient."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from rnnbench.crosscheck import MAX_ABS_ERROR
from rnnbench.reference import Config, backward_packed, forward_packed, init_spec, param_shapes
from rnnbench.reference.numerics import output_names, state_names

CONFIGS = [
    Config("rnn", 3, 5),
    Config("rnn", 3, 5, num_layers=2, bidirectional=True, nonlinearity="relu"),
    Config("gru", 4, 7, num_layers=2, bidirectional=True),
    Config("gru", 3, 5, batch_first=True),
    Config("lstm", 3, 7, num_layers=2, bidirectional=True, proj_size=4),
    Config("lstm", 3, 5, bias=False),
]
LENGTHS = [(5, 1, 3, 5), (1, 4, 2, 3)]  # unsorted, with 1; the second's longest is not first


def _torch_module(cfg: Config, params: dict) -> torch.nn.Module:
    module = getattr(torch.nn, cfg.kind.upper())(**cfg.constructor_kwargs(), dtype=torch.float64)
    module.load_state_dict({k: torch.tensor(v) for k, v in params.items()})
    return module


def _inputs(cfg: Config, lengths, rng):
    steps, batch = max(lengths), len(lengths)
    params = {name: rng.uniform(init_spec(cfg)[name].low, init_spec(cfg)[name].high, shape)
              for name, shape in param_shapes(cfg).items()}
    x = rng.normal(0.5, 1.0, (steps, batch, cfg.input_size))
    widths = {"h0": cfg.output_size, "c0": cfg.hidden_size}
    hx = {name: 0.5 * rng.normal(size=(cfg.num_layers * cfg.num_directions, batch, widths[name]))
          for name in state_names(cfg)}
    return params, x, hx


def _nested(cfg, hx):
    values = tuple(hx[name] for name in state_names(cfg))
    return values if cfg.family == "lstm" else values[0]


def _torch_run(cfg, params, x, lengths, hx):
    """torch.nn on the packed input: padded output, final states and every gradient."""
    module = _torch_module(cfg, params)
    xt = torch.tensor(x, requires_grad=True)
    packed = pack_padded_sequence(xt, torch.tensor(lengths), enforce_sorted=False)
    states = None if hx is None else {k: torch.tensor(v, requires_grad=True) for k, v in hx.items()}
    out, final = module(packed, None if states is None else _nested(cfg, states))
    padded, _ = pad_packed_sequence(out, total_length=x.shape[0])
    finals = final if cfg.family == "lstm" else (final,)
    results = dict(zip(output_names(cfg), (padded, *finals)))
    rng = np.random.default_rng(1)
    grad_out = {name: rng.normal(size=tuple(t.shape)) for name, t in results.items()}
    loss = sum((t * torch.tensor(grad_out[name])).sum() for name, t in results.items())
    wrt = {"input": xt, **(states or {}), **dict(module.named_parameters())}
    grads = dict(zip(wrt, torch.autograd.grad(loss, list(wrt.values()))))
    return ({k: v.detach().numpy() for k, v in results.items()},
            {k: v.numpy() for k, v in grads.items()}, grad_out)


@pytest.mark.parametrize("lengths", LENGTHS, ids=str)
@pytest.mark.parametrize("cfg", CONFIGS, ids=lambda c: c.describe())
@pytest.mark.parametrize("h0", [True, False], ids=["h0", "no-h0"])
def test_packed_reference_agrees_with_torch(cfg, lengths, h0):
    params, x, hx = _inputs(cfg, lengths, np.random.default_rng(0))
    hx = hx if h0 else None
    observed, grads, grad_out = _torch_run(cfg, params, x, lengths, hx)
    expected = forward_packed(cfg, params, x, lengths, None if hx is None else _nested(cfg, hx))
    assert set(expected) == set(observed)
    for name in observed:
        np.testing.assert_allclose(expected[name], observed[name], rtol=0, atol=MAX_ABS_ERROR,
                                   err_msg=name)
    expected_grads = backward_packed(cfg, params, x, lengths,
                                     None if hx is None else _nested(cfg, hx), grad_out)
    for name, value in grads.items():
        np.testing.assert_allclose(expected_grads[name], value, rtol=0, atol=MAX_ABS_ERROR,
                                   err_msg=name)


def test_short_sequences_stop_at_their_own_end():
    """The spec's definition, independent of torch: a sequence's results do not depend on the
    steps beyond its length, and its outputs there are zero."""
    cfg = Config("gru", 3, 5, bidirectional=True)
    params, x, _ = _inputs(cfg, (4, 2), np.random.default_rng(2))
    changed = x.copy()
    changed[2:, 1] += 10.0  # the second sequence's padding
    a = forward_packed(cfg, params, x, (4, 2))
    b = forward_packed(cfg, params, changed, (4, 2))
    for name in a:
        np.testing.assert_array_equal(a[name], b[name])
    assert not a["output"][2:, 1].any()


@pytest.mark.parametrize("lengths, message", [((3, 0), "between 1"), ((3,), "one per sequence"),
                                              ((5, 2), "between 1")])
def test_packed_reference_rejects_wrong_lengths(lengths, message):
    cfg = Config("rnn", 3, 5)
    params, x, _ = _inputs(cfg, (3, 2), np.random.default_rng(0))
    with pytest.raises(ValueError, match=message):
        forward_packed(cfg, params, x, lengths)
