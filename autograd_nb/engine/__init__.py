"""The backward compiler: tape -> plan -> run (one compiled call, or the Python walk)."""

from . import backward, executor
from .backward import Plan, make_plan

__all__ = ["Plan", "make_plan", "run_plan"]

#: Set False to always run the Python walk (tests compare the two).
COMPILED = True


def run_plan(plan, seeds, targets, all_leaves, retain_graph, create_graph, batch=None):
    """Run ``plan``: in one call into compiled code where :mod:`.executor` can, otherwise
    node by node in Python (:func:`.backward.run_plan`, also for ``create_graph`` and
    batches). Returns the gradients by ``id`` of node or leaf, and the leaves met."""
    if COMPILED and not create_graph and batch is None:
        done = executor.run(plan, seeds, targets, all_leaves, retain_graph)
        if done is not None:
            return done
    return backward.run_plan(plan, seeds, targets, all_leaves, retain_graph, create_graph, batch)
