"""shard_map with unreduced outputs and reduced inputs on a mesh spanning processes: a partial matmul made
unreduced with pcast, summed by resharding; its gradients; the unreduced gradient of a reduced weight. Every check
runs against NumPy; each prints CHECK name or FAIL."""
import numpy as np

import meshax
import meshax.numpy as jnp
from arr_common import init, ok, say
from meshax.sharding import AxisType

init()
n = meshax.device_count()
mesh = meshax.make_mesh((n,), ("X",), axis_types=(AxisType.Explicit,))


def check(name, got, expected):
    try:
        np.testing.assert_allclose(np.asarray(got), expected, rtol=1e-5, atol=1e-6)
    except AssertionError as error:
        say(f"FAIL {name}: " + " ".join(str(error).split()))
    else:
        ok(name)


A, B = np.arange(4.0 * n).reshape(4, n), np.arange(n * 3.0).reshape(n, 3)
X = np.arange(2.0 * n * 3).reshape(2 * n, 3) / (6.0 * n)
with meshax.set_mesh(mesh):
    a = meshax.device_put(A, meshax.P(None, "X"))
    b = meshax.device_put(B, meshax.P("X", None))

    @meshax.shard_map(in_specs=(meshax.P(None, "X"), meshax.P("X", None)),
                      out_specs=meshax.P(None, None, unreduced={"X"}))
    def matmul_partial(a, b):
        return meshax.lax.pcast(a @ b, "X", to="unreduced")

    def loss(a, b):
        return jnp.sum(meshax.reshard(matmul_partial(a, b), meshax.P(None, None)) ** 2)

    c = matmul_partial(a, b)
    say(f"typed {meshax.typeof(c)}")
    check("summed", meshax.reshard(c, meshax.P()), A @ B)
    grad_a, grad_b = meshax.jit(meshax.grad(loss, argnums=(0, 1)))(a, b)
    check("grad-a", meshax.reshard(grad_a, meshax.P()), 2 * (A @ B) @ B.T)
    check("grad-b", meshax.reshard(grad_b, meshax.P()), A.T @ (2 * (A @ B)))

    w = meshax.reshard(jnp.ones((3, 2)), meshax.P(None, None, reduced={"X"}))
    x = meshax.device_put(X, meshax.P("X", None))

    @meshax.shard_map(in_specs=(meshax.P("X", None), meshax.P(None, None, reduced={"X"})),
                      out_specs=meshax.P("X", None))
    def layer(x, w):
        return jnp.tanh(x @ w)

    dw = meshax.grad(lambda w: jnp.sum(layer(x, w) ** 2))(w)
    say(f"typed {meshax.typeof(dw)}")
    H = np.tanh(X @ np.ones((3, 2)))
    check("reduced-weight-grad", meshax.reshard(dw, meshax.P()), X.T @ (2 * H * (1 - H ** 2)))
