"""Starting MPI, with our PMI server or a launcher's, and caching communicators of process subsets."""
from __future__ import annotations

import ctypes
import importlib.metadata
import os
import threading
from typing import Any, Iterable

from . import auth

_PMI_VARIABLES = ("PMI_FD", "PMI_RANK", "PMI_SIZE", "PMI_JOBID", "PMI_PORT", "PMI_ID")


_MPI: Any = None


def mpi_module() -> Any:
    """mpi4py's MPI module, imported (once) without initialising MPI.

    Unless the user chose otherwise (MPIR_CVAR_CH4_NETMOD=ucx), MPICH moves data between hosts through its OFI
    network layer (libfabric), not UCX: measured on namespaced hosts (tests/multihost), a host killed during an
    allreduce made a survivor fault inside UCX's progress (MPI_Test) in 15 of 20 trials, against none in 20 with
    OFI, which returns an error instead; and OFI's TCP path moved 4 MiB allreduces across hosts 2.4x faster.
    Processes on one host exchange through shared memory either way. UCX, where chosen, is told not to hook the
    process's memory calls: installing those hooks when libmpi loads costs about 40 ms per process, and they
    only serve UCX's registration cache for RDMA networks.
    """
    global _MPI
    if _MPI is None:
        os.environ.setdefault("MPIR_CVAR_CH4_NETMOD", "ofi")
        os.environ.setdefault("UCX_MEM_EVENTS", "no")
        import mpi4py

        mpi4py.rc.initialize = False
        mpi4py.rc.finalize = False
        from mpi4py import MPI

        _MPI = MPI
    return _MPI


def start(pmi_address: str | None = None, process_id: int = 0, num_processes: int = 1,
          token: bytes = b"", timeout: float = 300.0, solo: bool = False) -> Any:
    """Initialise MPI and return COMM_WORLD.

    With `pmi_address`, MPI joins the world served by our coordinator's PMI-1 server
    as rank `process_id` of `num_processes`: meshax connects and authenticates with
    `token` (within `timeout` s) and hands the connection to MPICH as PMI_FD, since
    MPICH's own PMI client cannot authenticate; `solo`: as rank 0 of a world of its own
    (a process rejoining a job that survives losses: rejoin.py). Without it, MPI uses
    the launcher's PMI from the environment.
    """
    if pmi_address is not None and _MPI is None:
        prefer_wheel_library()
    MPI = mpi_module()
    if MPI.Is_initialized():
        return MPI.COMM_WORLD
    if pmi_address is not None:
        sock = auth.connect(pmi_address, token, "pmi_solo" if solo else "pmi", process_id, timeout)
        for name in _PMI_VARIABLES:
            os.environ.pop(name, None)
        rank, size = (0, 1) if solo else (process_id, num_processes)
        os.environ.update(PMI_FD=str(sock.detach()), PMI_RANK=str(rank), PMI_SIZE=str(size))
    provided = ctypes.c_int(0)
    code = _library(MPI).MPI_Init_thread(None, None, MPI.THREAD_MULTIPLE, ctypes.byref(provided))
    if pmi_address is not None:  # read by now; a child process must not take them for an mpiexec launch
        for name in ("PMI_FD", "PMI_RANK", "PMI_SIZE"):
            os.environ.pop(name, None)
    if code != 0:
        raise RuntimeError(f"MPI_Init_thread failed with error code {code}.")
    _job_segments.update(mapped_shared_memory())
    return MPI.COMM_WORLD


def prefer_wheel_library() -> None:
    """Have mpi4py load the mpich wheel's libmpi, where the user named no library: our PMI server speaks MPICH's
    PMI-1, and mpi4py 4.1 otherwise loads the first MPI it finds, which can be another on the machine where the
    wheel's files are not under sys.prefix (seen with `pip install --target`: every process rank 0 of 1)."""
    if os.environ.get("MPI4PY_LIBMPI") or os.environ.get("MPI4PY_MPIABI"):
        return
    library = wheel_library()
    if library is not None:
        os.environ["MPI4PY_LIBMPI"] = library


def wheel_library() -> str | None:
    """The libmpi.so.12 that the mpich wheel installed in this environment, if it did."""
    try:
        distribution = importlib.metadata.distribution("mpich")
    except importlib.metadata.PackageNotFoundError:
        return None
    for file in distribution.files or ():
        if file.name == "libmpi.so.12":
            path = os.path.realpath(str(distribution.locate_file(file)))
            if os.path.isfile(path):
                return path
    return None


def loaded_library() -> str:
    """The MPI library this process runs: its version's first line and its file (for messages)."""
    version = " ".join(mpi_module().Get_library_version().strip().splitlines()[0].split())
    try:
        with open("/proc/self/maps") as maps:
            files = {line.split()[-1] for line in maps if "/libmpi" in line}
    except OSError:
        files = set()
    return f"{version} ({', '.join(sorted(files)) or 'file unknown'})"


_SHM_DIRECTORY = "/dev/shm"
_job_segments: set[str] = set()


def mapped_shared_memory() -> set[str]:
    """The names of the MPICH segments in /dev/shm that this process maps (so: its job's), still linked."""
    try:
        with open("/proc/self/maps") as maps:
            lines = maps.read().splitlines()
    except OSError:
        return set()
    prefix = os.path.join(_SHM_DIRECTORY, "mpich_shm_")
    return {os.path.basename(line.split()[-1]) for line in lines
            if prefix in line and not line.endswith("(deleted)")}


def remove_shared_memory() -> None:
    """Unlink the MPICH shared-memory segments this job created; for exits that skip MPI_Finalize.

    Processes that have the segment mapped keep it; only the name goes, so a
    failed job leaves nothing behind in /dev/shm. Safe to call from any thread.
    """
    for name in _job_segments | mapped_shared_memory():
        try:
            os.unlink(os.path.join(_SHM_DIRECTORY, name))
        except OSError:
            pass


def finalize() -> None:
    MPI = mpi_module()
    if MPI.Is_initialized() and not MPI.Is_finalized():
        _library(MPI).MPI_Finalize()


def _library(MPI: Any) -> ctypes.CDLL:
    """libmpi through ctypes, whose calls release the GIL.

    MPI_Init and MPI_Finalize talk to the PMI server, which in process 0 is a thread
    of this very process: calling them with the GIL held (as mpi4py does) would
    deadlock it.
    """
    return ctypes.CDLL(MPI.__file__)


def write_control_variable(name: str, value: int) -> int | None:
    """Set MPICH's integer control variable `name` (an MPIR_CVAR_*) to `value` in this running MPI, through the
    MPI tool interface; its previous value, or None where MPI refused."""
    lib = _library(mpi_module())
    provided, index, count, handle, old = (ctypes.c_int(0), ctypes.c_int(-1), ctypes.c_int(0), ctypes.c_void_p(),
                                           ctypes.c_int(0))
    if lib.MPI_T_init_thread(mpi_module().THREAD_MULTIPLE, ctypes.byref(provided)) != 0:
        return None
    try:
        if (lib.MPI_T_cvar_get_index(name.encode(), ctypes.byref(index)) != 0
                or lib.MPI_T_cvar_handle_alloc(index, None, ctypes.byref(handle), ctypes.byref(count)) != 0):
            return None
        try:
            ok = count.value == 1 and lib.MPI_T_cvar_read(handle, ctypes.byref(old)) == 0 \
                and lib.MPI_T_cvar_write(handle, ctypes.byref(ctypes.c_int(value))) == 0
            return old.value if ok else None
        finally:
            lib.MPI_T_cvar_handle_free(ctypes.byref(handle))
    finally:
        lib.MPI_T_finalize()


class CommunicatorCache:
    """Communicators over subsets of the world's ranks, created once among their members only."""

    def __init__(self, world: Any, rank_of: dict[int, int] | None = None) -> None:
        """`rank_of`: each process's rank in `world` (None: its process id is its rank)."""
        self.world = world
        self.rank_of = rank_of
        members = tuple(range(world.Get_size())) if rank_of is None else tuple(sorted(rank_of, key=rank_of.get))
        self._cache: dict[tuple[int, ...], Any] = {members: world}
        self._lock = threading.Lock()

    def get(self, ranks: Iterable[int]) -> Any:
        """The communicator of processes `ranks` (in that order); only those processes may call this for them."""
        key = tuple(ranks)
        with self._lock:
            comm = self._cache.get(key)
        if comm is not None:
            return comm
        group = self.world.Get_group().Incl([p if self.rank_of is None else self.rank_of[p] for p in key])
        comm = self.world.Create_group(group, tag=_tag_for(key))
        group.Free()
        with self._lock:
            self._cache[key] = comm
        return comm


def _tag_for(ranks: tuple[int, ...]) -> int:
    """A tag that keeps concurrent creations of different subsets apart."""
    return (hash(ranks) & 0x3FFF) + 1
