"""SciPy's Bessel functions (``j0 j1 jn y0 y1 yn iv ive``), in the ``special`` family.

Elementwise ops as those of :mod:`.special`: a scalar formula (the functions are in
:mod:`._scalar_bessel`) and a derivative formula in ``x`` that chains within the family, so
every order of derivative is differentiable: ``j0' = -j1``, ``j1' = j0 - j1 / x`` (1/2 at 0),
``jn' = (jn(n - 1) - jn(n + 1)) / 2``, the same for ``y``, ``iv' = iv(v + 1) + v iv / x``
and ``ive' = ive(v + 1) + v ive / x - sign(x) ive``. The order (``n``, ``v``) has no
derivative formula: a backward that needs its gradient raises (see ``ElementwiseOp``).
"""

from .special import SpecialOp

# yn truncates its order as SciPy casts it; the neighbours' orders are those of the whole one.
_WHOLE_N = "where(n < 0, -floor(-n), floor(n))"
# f(v + 1) + v f / x, and at x = 0 the mean of the neighbours' orders (1/2 for v = 1). The
# inner wheres keep the untaken branch finite (f(v - 1) is NaN for v - 1 < 0 not whole), so
# that its derivative, multiplied by 0, is no NaN in a second derivative.
_AT_ZERO = ("where(x == 0, 0.5 * {f}(where(x == 0, v - 1, v), x) + 0.5 * {f}(v + 1, x), "
            "{f}(v + 1, x) + v * y / where(x == 0, 1.0, x))")

# name, inputs, forward formula, {input position: VJP formula}, test domain, docstring
_TABLE = [
    ("j0", "x", "j0(x)", {0: "-g * j1(x)"}, (-20, 20),
     """The Bessel function of the first kind of order 0 (SciPy's ``j0``).

    Parameters
    ----------
    x : array_like or Tensor
        Real argument.

    Returns
    -------
    Tensor
        ``J_0(x)``; its derivative is ``-j1(x)``.

    Examples
    --------
    >>> import autograd_nb as anb
    >>> anb.special.j0(anb.tensor([0.0, 1.0]))
    tensor([1.        , 0.76519769])
    """),
    ("j1", "x", "j1(x)",
     {0: "g * where(x == 0, 0.5, j0(x) - y / where(x == 0, 1.0, x))"}, (-20, 20),
     """The Bessel function of the first kind of order 1 (SciPy's ``j1``).

    Parameters
    ----------
    x : array_like or Tensor
        Real argument.

    Returns
    -------
    Tensor
        ``J_1(x)``; its derivative is ``j0(x) - j1(x) / x`` (1/2 at 0).

    Examples
    --------
    >>> import autograd_nb as anb
    >>> anb.special.j1(anb.tensor([0.0, 1.0]))
    tensor([0.        , 0.44005059])
    """),
    ("jn", "n x", "jn(n, x)", {1: "g * 0.5 * (jn(n - 1, x) - jn(n + 1, x))"}, (-20, 20),
     """The Bessel function of the first kind of integer order ``n`` (SciPy's ``jn``).

    Parameters
    ----------
    n : array_like or Tensor
        Whole orders, broadcast with ``x`` (``J_-n = (-1)**n J_n``). A non-integer order
        gives NaN (SciPy's ``jn`` is ``jv`` there, which this package does not provide). Not
        differentiable: a gradient through ``n`` raises.
    x : array_like or Tensor
        Real argument.

    Returns
    -------
    Tensor
        ``J_n(x)``; its derivative in ``x`` is ``(jn(n - 1, x) - jn(n + 1, x)) / 2``.

    Examples
    --------
    >>> import autograd_nb as anb
    >>> anb.special.jn(2, anb.tensor([1.0, 10.0]))
    tensor([0.11490348, 0.25463031])
    """),
    ("y0", "x", "y0(x)", {0: "-g * y1(x)"}, (0.5, 20),
     """The Bessel function of the second kind of order 0 (SciPy's ``y0``).

    Parameters
    ----------
    x : array_like or Tensor
        Real argument: ``-inf`` at 0, NaN below.

    Returns
    -------
    Tensor
        ``Y_0(x)``; its derivative is ``-y1(x)``.

    Examples
    --------
    >>> import autograd_nb as anb
    >>> anb.special.y0(anb.tensor([1.0, 10.0]))
    tensor([0.08825696, 0.05567117])
    """),
    ("y1", "x", "y1(x)", {0: "g * (y0(x) - y / x)"}, (0.5, 20),
     """The Bessel function of the second kind of order 1 (SciPy's ``y1``).

    Parameters
    ----------
    x : array_like or Tensor
        Real argument: ``-inf`` at 0, NaN below.

    Returns
    -------
    Tensor
        ``Y_1(x)``; its derivative is ``y0(x) - y1(x) / x``.

    Examples
    --------
    >>> import autograd_nb as anb
    >>> anb.special.y1(anb.tensor([1.0, 10.0]))
    tensor([-0.78121282,  0.24901542])
    """),
    ("yn", "n x", "yn(n, x)",
     {1: f"g * 0.5 * (yn({_WHOLE_N} - 1, x) - yn({_WHOLE_N} + 1, x))"}, (0.5, 20),
     """The Bessel function of the second kind of integer order ``n`` (SciPy's ``yn``).

    Parameters
    ----------
    n : array_like or Tensor
        Orders, broadcast with ``x``, truncated to whole numbers as SciPy casts them
        (``Y_-n = (-1)**n Y_n``). Not differentiable: a gradient through ``n`` raises.
    x : array_like or Tensor
        Real argument: ``-inf`` at 0, NaN below.

    Returns
    -------
    Tensor
        ``Y_n(x)``; its derivative in ``x`` is ``(yn(n - 1, x) - yn(n + 1, x)) / 2``.

    Examples
    --------
    >>> import autograd_nb as anb
    >>> anb.special.yn(2, anb.tensor([1.0, 10.0]))
    tensor([-1.65068261, -0.00586808])
    """),
    ("iv", "v x", "iv(v, x)", {1: "g * " + _AT_ZERO.format(f="iv")}, (-5, 5),
     """The modified Bessel function of the first kind of real order ``v`` (SciPy's ``iv``).

    Parameters
    ----------
    v : array_like or Tensor
        Real orders, broadcast with ``x``; ``I_-n = I_n`` for whole ``n``. A negative order
        that is not whole gives NaN (it needs ``K_v``, not provided), except at ``x = 0``
        (inf, as SciPy). Not differentiable: a gradient through ``v`` raises.
    x : array_like or Tensor
        Real argument; below 0 NaN unless ``v`` is whole (``I_n(-x) = (-1)**n I_n(x)``).

    Returns
    -------
    Tensor
        ``I_v(x)``; its derivative in ``x`` is ``iv(v + 1, x) + v * iv(v, x) / x``.

    Examples
    --------
    >>> import autograd_nb as anb
    >>> anb.special.iv(0.5, anb.tensor([1.0, 2.0]))
    tensor([0.93767489, 2.04623686])
    """),
    ("ive", "v x", "ive(v, x)",
     {1: "g * (" + _AT_ZERO.format(f="ive") + " - sign(x) * y)"}, (-5, 5),
     """The exponentially scaled modified Bessel function ``iv(v, x) * exp(-abs(x))``
    (SciPy's ``ive``), finite where ``iv`` overflows.

    Parameters
    ----------
    v : array_like or Tensor
        Real orders, broadcast with ``x``, as :func:`iv`'s. Not differentiable: a gradient
        through ``v`` raises.
    x : array_like or Tensor
        Real argument, as :func:`iv`'s.

    Returns
    -------
    Tensor
        ``I_v(x) exp(-|x|)``; its derivative in ``x`` is
        ``ive(v + 1, x) + v * ive(v, x) / x - sign(x) * ive(v, x)``.

    Examples
    --------
    >>> import autograd_nb as anb
    >>> anb.special.ive(1, anb.tensor([1.0, 1000.0]))
    tensor([0.20791042, 0.01261093])
    """),
]
for _name, _inputs, _forward, _vjps, _domain, _doc in _TABLE:
    SpecialOp(_name, _inputs, _forward, _vjps, domain=_domain, doc=_doc)
