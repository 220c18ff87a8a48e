"""Processes that diverge end the job within seconds, on every process, naming each one's operation and line.

Desync detection is on by default: these run with default settings, as independent processes (the seeds'
style), and each process must exit non-zero on its own with the report, never print a result."""
from __future__ import annotations

import time

import numpy as np
import pytest

from multiprocess import PYTHON, child_env, collect, free_port, lines_by_process, run_launcher, start

PROGRAM = "tests/programs/desync_scenarios.py"
N = 4


def run(scenario: str, timeout: float = 60, **env: str) -> tuple[list, float]:
    address = f"127.0.0.1:{free_port()}"
    began = time.monotonic()
    procs = [
        start([PYTHON, PROGRAM, scenario],
              child_env(2, MESHAX_COORDINATOR_ADDRESS=address, MESHAX_NUM_PROCESSES=str(N), MESHAX_PROCESS_ID=str(i),
                        **env))
        for i in range(N)
    ]
    results = collect(procs, timeout=timeout)
    return results, time.monotonic() - began


# scenario -> what the report must say about process 1 (the odd one out) and about process 0
CASES = {
    "skipped_step": ("(after 4 jit calls on these processes)", "(after 5 jit calls on these processes)"),
    "dtype": ("in MPI Allreduce ('sum', (2,), '<i4')", "in MPI Allreduce ('sum', (2,), '<f4')"),
    "size": ("in MPI Allreduce ('sum', (262145,), '<f4')", "in MPI Allreduce ('sum', (262144,), '<f4')"),
    "psum_pmax": ("in MPI Allreduce ('max', (2,), '<f4')", "in MPI Allreduce ('sum', (2,), '<f4')"),
    "barrier_name": ("in barrier 'sync_global_devices:before_save'", "in barrier 'sync_global_devices:after_save'"),
    "seeds_deadlock": ("in MPI allgather", "in barrier 'sync_global_devices:step'"),
    "early_exit": ("in shutdown", "in device_put of host data"),
}


@pytest.mark.parametrize("scenario", sorted(CASES))
def test_a_diverging_process_fails_the_job_naming_every_operation(scenario):
    results, elapsed = run(scenario)
    odd, first = CASES[scenario]
    assert elapsed < 30, f"took {elapsed:.0f} s"
    for index, result in enumerate(results):
        report = result.stderr
        assert result.returncode != 0, f"process {index} exited 0:\n{result.stdout}\n{report}"
        assert "FINISHED" not in result.stdout and "SUM" not in result.stdout
        assert "collective watchdog" in report, f"process {index}:\n{report}"
        lines = {line.split(":", 1)[0].strip(): line for line in report.splitlines() if line.startswith("  process ")}
        assert odd in lines["process 1"], report
        assert first in lines["process 0"], report
        assert "desync_scenarios.py:" in lines["process 0"] and (
            "desync_scenarios.py:" in lines["process 1"] or "end of the program" in lines["process 1"])


def test_a_slow_process_is_waited_for_with_a_line_naming_it():
    results, _ = run("slow", MESHAX_STILL_WAITING_SECONDS="3")  # every 10 s by default
    for index, result in enumerate(results):
        assert result.returncode == 0, result.stderr
        assert "TOTAL 16.0" in result.stdout and "FINISHED" in result.stdout
        if index != 2:
            assert f"process {index} still waiting for process 2 (running" in result.stderr, result.stderr
            assert "desync_scenarios.py:55" in result.stderr


def test_initialize_names_the_processes_it_waits_for_every_10_s():
    address = f"localhost:{free_port()}"
    env = child_env(1, MESHAX_STILL_WAITING_SECONDS="3")  # 10 s by default
    procs = [start([PYTHON, "tests/programs/init_only.py", address, str(i), "3", "5"], env) for i in range(2)]
    for index, result in enumerate(collect(procs, timeout=60)):
        assert result.returncode != 0
        assert f"meshax: process {index} still waiting for processes [2] to start and connect" in result.stderr
        assert "processes [2] of 3 never connected" in result.stderr


# ---- correct programs are never stopped; placements that disagree are --------------------------------------------

CORRECT = "tests/programs/desync_correct.py"


def _jax_remat_grads(mesh_shape: tuple[int, int]) -> tuple[float, float]:
    """JAX's gradient sums for desync_correct.py's remat program, on 8 CPU devices of one process."""
    import jax
    import jax.numpy as jjnp
    from jax.sharding import AxisType, NamedSharding as JaxNamedSharding, PartitionSpec as JaxP

    mesh = jax.make_mesh(mesh_shape, ("data", "model"), axis_types=(AxisType.Auto,) * 2)
    X = jax.device_put(jax.random.normal(jax.random.PRNGKey(3), (16, 6)), JaxNamedSharding(mesh, JaxP("data", None)))
    w = jax.random.normal(jax.random.PRNGKey(4), (6,))
    f = lambda w: jjnp.sum(jjnp.tanh(X @ jjnp.outer(w, w)) ** 2)  # noqa: E731
    return float(jjnp.sum(jax.grad(f)(w))), float(jjnp.sum(jax.grad(jax.checkpoint(f))(w)))


@pytest.mark.parametrize("processes,devices", [(4, 2), (2, 4)], ids=["4x2", "2x4"])
def test_grad_of_checkpoint_with_a_sharded_closure_runs_as_jax(processes, devices):
    """Every process moves the gradient of its own (uncommitted) parameter to its own device: a move that is
    each process's own business, which must not enter the processes' common history."""
    g1, g2 = _jax_remat_grads((processes * devices // 2, 2))
    result = run_launcher(CORRECT, processes, devices, "remat", timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    by_process = lines_by_process(result.stdout)
    assert sorted(by_process) == list(range(processes)), result.stdout
    for index, lines in by_process.items():
        found = [line.split() for line in lines if line.startswith("GRADS ")]
        assert len(found) == 1 and int(found[0][1]) == index, lines
        ours = [float(v) for v in found[0][2:]]
        assert ours == pytest.approx([g1, g2, g2], rel=1e-5), (ours, g1, g2)


def _numpy_training(steps: int = 50) -> float:
    """The loss of the last step of desync_correct.py's training loop, in NumPy."""
    rng = np.random.default_rng(0)
    X, y = rng.standard_normal((64, 8)).astype(np.float32), rng.standard_normal((64, 4)).astype(np.float32)
    w, b = np.zeros((8, 4), np.float32), np.zeros(4, np.float32)
    for _ in range(steps):
        error = X @ w + b - y
        loss = float(np.mean(error ** 2))
        w, b = w - 0.1 * (2 * X.T @ error / error.size), b - 0.1 * (2 * error.sum(0) / error.size)
    return loss


def test_training_goes_on_while_checkpoints_save_asynchronously(tmp_path):
    """50 steps, an async save every 5 while each step's collectives run: the save thread's barriers live in a
    channel of their own, so no check fires; every checkpoint restores exactly what was saved."""
    result = run_launcher(CORRECT, 4, 2, "async_training", str(tmp_path), timeout=180)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "watchdog" not in result.stderr
    by_process = lines_by_process(result.stdout)
    expected = _numpy_training()
    for index in range(4):
        found = [line.split() for line in by_process.get(index, []) if line.startswith("RESTORED ")]
        assert len(found) == 1, by_process.get(index)
        assert int(found[0][2]) == 10 and float(found[0][3]) == pytest.approx(expected, rel=1e-4)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["final"] + [f"step{i}" for i in range(4, 50, 5)])


REVERSED = "393217,393216,262145,262144,131073,131072,1,0"  # process 1's mesh, devices of a 4x2 job reversed


@pytest.mark.parametrize("placement,operation", [("host", "device_put of host data"),
                                                 ("callback", "make_array_from_callback"),
                                                 ("reshard", "reshard")])
def test_a_mesh_in_another_device_order_fails_naming_the_process_and_the_order(placement, operation):
    result = run_launcher(CORRECT, 4, 2, f"order-{placement}", timeout=120)
    assert result.returncode != 0 and "SUM" not in result.stdout, result.stdout
    report = result.stderr
    assert "ran different operations" in report, report[-3000:]
    assert "processes [1] ran " + operation in report or f"process 1: in {operation}" in report, report[-3000:]
    assert f"on devices [{REVERSED}]" in report, report[-3000:]
    assert "on devices [0,1,131072,131073,262144,262145,393216,393217]" in report, report[-3000:]


def test_a_side_channel_thread_has_its_own_history_and_the_state_names_both_threads():
    """The save thread's barrier advances its channel's history, never the main thread's; the state report
    judges the main thread's communication and names the save thread's; when the save thread's communication
    ends, the main thread's stays current (and nothing stale remains once both end)."""
    import threading

    from meshax._src.runtime import channels, history, watch

    ranks = (90, 91)
    channel = channels.open_channel("test-side-channel", None)
    entered, release = threading.Event(), threading.Event()

    def save_thread():
        with channel.active(), watch.communicating("barrier 'save-created'", ranks, entry="barrier save-created"):
            entered.set()
            release.wait(30)

    main_before = history.history(ranks).chain
    thread = threading.Thread(target=save_thread, name="meshax-checkpoint-save")
    with watch.communicating("MPI Allreduce ('sum', (2,), '<f4')", ranks) as mine:
        thread.start()
        assert entered.wait(30)
        state = watch.state()
        assert state["what"] == mine.what and state["group"] == "90,91" and state["chain"] == mine.chain
        assert "in MPI Allreduce ('sum', (2,), '<f4')" in state["text"]
        assert "its thread 'meshax-checkpoint-save' is in barrier 'save-created'" in state["text"], state["text"]
        assert channel.histories[ranks].sequence == 1
        assert history.history(ranks).sequence == 1 and mine.chain != main_before  # the main step only
        release.set()
        thread.join(30)
        assert watch.current() is mine
    assert watch.current() is None
    assert "is in barrier" not in watch.state()["text"]


def test_a_side_channel_thread_communicates_alongside_the_main_thread():
    """MPI reductions and reshards of a thread in a side channel (its own communicators and history) interleave
    with the main thread's psums in any order on each process: no check fires and every value is right."""
    result = run_launcher(CORRECT, 4, 2, "side_channel", timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    main = 8 * sum(range(60))  # psum over 8 devices of k
    thread = sum(4 * k + 6 for k in range(40)) + sum((n := 16 * (k % 3 + 1)) * (n - 1) // 2 for k in range(40))
    by_process = lines_by_process(result.stdout)
    for index in range(4):
        found = [line.split() for line in by_process.get(index, []) if line.startswith("SIDE ")]
        assert len(found) == 1 and [float(v) for v in found[0][2:]] == [main, thread], by_process.get(index)


def test_a_prefetching_thread_that_places_host_data_is_never_stopped():
    """A user's own loader thread places batches (device_put of host data, make_array_from_process_local_data)
    while the main thread's collectives run: placements need no communication, so that thread's are neither
    checked nor recorded (they would interleave with the main thread's differently on each process)."""
    result = run_launcher(CORRECT, 4, 2, "prefetch", timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    by_process = lines_by_process(result.stdout)
    for index in range(4):
        assert f"PREFETCH {index} {32.0 * sum(range(30))}" in by_process.get(index, []), by_process.get(index)


def test_a_program_that_ends_while_its_async_save_runs_waits_for_the_commit(tmp_path):
    """The save threads of the processes that end first still sync their files (the interpreter's exit waits
    for them before it shuts thread pools down) and the checkpoint commits everywhere."""
    result = run_launcher(CORRECT, 3, 1, "end_during_save", str(tmp_path), timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ended"], list(tmp_path.iterdir())
    assert (tmp_path / "ended" / "x" / "zarr.json").exists()
