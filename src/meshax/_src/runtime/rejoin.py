"""Joining readmitted processes to the data plane of a job that survives losses (jax_enable_recoverability).

MPI cannot add a process to a running world, so a process that died and was started again with its id is
readmitted by the coordinator and starts MPI as a world of its own (mpi.start(solo=True)). At the
live-processes barrier that first names it (live.py), every live process joins it: the processes already
in the data plane accept, over the communicator they share, a connection on a port the lowest of them
opened (its name passed through the coordinator's key-value store), it connects, and both sides merge
into one communicator. Ordered by process id, that becomes the job's data plane: every communicator among
processes is made from it from then on (mpi.CommunicatorCache translating process ids into its ranks),
and every history starts again.
"""
from __future__ import annotations

from typing import Any

from ..config import config
from . import history, recovery
from .mpi import CommunicatorCache, mpi_module
from .watch import communicating


def reform(rt: Any, live: dict[int, int], fresh: list[int]) -> None:
    """Join the readmitted processes `fresh` (among `live`, process -> incarnation) to the data plane of every
    live process; each of them calls this with the same arguments. The MPI calls block: they run watched for
    losses (recovery.watched), and the plane changes only once they all returned."""
    for process in fresh:  # their new incarnations: a loss of one of them now cancels the joining
        recovery.note_back(process)
    try:
        ordered, p2p = recovery.watched(lambda: _merged(rt, live, fresh), sorted(live), f"joining processes {fresh}")
    except BaseException:
        for process in fresh:  # still outside the data plane: communication with them stays cancelled
            recovery.note_lost(process, f"process {process}", "could not be joined to the others' communicators")
        raise
    rank_of = {process: rank for rank, process in enumerate(sorted(live))}
    rt.use_plane(ordered, CommunicatorCache(ordered, rank_of), p2p, rank_of)
    history.reset()


def _merged(rt: Any, live: dict[int, int], fresh: list[int]) -> tuple[Any, Any]:
    """One communicator of the processes in `live`, ranked by process id, made from the data plane's and the
    readmitted processes' own worlds, and a duplicate of it for point-to-point exchanges."""
    MPI = mpi_module()
    timeout = config.read("meshax_collective_timeout")
    me = rt.process_id
    members = [p for p in sorted(live) if p not in fresh]  # processes sharing the data plane now
    with communicating(f"joining processes {fresh} to the job's communicators", sorted(live)):
        base = rt.world if me in fresh else rt.communicators.get(tuple(members))
        for newcomer in fresh:
            key = f"meshax/rejoin/{newcomer}/{live[newcomer]}"
            if me == newcomer:
                port = rt.client.key_value_get(key, timeout=timeout)
                base = base.Connect(port, root=0).Merge(high=True)
            elif me in members:
                port = MPI.Open_port() if base.Get_rank() == 0 else ""
                if port:
                    rt.client.key_value_set(key, port)
                base = base.Accept(port, root=0).Merge(high=False)
                if port:
                    MPI.Close_port(port)
            members.append(newcomer)
        ordered = base.Split(0, me)
        ordered.Set_errhandler(MPI.ERRORS_RETURN)
        return ordered, ordered.Dup()
