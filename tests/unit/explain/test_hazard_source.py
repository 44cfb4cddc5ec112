"""``_explain/_hazard_source``: what a file's syntax says about a call line and a definition."""

from __future__ import annotations

import textwrap

from otel_jax._explain import _hazard_source as hs


def _file(tmp_path, text: str) -> str:
    path = tmp_path / "prog.py"
    path.write_text(textwrap.dedent(text))
    return str(path)


def test_feedback_reads_the_assignment_a_call_is_the_value_of(tmp_path):
    f = _file(tmp_path, """\
        params, loss, lr = step(params, batch, lr, config)
        state = update(
            state,
            lr=rate,
        )
        self.state = self.step(self.state)
        out = f(*args)
        a = b = f(x)
        print(f(x))
        """)
    fed = hs.feedback(f"{f}:1")
    assert fed is not None and fed.whole is None and not fed.starred
    assert fed.targets[0] == fed.args[0] and fed.targets[2] == fed.args[2]
    assert fed.targets[1] not in fed.args
    fed = hs.feedback(f"{f}:4")  # a line inside a call spread over lines
    assert fed is not None and fed.whole == fed.args[0]
    assert dict(fed.keywords)["lr"] is not None
    fed = hs.feedback(f"{f}:6")
    assert fed is not None and fed.whole == fed.args[0]  # self.state, stored and loaded
    assert hs.feedback(f"{f}:7").starred
    assert hs.feedback(f"{f}:8") is None  # two targets: not one name fed back
    assert hs.feedback(f"{f}:9") is None  # not an assignment
    assert hs.feedback(None) is None and hs.feedback("nowhere.py:3") is None
    assert hs.feedback(f"{f}:x") is None


def test_definition_tells_a_loop_body_from_a_function_body(tmp_path):
    f = _file(tmp_path, """\
        import jax

        def main():
            for epoch in range(3):
                acc = jax.jit(lambda p: p)
            g = jax.jit(lambda p: p + 1)
            return [jax.jit(lambda q: q) for _ in range(2)]

        @jax.jit
        def top(x):
            return x

        while True:
            h = lambda z: z
            break
        """)
    in_loop = hs.definition(f, 5)
    assert in_loop is not None and in_loop.loop and in_loop.loop_lines == (4, 5)
    in_body = hs.definition(f, 6)
    assert in_body is not None and not in_body.loop  # a function's body: not a loop's
    assert hs.definition(f, 7).loop  # a comprehension's element: made per item
    module = hs.definition(f, 9)  # the decorator's line names the function too
    assert module is not None and not module.loop
    assert hs.definition(f, 10) == module
    assert hs.definition(f, 14).loop  # a module-level loop
    assert hs.definition(f, 2) is None  # no definition starts there
    assert hs.definition(None, 3) is None


def test_a_file_that_does_not_parse_answers_none(tmp_path):
    f = _file(tmp_path, "def broken(:\n    x = f(x)\n")
    assert hs.feedback(f"{f}:2") is None and hs.definition(f, 1) is None


def test_made_in_call_names_what_a_call_line_makes_its_arguments_with(tmp_path):
    f = _file(tmp_path, """\
        out = step(x, Config(2), mode=cfg.Mode(1))
        step(
            x,
            Config(3),
        )
        step(x, config)
        """)
    assert hs.made_in_call(f"{f}:1") == {"Config", "Mode"}
    assert hs.made_in_call(f"{f}:3") == {"Config"}  # a line inside a call spread over lines
    assert hs.made_in_call(f"{f}:6") == frozenset()
    assert hs.made_in_call(None) == frozenset() and hs.made_in_call("nowhere.py:1") == set()


def test_definition_names_what_it_reads_of_the_loop_that_makes_it(tmp_path):
    f = _file(tmp_path, """\
        for act in acts:
            scale = 2
            f = lambda x: act(x) * scale
            g = lambda x: x * 3
            h = lambda x, a=act: a(x)
        """)
    assert hs.definition(f, 3).reads == ("act", "scale")
    assert hs.definition(f, 4).reads == ()
    assert hs.definition(f, 5).reads == ("act",)  # a default, read as it is made


def test_feedback_leaves_out_a_name_its_loop_sets_elsewhere(tmp_path):
    f = _file(tmp_path, """\
        for i in range(3):
            lr = schedule(i)
            params, lr = step(params, lr)
        for lr in rates:
            params, lr = step(params, lr)
        while True:
            params, lr = step(params, lr)
        params, lr = step(params, lr)
        """)
    for line in (3, 5):
        fed = hs.feedback(f"{f}:{line}")
        assert fed is not None and fed.targets[0] == fed.args[0] and fed.targets[1] is None
    for line in (7, 8):  # set only by the call's own line: fed back
        fed = hs.feedback(f"{f}:{line}")
        assert fed is not None and fed.targets[1] == fed.args[1]
    assert hs.feedback(f"{f}:7").in_loop and not hs.feedback(f"{f}:8").in_loop


def test_a_function_jitted_anew_on_each_pass_of_the_loop_around_its_call(tmp_path):
    f = _file(tmp_path, """\
        import jax
        import jax.numpy as jnp
        for i in range(3):
            forward = jax.jit(model.apply)
            y = forward(params, x)
            fn = jax.jit(functools.partial(loss, scale=i))
            z = fn(x)
            g = jax.jit(jnp.tanh)
            w = g(x)
            v = jax.jit(lambda a: a + 1)(x)
            if key not in cache:
                cache[key] = jax.jit(lambda a: a * 2)
            u = cache[key](x)
            if i == 0:
                h = jax.jit(lambda a: a - 1)
            t = h(x)
        forward = jax.jit(model.apply)
        y = forward(params, x)
        """)
    made = hs.jitted_in_loop(f"{f}:5")  # a bound method: a new object at each access
    assert made is not None and made.line == 4 and made.reads == ()
    made = hs.jitted_in_loop(f"{f}:7")  # a partial of what the loop binds: maybe meant
    assert made is not None and made.reads == ("i",)
    assert hs.jitted_in_loop(f"{f}:9") is None  # a module's function: the same object
    assert hs.jitted_in_loop(f"{f}:10") is not None  # jitted and called on one line
    assert hs.jitted_in_loop(f"{f}:13") is None  # kept in a cache on the first pass
    assert hs.jitted_in_loop(f"{f}:16") is None  # made on some passes only
    assert hs.jitted_in_loop(f"{f}:18") is None  # no loop around the call


def test_a_definition_in_a_loop_under_an_if_or_kept_in_a_cache_is_not_made_each_pass(
        tmp_path):
    f = _file(tmp_path, """\
        for i in range(3):
            f = jax.jit(lambda a: a + 1)
            if k not in cache:
                cache[k] = jax.jit(lambda a: a * 2)
            table[k] = jax.jit(lambda a: a * 3)
        """)
    assert hs.definition(f, 2).each_pass
    assert not hs.definition(f, 4).each_pass and not hs.definition(f, 5).each_pass


def test_what_a_calling_line_makes_includes_a_method_s_object_and_a_lambda(tmp_path):
    f = _file(tmp_path, """\
        y = Scaler(2.0).apply(x)
        z = transform(x, lambda v: v * 2)
        w = scaler.apply(x)
        """)
    assert "Scaler" in hs.made_in_call(f"{f}:1")
    assert hs.LAMBDA in hs.made_in_call(f"{f}:2")
    assert hs.made_in_call(f"{f}:3") == frozenset()


def test_a_helper_fed_back_by_its_caller_s_loop(tmp_path):
    f = _file(tmp_path, """\
        def train_one(params, lr):
            params, lr = step(params, lr)
            return params, lr

        for _ in range(3):
            params, lr = train_one(params, lr)
        for _ in range(3):
            params = train_one(params, 0.1)
        params, lr = train_one(params, lr)
        """)
    lr = hs.feedback(f"{f}:2").args[1]
    assert hs.helper_feeds_back(f"{f}:2", f"{f}:6", lr)
    assert not hs.helper_feeds_back(f"{f}:2", f"{f}:8", lr)  # a new float each call
    assert not hs.helper_feeds_back(f"{f}:2", f"{f}:9", lr)  # no loop: called once
    assert not hs.helper_feeds_back(f"{f}:2", None, lr)
    assert hs.parameters(f, 1) == ("params", "lr")
