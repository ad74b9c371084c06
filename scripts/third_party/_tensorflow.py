"""torch tensors <-> TensorFlow's, and a TensorFlow computation as one torch autograd step
(backward through a tf.GradientTape): what the adapters over TensorFlow libraries share. bfloat16
crosses through float32, a cast on both sides, exact."""
from __future__ import annotations

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # noqa: E402
import torch  # noqa: E402
from torch.autograd.function import once_differentiable  # noqa: E402


def to_tf(tensor: torch.Tensor):
    array = tensor.detach().cpu()
    if array.dtype == torch.bfloat16:
        return tf.cast(tf.constant(array.float().numpy()), tf.bfloat16)
    return tf.constant(array.numpy())


def to_torch(array) -> torch.Tensor:
    if array.dtype == tf.bfloat16:
        return torch.from_numpy(tf.cast(array, tf.float32).numpy().copy()).bfloat16()
    return torch.from_numpy(array.numpy().copy())


class TFCall(torch.autograd.Function):
    """outputs = fn(TensorFlow copies of tensors); backward through a tf.GradientTape."""

    @staticmethod
    def forward(ctx, fn, *tensors):
        inputs = [to_tf(t) for t in tensors]
        grad = any(ctx.needs_input_grad[1:])
        if grad:
            with tf.GradientTape(watch_accessed_variables=False) as tape:
                for t in inputs:
                    tape.watch(t)
                outputs = fn(inputs)
            ctx.tf = (tape, inputs, outputs)
        else:
            outputs = fn(inputs)
        return tuple(to_torch(o) for o in outputs)

    @staticmethod
    @once_differentiable
    def backward(ctx, *grads):
        tape, inputs, outputs = ctx.tf
        found = tape.gradient(outputs, inputs, output_gradients=[to_tf(g) for g in grads])
        return (None, *(None if g is None else to_torch(g) for g in found))
