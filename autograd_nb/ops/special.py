"""SciPy's special functions (``scipy.special``'s names), the ``special`` family.

Each is an elementwise op like those of :mod:`.elementwise`: a scalar formula and one
derivative formula per differentiable input, from which come the ``@njit`` kernels, the fused
loops, the CUDA kernels and the differentiable rule. The scalar functions themselves (digamma,
erfinv, the Bessel functions, ...) are in :mod:`._scalar`, with the methods they use. The
derivatives chain within the family, so every order is differentiable: ``gammaln' =
digamma``, ``digamma' = polygamma(1, .)``, ``polygamma(n, .)' = polygamma(n + 1, .)``,
``i0' = i1``, ``i1' = i0 - i1 / x``.

The public functions are ``anb.special.<name>`` (:mod:`autograd_nb.special`), registered as
``"special.<name>"``: they are no NumPy names, so neither top-level functions nor Tensor
methods.
"""

from .elementwise import ElementwiseOp
from .registry import Op, call, publish

_TWO_OVER_SQRT_PI = "1.1283791670955126"
_INV_SQRT_2PI = "0.3989422804014327"


class SpecialOp(ElementwiseOp):
    """An elementwise op published as ``anb.special.<name>``, with its own docstring."""

    family = "special"
    method = False
    #: No NumPy tier: NumPy has no erf, gammaln... (these compile from their first call).
    forward_numpy = Op.forward_numpy

    def __init__(self, name, inputs, forward, vjps, domain=(-3, 3), doc=None):
        self.doc = doc
        super().__init__(name, inputs, forward, vjps, domain=domain)

    def make_function(self):
        function = super().make_function()
        function.__doc__ = self.doc
        publish(function, "special." + self.name, method=False, family=self.family)
        return None


# name, inputs, forward formula, {input position: VJP formula}, test domain, docstring
_TABLE = [
    ("erf", "x", "erf(x)", {0: f"g * {_TWO_OVER_SQRT_PI} * exp(-x * x)"}, (-3, 3),
     """The error function, ``2 / sqrt(pi)`` times the integral of ``exp(-t**2)`` from 0.

    Examples
    --------
    >>> import autograd_nb as anb
    >>> anb.special.erf(anb.tensor([0.0, 1.0]))
    tensor([0.        , 0.84270079])
    """),
    ("erfc", "x", "erfc(x)", {0: f"-g * {_TWO_OVER_SQRT_PI} * exp(-x * x)"}, (-3, 3),
     """The complementary error function ``1 - erf(x)``, accurate in the upper tail.

    Examples
    --------
    >>> import autograd_nb as anb
    >>> anb.special.erfc(anb.tensor([0.0, 10.0]))
    tensor([1.00000000e+00, 2.08848758e-45])
    """),
    ("erfinv", "x", "erfinv(x)", {0: "g * 0.886226925452758 * exp(y * y)"}, (-0.9, 0.9),
     """The inverse of ``erf`` on (-1, 1); ``erfinv(+-1)`` is ``+-inf``.

    Examples
    --------
    >>> import autograd_nb as anb
    >>> anb.special.erfinv(anb.tensor([0.0, 0.5]))
    tensor([0.        , 0.47693628])
    """),
    ("gammaln", "x", "gammaln(x)", {0: "g * digamma(x)"}, (0.1, 5),
     """``log(abs(gamma(x)))``; its derivative is ``digamma``.

    Examples
    --------
    >>> import autograd_nb as anb
    >>> anb.special.gammaln(anb.tensor([1.0, 5.0]))
    tensor([0.        , 3.17805383])
    """),
    ("digamma", "x", "digamma(x)", {0: "g * polygamma(1, x)"}, (0.1, 5),
     """The digamma function ``psi``, the derivative of ``gammaln``.

    Examples
    --------
    >>> import autograd_nb as anb
    >>> anb.special.digamma(anb.tensor([1.0, 0.5]))
    tensor([-0.57721566, -1.96351003])
    """),
    ("polygamma", "order x", "polygamma(order, x)", {1: "g * polygamma(order + 1, x)"},
     (0.1, 5),
     """``polygamma(n, x)``: the ``n``-th derivative of ``digamma`` (``n = 0``: digamma);
    ``n`` a whole number >= 0 (NaN otherwise), broadcast with ``x``, not differentiated.

    Examples
    --------
    >>> import autograd_nb as anb
    >>> anb.special.polygamma(1, anb.tensor([1.0, 2.0]))
    tensor([1.64493407, 0.64493407])
    """),
    ("logit", "x", "logit(x)", {0: "g / (x * (1 - x))"}, (0.05, 0.95),
     """``log(x / (1 - x))``, the inverse of ``expit``.

    Examples
    --------
    >>> import autograd_nb as anb
    >>> anb.special.logit(anb.tensor([0.5, 0.9]))
    tensor([0.        , 2.19722458])
    """),
    ("ndtr", "x", "ndtr(x)", {0: f"g * {_INV_SQRT_2PI} * exp(-0.5 * x * x)"}, (-3, 3),
     """The standard normal distribution function, the integral of the normal density from
    ``-inf`` to ``x``.

    Examples
    --------
    >>> import autograd_nb as anb
    >>> anb.special.ndtr(anb.tensor([0.0, 1.0]))
    tensor([0.5       , 0.84134475])
    """),
    ("log_ndtr", "x", "log_ndtr(x)", {0: f"g * {_INV_SQRT_2PI} * exp(-0.5 * x * x - y)"},
     (-5, 3),
     """``log(ndtr(x))``, accurate in both tails (no underflow below -38).

    Examples
    --------
    >>> import autograd_nb as anb
    >>> anb.special.log_ndtr(anb.tensor([0.0, -10.0]))
    tensor([ -0.69314718, -53.23128515])
    """),
    ("i0", "x", "i0(x)", {0: "g * i1(x)"}, (-3, 3),
     """The modified Bessel function of the first kind of order 0; its derivative is ``i1``.

    Examples
    --------
    >>> import autograd_nb as anb
    >>> anb.special.i0(anb.tensor([0.0, 1.0]))
    tensor([1.        , 1.26606588])
    """),
    # i1' = i0 - i1 / x, 1/2 at 0 (the inner where keeps the untaken branch finite there).
    ("i1", "x", "i1(x)", {0: "g * where(x == 0, 0.5, i0(x) - y / where(x == 0, 1.0, x))"},
     (-3, 3),
     """The modified Bessel function of the first kind of order 1.

    Examples
    --------
    >>> import autograd_nb as anb
    >>> anb.special.i1(anb.tensor([0.0, 1.0]))
    tensor([0.       , 0.5651591])
    """),
    # 0 where x == 0 (y not NaN), even at y == 0: log reads 1 there.
    ("xlogy", "a b", "a * log(where((a == 0) & (b == b), 1.0, b))",
     {0: "g * log(where((a == 0) & (b == b), 1.0, b))", 1: "g * a / b"}, (0.2, 3),
     """``x * log(y)``, 0 where ``x == 0`` (unless ``y`` is NaN), broadcasting.

    Examples
    --------
    >>> import autograd_nb as anb
    >>> anb.special.xlogy(anb.tensor([0.0, 2.0]), anb.tensor([0.0, 3.0]))
    tensor([0.        , 2.19722458])
    """),
]
for _name, _inputs, _forward, _vjps, _domain, _doc in _TABLE:
    SpecialOp(_name, _inputs, _forward, _vjps, domain=_domain, doc=_doc)


def expit(x):
    """The logistic sigmoid ``1 / (1 + exp(-x))``: ``anb.sigmoid``.

    Examples
    --------
    >>> import autograd_nb as anb
    >>> anb.special.expit(anb.tensor([0.0, 2.0]))
    tensor([0.5       , 0.88079708])
    """
    return call("sigmoid", x)


publish(expit, "special.expit", method=False, family="special")
