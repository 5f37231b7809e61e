"""Small real programs whose gradients tests/test_first_use.py takes in fresh processes.

Each program builds its inputs from a seeded NumPy generator and returns the list of NumPy
arrays it computed (values and gradients), so that two processes' results can be compared
array by array. The losses take their namespace as ``xp_`` (autograd_nb, or NumPy for the
test's finite differences), and ``*_data`` give the inputs the programs use.
"""

from functools import partial

import numpy as np

import autograd_nb as anb

MLP_SIZES = (32, 12, 16, 5)  # batch, inputs, hidden, classes
GP_POINTS, GP_DIMS, GP_OUTPUTS = 10, 2, 3
SIMULATION_STEPS, SIMULATION_DT = 8, 0.05


def arrays(tensors):
    return [np.array(t.numpy()) for t in tensors]


def mlp_data(dtype):
    """Inputs, labels and the parameters ``w1, b1, w2, b2`` of the network."""
    rng = np.random.default_rng(1)
    batch, inputs, hidden, classes = MLP_SIZES
    x = rng.standard_normal((batch, inputs)).astype(dtype)
    labels = rng.integers(0, classes, size=batch)
    params = [(rng.standard_normal(shape) / np.sqrt(shape[0])).astype(dtype)
              for shape in ((inputs, hidden), (hidden,), (hidden, classes), (classes,))]
    return x, labels, params


def mlp(dtype):
    """One training step of a 2-layer tanh network with a log_softmax cross-entropy."""
    x_data, labels, param_data = mlp_data(dtype)
    x = anb.tensor(x_data)
    params = [anb.tensor(p, requires_grad=True) for p in param_data]
    w1, b1, w2, b2 = params
    logits = anb.tanh(x @ w1 + b1) @ w2 + b2
    loss = -anb.log_softmax(logits, axis=1)[np.arange(len(labels)), labels].mean()
    return arrays([loss, *anb.grad(loss, params)])


def reference_mlp_loss(x, labels, w1, b1, w2, b2):
    logits = np.tanh(x @ w1 + b1) @ w2 + b2
    shifted = logits - logits.max(axis=1, keepdims=True)
    log_softmax = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    return -log_softmax[np.arange(len(labels)), labels].mean()


def gp_data():
    """Inputs, targets (one column, and several) and the hyperparameters of the GP: as in
    HIPS autograd's example, the mean, the log noise variance, then the kernel's log signal
    variance and log length scales (one per input dimension)."""
    rng = np.random.default_rng(2)
    x = rng.uniform(-2.0, 2.0, size=(GP_POINTS, GP_DIMS))
    y = np.sin(x.sum(axis=1)) + 0.1 * rng.standard_normal(GP_POINTS)
    targets = np.cos(x @ rng.standard_normal((GP_DIMS, GP_OUTPUTS)))
    params = np.array([0.2, np.log(0.05), 0.3, 0.1, -0.3])
    return x, y, targets, params


def rbf_covariance(kernel_params, x, xp, xp_):
    """HIPS autograd's examples/gaussian_process.py ``rbf_covariance``."""
    output_scale = xp_.exp(kernel_params[0])
    lengthscales = xp_.exp(kernel_params[1:])
    diffs = xp_.expand_dims(x / lengthscales, 1) - xp_.expand_dims(xp / lengthscales, 0)
    return output_scale * xp_.exp(-0.5 * xp_.sum(diffs**2, axis=2))


def gp_negative_log_likelihood(params, x, y, targets, xp_):
    """The negative log marginal likelihood of ``y``, and of each column of ``targets``
    (``mvn.logpdf`` of HIPS's example, written out): ``solve`` with a vector and with a
    matrix right-hand side, both depending on the mean, and ``slogdet``."""
    mean, noise = params[0], xp_.exp(params[1]) + 1e-4
    cov = rbf_covariance(params[2:], x, x, xp_) + noise * xp_.eye(GP_POINTS)
    residual, residuals = y - mean, targets - mean
    data_fit = (xp_.sum(residual * xp_.linalg.solve(cov, residual))
                + xp_.sum(residuals * xp_.linalg.solve(cov, residuals)))
    _, logdet = xp_.linalg.slogdet(cov)
    columns = 1 + targets.shape[1]
    return 0.5 * data_fit + 0.5 * columns * (logdet + GP_POINTS * np.log(2 * np.pi))


def gaussian_process():
    """The NLL's gradient w.r.t. the hyperparameters and w.r.t. the inputs."""
    x_data, y, targets, param_data = gp_data()
    params = anb.tensor(param_data, requires_grad=True)
    x = anb.tensor(x_data, requires_grad=True)
    loss = gp_negative_log_likelihood(params, x, anb.tensor(y), anb.tensor(targets), anb)
    return arrays([loss, *anb.grad(loss, [params, x])])


def jacobian_data(dtype):
    rng = np.random.default_rng(5)
    return rng.standard_normal(6).astype(dtype), rng.standard_normal((4, 6)).astype(dtype)


def jacobian_function(x, w, xp_):
    return xp_.tanh(w @ x) * xp_.exp(-0.5 * x[:4])


def batched_jacobian(dtype):
    """A Jacobian by batched VJPs: ``functional.jacobian(vectorize=True)``, and ``grad``
    with ``is_grads_batched`` over one-hot seeds."""
    x_data, w_data = jacobian_data(dtype)
    x = anb.tensor(x_data, requires_grad=True)
    w = anb.tensor(w_data)
    function = partial(jacobian_function, w=w, xp_=anb)
    jacobian = anb.autograd.functional.jacobian(function, x, vectorize=True)
    seeds = anb.eye(len(w_data), dtype=dtype)
    (rows,) = anb.grad(function(x), x, grad_outputs=seeds, is_grads_batched=True)
    return arrays([jacobian, rows])


def chain_data(dtype):
    rng = np.random.default_rng(4)
    return rng.standard_normal((6, 7)).astype(dtype), rng.standard_normal(7).astype(dtype)


def chain(x, w, xp_):
    """Eleven elementwise ops, one operand broadcast: a chain the backward fuses."""
    h = xp_.tanh(xp_.sin(x) * xp_.exp(-(x**2)) + x / 3.0)
    return xp_.sum(xp_.exp(h * w) - h)


def elementwise_chain(dtype):
    x_data, w_data = chain_data(dtype)
    x = anb.tensor(x_data, requires_grad=True)
    w = anb.tensor(w_data, requires_grad=True)
    loss = chain(x, w, anb)
    return arrays([loss, *anb.grad(loss, [x, w])])


def simulation_data(dtype):
    """The initial state (positions, velocities) and the stiffness."""
    rng = np.random.default_rng(6)
    return rng.uniform(-1.0, 1.0, size=(2, 5)).astype(dtype), np.array(2.5, dtype)


def leapfrog(state, k, xp_):
    """Leapfrog steps of damped pendulums, then a loss on the final state."""
    position, velocity = state[0], state[1]
    dt = SIMULATION_DT
    for _ in range(SIMULATION_STEPS):
        velocity = velocity - 0.5 * dt * (k * xp_.sin(position) + 0.1 * velocity)
        position = position + dt * velocity
        velocity = velocity - 0.5 * dt * (k * xp_.sin(position) + 0.1 * velocity)
    return xp_.sum(xp_.square(position - 0.3)) + 0.5 * xp_.sum(velocity * velocity)


def simulation_step(state, k):
    return leapfrog(state, k, anb)


def simulation(dtype):
    """``anb.compile`` of the steps, called twice (it records, then replays), then the same
    steps eagerly: each call's loss and its gradient w.r.t. the initial state and the
    stiffness; last, the compiled function's counts (programs, eager, hits, traces)."""
    compiled = anb.compile(simulation_step)
    state_data, k_data = simulation_data(dtype)
    results = []
    for step in (compiled, compiled, simulation_step):
        state = anb.tensor(state_data, requires_grad=True)
        k = anb.tensor(k_data, requires_grad=True)
        loss = step(state, k)
        results += arrays([loss, *anb.grad(loss, [state, k])])
    info = compiled.cache_info()
    return results + [np.array([info.programs, info.eager, info.hits, info.traces])]


def seed(shape, dtype):
    """The user's grad_outputs in :func:`seed_cases`."""
    return (np.arange(np.prod(shape), dtype=dtype).reshape(shape) + 1.5) / 4


def seed_cases_data(dtype):
    """The 1x1 matrix, the system's matrix and its (n, 1) right-hand side."""
    rng = np.random.default_rng(7)
    matrix = rng.standard_normal((4, 4)) + 4 * np.eye(4)
    rhs = rng.standard_normal((4, 1))
    return np.array([[1.7]], dtype), matrix.astype(dtype), rhs.astype(dtype)


def seed_cases(dtype):
    """``linalg.inv`` of a 1x1 matrix and ``solve`` with an (n, 1) right-hand side, each
    backward seeded with the user's NumPy array through ``as_tensor`` (where tier 0's twins
    once solved into the seed): the values and the gradients, then the two seed arrays as
    they are after the backward."""
    one_data, matrix_data, rhs_data = seed_cases_data(dtype)
    one = anb.tensor(one_data, requires_grad=True)
    inverse = anb.linalg.inv(one)
    inverse_seed = seed((1, 1), dtype)
    (one_grad,) = anb.grad(inverse, one, grad_outputs=anb.as_tensor(inverse_seed))
    matrix = anb.tensor(matrix_data, requires_grad=True)
    rhs = anb.tensor(rhs_data, requires_grad=True)
    solution = anb.linalg.solve(matrix, rhs)
    solve_seed = seed((4, 1), dtype)
    grads = anb.grad(solution, [matrix, rhs], grad_outputs=anb.as_tensor(solve_seed))
    return arrays([inverse, one_grad, solution, *grads]) + [inverse_seed, solve_seed]


#: The programs, in two groups that run in separate processes, each with its own cache and
#: worker, so that two workers compile at once; split by dtype, as the kernels are. The
#: simulation comes last: the backward anb.compile records compiles in the process (its
#: tables need the kernels), and the programs before it run in tier 0 meanwhile.
PROGRAMS = {
    "mlp float32": partial(mlp, np.float32),
    "elementwise chain float32": partial(elementwise_chain, np.float32),
    "batched jacobian float32": partial(batched_jacobian, np.float32),
    "simulation float32": partial(simulation, np.float32),
    "mlp float64": partial(mlp, np.float64),
    "gaussian process": gaussian_process,
    "seed cases float64": partial(seed_cases, np.float64),
}
GROUPS = (
    ["mlp float32", "elementwise chain float32", "batched jacobian float32",
     "simulation float32"],
    ["mlp float64", "gaussian process", "seed cases float64"],
)
