"""SciPy's names, differentiable: ``autograd_nb.scipy.stats``.
Also ``autograd_nb.scipy.signal`` (``convolve``, ``correlate``).
Also ``autograd_nb.scipy.linalg`` (``solve_sylvester``, ``sqrtm``, ``det``, ``inv``, ...).
"""
