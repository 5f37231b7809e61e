"""The CUDA backend: ``device="cuda"`` tensors on numba-cuda device arrays.

Importing this package does not import ``numba.cuda``; :mod:`._device` does it on first use.
The ops run through :mod:`.dispatch`, which imports the CUDA twin that each op names
(:func:`autograd_nb.ops.registry.cuda_twin`) from its family module here (``elementwise``,
``shape``, ``indexing``, ``reduction``, ``linalg``, ``transfer``) on first use.

Examples
--------
>>> import autograd_nb as anb
>>> anb.cuda.is_available() in (True, False)
True
"""

from ._device import is_available, unavailable_reason

__all__ = ["is_available", "unavailable_reason"]
