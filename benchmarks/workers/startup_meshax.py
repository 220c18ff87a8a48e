"""Startup child for bench_startup.py: `python startup_meshax.py HOST:PORT PROCESS_ID NUM_PROCESSES`.

Writes $BENCH_RECORD_DIR/<rank>.json with wall-clock times (time.time()) of: the first
statement, the end of `import meshax`, and the return of meshax.distributed.initialize().
"""
import time; T_START = time.time()  # noqa: E702 - first statement, before any other import.
import sys

import meshax

T_IMPORTED = time.time()

from records import write_record  # noqa: E402 - after the timed imports


def main(address: str, process_id: int, num_processes: int) -> None:
    meshax.distributed.initialize(address, num_processes, process_id, initialization_timeout=60,
                                  shutdown_timeout_seconds=30)
    t_initialized = time.time()
    rank = process_id
    record = {"rank": rank, "start": T_START, "imported": T_IMPORTED, "initialized": t_initialized}
    write_record(rank, record)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))
