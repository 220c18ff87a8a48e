"""Hypothesis property test run by every process of a job: device_put round trips between random shardings
over random meshes of all devices agree with NumPy. derandomize=True makes every process draw the same
examples in the same order, as SPMD code requires. Prints PROPERTY-OK n."""
import math

import numpy as np
from hypothesis import HealthCheck, given, settings, strategies as st

import meshax
from meshax.sharding import Mesh, NamedSharding, PartitionSpec as P

meshax.distributed.initialize()
DEVICES = meshax.devices()
COUNT = [0]


@st.composite
def shardings(draw):
    n = len(DEVICES)
    factors = [f for f in range(1, n + 1) if n % f == 0]
    first = draw(st.sampled_from(factors))
    shape = (first, n // first)
    order = draw(st.permutations(range(n)))
    size = draw(st.sampled_from([n, n // 2, n // 4 or 1]))
    used = [DEVICES[i] for i in order[:size]]
    shape = (size,) if size != n else shape
    names = ("a", "b")[: len(shape)]
    mesh = Mesh(np.array(used, dtype=object).reshape(shape), names)
    entries = draw(st.lists(st.sampled_from([None, *names]), min_size=0, max_size=2, unique=True))
    return NamedSharding(mesh, P(*entries))


@settings(derandomize=True, max_examples=60, deadline=None, database=None,
          suppress_health_check=list(HealthCheck))
@given(shardings(), shardings(), st.tuples(st.integers(1, 13), st.integers(1, 9)))
def round_trip(source, target, shape):
    value = np.arange(math.prod(shape), dtype=np.float32).reshape(shape)
    moved = meshax.device_put(meshax.device_put(value, source), target)
    for shard in moved.addressable_shards:
        np.testing.assert_array_equal(np.asarray(shard.data), value[shard.index])
    COUNT[0] += 1


round_trip()
print("PROPERTY-OK", COUNT[0], flush=True)
