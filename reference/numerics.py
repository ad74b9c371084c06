"""Float64 NumPy forward and backward (BPTT) — placeholder until the reference numerics land."""


def forward(cfg, params, x, hx=None):
    raise NotImplementedError


def backward(cfg, params, x, hx, grad_out):
    raise NotImplementedError
