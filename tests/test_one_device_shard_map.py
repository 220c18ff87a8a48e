"""shard_map on a one-device mesh runs as a plain NumPy program (numpy_eval.run_alone) once the eager path has shown
its results' shardings: every collective over the one device as JAX computes it there, and each result what the
eager path gives (values, shape, dtype, weak type, sharding, committed), under jit, with loops and gradients
inside; meshes of several devices keep the per-device path. (Called outside jit, shard_map runs the function
itself device by device, as JAX does, and is not a program to run.)"""
import numpy as np
import pytest

import meshax
from meshax._src.transforms import shard_map as shard_map_module

from test_one_device_fast_path import counted, describe, first_and_second_calls

jax = pytest.importorskip("jax")


def mesh_of(lib, devices=1):
    return lib.sharding.Mesh(np.array(lib.devices()[:devices]), ("data",))


def fsdp_loss_grad(lib, w, x):
    """An FSDP step's gradient: gathered weights, a pmean'd loss (adjacent gathers and sums run grouped)."""
    def loss(w):
        full = lib.lax.all_gather(w, "data", tiled=True)
        return lib.lax.pmean(lib.numpy.sum(lib.numpy.tanh(x @ full) ** 2), "data")
    return lib.grad(loss)(w)


def scanned_psum(lib, w, x):
    def body(carry, row):
        return carry + lib.lax.psum(row @ w, "data"), lib.lax.axis_index("data")
    return lib.lax.scan(body, lib.numpy.zeros(w.shape[1], w.dtype), x)


BODIES = {  # name: (body(lib, w, x), out_specs)
    "psum pmax pmin pmean": (lambda lib, w, x: (lib.lax.psum(x, "data"), lib.lax.pmax(x, "data"),
                                               lib.lax.pmin(w, "data"), lib.lax.pmean(x * 3, "data")), "P()"),
    "all_gather": (lambda lib, w, x: (lib.lax.all_gather(x, "data"), lib.lax.all_gather(w, "data", axis=1),
                                      lib.lax.all_gather(x, "data", axis=1, tiled=True)), "P('data')"),
    "psum_scatter": (lambda lib, w, x: (lib.lax.psum_scatter(x, "data", tiled=True),
                                        lib.lax.psum_scatter(x[None], "data"),
                                        lib.lax.psum_scatter(w, "data", scatter_dimension=1, tiled=True)), "P('data')"),
    "one psum_scatter": (lambda lib, w, x: (lib.numpy.tanh(lib.lax.psum_scatter(x[None], "data")),), "P('data')"),
    "ppermute and axis_index": (lambda lib, w, x: (lib.lax.ppermute(x, "data", [(0, 0)]),
                                                   lib.lax.ppermute(x, "data", []),
                                                   x * lib.lax.axis_index("data") + 1), "P('data')"),
    "pcast to varying": (lambda lib, w, x: (lib.lax.pcast(lib.lax.psum(w, "data"), "data", to="varying") * 2,), "P('data')"),
    "fsdp gradient": (lambda lib, w, x: (fsdp_loss_grad(lib, w, x),), "P('data')"),
    "scan with psum": (scanned_psum, "P('data')"),
}


def mapped(lib, name, mesh):
    body, out_spec = BODIES[name]
    P = lib.sharding.PartitionSpec
    return lib.shard_map(lambda w, x: body(lib, w, x), mesh=mesh, in_specs=(P("data"), P("data")),
                         out_specs=eval(out_spec, {"P": P}))


def inputs(lib, mesh):
    rng = np.random.default_rng(7)
    w, x = rng.standard_normal((4, 5)).astype(np.float32), rng.standard_normal((4, 4)).astype(np.float32)
    P = lib.sharding.PartitionSpec
    return [lib.device_put(a, lib.sharding.NamedSharding(mesh, P("data"))) for a in (w, x)]


@pytest.mark.parametrize("name", sorted(BODIES))
def test_second_call_runs_as_numpy_as_the_eager_path_and_jax(name, monkeypatch):
    mesh = mesh_of(meshax)
    first, second = first_and_second_calls(meshax.jit(mapped(meshax, name, mesh)), inputs(meshax, mesh), monkeypatch,
                                           shard_map_module, "run_alone")
    assert describe(second) == describe(first)
    jax_mesh = mesh_of(jax)
    theirs = jax.jit(mapped(jax, name, jax_mesh))(*inputs(jax, jax_mesh))
    for ours, want in zip(meshax.tree_util.tree_leaves(second), jax.tree_util.tree_leaves(theirs)):
        assert ours.shape == want.shape and ours.dtype == want.dtype
        np.testing.assert_allclose(np.asarray(ours), np.asarray(want), rtol=2e-6, atol=1e-6)


def test_meshes_of_several_devices_and_numpy_inputs_keep_the_per_device_path(monkeypatch):
    """A two-device mesh runs device by device; NumPy inputs to a one-device shard_map get the mesh's sharding
    (as in JAX), not the default device's."""
    runs = counted(monkeypatch, shard_map_module, "run_alone")
    two = mesh_of(meshax, 2)
    program = meshax.jit(mapped(meshax, "fsdp gradient", two))
    w, x = inputs(meshax, two)
    for _ in range(2):
        (out,) = program(w, x)
    assert not runs and out.sharding == meshax.sharding.NamedSharding(two, meshax.sharding.PartitionSpec("data"))
    one = mesh_of(meshax)
    program = meshax.jit(mapped(meshax, "psum pmax pmin pmean", one))
    host = [np.asarray(a) for a in inputs(meshax, one)]
    first, second = program(*host), program(*host)
    assert describe(second) == describe(first)
    assert all(r.sharding == meshax.sharding.NamedSharding(one, meshax.sharding.PartitionSpec())
               for r in meshax.tree_util.tree_leaves(second))


def test_a_one_device_mesh_of_another_device_than_the_inputs():
    """Inputs on device 0 into a shard_map over a mesh of device 1: results on device 1, as the eager path puts
    them, every call."""
    mesh = meshax.sharding.Mesh(np.array(meshax.devices()[1:2]), ("data",))
    program = meshax.jit(mapped(meshax, "psum pmax pmin pmean", mesh))
    w, x = inputs(meshax, mesh_of(meshax))
    first, second = program(w, x), program(w, x)
    assert describe(second) == describe(first)
    assert all(r.sharding.device_set == {meshax.devices()[1]} for r in meshax.tree_util.tree_leaves(second))
