"""``numpy.random``: NumPy's own. A draw is a constant (nothing records it), so its
functions refuse Tensors (TypeError) rather than silently turn them into constants: write
``mu + sigma * np.random.standard_normal(shape)`` to differentiate through a draw.

>>> import autograd_nb.numpy as np
>>> np.random.default_rng(0).standard_normal(2).shape
(2,)
"""

import numpy.random

from ._wrap import holds_tensor


def _refusing_tensors(name, function):
    def refusing(*args, **kwargs):
        if holds_tensor(args, kwargs):
            raise TypeError(
                f"numpy.random.{name} does not take autograd_nb Tensors: a draw is a "
                "constant, and its parameters would be cut from the graph. Draw standard "
                "variates and transform them (mu + sigma * standard_normal(shape))"
            )
        return function(*args, **kwargs)

    refusing.__name__ = refusing.__qualname__ = name
    refusing.__module__ = __name__
    refusing.__doc__ = f"``numpy.random.{name}``, refusing Tensors."
    return refusing


def __getattr__(name):
    value = getattr(numpy.random, name)  # NumPy's AttributeError for a name it lacks
    if callable(value) and not isinstance(value, type) and not name.startswith("_"):
        value = _refusing_tensors(name, value)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(dir(numpy.random)))
