"""Args: address id. Process 1 reduces an array of another shape: the job fails, naming every process's operation."""
import sys, numpy as np, meshax
from meshax._src.runtime.distributed import runtime
meshax.distributed.initialize(sys.argv[1], 3, int(sys.argv[2]))
g = runtime().process_group(range(3))
n = 4 if meshax.process_index() != 1 else 5
g.allreduce(np.ones(n, np.float32))
