"""The coordinator's front door: where it listens, how many connections it takes, who gets in.

It listens on the interface of the coordinator address (all interfaces only when that
address is not one of this machine's), turns away connections beyond its bounds, and
hands a connection to the coordinator only once it has authenticated (auth.py).
Anything else is logged (rate-limited) and dropped.
"""
from __future__ import annotations

import contextlib
import errno
import ipaddress
import logging
import socket
import threading
import time
from typing import Callable

from . import auth
from .wire import LineSocket, LineTooLong

logger = logging.getLogger("meshax")

MAX_UNAUTHENTICATED = 32  # connections still in their handshake at once, apart from authenticated ones


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


class Listener:
    """Accepts connections on `host`:`port` and passes authenticated ones to `on_connection`.

    At most `max_connections` authenticated connections and MAX_UNAUTHENTICATED ones still
    authenticating are open at once; more are closed at once.

    `on_connection(conn, peer)` runs in the connection's own thread and returns when the
    connection is done; the listener then closes it.
    """

    def __init__(self, host: str | None, port: int, token: bytes,
                 on_connection: Callable[[LineSocket, auth.Peer], None], max_connections: int) -> None:
        self._token = token
        self._on_connection = on_connection
        self._max_connections = max_connections
        self._lock = threading.Lock()
        self._pending: set[LineSocket] = set()
        self._connections: set[LineSocket] = set()
        self._closing = False
        self.log = RateLimitedLog()
        self._sockets = _listen(host, port)
        self.port = self._sockets[0].getsockname()[1]
        for sock in self._sockets:
            threading.Thread(target=self._accept_loop, args=(sock,), name="meshax-coordinator-accept",
                             daemon=True).start()

    def _accept_loop(self, listener: socket.socket) -> None:
        while not self._closing:
            try:
                sock, peer_address = listener.accept()
            except OSError as error:
                if self._closing:
                    return
                self.log.warning(f"could not accept a connection ({error}); trying again.")  # e.g. out of files
                time.sleep(0.1)
                continue
            conn = LineSocket(sock, max_line=auth.MAX_HANDSHAKE_LINE)
            with self._lock:
                authenticated = len(self._connections) - len(self._pending)
                full = len(self._pending) >= MAX_UNAUTHENTICATED or authenticated >= self._max_connections
                if not full:
                    self._pending.add(conn)
                    self._connections.add(conn)
            if full:
                self.log.warning(f"refused a connection from {_host(peer_address)}: too many connections "
                                 f"({authenticated} authenticated, {len(self._pending)} authenticating).")
                conn.close()
                continue
            with contextlib.suppress(OSError):  # the peer may have reset it already
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            threading.Thread(target=self._serve, args=(conn, _host(peer_address)), name="meshax-coordinator-conn",
                             daemon=True).start()

    def _serve(self, conn: LineSocket, who: str) -> None:
        try:
            try:
                peer = auth.serve_handshake(conn, self._token, time.monotonic() + auth.HANDSHAKE_TIMEOUT)
            except (auth.HandshakeFailed, LineTooLong) as why:
                self.log.warning(f"dropped a connection from {who}: {why}.")
                return
            conn.sock.settimeout(None)
            with self._lock:
                self._pending.discard(conn)
            self._on_connection(conn, peer)
        finally:
            with self._lock:
                self._pending.discard(conn)
                self._connections.discard(conn)
            conn.close()

    def close(self) -> None:
        """Stop accepting and close every connection."""
        self._closing = True
        for sock in self._sockets:
            try:
                sock.shutdown(socket.SHUT_RDWR)  # wakes the thread blocked in accept() (close alone does not)
            except OSError:
                pass
            sock.close()
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
