"""Programs for tests/test_desync.py: correct ones that the desync check must let finish, and placements that
disagree between processes, which must fail. Run under `meshax launch`; argv[1] names the program.

remat            grad of f and of jax.checkpoint(f) with f closing over an array sharded over the whole mesh
                 (every process moves the gradient to its own device): prints `GRADS <process> <g1> <g2>`
async_training   50 training steps, an async save every 5 (training goes on meanwhile), then every checkpoint
                 restores exactly what was saved: prints `RESTORED <process> <checkpoints> <loss>`
end_during_save  every process starts an async save and ends at once, process 1 three seconds later than the
                 others (whose saves wait for it while their interpreters exit): the checkpoint commits
side_channel     a background thread in a side channel runs MPI reductions and a reshard while the main thread
                 runs its own: prints `SIDE <process> <main total> <thread total>`
prefetch         a user's own thread places host batches on the mesh (device_put, make_array_from_process_local_data)
                 while the main thread trains on them: prints `PREFETCH <process> <total>`
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

elif program == "end_during_save":
    import time

    mesh = jax.make_mesh((jax.device_count(),), ("i",))
    x = jax.device_put(np.arange(4.0 * jax.device_count(), dtype=np.float32), NamedSharding(mesh, P("i")))
    if here == 1:
        time.sleep(3)
    jax.checkpoint.async_save(os.path.join(sys.argv[2], "ended"), {"x": x})
    print("ENDING", here, flush=True)

elif program == "side_channel":
    import threading

    from meshax._src.runtime.distributed import runtime, side_channel

    channel = side_channel("test-prefetch")
    everyone = list(range(jax.process_count()))
    line = jax.make_mesh((jax.device_count(),), ("i",))
    rows = NamedSharding(line, P("i"))
    totals = {}

    def background():
        with channel.active():
            total = 0.0
            for k in range(40):
                total += float(runtime().process_group(everyone).allreduce(np.full(3, k + here, np.float64))[0])
                moved = jax.device_put(jax.device_put(np.arange(16.0 * (k % 3 + 1)), rows), NamedSharding(line, P()))
                total += float(np.asarray(moved.addressable_data(0)).sum())
            totals["thread"] = total

    thread = threading.Thread(target=background)
    thread.start()
    psum = jax.jit(jax.shard_map(lambda v: jax.lax.psum(v, "i"), mesh=line, in_specs=P("i"), out_specs=P()))
    main_total = sum(float(psum(jax.device_put(np.full(jax.device_count(), k, np.float32), rows))[0])
                     for k in range(60))
    thread.join()
    print("SIDE", here, main_total, totals["thread"], flush=True)

elif program == "prefetch":
    import queue
    import threading

    line = jax.make_mesh((jax.device_count(),), ("i",))
    rows = NamedSharding(line, P("i"))
    batches: queue.Queue = queue.Queue(maxsize=4)
    local_rows = jax.local_device_count()

    def loader():  # a typical prefetching loader: it places data, it does not communicate
        for k in range(30):
            if k % 2:
                batch = jax.device_put(np.full((jax.device_count(), 4), k, np.float32), rows)
            else:
                local = np.full((local_rows, 4), k, np.float32)
                batch = jax.make_array_from_process_local_data(rows, local, (jax.device_count(), 4))
            batches.put(batch)

    threading.Thread(target=loader, daemon=True).start()
    total = 0.0
    for _ in range(30):
        total += float(jnp.sum(batches.get()))  # a collective on the main thread per batch
    print("PREFETCH", here, total, flush=True)

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
