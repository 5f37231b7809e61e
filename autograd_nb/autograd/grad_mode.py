"""Grad modes: whether ops record themselves for differentiation, per thread."""

import functools

from .. import tape

is_grad_enabled = tape.is_grad_enabled


class _Mode:
    """A grad mode usable as a ``with`` block or as a function decorator."""

    mode = None

    def __enter__(self):
        # (the switch as ``tape.grad_mode``'s: no call after it, so Ctrl-C cannot land between
        # it and the block)
        state = tape._state
        self.previous = state.enabled
        state.enabled = self.mode
        return self

    def __exit__(self, *exc_info):
        tape._state.enabled = self.previous
        return False

    def __call__(self, function):
        mode = self.mode

        @functools.wraps(function)
        def wrapper(*args, **kwargs):
            with tape.grad_mode(mode):
                return function(*args, **kwargs)

        return wrapper


class no_grad(_Mode):
    """Context manager and decorator: ops inside record nothing.

    Examples
    --------
    >>> import autograd_nb as anb
    >>> x = anb.ones(2, requires_grad=True)
    >>> with anb.no_grad():
    ...     y = x * 2
    >>> y.requires_grad
    False
    """

    mode = False


class enable_grad(_Mode):
    """Context manager and decorator: ops inside are recorded, even within ``no_grad``."""

    mode = True


class set_grad_enabled(_Mode):
    """Set the grad mode: at once when called, or for a ``with`` block or a function.

    Examples
    --------
    >>> import autograd_nb as anb
    >>> x = anb.ones(2, requires_grad=True)
    >>> with anb.set_grad_enabled(False):
    ...     (x * 2).requires_grad
    False
    >>> anb.is_grad_enabled()
    True
    """

    def __init__(self, mode):
        self.mode = bool(mode)
        self.previous = tape.set_grad_enabled_flag(self.mode)

    def __enter__(self):
        return self  # the mode was already set by the call

    def __call__(self, function):
        # As a decorator: undo the immediate switch; the mode applies per call instead.
        tape.set_grad_enabled_flag(self.previous)
        return super().__call__(function)
