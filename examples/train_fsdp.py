# Fully sharded data parallelism (FSDP) of a small MLP classifier (seeds' Part 2.2): the batch and the
# weight matrices are sharded over the mesh axis 'data' (weights along their first dimension; the
# small bias vectors stay replicated). Inside shard_map every layer all-gathers its weight just
# before using it; the gradients of the sharded weights come back sharded (the transpose of
# all_gather is psum_scatter), so each device only ever updates its own slice.
# Run: meshax launch -n 4 --cpu-devices 2 examples/train_fsdp.py
import meshax as jax
import numpy as np
from meshax.sharding import Mesh, NamedSharding
from meshax.sharding import PartitionSpec as P

from mlp_common import (init_params, layer_sizes, loss_fn, make_dataset, maybe_save, parse_args, report,
                        resume, sgd)

args = parse_args("FSDP MLP training with shard_map and all_gather")
jax.distributed.initialize()

mesh = Mesh(np.array(jax.devices()), ("data",))
batch_sharding = NamedSharding(mesh, P("data"))

host_params = init_params(layer_sizes(args))
param_specs = [{"w": P("data"), "b": P()} for _ in host_params]
params = jax.tree_util.tree_map(lambda p, spec: jax.device_put(p, NamedSharding(mesh, spec)),
                                host_params, param_specs)
xs, labels = make_dataset(args.steps, args.batch, args.features, args.classes)


def gather(layer):
    """A layer's full parameters from this device's slice of its weight."""
    return {"w": jax.lax.all_gather(layer["w"], "data", tiled=True), "b": layer["b"]}


def device_step(params, x, y):
    """One device's view: its batch slice x, y, its slice of every weight and the full biases."""
    def global_loss(params):
        # The mean over the global batch: gradients of the sharded weights then come back as this
        # device's slice of the full-batch gradient, and those of the replicated biases in full.
        return jax.lax.pmean(loss_fn(params, x, y, gather), "data")

    loss, grads = jax.value_and_grad(global_loss)(params)
    return sgd(params, grads, args.lr), loss


train_step = jax.jit(jax.shard_map(device_step, mesh=mesh, in_specs=(param_specs, P("data"), P("data")),
                                   out_specs=(param_specs, P())))

manager, first, params = resume(args, params)  # with --checkpoint-dir: continue from its latest checkpoint
for step in range(first, args.steps):
    x = jax.device_put(xs[step], batch_sharding)
    y = jax.device_put(labels[step], batch_sharding)
    params, loss = train_step(params, x, y)
    report(step, loss)
    maybe_save(manager, args, step, params)
