"""SciPy's names, differentiable: ``autograd_nb.scipy.special`` (``scipy.special``'s functions,
the same as :mod:`autograd_nb.special`) and ``autograd_nb.scipy.stats``."""
