"""CPU devices and the process-wide device table.

Devices of one process are logical: each is a set of NumPy buffers owned by this
process. A device's id is `process_index * 131072 + local_index`, as JAX numbers
CPU devices across processes.
"""
from __future__ import annotations

import os
import re
import sys
import threading
import warnings
from dataclasses import dataclass
from typing import Any

from ..config import config

DEVICE_ID_STRIDE = 131072


@dataclass(frozen=True)
class DeviceInfo:
    """What a process tells the others about one of its devices."""

    id: int
    process_index: int
    local_hardware_id: int


class Device:
    """One CPU device: a slot for NumPy buffers owned by one process."""

    platform = "cpu"
    device_kind = "cpu"
    client = None

    __slots__ = ("id", "process_index", "local_hardware_id")

    def __init__(self, id: int, process_index: int, local_hardware_id: int) -> None:
        self.id = id
        self.process_index = process_index
        self.local_hardware_id = local_hardware_id

    @property
    def host_id(self) -> int:
        return self.process_index

    @property
    def task_id(self) -> int:
        return self.process_index

    @property
    def is_addressable(self) -> bool:
        """True when this process owns the device."""
        return self.process_index == process_index()

    def __repr__(self) -> str:
        return f"CpuDevice(id={self.id})"

    def __str__(self) -> str:
        return f"TFRT_CPU_{self.id}"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Device) and other.id == self.id

    def __hash__(self) -> int:
        return self.id

    def __call__(self) -> "Device":
        """The device itself, so that older code spelling `array.device()` keeps working."""
        return self

    def __lt__(self, other: "Device") -> bool:
        return self.id < other.id

    def info(self) -> DeviceInfo:
        return DeviceInfo(self.id, self.process_index, self.local_hardware_id)


def local_device_count_from_env() -> int:
    """K from config.update('jax_num_cpu_devices', K), else JAX_NUM_CPU_DEVICES, MESHAX_NUM_CPU_DEVICES or
    XLA_FLAGS; 1 when none is set."""
    chosen = config.read("jax_num_cpu_devices")
    if chosen is not None and int(chosen) >= 0:
        return _positive_count(str(chosen), "config jax_num_cpu_devices")
    for name in ("MESHAX_NUM_CPU_DEVICES", "JAX_NUM_CPU_DEVICES"):
        value = os.environ.get(name)
        if value:
            return _positive_count(value, name)
    match = re.search(r"--xla_force_host_platform_device_count=(\S+)", os.environ.get("XLA_FLAGS", ""))
    if match:
        return _positive_count(match.group(1), "--xla_force_host_platform_device_count in XLA_FLAGS")
    return 1


def _positive_count(text: str, source: str) -> int:
    try:
        count = int(text)
    except ValueError:
        raise ValueError(f"{source}={text!r} is not an integer; set it to the number of CPU devices per process.") from None
    if count < 1:
        raise ValueError(f"{source}={count} must be at least 1.")
    return count


def make_local_devices(process_index: int, local_device_ids: list[int] | None) -> list[Device]:
    """The devices this process owns: K of them, or the hardware ids in `local_device_ids`."""
    hardware_ids = list(range(local_device_count_from_env())) if local_device_ids is None else list(local_device_ids)
    if len(set(hardware_ids)) != len(hardware_ids) or not hardware_ids:
        raise ValueError(f"local_device_ids={local_device_ids!r} must be a non-empty list of distinct integers.")
    return [
        Device(process_index * DEVICE_ID_STRIDE + position, process_index, hardware_id)
        for position, hardware_id in enumerate(hardware_ids)
    ]


class DeviceTable:
    """Every device of the job, known once the backend has started."""

    def __init__(self, process_index: int, process_count: int, devices: list[Device]) -> None:
        self.process_index = process_index
        self.process_count = process_count
        self.devices = sorted(devices, key=lambda d: (d.process_index, d.id))
        self.by_id = {d.id: d for d in self.devices}
        self.local = [d for d in self.devices if d.process_index == process_index]

    def local_devices_of(self, process: int) -> list[Device]:
        return [d for d in self.devices if d.process_index == process]


_lock = threading.Lock()
_table: DeviceTable | None = None


def backend_started() -> bool:
    """True once any device has been accessed (after which initialize() is refused)."""
    return _table is not None


def install_table(table: DeviceTable) -> None:
    """Called by distributed.initialize once every process has registered its devices."""
    global _table
    with _lock:
        if _table is not None:
            raise RuntimeError("The meshax backend is already running; its devices cannot be replaced.")
        _table = table


def started() -> bool:
    """Whether this process's devices exist already (after initialize() or the first use of a device)."""
    return _table is not None


def table() -> DeviceTable:
    """The device table, starting a single-process backend on first use."""
    global _table
    if _table is None:
        with _lock:
            if _table is None:
                _table = DeviceTable(0, 1, make_local_devices(0, None))
                _warn_if_launched_alone(len(_table.local))
    return _table


def _warn_if_launched_alone(local_count: int) -> None:
    """Warn when a launcher started several processes but this one starts alone (no initialize())."""
    from .detection import launched_as

    launched = launched_as()
    if launched is None:
        return
    count, variable = launched
    warnings.warn(
        f"meshax: this process was started as one of {count} processes ({variable}={count}) but used "
        f"devices before meshax.distributed.initialize() was called, so it runs alone on its own "
        f"{local_count} device(s); call meshax.distributed.initialize() (jax.distributed.initialize() "
        "with `import meshax as jax`) at the start of the program, before any array or device is used.",
        UserWarning,
        stacklevel=_stacklevel_outside_meshax(),
    )


def _stacklevel_outside_meshax() -> int:
    """The `stacklevel` that points a warning raised by our caller at the first frame outside meshax."""
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    frame = sys._getframe(2)  # our caller's caller: stacklevel 2 of our caller's warnings.warn
    level = 2
    while frame is not None and frame.f_code.co_filename.startswith(package + os.sep):
        frame, level = frame.f_back, level + 1
    return level


def more_devices_hint(needed: int) -> str:
    """How to give this job `needed` devices: the end of an error about too few of them."""
    t = table()
    per_process = -(-needed // t.process_count)
    return (
        f"give each process {per_process} CPU devices for {needed} in all (this job has {t.process_count} "
        f"process(es) with {len(t.local)} device(s) each): `meshax launch --cpu-devices {per_process} ...`, "
        f"JAX_NUM_CPU_DEVICES={per_process} in every process's environment, or "
        f"jax.config.update('jax_num_cpu_devices', {per_process}) right after `import meshax as jax`"
    )


def _check_backend(backend: Any) -> None:
    """meshax has one backend, 'cpu' (the name JAX gives CPU devices); any other name is an error, as in JAX."""
    if backend is None or backend == "cpu":
        return
    if backend in ("gpu", "cuda", "rocm", "tpu"):
        raise RuntimeError(f"Unknown backend: {backend!r} requested, but meshax runs on CPUs only: the only "
                           "backend is 'cpu'. Call meshax.devices() or meshax.devices('cpu').")
    raise RuntimeError(f"Unknown backend {backend!r}. Available backends are ['cpu'].")


def devices(backend: Any = None) -> list[Device]:
    """All devices of the job, process by process (`backend` may be None or 'cpu')."""
    _check_backend(backend)
    return list(table().devices)


def default_device() -> Device:
    """Where uncommitted values (host values, NumPy inputs of jitted programs) land: `jax_default_device` (set by
    `meshax.default_device(...)` or config.update) when set, else this process's first device."""
    chosen = config.read("jax_default_device")
    if chosen is None or (isinstance(chosen, str) and chosen.lower() == "cpu"):
        return table().local[0]
    if isinstance(chosen, Device) and chosen.is_addressable:
        return chosen
    if isinstance(chosen, Device):
        raise ValueError(f"jax_default_device={chosen!r} belongs to process {chosen.process_index}, not to this "
                         f"process ({process_index()}): use one of this process's devices, meshax.local_devices().")
    raise ValueError(f"jax_default_device={chosen!r} is neither a device nor 'cpu' (meshax has CPU devices only): "
                     "use meshax.local_devices()[i] or 'cpu'.")


def local_devices(process_index: int | None = None, backend: Any = None, host_id: int | None = None) -> list[Device]:
    """The devices of `process_index` (this process by default; `host_id` is its old name)."""
    _check_backend(backend)
    if process_index is None:
        process_index = host_id
    t = table()
    if process_index is None:
        return list(t.local)
    if not 0 <= process_index < t.process_count:
        raise ValueError(f"process_index={process_index} is out of range: this job has {t.process_count} processes.")
    return t.local_devices_of(process_index)


def device_count(backend: Any = None) -> int:
    _check_backend(backend)
    return len(table().devices)


def local_device_count(backend: Any = None) -> int:
    _check_backend(backend)
    return len(table().local)


def process_index() -> int:
    return table().process_index


def process_count() -> int:
    return table().process_count


def _refuse_late_device_count(_value: Any) -> None:
    if started():
        raise RuntimeError("jax_num_cpu_devices config should be updated before backends are initialized i.e. before "
                           "any JAX operation is executed. You should initialize this config immediately after "
                           "`import jax`.")


config.watch("jax_num_cpu_devices", _refuse_late_device_count)
