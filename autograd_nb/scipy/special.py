"""SciPy's ``scipy.special``, differentiable: ``autograd_nb.scipy.special.gammainc(a, x)``.

The same functions as :mod:`autograd_nb.special`: those of the op registry registered as
``"special.<name>"`` (``ops/special.py``), under SciPy's names and with SciPy's argument
order (the Bessel functions ``jv``, ``yv``, ``kv``, ``kve``, ``k0``, ``k1``, ``k0e``,
``k1e``, ``i0e``, ``i1e`` among them, with SciPy's values bit for bit: they call SciPy's
compiled functions). Besides the error function, log-gamma and Bessel family of
``anb.special``, it holds
``gamma``, ``rgamma``, ``gammasgn``, ``beta``, ``betaln``, ``psi`` (SciPy's name for
``digamma``), ``multigammaln``, ``erfcinv`` and the regularized incomplete functions
``gammainc``, ``gammaincc`` and ``betainc``, differentiable in every argument (their
derivatives in the shape parameters, which have no closed form, carried along the series and
continued fractions that compute them; those differentiate again in ``x``, and a second
derivative in a shape parameter raises NotImplementedError). Each is elementwise and
broadcasting.

>>> import autograd_nb as anb
>>> from autograd_nb.scipy import special
>>> a = anb.tensor([2.0], requires_grad=True)
>>> anb.grad(special.gammainc(a, anb.tensor([3.0])).sum(), a)
(tensor([-0.19742542]),)
"""

from .. import special as _special


def lookup(name):
    """The function that ``autograd_nb.scipy.special.<name>`` is, or None where there is
    none."""
    return _special.lookup(name)


def provided():
    """The ``scipy.special`` names this namespace provides, sorted."""
    return _special.provided()


def __getattr__(name):
    function = lookup(name)
    if function is None:
        raise AttributeError(f"module 'autograd_nb.scipy.special' has no attribute {name!r}")
    return function


def __dir__():
    return sorted(set(globals()) | set(provided()))
