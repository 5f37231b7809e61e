"""NumPy's names, differentiable: ``import autograd_nb.numpy as np``.

Each name is NumPy's, with NumPy's arguments:

- a differentiable function (one of the op registry's public functions, under its NumPy name
  or an alias such as ``absolute`` for ``abs``) records when a Tensor is among its arguments,
  and on anything else is NumPy's own function, returning what NumPy returns;
- a function with no gradient (comparisons, ``argmax``, ``nonzero``, ``shape``,
  creation functions: ``CONSTANT_FUNCTIONS``) runs NumPy's function on the Tensors' data and
  gives Tensors without grad where NumPy gives arrays;
- dtypes, scalar types and constants (``float64``, ``pi``, ``newaxis``) are NumPy's;
- ``linalg`` is :mod:`autograd_nb.numpy.linalg`, ``fft`` :mod:`autograd_nb.numpy.fft`,
  ``random`` NumPy's, refusing Tensors;
- any other NumPy name raises ``NotImplementedError`` naming it.

Names resolve on first use and then stay: a function registered in an op family file (or
defined in :mod:`autograd_nb.linalg`) appears here with no change to this module. A NumPy name
that is not a function (``np.r_``) is added by publishing it to the registry
(``registry.publish(obj, "r_", method=False)``): objects that are not plain functions appear
as they are.

``Tensor.__array_ufunc__`` and ``Tensor.__array_function__`` (:func:`array_ufunc`,
:func:`array_function`) send NumPy's own functions here, so ``numpy.sin(t)`` records too.

>>> import autograd_nb as anb
>>> import autograd_nb.numpy as np
>>> x = anb.tensor([0.0, 1.0], requires_grad=True)
>>> np.sum(np.sin(x) * 2.0)
tensor(1.68294197, grad_fn=<SumBackward>)
>>> np.sin(0.0)
np.float64(0.0)
>>> np.argmax(x * 1.5)
tensor(1)
>>> np.polynomial
Traceback (most recent call last):
...
autograd_nb.numpy.NotProvidedError: numpy.polynomial is not provided by autograd_nb (yet): ...
"""

# Imported under private names: a global here would hide the NumPy name it shares
# (``dtypes``), as ``where`` and ``copy`` below do on purpose.
import types as _types

import numpy

from .. import dtypes as _dtypes
from ..ops.registry import FUNCTIONS as _FUNCTIONS
from ..tensor import Tensor as _Tensor
from ..tensor import _stacked
from ._wrap import NotProvidedError  # noqa: F401  (autograd_nb.numpy.NotProvidedError)
from ._wrap import constant as _constant
from ._wrap import differentiable as _differentiable
from ._wrap import drop_out as _drop_out
from ._wrap import holds_tensor as _holds_tensor
from ._wrap import not_provided as _not_provided

#: NumPy names served by a registered function of another name (used when the NumPy name
#: itself is not registered).
ALIASES = {
    "absolute": "abs",
    "fabs": "abs",
    "amax": "max",
    "amin": "min",
    "concat": "concatenate",
    "permute_dims": "transpose",
    "pow": "power",
    "true_divide": "divide",
    "acos": "arccos",
    "asin": "arcsin",
    "atan": "arctan",
    "acosh": "arccosh",
    "asinh": "arcsinh",
    "atanh": "arctanh",
    "atan2": "arctan2",
    "around": "round",
    "mod": "remainder",
}

#: NumPy functions with no gradient: piecewise constant in their inputs (rounding,
#: comparisons, indices), or computing from shapes and dtypes only. A registered function of
#: the same name (a rounding with a zero gradient) takes precedence.
CONSTANT_FUNCTIONS = frozenset(
    # rounding and sign tests
    "floor ceil trunc rint fix round around floor_divide signbit "
    # comparisons and logic
    "greater greater_equal less less_equal equal not_equal isclose allclose array_equal "
    "array_equiv logical_and logical_or logical_not logical_xor any all "
    "bitwise_and bitwise_or bitwise_xor bitwise_not bitwise_invert invert "
    "isnan isinf isfinite isneginf isposinf isreal iscomplex isrealobj iscomplexobj isscalar "
    # indices and counts
    "argmax argmin argsort argpartition argwhere nonzero flatnonzero count_nonzero "
    "searchsorted digitize lexsort unravel_index ravel_multi_index "
    # shapes and dtypes
    "shape ndim size result_type can_cast promote_types min_scalar_type broadcast_shapes "
    # creation
    "zeros ones empty full zeros_like ones_like empty_like full_like arange "
    "eye identity tri indices tril_indices triu_indices diag_indices "
    "tril_indices_from triu_indices_from diag_indices_from".split()
)

#: Creation functions whose values come from an argument: a Tensor that requires grad there
#: raises TypeError (the result could not carry its gradient), from this position on.
GRAD_REFUSED_FROM = {
    "full": 1,
    "full_like": 1,
    "arange": 0,
}

#: NumPy classes passed as they are (besides the scalar types): they hold no data to
#: differentiate.
PASSED_TYPES = frozenset("dtype errstate finfo iinfo ndarray ufunc ndindex".split())

#: NumPy submodules passed as they are: they compute nothing on Tensors.
PASSED_MODULES = frozenset("dtypes exceptions typing testing".split())

#: NumPy objects that are not functions but would turn Tensors into constants: not passed.
NOT_PASSED = frozenset({"r_", "c_"})

_OPERANDS = (_Tensor, numpy.ndarray, float, int)

_implementations = {}
_for_function = {}


def tensor_implementation(name):
    """What ``numpy.<name>`` runs on Tensors, or None where autograd_nb has nothing for it."""
    found = _implementations.get(name)
    if found is not None:
        return found
    found = _OWN.get(name)
    if found is None:
        found = _FUNCTIONS.get(name)
    if found is None and name in ALIASES:
        found = _FUNCTIONS.get(ALIASES[name])
    if found is None and name in CONSTANT_FUNCTIONS and hasattr(numpy, name):
        found = _constant(f"numpy.{name}", getattr(numpy, name), GRAD_REFUSED_FROM.get(name))
    if found is not None:
        _implementations[name] = found
    return found


def _value(name):
    """``autograd_nb.numpy.<name>``, or the error for a name it does not have."""
    if name.startswith("__") or not hasattr(numpy, name):
        raise AttributeError(f"module 'autograd_nb.numpy' has no attribute {name!r}")
    theirs = getattr(numpy, name)
    if name in PASSED_MODULES:
        return theirs
    if isinstance(theirs, _types.ModuleType):
        raise _not_provided(f"numpy.{name}")
    ours = tensor_implementation(name) if name in _FUNCTIONS or callable(theirs) else None
    if ours is not None:
        if not isinstance(ours, _types.FunctionType) or getattr(ours, "no_gradient", False):
            return ours  # an object published as it is (np.r_), or a constant function
        return _differentiable(f"numpy.{name}", ours, theirs)
    if isinstance(theirs, type):
        if issubclass(theirs, numpy.generic) or name in PASSED_TYPES:
            return theirs
    elif not callable(theirs) and name not in NOT_PASSED:
        return theirs  # pi, e, inf, nan, newaxis, ...
    raise _not_provided(f"numpy.{name}")


def __getattr__(name):
    value = _value(name)
    globals()[name] = value  # resolved once: later uses are plain attribute reads
    return value


def __dir__():
    names = {n for n in globals() if not n.startswith("_")}
    names.update(n for n in dir(numpy) if not n.startswith("_") and _provides(n))
    return sorted(names)


def _provides(name):
    try:
        _value(name)
    except AttributeError:
        return False
    return True


# -- functions written here ------------------------------------------------------------------


def where(condition, *values):
    """``numpy.where``: ``where(condition, x, y)`` is differentiable in ``x`` and ``y``;
    ``where(condition)`` is ``nonzero(condition)`` (index Tensors without grad).

    >>> import autograd_nb as anb
    >>> import autograd_nb.numpy as np
    >>> x = anb.tensor([-1.0, 2.0], requires_grad=True)
    >>> np.where(x > 0, x, 0.0)
    tensor([0., 2.], grad_fn=<WhereBackward>)
    >>> np.where(x > 0)
    (tensor([1]),)
    """
    if not values:
        return tensor_implementation("nonzero")(condition)
    if len(values) != 2:
        raise ValueError("either both or neither of x and y should be given")
    if _holds_tensor((condition,) + values):
        return _FUNCTIONS["where"](condition, *values)
    return numpy.where(condition, *values)


def array(object, dtype=None, **kwargs):
    """``numpy.array``; given Tensors (a Tensor, or a list or tuple holding Tensors) a new
    Tensor, recorded: a copy, or the items stacked.

    >>> import autograd_nb as anb
    >>> import autograd_nb.numpy as np
    >>> a = anb.tensor(1.0, requires_grad=True)
    >>> np.array([a, a * 2])
    tensor([1., 2.], grad_fn=<StackBackward>)
    """
    if not _holds_tensor((object,)):
        return numpy.array(object, dtype, **kwargs)
    copy = kwargs.pop("copy", True)
    if kwargs:
        raise TypeError(f"numpy.array: {sorted(kwargs)} are not supported with Tensors")
    if isinstance(object, _Tensor):
        if not copy:
            return asarray(object, dtype)
        result = _FUNCTIONS["reshape"](object, object.shape)  # a new buffer, recorded
    else:
        result = _stacked(object)
    if dtype is not None and _dtypes.for_request(dtype) != result.dtype:
        result = result.astype(dtype)
    return result


def _as_array(theirs):
    def function(a, dtype=None, **kwargs):
        if isinstance(a, _Tensor):
            if dtype is None or _dtypes.for_request(dtype) == a.dtype:
                return a
            return a.astype(dtype)
        if _holds_tensor((a,)):
            return array(a, dtype)
        return theirs(a, dtype, **kwargs)

    function.__name__ = function.__qualname__ = theirs.__name__
    function.__doc__ = (
        f"``numpy.{theirs.__name__}``; a Tensor comes back as it is (still recorded), a list "
        "holding Tensors stacked. NumPy's own function detaches, this one does not."
    )
    return function


asarray = _as_array(numpy.asarray)
asanyarray = _as_array(numpy.asanyarray)
ascontiguousarray = _as_array(numpy.ascontiguousarray)


def copy(a, **kwargs):
    """``numpy.copy``; a Tensor gives a new Tensor, recorded."""
    if isinstance(a, _Tensor):
        return array(a)
    return numpy.copy(a, **kwargs)


_OWN = {"where": where, "copy": copy}


# -- NumPy's protocols (Tensor.__array_ufunc__, Tensor.__array_function__) --------------------


def array_ufunc(ufunc, method, inputs, kwargs):
    """``Tensor.__array_ufunc__`` (NEP 13): ``numpy.sin(t)``, ``array + t``."""
    name = ufunc.__name__
    for value in inputs:
        kind = type(value)
        if kind not in _OPERANDS and getattr(kind, "__array_ufunc__", None) is not None:
            if not isinstance(value, (_Tensor, numpy.ndarray)):
                return NotImplemented  # another library's array: let it answer
    if method != "__call__":
        raise TypeError(
            f"numpy.{name}.{method} is not supported on autograd_nb Tensors (only calls such "
            f"as numpy.{name}(t) are)"
        )
    if "out" in kwargs:
        _drop_out(f"numpy.{name}", kwargs)
    if kwargs:
        raise TypeError(
            f"numpy.{name}: the arguments {', '.join(sorted(kwargs))} are not supported on "
            "autograd_nb Tensors"
        )
    implementation = tensor_implementation(name)
    if implementation is None:
        raise TypeError(_unsupported(f"numpy.{name}"))
    return implementation(*inputs)


def array_function(func, types, args, kwargs):
    """``Tensor.__array_function__`` (NEP 18): ``numpy.sum(t)``, ``numpy.linalg.norm(t)``."""
    for kind in types:
        if not issubclass(kind, (_Tensor, numpy.ndarray)):
            return NotImplemented
    implementation = _for_function.get(func)
    if implementation is None:
        implementation = _implementation_of(func)
        if implementation is None:
            raise TypeError(_unsupported(f"{func.__module__}.{func.__name__}"))
        _for_function[func] = implementation
    if "out" in kwargs:
        _drop_out(f"{func.__module__}.{func.__name__}", kwargs)
    return implementation(*args, **kwargs)


def _implementation_of(func):
    module, name = func.__module__, func.__name__
    if module == "numpy":
        return tensor_implementation(name)
    if module == "numpy.linalg":
        return linalg.tensor_implementation(name)
    if module == "numpy.fft":
        return fft.tensor_implementation(name)
    return None


def _unsupported(qualified):
    return (
        f"{qualified} is not supported on autograd_nb Tensors: autograd_nb does not "
        "differentiate it (yet), and converting the Tensors would silently cut them from the "
        "graph. Call it on t.detach().numpy() for a constant result; see docs/numpy.rst"
    )


from . import fft, linalg, random  # noqa: E402,F401  (submodules, as NumPy's)
