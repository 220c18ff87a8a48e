"""jax.debug.print / jax.debug.callback: what is printed, and when (eagerly, every call of a jitted function,
per device inside shard_map, per element under vmap, primal values under grad), compared with real JAX."""
from __future__ import annotations

import numpy as np
import pytest

import meshax
import meshax.numpy as jnp
from meshax.sharding import PartitionSpec as P

jax = pytest.importorskip("jax")
import jax.numpy as jjnp  # noqa: E402
from jax.sharding import AxisType as JaxAxisType  # noqa: E402
from jax.sharding import PartitionSpec as JP  # noqa: E402


def printed(capsys, run) -> list[str]:
    capsys.readouterr()
    run()
    if hasattr(jax, "effects_barrier"):
        jax.effects_barrier()
    return capsys.readouterr().out.splitlines()


def both(capsys, ours, theirs, *args) -> tuple[list[str], list[str]]:
    mine = printed(capsys, lambda: ours(*args))
    jaxs = printed(capsys, lambda: theirs(*[jjnp.asarray(np.asarray(a)) if hasattr(a, "shape") else a
                                            for a in args]))
    return mine, jaxs


FORMATS = [
    ("x={}", lambda m: (m.arange(3.0),), {}),
    ("{} and {}", lambda m: (m.ones((2, 2)), m.int32(3)), {}),
    ("{x:.2f} {y}", lambda m: (), {"x": "f32", "y": "bool"}),
    ("{} {}", lambda m: (3.0, "hello"), {}),
    ("{}", lambda m: (m.arange(6).reshape(2, 3),), {}),
]


@pytest.mark.parametrize("fmt, make, named", FORMATS)
def test_eager_output_matches_jax(capsys, fmt, make, named):
    def kwargs(m):
        values = {"f32": m.float32(1.5), "bool": m.array(True)}
        return {k: values[v] for k, v in named.items()}

    ours = printed(capsys, lambda: meshax.debug.print(fmt, *make(jnp), **kwargs(jnp)))
    theirs = printed(capsys, lambda: jax.debug.print(fmt, *make(jjnp), **kwargs(jjnp)))
    assert ours == theirs


def test_jit_prints_every_call(capsys):
    f = meshax.jit(lambda x: (meshax.debug.print("jit {x}", x=x), x * 2)[1])
    g = jax.jit(lambda x: (jax.debug.print("jit {x}", x=x), x * 2)[1])
    x = np.arange(3.0, dtype=np.float32)
    ours = printed(capsys, lambda: [f(jnp.asarray(x)), f(jnp.asarray(x + 1))])
    theirs = printed(capsys, lambda: [g(jjnp.asarray(x)), g(jjnp.asarray(x + 1))])
    assert ours == theirs == ["jit [0. 1. 2.]", "jit [1. 2. 3.]"]
    assert "debug_callback" in str(meshax.make_jaxpr(lambda x: meshax.debug.print("{}", x))(1.0))


def test_vmap_prints_each_element(capsys):
    x = np.arange(6.0, dtype=np.float32).reshape(3, 2)
    ours, theirs = both(capsys, meshax.vmap(lambda v: meshax.debug.print("v {}", v)),
                        jax.vmap(lambda v: jax.debug.print("v {}", v)), jnp.asarray(x))
    assert ours == theirs == ["v [0. 1.]", "v [2. 3.]", "v [4. 5.]"]


@pytest.mark.parametrize("jit", [False, True])
def test_grad_prints_primal_values(capsys, jit):
    def body(lib):
        def f(x):
            lib.debug.print("g {}", x)
            return (x ** 2).sum()
        return lib.jit(lib.grad(f)) if jit else lib.grad(f)

    x = np.arange(3.0, dtype=np.float32)
    ours, theirs = both(capsys, body(meshax), body(jax), jnp.asarray(x))
    assert ours == theirs == ["g [0. 1. 2.]"]


def test_callback_gets_arrays_and_pytrees(capsys):
    seen = []
    x = jnp.arange(3.0)
    meshax.debug.callback(lambda a, t, k=None: seen.append((a, t, k)), 1, (x, 2.0), k=x)
    a, (b, c), k = seen[0]
    assert isinstance(a, meshax.Array) and int(a) == 1 and a.dtype == np.int32
    assert isinstance(b, meshax.Array) and np.array_equal(b, [0.0, 1.0, 2.0]) and float(c) == 2.0
    assert np.array_equal(k, x)
    assert meshax.debug.callback(lambda: None) is None
    calls = []
    f = meshax.jit(lambda x: (meshax.debug.callback(lambda v: calls.append(np.asarray(v)), x), x + 1)[1])
    f(x)
    f(x)
    assert len(calls) == 2 and np.array_equal(calls[1], [0.0, 1.0, 2.0])


@pytest.mark.parametrize("jit", [False, True])
def test_shard_map_prints_per_device(capsys, jit):
    mesh = meshax.make_mesh((8,), ("i",))
    jmesh = jax.make_mesh((8,), ("i",), axis_types=(JaxAxisType.Auto,))

    def run(lib, m, spec, x):
        def body(a):
            lib.debug.print("s {}", a)
            return a
        f = lib.shard_map(body, mesh=m, in_specs=spec, out_specs=spec)
        return lib.jit(f)(x) if jit else f(x)

    x = np.arange(16.0, dtype=np.float32)
    ours = printed(capsys, lambda: run(meshax, mesh, P("i"), jnp.asarray(x)))
    theirs = printed(capsys, lambda: run(jax, jmesh, JP("i"), jjnp.asarray(x)))
    assert ours == [f"s [{2 * i}. {2 * i + 1}.]" for i in range(8)]
    assert sorted(ours) == sorted(theirs)


def test_shard_map_prints_a_replicated_value_once_per_distinct_block(capsys):
    mesh = meshax.make_mesh((4, 2), ("i", "j"))
    jmesh = jax.make_mesh((4, 2), ("i", "j"), axis_types=(JaxAxisType.Auto,) * 2)

    def run(lib, m, spec, x, **kw):
        def body(a):
            lib.debug.print("t {}", a)
            return a
        return lib.shard_map(body, mesh=m, in_specs=spec, out_specs=spec, **kw)(x)

    x = np.arange(8.0, dtype=np.float32)
    for spec, jspec in [(P("i"), JP("i")), (P(), JP())]:
        ours = printed(capsys, lambda: run(meshax, mesh, spec, jnp.asarray(x)))
        theirs = printed(capsys, lambda: run(jax, jmesh, jspec, jjnp.asarray(x)))
        assert ours == theirs
    ours = printed(capsys, lambda: run(meshax, mesh, P("i"), jnp.asarray(x), check_vma=False))
    theirs = printed(capsys, lambda: run(jax, jmesh, JP("i"), jjnp.asarray(x), check_vma=False))
    assert ours == theirs and len(ours) == 8


def test_print_inside_scan_prints_every_step(capsys):
    def f(lib):
        def step(c, x):
            lib.debug.print("step {} {}", c, x)
            return c + x, c
        return lambda xs: lib.lax.scan(step, 0.0, xs)

    xs = np.arange(3.0, dtype=np.float32)
    ours, theirs = both(capsys, f(meshax), f(jax), jnp.asarray(xs))
    assert ours == theirs
    ours, theirs = both(capsys, meshax.jit(f(meshax)), jax.jit(f(jax)), jnp.asarray(xs))
    assert ours == theirs
