"""The desync check's own Python cost per reduction, without MPI or other processes: a steadier number than
bench_desync_check.py's on a loaded machine (it times what the check adds, not the wait for other processes).

Run: python benchmarks/bench_desync_check_python.py
A ProcessGroup of one member over a communicator whose Allreduce does nothing (a sum over one member leaves the
buffer as it is, so the in-band check agrees) reduces what a 2x4 job's psum reduces: 4 local blocks of float32
combined into the reduced buffer. 4 KB blocks take the small path (data and check in one buffer of the checked
size), 8 KB blocks the large one (the check after the data). The check is switched off and on every 50 calls for
200 rounds (both orders); prints the median time per call of each and their difference."""
import statistics
import time

import numpy as np

from meshax._src.arrays.collectives import combine_all
from meshax._src.config import config
from meshax._src.runtime.comm import ProcessGroup


class _NoCommunicator:
    """What ProcessGroup needs of an MPI communicator of one member, doing nothing."""

    def Get_rank(self) -> int:
        return 0

    def Allreduce(self, send: object, receive: object, op: object = None) -> None:
        pass


def measure(elements: int, rounds: int = 200, calls: int = 50) -> tuple[float, float]:
    group = ProcessGroup(_NoCommunicator(), (0,))
    blocks = [np.ones(elements, np.float32) for _ in range(4)]
    dtype = np.dtype(np.float32)

    def fill(flat: np.ndarray) -> None:
        combine_all(blocks, np.add, out=flat)

    times: dict[bool, list[float]] = {False: [], True: []}
    for round_ in range(rounds):
        for check in ((False, True) if round_ % 2 else (True, False)):
            config.update("meshax_check", check)
            group.allreduce_filled((elements,), dtype, "sum", fill)
            start = time.perf_counter()
            for _ in range(calls):
                group.allreduce_filled((elements,), dtype, "sum", fill)
            times[check].append((time.perf_counter() - start) / calls)
    return statistics.median(times[False]), statistics.median(times[True])


for label, elements in (("4 KB", 1024), ("8 KB", 2048)):
    off, on = measure(elements)
    print(f"reduction of {label} (4 local blocks), Python only: check off {off * 1e6:.2f} us, on {on * 1e6:.2f} us, "
          f"the check {(on - off) * 1e9:.0f} ns", flush=True)
