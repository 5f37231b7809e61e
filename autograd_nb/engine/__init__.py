"""The backward compiler: tape -> plan -> schedule -> run (one compiled call, or the walk)."""

import threading

import numpy as np

from .. import config, tape, tiering
from ..ops._blas import hold_blas_threads, release_blas_threads
from ..ops.registry import defines
from . import backward, executor, machine, plan_cache
from .backward import Plan, make_plan

__all__ = ["Plan", "make_plan", "run_plan", "plan_and_run", "set_backward_hook"]


class _Hooks(threading.local):
    #: This thread's taker of its backwards, or None (a class default: every thread reads
    #: None until it sets one).
    backward = None


_hooks = _Hooks()


def set_backward_hook(hook):
    """Hand this thread's backwards to ``hook`` instead of running them: ``plan_and_run``
    then returns ``hook(root_edges, seeds, targets, all_leaves, retain_graph, create_graph,
    allow_unused, batch)`` (``anb.compile``, while it records a function that takes a
    gradient, registers its recording, which plans and runs the backward itself with
    :func:`make_plan` and :func:`run_plan`). None: run them again. Returns the previous hook.
    """
    previous, _hooks.backward = _hooks.backward, hook
    return previous

def run_plan(plan, seeds, targets, all_leaves, retain_graph, create_graph, batch=None,
             cache_as=None, tier0=True):
    """Run ``plan``: in one call into compiled code where :mod:`.executor` can (a batch too,
    as a ``prange`` over blocks of its rows), otherwise step by step in Python
    (:func:`.backward.run_plan`, also for ``create_graph``). Both run the plan's
    :func:`.schedule.schedule`. Returns ``(results, leaves, executed)``: the gradients by
    ``id`` of node or leaf, the leaves met, and the executor's run (None where the walk
    ran). With ``cache_as``, ``(key, root_edges, target_edges)`` of the request
    (:func:`.plan_cache.key_of`), the plan cache keeps the executor's tables as a template of
    ``key``, before the saved buffers are freed. ``tier0=False``: never tier 0's walk (a
    backward recorded by ``anb.compile`` needs the executor's tables: it compiles them)."""
    if (
        tier0 and tiering.backward_pending and not create_graph and batch != 0
        and not backward._touches_device(plan, seeds)
    ):
        # Tier 0 (:mod:`autograd_nb.tiering`): the compiled backward is not cached yet, so the
        # walk runs the VJP kernels' NumPy twins (a batch in the executor's blocks of rows),
        # compiling nothing but the kernels of VJPs without one, and a background process
        # compiles the kernels.
        tiering.note_backward(plan, seeds, batch)
        with tiering.twins_walk():
            if batch is None:
                done = backward.run_plan(plan, seeds, targets, all_leaves, retain_graph,
                                         False, twins=True)
            else:
                done = _tier0_batched(plan, seeds, targets, all_leaves, retain_graph, batch)
        tiering.after_backward()
        return (*done, None)
    if config.COMPILED_BACKWARD and not create_graph:
        executed = executor.run(plan, seeds, targets, all_leaves, batch)
        if executed is not None:
            if cache_as is not None:
                plan_cache.remember(plan, executed, *cache_as)
            if not retain_graph:
                for node in executed.schedule.ran:
                    node.free()
            return executed.results, executed.leaves, executed
    done = backward.run_plan(plan, seeds, targets, all_leaves, retain_graph, create_graph, batch)
    return (*done, None)


def _tier0_batched(plan, seeds, targets, all_leaves, retain_graph, batch):
    """Tier 0's batched backward, stacked: the twins' walk once per block of rows that the
    compiled executor runs (:func:`.machine.row_blocks`, with OpenBLAS's threads held as it
    holds them), each VJP over the block at once (``Op.vjp_numpy_rows``), so the gradients
    keep its bits."""
    blocks = machine.row_blocks(batch)
    previous = hold_blas_threads() if machine.parallel_blocks(batch) else None
    try:
        done = []
        for p, (start, stop) in enumerate(blocks):
            keep = retain_graph or p < len(blocks) - 1
            results, leaves = backward.run_plan(
                plan, [(edge, grad[start:stop]) for edge, grad in seeds], targets, all_leaves,
                keep, False, stop - start, twins=True,
            )
            done.append(results)
    finally:
        release_blas_threads(previous)
    stacked = {key: np.concatenate([part[key] for part in done]) for key in done[0]
               if all(key in part for part in done)}
    return stacked, leaves


def plan_and_run(root_edges, seeds, targets, all_leaves, retain_graph, create_graph,
                 allow_unused=True, batch=None):
    """Plan and run a backward, from a cached template where the graph's structure repeats,
    or by the output's op alone where it knows the whole graph (``VJPStrategy.backward_alone``: a
    replayed call's output whose gradient ends at the call's leaves).

    ``targets`` is the list of target edges. Returns ``(results, leaves, plan)``: the
    gradients by ``id`` and the leaves met as :func:`run_plan`, and the :class:`Plan` (None
    when a template or the op alone ran: then every target was reachable or
    ``allow_unused``, and no node retains its gradient). With ``allow_unused`` false an
    unreachable target raises here.
    """
    hook = _hooks.backward
    if hook is not None:  # (see set_backward_hook)
        return hook(root_edges, seeds, targets, all_leaves, retain_graph, create_graph,
                    allow_unused, batch)
    key = None
    if (
        config.CACHED_PLANS and config.COMPILED_BACKWARD and not create_graph
        and not tiering.backward_pending
    ):
        done = batch is None and _backward_alone(root_edges, seeds, targets, all_leaves,
                                                 retain_graph)
        if done:
            return (*done, None)
        key = plan_cache.key_of(root_edges, targets, all_leaves, batch)
        if key is not None:
            done = plan_cache.run(key, root_edges, seeds, targets, retain_graph, allow_unused)
            if done is not None:
                return (*done, None)
    plan = make_plan(root_edges, targets, all_leaves)
    if not allow_unused:
        for edge in targets:
            if id(edge) not in plan.reachable:
                raise RuntimeError(UNUSED_INPUT)
    cache_as = None
    if key is not None and plan_cache.wanted(key):
        cache_as = (key, root_edges, targets)
    results, leaves, _ = run_plan(
        plan, seeds, {id(e) for e in targets}, all_leaves, retain_graph, create_graph, batch,
        cache_as,
    )
    return results, leaves, plan


def _backward_alone(root_edges, seeds, targets, all_leaves, retain_graph):
    """The backward of one output whose op knows its whole graph (a replayed call's output,
    ``VJPStrategy.backward_alone``), run without planning; None where it must be planned."""
    if len(root_edges) != 1:
        return None
    root = root_edges[0]
    if type(root) is not tape.Node:
        return None
    op = root.op
    strategy = op.vjp_strategy
    if not defines(strategy, "backward_alone"):
        return None
    return strategy.backward_alone(op, root, seeds[0][1], targets, all_leaves, retain_graph)


UNUSED_INPUT = (
    "One of the differentiated Tensors appears to not have been used in the graph. "
    "Set allow_unused=True if this is the desired behavior."
)
