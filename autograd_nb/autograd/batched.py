"""``grad(..., is_grads_batched=True)``: a batch of independent VJPs in one call.

Each row ``b`` of every grad_output is one vector ``v``; the result for each input is the
stack over ``b`` of ``vᵀJ``. The engine runs the plan once with a leading batch dimension on
every gradient slot, over forward values shared read-only: on the CPU in one call into the
compiled executor, a ``prange`` over blocks of batch rows (``engine.executor.execute_batched``:
each block runs every VJP for its rows, matmul VJPs as one GEMM over the block's stacked rows);
where the executor does not apply, as a walk handing each op's batched VJP the whole batch
(elementwise VJPs as one ``prange`` over batch x elements, matmul VJPs as GEMMs over the
batch). With ``create_graph=True`` the rows are differentiated one by one through the ops'
differentiable rules and stacked, so the result can be differentiated again.
"""

from ..ops.registry import FUNCTIONS


def batched_grad(outputs, inputs, seeds, targets, retain_graph, create_graph, allow_unused,
                 materialize_grads):
    """Check the batch sizes agree, then run the batched plan (or the rows, when recording)."""
    from .api import _grad

    sizes = {grad.shape[0] for _, grad in seeds}
    if len(sizes) != 1:
        raise RuntimeError(
            "is_grads_batched=True needs the same batch size (first dimension) in every "
            f"grad_output, got {sorted(sizes)}"
        )
    (batch,) = sizes
    if not create_graph:
        return _grad(seeds, inputs, targets, retain_graph, False, allow_unused,
                     materialize_grads, batch=batch)
    rows = []
    for b in range(batch):
        row_seeds = [(output, grad[b]) for output, grad in seeds]
        keep = retain_graph or b < batch - 1
        rows.append(_grad(row_seeds, inputs, targets, keep, True, allow_unused,
                          materialize_grads))
    results = []
    for i in range(len(inputs)):
        column = [row[i] for row in rows]
        results.append(None if not column or column[0] is None else FUNCTIONS["stack"](column))
    return tuple(results)
