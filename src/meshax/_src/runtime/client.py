"""A process's connection to the coordinator: requests, heartbeats and failure notices.

A reader thread answers requests and reacts to the coordinator's events; a
heartbeat thread keeps the coordinator informed and watches that it still
answers. When the job fails (a peer died, the coordinator vanished), the process
prints one line naming the cause and exits at once, even if its main thread is
blocked inside MPI.
"""
from __future__ import annotations

import itertools
import os
import socket
import sys
import threading
import time
from typing import Any, Callable

from . import watch
from .wire import LineSocket, parse_address

FAILURE_EXIT_CODE = 1
PEER_FAILURE_EXIT_CODE = 70  # this process stopped because the job failed elsewhere (the report says where)


class CoordinatorError(RuntimeError):
    """A request to the coordinator failed; the message says why and who is missing."""


def exit_with_failure(message: str, code: int = FAILURE_EXIT_CODE) -> None:
    """Print `message` as one line on stderr and end the process immediately with exit code `code`."""
    try:
        sys.stdout.flush()
    except Exception:
        pass
    os.write(2, f"meshax: {message}\n".encode("utf-8", errors="replace"))
    os._exit(code)


class CoordinatorClient:
    """The control-plane connection of process `process_id`."""

    def __init__(self, address: str, process_id: int, heartbeat_timeout: float,
                 on_failure: Callable[[str], None] = exit_with_failure, collective_timeout: float = 300.0) -> None:
        self.address = address
        self.collective_timeout = collective_timeout
        self._reported_stuck: int | None = None
        self.process_id = process_id
        self.heartbeat_timeout = heartbeat_timeout
        self.heartbeat_interval = max(0.2, min(10.0, heartbeat_timeout / 5, collective_timeout / 5))
        self._on_failure = on_failure
        self._conn: LineSocket | None = None
        self._rids = itertools.count(1)
        self._pending: dict[int, dict[str, Any] | None] = {}
        self._cond = threading.Condition()
        self._last_heard = time.monotonic()
        self._closing = False
        self._connect_error: OSError | None = None

    # ---- connecting -------------------------------------------------------------------

    def connect(self, timeout: float) -> None:
        """Connect, retrying while the coordinator is not up yet, for at most `timeout` s."""
        host, port = parse_address(self.address)
        deadline = time.monotonic() + timeout
        last_error: OSError | None = None
        while True:
            try:
                addresses = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
            except socket.gaierror as error:  # e.g. a pod whose DNS name does not exist yet: retry
                addresses, last_error = [], error
            for family, kind, proto, _, sockaddr in addresses:
                if self._try_connect(family, kind, proto, sockaddr, deadline):
                    return
                last_error = self._connect_error
            if time.monotonic() >= deadline:
                raise self._connect_failure(host, timeout, last_error)
            time.sleep(0.05)

    def _try_connect(self, family: int, kind: int, proto: int, sockaddr: Any, deadline: float) -> bool:
        sock = socket.socket(family, kind, proto)
        sock.settimeout(max(0.1, min(2.0, deadline - time.monotonic())))
        try:
            sock.connect(sockaddr)
        except OSError as error:
            sock.close()
            self._connect_error = error
            return False
        sock.settimeout(None)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._conn = LineSocket(sock)
        self._start_threads()
        return True

    def _connect_failure(self, host: str, timeout: float, error: OSError | None) -> Exception:
        if isinstance(error, socket.gaierror):
            return ValueError(
                f"coordinator_address={self.address!r}: host {host!r} cannot be resolved ({error.strerror}) "
                f"after trying for {timeout:g} s; check the address of process 0's machine."
            )
        return TimeoutError(
            f"process {self.process_id} could not reach the coordinator at {self.address} within "
            f"{timeout:g} s ({error}): process 0 never started it there; check the address and "
            "that process 0 is running."
        )

    def _start_threads(self) -> None:
        threading.Thread(target=self._read_loop, name="meshax-client-reader", daemon=True).start()
        threading.Thread(target=self._heartbeat_loop, name="meshax-client-heartbeat", daemon=True).start()

    # ---- requests ------------------------------------------------------------------------

    def request(self, op: str, wait: float | None = None, **fields: Any) -> dict[str, Any]:
        """Send a request and wait for its answer (`wait` s, or forever); errors raise CoordinatorError."""
        assert self._conn is not None, "connect() first"
        rid = next(self._rids)
        with self._cond:
            self._pending[rid] = None
        if not self._conn.write_message({"op": op, "rid": rid, "process_id": self.process_id, **fields}):
            self._lost_coordinator()
        deadline = None if wait is None else time.monotonic() + wait
        with self._cond:
            while self._pending[rid] is None:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    del self._pending[rid]
                    raise CoordinatorError(f"the coordinator did not answer {op!r} within {wait:g} s.")
                self._cond.wait(left if left is None else min(left, 1.0))
            reply = self._pending.pop(rid)
        if "error" in reply:
            raise CoordinatorError(reply["error"])
        return reply

    def send(self, op: str, **fields: Any) -> None:
        """Send a message that needs no answer."""
        if self._conn is not None:
            self._conn.write_message({"op": op, "process_id": self.process_id, **fields})

    def register(self, num_processes: int, info: dict[str, Any], timeout: float) -> list[dict[str, Any]]:
        """Register this process and wait until all `num_processes` have; returns their tables."""
        reply = self.request(
            "register", wait=timeout + 30, num_processes=num_processes, hostname=socket.gethostname(),
            pid=os.getpid(), info=info, timeout=timeout,
        )
        return reply["processes"]

    def barrier(self, name: str, timeout: float, participants: list[int] | None = None) -> None:
        """Wait until every participant (all processes by default) reaches barrier `name`."""
        self.request("barrier", wait=timeout + 30, name=name, participants=participants, timeout=timeout)

    def key_value_set(self, key: str, value: str) -> None:
        self.request("kv_set", wait=60, key=key, value=value)

    def key_value_get(self, key: str, timeout: float) -> str:
        """The value of `key`, waiting up to `timeout` s for some process to set it."""
        return self.request("kv_get", wait=timeout + 30, key=key, timeout=timeout)["value"]

    def key_value_try_get(self, key: str) -> str | None:
        return self.request("kv_get", wait=60, key=key, timeout=0)["value"]

    def abort(self, message: str) -> None:
        """Tell the coordinator this process failed, so the others stop at once."""
        self.request("abort", wait=5, message=message)

    def goodbye(self, timeout: float) -> None:
        """Leave the job cleanly and close the connection."""
        self._closing = True
        try:
            self.request("goodbye", wait=timeout)
        except (CoordinatorError, OSError):
            pass
        self.close()

    def close(self) -> None:
        """Close the connection without telling the coordinator (which then sees this process as gone)."""
        self._closing = True
        if self._conn is not None:
            self._conn.close()

    # ---- background threads -----------------------------------------------------------------

    def _read_loop(self) -> None:
        assert self._conn is not None
        while True:
            message = self._conn.read_message()
            if message is None:
                if not self._closing:
                    self._lost_coordinator()
                return
            self._last_heard = time.monotonic()
            event = message.get("event")
            if event == "failure":
                if not self._closing:
                    self._on_failure(message["message"])
            elif event == "report_state":
                self._conn.write_message({"op": "state", "process_id": self.process_id,
                                          "token": message["token"], "state": watch.describe_process()})
            elif event is None:
                with self._cond:
                    if message.get("rid") in self._pending:
                        self._pending[message["rid"]] = message
                        self._cond.notify_all()

    def _heartbeat_loop(self) -> None:
        while not self._closing:
            time.sleep(self.heartbeat_interval)
            if self._closing or self._conn is None:
                return
            self._conn.write_message({"op": "heartbeat"})
            self._check_communication()
            silent = time.monotonic() - self._last_heard
            if silent > self.heartbeat_timeout and not self._closing:
                self._on_failure(
                    f"process 0 (the coordinator at {self.address}) stopped answering: nothing heard for "
                    f"{silent:.0f} s (heartbeat_timeout_seconds={self.heartbeat_timeout:g})."
                )
                return

    def _check_communication(self) -> None:
        """The collective watchdog: a communication waiting too long makes every process report."""
        activity = watch.current()
        if activity is None or activity.sequence == self._reported_stuck:
            return
        if time.monotonic() - activity.started > self.collective_timeout:
            self._reported_stuck = activity.sequence
            self.send("stuck", state=activity.describe(), timeout=self.collective_timeout)

    def _lost_coordinator(self) -> None:
        if not self._closing:
            self._on_failure(
                f"lost the connection to the coordinator at {self.address}: process 0 died or was killed."
            )
