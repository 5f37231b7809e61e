"""How a NumPy name becomes a function of ``autograd_nb.numpy``: differentiable functions run
autograd_nb's op on Tensors and NumPy's own function on anything else; non-differentiable ones
run NumPy's function on the Tensors' data and give Tensors without grad."""

import numpy

from .. import tape
from ..ops import registry
from ..tensor import Tensor, _host, active_trace, as_tensor


class NotProvidedError(NotImplementedError, AttributeError):
    """A NumPy name that autograd_nb does not provide (yet).

    A NotImplementedError naming it; also an AttributeError, so that ``hasattr`` and
    ``getattr(module, name, default)`` keep their meaning.
    """

    __module__ = "autograd_nb.numpy"


def not_provided(qualified):
    return NotProvidedError(
        f"{qualified} is not provided by autograd_nb (yet): it has no gradient here. See "
        "docs/numpy.rst for what autograd_nb.numpy provides."
    )


def holds_tensor(args, kwargs=None):
    """Whether a Tensor is among ``args`` (or the values of ``kwargs``), or in a list or tuple
    among them (``concatenate([a, b])``)."""
    for value in args:
        if isinstance(value, Tensor):
            return True
        kind = type(value)
        if (kind is list or kind is tuple) and holds_tensor(value):
            return True
    return bool(kwargs) and holds_tensor(kwargs.values())


def drop_out(qualified, kwargs):
    """Remove ``out=None`` from ``kwargs``; any other ``out`` raises TypeError: the result is a
    new Tensor, and writing it into an array would detach it."""
    out = kwargs.pop("out", None)
    if isinstance(out, tuple) and all(o is None for o in out):
        out = None
    if out is not None:
        raise TypeError(
            f"{qualified} with out= is not supported on autograd_nb Tensors: the result is a "
            "new Tensor (writing it into an array would detach it); assign the result instead"
        )


def differentiable(qualified, ours, theirs):
    """``qualified`` (``"numpy.sin"``): ``ours`` where a Tensor is among the arguments, else
    ``theirs``, NumPy's function, with NumPy's result."""

    def function(*args, **kwargs):
        if holds_tensor(args, kwargs):
            if "out" in kwargs:
                drop_out(qualified, kwargs)
            return ours(*args, **kwargs)
        return theirs(*args, **kwargs)

    _name(function, qualified)
    function.__doc__ = (
        f"``{qualified}``, recorded when given Tensors (it is then "
        f"``autograd_nb.{ours.__name__}``); on other inputs ``{qualified}`` itself."
    )
    return function


#: The comparisons that order their operands, refused on complex Tensors as the operators
#: refuse them (``Tensor.__lt__``).
_ORDERINGS = frozenset(
    f"numpy.{name}" for name in ("less", "less_equal", "greater", "greater_equal")
)


def constant(qualified, theirs, grad_refused_from=None):
    """``qualified``, a function with no gradient (a rounding, a comparison, an index, a
    creation function): NumPy's function on the Tensors' data. Where it was given a Tensor,
    its arrays and NumPy scalars come back as Tensors without grad on that Tensor's device;
    Python values (``np.shape``'s tuple, ``np.allclose``'s bool) as they are.

    ``grad_refused_from``: for functions whose result would depend on a value differentiably
    (``full``'s fill value, ``linspace``'s ends), the first argument position where a Tensor
    that requires grad is refused (TypeError) rather than silently cut from the graph.
    """
    implementation = getattr(theirs, "_implementation", theirs)  # NumPy's, without dispatch

    def function(*args, **kwargs):
        if not holds_tensor(args, kwargs):
            return theirs(*args, **kwargs)
        if grad_refused_from is not None:
            _refuse_grad(qualified, args[grad_refused_from:], kwargs)
        devices = []
        args = [_unwrap(a, devices, qualified) for a in args]
        kwargs = {k: _unwrap(v, devices, qualified) for k, v in kwargs.items()}
        if qualified in _ORDERINGS and any(numpy.iscomplexobj(a) for a in args):
            raise registry.complex_error(f"{qualified} (an ordering comparison)",
                                         numpy.result_type(*args))
        result = implementation(*args, **kwargs)
        return _as_tensors(result, "cuda" if "cuda" in devices else "cpu")

    _name(function, qualified)
    function.no_gradient = True
    function.__doc__ = (
        f"``{qualified}``, not differentiable: given Tensors it returns Tensors without grad "
        "(bool, int or float) where NumPy returns arrays, and NumPy's Python values "
        "(shapes, bools) as they are."
    )
    return function


def _name(function, qualified):
    """Name ``function`` as ``autograd_nb.<qualified>`` (so that pickle finds it there)."""
    module, _, name = qualified.rpartition(".")
    function.__name__ = function.__qualname__ = name
    function.__module__ = f"autograd_nb.{module}"


def _refuse_grad(qualified, args, kwargs):
    if not tape.is_grad_enabled():
        return
    for value in list(args) + list(kwargs.values()):
        if isinstance(value, Tensor) and value.requires_grad:
            raise TypeError(
                f"{qualified} is not differentiable in autograd_nb: its result would not "
                "carry the gradient of the Tensor that requires grad passed to it. Pass a "
                "number (float(t)) or a detached Tensor, or build the result from "
                "differentiable functions"
            )


#: Functions without a gradient whose result depends on their arguments' shapes and dtypes
#: alone (``autograd_nb.compile`` lets a recorded function call them).
SHAPE_ONLY = frozenset(
    f"numpy.{name}" for name in ("shape", "ndim", "size", "result_type", "iscomplexobj",
                                 "isrealobj", "min_scalar_type", "can_cast")
)


def _unwrap(value, devices, qualified=None):
    """``value``'s host data (Tensors in lists and tuples too), for NumPy's ``qualified``."""
    if isinstance(value, Tensor):
        if qualified not in SHAPE_ONLY:
            trace = active_trace()  # (``anb.compile`` recording: see ``tensor.recorder``)
            if trace is not None:
                trace.read_value(value, f"{qualified}, which has no gradient")
        devices.append(value.device)
        return _host(value._data)
    kind = type(value)
    if kind is list or kind is tuple:
        return kind(_unwrap(v, devices, qualified) for v in value)
    return value


def _as_tensors(value, device):
    if isinstance(value, (numpy.ndarray, numpy.generic)):
        return as_tensor(numpy.asarray(value), device=device)
    kind = type(value)
    if kind is list or kind is tuple:
        return kind(_as_tensors(v, device) for v in value)
    return value
