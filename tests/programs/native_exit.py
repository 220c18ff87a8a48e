"""Args: address id n mode [witness]. Every process initialises; then process `witness` (default 1) ends through the C library's exit(1), as
MPICH does on an internal assertion (mode "alone"), or does so just after process 2 was SIGKILLed (mode
"after_death", as when MPICH's transport asserts on the dead peer's connection) while the others wait in a
barrier (before the coordinator can say so); mode "normal" ends every process normally (the handler must stay quiet then)."""
import ctypes
import os
import signal
import sys
import time

import meshax
from meshax._src.runtime.distributed import runtime

mode = sys.argv[4]
witness = int(sys.argv[5]) if len(sys.argv) > 5 else 1
meshax.distributed.initialize(sys.argv[1], int(sys.argv[3]), int(sys.argv[2]), heartbeat_timeout_seconds=10)
group = runtime().process_group(range(meshax.process_count()))
print("READY", flush=True)
me = meshax.process_index()
if mode == "after_death" and me == 2:
    os.kill(os.getpid(), signal.SIGKILL)
if mode in ("alone", "after_death") and me == witness:
    ctypes.CDLL(None).exit(1)
if mode == "normal":
    group.barrier()
    print("NORMAL END", flush=True)
    sys.exit(0)
time.sleep(60)
print("UNEXPECTEDLY PASSED", flush=True)
