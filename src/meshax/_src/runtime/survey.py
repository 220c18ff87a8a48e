"""Judging a stalled job from what each process says it is doing (the coordinator's survey).

Each live process reports `watch.state()`: whether it waits in a communication, and if
so in which process set, at which sequence number, with which history hash. A job in
which every process waits, the same way in two surveys in a row, cannot progress unless
all members of some process set wait in one and the same operation (a long transfer
under way); otherwise the processes ran different operations (a desync) or wait for each
other in a cycle (a deadlock).
"""
from __future__ import annotations

from typing import Any

State = dict[str, Any]


def _members(group: str) -> list[int]:
    return [int(rank) for rank in group.split(",")]


def _signature(states: dict[int, State]) -> tuple:
    return tuple(sorted((p, s.get("what"), s.get("group"), s.get("sequence"), s.get("site"))
                        for p, s in states.items()))


def departed_peer(states: dict[int, State], gone: set[int]) -> str | None:
    """A message if some process waits in an operation with a process that has left the job."""
    for process_id, state in sorted(states.items()):
        group = state.get("group")
        if group is None:
            continue
        missing = sorted(set(_members(group)) & gone)
        if missing:
            return (f"process {missing[0]} left the job (it finished or exited) while process {process_id} "
                    f"waits for it {state['text']}")
    return None


def _some_operation_joined(states: dict[int, State]) -> bool:
    """Whether all members of some process set wait in one and the same operation: it is under way (a long
    transfer), and whoever waits for them will be released when it ends."""
    steps = {p: (s.get("group"), s.get("sequence"), s.get("chain")) for p, s in states.items()}
    for step in set(steps.values()):
        if step[0] is not None and all(steps.get(member) == step for member in _members(step[0])):
            return True
    return False


def disagreement(states: dict[int, State]) -> str | None:
    """The first process set whose waiting members reached their current operation differently."""
    by_group: dict[str, dict[int, tuple[int, int]]] = {}
    for process_id, state in states.items():
        if state.get("group") is not None:
            by_group.setdefault(state["group"], {})[process_id] = (state["sequence"], state["chain"])
    for group, steps in sorted(by_group.items()):
        if len(set(steps.values())) > 1:
            numbers = sorted({sequence for sequence, _ in steps.values()})
            where = f"communication #{numbers[0]}" if len(numbers) == 1 else "communications " + ", ".join(
                f"#{n}" for n in numbers)
            return (f"processes {sorted(steps)} ran different operations: they are at {where} among processes "
                    f"[{group}] with different histories (a skipped or extra step, or a different operation, "
                    f"shape, dtype or layout){_last_difference({p: states[p] for p in steps})}")
    return None


def _last_difference(states: dict[int, State]) -> str:
    """The latest of their recent operations (history.py) in which the processes differ, if they remember it."""
    recent = {p: s["recent"] for p, s in states.items() if s.get("recent")}
    for back in range(1, min(map(len, recent.values()), default=0) + 1):
        by_entry: dict[str, list[int]] = {}
        for process_id, entries in sorted(recent.items()):
            by_entry.setdefault(entries[-back], []).append(process_id)
        if len(by_entry) > 1:
            return "; the last operation in which they differ: " + "; ".join(
                f"processes {ps} ran {entry.replace('|', ' at ')}" for entry, ps in by_entry.items())
    return ""


class Judge:
    """Remembers the previous survey, so that only a stall seen twice in a row is judged a hang."""

    def __init__(self) -> None:
        self._previous: tuple | None = None

    def verdict(self, states: dict[int, State], live: set[int], gone: set[int],
                silent: dict[int, float] | None = None) -> tuple[str, str]:
        """('fail', message) when the job cannot progress, else ('wait', what the waiting processes wait for).
        `silent`: the live processes that did not answer, and for how long nothing was heard from them."""
        departed = departed_peer(states, gone)
        if departed is not None:
            return "fail", departed
        waiting = {p: s for p, s in states.items() if "waiting" in s}
        signature = _signature(waiting)
        stable, self._previous = signature == self._previous, signature
        if set(waiting) != live or not stable or _some_operation_joined(waiting):
            return "wait", self._busy(states, live, silent or {})
        headline = disagreement(waiting) or "every process waits in a communication that the others never join"
        return "fail", headline

    @staticmethod
    def _busy(states: dict[int, State], live: set[int], silent: dict[int, float]) -> str:
        """Which processes are not in a communication, and what they run; or that they do not answer."""
        busy = []
        for p in sorted(live):
            if p in silent:
                busy.append(f"process {p}, which has not answered for {silent[p]:.0f} s (stopped? frozen?),")
            elif p in states and "waiting" not in states[p]:
                busy.append(f"process {p} ({states[p]['text'].replace('not in a communication; ', '')})")
        return " and ".join(busy)


def report(headline: str, states: dict[int, State], num_processes: int, gone: set[int],
           silent: dict[int, float] | None = None) -> str:
    """The failure message: the headline, then one line per process (`silent`: how long nothing was heard from
    the processes that did not answer)."""
    lines = [f"collective watchdog: {headline}; what each process is doing:"]
    for process_id in range(num_processes):
        if process_id in states:
            text = states[process_id]["text"]
        elif process_id in gone:
            text = "has finished or left the job"
        elif silent and process_id in silent:
            text = (f"did not answer, and nothing was heard from it for {silent[process_id]:.0f} s (stopped, e.g. by "
                    "SIGSTOP, or stuck outside Python holding the GIL)")
        else:
            text = "did not answer (stuck outside Python, e.g. in a C call holding the GIL)"
        lines.append(f"  process {process_id}: {text}")
    return "\n".join(lines)
