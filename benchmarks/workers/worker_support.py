"""What every benchmark worker needs: a time budget it cannot outlive, and the meshax/JAX backend it runs."""
from __future__ import annotations

import argparse
import os
import sys
import threading
from typing import Any

import numpy as np


def start_watchdog(budget: float, who: str) -> None:
    """Kill this process (exit status 3) if it outlives `budget` seconds."""
    def expire() -> None:
        print(f"{who}: time budget of {budget:g} s exceeded", file=sys.stderr, flush=True)
        os._exit(3)

    timer = threading.Timer(budget, expire)
    timer.daemon = True
    timer.start()


class Backend:
    """What differs between meshax and JAX: import, start-up, barrier, broadcast of a flag."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.name = args.backend
        if self.name == "meshax":
            import meshax as jax
            import meshax.numpy as jnp
            from meshax.sharding import AxisType, Mesh, NamedSharding, PartitionSpec

            if args.address:
                jax.distributed.initialize(args.address, args.processes, args.process_id)
            else:
                jax.distributed.initialize()  # From the launcher's MESHAX_* variables.
        else:
            import jax
            import jax.numpy as jnp
            from jax.sharding import AxisType, Mesh, NamedSharding, PartitionSpec

            if args.processes > 1:
                jax.distributed.initialize(args.address, args.processes, args.process_id,
                                           initialization_timeout=120)
        self.jax, self.jnp = jax, jnp
        self.AxisType, self.Mesh, self.NamedSharding, self.P = AxisType, Mesh, NamedSharding, PartitionSpec
        self.rank = jax.process_index()
        self.size = jax.process_count()
        self._world = None
        if self.name == "meshax" and self.size > 1:
            from meshax._src.runtime.distributed import runtime

            self._world = runtime().world
        self._barriers = 0

    @property
    def world(self) -> Any:
        """meshax's MPI world communicator (None for one process or JAX)."""
        return self._world

    def barrier(self) -> None:
        if self.size == 1:
            return
        if self._world is not None:
            self._world.Barrier()
        else:
            from jax.experimental import multihost_utils

            self._barriers += 1
            multihost_utils.sync_global_devices(f"bench_{self._barriers}")

    def settle(self, timeout: float = 120.0) -> None:
        """Wait until meshax's kernels for what has run so far are compiled (they compile in the background,
        the clusters running as NumPy calls meanwhile), as JAX's first steps compile before returning."""
        if self.name == "meshax":
            from meshax._src.interpreters import fusion

            fusion.EXECUTORS["cpu"].numba.compiler.wait(timeout)

    def decide(self, flag: bool) -> bool:
        """Process 0's flag, on every process."""
        if self.size == 1:
            return flag
        if self._world is not None:
            return bool(self._world.bcast(flag, root=0))
        from jax.experimental import multihost_utils

        return bool(multihost_utils.broadcast_one_to_all(np.int32(flag)))
