"""(c) data-parallel or FSDP MLP training: train.py STEPS [dp|fsdp]. The batch split over every device of the job;
parameters replicated (dp) or their rows split over the devices too (fsdp: gathered where used); prints RESULT {"check": "losses", "losses": [...]} (the same numbers with any process layout)."""
import os
import sys

import numpy as np

import meshax as jax
import meshax.numpy as jnp
from common import init, report
from meshax.sharding import NamedSharding, PartitionSpec as P

if "MESHAX_COORDINATOR_ADDRESS" in os.environ:  # the job; without it, the one-process reference
    init()
steps = int(sys.argv[1])
style = sys.argv[2] if len(sys.argv) > 2 else "dp"
mesh = jax.make_mesh((jax.device_count(),), ("dp",))
rng = np.random.default_rng(0)
batch, features, hidden = 512, 64, 256
x_all = rng.standard_normal((steps, batch, features)).astype(np.float32)
labels_all = rng.integers(0, 4, (steps, batch)).astype(np.int32)
params = [{"w": rng.standard_normal((features, hidden)).astype(np.float32) * 0.1, "b": np.zeros(hidden, np.float32)},
          {"w": rng.standard_normal((hidden, 4)).astype(np.float32) * 0.1, "b": np.zeros(4, np.float32)}]
params = [{"w": jax.device_put(layer["w"], NamedSharding(mesh, P("dp") if style == "fsdp" else P())),
           "b": jax.device_put(layer["b"], NamedSharding(mesh, P()))} for layer in params]


def loss(params, x, labels):
    h = jax.nn.relu(x @ params[0]["w"] + params[0]["b"])
    logits = h @ params[1]["w"] + params[1]["b"]
    return -jnp.mean(jnp.sum(jax.nn.one_hot(labels, 4) * jax.nn.log_softmax(logits), axis=-1))


@jax.jit
def step(params, x, labels):
    value, grads = jax.value_and_grad(loss)(params, x, labels)
    return jax.tree_util.tree_map(lambda p, g: p - 0.1 * g, params, grads), value


losses = []
for s in range(steps):
    x = jax.make_array_from_callback(x_all[s].shape, NamedSharding(mesh, P("dp")), lambda i: x_all[s][i])
    labels = jax.make_array_from_callback(labels_all[s].shape, NamedSharding(mesh, P("dp")),
                                          lambda i: labels_all[s][i])
    params, value = step(params, x, labels)
    losses.append(float(value))
report(check="losses", losses=losses, devices=jax.device_count(), processes=jax.process_count(),
       weight_split=str(params[0]["w"].sharding.spec))
