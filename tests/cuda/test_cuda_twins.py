"""The CUDA twin an op names resolves, once, to the class of that name."""

import importlib

from autograd_nb.cuda import dispatch, transfer
from autograd_nb.ops.registry import REGISTRY

OPS = [op for op in REGISTRY.values() if op.cuda_twin is not None] + list(transfer.TO.values())


def test_every_twin_resolves_to_one_instance_of_its_class():
    for op in OPS:
        implementation = dispatch.lookup(op)
        module = importlib.import_module(f"autograd_nb.cuda.{op.cuda_twin.module}")
        assert type(implementation) is getattr(module, op.cuda_twin.name), op.name
        assert dispatch.lookup(op) is implementation, op.name


def test_ops_sharing_a_twin_share_the_instance():
    assert dispatch.lookup(REGISTRY["reshape"]) is dispatch.lookup(REGISTRY["astype"])
    assert dispatch.lookup(REGISTRY["add"]) is dispatch.lookup(REGISTRY["tanh"])
