"""autograd_nb: reverse-mode automatic differentiation with torch.autograd's semantics, over
NumPy-named functions, compiled with numba.

>>> import autograd_nb as anb
>>> x = anb.tensor([1.0, 2.0, 3.0, 4.0], requires_grad=True)
>>> y = anb.outer(x, x)
>>> anb.grad(y, x, grad_outputs=anb.ones_like(y))
(tensor([20., 20., 20., 20.]),)
"""

# First: numba must use autograd_nb's cache locator (:func:`.cache.install`) before the
# package's first ``cache=True`` function is made.
from . import cache as _cache
from . import tensor as _tensor_module
from .ops.registry import FUNCTIONS as _FUNCTIONS
from .tensor import (  # noqa: F401
    Tensor,
    arange,
    as_tensor,
    empty,
    empty_like,
    eye,
    full,
    full_like,
    ones,
    ones_like,
    tensor,
    zeros,
    zeros_like,
)

globals().update({name: fn for name, fn in _FUNCTIONS.items() if not name.startswith("_")})

from . import autograd  # noqa: E402
from .autograd import (  # noqa: E402,F401
    backward,
    checkpoint,
    cond,
    enable_grad,
    fori_loop,
    grad,
    is_grad_enabled,
    no_grad,
    scan,
    set_grad_enabled,
    while_loop,
)

__version__ = "0.1.0"

__all__ = (
    ["Tensor", "autograd", "backward", "compile", "CompiledFunction", "CompileWarning", "grad",
     "no_grad", "enable_grad", "set_grad_enabled", "is_grad_enabled",
     "checkpoint", "scan", "fori_loop", "while_loop", "cond"]
    + list(_tensor_module.CREATION)
    # (``linalg.solve`` and ``special.erf`` live in their namespaces, not at the top level)
    + sorted(name for name in _FUNCTIONS if not name.startswith("_") and "." not in name)
)
from . import _cpython, collector, config, layout, linalg, special, viz  # noqa: E402,F401
from . import numpy as _numpy_namespace  # noqa: E402
from . import tiering as _tiering  # noqa: E402
from .engine import graph_reader as _graph_reader  # noqa: E402
from .ops import _pointers as _array_pointers  # noqa: E402
from .ops.registry import REGISTRY as _REGISTRY  # noqa: E402
from .replay import CompiledFunction, CompileWarning, compile  # noqa: E402,F401,A004


def _capabilities():
    """What runs here: ``{"allowed": ..., "reasons_off": [...], "array_pointers": ...,
    "object_layout": ..., "graph_reader": ..., "gc_untracking": ...}`` (see
    :mod:`autograd_nb._cpython` for what each is)."""
    return {
        "allowed": _cpython.ALLOWED,
        "reasons_off": _cpython.reasons_off(),
        "array_pointers": bool(_array_pointers.SUPPORTED),
        "object_layout": bool(layout.SUPPORTED),
        "graph_reader": _graph_reader.found_layout() is not None,
        "gc_untracking": collector.load_compiled_walk(),
    }


# The lower layers import nothing above them: what they call up here is handed in.
_tensor_module.provide("backward", backward)
_tensor_module.provide("numpy", _numpy_namespace)
config._reports.update(cache_info=_cache.cache_info, capabilities=_capabilities)

_tiering.start(_REGISTRY)  # NumPy serves ops whose kernels are not cached yet (tiering.py)
