"""The drivers a recorded program adds to the ops' own: a replayed output's backward, copies,
and the parts of a call's gradient buffer.

A program is a table of :mod:`autograd_nb.engine.machine` (its docstring says the format),
run by the machine's single-run loop: its values are places in the objects of one call (its
arena of intermediate values, the input and captured tensors' buffers, the constants; in a
backward also the incoming gradient and the gradient buffer). Recording a new function
compiles nothing: the machine, compiled once, runs any table of known drivers.
"""

import numpy as np
from numba import njit

from ..engine import machine
from ..ops import _pointers

#: Runs a forward program on the arrays whose object addresses are ``object_ids``.
run = machine.run

_BYTES = np.empty(0, dtype=np.uint8)

@_pointers.serves_complex
@njit(cache=True, nogil=True)
def backward_driver(operands, ints, floats, like):
    """The VJP of a replayed output as one driver (``ReplayOutput``'s ``exec_spec``).

    ``operands``: the output's gradient, the call's object-id array, the backward table, its
    float attributes, then the gradient buffer of the call's inputs (accumulated into; after
    the inputs' gradients it holds the scratch the table's intermediate gradients use).
    ``ints``: ``[number of objects, scratch offset in bytes, scratch size in bytes]`` (the
    buffer's layout; the driver reads only the first: the table clears each scratch slot, or
    writes it whole, before it reads it). The table's objects are the call's, then the
    gradient (``n``) and the buffer (``n + 1``).
    """
    _backward(operands, ints)


@_pointers.serves_complex
@njit(cache=True, nogil=True)
def backward_set_driver(operands, ints, floats, like):
    """:func:`backward_driver` where it is the first to write the gradient buffer
    (``ReplayOutput``'s ``exec_set_spec``): it clears the inputs' gradients (the buffer's
    first ``ints[1]`` bytes), which the table then adds into, and leaves the scratch to the
    table. Cheaper than the executor's clear of the whole buffer, scratch included, and the
    same bits."""
    _pointers.array_at(operands[4], ints[1], _BYTES)[:] = 0
    _backward(operands, ints)


@njit(cache=True, nogil=True)
def _backward(operands, ints):
    n = ints[0]
    ids = _pointers.int_view(operands[1])
    bases = np.empty(n + 2, dtype=np.int64)
    for i in range(n):
        bases[i] = _pointers.data_address(ids[i])
    bases[n] = operands[0]
    bases[n + 1] = operands[4]
    table = _pointers.int_view(operands[2])
    table = _pointers.array_at(operands[2], machine.table_size(table), table)
    machine.walk(table, machine.value_pointers(table, bases),
                 _pointers.float_view(operands[3]))


@_pointers.serves_complex
@njit(cache=True, nogil=True)
def copy_driver(operands, ints, floats, like):
    """``ints[0]`` bytes from operand 0 to operand 1 (in-place writes, returned aliases)."""
    n = ints[0]
    _pointers.array_at(operands[1], n, _BYTES)[:] = _pointers.array_at(operands[0], n, _BYTES)


@_pointers.serves_complex
@njit(cache=True, nogil=True)
def slice_accumulate_driver(operands, ints, floats, like):
    """``target += gradient[ints[0]:ints[0] + ints[1]]`` (one input's part of the gradient of
    a call's inputs; ``ReplayInputs``'s ``exec_spec``), where a zero of ``target`` takes the
    part as it is (:func:`add_part`)."""
    start, n = ints[0], ints[1]
    source = _pointers.array_at(operands[0], start + n, like)
    target = _pointers.array_at(operands[1], n, like)
    for i in range(n):
        target[i] = add_part(target[i], source[start + i])


@_pointers.serves_complex
@njit(cache=True, nogil=True)
def slice_copy_driver(operands, ints, floats, like):
    """``target = gradient[ints[0]:ints[0] + ints[1]]``: :func:`slice_accumulate_driver`
    where it is the first to write ``target`` (``ReplayInputs``' ``exec_set_spec``), which
    into zeros leaves the part as it is (:func:`add_part`)."""
    start, n = ints[0], ints[1]
    source = _pointers.array_at(operands[0], start + n, like)
    _pointers.array_at(operands[1], n, like)[:] = source[start:]


@njit(cache=True, nogil=True, inline="always")
def add_part(total, part):
    """``total + part``, but ``part`` itself where ``total`` is zero. Eager mode adds an op's
    contribution into the input's zeroed gradient with one rounding; a replay adds it into
    the call's gradient buffer, then the buffer into the input's: a float32 contribution
    worked in float64 that rounds to -0.0 there (``x ** b``'s ``b * x ** (b - 1)``) would
    become +0.0 + -0.0 = +0.0 where eager's is -0.0. With a zero total the sum is the part
    anyway, but for that sign."""
    return part if total == 0 else total + part
