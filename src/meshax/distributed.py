"""Joining the processes of a multi-controller job: `initialize`, `shutdown`, `is_initialized`."""
from meshax._src.runtime.distributed import initialize, is_initialized, shutdown

__all__ = ["initialize", "is_initialized", "shutdown"]
