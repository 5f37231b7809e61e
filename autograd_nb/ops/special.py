"""SciPy's special functions (``scipy.special``'s names), the ``special`` family.

Each is an elementwise op like those of :mod:`.elementwise`: a scalar formula and one
derivative formula per differentiable input, from which come the ``@njit`` kernels, the fused
loops, the CUDA kernels and the differentiable rule. The scalar functions themselves (digamma,
erfinv, the Bessel functions, ...) are in :mod:`._scalar`, with the methods they use. The
derivatives chain within the family, so every order is differentiable: ``gammaln' =
digamma``, ``digamma' = polygamma(1, .)``, ``polygamma(n, .)' = polygamma(n + 1, .)``,
``i0' = i1``, ``i1' = i0 - i1 / x``, ``gamma' = gamma digamma``. The regularized incomplete
gamma and beta functions differentiate in ``x`` by their densities (the ops ``_gamma_density``
and ``_beta_density``) and in their shape parameters by ops whose scalars carry the derivative
along the series and continued fractions (``_gammainc_da``, ``_betainc_da``, ``_betainc_db``);
those differentiate again in ``x`` only: a backward that needs a second derivative in a shape
parameter raises ``DerivativeNotImplemented`` (a NotImplementedError) before it runs, never
gives a silent zero.

The public functions are ``anb.special.<name>`` (:mod:`autograd_nb.special`), registered as
``"special.<name>"``: they are no NumPy names, so neither top-level functions nor Tensor
methods.
"""

import numpy as np

from .elementwise import ElementwiseOp
from .registry import DerivativeNotImplemented, Op, call, publish

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


# -- gamma, beta and the regularized incomplete gamma and beta functions ----------------------
# The derivatives of gammainc and betainc in their shape parameters have no closed form: they
# are the ops ``_gammainc_da``, ``_betainc_da`` and ``_betainc_db``, whose scalars carry the
# derivative along the series and continued fractions (see ``_scalar``). Their derivatives in
# x are closed forms; in the shape parameters they have none: those inputs keep their graph
# edge, and a backward that needs their gradient raises before it runs (the planner asks
# ``_not_implemented_error``), never gives a silent zero.

_PI = "3.141592653589793"


class _HelperOp(SpecialOp):
    """A derivative of a special function, an op of the formulas' vocabulary, not public.
    ``derivative_of`` names what it is (``"dgammainc/da"``) for the error of a derivative it
    does not have."""

    family = "special-internal"

    def __init__(self, *args, derivative_of=None, **kwargs):
        self.derivative_of = derivative_of
        super().__init__(*args, **kwargs)

    def make_function(self):
        return None

    def _not_implemented_error(self, k):
        if self.derivative_of is None:
            return super()._not_implemented_error(k)
        name = self.input_names[k]
        return DerivativeNotImplemented(
            f"the derivative of {self.derivative_of} in {name} is not implemented (a second "
            "derivative of the incomplete gamma and beta functions in their shape parameters "
            f"has no formula); differentiate in x only, or pass {name} without requires_grad"
        )


_GAMMA_DA_X = "g * _gamma_density(a, x) * (log(x) - digamma(a))"
_BETA_DA_X = "g * _beta_density(a, b, x) * (log(x) - digamma(a) + digamma(a + b))"
_BETA_DB_X = "g * _beta_density(a, b, x) * (log1p(-x) - digamma(b) + digamma(a + b))"
# name, inputs, forward formula, {input position: VJP formula}, test domain, what it is
_HELPERS = [
    ("_gamma_density", "a x", "_gamma_density(a, x)",
     {0: "g * y * (log(x) - digamma(a))", 1: "g * y * ((a - 1) / x - 1)"}, (0.5, 4), None),
    ("_gammainc_da", "a x", "_gammainc_da(a, x)", {1: _GAMMA_DA_X}, (0.5, 4),
     "dgammainc/da (and dgammaincc/da, its negative)"),
    ("_beta_density", "a b x", "_beta_density(a, b, x)",
     {0: "g * y * (log(x) - digamma(a) + digamma(a + b))",
      1: "g * y * (log1p(-x) - digamma(b) + digamma(a + b))",
      2: "g * y * ((a - 1) / x - (b - 1) / (1 - x))"}, (0.2, 0.8), None),
    ("_betainc_da", "a b x", "_betainc_da(a, b, x)", {2: _BETA_DA_X}, (0.2, 0.8),
     "dbetainc/da"),
    ("_betainc_db", "a b x", "_betainc_db(a, b, x)", {2: _BETA_DB_X}, (0.2, 0.8),
     "dbetainc/db"),
]
for _name, _inputs, _forward, _vjps, _domain, _what in _HELPERS:
    _HelperOp(_name, _inputs, _forward, _vjps, domain=_domain, derivative_of=_what)

# name, inputs, forward formula, {input position: VJP formula}, test domain, docstring
_GAMMA_TABLE = [
    ("gamma", "x", "gamma(x)", {0: "g * y * digamma(x)"}, (0.2, 5),
     """The gamma function; ``inf`` at 0, NaN at the negative integers (SciPy's values).

    Examples
    --------
    >>> import autograd_nb as anb
    >>> anb.special.gamma(anb.tensor([0.5, 5.0]))
    tensor([ 1.77245385, 24.        ])
    """),
    # At a pole -n, 1/gamma is 0 with slope (-1)**n n!.
    ("rgamma", "x", "rgamma(x)",
     {0: f"g * where((x <= 0) & (floor(x) == x), cos({_PI} * x) * exp(gammaln(1 - x)), "
         "-y * digamma(x))"}, (0.2, 5),
     """``1 / gamma(x)``, 0 at the poles of gamma.

    Examples
    --------
    >>> import autograd_nb as anb
    >>> anb.special.rgamma(anb.tensor([-1.0, 5.0]))
    tensor([0.        , 0.04166667])
    """),
    ("gammasgn", "x", "gammasgn(x)", {0: "0 * g"}, (0.2, 5),
     """The sign of the gamma function (1 or -1; NaN at its poles); its derivative is 0.

    Examples
    --------
    >>> import autograd_nb as anb
    >>> anb.special.gammasgn(anb.tensor([-0.5, -1.5, 2.0]))
    tensor([-1.,  1.,  1.])
    """),
    ("beta", "a b", "beta(a, b)",
     {0: "g * y * (digamma(a) - digamma(a + b))", 1: "g * y * (digamma(b) - digamma(a + b))"},
     (0.3, 4),
     """The beta function ``gamma(a) gamma(b) / gamma(a + b)``, broadcasting.

    Examples
    --------
    >>> import autograd_nb as anb
    >>> anb.special.beta(anb.tensor([1.0, 2.0]), anb.tensor([2.0, 3.0]))
    tensor([0.5       , 0.08333333])
    """),
    ("betaln", "a b", "betaln(a, b)",
     {0: "g * (digamma(a) - digamma(a + b))", 1: "g * (digamma(b) - digamma(a + b))"},
     (0.3, 4),
     """``log(abs(beta(a, b)))``, finite where ``beta`` overflows.

    Examples
    --------
    >>> import autograd_nb as anb
    >>> anb.special.betaln(anb.tensor([1.0, 50.0]), anb.tensor([2.0, 60.0]))
    tensor([ -0.69314718, -76.52272335])
    """),
    ("erfcinv", "x", "erfcinv(x)", {0: "-g * 0.886226925452758 * exp(y * y)"}, (0.1, 1.9),
     """The inverse of ``erfc`` on (0, 2), accurate for arguments down to 1e-308 (where
    ``erfinv(1 - y)`` would have lost them).

    Examples
    --------
    >>> import autograd_nb as anb
    >>> anb.special.erfcinv(anb.tensor([1.0, 1e-300]))
    tensor([ 0.        , 26.20946996])
    """),
]
for _name, _inputs, _forward, _vjps, _domain, _doc in _GAMMA_TABLE:
    SpecialOp(_name, _inputs, _forward, _vjps, domain=_domain, doc=_doc)

SpecialOp(
    "gammainc", "a x", "gammainc(a, x)",
    {0: "g * _gammainc_da(a, x)", 1: "g * _gamma_density(a, x)"}, domain=(0.5, 4),
    doc="""The regularized lower incomplete gamma function ``P(a, x)``, the integral of
    ``t**(a - 1) exp(-t) / gamma(a)`` from 0 to ``x``; ``a >= 0``, ``x >= 0`` (NaN
    otherwise), broadcasting.

    Differentiable in ``x`` and in ``a``. The derivative in ``a`` has no closed form: it is
    carried along the series (``x <= a`` or ``x <= 1``) or the continued fraction (otherwise)
    that compute ``P``; it is differentiable again in ``x``, and differentiating it in ``a``
    raises NotImplementedError.

    Examples
    --------
    >>> import autograd_nb as anb
    >>> a = anb.tensor([1.0, 3.0], requires_grad=True)
    >>> anb.special.gammainc(a, anb.tensor([1.0, 2.0]))
    tensor([0.63212056, 0.32332358], grad_fn=<GammaincBackward>)
    """)
SpecialOp(
    "gammaincc", "a x", "gammaincc(a, x)",
    {0: "-g * _gammainc_da(a, x)", 1: "-g * _gamma_density(a, x)"}, domain=(0.5, 4),
    doc="""The regularized upper incomplete gamma function ``Q(a, x) = 1 - P(a, x)``,
    accurate in the upper tail; differentiable in ``a`` and ``x`` as :func:`gammainc`.

    Examples
    --------
    >>> import autograd_nb as anb
    >>> anb.special.gammaincc(anb.tensor([1.0, 3.0]), anb.tensor([1.0, 40.0]))
    tensor([3.67879441e-01, 3.57286593e-15])
    """)
SpecialOp(
    "betainc", "a b x", "betainc(a, b, x)",
    {0: "g * _betainc_da(a, b, x)", 1: "g * _betainc_db(a, b, x)",
     2: "g * _beta_density(a, b, x)"}, domain=(0.2, 0.8),
    doc="""The regularized incomplete beta function ``I_x(a, b)``, the integral of
    ``t**(a - 1) (1 - t)**(b - 1) / beta(a, b)`` from 0 to ``x``; ``a, b >= 0``,
    ``0 <= x <= 1`` (NaN otherwise), broadcasting.

    Differentiable in ``a``, ``b`` and ``x``. The derivatives in ``a`` and ``b`` have no
    closed form: they are carried along the continued fraction that computes ``I`` (Boik and
    Robison-Cox, 1998); they are differentiable again in ``x``, and differentiating them in
    ``a`` or ``b`` raises NotImplementedError.

    Examples
    --------
    >>> import autograd_nb as anb
    >>> anb.special.betainc(anb.tensor([2.0]), anb.tensor([3.0]), anb.tensor([0.4]))
    tensor([0.5248])
    """)


def psi(x):
    """SciPy's name for :func:`digamma`.

    Examples
    --------
    >>> import autograd_nb as anb
    >>> anb.special.psi(anb.tensor([1.0]))
    tensor([-0.57721566])
    """
    return call("digamma", x)


publish(psi, "special.psi", method=False, family="special")


def multigammaln(a, d):
    """The log of the multivariate gamma function of dimension ``d``,
    ``d (d - 1) / 4 log(pi) + sum(gammaln(a - j / 2) for j in range(d))``.

    ``d`` is a whole number and every ``a`` must exceed ``(d - 1) / 2`` (ValueError otherwise,
    as SciPy; the check reads ``a``'s values). Differentiable in ``a``.

    Examples
    --------
    >>> import autograd_nb as anb
    >>> anb.special.multigammaln(anb.tensor([23.5]), 10)
    tensor([457.17667478])
    """
    d = np.asarray(d)[()]
    if not np.isscalar(d) or np.floor(d) != d:
        raise ValueError("d should be a positive integer (dimension)")
    # (a Tensor's values, from the GPU too; the error message shows them, as SciPy's)
    values = a.detach().cpu().numpy() if hasattr(a, "detach") else np.asarray(a)
    if np.any(values <= 0.5 * (d - 1)):
        raise ValueError(f"condition a ({values}) > 0.5 * (d-1) ({0.5 * (d - 1)}) not met")
    total = d * (d - 1) * 0.25 * float(np.log(np.pi))
    for j in range(int(d)):
        total = call("add", total, call("gammaln", call("subtract", a, 0.5 * j)))
    return total


publish(multigammaln, "special.multigammaln", method=False, family="special")


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
