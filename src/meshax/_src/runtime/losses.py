"""Naming the processes a job lost, all at once: a host that dies takes all its processes, whose connections to
the coordinator close within milliseconds of each other, and a partition silences them together."""
from __future__ import annotations

from typing import Any

# seconds the coordinator waits after a connection closes for the others that close with it, to name them together
DEATHS_WINDOW = 0.25
ABORT_CAUSE_WAIT = 1.0  # seconds an MPI_Abort waits for a death that caused it (the coordinator's _on_pmi_abort)


def describe(process: Any, process_id: int) -> str:
    """'process 3 (pid 123 on host-b)', or 'process 3' for a process that never registered (None)."""
    if process is None:
        return f"process {process_id}"
    return f"process {process_id} (pid {process.pid} on {process.hostname})"


def joined(names: list[str]) -> str:
    """'a', 'a and b', 'a, b and c'."""
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def died(names: list[str]) -> str:
    """The failure message for processes whose connection to the coordinator closed without a shutdown."""
    if len(names) == 1:
        return f"{names[0]} died: its connection to the coordinator closed without a shutdown."
    return f"{joined(names)} died: their connections to the coordinator closed without a shutdown."


def stopped_answering(names: list[str], seconds: float, timeout: float) -> str:
    """The failure message for processes silent past the heartbeat timeout (no names: what happened to one)."""
    what = f"stopped answering: no heartbeat for {seconds:.0f} s (heartbeat_timeout_seconds={timeout:g})"
    return f"{joined(names)} {what}." if names else what


class Losses:
    """Processes whose connection closed, gathered for DEATHS_WINDOW after the first before they are reported;
    and those that called MPI_Abort, whose connection closing is not a death."""

    def __init__(self) -> None:
        self.lost: list[int] = []
        self.aborted: set[int] = set()
        self.report_at = 0.0

    def add(self, process_id: int, now: float) -> None:
        if not self.lost:
            self.report_at = now + DEATHS_WINDOW
        self.lost.append(process_id)

    def due(self, now: float) -> bool:
        return bool(self.lost) and now >= self.report_at

    def take(self) -> list[int]:
        """The lost processes in order of id, forgotten."""
        lost, self.lost = sorted(self.lost), []
        return lost
