"""``grad(..., is_grads_batched=True)``: a batch of independent VJPs in one call.

Each row ``b`` of every grad_output is one vector ``v``; the result for each input is the
stack over ``b`` of ``vᵀJ``.
"""

import numpy as np

from ..tensor import Tensor


def batched_grad(outputs, inputs, seeds, targets, retain_graph, create_graph, allow_unused,
                 materialize_grads):
    """Run the VJP once per batch row on the shared forward values and stack the results."""
    from ..ops.registry import FUNCTIONS
    from .api import _grad

    sizes = {len(grad) for _, grad in seeds}
    if len(sizes) != 1:
        raise RuntimeError(
            "is_grads_batched=True needs the same batch size in every grad_output, got "
            f"{sorted(sizes)}"
        )
    (batch,) = sizes
    rows = []
    for b in range(batch):
        row_seeds = [(output, grad[b]) for output, grad in seeds]
        keep = retain_graph or b < batch - 1
        rows.append(_grad(row_seeds, inputs, targets, keep, create_graph, allow_unused,
                          materialize_grads))
    results = []
    for i, tensor in enumerate(inputs):
        column = [row[i] for row in rows]
        if batch == 0 or column[0] is None:
            if batch == 0 and (materialize_grads or not allow_unused):
                results.append(Tensor._make(np.zeros((0,) + tensor.shape, dtype=tensor.dtype)))
            else:
                results.append(None)
        elif create_graph:
            results.append(FUNCTIONS["stack"](column))
        else:
            results.append(Tensor._make(np.stack([t._data for t in column])))
    return tuple(results)
