"""Single-process tests see 8 CPU devices, as in the seeds' notebook; multi-process tests set their own."""
import os
import re
import signal
import sys
from pathlib import Path

import pytest

os.environ.setdefault("MESHAX_NUM_CPU_DEVICES", "8")
os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
sys.path.insert(0, str(Path(__file__).parent))
# A shell without job control starts background commands with SIGINT ignored, and processes inherit that:
# the tests' jobs must start with SIGINT's default, as a program started from a terminal does.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

_STARTS_PROCESSES = re.compile(r"\bsubprocess\b|^from multiprocess import|^import multiprocess|\blaunch\(", re.M)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark `processes` every test of a module that starts processes: their time bounds assume the machine's
    cores are theirs, so scripts/test.sh runs them one at a time after the others ran in parallel."""
    starts: dict[Path, bool] = {}
    for item in items:
        path = Path(item.path)
        if path not in starts:
            starts[path] = bool(_STARTS_PROCESSES.search(path.read_text()))
        if starts[path]:
            item.add_marker(pytest.mark.processes)
