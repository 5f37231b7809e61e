"""SciPy's names, differentiable: ``autograd_nb.scipy.stats``."""
