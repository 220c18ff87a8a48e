"""Startup child for bench_startup.py: `python startup_jax.py HOST:PORT PROCESS_ID NUM_PROCESSES`.

Run with JAX_PLATFORMS=cpu. Writes $BENCH_RECORD_DIR/<rank>.json with wall-clock times of:
the first statement, the end of `import jax`, and the return of jax.distributed.initialize().
"""
import time; T_START = time.time()  # noqa: E702 - first statement, before any other import.
import sys

import jax

T_IMPORTED = time.time()

from records import write_record  # noqa: E402 - after the timed imports


def main(address: str, process_id: int, num_processes: int) -> None:
    jax.distributed.initialize(address, num_processes, process_id, initialization_timeout=60)
    t_initialized = time.time()
    rank = process_id
    record = {"rank": rank, "start": T_START, "imported": T_IMPORTED, "initialized": t_initialized}
    write_record(rank, record)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))
