"""``numpy.linalg``'s names, differentiable: ``np.linalg.norm(t)`` with
``import autograd_nb.numpy as np``.

The functions are those of :mod:`autograd_nb.linalg`; on inputs that hold no Tensor each is
NumPy's own. A ``numpy.linalg`` name that :mod:`autograd_nb.linalg` does not have raises
``NotImplementedError`` naming it.

>>> import autograd_nb.numpy as np
>>> np.linalg.matmul([[1.0, 2.0]], [[3.0], [4.0]])
array([[11.]])
"""

import numpy

from .. import linalg as _linalg
from ._wrap import differentiable, not_provided

LinAlgError = numpy.linalg.LinAlgError


def tensor_implementation(name):
    """What ``numpy.linalg.<name>`` runs on Tensors, or None where autograd_nb has nothing."""
    if name not in _linalg.NUMPY_NAMES:
        return None
    return getattr(_linalg, name, None)


def __getattr__(name):
    if name.startswith("__") or not hasattr(numpy.linalg, name):
        raise AttributeError(f"module 'autograd_nb.numpy.linalg' has no attribute {name!r}")
    ours = tensor_implementation(name)
    if ours is None:
        raise not_provided(f"numpy.linalg.{name}")
    value = differentiable(f"numpy.linalg.{name}", ours, getattr(numpy.linalg, name))
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_linalg.provided()))
