"""A PMI-1 process manager, so that independently started processes form one MPI world.

meshax opens and authenticates a connection to the coordinator for MPICH and hands
it over through PMI_FD (mpi.py); MPICH then speaks PMI-1's `cmd=name key=value` lines
on it, which this module answers as the rank the connection authenticated as (facts
in shared/notes/pmi.md).
"""
from __future__ import annotations

import logging
import os
import secrets
import threading
import time
from typing import Callable

from .auth import preview
from .wire import LineSocket, LineTooLong

logger = logging.getLogger("meshax")

def parse_command(line: str) -> dict[str, str]:
    """'cmd=get kvsname=k key=x' -> {'cmd': 'get', 'kvsname': 'k', 'key': 'x'}."""
    fields: dict[str, str] = {}
    for token in line.strip().split(" "):
        key, sep, value = token.partition("=")
        if sep:
            fields[key] = value
    return fields


def process_mapping(hostnames: list[str]) -> str:
    """PMI_process_mapping for ranks placed on `hostnames` (rank i runs on hostnames[i]).

    Each run of consecutive ranks on one host is one `(node, 1, ranks)` block.
    """
    node_ids: dict[str, int] = {}
    blocks: list[tuple[int, int, int]] = []
    for host in hostnames:
        node = node_ids.setdefault(host, len(node_ids))
        if blocks and blocks[-1][0] == node:
            blocks[-1] = (node, 1, blocks[-1][2] + 1)
        else:
            blocks.append((node, 1, 1))
    if len(node_ids) == len(blocks):
        return "(vector," + ",".join(f"({n},{c},{r})" for n, c, r in _merge_uniform(blocks)) + ")"
    return "(vector," + ",".join(f"({n},{c},{r})" for n, c, r in blocks) + ")"


def _merge_uniform(blocks: list[tuple[int, int, int]]) -> list[tuple[int, int, int]]:
    """Merge consecutive nodes that hold the same number of ranks: (0,1,4),(1,1,4) -> (0,2,4)."""
    merged: list[tuple[int, int, int]] = []
    for node, count, ranks in blocks:
        if merged and merged[-1][2] == ranks and merged[-1][0] + merged[-1][1] == node:
            merged[-1] = (merged[-1][0], merged[-1][1] + count, ranks)
        else:
            merged.append((node, count, ranks))
    return merged


def _wait_for_close(conn: LineSocket, timeout: float) -> None:
    """Wait until the client closes its end: only then has it read everything we sent."""
    deadline = time.monotonic() + timeout
    try:
        while conn.read_line(deadline) is not None:
            pass
    except LineTooLong:
        pass


class PmiService:
    """Shared state of the PMI-1 server: the key-value space and the barrier."""

    def __init__(self, size: int, hostnames: Callable[[], list[str] | None], on_abort: Callable[[int, str], None]):
        self.size = size
        self.kvs_name = f"meshax_{os.getpid()}_{secrets.token_hex(4)}"
        self._hostnames = hostnames
        self._on_abort = on_abort
        self._kvs: dict[str, str] = {}
        self._cond = threading.Condition()
        self._barrier_waiting: dict[int, LineSocket] = {}
        self._sessions: dict[int, LineSocket] = {}
        self._ended: set[int] = set()
        self._acknowledged_early: set[int] = set()

    def serve(self, conn: LineSocket, rank: int) -> None:
        """Answer the PMI commands of rank `rank`'s MPI library until it finalizes or disconnects."""
        with self._cond:
            if rank in self._sessions:
                logger.warning("meshax coordinator: dropped a second PMI connection of process %d.", rank)
                return
            self._sessions[rank] = conn
        try:
            self._serve_commands(conn, rank)
        except LineTooLong as error:
            logger.warning("meshax coordinator: closed the PMI connection of process %d: it sent %s.", rank, error)
        with self._cond:
            self._barrier_waiting.pop(rank, None)
            self._ended.add(rank)
            self._cond.notify_all()

    def _serve_commands(self, conn: LineSocket, rank: int) -> None:
        line = conn.read_line()
        while line is not None:
            fields = parse_command(line)
            command = fields.get("cmd", "")
            if command == "initack":  # only sent by MPICH connecting through PMI_PORT, which meshax never uses
                if fields.get("pmiid") != str(rank):
                    logger.warning("meshax coordinator: dropped a PMI initack of process %d claiming to be %s.",
                                   rank, preview(fields.get("pmiid", "")))
                else:
                    self._reply(conn, f"cmd=initack rc=0 rank={rank} size={self.size} appnum=0 debug=0",
                                f"cmd=set size={self.size}", f"cmd=set rank={rank}", "cmd=set debug=0")
            elif command == "finalize":
                with self._cond:
                    early = rank in self._acknowledged_early
                if not early:
                    self._reply(conn, "cmd=finalize_ack rc=0")
                _wait_for_close(conn, timeout=5.0)
                break
            elif command == "abort":
                self._on_abort(rank, fields.get("message", fields.get("exitcode", "MPI_Abort was called")))
                break
            elif command == "barrier_in":
                self._barrier_in(conn, rank)
            else:
                self._reply(conn, self._answer(command, fields, rank))
            line = conn.read_line()

    def acknowledge_finalize_early(self, rank: int) -> None:
        """Answer rank `rank`'s coming PMI finalize before it is asked.

        MPICH finalizes PMI in an exit handler, after the interpreter has frozen
        this server's threads; in process 0 nobody could answer it then.
        """
        with self._cond:
            conn = self._sessions.get(rank)
            self._acknowledged_early.add(rank)
        if conn is not None:
            conn.write_line("cmd=finalize_ack rc=0")

    def wait_ended(self, ranks: set[int], timeout: float) -> set[int]:
        """Wait up to `timeout` s for `ranks` to finalize PMI or disconnect; returns those still connected."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                missing = {r for r in ranks if r in self._sessions and r not in self._ended}
                left = deadline - time.monotonic()
                if not missing or left <= 0:
                    return missing
                self._cond.wait(min(left, 0.2))

    def _answer(self, command: str, fields: dict[str, str], rank: int) -> str:
        if command == "init":
            return "cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=0"
        if command == "get_maxes":
            return "cmd=maxes kvsname_max=256 keylen_max=256 vallen_max=1024 rc=0"
        if command == "get_appnum":
            return "cmd=appnum appnum=0 rc=0"
        if command == "get_my_kvsname":
            return f"cmd=my_kvsname kvsname={self.kvs_name} rc=0"
        if command == "get_universe_size":
            return f"cmd=universe_size size={self.size} rc=0"
        if command == "put":
            with self._cond:
                self._kvs[fields.get("key", "")] = fields.get("value", "")
            return "cmd=put_result rc=0"
        if command == "get":
            value = self._get(fields.get("key", ""))
            if value is None:
                return "cmd=get_result rc=-1 msg=key_not_found"
            return f"cmd=get_result rc=0 value={value}"
        logger.warning("meshax coordinator: dropped an unknown PMI command %s of process %d.", preview(command), rank)
        return f"cmd={command or 'unknown'}_result rc=-1 msg=unsupported_command"

    def _get(self, key: str) -> str | None:
        if key == "PMI_process_mapping":
            hostnames = self._hostnames()
            return process_mapping(hostnames) if hostnames else f"(vector,(0,1,{self.size}))"
        with self._cond:
            return self._kvs.get(key)

    def _barrier_in(self, conn: LineSocket, rank: int) -> None:
        with self._cond:
            self._barrier_waiting[rank] = conn
            if len(self._barrier_waiting) < self.size:
                return
            waiting, self._barrier_waiting = list(self._barrier_waiting.values()), {}
        for member in waiting:
            member.write_line("cmd=barrier_out rc=0")

    @staticmethod
    def _reply(conn: LineSocket, *lines: str) -> None:
        for line in lines:
            conn.write_line(line)
