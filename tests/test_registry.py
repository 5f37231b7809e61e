"""The registry is the source of truth: every public function has a NumPy reference and
every API.md function is registered."""

import autograd_nb as anb
from autograd_nb.ops.registry import FUNCTIONS, REGISTRY
from tests.reference import REFERENCE

API_FUNCTIONS = (
    "add subtract multiply divide power maximum minimum where negative exp expm1 log log1p "
    "sqrt square abs sign sin cos tan arcsin arccos arctan sinh cosh tanh sigmoid relu "
    "softplus clip sum mean prod max min var std logsumexp softmax log_softmax cumsum matmul "
    "dot outer einsum reshape transpose swapaxes expand_dims squeeze broadcast_to concatenate "
    "stack ravel"
).split()


def test_every_api_function_is_public_and_exported():
    for name in API_FUNCTIONS:
        assert name in FUNCTIONS, name
        assert getattr(anb, name) is FUNCTIONS[name]


def test_every_public_function_has_a_numpy_reference():
    public = [name for name in FUNCTIONS if not name.startswith("_")]
    missing = [name for name in public if name not in REFERENCE]
    assert not missing, f"add NumPy references for {missing} to tests/reference.py"


def test_every_registered_op_has_kernels_and_a_rule():
    for name, op in REGISTRY.items():
        for method in ("prepare", "forward", "vjp", "rule"):
            assert getattr(type(op), method) is not getattr(anb.ops.registry.Op, method), (
                f"{name} lacks {method}"
            )
