"""SciPy's Bessel functions, in the ``special`` family: ``j0 j1 jn y0 y1 yn iv ive`` (their
scalars written in :mod:`._scalar_bessel`, on the CPU and the GPU) and ``jv yv kv kve k0 k1
k0e k1e i0e i1e`` (SciPy's compiled functions: CPU only).

Elementwise ops as those of :mod:`.special`: a scalar formula (the functions are in
:mod:`._scalar_bessel`) and a derivative formula in ``x`` that chains within the family, so
every order of derivative is differentiable: ``j0' = -j1``, ``j1' = j0 - j1 / x`` (1/2 at 0),
``jn' = (jn(n - 1) - jn(n + 1)) / 2``, the same for ``y``, ``jv`` and ``yv``, ``kv' =
-(kv(v - 1) + kv(v + 1)) / 2``, ``iv' = iv(v + 1) + v iv / x``, and for a scaled function
(``ive``, ``kve``, ``i0e``...) that of the unscaled one, scaled, minus (``kve``: plus) its
scale's slope: ``ive' = ive(v + 1) + v ive / x - sign(x) ive``. The order (``n``, ``v``) has
no derivative formula: a backward that needs its gradient raises (see ``ElementwiseOp``).
"""

from .elementwise import ElementwiseOp
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
        Orders, broadcast with ``x`` (``J_-n = (-1)**n J_n``). At a non-integer order
        ``jn`` is :func:`jv`, as SciPy's (on the GPU NaN there). Not differentiable: a
        gradient through ``n`` raises.
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
        (``Y_-n = (-1)**n Y_n``; SciPy also warns there, this does not: :func:`yv` takes
        any real order). Not differentiable: a gradient through ``n`` raises.
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
        Real orders, broadcast with ``x``; ``I_-n = I_n`` for whole ``n``, and for a
        negative ``v`` not whole SciPy's ``I_v = I_-v + (2/pi) sin(-pi v) K_-v`` (inf at
        ``x = 0``; on the GPU NaN at ``x > 0``). Not differentiable: a gradient through
        ``v`` raises.
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
        Real orders, broadcast with ``x``, as :func:`iv`'s (but NaN at ``x = 0`` for a
        negative ``v`` not whole, as SciPy). Not differentiable: a gradient through ``v``
        raises.
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


class _ScipyBesselOp(SpecialOp):
    """A Bessel function whose scalar is SciPy's compiled one (``_scalar_bessel``): CPU only,
    and tier 0 runs SciPy's ufunc, the same C function, so the NumPy forward and the VJPs'
    twins give the kernels' bits."""

    #: No CUDA kernels: a CUDA tensor raises NotImplementedError naming the op.
    cpu_only = True
    cuda_twin = None
    forward_numpy = ElementwiseOp.forward_numpy


_ORDER = """v : array_like or Tensor
        Real orders, broadcast with ``x``. Not differentiable: a gradient through ``v``
        raises."""

# name, inputs, forward formula, {input position: VJP formula}, test domain, docstring
_SCIPY_TABLE = [
    ("jv", "v x", "jv(v, x)", {1: "g * 0.5 * (jv(v - 1, x) - jv(v + 1, x))"}, (0.5, 20),
     f"""The Bessel function of the first kind of real order ``v`` (SciPy's ``jv``).

    Parameters
    ----------
    {_ORDER}
    x : array_like or Tensor
        Real argument; below 0 NaN unless ``v`` is whole (as SciPy).

    Returns
    -------
    Tensor
        ``J_v(x)``; its derivative in ``x`` is ``(jv(v - 1, x) - jv(v + 1, x)) / 2``.

    Examples
    --------
    >>> import autograd_nb as anb
    >>> anb.special.jv(2.5, anb.tensor([1.0, 10.0]))
    tensor([0.04949681, 0.19665848])
    """),
    ("yv", "v x", "yv(v, x)", {1: "g * 0.5 * (yv(v - 1, x) - yv(v + 1, x))"}, (0.5, 20),
     f"""The Bessel function of the second kind of real order ``v`` (SciPy's ``yv``).

    Parameters
    ----------
    {_ORDER}
    x : array_like or Tensor
        Real argument: ``-inf`` at 0, NaN below.

    Returns
    -------
    Tensor
        ``Y_v(x)``; its derivative in ``x`` is ``(yv(v - 1, x) - yv(v + 1, x)) / 2``.

    Examples
    --------
    >>> import autograd_nb as anb
    >>> anb.special.yv(2.5, anb.tensor([1.0, 10.0]))
    tensor([-2.87638786, -0.16417848])
    """),
    ("kv", "v x", "kv(v, x)", {1: "-g * 0.5 * (kv(v - 1, x) + kv(v + 1, x))"}, (0.5, 10),
     f"""The modified Bessel function of the second kind of real order ``v`` (SciPy's ``kv``).

    Parameters
    ----------
    {_ORDER}
    x : array_like or Tensor
        Real argument: ``inf`` at 0, NaN below.

    Returns
    -------
    Tensor
        ``K_v(x)``; its derivative in ``x`` is ``-(kv(v - 1, x) + kv(v + 1, x)) / 2``.

    Examples
    --------
    >>> import autograd_nb as anb
    >>> anb.special.kv(2.5, anb.tensor([1.0, 10.0]))
    tensor([3.22747953e+00, 2.39313259e-05])
    """),
    ("kve", "v x", "kve(v, x)", {1: "g * (y - 0.5 * (kve(v - 1, x) + kve(v + 1, x)))"},
     (0.5, 20),
     f"""The exponentially scaled modified Bessel function ``kv(v, x) * exp(x)`` (SciPy's
    ``kve``), finite where ``kv`` underflows.

    Parameters
    ----------
    {_ORDER}
    x : array_like or Tensor
        Real argument, as :func:`kv`'s.

    Returns
    -------
    Tensor
        ``K_v(x) exp(x)``; its derivative in ``x`` is
        ``kve(v, x) - (kve(v - 1, x) + kve(v + 1, x)) / 2``.

    Examples
    --------
    >>> import autograd_nb as anb
    >>> anb.special.kve(2.5, anb.tensor([1.0, 1000.0]))
    tensor([8.77319896, 0.03975229])
    """),
    ("k0", "x", "k0(x)", {0: "-g * k1(x)"}, (0.2, 10),
     """The modified Bessel function of the second kind of order 0 (SciPy's ``k0``).

    Parameters
    ----------
    x : array_like or Tensor
        Real argument: ``inf`` at 0, NaN below.

    Returns
    -------
    Tensor
        ``K_0(x)``; its derivative is ``-k1(x)``.

    Examples
    --------
    >>> import autograd_nb as anb
    >>> anb.special.k0(anb.tensor([1.0, 10.0]))
    tensor([4.21024438e-01, 1.77800623e-05])
    """),
    ("k1", "x", "k1(x)", {0: "-g * (k0(x) + y / x)"}, (0.2, 10),
     """The modified Bessel function of the second kind of order 1 (SciPy's ``k1``).

    Parameters
    ----------
    x : array_like or Tensor
        Real argument: ``inf`` at 0, NaN below.

    Returns
    -------
    Tensor
        ``K_1(x)``; its derivative is ``-(k0(x) + k1(x) / x)``.

    Examples
    --------
    >>> import autograd_nb as anb
    >>> anb.special.k1(anb.tensor([1.0, 10.0]))
    tensor([6.01907230e-01, 1.86487735e-05])
    """),
    ("k0e", "x", "k0e(x)", {0: "g * (y - k1e(x))"}, (0.2, 10),
     """The exponentially scaled ``k0(x) * exp(x)`` (SciPy's ``k0e``).

    Parameters
    ----------
    x : array_like or Tensor
        Real argument: ``inf`` at 0, NaN below.

    Returns
    -------
    Tensor
        ``K_0(x) exp(x)``; its derivative is ``k0e(x) - k1e(x)``.

    Examples
    --------
    >>> import autograd_nb as anb
    >>> anb.special.k0e(anb.tensor([1.0, 1000.0]))
    tensor([1.14446308, 0.03962832])
    """),
    ("k1e", "x", "k1e(x)", {0: "g * (y - k0e(x) - y / x)"}, (0.2, 10),
     """The exponentially scaled ``k1(x) * exp(x)`` (SciPy's ``k1e``).

    Parameters
    ----------
    x : array_like or Tensor
        Real argument: ``inf`` at 0, NaN below.

    Returns
    -------
    Tensor
        ``K_1(x) exp(x)``; its derivative is ``k1e(x) - k0e(x) - k1e(x) / x``.

    Examples
    --------
    >>> import autograd_nb as anb
    >>> anb.special.k1e(anb.tensor([1.0, 1000.0]))
    tensor([1.63615349, 0.03964813])
    """),
    ("i0e", "x", "i0e(x)", {0: "g * (i1e(x) - sign(x) * y)"}, (-5, 5),
     """The exponentially scaled ``i0(x) * exp(-abs(x))`` (SciPy's ``i0e``).

    Parameters
    ----------
    x : array_like or Tensor
        Real argument.

    Returns
    -------
    Tensor
        ``I_0(x) exp(-|x|)``; its derivative is ``i1e(x) - sign(x) * i0e(x)``.

    Examples
    --------
    >>> import autograd_nb as anb
    >>> anb.special.i0e(anb.tensor([0.0, 1000.0]))
    tensor([1.        , 0.01261724])
    """),
    # i1' = i0 - i1 / x, 1/2 at 0 (the inner where keeps the untaken branch finite there).
    ("i1e", "x", "i1e(x)",
     {0: "g * (where(x == 0, 0.5, i0e(x) - y / where(x == 0, 1.0, x)) - sign(x) * y)"},
     (-5, 5),
     """The exponentially scaled ``i1(x) * exp(-abs(x))`` (SciPy's ``i1e``).

    Parameters
    ----------
    x : array_like or Tensor
        Real argument.

    Returns
    -------
    Tensor
        ``I_1(x) exp(-|x|)``; its derivative is ``i0e(x) - i1e(x) / x - sign(x) * i1e(x)``
        (1/2 at 0).

    Examples
    --------
    >>> import autograd_nb as anb
    >>> anb.special.i1e(anb.tensor([0.0, 1000.0]))
    tensor([0.        , 0.01261093])
    """),
]
for _name, _inputs, _forward, _vjps, _domain, _doc in _SCIPY_TABLE:
    _ScipyBesselOp(_name, _inputs, _forward, _vjps, domain=_domain, doc=_doc)
