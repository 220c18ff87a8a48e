"""Scheduling of collectives in executed jaxprs (interpreters/schedule.py): gathers of parameters move to the start,
reductions of gradients to the end, values unchanged, and nothing moves past an effect or beyond the memory bound."""
from __future__ import annotations

import jax
import jax.numpy as jjnp
import numpy as np
import pytest

import meshax
import meshax.numpy as mnp
from mlp_step import sgd_step
from meshax._src.interpreters import schedule as schedule_module
from meshax._src.interpreters.fusion import executable, fused_p

from oracle import assert_same_tree

DEVICES = 4
RNG = np.random.default_rng(7)
PARAMS = [{"w": RNG.standard_normal((8, 16)).astype(np.float32), "b": np.zeros(16, np.float32)},
          {"w": RNG.standard_normal((16, 4)).astype(np.float32), "b": np.zeros(4, np.float32)}]
X = RNG.standard_normal((32, 8)).astype(np.float32)
LABELS = RNG.integers(0, 4, 32).astype(np.int32)


def fsdp_step(lib, np_, P, mesh, callback=False):
    """An FSDP training step: weights sharded along their rows and all-gathered per layer, gradients reduced."""
    def loss(params, x, labels):
        h = x
        for i, layer in enumerate(params):
            if callback and i == 1:
                lib.debug.callback(lambda: None)
            w = lib.lax.all_gather(layer["w"], "d", tiled=True)
            h = h @ w + layer["b"]
            if i == 0:
                h = lib.nn.relu(h)
        one_hot = lib.nn.one_hot(labels, 4)
        return lib.lax.pmean(-np_.mean(np_.sum(one_hot * lib.nn.log_softmax(h), axis=-1)), "d")

    def step(params, x, labels):
        value, grads = lib.value_and_grad(loss)(params, x, labels)
        return lib.tree_util.tree_map(lambda p, g: p - 0.1 * g, params, grads), value

    specs = [{"w": P("d"), "b": P()} for _ in PARAMS]
    return lib.jit(lib.shard_map(step, mesh=mesh, in_specs=(specs, P("d"), P("d")), out_specs=(specs, P())))


def meshax_step(callback=False):
    mesh = meshax.sharding.Mesh(np.array(meshax.devices()[:DEVICES]), ("d",))
    return fsdp_step(meshax, mnp, meshax.sharding.PartitionSpec, mesh, callback)


def body(function):
    """The shard_map body's jaxpr of a freshly traced `function` (its executable program is made anew)."""
    outer = meshax.make_jaxpr(function)(PARAMS, X, LABELS).jaxpr
    stack = [outer]
    while stack:
        jaxpr = stack.pop()
        for eq in jaxpr.equations:
            if eq.primitive.name == "shard_map":
                return eq.params["jaxpr"]
            stack.extend(v for v in eq.params.values() if hasattr(v, "equations"))
    raise AssertionError("no shard_map in the traced program")


def order(jaxpr):
    """The executed program's primitive names, clusters as 'fused'."""
    return [eq.primitive.name for eq in executable(jaxpr).equations]


def test_gathers_first_and_reductions_last():
    names = order(body(meshax_step()))
    reductions = [i for i, n in enumerate(names) if n in ("preduce", "reduce_scatter", "grouped_sum")]
    products = [i for i, n in enumerate(names) if n == "dot_general"]
    # the weights' gathers: one exchange at the very start
    assert names[0] == "grouped_gather" and "all_gather" not in names, names
    assert len(executable(body(meshax_step())).equations[0].inputs) == len(PARAMS)
    # the gradients' sums and the loss's pmean (its division moved along): one reduction after the last product
    assert names.count("grouped_sum") == 1 and names.index("grouped_sum") > max(products), names
    assert len(reductions) == 1, names
    grouped = next(eq for eq in executable(body(meshax_step())).equations if eq.primitive.name == "grouped_sum")
    assert len(grouped.inputs) == 2 * len(PARAMS) + 1  # every weight's psum_scatter, every bias's psum, the loss


def test_values_match_jax():
    ours = meshax_step()(PARAMS, X, LABELS)
    mesh = jax.sharding.Mesh(np.array(jax.devices()[:DEVICES]), ("d",))
    theirs = fsdp_step(jax, jjnp, jax.sharding.PartitionSpec, mesh)(PARAMS, X, LABELS)
    assert_same_tree(ours, theirs)


def test_nothing_moves_beyond_the_memory_bound(monkeypatch):
    scheduled = order(body(meshax_step()))
    monkeypatch.setattr(schedule_module, "MAX_MOVED_BYTES", 0)
    kept = order(body(meshax_step()))
    assert kept != scheduled
    first_product = kept.index("dot_general")
    assert kept.index("all_gather") == 0 and "all_gather" in kept[first_product:], kept


def test_nothing_moves_past_an_effect():
    jaxpr = body(meshax_step(callback=True))
    executed = executable(jaxpr).equations
    names = [eq.primitive.name for eq in executed]
    callback = next(i for i, n in enumerate(names) if "callback" in n)
    gathers = [i for i, n in enumerate(names) if n == "all_gather"]
    assert gathers[0] == 0 and gathers[1] > callback, names
    out = meshax_step(callback=True)(PARAMS, X, LABELS)
    np.testing.assert_allclose(np.asarray(out[1]), np.asarray(meshax_step()(PARAMS, X, LABELS)[1]), rtol=1e-6)


def test_programs_without_collectives_are_untouched():
    jaxpr = meshax.make_jaxpr(lambda x: mnp.sin(x) @ x.T)(X).jaxpr
    assert schedule_module.schedule(jaxpr) is jaxpr
    assert not any(eq.primitive is fused_p and "all_gather" in repr(eq) for eq in executable(jaxpr).equations)


@pytest.mark.parametrize("hoisted", sorted(schedule_module.HOISTED))
def test_moved_primitives_exist(hoisted):
    """The names the scheduler looks for are the collectives' primitive names (a renamed primitive would silently
    stop being scheduled)."""
    from meshax._src.lax import parallel

    names = {getattr(parallel, n).name for n in dir(parallel) if n.endswith("_p")}
    assert hoisted in names and schedule_module.SUNK <= names


def test_adjacent_sums_are_one_reduction_with_jax_values():
    """psum, tiled psum_scatter along a later dimension and untiled psum_scatter, side by side: one grouped sum;
    a pmax and a sum of another dtype stay apart; values as JAX's."""
    a = RNG.standard_normal((8, 12)).astype(np.float32)
    b = RNG.standard_normal((8, 16)).astype(np.float32)
    c = RNG.standard_normal((8, DEVICES, 3)).astype(np.float32)
    n = np.arange(8 * 5, dtype=np.int32).reshape(8, 5)

    def f(lib):
        def body_(a, b, c, n):
            return (lib.lax.psum(a * 2.0, "d"), lib.lax.psum_scatter(b, "d", scatter_dimension=1, tiled=True),
                    lib.lax.psum_scatter(c[0], "d"), lib.lax.pmax(a, "d"), lib.lax.psum(n, "d"))
        return body_

    P = meshax.sharding.PartitionSpec
    mesh = meshax.sharding.Mesh(np.array(meshax.devices()[:DEVICES]), ("d",))
    specs = dict(in_specs=(P("d"), P("d"), P("d"), P("d")), out_specs=(P(), P(None, "d"), P("d"), P(), P()))
    mapped = meshax.shard_map(f(meshax), mesh=mesh, **specs)
    outer = meshax.make_jaxpr(mapped)(a, b, c, n).jaxpr
    inner = next(eq.params["jaxpr"] for eq in outer.equations if eq.primitive.name == "shard_map")
    executed = executable(inner).equations
    names = [eq.primitive.name for eq in executed]
    assert names.count("grouped_sum") == 1, names
    grouped = next(eq for eq in executed if eq.primitive.name == "grouped_sum")
    assert len(grouped.inputs) == 3 and names.count("preduce") == 2, names
    ours = meshax.jit(mapped)(a, b, c, n)
    jmesh = jax.sharding.Mesh(np.array(jax.devices()[:DEVICES]), ("d",))
    JP = jax.sharding.PartitionSpec
    theirs = jax.jit(jax.shard_map(f(jax), mesh=jmesh, in_specs=(JP("d"),) * 4,
                                   out_specs=(JP(), JP(None, "d"), JP("d"), JP(), JP())))(a, b, c, n)
    assert_same_tree(ours, theirs)


def test_data_parallel_gradients_are_reduced_together(monkeypatch):
    """jit over a mesh, batch sharded, parameters replicated: the gradients' sums over the devices are held until
    the update reads them and then reduced in one call; the values are JAX's."""
    from meshax._src.interpreters import eager_programs

    calls = []
    original = eager_programs.allreduce_devices_many
    monkeypatch.setattr(eager_programs, "allreduce_devices_many",
                        lambda mesh, axes, values, op: (calls.append(len(values)), original(mesh, axes, values, op))[1])

    mesh = meshax.sharding.Mesh(np.array(meshax.devices()[:DEVICES]), ("d",))
    NS, P = meshax.sharding.NamedSharding, meshax.sharding.PartitionSpec
    rows, replicated = NS(mesh, P("d")), NS(mesh, P())
    jitted = meshax.jit(sgd_step(meshax, mnp), in_shardings=(replicated, rows, rows), out_shardings=(replicated, replicated))
    params = meshax.device_put(PARAMS, replicated)
    ours = jitted(params, meshax.device_put(X, rows), meshax.device_put(LABELS, rows))
    assert max(calls) == 2 * len(PARAMS), calls  # every weight's and bias's gradient in one reduction
    assert_same_tree(ours, jax.jit(sgd_step(jax, jjnp))(PARAMS, X, LABELS))


def test_held_reductions_are_bounded(monkeypatch):
    """Past MAX_HELD_BYTES of held partial values, the held reductions run at once (memory stays bounded)."""
    from meshax._src.interpreters import eager_programs

    calls = []
    original = eager_programs.allreduce_devices_many
    monkeypatch.setattr(eager_programs, "allreduce_devices_many",
                        lambda mesh, axes, values, op: (calls.append(len(values)), original(mesh, axes, values, op))[1])
    monkeypatch.setattr(eager_programs, "MAX_HELD_BYTES", 0)
    mesh = meshax.sharding.Mesh(np.array(meshax.devices()[:DEVICES]), ("d",))
    rows = meshax.sharding.NamedSharding(mesh, meshax.sharding.PartitionSpec("d"))
    x = meshax.device_put(X, rows)
    out = meshax.jit(lambda x: (x.sum(axis=0), (x * 2.0).sum(axis=0)))(x)
    assert calls == [1, 1], calls
    np.testing.assert_allclose(np.asarray(out[1]), (X * 2.0).sum(axis=0), rtol=1e-6)


def test_adjacent_gathers_are_one_exchange_with_jax_values():
    """Tiled along a later axis, stacked, and of another dtype: the float gathers are one exchange, values as
    JAX's."""
    a = RNG.standard_normal((8, 6)).astype(np.float32)
    b = RNG.standard_normal((8, 3)).astype(np.float32)
    n = np.arange(8 * 5, dtype=np.int32).reshape(8, 5)

    def f(lib):
        def body_(a, b, n):
            return (lib.lax.all_gather(a, "d", axis=1, tiled=True), lib.lax.all_gather(b, "d"),
                    lib.lax.all_gather(n, "d", tiled=True))
        return body_

    P = meshax.sharding.PartitionSpec
    mesh = meshax.sharding.Mesh(np.array(meshax.devices()[:DEVICES]), ("d",))
    specs = dict(in_specs=(P("d"), P("d"), P("d")), out_specs=(P("d"), P("d"), P("d")))
    mapped = meshax.shard_map(f(meshax), mesh=mesh, **specs)
    outer = meshax.make_jaxpr(mapped)(a, b, n).jaxpr
    inner = next(eq.params["jaxpr"] for eq in outer.equations if eq.primitive.name == "shard_map")
    names = [eq.primitive.name for eq in executable(inner).equations]
    assert names.count("grouped_gather") == 1 and names.count("all_gather") == 1, names
    ours = meshax.jit(mapped)(a, b, n)
    jmesh = jax.sharding.Mesh(np.array(jax.devices()[:DEVICES]), ("d",))
    JP = jax.sharding.PartitionSpec
    theirs = jax.jit(jax.shard_map(f(jax), mesh=jmesh, in_specs=(JP("d"),) * 3, out_specs=(JP("d"),) * 3))(a, b, n)
    assert_same_tree(ours, theirs)


def test_grouped_collectives_over_a_one_device_axis_are_their_inputs():
    """On a mesh axis of size 1 the grouped gathers and sums (tiled and stacked, a psum_scatter too) give JAX's
    values without copying: the results are views of the inputs."""
    a = RNG.standard_normal((6, 4)).astype(np.float32)
    b = RNG.standard_normal((3, 5)).astype(np.float32)

    def f(lib):
        def body_(a, b):
            return (lib.lax.all_gather(a, "d", tiled=True), lib.lax.all_gather(b, "d"),
                    lib.lax.psum(a, "d"), lib.lax.psum_scatter(b, "d", tiled=True),
                    lib.lax.psum_scatter(b[None], "d"))
        return body_

    P, JP = meshax.sharding.PartitionSpec, jax.sharding.PartitionSpec
    specs = dict(in_specs=(P("d"), P("d")), out_specs=(P("d"), P("d"), P("d"), P("d"), P("d")))
    mapped = meshax.shard_map(f(meshax), mesh=meshax.sharding.Mesh(np.array(meshax.devices()[:1]), ("d",)), **specs)
    inner = next(eq.params["jaxpr"] for eq in meshax.make_jaxpr(mapped)(a, b).jaxpr.equations
                 if eq.primitive.name == "shard_map")
    names = [eq.primitive.name for eq in executable(inner).equations]
    assert "grouped_gather" in names and "grouped_sum" in names, names
    ours = meshax.jit(mapped)(a, b)
    theirs = jax.jit(jax.shard_map(f(jax), mesh=jax.sharding.Mesh(np.array(jax.devices()[:1]), ("d",)),
                                   in_specs=(JP("d"),) * 2, out_specs=(JP("d"),) * 5))(a, b)
    assert_same_tree(ours, theirs)
    gathered, summed = (np.asarray(ours[i].addressable_shards[0].data) for i in (0, 2))
    assert np.shares_memory(gathered, summed)  # both the input's buffer
