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

from . import auth, job_token, losses, progress, recovery, watch
from .wire import LineSocket

FAILURE_EXIT_CODE = 1
WATCH_TICK = 0.25  # seconds between looks at the current communication
PROBE_AFTER = 2.0  # a communication waiting this long makes the coordinator survey every process
PROBE_EVERY = 2.5  # and again this often while it lasts
STILL_WAITING_EVERY = float(os.environ.get("MESHAX_STILL_WAITING_SECONDS", 10))  # between "still waiting" lines
COORDINATOR_QUIET = 5.0  # seconds without a ping after which a "still waiting" line names the coordinator
DESYNC_REPORT_WAIT = 10.0  # how long a process that found a desync waits for the coordinator's verdict
SUSPENDED_AFTER = 10.0  # seconds between two watch ticks that mean this process itself was suspended (or half
# the heartbeat timeout, if shorter: it must be noticed before the coordinator is blamed)
MPI_NUDGE_FIRST, MPI_NUDGE_MAX = 1e-4, 5e-3  # seconds between nudges of MPI while a request waits (doubling)
PEER_FAILURE_EXIT_CODE = 70  # this process stopped because the job failed elsewhere (the report says where)


class CoordinatorError(RuntimeError):
    """A request to the coordinator failed; the message says why and who is missing."""


def report_cannot_join(address: str, token: bytes, report: dict[str, Any], timeout: float) -> bool:
    """Tell the coordinator at `address` that a process cannot join the job (`report`: its `reason`, and `who`
    or `hostname` and `pid`); the coordinator then ends the start-up of every process. Only a process knowing
    the job `token` can. Best effort, within about `timeout` s: whether the coordinator acknowledged it."""
    try:
        sock = auth.connect(address, token, "report", 0, timeout)
    except Exception:  # noqa: BLE001 - no coordinator, another token, a bad address: nobody to tell
        return False
    conn = LineSocket(sock)
    sock.settimeout(timeout)
    conn.write_message({"op": "cannot_join", **report})
    acknowledged = conn.read_line() is not None
    conn.close()
    return acknowledged


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
                 on_failure: Callable[[str], None] = exit_with_failure, collective_timeout: float = 300.0,
                 token: bytes | None = None) -> None:
        self.address = address
        self._token = token  # the job token (job_token.py's when None)
        self.collective_timeout = collective_timeout
        self._reported_stuck: int | None = None
        self._watched: int | None = None  # the communication the watchdog looks at, and when it did what
        self._probed = self._printed = 0.0
        self._busy_peers = ""
        self.process_id = process_id
        self.num_processes = 1
        self.heartbeat_timeout = heartbeat_timeout
        self.heartbeat_interval = max(0.2, min(10.0, heartbeat_timeout / 5, collective_timeout / 5))
        self._on_failure = on_failure
        self._conn: LineSocket | None = None
        self._rids = itertools.count(1)
        self._pending: dict[int, dict[str, Any] | None] = {}
        self._cond = threading.Condition()
        self._last_heard = time.monotonic()
        self._closing = False
        self._joined = False  # whether every process has registered
        self.rejoined = False
        # called while a request waits: MPI's transfers to other hosts move only while their sender calls into
        # MPI (libfabric's TCP provider), and the peers of a collective this process has left may still need its
        # part while it waits here (in a barrier, at live_devices)
        self.nudge_mpi: Callable[[], None] | None = None
        self._lost_peers: list[str] = []  # processes the coordinator said were lost (its notice may not follow)

    # ---- connecting -------------------------------------------------------------------

    def connect(self, timeout: float) -> None:
        """Connect and authenticate, retrying while the coordinator is not up yet, for at most `timeout` s."""
        token = self._token if self._token is not None else job_token.job_token()
        self._conn = LineSocket(auth.connect(self.address, token, "control", self.process_id, timeout))
        self._start_threads()

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
        pause = MPI_NUDGE_FIRST
        with self._cond:
            while self._pending[rid] is None:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    del self._pending[rid]
                    raise CoordinatorError(f"the coordinator did not answer {op!r} within {wait:g} s.")
                if self.nudge_mpi is None:
                    self._cond.wait(left if left is None else min(left, 1.0))
                    continue
                self._cond.wait(pause if left is None else min(left, pause))
                self.nudge_mpi()
                pause = min(MPI_NUDGE_MAX, pause * 2)
            reply = self._pending.pop(rid)
        if "error" in reply:
            raise CoordinatorError(reply["error"])
        return reply

    def send(self, op: str, **fields: Any) -> None:
        """Send a message that needs no answer."""
        if self._conn is not None:
            self._conn.write_message({"op": op, "process_id": self.process_id, **fields})

    def register(self, num_processes: int, info: dict[str, Any], timeout: float,
                 recoverable: bool = False) -> list[dict[str, Any]]:
        """Register this process and wait until all `num_processes` have; returns their tables. `recoverable`: this
        process asks for a job that survives losses (every process must)."""
        self.num_processes = num_processes
        reply = self.request(
            "register", wait=timeout + 30, num_processes=num_processes, hostname=socket.gethostname(),
            pid=os.getpid(), info=info, timeout=timeout, recoverable=recoverable, incarnation=recovery.INCARNATION,
        )
        self._joined = True
        self.rejoined = bool(reply.get("rejoined"))  # readmitted after dying, into a job that survives losses
        return reply["processes"]

    def barrier(self, name: str, timeout: float, participants: list[int] | None = None, what: str = "") -> None:
        """Wait until every participant (all processes by default) reaches barrier `name`; `what` describes the
        wait to the watchdog."""
        ranks = range(self.num_processes) if participants is None else sorted(participants)
        with watch.communicating(what or f"barrier {name!r}", ranks, entry=f"barrier {name!r}"):
            self.request("barrier", wait=timeout + 30, name=name, participants=participants, timeout=timeout)

    def live(self, ids: list[int], timeout: float) -> tuple[dict[int, int], list[int]]:
        """JAX's live-processes call: wait until every live process among `ids` has called it too; the live ones
        of `ids` with their incarnations, and those readmitted since the last call, the same on every one."""
        reply = self.request("live", wait=timeout + 30, ids=list(ids), timeout=timeout)
        return {int(i): int(n) for i, n in reply["live"]}, [int(i) for i in reply["fresh"]]

    def key_value_set(self, key: str, value: str) -> None:
        self.request("kv_set", wait=60, key=key, value=value)

    def key_value_get(self, key: str, timeout: float) -> str:
        """The value of `key`, waiting up to `timeout` s for some process to set it."""
        with watch.communicating(f"waiting for key {key!r} of the key-value store"):
            return self.request("kv_get", wait=timeout + 30, key=key, timeout=timeout)["value"]

    def key_value_try_get(self, key: str) -> str | None:
        return self.request("kv_get", wait=60, key=key, timeout=0)["value"]

    @property
    def lost_peers(self) -> list[str]:
        """The processes the coordinator said were lost, in the order it said so."""
        return list(self._lost_peers)

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
            elif event == "peer_lost" and message.get("recoverable"):  # the job goes on without it
                recovery.note_lost(int(message["process_id"]), str(message.get("name")), str(message.get("why")))
                self._say(f"goes on without {message.get('name')}, which {message.get('why')}")
            elif event == "peer_lost":  # the failure notice follows once the coordinator has gathered the dead
                progress.halted.set()
                self._lost_peers.append(str(message.get("name", "a process")))
            elif event == "report_state":
                self._conn.write_message({"op": "state", "process_id": self.process_id,
                                          "token": message["token"], "state": watch.state()})
            elif event == "waiting_for":
                self._busy_peers = message.get("busy", "")
            elif event == "still_registering":
                notes = "; ".join(str(note) for note in message.get("notes") or ())
                self._say(f"still waiting for processes {message.get('missing')} to start and connect to the "
                          f"coordinator at {self.address}" + (f" ({notes})" if notes else ""))
            elif event is None:
                with self._cond:
                    if message.get("rid") in self._pending:
                        self._pending[message["rid"]] = message
                        self._cond.notify_all()

    def _heartbeat_loop(self) -> None:
        """Every tick: watch the current communication; every heartbeat interval: tell the coordinator we live."""
        next_beat = time.monotonic() + self.heartbeat_interval
        last_tick = time.monotonic()
        suspended_after = min(SUSPENDED_AFTER, self.heartbeat_timeout / 2)
        while not self._closing:
            time.sleep(WATCH_TICK)
            if self._closing or self._conn is None:
                return
            now = time.monotonic()
            if now - last_tick > suspended_after:
                self._resumed(now - last_tick)
            last_tick = now
            self._watch_communication(now)
            if now < next_beat:
                continue
            next_beat = now + self.heartbeat_interval
            self._conn.write_message({"op": "heartbeat"})
            silent = now - self._last_heard
            if silent > self.heartbeat_timeout and not self._closing:
                self._on_failure(
                    f"process 0 (the coordinator at {self.address}) stopped answering: nothing heard for "
                    f"{silent:.0f} s (heartbeat_timeout_seconds={self.heartbeat_timeout:g})."
                )
                return

    def _resumed(self, suspended: float) -> None:
        """This process itself was suspended (SIGSTOP, a frozen VM) for `suspended` s: the coordinator's silence
        meanwhile is not its fault. Let the reader take what arrived meanwhile (a failure naming this process,
        if the job gave up on it) before judging the coordinator again."""
        self._last_heard = time.monotonic()
        self._say(f"was suspended for {suspended:.0f} s (SIGSTOP, or a frozen machine) and resumes")

    def _watch_communication(self, now: float) -> None:
        """The collective watchdog. A communication that waits PROBE_AFTER s makes the coordinator survey every
        process (a desync or deadlock fails the job within seconds); one that waits longer prints a line every
        STILL_WAITING_EVERY s naming who it waits for; one that waits collective_timeout fails the job."""
        activity = watch.current()
        if activity is None or activity.sequence == self._reported_stuck:
            return
        waited = now - activity.started
        if activity.sequence != self._watched:
            self._watched, self._probed, self._printed, self._busy_peers = activity.sequence, 0.0, 0.0, ""
        if waited > self.collective_timeout:
            self._reported_stuck = activity.sequence
            self.send("stuck", state=watch.state(now), timeout=self.collective_timeout)
            return
        if waited >= PROBE_AFTER and now - self._probed >= PROBE_EVERY:
            self._probed = now
            self.send("probe", state=watch.state(now))
        if waited >= STILL_WAITING_EVERY and now - self._printed >= STILL_WAITING_EVERY:
            self._printed = now
            quiet = now - self._last_heard  # the coordinator pings several times a second
            if quiet > COORDINATOR_QUIET:
                peers = f" for process 0 (the coordinator), which has not answered for {quiet:.0f} s (stopped?),"
            else:
                peers = f" for {self._busy_peers}" if self._busy_peers else ""
            self._say(f"still waiting{peers} {activity.describe(now)}")

    def _say(self, text: str) -> None:
        """One line on stderr about this process."""
        os.write(2, f"meshax: process {self.process_id} {text}\n".encode("utf-8", errors="replace"))

    def report_desync(self, detail: str) -> None:
        """This process found in-band that processes disagree: have the coordinator survey everyone and fail the
        job with what each process is doing; returns only if that did not happen within a few seconds."""
        self.send("desync", state=dict(watch.state(), detail=detail))
        deadline = time.monotonic() + DESYNC_REPORT_WAIT
        while time.monotonic() < deadline and not self._closing:
            time.sleep(0.05)

    def _lost_coordinator(self) -> None:
        if self._closing:
            return
        if not self._joined:
            self._on_failure(f"the coordinator at {self.address} closed the connection during start-up: process 0 "
                             "ended the start-up (its output says why) or died.")
        elif self._lost_peers:  # process 0 went down after others: name those first, they went first
            self._on_failure(f"{losses.died(self._lost_peers)} Then the coordinator at {self.address} (process 0) "
                             "was lost too.")
        else:
            self._on_failure(f"lost the connection to the coordinator at {self.address}: process 0 died or was killed.")
