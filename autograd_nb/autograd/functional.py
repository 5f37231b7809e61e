"""Whole-function derivatives: ``vjp, jvp, jacobian, hessian, hvp, vhp``.

torch.autograd.functional's signatures and semantics, over :func:`grad`. Each function takes a
Python ``func`` of Tensors and the point ``inputs`` (a Tensor or a tuple of Tensors); the results
mirror the tuple-ness of the inputs and outputs. Inputs are detached and made to require grad
inside, so ``func`` may be called on tensors that don't require grad; results are detached
unless ``create_graph=True``.

Forward-mode products run in forward mode (:mod:`autograd_nb.autograd.forward_ad`): ``jvp`` is
one forward pass of dual tensors; ``jacobian(..., strategy="forward-mode")`` one pass with the
unit vectors of the inputs as one batch of tangents (torch's ``jacfwd``; a column of the
Jacobian each); ``hvp`` and ``hessian(..., outer_jacobian_strategy="forward-mode")`` take
forward over reverse, the tangent of a differentiable gradient (the Hessian's columns batched
the same way; docs/forward-mode.rst says when each is faster).

``jacobian(..., vectorize=True)`` makes one batched call, ``grad(..., is_grads_batched=True)``
with the rows of the identity as the batch of grad_outputs; ``vectorize=False`` makes one
``grad`` call per row of the Jacobian, with one identity row at a time.
"""

import numpy as np

from .. import config
from ..ops.registry import FUNCTIONS
from ..tensor import Tensor
from . import forward_ad
from .api import grad
from .grad_mode import enable_grad, is_grad_enabled, set_grad_enabled
from .jvp import BatchedTangentError

__all__ = ["vjp", "jvp", "jacobian", "hessian", "hvp", "vhp"]

_STRATEGIES = ("forward-mode", "reverse-mode")


# -- tuples in, tuples out ---------------------------------------------------------------------


def _as_tuple(value, arg_name, fn_name):
    """``(was_tuple, tuple_of_tensors)``; only a tuple counts as a tuple, as in torch."""
    is_tuple = isinstance(value, tuple)
    values = value if is_tuple else (value,)
    for i, element in enumerate(values):
        if not isinstance(element, Tensor):
            where = f"the value at index {i}" if is_tuple else f"the given {arg_name}"
            raise TypeError(
                f"The {arg_name} given to {fn_name} must be either a Tensor or a tuple of "
                f"Tensors but {where} has type {type(element)}."
            )
    return is_tuple, values


def _tuple_postprocess(result, to_unpack):
    """Undo :func:`_as_tuple`: ``to_unpack`` is one flag, or (outer, inner) for nested tuples."""
    if isinstance(to_unpack, tuple):
        outer, inner = to_unpack
        if not inner:
            result = tuple(element[0] for element in result)
        if not outer:
            result = result[0]
    elif not to_unpack:
        result = result[0]
    return result


def _grad_preprocess(tensors, create_graph, need_graph):
    """Fresh tensor objects for ``func`` to see.

    Always a new object, so that differentiating with respect to it cannot be confused with
    the caller's tensor that ``func`` may also have captured. With ``create_graph`` a tensor
    that requires grad stays connected to its history (a differentiable copy); otherwise it
    is detached and, if ``need_graph``, made a leaf that requires grad. With ``create_graph`` a
    dual tensor (:mod:`.forward_ad`) keeps its tangents (nested ``jvp`` calls, the ``jvp`` of a
    Jacobian), the detached leaf too.
    """
    fresh = []
    for tensor in tensors:
        if create_graph and tensor.requires_grad:
            fresh.append(FUNCTIONS["reshape"](tensor, tensor.shape))
        else:
            leaf = tensor.detach().requires_grad_(need_graph)
            if create_graph:
                forward_ad.copy_tangents(tensor, leaf)
            fresh.append(leaf)
    return tuple(fresh)


def _grad_postprocess(tensors, create_graph):
    """Detach results (possibly nested tuples) unless the caller asked for a graph."""
    if create_graph:
        return tensors
    if tensors and isinstance(tensors[0], tuple):
        return tuple(_grad_postprocess(inner, create_graph) for inner in tensors)
    return tuple(tensor.detach() for tensor in tensors)


def _validate_v(v, reference, is_reference_tuple):
    """``v`` must hold one tensor per reference tensor, of the same shape."""
    if len(v) != len(reference):
        if is_reference_tuple:
            raise RuntimeError(
                f"v is a tuple of invalid length: should be {len(reference)} but got {len(v)}."
            )
        raise RuntimeError("The given v should contain a single Tensor.")
    for i, (v_i, reference_i) in enumerate(zip(v, reference, strict=True)):
        if v_i.shape != reference_i.shape:
            prefix = f"Entry {i} in " if is_reference_tuple else ""
            raise RuntimeError(
                f"{prefix}v has invalid size: should be {reference_i.shape} but got {v_i.shape}."
            )


def _inputs_and_v(inputs, v, create_graph, need_graph, fn_name):
    """``(is_inputs_tuple, inputs, v)`` of a function taking a vector ``v`` over its inputs
    (``jvp``, ``hvp``, ``vhp``): both as tuples of Tensors, ``v`` checked against the
    inputs, or None where the input is a single element."""
    is_inputs_tuple, inputs = _as_tuple(inputs, "inputs", fn_name)
    inputs = _grad_preprocess(inputs, create_graph=create_graph, need_graph=need_graph)
    if v is not None:
        _, v = _as_tuple(v, "v", fn_name)
        v = _grad_preprocess(v, create_graph=create_graph, need_graph=False)
        _validate_v(v, inputs, is_inputs_tuple)
    elif len(inputs) != 1 or inputs[0].size != 1:
        raise RuntimeError(
            "The vector v can only be None if the input to the user-provided function is "
            "a single Tensor with a single element."
        )
    return is_inputs_tuple, inputs, v


def _check_requires_grad(tensors, kind, strict):
    """In strict mode, refuse results that cannot depend on the inputs (torch's messages)."""
    if not strict:
        return
    for i, tensor in enumerate(tensors):
        if tensor is None:
            raise RuntimeError(
                f"The output of the user-provided function is independent of input {i}. "
                "This is not allowed in strict mode."
            )
        if tensor.requires_grad:
            continue
        if kind == "outputs":
            raise RuntimeError(
                f"Output {i} of the user-provided function does not require gradients. The "
                "outputs must be computed in a differentiable manner from the input when "
                "running in strict mode."
            )
        if kind == "grad_inputs":
            raise RuntimeError(
                f"The gradient with respect to input {i} is independent of the inputs of the "
                "user-provided function. This is not allowed in strict mode."
            )
        raise RuntimeError(
            "While computing the hessian, found that the jacobian of the user-provided "
            f"function with respect to input {i} is independent of the input. This is not "
            "allowed in strict mode. You should ensure that your function is twice "
            "differentiable and that the jacobian depends on the inputs (this would be "
            "violated by a linear function for example)."
        )


def _autograd_grad(
    outputs,
    inputs,
    grad_outputs=None,
    create_graph=False,
    retain_graph=None,
    is_grads_batched=False,
):
    """:func:`grad` that skips outputs that are None or don't require grad.

    Unused inputs give None; with no differentiable output at all, every result is None.
    """
    if grad_outputs is None:
        grad_outputs = (None,) * len(outputs)
    kept = [
        (output, grad_output)
        for output, grad_output in zip(outputs, grad_outputs, strict=True)
        if output is not None and output.requires_grad
    ]
    if not kept:
        return (None,) * len(inputs)
    kept_outputs, kept_grad_outputs = zip(*kept, strict=True)
    return grad(
        kept_outputs,
        inputs,
        kept_grad_outputs,
        retain_graph=retain_graph,
        create_graph=create_graph,
        allow_unused=True,
        is_grads_batched=is_grads_batched,
    )


_INDEPENDENT = {
    "back": (
        "The output of the user-provided function is independent of input {i}. This is not "
        "allowed in strict mode."
    ),
    "back_trick": (
        "The gradient with respect to the input is independent of entry {i} in the "
        "grad_outputs when using the double backward trick to compute forward mode gradients. "
        "This is not allowed in strict mode."
    ),
    "double_back": (
        "The jacobian of the user-provided function is independent of input {i}. This is not "
        "allowed in strict mode."
    ),
    "double_back_trick": (
        "The hessian of the user-provided function is independent of entry {i} in the "
        "grad_jacobian. This is not allowed in strict mode as it prevents from using the "
        "double backward trick to replace forward mode AD."
    ),
}


def _fill_in_zeros(grads, references, strict, create_graph, stage):
    """Zeros (of the reference's shape) for the None results, or torch's strict errors."""
    filled = []
    for i, grad_i in enumerate(grads):
        if grad_i is None:
            if strict:
                raise RuntimeError(_INDEPENDENT[stage].format(i=i))
            grad_i = Tensor._make(np.zeros(references[i].shape, dtype=references[i].dtype))
        elif strict and create_graph and not grad_i.requires_grad:
            what = "hessian" if "double" in stage else "jacobian"
            raise RuntimeError(
                f"The {what} of the user-provided function is independent of input {i}. This "
                "is not allowed in strict mode when create_graph=True."
            )
        filled.append(grad_i)
    return tuple(filled)


_identities = {}  # (n, dtype) -> identity, up to ``config.IDENTITY_CACHE_BYTES`` in all


def _identity(n, dtype):
    """``np.eye(n, dtype=dtype)``, read-only, kept for the next call where it is small enough.

    The batched VJP only reads its grad_outputs, so one array serves every call; it is made
    read-only so that a write into it would raise instead of changing the next Jacobian.
    """
    key = (n, dtype)
    identity = _identities.get(key)
    if identity is None:
        identity = np.eye(n, dtype=dtype)
        identity.flags.writeable = False
        limit = config.IDENTITY_CACHE_BYTES
        if identity.nbytes <= limit:
            if sum(kept.nbytes for kept in _identities.values()) + identity.nbytes > limit:
                _identities.clear()
            _identities[key] = identity
    return identity


def _standard_basis(tensors):
    """The identity over all elements of ``tensors``, split by tensor: one batch per tensor.

    With ``n`` elements in all, entry ``i`` has shape ``(n, *tensors[i].shape)`` and row
    ``r`` of the concatenation (over tensors, flattened) is the ``r``-th unit vector. The
    entries are read-only.
    """
    numels = [tensor.size for tensor in tensors]
    total = sum(numels)
    if len(tensors) == 1:  # the identity itself, kept from the last call of this size
        (tensor,) = tensors
        identity = _identity(total, tensor.dtype)
        return (Tensor._make(identity.reshape((total,) + tensor.shape)),), numels
    chunks = []
    offset = 0
    for tensor, numel in zip(tensors, numels, strict=True):
        chunk = np.zeros((total, numel), dtype=tensor.dtype)
        chunk[offset : offset + numel] = np.eye(numel, dtype=tensor.dtype)
        chunks.append(Tensor._make(chunk.reshape((total,) + tensor.shape)))
        offset += numel
    return tuple(chunks), numels


def _split_rows(stacked, numels, create_graph):
    """Split ``stacked`` (a Tensor) along its first axis into blocks of ``numels`` rows."""
    blocks = []
    offset = 0
    for numel in numels:
        if create_graph:
            blocks.append(stacked[offset : offset + numel])
        else:
            blocks.append(Tensor._make(stacked._data[offset : offset + numel]))
        offset += numel
    return blocks


# -- products ----------------------------------------------------------------------------------


def vjp(func, inputs, v=None, create_graph=False, strict=False):
    """The vector-Jacobian product ``vᵀ · J`` of ``func`` at ``inputs``.

    Parameters
    ----------
    func : callable
        Takes the input Tensors (as positional arguments) and returns a Tensor or a tuple of
        Tensors.
    inputs : Tensor or tuple of Tensor
        The point at which ``func`` is differentiated.
    v : Tensor or tuple of Tensor, optional
        The vector of the product, one per output of ``func`` and of its shape. May be
        omitted only when ``func`` returns a single Tensor with a single element (then ones).
    create_graph : bool
        Compute the output and the result differentiably, so they can be differentiated
        again.
    strict : bool
        Raise when an output does not require grad or an input does not reach the outputs,
        instead of giving zeros for it.

    Returns
    -------
    func_output : Tensor or tuple of Tensor
        ``func(*inputs)``.
    vjp : Tensor or tuple of Tensor
        One per input, of its shape.

    Examples
    --------
    ``y[i, j] = x[i] * x[j]``, so ``(vᵀJ)[k] = sum_j v[k, j] x[j] + sum_i v[i, k] x[i]``; with
    ``v`` all ones that is ``2 * x.sum()`` in every entry:

    >>> import autograd_nb as anb
    >>> from autograd_nb.autograd.functional import vjp
    >>> x = anb.tensor([1.0, 2.0, 3.0, 4.0])
    >>> y, result = vjp(lambda x: anb.outer(x, x), x, anb.ones((4, 4)))
    >>> result
    tensor([20., 20., 20., 20.])
    >>> y.shape
    (4, 4)

    Tuple inputs give a tuple of products:

    >>> vjp(lambda a, b: 2 * a + 3 * b, (x, x), anb.ones(4))[1]
    (tensor([2., 2., 2., 2.]), tensor([3., 3., 3., 3.]))
    """
    with enable_grad():
        is_inputs_tuple, inputs = _as_tuple(inputs, "inputs", "vjp")
        inputs = _grad_preprocess(inputs, create_graph=create_graph, need_graph=True)
        outputs = func(*inputs)
        is_outputs_tuple, outputs = _as_tuple(
            outputs, "outputs of the user-provided function", "vjp"
        )
        _check_requires_grad(outputs, "outputs", strict=strict)
        if v is not None:
            _, v = _as_tuple(v, "v", "vjp")
            v = _grad_preprocess(v, create_graph=create_graph, need_graph=False)
            _validate_v(v, outputs, is_outputs_tuple)
        elif len(outputs) != 1 or outputs[0].size != 1:
            raise RuntimeError(
                "The vector v can only be None if the user-provided function returns a single "
                "Tensor with a single element."
            )
    with set_grad_enabled(True if create_graph else is_grad_enabled()):
        grad_result = _autograd_grad(outputs, inputs, v, create_graph=create_graph)
        result = _fill_in_zeros(grad_result, inputs, strict, create_graph, "back")
    outputs = _grad_postprocess(outputs, create_graph)
    result = _grad_postprocess(result, create_graph)
    return (
        _tuple_postprocess(outputs, is_outputs_tuple),
        _tuple_postprocess(result, is_inputs_tuple),
    )


def jvp(func, inputs, v=None, create_graph=False, strict=False):
    """The Jacobian-vector product ``J · v`` of ``func`` at ``inputs``.

    One forward pass of dual tensors (:mod:`autograd_nb.autograd.forward_ad`): every op gives
    its result the tangent its forward rule computes from its inputs' tangents. With
    ``strict=True`` it takes torch's double-VJP trick (two reverse passes) instead, whose
    checks find an output that does not depend on an input.

    Parameters
    ----------
    func : callable
        Takes the input Tensors and returns a Tensor or a tuple of Tensors.
    inputs : Tensor or tuple of Tensor
        The point at which ``func`` is differentiated.
    v : Tensor or tuple of Tensor, optional
        The vector of the product, one per input and of its shape. May be omitted only for
        a single input with a single element (then ones).
    create_graph : bool
        Compute the output and the result differentiably.
    strict : bool
        Raise when an output does not depend on the inputs, instead of giving zeros for it.

    Returns
    -------
    func_output : Tensor or tuple of Tensor
        ``func(*inputs)``.
    jvp : Tensor or tuple of Tensor
        One per output, of its shape.

    Examples
    --------
    For ``y = outer(x, x)``, ``Jv = outer(v, x) + outer(x, v)``; with ``v`` the first unit
    vector that is ``x`` in the first row and column, doubled where they meet:

    >>> import autograd_nb as anb
    >>> from autograd_nb.autograd.functional import jvp
    >>> x = anb.tensor([1.0, 2.0, 3.0, 4.0])
    >>> jvp(lambda x: anb.outer(x, x), x, anb.tensor([1.0, 0.0, 0.0, 0.0]))[1]
    tensor([[2., 2., 3., 4.],
            [2., 0., 0., 0.],
            [3., 0., 0., 0.],
            [4., 0., 0., 0.]])
    """
    if strict:
        return _jvp_double_vjp(func, inputs, v, create_graph, strict)
    with set_grad_enabled(True if create_graph else is_grad_enabled()):
        is_inputs_tuple, inputs, v = _inputs_and_v(inputs, v, create_graph, False, "jvp")
        if v is None:  # (a single-element input: the tangent 1)
            v = (Tensor._make(np.ones(inputs[0].shape, dtype=inputs[0].dtype)),)
        with forward_ad.dual_level():
            duals = tuple(forward_ad.make_dual(x, t) for x, t in zip(inputs, v, strict=True))
            outputs = func(*duals)
            is_outputs_tuple, outputs = _as_tuple(
                outputs, "outputs of the user-provided function", "jvp"
            )
            unpacked = [forward_ad.unpack_dual(o) for o in outputs]
        outputs = tuple(u.primal for u in unpacked)
        result = _fill_in_zeros(
            [u.tangent for u in unpacked], outputs, strict, create_graph, "back_trick"
        )
    outputs = _grad_postprocess(outputs, create_graph)
    result = _grad_postprocess(result, create_graph)
    return (
        _tuple_postprocess(outputs, is_outputs_tuple),
        _tuple_postprocess(result, is_outputs_tuple),
    )


def _jvp_double_vjp(func, inputs, v, create_graph, strict):
    """``jvp`` by the double-VJP trick, for ``strict=True``: its checks are torch's, which
    finds an output independent of an input through the gradient of the first VJP."""
    with enable_grad():
        is_inputs_tuple, inputs, v = _inputs_and_v(inputs, v, create_graph, True, "jvp")
        outputs = func(*inputs)
        is_outputs_tuple, outputs = _as_tuple(
            outputs, "outputs of the user-provided function", "jvp"
        )
        _check_requires_grad(outputs, "outputs", strict=strict)
        # The VJP is linear in its grad_output, so the value of this dummy u never matters;
        # zeros keep inf and nan out.
        dummy_grad_outputs = tuple(
            Tensor._make(np.zeros(o.shape, dtype=o.dtype), requires_grad=True) for o in outputs
        )
        grad_inputs = _autograd_grad(outputs, inputs, dummy_grad_outputs, create_graph=True)
        _check_requires_grad(grad_inputs, "grad_inputs", strict=strict)
    with set_grad_enabled(True if create_graph else is_grad_enabled()):
        grad_result = _autograd_grad(grad_inputs, dummy_grad_outputs, v, create_graph=create_graph)
        result = _fill_in_zeros(grad_result, outputs, strict, create_graph, "back_trick")
    outputs = _grad_postprocess(outputs, create_graph)
    result = _grad_postprocess(result, create_graph)
    return (
        _tuple_postprocess(outputs, is_outputs_tuple),
        _tuple_postprocess(result, is_outputs_tuple),
    )


# -- Jacobians ---------------------------------------------------------------------------------


def jacobian(
    func, inputs, create_graph=False, strict=False, vectorize=False, strategy="reverse-mode"
):
    """The full Jacobian of ``func`` at ``inputs``.

    Entry ``[i][j]`` is ``∂ outputs[i] / ∂ inputs[j]``, of shape
    ``outputs[i].shape + inputs[j].shape`` and of ``inputs[j]``'s dtype. Row ``r`` (over the
    flattened outputs) is the VJP against the ``r``-th unit vector.

    Parameters
    ----------
    func : callable
        Takes the input Tensors and returns a Tensor or a tuple of Tensors.
    inputs : Tensor or tuple of Tensor
        The point at which ``func`` is differentiated.
    create_graph : bool
        Compute the Jacobian differentiably (for Hessians and higher).
    strict : bool
        Raise when an output is independent of an input, instead of giving zeros for it.
        Not supported together with ``vectorize=True`` (as in torch).
    vectorize : bool
        Compute all the rows in one batched VJP, ``grad(..., is_grads_batched=True)`` with the
        identity (split over the outputs) as the batch of grad_outputs. ``False`` makes one
        ``grad`` call per row.
    strategy : {"reverse-mode", "forward-mode"}
        ``"forward-mode"`` computes the Jacobian column by column (``J · e_c``) as torch's
        ``jacfwd``: one forward pass with the unit vectors of the inputs as a batch of
        tangents (chunks of ``config.FORWARD_JACOBIAN_CHUNK``; one pass per vector where a
        rule cannot take a batch). As in torch it needs ``vectorize=True`` and supports
        neither ``create_graph`` nor ``strict``. The result then has the outputs' dtype.

    Returns
    -------
    Tensor, tuple of Tensor, or tuple of tuple of Tensor
        A single Tensor for one input and one output; a tuple when one of them is a tuple;
        a tuple (over outputs) of tuples (over inputs) when both are.

    Examples
    --------
    The full Jacobian of ``y = outer(x, x)`` for ``x`` of shape ``(4,)`` has shape
    ``(4, 4, 4)``: ``J[i, j, k] = ∂(x[i] x[j]) / ∂x[k] = δ[i, k] x[j] + x[i] δ[j, k]``.
    Row ``i = 1`` (``y[1, :] = x[1] * x``):

    >>> import autograd_nb as anb
    >>> from autograd_nb.autograd.functional import jacobian
    >>> x = anb.tensor([1.0, 2.0, 3.0, 4.0])
    >>> J = jacobian(lambda x: anb.outer(x, x), x, vectorize=True)
    >>> J.shape
    (4, 4, 4)
    >>> J[1]
    tensor([[2., 1., 0., 0.],
            [0., 4., 0., 0.],
            [0., 3., 2., 0.],
            [0., 4., 0., 2.]])

    ``vectorize=True`` made one batched VJP with 16 grad_outputs (the rows of the 16 x 16
    identity, each reshaped to ``(4, 4)``); ``vectorize=False`` makes 16 calls, same result:

    >>> bool((jacobian(lambda x: anb.outer(x, x), x) == J).numpy().all())
    True

    Tuple outputs and inputs give a tuple (per output) of tuples (per input):

    >>> a, b = anb.tensor([1.0, 2.0]), anb.tensor(3.0)
    >>> jac = jacobian(lambda a, b: (a * b, a.sum()), (a, b))
    >>> [[block.shape for block in row] for row in jac]
    [[(2, 2), (2,)], [(2,), ()]]
    >>> jac[0][1]
    tensor([1., 2.])
    """
    if strategy not in _STRATEGIES:
        raise ValueError(
            'Expected strategy to be either "forward-mode" or "reverse-mode". Hint: If your '
            'function has more outputs than inputs, "forward-mode" tends to be more '
            'performant. Otherwise, prefer to use "reverse-mode".'
        )
    if strategy == "forward-mode":
        if create_graph:
            raise NotImplementedError(
                "autograd_nb.autograd.functional.jacobian: `create_graph=True` and "
                '`strategy="forward-mode"` are not supported together (yet). Please either '
                'set `create_graph=False` or `strategy="reverse-mode"`.'
            )
        return _jacobian_forward(func, inputs, strict, vectorize)

    with enable_grad():
        is_inputs_tuple, inputs = _as_tuple(inputs, "inputs", "jacobian")
        inputs = _grad_preprocess(inputs, create_graph=create_graph, need_graph=True)
        outputs = func(*inputs)
        is_outputs_tuple, outputs = _as_tuple(
            outputs, "outputs of the user-provided function", "jacobian"
        )
        _check_requires_grad(outputs, "outputs", strict=strict)
        if vectorize:
            if strict:
                raise RuntimeError(
                    "autograd_nb.autograd.functional.jacobian: `strict=True` and "
                    "`vectorized=True` are not supported together. Please either set "
                    "`strict=False` or `vectorize=False`."
                )
            jac = _jacobian_batched(outputs, inputs, create_graph)
        else:
            jac = tuple(
                _jacobian_rows(i, output, inputs, create_graph, strict)
                for i, output in enumerate(outputs)
            )
        # (No ``_grad_postprocess``: without create_graph every block above is already a new
        # Tensor outside any graph, and with it the blocks stay as they are.)
        return _tuple_postprocess(jac, (is_outputs_tuple, is_inputs_tuple))


def _jacobian_rows(i, output, inputs, create_graph, strict):
    """Jacobians of ``output`` (number ``i``) with respect to each input, row by row."""
    rows = tuple([] for _ in inputs)
    unit = np.zeros(output.size, dtype=output.dtype)
    for r in range(output.size):
        unit[r] = 1
        grad_output = Tensor._make(unit.reshape(output.shape).copy())
        unit[r] = 0
        row = _autograd_grad(
            (output,), inputs, (grad_output,), retain_graph=True, create_graph=create_graph
        )
        for j, (rows_j, row_j, input_j) in enumerate(zip(rows, row, inputs, strict=True)):
            if row_j is None:
                if strict:
                    raise RuntimeError(
                        f"Output {i} of the user-provided function is independent of input "
                        f"{j}. This is not allowed in strict mode."
                    )
                row_j = Tensor._make(np.zeros(input_j.shape, dtype=input_j.dtype))
            elif strict and create_graph and not row_j.requires_grad:
                raise RuntimeError(
                    "The jacobian of the user-provided function is independent of input "
                    f"{j}. This is not allowed in strict mode when create_graph=True."
                )
            rows_j.append(row_j)
    blocks = []
    for rows_j, input_j in zip(rows, inputs, strict=True):
        shape = output.shape + input_j.shape
        if not rows_j:
            blocks.append(Tensor._make(np.zeros(shape, dtype=input_j.dtype)))
        elif create_graph:
            blocks.append(FUNCTIONS["reshape"](FUNCTIONS["stack"](rows_j), shape))
        else:
            blocks.append(Tensor._make(np.stack([t._data for t in rows_j]).reshape(shape)))
    return tuple(blocks)


def _jacobian_batched(outputs, inputs, create_graph):
    """All rows of all outputs' Jacobians in one batched VJP; a tuple (outputs) of tuples."""
    basis, numels = _standard_basis(outputs)
    total = sum(numels)
    stacked = (
        _autograd_grad(outputs, inputs, basis, create_graph=create_graph, is_grads_batched=True)
        if total
        else (None,) * len(inputs)
    )
    per_input = []
    for stacked_j, input_j in zip(stacked, inputs, strict=True):
        if stacked_j is None:
            stacked_j = Tensor._make(np.zeros((total,) + input_j.shape, dtype=input_j.dtype))
        blocks = _split_rows(stacked_j, numels, create_graph)
        per_input.append(
            [
                FUNCTIONS["reshape"](block, output.shape + input_j.shape)
                if create_graph
                else Tensor._make(block._data.reshape(output.shape + input_j.shape))
                for block, output in zip(blocks, outputs, strict=True)
            ]
        )
    return tuple(zip(*per_input, strict=True))


def _jacobian_forward(func, inputs, strict, vectorize, need_graph=False):
    """Column by column: ``J · e_c`` for every unit vector ``e_c`` of the inputs, as torch's
    ``jacfwd``: the unit vectors are one batch of tangents (a batched dual level), so one
    forward pass gives every column (chunks of ``config.FORWARD_JACOBIAN_CHUNK`` columns for
    inputs with more elements). Where a forward rule refuses a batch
    (:class:`~autograd_nb.autograd.jvp.BatchedTangentError`: a custom Function without
    ``generate_vmap_rule``), one forward pass per column instead. ``need_graph``: the inputs
    require grad (``hessian``'s gradient, forward over reverse)."""
    if strict:
        raise RuntimeError(
            "autograd_nb.autograd.functional.jacobian: `strict=True` and "
            '`strategy="forward-mode"` are not supported together (yet). Please either set '
            '`strict=False` or `strategy="reverse-mode"`.'
        )
    if not vectorize:
        raise NotImplementedError(
            "Computing Jacobian using forward-AD or forward-over-reverse Hessian is only "
            "implemented for `vectorize=True`."
        )
    is_inputs_tuple, inputs = _as_tuple(inputs, "inputs", "jacobian")
    inputs = tuple(x.detach().requires_grad_(need_graph) for x in inputs)
    numels = [x.size for x in inputs]
    try:
        is_outputs_tuple, outputs, columns = _forward_columns(func, inputs, numels, batched=True)
    except BatchedTangentError:
        is_outputs_tuple, outputs, columns = _forward_columns(func, inputs, numels)
    jac = []
    for output, data in zip(outputs, columns, strict=True):
        row = []
        offset = 0
        for numel, input_j in zip(numels, inputs, strict=True):
            block = np.moveaxis(data[offset : offset + numel], 0, -1)
            row.append(
                Tensor._make(np.ascontiguousarray(block).reshape(output.shape + input_j.shape))
            )
            offset += numel
        jac.append(tuple(row))
    return _tuple_postprocess(tuple(jac), (is_outputs_tuple, is_inputs_tuple))


def _basis_chunk(inputs, numels, start, stop):
    """The unit vectors ``start`` to ``stop`` (over all inputs' elements) as one batch of
    tangents per input, of shape ``(stop - start, *input.shape)``."""
    tangents = []
    offset = 0
    for x, numel in zip(inputs, numels, strict=True):
        rows = np.zeros((stop - start, numel), dtype=x.dtype)
        first, last = max(start, offset), min(stop, offset + numel)
        if first < last:
            rows[np.arange(first - start, last - start), np.arange(first, last) - offset] = 1
        tangents.append(Tensor._make(rows.reshape((stop - start,) + x.shape)))
        offset += numel
    return tangents


def _forward_columns(func, inputs, numels, batched=False):
    """``(is_outputs_tuple, outputs, columns)``: ``func``'s outputs, and per output the array
    ``(columns, *output.shape)`` of its tangents along the unit vectors of the inputs:
    ``batched``, chunks of them as one batch per forward pass; else one pass per vector."""
    total = sum(numels)
    step = max(1, config.FORWARD_JACOBIAN_CHUNK) if batched else 1
    columns = None
    outputs = None
    for start in range(0, total, step):
        stop = min(total, start + step)
        with forward_ad.dual_level(batch_shape=(stop - start,) if batched else None):
            tangents = _basis_chunk(inputs, numels, start, stop)
            if not batched:
                tangents = [Tensor._make(t._data[0]) for t in tangents]
            duals = [forward_ad.make_dual(x, t) for x, t in zip(inputs, tangents, strict=True)]
            is_outputs_tuple, outputs = _as_tuple(
                func(*duals), "outputs of the user-provided function", "jacobian"
            )
            found = [forward_ad.unpack_dual(o).tangent for o in outputs]
        if columns is None:
            columns = [np.zeros((total,) + o.shape, dtype=o.dtype) for o in outputs]
        for data, tangent in zip(columns, found, strict=True):
            if tangent is not None:
                values = tangent.detach().cpu().numpy()
                data[start:stop] = values if batched else values[None]
    if outputs is None:  # (no input element at all: one call for the outputs' shapes)
        is_outputs_tuple, outputs = _as_tuple(
            func(*inputs), "outputs of the user-provided function", "jacobian"
        )
        columns = [np.zeros((0,) + o.shape, dtype=o.dtype) for o in outputs]
    return is_outputs_tuple, outputs, columns


# -- second order ------------------------------------------------------------------------------


def _single_element_output(func, inputs, strict, fn_name):
    """Run ``func`` and check that it returned one Tensor with one element."""
    output = func(*inputs)
    is_tuple, outputs = _as_tuple(output, "outputs of the user-provided function", fn_name)
    _check_requires_grad(outputs, "outputs", strict=strict)
    if is_tuple:
        raise RuntimeError(f"The function given to {fn_name} should return a single Tensor")
    if output.size != 1:
        raise RuntimeError(
            f"The Tensor returned by the function given to {fn_name} should contain a single "
            "element"
        )
    return output


def hessian(
    func,
    inputs,
    create_graph=False,
    strict=False,
    vectorize=False,
    outer_jacobian_strategy="reverse-mode",
):
    """The Hessian of a scalar ``func`` at ``inputs``: the Jacobian of its gradient.

    Parameters
    ----------
    func : callable
        Takes the input Tensors and returns a Tensor with a single element.
    inputs : Tensor or tuple of Tensor
        The point at which ``func`` is differentiated.
    create_graph : bool
        Compute the Hessian differentiably.
    strict : bool
        Raise when the output or its gradient is independent of an input (e.g. ``func``
        linear), instead of giving zeros for it.
    vectorize : bool
        Compute the outer Jacobian (of the gradient) in one batched VJP.
    outer_jacobian_strategy : {"reverse-mode", "forward-mode"}
        How the outer Jacobian is computed; see :func:`jacobian`'s ``strategy``.

    Returns
    -------
    Tensor or tuple of tuple of Tensor
        For one input, ``H`` of shape ``input.shape + input.shape``; for a tuple of inputs,
        ``H[i][j]`` of shape ``inputs[i].shape + inputs[j].shape``.

    Examples
    --------
    ``sum(x**3)`` has Hessian ``diag(6x)``:

    >>> import autograd_nb as anb
    >>> from autograd_nb.autograd.functional import hessian
    >>> hessian(lambda x: (x ** 3).sum(), anb.tensor([1.0, 2.0, 3.0]))
    tensor([[ 6.,  0.,  0.],
            [ 0., 12.,  0.],
            [ 0.,  0., 18.]])

    ``sum(outer(x, x)) = (sum x)²``, so its Hessian is 2 everywhere:

    >>> x = anb.tensor([1.0, 2.0, 3.0, 4.0])
    >>> hessian(lambda x: anb.outer(x, x).sum(), x, vectorize=True)
    tensor([[2., 2., 2., 2.],
            [2., 2., 2., 2.],
            [2., 2., 2., 2.],
            [2., 2., 2., 2.]])
    """
    is_inputs_tuple, inputs = _as_tuple(inputs, "inputs", "hessian")
    if outer_jacobian_strategy not in _STRATEGIES:
        raise ValueError('Expected strategy to be either "forward-mode" or "reverse-mode".')

    def scalar_func(*inner_inputs):
        output = _single_element_output(func, inner_inputs, strict, "hessian")
        return FUNCTIONS["reshape"](output, ())

    def gradient_func(*outer_inputs):
        gradient = jacobian(scalar_func, outer_inputs, create_graph=True)
        _check_requires_grad(gradient, "jacobian", strict=strict)
        return gradient

    if outer_jacobian_strategy == "forward-mode" and not create_graph:
        # Forward over reverse: each column is the tangent of the differentiable gradient.
        result = _jacobian_forward(gradient_func, inputs, strict, vectorize, need_graph=True)
    else:
        result = jacobian(
            gradient_func,
            inputs,
            create_graph=create_graph,
            strict=strict,
            vectorize=vectorize,
            strategy=outer_jacobian_strategy,
        )
    return _tuple_postprocess(result, (is_inputs_tuple, is_inputs_tuple))


def vhp(func, inputs, v=None, create_graph=False, strict=False):
    """The vector-Hessian product ``vᵀ · H`` of a scalar ``func`` at ``inputs``.

    Parameters
    ----------
    func : callable
        Takes the input Tensors and returns a Tensor with a single element.
    inputs : Tensor or tuple of Tensor
        The point at which ``func`` is differentiated.
    v : Tensor or tuple of Tensor, optional
        The vector of the product, one per input and of its shape. May be omitted only for
        a single input with a single element (then ones).
    create_graph : bool
        Compute the output and the result differentiably.
    strict : bool
        Raise when the output or its gradient is independent of an input, instead of giving
        zeros for it.

    Returns
    -------
    func_output : Tensor
        ``func(*inputs)``.
    vhp : Tensor or tuple of Tensor
        One per input, of its shape.

    Examples
    --------
    For ``f = sum(outer(x, x)) = (sum x)²`` every entry of ``H`` is 2, so ``vᵀH`` is
    ``2 * v.sum()`` in every entry:

    >>> import autograd_nb as anb
    >>> from autograd_nb.autograd.functional import vhp
    >>> x = anb.tensor([1.0, 2.0, 3.0, 4.0])
    >>> vhp(lambda x: anb.outer(x, x).sum(), x, anb.tensor([1.0, 0.0, 0.0, 1.0]))
    (tensor(100.), tensor([4., 4., 4., 4.]))
    """
    return _second_order_product(func, inputs, v, create_graph, strict, "vhp")


def hvp(func, inputs, v=None, create_graph=False, strict=False):
    """The Hessian-vector product ``H · v`` of a scalar ``func`` at ``inputs``.

    Computed by forward over reverse: the tangent along ``v`` of the differentiable gradient
    (one forward pass of dual tensors, one recorded backward that carries the tangents). On
    ``mlp_train_step``'s loss it took half the time of the double-VJP trick on the gradient
    (two recorded reverse passes; docs/benchmarking.rst, "Forward mode"). ``strict=True`` takes
    that trick, whose checks are torch's. For twice continuously
    differentiable functions ``H`` is symmetric and it agrees with :func:`vhp`.

    Parameters
    ----------
    func : callable
        Takes the input Tensors and returns a Tensor with a single element.
    inputs : Tensor or tuple of Tensor
        The point at which ``func`` is differentiated.
    v : Tensor or tuple of Tensor, optional
        The vector of the product, one per input and of its shape. May be omitted only for
        a single input with a single element (then ones).
    create_graph : bool
        Compute the output and the result differentiably.
    strict : bool
        Raise when the output or its gradient is independent of an input, instead of giving
        zeros for it.

    Returns
    -------
    func_output : Tensor
        ``func(*inputs)``.
    hvp : Tensor or tuple of Tensor
        One per input, of its shape.

    Examples
    --------
    The quadratic form ``xᵀAx`` has Hessian ``A + Aᵀ``:

    >>> import autograd_nb as anb
    >>> from autograd_nb.autograd.functional import hvp
    >>> A = anb.tensor([[1.0, 2.0], [0.0, 3.0]])
    >>> hvp(lambda x: x @ A @ x, anb.tensor([1.0, 1.0]), anb.tensor([1.0, 0.0]))
    (tensor(6.), tensor([2., 2.]))
    """
    if strict:  # (torch's checks, through the double-VJP trick's graph)
        return _second_order_product(func, inputs, v, create_graph, strict, "hvp")
    return _hvp_forward_over_reverse(func, inputs, v, create_graph, strict)


def _hvp_forward_over_reverse(func, inputs, v, create_graph, strict):
    """``hvp`` as the tangent along ``v`` of the differentiable gradient: one forward pass of
    dual tensors and one recorded backward, whose rules carry the tangents."""
    with enable_grad():
        is_inputs_tuple, inputs, v = _inputs_and_v(inputs, v, create_graph, True, "hvp")
        if v is None:  # (a single-element input: the tangent 1)
            v = (Tensor._make(np.ones(inputs[0].shape, dtype=inputs[0].dtype)),)
        with forward_ad.dual_level():
            duals = tuple(forward_ad.make_dual(x, t) for x, t in zip(inputs, v, strict=True))
            output = _single_element_output(func, duals, strict, "hvp")
            gradient = _autograd_grad((output,), duals, create_graph=True)
            _check_requires_grad(gradient, "jacobian", strict=strict)
            tangents = [None if g is None else forward_ad.unpack_dual(g).tangent
                        for g in gradient]
            output = forward_ad.unpack_dual(output).primal
        result = _fill_in_zeros(tangents, inputs, strict, create_graph, "double_back_trick")
    outputs = _grad_postprocess((output,), create_graph)
    result = _grad_postprocess(result, create_graph)
    return _tuple_postprocess(outputs, False), _tuple_postprocess(result, is_inputs_tuple)


def _second_order_product(func, inputs, v, create_graph, strict, fn_name):
    """``vhp``: the VJP of the gradient against ``v``. ``hvp``: the double-VJP trick on it."""
    with enable_grad():
        is_inputs_tuple, inputs, v = _inputs_and_v(inputs, v, create_graph, True, fn_name)
        output = _single_element_output(func, inputs, strict, fn_name)
        gradient = _autograd_grad((output,), inputs, create_graph=True)
        _check_requires_grad(gradient, "jacobian", strict=strict)
        if fn_name == "hvp":
            # u ↦ uᵀH is linear in u (the value of u is irrelevant); its VJP against v is Hv.
            dummy_grad_gradient = tuple(
                Tensor._make(np.zeros(t.shape, dtype=t.dtype), requires_grad=True) for t in inputs
            )
            double_back = _autograd_grad(gradient, inputs, dummy_grad_gradient, create_graph=True)
    with set_grad_enabled(True if create_graph else is_grad_enabled()):
        if fn_name == "hvp":
            grad_result = _autograd_grad(
                double_back, dummy_grad_gradient, v, create_graph=create_graph
            )
            result = _fill_in_zeros(grad_result, inputs, strict, create_graph, "double_back_trick")
        else:
            grad_result = _autograd_grad(gradient, inputs, v, create_graph=create_graph)
            result = _fill_in_zeros(grad_result, inputs, strict, create_graph, "double_back")
    outputs = _grad_postprocess((output,), create_graph)
    result = _grad_postprocess(result, create_graph)
    return _tuple_postprocess(outputs, False), _tuple_postprocess(result, is_inputs_tuple)
