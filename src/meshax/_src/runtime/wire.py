"""Newline-delimited messages over a TCP socket: JSON for meshax, `cmd=...` text for PMI."""
from __future__ import annotations

import json
import socket
import threading
import time
from typing import Any


class LineTooLong(ValueError):
    """The peer sent a line longer than the connection's limit; it was not buffered whole."""


class LineSocket:
    """A socket read and written one line at a time; writes are thread-safe.

    `max_line` bounds what one line may hold: a longer one raises LineTooLong after at
    most `max_line` + one receive's worth of bytes was buffered.
    """

    def __init__(self, sock: socket.socket, max_line: int | None = None, received: bytes = b"") -> None:
        """`received`: bytes already read from `sock` (they come first)."""
        self.sock = sock
        self.max_line = max_line
        self._buffer = received
        self._write_lock = threading.Lock()
        self.closed = False

    def read_line(self, deadline: float | None = None) -> str | None:
        """The next line without its newline; None once the peer has closed or `deadline` has passed."""
        while b"\n" not in self._buffer:
            self._check_length(self._buffer)
            try:
                if deadline is not None:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        return None
                    self.sock.settimeout(left)
                chunk = self.sock.recv(65536)
            except OSError:
                chunk = b""
            if not chunk:
                return None
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        self._check_length(line)
        return line.decode("utf-8", errors="replace")

    def _check_length(self, data: bytes) -> None:
        if self.max_line is not None and len(data) > self.max_line:
            self._buffer = b""
            raise LineTooLong(f"a line of more than {self.max_line} bytes")

    @property
    def buffered(self) -> int:
        """Bytes received but not yet returned as lines."""
        return len(self._buffer)

    def write_line(self, line: str) -> bool:
        """Send one line; False when the peer is gone."""
        data = (line + "\n").encode("utf-8")
        with self._write_lock:
            try:
                self.sock.sendall(data)
                return True
            except OSError:
                return False

    def read_message(self) -> dict[str, Any] | None:
        line = self.read_line()
        return None if line is None else json.loads(line)

    def write_message(self, message: dict[str, Any]) -> bool:
        return self.write_line(json.dumps(message, separators=(",", ":")))

    def close(self) -> None:
        self.closed = True
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()


def parse_address(address: str) -> tuple[str, int]:
    """Split 'host:port' (or '[v6]:port') into host and port, with a clear error otherwise."""
    host, sep, port_text = address.rpartition(":")
    if not sep or not host or not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise ValueError(
            f"coordinator_address={address!r} is not of the form 'host:port' with a port in 1..65535, "
            "e.g. 'localhost:10000'."
        )
    return host.strip("[]"), int(port_text)
