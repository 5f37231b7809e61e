"""SciPy's names, differentiable: ``autograd_nb.scipy.special`` (``scipy.special``'s functions,
the same as :mod:`autograd_nb.special`), ``autograd_nb.scipy.stats`` (the distributions) and
``autograd_nb.scipy.integrate`` (``odeint``, differentiable by the adjoint method)."""
