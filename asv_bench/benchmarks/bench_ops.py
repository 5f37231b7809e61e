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


class ElementwiseOps(_OpSuite):
    """Every elementwise function with one or two tensor inputs, on (size/100, 100) float64
    arrays drawn from the op's domain."""

    params = [_names("elementwise"), list(SIZES)]
    param_names = ["op", "size"]

    def setup(self, name, size):
        op = REGISTRY.get(name)
        if op is None or op.n_inputs not in (1, 2) or getattr(op, "domain", None) is None:
            raise NotImplementedError(f"{name} has no plain (x) or (x, y) signature")
        low, high = op.domain
        inputs = [seeded_uniform(_matrix(size), low, high, seed=k) for k in range(op.n_inputs)]
        self._prepare(FUNCTIONS[name], inputs, lambda f, *xs: f(*xs))


#: Reductions need data that keeps the result finite: a product of 10^6 numbers does not
#: stay finite unless they are close to 1.
REDUCTION_DOMAIN = {"prod": (0.99, 1.01)}


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
}


class ShapeLinalgOps(_OpSuite):
    """Shape and linear-algebra functions; ``size`` is the number of elements of each input
    (of the result for ``outer`` and ``broadcast_to``); square matrices for matmul/einsum."""

    params = [_names("shape") + _names("linalg"), list(SIZES)]
    param_names = ["op", "size"]

    def setup(self, name, size):
        if name not in OTHER_CALLS:
            raise NotImplementedError(f"{name} is not in bench_ops.OTHER_CALLS")
        inputs, call = OTHER_CALLS[name](size)
        self._prepare(FUNCTIONS[name], inputs, call)


COVERED_FAMILIES = ("elementwise", "reduction", "shape", "linalg")
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
