"""Moving a tensor between the CPU and the GPU as a recorded op (``Tensor.to``/``cuda``/``cpu``).

As in PyTorch, ``x.cuda()`` of a tensor that requires grad is part of the graph: its VJP copies
the gradient back to ``x``'s device. The two transfer ops are not in the op registry (they are
not NumPy functions, and the registry-driven tests and benchmarks have nothing to check on
them); they follow the same calling convention, and ``input_device`` tells the engine where
the gradient buffer of their input lives.
"""

import numpy as np

from ..ops.registry import Op, cuda_twin
from . import _device


def _move(array, device):
    on_host = type(array) is np.ndarray
    if device == "cuda":
        return _device.to_device(array) if on_host else array
    return array if on_host else _device.to_host(array)


@cuda_twin("transfer", "Transfer")
class ToDevice(Op):
    """Copy to ``device``; the VJP copies the gradient back and accumulates it."""

    family = "transfer"
    n_inputs = 1
    method = False

    def __init__(self, device, input_device):  # not registered: see the module docstring
        self.name = f"to_{device}"
        self.device = device
        self.input_device = input_device

    def prepare(self, values, attrs):
        return [values[0]], attrs

    def forward(self, arrays, attrs):
        return _move(arrays[0], self.device)

    def vjp(self, k, grad_output, saved, attrs, grad_input):
        grad = _move(grad_output, self.input_device)
        if self.input_device == "cuda":
            _device.add_into(grad_input, grad)
        else:
            grad_input += grad.reshape(grad_input.shape)

    def vjp_batched(self, k, grad_outputs, saved, attrs, grad_inputs):
        # A batch moves as one array: one copy, one addition (not one per row).
        self.vjp(k, grad_outputs, saved, attrs, grad_inputs)

    def rule(self, k, grad_output, inputs, output, attrs):
        from ..ops import registry

        return registry._dispatch(TO[self.input_device], (grad_output,), {})


TO = {"cuda": ToDevice("cuda", "cpu"), "cpu": ToDevice("cpu", "cuda")}


class Transfer:
    """The device side of a transfer is the op itself (it moves arrays either way)."""

    takes_complex = True

    @staticmethod
    def prepare(op, values, attrs):
        return op.prepare(values, attrs)

    @staticmethod
    def forward(op, arrays, attrs):
        return op.forward(arrays, attrs)

    @staticmethod
    def vjp(op, k, grad_output, saved, attrs, grad_input):
        op.vjp(k, grad_output, saved, attrs, grad_input)

    @staticmethod
    def vjp_batched(op, k, grad_outputs, saved, attrs, grad_inputs):
        op.vjp_batched(k, grad_outputs, saved, attrs, grad_inputs)
