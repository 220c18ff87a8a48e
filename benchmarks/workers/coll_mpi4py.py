"""Plain mpi4py reference worker for bench_collectives.py (see coll_common.py for the loop).

    mpiexec -n N python coll_mpi4py.py --plan JSON --budget S --local-devices K
    python coll_mpi4py.py --plan JSON --budget S --local-devices K        (N = 1: NumPy only, no MPI)

Moves the same bytes as the meshax/JAX programs, by hand. Process p holds the K
blocks of mesh positions pK .. pK+K-1 as one (K, n) array; MPI receive buffers are
allocated once per program (the idiomatic mpi4py way), as is the local sum buffer.

* psum:       sum the K local blocks with NumPy (np.sum(axis=0, out=...)), then
              comm.Allreduce of the one partial sum (N = 1: the local sum only).
* all_gather: comm.Allgather of the process's (K, n) blocks into an (N*K, n) buffer
              (N = 1: one copy of the K blocks into the result buffer).
* ppermute:   ring shift: comm.Sendrecv of the last local block to process p+1 (mod N),
              receiving process p-1's last block as the first; the other K-1 blocks
              shift by one local copy (N = 1: both are local copies).
"""
from __future__ import annotations

import os
import sys
from typing import Any, Callable

import numpy as np

import coll_common as common


def join() -> tuple[Any, int, int]:
    """(communicator or None, rank, size): MPI only under a launcher (PMI in the environment)."""
    if "PMI_RANK" not in os.environ and "PMI_FD" not in os.environ and "PMI_PORT" not in os.environ:
        return None, 0, 1
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    return comm, comm.Get_rank(), comm.Get_size()


def builder(comm: Any, rank: int, size: int, k: int) -> Callable[[str, int], tuple[Callable[[], Any],
                                                                                   Callable[[Any], bool]]]:
    devices = size * k
    first = rank * k

    def build(program: str, count: int) -> tuple[Callable[[], Any], Callable[[Any], bool]]:
        blocks = np.stack([common.block(count, first + j) for j in range(k)])  # (K, n)
        if program == "psum":
            local = np.empty(count, np.float32)
            total = np.empty(count, np.float32)

            def call() -> Any:
                np.sum(blocks, axis=0, out=local)
                if comm is None:
                    return local
                comm.Allreduce(local, total)
                return total

            want = common.expected_psum(count, devices)
            return call, lambda result: common.same(result, want)
        if program == "all_gather":
            gathered = np.empty((devices, count), np.float32)

            def call() -> Any:
                if comm is None:
                    np.copyto(gathered, blocks)
                else:
                    comm.Allgather(blocks, gathered)
                return gathered.reshape(-1)

            want = common.expected_gather(count, devices)
            return call, lambda result: common.same(result, want)
        if program == "ppermute":
            shifted = np.empty((k, count), np.float32)
            after, before = (rank + 1) % size, (rank - 1) % size

            def call() -> Any:
                if comm is None:
                    shifted[0] = blocks[k - 1]
                else:
                    comm.Sendrecv(blocks[k - 1], dest=after, recvbuf=shifted[0], source=before)
                shifted[1:] = blocks[:k - 1]
                return shifted

            def check(result: Any) -> bool:
                return all(common.same(result[j], common.expected_shift(count, first + j, devices)) for j in range(k))

            return call, check
        raise ValueError(program)

    return build


def main() -> None:
    args = common.parse_args("coll_mpi4py")
    common.start_watchdog(args.budget, "coll_mpi4py")
    k = args.local_devices
    comm, rank, size = join()
    if comm is None:
        barrier, decide = (lambda: None), (lambda phase, key: phase)
    else:
        barrier, decide = comm.Barrier, (lambda phase, key: comm.bcast(phase, root=0))
    info = {"thread_level": "none"}
    if comm is not None:
        from mpi4py import MPI

        info["thread_level"] = {MPI.THREAD_SINGLE: "SINGLE", MPI.THREAD_FUNNELED: "FUNNELED",
                                MPI.THREAD_SERIALIZED: "SERIALIZED",
                                MPI.THREAD_MULTIPLE: "MULTIPLE"}.get(MPI.Query_thread(), "?")
    fw = common.Framework("mpi4py", rank, size, k, barrier, decide, builder(comm, rank, size, k), info)
    common.run(fw, args.plan, None)


if __name__ == "__main__":
    sys.exit(main())
