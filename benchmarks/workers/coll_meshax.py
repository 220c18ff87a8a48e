"""meshax collective worker for bench_collectives.py (see coll_common.py for the programs and the loop).

    MESHAX_COORDINATOR_ADDRESS=HOST:PORT MESHAX_NUM_PROCESSES=N MESHAX_PROCESS_ID=I MESHAX_NUM_CPU_DEVICES=K \
        python coll_meshax.py --plan JSON --budget S [--profile DIR]

With N > 1 the process calls meshax.distributed.initialize() without arguments (the
job comes from the MESHAX_* variables); with N = 1 it does not initialise at all.
Programs: meshax.jit(meshax.shard_map(f, mesh=make_mesh((D,), ('i',)), in_specs=P('i'),
out_specs=...)) with f = lax.psum(x, 'i') [out P()], lax.all_gather(x, 'i', tiled=True)
[out P()] or lax.ppermute(x, 'i', ring) [out P('i')].
"""
from __future__ import annotations

import os
import sys
from typing import Any, Callable


import coll_common as common
import meshax
from meshax import lax
from meshax.sharding import NamedSharding, PartitionSpec as P


def join() -> tuple[Callable[[], None], Callable[[int | None, str], int]]:
    """Initialise meshax when the job has several processes; returns (barrier, decide)."""
    if int(os.environ.get("MESHAX_NUM_PROCESSES", "1")) <= 1:
        return (lambda: None), (lambda phase, key: phase)
    meshax.distributed.initialize()
    from meshax._src.runtime.distributed import runtime

    rt = runtime()
    world = rt.world if rt is not None else None
    if world is None:
        return (lambda: None), (lambda phase, key: phase)
    return world.Barrier, (lambda phase, key: world.bcast(phase, root=0))


def builder(mesh: Any) -> Callable[[str, int], tuple[Callable[[], Any], Callable[[Any], bool]]]:
    devices = mesh.size
    position = {d: g for g, d in enumerate(mesh.devices.flat)}
    ring = [(g, (g + 1) % devices) for g in range(devices)]
    bodies = {
        "psum": (lambda x: lax.psum(x, "i"), P()),
        "all_gather": (lambda x: lax.all_gather(x, "i", tiled=True), P()),
        "ppermute": (lambda x: lax.ppermute(x, "i", ring), P("i")),
    }

    def build(program: str, count: int) -> tuple[Callable[[], Any], Callable[[Any], bool]]:
        sharding = NamedSharding(mesh, P("i"))
        x = meshax.make_array_from_callback((devices * count,), sharding,
                                            lambda index: common.block(count, index[0].start // count))
        body, out_spec = bodies[program]
        f = meshax.jit(meshax.shard_map(body, mesh=mesh, in_specs=P("i"), out_specs=out_spec,
                                        check_vma=False))  # all_gather results are varying, as in JAX 0.10

        def call() -> Any:
            return meshax.block_until_ready(f(x))

        def check(result: Any) -> bool:
            shards = result.addressable_shards
            if program == "psum":
                want = common.expected_psum(count, devices)
                return bool(shards) and all(common.same(s.data, want) for s in shards)
            if program == "all_gather":
                want = common.expected_gather(count, devices)
                return bool(shards) and all(common.same(s.data, want) for s in shards)
            return bool(shards) and all(
                common.same(s.data, common.expected_shift(count, position[s.device], devices)) for s in shards)

        return call, check

    return build


def main() -> None:
    args = common.parse_args("coll_meshax")
    common.start_watchdog(args.budget, "coll_meshax")
    barrier, decide = join()
    mesh = meshax.make_mesh((meshax.device_count(),), ("i",))
    fw = common.Framework("meshax", meshax.process_index(), meshax.process_count(), meshax.local_device_count(),
                          barrier, decide, builder(mesh), {"version": meshax.__version__})
    common.run(fw, args.plan, args.profile)


if __name__ == "__main__":
    sys.exit(main())
