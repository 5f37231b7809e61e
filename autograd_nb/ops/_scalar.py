"""The scalar vocabulary that elementwise formulas are written in.

An elementwise op's forward and derivative are one-line formulas over scalars (``"g * cos(x)"``).
Generated kernels import their names from here (and ``math``); the engine evaluates the same
formula over Tensors when it records a differentiable backward. So every name used in a formula
must exist both here (as a numba-compilable scalar function) and as an op of the same name.
"""

import math

from numba import njit

# Names taken straight from ``math`` (numba compiles them to libm calls).
MATH_NAMES = (
    "exp",
    "expm1",
    "log",
    "log1p",
    "sqrt",
    "sin",
    "cos",
    "tan",
    "arcsin",
    "arccos",
    "arctan",
    "sinh",
    "cosh",
    "tanh",
)

_MATH_ALIASES = {"arcsin": "asin", "arccos": "acos", "arctan": "atan"}


def math_import_line():
    """The import statement that brings the libm names into a generated kernel module."""
    parts = []
    for name in MATH_NAMES:
        source = _MATH_ALIASES.get(name, name)
        parts.append(name if source == name else f"{source} as {name}")
    return "from math import " + ", ".join(parts)


@njit(cache=True)
def where(condition, if_true, if_false):
    return if_true if condition else if_false


@njit(cache=True)
def maximum(a, b):
    # NaN propagates, as numpy.maximum.
    if a != a:
        return a
    if b != b:
        return b
    return a if a >= b else b


@njit(cache=True)
def minimum(a, b):
    if a != a:
        return a
    if b != b:
        return b
    return a if a <= b else b


@njit(cache=True)
def sign(x):
    if x > 0:
        return 1.0
    if x < 0:
        return -1.0
    return x * 0.0  # keeps 0.0 and NaN


@njit(cache=True)
def sigmoid(x):
    # Two branches so that exp never overflows.
    if x >= 0:
        return 1.0 / (1.0 + math.exp(-x))
    z = math.exp(x)
    return z / (1.0 + z)


SCALAR_NAMES = ("where", "maximum", "minimum", "sign", "sigmoid")
