"""A small data-parallel training step under `meshax launch --profile DIR` (tests/test_profiler.py): the batch over
every device of the job, the weights replicated, two steps each marked with a StepTraceAnnotation, the second also
traced into the folder given as the argument (jax.profiler.trace inside the whole job's recording)."""
import sys

import numpy as np

import meshax
import meshax.numpy as jnp
from meshax.sharding import NamedSharding, PartitionSpec as P

meshax.distributed.initialize()
mesh = meshax.make_mesh((meshax.device_count(),), ("batch",))
data = np.arange(32 * 4, dtype=np.float32).reshape(32, 4) / 100
x = meshax.make_array_from_callback(data.shape, NamedSharding(mesh, P("batch")), lambda index: data[index])
w = meshax.device_put(np.ones((4, 2), np.float32), NamedSharding(mesh, P()))


@meshax.jit
def step(w, x):
    return w - 0.1 * meshax.grad(lambda w: jnp.mean(jnp.tanh(x @ w) ** 2))(w)


with meshax.profiler.StepTraceAnnotation("train", step_num=0):
    w = step(w, x)
with meshax.profiler.trace(sys.argv[1]), meshax.profiler.StepTraceAnnotation("train", step_num=1):
    w = step(w, x)
print("WEIGHTS", np.asarray(meshax.device_get(w)).tolist(), flush=True)
