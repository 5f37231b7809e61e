"""Plain NumPy references for every public function, by name.

Each takes NumPy arrays (and the same keyword arguments as the autograd_nb function) and
returns what autograd_nb's forward must return. Tests check that every registered function has
one here.
"""

import numpy as np
import scipy.special


def _logsumexp(x, axis=None, keepdims=False):
    # scipy's logsumexp keeps a (1,) shape for 0-d input with keepdims; NumPy's rules say ().
    x = np.asarray(x)
    shape = np.sum(x, axis=axis, keepdims=keepdims).shape
    flat = np.ravel(x) if axis is None else x
    return np.reshape(scipy.special.logsumexp(flat, axis=None if axis is None else axis,
                                              keepdims=keepdims and axis is not None), shape)


def _as_float(x):
    x = np.asarray(x)
    return x if x.dtype.kind == "f" else x.astype(np.float64)


def _softmax(x, axis=-1):
    x = _as_float(x)
    shifted = x - np.max(x, axis=axis, keepdims=True, initial=-np.inf)
    e = np.exp(shifted)
    return e / e.sum(axis=axis, keepdims=True)


def _log_softmax(x, axis=-1):
    x = _as_float(x)
    shifted = x - np.max(x, axis=axis, keepdims=True, initial=-np.inf)
    return shifted - np.log(np.exp(shifted).sum(axis=axis, keepdims=True))


REFERENCE = {
    # elementwise
    "add": np.add,
    "subtract": np.subtract,
    "multiply": np.multiply,
    "divide": np.divide,
    "power": np.power,
    "maximum": np.maximum,
    "minimum": np.minimum,
    "where": np.where,
    "negative": np.negative,
    "exp": np.exp,
    "expm1": np.expm1,
    "log": np.log,
    "log1p": np.log1p,
    "sqrt": np.sqrt,
    "square": np.square,
    "abs": np.abs,
    "sign": np.sign,
    "sin": np.sin,
    "cos": np.cos,
    "tan": np.tan,
    "arcsin": np.arcsin,
    "arccos": np.arccos,
    "arctan": np.arctan,
    "sinh": np.sinh,
    "cosh": np.cosh,
    "tanh": np.tanh,
    "sigmoid": scipy.special.expit,
    "relu": lambda x: np.maximum(x, 0),
    "softplus": lambda x: np.logaddexp(x, 0),
    "clip": lambda x, a_min=None, a_max=None: np.clip(x, a_min, a_max),
    # reductions
    "sum": np.sum,
    "mean": np.mean,
    "prod": np.prod,
    "max": np.max,
    "min": np.min,
    "var": np.var,
    "std": np.std,
    "logsumexp": _logsumexp,
    "softmax": _softmax,
    "log_softmax": _log_softmax,
    "cumsum": np.cumsum,
    # linear algebra
    "matmul": np.matmul,
    "dot": np.dot,
    "outer": np.outer,
    "einsum": np.einsum,
    # shape
    "reshape": np.reshape,
    "transpose": np.transpose,
    "swapaxes": np.swapaxes,
    "expand_dims": np.expand_dims,
    "squeeze": np.squeeze,
    "broadcast_to": np.broadcast_to,
    "concatenate": np.concatenate,
    "stack": np.stack,
    "ravel": np.ravel,
}
