"""Special functions with SciPy's ``scipy.special`` names: ``anb.special.erf(x)``.

This namespace holds no code of its own. It shows the public functions of the op registry
registered as ``"special.<name>"`` (in their family files, ``ops/special.py`` and
``ops/special_bessel.py``): ``erf``, ``erfc``, ``erfinv``, ``erfcinv``, ``gammaln``,
``digamma`` (``psi``), ``polygamma``, ``gamma``, ``rgamma``, ``gammasgn``, ``beta``,
``betaln``, ``multigammaln``, ``gammainc``, ``gammaincc``, ``betainc``, ``logit``, ``expit``,
``xlogy``, ``ndtr``, ``log_ndtr``, ``i0``, ``i1``, and the Bessel functions ``j0``, ``j1``,
``jn``, ``y0``, ``y1``, ``yn``, ``iv``, ``ive``, and ``jv``, ``yv``, ``kv``, ``kve``, ``k0``,
``k1``, ``k0e``, ``k1e``, ``i0e``, ``i1e`` (SciPy's compiled functions, CPU tensors only);
:mod:`autograd_nb.scipy.special` shows the same. Each is elementwise, broadcasting and runs on
CPU and (but those ten) CUDA tensors; each is
differentiable to any order in its argument ``x``, but for the incomplete functions'
derivatives in their shape parameters (``a``, ``b``), which differentiate again only in
``x``. An order (``polygamma``'s ``n``, the Bessel functions' ``n`` and ``v``) has no
derivative: a backward that needs its gradient raises.

>>> import autograd_nb as anb
>>> x = anb.tensor([0.5, 2.0], requires_grad=True)
>>> anb.grad(anb.special.gammaln(x).sum(), x)
(tensor([-1.96351003,  0.42278434]),)
"""

from . import tensor as _tensor  # noqa: F401  (loads the ops, which fill the registry)
from .ops.registry import FUNCTIONS

_PREFIX = "special."


def lookup(name):
    """The function that ``anb.special.<name>`` is, or None where there is none."""
    return FUNCTIONS.get(_PREFIX + name)


def provided():
    """The ``scipy.special`` names this namespace provides, sorted."""
    return sorted(name[len(_PREFIX):] for name in FUNCTIONS if name.startswith(_PREFIX))


def __getattr__(name):
    function = lookup(name)
    if function is None:
        raise AttributeError(f"module 'autograd_nb.special' has no attribute {name!r}")
    return function


def __dir__():
    return sorted(set(globals()) | set(provided()))
