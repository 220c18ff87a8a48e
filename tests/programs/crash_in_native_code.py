"""Args: address id n. Every process initialises; process 1 then faults in native code (a NULL read through
ctypes, as a transport crash would) while the others wait in a barrier."""
import ctypes
import sys

import meshax
from meshax._src.runtime.distributed import runtime

meshax.distributed.initialize(sys.argv[1], int(sys.argv[3]), int(sys.argv[2]), heartbeat_timeout_seconds=10)
group = runtime().process_group(range(meshax.process_count()))
print("READY", flush=True)
if meshax.process_index() == 1:
    ctypes.string_at(0)
group.barrier()
print("UNEXPECTEDLY PASSED", flush=True)
