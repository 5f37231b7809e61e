"""The backward alone, four ways: the step-by-step walk, the compiled executor, the
executor with fused elementwise chains, and that from a template of the plan cached by the
graph's structure (issue 3; the first three plan every backward). autograd_nb only.

``setup`` records the graph once and runs the timed call until its time settles
(``warmup.warm_up``); each timed call is one ``grad(..., retain_graph=True)`` over it, so the
forward is not timed. ``track_nodes`` reports how many nodes the backward visits, to read
the times per node.
"""

import numpy as np

from .warmup import warm_up
from .workloads import (
    _chain20_data,
    _fastest_inputs,
    _run_chain,
    _run_fastest,
    fastest_graph,
)

MODES = ["walk", "executor", "fused", "cached"]


def _set_mode(mode):
    from autograd_nb import config

    config.COMPILED_BACKWARD = mode != "walk"
    config.CACHED_PLANS = mode == "cached"
    config.FUSE_BACKWARD = mode in ("fused", "cached")


def _graph(workload):
    """``(output, inputs)`` of ``workload``, recorded."""
    import autograd_nb as anb

    if workload.startswith("elementwise_chain"):
        size = int(float(workload.split("_")[-1]))
        x = anb.tensor(_chain20_data(size, "float64"), requires_grad=True)
        unary = {name: getattr(anb, name) for name in ("sin", "cos", "tanh", "sigmoid", "square")}
        return anb.sum(_run_chain(unary, x)), [x]
    inputs = [anb.tensor(value, requires_grad=True) for value in _fastest_inputs()]

    def softmax4(*scalars):
        s = anb.softmax(anb.stack(scalars))
        return [s[k] for k in range(4)]

    graph = fastest_graph(int(workload.split("_")[-1]))
    return _run_fastest(graph, inputs, anb.softplus, softmax4), inputs


class BackwardModes:
    params = [["elementwise_chain_1e4", "elementwise_chain_1e6", "fastest_autograd_1000"], MODES]
    param_names = ["workload", "mode"]
    timeout = 300

    def setup(self, workload, mode):
        import autograd_nb as anb

        _set_mode(mode)
        self.output, self.inputs = _graph(workload)
        self.grad = anb.grad
        warm_up(lambda: self.time_backward(workload, mode))

    def teardown(self, workload, mode):
        _set_mode("cached")

    def time_backward(self, workload, mode):
        self.grad(self.output, self.inputs, retain_graph=True, allow_unused=True)

    def track_nodes(self, workload, mode):
        from autograd_nb import engine

        edges = [self.output.grad_fn]
        return len(engine.make_plan(edges, self.inputs, all_leaves=False).nodes)

    track_nodes.unit = "nodes"


def median_backward(workload, mode, repeat=15):
    """Median seconds of :meth:`BackwardModes.time_backward`, outside asv (for scripts)."""
    import time

    suite = BackwardModes()
    suite.setup(workload, mode)
    times = []
    try:
        for _ in range(repeat):
            start = time.perf_counter()
            suite.time_backward(workload, mode)
            times.append(time.perf_counter() - start)
    finally:
        suite.teardown(workload, mode)
    return float(np.median(times)), suite.track_nodes(workload, mode)


class BackwardPhases:
    """Where the compiled backward's time goes, phase by phase, on the scalar graph of
    ``fastest_autograd`` (1,000 ops; 1,440 nodes, 2,492 VJPs): planning (the walk over the
    graph), scheduling it and writing the instruction tables (Python, per VJP) and the
    compiled call (the tables' conversion to arrays and ``execute``); and, what replaces the
    first two when the structure repeats, the check of the graph against its cached template
    (:class:`BackwardTemplate`)."""

    params = [["fastest_autograd_1000"]]
    param_names = ["workload"]
    timeout = 300

    def setup(self, workload):
        from autograd_nb import engine
        from autograd_nb.engine import executor

        _set_mode("fused")
        self.engine, self.executor = engine, executor
        output, self.inputs = _graph(workload)
        self.output = output
        self.roots = [output.grad_fn]
        self.plan = engine.make_plan(self.roots, self.inputs, all_leaves=False)
        self.seeds = [(output.grad_fn, np.ones(output.shape))]
        self.targets = {id(x) for x in self.inputs}
        self.tables = self._tables()
        warm_up(lambda: self.time_plan(workload))
        warm_up(lambda: self.time_tables(workload))
        warm_up(lambda: self.time_compiled_call(workload))

    def _tables(self):
        tables, _, _ = self.executor.build(self.plan, self.seeds, self.targets, False,
                                           np.dtype(np.float64))
        return tables

    def time_plan(self, workload):
        self.engine.make_plan(self.roots, self.inputs, all_leaves=False)

    def time_tables(self, workload):
        self._tables()

    def time_compiled_call(self, workload):
        self.tables.execute()


class BackwardTemplate:
    """The phase that replaces planning and table writing when the structure repeats: the
    check of the graph against its cached template (``engine.plan_cache``), in Python
    (``time_template_match``: where the compiled check cannot run, or has said no) and in
    compiled code (``engine.graph_reader``, with the node and leaf lists it hands back)."""

    params = BackwardPhases.params
    param_names = BackwardPhases.param_names
    timeout = 300

    def setup(self, workload):
        import autograd_nb as anb
        from autograd_nb.engine import plan_cache

        _set_mode("cached")
        output, inputs = _graph(workload)
        self.roots = [output.grad_fn]
        warm_up(lambda: anb.grad(output, inputs, retain_graph=True, allow_unused=True))
        key = plan_cache.key_of(self.roots, inputs, False)
        self.template = plan_cache._templates[key][0]
        assert self.template._match(self.roots) is not None
        assert self.template._match_compiled(self.roots) is not None
        warm_up(lambda: self.time_template_match(workload))
        warm_up(lambda: self.time_template_match_compiled(workload))

    def time_template_match(self, workload):
        self.template._match(self.roots)

    def time_template_match_compiled(self, workload):
        self.template._match_compiled(self.roots)



class BatchedBackward:
    """The batched backward alone (``jacobian_batched``'s: 128 grad_outputs through
    ``tanh(W2 @ tanh(W1 @ x + b1) + b2)``, hidden 512, float64), at 1 and 2 threads: the Python
    walk that hands each op's batched kernel the whole batch, the compiled executor's
    ``prange`` over blocks of rows, and the executor from a cached template. Each timed call is
    one ``grad(..., is_grads_batched=True, retain_graph=True)`` over a graph recorded in
    ``setup``."""

    params = [["walk", "executor", "cached"], [1, 2]]
    param_names = ["mode", "threads"]
    timeout = 300

    def setup(self, mode, threads):
        import numba

        import autograd_nb as anb

        from .workloads import JACOBIAN_OUT, _jacobian_data, _mlp2, set_threads

        if threads > numba.config.NUMBA_NUM_THREADS:
            raise NotImplementedError(
                f"numba may start at most {numba.config.NUMBA_NUM_THREADS} threads here"
            )
        set_threads(threads)
        _set_mode(mode)
        data = {name: anb.tensor(value) for name, value in _jacobian_data().items()}
        self.x = anb.tensor(data.pop("x").numpy(), requires_grad=True)
        self.y = _mlp2(anb.tanh, self.x, **data)
        self.seed = anb.eye(JACOBIAN_OUT, dtype="float64")
        self.grad = anb.grad
        warm_up(lambda: self.time_backward(mode, threads))

    def teardown(self, mode, threads):
        _set_mode("cached")

    def time_backward(self, mode, threads):
        self.grad(self.y, self.x, grad_outputs=self.seed, is_grads_batched=True,
                  retain_graph=True)
