"""Per-op forward and forward + backward, generated from the op registry (autograd_nb only).

Like NumPy's ufunc suite: the parameters are the public functions of each family in
``autograd_nb.ops.registry.FUNCTIONS``, so a new op is benchmarked without anyone remembering
to. Elementwise ops draw their inputs from ``op.domain``. A function whose signature is not
simple enough to call generically (``where``, ``softmax`` with ``axis=None``, ...) is still a
parameter, and its ``setup`` raises ``NotImplementedError``, so asv reports it as skipped
rather than leaving it out silently.

``time_forward`` runs the function on inputs that require grad (so the tape is recorded);
``time_forward_backward`` also takes the gradient of the sum of the result w.r.t. every input.
"""

import numpy as np

import autograd_nb as anb
from autograd_nb.ops.registry import FUNCTIONS, REGISTRY

from .warmup import warm_up
from .workloads import seeded, seeded_uniform

SIZES = (1_000, 1_000_000)


def _names(family):
    return sorted(
        name for name, fn in FUNCTIONS.items() if fn.family == family and not name.startswith("_")
    )


def _matrix(size):
    """The 2-D shape of ``size`` elements that the per-op benchmarks use: (size / 100, 100)."""
    return (size // 100, 100)


class _OpSuite:
    timeout = 120

    def _prepare(self, function, inputs, call):
        """Keep the call, warm it up to its steady state (compiling, the backward's template
        made and used), and turn a refused call into a skip."""
        self.inputs = [anb.tensor(a, requires_grad=True) for a in inputs]
        self.call = lambda: call(function, *self.inputs)
        try:
            self.time_forward_backward()
        except (TypeError, ValueError) as error:
            raise NotImplementedError(f"{function.__name__}: {error}") from error
        warm_up(self.time_forward_backward)

    def time_forward(self, *params):
        self.call()

    def time_forward_backward(self, *params):
        anb.grad(anb.sum(self.call()), self.inputs)


#: Composites (no op of their own, so no ``domain``) and how many tensors they take; they
#: run on (-3, 3).
COMPOSITE_INPUTS = {"exp2": 1, "reciprocal": 1, "sinc": 1, "fabs": 1, "deg2rad": 1,
                    "rad2deg": 1, "radians": 1, "degrees": 1, "nan_to_num": 1, "ceil": 1,
                    "trunc": 1, "round": 1,
                    "logaddexp2": 2, "mod": 2, "fmax": 2, "fmin": 2, "heaviside": 2,
                    "special.expit": 1}


class ElementwiseOps(_OpSuite):
    """Every elementwise function (and ``anb.special``'s) with one or two tensor inputs, on
    (size/100, 100) float64 arrays drawn from the op's domain."""

    params = [_names("elementwise") + _names("special"), list(SIZES)]
    param_names = ["op", "size"]

    def setup(self, name, size):
        op = REGISTRY.get(name.removeprefix("special."))
        if name in COMPOSITE_INPUTS:
            count, (low, high) = COMPOSITE_INPUTS[name], (-3.0, 3.0)
        elif (op is None or op.n_inputs not in (1, 2) or not all(op.differentiable)
              or op.not_implemented):
            raise NotImplementedError(f"{name} has no plain (x) or (x, y) signature")
        else:
            count, (low, high) = op.n_inputs, op.domain
        inputs = [seeded_uniform(_matrix(size), low, high, seed=k) for k in range(count)]
        self._prepare(FUNCTIONS[name], inputs, lambda f, *xs: f(*xs))


#: Reductions need data that keeps the result finite: a product of 10^6 numbers does not
#: stay finite unless they are close to 1.
REDUCTION_DOMAIN = {"prod": (0.99, 1.01), "cumprod": (0.99, 1.01)}


class ReductionOps(_OpSuite):
    """Every reduction function, over all elements (axis=None) and over axis 0."""

    params = [_names("reduction"), list(SIZES), [None, 0]]
    param_names = ["op", "size", "axis"]

    def setup(self, name, size, axis):
        low, high = REDUCTION_DOMAIN.get(name, (-3.0, 3.0))
        inputs = [seeded_uniform(_matrix(size), low, high, seed=0)]
        self._prepare(FUNCTIONS[name], inputs, lambda f, x: f(x, axis=axis))


def _square(size):
    n = round(size**0.5)
    return (n, n)


def _two(shape):
    return [seeded(shape, seed=1), seeded(shape, seed=2)]


_EVERY_OTHER = np.arange(0, 100, 2)  # the columns ``take`` picks from a (size/100, 100) input

#: Shape and linear-algebra functions: size -> (inputs, how to call the function on them).
OTHER_CALLS = {
    "matmul": lambda size: (_two(_square(size)), lambda f, a, b: f(a, b)),
    "dot": lambda size: (_two(size), lambda f, a, b: f(a, b)),
    "outer": lambda size: (_two(_square(size)[0]), lambda f, a, b: f(a, b)),
    "einsum": lambda size: (_two(_square(size)), lambda f, a, b: f("ij,jk->ik", a, b)),
    "reshape": lambda size: ([seeded(_matrix(size))], lambda f, x: f(x, (-1,))),
    "ravel": lambda size: ([seeded(_matrix(size))], lambda f, x: f(x)),
    "transpose": lambda size: ([seeded(_matrix(size))], lambda f, x: f(x)),
    "swapaxes": lambda size: ([seeded(_matrix(size))], lambda f, x: f(x, 0, 1)),
    "expand_dims": lambda size: ([seeded(_matrix(size))], lambda f, x: f(x, 0)),
    "squeeze": lambda size: ([seeded((1, *_matrix(size)))], lambda f, x: f(x)),
    "broadcast_to": lambda size: ([seeded((1, 100))], lambda f, x: f(x, _matrix(size))),
    "concatenate": lambda size: (_two(_matrix(size)), lambda f, a, b: f([a, b])),
    "stack": lambda size: (_two(_matrix(size)), lambda f, a, b: f([a, b])),
    **{name: lambda size: (_two(_matrix(size)), lambda f, a, b: f([a, b]))
       for name in ("vstack", "hstack", "dstack", "column_stack")},
    "append": lambda size: (_two(_matrix(size)), lambda f, a, b: f(a, b)),
    "r_": lambda size: (_two(_matrix(size)), lambda f, a, b: f[a, b]),
    "c_": lambda size: (_two(_matrix(size)), lambda f, a, b: f[a, b]),
    **{name: lambda size: ([seeded(_matrix(size))], lambda f, x: f(x))
       for name in ("atleast_1d", "atleast_2d", "atleast_3d", "flipud", "fliplr", "rot90",
                    "flatten")},
    **{name: lambda size: ([seeded(_matrix(size))], lambda f, x: f(x, 2))
       for name in ("split", "array_split", "hsplit", "vsplit")},
    "dsplit": lambda size: ([seeded((size // 100, 10, 10))], lambda f, x: f(x, 2)),
    "roll": lambda size: ([seeded(_matrix(size))], lambda f, x: f(x, 7, axis=1)),
    "repeat": lambda size: ([seeded(_matrix(size))], lambda f, x: f(x, 2, axis=1)),
    "tile": lambda size: ([seeded(_matrix(size))], lambda f, x: f(x, (2, 1))),
    "flip": lambda size: ([seeded(_matrix(size))], lambda f, x: f(x, 1)),
    "moveaxis": lambda size: ([seeded(_matrix(size))], lambda f, x: f(x, 0, 1)),
    "pad": lambda size: ([seeded(_matrix(size))], lambda f, x: f(x, 3, mode="edge")),
    "sort": lambda size: ([seeded(_matrix(size))], lambda f, x: f(x, axis=1)),
    "take": lambda size: ([seeded(_matrix(size))], lambda f, x: f(x, _EVERY_OTHER, axis=1)),
    "take_along_axis": lambda size: (
        [seeded(_matrix(size))],
        lambda f, x, order=np.argsort(seeded(_matrix(size), seed=3), axis=1): f(x, order, 1),
    ),
    "diff": lambda size: ([seeded(_matrix(size))], lambda f, x: f(x, axis=1)),
    "tensordot": lambda size: (_two(_square(size)), lambda f, a, b: f(a, b, axes=1)),
    "inner": lambda size: (_two(_square(size)), lambda f, a, b: f(a, b)),
    "kron": lambda size: (_two(_square(round(size**0.5))), lambda f, a, b: f(a, b)),
    "cross": lambda size: (_two((size // 3, 3)), lambda f, a, b: f(a, b)),
    "trace": lambda size: ([seeded(_square(size))], lambda f, x: f(x)),
    "diagonal": lambda size: ([seeded(_square(size))], lambda f, x: f(x)),
    "diag": lambda size: ([seeded(_square(size))], lambda f, x: f(x)),
    "tril": lambda size: ([seeded(_square(size))], lambda f, x: f(x)),
    "triu": lambda size: ([seeded(_square(size))], lambda f, x: f(x)),
}


class ShapeLinalgOps(_OpSuite):
    """Shape and linear-algebra functions; ``size`` is the number of elements of each input
    (of the result for ``outer`` and ``broadcast_to``); square matrices for matmul/einsum."""

    params = [_names("shape") + [n for n in _names("linalg") if not n.startswith("linalg.")],
              list(SIZES)]
    param_names = ["op", "size"]

    def setup(self, name, size):
        if name not in OTHER_CALLS:
            raise NotImplementedError(f"{name} is not in bench_ops.OTHER_CALLS")
        inputs, call = OTHER_CALLS[name](size)
        self._prepare(FUNCTIONS[name], inputs, call)


def _positive_definite(n, seed=0):
    x = seeded((n, n), seed=seed)
    return x @ x.T / n + np.eye(n)


def _near_identity(n):
    # A determinant that stays finite at n = 512 (a random matrix's overflows).
    return np.eye(n) + seeded((n, n), seed=3, scale=0.5 / n**0.5)


def _square_n(n):
    return seeded((n, n))


def _one(make, call):
    return lambda n: ([make(n)], call)


#: ``anb.linalg``'s functions (``"linalg.<name>"``): n -> (inputs, how to call the function).
LINALG_CALLS = {
    "linalg.solve": lambda n: ([_positive_definite(n), seeded(n, seed=4)],
                               lambda f, a, b: f(a, b)),
    "linalg.inv": _one(_positive_definite, lambda f, a: f(a)),
    "linalg.det": _one(_near_identity, lambda f, a: f(a)),
    "linalg.slogdet": _one(_positive_definite, lambda f, a: f(a).logabsdet),
    "linalg.cholesky": _one(_positive_definite, lambda f, a: f(a)),
    "linalg.eigh": _one(_positive_definite, lambda f, a: f(a).eigenvalues),
    "linalg.eigvalsh": _one(_positive_definite, lambda f, a: f(a)),
    "linalg.svd": _one(_square_n, lambda f, a: f(a, full_matrices=False).S),
    "linalg.svdvals": _one(_square_n, lambda f, a: f(a)),
    "linalg.qr": _one(_square_n, lambda f, a: f(a).R),
    "linalg.pinv": _one(_square_n, lambda f, a: f(a)),
    "linalg.lstsq": lambda n: ([seeded((2 * n, n)), seeded(2 * n, seed=4)],
                               lambda f, a, b: f(a, b)[0]),
    "linalg.matrix_power": _one(_near_identity, lambda f, a: f(a, 3)),
    "linalg.multi_dot": lambda n: ([seeded((n, n), seed=k) for k in range(3)],
                                   lambda f, a, b, c: f([a, b, c])),
    "linalg.norm": _one(_square_n, lambda f, a: f(a, ord="nuc")),
    "linalg.vector_norm": _one(_square_n, lambda f, a: f(a, axis=-1)),
    "linalg.matrix_norm": _one(_square_n, lambda f, a: f(a, ord=2)),
    "linalg.trace": _one(_square_n, lambda f, a: f(a)),
    "linalg.diagonal": _one(_square_n, lambda f, a: f(a)),
    "linalg.matrix_transpose": _one(_square_n, lambda f, a: f(a)),
    "linalg.vecdot": lambda n: (_two((n, n)), lambda f, a, b: f(a, b)),
}


class LinalgNamespaceOps(_OpSuite):
    """``anb.linalg``'s functions on n x n float64 matrices (positive definite where the
    function needs it; ``lstsq`` 2n x n); ``time_forward_backward`` differentiates the sum of
    the (first differentiable) result."""

    params = [sorted(n for n in _names("linalg") if n.startswith("linalg.")), [64, 512]]
    param_names = ["op", "n"]

    def setup(self, name, n):
        if name not in LINALG_CALLS:
            raise NotImplementedError(f"{name} is not in bench_ops.LINALG_CALLS")
        inputs, call = LINALG_CALLS[name](n)
        self._prepare(FUNCTIONS[name], inputs, call)


COVERED_FAMILIES = ("elementwise", "special", "reduction", "shape", "linalg")
UNCOVERED = sorted(
    name
    for name, fn in FUNCTIONS.items()
    if fn.family not in COVERED_FAMILIES and not name.startswith("_")
)

if UNCOVERED:

    class OtherFamilyOps(_OpSuite):
        """Public functions of a family the suites above do not know yet: listed, skipped."""

        params = [UNCOVERED, list(SIZES)]
        param_names = ["op", "size"]

        def setup(self, name, size):
            family = FUNCTIONS[name].family
            raise NotImplementedError(f"{name}: no per-op suite for family {family!r}")
