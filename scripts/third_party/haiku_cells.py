"""dm-haiku's recurrent cores as torch.nn's RNN / LSTM / GRU and RNNCell / LSTMCell / GRUCell
(dm-haiku 0.0.17 on jax 0.10.2, CPU): haiku.VanillaRNN, haiku.LSTM and haiku.GRU inside
`hk.transform`, run over time by `hk.dynamic_unroll` (time-major; `reverse=True` for torch's
reverse direction, which scans backwards and keeps the outputs in time order). A cell kind is one
call of the core on a batch. The adapter owns torch.nn's parameters; each call hands haiku copies
of them (DLPack) in haiku's parameter tree and converts the results back, as `jax_cells.py` does.
JAX runs with 64-bit mode on (`jax_enable_x64`), so float64 is computed in float64; float16 /
bfloat16 reach haiku as they are.

What haiku computes (haiku/_src/recurrent.py) and how torch.nn's layout maps onto it:

- VanillaRNN: h' = relu(x @ w + b + h @ w_1 + b_1), two `hk.Linear`s, `vanilla_rnn/linear`
  (w (D, H), b) and `vanilla_rnn/linear_1` (w (H, H), b): weight_ih.T, bias_ih, weight_hh.T,
  bias_hh. The core has no nonlinearity option: it is ReLU only. The adapter hands it torch's
  nonlinearity='tanh' (torch.nn's default) as it is, so the rnn kinds compute relu whatever they
  are asked for; that is haiku's function, not hidden here.
- LSTM: one `hk.Linear` over [x, h], `lstm/linear` w (D + H, 4H), b (4H), gate blocks in the
  order i, g, f, o: w = [weight_ih | weight_hh] with its row blocks reordered from torch's
  i, f, g, o, transposed; b = bias_ih + bias_hh, reordered. The state is LSTMState(hidden, cell),
  torch's (h, c). haiku adds 1 to the forget gate's pre-activation in every forward step
  (`f = sigmoid(f + 1)`; its docstring says the 1 is added "after initialization", but the code
  adds it in forward): another function on the same parameters, left as haiku computes it.
- GRU: `gru` w_i (D, 3H), w_h (H, 3H), b (3H), gate blocks z, r, a, and
  h' = (1 - z) h + z a with a = tanh(x @ w_i_a + (r * h) @ w_h_a + b_a). Two differences from
  torch.nn's h' = (1 - z) n + z h, n = tanh(W_in x + b_in + r * (W_hn h + b_hn)):
  * z the other way round is a re-parametrisation the weights express exactly: sigmoid(-a) =
    1 - sigmoid(a), so haiku's z blocks (of w_i, w_h and b) are torch's z blocks negated. Mapped.
  * the reset gate applied before the recurrent matmul (Cho et al. 2014) is another function; no
    parameters express torch's r * (W_hn h + b_hn). Left as haiku computes it. haiku has one
    bias: b = bias_ih + bias_hh per gate (z negated), so b_hn sits outside the reset product
    too, where the Cho form puts it.

Biases: haiku's cores always have them (LSTM and GRU take no with_bias; VanillaRNN's input
Linear always has one), so bias=False holds them at zero.

Initial values are haiku's own (`transform.init`): hk.Linear's truncated normal with stddev
1/sqrt(fan_in) (LSTM: fan_in D + H), GRU's VarianceScaling() (truncated normal, fan_in),
biases zero; LSTM and GRU's single bias goes to bias_ih, bias_hh holds zeros. The JAX keys are
drawn from torch's generator, so torch.manual_seed fixes them.

Declared unsupported: backward (JAX computes outside torch's autograd; no bridge, as in
jax_cells.py), cuda (jax[cpu]), proj_size and dropout (no haiku core has them), packed (the
adapter takes no PackedSequence). num_layers and bidirectional are the adapter's stacking of
single-layer unrolls (TorchLayout), as in jax_cells.py.
"""
import jax

jax.config.update("jax_enable_x64", True)

import haiku as hk  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import torch  # noqa: E402
from torch import nn  # noqa: E402

from _torch_layout import TorchLayout, _check_arguments  # noqa: E402
from rnnbench.impls import Implementation  # noqa: E402

ROLES = ("weight_ih", "weight_hh", "bias_ih", "bias_hh")
CORES = {"rnn": hk.VanillaRNN, "lstm": hk.LSTM, "gru": hk.GRU}
LSTM_ORDER = [0, 2, 1, 3]  # torch's i, f, g, o <-> haiku's i, g, f, o (its own inverse)


def to_jax(tensor):
    return jnp.from_dlpack(tensor.detach().clone())


def to_torch(array):
    return torch.from_dlpack(array).clone()


def jax_dtype(dtype=None):
    return jnp.dtype(str(dtype or torch.get_default_dtype()).removeprefix("torch."))


def jax_key():
    return jax.random.key(int(torch.randint(2 ** 31 - 1, ()).item()))


def blocks(tensor, order):
    """tensor's gate blocks along dim 0, in `order`, concatenated."""
    parts = tensor.chunk(len(order))
    return torch.cat([parts[k] for k in order])


def _negate_first(tensor):  # haiku's GRU blocks z, r, a: its z is torch's z negated
    z, rest = tensor.chunk(3)[0], tensor.chunk(3)[1:]
    return torch.cat([-z, *rest])


class Haiku:
    """torch.nn's four tensors <-> haiku's parameter tree, and one step / one unroll."""

    @staticmethod
    def state_in(family, state):  # torch's (h,) / (h, c) -> haiku's h / LSTMState(h, c)
        given = tuple(map(to_jax, state))
        return hk.LSTMState(*given) if family == "lstm" else given[0]

    @staticmethod
    def state_out(family, state):
        return tuple(map(to_torch, (state.hidden, state.cell) if family == "lstm" else (state,)))

    @staticmethod
    def transformed(family, hidden_size, unroll, reverse=False):
        def f(x, state):
            core = CORES[family](hidden_size)
            if unroll:
                return hk.dynamic_unroll(core, x, state, time_major=True, reverse=reverse)
            return core(x, state)
        return hk.without_apply_rng(hk.transform(f))

    @classmethod
    def initial(cls, family, input_size, hidden_size, dtype=None):
        """haiku's initial values in torch's layout."""
        dt = jax_dtype(dtype)
        state = tuple(jnp.zeros((1, hidden_size), dt) for _ in range(2 if family == "lstm" else 1))
        p = cls.transformed(family, hidden_size, unroll=False).init(
            jax_key(), jnp.zeros((1, input_size), dt),
            hk.LSTMState(*state) if family == "lstm" else state[0])
        p = jax.tree_util.tree_map(to_torch, {k: dict(v) for k, v in p.items()})
        if family == "rnn":
            x, h = p["vanilla_rnn/linear"], p["vanilla_rnn/linear_1"]
            return {"weight_ih": x["w"].T, "weight_hh": h["w"].T,
                    "bias_ih": x["b"], "bias_hh": h["b"]}
        if family == "lstm":
            w = blocks(p["lstm/linear"]["w"].T, LSTM_ORDER)
            b = blocks(p["lstm/linear"]["b"], LSTM_ORDER)
        else:
            g = p["gru"]
            w = torch.cat([g["w_i"], g["w_h"]]).T
            order = [1, 0, 2]  # haiku's z, r, a -> torch's r, z, n
            w, b = blocks(_negate_first(w), order), blocks(_negate_first(g["b"]), order)
        return {"weight_ih": w[:, :input_size], "weight_hh": w[:, input_size:],
                "bias_ih": b, "bias_hh": torch.zeros_like(b)}

    @staticmethod
    def params(family, w):
        """haiku's parameter tree from torch's tensors (absent biases as zeros)."""
        w_ih, w_hh = w["weight_ih"], w["weight_hh"]
        zeros = w_ih.new_zeros(w_ih.shape[0])
        b_ih, b_hh = w.get("bias_ih", zeros), w.get("bias_hh", zeros)
        if family == "rnn":
            return {"vanilla_rnn/linear": {"w": to_jax(w_ih.T), "b": to_jax(b_ih)},
                    "vanilla_rnn/linear_1": {"w": to_jax(w_hh.T), "b": to_jax(b_hh)}}
        if family == "lstm":
            return {"lstm/linear": {"w": to_jax(blocks(torch.cat([w_ih, w_hh], 1), LSTM_ORDER).T),
                                    "b": to_jax(blocks(b_ih + b_hh, LSTM_ORDER))}}
        order = [1, 0, 2]  # torch's r, z, n -> haiku's z, r, a
        return {"gru": {"w_i": to_jax(_negate_first(blocks(w_ih, order)).T),
                        "w_h": to_jax(_negate_first(blocks(w_hh, order)).T),
                        "b": to_jax(_negate_first(blocks(b_ih + b_hh, order)))}}

    @classmethod
    def step(cls, family, w, x, state):
        fn = cls.transformed(family, w["weight_hh"].shape[1], unroll=False)
        _, new = fn.apply(cls.params(family, w), to_jax(x), cls.state_in(family, state))
        return cls.state_out(family, new)

    @classmethod
    def sequence(cls, family, w, x, state, reverse):
        fn = cls.transformed(family, w["weight_hh"].shape[1], unroll=True, reverse=reverse)
        ys, final = fn.apply(cls.params(family, w), to_jax(x), cls.state_in(family, state))
        return to_torch(ys), cls.state_out(family, final)


class HaikuSequence(TorchLayout):
    """torch.nn's RNN / LSTM / GRU: one haiku unroll per layer and direction."""

    def __init__(self, input_size, hidden_size, num_layers=1, nonlinearity="tanh", bias=True,
                 batch_first=False, dropout=0.0, bidirectional=False, proj_size=0, device=None,
                 dtype=None):
        _check_arguments(input_size, hidden_size, num_layers, nonlinearity, dropout, proj_size)
        if proj_size or (dropout and num_layers > 1):
            raise NotImplementedError("haiku's cores have no projection and no dropout: "
                                      "proj_size and dropout between layers are not supported")
        self._dtype = dtype
        super().__init__(input_size, hidden_size, num_layers, nonlinearity, bias, batch_first,
                         dropout, bidirectional, proj_size, device, dtype)

    def initial(self, layer, direction, shapes):
        values = Haiku.initial(self.family, shapes["weight_ih"][1], self.hidden_size, self._dtype)
        return {role: values[role] for role in shapes}

    def run(self, x, state, layer):
        outputs, finals = [], []
        for direction in range(self.num_directions):
            out, final = Haiku.sequence(self.family, self.weights(layer, direction), x,
                                        tuple(s[direction] for s in state), reverse=bool(direction))
            outputs.append(out)
            finals.append(final)
        return torch.cat(outputs, -1), tuple(torch.stack(parts) for parts in zip(*finals))


class HaikuCell(nn.Module):
    """torch.nn's RNNCell / LSTMCell / GRUCell: one call of the haiku core."""

    family = "rnn"

    def __init__(self, input_size, hidden_size, bias=True, nonlinearity="tanh", device=None,
                 dtype=None):
        super().__init__()
        _check_arguments(input_size, hidden_size, 1, nonlinearity, 0.0, 0)
        self.input_size, self.hidden_size, self.bias = input_size, hidden_size, bias
        self.nonlinearity = nonlinearity
        initial = Haiku.initial(self.family, input_size, hidden_size, dtype)
        for role in ROLES if bias else ROLES[:2]:
            self.register_parameter(role, nn.Parameter(initial[role].to(
                device=device, dtype=dtype or torch.get_default_dtype())))

    def forward(self, input, hx=None):
        if input.dim() not in (1, 2):
            raise ValueError(f"expected 1-D (unbatched) or 2-D input, got {input.dim()}-D")
        batched = input.dim() == 2
        x = input if batched else input.unsqueeze(0)
        if hx is None:
            count = 2 if self.family == "lstm" else 1
            state = tuple(x.new_zeros(x.shape[0], self.hidden_size) for _ in range(count))
        else:
            state = tuple(hx) if self.family == "lstm" else (hx,)
            if any(s.dim() != input.dim() for s in state):
                raise RuntimeError(f"expected a {input.dim()}-D state, got "
                                   f"{[tuple(s.shape) for s in state]}")
            state = state if batched else tuple(s.unsqueeze(0) for s in state)
        w = {role: getattr(self, role) for role in ROLES if hasattr(self, role)}
        new = Haiku.step(self.family, w, x, state)
        new = new if batched else tuple(s.squeeze(0) for s in new)
        return new if self.family == "lstm" else new[0]


class RNN(HaikuSequence):
    family = "rnn"


class LSTM(HaikuSequence):
    family = "lstm"

    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False,
                 dropout=0.0, bidirectional=False, proj_size=0, device=None, dtype=None):
        super().__init__(input_size, hidden_size, num_layers, "tanh", bias, batch_first, dropout,
                         bidirectional, proj_size, device, dtype)


class GRU(HaikuSequence):
    family = "gru"

    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False,
                 dropout=0.0, bidirectional=False, device=None, dtype=None):
        super().__init__(input_size, hidden_size, num_layers, "tanh", bias, batch_first, dropout,
                         bidirectional, 0, device, dtype)


class RNNCell(HaikuCell):
    family = "rnn"


class LSTMCell(HaikuCell):
    family = "lstm"

    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, "tanh", device, dtype)


class GRUCell(HaikuCell):
    family = "gru"

    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, "tanh", device, dtype)


IMPLEMENTATION = Implementation(
    name="dm-haiku",
    kinds={"rnn": RNN, "lstm": LSTM, "gru": GRU,
           "rnn_cell": RNNCell, "lstm_cell": LSTMCell, "gru_cell": GRUCell},
    unsupported=frozenset({"backward", "cuda", "proj_size", "dropout", "packed"}),
    description="haiku.VanillaRNN / LSTM / GRU, hk.dynamic_unroll over time (CPU)")
