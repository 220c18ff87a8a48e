"""(e, g, h) steady.py SECONDS [HEARTBEAT]: allreduce 4 MiB across the job again and again, checking each sum,
until the first process whose SECONDS are up says so (in the last element of the same allreduce, so every
process stops after the same round); prints READY after the first round, then RESULT {"check": "steady"}."""
import sys
import time

import numpy as np

import meshax
from common import init, report, say
from meshax._src.runtime.distributed import runtime

STOP = 1000.0  # added to the last element by a process whose time is up
seconds = float(sys.argv[1])
init(**({"heartbeat_timeout_seconds": float(sys.argv[2])} if len(sys.argv) > 2 else {}))
here, count = meshax.process_index(), meshax.process_count()
group = runtime().process_group(range(count))
mine = np.full(1 << 20, here + 1, np.float32)
want = count * (count + 1) / 2
rounds = 0
end = time.monotonic() + seconds
while True:
    mine[-1] = here + 1 + (STOP if time.monotonic() > end else 0.0)
    total = np.asarray(group.allreduce(mine))
    assert (total[:-1] == want).all(), f"round {rounds}: got {total[:4]}, want {want}"
    assert total[-1] % STOP == want, f"round {rounds}: last element {total[-1]}, want {want} + k * {STOP}"
    rounds += 1
    if rounds == 1:
        say("READY")
    if total[-1] >= STOP:
        break
report(check="steady", rounds=rounds)
