"""JAX collective worker for bench_collectives.py (see coll_common.py for the programs and the loop).

    JAX_PLATFORMS=cpu JAX_NUM_CPU_DEVICES=K python coll_jax.py --plan JSON --budget S \
        [--address HOST:PORT --process-id I --processes N]

With N > 1 the process calls jax.distributed.initialize(address, N, I) (CPU collectives:
JAX's default, gloo); with N = 1 it does not. Programs: jax.jit(shard_map(f, mesh=
jax.make_mesh((D,), ('i',)), in_specs=P('i'), out_specs=...)) with the same bodies
as coll_meshax.py. Calls are timed until block_until_ready() returns. The barrier
before each call is a compiled psum of one int32 per device (JAX's own collectives);
process 0's decisions go through the coordination service's key-value store. all_gather runs with check_vma=False: JAX
cannot infer that its result is replicated, which out_specs=P() asserts.
"""
from __future__ import annotations

import os
import sys
from typing import Any, Callable

import jax
import numpy as np
from jax.sharding import NamedSharding, PartitionSpec as P

import coll_common as common

try:
    from jax import shard_map as _shard_map

    def shard_map(f: Callable[..., Any], mesh: Any, in_specs: Any, out_specs: Any, check: bool) -> Any:
        return _shard_map(f, mesh=mesh, in_specs=in_specs, out_specs=out_specs, check_vma=check)
except ImportError:  # Older JAX.
    from jax.experimental.shard_map import shard_map as _old_shard_map

    def shard_map(f: Callable[..., Any], mesh: Any, in_specs: Any, out_specs: Any, check: bool) -> Any:
        return _old_shard_map(f, mesh=mesh, in_specs=in_specs, out_specs=out_specs, check_rep=check)

TIMEOUT_MS = 120_000


def join(address: str | None, processes: int, process_id: int) -> Callable[[int | None, str], int]:
    """Initialise JAX's job when it has several processes; returns `decide` (process 0's phase to everyone)."""
    if processes <= 1:
        return lambda phase, key: phase
    jax.distributed.initialize(address, processes, process_id, initialization_timeout=60)
    from jax._src import distributed

    client = distributed.global_state.client

    def decide(phase: int | None, key: str) -> int:
        if phase is not None:
            client.key_value_set(f"coll-phase-{key}", str(phase))
            return phase
        return int(client.blocking_key_value_get(f"coll-phase-{key}", TIMEOUT_MS))

    return decide


def device_barrier(mesh: Any) -> Callable[[], None]:
    """A barrier through JAX's own collectives: a compiled psum of one int32 per device, waited for.

    Processes leave it within one collective's skew, much closer together than after the
    coordination service's wait_at_barrier (a gRPC round trip), which would add its skew to
    the timed calls.
    """
    if jax.process_count() == 1:
        return lambda: None
    if os.environ.get("BENCH_JAX_BARRIER") == "service":  # For comparison: the coordination service's barrier.
        from jax._src import distributed

        client, counter = distributed.global_state.client, [0]

        def service_barrier() -> None:
            counter[0] += 1
            client.wait_at_barrier(f"coll-barrier-{counter[0]}", TIMEOUT_MS)

        return service_barrier
    ones = jax.make_array_from_callback((mesh.size,), NamedSharding(mesh, P("i")),
                                        lambda index: np.ones(1, np.int32))
    total = jax.jit(shard_map(lambda v: jax.lax.psum(v, "i"), mesh=mesh, in_specs=P("i"), out_specs=P(), check=True))

    def barrier() -> None:
        total(ones).block_until_ready()

    return barrier


def builder(mesh: Any) -> Callable[[str, int], tuple[Callable[[], Any], Callable[[Any], bool]]]:
    devices = mesh.size
    position = {d: g for g, d in enumerate(mesh.devices.flat)}
    ring = [(g, (g + 1) % devices) for g in range(devices)]
    # JAX cannot infer that all_gather's result is replicated (check_vma), so out_specs=P() needs the
    # check off there (jax.lax.all_gather_invariant would be the checked spelling); the computation is the same.
    bodies = {
        "psum": (lambda x: jax.lax.psum(x, "i"), P(), True),
        "all_gather": (lambda x: jax.lax.all_gather(x, "i", tiled=True), P(), False),
        "ppermute": (lambda x: jax.lax.ppermute(x, "i", ring), P("i"), True),
    }

    def build(program: str, count: int) -> tuple[Callable[[], Any], Callable[[Any], bool]]:
        sharding = NamedSharding(mesh, P("i"))
        x = jax.make_array_from_callback((devices * count,), sharding,
                                         lambda index: common.block(count, index[0].start // count))
        body, out_spec, check_vma = bodies[program]
        f = jax.jit(shard_map(body, mesh=mesh, in_specs=P("i"), out_specs=out_spec, check=check_vma))

        def call() -> Any:
            return f(x).block_until_ready()

        def check(result: Any) -> bool:
            shards = result.addressable_shards
            if program == "psum":
                want = common.expected_psum(count, devices)
                return bool(shards) and all(common.same(np.asarray(s.data), want) for s in shards)
            if program == "all_gather":
                want = common.expected_gather(count, devices)
                return bool(shards) and all(common.same(np.asarray(s.data), want) for s in shards)
            return bool(shards) and all(
                common.same(np.asarray(s.data), common.expected_shift(count, position[s.device], devices))
                for s in shards)

        return call, check

    return build


def main() -> None:
    args = common.parse_args("coll_jax")
    common.start_watchdog(args.budget, "coll_jax")
    decide = join(args.address, args.processes, args.process_id)
    mesh = jax.make_mesh((jax.device_count(),), ("i",))
    fw = common.Framework("jax", jax.process_index(), jax.process_count(), jax.local_device_count(),
                          device_barrier(mesh), decide, builder(mesh),
                          {"version": jax.__version__,
                           "cpu_collectives": str(jax.config.jax_cpu_collectives_implementation)})
    common.run(fw, args.plan, None)


if __name__ == "__main__":
    sys.exit(main())
