"""``anb.linalg.det`` and ``slogdet``, from ``linalg_lu``'s ``_lu`` factors.

``_slogdet`` gives ``log|det|``; the sign, without a gradient, is read from the same factors.
``_slogdet`` and ``_det`` take ``a`` itself as a second input, their derivatives written in
``a`` (``A^-T`` from the factors), and have drivers for the compiled executor
(``exec_spec``).
"""

import collections

import numpy as np
from numba import njit

from . import _lapack
from . import _lapack_numpy as _twin
from ._blas import release_blas_threads_at
from ._linalg_common import (
    _ROUTINES,
    _SET,
    LinalgOp,
    _accumulating,
    _blas_call,
    _check_square,
    _driver_ints,
    _eye_like,
    _float_arrays,
    _hold,
    _operands,
    _stacked,
    _work,
)
from ._pointers import array_at
from .linalg import _shape_of
from .linalg_complex import imag_part, real_part
from .registry import ExecSpec, call, public

SlogdetResult = collections.namedtuple("SlogdetResult", ["sign", "logabsdet"])


@njit(cache=True, nogil=True)
def _slogdet_forward(packed, signs, logdets):
    """``signs[i]``, ``logdets[i]``: the sign and ``log|det|`` of the factored ``A_i``, as
    NumPy's: the sign from the pivots and the signs of ``U``'s diagonal, the logarithms
    summed in order; ``(0, -inf)`` where ``U`` has an exact zero. From Cholesky's factor
    (``_lapack.is_cholesky``): ``(1, 2 sum(log(diag(L))))``."""
    n = packed.shape[1]
    for i in range(packed.shape[0]):
        sign = 1.0
        logdet = 0.0
        if _lapack.is_cholesky(packed[i]):  # det = prod(diag(L))^2
            for j in range(n):
                logdet += np.log(packed[i, j, j])
            signs[i] = sign
            logdets[i] = 2 * logdet
            continue
        for j in range(n):
            u = packed[i, j, j]
            if int(packed[i, j, n]) != j + 1:
                sign = -sign
            if u < 0:
                sign = -sign
                u = -u
            elif u == 0:
                sign = 0.0
                logdet = -np.inf
                break
            logdet += np.log(u)
        signs[i] = sign
        logdets[i] = logdet


@njit(cache=True, nogil=True)
def _add_scaled_inverse_transpose(routines, packed, scale, grad):
    """``grad[i] += scale[i] * A_i^-T`` (``_lapack.lu_inverse`` of the factors); nan where
    ``A_i`` is exactly singular (no derivative of ``log|det|`` there)."""
    n = packed.shape[1]
    inverse = np.empty((n, n), dtype=grad.dtype)
    for i in range(packed.shape[0]):
        if scale[i] == 0:
            continue
        if _lapack.lu_singular(packed[i]):
            for r in range(n):
                for c in range(n):
                    grad[i, r, c] = np.nan
            continue
        _lapack.lu_inverse(routines, packed[i], inverse)
        if _lapack.is_cholesky(packed[i]):  # (symmetric)
            _lapack.add_scaled(grad[i], scale[i], inverse)
        else:
            _lapack.add_scaled_transpose(grad[i], scale[i], inverse)


def _add_scaled_inverse_transpose_numpy(routines, packed, scale, grad):
    """``_add_scaled_inverse_transpose``'s NumPy twin (``routines`` unused, as in
    ``_lu_solve_vjp_numpy``)."""
    n = packed.shape[1]
    inverse = np.empty((n, n), dtype=grad.dtype)
    for i in range(packed.shape[0]):
        if scale[i] == 0:
            continue
        if _twin.lu_singular(packed[i]):
            grad[i] = np.nan
            continue
        _twin.lu_inverse(packed[i], inverse)
        _add_inverse(grad[i], scale[i], inverse, packed[i])


def _add_inverse(grad, scale, inverse, packed):
    """``grad += scale * A^-T`` from ``A^-1``, as ``_lapack.add_scaled`` (where ``A`` is
    symmetric: Cholesky's factors) or ``_lapack.add_scaled_transpose`` add it."""
    if _twin.is_cholesky(packed):
        _twin.add_scaled(grad, scale, inverse)
    else:
        _twin.add_scaled_transpose(grad, scale, inverse)


@njit(cache=True, nogil=True)
def _slogdet_driver(operands, ints, floats, like):
    """The compiled executor's driver of ``_slogdet``'s VJP: ``ints`` is ``[batch, n]`` then
    ``_driver_ints``' tail; operands the gradient, the factors and the target."""
    batch, n = ints[0], ints[1]
    g = array_at(operands[0], batch, like)
    packed = array_at(operands[1], batch * n * (n + 1), like).reshape((batch, n, n + 1))
    grad = array_at(operands[2], batch * n * n, like).reshape((batch, n, n))
    held = _hold(ints, batch * n * n * n)
    _add_scaled_inverse_transpose(ints[_ROUTINES:], packed, g, grad)
    release_blas_threads_at(ints[_SET], held)


@njit(cache=True, nogil=True)
def _slogdet_forward_driver(operands, ints, floats, like):
    """``_slogdet``'s forward in a compiled program (``forward_spec``): ``ints`` is ``[batch,
    n]``; operands ``a`` (unread), the factors and ``log|det|``."""
    batch, n = ints[0], ints[1]
    packed = array_at(operands[1], batch * n * (n + 1), like).reshape((batch, n, n + 1))
    _slogdet_forward(packed, np.empty(batch, dtype=like.dtype), array_at(operands[2], batch,
                                                                        like))


@njit(cache=True, nogil=True)
def _sign_forward_driver(operands, ints, floats, like):
    """``_slogdet_sign``'s forward in a compiled program: ``ints`` is ``[batch, n]``;
    operands the factors and the signs."""
    batch, n = ints[0], ints[1]
    packed = array_at(operands[0], batch * n * (n + 1), like).reshape((batch, n, n + 1))
    _slogdet_forward(packed, array_at(operands[1], batch, like),
                     np.empty(batch, dtype=like.dtype))


@njit(cache=True, nogil=True)
def _det_forward_driver(operands, ints, floats, like):
    """``_det``'s forward in a compiled program: as ``_slogdet_forward_driver``'s."""
    batch, n = ints[0], ints[1]
    packed = array_at(operands[1], batch * n * (n + 1), like).reshape((batch, n, n + 1))
    _det_forward(packed, array_at(operands[2], batch, like))


def _factors_spec(driver, lu):
    """The forward spec of an op of ``lu``'s factors, or None where there are none."""
    n = lu.shape[-2]
    if not lu.size:
        return None
    return driver, (lu.size // (n * (n + 1)), n), ()


class SlogDet(LinalgOp):
    """``_slogdet(a, lu)``: ``log|det a|`` of ``a (..., n, n)`` from its factors (the sign,
    without a gradient, is ``slogdet``'s, from the factors too)."""

    name = "_slogdet"
    n_inputs = 2
    differentiable = (True, False)
    saves = (0, 1)

    def prepare(self, values, attrs):
        a, lu = _float_arrays(values)
        return [a, lu], {}

    def forward(self, arrays, attrs):
        _, lu = arrays
        n = lu.shape[-2]
        out = np.empty(lu.shape[:-2], dtype=lu.dtype)
        _slogdet_forward(_stacked(lu, (n, n + 1)), np.empty(out.size, dtype=lu.dtype),
                         out.reshape(-1))
        return out

    def forward_spec(self, arrays, attrs, output):
        return _factors_spec(_slogdet_forward_driver, arrays[1])

    vjp_kernel = staticmethod(_add_scaled_inverse_transpose)
    vjp_twin = staticmethod(_add_scaled_inverse_transpose_numpy)

    def run_vjp(self, kernel, k, grad_output, saved, attrs, grad_input):
        lu = saved[1]
        n = lu.shape[-2]
        packed = _stacked(lu, (n, n + 1))
        scale = np.ascontiguousarray(grad_output, dtype=lu.dtype).reshape(-1)
        target, done = _accumulating(grad_input, (packed.shape[0], n, n), lu.dtype)
        _blas_call(_work(target.shape), kernel,
                   _lapack.routines(lu.dtype), packed, scale, target)
        done()

    def exec_spec(self, k, node):
        lu = node.saved_inputs[1]
        n = lu.shape[-2]
        if lu.dtype != node.dtype or not lu.size:
            return None
        return ExecSpec(_slogdet_driver, (lu,),
                        _driver_ints(lu.dtype, lu.size // (n * (n + 1)), n), ())

    def rule(self, k, grad_output, inputs, output, attrs):
        a, lu = inputs
        inverse_t = call("_lu_solve", a, lu, _eye_like(a.shape, a.dtype), transpose=True)
        return call("reshape", grad_output, shape=grad_output.shape + (1, 1)) * inverse_t


SlogDet()


class SlogdetSign(LinalgOp):
    """``_slogdet_sign(lu)``: the signs of the determinants of the matrices factored in
    ``lu`` (``_lu``'s), as ``slogdet`` gives them; not differentiable (piecewise constant)."""

    name = "_slogdet_sign"
    differentiable = (False,)

    def prepare(self, values, attrs):
        (lu,) = _float_arrays(values)
        return [lu], {}

    def forward(self, arrays, attrs):
        (lu,) = arrays
        n = lu.shape[-2]
        out = np.empty(lu.shape[:-2], dtype=lu.dtype)
        _slogdet_forward(_stacked(lu, (n, n + 1)), out.reshape(-1),
                         np.empty(out.size, dtype=lu.dtype))
        return out

    def forward_spec(self, arrays, attrs, output):
        return _factors_spec(_sign_forward_driver, arrays[0])

    def run_vjp(self, kernel, k, grad_output, saved, attrs, grad_input):
        raise AssertionError("_slogdet_sign is not differentiable: no node records it")

    def rule(self, k, grad_output, inputs, output, attrs):
        raise AssertionError("_slogdet_sign is not differentiable: no node records it")


SlogdetSign()


@njit(cache=True, nogil=True)
def _det_forward(packed, out):
    """NumPy's determinant: ``sign * exp(log|det|)`` (``_slogdet_forward``)."""
    signs = np.empty(out.size, dtype=out.dtype)
    _slogdet_forward(packed, signs, out)
    for i in range(out.size):
        out[i] = signs[i] * np.exp(out[i])


@njit(cache=True, nogil=True)
def _cofactors(a):
    """The cofactor matrix of ``a`` (``adj(a).T``, which is ``det(a) a^-T``), valid for a
    singular ``a`` too: for ``a = U S V^T``, ``det(U) det(V) U diag(prod_{j!=i} s_j) V^T``."""
    u, s, vh = np.linalg.svd(a)
    n = s.size
    others = np.ones(n, dtype=a.dtype)
    run = 1.0
    for j in range(n):
        others[j] = run
        run *= s[j]
    run = 1.0
    for j in range(n - 1, -1, -1):
        others[j] *= run
        run *= s[j]
    sign = np.linalg.det(u) * np.linalg.det(vh)
    return sign * np.dot(u * others, vh)


@njit(cache=True, nogil=True)
def _det_vjp(routines, a, packed, det, g, grad):
    """``grad[i] += g[i] * det_i * A_i^-T``; the cofactors (``_cofactors``) where the
    determinant is 0 (singular, or below the smallest float)."""
    n = a.shape[1]
    inverse = np.empty((n, n), dtype=grad.dtype)
    for i in range(a.shape[0]):
        if g[i] == 0:
            continue
        if det[i] != 0 and np.isfinite(det[i]):
            _lapack.lu_inverse(routines, packed[i], inverse)
            if _lapack.is_cholesky(packed[i]):  # (symmetric)
                _lapack.add_scaled(grad[i], g[i] * det[i], inverse)
            else:
                _lapack.add_scaled_transpose(grad[i], g[i] * det[i], inverse)
        else:
            _lapack.add_scaled(grad[i], g[i], _cofactors(np.ascontiguousarray(a[i])))


def _det_vjp_numpy(routines, a, packed, det, g, grad):
    """``_det_vjp``'s NumPy twin where every determinant is finite and not 0 (the cofactors'
    SVD is numba's own: ``Det.has_vjp_numpy``)."""
    n = a.shape[1]
    inverse = np.empty((n, n), dtype=grad.dtype)
    for i in range(a.shape[0]):
        if g[i] == 0:
            continue
        _twin.lu_inverse(packed[i], inverse)
        _add_inverse(grad[i], g[i] * det[i], inverse, packed[i])


@njit(cache=True, nogil=True)
def _det_driver(operands, ints, floats, like):
    """The compiled executor's driver of ``_det``'s VJP: ``ints`` is ``[batch, n]`` then
    ``_driver_ints``' tail; operands the gradient, the matrices, their factors, the
    determinants and the target."""
    batch, n = ints[0], ints[1]
    g = array_at(operands[0], batch, like)
    a = array_at(operands[1], batch * n * n, like).reshape((batch, n, n))
    packed = array_at(operands[2], batch * n * (n + 1), like).reshape((batch, n, n + 1))
    det = array_at(operands[3], batch, like)
    grad = array_at(operands[4], batch * n * n, like).reshape((batch, n, n))
    held = _hold(ints, batch * n * n * n)
    _det_vjp(ints[_ROUTINES:], a, packed, det, g, grad)
    release_blas_threads_at(ints[_SET], held)


class Det(LinalgOp):
    """``_det(a, lu)``: the determinants of ``a (..., n, n)`` from their factors."""

    name = "_det"
    n_inputs = 2
    differentiable = (True, False)
    saves = (0, 1)
    saves_output = True

    def prepare(self, values, attrs):
        a, lu = _float_arrays(values)
        return [a, lu], {}

    def forward(self, arrays, attrs):
        _, lu = arrays
        n = lu.shape[-2]
        out = np.empty(lu.shape[:-2], dtype=lu.dtype)
        _det_forward(_stacked(lu, (n, n + 1)), out.reshape(-1))
        return out

    def forward_spec(self, arrays, attrs, output):
        return _factors_spec(_det_forward_driver, arrays[1])

    vjp_kernel = staticmethod(_det_vjp)
    vjp_twin = staticmethod(_det_vjp_numpy)

    def run_vjp(self, kernel, k, grad_output, saved, attrs, grad_input):
        a, lu = saved[0], saved[1]
        n = a.shape[-1]
        det = saved.output.reshape(-1)
        g = np.ascontiguousarray(grad_output, dtype=a.dtype).reshape(-1)
        target, done = _accumulating(grad_input, (det.size, n, n), a.dtype)
        _blas_call(_work(a.shape), kernel, _lapack.routines(a.dtype), _stacked(a, (n, n)),
                   _stacked(lu, (n, n + 1)), det, g, target)
        done()

    def has_vjp_numpy(self, k, saved, attrs):
        # (not where a determinant is 0 or infinite: the cofactors, from numba's SVD)
        det = saved.output
        return bool(np.isfinite(det).all() and (det != 0).all())

    def exec_spec(self, k, node):
        a, lu = node.saved_inputs
        det = node.saved_output
        n = a.shape[-1]
        if a.dtype != node.dtype or not a.size:
            return None
        return ExecSpec(_det_driver, (a, lu, det), _driver_ints(a.dtype, det.size, n), ())

    def rule(self, k, grad_output, inputs, output, attrs):
        a, lu = inputs
        inverse_t = call("_lu_solve", a, lu, _eye_like(a.shape, a.dtype), transpose=True)
        scale = grad_output * output
        return call("reshape", scale, shape=scale.shape + (1, 1)) * inverse_t


Det()


# -- the public functions ---------------------------------------------------------------------


@public("linalg.det", method=False, family="linalg")
def det(a):
    """The determinants of the square matrices ``a (..., M, M)``, as ``numpy.linalg.det``.

    Notes
    -----
    The gradient is ``g * det(a) * inv(a)^T``, and at a singular matrix the cofactor matrix
    (computed from an SVD), as torch's. The differentiable rule (``create_graph=True``) needs
    an invertible ``a``.

    Examples
    --------
    >>> import autograd_nb as anb
    >>> a = anb.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    >>> anb.linalg.det(a)
    tensor(-2., grad_fn=<DetBackward>)
    >>> anb.grad(anb.linalg.det(a), a)
    (tensor([[ 4., -3.],
            [-2.,  1.]]),)
    """
    (a,) = _operands("linalg.det", a, complex_ok=True)
    _check_square("linalg.det", _shape_of(a))
    if a.dtype.kind == "c":  # exp of the complex log det: g conj(det) inv(a)^H, as torch's
        return call("exp", call("_clogdet", a))
    return call("_det", a, call("_lu", a))


@public("linalg.slogdet", method=False, family="linalg")
def slogdet(a):
    """Sign and natural logarithm of the absolute determinant, as ``numpy.linalg.slogdet``.

    Parameters
    ----------
    a : Tensor or array_like, shape (..., M, M)

    Returns
    -------
    SlogdetResult
        ``(sign, logabsdet)``, a named tuple of Tensors of shape (...). ``sign`` has no
        gradient (it is piecewise constant); ``logabsdet``'s gradient is ``g * inv(a)^T``
        (nan at a singular matrix, where ``logabsdet`` is ``-inf``).

    Examples
    --------
    >>> import autograd_nb as anb
    >>> a = anb.tensor([[2.0, 1.0], [1.0, -3.0]], requires_grad=True)
    >>> sign, logabsdet = anb.linalg.slogdet(a)
    >>> sign, logabsdet
    (tensor(-1.), tensor(1.94591015, grad_fn=<SlogdetBackward>))
    >>> anb.grad(logabsdet, a)
    (tensor([[ 0.42857143,  0.14285714],
            [ 0.14285714, -0.28571429]]),)
    """
    (a,) = _operands("linalg.slogdet", a, complex_ok=True)
    _check_square("linalg.slogdet", _shape_of(a))
    if a.dtype.kind == "c":  # torch's complex sign: det / |det|, differentiable
        logdet = call("_clogdet", a)
        sign = call("exp", imag_part(logdet) * 1j)
        return SlogdetResult(sign, real_part(logdet))
    lu = call("_lu", a)
    return SlogdetResult(call("_slogdet_sign", lu), call("_slogdet", a, lu))
