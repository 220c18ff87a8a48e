"""The coordinator: a thread in process 0 serving the job's control plane.

One TCP connection per process: registration (with each process's device table), a key-value store and
barriers (rendezvous.py), heartbeats. A connection that closes without a goodbye, or stays silent past the
heartbeat timeout, is a dead process: every other process is told at once (in a job that survives losses,
membership.py, the others go on). On the same port it serves PMI-1 (pmi.py). Connections act only once
authenticated (listener.py), as the process they authenticated as; malformed requests are logged and dropped.

Start-up failures end the job only when the job can know they are its own (it knows the job token): a bad
count or id, an id claimed twice, a report that it cannot join (distributed.py), a death before every
process joined. A control connection refused for a wrong token claims an id (sent in clear) but could come
from an outsider, so it is only remembered: the "still waiting" lines name it beside the missing process it
claimed to be. Once every process still missing was refused so, and neither a refusal nor a registration
came for REFUSAL_GRACE s, the start-up ends on every process, naming them (a bogus claim for a process that
then joins in time changes nothing); `meshax launch` stops the job when a child exits during start-up.
"""
from __future__ import annotations

import json
import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Iterator

from . import job_token, losses, survey
from .losses import describe
from .client import STILL_WAITING_EVERY, SUSPENDED_AFTER
from .auth import Peer, WrongToken, preview
from .listener import Listener
from .membership import Membership
from .rendezvous import Rendezvous, Waiter
from .pmi import PmiService
from .wire import LineSocket, LineTooLong

logger = logging.getLogger("meshax")

MAX_CONTROL_LINE = 64 << 20  # bytes in one request of an authenticated process
MAX_PMI_LINE = 64 << 10  # PMI-1 lines hold keys of <= 256 and values of <= 1024 characters
MAX_REPORT_LINE = 8 << 10  # bytes of the one message of a process that cannot join
REPORT_WAIT = 10.0  # seconds a reporting connection has to send its message
REFUSAL_GRACE = 5.0  # seconds the processes refused for a wrong token have to turn up with the right one


@dataclass(frozen=True)
class _Refusal:
    """A control connection refused during start-up for a wrong job token, claiming to be some process."""

    at: float  # time.monotonic()
    clock: str  # the time of day, for messages
    address: str


@dataclass
class _Process:
    """What the coordinator knows of one registered process."""

    process_id: int
    conn: LineSocket
    hostname: str
    pid: int
    info: dict[str, Any]
    last_seen: float = field(default_factory=time.monotonic)
    said_goodbye: bool = False


class CoordinatorServer:
    """Serves the control plane of a job of `num_processes` processes."""

    def __init__(self, port: int, num_processes: int, heartbeat_timeout: float, *, token: bytes,
                 bind_host: str | None = None, recoverable: bool = False) -> None:
        """Listen on `bind_host`:`port` (all interfaces when None) for processes knowing `token`; `recoverable`:
        the job goes on when processes die (jax_enable_recoverability)."""
        self.num_processes = num_processes
        self.heartbeat_timeout = heartbeat_timeout
        self.ping_interval = max(0.2, min(10.0, heartbeat_timeout / 5))
        self._cond = threading.Condition()
        self._processes: dict[int, _Process] = {}
        self._registration_waiters: list[Waiter] = []
        self._rendezvous = Rendezvous(num_processes)
        self._membership = Membership() if recoverable else None  # a job that survives losses
        self._failure: str | None = None
        self._started = False
        self._losses = losses.Losses()
        self._report: dict[str, Any] | None = None
        self._judge = survey.Judge()
        self._reminded_at: float | None = None  # when registering processes were last told who is missing
        self._stopping = False
        self._control_connections: set[LineSocket] = set()
        self._refusals: dict[int, _Refusal] = {}  # claimed process id -> its latest wrong-token refusal
        self._registered_at = time.monotonic()  # when the latest process registered
        self.pmi = PmiService(num_processes, self._hostnames, self._on_pmi_abort)
        self._listener = Listener(bind_host, port, token, self._serve, max_connections=2 * num_processes + 8,
                                  on_refused=self._on_refused)
        self.port = self._listener.port
        threading.Thread(target=self._monitor_loop, name="meshax-coordinator-monitor", daemon=True).start()

    # ---- connections -------------------------------------------------------------

    def _serve(self, conn: LineSocket, peer: Peer) -> None:
        """Serve one authenticated connection until it ends (the listener then closes it)."""
        if peer.kind == "report":
            conn.max_line = MAX_REPORT_LINE
            self._serve_report(conn)
        elif peer.kind == "pmi" and peer.process_id >= self.num_processes:
            logger.warning("meshax coordinator: dropped a PMI connection of process %d, out of range for a job of "
                           "%d processes.", peer.process_id, self.num_processes)
        elif peer.kind == "pmi":
            conn.max_line = MAX_PMI_LINE
            self.pmi.serve(conn, peer.process_id)
        elif peer.kind == "pmi_solo" and self._membership is not None:  # a rejoining process's own world
            conn.max_line = MAX_PMI_LINE
            PmiService(1, lambda: None, lambda _, reason: self._on_pmi_abort(peer.process_id, reason)).serve(conn, 0)
        else:  # any id: registration refuses one out of range, naming both counts
            conn.max_line = MAX_CONTROL_LINE
            self._serve_control(conn, peer.process_id)

    def _serve_report(self, conn: LineSocket) -> None:
        """A process of this job (it knows the token) that cannot join says why, or `meshax launch` says that
        one of its children exited: the start-up fails, naming it. A running job ignores such reports (it
        notices a death itself)."""
        try:
            line = conn.read_line(time.monotonic() + REPORT_WAIT)
            message = json.loads(line) if line is not None else None
        except (LineTooLong, ValueError, RecursionError):
            message = None
        if not isinstance(message, dict) or message.get("op") != "cannot_join":
            logger.warning("meshax coordinator: dropped a malformed report of a process that cannot join.")
            return
        who = message.get("who") or f"a process (pid {message.get('pid')!s:.12} on {message.get('hostname')!s:.100})"
        error = f"{who!s:.200} could not join the job: {message.get('reason')!s:.1000}"
        with self._cond:
            if not self._started:
                self._fail_locked(error, exclude=None)
            elif self._failure is None and message.get("source") != "launcher":
                logger.warning("meshax coordinator: ignored a report of a process that cannot join the running job: "
                               "%s", error)
        conn.write_message({"ok": True})

    def _on_refused(self, refusal: WrongToken, address: str) -> None:
        """Remember a control connection refused for a wrong token that claimed to be one of this job's
        processes (a report's id means nothing; PMI connections come only after registration)."""
        if refusal.kind == "control" and 0 <= refusal.process_id < self.num_processes:  # bounded: one per id
            # no lock: the listener's handshake thread must never wait for the coordinator (one assignment is atomic)
            clock = time.strftime("%H:%M:%S UTC", time.gmtime())
            self._refusals[refusal.process_id] = _Refusal(time.monotonic(), clock, address)

    def _serve_control(self, conn: LineSocket, peer_id: int) -> None:
        with self._cond:
            self._control_connections.add(conn)
        try:
            self._serve_requests(conn, peer_id)
        finally:
            with self._cond:
                self._control_connections.discard(conn)
                self._cond.notify_all()

    def _serve_requests(self, conn: LineSocket, peer_id: int) -> None:
        """Requests of process `peer_id`, which registers first and then acts only as itself."""
        process_id: int | None = None
        for message in _messages(conn, peer_id):
            op, rid = message.get("op"), message.get("rid")
            try:
                if op == "register" and process_id is None:
                    process_id = self._register(conn, peer_id, message)
                elif op == "register":
                    logger.warning("meshax coordinator: dropped a second registration of process %d.", process_id)
                    conn.write_message({"rid": rid, "error": f"this connection is registered as process {process_id}."})
                elif process_id is None:
                    conn.write_message({"rid": rid, "error": "register before any other request"})
                elif op == "goodbye":
                    self._goodbye(process_id)
                    conn.write_message({"rid": rid, "ok": True})
                    return
                else:
                    self._touch(process_id)
                    self._handle(conn, process_id, message)
            except (KeyError, TypeError, ValueError, AttributeError) as error:
                logger.warning("meshax coordinator: dropped a malformed %r request of process %d (%s: %s).",
                               op, peer_id, type(error).__name__, error)
                conn.write_message({"rid": rid, "error": f"malformed {op!r} request: {error!r}"})
        if process_id is not None:
            self._connection_lost(process_id, conn)

    def _handle(self, conn: LineSocket, process_id: int, message: dict[str, Any]) -> None:
        op, rid = message.get("op"), message.get("rid")
        if op == "heartbeat":
            return
        with self._cond:
            if op == "kv_set":
                self._rendezvous.kv_set(str(message["key"]), str(message["value"]))
                conn.write_message({"rid": rid, "ok": True})
                return
            if op == "kv_get":
                self._rendezvous.kv_get(conn, process_id, rid, str(message["key"]), float(message.get("timeout", 0)))
                return
            if op == "barrier":
                participants = message.get("participants")
                self._rendezvous.barrier(conn, process_id, rid, str(message["name"]),
                                         None if participants is None else [int(i) for i in participants],
                                         float(message["timeout"]), self._membership.lost if self._membership else ())
                return
            if op == "live" and self._membership is not None:
                self._membership.arrive(conn, process_id, rid, [int(i) for i in message["ids"]],
                                        float(message["timeout"]))
                return
        if op == "live":
            conn.write_message({"rid": rid, "error": "live_devices needs jax_enable_recoverability set to True on "
                                                     "every process before jax.distributed.initialize()."})
        elif op == "abort":
            self._ended_itself(process_id, f"failed: {message.get('message', 'no reason given')}")
            conn.write_message({"rid": rid, "ok": True})
        elif op in ("probe", "desync", "stuck"):
            self._start_survey(process_id, op, message["state"], float(message.get("timeout", 0)))
        elif op == "state":
            self._record_state(process_id, message.get("token"), message["state"])
        else:
            logger.warning("meshax coordinator: dropped an unknown request %r of process %d.", op, process_id)
            conn.write_message({"rid": rid, "error": f"unknown request {op!r}"})

    # ---- registration --------------------------------------------------------------

    def _register(self, conn: LineSocket, process_id: int, message: dict[str, Any]) -> int | None:
        rid = message.get("rid")
        if message.get("process_id") != process_id:
            logger.warning("meshax coordinator: refused the registration as process %r of a connection "
                           "authenticated as process %d.", message.get("process_id"), process_id)
            conn.write_message({"rid": rid, "error": f"this connection authenticated as process {process_id}, so "
                                f"it cannot register as process {message.get('process_id')!r}."})
            return None
        with self._cond:
            error = self._registration_error(process_id, message)
            if error is not None:
                conn.write_message({"rid": rid, "error": error})
                if self._started:  # a stray process of ours must not stop a job that runs fine
                    logger.warning("meshax coordinator: refused a late registration: %s", error)
                else:  # it knows the token, so it is one of ours, started wrongly: the job cannot start
                    self._fail_locked(error, exclude=None)
                return None
            self._processes[process_id] = _Process(
                process_id, conn, str(message.get("hostname", "?")), int(message.get("pid", 0)),
                message.get("info", {}),
            )
            if self._membership is not None:
                self._membership.joined(process_id, int(message.get("incarnation", 0)), again=self._started)
            if self._started:  # readmitted into a job that survives losses
                conn.write_message({"rid": rid, "ok": True, "processes": self._table(), "rejoined": True})
                return process_id
            deadline = time.monotonic() + float(message.get("timeout", 300))
            self._registration_waiters.append(Waiter(conn, rid, deadline, process_id))
            self._registered_at = time.monotonic()
            if len(self._processes) == self.num_processes:
                self._release_registration_locked()
        return process_id

    def _registration_error(self, process_id: int, message: dict[str, Any]) -> str | None:
        if self._failure is not None:
            return self._failure
        if self._started and self._membership is not None and process_id in self._membership.lost:
            return None  # it died and was started again: readmitted
        if self._started:
            return f"process {process_id} tried to register with a job that has already started."
        if bool(message.get("recoverable")) != (self._membership is not None):
            return (f"process {process_id} was started with jax_enable_recoverability="
                    f"{bool(message.get('recoverable'))} but process 0 with {self._membership is not None}; set it "
                    "the same way on every process, before jax.distributed.initialize().")
        their_count = message.get("num_processes")
        if their_count != self.num_processes:
            return (
                f"process {process_id} was started with num_processes={their_count} but process 0 "
                f"with num_processes={self.num_processes}; start every process with the same count."
            )
        if not 0 <= process_id < self.num_processes:
            return f"process_id={process_id} is out of range for num_processes={self.num_processes}."
        existing = self._processes.get(process_id)
        if existing is not None:
            return (
                f"process_id={process_id} is already registered by pid {existing.pid} on {existing.hostname}; "
                f"a second process (pid {message.get('pid')} on {message.get('hostname')}) claimed it too: "
                "give every process a distinct process_id."
            )
        return None

    def _release_registration_locked(self) -> None:
        self._started = True
        table = self._table()
        for waiter in self._registration_waiters:
            waiter.conn.write_message({"rid": waiter.rid, "ok": True, "processes": table})
        self._registration_waiters = []

    def _table(self) -> list[dict[str, Any]]:
        """Every registered process's entry: its id, host, pid and devices."""
        return [{"process_id": p.process_id, "hostname": p.hostname, "pid": p.pid, "info": p.info}
                for p in sorted(self._processes.values(), key=lambda p: p.process_id)]

    def _hostnames(self) -> list[str] | None:
        with self._cond:
            if len(self._processes) < self.num_processes:
                return None
            return [self._processes[i].hostname for i in range(self.num_processes)]

    # ---- surveys: what every process is doing when one waits long -----------------------------

    def _start_survey(self, process_id: int, reason: str, state: dict[str, Any], timeout: float = 0.0) -> None:
        """Ask every process what it is doing. `reason`: "probe" (a communication waits a few seconds),
        "desync" (a process found in-band that processes disagree) or "stuck" (collective_timeout passed)."""
        with self._cond:
            if self._failure is not None:
                return
            if self._report is not None:  # one survey at a time; a stronger reason takes it over
                self._report["states"][process_id] = state
                if reason != "probe" and self._report["reason"] == "probe":
                    self._report.update(reason=reason, trigger=process_id, timeout=timeout)
                self._finish_report_if_complete(time.monotonic())
                return
            token = time.monotonic()
            self._report = {"token": token, "trigger": process_id, "reason": reason, "timeout": timeout,
                            "states": {process_id: state}, "deadline": token + 3.0}
            self._tell({"event": "report_state", "token": token}, exclude=process_id)
            self._finish_report_if_complete(time.monotonic())

    def _record_state(self, process_id: int, token: Any, state: dict[str, Any]) -> None:
        with self._cond:
            if self._report is not None and self._report["token"] == token:
                self._report["states"][process_id] = state
                self._finish_report_if_complete(time.monotonic())

    def _finish_report_if_complete(self, now: float) -> None:
        report = self._report
        if report is None:
            return
        live = {p.process_id for p in self._processes.values() if not p.said_goodbye}
        if not live <= report["states"].keys() and now < report["deadline"]:
            return
        self._report = None
        states, reason = report["states"], report["reason"]
        gone = set(range(self.num_processes)) - live
        silent = {p: now - self._processes[p].last_seen for p in live - states.keys()}
        if self._membership is not None:  # a job that survives losses: its lost are no fault, its silent may be
            gone -= self._membership.lost
            if silent and reason == "probe":
                return
        if reason == "stuck":
            headline = (f"process {report['trigger']} waited more than {report['timeout']:g} s "
                        "(collective_timeout) for a communication")
        elif reason == "desync":
            headline = survey.disagreement(states) or f"process {report['trigger']} received data that does not match its operation"
        else:
            verdict, headline = self._judge.verdict(states, live, gone, silent)
            if verdict == "wait":
                for process_id, state in states.items():
                    process = self._processes.get(process_id)
                    if "waiting" in state and process is not None and not process.said_goodbye:
                        process.conn.write_message({"event": "waiting_for", "busy": headline})
                return
        self._fail_locked(survey.report(headline, states, self.num_processes, gone, silent), exclude=None)

    # ---- deadlines, heartbeats and failures -----------------------------------------------

    def _monitor_loop(self) -> None:
        last_tick = time.monotonic()
        suspended_after = min(SUSPENDED_AFTER, self.heartbeat_timeout / 2)
        while not self._stopping:
            time.sleep(min(0.25, self.ping_interval))
            now = time.monotonic()
            with self._cond:
                if now - last_tick > suspended_after:  # process 0 itself was suspended: the others were not silent
                    for process in self._processes.values():
                        process.last_seen = now
                last_tick = now
                self._expire_registration(now)
                self._end_start_up_if_refused(now)
                self._remind_registration(now)
                self._rendezvous.expire(now)
                if self._membership is not None:
                    self._membership.expire(now)
                self._report_lost(now)
                self._check_heartbeats(now)
                self._finish_report_if_complete(now)
                processes = [p for p in self._processes.values() if not p.said_goodbye]
            for process in processes:
                process.conn.write_message({"event": "ping"})

    def _expire_registration(self, now: float) -> None:
        expired = [w for w in self._registration_waiters if w.deadline <= now]
        if not expired:
            return
        missing = sorted(set(range(self.num_processes)) - self._processes.keys())
        message = (
            f"initialization timed out: processes {missing} of {self.num_processes} never connected to the "
            "coordinator; start them, or check their coordinator_address and process_id"
        )
        notes = self._missing_notes(missing)
        message += f" ({'; '.join(notes)})." if notes else "."
        for waiter in self._registration_waiters:  # all at once, so every process names the same missing ones
            waiter.conn.write_message({"rid": waiter.rid, "error": message})
        self._registration_waiters = []
        self._failure = message  # start-up is over: late-comers hear why, and nothing more is broadcast

    def _missing_notes(self, missing: list[int]) -> list[str]:
        """What is known of the missing processes: connections refused while claiming to be them."""
        refusals = dict(self._refusals)
        return [
            f"process {i}: a connection claiming to be it was refused at {refusals[i].clock} from "
            f"{refusals[i].address} for a wrong job token; was it started with another {job_token.ENV_VAR} or "
            "~/.meshax/job_token?"
            for i in missing if i in refusals
        ]

    def _end_start_up_if_refused(self, now: float) -> None:
        """End the start-up when every process still missing was refused for a wrong token and, for
        REFUSAL_GRACE s, none of them came back and no other process registered: those were (almost surely) the
        job's own processes started with another token. An outsider's bogus claim for a process that then joins
        changes nothing; one that claims the last process just as the others have joined ends a start-up only
        if that process does not join within the grace."""
        if self._started or self._failure is not None:
            return
        refusals = dict(self._refusals)  # the listener's thread may add one meanwhile
        missing = sorted(set(range(self.num_processes)) - self._processes.keys())
        if not missing or any(i not in refusals for i in missing):
            return
        if now - max(self._registered_at, *(refusals[i].at for i in missing)) < REFUSAL_GRACE:
            return
        if len(missing) == 1:
            refusal = refusals[missing[0]]
            what = (f"process {missing[0]} could not join the job: its connection from {refusal.address} at "
                    f"{refusal.clock} was refused because its job token differs from process 0's, and no process "
                    f"{missing[0]} with the right token joined within {REFUSAL_GRACE:g} s")
        else:
            refused = "; ".join(f"process {i} from {refusals[i].address} at {refusals[i].clock}" for i in missing)
            what = (f"processes {missing} could not join the job: their connections ({refused}) were refused because "
                    f"their job tokens differ from process 0's, and none of them joined with the right token within "
                    f"{REFUSAL_GRACE:g} s")
        self._fail_locked(f"{what}; {job_token.FIX}, or without it run every process as the same user sharing "
                          "~/.meshax/job_token.", exclude=None)

    def _remind_registration(self, now: float) -> None:
        """Every STILL_WAITING_EVERY s of registration, tell the registered processes who has not connected."""
        if not self._registration_waiters:
            self._reminded_at = None
            return
        if self._reminded_at is None:
            self._reminded_at = now
        elif now - self._reminded_at >= STILL_WAITING_EVERY:
            self._reminded_at = now
            missing = sorted(set(range(self.num_processes)) - self._processes.keys())
            notes = self._missing_notes(missing)
            for waiter in self._registration_waiters:
                waiter.conn.write_message({"event": "still_registering", "missing": missing, "notes": notes})

    def _check_heartbeats(self, now: float) -> None:
        """Fail the job when a process has been silent past the heartbeat timeout, naming every process silent by
        then for half the timeout too (a live one beats every fifth of it: those fell silent together with it)."""
        quiet = {p.process_id: now - p.last_seen for p in self._processes.values()
                 if not p.said_goodbye and now - p.last_seen > self.heartbeat_timeout / 2}
        for process_id in [i for i, t in quiet.items() if t > self.heartbeat_timeout and self._membership is not None]:
            why = losses.stopped_answering([], quiet[process_id], self.heartbeat_timeout)
            self._lose_recoverably(self._processes[process_id], process_id, why)
            self._processes[process_id].conn.close()
        if quiet and max(quiet.values()) > self.heartbeat_timeout and self._membership is None:
            names = [describe(self._processes[i], i) for i in sorted(quiet)]
            self._fail_locked(losses.stopped_answering(names, max(quiet.values()), self.heartbeat_timeout), None)

    def _touch(self, process_id: int) -> None:
        process = self._processes.get(process_id)
        if process is not None:
            process.last_seen = time.monotonic()

    def _goodbye(self, process_id: int) -> None:
        with self._cond:
            self._processes[process_id].said_goodbye = True
            self._cond.notify_all()

    def _connection_lost(self, process_id: int, conn: LineSocket) -> None:
        with self._cond:
            process = self._processes.get(process_id)
            if process is None or process.conn is not conn or process.said_goodbye or self._stopping:
                return
            process.said_goodbye = True
            if self._membership is not None and self._started:  # (MPI_Abort's report may name it first)
                self._lose_recoverably(process, process_id, "died: its connection to the coordinator closed "
                                                            "without a shutdown")
                return
            if process_id in self._losses.aborted:  # it ended itself with MPI_Abort: not a death to report
                return
            if not self._started:
                self._registration_waiters = [w for w in self._registration_waiters if w.process_id != process_id]
                self._fail_locked(
                    f"{describe(process, process_id)} died during start-up: its connection to the coordinator "
                    "closed before every process had joined.", exclude=process_id)
                return
            # they stop entering MPI now; the notice comes once gathered
            self._tell({"event": "peer_lost", "name": describe(process, process_id)})
            self._losses.add(process_id, time.monotonic())
            self._cond.notify_all()

    def _lose_recoverably(self, process: _Process, process_id: int, why: str) -> None:
        """A job that survives losses goes on without `process_id` (once), telling the others why."""
        process.said_goodbye = True
        if process_id in self._membership.lost:
            return
        self._tell({"event": "peer_lost", "name": describe(process, process_id), "process_id": process_id,
                    "why": why, "recoverable": True})
        self._membership.lose(process_id)
        self._rendezvous.lost(self._membership.lost)
        self._cond.notify_all()

    def _report_lost(self, now: float) -> None:
        """Fail the job naming every process whose connection closed within DEATHS_WINDOW of the first."""
        if self._losses.due(now):
            self._fail_locked(losses.died([describe(self._processes.get(i), i) for i in self._losses.take()]), None)

    def _on_pmi_abort(self, rank: int, reason: str) -> None:
        """A process called MPI_Abort. Right after a peer's death that is its consequence (MPI's transport failed
        on the way to the dead peer): wait ABORT_CAUSE_WAIT for a connection to close, and name the dead instead,
        once DEATHS_WINDOW has gathered them."""
        deadline = time.monotonic() + losses.ABORT_CAUSE_WAIT
        with self._cond:
            self._losses.aborted.add(rank)
            while self._failure is None and (time.monotonic() < deadline or self._losses.lost):
                if self._losses.due(time.monotonic()):
                    self._report_lost(time.monotonic())
                    return
                self._cond.wait(0.05)
            if self._failure is not None:
                return
        self._ended_itself(rank, f"called MPI_Abort: {reason}")

    def _ended_itself(self, process_id: int, why: str) -> None:
        """Process `process_id` ended itself (`why`): the job fails, unless it survives losses (but process 0's)."""
        with self._cond:
            process = self._processes.get(process_id)
            if self._membership is None or process is None or process_id == 0 or not self._started:
                self._fail_locked(f"process {process_id} {why}", exclude=process_id)
            else:
                self._lose_recoverably(process, process_id, why)

    def fail(self, message: str, exclude: int | None) -> None:
        """Tell every live process (but `exclude`) that the job has failed."""
        with self._cond:
            self._fail_locked(message, exclude)

    def _fail_locked(self, message: str, exclude: int | None) -> None:
        if self._failure is not None:
            return
        self._failure = message
        self._tell({"event": "failure", "message": message}, exclude)
        self._cond.notify_all()

    def _tell(self, message: dict[str, Any], exclude: int | None = None) -> None:
        """Send `message` to every live process but `exclude`, process 0 (this one) last."""
        for process in sorted(self._processes.values(), key=lambda p: p.process_id == 0):
            if process.process_id != exclude and not process.said_goodbye:
                process.conn.write_message(message)

    # ---- shutdown ------------------------------------------------------------------------

    def stop(self, timeout: float, own_id: int = 0) -> list[int]:
        """Wait up to `timeout` s for the other processes to leave, then close; returns the stragglers."""
        deadline = time.monotonic() + timeout
        with self._cond:
            own = self._processes.get(own_id)
            while True:
                remaining = [
                    p.process_id for p in self._processes.values()
                    if p.process_id != own_id and not p.said_goodbye and not p.conn.closed
                ]
                unregistered = self._control_connections - {p.conn for p in self._processes.values()}
                left = deadline - time.monotonic()
                if (not remaining and not unregistered - {own and own.conn}) or left <= 0:
                    break
                self._cond.wait(min(left, 0.2))
        others = set(range(self.num_processes)) - {own_id} - (self._membership.lost if self._membership else set())
        remaining += sorted(self.pmi.wait_ended(others, max(0.0, deadline - time.monotonic())) - set(remaining))
        with self._cond:
            self._stopping = True
        self._listener.close()
        return remaining



def _messages(conn: LineSocket, process_id: int) -> Iterator[dict[str, Any]]:
    """The JSON objects process `process_id` sends, until it closes; malformed lines are logged and skipped."""
    while True:
        try:
            line = conn.read_line()
        except LineTooLong as error:
            logger.warning("meshax coordinator: closed the connection of process %d: it sent %s.", process_id, error)
            return
        if line is None:
            return
        try:
            message = json.loads(line)
        except (ValueError, RecursionError):
            message = None
        if isinstance(message, dict):
            yield message
        else:
            logger.warning("meshax coordinator: dropped a malformed message of process %d: %s.",
                           process_id, preview(line))
