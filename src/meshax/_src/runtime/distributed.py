"""`meshax.distributed`: joining the processes of a job into one system.

initialize() finds out who this process is (arguments, environment, cluster),
starts the coordinator in process 0, registers every process's devices, joins
one MPI world and installs the global device table.
"""
from __future__ import annotations

import atexit
import contextlib
import logging
import os
import socket
import sys
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Iterator, Sequence

from . import devices as device_table
from ..config import config
from . import (channels, cpu_budget, detection, exits, history, job_token, mpi, native_exit, progress, recovery,
               watch)
from .auth import AuthenticationError
from .client import (PEER_FAILURE_EXIT_CODE, CoordinatorClient, CoordinatorError, exit_with_failure,
                     report_cannot_join)
from .coordinator import CoordinatorServer
from .wire import parse_address

if TYPE_CHECKING:  # the data plane needs NumPy, which initialize() does not
    from .comm import ProcessGroup

logger = logging.getLogger("meshax")


@dataclass
class Runtime:
    """The state of an initialised multi-process job, as seen by one process."""

    process_id: int
    num_processes: int
    coordinator_address: str | None
    shutdown_timeout: float
    client: CoordinatorClient | None = None
    server: CoordinatorServer | None = None
    world: Any = None
    communicators: mpi.CommunicatorCache | None = None
    p2p: Any = None
    groups: dict[tuple[int, ...], ProcessGroup] = field(default_factory=dict)
    uncaught: str | None = None
    hosts: list[str | None] = field(default_factory=list)  # each process's machine
    rank_of: dict[int, int] | None = None  # each process's rank in `world` (None: its id) once rejoin.py re-formed it
    rejoining: bool = False  # readmitted after dying: not in the data plane until live_devices joins it (rejoin.py)

    def process_group(self, ranks: Sequence[int]) -> ProcessGroup:
        """The data-plane group of `ranks` in this thread's channel (cached); call it on exactly those
        processes."""
        key = tuple(ranks)
        channel = channels.current()
        groups = self.groups if channel is None else channel.groups
        group = groups.get(key)
        if group is None:
            recovery.check(key, f"communication among processes {list(key)}")
            if self.rejoining:
                raise RuntimeError(f"process {self.process_id} rejoined the job after dying: it communicates only "
                                   "within live_devices(), which joins it to the others' communicators first.")
            communicators = self.communicators if channel is None else channel.communicators
            if communicators is None and channel is not None:
                raise _without_mpi(channel)
            assert communicators is not None, "no MPI in a single-process job"
            from .comm import ProcessGroup

            one_machine = len({self.hosts[rank] for rank in key}) == 1 and None not in self.hosts
            if config.read("jax_enable_recoverability"):  # a member may die while it is made: watch for that
                comm = recovery.watched(lambda: communicators.get(key), key,
                                        f"communication among processes {list(key)}")
            else:
                comm = communicators.get(key)
            group = ProcessGroup(progress.patient(comm), key, one_machine)
            groups[key] = group
        return group

    def use_plane(self, world: Any, communicators: mpi.CommunicatorCache, p2p: Any, rank_of: dict[int, int]) -> None:
        """Communicate through `world` from now on (rejoin.py): the groups made so far are dropped, and none
        counts on shared memory (MPI only shares it within one world)."""
        self.world, self.communicators, self.p2p, self.rank_of = world, communicators, p2p, rank_of
        self.groups.clear()
        self.hosts = [None] * self.num_processes
        self.rejoining = False

    def p2p_ranks(self) -> dict[int, int] | None:
        """Each process's rank in the point-to-point communicator (None: its id)."""
        return self.rank_of if channels.current() is None else None

    def p2p_comm(self) -> Any:
        """The communicator of point-to-point exchanges in this thread's channel."""
        channel = channels.current()
        if channel is not None and channel.p2p is None and self.p2p is not None:
            raise _without_mpi(channel)
        return self.p2p if channel is None else channel.p2p


def _without_mpi(channel: channels.Channel) -> RuntimeError:
    return RuntimeError(f"the side channel {channel.name!r} has no MPI communicators; open it with side_channel() "
                        "on the main thread of every process to communicate over MPI from its thread.")


def side_channel(name: str) -> channels.Channel:
    """The side channel `name` (channels.py) with MPI communicators of its own, for a background thread's
    communication; call it on the main thread of every process, in the same order as their other operations."""
    rt = _runtime
    multi = rt is not None and rt.num_processes > 1 and rt.world is not None
    return channels.open_channel(name, rt.world if multi else None)


_lock = threading.Lock()
_runtime: Runtime | None = None
SIGNAL_GRACE = 0.1  # seconds a process told of a failure waits for a signal sent to the whole job
REPORT_TIMEOUT = 5.0  # seconds a process that cannot join tries to tell the job why


def _refuse_late_recoverability(value: object) -> None:
    if _runtime is not None and _runtime.num_processes > 1 and bool(value) != bool(
            config.read("jax_enable_recoverability")):
        raise RuntimeError("jax_enable_recoverability must be set before jax.distributed.initialize(); this job "
                           "started with it set to {}.".format(bool(config.read("jax_enable_recoverability"))))


config.watch("jax_enable_recoverability", _refuse_late_recoverability)


def live_processes() -> tuple[int, ...]:
    """The job's processes, less those a job that survives losses lost (recovery.py): whom "every process"
    means."""
    rt = _runtime
    if rt is None:
        return (0,)
    lost = recovery.lost()
    return tuple(i for i in range(rt.num_processes) if i not in lost)


def runtime() -> Runtime | None:
    """The running job, or None before initialize() / in a job of one process without it."""
    return _runtime


def is_initialized() -> bool:
    """True between initialize() and shutdown()."""
    return _runtime is not None


def initialize(
    coordinator_address: str | None = None,
    num_processes: int | None = None,
    process_id: int | None = None,
    local_device_ids: int | Sequence[int] | None = None,
    *,
    initialization_timeout: float = 300,
    heartbeat_timeout_seconds: float = 100,
    shutdown_timeout_seconds: float = 300,
    cluster_detection_method: str | None = None,
    collective_timeout_seconds: float | None = None,
) -> None:
    """Join this process to its job; call it once, on every process, before touching devices.

    collective_timeout_seconds (default: meshax.config's meshax_collective_timeout, 300 s, env
    MESHAX_COLLECTIVE_TIMEOUT) bounds any wait in communication: past it, every process reports
    what it is doing and the job fails with that report."""
    global _runtime
    _configure_logging()
    with _lock:
        if _runtime is not None:
            raise RuntimeError("meshax.distributed.initialize should only be called once.")
        if device_table.backend_started():
            raise RuntimeError(
                "meshax.distributed.initialize() must be called before any meshax call that accesses devices "
                "(meshax.devices(), local_devices(), device_count(), creating arrays or running computations); "
                "move it to the start of the program."
            )
        for name, value in (("initialization_timeout", initialization_timeout),
                            ("heartbeat_timeout_seconds", heartbeat_timeout_seconds),
                            ("shutdown_timeout_seconds", shutdown_timeout_seconds)):
            if not isinstance(value, (int, float)) or value <= 0:
                raise ValueError(f"{name}={value!r} must be a positive number of seconds.")
        if collective_timeout_seconds is not None:
            if not isinstance(collective_timeout_seconds, (int, float)) or collective_timeout_seconds <= 0:
                raise ValueError(f"collective_timeout_seconds={collective_timeout_seconds!r} must be a positive "
                                 "number of seconds.")
            config.update("meshax_collective_timeout", float(collective_timeout_seconds))
        if isinstance(local_device_ids, int):
            local_device_ids = [local_device_ids]
        try:
            spec = detection.resolve(coordinator_address, num_processes, process_id,
                                     None if local_device_ids is None else list(local_device_ids),
                                     cluster_detection_method)
        except detection.ProcessIdOutOfRange as error:
            _report_cannot_join(error.coordinator_address, str(error))
            raise ValueError(str(error)) from None
        logger.log(logging.DEBUG if spec.method == "explicit" else logging.INFO, spec.description)
        exits.install(spec.process_id)
        try:
            _runtime = _start(spec, float(initialization_timeout), float(heartbeat_timeout_seconds),
                              float(shutdown_timeout_seconds))
        finally:
            if _runtime is None or _runtime.client is None:
                exits.uninstall()
        exits.attach(_runtime.process_id, _runtime.client, _runtime.server)
        exits.report_native_faults()
        if _runtime.world is not None and _runtime.client is not None:
            native_exit.arm(_runtime.process_id, _runtime.client, bool(config.read("jax_enable_recoverability")))
        atexit.register(shutdown)
        _install_excepthook()


def _report_cannot_join(address: str | None, reason: str) -> None:
    """Tell the job this process meant to join why it cannot, so that the others stop now instead of waiting
    for it until the initialization timeout (an outsider cannot: it takes the job token)."""
    if address is not None:
        try:
            token = job_token.job_token()
        except (OSError, RuntimeError, ValueError):
            return
        report_cannot_join(address, token, {"reason": reason, "hostname": socket.gethostname(), "pid": os.getpid()},
                           REPORT_TIMEOUT)


def _start(spec: detection.ClusterSpec, init_timeout: float, heartbeat_timeout: float,
           shutdown_timeout: float) -> Runtime:
    world = None
    if spec.launcher_pmi:  # mpiexec does not stop the job when a process exits before MPI_Init
        with _deadline(init_timeout, _launcher_start_timed_out(spec, init_timeout)):
            world = mpi.start()
    process_id, num_processes = _identity(spec, world)
    local = device_table.make_local_devices(process_id, spec.local_device_ids)
    if num_processes == 1:
        device_table.install_table(device_table.DeviceTable(0, 1, local))
        return Runtime(0, 1, spec.coordinator_address, shutdown_timeout, world=world)

    token = _job_token(world, process_id)
    address = spec.coordinator_address
    server = None
    if process_id == 0:
        host, port = parse_address(address) if address else (None, _port_from_environment())
        server = CoordinatorServer(port, num_processes, heartbeat_timeout, token=token, bind_host=host,
                                   recoverable=bool(config.read("jax_enable_recoverability")))
        address = address or f"{socket.gethostname()}:{server.port}"
    if spec.launcher_pmi and not spec.coordinator_address:
        address = world.bcast(address, root=0)
    assert address is not None

    try:
        client, tables = _join(address, process_id, num_processes, local, init_timeout, heartbeat_timeout, server,
                               token)
    except BaseException:
        if server is not None:
            server.stop(timeout=2.0)  # let the others read why the job cannot start
        raise
    if client.rejoined:  # readmitted after dying: MPI as a world of its own, joined to the others by live_devices
        world = _start_mpi_with_deadline(address, process_id, num_processes, token, init_timeout, solo=True)
        world.Set_errhandler(mpi.mpi_module().ERRORS_RETURN)
        _share_host(tables, process_id)
        device_table.install_table(device_table.DeviceTable(process_id, num_processes, _devices_from(tables)))
        rt = Runtime(process_id, num_processes, address, shutdown_timeout, client, server, world,
                     hosts=[None] * num_processes, rejoining=True)
        client.nudge_mpi = _nudger(rt)
        return rt
    if world is None:
        world = _start_mpi_with_deadline(address, process_id, num_processes, token, init_timeout)
    _check_world(world, process_id, num_processes)
    world.Set_errhandler(mpi.mpi_module().ERRORS_RETURN)  # a mismatch is an exception to report, not an abort
    _share_host(tables, process_id)
    device_table.install_table(device_table.DeviceTable(process_id, num_processes, _devices_from(tables)))
    rt = Runtime(process_id, num_processes, address, shutdown_timeout, client, server, world,
                 mpi.CommunicatorCache(world), p2p=world.Dup(), hosts=[table.get("hostname") for table in tables])
    with watch.communicating("the end of initialization, waiting for the other processes to join MPI"):
        progress.wait(world.Ibarrier())  # every process leaves with the world formed, its messages delivered
    client.nudge_mpi = _nudger(rt)
    return rt


def _nudger(rt: Runtime) -> Callable[[], None]:
    """Give MPI's progress engine a turn (the coordinator client calls it while it waits): test a receive from
    this process to itself that never comes, which polls every transport. (MPI_Iprobe made MPICH's OFI layer
    assert on a stale peek after a peer's death, in 3 of 20 trials across hosts.)"""
    MPI = mpi.mpi_module()
    never = MPI.COMM_SELF.Irecv(bytearray(1), source=0, tag=_NUDGE_TAG)
    _nudges.append(never)

    def nudge() -> None:
        try:
            never.Test()
        except MPI.Exception:  # a transport error of a lost peer's: the next turn goes on
            pass

    return nudge


_NUDGE_TAG = 32000  # a tag nothing sends on COMM_SELF
_nudges: list[Any] = []  # the pending receives the nudges test, cancelled before MPI_Finalize


def _cancel_nudges() -> None:
    for request in _nudges:
        request.Cancel()
        request.Wait()
    _nudges.clear()


def _launcher_start_timed_out(spec: detection.ClusterSpec, timeout: float) -> str:
    rank = next((os.environ[name] for name in ("PMI_RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID")
                 if name in os.environ), "?")
    return (f"process {rank}: MPI_Init under the MPI launcher did not complete within {timeout:g} s "
            "(initialization_timeout): some process of the job never reached it; it failed or exited before "
            "meshax.distributed.initialize() (see its output), and the launcher did not stop the job.")


@contextlib.contextmanager
def _deadline(timeout: float, message: str) -> Iterator[None]:
    """End the process with `message` if the block takes longer than `timeout` s (it may be stuck in C, in
    MPI_Init, which may have made the job's shared-memory segment already: it is removed)."""

    def give_up() -> None:
        mpi.remove_shared_memory()
        exit_with_failure(message)

    timer = threading.Timer(timeout, give_up)
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()


def _share_host(tables: list[dict[str, Any]], process_id: int) -> None:
    """Tell the CPU budget how many of the job's controllers run on this host, and which one this is."""
    host = socket.gethostname()
    here = [table.get("process_id", i) for i, table in enumerate(tables) if table.get("hostname") == host]
    cpu_budget.share_host(len(here), here.index(process_id) if process_id in here else 0)


def _join(address: str, process_id: int, num_processes: int, local: list[device_table.Device],
          init_timeout: float, heartbeat_timeout: float,
          server: CoordinatorServer | None, token: bytes) -> tuple[CoordinatorClient, list[dict[str, Any]]]:
    """Connect to the coordinator and register; returns the client and every process's table."""
    client = CoordinatorClient(address, process_id, heartbeat_timeout, _failure_handler(server),
                               collective_timeout=config.read("meshax_collective_timeout"), token=token)
    try:
        client.connect(init_timeout)
    except AuthenticationError as error:
        raise RuntimeError(f"meshax.distributed.initialize failed: {error}") from None
    try:
        tables = client.register(num_processes, {"devices": [[d.id, d.local_hardware_id] for d in local]},
                                 timeout=init_timeout, recoverable=bool(config.read("jax_enable_recoverability")))
    except CoordinatorError as error:
        client.close()
        raise RuntimeError(f"meshax.distributed.initialize failed: {error}") from None
    history.reset()
    watch.report_desync = client.report_desync
    return client, tables


def _port_from_environment() -> int:
    """The coordinator port process 0 picks when no address was given: MESHAX_/JAX_COORDINATOR_PORT or any."""
    for name in ("MESHAX_COORDINATOR_PORT", "JAX_COORDINATOR_PORT"):
        if os.environ.get(name, "").isdigit():
            return int(os.environ[name])
    return 0


def _identity(spec: detection.ClusterSpec, world: Any) -> tuple[int, int]:
    """(process_id, num_processes), taken from MPI when a launcher started us."""
    if world is None:
        assert spec.process_id is not None and spec.num_processes is not None
        return spec.process_id, spec.num_processes
    rank, size = world.Get_rank(), world.Get_size()
    if spec.process_id not in (None, rank) or spec.num_processes not in (None, size):
        raise ValueError(
            f"process_id={spec.process_id}, num_processes={spec.num_processes} contradict the MPI launcher, "
            f"which started this process as rank {rank} of {size}; drop the arguments or make them agree."
        )
    return rank, size


def _job_token(world: Any, process_id: int) -> bytes:
    """The job's secret (job_token.py); under an MPI launcher, process 0's, sent to the others over MPI."""
    if world is None:
        return job_token.job_token()
    return world.bcast(job_token.job_token(per_user_file=False) if process_id == 0 else None, root=0)


def _start_mpi_with_deadline(address: str, process_id: int, num_processes: int, token: bytes, timeout: float,
                             solo: bool = False) -> Any:
    """Join the MPI world through our PMI server (`solo`: a world of its own); fail loudly if it takes longer than
    `timeout`."""
    with _deadline(timeout, f"process {process_id}: MPI initialisation through the coordinator's PMI server at "
                            f"{address} did not complete within {timeout:g} s."):
        return mpi.start(address, process_id, num_processes, token, timeout, solo)


def _check_world(world: Any, process_id: int, num_processes: int) -> None:
    if world.Get_size() != num_processes or world.Get_rank() != process_id:
        raise RuntimeError(
            f"MPI started this process as rank {world.Get_rank()} of {world.Get_size()}, but meshax expected "
            f"process {process_id} of {num_processes}: the MPI library it loaded, {mpi.loaded_library()}, did not "
            "join meshax's PMI server, which needs MPICH's (install the mpich wheel beside mpi4py, or set "
            "MPI4PY_LIBMPI to an MPICH libmpi.so.12), and mpi4py must not initialise MPI before "
            "meshax.distributed.initialize."
        )


def _devices_from(tables: list[dict[str, Any]]) -> list[device_table.Device]:
    return [
        device_table.Device(device_id, entry["process_id"], hardware_id)
        for entry in tables
        for device_id, hardware_id in entry["info"]["devices"]
    ]


def _failure_handler(server: CoordinatorServer | None):
    """In process 0, keep the coordinator up a moment so the others hear of the failure too."""

    def on_failure(message: str) -> None:
        if exits.stopping(within=SIGNAL_GRACE):  # stopping on a signal anyway, and saying so itself
            return
        mpi.remove_shared_memory()
        if server is not None:
            server.stop(timeout=2.0)
        exit_with_failure(message, PEER_FAILURE_EXIT_CODE)

    return on_failure


def shutdown() -> None:
    """Leave the job: wait for every process (shutdown_timeout_seconds), finalise MPI, stop the coordinator."""
    global _runtime
    native_exit.disarm()
    with _lock:
        rt, _runtime = _runtime, None
    if rt is None or rt.client is None:
        return
    watch.report_desync = None
    if rt.uncaught is not None:
        _leave_after_error(rt)
        return
    try:
        rt.client.barrier("meshax-shutdown", timeout=rt.shutdown_timeout,
                          what="shutdown, waiting for the other processes to finish")
    except CoordinatorError as error:
        exit_with_failure(f"process {rt.process_id}: shutdown did not complete: {error}")
    rt.client.nudge_mpi = None  # MPI ends here
    _cancel_nudges()
    if rt.rank_of is not None or recovery.lost():  # MPI_Finalize spans every world a merge connected (rejoin.py),
        mpi.remove_shared_memory()  # dead ones too, and crashed in 2 of 15 trials: nothing is left to send anyway
    else:
        mpi.finalize()
    if rt.server is not None:
        rt.server.pmi.acknowledge_finalize_early(rt.process_id)
    rt.client.goodbye(timeout=10)
    if rt.server is not None:
        stragglers = rt.server.stop(timeout=rt.shutdown_timeout)
        if stragglers:
            logger.warning("meshax: processes %s did not leave the job before the coordinator stopped.", stragglers)


def _leave_after_error(rt: Runtime) -> None:
    """Tell the others this process failed, so they stop now instead of waiting for it."""
    assert rt.client is not None
    mpi.remove_shared_memory()
    try:
        rt.client.abort(rt.uncaught)
    except (CoordinatorError, OSError):
        pass
    if rt.server is not None:
        rt.server.stop(timeout=2.0)


def _install_excepthook() -> None:
    previous = sys.excepthook

    def hook(kind, value, tb) -> None:
        rt = _runtime
        if rt is not None:
            innermost = tb
            while innermost is not None and innermost.tb_next is not None:
                innermost = innermost.tb_next
            where = "" if innermost is None else f" at {watch.user_site(innermost.tb_frame)}"
            rt.uncaught = f"uncaught {kind.__name__}: {value}{where}"
        previous(kind, value, tb)

    sys.excepthook = hook


_LOG_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING, "error": logging.ERROR}


def _configure_logging() -> None:
    """meshax logs warnings only, unless MESHAX_LOG=info or debug asks for more (or the program set a level)."""
    if not logger.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(message)s"))
        logger.addHandler(handler)
        logger.propagate = False
    if logger.level == logging.NOTSET:
        logger.setLevel(_log_level(os.environ.get("MESHAX_LOG", "warning")))


def _log_level(name: str) -> int:
    level = _LOG_LEVELS.get(name.strip().lower())
    if level is None:
        raise ValueError(f"MESHAX_LOG={name!r} is not a log level; set it to one of {', '.join(_LOG_LEVELS)}.")
    return level
