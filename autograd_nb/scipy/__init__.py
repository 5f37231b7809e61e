"""SciPy's names, differentiable: ``autograd_nb.scipy.stats`` (the distributions) and
``autograd_nb.scipy.integrate`` (``odeint``, differentiable by the adjoint method).
Also ``autograd_nb.scipy.signal`` (``convolve``, ``correlate``).
Also ``autograd_nb.scipy.linalg`` (``solve_sylvester``, ``sqrtm``, ``det``, ``inv``, ...).
"""
