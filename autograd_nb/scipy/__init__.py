"""SciPy's names, differentiable: ``autograd_nb.scipy.stats`` (the distributions) and
``autograd_nb.scipy.integrate`` (``odeint``, differentiable by the adjoint method)."""
