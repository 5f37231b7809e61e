"""autograd_nb.scipy.stats against ``torch.distributions``: values and gradients, in ``x`` and
in every continuous parameter, for each distribution torch also has.

    python asv_bench/distribution_checks.py

Needs the ``bench`` extra (torch). For each case it prints the largest relative difference of
the log density (or mass, or cdf where torch has one) and of each gradient, ours against
torch's, in float64, and exits with 1 if any exceeds 1e-10. The tests check the same functions
against SciPy and central differences (tests/scipy); this is the peer check issue #44 asks of
the benchmarks. docs/benchmarking.rst quotes its output.
"""

import sys

import numpy as np
import torch
import torch.distributions as td

import autograd_nb as anb
from autograd_nb.scipy import stats

TOLERANCE = 1e-10
RNG = np.random.default_rng(3)


def _positive(shape, low=0.5, high=3.0):
    return RNG.uniform(low, high, shape)


def _cases():
    """(name, ours(*tensors), torch's(*tensors), arrays): the first array is x."""
    x = RNG.standard_normal(5)
    unit = RNG.uniform(0.05, 0.95, 5)
    spd = np.array([[2.0, 0.3, 0.1], [0.3, 1.5, -0.2], [0.1, -0.2, 1.0]])
    simplex = RNG.dirichlet(np.ones(4), 3)
    yield ("norm.logpdf", lambda x, m, s: stats.norm.logpdf(x, m, s),
           lambda x, m, s: td.Normal(m, s).log_prob(x), [x, RNG.standard_normal(5),
                                                          _positive(5)])
    yield ("norm.cdf", lambda x, m, s: stats.norm.cdf(x, m, s),
           lambda x, m, s: td.Normal(m, s).cdf(x), [x, RNG.standard_normal(5), _positive(5)])
    yield ("t.logpdf", lambda x, df, m, s: stats.t.logpdf(x, df, m, s),
           lambda x, df, m, s: td.StudentT(df, m, s).log_prob(x),
           [x, _positive(5, 1, 30), RNG.standard_normal(5), _positive(5)])
    yield ("gamma.logpdf", lambda x, a, s: stats.gamma.logpdf(x, a, scale=s),
           lambda x, a, s: td.Gamma(a, 1 / s).log_prob(x), [_positive(5), _positive(5),
                                                             _positive(5)])
    yield ("beta.logpdf", lambda x, a, b: stats.beta.logpdf(x, a, b),
           lambda x, a, b: td.Beta(a, b).log_prob(x), [unit, _positive(5), _positive(5)])
    yield ("chi2.logpdf", lambda x, df: stats.chi2.logpdf(x, df),
           lambda x, df: td.Chi2(df).log_prob(x), [_positive(5), _positive(5, 1, 10)])
    yield ("poisson.logpmf (in mu)", lambda mu: stats.poisson.logpmf(np.arange(5.0), mu),
           lambda mu: td.Poisson(mu).log_prob(torch.arange(5.0, dtype=torch.float64)),
           [_positive(5, 0.5, 8)])
    yield ("dirichlet.logpdf", lambda x, a: stats.dirichlet.logpdf(x.T, a),
           lambda x, a: td.Dirichlet(a).log_prob(x), [simplex, _positive(4)])
    yield ("multivariate_normal.logpdf",
           lambda x, m, c: stats.multivariate_normal.logpdf(x, m, c),
           lambda x, m, c: td.MultivariateNormal(m, covariance_matrix=c).log_prob(x),
           [RNG.standard_normal((4, 3)), RNG.standard_normal(3), spd])


def _relative(a, b):
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return float(np.max(np.abs(a - b) / np.maximum(np.abs(b), 1e-300))) if a.size else 0.0


def _ours(function, arrays, weights):
    tensors = [anb.tensor(a, requires_grad=True) for a in arrays]
    value = function(*tensors)
    grads = anb.grad((value * anb.tensor(weights)).sum(), tensors)
    return value.numpy(), [g.numpy() for g in grads]


def _torch(function, arrays, weights):
    tensors = [torch.tensor(a, requires_grad=True) for a in arrays]
    value = function(*tensors)
    grads = torch.autograd.grad((value * torch.tensor(weights)).sum(), tensors)
    return value.detach().numpy(), [g.numpy() for g in grads]


def main():
    worst = 0.0
    print(f"{'function':30} {'value':>10} {'gradients (x, then parameters)'}")
    for name, ours, theirs, arrays in _cases():
        value, _ = _torch(theirs, arrays, 1.0)
        weights = RNG.standard_normal(np.shape(value))
        mine, my_grads = _ours(ours, arrays, weights)
        value, grads = _torch(theirs, arrays, weights)
        # dirichlet takes x as (k, n) in SciPy's layout: its gradient comes back transposed
        differences = [_relative(mine, value)] + [
            _relative(np.reshape(g, t.shape) if g.shape != t.shape else g, t)
            for g, t in zip(my_grads, grads, strict=True)]
        worst = max(worst, *differences)
        print(f"{name:30} {differences[0]:10.1e} "
              + " ".join(f"{d:.1e}" for d in differences[1:]))
    print(f"largest relative difference: {worst:.1e} (tolerance {TOLERANCE:.0e})")
    return 0 if worst <= TOLERANCE else 1


if __name__ == "__main__":
    sys.exit(main())
