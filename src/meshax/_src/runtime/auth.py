"""Mutual authentication of every connection to the coordinator.

Right after a connection opens, the server sends a random nonce; the client answers
with its own nonce, what it is (`control`, `pmi` or `report`, and its process id) and an
HMAC-SHA256 of the job token over all of these; the server checks it and proves in
turn that it knows the token too. Nothing else a peer sends is read before that.
"""
from __future__ import annotations

import hashlib
import hmac
import secrets
import socket
import string
import time
from dataclasses import dataclass

from .job_token import FIX
from .wire import LineSocket, parse_address

PROTOCOL = "meshax-auth-1"
KINDS = ("control", "pmi", "pmi_solo", "report")  # report: why a process cannot join (its id: 0, unused);
# pmi_solo: the PMI of a process that rejoins a job that survives losses, as a world of its own (rejoin.py)
HANDSHAKE_TIMEOUT = 5.0  # seconds a new connection has to authenticate
MAX_HANDSHAKE_LINE = 512  # bytes: a handshake line is about 250


class AuthenticationError(RuntimeError):
    """The other side does not know the job token (a definitive failure, not worth retrying)."""


class HandshakeFailed(Exception):
    """Why the server refused a connection, for its log."""


class WrongToken(HandshakeFailed):
    """A well-formed handshake whose HMAC does not match: the peer claims `kind` of `process_id` but does not
    know the job token (a process of another job, one started with another token, or an outsider)."""

    def __init__(self, kind: str, process_id: int) -> None:
        super().__init__(f"it claimed to be the {kind} connection of process {process_id} without knowing the "
                         "job token")
        self.kind, self.process_id = kind, process_id


@dataclass(frozen=True)
class Peer:
    """Who an authenticated connection belongs to."""

    kind: str
    process_id: int


def _mac(token: bytes, role: str, server_nonce: str, client_nonce: str, kind: str, process_id: int) -> str:
    message = "|".join((PROTOCOL, role, server_nonce, client_nonce, kind, str(process_id)))
    return hmac.new(token, message.encode("ascii"), hashlib.sha256).hexdigest()


def _is_hex64(text: str) -> bool:
    return len(text) == 64 and all(c in string.hexdigits for c in text)


def preview(line: str) -> str:
    """A short printable rendering of untrusted input, for log lines."""
    return repr(line[:60] + ("..." if len(line) > 60 else ""))


# ---- server side ------------------------------------------------------------------------------


def challenge() -> tuple[str, str]:
    """(nonce, line): the first line the server sends on a new connection."""
    server_nonce = secrets.token_hex(32)
    return server_nonce, f"{PROTOCOL} {server_nonce}"


def check_answer(token: bytes, server_nonce: str, line: str) -> tuple[Peer, str]:
    """The peer a client's handshake `line` proves, and the line to answer it with.

    Raises HandshakeFailed when the line is malformed or the client does not know the token.
    """
    fields = line.split(" ")
    if len(fields) != 5 or fields[0] != PROTOCOL:
        raise HandshakeFailed(f"it sent {preview(line)} instead of a {PROTOCOL} handshake")
    _, kind, id_text, client_nonce, mac = fields
    if (kind not in KINDS or not id_text.isdigit() or len(id_text) > 9 or not _is_hex64(client_nonce)
            or not _is_hex64(mac) or client_nonce == server_nonce):
        raise HandshakeFailed(f"its handshake {preview(line)} is malformed")
    process_id = int(id_text)
    if not hmac.compare_digest(_mac(token, "client", server_nonce, client_nonce, kind, process_id), mac.lower()):
        raise WrongToken(kind, process_id)
    return Peer(kind, process_id), f"ok {_mac(token, 'server', server_nonce, client_nonce, kind, process_id)}"


# ---- client side ------------------------------------------------------------------------------


def _client_handshake(conn: LineSocket, token: bytes, kind: str, process_id: int, address: str,
                      deadline: float) -> bool:
    """True once both sides proved the token; False if the connection ended first (worth retrying)."""
    line = conn.read_line(deadline)
    if line is None:
        return False
    fields = line.split(" ")
    if len(fields) != 2 or fields[0] != PROTOCOL or not _is_hex64(fields[1]):
        raise AuthenticationError(
            f"process {process_id}: the server at {address} is not a meshax coordinator (it sent {preview(line)} "
            "instead of a challenge); check the coordinator address."
        )
    server_nonce, client_nonce = fields[1], secrets.token_hex(32)
    mac = _mac(token, "client", server_nonce, client_nonce, kind, process_id)
    conn.write_line(f"{PROTOCOL} {kind} {process_id} {client_nonce} {mac}")
    reply = conn.read_line(deadline)
    if reply is None:
        return False
    expected = f"ok {_mac(token, 'server', server_nonce, client_nonce, kind, process_id)}"
    if reply == "denied" or not hmac.compare_digest(reply.encode(), expected.encode()):
        whose = "the coordinator refused its job token" if reply == "denied" else \
            "the coordinator did not prove that it knows the job token"
        raise AuthenticationError(
            f"process {process_id} could not authenticate to the coordinator at {address}: {whose}, so the two "
            f"were started with different tokens; {FIX}."
        )
    return True


def connect(address: str, token: bytes, kind: str, process_id: int, timeout: float) -> socket.socket:
    """A blocking socket to the coordinator at `address`, authenticated as `kind` of `process_id`.

    Retries for up to `timeout` s while the coordinator is not up (or turns the connection
    away); a token mismatch raises AuthenticationError at once.
    """
    host, port = parse_address(address)
    deadline = time.monotonic() + timeout
    last_error: Exception | None = None
    while True:
        try:
            addresses = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except socket.gaierror as error:  # e.g. a pod whose DNS name does not exist yet: retry
            addresses, last_error = [], error
        for family, kind_, proto, _, sockaddr in addresses:
            sock = socket.socket(family, kind_, proto)
            try:
                sock.settimeout(max(0.1, min(2.0, deadline - time.monotonic())))
                sock.connect(sockaddr)
                conn = LineSocket(sock, max_line=MAX_HANDSHAKE_LINE)
                handshake_deadline = min(deadline, time.monotonic() + HANDSHAKE_TIMEOUT)
                if _client_handshake(conn, token, kind, process_id, address, handshake_deadline):
                    sock.settimeout(None)
                    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                    return sock
                last_error = ConnectionError("the coordinator closed the connection before authentication ended")
            except (OSError, ValueError) as error:
                last_error = error
            except BaseException:
                sock.close()
                raise
            sock.close()
        if time.monotonic() >= deadline:
            raise _connect_failure(address, host, process_id, timeout, last_error)
        time.sleep(0.05)


def _connect_failure(address: str, host: str, process_id: int, timeout: float, error: Exception | None) -> Exception:
    if isinstance(error, socket.gaierror):
        return ValueError(
            f"coordinator_address={address!r}: host {host!r} cannot be resolved ({error.strerror}) "
            f"after trying for {timeout:g} s; check the address of process 0's machine."
        )
    return TimeoutError(
        f"process {process_id} could not reach the coordinator at {address} within "
        f"{timeout:g} s ({error}): process 0 never started it there; check the address and "
        "that process 0 is running."
    )
