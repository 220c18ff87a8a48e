"""`live_devices`: run a block of code atomically on the devices of the live processes (JAX's fault tolerance).

The live processes are agreed through the coordinator's live-processes barrier (membership.py): every live
process among those holding the given devices calls it, and each gets the same live ones with their
incarnations. The block runs on the devices of those; on the way out the barrier is called again: if a
process of the block was lost meanwhile, or died and started again (another incarnation), every process
of the block raises ProcessFailureError (from whatever the block raised), so that either all of them or
none take the `except` branch. The set agreed on the way out is the next block's. A process that died and
was started again is counted again at the next agreement, which first joins it to the others'
communicators (rejoin.py); its arrays start empty.

In a job without `jax_enable_recoverability` a death ends every process, so the live devices are all of
them and the call is a barrier of their processes.
"""
from __future__ import annotations

import contextlib
from typing import Any, Iterator

from ..config import config
from . import distributed, rejoin
from .devices import process_count, process_index


class ProcessFailureError(Exception):
    """Raised by live_devices when processes holding some of its devices failed (`failed_devices`)."""

    def __init__(self, failed_devices: set) -> None:
        self.failed_devices = failed_devices
        super().__init__(f"Devices failed: {failed_devices}")


class _LiveDevices:
    """The context manager `live_devices(devices)`; keeps the live processes agreed at the last block's end."""

    def __init__(self) -> None:
        self._live: dict[int, int] | None = None  # live process -> incarnation

    @contextlib.contextmanager
    def __call__(self, devices: Any) -> Iterator[list[Any]]:
        rt = distributed.runtime()
        if rt is None:
            raise RuntimeError("Distributed JAX not initialized.")
        if not devices:
            raise ValueError("No devices provided.")
        ids = sorted({d.process_index for d in devices})
        if process_index() not in ids:
            raise ValueError("Provided devices do not have any local devices.")
        if rt.client is None or not config.read("jax_enable_recoverability"):
            if process_count() > 1 and rt.client is not None:
                rt.client.barrier("live_devices", timeout=config.read("meshax_collective_timeout"),
                                  participants=ids, what="live_devices, waiting for the other processes")
            yield sorted(devices, key=lambda d: d.id)
            return
        if self._live is None:
            self._live = self._agree(rt, ids)
        before = self._live
        error: BaseException | None = None
        try:
            yield sorted((d for d in devices if d.process_index in before), key=lambda d: d.id)
        except Exception as raised:  # noqa: BLE001 - every process must learn whether all of them got through
            error = raised
        after = self._live = self._agree(rt, ids)
        failed = {d for d in devices
                  if d.process_index in before and after.get(d.process_index) != before[d.process_index]}
        if failed:
            raise ProcessFailureError(failed) from error
        if error is not None:
            raise error

    @staticmethod
    def _agree(rt: Any, ids: list[int]) -> dict[int, int]:
        """The live processes of `ids` with their incarnations, agreed with the others; processes readmitted
        since the last agreement are joined to the data plane first (rejoin.py)."""
        live, fresh = rt.client.live(ids, timeout=config.read("meshax_collective_timeout"))
        if fresh:
            rejoin.reform(rt, live, fresh)
        return live


live_devices = _LiveDevices()
