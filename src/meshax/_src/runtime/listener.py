"""The coordinator's front door: where it listens, how many connections it takes, who gets in.

It listens on the interface of the coordinator address (all interfaces only when that
address is not one of this machine's) and hands a connection to the coordinator only once
it has authenticated (auth.py). One thread runs every handshake at once, without blocking
on any peer: a connection has HANDSHAKE_TIMEOUT s to authenticate, and when
MAX_UNAUTHENTICATED connections are authenticating, a new one pushes out the oldest. So
idle or slow unauthenticated connections, however many, never keep a process of the job
out for more than a moment: its handshake takes one round trip. Refusals are logged
(rate-limited) and dropped.
"""
from __future__ import annotations

import contextlib
import errno
import ipaddress
import logging
import selectors
import socket
import threading
import time
from dataclasses import dataclass
from typing import Callable

from . import auth
from .wire import LineSocket

logger = logging.getLogger("meshax")

MAX_UNAUTHENTICATED = 256  # connections authenticating at once; a new one past this pushes out the oldest
ACCEPT_BATCH = 64  # connections accepted in a row before pending handshakes get a turn


class RateLimitedLog:
    """WARNING lines for refused connections: the first few, then at most one summary per interval."""

    def __init__(self, burst: int = 10, interval: float = 10.0) -> None:
        self.burst, self.interval = burst, interval
        self._lock = threading.Lock()
        self._logged = 0
        self._suppressed = 0
        self._window_start = time.monotonic()

    def warning(self, message: str) -> None:
        with self._lock:
            now = time.monotonic()
            if now - self._window_start >= self.interval:
                if self._suppressed:
                    logger.warning("meshax coordinator: %d more connections were refused or dropped in the last "
                                   "%.0f s.", self._suppressed, now - self._window_start)
                self._window_start, self._logged, self._suppressed = now, 0, 0
            if self._logged < self.burst:
                self._logged += 1
                logger.warning("meshax coordinator: %s", message)
            else:
                self._suppressed += 1


@dataclass
class _Handshake:
    """A connection that has not authenticated yet."""

    sock: socket.socket
    who: str  # the peer's address
    nonce: str
    deadline: float
    received: bytes = b""


class Listener:
    """Accepts connections on `host`:`port` and passes authenticated ones to `on_connection`.

    `on_connection(conn, peer)` runs in the connection's own thread and returns when the
    connection is done; the listener then closes it. At most `max_connections` authenticated
    connections are open at once. `on_refused(refusal, address)` hears of every connection
    refused for a wrong token (auth.WrongToken).
    """

    def __init__(self, host: str | None, port: int, token: bytes,
                 on_connection: Callable[[LineSocket, auth.Peer], None], max_connections: int,
                 on_refused: Callable[[auth.WrongToken, str], None] | None = None) -> None:
        self._token = token
        self._on_connection = on_connection
        self._on_refused = on_refused
        self._max_connections = max_connections
        self._lock = threading.Lock()
        self._pending: dict[socket.socket, _Handshake] = {}  # in order of arrival
        self._connections: set[LineSocket] = set()
        self._closing = False
        self.log = RateLimitedLog()
        self._sockets = _listen(host, port)
        self.port = self._sockets[0].getsockname()[1]
        self._selector = selectors.DefaultSelector()
        self._wake_read, self._wake_write = socket.socketpair()
        self._selector.register(self._wake_read, selectors.EVENT_READ, "wake")
        for sock in self._sockets:
            sock.setblocking(False)
            self._selector.register(sock, selectors.EVENT_READ, "listen")
        self._thread = threading.Thread(target=self._handshake_loop, name="meshax-coordinator-accept", daemon=True)
        self._thread.start()

    # ---- the handshake thread -------------------------------------------------------------

    def _handshake_loop(self) -> None:
        try:
            while not self._closing:
                oldest = next(iter(self._pending.values()), None)
                wait = 1.0 if oldest is None else max(0.0, min(1.0, oldest.deadline - time.monotonic()))
                for key, _ in self._selector.select(wait):
                    try:
                        if key.data == "listen":
                            self._accept(key.fileobj)
                        elif isinstance(key.data, _Handshake) and key.data.sock in self._pending:
                            self._receive(key.data)
                    except Exception as error:  # noqa: BLE001 - one bad connection must not stop the front door
                        logger.warning("meshax coordinator: error while handling a new connection: %r", error)
                self._expire(time.monotonic())
        finally:
            for handshake in list(self._pending.values()):
                self._forget(handshake)
                handshake.sock.close()
            for sock in self._sockets:
                with contextlib.suppress(OSError):
                    sock.close()
            self._selector.close()
            self._wake_read.close()

    def _accept(self, listener: socket.socket) -> None:
        for _ in range(ACCEPT_BATCH):
            try:
                sock, address = listener.accept()
            except BlockingIOError:
                return
            except OSError as error:  # e.g. out of file descriptors: make room
                self.log.warning(f"could not accept a connection ({error}); dropping the oldest unauthenticated one.")
                if not self._evict_oldest():
                    time.sleep(0.05)
                return
            if len(self._pending) >= MAX_UNAUTHENTICATED:
                self._evict_oldest()
            nonce, line = auth.challenge()
            data = f"{line}\n".encode("ascii")
            try:
                sock.setblocking(False)
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                sent = sock.send(data)  # a few bytes into an empty send buffer: all of them
            except OSError:  # the peer reset it already
                sent = 0
            if sent != len(data):
                sock.close()
                continue
            handshake = _Handshake(sock, _host(address), nonce, time.monotonic() + auth.HANDSHAKE_TIMEOUT)
            self._pending[sock] = handshake
            self._selector.register(sock, selectors.EVENT_READ, handshake)

    def _receive(self, handshake: _Handshake) -> None:
        try:
            chunk = handshake.sock.recv(4096)
        except BlockingIOError:
            return
        except OSError:
            chunk = b""
        if not chunk:
            self._drop(handshake, "it closed before authenticating")
            return
        handshake.received += chunk
        line, newline, rest = handshake.received.partition(b"\n")
        if len(line) > auth.MAX_HANDSHAKE_LINE:
            self._drop(handshake, f"it sent a line of more than {auth.MAX_HANDSHAKE_LINE} bytes")
        elif newline:
            self._forget(handshake)
            self._authenticate(handshake, line.decode("utf-8", errors="replace"), rest)

    def _authenticate(self, handshake: _Handshake, line: str, rest: bytes) -> None:
        sock, who = handshake.sock, handshake.who
        try:
            peer, answer = auth.check_answer(self._token, handshake.nonce, line)
        except auth.HandshakeFailed as why:
            if isinstance(why, auth.WrongToken):
                with contextlib.suppress(OSError):
                    sock.send(b"denied\n")
                if self._on_refused is not None:
                    self._on_refused(why, who)
            self.log.warning(f"dropped a connection from {who}: {why}.")
            sock.close()
            return
        with self._lock:
            full = len(self._connections) >= self._max_connections
            if not full:
                conn = LineSocket(sock, max_line=auth.MAX_HANDSHAKE_LINE, received=rest)
                self._connections.add(conn)
        if full:
            self.log.warning(f"refused a connection from {who}: too many connections ({self._max_connections} "
                             "authenticated ones are open).")
            sock.close()
            return
        sock.setblocking(True)
        conn.write_line(answer)
        threading.Thread(target=self._serve, args=(conn, peer), name="meshax-coordinator-conn", daemon=True).start()

    def _expire(self, now: float) -> None:
        for handshake in list(self._pending.values()):  # oldest first: their deadlines come in order
            if handshake.deadline > now:
                return
            self._drop(handshake, f"it did not authenticate within {auth.HANDSHAKE_TIMEOUT:g} s")

    def _evict_oldest(self) -> bool:
        oldest = next(iter(self._pending.values()), None)
        if oldest is not None:
            self._drop(oldest, f"it was the oldest of {len(self._pending)} connections still authenticating when "
                               "another one came")
        return oldest is not None

    def _drop(self, handshake: _Handshake, why: str) -> None:
        self._forget(handshake)
        handshake.sock.close()
        self.log.warning(f"dropped a connection from {handshake.who}: {why}.")

    def _forget(self, handshake: _Handshake) -> None:
        del self._pending[handshake.sock]
        self._selector.unregister(handshake.sock)

    # ---- authenticated connections ------------------------------------------------------------

    def _serve(self, conn: LineSocket, peer: auth.Peer) -> None:
        try:
            self._on_connection(conn, peer)
        finally:
            with self._lock:
                self._connections.discard(conn)
            conn.close()

    def close(self) -> None:
        """Stop accepting and close every connection."""
        self._closing = True
        with contextlib.suppress(OSError):
            self._wake_write.send(b"x")
        if threading.current_thread() is not self._thread:
            self._thread.join(5.0)
        self._wake_write.close()
        with self._lock:
            connections = list(self._connections)
        for conn in connections:
            conn.close()


def _host(peer_address: object) -> str:
    return str(peer_address[0]) if isinstance(peer_address, tuple) and peer_address else "?"


def _listen(host: str | None, port: int) -> list[socket.socket]:
    """Listening sockets for the coordinator address's `host` (all interfaces when None)."""
    if host is None:
        return [_bind(None, port)]
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as error:
        logger.warning("meshax coordinator: the coordinator address's host %r cannot be resolved here (%s); "
                       "listening on all interfaces of port %d.", host, error.strerror, port)
        return [_bind(None, port)]
    addresses = list(dict.fromkeys((family, sockaddr[0]) for family, _, _, _, sockaddr in infos))
    if _own_name_on_loopback(host, addresses):
        # e.g. Debian's /etc/hosts maps the machine's name to 127.0.1.1, while other machines
        # reach it under that name through DNS: only all interfaces serve both.
        return [_bind(None, port)]
    sockets: list[socket.socket] = []
    for family, ip in addresses:
        try:
            sockets.append(_bind((family, ip), port if not sockets else sockets[0].getsockname()[1]))
        except OSError as error:
            if error.errno != errno.EADDRNOTAVAIL:
                for sock in sockets:
                    sock.close()
                raise
    if not sockets:
        logger.warning("meshax coordinator: %s (%s) is not an address of this machine; listening on all "
                       "interfaces of port %d.", host, ", ".join(ip for _, ip in addresses), port)
        return [_bind(None, port)]
    return sockets


def _own_name_on_loopback(host: str, addresses: list[tuple[int, str]]) -> bool:
    """Whether `host` is this machine's own name and resolves here to loopback addresses only."""
    if not all(ipaddress.ip_address(ip.split("%")[0]).is_loopback for _, ip in addresses):
        return False
    name = host.lower()
    return name == socket.gethostname().lower() or ("." in name and name == socket.getfqdn().lower())


def _bind(address: tuple[int, str] | None, port: int) -> socket.socket:
    """A listening socket on `address` (family, ip), or on every interface (dual-stack where possible)."""
    if address is None:
        candidates = [(socket.AF_INET6, "::"), (socket.AF_INET, "")] if socket.has_ipv6 else [(socket.AF_INET, "")]
    else:
        candidates = [address]
    last_error: OSError | None = None
    for family, ip in candidates:
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6 and address is None:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
            sock.bind((ip, port))
            sock.listen(1024)
            return sock
        except OSError as error:
            sock.close()
            if error.errno == errno.EADDRINUSE:
                raise OSError(
                    errno.EADDRINUSE,
                    f"the coordinator cannot listen on port {port}: it is already in use on this host (another "
                    "program, or a meshax job still running); pick a free port in coordinator_address.",
                ) from None
            if address is not None:
                raise
            last_error = error
    raise OSError(f"the coordinator cannot listen on port {port}: {last_error}")
