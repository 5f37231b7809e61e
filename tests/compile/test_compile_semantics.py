"""``anb.compile``: autograd semantics of replayed outputs against eager outputs of the same fn.

Each test runs one fn eagerly and compiled (the third call: a replay) on identical fresh state,
then the same autograd actions on both, and compares values, errors and side effects. The
cases come from a differential fuzz of grad/backward keywords over random programs.
"""

import numpy as np

import autograd_nb as anb


def _both(make, act, calls=3):
    """``act(outputs, state)`` after ``calls`` calls of fn, eager and compiled, from fresh
    state made by ``make()`` -> (fn, args, state)."""
    results = []
    for compiled in (False, True):
        fn, args, state = make()
        f = anb.compile(fn) if compiled else fn
        for _ in range(calls):
            out = f(*args)
        results.append(act(out, state))
    return results


def _arrays(values):
    return [None if v is None else np.asarray(v._data if isinstance(v, anb.Tensor) else v)
            for v in values]


def _assert_same(eager, replay):
    assert len(eager) == len(replay)
    for a, b in zip(eager, replay):
        if a is None or b is None:
            assert a is None and b is None
        else:
            assert a.dtype == b.dtype and a.shape == b.shape
            assert a.tobytes() == b.tobytes()


def _error(thunk):
    try:
        thunk()
    except Exception as error:  # noqa: BLE001 (the type and message are compared)
        return type(error), str(error)
    return None


def test_create_graph_re_run_does_not_write_the_arguments_again():
    # create_graph through a replayed output re-runs fn eagerly; fn halves x in place, so the
    # re-run halved the caller's x a second time and differentiated the halved values.
    def make():
        x = anb.tensor(np.array([1.0, 2.0, -0.5]), requires_grad=True)

        def fn(x):
            y = anb.sigmoid(x)
            with anb.no_grad():
                x *= 0.5
            return anb.sum(x * y)

        return fn, (x,), x

    def act(out, x):
        (g,) = anb.grad(out, x, create_graph=True)
        (gg,) = anb.grad(anb.sum(g * g), x)
        return _arrays([x, g, gg]) + [g.requires_grad, x._version[0] >= 0]

    eager, replay = _both(make, act)
    _assert_same(eager[:3], replay[:3])
    assert eager[3:] == replay[3:]


def test_create_graph_re_run_does_not_step_a_closure_parameter_again():
    # The same through a parameter fn reads from its closure (a training step's update).
    def make():
        w = anb.tensor(np.array([0.3, -1.2]), requires_grad=True)
        x = anb.tensor(np.array([1.5, 0.25]), requires_grad=True)

        def fn(x):
            nonlocal w  # (``w -= ...`` rebinds the cell to the same tensor)
            loss = anb.sum(anb.tanh(x) + w)
            (g,) = anb.grad(anb.sum(anb.square(w * 1.0)), [w])
            with anb.no_grad():
                w -= 0.1 * g
            return loss

        return fn, (x,), (x, w)

    def act(out, state):
        x, w = state
        (g,) = anb.grad(out, x, create_graph=True)
        return _arrays([w, g])

    _assert_same(*_both(make, act))


def test_second_backward_through_a_graph_that_saves_nothing_runs_as_eager():
    # Eager's ``x - y`` and ``sum`` save nothing, so a second backward without retain_graph
    # runs (and accumulates again); the replayed output's node was freed by the first and
    # raised "Trying to backward through the graph a second time".
    def make():
        x = anb.tensor(np.array([[1.0, -2.0], [0.5, 3.0]]), requires_grad=True)
        y = anb.tensor(np.array([0.25, 4.0]), requires_grad=True)
        return (lambda x, y: anb.sum(x - y, axis=0)), (x, y), (x, y)

    def act(out, state):
        go = anb.tensor(np.array([1.5, -0.5]))
        out.backward(go)
        second = _error(lambda: out.backward(go))
        third = _error(lambda: anb.grad(out, state, grad_outputs=go))
        return [second, third] + _arrays([t.grad for t in state])

    eager, replay = _both(make, act)
    assert eager[:2] == replay[:2]
    _assert_same(eager[2:], replay[2:])


def test_second_backward_through_a_graph_that_saves_values_raises_as_eager():
    # The other side of the previous test: tanh saves its output, so both raise.
    def make():
        x = anb.tensor(np.array([0.3, -0.7]), requires_grad=True)
        return (lambda x: anb.sum(anb.tanh(x))), (x,), x

    def act(out, x):
        out.backward()
        return [_error(out.backward)] + _arrays([x.grad])

    eager, replay = _both(make, act)
    assert eager[0] is not None and eager[0] == replay[0]
    _assert_same(eager[1:], replay[1:])


def test_a_gradient_through_another_output_is_eagers():
    # ``h`` is an output and the loss's gradient goes through it: the loss's table stops at
    # h and h's node takes the gradient on, so grad(loss, h) and h.retain_grad() see it.
    def make():
        x = anb.tensor(np.array([0.3, -1.2, 2.0]), requires_grad=True)

        def fn(x):
            h = anb.tanh(x)
            return h, anb.sum(h * h)

        return fn, (x,), {"x": x}

    def act(out, state):
        h, loss = out
        (in_h,) = anb.grad(loss, h, retain_graph=True, allow_unused=True)
        h.retain_grad()
        loss.backward()
        return _arrays([in_h, h.grad, state["x"].grad])

    eager, replay = _both(make, act)
    assert eager[0] is not None
    _assert_same(eager, replay)


def _chain():
    """fn's outputs h1 -> h2 -> loss, each the next one's input, and a closure parameter."""
    x = anb.tensor(np.array([0.3, -1.2, 2.0]), requires_grad=True)
    w = anb.tensor(np.array([0.5, 1.5, -0.25]), requires_grad=True)

    def fn(x):
        h1 = anb.tanh(x * w)
        h2 = anb.exp(h1) * x
        return h1, anb.sum(h2 * h2 + x), h2

    return fn, (x,), {"x": x, "w": w}


def test_gradients_in_a_chain_of_outputs_are_eagers():
    def act(out, state):
        h1, loss, h2 = out
        in_outputs = anb.grad(loss, [h2, h1], retain_graph=True)
        for h in (h1, h2):
            h.retain_grad()
        loss.backward(retain_graph=True)
        # the middle output alone, cut below at h1 and reaching x and w through it too
        middle = anb.grad(h2, [h1, state["w"]], grad_outputs=anb.ones_like(h2))
        return _arrays([*in_outputs, h1.grad, h2.grad, state["x"].grad, state["w"].grad,
                        *middle])

    eager, replay = _both(_chain, act)
    assert len(eager) == 8
    for a, b in zip(eager, replay):
        np.testing.assert_allclose(b, a, rtol=1e-12, atol=0)


def test_a_second_derivative_through_a_cut_output_is_eagers():
    def act(out, state):
        h1, loss, h2 = out
        x, w = state["x"], state["w"]
        gx, gw = anb.grad(loss, [x, w], create_graph=True)
        # (the gradients' graphs reach the outputs too: ``2 * h2 * ...`` saved h2)
        second = anb.grad(anb.sum(gx * gx) + anb.sum(gw), [x, w, h2, h1], allow_unused=True)
        assert second[2] is not None
        return _arrays(second)

    eager, replay = _both(_chain, act)
    for a, b in zip(eager, replay):
        np.testing.assert_allclose(b, a, rtol=1e-12, atol=0)


def test_batched_gradients_through_a_cut_output_are_eagers():
    def act(out, state):
        _, _, h2 = out
        v = np.stack([np.eye(3)[i] for i in range(3)])
        return _arrays(anb.grad(h2, [state["x"], state["w"]], grad_outputs=v,
                                is_grads_batched=True))

    eager, replay = _both(_chain, act)
    for a, b in zip(eager, replay):
        np.testing.assert_allclose(b, a, rtol=1e-12, atol=0)


def test_a_second_derivative_through_an_output_that_saves_itself_is_eagers():
    # tanh's rule reads its output: the gradient's graph reaches the replayed output h.
    def make():
        x = anb.tensor(np.array([0.3, -1.2, 2.0]), requires_grad=True)
        return anb.tanh, (x,), {"x": x}

    def act(h, state):
        v = anb.tensor(np.array([1.0, -2.0, 0.5]))
        (g,) = anb.grad(h, state["x"], grad_outputs=v, create_graph=True)
        return _arrays(anb.grad(anb.sum(g * g), [state["x"], h]))

    eager, replay = _both(make, act)
    _assert_same(eager, replay)


def test_create_graph_without_retain_graph_frees_the_graph_as_eager():
    # create_graph=True with retain_graph=False: eager frees y's graph, so a second derivative
    # through tanh's saved output raises, and one through a leaf's saved values (x * x)
    # runs.
    # The re-run's graph was kept: the second derivative through tanh ran.
    def make():
        x = anb.tensor(np.array([0.5, -1.0, 2.0]), requires_grad=True)
        return (lambda x: (anb.sum(anb.tanh(x) * x), anb.sum(x * x))), (x,), {"x": x}

    def act(out, state):
        x = state["x"]
        y, square = out
        (g,) = anb.grad(y, x, create_graph=True, retain_graph=False)
        (gs,) = anb.grad(square, x, create_graph=True, retain_graph=False)
        freed = _error(lambda: anb.grad(anb.sum(g), x))
        again = _error(lambda: anb.grad(y, x))
        return [freed, again], _arrays([g, gs, *anb.grad(anb.sum(gs * gs), x)])

    (eager_errors, eager_values), (errors, values) = _both(make, act)
    assert eager_errors[0] is not None and "second time" in eager_errors[0][1]
    assert errors == eager_errors
    _assert_same(eager_values, values)


def test_create_graph_after_an_input_changed_in_place_raises_not_a_wrong_gradient():
    # sigmoid saves its output, not x: eager's graph survives ``x += 1`` and differentiates
    # the old values. A replay's create_graph gradient re-runs fn on x, which now holds new
    # values: it raises torch's in-place error (it gave the new values' gradient, silently).
    def make():
        x = anb.tensor(np.array([0.3, -1.2, 2.0]), requires_grad=True)
        return (lambda x: 2.0 - anb.sigmoid(x)), (x,), {"x": x}

    def act(out, state):
        x = state["x"]
        with anb.no_grad():
            x += 1.0
        error = _error(lambda: anb.grad(anb.sum(out), x, create_graph=True))
        plain = anb.grad(anb.sum(out), x)  # (no re-run: the recorded table, as eager)
        return error, _arrays(plain), x.grad

    (eager_error, eager_plain, _), (error, plain, grad) = _both(make, act)
    assert eager_error is None
    assert error[0] is RuntimeError and "modified by an inplace operation" in error[1]
    assert "argument 0 of the compiled call" in error[1] and "uncompiled" in error[1]
    _assert_same(eager_plain, plain)
    assert grad is None
