"""Startup child for bench_startup.py, run as `mpiexec -n N python startup_mpi4py.py`.

Plain mpi4py: `from mpi4py import MPI` initialises MPI (MPI_Init_thread) on import.
To report the import and MPI_Init separately, automatic initialisation is switched
off and MPI.Init_thread() is called right after the import, which is what the
import would have done. Writes $BENCH_RECORD_DIR/<rank>.json like the other children.
"""
import time; T_START = time.time()  # noqa: E702 - first statement, before any other import.

import mpi4py

mpi4py.rc.initialize = False
mpi4py.rc.finalize = True
from mpi4py import MPI  # noqa: E402

T_IMPORTED = time.time()

from records import write_record  # noqa: E402 - after the timed imports


def main() -> None:
    MPI.Init_thread()
    t_initialized = time.time()
    rank = MPI.COMM_WORLD.Get_rank()
    record = {"rank": rank, "start": T_START, "imported": T_IMPORTED, "initialized": t_initialized}
    write_record(rank, record)


if __name__ == "__main__":
    main()
