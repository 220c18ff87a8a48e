"""Newline-delimited messages over a TCP socket: JSON for meshax, `cmd=...` text for PMI."""
from __future__ import annotations

import json
import socket
import threading
from typing import Any


class LineSocket:
    """A socket read and written one line at a time; writes are thread-safe."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self._buffer = b""
        self._write_lock = threading.Lock()
        self.closed = False

    def read_line(self) -> str | None:
        """The next line without its newline, or None once the peer has closed."""
        while b"\n" not in self._buffer:
            try:
                chunk = self.sock.recv(65536)
            except OSError:
                chunk = b""
            if not chunk:
                return None
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return line.decode("utf-8", errors="replace")

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
