"""Args: address id n. Prints when initialize() was called and when it returned (wall clock), then OK."""
import sys
import time

import meshax

print(f"CALLED {time.time():.3f}", flush=True)
meshax.distributed.initialize(sys.argv[1], int(sys.argv[3]), int(sys.argv[2]), initialization_timeout=120)
print(f"JOINED {time.time():.3f}", flush=True)
print("OK", meshax.process_index(), meshax.device_count(), flush=True)
