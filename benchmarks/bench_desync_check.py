"""Cost of the desync check (on by default; MESHAX_CHECK=0 turns it off) on a 4 KB psum in shard_map,
4 processes x 2 devices.

Run: python -m meshax launch -n 4 --cpu-devices 2 benchmarks/bench_desync_check.py
Alternates the check off/on in rounds (so both see the same machine load) and prints the median time per
call of each, and the median of the per-round ratios on/off."""
import statistics
import time

import numpy as np

import meshax
from meshax import lax
from meshax._src.config import config
from meshax._src.runtime.distributed import runtime
from meshax.sharding import NamedSharding, PartitionSpec as P

meshax.distributed.initialize()
mesh = meshax.make_mesh((meshax.device_count(),), ("i",))
x = meshax.device_put(np.ones((meshax.device_count(), 1024), np.float32), NamedSharding(mesh, P("i")))
psum = meshax.jit(meshax.shard_map(lambda v: lax.psum(v, "i"), mesh=mesh, in_specs=P("i"), out_specs=P()))
times = {False: [], True: []}
for round_ in range(40):
    for check in ((False, True) if round_ % 2 else (True, False)):  # both orders, in case order matters
        config.update("meshax_check", check)
        runtime().world.Barrier()
        start = time.perf_counter()
        for _ in range(50):
            psum(x)
        times[check].append((time.perf_counter() - start) / 50)
config.update("meshax_check", False)
if meshax.process_index() == 0:
    off, on = statistics.median(times[False]), statistics.median(times[True])
    ratio = statistics.median(b / a for a, b in zip(times[False], times[True]))
    print(f"psum 4 KB per device, 4x2: check off {off * 1e6:.0f} us, on {on * 1e6:.0f} us, "
          f"median per-round ratio on/off {ratio:.3f}")
