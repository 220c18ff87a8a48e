# The seed's "slightly more interesting computation": a distributed matmul over a 2-D mesh.
# Run: meshax launch -n 4 --cpu-devices 2 examples/distributed_matmul.py
import meshax as jax
import meshax.numpy as jnp
from meshax.sharding import NamedSharding, PartitionSpec as P

jax.distributed.initialize()

mesh = jax.make_mesh((jax.device_count() // 2, 2), ('a', 'b'))

def device_put(x, spec):
  return jax.device_put(x, NamedSharding(mesh, spec))

# construct global arrays by sharding over the global mesh
x = device_put(jnp.ones((4096, 2048)), P('a', 'b'))
y = device_put(jnp.ones((2048, 4096)), P('b', None))

# run a distributed matmul
z = jax.nn.relu(x @ y)

# inspect the sharding of the result
if jax.process_index() == 0:
  jax.debug.visualize_array_sharding(z)
  print()
  print(z.sharding)
