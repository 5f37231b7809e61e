"""SciPy's names, differentiable:

- ``autograd_nb.scipy.special``: ``scipy.special``'s functions (the same as
  :mod:`autograd_nb.special`);
- ``autograd_nb.scipy.stats``: the distributions;
- ``autograd_nb.scipy.integrate``: ``odeint``, differentiable by the adjoint method;
- ``autograd_nb.scipy.signal``: ``convolve``, ``correlate``;
- ``autograd_nb.scipy.linalg``: ``solve_sylvester``, ``sqrtm``, ``det``, ``inv``, ...
"""
