"""The training examples with --checkpoint-dir: a job stopped (SIGTERM to `meshax launch`, which forwards it to
every process, as a preemption would) after it printed step 2 and resumed from its latest checkpoint prints
exactly the losses of an uninterrupted run."""
from __future__ import annotations

import re
import signal
import threading

import pytest

from multiprocess import PYTHON, child_env, collect, kill_group, lines_by_process, run_launcher, start

STEPS = 8
LOSS = re.compile(r"^step (\d+) loss (\S+)$")
RESUMED = re.compile(r"^resuming after step (\d+) from ")


def launch_args(example: str, n: int, k: int, *extra: str) -> list[str]:
    return [PYTHON, "-m", "meshax", "launch", "-n", str(n), "--cpu-devices", str(k), f"examples/{example}",
            "--steps", str(STEPS), *extra]


def losses(output: str) -> dict[int, str]:
    return {int(m.group(1)): m.group(2) for line in lines_by_process(output).get(0, []) if (m := LOSS.match(line))}


def run_until_step_2_then_stop(args: list[str]) -> str:
    """Start the job, and stop every process of it as soon as process 0 printed the loss of step 2."""
    proc = start(args, child_env())
    watchdog = threading.Timer(120, kill_group, (proc,))
    watchdog.start()
    seen = []
    try:
        for line in proc.stdout:
            seen.append(line)
            if line.startswith("[0] step 2 loss"):
                proc.send_signal(signal.SIGTERM)  # the launcher forwards it to every process of the job
    finally:
        watchdog.cancel()
        collect([proc], timeout=60)
    assert proc.returncode != 0, "the job finished before it was stopped"
    return "".join(seen)


@pytest.mark.parametrize("example,n,k", [("train_dp_jit.py", 2, 4), ("train_dp_shard_map.py", 1, 8),
                                         ("train_fsdp.py", 4, 2)], ids=["dp_jit-2x4", "dp_shard_map-1x8", "fsdp-4x2"])
def test_stopped_and_resumed_run_prints_the_same_losses(tmp_path, example, n, k):
    reference = run_launcher(f"examples/{example}", n, k, "--steps", str(STEPS), timeout=120)
    assert reference.returncode == 0, reference.stderr[-3000:]
    expected = losses(reference.stdout)
    assert sorted(expected) == list(range(STEPS))

    saving = ("--checkpoint-dir", str(tmp_path), "--save-every", "2")  # saved after steps 1, 3, 5, 7
    killed = run_until_step_2_then_stop(launch_args(example, n, k, *saving))
    assert "[0] step 2 loss" in killed, killed[-2000:]
    assert all(expected[s] == v for s, v in losses(killed).items()), (killed, expected)

    resumed = run_launcher(f"examples/{example}", n, k, "--steps", str(STEPS), *saving, timeout=120)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    done = [int(m.group(1)) for line in lines_by_process(resumed.stdout)[0] if (m := RESUMED.match(line))]
    assert len(done) == 1 and done[0] >= 1, resumed.stdout[-2000:]  # at least the save after step 1 committed
    again = losses(resumed.stdout)
    assert sorted(again) == list(range(done[0] + 1, STEPS)), again
    assert all(expected[s] == v for s, v in again.items()), (again, expected)
