"""Args: address id n. Initialises through meshax's PMI server and prints
'MPI4PY_LIBMPI|library version and file|rank|size' (test_mpi_library.py)."""
import os
import sys

import meshax
from meshax._src.runtime import mpi

meshax.distributed.initialize(sys.argv[1], int(sys.argv[3]), int(sys.argv[2]), initialization_timeout=60)
world = mpi.mpi_module().COMM_WORLD
print(f"{os.environ.get('MPI4PY_LIBMPI', '')}|{mpi.loaded_library()}|{world.Get_rank()}|{world.Get_size()}",
      flush=True)
