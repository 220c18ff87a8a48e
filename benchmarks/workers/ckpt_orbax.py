"""The Orbax side of ckpt_worker.py: JAX with 8 CPU devices in one process, Orbax's PyTree checkpoints."""
from __future__ import annotations

import argparse
import os
import shutil
from typing import Any, Callable

import numpy as np


def run_orbax(args: argparse.Namespace, writer: Any, measured: Callable, drop_cache: Callable,
              shard_values: Callable, columns: int) -> None:
    """Save and restore the worker's parameters with Orbax (use_ocdbt=args.ocdbt), as run_meshax does."""
    import jax
    import orbax.checkpoint as ocp
    from jax.sharding import NamedSharding, PartitionSpec as P

    rows = (args.mib << 18) // columns // args.arrays
    shape = (rows, columns)
    mesh = jax.make_mesh((jax.device_count(),), ("data",))
    grid = jax.make_mesh((4, jax.device_count() // 4), ("a", "b"))
    saved = NamedSharding(mesh, P("data", None))
    params = {f"w{i}": jax.make_array_from_callback(shape, saved, lambda idx, i=i: shard_values(idx, i, rows))
              for i in range(args.arrays)}
    writer.record["local_bytes"] = sum(a.nbytes for a in params.values())
    host = {k: np.asarray(v) for k, v in params.items()}
    checkpointer = ocp.Checkpointer(ocp.PyTreeCheckpointHandler(use_ocdbt=bool(args.ocdbt)))
    targets = {"restore_same": saved, "restore_reshard": NamedSharding(grid, P("a", "b")),
               "restore_transpose": NamedSharding(mesh, P(None, "data"))}
    warm = os.path.join(args.dir, "orbax-warmup")  # imports and first-call costs, untimed
    checkpointer.save(warm, args=ocp.args.PyTreeSave({"x": jax.device_put(np.ones((8, 8), np.float32), saved)}))
    checkpointer.restore(warm)
    shutil.rmtree(warm)
    for repeat in range(args.repeats):
        path = os.path.join(args.dir, f"orbax-{repeat}")
        _, seconds, extra = measured(lambda: checkpointer.save(path, args=ocp.args.PyTreeSave(params)))
        writer.record["save"].append(seconds)
        writer.record["save_extra"].append(extra)
        for name, sharding in targets.items():
            drop_cache(path)
            target = {k: jax.ShapeDtypeStruct(shape, np.float32, sharding=sharding) for k in params}
            restore_args = ocp.checkpoint_utils.construct_restore_args(target)
            result, seconds, extra = measured(lambda: checkpointer.restore(
                path, args=ocp.args.PyTreeRestore(item=target, restore_args=restore_args)))
            jax.block_until_ready(result)
            writer.record[name].append(seconds)
            writer.record[name + "_extra"].append(extra)
            for k, v in result.items():
                assert v.sharding == sharding
                np.testing.assert_array_equal(np.asarray(v), host[k])
            del result
        shutil.rmtree(path)
        writer.write(complete=False, every=0)
