# Data-parallel training of a small MLP classifier with shard_map (seeds' Part 2.2): every device
# computes the loss and the gradients of its slice of the batch, and jax.lax.pmean averages both
# over the mesh axis 'data'. Run: meshax launch -n 4 --cpu-devices 2 examples/train_dp_shard_map.py
#
# With shard_map's default check_vma=True, the replicated parameters are device-invariant, and the
# gradient of a per-device loss with respect to them comes back already summed over the devices
# (the transpose of using an invariant value in device-varying code is a psum); pmean of that sum
# leaves it unchanged, giving the device count times the true gradient. Casting the parameters to
# device-varying first (jax.lax.pcast(..., to='varying')) makes value_and_grad return each
# device's own gradient, which pmean then averages into the full-batch gradient.
import meshax as jax
import numpy as np
from meshax.sharding import Mesh, NamedSharding
from meshax.sharding import PartitionSpec as P

from mlp_common import (init_params, layer_sizes, loss_fn, make_dataset, maybe_save, parse_args, report,
                        resume, sgd)

args = parse_args("Data-parallel MLP training with shard_map and pmean")
jax.distributed.initialize()

mesh = Mesh(np.array(jax.devices()), ("data",))
batch_sharding = NamedSharding(mesh, P("data"))
replicated = NamedSharding(mesh, P())

params = jax.device_put(init_params(layer_sizes(args)), replicated)
xs, labels = make_dataset(args.steps, args.batch, args.features, args.classes)


def device_step(params, x, y):
    """One device's view: its batch slice x, y and a full copy of the parameters."""
    local_params = jax.lax.pcast(params, "data", to="varying")
    loss, grads = jax.value_and_grad(loss_fn)(local_params, x, y)  # this device's slice only
    loss = jax.lax.pmean(loss, "data")
    grads = jax.lax.pmean(grads, "data")  # the full-batch gradient, the same on every device
    return sgd(params, grads, args.lr), loss


train_step = jax.jit(jax.shard_map(device_step, mesh=mesh, in_specs=(P(), P("data"), P("data")),
                                   out_specs=(P(), P())))

manager, first, params = resume(args, params)  # with --checkpoint-dir: continue from its latest checkpoint
for step in range(first, args.steps):
    x = jax.device_put(xs[step], batch_sharding)
    y = jax.device_put(labels[step], batch_sharding)
    params, loss = train_step(params, x, y)
    report(step, loss)
    maybe_save(manager, args, step, params)
