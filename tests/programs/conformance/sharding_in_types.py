# JAX 0.10's documented style: set_mesh, P, make_mesh with Explicit axes, typeof, reshard; then vmap, scan and
# grad on the sharded arrays. Run by tests/test_conformance.py with meshax (several processes) and with JAX.
import meshax as jax
import meshax.numpy as jnp
import numpy as np
from meshax.sharding import AxisType

jax.distributed.initialize()
P = jax.P
mesh = jax.make_mesh((4, 2), ("X", "Y"), axis_types=(AxisType.Explicit, AxisType.Explicit))
show = print if jax.process_index() == 0 else (lambda *a: None)
show(jax.sharding.get_abstract_mesh())
with jax.set_mesh(mesh):
    show(jax.sharding.get_abstract_mesh())
    x = jax.device_put(np.arange(32.0, dtype=np.float32).reshape(8, 4), P("X", "Y"))
    show(jax.typeof(x), repr(jax.typeof(x)))
    y = jnp.sin(x) * 2
    show(jax.typeof(y))
    z = jax.sharding.reshard(x, P(None, "X"))
    show(jax.typeof(z))
    w = jax.device_put(np.linspace(-1, 1, 8, dtype=np.float32).reshape(4, 2), P())
    show(jax.typeof(w))

    def loss(w, x):
        def cell(h, row):
            h = jnp.tanh(h + row @ w)
            return h, jnp.sum(h)
        h, ys = jax.lax.scan(cell, jnp.zeros(2), x)
        return jnp.sum(ys) + jnp.sum(h ** 2)

    g = jax.jit(jax.grad(loss))(w, z)
    show("grad", np.round(np.asarray(jax.device_get(g)), 3).tolist())
    per_row = jax.vmap(lambda row: jnp.sum(jnp.tanh(row @ w)))(z)
    show("vmap", np.round(np.asarray(jax.device_get(per_row)), 3).tolist())
show(jax.sharding.get_abstract_mesh())
