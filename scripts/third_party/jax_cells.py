"""JAX recurrent cells as torch.nn's RNN / LSTM / GRU and RNNCell / LSTMCell / GRUCell:
equinox (`IMPLEMENTATION`, alias `EQUINOX`: equinox.nn.LSTMCell / GRUCell) and flax
(`FLAX`: flax.linen.SimpleCell / LSTMCell / GRUCell). The adapter owns torch.nn's parameters;
each call hands JAX copies of them (DLPack) in the library's layout and converts the results
back. JAX runs on CPU with 64-bit mode switched on at import (`jax_enable_x64`), so float64 is
computed in float64; float16 / bfloat16 are passed to JAX as they are.

A sequence is the library's cell over time: equinox has no sequence layer, so its cell is
vmapped over the batch and scanned (`jax.lax.scan`, as equinox's docs show); flax's own
`flax.linen.RNN` (time-major, `reverse=True, keep_order=True` for torch's reverse direction)
runs the flax cell. The cell kinds are one call of the cell (equinox: vmapped over the batch).

Layouts:
- equinox: weight_ih / weight_hh are torch's (gates i, f, g, o and r, z, n, rows gate-major).
  LSTM has one bias, torch's two summed. GRU has `bias` (3H) added to the input projection and
  `bias_n` (H) added inside r * (W_hn h + .): bias = b_ih + [b_hr, b_hz, 0], bias_n = b_hn.
  Initial values are equinox's (every tensor U(-1/sqrt(H), 1/sqrt(H)); the library's bias goes
  to bias_ih, and bias_hh holds zeros except the GRU's b_hn = bias_n). bias=False is
  equinox's use_bias=False.
- flax.linen: one Dense per gate, kernel (in, H) = torch's block transposed. SimpleCell and
  GRUCell put the bias on the input Dense (GRU: plus `hn`'s bias = b_hn), LSTMCell on the
  recurrent one; torch's two are summed there. LSTM carry is (c, h). Initial values are
  flax's (lecun_normal / orthogonal / zeros). flax cells always have biases: bias=False holds
  them at zero. nonlinearity='relu' is SimpleCell's activation_fn=jax.nn.relu.

The JAX keys of the libraries' inits are drawn from torch's generator, so torch.manual_seed
fixes them. Declared unsupported: backward (JAX computes outside torch's autograd; no bridge),
cuda (jax[cpu]), proj_size, dropout (neither library's cell has one), packed (the adapter takes
no PackedSequence), and for equinox bidirectional (no reverse runner in the library).
"""
import jax

jax.config.update("jax_enable_x64", True)

import equinox as eqx  # noqa: E402
import flax.linen as linen  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import torch  # noqa: E402
from torch import nn  # noqa: E402

from _torch_layout import TorchLayout, _check_arguments  # noqa: E402
from rnnbench.impls import Implementation  # noqa: E402

ROLES = ("weight_ih", "weight_hh", "bias_ih", "bias_hh")


def to_jax(tensor):
    return jnp.from_dlpack(tensor.detach().clone())


def to_torch(array):
    return torch.from_dlpack(array).clone()


def jax_dtype(dtype=None):
    return jnp.dtype(str(dtype or torch.get_default_dtype()).removeprefix("torch."))


def jax_key():
    return jax.random.key(int(torch.randint(2 ** 31 - 1, ()).item()))


def torch_roles(family, w):
    """Torch's four tensors, biases as zeros where the module has none."""
    zeros = w["weight_ih"].new_zeros(w["weight_ih"].shape[0])
    return w["weight_ih"], w["weight_hh"], w.get("bias_ih", zeros), w.get("bias_hh", zeros)


class Equinox:
    families = ("lstm", "gru")
    cells = {"lstm": eqx.nn.LSTMCell, "gru": eqx.nn.GRUCell}

    @classmethod
    def initial(cls, family, input_size, hidden_size, bias, nonlinearity, dtype=None):
        cell = cls.cells[family](input_size, hidden_size, use_bias=bias, dtype=jax_dtype(dtype),
                                 key=jax_key())
        values = {"weight_ih": cell.weight_ih, "weight_hh": cell.weight_hh}
        if bias:
            hidden = jnp.zeros_like(cell.bias)
            if family == "gru":
                hidden = hidden.at[2 * hidden_size:].set(cell.bias_n)
            values.update(bias_ih=cell.bias, bias_hh=hidden)
        return {role: to_torch(value) for role, value in values.items()}

    @classmethod
    def cell(cls, family, w, bias):
        w_ih, w_hh, b_ih, b_hh = torch_roles(family, w)
        hidden_size = w_hh.shape[1]
        cell = cls.cells[family](w_ih.shape[1], hidden_size, use_bias=bias,
                                 dtype=jax_dtype(w_ih.dtype), key=jax.random.key(0))
        fields = [lambda c: c.weight_ih, lambda c: c.weight_hh]
        values = [to_jax(w_ih), to_jax(w_hh)]
        if bias:
            if family == "lstm":
                fields.append(lambda c: c.bias)
                values.append(to_jax(b_ih + b_hh))
            else:
                rz = torch.cat([b_hh[:2 * hidden_size], torch.zeros_like(b_hh[2 * hidden_size:])])
                fields += [lambda c: c.bias, lambda c: c.bias_n]
                values += [to_jax(b_ih + rz), to_jax(b_hh[2 * hidden_size:])]
        return eqx.tree_at(lambda c: [f(c) for f in fields], cell, values)

    @classmethod
    def step(cls, family, w, bias, nonlinearity, x, state):
        """One step over a batch: state is torch's ((B, H),) or (h, c)."""
        cell = jax.vmap(cls.cell(family, w, bias))
        given = tuple(map(to_jax, state))
        new = cell(to_jax(x), given if family == "lstm" else given[0])
        return tuple(map(to_torch, new if family == "lstm" else (new,)))

    @classmethod
    def sequence(cls, family, w, bias, nonlinearity, x, state, reverse):
        assert not reverse, "equinox: no reverse direction (bidirectional is declared unsupported)"
        cell = jax.vmap(cls.cell(family, w, bias))

        def body(carry, xt):
            new = cell(xt, carry)
            return new, (new[0] if family == "lstm" else new)

        given = tuple(map(to_jax, state))
        final, ys = jax.lax.scan(body, given if family == "lstm" else given[0], to_jax(x))
        return to_torch(ys), tuple(map(to_torch, final if family == "lstm" else (final,)))


class Flax:
    families = ("rnn", "lstm", "gru")
    cells = {"rnn": linen.SimpleCell, "lstm": linen.LSTMCell, "gru": linen.GRUCell}
    names = {"rnn": ("",), "lstm": "ifgo", "gru": "rzn"}

    @classmethod
    def module(cls, family, hidden_size, nonlinearity, dtype):
        options = {"activation_fn": jax.nn.relu} if nonlinearity == "relu" else {}
        return cls.cells[family](features=hidden_size, param_dtype=jax_dtype(dtype), **options)

    @classmethod
    def initial(cls, family, input_size, hidden_size, bias, nonlinearity, dtype=None):
        cell = cls.module(family, hidden_size, nonlinearity, dtype)
        dt = jax_dtype(dtype)
        carry = cell.initialize_carry(jax.random.key(0), (1, input_size))
        p = cell.init(jax_key(), carry, jnp.zeros((1, input_size), dt))["params"]
        p = jax.tree_util.tree_map(to_torch, dict(p))
        gates = cls.names[family]
        values = {"weight_ih": torch.cat([p["i" + g]["kernel"].T for g in gates]),
                  "weight_hh": torch.cat([p["h" + g]["kernel"].T for g in gates])}
        if bias:
            zeros = torch.zeros(hidden_size, dtype=values["weight_ih"].dtype)
            if family == "lstm":
                values.update(bias_ih=torch.cat([zeros] * 4),
                              bias_hh=torch.cat([p["h" + g]["bias"] for g in gates]))
            else:
                values["bias_ih"] = torch.cat([p["i" + g]["bias"] for g in gates])
                values["bias_hh"] = (zeros if family == "rnn"
                                     else torch.cat([zeros, zeros, p["hn"]["bias"]]))
        return values

    @classmethod
    def params(cls, family, w):
        gates = cls.names[family]
        blocks = [t.chunk(len(gates)) for t in torch_roles(family, w)]
        params = {}
        for k, g in enumerate(gates):
            w_ih, w_hh, b_ih, b_hh = (b[k] for b in blocks)
            params["i" + g] = {"kernel": to_jax(w_ih.T)}
            params["h" + g] = {"kernel": to_jax(w_hh.T)}
            if family == "lstm":
                params["h" + g]["bias"] = to_jax(b_ih + b_hh)
            elif g == "n":
                params["i" + g]["bias"] = to_jax(b_ih)
                params["h" + g]["bias"] = to_jax(b_hh)
            else:
                params["i" + g]["bias"] = to_jax(b_ih + b_hh)
        return params

    @staticmethod
    def carry(family, state):  # torch's (h,) / (h, c) <-> flax's h / (c, h)
        given = tuple(map(to_jax, state))
        return given[::-1] if family == "lstm" else given[0]

    @staticmethod
    def state(family, carry):
        return tuple(map(to_torch, carry[::-1] if family == "lstm" else (carry,)))

    @classmethod
    def step(cls, family, w, bias, nonlinearity, x, state):
        cell = cls.module(family, w["weight_hh"].shape[1], nonlinearity, w["weight_ih"].dtype)
        carry, _ = cell.apply({"params": cls.params(family, w)}, cls.carry(family, state), to_jax(x))
        return cls.state(family, carry)

    @classmethod
    def sequence(cls, family, w, bias, nonlinearity, x, state, reverse):
        cell = cls.module(family, w["weight_hh"].shape[1], nonlinearity, w["weight_ih"].dtype)
        runner = linen.RNN(cell, time_major=True, return_carry=True, reverse=reverse, keep_order=True)
        carry, ys = runner.apply({"params": {"cell": cls.params(family, w)}}, to_jax(x),
                                 initial_carry=cls.carry(family, state))
        return to_torch(ys), cls.state(family, carry)


class Sequence(TorchLayout):
    library = Equinox
    declared = frozenset()  # the features the Implementation declares unsupported

    def __init__(self, input_size, hidden_size, num_layers=1, nonlinearity="tanh", bias=True,
                 batch_first=False, dropout=0.0, bidirectional=False, proj_size=0, device=None,
                 dtype=None):
        if proj_size or (dropout and num_layers > 1):
            raise NotImplementedError("proj_size and dropout between layers are not supported")
        if bidirectional and "bidirectional" in self.declared:
            raise NotImplementedError("bidirectional is not supported")
        if nonlinearity == "relu" and "relu" in self.declared:
            raise NotImplementedError("nonlinearity='relu' is not supported")
        self._dtype = dtype
        super().__init__(input_size, hidden_size, num_layers, nonlinearity, bias, batch_first,
                         dropout, bidirectional, proj_size, device, dtype)

    def initial(self, layer, direction, shapes):
        below = shapes["weight_ih"][1]
        return self.library.initial(self.family, below, self.hidden_size, self.bias,
                                    self.nonlinearity, self._dtype)

    def run(self, x, state, layer):
        outputs, finals = [], []
        for direction in range(self.num_directions):
            out, final = self.library.sequence(
                self.family, self.weights(layer, direction), self.bias, self.nonlinearity, x,
                tuple(s[direction] for s in state), reverse=bool(direction))
            outputs.append(out)
            finals.append(final)
        return torch.cat(outputs, -1), tuple(torch.stack(parts) for parts in zip(*finals))


class Cell(nn.Module):
    """torch.nn's RNNCell / LSTMCell / GRUCell over the library's `step`."""

    library = Equinox
    family = "rnn"

    def __init__(self, input_size, hidden_size, bias=True, nonlinearity="tanh", device=None,
                 dtype=None):
        super().__init__()
        _check_arguments(input_size, hidden_size, 1, nonlinearity, 0.0, 0)
        self.input_size, self.hidden_size, self.bias = input_size, hidden_size, bias
        self.nonlinearity = nonlinearity
        initial = self.library.initial(self.family, input_size, hidden_size, bias, nonlinearity, dtype)
        for role in ROLES:
            if role in initial:
                self.register_parameter(role, nn.Parameter(initial[role].to(
                    device=device, dtype=dtype or torch.get_default_dtype())))

    def forward(self, input, hx=None):
        if input.dim() not in (1, 2):
            raise ValueError(f"expected 1-D (unbatched) or 2-D input, got {input.dim()}-D")
        batched = input.dim() == 2
        x = input if batched else input.unsqueeze(0)
        count = 2 if self.family == "lstm" else 1
        if hx is None:
            state = tuple(x.new_zeros(x.shape[0], self.hidden_size) for _ in range(count))
        else:
            state = tuple(hx) if self.family == "lstm" else (hx,)
            if any(s.dim() != input.dim() for s in state):
                raise RuntimeError(f"expected a {input.dim()}-D state, got "
                                   f"{[tuple(s.shape) for s in state]}")
            state = state if batched else tuple(s.unsqueeze(0) for s in state)
        w = {role: getattr(self, role) for role in ROLES if hasattr(self, role)}
        new = self.library.step(self.family, w, self.bias, self.nonlinearity, x, state)
        new = new if batched else tuple(s.squeeze(0) for s in new)
        return new if self.family == "lstm" else new[0]


def _lstm_init(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False,
               dropout=0.0, bidirectional=False, proj_size=0, device=None, dtype=None):
    Sequence.__init__(self, input_size, hidden_size, num_layers, "tanh", bias, batch_first,
                      dropout, bidirectional, proj_size, device, dtype)


def _gru_init(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False,
              dropout=0.0, bidirectional=False, device=None, dtype=None):
    Sequence.__init__(self, input_size, hidden_size, num_layers, "tanh", bias, batch_first,
                      dropout, bidirectional, 0, device, dtype)


def _gated_cell_init(self, input_size, hidden_size, bias=True, device=None, dtype=None):
    Cell.__init__(self, input_size, hidden_size, bias, "tanh", device, dtype)


def _kinds(library, declared):
    """The library's kinds: torch.nn's constructors (LSTM and GRU take no nonlinearity)."""
    inits = {"rnn": {}, "lstm": {"__init__": _lstm_init}, "gru": {"__init__": _gru_init}}
    kinds = {}
    for family in library.families:
        body = {"family": family, "library": library, "declared": declared, "__module__": __name__}
        cell_init = {} if family == "rnn" else {"__init__": _gated_cell_init}
        for kind, base, extra in ((family, Sequence, inits[family]),
                                  (family + "_cell", Cell, cell_init)):
            name = library.__name__ + family.upper() + ("Cell" if base is Cell else "")
            kinds[kind] = globals()[name] = type(name, (base,), {**body, **extra})  # picklable
    return kinds


_EQX_UNSUPPORTED = frozenset({"backward", "cuda", "proj_size", "dropout", "packed", "bidirectional"})
EQUINOX = IMPLEMENTATION = Implementation(
    name="equinox", kinds=_kinds(Equinox, _EQX_UNSUPPORTED), unsupported=_EQX_UNSUPPORTED,
    description="equinox.nn.LSTMCell / GRUCell, vmapped over the batch, lax.scan over time")
_FLAX_UNSUPPORTED = frozenset({"backward", "cuda", "proj_size", "dropout", "packed"})
FLAX = Implementation(
    name="flax-linen", kinds=_kinds(Flax, _FLAX_UNSUPPORTED), unsupported=_FLAX_UNSUPPORTED,
    description="flax.linen.SimpleCell / LSTMCell / GRUCell, flax.linen.RNN over time")
