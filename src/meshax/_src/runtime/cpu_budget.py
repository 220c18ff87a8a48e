"""How many compute threads this controller may use (placeholder: every core it may run on)."""
from __future__ import annotations

import os


def compute_threads() -> int:
    """The number of threads a kernel of this controller may use."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - platforms without affinity
        return os.cpu_count() or 1
