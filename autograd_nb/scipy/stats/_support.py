"""What every distribution of :mod:`autograd_nb.scipy.stats` shares: SciPy's own function where
no Tensor is among the arguments, parameters outside their domain turned to NaN (with a NaN
gradient), and values outside the support without NaN in the branch that is not taken.

A function of a distribution here is a composition of the registry's differentiable functions
(``autograd_nb.numpy``'s and ``autograd_nb.special``'s names), so it records, differentiates to
any order, batches and runs wherever those do; none has a kernel of its own. The exception is
``multivariate_normal.cdf``, SciPy's integral in an ``autograd.Function``.
"""

import functools

import numpy

from ... import numpy as anp
from ... import special
from ...tensor import Tensor, as_tensor

NAN = float("nan")
INF = float("inf")


def holds_tensor(values):
    return any(isinstance(v, Tensor) for v in values)


def with_scipy_fallback(scipy_function):
    """Decorate a distribution's function ``f(*args, **kwargs)``: where no argument is a
    Tensor it is ``scipy_function`` itself (SciPy's values, NumPy results), as the names of
    ``autograd_nb.numpy`` are NumPy's own on arrays."""

    def decorate(function):
        @functools.wraps(function)
        def dispatch(*args, **kwargs):
            if not holds_tensor(args) and not holds_tensor(kwargs.values()):
                return scipy_function(*args, **kwargs)
            return function(*args, **kwargs)

        return dispatch

    return decorate


def as_float(value):
    """``value`` as a floating Tensor: a Tensor of floats as it is (with its graph), one of
    integers or bools as float64, anything else as a new float64 (or float32) constant."""
    if isinstance(value, Tensor):
        if numpy.issubdtype(value.dtype, numpy.floating):
            return value
        return value.astype(numpy.float64)
    array = numpy.asarray(value)
    if not numpy.issubdtype(array.dtype, numpy.floating):
        array = array.astype(numpy.float64)
    return as_tensor(array)


def nan_unless(valid, parameter):
    """``parameter`` where ``valid``, NaN elsewhere: SciPy's answer for a parameter outside
    its domain. The NaN is added, so every derivative taken downstream of it is NaN too."""
    return parameter + anp.where(valid, 0.0, NAN)


def nan_where_nan(value, *parameters):
    """``value``, NaN where any of ``parameters`` is NaN (a parameter that
    :func:`nan_unless` made NaN): SciPy's answer for an invalid parameter, also where
    ``value`` came from a branch that does not read the parameter (a cdf below the support)."""
    for parameter in parameters:
        value = value + anp.where(parameter == parameter, 0.0, NAN)
    return value


def log_of_complements(p, q):
    """``log(p)`` where ``p + q == 1``: ``log1p(-q)`` where ``p > 1/2`` (its own digits are
    gone there), ``log(p)`` elsewhere, ``-inf`` with a zero gradient where ``p == 0``."""
    large, zero = p > 0.5, p == 0
    small = anp.log(anp.where(large | zero, 1.0, p))
    return anp.where(large, anp.log1p(-anp.where(large, q, 0.0)), anp.where(zero, -INF, small))


def where_safe(inside, value_of, safe_input, x, outside):
    """``value_of(x)`` where ``inside``, ``outside`` elsewhere, with ``value_of`` evaluated at
    ``safe_input`` outside (so that neither the value nor the gradient of the branch that is
    not taken holds a NaN: a NaN times the zero that ``where`` sends it is still NaN)."""
    return anp.where(inside, value_of(anp.where(inside, x, safe_input)), outside)


def xlogy(a, y):
    """``a * log(y)``, 0 where ``a == 0`` and ``y == 0``, differentiable in ``a`` everywhere
    ``y > 0`` (with derivative ``log(y)``, also at ``a == 0``, where ``special.xlogy`` gives
    torch's 0: a shape of 1 is the common case here)."""
    positive = y > 0
    return anp.where(positive, a * anp.log(anp.where(positive, y, 1.0)), special.xlogy(a, y))


def xlog1py(a, b):
    """``a * log1p(b)``, 0 where ``a == 0`` and ``b == -1`` (SciPy's ``xlog1py``), with
    :func:`xlogy`'s derivative in ``a``."""
    return xlogy(a, 1 + b)


def betaln(a, b):
    return special.gammaln(a) + special.gammaln(b) - special.gammaln(a + b)
