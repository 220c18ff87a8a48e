# Data-parallel training of a small MLP classifier, the automatic way (seeds' Part 2.2): the batch is
# sharded over the mesh axis 'data', the parameters are replicated, and jax.jit inserts the gradient
# all-reduce itself. Run: meshax launch -n 4 --cpu-devices 2 examples/train_dp_jit.py
import functools

import meshax as jax
import numpy as np
from meshax.sharding import Mesh, NamedSharding
from meshax.sharding import PartitionSpec as P

from mlp_common import (init_params, layer_sizes, loss_fn, make_dataset, maybe_save, parse_args, report,
                        resume, sgd)

args = parse_args("Data-parallel MLP training with jit and shardings")
jax.distributed.initialize()

mesh = Mesh(np.array(jax.devices()), ("data",))
batch_sharding = NamedSharding(mesh, P("data"))  # examples split over the devices
replicated = NamedSharding(mesh, P())  # parameters: a full copy on every device

params = jax.device_put(init_params(layer_sizes(args)), replicated)
xs, labels = make_dataset(args.steps, args.batch, args.features, args.classes)


@functools.partial(jax.jit, in_shardings=(replicated, batch_sharding, batch_sharding),
                   out_shardings=(replicated, replicated))
def train_step(params, x, y):
    loss, grads = jax.value_and_grad(loss_fn)(params, x, y)  # the mean over the global batch
    return sgd(params, grads, args.lr), loss


manager, first, params = resume(args, params)  # with --checkpoint-dir: continue from its latest checkpoint
for step in range(first, args.steps):
    x = jax.device_put(xs[step], batch_sharding)
    y = jax.device_put(labels[step], batch_sharding)
    params, loss = train_step(params, x, y)
    report(step, loss)
    maybe_save(manager, args, step, params)
