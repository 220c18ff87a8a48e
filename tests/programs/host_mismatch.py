"""Args: address id. Process 1 passes host data of another shape to device_put: every process raises."""
import sys

import numpy as np

import meshax
from meshax.sharding import NamedSharding, PartitionSpec as P

meshax.distributed.initialize(sys.argv[1], 3, int(sys.argv[2]))
rows = 6 if meshax.process_index() == 1 else 3
mesh = meshax.make_mesh((meshax.device_count(),), ("x",))
meshax.device_put(np.zeros((rows, 4)), NamedSharding(mesh, P("x")))
print("FINISHED", flush=True)
