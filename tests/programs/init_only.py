"""Args: address id n [init_timeout]. Initialises and prints OK: for the error tests."""
import sys

import meshax

timeout = float(sys.argv[4]) if len(sys.argv) > 4 else 300
meshax.distributed.initialize(sys.argv[1], int(sys.argv[3]), int(sys.argv[2]), initialization_timeout=timeout)
print("OK", meshax.process_index(), meshax.device_count(), flush=True)
