"""Forward-mode automatic differentiation: dual tensors, with torch's ``forward_ad`` API.

A *dual tensor* carries, beside its value (the primal), a tangent of the same shape and dtype.
Every op run on dual tensors gives its result the tangent that the op's forward rule
(:mod:`autograd_nb.autograd.jvp`) computes: a Jacobian-vector product in one forward pass.

The rules are written with the ops themselves, so tangents are ordinary Tensors: they record
onto the tape and differentiate again (reverse over forward), and a differentiable backward
(``grad(..., create_graph=True)``) run inside a dual level gives its results tangents too
(forward over reverse: Hessian-vector products). Levels nest (torch allows one level; JAX's
nesting is followed here), which gives forward over forward: a tangent computed at an inner
level carries the tangent of an outer one.

A level may be *batched* (``dual_level(batch_shape=(B,))``, beyond torch's API, which
batches with ``vmap``): every tangent at it carries the batch in front, ``(B, *primal.shape)``,
and one pass propagates all ``B`` tangents at once (``jacfwd``-style; the forward rules take
the batch, :mod:`autograd_nb.autograd.jvp`).

Examples
--------
>>> import autograd_nb as anb
>>> import autograd_nb.autograd.forward_ad as fwAD
>>> x = anb.tensor([1.0, 2.0])
>>> with fwAD.dual_level():
...     dual = fwAD.make_dual(x, anb.tensor([1.0, 0.0]))
...     y = anb.sin(dual) * dual
...     primal, tangent = fwAD.unpack_dual(y)
>>> tangent  # d/dx (x sin x) = sin x + x cos x, at x = (1, 2) along (1, 0)
tensor([1.38177329, 0.        ])
>>> fwAD.unpack_dual(y).tangent is None  # the level is closed: no tangent is left
True
"""

import functools
import weakref
from collections import namedtuple

import numpy as np

from ..ops import registry
from ..tensor import Tensor, set_forward
from ..tensor import tensor as _new_tensor
from .jvp import BatchedTangentError, rule_of

__all__ = [
    "UnpackedDualTensor", "dual_level", "enter_dual_level", "exit_dual_level", "make_dual",
    "unpack_dual",
]

NO_LEVEL = (
    "Trying to create a dual Tensor for forward AD but no level exists, make sure to "
    "enter_dual_level() first."
)
NOT_LAST = (
    "Trying to exit a forward AD level that was not the last one that was created. This is "
    "not supported."
)


class _Level:
    """One open dual level: its index, whether its rules are running now (then the ops they
    run propagate no tangent of this level or of a level inside it), and weak references to
    the tensors and saved buffers holding a tangent of it, cleared when it exits."""

    __slots__ = ("index", "batch", "suspended", "tensors", "buffers")

    def __init__(self, index, batch=()):
        self.index = index
        self.batch = batch
        self.suspended = False
        self.tensors = []
        self.buffers = {}  # id(array) -> (weakref to the array, tangent)


#: The open levels, outermost first.
_levels = []


def _current_level():
    return _levels[-1].index if _levels else -1


def _batch_of(batch_shape):
    if batch_shape is None:
        return ()
    batch = (batch_shape,) if isinstance(batch_shape, (int, np.integer)) else batch_shape
    batch = tuple(int(n) for n in batch)
    if any(n < 0 for n in batch):
        raise ValueError(f"dual_level: batch_shape must hold sizes >= 0, got {batch_shape!r}")
    return batch


def enter_dual_level(*, batch_shape=None):
    """Open a new dual level and make it the current one; returns its index.

    Parameters
    ----------
    batch_shape : int or tuple of int, optional
        Batched tangents: every tangent at this level has ``batch_shape`` in front of its
        primal's shape (not in torch, which batches with ``vmap``).

    Returns
    -------
    int
        The new level's index (0 for the outermost).
    """
    level = _Level(len(_levels), _batch_of(batch_shape))
    _levels.append(level)
    set_forward(_SEAM)
    return level.index


def exit_dual_level(*, level=None):
    """Close the current dual level (``level``, if given, must be it): every tangent of that
    level is dropped.

    Raises
    ------
    RuntimeError
        When ``level`` is not the last level entered, or no level is open.
    """
    if level is None:
        level = _current_level()
    if not _levels or level != _levels[-1].index:
        raise RuntimeError(NOT_LAST)
    closing = _levels.pop()
    for ref in closing.tensors:
        dual = ref()
        if dual is not None:
            tangents = getattr(dual, "_tangents", None)
            if tangents is not None:
                tangents.pop(closing, None)
                if not tangents:
                    del dual._tangents
    closing.buffers.clear()
    closing.tensors.clear()
    if not _levels:
        set_forward(None)


class dual_level:  # noqa: N801 (torch's name)
    """Context manager (and decorator) of a dual level: all forward-mode work happens inside
    one. ``with dual_level() as level:`` gives the level's index. ``batch_shape`` (not in
    torch): the level's tangents are batched, see :func:`enter_dual_level`.

    Examples
    --------
    >>> import autograd_nb as anb
    >>> from autograd_nb.autograd import forward_ad as fwAD
    >>> with fwAD.dual_level():
    ...     x = fwAD.make_dual(anb.tensor(3.0), anb.tensor(1.0))
    ...     fwAD.unpack_dual(x * x).tangent
    tensor(6.)

    Batched tangents, the columns of a Jacobian in one pass:

    >>> with fwAD.dual_level(batch_shape=2):
    ...     x = fwAD.make_dual(anb.tensor([1.0, 2.0]), anb.tensor([[1.0, 0.0], [0.0, 1.0]]))
    ...     fwAD.unpack_dual(x * x.sum()).tangent
    tensor([[4., 2.],
            [1., 5.]])
    """

    def __init__(self, *, batch_shape=None):
        self.batch_shape = batch_shape

    def __enter__(self):
        return enter_dual_level(batch_shape=self.batch_shape)

    def __exit__(self, exc_type, exc_value, traceback):
        exit_dual_level()

    def __call__(self, function):
        @functools.wraps(function)
        def wrapper(*args, **kwargs):
            with dual_level(batch_shape=self.batch_shape):
                return function(*args, **kwargs)

        return wrapper


def _level_object(level):
    """The open level of index ``level`` (None: the current one), or None."""
    if level is None:
        return _levels[-1] if _levels else None
    if 0 <= level < len(_levels):
        return _levels[level]
    return None


def _check_tangent(tensor, tangent, batch=()):
    if tensor.dtype.kind not in "fc":
        raise ValueError(
            f"Expected primal to be floating point or complex, but got: {tensor.dtype}"
        )
    if tangent.dtype.kind not in "fc":
        raise ValueError(
            f"Expected tangent to be floating point or complex, but got: {tangent.dtype}"
        )
    if tangent.shape != batch + tensor.shape:
        batched = f" (with the level's batch {list(batch)} in front)" if batch else ""
        raise RuntimeError(
            "Trying to set a forward gradient that has a different size than that of the "
            f"original Tensor, this is not supported. Tensor is of size {list(tensor.shape)}"
            f"{batched} while the given forward gradient is of size {list(tangent.shape)}."
        )
    if tangent.dtype != tensor.dtype:
        raise RuntimeError(
            f"Expected tangent to have the dtype of its primal: the primal is {tensor.dtype}, "
            f"the tangent {tangent.dtype}."
        )
    if tangent.device != tensor.device:
        raise RuntimeError(
            f"Expected tangent to be on the primal's device: the primal is on {tensor.device}, "
            f"the tangent on {tangent.device}."
        )


def make_dual(tensor, tangent, *, level=None):
    """A dual tensor: ``tensor``'s value with ``tangent`` as its forward gradient at ``level``
    (the current level by default).

    The result is a new Tensor sharing ``tensor``'s data (a view, recorded: gradients of the
    result reach ``tensor``). ``tangent`` must have ``tensor``'s shape (behind the level's
    batch, at a batched level), dtype and device.

    Parameters
    ----------
    tensor : Tensor
        The primal, of a floating-point or complex dtype.
    tangent : Tensor or array_like
        Its tangent.
    level : int, optional
        The dual level; the current one by default.

    Raises
    ------
    RuntimeError
        Outside a dual level; a tangent of another shape, dtype or device.
    ValueError
        A primal or tangent of an integer or bool dtype.

    Examples
    --------
    >>> import autograd_nb as anb
    >>> from autograd_nb.autograd import forward_ad as fwAD
    >>> with fwAD.dual_level():
    ...     x = fwAD.make_dual(anb.tensor([1.0, 2.0]), anb.tensor([1.0, 1.0]))
    ...     fwAD.unpack_dual(anb.exp(x)).tangent
    tensor([2.71828183, 7.3890561 ])
    """
    owner = _level_object(level)
    if owner is None:
        raise RuntimeError(NO_LEVEL)
    if not isinstance(tensor, Tensor):
        raise TypeError(f"make_dual expects a Tensor as its primal, not {type(tensor).__name__}")
    if not isinstance(tangent, Tensor):
        tangent = _new_tensor(np.asarray(tangent), device=tensor.device)
    _check_tangent(tensor, tangent, owner.batch)
    if _tangent_at(tensor, owner) is not None:
        raise RuntimeError(
            "Making a dual Tensor based on a Tensor that already has a forward gradient at the "
            f"same level {owner.index} is not supported."
        )
    dual = registry.call_view("reshape", tensor, shape=tensor.shape)
    _SEAM.attach(dual, owner, tangent)
    return dual


_UnpackedDualTensor = namedtuple("_UnpackedDualTensor", ["primal", "tangent"])


class UnpackedDualTensor(_UnpackedDualTensor):
    """The named tuple :func:`unpack_dual` returns: ``primal`` and ``tangent``."""


def unpack_dual(tensor, *, level=None):
    """The primal and the tangent of ``tensor`` at ``level`` (the current one by default).

    ``primal`` is a view of ``tensor``'s value without the tangent of that level (recorded:
    gradients flow through it); ``tangent`` is the tangent as it is, or None where ``tensor``
    has none (or no level is open).

    Examples
    --------
    >>> import autograd_nb as anb
    >>> from autograd_nb.autograd import forward_ad as fwAD
    >>> with fwAD.dual_level():
    ...     x = fwAD.make_dual(anb.tensor(2.0), anb.tensor(1.0))
    ...     primal, tangent = fwAD.unpack_dual(x ** 3)
    >>> primal, tangent
    (tensor(8.), tensor(12.))
    """
    owner = _level_object(level)
    if owner is None:
        return UnpackedDualTensor(tensor, None)
    tangents = getattr(tensor, "_tangents", None)
    tangent = None if tangents is None else tangents.get(owner)
    if tangent is None:
        return UnpackedDualTensor(tensor, None)
    before, owner.suspended = owner.suspended, True  # (the view keeps the other levels')
    try:
        primal = registry.call_view("reshape", tensor, shape=tensor.shape)
    finally:
        owner.suspended = before
    return UnpackedDualTensor(primal, tangent)


def tangent_of(tensor, level):
    """``tensor``'s tangent at the open level of index ``level``, or None (for the functional
    API and the custom Functions)."""
    tangents = getattr(tensor, "_tangents", None)
    if tangents is None:
        return None
    owner = _level_object(level)
    return None if owner is None else tangents.get(owner)


def is_dual(value):
    """Whether ``value`` is a Tensor with a tangent at some open, unsuspended level."""
    tangents = getattr(value, "_tangents", None)
    if not tangents:
        return False
    return any(not level.suspended and level in tangents for level in _levels)


def copy_tangents(source, target):
    """Give ``target`` (a Tensor of ``source``'s shape and dtype: a detached copy) the tangents
    ``source`` has at the open levels (for the functional API's fresh inputs)."""
    tangents = getattr(source, "_tangents", None)
    if tangents:
        for level in _levels:
            if level in tangents:
                _SEAM.attach(target, level, tangents[level])


def no_rule_error(op_name):
    """The error of an op run on a dual tensor whose op has no forward rule."""
    return NotImplementedError(
        f"Trying to use forward AD with {op_name} that does not support it: the op "
        f"{op_name!r} has no forward-mode (JVP) rule (docs/forward-mode.rst)."
    )


NO_FUNCTION_JVP = (
    "You must implement the jvp function for custom autograd.Function to use it with forward "
    "mode AD: {name} has no jvp staticmethod"
)


def function_tangents(function, ctx, args, outputs):
    """Give the outputs of the custom Function ``function`` (``Function.apply``) their
    tangents: its ``jvp(ctx, *tangents)`` staticmethod, as torch's (one tangent per
    argument, None where it has none; one per output back). A Function without one refuses
    dual arguments (NotImplementedError), never giving a wrong tangent. At a batched level
    the ``jvp`` runs once per tangent of the batch where the Function says it may
    (``generate_vmap_rule = True``, torch's flag for ``vmap``); otherwise it refuses
    (:class:`~autograd_nb.autograd.jvp.BatchedTangentError`: ``functional.jacobian`` then
    takes one pass per tangent)."""
    for position, level in enumerate(_levels):
        if level.suspended:
            continue
        tangents = [_tangent_at(arg, level) for arg in args]
        if all(t is None for t in tangents):
            continue
        jvp = getattr(function, "jvp", None)
        if jvp is None:
            raise NotImplementedError(NO_FUNCTION_JVP.format(name=function.__name__))
        if level.batch:
            if not getattr(function, "generate_vmap_rule", False):
                raise BatchedTangentError(function.__name__)
            results = _suspended(position, _jvp_per_tangent, jvp, ctx, tangents, level.batch,
                                 outputs)
        else:
            results = _suspended(position, jvp, ctx, *tangents)
        if not isinstance(results, tuple):
            results = (results,)
        for output, tangent in zip(outputs, results, strict=False):
            if tangent is not None and isinstance(output, Tensor):
                _SEAM.attach(output, level, _fit(tangent, output, level.batch))


def _jvp_per_tangent(jvp, ctx, tangents, batch, outputs):
    """A custom Function's ``jvp`` once per tangent of the batch, stacked per output."""
    count = int(np.prod(batch))
    rows = [None if t is None else t.reshape((count,) + t.shape[len(batch):])
            for t in tangents]
    per_output = None
    for b in range(count):
        results = jvp(ctx, *[None if r is None else r[b, ...] for r in rows])
        results = results if isinstance(results, tuple) else (results,)
        if per_output is None:
            per_output = [[] for _ in results]
        for column, result in zip(per_output, results, strict=True):
            column.append(result)
    stacked = []
    for column, output in zip(per_output, outputs, strict=False):
        if all(r is None for r in column):
            stacked.append(None)
            continue
        column = [registry.call("reshape", np.zeros(output.shape, dtype=output.dtype),
                                shape=output.shape) if r is None else r for r in column]
        stacked.append(registry.call("stack", *column, axis=0).reshape(
            batch + tuple(output.shape)))
    return tuple(stacked)


class _Seam:
    """What :func:`autograd_nb.tensor.set_forward` installs while a level is open."""

    def attach(self, dual, level, tangent):
        tangents = getattr(dual, "_tangents", None)
        if tangents is None:
            tangents = dual._tangents = {}
        tangents[level] = tangent
        level.tensors.append(weakref.ref(dual))
        self.keep(dual._data, level, tangent)

    @staticmethod
    def keep(array, level, tangent):
        """Remember ``tangent`` for the buffer ``array`` (a differentiable backward rebuilds
        Tensors from saved buffers: :meth:`saved`)."""
        key = id(array)
        buffers = level.buffers

        def forget(_, key=key, buffers=buffers):
            buffers.pop(key, None)

        try:
            buffers[key] = (weakref.ref(array, forget), tangent)
        except TypeError:  # (an object without weak references: not kept)
            pass

    def ran(self, op, args, arrays, attrs, result):
        for arg in args:
            if getattr(arg, "_tangents", None):
                break
        else:
            return
        for position, level in enumerate(_levels):
            if level.suspended:
                continue
            tangents = [_tangent_at(arg, level) for arg in args]
            if all(t is None for t in tangents):
                continue
            rule = rule_of(op)
            if rule is None:
                raise no_rule_error(op.name)
            tangent = _suspended(position, rule, tangents, args, result, attrs)
            for array, arg, t in zip(arrays, args, tangents, strict=False):
                if t is not None and isinstance(arg, Tensor) and array is not arg._data:
                    self.keep(array, level, t)
            if tangent is not None:
                self.attach(result, level, _fit(tangent, result, level.batch))

    def wrote(self, target, result):
        """``target`` holds ``result``'s value now (an in-place update): its tangents."""
        tangents = getattr(result, "_tangents", None)
        if getattr(target, "_tangents", None) is not None:
            del target._tangents
        if tangents:
            for level, tangent in tangents.items():
                if level in _levels:
                    self.attach(target, level, _fit(tangent, target, level.batch))

    def saved(self, tensors, arrays):
        for tensor, array in zip(tensors, arrays, strict=True):
            if tensor is None or array is None or getattr(tensor, "_tangents", None):
                continue
            for level in _levels:
                if level.suspended:
                    continue
                kept = level.buffers.get(id(array))
                if kept is None or kept[0]() is not array:
                    continue
                tangent = kept[1]
                if tangent.shape != level.batch + tensor.shape:
                    tangent = tangent.reshape(level.batch + tensor.shape)
                self.attach(tensor, level, tangent)


def _suspended(position, function, *args):
    """``function(*args)`` with the level at ``position`` and those inside it suspended: the
    ops of a rule propagate the tangents of the outer levels only (no perturbation
    confusion), and a suspended level stays so when the rule returns."""
    inner = _levels[position:]
    before = [each.suspended for each in inner]
    for each in inner:
        each.suspended = True
    try:
        return function(*args)
    finally:
        for each, flag in zip(inner, before, strict=True):
            each.suspended = flag


def _tangent_at(arg, level):
    tangents = getattr(arg, "_tangents", None)
    return None if tangents is None else tangents.get(level)


def _fit(tangent, result, batch=()):
    """A rule's ``tangent`` in the result's dtype (a real tangent of a complex result, ...),
    checked for its shape (``batch + result.shape`` at a batched level)."""
    if not isinstance(tangent, Tensor):
        tangent = _new_tensor(np.asarray(tangent), device=result.device)
    if tangent.shape != batch + result.shape:
        raise RuntimeError(
            f"internal error: a forward rule gave a tangent of shape {tangent.shape} for a "
            f"result of shape {result.shape}"
            + (f" and tangents batched as {batch}" if batch else "")
        )
    if tangent.dtype != result.dtype:
        if tangent.dtype.kind == "c" and result.dtype.kind != "c":
            tangent = registry.call("_real", tangent)
        tangent = tangent.astype(result.dtype)
    return tangent


_SEAM = _Seam()
