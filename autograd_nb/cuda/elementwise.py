"""Elementwise ops on the device: the generated kernels of :mod:`._kernels`, launched.

Every :class:`autograd_nb.ops.elementwise.ElementwiseOp` names this one implementation
(:class:`Elementwise`) as its CUDA twin: its kernels are generated from the op's own formula
table, so an op added to the table runs on the GPU with no code here. The comparison and logic
operators of ``Tensor`` (``<``, ``==``, ``&``, ...), which give bool tensors outside the graph,
run through :func:`apply_ufunc` with a formula per NumPy ufunc.
"""

import functools
from typing import NamedTuple

import numpy as np

from .. import config
from ..ops import _broadcast
from . import _device, _kernels
from ._kernels import flat, launch, launch_batched


def _params(attrs):
    # numba-cuda takes a tuple by value: no host-to-device copy per launch. Never empty,
    # so the kernels' argument types stay simple.
    return tuple(float(p) for p in attrs["params"]) or (0.0,)


@functools.lru_cache(maxsize=4096)
def _forward_layout(shape, shapes):
    collapsed, strides = _broadcast.layout(shape, shapes)
    return _tuple(collapsed), [_tuple(s) for s in strides]


def _tuple(values):
    return tuple(int(v) for v in values)


class VjpLayout(NamedTuple):
    """Layout of a VJP into a broadcast input (:func:`vjp_layout`)."""

    #: The collapsed output dimensions, the target's own ("kept") ones first, then the
    #: broadcast ("reduced") ones.
    dims: tuple
    #: How many of ``dims`` are kept.
    n_kept: int
    #: Element strides of the output (for ``g`` and ``y``) over ``dims``.
    output_strides: tuple
    #: Element strides of each operand the VJP reads, over ``dims``.
    operand_strides: list
    #: Elements of the target (the product of the kept dimensions).
    kept_size: int
    #: Output elements summed into each target element.
    reduced_size: int


@functools.lru_cache(maxsize=4096)
def vjp_layout(shape, operand_shapes, target_shape):
    """Layout of a VJP into an input of ``target_shape`` broadcast to ``shape``: a
    :class:`VjpLayout`. The target is contiguous over the kept dimensions, so a kept
    position is its flat index.
    """
    out_strides = list(_broadcast.contiguous_strides(shape))
    target_strides = _broadcast.broadcast_strides(target_shape, shape)
    strides = [_broadcast.broadcast_strides(s, shape) for s in operand_shapes]
    collapsed, merged = _broadcast.collapse(shape, [out_strides, target_strides] + strides)
    kept = [d for d in range(len(collapsed)) if merged[1][d] != 0]
    reduced = [d for d in range(len(collapsed)) if merged[1][d] == 0]
    order = kept + reduced
    dims = tuple(int(collapsed[d]) for d in order)
    permuted = [tuple(int(s[d]) for d in order) for s in merged]
    kept_size = int(np.prod(dims[: len(kept)], dtype=np.int64))
    reduced_size = int(np.prod(dims[len(kept) :], dtype=np.int64))
    return VjpLayout(
        dims=dims, n_kept=len(kept), output_strides=permuted[0], operand_strides=permuted[2:],
        kept_size=kept_size, reduced_size=reduced_size,
    )


def _chunk(kept_size, reduced_size):
    """Reduction elements per thread: whole rows when there are enough targets to fill the
    GPU, otherwise rows split so that about ``config.CUDA_VJP_REDUCTION_THREADS`` threads
    run (then add their parts atomically)."""
    threads = config.CUDA_VJP_REDUCTION_THREADS
    parts = max(1, min(reduced_size, -(-threads // max(kept_size, 1))))
    return max(1, -(-reduced_size // parts))


def _count(shape):
    size = 1
    for n in shape:
        size *= int(n)
    return size


def _run_forward(module, arrays, out, params):
    """Launch ``module``'s forward kernel: flat when every operand has the output's shape,
    strided (broadcasting) otherwise."""
    if out.size == 0:
        return
    shapes = tuple(a.shape for a in arrays)
    if all(s == out.shape for s in shapes):
        launch(module.forward, out.size, *[flat(a) for a in arrays], flat(out), params)
        return
    dims, strides = _forward_layout(tuple(out.shape), shapes)
    args = []
    for array, stride in zip(arrays, strides):
        args += [flat(array), stride]
    launch(module.forward_strided, out.size, *args, flat(out), dims, params)


def _is_complex(arrays):
    return any(a is not None and a.dtype.kind == "c" for a in arrays)


#: The result dtype of an op's complex case by (op name, operand dtypes) (:func:`_complex_dtype`).
_complex_dtypes = {}


def _complex_dtype(op, dtypes, forward_numpy):
    """The dtype of ``op``'s complex result for operands of ``dtypes``: what its NumPy
    formula gives for one element of each (``abs``, ``real``: the parts' real dtype; a
    Python constant is weak, as NumPy has it)."""
    key = (op.name, dtypes)
    dtype = _complex_dtypes.get(key)
    if dtype is None:
        ones = [np.ones(1, dtype) for dtype in dtypes]
        with np.errstate(all="ignore"):
            dtype = _complex_dtypes[key] = np.asarray(forward_numpy(ones)).dtype
    return dtype


class Elementwise:
    """The CUDA implementation shared by every elementwise op: kernels generated from its
    formulas, or from its complex formulas where the operands or gradients are complex (an
    op without a complex case is refused by its prepare, as on the CPU)."""

    takes_complex = True

    @staticmethod
    def forward(op, arrays, attrs):
        complex_case = arrays[-1].dtype.kind == "c"  # (as the CPU's forward decides)
        if complex_case:
            dtype = _complex_dtype(
                op, tuple(a.dtype for a in arrays),
                lambda ones: op._forward_complex(ones, {"shape": (1,), "params": attrs["params"]}),
            )
        else:
            dtype = arrays[-1].dtype
        out = _device.empty(attrs["shape"], dtype)
        _run_forward(_kernels.elementwise_module(op, complex_case), arrays, out, _params(attrs))
        return out

    @classmethod
    def vjp(cls, op, k, grad_output, saved, attrs, grad_input):
        cls.run_vjp(op, k, grad_output, saved, attrs, grad_input, 1)

    @classmethod
    def vjp_batched(cls, op, k, grad_outputs, saved, attrs, grad_inputs):
        cls.run_vjp(op, k, grad_outputs, saved, attrs, grad_inputs, grad_outputs.shape[0])

    @staticmethod
    def run_vjp(op, k, grad_output, saved, attrs, grad_input, batch):
        """Accumulate VJP ``k`` for ``batch`` rows of grad_output (row-major, one after the
        other in ``grad_output`` and ``grad_input``)."""
        complex_case = grad_input.dtype.kind == "c" or grad_output.dtype.kind == "c"
        if complex_case:
            used, reads_g, reads_y = op.complex_vjp_reads(k)
        else:
            used, reads_g, reads_y = op.vjp_reads(k)
        shape, shapes = attrs["shape"], attrs["shapes"]
        size = _count(shape)
        if size == 0 or grad_input.size == 0 or batch == 0:
            return
        module = _kernels.elementwise_module(op, complex_case)
        params = _params(attrs)
        g = [flat(grad_output)] if reads_g else []
        y = [flat(saved.output)] if reads_y else []
        if shapes[k] == shape and all(shapes[i] == shape for i in used):
            xs = [flat(saved[i]) for i in used]
            kernel = getattr(module, f"vjp{k}")
            launch_batched(kernel, size, batch, *g, *xs, *y, flat(grad_input), params, batch,
                           size)
            return
        layout = vjp_layout(shape, tuple(shapes[i] for i in used), shapes[k])
        xs = []
        for i, stride in zip(used, layout.operand_strides):
            xs += [flat(saved[i]), stride]
        # (complex: one thread sums a target element's whole reduction; no complex atomics)
        chunk = (layout.reduced_size if complex_case
                 else _chunk(layout.kept_size, layout.reduced_size))
        threads = layout.kept_size * (-(-layout.reduced_size // max(chunk, 1)))
        kernel = getattr(module, f"vjp{k}_strided")
        launch_batched(
            kernel, threads, batch, *g, *xs, *y, flat(grad_input), layout.output_strides,
            layout.dims, layout.n_kept, max(chunk, 1), params, batch, size, layout.kept_size,
        )


class ComplexPart:
    """``real``, ``imag``, ``conj`` and ``angle`` of a complex tensor (the ops
    ``_real``, ...): kernels generated from the op's formulas, as an elementwise op's
    complex case (operand, result and gradients of one shape)."""

    takes_complex = True

    @staticmethod
    def forward(op, arrays, attrs):
        (x,) = arrays
        dtype = _complex_dtype(op, (x.dtype,), lambda ones: op.forward(ones, {}))
        out = _device.empty(x.shape, dtype)
        if out.size:
            module = _kernels.elementwise_module(op, True)
            launch(module.forward, out.size, flat(x), flat(out), (0.0,))
        return out

    @classmethod
    def vjp(cls, op, k, grad_output, saved, attrs, grad_input):
        cls.vjp_batched(op, k, grad_output.reshape((1,) + grad_output.shape), saved, attrs,
                        grad_input.reshape((1,) + grad_input.shape))

    @staticmethod
    def vjp_batched(op, k, grad_outputs, saved, attrs, grad_inputs):
        size = grad_inputs.size // max(grad_inputs.shape[0], 1)
        batch = grad_outputs.shape[0]
        if size == 0 or batch == 0:
            return
        module = _kernels.elementwise_module(op, True)
        xs = [flat(saved[0])] if op.saves else []
        launch_batched(module.vjp0, size, batch, flat(grad_outputs), *xs, flat(grad_inputs),
                       (0.0,), batch, size)


# -- comparisons and logic (no gradient) -------------------------------------------------------

UFUNC_FORMULAS = {
    "less": "a < b",
    "less_equal": "a <= b",
    "greater": "a > b",
    "greater_equal": "a >= b",
    "equal": "a == b",
    "not_equal": "a != b",
    "bitwise_and": "a & b",
    "bitwise_or": "a | b",
    "bitwise_xor": "a ^ b",
    "invert": "~a",
}


def apply_ufunc(ufunc, values):
    """``ufunc(*values)`` on the device, for the comparison and logic ufuncs of
    ``UFUNC_FORMULAS``; values are device arrays and host constants (scalars, arrays)."""
    from . import dispatch

    formula = UFUNC_FORMULAS.get(ufunc.__name__)
    if formula is None:
        raise NotImplementedError(f"{ufunc.__name__} has no CUDA implementation")
    hosts = [
        dispatch.standin((1,) * np.ndim(v), v.dtype) if _device.is_device_array(v) else v
        for v in values
    ]
    dtype = np.asarray(ufunc(*hosts)).dtype  # NumPy's promotion and result type
    if ufunc.__name__ == "invert" and dtype == np.bool_:
        formula = "not a"
    names = ("a", "b")[: len(values)]
    arrays = []
    for v in values:
        if _device.is_device_array(v):
            arrays.append(v)
        elif np.ndim(v) == 0:
            host = np.asarray(v)
            arrays.append(_device.constant(host, host.dtype))
        else:
            arrays.append(_device.to_device(np.asarray(v)))
    shape = _broadcast.broadcast_shapes_cached(tuple(a.shape for a in arrays))
    out = _device.empty(shape, dtype)
    _run_forward(_kernels.formula_module(ufunc.__name__, names, formula), arrays, out, (0.0,))
    return out
