"""Causes that name what really happened: calling conventions, the closest earlier
signature inside one argument, static values field by field, what a re-created
partial or closure captured, and warnings."""

from __future__ import annotations

import dataclasses
import functools
import warnings

import jax
import jax.numpy as jnp
import pytest
from conftest import BackendCompiles, diff_of

import otel_jax


def only_change(span) -> dict:
    changes = diff_of(span)
    assert len(changes) == 1, changes
    return changes[0]


# --- positional vs keyword ----------------------------------------------------------

def test_static_argument_by_keyword_then_positionally(telemetry):
    @functools.partial(jax.jit, static_argnames="n")
    def power(x, n):
        return x ** n

    power(jnp.ones(3), n=2)
    power(jnp.ones(3), 2)  # the same value, passed positionally: JAX compiles again
    span = telemetry.last(
        "test_static_argument_by_keyword_then_positionally.<locals>.power")
    assert span.attributes["jax.compile.cause.kind"] == "static_argument"
    assert only_change(span) == {"path": "n", "kind": "static_argument",
                                 "before": "passed by keyword",
                                 "after": "passed positionally"}
    assert span.attributes["jax.compile.cause"] == "n: passed by keyword -> passed positionally"
    hint = span.attributes["jax.compile.hint"]
    assert "same way every call" in hint and "identity" not in hint


def test_static_argument_positionally_then_by_keyword_with_a_new_value(telemetry):
    @functools.partial(jax.jit, static_argnums=1)
    def power(x, n):
        return x ** n

    power(jnp.ones(3), 2)
    power(jnp.ones(3), n=3)
    span = telemetry.last("test_static_argument_positionally_then_by_keyword_with_a_new_"
                          "value.<locals>.power")
    assert only_change(span) == {"path": "n", "kind": "static_argument",
                                 "before": "passed positionally (2)",
                                 "after": "passed by keyword (3)"}


def test_array_argument_by_keyword_then_positionally_reads_in_that_direction(telemetry):
    @jax.jit
    def add(x, y):
        return x + y

    add(jnp.ones(3), y=jnp.ones(3))
    add(jnp.ones(3), jnp.ones(3))
    span = telemetry.last("test_array_argument_by_keyword_then_positionally_reads_in_that_"
                          "direction.<locals>.add")
    assert span.attributes["jax.compile.cause.kind"] == "pytree_structure"
    assert only_change(span) == {"path": "y", "kind": "pytree_structure",
                                 "before": "passed by keyword (f32[3])",
                                 "after": "passed positionally (f32[3])"}


# --- warnings ---------------------------------------------------------------------------

def test_compile_history_warns_when_nothing_records():
    otel_jax.uninstall()

    @jax.jit
    def lonely(x):
        return x * 2

    lonely(jnp.ones(2))
    with pytest.warns(otel_jax.OtelJaxWarning, match="not recording") as record:
        assert otel_jax.compile_history(lonely) == []
    assert record[0].filename == __file__
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        otel_jax.compile_history(lonely)  # once is enough


def test_compile_history_is_quiet_while_recording(telemetry):
    @jax.jit
    def busy(x):
        return x * 2

    busy(jnp.ones(2))
    # the record is made off the compiling thread: on a loaded machine it may take longer
    # than compile_history's own wait for it (this test is about warnings, not that wait)
    assert otel_jax.flush(60)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert len(otel_jax.compile_history(busy)) == 1


# --- the closest earlier signature sees inside one argument -------------------------

def test_closest_signature_counts_dimensions_inside_a_shape(telemetry):
    @jax.jit
    def f(x):
        return x.sum()

    f(jnp.ones((2, 3, 4)))
    f(jnp.ones((5, 6, 4)))
    f(jnp.ones((2, 3, 7)))  # one dimension from the first, three from the latest
    span = telemetry.last("test_closest_signature_counts_dimensions_inside_a_shape.<locals>.f")
    assert span.attributes["jax.compile.compared_with"] == 1
    assert only_change(span) == {"path": "x", "kind": "shape",
                                 "before": "f32[2,3,4]", "after": "f32[2,3,7]"}


def test_closest_signature_counts_dtype_and_dimensions_inside_a_leaf(telemetry):
    @jax.jit
    def f(x, y):
        return x.sum() * y.sum()

    f(jnp.ones(3), jnp.ones((2, 2)))
    f(jnp.ones(3), jnp.ones((4, 5), jnp.int32))  # y: dtype and two dimensions
    f(jnp.ones(3), jnp.ones((2, 5)))  # one dimension from the first
    span = telemetry.last(
        "test_closest_signature_counts_dtype_and_dimensions_inside_a_leaf.<locals>.f")
    assert span.attributes["jax.compile.compared_with"] == 1
    assert only_change(span)["before"] == "f32[2,2]"




from typing import NamedTuple  # noqa: E402


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    lr: float
    depth: int
    name: str = "base"


class Schedule(NamedTuple):
    warmup: int
    decay: float


@dataclasses.dataclass(frozen=True)
class Nested:
    schedule: Schedule
    seed: int = 0


def test_frozen_dataclass_static_argument_is_diffed_field_by_field(telemetry):
    @functools.partial(jax.jit, static_argnames="cfg")
    def step(x, cfg):
        return x * cfg.lr * cfg.depth

    step(jnp.ones(2), cfg=TrainConfig(0.1, 2, "a"))
    step(jnp.ones(2), cfg=TrainConfig(0.2, 3, "b"))
    step(jnp.ones(2), cfg=TrainConfig(0.1, 2, "b"))  # one field from #1, two from #2
    spans = telemetry.compiles(
        "test_frozen_dataclass_static_argument_is_diffed_field_by_field.<locals>.step")
    assert [c["path"] for c in diff_of(spans[1])] == ["cfg.lr", "cfg.depth", "cfg.name"]
    assert diff_of(spans[1])[0] == {"path": "cfg.lr", "kind": "static_argument",
                                    "before": "0.1", "after": "0.2"}
    assert spans[1].attributes["jax.compile.cause"] == "cfg.lr: 0.1 -> 0.2 (+2 more)"
    assert spans[2].attributes["jax.compile.compared_with"] == 1
    assert only_change(spans[2]) == {"path": "cfg.name", "kind": "static_argument",
                                     "before": "'a'", "after": "'b'"}
    hint = spans[2].attributes["jax.compile.hint"]
    assert "identity" not in hint and "every distinct value" in hint


def test_nested_dataclass_and_namedtuple_fields_are_dotted(telemetry):
    @functools.partial(jax.jit, static_argnums=1)
    def step(x, cfg):
        return x * cfg.schedule.decay

    step(jnp.ones(2), Nested(Schedule(10, 0.5)))
    step(jnp.ones(2), Nested(Schedule(10, 0.9)))
    span = telemetry.compiles(
        "test_nested_dataclass_and_namedtuple_fields_are_dotted.<locals>.step")[-1]
    assert only_change(span) == {"path": "cfg.schedule.decay", "kind": "static_argument",
                                 "before": "0.5", "after": "0.9"}


@dataclasses.dataclass(frozen=True, eq=False)
class IdentityConfig:  # eq=False: hashed by identity though a dataclass
    k: int


def test_identity_hashed_dataclass_keeps_the_identity_hint(telemetry):
    @functools.partial(jax.jit, static_argnums=1)
    def step(x, cfg):
        return x * cfg.k

    step(jnp.ones(2), IdentityConfig(1))
    step(jnp.ones(2), IdentityConfig(1))
    span = telemetry.compiles(
        "test_identity_hashed_dataclass_keeps_the_identity_hint.<locals>.step")[-1]
    assert span.attributes["jax.compile.cause.kind"] == "static_argument"
    assert "hashes by identity" in span.attributes["jax.compile.cause"]
    assert "__eq__" in span.attributes["jax.compile.hint"]


def test_static_value_reprs_are_one_line_and_bounded(telemetry):
    class Tall:
        def __init__(self, n):
            self.n = n

        def __eq__(self, other):
            return isinstance(other, Tall) and other.n == self.n

        def __hash__(self):
            return hash(self.n)

        def __repr__(self):
            return "Tall(\n" + "\n".join(f"    line {i} = {self.n}" for i in range(60)) + "\n)"

    @functools.partial(jax.jit, static_argnums=1)
    def step(x, t):
        return x * t.n

    step(jnp.ones(2), Tall(1))
    step(jnp.ones(2), Tall(2))
    span = telemetry.compiles(
        "test_static_value_reprs_are_one_line_and_bounded.<locals>.step")[-1]
    change = only_change(span)
    cause = span.attributes["jax.compile.cause"]
    assert "\n" not in cause and len(cause) < 400
    assert change["before"].startswith("Tall( line 0 = 1")


# --- what a re-created partial or closure binds -----------------------------------------

def scaled_power(x, k, scale=1.0):
    return x ** k * scale


def train_with(cfg, x):
    return x * cfg.lr


def test_recreated_partial_names_the_bound_value_that_changed(telemetry):
    for k in (2, 3):
        jax.jit(functools.partial(scaled_power, k=k))(jnp.ones(2))
    span = telemetry.last("scaled_power")
    assert span.attributes["jax.compile.cause.kind"] == "function_identity"
    cause = span.attributes["jax.compile.cause"]
    assert cause.startswith("a new function object for the same source; bound k: 2 -> 3")
    assert "(+" not in cause
    assert {"path": "<function>.k", "kind": "function_identity", "before": "2",
            "after": "3"} in diff_of(span)


def test_recreated_partial_with_positional_arguments(telemetry):
    for scale in (0.5, 0.25):
        jax.jit(functools.partial(scaled_power, jnp.ones(2), 2, scale=scale))()
    span = telemetry.last("scaled_power")
    assert "bound scale: 0.5 -> 0.25" in span.attributes["jax.compile.cause"]
    assert len(diff_of(span)) == 2  # x and k unchanged: not listed
    for k in (2, 3):
        jax.jit(functools.partial(scaled_power, jnp.ones(2), k))()
    span = telemetry.last("scaled_power")
    cause = span.attributes["jax.compile.cause"]
    assert cause.startswith("a new function object for the same source; bound k: 2 -> 3")


def test_recreated_partial_over_a_config_names_its_fields(telemetry):
    for lr in (0.1, 0.2):
        jax.jit(functools.partial(train_with, TrainConfig(lr, 2)))(jnp.ones(2))
    span = telemetry.last("train_with")
    assert "bound cfg.lr: 0.1 -> 0.2" in span.attributes["jax.compile.cause"]


def test_recreated_closure_names_the_captured_values_that_changed(telemetry):
    def make(k, w):
        def inner(x):
            return x * k + w.sum()
        return inner

    jax.jit(make(2, jnp.ones(3)))(jnp.ones(2))
    jax.jit(make(2, jnp.ones(4)))(jnp.ones(2))
    spans = telemetry.compiles(
        "test_recreated_closure_names_the_captured_values_that_changed.<locals>.make."
        "<locals>.inner")
    cause = spans[-1].attributes["jax.compile.cause"]
    assert "bound w: f32[3] -> f32[4]" in cause  # an array shows as its type only
    assert "1." not in cause and "k:" not in cause


def test_bound_values_never_run_user_code_or_show_array_values():
    import numpy as np

    from otel_jax._capture._reprs import bound_values

    class Loud:
        def __repr__(self):
            raise AssertionError("user code ran")

        def __eq__(self, other):
            raise AssertionError("user code ran")

        __hash__ = object.__hash__

    loud = Loud()
    secret = np.array([1234.5, 6789.0], dtype=np.float32)

    def inner(x):
        return x, loud, secret

    bound = dict(bound_values(functools.partial(inner, tuple(range(20)))))
    assert bound["loud"].endswith("Loud>")
    assert bound["secret"] == "f32[2]"
    assert bound["x"] == "<tuple>"  # not a small tuple of scalars: its type only
    assert "1234" not in str(bound)


# --- dataclass pytrees named by field ---------------------------------------------------

@functools.partial(jax.tree_util.register_dataclass, data_fields=["w", "b"],
                   meta_fields=["names"])
@dataclasses.dataclass
class Layer:
    w: jax.Array
    b: object = None
    names: tuple = dataclasses.field(default=(), metadata={"static": True})


def test_dataclass_pytree_children_are_named_by_field(telemetry):
    @jax.jit
    def run(layer, x):
        return x * layer.w

    run(Layer(jnp.ones(2)), jnp.ones(2))
    run(Layer(jnp.ones(2), jnp.ones(3)), jnp.ones(2))  # None -> an array: the tree changed
    span = telemetry.last("test_dataclass_pytree_children_are_named_by_field.<locals>.run")
    assert only_change(span) == {"path": "layer.b", "kind": "pytree_structure",
                                 "before": "None", "after": "f32[3]"}


def test_static_field_with_equal_short_reprs_is_not_called_identity_hashed(telemetry):
    @jax.jit
    def run(layer, x):
        return x * layer.w

    long = tuple(f"feature_{i}" for i in range(40))
    run(Layer(jnp.ones(2), None, long), jnp.ones(2))
    run(Layer(jnp.ones(2), None, long[:-1] + ("other",)), jnp.ones(2))  # differs at the end
    span = telemetry.last("test_static_field_with_equal_short_reprs_is_not_called_identity_"
                          "hashed.<locals>.run")
    change = only_change(span)
    assert change["path"] == "layer.names"
    assert "identity" not in change["before"] + change["after"]
    assert "'feature_39')" in change["before"] and "'other')" in change["after"]
    assert len(change["before"]) < 140


def test_closest_signature_counts_sharding_entries(telemetry):
    import numpy as np
    from conftest import needs_devices
    from jax.sharding import Mesh, NamedSharding
    from jax.sharding import PartitionSpec as P

    mesh = Mesh(np.array(needs_devices(4)[:4]).reshape(2, 2), ("a", "b"))

    @jax.jit
    def norm(x):
        return (x * x).sum()

    x = jnp.ones((8, 4))
    norm(jax.device_put(x, NamedSharding(mesh, P("a", "b"))))
    norm(jax.device_put(x, NamedSharding(mesh, P("b", "a"))))
    norm(jax.device_put(x, NamedSharding(mesh, P("a", None))))  # one entry from #1, two from #2
    span = telemetry.last("test_closest_signature_counts_sharding_entries.<locals>.norm")
    assert span.attributes["jax.compile.cause.kind"] == "sharding"
    assert span.attributes["jax.compile.compared_with"] == 1


def test_a_sharding_is_closer_to_a_sharding_than_to_one_device(telemetry):
    import numpy as np
    from conftest import needs_devices
    from jax.sharding import Mesh, NamedSharding
    from jax.sharding import PartitionSpec as P

    devices = needs_devices(4)[:4]
    mesh = Mesh(np.array(devices), ("data",))

    @jax.jit
    def scale(x):
        return x * 2

    x = jnp.ones((8, 4))
    scale(jax.device_put(x, devices[1]))
    scale(jax.device_put(x, NamedSharding(mesh, P("data"))))
    scale(jax.device_put(x, NamedSharding(mesh, P(None, "data"))))
    span = telemetry.last(
        "test_a_sharding_is_closer_to_a_sharding_than_to_one_device.<locals>.scale")
    assert span.attributes["jax.compile.compared_with"] == 2
    change = only_change(span)
    assert change["kind"] == "sharding"
    # JAX 0.8 prints PartitionSpec(...), later versions P(...)
    assert "('data',) over mesh(data=4)" in change["before"]
    assert "(None, 'data') over mesh(data=4)" in change["after"]


def test_reprs_of_named_values_pass_their_names_on(monkeypatch):
    """Field, parameter and bound-value reprs go through ``safe_repr(..., name=...)``,
    where values of sensitive-looking names can be kept out of telemetry."""
    from otel_jax._capture import _reprs, _statics
    from otel_jax._core import _text

    seen: list[str | None] = []
    real = _text.safe_repr

    def recording(obj, limit=_text.REPR_LIMIT, name=None):
        seen.append(name)
        return real(obj, limit, name=name)

    monkeypatch.setattr(_reprs, "safe_repr", recording)
    _reprs.static_fields(TrainConfig(0.1, 2, "secret"))
    _reprs.bound_values(functools.partial(scaled_power, k=2, scale=0.5))
    assert {"lr", "depth", "name", "k", "scale"} <= set(seen)
    # a static argument's own name reaches the scrubbing rules too
    assert "abc" not in _statics.static_arg("api_key", "abc").repr


def test_attrs_like_classes_are_read_field_by_field():
    from otel_jax._capture._reprs import static_fields

    class Attribute:  # what attrs keeps per field
        def __init__(self, name, eq=True, repr=True):
            self.name, self.eq, self.repr = name, eq, repr

    class Frozen:
        __attrs_attrs__ = (Attribute("lr"), Attribute("cache", eq=False),
                           Attribute("token", repr=False))

        def __init__(self, lr, cache, token):
            self.lr, self.cache, self.token = lr, cache, token

    fields = dict(static_fields(Frozen(0.1, {}, "s3cr3t")))
    assert fields == {"lr": "0.1", "token": "<str>"}  # not compared: left out; hidden: type


# --- leaf paths are the call's own ---------------------------------------------------

def test_a_transformed_call_names_its_own_leaves(telemetry):
    @jax.jit
    def k(p):
        return sum(v.sum() for v in p.values())

    jax.vmap(k)({"a": jnp.ones((2, 3)), "b": jnp.ones((2, 3))})
    jax.vmap(k)({"a": jnp.ones((2, 3)), "c": jnp.ones((2, 4))})
    span = telemetry.last("test_a_transformed_call_names_its_own_leaves.<locals>.k")
    assert [c["path"] for c in diff_of(span)] == ["p['c']"]


def test_a_plain_call_after_a_transformed_one_names_its_arguments(telemetry):
    @jax.jit
    def f(*args):
        return jax.tree.reduce(lambda a, b: a + b.sum(), args, 0.0)

    jax.vmap(f)({"a": jnp.ones((2, 3)), "b": jnp.ones((2, 3))})
    f(jnp.ones(3), jnp.ones(3))
    f(jnp.ones(4), jnp.ones(3))
    span = telemetry.last(
        "test_a_plain_call_after_a_transformed_one_names_its_arguments.<locals>.f")
    assert only_change(span)["path"] == "args[0]"


def test_dict_keys_equal_as_numbers_keep_their_own_paths(telemetry):
    @jax.jit
    def f(d):
        return sum(d.values())

    f({1: jnp.ones(3)})
    f({1.0: jnp.ones(4)})  # an equal tree (1 == 1.0) with another key and shape
    span = telemetry.last(
        "test_dict_keys_equal_as_numbers_keep_their_own_paths.<locals>.f")
    assert only_change(span)["path"] == "d[1.0]"


def two_state_types() -> tuple[type, type]:
    """Two dataclass node types with the same fields, new ones at each call."""

    @jax.tree_util.register_dataclass
    @dataclasses.dataclass
    class TrainState:
        w: jax.Array
        step: int = dataclasses.field(metadata={"static": True})

    @jax.tree_util.register_dataclass
    @dataclasses.dataclass
    class EvalState:  # the same fields: some jaxlib versions compare such trees equal
        w: jax.Array
        step: int = dataclasses.field(metadata={"static": True})

    return TrainState, EvalState


def test_dataclass_nodes_of_two_types_with_the_same_fields(telemetry):
    # jaxlib 0.10 and later compare the two trees equal and hash them apart (by type). The
    # second type gets its own entry in the jitted function's cache, but about 1 time in
    # 100 JAX gives it the first type's executable without compiling (measured: one
    # backend compile event, two cache entries), and then no compile may be reported. New
    # types hash anew; the first pair that JAX compiles twice is the case tested.
    name = "test_dataclass_nodes_of_two_types_with_the_same_fields.<locals>.f"
    for _ in range(5):
        train_state, eval_state = two_state_types()

        @jax.jit
        def f(state):
            return state.w * 2

        before = len(telemetry.compiles(name))
        with BackendCompiles() as jax_counted:
            f(train_state(jnp.ones(2), 1))
            f(eval_state(jnp.ones(2), 1))  # JAX compiles again: another node type
            f(train_state(jnp.ones(2), 1))  # cached: no record
        spans = telemetry.compiles(name)[before:]
        assert len(spans) == jax_counted.names.count("jit(f)")  # JAX's compiles, no other
        if len(spans) == 2:
            break
    assert len(spans) == 2
    change = only_change(spans[-1])
    assert change["kind"] == "pytree_structure" and change["path"] == "state"
    assert change["before"].startswith("TrainState") and change["after"].startswith("EvalState")


class HashedByType:
    """Hashes by type and prints no fields, compares by fields: legal, and JAX keys by ==."""

    def __init__(self, **options: int) -> None:
        self.options = options

    def __hash__(self) -> int:
        return hash(type(self))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, HashedByType) and self.options == other.options

    def __repr__(self) -> str:
        return "HashedByType(...)"


class NeverEqual:
    def __hash__(self) -> int:
        return 7

    def __eq__(self, other: object) -> bool:
        return False

    def __repr__(self) -> str:
        return "NeverEqual()"


@pytest.mark.parametrize("first, second", [
    (HashedByType(a=1), HashedByType(a=2)),
    (NeverEqual(), NeverEqual()),
], ids=["hashed-by-type", "never-equal"])
def test_static_value_equal_in_hash_and_repr_but_not_equal(telemetry, first, second):
    @functools.partial(jax.jit, static_argnums=1)
    def f(x, config):
        return x + 1

    f(jnp.ones(2), first)
    f(jnp.ones(2), second)  # JAX compiles again: the values are not ==
    span = telemetry.last("test_static_value_equal_in_hash_and_repr_but_not_equal"
                          ".<locals>.f")
    assert span.attributes["jax.compile.cause.kind"] == "static_argument"
    assert only_change(span)["path"] == "config"


@functools.partial(jax.tree_util.register_dataclass, data_fields=["w"],
                   meta_fields=["width", "activation"])
@dataclasses.dataclass
class Dense:  # static fields named at registration, not in field metadata
    w: jax.Array
    width: int
    activation: str


def _dense_change(telemetry, f) -> dict:
    f(Dense(jnp.ones(2), 2, "relu"))
    f(Dense(jnp.ones(2), 2, "gelu"))
    change = only_change(telemetry.last(
        f"test_register_dataclass_meta_fields_are_named.<locals>.{f.__name__}"))
    assert (change["before"], change["after"]) == ("static 'relu'", "static 'gelu'")
    return change


def test_register_dataclass_meta_fields_are_named(telemetry, monkeypatch):
    from otel_jax._capture._jax import _traced

    @jax.jit
    def named(layer):
        return layer.w * 2

    @jax.jit
    def positional(layer):
        return layer.w * 2

    assert _traced.dataclass_meta_fields(Dense) == ("width", "activation")
    assert _traced.dataclass_meta_fields(int) is None
    assert _dense_change(telemetry, named)["path"] == "layer.activation"
    # JAX moved its registry: the fields are read by position
    monkeypatch.setattr(_traced, "dataclass_meta_fields", lambda node_type: None)
    assert _dense_change(telemetry, positional)["path"] == "layer.<static 1>"


def test_long_static_texts_are_shown_where_they_part(telemetry):
    @functools.partial(jax.jit, static_argnums=1)
    def f(x, layers):
        return x + 1

    f(jnp.ones(2), tuple(range(60)))
    f(jnp.ones(2), tuple(range(59)) + (99,))  # parts after the 120-character cut
    change = only_change(telemetry.last(
        "test_long_static_texts_are_shown_where_they_part.<locals>.f"))
    assert change["kind"] == "static_argument"
    assert change["before"].endswith("58, 59)") and change["after"].endswith("58, 99)")
    assert "looks the same" not in change["after"]
    assert max(len(change["before"]), len(change["after"])) <= 120


@dataclasses.dataclass(frozen=True)
class Scaler:
    factor: float

    def __call__(self, x):
        return x * self.factor


def test_recreated_callable_object_names_the_field_that_changed(telemetry):
    x = jnp.ones(3)
    jax.jit(Scaler(2.0))(x)
    jax.jit(Scaler(3.0))(x)  # jax.jit of a new callable object: compiles again
    span = telemetry.last("Scaler.__call__")
    assert span.attributes["jax.compile.cause.kind"] == "function_identity"
    changes = {c["path"]: (c["before"], c["after"]) for c in diff_of(span)}
    assert changes["<function>.self.factor"] == ("2.0", "3.0")


# --- node types with field names that gain or lose a field ------------------------------

def _batch_class(*fields: str):
    """A NamedTuple ``Batch`` with these fields: one class's two versions share a name."""
    return NamedTuple("Batch", [(f, jax.Array) for f in fields])


def test_a_namedtuple_that_gains_a_field_names_it(telemetry):
    @jax.jit
    def loss(batch):
        return batch.x.sum()

    old, new = _batch_class("x", "y"), _batch_class("x", "y", "mask")
    loss(old(jnp.ones((8, 2)), jnp.ones(8)))
    loss(new(jnp.ones((8, 2)), jnp.ones(8), jnp.ones(8, bool)))  # the new version
    loss(_batch_class("x", "y")(jnp.ones((8, 2)), jnp.ones(4)))  # defined again, y shorter
    spans = telemetry.compiles("test_a_namedtuple_that_gains_a_field_names_it.<locals>.loss")
    assert only_change(spans[1]) == {"path": "batch.mask", "kind": "pytree_structure",
                                     "before": "<absent>", "after": "bool[8]"}
    assert spans[1].attributes["jax.compile.cause"] == "batch.mask: <absent> -> bool[8]"
    assert "keep the argument tree fixed" in spans[1].attributes["jax.compile.hint"]
    changes = diff_of(spans[2])
    assert changes[0]["path"] == "batch" and "defined again" in changes[0]["after"]
    assert changes[1] == {"path": "batch.y", "kind": "shape", "before": "f32[8]",
                          "after": "f32[4]"}


def test_a_dataclass_pytree_that_loses_a_field_names_it(telemetry):
    def version(*fields: str):
        cls = dataclasses.make_dataclass("Params", [(f, jax.Array) for f in fields])
        return jax.tree_util.register_dataclass(cls, data_fields=list(fields),
                                                meta_fields=[])

    @jax.jit
    def apply(params, x):
        return x * params.w

    apply(version("w", "b")(jnp.ones(2), jnp.ones(2)), jnp.ones(2))
    apply(version("w")(jnp.ones(2)), jnp.ones(2))
    span = telemetry.last("test_a_dataclass_pytree_that_loses_a_field_names_it.<locals>.apply")
    assert only_change(span) == {"path": "params.b", "kind": "pytree_structure",
                                 "before": "f32[2]", "after": "<absent>"}


def test_node_types_of_other_names_are_still_summarised_whole(telemetry):
    @jax.jit
    def f(state):
        return state[0] * 2

    f(NamedTuple("Left", [("a", jax.Array)])(jnp.ones(2)))
    f(NamedTuple("Right", [("a", jax.Array), ("b", jax.Array)])(jnp.ones(2), jnp.ones(2)))
    change = only_change(telemetry.last(
        "test_node_types_of_other_names_are_still_summarised_whole.<locals>.f"))
    assert (change["path"], change["before"], change["after"]) == (
        "state", "Left with 1 leaves", "Right with 2 leaves")


# --- static data whose text is unchanged but which is not equal ---------------------------

def test_a_partial_of_a_new_function_each_step_says_so(telemetry):
    @jax.jit
    def run(loss_fn, x):
        return loss_fn(x)

    def make(scale):
        return lambda x: x * scale

    def make_other():
        return lambda x: x / 2

    for scale in (2.0, 3.0):
        run(jax.tree_util.Partial(make(scale)), jnp.ones(2))  # a new lambda each step
    run(jax.tree_util.Partial(make_other()), jnp.ones(2))  # another lambda, the same text
    spans = telemetry.compiles(
        "test_a_partial_of_a_new_function_each_step_says_so.<locals>.run")
    change = only_change(spans[1])
    assert change == {"path": "loss_fn.func", "kind": "pytree_structure",
                      "before": "static <function test_a_partial_of_a_new_function_each_step_"
                                "says_so.<locals>.make.<locals>.<lambda>>",
                      "after": "static new function object, same source"}
    assert change["before"] != change["after"]
    hint = spans[1].attributes["jax.compile.hint"]
    assert "compares by identity" in hint and "create it once" in hint
    other = only_change(spans[2])
    assert other["path"] == "loss_fn.func"
    assert other["after"].startswith("static another function (test_a_partial_of_a_new_"
                                     "function_each_step_says_so.<locals>.make_other.<locals>"
                                     ".<lambda> at test_explanations.py:")


class Opaque:
    """No __eq__/__hash__, no fields in its repr: two instances print the same."""

    def __repr__(self) -> str:
        return "Opaque()"


@jax.tree_util.register_pytree_node_class
class Tagged:
    def __init__(self, value, tag):
        self.value, self.tag = value, tag

    def tree_flatten(self):
        return (self.value,), self.tag

    @classmethod
    def tree_unflatten(cls, tag, children):
        return cls(children[0], tag)


def test_static_data_equal_in_text_names_identity_or_inequality(telemetry):
    @jax.jit
    def f(t):
        return t.value + 1

    f(Tagged(jnp.ones(2), Opaque()))
    f(Tagged(jnp.ones(2), Opaque()))  # a new instance hashed by identity
    f(Tagged(jnp.ones(2), float("nan")))
    f(Tagged(jnp.ones(2), float("nan")))  # nan != nan: equal text, not ==
    spans = telemetry.compiles(
        "test_static_data_equal_in_text_names_identity_or_inequality.<locals>.f")
    assert len(spans) == 4
    identity = only_change(spans[1])
    assert identity["path"] == "t.<static data>"
    assert "compared by identity" in identity["before"]
    assert identity["after"] == "static new test_explanations.Opaque instance"
    assert "hashes by identity" in spans[1].attributes["jax.compile.hint"]
    assert "static argument" not in spans[1].attributes["jax.compile.cause"]
    unequal = only_change(spans[3])
    assert unequal == {"path": "t.<static data>", "kind": "pytree_structure",
                       "before": "static nan",
                       "after": "static nan (looks the same but is not == to it)"}
    assert "not == to it" in spans[3].attributes["jax.compile.hint"]


# --- children named by the key paths JAX gives, not by declaration order ------------

@dataclasses.dataclass
class SortedState:
    """A chex.dataclass-like node: its fields flattened sorted by name, with keys."""

    step: object
    params: object
    ema_params: object


def _sorted_fields(node) -> list[str]:
    return sorted(f.name for f in dataclasses.fields(node))


jax.tree_util.register_pytree_with_keys(
    SortedState,
    lambda s: ([(jax.tree_util.GetAttrKey(n), getattr(s, n)) for n in _sorted_fields(s)],
               None),
    lambda _, children: SortedState(**dict(zip(_sorted_fields(SortedState), children))))


@dataclasses.dataclass
class ReorderedFields:
    """Registered with its data fields in another order than it declares them."""

    a: object
    b: object


jax.tree_util.register_dataclass(ReorderedFields, data_fields=["b", "a"], meta_fields=[])


@dataclasses.dataclass
class ReversedNoKeys:
    """A node flattened in reverse, registered without keys: JAX names its children by
    position."""

    a: object
    b: object


jax.tree_util.register_pytree_node(
    ReversedNoKeys, lambda s: ((s.b, s.a), None), lambda _, c: ReversedNoKeys(c[1], c[0]))


def test_a_node_flattened_out_of_declaration_order_names_the_field_that_changed(telemetry):
    @jax.jit
    def update(state):
        return state.step + 1

    params = {"w": jnp.ones(2), "b": jnp.ones(2)}
    update(SortedState(jnp.int32(0), params, None))
    update(SortedState(jnp.int32(0), params, params))
    span = telemetry.last("test_a_node_flattened_out_of_declaration_order_names_the_field_"
                          "that_changed.<locals>.update")
    assert only_change(span) == {"path": "state.ema_params", "kind": "pytree_structure",
                                 "before": "None", "after": "dict with keys ['b', 'w']"}


def test_register_dataclass_fields_in_another_order_are_named_as_registered(telemetry):
    @jax.jit
    def total(s):
        return s.a.sum()

    total(ReorderedFields(jnp.ones(2), None))
    total(ReorderedFields(jnp.ones(2), jnp.ones(2)))
    span = telemetry.last("test_register_dataclass_fields_in_another_order_are_named_as_"
                          "registered.<locals>.total")
    assert only_change(span) == {"path": "s.b", "kind": "pytree_structure",
                                 "before": "None", "after": "f32[2]"}


def test_a_node_without_keys_names_its_children_by_position_never_a_guessed_field(
        telemetry):
    @jax.jit
    def total(s):
        return s.a.sum()

    total(ReversedNoKeys(jnp.ones(2), None))
    total(ReversedNoKeys(jnp.ones(2), jnp.ones(2)))
    span = telemetry.last("test_a_node_without_keys_names_its_children_by_position_never_a_"
                          "guessed_field.<locals>.total")
    assert only_change(span) == {"path": "s[0]", "kind": "pytree_structure",
                                 "before": "None", "after": "f32[2]"}


# --- hints that hold for what was seen ------------------------------------------------

class ValueHashedModel:
    """The JAX FAQ's pattern for a static ``self``: hashed and compared by value."""

    def __init__(self, scale: float) -> None:
        self.scale = scale

    def __hash__(self) -> int:
        return hash(self.scale)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ValueHashedModel) and self.scale == other.scale

    @functools.partial(jax.jit, static_argnums=0)
    def apply(self, x):
        return x * self.scale


def test_a_value_hashed_static_self_that_differs_is_another_value_not_a_nan(telemetry):
    ValueHashedModel(2.0).apply(jnp.ones(3))
    ValueHashedModel(2.0).apply(jnp.ones(3))  # an equal new instance: a cache hit
    ValueHashedModel(3.0).apply(jnp.ones(3))
    spans = telemetry.compiles("ValueHashedModel.apply")
    assert [s.attributes["jax.compile.count"] for s in spans] == [1, 2]
    assert only_change(spans[1]) == {"path": "self.scale", "kind": "static_argument",
                                     "before": "2.0", "after": "3.0"}
    hint = spans[1].attributes["jax.compile.hint"]
    assert "equal value hit the cache" in hint
    assert "NaN" not in hint and "never hits" not in hint


def test_a_static_nan_still_never_hits_the_cache(telemetry):
    @functools.partial(jax.jit, static_argnums=1)
    def shift(x, eps):
        return x + eps

    shift(jnp.ones(2), float("nan"))
    shift(jnp.ones(2), float("nan"))
    span = telemetry.last("test_a_static_nan_still_never_hits_the_cache.<locals>.shift")
    assert "not == to itself" in only_change(span)["after"]
    assert "never hits the cache" in span.attributes["jax.compile.hint"]


def test_a_dtype_spelled_three_ways_is_never_said_to_hit_the_cache(telemetry):
    @functools.partial(jax.jit, static_argnames="compute_dtype")
    def cast(x, compute_dtype):
        return x.astype(compute_dtype)

    half = jnp.ones(3, jnp.bfloat16)
    cast(jnp.ones(3), compute_dtype=jnp.bfloat16)
    cast(jnp.ones(3), compute_dtype=half.dtype)  # == jnp.bfloat16, hashed apart
    cast(jnp.ones(3), compute_dtype="bfloat16")  # == half.dtype, hashed apart
    spans = telemetry.compiles(
        "test_a_dtype_spelled_three_ways_is_never_said_to_hit_the_cache.<locals>.cast")
    assert [s.attributes["jax.compile.cause.kind"] for s in spans] == [
        "first_compile", "static_argument", "static_argument"]
    for span in spans[1:]:
        change = only_change(span)
        assert change["path"] == "compute_dtype"
        assert "== to it, but of another type and hashed differently" in change["after"]
        hint = span.attributes["jax.compile.hint"]
        assert "each spelling compiles once" in hint
        assert "equal value hit" not in hint


def test_a_value_compiled_before_under_another_spelling_is_not_said_to_hit(telemetry):
    """The closest earlier compile holds a third value: the hint is checked against every
    value compiled before, not only against the one compared with."""
    @functools.partial(jax.jit, static_argnames="compute_dtype")
    def cast(x, compute_dtype):
        return x.astype(compute_dtype)

    cast(jnp.ones(3), compute_dtype=jnp.dtype("float16"))
    cast(jnp.ones(3), compute_dtype="bfloat16")
    cast(jnp.ones(3), compute_dtype="float16")  # == the first, hashed apart from it
    span = telemetry.last("test_a_value_compiled_before_under_another_spelling_is_not_said_"
                          "to_hit.<locals>.cast")
    assert span.attributes["jax.compile.count"] == 3
    hint = span.attributes["jax.compile.hint"]
    assert "each spelling compiles once" in hint and "equal value hit" not in hint


def test_an_equal_value_of_another_type_and_the_same_hash_is_not_said_hashed_apart(telemetry):
    @functools.partial(jax.jit, static_argnums=1)
    def scale(x, n):
        return x * n

    scale(jnp.ones(3), 2)
    scale(jnp.ones(3), 2.0)  # == 2 and hash(2.0) == hash(2): JAX keys it apart by type
    span = telemetry.last("test_an_equal_value_of_another_type_and_the_same_hash_is_not_"
                          "said_hashed_apart.<locals>.scale")
    assert span.attributes["jax.compile.count"] == 2
    assert "== to it, but of another type)" in only_change(span)["after"]
    hint = span.attributes["jax.compile.hint"]
    assert "each spelling compiles once" in hint and "by its hash" not in hint


def test_the_hint_of_a_new_static_value_says_an_equal_one_hits_only_of_the_same_type(
        telemetry):
    @functools.partial(jax.jit, static_argnames="compute_dtype")
    def cast(x, compute_dtype):
        return x.astype(compute_dtype)

    cast(jnp.ones(3), compute_dtype=jnp.float32)
    cast(jnp.ones(3), compute_dtype=jnp.bfloat16)  # another value: its hint is written now
    cast(jnp.ones(3), compute_dtype="bfloat16")  # == jnp.bfloat16, of another type: compiles
    spans = telemetry.compiles("test_the_hint_of_a_new_static_value_says_an_equal_one_hits_"
                               "only_of_the_same_type.<locals>.cast")
    assert [s.attributes["jax.compile.count"] for s in spans] == [1, 2, 3]
    hint = spans[1].attributes["jax.compile.hint"]
    assert "the same type and an equal value hit the cache" in hint


def test_compiler_options_given_to_lowered_compile_are_named(telemetry):
    @jax.jit
    def step(x):
        return x + 1

    x = jnp.ones(3)
    step.lower(x).compile()
    step.lower(x).compile(compiler_options={"xla_backend_optimization_level": 1})
    step.lower(x).compile(compiler_options={"xla_backend_optimization_level": 1})  # cached
    step(x)  # the plain call: the first executable
    spans = telemetry.compiles(
        "test_compiler_options_given_to_lowered_compile_are_named.<locals>.step")
    assert [s.attributes["jax.compile.cause.kind"] for s in spans] == [
        "first_compile", "jit_options"]
    assert only_change(spans[1]) == {
        "path": "compile(compiler_options)['xla_backend_optimization_level']",
        "kind": "jit_options", "before": "<absent>", "after": "1"}
    hint = spans[1].attributes["jax.compile.hint"]
    assert "compile(compiler_options=" in hint and "another jax.jit wrapper" not in hint


def test_compiler_options_on_a_jit_wrapper_are_named_once(telemetry):
    def step(x):
        return x + 1

    x = jnp.ones(3)
    jax.jit(step)(x)
    jax.jit(step, compiler_options={"xla_backend_optimization_level": 1})(x)
    span = telemetry.last(
        "test_compiler_options_on_a_jit_wrapper_are_named_once.<locals>.step")
    changes = [c for c in diff_of(span) if c["kind"] == "jit_options"]
    assert [c["path"] for c in changes] == ["jit(compiler_options)"]
    assert "xla_backend_optimization_level" in changes[0]["after"]


class MutatedModel(ValueHashedModel):
    @functools.partial(jax.jit, static_argnums=0)
    def apply(self, x):
        return x * self.scale


def test_a_value_hashed_static_self_changed_in_place_is_said_so(telemetry):
    model = MutatedModel(2.0)
    model.apply(jnp.ones(3))
    model.scale = 3.0  # mutated after its compile: its hash changed
    model.apply(jnp.ones(3))
    spans = telemetry.compiles("MutatedModel.apply")
    # JAX 0.12 compiles again; JAX 0.10 serves the earlier program (no record to word)
    assert len(spans) in (1, 2)
    if len(spans) == 2:
        assert only_change(spans[1]) == {
            "path": "self", "kind": "static_argument", "before": "<test_explanations."
            "MutatedModel>", "after": "the same object, changed in place since (its "
            "hash changed)"}
        hint = spans[1].attributes["jax.compile.hint"]
        assert "changed in place" in hint and "== to one compiled before" not in hint


class _Trainer:
    def __init__(self, lr):
        self.lr = lr
        self.name = "sgd"
        self.step = jax.jit(self._step)

    def _step(self, x):
        return x - self.lr * x


def test_a_bound_method_of_a_new_object_names_the_attribute_that_differs(telemetry):
    x = jnp.ones(3)
    for lr in (1e-3, 3e-3):
        _Trainer(lr).step(x)  # each trainer's bound method is a new function
    span = telemetry.last("_Trainer._step")
    assert span.attributes["jax.compile.cause.kind"] == "function_identity"
    changes = {c["path"]: (c["before"], c["after"]) for c in diff_of(span)}
    assert changes["<function>"][1] == "new bound method object, same method"
    assert changes["<function>.self.lr"] == ("0.001", "0.003")
    assert "<function>.self.name" not in changes  # the same value: not a difference


class _EqxTrainer:
    def __init__(self, lr):
        import equinox as eqx

        self.lr = lr
        self.step = eqx.filter_jit(self._step)

    def _step(self, x):
        return x - self.lr * x


def test_a_bound_method_a_wrapper_holds_static_names_the_attribute_that_differs(telemetry):
    pytest.importorskip("equinox")
    x = jnp.ones(3)
    trainers = [_EqxTrainer(lr) for lr in (1e-3, 3e-3)]  # kept: both alive for the diff
    for trainer in trainers:
        trainer.step(x)  # equinox passes each trainer's bound method as a static
    span = telemetry.last("_EqxTrainer._step")
    assert span.attributes["jax.compile.cause.kind"] == "static_argument"
    changes = {c["path"]: c for c in diff_of(span)}
    method = changes["<function>[0]"]  # the static equinox passes the function as
    assert method["after"] == "the same method bound to another _EqxTrainer object"
    lr = changes["<function>[0].self.lr"]
    assert (lr["before"], lr["after"]) == ("0.001", "0.003")
    assert "a new function for each object" in span.attributes["jax.compile.hint"]


def _make_optax_step(opt):
    def step(params):
        updates, _ = opt.update(params, opt.init(params), params)
        return updates

    return step


def test_a_step_closing_over_an_optimizer_built_again_names_the_value_inside(telemetry):
    optax = pytest.importorskip("optax")
    x = jnp.ones(3)
    for lr in (1e-3, 3e-3):  # a step made per rate, from optax.adam(lr)
        jax.jit(_make_optax_step(optax.adam(lr)))(x)
    span = telemetry.last("_make_optax_step.<locals>.step")
    assert span.attributes["jax.compile.cause.kind"] == "function_identity"
    changes = {c["path"]: (c["before"], c["after"]) for c in diff_of(span)}
    [size] = [p for p in changes if p.startswith("<function>.opt.")]
    assert size.endswith(".step_size") and changes[size] == ("-0.001", "-0.003")


def _build_chained_optimizer(optax, cfg):
    return optax.chain(optax.clip_by_global_norm(1.0),
                       optax.adamw(cfg["lr"], weight_decay=1e-4))


def test_a_rate_inside_a_chain_of_chains_a_helper_built_is_named_with_both_values(telemetry):
    # adamw is a chain itself: the rate is four closures below the step
    optax = pytest.importorskip("optax")
    x = jnp.ones(3)
    for lr in (1e-3, 3e-3):
        jax.jit(_make_optax_step(_build_chained_optimizer(optax, {"lr": lr})))(x)
    span = telemetry.last("_make_optax_step.<locals>.step")
    changes = {c["path"]: (c["before"], c["after"]) for c in diff_of(span)}
    [size] = [p for p in changes if p.startswith("<function>.opt.")]
    assert size.endswith(".step_size") and changes[size] == ("-0.001", "-0.003")
