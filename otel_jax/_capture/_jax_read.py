"""Readers of facts off JAX objects: the other half of otel_jax's boundary with JAX internals.

``_jax_hooks`` patches and listens; this module reads what those hooks hand
over (a dispatch miss, jit options, config, devices) into plain values. Every
reader degrades to a documented fallback when the attribute it reads moved,
so that a JAX upgrade costs explanation quality, never a crash. Nothing
outside these two modules touches ``jax._src`` or the fields of JAX's private
objects.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from .._core._vocab import NotWrittenReason

if TYPE_CHECKING:
    from ._jax_hooks import Miss, Unavailable


# Config values known to be part of the tracing cache key, for JAX versions
# whose config does not list the names of its trace context.
_KNOWN_TRACE_CONTEXT = (
    "jax_enable_x64", "jax_default_matmul_precision", "jax_default_device",
    "jax_numpy_rank_promotion", "jax_numpy_dtype_promotion", "jax_disable_jit",
    "jax_threefry_partitionable", "jax_softmax_custom_jvp", "jax_use_shardy_partitioner",
    "jax_random_seed_offset",
)


_trace_context_names: dict[int, tuple[str, ...]] = {}


def trace_context_items() -> tuple[tuple[str, Any], ...]:
    """The named config values that are part of JAX's tracing cache key."""
    try:
        from jax._src import config
    except Exception:
        return ()
    try:
        values = config.trace_context()
        names = _trace_context_names.get(len(values))
        if names is None:
            names = _trace_context_names[len(values)] = tuple(config.trace_context_names())
        return tuple(zip(names, values))
    except Exception:
        pass
    items = []
    states = getattr(config, "config_states", {})
    for name in _KNOWN_TRACE_CONTEXT:
        state = states.get(name)
        if state is not None:
            try:
                items.append((name, state.value))
            except Exception:
                continue
    try:
        from jax._src import mesh as mesh_lib

        items.append(("mesh_context_manager", mesh_lib.thread_resources.env.physical_mesh))
    except Exception:
        pass
    return tuple(items)


def event_name(fun: Any) -> str:
    """The name JAX's compile events give ``fun`` (``f`` in ``jit(f)``)."""
    try:
        from jax._src.util import fun_name

        return str(fun_name(fun))
    except Exception:
        name = getattr(fun, "__name__", None)
        if name is None:
            name = getattr(getattr(fun, "func", None), "__name__", "<unnamed function>")
        return str(name)


def primitive_params(fun: Any) -> dict[str, Any] | None:
    """The parameters an eager primitive was compiled for (its closure), or ``None``.

    JAX builds a new function object per distinct primitive parameters (e.g.
    the target shape of ``broadcast_in_dim``): those parameters, not the
    function object, are what changed when such a compile repeats.
    """
    if not getattr(fun, "_apply_primitive", False):
        return None
    try:
        cells = dict(zip(fun.__code__.co_freevars, fun.__closure__ or ()))
        params = cells["params"].cell_contents
        return dict(params) if isinstance(params, dict) else None
    except Exception:
        return None


def is_eager_op(fun: Any) -> bool:
    """JAX compiling one of its own ops for op-by-op (eager) execution.

    Either a single primitive (``x + 1`` outside jit) or one of JAX's own
    jitted library functions called eagerly (``jnp.sin(x)`` is a jitted
    function inside ``jax.numpy``). A primitive that carries a whole user
    program (``exported.call(x)`` binds one primitive holding the exported
    function) is that program, not an op: see :func:`exported_program`.
    """
    if getattr(fun, "_apply_primitive", False):
        return exported_program(fun) is None
    module = getattr(fun, "__module__", None) or ""
    return module == "jax" or module.startswith(("jax.", "jax._src"))


def _exported_type() -> type | None:
    try:
        from jax import export

        exported = export.Exported
    except Exception:  # no jax.export in this JAX
        return None
    return exported if isinstance(exported, type) else None


def exported_program(fun: Any) -> Any | None:
    """The ``jax.export.Exported`` an eager primitive's compile runs, or ``None``.

    ``exported.call(x)`` outside jit makes JAX compile one primitive whose
    parameters hold the exported program: a user's whole program (a served
    model), told by what the compile carries, not by the name JAX gives it.
    (``jax.jit(exported.call)`` is a jit of a bound method, named as such.)
    """
    if not getattr(fun, "_apply_primitive", False):
        return None
    kind = _exported_type()
    params = primitive_params(fun) if kind is not None else None
    if kind is None or params is None:
        return None
    return next((v for v in params.values() if isinstance(v, kind)), None)


def exported_name(exported: Any) -> str:
    """The name of the function an ``Exported`` was exported from (``f``)."""
    name = getattr(exported, "fun_name", None)
    return name if isinstance(name, str) and name else "<exported function>"


def exported_leaf_paths(exported: Any, n: int) -> tuple[str, ...] | None:
    """The path of each of the ``n`` flat arguments of an exported function in the
    ``(args, kwargs)`` tree it was exported with (``args[1]``, ``args[0]['w']``)."""
    tree = getattr(exported, "in_tree", None)
    if tree is None or getattr(tree, "num_leaves", None) != n:
        return None
    try:
        from jax import tree_util

        keyed = tree_util.tree_unflatten(tree, list(range(n)))
        paths = tree_util.tree_flatten_with_path(keyed)[0]
    except Exception:
        return None
    out = []
    for keys, _ in paths:
        keys = tuple(keys)
        if len(keys) < 2:
            return None
        head = getattr(keys[0], "idx", None)
        if head == 0:  # positional
            out.append(f"args[{getattr(keys[1], 'idx', '?')}]" + tree_util.keystr(keys[2:]))
        else:
            out.append(str(getattr(keys[1], "key", "?")) + tree_util.keystr(keys[2:]))
    return tuple(out) if len(out) == n else None


class PmapArguments(NamedTuple):
    """What ``jax.pmap`` keeps of a call's arguments beside the function it jits."""

    paths: tuple[str, ...]  # the user's path of each flat argument (``batch['x']``)
    statics: tuple[tuple[str, Any], ...]  # ``(parameter, value)`` of static_broadcasted ones
    # ``(name, value)`` of the arguments without array leaves (``scale=None``), where known
    empty: tuple[tuple[str, Any], ...] = ()


def pmap_arguments(fun: Any, n: int) -> PmapArguments | None:
    """The user's view of the ``n`` flat arguments of the function ``jax.pmap`` jits,
    or ``None`` when ``fun`` is not one.

    ``jax.pmap(f)`` jits a function of JAX's own over the flattened arguments, which
    JAX names ``flat_args[i]`` (0.10) or ``args[i]`` (0.8). The user's names are kept
    beside it: JAX 0.8 keeps them whole in the debug info of the wrapped function it
    closes over; JAX 0.10 keeps the ``(args, kwargs)`` tree in a closure cell
    (``in_tree``) next to the user's wrapped function, whose debug info lists the
    parameter names. Static arguments (``static_broadcasted_argnums``) are bound to
    the wrapped function by ``argnums_partial`` in both. Read with a bounded walk.
    """
    stack: list[tuple[Any, int]] = [(fun, 6)]
    seen: set[int] = set()
    budget = 96
    paths: tuple[tuple[str, ...], tuple[tuple[str, Any], ...]] | None = None
    statics: tuple[tuple[str, Any], ...] | None = None
    while stack and budget > 0 and (paths is None or statics is None):
        value, depth = stack.pop()
        budget -= 1
        if id(value) in seen:
            continue
        seen.add(id(value))
        try:
            if paths is None:
                paths = _pmap_paths_at(value, n)
            if statics is None:
                statics = _pmap_statics_at(value)
        except Exception:
            pass
        if depth > 0:
            stack.extend((v, depth - 1) for v in _pmap_inner(value))
    return PmapArguments(paths[0], statics or (), paths[1]) if paths is not None else None


def _pmap_statics_at(value: Any) -> tuple[tuple[str, Any], ...] | None:
    """The static arguments ``argnums_partial`` bound to a wrapped function of pmap's."""
    transforms = getattr(value, "transforms", None)
    if not isinstance(transforms, tuple) or _pmap_debug_names(value) is None:
        return None
    for entry in transforms:
        gen, params = entry
        if getattr(gen, "__name__", "") != "_argnums_partial":
            continue
        dyn_argnums, fixed = params
        positions = sorted(_static_positions(dyn_argnums, fixed))
        names = _parameter_names(getattr(value, "f", None))
        return tuple(
            (names[i] if i < len(names) else f"args[{i}]", getattr(box, "val", box))
            for i, box in zip(positions, fixed))
    return ()


def _parameter_names(fun: Any) -> list[str]:
    import inspect

    try:
        return [p.name for p in inspect.signature(fun).parameters.values()
                if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        return []


def _pmap_debug_names(wrapped: Any) -> tuple[str, ...] | None:
    info = getattr(wrapped, "debug_info", None)
    if getattr(info, "traced_for", None) != "pmap":
        return None
    names = getattr(info, "arg_names", None)
    if isinstance(names, tuple) and all(isinstance(x, str) for x in names):
        return names
    return None


def _pmap_paths_at(value: Any, n: int,
                   ) -> tuple[tuple[str, ...], tuple[tuple[str, Any], ...]] | None:
    cells = _cells(value)
    tree, wrapped = cells.get("in_tree"), cells.get("fun")
    names = _pmap_debug_names(wrapped)
    if names is not None and getattr(tree, "num_leaves", None) == n:
        return _paths_from_tree(tree, wrapped, names)  # JAX 0.10
    names = _pmap_debug_names(value)
    transforms = getattr(value, "transforms", None)
    if names is None or not isinstance(transforms, tuple):
        return None
    # JAX 0.8: the wrapped function's transformations hold the tree (``flatten_fun``)
    # and the static positions (``argnums_partial``); its debug info, made for the
    # call, names each flat argument
    by_name = {getattr(gen, "__name__", ""): params for gen, params in transforms}
    flat_tree = (by_name.get("flatten_fun") or (None,))[0]
    if getattr(flat_tree, "num_leaves", None) == n:
        fixed = by_name.get("_argnums_partial")
        static = _static_positions(*fixed) if fixed else set()
        dynamic = tuple(p for i, p in enumerate(_all_parameter_names(getattr(value, "f", None)))
                        if i not in static)
        found = _paths_from_tree(flat_tree, value, dynamic)
        if found is not None:
            return found
    info = getattr(value, "debug_info", None)
    if len(names) == n and getattr(info, "result_paths", None):
        return names, ()
    return None


def _static_positions(dyn_argnums: Any, fixed: Any) -> set[int]:
    total = len(dyn_argnums) + len(fixed)
    return {i for i in range(total) if i not in set(dyn_argnums)}


def _all_parameter_names(fun: Any) -> list[str]:
    import inspect

    try:
        return list(inspect.signature(fun).parameters)
    except (TypeError, ValueError):
        return []


def _cells(value: Any) -> dict[str, Any]:
    code = getattr(value, "__code__", None)
    closure = getattr(value, "__closure__", None)
    if code is None or not closure:
        return {}
    out = {}
    for name, cell in zip(code.co_freevars, closure):
        try:
            out[name] = cell.cell_contents
        except ValueError:  # an empty cell
            continue
    return out


def _pmap_inner(value: Any) -> list[Any]:
    # callables, and the wrapped functions (``lu.WrappedFun``) they close over
    out = [v for v in _cells(value).values() if callable(v) or hasattr(v, "transforms")]
    for attr in ("__wrapped__", "__self__"):
        inner = getattr(value, attr, None)
        if inner is not None:
            out.append(inner)
    return out


def _paths_from_tree(tree: Any, wrapped: Any, dynamic: tuple[str, ...],
                     ) -> tuple[tuple[str, ...], tuple[tuple[str, Any], ...]] | None:
    """Leaf paths of an ``(args, kwargs)`` tree, positional arguments named after the
    parameters of the user's function that are among ``dynamic`` (JAX's debug names of
    the parameters left after the static ones)."""
    import inspect

    from jax import tree_util

    target: Any = getattr(wrapped, "f", None)
    names: list[str] = []
    star = None
    try:
        for p in inspect.signature(target).parameters.values():
            if p.name not in dynamic:
                continue
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
                names.append(p.name)
            elif p.kind is p.VAR_POSITIONAL:
                star = p.name
    except (TypeError, ValueError):
        pass
    keyed = tree_util.tree_unflatten(tree, list(range(tree.num_leaves)))
    out = []
    for keys, _ in tree_util.tree_flatten_with_path(keyed)[0]:
        keys = tuple(keys)
        if len(keys) < 2:
            return None
        rest = tree_util.keystr(keys[2:])
        if getattr(keys[0], "idx", None) == 0:
            i = int(getattr(keys[1], "idx", -1))
            head = names[i] if 0 <= i < len(names) else f"{star or 'args'}[{i - len(names)}]"
        else:
            head = str(getattr(keys[1], "key", "?"))
        out.append(head + rest)
    return tuple(out), _leafless_arguments(tree, names, star)


def _leafless_arguments(tree: Any, names: list[str], star: str | None,
                        ) -> tuple[tuple[str, Any], ...]:
    """``(name, value)`` of the top-level arguments of an ``(args, kwargs)`` tree that
    hold no array (``None``), rebuilt from the tree: they have no leaf to name them."""
    from jax import tree_util

    args, kwargs = tree.children()
    out = []
    for i, child in enumerate(args.children()):
        if child.num_leaves == 0:
            name = names[i] if i < len(names) else f"{star or 'args'}[{i - len(names)}]"
            out.append((name, tree_util.tree_unflatten(child, [])))
    data = kwargs.node_data()
    if data is not None and data[0] is dict and data[1] is not None:
        for key, child in zip(data[1], kwargs.children()):
            if child.num_leaves == 0:
                out.append((str(key), tree_util.tree_unflatten(child, [])))
    return tuple(out)


def prng_key_impl(aval: Any) -> str | None:
    """The implementation of a typed PRNG key's abstract value (``fry`` for
    ``key<fry>[]``, from ``jax.random.key``), or ``None`` for any other value."""
    dtype = getattr(aval, "dtype", None)
    try:
        import jax
        import jax.numpy as jnp

        if dtype is None or not jnp.issubdtype(dtype, jax.dtypes.prng_key):
            return None
    except Exception:
        return None
    impl = getattr(dtype, "_impl", None)
    name = getattr(impl, "name", None)
    return str(name) if name is not None else str(dtype)


def is_raw_key_data(aval: Any) -> bool:
    """A ``uint32`` array: what a legacy ``jax.random.PRNGKey`` is."""
    try:
        import numpy as np

        return bool(np.dtype(aval.dtype) == np.uint32)
    except Exception:
        return False


_MESH_DEVICES_SHOWN = 16


def mesh_fields(value: Any) -> tuple[tuple[str, str], ...] | None:
    """``(field, text)`` of what makes a ``jax.sharding.Mesh`` the mesh it is: axis
    names, sizes and types, and its devices (ids, in mesh order), read off the mesh
    without running user code; ``None`` for any other value.

    JAX 0.10 keeps one Mesh object per distinct value and hashes it by identity: two
    meshes that are not the same object differ in one of these.
    """
    try:
        from jax.sharding import Mesh

        if not isinstance(value, Mesh):
            return None
        devices = value.devices
        names = tuple(str(n) for n in value.axis_names)
        sizes = tuple(int(n) for n in devices.shape)
        kinds = tuple(str(getattr(t, "name", t)) for t in getattr(value, "axis_types", ()))
        ids = [int(getattr(d, "id", -1)) for d in devices.flat]
    except Exception:
        return None
    shown = ",".join(str(i) for i in ids[:_MESH_DEVICES_SHOWN])
    if len(ids) > _MESH_DEVICES_SHOWN:
        import hashlib

        digest = hashlib.blake2b(repr(ids).encode(), digest_size=4).hexdigest()
        shown += f",... ({len(ids)} devices, #{digest})"
    out = [("axis_names", repr(names)), ("axis_sizes", repr(sizes))]
    if kinds:
        out.append(("axis_types", "(" + ", ".join(kinds) + ("," if len(kinds) == 1 else "")
                    + ")"))
    out.append(("devices", f"ids {shown}"))
    return tuple(out)


def interned_by_jax(value: Any) -> bool:
    """Whether ``value``'s type is one JAX keeps one object per distinct value of, so
    that a new object is a new value (a ``Mesh`` on JAX versions that hash it by
    identity)."""
    try:
        from jax.sharding import Mesh
    except Exception:
        return False
    return isinstance(value, Mesh) and type(value).__hash__ is object.__hash__


def is_committed(arr: Any) -> bool | None:
    return getattr(arr, "_committed", None)


_committed_of = operator.attrgetter("_committed")


def committed_flags(values: Sequence[Any]) -> list[bool] | None:
    """Whether each array is committed to its devices, read at C speed; ``None`` when a
    value is not a ``jax.Array`` (a NumPy array, a host scalar)."""
    if not values:
        return []
    # jaxlib's ArrayImpl keeps the flag behind a property: calling its getter
    # directly skips the attribute lookup per leaf (half the time on 10,000
    # leaves); a value of any other type makes the getter raise TypeError.
    getter = getattr(getattr(type(values[0]), "_committed", None), "fget", None)
    if getter is not None:
        try:
            return list(map(getter, values))
        except Exception:
            pass
    try:
        return list(map(_committed_of, values))
    except AttributeError:
        return None


# JAX keeps argnums and argnames in sync when it can read the signature, so
# one of each pair is enough (names are used only when no numbers are set).
_PAIRED_FIELDS = (
    ("donate_argnums", "donate_argnums", "donate_argnames"),
    ("static_argnums", "static_argnums", "static_argnames"),
)
_JIT_OPTION_FIELDS = (
    ("in_shardings", "in_shardings_leaves"),
    ("out_shardings", "out_shardings_leaves"),
    ("in_layouts", "in_layouts_leaves"),
    ("out_layouts", "out_layouts_leaves"),
    ("device", "device"),
    ("backend", "backend"),
    ("keep_unused", "keep_unused"),
    ("inline", "inline"),
    ("compiler_options", "compiler_options_kvs"),
)


def jit_options(jit_info: Any) -> tuple[tuple[str, Any], ...]:
    """The options of one ``jax.jit`` wrapper, by their public names."""
    paired = tuple(
        (public, getattr(jit_info, nums, None) or getattr(jit_info, names, None) or ())
        for public, nums, names in _PAIRED_FIELDS)
    return paired + tuple(
        (public, getattr(jit_info, field, None)) for public, field in _JIT_OPTION_FIELDS)


def static_arguments(miss: Miss, names: Sequence[str] | None = None,
                     ) -> list[tuple[str, Any]]:
    """``(name, value)`` of each static argument of the call, in call order.

    ``names``: the call's :func:`parameter_names`, when the caller has them.
    """
    ji = miss.jit_info
    if names is None:
        names = parameter_names(ji, len(miss.args))
    out = [(names[i], miss.args[i]) for i in getattr(ji, "static_argnums", ())
           if 0 <= i < len(miss.args)]
    out.extend((k, miss.kwargs[k]) for k in getattr(ji, "static_argnames", ())
               if k in miss.kwargs)
    return out


def parameter_names(jit_info: Any, n_args: int) -> list[str]:
    """Names of the first ``n_args`` positional arguments, as JAX names their leaves: a
    parameter's name, ``features[i]`` for the ones a ``*features`` parameter collects
    (``args[i]`` when the function's parameters cannot be read)."""
    return call_parameters(jit_info, n_args).positional


class CallParameters(NamedTuple):
    """How a call's arguments are named after the function's parameters."""

    positional: list[str]  # one name per positional argument of the call
    var_keyword: str = ""  # the ``**kwargs`` parameter's name, if the function has one
    keywords: frozenset[str] = frozenset()  # parameters a keyword argument can fill by name


def call_parameters(jit_info: Any, n_args: int) -> CallParameters:
    """:func:`parameter_names` with what names keyword arguments: those ``**kwargs``
    collects are named ``kwargs['k']``, as in JAX's leaf names, the others by name."""
    names: list[str] = []
    var_positional = var_keyword = ""
    keywords: set[str] = set()
    sig = getattr(jit_info, "fun_signature", None)
    if sig is not None:
        import inspect

        for p in sig.parameters.values():
            if p.kind in (inspect.Parameter.POSITIONAL_ONLY,
                          inspect.Parameter.POSITIONAL_OR_KEYWORD):
                names.append(p.name)
            if p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD,
                          inspect.Parameter.KEYWORD_ONLY):
                keywords.add(p.name)
            elif p.kind is inspect.Parameter.VAR_POSITIONAL:
                var_positional = p.name
            elif p.kind is inspect.Parameter.VAR_KEYWORD:
                var_keyword = p.name
    names = names[:n_args]
    start = len(names)
    if var_positional:
        names.extend(f"{var_positional}[{i - start}]" for i in range(start, n_args))
    else:
        names.extend(f"args[{i}]" for i in range(start, n_args))
    return CallParameters(names, var_keyword, frozenset(keywords))


def dynamic_positions(miss: Miss) -> list[int]:
    """Indices into ``miss.args`` of the arguments that are traced (not static)."""
    static = set(getattr(miss.jit_info, "static_argnums", ()))
    return [i for i in range(len(miss.args)) if i not in static]


def persistent_cache_skip_reason(backend_compile_s: float, process_index: int,
                                 ) -> NotWrittenReason:
    """Why JAX did not write a persistent-cache entry, as far as its config tells.

    JAX skips the write on processes other than 0, for programs that compiled
    faster than ``jax_persistent_cache_min_compile_time_secs``, for programs
    with host callbacks, for entries under the minimum size, and on write
    errors; the last three are not told apart here.
    """
    if process_index != 0:
        return NotWrittenReason.NOT_PROCESS_0
    try:
        import jax

        minimum = getattr(jax.config, "jax_persistent_cache_min_compile_time_secs")
        if backend_compile_s < float(minimum):
            return NotWrittenReason.COMPILE_TIME_BELOW_MINIMUM
    except Exception:
        pass
    return NotWrittenReason.OTHER


def persistent_cache_dir() -> str | None:
    """The persistent compilation cache's directory when the cache is enabled, else ``None``."""
    try:
        import jax

        directory = getattr(jax.config, "jax_compilation_cache_dir")
        if directory and bool(getattr(jax.config, "jax_enable_compilation_cache", True)):
            return str(directory)
    except Exception:
        pass
    return None


def cache_path(url: str) -> Any:
    """``url`` as a path of the file-system layer JAX's persistent cache uses
    (``jax._src.path.Path``: ``etils.epath`` when installed, so ``gs://`` and ``s3://``
    reach the same store the same way); ``None`` when no such layer is installed."""
    try:
        from jax._src import path as jax_path

        if getattr(jax_path, "epath_installed", False):
            return jax_path.Path(url)
    except Exception:
        pass
    try:  # JAX's module moved: the layer it uses
        from etils import epath

        return epath.Path(url)
    except Exception:
        return None


def persistent_cache_enabled() -> bool:
    try:
        import jax

        return bool(getattr(jax.config, "jax_compilation_cache_dir")) and bool(
            getattr(jax.config, "jax_enable_compilation_cache", True))
    except Exception:
        return False


# --- a miss's traced inputs ---------------------------------------------------------

class MissInputs(NamedTuple):
    """The traced inputs of a miss, read off JAX's ``PjitParams`` (or a transformed call's)."""

    avals: tuple[Any, ...]  # abstract values, one per array leaf
    flat: Sequence[Any]  # the leaves JAX will pass (constants left out)
    arg_names: tuple[str, ...] | None  # JAX's leaf paths, when it kept them
    in_tree: Any  # the ``(args, kwargs)`` treedef of the traced leaves
    out_count: int  # outputs of a transformed program (0 for a plain call)
    op_count: int  # operations of a transformed program (0 for a plain call)


def dataclass_meta_fields(node_type: Any) -> tuple[str, ...] | None:
    """The static field names ``jax.tree_util.register_dataclass`` was given for
    ``node_type`` (``meta_fields=[...]``), or ``None``.

    JAX keeps them only in the closure of the flatten function it registers
    (``jax._src.tree_util._registry``); when that moves, fields read by position.
    """
    try:
        from jax._src import tree_util

        flatten = tree_util._registry[node_type].to_iter
        cells = dict(zip(flatten.__code__.co_freevars, flatten.__closure__ or ()))
        names = cells["meta_fields"].cell_contents
    except Exception:
        return None
    if isinstance(names, tuple) and all(isinstance(n, str) for n in names):
        return names
    return None


def tree_hash(tree: Any) -> int | None:
    """A treedef's hash (a walk of the whole tree), or ``None`` when a node has none."""
    try:
        return hash(tree)
    except Exception:
        return None


def trees_equal(a: Any, b: Any, hash_a: int | None, hash_b: int | None) -> bool:
    """Whether two treedefs are one argument structure, as JAX's cache tells them apart.

    jaxlib 0.10's ``PyTreeDef.__eq__`` leaves out the type of a dataclass node
    (``register_dataclass``, ``flax.struct``): two classes with the same fields compare
    equal, while their hashes, which JAX's cache also compares, differ (jaxlib 0.8
    compared the types). Equal trees always hash alike, so comparing the hashes
    (``tree_hash``, kept with each signature) too never tells two equal trees apart.
    May raise (a node JAX cannot compare); callers guard.
    """
    return a is b or (bool(a == b) and hash_a == hash_b)


def miss_inputs(miss: Miss) -> MissInputs:
    params = miss.params
    avals = tuple(params.in_avals)
    n_consts = len(params.consts)
    names = params.arg_names
    flat = miss.args_flat
    if not isinstance(flat, (list, tuple)):
        flat = list(flat)
    return MissInputs(
        avals=avals,
        flat=flat[n_consts:] if n_consts else flat,
        arg_names=tuple(names) if names and len(names) == len(avals) else None,
        in_tree=params.in_tree,
        out_count=int(getattr(params, "out_count", 0)),
        op_count=int(getattr(params, "op_count", 0)),
    )


# --- names JAX gives functions ------------------------------------------------------

#: What some JAX versions call partials and callable objects in their events.
PLACEHOLDER_NAMES = frozenset({"<unknown>", "<unnamed function>", "<unnamed wrapped function>"})


def function_name_from_event(fun_name: str) -> str:
    """``jit(f)`` -> ``f``: the only name JAX's monitoring events carry."""
    if fun_name.endswith(")"):
        head, sep, rest = fun_name.partition("(")
        if sep and head.isidentifier():
            return rest[:-1]
    return fun_name


def transformed_source(source: str | None) -> tuple[str, str, int] | None:
    """``(name, file, line)`` from a jaxpr's debug source (``"f at /path/train.py:12"``)."""
    head, sep, site = (source or "").rpartition(" at ")
    file, colon, line = site.rpartition(":")
    if not (sep and colon and line.isdigit()):
        return None
    return head, file, int(line)


# --- the compiled program ------------------------------------------------------------

#: A tiny program as JAX lowers ``jax.jit(lambda x: x + x)`` of an ``f32[2]``: the real
#: input the program readers are tried on once, at install. Parsed, not lowered, so that
#: the probe traces and compiles nothing a user's telemetry, listeners or caches could see.
_PROBE_PROGRAM = """module @jit_probe attributes {mhlo.num_partitions = 1 : i32} {
  func.func public @main(%arg0: tensor<2xf32>) -> (tensor<2xf32> {jax.result_info = ""}) {
    %0 = stablehlo.add %arg0, %arg0 : tensor<2xf32>
    return %0 : tensor<2xf32>
  }
}"""


def _probe_program() -> Any:
    """``_PROBE_PROGRAM`` as an MLIR module in a context like the one JAX lowers into."""
    from jax._src.interpreters import mlir
    from jax._src.lib import mlir as mlir_lib

    ir: Any = getattr(mlir_lib, "ir")
    return ir.Module.parse(_PROBE_PROGRAM, context=mlir.make_ir_context())


def _hash_tails(cache_key: Any) -> list[tuple[Any, ...]]:
    """What may follow ``(hash, module)`` in a call of ``_hash_computation``, each meaning
    "hash the whole program", in the order tried: ``IgnoreCallbacks.NO`` (JAX 0.8 - 0.10's
    ``ignore_callbacks``), ``False`` (0.11's ``ignore_custom_partitioning``), nothing (a
    JAX that dropped the parameter). Passed by position: its name changes between versions.
    The enum comes first where it exists: ``False`` runs there too but means another mode."""
    tails: list[tuple[Any, ...]] = []
    no = getattr(getattr(cache_key, "IgnoreCallbacks", None), "NO", None)
    if no is not None:
        tails.append((no,))
    tails += [(False,), ()]
    return tails


class _ProgramHashing:
    """How this JAX's ``_hash_computation`` is called, found by calling it on a real
    program (the probe at install, else the first compile's): one process, one JAX."""

    tail: tuple[Any, ...] | None = None  # the arguments after (hash, module) that work
    failure: str | None = None  # why no way of calling it works, once every way failed


def _digest(hash_computation: Any, computation: Any, tail: tuple[Any, ...]) -> bytes:
    import hashlib

    h = hashlib.blake2b(digest_size=8)
    hash_computation(h, computation, *tail)
    return h.digest()


def _find_hashing(cache_key: Any, computation: Any) -> bytes | None:
    """Try each way of calling ``_hash_computation`` on ``computation``; the first that
    works is kept (and its digest returned), or, when none does, why."""
    hash_computation = getattr(cache_key, "_hash_computation", None)
    if not callable(hash_computation):
        _ProgramHashing.failure = "no jax._src.cache_key._hash_computation"
        return None
    error: Exception | None = None
    for tail in _hash_tails(cache_key):
        try:
            digest = _digest(hash_computation, computation, tail)
        except Exception as exc:
            error = error or exc  # the first way's error says most
            continue
        _ProgramHashing.tail = tail
        return digest
    _ProgramHashing.failure = ("jax._src.cache_key._hash_computation fails on a lowered "
                               f"program ({type(error).__name__}: {str(error)[:120]})")
    return None


def program_digest(computation: Any) -> bytes | None:
    """A digest of a lowered program, computed as JAX's persistent cache hashes it: the
    MLIR bytecode without debug information (no file paths or line numbers), so the
    same program gives the same digest in every process and run. ``None`` when JAX's
    hashing fails on every program (said once, as install() says what it lacks)."""
    try:
        from jax._src import cache_key
    except Exception:
        return None
    if _ProgramHashing.failure is not None:
        return None
    tail = _ProgramHashing.tail
    if tail is not None:
        # Found working: an error now is this program's, reported as an internal error.
        return _digest(getattr(cache_key, "_hash_computation"), computation, tail)
    digest = _find_hashing(cache_key, computation)
    if _ProgramHashing.failure is not None:  # the probe could not run at install
        _say_lost("program_fingerprints", _ProgramHashing.failure)
    return digest


def _say_lost(capability: str, reason: str) -> None:
    """One warning, worded as install()'s, for a fact whose reader failed on its first real
    input after install (install could not try it: the probe program could not be built,
    or the reader needs a compile's backend)."""
    from .._core._failopen import Topic, WarnKey, warn_once
    from ._jax_hooks import Capability, Unavailable, unavailable_message

    lost = Unavailable(Capability(capability), reason)
    warn_once(WarnKey(Topic.JAX_UNAVAILABLE, capability),
              unavailable_message(_jax_version(), [lost]))


def _jax_version() -> str:
    try:
        import jax

        return str(jax.__version__)
    except Exception:  # pragma: no cover - jax itself is broken: say so in the warning
        return "?"


# --- devices --------------------------------------------------------------------------

def argument_devices(values: Any, limit: int = 256) -> set[Any]:
    """The devices the first ``limit`` arguments live on (one mesh is enough to see)."""
    from itertools import islice

    devices: set[Any] = set()
    for value in islice(values, limit):
        sharding = getattr(value, "sharding", None)
        if sharding is not None:
            devices.update(sharding.device_set)
    return devices


def device_facts(device: Any) -> tuple[str, str]:
    """``(platform, device kind)`` of one device."""
    return (str(getattr(device, "platform", "unknown")),
            str(getattr(device, "device_kind", "unknown")))


def default_device() -> Any:
    import jax

    return jax.devices()[0]


def process_index() -> int:
    import jax

    return int(jax.process_index())


# --- what this JAX version lets the readers read ------------------------------------------

#: The per-part hash functions of ``jax._src.cache_key`` the cache-key readers call.
_CACHE_KEY_HASHES = ("_hash_serialized_compile_options", "_hash_platform", "_hash_xla_flags",
                     "_hash_accelerator_config", "_hash_string")


def reader_gaps() -> list[Unavailable]:
    """The facts whose readers fail on this JAX version, found by running them on real
    inputs: the program readers on a tiny program (once per process), the cache-key part
    hashes that need no backend on real values. Readers that need a compile's backend
    (not started at install: ``jax.distributed.initialize`` may not have run yet) are
    only checked for presence here, and a first real use that fails says so then."""
    from ._jax_hooks import Capability, Unavailable

    gaps: list[Unavailable] = []
    cache_key: Any = None
    try:
        from jax._src import cache_key
    except Exception:
        pass
    if cache_key is None:
        return [Unavailable(Capability.PROGRAM_FINGERPRINTS, "no jax._src.cache_key"),
                Unavailable(Capability.CACHE_MISS_REASONS, "no jax._src.cache_key")]
    probe_fingerprints()
    if _ProgramHashing.failure is not None:
        gaps.append(Unavailable(Capability.PROGRAM_FINGERPRINTS, _ProgramHashing.failure))
    failing = _cache_key_gap(cache_key)
    if failing:
        gaps.append(Unavailable(Capability.CACHE_MISS_REASONS, failing))
    # The trace context's names are not listed here: without them (JAX 0.8) a known
    # list of config values is read, the designed reader for those versions.
    return gaps


def probe_fingerprints() -> None:
    """Find how ``_hash_computation`` is called, on the probe program, unless known. Left
    to the first compile when the probe itself cannot be built (MLIR's API moved)."""
    if _ProgramHashing.tail is not None or _ProgramHashing.failure is not None:
        return
    try:
        from jax._src import cache_key
    except Exception:
        return
    if not callable(getattr(cache_key, "_hash_computation", None)):
        _ProgramHashing.failure = "no jax._src.cache_key._hash_computation"
        return
    try:
        program = _probe_program()
    except Exception:
        return
    _find_hashing(cache_key, program)


def _cache_key_gap(cache_key: Any) -> str:
    """Why the cache-key part hashes fail (``""`` when they work): missing ones, and those
    that need no backend run on real values (the string and XLA-flag parts)."""
    import hashlib

    missing = [n for n in _CACHE_KEY_HASHES if not callable(getattr(cache_key, n, None))]
    if missing:
        return f"no jax._src.cache_key.{', '.join(missing)}"
    try:
        h = hashlib.sha256()
        cache_key._hash_string(h, "zlib")
        cache_key._hash_xla_flags(h, list(getattr(cache_key, "get_flag_prefixes", list)()))
    except Exception as exc:
        return (f"jax._src.cache_key's part hashes fail ({type(exc).__name__}: "
                f"{str(exc)[:120]})")
    return ""


# --- the coordination service of a multi-process job ------------------------------------

#: The key-value methods of JAX's distributed runtime client that ``_ranks`` uses (present
#: from JAX 0.8 to 0.12 with these names and arguments).
COORDINATION_METHODS = ("key_value_set", "key_value_dir_get", "key_value_delete",
                        "key_value_increment", "blocking_key_value_get")


class Coordination(NamedTuple):
    """The distributed runtime client ``jax.distributed.initialize`` started, and this
    process's place in the job."""

    client: Any
    process_index: int
    process_count: int


def coordination() -> Coordination | None:
    """The job's coordination client when this is one process of several, else ``None``.

    Reads only attributes (no backend is initialised): cheap enough to ask at every
    compile of a single-process program.
    """
    try:
        from jax._src import distributed
    except Exception:
        return None
    state = getattr(distributed, "global_state", None)
    client = getattr(state, "client", None)
    if client is None:
        return None
    count = getattr(state, "num_processes", None)
    index = getattr(state, "process_id", None)
    if not isinstance(count, int) or not isinstance(index, int) or count <= 1:
        return None
    return Coordination(client, index, count)


def coordination_missing(client: Any) -> tuple[str, ...]:
    """The key-value methods this JAX's client lacks (empty when all are there)."""
    return tuple(m for m in COORDINATION_METHODS if not callable(getattr(client, m, None)))


def kv_set(client: Any, key: str, value: str) -> None:
    client.key_value_set(key, value, True)  # allow_overwrite: a re-published entry


#: The status the client raises with when a key set without overwriting exists.
_EXISTS = "ALREADY_EXISTS"


def kv_create(client: Any, key: str, value: str) -> bool:
    """Sets the key only if it is not set: ``False`` when it was (first writer wins)."""
    try:
        client.key_value_set(key, value, False)
    except Exception as exc:
        if str(exc).startswith(_EXISTS):
            return False
        raise
    return True


def kv_dir_get(client: Any, directory: str) -> list[tuple[str, str]]:
    return list(client.key_value_dir_get(directory))


def kv_delete(client: Any, key: str) -> None:
    """Deletes the key and every key under ``key/`` (the service deletes directories)."""
    client.key_value_delete(key)


def kv_increment(client: Any, key: str, by: int = 1) -> int:
    """Adds ``by`` to the counter at ``key`` (made at 0 when absent): the value after it."""
    return int(client.key_value_increment(key, by))


#: The status the client raises with when a blocking read's timeout passed.
_DEADLINE = "DEADLINE_EXCEEDED"


def kv_wait(client: Any, key: str, timeout_ms: int) -> str | None:
    """The key's value, waiting at most ``timeout_ms`` for it to be set: ``None`` when the
    time passed first. One call on the service however long the wait (the client
    releases the GIL while it waits)."""
    try:
        return str(client.blocking_key_value_get(key, int(timeout_ms)))
    except Exception as exc:
        if str(exc).startswith(_DEADLINE):
            return None
        raise


# --- the persistent cache's key, part by part -------------------------------------------

#: The parts of JAX's persistent-cache key, in the order ``jax._src.cache_key.get`` hashes
#: them (JAX 0.8 to 0.12); the first one that differs between two runs is the one named.
CACHE_KEY_PARTS = ("computation", "jax_lib version", "backend version", "XLA flags",
                   "compile_options", "accelerator_config", "compression", "custom_hook")
_KEY_DIGITS = 16


class CacheKeyParts(NamedTuple):
    """Each part of one compile's cache key as a short hash (``""`` where JAX's per-part
    hash function moved), and the readable values that are cheap and safe to keep."""

    hashes: dict[str, str]
    readable: dict[str, Any]


_static_parts: dict[Any, tuple[dict[str, str], dict[str, Any]]] = {}


def _part_hash(part: str, fn: Any, *args: Any, **kwargs: Any) -> str:
    """One part hashed by JAX's own function for it, as JAX's DEBUG log prints it (the
    first digits of a sha256 of that part alone); ``""`` when the function moved (said at
    install) or fails on this real input (said once, here: most need a compile's backend,
    so install could not try them)."""
    import hashlib

    if not callable(fn):
        return ""
    try:
        h = hashlib.sha256()
        fn(h, *args, **kwargs)
        return h.hexdigest()[:_KEY_DIGITS]
    except Exception as exc:
        _say_lost("cache_miss_reasons", f"hashing the {part} part of the key fails "
                  f"({type(exc).__name__}: {str(exc)[:120]})")
        return ""


def xla_flags_in_key(cache_key: Any = None) -> list[str]:
    """The XLA flags JAX puts in the cache key, as it reads them (``XLA_FLAGS``,
    ``LIBTPU_INIT_ARGS``, and the program's ``--xla*`` arguments and registered prefixes),
    sorted, without the flags it leaves out of the key."""
    import os
    import sys

    if cache_key is None:
        from jax._src import cache_key
    prefixes = tuple(getattr(cache_key, "get_flag_prefixes", list)())
    flags: list[str] = []
    for var in ("XLA_FLAGS", "LIBTPU_INIT_ARGS"):
        flags.extend((os.getenv(var) or "").split())
    flags.extend(a for a in sys.argv if isinstance(a, str) and (
        a.startswith("--xla") or any(a.startswith(p) for p in prefixes)))
    excluded = set(getattr(cache_key, "xla_flags_to_exclude_from_cache_key", ()))
    return [f for f in sorted(flags) if f.split("=")[0] not in excluded]


def _compression(compilation_cache: Any) -> str:
    # As compilation_cache.get_cache_key names it (JAX 0.8 - 0.12).
    return "zstandard" if getattr(compilation_cache, "zstandard", None) is not None else "zlib"


def cache_key_parts(inputs: Any, program: str = "") -> CacheKeyParts | None:
    """The parts of the persistent-cache key of one backend compile, from its captured
    inputs (``_jax_hooks.CompileInputs``), each hashed by JAX's per-part hash function.

    ``program``: the program fingerprint already computed (``program_digest``), which
    hashes the same canonical bytes as the ``computation`` part: used as that part, so
    the program is serialised once. Parts that do not change within a process (versions,
    backend, compression) are hashed once per backend; the XLA flags once per value of
    the variables and arguments they come from. ``None`` when JAX's cache-key module moved.
    """
    import os
    import sys

    try:
        from jax._src import cache_key, compilation_cache
    except Exception:
        return None
    backend = inputs.backend
    platform = str(getattr(backend, "platform", "unknown"))
    flags_source = (os.getenv("XLA_FLAGS"), os.getenv("LIBTPU_INIT_ARGS"),
                    tuple(a for a in sys.argv if isinstance(a, str) and a.startswith("--")),
                    tuple(getattr(cache_key, "get_flag_prefixes", list)()))
    static_key = (id(backend), flags_source)
    static = _static_parts.get(static_key)
    if static is None:
        hashes: dict[str, str] = {}
        readable: dict[str, Any] = {}
        version = getattr(cache_key, "jaxlib_version_str", None)
        if isinstance(version, str):
            hashes["jax_lib version"] = _part_hash(
                "jax_lib version", lambda h: h.update(version.encode("utf-8")))
            readable["jaxlib"] = version
        try:
            import jax

            readable["jax"] = str(jax.__version__)
        except Exception:
            pass
        hashes["backend version"] = _part_hash(
            "backend version", getattr(cache_key, "_hash_platform", None), backend)
        readable["backend"] = f"{platform} {getattr(backend, 'platform_version', '?')}"
        prefixes = list(flags_source[3])
        hashes["XLA flags"] = _part_hash("XLA flags", getattr(cache_key, "_hash_xla_flags", None),
                                         prefixes)
        try:
            readable["xla_flags"] = xla_flags_in_key(cache_key)
        except Exception:
            pass
        compression = _compression(compilation_cache)
        hashes["compression"] = _part_hash(
            "compression", getattr(cache_key, "_hash_string", None), compression)
        readable["compression"] = compression
        if len(_static_parts) > 64:
            _static_parts.clear()
        static = _static_parts[static_key] = (hashes, readable)
    hashes = {"computation": program, **static[0]}
    readable = dict(static[1])
    hashes["compile_options"] = _part_hash(
        "compile_options", getattr(cache_key, "_hash_serialized_compile_options", None),
        inputs.compile_options, strip_device_assignment=(platform == "gpu"))
    devices = inputs.devices
    hashes["accelerator_config"] = _accelerator_hash(cache_key, devices)
    try:
        flat = list(devices.flat)
        kinds = sorted({str(getattr(d, "device_kind", "?")) for d in flat})
        readable["devices"] = f"{len(flat)} x {'/'.join(kinds)}"
    except Exception:
        pass
    hash_string = getattr(cache_key, "_hash_string", None)
    hook = getattr(cache_key, "custom_hook", None)
    hashes["custom_hook"] = _part_hash(
        "custom_hook", lambda h: hash_string(h, hook())
    ) if callable(hook) and callable(hash_string) else ""
    return CacheKeyParts({p: hashes.get(p, "") for p in CACHE_KEY_PARTS}, readable)


_accelerator_hashes: dict[tuple[Any, ...], str] = {}


def _accelerator_hash(cache_key: Any, devices: Any) -> str:
    """The accelerator-config part, hashed once per set of devices (a topology query)."""
    try:
        ids = tuple(getattr(d, "id", None) for d in devices.flat)
    except Exception:
        return ""
    found = _accelerator_hashes.get(ids)
    if found is None:
        found = _part_hash("accelerator_config",
                           getattr(cache_key, "_hash_accelerator_config", None), devices)
        if len(_accelerator_hashes) > 256:
            _accelerator_hashes.clear()
        _accelerator_hashes[ids] = found
    return found
