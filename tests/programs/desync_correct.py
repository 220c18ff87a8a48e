"""Programs for tests/test_desync.py: correct ones that the desync check must let finish, and placements that
disagree between processes, which must fail. Run under `meshax launch`; argv[1] names the program.

remat            grad of f and of jax.checkpoint(f) with f closing over an array sharded over the whole mesh
                 (every process moves the gradient to its own device): prints `GRADS <process> <g1> <g2>`
async_training   50 training steps, an async save every 5 (training goes on meanwhile), then every checkpoint
                 restores exactly what was saved: prints `RESTORED <process> <checkpoints> <loss>`
order-host / order-callback / order-reshard
                 process 1 builds its mesh from the devices in reverse order, then places an array on it
                 (device_put of host data, make_array_from_callback, device_put of an array); must fail
"""
import os
import sys

import numpy as np

import meshax as jax
import meshax.numpy as jnp
from meshax.sharding import Mesh, NamedSharding, PartitionSpec as P

jax.distributed.initialize()
here = jax.process_index()
program = sys.argv[1]

if program == "remat":
    mesh = jax.make_mesh((jax.device_count() // 2, 2), ("data", "model"))
    X = jax.device_put(jax.random.normal(jax.random.PRNGKey(3), (16, 6)), NamedSharding(mesh, P("data", None)))
    w = jax.random.normal(jax.random.PRNGKey(4), (6,))
    f = lambda w: jnp.sum(jnp.tanh(X @ jnp.outer(w, w)) ** 2)  # noqa: E731
    g1 = jax.grad(f)(w)
    g2 = jax.grad(jax.checkpoint(f))(w)
    g3 = jax.jit(jax.grad(jax.checkpoint(f, policy=jax.checkpoint_policies.dots_saveable)))(w)
    print("GRADS", here, float(jnp.sum(g1)), float(jnp.sum(g2)), float(jnp.sum(g3)), flush=True)

elif program == "async_training":
    root = sys.argv[2]
    mesh = jax.make_mesh((jax.device_count() // 2, 2), ("data", "model"))
    rng = np.random.default_rng(0)
    X = jax.device_put(rng.standard_normal((64, 8)).astype(np.float32), NamedSharding(mesh, P("data", None)))
    y = jax.device_put(rng.standard_normal((64, 4)).astype(np.float32), NamedSharding(mesh, P("data", None)))
    params = {"w": jax.device_put(np.zeros((8, 4), np.float32), NamedSharding(mesh, P(None, "model"))),
              "b": jax.device_put(np.zeros((4,), np.float32), NamedSharding(mesh, P("model")))}

    def loss(p):
        return jnp.mean((X @ p["w"] + p["b"] - y) ** 2)

    @jax.jit
    def step(p):
        value, grads = jax.value_and_grad(loss)(p)
        return jax.tree_util.tree_map(lambda a, g: a - 0.1 * g, p, grads), value

    saved = {}
    for i in range(50):
        params, value = step(params)
        if i % 5 == 4:
            saved[i] = jax.device_get(params)
            jax.checkpoint.async_save(os.path.join(root, f"step{i}"), params)
        float(value)  # a collective every step while the save runs
    jax.checkpoint.save(os.path.join(root, "final"), params)
    for i, expected in saved.items():
        restored = jax.device_get(jax.checkpoint.restore(os.path.join(root, f"step{i}")))
        for name in expected:
            np.testing.assert_array_equal(np.asarray(restored[name]), expected[name])
    print("RESTORED", here, len(saved), float(value), flush=True)

elif program.startswith("order-"):
    devices = jax.devices()
    if here == 1:
        devices = devices[::-1]
    mesh = Mesh(np.array(devices).reshape(jax.device_count() // 2, 2), ("data", "model"))
    target = NamedSharding(mesh, P("data", None))
    value = np.arange(16 * 6, dtype=np.float32).reshape(16, 6)
    if program == "order-host":
        x = jax.device_put(value, target)
    elif program == "order-callback":
        x = jax.make_array_from_callback(value.shape, target, lambda index: value[index])
    else:
        everywhere = NamedSharding(jax.make_mesh((jax.device_count(),), ("i",)), P())
        x = jax.device_put(jax.device_put(value, everywhere), target)
    print("SUM", here, float(jnp.sum(x * np.arange(6, dtype=np.float32))), flush=True)
