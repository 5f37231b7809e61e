"""Every registered elementwise, shape and indexing op on ``device="cuda"`` against the CPU.

The cases come from the registry: elementwise ops from their own domain and arity, shape and
indexing ops from the table below, and a test fails when an op of those families has no case.
For each case the forward result, the VJPs (``grad`` with a random grad_output), the batched
VJPs (``is_grads_batched``) and the differentiable rules (``create_graph=True``) on the GPU
must equal the CPU's. Sizes are tiny: under the simulator every CUDA thread is a Python thread.
"""

import numpy as np
import pytest

import autograd_nb as anb
from autograd_nb.ops import registry
from autograd_nb.ops.registry import REGISTRY

FAMILIES = ("elementwise", "shape", "indexing")
OPS = sorted(name for name, op in REGISTRY.items() if op.family in FAMILIES)


def sample(shape, low=-2.0, high=2.0, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.uniform(low, high, size=shape)
    return np.where(np.abs(x) < 0.1, x + 0.2, x)  # away from kinks and ties


class Case:
    """``function`` of Tensors, sample inputs, and which of them are differentiated."""

    def __init__(self, op, label, function, inputs, differentiable=None):
        self.op = op
        self.id = f"{op}-{label}"
        self.function = function
        self.inputs = inputs
        self.differentiable = differentiable or [a.dtype.kind == "f" for a in inputs]


def elementwise_cases(name):
    op = REGISTRY[name]
    low, high = op.domain

    def call(*tensors, _name=name):
        if _name.startswith("_"):  # an internal op (``_std_root``)
            return registry.call(_name, *tensors)
        return anb.__dict__[_name](*tensors)

    if name == "where":
        condition = sample((2, 3)) > 0
        return [
            Case(name, "broadcast", call, [condition, sample((3,), seed=1), sample((2, 1))]),
        ]
    if name == "clip":
        return [
            Case(name, "both", lambda x: anb.clip(x, -0.5, 0.7), [sample((2, 3))]),
            Case(name, "upper", lambda x: anb.clip(x, None, 0.3), [sample((2, 3))]),
        ]
    if op.n_inputs == 1:
        return [Case(name, "2x3", call, [sample((2, 3), low, high)])]
    return [
        Case(name, "same", call, [sample((2, 3), low, high), sample((2, 3), low, high, 1)]),
        Case(name, "broadcast", call, [sample((2, 1), low, high), sample((3,), low, high, 1)]),
    ]


def _getitem_attrs(index):
    # A recorded getitem's canonical attrs: what ``_index_scatter`` (its adjoint) reads.
    x = anb.tensor(sample((3, 4)), requires_grad=True)
    return x[index].grad_fn.attrs


def _setitem(index):
    def function(x, v):
        return registry.call("setitem", x, v, index=index)

    return function


MASK = sample((3, 4), seed=3) > 0

TABLE = [
    Case("reshape", "3x2", lambda x: anb.reshape(x, (3, 2)), [sample((2, 3))]),
    Case("transpose", "T", lambda x: x.T, [sample((2, 3))]),
    Case("transpose", "3d", lambda x: anb.transpose(x, (1, 2, 0)), [sample((2, 1, 3))]),
    Case("broadcast_to", "rows", lambda x: anb.broadcast_to(x, (2, 3)), [sample((3,))]),
    Case("broadcast_to", "middle", lambda x: anb.broadcast_to(x, (2, 2, 3)), [sample((2, 1, 3))]),
    Case("astype", "float32", lambda x: x.astype(np.float32), [sample((2, 3))]),
    Case("concatenate", "axis0", lambda a, b: anb.concatenate([a, b]),
         [sample((2, 3)), sample((1, 3), seed=1)]),
    Case("concatenate", "axis1", lambda a, b: anb.concatenate([a, b], axis=1),
         [sample((2, 1)), sample((2, 2), seed=1)]),
    Case("concatenate", "none", lambda a, b: anb.concatenate([a, b], axis=None),
         [sample((2, 2)), sample((3,), seed=1)]),
    Case("stack", "axis1", lambda a, b: anb.stack([a, b], axis=1),
         [sample((3,)), sample((3,), seed=1)]),
    Case("getitem", "slices", lambda x: x[1:, ::-2], [sample((3, 4))]),
    Case("getitem", "int-none", lambda x: x[1, None], [sample((3, 4))]),
    Case("getitem", "repeats", lambda x: x[[0, 2, 0]], [sample((3, 4))]),
    Case("getitem", "mixed", lambda x: x[[0, 1], 1:], [sample((3, 4))]),
    Case("getitem", "mask", lambda x: x[MASK], [sample((3, 4))]),
    Case("_index_scatter", "basic",
         lambda g: registry.call("_index_scatter", g, source=_getitem_attrs((slice(1, None), 2))),
         [sample((2,))]),
    Case("_index_scatter", "repeats",
         lambda g: registry.call("_index_scatter", g, source=_getitem_attrs([0, 2, 0])),
         [sample((3, 4))]),
    Case("setitem", "slices", _setitem((slice(1, None), slice(None, None, 2))),
         [sample((3, 4)), sample((2,), seed=1)]),
    Case("setitem", "repeats", _setitem([0, 2, 0]), [sample((3, 4)), sample((3, 1), seed=1)]),
    Case("setitem", "mask", _setitem(MASK), [sample((3, 4)), sample((), seed=1)]),
]


def all_cases():
    cases = []
    for name in OPS:
        if REGISTRY[name].family == "elementwise":
            cases += elementwise_cases(name)
    return cases + TABLE


CASES = all_cases()


def test_every_op_of_the_families_has_a_case():
    assert {case.op for case in CASES} == set(OPS)


def run_case(case, device, grad_output_seed=1, batch=None, create_graph=False):
    tensors = [
        anb.tensor(a, requires_grad=bool(d), device=device)
        for a, d in zip(case.inputs, case.differentiable)
    ]
    y = case.function(*tensors)
    targets = [t for t, d in zip(tensors, case.differentiable) if d]
    rng = np.random.default_rng(grad_output_seed)
    shape = y.shape if batch is None else (batch,) + y.shape
    v = anb.tensor(rng.standard_normal(shape).astype(y.dtype), device=device)
    grads = anb.grad(y, targets, grad_outputs=v, is_grads_batched=batch is not None,
                     create_graph=create_graph)
    return y, grads


def assert_same(cuda_tensor, cpu_tensor, rtol=1e-10):
    assert cuda_tensor.device == "cuda"
    assert cuda_tensor.dtype == cpu_tensor.dtype
    assert cuda_tensor.shape == cpu_tensor.shape
    np.testing.assert_allclose(cuda_tensor.cpu().numpy(), cpu_tensor.numpy(), rtol=rtol,
                               atol=rtol)


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.id)
def test_forward_and_vjps_match_the_cpu(case):
    y_cpu, grads_cpu = run_case(case, "cpu")
    y_cuda, grads_cuda = run_case(case, "cuda")
    assert_same(y_cuda, y_cpu)
    for g_cuda, g_cpu in zip(grads_cuda, grads_cpu):
        assert_same(g_cuda, g_cpu)


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.id)
def test_batched_vjps_match_the_cpu(case):
    _, grads_cpu = run_case(case, "cpu", batch=2)
    _, grads_cuda = run_case(case, "cuda", batch=2)
    for g_cuda, g_cpu in zip(grads_cuda, grads_cpu):
        assert_same(g_cuda, g_cpu)


RULE_CASES = [case for case in CASES if case.op in (
    "multiply", "divide", "maximum", "tanh", "relu", "where", "clip", "power",
    "transpose", "broadcast_to", "concatenate", "getitem", "setitem", "_index_scatter",
)]


@pytest.mark.parametrize("case", RULE_CASES, ids=lambda case: case.id)
def test_differentiable_rules_match_the_cpu(case):
    """create_graph=True runs the rules (recorded ops, on the GPU) instead of the kernels;
    differentiating their result again runs the kernels of the ops they recorded."""
    results = {}
    for device in ("cpu", "cuda"):
        tensors = [
            anb.tensor(a, requires_grad=bool(d), device=device)
            for a, d in zip(case.inputs, case.differentiable)
        ]
        targets = [t for t, d in zip(tensors, case.differentiable) if d]
        y = case.function(*tensors)
        rng = np.random.default_rng(5)
        v = anb.tensor(rng.standard_normal(y.shape), device=device)
        first = anb.grad(y, targets, grad_outputs=v, create_graph=True)
        differentiable = [g for g in first if g.requires_grad]
        second = ()
        if differentiable:
            w = [anb.tensor(rng.standard_normal(g.shape), device=device) for g in differentiable]
            second = anb.grad(differentiable, targets, grad_outputs=w, allow_unused=True,
                              materialize_grads=True)
        results[device] = (first, second)
    for cuda_results, cpu_results in zip(results["cuda"], results["cpu"]):
        for g_cuda, g_cpu in zip(cuda_results, cpu_results):
            assert_same(g_cuda, g_cpu)


FLOAT32_OPS = ["add", "multiply", "divide", "exp", "sigmoid", "softplus", "broadcast_to",
               "getitem", "concatenate"]


@pytest.mark.parametrize(
    "case", [case for case in CASES if case.op in FLOAT32_OPS], ids=lambda case: case.id
)
def test_float32_matches_the_cpu(case):
    case32 = Case(case.op, case.id, case.function, [
        a.astype(np.float32) if a.dtype.kind == "f" else a for a in case.inputs
    ], case.differentiable)
    y_cpu, grads_cpu = run_case(case32, "cpu")
    y_cuda, grads_cuda = run_case(case32, "cuda")
    assert_same(y_cuda, y_cpu, rtol=1e-5)
    for g_cuda, g_cpu in zip(grads_cuda, grads_cpu):
        assert_same(g_cuda, g_cpu, rtol=1e-5)


def test_every_registered_op_has_a_cuda_implementation():
    """Issue 5: every op of the contract runs on the GPU (forward and VJP), except those
    marked ``cpu_only`` (linalg's decompositions: their public functions raise naming
    themselves)."""
    from autograd_nb.cuda import dispatch

    missing = [name for name, op in REGISTRY.items()
               if op.family != "custom" and not getattr(op, "cpu_only", False)
               and op.cuda_twin is None]
    assert missing == []
    for name, op in REGISTRY.items():
        if op.cuda_twin is None:
            with pytest.raises(NotImplementedError, match=f"the op '{name}' has no CUDA"):
                dispatch.lookup(op)
            continue
        implementation = dispatch.lookup(op)  # imports the twin's module
        assert callable(getattr(implementation, "forward", None)), name
        assert callable(getattr(implementation, "vjp", None)), name
