"""How many threads a call takes (runtime/cpu_budget.py, compute_pool.py): a matrix product by its size, every call
by the cores other processes leave free (read from /proc/stat), never more than the controller's share; results
the same whatever the threads."""
from __future__ import annotations

import math

import jax
import numpy as np
import pytest
from threadpoolctl import threadpool_info

import meshax
import meshax.numpy as jnp
from meshax._src.runtime import compute_pool, cpu_budget
from meshax._src.runtime.cpu_budget import LoadReading, free_cores, idle_ticks, product_threads, threads_for_load

M = 1 << 20  # multiply-adds


@pytest.mark.parametrize("multiply_adds,rows,available,share,want", [
    (128 * 32 * 128, 128, 2, 2, 1),  # an attention score of one head: 0.5M
    (32 * 128 * 384, 32, 2, 2, 1),  # a GRU step's hidden product
    (192 ** 3, 192, 2, 2, 1),  # 7.1M: slower on 2 threads, measured
    (224 ** 3, 224, 2, 2, 1),  # 11M but fewer than 128 rows a thread
    (256 ** 3, 256, 2, 2, 2),
    (1024 * 64 * 128, 1024, 2, 2, 2),  # 8.4M over many rows: faster on 2 threads, measured
    (128 * 64 * 1024, 128, 2, 2, 1),  # the same size over 128 rows: slower on 2
    (128 * 1024 * 256, 128, 2, 2, 2),  # 33.5M: the columns split as well
    (2048 * 256 * 1024, 2048, 1, 2, 1),  # 0.5G: only the threads available
    (2048 * 784 * 1024, 2048, 1, 2, 2),  # 1.6G, the MLP's first layer: its share even under load
    (2048 * 784 * 1024, 2048, 1, 1, 1),  # never more than the share
    (2048 * 784 * 1024, 2048, 16, 16, 16),
    (24 * M, 2048, 16, 16, 6),  # one thread per 4M multiply-adds
    (16 * M, 384, 16, 16, 3),  # and per 128 rows below 32M
    (0, 0, 4, 4, 1),
])
def test_a_product_gets_threads_by_its_size_within_those_available(multiply_adds, rows, available, share, want):
    assert product_threads(multiply_adds, rows, available, share) == want


@pytest.mark.parametrize("share,free,want", [
    (2, 2.0, 2), (2, 1.97, 2), (2, 1.6, 2),  # quiet, or a little background work
    (2, 1.4, 1), (2, 1.0, 1), (2, 0.67, 1), (2, 0.0, 1),  # a busy loop beside: 1 busy core or more
    (8, 5.4, 5), (8, 40.0, 8), (4, math.inf, 4), (1, 0.1, 1),
])
def test_the_share_is_cut_to_the_free_cores_rounded(share, free, want):
    assert threads_for_load(share, free) == want


def test_free_cores_are_idle_time_plus_own_time_per_second():
    assert free_cores(idle=0.5, own=0.5, wall=0.5) == pytest.approx(2.0)
    assert free_cores(idle=0.0, own=0.33, wall=0.5) == pytest.approx(0.66)
    assert free_cores(idle=1.0, own=0.0, wall=0.0) == math.inf


STAT = b"""cpu  100 0 50 %d %d 0 0 0 0 0
cpu0 50 0 25 %d %d 0 0 0 0 0
cpu1 50 0 25 %d %d 0 0 0 0 0
cpu2 50 0 25 %d 0 0 0 0 0 0
intr 1 2 3 4 5
ctxt 99
"""


def stat(idle: tuple[int, int, int], iowait: tuple[int, int] = (0, 0)) -> bytes:
    total = sum(idle)
    return STAT % (total, sum(iowait), idle[0], iowait[0], idle[1], iowait[1], idle[2])


def test_idle_ticks_sum_idle_and_io_wait_over_this_process_cpus():
    text = stat((1000, 2000, 4000), (7, 9))
    assert idle_ticks(text, frozenset({0, 1, 2})) == 1000 + 7 + 2000 + 9 + 4000
    assert idle_ticks(text, frozenset({1})) == 2009
    assert idle_ticks(text, frozenset({5})) == 0


def test_a_load_reading_compares_two_samples_and_is_taken_once_per_interval(tmp_path, monkeypatch):
    path = tmp_path / "stat"
    path.write_bytes(stat((1000, 1000, 1000)))
    reading = LoadReading(path)
    reading._cpus, reading._tick = frozenset({0, 1}), 0.01
    assert reading.read(now=10.0) == math.inf  # one sample: nothing to compare yet
    assert reading.due == 10.0 + cpu_budget.LOAD_INTERVAL
    path.write_bytes(stat((1050, 1030, 1100)))  # 0.8 idle CPU-seconds in 1 s on CPUs 0 and 1 (2 not ours)
    assert reading.read(now=11.0) == pytest.approx(0.8, abs=0.05)  # plus this process's CPU time meanwhile
    path.write_bytes(stat((1150, 1130, 1100)))
    assert reading.read(now=12.0) == pytest.approx(2.0, abs=0.05)
    reading.restart()
    assert reading.due == 0.0


def test_without_proc_stat_no_load_is_assumed_and_it_is_not_read_again(tmp_path):
    reading = LoadReading(tmp_path / "absent")
    assert reading.read(now=1.0) == math.inf and reading.due == math.inf


def blas_threads() -> int:
    blas = [lib for lib in threadpool_info() if lib["user_api"] == "blas"]
    return max(lib["num_threads"] for lib in [lib for lib in blas if "numpy" in lib["filepath"]] or blas)


def reading(now: float, free: float) -> float:
    """What LoadReading.read does, with `free` cores read."""
    cpu_budget.load.due = now + cpu_budget.LOAD_INTERVAL
    return free


@pytest.fixture
def share_of_four(monkeypatch):
    """This controller's share set to 4 threads (not through MESHAX_CPU_THREADS: the load is read), the load reading
    replaced by `free[0]` free cores; the share and BLAS put back afterwards."""
    free = [4.0]
    monkeypatch.delenv("MESHAX_CPU_THREADS", raising=False)
    monkeypatch.setattr(cpu_budget, "host_cores", lambda: 4)
    monkeypatch.setattr(cpu_budget.load, "read", lambda now: reading(now, free[0]))
    monkeypatch.setattr(cpu_budget.load, "due", 0.0)
    monkeypatch.setattr(compute_pool, "_applied_for", None)
    yield free
    monkeypatch.undo()
    compute_pool._applied_for = None
    compute_pool.hold_budget()


def product(n: int, k: int, m: int):
    rng = np.random.default_rng(0)
    return rng.standard_normal((n, k)).astype(np.float32), rng.standard_normal((k, m)).astype(np.float32)


def test_each_product_sets_blas_to_its_threads_and_hold_budget_restores_the_share(share_of_four):
    a, b = product(512, 512, 512)  # 134M: 4 threads
    small_a, small_b = product(128, 32, 128)
    assert compute_pool.hold_budget() == 4 and blas_threads() == 4
    jnp.matmul(small_a, small_b).block_until_ready()
    assert blas_threads() == 1
    jnp.matmul(a, b).block_until_ready()
    assert blas_threads() == 4
    share_of_four[0] = 1.8  # two cores kept busy by other processes
    compute_pool.cpu_budget.load.due = 0.0
    jnp.matmul(a, b).block_until_ready()
    assert blas_threads() == 2 and compute_pool.call_threads() == 2
    share_of_four[0] = 0.3
    compute_pool.cpu_budget.load.due = 0.0
    assert compute_pool.call_threads() == 1
    jnp.matmul(a, b).block_until_ready()
    assert blas_threads() == 1
    huge_a, huge_b = product(1024, 1024, 1024)  # 1.1G multiply-adds: the whole share even so
    jnp.matmul(huge_a, huge_b).block_until_ready()
    assert blas_threads() == 4
    jnp.matmul(a, b).block_until_ready()
    assert blas_threads() == 1
    assert compute_pool.hold_budget() == 4 and blas_threads() == 4  # LAPACK's view: the whole share


def test_the_load_is_read_only_once_per_interval(share_of_four, monkeypatch):
    reads = []
    monkeypatch.setattr(cpu_budget.load, "read", lambda now: reads.append(now) or reading(now, 4.0))
    a, b = product(256, 256, 256)
    for _ in range(5):
        jnp.matmul(a, b).block_until_ready()
    assert len(reads) == 1


def test_meshax_cpu_threads_fixes_the_threads_and_the_load_is_not_read(monkeypatch):
    monkeypatch.setenv("MESHAX_CPU_THREADS", "3")
    monkeypatch.setattr(cpu_budget.load, "read", lambda now: pytest.fail("the load was read"))
    monkeypatch.setattr(cpu_budget.load, "due", 0.0)
    a, b = product(512, 512, 512)
    jnp.matmul(a, b).block_until_ready()
    assert compute_pool.call_threads() == 3 and blas_threads() == 3
    small_a, small_b = product(128, 32, 128)
    jnp.matmul(small_a, small_b).block_until_ready()
    assert blas_threads() == 1  # the size still decides below it
    monkeypatch.undo()
    compute_pool.hold_budget()


def test_inside_a_batch_products_leave_blas_at_one_thread_a_call(share_of_four):
    a, b = product(512, 512, 512)
    seen = compute_pool.run_each([lambda: (jnp.matmul(a, b).block_until_ready(), blas_threads())[1]] * 2)
    assert seen == [1, 1]
    assert blas_threads() == 4


@pytest.mark.parametrize("free", [4.0, 0.3])
def test_results_do_not_depend_on_the_threads(share_of_four, free):
    """Products over BLAS's threads split rows or columns, never the sum: the same values on 1 or 4 threads, eager,
    under jit, grad and vmap, and as JAX's."""
    share_of_four[0] = free
    a, b = product(384, 256, 512)
    batch = np.stack([a[:128, :64]] * 4), np.stack([b[:64, :128]] * 4)
    loss = lambda x, y: (x @ y).sum() ** 2 / 1e6  # noqa: E731
    for run, oracle, args in [(jnp.matmul, jax.numpy.matmul, (a, b)),
                              (meshax.jit(jnp.matmul), jax.jit(jax.numpy.matmul), (a, b)),
                              (meshax.grad(loss), jax.grad(loss), (a, b)),
                              (meshax.vmap(jnp.matmul), jax.vmap(jax.numpy.matmul), batch)]:
        np.testing.assert_allclose(np.asarray(run(*args)), np.asarray(oracle(*args)), rtol=2e-5, atol=2e-4)


@pytest.mark.parametrize("free, busy", [(4.0, False), (3.8, False), (3.7, True), (0.7, True)])
def test_the_host_is_busy_where_others_keep_a_quarter_core_of_the_share(share_of_four, free, busy):
    share_of_four[0] = free
    cpu_budget.load.due = 0.0
    assert compute_pool.host_busy() is busy


def test_with_meshax_cpu_threads_the_host_is_never_busy(monkeypatch):
    monkeypatch.setenv("MESHAX_CPU_THREADS", "2")
    monkeypatch.setattr(cpu_budget.load, "read", lambda now: pytest.fail("the load was read"))
    monkeypatch.setattr(cpu_budget.load, "due", 0.0)
    assert compute_pool.host_busy() is False
    monkeypatch.undo()
    compute_pool.hold_budget()


def test_a_call_on_a_fresh_thread_computes_as_a_compute_thread_and_raises_its_errors():
    """on_fresh_thread: another thread, subnormals flushed and NumPy's errors ignored there (a compute thread's
    state), the caller's context variables seen, the value returned, an exception raised in the caller."""
    import contextvars
    import threading

    from meshax._src.runtime import denormals

    marker = contextvars.ContextVar("marker", default="unset")
    marker.set("caller's")
    tiny = np.float32(1e-39)  # subnormal: flushed to zero where the thread flushes

    def call():
        return threading.get_ident(), marker.get(), np.geterr()["divide"], np.float32(np.divide(1.0, 0.0)), \
            float(np.multiply(tiny, np.float32(1.0)))

    with np.errstate(divide="raise"):
        ident, seen, divide, inf, product_ = compute_pool.on_fresh_thread(call)
        assert np.geterr()["divide"] == "raise"  # the caller's own state is untouched
    assert ident != threading.get_ident() and seen == "caller's"
    assert divide == "ignore" and inf == np.inf
    assert product_ == (0.0 if denormals.describe().startswith("flushed") else float(tiny))

    def failing():
        raise KeyError("inside")
    with pytest.raises(KeyError, match="inside"):
        compute_pool.on_fresh_thread(failing)


def test_long_jitted_calls_of_one_threads_work_on_a_busy_host_run_on_a_fresh_thread(monkeypatch):
    """A FastCall whose last run took FRESH_THREAD_FROM or more runs the next on a fresh thread while the host is
    busy and that run was one thread's work; on the caller's thread while the host is quiet, or after a run
    whose work took more threads (SERIAL_CPU: 0 makes every run so); the values are JAX's either way."""
    from meshax._src.transforms import jit_fast

    fresh = []
    original = compute_pool.on_fresh_thread
    monkeypatch.setattr(compute_pool, "on_fresh_thread", lambda call: fresh.append(1) or original(call))
    busy = [True]
    monkeypatch.setattr(compute_pool, "host_busy", lambda: busy[0])
    monkeypatch.setattr(jit_fast, "FRESH_THREAD_FROM", 0.0)
    a, b = product(64, 32, 16)

    def step(x, y):
        return jnp.tanh(x @ y).sum(axis=0), x * 2.0

    def oracle(x, y):
        return jax.numpy.tanh(x @ y).sum(axis=0), x * 2.0
    f, x, y = meshax.jit(step), meshax.device_put(a), meshax.device_put(b)
    # (the first call takes the general path; the FastCall runs the next ones)
    for calls, busy[0], serial_cpu, expected in ((3, True, math.inf, 2), (2, False, math.inf, 0),
                                                 (3, True, 0.0, 1)):
        monkeypatch.setattr(jit_fast, "SERIAL_CPU", serial_cpu)
        fresh.clear()
        for _ in range(calls):
            ours = f(x, y)
            for mine, theirs in zip(ours, oracle(a, b)):
                np.testing.assert_allclose(np.asarray(mine), np.asarray(theirs), rtol=2e-5, atol=2e-5)
        assert len(fresh) == expected, (calls, busy, serial_cpu, fresh)
