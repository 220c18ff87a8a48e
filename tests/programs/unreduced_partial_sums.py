"""Unreduced arrays whose partial sums live on devices of several processes: placed from the host (the
group's first device holds the value, the others zeros), summed by resharding (an all-reduce across the
processes), added and contracted with an unreduced result. Every check runs; each prints CHECK name or FAIL."""
import numpy as np

import meshax
import meshax.numpy as jnp
from arr_common import init, ok, say
from meshax.sharding import AxisType

init()
here, count = meshax.process_index(), meshax.process_count()
local = meshax.local_device_count()
mesh = meshax.make_mesh((count, local), ("X", "Y"), axis_types=(AxisType.Explicit,) * 2)  # X across processes
x = np.arange(float(4 * count * local * 2)).reshape(2 * count * local, 4)


def check(name, got, expected):
    try:
        np.testing.assert_allclose(np.asarray(got), expected)
    except AssertionError as error:
        say(f"FAIL {name}: " + " ".join(str(error).split()))
    else:
        ok(name)


with meshax.set_mesh(mesh):
    y = meshax.device_put(x, meshax.P(None, None, unreduced={"X"}))
    for shard in y.addressable_shards:  # this process's X coordinate is its index: only process 0 holds x
        check(f"placed-{shard.device.id}", shard.data, x if here == 0 else np.zeros_like(x))
    check("summed", meshax.reshard(y, meshax.P()), x)
    check("read", y, x)
    doubled = meshax.jit(lambda v: v + v)(y)
    check("doubled-sum", meshax.reshard(doubled.sum(0), meshax.P()), 2 * x.sum(0))
    a = meshax.device_put(x.T, meshax.P(None, "X"))
    b = meshax.device_put(x, meshax.P("X", None))
    c = jnp.dot(a, b, out_sharding=meshax.P(None, None, unreduced={"X"}))
    rows = x.shape[0] // count
    part = x[here * rows:(here + 1) * rows]
    for shard in c.addressable_shards:  # each process's partial product of its rows
        check(f"partial-{shard.device.id}", shard.data, part.T @ part)
    check("product", meshax.reshard(c, meshax.P("Y", None)), x.T @ x)
    say(f"typed {meshax.typeof(c)}")
